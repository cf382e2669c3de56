//! Faults that strike after the effect: SimFs operations that take effect
//! and then return EIO. The engine must not assume a failed operation
//! changed nothing.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use futures::executor::block_on;
use simfs::{CrashKind, FaultConfig, FaultKind, Fs, SimFs};
use wal::{Error, Options};

fn rename_after_effect() -> FaultConfig {
    FaultConfig {
        eio_rename_after_effect: 1.0,
        ..FaultConfig::none()
    }
}

/// A full prune whose meta replacement reports EIO although the rename took
/// effect: the new low-water mark (past every record) is in the directory.
/// Had the WAL believed the old meta file stood and gone on appending below
/// that mark, the next directory fsync and a power loss would have made the
/// new records vanish under it. It stops instead, and the records it
/// acknowledged before stay.
#[test]
fn a_meta_rename_that_fails_after_taking_effect_stops_the_wal() {
    block_on(async {
        let fs = SimFs::new(7);
        let wal = open(&fs, Options::default()).await.unwrap();
        for i in 0..10u64 {
            assert_eq!(wal.append(payload(i, 40)).await.unwrap(), i);
        }
        fs.set_faults(rename_after_effect());
        let e = wal.prune_through(100).await.unwrap_err();
        fs.set_faults(FaultConfig::none());
        assert_eq!(fs.counters().get(FaultKind::EioRenameAfterEffect), 1);
        assert!(wal.stopped().is_some(), "{e}");
        let later = wal.append(payload(10, 40)).await;
        assert!(matches!(later, Err(Error::Stopped { .. })), "{later:?}");
        drop(wal);
        // Whatever makes the directory durable next, and a power loss.
        fs.sync_dir(dir()).await.unwrap();
        fs.crash(CrashKind::PowerLoss);
        let wal = open(&fs, Options::default()).await.unwrap();
        // The prune's outcome was unknown: it happened (the rename was made
        // durable above), and nothing acknowledged after it was lost.
        assert_eq!(wal.first_index(), 101);
        assert_eq!(wal.next_index(), 101);
        assert_eq!(wal.append(payload(101, 40)).await.unwrap(), 101);
    });
}

/// The same fault under a partial prune: the WAL stops, and a reopen finds
/// the prune either done or not, never records past it missing.
#[test]
fn a_partial_prune_whose_meta_rename_fails_after_taking_effect_loses_nothing_above_it() {
    block_on(async {
        let fs = SimFs::new(8);
        let opts = Options::default().segment_max_records(5);
        let wal = open(&fs, opts.clone()).await.unwrap();
        for i in 0..20u64 {
            assert_eq!(wal.append(payload(i, 40)).await.unwrap(), i);
        }
        fs.set_faults(rename_after_effect());
        assert!(wal.prune_through(9).await.is_err());
        fs.set_faults(FaultConfig::none());
        assert!(wal.stopped().is_some());
        drop(wal);
        fs.crash(CrashKind::PowerLoss);
        let wal = open(&fs, opts).await.unwrap();
        assert!(wal.first_index() == 0 || wal.first_index() == 10);
        assert_eq!(wal.next_index(), 20);
        let all = collect(&wal).await.unwrap();
        for (i, p) in all {
            assert_eq!(p, payload(i, 40));
        }
    });
}

/// A truncation that cuts whole segments creates the next active segment
/// afterwards; when that creation fails, its best-effort meta update may
/// stop the WAL (a rename that failed after taking effect). The truncation
/// must then say so: `Ok` from a stopped WAL would tell the caller it may go
/// on appending (seed 500072 of the simulation). Over many seeds of random
/// write and rename faults, `truncate_from` never returns `Ok` on a stopped
/// WAL, and the case that needs the check is reached.
#[test]
fn a_truncation_never_returns_ok_from_a_stopped_wal() {
    block_on(async {
        let opts = Options::default().segment_max_records(4);
        let mut stopped_after_cut = 0;
        for seed in 0..400u64 {
            let fs = SimFs::new(seed);
            let wal = open(&fs, opts.clone()).await.unwrap();
            for i in 0..16u64 {
                assert_eq!(wal.append(payload(i, 40)).await.unwrap(), i);
            }
            fs.set_faults(FaultConfig {
                eio_write: 0.3,
                eio_rename_after_effect: 0.5,
                ..FaultConfig::none()
            });
            // 8 is the first index of a segment: the cut removes whole
            // segments and the next append needs a new active one.
            let r = wal.truncate_from(8).await;
            fs.set_faults(FaultConfig::none());
            if r.is_ok() {
                assert!(wal.stopped().is_none(), "seed {seed}: Ok from a stopped WAL");
                continue;
            }
            drop(wal);
            let wal = open(&fs, opts.clone()).await.unwrap();
            if wal.next_index() == 8 {
                // The cut was done and durable, and the call reported the
                // stop that followed it.
                stopped_after_cut += 1;
            }
        }
        assert!(stopped_after_cut > 0, "no seed stopped the WAL after a durable cut");
    });
}

