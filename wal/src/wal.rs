//! [`Wal`]: the public API and the shared state behind it.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::channel::oneshot;
use futures::future::{select, Either};
use simfs::Fs;
use tracing::{error, info};

use crate::error::{Error, Result};
use crate::group_commit::{Request, Writer};
use crate::iter::WalIter;
use crate::options::{Options, SyncPolicy};
use crate::recovery::{recover, RecoveryReport};
use crate::segment::Segment;

/// A snapshot of the WAL's counters, from [`Wal::stats`].
///
/// ```
/// let s = wal::Stats::default();
/// assert_eq!(s.records_per_fsync(), 0.0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stats {
    /// Append calls that succeeded (a batch counts once).
    pub appends: u64,
    /// Records appended.
    pub records: u64,
    /// Payload bytes appended.
    pub payload_bytes: u64,
    /// Bytes written to segment files (frames and headers).
    pub bytes_written: u64,
    /// Group-commit writes.
    pub writes: u64,
    /// `sync_data` calls on segment files.
    pub fsyncs: u64,
    /// Segments (sealed and active).
    pub segments: u64,
    /// Segment rotations.
    pub rotations: u64,
    /// Bytes of segment files on disk (known sizes).
    pub bytes_on_disk: u64,
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
    /// The index the next admitted append gets.
    pub admit_next: u64,
    /// Admitted appends not yet written, in index order.
    pub queue: VecDeque<Request>,
    pub queued_bytes: usize,
    /// Records below this index are acknowledged and readable.
    pub readable_next: u64,
    /// Records below this index are durable.
    pub durable_next: u64,
    /// The first index in the log.
    pub first_index: u64,
    /// Sealed segments then (maybe) the active one, in log order.
    pub segments: Vec<Arc<Segment<F>>>,
    pub stats: Stats,
}

impl<F: Fs> State<F> {
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
}

impl<F: Fs> Inner<F> {
    pub(crate) fn state(&self) -> MutexGuard<'_, State<F>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
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
        for r in queued {
            let _ = r.done.send(Err(stopped.clone()));
        }
        stopped
    }
}

/// A write-ahead log in one directory, generic over the filesystem.
///
/// All methods take `&self`: share a `Wal` between tasks with an `Arc`.
/// Concurrent appends are group-committed: they share one write and one
/// fsync, and their order on disk is the order in which they were admitted.
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
pub struct Wal<F: Fs> {
    inner: Arc<Inner<F>>,
}

