//! Cancel safety: dropping a future the WAL returned, at any of its await
//! points, neither stops the WAL nor loses, reorders or duplicates an
//! acknowledged record. Each operation is polled `n` times on a filesystem
//! whose every operation yields once (so every poll that returns `Pending`
//! is one await point) and then dropped, for every `n` until the operation
//! completes without being dropped; afterwards the WAL must take appends,
//! serve every acknowledged record, and keep them across a power loss.
#![allow(clippy::unwrap_used)]

mod common;

use std::future::Future;
use std::task::{Context, Poll};

use common::{collect, open, payload, yielding};
use futures::executor::block_on;
use simfs::{CrashKind, SimFs};
use wal::{Options, SyncPolicy, Wal};

/// The operation whose future is dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Append,
    AppendBatch,
    Sync,
    Prune,
    Truncate,
}

const OPS: [Op; 5] = [Op::Append, Op::AppendBatch, Op::Sync, Op::Prune, Op::Truncate];

/// Records filled before the operation; 4 per segment, so the log is
/// segments `0..=3`, `4..=7` (sealed) and `8..=9` (active).
const FILLED: u64 = 10;
/// `prune_through` and `truncate_after` targets.
const PRUNE_K: u64 = 5;
const TRUNCATE_K: u64 = 6;
/// Appends after the dropped operation.
const AFTER: u64 = 3;
/// More polls than any operation here needs (a bound, not a guess: the
/// loop asserts that it ended by completion).
const MAX_POLLS: usize = 400;

fn policies() -> Vec<(&'static str, Options)> {
    let base = Options::default().segment_max_records(4);
    vec![
        ("always", base.clone()),
        ("manual", base.clone().sync_policy(SyncPolicy::Manual)),
        (
            "manual+buffer",
            base.sync_policy(SyncPolicy::Manual).write_buffer_bytes(4096),
        ),
    ]
}

/// Polls `fut` up to `polls` times; drops it if it is still pending.
fn poll_then_drop<T>(fut: impl Future<Output = T>, polls: usize) -> Option<T> {
    let mut fut = Box::pin(fut);
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    for _ in 0..polls {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return Some(v);
        }
    }
    None
}

/// What the dropped (or finished) operation may have done to the log.
struct Expect {
    /// Acknowledged records, by index.
    acked: Vec<(u64, Vec<u8>)>,
    /// Records of a dropped append: each in the log at most once, at its
    /// place right after the filled records, or not at all.
    maybe: Vec<Vec<u8>>,
    /// A dropped prune may have removed records up to here.
    maybe_pruned_through: Option<u64>,
    /// A dropped truncation may have removed records above this: the
    /// newest first, so what stays above it is a prefix.
    maybe_truncated_after: Option<u64>,
}

/// Runs `op` dropped after `polls` polls; `Some(dropped)` whether it was
/// dropped, after checking the WAL; `None` if it completed.
fn run(op: Op, name: &str, opts: &Options, polls: usize, seed: u64) -> (bool, u64) {
    block_on(async {
        let fs = SimFs::with_config(seed, yielding());
        let wal = open(&fs, opts.clone()).await.unwrap();
        let mut acked = Vec::new();
        for i in 0..FILLED {
            let p = payload(i, 20);
            assert_eq!(wal.append(p.clone()).await.unwrap(), i);
            acked.push((i, p));
        }
        let mut expect = Expect {
            acked,
            maybe: Vec::new(),
            maybe_pruned_through: None,
            maybe_truncated_after: None,
        };
        let dropped = apply(&wal, op, polls, &mut expect);
        let ctx = format!("{name} {op:?} dropped after {polls} polls");
        let mut after = Vec::new();
        for j in 0..AFTER {
            let p = format!("after-{j}").into_bytes();
            let i = wal
                .append(p.clone())
                .await
                .unwrap_or_else(|e| panic!("{ctx}: append: {e}"));
            after.push((i, p));
        }
        for w in after.windows(2) {
            assert_eq!(w[0].0 + 1, w[1].0, "{ctx}: appends after it not dense");
        }
        let log = collect(&wal).await.unwrap_or_else(|e| panic!("{ctx}: scan: {e}"));
        check(&ctx, &log, &expect, &after);
        for (i, p) in &after {
            assert_eq!(&wal.read(*i).await.unwrap(), p, "{ctx}: read {i}");
        }
        let resumes = wal.stats().await.resumes;
        wal.sync().await.unwrap_or_else(|e| panic!("{ctx}: sync: {e}"));
        drop(wal);
        fs.crash(CrashKind::PowerLoss);
        let wal = open(&fs, opts.clone())
            .await
            .unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
        let reopened = collect(&wal).await.unwrap();
        assert_eq!(reopened, log, "{ctx}: the log changed across a power loss");
        (dropped, resumes)
    })
}

