//! Full verification: every segment read end to end with the decoder that
//! reads use (`segment::scan_frames`), every header against its name and
//! the log's identity, the chain of index ranges, the meta file and its
//! clean-shutdown marker. It changes nothing and stops at nothing: every
//! problem found is listed, with the file, the offset and the indices.
//!
//! Why a separate pass: reads verify a sealed segment only when they first
//! touch it, and recovery reads only what it must to decide (docs/RECOVERY.md
//! §1). An operator or a backup tool needs to know, before trusting a
//! copy, whether every byte the log claims checks.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use simfs::{File, Fs, OpenOptions};

use crate::codec::{HeaderError, SegmentHeader, SEGMENT_HEADER_BYTES};
use crate::error::{Error, Result};
use crate::evidence;
use crate::journal::{JOURNAL_COPY_NAME, JOURNAL_NAME};
use crate::meta::{read_meta, Meta, META_NAME};
use crate::recovery::{find_valid_frame, is_zero};
use crate::segment::{header_for, scan_frames, FrameReader, SegmentName, SEGMENT_SUFFIX, TMP_SUFFIX};
use crate::sync::Arc;

/// What [`verify_dir`] or [`crate::Wal::verify`] found: every problem, what a
/// writable open would tidy up, and totals.
///
/// ```
/// use std::path::Path;
/// futures::executor::block_on(async {
///     let fs = simfs::SimFs::new(1);
///     let wal = wal::Wal::open(fs.clone(), Path::new("/log"), wal::Options::default()).await?;
///     wal.append(b"a".to_vec()).await?;
///     wal.close().await?;
///     let report = wal::verify_dir(&fs, Path::new("/log")).await?;
///     assert!(report.is_intact(), "{report}");
///     assert_eq!(report.records, 1);
///     Ok::<_, wal::Error>(())
/// }).unwrap();
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct VerifyReport {
    /// Segment files read.
    pub segments: u64,
    /// Records that checked (every frame, in order, inside a whole batch).
    pub records: u64,
    /// Bytes of segment files read.
    pub bytes: u64,
    /// The first index the verified segments hold, `None` if none holds one.
    pub first_index: Option<u64>,
    /// One past the last index the verified segments validly hold.
    pub next_index: Option<u64>,
    /// Everything that is wrong, in the order found. Empty for an intact log.
    pub problems: Vec<Problem>,
    /// What is not damage but not the log's steady state either: leftovers
    /// of interrupted operations and a torn tail, which a writable open
    /// removes or cuts, and files that are not the log's.
    pub notices: Vec<Notice>,
}

impl VerifyReport {
    /// Whether no problem was found.
    ///
    /// ```
    /// assert!(wal::VerifyReport::default().is_intact());
    /// ```
    pub fn is_intact(&self) -> bool {
        self.problems.is_empty()
    }

    fn problem(&mut self, kind: ProblemKind, path: &Path, offset: u64, indices: Option<Range<u64>>, detail: String) {
        self.problems.push(Problem {
            kind,
            path: path.to_path_buf(),
            offset,
            indices,
            detail,
        });
    }

    fn notice(&mut self, kind: NoticeKind, path: &Path, offset: u64, detail: String) {
        self.notices.push(Notice {
            kind,
            path: path.to_path_buf(),
            offset,
            detail,
        });
    }

    /// An error of a read as a problem: I/O is `Unreadable`, the rest what
    /// `kind` says.
    fn error(&mut self, kind: ProblemKind, e: &Error, indices: Option<Range<u64>>) {
        let (kind, path, offset) = match e {
            Error::Io { path, offset, .. } => (ProblemKind::Unreadable, path.clone(), *offset),
            Error::Corruption { segment, offset, .. } => (kind, segment.clone(), *offset),
            Error::ForeignLog { path, .. } => (ProblemKind::ForeignLog, path.clone(), 0),
            Error::MissingRecords { path, offset, .. } => (ProblemKind::MissingRecords, path.clone(), *offset),
            _ => (kind, PathBuf::new(), 0),
        };
        let detail = match e {
            Error::Corruption { reason, .. } => reason.clone(),
            other => other.to_string(),
        };
        self.problem(kind, &path, offset, indices, detail);
    }
}

