//! raft-engine 0.4. Durability: `Engine::write(&mut batch, true)` appends the
//! batch and, in the write group's leader, calls `pipe_log.sync` (fdatasync)
//! before any member returns; concurrent writers share that fsync. Note that
//! `Engine::sync()` writes an empty batch and `write` returns early for an
//! empty batch, so it does *not* fsync: every durable append here is a
//! `LogBatch` with the entry, written with `sync = true`.
//!
//! Each writer thread is its own Raft group (region), as in TiKV; entries are
//! a minimal protobuf message (index + data). LZ4 batch compression is off
//! (`batch_compression_threshold = 0`) so every system writes the same bytes.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use protobuf::{CachedSize, CodedInputStream, CodedOutputStream, Message, ProtobufResult, UnknownFields};
use raft_engine::{Config, Engine, LogBatch, MessageExt, ReadableSize};

use crate::common::{drive, payload, BResult, Run};

/// A log entry: protobuf message `{ uint64 index = 1; bytes data = 2; }`.
#[derive(Clone, Debug, Default)]
pub struct Rec {
    index: u64,
    data: Vec<u8>,
    unknown: UnknownFields,
    cached: CachedSize,
}

impl PartialEq for Rec {
    fn eq(&self, o: &Self) -> bool {
        self.index == o.index && self.data == o.data
    }
}

impl protobuf::Clear for Rec {
    fn clear(&mut self) {
        self.index = 0;
        self.data.clear();
        self.unknown.clear();
    }
}

impl Message for Rec {
    fn descriptor(&self) -> &'static protobuf::reflect::MessageDescriptor {
        // Lite message: no reflection (raft-engine never asks for it).
        Self::descriptor_static()
    }

    fn is_initialized(&self) -> bool {
        true
    }

    fn merge_from(&mut self, is: &mut CodedInputStream<'_>) -> ProtobufResult<()> {
        while !is.eof()? {
            let (field, wire) = is.read_tag_unpack()?;
            match field {
                1 => self.index = is.read_uint64()?,
                2 => is.read_bytes_into(&mut self.data)?,
                _ => protobuf::rt::read_unknown_or_skip_group(field, wire, is, &mut self.unknown)?,
            }
        }
        Ok(())
    }

    fn write_to_with_cached_sizes(&self, os: &mut CodedOutputStream<'_>) -> ProtobufResult<()> {
        if self.index != 0 {
            os.write_uint64(1, self.index)?;
        }
        if !self.data.is_empty() {
            os.write_bytes(2, &self.data)?;
        }
        os.write_unknown_fields(&self.unknown)
    }

    fn compute_size(&self) -> u32 {
        let mut n = 0;
        if self.index != 0 {
            n += 1 + protobuf::rt::compute_raw_varint64_size(self.index);
        }
        if !self.data.is_empty() {
            n += protobuf::rt::bytes_size(2, &self.data);
        }
        n += protobuf::rt::unknown_fields_size(&self.unknown);
        self.cached.set(n);
        n
    }

    fn get_cached_size(&self) -> u32 {
        self.cached.get()
    }

    fn get_unknown_fields(&self) -> &UnknownFields {
        &self.unknown
    }

    fn mut_unknown_fields(&mut self) -> &mut UnknownFields {
        &mut self.unknown
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn new() -> Self {
        Rec::default()
    }

    fn default_instance() -> &'static Self {
        static DEFAULT: OnceLock<Rec> = OnceLock::new();
        DEFAULT.get_or_init(Rec::default)
    }
}

/// The `MessageExt` tying [`Rec`] to raft-engine.
pub struct RecExt;

impl MessageExt for RecExt {
    type Entry = Rec;

    fn index(e: &Rec) -> u64 {
        e.index
    }
}

fn config(dir: &Path) -> Config {
    Config {
        dir: dir.to_string_lossy().into_owned(),
        batch_compression_threshold: ReadableSize(0),
        ..Config::default()
    }
}

fn open(cfg: Config) -> BResult<Engine> {
    Ok(Engine::open(cfg)?)
}

fn write_one(engine: &Engine, region: u64, index: u64, data: &[u8], sync: bool) -> BResult<()> {
    let mut batch = LogBatch::with_capacity(1);
    let rec = Rec {
        index,
        data: data.to_vec(),
        ..Rec::default()
    };
    batch.add_entries::<RecExt>(region, &[rec])?;
    engine.write(&mut batch, sync)?;
    Ok(())
}

