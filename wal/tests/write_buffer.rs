//! The user-space write buffer (`Options::write_buffer_bytes`, Manual only):
//! buffered records are readable through the `Wal` (reads and iterators
//! write the buffer first), `sync` makes them durable, every lifecycle
//! operation writes the buffer first, a crash before `sync` loses at most a
//! suffix (never a gap), and a failed write of the buffer stops the WAL.
//!
//! Iterating over buffered records needs `WalIter::step` to call
//! `Inner::ensure_written(index)` before it reads a record at or above
//! `State::written_next()` (see `docs/ARCHITECTURE.md` §2.1): the tests that
//! iterate over the buffer (`iterators_see_buffered_records`, and `collect`
//! with records still buffered) check that.
#![allow(clippy::unwrap_used)]

mod common;

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use common::*;
use futures::executor::block_on;
use simfs::{CrashKind, FaultConfig, OsFs, SimConfig, SimFs};
use wal::{CompactionOptions, Error, Options, SyncPolicy, Wal};

fn buffered(bytes: usize) -> Options {
    Options::default()
        .sync_policy(SyncPolicy::Manual)
        .write_buffer_bytes(bytes)
}

/// The index one past the last record in the segment files (not buffered).
fn written_next(wal: &Wal<SimFs>) -> u64 {
    wal.segment_files()
        .last()
        .map_or(wal.first_index(), |s| s.2.map_or(s.1, |l| l + 1))
}

#[test]
fn the_buffer_needs_the_manual_policy_and_a_bounded_size() {
    assert!(buffered(1 << 20).validate().is_ok());
    assert!(buffered(64 << 20).validate().is_ok());
    assert!(matches!(
        buffered((64 << 20) + 1).validate(),
        Err(Error::InvalidArgument(_))
    ));
    for policy in [SyncPolicy::Always, SyncPolicy::default()] {
        let o = Options::default().sync_policy(policy).write_buffer_bytes(4096);
        assert!(matches!(o.validate(), Err(Error::InvalidArgument(_))));
    }
    let batched = Options::default()
        .sync_policy(SyncPolicy::batched(
            std::time::Duration::from_micros(10),
            4,
            wal::Sleeper::new(|_| Box::pin(async {})),
        ))
        .write_buffer_bytes(4096);
    assert!(batched.validate().is_err());
}

#[test]
fn buffered_records_are_readable_before_they_are_written() {
    block_on(async {
        let fs = SimFs::new(1);
        let wal = open(&fs, buffered(1 << 20)).await.unwrap();
        for i in 0..10 {
            assert_eq!(wal.append(payload(i, 50)).await.unwrap(), i);
        }
        assert_eq!(
            wal.append_batch((10..13).map(|i| payload(i, 20)).collect())
                .await
                .unwrap(),
            10
        );
        // Acknowledged and counted, but nothing is in a segment file yet.
        assert_eq!(wal.next_index(), 13);
        assert_eq!(wal.last_index(), Some(12));
        assert_eq!(written_next(&wal), 0);
        assert_eq!(wal.stats().await.buffer_flushes, 0);
        assert_eq!(wal.durable_next(), 0);
        // A read of a buffered record writes the buffer first.
        assert_eq!(wal.read(7).await.unwrap(), payload(7, 50));
        assert_eq!(written_next(&wal), 13);
        let stats = wal.stats().await;
        assert_eq!((stats.buffer_flushes, stats.writes), (1, 1));
        assert_eq!(wal.durable_next(), 0, "written, not synced");
        // Records written before stay readable; no second write for them.
        assert_eq!(wal.read(12).await.unwrap(), payload(12, 20));
        assert_eq!(wal.stats().await.buffer_flushes, 1);
        // More buffered records, read back one by one.
        for i in 13..20 {
            wal.append(payload(i, 50)).await.unwrap();
            assert_eq!(wal.read(i).await.unwrap(), payload(i, 50));
        }
        // Out of range stays out of range (and writes nothing).
        wal.append(payload(20, 50)).await.unwrap();
        let flushes = wal.stats().await.buffer_flushes;
        assert!(matches!(wal.read(21).await, Err(Error::OutOfRange { .. })));
        assert_eq!(wal.stats().await.buffer_flushes, flushes);
    });
}

