//! The tasks of a round: concurrent writers (single and batch appends,
//! reads, iterators, rotation, sync), the solo writer that appends at
//! caller-chosen indices, and readers. Every result goes to the oracle the
//! moment it returns.

use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Poll;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use simfs::SimFs;

use crate::api::{Given, LogApi};
use crate::config::{FaultClass, Op, RunConfig};
use crate::oracle::Oracle;
use crate::payload::HEADER;

/// What the tasks of a run share.
pub struct Ctx {
    /// The run's configuration.
    pub cfg: RunConfig,
    /// The simulated filesystem.
    pub fs: SimFs,
    /// The log directory.
    pub dir: PathBuf,
    oracle: Mutex<Oracle>,
}

impl Ctx {
    /// A context for one run.
    pub fn new(cfg: RunConfig, fs: SimFs, dir: PathBuf) -> Ctx {
        let mut oracle = Oracle::new(&cfg);
        oracle.attach_fs(fs.clone(), dir.clone());
        let oracle = Mutex::new(oracle);
        Ctx { cfg, fs, dir, oracle }
    }

    /// The oracle (never held across an `.await`).
    pub fn oracle(&self) -> MutexGuard<'_, Oracle> {
        self.oracle.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the oracle out at the end of the run.
    pub fn into_oracle(self) -> Oracle {
        self.oracle.into_inner().unwrap_or_else(|e| e.into_inner())
    }
}

/// Draws a record length: empty, the maximum, just over the maximum (to be
/// refused; only if `allow_oversize`), or a typical size.
pub fn record_len(cfg: &RunConfig, rng: &mut ChaCha8Rng, allow_oversize: bool) -> usize {
    let r = rng.random_range(0..100u32);
    if r < cfg.zero_record_pct {
        0
    } else if r < cfg.zero_record_pct + cfg.max_record_pct {
        cfg.max_record_bytes
    } else if allow_oversize && rng.random_bool(0.01) {
        cfg.max_record_bytes + 1
    } else {
        rng.random_range(HEADER..=cfg.typical_record_bytes.max(HEADER))
    }
}

/// Polls `fut` at most `polls` times. If it is still pending then, drops it
/// where it is parked (at whatever await point that is, as a lost
/// `select!` branch or an expired timeout does) and returns `None`.
pub async fn poll_at_most<T>(fut: impl Future<Output = T>, polls: u32) -> Option<T> {
    let mut fut = Some(Box::pin(fut));
    let mut left = polls.max(1);
    std::future::poll_fn(move |cx| {
        let Some(f) = fut.as_mut() else {
            return Poll::Ready(None);
        };
        match f.as_mut().poll(cx) {
            Poll::Ready(v) => Poll::Ready(Some(v)),
            Poll::Pending => {
                left -= 1;
                if left == 0 {
                    fut = None;
                    Poll::Ready(None)
                } else {
                    Poll::Pending
                }
            }
        }
    })
    .await
}

/// Which of a writer's calls it cancels ([`FaultClass::Cancel`]), from a
/// stream of its own: seeds without the class draw exactly what they drew
/// before it existed.
struct Canceller {
    rng: Option<ChaCha8Rng>,
    pct: u32,
}

impl Canceller {
    fn new(cfg: &RunConfig, writer_rng: &ChaCha8Rng) -> Canceller {
        // A clone's draw leaves the writer's own stream untouched.
        let rng = cfg
            .on(FaultClass::Cancel)
            .then(|| ChaCha8Rng::seed_from_u64(writer_rng.clone().random::<u64>() ^ 0x4341_4e43));
        Canceller {
            rng,
            pct: cfg.cancel_pct,
        }
    }

    /// `Some(polls)` if the next call is to be cancelled after that many polls.
    fn next(&mut self) -> Option<u32> {
        let rng = self.rng.as_mut()?;
        (rng.random_range(0..100) < self.pct).then(|| rng.random_range(1..=6))
    }
}

/// Which form of a call a writer makes (`append` or `append_with`, `read`
/// or `read_range`, `sync` or `wait_durable`), and the extra arguments of
/// the embedding forms, from a stream of its own: the main stream draws
/// exactly what it drew before the forms existed.
struct Forms {
    rng: ChaCha8Rng,
}

