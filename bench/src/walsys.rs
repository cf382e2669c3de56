//! This WAL (`wal::Wal` over `simfs::OsFs`). Writers are OS threads calling
//! `futures::executor::block_on(wal.append(..))` on a shared `Arc<Wal>`.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::executor::block_on;
use simfs::OsFs;
use wal::{Options, SyncPolicy, Wal};

use crate::common::{drive, payload, BResult, Run};

/// Which `OsFs` and which alignment a variant uses.
#[derive(Clone, Copy, Debug)]
pub struct Variant {
    /// `OsFs::inline()` (syncs on the calling thread) instead of `OsFs::new()`.
    pub inline: bool,
    /// `Options::durable_alignment_bytes`.
    pub align: u64,
}

impl Variant {
    /// The defaults: `OsFs::new()`, 4096-byte alignment.
    pub const DEFAULT: Variant = Variant {
        inline: false,
        align: 4096,
    };

    fn fs(self) -> OsFs {
        if self.inline {
            OsFs::inline()
        } else {
            OsFs::new()
        }
    }

    fn opts(self) -> Options {
        Options::default().durable_alignment_bytes(self.align)
    }
}

fn open(dir: &Path, v: Variant, opts: Options) -> BResult<Wal<OsFs>> {
    Ok(block_on(Wal::open(v.fs(), dir, opts))?)
}

fn close(wal: Arc<Wal<OsFs>>) -> BResult<()> {
    match Arc::try_unwrap(wal) {
        Ok(w) => Ok(block_on(w.close())?),
        Err(_) => Err("wal still shared after the writers finished".into()),
    }
}

/// `threads` writers appending `size`-byte records under `SyncPolicy::Always`,
/// or (`batched`) under [`batched_policy`].
pub fn durable(dir: &Path, v: Variant, batched: bool, threads: usize, size: usize, dur: Duration) -> BResult<Run> {
    let opts = if batched {
        v.opts().sync_policy(batched_policy())
    } else {
        v.opts()
    };
    let wal = Arc::new(open(dir, v, opts)?);
    let data = payload(size, 1);
    let (records, secs, lat_ns) = drive(threads, dur, |_, _| {
        block_on(wal.append(data.clone()))?;
        Ok(())
    })?;
    let rpf = block_on(wal.stats()).records_per_fsync();
    close(wal)?;
    Ok(Run {
        records,
        secs,
        lat_ns,
        records_per_fsync: Some(rpf),
        note: None,
    })
}

/// `SyncPolicy::Batched` as a thread-per-writer user would set it up: wait
/// up to 200 µs for up to 64 appends, on a timer thread per wait (the
/// writers' `block_on` has no timer of its own; a blocking sleep would not
/// let the wait end early when every writer has joined).
pub fn batched_policy() -> SyncPolicy {
    let sleeper = wal::Sleeper::new(|d| {
        let (tx, rx) = futures::channel::oneshot::channel::<()>();
        std::thread::spawn(move || {
            std::thread::sleep(d);
            let _ = tx.send(());
        });
        Box::pin(async move {
            let _ = rx.await;
        })
    });
    SyncPolicy::batched(Duration::from_micros(200), 64, sleeper)
}

/// W8: `durable` while a maintenance thread prunes (keeping about
/// 1,000 records) every 10 ms and truncates the last 16 records every
/// fourth tick. Segments of `segment_bytes` so that pruning has work.
pub fn churn(dir: &Path, threads: usize, size: usize, dur: Duration, segment_bytes: u64) -> BResult<Run> {
    let v = Variant::DEFAULT;
    let opts = v.opts().segment_size_bytes(segment_bytes);
    let wal = Arc::new(open(dir, v, opts)?);
    let data = payload(size, 1);
    let stop = AtomicBool::new(false);
    let keep = 1_000u64;
    let (result, maint) = std::thread::scope(|s| {
        let maint = s.spawn(|| -> BResult<(u64, u64, Duration)> {
            let (mut ticks, mut calls) = (0u64, 0u64);
            let mut slowest = Duration::ZERO;
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(10));
                ticks += 1;
                let next = wal.next_index();
                if next > keep {
                    let t0 = Instant::now();
                    block_on(wal.prune_through(next - keep))?;
                    slowest = slowest.max(t0.elapsed());
                    calls += 1;
                }
                if ticks % 4 == 0 {
                    if let Some(last) = wal.last_index() {
                        if last >= wal.first_index() + 16 {
                            let t0 = Instant::now();
                            block_on(wal.truncate_after(last - 16))?;
                            slowest = slowest.max(t0.elapsed());
                            calls += 1;
                        }
                    }
                }
            }
            Ok((ticks, calls, slowest))
        });
        let r = drive(threads, dur, |_, _| {
            block_on(wal.append(data.clone()))?;
            Ok(())
        });
        stop.store(true, Ordering::Relaxed);
        (r, maint.join())
    });
    let (records, secs, lat_ns) = result?;
    let (ticks, calls, slowest) = match maint {
        Ok(r) => r?,
        Err(_) => return Err("maintenance thread panicked".into()),
    };
    let stats = block_on(wal.stats());
    let rpf = stats.records_per_fsync();
    let note = format!(
        "{ticks} ticks, {calls} prune/truncate calls (slowest {:.1} ms), {} prunes, {} truncations, {} rotations",
        slowest.as_secs_f64() * 1e3,
        stats.prunes,
        stats.truncations,
        stats.rotations
    );
    close(wal)?;
    Ok(Run {
        records,
        secs,
        lat_ns,
        records_per_fsync: Some(rpf),
        note: Some(note),
    })
}

