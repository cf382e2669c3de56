//! Recovery at open: list and validate segment names, scan the active
//! segment, tell a torn tail from mid-log corruption, cut the torn tail durably.
//!
//! Rules (see `docs/ARCHITECTURE.md`):
//! - Names are validated first: a gap, overlap or duplicate in the index ranges
//!   is `Corruption`, never skipped.
//! - Sealed segments are trusted by name (no data is read at open) and checked
//!   when read.
//! - The active segment is scanned. The scan stops at the first frame that is
//!   not valid and in sequence, and remembers the end of the last committed
//!   frame (a single record or the end of a batch). If any valid frame after
//!   the stop says (through its `durable_next` field) that a record at or past
//!   the stop was already durable, the damage is mid-log corruption;
//!   otherwise it is a torn tail: bytes that were never acknowledged.
//! - A read error fails the open and cuts nothing.

use std::path::{Path, PathBuf};

use simfs::{File, Fs, OpenOptions};
use tracing::{info, warn};

use crate::codec::{
    decode_frame, decode_frame_header, encode_padding, padding_len, FrameKind, FrameSeed, HeaderError, SegmentHeader,
    FRAME_ALIGN_BYTES, FRAME_HEADER_BYTES, SEGMENT_HEADER_BYTES,
};
use crate::error::{Error, Result};
use crate::evidence::{self, Headers, Justified, LostRecords};
use crate::journal::{self, Replayed, JOURNAL_COPY_NAME, JOURNAL_NAME};
use crate::meta::{read_meta, write_meta, CleanMarker, Meta, MetaWriteError, META_NAME};
use crate::options::RecoveryMode;
use crate::segment::{
    header_for, FrameReader, ReadStop, SegMeta, Segment, SegmentName, ACTIVE_SPARSE_STRIDE, SEGMENT_SUFFIX, TMP_SUFFIX,
};
use crate::sync::Arc;

/// What recovery found and did, from [`crate::Wal::recovery_report`].
///
/// ```
/// let r = wal::RecoveryReport::default();
/// assert_eq!(r.torn_bytes_cut, 0);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoveryReport {
    /// Sealed segments found.
    pub sealed_segments: usize,
    /// Whether an active segment was found.
    pub active_segment: bool,
    /// Bytes of the active segment scanned.
    pub scanned_bytes: u64,
    /// Bytes cut from the end of the active segment (a torn tail, or with
    /// `PointInTime` everything after the first damage).
    pub torn_bytes_cut: u64,
    /// Where the scan stopped and why, if not at a clean end.
    pub stop_reason: Option<String>,
    /// Files removed: temporary leftovers, torn new segments, leftovers of
    /// interrupted lifecycle operations, and a stale rewrite journal.
    pub removed_files: Vec<String>,
    /// Names in the directory that are not the log's and were left alone.
    pub ignored_files: Vec<String>,
    /// Whether a clean-shutdown marker let open skip scanning the active
    /// segment (no record data was read).
    pub clean_reopen: bool,
    /// Bytes of records rewritten before the fsync that makes them durable:
    /// records that were not known durable when the last frame was written
    /// (after a crash, or a stop on a failed fsync).
    pub rewritten_bytes: u64,
    /// Bytes an earlier recovery's rewrite journal put back into the active
    /// segment: that recovery was interrupted (a crash) while it rewrote or
    /// cut the segment, and this open finished its work first.
    pub journal_replayed_bytes: u64,
    /// Acknowledged records a recorded promise says existed but the directory
    /// no longer holds (only a `PointInTime` open continues without them;
    /// the other modes fail with `Error::MissingRecords`).
    pub lost: Vec<LostRecords>,
    /// Zero bytes cut after the last frame of the active segment: space
    /// preallocated ahead of the writer, never written (not a torn tail).
    pub zero_bytes_cut: u64,
    /// The open was read-only ([`crate::Options::read_only`]): nothing was
    /// written, removed, renamed or synced, and the fields above say what a
    /// writable open in the same mode would do (files it would remove,
    /// bytes it would cut or rewrite), not what was done.
    pub read_only: bool,
}

/// The recovered state handed to the engine.
pub(crate) struct Recovered<F: Fs> {
    pub segments: Vec<Arc<Segment<F>>>,
    /// The active segment's read-write handle, if there is an active segment.
    pub active_file: Option<Arc<F::File>>,
    pub first_index: u64,
    pub next_index: u64,
    pub next_segment_id: u64,
    /// The meta file as found (None for a new log).
    pub meta: Option<Meta>,
    /// The log's identity (`evidence::check_headers`).
    pub log_id: u128,
    pub report: RecoveryReport,
}

/// The arguments of one [`recover`] call, shared by its steps.
struct Opening<'a, F> {
    fs: &'a F,
    dir: &'a Path,
    mode: RecoveryMode,
    /// Where the log starts when no meta file says.
    default_first_index: u64,
    align_bytes: u64,
    read_only: bool,
    known_log_id: Option<u128>,
}

/// Runs recovery on a locked directory.
///
/// The steps, in order: an earlier recovery's interrupted rewrite is
/// finished (`journal::replay`); the names are settled and the leftovers
/// removed ([`settle_names`]); the active segment is opened
/// ([`recover_active`]); an interrupted full prune is finished
/// ([`finish_full_prune`]); the names are made durable and the torn tail cut
/// ([`make_recovery_durable`]); a loss a `PointInTime` open accepted is
/// recorded ([`accept_losses`]).
pub(crate) async fn recover<F: Fs>(
    fs: &F,
    dir: &Path,
    mode: RecoveryMode,
    default_first_index: u64,
    align_bytes: u64,
    read_only: bool,
    known_log_id: Option<u128>,
) -> Result<Recovered<F>> {
    let o = Opening {
        fs,
        dir,
        mode,
        default_first_index,
        align_bytes,
        read_only,
        known_log_id,
    };
    let mut report = RecoveryReport {
        read_only,
        ..RecoveryReport::default()
    };
    // An earlier recovery's interrupted rewrite is finished first, before
    // anything reads the segment it was writing.
    match journal::replay(fs, dir, read_only).await? {
        Replayed::Bytes(n) => report.journal_replayed_bytes = n,
        Replayed::Stale => report.removed_files.push(JOURNAL_NAME.to_string()),
        Replayed::None | Replayed::Torn => {}
    }
    let mut meta = read_meta(fs, dir).await?;
    let settled = settle_names(&o, meta, &mut report).await?;
    let low_water = meta.map(|m| m.low_water);
    let mut log = Rebuilt::from_sealed(dir, &settled.sealed, low_water.unwrap_or(default_first_index));
    report.sealed_segments = log.segments.len();
    recover_active(&o, &settled, &mut meta, &mut log, &mut report).await?;
    finish_full_prune(&o, low_water, &mut log, &mut report).await?;
    make_recovery_durable(&o, &mut log, &mut report).await?;
    let Rebuilt {
        segments,
        active_file,
        next_index,
        ..
    } = log;
    let (next_segment_id, log_id) = (settled.next_segment_id, settled.log_id);
    // The first index never moves backwards: the low-water mark holds it
    // even when every segment is gone.
    let first_index = segments
        .first()
        .map_or(next_index, |s| s.first_index)
        .max(low_water.unwrap_or(0))
        .min(next_index);
    if !report.lost.is_empty() {
        meta = Some(accept_losses(fs, dir, meta, (first_index, next_segment_id, log_id), read_only).await);
    }
    info!(
        dir = %dir.display(),
        sealed = report.sealed_segments,
        active = report.active_segment,
        first_index,
        next_index,
        torn_bytes_cut = report.torn_bytes_cut,
        stop = ?report.stop_reason,
        "recovered"
    );
    Ok(Recovered {
        segments,
        active_file,
        first_index,
        next_index,
        next_segment_id,
        meta,
        log_id,
        report,
    })
}

/// The log's names in the directory, sorted by [`list_names`].
struct Names {
    sealed: Vec<(SegmentName, String)>,
    active: Vec<(SegmentName, String)>,
    /// Temporary files and leftovers of interrupted operations.
    leftovers: Vec<String>,
}

/// The log's names once they proved valid (the leftovers removed), and
/// what they settled.
struct Settled {
    sealed: Vec<(SegmentName, String)>,
    active: Vec<(SegmentName, String)>,
    /// What the segment headers said (`evidence::check_headers`), restored
    /// compaction outputs added to `verified`.
    headers: Headers,
    /// The log's identity (`evidence::check_headers`).
    log_id: u128,
    /// The next segment id (see [`next_segment_id`]).
    next_segment_id: u64,
}

