//! Runs one seed: the workload in rounds inside a madsim runtime, crashes and
//! recoveries, disk-full episodes, then the heal phase. Returns a [`Report`]
//! with the coverage counters and every violation found.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use simfs::{CrashKind, DamageKind, FaultKind, OpMatch, SimFs, SyncFailureProfile, TraceEvent};
use wal::{Error, RecoveryMode};

use crate::api::{real_opener, LogApi, Opener};
use crate::config::{FaultClass, LifecycleOp, Overrides, RunConfig, SyncKind};
use crate::coverage::{Coverage, Mark};
use crate::oracle::{Oracle, Slot};
use crate::repair::{self, chain_break, SegName};
use crate::workload::{self, Ctx};

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunEnd {
    /// The heal phase completed.
    Healed,
    /// The run ended early on damage the WAL reported (corruption, read
    /// errors) under media faults or a lying fsync: accepted.
    ReportedDamage,
    /// An invariant was violated (or the simulation panicked).
    Failed,
}

/// The result of one seed.
#[derive(Clone, Debug)]
pub struct Report {
    /// The seed.
    pub seed: u64,
    /// Shrinking overrides in force.
    pub overrides: Overrides,
    /// The decoded configuration.
    pub config: RunConfig,
    /// Faults, marks and checks.
    pub coverage: Coverage,
    /// Violations (empty if the run passed).
    pub violations: Vec<String>,
    /// SimFs's trace hash combined with the workload's event-log hash.
    pub trace_hash: u64,
    /// How the run ended.
    pub end: RunEnd,
    /// The last SimFs trace events of a failing run (empty if it passed).
    pub fs_trace: Vec<String>,
    /// Why a run ended on reported damage (empty otherwise): the damage
    /// and what the ledger says caused it.
    pub end_why: String,
}

impl Report {
    /// Whether the run passed.
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    /// The one line that reproduces this run.
    pub fn replay_command(&self) -> String {
        replay_command(self.seed, &self.overrides)
    }
}

/// The command that replays a seed (with shrinking overrides, if any).
pub fn replay_command(seed: u64, ov: &Overrides) -> String {
    if ov.is_empty() {
        format!("SIM_SEED={seed} cargo test -p sim-tests")
    } else {
        format!("SIM_SEED={seed} SIM_SHRINK={} cargo test -p sim-tests", ov.encode())
    }
}

/// Runs one seed against the real WAL.
pub fn run_seed(seed: u64, ov: Overrides) -> Report {
    run_seed_with(seed, ov, real_opener())
}

/// Runs one seed against the log `opener` opens.
pub fn run_seed_with(seed: u64, ov: Overrides, opener: Opener) -> Report {
    let config = RunConfig::with_overrides(seed, ov);
    let mut rt = madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default());
    rt.set_time_limit(Duration::from_secs(6 * 3600));
    let cfg = config.clone();
    let result = catch_unwind(AssertUnwindSafe(|| rt.block_on(simulate(cfg, opener))));
    match result {
        Ok((oracle, fs_hash, end, fs_trace, end_why)) => {
            let violations = oracle.violations.clone();
            let trace_hash = fs_hash ^ oracle.hash().rotate_left(17);
            let coverage = oracle.cov;
            Report {
                seed,
                overrides: ov,
                config,
                coverage,
                end: if violations.is_empty() { end } else { RunEnd::Failed },
                violations,
                trace_hash,
                fs_trace,
                end_why,
            }
        }
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "non-string panic".into());
            Report {
                seed,
                overrides: ov,
                config,
                coverage: Coverage::default(),
                violations: vec![format!("the simulation panicked: {msg}")],
                trace_hash: 0,
                end: RunEnd::Failed,
                fs_trace: Vec::new(),
                end_why: String::new(),
            }
        }
    }
}

/// Runs a seed; if it fails, runs it again and adds a violation if the two
/// runs diverged (a failure must be replayable).
pub fn check_seed_with(seed: u64, ov: Overrides, opener: Opener) -> Report {
    let mut r = run_seed_with(seed, ov, opener.clone());
    if !r.passed() {
        let again = run_seed_with(seed, ov, opener);
        if again.trace_hash != r.trace_hash {
            r.violations.push(format!(
                "nondeterminism: a second run of the failing seed has trace hash {:016x}, not {:016x}",
                again.trace_hash, r.trace_hash
            ));
        }
    }
    r
}

/// [`check_seed_with`] on the real WAL.
pub fn check_seed(seed: u64, ov: Overrides) -> Report {
    check_seed_with(seed, ov, real_opener())
}

/// Whether a directory entry is a segment file: `<20 digits>-...wal`.
fn is_segment_name(name: &str) -> bool {
    name.ends_with(".wal") && name.len() > 21 && name.as_bytes()[..20].iter().all(u8::is_ascii_digit)
}

struct Sim {
    ctx: Arc<Ctx>,
    opener: Opener,
    rng: ChaCha8Rng,
    wal: Option<Arc<dyn LogApi>>,
    end: Option<RunEnd>,
    sync_fails_at_open: u64,
    /// Slots of the last clean scan of the live log.
    last_slots: Vec<Slot>,
    /// First index of that scan.
    last_first: u64,
    /// Reads of segment data (anything but a 64-byte read at offset 0)
    /// during the last successful `Wal::open`.
    open_data_reads: usize,
    /// `(start tick, from)` of the control task's truncation in flight.
    pending_truncate: Option<(u64, u64)>,
    /// Crashes injected while `Wal::open` ran.
    open_crashes: u64,
    /// SimFs trace position at the last open.
    open_seq: u64,
    /// `Stats::buffer_flushes` of the open WAL at the last look.
    flushes_seen: u64,
    /// The last scan ended because the WAL stopped under it (with the write
    /// buffer, a scan writes the buffer, and that write can fail).
    scan_stopped: bool,
    /// SimFs's count of lying (or, on ext4 data=journal, late-failing)
    /// syncs at the last power loss: evidence that the next power loss may
    /// undo what they claimed.
    /// SimFs trace position right before the last crash.
    seq_at_crash: u64,
    /// SimFs's count of lying syncs when the open WAL was opened.
    lies_at_open: u64,
    /// A repair cut (an operator's `truncate_from`) that could not be made
    /// on the instance that found the damage (it had stopped, or the
    /// truncation failed): the next open makes it before anything else.
    pending_cut: Option<u64>,
    /// Repair attempts for the damage being repaired (bounded: a disk that
    /// keeps failing them ends the run on reported damage; reset when a
    /// cut succeeds).
    cut_attempts: u32,
    /// SimFs trace position up to which faults after the effect were looked at.
    after_effect_seq: u64,
    /// Faults after the effect (all kinds) when the open WAL was opened.
    after_effect_at_open: u64,
    /// A rename reported EIO after taking effect since the last open.
    renamed_since_open: bool,
    /// ... and a crash followed: the next recovery finds it done.
    recovery_after_rename: bool,
    /// Why the run ended on reported damage (for the sweep's summary).
    end_why: String,
    /// Operator's file repairs for the damage being repaired (reset like
    /// `cut_attempts`).
    file_repairs: u32,
    /// Segment files left after the last failed repair cut (progress).
    cut_segments: Option<usize>,
    /// A crash since the last successful open.
    crashed_since_open: bool,
    /// Reopens that followed a crash so far.
    crash_reopens: u32,
    /// The recovery step pass ran (once per run at most).
    step_pass_done: bool,
}

/// The recovery step pass in progress at one reopen: the next open is
/// crashed at its `at`-th operation.
struct StepPass {
    at: u64,
    crashes: u64,
}

/// Most crashes of one recovery step pass.
const MAX_STEP_CRASHES: u64 = 256;

/// Crash points of a recovery step pass after this many consecutive steps
/// are sampled, further and further apart.
const CONSECUTIVE_STEPS: u64 = 128;

/// The durability steps a crash can be placed right after: a successful
/// write or `set_len` of a segment (or its temporary file) or of the meta
/// file (or its replacement), after `skip` others.
fn durability_steps(skip: u64) -> OpMatch {
    OpMatch::ops(&["write", "set_len"])
        .path_ends_with(".wal")
        .path_ends_with(".wal.tmp")
        .path_ends_with("/meta")
        .skip(skip)
}

/// Whether `e` is, or was stopped by, a corruption report.
fn is_corruption(e: &Error) -> bool {
    match e {
        Error::Corruption { .. } | Error::MissingRecords { .. } => true,
        Error::Stopped { cause } => is_corruption(cause),
        _ => false,
    }
}

/// The file a read error of `e` (or of its cause) names.
fn read_error_path(e: &Error) -> Option<&std::path::Path> {
    match e {
        Error::Io { path, op, .. } if op.contains("read") => Some(path),
        Error::Stopped { cause } | Error::AppendFailed { cause } => read_error_path(cause),
        _ => None,
    }
}

/// The first index of the segment (by name) that holds `index`.
fn segment_first(names: &[String], index: u64) -> Option<u64> {
    names
        .iter()
        .filter_map(|n| SegName::parse(n).map(|s| s.first))
        .filter(|f| *f <= index)
        .max()
}

/// Repair cuts tried before a run ends on reported damage.
const MAX_REPAIR_ATTEMPTS: u32 = 16;

