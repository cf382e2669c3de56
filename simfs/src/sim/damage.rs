//! The damage ledger: every byte range SimFs destroyed, failed to persist or
//! put somewhere else, with the file, the path at the time and the trace
//! position. A test oracle cites it to excuse a loss or a corruption report
//! only where a fault really struck, instead of excusing whatever a fault
//! class that was switched on could have done.
//!
//! What is recorded, and when:
//! * media faults as they strike: bit rot, latent sector errors, misdirected
//!   writes (the source page that never reached the medium and the
//!   destination page that was overwritten);
//! * at a power loss, each dirty page that was lost or torn (its new bytes
//!   never reached the medium; the durable bytes under it are unchanged) and
//!   each sector filled with garbage (the durable bytes under it are gone);
//! * at a power loss, the bytes a sync had reported durable but that were
//!   not: a lying sync, or an ext4 `data=journal` sync whose failure is
//!   reported only by the next sync (and, at a btrfs failed sync, which
//!   reverts the page cache, the same for what it reverted). Only the units whose content really
//!   differs after the power loss are recorded, so bytes the lie claimed but
//!   writeback or a later sync persisted are not in the ledger;
//! * at a power loss, the bytes a failed sync had dropped from writeback
//!   (ext4: pages marked clean but not on the medium) that really were lost;
//!   and, as it happens, the page-cache content a btrfs failed sync reverted;
//! * at a power loss, each directory operation a lying directory sync had
//!   reported durable that was lost.
//!
//! The ledger keeps at most [`MAX_LEDGER_ENTRIES`] entries; past that it
//! counts what it dropped ([`crate::SimFs::damage_dropped`]), and an oracle
//! must then not rely on it being complete.

use std::collections::BTreeSet;
use std::ops::Range;

use super::image::Image;
use super::state::{Change, Inode, State, ROOT};

/// The most entries the ledger keeps (about 100 MiB at most).
pub const MAX_LEDGER_ENTRIES: usize = 1 << 20;

/// What happened to a recorded byte range.
///
/// ```
/// use simfs::DamageKind;
/// assert!(DamageKind::BitRot.destroys_durable_bytes());
/// assert!(!DamageKind::LostUnit.destroys_durable_bytes());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum DamageKind {
    /// One bit flipped in durable data (the range is its byte).
    BitRot,
    /// A sector became unreadable: reads covering it fail with EIO until it
    /// is rewritten (the range is the sector).
    LatentSector,
    /// A page that should have reached the medium here went to another
    /// offset: the durable bytes of this range are older than the caller
    /// believes.
    MisdirectedSource,
    /// A page meant for another offset landed here: the durable bytes of
    /// this range were overwritten.
    MisdirectedDest,
    /// A sync reported success but these bytes (or this length) had not
    /// reached the medium, and a power loss (or a btrfs failed sync, which
    /// reverts the page cache) then lost them; or the sync claimed a cut
    /// (`set_len` down) that did not persist, and these bytes came back.
    UnpersistedSync,
    /// A failed sync dropped these bytes from writeback (the caller was told
    /// the sync failed), and a power loss then lost them.
    DroppedBySyncFailure,
    /// A failed sync (btrfs) reverted these bytes of the page cache to their
    /// durable content (the caller was told the sync failed).
    RevertedBySyncFailure,
    /// At a power loss, a dirty page was lost whole: its unsynced bytes
    /// never reached the medium.
    LostUnit,
    /// At a power loss, a dirty page was torn: some of its atomic units
    /// reached the medium, the others (in the range) did not.
    TornUnit,
    /// At a power loss, a sector of a unit that was being written holds
    /// garbage: its durable bytes are gone.
    Garbage,
    /// At a power loss, a directory operation a lying directory sync had
    /// reported durable was lost: a name it linked is missing, or one it
    /// unlinked is back. The inode is the one the entry named, the path is
    /// the entry's, and the range is the whole file (`0..u64::MAX`).
    UnpersistedDirOp,
}

impl DamageKind {
    /// Whether this kind can destroy or hide bytes that a successful sync
    /// had made (or claimed to make) durable. Lost and torn units at a power
    /// loss only ever lose bytes no sync had claimed, and a failed sync was
    /// reported to its caller: neither explains losing a durable record.
    pub fn destroys_durable_bytes(self) -> bool {
        matches!(
            self,
            DamageKind::BitRot
                | DamageKind::LatentSector
                | DamageKind::MisdirectedSource
                | DamageKind::MisdirectedDest
                | DamageKind::UnpersistedSync
                | DamageKind::Garbage
                | DamageKind::UnpersistedDirOp
        )
    }
}

