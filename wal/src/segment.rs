//! Segments: file naming, the in-memory view of one segment file, and
//! sequential frame reading.
//!
//! A log is a run of segment files. Sealed segments are immutable and named
//! by the index range they hold; the one active segment takes appends and is
//! named by its first index. Names are zero-padded so that listing order is
//! log order, and carry the segment id, which is never reused.

use std::path::{Path, PathBuf};

use simfs::{File, Fs, OpenOptions};

use crate::codec::{
    decode_frame_header, decode_frame_seeded, FrameError, FrameHeader, FrameKind, FrameSeed, SegmentHeader,
    FRAME_HEADER_BYTES, SEGMENT_HEADER_BYTES,
};
use crate::error::{Error, Result};
use crate::sync::{Arc, AtomicU64, Mutex, MutexGuard, Ordering};

/// Suffix of every segment file.
pub(crate) const SEGMENT_SUFFIX: &str = ".wal";
/// Suffix of the WAL's temporary files (`<segment name>.tmp`), removed at open.
pub(crate) const TMP_SUFFIX: &str = ".wal.tmp";
/// Bytes read at a time by sequential readers.
/// The first read of a sequential reader: small, because a point read needs
/// one frame.
const READ_CHUNK_BYTES: usize = 64 << 10;
/// Sequential reads double their chunk up to this (readahead for scans).
const READ_CHUNK_MAX_BYTES: usize = 1 << 20;
/// Sparse index: at most about this many entries per sealed segment.
pub(crate) const SPARSE_ENTRIES_MAX: u64 = 256;
/// Sparse index stride of the active segment.
pub(crate) const ACTIVE_SPARSE_STRIDE: u64 = 64;

/// Drops entries from a sorted sparse index until at most `max` remain,
/// keeping the first and spreading the rest evenly.
pub(crate) fn thin_sparse(sparse: &mut Vec<(u64, u64)>, max: u64) {
    let len = sparse.len() as u64;
    if len <= max {
        return;
    }
    let step = len.div_ceil(max);
    let mut i = 0u64;
    sparse.retain(|_| {
        let keep = i % step == 0;
        i += 1;
        keep
    });
    debug_assert!(sparse.len() as u64 <= max);
}

/// What a file name in the log directory says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SegmentName {
    /// `{first:020}-{last:020}-{id:016x}.wal`
    Sealed { first: u64, last: u64, id: u64 },
    /// `{first:020}-active-{id:016x}.wal`
    Active { first: u64, id: u64 },
}

impl SegmentName {
    pub(crate) fn parse(name: &str) -> Option<SegmentName> {
        let stem = name.strip_suffix(SEGMENT_SUFFIX)?;
        let mut parts = stem.split('-');
        let (a, b, c) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || a.len() != 20 || c.len() != 16 {
            return None;
        }
        let first = parse_dec(a)?;
        let id = u64::from_str_radix(c, 16).ok().filter(|_| is_lower_hex(c))?;
        if b == "active" {
            return Some(SegmentName::Active { first, id });
        }
        if b.len() != 20 {
            return None;
        }
        let last = parse_dec(b)?;
        Some(SegmentName::Sealed { first, last, id })
    }

    pub(crate) fn file_name(&self) -> String {
        match self {
            SegmentName::Sealed { first, last, id } => {
                format!("{first:020}-{last:020}-{id:016x}{SEGMENT_SUFFIX}")
            }
            SegmentName::Active { first, id } => format!("{first:020}-active-{id:016x}{SEGMENT_SUFFIX}"),
        }
    }

    pub(crate) fn first(&self) -> u64 {
        match self {
            SegmentName::Sealed { first, .. } | SegmentName::Active { first, .. } => *first,
        }
    }

    pub(crate) fn id(&self) -> u64 {
        match self {
            SegmentName::Sealed { id, .. } | SegmentName::Active { id, .. } => *id,
        }
    }
}

fn parse_dec(s: &str) -> Option<u64> {
    if s.bytes().all(|b| b.is_ascii_digit()) {
        s.parse().ok()
    } else {
        None
    }
}