#[test]
fn iterators_see_buffered_records() {
    block_on(async {
        let fs = SimFs::new(2);
        let wal = open(&fs, buffered(1 << 20)).await.unwrap();
        for i in 0..5 {
            wal.append(payload(i, 40)).await.unwrap();
        }
        let mut it = wal.iter_from(0).unwrap();
        for i in 0..5 {
            assert_eq!(it.next().await.unwrap().unwrap(), (i, payload(i, 40)));
        }
        assert!(it.next().await.is_none());
        // A caught-up iterator sees records buffered after it caught up.
        for i in 5..9 {
            wal.append(payload(i, 40)).await.unwrap();
        }
        for i in 5..9 {
            assert_eq!(it.next().await.unwrap().unwrap(), (i, payload(i, 40)));
        }
        assert!(it.next().await.is_none());
        // A new iterator in the middle of buffered records.
        wal.append_batch(vec![payload(9, 1), payload(10, 0)]).await.unwrap();
        let mut it = wal.iter_from(8).unwrap();
        assert_eq!(it.next().await.unwrap().unwrap(), (8, payload(8, 40)));
        assert_eq!(it.next().await.unwrap().unwrap(), (9, payload(9, 1)));
        assert_eq!(it.next().await.unwrap().unwrap(), (10, payload(10, 0)));
        assert!(it.next().await.is_none());
        assert_eq!(collect(&wal).await.unwrap().len(), 11);
    });
}

#[test]
fn the_buffer_is_written_when_full_in_one_write() {
    block_on(async {
        let fs = SimFs::new(3);
        // 4 KiB buffer, 100-byte records: 136-byte frames, 30 per buffer.
        let wal = open(&fs, buffered(4096)).await.unwrap();
        for i in 0..300 {
            wal.append(payload(i, 100)).await.unwrap();
        }
        let stats = wal.stats().await;
        assert_eq!(stats.records, 300);
        assert_eq!(stats.buffer_flushes, 9, "{stats:?}");
        assert_eq!(stats.writes, stats.buffer_flushes, "no other write: {stats:?}");
        assert_eq!(written_next(&wal), 270);
        // A record larger than the buffer is buffered alone.
        wal.append(payload(300, 10_000)).await.unwrap();
        assert_eq!(written_next(&wal), 300);
        assert_eq!(wal.read(300).await.unwrap(), payload(300, 10_000));
        wal.close().await.unwrap();
        let wal = open(&fs, buffered(4096)).await.unwrap();
        assert!(wal.recovery_report().clean_reopen);
        let log = collect(&wal).await.unwrap();
        assert_eq!(log.len(), 301);
        assert!(log
            .iter()
            .all(|(i, p)| *p == payload(*i, if *i == 300 { 10_000 } else { 100 })));
    });
}

#[test]
fn sync_makes_buffered_records_durable() {
    block_on(async {
        let fs = SimFs::new(4);
        let wal = open(&fs, buffered(1 << 20)).await.unwrap();
        for i in 0..100 {
            wal.append(payload(i, 30)).await.unwrap();
        }
        assert_eq!(wal.durable_next(), 0);
        wal.sync().await.unwrap();
        assert_eq!(wal.durable_next(), 100);
        assert_eq!(written_next(&wal), 100);
        // Unsynced buffered records after the sync: a power loss takes them.
        for i in 100..110 {
            wal.append(payload(i, 30)).await.unwrap();
        }
        drop(wal);
        fs.crash(CrashKind::PowerLoss);
        let wal = open(&fs, buffered(1 << 20)).await.unwrap();
        let log = collect(&wal).await.unwrap();
        assert_eq!(log.len(), 100);
        assert!(log.iter().all(|(i, p)| *p == payload(*i, 30)));
    });
}

