//! The log's lifecycle: prune a prefix, truncate a suffix, merge small
//! sealed segments (the plan is compaction.rs), and the meta-file updates
//! they need. Reader leases are leases.rs.
//!
//! Crash-safety arguments, step by step, are in `docs/ARCHITECTURE.md`. In
//! short: prune makes the new low-water mark durable before it deletes
//! anything (so any subset of unsynced unlinks is harmless); truncate deletes
//! newest first, each deletion durable, then cuts the segment holding the new
//! last record; compaction makes its output durable before its inputs go, and
//! open reconciles whatever an interrupted run left.

use std::path::{Path, PathBuf};

use simfs::{File, Fs, OpenOptions};
use tracing::info;

use crate::codec::{encode_frame, encode_padding, padding_len, FrameKind};
use crate::compaction::{CompactionRun, SegmentInfo};
use crate::error::{Error, Result};
use crate::inner::Inner;
use crate::meta::CleanMarker;
use crate::seals::{SealCause, SealEvent};
use crate::segment::{
    header_for, thin_sparse, FrameReader, ReadFrame, SegMeta, Segment, SegmentName, SPARSE_ENTRIES_MAX, TMP_SUFFIX,
};
use crate::sync::Arc;
use crate::writer::ActiveTail;

impl<F: Fs> Inner<F> {
    /// Records where the log ends (called by `close` after the final sync).
    ///
    /// A log with no segment keeps its first index only in memory when a
    /// snapshot install moved it above the low-water mark and no append
    /// created the segment; the marker's write records it as the low-water
    /// mark too, so the marker never promises records below an empty chain.
    pub(crate) async fn write_clean_marker(&self, active: Option<(u64, u64)>) -> Result<()> {
        let (next_index, empty_first) = {
            let state = self.state();
            let empty = state.segments.is_empty();
            (state.frontier.readable(), empty.then_some(state.frontier.first()))
        };
        let (active_id, active_len) = active.unwrap_or((0, 0));
        self.update_meta(|m| {
            if let Some(first) = empty_first {
                m.low_water = m.low_water.max(first);
            }
            m.clean = Some(CleanMarker {
                active_id,
                active_len,
                next_index,
            })
        })
        .await
    }

    /// Makes sure the first index a prune returns survives a restart. It
    /// does when a segment exists (its name, or the low-water mark above it,
    /// fixes the first index) or when the low-water mark is already at or
    /// above it. An empty log whose first index is above the low-water mark
    /// got it from a snapshot install (`Inner::admit`) whose segment does
    /// not exist yet, or never will: its append failed before creating it.
    /// That index is in memory only, and a restart would start at the
    /// low-water mark again, so a prune answering `Ok(first)` records it first.
    pub(crate) async fn persist_first_index(&self, first: u64) -> Result<()> {
        let has_segment = !self.state().segments.is_empty();
        if has_segment || self.meta.get().await.low_water >= first {
            return Ok(());
        }
        self.update_meta(|m| m.low_water = m.low_water.max(first)).await
    }

