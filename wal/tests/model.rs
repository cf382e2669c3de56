//! Proptest model test: random sequences of appends, batches, reads,
//! iteration, rotation, syncs, reopens, prunes, truncations, compactions and
//! crashes, checked against the shared model of the log (`wal-model`).
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use futures::executor::block_on;
use proptest::prelude::*;
use simfs::{CrashKind, FaultConfig, SimConfig, SimFs};
use wal::{Options, SyncPolicy, Wal};
use wal_model::{Crash, Log, Mismatch};

#[derive(Clone, Debug)]
enum Op {
    Append(usize),
    AppendAt(usize),
    Batch(Vec<usize>),
    Read(u64),
    Iterate(u64),
    Rotate,
    Sync,
    Reopen,
    Crash(bool),
    Prune(u64),
    Truncate(u64),
    Compact,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0usize..600).prop_map(Op::Append),
        2 => (0usize..100).prop_map(Op::AppendAt),
        3 => proptest::collection::vec(0usize..300, 1..6).prop_map(Op::Batch),
        3 => any::<u64>().prop_map(Op::Read),
        1 => any::<u64>().prop_map(Op::Iterate),
        1 => Just(Op::Rotate),
        2 => Just(Op::Sync),
        1 => Just(Op::Reopen),
        1 => any::<bool>().prop_map(Op::Crash),
        1 => any::<u64>().prop_map(Op::Prune),
        1 => any::<u64>().prop_map(Op::Truncate),
        1 => Just(Op::Compact),
    ]
}

fn data(i: u64, len: usize) -> Vec<u8> {
    payload(i, len)
}

/// Panics with the model's message (records cut short) on a mismatch.
fn ok<T>(r: Result<T, Mismatch<Vec<u8>>>, what: &str) -> T {
    r.unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Checks the log an open recovered against the model (which takes it).
async fn check_recovered(w: &Wal<SimFs>, model: &mut Log<Vec<u8>>, what: &str) {
    let log = collect(w).await.unwrap();
    let r = model.recovered(w.first_index(), w.next_index(), log.iter().map(|(i, r)| (*i, r)));
    ok(r, what);
    assert_eq!(w.next_index(), model.next());
}

async fn run(seed: u64, manual: bool, ops: Vec<Op>) {
    let cfg = SimConfig {
        faults: FaultConfig {
            writeback: 0.2,
            torn_garbage: 0.3,
            ..FaultConfig::none()
        },
        atomic_write_unit_bytes: if seed % 2 == 0 { 512 } else { 4096 },
        ..SimConfig::default()
    };
    let fs = SimFs::with_config(seed, cfg);
    let opts = Options::default()
        .segment_size_bytes(16 << 10)
        .segment_max_records(9)
        .first_index(seed % 3)
        .sync_policy(if manual { SyncPolicy::Manual } else { SyncPolicy::Always });
    let mut wal = Some(Wal::open(fs.clone(), dir(), opts.clone()).await.unwrap());
    // Under `Always` every acknowledged record is durable.
    let durable = !manual;
    let mut model: Log<Vec<u8>> = Log::new(seed % 3);
    for op in ops {
        let w = wal.as_ref().unwrap();
        match op {
            Op::Append(len) => {
                let i = model.next();
                assert_eq!(w.append(data(i, len)).await.unwrap(), i);
                ok(model.acknowledge(vec![data(i, len)], durable), "append");
            }
            Op::AppendAt(len) => {
                let mut i = model.next();
                if model.reseatable() {
                    // Snapshot install: an emptied log may start higher.
                    i += 1;
                    ok(model.reseat(i), "append_at");
                } else {
                    assert!(w.append_at(i + 1, data(i, len)).await.is_err());
                }
                assert_eq!(w.append_at(i, data(i, len)).await.unwrap(), i);
                ok(model.acknowledge(vec![data(i, len)], durable), "append_at");
            }
            Op::Batch(lens) => {
                let i = model.next();
                let recs: Vec<Vec<u8>> = lens.iter().enumerate().map(|(k, &l)| data(i + k as u64, l)).collect();
                assert_eq!(w.append_batch(recs.clone()).await.unwrap(), i);
                ok(model.acknowledge(recs, durable), "append_batch");
            }
            Op::Read(x) => {
                let n = model.next() - model.first() + 1;
                let i = model.first() + x % n;
                match model.get(i) {
                    Some(expected) => assert_eq!(&w.read(i).await.unwrap(), expected),
                    None => assert!(w.read(i).await.is_err()),
                }
            }
            Op::Iterate(x) => {
                let n = model.next() - model.first() + 1;
                let from = model.first() + x % n;
                let mut it = w.iter_from(from).unwrap();
                let mut i = from;
                while let Some(r) = it.next().await {
                    let (idx, rec) = r.unwrap();
                    assert_eq!(idx, i);
                    assert_eq!(Some(&rec), model.get(i));
                    i += 1;
                }
                assert_eq!(i, model.next());
            }
            Op::Rotate => {
                w.rotate().await.unwrap();
                // Sealing makes the sealed data durable.
                model.synced();
            }
            Op::Sync => {
                w.sync().await.unwrap();
                model.synced();
            }
            Op::Reopen => {
                wal.take().unwrap().close().await.unwrap();
                model.synced();
                let w = Wal::open(fs.clone(), dir(), opts.clone()).await.unwrap();
                check_recovered(&w, &mut model, "reopen after close").await;
                wal = Some(w);
            }
            Op::Prune(x) => {
                let n = model.next() - model.first() + 2;
                let k = model.first() + x % n;
                let new_first = w.prune_through(k).await.unwrap();
                assert!(
                    new_first >= model.first() && new_first <= k + 1,
                    "prune {k} gave {new_first}"
                );
                if model.prune(k, new_first) {
                    // Emptied through k: the next index is k + 1.
                    assert_eq!(w.next_index(), k + 1);
                }
                assert_eq!(w.first_index(), model.first());
                assert_eq!(w.next_index(), model.next());
            }
            Op::Truncate(x) => {
                let n = model.next() - model.first() + 1;
                let from = model.first() + x % n;
                w.truncate_from(from).await.unwrap();
                ok(model.truncate(from), "truncate_from");
                assert_eq!(w.next_index(), model.next());
            }
            Op::Compact => {
                let before = collect(w).await.unwrap();
                let opts = wal::CompactionOptions::default()
                    .small_segment_bytes(1 << 20)
                    .max_output_bytes(1 << 20);
                w.compact(opts).await.unwrap();
                assert_eq!(collect(w).await.unwrap(), before);
            }
            Op::Crash(power) => {
                drop(wal.take());
                let kind = if power {
                    CrashKind::PowerLoss
                } else {
                    CrashKind::Process
                };
                fs.crash(kind);
                model.crash(if power { Crash::PowerLoss } else { Crash::Process });
                let w = Wal::open(fs.clone(), dir(), opts.clone()).await.unwrap();
                // Everything durable (and after a process crash everything
                // acknowledged) is there, then whole commit units of the
                // rest; what recovery serves is durable from now on.
                check_recovered(&w, &mut model, if power { "power loss" } else { "process crash" }).await;
                wal = Some(w);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(48),
        ..ProptestConfig::default()
    })]

    #[test]
    fn always_policy_matches_the_model(seed in any::<u64>(), ops in proptest::collection::vec(op(), 1..60)) {
        block_on(run(seed, false, ops));
    }

    #[test]
    fn manual_policy_matches_the_model(seed in any::<u64>(), ops in proptest::collection::vec(op(), 1..60)) {
        block_on(run(seed, true, ops));
    }
}
