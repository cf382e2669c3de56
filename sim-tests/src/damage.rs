//! Evidence for excuses: where each record's bytes sit on the simulated disk,
//! and which damage in SimFs's ledger ([`simfs::SimFs::damage`]) can explain
//! a lost record or a corruption report.
//!
//! The oracle excuses a loss or a report only with a recorded cause: a
//! [`simfs::Damage`] of an excusing kind on the same inode, starting before
//! the end of the frame (for a batch, of its commit frame) that was lost or
//! reported. Recovery stops at the first damage it finds, so everything
//! after a damaged byte of a file may go with it ("in or after"); nothing
//! before it may.
//!
//! The layout comes from parsing the page-cache image of every segment the
//! WAL lists, taken right before each crash ([`Layout::snapshot`]): durable
//! records never move, so the layout before the crash says where the bytes
//! of every record that had to survive it were.

use std::collections::BTreeMap;
use std::path::Path;

use simfs::{Damage, DamageKind, SimFs};
use wal::codec::{self, FrameKind, SegmentHeader};

/// How far to move past a position that holds no valid frame: to the next
/// frame alignment, or past a run of zeros (unwritten space) to the last
/// aligned position before its end.
fn skip_len(rest: &[u8]) -> usize {
    let step = codec::FRAME_ALIGN_BYTES;
    (leading_zeros(rest) / step).max(1) * step
}

/// Zeros to compare a stretch of bytes with.
static ZEROS: [u8; 4096] = [0; 4096];

/// How many bytes at the start of `bytes` are zero (compared a block at a
/// time: unwritten space runs to the end of a preallocated segment).
fn leading_zeros(bytes: &[u8]) -> usize {
    let mut n = 0;
    for block in bytes.chunks(ZEROS.len()) {
        if block != &ZEROS[..block.len()] {
            return n + block.iter().position(|b| *b != 0).unwrap_or(block.len());
        }
        n += block.len();
    }
    n
}

/// A sealed segment's last index, from its name `{first}-{last}-{id}.wal`
/// (`None` for an active segment or another name).
fn sealed_last(name: &str) -> Option<u64> {
    crate::repair::SegName::parse(name)?.last
}

/// One file's last parse: its content version, the sealed-name limit
/// applied, and the records found.
type Parsed = (u64, Option<u64>, Vec<(u64, RecordLoc)>);

/// Where one record's bytes sit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordLoc {
    /// Inode of the segment file.
    pub ino: u64,
    /// Offset of the record's frame.
    pub start: u64,
    /// End of the frame that commits it (its own frame, or its batch's
    /// `BatchEnd` frame).
    pub commit_end: u64,
    /// Its frame's `durable_next`: every record below it was durable when
    /// the frame was written, so a recovery that can read this frame knows
    /// they must be there.
    pub durable_next: u64,
}

/// The last known position of every record (by index), from the segment
/// files' page-cache images.
#[derive(Debug, Default)]
pub struct Layout {
    by_index: BTreeMap<u64, RecordLoc>,
    /// Per inode, frame start → commit end (for reports given as offsets).
    frames: BTreeMap<u64, BTreeMap<u64, u64>>,
    /// Per inode, `(start, index, durable_next)` of every valid frame the
    /// last crash left readable, damaged stretches skipped: what recovery
    /// could see as proof that records before `durable_next` had been
    /// durable.
    /// (`index` is `None` for padding.)
    after_crash: BTreeMap<u64, Vec<(u64, Option<u64>, u64)>>,
    /// Per inode, the last parse: the content version it parsed
    /// ([`SimFs::content_version`]), the sealed-name limit it applied, and
    /// the records it found. An unchanged file is not copied or parsed
    /// again (the sweep's costliest check, measured).
    parsed: BTreeMap<u64, Parsed>,
    /// `(inode, version, sealed limit)` of every file the last snapshot
    /// looked at, in order: if nothing changed, neither can the layout.
    last_seen: Vec<(u64, u64, Option<u64>)>,
    /// Per inode, the last crash parse ([`Layout::snapshot_after_crash`]):
    /// the content version and sealed-name limit it parsed, and the frames
    /// it found (`None`: no segment header). A file a crash left unchanged
    /// (a sealed segment) is not copied or parsed again.
    crash_parsed: BTreeMap<u64, CrashParsed>,
}

/// One file's last crash parse: its content version, the sealed-name limit
/// applied, and the valid frames found (`None` without a segment header).
type CrashParsed = (u64, Option<u64>, Option<Vec<(u64, Option<u64>, u64)>>);

