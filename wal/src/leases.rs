//! Reader leases: where each live iterator will read next, which prune must
//! not remove, and the policy for iterators that hold prune back too long.

use std::collections::BTreeMap;

use tracing::warn;

use crate::sync::{Arc, AtomicU64, Ordering};

/// Reader leases: each live iterator holds the index it will read next, and
/// prune never deletes a segment a lease still needs.
///
/// Policy for leaked or stalled iterators: a lease may hold a prune back at
/// most `max_holds` times; then it is revoked and its iterator returns
/// [`Error::IteratorExpired`]. A lease at the end of the log (an iterator on
/// an empty or caught-up log) needs nothing that exists, so it never holds a
/// prune back.
///
/// A prune decides what it may remove once, then works across awaits; an
/// iterator created meanwhile was not counted. So from that decision until
/// the prune returns, `pruning_below` is the first index the prune may
/// leave, and no lease may start below it ([`crate::Wal::iter_from`]
/// returns `OutOfRange`).
#[derive(Debug, Default)]
pub(crate) struct Leases {
    next_id: u64,
    live: BTreeMap<u64, Lease>,
    /// While a prune runs: the first index it may leave (0: no prune).
    pruning_below: u64,
}

#[derive(Debug)]
struct Lease {
    /// Shared with the iterator, which advances it without taking the
    /// leases lock (once per record). It only grows, so a prune that reads
    /// an older value is merely more conservative.
    position: Arc<AtomicU64>,
    holds: u32,
    revoked: bool,
}

impl Leases {
    /// A new lease at `position`: its id and the position the iterator
    /// advances.
    pub(crate) fn take(&mut self, position: u64) -> (u64, Arc<AtomicU64>) {
        self.next_id += 1;
        let shared = Arc::new(AtomicU64::new(position));
        self.live.insert(
            self.next_id,
            Lease {
                position: shared.clone(),
                holds: 0,
                revoked: false,
            },
        );
        (self.next_id, shared)
    }

    /// The first index a running prune may leave (0: none runs).
    pub(crate) fn pruning_below(&self) -> u64 {
        self.pruning_below
    }

    /// A prune decided it may remove everything below `first` (0: the
    /// prune returned).
    pub(crate) fn set_pruning_below(&mut self, first: u64) {
        self.pruning_below = first;
    }

    pub(crate) fn release(&mut self, id: u64) {
        self.live.remove(&id);
    }

    pub(crate) fn revoked(&self, id: u64) -> bool {
        self.live.get(&id).is_none_or(|l| l.revoked)
    }

    /// The highest index a prune through `k` may remove, counting holds and
    /// revoking leases that held too often; `None` when a lease at index 0
    /// holds everything back (there is no index below it to name). A lease
    /// at or past `readable` (caught up) needs no existing record and holds
    /// nothing back.
    pub(crate) fn limit(&mut self, k: u64, readable: u64, max_holds: u32) -> Option<u64> {
        let mut limit = Some(k);
        for l in self.live.values_mut().filter(|l| !l.revoked) {
            let position = l.position.load(Ordering::Acquire);
            if position > k || position >= readable {
                continue;
            }
            l.holds += 1;
            if l.holds > max_holds {
                l.revoked = true;
                warn!(position, "revoked an iterator lease that held prune back too often");
            } else {
                // `position - 1` for a lease at 0 would be 0, which names
                // the very record the lease needs (seed 20025067).
                limit = limit.min(position.checked_sub(1));
            }
        }
        limit
    }

    pub(crate) fn len(&self) -> usize {
        self.live.len()
    }
}
