//! Reader leases as the oracle sees them: which iterators are alive, where
//! they are, and what each prune may therefore remove.
//!
//! The engine's rules (`wal/src/lifecycle.rs`, `Leases`): a live iterator
//! holds the index it will read next; a prune through `k` computes, once,
//! after taking the lifecycle lock, the highest index it may remove. A lease
//! at or below `k` and below the readable end holds it back (to just below
//! the lease) and counts one hold; its hold number `max_lease_holds + 1`
//! revokes it instead (the prune ignores it, the iterator returns
//! `IteratorExpired`). A lease at or past the readable end (caught up) holds
//! nothing back, and its iterator skips to the new first index. Prune removes
//! whole sealed segments only, oldest first.
//!
//! The oracle does not see the moment a prune computes its limit, only the
//! prune's start and end, and the iterators' positions at their own steps
//! (madsim tasks interleave only at awaits, and every sample below is taken
//! with no await between the call and the record). So it keeps two bounds:
//!
//! * what a prune *may* have done: it may have passed an iterator that was
//!   caught up at any sample taken while the prune ran (the prune's start,
//!   the iterator's creation, each step), and it may have counted a hold for
//!   every iterator alive during it whose position was at or below `k`
//!   (`holds_max`). A skip forward is accepted only up to `k + 1` of a prune
//!   that may have passed the iterator caught up, or if the lease may have
//!   been revoked; `IteratorExpired` only if `holds_max > max_lease_holds`.
//!   After a prune returns `Ok(first)`, a live iterator below `first` that
//!   neither excuse covers is a violation (the prune removed records a live,
//!   unexpired lease still needed).
//! * what a prune *must* have done: a prune that ran alone (no other prune
//!   or truncation overlapped it), through `k` at or above the first index,
//!   over an iterator alive throughout, whose position stayed at or below
//!   `k` and below the readable end seen at the start, certainly counted a
//!   hold for it, or found it revoked (`holds_min`). Once `holds_min >
//!   max_lease_holds` the lease is certainly revoked. After a prune returns
//!   `Ok`, a sealed segment at the front of the log (sealed when the prune
//!   started) whose last index is at or below `k` and below every position
//!   of an iterator that may still hold a lease is a violation: the prune
//!   kept more than the lease rules allow.

use std::collections::{BTreeMap, BTreeSet};

use crate::coverage::{Coverage, Mark};
use crate::oracle::Oracle;

/// One segment as `Wal::segment_files` lists it: name, first index, last
/// index (`None`: empty), sealed.
pub type SegmentFile = (String, u64, Option<u64>, bool);

/// The live iterators and the prunes running now.
#[derive(Debug, Default)]
pub struct Leases {
    max_holds: u32,
    next_id: u64,
    iters: BTreeMap<u64, Iter>,
    /// Prunes running now, by start tick.
    prunes: BTreeMap<u64, Prune>,
    /// Truncations running now.
    truncations: u32,
    /// Snapshot installs running now (`append_at(j)` on an emptied log,
    /// which moves the first index to `j`): attempt id → `j`.
    reseats: BTreeMap<usize, u64>,
}

#[derive(Debug)]
struct Iter {
    from: u64,
    /// The index it reads next, as of its last step.
    pos: u64,
    /// A skip may land at most here: `k + 1` of the prunes that may have
    /// passed it while it was caught up (0: none).
    skip_to: u64,
    /// Prunes that may have counted a hold (finished ones).
    holds_max: u32,
    /// Prunes that certainly counted a hold or found the lease revoked.
    holds_min: u32,
}

#[derive(Debug)]
struct Prune {
    k: u64,
    first: u64,
    next: u64,
    /// Another prune or a truncation overlapped it.
    tainted: bool,
    /// A truncation overlapped it (segments may have been unsealed or cut).
    truncated: bool,
    /// Segments sealed at its start, by name.
    sealed: BTreeSet<String>,
    /// Iterators alive at some point while it ran.
    seen: BTreeMap<u64, Seen>,
}

#[derive(Debug, Clone, Copy)]
struct Seen {
    /// Lowest position while the prune ran.
    pos_min: u64,
    /// Alive when the prune started.
    at_start: bool,
    /// Dropped while the prune ran.
    gone: bool,
}

impl Leases {
    /// No iterators; leases are revoked at hold `max_holds + 1`.
    pub fn new(max_holds: u32) -> Leases {
        Leases {
            max_holds,
            ..Leases::default()
        }
    }

    /// A crash: every iterator and prune of the instance is gone.
    pub fn clear(&mut self) {
        self.iters.clear();
        self.prunes.clear();
        self.truncations = 0;
        self.reseats.clear();
    }

    /// Append attempt `id` may start the emptied log at `j` (a snapshot
    /// install): every live iterator is caught up, and may skip to `j`.
    pub fn reseat_begin(&mut self, id: usize, j: u64) {
        self.reseats.insert(id, j);
        for it in self.iters.values_mut() {
            it.skip_to = it.skip_to.max(j);
        }
    }

