//! # wal-model
//!
//! One model of what a write-ahead log must contain, shared by every test
//! that checks the `wal` engine against one: the proptest model test
//! (`wal/tests/model.rs`), the `ops` fuzz target (`wal-fuzz`) and the
//! simulation's oracle (`sim-tests`). Each drives the engine its own way and
//! tells a [`Log`] what happened; the log says what the engine may and must
//! show, and [`Log::recovered`] / [`Log::live`] say which index is wrong and
//! why when it does not.
//!
//! The log is generic over what identifies a record (`T`): the payload bytes
//! for the model test and the fuzz target, the attempt and position that
//! wrote it for the simulation. It has no dependencies and needs no cfg.
//!
//! ## The rules
//!
//! The log is a dense range of indices `[first, next)`. Each acknowledged
//! record is in one of three states, and records whose append may or may
//! not have been written follow them ([`State`]):
//!
//! * **Durable** (an append acknowledged under `SyncPolicy::Always`, or
//!   covered by a `sync()`, a seal or a clean `close()` that returned `Ok`,
//!   or served by a recovery): survives a **power loss**.
//! * **Cached** (acknowledged, not yet synced): in the page cache, so it
//!   survives a **process crash**, but a power loss may take it (and, since
//!   the log is a prefix, everything after it).
//! * **Acknowledged** only: a failed fsync may have reverted the page cache
//!   (btrfs) or stranded the data, so no crash is sure to keep it
//!   ([`Log::sync_failed`]).
//! * **Maybe** written: the append ended `Stopped` or was aborted by a crash
//!   ([`Log::maybe_written`]). It is not part of the live log, but a
//!   recovery may bring it back.
//!
//! A **failed append** (`AppendFailed`) leaves nothing: none of its records
//! may ever appear ([`Log::append_failed`]). A **commit unit** (one append,
//! or one atomic batch) is all or nothing: a recovered log ends at a commit
//! boundary, never inside a unit (a **torn batch**). After a crash the
//! recovered log is a prefix of what was attempted, holds every record the
//! crash must keep, and every record sits at its own index.
//!
//! A **prune** through `k` removes records below the new first index it
//! returns; one at or past the last record empties the log, its next index
//! becomes `k + 1`, and it becomes *reseatable*: the next `append_at(j)`
//! may start it at any `j` above that (a snapshot install, [`Log::reseat`]).
//! A **truncation** from `from` removes every record at and above `from`:
//! the log continues there, and cutting inside a batch is by request, not a
//! torn batch.
//!
//! ## Example
//!
//! ```
//! use wal_model::{Crash, Log, Problem};
//!
//! // A log that starts at index 5, under a Manual sync policy.
//! let mut log: Log<&str> = Log::new(5);
//! log.acknowledge(vec!["a"], false).unwrap(); // index 5, cached
//! log.synced(); // sync() returned Ok: 5 is durable
//! log.acknowledge(vec!["b", "c"], false).unwrap(); // an atomic batch at 6 and 7
//! log.maybe_written(vec!["d"]); // an append that ended Stopped
//!
//! // A power loss may take the batch (whole) and the stopped append.
//! let ok = log.crash(Crash::PowerLoss);
//! assert_eq!(ok.ends, vec![6, 8, 9]);
//! // Half the batch is a torn batch.
//! let torn = log.clone().recovered(5, 7, [(5, &"a"), (6, &"b")]).unwrap_err();
//! assert_eq!(torn.index, 7);
//! assert!(matches!(torn.problem, Problem::Torn { from: 6, to: 8 }));
//! // Losing the durable record is not allowed.
//! let lost = log.clone().recovered(5, 5, []).unwrap_err();
//! assert!(matches!(lost.problem, Problem::Missing { .. }));
//! // The stopped append written, or not: both are fine.
//! log.recovered(5, 9, [(5, &"a"), (6, &"b"), (7, &"c"), (8, &"d")]).unwrap();
//! assert_eq!(log.next(), 9);
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Bound;
use std::ops::RangeBounds;

/// What a crash may take of one record of the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum State {
    /// On stable storage: survives a power loss.
    Durable,
    /// Acknowledged and in the page cache: survives a process crash, not a
    /// power loss.
    Cached,
    /// Acknowledged, but a failed fsync may have reverted or stranded it:
    /// no crash is sure to keep it.
    Acknowledged,
    /// Never acknowledged (the append ended `Stopped`, or a crash aborted
    /// it): it may or may not be in the log after a crash.
    Maybe,
}

