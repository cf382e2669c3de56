//! The swarm configuration: everything one seed decides about a run.
//!
//! [`RunConfig::from_seed`] draws every parameter from a ChaCha8 stream of the
//! seed, so one number names the whole run. [`Overrides`] (from `SIM_SHRINK`)
//! switch fault classes off and cut the round count without changing anything
//! else the seed decided, which is what shrinking needs.

use std::fmt;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use simfs::{FaultConfig, SyncFailureProfile};
use wal::{CompactionOptions, Options, RecoveryMode, Sleeper, SyncPolicy};

/// One switchable class of fault or event. The discriminant is its bit in
/// [`RunConfig::mask`] and in the `SIM_SHRINK` mask.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultClass {
    /// Random `StorageFull` on writes.
    EnospcWrite = 0,
    /// Random `StorageFull` on create/rename.
    EnospcMetadata,
    /// EIO on reads.
    EioRead,
    /// EIO on writes.
    EioWrite,
    /// EIO on open.
    EioOpen,
    /// EIO on rename.
    EioRename,
    /// EIO on remove.
    EioRemove,
    /// Failing fsyncs (semantics by profile).
    SyncFail,
    /// fsyncs that return Ok and persist nothing.
    LyingSync,
    /// Sectors that become unreadable.
    LatentSectorError,
    /// Bit flips in durable data.
    BitRot,
    /// Pages written back at the wrong offset.
    MisdirectedWrite,
    /// Short reads.
    ShortRead,
    /// Background writeback of dirty pages.
    Writeback,
    /// Garbage in torn sectors at power loss.
    TornGarbage,
    /// Disk-full episodes (a capacity limit for a round).
    DiskFull,
    /// Process crashes at random points.
    ProcessCrash,
    /// Power losses at random points.
    PowerLoss,
    /// Crashes while `Wal::open` runs.
    CrashDuringOpen,
    /// Operations that take effect and then fail with EIO: writes (whole or
    /// a prefix), `set_len`, renames, removes, creates, and syncs that
    /// persist everything and report EIO (each at its own probability,
    /// [`RunConfig::after_effect`]).
    AfterEffect,
    /// A share ([`RunConfig::step_crash_pct`]) of the crashes of rounds and
    /// lifecycle operations is placed right after a durability step: the
    /// machine stops after a successful write or `set_len` of a segment or
    /// meta file, before the fsync that follows (SimFs's
    /// `pause_after_next`), and crashes there.
    CrashAfterStep,
    /// At one reopen after a crash ([`RunConfig::step_pass_reopen`]), the
    /// open is crashed after its 1st filesystem operation, reopened and
    /// crashed after its 2nd, ..., until an open completes.
    RecoveryStepCrashes,
    /// Between runs ([`RunConfig::tamper_pct`] of the reopens), the
    /// directory is tampered with as an operator, a backup tool or a bad
    /// copy would (`sim-tests/src/tamper.rs`): a segment renamed to cover
    /// older ones, to overlap, to leave a gap or to take another's id, a
    /// middle segment deleted, the meta file replaced by garbage or by
    /// another log's, a stray `*.wal` name, an unrelated file, a stray
    /// `*.wal.tmp`. Read-only opens in every mode and `verify_dir` are
    /// judged on it, then the operator restores the directory and the run
    /// goes on.
    Tamper,
    /// The writers cancel some of their calls ([`RunConfig::cancel_pct`]):
    /// an append, batch, sync, rotation or read future is dropped at a
    /// random await point (after 1 to 6 polls), as `select!` or a timeout
    /// does. The WAL must go on, and no acknowledged record may be lost,
    /// reordered or duplicated; the cancelled append may or may not be in
    /// the log.
    Cancel,
}

impl FaultClass {
    /// Every class, in bit order.
    pub const ALL: [FaultClass; 24] = [
        FaultClass::EnospcWrite,
        FaultClass::EnospcMetadata,
        FaultClass::EioRead,
        FaultClass::EioWrite,
        FaultClass::EioOpen,
        FaultClass::EioRename,
        FaultClass::EioRemove,
        FaultClass::SyncFail,
        FaultClass::LyingSync,
        FaultClass::LatentSectorError,
        FaultClass::BitRot,
        FaultClass::MisdirectedWrite,
        FaultClass::ShortRead,
        FaultClass::Writeback,
        FaultClass::TornGarbage,
        FaultClass::DiskFull,
        FaultClass::ProcessCrash,
        FaultClass::PowerLoss,
        FaultClass::CrashDuringOpen,
        FaultClass::AfterEffect,
        FaultClass::CrashAfterStep,
        FaultClass::RecoveryStepCrashes,
        FaultClass::Tamper,
        FaultClass::Cancel,
    ];

