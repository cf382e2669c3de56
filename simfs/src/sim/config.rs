//! Configuration of [`crate::SimFs`]: the profile, the fault probabilities, the
//! clock, and the names of the faults it counts.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

/// What a failed `sync_data`/`sync_all` does to the page cache, after the
/// filesystems measured by Rebello et al. (ATC'20, CuttleFS).
///
/// ```
/// let p = simfs::SyncFailureProfile::default();
/// assert_eq!(p, simfs::SyncFailureProfile::Ext4Ordered);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SyncFailureProfile {
    /// ext4 (data=ordered) and xfs: the dirty pages are marked clean but keep
    /// the new bytes in memory; they are not durable and will not be written
    /// back. The error is reported once per open handle; the next sync returns Ok.
    #[default]
    Ext4Ordered,
    /// ext4 data=journal: as `Ext4Ordered`, but the error is reported one sync
    /// late (the failing sync returns Ok, the next one fails).
    Ext4DataJournal,
    /// btrfs: the page cache reverts to the durable content; the error is
    /// reported to the caller.
    Btrfs,
}

/// The two ways a simulated machine goes down, for [`crate::SimFs::crash`].
///
/// ```
/// assert_ne!(simfs::CrashKind::Process, simfs::CrashKind::PowerLoss);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CrashKind {
    /// The process dies: open handles and locks are gone, the page cache
    /// (volatile data and directory entries) survives.
    Process,
    /// The machine loses power: the durable image plus a seeded subset of
    /// in-flight writes (torn at the atomic write unit) and of pending
    /// directory operations survive.
    PowerLoss,
}

/// Probability of each fault class, each in `0.0..=1.0`, drawn per operation
/// of the matching kind. All zero by default ([`FaultConfig::none`]).
///
/// ```
/// let f = simfs::FaultConfig { eio_write: 0.01, ..simfs::FaultConfig::none() };
/// assert!(f.any());
/// assert!(!simfs::FaultConfig::none().any());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FaultConfig {
    /// `StorageFull` on a write, at random (besides the capacity limit).
    pub enospc_write: f64,
    /// `StorageFull` when creating a file or renaming, at random.
    pub enospc_metadata: f64,
    /// EIO on a read.
    pub eio_read: f64,
    /// EIO on a write (nothing is written; see also
    /// [`FaultConfig::eio_write_after_effect`]).
    pub eio_write: f64,
    /// EIO on open.
    pub eio_open: f64,
    /// EIO on rename (nothing is renamed).
    pub eio_rename: f64,
    /// EIO on remove (nothing is removed).
    pub eio_remove: f64,
    /// `sync_data`/`sync_all` fails with the semantics of the
    /// [`SyncFailureProfile`]; `sync_dir` fails without persisting entries.
    pub sync_fail: f64,
    /// A sync returns Ok but persists nothing (a device cache that lies).
    pub lying_sync: f64,
    /// When data becomes durable, a sector of it becomes unreadable (EIO) until
    /// rewritten.
    pub latent_sector_error: f64,
    /// When data becomes durable, a bit of a sector of it flips.
    pub bit_rot: f64,
    /// When a dirty page becomes durable, it lands at another page of the file
    /// and its target keeps its old durable content.
    pub misdirected_write: f64,
    /// A read returns fewer bytes than it could.
    pub short_read: f64,
    /// Per operation, one dirty page is written back (made durable) in the
    /// background.
    pub writeback: f64,
    /// At power loss, garbage instead of zeros/old bytes in torn sectors.
    pub torn_garbage: f64,
    /// A write takes effect (the whole buffer, or a seeded non-empty prefix
    /// of it, in the page cache and dirty like any write) and then returns
    /// EIO: the caller is not told how much was written
    /// ([`FaultKind::EioWriteAfterEffect`]).
    pub eio_write_after_effect: f64,
    /// `set_len` takes effect (the new length, in the page cache, exactly as
    /// a successful one) and then returns EIO
    /// ([`FaultKind::EioSetLenAfterEffect`]).
    pub eio_set_len_after_effect: f64,
    /// A rename takes effect (live entries changed, the directory operation
    /// pending exactly as after a successful rename) and then returns EIO
    /// ([`FaultKind::EioRenameAfterEffect`]).
    pub eio_rename_after_effect: f64,
    /// `remove_file` takes effect (the live entry gone, the unlink pending
    /// exactly as after a successful remove) and then returns EIO
    /// ([`FaultKind::EioRemoveAfterEffect`]).
    pub eio_remove_after_effect: f64,
    /// An `open` with `create`/`create_new` that creates a new file creates
    /// it (the live entry there, the link pending) and then returns EIO: no
    /// handle is returned, the empty file exists
    /// ([`FaultKind::EioCreateAfterEffect`]).
    pub eio_create_after_effect: f64,
    /// A sync (`sync_data`/`sync_all`, or `sync_dir`) persists everything a
    /// successful one would and then reports EIO. The error is not recorded
    /// in the inode's errseq: later syncs, from this handle or any other,
    /// report only errors of their own ([`FaultKind::SyncFailAfterPersist`]).
    pub sync_fail_after_persist: f64,
}

