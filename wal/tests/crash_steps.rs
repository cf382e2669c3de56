//! Targeted crash tests: a workload with appends, batches and rotations is
//! crashed at every single filesystem operation (process crash and power
//! loss), including operations of recovery itself, and the recovered log is
//! checked: every acknowledged record is there, nothing else but attempted
//! records at their indices, a contiguous prefix, and recovery is idempotent.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use futures::executor::block_on;
use simfs::{CrashKind, SimConfig, SimFs};
use wal::{Options, SyncPolicy, Wal};

fn opts(policy: SyncPolicy) -> Options {
    Options {
        segment_max_records: 4,
        sync_policy: policy,
        ..Options::default()
    }
}

/// Runs the workload until the first error; returns the acknowledged prefix
/// length (indices `0..acked` are acknowledged durable) and the attempted count.
async fn workload(wal: &Wal<SimFs>, manual: bool) -> (u64, u64) {
    let mut acked = 0u64;
    let mut attempted = 0u64;
    for round in 0..10u64 {
        let i = attempted;
        let res = if round % 2 == 0 {
            attempted += 3;
            wal.append_batch((i..i + 3).map(|j| payload(j, 100)).collect()).await
        } else {
            attempted += 1;
            wal.append(payload(i, 700)).await
        };
        if res.is_err() {
            return (acked, attempted);
        }
        if manual && wal.sync().await.is_err() {
            return (acked, attempted);
        }
        acked = attempted;
        if (round == 3 || round == 7) && wal.rotate().await.is_err() {
            return (acked, attempted);
        }
    }
    (acked, attempted)
}

/// Opens, retrying after crashes injected into recovery itself.
async fn recover_and_check(fs: &SimFs, policy: SyncPolicy, acked: u64, attempted: u64) {
    let wal = loop {
        match Wal::open(fs.clone(), dir(), opts(policy.clone())).await {
            Ok(w) => {
                fs.cancel_crash();
                break w;
            }
            // A crash injected during recovery: the stale handles fail; retry.
            Err(e) if fs.ops_run() > 0 && !matches!(e, wal::Error::Corruption { .. }) => {
                fs.cancel_crash();
                continue;
            }
            Err(e) => panic!("recovery failed: {e}"),
        }
    };
    let log = collect(&wal).await.unwrap();
    assert!(
        log.len() as u64 >= acked,
        "acknowledged records lost: {} < {acked}; report {:?}; segments {:?}",
        log.len(),
        wal.recovery_report(),
        wal.segment_files()
    );
    assert!(log.len() as u64 <= attempted, "more records than attempted");
    for (n, (i, rec)) in log.iter().enumerate() {
        assert_eq!(*i, n as u64, "contiguous");
        let len = if rec.len() == 700 { 700 } else { 100 };
        assert_eq!(rec, &payload(*i, len), "integrity at {i}");
    }
    // Segment view equals the directory.
    let names: Vec<String> = wal.segment_files().into_iter().map(|s| s.0).collect();
    let on_disk: Vec<String> = simfs::Fs::read_dir(fs, dir())
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .filter(|n| n.ends_with(".wal"))
        .collect();
    assert_eq!(names, on_disk);
    // Appends go on after recovery.
    assert_eq!(wal.append(b"after".to_vec()).await.unwrap(), log.len() as u64);
    wal.sync().await.unwrap();
    drop(wal);
    // Idempotent: a power loss now loses nothing acknowledged and recovery
    // gives the same log.
    fs.crash(CrashKind::PowerLoss);
    let wal = Wal::open(fs.clone(), dir(), opts(policy)).await.unwrap();
    let again = collect(&wal).await.unwrap();
    assert_eq!(&again[..log.len()], &log[..]);
    assert_eq!(again.len(), log.len() + 1);
}

fn crash_at_every_step(policy: SyncPolicy, kind: CrashKind, unit: u32) -> u64 {
    let manual = matches!(policy, SyncPolicy::Manual);
    // Dry run: count the operations.
    let total = block_on(async {
        let fs = step_fs(0, SimConfig::default());
        let wal = Wal::open(fs.clone(), dir(), opts(policy.clone())).await.unwrap();
        let (acked, attempted) = workload(&wal, manual).await;
        assert_eq!(acked, attempted, "{:?}", wal.stopped());
        fs.ops_run()
    });
    assert!(total > 40, "the workload does enough I/O: {total}");
    let mut crashes = 0;
    for k in 0..total + 10 {
        block_on(async {
            // Background writeback and garbage in torn sectors make both
            // "unsynced data survived" and "garbage tail" reachable.
            let faults = simfs::FaultConfig {
                writeback: 0.3,
                torn_garbage: 0.5,
                ..simfs::FaultConfig::none()
            };
            let cfg = SimConfig {
                atomic_write_unit_bytes: unit,
                faults,
                ..SimConfig::default()
            };
            let fs = step_fs(k, cfg);
            fs.crash_after(k, kind);
            let (acked, attempted) = match Wal::open(fs.clone(), dir(), opts(policy.clone())).await {
                Ok(wal) => workload(&wal, manual).await,
                Err(_) => (0, 0),
            };
            // Crash after the workload's first failure (or now, if the step
            // crash already happened, this crash is the second).
            if kind == CrashKind::PowerLoss {
                fs.crash(CrashKind::PowerLoss);
            } else {
                fs.crash(CrashKind::Process);
            }
            // Also crash recovery itself: k steps into it.
            fs.crash_after(k % 7, kind);
            fs.set_faults(simfs::FaultConfig::none());
            recover_and_check(&fs, policy.clone(), acked, attempted).await;
        });
        crashes += 1;
    }
    crashes
}

#[test]
fn power_loss_at_every_step_always_policy() {
    assert!(crash_at_every_step(SyncPolicy::Always, CrashKind::PowerLoss, 4096) > 40);
}

#[test]
fn power_loss_at_every_step_always_policy_512b_sectors() {
    assert!(crash_at_every_step(SyncPolicy::Always, CrashKind::PowerLoss, 512) > 40);
}

#[test]
fn process_crash_at_every_step_always_policy() {
    assert!(crash_at_every_step(SyncPolicy::Always, CrashKind::Process, 4096) > 40);
}

#[test]
fn power_loss_at_every_step_manual_policy() {
    assert!(crash_at_every_step(SyncPolicy::Manual, CrashKind::PowerLoss, 512) > 40);
}
