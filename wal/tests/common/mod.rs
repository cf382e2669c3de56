//! Helpers shared by the wal integration tests.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use simfs::{SimConfig, SimFs, StepClock, YieldClock};
use wal::{Options, Wal};

pub const DIR: &str = "/log";

pub fn dir() -> &'static Path {
    Path::new(DIR)
}

/// A payload that names its index, so tests can check integrity.
pub fn payload(index: u64, len: usize) -> Vec<u8> {
    let mut v = format!("rec-{index}-").into_bytes();
    v.resize(len.max(v.len()), (index % 251) as u8);
    v
}

pub async fn open(fs: &SimFs, opts: Options) -> wal::Result<Wal<SimFs>> {
    Wal::open(fs.clone(), dir(), opts).await
}

/// Reads the whole log through an iterator.
pub async fn collect<F: simfs::Fs>(wal: &Wal<F>) -> wal::Result<Vec<(u64, Vec<u8>)>> {
    let mut it = wal.iter_from(wal.first_index())?;
    let mut out = Vec::new();
    while let Some(r) = it.next().await {
        out.push(r?);
    }
    Ok(out)
}

/// A SimFs whose every operation is one step of `simfs::StepClock` (latency
/// 1 µs): crash it at the n-th step with `SimFs::crash_after` and count steps
/// with `SimFs::ops_run`.
pub fn step_fs(seed: u64, mut cfg: SimConfig) -> SimFs {
    cfg.latency_us = (1, 1);
    SimFs::with_config(seed, Arc::new(StepClock::new()).sim_config(cfg))
}

/// A SimFs configuration whose operations yield once each.
pub fn yielding() -> SimConfig {
    YieldClock::sim_config(SimConfig::default())
}
