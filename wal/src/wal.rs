//! [`Wal`]: the public API. The shared state behind it is `Inner`
//! (inner.rs).

use std::collections::VecDeque;
use std::path::Path;

use futures::future::{select, Either};
use simfs::Fs;
use tracing::info;

use crate::compaction::{CompactionOptions, CompactionPlan, SegmentInfo};
use crate::error::{Error, Result};
use crate::frontier::Frontier;
pub use crate::inner::Stats;
use crate::inner::{meta_of, Critical, Inner, PauseAdmission, Pending, State, WantWriter};
use crate::iter::WalIter;
use crate::leases::Leases;
use crate::meta::{self, MetaFile};
use crate::options::{Options, SyncPolicy};
use crate::recovery::{recover, RecoveryReport};
use crate::seals::{SealEvents, SealHub, SEAL_SUBSCRIBERS_MAX};
use crate::segment::Segment;
use crate::sync::{Arc, AtomicU64, AtomicUsize, Mutex, Ordering};
use crate::writer::Writer;

/// A write-ahead log in one directory, generic over the filesystem
/// ([`simfs::OsFs`] unless named: `Wal` is `Wal<OsFs>`).
///
/// All methods take `&self`, `close` included: share a `Wal` between tasks
/// by cloning it (a clone is another handle to the same open log) or with
/// an `Arc`. Dropping the last handle without `close` releases the
/// directory lock at once (see the `Drop` impl).
/// Concurrent appends are group-committed: they share one write and one
/// fsync, and their order on disk is the order in which they were admitted.
///
/// # Cancellation
///
/// Every async method may be cancelled (its future dropped at any await,
/// e.g. by a timeout or a `select!` that loses) without stopping the WAL or
/// losing, reordering or duplicating an acknowledged record. If the dropped
/// future was changing files, the WAL is marked interrupted and the next
/// call first rebuilds its memory from the files (an in-process recovery,
/// counted in [`Stats::resumes`]). What a dropped call leaves:
///
/// - `append`, `append_at`, `append_batch`, `append_batch_at`: an append
///   admitted before the drop is written by the engine at its index (a
///   batch entirely or not at all), or, if the files end before it after an
///   interrupted truncation, not at all; appends after it keep their order.
///   Dropped before admission: nothing.
/// - `sync`: nothing lost; the records it would have synced are synced by
///   the next `sync` (or group under `Always`).
/// - `rotate`, `compact`: either done or not; the log's records unchanged.
/// - `prune_through`: a prefix of what it would remove may be gone; the
///   first index never moves back.
/// - `truncate_from` / `truncate_after`: of the records it would remove, a
///   prefix may stay (newest segments go first); call it again to finish.
/// - `read`, `stats`, `segments`, iterators: nothing.
///
/// ```
/// use std::path::Path;
/// use wal::{Options, Wal};
///
/// futures::executor::block_on(async {
///     let fs = simfs::SimFs::new(1);
///     let wal = Wal::open(fs.clone(), Path::new("/log"), Options::default()).await?;
///     assert_eq!(wal.append(b"first".to_vec()).await?, 0);
///     assert_eq!(wal.append_batch(vec![b"a".to_vec(), b"b".to_vec()]).await?, 1);
///     assert_eq!(wal.read(2).await?, b"b");
///     wal.close().await?;
///
///     // A power loss keeps every acknowledged record.
///     fs.crash(simfs::CrashKind::PowerLoss);
///     let wal = Wal::open(fs, Path::new("/log"), Options::default()).await?;
///     let mut it = wal.iter_from(0)?;
///     let mut seen = Vec::new();
///     while let Some(rec) = it.next().await {
///         seen.push(rec?.1);
///     }
///     assert_eq!(seen, vec![b"first".to_vec(), b"a".to_vec(), b"b".to_vec()]);
///     Ok::<_, wal::Error>(())
/// }).unwrap();
/// ```
pub struct Wal<F: Fs = simfs::OsFs> {
    inner: Arc<Inner<F>>,
}

/// Another handle to the same open log: appends from every clone share one
/// group commit, and [`Wal::close`] on any of them closes the log for all.
///
/// ```
/// use std::path::Path;
/// futures::executor::block_on(async {
///     let wal = wal::Wal::open(simfs::SimFs::new(4), Path::new("/log"), wal::Options::default()).await?;
///     let other = wal.clone();
///     let (a, b) = futures::join!(wal.append(b"a".to_vec()), other.append(b"b".to_vec()));
///     assert_ne!(a?, b?);
///     wal.close().await
/// }).unwrap();
/// ```
impl<F: Fs> Clone for Wal<F> {
    fn clone(&self) -> Self {
        self.inner.handles.fetch_add(1, Ordering::AcqRel);
        Wal {
            inner: self.inner.clone(),
        }
    }
}

/// Dropping the last handle without [`Wal::close`] closes the log without
/// its clean-shutdown steps: what is in the write buffer is lost (see
/// [`Options::write_buffer_bytes`]), the next open scans the active
/// segment, live iterators fail with `Closed`, and the directory lock is
/// released at once, so the same process can reopen the log.
impl<F: Fs> Drop for Wal<F> {
    fn drop(&mut self) {
        if self.inner.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.inner.release();
        }
    }
}

