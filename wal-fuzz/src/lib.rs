//! # wal-fuzz
//!
//! The bodies of the `wal` fuzz targets, as ordinary functions, so that the
//! cargo-fuzz targets in `fuzz/` are one line each and CI replays the
//! committed corpus (`fuzz/corpus/*/`, `fuzz/regressions/*/`) without
//! cargo-fuzz (`tests/corpus.rs`). See `docs/FUZZING.md`.
//!
//! - [`record_decode`]: arbitrary bytes into the pure codec.
//! - [`recover`]: arbitrary directory contents (structured with `arbitrary`)
//!   on a SimFs, then `Wal::open`, twice.
//! - [`ops`]: structured sequences of operations, crashes and faults,
//!   checked against a model.
//!
//! Every body panics on a violated property and returns normally otherwise.
//! None of them needs madsim.

mod decode;
pub mod enc;
pub mod gen;
mod ops;
mod recover;
pub mod seeds;

pub use decode::record_decode;
pub use ops::{describe_ops, ops};
pub use recover::recover;

/// A fuzz target body.
pub type Body = fn(&[u8]);

/// The targets by name, for replaying a corpus directory.
pub const TARGETS: [(&str, Body); 3] = [("record_decode", record_decode), ("recover", recover), ("ops", ops)];
