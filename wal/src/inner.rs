//! The shared state of an open log, behind every `Wal` handle: `Inner`
//! (its mutexes, atomics and the admission rules), `State` (indices, queue,
//! segments, behind the std mutex), the counters, and the guards that keep
//! it consistent when a future is dropped (`Critical`) or while indices are
//! reset (`PauseAdmission`). The engine's operations are `impl Inner` and
//! `impl Writer` blocks in group_commit.rs, lifecycle.rs and resume.rs;
//! this module uses none of them.

use std::collections::VecDeque;
use std::path::PathBuf;

use futures::channel::oneshot;
use simfs::Fs;
use tracing::{error, warn};

use crate::error::{Error, Result};
use crate::frontier::Frontier;
use crate::leases::Leases;
use crate::meta::{Meta, MetaFile, MetaWriteError};
use crate::options::{Options, SyncPolicy};
use crate::recovery::{Recovered, RecoveryReport};
use crate::seals::SealHub;
use crate::segment::Segment;
use crate::sync::{Arc, AtomicU64, AtomicUsize, Mutex, MutexGuard, Ordering};
use crate::writer::{Request, Writer};

/// A snapshot of the WAL's counters, from [`crate::Wal::stats`].
///
/// ```
/// let s = wal::Stats::default();
/// assert_eq!(s.records_per_fsync(), 0.0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Stats {
    /// Append calls that succeeded (a batch counts once).
    pub appends: u64,
    /// Records appended.
    pub records: u64,
    /// Payload bytes appended.
    pub payload_bytes: u64,
    /// Bytes of frames (records and padding) that appends, the write buffer
    /// and `sync` wrote to segment files. Not counted: segment headers,
    /// preallocated zeros, compaction outputs, recovery's rewrites.
    pub bytes_written: u64,
    /// Group-commit writes.
    pub writes: u64,
    /// `sync_data` calls on segment files.
    pub fsyncs: u64,
    /// Segments (sealed and active).
    pub segments: u64,
    /// Segment rotations.
    pub rotations: u64,
    /// Prune calls that removed segments.
    pub prunes: u64,
    /// Truncations that removed records.
    pub truncations: u64,
    /// Compaction merges.
    pub compactions: u64,
    /// Bytes of segment files on disk (known sizes).
    pub bytes_on_disk: u64,
    /// Writes of the user-space write buffer (`Options::write_buffer_bytes`;
    /// each also counts in `writes`). A read of a buffered record writes it:
    ///
    /// ```
    /// # use std::path::Path;
    /// # futures::executor::block_on(async {
    /// let opts = wal::Options::default()
    ///     .sync_policy(wal::SyncPolicy::Manual)
    ///     .write_buffer_bytes(1 << 20);
    /// let wal = wal::Wal::open(simfs::SimFs::new(1), Path::new("/l"), opts).await?;
    /// let i = wal.append(b"x".to_vec()).await?;
    /// assert_eq!(wal.stats().await.buffer_flushes, 0);
    /// assert_eq!(wal.read(i).await?, b"x");
    /// assert_eq!(wal.stats().await.buffer_flushes, 1);
    /// # Ok::<_, wal::Error>(()) }).unwrap();
    /// ```
    pub buffer_flushes: u64,
    /// Times the WAL rebuilt its memory from the files after an operation
    /// that changes them was cancelled mid-way (its future dropped): see
    /// the cancellation notes on [`crate::Wal`].
    pub resumes: u64,
    /// `wait_durable` calls that found their record made durable by someone
    /// else while they waited for the writer (no fsync of their own).
    pub durable_waits_joined: u64,
}

impl Stats {
    /// Average records made durable per fsync.
    pub fn records_per_fsync(&self) -> f64 {
        if self.fsyncs == 0 {
            0.0
        } else {
            self.records as f64 / self.fsyncs as f64
        }
    }
}

