//! Configuration: [`Options`], [`SyncPolicy`], [`RecoveryMode`].

use std::fmt;
use std::time::Duration;

use futures::future::BoxFuture;

use crate::codec::MAX_RECORD_BYTES;
use crate::error::{Error, Result};
use crate::sync::Arc;

/// A function that waits for a duration on the caller's runtime (for example
/// `tokio::time::sleep` or `madsim::time::sleep`). Needed only by
/// [`SyncPolicy::Batched`]: the WAL itself never reads a clock.
///
/// The timer's resolution bounds the wait: tokio's timer wheel rounds a
/// sleep up to the next millisecond, so a `max_delay` of 200 µs waits about
/// 1 ms there. The wait also ends when every live appender has joined the
/// group, so a coarse timer costs latency only while an appender is still
/// on its way.
///
/// ```
/// let sleeper = wal::Sleeper::new(|_d| Box::pin(async {}));
/// # drop(sleeper);
/// ```
#[derive(Clone)]
pub struct Sleeper(Arc<dyn Fn(Duration) -> BoxFuture<'static, ()> + Send + Sync>);

impl Sleeper {
    /// Wraps a sleep function.
    pub fn new(f: impl Fn(Duration) -> BoxFuture<'static, ()> + Send + Sync + 'static) -> Self {
        Sleeper(Arc::new(f))
    }

    pub(crate) fn sleep(&self, d: Duration) -> BoxFuture<'static, ()> {
        (self.0)(d)
    }
}

impl fmt::Debug for Sleeper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Sleeper(..)")
    }
}

/// When appended records become durable. `#[non_exhaustive]`: match with a
/// wildcard arm, new policies are not breaking changes.
///
/// ```
/// use std::time::Duration;
/// assert!(matches!(wal::SyncPolicy::default(), wal::SyncPolicy::Always));
/// let sleeper = wal::Sleeper::new(|_d| Box::pin(async {}));
/// let batched = wal::SyncPolicy::batched(Duration::from_micros(200), 8, sleeper);
/// assert!(wal::Options::default().sync_policy(batched).validate().is_ok());
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub enum SyncPolicy {
    /// An append returns only when its records (and, for a new segment, the
    /// segment's directory entry) are durable. Concurrent appenders share one
    /// write and one `fdatasync` (group commit). The default.
    #[default]
    Always,
    /// An append returns when its records are written to the page cache (they
    /// survive a process crash, not a power loss); [`crate::Wal::sync`] makes
    /// everything appended before it durable. With
    /// [`Options::write_buffer_bytes`] set, an append returns once its records
    /// are in a buffer in memory: they survive neither a process crash nor a
    /// power loss until the buffer is written (see that option).
    Manual,
    /// Like `Always`, but the group-commit leader waits before writing so
    /// that more appenders share each fsync: up to `max_delay`, and no
    /// longer than until `max_records` appends are queued or every live
    /// appender (an `append` or `append_batch` call that has not returned)
    /// has its append in the queue. Appends still return only when durable.
    /// A timer coarser than `max_delay` lengthens the wait (see [`Sleeper`]).
    Batched {
        /// Longest time the leader waits for more appenders (at most 1 s).
        max_delay: Duration,
        /// Stop waiting once this many appends are queued.
        max_records: usize,
        /// How to wait on the caller's runtime.
        sleeper: Sleeper,
    },
}

impl SyncPolicy {
    /// [`SyncPolicy::Batched`] with these parameters.
    ///
    /// ```
    /// use std::time::Duration;
    /// let p = wal::SyncPolicy::batched(Duration::from_millis(1), 16, wal::Sleeper::new(|_d| Box::pin(async {})));
    /// assert!(matches!(p, wal::SyncPolicy::Batched { max_records: 16, .. }));
    /// ```
    pub fn batched(max_delay: Duration, max_records: usize, sleeper: Sleeper) -> Self {
        SyncPolicy::Batched {
            max_delay,
            max_records,
            sleeper,
        }
    }
}

/// What recovery at open does with damage in the active segment. Whatever
/// the mode, damage that cannot come from a crash (invalid or overlapping
/// segment names, a header that does not match its name, a newer format
/// version, a bad frame in a sealed segment) is always `Error::Corruption`.
///
/// ```
/// assert_eq!(wal::RecoveryMode::default(), wal::RecoveryMode::TolerateTornTail);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RecoveryMode {
    /// Cut a torn tail (an incomplete or bad frame with nothing once-durable
    /// after it) and remove a new segment whose header never became durable;
    /// fail the open with `Corruption` on mid-log damage. A zero tail is the
    /// clean end of the log. The default.
    #[default]
    TolerateTornTail,
    /// Fail the open on a torn tail or a torn new segment too (a zero tail is
    /// still the clean end). For logs that are only ever closed cleanly.
    AbsoluteConsistency,
    /// Recover to the last valid record before the first damage in the
    /// active segment and cut everything after it, even valid records: data
    /// loss there is accepted. The cut is reported in
    /// [`crate::RecoveryReport`].
    PointInTime,
}

