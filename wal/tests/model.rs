//! Proptest model test: random sequences of appends, batches, reads,
//! iteration, rotation, syncs, reopens and crashes against an in-memory model.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use futures::executor::block_on;
use proptest::prelude::*;
use simfs::{CrashKind, FaultConfig, SimConfig, SimFs};
use wal::{Options, SyncPolicy, Wal};

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

/// The model: records known durable, then records appended but maybe lost.
struct Model {
    /// Emptied by a prune through its end: the next append_at may jump.
    reseatable: bool,
    first: u64,
    durable: Vec<Vec<u8>>,
    volatile: Vec<Vec<u8>>,
}

impl Model {
    fn next(&self) -> u64 {
        self.first + (self.durable.len() + self.volatile.len()) as u64
    }
    fn get(&self, i: u64) -> Option<&Vec<u8>> {
        let k = i.checked_sub(self.first)? as usize;
        self.durable
            .get(k)
            .or_else(|| self.volatile.get(k - self.durable.len().min(k)))
    }
}

fn data(i: u64, len: usize) -> Vec<u8> {
    payload(i, len)
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
    let opts = Options {
        segment_size_bytes: 16 << 10,
        segment_max_records: 9,
        first_index: seed % 3,
        sync_policy: if manual { SyncPolicy::Manual } else { SyncPolicy::Always },
        ..Options::default()
    };
    let mut wal = Some(Wal::open(fs.clone(), dir(), opts.clone()).await.unwrap());
    let mut model = Model {
        reseatable: false,
        first: seed % 3,
        durable: Vec::new(),
        volatile: Vec::new(),
    };
    for op in ops {
        let w = wal.as_ref().unwrap();
        match op {
            Op::Append(len) => {
                model.reseatable = false;
                let i = model.next();
                assert_eq!(w.append(data(i, len)).await.unwrap(), i);
                push(&mut model, manual, data(i, len));
            }
            Op::AppendAt(len) => {
                let mut i = model.next();
                if model.reseatable {
                    // Snapshot install: an emptied log may start higher.
                    i += 1;
                    model.first = i;
                    model.reseatable = false;
                } else {
                    assert!(w.append_at(i + 1, data(i, len)).await.is_err());
                }
                assert_eq!(w.append_at(i, data(i, len)).await.unwrap(), i);
                push(&mut model, manual, data(i, len));
            }
            Op::Batch(lens) => {
                model.reseatable = false;
                let i = model.next();
                let recs: Vec<Vec<u8>> = lens.iter().enumerate().map(|(k, &l)| data(i + k as u64, l)).collect();
                assert_eq!(w.append_batch(recs.clone()).await.unwrap(), i);
                for r in recs {
                    push(&mut model, manual, r);
                }
            }
            Op::Read(x) => {
                let n = model.next() - model.first + 1;
                let i = model.first + x % n;
                match model.get(i) {
                    Some(expected) => assert_eq!(&w.read(i).await.unwrap(), expected),
                    None => assert!(w.read(i).await.is_err()),
                }
            }
            Op::Iterate(x) => {
                let n = model.next() - model.first + 1;
                let from = model.first + x % n;
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
                let v = std::mem::take(&mut model.volatile);
                model.durable.extend(v);
            }
            Op::Sync => {
                w.sync().await.unwrap();
                let v = std::mem::take(&mut model.volatile);
                model.durable.extend(v);
            }
            Op::Reopen => {
                model.reseatable = false;
                wal.take().unwrap().close().await.unwrap();
                let v = std::mem::take(&mut model.volatile);
                model.durable.extend(v);
                wal = Some(Wal::open(fs.clone(), dir(), opts.clone()).await.unwrap());
            }
            Op::Prune(x) => {
                let n = model.next() - model.first + 2;
                let k = model.first + x % n;
                let new_first = w.prune_through(k).await.unwrap();
                assert!(
                    new_first >= model.first && new_first <= k + 1,
                    "prune {k} gave {new_first}"
                );
                if new_first >= model.next() {
                    // Emptied through k: the next index is k + 1.
                    assert_eq!(w.next_index(), k + 1);
                    model.durable.clear();
                    model.volatile.clear();
                    model.reseatable = true;
                } else {
                    let drop = (new_first - model.first) as usize;
                    let from_durable = drop.min(model.durable.len());
                    model.durable.drain(..from_durable);
                    model.volatile.drain(..drop - from_durable);
                }
                model.first = new_first;
                assert_eq!(w.first_index(), model.first);
            }
            Op::Truncate(x) => {
                let n = model.next() - model.first + 1;
                let from = model.first + x % n;
                w.truncate_from(from).await.unwrap();
                model.reseatable = false;
                let keep = (from - model.first) as usize;
                model.durable.truncate(keep);
                model.volatile.truncate(keep - model.durable.len());
                assert_eq!(w.next_index(), model.next());
            }
            Op::Compact => {
                let before = collect(w).await.unwrap();
                let opts = wal::CompactionOptions {
                    small_segment_bytes: 1 << 20,
                    max_output_bytes: 1 << 20,
                };
                w.compact(opts).await.unwrap();
                assert_eq!(collect(w).await.unwrap(), before);
            }
            Op::Crash(power) => {
                model.reseatable = false;
                drop(wal.take());
                fs.crash(if power {
                    CrashKind::PowerLoss
                } else {
                    CrashKind::Process
                });
                let w = Wal::open(fs.clone(), dir(), opts.clone()).await.unwrap();
                let log = collect(&w).await.unwrap();
                // Everything durable is there; then some prefix of the rest.
                let n = log.len();
                assert!(
                    n >= model.durable.len(),
                    "durable records lost: {n} < {}",
                    model.durable.len()
                );
                assert!(n <= model.durable.len() + model.volatile.len());
                if !power {
                    assert_eq!(
                        n,
                        model.durable.len() + model.volatile.len(),
                        "a process crash keeps the page cache"
                    );
                }
                for (k, (idx, rec)) in log.iter().enumerate() {
                    assert_eq!(*idx, model.first + k as u64);
                    assert_eq!(Some(rec), model.get(*idx));
                }
                // What recovery serves is durable from now on.
                let keep = n - model.durable.len();
                let v: Vec<Vec<u8>> = model.volatile.drain(..).take(keep).collect();
                model.durable.extend(v);
                wal = Some(w);
            }
        }
    }
}

fn push(model: &mut Model, manual: bool, rec: Vec<u8>) {
    if manual {
        model.volatile.push(rec);
    } else {
        model.durable.push(rec);
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
