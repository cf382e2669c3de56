//! Thread interleavings of the engine's synchronous critical sections,
//! explored by shuttle.
//!
//! The madsim simulation runs every task on one thread and switches only at
//! an `.await`, so a race between two synchronous critical sections (two
//! `std::sync::Mutex` sections, say) is invisible to it. Here the engine is
//! the `wal-shuttle` crate: wal's own sources compiled with shuttle's
//! `Mutex` and atomics (see `wal/src/sync.rs`), so that every lock and
//! atomic access is a point where shuttle's seeded scheduler may switch to
//! another thread. Real (shuttle) threads run appends, batch appends, a
//! prune, a truncation, an iterator and a sync against one `Wal` on a
//! fault-free SimFs whose every operation also yields; rotation happens by
//! size. The checks are at the end of each execution (see `check`).
//!
//! * `cargo test -p sim-tests --test threads`: fixed seeds and budgets.
//! * A failure prints shuttle's failing schedule (a string) and the
//!   scenario; replay it with
//!   `THREADS_REPLAY='<schedule>' THREADS_SCENARIO=<scenario> cargo test -p sim-tests --test threads replay -- --nocapture`.
//!   A random-scheduler run can also be repeated whole with
//!   `SHUTTLE_RANDOM_SEED=<seed>` (shuttle reads it).
//! * `THREADS_ITERATIONS=<n>` widens the budget of the clean tests.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::AtomicUsize as StdAtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use shuttle::future::block_on;
use shuttle::scheduler::{PctScheduler, RandomScheduler, ReplayScheduler, Scheduler};
use shuttle::sync::atomic::{AtomicU64, Ordering};
use shuttle::sync::Mutex;
use shuttle::{thread, Config, Runner};
use simfs::{SimClock, SimConfig, SimFs};
use wal_shuttle::{Error, Options, SyncPolicy, Wal};

const DIR: &str = "/log";

/// A SimFs clock whose every sleep yields to shuttle's scheduler, so every
/// filesystem operation is a point where another thread may run.
struct YieldClock;

impl SimClock for YieldClock {
    fn now_ns(&self) -> u64 {
        0
    }
    fn sleep(&self, _d: Duration) -> BoxFuture<'static, ()> {
        Box::pin(shuttle::future::yield_now())
    }
}

/// Which engine configuration an execution runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scenario {
    /// `SyncPolicy::Always`: group commit, every ack durable.
    Always,
    /// `SyncPolicy::Manual` with the write buffer (the lean admission path,
    /// `try_append_buffered`) and a thread calling `sync`.
    ManualBuffered,
}

impl Scenario {
    fn parse(s: &str) -> Scenario {
        match s {
            "Always" => Scenario::Always,
            "ManualBuffered" => Scenario::ManualBuffered,
            other => panic!("unknown scenario {other:?} (Always, ManualBuffered)"),
        }
    }

    fn options(self) -> Options {
        // A few records per segment: appends roll segments all the time.
        let base = Options::default()
            .segment_size_bytes(4096)
            .segment_max_records(3)
            .durable_alignment_bytes(8)
            .preallocate_bytes(0);
        match self {
            Scenario::Always => base,
            Scenario::ManualBuffered => base.sync_policy(SyncPolicy::Manual).write_buffer_bytes(96),
        }
    }
}

/// Appender threads, and appends each makes (odd ones are batches of 2).
const WRITERS: u64 = 3;
const APPENDS: u64 = 3;

fn payload(writer: u64, seq: u64) -> Vec<u8> {
    format!("w{writer}-s{seq}").into_bytes()
}

fn parse(p: &[u8]) -> (u64, u64) {
    let s = std::str::from_utf8(p).unwrap_or_else(|_| panic!("payload is not text: {p:?}"));
    let (w, q) = s
        .strip_prefix('w')
        .and_then(|s| s.split_once("-s"))
        .unwrap_or_else(|| panic!("payload {s:?} names no writer"));
    (w.parse().unwrap(), q.parse().unwrap())
}

/// What the threads saw, for the checks after they joined.
#[derive(Default)]
struct Seen {
    /// Acknowledged appends: (index, payload).
    acked: Vec<(u64, Vec<u8>)>,
    /// `k` of every `prune_through(k)` that returned `Ok`.
    pruned_through: Vec<u64>,
    /// `from` of every `truncate_from(from)` that returned `Ok`.
    truncated_from: Vec<u64>,
    /// What the iterator served.
    read: Vec<(u64, Vec<u8>)>,
}