/// Damage that can destroy bytes a sync had made (or claimed to make)
/// durable. Torn and lost units at a power loss hit only pages that were
/// never claimed durable, and garbage in a torn unit hits durable bytes only
/// where the WAL rewrote a unit holding them: a WAL that loses a durable
/// record to one of these wrote into a unit holding durable data, which is
/// its own bug. A lost directory operation excuses only what a lying
/// directory sync had claimed.
pub fn excuses_durable_loss(kind: DamageKind) -> bool {
    matches!(
        kind,
        DamageKind::BitRot
            | DamageKind::LatentSector
            | DamageKind::MisdirectedSource
            | DamageKind::MisdirectedDest
            | DamageKind::UnpersistedSync
            | DamageKind::UnpersistedDirOp
    )
}

/// The lost directory entry, among the damage recorded from trace position
/// `since` on, that held the log directory `dir` itself or one of its
/// ancestors: a lying directory sync had claimed the entry durable and a
/// power loss took it, and with it every file of the log. The WAL fsyncs
/// the path only until a meta file proves an open did (ARCHITECTURE §4
/// step 2), so a lie at that one fsync is never repaired, even by opens
/// after the faults stop.
pub fn lost_log_path<'a>(ledger: &'a [Damage], since: u64, dir: &Path) -> Option<&'a Damage> {
    ledger.iter().find(|d| {
        d.kind == DamageKind::UnpersistedDirOp
            && d.seq >= since
            && d.path.as_deref().is_some_and(|p| dir.starts_with(p))
    })
}

/// One line naming a damage: kind, file, range, when.
pub fn describe(d: &Damage) -> String {
    format!(
        "{:?} on {} (ino {}) bytes {}..{} at fs seq {}",
        d.kind,
        d.path.as_deref().unwrap_or("<unlinked>"),
        d.ino,
        d.range.start,
        d.range.end,
        d.seq
    )
}

impl Layout {
    /// Parses the page-cache image of each segment file in `dir` and
    /// records where each record is. Reads through SimFs's inspection API:
    /// no trace event, no fault, no effect on the run; and not through the
    /// WAL, whose own list may be empty (closed) or wrong (a bug).
    pub fn snapshot(&mut self, fs: &SimFs, dir: &Path) {
        let names = fs.list_dir(dir).unwrap_or_default();
        let files: Vec<(String, u64, u64, Option<u64>)> = names
            .into_iter()
            .filter(|n| n.ends_with(".wal"))
            .filter_map(|n| {
                let path = dir.join(&n);
                let (ino, version) = (fs.inode_of(&path)?, fs.content_version(&path)?);
                let last = sealed_last(&n);
                Some((n, ino, version, last))
            })
            .collect();
        let seen: Vec<(u64, u64, Option<u64>)> = files.iter().map(|f| (f.1, f.2, f.3)).collect();
        if seen == self.last_seen {
            return;
        }
        self.last_seen = seen;
        for (name, ino, version, last) in files {
            let path = dir.join(&name);
            if let Some((v, l, records)) = self.parsed.get(&ino) {
                if (*v, *l) == (version, last) {
                    // Unchanged since the last parse: its records are where
                    // they were (re-inserted: a later file in name order
                    // wins, as if parsed again).
                    for (index, loc) in records {
                        self.by_index.insert(*index, *loc);
                    }
                    continue;
                }
            }
            let Some(bytes) = fs.volatile_content(&path) else {
                continue;
            };
            let records = self.parse(ino, &bytes, last);
            self.parsed.insert(ino, (version, last, records));
        }
    }

    /// Right after a crash: finds every valid frame of every segment file
    /// as reads now see it (after a power loss, the durable image), looking
    /// past damage at every frame alignment as recovery does for proof.
    pub fn snapshot_after_crash(&mut self, fs: &SimFs, dir: &Path) {
        self.after_crash.clear();
        let names = fs.list_dir(dir).unwrap_or_default();
        let mut parsed = BTreeMap::new();
        for name in names.iter().filter(|n| n.ends_with(".wal")) {
            let path = dir.join(name);
            let (Some(ino), Some(version)) = (fs.inode_of(&path), fs.content_version(&path)) else {
                continue;
            };
            let last = sealed_last(name);
            let found = match self.crash_parsed.remove(&ino) {
                // Equal versions, equal bytes: the same frames.
                Some((v, l, found)) if (v, l) == (version, last) => found,
                _ => {
                    let Some(bytes) = fs.volatile_content(&path) else {
                        continue;
                    };
                    Self::crash_frames(&bytes, last)
                }
            };
            if let Some(f) = &found {
                self.after_crash.insert(ino, f.clone());
            }
            parsed.insert(ino, (version, last, found));
        }
        // Only the files there now (inode numbers are never reused).
        self.crash_parsed = parsed;
    }

