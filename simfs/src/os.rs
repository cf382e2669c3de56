//! [`OsFs`]: the real Linux filesystem behind the [`Fs`] and [`File`] traits.
//!
//! Every call maps to one or two system calls through `std` (and `rustix` for
//! `fallocate`): positional I/O with `pread`/`pwrite`, [`File::sync_data`] is
//! `fdatasync`, [`File::sync_all`] is `fsync`, [`Fs::sync_dir`] opens the
//! directory read-only and `fsync`s it, [`Fs::lock_dir`] is a non-blocking
//! exclusive `flock` on the directory.
//!
//! # Which thread runs a call
//!
//! The traits are `async` so that the same engine runs in simulation, but the
//! kernel calls behind them are blocking. `OsFs` does not depend on any async
//! runtime, so it works under tokio, madsim, `futures::executor::block_on` or
//! anything else:
//!
//! * Reads, writes, `set_len`, `allocate`, `len`, `open`, `rename`,
//!   `remove_file`, `read_dir`, `metadata`: run inline on the calling thread.
//!   They are served by the page cache and take microseconds.
//! * `sync_data`, `sync_all`, `sync_dir`: wait for the device, often for
//!   milliseconds. With [`OsFs::new`] they are sent to one I/O thread owned by
//!   the `OsFs` (started at the first sync, stopped when the last clone of the
//!   `OsFs` and the last file opened through it are dropped) and the calling
//!   task awaits the reply, so an executor thread is never parked on a flush.
//!   The cost is one thread handoff per sync, about 10-30 µs, small next to
//!   the flush itself. Syncs from all tasks are serialized on that thread,
//!   which is what a disk does anyway; use several `OsFs` values (one thread
//!   each) to issue flushes in parallel.
//! * With [`OsFs::inline`] syncs also run on the calling thread: the lowest
//!   latency, for callers that already run on a dedicated blocking thread (or
//!   that accept blocking their executor during a flush).
//! * Inside a madsim simulation (`--cfg madsim` with the `madsim` feature),
//!   where system threads are forbidden, syncs run inline.
//!
//! # Differences from the raw system calls
//!
//! Opening a directory fails with `IsADirectory` (Linux would open it
//! read-only), [`Metadata::len`] of a directory is 0, and `sync_dir` or
//! `lock_dir` of a file fails with `NotADirectory`. Other errors are the
//! kernel's, with their kind (`NotFound`, `AlreadyExists`, `StorageFull`,
//! `WouldBlock`, ...) and the operation and path added to the message (so
//! `raw_os_error()` is `None`; match on the kind). As in the kernel, reading
//! through a handle not opened for reading, or writing or allocating through
//! one not opened for writing, fails with `EBADF` (an uncategorized kind), and
//! `set_len` on a handle not opened for writing with `EINVAL`
//! (`InvalidInput`).

use std::fmt;
use std::fs as stdfs;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};

use async_trait::async_trait;
use futures::channel::oneshot;

use crate::fs::{DirEntry, File, Fs, Metadata, OpenOptions};

/// A unit of work for the I/O thread.
type Job = Box<dyn FnOnce() + Send + 'static>;

/// Size of the zero buffer used when `fallocate` is not supported.
const ZERO_CHUNK: usize = 64 * 1024;