/// One execution: every thread against one `Wal`, then the checks.
fn execution(scenario: Scenario) {
    let cfg = SimConfig {
        latency_us: (1, 1),
        clock: Arc::new(YieldClock),
        ..SimConfig::default()
    };
    let fs = SimFs::with_config(7, cfg);
    let wal = Arc::new(block_on(Wal::open(fs.clone(), Path::new(DIR), scenario.options())).unwrap());
    let seen = Arc::new(Mutex::new(Seen::default()));
    // Truncations started and finished (for the sync thread's check).
    let trunc_started = Arc::new(AtomicU64::new(0));
    let trunc_done = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();

    for w in 0..WRITERS {
        let (wal, seen) = (wal.clone(), seen.clone());
        handles.push(thread::spawn(move || {
            let mut seq = 0;
            for a in 0..APPENDS {
                if a % 2 == 1 {
                    let recs = vec![payload(w, seq), payload(w, seq + 1)];
                    let first = block_on(wal.append_batch(recs.clone())).unwrap();
                    let mut s = seen.lock().unwrap();
                    for (i, r) in recs.into_iter().enumerate() {
                        s.acked.push((first + i as u64, r));
                    }
                    seq += 2;
                } else {
                    let r = payload(w, seq);
                    let i = block_on(wal.append(r.clone())).unwrap();
                    seen.lock().unwrap().acked.push((i, r));
                    seq += 1;
                }
            }
        }));
    }

    {
        // Prune through the middle of what is there (by segment), later
        // maybe through the end (which empties the log).
        let (wal, seen) = (wal.clone(), seen.clone());
        handles.push(thread::spawn(move || {
            for _ in 0..2 {
                let k = wal.next_index().saturating_sub(1) / 2 + 1;
                match block_on(wal.prune_through(k)) {
                    Ok(_) => seen.lock().unwrap().pruned_through.push(k),
                    Err(e) => panic!("prune_through({k}): {e}"),
                }
            }
        }));
    }

    {
        let (wal, seen) = (wal.clone(), seen.clone());
        let (started, done) = (trunc_started.clone(), trunc_done.clone());
        handles.push(thread::spawn(move || {
            let (first, next) = (wal.first_index(), wal.next_index());
            let from = next.saturating_sub(2).max(first);
            started.fetch_add(1, Ordering::SeqCst);
            match block_on(wal.truncate_from(from)) {
                Ok(()) => seen.lock().unwrap().truncated_from.push(from),
                // A prune may have moved the first index past `from`.
                Err(Error::OutOfRange { .. }) => {}
                Err(e) => panic!("truncate_from({from}): {e}"),
            }
            done.fetch_add(1, Ordering::SeqCst);
        }));
    }

    {
        let (wal, seen) = (wal.clone(), seen.clone());
        handles.push(thread::spawn(move || {
            let Ok(mut it) = wal.iter_from(wal.first_index()) else {
                // The first index moved between the two calls (a prune).
                return;
            };
            let mut got = Vec::new();
            for _ in 0..6 {
                match block_on(it.next()) {
                    Some(Ok(rec)) => got.push(rec),
                    None => thread::yield_now(),
                    // A prune revoked the lease, or truncation took the rest.
                    Some(Err(_)) => break,
                }
            }
            seen.lock().unwrap().read.extend(got);
        }));
    }

    if scenario == Scenario::ManualBuffered {
        let wal = wal.clone();
        let (started, done) = (trunc_started.clone(), trunc_done.clone());
        handles.push(thread::spawn(move || {
            for _ in 0..2 {
                let before = (started.load(Ordering::SeqCst), done.load(Ordering::SeqCst));
                let next = wal.next_index();
                block_on(wal.sync()).unwrap();
                let after = started.load(Ordering::SeqCst);
                // Without a truncation in between, everything acknowledged
                // before the sync is durable after it.
                if before.0 == before.1 && before.0 == after {
                    let durable = wal.durable_next();
                    assert!(durable >= next, "sync returned with durable_next {durable} < {next}");
                }
            }
        }));
    } else {
        let wal = wal.clone();
        handles.push(thread::spawn(move || block_on(wal.rotate()).unwrap()));
    }

    for h in handles {
        h.join().unwrap();
    }
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    let wal = Arc::into_inner(wal).expect("every thread dropped its Wal");
    check(scenario, &fs, wal, &seen);
}

