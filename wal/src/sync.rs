//! The synchronization primitives the engine uses: `std`'s normally, and
//! shuttle's when the sources are compiled with the `shuttle` feature (the
//! `wal-shuttle` crate, for the thread-interleaving checker in
//! `sim-tests/tests/threads.rs`). Every engine module imports `Arc`,
//! `Mutex`, `MutexGuard` and the atomics from here, never from `std::sync`,
//! so that under shuttle every lock and atomic access is a point where the
//! checker may switch threads.
//!
//! The `wal` crate never enables the feature: it is declared there only so
//! that the `cfg` is known, and enabling it there fails to build (the
//! `shuttle` dependency is `wal-shuttle`'s alone).

#[cfg(not(feature = "shuttle"))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(feature = "shuttle"))]
pub(crate) use std::sync::{Arc, Mutex, MutexGuard};

#[cfg(feature = "shuttle")]
pub(crate) use shuttle::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(feature = "shuttle")]
pub(crate) use shuttle::sync::{Arc, Mutex, MutexGuard};
