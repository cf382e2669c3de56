//! Minimal reproducers of bugs the fuzz targets found in `wal`, for the
//! lead to fix (this crate does not change `wal` or `simfs`). Each is
//! `#[ignore]`d so that CI stays green; run them with
//! `cargo test -p wal-fuzz --test bugs -- --ignored`: they fail until the
//! bug is fixed. `known_bugs_still_reproduce` replays the crashing fuzz
//! inputs kept in `fuzz/known-bugs/<target>/` through the strict bodies and
//! fails once they stop crashing: then move them to `fuzz/regressions/`
//! and drop the steering in `recover`/`ops`.
#![allow(clippy::unwrap_used)]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use futures::executor::block_on;
use simfs::{CrashKind, FaultConfig, File, Fs, OpenOptions, SimFs};
use wal::codec::{encode_frame, FrameKind};
use wal::{Error, Options, Wal};
use wal_fuzz::gen::{active_name, header_for};

fn dir() -> &'static Path {
    Path::new("/log")
}

/// Bug 1 (found by `record_decode`'s `padding_len` check, and by `recover`
/// through the harness): `durable_alignment_bytes = 16` passes
/// `Options::validate`, but `codec::padding_len(104, 16)` returns 24, less
/// than a frame header, and `encode_padding` asserts
/// (`wal/src/codec.rs`, `encode_padding`): the first append that ends 8
/// bytes past a 16-byte boundary panics inside the group commit.
/// Expected: `padding_len` never returns 1..32 (add alignments until the gap
/// is at least 32), or `validate` rejects alignments below 32.
#[test]
fn durable_alignment_16_panics_in_encode_padding() {
    assert!(wal::codec::padding_len(104, 16) >= 32, "padding is never shorter than a frame header");
    block_on(async {
        let opts = Options {
            durable_alignment_bytes: 16,
            ..Options::default()
        };
        assert!(opts.validate().is_ok());
        let wal = Wal::open(SimFs::new(1), dir(), opts).await.unwrap();
        // Header 64 bytes, then a 40-byte frame: the tail is at 104 = 6*16 + 8.
        assert_eq!(wal.append(vec![7]).await.unwrap(), 0);
        assert_eq!(wal.read(0).await.unwrap(), vec![7]);
    });
}

/// Bug 2 (found by `recover`): an active segment named with first index
/// `u64::MAX` holding a valid frame at index `u64::MAX` makes the scan
/// compute `h.index + 1` (`wal/src/recovery.rs`, `Scan::accept`): a panic
/// with overflow checks, and with wrapping arithmetic a recovered log with
/// `first_index = u64::MAX > next_index = 0`.
/// Expected: `Err(Corruption)` (the writer can never write index `u64::MAX`:
/// admission keeps `next < u64::MAX`), or the frame treated as damage.
#[test]
fn active_segment_at_u64_max_overflows() {
    block_on(async {
        let fs = SimFs::new(1);
        fs.create_dir_all(dir()).await.unwrap();
        let h = header_for(1, u64::MAX);
        let mut bytes = h.encode().to_vec();
        encode_frame(&mut bytes, h.frame_seed(), FrameKind::Record, u64::MAX, 0, b"x");
        let f = fs
            .open(
                &dir().join(active_name(u64::MAX, 1)),
                OpenOptions::new().write(true).create(true),
            )
            .await
            .unwrap();
        f.write_all_at(&bytes, 0).await.unwrap();
        drop(f);
        match Wal::open(fs, dir(), Options::default()).await {
            Err(Error::Corruption { .. }) => {}
            Ok(w) => assert!(
                w.first_index() <= w.next_index(),
                "first {} > next {}",
                w.first_index(),
                w.next_index()
            ),
            Err(e) => panic!("{e}"),
        }
    });
}

/// Bug 3 (found by `ops`, fixed): after an fsync failure stops the WAL, a restart
/// *without* a power loss lets recovery serve the failed group's records
/// from the page cache. Their pages were marked clean by the failed fsync
/// (SimFs `Ext4Ordered`, like ext4/xfs), so recovery's `sync_data` returns
/// Ok without making them durable (`wal/src/recovery.rs`, `scan_active`:
/// "Records a process crash left in the page cache ... must be durable").
/// New appends then land on fresh aligned pages and are durable. After a
/// power loss the stranded record is gone but the later, acknowledged one
/// is durable and carries `durable_next` past the hole: the open fails with
/// `Corruption` and acknowledged records are unreachable.
/// Expected: the open after the power loss succeeds and keeps the
/// acknowledged records 0 and 2 reachable (e.g. recovery rewrites the
/// active segment's tail from the page cache before its fsync, so the bytes
/// are dirty again and really reach the disk).
///
/// Variants kept in `fuzz/regressions/ops/`: the failed fsync
/// is the one of `close`, and the restart's open (or a later clean `close`,
/// whose clean-shutdown marker the next open trusts without reading) then
/// serves the stranded records; after the power loss the open fails with
/// `Corruption`, or succeeds and reading record 0 fails with "Unwritten
/// frame while reading index 0" (in an active or a sealed segment).
///
/// Fixed by b13a08d (recovery rewrites the records not known durable before
/// its fsync); kept as a regression test, with the fuzz inputs in
/// `fuzz/regressions/ops/fsync_failure_*`.
#[test]
fn restart_after_failed_fsync_then_power_loss() {
    block_on(async {
        let fs = SimFs::new(1);
        let wal = Wal::open(fs.clone(), dir(), Options::default()).await.unwrap();
        assert_eq!(wal.append(b"acknowledged 0".to_vec()).await.unwrap(), 0);
        fs.set_faults(FaultConfig {
            sync_fail: 1.0,
            ..FaultConfig::none()
        });
        assert!(wal.append(b"failed 1".to_vec()).await.unwrap_err().is_stopped());
        fs.set_faults(FaultConfig::none());
        drop(wal); // a restart: the process goes on, the page cache too
        let wal = Wal::open(fs.clone(), dir(), Options::default()).await.unwrap();
        assert_eq!(
            wal.next_index(),
            2,
            "recovery serves the failed record from the page cache"
        );
        assert_eq!(wal.append(b"acknowledged 2".to_vec()).await.unwrap(), 2);
        drop(wal);
        fs.crash(CrashKind::PowerLoss);
        let wal = Wal::open(fs, dir(), Options::default()).await.unwrap();
        assert_eq!(wal.read(0).await.unwrap(), b"acknowledged 0");
        assert_eq!(wal.read(2).await.unwrap(), b"acknowledged 2");
    });
}