impl fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} segments, {} records, {} bytes read; {} problems, {} notices",
            self.segments,
            self.records,
            self.bytes,
            self.problems.len(),
            self.notices.len()
        )?;
        for p in &self.problems {
            writeln!(f, "problem: {p}")?;
        }
        for n in &self.notices {
            writeln!(f, "notice: {n}")?;
        }
        Ok(())
    }
}

/// One thing wrong with the log: what, where (file and byte offset) and
/// which indices it costs, if any.
///
/// ```
/// let p = wal::Problem {
///     kind: wal::ProblemKind::Gap,
///     path: "/log/00000000000000000010-00000000000000000019-0000000000000002.wal".into(),
///     offset: 0,
///     indices: Some(5..10),
///     detail: "no segment holds these indices".into(),
/// };
/// assert!(p.to_string().contains("indices 5..10"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// What kind of problem.
    pub kind: ProblemKind,
    /// The file (the directory for a problem of the chain as a whole).
    pub path: PathBuf,
    /// Byte offset of the first bad byte, 0 when the file as a whole is wrong.
    pub offset: u64,
    /// The indices it makes unreadable or that are missing, if any.
    pub indices: Option<Range<u64>>,
    /// What exactly is wrong.
    pub detail: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} in {} at offset {}",
            self.kind,
            self.path.display(),
            self.offset
        )?;
        if let Some(r) = &self.indices {
            write!(f, " (indices {}..{})", r.start, r.end)?;
        }
        write!(f, ": {}", self.detail)
    }
}

/// The kinds of [`Problem`].
///
/// ```
/// assert_ne!(wal::ProblemKind::Gap, wal::ProblemKind::Overlap);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProblemKind {
    /// A file could not be read (the filesystem failed).
    Unreadable,
    /// A name in the directory claims to be a segment but does not parse,
    /// or a directory has a segment's name.
    BadName,
    /// A segment's header does not decode, is short, or disagrees with its
    /// name (segment id, first index, salt).
    BadHeader,
    /// A file carries another log's id.
    ForeignLog,
    /// Records a segment's name (or the open log) says it holds do not
    /// check: a bad frame, an index out of order, the file ending early, a
    /// sealed segment ending inside a batch, or damage with valid frames
    /// after it in the active segment.
    DamagedRecords,
    /// No segment holds these indices, but a later segment exists.
    Gap,
    /// Two segments claim the same indices, and neither is the verified
    /// leftover of an interrupted compaction.
    Overlap,
    /// Two segment files have the same id.
    DuplicateId,
    /// More than one active segment.
    TwoActive,
    /// The meta file does not decode.
    BadMeta,
    /// A promise the meta file records is not kept: the segments start
    /// above the low-water mark with no prune recorded, or end below (or
    /// past) the next index the clean-shutdown marker recorded.
    MissingRecords,
}

/// Something a writable open would tidy up, or a file that is not the
/// log's: not damage.
///
/// ```
/// let n = wal::Notice { kind: wal::NoticeKind::Leftover, path: "/log/x.wal.tmp".into(), offset: 0, detail: "temporary file".into() };
/// assert!(n.to_string().contains("x.wal.tmp"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    /// What kind of notice.
    pub kind: NoticeKind,
    /// The file.
    pub path: PathBuf,
    /// Where in it, 0 for the file as a whole.
    pub offset: u64,
    /// What exactly.
    pub detail: String,
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} in {} at offset {}: {}",
            self.kind,
            self.path.display(),
            self.offset,
            self.detail
        )
    }
}