impl<F: Fs> Wal<F> {
    /// Opens (creating if needed) the log in `dir`: takes the directory lock,
    /// then recovers (see [`RecoveryReport`]).
    ///
    /// Errors: `Locked` if another opener holds the directory,
    /// `Corruption` for damage that is not a torn tail, `Io` for filesystem
    /// failures (a read error fails the open and cuts nothing),
    /// `InvalidArgument` for bad options or a `dir` that is a file.
    ///
    /// Cancelling: dropping the future releases the directory lock. Every
    /// step recovery took is crash-safe and idempotent, so the next open
    /// finishes the job, as after a crash during an open.
    pub async fn open(fs: F, dir: &Path, opts: Options) -> Result<Wal<F>> {
        opts.validate()?;
        let fs = Arc::new(fs);
        if opts.read_only {
            return Self::open_read_only(fs, dir, opts).await;
        }
        match fs.metadata(dir).await {
            Ok(m) if !m.is_dir => return Err(Error::InvalidArgument(format!("{} is not a directory", dir.display()))),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                fs.create_dir_all(dir)
                    .await
                    .map_err(|e| Error::io("create_dir", dir, 0, e))?;
            }
            Err(e) => return Err(Error::io("metadata", dir, 0, e)),
        }
        // The directory or its ancestors may have been created by this open
        // or by one that crashed: until the path is durable a power loss
        // takes the whole log. Once a meta file exists an earlier open did
        // this, so a clean reopen spends no fsync on the path.
        if !meta::path_made_durable(&*fs, dir).await {
            for ancestor in dir.ancestors().skip(1).filter(|p| !p.as_os_str().is_empty()) {
                fs.sync_dir(ancestor)
                    .await
                    .map_err(|e| Error::io("sync_dir", ancestor, 0, e))?;
            }
        }
        let lock = fs.lock_dir(dir).await.map_err(|e| lock_error(dir, e))?;
        Self::recover_into(fs, dir, opts, lock).await
    }

    /// [`Options::read_only`]: a shared lock, and nothing created or synced.
    async fn open_read_only(fs: Arc<F>, dir: &Path, opts: Options) -> Result<Wal<F>> {
        match fs.metadata(dir).await {
            Ok(m) if !m.is_dir => return Err(Error::InvalidArgument(format!("{} is not a directory", dir.display()))),
            Ok(_) => {}
            Err(e) => return Err(Error::io("metadata", dir, 0, e)),
        }
        let lock = fs.lock_dir_shared(dir).await.map_err(|e| lock_error(dir, e))?;
        Self::recover_into(fs, dir, opts, lock).await
    }

    /// Recovery on the locked directory, then the engine's state.
    async fn recover_into(fs: Arc<F>, dir: &Path, opts: Options, lock: F::DirLock) -> Result<Wal<F>> {
        let rec = recover(
            &*fs,
            dir,
            opts.recovery_mode,
            opts.first_index,
            opts.durable_alignment_bytes,
            opts.read_only,
            None,
        )
        .await?;
        let writer = Writer::new(&rec, &rec.segments);
        let meta = meta_of(&rec);
        let stats = Stats {
            segments: rec.segments.len() as u64,
            ..Stats::default()
        };
        info!(dir = %dir.display(), first = rec.first_index, next = rec.next_index, "opened");
        let state = State {
            stopped: None,
            closed: false,
            frontier: Frontier::opened(rec.first_index, rec.next_index),
            queue: VecDeque::new(),
            queued_bytes: 0,
            reseatable: false,
            admission_paused: false,
            interrupted: None,
            live_appenders: 0,
            leader_waker: None,
            segments: rec.segments,
            stats,
        };
        Ok(Wal {
            inner: Arc::new(Inner {
                fs,
                dir: dir.to_path_buf(),
                opts,
                lock: Mutex::new(Some(lock)),
                state: Mutex::new(state),
                writer: futures::lock::Mutex::new(writer),
                report: rec.report,
                lifecycle: futures::lock::Mutex::new(()),
                meta: MetaFile::new(meta),
                log_id: rec.log_id,
                next_segment_id: AtomicU64::new(rec.next_segment_id),
                leases: Mutex::new(Leases::default()),
                admission_gate: futures::lock::Mutex::new(()),
                reader_epoch: AtomicU64::new(0),
                writer_wanted: AtomicUsize::new(0),
                seals: SealHub::default(),
                handles: AtomicUsize::new(1),
            }),
        })
    }

    /// Appends one record at the next index and returns that index. Under
    /// [`SyncPolicy::Always`] it returns once the record is durable; with
    /// [`Options::write_buffer_bytes`] set, once it is in the write buffer.
    ///
    /// Cancelling: dropping the future never stops the WAL and never touches
    /// an acknowledged record. If the record was admitted before the drop (its
    /// index was assigned), the engine writes it as if the caller had waited —
    /// in the group commit under way, or with the next call that writes (an
    /// append, [`Wal::sync`], [`Wal::rotate`], [`Wal::close`]) — and it is in the
    /// log at that index; if not, it never appears. The caller does not learn
    /// which: read the log to find out.
    pub async fn append(&self, record: Vec<u8>) -> Result<u64> {
        if let Some(r) = self.try_buffered(std::slice::from_ref(&record), false, None).await {
            return r;
        }
        self.submit(vec![record], false, None).await
    }

    /// Appends a record at `index`, which must be exactly the next index
    /// (`WrongIndex` otherwise; nothing is written). For Raft logs and block
    /// numbers known before writing.
    ///
    /// Cancelling: as [`Wal::append`]: the record is either in the log at
    /// `index` (it was admitted) or never appears.
    pub async fn append_at(&self, index: u64, record: Vec<u8>) -> Result<u64> {
        if let Some(r) = self
            .try_buffered(std::slice::from_ref(&record), false, Some(index))
            .await
        {
            return r;
        }
        self.submit(vec![record], false, Some(index)).await
    }

    /// Appends records as one atomic batch at consecutive indices and returns
    /// the first. After a crash either all of them are in the log or none.
    ///
    /// Cancelling: as [`Wal::append`], for the whole batch: it is in the log
    /// whole (it was admitted) or not at all, never in part.
    pub async fn append_batch(&self, records: Vec<Vec<u8>>) -> Result<u64> {
        if let Some(r) = self.try_buffered(&records, true, None).await {
            return r;
        }
        self.submit(records, true, None).await
    }

    /// [`Wal::append_batch`] at a caller-chosen first index, which must be the
    /// next index.
    ///
    /// Cancelling: as [`Wal::append_batch`]: the batch is in the log whole,
    /// at `index`, or not at all.
    pub async fn append_batch_at(&self, index: u64, records: Vec<Vec<u8>>) -> Result<u64> {
        if let Some(r) = self.try_buffered(&records, true, Some(index)).await {
            return r;
        }
        self.submit(records, true, Some(index)).await
    }

    /// Appends the record `make(index)` at the next index and returns that
    /// index: for records that carry their own sequence number (a database's
    /// WAL entry, seed 001), which must be known before the record is made.
    /// `make` is called exactly once, when the index is assigned, inside the
    /// admission critical section, so concurrent appenders can never see
    /// the same index or write out of order.
    ///
    /// `make` runs while the log holds its admission lock: keep it short
    /// (encode a record) and do not call this `Wal` from it (that panics
    /// instead of deadlocking). If it panics, nothing is admitted and the
    /// panic continues in the caller. If `make` was called but its record is
    /// refused (`RecordTooLarge`), nothing is admitted either. Durability and
    /// the answer are as [`Wal::append`]'s. It always takes the group-commit
    /// path (never the write buffer's lean path).
    ///
    /// Cancelling: as [`Wal::append`]. If `make` was not called yet, the
    /// record never appears; once it was, the record is in the log at the
    /// index it was given.
    ///
    /// ```
    /// use std::path::Path;
    /// futures::executor::block_on(async {
    ///     let wal = wal::Wal::open(simfs::SimFs::new(2), Path::new("/log"), wal::Options::default()).await?;
    ///     let i = wal.append_with(|index| format!("entry {index}").into_bytes()).await?;
    ///     assert_eq!(wal.read(i).await?, format!("entry {i}").into_bytes());
    ///     wal.close().await
    /// })
    /// .unwrap();
    /// ```
    pub async fn append_with<M>(&self, make: M) -> Result<u64>
    where
        M: FnOnce(u64) -> Vec<u8> + Send,
    {
        self.submit_pending(Pending::Make(Box::new(move |index| vec![make(index)])), false, None)
            .await
    }

    /// [`Wal::append_with`] for an atomic batch: `make(first)` returns the
    /// records for `first, first + 1, ...`, appended as [`Wal::append_batch`]
    /// does (all or none after a crash). An empty or oversized batch is
    /// refused (`EmptyBatch`, `RecordTooLarge`, `BatchTooLarge`) with
    /// nothing admitted.
    ///
    /// Cancelling: as [`Wal::append_with`], for the whole batch.
    ///
    /// ```
    /// use std::path::Path;
    /// futures::executor::block_on(async {
    ///     let wal = wal::Wal::open(simfs::SimFs::new(3), Path::new("/log"), wal::Options::default()).await?;
    ///     let first = wal.append_batch_with(|first| (first..first + 3).map(|i| i.to_le_bytes().to_vec()).collect()).await?;
    ///     assert_eq!(wal.read(first + 2).await?, (first + 2).to_le_bytes().to_vec());
    ///     wal.close().await
    /// })
    /// .unwrap();
    /// ```
    pub async fn append_batch_with<M>(&self, make: M) -> Result<u64>
    where
        M: FnOnce(u64) -> Vec<Vec<u8>> + Send,
    {
        self.submit_pending(Pending::Make(Box::new(make)), true, None).await
    }

    /// The lean append path of the write buffer: when nobody holds the
    /// writer mutex, the appender takes it and admits, encodes into the
    /// buffer and publishes in one critical section of the state lock (no
    /// queue entry, no channel, no copy of the record list). `None` when it
    /// does not apply (buffer off, mutex busy, queue not empty, or something
    /// that needs the group path: bad arguments, a rotation, a new segment,
    /// the clean marker, a snapshot install, `WrongIndex`); nothing changed
    /// then, and the caller takes the group path.
    async fn try_buffered(&self, records: &[Vec<u8>], batch: bool, at: Option<u64>) -> Option<Result<u64>> {
        let inner = &self.inner;
        if !inner.buffered() || inner.opts.read_only {
            return None;
        }
        // Argument errors are reported by the group path, after its check
        // that the WAL is usable.
        let bytes = inner.opts.check_records(records).ok()?;
        if inner.writer_wanted.load(Ordering::Acquire) > 0 {
            return None;
        }
        let mut w = inner.writer.try_lock()?;
        w.try_append_buffered(inner, records, batch, bytes, at).await
    }

    async fn submit(&self, records: Vec<Vec<u8>>, batch: bool, at: Option<u64>) -> Result<u64> {
        self.submit_pending(Pending::Ready(records), batch, at).await
    }

    /// The group path of every append: admission (waiting while it must),
    /// then the answer of the group commit that writes the records.
    async fn submit_pending(&self, pending: Pending<'_>, batch: bool, at: Option<u64>) -> Result<u64> {
        let inner = &self.inner;
        let _live = LiveAppender::enter(inner);
        // A stopped WAL answers `Stopped` to everything, bad arguments included.
        inner.state().check_usable()?;
        inner.check_writable("append")?;
        let bytes = match &pending {
            Pending::Ready(records) => inner.opts.check_records(records)?,
            // Checked at admission, once made.
            Pending::Make(_) => 0,
        };
        let mut pending = pending;
        let mut done = loop {
            match inner.admit(pending, batch, bytes, at)? {
                Ok(rx) => break rx,
                Err(back) => {
                    pending = back;
                    if inner.is_interrupted() {
                        inner.resume_interrupted().await?;
                        continue;
                    }
                    if inner.state().admission_paused {
                        // A prune or truncation is resetting indices: sleep
                        // until it opens the gate, then try again.
                        drop(inner.admission_gate.lock().await);
                        continue;
                    }
                    // Backpressure (the queue is full): help drain the
                    // queue, then let the others run before trying again.
                    {
                        let mut w = inner.writer.lock().await;
                        w.run_group(inner).await;
                    }
                    yield_now().await;
                }
            }
        };
        loop {
            match done.try_recv() {
                Ok(Some(result)) => return result,
                Ok(None) => {}
                Err(_) => return Err(self.inner.state().check_usable().err().unwrap_or(Error::Closed)),
            }
            match select(done, inner.writer.lock()).await {
                Either::Left((result, _)) => {
                    return result.unwrap_or_else(|_| Err(inner.state().check_usable().err().unwrap_or(Error::Closed)))
                }
                Either::Right((mut w, rx)) => {
                    done = rx;
                    if inner.is_interrupted() {
                        // Our request may be in the group whose leader was
                        // dropped: resuming answers it (or stops the WAL,
                        // which answers it too).
                        drop(w);
                        let _ = inner.resume_interrupted().await;
                        continue;
                    }
                    w.run_group(inner).await;
                }
            }
        }
    }

    /// Makes every record appended before this call durable: it writes the
    /// write buffer (if any, see [`Options::write_buffer_bytes`]) and fsyncs
    /// the active segment if it holds records written since the last fsync.
    /// Sealed segments and segment directory entries are always durable
    /// already (sealing and creating a segment fsync them). Under
    /// [`SyncPolicy::Always`] and [`SyncPolicy::Batched`] every acknowledged
    /// record is durable, so this only waits for the group in progress.
    ///
    /// It first writes appends that were admitted before the call but whose
    /// callers dropped their futures (so they are covered too).
    ///
    /// Cancelling: dropping the future never stops the WAL; what it wrote or
    /// fsynced stays written, but the dropped call promises nothing: call
    /// `sync` again for the guarantee.
    pub async fn sync(&self) -> Result<()> {
        self.inner.check_writable("sync")?;
        let w = self.writer_resumed().await?;
        self.sync_locked(w).await
    }

    /// Waits until the record at `index`, and so every record before it, is
    /// durable: the durability notification for appends that returned
    /// before their fsync (under [`SyncPolicy::Manual`], or with
    /// [`Options::write_buffer_bytes`]). Returns at once if it already is;
    /// if a group commit or another `sync`/`wait_durable` makes it durable
    /// while this call waits for the writer, it returns without an fsync of
    /// its own; otherwise it syncs ([`Wal::sync`]). So any number of tasks
    /// can wait, each for its own index, with no thread per waiter and at
    /// most one fsync per group of waiters. Durability is a prefix: when the
    /// call for `i` returns, every call for `j < i` may return too.
    ///
    /// `OutOfRange` if `index` was never admitted (at or past
    /// [`Wal::next_index`] and not in flight). A record below the first
    /// index (pruned) counts as durable.
    ///
    /// Cancelling: as [`Wal::sync`]; the dropped call promises nothing.
    ///
    /// ```
    /// use std::path::Path;
    /// futures::executor::block_on(async {
    ///     let opts = wal::Options::default().sync_policy(wal::SyncPolicy::Manual);
    ///     let wal = wal::Wal::open(simfs::SimFs::new(5), Path::new("/log"), opts).await?;
    ///     let i = wal.append(b"readable now".to_vec()).await?;
    ///     assert!(wal.durable_next() <= i); // not durable yet
    ///     wal.wait_durable(i).await?;
    ///     assert!(wal.durable_next() > i);
    ///     wal.close().await
    /// })
    /// .unwrap();
    /// ```
    pub async fn wait_durable(&self, index: u64) -> Result<()> {
        if self.durable_covers(index)? {
            return Ok(());
        }
        self.inner.check_writable("wait_durable")?;
        #[cfg(feature = "planted-bugs")]
        if crate::testing::planted(crate::testing::Planted::WaitDurableNoSync) {
            return Ok(());
        }
        // A sync covers what was admitted when it started. The index may be
        // handed out again meanwhile (its group failed, `AppendFailed`, and
        // a later append took it): then the next round covers that one.
        for _ in 0..WAIT_DURABLE_SYNCS_MAX {
            let w = self.writer_resumed().await?;
            // Whoever held the writer before us may have made it durable.
            if self.durable_covers(index)? {
                self.inner.state().stats.durable_waits_joined += 1;
                return Ok(());
            }
            self.sync_locked(w).await?;
            if self.durable_covers(index)? {
                return Ok(());
            }
        }
        Err(Error::Internal(format!(
            "wait_durable({index}): not durable after {WAIT_DURABLE_SYNCS_MAX} syncs"
        )))
    }

    /// Whether `index` is durable; `OutOfRange` if it was never admitted.
    fn durable_covers(&self, index: u64) -> Result<bool> {
        let st = self.inner.state();
        st.check_usable()?;
        if index >= st.frontier.admitted() {
            return Err(Error::OutOfRange {
                index,
                first: st.frontier.first(),
                next: st.frontier.admitted(),
            });
        }
        Ok(index < st.frontier.durable())
    }

    /// `sync` with the writer `w` taken.
    async fn sync_locked(&self, mut w: futures::lock::MutexGuard<'_, Writer<F>>) -> Result<()> {
        // Appends admitted before this call whose callers went away wait in
        // the queue for a leader: lead their groups (bounded: only requests
        // admitted before now; a failed group empties the queue).
        // One look at the state when the queue is empty (the usual case).
        let admitted = {
            let st = self.inner.state();
            (!st.queue.is_empty()).then_some(st.frontier.admitted())
        };
        if let Some(admitted) = admitted {
            loop {
                {
                    let st = self.inner.state();
                    if st.queue.front().is_none_or(|r| r.first_index >= admitted) {
                        break;
                    }
                    st.check_usable()?;
                }
                w.run_group(&self.inner).await;
                if self.inner.is_interrupted() {
                    drop(w);
                    w = self.writer_resumed().await?;
                }
            }
        }
        w.sync(&self.inner).await
    }

    /// The writer mutex, after resuming an interrupted operation if there
    /// is one (resuming needs the lifecycle mutex first, so the writer is
    /// released for it and taken again).
    async fn writer_resumed(&self) -> Result<futures::lock::MutexGuard<'_, Writer<F>>> {
        loop {
            let w = WantWriter::lock(&self.inner).await;
            if !self.inner.is_interrupted() {
                return Ok(w);
            }
            drop(w);
            self.inner.resume_interrupted().await?;
        }
    }

    /// Seals the active segment now (if it holds records); the next append
    /// starts a new segment.
    ///
    /// Cancelling: dropping the future mid-seal marks the WAL interrupted; the
    /// next call rebuilds memory from the files, where the seal either
    /// happened or did not. No record is affected.
    pub async fn rotate(&self) -> Result<()> {
        self.inner.check_writable("rotate")?;
        let mut w = self.writer_resumed().await?;
        self.inner.state().check_usable()?;
        w.run_group(&self.inner).await;
        let critical = Critical::enter(&self.inner, "rotation");
        let result = w.rotate(&self.inner).await;
        critical.finish();
        result
    }

    /// Reads the record at `index`. Only acknowledged records are readable
    /// (a record still in the write buffer is written out first).
    ///
    /// `OutOfRange` if `index` is outside `[first, next)`, or a prune
    /// running alongside removed it before the read opened its segment.
    /// Cancelling it is harmless: a write of the buffer it started is
    /// repeated, byte for byte, by the next one.
    pub async fn read(&self, index: u64) -> Result<Vec<u8>> {
        // After a cancelled operation the segment list may be stale.
        self.inner.resume_interrupted().await?;
        let seg = self.inner.segment_for(index)?;
        // Never look in the file for a record that is only in the buffer.
        self.inner.ensure_written(index).await?;
        let result = match seg.read(&self.inner.fs, index).await {
            Err(e) if e.is_not_found() => self.inner.read_vanished(index, &seg, e).await,
            r => r,
        };
        result.map_err(|e| self.inner.prefer_stopped(e))
    }

    /// An iterator over the records from `index` on, in order. It sees
    /// records appended after it was created, and runs alongside appends and
    /// rotation.
    ///
    /// `OutOfRange` if `index` is outside `[first, next]`, or below where a
    /// running prune may leave the first index (the error's `first`): that
    /// prune decided what to remove before this iterator's lease existed.
    pub fn iter_from(&self, index: u64) -> Result<WalIter<F>> {
        let st = self.inner.state();
        st.check_usable()?;
        if index < st.frontier.first() || index > st.frontier.readable() {
            return Err(Error::OutOfRange {
                index,
                first: st.frontier.first(),
                next: st.frontier.readable(),
            });
        }
        let mut leases = self.inner.leases();
        // A running prune decided without this iterator's lease: records
        // below where it may leave the log are going.
        let pruning_below = leases.pruning_below();
        if index < pruning_below {
            return Err(Error::OutOfRange {
                index,
                first: pruning_below,
                next: st.frontier.readable(),
            });
        }
        let lease = leases.take(index);
        drop(leases);
        drop(st);
        Ok(WalIter::new(self.inner.clone(), index, lease))
    }

    /// A subscription to seal events: from now on, each segment this log
    /// seals (by rotation, or by a truncation that cuts the active segment)
    /// is reported in seal order with its index range. For a store that
    /// flushes its memtable when the WAL rotates (see
    /// `examples/memtable.rs`). Segments sealed by recovery at open or
    /// written by compaction are not reported (they were sealed before).
    ///
    /// `InvalidArgument` with [`crate::SEAL_SUBSCRIBERS_MAX`] subscriptions
    /// alive; each queues at most [`crate::SEAL_EVENTS_QUEUED_MAX`] events
    /// (then the oldest go and it gets [`crate::SealNotice::Missed`]).
    pub fn seal_events(&self) -> Result<SealEvents> {
        self.inner.state().check_usable()?;
        self.inner.seals.subscribe().ok_or_else(|| {
            Error::InvalidArgument(format!("seal_events: {SEAL_SUBSCRIBERS_MAX} subscriptions are alive"))
        })
    }

    /// `Stopped` or `Closed` if the log is, for calls that may not touch
    /// the engine's state otherwise.
    pub(crate) fn check_usable(&self) -> Result<()> {
        self.inner.state().check_usable()
    }

    /// The first index in the log.
    pub fn first_index(&self) -> u64 {
        self.inner.state().frontier.first()
    }

    /// The index the next append gets, i.e. one past the last acknowledged
    /// record once no append is in flight.
    pub fn next_index(&self) -> u64 {
        self.inner.state().frontier.readable()
    }

    /// The last readable index, `None` if the log is empty.
    pub fn last_index(&self) -> Option<u64> {
        let st = self.inner.state();
        (st.frontier.readable() > st.frontier.first()).then(|| st.frontier.readable() - 1)
    }

    /// Records below this index are durable.
    pub fn durable_next(&self) -> u64 {
        self.inner.state().frontier.durable()
    }

    /// The error that stopped the WAL, if it is stopped.
    pub fn stopped(&self) -> Option<Error> {
        self.inner.state().stopped.clone()
    }

    /// What recovery at open found and did.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.inner.report
    }

    /// The log directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// A test hook, not part of the API (no stability promise): the
    /// operation whose future was dropped mid-way, while the WAL waits for
    /// the next call to rebuild memory from the files (see the cancellation
    /// notes on [`Wal`]). Meanwhile memory (the segment list, the indices)
    /// may lag the files on purpose: checks that compare them must let the
    /// WAL resume first.
    #[doc(hidden)]
    pub fn interrupted(&self) -> Option<&'static str> {
        self.inner.state().interrupted
    }

    /// A test hook, not part of the API (no stability promise; use
    /// [`Wal::segments`]): the segment list in memory, with no I/O, as
    /// `(file name, first index, last index (None if empty), sealed)`, in
    /// log order. Synchronous so that tests and the simulation can compare
    /// it with the directory at any point without an await (and without
    /// the file-size lookups `segments` may make). Records still in the
    /// write buffer are not counted.
    #[doc(hidden)]
    pub fn segment_files(&self) -> Vec<(String, u64, Option<u64>, bool)> {
        let st = self.inner.state();
        st.segments
            .iter()
            .map(|s| {
                let m = s.meta();
                let name = m
                    .path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                (name, s.first_index, m.last_index, m.sealed)
            })
            .collect()
    }

    /// A snapshot of the counters.
    ///
    /// Cancelling is harmless: it only reads.
    pub async fn stats(&self) -> Stats {
        let mut stats = self.inner.state().stats;
        let segments = self.inner.segment_infos().await;
        stats.segments = segments.len() as u64;
        stats.bytes_on_disk = segments.iter().map(|s| s.bytes).sum();
        stats
    }

    /// Finishes every admitted append, writes the write buffer, makes
    /// everything durable, records the clean-shutdown marker and releases
    /// the directory lock. Takes `&self`, so a `Wal` shared by clones (or
    /// an `Arc`) can be closed: every later call, on any clone or iterator,
    /// returns `Closed`, and so does a second `close`.
    ///
    /// Cancelling: dropping the future before it finished leaves the WAL
    /// open (a group commit it led is finished by the next call, see
    /// [`Stats::resumes`]); acknowledged records are never affected. The
    /// WAL may then lack the clean-shutdown marker (the next open scans the
    /// active segment instead of trusting it).
    ///
    /// ```
    /// use std::path::Path;
    /// futures::executor::block_on(async {
    ///     let wal = wal::Wal::open(simfs::SimFs::new(3), Path::new("/log"), wal::Options::default()).await?;
    ///     let shared = wal.clone();
    ///     shared.append(b"x".to_vec()).await?;
    ///     wal.close().await?;
    ///     assert!(matches!(shared.append(b"y".to_vec()).await, Err(wal::Error::Closed)));
    ///     assert!(matches!(wal.close().await, Err(wal::Error::Closed)));
    ///     Ok::<_, wal::Error>(())
    /// }).unwrap();
    /// ```
    pub async fn close(&self) -> Result<()> {
        let inner = &self.inner;
        let _lifecycle = inner.lifecycle.lock().await;
        if inner.state().closed {
            return Err(Error::Closed);
        }
        if inner.opts.read_only {
            inner.release();
            info!(dir = %inner.dir.display(), "closed (read-only)");
            return Ok(());
        }
        let mut w = inner.writer.lock().await;
        let mut result = w.resume(inner, &_lifecycle).await;
        if result.is_ok() {
            while !inner.state().queue.is_empty() {
                w.run_group(inner).await;
            }
            result = w.sync(inner).await;
        }
        if result.is_ok() {
            result = w
                .trim_tail(inner.opts.durable_alignment_bytes)
                .await
                .map_err(|e| inner.stop(e));
        }
        if result.is_ok() {
            // Where the log ends, so the next open reads no record data.
            result = inner.write_clean_marker(w.active_end()).await;
        }
        // Closed before the writer mutex goes: an appender waiting for it
        // finds the log closed instead of writing after the marker.
        inner.release();
        drop(w);
        info!(dir = %inner.dir.display(), "closed");
        result
    }

    /// Removes every record at or below `k` and returns the new first index,
    /// `k + 1` (exact prune): sealed segments wholly at or below `k` are
    /// deleted, oldest first; in the segment that then comes first, the
    /// records at or below `k` stay in the file but are no longer part of
    /// the log (unreadable, gone after a restart too), until that segment
    /// goes as a whole. If `k` is at or past the last record, the log is
    /// emptied and the next index becomes `k + 1` (snapshot install; on an
    /// empty log, [`Wal::append_at`] accepts any index at or above that).
    /// Emptying it at `k >= u64::MAX - 1` would make the next index
    /// `u64::MAX`, which no log reaches: `InvalidArgument`, nothing changes.
    ///
    /// The first index never passes the durable end (under
    /// [`SyncPolicy::Manual`], call [`Wal::sync`] first to prune records
    /// appended since the last sync), nor the lowest position of a live
    /// iterator (below): the answer is then lower than `k + 1`.
    ///
    /// Crash safety: the new first index is made durable (meta file) before
    /// memory changes or any file is removed, so a crash at any point leaves
    /// one contiguous range and the first index never moves backwards.
    /// Appends run while the files are removed. Iterators keep what they
    /// still need: the prune stops below the lowest position of a live
    /// iterator (see `Options::max_lease_holds` for leaked iterators).
    ///
    /// Cancelling: dropping the future may leave the prune done, partly done
    /// (the first index then where the files and the meta file put it, at most
    /// `k + 1`) or not done; the next call rebuilds memory from the files.
    /// Records above `k` are never affected.
    pub async fn prune_through(&self, k: u64) -> Result<u64> {
        let inner = &self.inner;
        inner.check_writable("prune")?;
        let lifecycle = inner.lifecycle.lock().await;
        inner.resume_under(&lifecycle).await?;
        let (first, readable) = {
            let st = inner.state();
            st.check_usable()?;
            (st.frontier.first(), st.frontier.readable())
        };
        if k < first {
            return self.prune_below_first(k, first).await;
        }
        // Never beyond what a live iterator still needs.
        let Some(k_eff) = self.lease_limited_prune_point(k, readable) else {
            return Ok(first);
        };
        // A lease may have been revoked: its iterator must notice.
        inner.invalidate_readers();
        let whole = k_eff == k && (readable == first || k >= readable - 1);
        let critical = Critical::enter(inner, "prune");
        let result = self.prune_leased(&lifecycle, k, k_eff, whole).await;
        // The first index is final (or the WAL stopped): iterators may
        // start anywhere in the log again. (If this future is dropped
        // instead, `critical` stops the WAL, which refuses new iterators.)
        inner.leases().set_pruning_below(0);
        critical.finish();
        let new_first = result?;
        if new_first > first {
            inner.state().stats.prunes += 1;
        }
        Ok(new_first)
    }

    /// `prune_through(k)` with `k` below the first index `first`: removes
    /// the sealed segments wholly below `first`, if any, and makes `first`
    /// durable; returns `first`. A separate path because no record goes and
    /// no lease needs asking. Called with the lifecycle lock held.
    async fn prune_below_first(&self, k: u64, first: u64) -> Result<u64> {
        let inner = &self.inner;
        // No record to remove, but a sealed segment may lie wholly below
        // the first index: an active segment that recovery kept under a
        // low-water mark above its records (a meta rename that failed
        // after taking effect, seed 690 of the sweep), sealed since. It
        // goes (no iterator can read it); the answer promises `first`
        // durably.
        let critical = Critical::enter(inner, "prune");
        let result = async {
            inner.prune_sealed(k, false).await?;
            inner.persist_first_index(first).await
        }
        .await;
        inner.leases().set_pruning_below(0);
        critical.finish();
        result?;
        Ok(first)
    }

    /// The prune point the leases allow for `prune_through(k)` (`readable`
    /// the readable end), published as `pruning_below` so that no iterator
    /// created meanwhile starts where the prune may remove. `None` when a
    /// lease needs the first record: nothing goes (the readers are told,
    /// since a lease may have been revoked).
    fn lease_limited_prune_point(&self, k: u64, readable: u64) -> Option<u64> {
        let inner = &self.inner;
        let mut leases = inner.leases();
        let k_eff = leases.limit(k, readable, inner.opts.max_lease_holds);
        #[cfg(feature = "planted-bugs")]
        let k_eff = if crate::testing::planted(crate::testing::Planted::PruneIgnoresLeases) {
            Some(k)
        } else {
            k_eff
        };
        let Some(k_eff) = k_eff else {
            // A lease at index 0 needs the first record: nothing goes.
            drop(leases);
            inner.invalidate_readers();
            return None;
        };
        // Iterators created from here on were not counted: none may
        // start where this prune may remove (`prune_sealed` narrows it).
        leases.set_pruning_below(k_eff.saturating_add(1));
        Some(k_eff)
    }

    /// The file-changing part of `prune_through`, run inside its `Critical`
    /// section: empties the log through `k` when `whole` (`prune_whole`),
    /// else removes the sealed segments through the lease-limited `k_eff`;
    /// then makes the returned first index durable.
    async fn prune_leased(
        &self,
        lifecycle: &futures::lock::MutexGuard<'_, ()>,
        k: u64,
        k_eff: u64,
        whole: bool,
    ) -> Result<u64> {
        let inner = &self.inner;
        let new_first = if whole {
            self.prune_whole(lifecycle, k).await
        } else {
            inner.prune_sealed(k_eff, true).await
        }?;
        // A prune that removed nothing returns the first index as is.
        inner.persist_first_index(new_first).await?;
        Ok(new_first)
    }

    /// A prune through the last record (as far as the leases allow):
    /// pauses admission and takes the writer mutex, because it resets the
    /// next index, then decides under them (`prune_whole_locked`). Both are
    /// released when it returns.
    async fn prune_whole(&self, lifecycle: &futures::lock::MutexGuard<'_, ()>, k: u64) -> Result<u64> {
        let inner = &self.inner;
        // No index may be handed out while the prune resets them:
        // appenders wait behind the writer mutex. Pausing before
        // taking it also keeps appenders from starving the prune.
        let _paused = PauseAdmission::new(inner).await;
        let mut w = inner.writer.lock().await;
        self.prune_whole_locked(&mut w, lifecycle, k).await
    }

    /// With admission paused and the writer `w` held: finishes what is
    /// admitted and writes the write buffer, then empties the log through
    /// `k` (`Inner::prune_all`, the writer forgets its active segment) if
    /// `k` is still at or past the last record, else prunes sealed segments
    /// only, since appends may have landed meanwhile.
    async fn prune_whole_locked(
        &self,
        w: &mut Writer<F>,
        lifecycle: &futures::lock::MutexGuard<'_, ()>,
        k: u64,
    ) -> Result<u64> {
        let inner = &self.inner;
        // A group commit may have been dropped since the resume.
        w.resume(inner, lifecycle).await?;
        while !inner.state().queue.is_empty() {
            w.run_group(inner).await;
        }
        // Lifecycle operations start with nothing in the write
        // buffer: their crash arguments need no buffered case.
        w.flush(inner).await?;
        let (first, readable) = {
            let st = inner.state();
            st.check_usable()?;
            (st.frontier.first(), st.frontier.readable())
        };
        // Appends may have landed since: only a prune through the
        // last record empties the log; records above k always stay.
        if readable > first && k < readable - 1 {
            return inner.prune_sealed(k, true).await;
        }
        let r = inner.prune_all(k).await;
        if r.is_ok() {
            w.reset_active();
        }
        r
    }

    /// Moves an empty log to `next`: the next append gets index `next`, and
    /// that survives a restart (the meta file's low-water mark is made
    /// durable before this returns). For a Raft log that installed a
    /// snapshot through `next - 1`, or a log that must start where another
    /// ended. `next` equal to the next index only makes that durable.
    ///
    /// `InvalidArgument` if the log holds records (prune or truncate them
    /// first) or appends are in flight; `OutOfRange` for `next` below the
    /// next index (indices never move back) or `u64::MAX`.
    ///
    /// Cancelling: as [`Wal::prune_through`] past the end: done or not done,
    /// the next call rebuilds memory from the files.
    ///
    /// ```
    /// use std::path::Path;
    /// futures::executor::block_on(async {
    ///     let fs = simfs::SimFs::new(8);
    ///     let wal = wal::Wal::open(fs.clone(), Path::new("/log"), wal::Options::default()).await?;
    ///     wal.reset_to(1000).await?;
    ///     drop(wal);
    ///     fs.crash(simfs::CrashKind::PowerLoss);
    ///     let wal = wal::Wal::open(fs, Path::new("/log"), wal::Options::default()).await?;
    ///     assert_eq!(wal.append(b"after the snapshot".to_vec()).await?, 1000);
    ///     wal.close().await
    /// })
    /// .unwrap();
    /// ```
    pub async fn reset_to(&self, next: u64) -> Result<()> {
        let inner = &self.inner;
        inner.check_writable("reset_to")?;
        let lifecycle = inner.lifecycle.lock().await;
        // No index may be handed out while the log moves.
        let _paused = PauseAdmission::new(inner).await;
        let mut w = inner.writer.lock().await;
        w.resume(inner, &lifecycle).await?;
        while !inner.state().queue.is_empty() {
            w.run_group(inner).await;
        }
        w.flush(inner).await?;
        {
            let st = inner.state();
            st.check_usable()?;
            let (first, readable) = (st.frontier.first(), st.frontier.readable());
            if first != readable {
                return Err(Error::InvalidArgument(format!(
                    "reset_to({next}): the log holds records [{first}, {readable}); prune or truncate them first"
                )));
            }
            if next < readable || next == u64::MAX {
                return Err(Error::OutOfRange {
                    index: next,
                    first,
                    next: readable,
                });
            }
        }
        let critical = Critical::enter(inner, "prune");
        // Emptying through `next - 1` is a full prune of an empty log: the
        // low-water mark first, durably, then any segment (all below it).
        let result = match next.checked_sub(1) {
            Some(k) => inner.prune_all(k).await.map(|_| ()),
            None => inner.persist_first_index(0).await,
        };
        critical.finish();
        if result.is_ok() && next > 0 {
            w.reset_active();
        }
        result
    }

    /// Removes every record above `k`, durably: once this returns `Ok`, they
    /// never reappear. Appends continue at `k + 1` (or at the next index if
    /// `k` is at or past the last record: then nothing changes). `k` below
    /// `first - 1` is `OutOfRange`; [`Wal::truncate_from`] expresses "remove
    /// everything" when the first index is 0.
    ///
    /// Cancelling: as [`Wal::truncate_from`] with `from = k + 1`.
    pub async fn truncate_after(&self, k: u64) -> Result<()> {
        let from = k
            .checked_add(1)
            .ok_or_else(|| Error::InvalidArgument("truncate_after(u64::MAX)".into()))?;
        self.truncate_from(from).await
    }

    /// Removes every record at or above `from` (Raft's "conflict at entry
    /// `from`"; `from == first_index()` empties the log). `from` below the
    /// first index is `OutOfRange`; at or past the next index it is a no-op
    /// (`Ok`, nothing removed). Segments above the cut go newest first, each removal
    /// durable, then the segment holding `from - 1` is cut and fsynced: at
    /// every crash point what remains is a contiguous prefix.
    ///
    /// Cancelling: dropping the future may leave the truncation done, partly
    /// done (records are removed newest first, so what stays is a prefix) or
    /// not done; the next call rebuilds memory from the files. Records below
    /// `from` are never affected.
    pub async fn truncate_from(&self, from: u64) -> Result<()> {
        let inner = &self.inner;
        inner.check_writable("truncate")?;
        let lifecycle = inner.lifecycle.lock().await;
        // No index may be handed out while the truncation resets them;
        // pausing before taking the writer mutex also keeps appenders from
        // starving the truncation.
        let _paused = PauseAdmission::new(inner).await;
        let mut w = inner.writer.lock().await;
        w.resume(inner, &lifecycle).await?;
        while !inner.state().queue.is_empty() {
            w.run_group(inner).await;
        }
        {
            let mut st = inner.state();
            st.check_usable()?;
            if from < st.frontier.first() {
                return Err(Error::OutOfRange {
                    index: from,
                    first: st.frontier.first(),
                    next: st.frontier.readable(),
                });
            }
            // A truncation fixes where the log continues: no snapshot jump.
            st.reseatable = false;
            if from >= st.frontier.readable() {
                // Nothing at or above `from`: Raft's "truncate past my end".
                return Ok(());
            }
        }
        // The cut reads and shortens the file: every kept record must be in
        // it, and no buffered frame may be written after the cut.
        w.flush(inner).await?;
        let critical = Critical::enter(inner, "truncate");
        let result = inner.truncate_from(from).await;
        critical.finish();
        match result {
            Ok(holder) => w.after_truncate(holder),
            // Memory already forgot the doomed records: disk and memory
            // may disagree now, so stop (reopen recovers a consistent log).
            Err(e) => return Err(inner.stop(e)),
        }
        inner.state().stats.truncations += 1;
        // The truncation is done and durable; this only prepares the next
        // append's segment (its failure is reported, the cut stays).
        let critical = Critical::enter(inner, "rotation after truncate");
        let settled = w.settle_after_truncate(inner).await;
        critical.finish();
        settled
    }

    /// What [`Wal::compact`] would merge now: a dry run. `Display` prints it.
    ///
    /// Cancelling is harmless: it only reads.
    pub async fn compaction_plan(&self, opts: CompactionOptions) -> Result<CompactionPlan> {
        opts.validate()?;
        self.inner.state().check_usable()?;
        Ok(CompactionPlan::build(&self.inner.segment_infos().await, opts))
    }

    /// Merges runs of small adjacent sealed segments into one segment each
    /// and returns what it did. Crash-safe: each output is durable under its
    /// final name before its inputs are removed, and open reconciles an
    /// interrupted run, keeping exactly one copy of every index. Appends run
    /// meanwhile.
    ///
    /// Cancelling: dropping the future marks the WAL interrupted if a merge was
    /// under way; the next call rebuilds memory from the files, where each
    /// merge either happened (its output in place; inputs left behind are
    /// removed) or did not (its temporary output is removed). Records are
    /// never affected.
    pub async fn compact(&self, opts: CompactionOptions) -> Result<CompactionPlan> {
        opts.validate()?;
        let inner = &self.inner;
        inner.check_writable("compact")?;
        let lifecycle = inner.lifecycle.lock().await;
        inner.resume_under(&lifecycle).await?;
        inner.state().check_usable()?;
        // Compaction reads sealed segments only, which never hold buffered
        // records; still, lifecycle operations start with nothing buffered,
        // so that their crash arguments need no buffered case. (Without the
        // buffer, compaction keeps out of the appenders' way: no writer lock.)
        if inner.buffered() {
            inner.writer.lock().await.flush(inner).await?;
        }
        let plan = CompactionPlan::build(&inner.segment_infos().await, opts);
        let critical = Critical::enter(inner, "compaction");
        for run in &plan.runs {
            if let Err(e) = inner.compact_run(run).await {
                critical.finish();
                return Err(e);
            }
        }
        critical.finish();
        Ok(plan)
    }

    /// The segments, in log order, with first and last index, size and state
    /// (of the files: records still in the write buffer are not counted).
    ///
    /// Cancelling is harmless: it only reads.
    pub async fn segments(&self) -> Vec<SegmentInfo> {
        self.inner.segment_infos().await
    }

    /// Bytes of all segment files.
    ///
    /// Cancelling is harmless: it only reads.
    pub async fn bytes_on_disk(&self) -> u64 {
        self.inner.segment_infos().await.iter().map(|s| s.bytes).sum()
    }

    /// Verifies the open log end to end: reads every segment it holds
    /// (each frame, in order, in whole batches; the active segment up to
    /// its last committed frame), checks every header against its name and
    /// this log's id, the chain of index ranges, and the meta file on disk
    /// against what the log last wrote. Changes nothing and reports every
    /// problem ([`crate::VerifyReport`]); works on a read-only or stopped
    /// log. For a log that is not open (and for its clean-shutdown marker,
    /// stray files and leftovers), use [`crate::verify_dir`].
    ///
    /// Damage found in a sealed segment becomes that segment's verdict:
    /// reads and iterators at or above its first damaged index then fail
    /// with the same `Corruption`, as after a reopen (one verdict per byte,
    /// FORMAT.md §9).
    ///
    /// Holds off prune, truncation and compaction while it runs; appends
    /// go on (records appended meanwhile are not read). Cancelling it
    /// (dropping the future) lets them run again; nothing was changed.
    ///
    /// ```
    /// use std::path::Path;
    /// futures::executor::block_on(async {
    ///     let wal = wal::Wal::open(simfs::SimFs::new(1), Path::new("/log"), wal::Options::default()).await?;
    ///     wal.append_batch(vec![b"a".to_vec(), b"b".to_vec()]).await?;
    ///     let report = wal.verify().await?;
    ///     assert!(report.is_intact(), "{report}");
    ///     assert_eq!(report.records, 2);
    ///     Ok::<_, wal::Error>(())
    /// }).unwrap();
    /// ```
    pub async fn verify(&self) -> Result<crate::verify::VerifyReport> {
        let inner = &self.inner;
        let _lifecycle = inner.lifecycle.lock().await;
        // Read under the meta lock, so the file and its copy in memory must
        // agree; released before the segments are read (appends may need it).
        let (meta, on_disk) = inner.meta.read_back(&*inner.fs, &inner.dir).await;
        let segments: Vec<Arc<Segment<F>>> = inner.state().segments.to_vec();
        let mut entries = Vec::with_capacity(segments.len());
        for seg in &segments {
            let (path, sealed, last, end) = {
                let m = seg.meta();
                (m.path.clone(), m.sealed, m.last_index, m.end_offset)
            };
            // On failure the verifier opens it again by path and reports it.
            let file = seg.file(&inner.fs).await.ok();
            entries.push(crate::verify::open_entry(
                seg.id,
                seg.first_index,
                path,
                sealed,
                last,
                end,
                file,
            ));
        }
        let (report, damage) =
            crate::verify::verify_open(&*inner.fs, &inner.dir, inner.log_id, &meta, on_disk, &entries).await;
        // One verdict: what verify found is what reads now answer, as a
        // reopen would decide (records of a sealed segment from its first
        // damage on are not served).
        let mut found = false;
        for (seg, d) in segments.iter().zip(damage) {
            if let Some((end, e)) = d.filter(|_| seg.meta().sealed) {
                seg.record_damage(end, e);
                found = true;
            }
        }
        if found {
            inner.invalidate_readers();
        }
        Ok(report)
    }

    /// How many iterators hold a lease (live iterators).
    pub fn live_iterators(&self) -> usize {
        self.inner.leases().len()
    }
}

