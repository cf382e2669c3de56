//! A filesystem that counts the fsyncs passing through it (file
//! `sync_data`/`sync_all` and directory `sync_dir`), for W7's "fsyncs per
//! open" column: what a clean reopen costs in the operations a disk pays
//! for, whatever the machine's timing.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use simfs::{DirEntry, File, Fs, Metadata, OpenOptions, OsFs};

/// Fsyncs seen so far.
#[derive(Debug, Default)]
pub struct Counts {
    /// `sync_data` and `sync_all` of files.
    pub file_syncs: AtomicU64,
    /// `sync_dir` of directories.
    pub dir_syncs: AtomicU64,
}

impl Counts {
    /// `(file syncs, directory syncs)`.
    pub fn get(&self) -> (u64, u64) {
        (
            self.file_syncs.load(Ordering::Relaxed),
            self.dir_syncs.load(Ordering::Relaxed),
        )
    }
}

/// [`OsFs`] with every fsync counted in [`Counts`].
pub struct CountingFs {
    inner: OsFs,
    counts: Arc<Counts>,
}

impl CountingFs {
    /// Wraps `inner`; the counts are shared with the caller.
    pub fn new(inner: OsFs, counts: Arc<Counts>) -> CountingFs {
        CountingFs { inner, counts }
    }
}

/// A file of a [`CountingFs`].
pub struct CountingFile {
    inner: <OsFs as Fs>::File,
    counts: Arc<Counts>,
}

#[async_trait]
impl File for CountingFile {
    async fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.inner.read_at(buf, offset).await
    }
    async fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        self.inner.write_at(buf, offset).await
    }
    async fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len).await
    }
    async fn allocate(&self, len: u64) -> io::Result<()> {
        self.inner.allocate(len).await
    }
    async fn sync_data(&self) -> io::Result<()> {
        self.counts.file_syncs.fetch_add(1, Ordering::Relaxed);
        self.inner.sync_data().await
    }
    async fn sync_all(&self) -> io::Result<()> {
        self.counts.file_syncs.fetch_add(1, Ordering::Relaxed);
        self.inner.sync_all().await
    }
    async fn len(&self) -> io::Result<u64> {
        self.inner.len().await
    }
}

#[async_trait]
impl Fs for CountingFs {
    type File = CountingFile;
    type DirLock = <OsFs as Fs>::DirLock;

    async fn open(&self, path: &Path, options: OpenOptions) -> io::Result<CountingFile> {
        let inner = self.inner.open(path, options).await?;
        Ok(CountingFile {
            inner,
            counts: self.counts.clone(),
        })
    }
    async fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all(path).await
    }
    async fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        self.inner.read_dir(path).await
    }
    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to).await
    }
    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_file(path).await
    }
    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.counts.dir_syncs.fetch_add(1, Ordering::Relaxed);
        self.inner.sync_dir(path).await
    }
    async fn lock_dir(&self, path: &Path) -> io::Result<Self::DirLock> {
        self.inner.lock_dir(path).await
    }
    async fn lock_dir_shared(&self, path: &Path) -> io::Result<Self::DirLock> {
        self.inner.lock_dir_shared(path).await
    }
    async fn metadata(&self, path: &Path) -> io::Result<Metadata> {
        self.inner.metadata(path).await
    }
    fn unique_id(&self) -> u128 {
        self.inner.unique_id()
    }
}