    /// This class's bit.
    pub fn bit(self) -> u32 {
        1 << (self as u32)
    }
}

/// How appends become durable, as decoded (the [`Sleeper`] is built later,
/// inside the runtime).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncKind {
    /// `SyncPolicy::Always`.
    Always,
    /// `SyncPolicy::Manual`.
    Manual,
    /// `SyncPolicy::Batched`.
    Batched {
        /// Longest wait of the leader.
        max_delay_us: u64,
        /// Appends that end the wait.
        max_records: usize,
    },
}

/// Relative weights of the operations a writer task picks from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpMix {
    /// Single append at the next index.
    pub append: u32,
    /// Atomic batch at the next index.
    pub batch: u32,
    /// Read of a random readable index.
    pub read: u32,
    /// Iterate a stretch of the log.
    pub iter: u32,
    /// Rotate on request.
    pub rotate: u32,
    /// `sync()`.
    pub sync: u32,
    /// `prune_through(k)` racing the writers (k around the log).
    pub prune: u32,
    /// `compaction_plan` then `compact` racing the writers.
    pub compact: u32,
}

impl OpMix {
    fn total(&self) -> u32 {
        self.append + self.batch + self.read + self.iter + self.rotate + self.sync + self.prune + self.compact
    }
}

/// Weights of the lifecycle operations the control task runs at quiescent
/// points (writers paused), and how often it runs one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LifecycleMix {
    /// Per cent of quiescent points followed by lifecycle operations.
    pub pct: u32,
    /// `prune_through(k)` (maybe followed by a snapshot install).
    pub prune: u32,
    /// `truncate_after(k)` / `truncate_from(i)`, valid and invalid arguments.
    pub truncate: u32,
    /// `compaction_plan` (printed) then `compact`.
    pub compact: u32,
}

impl LifecycleMix {
    /// Picks a lifecycle operation by weight.
    pub fn pick(&self, rng: &mut impl Rng) -> LifecycleOp {
        let total = (self.prune + self.truncate + self.compact).max(1);
        let x = rng.random_range(0..total);
        if x < self.prune {
            LifecycleOp::Prune
        } else if x < self.prune + self.truncate {
            LifecycleOp::Truncate
        } else {
            LifecycleOp::Compact
        }
    }
}

/// One lifecycle operation of the control task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LifecycleOp {
    /// See [`LifecycleMix::prune`].
    Prune,
    /// See [`LifecycleMix::truncate`].
    Truncate,
    /// See [`LifecycleMix::compact`].
    Compact,
}

/// One operation of a writer task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// See [`OpMix::append`].
    Append,
    /// See [`OpMix::batch`].
    Batch,
    /// See [`OpMix::read`].
    Read,
    /// See [`OpMix::iter`].
    Iter,
    /// See [`OpMix::rotate`].
    Rotate,
    /// See [`OpMix::sync`].
    Sync,
    /// See [`OpMix::prune`].
    Prune,
    /// See [`OpMix::compact`].
    Compact,
}

impl OpMix {
    /// Picks an operation by weight.
    pub fn pick(&self, rng: &mut impl Rng) -> Op {
        let mut x = rng.random_range(0..self.total().max(1));
        for (w, op) in [
            (self.append, Op::Append),
            (self.batch, Op::Batch),
            (self.read, Op::Read),
            (self.iter, Op::Iter),
            (self.rotate, Op::Rotate),
            (self.prune, Op::Prune),
            (self.compact, Op::Compact),
        ] {
            if x < w {
                return op;
            }
            x -= w;
        }
        Op::Sync
    }
}

/// Shrinking overrides: applied on top of what the seed decided.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    /// Fault classes to keep (AND-ed with the seed's mask).
    pub mask: Option<u32>,
    /// At most this many rounds.
    pub rounds: Option<u32>,
    /// Fault classes to switch on (OR-ed into the seed's mask, before
    /// `mask`), at the probability the seed drew for them: lets a
    /// proof-of-power test make the fault its planted bug needs fire in
    /// every seed instead of in a share of them.
    pub force: Option<u32>,
    /// Writers iterate and prune in every seed (the op mix's `iter` weight
    /// at least 3, `prune` at least 2): lets the proof of power of a lease
    /// bug reach iterators racing prunes in every seed.
    pub lease_ops: bool,
}