    /// Every valid frame of one segment image as recovery could see it:
    /// `(offset, index, durable_next)` (`index` `None` for padding), frames
    /// past a sealed segment's `last` index left out. `None` if the image has
    /// no valid segment header.
    fn crash_frames(bytes: &[u8], last: Option<u64>) -> Option<Vec<(u64, Option<u64>, u64)>> {
        let Some(Ok(header)) = bytes.get(..codec::SEGMENT_HEADER_BYTES).map(SegmentHeader::decode) else {
            return None;
        };
        let seed = header.frame_seed();
        let mut found = Vec::new();
        let mut off = codec::SEGMENT_HEADER_BYTES;
        while off + codec::FRAME_HEADER_BYTES <= bytes.len() {
            match codec::decode_frame(&bytes[off..], seed) {
                Ok((h, _)) if last.is_none_or(|l| h.index <= l) => {
                    let index = (h.kind != FrameKind::Padding).then_some(h.index);
                    found.push((off as u64, index, h.durable_next));
                    off += h.frame_len();
                }
                _ => off += skip_len(&bytes[off..]),
            }
        }
        Some(found)
    }

    /// Whether a valid frame at or after `from` in inode `ino` survived the
    /// last crash carrying `durable_next` above `index`: proof, readable by
    /// recovery, that record `index` had been durable.
    pub fn proves_durable(&self, ino: u64, from: u64, index: u64) -> bool {
        self.after_crash
            .get(&ino)
            .is_some_and(|f| f.iter().any(|&(s, _, dn)| s >= from && dn > index))
    }

    /// Where the last crash left a valid frame of record `index`: inode and
    /// offset (the newest segment's, if several hold one).
    pub fn after_crash_frame(&self, index: u64) -> Option<(u64, u64)> {
        self.after_crash
            .iter()
            .rev()
            .find_map(|(ino, f)| f.iter().find(|fr| fr.1 == Some(index)).map(|fr| (*ino, fr.0)))
    }

    /// Parses one segment image. `last`: a sealed segment's last index
    /// from its name; frames past it are not part of the log (a truncation
    /// seals by name and leaves their bytes in place).
    /// Returns the records found, in the order inserted.
    ///
    /// Records that damage made unreadable are located here too: the
    /// members of a batch a damaged stretch cut off, and the indices missing
    /// between the last frame before the stretch and the first after it (a
    /// segment's indices are dense). They sit where they were (a cut-off
    /// member), where an earlier parse of this file saw them inside the
    /// stretch, or else at its start, and commit at the next commit frame
    /// after it (or the image's end); seed 70049215 needed the earlier
    /// parse's place (bit rot in a padding frame before them, older than
    /// their append). Without this they
    /// kept the location an older file gave them (seed 50007697: bit rot in
    /// a truncation's rewritten active segment, the destroyed records still
    /// located in the sealed original recovery then removed, so the loss
    /// looked unexplained).
    fn parse(&mut self, ino: u64, bytes: &[u8], last: Option<u64>) -> Vec<(u64, RecordLoc)> {
        /// At most this many indices inferred across one damaged stretch.
        const MAX_INFERRED_PER_GAP: u64 = 1 << 16;
        let mut found = Vec::new();
        let Some(head) = bytes.get(..codec::SEGMENT_HEADER_BYTES) else {
            return found;
        };
        let Ok(header) = SegmentHeader::decode(head) else {
            return found;
        };
        let seed = header.frame_seed();
        let frames = self.frames.entry(ino).or_default();
        frames.clear();
        let mut off = codec::SEGMENT_HEADER_BYTES;
        let mut batch: Vec<(u64, u64, u64)> = Vec::new();
        // Records damage cut off from their commit frame: (index, start, durable_next).
        let mut cut: Vec<(u64, u64, u64)> = Vec::new();
        let mut next_expected = header.first_index;
        let mut gap_at: Option<u64> = None;
        fn resolve(
            by_index: &mut BTreeMap<u64, RecordLoc>,
            ino: u64,
            entries: &mut Vec<(u64, u64, u64)>,
            commit_end: u64,
            found: &mut Vec<(u64, RecordLoc)>,
        ) {
            for (index, start, durable_next) in entries.drain(..) {
                let loc = RecordLoc {
                    ino,
                    start,
                    commit_end,
                    durable_next,
                };
                by_index.insert(index, loc);
                found.push((index, loc));
            }
        }
        while off + codec::FRAME_HEADER_BYTES <= bytes.len() {
            let Ok((h, _)) = codec::decode_frame(&bytes[off..], seed) else {
                // Damage (or unwritten space): look for later frames, as
                // the records there are still where they were.
                gap_at.get_or_insert(off as u64);
                cut.append(&mut batch);
                off += skip_len(&bytes[off..]);
                continue;
            };
            let start = off as u64;
            let end = start + h.frame_len() as u64;
            if h.kind != FrameKind::Padding {
                if let Some(at) = gap_at.take() {
                    let missing = next_expected..h.index;
                    if missing.end.saturating_sub(missing.start) <= MAX_INFERRED_PER_GAP {
                        // Somewhere in the stretch: where an earlier parse
                        // of this file saw it there, else at its start.
                        cut.extend(missing.map(|i| {
                            self.by_index
                                .get(&i)
                                .filter(|l| l.ino == ino && (at..start).contains(&l.start))
                                .map_or((i, at, 0), |l| (i, l.start, l.durable_next))
                        }));
                    }
                }
                next_expected = next_expected.max(h.index.saturating_add(1));
            }
            match h.kind {
                FrameKind::Padding => {}
                // Past a sealed segment's name: not part of the log, and
                // neither are records damage cut off past it (seed 91039519:
                // batch members past a truncation by name, their commit
                // frame lost, kept locating indices that the next segment
                // reused).
                _ if last.is_some_and(|l| h.index > l) => {
                    cut.retain(|c| last.is_some_and(|l| c.0 <= l));
                    resolve(&mut self.by_index, ino, &mut cut, start, &mut found);
                    return found;
                }
                FrameKind::BatchMember => batch.push((h.index, start, h.durable_next)),
                FrameKind::Record | FrameKind::BatchEnd => {
                    resolve(&mut self.by_index, ino, &mut cut, end, &mut found);
                    batch.push((h.index, start, h.durable_next));
                    for &(_, s, _) in &batch {
                        frames.insert(s, end);
                    }
                    resolve(&mut self.by_index, ino, &mut batch, end, &mut found);
                }
            }
            off += h.frame_len();
        }
        cut.retain(|c| last.is_none_or(|l| c.0 <= l));
        // Members cut off at the image's end commit there, unless an earlier
        // parse of this file saw them at the same place with their commit
        // frame further on: the image lost that frame (a power loss undid
        // it), and the record still committed where it was seen to (seed
        // 93033056: a reopen's snapshot of the durable image moved batch
        // members' commit to the image's end, before the bytes a lying sync
        // lost, so their loss looked unexplained).
        let image_end = bytes.len() as u64;
        for (index, start, durable_next) in cut.drain(..) {
            let commit_end = self
                .by_index
                .get(&index)
                .filter(|l| l.ino == ino && l.start == start && l.commit_end > image_end)
                .map_or(image_end, |l| l.commit_end);
            let loc = RecordLoc {
                ino,
                start,
                commit_end,
                durable_next,
            };
            self.by_index.insert(index, loc);
            found.push((index, loc));
        }
        found
    }

