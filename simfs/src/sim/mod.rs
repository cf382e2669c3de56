//! [`SimFs`]: a deterministic in-memory filesystem with a durable/volatile
//! model and seeded fault injection. (API contract: bodies to be written.)

pub mod config;

use std::io;
use std::path::Path;

use async_trait::async_trait;

use crate::fs::{DirEntry, File, Fs, Metadata, OpenOptions};
use config::{CrashKind, FaultConfig, FaultCounters, SimConfig};

/// One recorded operation of [`SimFs`], from [`SimFs::trace`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TraceEvent {
    /// Position of the event in the whole run (0-based, never reset).
    pub seq: u64,
    /// Simulated time from the [`config::SimClock`], in nanoseconds.
    pub time_ns: u64,
    /// The operation, e.g. `"write"`, `"sync_data"`, `"rename"`, `"power_loss"`.
    pub op: &'static str,
    /// The inode involved, if any.
    pub ino: Option<u64>,
    /// The path involved, if any (the first path for a rename).
    pub path: Option<String>,
    /// Offset for reads and writes, new length for set_len/allocate.
    pub offset: u64,
    /// Length for reads and writes.
    pub len: u64,
    /// `"ok"`, `"ok:<n>"` for a byte count, or the error's kind.
    pub result: String,
    /// The fault injected into this operation, if any.
    pub fault: Option<config::FaultKind>,
}

/// A deterministic simulated filesystem. Cheap to clone (shared state).
#[derive(Clone)]
pub struct SimFs {}

/// An open file of [`SimFs`].
pub struct SimFile {}

/// A held directory lock of [`SimFs`].
pub struct SimDirLock {}

impl SimFs {
    /// A filesystem with the default (pessimistic POSIX) profile and no faults.
    pub fn new(seed: u64) -> SimFs {
        Self::with_config(seed, SimConfig::default())
    }
    /// A filesystem with a configuration.
    pub fn with_config(_seed: u64, _config: SimConfig) -> SimFs {
        todo!()
    }
    /// Replaces the fault probabilities (e.g. `FaultConfig::none()` for a heal phase).
    pub fn set_faults(&self, _faults: FaultConfig) {
        todo!()
    }
    /// The current fault probabilities.
    pub fn faults(&self) -> FaultConfig {
        todo!()
    }
    /// Sets or removes the capacity limit at run time (disk-full episodes).
    pub fn set_capacity(&self, _capacity_bytes: Option<u64>) {
        todo!()
    }
    /// Bytes currently used (live view).
    pub fn used_bytes(&self) -> u64 {
        todo!()
    }
    /// Crashes the simulated machine. Every handle and lock taken before
    /// returns an error from then on (a dead process's descriptors).
    pub fn crash(&self, _kind: CrashKind) {
        todo!()
    }
    /// Durable content of the file at `path` (by durable directory entries).
    pub fn durable_content(&self, _path: &Path) -> Option<Vec<u8>> {
        todo!()
    }
    /// Live (page-cache) content of the file at `path`.
    pub fn volatile_content(&self, _path: &Path) -> Option<Vec<u8>> {
        todo!()
    }
    /// Per-kind counts of every fault injected so far.
    pub fn counters(&self) -> FaultCounters {
        todo!()
    }
    /// The last `trace_capacity` events.
    pub fn trace(&self) -> Vec<TraceEvent> {
        todo!()
    }
    /// A hash of every event so far (including dropped ones).
    pub fn trace_hash(&self) -> u64 {
        todo!()
    }
}
