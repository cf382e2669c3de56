//! The WAL's error type: what went wrong and where (path, offset, index).

use std::io;
use std::path::PathBuf;

use crate::sync::Arc;

/// Everything that can go wrong in the WAL. Cheap to clone: a group-commit
/// failure is delivered to every appender in the group.
///
/// ```
/// let e = wal::Error::WrongIndex { expected: 5, got: 7 };
/// assert_eq!(e.to_string(), "append at index 7, but the next index is 5");
/// ```
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A filesystem call failed. The message names the operation and path
    /// once, even when the `Fs` (as [`simfs::OsFs`] does) already put them
    /// into the underlying error.
    ///
    /// ```
    /// use std::{io, path::PathBuf, sync::Arc};
    /// let source = Arc::new(io::Error::new(io::ErrorKind::PermissionDenied, "open /d/x.wal: Permission denied"));
    /// let e = wal::Error::Io { op: "open", path: PathBuf::from("/d/x.wal"), offset: 0, source };
    /// assert_eq!(e.to_string(), "open /d/x.wal: Permission denied");
    /// ```
    #[error("{op} {}: {}", path.display(), io_cause(path, source))]
    Io {
        /// The operation, e.g. `"write"`, `"sync_data"`, `"rename"`.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// Byte offset for reads and writes, else 0.
        offset: u64,
        /// The underlying error.
        #[source]
        source: Arc<io::Error>,
    },
    /// The log directory is locked by another opener (in this process or another).
    #[error("log directory {path} is locked by another opener")]
    Locked {
        /// The directory.
        path: PathBuf,
    },
    /// The log's files are damaged in a way that is not a torn tail: a checksum
    /// failure with valid, once-durable records after it, a checksum failure in
    /// a sealed segment, a gap or overlap between segment names.
    #[error("corruption in {segment} at offset {offset}: {reason}")]
    Corruption {
        /// The segment file (or directory, for naming problems).
        segment: PathBuf,
        /// Byte offset of the first bad byte, 0 for naming problems.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A file in the log directory belongs to another log: its log id (in a
    /// segment header or the meta file) is not this log's. Recovery changed
    /// nothing. Remove the file, or open the directory it came from.
    #[error("{path} belongs to log {file_log:032x}, not to this directory's log {this_log:032x}")]
    ForeignLog {
        /// The foreign file (the meta file when it disagrees with every segment).
        path: PathBuf,
        /// The log id the rest of the directory agrees on.
        this_log: u128,
        /// The log id the file carries.
        file_log: u128,
    },
    /// Records the log promised are not in the directory: the clean-shutdown
    /// marker recorded a higher next index than the segments hold, or the
    /// segments start above the low-water mark with no prune recorded. An
    /// error in `TolerateTornTail` and `AbsoluteConsistency` (recovery changed
    /// nothing); `PointInTime` opens without them and lists them in
    /// `RecoveryReport::lost`.
    #[error("records {first}..{end} are missing from {path}: {evidence}")]
    MissingRecords {
        /// Where they should be: the segment, or the directory when no
        /// segment of theirs is left.
        path: PathBuf,
        /// Byte offset where the segment stops holding them, 0 for the directory.
        offset: u64,
        /// The first missing index.
        first: u64,
        /// One past the last missing index.
        end: u64,
        /// The promise that says they existed.
        evidence: String,
    },
    /// The WAL stopped after an earlier failure (an fsync error, or a write
    /// whose partial bytes could not be cut back). Every call returns this
    /// until the log is reopened, which recovers from disk.
    #[error("the WAL is stopped after an earlier failure: {cause}")]
    Stopped {
        /// The failure that stopped it.
        cause: Box<Error>,
    },
    /// An append failed because the write of its group failed; the WAL goes
    /// on (the partial write was cut back) and nothing of the group is in the log.
    #[error("append failed, nothing of its group was logged: {cause}")]
    AppendFailed {
        /// The write error.
        cause: Box<Error>,
    },
    /// A record is larger than `Options::max_record_bytes`.
    #[error("record of {len} bytes exceeds the maximum of {max} bytes")]
    RecordTooLarge {
        /// The record's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A batch has more records or bytes than the limits allow.
    #[error(
        "batch of {records} records and {bytes} bytes exceeds the limit of {max_records} records or {max_bytes} bytes"
    )]
    BatchTooLarge {
        /// Records in the batch.
        records: usize,
        /// Payload bytes in the batch.
        bytes: usize,
        /// `Options::max_batch_records`.
        max_records: usize,
        /// `Options::max_write_bytes`.
        max_bytes: usize,
    },
    /// A batch with no records.
    #[error("empty batch")]
    EmptyBatch,
    /// An append at a caller-chosen index that is not the next index.
    #[error("append at index {got}, but the next index is {expected}")]
    WrongIndex {
        /// The next index of the log.
        expected: u64,
        /// The index asked for.
        got: u64,
    },
    /// A read of an index outside the log.
    #[error("index {index} is outside the log [{first}, {next})")]
    OutOfRange {
        /// The index asked for.
        index: u64,
        /// The first index in the log.
        first: u64,
        /// One past the last readable index.
        next: u64,
    },
    /// Invalid options or arguments.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// An internal invariant of the engine did not hold (a bug in `wal`,
    /// or a thread that panicked while it held the engine's state): the WAL
    /// stops rather than act on a state it cannot trust. Reopening
    /// recovers from the files.
    #[error("internal error (a bug in wal, please report it): {0}")]
    Internal(String),
    /// The WAL was closed.
    #[error("the WAL is closed")]
    Closed,
    /// The future of an operation that changes files was dropped half-way,
    /// and rebuilding memory from the files afterwards (an in-process
    /// recovery) failed with `cause`: the WAL stopped (reopen recovers).
    #[error("{operation} was interrupted (its future was dropped) and resuming from the files failed: {cause}")]
    Interrupted {
        /// The operation, e.g. `"group commit"`, `"truncate"`.
        operation: &'static str,
        /// Why resuming failed.
        cause: Box<Error>,
    },
    /// A read-only open ([`crate::Options::read_only`]) was asked to change
    /// the log (an append, sync, prune, truncation, compaction, rotation),
    /// or cannot present it without a change (an interrupted recovery's
    /// journal must be written back first). Nothing was changed.
    #[error("{path} is open read-only: {reason}")]
    ReadOnly {
        /// The log directory, or the file that needs the change.
        path: PathBuf,
        /// What would have to change.
        reason: String,
    },
    /// An iterator's lease was revoked because it held pruning back too
    /// often (see `Options::max_lease_holds`); create a new iterator.
    #[error("iterator at index {position} expired: its lease held pruning back too long")]
    IteratorExpired {
        /// The index the iterator would have read next.
        position: u64,
    },
}

