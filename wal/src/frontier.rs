//! The index frontier of an open log: where it starts and how far its
//! records are durable, written, readable and admitted. One type owns these
//! five numbers, so the order between them is kept in one place:
//!
//! ```text
//! first <= durable <= written <= readable <= admitted
//! ```
//!
//! - `first`: the first index in the log (prune moves it up);
//! - `durable`: records below are on stable storage (fsynced);
//! - `written`: records below are in the segment files, where readers look;
//!   from here to `readable` they are acknowledged but only in the writer's
//!   write buffer (`Options::write_buffer_bytes`);
//! - `readable`: records below are acknowledged and readable through this
//!   `Wal`;
//! - `admitted`: the index the next admitted append gets; from `readable`
//!   to here appends are queued or being written.
//!
//! Every transition names the engine step it belongs to and asserts the
//! order afterwards (and its own precondition) in debug builds, which is
//! every test and simulation run under `cargo test`. It lives behind the
//! state mutex (`State::frontier`): a transition is one critical section.

/// The five indices of an open log, in order (see the module docs).
///
/// Only this module changes them; the engine reads them through the
/// accessors and moves them through the named transitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Frontier {
    first: u64,
    durable: u64,
    /// The first acknowledged record that is only in the write buffer;
    /// `None` when every readable record is in the file.
    unwritten_from: Option<u64>,
    readable: u64,
    admitted: u64,
}

impl Frontier {
    /// The frontier of a log just recovered from its files: everything
    /// found is durable (recovery fsynced what it kept), nothing is queued.
    pub(crate) fn opened(first: u64, next: u64) -> Frontier {
        let f = Frontier {
            first,
            durable: next,
            unwritten_from: None,
            readable: next,
            admitted: next,
        };
        f.check();
        f
    }

    /// The first index in the log.
    pub(crate) fn first(&self) -> u64 {
        self.first
    }

    /// Records below this index are durable.
    pub(crate) fn durable(&self) -> u64 {
        self.durable
    }

    /// Records below this index are in the segment files (readers may look
    /// for them there); from here to [`Frontier::readable`] they are in the
    /// write buffer (see `Inner::ensure_written`).
    pub(crate) fn written(&self) -> u64 {
        self.unwritten_from.unwrap_or(self.readable)
    }

    /// Records below this index are acknowledged and readable.
    pub(crate) fn readable(&self) -> u64 {
        self.readable
    }

    /// The index the next admitted append gets.
    pub(crate) fn admitted(&self) -> u64 {
        self.admitted
    }

    /// Whether the log holds no record and nothing is admitted.
    pub(crate) fn is_empty(&self) -> bool {
        self.first == self.admitted
    }

    /// Admission: hands out `records` indices and returns the first.
    /// `None` (nothing changed) when the `u64` index space would run out
    /// (`u64::MAX` is never an index: `next` must stay representable).
    pub(crate) fn admit(&mut self, records: u64) -> Option<u64> {
        let first = self.admitted;
        self.admitted = first.checked_add(records).filter(|&n| n < u64::MAX)?;
        self.check();
        Some(first)
    }

    /// A failed group: it and everything admitted after it are failed, so
    /// the next admission gets `from` again. Nothing at or above `from` may
    /// have been acknowledged.
    pub(crate) fn unadmit(&mut self, from: u64) {
        debug_assert!(from >= self.readable, "unadmit {from} below readable {}", self.readable);
        self.admitted = from;
        self.check();
    }

    /// A group `[from, next)` was written (or buffered, `buffered`) and is
    /// acknowledged. Groups are published in index order: `from` must be
    /// the readable end.
    pub(crate) fn publish(&mut self, from: u64, next: u64, buffered: bool) {
        debug_assert_eq!(self.readable, from, "groups are published in index order");
        debug_assert!(
            next >= from && next <= self.admitted,
            "publish [{from}, {next}) beyond admitted {}",
            self.admitted
        );
        if buffered {
            self.unwritten_from.get_or_insert(from);
        }
        self.readable = next;
        self.check();
    }

    /// The write buffer was written to the segment file: every readable
    /// record is in the file.
    pub(crate) fn buffer_written(&mut self) {
        debug_assert!(self.unwritten_from.is_some(), "buffered records are marked unwritten");
        self.unwritten_from = None;
        self.check();
    }

    /// An fsync made every record below `next` durable (never moves back).
    pub(crate) fn made_durable(&mut self, next: u64) {
        debug_assert!(
            next <= self.written(),
            "durable {next} beyond written {}",
            self.written()
        );
        self.durable = self.durable.max(next);
        self.check();
    }

    /// A prune removed every record below `first` (whole sealed segments,
    /// which are durable, and an exact prune never passes the durable
    /// end): the log starts there now.
    pub(crate) fn pruned_to(&mut self, first: u64) {
        self.first = self.first.max(first);
        self.check();
    }

