//! The `ops` target: sequences of operations, crashes and faults, checked
//! against the shared model of the log (`wal-model`).

use std::path::Path;
use std::sync::Arc;

use arbitrary::{Arbitrary, Unstructured};
use futures::executor::block_on;
use futures::future::join_all;
use simfs::{CrashKind, FaultConfig, FaultKind, SimConfig, SimFs, SyncFailureProfile, YieldClock};
use wal::{Error, Options, SyncPolicy, Wal};
use wal_model::{Crash, Log};

use crate::enc::{Enc, Encode};

/// Most operations run from one input.
const MAX_OPS: usize = 64;
/// `Options::max_record_bytes` in this target.
const MAX_RECORD: usize = 4096;
/// `Options::max_batch_records` in this target.
const MAX_BATCH: usize = 8;
/// `Options::max_write_bytes` in this target.
const MAX_WRITE: usize = 16384;

#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Align {
    A8,
    A512,
    A4096,
}

impl Encode for Align {
    fn encode(&self, e: &mut Enc) {
        e.tag(*self as u32, 3);
    }
}

/// The log's and the disk's configuration.
#[derive(Arbitrary, Clone, Debug, PartialEq)]
pub(crate) struct Config {
    pub seed: u8,
    /// `SyncPolicy::Manual` instead of `Always`.
    pub manual: bool,
    pub align: Align,
    /// Atomic write unit 512 instead of 4096.
    pub unit_512: bool,
    /// `segment_max_records` (0: unlimited).
    pub segment_records: u8,
    /// The smallest segment size the alignment allows.
    pub small_segments: bool,
    pub first_index: u8,
    /// `SyncFailureProfile::Btrfs` instead of `Ext4Ordered`.
    pub btrfs: bool,
    /// Every filesystem call yields once, so concurrent appends interleave.
    pub yielding: bool,
}

impl Encode for Config {
    fn encode(&self, e: &mut Enc) {
        self.seed.encode(e);
        self.manual.encode(e);
        self.align.encode(e);
        self.unit_512.encode(e);
        self.segment_records.encode(e);
        self.small_segments.encode(e);
        self.first_index.encode(e);
        self.btrfs.encode(e);
        self.yielding.encode(e);
    }
}

/// A payload of `len % (MAX_RECORD + 100)` bytes; its content names the
/// record, so a record in the wrong place is noticed.
#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Payload {
    pub len: u16,
}

impl Encode for Payload {
    fn encode(&self, e: &mut Enc) {
        self.len.encode(e);
    }
}

/// Fault probabilities, each `level % 4` of {0, 0.05, 0.3, 1}.
#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Faults {
    pub sync_fail: u8,
    pub eio_write: u8,
    pub enospc_write: u8,
    pub writeback: u8,
    pub torn_garbage: u8,
}

impl Encode for Faults {
    fn encode(&self, e: &mut Enc) {
        self.sync_fail.encode(e);
        self.eio_write.encode(e);
        self.enospc_write.encode(e);
        self.writeback.encode(e);
        self.torn_garbage.encode(e);
    }
}

#[derive(Arbitrary, Clone, Debug, PartialEq)]
pub(crate) enum Op {
    Append(Payload),
    AppendBatch(Vec<Payload>),
    /// `append_at(next + delta)`.
    AppendAt {
        delta: i8,
        payload: Payload,
    },
    AppendBatchAt {
        delta: i8,
        records: Vec<Payload>,
    },
    /// Several appends at once (group commit when `yielding`).
    Concurrent(Vec<Payload>),
    /// `read(first + at % (len + 2))`.
    Read(u16),
    /// Iterate from `first + at % (len + 2)` to the end.
    Iterate(u16),
    Rotate,
    Sync,
    /// `close`, then open again.
    Reopen,
    /// Drop without `close`, then open again.
    DropReopen,
    ProcessCrash,
    PowerLoss,
    SetFaults(Faults),
    /// `set_capacity(used + n)`.
    Capacity(u16),
    /// No faults, no capacity limit.
    Heal,
    /// `append_with`, the maker checked to get the returned index.
    AppendWith(Payload),
    /// `read_range(first + at % (len + 2) .. + len, max_bytes)`.
    ReadRange {
        at: u16,
        len: u8,
        max_bytes: u16,
    },
    /// `wait_durable(first + at % (len + 2))`.
    WaitDurable(u16),
    /// `prune_through(first - 1 + at % (len + 3))`: exact, or a full prune.
    Prune(u16),
}