impl<F: Fs> Wal<F> {
    /// Opens (creating if needed) the log in `dir`: takes the directory lock,
    /// then recovers (see [`RecoveryReport`]).
    ///
    /// Errors: `Locked` if another opener holds the directory,
    /// `Corruption` for damage that is not a torn tail, `Io` for filesystem
    /// failures (a read error fails the open and cuts nothing),
    /// `InvalidArgument` for bad options or a `dir` that is a file.
    pub async fn open(fs: F, dir: &Path, opts: Options) -> Result<Wal<F>> {
        opts.validate()?;
        let fs = Arc::new(fs);
        match fs.metadata(dir).await {
            Ok(m) if !m.is_dir => return Err(Error::InvalidArgument(format!("{} is not a directory", dir.display()))),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                fs.create_dir_all(dir)
                    .await
                    .map_err(|e| Error::io("create_dir", dir, 0, e))?;
                // Every directory created may be new: make each entry
                // durable, up to the root, or a power loss takes the log.
                for ancestor in dir.ancestors().skip(1).filter(|p| !p.as_os_str().is_empty()) {
                    fs.sync_dir(ancestor)
                        .await
                        .map_err(|e| Error::io("sync_dir", ancestor, 0, e))?;
                }
            }
            Err(e) => return Err(Error::io("metadata", dir, 0, e)),
        }
        let lock = fs.lock_dir(dir).await.map_err(|e| {
            if e.kind() == std::io::ErrorKind::WouldBlock {
                Error::Locked {
                    path: dir.to_path_buf(),
                }
            } else {
                Error::io("lock", dir, 0, e)
            }
        })?;
        let rec = recover(&*fs, dir, opts.recovery_mode, opts.first_index).await?;
        let writer = Writer::new(&rec, &rec.segments);
        let stats = Stats {
            segments: rec.segments.len() as u64,
            ..Stats::default()
        };
        info!(dir = %dir.display(), first = rec.first_index, next = rec.next_index, "opened");
        let state = State {
            stopped: None,
            closed: false,
            admit_next: rec.next_index,
            queue: VecDeque::new(),
            queued_bytes: 0,
            readable_next: rec.next_index,
            durable_next: rec.next_index,
            first_index: rec.first_index,
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
            }),
        })
    }

    /// Appends one record at the next index and returns that index. Under
    /// [`SyncPolicy::Always`] it returns once the record is durable.
    pub async fn append(&self, record: Vec<u8>) -> Result<u64> {
        self.submit(vec![record], false, None).await
    }

    /// Appends a record at `index`, which must be exactly the next index
    /// (`WrongIndex` otherwise; nothing is written). For Raft logs and block
    /// numbers known before writing.
    pub async fn append_at(&self, index: u64, record: Vec<u8>) -> Result<u64> {
        self.submit(vec![record], false, Some(index)).await
    }

    /// Appends records as one atomic batch at consecutive indices and returns
    /// the first. After a crash either all of them are in the log or none.
    pub async fn append_batch(&self, records: Vec<Vec<u8>>) -> Result<u64> {
        self.submit(records, true, None).await
    }

    /// [`Wal::append_batch`] at a caller-chosen first index, which must be the
    /// next index.
    pub async fn append_batch_at(&self, index: u64, records: Vec<Vec<u8>>) -> Result<u64> {
        self.submit(records, true, Some(index)).await
    }

    async fn submit(&self, records: Vec<Vec<u8>>, batch: bool, at: Option<u64>) -> Result<u64> {
        let inner = &self.inner;
        let bytes = check_records(&inner.opts, &records)?;
        let mut done = loop {
            match inner.admit(&records, bytes, at)? {
                Some((first, tx, rx)) => {
                    let mut st = inner.state();
                    st.queue.push_back(Request {
                        first_index: first,
                        records,
                        batch,
                        bytes,
                        done: tx,
                    });
                    st.queued_bytes += bytes;
                    break rx;
                }
                None => {
                    // Backpressure: the queue is full; help drain it.
                    let mut w = inner.writer.lock().await;
                    w.run_group(inner).await;
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
                    w.run_group(inner).await;
                }
            }
        }
    }

    /// Makes every record appended before this call durable: it fsyncs the
    /// active segment if it holds records written since the last fsync.
    /// Sealed segments and segment directory entries are always durable
    /// already (sealing and creating a segment fsync them). Under
    /// [`SyncPolicy::Always`] and [`SyncPolicy::Batched`] every acknowledged
    /// record is durable, so this only waits for the group in progress.
    pub async fn sync(&self) -> Result<()> {
        let mut w = self.inner.writer.lock().await;
        w.sync(&self.inner).await
    }

    /// Seals the active segment now (if it holds records); the next append
    /// starts a new segment.
    pub async fn rotate(&self) -> Result<()> {
        let mut w = self.inner.writer.lock().await;
        self.inner.state().check_usable()?;
        w.run_group(&self.inner).await;
        w.rotate(&self.inner).await
    }

    /// Reads the record at `index`. Only acknowledged records are readable.
    pub async fn read(&self, index: u64) -> Result<Vec<u8>> {
        let seg = self.inner.segment_for(index)?;
        seg.read(&self.inner.fs, index).await
    }

    /// An iterator over the records from `index` on, in order. It sees
    /// records appended after it was created, and runs alongside appends and
    /// rotation.
    pub fn iter_from(&self, index: u64) -> Result<WalIter<F>> {
        let st = self.inner.state();
        st.check_usable()?;
        if index < st.first_index || index > st.readable_next {
            return Err(Error::OutOfRange {
                index,
                first: st.first_index,
                next: st.readable_next,
            });
        }
        Ok(WalIter::new(self.inner.clone(), index))
    }

    /// The first index in the log.
    pub fn first_index(&self) -> u64 {
        self.inner.state().first_index
    }

    /// The index the next append gets, i.e. one past the last acknowledged
    /// record once no append is in flight.
    pub fn next_index(&self) -> u64 {
        self.inner.state().readable_next
    }

    /// The last readable index, `None` if the log is empty.
    pub fn last_index(&self) -> Option<u64> {
        let st = self.inner.state();
        (st.readable_next > st.first_index).then(|| st.readable_next - 1)
    }

    /// Records below this index are durable.
    pub fn durable_next(&self) -> u64 {
        self.inner.state().durable_next
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

    /// The segment files, in log order: `(file name, first index, last index
    /// (None if empty), sealed)`.
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
    pub async fn stats(&self) -> Stats {
        let (mut stats, segs) = {
            let st = self.inner.state();
            (st.stats, st.segments.clone())
        };
        stats.segments = segs.len() as u64;
        let mut bytes = 0;
        for s in segs {
            let (path, end) = {
                let m = s.meta();
                (m.path.clone(), m.end_offset)
            };
            bytes += if end != u64::MAX {
                end
            } else {
                self.inner.fs.metadata(&path).await.map(|m| m.len).unwrap_or(0)
            };
        }
        stats.bytes_on_disk = bytes;
        stats
    }

    /// Finishes every admitted append, makes everything durable and releases
    /// the directory lock. Later calls on iterators return `Closed`.
    pub async fn close(self) -> Result<()> {
        let inner = &self.inner;
        let mut w = inner.writer.lock().await;
        while !inner.state().queue.is_empty() {
            w.run_group(inner).await;
        }
        let result = w.sync(inner).await;
        inner.state().closed = true;
        drop(w);
        inner.lock.lock().unwrap_or_else(|e| e.into_inner()).take();
        info!(dir = %inner.dir.display(), "closed");
        result
    }
}

