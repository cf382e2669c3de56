//! okaywal 0.3. Durability: `EntryWriter::commit` returns once the entry is
//! fsynced (`LogFile::synchronize` -> `File::sync_data`, plus a directory
//! fsync for a new file): one entry per record, committed, is a durable
//! append. Concurrent committers share an fsync (one syncing thread, the
//! others wait on a condvar for `synchronized_through`).

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use okaywal::{Configuration, Entry, EntryId, LogManager, SegmentReader, WriteAheadLog};

use crate::common::{drive, payload, BResult, Run};

/// Recovers every entry, counting chunks (records) and bytes; checkpoints are
/// acknowledged without work (the benchmark has no state to write back).
#[derive(Debug, Default, Clone)]
struct Counter {
    records: Arc<AtomicU64>,
    bytes: Arc<AtomicU64>,
}

impl LogManager for Counter {
    fn recover(&mut self, entry: &mut Entry<'_>) -> io::Result<()> {
        if let Some(chunks) = entry.read_all_chunks()? {
            self.records.fetch_add(chunks.len() as u64, Ordering::Relaxed);
            let b: usize = chunks.iter().map(Vec::len).sum();
            self.bytes.fetch_add(b as u64, Ordering::Relaxed);
        }
        Ok(())
    }

    fn checkpoint_to(&mut self, _last: EntryId, _entries: &mut SegmentReader, _wal: &WriteAheadLog) -> io::Result<()> {
        Ok(())
    }
}

/// The default configuration (1 MiB preallocated files, checkpoint after
/// 768 KiB, 16 KiB buffer).
/// One durable entry of one chunk (okaywal's `commit` syncs before it returns).
fn commit_one(log: &WriteAheadLog, data: &[u8]) -> BResult<()> {
    let mut e = log.begin_entry()?;
    e.write_chunk(data)?;
    e.commit()?;
    Ok(())
}

fn default_config(dir: &Path) -> Configuration {
    Configuration::default_for(dir)
}

/// For logs that are read back: never checkpoint (a checkpoint recycles the
/// file and its entries are no longer recovered).
fn keep_config(dir: &Path) -> Configuration {
    Configuration::default_for(dir).checkpoint_after_bytes(u64::MAX)
}

/// `threads` writers, one committed entry of one chunk per record.
pub fn durable(dir: &Path, threads: usize, size: usize, dur: Duration) -> BResult<Run> {
    let log = default_config(dir).open(Counter::default())?;
    let data = payload(size, 1);
    let (records, secs, lat_ns) = drive(threads, dur, |_, _| commit_one(&log, &data))?;
    log.shutdown()?;
    Ok(Run {
        records,
        secs,
        lat_ns,
        records_per_fsync: None,
        note: None,
    })
}

/// W8: `durable` while a thread forces a checkpoint every 10 ms (okaywal's
/// way to drop old entries; it has no truncation of the tail).
pub fn churn(dir: &Path, threads: usize, size: usize, dur: Duration) -> BResult<Run> {
    let log = default_config(dir).open(Counter::default())?;
    let data = payload(size, 1);
    let stop = AtomicBool::new(false);
    let (result, maint) = std::thread::scope(|s| {
        let maint = s.spawn(|| -> io::Result<()> {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(10));
                log.checkpoint_active()?;
            }
            Ok(())
        });
        let r = drive(threads, dur, |_, _| commit_one(&log, &data));
        stop.store(true, Ordering::Relaxed);
        (r, maint.join())
    });
    let (records, secs, lat_ns) = result?;
    match maint {
        Ok(r) => r?,
        Err(_) => return Err("okaywal maintenance thread panicked".into()),
    }
    log.shutdown()?;
    Ok(Run {
        records,
        secs,
        lat_ns,
        records_per_fsync: None,
        note: None,
    })
}

/// W4: one entry holding `n` chunks, one commit (okaywal's only durability
/// point is a commit, and every commit fsyncs).
pub fn bulk(dir: &Path, n: u64, size: usize) -> BResult<Run> {
    let log = keep_config(dir).open(Counter::default())?;
    let data = payload(size, 1);
    let start = Instant::now();
    let mut e = log.begin_entry()?;
    for _ in 0..n {
        e.write_chunk(&data)?;
    }
    e.commit()?;
    let secs = start.elapsed().as_secs_f64();
    log.shutdown()?;
    Ok(Run {
        records: n,
        secs,
        lat_ns: Vec::new(),
        records_per_fsync: Some(n as f64),
        note: None,
    })
}

/// W6: reopen; okaywal hands every entry to `LogManager::recover`, which
/// reads (and crc-checks) all chunks. Timed: the open.
pub fn read_all(dir: &Path) -> BResult<Run> {
    let counter = Counter::default();
    let start = Instant::now();
    let log = keep_config(dir).open(counter.clone())?;
    let secs = start.elapsed().as_secs_f64();
    log.shutdown()?;
    Ok(Run {
        records: counter.records.load(Ordering::Relaxed),
        secs,
        lat_ns: Vec::new(),
        records_per_fsync: None,
        note: None,
    })
}

/// W7: reopen and commit one entry; seconds until the commit returned.
pub fn reopen_append(dir: &Path) -> BResult<f64> {
    let start = Instant::now();
    let log = keep_config(dir).open(Counter::default())?;
    let mut e = log.begin_entry()?;
    e.write_chunk(&payload(256, 2))?;
    e.commit()?;
    let secs = start.elapsed().as_secs_f64();
    log.shutdown()?;
    Ok(secs)
}