/// A crash of the process or of the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Crash {
    /// The process dies; the page cache survives.
    Process,
    /// The machine loses power; only what was synced survives.
    PowerLoss,
}

/// The logs a recovery may show after the crashes since the last one
/// ([`Log::crash`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acceptable {
    /// The first index the recovered log must have.
    pub first: u64,
    /// Another first index an *empty* recovered log may have: the one
    /// before a snapshot install ([`Log::reseat`]) that nothing durable
    /// confirmed yet.
    pub first_if_empty: Option<u64>,
    /// The next indices the recovered log may end at, ascending: the commit
    /// boundaries from the end of the last record the crash must keep to
    /// the end of the last record ever attempted.
    pub ends: Vec<u64>,
}

/// What is wrong at [`Mismatch::index`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The log starts at `index`, but `want` was due.
    WrongFirst {
        /// The first index the model has.
        want: u64,
    },
    /// The log reports `index` as its next index, but `want` was due (the
    /// model's next index for a live log, the end of its records for a
    /// recovered one).
    WrongNext {
        /// The next index the model (or the records) has.
        want: u64,
    },
    /// A record came at `index` where `expected` was due: a hole (or a
    /// reordering) in the log.
    Gap {
        /// The index that was due.
        expected: u64,
    },
    /// The record the model has at `index` is absent, and it must be there:
    /// in this `state` it survives what happened.
    Missing {
        /// The record's state.
        state: State,
    },
    /// `index` holds another record than the model's.
    Differs,
    /// `index` holds a record that belongs at index `at`.
    Misplaced {
        /// Where the record belongs.
        at: u64,
    },
    /// `index` holds a record of an append that failed (`AppendFailed`).
    FailedAppend,
    /// `index` holds a record past everything ever attempted.
    NeverAppended,
    /// The log ends at `index`, inside the commit unit `[from, to)`: a torn
    /// batch.
    Torn {
        /// The unit's first index.
        from: u64,
        /// The unit's end.
        to: u64,
    },
    /// An acknowledgement at `index`, below the lowest index an append may
    /// take now (`floor`: the log's end at open, at the last truncation, or
    /// its first index after a prune or a snapshot install).
    BelowFloor {
        /// The lowest index an append may take.
        floor: u64,
    },
    /// An acknowledgement at `index`, which already holds an acknowledged
    /// record.
    Taken,
    /// An acknowledgement after an append that ended `Stopped` (maybe
    /// written): a stopped log acknowledges nothing.
    AfterStop,
    /// A truncation from `index`, outside `[first, next]`, returned `Ok`.
    OutOfRange {
        /// The log's first index.
        first: u64,
        /// The log's next index.
        next: u64,
    },
    /// A snapshot install at `index` on a log that no prune emptied (or that
    /// admitted an append since), or at or below its next index.
    NotReseatable {
        /// The log's next index.
        next: u64,
    },
}

/// Why a log does not match the model: the index that is wrong, the
/// problem, and what the log holds there and what the model says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch<T> {
    /// The index that is wrong.
    pub index: u64,
    /// What is wrong with it.
    pub problem: Problem,
    /// The record the log holds there, if any.
    pub got: Option<T>,
    /// The record the model has there, if any.
    pub want: Option<T>,
}

impl<T> Mismatch<T> {
    fn new(index: u64, problem: Problem) -> Mismatch<T> {
        Mismatch {
            index,
            problem,
            got: None,
            want: None,
        }
    }
}

/// At most this many characters of a record's `Debug` form in a message.
const SHOWN: usize = 80;

