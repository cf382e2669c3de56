//! `sim`: runs many seeds of the WAL simulation in parallel.
//!
//! ```text
//! cargo run --release -p sim-tests --bin sim -- --seeds 2000 [--start S] [--jobs J] [--shrink]
//! cargo run --release -p sim-tests --bin sim -- --duration 30m --start 9000000   # soak
//! ```
//!
//! Each seed runs in its own madsim runtime on one of `--jobs` OS threads;
//! the simulation of a seed is deterministic whatever thread runs it. Ends
//! with `N passed, M failed` and the replay command of each failure; exits
//! non-zero if any seed failed.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use sim_tests::api::real_opener;
use sim_tests::broken::Bug;
use sim_tests::config::Overrides;
use sim_tests::runner::{replay_command, Report};
use sim_tests::{shrink, sweep};

/// Runs seeds of the WAL simulation.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// How many seeds to run.
    #[arg(long, default_value_t = 200)]
    seeds: u64,
    /// Soak: run seeds from `--start` on, in chunks of `--seeds`, until this
    /// much time has passed (e.g. `30m`, `2h`, `90s`); reports seeds run.
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// The first seed.
    #[arg(long, default_value_t = 0)]
    start: u64,
    /// Worker threads (default: available parallelism).
    #[arg(long)]
    jobs: Option<usize>,
    /// Shrink (up to 5) failing seeds and print their minimal configuration.
    #[arg(long)]
    shrink: bool,
    /// Do not draw a progress bar.
    #[arg(long)]
    quiet: bool,
    /// Switch fault classes off for the whole sweep: a bit mask (hex with
    /// 0x, or decimal) of `FaultClass` bits, e.g. 0x80 for SyncFail.
    #[arg(long)]
    mask_off: Option<String>,
    /// Run against a planted bug (proof of power), named as `Bug`'s Debug
    /// form, e.g. `Engine(RecoveryCutNotSynced)` or `Fs(NoFsync)`: the
    /// failures are the seeds that catch it.
    #[arg(long)]
    bug: Option<String>,
    /// Switch fault classes on in every seed (a bit mask like
    /// `--mask-off`), at the probabilities each seed drew.
    #[arg(long)]
    force: Option<String>,
    /// Write `seed trace_hash` (hex), one line per seed in seed order, to
    /// this file: two builds that simulate the same thing write the same
    /// file (a check for pure-performance changes).
    #[arg(long)]
    hashes: Option<std::path::PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let pb = if args.quiet {
        ProgressBar::hidden()
    } else if args.duration.is_some() {
        ProgressBar::new_spinner()
    } else {
        ProgressBar::new(args.seeds)
    };
    if let Ok(style) =
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} seeds ({per_sec}, eta {eta}) {msg}")
    {
        pb.set_style(style.progress_chars("=> "));
    }
    let started = Instant::now();
    let hashes = std::sync::Mutex::new(Vec::new());
    let progress = |r: &Report| {
        if args.hashes.is_some() {
            hashes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((r.seed, r.trace_hash));
        }
        if !r.passed() {
            pb.println(format!(
                "seed {} FAILED: {}\n  {}",
                r.seed,
                r.violations.first().map_or("", String::as_str),
                r.replay_command()
            ));
        }
        pb.inc(1);
    };
    let base = match args.mask_off.as_deref().map(|m| Overrides::parse(&format!("mask={m}"))) {
        None => Overrides::default(),
        Some(Ok(o)) => Overrides {
            mask: o.mask.map(|m| !m),
            ..Overrides::default()
        },
        Some(Err(e)) => {
            eprintln!("--mask-off: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut base = base;
    if let Some(f) = args.force.as_deref() {
        match Overrides::parse(&format!("force={f}")) {
            Ok(o) => base.force = o.force,
            Err(e) => {
                eprintln!("--force: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let opener = match args.bug.as_deref() {
        None => real_opener(),
        Some(name) => match Bug::ALL.iter().find(|b| format!("{b:?}") == name) {
            Some(b) => b.opener(),
            None => {
                let names: Vec<String> = Bug::ALL.iter().map(|b| format!("{b:?}")).collect();
                eprintln!("--bug: unknown {name:?} (one of {})", names.join(", "));
                return ExitCode::FAILURE;
            }
        },
    };
    let chunk = args.seeds.max(1);
    let mut result = sweep::run(args.start, chunk, jobs, base, opener.clone(), &progress);
    let mut seeds = chunk;
    if let Some(limit) = args.duration {
        while started.elapsed() < limit {
            let more = sweep::run(
                args.start.wrapping_add(seeds),
                chunk,
                jobs,
                base,
                opener.clone(),
                &progress,
            );
            result.merge(more);
            seeds += chunk;
        }
    }
    pb.finish_and_clear();
    let secs = started.elapsed().as_secs_f64();
    if let Some(path) = &args.hashes {
        let mut list = hashes.into_inner().unwrap_or_else(|e| e.into_inner());
        list.sort_unstable();
        let text: String = list.iter().map(|(s, h)| format!("{s} {h:016x}\n")).collect();
        if let Err(e) = std::fs::write(path, text) {
            eprintln!("--hashes: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    println!(
        "{} seeds (from {} to {}) in {:.1} s on {} threads: {:.1} seeds/s",
        seeds,
        args.start,
        args.start.wrapping_add(seeds - 1),
        secs,
        jobs,
        seeds as f64 / secs.max(1e-9)
    );
    println!("passed: {} healed", result.healed);
    println!(
        "ended on reported damage: {} (repaired damage and went on: {} seeds, {} repairs)",
        result.ended_on_damage,
        result.repaired,
        result.coverage.get(sim_tests::coverage::Mark::DamageRepaired)
    );
    for (seed, why) in result.ended.iter().take(10) {
        println!("  seed {seed}: {why}");
    }
    println!("{}", result.coverage);
    let missing = result.coverage.missing();
    if !missing.is_empty() {
        println!("not reached by this sweep: {}", missing.join(", "));
    }
    println!("{} passed, {} failed", result.passed, result.failed.len());
    for r in &result.failed {
        println!("  seed {}: {}", r.seed, r.violations.join(" | "));
        println!("    {}", r.replay_command());
    }
    if args.shrink {
        for r in result.failed.iter().take(5) {
            if let Some(s) = shrink::shrink(r.seed) {
                println!("seed {} shrunk in {} runs to:\n{}", r.seed, s.runs, s.report.config);
                println!("    {}", replay_command(r.seed, &s.overrides));
            }
        }
    }
    if result.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Parses `90s`, `30m`, `2h` or a plain number of seconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num
        .parse()
        .map_err(|_| format!("not a duration: {s:?} (try 90s, 30m, 2h)"))?;
    let secs = match unit {
        "" | "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => return Err(format!("unknown unit in {s:?} (use s, m or h)")),
    };
    Ok(Duration::from_secs(secs))
}
