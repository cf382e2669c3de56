//! Deliberately broken filesystems and WALs, for proof of power: the sweep
//! must catch each of them within a bounded number of seeds
//! (`tests/power.rs`). They live here, in the test crate: the production
//! crates carry no bug behind a flag.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use futures::future::BoxFuture;
use simfs::{DirEntry, File, Fs, Metadata, OpenOptions, SimFs};
use wal::testing::Planted;
use wal::{CompactionOptions, CompactionPlan, Error, RecoveryMode, RecoveryReport, Result};

use crate::api::{opener_with, real_opener, Given, Indexed, LogApi, LogIter, Opener};

/// A bug planted in the filesystem under the real WAL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsBug {
    /// `sync_data`/`sync_all` return Ok without syncing: the WAL
    /// acknowledges before anything is durable.
    NoFsync,
    /// `sync_dir` returns Ok without syncing: a new segment's name is not
    /// durable when the WAL acknowledges records in it.
    NoDirSync,
    /// A failed `sync_data` is retried and the retry's Ok returned
    /// (PostgreSQL's fsyncgate): data the failed sync covered is reported durable.
    RetryFailedFsync,
    /// `read_dir` hides the oldest sealed segment: recovery silently loses
    /// the head of the log.
    HideOldestSegment,
    /// The rename that installs a new meta file is dropped (the temporary
    /// file is removed, Ok returned): prune deletes segments without a
    /// durable low-water mark, and close leaves no clean-shutdown marker.
    LoseMetaFile,
    /// `meta.wal.tmp` always looks present (`metadata` succeeds): a meta
    /// rename that reported EIO after taking effect is taken for one that
    /// did not happen, the engine's assumption before seed 535 (the WAL goes
    /// on under a low-water mark it abandoned).
    MetaTmpAlwaysThere,
}

/// A bug planted in a wrapper around the real WAL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalBug {
    /// Appends return at once with the index predicted at call time and
    /// write in the background: acknowledged before written, and reordered
    /// under concurrency.
    EarlyAck,
    /// Every 5th append returns `Ok(next index)` without writing anything.
    DropRecord,
    /// Batches are written in reverse order.
    ReverseBatch,
    /// `truncate_after`/`truncate_from` return Ok and remove nothing.
    TruncateNoop,
    /// Every 7th read reports `Corruption` at the first frame of the oldest
    /// segment, though nothing is damaged: a report no recorded fault can
    /// explain.
    SpuriousCorruption,
}

/// A bug planted in how the log is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenBug {
    /// Recovery cuts durable data and says so in its report instead of
    /// failing: where the real open reports mid-log corruption (a later
    /// frame proved the damaged records durable), it opens again in
    /// `PointInTime` mode and returns that log, as if `decide_cut` had cut
    /// past its own proof.
    CutInsteadOfReport,
}

/// Any planted bug.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bug {
    /// In the filesystem.
    Fs(FsBug),
    /// In the WAL.
    Wal(WalBug),
    /// In the open (recovery).
    Open(OpenBug),
    /// In the engine itself, behind `wal`'s `planted-bugs` feature: switched
    /// on for the seed's thread by every open of the run
    /// ([`wal::testing::plant`]) and off again when the run drops its opener.
    Engine(Planted),
}

/// Switches an engine bug off on the thread that drops it (the last clone
/// of a [`Bug::Engine`] opener, at the end of the run).
struct Unplant;

impl Drop for Unplant {
    fn drop(&mut self) {
        wal::testing::plant(None);
    }
}

impl Bug {
    /// Every planted bug.
    pub const ALL: [Bug; 23] = [
        Bug::Fs(FsBug::NoFsync),
        Bug::Fs(FsBug::NoDirSync),
        Bug::Fs(FsBug::RetryFailedFsync),
        Bug::Fs(FsBug::HideOldestSegment),
        Bug::Wal(WalBug::EarlyAck),
        Bug::Wal(WalBug::DropRecord),
        Bug::Wal(WalBug::ReverseBatch),
        Bug::Fs(FsBug::LoseMetaFile),
        Bug::Wal(WalBug::TruncateNoop),
        Bug::Wal(WalBug::SpuriousCorruption),
        Bug::Open(OpenBug::CutInsteadOfReport),
        Bug::Fs(FsBug::MetaTmpAlwaysThere),
        Bug::Engine(Planted::RecoveryCutNotSynced),
        Bug::Engine(Planted::PruneIgnoresLeases),
        Bug::Engine(Planted::RecoveryJournalNotSynced),
        Bug::Engine(Planted::NamesTrusted),
        Bug::Engine(Planted::CancelStops),
        Bug::Engine(Planted::MakerGetsReadable),
        Bug::Engine(Planted::RangeSkipsStart),
        Bug::Engine(Planted::SealOneTooFar),
        Bug::Engine(Planted::WaitDurableNoSync),
        Bug::Engine(Planted::PruneWholeSegmentsOnly),
        Bug::Engine(Planted::ExactPruneNotDurable),
    ];