    /// Append attempt `id` returned (or a crash aborted it).
    pub fn reseat_end(&mut self, id: usize) {
        self.reseats.remove(&id);
    }

    /// A truncation started.
    pub fn truncate_begin(&mut self) {
        self.truncations += 1;
        for p in self.prunes.values_mut() {
            p.tainted = true;
            p.truncated = true;
        }
    }

    /// A truncation returned (or a crash interrupted it).
    pub fn truncate_end(&mut self) {
        self.truncations = self.truncations.saturating_sub(1);
    }

    /// Holds an iterator may have had counted, including by prunes running now.
    fn may_be_revoked(&self, id: u64) -> bool {
        let Some(it) = self.iters.get(&id) else {
            return true;
        };
        let running = self
            .prunes
            .values()
            .filter(|p| p.seen.get(&id).is_some_and(|s| s.pos_min <= p.k))
            .count() as u32;
        it.holds_max.saturating_add(running) > self.max_holds
    }

    /// The iterator may have been passed while caught up by every running prune.
    fn caught_up(&mut self, id: u64) {
        let Some(it) = self.iters.get_mut(&id) else {
            return;
        };
        for p in self.prunes.values() {
            if p.seen.contains_key(&id) {
                it.skip_to = it.skip_to.max(p.k.saturating_add(1));
            }
        }
        for &j in self.reseats.values() {
            it.skip_to = it.skip_to.max(j);
        }
    }

    fn created(&mut self, from: u64, next: u64) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.iters.insert(
            id,
            Iter {
                from,
                pos: from,
                skip_to: 0,
                holds_max: 0,
                holds_min: 0,
            },
        );
        for p in self.prunes.values_mut() {
            p.seen.insert(
                id,
                Seen {
                    pos_min: from,
                    at_start: false,
                    gone: false,
                },
            );
        }
        if from >= next {
            self.caught_up(id);
        }
        id
    }

    fn moved(&mut self, id: u64, pos: u64, next: u64) {
        if let Some(it) = self.iters.get_mut(&id) {
            it.pos = pos;
        }
        if pos >= next {
            self.caught_up(id);
        }
    }

    fn dropped(&mut self, id: u64) {
        self.iters.remove(&id);
        for p in self.prunes.values_mut() {
            if let Some(s) = p.seen.get_mut(&id) {
                s.gone = true;
            }
        }
    }

    fn begin_prune(&mut self, start: u64, k: u64, first: u64, next: u64, segments: &[SegmentFile]) {
        let tainted = !self.prunes.is_empty() || self.truncations > 0;
        for p in self.prunes.values_mut() {
            p.tainted = true;
        }
        let seen = self
            .iters
            .iter()
            .map(|(&id, it)| {
                (
                    id,
                    Seen {
                        pos_min: it.pos,
                        at_start: true,
                        gone: false,
                    },
                )
            })
            .collect();
        let sealed = segments
            .iter()
            .filter(|s| s.3 && s.2.is_some_and(|l| l <= k))
            .map(|s| s.0.clone())
            .collect();
        self.prunes.insert(
            start,
            Prune {
                k,
                first,
                next,
                tainted,
                truncated: self.truncations > 0,
                sealed,
                seen,
            },
        );
        let caught: Vec<u64> = self
            .iters
            .iter()
            .filter(|(_, it)| it.pos >= next)
            .map(|(&id, _)| id)
            .collect();
        for id in caught {
            self.caught_up(id);
        }
    }

    /// The prune started at `start` returned (`ok`: its new first index).
    fn finish_prune(
        &mut self,
        start: u64,
        ok: Option<u64>,
        segments: &[SegmentFile],
        cov: &mut Coverage,
    ) -> Vec<String> {
        let Some(p) = self.prunes.remove(&start) else {
            return Vec::new();
        };
        let max = self.max_holds;
        let mut certain_holder = false;
        for (id, s) in &p.seen {
            let Some(it) = self.iters.get_mut(id) else {
                continue;
            };
            if s.pos_min <= p.k {
                it.holds_max += 1;
            }
            let certain =
                ok.is_some() && s.at_start && !p.tainted && p.k >= p.first && it.pos <= p.k && it.pos < p.next;
            if certain {
                if it.holds_min <= max {
                    certain_holder = true;
                }
                it.holds_min += 1;
            }
        }
        let Some(nf) = ok else {
            return Vec::new();
        };
        let mut out = Vec::new();
        // Nothing a live, unexpired lease still needed is gone.
        for (id, it) in &self.iters {
            if it.pos < nf && it.skip_to < nf && it.holds_max <= max {
                out.push(format!(
                    "prune_through({}) -> {nf} removed index {} that live iterator #{id} (from {}, never caught up \
                     while a prune ran, {} of {max} holds) still had to read",
                    p.k, it.pos, it.from, it.holds_max
                ));
            }
        }
        // Nothing kept that no lease needs.
        if let Some((name, f, Some(l), true)) = segments.first() {
            let l = *l;
            if l <= p.k && p.sealed.contains(name) && !p.truncated {
                let holder = p.seen.iter().find(|(id, s)| {
                    s.pos_min <= l && (s.gone || self.iters.get(id).is_some_and(|it| it.holds_min <= max))
                });
                match holder {
                    None => out.push(format!(
                        "prune_through({}) -> {nf} kept sealed segment {name} ({f}..={l}) though no lease \
                         that may still hold it needed it (leases are revoked after {max} holds)",
                        p.k
                    )),
                    Some(_) if certain_holder => cov.mark(Mark::PruneHeldByLease),
                    Some(_) => {}
                }
            }
        }
        out
    }
}