    /// Where record `index` was at the last snapshot that saw it.
    pub fn locate(&self, index: u64) -> Option<RecordLoc> {
        self.by_index.get(&index).copied()
    }

    /// The end of the committing frame of the frame at `offset` of inode
    /// `ino`, if a snapshot saw a frame there; else `fallback`.
    pub fn frame_end(&self, ino: u64, offset: u64, fallback: u64) -> u64 {
        self.frames
            .get(&ino)
            .and_then(|f| f.range(..=offset).next_back())
            .filter(|(_, end)| **end > offset)
            .map_or(fallback, |(_, end)| *end)
    }
}

/// Whether ledger entry `d` struck a file (or entry) directly in `dir`
/// (the path it struck under, compared as text).
pub fn in_dir(d: &Damage, dir: &str) -> bool {
    d.path
        .as_deref()
        .and_then(|p| p.rsplit_once('/'))
        .map(|(parent, _)| parent)
        == Some(dir)
}

/// Whether damage `d` can have destroyed bytes of the record at `loc` or of
/// its commit frame.
fn hits(d: &Damage, loc: RecordLoc) -> bool {
    d.ino == loc.ino && d.range.start < loc.commit_end && d.range.end > loc.start
}

/// The first damage in `ledger` that can explain losing durable record
/// `index` at `loc`: an excusing kind on its inode that either hit the
/// record's own bytes (or its commit frame) at or after `since` (the trace
/// position where its append began: older damage there was overwritten by
/// the record itself), or lies before it in the file, whenever it struck
/// ("in or after": a recovery stops at the first damage).
///
/// Even damage that destroyed the record excuses its loss only if recovery
/// had no proof that it was durable: unless `point_in_time` (the operator
/// asked to cut at the first damage), no valid frame the crash left after
/// the damage may carry a `durable_next` above `index`
/// ([`Layout::proves_durable`]). That frame told recovery the record was
/// durable, so cutting it (and saying so only in a report) instead of
/// failing the open with `Corruption` is the WAL's bug.
///
/// `cached`: the record was acknowledged but not durable, and a process
/// crash keeps the page cache, so only damage a read sees through it
/// excuses the loss: an unreadable sector (which an operator's repair then
/// rewrites with zeros).
pub fn explain_loss<'a>(
    ledger: &'a [Damage],
    index: u64,
    loc: RecordLoc,
    since: u64,
    point_in_time: bool,
    cached: bool,
    layout: &Layout,
) -> Option<&'a Damage> {
    ledger.iter().find(|d| {
        (if cached {
            d.kind == DamageKind::LatentSector
        } else {
            excuses_durable_loss(d.kind)
        }) && d.ino == loc.ino
            && d.range.start < loc.commit_end
            && (!hits(d, loc) || d.seq >= since)
            && (point_in_time || !layout.proves_durable(d.ino, d.range.end, index))
    })
}