/// Opens a reopen tries before the run fails (`could not reopen`).
const MAX_OPEN_ATTEMPTS: u32 = 100;

/// Consecutive opens failing with transient I/O errors (not unreadable
/// sectors) before the run fails (`cannot reopen`).
const MAX_TRANSIENT_IO_ERRORS: u32 = 80;

/// Opens a reopen makes at most, counting those whose repair cut made
/// progress (which do not count as attempts).
const MAX_OPEN_LOOPS: u32 = 1000;

/// Operator's file repairs ([`crate::repair`]) before a run ends on
/// reported damage.
const MAX_FILE_REPAIRS: u32 = 8;

/// Outcome of one reopen.
enum Reopened {
    Open(Vec<Slot>),
    Ended,
}

async fn simulate(cfg: RunConfig, opener: Opener) -> (Oracle, u64, RunEnd, Vec<String>, String) {
    let clock = Arc::new(simfs::MadsimClock::new());
    let fs = SimFs::with_config(cfg.seed, cfg.sim_config(clock));
    let dir = PathBuf::from("/db/wal");
    let rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x574f_524b_4c4f_4144);
    let ctx = Arc::new(Ctx::new(cfg.clone(), fs.clone(), dir));
    let mut sim = Sim {
        ctx: ctx.clone(),
        opener,
        rng,
        wal: None,
        end: None,
        sync_fails_at_open: 0,
        last_slots: Vec::new(),
        last_first: cfg.first_index,
        open_data_reads: 0,
        pending_truncate: None,
        open_crashes: 0,
        open_seq: 0,
        flushes_seen: 0,
        scan_stopped: false,
        seq_at_crash: 0,
        lies_at_open: 0,
        pending_cut: None,
        cut_attempts: 0,
        after_effect_seq: 0,
        after_effect_at_open: 0,
        renamed_since_open: false,
        recovery_after_rename: false,
        end_why: String::new(),
        file_repairs: 0,
        cut_segments: None,
        crashed_since_open: false,
        crash_reopens: 0,
        step_pass_done: false,
    };
    ctx.oracle()
        .event(&format!("start: {}", cfg.to_string().replace('\n', " |")));
    sim.run().await;
    let end = sim.end.unwrap_or(RunEnd::Healed);
    let end_why = std::mem::take(&mut sim.end_why);
    drop(sim);
    let counters = fs.counters();
    let fs_hash = fs.trace_hash();
    let ctx = Arc::try_unwrap(ctx).unwrap_or_else(|c| Ctx::new(c.cfg.clone(), c.fs.clone(), c.dir.clone()));
    let mut oracle = ctx.into_oracle();
    oracle.cov.faults = counters;
    if end == RunEnd::ReportedDamage {
        oracle.cov.mark(Mark::EndedOnReportedDamage);
    }
    let fs_trace = if oracle.violations.is_empty() {
        Vec::new()
    } else {
        let ledger = fs.damage();
        let skip = ledger.len().saturating_sub(60);
        let damage = ledger
            .iter()
            .skip(skip)
            .map(|d| format!("damage: {}", crate::damage::describe(d)));
        let events = fs.trace();
        let skip = events.len().saturating_sub(120);
        // `SIM_TRACE_AROUND=<seq>`: also the events around one trace
        // position (one a damage line names), while triaging a replay.
        let around: Option<u64> = std::env::var("SIM_TRACE_AROUND").ok().and_then(|v| v.parse().ok());
        // Every injected fault still in the ring, then the last events.
        events
            .iter()
            .enumerate()
            .filter(|(i, e)| {
                *i >= skip
                    || around.is_some_and(|s| e.seq + 60 >= s && e.seq <= s + 10)
                    || (e.fault.is_some() && e.fault != Some(simfs::FaultKind::ShortRead))
            })
            .map(|(_, e)| {
                format!(
                    "#{} t={}us {} {} ino={:?} off={} len={} -> {}{}",
                    e.seq,
                    e.time_ns / 1000,
                    e.op,
                    e.path.as_deref().unwrap_or("-"),
                    e.ino,
                    e.offset,
                    e.len,
                    e.result,
                    e.fault.map(|f| format!(" [{f:?}]")).unwrap_or_default()
                )
            })
            .chain(damage)
            .collect()
    };
    (oracle, fs_hash, end, fs_trace, end_why)
}

impl Sim {
    fn cfg(&self) -> &RunConfig {
        &self.ctx.cfg
    }

    fn pct(&mut self, p: u32) -> bool {
        self.rng.random_range(0..100) < p
    }

    fn failed(&self) -> bool {
        !self.ctx.oracle().violations.is_empty()
    }

    fn crash_kind(&mut self) -> CrashKind {
        let (p, l) = (
            self.cfg().on(FaultClass::ProcessCrash),
            self.cfg().on(FaultClass::PowerLoss),
        );
        let pl = self.cfg().power_loss_pct;
        match (p, l) {
            (true, false) => CrashKind::Process,
            (false, true) => CrashKind::PowerLoss,
            _ if self.pct(pl) => CrashKind::PowerLoss,
            _ => CrashKind::Process,
        }
    }

    async fn run(&mut self) {
        let rounds = self.cfg().rounds;
        if let Reopened::Ended = self.reopen(BTreeMap::new(), false).await {
            return;
        }
        for r in 0..rounds {
            if self.failed() || self.end.is_some() {
                return;
            }
            self.ctx.oracle().event(&format!("round {r}"));
            self.round().await;
        }
        if self.failed() || self.end.is_some() {
            return;
        }
        self.heal().await;
    }