/// Sorts the directory's names: sealed and active segments, leftovers
/// (temporary files, a rewrite journal's copy), and names that are not the
/// log's (reported as ignored, left alone). The meta file and the rewrite
/// journal are read elsewhere. A directory with a segment's name, or a name
/// that looks like a segment's but does not parse, is `Corruption`: never
/// skipped.
async fn list_names<F: Fs>(fs: &F, dir: &Path, report: &mut RecoveryReport) -> Result<Names> {
    let entries = fs.read_dir(dir).await.map_err(|e| Error::io("read_dir", dir, 0, e))?;
    let mut sealed: Vec<(SegmentName, String)> = Vec::new();
    let mut active: Vec<(SegmentName, String)> = Vec::new();
    let mut leftovers = Vec::new();
    for entry in entries {
        if (entry.name == META_NAME || entry.name == JOURNAL_NAME) && !entry.is_dir {
            continue;
        }
        if (entry.name.ends_with(TMP_SUFFIX) || entry.name == JOURNAL_COPY_NAME) && !entry.is_dir {
            leftovers.push(entry.name);
            continue;
        }
        match SegmentName::parse(&entry.name) {
            Some(n @ SegmentName::Sealed { .. }) if !entry.is_dir => sealed.push((n, entry.name)),
            Some(n @ SegmentName::Active { .. }) if !entry.is_dir => active.push((n, entry.name)),
            Some(_) => {
                return Err(Error::corruption(
                    dir.join(&entry.name),
                    0,
                    "a directory has a segment's name",
                ));
            }
            None if entry.name.ends_with(SEGMENT_SUFFIX) => {
                return Err(Error::corruption(
                    dir.join(&entry.name),
                    0,
                    "file name looks like a segment but does not parse",
                ))
            }
            None => report.ignored_files.push(entry.name),
        }
    }
    Ok(Names {
        sealed,
        active,
        leftovers,
    })
}

/// Settles which names are the log's, on evidence and before any change:
/// the headers against the names (one log id), a compaction output whose
/// rename was lost restored when it is the only copy of some records
/// ([`restore_compaction_outputs`]), the leftovers of interrupted lifecycle
/// operations reconciled ([`reconcile`], each removal verified against what
/// justifies it), the names validated ([`validate_names`]), and the meta
/// file's low-water mark checked against the chain. Only then are the
/// leftovers removed: an open refused on evidence changes nothing.
async fn settle_names<F: Fs>(o: &Opening<'_, F>, meta: Option<Meta>, report: &mut RecoveryReport) -> Result<Settled> {
    let (fs, dir) = (o.fs, o.dir);
    let Names {
        mut sealed,
        active,
        mut leftovers,
    } = list_names(fs, dir, report).await?;
    // Evidence before any change: headers against names, one log id.
    let all: Vec<_> = sealed.iter().chain(active.iter()).cloned().collect();
    let mut headers = evidence::check_headers(fs, dir, meta.as_ref(), &all, o.known_log_id).await?;
    let log_id = headers.log_id;
    let low_water = meta.map(|m| m.low_water);
    restore_compaction_outputs(
        fs,
        dir,
        &mut sealed,
        &active,
        &mut leftovers,
        low_water.unwrap_or(o.default_first_index),
        &mut headers,
        o.read_only,
    )
    .await?;
    let (stale, justified) = reconcile(&mut sealed, &active, low_water);
    verify_justifiers(fs, dir, &headers, &justified).await?;
    leftovers.extend(stale);
    validate_names(dir, &sealed, &active)?;
    let chain_first = sealed.first().or(active.first()).map(|(n, s)| (n.first(), s.clone()));
    let chain_end = sealed_end(&sealed, low_water.unwrap_or(o.default_first_index));
    let lost = evidence::chain_promises(dir, meta.as_ref(), chain_first, chain_end, !active.is_empty());
    evidence::settle_losses(o.mode, 0, lost, &mut report.lost)?;
    // Temporary files and leftovers of interrupted operations: removed only
    // once the names proved valid (the directory fsync in
    // `make_recovery_durable` makes the removals durable).
    remove_leftovers(fs, dir, leftovers.into_iter().map(|n| dir.join(n)), report).await?;
    let next_segment_id = next_segment_id(dir, &sealed, &active, meta)?;
    Ok(Settled {
        sealed,
        active,
        headers,
        log_id,
        next_segment_id,
    })
}

/// The index after the last sealed segment: where the chain of sealed
/// names ends, `otherwise` when there is no sealed segment.
fn sealed_end(sealed: &[(SegmentName, String)], otherwise: u64) -> u64 {
    match sealed.last() {
        Some((SegmentName::Sealed { last, .. }, _)) => last.saturating_add(1),
        _ => otherwise,
    }
}

/// The next segment id: above every id in the directory, and at least the
/// meta file's high-water mark, so that an id never comes back. `Corruption`
/// when the ids are exhausted.
fn next_segment_id(
    dir: &Path,
    sealed: &[(SegmentName, String)],
    active: &[(SegmentName, String)],
    meta: Option<Meta>,
) -> Result<u64> {
    let above_every_name = sealed
        .iter()
        .chain(active.iter())
        .map(|(n, _)| n.id())
        .max()
        .map_or(Some(1), |m| m.checked_add(1))
        .ok_or_else(|| Error::corruption(dir, 0, "segment ids exhausted"))?;
    Ok(above_every_name.max(meta.map_or(1, |m| m.next_segment_id)))
}

/// The log as recovery rebuilds it: the segments it will serve, where it
/// ends, and what is left to do on the active segment once the names are
/// durable.
struct Rebuilt<F: Fs> {
    segments: Vec<Arc<Segment<F>>>,
    /// The active segment's read-write handle, if there is an active segment.
    active_file: Option<Arc<F::File>>,
    next_index: u64,
    /// Where the log starts when no segment holds a record: the low-water
    /// mark, else the options' first index.
    empty_next: u64,
    /// After a scan, the active segment's cut (`finish_active`). `None`
    /// after a clean reopen (nothing to cut).
    to_finish: Option<PendingCut<F::File>>,
    /// The scan wrote the rewrite journal (`journal`): removed, durably,
    /// once the rewrite and the cut are done.
    journaled: bool,
}

/// The cut of the active segment's tail that the open makes last
/// (`finish_active`), as its scan found it.
struct PendingCut<Fl> {
    file: Arc<Fl>,
    path: PathBuf,
    /// The end of the last committed frame: where the cut goes.
    end: u64,
    /// The file's length.
    len: u64,
    /// Everything after `end` is zero (preallocated space, not a torn tail).
    zeros: bool,
}

impl<F: Fs> Rebuilt<F> {
    /// The log the sealed segments make, before the active segment is
    /// looked at: each sealed segment trusted by name (no data is read at
    /// open; it is checked when read), the log ending after the last one,
    /// or at `empty_next` without one.
    fn from_sealed(dir: &Path, sealed: &[(SegmentName, String)], empty_next: u64) -> Self {
        let segments = sealed
            .iter()
            .filter_map(|(n, name)| match *n {
                SegmentName::Sealed { first, last, id } => Some((first, last, id, name)),
                SegmentName::Active { .. } => None,
            })
            .map(|(first, last, id, name)| {
                Arc::new(Segment::new(
                    id,
                    first,
                    SegMeta::sealed_unscanned(dir.join(name), last),
                    None,
                ))
            })
            .collect();
        Rebuilt {
            segments,
            active_file: None,
            next_index: sealed_end(sealed, empty_next),
            empty_next,
            to_finish: None,
            journaled: false,
        }
    }
}

/// Adds the active segment, if there is one, to `log`: opened by the
/// clean-shutdown marker or by a scan ([`open_active`]). A torn new segment
/// is removed instead ([`remove_torn_active`]). Without an active segment,
/// a marker that names none (id 0) still makes the open a clean reopen.
async fn recover_active<F: Fs>(
    o: &Opening<'_, F>,
    settled: &Settled,
    meta: &mut Option<Meta>,
    log: &mut Rebuilt<F>,
    report: &mut RecoveryReport,
) -> Result<()> {
    let Some((name, file_name)) = settled.active.first() else {
        if meta.and_then(|m| m.clean).is_some_and(|c| c.active_id == 0) {
            report.clean_reopen = true;
        }
        return Ok(());
    };
    let path = o.dir.join(file_name);
    match open_active(o, (name, file_name), settled, *meta, &path, report).await? {
        ActiveScan::Torn => {
            remove_torn_active(o, &path, log, settled, meta).await?;
            report.removed_files.push(file_name.clone());
            // It never held an acknowledged record, so its name says
            // nothing about the log: an empty log starts where the meta
            // file (or the options) say, as the next open will.
            if settled.sealed.is_empty() {
                log.next_index = log.empty_next;
            }
        }
        ActiveScan::Valid {
            file,
            next,
            end_offset,
            sparse,
            sparse_complete,
            finish,
            journaled,
        } => {
            log.journaled = journaled;
            report.active_segment = true;
            let last_index = if next > name.first() { Some(next - 1) } else { None };
            log.segments.push(Arc::new(Segment::new(
                name.id(),
                name.first(),
                SegMeta {
                    path: path.clone(),
                    last_index,
                    sealed: false,
                    end_offset,
                    sparse,
                    sparse_complete,
                    damage: None,
                },
                Some(file.clone()),
            )));
            log.active_file = Some(file.clone());
            log.to_finish = finish.map(|(len, zeros)| PendingCut {
                file,
                path: path.clone(),
                end: end_offset,
                len,
                zeros,
            });
            log.next_index = next;
        }
    }
    Ok(())
}