#[test]
fn a_process_crash_loses_the_buffer_but_keeps_what_was_written() {
    block_on(async {
        let fs = SimFs::new(5);
        let wal = open(&fs, buffered(1 << 20)).await.unwrap();
        for i in 0..20 {
            wal.append(payload(i, 30)).await.unwrap();
        }
        // Written (page cache), not synced.
        assert_eq!(wal.read(0).await.unwrap(), payload(0, 30));
        for i in 20..30 {
            wal.append(payload(i, 30)).await.unwrap();
        }
        // Dropping the Wal without close loses the buffer like a crash.
        drop(wal);
        fs.crash(CrashKind::Process);
        let wal = open(&fs, buffered(1 << 20)).await.unwrap();
        let log = collect(&wal).await.unwrap();
        assert_eq!(log.len(), 20, "the written records survive, the buffered ones are lost");
        assert!(log.iter().all(|(i, p)| *p == payload(*i, 30)));
        // The log goes on at 20.
        assert_eq!(wal.append(payload(20, 5)).await.unwrap(), 20);
    });
}

#[test]
fn rotation_truncation_and_close_write_the_buffer_first() {
    block_on(async {
        let fs = SimFs::new(6);
        let opts = buffered(1 << 20);
        let wal = open(&fs, opts.clone()).await.unwrap();
        for i in 0..10 {
            wal.append(payload(i, 30)).await.unwrap();
        }
        // Rotation seals the active segment with every buffered record.
        wal.rotate().await.unwrap();
        let segs = wal.segment_files();
        assert_eq!(segs.len(), 1);
        assert_eq!((segs[0].2, segs[0].3), (Some(9), true));
        assert_eq!(wal.durable_next(), 10, "a seal fsyncs");
        // Truncation inside buffered records, and inside a buffered batch.
        for i in 10..20 {
            wal.append(payload(i, 30)).await.unwrap();
        }
        wal.append_batch((20..25).map(|i| payload(i, 30)).collect())
            .await
            .unwrap();
        wal.truncate_after(22).await.unwrap();
        assert_eq!(wal.next_index(), 23);
        assert_eq!(wal.read(22).await.unwrap(), payload(22, 30));
        assert!(wal.read(23).await.is_err());
        // Appends continue after the cut, buffered again.
        for i in 23..30 {
            assert_eq!(wal.append(payload(i, 31)).await.unwrap(), i);
        }
        wal.truncate_from(27).await.unwrap();
        assert_eq!(wal.next_index(), 27);
        wal.append(payload(27, 32)).await.unwrap();
        for i in 28..200 {
            wal.append(payload(i, 300)).await.unwrap();
        }
        let expect = |i: u64| -> Vec<u8> {
            match i {
                0..=22 => payload(i, 30),
                23..=26 => payload(i, 31),
                27 => payload(i, 32),
                _ => payload(i, 300),
            }
        };
        // Close writes and syncs the buffer; a power loss keeps everything.
        wal.close().await.unwrap();
        fs.crash(CrashKind::PowerLoss);
        let wal = open(&fs, opts.clone()).await.unwrap();
        let log = collect(&wal).await.unwrap();
        assert_eq!(log.len(), 200);
        for (i, p) in &log {
            assert_eq!(p, &expect(*i), "index {i}");
        }
    });
}

#[test]
fn rotation_by_size_keeps_buffered_frames_in_their_segment() {
    block_on(async {
        let fs = SimFs::new(7);
        let opts = buffered(3000).segment_size_bytes(8192);
        let wal = open(&fs, opts.clone()).await.unwrap();
        for i in 0..400 {
            wal.append(payload(i, 1 + (i as usize * 37) % 700)).await.unwrap();
            if i % 50 == 0 {
                wal.append_batch((0..3).map(|k| payload(i * 10 + k, 90)).collect())
                    .await
                    .unwrap();
            }
        }
        let all = collect(&wal).await.unwrap();
        assert_eq!(all.len() as u64, wal.next_index());
        assert!(wal.segment_files().len() > 10);
        wal.sync().await.unwrap();
        drop(wal);
        fs.crash(CrashKind::PowerLoss);
        let wal = open(&fs, opts).await.unwrap();
        assert_eq!(collect(&wal).await.unwrap(), all);
    });
}

