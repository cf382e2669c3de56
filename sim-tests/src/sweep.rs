//! Running many seeds, on one thread or several. Each seed runs in its own
//! madsim runtime, which lives on the thread that runs it: the simulation
//! of a seed is deterministic whatever thread runs it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::api::Opener;
use crate::config::Overrides;
use crate::coverage::Coverage;
use crate::runner::{check_seed_with, Report, RunEnd};

/// The result of a sweep.
#[derive(Debug, Default)]
pub struct Sweep {
    /// Seeds that passed.
    pub passed: u64,
    /// Of those, how many completed the heal phase.
    pub healed: u64,
    /// Of those, how many ended early on reported damage they could not
    /// repair (explained by the damage ledger, so not a failure).
    pub ended_on_damage: u64,
    /// Seeds in which reported damage was repaired and the run went on.
    pub repaired: u64,
    /// The seeds that ended on reported damage, with why (sorted by seed).
    pub ended: Vec<(u64, String)>,
    /// Failing runs, by seed.
    pub failed: Vec<Report>,
    /// Coverage summed over every seed.
    pub coverage: Coverage,
}

/// Runs `count` seeds from `start` on `jobs` threads against the log
/// `opener` opens, each under the `base` overrides (e.g. a fault class
/// switched off for the whole sweep); `progress` is called after each seed.
pub fn run(
    start: u64,
    count: u64,
    jobs: usize,
    base: Overrides,
    opener: Opener,
    progress: &(dyn Fn(&Report) + Sync),
) -> Sweep {
    let next = AtomicU64::new(0);
    let out = Mutex::new(Sweep::default());
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= count {
            break;
        }
        let seed = start.wrapping_add(i);
        let r = check_seed_with(seed, base, opener.clone());
        progress(&r);
        let mut s = out.lock().unwrap_or_else(|e| e.into_inner());
        s.coverage.merge(&r.coverage);
        if r.coverage.get(crate::coverage::Mark::DamageRepaired) > 0 {
            s.repaired += 1;
        }
        if r.passed() {
            s.passed += 1;
            match r.end {
                RunEnd::Healed => s.healed += 1,
                RunEnd::ReportedDamage => {
                    s.ended_on_damage += 1;
                    s.ended.push((r.seed, r.end_why.clone()));
                }
                RunEnd::Failed => {}
            }
        } else {
            s.failed.push(r);
        }
    };
    if jobs <= 1 {
        work();
    } else {
        std::thread::scope(|sc| {
            for _ in 0..jobs {
                sc.spawn(work);
            }
        });
    }
    let mut s = out.into_inner().unwrap_or_else(|e| e.into_inner());
    s.failed.sort_by_key(|r| r.seed);
    s.ended.sort();
    s
}

impl Sweep {
    /// Adds another sweep's results (a soak runs chunk after chunk).
    pub fn merge(&mut self, o: Sweep) {
        self.passed += o.passed;
        self.healed += o.healed;
        self.ended_on_damage += o.ended_on_damage;
        self.repaired += o.repaired;
        self.ended.extend(o.ended);
        self.failed.extend(o.failed);
        self.coverage.merge(&o.coverage);
    }
}