impl Forms {
    fn new(writer_rng: &ChaCha8Rng) -> Forms {
        Forms {
            rng: ChaCha8Rng::seed_from_u64(writer_rng.clone().random::<u64>() ^ 0x464f_524d),
        }
    }

    /// Whether the next call takes the embedding form (30%).
    fn embedding(&mut self) -> bool {
        self.rng.random_range(0..10) < 3
    }
}

/// A concurrent writer: `ops` operations from the configured mix.
pub async fn writer(ctx: Arc<Ctx>, wal: Arc<dyn LogApi>, w: u16, ops: u32, mut rng: ChaCha8Rng) {
    let mut cancel = Canceller::new(&ctx.cfg, &rng);
    let mut forms = Forms::new(&rng);
    for _ in 0..ops {
        let op = ctx.cfg.mix.pick(&mut rng);
        if forms.embedding() && embedding_call(&ctx, &wal, w, op, &mut rng, &mut forms, &mut cancel).await {
            continue;
        }
        if forms.rng.random_range(0..8) == 0 {
            let notices = wal.seal_notices();
            ctx.oracle().check_seals(&notices);
        }
        match op {
            Op::Append => {
                let len = record_len(&ctx.cfg, &mut rng, true);
                let (id, mut p) = ctx.oracle().begin_append(w, &[len], false, None);
                // An append of only empty records carries no identity the
                // scan could find it by: never cancelled.
                let polls = cancel.next().filter(|_| len > 0);
                match poll_at_most(wal.append(p.pop().unwrap_or_default()), polls.unwrap_or(u32::MAX)).await {
                    Some(r) => ctx.oracle().finish_append(id, &r),
                    None => ctx.oracle().cancelled_append(id),
                }
            }
            Op::Batch => {
                let n = rng.random_range(1..=ctx.cfg.max_batch.max(1));
                let lens: Vec<usize> = (0..n).map(|_| record_len(&ctx.cfg, &mut rng, false)).collect();
                let (id, p) = ctx.oracle().begin_append(w, &lens, true, None);
                let polls = cancel.next().filter(|_| lens.iter().any(|&l| l > 0));
                match poll_at_most(wal.append_batch(p), polls.unwrap_or(u32::MAX)).await {
                    Some(r) => ctx.oracle().finish_append(id, &r),
                    None => ctx.oracle().cancelled_append(id),
                }
            }
            Op::Read => match cancel.next() {
                Some(polls) => {
                    if poll_at_most(read_one(&ctx, &wal, &mut rng), polls).await.is_none() {
                        ctx.oracle().cancelled_call(&format!("w{w} read"));
                    }
                }
                None => read_one(&ctx, &wal, &mut rng).await,
            },
            Op::Iter => iterate(&ctx, &wal, &mut rng).await,
            Op::Rotate => {
                let start = ctx.oracle().now();
                match poll_at_most(wal.rotate(), cancel.next().unwrap_or(u32::MAX)).await {
                    Some(r) => {
                        ctx.oracle().finish_rotate(start, &r);
                    }
                    None => ctx.oracle().cancelled_call(&format!("w{w} rotate")),
                }
            }
            Op::Sync => {
                let start = ctx.oracle().now();
                match poll_at_most(wal.sync(), cancel.next().unwrap_or(u32::MAX)).await {
                    Some(r) => ctx.oracle().finish_sync(start, &r),
                    None => ctx.oracle().cancelled_call(&format!("w{w} sync")),
                }
            }
            Op::Prune => {
                let _ = prune(&ctx, &wal, &format!("w{w}"), &mut rng, true).await;
            }
            Op::Compact => compact(&ctx, &wal, &format!("w{w}")).await,
        }
    }
}