/// W4: `n` records under `SyncPolicy::Manual`, `batch` per call (`append`
/// when 1, else `append_batch`), then one `sync`. Timed: appends and sync.
/// `write_buffer_bytes`: `Options::write_buffer_bytes` (0: off).
pub fn bulk(dir: &Path, n: u64, size: usize, batch: usize, write_buffer_bytes: usize) -> BResult<Run> {
    let opts = Options::default()
        .sync_policy(SyncPolicy::Manual)
        .write_buffer_bytes(write_buffer_bytes);
    let wal = open(dir, Variant::DEFAULT, opts)?;
    let data = payload(size, 1);
    let start = Instant::now();
    block_on(async {
        let mut done = 0u64;
        while done < n {
            if batch <= 1 {
                wal.append(data.clone()).await?;
                done += 1;
            } else {
                let k = (n - done).min(batch as u64);
                wal.append_batch((0..k).map(|_| data.clone()).collect()).await?;
                done += k;
            }
        }
        wal.sync().await
    })?;
    let secs = start.elapsed().as_secs_f64();
    let rpf = block_on(wal.stats()).records_per_fsync();
    block_on(wal.close())?;
    Ok(Run {
        records: n,
        secs,
        lat_ns: Vec::new(),
        records_per_fsync: Some(rpf),
        note: None,
    })
}

/// W6: open and iterate every record in order. Timed: open and read.
pub fn read_all(dir: &Path) -> BResult<Run> {
    let start = Instant::now();
    let wal = open(dir, Variant::DEFAULT, Options::default())?;
    let mut records = 0u64;
    let mut bytes = 0u64;
    block_on(async {
        let mut it = wal.iter_from(wal.first_index())?;
        while let Some(r) = it.next().await {
            let (_, rec) = r?;
            records += 1;
            bytes += rec.len() as u64;
        }
        Ok::<_, wal::Error>(())
    })?;
    let secs = start.elapsed().as_secs_f64();
    std::hint::black_box(bytes);
    block_on(wal.close())?;
    Ok(Run {
        records,
        secs,
        lat_ns: Vec::new(),
        records_per_fsync: None,
        note: None,
    })
}

/// W7: open a cleanly closed log and append one durable record. Returns the
/// seconds until that append returned and the number of segments.
pub fn reopen_append(dir: &Path) -> BResult<(f64, u64)> {
    let start = Instant::now();
    let wal = open(dir, Variant::DEFAULT, Options::default())?;
    block_on(wal.append(payload(256, 2)))?;
    let secs = start.elapsed().as_secs_f64();
    let segments = block_on(wal.segments()).len() as u64;
    block_on(wal.close())?;
    Ok((secs, segments))
}

/// W7's fsync count: opens the cleanly closed log at `dir` on a filesystem
/// that counts fsyncs, then appends one durable record. Returns the file
/// and directory fsyncs of the open alone, then of the append.
pub fn open_fsyncs(dir: &Path) -> BResult<[(u64, u64); 2]> {
    use crate::counting::{CountingFs, Counts};
    let counts = std::sync::Arc::new(Counts::default());
    let fs = CountingFs::new(OsFs::new(), counts.clone());
    let wal = block_on(Wal::open(fs, dir, Options::default()))?;
    let opened = counts.get();
    block_on(wal.append(payload(256, 2)))?;
    let (f, d) = counts.get();
    block_on(wal.close())?;
    Ok([opened, (f - opened.0, d - opened.1)])
}

/// Builds a cleanly closed log of about `bytes` bytes in segments of
/// `segment_bytes` (64 KiB records, batches of 16, one sync at the end).
pub fn build(dir: &Path, bytes: u64, segment_bytes: u64) -> BResult<u64> {
    let opts = Options::default()
        .sync_policy(SyncPolicy::Manual)
        .segment_size_bytes(segment_bytes);
    let wal = open(dir, Variant::DEFAULT, opts)?;
    let data = payload(64 << 10, 3);
    let n = bytes / data.len() as u64;
    block_on(async {
        let mut done = 0;
        while done < n {
            let k = (n - done).min(16);
            wal.append_batch((0..k).map(|_| data.clone()).collect()).await?;
            done += k;
        }
        wal.sync().await
    })?;
    let segments = block_on(wal.segments()).len() as u64;
    block_on(wal.close())?;
    Ok(segments)
}
