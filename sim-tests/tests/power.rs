//! Proof of power: the oracle must catch real bugs. Each planted bug
//! (`sim_tests::broken`) must make the sweep fail within a bounded number of
//! seeds.

use sim_tests::broken::{Bug, FsBug, OpenBug, WalBug};
use sim_tests::config::{FaultClass, Overrides};
use sim_tests::runner::run_seed_with;
use wal::testing::Planted;

/// How many seeds a bug may survive.
const BUDGET: u64 = 40;

fn caught(bug: Bug) -> (u64, String) {
    caught_with(bug, Overrides::default())
}

fn caught_with(bug: Bug, ov: Overrides) -> (u64, String) {
    caught_within(bug, ov, BUDGET)
}

fn caught_within(bug: Bug, ov: Overrides, budget: u64) -> (u64, String) {
    for seed in 0..budget {
        let r = run_seed_with(seed, ov, bug.opener());
        if !r.passed() {
            return (seed, r.violations.join(" | "));
        }
    }
    panic!("{bug:?} survived {budget} seeds: the oracle is too weak");
}

/// The crash placements (and the tamper class) added after some of these
/// tests had found their seeds.
fn later_placements() -> u32 {
    FaultClass::CrashAfterStep.bit() | FaultClass::RecoveryStepCrashes.bit() | FaultClass::Tamper.bit()
}

fn check(bug: Bug) {
    let (seed, why) = caught(bug);
    println!("{bug:?} caught by seed {seed}: {why}");
}

#[test]
fn catches_ack_before_fsync() {
    check(Bug::Fs(FsBug::NoFsync));
}

#[test]
fn catches_missing_directory_fsync() {
    check(Bug::Fs(FsBug::NoDirSync));
}

#[test]
fn catches_retried_fsync() {
    // The planted bug only matters when an fsync fails: switch failing
    // fsyncs on in every seed (swarm testing alone draws them in a share of
    // seeds, and the first catching seed drifted around the budget as the
    // engine changed).
    let bug = Bug::Fs(FsBug::RetryFailedFsync);
    let force = Overrides {
        force: Some(FaultClass::SyncFail.bit()),
        ..Overrides::default()
    };
    let (seed, why) = caught_with(bug, force);
    println!("{bug:?} caught by seed {seed} (failing fsyncs forced on): {why}");
}

#[test]
fn catches_lost_sealed_segment() {
    check(Bug::Fs(FsBug::HideOldestSegment));
}

#[test]
fn catches_early_ack() {
    check(Bug::Wal(WalBug::EarlyAck));
}

#[test]
fn catches_dropped_record() {
    check(Bug::Wal(WalBug::DropRecord));
}

#[test]
fn catches_reordered_batch() {
    check(Bug::Wal(WalBug::ReverseBatch));
}

#[test]
fn catches_prune_without_low_water_mark() {
    check(Bug::Fs(FsBug::LoseMetaFile));
}

#[test]
fn catches_truncate_that_removes_nothing() {
    check(Bug::Wal(WalBug::TruncateNoop));
}

#[test]
fn catches_corruption_reported_without_damage() {
    check(Bug::Wal(WalBug::SpuriousCorruption));
}

#[test]
fn catches_recovery_that_cuts_durable_data_with_a_report() {
    // The bug only matters when recovery finds proof of durable records
    // past damage: bit rot, then crashes; even so only a few seeds of the
    // first 300 with the forcing catch it, and which ones drifts with every
    // change of schedule (iterators tailing the log, refused iter_from
    // during a prune, the embedding calls): the budget is 300 seeds, and
    // the crash placements added later (CrashAfterStep,
    // RecoveryStepCrashes) are off.
    let bug = Bug::Open(OpenBug::CutInsteadOfReport);
    let force = Overrides {
        force: Some(FaultClass::BitRot.bit() | FaultClass::PowerLoss.bit() | FaultClass::ProcessCrash.bit()),
        mask: Some(!later_placements()),
        ..Overrides::default()
    };
    let (seed, why) = caught_within(bug, force, 300);
    println!("{bug:?} caught by seed {seed} (bit rot and crashes forced on): {why}");
    let r = run_seed_with(seed, force, sim_tests::api::real_opener());
    assert!(r.passed(), "seed {seed} passes without the bug: {:?}", r.violations);
}

