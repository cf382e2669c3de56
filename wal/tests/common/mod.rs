//! Helpers shared by the wal integration tests.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use simfs::{CrashKind, SimClock, SimConfig, SimFs};
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

/// A SimFs clock that crashes the filesystem at the `crash_at`-th operation
/// (counting every operation that waits for latency), so a test can crash at
/// every step of a workload.
pub struct StepClock {
    pub steps: AtomicU64,
    pub crash_at: AtomicU64,
    pub kind: Mutex<CrashKind>,
    pub fs: Mutex<Option<SimFs>>,
}

impl StepClock {
    pub fn new(crash_at: u64, kind: CrashKind) -> Arc<StepClock> {
        Arc::new(StepClock {
            steps: AtomicU64::new(0),
            crash_at: AtomicU64::new(crash_at),
            kind: Mutex::new(kind),
            fs: Mutex::new(None),
        })
    }

    /// A SimFs wired to this clock (latency 1 µs so every operation counts).
    pub fn sim_fs(self: &Arc<Self>, seed: u64, mut cfg: SimConfig) -> SimFs {
        cfg.latency_us = (1, 1);
        cfg.clock = self.clone();
        let fs = SimFs::with_config(seed, cfg);
        *self.fs.lock().unwrap() = Some(fs.clone());
        fs
    }

    pub fn disarm(&self) {
        self.crash_at.store(u64::MAX, Ordering::SeqCst);
    }

    pub fn steps(&self) -> u64 {
        self.steps.load(Ordering::SeqCst)
    }
}

impl SimClock for StepClock {
    fn now_ns(&self) -> u64 {
        self.steps.load(Ordering::SeqCst) * 1000
    }

    fn sleep(&self, _d: Duration) -> BoxFuture<'static, ()> {
        let step = self.steps.fetch_add(1, Ordering::SeqCst);
        if step == self.crash_at.load(Ordering::SeqCst) {
            let fs = self.fs.lock().unwrap().clone();
            if let Some(fs) = fs {
                fs.crash(*self.kind.lock().unwrap());
            }
        }
        Box::pin(futures::future::ready(()))
    }
}

/// A clock whose every sleep yields to the executor once, so that concurrent
/// futures interleave around I/O under `block_on` + `join_all`.
pub struct YieldClock;

impl SimClock for YieldClock {
    fn now_ns(&self) -> u64 {
        0
    }
    fn sleep(&self, _d: Duration) -> BoxFuture<'static, ()> {
        let mut yielded = false;
        Box::pin(futures::future::poll_fn(move |cx| {
            if yielded {
                std::task::Poll::Ready(())
            } else {
                yielded = true;
                cx.waker().wake_by_ref();
                std::task::Poll::Pending
            }
        }))
    }
}

/// A SimFs configuration whose operations yield once each.
pub fn yielding() -> SimConfig {
    SimConfig {
        latency_us: (1, 1),
        clock: Arc::new(YieldClock),
        ..SimConfig::default()
    }
}
