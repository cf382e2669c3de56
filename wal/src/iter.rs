//! [`WalIter`]: reading the log in order, alongside appends and rotation.

use std::sync::Arc;

use simfs::Fs;

use crate::error::{Error, Result};
use crate::segment::{FrameReader, Segment};
use crate::wal::Inner;

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
    /// This iterator's lease: prune keeps what it still needs.
    lease: u64,
}

impl<F: Fs> Drop for WalIter<F> {
    fn drop(&mut self) {
        self.inner.leases().release(self.lease);
    }
}

/// The segment being read and the reader positioned in it.
type SegmentReader<F> = (Arc<Segment<F>>, FrameReader<<F as Fs>::File>);

impl<F: Fs> WalIter<F> {
    pub(crate) fn new(inner: Arc<Inner<F>>, next: u64) -> Self {
        let lease = inner.leases().take(next);
        WalIter {
            inner,
            next,
            reader: None,
            reader_rewrites: 0,
            lease,
        }
    }

    /// The index the next call returns.
    pub fn position(&self) -> u64 {
        self.next
    }

    /// The next record as `(index, payload)`, `None` when caught up.
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

    async fn step(&mut self) -> Result<Option<(u64, Vec<u8>)>> {
        {
            let st = self.inner.state();
            st.check_usable()?;
            if self.inner.leases().revoked(self.lease) {
                return Err(Error::IteratorExpired { position: self.next });
            }
            if self.next < st.first_index {
                // Only records that never existed can have been pruned under
                // a live lease (it was caught up): skip to the new start.
                self.next = st.first_index;
                self.reader = None;
            }
            if self.next >= st.readable_next {
                return Ok(None);
            }
        }
        let index = self.next;
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
        if stale {
            self.reader = None;
            let mut seg = self.inner.segment_for(index)?;
            let mut rewrites = seg.rewrites();
            let reader = match seg.reader_at(&self.inner.fs, index).await {
                Ok(r) => r,
                // Compaction replaced the segment since we looked it up: once more.
                Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                    seg = self.inner.segment_for(index)?;
                    rewrites = seg.rewrites();
                    seg.reader_at(&self.inner.fs, index).await?
                }
                Err(e) => return Err(e),
            };
            self.reader_rewrites = rewrites;
            self.reader = Some((seg, reader));
        }
        let Some((seg, reader)) = self.reader.as_mut() else {
            return Err(Error::InvalidArgument("iterator lost its reader".into()));
        };
        let end = seg.meta().end_offset;
        reader.set_limit(end);
        loop {
            let frame = reader
                .next_frame()
                .await
                .map_err(|stop| stop.into_error(&seg.path(), index))?;
            if frame.header.index < index {
                continue;
            }
            if frame.header.index > index {
                return Err(Error::corruption(
                    seg.path(),
                    frame.offset,
                    format!("index {index} missing"),
                ));
            }
            self.next += 1;
            self.inner.leases().advance(self.lease, self.next);
            return Ok(Some((index, frame.payload)));
        }
    }
}