impl Encode for Op {
    fn encode(&self, e: &mut Enc) {
        const N: u32 = 20;
        match self {
            Op::Append(p) => {
                e.tag(0, N);
                p.encode(e);
            }
            Op::AppendBatch(v) => {
                e.tag(1, N);
                v.encode(e);
            }
            Op::AppendAt { delta, payload } => {
                e.tag(2, N);
                delta.encode(e);
                payload.encode(e);
            }
            Op::AppendBatchAt { delta, records } => {
                e.tag(3, N);
                delta.encode(e);
                records.encode(e);
            }
            Op::Concurrent(v) => {
                e.tag(4, N);
                v.encode(e);
            }
            Op::Read(n) => {
                e.tag(5, N);
                n.encode(e);
            }
            Op::Iterate(n) => {
                e.tag(6, N);
                n.encode(e);
            }
            Op::Rotate => e.tag(7, N),
            Op::Sync => e.tag(8, N),
            Op::Reopen => e.tag(9, N),
            Op::DropReopen => e.tag(10, N),
            Op::ProcessCrash => e.tag(11, N),
            Op::PowerLoss => e.tag(12, N),
            Op::SetFaults(f) => {
                e.tag(13, N);
                f.encode(e);
            }
            Op::Capacity(n) => {
                e.tag(14, N);
                n.encode(e);
            }
            Op::Heal => e.tag(15, N),
            Op::AppendWith(p) => {
                e.tag(16, N);
                p.encode(e);
            }
            Op::ReadRange { at, len, max_bytes } => {
                e.tag(17, N);
                at.encode(e);
                len.encode(e);
                max_bytes.encode(e);
            }
            Op::WaitDurable(at) => {
                e.tag(18, N);
                at.encode(e);
            }
            Op::Prune(at) => {
                e.tag(19, N);
                at.encode(e);
            }
        }
    }
}

#[derive(Arbitrary, Clone, Debug, PartialEq)]
pub(crate) struct OpsInput {
    pub config: Config,
    pub ops: Vec<Op>,
}

impl Encode for OpsInput {
    fn encode(&self, e: &mut Enc) {
        self.config.encode(e);
        self.ops.encode(e);
    }
}

fn level(x: u8) -> f64 {
    [0.0, 0.05, 0.3, 1.0][usize::from(x % 4)]
}

struct Runner {
    fs: SimFs,
    cfg: Config,
    opts: Options,
    wal: Option<Wal<SimFs>>,
    /// What the log must hold (acknowledged, recovered and maybe-written
    /// records, commit units, what survives which crash).
    model: Log<Vec<u8>>,
    /// A `Stopped` result was seen since the last open.
    stopped: bool,
    /// Records created so far (names payloads).
    serial: u64,
    garbage_allowed: bool,
    /// Every WAL call of the current step succeeded.
    last_ok: bool,
    /// `SyncFail` count when the current step began.
    failures_at_step: u64,
    /// The last append result, for messages.
    last_result: String,
    /// A prune that failed since the last open (`k`, the first index it
    /// would have answered): it may have taken effect.
    pending_prune: Option<(u64, u64)>,
}

fn dir() -> &'static Path {
    Path::new("/log")
}

/// Runs a structured sequence of operations, crashes and faults on a SimFs
/// and checks every result against a model of the log.
pub fn ops(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(input) = OpsInput::arbitrary(&mut u) else {
        return;
    };
    block_on(run(&input));
}