/// Opens the active segment `name` at `path`: without reading record data
/// when the clean-shutdown marker vouches for it ([`fast_open`]), else by a
/// scan that cuts a torn tail ([`scan_active`]).
async fn open_active<F: Fs>(
    o: &Opening<'_, F>,
    (name, file_name): (&SegmentName, &String),
    settled: &Settled,
    meta: Option<Meta>,
    path: &Path,
    report: &mut RecoveryReport,
) -> Result<ActiveScan<F::File>> {
    // The marker vouches for the frames, not for the header: a lying
    // fsync can lose a new segment's header before a clean close, and
    // appends behind a header no open can read are lost (soak seed
    // 92013153). Without a verified header the segment is scanned.
    let clean = meta
        .and_then(|m| m.clean)
        .filter(|c| c.active_id == name.id())
        .filter(|_| settled.headers.verified.contains(file_name));
    let scan = match clean {
        Some(c) => fast_open(o.fs, path, name.first(), c, o.align_bytes, o.read_only).await?,
        None => None,
    };
    let scan = match scan {
        Some(s) => {
            report.clean_reopen = true;
            s
        }
        None => {
            let promised = meta.and_then(|m| m.clean).map(|c| c.next_index);
            let at = ScanAt {
                id: name.id(),
                first: name.first(),
                log_id: settled.log_id,
                promised,
            };
            scan_active(o.fs, path, at, o.mode, o.align_bytes, report).await?
        }
    };
    Ok(scan)
}

/// Removes the active segment at `path` after its scan found it torn (a
/// new segment whose header never became durable, holding no valid frame),
/// having first recorded the segment-id high-water mark in the meta file
/// (best effort), so that its id never comes back. `meta` becomes the
/// recorded (or, read-only, the would-be) meta file.
async fn remove_torn_active<F: Fs>(
    o: &Opening<'_, F>,
    path: &Path,
    log: &Rebuilt<F>,
    settled: &Settled,
    meta: &mut Option<Meta>,
) -> Result<()> {
    let (next_segment_id, log_id) = (settled.next_segment_id, settled.log_id);
    // A new segment whose header never became durable, holding no
    // valid frame: nothing in it was ever acknowledged. Its id
    // must not come back: record the id high-water mark first.
    // A new meta file's mark is where the log starts now: the
    // first sealed segment's first index, if any (an empty
    // log's next index otherwise). `empty_next` alone could be
    // above a sealed segment that starts below the configured
    // first index, and the next open would start at the mark
    // (found by the `recover` fuzz target: not idempotent).
    let low_water = log.segments.first().map_or(log.empty_next, |s| s.first_index);
    let m = Meta {
        next_segment_id,
        clean: None,
        log_id,
        ..meta.unwrap_or(Meta {
            low_water,
            next_segment_id,
            clean: None,
            log_id,
        })
    };
    // Best effort: a full disk must not stop the open, and a
    // reused id of a file that is gone is harmless.
    if o.read_only {
        *meta = Some(m);
    } else {
        match write_meta(o.fs, o.dir, &m).await {
            Ok(()) => *meta = Some(m),
            Err(MetaWriteError::NotWritten(e) | MetaWriteError::Unknown(e)) => {
                warn!(error = %e, "could not record the segment-id high-water mark")
            }
        }
        o.fs.remove_file(path)
            .await
            .map_err(|e| Error::io("remove", path, 0, e))?;
    }
    Ok(())
}

/// An interrupted prune through the end of the log: the low-water mark
/// is durable, every segment is below it. They are leftovers: removed, and
/// the log, now empty, ends at the mark. Nothing to do otherwise.
async fn finish_full_prune<F: Fs>(
    o: &Opening<'_, F>,
    low_water: Option<u64>,
    log: &mut Rebuilt<F>,
    report: &mut RecoveryReport,
) -> Result<()> {
    let Some(low) = low_water.filter(|&low| log.next_index < low) else {
        return Ok(());
    };
    // The journal goes first: it names the active segment, and once
    // that is gone the journal is only a stale file for the next open.
    if std::mem::take(&mut log.journaled) && !o.read_only {
        journal::remove(o.fs, o.dir).await?;
    }
    let doomed: Vec<_> = log.segments.drain(..).map(|seg| seg.path()).collect();
    remove_leftovers(o.fs, o.dir, doomed.into_iter(), report).await?;
    report.active_segment = false;
    log.active_file = None;
    log.to_finish = None;
    log.next_index = low;
    Ok(())
}

/// The open's last steps: makes the names durable (one directory fsync),
/// cuts the active segment's torn or zero tail ([`finish_active`]), then
/// removes the rewrite journal, whose copy is no longer needed.
async fn make_recovery_durable<F: Fs>(
    o: &Opening<'_, F>,
    log: &mut Rebuilt<F>,
    report: &mut RecoveryReport,
) -> Result<()> {
    // After a process crash, names (new segments, seals, removals) may exist
    // only in the page cache; they are served from now on, so make them
    // durable. One directory fsync per open; it needs no free space.
    if !o.read_only {
        o.fs.sync_dir(o.dir)
            .await
            .map_err(|e| Error::io("sync_dir", o.dir, 0, e))?;
    }
    if let Some(PendingCut {
        file,
        path,
        end,
        len,
        zeros,
    }) = log.to_finish.take()
    {
        finish_active(&*file, &path, (end, len, zeros), report).await?;
    }
    // The rewrite and the cut are durable: the journal's copy is not needed
    // any more, and must not outlive this open (a replay after the log moved
    // on would write old bytes over newer ones).
    if log.journaled && !o.read_only {
        journal::remove(o.fs, o.dir).await?;
    }
    Ok(())
}

/// Makes a `PointInTime` open's acceptance of lost records the meta file's
/// new promise: the low-water mark rises to where the log now starts and the
/// clean-shutdown marker, which promised the lost records, goes. Without it
/// the next clean close would write the old mark back and a later strict
/// open would fail with `MissingRecords` on a disk with no new fault (seeds
/// 90005835, 90004374). Best effort: when the write fails the old promise
/// stays on disk and a strict open keeps refusing, which is honest; memory
/// holds the new mark either way, so later meta writes carry it, and after a
/// failed write the old marker too, so that the first change clears it.
async fn accept_losses<F: Fs>(
    fs: &F,
    dir: &Path,
    meta: Option<Meta>,
    (first_index, next_segment_id, log_id): (u64, u64, u128),
    read_only: bool,
) -> Meta {
    let m = Meta {
        low_water: meta.map_or(first_index, |m| m.low_water.max(first_index)),
        next_segment_id: meta.map_or(next_segment_id, |m| m.next_segment_id.max(next_segment_id)),
        clean: None,
        log_id,
    };
    if read_only {
        return m;
    }
    // Until a meta write records `m`, the file may still hold the old
    // clean-shutdown marker, whose next index promises the lost records:
    // memory keeps it, so that the first change clears it (with the raised
    // mark) before it makes the promise false (soak seed 97026907: a
    // truncation after this write failed left the marker standing).
    let unrecorded = Meta {
        clean: meta.and_then(|old| old.clean),
        ..m
    };
    match write_meta(fs, dir, &m).await {
        Ok(()) => {}
        Err(MetaWriteError::NotWritten(e)) => {
            warn!(error = %e, "could not record the accepted loss in the meta file");
            return unrecorded;
        }
        Err(MetaWriteError::Unknown(e)) => {
            // The rename may have taken effect without the directory fsync
            // that makes it durable: a power loss would bring the old mark
            // back (soak seed 91075929). Whichever file stands, make it
            // the durable one (best effort as well; memory keeps `m`, which
            // the next meta write records).
            warn!(error = %e, "could not record the accepted loss in the meta file");
            if let Err(e) = fs.sync_dir(dir).await {
                warn!(error = %e, "could not make the meta file's directory durable");
            }
            return unrecorded;
        }
    }
    m
}

