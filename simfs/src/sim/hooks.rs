//! Hooks for tests of code that runs on [`SimFs`]: the operation counter
//! ([`SimFs::ops_run`]) and the crash plan ([`SimFs::crash_after`]), so that a
//! test can crash a workload at every one of its filesystem operations.
//!
//! An *operation* is one call of a [`crate::Fs`] or [`crate::File`] method
//! that reaches the simulator (`open`, `read_at`, `write_at`, `sync_data`,
//! `rename`, `sync_dir`, `metadata`, ...; a default method such as
//! `write_all_at` or `exists` counts the calls it makes), started by the
//! process alive at the time. A call on a handle or lock from before a crash
//! is not counted (it fails at once as stale); dropping a handle or a lock is
//! not an operation; neither are the control calls of [`SimFs`] (`crash`,
//! `set_faults`, ...).
//!
//! An operation is counted when it starts, after its simulated latency is
//! drawn and before it is waited out. That is also where a planned crash
//! fires, so the operation that fires it, like every later call on handles
//! of the dead process, fails with the stale-handle error and changes
//! nothing. The counter and the plan use no randomness: arming a crash does
//! not change what a seed does before the crash.

use super::config::CrashKind;
use super::state::State;
use super::SimFs;

/// A crash armed with [`SimFs::crash_after`], from [`SimFs::crash_plan`].
///
/// ```
/// use simfs::{CrashKind, CrashPlan, SimFs};
/// let fs = SimFs::new(1);
/// fs.crash_after(3, CrashKind::Process);
/// assert_eq!(fs.crash_plan(), Some(CrashPlan { at_op: 3, kind: CrashKind::Process }));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CrashPlan {
    /// The 0-based index of the operation that crashes, counted like
    /// [`SimFs::ops_run`]: it fires when `ops_run()` is `at_op` and the next
    /// operation starts.
    pub at_op: u64,
    /// How the machine goes down.
    pub kind: CrashKind,
}

/// The counter and the armed plan, part of the simulator's state.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Hooks {
    /// Operations started by a live process so far.
    ops_run: u64,
    /// The armed plan and the process generation it belongs to.
    plan: Option<(CrashPlan, u64)>,
}

impl State {
    /// Counts one operation of the current process at its start, and crashes
    /// the machine if the plan says this is the one.
    pub(crate) fn start_op(&mut self) {
        let index = self.hooks.ops_run;
        self.hooks.ops_run += 1;
        let Some((plan, generation)) = self.hooks.plan else {
            return;
        };
        if generation != self.generation {
            // The process it was armed for is already gone.
            self.hooks.plan = None;
        } else if index >= plan.at_op {
            self.hooks.plan = None;
            self.crash(plan.kind);
        }
    }

    fn live_plan(&self) -> Option<CrashPlan> {
        match self.hooks.plan {
            Some((plan, generation)) if generation == self.generation => Some(plan),
            _ => None,
        }
    }
}

impl SimFs {
    /// How many operations have started so far: every [`crate::Fs`] and
    /// [`crate::File`] call that reached the simulator in a live process,
    /// over the whole life of this `SimFs` (never reset, crashes included).
    /// Calls on stale handles from before a crash do not count.
    ///
    /// Run a workload once to learn how many operations it makes, then crash
    /// it at each of them with [`SimFs::crash_after`].
    ///
    /// ```
    /// use simfs::{Fs, SimFs};
    /// futures::executor::block_on(async {
    ///     let fs = SimFs::new(1);
    ///     assert_eq!(fs.ops_run(), 0);
    ///     fs.create_dir_all(std::path::Path::new("/d")).await?;
    ///     fs.sync_dir(std::path::Path::new("/")).await?;
    ///     assert_eq!(fs.ops_run(), 2);
    ///     Ok::<_, std::io::Error>(())
    /// }).unwrap();
    /// ```
    pub fn ops_run(&self) -> u64 {
        self.lock().hooks.ops_run
    }

    /// Arms a crash of the current process: the next `n` operations run
    /// normally, and the one after them (0-based index `ops_run() + n`)
    /// crashes the machine with `kind` at its start, exactly as
    /// [`SimFs::crash`] would. That operation and every later call on
    /// handles and locks of the old process fail with the stale-handle error;
    /// this same `SimFs` value is then the restarted machine: open the store
    /// on it again and check what it recovers.
    ///
    /// One plan at a time (arming again replaces it). A plan belongs to the
    /// process that armed it: it fires once, and any crash before it fires
    /// (such as [`SimFs::crash`]) cancels it. `crash_after(u64::MAX, _)`
    /// never fires. Deterministic: the plan draws no randomness.
    ///
    /// Crash a small workload at every step and check the promise after
    /// each crash (here: a file synced before the crash keeps its content):
    ///
    /// ```
    /// use simfs::{CrashKind, File, Fs, OpenOptions, SimFs};
    /// use std::path::Path;
    ///
    /// /// Writes and syncs `/data` (data and name); returns whether it finished.
    /// async fn workload(fs: &SimFs) -> bool {
    ///     let opts = OpenOptions::new().write(true).create(true);
    ///     let run = async {
    ///         let f = fs.open(Path::new("/data"), opts).await?;
    ///         f.write_all_at(b"hello", 0).await?;
    ///         f.sync_data().await?;
    ///         fs.sync_dir(Path::new("/")).await
    ///     };
    ///     run.await.is_ok()
    /// }
    ///
    /// futures::executor::block_on(async {
    ///     // Dry run: how many operations does the workload make?
    ///     let fs = SimFs::new(0);
    ///     assert!(workload(&fs).await);
    ///     let total = fs.ops_run();
    ///     assert_eq!(total, 4);
    ///
    ///     for n in 0..=total {
    ///         let fs = SimFs::new(n);
    ///         fs.crash_after(n, CrashKind::PowerLoss);
    ///         let done = workload(&fs).await;
    ///         assert_eq!(done, n == total, "crash at step {n}");
    ///         if done {
    ///             fs.crash(CrashKind::PowerLoss); // crash after the end as well
    ///         }
    ///         // `fs` is now the restarted machine: recover through it.
    ///         let data = fs.durable_content(Path::new("/data"));
    ///         if done {
    ///             assert_eq!(data.as_deref(), Some(&b"hello"[..]));
    ///         }
    ///         let exists = fs.exists(Path::new("/data")).await?;
    ///         assert_eq!(exists, data.is_some());
    ///     }
    ///     Ok::<_, std::io::Error>(())
    /// }).unwrap();
    /// ```
    pub fn crash_after(&self, n: u64, kind: CrashKind) {
        let mut st = self.lock();
        let at_op = st.hooks.ops_run.saturating_add(n);
        let generation = st.generation;
        st.hooks.plan = (at_op != u64::MAX).then_some((CrashPlan { at_op, kind }, generation));
    }

    /// The armed crash, if it has not fired and no crash cancelled it.
    pub fn crash_plan(&self) -> Option<CrashPlan> {
        self.lock().live_plan()
    }

    /// Disarms the planned crash and returns it, if one was still armed.
    ///
    /// ```
    /// use simfs::{CrashKind, SimFs};
    /// let fs = SimFs::new(1);
    /// fs.crash_after(0, CrashKind::PowerLoss);
    /// assert!(fs.cancel_crash().is_some());
    /// assert_eq!(fs.crash_plan(), None);
    /// ```
    pub fn cancel_crash(&self) -> Option<CrashPlan> {
        let mut st = self.lock();
        let plan = st.live_plan();
        st.hooks.plan = None;
        plan
    }
}
