//! [`SimFs`]: a deterministic in-memory filesystem with a durable/volatile
//! model and seeded fault injection.
//!
//! Layout:
//! * [`config`]: profiles, fault probabilities, clock, fault kinds and counters;
//! * `state`: inodes (files with durable and volatile [`image`]s, directories
//!   with durable and volatile entries), pending directory operations,
//!   handles, locks, reachability;
//! * `ops`: the semantics of each operation, with fault injection;
//! * `durability`: syncs, writeback and the faults of data reaching the medium;
//! * `crash`: process crash and power loss;
//! * `trace`: the event ring and its hash;
//! * `hooks`: the operation counter and the crash plan ([`SimFs::crash_after`]);
//! * `clocks`: [`StepClock`] and [`YieldClock`] for tests under a plain executor;
//! * `madsim_clock` (feature `madsim`): simulated time from madsim.

mod clocks;
pub mod config;
mod crash;
mod damage;
mod durability;
mod errors;
mod hooks;
mod image;
#[cfg(feature = "madsim")]
mod madsim_clock;
mod ops;
mod state;
#[cfg(test)]
mod tests;
mod trace;

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use crate::fs::{DirEntry, File, Fs, Metadata, OpenOptions};
pub use clocks::{StepClock, YieldClock};
use config::{CrashKind, FaultConfig, FaultCounters, SimConfig};
pub use damage::{Damage, DamageKind, MAX_LEDGER_ENTRIES};
pub use hooks::{CrashPlan, OpMatch};
#[cfg(feature = "madsim")]
pub use madsim_clock::MadsimClock;
use ops::Ctx;
use state::{State, View};
pub use trace::{MisdirectedWrite, TraceEvent};

/// Locks the state, recovering from a poisoned mutex (the state is always
/// left consistent between statements that could panic, and nothing panics).
fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

/// A deterministic simulated filesystem. Cheap to clone (shared state).
///
/// One seed decides every fault, every torn write and every lost directory
/// entry: the same seed and the same sequence of calls give the same results
/// and the same [`SimFs::trace_hash`].
///
/// ```
/// use simfs::{CrashKind, File, Fs, OpenOptions, SimFs};
/// use std::path::Path;
///
/// futures::executor::block_on(async {
///     let fs = SimFs::new(7);
///     let f = fs.open(Path::new("/a"), OpenOptions::new().write(true).create(true)).await?;
///     f.write_all_at(b"unsynced", 0).await?;
///     fs.crash(CrashKind::PowerLoss);
///     // Neither the data nor the name was synced: the file is gone.
///     assert!(!fs.exists(Path::new("/a")).await?);
///     // The old handle belongs to a dead process.
///     assert!(f.len().await.is_err());
///     Ok::<_, std::io::Error>(())
/// }).unwrap();
/// ```
#[derive(Clone)]
pub struct SimFs {
    state: Arc<Mutex<State>>,
}

/// An open file of [`SimFs`]. It follows its inode, so it keeps working after
/// the file is renamed or removed; after a crash every call fails.
pub struct SimFile {
    state: Arc<Mutex<State>>,
    id: u64,
    ino: u64,
    generation: u64,
}

/// A held directory lock of [`SimFs`], released when dropped or when the
/// simulated process crashes.
pub struct SimDirLock {
    state: Arc<Mutex<State>>,
    id: u64,
    ino: u64,
    generation: u64,
}

impl fmt::Debug for SimFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = lock(&self.state);
        f.debug_struct("SimFs")
            .field("seed", &st.seed)
            .field("generation", &st.generation)
            .field("inodes", &st.inodes.len())
            .finish()
    }
}

impl fmt::Debug for SimFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimFile")
            .field("ino", &self.ino)
            .field("generation", &self.generation)
            .finish()
    }
}

impl fmt::Debug for SimDirLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimDirLock")
            .field("ino", &self.ino)
            .field("generation", &self.generation)
            .finish()
    }
}

impl SimFs {
    /// A filesystem with the default (pessimistic POSIX) profile and no faults.
    pub fn new(seed: u64) -> SimFs {
        Self::with_config(seed, SimConfig::default())
    }