/// Options for [`crate::Wal::open`]. Every field has a limit; `validate`
/// checks them (and `open` calls it).
///
/// Built from [`Options::default`] with one setter per field, each named
/// after its field; the fields are public to read. The struct is
/// `#[non_exhaustive]`, so a new option is not a breaking change (and a
/// struct expression cannot build it outside this crate).
///
/// ```
/// use wal::{Options, RecoveryMode};
/// let opts = Options::default()
///     .segment_size_bytes(1 << 20)
///     .recovery_mode(RecoveryMode::PointInTime);
/// assert!(opts.validate().is_ok());
/// assert_eq!(opts.segment_size_bytes, 1 << 20);
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Options {
    /// Rotate the active segment once it holds at least this many bytes.
    pub segment_size_bytes: u64,
    /// Rotate the active segment once it holds this many records.
    pub segment_max_records: u64,
    /// When appends become durable.
    pub sync_policy: SyncPolicy,
    /// What recovery does with damage in the active segment.
    pub recovery_mode: RecoveryMode,
    /// The index of the first record of a new, empty log (0 allowed).
    pub first_index: u64,
    /// Largest record payload accepted, at most [`MAX_RECORD_BYTES`].
    pub max_record_bytes: usize,
    /// Most records in one atomic batch.
    pub max_batch_records: usize,
    /// Most payload bytes written by one group commit (a batch must fit).
    pub max_write_bytes: usize,
    /// Backpressure: appends wait while this many payload bytes are queued.
    pub max_queue_bytes: usize,
    /// Backpressure: appends wait while this many appends are queued.
    pub max_queue_appends: usize,
    /// After every fsync the next write starts at a multiple of this many
    /// bytes (the gap is a padding frame), and a segment's first record starts
    /// at this offset. So no write ever touches a sector that holds
    /// acknowledged data: a power loss that garbles the sectors of an
    /// in-flight write (devices whose sector writes are not atomic) cannot
    /// take acknowledged records with it. Set it to the device's atomic write
    /// unit or larger (4096 covers 512-byte and 4 KiB devices); 8 turns
    /// padding off for devices trusted to write sectors atomically. A power
    /// of two in `8..=1 MiB`.
    pub durable_alignment_bytes: u64,
    /// How many prune calls an iterator's lease may hold back before it is
    /// revoked (its iterator then returns `Error::IteratorExpired`): a leaked
    /// iterator cannot wedge pruning forever.
    pub max_lease_holds: u32,
    /// The active segment is zero-filled this far ahead of the last write
    /// (rounded to multiples of it, never past `segment_size_bytes`), so
    /// that durable appends overwrite allocated space and each fdatasync
    /// commits no file-size change (about 1.4x faster on ext4). 0 turns it
    /// off. The zero tail is cut when the segment is sealed or closed.
    /// Not done while [`Options::write_buffer_bytes`] is on (no append waits
    /// for an fdatasync then, so the zeros would only double the writes).
    pub preallocate_bytes: u64,
    /// An opt-in write buffer in user space for [`SyncPolicy::Manual`]; 0 (the
    /// default) turns it off. When on, an append encodes its frames into a
    /// buffer in memory and returns; the buffer is written to the active
    /// segment with one positional write when the next append would take it
    /// past this many bytes, and always before [`crate::Wal::sync`], a
    /// rotation, [`crate::Wal::close`], a truncation, a prune that empties the
    /// log, a compaction, and any read of a buffered record. Bulk loads of
    /// small records then cost one write call per buffer instead of one per
    /// append.
    ///
    /// **Durability.** Buffered records are acknowledged and readable through
    /// this `Wal` (reads and iterators write the buffer first), but they are
    /// **lost on a process crash**, not only on a power loss, and so is
    /// everything still buffered when the `Wal` is dropped without
    /// [`crate::Wal::close`]. What a crash can take is always a suffix of the
    /// records not yet synced, never a gap. `sync()` and `close()` make every
    /// acknowledged record durable, as without the buffer. With 0, the
    /// [`SyncPolicy::Manual`] promise stands: appends survive a process crash.
    ///
    /// **Failure.** A failed write of the buffer stops the WAL (every later
    /// call returns `Error::Stopped`), like a failed fsync: its records were
    /// already acknowledged.
    ///
    /// Only with [`SyncPolicy::Manual`] (`validate` refuses it with another
    /// policy, whose appends must be durable when they return); at most
    /// 64 MiB.
    ///
    /// ```
    /// use wal::{Options, SyncPolicy};
    /// let opts = Options::default().sync_policy(SyncPolicy::Manual).write_buffer_bytes(1 << 20);
    /// assert!(opts.validate().is_ok());
    /// let always = Options::default().write_buffer_bytes(1 << 20);
    /// assert!(always.validate().is_err());
    /// ```
    pub write_buffer_bytes: usize,
    /// Open without changing anything: no write, removal, rename, fsync or
    /// directory creation, so read-only files, directories and media work,
    /// and the directory is byte for byte what it was. The open takes a
    /// shared lock ([`simfs::Fs::lock_dir_shared`]): other read-only opens
    /// may run at once, a writable open may not (`Error::Locked` either
    /// way). Recovery runs in [`Options::recovery_mode`] and its report says
    /// what a writable open would do ([`crate::RecoveryReport::read_only`]);
    /// reads, iterators, [`crate::Wal::verify`] and the inspection calls
    /// work, every call that would change the log returns
    /// `Error::ReadOnly`, and `close` only releases the lock. The log is
    /// served as a writable open would leave it: a torn tail is not served,
    /// a restorable compaction output is served from its temporary name.
    /// One thing cannot be served without writing: the journal of an
    /// interrupted recovery (the open fails with `Error::ReadOnly`).
    ///
    /// ```
    /// use std::path::Path;
    /// use wal::{Error, Options, Wal};
    ///
    /// futures::executor::block_on(async {
    ///     let fs = simfs::SimFs::new(1);
    ///     let w = Wal::open(fs.clone(), Path::new("/log"), Options::default()).await?;
    ///     w.append(b"a".to_vec()).await?;
    ///     w.close().await?;
    ///     let ro = Options::default().read_only(true);
    ///     let r = Wal::open(fs, Path::new("/log"), ro).await?;
    ///     assert_eq!(r.read(0).await?, b"a");
    ///     assert!(matches!(r.append(b"b".to_vec()).await, Err(Error::ReadOnly { .. })));
    ///     r.close().await
    /// }).unwrap();
    /// ```
    pub read_only: bool,
}