async fn run(input: &OpsInput) {
    let cfg = input.config.clone();
    let unit = if cfg.unit_512 { 512 } else { 4096 };
    let align = match cfg.align {
        Align::A8 => 8,
        Align::A512 => 512,
        Align::A4096 => 4096,
    };
    let mut sim = SimConfig {
        atomic_write_unit_bytes: unit,
        profile: if cfg.btrfs {
            SyncFailureProfile::Btrfs
        } else {
            SyncFailureProfile::Ext4Ordered
        },
        ..SimConfig::default()
    };
    if cfg.yielding {
        sim.latency_us = (1, 1);
        sim.clock = Arc::new(YieldClock);
    }
    let fs = SimFs::with_config(u64::from(cfg.seed), sim);
    let opts = Options::default()
        .sync_policy(if cfg.manual {
            SyncPolicy::Manual
        } else {
            SyncPolicy::Always
        })
        .durable_alignment_bytes(align)
        .segment_size_bytes(if cfg.small_segments {
            (2 * align).max(4096)
        } else {
            1 << 20
        })
        .segment_max_records(if cfg.segment_records == 0 {
            u64::MAX
        } else {
            u64::from(cfg.segment_records)
        })
        .first_index(u64::from(cfg.first_index))
        .max_record_bytes(MAX_RECORD)
        .max_batch_records(MAX_BATCH)
        .max_write_bytes(MAX_WRITE)
        .max_queue_bytes(4 * MAX_WRITE);
    let wal = match Wal::open(fs.clone(), dir(), opts.clone()).await {
        Ok(w) => w,
        Err(e) => panic!("open of an empty directory failed: {e}"),
    };
    let model = Log::new(u64::from(cfg.first_index));
    let mut r = Runner {
        fs,
        // Torn garbage may take acknowledged records only where the writer
        // does not pad to the atomic write unit: that is allowed by design.
        garbage_allowed: align >= u64::from(unit),
        cfg,
        opts,
        wal: Some(wal),
        model,
        stopped: false,
        serial: 0,
        last_ok: true,
        failures_at_step: 0,
        last_result: String::new(),
        pending_prune: None,
    };
    for op in input.ops.iter().take(MAX_OPS) {
        r.step(op).await;
    }
    // The end: a power loss, a clean reopen, the whole log checked.
    r.step(&Op::PowerLoss).await;
}

impl Runner {
    fn wal(&self) -> &Wal<SimFs> {
        match &self.wal {
            Some(w) => w,
            None => panic!("no open WAL"),
        }
    }

    /// A payload of `p.len % (MAX_RECORD + 100)` bytes naming the record.
    fn payload(&mut self, p: Payload) -> Vec<u8> {
        self.serial += 1;
        let len = usize::from(p.len) % (MAX_RECORD + 100);
        let tag = self.serial.to_le_bytes();
        (0..len).map(|i| tag[i % 8] ^ (i / 8) as u8).collect()
    }

    /// An append returned `Ok`: its records are in the log.
    fn acknowledge(&mut self, records: Vec<Vec<u8>>) {
        if let Err(e) = self.model.acknowledge(records, !self.cfg.manual) {
            panic!("append acknowledged against the model: {e}");
        }
    }

    fn sync_failures(&self) -> u64 {
        self.fs.counters().get(FaultKind::SyncFail)
    }