/// Returns `Pending` once (after waking itself), so that other tasks of the
/// executor run between an appender's attempts to get past a full queue.
fn yield_now() -> impl std::future::Future<Output = ()> {
    let mut yielded = false;
    futures::future::poll_fn(move |cx| {
        if yielded {
            std::task::Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
}

/// Syncs one `wait_durable` call runs at most: each covers everything
/// admitted when it started, so a second is needed only when the index was
/// handed out again after a failed group; more would take a failure on
/// every round, which the `OutOfRange` check ends first.
const WAIT_DURABLE_SYNCS_MAX: u32 = 8;

/// The error for a directory lock that could not be taken.
fn lock_error(dir: &Path, e: std::io::Error) -> Error {
    if e.kind() == std::io::ErrorKind::WouldBlock {
        Error::Locked {
            path: dir.to_path_buf(),
        }
    } else {
        Error::io("lock", dir, 0, e)
    }
}

/// One append on the group path, counted in `State::live_appenders` while
/// its future lives (returned or dropped, it goes and wakes a waiting
/// `Batched` leader, which may then have every live appender in its group).
struct LiveAppender<'a, F: Fs> {
    inner: &'a Inner<F>,
}

impl<'a, F: Fs> LiveAppender<'a, F> {
    /// Counts the append, under `Batched` only: no other policy waits, and
    /// the append path takes no lock for it then.
    fn enter(inner: &'a Inner<F>) -> Option<Self> {
        if !matches!(inner.opts.sync_policy, SyncPolicy::Batched { .. }) {
            return None;
        }
        inner.state().live_appenders += 1;
        Some(LiveAppender { inner })
    }
}

impl<F: Fs> Drop for LiveAppender<'_, F> {
    fn drop(&mut self) {
        let leader = {
            let mut st = self.inner.state();
            debug_assert!(st.live_appenders > 0);
            st.live_appenders = st.live_appenders.saturating_sub(1);
            st.leader_waker.take()
        };
        if let Some(w) = leader {
            w.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_while_the_state_is_locked_stops_the_wal() {
        futures::executor::block_on(async {
            let fs = simfs::SimFs::new(1);
            let wal = Wal::open(fs, Path::new("/log"), Options::default())
                .await
                .expect("open");
            wal.append(b"a".to_vec()).await.expect("append");
            let inner = wal.inner.clone();
            let panicked = std::thread::spawn(move || {
                let _st = inner.state.lock();
                panic!("planted: a panic while the state is locked");
            })
            .join();
            assert!(panicked.is_err());
            let e = wal.append(b"b".to_vec()).await.expect_err("a poisoned WAL must stop");
            assert!(e.is_stopped(), "{e}");
            assert!(e.to_string().contains("panicked"), "{e}");
            assert!(matches!(wal.sync().await, Err(ref e) if e.is_stopped()));
        });
    }
}