/// State shared by appenders, readers and the group-commit leader. Guarded by
/// a `std` mutex that is never held across an `.await`.
pub(crate) struct State<F: Fs> {
    /// Why the WAL stopped, if it did: returned by every call.
    pub stopped: Option<Error>,
    pub closed: bool,
    /// Where the log starts and how far its records are durable, written,
    /// readable and admitted (the order is kept by `Frontier`).
    pub frontier: Frontier,
    /// Admitted appends not yet written, in index order.
    pub queue: VecDeque<Request>,
    pub queued_bytes: usize,
    /// Sealed segments then (maybe) the active one, in log order.
    pub segments: Vec<Arc<Segment<F>>>,
    /// The log was emptied by a prune (or truncation) through its end: the
    /// next `append_at` may start at any index at or above the admitted one.
    pub reseatable: bool,
    /// A full prune is resetting the indices: admission waits (appenders
    /// queue behind the writer mutex the prune holds).
    pub admission_paused: bool,
    /// An operation that changes files was dropped mid-way (its future was
    /// cancelled): memory may not match the files until
    /// `Writer::resume` rebuilds it from them. Admission waits meanwhile;
    /// the first caller that needs the writer resumes (see `Critical`).
    pub interrupted: Option<&'static str>,
    /// Under `Batched`, appends on the group path, from their start to
    /// their return or drop (`LiveAppender`): the leader stops waiting once
    /// this many requests are queued. Always 0 under the other policies.
    pub live_appenders: usize,
    /// A `Batched` leader waiting for appenders to join its group: woken
    /// when a request is queued or a live appender goes.
    pub leader_waker: Option<std::task::Waker>,
    pub stats: Stats,
}

impl<F: Fs> State<F> {
    /// The admission rules, the one place they are coded (the group path,
    /// `Inner::admit`, and the write buffer's lean path,
    /// `Writer::try_append_buffered`, both ask here): whether `records`
    /// records of `bytes` payload bytes, appended at `at` if given, may be
    /// admitted now, and at which index. Nothing is admitted yet: the caller
    /// takes the indices with [`State::take_admitted`] in the same critical
    /// section, after any checks of its own.
    ///
    /// `Ok(None)`: wait and ask again (an interrupted operation must be
    /// resumed first, admission is paused, or the queue is full). Errors:
    /// `Stopped`/`Closed`, `WrongIndex`, the end of the index space.
    ///
    /// An `at` above the next index of an empty log (new, or pruned through
    /// its end: `reseatable`) moves the log there (a snapshot install).
    pub(crate) fn admissible(
        &mut self,
        records: u64,
        bytes: usize,
        at: Option<u64>,
        opts: &Options,
    ) -> Result<Option<u64>> {
        self.check_usable()?;
        if self.interrupted.is_some() {
            // The indices may move when memory is rebuilt from the files:
            // admit (and check `at`) only after the resume.
            return Ok(None);
        }
        if let Some(index) = at {
            let empty =
                self.reseatable && self.segments.is_empty() && self.queue.is_empty() && self.frontier.is_empty();
            if empty && index > self.frontier.admitted() {
                // A refused call changes nothing: the index space is
                // checked before the log moves (found by the ops fuzzer).
                fits_index_space(index, records)?;
                // Nothing is buffered: a full prune writes the buffer first
                // and no segment exists to buffer into since.
                self.frontier.emptied_at(index);
            }
            if index != self.frontier.admitted() {
                return Err(Error::WrongIndex {
                    expected: self.frontier.admitted(),
                    got: index,
                });
            }
        }
        let full = !self.queue.is_empty()
            && (self.queued_bytes + bytes > opts.max_queue_bytes || self.queue.len() >= opts.max_queue_appends);
        if full || self.admission_paused {
            return Ok(None);
        }
        let first = self.frontier.admitted();
        fits_index_space(first, records)?;
        Ok(Some(first))
    }

    /// Takes `records` indices that [`State::admissible`] allowed, in the
    /// same critical section; returns the first. The log's start is fixed
    /// from here on (no snapshot jump any more).
    pub(crate) fn take_admitted(&mut self, records: u64) -> Result<u64> {
        let first = self
            .frontier
            .admit(records)
            .ok_or_else(|| Error::Internal("admission took indices that `admissible` had not allowed".into()))?;
        self.reseatable = false;
        Ok(first)
    }