    async fn step(&mut self, op: &Op) {
        let failures_before = self.sync_failures();
        self.failures_at_step = failures_before;
        let was_stopped = self.stopped;
        self.last_ok = true;
        match op {
            Op::Append(p) => {
                let rec = self.payload(*p);
                let res = self.wal().append(rec.clone()).await;
                self.check_append(vec![rec], None, res);
            }
            Op::AppendBatch(v) => {
                let recs: Vec<Vec<u8>> = v.iter().take(12).map(|p| self.payload(*p)).collect();
                let res = self.wal().append_batch(recs.clone()).await;
                self.check_append(recs, None, res);
            }
            Op::AppendAt { delta, payload } => {
                let rec = self.payload(*payload);
                let at = self.model.next().wrapping_add(*delta as i64 as u64);
                let res = self.wal().append_at(at, rec.clone()).await;
                self.check_append(vec![rec], Some(at), res);
            }
            Op::AppendBatchAt { delta, records } => {
                let recs: Vec<Vec<u8>> = records.iter().take(12).map(|p| self.payload(*p)).collect();
                let at = self.model.next().wrapping_add(*delta as i64 as u64);
                let res = self.wal().append_batch_at(at, recs.clone()).await;
                self.check_append(recs, Some(at), res);
            }
            Op::Concurrent(v) => self.concurrent(v).await,
            Op::AppendWith(p) => {
                let rec = self.payload(*p);
                let given = std::sync::Mutex::new(None);
                let made = rec.clone();
                let res = self
                    .wal()
                    .append_with(|index| {
                        *given.lock().unwrap_or_else(|e| e.into_inner()) = Some(index);
                        made
                    })
                    .await;
                if let Ok(i) = res {
                    let given = *given.lock().unwrap_or_else(|e| e.into_inner());
                    assert_eq!(given, Some(i), "append_with: the maker's index");
                }
                self.check_append(vec![rec], None, res);
            }
            Op::ReadRange { at, len, max_bytes } => self.read_range(*at, *len, *max_bytes).await,
            Op::WaitDurable(at) => self.wait_durable(*at).await,
            Op::Prune(at) => self.prune(*at).await,
            Op::Read(at) => self.read(*at).await,
            Op::Iterate(at) => self.iterate(*at).await,
            Op::Rotate => {
                let res = self.wal().rotate().await;
                // A seal syncs what it seals.
                if self.check_control("rotate", res) {
                    self.model.synced();
                }
            }
            Op::Sync => {
                let res = self.wal().sync().await;
                // Every append that returned before it is durable.
                if self.check_control("sync", res) {
                    self.model.synced();
                }
            }
            Op::Reopen => {
                let wal = self.take_wal();
                let it = wal.iter_from(wal.first_index());
                let res = wal.close().await;
                if let Err(e) = &res {
                    // An Io error: the clean-shutdown marker (meta file) was
                    // not written; everything else was done.
                    assert!(
                        e.is_stopped() || matches!(e, Error::Io { .. }),
                        "close failed with {e:?}"
                    );
                    self.stopped |= e.is_stopped();
                    self.last_ok = false;
                } else {
                    assert!(!was_stopped, "close of a stopped WAL returned Ok");
                    self.model.synced();
                }
                if let Ok(mut it) = it {
                    match it.next().await {
                        Some(Err(Error::Closed)) => {}
                        Some(Err(e)) if e.is_stopped() => {}
                        other => panic!("an iterator after close returned {other:?}"),
                    }
                }
                self.reopen(false).await;
            }
            Op::DropReopen => {
                drop(self.take_wal());
                self.reopen(false).await;
            }
            Op::ProcessCrash => {
                self.fs.crash(CrashKind::Process);
                drop(self.take_wal());
                self.reopen(false).await;
            }
            Op::PowerLoss => {
                self.fs.crash(CrashKind::PowerLoss);
                drop(self.take_wal());
                self.reopen(true).await;
            }
            Op::SetFaults(f) => {
                let torn = if self.garbage_allowed {
                    level(f.torn_garbage)
                } else {
                    0.0
                };
                self.fs.set_faults(FaultConfig {
                    sync_fail: level(f.sync_fail),
                    eio_write: level(f.eio_write),
                    enospc_write: level(f.enospc_write),
                    writeback: level(f.writeback),
                    torn_garbage: torn,
                    ..FaultConfig::none()
                });
            }
            Op::Capacity(n) => {
                let used = self.fs.used_bytes();
                self.fs.set_capacity(Some(used + u64::from(*n)));
            }
            Op::Heal => {
                self.fs.set_faults(FaultConfig::none());
                self.fs.set_capacity(None);
            }
        }
        if self.sync_failures() > failures_before {
            // A failed sync may revert (btrfs) or strand unsynced page-cache data.
            self.model.sync_failed();
            let during_wal_call = !matches!(op, Op::Reopen | Op::DropReopen | Op::ProcessCrash | Op::PowerLoss);
            // A failed fsync stops the WAL, unless it was the fsync of a
            // temporary file that was then discarded and the call failed
            // (meta file: `AppendFailed`/`Io`, the WAL goes on).
            if during_wal_call {
                assert!(
                    self.stopped || !self.last_ok,
                    "a sync failed during {op:?}, the call succeeded and the WAL did not stop"
                );
            }
        }
        if let Some(w) = &self.wal {
            // A prune that stopped the WAL may have moved memory (and the
            // meta file) before the step that failed: either view holds
            // until the reopen decides.
            let moved = self
                .pending_prune
                .filter(|_| self.stopped)
                .is_some_and(|(_, want)| w.first_index() == want && w.next_index() == self.model.next().max(want));
            if !moved {
                assert_eq!(w.first_index(), self.model.first(), "first_index after {op:?}");
                assert_eq!(w.next_index(), self.model.next(), "next_index after {op:?}");
            }
            assert_eq!(
                w.stopped().is_some(),
                self.stopped,
                "stopped() after {op:?}, which returned {}: {:?}",
                self.last_result,
                w.stopped()
            );
            if !self.stopped {
                let claimed = w.durable_next();
                assert!(claimed <= self.model.next());
                self.model.durable_through(claimed);
            }
        }
    }