/// The kinds of [`Notice`].
///
/// ```
/// assert_ne!(wal::NoticeKind::TornTail, wal::NoticeKind::Preallocated);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NoticeKind {
    /// Bytes after the active segment's last whole batch that are not a
    /// frame, with no valid frame after them: a write a crash cut short
    /// (never acknowledged); a writable open cuts them.
    TornTail,
    /// Zero bytes after the active segment's last frame: space allocated
    /// ahead of the writer, never written.
    Preallocated,
    /// A leftover of an interrupted operation (temporary file, compaction
    /// input covered by its verified output, prune, truncation) that a
    /// writable open removes, or the journal of an interrupted recovery
    /// that it finishes.
    Leftover,
    /// A name that is not the log's: left alone by every open.
    Ignored,
}

/// Verifies the log in `dir` without opening it: reads every file, changes
/// nothing, and reports every problem (see [`VerifyReport`]). Takes the
/// directory's shared lock, as a read-only open does, so it fails with
/// `Error::Locked` while a writable open holds the log (use
/// [`crate::Wal::verify`] on that one). Errors only when the directory
/// itself cannot be locked or listed; everything about the files is in the
/// report. Cancelling it (dropping the future) releases the lock; nothing
/// was changed.
///
/// ```
/// use std::path::Path;
/// futures::executor::block_on(async {
///     let fs = simfs::SimFs::new(1);
///     let report = wal::verify_dir(&fs, Path::new("/nothing")).await;
///     assert!(report.is_err());
/// });
/// ```
pub async fn verify_dir<F: Fs>(fs: &F, dir: &Path) -> Result<VerifyReport> {
    match fs.metadata(dir).await {
        Ok(m) if !m.is_dir => return Err(Error::InvalidArgument(format!("{} is not a directory", dir.display()))),
        Ok(_) => {}
        Err(e) => return Err(Error::io("metadata", dir, 0, e)),
    }
    let _lock = fs.lock_dir_shared(dir).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::WouldBlock {
            Error::Locked {
                path: dir.to_path_buf(),
            }
        } else {
            Error::io("lock", dir, 0, e)
        }
    })?;
    let entries = fs.read_dir(dir).await.map_err(|e| Error::io("read_dir", dir, 0, e))?;
    let mut report = VerifyReport::default();
    let mut names = Vec::new();
    for entry in entries {
        let path = dir.join(&entry.name);
        if entry.name == META_NAME && !entry.is_dir {
            continue;
        }
        if entry.name == JOURNAL_NAME && !entry.is_dir {
            let detail = "the journal of an interrupted recovery rewrite: a writable open finishes it";
            report.notice(NoticeKind::Leftover, &path, 0, detail.into());
            continue;
        }
        if entry.name == JOURNAL_COPY_NAME && !entry.is_dir {
            let detail = "a copy of a recovery journal being replayed: a writable open removes it";
            report.notice(NoticeKind::Leftover, &path, 0, detail.into());
            continue;
        }
        if entry.name.ends_with(TMP_SUFFIX) && !entry.is_dir {
            let detail = "a temporary file: a writable open restores a complete compaction output or removes it";
            report.notice(NoticeKind::Leftover, &path, 0, detail.into());
            continue;
        }
        match SegmentName::parse(&entry.name) {
            Some(_) if entry.is_dir => {
                let detail = "a directory has a segment's name".to_string();
                report.problem(ProblemKind::BadName, &path, 0, None, detail);
            }
            Some(n) => names.push(Entry {
                name: n,
                path,
                expect: match n {
                    SegmentName::Sealed { last, .. } => Expect::Through(last),
                    SegmentName::Active { .. } => Expect::Unknown,
                },
                limit: None,
                file: None,
            }),
            None if entry.name.ends_with(SEGMENT_SUFFIX) => {
                let detail = "the name looks like a segment's but does not parse".to_string();
                report.problem(ProblemKind::BadName, &path, 0, None, detail);
            }
            None => report.notice(NoticeKind::Ignored, &path, 0, "not a file of the log".into()),
        }
    }
    let meta = match read_meta(fs, dir).await {
        Ok(m) => m,
        Err(e) => {
            report.error(ProblemKind::BadMeta, &e, None);
            None
        }
    };
    let mut checker = Checker { fs, dir, report };
    let (log_id, meta_ours) = checker.identity(&names, meta.as_ref()).await;
    let held = checker.segments(&names, log_id).await;
    // A foreign meta file's promises are not this log's.
    checker.chain(&held, meta.as_ref().filter(|_| meta_ours), true);
    Ok(checker.report)
}