/// Removes leftover files. A failed removal does not stop the others (each
/// open makes progress, however flaky the disk); the first error is returned
/// once the removals done so far are made durable.
async fn remove_leftovers<F: Fs>(
    fs: &F,
    dir: &Path,
    paths: impl Iterator<Item = std::path::PathBuf>,
    report: &mut RecoveryReport,
) -> Result<()> {
    let paths: Vec<_> = paths.collect();
    if report.read_only {
        let names = paths
            .iter()
            .filter_map(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned());
        report.removed_files.extend(names);
        return Ok(());
    }
    // A segment is a leftover only because another name says so (a
    // compaction output covering it, a meta file's low-water mark above it,
    // a truncation's rewritten holder), and that name may still be only in
    // the page cache (a process crash right after its rename). It is made
    // durable before anything it justifies goes: otherwise a power loss can
    // keep the removals and lose the name (seed 20016724: a compaction
    // output's rename lost, two of its four inputs gone, a gap).
    let segments = paths.iter().any(|p| !p.to_string_lossy().ends_with(TMP_SUFFIX));
    if segments {
        fs.sync_dir(dir).await.map_err(|e| Error::io("sync_dir", dir, 0, e))?;
    }
    let mut first_error = None;
    for path in paths {
        match fs.remove_file(&path).await {
            Ok(()) => report.removed_files.push(
                path.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            ),
            Err(e) => {
                first_error.get_or_insert(Error::io("remove", &path, 0, e));
            }
        }
    }
    match first_error {
        None => Ok(()),
        Some(e) => {
            let _ = fs.sync_dir(dir).await;
            Err(e)
        }
    }
}

/// Renames into place a compaction output left under its temporary name
/// (`{first}-{last}-{id}.wal.tmp`) when it is the only copy of some records:
/// indices of its range, at or above the low-water mark `low`, that no
/// remaining segment holds while a remaining segment starts above them (a
/// hole, or a missing prefix; never a missing suffix, which a truncation
/// leaves). Compaction renames its output into place and fsyncs the
/// directory before it removes any input, so with honest fsyncs this never
/// happens; after a directory fsync that returned Ok without persisting
/// (a lying device), a power loss can keep the unlink of an input and lose
/// the output's rename (simulation seed 8002980: segment 0-178 gone, its
/// records only in the output's temporary file, which recovery then
/// deleted as a leftover). The output is used only once every frame of its
/// range checks (`Segment::verify_whole`, as for any sealed segment); the
/// rename is made durable before any input is removed (reconcile rule 3
/// then removes the inputs it contains). A damaged output stays a leftover;
/// a read error fails the open, nothing removed.
#[allow(clippy::too_many_arguments)]
async fn restore_compaction_outputs<F: Fs>(
    fs: &F,
    dir: &Path,
    sealed: &mut Vec<(SegmentName, String)>,
    active: &[(SegmentName, String)],
    leftovers: &mut Vec<String>,
    low: u64,
    headers: &mut Headers,
    read_only: bool,
) -> Result<()> {
    let log_id = headers.log_id;
    let mut restored = Vec::new();
    for tmp_name in leftovers.iter() {
        let Some((first, last, id, final_name)) = missing_records_output(tmp_name, sealed, active, low) else {
            continue;
        };
        let range = (first, last, id);
        let Some(name) = restore_output(fs, dir, tmp_name, range, final_name, log_id, read_only).await? else {
            continue;
        };
        // Its header and every frame checked (`output_is_sound`).
        headers.verified.push(name.clone());
        sealed.push((SegmentName::Sealed { first, last, id }, name));
        restored.push(tmp_name.clone());
    }
    if !restored.is_empty() {
        leftovers.retain(|n| !restored.contains(n));
        sealed.sort_by(|a, b| a.1.cmp(&b.1));
    }
    Ok(())
}

/// The range (`first`, `last`, `id`) and final name of a leftover that is a
/// compaction output under its temporary name holding records no remaining
/// segment holds (`holds_missing_records`). `None` for any other leftover,
/// and for an output that a segment at least as new overlaps (stale).
fn missing_records_output(
    tmp_name: &str,
    sealed: &[(SegmentName, String)],
    active: &[(SegmentName, String)],
    low: u64,
) -> Option<(u64, u64, u64, String)> {
    let stem = tmp_name.strip_suffix(TMP_SUFFIX)?;
    let final_name = format!("{stem}{SEGMENT_SUFFIX}");
    let Some(SegmentName::Sealed { first, last, id }) = SegmentName::parse(&final_name) else {
        return None;
    };
    if !holds_missing_records(sealed, active, first, last, low) {
        return None;
    }
    if let Some(newer) = newer_overlapping(sealed, active, first, last, id) {
        // Ids only grow, and a truncation keeps its segment's id: a
        // segment at least as new as this output that holds some of its
        // indices was written after the compaction (a truncation's
        // rewrite, or appends after a prune or truncation) and holds
        // the newer version of them. The output is stale; its "missing"
        // indices were pruned or truncated (simulation seed 50045635).
        warn!(output = %tmp_name, newer = %newer, "a compaction output overlaps a newer segment: stale, left as a leftover");
        return None;
    }
    Some((first, last, id, final_name))
}

/// Restores one compaction output that holds missing records, if it is
/// sound (`output_is_sound`): renames it to `final_name` and makes the
/// rename durable, before any input is removed. Returns the name the output
/// is served under (a read-only open serves it under its temporary name), or
/// `None` when it stays a leftover. A read error fails the open.
async fn restore_output<F: Fs>(
    fs: &F,
    dir: &Path,
    tmp_name: &str,
    (first, last, id): (u64, u64, u64),
    final_name: String,
    log_id: u128,
    read_only: bool,
) -> Result<Option<String>> {
    let tmp_path = dir.join(tmp_name);
    // The check opens the file through `seg`, which keeps it open until
    // this returns (after the rename).
    let seg: Segment<F> = Segment::new(id, first, SegMeta::sealed_unscanned(tmp_path.clone(), last), None);
    if !output_is_sound(fs, &seg, &tmp_path, log_id).await? {
        return Ok(None);
    }
    let final_path = dir.join(&final_name);
    if read_only {
        // Served from where it is; a writable open renames it.
        info!(output = %tmp_path.display(), "a writable open would restore this compaction output");
        return Ok(Some(tmp_name.to_string()));
    }
    fs.rename(&tmp_path, &final_path)
        .await
        .map_err(|e| Error::io("rename", &tmp_path, 0, e))?;
    fs.sync_dir(dir).await.map_err(|e| Error::io("sync_dir", dir, 0, e))?;
    warn!(
        segment = %final_path.display(),
        first,
        last,
        "restored a compaction output whose rename was lost: it held records no other segment had"
    );
    Ok(Some(final_name))
}

/// Whether a compaction output can be restored: every frame of its range
/// checks (`Segment::verify_whole`, as for any sealed segment) and its
/// header is this log's (or carries no log id). A damaged output, or one of
/// another log, stays a leftover (a warning says why); a read error fails
/// the open.
async fn output_is_sound<F: Fs>(fs: &F, seg: &Segment<F>, tmp_path: &Path, log_id: u128) -> Result<bool> {
    match seg.verify_whole(fs).await {
        Ok(()) => {}
        Err(e @ Error::Corruption { .. }) => {
            warn!(path = %tmp_path.display(), error = %e, "a compaction output holding missing records is damaged");
            return Ok(false);
        }
        Err(e) => return Err(e),
    }
    match evidence::read_header(fs, tmp_path).await? {
        Some(h) if h.log_id == 0 || h.log_id == log_id => Ok(true),
        _ => {
            warn!(path = %tmp_path.display(), "a compaction output of another log (or unreadable header): left as a leftover");
            Ok(false)
        }
    }
}

/// The name of a segment whose id is at least `id` and whose range meets
/// `[first, last]`, if there is one.
fn newer_overlapping<'a>(
    sealed: &'a [(SegmentName, String)],
    active: &'a [(SegmentName, String)],
    first: u64,
    last: u64,
    id: u64,
) -> Option<&'a str> {
    sealed.iter().chain(active.iter()).find_map(|(n, s)| {
        let (f, l) = match *n {
            SegmentName::Sealed { first, last, .. } => (first, last),
            SegmentName::Active { first, .. } => (first, u64::MAX),
        };
        (n.id() >= id && f <= last && l >= first).then_some(s.as_str())
    })
}