/// Starts `op`, drops it after `polls` polls, and notes what it may have
/// done (or, if it completed, what it did) in `expect`. Returns whether it
/// was dropped.
fn apply(wal: &Wal<SimFs>, op: Op, polls: usize, expect: &mut Expect) -> bool {
    let done = match op {
        Op::Append => {
            let p = b"cancelled".to_vec();
            match poll_then_drop(wal.append(p.clone()), polls) {
                Some(r) => {
                    expect.acked.push((r.unwrap(), p));
                    true
                }
                None => {
                    expect.maybe.push(p);
                    false
                }
            }
        }
        Op::AppendBatch => {
            let batch: Vec<Vec<u8>> = (0..3).map(|k| format!("batch-{k}").into_bytes()).collect();
            match poll_then_drop(wal.append_batch(batch.clone()), polls) {
                Some(r) => {
                    let first = r.unwrap();
                    expect.acked.extend((first..).zip(batch));
                    true
                }
                None => {
                    expect.maybe.extend(batch);
                    false
                }
            }
        }
        Op::Sync => poll_then_drop(wal.sync(), polls).map(|r| r.unwrap()).is_some(),
        Op::Prune => match poll_then_drop(wal.prune_through(PRUNE_K), polls) {
            Some(r) => {
                let first = r.unwrap();
                expect.acked.retain(|(i, _)| *i >= first);
                true
            }
            None => {
                expect.maybe_pruned_through = Some(PRUNE_K);
                false
            }
        },
        Op::Truncate => match poll_then_drop(wal.truncate_after(TRUNCATE_K), polls) {
            Some(r) => {
                r.unwrap();
                expect.acked.retain(|(i, _)| *i <= TRUNCATE_K);
                true
            }
            None => {
                expect.maybe_truncated_after = Some(TRUNCATE_K);
                false
            }
        },
    };
    !done
}

/// The log after the operation and the appends after it.
fn check(ctx: &str, log: &[(u64, Vec<u8>)], expect: &Expect, after: &[(u64, Vec<u8>)]) {
    for w in log.windows(2) {
        assert_eq!(w[0].0 + 1, w[1].0, "{ctx}: the log is not dense: {log:?}");
    }
    let at = |i: u64| log.iter().find(|(j, _)| *j == i).map(|(_, p)| p);
    for (i, p) in after {
        assert_eq!(at(*i), Some(p), "{ctx}: append after it lost at {i}: {log:?}");
    }
    let first = log.first().map_or(0, |r| r.0);
    for (i, p) in &expect.acked {
        let pruned = expect.maybe_pruned_through.is_some_and(|k| *i <= k) && *i < first;
        let truncated = expect.maybe_truncated_after.is_some_and(|k| *i > k) && at(*i) != Some(p);
        if pruned || truncated {
            continue;
        }
        assert_eq!(at(*i), Some(p), "{ctx}: acknowledged record {i} lost: {log:?}");
    }
    if let Some(k) = expect.maybe_truncated_after {
        // Of the records above the cut, a prefix stays (the truncation
        // removes the newest segments first): none kept after one gone.
        let kept: Vec<bool> = expect
            .acked
            .iter()
            .filter(|(i, _)| *i > k)
            .map(|(i, p)| at(*i) == Some(p))
            .collect();
        assert!(
            kept.windows(2).all(|w| w[0] || !w[1]),
            "{ctx}: a truncation left a hole: {log:?}"
        );
    }
    // A dropped append's records: all of them right after the filled
    // records, or none; never twice.
    if !expect.maybe.is_empty() {
        let found: Vec<&Vec<u8>> = log
            .iter()
            .map(|(_, p)| p)
            .filter(|p| expect.maybe.contains(p))
            .collect();
        assert!(
            found.is_empty() || found.len() == expect.maybe.len(),
            "{ctx}: a dropped append half in the log: {log:?}"
        );
        if !found.is_empty() {
            let pos = log.iter().position(|(_, p)| *p == expect.maybe[0]).unwrap();
            assert_eq!(
                log[pos].0, FILLED,
                "{ctx}: a dropped append at the wrong index: {log:?}"
            );
        }
    }
    assert!(log.len() <= 64, "{ctx}: records from nowhere: {log:?}");
}