    /// A filesystem with a configuration.
    pub fn with_config(seed: u64, config: SimConfig) -> SimFs {
        SimFs {
            state: Arc::new(Mutex::new(State::new(seed, config))),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Replaces the fault probabilities (e.g. `FaultConfig::none()` for a heal phase).
    pub fn set_faults(&self, faults: FaultConfig) {
        let mut st = self.lock();
        st.faults = faults;
        let now = st.clock.now_ns();
        st.trace.record(now, "set_faults", None, None, 0, 0, "ok".into(), None);
    }

    /// A heal phase: every fault off, no capacity limit, and sync errors
    /// still waiting to be reported late (`Ext4DataJournal`) dropped, so the
    /// next sync reports only what happens from now on. Errors already
    /// recorded per open handle (`Ext4Ordered` errseq) stay: a handle from
    /// before still hears them once.
    ///
    /// ```
    /// let fs = simfs::SimFs::new(1);
    /// fs.heal();
    /// assert!(!fs.faults().any());
    /// ```
    pub fn heal(&self) {
        self.set_faults(FaultConfig::none());
        self.set_capacity(None);
        let mut st = self.lock();
        for inode in st.inodes.values_mut() {
            if let state::Inode::File(f) = inode {
                f.late_error = false;
            }
        }
    }

    /// The current fault probabilities.
    pub fn faults(&self) -> FaultConfig {
        self.lock().faults
    }

    /// Sets or removes the capacity limit at run time (disk-full episodes).
    /// Shrinking it below [`SimFs::used_bytes`] loses nothing; writes that
    /// grow a file fail until space is freed.
    pub fn set_capacity(&self, capacity_bytes: Option<u64>) {
        let mut st = self.lock();
        st.capacity = capacity_bytes;
        let now = st.clock.now_ns();
        let cap = capacity_bytes.unwrap_or(u64::MAX);
        st.trace
            .record(now, "set_capacity", None, None, cap, 0, "ok".into(), None);
    }

    /// Bytes currently used (live view): the length of every file reachable
    /// by name or held open by a handle of the current process.
    pub fn used_bytes(&self) -> u64 {
        self.lock().used_bytes()
    }

    /// Crashes the simulated machine now, and restarts it at once.
    ///
    /// What survives:
    ///
    /// * [`CrashKind::Process`] (the process dies, the kernel lives on): the
    ///   whole page cache. Every write (synced or not), every length and
    ///   every live directory entry (each create, rename and remove, durable
    ///   or not) is still there for the restarted process. Unsynced data
    ///   stays dirty and unsynced directory operations stay pending: a later
    ///   power loss can still lose them.
    /// * [`CrashKind::PowerLoss`] (the machine loses power): the durable
    ///   state. Each file's durable image (what `sync_data`/`sync_all` or
    ///   background writeback persisted) and each directory's durable entries
    ///   (what `sync_dir` persisted), plus a seeded part of what was in
    ///   flight: each dirty page kept, lost, or torn at the atomic write unit
    ///   (a lost sector maybe garbage), the old or the new length, and each
    ///   pending directory operation kept or lost, oldest first. The rest of
    ///   the page cache is gone.
    ///
    /// In both, the old process's handles and locks are dead: every call on a
    /// [`SimFile`] or [`SimDirLock`] taken before returns the stale-handle
    /// error (`simfs: stale handle from before a crash`), every directory
    /// lock is released, and an operation that was waiting out its latency
    /// applies nothing.
    ///
    /// **This same `SimFs` value, and every clone of it, is the restarted
    /// machine and its new process**, not the dead one. Keep using it:
    /// reopen the files, run recovery and check the result through it. What
    /// belonged to the old process is whatever holds a handle or lock from
    /// before (a store object, a writer task): drop it, or stop calling it.
    /// A test wrapper that keeps using it after the crash sees every call
    /// fail as stale, and a correct store looks broken. Don't create a new
    /// `SimFs` for the restart either: that is a blank disk.
    ///
    /// [`SimFs::crash_after`] crashes at the start of a chosen operation
    /// instead of now.
    ///
    /// ```
    /// use simfs::{CrashKind, File, Fs, OpenOptions, SimFs};
    /// use std::path::Path;
    ///
    /// futures::executor::block_on(async {
    ///     let fs = SimFs::new(7);
    ///     let opts = OpenOptions::new().read(true).write(true).create(true);
    ///     let f = fs.open(Path::new("/a"), opts).await?;
    ///     f.write_all_at(b"in the page cache", 0).await?;
    ///
    ///     fs.crash(CrashKind::Process);
    ///     assert!(f.len().await.is_err()); // the old process's handle is stale
    ///     drop(f);
    ///     // `fs` is the restarted process: the unsynced data survived.
    ///     let f = fs.open(Path::new("/a"), opts).await?;
    ///     assert_eq!(f.len().await?, 17);
    ///
    ///     fs.crash(CrashKind::PowerLoss);
    ///     // Nothing was synced, not even the name: with this seed it is gone
    ///     // (another seed may keep the name or some of the pages).
    ///     assert!(!fs.exists(Path::new("/a")).await?);
    ///     Ok::<_, std::io::Error>(())
    /// }).unwrap();
    /// ```
    pub fn crash(&self, kind: CrashKind) {
        self.lock().crash(kind);
    }

    /// Durable content of the file at `path` (by durable directory entries):
    /// what a power loss that keeps no in-flight write would reveal.
    pub fn durable_content(&self, path: &Path) -> Option<Vec<u8>> {
        self.content(path, View::Durable)
    }

    /// Live (page-cache) content of the file at `path`.
    pub fn volatile_content(&self, path: &Path) -> Option<Vec<u8>> {
        self.content(path, View::Live)
    }

    /// A version of the live content (page cache) of the file at `path`:
    /// it changes whenever that content changes, so two equal answers mean
    /// equal bytes (a cache of parsed content can skip the copy). Only
    /// equality is meaningful.
    ///
    /// ```
    /// use simfs::{File, Fs, OpenOptions, SimFs};
    /// use std::path::Path;
    /// futures::executor::block_on(async {
    ///     let fs = SimFs::new(1);
    ///     let p = Path::new("/f");
    ///     let f = fs.open(p, OpenOptions::new().write(true).create(true)).await.unwrap();
    ///     let v0 = fs.content_version(p);
    ///     assert_eq!(fs.content_version(p), v0);
    ///     f.write_all_at(b"x", 0).await.unwrap();
    ///     assert_ne!(fs.content_version(p), v0);
    /// });
    /// ```
    pub fn content_version(&self, path: &Path) -> Option<u64> {
        let st = self.lock();
        let comps = State::components(path).ok()?;
        let ino = st.resolve(&comps, View::Live).ok()?;
        Some(st.file(ino)?.vol.version())
    }

    fn content(&self, path: &Path, view: View) -> Option<Vec<u8>> {
        let st = self.lock();
        let comps = State::components(path).ok()?;
        let ino = st.resolve(&comps, view).ok()?;
        let f = st.file(ino)?;
        Some(match view {
            View::Durable => f.dur.to_vec(st.unit),
            View::Live => f.vol.to_vec(st.unit),
        })
    }

    /// The names in directory `path` (live entries, sorted), without a
    /// trace event, latency or fault: for a test's inspection between
    /// operations. `None` if `path` is not a directory.
    ///
    /// ```
    /// use simfs::{Fs, SimFs};
    /// futures::executor::block_on(async {
    ///     let fs = SimFs::new(1);
    ///     fs.create_dir_all(std::path::Path::new("/d/e")).await.unwrap();
    ///     assert_eq!(fs.list_dir(std::path::Path::new("/d")), Some(vec!["e".to_string()]));
    /// });
    /// ```
    pub fn list_dir(&self, path: &Path) -> Option<Vec<String>> {
        let st = self.lock();
        let comps = State::components(path).ok()?;
        let ino = st.resolve(&comps, View::Live).ok()?;
        Some(st.dir(ino)?.vol.keys().cloned().collect())
    }

    /// Per-kind counts of every fault injected so far.
    pub fn counters(&self) -> FaultCounters {
        self.lock().counters
    }

    /// Every misdirected write so far, oldest first (all of them, whatever
    /// `trace_capacity`).
    pub fn misdirected_writes(&self) -> Vec<MisdirectedWrite> {
        self.lock().misdirected.clone()
    }

    /// The damage ledger: every byte range this filesystem destroyed, put
    /// elsewhere or failed to persist, oldest first (whatever
    /// `trace_capacity`; see [`DamageKind`] for what is recorded when).
    ///
    /// ```
    /// use simfs::{CrashKind, DamageKind, FaultConfig, File, Fs, OpenOptions, SimFs};
    /// use std::path::Path;
    ///
    /// futures::executor::block_on(async {
    ///     let fs = SimFs::new(3);
    ///     let f = fs.open(Path::new("/a"), OpenOptions::new().write(true).create(true)).await?;
    ///     fs.sync_dir(Path::new("/")).await?;
    ///     fs.set_faults(FaultConfig { lying_sync: 1.0, ..FaultConfig::none() });
    ///     f.write_all_at(b"acknowledged", 0).await?;
    ///     f.sync_data().await?; // says Ok, persists nothing
    ///     fs.crash(CrashKind::PowerLoss);
    ///     let lost = fs.damage();
    ///     assert_eq!(lost[0].kind, DamageKind::UnpersistedSync);
    ///     assert_eq!(lost[0].path.as_deref(), Some("/a"));
    ///     assert_eq!(lost[0].range, 0..12);
    ///     Ok::<_, std::io::Error>(())
    /// }).unwrap();
    /// ```
    pub fn damage(&self) -> Vec<Damage> {
        self.lock().ledger.entries().to_vec()
    }

    /// The ledger entries recorded at or after trace position `seq`.
    pub fn damage_since(&self, seq: u64) -> Vec<Damage> {
        let st = self.lock();
        let all = st.ledger.entries();
        let from = all.partition_point(|d| d.seq < seq);
        all[from..].to_vec()
    }

    /// Ledger entries dropped because it was full ([`MAX_LEDGER_ENTRIES`]):
    /// while this is not 0, the ledger is incomplete.
    pub fn damage_dropped(&self) -> u64 {
        self.lock().ledger.dropped()
    }

    /// The trace position the next event will get: damage recorded from now
    /// on has a `seq` at least this.
    ///
    /// ```
    /// let fs = simfs::SimFs::new(1);
    /// let before = fs.next_seq();
    /// fs.heal();
    /// assert!(fs.next_seq() > before);
    /// ```
    pub fn next_seq(&self) -> u64 {
        self.lock().trace.next_seq()
    }

    /// The inode the live name `path` refers to, if any (inode numbers
    /// survive crashes, so a ledger entry can be matched to a file later).
    pub fn inode_of(&self, path: &Path) -> Option<u64> {
        let st = self.lock();
        let comps = State::components(path).ok()?;
        st.resolve(&comps, View::Live).ok()
    }

    /// The byte ranges of the file at the live name `path` that are
    /// unreadable now (latent sector errors not yet rewritten), in order:
    /// the drive's bad-block list, as `badblocks` or SMART would show it to
    /// an operator. A write covering a sector makes it readable again.
    ///
    /// ```
    /// let fs = simfs::SimFs::new(1);
    /// assert!(fs.bad_sectors(std::path::Path::new("/nothing")).is_empty());
    /// ```
    pub fn bad_sectors(&self, path: &Path) -> Vec<std::ops::Range<u64>> {
        let st = self.lock();
        let Ok(comps) = State::components(path) else {
            return Vec::new();
        };
        let Ok(ino) = st.resolve(&comps, View::Live) else {
            return Vec::new();
        };
        st.file(ino).map_or_else(Vec::new, |f| {
            f.bad_sectors
                .iter()
                .map(|s| s * state::SECTOR..(s + 1) * state::SECTOR)
                .collect()
        })
    }

    /// The last `trace_capacity` events.
    pub fn trace(&self) -> Vec<TraceEvent> {
        self.lock().trace.events()
    }

    /// The events of [`SimFs::trace`] whose `seq` is at least `seq` (those
    /// from [`SimFs::next_seq`]'s answer then on, as far as the ring still
    /// holds them), without copying the older ones.
    ///
    /// ```
    /// use simfs::{Fs, SimFs};
    /// futures::executor::block_on(async {
    ///     let fs = SimFs::new(1);
    ///     fs.create_dir_all(std::path::Path::new("/d")).await.unwrap();
    ///     let seq = fs.next_seq();
    ///     fs.sync_dir(std::path::Path::new("/d")).await.unwrap();
    ///     let since = fs.trace_since(seq);
    ///     assert_eq!(since.len(), 1);
    ///     assert_eq!((since[0].seq, since[0].op), (seq, "sync_dir"));
    /// });
    /// ```
    pub fn trace_since(&self, seq: u64) -> Vec<TraceEvent> {
        self.lock().trace.events_since(seq)
    }

    /// A hash of every event so far (including dropped ones).
    pub fn trace_hash(&self) -> u64 {
        self.lock().trace.hash()
    }

    /// The seed this filesystem was created with.
    pub fn seed(&self) -> u64 {
        self.lock().seed
    }

    /// Waits out the latency of one operation of the current process and
    /// returns its generation. A crash during the wait kills the operation.
    async fn begin(&self) -> u64 {
        begin(&self.state, None).await
    }

    async fn fs_op<T: ops::Outcome>(
        &self,
        op: &'static str,
        path: &Path,
        f: impl FnOnce(&mut State, &mut Ctx, &state::Components) -> io::Result<T>,
    ) -> io::Result<T> {
        let generation = self.begin().await;
        let mut st = self.lock();
        let mut ctx = Ctx::new(op);
        ctx.path = Some(path.to_string_lossy().into_owned());
        st.run(generation, ctx, |st, ctx| {
            let comps = State::components(path)?;
            f(st, ctx, &comps)
        })
    }
}

/// Waits out a pause ([`SimFs::pause_after_next`]), then draws an
/// operation's latency (unless the caller's handle is stale by then) and
/// sleeps it, outside the lock.
async fn begin(state: &Mutex<State>, handle_generation: Option<u64>) -> u64 {
    let (generation, paused) = {
        let st = lock(state);
        (handle_generation.unwrap_or(st.generation), st.hooks.is_paused())
    };
    if paused {
        // A crash during the wait makes this operation one of the dead
        // process: it keeps the generation it started with.
        hooks::Unpaused { state, generation }.await;
    }
    let (generation, latency, clock) = {
        let mut st = lock(state);
        let latency = if generation == st.generation {
            let latency = st.draw_latency();
            st.start_op(); // counts the operation; a planned crash fires here
            latency
        } else {
            None
        };
        (generation, latency, st.clock.clone())
    };
    if let Some(d) = latency {
        clock.sleep(d).await;
    }
    generation
}

#[async_trait]
impl Fs for SimFs {
    type File = SimFile;
    type DirLock = SimDirLock;

    fn unique_id(&self) -> u128 {
        let mut st = self.lock();
        st.unique_ids += 1;
        let (seed, n) = (st.seed, st.unique_ids);
        let hi = splitmix64(seed ^ splitmix64(n));
        let lo = splitmix64(hi ^ n.rotate_left(32));
        (((hi as u128) << 64) | lo as u128).max(1)
    }

    async fn open(&self, path: &Path, options: OpenOptions) -> io::Result<SimFile> {
        let generation = self.begin().await;
        let opened = {
            let mut st = self.lock();
            let mut ctx = Ctx::new("open");
            ctx.path = Some(path.to_string_lossy().into_owned());
            st.run(generation, ctx, |st, ctx| {
                let comps = State::components(path)?;
                st.op_open(ctx, &comps, options)
            })?
        };
        Ok(SimFile {
            state: self.state.clone(),
            id: opened.id,
            ino: opened.ino,
            generation,
        })
    }

    async fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.fs_op("create_dir_all", path, |st, ctx, c| st.op_create_dir_all(ctx, c))
            .await
    }

    async fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        self.fs_op("read_dir", path, |st, ctx, c| st.op_read_dir(ctx, c)).await
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let generation = self.begin().await;
        let mut st = self.lock();
        let mut ctx = Ctx::new("rename");
        ctx.path = Some(from.to_string_lossy().into_owned());
        ctx.to_path = Some(to.to_string_lossy().into_owned());
        st.run(generation, ctx, |st, ctx| {
            let from = State::components(from)?;
            let to = State::components(to)?;
            st.op_rename(ctx, &from, &to)
        })
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.fs_op("remove_file", path, |st, ctx, c| st.op_remove_file(ctx, c))
            .await
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.fs_op("sync_dir", path, |st, ctx, c| st.op_sync_dir(ctx, c)).await
    }