    /// Opens the log (retrying transient errors, maybe crashing mid-open),
    /// scans it and checks it against the oracle.
    async fn reopen(&mut self, mut extra: BTreeMap<u64, (usize, usize)>, heal: bool) -> Reopened {
        let cfg = self.ctx.cfg.clone();
        let mut mode = cfg.recovery_mode;
        let mut io_errors = 0;
        let mut stuck_read = None;
        if std::mem::take(&mut self.crashed_since_open) && !heal {
            self.crash_reopens += 1;
        }
        if !heal && cfg.on(FaultClass::Tamper) && self.pct(cfg.tamper_pct) {
            let t = crate::tamper::Tamperer {
                ctx: &self.ctx,
                opts: cfg.options(RunConfig::madsim_sleeper()),
            };
            t.run(&mut self.rng).await;
        }
        // Where every record sits now: a reopen without a crash (after the
        // WAL stopped) follows writes no crash snapshot saw, and the
        // ledger's excuses need their places (seed 20024483: a record
        // written after the last snapshot, cut with everything after a
        // latent sector the operator rewrote).
        self.ctx.oracle().snapshot_layout();
        let mut pass = (!heal
            && !self.step_pass_done
            && cfg.on(FaultClass::RecoveryStepCrashes)
            && self.crash_reopens == cfg.step_pass_reopen)
            .then_some(StepPass { at: 1, crashes: 0 });
        let mut attempts = 0;
        // Repair cuts that make progress do not count as attempts, but
        // every loop counts here (a limit on everything).
        let mut loops = 0;
        while attempts < MAX_OPEN_ATTEMPTS && loops < MAX_OPEN_LOOPS {
            attempts += 1;
            loops += 1;
            let mut opts = cfg.options(RunConfig::madsim_sleeper());
            opts.recovery_mode = mode;
            let seq_before = self.ctx.fs.next_seq();
            let fut = (self.opener)(self.ctx.fs.clone(), self.ctx.dir.clone(), opts);
            if let Some(p) = &mut pass {
                if p.crashes >= MAX_STEP_CRASHES {
                    self.end_step_pass(p.crashes);
                    pass = None;
                }
            }
            let step_kind = match &pass {
                Some(p) => {
                    let kind = self.crash_kind();
                    self.before_crash();
                    self.ctx.oracle().crash_coming();
                    self.ctx.fs.crash_after(p.at, kind);
                    Some(kind)
                }
                None => None,
            };
            let crash_it =
                pass.is_none() && !heal && cfg.on(FaultClass::CrashDuringOpen) && self.pct(cfg.crash_open_pct);
            let res = if let (Some(kind), Some(p)) = (step_kind, &mut pass) {
                let res = fut.await;
                if self.ctx.fs.cancel_crash().is_none() {
                    // The open crashed at its `at`-th operation (if it
                    // returned a log, that is a dead process's).
                    drop(res);
                    self.ctx.oracle().crashed(kind, true);
                    self.after_crash(kind);
                    self.open_crashed(kind, Mark::RecoveryStepCrashes, &mut extra);
                    p.crashes += 1;
                    p.at += if p.crashes < CONSECUTIVE_STEPS {
                        1
                    } else {
                        1 + (p.at - CONSECUTIVE_STEPS) / 4
                    };
                    attempts -= 1;
                    continue;
                }
                // The open completed before its `at`-th operation: the
                // pass is over (or it failed on a fault: the pass goes on
                // at the same step).
                if res.is_ok() {
                    self.end_step_pass(p.crashes);
                    pass = None;
                }
                res
            } else if crash_it {
                let h = madsim::task::spawn(fut);
                let wait = self.rng.random_range(0..=cfg.latency_us.1 * 6);
                madsim::time::sleep(Duration::from_micros(wait)).await;
                if !h.is_finished() {
                    h.abort();
                    let _ = h.await;
                    let kind = self.crash_kind();
                    self.ctx.oracle().crashed(kind, true);
                    self.crash_fs(kind);
                    self.open_crashed(kind, Mark::CrashDuringRecovery, &mut extra);
                    continue;
                }
                match h.await {
                    Ok(r) => r,
                    Err(e) => {
                        self.ctx.oracle().violation(format!("open task failed: {e}"));
                        return self.ended(RunEnd::Failed);
                    }
                }
            } else {
                fut.await
            };
            let wal = match res {
                Ok(w) => w,
                Err(e @ (Error::Corruption { .. } | Error::MissingRecords { .. })) => {
                    self.ctx.oracle().event(&format!("open -> {e}"));
                    if mode == RecoveryMode::AbsoluteConsistency {
                        self.ctx.oracle().cov.mark(Mark::AbsoluteRefused);
                        mode = RecoveryMode::TolerateTornTail;
                        continue;
                    }
                    let explained = self.ctx.oracle().explain_error(&e);
                    let Some(why) = explained else {
                        self.ctx
                            .oracle()
                            .violation(format!("reopen reported {e}, and no recorded damage explains it"));
                        return self.ended(RunEnd::Failed);
                    };
                    self.ctx.oracle().cov.mark(Mark::CorruptionReported);
                    if mode == RecoveryMode::PointInTime && self.file_repair(&e, &why).await {
                        continue;
                    }
                    if mode == RecoveryMode::PointInTime {
                        // Damage a point-in-time open cannot cut and no
                        // operator's tool repairs.
                        self.ctx.oracle().event(&format!(
                            "damage explained by {why}, beyond what a point-in-time open repairs"
                        ));
                        self.end_why = format!("open: {e}; {why}");
                        return self.ended(RunEnd::ReportedDamage);
                    }
                    // The operator's repair: recover to the last valid record
                    // before the damage; after_recovery then checks that
                    // only records the ledger explains are gone.
                    self.ctx.oracle().event(&format!(
                        "damage explained by {why}: repairing with a point-in-time open"
                    ));
                    self.ctx.oracle().cov.mark(Mark::DamageRepaired);
                    mode = RecoveryMode::PointInTime;
                    continue;
                }
                Err(e @ Error::Io { .. }) => {
                    self.ctx.oracle().event(&format!("open -> Err({e})"));
                    io_errors += 1;
                    // The streak's read errors of unreadable sectors are the
                    // ones that make it a streak; the last error of it may be
                    // a transient one of another operation.
                    // Transient errors (no bad sector behind them) get a
                    // longer streak: each open makes a dozen operations or
                    // more, and at the sweep's higher EIO rates 20 failed
                    // opens in a row happen a few times per 100k seeds
                    // (30024354, 30064429, 30077257).
                    if read_error_path(&e).is_some_and(|p| !self.ctx.fs.bad_sectors(p).is_empty()) {
                        stuck_read = Some(e);
                    } else if io_errors > MAX_TRANSIENT_IO_ERRORS {
                        stuck_read.get_or_insert(e);
                    }
                    if io_errors > 20 && stuck_read.is_some() {
                        let Some(e) = stuck_read.take() else { continue };
                        let explained = self.ctx.oracle().explain_error(&e);
                        if let Some(why) = &explained {
                            if self.file_repair(&e, why).await {
                                // The sectors read again (as zeros): an open
                                // that cuts at them can go on.
                                io_errors = 0;
                                mode = RecoveryMode::PointInTime;
                                continue;
                            }
                        }
                        if let Some(why) = explained {
                            // An unreadable sector no open can read past.
                            self.ctx
                                .oracle()
                                .event(&format!("cannot reopen: {e}, explained by {why}"));
                            self.ctx.oracle().cov.mark(Mark::CorruptionReported);
                            self.end_why = format!("open: {e}; {why}");
                            return self.ended(RunEnd::ReportedDamage);
                        }
                        self.ctx
                            .oracle()
                            .violation(format!("cannot reopen: {e}, and no recorded damage explains it"));
                        return self.ended(RunEnd::Failed);
                    }
                    continue;
                }
                Err(e) => {
                    self.ctx.oracle().violation(format!("reopen failed: {e}"));
                    return self.ended(RunEnd::Failed);
                }
            };
            let report = wal.recovery_report();
            if !report.lost.is_empty() {
                // The open accepted losses and tried to raise the low-water
                // mark over them (best effort): a fault injected into that
                // meta write leaves the old mark's promise standing.
                let failed = self.ctx.fs.trace_since(seq_before).into_iter().find(|e| {
                    e.fault.is_some()
                        && e.path.as_deref().is_some_and(|p| {
                            p.rsplit_once('/')
                                .is_some_and(|(_, n)| n == crate::damage::META_NAME || n == "meta.wal.tmp")
                        })
                });
                let mut o = self.ctx.oracle();
                for l in &report.lost {
                    o.accepted_loss(l.first, l.end, failed.as_ref());
                }
            } else {
                self.ctx.oracle().accepted_loss_recorded();
            }
            self.open_data_reads = self
                .ctx
                .fs
                .trace_since(seq_before)
                .iter()
                // Segment headers (64 bytes, checked at every open) and the
                // meta file (80) are not record data.
                .filter(|e| e.op == "read" && !(e.offset == 0 && (e.len == 64 || e.len == 80)))
                .count();
            if let Some(pos) = self.pending_cut.take() {
                let failed_before = self.cut_attempts;
                if !self.make_pending_cut(&wal, pos).await {
                    extra.extend(self.crash_for_repair(wal));
                    if self.cut_attempts == failed_before {
                        // The cut removed segments (a flaky disk: seed
                        // 20024021 cut ~300 segments at 17% EIO per removal).
                        attempts -= 1;
                    }
                    if self.cut_attempts > MAX_REPAIR_ATTEMPTS {
                        self.end_why = format!("repair cut at {pos} failed {} times", self.cut_attempts);
                        return self.ended(RunEnd::ReportedDamage);
                    }
                    continue;
                }
            }
            let Some((first, next, entries)) = self.scan(&wal, true).await else {
                if self.end.is_none() && self.pending_cut.is_some() {
                    std::mem::take(&mut self.scan_stopped);
                    extra.extend(self.crash_for_repair(wal));
                    continue;
                }
                return Reopened::Ended;
            };
            let checked = {
                let mut o = self.ctx.oracle();
                let slots = o.check_scan(first, next, &entries);
                if let Some(slots) = &slots {
                    o.after_recovery(first, next, slots, &extra, &report, mode);
                }
                slots
            };
            let Some(slots) = checked else {
                return self.ended(RunEnd::Failed);
            };
            if self.failed() {
                return self.ended(RunEnd::Failed);
            }
            let c = self.ctx.fs.counters();
            self.sync_fails_at_open = c.get(FaultKind::SyncFail) + c.get(FaultKind::SyncFailAfterPersist);
            self.open_seq = self.ctx.fs.next_seq();
            self.lies_at_open = self.ctx.fs.counters().get(FaultKind::LyingSync);
            self.note_after_effect();
            if std::mem::take(&mut self.recovery_after_rename) {
                self.ctx.oracle().cov.mark(Mark::RecoveredAfterRenameTookEffect);
            }
            self.renamed_since_open = false;
            self.after_effect_at_open = self.after_effect_count();
            self.last_slots = slots.clone();
            self.last_first = first;
            self.wal = Some(wal);
            self.flushes_seen = 0;
            // The log opened and scanned clean: the next damage gets a
            // fresh repair budget.
            self.cut_attempts = 0;
            self.file_repairs = 0;
            self.cut_segments = None;
            return Reopened::Open(slots);
        }
        self.ctx.oracle().violation(format!(
            "could not reopen the log in {attempts} attempts ({loops} with repairs)"
        ));
        self.ended(RunEnd::Failed)
    }

    /// The recovery step pass of this run ended after `crashes` crashes.
    fn end_step_pass(&mut self, crashes: u64) {
        self.step_pass_done = true;
        let mut o = self.ctx.oracle();
        o.cov.mark(Mark::RecoveryStepPass);
        o.event(&format!("recovery step pass: {crashes} crashes"));
    }

    /// With [`FaultClass::CrashAfterStep`], at a share of the crashes:
    /// pauses the machine right after a durability step (after `skip`
    /// others) and waits until it is paused or every task in `handles`
    /// finished. The event of the step, if the machine paused; the caller
    /// crashes it either way.
    async fn pause_after_step(&mut self, handles: &[madsim::task::JoinHandle<()>], skip: u64) -> Option<TraceEvent> {
        let fs = self.ctx.fs.clone();
        fs.pause_after_next(durability_steps(skip));
        let step = Duration::from_micros(self.ctx.cfg.latency_us.1.max(1));
        loop {
            if let Some(ev) = fs.paused() {
                let mut o = self.ctx.oracle();
                o.cov.mark(Mark::CrashAfterStep);
                if ev.op == "set_len" {
                    o.cov.mark(Mark::CrashAfterCut);
                }
                o.event(&format!(
                    "paused after {} {} at {} ({} B)",
                    ev.op,
                    ev.path.as_deref().unwrap_or("-"),
                    ev.offset,
                    ev.len
                ));
                return Some(ev);
            }
            if handles.iter().all(|h| h.is_finished()) {
                fs.resume();
                return None;
            }
            madsim::time::sleep(step).await;
        }
    }

