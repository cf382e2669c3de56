//! How data and directory entries become durable: `sync_data`/`sync_all`
//! (with failed and lying syncs per [`SyncFailureProfile`]), `sync_dir`, and
//! background writeback; plus the faults that strike data as it reaches the
//! medium (misdirected writes, latent sector errors, bit rot).

use std::io;

use rand::Rng;

use super::config::{FaultKind, SyncFailureProfile};
use super::damage::DamageKind;
use super::errors;
use super::ops::Ctx;
use super::state::{Components, State, View, SECTOR};
use super::trace::MisdirectedWrite;

impl State {
    /// Background writeback: with probability `faults.writeback`, one dirty
    /// page of some file (seeded choice) becomes durable.
    pub(crate) fn writeback_tick(&mut self) {
        let p = self.faults.writeback;
        if !self.roll(p) {
            return;
        }
        // Only files something can still reach are candidates: garbage a
        // deferred collection kept must not change the seeded choice.
        if self.gc_debt > 0 {
            self.gc();
        }
        let candidates: Vec<u64> = self
            .inodes
            .iter()
            .filter_map(|(ino, n)| match n {
                super::state::Inode::File(f) if !f.dirty.is_empty() => Some(*ino),
                _ => None,
            })
            .collect();
        if candidates.is_empty() {
            return;
        }
        let pick = self.below(candidates.len() as u64) as usize;
        let ino = candidates[pick];
        let unit = self.unit;
        let Some(ndirty) = self.file(ino).map(|f| f.dirty.len() as u64) else {
            return;
        };
        let k = self.below(ndirty) as usize;
        let Some(page) = self.file(ino).and_then(|f| f.dirty.iter().nth(k).copied()) else {
            return;
        };
        if let Some(f) = self.file_mut(ino) {
            f.dirty.remove(&page);
            let end = f.vol.len.min((page + 1) * unit);
            if end > f.dur.len {
                f.dur.set_len(unit, end);
            }
        }
        self.fault_event(FaultKind::Writeback, "writeback", Some(ino), page * unit, unit);
        self.persist_pages(ino, &[page]);
        if let Some(f) = self.file_mut(ino) {
            f.claimed.remove(&page);
            f.dropped.remove(&page);
        }
        self.after_durable(ino, &[page]);
    }

    /// Copies volatile pages to the durable image, in order (each, on a
    /// misdirected write, to another page of it). The faults are decided
    /// first, page by page, then the pages copied: deciding reads and
    /// changes nothing a copy changes or reads, and the file is looked up
    /// once, not twice per page.
    fn persist_pages(&mut self, ino: u64, pages: &[u64]) {
        let unit = self.unit;
        let p = self.faults.misdirected_write;
        let dur_pages = self.file(ino).map_or(0, |f| f.dur.len.div_ceil(unit));
        let mut targets = Vec::with_capacity(pages.len());
        for &page in pages {
            let mut target = page;
            if dur_pages > 1 && self.roll(p) {
                let mut q = self.below(dur_pages - 1);
                if q >= page {
                    q += 1;
                }
                target = q;
                self.record_damage(DamageKind::MisdirectedSource, ino, page * unit..(page + 1) * unit);
                self.record_damage(DamageKind::MisdirectedDest, ino, q * unit..(q + 1) * unit);
                self.fault_event(
                    FaultKind::MisdirectedWrite,
                    "misdirected_write",
                    Some(ino),
                    page * unit,
                    q * unit,
                );
                self.misdirected.push(MisdirectedWrite {
                    seq: self.trace.last_seq(),
                    ino,
                    from: page * unit,
                    to: q * unit,
                    len: unit,
                });
            }
            targets.push(target);
        }
        if let Some(f) = self.file_mut(ino) {
            for (&page, &target) in pages.iter().zip(&targets) {
                f.dur.put_page(unit, target, f.vol.page(page));
            }
        }
    }