/// The embedding form of `op` (`append_with`, `append_batch_with`,
/// `read_range`, `wait_durable`), if it has one; `false` if not (nothing
/// drawn from `rng` then).
async fn embedding_call(
    ctx: &Ctx,
    wal: &Arc<dyn LogApi>,
    w: u16,
    op: Op,
    rng: &mut ChaCha8Rng,
    forms: &mut Forms,
    cancel: &mut Canceller,
) -> bool {
    match op {
        Op::Append | Op::Batch => {
            let batch = op == Op::Batch;
            let lens: Vec<usize> = if batch {
                let n = rng.random_range(1..=ctx.cfg.max_batch.max(1));
                (0..n).map(|_| record_len(&ctx.cfg, rng, false)).collect()
            } else {
                vec![record_len(&ctx.cfg, rng, true)]
            };
            let (id, p) = ctx.oracle().begin_append(w, &lens, batch, None);
            let given: Given = Arc::default();
            let polls = cancel.next().filter(|_| lens.iter().any(|&l| l > 0));
            let r = poll_at_most(wal.append_with(p, batch, given.clone()), polls.unwrap_or(u32::MAX)).await;
            let given = *given.lock().unwrap_or_else(|e| e.into_inner());
            match r {
                Some(r) => ctx.oracle().finish_append_with(id, &r, given),
                None => ctx.oracle().cancelled_append_with(id, given),
            }
        }
        Op::Read => {
            let (first, next) = (wal.first_index(), wal.next_index());
            let start = forms.rng.random_range(first.saturating_sub(3)..=next.saturating_add(2));
            let end = start.saturating_add(forms.rng.random_range(0..=40));
            let max_bytes = match forms.rng.random_range(0..4) {
                0 => 0,
                1 => usize::MAX,
                _ => forms.rng.random_range(0..=4 * ctx.cfg.typical_record_bytes.max(1)),
            };
            let (tick, lease) = {
                let mut o = ctx.oracle();
                (o.now(), o.range_lease_created(start.max(first), next))
            };
            let _guard = LeaseGuard { ctx, id: lease };
            let r = wal.read_range(start, end, max_bytes).await;
            ctx.oracle()
                .finish_read_range(tick, (start, end), max_bytes, (first, next), &r);
        }
        Op::Sync => {
            let (first, next) = (wal.first_index(), wal.next_index());
            let index = if next > first && forms.rng.random_range(0..10) > 0 {
                forms.rng.random_range(first..next)
            } else {
                next.saturating_add(forms.rng.random_range(0..3))
            };
            let tick = ctx.oracle().now();
            match poll_at_most(wal.wait_durable(index), cancel.next().unwrap_or(u32::MAX)).await {
                Some(r) => ctx.oracle().finish_wait_durable(tick, index, next, &r),
                None => ctx.oracle().cancelled_call(&format!("w{w} wait_durable")),
            }
        }
        _ => return false,
    }
    true
}

/// Draws a prune point around the log `[first, next)`: below the first
/// index, inside, at the last record, or past it (snapshot install).
pub fn prune_point(rng: &mut ChaCha8Rng, first: u64, next: u64) -> u64 {
    match rng.random_range(0..20) {
        0..=2 if first > 0 => rng.random_range(first.saturating_sub(20)..first),
        0..=10 if next > first => rng.random_range(first..next),
        11..=14 => next.saturating_sub(1),
        _ => next.saturating_add(rng.random_range(0..50)),
    }
}

/// Whether writers may prune through the end of the log while others
/// append (`SIM_RACING_FULL_PRUNE=1`). Off by default: a full prune racing
/// appends hands one index to two appends (a WAL bug, see
/// `docs/SIMULATION.md`, "Known WAL bugs").
pub fn racing_full_prune() -> bool {
    std::env::var("SIM_RACING_FULL_PRUNE").is_ok_and(|v| v == "1")
}

/// `prune_through(k)` with `k` drawn around the log; the result goes to the
/// oracle. `racing`: other tasks append meanwhile.
pub async fn prune(
    ctx: &Ctx,
    wal: &Arc<dyn LogApi>,
    who: &str,
    rng: &mut ChaCha8Rng,
    racing: bool,
) -> wal::Result<u64> {
    let (first, next) = (wal.first_index(), wal.next_index());
    let mut k = prune_point(rng, first, next);
    if racing && !racing_full_prune() && next > first && k.saturating_add(1) >= next {
        // Stay below the last record: a partial prune (sealed segments only).
        k = next.saturating_sub(2).max(first);
        if k.saturating_add(1) >= next {
            k = first.saturating_sub(1);
        }
    }
    if racing && !racing_full_prune() && k >= first && k.saturating_add(1) >= next {
        // No partial prune point: skip.
        return Ok(first);
    }
    let start = prune_started(ctx, wal, who, k, first, next);
    let r = wal.prune_through(k).await;
    prune_finished(ctx, wal, who, start, k, first, &r);
    r
}

