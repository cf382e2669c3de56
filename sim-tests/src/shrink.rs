//! Shrinking a failing seed: switch fault classes off one at a time and cut
//! the round count while the run still fails. The result is a set of
//! [`Overrides`] that `SIM_SHRINK` replays.

use crate::api::{real_opener, Opener};
use crate::config::{FaultClass, Overrides};
use crate::runner::{run_seed_with, Report};

/// A minimised failing run.
#[derive(Clone, Debug)]
pub struct Shrunk {
    /// The overrides that still fail.
    pub overrides: Overrides,
    /// The failing run under them.
    pub report: Report,
    /// Runs spent shrinking.
    pub runs: u32,
}

/// Shrinks a failing seed on the real WAL; `None` if it passes.
pub fn shrink(seed: u64) -> Option<Shrunk> {
    shrink_with(seed, Overrides::default(), real_opener())
}

/// Shrinks a failing seed (starting from `start` overrides) against the log
/// `opener` opens; `None` if it passes.
pub fn shrink_with(seed: u64, start: Overrides, opener: Opener) -> Option<Shrunk> {
    let first = run_seed_with(seed, start, opener.clone());
    if first.passed() {
        return None;
    }
    let mut runs = 1;
    let mut ov = Overrides {
        mask: Some(first.config.mask),
        rounds: Some(first.config.rounds),
        // What the caller forced stays forced (the mask above includes it).
        force: start.force,
        lease_ops: start.lease_ops,
    };
    let mut best = first;
    let mut try_ov = |cand: Overrides, best: &mut Report, ov: &mut Overrides| -> bool {
        runs += 1;
        let r = run_seed_with(seed, cand, opener.clone());
        if r.passed() {
            false
        } else {
            *ov = cand;
            *best = r;
            true
        }
    };
    for class in FaultClass::ALL {
        let mask = ov.mask.unwrap_or(0);
        if mask & class.bit() == 0 {
            continue;
        }
        let cand = Overrides {
            mask: Some(mask & !class.bit()),
            ..ov
        };
        try_ov(cand, &mut best, &mut ov);
    }
    // Fewer rounds: halve while it fails, then step down.
    loop {
        let r = ov.rounds.unwrap_or(1);
        if r <= 1 {
            break;
        }
        let cand = Overrides {
            rounds: Some(r / 2),
            ..ov
        };
        if !try_ov(cand, &mut best, &mut ov) {
            break;
        }
    }
    for _ in 0..4 {
        let r = ov.rounds.unwrap_or(1);
        if r <= 1 {
            break;
        }
        let cand = Overrides {
            rounds: Some(r - 1),
            ..ov
        };
        if !try_ov(cand, &mut best, &mut ov) {
            break;
        }
    }
    best.overrides = ov;
    Some(Shrunk {
        overrides: ov,
        report: best,
        runs,
    })
}