/// The real filesystem.
///
/// Reads, writes, `set_len`, `allocate`, `open`, `rename`, `remove_file`,
/// `read_dir` and `metadata` run inline on the calling thread (page-cache
/// speed). `sync_data`, `sync_all` and `sync_dir`, which wait for the device,
/// run on an I/O thread owned by the `OsFs` ([`OsFs::new`], the default): the
/// calling task awaits a reply, so no executor thread is parked on a flush, at
/// the cost of one thread handoff (about 10-30 µs) per sync. The thread starts
/// at the first sync and exits when this value, its clones and every file
/// opened through them are dropped; it serializes the syncs of all of them.
/// [`OsFs::inline`] runs syncs on the calling thread instead. This works under
/// any executor (tokio, madsim, `futures::executor::block_on`); inside a
/// madsim simulation, where system threads are forbidden, syncs always run
/// inline.
///
/// Cheap to clone: clones share the I/O thread. [`OsFs::default`] is
/// [`OsFs::new`].
///
/// ```
/// use simfs::{File, Fs, OpenOptions, OsFs};
///
/// let dir = tempfile::tempdir()?;
/// futures::executor::block_on(async {
///     let fs = OsFs::new();
///     let path = dir.path().join("data");
///     let f = fs.open(&path, OpenOptions::new().read(true).write(true).create(true)).await?;
///     f.write_all_at(b"hello", 0).await?;
///     f.sync_data().await?;      // fdatasync, on the I/O thread
///     fs.sync_dir(dir.path()).await?; // makes the name "data" durable
///     let mut buf = [0u8; 5];
///     f.read_exact_at(&mut buf, 0).await?;
///     assert_eq!(&buf, b"hello");
///     Ok::<_, std::io::Error>(())
/// })?;
/// # Ok::<_, std::io::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct OsFs {
    inner: Arc<Inner>,
}

/// State shared by an [`OsFs`], its clones and its files. Dropping the last
/// reference drops the I/O thread's sender, which stops the thread.
#[derive(Debug, Default)]
struct Inner {
    mode: SyncMode,
    /// A directory sync error whose caller stopped waiting (see
    /// `OsFile::unheard_error`); the next `sync_dir` returns it.
    unheard_dir_error: Arc<Mutex<Option<io::Error>>>,
}

/// Where syncs run.
#[derive(Debug)]
enum SyncMode {
    /// On this I/O thread (spawned at the first sync).
    Thread(ThreadSlot),
    /// On the calling thread.
    Inline,
}

impl Default for SyncMode {
    fn default() -> Self {
        SyncMode::Thread(ThreadSlot::default())
    }
}

impl OsFs {
    /// The real filesystem, with syncs run on a dedicated I/O thread so that
    /// they never block the caller's executor thread (one thread handoff,
    /// about 10-30 µs, per sync). The thread is spawned at the first sync and
    /// exits when this `OsFs`, its clones and every file opened through them
    /// are dropped.
    ///
    /// ```
    /// use simfs::{Fs, OsFs};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let fs = OsFs::new();
    /// futures::executor::block_on(fs.sync_dir(dir.path()))?;
    /// # Ok::<_, std::io::Error>(())
    /// ```
    pub fn new() -> OsFs {
        OsFs::default()
    }

    /// The real filesystem, with syncs run inline on the calling thread.
    ///
    /// This saves the thread handoff of [`OsFs::new`] (about 10-30 µs per
    /// sync) and the I/O thread itself, but a sync then blocks the calling
    /// thread for as long as the device takes to flush (often milliseconds),
    /// and with it every task of that executor thread. Use it from a
    /// dedicated blocking thread, from synchronous code driven by `block_on`,
    /// or when the lowest sync latency matters more than the executor's
    /// responsiveness.
    ///
    /// ```
    /// use simfs::{File, Fs, OpenOptions, OsFs};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let fs = OsFs::inline();
    /// futures::executor::block_on(async {
    ///     let f = fs.open(&dir.path().join("x"), OpenOptions::new().write(true).create(true)).await?;
    ///     f.write_all_at(b"x", 0).await?;
    ///     f.sync_all().await // fsync on this thread
    /// })?;
    /// # Ok::<_, std::io::Error>(())
    /// ```
    pub fn inline() -> OsFs {
        OsFs {
            inner: Arc::new(Inner {
                mode: SyncMode::Inline,
                unheard_dir_error: Arc::default(),
            }),
        }
    }

