//! Properties of the SimFs durability model (pessimistic POSIX), checked with
//! proptest over seeds and workloads.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

mod common;

use std::io::ErrorKind;
use std::path::Path;

use common::{after_power_loss, create_durable, pattern, read_all, rw, sim, some, writeback, C};
use futures::executor::block_on;
use proptest::prelude::*;
use simfs::{CrashKind, FaultConfig, File, Fs, OpenOptions, SimConfig, SimFs, SyncFailureProfile};

fn unit() -> impl Strategy<Value = u32> {
    prop_oneof![Just(512u32), Just(4096u32)]
}

/// A write: offset and length (bytes from `pattern`).
fn write() -> impl Strategy<Value = (u64, usize)> {
    (0u64..20_000, 1usize..9000)
}

/// Applies writes to an in-memory model of a file.
fn model_write(model: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let off = offset as usize;
    if model.len() < off + data.len() {
        model.resize(off + data.len(), 0);
    }
    model[off..off + data.len()].copy_from_slice(data);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// (a) Data synced with sync_data, whose name is synced with sync_dir,
    /// survives a power loss byte for byte (background writeback or not).
    #[test]
    fn synced_data_survives_power_loss(
        seed in any::<u64>(),
        unit in unit(),
        wb in prop_oneof![Just(0.0), Just(0.3)],
        writes in proptest::collection::vec(write(), 1..6),
        truncate_to in proptest::option::of(0u64..30_000),
    ) {
        block_on(async {
            let fs = sim(seed, writeback(wb), unit);
            let path = Path::new("/db/f");
            fs.create_dir_all(Path::new("/db")).await.unwrap();
            let f = fs.open(path, rw()).await.unwrap();
            let mut model = Vec::new();
            for (i, &(off, len)) in writes.iter().enumerate() {
                let data = pattern(i as u8, len);
                f.write_all_at(&data, off).await.unwrap();
                model_write(&mut model, off, &data);
            }
            if let Some(len) = truncate_to {
                f.set_len(len).await.unwrap();
                model.resize(len as usize, 0);
            }
            f.sync_data().await.unwrap();
            fs.sync_dir(Path::new("/db")).await.unwrap();
            fs.sync_dir(Path::new("/")).await.unwrap();
            prop_assert_eq!(C(fs.durable_content(path)), some(&model));
            let got = after_power_loss(&fs, path).await;
            prop_assert_eq!(C(got), some(&model));
            Ok(())
        })?;
    }

    /// (b) After a power loss, unsynced data may be lost, kept or torn, but
    /// per atomic write unit the file holds the old durable bytes, the new
    /// bytes, or zeros; bytes the unsynced write did not touch keep their
    /// durable value; without writeback, the length is the old or the new one.
    #[test]
    fn unsynced_write_is_old_new_or_zero_per_unit(
        seed in any::<u64>(),
        unit in unit(),
        wb in prop_oneof![Just(0.0), Just(0.5)],
        old_len in 0usize..20_000,
        (off, len) in write(),
    ) {
        block_on(async {
            let fs = sim(seed, writeback(wb), unit);
            let path = Path::new("/f");
            let old = pattern(1, old_len);
            create_durable(&fs, path, &old).await.unwrap();
            let f = fs.open(path, rw()).await.unwrap();
            let new_data = pattern(2, len);
            f.write_all_at(&new_data, off).await.unwrap();
            let mut new = old.clone();
            model_write(&mut new, off, &new_data);
            prop_assert_eq!(fs.volatile_content(path), Some(new.clone()));
            let got = after_power_loss(&fs, path).await.expect("the file was durable");
            if wb == 0.0 {
                prop_assert!(
                    got.len() == old.len() || got.len() == new.len(),
                    "length {} is neither old {} nor new {}", got.len(), old.len(), new.len()
                );
            } else {
                prop_assert!(
                    got.len() >= old.len().min(new.len()) && got.len() <= old.len().max(new.len()),
                    "length {} outside old {} / new {}", got.len(), old.len(), new.len()
                );
            }
            let u = unit as usize;
            let (w_start, w_end) = (off as usize, off as usize + len);
            let byte = |v: &Vec<u8>, i: usize| v.get(i).copied().unwrap_or(0);
            for start in (0..got.len()).step_by(u) {
                let end = (start + u).min(got.len());
                let g = &got[start..end];
                let o: Vec<u8> = (start..end).map(|i| byte(&old, i)).collect();
                let n: Vec<u8> = (start..end).map(|i| byte(&new, i)).collect();
                let touched = start < w_end && end > w_start;
                if touched {
                    prop_assert!(
                        g == o.as_slice() || g == n.as_slice() || g.iter().all(|&b| b == 0),
                        "unit at {} is neither old, new nor zeros", start
                    );
                } else {
                    // Not written: the durable bytes (zeros past the old end).
                    prop_assert_eq!(g, o.as_slice(), "untouched unit at {} changed", start);
                }
            }
            Ok(())
        })?;
    }

    /// (c) A rename whose directory is not synced leaves the file, after a
    /// power loss, under exactly one of its two names (same or different
    /// directories, replacing a file or not).
    #[test]
    fn unsynced_rename_is_old_or_new_name(
        seed in any::<u64>(),
        replace in any::<bool>(),
        cross_dir in any::<bool>(),
        wb in prop_oneof![Just(0.0), Just(0.5)],
    ) {
        block_on(async {
            let fs = sim(seed, writeback(wb), 4096);
            let from = Path::new("/d1/a");
            let to = if cross_dir { Path::new("/d2/b") } else { Path::new("/d1/b") };
            let a = pattern(1, 5000);
            let b = pattern(2, 3000);
            create_durable(&fs, from, &a).await.unwrap();
            fs.create_dir_all(Path::new("/d2")).await.unwrap();
            fs.sync_dir(Path::new("/d2")).await.unwrap();
            fs.sync_dir(Path::new("/")).await.unwrap();
            if replace {
                create_durable(&fs, to, &b).await.unwrap();
            }
            fs.rename(from, to).await.unwrap();
            prop_assert!(!fs.exists(from).await.unwrap());
            fs.crash(CrashKind::PowerLoss);
            let got_from = read_all(&fs, from).await.unwrap();
            let got_to = read_all(&fs, to).await.unwrap();
            let at_from = got_from.as_deref() == Some(&a[..]);
            let at_to = got_to.as_deref() == Some(&a[..]);
            prop_assert!(at_from != at_to, "from: {:?} to: {:?}",
                got_from.map(|v| v.len()), got_to.map(|v| v.len()));
            if at_from {
                // The rename did not happen: the target is as before.
                let expect_to = if replace { Some(b.clone()) } else { None };
                prop_assert_eq!(C(got_to), C(expect_to));
            }
            Ok(())
        })?;
    }

    /// (e) A process crash keeps the page cache: unsynced data and unsynced
    /// directory entries are readable through new handles; the old handles
    /// and locks are dead.
    #[test]
    fn process_crash_keeps_the_page_cache(
        seed in any::<u64>(),
        writes in proptest::collection::vec(write(), 1..5),
    ) {
        block_on(async {
            let fs = SimFs::new(seed);
            fs.create_dir_all(Path::new("/db")).await.unwrap();
            let lock = fs.lock_dir(Path::new("/db")).await.unwrap();
            let f = fs.open(Path::new("/db/f"), rw()).await.unwrap();
            let mut model = Vec::new();
            for (i, &(off, len)) in writes.iter().enumerate() {
                let data = pattern(i as u8, len);
                f.write_all_at(&data, off).await.unwrap();
                model_write(&mut model, off, &data);
            }
            fs.crash(CrashKind::Process);
            prop_assert!(f.len().await.is_err(), "a handle from before the crash works");
            let mut one = [0u8; 1];
            prop_assert!(f.read_at(&mut one, 0).await.is_err());
            prop_assert!(f.write_at(b"x", 0).await.is_err());
            let got = read_all(&fs, Path::new("/db/f")).await.unwrap();
            prop_assert_eq!(C(got), some(&model));
            // The dead process's lock is gone: a new one can be taken while
            // the old guard still exists.
            let relock = fs.lock_dir(Path::new("/db")).await;
            prop_assert!(relock.is_ok(), "lock after a process crash: {:?}", relock.err());
            drop(lock);
            Ok(())
        })?;
    }
}

