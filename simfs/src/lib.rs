//! # simfs
//!
//! A filesystem trait for storage engines ([`Fs`], [`File`]), the real Linux
//! implementation ([`OsFs`]), and [`SimFs`]: a deterministic in-memory
//! filesystem that models the page cache and injects the faults real disks
//! and filesystems produce (ENOSPC, EIO, torn writes, failed and lying fsyncs,
//! lost directory entries, latent sector errors, bit rot, misdirected writes,
//! process crashes and power loss), all decided by one seed.
//!
//! See `docs/SIMFS.md` for the fault table.
#![forbid(unsafe_code)]

mod fs;
mod os;
mod sim;

pub use fs::{DirEntry, File, Fs, Metadata, OpenOptions};
pub use os::{OsDirLock, OsFile, OsFs};
pub use sim::config::{
    CrashKind, FaultConfig, FaultCounters, FaultKind, LogicalClock, SimClock, SimConfig,
    SyncFailureProfile,
};
pub use sim::{SimDirLock, SimFile, SimFs, TraceEvent};
#[cfg(feature = "madsim")]
pub use sim::MadsimClock;