    /// The opener that runs the real WAL with this bug planted.
    pub fn opener(self) -> Opener {
        match self {
            Bug::Fs(b) => opener_with(move |fs: SimFs| BrokenFs { inner: fs, bug: b }),
            Bug::Wal(b) => {
                let real = real_opener();
                Arc::new(move |fs, dir, opts| {
                    let open = real(fs, dir.clone(), opts);
                    Box::pin(async move {
                        let inner = open.await?;
                        Ok(Arc::new(BrokenWal {
                            inner,
                            bug: b,
                            count: AtomicU64::new(0),
                            dir,
                        }) as Arc<dyn LogApi>)
                    })
                })
            }
            Bug::Engine(p) => {
                let real = real_opener();
                let unplant = Arc::new(Unplant);
                Arc::new(move |fs, dir, opts| {
                    // The open runs on the seed's thread: plant it there.
                    let _ = &unplant;
                    wal::testing::plant(Some(p));
                    real(fs, dir, opts)
                })
            }
            Bug::Open(OpenBug::CutInsteadOfReport) => {
                let real = real_opener();
                Arc::new(move |fs, dir, opts| {
                    let real = real.clone();
                    Box::pin(async move {
                        match real(fs.clone(), dir.clone(), opts.clone()).await {
                            Err(Error::Corruption { .. }) if opts.recovery_mode != RecoveryMode::PointInTime => {
                                let mut cut = opts;
                                cut.recovery_mode = RecoveryMode::PointInTime;
                                real(fs, dir, cut).await
                            }
                            r => r,
                        }
                    })
                })
            }
        }
    }
}

/// A filesystem with a planted bug.
pub struct BrokenFs<F: Fs> {
    inner: F,
    bug: FsBug,
}

/// A file of [`BrokenFs`].
pub struct BrokenFile<Fl: File> {
    inner: Fl,
    bug: FsBug,
}

#[async_trait]
impl<F: Fs> Fs for BrokenFs<F> {
    type File = BrokenFile<F::File>;
    type DirLock = F::DirLock;

    fn unique_id(&self) -> u128 {
        self.inner.unique_id()
    }

    async fn open(&self, path: &Path, options: OpenOptions) -> io::Result<Self::File> {
        let inner = self.inner.open(path, options).await?;
        Ok(BrokenFile { inner, bug: self.bug })
    }
    async fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all(path).await
    }
    async fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        let mut entries = self.inner.read_dir(path).await?;
        if self.bug == FsBug::HideOldestSegment {
            let segs: Vec<usize> = (0..entries.len())
                .filter(|&i| entries[i].name.ends_with(".wal"))
                .collect();
            if let Some(&i) = segs.first() {
                if segs.len() >= 2 && !entries[i].name.contains("active") {
                    entries.remove(i);
                }
            }
        }
        Ok(entries)
    }
    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        if self.bug == FsBug::LoseMetaFile && to.file_name().is_some_and(|n| n == "meta") {
            return self.inner.remove_file(from).await;
        }
        self.inner.rename(from, to).await
    }
    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_file(path).await
    }
    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        if self.bug == FsBug::NoDirSync {
            return Ok(());
        }
        self.inner.sync_dir(path).await
    }
    async fn lock_dir(&self, path: &Path) -> io::Result<Self::DirLock> {
        self.inner.lock_dir(path).await
    }
    async fn metadata(&self, path: &Path) -> io::Result<Metadata> {
        if self.bug == FsBug::MetaTmpAlwaysThere && path.file_name().is_some_and(|n| n == "meta.wal.tmp") {
            return Ok(Metadata { len: 64, is_dir: false });
        }
        self.inner.metadata(path).await
    }
}

#[async_trait]
impl<Fl: File> File for BrokenFile<Fl> {
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
        match self.bug {
            FsBug::NoFsync => Ok(()),
            FsBug::RetryFailedFsync => match self.inner.sync_data().await {
                Ok(()) => Ok(()),
                Err(_) => self.inner.sync_data().await,
            },
            _ => self.inner.sync_data().await,
        }
    }
    async fn sync_all(&self) -> io::Result<()> {
        match self.bug {
            FsBug::NoFsync => Ok(()),
            FsBug::RetryFailedFsync => match self.inner.sync_all().await {
                Ok(()) => Ok(()),
                Err(_) => self.inner.sync_all().await,
            },
            _ => self.inner.sync_all().await,
        }
    }
    async fn len(&self) -> io::Result<u64> {
        self.inner.len().await
    }
}

/// A WAL wrapper with a planted bug.
pub struct BrokenWal {
    inner: Arc<dyn LogApi>,
    bug: WalBug,
    count: AtomicU64,
    dir: PathBuf,
}