    /// Whether syncs run inline on the calling thread ([`OsFs::inline`])
    /// rather than on the I/O thread ([`OsFs::new`]).
    ///
    /// ```
    /// assert!(simfs::OsFs::inline().is_inline());
    /// assert!(!simfs::OsFs::new().is_inline());
    /// ```
    pub fn is_inline(&self) -> bool {
        matches!(self.inner.mode, SyncMode::Inline)
    }
}

impl Inner {
    /// Runs `job` (a blocking sync) where the mode says and returns its result.
    async fn run_sync<F>(&self, job: F, unheard: Option<Arc<Mutex<Option<io::Error>>>>) -> io::Result<()>
    where
        F: FnOnce() -> io::Result<()> + Send + 'static,
    {
        if let Some(e) = unheard
            .as_ref()
            .and_then(|u| u.lock().unwrap_or_else(|p| p.into_inner()).take())
        {
            return Err(e);
        }
        match &self.mode {
            SyncMode::Thread(slot) if !in_madsim_simulation() => {
                let (reply, answer) = oneshot::channel();
                slot.submit(Box::new(move || {
                    // The receiver is gone if the caller stopped waiting. A
                    // success is then harmless; an error must not be lost.
                    if let Err(Err(e)) = reply.send(job()) {
                        if let Some(u) = unheard {
                            *u.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                        }
                    }
                }))?;
                answer
                    .await
                    .map_err(|_| io::Error::other("simfs: the I/O thread stopped before answering a sync"))?
            }
            _ => job(),
        }
    }
}

/// Whether the caller runs inside a madsim simulation, which forbids system
/// threads (and where a blocking sync cannot stall simulated time anyway).
fn in_madsim_simulation() -> bool {
    #[cfg(all(feature = "madsim", madsim))]
    {
        madsim::runtime::Handle::try_current().is_ok()
    }
    #[cfg(not(all(feature = "madsim", madsim)))]
    {
        false
    }
}

/// A lazily spawned I/O thread: the sending end of its job queue.
#[derive(Debug, Default)]
struct ThreadSlot {
    sender: Mutex<Option<mpsc::Sender<Job>>>,
}

impl ThreadSlot {
    /// Sends `job` to the thread, spawning the thread if needed.
    fn submit(&self, job: Job) -> io::Result<()> {
        let mut slot = self.sender.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let sender = match slot.as_ref() {
            Some(s) => s.clone(),
            None => {
                let (s, _detached) = spawn_io_thread()?;
                *slot = Some(s.clone());
                s
            }
        };
        drop(slot);
        sender.send(job).map_err(|_| {
            // The thread died (only if a job panicked): forget it so that the
            // next sync spawns a new one.
            let mut slot = self.sender.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            *slot = None;
            io::Error::other("simfs: the I/O thread is gone")
        })
    }
}

/// Spawns an I/O thread that runs jobs in order until every sender is dropped.
fn spawn_io_thread() -> io::Result<(mpsc::Sender<Job>, std::thread::JoinHandle<()>)> {
    let (tx, rx) = mpsc::channel::<Job>();
    let handle = std::thread::Builder::new()
        .name("simfs-os-sync".into())
        .spawn(move || {
            while let Ok(job) = rx.recv() {
                job();
            }
        })?;
    Ok((tx, handle))
}

/// Opens a directory read-only, failing with `NotADirectory` for anything
/// else (Linux would happily open and fsync or flock a regular file).
fn open_dir(op: &str, path: &Path) -> io::Result<stdfs::File> {
    let dir = stdfs::File::open(path).map_err(|e| ctx(op, path, e))?;
    if !dir.metadata().map_err(|e| ctx(op, path, e))?.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            format!("{op} {}: not a directory", path.display()),
        ));
    }
    Ok(dir)
}

/// Adds the operation and path to an error, keeping its kind.
fn ctx(op: &str, path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{op} {}: {e}", path.display()))
}

#[async_trait]
impl Fs for OsFs {
    type File = OsFile;
    type DirLock = OsDirLock;