/// Tells the oracle a prune through `k` starts (`[first, next)`: the log
/// when it was drawn, with no await since). Returns its start tick.
pub fn prune_started(ctx: &Ctx, wal: &Arc<dyn LogApi>, who: &str, k: u64, first: u64, next: u64) -> u64 {
    let segments = wal.segment_files();
    let mut o = ctx.oracle();
    let start = o.begin_prune(who, k, first);
    o.lease_prune_begin(start, k, first, next, &segments);
    start
}

/// Gives the oracle the result of the prune started at `start` (called
/// with no await since it returned).
pub fn prune_finished(
    ctx: &Ctx,
    wal: &Arc<dyn LogApi>,
    who: &str,
    start: u64,
    k: u64,
    first: u64,
    r: &wal::Result<u64>,
) {
    let segments = wal.segment_files();
    let mut o = ctx.oracle();
    o.finish_prune(who, start, k, first, r);
    o.check_exact_prune(start, k, first, r, &segments);
    o.lease_prune_finish(start, r, &segments);
}

/// `compaction_plan` (printed to the trace, a dry run) then `compact`.
pub async fn compact(ctx: &Ctx, wal: &Arc<dyn LogApi>, who: &str) {
    let opts = ctx.cfg.compaction;
    let start = ctx.oracle().now();
    let plan = wal.compaction_plan(opts).await;
    let r = wal.compact(opts).await;
    ctx.oracle().finish_compact(who, start, &plan, &r);
}

/// The solo writer: appends at caller-chosen indices (`append_at`,
/// `append_batch_at`), sometimes deliberately at a wrong index.
pub async fn solo(ctx: Arc<Ctx>, wal: Arc<dyn LogApi>, w: u16, ops: u32, mut rng: ChaCha8Rng) {
    for _ in 0..ops {
        let next = wal.next_index();
        let empty = wal.first_index() == next;
        let at = match rng.random_range(0..10) {
            // An empty log (maybe pruned through its end): a snapshot install
            // above the next index (refused unless a prune emptied it).
            0..=4 if empty => next.saturating_add(rng.random_range(1..=100)),
            0 => next.wrapping_add(1),
            1 if next > 0 => next - 1,
            _ => next,
        };
        if empty && at > next && rng.random_bool(0.5) {
            reset_to(&ctx, &wal, &format!("w{w}"), at, next).await;
        }
        if rng.random_bool(0.6) {
            let len = record_len(&ctx.cfg, &mut rng, false);
            let (id, mut p) = ctx.oracle().begin_append(w, &[len], false, Some(at));
            let r = wal.append_at(at, p.pop().unwrap_or_default()).await;
            ctx.oracle().finish_append(id, &r);
        } else {
            let n = rng.random_range(1..=ctx.cfg.max_batch.max(1));
            let lens: Vec<usize> = (0..n).map(|_| record_len(&ctx.cfg, &mut rng, false)).collect();
            let (id, p) = ctx.oracle().begin_append(w, &lens, true, Some(at));
            let r = wal.append_batch_at(at, p).await;
            ctx.oracle().finish_append(id, &r);
        }
        if rng.random_bool(0.2) {
            let start = ctx.oracle().now();
            let r = wal.sync().await;
            ctx.oracle().finish_sync(start, &r);
        }
        if ctx.cfg.mix.prune > 0 && rng.random_bool(0.08) {
            let _ = prune(&ctx, &wal, &format!("w{w}"), &mut rng, false).await;
        }
    }
}

/// `reset_to(at)` on the empty log `[next, next)`, told to the oracle as
/// the full prune through `at - 1` it is (the solo writer's round: nothing
/// else appends meanwhile).
async fn reset_to(ctx: &Ctx, wal: &Arc<dyn LogApi>, who: &str, at: u64, next: u64) {
    let k = at - 1;
    let start = prune_started(ctx, wal, who, k, next, next);
    let r = wal.reset_to(at).await.map(|()| at);
    if r.is_ok() {
        ctx.oracle().cov.mark(crate::coverage::Mark::ResetDone);
    }
    prune_finished(ctx, wal, who, start, k, next, &r);
}

