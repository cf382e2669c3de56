//! The log under test as a trait object, so the runner drives the real
//! [`wal::Wal`] and the deliberately broken wrappers of [`crate::broken`]
//! through one interface.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;
use simfs::{Fs, SimFs};
use wal::{CompactionOptions, CompactionPlan, Error, Options, RecoveryReport, Result, Wal, WalIter};

/// Every WAL call the workload makes.
pub trait LogApi: Send + Sync + 'static {
    /// [`Wal::append`].
    fn append(&self, record: Vec<u8>) -> BoxFuture<'_, Result<u64>>;
    /// [`Wal::append_at`].
    fn append_at(&self, index: u64, record: Vec<u8>) -> BoxFuture<'_, Result<u64>>;
    /// [`Wal::append_batch`].
    fn append_batch(&self, records: Vec<Vec<u8>>) -> BoxFuture<'_, Result<u64>>;
    /// [`Wal::append_batch_at`].
    fn append_batch_at(&self, index: u64, records: Vec<Vec<u8>>) -> BoxFuture<'_, Result<u64>>;
    /// [`Wal::append_with`] (`batch` false: one record) or
    /// [`Wal::append_batch_with`]: the maker returns `records` and stores
    /// the index it was given in `given`.
    fn append_with(&self, records: Vec<Vec<u8>>, batch: bool, given: Given) -> BoxFuture<'_, Result<u64>>;
    /// [`Wal::read`].
    fn read(&self, index: u64) -> BoxFuture<'_, Result<Vec<u8>>>;
    /// [`Wal::read_range`] of `start..end`.
    fn read_range(&self, start: u64, end: u64, max_bytes: usize) -> BoxFuture<'_, Result<Vec<Indexed>>>;
    /// [`Wal::wait_durable`].
    fn wait_durable(&self, index: u64) -> BoxFuture<'_, Result<()>>;
    /// The seal notices of this open since the last call (the adapter
    /// subscribes at open, [`Wal::seal_events`]).
    fn seal_notices(&self) -> Vec<wal::SealNotice>;
    /// [`Wal::iter_from`].
    fn iter_from(&self, index: u64) -> Result<Box<dyn LogIter>>;
    /// [`Wal::rotate`].
    fn rotate(&self) -> BoxFuture<'_, Result<()>>;
    /// [`Wal::sync`].
    fn sync(&self) -> BoxFuture<'_, Result<()>>;
    /// [`Wal::close`]; fails with `InvalidArgument` if the log is still shared.
    fn close(self: Arc<Self>) -> BoxFuture<'static, Result<()>>;
    /// [`Wal::first_index`].
    fn first_index(&self) -> u64;
    /// [`Wal::next_index`].
    fn next_index(&self) -> u64;
    /// [`Wal::stopped`].
    fn stopped(&self) -> Option<Error>;
    /// [`Wal::interrupted`]: a cancelled operation waits for the next call
    /// to rebuild memory from the files.
    fn interrupted(&self) -> bool;
    /// The file names of [`Wal::segment_files`].
    fn segment_names(&self) -> Vec<String>;
    /// [`Wal::segment_files`]: name, first index, last index, sealed.
    fn segment_files(&self) -> Vec<(String, u64, Option<u64>, bool)>;
    /// [`Wal::recovery_report`].
    fn recovery_report(&self) -> RecoveryReport;
    /// [`Wal::prune_through`].
    fn prune_through(&self, k: u64) -> BoxFuture<'_, Result<u64>>;
    /// [`Wal::reset_to`].
    fn reset_to(&self, next: u64) -> BoxFuture<'_, Result<()>>;
    /// [`Wal::truncate_after`].
    fn truncate_after(&self, k: u64) -> BoxFuture<'_, Result<()>>;
    /// [`Wal::truncate_from`].
    fn truncate_from(&self, from: u64) -> BoxFuture<'_, Result<()>>;
    /// [`Wal::compaction_plan`].
    fn compaction_plan(&self, opts: CompactionOptions) -> BoxFuture<'_, Result<CompactionPlan>>;
    /// [`Wal::compact`].
    fn compact(&self, opts: CompactionOptions) -> BoxFuture<'_, Result<CompactionPlan>>;
    /// [`Wal::stats`].
    fn stats(&self) -> BoxFuture<'_, wal::Stats>;
}

/// A record with its index, as `read_range` returns them.
pub type Indexed = (u64, Vec<u8>);

/// Where an `append_with` maker stores the index it was given (`None`: not
/// called).
pub type Given = Arc<std::sync::Mutex<Option<u64>>>;

/// One step of an iterator: `(index, payload)`, an error, or `None` when caught up.
pub type IterStep = Option<Result<(u64, Vec<u8>)>>;

/// [`wal::WalIter`] as a trait object.
pub trait LogIter: Send {
    /// [`WalIter::next`].
    fn next(&mut self) -> BoxFuture<'_, IterStep>;
}

/// How the runner opens the log under test on a SimFs.
pub type Opener = Arc<dyn Fn(SimFs, PathBuf, Options) -> BoxFuture<'static, Result<Arc<dyn LogApi>>> + Send + Sync>;

/// The real WAL behind [`LogApi`].
pub struct WalAdapter<F: Fs> {
    wal: Wal<F>,
    seals: std::sync::Mutex<wal::SealEvents>,
}