fn is_lower_hex(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The per-segment salt. Derived from the id and first index (ids are never
/// reused), so it is deterministic and needs no randomness; readers only
/// compare it with the header.
pub(crate) fn salt_for(id: u64, first_index: u64) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(b"salt");
    h.update(&id.to_le_bytes());
    h.update(&first_index.to_le_bytes());
    h.finalize()
}

/// The header a segment of log `log_id` with this id and first index must
/// have.
pub(crate) fn header_for(log_id: u128, id: u64, first_index: u64) -> SegmentHeader {
    SegmentHeader {
        segment_id: id,
        first_index,
        salt: salt_for(id, first_index),
        log_id,
    }
}

/// Mutable facts about a segment, guarded by its mutex.
#[derive(Debug)]
pub(crate) struct SegMeta {
    /// Current path (changes when sealed).
    pub path: PathBuf,
    /// Last index held, `None` while empty.
    pub last_index: Option<u64>,
    /// Whether the segment is sealed (immutable, named by its range).
    pub sealed: bool,
    /// End of the last committed frame (the file may be longer for a sealed
    /// segment read from disk; this is then the file length).
    pub end_offset: u64,
    /// Sparse index: `(index, offset)` of every `stride`-th record, sorted.
    pub sparse: Vec<(u64, u64)>,
    /// Whether `sparse` covers the whole segment (false until a sealed
    /// segment from disk was scanned once).
    pub sparse_complete: bool,
    /// A sealed segment's verdict, once scanned: the first index it does
    /// not validly hold and why (its damage), `None` if every record of its
    /// name's range checks. Records below it read normally: one verdict for
    /// `read`, iteration and recovery (see `Segment::build_sparse`).
    pub damage: Option<(u64, Error)>,
}

impl SegMeta {
    /// A sealed segment known by its name only (found on disk, or a
    /// compaction output just written): holding records up to `last`, not
    /// scanned yet, so its end, sparse index and verdict are unknown until
    /// the first read scans it (`Segment::build_sparse`).
    pub(crate) fn sealed_unscanned(path: PathBuf, last: u64) -> SegMeta {
        SegMeta {
            path,
            last_index: Some(last),
            sealed: true,
            end_offset: u64::MAX,
            sparse: Vec::new(),
            sparse_complete: false,
            damage: None,
        }
    }
}

/// One segment file.
pub(crate) struct Segment<F: Fs> {
    pub id: u64,
    pub first_index: u64,
    pub seed: FrameSeed,
    meta: Mutex<SegMeta>,
    file: Mutex<Option<Arc<F::File>>>,
    /// Bumped whenever the file's content below `end_offset` changes
    /// (truncation): readers holding buffered bytes must start over.
    rewrites: AtomicU64,
}

impl<F: Fs> Segment<F> {
    /// How often the segment was rewritten (see `rewrites`).
    pub(crate) fn rewrites(&self) -> u64 {
        self.rewrites.load(Ordering::Acquire)
    }

    /// Marks the segment as gone (truncated away): readers start over.
    pub(crate) fn mark_removed(&self) {
        self.rewrites.fetch_add(1, Ordering::AcqRel);
    }

    /// Installs a new handle after the file was cut or replaced.
    pub(crate) fn replace_file(&self, file: Arc<F::File>) {
        *self.file.lock().unwrap_or_else(|e| e.into_inner()) = Some(file);
        self.rewrites.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn new(id: u64, first_index: u64, meta: SegMeta, file: Option<Arc<F::File>>) -> Self {
        Segment {
            id,
            first_index,
            // The frame seed does not depend on the log id.
            seed: header_for(0, id, first_index).frame_seed(),
            meta: Mutex::new(meta),
            file: Mutex::new(file),
            rewrites: AtomicU64::new(0),
        }
    }

    pub(crate) fn meta(&self) -> MutexGuard<'_, SegMeta> {
        self.meta.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn path(&self) -> PathBuf {
        self.meta().path.clone()
    }

    /// The open handle, opening the file read-only on first use.
    pub(crate) async fn file(&self, fs: &F) -> Result<Arc<F::File>> {
        if let Some(f) = self.file.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            return Ok(f);
        }
        let path = self.path();
        let f = fs
            .open(&path, OpenOptions::new().read(true))
            .await
            .map_err(|e| Error::io("open", &path, 0, e))?;
        let f = Arc::new(f);
        let mut slot = self.file.lock().unwrap_or_else(|e| e.into_inner());
        Ok(slot.get_or_insert(f).clone())
    }

    /// Checks the header of a sealed segment read from disk against its name.
    async fn check_header(&self, fs: &F) -> Result<()> {
        let file = self.file(fs).await?;
        let path = self.path();
        let mut buf = [0u8; SEGMENT_HEADER_BYTES];
        file.read_exact_at(&mut buf, 0).await.map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                Error::corruption(&path, 0, "segment shorter than its header")
            } else {
                Error::io("read", &path, 0, e)
            }
        })?;
        // The log id was checked against the log's at open (recovery's
        // `evidence::check_headers`); here only the place in the log.
        let expected = header_for(0, self.id, self.first_index);
        match SegmentHeader::decode(&buf) {
            Ok(h) if SegmentHeader { log_id: 0, ..h } == expected => Ok(()),
            Ok(h) => Err(Error::corruption(
                &path,
                0,
                format!("header {h:?} does not match the name (expected {expected:?})"),
            )),
            Err(e) => Err(Error::corruption(&path, 0, format!("bad segment header: {e}"))),
        }
    }

    /// Scans a sealed segment once, checking every frame, to build its sparse
    /// index and its verdict. A sealed segment validly holds the records up
    /// to its last committing frame before the first damage (a frame that
    /// does not check, an index out of order, the file ending early, or its
    /// last frame inside a batch): the sparse index covers those, and the
    /// first index past them is recorded with its `Corruption` in
    /// `SegMeta::damage`, which every read at or above it returns. An I/O
    /// error is returned and nothing is recorded (the next read tries again).
    pub(crate) async fn build_sparse(&self, fs: &F) -> Result<()> {
        let (path, last, sealed, end) = {
            let m = self.meta();
            if m.sparse_complete {
                return Ok(());
            }
            (m.path.clone(), m.last_index, m.sealed, m.end_offset)
        };
        let Some(last) = last else { return Ok(()) };
        self.check_header(fs).await?;
        let file = self.file(fs).await?;
        let len = file.len().await.map_err(|e| Error::io("len", &path, 0, e))?;
        // Recovery may read a justifier before the names were validated
        // (FORMAT.md §3.7 rule 3): a name whose range runs backwards is
        // corruption here too, not an overflow.
        let Some(count) = last.checked_sub(self.first_index).map(|d| d.saturating_add(1)) else {
            return Err(Error::corruption(
                &path,
                0,
                format!("the name's last index {last} is below its first {}", self.first_index),
            ));
        };
        // The active segment's writer adds entries every ACTIVE_SPARSE_STRIDE.
        let stride = if sealed {
            (count / SPARSE_ENTRIES_MAX).max(ACTIVE_SPARSE_STRIDE)
        } else {
            ACTIVE_SPARSE_STRIDE
        };
        let limit = if sealed { len } else { end.min(len) };
        let mut reader = FrameReader::new(file, self.seed, SEGMENT_HEADER_BYTES as u64, limit);
        let scan = scan_frames(&mut reader, &path, self.first_index, last, sealed, stride).await?;
        let (mut sparse, committed_end, damage) = (scan.sparse, scan.committed_end, scan.damage);
        let mut m = self.meta();
        m.damage = damage.map(|e| (committed_end, e));
        // Entries the writer added meanwhile (active segment) are kept.
        sparse.extend(m.sparse.iter().filter(|e| e.0 > last).copied());
        m.sparse = sparse;
        m.sparse_complete = true;
        if sealed {
            m.end_offset = len;
        }
        Ok(())
    }

    /// Reads the whole segment and fails with its damage, if it has any:
    /// for recovery, which may remove files only because this one is whole.
    pub(crate) async fn verify_whole(&self, fs: &F) -> Result<()> {
        self.build_sparse(fs).await?;
        match &self.meta().damage {
            Some((_, e)) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Records damage found after the verdict was made (a full verification
    /// read the file again and found `error` from index `end` on): reads at
    /// or above `end` now return it, as a reopen would decide. An earlier
    /// damage point is kept.
    pub(crate) fn record_damage(&self, end: u64, error: Error) {
        let mut m = self.meta();
        if m.damage.as_ref().is_none_or(|(at, _)| end < *at) {
            m.damage = Some((end, error));
            m.sparse.retain(|s| s.0 < end);
        }
    }

    /// The damage a read of `index` meets, if the segment was scanned and
    /// does not validly hold `index` (see [`Segment::build_sparse`]).
    pub(crate) fn damage_at(&self, index: u64) -> Option<Error> {
        match &self.meta().damage {
            Some((end, e)) if index >= *end => Some(e.clone()),
            _ => None,
        }
    }

    fn is_sealed(&self) -> bool {
        self.meta().sealed
    }

    /// Whether the segment's verdict is known (it was scanned whole).
    pub(crate) fn verdict_known(&self) -> bool {
        self.meta().sparse_complete
    }

    /// The first index the segment does not validly hold, if it is damaged.
    pub(crate) fn valid_end(&self) -> Option<u64> {
        self.meta().damage.as_ref().map(|d| d.0)
    }

    /// Reads the record at `index`, which must be in this segment and below
    /// the readable frontier.
    pub(crate) async fn read(&self, fs: &F, index: u64) -> Result<Vec<u8>> {
        let mut reader = self.reader_at(fs, index).await?;
        if let Some(e) = self.damage_at(index) {
            return Err(e);
        }
        let path = self.path();
        loop {
            let frame = reader
                .next_frame()
                .await
                .map_err(|stop| stop.into_error(&path, index))?;
            // A frame out of order, or a batch member, in a sealed segment
            // not scanned yet: the scan's verdict decides, as for iteration.
            let undecided = frame.header.index < index || !frame.header.kind.commits();
            if undecided && self.is_sealed() && !self.verdict_known() {
                self.build_sparse(fs).await?;
                if let Some(e) = self.damage_at(index) {
                    return Err(e);
                }
            }
            match frame.header.index.cmp(&index) {
                std::cmp::Ordering::Less => continue,
                std::cmp::Ordering::Equal => return Ok(frame.payload),
                std::cmp::Ordering::Greater => {
                    return Err(Error::corruption(
                        &path,
                        frame.offset,
                        format!("index {index} missing: found {}", frame.header.index),
                    ))
                }
            }
        }
    }

    /// A reader positioned at or before the frame of `index`.
    pub(crate) async fn reader_at(&self, fs: &F, index: u64) -> Result<FrameReader<F::File>> {
        if index == self.first_index {
            // A read from the start (every segment of a full scan) needs no
            // sparse index: skip the extra pass that builds one.
            self.prepare_unindexed(fs).await?;
        } else {
            self.build_sparse(fs).await?;
        }
        let file = self.file(fs).await?;
        let (start, end) = {
            let m = self.meta();
            let pos = m.sparse.partition_point(|&(i, _)| i <= index);
            let start = if pos == 0 {
                SEGMENT_HEADER_BYTES as u64
            } else {
                m.sparse[pos - 1].1
            };
            (start, m.end_offset)
        };
        Ok(FrameReader::new(file, self.seed, start, end))
    }

    /// What `build_sparse` checks before its scan, without the scan: the
    /// header matches the name, and a sealed segment's end is known.
    async fn prepare_unindexed(&self, fs: &F) -> Result<()> {
        let (path, sealed, end) = {
            let m = self.meta();
            if m.sparse_complete {
                return Ok(());
            }
            (m.path.clone(), m.sealed, m.end_offset)
        };
        self.check_header(fs).await?;
        if sealed && end == u64::MAX {
            let file = self.file(fs).await?;
            let len = file.len().await.map_err(|e| Error::io("len", &path, 0, e))?;
            self.meta().end_offset = len;
        }
        Ok(())
    }
}

/// A frame read from a segment.
pub(crate) struct ReadFrame {
    pub offset: u64,
    pub header: FrameHeader,
    pub payload: Vec<u8>,
}

/// A frame header read from a segment (payload checked but not kept).
pub(crate) struct ReadHeader {
    pub offset: u64,
    pub header: FrameHeader,
}

/// Why a sequential read stopped.
#[derive(Debug)]
pub(crate) enum ReadStop {
    /// The bytes at `offset` are not a valid frame.
    Bad { offset: u64, error: FrameError },
    /// The read limit was reached exactly at a frame boundary.
    End { offset: u64 },
    /// The filesystem failed.
    Io { offset: u64, error: std::io::Error },
}

impl ReadStop {
    /// For reads of data that must exist: every stop is an error.
    pub(crate) fn into_error(self, path: &Path, index: u64) -> Error {
        match self {
            ReadStop::Io { offset, error } => Error::io("read", path, offset, error),
            ReadStop::Bad { offset, error } => {
                Error::corruption(path, offset, format!("{error} while reading index {index}"))
            }
            ReadStop::End { offset } => Error::corruption(path, offset, format!("segment ends before index {index}")),
        }
    }
}

/// What one pass over a segment's frames found (see [`scan_frames`]).
pub(crate) struct FrameScan {
    /// `(index, offset)` of every `stride`-th record validly held.
    pub sparse: Vec<(u64, u64)>,
    /// The index after the last committing frame before the stop: the
    /// segment validly holds `first..committed_end`.
    pub committed_end: u64,
    /// The file offset just past that frame.
    pub committed_offset: u64,
    /// Why the scan stopped before `last`, as a `Corruption` naming the
    /// offset; `None` if every record through `last` checked.
    pub damage: Option<Error>,
    /// The stop was the read limit, reached at a frame boundary (no bad
    /// bytes: for a segment whose end is not known, a clean end).
    pub at_limit: bool,
}

/// The one decoder of a segment's validity, shared by reads
/// ([`Segment::build_sparse`]) and the verifier (`verify.rs`): expects the records
/// `first..=last` in order from `reader`. The segment validly holds them
/// up to its last committing frame before the first damage: a frame that
/// does not check, an index out of order, the read limit, or (`sealed`)
/// its last frame inside a batch. An I/O error is returned as such.
pub(crate) async fn scan_frames<Fl: File>(
    reader: &mut FrameReader<Fl>,
    path: &Path,
    first: u64,
    last: u64,
    sealed: bool,
    stride: u64,
) -> Result<FrameScan> {
    debug_assert!(stride > 0);
    let mut scan = FrameScan {
        sparse: Vec::new(),
        committed_end: first,
        committed_offset: reader.offset(),
        damage: None,
        at_limit: false,
    };
    let mut expected = first;
    while expected <= last {
        let frame = match reader.next_header().await {
            Ok(f) => f,
            Err(stop @ ReadStop::Io { .. }) => return Err(stop.into_error(path, expected)),
            Err(stop) => {
                scan.at_limit = matches!(stop, ReadStop::End { .. });
                scan.damage = Some(stop.into_error(path, expected));
                break;
            }
        };
        if frame.header.index != expected {
            scan.damage = Some(Error::corruption(
                path,
                frame.offset,
                format!("frame has index {}, expected {expected}", frame.header.index),
            ));
            break;
        }
        if (expected - first) % stride == 0 {
            scan.sparse.push((expected, frame.offset));
        }
        if sealed && expected == last && !frame.header.kind.commits() {
            scan.damage = Some(Error::corruption(
                path,
                frame.offset,
                format!("sealed segment ends inside a batch at index {last}"),
            ));
            break;
        }
        if expected == u64::MAX {
            break;
        }
        expected += 1;
        if frame.header.kind.commits() {
            scan.committed_end = expected;
            scan.committed_offset = reader.offset();
        }
    }
    if scan.damage.is_some() {
        // Members of a batch the damage cut off are not records.
        let end = scan.committed_end;
        scan.sparse.retain(|e| e.0 < end);
    }
    Ok(scan)
}

/// Reads frames sequentially with large buffered reads (one system call per
/// chunk, not per record). Never reads at or past `limit`.
pub(crate) struct FrameReader<Fl: File> {
    file: Arc<Fl>,
    seed: FrameSeed,
    /// `seed.hasher()`, computed once.
    seeded: crc32fast::Hasher,
    /// File offset of `buf[0]`.
    buf_offset: u64,
    /// Read bytes are `buf[..end]`; the rest is spare room, kept between
    /// refills so that a refill neither allocates nor zeroes memory.
    buf: Vec<u8>,
    end: usize,
    /// Position of the next frame within `buf`.
    pos: usize,
    limit: u64,
    /// Bytes the next refill reads: grows from `READ_CHUNK_BYTES` to
    /// `READ_CHUNK_MAX_BYTES` as the reader proves sequential.
    chunk: usize,
}

impl<Fl: File> FrameReader<Fl> {
    pub(crate) fn new(file: Arc<Fl>, seed: FrameSeed, offset: u64, limit: u64) -> Self {
        FrameReader {
            file,
            seed,
            seeded: seed.hasher(),
            buf_offset: offset,
            buf: Vec::new(),
            end: 0,
            pos: 0,
            limit,
            chunk: READ_CHUNK_BYTES,
        }
    }

    /// File offset of the next frame.
    pub(crate) fn offset(&self) -> u64 {
        self.buf_offset + self.pos as u64
    }

    /// Raises the read limit (the active segment grows).
    pub(crate) fn set_limit(&mut self, limit: u64) {
        self.limit = self.limit.max(limit);
    }

    /// Makes sure `want` bytes from the current position are buffered, or as
    /// many as exist before `limit`. Returns how many are available.
    async fn fill(&mut self, want: usize) -> Result<usize, ReadStop> {
        let avail = self.end - self.pos;
        if avail >= want {
            return Ok(avail);
        }
        // Move the unconsumed bytes to the front, then read more after them.
        self.buf.copy_within(self.pos..self.end, 0);
        self.buf_offset += self.pos as u64;
        self.end = avail;
        self.pos = 0;
        let target = want.max(self.chunk);
        self.chunk = (self.chunk * 2).min(READ_CHUNK_MAX_BYTES);
        let read_end = (self.buf_offset + target as u64).min(self.limit);
        let to_read = read_end.saturating_sub(self.buf_offset + self.end as u64) as usize;
        if to_read == 0 {
            return Ok(self.end);
        }
        let room = self.end + to_read;
        if self.buf.len() < room {
            self.buf.resize(room, 0);
        }
        while self.end < room {
            let off = self.buf_offset + self.end as u64;
            match self.file.read_at(&mut self.buf[self.end..room], off).await {
                Ok(0) => break,
                Ok(n) => self.end += n,
                Err(error) => return Err(ReadStop::Io { offset: off, error }),
            }
        }
        Ok(self.end)
    }

    /// The next record frame (skipping padding) if it is entirely in the
    /// buffer: no I/O, no await. `None` when bytes must be read first or the
    /// bytes there do not decode; [`FrameReader::next_frame`] then reads,
    /// or reports exactly what is wrong.
    pub(crate) fn next_buffered_frame(&mut self) -> Option<ReadFrame> {
        loop {
            let offset = self.offset();
            let rest = self.buf.get(self.pos..self.end)?;
            let (header, payload) = decode_frame_seeded(rest, &self.seeded).ok()?;
            let total = header.frame_len();
            if offset + total as u64 > self.limit {
                return None;
            }
            let padding = header.kind == FrameKind::Padding;
            let payload = if padding { Vec::new() } else { payload.to_vec() };
            self.pos += total;
            if !padding {
                return Some(ReadFrame {
                    offset,
                    header,
                    payload,
                });
            }
        }
    }

    /// Reads and checks the next record frame (skipping padding), returning
    /// its payload.
    pub(crate) async fn next_frame(&mut self) -> Result<ReadFrame, ReadStop> {
        loop {
            if let Some(frame) = self.next_buffered_frame() {
                return Ok(frame);
            }
            // Not wholly buffered, or it does not decode: read it, and say
            // exactly what is wrong if it is bad. A good frame is then in
            // the buffer, and the next turn serves it.
            let (offset, _, total) = self.peek().await?;
            decode_frame_seeded(&self.buf[self.pos..self.pos + total], &self.seeded)
                .map_err(|error| ReadStop::Bad { offset, error })?;
        }
    }

    /// Reads and checks the next record frame (skipping padding) without
    /// copying its payload.
    pub(crate) async fn next_header(&mut self) -> Result<ReadHeader, ReadStop> {
        loop {
            let frame = self.next_raw_header().await?;
            if frame.header.kind != FrameKind::Padding {
                return Ok(frame);
            }
        }
    }

    /// Reads and checks the next frame of any kind, padding included.
    pub(crate) async fn next_raw_header(&mut self) -> Result<ReadHeader, ReadStop> {
        let (offset, header, total) = self.peek().await?;
        let frame = &self.buf[self.pos..self.pos + total];
        decode_frame_seeded(frame, &self.seeded).map_err(|error| ReadStop::Bad { offset, error })?;
        self.pos += total;
        Ok(ReadHeader { offset, header })
    }

    /// Buffers the next frame and decodes its header (length checked against
    /// the maximum before the payload is read).
    async fn peek(&mut self) -> Result<(u64, FrameHeader, usize), ReadStop> {
        let offset = self.offset();
        if offset >= self.limit {
            return Err(ReadStop::End { offset });
        }
        let avail = self.fill(FRAME_HEADER_BYTES).await?;
        if avail < FRAME_HEADER_BYTES {
            return Err(ReadStop::Bad {
                offset,
                error: FrameError::Short,
            });
        }
        let header = decode_frame_header(&self.buf[self.pos..self.end], self.seed)
            .map_err(|error| ReadStop::Bad { offset, error })?;
        let total = header.frame_len();
        if self.fill(total).await? < total {
            return Err(ReadStop::Bad {
                offset,
                error: FrameError::Short,
            });
        }
        Ok((offset, header, total))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_sort_in_log_order() {
        let a = SegmentName::Sealed {
            first: 5,
            last: 9,
            id: 1,
        };
        let b = SegmentName::Sealed {
            first: 10,
            last: 100,
            id: 2,
        };
        let c = SegmentName::Active { first: 101, id: 0xab };
        for n in [a, b, c] {
            assert_eq!(SegmentName::parse(&n.file_name()), Some(n));
        }
        let mut names = vec![c.file_name(), a.file_name(), b.file_name()];
        names.sort();
        assert_eq!(names, vec![a.file_name(), b.file_name(), c.file_name()]);
    }

    #[test]
    fn thinning_keeps_the_first_and_bounds_the_size() {
        let mut sparse: Vec<(u64, u64)> = (0..1000).map(|i| (i * 64, i * 1000)).collect();
        thin_sparse(&mut sparse, 256);
        assert!(sparse.len() <= 256 && sparse.len() >= 200);
        assert_eq!(sparse[0], (0, 0));
        assert!(sparse.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn malformed_names_do_not_parse() {
        for bad in [
            "",
            ".wal",
            "00000000000000000001-active-0000000000000001.tmp",
            "0000000000000000001-active-0000000000000001.wal",
            "00000000000000000001-activ-0000000000000001.wal",
            "00000000000000000001-active-000000000000000G.wal",
            "00000000000000000001-active-000000000000000A.wal",
            "+0000000000000000001-active-0000000000000001.wal",
            "99999999999999999999-active-0000000000000001.wal",
            "00000000000000000001-00000000000000000002-0000000000000001-x.wal",
        ] {
            assert_eq!(SegmentName::parse(bad), None, "{bad}");
        }
    }
}
