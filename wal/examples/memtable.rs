//! A small key-value store built the way LSM databases use a WAL (seed 003):
//! every put goes to the WAL, then to an in-memory memtable; when the WAL
//! seals a segment (rotation by record count or by size) the store flushes
//! the memtable to a sorted table file and prunes the WAL up to what the
//! tables now hold. After a crash it loads the tables and replays the rest
//! of the WAL.
//!
//! Each WAL record carries its own sequence number, the WAL index, embedded
//! by `append_with` (seed 001: the number must be known before the record is
//! written), and replay checks it.
//!
//! Runs on SimFs, so the power loss is real and the run deterministic:
//! `cargo run -p wal --example memtable`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use simfs::{CrashKind, Fs, OpenOptions, SimFs};
use wal::{Options, SealCause, SealEvents, SealNotice, Wal};

const WAL_DIR: &str = "/db/wal";
const TABLE_DIR: &str = "/db/tables";
/// Records per WAL segment before it rotates by count.
const SEGMENT_RECORDS: u64 = 40;
/// Bytes per WAL segment before it rotates by size. Each durable append
/// takes at least one 4 KiB unit, so 40 small puts fit; a segment with a
/// large value in it fills up by size first.
const SEGMENT_BYTES: u64 = 192 << 10;
/// Payload bytes per page of the replay's range reads.
const REPLAY_PAGE_BYTES: usize = 64 << 10;

type Map = BTreeMap<Vec<u8>, Vec<u8>>;
type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// A WAL record: `index (u64) | key length (u32) | key | value`, all little-endian.
fn encode(index: u64, key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut r = Vec::with_capacity(12 + key.len() + value.len());
    r.extend_from_slice(&index.to_le_bytes());
    r.extend_from_slice(&(key.len() as u32).to_le_bytes());
    r.extend_from_slice(key);
    r.extend_from_slice(value);
    r
}

/// `(embedded index, key, value)`, or `None` for a record this store never writes.
fn decode(r: &[u8]) -> Option<(u64, &[u8], &[u8])> {
    let index = u64::from_le_bytes(r.get(0..8)?.try_into().ok()?);
    let klen = u32::from_le_bytes(r.get(8..12)?.try_into().ok()?) as usize;
    let key = r.get(12..12 + klen)?;
    Some((index, key, &r[12 + klen..]))
}