impl<F: Fs> Inner<F> {
    /// Admission: checks and assigns indices under the state lock, so index
    /// order equals queue order equals disk order. `None` if the queue is full.
    #[allow(clippy::type_complexity)]
    fn admit(
        &self,
        records: &[Vec<u8>],
        bytes: usize,
        at: Option<u64>,
    ) -> Result<Option<(u64, oneshot::Sender<Result<u64>>, oneshot::Receiver<Result<u64>>)>> {
        let mut st = self.state();
        st.check_usable()?;
        if let Some(index) = at {
            if index != st.admit_next {
                return Err(Error::WrongIndex {
                    expected: st.admit_next,
                    got: index,
                });
            }
        }
        let full = !st.queue.is_empty()
            && (st.queued_bytes + bytes > self.opts.max_queue_bytes || st.queue.len() >= self.opts.max_queue_appends);
        if full {
            return Ok(None);
        }
        let first = st.admit_next;
        st.admit_next = first
            .checked_add(records.len() as u64)
            .filter(|&n| n < u64::MAX)
            .ok_or_else(|| Error::InvalidArgument("the u64 index space is exhausted".into()))?;
        let (tx, rx) = oneshot::channel();
        Ok(Some((first, tx, rx)))
    }

    /// The segment holding readable `index`.
    pub(crate) fn segment_for(&self, index: u64) -> Result<Arc<Segment<F>>> {
        let st = self.state();
        st.check_usable()?;
        if index < st.first_index || index >= st.readable_next {
            return Err(Error::OutOfRange {
                index,
                first: st.first_index,
                next: st.readable_next,
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

    /// Whether the sync policy makes every write durable before acknowledging it.
    pub(crate) fn syncs_every_write(&self) -> bool {
        !matches!(self.opts.sync_policy, SyncPolicy::Manual)
    }
}

/// Checks record sizes and batch limits before anything is admitted.
fn check_records(opts: &Options, records: &[Vec<u8>]) -> Result<usize> {
    if records.is_empty() {
        return Err(Error::EmptyBatch);
    }
    let mut bytes = 0usize;
    for r in records {
        if r.len() > opts.max_record_bytes {
            return Err(Error::RecordTooLarge {
                len: r.len(),
                max: opts.max_record_bytes,
            });
        }
        bytes += r.len();
    }
    if records.len() > opts.max_batch_records || bytes > opts.max_write_bytes {
        return Err(Error::BatchTooLarge {
            records: records.len(),
            bytes,
            max_records: opts.max_batch_records,
            max_bytes: opts.max_write_bytes,
        });
    }
    Ok(bytes)
}
