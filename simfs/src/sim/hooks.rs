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
//!
//! A *trigger* waits for an operation instead of counting them: the next
//! operation that succeeds and matches an [`OpMatch`] (a write or a
//! `set_len` of some file, say) either arms a crash at the very next
//! operation ([`SimFs::crash_after_next`]) or *pauses* the process
//! ([`SimFs::pause_after_next`]): every operation that starts afterwards
//! waits, changing nothing, until [`SimFs::resume`] or a crash. A pause
//! lets a harness with concurrent tasks stop the world right after a
//! durability step (and before the fsync that follows it), look at the
//! page cache, stop its tasks, and only then crash the machine, so that no
//! task sees the stale-handle error of a crash it did not expect.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

use super::config::CrashKind;
use super::ops::Ctx;
use super::state::State;
use super::trace::TraceEvent;
use super::{lock, SimFs};

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

/// Which operations a trigger ([`SimFs::crash_after_next`],
/// [`SimFs::pause_after_next`]) waits for: a successful operation (one whose
/// trace event's `result` starts with `ok`) whose operation name is one of
/// [`OpMatch::ops`] and whose path ends with one of the suffixes given.
///
/// The path of a file operation (`write`, `set_len`, `sync_data`, ...) is a
/// name of its inode when it completes (live entries first, as in the
/// damage ledger); a rename matches by its source or its destination.
///
/// ```
/// use simfs::OpMatch;
/// let m = OpMatch::ops(&["write", "set_len"]).path_ends_with(".wal");
/// assert!(m.matches("write", Some("/db/0001.wal")));
/// assert!(!m.matches("sync_data", Some("/db/0001.wal")));
/// assert!(!m.matches("write", Some("/db/meta")));
/// assert!(m.clone().path_ends_with("/meta").matches("set_len", Some("/db/meta")));
/// // No suffix: any path. Skip: the first n matches pass.
/// assert!(OpMatch::ops(&["rename"]).matches("rename", None));
/// assert_eq!(OpMatch::ops(&["write"]).skip(2).skipped(), 2);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct OpMatch {
    ops: Vec<&'static str>,
    suffixes: Vec<String>,
    skip: u64,
}

impl OpMatch {
    /// Matches the operations named `ops` (trace names: `"write"`,
    /// `"set_len"`, `"sync_data"`, `"rename"`, ...; empty: every operation),
    /// on any path.
    pub fn ops(ops: &[&'static str]) -> OpMatch {
        OpMatch {
            ops: ops.to_vec(),
            ..OpMatch::default()
        }
    }

    /// Also requires the path to end with `suffix` (or with any other
    /// suffix given so far).
    pub fn path_ends_with(mut self, suffix: impl Into<String>) -> OpMatch {
        self.suffixes.push(suffix.into());
        self
    }

    /// Lets the first `n` matching operations pass: the trigger fires at
    /// the `n + 1`-th.
    pub fn skip(mut self, n: u64) -> OpMatch {
        self.skip = n;
        self
    }

    /// How many matching operations pass before the trigger fires.
    pub fn skipped(&self) -> u64 {
        self.skip
    }

    /// Whether operation `op` on `path` (`None`: no path known) matches
    /// (success is checked by the trigger, not here).
    pub fn matches(&self, op: &str, path: Option<&str>) -> bool {
        (self.ops.is_empty() || self.ops.contains(&op))
            && (self.suffixes.is_empty() || path.is_some_and(|p| self.suffixes.iter().any(|s| p.ends_with(s.as_str()))))
    }
}

/// What a trigger does when it fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Crash(CrashKind),
    Pause,
}

/// An armed trigger.
#[derive(Clone, Debug)]
struct Trigger {
    when: OpMatch,
    /// Matching operations still to let pass.
    left: u64,
    action: Action,
    /// The process generation it belongs to.
    generation: u64,
}

