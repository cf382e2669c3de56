//! Coverage marks: proof that the rare paths were reached. Every injected
//! fault kind (from SimFs's counters) and every rare recovery path the WAL
//! takes is counted; a sweep that misses one fails (see `tests/seeds.rs`).

use std::collections::BTreeMap;
use std::fmt;

use simfs::{FaultCounters, FaultKind};

/// A rare path of the WAL or of the workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mark {
    /// Recovery cut a torn tail (`torn_bytes_cut > 0`).
    TornTailCut,
    /// A rotation failed (`rotate()` returned an error).
    RotationFailed,
    /// The WAL stopped after an fsync (or directory fsync) error.
    StoppedAfterSyncError,
    /// An append failed with `AppendFailed` and `is_storage_full`: the
    /// partial write was cut back and the WAL went on.
    EnospcCutBack,
    /// An append failed with `AppendFailed` for another cause (EIO).
    AppendFailedOther,
    /// A crash hit while `Wal::open` was running.
    CrashDuringRecovery,
    /// Reopen failed with `Error::Corruption` (accepted: media damage or lying fsync).
    CorruptionReported,
    /// `AbsoluteConsistency` refused a torn tail; reopened with `TolerateTornTail`.
    AbsoluteRefused,
    /// An append at a caller-chosen index was refused with `WrongIndex`.
    WrongIndexRefused,
    /// An oversized record was refused with `RecordTooLarge`.
    RecordTooLargeRefused,
    /// Recovery removed a file (a torn new segment or a leftover).
    RecoveryRemovedFile,
    /// A reopen found sealed segments.
    RecoveredSealedSegments,
    /// The heal phase completed: recovery succeeded and appends went through.
    HealCompleted,
    /// The run ended early on reported damage it could not repair (a sweep
    /// should show none).
    EndedOnReportedDamage,
    /// The WAL reported damage that the damage ledger explains, and the run
    /// repaired it as an operator would (point-in-time open, or a truncation
    /// before the damaged record) and went on.
    DamageRepaired,
    /// A durable record was lost, and the damage ledger names the fault that
    /// destroyed its bytes or bytes before it in the same file.
    LostToRecordedDamage,
    /// A read reported corruption at an offset before the recorded damage
    /// of that file (a sealed segment is checked whole before a read; the
    /// recovery-trust issue makes reads of intact records before the damage
    /// succeed). Excused by the damage, counted apart.
    ReportedBeforeDamage,
    /// The operator rewrote a file's unreadable sectors (the drive's
    /// bad-block list) with zeros, so that an open could cut at them.
    SectorsRewritten,
    /// The operator moved a file with a damaged header (the meta file, an
    /// active segment) aside, so that an open could go on without it.
    FileMovedAside,
    /// Two active segments (the older one's seal, a rename, was lost): the
    /// operator gave the older one its sealed name, its frames verified.
    SealedByHand,
    /// After the meta file was moved aside, the first index moved back or
    /// pruned records came back: the low-water mark was lost with it,
    /// excused once.
    LowWaterLostWithMeta,
    /// A power loss undid directory operations or a file size a lying (or
    /// late-failing) sync had claimed durable: the first index moved back or
    /// removed records came back, excused once.
    UndoneByLyingSync,
    /// Records of an `AppendFailed` attempt were in a recovered log, and
    /// the ledger shows the cut-back of its partial write did not persist
    /// there (a lying fsync after writeback had persisted the page).
    FailedAppendCutUndone,
    /// Appends ran into backpressure (a small queue) while others were writing.
    SoloRound,
    /// A disk-full episode ran.
    DiskFullEpisode,
    /// `prune_through` returned a new first index above the old one.
    PruneDone,
    /// A prune emptied the log (`k` at or past the last record).
    FullPrune,
    /// `append_at(j)` above the next index started an emptied log at `j`.
    SnapshotInstall,
    /// `truncate_after`/`truncate_from` removed records.
    TruncateDone,
    /// A truncation cut inside an atomic batch (its kept part became a batch).
    TruncateInBatch,
    /// A truncation with an argument below the first index was refused.
    TruncateRefused,
    /// A truncation past the next index returned `Ok` and removed nothing.
    TruncatePastEnd,
    /// `compact` merged at least one run of segments.
    CompactionMerged,
    /// A prune returned keeping a sealed segment through its target that a
    /// live iterator's lease certainly held back.
    PruneHeldByLease,
    /// An iterator returned `IteratorExpired`: its lease held prunes back
    /// too often and was revoked.
    LeaseRevoked,
    /// A prune (or a snapshot install) passed a caught-up iterator, which
    /// skipped forward to the new first index. Rare (a few in 2000 seeds:
    /// the workload's iterators tail the log once, and only a prune through
    /// the end passes one), so not required.
    CaughtUpSkip,
    /// A reopen after a clean close used the clean-shutdown marker.
    CleanReopen,
    /// A crash hit while a prune ran.
    CrashDuringPrune,
    /// A crash hit while a truncation ran.
    CrashDuringTruncate,
    /// A crash hit while a compaction ran.
    CrashDuringCompaction,
    /// The write buffer (`Options::write_buffer_bytes`) was written: counts
    /// the WAL's `Stats::buffer_flushes` (full buffer, sync, seal, close,
    /// truncation, full prune, compaction, reads of buffered records).
    BufferFlushed,
    /// A rename of the meta file's replacement reported EIO after taking
    /// effect (the WAL cannot tell which meta file stands: it stops).
    MetaRenameTookEffect,
    /// A segment's rename (seal, compaction output, truncation) reported
    /// EIO after taking effect.
    SegmentRenameTookEffect,
    /// A recovery after a crash that followed a rename the WAL was told had
    /// failed but that took effect.
    RecoveredAfterRenameTookEffect,
    /// The WAL stopped after an operation that took effect and then failed
    /// (a rename, remove, create, write, `set_len` or fsync).
    StoppedAfterEffect,
    /// A crash placed right after a durability step (a write or `set_len`
    /// of a segment or meta file), before the fsync that follows.
    CrashAfterStep,
    /// ... of which right after a `set_len` (a cut).
    CrashAfterCut,
    /// A recovery step pass ran (the open crashed at its 1st, 2nd, ...
    /// operation until one completed).
    RecoveryStepPass,
    /// Crashes of the recovery step passes (steps per pass: this over
    /// `RecoveryStepPass`).
    RecoveryStepCrashes,
    /// A tamper between runs was applied (`tamper.rs`).
    TamperApplied,
    /// ... and every mode's open refused it, naming the tampered file.
    TamperRefused,
    /// ... a harmless one: the same range opened, no new problem.
    TamperHarmless,
    /// A tamper made the front of the log look lost (the segment holding
    /// the first index renamed to end below it) and the `PointInTime` open
    /// reported the loss (not required: needs an exact prune inside that
    /// segment first).
    TamperLostFrontReported,
    /// ... and the operator restored the directory exactly.
    TamperRestored,
    /// A writer cancelled a call: its future was dropped at an await point
    /// ([`crate::config::FaultClass::Cancel`]).
    CallCancelled,
    /// A cancelled append was found in the log afterwards (it had been
    /// admitted, and the WAL carried it to the file without its caller).
    CancelledAppendLanded,
    /// An `append_with` returned and its maker had been given that index.
    AppendWithChecked,
    /// An `append_with` was cancelled before its maker ran: its records
    /// must never appear.
    CancelledBeforeMaker,
    /// A `read_range` over a non-empty clamped range started where it must.
    RangeRead,
    /// A `read_range` stopped for its byte limit, and the next record was
    /// checked not to fit.
    RangeReadBounded,
    /// A `wait_durable` returned `Ok` for an index the log had.
    WaitDurableDone,
    /// A `wait_durable` for an index never admitted returned `OutOfRange`.
    WaitDurableRefused,
    /// A seal event was checked against the ones before it.
    SealEventSeen,
    /// An exact prune left the first index inside the segment that now
    /// comes first.
    PruneInsideSegment,
    /// `reset_to(j)` moved an empty log to `j`.
    ResetDone,
    /// The phantom-segment check found the WAL interrupted (a cancelled
    /// operation left memory behind the files on purpose) and compared
    /// memory with the directory after the WAL had resumed.
    CheckedAfterResume,
}