/// Largest `Options::write_buffer_bytes`.
pub(crate) const MAX_WRITE_BUFFER_BYTES: usize = 64 << 20;

impl Default for Options {
    fn default() -> Self {
        Options {
            segment_size_bytes: 64 << 20,
            segment_max_records: u64::MAX,
            sync_policy: SyncPolicy::Always,
            recovery_mode: RecoveryMode::TolerateTornTail,
            first_index: 0,
            max_record_bytes: 16 << 20,
            max_batch_records: 65_536,
            max_write_bytes: 64 << 20,
            max_queue_bytes: 128 << 20,
            max_queue_appends: 65_536,
            durable_alignment_bytes: 4096,
            max_lease_holds: 16,
            preallocate_bytes: 1 << 20,
            write_buffer_bytes: 0,
            read_only: false,
        }
    }
}

impl Options {
    /// The argument checks of an append (before admission, so a refused
    /// call changes nothing): not empty, no record over `max_record_bytes`,
    /// the batch within `max_batch_records` and `max_write_bytes`. Returns
    /// the payload bytes.
    pub(crate) fn check_records(&self, records: &[Vec<u8>]) -> Result<usize> {
        if records.is_empty() {
            return Err(Error::EmptyBatch);
        }
        let mut bytes = 0usize;
        for r in records {
            if r.len() > self.max_record_bytes {
                return Err(Error::RecordTooLarge {
                    len: r.len(),
                    max: self.max_record_bytes,
                });
            }
            bytes += r.len();
        }
        if records.len() > self.max_batch_records || bytes > self.max_write_bytes {
            return Err(Error::BatchTooLarge {
                records: records.len(),
                bytes,
                max_records: self.max_batch_records,
                max_bytes: self.max_write_bytes,
            });
        }
        Ok(bytes)
    }

    #[must_use]
    /// Sets [`Options::segment_size_bytes`].
    pub fn segment_size_bytes(mut self, segment_size_bytes: u64) -> Self {
        self.segment_size_bytes = segment_size_bytes;
        self
    }

    #[must_use]
    /// Sets [`Options::segment_max_records`].
    pub fn segment_max_records(mut self, segment_max_records: u64) -> Self {
        self.segment_max_records = segment_max_records;
        self
    }

    #[must_use]
    /// Sets [`Options::sync_policy`].
    pub fn sync_policy(mut self, sync_policy: SyncPolicy) -> Self {
        self.sync_policy = sync_policy;
        self
    }

    #[must_use]
    /// Sets [`Options::recovery_mode`].
    pub fn recovery_mode(mut self, recovery_mode: RecoveryMode) -> Self {
        self.recovery_mode = recovery_mode;
        self
    }