    fn unique_id(&self) -> u128 {
        use std::hash::{BuildHasher, Hasher};
        use std::sync::atomic::{AtomicU64, Ordering};
        static CALLS: AtomicU64 = AtomicU64::new(0);
        let n = CALLS.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        // Each `RandomState` is keyed from the OS's randomness (per thread,
        // then advanced), so two halves from two states are independent.
        let half = |salt: u64| {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(salt);
            h.write_u64(n);
            h.write_u128(nanos);
            h.write_u32(std::process::id());
            h.finish()
        };
        ((u128::from(half(1)) << 64) | u128::from(half(2))).max(1)
    }

    async fn open(&self, path: &Path, options: OpenOptions) -> io::Result<OsFile> {
        let file = stdfs::OpenOptions::new()
            .read(options.read)
            .write(options.write)
            .create(options.create)
            .create_new(options.create_new)
            .truncate(options.truncate)
            .open(path)
            .map_err(|e| ctx("open", path, e))?;
        // Linux opens a directory read-only; an `OsFile` is always a file.
        if file.metadata().map_err(|e| ctx("open", path, e))?.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                format!("open {}: is a directory", path.display()),
            ));
        }
        Ok(OsFile {
            file: Arc::new(file),
            path: path.to_path_buf(),
            writable: options.write,
            fs: Arc::clone(&self.inner),
            unheard_error: Arc::default(),
        })
    }

    async fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        stdfs::create_dir_all(path).map_err(|e| ctx("create_dir_all", path, e))
    }

    async fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        let mut entries = Vec::new();
        for entry in stdfs::read_dir(path).map_err(|e| ctx("read_dir", path, e))? {
            let entry = entry.map_err(|e| ctx("read_dir", path, e))?;
            let is_dir = entry
                .file_type()
                .map_err(|e| ctx("read_dir", &entry.path(), e))?
                .is_dir();
            entries.push(DirEntry {
                name: entry.file_name().to_string_lossy().into_owned(),
                is_dir,
            });
        }
        entries.sort();
        Ok(entries)
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        stdfs::rename(from, to)
            .map_err(|e| io::Error::new(e.kind(), format!("rename {} -> {}: {e}", from.display(), to.display())))
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        stdfs::remove_file(path).map_err(|e| ctx("remove_file", path, e))
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let dir = open_dir("sync_dir", path)?;
        let owned = path.to_path_buf();
        self.inner
            .run_sync(
                move || dir.sync_all().map_err(|e| ctx("sync_dir", &owned, e)),
                Some(self.inner.unheard_dir_error.clone()),
            )
            .await
    }

    async fn lock_dir(&self, path: &Path) -> io::Result<OsDirLock> {
        flock_dir(path, rustix::fs::FlockOperation::NonBlockingLockExclusive)
    }

    async fn lock_dir_shared(&self, path: &Path) -> io::Result<OsDirLock> {
        flock_dir(path, rustix::fs::FlockOperation::NonBlockingLockShared)
    }

    async fn metadata(&self, path: &Path) -> io::Result<Metadata> {
        let m = stdfs::metadata(path).map_err(|e| ctx("metadata", path, e))?;
        Ok(Metadata {
            len: if m.is_dir() { 0 } else { m.len() },
            is_dir: m.is_dir(),
        })
    }
}

/// Takes a `flock` on a directory. `flock` directly rather than
/// `std::fs::File::try_lock`, which is the same system call but needs Rust
/// 1.89 (the crate's MSRV is lower).
fn flock_dir(path: &Path, op: rustix::fs::FlockOperation) -> io::Result<OsDirLock> {
    let dir = open_dir("lock_dir", path)?;
    match rustix::fs::flock(&dir, op) {
        Ok(()) => Ok(OsDirLock {
            _dir: dir,
            path: path.to_path_buf(),
        }),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            format!("lock_dir {}: already locked", path.display()),
        )),
        Err(e) => Err(ctx("lock_dir", path, io::Error::from(e))),
    }
}