    /// Whether this crash is placed after a durability step.
    fn crash_after_step(&mut self) -> bool {
        let cfg = &self.ctx.cfg;
        let (on, pct) = (cfg.on(FaultClass::CrashAfterStep), cfg.step_crash_pct);
        on && self.pct(pct)
    }

    /// A stopped WAL: every call fails with `Stopped` (checked), then close
    /// and reopen without a crash (the page cache is as the process left it).
    async fn close_stopped_and_reopen(&mut self, wal: Arc<dyn LogApi>) {
        let start = self.ctx.oracle().now();
        let r = wal.sync().await;
        self.ctx.oracle().finish_sync(start, &r);
        let start = self.ctx.oracle().now();
        let first = wal.first_index();
        let r = wal.read(first).await;
        let next = wal.next_index();
        self.ctx.oracle().finish_read(start, first, first, next, &r);
        let start = self.ctx.oracle().now();
        self.wal = None;
        let r = wal.close().await;
        self.ctx.oracle().finish_close(start, &r);
        self.reopen(BTreeMap::new(), false).await;
    }

    /// Counts the write buffer's writes since the last look (coverage mark
    /// `BufferFlushed`; only with the buffer on, so that other seeds make
    /// no extra calls).
    async fn note_flushes(&mut self, wal: &Arc<dyn LogApi>) {
        if self.ctx.cfg.write_buffer_bytes == 0 {
            return;
        }
        let n = wal.stats().await.buffer_flushes;
        let new = n.saturating_sub(self.flushes_seen);
        self.flushes_seen = n;
        self.ctx.oracle().cov.mark_n(Mark::BufferFlushed, new);
    }

    fn ended(&mut self, end: RunEnd) -> Reopened {
        self.end = Some(end);
        self.wal = None;
        Reopened::Ended
    }