impl LogApi for BrokenWal {
    fn append(&self, record: Vec<u8>) -> BoxFuture<'_, Result<u64>> {
        let n = self.count.fetch_add(1, Ordering::Relaxed);
        match self.bug {
            WalBug::EarlyAck => {
                let predicted = self.inner.next_index();
                let inner = self.inner.clone();
                drop(madsim::task::spawn(async move {
                    let _ = inner.append(record).await;
                }));
                Box::pin(futures::future::ready(Ok(predicted)))
            }
            WalBug::DropRecord if n % 5 == 4 && self.inner.stopped().is_none() => {
                Box::pin(futures::future::ready(Ok(self.inner.next_index())))
            }
            _ => self.inner.append(record),
        }
    }
    fn append_at(&self, index: u64, record: Vec<u8>) -> BoxFuture<'_, Result<u64>> {
        self.inner.append_at(index, record)
    }
    fn append_batch(&self, mut records: Vec<Vec<u8>>) -> BoxFuture<'_, Result<u64>> {
        if self.bug == WalBug::ReverseBatch {
            records.reverse();
        }
        self.inner.append_batch(records)
    }
    fn append_batch_at(&self, index: u64, mut records: Vec<Vec<u8>>) -> BoxFuture<'_, Result<u64>> {
        if self.bug == WalBug::ReverseBatch {
            records.reverse();
        }
        self.inner.append_batch_at(index, records)
    }
    fn append_with(&self, records: Vec<Vec<u8>>, batch: bool, given: Given) -> BoxFuture<'_, Result<u64>> {
        self.inner.append_with(records, batch, given)
    }
    fn read_range(&self, start: u64, end: u64, max_bytes: usize) -> BoxFuture<'_, Result<Vec<Indexed>>> {
        self.inner.read_range(start, end, max_bytes)
    }
    fn wait_durable(&self, index: u64) -> BoxFuture<'_, Result<()>> {
        self.inner.wait_durable(index)
    }
    fn seal_notices(&self) -> Vec<wal::SealNotice> {
        self.inner.seal_notices()
    }
    fn read(&self, index: u64) -> BoxFuture<'_, Result<Vec<u8>>> {
        let n = self.count.fetch_add(1, Ordering::Relaxed);
        if self.bug == WalBug::SpuriousCorruption && n % 7 == 6 {
            if let Some(oldest) = self.inner.segment_names().first() {
                let e = Error::Corruption {
                    segment: self.dir.join(oldest),
                    offset: wal::codec::SEGMENT_HEADER_BYTES as u64,
                    reason: "planted: no damage here".into(),
                };
                return Box::pin(futures::future::ready(Err(e)));
            }
        }
        self.inner.read(index)
    }
    fn iter_from(&self, index: u64) -> Result<Box<dyn LogIter>> {
        self.inner.iter_from(index)
    }
    fn rotate(&self) -> BoxFuture<'_, Result<()>> {
        self.inner.rotate()
    }
    fn sync(&self) -> BoxFuture<'_, Result<()>> {
        self.inner.sync()
    }
    fn close(self: Arc<Self>) -> BoxFuture<'static, Result<()>> {
        match Arc::try_unwrap(self) {
            Ok(w) => w.inner.close(),
            Err(_) => Box::pin(futures::future::ready(Err(Error::InvalidArgument(
                "close: still shared".into(),
            )))),
        }
    }
    fn first_index(&self) -> u64 {
        self.inner.first_index()
    }
    fn next_index(&self) -> u64 {
        self.inner.next_index()
    }
    fn stopped(&self) -> Option<Error> {
        self.inner.stopped()
    }
    fn interrupted(&self) -> bool {
        self.inner.interrupted()
    }
    fn segment_names(&self) -> Vec<String> {
        self.inner.segment_names()
    }
    fn segment_files(&self) -> Vec<(String, u64, Option<u64>, bool)> {
        self.inner.segment_files()
    }
    fn recovery_report(&self) -> RecoveryReport {
        self.inner.recovery_report()
    }
    fn prune_through(&self, k: u64) -> BoxFuture<'_, Result<u64>> {
        self.inner.prune_through(k)
    }
    fn reset_to(&self, next: u64) -> BoxFuture<'_, Result<()>> {
        self.inner.reset_to(next)
    }
    fn truncate_after(&self, k: u64) -> BoxFuture<'_, Result<()>> {
        if self.bug == WalBug::TruncateNoop {
            return Box::pin(futures::future::ready(Ok(())));
        }
        self.inner.truncate_after(k)
    }
    fn truncate_from(&self, from: u64) -> BoxFuture<'_, Result<()>> {
        if self.bug == WalBug::TruncateNoop {
            return Box::pin(futures::future::ready(Ok(())));
        }
        self.inner.truncate_from(from)
    }
    fn compaction_plan(&self, opts: CompactionOptions) -> BoxFuture<'_, Result<CompactionPlan>> {
        self.inner.compaction_plan(opts)
    }
    fn compact(&self, opts: CompactionOptions) -> BoxFuture<'_, Result<CompactionPlan>> {
        self.inner.compact(opts)
    }
    fn stats(&self) -> BoxFuture<'_, wal::Stats> {
        self.inner.stats()
    }
}