/// `threads` writers (one region each), one synced write per record.
pub fn durable(dir: &Path, threads: usize, size: usize, dur: Duration) -> BResult<Run> {
    let engine = open(config(dir))?;
    let data = payload(size, 1);
    let (records, secs, lat_ns) = drive(threads, dur, |t, seq| {
        write_one(&engine, t as u64 + 1, seq + 1, &data, true)
    })?;
    drop(engine);
    Ok(Run {
        records,
        secs,
        lat_ns,
        records_per_fsync: None,
        note: None,
    })
}

/// W8: `durable` while a thread compacts every region to keep about 1,000
/// entries each and purges expired files every 10 ms (4 MiB files).
pub fn churn(dir: &Path, threads: usize, size: usize, dur: Duration) -> BResult<Run> {
    let cfg = Config {
        target_file_size: ReadableSize::mb(4),
        purge_threshold: ReadableSize::mb(8),
        ..config(dir)
    };
    let engine = Arc::new(open(cfg)?);
    let data = payload(size, 1);
    let stop = AtomicBool::new(false);
    let (result, maint) = std::thread::scope(|s| {
        let maint = s.spawn(|| -> BResult<()> {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(10));
                for region in 1..=threads as u64 {
                    if let Some(last) = engine.last_index(region) {
                        engine.compact_to(region, last.saturating_sub(1000));
                    }
                }
                engine.purge_expired_files()?;
            }
            Ok(())
        });
        let r = drive(threads, dur, |t, seq| {
            write_one(&engine, t as u64 + 1, seq + 1, &data, true)
        });
        stop.store(true, Ordering::Relaxed);
        (r, maint.join())
    });
    let (records, secs, lat_ns) = result?;
    match maint {
        Ok(r) => r?,
        Err(_) => return Err("raft-engine maintenance thread panicked".into()),
    }
    Ok(Run {
        records,
        secs,
        lat_ns,
        records_per_fsync: None,
        note: None,
    })
}

/// W4: `n` entries of region 1, one unsynced write each, the last synced.
pub fn bulk(dir: &Path, n: u64, size: usize) -> BResult<Run> {
    let engine = open(config(dir))?;
    let data = payload(size, 1);
    let start = Instant::now();
    for i in 1..=n {
        write_one(&engine, 1, i, &data, i == n)?;
    }
    let secs = start.elapsed().as_secs_f64();
    drop(engine);
    Ok(Run {
        records: n,
        secs,
        lat_ns: Vec::new(),
        records_per_fsync: Some(n as f64),
        note: None,
    })
}

/// W6: open (recovery scans the files and rebuilds the index) and fetch
/// every entry of region 1 in order, 4096 at a time. Timed: both.
pub fn read_all(dir: &Path) -> BResult<Run> {
    let start = Instant::now();
    let engine = open(config(dir))?;
    let (first, last) = match (engine.first_index(1), engine.last_index(1)) {
        (Some(f), Some(l)) => (f, l),
        _ => return Err("raft-engine: region 1 is empty".into()),
    };
    let mut records = 0u64;
    let mut bytes = 0u64;
    let mut buf = Vec::with_capacity(4096);
    let mut i = first;
    while i <= last {
        let end = (i + 4096).min(last + 1);
        buf.clear();
        engine.fetch_entries_to::<RecExt>(1, i, end, None, &mut buf)?;
        records += buf.len() as u64;
        bytes += buf.iter().map(|r| r.data.len() as u64).sum::<u64>();
        i = end;
    }
    let secs = start.elapsed().as_secs_f64();
    std::hint::black_box(bytes);
    Ok(Run {
        records,
        secs,
        lat_ns: Vec::new(),
        records_per_fsync: None,
        note: None,
    })
}

/// W7: reopen and write one synced entry; seconds until it returned.
pub fn reopen_append(dir: &Path) -> BResult<f64> {
    let start = Instant::now();
    let engine = open(config(dir))?;
    let next = engine.last_index(1).map_or(1, |l| l + 1);
    write_one(&engine, 1, next, &payload(256, 2), true)?;
    Ok(start.elapsed().as_secs_f64())
}