/// (d) Ext4Ordered: a failed sync_data returns Err, the next one Ok, yet the
/// data written before the failure is not durable, although the page cache
/// shows it until the power loss.
#[test]
fn ext4_ordered_failed_sync_loses_the_window() {
    for seed in 0..32 {
        block_on(async {
            let fs = SimFs::new(seed);
            let path = Path::new("/f");
            let old = pattern(1, 1000);
            create_durable(&fs, path, &old).await.unwrap();
            let f = fs.open(path, rw()).await.unwrap();
            let window = pattern(2, 6000);
            f.write_all_at(&window, 500).await.unwrap();
            let mut live = old.clone();
            model_write(&mut live, 500, &window);

            fs.set_faults(FaultConfig {
                sync_fail: 1.0,
                ..FaultConfig::none()
            });
            assert!(f.sync_data().await.is_err(), "seed {seed}: the sync must fail");
            fs.set_faults(FaultConfig::none());
            f.sync_data().await.expect("the next sync returns Ok");
            f.sync_all().await.expect("and the one after");

            // The page cache still shows the window...
            assert!(read_all(&fs, path).await.unwrap() == Some(live.clone()));
            assert!(fs.volatile_content(path) == Some(live.clone()));
            // ...but it is not durable: the old bytes, then at most a
            // zero-filled extension (the later Ok sync may persist the size).
            let durable = fs.durable_content(path).expect("durable file");
            assert_old_then_zeros(&durable, &old, live.len(), seed);
            let got = after_power_loss(&fs, path).await.expect("durable file");
            assert_old_then_zeros(&got, &old, live.len(), seed);
        });
    }
}