/// The counter, the armed plan and trigger, and the pause, part of the
/// simulator's state.
#[derive(Debug, Default)]
pub(crate) struct Hooks {
    /// Operations started by a live process so far.
    ops_run: u64,
    /// The armed plan and the process generation it belongs to.
    plan: Option<(CrashPlan, u64)>,
    trigger: Option<Trigger>,
    /// The event of the operation that paused the process.
    paused: Option<TraceEvent>,
    /// Operations waiting for the pause to end.
    waiters: Vec<Waker>,
}

impl Hooks {
    pub(crate) fn is_paused(&self) -> bool {
        self.paused.is_some()
    }
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

    /// After operation `ctx` of generation `generation` ran (before its
    /// trace event is recorded): whether the armed trigger matches it.
    pub(crate) fn trigger_matches(&mut self, generation: u64, ctx: &Ctx, ok: bool) -> bool {
        let Some(t) = &self.hooks.trigger else {
            return false;
        };
        if !ok || t.generation != generation || generation != self.generation {
            return false;
        }
        if !t.when.ops.is_empty() && !t.when.ops.contains(&ctx.op) {
            return false;
        }
        let hit = if t.when.suffixes.is_empty() {
            true
        } else {
            let named = ctx.path.is_some() || ctx.to_path.is_some();
            let found = if named {
                None
            } else {
                ctx.ino.and_then(|i| self.path_of(i))
            };
            let hit = [ctx.path.as_deref(), ctx.to_path.as_deref(), found.as_deref()]
                .into_iter()
                .flatten()
                .any(|p| t.when.matches(ctx.op, Some(p)));
            hit
        };
        if !hit {
            return false;
        }
        match &mut self.hooks.trigger {
            Some(t) if t.left > 0 => {
                t.left -= 1;
                false
            }
            _ => true,
        }
    }

    /// Fires the armed trigger on the operation just recorded as `event`.
    pub(crate) fn fire_trigger(&mut self, event: TraceEvent) {
        let Some(t) = self.hooks.trigger.take() else { return };
        match t.action {
            Action::Crash(kind) => {
                let plan = CrashPlan {
                    at_op: self.hooks.ops_run,
                    kind,
                };
                self.hooks.plan = Some((plan, self.generation));
            }
            Action::Pause => self.hooks.paused = Some(event),
        }
    }