impl<F: Fs> WalAdapter<F> {
    /// Opens the real WAL on `fs`.
    pub async fn open(fs: F, dir: &Path, opts: Options) -> Result<Arc<dyn LogApi>> {
        let wal = Wal::open(fs, dir, opts).await?;
        let seals = std::sync::Mutex::new(wal.seal_events()?);
        Ok(Arc::new(WalAdapter { wal, seals }))
    }
}

/// Opens the real WAL, on SimFs wrapped by `wrap` (identity for the real run).
pub fn opener_with<F: Fs>(wrap: impl Fn(SimFs) -> F + Send + Sync + 'static) -> Opener {
    let wrap = Arc::new(wrap);
    Arc::new(move |fs, dir, opts| {
        let fs = wrap(fs);
        Box::pin(async move { WalAdapter::open(fs, &dir, opts).await })
    })
}

/// The real WAL on the bare SimFs.
pub fn real_opener() -> Opener {
    opener_with(|fs| fs)
}

struct IterAdapter<F: Fs>(WalIter<F>);

impl<F: Fs> LogIter for IterAdapter<F> {
    fn next(&mut self) -> BoxFuture<'_, IterStep> {
        Box::pin(self.0.next())
    }
}

impl<F: Fs> LogApi for WalAdapter<F> {
    fn append(&self, record: Vec<u8>) -> BoxFuture<'_, Result<u64>> {
        Box::pin(self.wal.append(record))
    }
    fn append_at(&self, index: u64, record: Vec<u8>) -> BoxFuture<'_, Result<u64>> {
        Box::pin(self.wal.append_at(index, record))
    }
    fn append_batch(&self, records: Vec<Vec<u8>>) -> BoxFuture<'_, Result<u64>> {
        Box::pin(self.wal.append_batch(records))
    }
    fn append_batch_at(&self, index: u64, records: Vec<Vec<u8>>) -> BoxFuture<'_, Result<u64>> {
        Box::pin(self.wal.append_batch_at(index, records))
    }
    fn append_with(&self, records: Vec<Vec<u8>>, batch: bool, given: Given) -> BoxFuture<'_, Result<u64>> {
        let make = move |index: u64| {
            *given.lock().unwrap_or_else(|e| e.into_inner()) = Some(index);
            records
        };
        if batch {
            Box::pin(self.wal.append_batch_with(make))
        } else {
            Box::pin(
                self.wal
                    .append_with(move |index| make(index).into_iter().next().unwrap_or_default()),
            )
        }
    }
    fn read(&self, index: u64) -> BoxFuture<'_, Result<Vec<u8>>> {
        Box::pin(self.wal.read(index))
    }
    fn read_range(&self, start: u64, end: u64, max_bytes: usize) -> BoxFuture<'_, Result<Vec<Indexed>>> {
        Box::pin(self.wal.read_range(start..end, max_bytes))
    }
    fn wait_durable(&self, index: u64) -> BoxFuture<'_, Result<()>> {
        Box::pin(self.wal.wait_durable(index))
    }
    fn seal_notices(&self) -> Vec<wal::SealNotice> {
        let mut seals = self.seals.lock().unwrap_or_else(|e| e.into_inner());
        std::iter::from_fn(|| seals.try_next()).collect()
    }
    fn iter_from(&self, index: u64) -> Result<Box<dyn LogIter>> {
        Ok(Box::new(IterAdapter(self.wal.iter_from(index)?)))
    }
    fn rotate(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(self.wal.rotate())
    }
    fn sync(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(self.wal.sync())
    }
    fn close(self: Arc<Self>) -> BoxFuture<'static, Result<()>> {
        match Arc::try_unwrap(self) {
            Ok(a) => Box::pin(async move { a.wal.close().await }),
            Err(_) => Box::pin(futures::future::ready(Err(Error::InvalidArgument(
                "close: the log is still shared by a task".into(),
            )))),
        }
    }
    fn first_index(&self) -> u64 {
        self.wal.first_index()
    }
    fn next_index(&self) -> u64 {
        self.wal.next_index()
    }
    fn stopped(&self) -> Option<Error> {
        self.wal.stopped()
    }
    fn interrupted(&self) -> bool {
        self.wal.interrupted().is_some()
    }
    fn segment_names(&self) -> Vec<String> {
        self.wal.segment_files().into_iter().map(|(name, ..)| name).collect()
    }
    fn segment_files(&self) -> Vec<(String, u64, Option<u64>, bool)> {
        self.wal.segment_files()
    }
    fn recovery_report(&self) -> RecoveryReport {
        self.wal.recovery_report().clone()
    }
    fn prune_through(&self, k: u64) -> BoxFuture<'_, Result<u64>> {
        Box::pin(self.wal.prune_through(k))
    }
    fn reset_to(&self, next: u64) -> BoxFuture<'_, Result<()>> {
        Box::pin(self.wal.reset_to(next))
    }
    fn truncate_after(&self, k: u64) -> BoxFuture<'_, Result<()>> {
        Box::pin(self.wal.truncate_after(k))
    }
    fn truncate_from(&self, from: u64) -> BoxFuture<'_, Result<()>> {
        Box::pin(self.wal.truncate_from(from))
    }
    fn compaction_plan(&self, opts: CompactionOptions) -> BoxFuture<'_, Result<CompactionPlan>> {
        Box::pin(self.wal.compaction_plan(opts))
    }
    fn compact(&self, opts: CompactionOptions) -> BoxFuture<'_, Result<CompactionPlan>> {
        Box::pin(self.wal.compact(opts))
    }
    fn stats(&self) -> BoxFuture<'_, wal::Stats> {
        Box::pin(self.wal.stats())
    }
}