    async fn lock_dir(&self, path: &Path) -> io::Result<SimDirLock> {
        self.lock_dir_as(path, false).await
    }

    async fn lock_dir_shared(&self, path: &Path) -> io::Result<SimDirLock> {
        self.lock_dir_as(path, true).await
    }

    async fn metadata(&self, path: &Path) -> io::Result<Metadata> {
        self.fs_op("metadata", path, |st, ctx, c| st.op_metadata(ctx, c)).await
    }
}

impl SimFs {
    /// Takes the lock on `path`, shared or exclusive.
    async fn lock_dir_as(&self, path: &Path, shared: bool) -> io::Result<SimDirLock> {
        let generation = self.begin().await;
        let locked = {
            let mut st = self.lock();
            let mut ctx = Ctx::new(if shared { "lock_dir_shared" } else { "lock_dir" });
            ctx.path = Some(path.to_string_lossy().into_owned());
            st.run(generation, ctx, |st, ctx| {
                let comps = State::components(path)?;
                st.op_lock_dir(ctx, &comps, shared)
            })?
        };
        Ok(SimDirLock {
            state: self.state.clone(),
            id: locked.id,
            ino: locked.ino,
            generation,
        })
    }
}

impl SimFile {
    async fn file_op<T: ops::Outcome>(
        &self,
        ctx: Ctx,
        f: impl FnOnce(&mut State, &mut Ctx) -> io::Result<T>,
    ) -> io::Result<T> {
        let generation = begin(&self.state, Some(self.generation)).await;
        let mut st = lock(&self.state);
        st.run(generation, ctx.ino(self.ino), f)
    }
}