    /// At a crash: the trigger belonged to the dead process, and waiting
    /// operations go on (to fail as stale).
    pub(crate) fn release_hooks(&mut self) {
        self.hooks.trigger = None;
        self.hooks.paused = None;
        for w in self.hooks.waiters.drain(..) {
            w.wake();
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

    /// Arms a crash of the current process right after the next successful
    /// operation that matches `m` (after the ones [`OpMatch::skip`] lets
    /// pass): that operation completes and returns its result, and the one
    /// after it crashes the machine with `kind` at its start, as a
    /// [`SimFs::crash_after`]`(0, kind)` armed at that moment would (from
    /// then on [`SimFs::crash_plan`] shows it). Crash a workload right
    /// after a write or a cut, before the fsync that would make it durable:
    ///
    /// ```
    /// use simfs::{CrashKind, File, Fs, OpMatch, OpenOptions, SimFs};
    /// use std::path::Path;
    /// futures::executor::block_on(async {
    ///     let fs = SimFs::new(1);
    ///     let f = fs.open(Path::new("/log"), OpenOptions::new().write(true).create(true)).await?;
    ///     f.write_all_at(b"old", 0).await?;
    ///     f.sync_data().await?;
    ///     fs.sync_dir(Path::new("/")).await?;
    ///     fs.crash_after_next(OpMatch::ops(&["set_len"]).path_ends_with("/log"), CrashKind::Process);
    ///     f.write_all_at(b"new", 3).await?; // not a match: runs
    ///     f.set_len(0).await?; // the match: completes
    ///     assert!(f.sync_data().await.is_err()); // crashed at its start
    ///     // Neither the write nor the cut was made durable.
    ///     assert_eq!(fs.durable_content(Path::new("/log")).as_deref(), Some(&b"old"[..]));
    ///     Ok::<_, std::io::Error>(())
    /// }).unwrap();
    /// ```
    ///
    /// One trigger at a time (arming again replaces it, and
    /// [`SimFs::pause_after_next`] shares the slot); it belongs to the
    /// process that armed it: a crash before it fires cancels it, as does
    /// [`SimFs::resume`]. Draws no randomness.
    pub fn crash_after_next(&self, m: OpMatch, kind: CrashKind) {
        self.arm(m, Action::Crash(kind));
    }

    /// Arms a pause of the current process right after the next successful
    /// operation that matches `m` (after the ones [`OpMatch::skip`] lets
    /// pass): that operation completes and returns its result; every
    /// operation that *starts* after it waits, before it draws its latency
    /// or counts in [`SimFs::ops_run`], until [`SimFs::resume`] (then it
    /// runs as if it had just been called) or a crash (then it fails with
    /// the stale-handle error). Operations already under way when the pause
    /// began complete normally. [`SimFs::paused`] tells whether the pause
    /// began, and after which operation.
    ///
    /// A harness with concurrent tasks polls [`SimFs::paused`], stops its
    /// tasks once it shows the pause, and then crashes the machine with
    /// [`SimFs::crash`]: the machine goes down exactly after the matching
    /// operation, and no task ever sees the crash's stale-handle errors.
    ///
    /// ```
    /// use simfs::{File, Fs, OpMatch, OpenOptions, SimFs};
    /// use std::path::Path;
    /// use futures::FutureExt;
    /// futures::executor::block_on(async {
    ///     let fs = SimFs::new(1);
    ///     let f = fs.open(Path::new("/log"), OpenOptions::new().write(true).create(true)).await?;
    ///     fs.pause_after_next(OpMatch::ops(&["write"]));
    ///     f.write_all_at(b"abc", 0).await?; // the match: completes
    ///     assert_eq!(fs.paused().map(|e| e.op), Some("write"));
    ///     let mut sync = Box::pin(f.sync_data());
    ///     assert!((&mut sync).now_or_never().is_none()); // waits
    ///     fs.resume();
    ///     sync.await?; // runs
    ///     assert_eq!(fs.paused(), None);
    ///     Ok::<_, std::io::Error>(())
    /// }).unwrap();
    /// ```
    pub fn pause_after_next(&self, m: OpMatch) {
        self.arm(m, Action::Pause);
    }

    fn arm(&self, m: OpMatch, action: Action) {
        let mut st = self.lock();
        let generation = st.generation;
        st.hooks.trigger = Some(Trigger {
            left: m.skip,
            when: m,
            action,
            generation,
        });
    }

    /// The trace event of the operation after which the process is paused
    /// ([`SimFs::pause_after_next`]), while it is.
    pub fn paused(&self) -> Option<TraceEvent> {
        self.lock().hooks.paused.clone()
    }

    /// Whether a trigger ([`SimFs::crash_after_next`],
    /// [`SimFs::pause_after_next`]) is armed and has not fired.
    pub fn trigger_armed(&self) -> bool {
        let st = self.lock();
        st.hooks.trigger.as_ref().is_some_and(|t| t.generation == st.generation)
    }

    /// Ends a pause (the waiting operations go on) and disarms a trigger
    /// that has not fired. Returns whether the process was paused.
    pub fn resume(&self) -> bool {
        let mut st = self.lock();
        let was = st.hooks.paused.is_some();
        st.release_hooks();
        was
    }
}

/// Waits while the process of `generation` is paused.
pub(crate) struct Unpaused<'a> {
    pub(crate) state: &'a Mutex<State>,
    pub(crate) generation: u64,
}

impl Future for Unpaused<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut st = lock(self.state);
        if st.hooks.paused.is_none() || st.generation != self.generation {
            return Poll::Ready(());
        }
        if !st.hooks.waiters.iter().any(|w| w.will_wake(cx.waker())) {
            st.hooks.waiters.push(cx.waker().clone());
        }
        Poll::Pending
    }
}