/// A meta rename that took effect under a prune through the last record,
/// then a reopen without a power loss: the low-water mark (10) is exactly
/// the next index, so recovery keeps the active segment, whose records all
/// lie below the first index, and a rotation (or, in the simulation, an
/// append after a durable tail that ends mid-sector) seals it. That sealed segment holds nothing readable, and a
/// prune through its last index (below the first index) must remove it.
/// Before the fix the early return for `k < first` kept it until a prune
/// through the first index or beyond (found by the simulation's lease
/// check, seed 690).
#[test]
fn a_prune_below_the_first_index_removes_a_sealed_segment_wholly_below_it() {
    block_on(async {
        let fs = SimFs::new(7);
        let wal = open(&fs, Options::default()).await.unwrap();
        for i in 0..10u64 {
            assert_eq!(wal.append(payload(i, 40)).await.unwrap(), i);
        }
        fs.set_faults(rename_after_effect());
        assert!(wal.prune_through(9).await.is_err());
        fs.set_faults(FaultConfig::none());
        drop(wal);
        fs.crash(CrashKind::Process);
        let wal = open(&fs, Options::default()).await.unwrap();
        assert_eq!(wal.first_index(), 10);
        wal.rotate().await.unwrap();
        assert_eq!(wal.append(payload(10, 40)).await.unwrap(), 10);
        let below = |wal: &wal::Wal<SimFs>| {
            wal.segment_files()
                .into_iter()
                .filter(|s| s.3 && s.2.is_some_and(|l| l < wal.first_index()))
                .count()
        };
        assert_eq!(below(&wal), 1, "{:?}", wal.segment_files());
        assert_eq!(wal.prune_through(9).await.unwrap(), 10);
        assert_eq!(below(&wal), 0, "{:?}", wal.segment_files());
        assert_eq!(collect(&wal).await.unwrap(), vec![(10, payload(10, 40))]);
    });
}

/// A compaction whose output rename reports EIO after taking effect stops
/// the WAL; after a process crash the output's name is in the page cache
/// only. The next open finds the output covering its inputs and removes
/// them: before the fix it did so before the directory fsync that makes the
/// output's name durable, so a power loss right after the first removal
/// could keep that removal and lose the rename, leaving a gap (seed
/// 20016724 of the simulation's soak). Now the name is durable first:
/// whatever a power loss keeps, the log is whole.
#[test]
fn recovery_makes_a_compaction_output_durable_before_removing_its_inputs() {
    block_on(async {
        let opts = Options::default().segment_max_records(4);
        let mut lost_renames = 0;
        for seed in 0..32u64 {
            let fs = SimFs::new(seed);
            let wal = open(&fs, opts.clone()).await.unwrap();
            for i in 0..20u64 {
                assert_eq!(wal.append(payload(i, 40)).await.unwrap(), i);
            }
            fs.set_faults(rename_after_effect());
            assert!(wal.compact(wal::CompactionOptions::default()).await.is_err());
            fs.set_faults(FaultConfig::none());
            assert!(wal.stopped().is_some(), "seed {seed}");
            drop(wal);
            fs.crash(CrashKind::Process);
            let lost_before = fs.counters().get(FaultKind::LostDirOp);
            fs.crash_after_next(simfs::OpMatch::ops(&["remove_file"]), CrashKind::PowerLoss);
            assert!(open(&fs, opts.clone()).await.is_err(), "seed {seed}: the open crashed");
            lost_renames += fs.counters().get(FaultKind::LostDirOp) - lost_before;
            let wal = open(&fs, opts.clone()).await.unwrap();
            assert_eq!((wal.first_index(), wal.next_index()), (0, 20), "seed {seed}");
            for (i, p) in collect(&wal).await.unwrap() {
                assert_eq!(p, payload(i, 40), "seed {seed}");
            }
        }
        assert!(lost_renames > 0, "no power loss lost a directory operation");
    });
}

/// Soak seed 91075929: a `PointInTime` open that accepted lost records
/// (the first segment gone) records the acceptance in the meta file; its
/// rename reported EIO after taking effect, so the directory was never
/// fsynced and a power loss brought the old low-water mark back: the next
/// strict open reported the accepted records missing again. The open now
/// makes the directory durable whichever meta file stands.
#[test]
fn an_accepted_loss_survives_a_meta_rename_that_failed_after_taking_effect() {
    block_on(async {
        let fs = SimFs::new(9);
        let opts = Options::default().segment_max_records(10);
        let wal = open(&fs, opts.clone()).await.unwrap();
        for i in 0..35u64 {
            wal.append(payload(i, 40)).await.unwrap();
        }
        let first = wal.segment_files()[0].0.clone();
        wal.close().await.unwrap();
        fs.remove_file(&dir().join(&first)).await.unwrap();
        fs.sync_dir(dir()).await.unwrap();
        let pit = opts.clone().recovery_mode(wal::RecoveryMode::PointInTime);
        fs.set_faults(rename_after_effect());
        let wal = open(&fs, pit).await.unwrap();
        fs.set_faults(FaultConfig::none());
        assert_eq!(fs.counters().get(FaultKind::EioRenameAfterEffect), 1);
        assert_eq!((wal.first_index(), wal.recovery_report().lost.len()), (10, 1));
        drop(wal);
        fs.crash(CrashKind::PowerLoss);
        let wal = open(&fs, opts).await.unwrap();
        assert_eq!((wal.first_index(), wal.next_index()), (10, 35));
    });
}