#[test]
fn catches_a_meta_rename_that_took_effect_taken_for_not_done() {
    // The bug needs a meta rename that fails after taking effect, then an
    // append below the abandoned low-water mark, then a crash: 36 seeds of
    // the first 20000 with the later crash placements off, too rare for a
    // search in a debug test. Which seed shows it drifts with every change
    // of schedule (535 found the engine bug, then 3346, then 828; since the
    // workload prunes exactly, 552 is the first): the test pins one and
    // checks that it passes without the bug.
    let bug = Bug::Fs(FsBug::MetaTmpAlwaysThere);
    let then = Overrides {
        mask: Some(!later_placements()),
        ..Overrides::default()
    };
    let seed = 552;
    let r = run_seed_with(seed, then, bug.opener());
    assert!(!r.passed(), "{bug:?} survived seed {seed}");
    println!("{bug:?} caught by seed {seed}: {}", r.violations.join(" | "));
    let clean = run_seed_with(seed, then, sim_tests::api::real_opener());
    assert!(
        clean.passed(),
        "seed {seed} passes without the bug: {:?}",
        clean.violations
    );
}

#[test]
fn catches_a_recovery_cut_that_is_not_fsynced() {
    // The planted bug leaves the unit recovery's cut rewrote (durable
    // records, then zeros) dirty. A later fsync of the segment covers it,
    // but when the next append seals the segment at once nothing does, and
    // a power loss that tears that unit with garbage takes the durable
    // records in it. It needs power losses and torn garbage: 2 seeds of
    // 2000 in the default sweep (6 with the crash placement and recovery
    // step pass of FaultClass::CrashAfterStep / RecoveryStepCrashes),
    // a few of 200 with the two forced on; crashes after a durability step
    // forced on as well, 4 of the first 120 (the first is seed 20).
    let bug = Bug::Engine(Planted::RecoveryCutNotSynced);
    let force = Overrides {
        force: Some(FaultClass::TornGarbage.bit() | FaultClass::PowerLoss.bit() | FaultClass::CrashAfterStep.bit()),
        ..Overrides::default()
    };
    let (seed, why) = caught_within(bug, force, 60);
    println!("{bug:?} caught by seed {seed} (torn garbage, power losses and crashes after a durability step forced on): {why}");
    // The switch is per thread and off again after the run.
    let r = run_seed_with(seed, force, sim_tests::api::real_opener());
    assert!(r.passed(), "seed {seed} fails without the bug: {:?}", r.violations);
}

#[test]
fn catches_prune_that_ignores_leases() {
    // The bug only shows when an iterator races a prune through the
    // segment it reads: half the seeds never prune while writers run, a
    // share never iterate (1 seed of the first 40 catches it without the
    // forcing). `lease_ops` makes the writers iterate and prune in every
    // seed, nothing else changes.
    let bug = Bug::Engine(Planted::PruneIgnoresLeases);
    let ov = Overrides {
        lease_ops: true,
        ..Overrides::default()
    };
    let (seed, why) = caught_with(bug, ov);
    println!("{bug:?} caught by seed {seed} (iterations and prunes forced on): {why}");
}

#[test]
fn catches_a_recovery_journal_that_is_not_fsynced() {
    // Recovery rewrites the unsynced tail of the active segment in place,
    // durable records included; its journal (FORMAT.md §8.5) is what makes
    // that safe. Planted: the journal is written but never fsynced, so a
    // power loss that tears the rewrite with garbage takes durable records
    // and their journal copy. The oracle excuses garbage in the rewrite only
    // together with a sync of the journal the device claimed and lost
    // (`damage::explain_unjournaled_rewrite`); with no sync claimed there
    // is no such entry. Needs power losses during recovery: 3 seeds of 2000
    // in the default sweep, 11 of the first 300 with torn garbage, power
    // losses and the recovery step pass forced on (the first is seed 45
    // since recovery reads every header first, which moved the schedule:
    // the budget here is 60).
    let bug = Bug::Engine(Planted::RecoveryJournalNotSynced);
    let force = Overrides {
        force: Some(
            FaultClass::TornGarbage.bit() | FaultClass::PowerLoss.bit() | FaultClass::RecoveryStepCrashes.bit(),
        ),
        ..Overrides::default()
    };
    let (seed, why) = caught_within(bug, force, 60);
    println!("{bug:?} caught by seed {seed} (torn garbage, power losses and the recovery step pass forced on): {why}");
    let r = run_seed_with(seed, force, sim_tests::api::real_opener());
    assert!(r.passed(), "seed {seed} fails without the bug: {:?}", r.violations);
}

#[test]
fn every_bug_has_a_test() {
    assert_eq!(Bug::ALL.len(), 23);
}