/// The acceptance test: every operation, dropped at every await point, under
/// each sync policy. Counts the drops and the resumes they caused, and
/// asserts both happened for every operation that changes files.
#[test]
fn dropping_any_future_at_any_await_point_keeps_the_wal_and_every_acknowledged_record() {
    for (name, opts) in policies() {
        for op in OPS {
            let (mut drops, mut resumes) = (0u64, 0u64);
            let mut completed = false;
            for polls in 1..MAX_POLLS {
                let (dropped, r) = run(op, name, &opts, polls, 7 + polls as u64);
                if !dropped {
                    completed = true;
                    break;
                }
                drops += 1;
                resumes += r;
            }
            assert!(completed, "{name} {op:?}: not done within {MAX_POLLS} polls");
            eprintln!("{name} {op:?}: dropped at {drops} await points, {resumes} resumes");
            // Without an await point there is nothing to drop mid-way: a sync
            // under `Always` (nothing to write), an append into the write
            // buffer (no I/O). And a dropped sync needs no resume: an fsync
            // or a buffer write dropped mid-way is repeated by the next one.
            let awaits = match op {
                Op::Sync => name != "always",
                Op::Append | Op::AppendBatch => name != "manual+buffer",
                Op::Prune | Op::Truncate => true,
            };
            if awaits {
                assert!(drops > 0, "{name} {op:?}: never dropped mid-way");
            }
            if awaits && op != Op::Sync {
                assert!(resumes > 0, "{name} {op:?}: no drop needed a resume");
            }
        }
    }
}

/// The appends a dropped leader had taken into its group belong to the
/// engine, not to the leader: the follower waiting in that group is
/// answered and its record is in the log, at every await point of the
/// leader's group.
#[test]
fn a_follower_in_a_dropped_leaders_group_is_answered() {
    let mut dropped_in_group = 0;
    for polls in 1..MAX_POLLS {
        let done = block_on(async {
            let fs = SimFs::with_config(40 + polls as u64, yielding());
            let wal = open(&fs, Options::default()).await.unwrap();
            let waker = futures::task::noop_waker();
            let mut cx = Context::from_waker(&waker);
            let mut a = Box::pin(wal.append(b"a".to_vec()));
            let mut b = Box::pin(wal.append(b"b".to_vec()));
            let mut c = Box::pin(wal.append(b"c".to_vec()));
            // `a` leads a group of its own; `b` and `c` queue behind it.
            assert!(a.as_mut().poll(&mut cx).is_pending());
            assert!(b.as_mut().poll(&mut cx).is_pending());
            assert!(c.as_mut().poll(&mut cx).is_pending());
            assert_eq!(a.await.unwrap(), 0);
            // `b` now leads the group of `b` and `c`; drop it after `polls`.
            let mut finished = false;
            for _ in 0..polls {
                if let Poll::Ready(r) = b.as_mut().poll(&mut cx) {
                    assert_eq!(r.unwrap(), 1);
                    finished = true;
                    break;
                }
            }
            drop(b);
            let ic = c
                .await
                .unwrap_or_else(|e| panic!("dropped after {polls} polls: the follower got {e}"));
            assert_eq!(ic, 2);
            assert_eq!(wal.read(2).await.unwrap(), b"c");
            assert_eq!(
                wal.read(1).await.unwrap(),
                b"b",
                "the dropped leader's record, written with its group"
            );
            drop(wal);
            fs.crash(CrashKind::PowerLoss);
            let wal = open(&fs, Options::default()).await.unwrap();
            let log: Vec<Vec<u8>> = collect(&wal).await.unwrap().into_iter().map(|r| r.1).collect();
            assert_eq!(
                log,
                [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()],
                "after {polls} polls"
            );
            finished
        });
        if done {
            break;
        }
        dropped_in_group += 1;
    }
    assert!(dropped_in_group > 0, "the leader was never dropped mid-group");
}