/// The checks after every thread joined.
fn check(scenario: Scenario, fs: &SimFs, wal: Wal<SimFs>, seen: &Seen) {
    let ctx = || format!("scenario {scenario:?}");
    let first = wal.first_index();
    let next = wal.next_index();
    let log = collect(&wal).unwrap_or_else(|e| panic!("{}: reading the log: {e}", ctx()));

    // Dense: the iterator serves first..next, every index once.
    let indices: Vec<u64> = log.iter().map(|(i, _)| *i).collect();
    assert_eq!(
        indices,
        (first..next).collect::<Vec<_>>(),
        "{}: indices not dense",
        ctx()
    );

    // Every record in the log is an acknowledged append, at the index its
    // ack named; none twice.
    let acked: HashMap<&[u8], u64> = seen.acked.iter().map(|(i, p)| (p.as_slice(), *i)).collect();
    assert_eq!(acked.len(), seen.acked.len(), "{}: a payload acked twice", ctx());
    for (i, p) in &log {
        let (w, s) = parse(p);
        assert_eq!(
            acked.get(p.as_slice()),
            Some(i),
            "{}: record w{w}-s{s} is at index {i}, but its append was acknowledged at {:?}",
            ctx(),
            acked.get(p.as_slice())
        );
    }

    // Per writer, index order is write order.
    let mut last: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for (i, p) in &log {
        let (w, s) = parse(p);
        if let Some(&(pi, ps)) = last.get(&w) {
            assert!(ps < s, "{}: writer {w}: s{ps} at {pi} but s{s} at {i}", ctx());
        }
        last.insert(w, (*i, s));
    }

    // No lost acknowledgement: an acked record is in the log at its index
    // unless an `Ok` prune through it or truncation at or below it took it
    // (a truncation also lets a later append reuse the index).
    let in_log: HashMap<u64, &[u8]> = log.iter().map(|(i, p)| (*i, p.as_slice())).collect();
    for (i, p) in &seen.acked {
        if in_log.get(i) == Some(&p.as_slice()) {
            continue;
        }
        let pruned = seen.pruned_through.iter().any(|&k| *i <= k);
        let truncated = seen.truncated_from.iter().any(|&f| *i >= f);
        assert!(
            truncated || (pruned && !in_log.contains_key(i)),
            "{}: acknowledged {} at {i} is lost (log has {:?}; pruned through {:?}, truncated from {:?})",
            ctx(),
            String::from_utf8_lossy(p),
            in_log.get(i).map(|p| String::from_utf8_lossy(p)),
            seen.pruned_through,
            seen.truncated_from
        );
    }

    // The iterator served only acknowledged records at their indices, in
    // order.
    for w in seen.read.windows(2) {
        assert!(
            w[0].0 < w[1].0,
            "{}: iterator went back from {} to {}",
            ctx(),
            w[0].0,
            w[1].0
        );
    }
    for (i, p) in &seen.read {
        assert_eq!(
            acked.get(p.as_slice()),
            Some(i),
            "{}: the iterator served {} at {i}",
            ctx(),
            String::from_utf8_lossy(p)
        );
    }

    // No phantom segment: the segments tile exactly first..next (the first
    // one may start below the first index: an exact prune leaves the
    // records below it in the file).
    let segs = block_on(wal.segments());
    let mut expect = first;
    if let Some(s) = segs.first() {
        assert!(
            s.first_index <= first,
            "{}: the first segment starts above the first index {first}: {segs:?}",
            ctx()
        );
        expect = s.first_index;
    }
    for (n, s) in segs.iter().enumerate() {
        assert_eq!(
            s.first_index,
            expect,
            "{}: segment {} starts off the range: {segs:?}",
            ctx(),
            s.name
        );
        match s.last_index {
            Some(l) => expect = l + 1,
            None => assert!(
                !s.sealed && n + 1 == segs.len(),
                "{}: empty segment {} that is not the active one: {segs:?}",
                ctx(),
                s.name
            ),
        }
    }
    assert_eq!(
        expect,
        next,
        "{}: segments end at {expect}, the log at {next}: {segs:?}",
        ctx()
    );

    // What a reopen recovers is what this `Wal` served.
    block_on(wal.close()).unwrap_or_else(|e| panic!("{}: close: {e}", ctx()));
    let wal = block_on(Wal::open(fs.clone(), Path::new(DIR), scenario.options()))
        .unwrap_or_else(|e| panic!("{}: reopen: {e}", ctx()));
    let again = collect(&wal).unwrap();
    assert_eq!(again, log, "{}: a reopen recovered another log", ctx());
}

fn collect(wal: &Wal<SimFs>) -> wal_shuttle::Result<Vec<(u64, Vec<u8>)>> {
    let mut it = wal.iter_from(wal.first_index())?;
    let mut out = Vec::new();
    while let Some(r) = block_on(it.next()) {
        out.push(r?);
    }
    Ok(out)
}