fn short<T: fmt::Debug>(t: &T) -> String {
    let s = format!("{t:?}");
    if s.chars().count() <= SHOWN {
        s
    } else {
        let head: String = s.chars().take(SHOWN).collect();
        format!("{head}...")
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::WrongFirst { want } => write!(f, "the log starts here, but {want} is its first index"),
            Problem::WrongNext { want } => write!(f, "reported as the next index, but {want} is"),
            Problem::Gap { expected } => write!(f, "a record here where index {expected} was due (a hole)"),
            Problem::Missing { state } => write!(f, "a {state:?} record is missing"),
            Problem::Differs => write!(f, "holds another record than the model's"),
            Problem::Misplaced { at } => write!(f, "holds the record that belongs at index {at}"),
            Problem::FailedAppend => write!(f, "holds a record of a failed append (AppendFailed)"),
            Problem::NeverAppended => write!(f, "holds a record past everything ever appended"),
            Problem::Torn { from, to } => {
                write!(f, "the log ends inside the commit unit [{from}, {to}) (a torn batch)")
            }
            Problem::BelowFloor { floor } => {
                write!(f, "acknowledged below {floor}, the lowest index an append may take")
            }
            Problem::Taken => write!(f, "acknowledged twice"),
            Problem::AfterStop => write!(f, "acknowledged after an append that stopped the log"),
            Problem::OutOfRange { first, next } => {
                write!(f, "a truncation outside the log [{first}, {next}] returned Ok")
            }
            Problem::NotReseatable { next } => write!(
                f,
                "a snapshot install, but no prune emptied the log since its last append (next index {next})"
            ),
        }
    }
}

impl<T: fmt::Debug> fmt::Display for Mismatch<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "index {}: {}", self.index, self.problem)?;
        if let Some(g) = &self.got {
            write!(f, "; it holds {}", short(g))?;
        }
        if let Some(w) = &self.want {
            write!(f, "; the model has {}", short(w))?;
        }
        Ok(())
    }
}

impl<T: fmt::Debug> std::error::Error for Mismatch<T> {}

/// The model of one log: what it holds, what a crash may take of it, and
/// what a recovery may show.
///
/// Invariants (asserted after every transition): `first <= durable_to <=
/// cached_to <= next <= end`, `first <= floor <= next`, every record in
/// `[first, end)`, the commit boundaries in `[first, end]` and holding
/// `first`.
#[derive(Clone, Debug)]
pub struct Log<T> {
    first: u64,
    /// The end of the acknowledged records (the live log's next index).
    next: u64,
    /// The end of the records after them that may have been written.
    end: u64,
    /// The lowest index an acknowledgement may take.
    floor: u64,
    /// Records below this are durable.
    durable_to: u64,
    /// Records below this survive a process crash.
    cached_to: u64,
    /// The records in `[first, end)` by index (acknowledgements seen out of
    /// order may leave holes until the others arrive).
    records: BTreeMap<u64, T>,
    /// Where the log may end: `first` and the end of every commit unit.
    boundaries: BTreeSet<u64>,
    /// Records of failed appends, for naming them in a mismatch.
    failed: Vec<T>,
    /// A prune emptied the log and nothing was admitted since.
    reseatable: bool,
    /// The first index before a snapshot install, until the next recovery
    /// or prune: an empty recovered log may start there.
    unreseat: Option<u64>,
    /// The live log is known exactly.
    exact: bool,
    /// The worst crash since the last recovery.
    crash: Option<Crash>,
}

impl<T> Default for Log<T> {
    fn default() -> Log<T> {
        Log::new(0)
    }
}

impl<T> Log<T> {
    /// An empty log whose first index is `first` (a new log).
    pub fn new(first: u64) -> Log<T> {
        Log {
            first,
            next: first,
            end: first,
            floor: first,
            durable_to: first,
            cached_to: first,
            records: BTreeMap::new(),
            boundaries: BTreeSet::from([first]),
            failed: Vec::new(),
            reseatable: false,
            unreseat: None,
            exact: true,
            crash: None,
        }
    }

    /// A log as a recovery left it, taken as it is: `records` from `first`
    /// on, every one durable, one commit unit.
    pub fn from_recovered(first: u64, records: impl IntoIterator<Item = T>) -> Log<T> {
        let mut log = Log::new(first);
        log.records = records
            .into_iter()
            .enumerate()
            .map(|(k, r)| (first + k as u64, r))
            .collect();
        let next = first + log.records.len() as u64;
        log.next = next;
        log.end = next;
        log.floor = next;
        log.durable_to = next;
        log.cached_to = next;
        log.boundaries.insert(next);
        log.assert_invariants();
        log
    }

    /// The first index.
    pub fn first(&self) -> u64 {
        self.first
    }

    /// The next index: the end of the acknowledged records.
    pub fn next(&self) -> u64 {
        self.next
    }

    /// The end of everything that may have been written: [`Log::next`]
    /// plus the records of appends that ended `Stopped`.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// The lowest index an append may be acknowledged at now.
    pub fn floor(&self) -> u64 {
        self.floor
    }

