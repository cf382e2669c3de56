//! The eight small cases of STORAGE-FAULTS.md ("Small cases that find real
//! bugs"). Each test shows that the bad outcome is reachable (some seed in
//! `0..SEEDS` produces it) and that the good discipline prevents it (no seed
//! produces it).
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::{create_durable, pattern, read_all, rw, sim, some, writeback, C};
use futures::executor::block_on;
use simfs::{CrashKind, FaultConfig, File, Fs, SimFs};

const SEEDS: u64 = 200;

/// The seeds in `0..SEEDS` for which `bad` holds.
fn seeds_where(mut bad: impl FnMut(u64) -> bool) -> Vec<u64> {
    (0..SEEDS).filter(|&s| bad(s)).collect()
}

fn p(s: &str) -> &Path {
    Path::new(s)
}

/// Case 1: create + write + fsync(file), no fsync(dir), power loss: the file can
/// be gone. With fsync(dir) it is always there.
#[test]
fn case1_create_without_dir_fsync_can_vanish() {
    let run = |seed, sync_dir: bool| {
        block_on(async {
            let fs = sim(seed, writeback(0.5), 4096);
            fs.create_dir_all(p("/db")).await.unwrap();
            fs.sync_dir(p("/")).await.unwrap();
            fs.sync_dir(p("/db")).await.unwrap();
            let f = fs.open(p("/db/new"), rw()).await.unwrap();
            f.write_all_at(&pattern(1, 100), 0).await.unwrap();
            f.sync_data().await.unwrap();
            if sync_dir {
                fs.sync_dir(p("/db")).await.unwrap();
            }
            fs.crash(CrashKind::PowerLoss);
            read_all(&fs, p("/db/new")).await.unwrap()
        })
    };
    let gone = seeds_where(|s| run(s, false).is_none());
    assert!(!gone.is_empty(), "the unsynced name never vanished");
    let kept = seeds_where(|s| run(s, false).is_some());
    assert!(!kept.is_empty(), "the unsynced name never survived");
    for seed in 0..SEEDS {
        assert_eq!(C(run(seed, true)), some(&pattern(1, 100)), "seed {seed}");
    }
}

/// Case 2: Write a temp file and rename it over the final one without fsync(temp):
/// after a power loss the final file can be empty or partial even though the
/// rename itself was made durable. With fsync(temp) before the rename, the
/// final file is always complete.
#[test]
fn case2_rename_over_without_file_fsync_is_empty_or_partial() {
    let new = pattern(2, 3 * 4096 + 100);
    let old = pattern(1, 500);
    let run = |seed, sync_temp: bool| {
        block_on(async {
            let fs = sim(seed, writeback(0.2), 4096);
            create_durable(&fs, p("/final"), &old).await.unwrap();
            let t = fs.open(p("/final.tmp"), rw()).await.unwrap();
            t.write_all_at(&new, 0).await.unwrap();
            if sync_temp {
                t.sync_data().await.unwrap();
            }
            fs.rename(p("/final.tmp"), p("/final")).await.unwrap();
            fs.sync_dir(p("/")).await.unwrap();
            fs.crash(CrashKind::PowerLoss);
            read_all(&fs, p("/final")).await.unwrap()
        })
    };
    let mut empty = 0;
    let mut partial = 0;
    for seed in 0..SEEDS {
        let got = run(seed, false).expect("the rename was durable");
        assert!(got != old, "seed {seed}: the durable rename was undone");
        if got.is_empty() {
            empty += 1;
        } else if got != new {
            partial += 1;
        }
    }
    assert!(empty + partial > 0, "the final file was always complete");
    assert!(empty > 0, "never empty");
    assert!(partial > 0, "never partial");
    for seed in 0..SEEDS {
        assert_eq!(C(run(seed, true)), some(&new), "seed {seed}");
    }
}

/// Case 3: rename, power loss before fsync(dir): the old name can be back. After
/// fsync(dir), never.
#[test]
fn case3_rename_without_dir_fsync_can_revert() {
    let data = pattern(3, 2000);
    let run = |seed, sync_dir: bool| {
        block_on(async {
            let fs = sim(seed, writeback(0.5), 4096);
            create_durable(&fs, p("/d/a"), &data).await.unwrap();
            fs.rename(p("/d/a"), p("/d/b")).await.unwrap();
            if sync_dir {
                fs.sync_dir(p("/d")).await.unwrap();
            }
            fs.crash(CrashKind::PowerLoss);
            (
                read_all(&fs, p("/d/a")).await.unwrap(),
                read_all(&fs, p("/d/b")).await.unwrap(),
            )
        })
    };
    let back = seeds_where(|s| run(s, false) == (Some(data.clone()), None));
    assert!(!back.is_empty(), "the old name never came back");
    for seed in 0..SEEDS {
        let (a, b) = run(seed, true);
        assert_eq!((C(a), C(b)), (C(None), some(&data)), "seed {seed}");
    }
}