/// Whether some index of `[first, last]`, at or above `low`, is held by no
/// segment name while a segment starts above it.
fn holds_missing_records(
    sealed: &[(SegmentName, String)],
    active: &[(SegmentName, String)],
    first: u64,
    last: u64,
    low: u64,
) -> bool {
    let mut ranges: Vec<(u64, u64)> = sealed
        .iter()
        .chain(active.iter())
        .map(|(n, _)| match *n {
            SegmentName::Sealed { first, last, .. } => (first, last),
            SegmentName::Active { first, .. } => (first, u64::MAX),
        })
        .collect();
    ranges.sort_unstable();
    let mut at = first.max(low);
    for &(f, l) in &ranges {
        if at > last {
            return false;
        }
        if f > at {
            // `at` is missing, and this segment starts above it.
            return true;
        }
        at = at.max(l.saturating_add(1));
    }
    false
}

/// Reconciles leftovers of interrupted lifecycle operations and returns the
/// names to remove, and for each removal a name justifies, that name. Each
/// rule keeps exactly one copy of every index:
/// - segments wholly below the low-water mark: an interrupted prune (the
///   meta file, checksummed and of this log, justifies it);
/// - a sealed segment with the same id and first index as the active one:
///   an interrupted truncation that rewrote the sealed segment as active
///   (justified by the active segment's header);
/// - sealed segments whose range lies inside a sealed segment with a higher
///   id: the inputs of an interrupted compaction (its output is renamed into
///   place only once durable, so it is complete; justified by the output,
///   read end to end).
fn reconcile(
    sealed: &mut Vec<(SegmentName, String)>,
    active: &[(SegmentName, String)],
    low_water: Option<u64>,
) -> (Vec<String>, Vec<Justified>) {
    let mut stale = Vec::new();
    let mut justified = Vec::new();
    let range = |n: &SegmentName| match *n {
        SegmentName::Sealed { first, last, .. } => (first, last),
        SegmentName::Active { first, .. } => (first, u64::MAX),
    };
    if let Some(low) = low_water {
        let below = |n: &SegmentName| match *n {
            SegmentName::Sealed { last, .. } => last < low,
            SegmentName::Active { .. } => false,
        };
        stale.extend(sealed.iter().filter(|(n, _)| below(n)).map(|(_, s)| s.clone()));
        sealed.retain(|(n, _)| !below(n));
    }
    for (an, aname) in active {
        for (_, name) in sealed
            .iter()
            .filter(|(n, _)| (n.first(), n.id()) == (an.first(), an.id()))
        {
            justified.push(Justified {
                removed: name.clone(),
                justifier: aname.clone(),
                full: false,
            });
            stale.push(name.clone());
        }
    }
    let rewritten: Vec<(u64, u64)> = active.iter().map(|(n, _)| (n.first(), n.id())).collect();
    sealed.retain(|(n, _)| !rewritten.contains(&(n.first(), n.id())));
    let outputs: Vec<(u64, u64, u64, String)> = sealed
        .iter()
        .map(|(n, s)| {
            let (f, l) = range(n);
            (f, l, n.id(), s.clone())
        })
        .collect();
    let covering = |n: &SegmentName| {
        let (f, l) = range(n);
        outputs
            .iter()
            .find(|&&(of, ol, oid, _)| oid > n.id() && of <= f && l <= ol)
            .map(|o| o.3.clone())
    };
    for (n, name) in sealed.iter() {
        if let Some(by) = covering(n) {
            justified.push(Justified {
                removed: name.clone(),
                justifier: by,
                full: true,
            });
            stale.push(name.clone());
        }
    }
    sealed.retain(|(n, _)| covering(n).is_none());
    (stale, justified)
}

/// Verifies, before anything is removed, each file whose name makes another
/// a leftover (`reconcile`): its header, and for a compaction output every
/// frame of its range. Damage is `Corruption` naming it; nothing removed.
async fn verify_justifiers<F: Fs>(fs: &F, dir: &Path, headers: &Headers, justified: &[Justified]) -> Result<()> {
    #[cfg(feature = "planted-bugs")]
    if crate::testing::planted(crate::testing::Planted::NamesTrusted) {
        return Ok(());
    }
    let mut read_through: Vec<&str> = Vec::new();
    for j in justified {
        evidence::justify(dir, headers, j)?;
        if !j.full || read_through.contains(&j.justifier.as_str()) {
            continue;
        }
        let Some(SegmentName::Sealed { first, last, id }) = SegmentName::parse(&j.justifier) else {
            continue;
        };
        let seg: Segment<F> = Segment::new(id, first, SegMeta::sealed_unscanned(dir.join(&j.justifier), last), None);
        seg.verify_whole(fs).await?;
        read_through.push(&j.justifier);
    }
    Ok(())
}

/// Opens the active segment without reading record data, if the clean
/// shutdown marker matches it (same id, and the file ends where the marker
/// says the last frame ends, or at the next multiple of `align_bytes` above
/// it: close cuts the zero tail there, never inside the atomic unit that
/// holds the last frame, see `Writer::trim_tail`). `None`: fall back to a
/// scan.
async fn fast_open<F: Fs>(
    fs: &F,
    path: &Path,
    first: u64,
    clean: CleanMarker,
    align_bytes: u64,
    read_only: bool,
) -> Result<Option<ActiveScan<F::File>>> {
    let file = fs
        .open(path, OpenOptions::new().read(true).write(!read_only))
        .await
        .map_err(|e| Error::io("open", path, 0, e))?;
    let len = file.len().await.map_err(|e| Error::io("len", path, 0, e))?;
    let end = clean.active_len;
    let matches = len == end || (len > end && len == end.next_multiple_of(align_bytes.max(1)));
    if !matches || clean.next_index < first || end < SEGMENT_HEADER_BYTES as u64 {
        warn!(path = %path.display(), len, marker = ?clean, "clean-shutdown marker does not match; scanning");
        return Ok(None);
    }
    Ok(Some(ActiveScan::Valid {
        file: Arc::new(file),
        next: clean.next_index,
        end_offset: end,
        sparse: Vec::new(),
        sparse_complete: false,
        finish: None,
        journaled: false,
    }))
}

/// Gaps, overlaps, duplicates and misplaced active segments are corruption.
fn validate_names(dir: &Path, sealed: &[(SegmentName, String)], active: &[(SegmentName, String)]) -> Result<()> {
    if active.len() > 1 {
        return Err(Error::corruption(
            dir.join(&active[1].1),
            0,
            format!("two active segments: {} and {}", active[0].1, active[1].1),
        ));
    }
    let mut ids: Vec<u64> = sealed.iter().chain(active.iter()).map(|(n, _)| n.id()).collect();
    ids.sort_unstable();
    if ids.windows(2).any(|w| w[0] == w[1]) {
        return Err(Error::corruption(dir, 0, "two segments share a segment id"));
    }
    let mut expected_first: Option<u64> = None;
    for (n, name) in sealed {
        let SegmentName::Sealed { first, last, .. } = *n else {
            continue;
        };
        if last < first {
            return Err(Error::corruption(
                dir.join(name),
                0,
                "sealed segment with last index below first",
            ));
        }
        if let Some(e) = expected_first {
            if first != e {
                let what = if first > e { "gap" } else { "overlap" };
                return Err(Error::corruption(
                    dir.join(name),
                    0,
                    format!("{what} in segment ranges: segment starts at {first}, expected {e}"),
                ));
            }
        }
        expected_first = last.checked_add(1);
        if expected_first.is_none() {
            return Err(Error::corruption(dir.join(name), 0, "sealed segment ends at u64::MAX"));
        }
    }
    if let (Some((n, name)), Some(e)) = (active.first(), expected_first) {
        if n.first() != e {
            return Err(Error::corruption(
                dir.join(name),
                0,
                format!("active segment starts at {}, expected {e}", n.first()),
            ));
        }
    }
    Ok(())
}

enum ActiveScan<Fl> {
    /// The segment never became valid: remove it.
    Torn,
    /// The segment, cut to its last committed frame.
    Valid {
        file: Arc<Fl>,
        next: u64,
        end_offset: u64,
        sparse: Vec<(u64, u64)>,
        /// False when the segment was not scanned (clean reopen): the sparse
        /// index is built on first read.
        sparse_complete: bool,
        /// After a scan: the file's length, and whether everything after
        /// `end_offset` is zero (preallocated space, not a torn tail);
        /// `recover` ends with `finish_active` (cut from `end_offset`,
        /// fsync). `None` after a clean reopen (nothing to cut).
        finish: Option<(u64, bool)>,
        /// The scan wrote the rewrite journal (`journal`): `recover` removes
        /// it, durably, once the rewrite and the cut are done.
        journaled: bool,
    },
}