impl Mark {
    /// The marks every default sweep must reach.
    pub const REQUIRED: [Mark; 48] = [
        Mark::PruneDone,
        Mark::PruneHeldByLease,
        Mark::LeaseRevoked,
        Mark::FullPrune,
        Mark::SnapshotInstall,
        Mark::TruncateDone,
        Mark::TruncateInBatch,
        Mark::TruncateRefused,
        Mark::TruncatePastEnd,
        Mark::CompactionMerged,
        Mark::CleanReopen,
        Mark::CrashDuringPrune,
        Mark::CrashDuringTruncate,
        Mark::CrashDuringCompaction,
        Mark::TornTailCut,
        Mark::RotationFailed,
        Mark::StoppedAfterSyncError,
        Mark::EnospcCutBack,
        Mark::CrashDuringRecovery,
        Mark::CorruptionReported,
        Mark::AbsoluteRefused,
        Mark::WrongIndexRefused,
        Mark::HealCompleted,
        Mark::BufferFlushed,
        Mark::DamageRepaired,
        Mark::LostToRecordedDamage,
        Mark::MetaRenameTookEffect,
        Mark::SegmentRenameTookEffect,
        Mark::RecoveredAfterRenameTookEffect,
        Mark::StoppedAfterEffect,
        Mark::CrashAfterStep,
        Mark::RecoveryStepPass,
        Mark::RecoveryStepCrashes,
        Mark::TamperApplied,
        Mark::TamperRefused,
        Mark::TamperHarmless,
        Mark::TamperRestored,
        Mark::CallCancelled,
        Mark::CancelledAppendLanded,
        Mark::AppendWithChecked,
        Mark::CancelledBeforeMaker,
        Mark::RangeRead,
        Mark::RangeReadBounded,
        Mark::WaitDurableDone,
        Mark::WaitDurableRefused,
        Mark::SealEventSeen,
        Mark::PruneInsideSegment,
        Mark::ResetDone,
    ];
}

