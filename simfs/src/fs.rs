//! The [`Fs`] and [`File`] traits: every filesystem call a storage engine makes.
//!
//! A storage engine that is generic over [`Fs`] runs unchanged on a real disk
//! ([`crate::OsFs`]) and inside deterministic simulation ([`crate::SimFs`]). A call
//! that bypasses the trait cannot be simulated, so the trait covers directories,
//! directory fsync, listing and locking too.
//!
//! # Durability model
//!
//! Every method states what it makes durable, i.e. what survives a power loss. The
//! contract is pessimistic POSIX, the weakest that Linux filesystems give:
//!
//! * Data written with [`File::write_at`] lives in the page cache: reads see it, a
//!   process crash keeps it, a power loss may keep any subset of it (torn at the
//!   device's atomic write unit), or none.
//! * [`File::sync_data`] makes the file's data and the size needed to read it
//!   durable; [`File::sync_all`] also the rest of its metadata. Neither makes the
//!   file's *directory entry* durable.
//! * Creating, renaming or removing a directory entry is durable only after
//!   [`Fs::sync_dir`] of the parent directory (both parents for a rename across
//!   directories).
//! * Closing (dropping) a file is not a sync.
//! * After a failed sync the data it covered is **not** durable, even if a later
//!   sync succeeds: never retry a sync and trust it.
//!
//! Errors are [`std::io::Error`]s with the usual kinds: `NotFound`,
//! `AlreadyExists`, `StorageFull` (ENOSPC), `WouldBlock` (a held lock), and
//! `Other` for EIO.

use std::io;
use std::path::Path;

use async_trait::async_trait;

/// How to open a file with [`Fs::open`]. Mirrors [`std::fs::OpenOptions`]
/// without the append mode: all I/O is positional.
///
/// ```
/// use simfs::OpenOptions;
/// let opts = OpenOptions::new().read(true).write(true).create(true);
/// assert!(opts.write && opts.create && !opts.truncate);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct OpenOptions {
    /// Open for reading.
    pub read: bool,
    /// Open for writing.
    pub write: bool,
    /// Create the file if it does not exist (needs `write`).
    pub create: bool,
    /// Create the file, failing with `AlreadyExists` if it exists (needs `write`).
    pub create_new: bool,
    /// Truncate the file to length 0 on open (needs `write`).
    pub truncate: bool,
}

impl OpenOptions {
    /// All options off.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets [`OpenOptions::read`].
    pub fn read(mut self, on: bool) -> Self {
        self.read = on;
        self
    }
    /// Sets [`OpenOptions::write`].
    pub fn write(mut self, on: bool) -> Self {
        self.write = on;
        self
    }
    /// Sets [`OpenOptions::create`].
    pub fn create(mut self, on: bool) -> Self {
        self.create = on;
        self
    }
    /// Sets [`OpenOptions::create_new`].
    pub fn create_new(mut self, on: bool) -> Self {
        self.create_new = on;
        self
    }
    /// Sets [`OpenOptions::truncate`].
    pub fn truncate(mut self, on: bool) -> Self {
        self.truncate = on;
        self
    }
}

/// What [`Fs::metadata`] reports about a path.
///
/// ```
/// let m = simfs::Metadata { len: 3, is_dir: false };
/// assert_eq!(m.len, 3);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Metadata {
    /// Length in bytes (0 for a directory).
    pub len: u64,
    /// Whether the path is a directory.
    pub is_dir: bool,
}

/// One entry of [`Fs::read_dir`].
///
/// ```
/// let e = simfs::DirEntry { name: "a.log".into(), is_dir: false };
/// assert_eq!(e.name, "a.log");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DirEntry {
    /// The entry's file name (not a path). Names that are not UTF-8 are
    /// converted lossily on [`crate::OsFs`]; [`crate::SimFs`] only has UTF-8 names.
    pub name: String,
    /// Whether the entry is a directory.
    pub is_dir: bool,
}