    /// Iterates the whole log, repairing damage the ledger explains by a
    /// truncation before it. `just_opened`: the log was just recovered and
    /// the oracle does not model this instance yet. `None` if the run ended
    /// (damage that could not be repaired, or a violation).
    async fn scan(&mut self, wal: &Arc<dyn LogApi>, just_opened: bool) -> Option<(u64, u64, Vec<(u64, Vec<u8>)>)> {
        let cfg = self.ctx.cfg.clone();
        let (first, mut next) = (wal.first_index(), wal.next_index());
        let mut entries = Vec::new();
        let mut pos = first;
        let mut errors = 0;
        let mut repairs = 0;
        'outer: while pos < next {
            let mut it = match wal.iter_from(pos) {
                Ok(it) => it,
                Err(e) => {
                    self.ctx
                        .oracle()
                        .violation(format!("scan: iter_from({pos}) failed: {e}"));
                    self.end = Some(RunEnd::Failed);
                    return None;
                }
            };
            loop {
                match it.next().await {
                    None => {
                        // The first call after a cancelled operation resumes
                        // (an in-process recovery) and may publish the
                        // interrupted group: the log may have grown since
                        // `next` was read. Scan to where it ends now.
                        let now = wal.next_index();
                        if pos < now {
                            next = now;
                            continue 'outer;
                        }
                        next = next.max(now);
                        break 'outer;
                    }
                    Some(Ok(rec)) => {
                        pos = rec.0 + 1;
                        entries.push(rec);
                        // Transient errors are budgeted per position: a long
                        // scan over a flaky disk makes progress.
                        errors = 0;
                    }
                    Some(Err(e)) if e.is_stopped() => {
                        // The scan wrote the write buffer, or resumed after a
                        // cancelled operation, and that failed: the WAL
                        // stopped (fail-stop, checked by the caller, which
                        // closes and reopens; the stop needs an injected
                        // fault behind it, `Oracle::note_stopped`).
                        self.ctx
                            .oracle()
                            .event(&format!("scan at {pos}: {e}").replace('\n', " "));
                        self.ctx.oracle().note_stopped(&e);
                        self.scan_stopped = true;
                        return None;
                    }
                    Some(Err(e)) => {
                        errors += 1;
                        let transient = matches!(e, Error::Io { .. })
                            && (cfg.on(FaultClass::EioRead)
                                || cfg.on(FaultClass::EioOpen)
                                || cfg.on(FaultClass::ShortRead)
                                || cfg.on(FaultClass::LatentSectorError));
                        if transient && errors < 50 {
                            continue 'outer;
                        }
                        let explained = self.ctx.oracle().explain_error(&e);
                        let Some(why) = explained else {
                            self.ctx
                                .oracle()
                                .violation(format!("scan at {pos}: {e}, and no recorded damage explains it"));
                            self.end = Some(RunEnd::Failed);
                            self.wal = None;
                            return None;
                        };
                        self.ctx.oracle().cov.mark(Mark::CorruptionReported);
                        self.ctx
                            .oracle()
                            .event(&format!("scan at {pos}: {e}, explained by {why}"));
                        repairs += 1;
                        if repairs > 3 || !self.repair_by_truncation(wal, pos, &why, just_opened).await {
                            // The instance stopped (a read of the damage
                            // stops it) or the cut failed: the next open
                            // makes the cut first.
                            self.cut_attempts += 1;
                            if self.cut_attempts > MAX_REPAIR_ATTEMPTS {
                                self.end_why =
                                    format!("scan at {pos}: {e}; {why}; repair failed {} times", self.cut_attempts);
                                self.end = Some(RunEnd::ReportedDamage);
                            }
                            self.pending_cut = Some(self.pending_cut.map_or(pos, |c| c.min(pos)));
                            self.scan_stopped = true;
                            self.wal = None;
                            return None;
                        }
                        next = wal.next_index();
                        errors = 0;
                        continue 'outer;
                    }
                }
            }
        }
        Some((first, next, entries))
    }

    /// Crashes the filesystem. First records where every record of the
    /// segment files sits (the layout excuses are checked against);
    /// after a power loss, notes whether a lying (or late-failing) sync
    /// fired since the previous one, so what it claimed may be undone.
    fn crash_fs(&mut self, kind: CrashKind) {
        self.before_crash();
        self.ctx.fs.crash(kind);
        self.after_crash(kind);
    }

    /// What [`Sim::crash_fs`] does right before the crash.
    fn before_crash(&mut self) {
        self.seq_at_crash = self.ctx.fs.next_seq();
        self.note_after_effect();
        if self.renamed_since_open {
            self.recovery_after_rename = true;
        }
        self.ctx.oracle().snapshot_layout();
    }

    /// What [`Sim::crash_fs`] does right after the crash.
    fn after_crash(&mut self, kind: CrashKind) {
        self.crashed_since_open = true;
        self.ctx.oracle().snapshot_after_crash();
        if kind == CrashKind::PowerLoss {
            // The ledger's evidence, not the lie counter: what this power
            // loss undid that a sync had claimed (or, ext4 data=journal, a
            // failed sync reported one call late had dropped), on a file or
            // directory entry of the log.
            let dir = self.ctx.dir.to_string_lossy().into_owned();
            let undone = self.ctx.fs.damage_since(self.seq_at_crash).into_iter().find(|d| {
                matches!(
                    d.kind,
                    DamageKind::UnpersistedDirOp | DamageKind::UnpersistedSync | DamageKind::DroppedBySyncFailure
                ) && crate::damage::in_dir(d, &dir)
            });
            if let Some(d) = undone {
                self.ctx.oracle().note_undone_by_lie(&crate::damage::describe(&d));
            }
            let meta = format!("{dir}/{}", crate::damage::META_NAME);
            let meta_undone = self.ctx.fs.damage_since(self.seq_at_crash).into_iter().find(|d| {
                matches!(
                    d.kind,
                    DamageKind::UnpersistedDirOp | DamageKind::UnpersistedSync | DamageKind::DroppedBySyncFailure
                ) && d.path.as_deref() == Some(meta.as_str())
            });
            if let Some(d) = meta_undone {
                self.ctx.oracle().note_meta_undone(&crate::damage::describe(&d));
            }
        }
    }

    /// Whether SimFs recorded damage that can destroy durable bytes since
    /// trace position `seq`, or a sync lied since the lie count was
    /// `lies_before`.
    fn damaged_since(&self, seq: u64, lies_before: u64) -> bool {
        self.ctx.fs.counters().get(FaultKind::LyingSync) > lies_before
            || self
                .ctx
                .fs
                .damage_since(seq)
                .iter()
                .any(|d| crate::damage::excuses_durable_loss(d.kind))
    }

    /// The operator's repair of damage a scan reported at `pos`: cut the log
    /// before it (`truncate_from(pos)`), so every record below `pos` must
    /// stay and none at or above it may come back. The oracle is told
    /// before the call ([`Oracle::operator_cut`]): the scan runs before it
    /// starts modelling the new instance. Whether it worked.
    async fn repair_by_truncation(&mut self, wal: &Arc<dyn LogApi>, pos: u64, why: &str, just_opened: bool) -> bool {
        if just_opened {
            self.ctx.oracle().operator_cut(pos, why);
            let r = wal.truncate_from(pos).await;
            self.ctx.oracle().event(&format!("operator repair -> {r:?}"));
            return r.is_ok();
        }
        // A scan of the live instance: a truncation the oracle models.
        let what = format!("repair: truncate_from({pos}) for {why}");
        let start = self.ctx.oracle().begin_truncate(&what);
        let r = wal.truncate_from(pos).await;
        self.ctx.oracle().finish_truncate(start, pos, &what, Some(&r));
        self.ctx.oracle().cov.mark(Mark::DamageRepaired);
        r.is_ok()
    }

    /// Makes a repair cut left pending by the instance that found the
    /// damage, on the log just opened (the oracle does not model it yet).
    /// Whether it worked (or was no longer needed).
    async fn make_pending_cut(&mut self, wal: &Arc<dyn LogApi>, pos: u64) -> bool {
        let pos = pos.max(wal.first_index());
        if pos >= wal.next_index() {
            return true;
        }
        self.ctx
            .oracle()
            .operator_cut(pos, "damage reported before the last open");
        let r = wal.truncate_from(pos).await;
        self.ctx.oracle().event(&format!("operator repair -> {r:?}"));
        let Err(e) = r else {
            // The budget is per episode of damage: a flaky disk that made
            // this one hard does not leave the next without attempts.
            self.cut_attempts = 0;
            self.file_repairs = 0;
            self.cut_segments = None;
            return true;
        };
        // A truncation that removes many segments on a flaky disk fails
        // often but makes progress (it removes from the end): only an
        // attempt that removed nothing counts against the budget.
        let segments = self
            .ctx
            .fs
            .list_dir(&self.ctx.dir)
            .map_or(0, |n| n.iter().filter(|n| is_segment_name(n)).count());
        if self
            .cut_segments
            .replace(segments)
            .is_none_or(|before| segments >= before)
        {
            self.cut_attempts += 1;
        }
        if let Some(path) = read_error_path(&e) {
            // The cut must read an unreadable sector: rewrite it first (the
            // next attempt then meets the zeros as corruption).
            let path = path.to_path_buf();
            let why = format!("read error in {} during a repair cut", path.display());
            self.file_repair(&e, &why).await;
        }
        // A cut inside a damaged sealed segment reads it and fails on the
        // damage: cut at that segment's first record instead (what an
        // operator without a finer tool does; the records in between are
        // gone by request).
        let at = if is_corruption(&e) {
            segment_first(&wal.segment_names(), pos).unwrap_or(pos)
        } else {
            pos
        };
        self.pending_cut = Some(at);
        false
    }

    /// The operator's repair of the file `e` names, whose damage the ledger
    /// explained (`why`): rewrite its unreadable sectors, seal an older
    /// active segment whose seal was lost, or move a meta file or active
    /// segment with a bad header aside. Whether the
    /// directory changed (an open is worth trying again).
    async fn file_repair(&mut self, e: &Error, why: &str) -> bool {
        if self.file_repairs >= MAX_FILE_REPAIRS {
            return false;
        }
        let fs = self.ctx.fs.clone();
        let (path, reason) = match e {
            Error::Corruption { segment, reason, .. } => (segment.clone(), reason.as_str()),
            _ => match read_error_path(e) {
                Some(p) => (p.to_path_buf(), ""),
                None => return false,
            },
        };
        let name = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        if !fs.bad_sectors(&path).is_empty() {
            self.file_repairs += 1;
            let r = repair::rewrite_bad_sectors(&fs, &path).await;
            let mut o = self.ctx.oracle();
            o.event(&format!(
                "operator repair: rewrite bad sectors of {name} for {why} -> {r:?}"
            ));
            o.cov.mark(Mark::SectorsRewritten);
            o.cov.mark(Mark::DamageRepaired);
            return r.is_ok();
        }
        if let Some(older) = reason
            .strip_prefix("two active segments: ")
            .and_then(|r| r.split(" and ").next())
            .filter(|o| *o != name)
        {
            return self.repair_two_actives(&path.with_file_name(older), &path, why).await;
        }
        if let Some((at, expected)) = chain_break(reason) {
            let Some(reported) = SegName::parse(&name) else {
                return false;
            };
            let lost_mark = self.ctx.oracle().lost_low_water();
            return if at > expected && lost_mark.is_some_and(|lo| at <= lo) {
                // Below the mark of the meta file moved aside: what lies
                // below the gap was pruned; those segments go, not the log.
                self.file_repairs += 1;
                let leftover = |s: SegName| s.last.is_some_and(|l| l < at);
                self.move_aside_segments(&path, "below the gap, under the lost low-water mark", &leftover)
                    .await
            } else if at > expected {
                self.repair_gap(&path, at, expected, why).await
            } else {
                self.repair_overlap(&path, at, reported.id).await
            };
        }
        let is_meta = name == "meta";
        let bad_active_header = reason.starts_with("bad segment header") && name.contains("-active-");
        // A file whose name would make others leftovers but whose header
        // does not check (an interrupted compaction's output whose header
        // was never durable, or was damaged since): recovery removed
        // nothing, and the files it would have replaced still hold the
        // records unless the compaction had removed them already; either
        // way it goes aside, and the oracle learns what its name held.
        let bad_justifier = reason.contains("a leftover, but its own header does not check");
        if !is_meta && !bad_active_header && !bad_justifier {
            return false;
        }
        self.file_repairs += 1;
        let r = repair::move_aside(&fs, &path).await;
        let moved = self.repaired(&format!("move {name} aside for {why}"), &path, Mark::FileMovedAside, &r);
        if moved && is_meta {
            self.ctx.oracle().meta_lost(why);
        }
        if let Some(seg) = SegName::parse(&name).filter(|_| moved && bad_justifier) {
            // Its inputs may be gone already (the compaction had reached its
            // removals): the records only it held went aside with it.
            self.ctx.oracle().note_aside_for_damage(seg, why);
        }
        moved
    }

    /// Bookkeeping after an open was crashed (`mark` says how): counted,
    /// and after a power loss the unknown outcomes of the instance before
    /// (`extra`) are settled by the durable image.
    fn open_crashed(&mut self, kind: CrashKind, mark: Mark, extra: &mut BTreeMap<u64, (usize, usize)>) {
        self.ctx.oracle().cov.mark(mark);
        self.open_crashes += 1;
        if kind == CrashKind::PowerLoss {
            extra.clear();
        }
    }

    /// Two active segments, `older` (lower first index) and `newer`: if the
    /// older one has the higher id, the log started again below the newer
    /// one (a full prune or truncation) and the newer one's removal was
    /// lost: ids only grow, so it is the leftover and goes aside. Otherwise
    /// the older one's seal (a rename) was lost: seal it by hand, or move
    /// it aside if its header is bad. Whether the directory changed.
    async fn repair_two_actives(&mut self, older: &Path, newer: &Path, why: &str) -> bool {
        let file_name = |p: &Path| {
            p.file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
        };
        let (Some(o), Some(n)) = (SegName::parse(&file_name(older)), SegName::parse(&file_name(newer))) else {
            return false;
        };
        self.file_repairs += 1;
        let fs = self.ctx.fs.clone();
        if o.id > n.id {
            let r = repair::move_aside(&fs, newer).await;
            return self.repaired(
                &format!("move {} aside, superseded by {}", newer.display(), older.display()),
                newer,
                Mark::FileMovedAside,
                &r,
            );
        }
        let r = repair::seal_by_hand(&fs, older, n.first).await;
        if matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::InvalidData) {
            self.ctx
                .oracle()
                .event(&format!("operator repair: seal {} by hand -> {r:?}", older.display()));
            let r = repair::move_aside(&fs, older).await;
            return self.repaired(
                &format!("move {} aside, its header bad", older.display()),
                older,
                Mark::FileMovedAside,
                &r,
            );
        }
        self.repaired(
            &format!("seal {} by hand for {why}", older.display()),
            older,
            Mark::SealedByHand,
            &r,
        )
    }

    /// A gap in the segment chain at `at` (the reported segment `path`
    /// starts there, `expected` was due): the log is cut at `at` by request
    /// (every segment from it on goes aside); the records in the gap must
    /// each be explained by the ledger.
    async fn repair_gap(&mut self, path: &Path, at: u64, expected: u64, why: &str) -> bool {
        self.file_repairs += 1;
        self.ctx
            .oracle()
            .operator_cut(at, &format!("{why} (gap from {expected} to {at})"));
        let past_gap = |s: SegName| s.first >= at;
        self.move_aside_segments(path, "past the gap", &past_gap).await
    }

    /// An overlap at `at`: a segment that a removal (a truncation's, a
    /// prune's) had taken away came back when the removal was lost. Ids
    /// only grow, so every segment with a lower id than the reported one
    /// (`id`) that reaches `at` is the leftover and goes aside.
    async fn repair_overlap(&mut self, path: &Path, at: u64, id: u64) -> bool {
        let stale = |s: SegName| s.last.is_some_and(|l| l >= at) && s.id < id;
        self.file_repairs += 1;
        self.move_aside_segments(path, "overlapped by a newer segment", &stale)
            .await
    }

    /// Moves aside every segment of `path`'s directory whose name `pick`
    /// takes. Whether any moved.
    async fn move_aside_segments(&mut self, path: &Path, what: &str, pick: &dyn Fn(SegName) -> bool) -> bool {
        let fs = self.ctx.fs.clone();
        let dir = path.parent().unwrap_or(Path::new("/")).to_path_buf();
        let names = fs.list_dir(&dir).unwrap_or_default();
        let mut moved = false;
        for n in names.iter().filter(|n| SegName::parse(n).is_some_and(pick)) {
            let p = dir.join(n);
            let r = repair::move_aside(&fs, &p).await;
            moved |= self.repaired(&format!("move {n} aside, {what}"), &p, Mark::FileMovedAside, &r);
        }
        moved
    }

    /// Notes an operator's repair of `path` and its outcome; marks `mark`
    /// and `DamageRepaired` if the file is gone from its name (a move or
    /// seal took effect, whatever the call returned). Whether it is.
    fn repaired(&mut self, what: &str, path: &Path, mark: Mark, r: &std::io::Result<repair::Repaired>) -> bool {
        let done = self.ctx.fs.inode_of(path).is_none();
        let mut o = self.ctx.oracle();
        o.event(&format!("operator repair: {what} -> {r:?}"));
        if done {
            o.cov.mark(mark);
            o.cov.mark(Mark::DamageRepaired);
            if mark == Mark::FileMovedAside && path.to_string_lossy().ends_with(".wal") {
                o.note_moved_aside();
            }
        }
        done
    }

    /// Ends the process of an instance whose repair failed, as a restart
    /// would (a process crash: the page cache stays), so that the next open
    /// tries again. The oracle's unknown outcomes.
    fn crash_for_repair(&mut self, wal: Arc<dyn LogApi>) -> BTreeMap<u64, (usize, usize)> {
        let stopped = wal.stopped().is_some();
        let extra = self.ctx.oracle().crashed(CrashKind::Process, stopped);
        self.crash_fs(CrashKind::Process);
        // Counted as a crash of an open: the next open is not a clean one.
        self.open_crashes += 1;
        drop(wal);
        self.wal = None;
        extra
    }

    async fn round(&mut self) {
        if self.wal.is_none() {
            if let Reopened::Ended = self.reopen(BTreeMap::new(), false).await {
                return;
            }
        }
        let Some(wal) = self.wal.clone() else { return };
        let cfg = self.ctx.cfg.clone();
        let disk_full = cfg.on(FaultClass::DiskFull) && self.pct(cfg.disk_full_pct);
        if disk_full {
            let room = self.rng.random_range(0..=(cfg.max_record_bytes as u64 * 4).max(8192));
            let cap = self.ctx.fs.used_bytes() + room;
            self.ctx.fs.set_capacity(Some(cap));
            self.ctx.oracle().cov.mark(Mark::DiskFullEpisode);
            self.ctx.oracle().event(&format!("disk full episode: capacity {cap}"));
        }
        let solo = self.pct(cfg.solo_pct);
        let mut handles = Vec::new();
        if solo {
            self.ctx.oracle().cov.mark(Mark::SoloRound);
            let rng = ChaCha8Rng::seed_from_u64(self.rng.next_u64());
            let ops = cfg.ops_per_writer.max(4);
            handles.push(madsim::task::spawn(workload::solo(
                self.ctx.clone(),
                wal.clone(),
                cfg.writers,
                ops,
                rng,
            )));
            for _ in 0..cfg.writers.min(3).saturating_sub(1) {
                let rng = ChaCha8Rng::seed_from_u64(self.rng.next_u64());
                handles.push(madsim::task::spawn(workload::reader(
                    self.ctx.clone(),
                    wal.clone(),
                    4,
                    rng,
                )));
            }
        } else {
            for w in 0..cfg.writers {
                let rng = ChaCha8Rng::seed_from_u64(self.rng.next_u64());
                handles.push(madsim::task::spawn(workload::writer(
                    self.ctx.clone(),
                    wal.clone(),
                    w,
                    cfg.ops_per_writer,
                    rng,
                )));
            }
        }
        if cfg.crashes() && self.pct(cfg.crash_pct) {
            if self.crash_after_step() {
                // After the round's first write or cut (a third of the
                // time: after a reopen, the first step after recovery's
                // own), or one of its first others (a round makes about
                // one per append).
                let ops = u64::from(cfg.ops_per_writer) * u64::from(cfg.writers.min(8));
                let skip = if self.pct(33) {
                    0
                } else {
                    self.rng.random_range(0..=ops / 2)
                };
                self.pause_after_step(&handles, skip).await;
            } else {
                let span = u64::from(cfg.ops_per_writer) * cfg.latency_us.1 * 6;
                let wait = self.rng.random_range(0..=span.max(1));
                madsim::time::sleep(Duration::from_micros(wait)).await;
            }
            for h in &handles {
                h.abort();
            }
            for h in handles {
                let _ = h.await;
            }
            let kind = self.crash_kind();
            let stopped = wal.stopped().is_some();
            let mut extra = self.ctx.oracle().crashed(kind, stopped);
            self.crash_fs(kind);
            self.ctx.fs.set_capacity(None);
            drop(wal);
            self.wal = None;
            if kind == CrashKind::PowerLoss {
                extra.clear();
            }
            self.reopen(extra, false).await;
            return;
        }
        for h in handles {
            if let Err(e) = h.await {
                self.ctx.oracle().violation(format!("a workload task failed: {e}"));
            }
        }
        self.ctx.fs.set_capacity(None);
        self.quiescent(wal).await;
    }

    /// Checks at a point where no task runs: fail-stop, the live log, the
    /// segment list against the directory; then maybe a clean close and reopen.
    async fn quiescent(&mut self, wal: Arc<dyn LogApi>) {
        let cfg = self.ctx.cfg.clone();
        let (sync_fails, after_persist) = self.segment_sync_failures();
        self.note_after_effect();
        let stopped = wal.stopped();
        if stopped.is_some() && self.after_effect_count() > self.after_effect_at_open {
            self.ctx.oracle().cov.mark(Mark::StoppedAfterEffect);
        }
        {
            let mut o = self.ctx.oracle();
            o.cov.checks.failstop_checks += 1;
            // A sync that persisted and reported EIO is a failed fsync to
            // the WAL whatever the profile.
            let failed = if cfg.profile == SyncFailureProfile::Ext4DataJournal {
                after_persist
            } else {
                sync_fails + after_persist
            };
            if failed > 0 && stopped.is_none() {
                o.violation(format!(
                    "{failed} fsync(s) of segment files failed since open, but the WAL did not stop"
                ));
            }
            if let Some(cause) = &stopped {
                o.note_stopped(cause);
            }
        }
        if stopped.is_some() {
            self.close_stopped_and_reopen(wal).await;
            return;
        }
        let Some((first, next, entries)) = self.scan(&wal, false).await else {
            if std::mem::take(&mut self.scan_stopped) {
                self.close_stopped_and_reopen(wal).await;
            }
            return;
        };
        let slots = {
            let mut o = self.ctx.oracle();
            let Some(slots) = o.check_scan(first, next, &entries) else {
                return;
            };
            o.check_live(first, next, &slots);
            slots
        };
        self.last_slots = slots.clone();
        self.check_segments(&wal).await;
        self.note_flushes(&wal).await;
        let (slots, wal) = if self.pct(cfg.lifecycle.pct) {
            match self.lifecycle(wal).await {
                Some(r) => r,
                None => return,
            }
        } else {
            (slots, wal)
        };
        if self.pct(cfg.close_pct) {
            let start = self.ctx.oracle().now();
            self.wal = None;
            // Damage since this instance opened may have struck what the
            // scan before the close read.
            let close_seq = self.open_seq;
            let lies_before = self.lies_at_open;
            // Cancelled appends not yet seen: `close` finishes every admitted
            // append, so their records may appear after the reopen.
            let (cancelled, cancelled_records, cancelled_empty) = self.ctx.oracle().pending_cancelled();
            let r = wal.close().await;
            let ok = r.is_ok();
            self.ctx.oracle().finish_close(start, &r);
            let power = ok && cfg.on(FaultClass::PowerLoss) && self.pct(50);
            if power {
                self.ctx.oracle().crashed(CrashKind::PowerLoss, false);
                self.crash_fs(CrashKind::PowerLoss);
            }
            let crashes = self.open_crashes;
            let repairs = self.ctx.oracle().cov.get(Mark::DamageRepaired);
            if let Reopened::Open(after) = self.reopen(BTreeMap::new(), false).await {
                let clean = self.wal.as_ref().is_some_and(|w| w.recovery_report().clean_reopen);
                if clean {
                    self.ctx.oracle().cov.mark(Mark::CleanReopen);
                }
                // A clean close, no crash in between: the marker is used and
                // open reads no record data.
                // (Write faults excepted: a cut-back that could not shrink
                // the file leaves a marker that does not match, and open
                // falls back to a scan, which is safe; see SIMULATION.md.)
                let write_faults = cfg.on(FaultClass::EnospcWrite)
                    || cfg.on(FaultClass::EioWrite)
                    || cfg.on(FaultClass::DiskFull)
                    || cfg.on(FaultClass::AfterEffect);
                // (A repair at the reopen, which the ledger explained, may
                // have moved the meta file and its marker aside.)
                let repaired = self.ctx.oracle().cov.get(Mark::DamageRepaired) != repairs;
                if ok && !power && self.open_crashes == crashes && !write_faults && !repaired {
                    let reads = self.open_data_reads;
                    let mut o = self.ctx.oracle();
                    o.cov.checks.clean_reopen_checks += 1;
                    if !clean {
                        o.violation(
                            "reopen after a clean close (no crash) did not use the clean-shutdown marker".into(),
                        );
                    } else if reads > 0 && !cfg.on(FaultClass::ShortRead) {
                        o.violation(format!("a clean reopen read segment data ({reads} reads)"));
                    }
                }
                // A clean close made everything durable: the log is the same
                // (unless damage was found and repaired by a cut at the reopen).
                let exact = ok
                    && !self.damaged_since(close_seq, lies_before)
                    && self.ctx.oracle().cov.get(Mark::DamageRepaired) == repairs;
                let grown_by_cancelled = after.len() > slots.len()
                    && (after.len() - slots.len()) as u64 <= cancelled_records
                    && after.starts_with(&slots)
                    && after[slots.len()..].iter().all(|s| match s {
                        Slot::Rec(id, _) => cancelled.contains(id),
                        Slot::Empty => cancelled_empty,
                    });
                if grown_by_cancelled {
                    self.ctx.oracle().cov.mark(Mark::CancelledAppendLanded);
                }
                if exact && after != slots && !grown_by_cancelled {
                    self.ctx.oracle().violation(format!(
                        "after a clean close{} the reopened log differs ({} records before, {} after)",
                        if power { " and a power loss" } else { "" },
                        slots.len(),
                        after.len()
                    ));
                }
            }
        } else if self.pct(25) {
            self.idempotence(wal).await;
        }
    }

    /// Failed fsyncs of segment files since the last open (from the SimFs
    /// trace: a failed fsync of a temporary file the WAL then discards need
    /// not stop it): those that failed (`SyncFail`) and those that
    /// persisted and reported EIO (`SyncFailAfterPersist`).
    fn segment_sync_failures(&self) -> (u64, u64) {
        let c = self.ctx.fs.counters();
        let total = c.get(FaultKind::SyncFail) + c.get(FaultKind::SyncFailAfterPersist);
        if total == self.sync_fails_at_open {
            return (0, 0);
        }
        let events = self.ctx.fs.trace();
        let mut paths: BTreeMap<u64, String> = BTreeMap::new();
        let mut failures = 0;
        let mut after_persist = 0;
        for e in &events {
            if let (Some(ino), Some(path)) = (e.ino, e.path.as_ref()) {
                paths.insert(ino, path.clone());
            }
            let after = e.fault == Some(FaultKind::SyncFailAfterPersist);
            if (e.fault == Some(FaultKind::SyncFail) || after) && e.seq >= self.open_seq && e.op != "sync_dir" {
                let name = e
                    .ino
                    .and_then(|i| paths.get(&i))
                    .map(|p| p.rsplit('/').next().unwrap_or("").to_string())
                    .unwrap_or_default();
                if is_segment_name(&name) {
                    if after {
                        after_persist += 1;
                    } else {
                        failures += 1;
                    }
                }
            }
        }
        (failures, after_persist)
    }

    /// Faults after the effect injected so far (all kinds).
    fn after_effect_count(&self) -> u64 {
        let c = self.ctx.fs.counters();
        FaultKind::AFTER_EFFECT.iter().map(|&k| c.get(k)).sum()
    }

    /// Marks the engine paths the faults after the effect struck since the
    /// last look (from the SimFs trace): a meta replacement's or a segment's
    /// rename that reported EIO after taking effect.
    fn note_after_effect(&mut self) {
        let from = self.after_effect_seq;
        self.after_effect_seq = self.ctx.fs.next_seq();
        if self.ctx.fs.counters().get(FaultKind::EioRenameAfterEffect) == 0 {
            return;
        }
        let mut o = self.ctx.oracle();
        for e in self.ctx.fs.trace_since(from) {
            if e.fault != Some(FaultKind::EioRenameAfterEffect) {
                continue;
            }
            self.renamed_since_open = true;
            let name = e.path.as_deref().and_then(|p| p.rsplit('/').next()).unwrap_or("");
            if name == "meta.wal.tmp" {
                o.cov.mark(Mark::MetaRenameTookEffect);
            } else {
                o.cov.mark(Mark::SegmentRenameTookEffect);
            }
        }
    }

    /// No phantom segments: the WAL's segment list equals the directory.
    async fn check_segments(&mut self, wal: &Arc<dyn LogApi>) {
        use simfs::Fs;
        let listed = match self.ctx.fs.read_dir(&self.ctx.dir).await {
            Ok(l) => l,
            Err(e) => {
                self.ctx.oracle().event(&format!("read_dir failed: {e}"));
                return;
            }
        };
        if wal.stopped().is_some() {
            return;
        }
        if wal.interrupted() {
            // A cancelled operation left memory behind the files on purpose
            // (e.g. a group commit dropped between creating a segment and
            // listing it, seed 97002633): the next call rebuilds memory
            // from them. Let an iterator step be that call (it only reads),
            // then compare with the directory as it is then.
            self.ctx.oracle().cov.mark(Mark::CheckedAfterResume);
            if let Ok(mut it) = wal.iter_from(wal.first_index()) {
                let _ = it.next().await;
            }
            if wal.stopped().is_some() || wal.interrupted() {
                return;
            }
            return Box::pin(self.check_segments(wal)).await;
        }
        let mut on_disk: Vec<String> = listed
            .into_iter()
            .filter(|e| is_segment_name(&e.name))
            .map(|e| e.name)
            .collect();
        on_disk.sort();
        let mut names = wal.segment_names();
        names.sort();
        let mut o = self.ctx.oracle();
        o.cov.checks.phantom_checks += 1;
        if names != on_disk {
            o.violation(format!("segment list {names:?} differs from the directory {on_disk:?}"));
        }
    }

    /// Lifecycle operations from the control task, writers paused: prune
    /// (maybe then a snapshot install), truncation (valid and invalid
    /// arguments), compaction; maybe crashed mid-operation or right after.
    /// Returns the slots of the checked live log, or `None` if the WAL was
    /// reopened (crash or stop) or the run ended.
    async fn lifecycle(&mut self, wal: Arc<dyn LogApi>) -> Option<(Vec<Slot>, Arc<dyn LogApi>)> {
        let cfg = self.ctx.cfg.clone();
        let ops = self.rng.random_range(1..=3);
        let mut slots = self.last_slots.clone();
        for _ in 0..ops {
            let op = cfg.lifecycle.pick(&mut self.rng);
            let crash_mid = cfg.crashes() && self.pct(cfg.crash_pct);
            let op_rng = ChaCha8Rng::seed_from_u64(self.rng.next_u64());
            let ctx = self.ctx.clone();
            let w = wal.clone();
            let (first, next) = (wal.first_index(), wal.next_index());
            let (mark, task): (Mark, madsim::task::JoinHandle<()>) = match op {
                LifecycleOp::Prune => {
                    let mut rng = op_rng;
                    let k = workload::prune_point(&mut rng, first, next);
                    let start = workload::prune_started(&ctx, &w, "ctl", k, first, next);
                    (
                        Mark::CrashDuringPrune,
                        madsim::task::spawn(async move {
                            let r = w.prune_through(k).await;
                            workload::prune_finished(&ctx, &w, "ctl", start, k, first, &r);
                        }),
                    )
                }
                LifecycleOp::Truncate => {
                    if !ctx.oracle().model_valid() {
                        continue;
                    }
                    let (mf, mn) = ctx.oracle().model_range();
                    let mut rng = op_rng;
                    let (after, arg) = match rng.random_range(0..20) {
                        // Past the end (a no-op), or below the first index (refused).
                        0..=1 => (false, mn.saturating_add(rng.random_range(1..=5))),
                        2 if mf > 0 => (false, mf - 1),
                        3 => (true, mn),
                        4..=11 if mn > mf || mf > 0 => (true, rng.random_range(mf.max(1)..=mn.max(1)) - 1),
                        _ => (false, rng.random_range(mf..=mn)),
                    };
                    let from = if after { arg.saturating_add(1) } else { arg };
                    let what = if after {
                        format!("truncate_after({arg})")
                    } else {
                        format!("truncate_from({arg})")
                    };
                    let start = ctx.oracle().begin_truncate(&what);
                    // Remembered for an interrupted truncation below.
                    self.pending_truncate = Some((start, from));
                    (
                        Mark::CrashDuringTruncate,
                        madsim::task::spawn(async move {
                            let r = if after {
                                w.truncate_after(arg).await
                            } else {
                                w.truncate_from(arg).await
                            };
                            ctx.oracle().finish_truncate(start, from, &what, Some(&r));
                        }),
                    )
                }
                LifecycleOp::Compact => (
                    Mark::CrashDuringCompaction,
                    madsim::task::spawn(async move {
                        let opts = ctx.cfg.compaction;
                        let start = ctx.oracle().now();
                        let plan = w.compaction_plan(opts).await;
                        let r = w.compact(opts).await;
                        ctx.oracle().finish_compact("ctl", start, &plan, &r);
                    }),
                ),
            };
            if crash_mid {
                if self.crash_after_step() {
                    let skip = self.rng.random_range(0..=2);
                    self.pause_after_step(std::slice::from_ref(&task), skip).await;
                } else {
                    let wait = self.rng.random_range(0..=cfg.latency_us.1 * 8);
                    madsim::time::sleep(Duration::from_micros(wait)).await;
                }
                let finished = task.is_finished();
                task.abort();
                let _ = task.await;
                if !finished {
                    if let (LifecycleOp::Truncate, Some((start, from))) = (op, self.pending_truncate) {
                        self.ctx.oracle().finish_truncate(start, from, "truncation", None);
                    }
                    self.ctx.oracle().cov.mark(mark);
                }
                self.pending_truncate = None;
                self.crash_and_reopen(wal).await;
                return None;
            }
            self.pending_truncate = None;
            if let Err(e) = task.await {
                self.ctx.oracle().violation(format!("a lifecycle task failed: {e}"));
                return None;
            }
            if self.failed() {
                return None;
            }
            // Snapshot install after a prune emptied the log.
            if op == LifecycleOp::Prune && self.ctx.oracle().reseatable() && self.pct(60) {
                let at = wal.next_index().saturating_add(self.rng.random_range(1..=100));
                let len = workload::record_len(&cfg, &mut self.rng, false);
                let (id, mut p) = self.ctx.oracle().begin_append(cfg.writers + 2, &[len], false, Some(at));
                let r = wal.append_at(at, p.pop().unwrap_or_default()).await;
                self.ctx.oracle().finish_append(id, &r);
            }
            if let Some(cause) = wal.stopped() {
                self.ctx.oracle().note_stopped(&cause);
                let start = self.ctx.oracle().now();
                self.wal = None;
                let r = wal.close().await;
                self.ctx.oracle().finish_close(start, &r);
                self.reopen(BTreeMap::new(), false).await;
                return None;
            }
            let Some((f, n, entries)) = self.scan(&wal, false).await else {
                if std::mem::take(&mut self.scan_stopped) {
                    self.close_stopped_and_reopen(wal).await;
                }
                return None;
            };
            {
                let mut o = self.ctx.oracle();
                slots = o.check_scan(f, n, &entries)?;
                o.check_live(f, n, &slots);
            }
            self.last_slots = slots.clone();
            self.last_first = f;
            self.check_segments(&wal).await;
            if self.failed() {
                return None;
            }
            // A crash right after: what the operation promised must hold.
            if cfg.crashes() && self.pct(cfg.crash_pct / 2) {
                self.crash_and_reopen(wal).await;
                return None;
            }
        }
        Some((slots, wal))
    }

    /// Crashes now (no task runs) and reopens.
    async fn crash_and_reopen(&mut self, wal: Arc<dyn LogApi>) {
        let kind = self.crash_kind();
        let stopped = wal.stopped().is_some();
        let mut extra = self.ctx.oracle().crashed(kind, stopped);
        self.crash_fs(kind);
        self.ctx.fs.set_capacity(None);
        self.wal = None;
        drop(wal);
        if kind == CrashKind::PowerLoss {
            extra.clear();
        }
        self.reopen(extra, false).await;
    }

    /// Idempotent recovery: crash (process) and recover, then crash and
    /// recover again with no append in between: both recoveries give the
    /// same log (unless a crash hit the second open).
    async fn idempotence(&mut self, wal: Arc<dyn LogApi>) {
        let stopped = wal.stopped().is_some();
        let extra = self.ctx.oracle().crashed(CrashKind::Process, stopped);
        self.crash_fs(CrashKind::Process);
        self.wal = None;
        drop(wal);
        let Reopened::Open(first) = self.reopen(extra, false).await else {
            return;
        };
        let Some(wal) = self.wal.take() else { return };
        let crashes = self.open_crashes;
        let repairs = self.ctx.oracle().cov.get(Mark::DamageRepaired);
        let extra = self.ctx.oracle().crashed(CrashKind::Process, wal.stopped().is_some());
        self.crash_fs(CrashKind::Process);
        drop(wal);
        let Reopened::Open(second) = self.reopen(extra, false).await else {
            return;
        };
        // A crash inside the second open, or damage found and repaired by
        // a truncation (checked by the oracle on its own), changes the log.
        if self.open_crashes != crashes || self.ctx.oracle().cov.get(Mark::DamageRepaired) != repairs {
            return;
        }
        let mut o = self.ctx.oracle();
        o.cov.checks.idempotence_checks += 1;
        if first != second {
            o.violation(format!(
                "recovery is not idempotent: {} records after one recovery, {} after a second with no append in between",
                first.len(),
                second.len()
            ));
        }
    }

    /// Faults off, capacity lifted: recovery must complete, appends must
    /// succeed and survive a power loss.
    async fn heal(&mut self) {
        let cfg = self.ctx.cfg.clone();
        self.ctx.fs.heal();
        self.ctx.oracle().event("heal: faults off");
        if let Some(wal) = self.wal.take() {
            let start = self.ctx.oracle().now();
            let r = wal.close().await;
            self.ctx.oracle().finish_close(start, &r);
        }
        let Reopened::Open(_) = self.reopen(BTreeMap::new(), true).await else {
            return;
        };
        let Some(wal) = self.wal.clone() else { return };
        let heal_writer = cfg.writers + 1;
        let mut heal_ids = Vec::new();
        for i in 0..10u32 {
            let (id, r) = if i % 4 == 3 {
                let lens: Vec<usize> = [32usize, 0, cfg.max_record_bytes]
                    .into_iter()
                    .take(cfg.max_batch.max(1))
                    .collect();
                let (id, p) = self.ctx.oracle().begin_append(heal_writer, &lens, true, None);
                (id, wal.append_batch(p).await)
            } else {
                let len = workload::record_len(&cfg, &mut self.rng, false);
                let (id, mut p) = self.ctx.oracle().begin_append(heal_writer, &[len], false, None);
                (id, wal.append(p.pop().unwrap_or_default()).await)
            };
            let ok = r.is_ok();
            self.ctx.oracle().finish_append(id, &r);
            if !ok {
                self.ctx
                    .oracle()
                    .violation(format!("liveness: append after heal failed: {r:?}"));
                self.end = Some(RunEnd::Failed);
                return;
            }
            heal_ids.push(id);
            if i == 4 {
                // An honest seal: makes every directory entry durable, even
                // those a lying directory fsync left pending.
                let start = self.ctx.oracle().now();
                let r = wal.rotate().await;
                self.ctx.oracle().finish_rotate(start, &r);
                if r.is_err() {
                    self.ctx
                        .oracle()
                        .violation(format!("liveness: rotate after heal failed: {r:?}"));
                    self.end = Some(RunEnd::Failed);
                    return;
                }
            }
        }
        if cfg.sync == SyncKind::Manual {
            let start = self.ctx.oracle().now();
            let r = wal.sync().await;
            self.ctx.oracle().finish_sync(start, &r);
        }
        self.note_flushes(&wal).await;
        let start = self.ctx.oracle().now();
        self.wal = None;
        let r = wal.close().await;
        let ok = r.is_ok();
        self.ctx.oracle().finish_close(start, &r);
        if !ok {
            self.ctx
                .oracle()
                .violation(format!("liveness: close after heal failed: {r:?}"));
            self.end = Some(RunEnd::Failed);
            return;
        }
        let loss_from = self.ctx.fs.next_seq();
        self.ctx.oracle().crashed(CrashKind::PowerLoss, false);
        self.crash_fs(CrashKind::PowerLoss);
        let Reopened::Open(slots) = self.reopen(BTreeMap::new(), true).await else {
            return;
        };
        // The heal's records were synced with the faults off, but a lie at
        // the one fsync of the log's path (when the log was created) is
        // never repaired: this power loss may take the whole directory.
        // Excused only when the ledger names that entry, lost right here.
        let ledger = self.ctx.fs.damage();
        let path_lost = crate::damage::lost_log_path(&ledger, loss_from, &self.ctx.dir).map(crate::damage::describe);
        {
            let mut o = self.ctx.oracle();
            let first = self.last_first;
            for id in heal_ids {
                let (first_idx, n) = match o.attempts.get(id) {
                    Some(a) => match a.outcome {
                        crate::oracle::Outcome::Acked(i) => (i, a.records.len()),
                        _ => continue,
                    },
                    None => continue,
                };
                // A repair after damage found at this reopen may have cut
                // the log before them (a truncation the oracle modelled).
                let gone_from = o.attempts.get(id).map_or(usize::MAX, |a| a.gone_from);
                for k in 0..n.min(gone_from) {
                    if o.holds(&slots, first, first_idx + k as u64, id, k) {
                        continue;
                    }
                    match &path_lost {
                        Some(why) => {
                            o.cov.checks.lost_to_damage += 1;
                            o.event(&format!("heal: record #{id}[{k}] lost with the log's path: {why}"));
                        }
                        None => o.violation(format!("heal: record #{id}[{k}] closed cleanly, lost at power loss")),
                    }
                }
            }
            o.cov.mark(Mark::HealCompleted);
        }
        if let Some(wal) = self.wal.clone() {
            self.idempotence(wal).await;
        }
        if let Some(wal) = self.wal.take() {
            let start = self.ctx.oracle().now();
            let r = wal.close().await;
            self.ctx.oracle().finish_close(start, &r);
        }
    }
}