/// A segment of the open log, as [`crate::Wal::verify`] saw it: a sealed
/// one holds what its name says; the active one what the log acknowledged
/// in it, up to its committed end.
pub(crate) fn open_entry<Fl>(
    id: u64,
    first: u64,
    path: PathBuf,
    sealed: bool,
    last: Option<u64>,
    end_offset: u64,
    file: Option<Arc<Fl>>,
) -> Entry<Fl> {
    match (sealed, last) {
        (true, Some(last)) => Entry {
            name: SegmentName::Sealed { first, last, id },
            path,
            expect: Expect::Through(last),
            limit: None,
            file,
        },
        (_, last) => Entry {
            name: SegmentName::Active { first, id },
            path,
            expect: last.map_or(Expect::Empty, Expect::Through),
            limit: Some(end_offset),
            file,
        },
    }
}

/// The checks of [`crate::Wal::verify`]: the open log's segments, its id,
/// and the meta file as read from disk (`on_disk`) against `meta`, what
/// the log last wrote. Also returns, for each entry, the damage found in
/// it (the first index it does not validly hold, and why), for the
/// segment's verdict.
pub(crate) async fn verify_open<F: Fs>(
    fs: &F,
    dir: &Path,
    log_id: u128,
    meta: &Meta,
    on_disk: Result<Option<Meta>>,
    entries: &[Entry<F::File>],
) -> (VerifyReport, Vec<Option<(u64, Error)>>) {
    let mut report = VerifyReport::default();
    match on_disk {
        Ok(Some(disk)) if disk == *meta => {}
        Ok(Some(disk)) => {
            let detail = format!("the meta file says {disk:?}, the log last wrote {meta:?}");
            report.problem(ProblemKind::BadMeta, &dir.join(META_NAME), 0, None, detail);
        }
        // A log that never needed a meta file (nothing recorded yet).
        Ok(None) => {}
        Err(e) => report.error(ProblemKind::BadMeta, &e, None),
    }
    let mut checker = Checker { fs, dir, report };
    let held = checker.segments(entries, Some(log_id)).await;
    checker.chain(&held, Some(meta), false);
    let damage = held.into_iter().map(|h| h.damage.map(|d| (h.end, d))).collect();
    (checker.report, damage)
}

/// What a segment is expected to hold.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Expect {
    /// Every record through this index (a sealed segment's name, or the
    /// open log's last index in its active segment).
    Through(u64),
    /// No record (an empty active segment of the open log).
    Empty,
    /// Whatever it holds (an active segment found on disk).
    Unknown,
}

/// A segment to verify.
pub(crate) struct Entry<Fl> {
    pub name: SegmentName,
    pub path: PathBuf,
    pub expect: Expect,
    /// Read no further than this (the open log's committed end).
    pub limit: Option<u64>,
    /// An open handle (the open log's), else the file is opened by path.
    pub file: Option<Arc<Fl>>,
}

/// What a segment was found to hold.
pub(crate) struct Held {
    name: SegmentName,
    path: PathBuf,
    /// Its header checked and is this log's.
    header_ok: bool,
    /// Every record its name (or the open log) claims checked.
    whole: bool,
    /// One past the last index it validly holds.
    end: u64,
    /// The damage that ends it below what it claims, if any.
    damage: Option<Error>,
}

