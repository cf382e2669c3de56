//! The tasks of a round: concurrent writers (single and batch appends,
//! reads, iterators, rotation, sync), the solo writer that appends at
//! caller-chosen indices, and readers. Every result goes to the oracle the
//! moment it returns.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use simfs::SimFs;

use crate::api::LogApi;
use crate::config::{Op, RunConfig};
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
        let oracle = Mutex::new(Oracle::new(&cfg));
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

/// A concurrent writer: `ops` operations from the configured mix.
pub async fn writer(ctx: Arc<Ctx>, wal: Arc<dyn LogApi>, w: u16, ops: u32, mut rng: ChaCha8Rng) {
    for _ in 0..ops {
        match ctx.cfg.mix.pick(&mut rng) {
            Op::Append => {
                let len = record_len(&ctx.cfg, &mut rng, true);
                let (id, mut p) = ctx.oracle().begin_append(w, &[len], false, None);
                let r = wal.append(p.pop().unwrap_or_default()).await;
                ctx.oracle().finish_append(id, &r);
            }
            Op::Batch => {
                let n = rng.random_range(1..=ctx.cfg.max_batch.max(1));
                let lens: Vec<usize> = (0..n).map(|_| record_len(&ctx.cfg, &mut rng, false)).collect();
                let (id, p) = ctx.oracle().begin_append(w, &lens, true, None);
                let r = wal.append_batch(p).await;
                ctx.oracle().finish_append(id, &r);
            }
            Op::Read => read_one(&ctx, &wal, &mut rng).await,
            Op::Iter => iterate(&ctx, &wal, &mut rng).await,
            Op::Rotate => {
                let start = ctx.oracle().now();
                let r = wal.rotate().await;
                ctx.oracle().finish_rotate(start, &r);
            }
            Op::Sync => {
                let start = ctx.oracle().now();
                let r = wal.sync().await;
                ctx.oracle().finish_sync(start, &r);
            }
        }
    }
}

/// The solo writer: appends at caller-chosen indices (`append_at`,
/// `append_batch_at`), sometimes deliberately at a wrong index.
pub async fn solo(ctx: Arc<Ctx>, wal: Arc<dyn LogApi>, w: u16, ops: u32, mut rng: ChaCha8Rng) {
    for _ in 0..ops {
        let next = wal.next_index();
        let at = match rng.random_range(0..10) {
            0 => next.wrapping_add(1),
            1 if next > 0 => next - 1,
            _ => next,
        };
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
    }
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
            o.check_read_error(&e, from, first, next);
            return;
        }
    };
    ctx.oracle().failstop(start, Ok(()), "iter_from");
    let mut pos = from;
    while pos < from + want {
        match it.next().await {
            None => {
                if pos < next {
                    ctx.oracle().violation(format!(
                        "iterator from {from} caught up at {pos}, but {next} was readable"
                    ));
                }
                break;
            }
            Some(Ok((i, p))) => {
                let mut o = ctx.oracle();
                o.failstop(start, Ok(()), "iterator next");
                if i != pos {
                    o.violation(format!("iterator from {from} gave index {i} where {pos} was expected"));
                    break;
                }
                o.check_record(i, &p);
                pos += 1;
            }
            Some(Err(e)) => {
                let mut o = ctx.oracle();
                o.check_read_error(&e, pos, first, next.max(pos + 1));
                break;
            }
        }
    }
}