/// `got` is `old` followed by zeros, and its length is the old or the new one.
fn assert_old_then_zeros(got: &[u8], old: &[u8], new_len: usize, seed: u64) {
    assert!(
        got.len() == old.len() || got.len() == new_len,
        "seed {seed}: length {} is neither {} nor {new_len}",
        got.len(),
        old.len()
    );
    assert!(got[..old.len()] == *old, "seed {seed}: the old bytes changed");
    assert!(
        got[old.len()..].iter().all(|&b| b == 0),
        "seed {seed}: bytes of the failed window became durable"
    );
}

/// Ext4DataJournal reports the error one sync late; the window is lost too.
#[test]
fn ext4_data_journal_reports_one_sync_late() {
    block_on(async {
        let fs = SimFs::with_config(
            3,
            SimConfig {
                profile: SyncFailureProfile::Ext4DataJournal,
                ..SimConfig::default()
            },
        );
        let path = Path::new("/f");
        create_durable(&fs, path, b"").await.unwrap();
        let f = fs.open(path, rw()).await.unwrap();
        f.write_all_at(&pattern(3, 100), 0).await.unwrap();
        fs.set_faults(FaultConfig {
            sync_fail: 1.0,
            ..FaultConfig::none()
        });
        f.sync_data().await.expect("data=journal: the failing sync says Ok");
        fs.set_faults(FaultConfig::none());
        assert!(f.sync_data().await.is_err(), "the error comes one sync late");
        let got = after_power_loss(&fs, path).await.expect("durable file");
        assert_old_then_zeros(&got, b"", 100, 3);
    });
}

/// Btrfs: after a failed sync the page cache reverts to the durable content.
#[test]
fn btrfs_failed_sync_reverts_the_page_cache() {
    block_on(async {
        let fs = SimFs::with_config(
            4,
            SimConfig {
                profile: SyncFailureProfile::Btrfs,
                ..SimConfig::default()
            },
        );
        let path = Path::new("/f");
        let old = pattern(1, 300);
        create_durable(&fs, path, &old).await.unwrap();
        let f = fs.open(path, rw()).await.unwrap();
        f.write_all_at(&pattern(4, 5000), 100).await.unwrap();
        fs.set_faults(FaultConfig {
            sync_fail: 1.0,
            ..FaultConfig::none()
        });
        assert!(f.sync_data().await.is_err());
        fs.set_faults(FaultConfig::none());
        assert!(read_all(&fs, path).await.unwrap() == Some(old.clone()));
        assert!(after_power_loss(&fs, path).await == Some(old));
    });
}

