//! The oracle's checks of the embedding API: `append_with` (the maker gets
//! exactly the index the append returns), `read_range` (clamped, bounded,
//! contiguous, never short without cause), `wait_durable` (an `Ok` is a
//! durability promise for the prefix) and seal events (in order, never
//! overlapping within an open).

use wal::{Error, SealCause, SealNotice};

use super::{Oracle, Outcome};
use crate::coverage::Mark;
use crate::leases::SegmentFile;

impl Oracle {
    /// The result of an `append_with` attempt whose maker was given
    /// `given` (`None`: never called).
    pub fn finish_append_with(&mut self, id: usize, result: &wal::Result<u64>, given: Option<u64>) {
        if let Ok(i) = result {
            if given != Some(*i) {
                self.violation(format!(
                    "#{id} append_with returned {i} but its maker was given {given:?}"
                ));
            }
            self.cov.mark(Mark::AppendWithChecked);
        }
        self.finish_append(id, result);
    }

    /// An `append_with` future dropped before or after its maker ran:
    /// before, nothing was admitted and the records must never appear.
    pub fn cancelled_append_with(&mut self, id: usize, given: Option<u64>) {
        if given.is_some() {
            self.cancelled_append(id);
            return;
        }
        self.cov.checks.cancellations += 1;
        self.cov.mark(Mark::CancelledBeforeMaker);
        if let Some(a) = self.attempts.get_mut(id) {
            a.outcome = Outcome::Rejected;
        }
        let end = self.now();
        if let Some(a) = self.attempts.get_mut(id) {
            a.end = end;
        }
        self.leases.reseat_end(id);
        self.event(&format!("#{id} append_with cancelled before its maker ran"));
    }

    /// Checks `read_range(start..end, max_bytes)` started at tick `tick`
    /// with the log `[first, next)` as it was then.
    #[allow(clippy::too_many_arguments)]
    pub fn finish_read_range(
        &mut self,
        tick: u64,
        (start, end): (u64, u64),
        max_bytes: usize,
        (first, next): (u64, u64),
        result: &wal::Result<Vec<(u64, Vec<u8>)>>,
    ) {
        self.now();
        self.cov.checks.ops += 1;
        self.failstop(tick, result.as_ref().map(|_| ()), "read_range");
        let got = match result {
            Ok(got) => got,
            Err(e @ Error::OutOfRange { .. }) => {
                return self.violation(format!("read_range({start}..{end}) returned {e}: it clamps"));
            }
            Err(e) => return self.check_read_error(tick, e, start.max(first), first, next),
        };
        let (lo, hi) = (start.max(first), end.min(next));
        let what = format!("read_range({start}..{end}, {max_bytes}) on [{first}, {next})");
        if got.windows(2).any(|w| w[0].0 + 1 != w[1].0) || got.iter().any(|r| r.0 >= end || r.0 < lo) {
            let indices: Vec<u64> = got.iter().map(|r| r.0).collect();
            return self.violation(format!("{what}: indices {indices:?} not one run inside the range"));
        }
        let total: usize = got.iter().map(|r| r.1.len()).sum();
        if got.len() > 1 && total > max_bytes {
            return self.violation(format!("{what}: {total} payload bytes in {} records", got.len()));
        }
        let model_first = self.inst.log.first();
        for (i, p) in got {
            // Read while in the log, pruned since by a prune that passed
            // the read's lease (revoked after too many holds; seed 1217):
            // the model forgot them.
            if *i < model_first && self.racing_prune(tick) {
                continue;
            }
            if !self.check_record(*i, p) {
                return;
            }
        }
        if lo >= hi || self.racing_prune(tick) {
            return;
        }
        let Some(&(at, _)) = got.first() else {
            return self.violation(format!("{what}: empty"));
        };
        if at != lo {
            return self.violation(format!("{what}: starts at {at}"));
        }
        self.cov.mark(Mark::RangeRead);
        // Short only for the byte limit: the next record must not fit.
        let after = at + got.len() as u64;
        if after < hi {
            if let Some(len) = self.inst.acked.get(&after).and_then(|&(id, k)| self.len_of(id, k)) {
                if total + len <= max_bytes {
                    return self.violation(format!(
                        "{what}: stopped at {after} with {total} bytes, though its {len} bytes fit"
                    ));
                }
                self.cov.mark(Mark::RangeReadBounded);
            }
        }
    }

