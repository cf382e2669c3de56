//! [`MadsimClock`]: simulated time from the madsim runtime.

use std::time::Duration;

use futures::future::BoxFuture;

use super::config::SimClock;

/// A [`SimClock`] on madsim's simulated time: `now_ns` is the simulated time
/// elapsed since the clock was created, and `sleep` waits in simulated time,
/// so concurrent tasks interleave around [`crate::SimFs`] I/O as they would
/// around a real disk's latency. Create it inside the madsim runtime.
///
/// ```no_run
/// # async fn demo() {
/// let clock = std::sync::Arc::new(simfs::MadsimClock::new());
/// let cfg = simfs::SimConfig { clock, latency_us: (10, 500), ..Default::default() };
/// let fs = simfs::SimFs::with_config(42, cfg);
/// # drop(fs);
/// # }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct MadsimClock {
    start: madsim::time::Instant,
}

impl MadsimClock {
    /// A clock whose zero is now.
    pub fn new() -> Self {
        MadsimClock {
            start: madsim::time::Instant::now(),
        }
    }
}

impl Default for MadsimClock {
    fn default() -> Self {
        Self::new()
    }
}

impl SimClock for MadsimClock {
    fn now_ns(&self) -> u64 {
        let ns = self.start.elapsed().as_nanos();
        u64::try_from(ns).unwrap_or(u64::MAX)
    }
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(madsim::time::sleep(duration))
    }
}