/// An open file of [`OsFs`].
///
/// Holds the descriptor in an `Arc` so that a sync running on the I/O thread
/// keeps it open, and a reference to the `OsFs`'s shared state (an open file
/// keeps the I/O thread alive). Dropping it closes the file, which is not a
/// sync.
///
/// ```
/// use simfs::{File, Fs, OpenOptions, OsFs};
///
/// let dir = tempfile::tempdir()?;
/// futures::executor::block_on(async {
///     let fs = OsFs::new();
///     let f = fs.open(&dir.path().join("f"), OpenOptions::new().read(true).write(true).create(true)).await?;
///     assert_eq!(f.write_at(b"abc", 2).await?, 3);
///     assert_eq!(f.len().await?, 5);
///     let mut buf = [9u8; 8];
///     assert_eq!(f.read_at(&mut buf, 0).await?, 5); // the gap reads as zeros
///     assert_eq!(&buf[..5], b"\0\0abc");
///     Ok::<_, std::io::Error>(())
/// })?;
/// # Ok::<_, std::io::Error>(())
/// ```
pub struct OsFile {
    file: Arc<stdfs::File>,
    path: PathBuf,
    writable: bool,
    fs: Arc<Inner>,
    /// A sync error nobody heard: its caller dropped the future while the
    /// I/O thread ran the sync. The kernel reports an fsync error once per
    /// descriptor, so without this the next sync would return Ok over lost
    /// data (fsyncgate). The next sync on this file returns it instead.
    unheard_error: Arc<Mutex<Option<io::Error>>>,
}

impl fmt::Debug for OsFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OsFile")
            .field("path", &self.path)
            .field("writable", &self.writable)
            .finish_non_exhaustive()
    }
}

impl OsFile {
    /// The path the file was opened at (it may have been renamed or removed
    /// since).
    ///
    /// ```
    /// use simfs::{Fs, OpenOptions, OsFs};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("f");
    /// let f = futures::executor::block_on(
    ///     OsFs::new().open(&path, OpenOptions::new().write(true).create(true)),
    /// )?;
    /// assert_eq!(f.path(), path);
    /// # Ok::<_, std::io::Error>(())
    /// ```
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Writes zeros over `from..to` of `file` (the `allocate` fallback).
fn zero_fill(file: &stdfs::File, from: u64, to: u64) -> io::Result<()> {
    let zeros = vec![0u8; ZERO_CHUNK];
    let mut pos = from;
    while pos < to {
        let n = usize::try_from(to - pos).map_or(ZERO_CHUNK, |left| left.min(ZERO_CHUNK));
        file.write_all_at(&zeros[..n], pos)?;
        pos += n as u64;
    }
    Ok(())
}

/// Whether an `fallocate` error means "not supported here".
fn unsupported(e: rustix::io::Errno) -> bool {
    e == rustix::io::Errno::OPNOTSUPP || e == rustix::io::Errno::NOSYS
}

#[async_trait]
impl File for OsFile {
    async fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        loop {
            match self.file.read_at(buf, offset) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => return r.map_err(|e| ctx("read", &self.path, e)),
            }
        }
    }

    async fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        loop {
            match self.file.write_at(buf, offset) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => return r.map_err(|e| ctx("write", &self.path, e)),
            }
        }
    }

    async fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len).map_err(|e| ctx("set_len", &self.path, e))
    }

    async fn allocate(&self, len: u64) -> io::Result<()> {
        if !self.writable {
            // What fallocate says, even when there is nothing to allocate.
            return Err(ctx("allocate", &self.path, rustix::io::Errno::BADF.into()));
        }
        let current = self.len().await?;
        if len <= current {
            return Ok(());
        }
        match rustix::fs::fallocate(&*self.file, rustix::fs::FallocateFlags::empty(), 0, len) {
            Ok(()) => Ok(()),
            Err(e) if unsupported(e) => zero_fill(&self.file, current, len),
            Err(e) => Err(io::Error::from(e)),
        }
        .map_err(|e| ctx("allocate", &self.path, e))
    }

    async fn sync_data(&self) -> io::Result<()> {
        let file = Arc::clone(&self.file);
        let path = self.path.clone();
        self.fs
            .run_sync(
                move || file.sync_data().map_err(|e| ctx("sync_data", &path, e)),
                Some(self.unheard_error.clone()),
            )
            .await
    }

    async fn sync_all(&self) -> io::Result<()> {
        let file = Arc::clone(&self.file);
        let path = self.path.clone();
        self.fs
            .run_sync(
                move || file.sync_all().map_err(|e| ctx("sync_all", &path, e)),
                Some(self.unheard_error.clone()),
            )
            .await
    }

    async fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata().map_err(|e| ctx("len", &self.path, e))?.len())
    }
}