    pub(crate) fn check_usable(&self) -> Result<()> {
        if let Some(cause) = &self.stopped {
            return Err(Error::Stopped {
                cause: Box::new(cause.clone()),
            });
        }
        if self.closed {
            return Err(Error::Closed);
        }
        Ok(())
    }
}

pub(crate) struct Inner<F: Fs> {
    pub fs: Arc<F>,
    pub dir: PathBuf,
    pub opts: Options,
    pub lock: Mutex<Option<F::DirLock>>,
    pub state: Mutex<State<F>>,
    pub writer: futures::lock::Mutex<Writer<F>>,
    pub report: RecoveryReport,
    /// Serializes prune, truncate, compaction and close.
    pub lifecycle: futures::lock::Mutex<()>,
    /// The meta file: its content and every update of it.
    pub meta: MetaFile,
    /// Every segment id below this was used; never reused.
    pub next_segment_id: AtomicU64,
    /// The log's identity, in every segment header and the meta file.
    pub log_id: u128,
    /// Reader leases of live iterators.
    pub leases: Mutex<Leases>,
    /// Held by a `PauseAdmission`; paused appenders wait on it.
    pub admission_gate: futures::lock::Mutex<()>,
    /// Bumped after anything that can make a record an iterator already
    /// buffered unservable (stop, close, prune, truncation, compaction).
    /// Iterators serve buffered frames without taking a lock while it is
    /// unchanged (see `WalIter`).
    pub reader_epoch: AtomicU64,
    /// Tasks waiting for the writer mutex to read, sync or rotate (see
    /// `WantWriter`): the lean append path stands back while any waits.
    pub writer_wanted: AtomicUsize,
    /// Seal-event subscribers (`Wal::seal_events`).
    pub seals: SealHub,
    /// Live `Wal` handles (clones). When the last one goes, the WAL closes
    /// without the clean-shutdown steps (`Wal`'s `Drop`): iterators then
    /// fail with `Closed` and the directory lock is released at once, not
    /// when the last iterator goes.
    pub handles: AtomicUsize,
}