impl FaultConfig {
    /// No faults at all (the heal phase).
    pub fn none() -> Self {
        Self::default()
    }

    /// Whether any fault probability is non-zero.
    pub fn any(&self) -> bool {
        let p = [
            self.enospc_write,
            self.enospc_metadata,
            self.eio_read,
            self.eio_write,
            self.eio_open,
            self.eio_rename,
            self.eio_remove,
            self.sync_fail,
            self.lying_sync,
            self.latent_sector_error,
            self.bit_rot,
            self.misdirected_write,
            self.short_read,
            self.writeback,
            self.torn_garbage,
            self.eio_write_after_effect,
            self.eio_set_len_after_effect,
            self.eio_rename_after_effect,
            self.eio_remove_after_effect,
            self.eio_create_after_effect,
            self.sync_fail_after_persist,
        ];
        p.iter().any(|&x| x > 0.0)
    }
}

/// Simulated time for [`crate::SimFs`]: where it reads the time for its trace
/// and how it waits out an operation's latency.
///
/// The default [`LogicalClock`] never waits. With the `madsim` feature,
/// `simfs::MadsimClock` sleeps in madsim's simulated time so that concurrent
/// tasks interleave around I/O.
pub trait SimClock: Send + Sync + 'static {
    /// Nanoseconds since the start of the simulation.
    fn now_ns(&self) -> u64;
    /// Waits `duration` of simulated time.
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()>;
}

/// A clock that never advances by itself and never waits: operations complete
/// at once. Good for unit tests under any executor.
///
/// ```
/// use simfs::SimClock;
/// assert_eq!(simfs::LogicalClock.now_ns(), 0);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct LogicalClock;

impl SimClock for LogicalClock {
    fn now_ns(&self) -> u64 {
        0
    }
    fn sleep(&self, _duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(futures::future::ready(()))
    }
}

/// Everything [`crate::SimFs`] needs besides its seed.
///
/// ```
/// let cfg = simfs::SimConfig { atomic_write_unit_bytes: 512, ..Default::default() };
/// let fs = simfs::SimFs::with_config(7, cfg);
/// # drop(fs);
/// ```
#[derive(Clone)]
pub struct SimConfig {
    /// What a failed sync does.
    pub profile: SyncFailureProfile,
    /// The device's atomic write unit: a power loss tears writes at this
    /// granularity. 512 or 4096.
    pub atomic_write_unit_bytes: u32,
    /// Total bytes the device holds (`None`: unlimited). Writes past it are
    /// short, then fail with `StorageFull`.
    pub capacity_bytes: Option<u64>,
    /// Fault probabilities.
    pub faults: FaultConfig,
    /// Latency of each operation, drawn uniformly from this range of
    /// microseconds and waited with [`SimClock::sleep`] (0..=0: no wait).
    pub latency_us: (u64, u64),
    /// Simulated time source.
    pub clock: Arc<dyn SimClock>,
    /// How many trace events are kept (older ones are dropped but still hashed).
    pub trace_capacity: usize,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            profile: SyncFailureProfile::default(),
            atomic_write_unit_bytes: 4096,
            capacity_bytes: None,
            faults: FaultConfig::none(),
            latency_us: (0, 0),
            clock: Arc::new(LogicalClock),
            trace_capacity: 4096,
        }
    }
}

impl fmt::Debug for SimConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimConfig")
            .field("profile", &self.profile)
            .field("atomic_write_unit_bytes", &self.atomic_write_unit_bytes)
            .field("capacity_bytes", &self.capacity_bytes)
            .field("faults", &self.faults)
            .field("latency_us", &self.latency_us)
            .field("trace_capacity", &self.trace_capacity)
            .finish()
    }
}