/// A reader: reads and iterations only.
pub async fn reader(ctx: Arc<Ctx>, wal: Arc<dyn LogApi>, ops: u32, mut rng: ChaCha8Rng) {
    for _ in 0..ops {
        if rng.random_bool(0.5) {
            read_one(&ctx, &wal, &mut rng).await;
        } else {
            iterate(&ctx, &wal, &mut rng).await;
        }
    }
}

async fn read_one(ctx: &Ctx, wal: &Arc<dyn LogApi>, rng: &mut ChaCha8Rng) {
    let (first, next) = (wal.first_index(), wal.next_index());
    if next <= first {
        return;
    }
    let index = rng.random_range(first..next);
    let start = ctx.oracle().now();
    let r = wal.read(index).await;
    ctx.oracle().finish_read(start, index, first, next, &r);
}

/// Unregisters an iterator from the oracle when the iteration ends (or its
/// task is dropped by a crash).
struct LeaseGuard<'a> {
    ctx: &'a Ctx,
    id: u64,
}

impl Drop for LeaseGuard<'_> {
    fn drop(&mut self) {
        self.ctx.oracle().iter_dropped(self.id);
    }
}

async fn iterate(ctx: &Ctx, wal: &Arc<dyn LogApi>, rng: &mut ChaCha8Rng) {
    let (first, next) = (wal.first_index(), wal.next_index());
    let from = if next > first {
        rng.random_range(first..=next)
    } else {
        first
    };
    let want = rng.random_range(1..=32u64);
    let start = ctx.oracle().now();
    let mut it = match wal.iter_from(from) {
        Ok(it) => it,
        Err(e) => {
            let mut o = ctx.oracle();
            o.failstop(start, Err(&e), "iter_from");
            o.check_read_error(start, &e, from, first, next);
            return;
        }
    };
    let lease = {
        let mut o = ctx.oracle();
        o.failstop(start, Ok(()), "iter_from");
        o.iter_created(from, wal.next_index())
    };
    // Declared after `it`: dropped first, with no await in between.
    let _guard = LeaseGuard { ctx, id: lease };
    let mut pos = from;
    let mut tailed = false;
    while pos < from + want {
        match it.next().await {
            None => {
                let (f, n) = (wal.first_index(), wal.next_index());
                {
                    let mut o = ctx.oracle();
                    if pos < next && !o.racing_prune(start) {
                        o.violation(format!(
                            "iterator from {from} caught up at {pos}, but {next} was readable"
                        ));
                    }
                    if pos < f {
                        // Skipped to the new first index, then caught up.
                        o.iter_skipped(lease, pos, f);
                        pos = f;
                    }
                    o.iter_moved(lease, pos, n);
                }
                if tailed {
                    break;
                }
                // Tail the log once, as a follower would: the caught-up
                // lease lives across whatever runs meanwhile (appends,
                // prunes that may pass it).
                tailed = true;
                madsim::time::sleep(std::time::Duration::from_micros(ctx.cfg.latency_us.1 * 4)).await;
            }
            Some(Ok((i, p))) => {
                let n = wal.next_index();
                let mut o = ctx.oracle();
                o.failstop(start, Ok(()), "iterator next");
                if i > pos {
                    // A prune passed it: allowed only if it was caught up
                    // (or its lease revoked).
                    o.iter_skipped(lease, pos, i);
                } else if i != pos {
                    o.violation(format!("iterator from {from} gave index {i} where {pos} was expected"));
                    break;
                }
                o.check_record(i, &p);
                pos = i + 1;
                o.iter_moved(lease, pos, n);
            }
            Some(Err(e)) => {
                let mut o = ctx.oracle();
                if let wal::Error::IteratorExpired { .. } = e {
                    o.iter_expired(lease, pos);
                } else {
                    o.check_read_error(start, &e, pos, first, next.max(pos + 1));
                }
                break;
            }
        }
    }
}