    /// Faults that strike data as it becomes durable: a latent sector error
    /// and a bit flip, each with its probability, at a seeded sector of the
    /// pages just persisted.
    fn after_durable(&mut self, ino: u64, pages: &[u64]) {
        if pages.is_empty() {
            return;
        }
        let unit = self.unit;
        let faults = self.faults;
        for kind in [FaultKind::LatentSectorError, FaultKind::BitRot] {
            let p = match kind {
                FaultKind::LatentSectorError => faults.latent_sector_error,
                _ => faults.bit_rot,
            };
            if !self.roll(p) {
                continue;
            }
            let page = pages[self.below(pages.len() as u64) as usize];
            let dur_len = self.file(ino).map_or(0, |f| f.dur.len);
            let start = page * unit;
            if start >= dur_len {
                continue;
            }
            let end = dur_len.min(start + unit);
            match kind {
                FaultKind::LatentSectorError => {
                    let first = start / SECTOR;
                    let n = (end - 1) / SECTOR - first + 1;
                    let sector = first + self.below(n);
                    if let Some(f) = self.file_mut(ino) {
                        f.bad_sectors.insert(sector);
                    }
                    self.record_damage(DamageKind::LatentSector, ino, sector * SECTOR..(sector + 1) * SECTOR);
                    self.fault_event(kind, "latent_sector_error", Some(ino), sector * SECTOR, SECTOR);
                }
                _ => {
                    let byte = start + self.below(end - start);
                    let bit = self.below(8) as u8;
                    if let Some(f) = self.file_mut(ino) {
                        let pg = f.dur.page_mut(unit, byte / unit);
                        pg[(byte % unit) as usize] ^= 1 << bit;
                    }
                    self.record_damage(DamageKind::BitRot, ino, byte..byte + 1);
                    self.fault_event(kind, "bit_rot", Some(ino), byte, u64::from(bit));
                }
            }
        }
    }

    /// `sync_data`/`sync_all` of inode `ino` through handle `id`.
    pub(crate) fn sync_file(&mut self, ctx: &mut Ctx, id: u64, ino: u64) -> io::Result<()> {
        let faults = self.faults;
        let unit = self.unit;
        if self.roll(faults.sync_fail) {
            self.inject(ctx, FaultKind::SyncFail);
            let profile = self.profile;
            // A btrfs revert undoes what earlier lies claimed, as a power
            // loss would: the ledger compares before and after.
            let claims = (profile == SyncFailureProfile::Btrfs).then(|| self.claimed_before_loss(ino));
            let Some(f) = self.file_mut(ino) else {
                return Err(errors::eio());
            };
            match profile {
                SyncFailureProfile::Ext4Ordered => {
                    // Pages marked clean, new bytes stay in memory only.
                    let dirty = std::mem::take(&mut f.dirty);
                    f.dropped.extend(dirty);
                    f.errseq += 1;
                    let seq = f.errseq;
                    self.mark_seen(id, seq);
                    return Err(errors::eio());
                }
                SyncFailureProfile::Ext4DataJournal => {
                    // Reported as a success now (the error comes with the
                    // next sync): a claim like a lie's.
                    let dirty = std::mem::take(&mut f.dirty);
                    f.claimed.extend(dirty);
                    f.claimed_len = Some(f.vol.len);
                    f.late_error = true;
                    return Ok(());
                }
                SyncFailureProfile::Btrfs => {
                    let reverted = std::mem::take(&mut f.dirty);
                    let len = f.vol.len;
                    f.vol = f.dur.clone();
                    f.claimed.clear();
                    f.claimed_len = None;
                    f.dropped.clear();
                    f.errseq += 1;
                    let seq = f.errseq;
                    self.mark_seen(id, seq);
                    self.record_units(DamageKind::RevertedBySyncFailure, ino, &reverted, len);
                    if let Some(claims) = claims {
                        self.record_lost_claims(ino, claims);
                    }
                    return Err(errors::eio());
                }
            }
        }
        if self.roll(faults.lying_sync) {
            self.inject(ctx, FaultKind::LyingSync);
            if let Some(f) = self.file_mut(ino) {
                let dirty = f.dirty.clone();
                f.claimed.extend(dirty);
                f.claimed_len = Some(f.vol.len);
            }
            return Ok(());
        }
        // Persist every dirty page and the length.
        let Some(f) = self.file_mut(ino) else {
            return Err(errors::stale());
        };
        let pages: Vec<u64> = std::mem::take(&mut f.dirty).into_iter().collect();
        let vol_len = f.vol.len;
        if vol_len > f.dur.len {
            f.dur.set_len(unit, vol_len);
        }
        self.persist_pages(ino, &pages);
        if let Some(f) = self.file_mut(ino) {
            f.dur.set_len(unit, vol_len);
            for p in &pages {
                f.claimed.remove(p);
                f.dropped.remove(p);
            }
            f.claimed_len = None;
        }
        self.after_durable(ino, &pages);
        // Report an error not yet seen by this handle (errseq), or the one a
        // data=journal failure deferred.
        let Some(f) = self.file_mut(ino) else {
            return Ok(());
        };
        if f.late_error {
            f.late_error = false;
            f.errseq += 1;
            let seq = f.errseq;
            ctx.fault.get_or_insert(FaultKind::SyncFail);
            self.mark_seen(id, seq);
            return Err(errors::eio());
        }
        let seq = f.errseq;
        if self.handles.get(&id).is_some_and(|h| h.seen_errseq < seq) {
            ctx.fault.get_or_insert(FaultKind::SyncFail);
            self.mark_seen(id, seq);
            return Err(errors::eio());
        }
        // Everything is durable, and the sync reports EIO anyway (a failed
        // journal commit or cache flush reported after the data reached the
        // medium). Like such an error on Linux, it is returned to this
        // caller only and not recorded in the inode's errseq: later syncs,
        // from any handle, report only errors of their own.
        if self.roll(faults.sync_fail_after_persist) {
            self.inject(ctx, FaultKind::SyncFailAfterPersist);
            return Err(errors::eio());
        }
        Ok(())
    }