#[test]
fn prune_and_compaction_write_the_buffer_first() {
    block_on(async {
        let fs = SimFs::new(8);
        let opts = buffered(1 << 20).segment_max_records(5);
        let wal = open(&fs, opts.clone()).await.unwrap();
        for i in 0..23 {
            wal.append(payload(i, 10)).await.unwrap();
        }
        // Compaction with records in the buffer: it merges sealed segments
        // and leaves the buffered ones readable.
        let plan = wal
            .compact(
                CompactionOptions::default()
                    .small_segment_bytes(1 << 20)
                    .max_output_bytes(1 << 20),
            )
            .await
            .unwrap();
        assert_eq!(plan.runs.len(), 1);
        assert_eq!(written_next(&wal), 23);
        wal.append(payload(23, 10)).await.unwrap();
        assert_eq!(collect(&wal).await.unwrap().len(), 24);
        // A partial prune (the merged segment) leaves the buffer alone.
        wal.append(payload(24, 10)).await.unwrap();
        assert_eq!(wal.prune_through(19).await.unwrap(), 20);
        assert_eq!(wal.read(24).await.unwrap(), payload(24, 10));
        // A full prune with records in the buffer empties the log; a
        // snapshot install then starts it anywhere above.
        wal.append(payload(25, 10)).await.unwrap();
        assert_eq!(wal.prune_through(25).await.unwrap(), 26);
        assert_eq!(wal.next_index(), 26);
        assert_eq!(wal.append_at(27, payload(27, 10)).await.unwrap(), 27);
        assert!(matches!(
            wal.append_at(29, payload(0, 1)).await,
            Err(Error::WrongIndex { expected: 28, got: 29 })
        ));
        for i in 28..48 {
            assert_eq!(wal.append_at(i, payload(i, 10)).await.unwrap(), i);
        }
        wal.close().await.unwrap();
        fs.crash(CrashKind::PowerLoss);
        let wal = open(&fs, opts).await.unwrap();
        let log = collect(&wal).await.unwrap();
        assert_eq!(
            log.iter().map(|r| r.0).collect::<Vec<_>>(),
            (27..48).collect::<Vec<_>>()
        );
        assert!(log.iter().all(|(i, p)| *p == payload(*i, 10)));
    });
}

#[test]
fn a_full_disk_when_the_buffer_is_written_stops_the_wal() {
    block_on(async {
        let fs = SimFs::new(9);
        let wal = open(&fs, buffered(4096)).await.unwrap();
        for i in 0..10 {
            wal.append(payload(i, 100)).await.unwrap();
        }
        wal.sync().await.unwrap();
        fs.set_capacity(Some(fs.used_bytes() + 1000));
        let mut acked = 10;
        let err = loop {
            match wal.append(payload(acked, 100)).await {
                Ok(i) => {
                    assert_eq!(i, acked);
                    acked += 1;
                }
                Err(e) => break e,
            }
        };
        // Acknowledged records could not be written: the WAL stopped.
        assert!(err.is_stopped(), "{err}");
        assert!(err.is_storage_full(), "{err}");
        assert!(wal.stopped().is_some());
        assert!(wal.sync().await.unwrap_err().is_stopped());
        assert!(wal.read(0).await.unwrap_err().is_stopped());
        assert!(wal.append(payload(0, 1)).await.unwrap_err().is_stopped());
        fs.set_capacity(None);
        drop(wal);
        fs.crash(CrashKind::PowerLoss);
        let wal = open(&fs, buffered(4096)).await.unwrap();
        let log = collect(&wal).await.unwrap();
        assert!(log.len() >= 10 && log.len() as u64 <= acked, "{} of {acked}", log.len());
        assert!(log.iter().all(|(i, p)| *p == payload(*i, 100)));
        assert_eq!(wal.append(payload(99, 1)).await.unwrap(), log.len() as u64);
    });
}

