//! `bench`: durable-append benchmarks of this WAL against okaywal 0.3,
//! raft-engine 0.4 and the raw limit (plain `std::fs`, write + fdatasync), on
//! a real directory. Systems are interleaved within each repetition and every
//! ratio is against a limit measured in the same repetition. See
//! `docs/PERFORMANCE.md`.
//!
//! ```text
//! cargo run --release -p bench -- --json results.json
//! cargo run --release -p bench -- --quick
//! ```

mod common;
mod counting;
mod okay;
mod raft;
mod raw;
mod report;
mod walsys;

use std::error::Error;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};

use common::{BResult, Run};
use report::{percentile_us, Row, Sample};
use walsys::Variant;

/// Which `OsFs` the WAL's variants use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize)]
enum FsChoice {
    /// `OsFs::new()`: syncs on the OsFs I/O thread (the default).
    Thread,
    /// `OsFs::inline()`: syncs on the calling thread.
    Inline,
    /// Both, as separate rows.
    Both,
}

#[derive(Parser, Debug, serde::Serialize)]
#[command(about = "Durable-append benchmarks: wal vs okaywal, raft-engine and raw write+fdatasync")]
struct Args {
    /// Smoke test for CI: short runs, small logs (finishes in under two minutes).
    #[arg(long)]
    quick: bool,
    /// Write every sample as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Parent directory for the logs (a temporary directory is made inside it).
    #[arg(long, default_value = "/tmp")]
    dir: PathBuf,
    /// Repetitions (systems are interleaved in each).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Seconds per timed run of W1-W3, W5, W8 (default 3, quick 0.25).
    #[arg(long)]
    secs: Option<f64>,
    /// Records of the bulk load W4 (default 1,000,000, quick 100,000).
    #[arg(long)]
    records: Option<u64>,
    /// Which OsFs the WAL's variants use.
    #[arg(long, value_enum, default_value_t = FsChoice::Both)]
    fs: FsChoice,
    /// Workloads to run, e.g. `w1,w4,w6` (W6 and W7 need W4's logs).
    #[arg(long, value_delimiter = ',', default_value = "w1,w2,w3,w4,w5,w6,w7,w8")]
    workloads: Vec<String>,
    /// Do not try cold reads (dropping the page cache needs root).
    #[arg(long)]
    no_cold: bool,
}

/// One system of a durable workload.
#[derive(Clone, Copy, Debug)]
enum Sys {
    Wal(Variant),
    /// The default variant under `SyncPolicy::Batched` (`walsys::batched_policy`).
    WalBatched,
    Okay,
    Raft,
    RawGrow,
    RawZero,
}

impl Sys {
    fn name(self) -> String {
        match self {
            Sys::Wal(v) => match (v.inline, v.align) {
                (false, 4096) => "wal (default)".into(),
                (false, a) => format!("wal align{a}"),
                (true, 4096) => "wal inline".into(),
                (true, a) => format!("wal inline align{a}"),
            },
            Sys::WalBatched => "wal Batched(200 us, 64)".into(),
            Sys::Okay => "okaywal".into(),
            Sys::Raft => "raft-engine".into(),
            Sys::RawGrow => "raw grow".into(),
            Sys::RawZero => "raw prezeroed".into(),
        }
    }

    fn is_raw(self) -> bool {
        matches!(self, Sys::RawGrow | Sys::RawZero)
    }
}

struct Ctx {
    args: Args,
    base: tempfile::TempDir,
    secs: f64,
    records: u64,
    runs: u64,
    rows: Vec<Row>,
    /// W4's logs, kept for W6 and W7: (system name, directory).
    kept: Vec<(String, PathBuf)>,
    cold: bool,
}

impl Ctx {
    fn fresh(&mut self, label: &str) -> PathBuf {
        self.runs += 1;
        let safe: String = label
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        self.base.path().join(format!("{:04}-{safe}", self.runs))
    }

    fn dur(&self) -> Duration {
        Duration::from_secs_f64(self.secs)
    }

