//! Same seed, same trace: a sample of seeds run twice must give identical
//! trace hashes (SimFs's event trace combined with the workload's event log),
//! and a run on another thread must give the same hash too.

use sim_tests::config::Overrides;
use sim_tests::runner::run_seed;

#[test]
fn same_seed_same_trace() {
    for seed in [1u64, 7, 42, 99, 1234] {
        let a = run_seed(seed, Overrides::default());
        let b = run_seed(seed, Overrides::default());
        assert_ne!(a.trace_hash, 0, "seed {seed}: no trace");
        assert_eq!(
            a.trace_hash, b.trace_hash,
            "seed {seed} is not deterministic: replay with SIM_SEED={seed} cargo test -p sim-tests"
        );
        assert_eq!(a.coverage, b.coverage, "seed {seed}: coverage differs between runs");
    }
}

#[test]
fn thread_does_not_matter() {
    let here = run_seed(5, Overrides::default());
    let there = std::thread::spawn(|| run_seed(5, Overrides::default()).trace_hash).join();
    assert_eq!(there.ok(), Some(here.trace_hash));
}

#[test]
fn different_seeds_differ() {
    let a = run_seed(3, Overrides::default());
    let b = run_seed(4, Overrides::default());
    assert_ne!(a.trace_hash, b.trace_hash);
}
