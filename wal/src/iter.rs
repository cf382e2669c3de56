//! [`WalIter`]: reading the log in order, alongside appends and rotation.

use simfs::Fs;

use crate::error::{Error, Result};
use crate::inner::Inner;
use crate::segment::{FrameReader, Segment};
use crate::sync::{Arc, AtomicU64, Ordering};

/// An async iterator over records in index order, from [`crate::Wal::iter_from`].
///
/// It yields acknowledged records only, including ones appended after it was
/// created; `next` returns `None` when it has caught up (call it again later
/// to see newer records). It holds the segment it is reading open, so
/// rotation does not disturb it.
///
/// ```
/// # use std::path::Path;
/// # futures::executor::block_on(async {
/// let wal = wal::Wal::open(simfs::SimFs::new(1), Path::new("/l"), Default::default()).await?;
/// wal.append(b"x".to_vec()).await?;
/// let mut it = wal.iter_from(0)?;
/// assert_eq!(it.next().await.transpose()?, Some((0, b"x".to_vec())));
/// assert!(it.next().await.is_none());
/// wal.append(b"y".to_vec()).await?;
/// assert_eq!(it.next().await.transpose()?, Some((1, b"y".to_vec())));
/// # Ok::<_, wal::Error>(()) }).unwrap();
/// ```
pub struct WalIter<F: Fs> {
    inner: Arc<Inner<F>>,
    next: u64,
    reader: Option<SegmentReader<F>>,
    /// The segment's rewrite count when the reader was made.
    reader_rewrites: u64,
    /// `Stats::resumes` when the reader was made: a resume replaces every
    /// segment object (`Writer::resume`), so a reader of an older one is
    /// dropped.
    reader_resumes: u64,
    /// This iterator's lease: prune keeps what it still needs.
    lease: u64,
    /// The lease's position, advanced here without the leases lock.
    lease_position: Arc<AtomicU64>,
    /// What the last full check saw: the reader epoch and the end of what
    /// the current reader may serve. While the epoch is unchanged, records
    /// below that end may be served from the reader's buffer without taking
    /// any lock.
    checked: Option<Checked>,
}

#[derive(Clone, Copy)]
struct Checked {
    epoch: u64,
    /// The readable end; for a sealed segment, at most one past its last
    /// index: the bytes after a sealed segment's last frame are never read
    /// (FORMAT.md §9 rule 4), since they may hold stale frames, e.g. of a
    /// truncation whose cut a lying fsync left undone.
    serve_below: u64,
    /// Whether a batch member may be served from the buffer: the segment is
    /// the active one (recovery cut it to its committed end), or a sealed
    /// segment whose verdict is known (`serve_below` stops at its damage).
    members_ok: bool,
}

impl<F: Fs> Drop for WalIter<F> {
    fn drop(&mut self) {
        self.inner.leases().release(self.lease);
    }
}

/// The segment being read and the reader positioned in it.
type SegmentReader<F> = (Arc<Segment<F>>, FrameReader<<F as Fs>::File>);

impl<F: Fs> WalIter<F> {
    /// An iterator at `next` with its lease (from `Leases::take`).
    pub(crate) fn new(inner: Arc<Inner<F>>, next: u64, (lease, lease_position): (u64, Arc<AtomicU64>)) -> Self {
        WalIter {
            inner,
            next,
            reader: None,
            reader_rewrites: 0,
            reader_resumes: 0,
            lease,
            lease_position,
            checked: None,
        }
    }

    /// The index the next call returns.
    pub fn position(&self) -> u64 {
        self.next
    }

    /// The next record as `(index, payload)`, `None` when caught up.
    ///
    /// Cancelling is harmless: the iterator does not move until a call
    /// returns, so the next call returns the same record.
    pub async fn next(&mut self) -> Option<Result<(u64, Vec<u8>)>> {
        match self.step().await {
            Ok(Some(rec)) => Some(Ok(rec)),
            Ok(None) => None,
            Err(e) => {
                self.reader = None;
                Some(Err(self.inner.prefer_stopped(e)))
            }
        }
    }

    /// Serves the next record from the reader's buffer with no lock and no
    /// I/O, if nothing changed since the last full check: the epoch is the
    /// same (no stop, close, prune, truncation or compaction since), the
    /// record was readable then, and the frame in the buffer is exactly it.
    /// Anything else goes to the full path in `step`.
    fn step_buffered(&mut self) -> Option<(u64, Vec<u8>)> {
        let checked = self.checked?;
        let index = self.next;
        if index >= checked.serve_below || self.inner.reader_epoch() != checked.epoch {
            return None;
        }
        let (seg, reader) = self.reader.as_mut()?;
        if seg.rewrites() != self.reader_rewrites {
            return None;
        }
        let frame = reader.next_buffered_frame()?;
        if frame.header.index != index || (!checked.members_ok && !frame.header.kind.commits()) {
            // Skipping into a segment, damage, or a batch member of a sealed
            // segment not yet scanned: the full path decides.
            self.reader = None;
            return None;
        }
        self.advance();
        Some((index, frame.payload))
    }

    /// Moves past the record just served.
    fn advance(&mut self) {
        self.next += 1;
        self.lease_position.store(self.next, Ordering::Release);
    }