    #[must_use]
    /// Sets [`Options::first_index`].
    pub fn first_index(mut self, first_index: u64) -> Self {
        self.first_index = first_index;
        self
    }

    #[must_use]
    /// Sets [`Options::max_record_bytes`].
    pub fn max_record_bytes(mut self, max_record_bytes: usize) -> Self {
        self.max_record_bytes = max_record_bytes;
        self
    }

    #[must_use]
    /// Sets [`Options::max_batch_records`].
    pub fn max_batch_records(mut self, max_batch_records: usize) -> Self {
        self.max_batch_records = max_batch_records;
        self
    }

    #[must_use]
    /// Sets [`Options::max_write_bytes`].
    pub fn max_write_bytes(mut self, max_write_bytes: usize) -> Self {
        self.max_write_bytes = max_write_bytes;
        self
    }

    #[must_use]
    /// Sets [`Options::max_queue_bytes`].
    pub fn max_queue_bytes(mut self, max_queue_bytes: usize) -> Self {
        self.max_queue_bytes = max_queue_bytes;
        self
    }

    #[must_use]
    /// Sets [`Options::max_queue_appends`].
    pub fn max_queue_appends(mut self, max_queue_appends: usize) -> Self {
        self.max_queue_appends = max_queue_appends;
        self
    }

    #[must_use]
    /// Sets [`Options::durable_alignment_bytes`].
    pub fn durable_alignment_bytes(mut self, durable_alignment_bytes: u64) -> Self {
        self.durable_alignment_bytes = durable_alignment_bytes;
        self
    }

    #[must_use]
    /// Sets [`Options::max_lease_holds`].
    pub fn max_lease_holds(mut self, max_lease_holds: u32) -> Self {
        self.max_lease_holds = max_lease_holds;
        self
    }

    #[must_use]
    /// Sets [`Options::preallocate_bytes`].
    pub fn preallocate_bytes(mut self, preallocate_bytes: u64) -> Self {
        self.preallocate_bytes = preallocate_bytes;
        self
    }

    #[must_use]
    /// Sets [`Options::write_buffer_bytes`].
    pub fn write_buffer_bytes(mut self, write_buffer_bytes: usize) -> Self {
        self.write_buffer_bytes = write_buffer_bytes;
        self
    }

    #[must_use]
    /// Sets [`Options::read_only`].
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// Checks every limit; `Error::InvalidArgument` says which one is off.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidArgument(m));
        if self.segment_size_bytes < 4096 {
            return bad(format!("segment_size_bytes {} < 4096", self.segment_size_bytes));
        }
        if self.segment_max_records == 0 {
            return bad("segment_max_records must be at least 1".into());
        }
        if self.max_record_bytes > MAX_RECORD_BYTES as usize {
            return bad(format!(
                "max_record_bytes {} > format maximum {}",
                self.max_record_bytes, MAX_RECORD_BYTES
            ));
        }
        if self.max_batch_records == 0 || self.max_batch_records > 1 << 24 {
            return bad(format!("max_batch_records {} not in 1..=2^24", self.max_batch_records));
        }
        if self.max_write_bytes < self.max_record_bytes {
            return bad("max_write_bytes must be at least max_record_bytes".into());
        }
        if self.max_queue_bytes < self.max_write_bytes || self.max_queue_appends == 0 {
            return bad("max_queue_bytes must be at least max_write_bytes, max_queue_appends at least 1".into());
        }
        let align = self.durable_alignment_bytes;
        if !align.is_power_of_two() || !(8..=1 << 20).contains(&align) {
            return bad(format!(
                "durable_alignment_bytes {align} is not a power of two in 8..=1 MiB"
            ));
        }
        if self.segment_size_bytes < 2 * align {
            return bad(format!(
                "segment_size_bytes must be at least twice durable_alignment_bytes ({align})"
            ));
        }
        if self.first_index == u64::MAX {
            return bad("first_index must be below u64::MAX".into());
        }
        if self.write_buffer_bytes > MAX_WRITE_BUFFER_BYTES {
            return bad(format!(
                "write_buffer_bytes {} > {MAX_WRITE_BUFFER_BYTES}",
                self.write_buffer_bytes
            ));
        }
        if self.write_buffer_bytes > 0 && !matches!(self.sync_policy, SyncPolicy::Manual) {
            // Under Always and Batched an append must be durable when it
            // returns: a record held in memory is not.
            return bad("write_buffer_bytes needs SyncPolicy::Manual".into());
        }
        if let SyncPolicy::Batched {
            max_delay, max_records, ..
        } = &self.sync_policy
        {
            if *max_delay > Duration::from_secs(1) || *max_records == 0 {
                return bad(format!(
                    "Batched: max_delay ({max_delay:?}) must be at most 1 s and max_records ({max_records}) at least 1"
                ));
            }
        }
        Ok(())
    }
}
