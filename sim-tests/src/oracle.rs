//! The oracle: a model of what the log may and must contain, checked after
//! every operation and every recovery.
//!
//! Every append attempt is recorded with its writer, the sequence numbers and
//! lengths of its records, its start and end on a logical clock (ticks of this
//! oracle) and its outcome. A record read back decodes (see
//! [`crate::payload`]) to the attempt and position that wrote it, so the
//! oracle checks it byte for byte and knows where it may sit.
//!
//! What is guaranteed, and therefore checked (see `docs/SIMULATION.md`):
//! * `Ok` under `Always`/`Batched`, or `Ok` followed by an `Ok` `sync()` that
//!   started after it (or an `Ok` `close()`) under `Manual`: durable, present
//!   byte for byte after any crash (strong mode only).
//! * `Ok` under any policy: present after a *process* crash, unless the WAL
//!   had stopped (a failed fsync may revert the page cache). With the write
//!   buffer on (`Options::write_buffer_bytes`), only the records that were in
//!   the file: those below the highest index a read or an iterator returned
//!   in this instance (a read writes the buffer first); the others may be
//!   lost, and since the recovered log is contiguous and every record must
//!   sit at its acknowledged index, only as a suffix, never a gap.
//! * `Err(AppendFailed)`: nothing of the group is in the log, ever.
//! * `Err(Stopped)`, or an append aborted by a crash: unknown.
//! * After a recovery the log is a contiguous prefix, every record is one an
//!   attempt wrote at that index, batches are whole, appends that did not
//!   overlap in time are in index order, nothing absent after a successful
//!   recovery comes back, and acknowledged records seen after a recovery stay.

use std::collections::{BTreeMap, BTreeSet};

use simfs::{CrashKind, SimFs};
use tracing::info;
use wal::{Error, RecoveryReport};
use wal_model::{Log, Mismatch, Problem};

use crate::config::{FaultClass, RunConfig, SyncKind};
use crate::coverage::{Coverage, Mark};
use crate::damage::{self, Layout};
use crate::leases::Leases;
use crate::payload::{self, Decoded, Key};

mod embedding;

/// What became of an append attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Still running.
    Pending,
    /// Returned `Ok(first index)`.
    Acked(u64),
    /// `AppendFailed`: nothing of it is in the log.
    Failed,
    /// Refused before admission (`WrongIndex`, `RecordTooLarge`): nothing written.
    Rejected,
    /// `Stopped`, or aborted by a crash: may or may not be in the log.
    Unknown,
}

/// One append call.
#[derive(Clone, Debug)]
pub struct Attempt {
    /// The writer task.
    pub writer: u16,
    /// `(seq, len)` of each record.
    pub records: Vec<(u64, usize)>,
    /// An atomic batch.
    pub batch: bool,
    /// Caller-chosen first index.
    pub at: Option<u64>,
    /// Tick when it was called.
    pub start: u64,
    /// Tick when it returned (or was aborted); `u64::MAX` while pending.
    pub end: u64,
    /// Its outcome.
    pub outcome: Outcome,
    /// Records from this position on were found absent after a successful
    /// recovery, or removed by a truncation that returned `Ok`: they must
    /// never appear again (`usize::MAX`: none).
    pub gone_from: usize,
    /// A truncation started inside this attempt (Ok or interrupted): its
    /// records from this position on may be absent while the others stay
    /// (a batch cut by request is not a torn batch).
    pub cut: Option<usize>,
    /// SimFs trace position when it was called: damage recorded before it
    /// cannot explain losing its records.
    pub fs_seq: u64,
}

/// What one index of a scanned log holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// Record `.1` of attempt `.0`.
    Rec(usize, usize),
    /// An empty record (no identity).
    Empty,
}

/// The state of the currently open WAL instance.
#[derive(Clone, Debug, Default)]
struct Instance {
    open_next: u64,
    open_slots: Vec<Slot>,
    /// Acknowledged in this instance: index → (attempt, position).
    acked: BTreeMap<u64, (usize, usize)>,
    /// Attempts acknowledged but not yet covered by a sync (Manual).
    unsynced: Vec<usize>,
    /// Tick at which a `Stopped` result was first seen.
    stopped_at: Option<u64>,
    /// The live log as it must be at the next quiescent point, in the shared
    /// model (`wal-model`): the log at open, plus acknowledged appends, minus
    /// pruned and truncated records. It keeps the floor acknowledged indices
    /// are never below (the end at open, moved by truncations, prunes and
    /// snapshot installs), whether a full prune left it reseatable (an
    /// `append_at(j)` above the next index may start it at `j`), and whether
    /// it is exact (not after a lifecycle operation failed in a way that
    /// leaves memory and disk undetermined until reopen).
    log: Log<Slot>,
    /// With the write buffer: records below this index were in the segment
    /// file when a read or an iterator returned one of them (reads write the
    /// buffer first), so they survive a process crash. Lowered by
    /// truncations (the indices above are reused by buffered records).
    written_next: u64,
    /// Cancelled appends of this instance that no scan has shown yet: each
    /// may have been admitted (then the WAL writes it without its caller,
    /// maybe only with a later group) or not. The live check adopts one
    /// into the model where a scan finds it (`Oracle::adopt_cancelled`).
    cancelled: std::collections::BTreeSet<usize>,
    /// Calls cancelled since this instance opened.
    cancels: u64,
    /// The model's floor as last seen and the tick it was first seen there
    /// (`Oracle::now`): a cancelled append that ended before then may sit
    /// below it.
    floor_seen: (u64, u64),
    /// The last index of the last seal event of this open.
    last_sealed: Option<u64>,
}

/// The oracle of one run.
pub struct Oracle {
    first_index: u64,
    syncs_every_append: bool,
    /// `Options::write_buffer_bytes` is on: acknowledged records may be lost
    /// at a process crash until written.
    buffered: bool,
    /// The run's filesystem: its damage ledger is the only evidence an
    /// excuse may cite.
    fs: Option<SimFs>,
    /// The log directory.
    dir: std::path::PathBuf,
    /// Where every record sat at the last crash.
    layout: Layout,
    /// SimFs's count of lying and failed syncs at the last layout snapshot.
    claims_seen: u64,
    /// A claim was broken (see `snapshot_after_claims`) since the last
    /// crash.
    claims_since_crash: bool,
    /// Where an operator repair cut the log just recovered, until
    /// [`Oracle::after_recovery`] takes it into account.
    operator_cut: Option<u64>,
    /// SimFs trace position of the first crash since the last successful
    /// recovery (`None` before one).
    crash_seq: Option<u64>,
    /// SimFs trace position at the end of the last recovery check.
    recovery_seq: u64,
    /// A power loss undid directory operations or file sizes that a lying
    /// (or late-failing) sync had claimed durable (evidence: a ledger entry
    /// of that power loss on the log's files). Allows the first index
    /// to move back and truncated or pruned records to come back at the next
    /// recovery only; cleared by it.
    undone_by_lie: bool,
    /// The ledger entry of the meta file's contents or directory entry that
    /// the last power loss undid (a lying sync had claimed it), described:
    /// a low-water mark older than a prune made is excused by it.
    meta_undone: Option<String>,
    /// Losses a point-in-time open accepted whose meta write (raising the
    /// low-water mark over them) an injected fault failed: `[first, end)`
    /// and the fault, described. Cleared by an open that accepts none.
    unrecorded_losses: Vec<(u64, u64, String)>,
    /// The operator moved segments aside since the last recovery (damage
    /// the ledger explained): the first index may fall back to the meta
    /// file's low-water mark (a prune that removed nothing promises its
    /// first index through the first segment's name, which went aside).
    moved_aside: bool,
    /// Segments the operator moved aside since the last recovery because
    /// their header did not check while their name made others leftovers
    /// (a compaction output), each with the recorded damage the report was
    /// explained by. Recovery had refused to remove the inputs, but a
    /// compaction that ran to its removals had taken them already: the
    /// records only that file held went aside with it (seeds 90004374,
    /// 90005024). Cleared by the next recovery.
    aside_for_damage: Vec<(crate::repair::SegName, String)>,
    /// The operator moved a damaged meta file aside (the ledger explained
    /// the damage): the low-water mark it held, the first index then. The
    /// next recovery may start below it, and records below it that a prune
    /// had removed from the meta file's view but not yet from the disk may
    /// come back; cleared by that recovery.
    meta_lost: Option<(u64, u64, String)>,
    eio_read: bool,
    /// A failed fsync reverts the page cache (btrfs): a read racing the
    /// stop may see the reverted bytes and report corruption.
    revert_on_sync_fail: bool,
    max_record_bytes: usize,
    tick: u64,
    /// Every append attempt, by id.
    pub attempts: Vec<Attempt>,
    by_key: BTreeMap<Key, (usize, usize)>,
    next_seq: BTreeMap<u16, u64>,
    /// Index → record that must be present after any crash.
    must: BTreeMap<u64, (usize, usize)>,
    inst: Instance,
    /// Coverage marks and check counts.
    pub cov: Coverage,
    /// Invariant violations found.
    pub violations: Vec<String>,
    hash: u64,
    /// The first index is never below this (prunes that returned `Ok`, first
    /// indices seen after recoveries): durable low-water expectation.
    first_lo: u64,
    /// The first index is never above this (targets of prunes started,
    /// snapshot installs attempted, first indices seen).
    first_hi: u64,
    /// Prunes running now.
    prunes_in_flight: u32,
    /// Every prune started: `(k, start tick, end tick)`, the end `u64::MAX`
    /// while it runs (or if a crash aborted it). A durable record below a
    /// recovered first index is excused only by a prune through it that had
    /// not returned when the record's append started.
    prunes: Vec<(u64, u64, u64)>,
    /// Tick at which the last prune ended.
    last_prune_end: u64,
    /// A prune or a truncation ran in this run.
    lifecycle_used: bool,
    /// The live iterators' leases, checked against every prune
    /// ([`crate::leases`]).
    pub(crate) leases: Leases,
}

fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Whether SimFs injecting `f` makes the call fail (the kinds a stop's
/// I/O error can come from).
fn fails_a_call(f: simfs::FaultKind) -> bool {
    use simfs::FaultKind as K;
    matches!(
        f,
        K::EnospcWrite
            | K::ShortWrite
            | K::EnospcMetadata
            | K::EioRead
            | K::EioWrite
            | K::EioOpen
            | K::EioRename
            | K::EioRemove
            | K::SyncFail
            | K::LatentSectorRead
            | K::EioWriteAfterEffect
            | K::EioSetLenAfterEffect
            | K::EioRenameAfterEffect
            | K::EioRemoveAfterEffect
            | K::EioCreateAfterEffect
            | K::SyncFailAfterPersist
    )
}

/// Whether an error is `Stopped`.
pub fn is_stopped(r: &Error) -> bool {
    r.is_stopped()
}

/// Whether an error came from a failed fsync of a file or directory.
pub fn caused_by_sync(e: &Error) -> bool {
    match e {
        Error::Io { op, .. } => op.contains("sync") || op.contains("cut back"),
        Error::Stopped { cause } | Error::AppendFailed { cause } => caused_by_sync(cause),
        _ => false,
    }
}

impl Oracle {
    /// An oracle for one run.
    pub fn new(cfg: &RunConfig) -> Oracle {
        Oracle {
            first_index: cfg.first_index,
            syncs_every_append: !matches!(cfg.sync, SyncKind::Manual),
            buffered: cfg.write_buffer_bytes > 0,
            fs: None,
            dir: std::path::PathBuf::new(),
            layout: Layout::default(),
            claims_seen: 0,
            claims_since_crash: false,
            operator_cut: None,
            crash_seq: None,
            recovery_seq: 0,
            undone_by_lie: false,
            meta_undone: None,
            unrecorded_losses: Vec::new(),
            moved_aside: false,
            aside_for_damage: Vec::new(),
            meta_lost: None,
            eio_read: cfg.on(FaultClass::EioRead)
                || cfg.on(FaultClass::EioOpen)
                || cfg.on(FaultClass::LatentSectorError),
            revert_on_sync_fail: cfg.on(FaultClass::SyncFail) && cfg.profile == simfs::SyncFailureProfile::Btrfs,
            max_record_bytes: cfg.max_record_bytes,
            tick: 0,
            attempts: Vec::new(),
            by_key: BTreeMap::new(),
            next_seq: BTreeMap::new(),
            must: BTreeMap::new(),
            inst: Instance {
                open_next: cfg.first_index,
                log: Log::new(cfg.first_index),
                ..Instance::default()
            },
            cov: Coverage::default(),
            violations: Vec::new(),
            hash: 0xcbf2_9ce4_8422_2325,
            first_lo: cfg.first_index,
            first_hi: cfg.first_index,
            prunes_in_flight: 0,
            prunes: Vec::new(),
            last_prune_end: 0,
            lifecycle_used: false,
            leases: Leases::new(cfg.max_lease_holds),
        }
    }

    /// Logs one workload event: hashed into the run's trace and printed at
    /// info level (the replay's readable trace).
    pub fn event(&mut self, s: &str) {
        self.hash = fnv(self.hash, s.as_bytes());
        self.hash = fnv(self.hash, b"\n");
        info!(target: "sim", tick = self.tick, "{s}");
    }

    /// The hash of every workload event so far.
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// Records an invariant violation.
    pub fn violation(&mut self, s: String) {
        self.event(&format!("VIOLATION: {s}"));
        tracing::error!(target: "sim", "VIOLATION: {s}");
        if self.violations.len() < 50 {
            self.violations.push(s);
        }
    }

    /// Advances the logical clock and returns the new tick.
    pub fn now(&mut self) -> u64 {
        self.tick += 1;
        self.note_floor(self.tick);
        self.tick
    }

    /// Whether acknowledged records are durable without a `sync()`.
    pub fn syncs_every_append(&self) -> bool {
        self.syncs_every_append
    }

    /// Registers an append attempt and builds its payloads.
    pub fn begin_append(&mut self, writer: u16, lens: &[usize], batch: bool, at: Option<u64>) -> (usize, Vec<Vec<u8>>) {
        let start = self.now();
        let id = self.attempts.len();
        let mut records = Vec::with_capacity(lens.len());
        let mut payloads = Vec::with_capacity(lens.len());
        for (k, &len) in lens.iter().enumerate() {
            let seq = self.next_seq.entry(writer).or_insert(0);
            let s = *seq;
            *seq += 1;
            let p = payload::make(writer, s, len);
            records.push((s, p.len()));
            payloads.push(p);
            self.by_key.insert((writer, s), (id, k));
        }
        let what = if batch { "append_batch" } else { "append" };
        let at_s = at.map(|i| format!(" at {i}")).unwrap_or_default();
        let lens_s: Vec<usize> = records.iter().map(|r| r.1).collect();
        self.event(&format!("w{writer} #{id} {what}{at_s} lens {lens_s:?} start"));
        if let Some(j) = at {
            if self.inst.log.reseatable() && j > self.model_next() {
                // A snapshot install may start the log at `j`, whatever the
                // outcome (the WAL moves its first index on admission).
                self.first_hi = self.first_hi.max(j);
                // Caught-up iterators skip there.
                self.leases.reseat_begin(id, j);
            }
        }
        self.attempts.push(Attempt {
            writer,
            records,
            batch,
            at,
            start,
            end: u64::MAX,
            outcome: Outcome::Pending,
            gone_from: usize::MAX,
            cut: None,
            fs_seq: self.fs.as_ref().map_or(0, SimFs::next_seq),
        });
        (id, payloads)
    }

    /// Checks a call's result against fail-stop: once a `Stopped` result was
    /// seen, every call that starts later must return `Stopped`.
    pub fn failstop(&mut self, start: u64, result: Result<(), &Error>, what: &str) {
        self.cov.checks.failstop_checks += 1;
        let stopped = matches!(result, Err(e) if e.is_stopped());
        if let Some(t) = self.inst.stopped_at {
            if start > t && !stopped {
                let r = match result {
                    Ok(()) => "Ok".to_string(),
                    Err(e) => e.to_string(),
                };
                self.violation(format!(
                    "fail-stop: {what} started after the WAL stopped (tick {t}) returned {r}"
                ));
            }
        }
        if let Err(e) = result {
            if stopped && self.inst.stopped_at.is_none() {
                self.inst.stopped_at = Some(self.tick);
                if caused_by_sync(e) {
                    self.cov.mark(Mark::StoppedAfterSyncError);
                }
                self.check_stop(e);
            }
        }
    }

    /// Records the result of an append attempt and checks it.
    pub fn finish_append(&mut self, id: usize, result: &wal::Result<u64>) {
        let end = self.now();
        self.leases.reseat_end(id);
        self.cov.checks.ops += 1;
        if result.is_ok() {
            self.snapshot_after_claims();
        }
        let Some(a) = self.attempts.get_mut(id) else { return };
        a.end = end;
        let (start, n, at, writer) = (a.start, a.records.len() as u64, a.at, a.writer);
        let too_large = a.records.iter().any(|r| r.1 > self.max_record_bytes);
        self.event(&format!(
            "w{writer} #{id} -> {}",
            match result {
                Ok(i) => format!("Ok({i})"),
                Err(e) => format!("Err({e})"),
            }
        ));
        // Argument checks come before the stopped check: a refused oversized
        // record is not a fail-stop violation.
        if !(too_large && matches!(result, Err(Error::RecordTooLarge { .. }))) {
            self.failstop(start, result.as_ref().map(|_| ()), "append");
        }
        let outcome = match result {
            Ok(first) => {
                if at.is_some_and(|want| want != *first) {
                    self.violation(format!("#{id}: append_at({at:?}) returned index {first}"));
                }
                if too_large {
                    self.violation(format!("#{id}: an oversized record was accepted"));
                }
                let model_next = self.model_next();
                // Only appends at caller-chosen indices run with no other
                // appender (concurrent acknowledgements arrive out of order).
                if *first > model_next && self.inst.log.exact() && at.is_some() {
                    // Only an emptied log may jump forward (snapshot install).
                    if self.inst.log.reseat(*first).is_ok() {
                        self.cov.mark(Mark::SnapshotInstall);
                        self.event(&format!("snapshot install: the log now starts at {first}"));
                    } else if *first <= model_next + self.cancelled_records() {
                        // Cancelled appends no scan has shown yet may hold
                        // the gap, if they have that many records (the next
                        // live check adopts them).
                    } else {
                        self.violation(format!(
                            "#{id}: acknowledged at {first}, above the next index {model_next}, but the log was not emptied by a prune"
                        ));
                    }
                }
                let slots = self.slots_of(id);
                // The model skips records pruned before this acknowledgement
                // reached us (a full prune drains the queue first), and
                // refuses an index below its floor or one acknowledged twice.
                let log_first = self.inst.log.first();
                if let Err(m) = self.inst.log.acknowledge_at(*first, slots, self.syncs_every_append) {
                    self.violation(match m.problem {
                        Problem::BelowFloor { floor } => format!(
                            "#{id}: acknowledged index {} is below the log's end at open or truncation ({floor})",
                            m.index
                        ),
                        Problem::Taken => match self.inst.acked.get(&m.index) {
                            Some(prev) => format!("#{id}: index {} acknowledged twice (also #{})", m.index, prev.0),
                            None => format!("#{id}: index {} acknowledged twice (also {:?})", m.index, m.want),
                        },
                        _ => format!("#{id}: {m}"),
                    });
                }
                for k in 0..n {
                    let idx = first + k;
                    if idx < log_first {
                        continue;
                    }
                    self.inst.acked.insert(idx, (id, k as usize));
                    if self.syncs_every_append {
                        self.must.insert(idx, (id, k as usize));
                    }
                }
                if !self.syncs_every_append {
                    self.inst.unsynced.push(id);
                }
                Outcome::Acked(*first)
            }
            Err(Error::AppendFailed { .. }) => {
                if let Some(j) = at {
                    // The WAL moves an emptied log to `j` on admission and
                    // keeps it there when the write fails (memory only: a
                    // reopen starts at the low-water mark again).
                    if self.inst.log.exact() && self.inst.log.reseat(j).is_ok() {
                        self.event(&format!("failed snapshot install: the live log now starts at {j}"));
                    }
                }
                // Admitted: the log is no longer reseatable.
                self.inst.log.append_failed(&[]);
                let full = result.as_ref().err().is_some_and(Error::is_storage_full);
                self.cov.mark(if full {
                    Mark::EnospcCutBack
                } else {
                    Mark::AppendFailedOther
                });
                Outcome::Failed
            }
            Err(Error::Stopped { .. }) => Outcome::Unknown,
            Err(Error::WrongIndex { expected, got }) => {
                if at.is_none() || expected == got {
                    self.violation(format!(
                        "#{id}: WrongIndex {{ expected {expected}, got {got} }} is wrong"
                    ));
                }
                self.cov.mark(Mark::WrongIndexRefused);
                Outcome::Rejected
            }
            Err(Error::RecordTooLarge { .. }) => {
                if !too_large {
                    self.violation(format!("#{id}: RecordTooLarge for records within the limit"));
                }
                self.cov.mark(Mark::RecordTooLargeRefused);
                Outcome::Rejected
            }
            Err(e) => {
                self.violation(format!("#{id}: unexpected append error: {e}"));
                Outcome::Unknown
            }
        };
        if let Some(a) = self.attempts.get_mut(id) {
            a.outcome = outcome;
        }
    }

    /// The model slots of attempt `id`'s records.
    fn slots_of(&self, id: usize) -> Vec<Slot> {
        self.attempts
            .get(id)
            .map(|a| {
                a.records
                    .iter()
                    .enumerate()
                    .map(|(k, r)| if r.1 == 0 { Slot::Empty } else { Slot::Rec(id, k) })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A writer dropped the future of append attempt `id` before it
    /// returned. Its outcome is unknown: it may have been admitted (then
    /// the WAL must carry it to the file like any other, in index order) or
    /// not. Real-time order still holds for it: if it is in the log, its
    /// index was assigned before now.
    pub fn cancelled_append(&mut self, id: usize) {
        let end = self.now();
        self.leases.reseat_end(id);
        self.cov.checks.cancellations += 1;
        self.cov.mark(Mark::CallCancelled);
        self.inst.cancels += 1;
        let writer = self.attempts.get_mut(id).map(|a| {
            a.end = end;
            a.outcome = Outcome::Unknown;
            a.writer
        });
        if let Some(w) = writer {
            self.event(&format!("w{w} #{id} cancelled (future dropped)"));
        }
        self.inst.cancelled.insert(id);
    }

    /// Cancelled appends of this instance that no scan has shown yet: their
    /// ids, their records in all, and whether any of those is empty.
    pub fn pending_cancelled(&self) -> (BTreeSet<usize>, u64, bool) {
        let any_empty = self
            .inst
            .cancelled
            .iter()
            .filter_map(|&id| self.attempts.get(id))
            .any(|a| a.records.iter().any(|r| r.1 == 0));
        (self.inst.cancelled.clone(), self.cancelled_records(), any_empty)
    }

    /// Records of the cancelled appends no scan has shown yet: how far past
    /// the model's next index the log may reach without them adopted.
    fn cancelled_records(&self) -> u64 {
        self.inst
            .cancelled
            .iter()
            .filter_map(|&id| self.attempts.get(id))
            .map(|a| a.records.len() as u64)
            .sum()
    }

    /// Notes the model's floor (see `Instance::floor_seen`): first seen
    /// there at `tick`.
    fn note_floor(&mut self, tick: u64) {
        let floor = self.inst.log.floor();
        if floor != self.inst.floor_seen.0 {
            self.inst.floor_seen = (floor, tick);
        }
    }

    /// A writer dropped the future of a call that acknowledges nothing by
    /// itself (`sync`, `rotate`, `read`) before it returned: nothing may be
    /// assumed of it, and the WAL must go on.
    pub fn cancelled_call(&mut self, what: &str) {
        self.now();
        self.cov.checks.cancellations += 1;
        self.cov.mark(Mark::CallCancelled);
        self.inst.cancels += 1;
        self.event(&format!("{what} cancelled (future dropped)"));
    }

    /// Before a live check: a cancelled append the scan shows was admitted,
    /// so the model takes it where it is (as acknowledged-only: it promises
    /// no durability). The scan checked already that it is whole, decodes to
    /// its attempt and keeps real-time order; here it must also take an
    /// index no other record holds.
    fn adopt_cancelled(&mut self, first: u64, slots: &[Slot]) {
        if self.inst.cancelled.is_empty() {
            return;
        }
        let mut found: BTreeMap<usize, u64> = BTreeMap::new();
        for (j, s) in slots.iter().enumerate() {
            if let Slot::Rec(id, k) = *s {
                if self.inst.cancelled.contains(&id) {
                    found.entry(id).or_insert((first + j as u64).wrapping_sub(k as u64));
                }
            }
        }
        for (id, base) in found {
            self.inst.cancelled.remove(&id);
            let mut mine = self.slots_of(id);
            // A truncation may have kept only a prefix (the scan checked that
            // what is there is one): the model takes what is there.
            let present = (0..mine.len())
                .take_while(|&k| {
                    let idx = base.wrapping_add(k as u64);
                    // (Below the first index: pruned since; the model skips it.)
                    idx < first
                        || idx < first + slots.len() as u64
                            && match slots[(idx - first) as usize] {
                                Slot::Rec(i, j) => (i, j) == (id, k),
                                Slot::Empty => mine[k] == Slot::Empty,
                            }
                })
                .count();
            mine.truncate(present);
            self.cov.mark(Mark::CancelledAppendLanded);
            self.event(&format!("cancelled #{id} is in the log at {base}"));
            // (A floor moved since the last tick moved after every end so far.)
            self.note_floor(self.tick + 1);
            let before_floor = self.attempts.get(id).is_some_and(|a| a.end < self.inst.floor_seen.1);
            match self.inst.log.acknowledge_at(base, mine, false) {
                Ok(()) => {}
                // Admitted (and written by a later group) before a
                // truncation or an operator's cut moved the floor past it:
                // it was cancelled before the floor got where it is.
                Err(Mismatch {
                    problem: Problem::BelowFloor { .. },
                    ..
                }) if before_floor => {}
                Err(m) => self.violation(format!("cancelled #{id} in the log at {base}: {m}")),
            }
        }
    }

    /// The injected fault that explains a stop with `cause` (every stop
    /// needs one; a cancelled call is never one): for an I/O error, a
    /// fault SimFs injected into the file it names (by path, or by an inode
    /// that name had: a handle's operations carry only the inode) or into
    /// the fsync of its directory; for corruption, recorded damage. Any other cause (an internal
    /// invariant, a cancellation) has none.
    fn explain_stop(&mut self, cause: &Error) -> Option<String> {
        let mut root = cause;
        while let Error::Stopped { cause } | Error::AppendFailed { cause } | Error::Interrupted { cause, .. } = root {
            root = cause;
        }
        match root {
            Error::Io { path, .. } => {
                let fs = self.fs.as_ref()?;
                let named = path.to_string_lossy();
                let parent = path.parent().map(|p| p.to_string_lossy().into_owned());
                let trace = fs.trace();
                // The file's inodes: now, and under its name earlier (a
                // handle's operations carry only the inode; the file may
                // have been renamed or removed since).
                let mut inos: BTreeSet<u64> = fs.inode_of(path).into_iter().collect();
                inos.extend(
                    trace
                        .iter()
                        .filter(|t| {
                            [&t.path, &t.to_path]
                                .iter()
                                .any(|p| p.as_deref() == Some(named.as_ref()))
                        })
                        .filter_map(|t| t.ino),
                );
                // A fault into the file, or into its directory's entries
                // (an error on a file's removal or creation may be the
                // directory's fsync that makes it durable).
                let on_file = trace
                    .iter()
                    .rev()
                    .filter(|t| t.fault.is_some_and(fails_a_call))
                    .find(|t| {
                        t.path.as_deref() == Some(named.as_ref())
                            || t.ino.is_some_and(|i| inos.contains(&i))
                            || (t.op == "sync_dir" && t.path.is_some() && t.path == parent)
                    });
                on_file.map(|t| {
                    format!(
                        "{:?} injected into {} of {} at fs seq {}",
                        t.fault.unwrap_or(simfs::FaultKind::EioWrite),
                        t.op,
                        t.path.as_deref().unwrap_or("?"),
                        t.seq
                    )
                })
            }
            Error::Corruption { .. } => self.explain_error(root),
            _ => None,
        }
    }

    /// The WAL stopped with `cause` (first seen now): the stop must have an
    /// injected fault behind it.
    fn check_stop(&mut self, cause: &Error) {
        match self.explain_stop(cause) {
            Some(why) => {
                self.cov.checks.stops_explained += 1;
                self.event(&format!("stopped, explained by {why}"));
            }
            None => {
                let cancels = self.inst.cancels;
                self.violation(format!(
                    "the WAL stopped ({cause}) and no injected fault explains it ({cancels} calls cancelled since open)"
                ));
            }
        }
    }

    /// Records the result of `sync()` started at tick `start`.
    pub fn finish_sync(&mut self, start: u64, result: &wal::Result<()>) {
        self.now();
        self.cov.checks.ops += 1;
        self.event(&format!("sync (from tick {start}) -> {result:?}").replace('\n', " "));
        self.failstop(start, result.as_ref().map(|_| ()), "sync");
        match result {
            Ok(()) => {
                // A sync that makes records durable is an acknowledgement
                // like an append's: a lie in it, then a btrfs failed sync
                // reverting the page cache before any crash, and the records
                // it covered were never seen where they were (soak seed
                // 92034182: `sync` Manual, the lie in `sync()`, the revert
                // in the next `rotate`).
                self.snapshot_after_claims();
                let attempts = &self.attempts;
                let (done, rest): (Vec<usize>, Vec<usize>) = self
                    .inst
                    .unsynced
                    .iter()
                    .partition(|&&id| attempts.get(id).is_some_and(|a| a.end < start));
                self.inst.unsynced = rest;
                for id in done {
                    self.make_durable(id);
                }
            }
            Err(e) if e.is_stopped() => {}
            Err(e) => self.violation(format!("sync returned {e} (only Ok or Stopped are possible)")),
        }
    }

    fn make_durable(&mut self, id: usize) {
        if let Some(Outcome::Acked(first)) = self.attempts.get(id).map(|a| a.outcome) {
            let (n, cut) = self.attempts.get(id).map_or((0, None), |a| (a.records.len(), a.cut));
            for k in 0..n.min(cut.unwrap_or(usize::MAX)) {
                let idx = first + k as u64;
                // Pruned or truncated records are not in the log any more.
                if idx >= self.inst.log.first() && self.inst.acked.get(&idx) == Some(&(id, k)) {
                    self.must.insert(idx, (id, k));
                }
            }
        }
    }

    /// Records the result of `close()`: `Ok` makes everything acknowledged durable.
    pub fn finish_close(&mut self, start: u64, result: &wal::Result<()>) {
        self.now();
        self.cov.checks.ops += 1;
        self.event(&format!("close -> {result:?}").replace('\n', " "));
        self.failstop(start, result.as_ref().map(|_| ()), "close");
        match result {
            Ok(()) => {
                self.snapshot_after_claims();
                let ids: Vec<usize> = std::mem::take(&mut self.inst.unsynced);
                for id in ids {
                    self.make_durable(id);
                }
            }
            Err(e) if e.is_stopped() => {}
            // Close writes metadata after the final sync: a filesystem error
            // there is reported, and nothing is promised about durability.
            Err(Error::Io { .. }) => {}
            Err(e) => self.violation(format!("close returned {e}")),
        }
    }

    /// Records the result of `rotate()`; returns whether it failed.
    pub fn finish_rotate(&mut self, start: u64, result: &wal::Result<()>) -> bool {
        self.now();
        self.cov.checks.ops += 1;
        self.event(&format!("rotate -> {result:?}").replace('\n', " "));
        let was_stopped = self.inst.stopped_at.is_some_and(|t| t < start);
        self.failstop(start, result.as_ref().map(|_| ()), "rotate");
        match result {
            Ok(()) => false,
            Err(e) => {
                if !was_stopped {
                    self.cov.mark(Mark::RotationFailed);
                }
                if !e.is_stopped() && !matches!(e, Error::Io { .. }) {
                    self.violation(format!("rotate returned {e}"));
                }
                true
            }
        }
    }

    /// Records a read of `index` (readable range `[first, next)` when it
    /// started) and checks the record.
    pub fn finish_read(&mut self, start: u64, index: u64, first: u64, next: u64, result: &wal::Result<Vec<u8>>) {
        self.now();
        self.cov.checks.ops += 1;
        self.failstop(start, result.as_ref().map(|_| ()), "read");
        match result {
            Ok(p) => {
                self.check_record(index, p);
            }
            Err(e) => {
                self.event(&format!("read {index} -> Err({e})"));
                self.check_read_error(start, e, index, first, next)
            }
        }
    }

    /// Checks an error of a read or an iterator step.
    pub fn check_read_error(&mut self, start: u64, e: &Error, index: u64, first: u64, next: u64) {
        match e {
            Error::Stopped { .. } => {}
            Error::OutOfRange { .. } => {
                if index >= first && index < next && !self.racing_prune(start) {
                    self.violation(format!(
                        "read {index}: OutOfRange though [{first}, {next}) was readable"
                    ));
                }
            }
            Error::Corruption { .. } if self.revert_on_sync_fail && self.sync_failed() => {}
            Error::Io { .. } if self.eio_read => match self.explain_read_io(e) {
                Some(why) => {
                    self.cov.checks.read_faults_explained += 1;
                    self.event(&format!("read {index}: {e}, explained by {why}"));
                }
                None => self.violation(format!("read {index}: {e}, and no injected read fault explains it")),
            },
            Error::Corruption { .. } => {
                if let Some(why) = self.explain_error(e) {
                    self.event(&format!("read {index}: damage reported, explained by {why}"));
                } else {
                    self.violation(format!("read {index}: {e}, and no recorded damage explains it"));
                }
            }
            _ => self.violation(format!("read {index}: unexpected error {e}")),
        }
    }

    /// Checks one record read from the live log at `index`.
    pub fn check_record(&mut self, index: u64, p: &[u8]) -> bool {
        self.cov.checks.records += 1;
        // Served from the file: it and every record before it were written.
        self.inst.written_next = self.inst.written_next.max(index + 1);
        let slot = match self.slot_of(index, p) {
            Ok(s) => s,
            Err(v) => {
                self.violation(v);
                return false;
            }
        };
        if let Some(&(id, k)) = self.inst.acked.get(&index) {
            let ok = match slot {
                Slot::Rec(i, j) => (i, j) == (id, k),
                Slot::Empty => self.len_of(id, k) == Some(0),
            };
            if !ok {
                self.violation(format!("index {index}: acknowledged #{id}[{k}] but read {slot:?}"));
                return false;
            }
        }
        true
    }

    fn len_of(&self, id: usize, k: usize) -> Option<usize> {
        self.attempts.get(id).and_then(|a| a.records.get(k)).map(|r| r.1)
    }

    /// Decodes and attributes a record, checking it could have been written
    /// at `index`.
    fn slot_of(&self, index: u64, p: &[u8]) -> Result<Slot, String> {
        match payload::decode(p) {
            Decoded::Garbage => Err(format!("index {index}: {} bytes that no append wrote", p.len())),
            Decoded::Empty => Ok(Slot::Empty),
            Decoded::Record(key) => {
                let Some(&(id, k)) = self.by_key.get(&key) else {
                    return Err(format!("index {index}: record {key:?} was never appended"));
                };
                let Some(a) = self.attempts.get(id) else {
                    return Err(format!("index {index}: unknown attempt #{id}"));
                };
                let len = a.records.get(k).map_or(0, |r| r.1);
                if p.len() != len || !payload::matches(key.0, key.1, p) {
                    return Err(format!("index {index}: record #{id}[{k}] has wrong bytes"));
                }
                match a.outcome {
                    // A failed group is cut back (`set_len`, then an
                    // fsync) before `AppendFailed`: only that fsync makes
                    // the partial write vanish for good. If the ledger
                    // shows the cut did not persist where this record sits
                    // (a lying fsync, writeback having persisted the page:
                    // sim seed 7000522), no WAL could do better.
                    Outcome::Failed if self.cut_undone(index, a.fs_seq).is_some() => Ok(Slot::Rec(id, k)),
                    Outcome::Failed => Err(format!(
                        "index {index}: record #{id}[{k}] of a failed append (AppendFailed) is in the log"
                    )),
                    Outcome::Rejected => Err(format!(
                        "index {index}: record #{id}[{k}] of a refused append is in the log"
                    )),
                    Outcome::Acked(first) if first + k as u64 != index => Err(format!(
                        "index {index}: record #{id}[{k}] was acknowledged at index {}",
                        first + k as u64
                    )),
                    _ => Ok(Slot::Rec(id, k)),
                }
            }
        }
    }

    /// Checks a full scan of the log: `entries` as iterated from `first`,
    /// with `next` the reported end. Returns the slots (`None` if a record
    /// could not be attributed).
    pub fn check_scan(&mut self, first: u64, next: u64, entries: &[(u64, Vec<u8>)]) -> Option<Vec<Slot>> {
        self.cov.checks.scans += 1;
        let before = self.violations.len();
        if first > self.first_hi && self.dir_op_lost_since_recovery() {
            // A lost directory entry (a segment's creation or a compaction
            // output's rename, claimed by a lying sync) took the oldest
            // records with it: each durable one below `first` must still be
            // explained by the ledger (`after_recovery`).
            self.cov.mark(Mark::UndoneByLyingSync);
        } else if let Some(why) = (first > self.first_hi)
            .then(|| self.aside_covering(self.first_hi, first))
            .flatten()
        {
            // The oldest records went aside with a file the operator moved
            // for recorded damage: each durable one below `first` must still
            // be explained by the ledger (`after_recovery`).
            self.event(&format!(
                "first index {first} above every prune target ({}): the records below it went aside with {why}",
                self.first_hi
            ));
        } else if first > self.first_hi {
            self.violation(format!(
                "first index {first} is above every prune target and snapshot index ({}; configured first {})",
                self.first_hi, self.first_index
            ));
        }
        if first < self.first_lo && self.undone_by_lie {
            self.cov.mark(Mark::UndoneByLyingSync);
        } else if first < self.first_lo && self.meta_lost.is_some() {
            self.cov.mark(Mark::LowWaterLostWithMeta);
        } else if first < self.first_lo && self.moved_aside {
            // The segments that set the first index went aside: the log
            // starts where the meta file's mark says (seed 30042993).
            self.event(&format!(
                "first index back to {first} (low-water mark) after segments were moved aside"
            ));
        } else if first < self.first_lo {
            self.violation(format!(
                "first index {first} moved backwards: a prune returned Ok or a recovery saw first index {}",
                self.first_lo
            ));
        }
        if next < first || entries.len() as u64 != next - first {
            self.violation(format!(
                "scan from {first} returned {} records, but next index is {next}",
                entries.len()
            ));
        }
        let mut slots = Vec::with_capacity(entries.len());
        let mut seen: BTreeSet<(usize, usize)> = BTreeSet::new();
        for (j, (idx, p)) in entries.iter().enumerate() {
            self.cov.checks.records += 1;
            if *idx != first + j as u64 {
                self.violation(format!(
                    "hole or reordering: expected index {}, iterator gave {idx}",
                    first + j as u64
                ));
                return None;
            }
            match self.slot_of(*idx, p) {
                Ok(s) => {
                    if let Slot::Rec(id, k) = s {
                        if self.attempts.get(id).is_some_and(|a| a.outcome == Outcome::Failed) {
                            self.cov.mark(Mark::FailedAppendCutUndone);
                        }
                        if !seen.insert((id, k)) {
                            self.violation(format!("index {idx}: record #{id}[{k}] appears twice"));
                        }
                        let gone = self.attempts.get(id).is_some_and(|a| k >= a.gone_from);
                        if gone && self.undone_by_lie && self.lifecycle_used {
                            self.cov.mark(Mark::UndoneByLyingSync);
                        } else if gone
                            && (self.cut_undone(*idx, self.recovery_seq).is_some() || self.dir_op_lost_since_recovery())
                        {
                            // A truncation's cut (a claimed file length, or
                            // the rename of its rewritten copy) that a lying
                            // sync did not persist: the ledger shows it lost
                            // since the last recovery (seed 1001258).
                            self.cov.mark(Mark::UndoneByLyingSync);
                        } else if gone && self.meta_lost.as_ref().is_some_and(|(lo, _, _)| *idx < *lo) {
                            // Pruned, but its segment was still there when
                            // the meta file holding the low-water mark was
                            // lost.
                            self.cov.mark(Mark::LowWaterLostWithMeta);
                        } else if gone {
                            self.violation(format!(
                                "index {idx}: record #{id}[{k}] resurrected (absent after an earlier recovery, or removed by a truncation that returned Ok)"
                            ));
                        }
                    }
                    slots.push(s);
                }
                Err(v) => {
                    self.violation(v);
                    slots.push(Slot::Empty);
                }
            }
        }
        // Atomic batches: all members, at consecutive indices.
        let mut bases: BTreeMap<usize, u64> = BTreeMap::new();
        for (j, s) in slots.iter().enumerate() {
            if let Slot::Rec(id, k) = *s {
                let base = (first + j as u64).wrapping_sub(k as u64);
                if let Some(b) = bases.insert(id, base) {
                    if b != base {
                        self.violation(format!("attempt #{id} is split: its records are not consecutive"));
                    }
                }
            }
        }
        for (&id, &base) in &bases {
            let (n, cut) = self.attempts.get(id).map_or((0, None), |a| (a.records.len(), a.cut));
            // A truncation (Ok or interrupted) may have cut an attempt at any
            // point from its cut on: the records present must then form a
            // prefix. Records below the first index were pruned.
            let last_present = (0..n).rev().find(|&k| {
                let idx = base.wrapping_add(k as u64);
                idx >= first
                    && idx < first + slots.len() as u64
                    && matches!(slots[(idx - first) as usize], Slot::Rec(i, j) if (i, j) == (id, k))
            });
            let upto = match cut {
                Some(c) => c.max(last_present.map_or(0, |k| k + 1)),
                None => n,
            };
            for k in 0..upto.min(n) {
                let idx = base.wrapping_add(k as u64);
                if idx < first {
                    continue;
                }
                let ok = idx < first + slots.len() as u64
                    && match slots[(idx - first) as usize] {
                        Slot::Rec(i, j) => (i, j) == (id, k),
                        Slot::Empty => self.len_of(id, k) == Some(0),
                    };
                if !ok {
                    self.violation(format!(
                        "attempt #{id} is partly in the log: record {k} is not at index {idx}"
                    ));
                }
            }
        }
        // Real-time order: an attempt that ended before another started has a lower index.
        let mut order: Vec<(u64, usize)> = bases.iter().map(|(&id, &b)| (b, id)).collect();
        order.sort_unstable();
        let mut max_start = (0u64, usize::MAX);
        for (_, id) in order {
            let Some(a) = self.attempts.get(id) else { continue };
            let (start, end) = (a.start, a.end);
            if end < max_start.0 {
                self.violation(format!(
                    "reordering: #{id} (ended at tick {end}) is logged after #{} (started at tick {})",
                    max_start.1, max_start.0
                ));
            }
            if start > max_start.0 {
                max_start = (start, id);
            }
        }
        (self.violations.len() == before).then_some(slots)
    }

    /// Live check at a quiescent point (no crash since open): the log must be
    /// exactly the model: what was there at open plus what this instance
    /// acknowledged, minus what prunes and truncations removed.
    pub fn check_live(&mut self, first: u64, next: u64, slots: &[Slot]) {
        // The scan read everything: the whole log is in the files.
        self.inst.written_next = self.inst.written_next.max(next);
        self.adopt_cancelled(first, slots);
        let records = slots.iter().enumerate().map(|(j, s)| (first + j as u64, s));
        let Err(m) = self.inst.log.live(first, next, records) else {
            return;
        };
        let (want_first, want_next) = self.model_range();
        let v = match m.problem {
            Problem::WrongFirst { .. } | Problem::WrongNext { .. } => format!(
                "live log is [{first}, {next}), but the model (log at open: {} records to {}, {} acknowledged since, prunes and truncations) is [{want_first}, {want_next})",
                self.inst.open_slots.len(),
                self.inst.open_next,
                self.inst.acked.len()
            ),
            _ => format!(
                "live log: index {} holds {:?}, the model says {:?} ({})",
                m.index, m.got, m.want, m.problem
            ),
        };
        self.violation(v);
    }

    /// The next index of the model.
    pub fn model_next(&self) -> u64 {
        self.inst.log.next()
    }

    /// `[first, next)` of the model.
    pub fn model_range(&self) -> (u64, u64) {
        (self.inst.log.first(), self.inst.log.next())
    }

    /// Whether a full prune emptied the log and nothing was admitted since.
    pub fn reseatable(&self) -> bool {
        self.inst.log.reseatable() && self.inst.log.exact()
    }

    /// Whether the model is exact.
    pub fn model_valid(&self) -> bool {
        self.inst.log.exact()
    }

    /// Whether a prune ran concurrently with an operation started at tick
    /// `start` (0: any prune at all in this run).
    pub fn racing_prune(&self, start: u64) -> bool {
        self.prunes_in_flight > 0 || self.last_prune_end > start
    }

    /// A prune through `k` starts (`first` is the first index before it).
    pub fn begin_prune(&mut self, who: &str, k: u64, first: u64) -> u64 {
        let start = self.now();
        self.lifecycle_used = true;
        self.prunes_in_flight += 1;
        self.prunes.push((k, start, u64::MAX));
        if k >= first {
            self.first_hi = self.first_hi.max(k.saturating_add(1));
        }
        self.event(&format!("{who} prune_through({k}) start (first {first})"));
        start
    }

    /// Records the result of `prune_through(k)` started at `start` when the
    /// first index was `first`.
    pub fn finish_prune(&mut self, who: &str, start: u64, k: u64, first: u64, result: &wal::Result<u64>) {
        let t = self.now();
        self.cov.checks.ops += 1;
        self.cov.checks.lifecycle += 1;
        self.prunes_in_flight = self.prunes_in_flight.saturating_sub(1);
        self.last_prune_end = t;
        if let Some(p) = self.prunes.iter_mut().rev().find(|p| p.0 == k && p.1 == start) {
            p.2 = t;
        }
        self.event(&format!("{who} prune_through({k}) -> {result:?}").replace('\n', " "));
        self.failstop(start, result.as_ref().map(|_| ()), "prune_through");
        match result {
            Ok(nf) => {
                let nf = *nf;
                if nf < first {
                    self.violation(format!(
                        "prune_through({k}) returned {nf}, below the first index {first}"
                    ));
                }
                // Above k + 1 only if another prune raised the first index
                // meanwhile (prunes are serialized; `first` was read before).
                if nf > first.max(k.saturating_add(1)) && nf > self.first_hi {
                    self.violation(format!(
                        "prune_through({k}) returned {nf}, beyond k + 1 and every prune target ({})",
                        self.first_hi
                    ));
                }
                if nf > first {
                    self.cov.mark(Mark::PruneDone);
                }
                self.first_lo = self.first_lo.max(nf);
                if self.apply_prune(first, k, nf) {
                    self.cov.mark(Mark::FullPrune);
                }
            }
            Err(e) if e.is_stopped() => {}
            // The meta write failed, or (a rename that failed after taking
            // effect) the WAL stopped: the new first index may have been
            // written. Either way no append after it may go below it
            // (`after_recovery` checks: `prunes`).
            Err(Error::Io { .. }) => {}
            Err(e) => self.violation(format!("prune_through({k}) returned {e}")),
        }
    }

    /// Everything below `nf` is gone for good (a prune through `k` that
    /// began when the first index was `first`). Whether it emptied the log
    /// (which the model then takes as reseatable).
    fn apply_prune(&mut self, first: u64, k: u64, nf: u64) -> bool {
        let full = self.inst.log.prune_seen(first, k, nf);
        self.inst.acked = self.inst.acked.split_off(&nf);
        self.must = self.must.split_off(&nf);
        full
    }

    /// The control task starts a truncation of everything at or above `from`.
    pub fn begin_truncate(&mut self, what: &str) -> u64 {
        let start = self.now();
        self.lifecycle_used = true;
        self.leases.truncate_begin();
        self.event(&format!(
            "ctl {what} start (model [{}, {}))",
            self.inst.log.first(),
            self.model_next()
        ));
        start
    }

    /// Records from `from` on may be gone (a truncation started that may
    /// have removed them): no longer required, and a batch cut there is
    /// not a torn batch.
    fn truncation_may_cut(&mut self, from: u64) {
        // New records at `from` and above start in the write buffer again.
        self.inst.written_next = self.inst.written_next.min(from);
        self.must = {
            let mut m = std::mem::take(&mut self.must);
            drop(m.split_off(&from));
            m
        };
        let cut: Vec<(usize, usize)> = self
            .inst
            .acked
            .range(from..)
            .map(|(_, r)| *r)
            .chain(self.inst.log.range(from..).filter_map(|(_, s)| match s {
                Slot::Rec(id, k) => Some((*id, *k)),
                Slot::Empty => None,
            }))
            .collect();
        // The attempt holding `from - 1` may continue at `from` (its tail
        // may be empty records, which carry no identity in the model).
        let below = self.inst.log.range(..from).rev().take(64).find_map(|(i, s)| match s {
            Slot::Rec(id, k) => Some((i, *id, *k)),
            Slot::Empty => None,
        });
        let mut cut = cut;
        if let Some((idx, id, k)) = below {
            let n = self.attempts.get(id).map_or(0, |a| a.records.len()) as u64;
            let base = idx - k as u64;
            if base + n > from {
                cut.push((id, (from - base) as usize));
            }
        }
        for (id, k) in cut {
            if let Some(a) = self.attempts.get_mut(id) {
                a.cut = Some(a.cut.map_or(k, |c| c.min(k)));
            }
        }
        // A cancelled append no scan has shown may have been admitted at any
        // index (then written by the truncation's drain and cut where the
        // truncation cuts): only a prefix of it may stay (soak seed 5002934).
        for &id in &self.inst.cancelled {
            if let Some(a) = self.attempts.get_mut(id) {
                a.cut = Some(0);
            }
        }
        // Nor does a process crash keep them: the interrupted truncation
        // may have removed them from the files already (it no longer stops
        // the WAL, so the crash would otherwise require every acknowledged
        // record; seed 763 of the sweep).
        drop(self.inst.acked.split_off(&from));
    }

    /// Records the result of a truncation of everything at or above `from`
    /// (the control task runs it with the writers paused, so the model is
    /// exact). `crashed`: the task was aborted by a crash mid-way.
    pub fn finish_truncate(&mut self, start: u64, from: u64, what: &str, result: Option<&wal::Result<()>>) {
        self.now();
        self.leases.truncate_end();
        self.cov.checks.ops += 1;
        self.cov.checks.lifecycle += 1;
        let (first, next) = self.model_range();
        // At or past the end a truncation is a no-op, so every `from` at or
        // above the first index is valid.
        let valid = from >= first;
        let Some(result) = result else {
            // Interrupted by a crash.
            self.event(&format!("ctl {what} interrupted by the crash"));
            if valid {
                self.truncation_may_cut(from);
            }
            return;
        };
        self.event(&format!("ctl {what} -> {result:?}").replace('\n', " "));
        self.failstop(start, result.as_ref().map(|_| ()), "truncate");
        match result {
            Ok(()) => {
                if !valid && self.inst.log.exact() {
                    self.violation(format!("{what}: Ok for an argument below the log [{first}, {next}]"));
                    return;
                }
                if from > next {
                    // Nothing to remove (cancelled appends the scans have
                    // not shown may have been written by the truncation's
                    // drain, past the model's next index: `remove_from`
                    // below cuts what of them lies at or above `from`).
                    self.cov.mark(Mark::TruncatePastEnd);
                }
                if from < next {
                    self.cov.mark(Mark::TruncateDone);
                    if let Some(&(_, k)) = self.inst.acked.get(&from) {
                        if k > 0 {
                            self.cov.mark(Mark::TruncateInBatch);
                        }
                    } else if let Some(Slot::Rec(_, k)) = self.inst.log.get(from) {
                        if *k > 0 {
                            self.cov.mark(Mark::TruncateInBatch);
                        }
                    }
                }
                // Records removed by an Ok truncation never come back; the
                // log continues at `from`.
                self.remove_from(from);
            }
            Err(Error::OutOfRange { .. }) => {
                self.cov.mark(Mark::TruncateRefused);
                if valid && self.inst.log.exact() {
                    self.violation(format!("{what}: OutOfRange though the log is [{first}, {next})"));
                }
            }
            Err(e) if e.is_stopped() => {
                if valid {
                    self.truncation_may_cut(from);
                }
                self.inst.log.undetermined();
            }
            Err(e) => {
                self.violation(format!("{what} returned {e}"));
                self.inst.log.undetermined();
            }
        }
    }

    /// Records a compaction plan (dry run) and the result of `compact`.
    pub fn finish_compact(
        &mut self,
        who: &str,
        start: u64,
        plan: &wal::Result<wal::CompactionPlan>,
        result: &wal::Result<wal::CompactionPlan>,
    ) {
        self.now();
        self.cov.checks.ops += 1;
        self.cov.checks.lifecycle += 1;
        match plan {
            Ok(p) => self.event(&format!(
                "{who} compaction_plan: {}",
                p.to_string().trim_end().replace('\n', " | ")
            )),
            Err(e) => self.event(&format!("{who} compaction_plan -> Err({e})")),
        }
        self.failstop(start, plan.as_ref().map(|_| ()), "compaction_plan");
        match result {
            Ok(p) => {
                self.event(&format!("{who} compact -> Ok({} runs)", p.runs.len()));
                for run in &p.runs {
                    let adjacent = run.inputs.len() >= 2
                        && run.inputs.first().map(|s| s.first_index) == Some(run.first_index)
                        && run.inputs.last().and_then(|s| s.last_index) == Some(run.last_index)
                        && run
                            .inputs
                            .windows(2)
                            .all(|w| w[0].last_index.map(|l| l + 1) == Some(w[1].first_index));
                    if !adjacent {
                        self.violation(format!("compaction run {run:?} is not a union of adjacent segments"));
                    }
                }
                if !p.runs.is_empty() {
                    self.cov.mark(Mark::CompactionMerged);
                }
            }
            Err(e) => self.event(&format!("{who} compact -> Err({e})").replace('\n', " ")),
        }
        self.failstop(start, result.as_ref().map(|_| ()), "compact");
        if let Err(e) = result {
            let explained = matches!(e, Error::Corruption { .. })
                .then(|| self.explain_error(e))
                .flatten();
            let ok = e.is_stopped() || matches!(e, Error::Io { .. }) || explained.is_some();
            if !ok {
                self.violation(format!("compact returned {e}, and no recorded damage explains it"));
            }
        }
    }

    /// Before a crash that SimFs itself will fire (a crash plan armed on
    /// an open): damage the crash records is "since the crash", as for a
    /// crash [`Oracle::crashed`] is told about before it happens.
    pub fn crash_coming(&mut self) {
        if self.crash_seq.is_none() {
            self.crash_seq = Some(self.fs.as_ref().map_or(0, SimFs::next_seq));
        }
    }

    /// A crash: pending attempts become unknown. Returns the records that
    /// must survive it beyond the durable ones: under a process crash, all
    /// acknowledged records of a WAL that had not stopped.
    pub fn crashed(&mut self, kind: CrashKind, wal_stopped: bool) -> BTreeMap<u64, (usize, usize)> {
        let t = self.now();
        self.event(&format!("CRASH {kind:?} (wal stopped: {wal_stopped})"));
        if self.crash_seq.is_none() {
            self.crash_seq = Some(self.fs.as_ref().map_or(0, SimFs::next_seq));
        }
        self.prunes_in_flight = 0;
        self.last_prune_end = t;
        self.leases.clear();
        for a in &mut self.attempts {
            if a.outcome == Outcome::Pending {
                a.outcome = Outcome::Unknown;
                a.end = t;
            }
        }
        if kind == CrashKind::Process && !wal_stopped && self.inst.stopped_at.is_none() {
            // With the write buffer, only what had been written to the file.
            let upto = if self.buffered {
                self.inst.written_next
            } else {
                u64::MAX
            };
            let first = self.inst.log.first();
            self.inst
                .acked
                .range(first..upto.max(first))
                .map(|(i, r)| (*i, *r))
                .collect()
        } else {
            BTreeMap::new()
        }
    }

    /// After a successful recovery and a clean scan: checks durability, marks
    /// what is gone, and starts a new instance from the recovered log. A
    /// durable record may be missing only if the damage ledger explains it
    /// (`explain_loss`).
    pub fn after_recovery(
        &mut self,
        first: u64,
        next: u64,
        slots: &[Slot],
        extra: &BTreeMap<u64, (usize, usize)>,
        report: &RecoveryReport,
        mode: wal::RecoveryMode,
    ) {
        self.cov.checks.recoveries += 1;
        if report.torn_bytes_cut > 0 {
            self.cov.mark(Mark::TornTailCut);
        }
        if !report.removed_files.is_empty() {
            self.cov.mark(Mark::RecoveryRemovedFile);
        }
        if report.sealed_segments > 0 {
            self.cov.mark(Mark::RecoveredSealedSegments);
        }
        let slot_at = |idx: u64| -> Option<Slot> {
            if idx < first {
                return None;
            }
            slots.get((idx - first) as usize).copied()
        };
        let mut required: Vec<(u64, (usize, usize), bool)> = self.must.iter().map(|(i, r)| (*i, *r, true)).collect();
        // Records the operator cut off (a repair after this recovery) are
        // gone by request.
        let cut = self.operator_cut.take().unwrap_or(u64::MAX);
        required.extend(
            extra
                .iter()
                .filter(|(i, _)| !self.must.contains_key(i) && **i < cut)
                .map(|(i, r)| (*i, *r, false)),
        );
        for (idx, (id, k), durable) in required {
            if idx >= cut {
                // Durable, but the operator's repair cut the log before it.
                self.must.remove(&idx);
                continue;
            }
            if idx < first {
                // Pruned (the first index itself is checked against the
                // prune targets by `check_scan`), by a prune through it that
                // was still running when this record's append started: one
                // that had returned an error before changed nothing, or
                // stopped the WAL.
                self.must.remove(&idx);
                let started = self.attempts.get(id).map_or(0, |a| a.start);
                let pruned = self.prunes.iter().any(|&(k, _, end)| k >= idx && end >= started);
                let lost = (durable && !pruned)
                    .then(|| self.explain_loss(idx, id, mode == wal::RecoveryMode::PointInTime, false))
                    .flatten();
                if let Some(why) = lost {
                    self.cov.checks.lost_to_damage += 1;
                    self.cov.mark(Mark::LostToRecordedDamage);
                    self.event(&format!(
                        "durable record #{id}[{k}] at index {idx}, below the first index, lost to {why}"
                    ));
                } else if durable && !pruned {
                    self.violation(format!(
                        "durable record #{id}[{k}] at index {idx} is below the recovered first index {first}, but every prune through it returned before its append started"
                    ));
                }
                continue;
            }
            self.cov.checks.durable_records += 1;
            let present = match slot_at(idx) {
                Some(Slot::Rec(i, j)) => (i, j) == (id, k),
                Some(Slot::Empty) => self.len_of(id, k) == Some(0),
                None => false,
            };
            if present {
                continue;
            }
            if !durable && self.revert_on_sync_fail {
                // btrfs: a failed fsync (recovery's own included) reverts the
                // page cache to the durable image, so records that were only
                // in the page cache may legitimately vanish.
                continue;
            }
            let explained = self
                .explain_loss(idx, id, mode == wal::RecoveryMode::PointInTime, !durable)
                .or_else(|| self.pruned_under_lost_meta(idx, id));
            if let Some(why) = explained {
                self.cov.checks.lost_to_damage += 1;
                self.cov.mark(Mark::LostToRecordedDamage);
                self.event(&format!("durable record #{id}[{k}] at index {idx} lost to {why}"));
            } else {
                let what = if durable {
                    "durable"
                } else {
                    "acknowledged (process crash keeps the page cache)"
                };
                self.violation(format!(
                    "{what} record #{id}[{k}] at index {idx} lost, and no recorded damage explains it: recovered log is [{first}, {next}), stop reason {:?}, torn bytes cut {}",
                    report.stop_reason, report.torn_bytes_cut
                ));
            }
            self.must.remove(&idx);
        }
        // What is absent now must never come back.
        let mut present: BTreeMap<usize, usize> = BTreeMap::new();
        for s in slots {
            if let Slot::Rec(id, k) = s {
                let e = present.entry(*id).or_insert(0);
                *e = (*e).max(k + 1);
            }
        }
        let resurrection_excused = self.meta_lost.is_some() || self.undone_by_lie;
        for (id, a) in self.attempts.iter_mut().enumerate() {
            // Records back under a once-excused loss of the low-water mark
            // (or of what a lying sync claimed) are part of the log again
            // from this recovery on (seed 435).
            if resurrection_excused && present.contains_key(&id) {
                a.gone_from = a.records.len();
            }
            let in_play = matches!(a.outcome, Outcome::Unknown | Outcome::Acked(_));
            let identifiable = a.records.iter().any(|r| r.1 > 0);
            // An interrupted truncation that did not happen cuts nothing:
            // the cut is what this recovery shows.
            if let (Some(_), Some(&n)) = (a.cut, present.get(&id)) {
                a.cut = (n < a.records.len()).then_some(n);
            }
            match present.get(&id) {
                None if in_play && identifiable => a.gone_from = 0,
                // A batch cut by a truncation: its tail is gone.
                Some(&n) if a.cut.is_some() && a.records[n..].iter().any(|r| r.1 > 0) => {
                    a.gone_from = a.gone_from.min(n)
                }
                _ => {}
            }
        }
        // The first index this recovery saw is durable (recovery fsyncs the
        // directory). Where a power loss undid what a lying sync claimed
        // (the move back was excused by `check_scan`), it is the new floor:
        // keeping the undone one would flag the same move back again at the
        // next recovery (seed 501036: a prune's Ok(...429) undone, recovered
        // at ...399, then a process crash and ...399 again).
        let moved_aside = std::mem::take(&mut self.moved_aside);
        self.aside_for_damage.clear();
        self.first_lo = if self.undone_by_lie || self.meta_lost.take().is_some() || moved_aside {
            first
        } else {
            self.first_lo.max(first)
        };
        self.first_hi = first.max(self.first_lo);
        self.undone_by_lie = false;
        self.meta_undone = None;
        self.crash_seq = None;
        self.recovery_seq = self.fs.as_ref().map_or(0, SimFs::next_seq);
        // Acknowledged records seen now were synced by recovery: they must stay.
        self.must.retain(|i, _| *i < next && *i >= first);
        for (j, s) in slots.iter().enumerate() {
            if let Slot::Rec(id, k) = *s {
                // A failed append's record that `check_scan` accepted (the
                // ledger showed its cut-back undone) is part of the log from
                // this recovery on, like any record of unknown outcome: a
                // later scan must not take it for new (seed 500779).
                if let Some(a) = self.attempts.get_mut(id).filter(|a| a.outcome == Outcome::Failed) {
                    a.outcome = Outcome::Unknown;
                }
                if matches!(self.attempts.get(id).map(|a| a.outcome), Some(Outcome::Acked(_))) {
                    self.must.insert(first + j as u64, (id, k));
                }
            }
        }
        // `check_scan` made sure `next` is `first + slots.len()`.
        self.inst = Instance {
            open_next: next,
            open_slots: slots.to_vec(),
            log: Log::from_recovered(first, slots.iter().copied()),
            ..Instance::default()
        };
        self.event(&format!("recovered [{first}, {next}) report {report:?}"));
    }

    /// The ledger entry showing that a cut (or other claimed change) of
    /// the file holding record `index` after the last crash did not
    /// persist, recorded at or after trace position `since`.
    fn cut_undone(&self, index: u64, since: u64) -> Option<String> {
        let fs = self.fs.as_ref()?;
        // Where the last crash left its frame, or, for bytes a btrfs failed
        // sync brought back without a crash (seed 80004979: a reopen after a
        // stop), where the page cache held it before the reopen.
        let places = [
            self.layout.after_crash_frame(index),
            self.layout.locate(index).map(|l| (l.ino, l.start)),
        ];
        let damage = fs.damage_since(since);
        places.into_iter().flatten().find_map(|(ino, start)| {
            damage
                .iter()
                .find(|d| d.kind == simfs::DamageKind::UnpersistedSync && d.ino == ino && d.range.contains(&start))
                .map(damage::describe)
        })
    }

    /// The operator's repair of damage found while scanning a log just
    /// recovered (before [`Oracle::after_recovery`] starts the new
    /// instance): the log is cut at `from` by `truncate_from(from)`, so
    /// every record at `from` and above is gone by request and must never
    /// come back. `why` names the ledger entry that explained the damage.
    pub fn operator_cut(&mut self, from: u64, why: &str) {
        self.event(&format!("operator repair: truncate_from({from}) for {why}"));
        self.operator_cut = Some(self.operator_cut.map_or(from, |c| c.min(from)));
        self.cov.mark(Mark::DamageRepaired);
        // The instance model is the last one's; acknowledged indices are
        // what the log held.
        for a in &mut self.attempts {
            if let Outcome::Acked(i0) = a.outcome {
                let k = from.saturating_sub(i0);
                if (k as usize) < a.records.len() {
                    a.gone_from = a.gone_from.min(k as usize);
                }
            }
        }
        self.remove_from(from);
    }

    /// Marks every record of the model at `from` and above gone by request
    /// (a truncation that returned `Ok`, or an operator's cut): they must
    /// never come back, and the model continues at `from`.
    fn remove_from(&mut self, from: u64) {
        let removed: Vec<(usize, usize)> = self
            .inst
            .log
            .range(from..)
            .filter_map(|(_, s)| match s {
                Slot::Rec(id, k) => Some((*id, *k)),
                Slot::Empty => None,
            })
            .collect();
        self.truncation_may_cut(from);
        for (id, k) in removed {
            if let Some(a) = self.attempts.get_mut(id) {
                a.gone_from = a.gone_from.min(k);
            }
        }
        self.inst.log.cut(from);
        drop(self.inst.acked.split_off(&from));
    }

    /// Gives the oracle the run's filesystem, whose damage ledger is the
    /// evidence for every excuse.
    pub fn attach_fs(&mut self, fs: SimFs, dir: std::path::PathBuf) {
        self.fs = Some(fs);
        self.dir = dir;
    }

    /// Records where every record of the segment files sits now (call
    /// right before a crash: the page cache still holds what the crash may
    /// lose).
    pub fn snapshot_layout(&mut self) {
        if let Some(fs) = &self.fs {
            self.layout.snapshot(fs, &self.dir);
        }
    }

    /// Records which valid frames a crash left (call right after it): the
    /// proof recovery had in hand.
    pub fn snapshot_after_crash(&mut self) {
        self.claims_since_crash = false;
        if let Some(fs) = &self.fs {
            self.layout.snapshot_after_crash(fs, &self.dir);
        }
    }

    /// After an acknowledgement: if a sync claimed what it did not persist
    /// since the last look (a lie, or a failure reported late), or a media
    /// fault struck durable data, records where every record sits now. A
    /// btrfs failed sync can revert the page cache before any crash, so
    /// this is the last moment the lost records' positions can be seen.
    fn snapshot_after_claims(&mut self) {
        let Some(fs) = &self.fs else { return };
        let c = fs.counters();
        let claims = [
            simfs::FaultKind::LyingSync,
            simfs::FaultKind::SyncFail,
            simfs::FaultKind::MisdirectedWrite,
            simfs::FaultKind::BitRot,
            simfs::FaultKind::LatentSectorError,
        ]
        .iter()
        .map(|k| c.get(*k))
        .sum::<u64>();
        // Once a claim was broken, the durable image and the page cache
        // disagree until the next crash: every acknowledgement until then
        // is looked at, since a failed sync may revert the page cache to
        // that image before the crash (seed 7000845: a batch acknowledged
        // after a misdirected write, its commit frame reverted away by a
        // btrfs sync failure, never seen by a snapshot).
        if claims != self.claims_seen || (self.claims_since_crash && self.revert_on_sync_fail) {
            self.claims_since_crash |= claims != self.claims_seen;
            self.claims_seen = claims;
            self.layout.snapshot(fs, &self.dir);
        }
    }

    /// A power loss undid a directory operation or bytes a lying (or
    /// late-failing) sync had claimed durable, on the log's files: `why`
    /// describes the ledger entry. Excuses the next recovery's first index
    /// moving back and removed records coming back.
    pub fn note_undone_by_lie(&mut self, why: &str) {
        self.event(&format!("a power loss undid what a sync had claimed durable: {why}"));
        self.undone_by_lie = true;
    }

    /// The power loss undid the meta file's contents or directory entry (a
    /// lying sync had claimed them): `why` describes the ledger entry.
    pub fn note_meta_undone(&mut self, why: &str) {
        self.event(&format!("a power loss undid the meta file: {why}"));
        self.meta_undone = Some(why.to_owned());
    }

    /// The injected fault behind a read's I/O error: an EIO the filesystem
    /// injected into a read or open of the error's file (by path or inode)
    /// among its recent operations, or an unreadable sector of it. A fault
    /// class merely switched on explains nothing (soak seed 96025562: a read
    /// whose file a concurrent prune removed, NotFound, hidden by that rule
    /// in every seed with read faults on).
    fn explain_read_io(&self, e: &Error) -> Option<String> {
        use simfs::FaultKind;
        let Error::Io { path, .. } = e else { return None };
        let fs = self.fs.as_ref()?;
        let named = path.to_string_lossy();
        let trace = fs.trace();
        // Reads through a handle carry only the inode; the file may have
        // been renamed since (a seal): its inode from the name's last use.
        let ino = fs.inode_of(path).or_else(|| {
            trace
                .iter()
                .rev()
                .find(|t| {
                    t.ino.is_some()
                        && [&t.path, &t.to_path]
                            .iter()
                            .any(|p| p.as_deref() == Some(named.as_ref()))
                })
                .and_then(|t| t.ino)
        });
        let injected = trace.iter().rev().find(|t| {
            matches!(
                t.fault,
                Some(FaultKind::EioRead | FaultKind::EioOpen | FaultKind::LatentSectorRead)
            ) && (t.path.as_deref() == Some(named.as_ref()) || (ino.is_some() && t.ino == ino))
        });
        if let Some(t) = injected {
            return Some(format!(
                "{:?} injected into {} of {} at fs seq {}",
                t.fault?, t.op, named, t.seq
            ));
        }
        let bad = fs.bad_sectors(path);
        (!bad.is_empty()).then(|| format!("unreadable sectors {bad:?} of {named}"))
    }

    /// A successful open accepted the loss of `[first, end)`; `failed` is
    /// the fault injected into its meta write, if one was.
    pub fn accepted_loss(&mut self, first: u64, end: u64, failed: Option<&simfs::TraceEvent>) {
        if let Some(t) = failed {
            let fault = t.fault.map_or_else(|| "a fault".to_owned(), |f| format!("{f:?}"));
            let why = format!(
                "{fault} injected into {} of {} at fs seq {}",
                t.op,
                t.path.as_deref().unwrap_or("?"),
                t.seq
            );
            self.event(&format!(
                "accepted loss {first}..{end} not recorded in the meta file: {why}"
            ));
            self.unrecorded_losses.push((first, end, why));
        }
    }

    /// An open accepted no loss: every earlier one is recorded (or its
    /// records are back), no longer an excuse.
    pub fn accepted_loss_recorded(&mut self) {
        self.unrecorded_losses.clear();
    }

    /// Records missing that a point-in-time open already accepted as lost
    /// and could not record (soak seed 97086538: the meta rename failed with
    /// an injected ENOSPC, a process crash followed, and the next strict
    /// open reported the same loss again).
    fn explain_unrecorded_loss(&self, e: &Error) -> Option<String> {
        let Error::MissingRecords { first, end, .. } = e else {
            return None;
        };
        self.unrecorded_losses
            .iter()
            .find(|(f, en, _)| f <= first && end <= en)
            .map(|(f, en, why)| {
                format!("the loss of {f}..{en}, accepted by an earlier open whose meta write failed: {why}")
            })
    }

    /// Records a low-water mark says exist, missing below the first segment
    /// (`[first, end)`): explained when a prune since the last recovery was
    /// asked to remove them all (`first_hi`) and the power loss undid the
    /// meta file that recorded it (soak seed 96004794: the prune's meta
    /// fsync lied, the next open removed the segments below the new mark,
    /// and the power loss brought the old mark back).
    fn explain_undone_low_water(&self, e: &Error) -> Option<String> {
        let Error::MissingRecords { first, end, .. } = e else {
            return None;
        };
        let why = self.meta_undone.as_ref()?;
        (*end <= self.first_hi && first < end).then(|| {
            format!(
                "a prune through {} was asked for, and the power loss undid the meta file recording it: {why}",
                end - 1
            )
        })
    }

    /// Whether the ledger shows a directory entry of the log's directory,
    /// made since the last recovery, lost by a power loss.
    fn dir_op_lost_since_recovery(&self) -> bool {
        let Some(fs) = &self.fs else { return false };
        let since = self.recovery_seq;
        let dir = self.dir.to_string_lossy().into_owned();
        fs.damage_since(since)
            .iter()
            .any(|d| d.kind == simfs::DamageKind::UnpersistedDirOp && damage::in_dir(d, &dir))
    }

    /// Why record `idx` of attempt `id` may be missing from the middle of
    /// the log: a prune through it ran while the record was live (it had not
    /// returned when the append started), and the low-water mark that made
    /// the prune's removals safe is gone while some removals were kept:
    /// either the ledger shows that a power loss since the last recovery
    /// lost the meta file's directory entry (seed 20013968: segment 120
    /// removed, 121.. resurrected, the old meta back; recovery reports the
    /// gap), or the operator moved the meta file aside for damage the
    /// ledger explained (seed 20026547: the log comes back below the mark,
    /// without the segments the prune had removed).
    fn pruned_under_lost_meta(&self, idx: u64, id: usize) -> Option<String> {
        let started = self.attempts.get(id).map_or(0, |a| a.start);
        let (k, _, _) = *self.prunes.iter().find(|&&(k, _, end)| k >= idx && end >= started)?;
        if let Some((_, _, why)) = &self.meta_lost {
            return Some(format!("prune_through({k}) removing it, its low-water mark in the meta file the operator moved aside for {why}"));
        }
        let fs = self.fs.as_ref()?;
        let meta = self.dir.join("meta").to_string_lossy().into_owned();
        let tmp = format!("{meta}.wal.tmp");
        let lost = fs.damage_since(self.recovery_seq).into_iter().find(|d| {
            d.kind == simfs::DamageKind::UnpersistedDirOp && d.path.as_deref().is_some_and(|p| p == meta || p == tmp)
        })?;
        Some(format!(
            "prune_through({k}) removing it while {}",
            damage::describe(&lost)
        ))
    }

    /// The operator moved a segment aside (for damage the ledger
    /// explained).
    pub fn note_moved_aside(&mut self) {
        self.moved_aside = true;
    }

    /// The operator moved segment `name` aside for `why` (recorded damage
    /// that explained its header not checking).
    pub fn note_aside_for_damage(&mut self, name: crate::repair::SegName, why: &str) {
        self.aside_for_damage.push((name, why.to_string()));
    }

    /// If the segments the operator moved aside for damage since the last
    /// recovery ([`Self::note_aside_for_damage`]) held every index of
    /// `from..to` by their names: those names and the damage each went for.
    fn aside_covering(&self, from: u64, to: u64) -> Option<String> {
        let names: Vec<_> = self.aside_for_damage.iter().map(|(n, _)| *n).collect();
        if !crate::repair::names_cover(&names, from, to) {
            return None;
        }
        let each: Vec<_> = self
            .aside_for_damage
            .iter()
            .filter(|(n, _)| n.first < to && n.last.is_none_or(|l| l >= from))
            .map(|(n, why)| {
                let last = n.last.map_or_else(|| "active".to_string(), |l| l.to_string());
                format!("segment {}..={last} (id {}), moved aside for {why}", n.first, n.id)
            })
            .collect();
        Some(each.join("; "))
    }

    /// The highest low-water mark the meta file the operator moved aside
    /// since the last recovery can have held (the largest prune target
    /// started, `first_hi`), if one was moved aside.
    pub fn lost_low_water(&self) -> Option<u64> {
        self.meta_lost.as_ref().map(|(_, hi, _)| *hi)
    }

    /// The operator moved the damaged meta file aside, for the damage
    /// `why` (a ledger entry on it): the low-water mark is gone with it.
    pub fn meta_lost(&mut self, why: &str) {
        self.event(&format!("operator repair: meta file moved aside for {why}"));
        self.cov.mark(Mark::DamageRepaired);
        self.meta_lost = Some((self.first_lo, self.first_hi, why.to_owned()));
    }

    /// Whether any sync failed so far (from SimFs's counters).
    fn sync_failed(&self) -> bool {
        self.fs
            .as_ref()
            .is_some_and(|fs| fs.counters().get(simfs::FaultKind::SyncFail) > 0)
    }

    /// The recorded damage that explains losing durable record `idx` of
    /// attempt `id`, described; `None` if nothing recorded can.
    /// `point_in_time`: the recovery cut at the first damage by request;
    /// `durable`: the indices of every record that had to survive (a
    /// surviving frame's `durable_next` is the proof recovery must not cut
    /// past, see [`damage::explain_loss`]).
    fn explain_loss(&mut self, idx: u64, id: usize, point_in_time: bool, cached: bool) -> Option<String> {
        self.cov.checks.ledger_checks += 1;
        let fs = self.fs.as_ref()?;
        let loc = self.layout.locate(idx)?;
        let since = self.attempts.get(id).map_or(0, |a| a.fs_seq);
        let ledger = fs.damage();
        damage::explain_loss(&ledger, idx, loc, since, point_in_time, cached, &self.layout)
            .map(damage::describe)
            .or_else(|| {
                let (garbage, journal) = (!cached)
                    .then(|| damage::explain_unjournaled_rewrite(&ledger, idx, loc, since, point_in_time, &self.layout))
                    .flatten()?;
                Some(format!(
                    "{} in recovery's in-place rewrite, its journal lost at the same power loss: {}",
                    damage::describe(garbage),
                    damage::describe(journal)
                ))
            })
    }

    /// The recorded damage that explains a reported `Corruption` (its file
    /// and offset), or a read that keeps failing with EIO (an unreadable
    /// sector), described; `None` if nothing recorded can, or `e` is
    /// neither.
    pub fn explain_error(&mut self, e: &Error) -> Option<String> {
        let (path, offset, latent) = match e {
            Error::Corruption { segment, offset, .. } => (segment, *offset, false),
            // Records a promise (the clean-shutdown marker, the low-water
            // mark) says exist, missing from where they should be.
            Error::MissingRecords { path, offset, .. } => (path, *offset, false),
            Error::Io { path, offset, op, .. } if op.contains("read") => (path, *offset, true),
            _ => return None,
        };
        self.cov.checks.ledger_checks += 1;
        if let Some(why) = self
            .explain_undone_low_water(e)
            .or_else(|| self.explain_unrecorded_loss(e))
        {
            return Some(why);
        }
        let fs = self.fs.as_ref()?;
        let ledger = fs.damage();
        if !latent {
            // A gap below the low-water mark of a meta file the operator
            // moved aside (for damage the ledger explained): the segments
            // below it are leftovers of prunes the mark had made safe.
            if let (Some((_, hi, why)), Error::Corruption { reason, .. }) = (&self.meta_lost, e) {
                if crate::repair::chain_break(reason).is_some_and(|(at, expected)| at > expected && at <= *hi) {
                    return Some(format!(
                        "meta file moved aside for {why}: segments below its low-water mark (at most {hi}) are prune leftovers"
                    ));
                }
            }
            // A gap whose indices a segment the operator moved aside for
            // recorded damage held by its name (seed 90005024): its records
            // went with it, each still to be explained by the ledger.
            if let Some(why) = match e {
                Error::Corruption { reason, .. } => crate::repair::chain_break(reason)
                    .filter(|(at, expected)| at > expected)
                    .and_then(|(at, expected)| self.aside_covering(expected, at)),
                _ => None,
            } {
                return Some(format!("the gap's records went aside with {why}"));
            }
            // A naming problem (two active segments, a gap between segment
            // names, a file back from the dead) is explained by a directory
            // operation of the same directory that a lying directory sync
            // claimed and a power loss since the last recovery lost.
            // The error names a file of the directory, or (two segments
            // sharing an id: seed 80092292) the directory itself.
            let dir = path.parent().map(|d| d.to_string_lossy().into_owned());
            let itself = path.to_string_lossy().into_owned();
            let lost_entry = ledger.iter().find(|d| {
                d.kind == simfs::DamageKind::UnpersistedDirOp
                    && d.seq >= self.crash_seq.unwrap_or(u64::MAX)
                    && (dir.as_deref().is_some_and(|dir| damage::in_dir(d, dir)) || damage::in_dir(d, &itself))
            });
            if let Some(d) = lost_entry {
                return Some(damage::describe(d));
            }
        }
        // The file may have been renamed since the error (a seal racing the
        // read that reported it: seed 40072956): the ledger's entries name
        // the path they struck under.
        let named = path.to_string_lossy();
        let ino = fs.inode_of(path).or_else(|| {
            ledger
                .iter()
                .rev()
                .find(|d| d.path.as_deref() == Some(named.as_ref()))
                .map(|d| d.ino)
        })?;
        let fallback = offset + wal::codec::FRAME_HEADER_BYTES as u64 + self.max_record_bytes as u64 + 8;
        // A read error names where the read began, not the bad sector: any
        // unreadable sector of the file explains it.
        let end = if latent {
            u64::MAX
        } else {
            self.layout.frame_end(ino, offset, fallback).max(offset + 1)
        };
        let accept = |k| {
            if latent {
                k == simfs::DamageKind::LatentSector
            } else {
                damage::excuses_durable_loss(k)
            }
        };
        if let Some(d) = damage::explain_report(&ledger, ino, end, &accept) {
            return Some(damage::describe(d));
        }
        if !latent {
            if let Some((garbage, journal)) = damage::explain_unjournaled_report(&ledger, ino, end, self.recovery_seq) {
                return Some(format!(
                    "{} in recovery's in-place rewrite, its journal lost or destroyed: {}",
                    damage::describe(garbage),
                    damage::describe(journal)
                ));
            }
        }
        // Known WAL gap (recovery-trust issue): a read of a sealed segment
        // checks the whole segment first, so damage further on is reported
        // at the frame the read started from. Evidence on the same file
        // still excuses it, counted apart.
        let later = damage::explain_report(&ledger, ino, u64::MAX, &accept)?;
        self.cov.mark(Mark::ReportedBeforeDamage);
        Some(format!(
            "{} (reported at offset {offset}, before it)",
            damage::describe(later)
        ))
    }

    /// The slots of the log at the last open.
    pub fn open_slots(&self) -> &[Slot] {
        &self.inst.open_slots
    }

    /// Acknowledged appends of the current instance.
    pub fn acked_in_instance(&self) -> usize {
        self.inst.acked.len()
    }

    /// Notes that the WAL reported itself stopped (from `stopped()`).
    pub fn note_stopped(&mut self, cause: &Error) {
        if self.inst.stopped_at.is_none() {
            self.inst.stopped_at = Some(self.tick);
            if caused_by_sync(cause) {
                self.cov.mark(Mark::StoppedAfterSyncError);
            }
            self.check_stop(cause);
        }
    }

    /// Whether the slot at `idx` of a scan holds record `(id, k)`.
    pub fn holds(&self, slots: &[Slot], first: u64, idx: u64, id: usize, k: usize) -> bool {
        if idx < first {
            return false;
        }
        match slots.get((idx - first) as usize) {
            Some(Slot::Rec(i, j)) => (*i, *j) == (id, k),
            Some(Slot::Empty) => self.len_of(id, k) == Some(0),
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oracle() -> Oracle {
        let mut cfg = RunConfig::from_seed(1);
        cfg.sync = SyncKind::Always;
        cfg.first_index = 0;
        cfg.mask = FaultClass::MisdirectedWrite.bit() | FaultClass::BitRot.bit() | FaultClass::LyingSync.bit();
        Oracle::new(&cfg)
    }

    /// Record 0 is acknowledged durable; after a power loss recovery finds
    /// a zero tail where it was (no stop reason), as in sim seeds 100023
    /// and 100192.
    fn lose_the_tail(o: &mut Oracle) {
        let (id, _) = o.begin_append(0, &[8], false, None);
        o.finish_append(id, &Ok(0));
        o.crashed(CrashKind::PowerLoss, false);
        let mut report = RecoveryReport::default();
        report.active_segment = true;
        report.scanned_bytes = 16384;
        report.torn_bytes_cut = 12288;
        o.after_recovery(
            0,
            0,
            &[],
            &BTreeMap::new(),
            &report,
            wal::RecoveryMode::TolerateTornTail,
        );
    }

    #[test]
    fn a_lost_durable_record_is_a_violation_whatever_faults_are_switched_on() {
        // Media faults and a lying fsync are on in the configuration, but
        // nothing is recorded in a ledger: no excuse.
        let mut o = oracle();
        lose_the_tail(&mut o);
        assert_eq!(o.violations.len(), 1, "{:?}", o.violations);
        assert!(o.violations[0].contains("durable record #0[0] at index 0 lost, and no recorded damage explains it"));

        let mut o = oracle();
        o.attach_fs(SimFs::new(1), "/db/wal".into());
        lose_the_tail(&mut o);
        assert_eq!(o.violations.len(), 1, "an empty ledger explains nothing");
    }

    /// Soak seed 96004794's shape: a low-water mark older than the first
    /// segment, after a prune through the gap. Excused only with the meta
    /// file undone by the power loss and a prune asked for through the whole
    /// gap; neither alone excuses it.
    #[test]
    fn an_undone_low_water_mark_needs_the_prune_and_the_undone_meta() {
        let missing = |first: u64, end: u64| Error::MissingRecords {
            path: "/db/wal/x.wal".into(),
            offset: 0,
            first,
            end,
            evidence: "the meta file's low-water mark is 10".into(),
        };
        let mut o = oracle();
        o.begin_prune("w0", 19, 10);
        assert!(o.explain_error(&missing(10, 20)).is_none(), "no meta undone: no excuse");
        o.note_meta_undone("UnpersistedSync on /db/wal/meta (ino 3) bytes 0..80 at fs seq 7");
        let why = o.explain_error(&missing(10, 20));
        assert!(
            why.as_deref()
                .is_some_and(|w| w.contains("prune through 19") && w.contains("fs seq 7")),
            "{why:?}"
        );
        assert!(
            o.explain_error(&missing(10, 21)).is_none(),
            "past every prune asked for: no excuse"
        );
    }

    /// A read's I/O error is excused by an EIO injected into that file, not
    /// by read faults being switched on (soak seed 96025562's NotFound, from
    /// a segment a prune removed under the read, was excused that way).
    #[test]
    fn a_read_error_needs_an_injected_fault_of_its_file() {
        use simfs::{File, Fs, OpenOptions};
        let mut cfg = RunConfig::from_seed(1);
        cfg.mask = FaultClass::EioRead.bit();
        let mut o = Oracle::new(&cfg);
        let fs = SimFs::new(1);
        o.attach_fs(fs.clone(), "/db/wal".into());
        let (a, b) = (
            std::path::Path::new("/db/wal/a.wal"),
            std::path::Path::new("/db/wal/b.wal"),
        );
        let failed = futures::executor::block_on(async {
            fs.create_dir_all(std::path::Path::new("/db/wal")).await.unwrap();
            for p in [a, b] {
                let f = fs.open(p, OpenOptions::new().write(true).create(true)).await.unwrap();
                f.write_at(&[7; 64], 0).await.unwrap();
            }
            let f = fs.open(a, OpenOptions::new().read(true)).await.unwrap();
            let mut faults = fs.faults();
            faults.eio_read = 1.0;
            fs.set_faults(faults);
            let mut buf = [0; 8];
            f.read_at(&mut buf, 0).await.unwrap_err()
        });
        let io = |path: &std::path::Path, source: std::io::Error| Error::Io {
            op: "read",
            path: path.into(),
            offset: 0,
            source: std::sync::Arc::new(source),
        };
        o.check_read_error(0, &io(a, failed), 0, 0, 1);
        assert!(o.violations.is_empty(), "{:?}", o.violations);
        let gone = std::io::Error::from(std::io::ErrorKind::NotFound);
        o.check_read_error(0, &io(b, gone), 0, 0, 1);
        assert_eq!(o.violations.len(), 1, "{:?}", o.violations);
        assert!(o.violations[0].contains("no injected read fault explains it"));
    }

    /// Soak seed 97086538's shape: a loss a point-in-time open accepted is
    /// reported again. Excused only when a fault was injected into that
    /// open's meta write, and only until an open accepts no loss.
    #[test]
    fn a_repeated_loss_report_needs_the_failed_meta_write() {
        let missing = Error::MissingRecords {
            path: "/db/wal/x.wal".into(),
            offset: 0,
            first: 0,
            end: 160,
            evidence: "the meta file's low-water mark is 0".into(),
        };
        let mut o = oracle();
        o.accepted_loss(0, 160, None);
        assert!(o.explain_error(&missing).is_none(), "recorded (no fault): no excuse");
        let t = simfs::TraceEvent {
            seq: 2719,
            time_ns: 0,
            op: "rename",
            ino: Some(118),
            path: Some("/db/wal/meta.wal.tmp".into()),
            to_path: Some("/db/wal/meta".into()),
            offset: 0,
            len: 0,
            result: "StorageFull".into(),
            fault: Some(simfs::FaultKind::EnospcMetadata),
        };
        o.accepted_loss(0, 160, Some(&t));
        let why = o.explain_error(&missing);
        assert!(why.as_deref().is_some_and(|w| w.contains("fs seq 2719")), "{why:?}");
        o.accepted_loss_recorded();
        assert!(
            o.explain_error(&missing).is_none(),
            "cleared by an open that accepted nothing"
        );
    }
}