    /// The log holds no record and continues at `next`: a prune through its
    /// end (the queue drained, nothing buffered), or an empty log reseated
    /// above its next index (a snapshot install).
    pub(crate) fn emptied_at(&mut self, next: u64) {
        debug_assert!(
            self.readable == self.admitted && self.unwritten_from.is_none(),
            "emptied with appends in flight: {self:?}"
        );
        debug_assert!(
            next >= self.admitted,
            "emptied at {next} below admitted {}",
            self.admitted
        );
        *self = Frontier {
            first: next,
            durable: next,
            unwritten_from: None,
            readable: next,
            admitted: next,
        };
        self.check();
    }

    /// A truncation removes every record at or above `from` (the queue
    /// drained, nothing buffered): readers stop seeing them at once.
    pub(crate) fn truncated(&mut self, from: u64) {
        debug_assert!(
            self.readable == self.admitted && self.unwritten_from.is_none(),
            "truncated with appends in flight: {self:?}"
        );
        debug_assert!(from >= self.first, "truncation at {from} below first {}", self.first);
        self.readable = self.readable.min(from);
        self.durable = self.durable.min(from);
        self.admitted = from;
        self.check();
    }

    /// Memory rebuilt from the files after an interrupted operation: the
    /// files hold `[first, next)`. What they hold beyond the last fsync is
    /// written, not durable. Admitted appends past `next` keep their indices
    /// (`queue_empty` false); otherwise the next admission gets `next`.
    pub(crate) fn rebuilt(&mut self, first: u64, next: u64, queue_empty: bool) {
        debug_assert!(
            queue_empty || next <= self.admitted,
            "rebuilt past the admitted appends"
        );
        self.first = first;
        self.readable = next;
        self.durable = self.durable.min(next).max(first);
        self.unwritten_from = None;
        if queue_empty {
            self.admitted = next;
        }
        self.check();
    }

    /// The order every transition keeps.
    fn check(&self) {
        debug_assert!(
            self.first <= self.durable
                && self.durable <= self.written()
                && self.written() <= self.readable
                && self.readable <= self.admitted,
            "index frontier out of order: {self:?}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::Frontier;

    #[test]
    fn a_group_moves_through_admitted_readable_durable() {
        let mut f = Frontier::opened(1, 5);
        assert_eq!(f.admit(3), Some(5));
        assert_eq!((f.readable(), f.admitted()), (5, 8));
        f.publish(5, 8, false);
        assert_eq!((f.durable(), f.written(), f.readable()), (5, 8, 8));
        f.made_durable(8);
        assert_eq!(f.durable(), 8);
        f.made_durable(6);
        assert_eq!(f.durable(), 8, "durability never moves back");
    }

    #[test]
    fn buffered_records_are_readable_before_they_are_written() {
        let mut f = Frontier::opened(1, 1);
        f.admit(2);
        f.publish(1, 3, true);
        f.admit(1);
        f.publish(3, 4, true);
        assert_eq!((f.written(), f.readable()), (1, 4));
        f.buffer_written();
        assert_eq!(f.written(), 4);
    }

    #[test]
    fn the_index_space_ends_below_u64_max() {
        let mut f = Frontier::opened(u64::MAX - 2, u64::MAX - 2);
        assert_eq!(f.admit(2), None);
        assert_eq!(f.admitted(), u64::MAX - 2, "a refused admission changes nothing");
        assert_eq!(f.admit(1), Some(u64::MAX - 2));
    }

    #[test]
    fn truncation_and_rebuild_keep_the_order() {
        let mut f = Frontier::opened(1, 10);
        f.truncated(4);
        assert_eq!((f.first(), f.durable(), f.readable(), f.admitted()), (1, 4, 4, 4));
        f.admit(2);
        f.publish(4, 6, false);
        f.rebuilt(2, 5, true);
        assert_eq!((f.first(), f.durable(), f.readable(), f.admitted()), (2, 4, 5, 5));
        f.emptied_at(9);
        assert!(f.is_empty());
        assert_eq!((f.first(), f.durable(), f.admitted()), (9, 9, 9));
    }

    #[test]
    #[should_panic(expected = "published in index order")]
    fn publishing_out_of_order_is_caught() {
        let mut f = Frontier::opened(1, 1);
        f.admit(4);
        f.publish(3, 5, false);
    }

    #[test]
    #[should_panic(expected = "beyond written")]
    fn durability_beyond_the_written_records_is_caught() {
        let mut f = Frontier::opened(1, 1);
        f.admit(2);
        f.publish(1, 3, true);
        f.made_durable(3);
    }

    #[test]
    #[should_panic(expected = "in flight")]
    fn a_truncation_with_queued_appends_is_caught() {
        let mut f = Frontier::opened(1, 5);
        f.admit(1);
        f.truncated(3);
    }
}