/// A filesystem: the only way a storage engine touches storage.
///
/// Implementations: [`crate::OsFs`] (the real disk) and [`crate::SimFs`] (a
/// simulated disk with faults and crashes). All methods take `&self`; an `Fs` is
/// shared between tasks (wrap it in an `Arc`).
///
/// ```
/// use simfs::{Fs, File, OpenOptions, SimFs};
/// use std::path::Path;
///
/// futures::executor::block_on(async {
///     let fs = SimFs::new(42);
///     fs.create_dir_all(Path::new("/db")).await?;
///     let f = fs.open(Path::new("/db/a"), OpenOptions::new().write(true).create(true)).await?;
///     f.write_all_at(b"hello", 0).await?;
///     f.sync_data().await?;          // the bytes are durable...
///     fs.sync_dir(Path::new("/db")).await?; // ...and so is the name
///     assert_eq!(fs.read_dir(Path::new("/db")).await?[0].name, "a");
///     Ok::<_, std::io::Error>(())
/// }).unwrap();
/// ```
#[async_trait]
pub trait Fs: Send + Sync + 'static {
    /// An open file.
    type File: File;
    /// A lock on a directory (exclusive or shared), released when dropped.
    type DirLock: Send + Sync + 'static;

    /// Opens (and maybe creates) a file. A file created here has a directory
    /// entry that is durable only after [`Fs::sync_dir`] of its parent.
    /// `truncate` takes effect in the page cache; it is durable after a sync of
    /// the file.
    async fn open(&self, path: &Path, options: OpenOptions) -> io::Result<Self::File>;

    /// Creates a directory and its missing parents. Succeeds if it exists. The
    /// new entries are durable only after [`Fs::sync_dir`] of each parent.
    async fn create_dir_all(&self, path: &Path) -> io::Result<()>;

    /// Lists a directory, sorted by name, without `.` and `..`. Shows the live
    /// (page-cache) view: entries whose creation is not yet durable are listed.
    async fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>>;

    /// Renames `from` to `to`, atomically replacing `to` if it exists: the live
    /// view never shows neither or both. Durable only after [`Fs::sync_dir`] of
    /// the parent (of both parents if they differ); until then a power loss
    /// leaves the file under its old name or its new one. Does not sync the
    /// file's data: sync the file before renaming it into place.
    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;

    /// Removes a file's directory entry. Open handles keep working. The removal
    /// is durable only after [`Fs::sync_dir`] of the parent: until then a power
    /// loss may bring the file (and the space it takes) back.
    async fn remove_file(&self, path: &Path) -> io::Result<()>;

    /// Makes every directory operation done so far in `path` (creates, renames,
    /// removes) durable. Does not sync any file's data.
    async fn sync_dir(&self, path: &Path) -> io::Result<()>;

    /// Takes an exclusive lock on directory `path`, held until the returned
    /// guard is dropped (or the process dies). A second lock on the same
    /// directory, from this process or another, fails at once with
    /// `io::ErrorKind::WouldBlock`. Not a durability operation.
    async fn lock_dir(&self, path: &Path) -> io::Result<Self::DirLock>;

    /// Takes a shared lock on directory `path`: any number of shared locks
    /// may be held at once, but none while an exclusive one ([`Fs::lock_dir`])
    /// is, and no exclusive lock while any shared one is (the other call
    /// fails at once with `io::ErrorKind::WouldBlock`). For readers that
    /// must not see a writer change the directory under them. Not a
    /// durability operation.
    ///
    /// The default takes the exclusive lock, which is safe but keeps other
    /// readers out; [`OsFs`](crate::OsFs) (`flock(LOCK_SH)`) and
    /// [`SimFs`](crate::SimFs) implement it.
    ///
    /// ```
    /// use simfs::{Fs, SimFs};
    /// use std::path::Path;
    ///
    /// futures::executor::block_on(async {
    ///     let fs = SimFs::new(1);
    ///     fs.create_dir_all(Path::new("/db")).await?;
    ///     let a = fs.lock_dir_shared(Path::new("/db")).await?;
    ///     let b = fs.lock_dir_shared(Path::new("/db")).await?; // readers share
    ///     assert!(fs.lock_dir(Path::new("/db")).await.is_err()); // a writer waits
    ///     drop((a, b));
    ///     let w = fs.lock_dir(Path::new("/db")).await?;
    ///     assert!(fs.lock_dir_shared(Path::new("/db")).await.is_err());
    ///     drop(w);
    ///     Ok::<_, std::io::Error>(())
    /// }).unwrap();
    /// ```
    async fn lock_dir_shared(&self, path: &Path) -> io::Result<Self::DirLock> {
        self.lock_dir(path).await
    }

    /// Size and kind of the file or directory at `path` (live view);
    /// `NotFound` if there is none.
    async fn metadata(&self, path: &Path) -> io::Result<Metadata>;

    /// A fresh 128-bit value for an identifier a storage engine stamps on
    /// what it creates (the WAL's log id): never 0, and with overwhelming
    /// probability never repeated. [`OsFs`](crate::OsFs) draws it from the
    /// process's hash randomness, the clock and a counter; [`SimFs`](crate::SimFs)
    /// derives it from its seed and a counter, so a simulated run replays
    /// (and draws nothing from its fault stream). Not a durability operation.
    ///
    /// ```
    /// use simfs::{Fs, SimFs};
    /// let fs = SimFs::new(7);
    /// let (a, b) = (fs.unique_id(), fs.unique_id());
    /// assert!(a != 0 && a != b);
    /// assert_eq!(SimFs::new(7).unique_id(), a);
    /// ```
    fn unique_id(&self) -> u128;

    /// Whether `path` exists in the live view.
    async fn exists(&self, path: &Path) -> io::Result<bool> {
        match self.metadata(path).await {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// An open file. Dropping it closes it, which is not a sync.
///
/// All I/O is positional, so one handle can be shared by concurrent readers.
// `len` is the file's length, not a collection's: an `is_empty` would be noise.
#[allow(clippy::len_without_is_empty)]
#[async_trait]
pub trait File: Send + Sync + 'static {
    /// Reads up to `buf.len()` bytes at `offset` from the live (page-cache)
    /// image. Returns the number read: 0 at or past the end of the file, and
    /// possibly fewer than requested before it (a short read). Holes read as zeros.
    async fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;

    /// Writes up to `buf.len()` bytes at `offset` into the page cache, extending
    /// the file if needed (a gap reads as zeros). Returns how many bytes were
    /// written; fewer than asked means the device filled up (the next write
    /// fails with `StorageFull`). Not durable until [`File::sync_data`].
    async fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize>;

    /// Sets the file's length, cutting or zero-extending it. Durable after
    /// [`File::sync_data`] or [`File::sync_all`].
    async fn set_len(&self, len: u64) -> io::Result<()>;

    /// Reserves space so that the file is at least `len` bytes long, the new
    /// bytes reading as zeros (`fallocate` mode 0; on filesystems without it,
    /// zeros are written). Never shrinks the file. The reservation and new
    /// length are durable after [`File::sync_data`] or [`File::sync_all`].
    async fn allocate(&self, len: u64) -> io::Result<()>;

    /// Makes the file's data and the size needed to read it durable
    /// (`fdatasync`). On error the data it covered is not durable and must be
    /// treated as lost even if a later call returns `Ok`.
    async fn sync_data(&self) -> io::Result<()>;

    /// Like [`File::sync_data`], plus the rest of the file's metadata (`fsync`).
    /// Still does not make the file's directory entry durable.
    async fn sync_all(&self) -> io::Result<()>;

    /// The file's current length (live view).
    async fn len(&self) -> io::Result<u64>;

    /// Reads exactly `buf.len()` bytes at `offset`, retrying short reads.
    /// `UnexpectedEof` if the file ends first.
    async fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let mut done = 0usize;
        while done < buf.len() {
            let n = self.read_at(&mut buf[done..], offset + done as u64).await?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("end of file at offset {}", offset + done as u64),
                ));
            }
            done += n;
        }
        Ok(())
    }

    /// Writes all of `buf` at `offset`, retrying short writes. On error some
    /// prefix of `buf` may have been written.
    async fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut done = 0usize;
        while done < buf.len() {
            let n = self.write_at(&buf[done..], offset + done as u64).await?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    format!("wrote zero bytes at offset {}", offset + done as u64),
                ));
            }
            done += n;
        }
        Ok(())
    }
}
