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
    Options::default().segment_max_records(4).sync_policy(policy)
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

/// A log created in directories that do not exist yet, with a crash at every
/// step of its first life (create, append, close, clean reopen, append),
/// then a restart that appends and a power loss: every acknowledged record
/// is there. The ancestors' fsync is skipped once a meta file proves an
/// earlier open made the path durable; deciding from the directory's
/// existence alone, or never fsyncing it, loses the whole log here.
fn creation_at_every_step(kind: CrashKind) -> u64 {
    let deep = std::path::Path::new("/data/a/log");
    let opts = || Options::default().segment_max_records(4);
    // One life: open, append, close, reopen, append; the acknowledged count.
    async fn life(fs: &SimFs, deep: &std::path::Path, opts: Options, acked: &mut u64) -> wal::Result<()> {
        let wal = Wal::open(fs.clone(), deep, opts.clone()).await?;
        for _ in 0..2 {
            let i = wal.next_index();
            wal.append(payload(i, 100)).await?;
            *acked = (*acked).max(i + 1);
        }
        wal.close().await?;
        let wal = Wal::open(fs.clone(), deep, opts).await?;
        let i = wal.next_index();
        wal.append(payload(i, 100)).await?;
        *acked = (*acked).max(i + 1);
        Ok(())
    }
    let total = block_on(async {
        let fs = step_fs(0, SimConfig::default());
        let mut acked = 0;
        life(&fs, deep, opts(), &mut acked).await.unwrap();
        assert_eq!(acked, 3);
        fs.ops_run()
    });
    assert!(total > 15, "the first life does enough I/O: {total}");
    let mut before_first_ack = 0;
    for k in 0..total + 3 {
        block_on(async {
            let fs = step_fs(k, SimConfig::default());
            fs.crash_after(k, kind);
            let mut acked = 0;
            let _ = life(&fs, deep, opts(), &mut acked).await;
            fs.crash(kind);
            fs.cancel_crash();
            // The restarted process appends one record and loses power.
            let wal = Wal::open(fs.clone(), deep, opts()).await.unwrap();
            let i = wal.next_index();
            assert!(i >= acked, "step {k}: next index {i} below {acked} acknowledged");
            wal.append(payload(i, 100)).await.unwrap();
            drop(wal);
            fs.crash(CrashKind::PowerLoss);
            let wal = Wal::open(fs.clone(), deep, opts()).await.unwrap();
            let log = {
                let mut it = wal.iter_from(wal.first_index()).unwrap();
                let mut out = Vec::new();
                while let Some(r) = it.next().await {
                    out.push(r.unwrap());
                }
                out
            };
            assert_eq!(log.len() as u64, i + 1, "step {k}: acknowledged records lost: {log:?}");
            for (n, (j, rec)) in log.iter().enumerate() {
                assert_eq!((*j, rec), (n as u64, &payload(n as u64, 100)), "step {k}");
            }
            // Crashes before the first acknowledgement are where the path
            // was not durable yet.
            if acked == 0 {
                before_first_ack += 1;
            }
        });
    }
    before_first_ack
}

#[test]
fn creating_a_log_in_new_directories_survives_a_process_crash_at_every_step() {
    assert!(creation_at_every_step(CrashKind::Process) >= 5);
}

#[test]
fn creating_a_log_in_new_directories_survives_a_power_loss_at_every_step() {
    assert!(creation_at_every_step(CrashKind::PowerLoss) >= 5);
}

/// A clean reopen fsyncs nothing on the directory's path: the meta file
/// written by the close proves an earlier open made the path durable.
#[test]
fn a_clean_reopen_does_not_fsync_the_ancestors() {
    block_on(async {
        let deep = std::path::Path::new("/data/a/log");
        let fs = step_fs(0, SimConfig::default());
        let wal = Wal::open(fs.clone(), deep, Options::default()).await.unwrap();
        wal.append(b"x".to_vec()).await.unwrap();
        wal.close().await.unwrap();
        let trace_before = fs.trace().len();
        let wal = Wal::open(fs.clone(), deep, Options::default()).await.unwrap();
        assert!(wal.recovery_report().clean_reopen);
        let ancestor_syncs = fs.trace()[trace_before..]
            .iter()
            .filter(|e| e.op == "sync_dir" && e.path.as_deref() != Some("/data/a/log"))
            .count();
        assert_eq!(ancestor_syncs, 0);
    });
}