/// Which active segment a scan reads, and what it must hold.
struct ScanAt {
    id: u64,
    first: u64,
    log_id: u128,
    /// The clean-shutdown marker's next index: the scan must reach it.
    promised: Option<u64>,
}

/// Records the clean-shutdown marker promised and the scan did not find:
/// an error outside `PointInTime` (nothing changed yet), else reported.
fn check_promise(
    path: &Path,
    offset: u64,
    next: u64,
    promised: Option<u64>,
    mode: RecoveryMode,
    report: &mut RecoveryReport,
) -> Result<()> {
    let Some(p) = promised.filter(|&p| next < p) else {
        return Ok(());
    };
    let lost = LostRecords {
        first: next,
        end: p,
        path: path.to_path_buf(),
        evidence: evidence::marker_evidence(p),
    };
    evidence::settle_losses(mode, offset, vec![lost], &mut report.lost)
}

/// Scans the active segment and cuts a torn tail.
///
/// The steps, each a method of [`ActiveFile`]: the header against the name
/// (`is_torn_creation`), the frames (`read_frames`), what the damage that
/// stopped them means (`judge_damage`), then the clean-shutdown marker's
/// promise (`check_promise`), and last what the frames committed is made
/// durable (`keep_committed`).
async fn scan_active<F: Fs>(
    fs: &F,
    path: &Path,
    at: ScanAt,
    mode: RecoveryMode,
    align_bytes: u64,
    report: &mut RecoveryReport,
) -> Result<ActiveScan<F::File>> {
    let ScanAt {
        id,
        first,
        log_id,
        promised,
    } = at;
    let read_only = report.read_only;
    let file = fs
        .open(path, OpenOptions::new().read(true).write(!read_only))
        .await
        .map_err(|e| Error::io("open", path, 0, e))?;
    let file = Arc::new(file);
    let len = file.len().await.map_err(|e| Error::io("len", path, 0, e))?;
    report.scanned_bytes = len;
    let expected_header = header_for(log_id, id, first);
    let seed = expected_header.frame_seed();
    let active = ActiveFile {
        file,
        path,
        seed,
        len,
        first,
        promised,
        mode,
    };
    if active.is_torn_creation(&expected_header, report).await? {
        return Ok(ActiveScan::Torn);
    }
    let (scan, damage) = active.read_frames().await?;
    let stop_offset = damage.as_ref().map_or(scan.committed_end, |d| d.0);
    let zero_tail = active.judge_damage(damage, &scan, report).await?;
    check_promise(path, stop_offset, scan.next, promised, mode, report)?;
    active.keep_committed(fs, scan, zero_tail, align_bytes, report).await
}

/// The active segment as [`scan_active`] reads it: the open file, and what
/// each step of the scan checks it against.
struct ActiveFile<'a, Fl> {
    file: Arc<Fl>,
    path: &'a Path,
    /// The seed of the segment's frames, from the header its name implies.
    seed: FrameSeed,
    /// The file's length when the scan began.
    len: u64,
    /// The segment's first index, from its name.
    first: u64,
    /// The clean-shutdown marker's next index: the scan must reach it.
    promised: Option<u64>,
    mode: RecoveryMode,
}