#[test]
fn catches_recovery_that_trusts_names() {
    // Issue 12's first finding, planted back: a sealed segment renamed to
    // cover older ones makes recovery remove them as compaction leftovers.
    // Only the tamper class renames files between runs: forced on.
    let bug = Bug::Engine(Planted::NamesTrusted);
    let force = Overrides {
        force: Some(FaultClass::Tamper.bit()),
        ..Overrides::default()
    };
    let (seed, why) = caught_within(bug, force, 40);
    println!("{bug:?} caught by seed {seed} (tampering forced on): {why}");
    assert!(why.contains("tamper"), "caught by the tamper check: {why}");
    let r = run_seed_with(seed, force, sim_tests::api::real_opener());
    assert!(r.passed(), "seed {seed} passes without the bug: {:?}", r.violations);
}

#[test]
fn catches_a_cancelled_call_that_stops_the_wal() {
    // The behaviour before cancel safety, planted: a future dropped inside a
    // file-changing section stops the WAL. Every later call then answers
    // `Stopped`, which fail-stop alone would accept; the oracle requires an
    // injected fault behind every stop (`Oracle::check_stop`). The writers
    // cancel calls in 30% of seeds; forced on here.
    let bug = Bug::Engine(Planted::CancelStops);
    let force = Overrides {
        force: Some(FaultClass::Cancel.bit()),
        ..Overrides::default()
    };
    let (seed, why) = caught_with(bug, force);
    println!("{bug:?} caught by seed {seed} (cancellation forced on): {why}");
    assert!(why.contains("no injected fault explains it"), "{why}");
    let r = run_seed_with(seed, force, sim_tests::api::real_opener());
    assert!(r.passed(), "seed {seed} fails without the bug: {:?}", r.violations);
}

#[test]
fn catches_an_append_with_maker_given_the_wrong_index() {
    // The maker sees the readable end instead of the admitted one: right
    // whenever nothing waits for a group commit, so only concurrent appends
    // show it (`AppendWithChecked`: the maker's index against the answer).
    let (seed, why) = caught(Bug::Engine(Planted::MakerGetsReadable));
    println!("caught by seed {seed}: {why}");
    assert!(why.contains("maker was given"), "{why}");
}

#[test]
fn catches_a_range_read_that_skips_its_start() {
    let (seed, why) = caught(Bug::Engine(Planted::RangeSkipsStart));
    println!("caught by seed {seed}: {why}");
    assert!(why.contains("read_range"), "{why}");
}

#[test]
fn catches_seal_events_with_a_wrong_range() {
    let (seed, why) = caught(Bug::Engine(Planted::SealOneTooFar));
    println!("caught by seed {seed}: {why}");
    assert!(why.contains("seal event"), "{why}");
}

#[test]
fn catches_a_wait_durable_that_does_not_sync() {
    // Its `Ok` is a durability promise: a power loss after it must keep
    // the records. Needs Manual syncs (else everything is durable already)
    // and power losses.
    let bug = Bug::Engine(Planted::WaitDurableNoSync);
    let force = Overrides {
        force: Some(FaultClass::PowerLoss.bit()),
        ..Overrides::default()
    };
    let (seed, why) = caught_within(bug, force, 60);
    println!("{bug:?} caught by seed {seed} (power losses forced on): {why}");
    let r = run_seed_with(seed, force, sim_tests::api::real_opener());
    assert!(r.passed(), "seed {seed} passes without the bug: {:?}", r.violations);
}

#[test]
fn catches_a_prune_that_is_not_exact() {
    let (seed, why) = caught(Bug::Engine(Planted::PruneWholeSegmentsOnly));
    println!("caught by seed {seed}: {why}");
    assert!(why.contains("short of"), "{why}");
}

#[test]
fn catches_an_exact_prune_whose_first_index_is_not_durable() {
    // Memory says k + 1, the meta file the whole-segment point: a restart
    // brings pruned records back (needs a crash after such a prune).
    let bug = Bug::Engine(Planted::ExactPruneNotDurable);
    let force = Overrides {
        force: Some(FaultClass::ProcessCrash.bit()),
        ..Overrides::default()
    };
    let (seed, why) = caught_within(bug, force, 60);
    println!("{bug:?} caught by seed {seed} (process crashes forced on): {why}");
    let r = run_seed_with(seed, force, sim_tests::api::real_opener());
    assert!(r.passed(), "seed {seed} passes without the bug: {:?}", r.violations);
}