impl<F: Fs> Inner<F> {
    /// The state, locked. A thread that panicked while it held the lock
    /// may have left it half-changed: the WAL stops (fail-stop), and every
    /// later call gets `Stopped` with an `Internal` cause.
    pub(crate) fn state(&self) -> MutexGuard<'_, State<F>> {
        // The lock is not reentrant: a call back into the WAL from an
        // `append_with` function would deadlock here.
        assert!(
            !MAKING_RECORDS.with(|m| m.get()),
            "an append_with function called the Wal it appends to (it runs under the admission lock)"
        );
        self.state.lock().unwrap_or_else(|poisoned| {
            let mut st = poisoned.into_inner();
            if st.stopped.is_none() {
                st.stopped = Some(Error::Internal(
                    "a thread panicked while it held the WAL's state; it may be half-changed".into(),
                ));
            }
            st
        })
    }

    /// A fresh segment id (never reused: see the meta file's high-water
    /// mark). `u64::MAX` is never handed out: recovery needs `max id + 1`
    /// for the next open, so a segment with that id would make the log
    /// impossible to reopen (found by the `recover` fuzz target).
    pub(crate) fn next_segment_id(&self) -> Result<u64> {
        self.next_segment_id
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |id| {
                (id < u64::MAX).then(|| id + 1)
            })
            .map_err(|_| Error::corruption(&self.dir, 0, "segment ids exhausted"))
    }

    /// The id the next segment would get.
    pub(crate) fn peek_segment_id(&self) -> u64 {
        self.next_segment_id.load(Ordering::Acquire)
    }

    /// The leases, locked; a panic while they were held stops the WAL, as
    /// for the state (see [`Inner::state`]).
    pub(crate) fn leases(&self) -> MutexGuard<'_, Leases> {
        self.leases.lock().unwrap_or_else(|poisoned| {
            let mut st = self.state();
            if st.stopped.is_none() {
                st.stopped = Some(Error::Internal(
                    "a thread panicked while it held the iterators' leases".into(),
                ));
            }
            drop(st);
            poisoned.into_inner()
        })
    }

    /// The current reader epoch (see `reader_epoch`).
    pub(crate) fn reader_epoch(&self) -> u64 {
        self.reader_epoch.load(Ordering::Acquire)
    }

    /// Marks the log closed (every later call returns `Closed`), ends what
    /// iterators buffered, ends the seal subscriptions and releases the
    /// directory lock: the last step of `close` and of dropping the last
    /// `Wal` handle.
    pub(crate) fn release(&self) {
        self.state().closed = true;
        self.invalidate_readers();
        self.seals.close();
        self.lock.lock().unwrap_or_else(|e| e.into_inner()).take();
    }

    /// Makes every iterator re-check the state before serving another
    /// record. Call it AFTER the state change is visible in `State`.
    pub(crate) fn invalidate_readers(&self) {
        self.reader_epoch.fetch_add(1, Ordering::AcqRel);
    }

    /// Marks the WAL interrupted by a dropped `Critical` section (see
    /// there): nothing may be admitted or written until `Writer::resume`
    /// has rebuilt memory from the files. A stopped WAL stays stopped.
    pub(crate) fn interrupt(&self, operation: &'static str) {
        let mut st = self.state();
        if st.stopped.is_none() && st.interrupted.is_none() {
            warn!(dir = %self.dir.display(), operation, "interrupted (its future was dropped): the next call resumes");
            st.interrupted = Some(operation);
        }
        drop(st);
        self.invalidate_readers();
    }

    /// Whether an interrupted operation waits for `Writer::resume`.
    pub(crate) fn is_interrupted(&self) -> bool {
        self.state().interrupted.is_some()
    }

    /// Resumes after an interrupted operation (`Writer::resume`), taking the
    /// lifecycle mutex, then the writer mutex (the engine's lock order).
    /// A no-op when nothing was interrupted. Cancel-safe: dropped mid-way,
    /// the WAL stays interrupted and the next call resumes from the start.
    pub(crate) async fn resume_interrupted(&self) -> Result<()> {
        if !self.is_interrupted() {
            return Ok(());
        }
        let lifecycle = self.lifecycle.lock().await;
        let mut w = self.writer.lock().await;
        w.resume(self, &lifecycle).await
    }

    /// [`Inner::resume_interrupted`] for a caller that holds the lifecycle
    /// mutex already.
    pub(crate) async fn resume_under(&self, lifecycle: &futures::lock::MutexGuard<'_, ()>) -> Result<()> {
        if !self.is_interrupted() {
            return Ok(());
        }
        self.writer.lock().await.resume(self, lifecycle).await
    }

    /// Writes the meta file with `change` applied (`MetaFile::update`: the
    /// clean marker cleared unless `change` sets it). Fails closed: a write
    /// whose outcome is unknown stops the WAL.
    pub(crate) async fn update_meta(&self, change: impl FnOnce(&mut Meta)) -> Result<()> {
        let written = self
            .meta
            .update(&*self.fs, &self.dir, || self.peek_segment_id(), change)
            .await;
        self.meta_written(written)
    }

    /// Clears the clean-shutdown marker before the first change after open
    /// (one atomic load on the hot path: every group commit).
    pub(crate) async fn ensure_dirty(&self) -> Result<()> {
        let written = self
            .meta
            .clear_marker(&*self.fs, &self.dir, || self.peek_segment_id())
            .await;
        self.meta_written(written)
    }

    fn meta_written(&self, written: std::result::Result<(), MetaWriteError>) -> Result<()> {
        match written {
            Ok(()) => Ok(()),
            Err(MetaWriteError::NotWritten(e)) => Err(e),
            Err(MetaWriteError::Unknown(e)) => Err(self.stop(e)),
        }
    }

    /// Stops the WAL (fail-stop): every queued and later call fails with `cause`.
    pub(crate) fn stop(&self, cause: Error) -> Error {
        let mut st = self.state();
        if st.stopped.is_none() {
            error!(dir = %self.dir.display(), %cause, "WAL stopped");
            st.stopped = Some(cause);
        }
        let stopped = st.check_usable().err().unwrap_or(Error::Closed);
        let queued: Vec<Request> = st.queue.drain(..).collect();
        st.queued_bytes = 0;
        drop(st);
        self.invalidate_readers();
        for r in queued {
            let _ = r.done.send(Err(stopped.clone()));
        }
        stopped
    }
}