impl<Fl: File> ActiveFile<'_, Fl> {
    /// Reads the header and checks it against the name. `Ok(false)`: it is
    /// the name's, the frames follow. `Ok(true)`: a torn creation, reported
    /// (`judge_bad_header`); the caller removes the segment. A header that
    /// decodes but is not the name's is `Corruption`.
    async fn is_torn_creation(&self, expected_header: &SegmentHeader, report: &mut RecoveryReport) -> Result<bool> {
        let path = self.path;
        let mut hbuf = vec![0u8; SEGMENT_HEADER_BYTES.min(self.len as usize)];
        self.file
            .read_exact_at(&mut hbuf, 0)
            .await
            .map_err(|e| Error::io("read", path, 0, e))?;
        match SegmentHeader::decode(&hbuf) {
            Ok(h) if expected_header.same_segment(&h) => Ok(false),
            Ok(h) => Err(Error::corruption(
                path,
                0,
                format!("header {h:?} does not match the name (expected {expected_header:?})"),
            )),
            Err(e) => {
                self.judge_bad_header(e, report).await?;
                Ok(true)
            }
        }
    }

    /// Decides what a header that does not decode means: `Ok(())` for a
    /// torn creation (reported in `report`), else `Corruption` (a newer
    /// format, `AbsoluteConsistency`, or valid frames after it). A promise
    /// of the clean-shutdown marker the segment cannot keep is settled
    /// first (`check_promise`).
    async fn judge_bad_header(&self, e: HeaderError, report: &mut RecoveryReport) -> Result<()> {
        let path = self.path;
        // The header is written and synced before any frame, so a bad
        // header is a torn creation unless a valid frame proves otherwise.
        // A newer format is never "torn": refuse it rather than delete it.
        if let HeaderError::UnsupportedVersion(v) = e {
            return Err(Error::corruption(
                path,
                0,
                format!("segment of unsupported format version {v}"),
            ));
        }
        if self.mode == RecoveryMode::AbsoluteConsistency {
            return Err(Error::corruption(
                path,
                0,
                format!("bad segment header ({e}) (absolute consistency: no torn segment tolerated)"),
            ));
        }
        if find_valid_frame(
            &*self.file,
            path,
            self.seed,
            SEGMENT_HEADER_BYTES as u64,
            self.len,
            None,
        )
        .await?
        .is_some()
        {
            return Err(Error::corruption(
                path,
                0,
                format!("bad segment header ({e}) before valid frames"),
            ));
        }
        check_promise(path, 0, self.first, self.promised, self.mode, report)?;
        warn!(path = %path.display(), error = ?e, "removing a new segment whose header is torn");
        report.stop_reason = Some(format!("torn segment header ({e}) at offset 0"));
        Ok(())
    }

    /// Reads the frames after the header, each taken by [`Scan::accept`], up
    /// to the first that is not valid and in sequence. Returns what they
    /// committed and, unless the scan reached a clean end, where it stopped
    /// and why. A read error fails the open (nothing is cut).
    async fn read_frames(&self) -> Result<(Scan, Option<(u64, String)>)> {
        let first = self.first;
        let mut reader = FrameReader::new(self.file.clone(), self.seed, SEGMENT_HEADER_BYTES as u64, self.len);
        let mut scan = Scan {
            next: first,
            committed_end: SEGMENT_HEADER_BYTES as u64,
            batch_next: first,
            sparse: Vec::new(),
            batch_sparse: Vec::new(),
            first,
            durable_hint: 0,
            batch_durable_hint: 0,
        };
        let damage = loop {
            match reader.next_raw_header().await {
                Ok(f) => {
                    if let Err(reason) = scan.accept(f.offset, f.header) {
                        break Some((f.offset, reason));
                    }
                }
                Err(ReadStop::End { .. }) if scan.batch_next == scan.next => break None,
                Err(ReadStop::End { offset }) => break Some((offset, "batch without its end frame".to_string())),
                Err(ReadStop::Io { offset, error }) => return Err(Error::io("read", self.path, offset, error)),
                Err(ReadStop::Bad { offset, error }) => break Some((offset, error.to_string())),
            }
        };
        Ok((scan, damage))
    }

    /// Decides what the damage that stopped the scan means, if any: only
    /// zeros after it, with no batch open, is a clean end (space
    /// preallocated ahead of the writer, never written); otherwise
    /// `decide_cut` tells a torn tail from mid-log corruption (a loss it
    /// proves is settled by mode), and the stop is reported. Returns whether
    /// the tail after the committed frames counts as zeros (true when there
    /// was no damage).
    async fn judge_damage(
        &self,
        damage: Option<(u64, String)>,
        scan: &Scan,
        report: &mut RecoveryReport,
    ) -> Result<bool> {
        let (path, next, len) = (self.path, scan.next, self.len);
        let mut zero_tail = true;
        if let Some((bad_offset, reason)) = damage {
            zero_tail = scan.batch_next == next && is_zero(&*self.file, path, bad_offset, len).await?;
            if !zero_tail {
                if let Some(lost) =
                    decide_cut(&self.file, path, self.seed, self.mode, bad_offset, &reason, next, len).await?
                {
                    evidence::settle_losses(self.mode, bad_offset, vec![lost], &mut report.lost)?;
                }
                report.stop_reason = Some(format!("{reason} at offset {bad_offset}, index {next}"));
            }
        }
        Ok(zero_tail)
    }

    /// Keeps what the frames committed, durably: the records not known
    /// durable are written back under the rewrite journal's protection
    /// (`rewrite_bounds`, `write_journal`, `rewrite_tail`), a record-less
    /// segment's torn padding is finished (`finish_padding`), then one
    /// fsync. The cut of the tail waits for `finish_active`. A read-only
    /// open writes nothing and reports what it would rewrite.
    async fn keep_committed<F: Fs<File = Fl>>(
        self,
        fs: &F,
        scan: Scan,
        zero_tail: bool,
        align_bytes: u64,
        report: &mut RecoveryReport,
    ) -> Result<ActiveScan<Fl>> {
        let (path, first, len) = (self.path, self.first, self.len);
        let read_only = report.read_only;
        // Records a crashed or stopped process left in the page cache are served
        // from now on, so they must be durable before anyone reads them. An fsync
        // alone is not enough: after a failed fsync (ext4, xfs) those pages are
        // marked clean although they never reached the disk, and a new fsync
        // writes nothing. So rewrite every record that was not known durable
        // when the last frame was written, then fsync at once (a power loss
        // while the rewritten pages are in flight may garble them, ARCHITECTURE.md
        // G16: keep that window short).
        let align = align_bytes.max(1);
        let (from, journal_from) = self.rewrite_bounds(&scan, align).await?;
        let Scan {
            next,
            committed_end,
            sparse,
            ..
        } = scan;
        let journaled = journal_from < committed_end && !read_only;
        if read_only {
            report.rewritten_bytes = committed_end - from;
            return Ok(ActiveScan::Valid {
                file: self.file,
                next,
                end_offset: committed_end,
                sparse,
                sparse_complete: true,
                finish: Some((len, zero_tail)),
                journaled: false,
            });
        }
        if journaled {
            self.write_journal(fs, journal_from, committed_end).await?;
        }
        report.rewritten_bytes = rewrite_tail(&self.file, path, from, committed_end).await?;
        let (committed_end, len) = if next == first && committed_end % align != 0 {
            let end = self.finish_padding(committed_end, align).await?;
            (end, len.max(end))
        } else {
            (committed_end, len)
        };
        self.file
            .sync_data()
            .await
            .map_err(|e| Error::io("sync_data", path, 0, e))?;
        // The cut waits for `finish_active`, the open's last fallible step.
        Ok(ActiveScan::Valid {
            file: self.file,
            next,
            end_offset: committed_end,
            sparse,
            sparse_complete: true,
            finish: Some((len, zero_tail)),
            journaled,
        })
    }

    /// Where the rewrite of what is not known durable starts (`from`, see
    /// [`rewrite_start`]), and where the rewrite journal's copy starts
    /// (`journal_from`): the journal covers every atomic unit the rewrite
    /// and the cut put in flight. `align` is the atomic unit (at least 1).
    async fn rewrite_bounds(&self, scan: &Scan, align: u64) -> Result<(u64, u64)> {
        let (durable_hint, committed_end) = (scan.durable_hint, scan.committed_end);
        // When no record of this segment is known durable, neither is its
        // header: its creation's fsync may be the one that failed. Rewrite it too.
        let from_index = (durable_hint > self.first).then_some(durable_hint);
        let from = rewrite_start(
            &self.file,
            self.path,
            self.seed,
            &scan.sparse,
            from_index,
            committed_end,
        )
        .await?;
        // Both the rewrite and the cut (`finish_active`, at `committed_end`:
        // the filesystem rewrites the atomic unit holding it) put bytes in
        // flight that may have been durable; the journal holds a durable copy
        // of all of them until the open is done (G16, G19: `journal`).
        // An in-place write dirties whole atomic units: the journal starts at
        // the alignment block holding `from` (the bytes before it in that block
        // may be durable records), or at the one holding `committed_end` when
        // the cut follows and that is lower.
        let unit_start = committed_end - committed_end % align;
        let from_block = from - from % align;
        let journal_from = if self.len > committed_end {
            from_block.min(unit_start)
        } else {
            from_block
        };
        Ok((from, journal_from))
    }

    /// Writes the rewrite journal (`journal::write`): a durable copy of
    /// `[from, end)` of the active segment, made before any byte of that
    /// range is written in place.
    async fn write_journal<F: Fs<File = Fl>>(&self, fs: &F, from: u64, end: u64) -> Result<()> {
        let path = self.path;
        let dir = path.parent().unwrap_or(Path::new("."));
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        journal::write(fs, dir, &name, &*self.file, from, end).await
    }

    /// Finishes the padding of a segment with no record that ends, unaligned,
    /// at `committed_end`; returns the new end (the next multiple of
    /// `align`).
    ///
    /// A segment with no record whose creation's padding was torn ends right
    /// after its header, inside the header's atomic unit: the first append
    /// would write into that unit and a power loss could tear the header
    /// (soak seed 40023628). Finish the padding to the alignment, as
    /// creation writes it, while the journal holds the header.
    async fn finish_padding(&self, committed_end: u64, align: u64) -> Result<u64> {
        let pad = padding_len(committed_end, align);
        let mut bytes = Vec::with_capacity(pad);
        encode_padding(&mut bytes, self.seed, self.first, 0, pad);
        self.file
            .write_all_at(&bytes, committed_end)
            .await
            .map_err(|e| Error::io("write", self.path, committed_end, e))?;
        Ok(committed_end + pad as u64)
    }
}

/// The last fallible step of an open that scanned the active segment: cuts
/// the torn (or zero) tail from `end` to `len` and fsyncs the file (the
/// scan already fsynced what it kept). The cut is durable so that a later
/// write at `end` can never be followed by stale frames.
///
/// Why last: the cut destroys the only evidence of damage. If the open
/// failed after it (an EIO on the rewrite, a failed directory fsync), the
/// next open would find a clean end and report no stop reason for the
/// records the damage took (simulation seed 403708: a misdirected write
/// damaged an acknowledged batch, the cut was made, the rewrite failed).
/// An open that fails before this point leaves the damage in place for
/// the next open to find and report again.
///
/// `zeros`: the tail is all zeros (space preallocated ahead of the writer),
/// reported as `zero_bytes_cut`, not as a torn tail.
async fn finish_active<Fl: File>(
    file: &Fl,
    path: &Path,
    (end, len, zeros): (u64, u64, bool),
    report: &mut RecoveryReport,
) -> Result<()> {
    if len > end {
        if !report.read_only {
            file.set_len(end)
                .await
                .map_err(|e| Error::io("set_len", path, end, e))?;
        }
        if zeros {
            report.zero_bytes_cut = len - end;
            info!(path = %path.display(), from = end, bytes = len - end, "cut preallocated zeros");
        } else {
            report.torn_bytes_cut = len - end;
            warn!(path = %path.display(), from = end, bytes = len - end, "cut torn tail");
        }
        #[cfg(feature = "planted-bugs")]
        if crate::testing::planted(crate::testing::Planted::RecoveryCutNotSynced) {
            return Ok(());
        }
        if report.read_only {
            return Ok(());
        }
        file.sync_data().await.map_err(|e| Error::io("sync_data", path, 0, e))?;
    }
    Ok(())
}

/// Scan state of the active segment: what is committed so far.
struct Scan {
    first: u64,
    /// First index not committed.
    next: u64,
    /// End of the last committed frame.
    committed_end: u64,
    /// Next index expected, counting members of an unfinished batch.
    batch_next: u64,
    sparse: Vec<(u64, u64)>,
    batch_sparse: Vec<(u64, u64)>,
    /// The highest `durable_next` of a committed frame: every record below
    /// it was durable (an fsync returned Ok) when that frame was written.
    durable_hint: u64,
    /// `durable_next` values of the unfinished batch's frames.
    batch_durable_hint: u64,
}

impl Scan {
    /// Takes one valid frame, or says why it does not fit the sequence.
    fn accept(&mut self, offset: u64, h: crate::codec::FrameHeader) -> std::result::Result<(), String> {
        if h.index != self.batch_next {
            return Err(format!(
                "frame with index {} where {} was expected",
                h.index, self.batch_next
            ));
        }
        let in_batch = self.batch_next != self.next;
        if matches!(h.kind, FrameKind::Record | FrameKind::Padding) && in_batch {
            return Err(format!("{:?} frame inside an unfinished batch", h.kind));
        }
        let end = offset + h.frame_len() as u64;
        if h.kind == FrameKind::Padding {
            // Padding holds no record; it completes on its own.
            self.committed_end = end;
            return Ok(());
        }
        if (h.index - self.first) % ACTIVE_SPARSE_STRIDE == 0 {
            self.batch_sparse.push((h.index, offset));
        }
        // An index at u64::MAX leaves no next index: not a log we wrote.
        self.batch_next = h
            .index
            .checked_add(1)
            .ok_or_else(|| "frame with index u64::MAX".to_string())?;
        self.batch_durable_hint = self.batch_durable_hint.max(h.durable_next);
        if h.kind.commits() {
            self.next = self.batch_next;
            self.committed_end = end;
            self.sparse.append(&mut self.batch_sparse);
            self.durable_hint = self.durable_hint.max(self.batch_durable_hint);
        }
        Ok(())
    }
}