    /// Whether a prune emptied the log and nothing was admitted since: an
    /// `append_at(j)` above the next index may start it at `j`.
    pub fn reseatable(&self) -> bool {
        self.reseatable
    }

    /// Whether the live log is known exactly (see [`Log::undetermined`]).
    pub fn exact(&self) -> bool {
        self.exact
    }

    /// The number of acknowledged records.
    pub fn len(&self) -> usize {
        self.records.range(..self.next).count()
    }

    /// Whether no record is acknowledged.
    pub fn is_empty(&self) -> bool {
        self.records.range(..self.next).next().is_none()
    }

    /// The acknowledged record at `index`: what a read must return.
    pub fn get(&self, index: u64) -> Option<&T> {
        if index >= self.next {
            return None;
        }
        self.records.get(&index)
    }

    /// The state of the record at `index`, if the model has one there.
    pub fn state(&self, index: u64) -> Option<State> {
        if !self.records.contains_key(&index) {
            return None;
        }
        Some(if index < self.durable_to {
            State::Durable
        } else if index < self.cached_to {
            State::Cached
        } else if index < self.next {
            State::Acknowledged
        } else {
            State::Maybe
        })
    }

    /// The acknowledged records with an index in `range`, in index order.
    pub fn range<R: RangeBounds<u64>>(&self, range: R) -> impl DoubleEndedIterator<Item = (u64, &T)> + '_ {
        let start = range.start_bound().cloned();
        let end = match range.end_bound() {
            Bound::Included(&e) if e < self.next => Bound::Included(e),
            Bound::Excluded(&e) if e < self.next => Bound::Excluded(e),
            _ => Bound::Excluded(self.next),
        };
        let empty = match (start, end) {
            (Bound::Included(s), Bound::Excluded(e)) | (Bound::Excluded(s), Bound::Included(e)) => s >= e,
            (Bound::Included(s), Bound::Included(e)) => s > e,
            (Bound::Excluded(s), Bound::Excluded(e)) => s.saturating_add(1) >= e,
            _ => false,
        };
        let r = if empty {
            None
        } else {
            Some(self.records.range((start, end)))
        };
        r.into_iter().flatten().map(|(i, t)| (*i, t))
    }

    /// The acknowledged records, in index order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (u64, &T)> + '_ {
        self.range(..)
    }

    /// The logs a recovery may show now, were it to run.
    pub fn acceptable(&self) -> Acceptable {
        let kind = self.crash.unwrap_or(Crash::Process);
        let required = self.required_end(kind);
        Acceptable {
            first: self.first,
            first_if_empty: self.unreseat.filter(|&u| u != self.first && required == self.first),
            ends: self.boundaries.range(required..=self.end).copied().collect(),
        }
    }

    /// The end of the last record that must survive a crash of `kind`.
    fn required_end(&self, kind: Crash) -> u64 {
        match kind {
            Crash::Process => self.cached_to,
            Crash::PowerLoss => self.durable_to,
        }
    }

    fn assert_invariants(&self) {
        assert!(
            self.first <= self.durable_to,
            "model: durable end below the first index"
        );
        assert!(
            self.durable_to <= self.cached_to,
            "model: durable end above the cached end"
        );
        assert!(self.cached_to <= self.next, "model: cached end above the next index");
        assert!(self.next <= self.end, "model: next index above the end");
        assert!(
            self.first <= self.floor && self.floor <= self.next,
            "model: floor {} outside [{}, {}]",
            self.floor,
            self.first,
            self.next
        );
        if let (Some((&lo, _)), Some((&hi, _))) = (self.records.first_key_value(), self.records.last_key_value()) {
            assert!(
                lo >= self.first && hi < self.end,
                "model: a record outside [first, end)"
            );
        }
        assert_eq!(
            self.boundaries.first(),
            Some(&self.first),
            "model: first index not a boundary"
        );
        assert!(
            self.boundaries.last().is_some_and(|&b| b <= self.end),
            "model: a boundary past the end"
        );
        assert!(
            !(self.reseatable && self.next != self.first),
            "model: reseatable but not empty"
        );
    }

    /// Everything acknowledged is durable now: `sync()`, a seal (`rotate`)
    /// or a clean `close()` returned `Ok`.
    pub fn synced(&mut self) {
        self.durable_to = self.next;
        self.cached_to = self.next;
        self.assert_invariants();
    }

    /// Every acknowledged record below `index` is durable now (the log
    /// claims so: `durable_next`). Clamped to the next index.
    pub fn durable_through(&mut self, index: u64) {
        self.durable_to = self.durable_to.max(index.min(self.next));
        self.cached_to = self.cached_to.max(self.durable_to);
        self.assert_invariants();
    }

    /// An fsync failed: what was not durable may have been reverted from
    /// the page cache (btrfs) or stranded, so no crash is sure to keep it.
    pub fn sync_failed(&mut self) {
        self.cached_to = self.durable_to;
        self.assert_invariants();
    }

    /// Records of an append that ended `Stopped` (or that a crash aborted)
    /// follow the acknowledged ones: a recovery may bring them back, as one
    /// commit unit.
    pub fn maybe_written(&mut self, records: impl IntoIterator<Item = T>) {
        for r in records {
            self.records.insert(self.end, r);
            self.end += 1;
        }
        self.boundaries.insert(self.end);
        self.assert_invariants();
    }

    /// The live log is not known exactly any more (a lifecycle operation
    /// failed in a way that leaves memory and disk undetermined until the
    /// next recovery): [`Log::live`] checks nothing until then.
    pub fn undetermined(&mut self) {
        self.exact = false;
    }

    /// A prune through `through` returned `new_first`; `first_seen` is the
    /// first index when it began (see [`Log::prune`]). Returns whether it
    /// emptied the log.
    pub fn prune_seen(&mut self, first_seen: u64, through: u64, new_first: u64) -> bool {
        self.first = self.first.max(new_first);
        self.records = self.records.split_off(&self.first);
        self.boundaries = self.boundaries.split_off(&self.first);
        self.boundaries.insert(self.first);
        self.next = self.next.max(self.first);
        self.end = self.end.max(self.next);
        self.floor = self.floor.max(self.first);
        self.durable_to = self.durable_to.max(self.first);
        self.cached_to = self.cached_to.max(self.first);
        // The meta file holding the new first index is durable.
        self.unreseat = None;
        let emptied = through >= first_seen && new_first == through.saturating_add(1) && self.next <= new_first;
        if emptied && self.exact {
            self.reseatable = true;
        }
        self.assert_invariants();
        emptied
    }

    /// A prune through `through` returned `new_first`: every record below it
    /// is gone for good. A prune through a point at or past the last record
    /// (and not below the first index) empties the log: its next index is
    /// `through + 1` and it is reseatable. Returns whether it emptied the
    /// log.
    pub fn prune(&mut self, through: u64, new_first: u64) -> bool {
        self.prune_seen(self.first, through, new_first)
    }

    /// Removes every record at and above `from`, whatever the bounds (an
    /// operator's repair, or a truncation of a model that is not exact):
    /// the log continues at `from` (clamped to `[first, next]`).
    pub fn cut(&mut self, from: u64) {
        let at = from.clamp(self.first, self.next);
        drop(self.records.split_off(&at));
        drop(self.boundaries.split_off(&at.saturating_add(1)));
        self.boundaries.insert(at);
        self.next = at;
        self.end = at;
        self.floor = at;
        self.durable_to = self.durable_to.min(at);
        self.cached_to = self.cached_to.min(at);
        self.reseatable = false;
        self.assert_invariants();
    }

    /// A truncation from `from` returned `Ok`: every record at and above it
    /// is gone for good and the log continues there (a batch cut by request
    /// is not a torn batch). `from` must be in `[first, next]` when the
    /// model is exact; otherwise nothing changes and the mismatch says so.
    pub fn truncate(&mut self, from: u64) -> Result<(), Mismatch<T>> {
        if self.exact && (from < self.first || from > self.next) {
            return Err(Mismatch::new(
                from,
                Problem::OutOfRange {
                    first: self.first,
                    next: self.next,
                },
            ));
        }
        self.cut(from);
        Ok(())
    }

    /// A snapshot install: an `append_at(j)` above the next index of a log
    /// that a prune emptied (and that admitted nothing since) moved its
    /// first index to `j`, whether the append then succeeded or failed. A
    /// recovery before anything durable confirms it may start the empty log
    /// at the old first index again.
    pub fn reseat(&mut self, j: u64) -> Result<(), Mismatch<T>> {
        if !self.reseatable || j <= self.next {
            return Err(Mismatch::new(j, Problem::NotReseatable { next: self.next }));
        }
        self.unreseat = self.unreseat.or(Some(self.first));
        self.records.clear();
        self.boundaries = BTreeSet::from([j]);
        self.first = j;
        self.next = j;
        self.end = j;
        self.floor = j;
        self.durable_to = j;
        self.cached_to = j;
        self.reseatable = false;
        self.assert_invariants();
        Ok(())
    }
}

