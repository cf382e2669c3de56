//! What recovery checks before it changes anything: every segment's header
//! against its name, the log's identity, and the promises the meta file
//! recorded (the clean-shutdown marker's next index, the low-water mark).
//!
//! Why: a name is only a claim. A renamed or copied file, or a meta file of
//! another log, used to make recovery delete intact segments as
//! "leftovers" and return `Ok` (docs/RECOVERY.md §2, the table of what each mode
//! may change). Here a header that disagrees with its name, a file of
//! another log, or a promise the directory does not keep is a typed error
//! raised before recovery removes, renames or cuts anything.

use std::path::Path;

use simfs::{File, Fs, OpenOptions};
use tracing::warn;

use crate::codec::{HeaderError, SegmentHeader, SEGMENT_HEADER_BYTES};
use crate::error::{Error, Result};
use crate::meta::{Meta, META_NAME};
use crate::options::RecoveryMode;
use crate::segment::{header_for, SegmentName};

/// A range of acknowledged records a `PointInTime` open went on without.
///
/// ```
/// // Listed in `RecoveryReport::lost`; a clean open lists none.
/// let report = wal::RecoveryReport::default();
/// let lost: u64 = report.lost.iter().map(|l: &wal::LostRecords| l.end - l.first).sum();
/// assert_eq!(lost, 0);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LostRecords {
    /// The first lost index.
    pub first: u64,
    /// One past the last lost index.
    pub end: u64,
    /// Where they should have been.
    pub path: std::path::PathBuf,
    /// The promise that says they existed.
    pub evidence: String,
}

/// What the headers of the segment files said.
#[derive(Debug)]
pub(crate) struct Headers {
    /// The log's id: the meta file's, else the segments', else a new one.
    pub log_id: u128,
    /// Names whose header decoded and matched the name (place and log).
    pub verified: Vec<String>,
    /// Sealed segments whose header could not be read, with the error:
    /// returned again if recovery needs one of them as evidence.
    pub unreadable: Vec<(String, Error)>,
}

impl Headers {
    pub(crate) fn is_verified(&self, name: &str) -> bool {
        self.verified.iter().any(|n| n == name)
    }
}

/// Reads every segment's header. A header that decodes but disagrees with
/// its name (segment id, first index) is `Corruption` in every mode; one of
/// a newer format too. A header that does not decode is left to the reader
/// of that segment (a sealed segment is verified when read, the active one
/// by the scan), unless recovery needs it as evidence (see [`justify`]).
/// Then the log's identity: every segment of a known log id must carry it;
/// the meta file's id wins unless no segment agrees with it.
pub(crate) async fn check_headers<F: Fs>(
    fs: &F,
    dir: &Path,
    meta: Option<&Meta>,
    names: &[(SegmentName, String)],
    known_log_id: Option<u128>,
) -> Result<Headers> {
    let mut ids: Vec<(u64, String, u128)> = Vec::new();
    let mut verified = Vec::new();
    let mut unreadable: Vec<(String, Error)> = Vec::new();
    for (n, name) in names {
        let path = dir.join(name);
        let h = match read_header(fs, &path).await {
            Ok(Some(h)) => h,
            Ok(None) => continue,
            // A sealed segment's reads report its header when they need it;
            // the active segment's scan cannot go on without it.
            Err(e @ Error::Io { .. }) if matches!(n, SegmentName::Sealed { .. }) => {
                warn!(path = %path.display(), error = %e, "cannot read a sealed segment's header; its reads will report it");
                unreadable.push((name.clone(), e));
                continue;
            }
            Err(e) => return Err(e),
        };
        let expected = header_for(h.log_id, n.id(), n.first());
        #[cfg(feature = "planted-bugs")]
        let h = if crate::testing::planted(crate::testing::Planted::NamesTrusted) {
            expected
        } else {
            h
        };
        if h != expected {
            return Err(Error::corruption(
                &path,
                0,
                format!(
                    "the header says segment {} from index {}, the name says segment {} from index {}",
                    h.segment_id,
                    h.first_index,
                    n.id(),
                    n.first()
                ),
            ));
        }
        if h.log_id != 0 {
            ids.push((n.id(), name.clone(), h.log_id));
        }
        verified.push(name.clone());
    }
    let known = meta.is_some_and(|m| m.log_id != 0) || !ids.is_empty();
    if let Some((_, e)) = unreadable.first().filter(|_| !known) {
        // The unread header may be the only one that names the log: a fresh
        // id chosen without it would make the log's own segments foreign
        // at the next open.
        return Err(e.clone());
    }
    let log_id = identity(fs, dir, meta, &mut ids, known_log_id)?;
    Ok(Headers {
        log_id,
        verified,
        unreadable,
    })
}

/// The header of `path`, `None` if it does not decode.
pub(crate) async fn read_header<F: Fs>(fs: &F, path: &Path) -> Result<Option<SegmentHeader>> {
    let mut buf = [0u8; SEGMENT_HEADER_BYTES];
    let read = async {
        let file = fs.open(path, OpenOptions::new().read(true)).await?;
        file.read_exact_at(&mut buf, 0).await
    };
    match read.await {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(Error::io("read", path, 0, e)),
    }
    match SegmentHeader::decode(&buf) {
        Ok(h) => Ok(Some(h)),
        Err(HeaderError::UnsupportedVersion(v)) => Err(Error::corruption(
            path,
            0,
            format!("segment of unsupported format version {v}"),
        )),
        Err(_) => Ok(None),
    }
}