/// The underlying error's message without the path when it already names
/// it (`"open /d/x.wal: Permission denied"` becomes `"Permission denied"`),
/// so an `Io` error reads as one sentence.
fn io_cause(path: &std::path::Path, e: &io::Error) -> String {
    let full = e.to_string();
    let named = format!("{}: ", path.display());
    match full.find(&named) {
        Some(at) => full[at + named.len()..].to_owned(),
        None => full,
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, offset: u64, e: io::Error) -> Error {
        Error::Io {
            op,
            path: path.into(),
            offset,
            source: Arc::new(e),
        }
    }

    pub(crate) fn corruption(segment: impl Into<PathBuf>, offset: u64, reason: impl Into<String>) -> Error {
        Error::Corruption {
            segment: segment.into(),
            offset,
            reason: reason.into(),
        }
    }

    /// Whether this is an I/O error for a file that was not there.
    pub(crate) fn is_not_found(&self) -> bool {
        matches!(self, Error::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }

    /// Whether this error (or its cause) is the device running out of space.
    pub fn is_storage_full(&self) -> bool {
        match self {
            Error::Io { source, .. } => source.kind() == io::ErrorKind::StorageFull,
            Error::Stopped { cause } | Error::AppendFailed { cause } => cause.is_storage_full(),
            _ => false,
        }
    }

    /// Whether the WAL is stopped (every call fails until reopen).
    pub fn is_stopped(&self) -> bool {
        matches!(self, Error::Stopped { .. })
    }
}