/// Invariant checks performed (how much the oracle actually looked at).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Checks {
    /// Operation results checked as they returned.
    pub ops: u64,
    /// Full scans of the log (after rounds and recoveries).
    pub scans: u64,
    /// Records checked for integrity in scans, reads and iterations.
    pub records: u64,
    /// Acknowledged durable records checked present after a crash.
    pub durable_records: u64,
    /// Recoveries checked.
    pub recoveries: u64,
    /// Segment-list versus directory comparisons.
    pub phantom_checks: u64,
    /// Fail-stop checks (calls after a stop, stop after a failed fsync).
    pub failstop_checks: u64,
    /// Twice-in-a-row recoveries compared.
    pub idempotence_checks: u64,
    /// Durable records lost whose loss the damage ledger explains.
    pub lost_to_damage: u64,
    /// Losses and reports checked against the damage ledger.
    pub ledger_checks: u64,
    /// Lifecycle results checked (prune, truncate, compaction).
    pub lifecycle: u64,
    /// Reopens after a clean close checked for the clean-shutdown marker.
    pub clean_reopen_checks: u64,
    /// Prune results and iterator skips and expiries checked against the
    /// live iterators' leases (`crate::leases`).
    pub lease_checks: u64,
    /// Read errors whose injected fault (an EIO into that file, or an
    /// unreadable sector of it) was found.
    pub read_faults_explained: u64,
    /// Calls the writers cancelled (futures dropped at an await point).
    pub cancellations: u64,
    /// Stops whose injected fault was found (every stop needs one).
    pub stops_explained: u64,
    /// Seal events checked.
    pub seals: u64,
}

impl Checks {
    /// Adds another run's checks.
    pub fn merge(&mut self, o: &Checks) {
        self.ops += o.ops;
        self.scans += o.scans;
        self.records += o.records;
        self.durable_records += o.durable_records;
        self.recoveries += o.recoveries;
        self.phantom_checks += o.phantom_checks;
        self.failstop_checks += o.failstop_checks;
        self.idempotence_checks += o.idempotence_checks;
        self.lost_to_damage += o.lost_to_damage;
        self.ledger_checks += o.ledger_checks;
        self.lifecycle += o.lifecycle;
        self.clean_reopen_checks += o.clean_reopen_checks;
        self.lease_checks += o.lease_checks;
        self.read_faults_explained += o.read_faults_explained;
        self.cancellations += o.cancellations;
        self.stops_explained += o.stops_explained;
        self.seals += o.seals;
    }
}