#[test]
fn an_io_error_when_the_buffer_is_written_stops_the_wal() {
    for (what, op) in [("sync", 0), ("read", 1), ("rotate", 2), ("close", 3), ("truncate", 4)] {
        block_on(async {
            let fs = SimFs::new(10 + op);
            let wal = open(&fs, buffered(1 << 20)).await.unwrap();
            for i in 0..10 {
                wal.append(payload(i, 100)).await.unwrap();
            }
            fs.set_faults(FaultConfig {
                eio_write: 1.0,
                ..FaultConfig::none()
            });
            let r = match op {
                0 => wal.sync().await,
                1 => wal.read(5).await.map(|_| ()),
                2 => wal.rotate().await,
                3 => {
                    let r = wal.close().await;
                    assert!(r.as_ref().is_err_and(|e| e.is_stopped()), "{what}: {r:?}");
                    return;
                }
                _ => wal.truncate_after(3).await,
            };
            assert!(r.as_ref().is_err_and(|e| e.is_stopped()), "{what}: {r:?}");
            assert!(wal.stopped().is_some(), "{what}");
            fs.set_faults(FaultConfig::none());
            assert!(wal.sync().await.unwrap_err().is_stopped(), "{what}");
        });
    }
}

#[test]
fn a_dropped_read_does_not_lose_the_buffer() {
    block_on(async {
        // Every SimFs operation yields once: the read below is dropped while
        // it writes the buffer.
        let fs = SimFs::with_config(11, yielding());
        let wal = open(&fs, buffered(1 << 20)).await.unwrap();
        for i in 0..10 {
            wal.append(payload(i, 100)).await.unwrap();
        }
        {
            let mut read = pin!(wal.read(3));
            let waker = futures::task::noop_waker();
            let mut cx = Context::from_waker(&waker);
            assert!(matches!(read.as_mut().poll(&mut cx), Poll::Pending));
        }
        assert!(wal.stopped().is_none(), "a dropped flush is repeated, not fatal");
        for i in 10..12 {
            wal.append(payload(i, 100)).await.unwrap();
        }
        assert_eq!(wal.read(3).await.unwrap(), payload(3, 100));
        wal.sync().await.unwrap();
        drop(wal);
        fs.crash(CrashKind::PowerLoss);
        let wal = open(&fs, buffered(1 << 20)).await.unwrap();
        let log = collect(&wal).await.unwrap();
        assert_eq!(log.len(), 12);
        assert!(log.iter().all(|(i, p)| *p == payload(*i, 100)));
    });
}

#[test]
fn concurrent_appenders_keep_index_order_through_the_buffer() {
    // Appenders on OS threads: the lean path (writer mutex free) and the
    // group path (busy) interleave; indices must match disk order.
    let tmp = tempfile::tempdir().unwrap();
    let wal = Arc::new(block_on(Wal::open(OsFs::new(), tmp.path(), buffered(8192))).unwrap());
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let wal = wal.clone();
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                for s in 0..500u64 {
                    let data = format!("t{t}-s{s}").into_bytes();
                    let i = match s % 11 {
                        0 => block_on(wal.append_batch(vec![data.clone(), data.clone()])).unwrap(),
                        5 => {
                            // A reader among the writers.
                            let i = block_on(wal.append(data.clone())).unwrap();
                            assert_eq!(block_on(wal.read(i)).unwrap(), data);
                            i
                        }
                        _ => block_on(wal.append(data.clone())).unwrap(),
                    };
                    mine.push((i, data));
                }
                mine
            })
        })
        .collect();
    let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    block_on(async {
        let log = collect(&*wal).await.unwrap();
        assert_eq!(
            log.iter().map(|r| r.0).collect::<Vec<_>>(),
            (0..log.len() as u64).collect::<Vec<_>>()
        );
        for mine in &results {
            assert!(mine.windows(2).all(|p| p[0].0 < p[1].0));
            for (i, data) in mine {
                assert_eq!(&log[*i as usize].1, data, "index {i}");
            }
        }
    });
    let wal = Arc::try_unwrap(wal).ok().unwrap();
    block_on(wal.close()).unwrap();
    let wal = block_on(Wal::open(OsFs::new(), tmp.path(), buffered(8192))).unwrap();
    assert_eq!(block_on(collect(&wal)).unwrap().len(), 4 * (500 + 46));
}

