//! The two ways the simulated machine goes down.
//!
//! * **Process crash**: the process's handles and locks die (every handle of
//!   an older generation returns a stale-handle error from then on); the page
//!   cache, volatile data and volatile directory entries, survives.
//! * **Power loss**: additionally the page cache is lost. Each file's durable
//!   image plus a seeded subset of its dirty pages (each 4 KiB page kept,
//!   lost, or torn at the atomic write unit, maybe with garbage in a lost
//!   sector) and a seeded durable length become the new content; each
//!   pending directory operation is independently kept or lost, in order.

use std::collections::BTreeSet;

use super::config::{CrashKind, FaultKind};
use super::damage::DamageKind;
use super::state::{Inode, State, CACHE_PAGE, SECTOR};

/// The fate of one dirty page-cache page at power loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    Kept,
    Lost,
    Torn,
}

impl State {
    /// Crashes the machine.
    pub(crate) fn crash(&mut self, kind: CrashKind) {
        self.generation += 1;
        self.release_hooks();
        self.handles.clear();
        self.locks.clear();
        match kind {
            CrashKind::Process => {
                self.counters.bump(FaultKind::ProcessCrash);
                let now = self.clock.now_ns();
                self.trace.record(
                    now,
                    "process_crash",
                    None,
                    None,
                    self.generation,
                    0,
                    "ok".into(),
                    Some(FaultKind::ProcessCrash),
                );
                self.gc();
            }
            CrashKind::PowerLoss => {
                self.counters.bump(FaultKind::PowerLoss);
                let now = self.clock.now_ns();
                self.trace.record(
                    now,
                    "power_loss",
                    None,
                    None,
                    self.generation,
                    0,
                    "ok".into(),
                    Some(FaultKind::PowerLoss),
                );
                self.power_loss();
            }
        }
    }

    fn power_loss(&mut self) {
        // Handles are already gone, so this is reachability by name only.
        // Garbage a deferred collection kept must not draw page fates.
        self.gc();
        let live_before = self.live_set();
        let inos: Vec<u64> = self
            .inodes
            .iter()
            .filter(|(_, n)| !n.is_dir())
            .map(|(i, _)| *i)
            .collect();
        for ino in inos {
            self.lose_page_cache(ino);
        }
        // Pending directory operations, oldest first, each kept or lost.
        let ops = std::mem::take(&mut self.ops);
        for (id, op) in ops {
            let kept = self.coin();
            let kind = if kept {
                FaultKind::KeptDirOp
            } else {
                FaultKind::LostDirOp
            };
            let (dir, ino) = match op.parts.first() {
                Some((d, super::state::Change::Link { ino, .. }))
                | Some((d, super::state::Change::Unlink { ino, .. })) => (Some(*d), *ino),
                None => (None, 0),
            };
            self.fault_event(kind, if kept { "dir_op_kept" } else { "dir_op_lost" }, dir, ino, 0);
            if !kept {
                self.record_lost_dir_op(id, &op.parts);
            }
            self.lied_ops.remove(&id);
            if kept {
                for (d, c) in &op.parts {
                    self.apply_durable(*d, c);
                }
            }
        }
        for node in self.inodes.values_mut() {
            if let Inode::Dir(d) = node {
                d.vol = d.dur.clone();
                d.pending.clear();
            }
        }
        let reachable = self.durable_set();
        self.inodes.retain(|ino, _| reachable.contains(ino));
        let resurrected: Vec<u64> = reachable
            .iter()
            .filter(|ino| !live_before.contains(ino) && self.file(**ino).is_some())
            .copied()
            .collect();
        for ino in resurrected {
            self.fault_event(FaultKind::ResurrectedFile, "resurrected", Some(ino), 0, 0);
        }
    }