/// Faults injected, marks reached and checks made, by one run or a sweep.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Coverage {
    /// SimFs's fault counters.
    pub faults: FaultCounters,
    /// Rare paths reached.
    pub marks: BTreeMap<Mark, u64>,
    /// Checks made.
    pub checks: Checks,
}

impl Coverage {
    /// Counts a mark.
    pub fn mark(&mut self, m: Mark) {
        *self.marks.entry(m).or_insert(0) += 1;
    }

    /// Counts a mark `n` times.
    pub fn mark_n(&mut self, m: Mark, n: u64) {
        if n > 0 {
            *self.marks.entry(m).or_insert(0) += n;
        }
    }

    /// Count of a mark.
    pub fn get(&self, m: Mark) -> u64 {
        self.marks.get(&m).copied().unwrap_or(0)
    }

    /// Adds another run's coverage.
    pub fn merge(&mut self, o: &Coverage) {
        self.faults.merge(&o.faults);
        for (m, n) in &o.marks {
            *self.marks.entry(*m).or_insert(0) += n;
        }
        self.checks.merge(&o.checks);
    }

    /// Fault kinds too rare to require of a small sweep: an undone unlink
    /// needs a crash between a remove and its directory fsync (about one
    /// seed in 300 reaches it; the 2000-seed `sim` sweep does).
    pub const RARE_KINDS: [FaultKind; 1] = [FaultKind::ResurrectedFile];

    /// Fault kinds never injected and required marks never reached
    /// (`RARE_KINDS` excepted unless `all_kinds`).
    pub fn missing_of(&self, all_kinds: bool) -> Vec<String> {
        let mut out: Vec<String> = self
            .faults
            .iter()
            .filter(|(k, n)| *n == 0 && (all_kinds || !Self::RARE_KINDS.contains(k)))
            .map(|(k, _)| format!("fault {k:?}"))
            .collect();
        out.extend(
            Mark::REQUIRED
                .iter()
                .filter(|m| self.get(**m) == 0)
                .map(|m| format!("mark {m:?}")),
        );
        out
    }

    /// Every fault kind never injected and required mark never reached.
    pub fn missing(&self) -> Vec<String> {
        self.missing_of(true)
    }
}

impl fmt::Display for Coverage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "injected faults:")?;
        for (k, n) in self.faults.iter() {
            writeln!(f, "  {:<20} {n}", format!("{k:?}"))?;
        }
        writeln!(f, "rare paths:")?;
        for (m, n) in &self.marks {
            writeln!(f, "  {:<24} {n}", format!("{m:?}"))?;
        }
        let c = &self.checks;
        writeln!(f, "invariant checks:")?;
        writeln!(f, "  operation results        {}", c.ops)?;
        writeln!(f, "  full log scans           {}", c.scans)?;
        writeln!(f, "  records verified         {}", c.records)?;
        writeln!(f, "  durable records checked  {}", c.durable_records)?;
        writeln!(f, "  recoveries checked       {}", c.recoveries)?;
        writeln!(f, "  phantom-segment checks   {}", c.phantom_checks)?;
        writeln!(f, "  fail-stop checks         {}", c.failstop_checks)?;
        writeln!(f, "  idempotence checks       {}", c.idempotence_checks)?;
        writeln!(f, "  lifecycle results        {}", c.lifecycle)?;
        writeln!(f, "  lease checks             {}", c.lease_checks)?;
        writeln!(f, "  clean-reopen checks      {}", c.clean_reopen_checks)?;
        writeln!(f, "  ledger checks            {}", c.ledger_checks)?;
        writeln!(f, "  durable lost, explained  {}", c.lost_to_damage)?;
        writeln!(f, "  read faults, explained   {}", c.read_faults_explained)?;
        writeln!(f, "  stops, explained         {}", c.stops_explained)?;
        writeln!(f, "  calls cancelled          {}", c.cancellations)?;
        write!(f, "  seal events checked      {}", c.seals)
    }
}

/// Whether every fault kind has a name the sweep reports (keeps
/// [`FaultKind::ALL`] and the report in step).
pub fn all_kinds() -> &'static [FaultKind] {
    &FaultKind::ALL
}