/// Case 4: unlink s1, s2, s3 without fsync(dir): any subset survives, including
/// sets with a hole that no in-order execution gives (s1 and s3 without s2,
/// or s2 alone, ...). After fsync(dir) all three are gone.
#[test]
fn case4_unlinks_without_dir_fsync_leave_holes() {
    let run = |seed, sync_dir: bool| {
        block_on(async {
            let fs = sim(seed, writeback(0.0), 4096);
            for s in ["/log/s1", "/log/s2", "/log/s3"] {
                create_durable(&fs, p(s), &pattern(4, 100)).await.unwrap();
            }
            for s in ["/log/s1", "/log/s2", "/log/s3"] {
                fs.remove_file(p(s)).await.unwrap();
            }
            if sync_dir {
                fs.sync_dir(p("/log")).await.unwrap();
            }
            fs.crash(CrashKind::PowerLoss);
            let mut alive = BTreeSet::new();
            for e in fs.read_dir(p("/log")).await.unwrap() {
                alive.insert(e.name);
            }
            alive
        })
    };
    let set = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    // In-order removal of a prefix of s1, s2, s3 leaves a suffix.
    let in_order = [set(&["s1", "s2", "s3"]), set(&["s2", "s3"]), set(&["s3"]), set(&[])];
    let mut seen = BTreeSet::new();
    for seed in 0..SEEDS {
        seen.insert(run(seed, false).into_iter().collect::<Vec<_>>());
    }
    let holes: Vec<_> = seen
        .iter()
        .filter(|v| !in_order.contains(&v.iter().cloned().collect()))
        .collect();
    assert!(!holes.is_empty(), "no hole among {seen:?}");
    for seed in 0..SEEDS {
        assert!(run(seed, true).is_empty(), "seed {seed}");
    }
}

/// Case 5: Truncate a torn tail, power loss before fsync: the tail is back. With
/// fsync after the truncation it stays cut.
#[test]
fn case5_truncation_without_fsync_brings_the_tail_back() {
    let good = pattern(5, 3000);
    let mut with_tail = good.clone();
    with_tail.extend_from_slice(&[0xAB; 700]); // a torn, garbage record
    let run = |seed, sync: bool| {
        block_on(async {
            let fs = sim(seed, writeback(0.5), 512);
            create_durable(&fs, p("/wal"), &with_tail).await.unwrap();
            // Recovery cuts the garbage.
            let f = fs.open(p("/wal"), rw()).await.unwrap();
            f.set_len(good.len() as u64).await.unwrap();
            if sync {
                f.sync_data().await.unwrap();
            }
            fs.crash(CrashKind::PowerLoss);
            read_all(&fs, p("/wal")).await.unwrap()
        })
    };
    let back = seeds_where(|s| run(s, false) == Some(with_tail.clone()));
    assert!(!back.is_empty(), "the truncated tail never came back");
    for seed in 0..SEEDS {
        assert_eq!(C(run(seed, true)), some(&good), "seed {seed}");
    }
}

/// Case 6: Preallocate, write records into the preallocated space without fsync,
/// power loss: zero-filled regions are possible, also between records that
/// survived. With fsync of the records, none.
#[test]
fn case6_preallocated_log_has_zero_regions() {
    const REC: usize = 4096;
    const N: usize = 4;
    let run = |seed, sync: bool| {
        block_on(async {
            let fs = sim(seed, writeback(0.3), 4096);
            create_durable(&fs, p("/log"), b"").await.unwrap();
            let f = fs.open(p("/log"), rw()).await.unwrap();
            f.allocate((REC * 8) as u64).await.unwrap();
            f.sync_data().await.unwrap();
            for i in 0..N {
                f.write_all_at(&pattern(i as u8 + 10, REC), (i * REC) as u64)
                    .await
                    .unwrap();
            }
            if sync {
                f.sync_data().await.unwrap();
            }
            fs.crash(CrashKind::PowerLoss);
            let got = read_all(&fs, p("/log")).await.unwrap().expect("durable");
            assert_eq!(got.len(), REC * 8, "the allocation was durable");
            // Per record: written (true) or zeros (false); nothing else.
            (0..N)
                .map(|i| {
                    let r = &got[i * REC..(i + 1) * REC];
                    if r == pattern(i as u8 + 10, REC).as_slice() {
                        true
                    } else {
                        assert!(r.iter().all(|&b| b == 0), "seed {seed}: record {i} is garbage");
                        false
                    }
                })
                .collect::<Vec<bool>>()
        })
    };
    let mut zero_somewhere = 0;
    let mut zero_between = 0;
    for seed in 0..SEEDS {
        let recs = run(seed, false);
        if recs.contains(&false) {
            zero_somewhere += 1;
        }
        // A zero record followed by a surviving one.
        if recs.windows(2).any(|w| !w[0] && w[1]) {
            zero_between += 1;
        }
    }
    assert!(zero_somewhere > 0, "records always survived");
    assert!(zero_between > 0, "never a zero record before a surviving one");
    for seed in 0..SEEDS {
        assert_eq!(run(seed, true), vec![true; N], "seed {seed}");
    }
}