    /// Rebuilds one file from its durable image and a seeded subset of its
    /// dirty pages; afterwards both images are equal and nothing is dirty.
    fn lose_page_cache(&mut self, ino: u64) {
        let unit = self.unit;
        let units_per_page = (CACHE_PAGE / unit).max(1);
        let claims = self.claimed_before_loss(ino);
        let Some(f) = self.file(ino) else { return };
        let dirty: Vec<u64> = f.dirty.iter().copied().collect();
        let (vol_len, dur_len) = (f.vol.len, f.dur.len);
        // The new length: the old durable one or the volatile one.
        let new_len = if vol_len != dur_len && self.coin() {
            vol_len
        } else {
            dur_len
        };
        if let Some(f) = self.file_mut(ino) {
            if new_len > f.dur.len {
                f.dur.set_len(unit, new_len);
            }
        }
        // Group dirty units into page-cache pages and decide each page.
        let mut i = 0;
        while i < dirty.len() {
            let group = dirty[i] / units_per_page;
            let mut j = i;
            while j < dirty.len() && dirty[j] / units_per_page == group {
                j += 1;
            }
            let units = &dirty[i..j];
            let fate = if units_per_page == 1 {
                if self.coin() {
                    Fate::Kept
                } else {
                    Fate::Lost
                }
            } else {
                match self.below(3) {
                    0 => Fate::Kept,
                    1 => Fate::Lost,
                    _ => Fate::Torn,
                }
            };
            let off = group * units_per_page * unit;
            let damage = match fate {
                Fate::Kept => DamageKind::LostUnit,
                Fate::Lost => {
                    self.fault_event(FaultKind::LostWrite, "lost_write", Some(ino), off, CACHE_PAGE.max(unit));
                    DamageKind::LostUnit
                }
                Fate::Torn => {
                    self.fault_event(FaultKind::TornWrite, "torn_write", Some(ino), off, CACHE_PAGE.max(unit));
                    DamageKind::TornUnit
                }
            };
            let mut not_kept = BTreeSet::new();
            for &u in units {
                let keep = match fate {
                    Fate::Kept => true,
                    Fate::Lost => false,
                    Fate::Torn => self.coin(),
                };
                if keep {
                    if let Some(f) = self.file_mut(ino) {
                        f.dur.put_page(unit, u, f.vol.page(u));
                    }
                } else {
                    not_kept.insert(u);
                    self.maybe_garbage(ino, u);
                }
            }
            self.record_units(damage, ino, &not_kept, vol_len);
            i = j;
        }
        let Some(f) = self.file_mut(ino) else { return };
        f.dur.set_len(unit, new_len);
        f.vol = f.dur.clone();
        f.dirty.clear();
        f.late_error = false;
        f.claimed.clear();
        f.claimed_len = None;
        f.dropped.clear();
        let cut = new_len.div_ceil(SECTOR);
        let _ = f.bad_sectors.split_off(&cut);
        self.record_lost_claims(ino, claims);
    }

    /// With probability `torn_garbage`, one seeded sector of a lost unit
    /// holds garbage instead of its old bytes.
    fn maybe_garbage(&mut self, ino: u64, u: u64) {
        let p = self.faults.torn_garbage;
        if !self.roll(p) {
            return;
        }
        let unit = self.unit;
        let start = u * unit;
        let dur_len = self.file(ino).map_or(0, |f| f.dur.len);
        if start >= dur_len {
            return;
        }
        let sector_len = SECTOR.min(unit);
        let sectors = unit / sector_len;
        let s = self.below(sectors);
        let pos = start + s * sector_len;
        if pos >= dur_len {
            return;
        }
        let n = sector_len.min(dur_len - pos);
        let mut junk = vec![0u8; n as usize];
        self.garbage(&mut junk);
        if let Some(f) = self.file_mut(ino) {
            f.dur.write(unit, pos, &junk);
        }
        self.record_damage(DamageKind::Garbage, ino, pos..pos + n);
        self.fault_event(FaultKind::TornGarbage, "torn_garbage", Some(ino), pos, n);
    }
}