/// One entry of the damage ledger, from [`crate::SimFs::damage`].
///
/// ```
/// use simfs::{Damage, DamageKind};
/// let d = Damage { seq: 9, time_ns: 0, kind: DamageKind::BitRot, ino: 3, path: Some("/log/a".into()), range: 100..101 };
/// assert!(d.overlaps(3, 0..4096));
/// assert!(!d.overlaps(4, 0..4096));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Damage {
    /// Trace position: every trace event with a lower `seq` happened before
    /// the damage (for a fault with its own trace event, that event's seq).
    pub seq: u64,
    /// Simulated time, from the filesystem's clock.
    pub time_ns: u64,
    /// What happened.
    pub kind: DamageKind,
    /// The file's inode (for [`DamageKind::UnpersistedDirOp`], the
    /// directory's).
    pub ino: u64,
    /// A path of the inode at the time (`None` if no name reached it).
    pub path: Option<String>,
    /// The byte range of the file.
    pub range: Range<u64>,
}

impl Damage {
    /// Whether this damage touches bytes `range` of inode `ino`.
    pub fn overlaps(&self, ino: u64, range: Range<u64>) -> bool {
        self.ino == ino && self.range.start < range.end && range.start < self.range.end
    }
}

/// The ledger itself, owned by the state.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    entries: Vec<Damage>,
    dropped: u64,
}

impl Ledger {
    pub(crate) fn entries(&self) -> &[Damage] {
        &self.entries
    }
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }
    fn push(&mut self, d: Damage) {
        if self.entries.len() < MAX_LEDGER_ENTRIES {
            self.entries.push(d);
        } else {
            self.dropped += 1;
        }
    }
}

/// The bytes of unit `u` of `img`, up to its length.
fn unit_bytes(img: &Image, unit: u64, u: u64) -> Vec<u8> {
    let mut buf = vec![0u8; unit as usize];
    let n = img.read(unit, u * unit, &mut buf);
    buf.truncate(n);
    buf
}

/// Merges sorted unit indices into byte ranges, each clipped to `len`.
fn unit_ranges(units: &BTreeSet<u64>, unit: u64, len: u64) -> Vec<Range<u64>> {
    let mut out: Vec<Range<u64>> = Vec::new();
    for &u in units {
        let r = (u * unit).min(len)..((u + 1) * unit).min(len);
        if r.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.end == r.start => last.end = r.end,
            _ => out.push(r),
        }
    }
    out
}

impl State {
    /// Records damage at the current trace position.
    pub(crate) fn record_damage(&mut self, kind: DamageKind, ino: u64, range: Range<u64>) {
        let path = self.path_of(ino);
        self.record_damage_at(kind, ino, path, range);
    }

    fn record_damage_at(&mut self, kind: DamageKind, ino: u64, path: Option<String>, range: Range<u64>) {
        let d = Damage {
            seq: self.trace.next_seq(),
            time_ns: self.clock.now_ns(),
            kind,
            ino,
            path,
            range,
        };
        self.ledger.push(d);
    }

    /// Records each merged range of `units` of file `ino`, clipped to `len`.
    pub(crate) fn record_units(&mut self, kind: DamageKind, ino: u64, units: &BTreeSet<u64>, len: u64) {
        let ranges = unit_ranges(units, self.unit, len);
        if ranges.is_empty() {
            return;
        }
        let path = self.path_of(ino);
        for r in ranges {
            self.record_damage_at(kind, ino, path.clone(), r);
        }
    }

    /// A path naming `ino` through live entries (else durable ones), found
    /// by walking the tree from the root; `None` if nothing names it.
    pub(crate) fn path_of(&self, ino: u64) -> Option<String> {
        if ino == ROOT {
            return Some("/".into());
        }
        for live in [true, false] {
            let mut work: Vec<(u64, String)> = vec![(ROOT, String::new())];
            let mut seen = BTreeSet::new();
            while let Some((dir, prefix)) = work.pop() {
                if !seen.insert(dir) {
                    continue;
                }
                let Some(Inode::Dir(d)) = self.inodes.get(&dir) else {
                    continue;
                };
                let entries = if live { &d.vol } else { &d.dur };
                for (name, &child) in entries {
                    let p = format!("{prefix}/{name}");
                    if child == ino {
                        return Some(p);
                    }
                    work.push((child, p));
                }
            }
        }
        None
    }