/// Every kind of fault or crash [`crate::SimFs`] injects, for its counters.
///
/// ```
/// assert_eq!(simfs::FaultKind::ALL.len(), simfs::FaultKind::COUNT);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    /// A write failed with `StorageFull` (random or capacity).
    EnospcWrite,
    /// A write was cut short because the device filled up.
    ShortWrite,
    /// A create or rename failed with `StorageFull`.
    EnospcMetadata,
    /// A read failed with EIO.
    EioRead,
    /// A write failed with EIO.
    EioWrite,
    /// An open failed with EIO.
    EioOpen,
    /// A rename failed with EIO.
    EioRename,
    /// A remove failed with EIO.
    EioRemove,
    /// A sync (file or directory) failed.
    SyncFail,
    /// A sync returned Ok and persisted nothing.
    LyingSync,
    /// A sector became unreadable.
    LatentSectorError,
    /// A read hit an unreadable sector.
    LatentSectorRead,
    /// A bit flipped in durable data.
    BitRot,
    /// A page landed at the wrong offset.
    MisdirectedWrite,
    /// A read returned fewer bytes than it could.
    ShortRead,
    /// A dirty page was written back in the background.
    Writeback,
    /// At power loss, an in-flight write was torn (part of its sectors kept).
    TornWrite,
    /// At power loss, a torn sector was filled with garbage.
    TornGarbage,
    /// At power loss, an in-flight write was lost entirely.
    LostWrite,
    /// At power loss, a pending directory operation was lost.
    LostDirOp,
    /// At power loss, a pending directory operation was kept.
    KeptDirOp,
    /// At power loss, an undone unlink brought a file back.
    ResurrectedFile,
    /// A process crash.
    ProcessCrash,
    /// A power loss.
    PowerLoss,
    /// A write took effect (whole or a prefix) and then returned EIO.
    EioWriteAfterEffect,
    /// A `set_len` took effect and then returned EIO.
    EioSetLenAfterEffect,
    /// A rename took effect (live, pending like a successful one) and then
    /// returned EIO.
    EioRenameAfterEffect,
    /// A remove took effect (live, pending like a successful one) and then
    /// returned EIO.
    EioRemoveAfterEffect,
    /// An open created a new file and then returned EIO (no handle).
    EioCreateAfterEffect,
    /// A sync (file or directory) persisted everything and then reported EIO.
    SyncFailAfterPersist,
}

impl FaultKind {
    /// How many kinds there are.
    pub const COUNT: usize = 30;
    /// Every kind, in declaration order.
    pub const ALL: [FaultKind; FaultKind::COUNT] = [
        FaultKind::EnospcWrite,
        FaultKind::ShortWrite,
        FaultKind::EnospcMetadata,
        FaultKind::EioRead,
        FaultKind::EioWrite,
        FaultKind::EioOpen,
        FaultKind::EioRename,
        FaultKind::EioRemove,
        FaultKind::SyncFail,
        FaultKind::LyingSync,
        FaultKind::LatentSectorError,
        FaultKind::LatentSectorRead,
        FaultKind::BitRot,
        FaultKind::MisdirectedWrite,
        FaultKind::ShortRead,
        FaultKind::Writeback,
        FaultKind::TornWrite,
        FaultKind::TornGarbage,
        FaultKind::LostWrite,
        FaultKind::LostDirOp,
        FaultKind::KeptDirOp,
        FaultKind::ResurrectedFile,
        FaultKind::ProcessCrash,
        FaultKind::PowerLoss,
        FaultKind::EioWriteAfterEffect,
        FaultKind::EioSetLenAfterEffect,
        FaultKind::EioRenameAfterEffect,
        FaultKind::EioRemoveAfterEffect,
        FaultKind::EioCreateAfterEffect,
        FaultKind::SyncFailAfterPersist,
    ];
    /// The kinds that strike after the operation took effect (it happened,
    /// and the caller got an error anyway).
    pub const AFTER_EFFECT: [FaultKind; 6] = [
        FaultKind::EioWriteAfterEffect,
        FaultKind::EioSetLenAfterEffect,
        FaultKind::EioRenameAfterEffect,
        FaultKind::EioRemoveAfterEffect,
        FaultKind::EioCreateAfterEffect,
        FaultKind::SyncFailAfterPersist,
    ];
}

/// Per-kind counts of injected faults, from [`crate::SimFs::counters`].
///
/// ```
/// let c = simfs::FaultCounters::default();
/// assert_eq!(c.get(simfs::FaultKind::BitRot), 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FaultCounters {
    counts: [u64; FaultKind::COUNT],
}

impl FaultCounters {
    /// The count of one kind.
    pub fn get(&self, kind: FaultKind) -> u64 {
        self.counts[kind as usize]
    }
    /// Adds one to a kind.
    pub fn bump(&mut self, kind: FaultKind) {
        self.counts[kind as usize] += 1;
    }
    /// Adds another set of counters to this one.
    pub fn merge(&mut self, other: &FaultCounters) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
    }
    /// Every kind with its count, in declaration order.
    pub fn iter(&self) -> impl Iterator<Item = (FaultKind, u64)> + '_ {
        FaultKind::ALL.iter().map(move |&k| (k, self.get(k)))
    }
    /// The sum over all kinds.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }
}