    fn take_wal(&mut self) -> Wal<SimFs> {
        match self.wal.take() {
            Some(w) => w,
            None => panic!("no open WAL"),
        }
    }

    /// The error an append must fail with before it is admitted, if any.
    fn precheck(&self, records: &[Vec<u8>], at: Option<u64>) -> Option<&'static str> {
        // A stopped WAL answers Stopped before it checks arguments.
        if self.stopped {
            return Some("Stopped");
        }
        if records.is_empty() {
            return Some("EmptyBatch");
        }
        if records.iter().any(|r| r.len() > MAX_RECORD) {
            return Some("RecordTooLarge");
        }
        let bytes: usize = records.iter().map(Vec::len).sum();
        if records.len() > MAX_BATCH || bytes > MAX_WRITE {
            return Some("BatchTooLarge");
        }
        if at.is_some_and(|a| a != self.model.next() && !self.reseats(a)) {
            return Some("WrongIndex");
        }
        let first = at.unwrap_or(self.model.next());
        if first.checked_add(records.len() as u64).is_none_or(|n| n == u64::MAX) {
            return Some("InvalidArgument");
        }
        None
    }

    /// Whether `append_at(a)` is a snapshot install: `a` above the next
    /// index of a log a prune emptied (and that admitted nothing since).
    fn reseats(&self, a: u64) -> bool {
        self.model.reseatable() && a > self.model.next()
    }

    fn check_append(&mut self, records: Vec<Vec<u8>>, at: Option<u64>, res: wal::Result<u64>) {
        self.last_result = format!("{res:?}");
        let expected = self.precheck(&records, at);
        // Admitted (acknowledged, failed, or stopped on its way): the WAL
        // moved the emptied log to `a` first, whatever became of the write.
        let admitted = matches!(
            res,
            Ok(_) | Err(Error::AppendFailed { .. }) | Err(Error::Stopped { .. })
        );
        if let Some(a) = at.filter(|&a| expected.is_none() && !self.stopped && admitted && self.reseats(a)) {
            self.model
                .reseat(a)
                .unwrap_or_else(|m| panic!("snapshot install at {a}: {m}"));
        }
        match (expected, res) {
            (Some(want), Err(e)) => assert_eq!(kind(&e), want, "append: {e}"),
            (Some(want), Ok(i)) => panic!("append returned Ok({i}), expected {want}"),
            (None, Ok(i)) => {
                assert_eq!(i, self.model.next(), "append returned the wrong index");
                self.acknowledge(records);
            }
            (None, Err(e)) => self.append_failed(records, e, true),
        }
    }

    /// `last`: nothing ran on the WAL after this append (no later append of
    /// the same concurrent call stopped it).
    fn append_failed(&mut self, records: Vec<Vec<u8>>, e: Error, last: bool) {
        self.last_ok = false;
        match &e {
            // Nothing of the append is in the log and the WAL goes on: a
            // WAL that stopped during the append reports `Stopped`.
            Error::AppendFailed { .. } => {
                assert!(
                    !last || self.wal().stopped().is_none(),
                    "append returned {e} but the WAL is stopped: {:?}",
                    self.wal().stopped()
                );
                self.model.append_failed(&records);
            }
            Error::Stopped { .. } => {
                self.stopped = true;
                self.model.maybe_written(records);
            }
            other => panic!("an admitted append failed with {other:?}"),
        }
    }

    /// Checks the result of `rotate` or `sync`; whether it was `Ok`.
    fn check_control(&mut self, what: &str, res: wal::Result<()>) -> bool {
        match res {
            Ok(()) => {
                assert!(!self.stopped, "{what} on a stopped WAL returned Ok");
                return true;
            }
            Err(e) if e.is_stopped() => self.stopped = true,
            // A meta-file write that failed before it replaced anything: the
            // WAL goes on.
            Err(Error::Io { .. }) if !self.stopped => self.last_ok = false,
            Err(e) => panic!("{what} failed with {e:?}"),
        }
        false
    }

    async fn concurrent(&mut self, v: &[Payload]) {
        let recs: Vec<Vec<u8>> = v.iter().take(8).map(|p| self.payload(*p)).collect();
        let stopped_before = self.stopped;
        let wal = self.wal();
        let results = join_all(recs.iter().map(|r| wal.append(r.clone()))).await;
        // Admission order is poll order. Requests after the one that stopped
        // the WAL may have been written in its group: they are "maybe" too.
        let stopped_at = results.iter().position(|r| matches!(r, Err(e) if e.is_stopped()));
        for (k, (rec, res)) in recs.into_iter().zip(results).enumerate() {
            if stopped_before {
                assert!(matches!(&res, Err(e) if e.is_stopped()), "{res:?}");
            } else if rec.len() > MAX_RECORD {
                // A stopped WAL answers `Stopped` before checking arguments:
                // an earlier append of this call may have stopped it.
                let stopped_earlier = stopped_at.is_some_and(|s| s < k);
                match &res {
                    Err(Error::RecordTooLarge { .. }) => {}
                    Err(e) if e.is_stopped() && stopped_earlier => {}
                    _ => panic!("{res:?} for a record of {} bytes", rec.len()),
                }
            } else {
                // At the end of the index space an append is refused and
                // nothing is admitted. The appends of this call before it
                // may have held indices when it was refused, even if they
                // failed later: up to `k` more.
                let exhausted = self.model.next().checked_add(1).is_none_or(|n| n == u64::MAX);
                let may_be_exhausted = self.model.next().saturating_add(k as u64 + 1) == u64::MAX;
                match res {
                    Ok(i) => {
                        assert!(!exhausted, "an append past the index space returned Ok({i})");
                        assert_eq!(i, self.model.next(), "concurrent append returned the wrong index");
                        self.acknowledge(vec![rec]);
                    }
                    Err(Error::InvalidArgument(_)) if may_be_exhausted => self.last_ok = false,
                    Err(e) => self.append_failed(vec![rec], e, stopped_at.is_none_or(|s| s < k)),
                }
            }
        }
    }

    async fn read(&mut self, at: u16) {
        let span = self.model.next() - self.model.first() + 2;
        let index = self.model.first().saturating_add(u64::from(at) % span);
        let res = self.wal().read(index).await;
        match res {
            Ok(p) => {
                assert!(!self.stopped, "read on a stopped WAL returned Ok");
                assert_eq!(Some(&p), self.model.get(index), "read({index})");
            }
            Err(e) if self.stopped => assert!(e.is_stopped(), "read: {e:?}"),
            Err(Error::OutOfRange { .. }) => assert!(index >= self.model.next()),
            Err(e) => panic!("read({index}) failed: {e:?}"),
        }
    }

    /// `read_range` returns exactly the model's run: clamped, contiguous,
    /// within `max_bytes` but at least one record.
    async fn read_range(&mut self, at: u16, len: u8, max_bytes: u16) {
        let span = self.model.next() - self.model.first() + 2;
        let start = self.model.first().saturating_add(u64::from(at) % span);
        let end = start.saturating_add(u64::from(len));
        let max_bytes = usize::from(max_bytes);
        let res = self.wal().read_range(start..end, max_bytes).await;
        let got = match res {
            Ok(got) => {
                assert!(!self.stopped, "read_range on a stopped WAL returned Ok");
                got
            }
            Err(e) if self.stopped => return assert!(e.is_stopped(), "read_range: {e:?}"),
            Err(e) => panic!("read_range({start}..{end}, {max_bytes}) failed: {e:?}"),
        };
        let mut want = Vec::new();
        let mut total = 0usize;
        for (i, p) in self.model.range(start..end) {
            if !want.is_empty() && total + p.len() > max_bytes {
                break;
            }
            total += p.len();
            want.push((i, p.clone()));
        }
        assert_eq!(got, want, "read_range({start}..{end}, {max_bytes})");
    }

    /// `prune_through(k)` answers exactly: the first index where it was for
    /// `k` below it, `k + 1` for a full prune, else `k + 1` capped at the
    /// durable end (no iterator is live here). A failed prune may have
    /// taken effect: the next recovery may start anywhere up to its answer.
    async fn prune(&mut self, at: u16) {
        let (first, next) = (self.model.first(), self.model.next());
        let k = first.saturating_add(u64::from(at) % (next - first + 3)).wrapping_sub(1);
        if k == u64::MAX {
            return;
        }
        let durable = self.wal().durable_next();
        let res = self.wal().prune_through(k).await;
        let want = if k < first {
            first
        } else if k.saturating_add(1) >= next {
            k + 1
        } else {
            (k + 1).min(durable).max(first)
        };
        match res {
            Ok(nf) => {
                assert!(!self.stopped, "prune on a stopped WAL returned Ok");
                assert_eq!(
                    nf, want,
                    "prune_through({k}) on [{first}, {next}) with durable {durable}"
                );
                self.model.prune(k, nf);
            }
            Err(e) if self.stopped => assert!(e.is_stopped(), "prune: {e:?}"),
            // Emptying the log there would make the next index u64::MAX,
            // which no log may reach: refused, nothing changes.
            Err(Error::InvalidArgument(_)) if k >= u64::MAX - 1 && k.saturating_add(1) >= next => {
                self.last_ok = false;
            }
            Err(e) if e.is_stopped() || matches!(e, Error::Io { .. }) => {
                self.stopped = e.is_stopped();
                self.last_ok = false;
                self.pending_prune = Some((k, want));
            }
            Err(e) => panic!("prune_through({k}) failed: {e:?}"),
        }
    }

    /// `wait_durable(i)`: `Ok` makes the prefix through `i` durable;
    /// `OutOfRange` exactly when `i` is past the log.
    async fn wait_durable(&mut self, at: u16) {
        let span = self.model.next() - self.model.first() + 2;
        let index = self.model.first().saturating_add(u64::from(at) % span);
        let res = self.wal().wait_durable(index).await;
        match res {
            Ok(()) => {
                assert!(!self.stopped, "wait_durable on a stopped WAL returned Ok");
                assert!(index < self.model.next(), "wait_durable({index}) Ok past the log");
                assert!(
                    self.wal().durable_next() > index,
                    "wait_durable({index}) Ok, not durable"
                );
                self.model.durable_through(index + 1);
            }
            Err(e) if self.stopped => assert!(e.is_stopped(), "wait_durable: {e:?}"),
            Err(Error::OutOfRange { .. }) => assert!(index >= self.model.next(), "wait_durable({index})"),
            Err(e) if e.is_stopped() => {
                self.stopped = true;
                self.last_ok = false;
            }
            Err(e) => panic!("wait_durable({index}) failed: {e:?}"),
        }
    }

    async fn iterate(&mut self, at: u16) {
        let span = self.model.next() - self.model.first() + 2;
        let from = self.model.first().saturating_add(u64::from(at) % span);
        let res = self.wal().iter_from(from);
        let mut it = match res {
            Ok(it) => {
                assert!(!self.stopped, "iter_from on a stopped WAL returned Ok");
                it
            }
            Err(e) if self.stopped => {
                assert!(e.is_stopped(), "iter_from: {e:?}");
                return;
            }
            Err(Error::OutOfRange { .. }) => {
                assert!(from > self.model.next());
                return;
            }
            Err(e) => panic!("iter_from({from}) failed: {e:?}"),
        };
        let mut expect = from;
        while let Some(r) = it.next().await {
            match r {
                Ok((i, p)) => {
                    assert_eq!(i, expect, "iteration must be contiguous");
                    assert_eq!(Some(&p), self.model.get(i), "iterated record {i}");
                    expect += 1;
                }
                Err(e) => panic!("iteration failed at {expect}: {e:?}"),
            }
        }
        assert_eq!(expect, self.model.next(), "iteration ended early");
    }

    /// Opens the log again (faults healed if the open fails under them) and
    /// checks the recovered log against the model.
    async fn reopen(&mut self, power_loss: bool) {
        let mut opened = Wal::open(self.fs.clone(), dir(), self.opts.clone()).await;
        if power_loss || matches!(opened, Err(Error::Io { .. })) {
            if let Ok(w) = opened {
                drop(w);
            }
            self.fs.set_faults(FaultConfig::none());
            self.fs.set_capacity(None);
            opened = Wal::open(self.fs.clone(), dir(), self.opts.clone()).await;
        }
        let wal = match opened {
            Ok(w) => w,
            Err(e) => panic!(
                "open after {} failed: {e}",
                if power_loss { "a power loss" } else { "a restart" }
            ),
        };
        // A sync that failed during this step (close, or recovery under
        // faults) may have reverted (btrfs) or stranded unsynced data.
        let synced_ok = self.fs.counters().get(FaultKind::SyncFail) == self.failures_at_step;
        if !synced_ok {
            self.model.sync_failed();
        }
        let acceptable = self
            .model
            .crash(if power_loss { Crash::PowerLoss } else { Crash::Process });
        // Every record, byte for byte.
        let mut it = match wal.iter_from(wal.first_index()) {
            Ok(it) => it,
            Err(e) => panic!("iter_from(first) after reopen: {e:?}"),
        };
        let mut log = Vec::new();
        while let Some(r) = it.next().await {
            match r {
                Ok(rec) => log.push(rec),
                Err(e) => panic!("reading record {} after reopen: {e:?}", log.len()),
            }
        }
        drop(it);
        // A failed prune may have moved the first index (its meta file
        // written, then a failure): anywhere up to its answer.
        if let Some((k, most)) = self.pending_prune.take() {
            let f = wal.first_index();
            if f > self.model.first() && f <= most {
                self.model.prune(k, f);
            }
        }
        // Everything the crash must keep (durable: `Always`, `sync`, seal,
        // `durable_next`; after a restart everything acknowledged), a prefix
        // of what was attempted ending on a commit boundary, and never a
        // record whose append failed. Recovery makes what it serves durable
        // (it rewrites records that a failed fsync may have left clean but
        // not on disk).
        let r = self
            .model
            .recovered(wal.first_index(), wal.next_index(), log.iter().map(|(i, p)| (*i, p)));
        if let Err(e) = r {
            panic!(
                "recovered log [{}, {}) after {} does not match the model (acceptable: first {}, ends {:?}): {e}",
                wal.first_index(),
                wal.next_index(),
                if power_loss { "a power loss" } else { "a restart" },
                acceptable.first,
                acceptable.ends,
            );
        }
        self.stopped = false;
        self.wal = Some(wal);
    }
}

fn kind(e: &Error) -> &'static str {
    match e {
        Error::Io { .. } => "Io",
        Error::Locked { .. } => "Locked",
        Error::Corruption { .. } => "Corruption",
        Error::Stopped { .. } => "Stopped",
        Error::AppendFailed { .. } => "AppendFailed",
        Error::RecordTooLarge { .. } => "RecordTooLarge",
        Error::BatchTooLarge { .. } => "BatchTooLarge",
        Error::EmptyBatch => "EmptyBatch",
        Error::WrongIndex { .. } => "WrongIndex",
        Error::OutOfRange { .. } => "OutOfRange",
        Error::InvalidArgument(_) => "InvalidArgument",
        Error::Closed => "Closed",
        // Variants added later (the lead is extending the API).
        _ => "Other",
    }
}

/// The structured input an `ops` fuzz input decodes to, for debugging a crash.
pub fn describe_ops(data: &[u8]) -> String {
    match OpsInput::arbitrary(&mut Unstructured::new(data)) {
        Ok(input) => format!("{input:?}"),
        Err(e) => format!("not an input: {e}"),
    }
}