impl Overrides {
    /// Parses `mask=0x1f,rounds=3,force=0x80,lease_ops=1` (every part optional).
    pub fn parse(s: &str) -> Result<Overrides, String> {
        let mut o = Overrides::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("expected key=value, got {part:?}"))?;
            let num = |v: &str| -> Result<u64, String> {
                let r = match v.strip_prefix("0x") {
                    Some(h) => u64::from_str_radix(h, 16),
                    None => v.parse(),
                };
                r.map_err(|e| format!("bad number {v:?}: {e}"))
            };
            match k {
                "mask" => o.mask = Some(u32::try_from(num(v)?).map_err(|e| e.to_string())?),
                "rounds" => o.rounds = Some(u32::try_from(num(v)?).map_err(|e| e.to_string())?),
                "force" => o.force = Some(u32::try_from(num(v)?).map_err(|e| e.to_string())?),
                "lease_ops" => o.lease_ops = num(v)? != 0,
                _ => return Err(format!("unknown key {k:?} (mask, rounds, force, lease_ops)")),
            }
        }
        Ok(o)
    }

    /// The `SIM_SHRINK` value that reproduces these overrides.
    pub fn encode(&self) -> String {
        let mut parts = Vec::new();
        if let Some(m) = self.mask {
            parts.push(format!("mask=0x{m:x}"));
        }
        if let Some(r) = self.rounds {
            parts.push(format!("rounds={r}"));
        }
        if let Some(f) = self.force {
            parts.push(format!("force=0x{f:x}"));
        }
        if self.lease_ops {
            parts.push("lease_ops=1".into());
        }
        parts.join(",")
    }

    /// Whether nothing is overridden.
    pub fn is_empty(&self) -> bool {
        self.mask.is_none() && self.rounds.is_none() && self.force.is_none() && !self.lease_ops
    }
}

/// Everything one seed decides.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// The seed.
    pub seed: u64,
    /// Concurrent writer tasks (1 to 64).
    pub writers: u16,
    /// Largest atomic batch the workload submits.
    pub max_batch: usize,
    /// `Options::max_record_bytes`; records of exactly this size are written.
    pub max_record_bytes: usize,
    /// Per cent of records that are empty.
    pub zero_record_pct: u32,
    /// Per cent of records of the maximum size.
    pub max_record_pct: u32,
    /// Typical largest record (most sizes are below this).
    pub typical_record_bytes: usize,
    /// `Options::segment_size_bytes`.
    pub segment_size_bytes: u64,
    /// `Options::segment_max_records`.
    pub segment_max_records: u64,
    /// `Options::max_queue_appends` (small values exercise backpressure).
    pub max_queue_appends: usize,
    /// `Options::first_index`.
    pub first_index: u64,
    /// Sync policy.
    pub sync: SyncKind,
    /// Recovery mode.
    pub recovery_mode: RecoveryMode,
    /// SimFs sync-failure profile.
    pub profile: SyncFailureProfile,
    /// Atomic write unit, 512 or 4096.
    pub atomic_unit: u32,
    /// Latency range of SimFs operations, in microseconds.
    pub latency_us: (u64, u64),
    /// Fault classes on (after overrides).
    pub mask: u32,
    /// Fault probabilities (zero for classes off).
    pub faults: FaultConfig,
    /// Rounds of the workload before the heal phase.
    pub rounds: u32,
    /// Operations per writer task per round.
    pub ops_per_writer: u32,
    /// Per cent of rounds that end in a crash (if a crash class is on).
    pub crash_pct: u32,
    /// Per cent of crashes that are power losses (when both kinds are on).
    pub power_loss_pct: u32,
    /// Per cent of opens that are crashed mid-way (if the class is on).
    pub crash_open_pct: u32,
    /// Per cent of rounds run under a capacity limit (if the class is on).
    pub disk_full_pct: u32,
    /// Per cent of rounds followed by a clean close and reopen.
    pub close_pct: u32,
    /// Per cent of rounds where one writer appends at caller-chosen indices.
    pub solo_pct: u32,
    /// Operation mix of the concurrent writers.
    pub mix: OpMix,
    /// Lifecycle operations of the control task at quiescent points.
    pub lifecycle: LifecycleMix,
    /// Compaction limits (relative to the segment size).
    pub compaction: CompactionOptions,
    /// `Options::max_lease_holds`: the default in most seeds, 0 to 3 in
    /// some (so that the workload's short iterators get revoked).
    pub max_lease_holds: u32,
    /// `Options::write_buffer_bytes`: 0 (off) unless the policy is `Manual`,
    /// then sometimes 4 KiB..1 MiB.
    pub write_buffer_bytes: usize,
    /// The probabilities the seed drew for [`FaultClass::AfterEffect`]
    /// (write, set_len, rename, remove, create, sync), whether or not the
    /// class is on; `faults` holds them only when it is.
    pub after_effect: [f64; 6],
    /// Per cent of crashes placed right after a durability step (with
    /// [`FaultClass::CrashAfterStep`]).
    pub step_crash_pct: u32,
    /// The reopen after a crash (1st, 2nd, ...) that runs the recovery
    /// step pass (with [`FaultClass::RecoveryStepCrashes`]).
    pub step_pass_reopen: u32,
    /// Per cent of reopens preceded by a tamper (with [`FaultClass::Tamper`]).
    pub tamper_pct: u32,
    /// Per cent of a writer's appends, batches, syncs, rotations and reads
    /// that it cancels (with [`FaultClass::Cancel`]).
    pub cancel_pct: u32,
}