    /// The full path: checks the state, positions a reader at the next
    /// index and reads its frame, then caches what the fast path
    /// (`step_buffered`) may serve without these checks.
    async fn step(&mut self) -> Result<Option<(u64, Vec<u8>)>> {
        if let Some(rec) = self.step_buffered() {
            return Ok(Some(rec));
        }
        self.checked = None;
        // After a cancelled operation, memory is rebuilt from the files first.
        self.inner.resume_interrupted().await?;
        // Read the epoch before the state: a change after this read makes
        // the cached check stale, never the other way round.
        let epoch = self.inner.reader_epoch();
        let Some((readable_next, written_next)) = self.check_state()? else {
            return Ok(None);
        };
        let index = self.next;
        if index >= written_next {
            // Still in the write buffer: have it written before looking for
            // it in the file (and before reading the segment's end_offset).
            self.inner.ensure_written(index).await?;
        }
        self.position_reader(index).await?;
        self.read_next(index, readable_next, epoch).await.map(Some)
    }

    /// One look at the state: usable, the lease not revoked, the position
    /// moved past a prune. Returns the readable and written ends, or `None`
    /// when the iterator has caught up.
    fn check_state(&mut self) -> Result<Option<(u64, u64)>> {
        let st = self.inner.state();
        st.check_usable()?;
        if st.stats.resumes != self.reader_resumes {
            self.reader = None;
            self.reader_resumes = st.stats.resumes;
        }
        if self.inner.leases().revoked(self.lease) {
            return Err(Error::IteratorExpired { position: self.next });
        }
        if self.next < st.frontier.first() {
            // Only records that never existed can have been pruned under
            // a live lease (it was caught up): skip to the new start.
            self.next = st.frontier.first();
            self.reader = None;
        }
        if self.next >= st.frontier.readable() {
            return Ok(None);
        }
        Ok(Some((st.frontier.readable(), st.frontier.written())))
    }

    /// Keeps the reader if it can still serve `index` (same segment, not
    /// passed, not rewritten by a truncation), else opens one at `index` in
    /// the segment that holds it now.
    async fn position_reader(&mut self, index: u64) -> Result<()> {
        let stale = match &self.reader {
            Some((seg, _)) => {
                let passed = {
                    let m = seg.meta();
                    m.sealed && m.last_index.is_none_or(|l| index > l)
                };
                passed || seg.rewrites() != self.reader_rewrites
            }
            None => true,
        };
        if !stale {
            return Ok(());
        }
        self.reader = None;
        let mut seg = self.inner.segment_for(index)?;
        let mut rewrites = seg.rewrites();
        let reader = match seg.reader_at(&self.inner.fs, index).await {
            Ok(r) => r,
            // Compaction replaced the segment since we looked it up: once more.
            Err(e) if e.is_not_found() => {
                seg = self.inner.segment_for(index)?;
                rewrites = seg.rewrites();
                seg.reader_at(&self.inner.fs, index).await?
            }
            Err(e) => return Err(e),
        };
        self.reader_rewrites = rewrites;
        self.reader = Some((seg, reader));
        Ok(())
    }

    /// Reads frames from the positioned reader until the one of `index`,
    /// with a sealed segment's one verdict on damage and batch members,
    /// serves it, and caches the fast path's bounds for `epoch`.
    async fn read_next(&mut self, index: u64, readable_next: u64, epoch: u64) -> Result<(u64, Vec<u8>)> {
        let Some((seg, reader)) = self.reader.as_mut() else {
            return Err(Error::Internal("the iterator lost its reader".into()));
        };
        // What the fast path may serve from this reader: a sealed segment
        // ends at its last index (fixed until a truncation, which bumps the
        // epoch); the active segment is the last one, so every record from
        // `index` up to `readable_next` is in it.
        let (end, serve_below, sealed) = {
            let m = seg.meta();
            let serve_below = match (m.sealed, m.last_index) {
                (true, Some(last)) => readable_next.min(last.saturating_add(1)),
                (true, None) => index,
                (false, _) => readable_next,
            };
            (m.end_offset, serve_below, m.sealed)
        };
        reader.set_limit(end);
        loop {
            let frame = reader
                .next_frame()
                .await
                .map_err(|stop| stop.into_error(&seg.path(), index))?;
            if frame.header.index < index {
                // Positioning from a sparse entry, or damage (a frame out of
                // order) in a sealed segment not scanned yet: the scan decides.
                if sealed && !seg.verdict_known() {
                    seg.build_sparse(&self.inner.fs).await?;
                    if let Some(e) = seg.damage_at(index) {
                        return Err(e);
                    }
                }
                continue;
            }
            if frame.header.index > index {
                return Err(Error::corruption(
                    seg.path(),
                    frame.offset,
                    format!("index {index} missing"),
                ));
            }
            // One verdict per byte: a sealed segment's batch member is a
            // record only if its batch commits before any damage, which the
            // segment's one scan decides (`Segment::build_sparse`, as for
            // `read`); a segment scanned already answers for every index.
            if sealed && (!frame.header.kind.commits() || seg.verdict_known()) {
                seg.build_sparse(&self.inner.fs).await?;
                if let Some(e) = seg.damage_at(index) {
                    return Err(e);
                }
            }
            let members_ok = !sealed || seg.verdict_known();
            let serve_below = match seg.valid_end().filter(|_| sealed) {
                Some(valid_end) => serve_below.min(valid_end),
                None => serve_below,
            };
            self.advance();
            self.checked = Some(Checked {
                epoch,
                serve_below,
                members_ok,
            });
            return Ok((index, frame.payload));
        }
    }
}