/// Where the rewrite of what is not known durable starts: the frame of
/// record `from_index`, or the start of the file (the header too) for
/// `None`. The frames from there to `end` are written back byte for byte so
/// that a following fsync writes them whatever the page cache's state (see
/// `scan_active`). The first of them starts a group written after an fsync,
/// so with `durable_alignment_bytes` padding it usually starts on a fresh
/// block; the rewrite journal covers the cases where it does not, and the
/// acknowledged group nothing on disk marks as durable.
async fn rewrite_start<Fl: File>(
    file: &Arc<Fl>,
    path: &Path,
    seed: FrameSeed,
    sparse: &[(u64, u64)],
    from_index: Option<u64>,
    end: u64,
) -> Result<u64> {
    Ok(match from_index {
        None => 0,
        Some(from_index) => {
            let pos = sparse.partition_point(|&(i, _)| i <= from_index);
            let start = pos.checked_sub(1).map_or(SEGMENT_HEADER_BYTES as u64, |p| sparse[p].1);
            let mut reader = FrameReader::new(file.clone(), seed, start, end);
            loop {
                let f = reader
                    .next_header()
                    .await
                    .map_err(|stop| stop.into_error(path, from_index))?;
                if f.header.index >= from_index {
                    break f.offset;
                }
            }
        }
    })
}

/// Writes `[from, end)` of the active segment back byte for byte (see
/// [`rewrite_start`]); the caller fsyncs. Returns the bytes rewritten.
async fn rewrite_tail<Fl: File>(file: &Arc<Fl>, path: &Path, from: u64, end: u64) -> Result<u64> {
    const CHUNK: u64 = 1 << 20;
    let mut buf = Vec::new();
    let mut pos = from;
    while pos < end {
        let n = (end - pos).min(CHUNK);
        buf.resize(n as usize, 0);
        file.read_exact_at(&mut buf, pos)
            .await
            .map_err(|e| Error::io("read", path, pos, e))?;
        file.write_all_at(&buf, pos)
            .await
            .map_err(|e| Error::io("rewrite", path, pos, e))?;
        pos += n;
    }
    info!(path = %path.display(), from, bytes = end - from, "rewrote records not known durable");
    Ok(end - from)
}

/// What the damage at `bad_offset` means in each mode. A valid frame after
/// it written once index `next` was durable proves that the cut would take
/// acknowledged records: `Corruption` in `TolerateTornTail`; in
/// `PointInTime` the cut goes ahead and the records it drops that were
/// durable or whole on disk (`next..`[`proven_durable_next`]) are
/// returned, for `RecoveryReport::lost`. `AbsoluteConsistency` tolerates no damage.
#[allow(clippy::too_many_arguments)]
async fn decide_cut<Fl: File>(
    file: &Arc<Fl>,
    path: &Path,
    seed: FrameSeed,
    mode: RecoveryMode,
    bad_offset: u64,
    reason: &str,
    next: u64,
    len: u64,
) -> Result<Option<LostRecords>> {
    if mode == RecoveryMode::AbsoluteConsistency {
        return Err(Error::corruption(
            path,
            bad_offset,
            format!("{reason} (absolute consistency: no torn tail tolerated)"),
        ));
    }
    let Some(proof) = find_valid_frame(&**file, path, seed, bad_offset, len, Some(next)).await? else {
        return Ok(None);
    };
    if mode == RecoveryMode::TolerateTornTail {
        return Err(Error::corruption(
            path,
            bad_offset,
            format!("{reason} at index {next}, followed by a valid frame at offset {proof} written after index {next} was durable"),
        ));
    }
    let durable_next = proven_durable_next(file, path, seed, proof, len).await?;
    debug_assert!(
        durable_next > next,
        "find_valid_frame returns only a frame proving index {next}"
    );
    Ok(Some(LostRecords {
        first: next,
        end: durable_next,
        path: path.to_path_buf(),
        evidence: format!(
            "{reason} at offset {bad_offset}, followed from offset {proof} by valid frames that prove records below {durable_next} durable or whole"
        ),
    }))
}

/// How far the cut's loss is proven: over the valid frames that follow one
/// another from `from` (a frame `find_valid_frame` found), up to the first
/// that does not decode, the highest `durable_next` and the index after
/// the highest committed record. Reads through a [`FrameReader`] (chunks,
/// not two reads per frame: a walk over a large segment's frames made an
/// open hundreds of reads long, each one a chance of a transient EIO, and
/// at a 1% rate no open got through: soak seeds 70049215, 92087859).
async fn proven_durable_next<Fl: File>(
    file: &Arc<Fl>,
    path: &Path,
    seed: FrameSeed,
    from: u64,
    len: u64,
) -> Result<u64> {
    let mut reader = FrameReader::new(file.clone(), seed, from, len);
    let mut proven = 0;
    loop {
        let h = match reader.next_raw_header().await {
            Ok(f) => f.header,
            Err(ReadStop::Io { offset, error }) => return Err(Error::io("read", path, offset, error)),
            Err(ReadStop::Bad { .. } | ReadStop::End { .. }) => break,
        };
        proven = proven.max(h.durable_next);
        if h.kind.commits() {
            // A whole committed record the cut drops: it was in the log.
            proven = proven.max(h.index.saturating_add(1));
        }
    }
    Ok(proven)
}

/// Whether every byte in `[from, len)` is zero (unwritten space).
pub(crate) async fn is_zero<Fl: File>(file: &Fl, path: &Path, from: u64, len: u64) -> Result<bool> {
    const CHUNK: u64 = 1 << 20;
    let mut pos = from;
    let mut buf = Vec::new();
    while pos < len {
        let n = (len - pos).min(CHUNK);
        buf.resize(n as usize, 0);
        file.read_exact_at(&mut buf, pos)
            .await
            .map_err(|e| Error::io("read", path, pos, e))?;
        if buf.iter().any(|&b| b != 0) {
            return Ok(false);
        }
        pos += n;
    }
    Ok(true)
}

/// Looks for a frame after `from` that decodes fully and whose `durable_next`
/// exceeds `durable_above` (any valid frame for `None`): proof that data at or after `from` was durable
/// once. Returns its offset. Reads in chunks; a frame spanning chunks is read
/// on its own.
pub(crate) async fn find_valid_frame<Fl: File>(
    file: &Fl,
    path: &Path,
    seed: FrameSeed,
    from: u64,
    len: u64,
    durable_above: Option<u64>,
) -> Result<Option<u64>> {
    const CHUNK: u64 = 1 << 20;
    let align = FRAME_ALIGN_BYTES as u64;
    let mut pos = from.div_ceil(align) * align;
    let mut chunk = Vec::new();
    while pos + FRAME_HEADER_BYTES as u64 <= len {
        let chunk_end = (pos + CHUNK + FRAME_HEADER_BYTES as u64).min(len);
        chunk.resize((chunk_end - pos) as usize, 0);
        file.read_exact_at(&mut chunk, pos)
            .await
            .map_err(|e| Error::io("read", path, pos, e))?;
        let mut at = 0usize;
        while at + FRAME_HEADER_BYTES <= chunk.len() && (at as u64) < CHUNK {
            if let Ok(h) = decode_frame_header(&chunk[at..], seed) {
                if durable_above.is_none_or(|d| h.durable_next > d) {
                    let off = pos + at as u64;
                    let total = h.frame_len();
                    if off + total as u64 <= len {
                        // Checked in the chunk when it holds the frame: a
                        // read per candidate is a chance of EIO per candidate.
                        let whole = if let Some(frame) = chunk.get(at..at + total) {
                            decode_frame(frame, seed).is_ok()
                        } else {
                            let mut frame = vec![0u8; total];
                            file.read_exact_at(&mut frame, off)
                                .await
                                .map_err(|e| Error::io("read", path, off, e))?;
                            decode_frame(&frame, seed).is_ok()
                        };
                        if whole {
                            return Ok(Some(off));
                        }
                    }
                }
            }
            at += FRAME_ALIGN_BYTES;
        }
        pos += CHUNK;
    }
    Ok(None)
}