pub(crate) struct Checker<'a, F: Fs> {
    pub fs: &'a F,
    pub dir: &'a Path,
    pub report: VerifyReport,
}

impl<F: Fs> Checker<'_, F> {
    /// Reads every segment's header and returns the log's id: the meta
    /// file's when a segment agrees with it or no segment carries one, else
    /// the newest segment's (the meta file is then foreign: a problem, and
    /// the second value is `false`).
    async fn identity(&mut self, entries: &[Entry<F::File>], meta: Option<&Meta>) -> (Option<u128>, bool) {
        let mut ids: Vec<(u64, u128)> = Vec::new();
        for e in entries.iter() {
            if let Ok(Some(h)) = evidence::read_header(self.fs, &e.path).await {
                if h.log_id != 0 {
                    ids.push((e.name.id(), h.log_id));
                }
            }
        }
        ids.sort_by_key(|s| std::cmp::Reverse(s.0));
        let meta_id = meta.map(|m| m.log_id).filter(|&id| id != 0);
        match meta_id {
            Some(m) if ids.is_empty() || ids.iter().any(|s| s.1 == m) => (Some(m), true),
            Some(m) => {
                let path = self.dir.join(META_NAME);
                let detail = format!(
                    "the meta file belongs to log {m:032x}, no segment does (they carry {:032x})",
                    ids[0].1
                );
                self.report.problem(ProblemKind::ForeignLog, &path, 0, None, detail);
                (Some(ids[0].1), false)
            }
            None => (ids.first().map(|s| s.1), true),
        }
    }

    /// Verifies every segment: header, then every frame.
    pub(crate) async fn segments(&mut self, entries: &[Entry<F::File>], log_id: Option<u128>) -> Vec<Held> {
        let mut held = Vec::with_capacity(entries.len());
        for e in entries {
            held.push(self.segment(e, log_id).await);
        }
        held
    }

    /// Verifies one segment: opens it (or takes the open log's handle),
    /// checks its header, then its frames ([`Self::frames`]). Returns what
    /// it validly holds; what is wrong with it is in the report.
    async fn segment(&mut self, e: &Entry<F::File>, log_id: Option<u128>) -> Held {
        let first = e.name.first();
        let mut held = Held {
            name: e.name,
            path: e.path.clone(),
            header_ok: false,
            whole: false,
            end: first,
            damage: None,
        };
        let claimed = match e.expect {
            Expect::Through(last) => Some(first..last.saturating_add(1)),
            Expect::Empty | Expect::Unknown => None,
        };
        let Some((file, len)) = self.open_counted(e, claimed.clone()).await else {
            return held;
        };
        let limit = e.limit.map_or(len, |l| l.min(len));
        if !self.header(&file, e, len, log_id, claimed.clone()).await {
            return held;
        }
        held.header_ok = true;
        self.report.bytes += limit;
        self.frames(e, &file, len, limit, claimed, held).await
    }

    /// Opens the segment of `e` (or takes the open log's handle), counts it
    /// in the report and returns the file with its length. `None`, with the
    /// failure reported as `Unreadable` (the `claimed` records with it), if
    /// it cannot be opened or its length cannot be read: nothing more of it
    /// can be checked.
    async fn open_counted(&mut self, e: &Entry<F::File>, claimed: Option<Range<u64>>) -> Option<(Arc<F::File>, u64)> {
        let file = match &e.file {
            Some(f) => f.clone(),
            None => match self.fs.open(&e.path, OpenOptions::new().read(true)).await {
                Ok(f) => Arc::new(f),
                Err(err) => {
                    self.report
                        .error(ProblemKind::Unreadable, &Error::io("open", &e.path, 0, err), claimed);
                    return None;
                }
            },
        };
        self.report.segments += 1;
        let len = match file.len().await {
            Ok(l) => l,
            Err(err) => {
                self.report
                    .error(ProblemKind::Unreadable, &Error::io("len", &e.path, 0, err), claimed);
                return None;
            }
        };
        Some((file, len))
    }

    /// After the header of `e` checked: scans its frames (of `file`, `len`
    /// bytes, read up to `limit`) against what its name or the open log
    /// claims, records what it validly holds in `held` and reports the
    /// damage, or for an active segment on disk what follows its last
    /// batch (`tail`). Returns `held`.
    async fn frames(
        &mut self,
        e: &Entry<F::File>,
        file: &Arc<F::File>,
        len: u64,
        limit: u64,
        claimed: Option<Range<u64>>,
        mut held: Held,
    ) -> Held {
        let first = e.name.first();
        let (last, sealed) = match (e.expect, e.name) {
            (Expect::Empty, _) => {
                held.whole = true;
                return held;
            }
            (Expect::Through(last), SegmentName::Sealed { .. }) => (last, true),
            (Expect::Through(last), SegmentName::Active { .. }) => (last, false),
            (Expect::Unknown, _) => (u64::MAX, false),
        };
        if last < first {
            let detail = format!("the name's last index {last} is below its first {first}");
            self.report.problem(ProblemKind::BadName, &e.path, 0, None, detail);
            return held;
        }
        let seed = header_for(0, e.name.id(), first).frame_seed();
        let mut reader = FrameReader::new(file.clone(), seed, SEGMENT_HEADER_BYTES as u64, limit);
        let scan = match scan_frames(&mut reader, &e.path, first, last, sealed, u64::MAX).await {
            Ok(s) => s,
            Err(err) => {
                self.report.error(ProblemKind::Unreadable, &err, claimed);
                return held;
            }
        };
        held.end = scan.committed_end;
        self.report.records += scan.committed_end - first;
        let Some(damage) = scan.damage else {
            held.whole = true;
            return held;
        };
        if matches!(e.expect, Expect::Unknown) {
            held.whole = true;
            if !scan.at_limit {
                self.tail(file, &e.path, seed, scan.committed_offset, scan.committed_end, len)
                    .await;
            }
            return held;
        }
        let lost = scan.committed_end..last.saturating_add(1);
        self.report.error(ProblemKind::DamagedRecords, &damage, Some(lost));
        held.damage = Some(damage);
        held
    }

    /// Checks the header against the name and the log's id; `false` (with
    /// the problem or notice recorded) if it does not check.
    async fn header(
        &mut self,
        file: &Arc<F::File>,
        e: &Entry<F::File>,
        len: u64,
        log_id: Option<u128>,
        claimed: Option<Range<u64>>,
    ) -> bool {
        let active_on_disk = matches!(e.expect, Expect::Unknown);
        let mut buf = [0u8; SEGMENT_HEADER_BYTES];
        let decoded = if len < SEGMENT_HEADER_BYTES as u64 {
            Err("shorter than its header".to_string())
        } else {
            match file.read_exact_at(&mut buf, 0).await {
                Ok(()) => SegmentHeader::decode(&buf).map_err(|h| match h {
                    HeaderError::UnsupportedVersion(v) => format!("segment of unsupported format version {v}"),
                    other => format!("bad segment header: {other}"),
                }),
                Err(err) => {
                    self.report
                        .error(ProblemKind::Unreadable, &Error::io("read", &e.path, 0, err), claimed);
                    return false;
                }
            }
        };
        let h = match decoded {
            Ok(h) => h,
            Err(why) => {
                // A new active segment whose header never became durable
                // holds nothing that was acknowledged (FORMAT.md §8.1).
                let never_written = active_on_disk && matches!(is_zero(&**file, &e.path, 0, len).await, Ok(true));
                if never_written {
                    let detail = format!("{why}, all zero: a new segment never written; a writable open removes it");
                    self.report.notice(NoticeKind::TornTail, &e.path, 0, detail);
                } else {
                    self.report.problem(ProblemKind::BadHeader, &e.path, 0, claimed, why);
                }
                return false;
            }
        };
        let expected = header_for(h.log_id, e.name.id(), e.name.first());
        if h != expected {
            let detail = format!(
                "the header says segment {} from index {}, the name says segment {} from index {}",
                h.segment_id,
                h.first_index,
                e.name.id(),
                e.name.first()
            );
            self.report.problem(ProblemKind::BadHeader, &e.path, 0, claimed, detail);
            return false;
        }
        if let Some(this) = log_id.filter(|&l| h.log_id != 0 && h.log_id != l) {
            let detail = format!("the header belongs to log {:032x}, not to {this:032x}", h.log_id);
            self.report
                .problem(ProblemKind::ForeignLog, &e.path, 0, claimed, detail);
            return false;
        }
        true
    }

    /// What follows the last whole batch of an active segment on disk:
    /// zeros, a torn tail, or damage with a valid frame after it.
    async fn tail(
        &mut self,
        file: &Arc<F::File>,
        path: &Path,
        seed: crate::codec::FrameSeed,
        at: u64,
        next: u64,
        len: u64,
    ) {
        match is_zero(&**file, path, at, len).await {
            Ok(true) => {
                let detail = format!("{} zero bytes after the last frame", len - at);
                self.report.notice(NoticeKind::Preallocated, path, at, detail);
                return;
            }
            Ok(false) => {}
            Err(e) => return self.report.error(ProblemKind::Unreadable, &e, None),
        }
        match find_valid_frame(&**file, path, seed, at, len, None).await {
            Ok(None) => {
                let detail = format!("{} bytes after the last whole batch that are not a frame", len - at);
                self.report.notice(NoticeKind::TornTail, path, at, detail);
            }
            Ok(Some(valid)) => {
                let detail = format!(
                    "bytes at {at} are not a frame, but a valid frame follows at {valid}: the records from index {next} are not served"
                );
                self.report
                    .problem(ProblemKind::DamagedRecords, path, at, Some(next..next), detail);
            }
            Err(e) => self.report.error(ProblemKind::Unreadable, &e, None),
        }
    }

    /// The chain of index ranges, the leftovers a writable open removes, and
    /// the meta file's promises (`marker`: check the clean-shutdown marker;
    /// only for a log that is not open).
    pub(crate) fn chain(&mut self, held: &[Held], meta: Option<&Meta>, marker: bool) {
        let low = meta.map(|m| m.low_water);
        let active: Vec<&Held> = held
            .iter()
            .filter(|h| matches!(h.name, SegmentName::Active { .. }))
            .collect();
        let mut ids: Vec<(u64, &Path)> = held.iter().map(|h| (h.name.id(), h.path.as_path())).collect();
        ids.sort();
        for w in ids.windows(2).filter(|w| w[0].0 == w[1].0) {
            let detail = format!("segment id {:x} is also {}", w[0].0, w[0].1.display());
            self.report.problem(ProblemKind::DuplicateId, w[1].1, 0, None, detail);
        }
        // The chain is made of the segments whose header checked: a name
        // whose header does not is only a claim (reported above).
        let mut live: Vec<&Held> = Vec::new();
        for h in held.iter().filter(|h| h.header_ok) {
            if let Some(why) = self.leftover(h, held, low) {
                self.report.notice(NoticeKind::Leftover, &h.path, 0, why);
            } else {
                live.push(h);
            }
        }
        live.sort_by_key(|h| (h.name.first(), h.name.id()));
        if active.len() > 1 {
            let detail = format!(
                "{} active segments; the first is {}",
                active.len(),
                active[0].path.display()
            );
            self.report
                .problem(ProblemKind::TwoActive, &active[1].path, 0, None, detail);
        }
        let mut expected: Option<u64> = None;
        for h in &live {
            let first = h.name.first();
            let claimed_end = match h.name {
                SegmentName::Sealed { last, .. } => last.saturating_add(1),
                SegmentName::Active { .. } => h.end,
            };
            if let Some(e) = expected {
                if first > e {
                    let detail = format!("no segment holds {e}..{first}, but this segment starts at {first}");
                    self.report
                        .problem(ProblemKind::Gap, &h.path, 0, Some(e..first), detail);
                } else if first < e {
                    let detail = format!(
                        "starts at {first}, but the segment before it holds indices through {}",
                        e - 1
                    );
                    self.report.problem(
                        ProblemKind::Overlap,
                        &h.path,
                        0,
                        Some(first..e.min(claimed_end)),
                        detail,
                    );
                }
            }
            expected = Some(expected.map_or(claimed_end, |e| e.max(claimed_end)));
        }
        self.report.first_index = live.first().map(|h| h.name.first());
        self.report.next_index = expected;
        // Where records the marker promises should be: its active segment,
        // even one whose header did not check.
        let marked = meta
            .and_then(|m| m.clean)
            .and_then(|c| held.iter().find(|h| c.active_id != 0 && h.name.id() == c.active_id))
            .map(|h| h.path.clone());
        self.promises(&live, meta, marker, marked);
    }

    /// Why `h` is a leftover a writable open removes, if it is one
    /// (`recovery::reconcile`'s rules, each on verified evidence).
    fn leftover(&self, h: &Held, held: &[Held], low: Option<u64>) -> Option<String> {
        let SegmentName::Sealed { first, last, id } = h.name else {
            return None;
        };
        if low.is_some_and(|l| last < l) {
            return Some(format!(
                "wholly below the low-water mark {}: an interrupted prune",
                low.unwrap_or(0)
            ));
        }
        let truncated = held.iter().find(|o| {
            matches!(o.name, SegmentName::Active { first: f, id: i } if (f, i) == (first, id)) && o.header_ok
        });
        if let Some(o) = truncated {
            return Some(format!("rewritten as {}: an interrupted truncation", o.path.display()));
        }
        let cover = held.iter().find(|o| {
            matches!(o.name, SegmentName::Sealed { first: f, last: l, id: i } if i > id && f <= first && last <= l)
                && o.whole
        });
        cover.map(|o| {
            format!(
                "covered by {}, which verifies: an interrupted compaction",
                o.path.display()
            )
        })
    }

    /// The meta file's promises against the live chain.
    fn promises(&mut self, live: &[&Held], meta: Option<&Meta>, marker: bool, marked: Option<PathBuf>) {
        let Some(meta) = meta else { return };
        let first = live.first().map(|h| (h.name.first(), file_name(&h.path)));
        let active = live.iter().find(|h| matches!(h.name, SegmentName::Active { .. }));
        let end = self.report.next_index.unwrap_or(meta.low_water);
        let has_active = active.is_some() || !marker;
        for l in evidence::chain_promises(self.dir, Some(meta), first, end, has_active) {
            let path = match &marked {
                Some(p) if l.path == self.dir => p.clone(),
                _ => l.path,
            };
            self.report
                .problem(ProblemKind::MissingRecords, &path, 0, Some(l.first..l.end), l.evidence);
        }
        let Some(c) = meta.clean.filter(|_| marker) else { return };
        let Some(a) = active else { return };
        if c.active_id != a.name.id() {
            let detail = format!(
                "the clean-shutdown marker names active segment {:x}, the directory holds {:x}",
                c.active_id,
                a.name.id()
            );
            self.report
                .problem(ProblemKind::MissingRecords, &a.path, 0, None, detail);
        } else if a.end != c.next_index {
            let range = a.end.min(c.next_index)..a.end.max(c.next_index);
            let detail = format!(
                "{}; the active segment validly holds records up to {}",
                evidence::marker_evidence(c.next_index),
                a.end
            );
            self.report
                .problem(ProblemKind::MissingRecords, &a.path, 0, Some(range), detail);
        }
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