fn known_bug_inputs(target: &str) -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/known-bugs")
        .join(target);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<_> = entries.map(|e| e.unwrap().path()).filter(|p| p.is_file()).collect();
    v.sort();
    v
}

#[test]
fn known_bugs_still_reproduce() {
    let bodies: [(&str, wal_fuzz::Body); 2] = [("recover", wal_fuzz::recover_strict), ("ops", wal_fuzz::ops_strict)];
    for (target, strict) in bodies {
        for path in known_bug_inputs(target) {
            let data = std::fs::read(&path).unwrap();
            let crashed = catch_unwind(AssertUnwindSafe(|| strict(&data))).is_err();
            assert!(
                crashed,
                "{} no longer crashes: the bug is fixed? Move it to fuzz/regressions/{target}/",
                path.display()
            );
        }
    }
}

/// Bug 4 (found by `ops`): an append whose new segment cannot be created
/// (the header write fails) returns `AppendFailed` ("the WAL goes on")
/// although the WAL is stopped. `wal/src/group_commit.rs`, `create_active`,
/// the `CreateError::Write` arm: `let _ = inner.update_meta(|_| {}).await;`
/// ignores the result, but `update_meta` stops the WAL when the meta file's
/// directory fsync fails (`MetaWriteError::Unknown`); the removal of the
/// half-made segment then succeeds and the group is aborted, not stopped.
/// Expected: the append returns `Stopped` whenever the WAL is stopped by
/// then (propagate a stopped result of that `update_meta` as
/// `GroupError::Stop`), and `AppendFailed` only when the WAL goes on.
/// The fuzz input is `fuzz/known-bugs/ops/append_failed_but_stopped`.
#[test]
fn append_failed_but_the_wal_stopped() {
    block_on(async {
        for seed in 0..300 {
            let fs = SimFs::new(seed);
            let wal = Wal::open(fs.clone(), dir(), Options::default()).await.unwrap();
            fs.set_faults(FaultConfig {
                eio_write: 0.5,
                sync_fail: 0.5,
                ..FaultConfig::none()
            });
            let res = wal.append(b"x".to_vec()).await;
            if let Err(e @ Error::AppendFailed { .. }) = &res {
                assert!(
                    wal.stopped().is_none(),
                    "seed {seed}: append returned {e} but the WAL is stopped: {:?}",
                    wal.stopped()
                );
            }
        }
    });
}

/// Bug 5 (found by `recover` replaying its corpus against b13a08d): an open
/// that removes a torn new segment (no sealed segment) takes the removed
/// segment's first index as the log's next index (docs/FORMAT.md §8.1), but
/// nothing durable remembers it: the next open of the same directory gives
/// `first = next = Options::first_index` instead. Recovery is not
/// idempotent. (`wal/src/recovery.rs`, `recover`, the `ActiveScan::Torn`
/// arm: `next_index = name.first()` when `sealed.is_empty()`.)
/// Expected: the second open gives the same first and next index as the
/// first (e.g. record the index in the meta file before removing the
/// segment, or keep `Options::first_index` in both opens).
/// Fuzz input: `fuzz/known-bugs/recover/torn_new_segment_not_idempotent`.
#[test]
fn removing_a_torn_new_segment_is_idempotent() {
    block_on(async {
        let fs = SimFs::new(1);
        fs.create_dir_all(dir()).await.unwrap();
        fs.open(
            &dir().join(active_name(170, 1)),
            OpenOptions::new().write(true).create(true),
        )
        .await
        .unwrap();
        let wal = Wal::open(fs.clone(), dir(), Options::default()).await.unwrap();
        let first = (wal.first_index(), wal.next_index());
        wal.close().await.unwrap();
        let wal = Wal::open(fs, dir(), Options::default()).await.unwrap();
        assert_eq!((wal.first_index(), wal.next_index()), first);
    });
}