#[async_trait]
impl File for SimFile {
    async fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let id = self.id;
        let ctx = Ctx::new("read").at(offset, buf.len() as u64);
        self.file_op(ctx, |st, ctx| st.op_read(ctx, id, buf, offset)).await
    }

    async fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        let id = self.id;
        let ctx = Ctx::new("write").at(offset, buf.len() as u64);
        self.file_op(ctx, |st, ctx| st.op_write(ctx, id, buf, offset)).await
    }

    async fn set_len(&self, len: u64) -> io::Result<()> {
        let id = self.id;
        let ctx = Ctx::new("set_len").at(len, 0);
        self.file_op(ctx, |st, ctx| st.op_set_len(ctx, id, len)).await
    }

    async fn allocate(&self, len: u64) -> io::Result<()> {
        let id = self.id;
        let ctx = Ctx::new("allocate").at(len, 0);
        self.file_op(ctx, |st, ctx| st.op_allocate(ctx, id, len)).await
    }

    async fn sync_data(&self) -> io::Result<()> {
        let id = self.id;
        self.file_op(Ctx::new("sync_data"), |st, ctx| st.op_sync(ctx, id)).await
    }

    async fn sync_all(&self) -> io::Result<()> {
        let id = self.id;
        self.file_op(Ctx::new("sync_all"), |st, ctx| st.op_sync(ctx, id)).await
    }

    async fn len(&self) -> io::Result<u64> {
        let id = self.id;
        self.file_op(Ctx::new("len"), |st, ctx| st.op_len(ctx, id)).await
    }
}

impl Drop for SimFile {
    fn drop(&mut self) {
        let mut st = lock(&self.state);
        if st.generation != self.generation {
            return;
        }
        st.handles.remove(&self.id);
        let now = st.clock.now_ns();
        st.trace
            .record(now, "close", Some(self.ino), None, 0, 0, "ok".into(), None);
        st.gc_soon();
    }
}

impl Drop for SimDirLock {
    fn drop(&mut self) {
        let mut st = lock(&self.state);
        if st.generation != self.generation {
            return;
        }
        let Some(held) = st.locks.get_mut(&self.ino) else {
            return;
        };
        if !held.ids.remove(&self.id) {
            return;
        }
        if held.ids.is_empty() {
            st.locks.remove(&self.ino);
        }
        let now = st.clock.now_ns();
        st.trace
            .record(now, "unlock", Some(self.ino), None, 0, 0, "ok".into(), None);
    }
}

/// A 64-bit mixer (splitmix64's finaliser): ids from a seed and a counter.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