/// A held exclusive lock on a directory of [`OsFs`]: an open descriptor of
/// the directory with a `flock(LOCK_EX)` on it. Dropping it closes the
/// descriptor, which releases the lock; so does the death of the process.
///
/// The lock belongs to the open file description, so a second
/// [`Fs::lock_dir`] of the same directory fails with `WouldBlock` even from
/// the same process.
///
/// ```
/// use simfs::{Fs, OsFs};
///
/// let dir = tempfile::tempdir()?;
/// let fs = OsFs::new();
/// futures::executor::block_on(async {
///     let lock = fs.lock_dir(dir.path()).await?;
///     let again = fs.lock_dir(dir.path()).await.unwrap_err();
///     assert_eq!(again.kind(), std::io::ErrorKind::WouldBlock);
///     drop(lock);
///     fs.lock_dir(dir.path()).await.map(drop)
/// })?;
/// # Ok::<_, std::io::Error>(())
/// ```
pub struct OsDirLock {
    _dir: stdfs::File,
    path: PathBuf,
}

impl OsDirLock {
    /// The directory this lock holds.
    ///
    /// ```
    /// use simfs::{Fs, OsFs};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let lock = futures::executor::block_on(OsFs::new().lock_dir(dir.path()))?;
    /// assert_eq!(lock.path(), dir.path());
    /// # Ok::<_, std::io::Error>(())
    /// ```
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl fmt::Debug for OsDirLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OsDirLock")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_thread_exits_when_senders_are_dropped() {
        let (tx, handle) = spawn_io_thread().unwrap();
        let (reply, answer) = oneshot::channel();
        tx.send(Box::new(move || {
            let _ = reply.send(7);
        }))
        .unwrap();
        assert_eq!(futures::executor::block_on(answer).unwrap(), 7);
        drop(tx);
        handle.join().unwrap();
    }

    #[test]
    fn first_sync_starts_the_thread() {
        let fs = OsFs::new();
        let dir = tempfile::tempdir().unwrap();
        futures::executor::block_on(fs.sync_dir(dir.path())).unwrap();
        let SyncMode::Thread(slot) = &fs.inner.mode else {
            panic!("OsFs::new is threaded");
        };
        assert!(slot.sender.lock().unwrap().is_some());
    }

    #[test]
    fn zero_fill_writes_zeros_across_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let file = stdfs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("z"))
            .unwrap();
        file.write_all_at(b"abc", 0).unwrap();
        let end = 3 + 2 * ZERO_CHUNK as u64 + 5;
        zero_fill(&file, 3, end).unwrap();
        assert_eq!(file.metadata().unwrap().len(), end);
        let mut buf = vec![1u8; end as usize];
        file.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf[..3], b"abc");
        assert!(buf[3..].iter().all(|&b| b == 0));
    }

    #[test]
    fn ctx_keeps_the_kind() {
        let e = ctx("open", Path::new("/x"), io::Error::from(io::ErrorKind::NotFound));
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(e.to_string().contains("/x"));
    }
}