/// The name of recovery's journal (FORMAT.md §8.5) in a log directory.
const JOURNAL_NAME: &str = "recovery.journal";

/// The meta file's name in a log directory (the low-water mark and the
/// clean-shutdown marker).
pub const META_NAME: &str = "meta";

/// A durable record lost to recovery's own in-place rewrite (FORMAT.md
/// §8.5) when the device lied about the journal that protects it: garbage
/// a power loss left in a unit the rewrite was writing, at or before the
/// record's bytes in its file, after its append began, and at the same
/// power loss (same simulated instant) a lost sync or directory entry of
/// that directory's `recovery.journal`, or a media fault (misdirected
/// write over it, bit rot, latent sector) on the journal between the
/// record's append and the garbage. Returns both entries: the garbage
/// alone names a unit the WAL rewrote while it held durable data, which is
/// the WAL's bug unless its journal was made durable first, and here the
/// device only claimed it was (simulation seed 60060491).
///
/// The same proof rule as [`explain_loss`]: no valid frame the crash left
/// after the garbage may prove the record durable.
pub fn explain_unjournaled_rewrite<'a>(
    ledger: &'a [Damage],
    index: u64,
    loc: RecordLoc,
    since: u64,
    point_in_time: bool,
    layout: &Layout,
) -> Option<(&'a Damage, &'a Damage)> {
    // Garbage on the record's own bytes first: it names the cause best.
    let on_record = ledger.iter().filter(|d| hits(d, loc));
    on_record
        .chain(ledger.iter().filter(|d| !hits(d, loc)))
        .filter(|d| {
            d.kind == DamageKind::Garbage
                && d.ino == loc.ino
                && d.range.start < loc.commit_end
                && d.seq >= since
                && (point_in_time || !layout.proves_durable(d.ino, d.range.end, index))
        })
        .find_map(|g| Some((g, lost_journal(ledger, g, Some(since))?)))
}

/// The damage of the `recovery.journal` beside the file `garbage` struck
/// that left recovery's in-place rewrite unprotected: its claimed sync or
/// directory entry lost at the same power loss, or (with `destroyed_since`)
/// its durable bytes (or those of its fresh copy, `recovery.journal.new`)
/// destroyed by a media fault from that trace position on (soak seed
/// 91032878: a misdirected write over
/// the journal's header made it look torn, so the next open dropped it as
/// one that no in-place write had followed), or after the garbage, on the
/// journal that was to repair it (soak seed 97012534: a latent sector in
/// the header of the journal's fresh copy, `recovery.journal.new` when it
/// struck; the operator's zero rewrite of that sector left a journal the
/// next open took for a torn one and removed).
fn lost_journal<'a>(ledger: &'a [Damage], garbage: &Damage, destroyed_since: Option<u64>) -> Option<&'a Damage> {
    let dir = garbage.path.as_deref()?.rsplit_once('/')?.0;
    let journal_new = format!("{JOURNAL_NAME}.new");
    ledger.iter().find(|j| {
        let name = j.path.as_deref().and_then(|p| p.rsplit_once('/'));
        let is_journal = name == Some((dir, JOURNAL_NAME));
        let lost_at_power_loss = matches!(j.kind, DamageKind::UnpersistedSync | DamageKind::UnpersistedDirOp)
            && j.time_ns == garbage.time_ns;
        let media = matches!(
            j.kind,
            DamageKind::MisdirectedDest | DamageKind::BitRot | DamageKind::LatentSector
        );
        let any_journal = is_journal || name == Some((dir, journal_new.as_str()));
        let destroyed = destroyed_since.is_some_and(|since| media && j.seq >= since);
        let destroyed_after = media && j.seq > garbage.seq;
        (is_journal && lost_at_power_loss) || (any_journal && (destroyed || destroyed_after))
    })
}

