//! Bounded range reads: `Wal::read_range`, raft-engine's
//! `fetch_entries_to(begin, end, max_size)` for this log.
//!
//! Built on the iterator only (its lease keeps a prune from removing what the
//! read still needs), so it adds no read path of its own.

use std::ops::{Bound, RangeBounds};

use simfs::Fs;

use crate::error::{Error, Result};
use crate::iter::WalIter;
use crate::wal::Wal;

/// How often a read re-clamps its start (or starts again) when a prune
/// running alongside moved the first index past it. Each retry starts
/// higher, so this only bounds a pathological race.
const MAX_START_RETRIES: u32 = 8;

impl<F: Fs> Wal<F> {
    /// The records with indices in `range`, clamped to the log
    /// `[first_index, next_index)`, in index order with their indices, as one
    /// contiguous run.
    ///
    /// It stops before the record that would take the total payload past
    /// `max_bytes`, but always returns the first record of the clamped range
    /// (whatever its size, so a caller paging through the log always makes
    /// progress). An empty result means the clamped range is empty. A prune
    /// running alongside may move the start up (the result says where it
    /// starts); nothing in the middle of the run is ever skipped.
    ///
    /// Errors: `Stopped`, `Closed`, `Io` and `Corruption` as [`Wal::read`];
    /// never `OutOfRange`. If a prune passes the iterator under it (its
    /// lease revoked, `Options::max_lease_holds`) after some records, those
    /// are returned; before any, the read starts again at the new first
    /// index.
    ///
    /// Cancelling is harmless: it only reads.
    ///
    /// ```
    /// use std::path::Path;
    /// futures::executor::block_on(async {
    ///     let wal = wal::Wal::open(simfs::SimFs::new(1), Path::new("/log"), wal::Options::default()).await?;
    ///     for i in 0..5u8 {
    ///         wal.append(vec![i; 10]).await?;
    ///     }
    ///     // Clamped to the log, and at most 25 payload bytes: records 3 and 4.
    ///     let got = wal.read_range(3..100, 25).await?;
    ///     assert_eq!(got, vec![(3, vec![3; 10]), (4, vec![4; 10])]);
    ///     // The first record always comes, even over the limit.
    ///     assert_eq!(wal.read_range(1.., 0).await?.len(), 1);
    ///     assert!(wal.read_range(7..9, 100).await?.is_empty());
    ///     wal.close().await
    /// })
    /// .unwrap();
    /// ```
    pub async fn read_range(&self, range: impl RangeBounds<u64>, max_bytes: usize) -> Result<Vec<(u64, Vec<u8>)>> {
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.saturating_add(1),
            Bound::Unbounded => 0,
        };
        #[cfg(feature = "planted-bugs")]
        let start = if crate::testing::planted(crate::testing::Planted::RangeSkipsStart) {
            start.saturating_add(1)
        } else {
            start
        };
        // `end` is exclusive; `u64::MAX` is never an index.
        let end = match range.end_bound() {
            Bound::Included(&e) => e.saturating_add(1),
            Bound::Excluded(&e) => e,
            Bound::Unbounded => u64::MAX,
        };
        // A stopped or closed log answers so, even for an empty range.
        self.check_usable()?;
        let mut start = start;
        for _ in 0..MAX_START_RETRIES {
            let Some(mut it) = self.clamped_iter(start, end)? else {
                return Ok(Vec::new());
            };
            match collect_run(&mut it, end, max_bytes).await {
                // Nothing read yet and a prune passed the iterator (its
                // lease revoked after too many holds, seed 1217 of the
                // simulation): start again where the log starts now.
                Err(Error::OutOfRange { .. } | Error::IteratorExpired { .. }) => start = self.first_index().max(start),
                r => return r,
            }
        }
        Err(Error::Internal(format!(
            "read_range: a prune passed the read {MAX_START_RETRIES} times in a row"
        )))
    }

    /// An iterator at the first index of `[start, end)` clamped to the log,
    /// `None` if that is empty.
    fn clamped_iter(&self, start: u64, end: u64) -> Result<Option<WalIter<F>>> {
        let mut from = start.max(self.first_index());
        for _ in 0..MAX_START_RETRIES {
            if from >= end.min(self.next_index()) {
                return Ok(None);
            }
            match self.iter_from(from) {
                Ok(it) => return Ok(Some(it)),
                // A prune moved the first index (or is moving it) past
                // `from`: start where it leaves the log.
                Err(Error::OutOfRange { first, .. }) if first > from => from = first,
                // Below the first index only if a prune raced the clamp.
                Err(Error::OutOfRange { .. }) => from = from.max(self.first_index()),
                Err(e) => return Err(e),
            }
        }
        Err(Error::Internal(format!(
            "read_range: the first index moved past the start {MAX_START_RETRIES} times in a row"
        )))
    }
}

/// Reads from `it` while the indices stay contiguous and below `end` and the
/// payload total within `max_bytes` (the first record always).
async fn collect_run<F: Fs>(it: &mut WalIter<F>, end: u64, max_bytes: usize) -> Result<Vec<(u64, Vec<u8>)>> {
    let mut out: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut total_bytes = 0usize;
    // Checked before each step: a record at or past `end` is never read.
    while it.position() < end {
        let (index, record) = match it.next().await {
            None => break,
            Some(Ok(r)) => r,
            // A prune passed the iterator: what was read stays one run.
            Some(Err(Error::IteratorExpired { .. } | Error::OutOfRange { .. })) if !out.is_empty() => break,
            Some(Err(e)) => return Err(e),
        };
        let contiguous = out.last().is_none_or(|(last, _)| last + 1 == index);
        if index >= end || !contiguous {
            break;
        }
        if !out.is_empty() && total_bytes.saturating_add(record.len()) > max_bytes {
            break;
        }
        total_bytes = total_bytes.saturating_add(record.len());
        out.push((index, record));
    }
    debug_assert!(out.windows(2).all(|w| w[0].0 + 1 == w[1].0));
    Ok(out)
}