#[test]
fn a_dropped_append_that_creates_a_segment_resumes_under_absolute_consistency() {
    // The append that creates a segment (the first of a new log, or the
    // first after a rotation by record count) dropped at every await point:
    // the segment may exist with its header unwritten. Resuming is not a
    // crash, so that torn segment is the dropped append's own unfinished
    // write: `AbsoluteConsistency` (which refuses torn tails after a crash)
    // must not stop the WAL over it, and a new log whose only header was
    // never written keeps its id (found by the simulation's cancellation
    // action: seeds 618 and 882 of the sweep).
    let opts = Options::default()
        .segment_max_records(4)
        .recovery_mode(wal::RecoveryMode::AbsoluteConsistency);
    for filled in [0u64, 4] {
        let mut dropped_any = false;
        for polls in 1..MAX_POLLS {
            let (dropped, done) = block_on(async {
                let fs = SimFs::with_config(polls as u64, yielding());
                let wal = open(&fs, opts.clone()).await.unwrap();
                for i in 0..filled {
                    wal.append(payload(i, 20)).await.unwrap();
                }
                let ctx = format!("{filled} filled, append dropped after {polls} polls");
                let r = poll_then_drop(wal.append(payload(filled, 20)), polls);
                let mut want: Vec<(u64, Vec<u8>)> = (0..filled).map(|i| (i, payload(i, 20))).collect();
                let late = wal
                    .append(b"late".to_vec())
                    .await
                    .unwrap_or_else(|e| panic!("{ctx}: append: {e}"));
                let log = collect(&wal).await.unwrap_or_else(|e| panic!("{ctx}: scan: {e}"));
                if r.is_some() || log.len() as u64 == filled + 2 {
                    want.push((filled, payload(filled, 20)));
                }
                want.push((late, b"late".to_vec()));
                assert_eq!(log, want, "{ctx}");
                wal.sync().await.unwrap();
                drop(wal);
                fs.crash(CrashKind::PowerLoss);
                let wal = open(&fs, opts.clone())
                    .await
                    .unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
                assert_eq!(collect(&wal).await.unwrap(), want, "{ctx}: after a power loss");
                (r.is_none(), r.is_some())
            });
            dropped_any |= dropped;
            if done {
                break;
            }
        }
        assert!(dropped_any, "{filled} filled: no poll count dropped the append");
    }
}