impl Oracle {
    /// An iterator from `from` was created (`next`: the readable end now).
    /// Returns its id.
    pub fn iter_created(&mut self, from: u64, next: u64) -> u64 {
        let id = self.leases.created(from, next);
        self.event(&format!("iterator #{id} from {from} (next {next})"));
        id
    }

    /// A `read_range` from `from` starts: the iterator inside it holds a
    /// lease whose position the workload never sees (somewhere from `from`
    /// on). It justifies a prune keeping what lies from `from` on, and a
    /// prune removing what it already passed is no violation (its skip
    /// bound is unlimited). Drop it with [`Oracle::iter_dropped`].
    pub fn range_lease_created(&mut self, from: u64, next: u64) -> u64 {
        let id = self.leases.created(from, next);
        if let Some(it) = self.leases.iters.get_mut(&id) {
            it.skip_to = u64::MAX;
        }
        self.event(&format!("read_range lease #{id} from {from} (next {next})"));
        id
    }

    /// Iterator `id` now reads `pos` next (`next`: the readable end now).
    pub fn iter_moved(&mut self, id: u64, pos: u64, next: u64) {
        self.leases.moved(id, pos, next);
    }

    /// Iterator `id`, at `pos`, skipped forward to `to`.
    pub fn iter_skipped(&mut self, id: u64, pos: u64, to: u64) {
        self.cov.checks.lease_checks += 1;
        let skip_to = self.leases.iters.get(&id).map_or(0, |it| it.skip_to);
        if to <= skip_to {
            self.cov.mark(Mark::CaughtUpSkip);
            self.event(&format!(
                "iterator #{id} skipped from {pos} to {to} (pruned while caught up)"
            ));
        } else if self.leases.may_be_revoked(id) {
            self.event(&format!(
                "iterator #{id} skipped from {pos} to {to} (lease may be revoked)"
            ));
        } else {
            self.violation(format!(
                "iterator #{id} skipped from {pos} to {to}, but no prune or snapshot install passed it caught \
                 up (up to {skip_to}) and its lease was not revoked"
            ));
        }
    }

    /// Iterator `id`, at `pos`, returned `IteratorExpired`.
    pub fn iter_expired(&mut self, id: u64, pos: u64) {
        self.cov.checks.lease_checks += 1;
        if self.leases.may_be_revoked(id) {
            self.cov.mark(Mark::LeaseRevoked);
            self.event(&format!("iterator #{id} expired at {pos}"));
        } else {
            let holds = self.leases.iters.get(&id).map_or(0, |it| it.holds_max);
            self.violation(format!(
                "iterator #{id} expired at {pos} after at most {holds} holds (revoked after {})",
                self.leases.max_holds
            ));
        }
    }

    /// Iterator `id` was dropped.
    pub fn iter_dropped(&mut self, id: u64) {
        self.leases.dropped(id);
    }

    /// A prune through `k` started at tick `start` (log `[first, next)`,
    /// `segments` as listed now).
    pub fn lease_prune_begin(&mut self, start: u64, k: u64, first: u64, next: u64, segments: &[SegmentFile]) {
        self.leases.begin_prune(start, k, first, next, segments);
    }

    /// Whether an iterator or range read seen while the prune started at
    /// `start` ran (its lowest position then), or live now, may have held
    /// that prune through `k` back. Call before `lease_prune_finish`.
    pub fn lease_may_hold(&self, start: u64, k: u64) -> bool {
        let seen = self
            .leases
            .prunes
            .get(&start)
            .is_some_and(|p| p.seen.values().any(|s| s.pos_min <= k));
        seen || self.leases.iters.values().any(|it| it.pos <= k)
    }

    /// The prune started at tick `start` returned; `segments` as listed now.
    pub fn lease_prune_finish(&mut self, start: u64, result: &wal::Result<u64>, segments: &[SegmentFile]) {
        let ok = result.as_ref().ok().copied();
        let found = self.leases.finish_prune(start, ok, segments, &mut self.cov);
        self.cov.checks.lease_checks += 1;
        for v in found {
            self.violation(v);
        }
    }
}