    fn wal_variants(&self) -> Vec<Variant> {
        let fs: &[bool] = match self.args.fs {
            FsChoice::Thread => &[false],
            FsChoice::Inline => &[true],
            FsChoice::Both => &[false, true],
        };
        let mut v = Vec::new();
        for &inline in fs {
            for align in [4096, 8] {
                v.push(Variant { inline, align });
            }
        }
        v
    }

    fn row(&mut self, workload: &str, system: &str, unit: &str, ratio_to: &str) -> &mut Row {
        let i = match self
            .rows
            .iter()
            .position(|r| r.workload == workload && r.system == system)
        {
            Some(i) => i,
            None => {
                self.rows.push(Row {
                    workload: workload.into(),
                    system: system.into(),
                    unit: unit.into(),
                    ratio_to: ratio_to.into(),
                    note: String::new(),
                    samples: Vec::new(),
                });
                self.rows.len() - 1
            }
        };
        &mut self.rows[i]
    }

    /// A run that produced no sample: say why on the console and in the
    /// row's note.
    fn failed(&mut self, workload: &str, system: &str, rep: usize, unit: &str, why: &str) {
        progress(workload, system, rep, why);
        self.note(workload, system, unit, why);
    }

    fn note(&mut self, workload: &str, system: &str, unit: &str, note: &str) {
        let r = self.row(workload, system, unit, "");
        if !r.note.contains(note) {
            if !r.note.is_empty() {
                r.note.push_str("; ");
            }
            r.note.push_str(note);
        }
    }

    fn find(&self, workload_prefix: &str, system: &str) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.workload.starts_with(workload_prefix) && r.system == system)
    }
}

fn rotated<T: Copy>(v: &[T], rep: usize) -> Vec<T> {
    let n = v.len().max(1);
    (0..v.len()).map(|i| v[(i + rep) % n]).collect()
}

fn sample(rep: usize, value: f64, run: &Run) -> Sample {
    let mut lat = run.lat_ns.clone();
    lat.sort_unstable();
    Sample {
        rep,
        value,
        records: run.records,
        secs: run.secs,
        p50_us: percentile_us(&lat, 50.0),
        p99_us: percentile_us(&lat, 99.0),
        records_per_fsync: run.records_per_fsync,
        switches_per_call: common::last_drive_switches_per_call(run.lat_ns.len() as u64),
        ratio: None,
    }
}

fn rate(run: &Run) -> f64 {
    if run.secs > 0.0 {
        run.records as f64 / run.secs
    } else {
        0.0
    }
}

fn remove(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
}

fn progress(w: &str, sys: &str, rep: usize, what: &str) {
    eprintln!("  {w} rep {rep} {sys}: {what}");
}