#[test]
fn sync_writes_an_admitted_append_whose_caller_went_away() {
    // A follower admitted into the queue, then dropped while another call
    // held the writer: nobody leads its group. `sync` covers appends
    // admitted before it, theirs included: after it returns the record is
    // in the log and survives a power loss.
    for policy in [SyncPolicy::Manual, SyncPolicy::Always] {
        block_on(async {
            let fs = SimFs::with_config(7, yielding());
            let opts = Options::default().sync_policy(policy.clone());
            let wal = open(&fs, opts.clone()).await.unwrap();
            wal.append(b"first".to_vec()).await.unwrap();
            let waker = futures::task::noop_waker();
            let mut cx = Context::from_waker(&waker);
            // A rotation holds the writer across its awaits.
            let mut holder = Box::pin(wal.rotate());
            assert!(
                holder.as_mut().poll(&mut cx).is_pending(),
                "the rotation finished at once"
            );
            // The follower is admitted, finds the writer taken, and is dropped.
            let mut follower = Box::pin(wal.append(b"orphan".to_vec()));
            assert!(follower.as_mut().poll(&mut cx).is_pending());
            drop(follower);
            holder.await.unwrap();
            wal.sync().await.unwrap();
            assert_eq!(wal.next_index(), 2, "{policy:?}: the orphan is readable after sync");
            assert_eq!(wal.read(1).await.unwrap(), b"orphan".to_vec());
            drop(wal);
            fs.crash(CrashKind::PowerLoss);
            let wal = open(&fs, opts).await.unwrap();
            let log = collect(&wal).await.unwrap();
            assert_eq!(log, vec![(0, b"first".to_vec()), (1, b"orphan".to_vec())], "{policy:?}");
        });
    }
}

/// A snapshot install whose write failed leaves the emptied log at the
/// install index in memory only (the meta file still holds the old
/// low-water mark). An append dropped at any await point after that makes
/// the next call rebuild memory from the files, which end below the
/// install index: that is the same empty log, not lost records, and the
/// WAL must go on at the install index (sim seed 5184 stopped it).
#[test]
fn a_dropped_append_after_a_failed_snapshot_install_goes_on() {
    const INSTALL_AT: u64 = 100;
    let opts = Options::default().sync_policy(SyncPolicy::Always);
    let mut resumed = 0;
    for polls in 1..64 {
        let finished = block_on(async {
            let fs = SimFs::with_config(40 + polls as u64, yielding());
            let wal = open(&fs, opts.clone()).await.unwrap();
            for i in 0..3 {
                wal.append(payload(i, 20)).await.unwrap();
            }
            assert_eq!(wal.prune_through(2).await.unwrap(), 3);
            fs.set_faults(simfs::FaultConfig {
                eio_open: 1.0,
                ..simfs::FaultConfig::none()
            });
            let failed = wal.append_at(INSTALL_AT, b"install".to_vec()).await;
            assert!(
                matches!(failed, Err(wal::Error::AppendFailed { .. })),
                "polls {polls}: {failed:?}"
            );
            fs.set_faults(simfs::FaultConfig::none());
            assert_eq!(wal.next_index(), INSTALL_AT, "polls {polls}");
            let done = poll_then_drop(wal.append_at(INSTALL_AT, b"dropped".to_vec()), polls);
            let i = wal
                .append(b"after".to_vec())
                .await
                .unwrap_or_else(|e| panic!("polls {polls}: append after the drop: {e}"));
            let log = collect(&wal).await.unwrap();
            let finished = done.is_some();
            match done {
                Some(r) => {
                    assert_eq!(r.unwrap(), INSTALL_AT, "polls {polls}");
                    assert_eq!(i, INSTALL_AT + 1, "polls {polls}");
                }
                None => assert!(
                    i == INSTALL_AT || i == INSTALL_AT + 1,
                    "polls {polls}: after the drop the log goes on at {i}"
                ),
            }
            assert_eq!(log.last().map(|r| r.0), Some(i), "polls {polls}: {log:?}");
            resumed += wal.stats().await.resumes;
            wal.sync().await.unwrap();
            drop(wal);
            fs.crash(CrashKind::PowerLoss);
            let wal = open(&fs, opts.clone()).await.unwrap();
            assert_eq!(collect(&wal).await.unwrap(), log, "polls {polls}: the log changed");
            finished
        });
        if finished {
            break;
        }
    }
    assert!(resumed > 0, "no drop made the WAL resume from the files");
}