/// Per kind of [`FaultClass::AfterEffect`]: (lowest, highest) probability.
/// Renames, removes and creates are rare (rotation, prune, compaction, meta
/// replacement), so their fault is drawn higher than a write's or a sync's.
const AFTER_EFFECT_RANGES: [(f64, f64); 6] = [
    (0.002, 0.03), // eio_write_after_effect
    (0.02, 0.2),   // eio_set_len_after_effect
    (0.02, 0.25),  // eio_rename_after_effect
    (0.02, 0.25),  // eio_remove_after_effect
    (0.01, 0.1),   // eio_create_after_effect
    (0.002, 0.03), // sync_fail_after_persist
];

/// Log-uniform draw in `[lo, hi]`.
/// `Options::max_lease_holds` for `seed`: from a stream of its own, so that
/// every other parameter (and the order of the main stream's draws) stays
/// what it was.
fn max_lease_holds(seed: u64) -> u32 {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x4c45_4153_455f_484f);
    if rng.random_bool(0.3) {
        rng.random_range(0..=3)
    } else {
        Options::default().max_lease_holds
    }
}

/// Whether `seed` cancels calls, and how often (per cent): from a stream
/// of its own, like [`max_lease_holds`].
fn cancellation(seed: u64) -> (bool, u32) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x4341_4e43_454c_5f43);
    let on = rng.random_bool(0.3);
    (on, rng.random_range(1..=8))
}

fn log_uniform(rng: &mut ChaCha8Rng, lo: f64, hi: f64) -> f64 {
    let u: f64 = rng.random();
    (lo.ln() + u * (hi.ln() - lo.ln())).exp()
}

impl RunConfig {
    /// Decodes a seed (no overrides).
    pub fn from_seed(seed: u64) -> RunConfig {
        Self::with_overrides(seed, Overrides::default())
    }

    /// Decodes a seed, then applies shrinking overrides. Everything is drawn
    /// before the overrides are applied, so they change nothing else.
    pub fn with_overrides(seed: u64, ov: Overrides) -> RunConfig {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5157_4d5f_434f_4e46);
        let writers: u16 = match rng.random_range(0..10) {
            0..=2 => 1,
            3..=6 => rng.random_range(2..=8),
            7..=8 => rng.random_range(9..=24),
            _ => rng.random_range(25..=64),
        };
        let max_batch = [1usize, 2, 4, 8, 16][rng.random_range(0..5)];
        let max_record_bytes = [64usize, 200, 1024, 4096, 16384, 65536][match rng.random_range(0..20) {
            0..=4 => 0,
            5..=9 => 1,
            10..=13 => 2,
            14..=16 => 3,
            17..=18 => 4,
            _ => 5,
        }];
        let typical_record_bytes = max_record_bytes.min(rng.random_range(64..=600));
        let zero_record_pct = rng.random_range(0..=10);
        let max_record_pct = rng.random_range(0..=6);
        let segment_size_bytes = [8192u64, 8192, 16384, 65536, 1 << 20][rng.random_range(0..5)];
        let segment_max_records = if rng.random_bool(0.5) {
            u64::MAX
        } else {
            rng.random_range(1..=64)
        };
        let max_queue_appends = if rng.random_bool(0.25) {
            rng.random_range(1..=8)
        } else {
            65_536
        };
        let first_index = match rng.random_range(0..10) {
            0..=5 => 0,
            6..=7 => rng.random_range(1..1000),
            8 => 1 << 40,
            _ => u64::MAX - (1 << 24),
        };
        let sync = match rng.random_range(0..10) {
            0..=3 => SyncKind::Always,
            4..=6 => SyncKind::Manual,
            _ => SyncKind::Batched {
                max_delay_us: rng.random_range(0..=2000),
                max_records: rng.random_range(1..=32),
            },
        };
        let recovery_mode = match rng.random_range(0..20) {
            0..=13 => RecoveryMode::TolerateTornTail,
            14..=16 => RecoveryMode::PointInTime,
            _ => RecoveryMode::AbsoluteConsistency,
        };
        let profile = match rng.random_range(0..3) {
            0 => SyncFailureProfile::Ext4Ordered,
            1 => SyncFailureProfile::Ext4DataJournal,
            _ => SyncFailureProfile::Btrfs,
        };
        let atomic_unit = if rng.random_bool(0.5) { 512 } else { 4096 };
        let latency_us = (1, rng.random_range(10..=500));

