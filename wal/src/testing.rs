//! Test-only switches for the shuttle build (`wal-shuttle`): planted bugs
//! that `sim-tests/tests/threads.rs` must catch, to show that the
//! thread-interleaving checker can see a race between two synchronous
//! critical sections. Compiled only with the `shuttle` feature: the `wal`
//! crate has none of this.

// A plain std atomic, not a shuttle one: it is set outside any shuttle
// execution and is not part of what the checker explores.
use std::sync::atomic::{AtomicBool, Ordering};

static SPLIT_ADMISSION: AtomicBool = AtomicBool::new(false);

/// Plants the "split admission" bug (process-wide): `Inner::admit` releases
/// the state lock after assigning the indices and takes it again to enqueue
/// the request, with no `.await` in between, so another thread can be
/// admitted (and even written) between the two.
pub fn set_split_admission(on: bool) {
    SPLIT_ADMISSION.store(on, Ordering::SeqCst);
}

/// Whether the split admission bug is planted.
pub(crate) fn split_admission() -> bool {
    SPLIT_ADMISSION.load(Ordering::SeqCst)
}
