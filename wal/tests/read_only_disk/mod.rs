//! A read-only disk for tests: an `Fs` wrapper that serves every read of
//! the wrapped filesystem and refuses, with `PermissionDenied`, everything
//! that could change it (opens for writing, creates, renames, removals,
//! directory and file syncs, exclusive locks, writes, cuts). The tests run
//! as root in CI, where mode 444 files and directories stop nothing, so
//! this is how they prove a read-only open never tries to change the
//! directory: every refusal is counted.
#![allow(dead_code)]

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use simfs::{DirEntry, File, Fs, Metadata, OpenOptions};

/// The wrapper; clones share the refusal log.
#[derive(Clone)]
pub struct ReadOnlyDisk<F> {
    inner: F,
    refused: Arc<Refusals>,
}

#[derive(Default)]
struct Refusals {
    count: AtomicU64,
    log: Mutex<Vec<String>>,
}

impl Refusals {
    fn refuse(&self, what: String) -> io::Error {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.log.lock().unwrap_or_else(|e| e.into_inner()).push(what.clone());
        io::Error::new(io::ErrorKind::PermissionDenied, format!("read-only disk: {what}"))
    }
}

impl<F: Fs> ReadOnlyDisk<F> {
    pub fn new(inner: F) -> Self {
        ReadOnlyDisk {
            inner,
            refused: Arc::default(),
        }
    }

    /// What was refused so far.
    pub fn refused(&self) -> Vec<String> {
        self.refused.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// A file of the read-only disk.
pub struct ReadOnlyFile<Fl> {
    inner: Fl,
    path: PathBuf,
    refused: Arc<Refusals>,
}

#[async_trait]
impl<F: Fs> Fs for ReadOnlyDisk<F> {
    type File = ReadOnlyFile<F::File>;
    type DirLock = F::DirLock;

    async fn open(&self, path: &Path, options: OpenOptions) -> io::Result<Self::File> {
        if options.write || options.create || options.create_new || options.truncate {
            return Err(self.refused.refuse(format!("open {} {options:?}", path.display())));
        }
        Ok(ReadOnlyFile {
            inner: self.inner.open(path, options).await?,
            path: path.to_path_buf(),
            refused: self.refused.clone(),
        })
    }

    async fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        Err(self.refused.refuse(format!("create_dir_all {}", path.display())))
    }

    async fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        self.inner.read_dir(path).await
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        Err(self
            .refused
            .refuse(format!("rename {} {}", from.display(), to.display())))
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        Err(self.refused.refuse(format!("remove {}", path.display())))
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        Err(self.refused.refuse(format!("sync_dir {}", path.display())))
    }

    async fn lock_dir(&self, path: &Path) -> io::Result<Self::DirLock> {
        Err(self.refused.refuse(format!("exclusive lock {}", path.display())))
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

#[async_trait]
impl<Fl: File> File for ReadOnlyFile<Fl> {
    async fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.inner.read_at(buf, offset).await
    }

    async fn write_at(&self, _buf: &[u8], offset: u64) -> io::Result<usize> {
        Err(self
            .refused
            .refuse(format!("write {} at {offset}", self.path.display())))
    }

    async fn set_len(&self, len: u64) -> io::Result<()> {
        Err(self.refused.refuse(format!("set_len {} to {len}", self.path.display())))
    }

    async fn allocate(&self, len: u64) -> io::Result<()> {
        Err(self
            .refused
            .refuse(format!("allocate {} to {len}", self.path.display())))
    }

    async fn sync_data(&self) -> io::Result<()> {
        Err(self.refused.refuse(format!("sync_data {}", self.path.display())))
    }

    async fn sync_all(&self) -> io::Result<()> {
        Err(self.refused.refuse(format!("sync_all {}", self.path.display())))
    }

    async fn len(&self) -> io::Result<u64> {
        self.inner.len().await
    }
}

/// Count of refusals, for assertions.
pub fn refusals<F: Fs>(d: &ReadOnlyDisk<F>) -> u64 {
    d.refused.count.load(Ordering::Relaxed)
}
