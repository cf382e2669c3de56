//! One test (or a few) per rule of the model, including the ones that show
//! each check rejects what it must.
#![allow(clippy::unwrap_used)]

use super::*;

type L = Log<&'static str>;

/// `(index, record)` pairs from `first` on.
fn at(first: u64, recs: &[&'static str]) -> Vec<(u64, &'static str)> {
    recs.iter().enumerate().map(|(k, r)| (first + k as u64, *r)).collect()
}

fn recover(log: &mut L, first: u64, recs: &[&'static str]) -> Result<(), Mismatch<&'static str>> {
    let v = at(first, recs);
    log.recovered(first, first + recs.len() as u64, v.iter().map(|(i, r)| (*i, r)))
}

fn live(log: &L, first: u64, recs: &[&'static str]) -> Result<(), Mismatch<&'static str>> {
    let v = at(first, recs);
    log.live(first, first + recs.len() as u64, v.iter().map(|(i, r)| (*i, r)))
}

#[test]
fn a_new_log_is_empty_at_its_first_index() {
    let log = L::new(7);
    assert_eq!((log.first(), log.next(), log.end(), log.floor()), (7, 7, 7, 7));
    assert!(log.is_empty() && !log.reseatable() && log.exact());
    live(&log, 7, &[]).unwrap();
    assert_eq!(live(&log, 6, &[]).unwrap_err().problem, Problem::WrongFirst { want: 7 });
}

#[test]
fn acknowledged_records_are_at_the_next_index_and_readable() {
    let mut log = L::new(3);
    assert_eq!(log.acknowledge(vec!["a"], true).unwrap(), 3);
    assert_eq!(log.acknowledge(vec!["b", "c"], false).unwrap(), 4);
    assert_eq!(log.next(), 6);
    assert_eq!(log.get(4), Some(&"b"));
    assert_eq!(log.get(6), None);
    assert_eq!(log.state(3), Some(State::Durable));
    assert_eq!(log.state(5), Some(State::Cached));
    assert_eq!(log.iter().map(|(i, _)| i).collect::<Vec<_>>(), vec![3, 4, 5]);
    assert_eq!(log.range(4..).map(|(_, r)| *r).collect::<Vec<_>>(), vec!["b", "c"]);
    assert_eq!(log.range(..4).rev().map(|(i, _)| i).next(), Some(3));
    assert_eq!(log.range(9..).count(), 0);
    live(&log, 3, &["a", "b", "c"]).unwrap();
}

#[test]
fn a_durable_record_must_survive_a_power_loss() {
    let mut log = L::new(0);
    log.acknowledge(vec!["a"], true).unwrap();
    log.acknowledge(vec!["b"], true).unwrap();
    log.crash(Crash::PowerLoss);
    let e = recover(&mut log.clone(), 0, &["a"]).unwrap_err();
    assert_eq!(e.index, 1);
    assert_eq!(e.problem, Problem::Missing { state: State::Durable });
    assert_eq!(e.want, Some("b"));
    assert!(e.to_string().contains("index 1"), "{e}");
    recover(&mut log, 0, &["a", "b"]).unwrap();
}

#[test]
fn an_acknowledgement_that_syncs_covers_everything_before_it() {
    let mut log = L::new(0);
    log.acknowledge(vec!["a"], false).unwrap();
    log.acknowledge(vec!["b"], true).unwrap();
    assert_eq!(log.state(0), Some(State::Durable));
}

#[test]
fn a_cached_record_survives_a_process_crash_not_a_power_loss() {
    let mut log = L::new(0);
    log.acknowledge(vec!["a"], true).unwrap();
    log.acknowledge(vec!["b"], false).unwrap();
    let mut p = log.clone();
    p.crash(Crash::Process);
    let e = recover(&mut p.clone(), 0, &["a"]).unwrap_err();
    assert_eq!(e.problem, Problem::Missing { state: State::Cached });
    recover(&mut p, 0, &["a", "b"]).unwrap();

    let ok = log.crash(Crash::PowerLoss);
    assert_eq!(ok.ends, vec![1, 2]);
    recover(&mut log.clone(), 0, &["a"]).unwrap();
    recover(&mut log, 0, &["a", "b"]).unwrap();
}

#[test]
fn a_reopen_without_a_crash_keeps_the_page_cache() {
    let mut log = L::new(0);
    log.acknowledge(vec!["a"], false).unwrap();
    assert!(recover(&mut log.clone(), 0, &[]).is_err());
    recover(&mut log, 0, &["a"]).unwrap();
}

#[test]
fn the_worst_crash_since_the_last_recovery_counts() {
    let mut log = L::new(0);
    log.acknowledge(vec!["a"], false).unwrap();
    log.crash(Crash::PowerLoss);
    log.crash(Crash::Process);
    recover(&mut log, 0, &[]).unwrap();
}

#[test]
fn sync_makes_everything_acknowledged_durable() {
    let mut log = L::new(0);
    log.acknowledge(vec!["a"], false).unwrap();
    log.acknowledge(vec!["b", "c"], false).unwrap();
    log.synced();
    assert_eq!(log.state(2), Some(State::Durable));
    log.crash(Crash::PowerLoss);
    assert_eq!(
        recover(&mut log.clone(), 0, &["a"]).unwrap_err().problem,
        Problem::Missing { state: State::Durable }
    );
    recover(&mut log, 0, &["a", "b", "c"]).unwrap();
}

#[test]
fn a_durability_claim_covers_the_records_below_it() {
    let mut log = L::new(10);
    log.acknowledge(vec!["a"], false).unwrap();
    log.acknowledge(vec!["b"], false).unwrap();
    log.durable_through(11);
    assert_eq!(log.state(10), Some(State::Durable));
    assert_eq!(log.state(11), Some(State::Cached));
    log.durable_through(99);
    assert_eq!(log.state(11), Some(State::Durable));
}

#[test]
fn after_a_failed_sync_no_crash_is_sure_to_keep_what_was_not_durable() {
    let mut log = L::new(0);
    log.acknowledge(vec!["a"], true).unwrap();
    log.acknowledge(vec!["b"], false).unwrap();
    log.sync_failed();
    assert_eq!(log.state(1), Some(State::Acknowledged));
    log.crash(Crash::Process);
    recover(&mut log.clone(), 0, &["a"]).unwrap();
    assert_eq!(
        recover(&mut log, 0, &[]).unwrap_err().problem,
        Problem::Missing { state: State::Durable }
    );
}

#[test]
fn a_record_of_a_failed_append_must_never_appear() {
    let mut log = L::new(0);
    log.acknowledge(vec!["a"], true).unwrap();
    log.append_failed(&["x"]);
    log.acknowledge(vec!["b"], false).unwrap();
    log.crash(Crash::PowerLoss);
    let e = recover(&mut log.clone(), 0, &["a", "x"]).unwrap_err();
    assert_eq!((e.index, e.problem), (1, Problem::FailedAppend));
    assert_eq!((e.got, e.want), (Some("x"), Some("b")));
    // Past the end too.
    let e = recover(&mut log.clone(), 0, &["a", "b", "x"]).unwrap_err();
    assert_eq!((e.index, e.problem), (2, Problem::FailedAppend));
    // And after the next recovery.
    recover(&mut log, 0, &["a"]).unwrap();
    assert_eq!(
        recover(&mut log, 0, &["a", "x"]).unwrap_err().problem,
        Problem::FailedAppend
    );
}

#[test]
fn a_stopped_append_may_or_may_not_come_back() {
    let mut log = L::new(0);
    log.acknowledge(vec!["a"], true).unwrap();
    log.maybe_written(vec!["m", "n"]);
    assert_eq!((log.next(), log.end()), (1, 3));
    assert_eq!(log.state(1), Some(State::Maybe));
    assert_eq!(log.get(1), None, "not readable: not acknowledged");
    live(&log, 0, &["a"]).unwrap();
    assert_eq!(
        live(&log, 0, &["a", "m"]).unwrap_err().problem,
        Problem::WrongNext { want: 1 }
    );
    log.crash(Crash::Process);
    recover(&mut log.clone(), 0, &["a"]).unwrap();
    // Its batch is all or nothing too.
    assert!(matches!(
        recover(&mut log.clone(), 0, &["a", "m"]).unwrap_err().problem,
        Problem::Torn { from: 1, to: 3 }
    ));
    recover(&mut log, 0, &["a", "m", "n"]).unwrap();
    // Served by recovery: part of the log, durable.
    assert_eq!((log.next(), log.get(2)), (3, Some(&"n")));
    assert_eq!(log.state(2), Some(State::Durable));
}

#[test]
fn nothing_is_acknowledged_after_an_append_that_stopped_the_log() {
    let mut log = L::new(0);
    log.maybe_written(vec!["m"]);
    let e = log.acknowledge(vec!["a"], true).unwrap_err();
    assert_eq!((e.index, e.problem), (0, Problem::AfterStop));
}

#[test]
fn a_torn_batch_is_rejected() {
    let mut log = L::new(5);
    log.acknowledge(vec!["a"], false).unwrap();
    log.acknowledge(vec!["b", "c", "d"], false).unwrap();
    let ok = log.crash(Crash::PowerLoss);
    assert_eq!(ok.ends, vec![5, 6, 9]);
    let e = recover(&mut log.clone(), 5, &["a", "b"]).unwrap_err();
    assert_eq!((e.index, e.problem), (7, Problem::Torn { from: 6, to: 9 }));
    recover(&mut log.clone(), 5, &["a"]).unwrap();
    recover(&mut log.clone(), 5, &[]).unwrap();
    recover(&mut log, 5, &["a", "b", "c", "d"]).unwrap();
}

#[test]
fn a_gap_is_rejected() {
    let mut log = L::new(0);
    log.acknowledge(vec!["a", "b", "c"], true).unwrap();
    let v = [(0, "a"), (2, "c")];
    let e = log.clone().recovered(0, 3, v.iter().map(|(i, r)| (*i, r))).unwrap_err();
    assert_eq!((e.index, e.problem), (2, Problem::Gap { expected: 1 }));
    let e = log.live(0, 3, v.iter().map(|(i, r)| (*i, r))).unwrap_err();
    assert_eq!(e.problem, Problem::Gap { expected: 1 });
}

#[test]
fn a_record_at_the_wrong_index_is_rejected() {
    let mut log = L::new(0);
    log.acknowledge(vec!["a"], true).unwrap();
    log.acknowledge(vec!["b"], true).unwrap();
    let e = recover(&mut log.clone(), 0, &["b", "a"]).unwrap_err();
    assert_eq!((e.index, e.problem), (0, Problem::Misplaced { at: 1 }));
    let e = live(&log, 0, &["a", "z"]).unwrap_err();
    assert_eq!((e.index, e.problem), (1, Problem::Differs));
}

#[test]
fn nothing_past_what_was_attempted_may_appear() {
    let mut log = L::new(0);
    log.acknowledge(vec!["a"], true).unwrap();
    let e = recover(&mut log.clone(), 0, &["a", "q"]).unwrap_err();
    assert_eq!((e.index, e.problem), (1, Problem::NeverAppended));
    let v = [(0, "a")];
    let e = log.clone().recovered(0, 2, v.iter().map(|(i, r)| (*i, r))).unwrap_err();
    assert_eq!((e.index, e.problem), (2, Problem::WrongNext { want: 1 }));
}

#[test]
fn a_failed_check_leaves_the_model_unchanged() {
    let mut log = L::new(0);
    log.acknowledge(vec!["a"], false).unwrap();
    log.crash(Crash::PowerLoss);
    assert!(recover(&mut log, 0, &["z"]).is_err());
    assert_eq!(log.next(), 1);
    recover(&mut log, 0, &[]).unwrap();
    assert_eq!(log.next(), 0);
}

#[test]
fn a_prune_removes_what_is_below_the_new_first_index() {
    let mut log = L::new(0);
    log.acknowledge(vec!["a", "b"], true).unwrap();
    log.acknowledge(vec!["c"], true).unwrap();
    assert!(!log.prune(1, 2));
    assert_eq!((log.first(), log.next(), log.floor()), (2, 3, 2));
    assert_eq!(log.get(1), None);
    live(&log, 2, &["c"]).unwrap();
    log.crash(Crash::PowerLoss);
    assert_eq!(
        recover(&mut log.clone(), 0, &["a", "b", "c"]).unwrap_err().problem,
        Problem::WrongFirst { want: 2 }
    );
    recover(&mut log, 2, &["c"]).unwrap();
}

#[test]
fn a_prune_inside_a_batch_is_a_boundary() {
    let mut log = L::new(0);
    log.acknowledge(vec!["a", "b", "c"], false).unwrap();
    log.prune(0, 1);
    log.crash(Crash::PowerLoss);
    recover(&mut log, 1, &[]).unwrap();
}

#[test]
fn a_prune_through_the_end_empties_the_log_and_makes_it_reseatable() {
    let mut log = L::new(0);
    log.acknowledge(vec!["a"], true).unwrap();
    assert!(log.prune(9, 10));
    assert_eq!((log.first(), log.next()), (10, 10));
    assert!(log.reseatable());
    live(&log, 10, &[]).unwrap();
    // A prune below the first index empties nothing.
    let mut other = L::new(5);
    assert!(!other.prune(4, 5));
    assert!(!other.reseatable());
    // Nor one whose first index had moved past its target when it began.
    let mut seen = L::new(3);
    assert!(!seen.prune_seen(6, 5, 6));
    assert!(!seen.reseatable());
}

#[test]
fn a_snapshot_install_needs_a_log_a_prune_emptied() {
    let mut log = L::new(0);
    assert_eq!(log.reseat(5).unwrap_err().problem, Problem::NotReseatable { next: 0 });
    log.prune(3, 4);
    assert!(log.reseat(4).is_err(), "not above the next index");
    log.reseat(20).unwrap();
    assert!(!log.reseatable());
    assert_eq!(log.acknowledge(vec!["s"], false).unwrap(), 20);
    live(&log, 20, &["s"]).unwrap();
    // Admitting an append (even a failed one) ends it.
    let mut log = L::new(0);
    log.prune(3, 4);
    log.append_failed(&["x"]);
    assert!(log.reseat(9).is_err());
}

#[test]
fn an_unconfirmed_snapshot_install_may_come_back_empty_at_the_old_first_index() {
    let mut log = L::new(0);
    log.prune(3, 4);
    log.reseat(20).unwrap();
    log.acknowledge(vec!["s"], false).unwrap();
    let ok = log.crash(Crash::PowerLoss);
    assert_eq!((ok.first, ok.first_if_empty), (20, Some(4)));
    recover(&mut log.clone(), 20, &[]).unwrap();
    assert!(recover(&mut log.clone(), 4, &["s"]).is_err());
    recover(&mut log, 4, &[]).unwrap();
    assert_eq!((log.first(), log.next()), (4, 4));
    // Once a record at the new index is durable, not any more.
    let mut log = L::new(0);
    log.prune(3, 4);
    log.reseat(20).unwrap();
    log.acknowledge(vec!["s"], true).unwrap();
    log.crash(Crash::PowerLoss);
    assert_eq!(
        recover(&mut log, 4, &[]).unwrap_err().problem,
        Problem::WrongFirst { want: 20 }
    );
}

#[test]
fn a_truncation_removes_everything_from_its_index() {
    let mut log = L::new(0);
    log.acknowledge(vec!["a"], true).unwrap();
    log.acknowledge(vec!["b", "c"], true).unwrap();
    log.truncate(2).unwrap();
    assert_eq!((log.next(), log.floor()), (2, 2));
    live(&log, 0, &["a", "b"]).unwrap();
    // A batch cut by request is not a torn batch.
    log.crash(Crash::PowerLoss);
    recover(&mut log.clone(), 0, &["a", "b"]).unwrap();
    // What it removed never comes back.
    let e = recover(&mut log.clone(), 0, &["a", "b", "c"]).unwrap_err();
    assert_eq!((e.index, e.problem), (2, Problem::NeverAppended));
    // The log continues at the cut.
    recover(&mut log, 0, &["a", "b"]).unwrap();
    assert_eq!(log.acknowledge(vec!["d"], false).unwrap(), 2);
}

#[test]
fn a_truncation_outside_the_log_is_refused() {
    let mut log = L::new(4);
    log.acknowledge(vec!["a"], true).unwrap();
    let e = log.truncate(6).unwrap_err();
    assert_eq!((e.index, e.problem), (6, Problem::OutOfRange { first: 4, next: 5 }));
    assert!(log.truncate(3).is_err());
    assert_eq!(log.next(), 5, "unchanged");
    log.truncate(5).unwrap();
    log.truncate(4).unwrap();
    assert!(log.is_empty());
    // A cut (an operator's repair) takes any index.
    let mut log = L::new(4);
    log.acknowledge(vec!["a"], true).unwrap();
    log.cut(1);
    assert_eq!((log.first(), log.next()), (4, 4));
}

#[test]
fn concurrent_acknowledgements_may_arrive_out_of_order() {
    let mut log = L::new(0);
    log.acknowledge_at(2, vec!["c"], false).unwrap();
    assert_eq!(log.next(), 3);
    let e = live(&log, 0, &["a", "b", "c"]).unwrap_err();
    assert_eq!((e.index, e.want), (0, None), "a hole until the others arrive");
    log.acknowledge_at(0, vec!["a", "b"], false).unwrap();
    live(&log, 0, &["a", "b", "c"]).unwrap();
    // Twice at one index.
    let e = log.acknowledge_at(1, vec!["z"], false).unwrap_err();
    assert_eq!((e.index, e.problem, e.want), (1, Problem::Taken, Some("b")));
}

#[test]
fn an_acknowledgement_below_the_floor_is_rejected_and_one_below_the_first_index_was_pruned() {
    let mut log = L::from_recovered(0, ["a", "b"]);
    assert_eq!(log.floor(), 2);
    let e = log.acknowledge_at(1, vec!["z", "y"], true).unwrap_err();
    assert_eq!((e.index, e.problem), (1, Problem::BelowFloor { floor: 2 }));
    let mut log = L::new(0);
    log.acknowledge(vec!["a"], true).unwrap();
    log.prune(0, 1);
    log.acknowledge_at(0, vec!["late", "x"], true).unwrap();
    assert_eq!((log.first(), log.next(), log.get(1)), (1, 2, Some(&"x")));
}

#[test]
fn a_recovered_log_is_taken_as_durable() {
    let log = L::from_recovered(3, ["a", "b"]);
    assert_eq!((log.first(), log.next()), (3, 5));
    assert_eq!(log.state(4), Some(State::Durable));
    let mut log = L::new(0);
    log.acknowledge(vec!["a"], false).unwrap();
    log.crash(Crash::Process);
    recover(&mut log, 0, &["a"]).unwrap();
    log.crash(Crash::PowerLoss);
    assert!(recover(&mut log, 0, &[]).is_err(), "served by recovery, so durable");
}

#[test]
fn an_undetermined_log_checks_nothing_live_until_recovered() {
    let mut log = L::new(0);
    log.acknowledge(vec!["a"], true).unwrap();
    log.undetermined();
    assert!(!log.exact());
    live(&log, 0, &["whatever", "else"]).unwrap();
    log.truncate(9).unwrap();
    recover(&mut log, 0, &["a"]).unwrap();
    assert!(log.exact());
    assert!(live(&log, 0, &[]).is_err());
}

#[test]
fn a_live_log_missing_its_last_record_is_rejected() {
    let mut log = L::new(0);
    log.acknowledge(vec!["a", "b"], false).unwrap();
    let v = [(0, "a")];
    let e = log.live(0, 2, v.iter().map(|(i, r)| (*i, r))).unwrap_err();
    assert_eq!((e.index, e.problem), (1, Problem::Missing { state: State::Cached }));
}

#[test]
fn messages_name_the_index_and_cut_long_records() {
    let mut log: Log<Vec<u8>> = Log::new(0);
    log.acknowledge(vec![vec![7; 1000]], true).unwrap();
    let got = vec![8u8; 1000];
    let e = log.live(0, 1, [(0, &got)]).unwrap_err();
    let s = e.to_string();
    assert!(s.starts_with("index 0: holds another record"), "{s}");
    assert!(s.len() < 400, "{s}");
}

#[test]
fn a_cut_past_the_next_index_removes_what_may_have_been_written_too() {
    let mut log = L::new(0);
    log.acknowledge(vec!["a"], true).unwrap();
    log.maybe_written(vec!["m", "n"]);
    log.cut(2);
    assert_eq!((log.next(), log.end(), log.state(1)), (1, 1, None));
}