    /// Removes segment files in the given order, then fsyncs the directory
    /// once. Each removal is already covered by a durable record (the meta
    /// file's low-water mark, or a durable compaction output), so a crash in
    /// between leaves leftovers that open reconciles. A failure stops the WAL:
    /// the directory no longer matches memory.
    async fn remove_all<'s>(&self, segments: impl Iterator<Item = &'s Arc<Segment<F>>>) -> Result<()>
    where
        F: 's,
    {
        for seg in segments {
            let path = seg.path();
            if let Err(e) = self.fs.remove_file(&path).await {
                if e.kind() != std::io::ErrorKind::NotFound {
                    return Err(self.stop(Error::io("remove", &path, 0, e)));
                }
            }
        }
        self.fs
            .sync_dir(&self.dir)
            .await
            .map_err(|e| self.stop(Error::io("sync_dir", &self.dir, 0, e)))
    }

    /// Prunes through `k`: removes the sealed segments whose records are
    /// all at or below `k` and, when `exact`, moves the first index to
    /// `k + 1` inside the segment that now comes first (its records below
    /// stay in the file, unreadable, until the whole segment goes). Never
    /// past the durable end: a record that is not durable yet is not
    /// pruned. Returns the new first index. See [`crate::Wal::prune_through`].
    pub(crate) async fn prune_sealed(&self, k: u64, exact: bool) -> Result<u64> {
        let (doomed, new_first) = {
            let st = self.state();
            st.check_usable()?;
            let first = st.frontier.first();
            let doomed: Vec<Arc<Segment<F>>> = st
                .segments
                .iter()
                .take_while(|s| {
                    let m = s.meta();
                    m.sealed && m.last_index.is_some_and(|l| l <= k)
                })
                .cloned()
                .collect();
            let whole_first = doomed.last().and_then(|s| s.meta().last_index).map_or(first, |l| l + 1);
            let exact_first = if exact {
                k.saturating_add(1).min(st.frontier.durable())
            } else {
                first
            };
            #[cfg(feature = "planted-bugs")]
            let exact_first = if crate::testing::planted(crate::testing::Planted::PruneWholeSegmentsOnly) {
                first
            } else {
                exact_first
            };
            let new_first = whole_first.max(exact_first).max(first);
            // Exactly what goes: iterators may start at `new_first` meanwhile.
            self.leases().set_pruning_below(new_first);
            if new_first == first && doomed.is_empty() {
                return Ok(first);
            }
            (doomed, new_first)
        };
        // 1. The new low-water mark, durably: from here on, whatever subset
        //    of the unlinks below survives a crash is ignored and removed at
        //    open, and records below it are not part of the log.
        #[cfg(feature = "planted-bugs")]
        let recorded = if crate::testing::planted(crate::testing::Planted::ExactPruneNotDurable) {
            doomed.last().and_then(|s| s.meta().last_index).map_or(0, |l| l + 1)
        } else {
            new_first
        };
        #[cfg(not(feature = "planted-bugs"))]
        let recorded = new_first;
        self.update_meta(|m| m.low_water = m.low_water.max(recorded)).await?;
        // 2. Memory: readers see the new first index.
        {
            let mut st = self.state();
            st.frontier.pruned_to(new_first);
            st.segments.retain(|s| !doomed.iter().any(|d| Arc::ptr_eq(s, d)));
            debug_assert!(st.segments.first().is_none_or(|s| s.first_index <= new_first));
        }
        self.invalidate_readers();
        // 3. The files, oldest first, without holding any lock appends need.
        if !doomed.is_empty() {
            self.remove_all(doomed.iter()).await?;
        }
        info!(first_index = new_first, removed = doomed.len(), "pruned");
        Ok(new_first)
    }

    /// Empties the log through `k` (`k` at or past the last record): every
    /// segment goes, the next index becomes `k + 1`. Called with the writer
    /// lock held and the queue drained.
    pub(crate) async fn prune_all(&self, k: u64) -> Result<u64> {
        let new_first = k
            .checked_add(1)
            .filter(|&n| n < u64::MAX)
            .ok_or_else(|| Error::InvalidArgument("prune point at the end of the index space".into()))?;
        self.update_meta(|m| m.low_water = m.low_water.max(new_first)).await?;
        let doomed = {
            let mut st = self.state();
            st.frontier.emptied_at(new_first);
            st.reseatable = true;
            std::mem::take(&mut st.segments)
        };
        self.invalidate_readers();
        self.remove_all(doomed.iter().rev()).await?;
        info!(first_index = new_first, removed = doomed.len(), "pruned everything");
        Ok(new_first)
    }

    /// Removes every record at or above `from`, newest first, each step
    /// durable. Called with the writer lock held and the queue drained.
    /// Returns the segment that now holds the last record, to become active.
    pub(crate) async fn truncate_from(&self, from: u64) -> Result<Option<ActiveTail<F>>> {
        // Readers stop seeing the doomed records at once.
        let first = {
            let mut st = self.state();
            st.frontier.truncated(from);
            st.frontier.first()
        };
        self.invalidate_readers();
        // Subscribers forget what they hold from `from` on before any seal
        // event of this truncation reaches them.
        self.seals.truncated(from);
        // The low-water mark keeps the next index if everything goes; the
        // id high-water mark keeps the doomed segments' ids from coming back.
        // A cut inside the last segment that keeps at least one record needs
        // neither (the kept records fix the range, no id goes away): then
        // only the clean marker must go before the log changes, which saves
        // the meta file's two syncs on the common Raft conflict.
        let removes_a_segment = self.state().segments.last().is_some_and(|s| s.first_index >= from);
        if from > first && !removes_a_segment {
            self.ensure_dirty().await?;
        } else {
            self.update_meta(|m| m.low_water = m.low_water.max(first)).await?;
        }
        // 1. Whole segments above the cut, newest first, each removal durable:
        //    at every crash point what remains is a contiguous prefix. When
        //    the cut empties the log (`from == first`), every segment goes,
        //    whole: the first may start below `first` (an exact prune left
        //    the records below it in the file, outside the log), and cutting
        //    it would read those records, which may be damaged, for nothing.
        let empties = from == first;
        loop {
            let victim = {
                let st = self.state();
                match st.segments.last() {
                    Some(s) if s.first_index >= from || empties => s.clone(),
                    _ => break,
                }
            };
            self.remove_all(std::iter::once(&victim)).await?;
            self.state().segments.pop();
            // Iterators holding it must not serve its records again.
            victim.mark_removed();
        }
        // 2. The segment holding `from - 1`, if it holds more.
        let holder = self.state().segments.last().cloned();
        let Some(seg) = holder else { return Ok(None) };
        let (last, sealed) = {
            let m = seg.meta();
            (m.last_index, m.sealed)
        };
        if last.is_none_or(|l| l < from) {
            // Nothing of it is cut; it stays as it is.
            if sealed {
                return Ok(None);
            }
            let file = seg.file(&self.fs).await?;
            let end = seg.meta().end_offset;
            return Ok(Some((seg, file, end)));
        }
        // Any failure from here leaves disk and memory possibly apart: stop.
        match self.cut_segment(&seg, from).await {
            Ok(r) => Ok(r),
            Err(e) => Err(self.stop(e)),
        }
    }

    /// Cuts `seg` so that its last record is `from - 1`. If that record
    /// commits, by name alone: the segment is sealed as `[first, from - 1]`
    /// and its file is not touched (returns `None`: the next segment starts
    /// at `from`). Inside a batch, by rewriting the kept prefix; the rewrite
    /// becomes the active segment (returned).
    async fn cut_segment(&self, seg: &Arc<Segment<F>>, from: u64) -> Result<Option<ActiveTail<F>>> {
        let old_path = seg.path();
        let active_path = self.dir.join(
            SegmentName::Active {
                first: seg.first_index,
                id: seg.id,
            }
            .file_name(),
        );
        // Where the new last frame ends, and whether it commits.
        let mut reader = seg.reader_at(&self.fs, from - 1).await?;
        let last_frame = new_last_frame(&mut reader, &old_path, from).await?;
        let end = last_frame.offset + last_frame.header.frame_len() as u64;
        let last_kind = last_frame.header.kind;
        if last_kind.commits() {
            self.seal_by_name(seg, &old_path, from, end).await?;
            return Ok(None);
        }
        let file = self
            .rewrite_kept_prefix(seg, &old_path, &active_path, &last_frame)
            .await?;
        let file = Arc::new(file);
        {
            let mut m = seg.meta();
            m.path = active_path;
            m.sealed = false;
            m.last_index = Some(from - 1);
            m.end_offset = end;
            m.sparse.retain(|&(i, _)| i < from);
            m.sparse_complete = true;
        }
        seg.replace_file(file.clone());
        info!(segment = %seg.path().display(), last = from - 1, "truncated");
        Ok(Some((seg.clone(), file, end)))
    }

    /// The cut's new last record commits: seals `seg` as `[first, from - 1]`
    /// by renaming it, without changing a byte of the file, and updates its
    /// memory (`end` is where the new last frame ends). Why a rename and not
    /// a `set_len`: see the comment inside.
    async fn seal_by_name(&self, seg: &Arc<Segment<F>>, old_path: &Path, from: u64, end: u64) -> Result<()> {
        // Seal by name: a sealed segment's name bounds its range, and the
        // bytes after its last frame are never read (FORMAT.md §9). No
        // byte of the file changes. A `set_len` inside the atomic unit
        // that holds the new last record would rewrite that unit (the
        // filesystem zeroes the rest of it), and a power loss before the
        // cut's fsync could tear it and lose durable records (sim seed
        // 401638); a rename cannot.
        let sealed_path = self.dir.join(
            SegmentName::Sealed {
                first: seg.first_index,
                last: from - 1,
                id: seg.id,
            }
            .file_name(),
        );
        self.sync_kept_records(seg, old_path, from).await?;
        if old_path != sealed_path {
            self.fs
                .rename(old_path, &sealed_path)
                .await
                .map_err(|e| cut_io("rename", old_path, e))?;
            self.fs
                .sync_dir(&self.dir)
                .await
                .map_err(|e| cut_io("sync_dir", &self.dir, e))?;
        }
        {
            let mut m = seg.meta();
            m.path = sealed_path;
            m.sealed = true;
            m.last_index = Some(from - 1);
            m.sparse.retain(|&(i, _)| i < from);
            // Readers stop at the last index, whatever the limit.
            m.end_offset = m.end_offset.max(end);
            thin_sparse(&mut m.sparse, SPARSE_ENTRIES_MAX);
        }
        info!(segment = %seg.path().display(), last = from - 1, "truncated (sealed by name)");
        self.seals.publish(SealEvent {
            segment_id: seg.id,
            first_index: seg.first_index,
            last_index: from - 1,
            cause: SealCause::Truncation,
        });
        Ok(())
    }

    /// Before a seal by name: makes the records below `from` durable if they
    /// are not known to be, because the sealed name will promise them.
    async fn sync_kept_records(&self, seg: &Arc<Segment<F>>, old_path: &Path, from: u64) -> Result<()> {
        // The name will promise the kept records: they must be durable
        // first (an active holder under `Manual` may hold unsynced ones).
        if self.state().frontier.durable() < from {
            let file = seg.file(&self.fs).await?;
            file.sync_data().await.map_err(|e| cut_io("sync_data", old_path, e))?;
            let mut st = self.state();
            st.frontier.made_durable(from);
            st.stats.fsyncs += 1;
        }
        Ok(())
    }

    /// The cut falls inside a batch: writes the kept prefix of `seg`, with
    /// `last_frame` turned into the batch's end, to a temporary file, makes
    /// it durable and moves it to `active_path` (`install_rewrite`).
    /// Returns the new file. A rewrite, because the kept records must end
    /// in a committing frame; the frames keep their bytes otherwise.
    async fn rewrite_kept_prefix(
        &self,
        seg: &Arc<Segment<F>>,
        old_path: &Path,
        active_path: &Path,
        last_frame: &ReadFrame,
    ) -> Result<F::File> {
        // The cut falls inside a batch: write the kept prefix with the
        // new last record turned into the batch's end to a temporary file,
        // make it durable, rename it into place. The frames keep their
        // bytes (same segment id and salt), so nothing else changes.
        let tmp = self.dir.join(rewrite_tmp_name(active_path));
        let src = seg.file(&self.fs).await?;
        let mut bytes = vec![0u8; last_frame.offset as usize];
        src.read_exact_at(&mut bytes, 0)
            .await
            .map_err(|e| cut_io("read", old_path, e))?;
        encode_frame(
            &mut bytes,
            seg.seed,
            FrameKind::BatchEnd,
            last_frame.header.index,
            last_frame.header.durable_next,
            &last_frame.payload,
        );
        let file = self
            .fs
            .open(
                &tmp,
                OpenOptions::new().read(true).write(true).create(true).truncate(true),
            )
            .await
            .map_err(|e| cut_io("create", &tmp, e))?;
        file.write_all_at(&bytes, 0)
            .await
            .map_err(|e| cut_io("write", &tmp, e))?;
        file.sync_data().await.map_err(|e| cut_io("sync_data", &tmp, e))?;
        self.install_rewrite(&tmp, active_path, old_path).await?;
        Ok(file)
    }

    /// Renames the durable rewrite `tmp` to `active_path`, durably, then
    /// removes the original at `old_path` durably if it had another name
    /// (a sealed holder), so that the directory holds one copy of the
    /// segment.
    async fn install_rewrite(&self, tmp: &Path, active_path: &Path, old_path: &Path) -> Result<()> {
        self.fs
            .rename(tmp, active_path)
            .await
            .map_err(|e| cut_io("rename", tmp, e))?;
        self.fs
            .sync_dir(&self.dir)
            .await
            .map_err(|e| cut_io("sync_dir", &self.dir, e))?;
        if old_path != active_path {
            // The sealed original: open would drop it anyway (same id
            // and first index as the active), but not leave it behind.
            self.fs
                .remove_file(old_path)
                .await
                .map_err(|e| cut_io("remove", old_path, e))?;
            self.fs
                .sync_dir(&self.dir)
                .await
                .map_err(|e| cut_io("sync_dir", &self.dir, e))?;
        }
        Ok(())
    }

    /// The segments with their sizes, in log order.
    pub(crate) async fn segment_infos(&self) -> Vec<SegmentInfo> {
        let segs = self.state().segments.clone();
        let mut out = Vec::with_capacity(segs.len());
        for s in segs {
            let (path, last, sealed, end) = {
                let m = s.meta();
                (m.path.clone(), m.last_index, m.sealed, m.end_offset)
            };
            let bytes = if end != u64::MAX {
                end
            } else {
                self.fs.metadata(&path).await.map(|m| m.len).unwrap_or(0)
            };
            out.push(SegmentInfo {
                name: path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                first_index: s.first_index,
                last_index: last,
                bytes,
                sealed,
            });
        }
        out
    }

    /// Merges one run of adjacent sealed segments. Called with the lifecycle
    /// lock held (no prune or truncate runs meanwhile).
    pub(crate) async fn compact_run(&self, run: &CompactionRun) -> Result<()> {
        let inputs: Vec<Arc<Segment<F>>> = {
            let st = self.state();
            st.check_usable()?;
            let found: Vec<_> = run
                .inputs
                .iter()
                .filter_map(|i| {
                    st.segments
                        .iter()
                        .find(|s| s.meta().path.file_name().is_some_and(|n| n.to_string_lossy() == i.name))
                        .cloned()
                })
                .collect();
            if found.len() != run.inputs.len() {
                return Err(Error::InvalidArgument("the compaction plan is stale".into()));
            }
            found
        };
        let id = self.next_segment_id()?;
        let name = SegmentName::Sealed {
            first: run.first_index,
            last: run.last_index,
            id,
        }
        .file_name();
        let out_path = self.dir.join(&name);
        let tmp = self
            .dir
            .join(format!("{}{}", name.trim_end_matches(".wal"), TMP_SUFFIX));
        match self.write_compacted(&inputs, run, id, &tmp).await {
            Ok(()) => {}
            Err(e) => {
                let _ = self.fs.remove_file(&tmp).await;
                return Err(e);
            }
        }
        // The output is durable; now its name.
        if let Err(e) = self.fs.rename(&tmp, &out_path).await {
            let cause = Error::io("rename", &tmp, 0, e);
            let unchanged = matches!(self.fs.exists(&out_path).await, Ok(false));
            if unchanged {
                let _ = self.fs.remove_file(&tmp).await;
                return Err(cause);
            }
            return Err(self.stop(cause));
        }
        self.fs
            .sync_dir(&self.dir)
            .await
            .map_err(|e| self.stop(Error::io("sync_dir", &self.dir, 0, e)))?;
        // Memory: the output replaces its inputs in one step.
        let merged = Arc::new(Segment::new(
            id,
            run.first_index,
            SegMeta::sealed_unscanned(out_path.clone(), run.last_index),
            None,
        ));
        {
            let mut st = self.state();
            let Some(pos) = st.segments.iter().position(|s| Arc::ptr_eq(s, &inputs[0])) else {
                return Err(self.stop(Error::Internal("compaction inputs vanished from memory".into())));
            };
            st.segments.splice(pos..pos + inputs.len(), [merged]);
            st.stats.compactions += 1;
        }
        self.invalidate_readers();
        // The inputs, oldest first: open removes any that a crash leaves.
        self.remove_all(inputs.iter()).await?;
        info!(output = %out_path.display(), inputs = inputs.len(), "compacted");
        Ok(())
    }

    /// Writes the merged segment to `tmp` and makes it durable.
    async fn write_compacted(
        &self,
        inputs: &[Arc<Segment<F>>],
        run: &CompactionRun,
        id: u64,
        tmp: &PathBuf,
    ) -> Result<()> {
        let header = header_for(self.log_id, id, run.first_index);
        let seed = header.frame_seed();
        let file = self
            .fs
            .open(
                tmp,
                OpenOptions::new().read(true).write(true).create(true).truncate(true),
            )
            .await
            .map_err(|e| Error::io("create", tmp, 0, e))?;
        let mut buf = header.encode().to_vec();
        let pad = padding_len(buf.len() as u64, self.opts.durable_alignment_bytes);
        if pad > 0 {
            encode_padding(&mut buf, seed, run.first_index, 0, pad);
        }
        let mut offset = 0u64;
        let mut expected = run.first_index;
        for seg in inputs {
            let last = seg.meta().last_index.unwrap_or(seg.first_index);
            let mut reader = seg.reader_at(&self.fs, seg.first_index).await?;
            let path = seg.path();
            while expected <= last {
                let f = reader
                    .next_frame()
                    .await
                    .map_err(|stop| stop.into_error(&path, expected))?;
                if f.header.index != expected {
                    return Err(Error::corruption(&path, f.offset, format!("index {expected} missing")));
                }
                encode_frame(
                    &mut buf,
                    seed,
                    f.header.kind,
                    f.header.index,
                    f.header.durable_next,
                    &f.payload,
                );
                expected += 1;
                if buf.len() >= 1 << 20 {
                    file.write_all_at(&buf, offset)
                        .await
                        .map_err(|e| Error::io("write", tmp, offset, e))?;
                    offset += buf.len() as u64;
                    buf.clear();
                }
            }
        }
        debug_assert_eq!(
            expected,
            run.last_index + 1,
            "the output is the exact union of its inputs"
        );
        file.write_all_at(&buf, offset)
            .await
            .map_err(|e| Error::io("write", tmp, offset, e))?;
        file.sync_data().await.map_err(|e| Error::io("sync_data", tmp, 0, e))?;
        Ok(())
    }
}