/// Appends (single and batches, some larger than the buffer), syncs now and
/// then; stops at the first error. Returns (synced, written, attempted):
/// records below `synced` were acknowledged before an `Ok` sync; records
/// below `written` were in the segment file (page cache) when an operation
/// last returned; `attempted` records were submitted.
async fn crash_workload(wal: &Wal<SimFs>) -> (u64, u64, u64) {
    let (mut synced, mut written, mut attempted) = (0u64, 0u64, 0u64);
    for round in 0..40u64 {
        let i = attempted;
        let res = match round % 5 {
            0 => {
                attempted += 3;
                wal.append_batch((i..i + 3).map(|j| payload(j, 100)).collect()).await
            }
            3 => {
                attempted += 1;
                wal.append(payload(i, 700)).await
            }
            _ => {
                attempted += 1;
                wal.append(payload(i, 100)).await
            }
        };
        if res.is_err() {
            return (synced, written, attempted);
        }
        written = written.max(written_next(wal));
        if round % 9 == 8 {
            if wal.sync().await.is_err() {
                return (synced, written, attempted);
            }
            synced = attempted;
            written = attempted;
        }
    }
    (synced, written, attempted)
}

fn crash_opts() -> Options {
    buffered(1024).segment_max_records(16)
}

/// Crashes at every filesystem operation of the workload; the recovered log
/// must be a contiguous prefix of the attempted records that keeps every
/// synced record, and (process crash) every record that was written.
fn crash_at_every_step(kind: CrashKind) -> u64 {
    let total = block_on(async {
        let fs = step_fs(0, SimConfig::default());
        let wal = Wal::open(fs.clone(), dir(), crash_opts()).await.unwrap();
        let (synced, _, attempted) = crash_workload(&wal).await;
        assert!(synced > 0 && synced < attempted, "{synced} {attempted}");
        assert!(wal.stats().await.buffer_flushes > 5);
        fs.ops_run()
    });
    assert!(total > 40, "the workload does enough I/O: {total}");
    for k in 0..total + 5 {
        block_on(async {
            let cfg = SimConfig {
                atomic_write_unit_bytes: 512,
                faults: FaultConfig {
                    writeback: 0.3,
                    torn_garbage: 0.5,
                    ..FaultConfig::none()
                },
                ..SimConfig::default()
            };
            let fs = step_fs(k, cfg);
            fs.crash_after(k, kind);
            let (synced, written, attempted) = match Wal::open(fs.clone(), dir(), crash_opts()).await {
                Ok(wal) => crash_workload(&wal).await,
                Err(_) => (0, 0, 0),
            };
            fs.cancel_crash();
            fs.crash(kind);
            fs.set_faults(FaultConfig::none());
            let wal = Wal::open(fs.clone(), dir(), crash_opts()).await.unwrap();
            let log = collect(&wal).await.unwrap();
            let n = log.len() as u64;
            assert!(n >= synced, "step {k}: synced records lost: {n} < {synced}");
            if kind == CrashKind::Process {
                assert!(
                    n >= written,
                    "step {k}: written records lost at a process crash: {n} < {written}"
                );
            }
            assert!(n <= attempted, "step {k}: more records than attempted");
            for (j, (i, rec)) in log.iter().enumerate() {
                assert_eq!(*i, j as u64, "step {k}: contiguous");
                let len = if rec.len() == 700 { 700 } else { 100 };
                assert_eq!(rec, &payload(*i, len), "step {k}: integrity at {i}");
            }
            // What recovery served is durable.
            drop(wal);
            fs.crash(CrashKind::PowerLoss);
            let wal = Wal::open(fs.clone(), dir(), crash_opts()).await.unwrap();
            assert_eq!(collect(&wal).await.unwrap(), log, "step {k}: idempotent");
        });
    }
    total
}

#[test]
fn power_loss_at_every_step_loses_only_an_unsynced_suffix() {
    assert!(crash_at_every_step(CrashKind::PowerLoss) > 40);
}

#[test]
fn process_crash_at_every_step_loses_only_the_buffer() {
    assert!(crash_at_every_step(CrashKind::Process) > 40);
}