impl<T: Clone + PartialEq> Log<T> {
    /// An append returned `Ok`: `records` (one commit unit) are at the next
    /// index, durable (`durable`: the policy syncs every append, and the
    /// fsync covers everything before them too) or in the page cache.
    /// Returns their first index.
    pub fn acknowledge(&mut self, records: Vec<T>, durable: bool) -> Result<u64, Mismatch<T>> {
        let at = self.next;
        self.acknowledge_at(at, records, durable).map(|()| at)
    }

    /// An append returned `Ok(index)`: `records` (one commit unit) are at
    /// `index`. Acknowledgements of concurrent appends may be seen out of
    /// order: the next index is the end of the highest one, and holes are
    /// allowed until the others arrive (a quiescent [`Log::live`] check
    /// finds any left). Records below the first index were pruned before
    /// the acknowledgement was seen. An index below the floor, one already
    /// acknowledged, or an acknowledgement after an append that stopped the
    /// log is a mismatch; the records are taken either way.
    pub fn acknowledge_at(&mut self, index: u64, records: Vec<T>, durable: bool) -> Result<(), Mismatch<T>> {
        let mut err = None;
        if self.end > self.next {
            err = Some(Mismatch::new(index, Problem::AfterStop));
            drop(self.records.split_off(&self.next));
            drop(self.boundaries.split_off(&self.next.saturating_add(1)));
            self.end = self.next;
        }
        let n = records.len() as u64;
        let unit_end = index.saturating_add(n);
        for (k, r) in records.into_iter().enumerate() {
            let i = index + k as u64;
            if i < self.first {
                continue;
            }
            if i < self.floor && err.is_none() {
                err = Some(Mismatch::new(i, Problem::BelowFloor { floor: self.floor }));
            }
            if let Some(prev) = self.records.insert(i, r.clone()) {
                if err.is_none() {
                    err = Some(Mismatch {
                        index: i,
                        problem: Problem::Taken,
                        got: Some(r),
                        want: Some(prev),
                    });
                }
            }
        }
        self.next = self.next.max(unit_end);
        self.end = self.end.max(self.next);
        if unit_end > self.first {
            self.boundaries.insert(unit_end);
        }
        self.reseatable = false;
        self.cached_to = self.cached_to.max(unit_end.min(self.next));
        if durable {
            self.durable_to = self.durable_to.max(unit_end.min(self.next));
        }
        self.assert_invariants();
        match err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// An append failed with `AppendFailed`: none of `records` is in the
    /// log, ever (kept to name them if one shows up). It was admitted, so
    /// the log is no longer reseatable.
    pub fn append_failed(&mut self, records: &[T]) {
        self.failed.extend_from_slice(records);
        self.reseatable = false;
    }

    /// A crash of `kind`. Holds the worst crash until the next
    /// [`Log::recovered`] and returns the logs a recovery may then show.
    pub fn crash(&mut self, kind: Crash) -> Acceptable {
        self.crash = Some(self.crash.map_or(kind, |c| c.max(kind)));
        self.acceptable()
    }

    /// What is wrong with `got` at `index`, which is not the model's record.
    fn classify(&self, index: u64, got: &T) -> Problem {
        if self.failed.iter().any(|f| f == got) {
            return Problem::FailedAppend;
        }
        if let Some((&at, _)) = self.records.iter().find(|(&i, r)| i != index && *r == got) {
            return Problem::Misplaced { at };
        }
        if index >= self.end {
            Problem::NeverAppended
        } else {
            Problem::Differs
        }
    }

    /// Checks `records` (index, record), in the order a scan gave them from
    /// `first`, against the model's records below `limit`; returns the end.
    fn check_records<'a, I>(&self, first: u64, limit: u64, records: I) -> Result<u64, Mismatch<T>>
    where
        I: IntoIterator<Item = (u64, &'a T)>,
        T: 'a,
    {
        let mut expected = first;
        for (i, r) in records {
            if i != expected {
                return Err(Mismatch {
                    index: i,
                    problem: Problem::Gap { expected },
                    got: Some(r.clone()),
                    want: self.records.get(&expected).cloned(),
                });
            }
            let want = if i < limit { self.records.get(&i) } else { None };
            if want != Some(r) {
                return Err(Mismatch {
                    index: i,
                    problem: self.classify(i, r),
                    got: Some(r.clone()),
                    want: want.cloned(),
                });
            }
            expected += 1;
        }
        Ok(expected)
    }

    /// The first record at or after `from` that a crash of `kind` must keep.
    fn first_required(&self, from: u64, kind: Crash) -> Option<(u64, State)> {
        let upto = self.required_end(kind);
        if from >= upto {
            return None;
        }
        let i = self.records.range(from..upto).next().map_or(from, |(i, _)| *i);
        Some((i, self.state(i).unwrap_or(State::Durable)))
    }

    /// Checks the log a recovery shows (first index `first`, next index
    /// `next`, and its records as a scan from `first` gave them) against
    /// the crashes since the last recovery (none: a reopen, which keeps the
    /// page cache like a process crash), and on success takes it as the
    /// log: every record it holds is durable (recovery syncs what it
    /// serves), the rest is gone. On a mismatch the model is unchanged.
    ///
    /// The recovered log must start at the model's first index (or, if
    /// empty, at the one before an unconfirmed snapshot install), be
    /// contiguous, hold at every index the model's record (acknowledged or
    /// maybe written), nothing past what was attempted, every record the
    /// crash must keep, and end at a commit boundary.
    pub fn recovered<'a, I>(&mut self, first: u64, next: u64, records: I) -> Result<(), Mismatch<T>>
    where
        I: IntoIterator<Item = (u64, &'a T)>,
        T: 'a,
    {
        let kind = self.crash.unwrap_or(Crash::Process);
        let mut records = records.into_iter().peekable();
        if first != self.first {
            let empty_ok = self.unreseat == Some(first) && self.first_required(self.first, kind).is_none();
            if !empty_ok || records.peek().is_some() || next != first {
                return Err(Mismatch::new(first, Problem::WrongFirst { want: self.first }));
            }
            self.records.clear();
            self.boundaries = BTreeSet::from([first]);
            self.first = first;
            self.end = first;
            self.next = first;
            self.durable_to = first;
            self.cached_to = first;
            self.floor = first;
            self.adopted();
            return Ok(());
        }
        let end = self.check_records(first, self.end, records)?;
        if next != end {
            return Err(Mismatch::new(next, Problem::WrongNext { want: end }));
        }
        if let Some((i, state)) = self.first_required(end, kind) {
            return Err(Mismatch {
                index: i,
                problem: Problem::Missing { state },
                got: None,
                want: self.records.get(&i).cloned(),
            });
        }
        if !self.boundaries.contains(&end) {
            let from = self.boundaries.range(..end).next_back().copied().unwrap_or(self.first);
            let to = self.boundaries.range(end..).next().copied().unwrap_or(self.end);
            return Err(Mismatch::new(end, Problem::Torn { from, to }));
        }
        drop(self.records.split_off(&end));
        drop(self.boundaries.split_off(&end.saturating_add(1)));
        self.next = end;
        self.end = end;
        self.floor = end;
        self.durable_to = end;
        self.cached_to = end;
        self.adopted();
        Ok(())
    }

    /// The state every recovery leaves.
    fn adopted(&mut self) {
        self.reseatable = false;
        self.unreseat = None;
        self.exact = true;
        self.crash = None;
        self.assert_invariants();
    }

    /// Checks a running log at a quiescent point (no append, prune or
    /// truncation in flight; no crash since the last recovery): it must be
    /// exactly the model, `[first, next)` with the model's acknowledged
    /// record at every index. A model that is not [`Log::exact`] checks
    /// nothing.
    pub fn live<'a, I>(&self, first: u64, next: u64, records: I) -> Result<(), Mismatch<T>>
    where
        I: IntoIterator<Item = (u64, &'a T)>,
        T: 'a,
    {
        if !self.exact {
            return Ok(());
        }
        if first != self.first {
            return Err(Mismatch::new(first, Problem::WrongFirst { want: self.first }));
        }
        if next != self.next {
            return Err(Mismatch::new(next, Problem::WrongNext { want: self.next }));
        }
        let end = self.check_records(first, self.next, records)?;
        if end < self.next {
            return Err(Mismatch {
                index: end,
                problem: Problem::Missing {
                    state: self.state(end).unwrap_or(State::Acknowledged),
                },
                got: None,
                want: self.records.get(&end).cloned(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