/// The log's id from the meta file and the segments' headers (`ids`: segment
/// id, name, log id of every header with one).
/// `known`: the id memory holds (an in-process resume), taken when no file
/// names the log, so that a log whose first segment's header was never
/// written keeps the id its other writes carry.
fn identity<F: Fs>(
    fs: &F,
    dir: &Path,
    meta: Option<&Meta>,
    ids: &mut [(u64, String, u128)],
    known: Option<u128>,
) -> Result<u128> {
    // The newest segment first: with no meta id, it names the log.
    ids.sort_by_key(|s| std::cmp::Reverse(s.0));
    let meta_id = meta.map(|m| m.log_id).filter(|&id| id != 0);
    let Some(this) = meta_id.or(ids.first().map(|s| s.2)) else {
        // A new log, or one written before logs had an id.
        return Ok(known.unwrap_or_else(|| fs.unique_id()));
    };
    let Some((_, name, other)) = ids.iter().find(|s| s.2 != this) else {
        return Ok(this);
    };
    if meta_id.is_some() && ids.iter().all(|s| s.2 != this) {
        // No segment agrees with the meta file: the meta file is the stranger.
        return Err(Error::ForeignLog {
            path: dir.join(META_NAME),
            this_log: *other,
            file_log: this,
        });
    }
    Err(Error::ForeignLog {
        path: dir.join(name),
        this_log: this,
        file_log: *other,
    })
}

/// A removal recovery is about to make and the file whose existence is its
/// reason: `justifier` must have a verified header (and, when `full`, every
/// frame of its range must check) or the removal is `Corruption` and
/// nothing is removed.
#[derive(Debug)]
pub(crate) struct Justified {
    /// The file about to be removed.
    pub removed: String,
    /// The file whose existence makes it a leftover.
    pub justifier: String,
    /// Whether the justifier must be read end to end (an interrupted
    /// compaction's output: it replaces what it covers).
    pub full: bool,
}

/// Checks that `j`'s justifier has a verified header. One that could not be
/// read gives its read error (an open may succeed once the device answers);
/// one that does not decode or check is `Corruption`.
pub(crate) fn justify(dir: &Path, headers: &Headers, j: &Justified) -> Result<()> {
    if headers.is_verified(&j.justifier) {
        return Ok(());
    }
    if let Some((_, e)) = headers.unreadable.iter().find(|(n, _)| *n == j.justifier) {
        return Err(e.clone());
    }
    Err(Error::corruption(
        dir.join(&j.justifier),
        0,
        format!(
            "its name makes {} a leftover, but its own header does not check: nothing removed",
            j.removed
        ),
    ))
}

/// The promises of the meta file that the names alone can check: the chain
/// must start at the low-water mark (no prune recorded above it), and with
/// no active segment it must end where the clean-shutdown marker says.
/// `first` and `end` are the chain's first index and the next index its
/// names give (`None` for an empty directory); `has_active`: an active
/// segment exists (its end is checked by the scan).
pub(crate) fn chain_promises(
    dir: &Path,
    meta: Option<&Meta>,
    first: Option<(u64, String)>,
    end: u64,
    has_active: bool,
) -> Vec<LostRecords> {
    let Some(meta) = meta else { return Vec::new() };
    let mut lost = Vec::new();
    if let Some((first, name)) = first.filter(|(f, _)| *f > meta.low_water) {
        lost.push(LostRecords {
            first: meta.low_water,
            end: first,
            path: dir.join(name),
            evidence: format!(
                "the meta file's low-water mark is {}, and no prune above it is recorded",
                meta.low_water
            ),
        });
    }
    if let Some(c) = meta.clean.filter(|c| !has_active && c.next_index > end) {
        lost.push(LostRecords {
            first: end.max(meta.low_water),
            end: c.next_index,
            path: dir.to_path_buf(),
            evidence: marker_evidence(c.next_index),
        });
    }
    lost.retain(|l| l.first < l.end);
    lost
}

/// The words for the clean-shutdown marker's promise.
pub(crate) fn marker_evidence(next_index: u64) -> String {
    format!("the clean-shutdown marker recorded next index {next_index}")
}

/// What a mode does with records a promise says are missing: an error
/// outside `PointInTime`, else they join the report.
pub(crate) fn settle_losses(
    mode: RecoveryMode,
    offset: u64,
    found: Vec<LostRecords>,
    report: &mut Vec<LostRecords>,
) -> Result<()> {
    if let Some(l) = found.first().filter(|_| mode != RecoveryMode::PointInTime) {
        return Err(Error::MissingRecords {
            path: l.path.clone(),
            offset,
            first: l.first,
            end: l.end,
            evidence: l.evidence.clone(),
        });
    }
    for l in found {
        warn!(path = %l.path.display(), first = l.first, end = l.end, evidence = %l.evidence, "opening without lost records (point in time)");
        report.push(l);
    }
    Ok(())
}
