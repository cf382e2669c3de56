//! Two [`SimClock`]s for tests under a plain executor
//! (`futures::executor::block_on`, `join_all`), without madsim:
//!
//! * [`StepClock`]: logical time that advances by each operation's latency
//!   (1 µs per operation by default), with a step counter; nothing waits.
//! * [`YieldClock`]: every operation yields to the executor once, so that
//!   concurrent futures interleave around I/O.
//!
//! A clock only sees operations that draw a latency: give the filesystem a
//! non-zero [`SimConfig::latency_us`] (their `sim_config` helpers do).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use futures::future::BoxFuture;

use super::config::{SimClock, SimConfig};

/// The latency the helpers set when the base configuration has none: 1 µs,
/// so that every operation is one step of 1000 ns.
const STEP_LATENCY_US: (u64, u64) = (1, 1);

/// A clock driven by the operations themselves: each operation's latency
/// advances the time at once (nothing waits), and [`StepClock::steps`] counts
/// the operations. With the default 1 µs latency of
/// [`StepClock::sim_config`], `now_ns()` is `1000 × steps()`, so the trace
/// times number the operations, and `steps()` equals
/// [`crate::SimFs::ops_run`].
///
/// To crash at the n-th step use [`crate::SimFs::crash_after`], which counts
/// the same operations whatever the clock.
///
/// ```
/// use simfs::{Fs, SimClock, SimConfig, SimFs, StepClock};
/// use std::{path::Path, sync::Arc};
///
/// let clock = Arc::new(StepClock::new());
/// let fs = SimFs::with_config(1, clock.sim_config(SimConfig::default()));
/// futures::executor::block_on(async {
///     fs.create_dir_all(Path::new("/d")).await?;
///     fs.sync_dir(Path::new("/")).await?;
///     Ok::<_, std::io::Error>(())
/// }).unwrap();
/// assert_eq!(clock.steps(), 2);
/// assert_eq!(clock.steps(), fs.ops_run());
/// assert_eq!(clock.now_ns(), 2000);
/// assert_eq!(fs.trace().last().unwrap().time_ns, 2000);
/// ```
#[derive(Debug, Default)]
pub struct StepClock {
    steps: AtomicU64,
    now_ns: AtomicU64,
}

impl StepClock {
    /// A clock at time 0, no steps taken.
    pub fn new() -> StepClock {
        StepClock::default()
    }

    /// How many operations have waited on this clock.
    pub fn steps(&self) -> u64 {
        self.steps.load(Ordering::SeqCst)
    }

    /// `base` with this clock, and a latency of 1 µs per operation if
    /// `base` has none (`latency_us == (0, 0)`): then every operation is a
    /// step. A latency range draws from the seed's randomness, as any latency
    /// does.
    pub fn sim_config(self: &Arc<Self>, base: SimConfig) -> SimConfig {
        with_clock(base, self.clone())
    }
}

impl SimClock for StepClock {
    fn now_ns(&self) -> u64 {
        self.now_ns.load(Ordering::SeqCst)
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        self.steps.fetch_add(1, Ordering::SeqCst);
        let ns = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        // Saturating add, atomically.
        let _ = self
            .now_ns
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| Some(t.saturating_add(ns)));
        Box::pin(futures::future::ready(()))
    }
}

/// A clock whose every wait yields to the executor exactly once, so that
/// concurrent futures run on one thread (`futures::executor::block_on` with
/// `join_all`) interleave at each filesystem operation instead of running
/// each to completion. Time stays at 0. Deterministic under a deterministic
/// executor: which future runs next is the executor's (fixed) choice.
///
/// ```
/// use futures::future::join_all;
/// use simfs::{File, Fs, OpenOptions, SimConfig, SimFs, YieldClock};
/// use std::path::Path;
///
/// let fs = SimFs::with_config(1, YieldClock::sim_config(SimConfig::default()));
/// futures::executor::block_on(async {
///     let opts = OpenOptions::new().write(true).create(true);
///     let writers = (0..3u8).map(|i| {
///         let fs = fs.clone();
///         async move {
///             let f = fs.open(Path::new(&format!("/f{i}")), opts).await?;
///             f.write_all_at(&[i; 8], 0).await
///         }
///     });
///     for r in join_all(writers).await {
///         r?;
///     }
///     Ok::<_, std::io::Error>(())
/// }).unwrap();
/// // The three opens ran before any write: the futures interleaved.
/// let ops: Vec<&str> = fs.trace().iter().map(|e| e.op).filter(|op| *op != "close").collect();
/// assert_eq!(ops, ["open", "open", "open", "write", "write", "write"]);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct YieldClock;

impl YieldClock {
    /// `base` with this clock, and a latency of 1 µs per operation if
    /// `base` has none (`latency_us == (0, 0)`): then every operation yields.
    pub fn sim_config(base: SimConfig) -> SimConfig {
        with_clock(base, Arc::new(YieldClock))
    }
}

impl SimClock for YieldClock {
    fn now_ns(&self) -> u64 {
        0
    }

    fn sleep(&self, _duration: Duration) -> BoxFuture<'static, ()> {
        let mut yielded = false;
        Box::pin(futures::future::poll_fn(move |cx| {
            if yielded {
                Poll::Ready(())
            } else {
                yielded = true;
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        }))
    }
}

fn with_clock(mut base: SimConfig, clock: Arc<dyn SimClock>) -> SimConfig {
    if base.latency_us == (0, 0) {
        base.latency_us = STEP_LATENCY_US;
    }
    base.clock = clock;
    base
}