    /// Checks `wait_durable(index)` started at tick `tick` with `next` the
    /// next index then. `Ok` makes every attempt acknowledged wholly at or
    /// below `index` durable (a batch straddling it is not promised).
    pub fn finish_wait_durable(&mut self, tick: u64, index: u64, next: u64, result: &wal::Result<()>) {
        self.now();
        self.cov.checks.ops += 1;
        self.event(&format!("wait_durable({index}) (from tick {tick}) -> {result:?}").replace('\n', " "));
        self.failstop(tick, result.as_ref().map(|_| ()), "wait_durable");
        match result {
            Ok(()) => {
                if index >= next {
                    // Admitted meanwhile by another writer: possible.
                    return;
                }
                self.cov.mark(Mark::WaitDurableDone);
                self.snapshot_after_claims();
                let attempts = &self.attempts;
                let covered = |id: &usize| {
                    attempts.get(*id).is_some_and(|a| match a.outcome {
                        Outcome::Acked(f) => f + a.records.len() as u64 <= index + 1,
                        _ => false,
                    })
                };
                let (done, rest): (Vec<usize>, Vec<usize>) = self.inst.unsynced.iter().partition(|id| covered(id));
                self.inst.unsynced = rest;
                for id in done {
                    self.make_durable(id);
                }
            }
            Err(Error::OutOfRange { .. }) if index >= next => self.cov.mark(Mark::WaitDurableRefused),
            Err(e) if e.is_stopped() => {}
            Err(e) => self.violation(format!("wait_durable({index}) with next {next} returned {e}")),
        }
    }

    /// An `Ok` prune through `k` (the first index `first` when it began) is
    /// exact: the new first index is at least `k + 1` unless a live lease
    /// may sit at or below `k` or acknowledged records need not be durable
    /// (an exact prune never passes the durable end). `segments`: as
    /// listed right after it.
    pub fn check_exact_prune(
        &mut self,
        start: u64,
        k: u64,
        first: u64,
        result: &wal::Result<u64>,
        segments: &[SegmentFile],
    ) {
        let Ok(nf) = result else { return };
        if k < first {
            return;
        }
        if *nf > k {
            if segments.first().is_some_and(|s| s.1 < *nf) {
                self.cov.mark(Mark::PruneInsideSegment);
            }
            return;
        }
        if !self.syncs_every_append || !self.inst.log.exact() || self.lease_may_hold(start, k) {
            return;
        }
        self.violation(format!(
            "prune_through({k}) -> {nf}: short of {} with no lease at or below {k} and every acknowledged record durable",
            k + 1
        ));
    }

    /// Checks the seal notices drained from this open's subscription:
    /// ranges in seal order, a rotation's above everything sealed before
    /// (a truncation may reseal lower; a `Missed` notice forgets).
    pub fn check_seals(&mut self, notices: &[SealNotice]) {
        for n in notices {
            let e = match n {
                SealNotice::Sealed(e) => *e,
                SealNotice::Missed { .. } | SealNotice::Truncated { .. } => {
                    self.inst.last_sealed = None;
                    continue;
                }
                other => return self.violation(format!("unknown seal notice {other:?}")),
            };
            self.cov.checks.seals += 1;
            if e.first_index > e.last_index {
                return self.violation(format!("seal event {e:?}: an empty range"));
            }
            let above = self.inst.last_sealed.is_none_or(|last| e.first_index > last);
            if e.cause == SealCause::Rotation && !above {
                return self.violation(format!(
                    "seal event {e:?} overlaps the previous one (last {:?})",
                    self.inst.last_sealed
                ));
            }
            self.cov.mark(Mark::SealEventSeen);
            self.inst.last_sealed = Some(e.last_index);
        }
    }
}