        // Swarm: each class on or off, and how often.
        let mut mask = 0u32;
        let mut p = [0f64; 15];
        let ranges: [(f64, f64, f64); 15] = [
            // (chance the class is on, lowest, highest probability)
            (0.3, 0.001, 0.02),  // enospc_write
            (0.3, 0.005, 0.05),  // enospc_metadata
            (0.3, 0.001, 0.02),  // eio_read
            (0.3, 0.001, 0.02),  // eio_write
            (0.3, 0.005, 0.05),  // eio_open
            (0.3, 0.01, 0.2),    // eio_rename
            (0.3, 0.01, 0.2),    // eio_remove
            (0.3, 0.001, 0.02),  // sync_fail
            (0.12, 0.01, 0.3),   // lying_sync
            (0.1, 0.0005, 0.01), // latent_sector_error
            (0.1, 0.0005, 0.01), // bit_rot
            (0.1, 0.0005, 0.01), // misdirected_write
            (0.3, 0.01, 0.3),    // short_read
            (0.5, 0.01, 0.5),    // writeback
            (0.3, 0.1, 1.0),     // torn_garbage
        ];
        // Every class draws its probability, on or not (a forced class uses it).
        let mut drawn = [0f64; 15];
        for (i, (on, lo, hi)) in ranges.iter().enumerate() {
            let is_on = rng.random_bool(*on);
            let v = log_uniform(&mut rng, *lo, *hi);
            drawn[i] = v;
            if is_on {
                mask |= 1 << i;
                p[i] = v;
            }
        }
        for (class, on) in [
            (FaultClass::DiskFull, 0.3),
            (FaultClass::ProcessCrash, 0.6),
            (FaultClass::PowerLoss, 0.6),
            (FaultClass::CrashDuringOpen, 0.3),
        ] {
            if rng.random_bool(on) {
                mask |= class.bit();
            }
        }
        let rounds = rng.random_range(6..=20);
        let total_ops: u32 = rng.random_range(20..=100);
        let ops_per_writer = (total_ops / u32::from(writers)).max(1);
        let crash_pct = rng.random_range(10..=50);
        let power_loss_pct = rng.random_range(20..=80);
        let crash_open_pct = rng.random_range(10..=40);
        let disk_full_pct = rng.random_range(10..=40);
        let close_pct = rng.random_range(0..=25);
        let solo_pct = rng.random_range(0..=30);
        let mix = OpMix {
            append: rng.random_range(5..=20),
            batch: rng.random_range(0..=10),
            read: rng.random_range(0..=6),
            iter: rng.random_range(0..=3),
            rotate: rng.random_range(0..=2),
            sync: rng.random_range(0..=4),
            prune: 0,
            compact: 0,
        };
        // Lifecycle (drawn after everything else, so older parameters of a
        // seed are unchanged).
        let mut mix = mix;
        mix.prune = if rng.random_bool(0.5) {
            rng.random_range(1..=3)
        } else {
            0
        };
        mix.compact = if rng.random_bool(0.5) {
            rng.random_range(1..=2)
        } else {
            0
        };
        let mut lifecycle = LifecycleMix {
            pct: if rng.random_bool(0.2) {
                0
            } else {
                rng.random_range(15..=70)
            },
            prune: rng.random_range(0..=4),
            truncate: rng.random_range(0..=4),
            compact: rng.random_range(0..=3),
        };
        if lifecycle.prune + lifecycle.truncate + lifecycle.compact == 0 {
            lifecycle.truncate = 1;
        }
        let compaction = CompactionOptions::default()
            .small_segment_bytes(segment_size_bytes * rng.random_range(1..=3))
            .max_output_bytes(segment_size_bytes * rng.random_range(2..=8));
        // The write buffer (drawn last, and only under Manual, so that every
        // other parameter of a seed stays what it was).
        let write_buffer_bytes = if sync == SyncKind::Manual && rng.random_bool(0.4) {
            (log_uniform(&mut rng, 4096.0, f64::from(1u32 << 20)).round() as usize).clamp(4096, 1 << 20)
        } else {
            0
        };
        // Faults after the effect (drawn after everything else, for the
        // same reason).
        let after_effect_on = rng.random_bool(0.3);
        let mut after_effect = [0f64; 6];
        for (v, (lo, hi)) in after_effect.iter_mut().zip(AFTER_EFFECT_RANGES) {
            *v = log_uniform(&mut rng, lo, hi);
        }
        if after_effect_on {
            mask |= FaultClass::AfterEffect.bit();
        }
        // Crash placement after durability steps, and the recovery step
        // pass (drawn last, for the same reason).
        if rng.random_bool(0.5) {
            mask |= FaultClass::CrashAfterStep.bit();
        }
        let step_crash_pct = rng.random_range(30..=80);
        if rng.random_bool(0.12) {
            mask |= FaultClass::RecoveryStepCrashes.bit();
        }
        let step_pass_reopen = rng.random_range(1..=3);
        // Tampering between runs (drawn last, for the same reason).
        if rng.random_bool(0.15) {
            mask |= FaultClass::Tamper.bit();
        }
        let tamper_pct = rng.random_range(30..=90);
        let (cancel_on, cancel_pct) = cancellation(seed);
        if cancel_on {
            mask |= FaultClass::Cancel.bit();
        }

