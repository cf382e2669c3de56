//! Test-only switches: planted bugs that the checkers must catch, to show
//! that they can see the class of bug they exist for.
//!
//! - With the `shuttle` feature (the `wal-shuttle` crate): the "split
//!   admission" race, caught by `sim-tests/tests/threads.rs`.
//! - With the `planted-bugs` feature (enabled by `sim-tests`): [`Planted`]
//!   bugs, switched on per OS thread (each simulated seed runs on one
//!   thread, so a sweep on other threads is unaffected), caught by
//!   `sim-tests/tests/power.rs`.
//!
//! Without either feature the module is not compiled, and every call site
//! of a switch is behind the same `cfg`: the normal build has no switch.

#[cfg(feature = "shuttle")]
mod split {
    // A plain std atomic, not a shuttle one: it is set outside any shuttle
    // execution and is not part of what the checker explores.
    use std::sync::atomic::{AtomicBool, Ordering};

    static SPLIT_ADMISSION: AtomicBool = AtomicBool::new(false);

    /// Plants the "split admission" bug (process-wide): `Inner::admit`
    /// releases the state lock after assigning the indices and takes it
    /// again to enqueue the request, with no `.await` in between, so another
    /// thread can be admitted (and even written) between the two.
    pub fn set_split_admission(on: bool) {
        SPLIT_ADMISSION.store(on, Ordering::SeqCst);
    }

    /// Whether the split admission bug is planted.
    pub(crate) fn split_admission() -> bool {
        SPLIT_ADMISSION.load(Ordering::SeqCst)
    }
}
#[cfg(feature = "shuttle")]
pub use split::set_split_admission;
#[cfg(feature = "shuttle")]
pub(crate) use split::split_admission;

/// A bug that can be planted in the engine (`planted-bugs` feature).
#[cfg(feature = "planted-bugs")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Planted {
    /// Prune ignores live iterators' leases: it removes segments a live,
    /// unexpired iterator still has to read.
    PruneIgnoresLeases,
    /// Recovery's cut of a torn tail is not fsynced (the cut is written
    /// but a power loss can undo it, under later appends).
    RecoveryCutNotSynced,
    /// Recovery's journal (FORMAT.md §8.5) is written but not fsynced (file
    /// or directory) before the in-place rewrite it protects: a power loss
    /// that tears the rewrite can take durable records and their only
    /// other copy.
    RecoveryJournalNotSynced,
    /// Recovery trusts names (the behaviour issue 12 removed): a header that
    /// disagrees with its name is accepted, and the file that makes another
    /// a leftover is not verified before the removal.
    NamesTrusted,
    /// A dropped future inside a file-changing section stops the WAL (the
    /// behaviour before cancel safety): one `select!` that loses, or one
    /// timeout, is an outage until reopen.
    CancelStops,
    /// `append_with`'s maker is given the next readable index instead of
    /// the one admission assigns: equal when nothing is in flight, wrong
    /// (a duplicate) while earlier appends wait for their group commit.
    MakerGetsReadable,
    /// `read_range` treats an included start as excluded: it skips the
    /// first record of every range.
    RangeSkipsStart,
    /// Seal events of rotations report one index past the segment's last.
    SealOneTooFar,
    /// `wait_durable` returns `Ok` without syncing when its record is not
    /// durable yet.
    WaitDurableNoSync,
    /// Prune removes whole segments only (the behaviour before exact
    /// prune): the first index stays below `k + 1` inside a segment.
    PruneWholeSegmentsOnly,
    /// An exact prune moves the first index in memory but records only the
    /// whole-segment part in the meta file: after a restart the first index
    /// moves back and pruned records are readable again.
    ExactPruneNotDurable,
}

#[cfg(feature = "planted-bugs")]
mod switches {
    use std::cell::Cell;

    use super::Planted;

    thread_local! {
        static PLANTED: Cell<Option<Planted>> = const { Cell::new(None) };
    }

    /// Plants `bug` on this OS thread (`None`: none), until changed.
    pub fn plant(bug: Option<Planted>) {
        PLANTED.with(|p| p.set(bug));
    }

    /// Whether `bug` is planted on this thread.
    pub(crate) fn planted(bug: Planted) -> bool {
        PLANTED.with(|p| p.get() == Some(bug))
    }
}
#[cfg(feature = "planted-bugs")]
pub use switches::plant;
#[cfg(feature = "planted-bugs")]
pub(crate) use switches::planted;