/// A sorted table: `count | (klen, vlen, key, value)* | crc32` (u32s little-endian).
fn encode_table(map: &Map) -> Vec<u8> {
    let mut b = (map.len() as u32).to_le_bytes().to_vec();
    for (k, v) in map {
        b.extend_from_slice(&(k.len() as u32).to_le_bytes());
        b.extend_from_slice(&(v.len() as u32).to_le_bytes());
        b.extend_from_slice(k);
        b.extend_from_slice(v);
    }
    let crc = crc32fast::hash(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

fn decode_table(b: &[u8], path: &Path) -> Res<Map> {
    let bad = || format!("{}: not a table this store wrote", path.display());
    let (body, crc) = b.split_at(b.len().checked_sub(4).ok_or_else(bad)?);
    if crc32fast::hash(body).to_le_bytes() != crc {
        return Err(bad().into());
    }
    let u32_at = |at: usize| -> Res<usize> {
        let bytes: [u8; 4] = body.get(at..at + 4).ok_or_else(bad)?.try_into()?;
        Ok(u32::from_le_bytes(bytes) as usize)
    };
    let mut map = Map::new();
    let mut at = 4;
    for _ in 0..u32_at(0)? {
        let (klen, vlen) = (u32_at(at)?, u32_at(at + 4)?);
        let key = body.get(at + 8..at + 8 + klen).ok_or_else(bad)?;
        let value = body.get(at + 8 + klen..at + 8 + klen + vlen).ok_or_else(bad)?;
        map.insert(key.to_vec(), value.to_vec());
        at += 8 + klen + vlen;
    }
    Ok(map)
}

/// The table holding every put through WAL index `through`.
fn table_path(through: u64) -> PathBuf {
    Path::new(TABLE_DIR).join(format!("table-{through:020}.sst"))
}

struct Store {
    fs: SimFs,
    wal: Wal<SimFs>,
    seals: SealEvents,
    memtable: Map,
    /// Flushed tables by the last WAL index each holds, oldest first.
    tables: BTreeMap<u64, Map>,
    /// Segments sealed by count and by size.
    sealed_by_count: u64,
    sealed_by_size: u64,
}

impl Store {
    /// Opens the store: loads the tables, opens the WAL and replays what
    /// the tables do not hold yet. Returns it and the records replayed.
    async fn open(fs: SimFs) -> Res<(Store, u64)> {
        fs.create_dir_all(Path::new(TABLE_DIR)).await?;
        let mut tables = BTreeMap::new();
        for entry in fs.read_dir(Path::new(TABLE_DIR)).await? {
            let Some(through) = entry.name.strip_prefix("table-").and_then(|n| n.strip_suffix(".sst")) else {
                continue; // a temporary file of an interrupted flush
            };
            let path = Path::new(TABLE_DIR).join(&entry.name);
            let file = fs.open(&path, OpenOptions::new().read(true)).await?;
            let mut b = vec![0; fs.metadata(&path).await?.len as usize];
            simfs::File::read_exact_at(&file, &mut b, 0).await?;
            tables.insert(through.parse::<u64>()?, decode_table(&b, &path)?);
        }
        let opts = Options::default()
            .segment_max_records(SEGMENT_RECORDS)
            .segment_size_bytes(SEGMENT_BYTES);
        let wal = Wal::open(fs.clone(), Path::new(WAL_DIR), opts).await?;
        let seals = wal.seal_events()?;
        let mut store = Store {
            fs,
            wal,
            seals,
            memtable: Map::new(),
            tables,
            sealed_by_count: 0,
            sealed_by_size: 0,
        };
        let replayed = store.replay().await?;
        Ok((store, replayed))
    }

    /// Applies the WAL records above the newest table to the memtable, in
    /// pages of bounded size.
    async fn replay(&mut self) -> Res<u64> {
        let mut from = self.tables.keys().next_back().map_or(0, |t| t + 1);
        let mut replayed = 0;
        loop {
            let page = self.wal.read_range(from.., REPLAY_PAGE_BYTES).await?;
            let Some(&(last, _)) = page.last() else { break };
            for (index, record) in &page {
                let (embedded, key, value) = decode(record).ok_or("a record this store never wrote")?;
                if embedded != *index {
                    return Err(format!("record at {index} says it is {embedded}").into());
                }
                self.memtable.insert(key.to_vec(), value.to_vec());
                replayed += 1;
            }
            from = last + 1;
        }
        Ok(replayed)
    }

    async fn put(&mut self, key: &[u8], value: &[u8]) -> Res<u64> {
        let index = self.wal.append_with(|index| encode(index, key, value)).await?;
        self.memtable.insert(key.to_vec(), value.to_vec());
        while let Some(notice) = self.seals.try_next() {
            match notice {
                SealNotice::Sealed(e) if e.cause == SealCause::Rotation => {
                    if e.last_index + 1 - e.first_index == SEGMENT_RECORDS {
                        self.sealed_by_count += 1;
                    } else {
                        self.sealed_by_size += 1;
                    }
                    self.flush(index).await?;
                }
                // A missed notice only delays a flush to the next one.
                _ => {}
            }
        }
        Ok(index)
    }

    /// Writes the memtable (every put through `through`) as a table (temp
    /// file, fsync, rename, directory fsync), then prunes the WAL through it.
    async fn flush(&mut self, through: u64) -> Res<()> {
        let table = std::mem::take(&mut self.memtable);
        let tmp = Path::new(TABLE_DIR).join("flush.tmp");
        let file = self
            .fs
            .open(&tmp, OpenOptions::new().write(true).create(true).truncate(true))
            .await?;
        simfs::File::write_all_at(&file, &encode_table(&table), 0).await?;
        simfs::File::sync_data(&file).await?;
        self.fs.rename(&tmp, &table_path(through)).await?;
        self.fs.sync_dir(Path::new(TABLE_DIR)).await?;
        self.tables.insert(through, table);
        // Only now may the WAL forget these records (whole segments go).
        self.wal.prune_through(through).await?;
        Ok(())
    }

    fn get(&self, key: &[u8]) -> Option<&Vec<u8>> {
        self.memtable
            .get(key)
            .or_else(|| self.tables.values().rev().find_map(|t| t.get(key)))
    }
}

fn main() -> Res<()> {
    futures::executor::block_on(async {
        let fs = SimFs::new(2027);
        let (mut store, _) = Store::open(fs.clone()).await?;
        let mut model = Map::new();
        let puts = 1000u64;
        for i in 0..puts {
            let key = format!("key-{:03}", (i * 7919) % 300).into_bytes();
            // Values of 10 to 310 bytes, and every 60th of 64 KiB: the
            // segments holding one fill up by size before their count.
            let pad = if i % 60 == 59 {
                64 << 10
            } else {
                ((i * 37) % 300) as usize
            };
            let value = format!("value {i} {}", "x".repeat(pad)).into_bytes();
            store.put(&key, &value).await?;
            model.insert(key, value);
        }
        println!(
            "wrote {puts} puts; segments sealed: {} by count, {} by size; tables flushed: {}; WAL first index now {}",
            store.sealed_by_count,
            store.sealed_by_size,
            store.tables.len(),
            store.wal.first_index()
        );
        if store.sealed_by_count == 0 || store.sealed_by_size == 0 {
            return Err("both rotation causes should have happened".into());
        }
        // No clean close: the process dies and the machine loses power.
        drop(store);
        fs.crash(CrashKind::PowerLoss);
        let (store, replayed) = Store::open(fs.clone()).await?;
        println!(
            "after the power loss: {} tables loaded, {replayed} WAL records replayed from index {}",
            store.tables.len(),
            store
                .wal
                .first_index()
                .max(store.tables.keys().next_back().map_or(0, |t| t + 1))
        );
        let mut checked = 0;
        for (key, value) in &model {
            if store.get(key) != Some(value) {
                return Err(format!("{}: lost or stale after recovery", String::from_utf8_lossy(key)).into());
            }
            checked += 1;
        }
        println!("checked {checked} keys: every acknowledged put is there with its latest value");
        store.wal.close().await?;
        Ok(())
    })
}
