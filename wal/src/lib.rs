//! # wal
//!
//! A write-ahead log over the [`simfs::Fs`] trait, so the same code runs on a
//! real disk ([`OsFs`], re-exported from `simfs`, and the default: a
//! `Wal` is a `Wal<OsFs>`) and in deterministic simulation
//! ([`simfs::SimFs`]).
//!
//! - Dense `u64` indices; single and atomic-batch appends, at the next index
//!   or at a caller-chosen one that must be exactly the next.
//! - Group commit: concurrent appenders share one write and one fsync; disk
//!   order is admission order.
//! - Segments: one active, sealed ones named by their index range; rotation by
//!   size, record count or on request.
//! - Recovery cuts a torn tail and reports mid-log corruption; fsync errors
//!   stop the WAL (fail-stop); a directory lock keeps a second opener out.
//!
//! The file format is specified byte by byte in `docs/FORMAT.md`; the
//! invariants and the code and tests that keep them in `docs/ARCHITECTURE.md`.
//!
//! ```
//! use std::path::Path;
//! futures::executor::block_on(async {
//!     let wal = wal::Wal::open(simfs::SimFs::new(7), Path::new("/wal"), wal::Options::default()).await?;
//!     let i = wal.append(b"put k v".to_vec()).await?;
//!     assert_eq!(wal.read(i).await?, b"put k v");
//!     Ok::<_, wal::Error>(())
//! }).unwrap();
//! ```
#![forbid(unsafe_code)]

// The record codec is reachable for the fuzzers and the simulation's
// layout parser, not part of the API: no stability promise.
#[doc(hidden)]
pub mod codec;
mod compaction;
mod error;
mod evidence;
mod frontier;
mod group_commit;
mod inner;
mod iter;
mod journal;
mod leases;
mod lifecycle;
mod meta;
mod options;
mod range;
mod recovery;
mod resume;
mod seals;
mod segment;
mod sync;
#[cfg(any(feature = "shuttle", feature = "planted-bugs"))]
#[doc(hidden)]
pub mod testing;
mod verify;
#[allow(clippy::module_inception)]
mod wal;
mod writer;

pub use codec::MAX_RECORD_BYTES;
pub use compaction::{CompactionOptions, CompactionPlan, CompactionRun, SegmentInfo};
pub use error::{Error, Result};
pub use evidence::LostRecords;
pub use iter::WalIter;
pub use options::{Options, RecoveryMode, Sleeper, SyncPolicy};
pub use recovery::RecoveryReport;
pub use seals::{SealCause, SealEvent, SealEvents, SealNotice, SEAL_EVENTS_QUEUED_MAX, SEAL_SUBSCRIBERS_MAX};
pub use simfs::OsFs;
pub use verify::{verify_dir, Notice, NoticeKind, Problem, ProblemKind, VerifyReport};
pub use wal::{Stats, Wal};