/// The meta file's content as recovery found it (or would write it for a
/// new log). A format-1 meta file gets the log id at its next write.
pub(crate) fn meta_of<F: Fs>(rec: &Recovered<F>) -> Meta {
    Meta {
        log_id: rec.log_id,
        ..rec.meta.unwrap_or(Meta {
            low_water: rec.first_index,
            next_segment_id: rec.next_segment_id,
            clean: None,
            log_id: rec.log_id,
        })
    }
}

/// Marks a section that changes files. If its future is dropped before
/// `finish`, memory and disk may disagree: the drop marks the WAL
/// interrupted (`State::interrupted`), and the next caller that needs the
/// writer rebuilds memory from the files before anything else happens
/// (`Writer::resume`). The WAL does not stop: cancelling a call (a timeout,
/// a lost `select!`) costs one in-process recovery, not an outage.
pub(crate) struct Critical<'a, F: Fs> {
    inner: &'a Inner<F>,
    operation: &'static str,
    armed: bool,
}

impl<'a, F: Fs> Critical<'a, F> {
    pub(crate) fn enter(inner: &'a Inner<F>, operation: &'static str) -> Self {
        Critical {
            inner,
            operation,
            armed: true,
        }
    }

    pub(crate) fn finish(mut self) {
        self.armed = false;
    }
}

impl<F: Fs> Drop for Critical<'_, F> {
    fn drop(&mut self) {
        if self.armed {
            #[cfg(feature = "planted-bugs")]
            if crate::testing::planted(crate::testing::Planted::CancelStops) {
                self.inner.stop(Error::Interrupted {
                    operation: self.operation,
                    cause: Box::new(Error::Closed),
                });
                return;
            }
            self.inner.interrupt(self.operation);
        }
    }
}

/// Counts a task waiting for the writer mutex in `Inner::writer_wanted`
/// while it waits. The mutex is not fair: an appender on the lean path that
/// unlocks and `try_lock`s again would nearly always win against a woken
/// waiter, so a tight append loop on another thread could starve a read or
/// a sync; while the count is not zero, appenders take the group path
/// (queue, then wait their turn) instead.
pub(crate) struct WantWriter;

impl WantWriter {
    pub(crate) async fn lock<F: Fs>(inner: &Inner<F>) -> futures::lock::MutexGuard<'_, Writer<F>> {
        struct Waiting<'a>(&'a AtomicUsize);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::AcqRel);
            }
        }
        inner.writer_wanted.fetch_add(1, Ordering::AcqRel);
        // Dropped when the mutex is ours, or when this future is dropped.
        let _waiting = Waiting(&inner.writer_wanted);
        inner.writer.lock().await
    }
}

/// Pauses admission while held (appenders wait behind the writer mutex,
/// which the holder owns): for operations that reset the next index.
///
/// It holds `Inner::admission_gate` while paused: appenders that find
/// admission paused wait on the gate (asleep) instead of retrying, so they
/// neither spin nor barge into the writer mutex the pausing operation is
/// waiting for (with 16 appender threads on 2 cores that barging once
/// starved a truncation for minutes).
pub(crate) struct PauseAdmission<'a, F: Fs> {
    inner: &'a Inner<F>,
    _gate: futures::lock::MutexGuard<'a, ()>,
}