    /// At a power loss, before the page cache of `ino` is rebuilt: the
    /// volatile content of each unit a sync claimed (or a failed sync
    /// dropped), to compare with what survives.
    pub(crate) fn claimed_before_loss(&self, ino: u64) -> ClaimedBefore {
        let unit = self.unit;
        let Some(f) = self.file(ino) else {
            return ClaimedBefore::default();
        };
        let pages = f.vol.len.div_ceil(unit);
        let snap = |set: &BTreeSet<u64>| -> Vec<(u64, Vec<u8>)> {
            set.range(..pages).map(|&u| (u, unit_bytes(&f.vol, unit, u))).collect()
        };
        ClaimedBefore {
            vol_len: f.vol.len,
            claimed_len: f.claimed_len,
            claimed: snap(&f.claimed),
            dropped: snap(&f.dropped),
        }
    }

    /// At a power loss, after the durable image of `ino` became its content:
    /// records each claimed (or dropped) unit whose content did not survive,
    /// and a claimed length that did not.
    pub(crate) fn record_lost_claims(&mut self, ino: u64, before: ClaimedBefore) {
        let unit = self.unit;
        let Some(f) = self.file(ino) else { return };
        let new_len = f.vol.len;
        let lost = |list: &[(u64, Vec<u8>)]| -> BTreeSet<u64> {
            list.iter()
                .filter(|(u, old)| unit_bytes(&f.vol, unit, *u) != *old)
                .map(|(u, _)| *u)
                .collect()
        };
        let claimed = lost(&before.claimed);
        let dropped = lost(&before.dropped);
        let old_len = before.vol_len;
        self.record_units(DamageKind::UnpersistedSync, ino, &claimed, old_len);
        self.record_units(DamageKind::DroppedBySyncFailure, ino, &dropped, old_len);
        match before.claimed_len {
            // A length that did not persist: bytes claimed are gone, or
            // bytes a claimed cut removed are back.
            Some(claimed) if claimed.min(old_len) > new_len => {
                self.record_damage(DamageKind::UnpersistedSync, ino, new_len..claimed.min(old_len));
            }
            Some(claimed) if claimed < new_len => {
                self.record_damage(DamageKind::UnpersistedSync, ino, claimed..new_len);
            }
            _ => {}
        }
    }

    /// At a power loss: records a lost directory operation that a lying
    /// directory sync had claimed durable.
    pub(crate) fn record_lost_dir_op(&mut self, id: u64, parts: &[(u64, Change)]) {
        if !self.lied_ops.remove(&id) {
            return;
        }
        for (dir, change) in parts {
            let (name, ino) = match change {
                Change::Link { name, ino } | Change::Unlink { name, ino } => (name, *ino),
            };
            let path = self
                .path_of(*dir)
                .map(|p| format!("{}/{name}", p.trim_end_matches('/')));
            self.record_damage_at(DamageKind::UnpersistedDirOp, ino, path, 0..u64::MAX);
            // A lost directory entry takes everything under it along: one
            // entry per file there, so a loss can be matched by inode.
            if self.dir(ino).is_some() {
                let under: Vec<u64> = self
                    .subtree(ino)
                    .into_iter()
                    .filter(|i| *i != ino && self.file(*i).is_some())
                    .collect();
                for file in under {
                    self.record_damage(DamageKind::UnpersistedDirOp, file, 0..u64::MAX);
                }
            }
        }
    }
}

/// What [`State::claimed_before_loss`] saw.
#[derive(Debug, Default)]
pub(crate) struct ClaimedBefore {
    vol_len: u64,
    claimed_len: Option<u64>,
    claimed: Vec<(u64, Vec<u8>)>,
    dropped: Vec<(u64, Vec<u8>)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_ranges_merge_and_clip() {
        let units: BTreeSet<u64> = [0, 1, 3, 9].into_iter().collect();
        assert_eq!(unit_ranges(&units, 512, 4000), vec![0..1024, 1536..2048]);
    }
}