/// Reads frames from `reader` (positioned at or before the frame of
/// `from - 1`) up to the frame of `from - 1`, the cut's new last record,
/// and returns it: where it ends and whether it commits decide how
/// `Inner::cut_segment` cuts. Any stop before it is an error: the record
/// must exist.
async fn new_last_frame<Fl: File>(reader: &mut FrameReader<Fl>, old_path: &Path, from: u64) -> Result<ReadFrame> {
    loop {
        let f = reader
            .next_frame()
            .await
            .map_err(|stop| stop.into_error(old_path, from - 1))?;
        if f.header.index == from - 1 {
            return Ok(f);
        }
    }
}

/// The temporary file name of a cut's rewrite of the active segment at
/// `active_path`: its name without `.wal`, plus [`TMP_SUFFIX`], the suffix
/// open treats as a leftover, so a rewrite never renamed into place is
/// never taken for a segment.
fn rewrite_tmp_name(active_path: &Path) -> String {
    format!(
        "{}{}",
        active_path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
            .trim_end_matches(".wal"),
        TMP_SUFFIX
    )
}

/// The error of a failed filesystem call in a cut (offset 0): the cut's
/// steps act on whole files.
fn cut_io(op: &'static str, path: &Path, e: std::io::Error) -> Error {
    Error::io(op, path, 0, e)
}