impl<'a, F: Fs> PauseAdmission<'a, F> {
    pub(crate) async fn new(inner: &'a Inner<F>) -> Self {
        let gate = inner.admission_gate.lock().await;
        inner.state().admission_paused = true;
        PauseAdmission { inner, _gate: gate }
    }
}

/// What an appender brings to admission: its records, or a function that
/// makes them from the first index they get (`Wal::append_with`).
pub(crate) enum Pending<'a> {
    /// Records made before admission.
    Ready(Vec<Vec<u8>>),
    /// Called once, at admission, with the first index.
    Make(Box<dyn FnOnce(u64) -> Vec<Vec<u8>> + Send + 'a>),
}

std::thread_local! {
    /// Set while an `append_with` function runs under the state lock.
    static MAKING_RECORDS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Calls `make(first)` with the state lock held (the caller's), catching a
/// panic so the lock is released unpoisoned before it continues.
fn make_records(
    make: Box<dyn FnOnce(u64) -> Vec<Vec<u8>> + Send + '_>,
    first: u64,
) -> std::thread::Result<Vec<Vec<u8>>> {
    MAKING_RECORDS.with(|m| m.set(true));
    let made = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| make(first)));
    MAKING_RECORDS.with(|m| m.set(false));
    made
}

impl<F: Fs> Drop for PauseAdmission<'_, F> {
    fn drop(&mut self) {
        // The flag goes first; the gate opens when `_gate` drops after this.
        self.inner.state().admission_paused = false;
    }
}