        // Overrides.
        if let Some(extra) = ov.force {
            mask |= extra;
            for (i, v) in drawn.iter().enumerate() {
                if extra & (1 << i) != 0 {
                    p[i] = *v;
                }
            }
        }
        if let Some(keep) = ov.mask {
            mask &= keep;
        }
        if ov.lease_ops {
            mix.iter = mix.iter.max(3);
            mix.prune = mix.prune.max(2);
        }
        let rounds = ov.rounds.map_or(rounds, |r| r.min(rounds));
        let on = |c: FaultClass| mask & c.bit() != 0;
        let val = |c: FaultClass| if on(c) { p[c as usize] } else { 0.0 };
        let ae = if on(FaultClass::AfterEffect) {
            after_effect
        } else {
            [0.0; 6]
        };
        let faults = FaultConfig {
            enospc_write: val(FaultClass::EnospcWrite),
            enospc_metadata: val(FaultClass::EnospcMetadata),
            eio_read: val(FaultClass::EioRead),
            eio_write: val(FaultClass::EioWrite),
            eio_open: val(FaultClass::EioOpen),
            eio_rename: val(FaultClass::EioRename),
            eio_remove: val(FaultClass::EioRemove),
            sync_fail: val(FaultClass::SyncFail),
            lying_sync: val(FaultClass::LyingSync),
            latent_sector_error: val(FaultClass::LatentSectorError),
            bit_rot: val(FaultClass::BitRot),
            misdirected_write: val(FaultClass::MisdirectedWrite),
            short_read: val(FaultClass::ShortRead),
            writeback: val(FaultClass::Writeback),
            torn_garbage: val(FaultClass::TornGarbage),
            eio_write_after_effect: ae[0],
            eio_set_len_after_effect: ae[1],
            eio_rename_after_effect: ae[2],
            eio_remove_after_effect: ae[3],
            eio_create_after_effect: ae[4],
            sync_fail_after_persist: ae[5],
        };
        RunConfig {
            seed,
            writers,
            max_batch,
            max_record_bytes,
            zero_record_pct,
            max_record_pct,
            typical_record_bytes,
            segment_size_bytes,
            segment_max_records,
            max_queue_appends,
            first_index,
            sync,
            recovery_mode,
            profile,
            atomic_unit,
            latency_us,
            mask,
            faults,
            rounds,
            ops_per_writer,
            crash_pct,
            power_loss_pct,
            crash_open_pct,
            disk_full_pct,
            close_pct,
            solo_pct,
            mix,
            lifecycle,
            compaction,
            max_lease_holds: max_lease_holds(seed),
            write_buffer_bytes,
            after_effect,
            step_crash_pct,
            step_pass_reopen,
            tamper_pct,
            cancel_pct,
        }
    }

    /// Whether a class is on.
    pub fn on(&self, c: FaultClass) -> bool {
        self.mask & c.bit() != 0
    }

    /// Whether any crash class is on.
    pub fn crashes(&self) -> bool {
        self.on(FaultClass::ProcessCrash) || self.on(FaultClass::PowerLoss)
    }

    /// WAL options for this run (`sleeper` is only used by `Batched`).
    pub fn options(&self, sleeper: Sleeper) -> Options {
        Options::default()
            .segment_size_bytes(self.segment_size_bytes)
            .segment_max_records(self.segment_max_records)
            .sync_policy(match self.sync {
                SyncKind::Always => SyncPolicy::Always,
                SyncKind::Manual => SyncPolicy::Manual,
                SyncKind::Batched {
                    max_delay_us,
                    max_records,
                } => SyncPolicy::batched(Duration::from_micros(max_delay_us), max_records, sleeper),
            })
            .recovery_mode(self.recovery_mode)
            .first_index(self.first_index)
            .max_record_bytes(self.max_record_bytes)
            .max_batch_records(self.max_batch.max(1))
            .max_queue_appends(self.max_queue_appends)
            .write_buffer_bytes(self.write_buffer_bytes)
            .max_lease_holds(self.max_lease_holds)
    }

    /// The SimFs configuration (the clock is set by the runner).
    pub fn sim_config(&self, clock: std::sync::Arc<dyn simfs::SimClock>) -> simfs::SimConfig {
        simfs::SimConfig {
            profile: self.profile,
            atomic_write_unit_bytes: self.atomic_unit,
            capacity_bytes: None,
            faults: self.faults,
            latency_us: self.latency_us,
            clock,
            trace_capacity: 2048,
        }
    }

    /// A sleeper on madsim's simulated time.
    pub fn madsim_sleeper() -> Sleeper {
        Sleeper::new(|d: Duration| Box::pin(madsim::time::sleep(d)))
    }
}