/// Case 7: fsync fails, the next fsync returns Ok: the window is not durable
/// although it is still readable before the crash. Rewriting the window and
/// syncing again (the correct reaction) makes it durable.
#[test]
fn case7_fsync_failure_then_ok_is_not_durable() {
    let window = pattern(7, 5000);
    let run = |seed, rewrite: bool| {
        block_on(async {
            let fs = SimFs::new(seed);
            create_durable(&fs, p("/wal"), b"").await.unwrap();
            let f = fs.open(p("/wal"), rw()).await.unwrap();
            f.write_all_at(&window, 0).await.unwrap();
            fs.set_faults(FaultConfig {
                sync_fail: 1.0,
                ..FaultConfig::none()
            });
            assert!(f.sync_data().await.is_err());
            fs.set_faults(FaultConfig::none());
            if rewrite {
                f.write_all_at(&window, 0).await.unwrap();
            }
            f.sync_data().await.expect("the retried sync says Ok");
            assert_eq!(
                C(read_all(&fs, p("/wal")).await.unwrap()),
                some(&window),
                "readable before the crash"
            );
            fs.crash(CrashKind::PowerLoss);
            read_all(&fs, p("/wal")).await.unwrap()
        })
    };
    let lost = seeds_where(|s| run(s, false) != Some(window.clone()));
    assert_eq!(lost.len() as u64, SEEDS, "the retried fsync must never be trusted");
    for seed in 0..SEEDS {
        assert_eq!(C(run(seed, true)), some(&window), "seed {seed}");
    }
}

/// Case 8: Rotation: create segment N+1, write its header, power loss before
/// fsync(file) or fsync(dir): N+1 is absent, empty or torn. With both
/// fsyncs the header is always complete.
#[test]
fn case8_rotation_leaves_absent_empty_or_torn_segment() {
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    enum Seg {
        Absent,
        Empty,
        Torn,
        Complete,
    }
    let header = pattern(8, 2048);
    // Variant 0: no fsync at all; 1: fsync(file) only; 2: fsync(dir) only;
    // 3: both (the discipline).
    let run = |seed, variant: u8| {
        block_on(async {
            let fs = sim(seed, writeback(0.3), 512);
            create_durable(&fs, p("/wal/00001.seg"), &pattern(1, 4096))
                .await
                .unwrap();
            let f = fs.open(p("/wal/00002.seg"), rw()).await.unwrap();
            f.write_all_at(&header, 0).await.unwrap();
            if variant & 1 == 1 {
                f.sync_data().await.unwrap();
            }
            if variant & 2 == 2 {
                fs.sync_dir(p("/wal")).await.unwrap();
            }
            fs.crash(CrashKind::PowerLoss);
            assert_eq!(
                C(read_all(&fs, p("/wal/00001.seg")).await.unwrap()),
                some(&pattern(1, 4096)),
                "the durable segment must survive"
            );
            match read_all(&fs, p("/wal/00002.seg")).await.unwrap() {
                None => Seg::Absent,
                Some(v) if v.is_empty() => Seg::Empty,
                Some(v) if v == header => Seg::Complete,
                Some(_) => Seg::Torn,
            }
        })
    };
    let mut seen = BTreeSet::new();
    for variant in 0..3 {
        for seed in 0..SEEDS {
            seen.insert(run(seed, variant));
        }
    }
    let bad: Vec<_> = seen.iter().filter(|s| **s != Seg::Complete).collect();
    assert!(bad.len() >= 2, "only {seen:?} observed");
    assert!(seen.contains(&Seg::Absent), "{seen:?}");
    for seed in 0..SEEDS {
        assert_eq!(run(seed, 3), Seg::Complete, "seed {seed}");
    }
}