fn config() -> Config {
    let mut c = Config::new();
    // Shuttle's atomics are sequentially consistent (it says so once per
    // run otherwise): weak-memory reorderings are not explored.
    c.silence_warnings = true;
    // The engine's futures are large in debug builds: shuttle's default
    // stack per thread overflows.
    c.stack_size = 1 << 20;
    c
}

/// Runs `iterations` executions of `scenario` under `scheduler` and
/// returns how many ran; a failing one panics (after shuttle printed its
/// schedule).
fn run<S: Scheduler + 'static>(scheduler: S, scenario: Scenario) -> usize {
    eprintln!("scenario {scenario:?} (pass THREADS_SCENARIO={scenario:?} to replay a schedule printed below)");
    Runner::new(scheduler, config()).run(move || execution(scenario))
}

fn iterations(default: usize) -> usize {
    std::env::var("THREADS_ITERATIONS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// The planted bug's switch is process-wide and libtest runs tests on
/// several threads: every test holds this lock while it runs.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Seeds of the clean runs: fixed, so CI explores the same schedules.
const SEED: u64 = 0x5eed_0011;

fn clean(scheduler: impl Scheduler + 'static, scenario: Scenario, what: &str) {
    let _serial = serial();
    let start = Instant::now();
    let n = run(scheduler, scenario);
    println!("{what} {scenario:?}: {n} executions passed in {:.1?}", start.elapsed());
}

#[test]
fn random_always() {
    clean(
        RandomScheduler::new_from_seed(SEED, iterations(1000)),
        Scenario::Always,
        "random",
    );
}

#[test]
fn random_manual_buffered() {
    clean(
        RandomScheduler::new_from_seed(SEED, iterations(1000)),
        Scenario::ManualBuffered,
        "random",
    );
}

#[test]
fn pct_always() {
    clean(
        PctScheduler::new_from_seed(SEED, 3, iterations(1000)),
        Scenario::Always,
        "pct",
    );
}

#[test]
fn pct_manual_buffered() {
    clean(
        PctScheduler::new_from_seed(SEED, 3, iterations(1000)),
        Scenario::ManualBuffered,
        "pct",
    );
}

/// Replays a failing schedule: `THREADS_REPLAY='<schedule>'` (as shuttle
/// printed it) and `THREADS_SCENARIO=<scenario>`; `THREADS_SPLIT_ADMISSION=1`
/// plants the split admission bug first. Does nothing without
/// `THREADS_REPLAY`.
#[test]
fn replay() {
    let Ok(schedule) = std::env::var("THREADS_REPLAY") else {
        return;
    };
    let _serial = serial();
    let scenario = Scenario::parse(&std::env::var("THREADS_SCENARIO").unwrap_or_else(|_| "Always".into()));
    if std::env::var("THREADS_SPLIT_ADMISSION").is_ok_and(|v| v == "1") {
        wal_shuttle::testing::set_split_admission(true);
    }
    run(ReplayScheduler::new_from_encoded(schedule.trim()), scenario);
}

/// How many executions the planted bug may survive.
const SPLIT_BUDGET: usize = 200;

/// The planted "split admission" bug (`Inner::admit` drops the state lock
/// between assigning an index and enqueueing the request, no `.await` in
/// between) must turn the checker red, with both schedulers.
#[test]
fn split_admission_is_caught() {
    let _serial = serial();
    wal_shuttle::testing::set_split_admission(true);
    for (what, seed) in [("random", SEED), ("pct", SEED)] {
        let count = Arc::new(StdAtomicUsize::new(0));
        let c = count.clone();
        let start = Instant::now();
        let caught = catch_unwind(AssertUnwindSafe(|| {
            let f = move || {
                c.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                execution(Scenario::Always)
            };
            if what == "random" {
                Runner::new(RandomScheduler::new_from_seed(seed, SPLIT_BUDGET), config()).run(f)
            } else {
                Runner::new(PctScheduler::new_from_seed(seed, 3, SPLIT_BUDGET), config()).run(f)
            }
        }));
        let n = count.load(std::sync::atomic::Ordering::SeqCst);
        match caught {
            Err(_) => println!(
                "split admission caught by {what} (seed {seed:#x}) at execution {n} in {:.1?}",
                start.elapsed()
            ),
            Ok(_) => {
                wal_shuttle::testing::set_split_admission(false);
                panic!("split admission survived {n} {what} executions: the checker is too weak")
            }
        }
    }
    wal_shuttle::testing::set_split_admission(false);
}