impl fmt::Display for RunConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "seed {}", self.seed)?;
        writeln!(
            f,
            "  writers {}  max batch {}  records: max {} B (typical <= {} B, {}% empty, {}% max)",
            self.writers,
            self.max_batch,
            self.max_record_bytes,
            self.typical_record_bytes,
            self.zero_record_pct,
            self.max_record_pct
        )?;
        let max_rec = if self.segment_max_records == u64::MAX {
            "unlimited".to_string()
        } else {
            self.segment_max_records.to_string()
        };
        writeln!(
            f,
            "  segment {} B / {} records  queue {} appends  first index {}",
            self.segment_size_bytes, max_rec, self.max_queue_appends, self.first_index
        )?;
        writeln!(
            f,
            "  sync {:?}  recovery {:?}  fs profile {:?}  atomic unit {} B  latency {:?} us",
            self.sync, self.recovery_mode, self.profile, self.atomic_unit, self.latency_us
        )?;
        if self.write_buffer_bytes > 0 {
            writeln!(
                f,
                "  write buffer {} B (buffered records are lost at a process crash)",
                self.write_buffer_bytes
            )?;
        }
        if self.on(FaultClass::Cancel) {
            writeln!(f, "  cancels {}% of the writers' calls", self.cancel_pct)?;
        }
        writeln!(
            f,
            "  rounds {} x {} ops/writer  crash {}% (power loss {}%)  crash in open {}%  disk full {}%  close {}%  solo {}%",
            self.rounds,
            self.ops_per_writer,
            self.crash_pct,
            self.power_loss_pct,
            self.crash_open_pct,
            self.disk_full_pct,
            self.close_pct,
            self.solo_pct
        )?;
        if self.on(FaultClass::CrashAfterStep) || self.on(FaultClass::RecoveryStepCrashes) {
            writeln!(
                f,
                "  crashes after a durability step {}%  recovery step pass at reopen {}",
                if self.on(FaultClass::CrashAfterStep) {
                    self.step_crash_pct
                } else {
                    0
                },
                if self.on(FaultClass::RecoveryStepCrashes) {
                    self.step_pass_reopen.to_string()
                } else {
                    "-".into()
                }
            )?;
        }
        writeln!(f, "  mix {:?}", self.mix)?;
        writeln!(f, "  lifecycle {:?}  compaction {:?}", self.lifecycle, self.compaction)?;
        if self.max_lease_holds != Options::default().max_lease_holds {
            writeln!(f, "  max lease holds {}", self.max_lease_holds)?;
        }
        write!(f, "  faults on (mask 0x{:x}):", self.mask)?;
        let fc = &self.faults;
        let probs = [
            fc.enospc_write,
            fc.enospc_metadata,
            fc.eio_read,
            fc.eio_write,
            fc.eio_open,
            fc.eio_rename,
            fc.eio_remove,
            fc.sync_fail,
            fc.lying_sync,
            fc.latent_sector_error,
            fc.bit_rot,
            fc.misdirected_write,
            fc.short_read,
            fc.writeback,
            fc.torn_garbage,
        ];
        let mut any = false;
        for c in FaultClass::ALL {
            if self.on(c) {
                any = true;
                match probs.get(c as usize) {
                    Some(p) => write!(f, " {c:?}={p:.4}")?,
                    None if c == FaultClass::AfterEffect => {
                        let a = [
                            fc.eio_write_after_effect,
                            fc.eio_set_len_after_effect,
                            fc.eio_rename_after_effect,
                            fc.eio_remove_after_effect,
                            fc.eio_create_after_effect,
                            fc.sync_fail_after_persist,
                        ];
                        write!(
                            f,
                            " {c:?}(write={:.4},set_len={:.4},rename={:.4},remove={:.4},create={:.4},sync={:.4})",
                            a[0], a[1], a[2], a[3], a[4], a[5]
                        )?
                    }
                    None => write!(f, " {c:?}")?,
                }
            }
        }
        if !any {
            write!(f, " none")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_round_trip() {
        let o = Overrides {
            mask: Some(0x1f3),
            rounds: Some(4),
            force: Some(0x80),
            lease_ops: true,
        };
        assert_eq!(Overrides::parse(&o.encode()), Ok(o));
        assert_eq!(Overrides::parse(""), Ok(Overrides::default()));
        assert!(Overrides::parse("nope=1").is_err());
    }

    #[test]
    fn overrides_change_only_what_they_name() {
        let a = RunConfig::from_seed(11);
        let b = RunConfig::with_overrides(
            11,
            Overrides {
                mask: Some(0),
                rounds: Some(1),
                force: None,
                lease_ops: false,
            },
        );
        assert_eq!(b.mask, 0);
        assert_eq!(b.rounds, 1);
        assert_eq!(a.writers, b.writers);
        assert_eq!(a.segment_size_bytes, b.segment_size_bytes);
        assert_eq!(a.write_buffer_bytes, b.write_buffer_bytes);
        assert!(!b.faults.any());
    }

    #[test]
    fn the_after_effect_class_is_bit_19_drawn_last_and_forceable() {
        assert_eq!(FaultClass::AfterEffect.bit(), 1 << 19);
        let o = Overrides::parse("mask=0x80000,force=0x80000").unwrap();
        assert_eq!(Overrides::parse(&o.encode()), Ok(o));
        let cfgs: Vec<RunConfig> = (0..300).map(RunConfig::from_seed).collect();
        let on = cfgs.iter().filter(|c| c.on(FaultClass::AfterEffect)).count();
        assert!(on > 30 && on < 150, "{on} of 300 seeds");
        for c in &cfgs {
            let f = &c.faults;
            let ae = [
                f.eio_write_after_effect,
                f.eio_set_len_after_effect,
                f.eio_rename_after_effect,
                f.eio_remove_after_effect,
                f.eio_create_after_effect,
                f.sync_fail_after_persist,
            ];
            if c.on(FaultClass::AfterEffect) {
                assert_eq!(ae, c.after_effect);
                assert!(ae.iter().all(|&p| p > 0.0 && p <= 0.25));
            } else {
                assert!(ae.iter().all(|&p| p == 0.0));
            }
            // Switching the class off changes nothing else of the seed.
            let off = RunConfig::with_overrides(
                c.seed,
                Overrides {
                    mask: Some(!FaultClass::AfterEffect.bit()),
                    ..Overrides::default()
                },
            );
            assert_eq!(off.mask, c.mask & !FaultClass::AfterEffect.bit());
            assert_eq!(
                (off.writers, off.rounds, off.write_buffer_bytes),
                (c.writers, c.rounds, c.write_buffer_bytes)
            );
            assert_eq!(
                FaultConfig {
                    eio_write_after_effect: 0.0,
                    eio_set_len_after_effect: 0.0,
                    eio_rename_after_effect: 0.0,
                    eio_remove_after_effect: 0.0,
                    eio_create_after_effect: 0.0,
                    sync_fail_after_persist: 0.0,
                    ..c.faults
                },
                off.faults
            );
            // Forcing it on uses the probabilities the seed drew.
            let forced = RunConfig::with_overrides(
                c.seed,
                Overrides {
                    force: Some(FaultClass::AfterEffect.bit()),
                    ..Overrides::default()
                },
            );
            assert_eq!(forced.faults.eio_rename_after_effect, c.after_effect[2]);
        }
    }

    #[test]
    fn the_write_buffer_is_drawn_only_under_manual() {
        let cfgs: Vec<RunConfig> = (0..400).map(RunConfig::from_seed).collect();
        assert!(cfgs.iter().all(|c| c.write_buffer_bytes == 0
            || (c.sync == SyncKind::Manual && (4096..=1 << 20).contains(&c.write_buffer_bytes))));
        let on = cfgs.iter().filter(|c| c.write_buffer_bytes > 0).count();
        let manual = cfgs.iter().filter(|c| c.sync == SyncKind::Manual).count();
        assert!(on > 0 && on < manual, "{on} of {manual} Manual seeds buffer");
        assert!(cfgs
            .iter()
            .all(|c| c.options(RunConfig::madsim_sleeper()).validate().is_ok()));
    }
}