/// W1, W2, W3, W5: `threads` writers, each append durable, for `secs`.
fn durable(ctx: &mut Ctx, workload: &str, threads: usize, size: usize, prezero: u64) {
    eprintln!("{workload}");
    let mut systems: Vec<Sys> = ctx.wal_variants().into_iter().map(Sys::Wal).collect();
    systems.extend([Sys::WalBatched, Sys::Okay, Sys::Raft, Sys::RawGrow, Sys::RawZero]);
    for s in &systems {
        ctx.row(workload, &s.name(), "rec/s", "best raw");
    }
    for rep in 0..ctx.args.reps {
        let mut got: Vec<(Sys, Sample)> = Vec::new();
        for sys in rotated(&systems, rep) {
            let dir = ctx.fresh(&sys.name());
            let dur = ctx.dur();
            let r = match sys {
                Sys::Wal(v) => walsys::durable(&dir, v, false, threads, size, dur),
                Sys::WalBatched => walsys::durable(&dir, Variant::DEFAULT, true, threads, size, dur),
                Sys::Okay => okay::durable(&dir, threads, size, dur),
                Sys::Raft => raft::durable(&dir, threads, size, dur),
                Sys::RawGrow => raw::durable(&dir, threads, size, dur, None),
                Sys::RawZero => raw::durable(&dir, threads, size, dur, Some(prezero)),
            };
            remove(&dir);
            match r {
                Ok(run) => {
                    progress(workload, &sys.name(), rep, &format!("{:.0} rec/s", rate(&run)));
                    got.push((sys, sample(rep, rate(&run), &run)));
                }
                Err(e) => ctx.failed(workload, &sys.name(), rep, "rec/s", &format!("error: {e}")),
            }
        }
        let limit = got
            .iter()
            .filter(|(s, _)| s.is_raw())
            .map(|(_, s)| s.value)
            .fold(0.0, f64::max);
        for (sys, mut s) in got {
            s.ratio = (limit > 0.0).then(|| s.value / limit);
            ctx.row(workload, &sys.name(), "rec/s", "best raw").samples.push(s);
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum BulkSys {
    Wal,
    WalBatch,
    /// `append` per record with `Options::write_buffer_bytes = 1 MiB`.
    WalBuffered,
    Okay,
    Raft,
    Raw(raw::Bulk),
}

impl BulkSys {
    fn name(self) -> String {
        match self {
            BulkSys::Wal => "wal (default)".into(),
            BulkSys::WalBatch => "wal append_batch(1024)".into(),
            BulkSys::WalBuffered => "wal write_buffer(1 MiB)".into(),
            BulkSys::Okay => "okaywal".into(),
            BulkSys::Raft => "raft-engine".into(),
            BulkSys::Raw(raw::Bulk::Grow) => "raw grow".into(),
            BulkSys::Raw(raw::Bulk::Prezeroed) => "raw prezeroed".into(),
            BulkSys::Raw(raw::Bulk::Buffered) => "raw buffered".into(),
        }
    }
}

/// W4: bulk load, one sync at the end. Keeps the last repetition's logs.
fn bulk(ctx: &mut Ctx, workload: &str) {
    eprintln!("{workload}");
    let n = ctx.records;
    let systems = [
        BulkSys::Wal,
        BulkSys::WalBatch,
        BulkSys::WalBuffered,
        BulkSys::Okay,
        BulkSys::Raft,
        BulkSys::Raw(raw::Bulk::Grow),
        BulkSys::Raw(raw::Bulk::Prezeroed),
        BulkSys::Raw(raw::Bulk::Buffered),
    ];
    for s in &systems {
        ctx.row(workload, &s.name(), "rec/s", "best naive raw");
    }
    for rep in 0..ctx.args.reps {
        let last = rep + 1 == ctx.args.reps;
        let mut got: Vec<(BulkSys, Sample)> = Vec::new();
        for sys in rotated(&systems, rep) {
            let dir = ctx.fresh(&sys.name());
            let r = match sys {
                BulkSys::Wal => walsys::bulk(&dir, n, 256, 1, 0),
                BulkSys::WalBatch => walsys::bulk(&dir, n, 256, 1024, 0),
                BulkSys::WalBuffered => walsys::bulk(&dir, n, 256, 1, 1 << 20),
                BulkSys::Okay => okay::bulk(&dir, n, 256),
                BulkSys::Raft => raft::bulk(&dir, n, 256),
                BulkSys::Raw(how) => raw::bulk(&dir, n, 256, how),
            };
            let keep = last
                && r.is_ok()
                && matches!(
                    sys,
                    BulkSys::Wal | BulkSys::Okay | BulkSys::Raft | BulkSys::Raw(raw::Bulk::Grow)
                );
            if keep {
                ctx.kept.push((sys.name(), dir.clone()));
                let bytes = common::dir_bytes(&dir);
                ctx.note(workload, &sys.name(), "rec/s", &format!("{} MiB on disk", bytes >> 20));
            } else {
                remove(&dir);
            }
            match r {
                Ok(run) => {
                    progress(workload, &sys.name(), rep, &format!("{:.0} rec/s", rate(&run)));
                    got.push((sys, sample(rep, rate(&run), &run)));
                }
                Err(e) => ctx.failed(workload, &sys.name(), rep, "rec/s", &format!("error: {e}")),
            }
        }
        let limit = got
            .iter()
            .filter(|(s, _)| matches!(s, BulkSys::Raw(raw::Bulk::Grow | raw::Bulk::Prezeroed)))
            .map(|(_, s)| s.value)
            .fold(0.0, f64::max);
        for (sys, mut s) in got {
            s.ratio = (limit > 0.0).then(|| s.value / limit);
            ctx.row(workload, &sys.name(), "rec/s", "best naive raw")
                .samples
                .push(s);
        }
    }
}

fn kept(ctx: &Ctx, name: &str) -> Option<PathBuf> {
    ctx.kept.iter().find(|(n, _)| n == name).map(|(_, d)| d.clone())
}

/// W6: reopen W4's logs and read every record in order, warm and cold.
fn read_back(ctx: &mut Ctx, workload_base: &str) {
    let systems = ["wal (default)", "okaywal", "raft-engine", "raw grow"];
    let modes: &[bool] = if ctx.cold { &[false, true] } else { &[false] };
    for &cold in modes {
        let workload = format!("{workload_base} {}", if cold { "cold" } else { "warm" });
        eprintln!("{workload}");
        for s in systems {
            let name = if s == "raw grow" { "raw read" } else { s };
            ctx.row(&workload, name, "rec/s", "raw read");
        }
        for rep in 0..ctx.args.reps {
            let mut got: Vec<(&str, Sample)> = Vec::new();
            for sys in rotated(&systems, rep) {
                let name = if sys == "raw grow" { "raw read" } else { sys };
                let Some(dir) = kept(ctx, sys) else {
                    ctx.note(&workload, name, "rec/s", "no W4 log");
                    continue;
                };
                if cold && !common::drop_caches() {
                    ctx.note(&workload, name, "rec/s", "drop_caches failed");
                    continue;
                }
                let r = match sys {
                    "wal (default)" => walsys::read_all(&dir),
                    "okaywal" => okay::read_all(&dir),
                    "raft-engine" => raft::read_all(&dir),
                    _ => raw::read_all(&dir),
                };
                match r {
                    Ok(run) if run.records >= ctx.records => {
                        progress(&workload, name, rep, &format!("{:.0} rec/s", rate(&run)));
                        got.push((name, sample(rep, rate(&run), &run)));
                    }
                    Ok(run) => {
                        let msg = format!("read {} of {} records", run.records, ctx.records);
                        ctx.failed(&workload, name, rep, "rec/s", &msg);
                    }
                    Err(e) => ctx.failed(&workload, name, rep, "rec/s", &format!("error: {e}")),
                }
            }
            let limit = got.iter().find(|(n, _)| *n == "raw read").map_or(0.0, |(_, s)| s.value);
            for (name, mut s) in got {
                s.ratio = (limit > 0.0).then(|| s.value / limit);
                ctx.row(&workload, name, "rec/s", "raw read").samples.push(s);
            }
        }
    }
}

/// W7: reopen a cleanly closed log, time until the first durable append.
fn reopen(ctx: &mut Ctx, workload: &str) {
    eprintln!("{workload}");
    // Scaling logs for this WAL: (bytes, segment size).
    let scale: &[(u64, u64)] = if ctx.args.quick {
        &[(8 << 20, 512 << 10), (128 << 20, 8 << 20), (128 << 20, 512 << 10)]
    } else {
        &[(64 << 20, 4 << 20), (1 << 30, 64 << 20), (1 << 30, 4 << 20)]
    };
    let mut systems: Vec<(String, PathBuf)> = Vec::new();
    for (name, dir) in ctx.kept.clone() {
        if name != "raw grow" {
            let bytes = common::dir_bytes(&dir);
            let label = format!("{name} (W4 log)");
            ctx.note(workload, &label, "ms", &format!("{} MiB", bytes >> 20));
            systems.push((label, dir));
        }
    }
    for &(bytes, seg) in scale {
        let dir = ctx.fresh("w7-log");
        match walsys::build(&dir, bytes, seg) {
            Ok(segments) => {
                let label = format!("wal {} MiB / {} segments", bytes >> 20, segments);
                ctx.note(
                    workload,
                    &label,
                    "ms",
                    &format!("segment_size {} MiB", seg as f64 / 1048576.0),
                );
                systems.push((label, dir));
            }
            Err(e) => eprintln!("  {workload}: building a {bytes}-byte log failed: {e}"),
        }
    }
    for (label, _) in &systems {
        ctx.row(workload, label, "ms", "");
    }
    // What a clean reopen costs in fsyncs (each a device flush), apart from
    // the timing: counted once per log of this WAL.
    for (label, dir) in &systems {
        if label.starts_with("wal") {
            match walsys::open_fsyncs(dir) {
                Ok([(of, od), (af, ad)]) => {
                    let name = format!("{label}: fsyncs in the open");
                    let run = Run {
                        records: 1,
                        ..Run::default()
                    };
                    let mut s = sample(0, (of + od) as f64, &run);
                    s.records_per_fsync = None;
                    ctx.row(workload, &name, "fsyncs", "").samples.push(s);
                    ctx.note(
                        workload,
                        &name,
                        "fsyncs",
                        &format!("open: {of} file + {od} dir; first durable append: {af} file + {ad} dir"),
                    );
                }
                Err(e) => eprintln!("  {workload}: counting the fsyncs of {label}: {e}"),
            }
        }
    }
    for rep in 0..ctx.args.reps {
        for (label, dir) in rotated(
            &systems
                .iter()
                .map(|(l, d)| (l.as_str(), d.as_path()))
                .collect::<Vec<_>>(),
            rep,
        ) {
            let r: BResult<(f64, Option<u64>)> = if label.starts_with("okaywal") {
                okay::reopen_append(dir).map(|s| (s, None))
            } else if label.starts_with("raft-engine") {
                raft::reopen_append(dir).map(|s| (s, None))
            } else {
                walsys::reopen_append(dir).map(|(s, n)| (s, Some(n)))
            };
            match r {
                Ok((secs, segs)) => {
                    progress(workload, label, rep, &format!("{:.2} ms", secs * 1e3));
                    let run = Run {
                        records: 1,
                        secs,
                        ..Run::default()
                    };
                    let mut s = sample(rep, secs * 1e3, &run);
                    s.records_per_fsync = None;
                    if let Some(n) = segs {
                        s.records = n;
                    }
                    ctx.row(workload, label, "ms", "").samples.push(s);
                }
                Err(e) => ctx.failed(workload, label, rep, "ms", &format!("error: {e}")),
            }
        }
    }
    for (label, dir) in systems {
        if label.starts_with("wal ") && label.contains("segments") {
            remove(&dir);
        }
    }
}

/// W8: W2 while the log is pruned and truncated in the background.
fn churn(ctx: &mut Ctx, workload: &str) {
    eprintln!("{workload}");
    let systems = ["wal (default)", "okaywal", "raft-engine"];
    for s in systems {
        ctx.row(workload, s, "us", "own W2 p99");
    }
    ctx.note(
        workload,
        "wal (default)",
        "us",
        "1 MiB segments; prune_through(next-1000) every 10 ms, truncate_after(last-16) every 40 ms",
    );
    ctx.note(workload, "okaywal", "us", "checkpoint_active every 10 ms");
    ctx.note(
        workload,
        "raft-engine",
        "us",
        "4 MiB files; compact_to + purge_expired_files every 10 ms",
    );
    for rep in 0..ctx.args.reps {
        for sys in rotated(&systems, rep) {
            let dir = ctx.fresh(sys);
            let dur = ctx.dur().max(Duration::from_millis(500));
            let r = match sys {
                "wal (default)" => walsys::churn(&dir, 16, 256, dur, 1 << 20),
                "okaywal" => okay::churn(&dir, 16, 256, dur),
                _ => raft::churn(&dir, 16, 256, dur),
            };
            remove(&dir);
            match r {
                Ok(run) => {
                    let mut s = sample(rep, 0.0, &run);
                    s.value = s.p99_us.unwrap_or(f64::NAN);
                    let base = ctx.find("W2", sys).and_then(Row::p99);
                    s.ratio = base.map(|b| s.value / b);
                    let extra = run.note.clone().unwrap_or_default();
                    progress(
                        workload,
                        sys,
                        rep,
                        &format!("p99 {:.0} us, {:.0} rec/s {extra}", s.value, rate(&run)),
                    );
                    if rep + 1 == ctx.args.reps && !extra.is_empty() {
                        ctx.note(workload, sys, "us", &format!("last run: {extra}"));
                    }
                    ctx.row(workload, sys, "us", "own W2 p99").samples.push(s);
                }
                Err(e) => ctx.failed(workload, sys, rep, "us", &format!("error: {e}")),
            }
        }
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let args = Args::parse();
    let started = Instant::now();
    let base = tempfile::Builder::new().prefix("wal-bench-").tempdir_in(&args.dir)?;
    let cold = !args.no_cold && common::drop_caches();
    let mut machine = report::machine(base.path(), cold);
    let secs = args.secs.unwrap_or(if args.quick { 0.25 } else { 3.0 });
    let records = args.records.unwrap_or(if args.quick { 100_000 } else { 1_000_000 });
    eprintln!(
        "bench: {} cpus, {}, kernel {}, {}; load {}; cold reads {}",
        machine.cpus,
        machine.memory,
        machine.kernel,
        machine.filesystem,
        machine.loadavg_start,
        if cold { "on" } else { "n/a (drop_caches failed)" }
    );
    let mut ctx = Ctx {
        args,
        base,
        secs,
        records,
        runs: 0,
        rows: Vec::new(),
        kept: Vec::new(),
        cold,
    };
    let (zero_small, zero_big) = if ctx.args.quick {
        (16 << 20, 64 << 20)
    } else {
        (64 << 20, 512 << 20)
    };
    let want: Vec<String> = ctx.args.workloads.iter().map(|w| w.trim().to_lowercase()).collect();
    let has = |w: &str| want.iter().any(|x| x == w);
    if has("w1") {
        durable(&mut ctx, "W1 1 writer, 256 B, durable", 1, 256, zero_small);
    }
    if has("w2") {
        durable(&mut ctx, "W2 16 writers, 256 B, durable", 16, 256, zero_small);
    }
    if has("w3") {
        durable(&mut ctx, "W3 64 writers, 256 B, durable", 64, 256, zero_small);
    }
    if has("w4") {
        let w = format!("W4 bulk {} x 256 B, one sync", report::num(records as f64));
        bulk(&mut ctx, &w);
    }
    if has("w5") {
        durable(&mut ctx, "W5 1 writer, 64 KiB, durable", 1, 64 << 10, zero_big);
    }
    if has("w6") {
        read_back(&mut ctx, "W6 reopen + read all");
    }
    if has("w7") {
        reopen(&mut ctx, "W7 reopen to first durable append");
    }
    if has("w8") {
        churn(&mut ctx, "W8 16 writers + prune/truncate, p99");
    }
    machine.loadavg_end = report::loadavg();
    let total_secs = started.elapsed().as_secs_f64();
    println!(
        "\n{} cpus, {}, kernel {}, {}; load at start {}, at end {}; cold reads {}; {} reps; {:.0} s total\n",
        machine.cpus,
        machine.memory,
        machine.kernel,
        machine.filesystem,
        machine.loadavg_start,
        machine.loadavg_end,
        if cold { "on" } else { "n/a" },
        ctx.args.reps,
        total_secs
    );
    println!("{}", report::markdown(&ctx.rows));
    if let Some(path) = &ctx.args.json {
        let rep = report::Report {
            machine,
            settings: serde_json::to_value(&ctx.args)?,
            total_secs,
            rows: ctx.rows.clone(),
        };
        std::fs::write(path, serde_json::to_string_pretty(&rep)?)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