    fn mark_seen(&mut self, id: u64, seq: u64) {
        if let Some(h) = self.handles.get_mut(&id) {
            h.seen_errseq = seq;
        }
    }

    /// `sync_dir`: makes the directory's pending operations durable. An
    /// operation spanning two directories (a rename between them) becomes
    /// durable, in both, once both have been synced.
    pub(crate) fn op_sync_dir(&mut self, ctx: &mut Ctx, comps: &Components) -> io::Result<()> {
        let dir = self.resolve(comps, View::Live)?;
        ctx.ino = Some(dir);
        let Some(d) = self.dir(dir) else {
            return Err(errors::not_dir());
        };
        let pending = d.pending.clone();
        let faults = self.faults;
        if self.roll(faults.sync_fail) {
            self.inject(ctx, FaultKind::SyncFail);
            return Err(errors::eio());
        }
        if self.roll(faults.lying_sync) {
            self.inject(ctx, FaultKind::LyingSync);
            self.lied_ops.extend(pending);
            return Ok(());
        }
        for id in &pending {
            if let Some(op) = self.ops.get_mut(id) {
                op.synced.insert(dir);
            }
        }
        self.apply_ready_ops();
        self.gc_soon();
        if self.roll(faults.sync_fail_after_persist) {
            // The pending operations are durable, as after a successful
            // sync_dir; then the error.
            self.inject(ctx, FaultKind::SyncFailAfterPersist);
            return Err(errors::eio());
        }
        Ok(())
    }

    /// Makes durable, in order, every pending operation whose directories
    /// have all been synced since it happened, unless an earlier pending
    /// operation shares a directory with it: durability never reorders the
    /// operations of a directory (a remove must not become durable before the
    /// rename that created the name, or the name would come back).
    fn apply_ready_ops(&mut self) {
        loop {
            let ready = self.ops.iter().find_map(|(&id, op)| {
                let synced = op.synced.is_superset(&op.dirs);
                let blocked = self
                    .ops
                    .range(..id)
                    .any(|(_, earlier)| !earlier.dirs.is_disjoint(&op.dirs));
                (synced && !blocked).then_some(id)
            });
            let Some(id) = ready else { break };
            if let Some(op) = self.ops.get(&id) {
                let parts = op.parts.clone();
                for (d, c) in &parts {
                    self.apply_durable(*d, c);
                }
            }
            self.forget_op(id);
        }
    }

    /// Fills `buf` with seeded garbage.
    pub(crate) fn garbage(&mut self, buf: &mut [u8]) {
        self.rng.fill(buf);
    }
}