/// A faulty workload, for the determinism checks.
async fn faulty_workload(fs: &SimFs) {
    let _ = fs.create_dir_all(Path::new("/db")).await;
    for round in 0..6u8 {
        for i in 0..4u8 {
            let path = format!("/db/f{i}");
            let Ok(f) = fs.open(Path::new(&path), rw()).await else {
                continue;
            };
            let _ = f.write_at(&pattern(round ^ i, 3000), u64::from(i) * 1000).await;
            let mut buf = vec![0u8; 2000];
            let _ = f.read_at(&mut buf, 500).await;
            let _ = f.sync_data().await;
        }
        let _ = fs.rename(Path::new("/db/f0"), Path::new("/db/g")).await;
        let _ = fs.remove_file(Path::new("/db/f1")).await;
        let _ = fs.sync_dir(Path::new("/db")).await;
        if round % 3 == 2 {
            fs.crash(CrashKind::PowerLoss);
        }
    }
    for i in 0..4u8 {
        let _ = read_all(fs, Path::new(&format!("/db/f{i}"))).await;
    }
}

fn faulty(seed: u64) -> SimFs {
    sim(
        seed,
        FaultConfig {
            enospc_write: 0.05,
            enospc_metadata: 0.05,
            eio_read: 0.1,
            eio_write: 0.1,
            eio_open: 0.05,
            eio_rename: 0.1,
            eio_remove: 0.1,
            sync_fail: 0.2,
            lying_sync: 0.2,
            latent_sector_error: 0.1,
            bit_rot: 0.1,
            misdirected_write: 0.1,
            short_read: 0.2,
            writeback: 0.3,
            torn_garbage: 0.5,
            eio_write_after_effect: 0.05,
            eio_set_len_after_effect: 0.05,
            eio_rename_after_effect: 0.05,
            eio_remove_after_effect: 0.05,
            eio_create_after_effect: 0.05,
            sync_fail_after_persist: 0.05,
        },
        512,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// (f) The same seed and the same calls give the same trace and hash.
    #[test]
    fn same_seed_same_trace(seed in any::<u64>()) {
        let (a, b) = (faulty(seed), faulty(seed));
        block_on(faulty_workload(&a));
        block_on(faulty_workload(&b));
        prop_assert_eq!(a.trace_hash(), b.trace_hash());
        prop_assert_eq!(a.trace(), b.trace());
        prop_assert_eq!(a.counters(), b.counters());
        prop_assert!(!a.trace().is_empty());
    }
}

/// (f) Different seeds give different runs for a workload that hits faults.
#[test]
fn different_seed_different_trace() {
    let hashes: Vec<u64> = (0..4)
        .map(|seed| {
            let fs = faulty(seed);
            block_on(faulty_workload(&fs));
            assert!(fs.counters().total() > 0, "the workload must hit faults");
            fs.trace_hash()
        })
        .collect();
    for i in 0..hashes.len() {
        for j in i + 1..hashes.len() {
            assert_ne!(hashes[i], hashes[j], "seeds {i} and {j} gave the same trace");
        }
    }
}

/// Without faults, the trace does not depend on anything but the calls: the
/// same calls on two fresh filesystems give the same hash.
#[test]
fn fault_free_runs_are_reproducible() {
    let run = |seed| {
        let fs = SimFs::new(seed);
        block_on(async {
            create_durable(&fs, Path::new("/x/y"), &pattern(5, 10_000))
                .await
                .unwrap();
            let e = fs
                .open(Path::new("/nope/z"), OpenOptions::new().read(true))
                .await
                .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::NotFound);
        });
        fs.trace_hash()
    };
    assert_eq!(run(9), run(9));
}