impl<F: Fs> Inner<F> {
    /// Admission: checks, assigns indices and enqueues in ONE critical
    /// section of the state lock, so index order equals queue order equals
    /// disk order, whatever the executor. `Err(pending)` (given back
    /// unchanged, a `Make` not called) if admission must wait: the queue is
    /// full, a prune or truncation paused it, or the WAL was interrupted.
    /// `bytes` is the payload of `Ready` records (ignored for `Make`).
    #[allow(clippy::type_complexity)]
    pub(crate) fn admit<'a>(
        &self,
        pending: Pending<'a>,
        batch: bool,
        bytes: usize,
        at: Option<u64>,
    ) -> Result<std::result::Result<oneshot::Receiver<Result<u64>>, Pending<'a>>> {
        let mut st = self.state();
        let (n, bytes) = match &pending {
            Pending::Ready(records) => (records.len() as u64, bytes),
            // Sizes unknown until made: the queue bound may be passed by
            // this one request (at most `max_write_bytes`).
            Pending::Make(_) => (0, 0),
        };
        let Some(expected) = st.admissible(n, bytes, at, &self.opts)? else {
            return Ok(Err(pending));
        };
        let (records, bytes) = match pending {
            Pending::Ready(records) => (records, bytes),
            Pending::Make(make) => {
                #[cfg(feature = "planted-bugs")]
                let expected = if crate::testing::planted(crate::testing::Planted::MakerGetsReadable) {
                    st.frontier.readable()
                } else {
                    expected
                };
                let records = match make_records(make, expected) {
                    Ok(records) => records,
                    Err(panic) => {
                        // Nothing was admitted: unlock (no poisoning), then
                        // let the caller's panic continue.
                        drop(st);
                        std::panic::resume_unwind(panic);
                    }
                };
                let bytes = self.opts.check_records(&records)?;
                // The index-space check `admissible` made for no records.
                st.admissible(records.len() as u64, 0, at, &self.opts)?
                    .ok_or_else(|| Error::Internal("admission changed while the state lock was held".into()))?;
                (records, bytes)
            }
        };
        let n = records.len() as u64;
        let first = st.take_admitted(n)?;
        debug_assert_eq!(first, expected);
        #[cfg(feature = "shuttle")]
        if crate::testing::split_admission() {
            // The planted bug (shuttle build only): another admission may
            // run between assigning `first` and enqueueing it.
            drop(st);
            st = self.state();
        }
        let (tx, rx) = oneshot::channel();
        debug_assert!(st
            .queue
            .back()
            .is_none_or(|r| r.first_index + r.records.len() as u64 == first));
        st.queue.push_back(Request {
            first_index: first,
            records,
            batch,
            bytes,
            done: tx,
        });
        st.queued_bytes += bytes;
        let leader = st.leader_waker.take();
        drop(st);
        if let Some(w) = leader {
            w.wake();
        }
        Ok(Ok(rx))
    }

    /// The segment holding readable `index`.
    pub(crate) fn segment_for(&self, index: u64) -> Result<Arc<Segment<F>>> {
        let st = self.state();
        st.check_usable()?;
        if index < st.frontier.first() || index >= st.frontier.readable() {
            return Err(Error::OutOfRange {
                index,
                first: st.frontier.first(),
                next: st.frontier.readable(),
            });
        }
        let pos = st.segments.partition_point(|s| s.first_index <= index);
        match pos.checked_sub(1).and_then(|p| st.segments.get(p)) {
            Some(seg) => Ok(seg.clone()),
            None => Err(Error::corruption(
                &self.dir,
                0,
                format!("no segment holds index {index}"),
            )),
        }
    }

    /// The segment file a read looked up was gone when it opened it (seed
    /// 96025562 of the soak): a prune that removes it runs without the
    /// writer mutex, and a compaction may have replaced it. Below where a
    /// running or finished prune leaves the log the record is pruned
    /// (`OutOfRange`); a different segment now holding `index` (compaction's
    /// output) is read once; the same segment missing is the error itself,
    /// reported (nothing in the log removes a file it still lists).
    pub(crate) async fn read_vanished(&self, index: u64, seg: &Arc<Segment<F>>, e: Error) -> Result<Vec<u8>> {
        let pruning_below = self.leases().pruning_below();
        if index < pruning_below {
            let st = self.state();
            return Err(Error::OutOfRange {
                index,
                first: pruning_below.max(st.frontier.first()),
                next: st.frontier.readable(),
            });
        }
        let now = self.segment_for(index)?;
        if Arc::ptr_eq(&now, seg) {
            return Err(e);
        }
        now.read(&self.fs, index).await
    }

    /// A read that failed while the WAL stopped (its page cache may have
    /// changed under it, e.g. a btrfs revert) reports the stop, not damage.
    pub(crate) fn prefer_stopped(&self, e: Error) -> Error {
        self.state().check_usable().err().unwrap_or(e)
    }

    /// Whether appends go through the write buffer (`Options::write_buffer_bytes`).
    pub(crate) fn buffered(&self) -> bool {
        self.opts.write_buffer_bytes > 0 && matches!(self.opts.sync_policy, SyncPolicy::Manual)
    }

    /// Makes sure record `index` is in its segment file, not only in the
    /// write buffer (`Options::write_buffer_bytes`): readers call it before
    /// they look for `index` in a file (and before they read the segment's
    /// `end_offset` to bound that read). Returns after one look at the state
    /// when `index` is below `Frontier::written` (always so with the
    /// buffer off); otherwise takes the writer mutex and writes the buffer.
    /// Errors: `Stopped`/`Closed`, or the `Stopped` of a failed write.
    ///
    /// Dropping this future is harmless: an interrupted write is repeated,
    /// byte for byte at the same offset, by the next one.
    pub(crate) async fn ensure_written(&self, index: u64) -> Result<()> {
        {
            let st = self.state();
            st.check_usable()?;
            if index < st.frontier.written() {
                return Ok(());
            }
        }
        WantWriter::lock(self).await.flush(self).await
    }

    /// Whether the sync policy makes every write durable before acknowledging it.
    pub(crate) fn syncs_every_write(&self) -> bool {
        !matches!(self.opts.sync_policy, SyncPolicy::Manual)
    }
}

/// `records` indices from `first` leave the next index below `u64::MAX`,
/// which no log reaches.
fn fits_index_space(first: u64, records: u64) -> Result<()> {
    match first.checked_add(records) {
        Some(n) if n < u64::MAX => Ok(()),
        _ => Err(Error::InvalidArgument("the u64 index space is exhausted".into())),
    }
}