/// Garbage that can explain a report of damage at an offset of inode `ino`
/// whose frame ends at `frame_end` because recovery's in-place rewrite was
/// writing that unit, with the journal that should have restored it lost
/// at the same power loss (its sync or its directory entry claimed and not
/// kept, same simulated instant). Returns both entries (soak seed
/// 95018738: the journal's fsync lied, the rewrite tore the segment's
/// header with garbage, and the next open, finding the journal torn,
/// removed it and reported the header). Garbage alone is no excuse: the
/// WAL must journal a unit holding durable data before rewriting it.
///
/// Or with the journal (or its fresh copy) destroyed by a media fault since
/// trace position `since` (the last recovery): soak seed 97038765, a
/// misdirected write into `recovery.journal.new` during a pass of crashes
/// at every step of recovery; the next open found the checksum wrong and
/// removed the journal.
pub fn explain_unjournaled_report(
    ledger: &[Damage],
    ino: u64,
    frame_end: u64,
    since: u64,
) -> Option<(&Damage, &Damage)> {
    ledger
        .iter()
        .filter(|g| g.kind == DamageKind::Garbage && g.ino == ino && g.range.start < frame_end)
        .find_map(|g| Some((g, lost_journal(ledger, g, Some(since))?)))
}

/// The first damage in `ledger` that can explain a report of damage (or a
/// persistent read error) at an offset of inode `ino` whose frame ends at
/// `frame_end`: a kind `accept` takes, on that inode, starting before
/// `frame_end`.
pub fn explain_report<'a>(
    ledger: &'a [Damage],
    ino: u64,
    frame_end: u64,
    accept: &dyn Fn(DamageKind) -> bool,
) -> Option<&'a Damage> {
    ledger
        .iter()
        .find(|d| accept(d.kind) && d.ino == ino && d.range.start < frame_end)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Soak seed 95018738's shape: garbage over a segment's header from
    /// recovery's rewrite, the journal's claimed sync lost at the same
    /// power loss. Garbage alone, a journal lost at another instant, or
    /// garbage past the reported frame explain nothing.
    #[test]
    fn a_report_over_an_unjournaled_rewrite_needs_the_journal_lost_with_it() {
        let d = |kind, ino, path: &str, range: std::ops::Range<u64>, time_ns| Damage {
            seq: 1,
            time_ns,
            kind,
            ino,
            path: Some(path.into()),
            range,
        };
        let seg = "/db/wal/00000000000000000056-active-0000000000000014.wal";
        let garbage = d(DamageKind::Garbage, 24, seg, 0..512, 7);
        let journal = d(
            DamageKind::UnpersistedSync,
            47,
            "/db/wal/recovery.journal",
            4096..4608,
            7,
        );
        let both = vec![garbage.clone(), journal.clone()];
        assert!(explain_unjournaled_report(&both, 24, 64, 1).is_some());
        assert!(
            explain_unjournaled_report(&both, 24, 0, 1).is_none(),
            "garbage past the frame"
        );
        assert!(explain_unjournaled_report(&both, 25, 64, 1).is_none(), "another file");
        assert!(
            explain_unjournaled_report(std::slice::from_ref(&garbage), 24, 64, 1).is_none(),
            "garbage alone"
        );
        let mut later = journal;
        later.time_ns = 8;
        assert!(
            explain_unjournaled_report(&[garbage.clone(), later], 24, 64, 1).is_none(),
            "another power loss"
        );
        // A media fault on the journal's copy after the garbage destroyed
        // the only other copy of the header (soak seed 97012534); one
        // before the garbage, or on another file, is no excuse.
        let media = |seq: u64, path: &str| Damage {
            seq,
            kind: DamageKind::LatentSector,
            path: Some(path.into()),
            ino: 40,
            range: 0..512,
            ..garbage.clone()
        };
        let after = media(garbage.seq + 40, "/db/wal/recovery.journal.new");
        assert!(explain_unjournaled_report(&[garbage.clone(), after], 24, 64, 1).is_some());
        // Before the garbage: only since the last recovery (97038765).
        let before = media(garbage.seq - 1, "/db/wal/recovery.journal.new");
        let pair = [garbage.clone(), before];
        assert!(explain_unjournaled_report(&pair, 24, 64, 0).is_some());
        assert!(
            explain_unjournaled_report(&pair, 24, 64, 1).is_none(),
            "before the last recovery"
        );
        let other = media(garbage.seq + 40, "/db/wal/meta");
        assert!(explain_unjournaled_report(&[garbage.clone(), other], 24, 64, 1).is_none());
    }

    /// Seed 108 (crash placements off): a lying fsync of `/` at the log's
    /// creation, never repaired; a power loss after the heal took `/db`.
    /// Only a lost entry on the log's own path, lost since `since`, counts.
    #[test]
    fn a_lost_entry_on_the_log_path_is_found_and_no_other() {
        let lost = |seq: u64, path: &str| Damage {
            seq,
            time_ns: 0,
            kind: DamageKind::UnpersistedDirOp,
            ino: 2,
            path: Some(path.into()),
            range: 0..u64::MAX,
        };
        let dir = Path::new("/db/wal");
        let ledger = vec![
            lost(5, "/db"),
            lost(20, "/db/walrus"),
            lost(30, "/db/wal/00-active-01.wal"),
        ];
        assert_eq!(lost_log_path(&ledger, 0, dir).map(|d| d.seq), Some(5));
        assert_eq!(
            lost_log_path(&ledger, 6, dir),
            None,
            "too early, a sibling, a file inside"
        );
        assert_eq!(lost_log_path(&[lost(9, "/db/wal")], 9, dir).map(|d| d.seq), Some(9));
        let mut rot = lost(9, "/db");
        rot.kind = DamageKind::BitRot;
        assert_eq!(lost_log_path(&[rot], 0, dir), None);
    }

    /// Seed 50007697's shape: records 5, 6 and 7 a batch, the second's
    /// frame destroyed. All three are located in this file, committing at
    /// the batch's end (the first two used to be left out, so a stale copy
    /// elsewhere kept them and their loss looked unexplained).
    #[test]
    fn records_a_damaged_stretch_cut_off_are_located_at_it() {
        let header = SegmentHeader {
            segment_id: 1,
            first_index: 4,
            salt: 9,
            log_id: 3,
        };
        let seed = header.frame_seed();
        let mut img = header.encode().to_vec();
        let mut starts = Vec::new();
        for (kind, index) in [
            (FrameKind::Record, 4),
            (FrameKind::BatchMember, 5),
            (FrameKind::BatchMember, 6),
            (FrameKind::BatchEnd, 7),
            (FrameKind::Record, 8),
        ] {
            starts.push(img.len() as u64);
            codec::encode_frame(&mut img, seed, kind, index, 4, &[index as u8; 40]);
        }
        let batch_end = starts[4];
        let clean = img.clone();
        img[starts[2] as usize + 40] ^= 1;
        let mut layout = Layout::default();
        let found = layout.parse(7, &img, None);
        let at = |i: u64| layout.locate(i).unwrap();
        assert_eq!(found.len(), 5, "{found:?}");
        assert_eq!((at(5).ino, at(5).start, at(5).commit_end), (7, starts[1], batch_end));
        assert_eq!((at(6).ino, at(6).start, at(6).commit_end), (7, starts[2], batch_end));
        assert_eq!((at(7).start, at(7).commit_end), (starts[3], batch_end));
        assert_eq!(at(4).commit_end, starts[1]);
        assert_eq!(at(8).start, starts[4]);
        // Damage in the middle of the batch explains losing its first member.
        let d = Damage {
            kind: DamageKind::BitRot,
            path: None,
            ino: 7,
            range: starts[2] + 40..starts[2] + 41,
            seq: 10,
            time_ns: 0,
        };
        assert!(explain_loss(std::slice::from_ref(&d), 5, at(5), 0, false, false, &layout).is_some());
        // A stretch over frames 5 and 6: with an earlier parse of the same
        // file, 6 keeps the place that parse saw inside the stretch (so older
        // damage before it in the stretch stays "before it").
        let mut two = clean.clone();
        two[starts[1] as usize + 40] ^= 1;
        two[starts[2] as usize + 40] ^= 1;
        let mut layout = Layout::default();
        layout.parse(9, &clean, None);
        layout.parse(9, &two, None);
        let at = |i: u64| layout.locate(i).unwrap();
        assert_eq!((at(5).start, at(5).commit_end), (starts[1], batch_end));
        assert_eq!((at(6).start, at(6).commit_end), (starts[2], batch_end));
        let mut fresh = Layout::default();
        fresh.parse(9, &two, None);
        assert_eq!(fresh.locate(6).unwrap().start, starts[1]);
        // A stretch at the end: the member cut off commits at the image's end.
        let cut = starts[3] as usize + 48;
        let mut tail = clean[..cut].to_vec();
        tail[starts[3] as usize] ^= 1;
        let found = Layout::default().parse(8, &tail, None);
        assert_eq!(found.iter().filter(|(i, _)| [5, 6].contains(i)).count(), 2, "{found:?}");
        assert!(
            found.iter().all(|(i, l)| *i == 4 || l.commit_end == cut as u64),
            "{found:?}"
        );
        // The same stretch seen after an earlier parse of the whole file (a
        // reopen's snapshot of the image a power loss left): the members
        // still commit at the batch's end, so losing the bytes of the
        // commit frame, past the image's end, explains their loss.
        let mut layout = Layout::default();
        layout.parse(8, &clean, None);
        layout.parse(8, &clean[..cut], None);
        let at = |i: u64| layout.locate(i).unwrap();
        assert_eq!((at(5).start, at(5).commit_end), (starts[1], batch_end));
        assert_eq!((at(6).start, at(6).commit_end), (starts[2], batch_end));
        let lost = Damage {
            kind: DamageKind::UnpersistedSync,
            path: None,
            ino: 8,
            range: cut as u64..batch_end + 64,
            seq: 10,
            time_ns: 0,
        };
        assert!(explain_loss(std::slice::from_ref(&lost), 5, at(5), 0, true, false, &layout).is_some());
    }

    /// Seed 91039519's shape: a sealed segment truncated by name to end at
    /// 5, still holding the frames of batch 6..=8 whose commit frame a lost
    /// sync destroyed. Those members are past the name's last index, so
    /// they locate nothing: indices 6.. keep the place the next segment gave
    /// them (they used to move back here, and the loss of the next segment's
    /// records was looked up in this file).
    #[test]
    fn frames_past_a_sealed_name_locate_nothing_even_when_damage_cut_them_off() {
        let header = SegmentHeader {
            segment_id: 1,
            first_index: 4,
            salt: 9,
            log_id: 3,
        };
        let seed = header.frame_seed();
        let mut img = header.encode().to_vec();
        let mut starts = Vec::new();
        for (kind, index) in [
            (FrameKind::Record, 4),
            (FrameKind::Record, 5),
            (FrameKind::BatchMember, 6),
            (FrameKind::BatchMember, 7),
            (FrameKind::BatchEnd, 8),
        ] {
            starts.push(img.len() as u64);
            codec::encode_frame(&mut img, seed, kind, index, 4, &[index as u8; 40]);
        }
        img[starts[4] as usize + 40] ^= 1;
        let next = RecordLoc {
            ino: 8,
            start: 4096,
            commit_end: 4200,
            durable_next: 6,
        };
        let mut layout = Layout::default();
        for i in 6..=8 {
            layout.by_index.insert(i, next);
        }
        let found = layout.parse(7, &img, Some(5));
        assert_eq!(found.iter().map(|f| f.0).collect::<Vec<_>>(), vec![4, 5], "{found:?}");
        for i in 6..=8 {
            assert_eq!(layout.locate(i), Some(next), "index {i}");
        }
        // Without the name's limit (an active segment) the cut-off members
        // are located here.
        let found = Layout::default().parse(7, &img, None);
        assert_eq!(
            found.iter().map(|f| f.0).collect::<Vec<_>>(),
            vec![4, 5, 6, 7],
            "{found:?}"
        );
    }

    /// Garbage excuses a durable record's loss only together with a lost
    /// sync of its directory's journal at the same power loss.
    #[test]
    fn garbage_excuses_a_durable_loss_only_with_the_journal_lost_at_the_same_power_loss() {
        let loc = RecordLoc {
            ino: 29,
            start: 4096,
            commit_end: 4128,
            durable_next: 0,
        };
        let entry = |kind, ino, path: &str, range: std::ops::Range<u64>, seq, time_ns| Damage {
            kind,
            ino,
            path: Some(path.to_string()),
            range,
            seq,
            time_ns,
        };
        let garbage = entry(DamageKind::Garbage, 29, "/db/wal/seg.wal", 4096..4608, 20, 7);
        let journal = |path: &str, time_ns| entry(DamageKind::UnpersistedSync, 35, path, 0..100, 21, time_ns);
        let layout = Layout::default();
        let explain =
            |ledger: &[Damage], since| explain_unjournaled_rewrite(ledger, 1, loc, since, false, &layout).is_some();
        assert!(!explain(std::slice::from_ref(&garbage), 0));
        assert!(explain(&[garbage.clone(), journal("/db/wal/recovery.journal", 7)], 0));
        assert!(!explain(&[garbage.clone(), journal("/db/wal/recovery.journal", 8)], 0));
        assert!(!explain(
            &[garbage.clone(), journal("/db/other/recovery.journal", 7)],
            0
        ));
        assert!(!explain(&[garbage.clone(), journal("/db/wal/meta", 7)], 0));
        // Garbage from before the record's append was overwritten by it.
        assert!(!explain(&[garbage.clone(), journal("/db/wal/recovery.journal", 7)], 30));
        // Garbage after the record's commit frame does not explain it.
        let after = entry(DamageKind::Garbage, 29, "/db/wal/seg.wal", 4608..5120, 20, 7);
        assert!(!explain(&[after, journal("/db/wal/recovery.journal", 7)], 0));
    }

    #[test]
    fn leading_zeros_and_skip_len() {
        let step = codec::FRAME_ALIGN_BYTES;
        for len in [0usize, 1, 7, 4095, 4096, 4097, 10_000] {
            let mut v = vec![0u8; len];
            assert_eq!(leading_zeros(&v), len);
            for at in [0, len / 3, len.saturating_sub(1)] {
                if at < len {
                    v[at] = 5;
                    assert_eq!(leading_zeros(&v), v.iter().position(|b| *b != 0).unwrap_or(len));
                    assert_eq!(skip_len(&v), (at / step).max(1) * step);
                    v[at] = 0;
                }
            }
        }
    }
}
