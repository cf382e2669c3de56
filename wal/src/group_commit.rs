//! Group commit: the leader drains the admission queue, writes everything in
//! one positional write, fsyncs once, and completes every request. Also
//! segment rotation (sealing and creating), which only the leader does.
//!
//! Only the holder of the async `writer` mutex runs these functions, so there
//! is exactly one writer. Appenders wait on their own completion channel or
//! for the writer mutex, whichever comes first: whoever gets the mutex leads
//! the next group (leader/follower, no background task, any executor).
//!
//! With `Options::write_buffer_bytes` (only under `SyncPolicy::Manual`) the
//! writer encodes frames into `Writer::pending` instead of writing them, and
//! `Writer::flush` writes them with one positional write: before a record
//! would take the buffer past its size, and before anything that needs the
//! records in the file (sync, seal, close, truncation, full prune,
//! compaction, reads: `Inner::ensure_written`). An append that finds the
//! writer mutex free and the queue empty takes the lean path,
//! `Writer::try_append_buffered`.

use std::path::PathBuf;

use futures::FutureExt;
use simfs::{File, Fs, OpenOptions};
use tracing::{debug, info, warn};

use crate::codec::{encode_padding, frame_len, padding_len};
use crate::error::{Error, Result};
use crate::inner::{Critical, Inner};
use crate::options::SyncPolicy;
use crate::seals::{SealCause, SealEvent};
use crate::segment::{header_for, thin_sparse, SegMeta, Segment, SegmentName, SPARSE_ENTRIES_MAX};
use crate::sync::Arc;
use crate::writer::{complete, Active, ActiveTail, Request, Writer};

impl<F: Fs> Writer<F> {
    /// Writes what memory holds and the files may not after an interrupted
    /// operation: the write buffer, and the frames of a group whose write was
    /// dropped mid-way (the same bytes at the same offset: idempotent).
    pub(crate) async fn finish_interrupted_writes(&mut self, inner: &Inner<F>) -> Result<()> {
        self.flush(inner).await?;
        if let (Some(offset), Some(active)) = (self.inflight_write, self.active.as_ref()) {
            active
                .file
                .write_all_at(&self.buf, offset)
                .await
                .map_err(|e| Error::io("write the interrupted group again", active.seg.path(), offset, e))?;
        }
        self.inflight_write = None;
        Ok(())
    }

    /// Where the next frame goes: the end of the written frames plus the
    /// pending ones.
    fn end_of(&self, a: &Active<F>) -> u64 {
        a.write_offset + self.pending.len() as u64
    }

    /// Writes the write buffer (`Options::write_buffer_bytes`) with one
    /// positional write at the end of the active segment, then publishes its
    /// records as written (segment end, last index, sparse index,
    /// `Frontier::written`). A no-op when nothing is buffered.
    ///
    /// A failure stops the WAL: the buffered records were acknowledged and
    /// can no longer be promised (like a failed fsync). Dropping the future
    /// mid-write is harmless: nothing is published before the write
    /// returned, and the next flush writes the same bytes at the same offset
    /// again.
    pub(crate) async fn flush(&mut self, inner: &Inner<F>) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        // A stopped WAL writes nothing more (its files may not be what
        // memory says, e.g. after a failed fsync).
        inner.state().check_usable()?;
        let Some(active) = self.active.as_mut() else {
            return Err(inner.stop(Error::Internal("buffered records without an active segment".into())));
        };
        let offset = active.write_offset;
        if let Err(e) = active.file.write_all_at(&self.pending, offset).await {
            return Err(inner.stop(Error::io("write buffered records", active.seg.path(), offset, e)));
        }
        let written = self.pending.len() as u64;
        active.write_offset += written;
        // No zero-fill ahead with the buffer (see `Options::preallocate_bytes`).
        active.zeroed_until = active.zeroed_until.max(active.write_offset);
        {
            let mut m = active.seg.meta();
            m.last_index = Some(self.pending_next - 1);
            m.end_offset = active.write_offset;
            m.sparse.append(&mut self.pending_sparse);
        }
        self.pending.clear();
        let mut st = inner.state();
        debug_assert_eq!(
            st.frontier.readable(),
            self.pending_next,
            "the buffer holds the newest records"
        );
        st.frontier.buffer_written();
        st.stats.writes += 1;
        st.stats.bytes_written += written;
        st.stats.buffer_flushes += 1;
        debug!(next = self.pending_next, bytes = written, "write buffer written");
        Ok(())
    }

    /// The lean append path of the write buffer, for an appender that got
    /// the writer mutex with `try_lock`: admission (`State::admissible`, as
    /// for `Inner::admit`), encoding into the buffer and
    /// publication in ONE critical section of the state lock, with no
    /// `.await` from admission to publication (so there is nothing for
    /// `Critical` to guard, and no queue entry or channel). The queue must be
    /// empty: then everything admitted before is published (we hold the
    /// writer mutex), and anything admitted after gets a higher index and is
    /// written after ours, by whoever holds the mutex next.
    ///
    /// `None` (nothing changed) when the group path must decide: the queue
    /// is not empty, admission must wait, a snapshot install, the clean
    /// marker must go first, no active segment or it must be sealed first
    /// (size, record count, unaligned durable tail). Admission's errors
    /// (`Stopped`, `WrongIndex`, the end of the index space) are returned.
    pub(crate) async fn try_append_buffered(
        &mut self,
        inner: &Inner<F>,
        records: &[Vec<u8>],
        batch: bool,
        bytes: usize,
        at: Option<u64>,
    ) -> Option<Result<u64>> {
        if inner.meta.marker_present() {
            return None;
        }
        let n = records.len() as u64;
        let frame_bytes: u64 = records.iter().map(|p| frame_len(p.len()) as u64).sum();
        // Make room before admission: a failed write then fails this append
        // (its record is not admitted) and stops the WAL.
        let limit = inner.opts.write_buffer_bytes as u64;
        if !self.pending.is_empty() && self.pending.len() as u64 + frame_bytes > limit {
            if let Err(e) = self.flush(inner).await {
                return Some(Err(e));
            }
        }
        let a = self.active.as_ref()?;
        let end = self.end_of(a);
        if a.records > 0
            && (end + frame_bytes > inner.opts.segment_size_bytes || a.records + n > inner.opts.segment_max_records)
        {
            return None;
        }
        let mut st = inner.state();
        // Only with nothing queued may this append go ahead of the queue,
        // and a snapshot install (`reseatable`) needs the group path.
        if !st.queue.is_empty() || st.reseatable {
            return st.check_usable().err().map(Err);
        }
        let first = match st.admissible(n, bytes, at, &inner.opts) {
            Ok(Some(first)) => first,
            Ok(None) => return None,
            Err(e) => return Some(Err(e)),
        };
        let next = first + n;
        debug_assert_eq!(
            st.frontier.readable(),
            first,
            "queue empty + writer mutex: all admitted is published"
        );
        // The durable tail ends mid-block (as in `write_group`): seal first.
        if a.records > 0 && end % inner.opts.durable_alignment_bytes != 0 && st.frontier.durable() == first {
            return None;
        }
        a.encode_records(
            &mut self.pending,
            a.write_offset,
            &mut self.pending_sparse,
            first,
            records,
            batch,
            st.frontier.durable(),
        );
        if let Some(a) = self.active.as_mut() {
            a.records += n;
        }
        self.pending_next = next;
        match st.take_admitted(n) {
            Ok(admitted) => debug_assert_eq!(admitted, first),
            Err(e) => return Some(Err(e)),
        }
        st.frontier.publish(first, next, true);
        st.stats.appends += 1;
        st.stats.records += n;
        st.stats.payload_bytes += bytes as u64;
        Some(Ok(first))
    }

    /// Leads one group: drains the queue, writes, syncs, completes requests.
    /// Errors are delivered to the requests, never returned.
    pub(crate) async fn run_group(&mut self, inner: &Inner<F>) {
        if let SyncPolicy::Batched {
            max_delay,
            max_records,
            sleeper,
        } = &inner.opts.sync_policy
        {
            // The timer is started only when someone is still missing: a
            // sleeper may be costly to start (a timer thread, a syscall).
            let mut all_joined = wait_for_group(inner, *max_records);
            if (&mut all_joined).now_or_never().is_none() {
                futures::future::select(all_joined, sleeper.sleep(*max_delay)).await;
            }
        }
        let Some((group, durable_next)) = take_group(inner) else {
            return;
        };
        let Some(first) = group.first().map(|r| r.first_index) else {
            return;
        };
        // Dropped mid-write, this future leaves the group's requests at the
        // front of the queue (`Requeue`) and the WAL interrupted
        // (`Critical`): whoever resumes finds them written or writes them,
        // and answers their appenders.
        let mut held = Requeue { inner, group };
        let critical = Critical::enter(inner, "group commit");
        let outcome = self.write_group(inner, &held.group, durable_next).await;
        critical.finish();
        let group = std::mem::take(&mut held.group);
        finish_group(inner, group, first, outcome);
    }

    /// Rotates if needed, encodes, writes, syncs and publishes one group.
    async fn write_group(&mut self, inner: &Inner<F>, group: &[Request], durable_next: u64) -> Result<(), GroupError> {
        // The clean-shutdown marker must go before the log changes.
        if let Err(e) = inner.ensure_dirty().await {
            return Err(if e.is_stopped() {
                GroupError::Stop(e)
            } else {
                GroupError::Abort(e)
            });
        }
        let size = GroupSize::of(group);
        let buffered = inner.buffered();
        self.prepare_segment(inner, group, size, buffered).await?;
        let Some(offset) = self.active.as_ref().map(|a| a.write_offset) else {
            return Err(GroupError::Stop(Error::Internal(
                "no active segment after creating one".into(),
            )));
        };
        let sparse = self.encode_group(group, offset, durable_next, buffered);
        if buffered {
            // Acknowledged from the buffer; written by `flush`.
            self.publish_buffered(inner, group, size, sparse);
            return Ok(());
        }
        let synced = inner.syncs_every_write();
        let written = self.write_encoded(inner, group, offset, durable_next, synced).await?;
        self.publish_written(inner, group, size, sparse, written, synced);
        Ok(())
    }

    /// Makes the active segment ready for a group of `size`: room in the
    /// write buffer, a seal when the group would not fit, a seal of an
    /// unaligned durable tail, and a new active segment when there is none.
    async fn prepare_segment(
        &mut self,
        inner: &Inner<F>,
        group: &[Request],
        size: GroupSize,
        buffered: bool,
    ) -> Result<(), GroupError> {
        if buffered
            && !self.pending.is_empty()
            && self.pending.len() as u64 + size.frame_bytes > inner.opts.write_buffer_bytes as u64
        {
            // Make room first: a failed write then fails this group (not yet
            // acknowledged) and stops the WAL.
            self.flush(inner).await.map_err(GroupError::Stop)?;
        }
        if let Some(a) = &self.active {
            let full = self.end_of(a) + size.frame_bytes > inner.opts.segment_size_bytes
                || a.records + size.records > inner.opts.segment_max_records;
            if a.records > 0 && full {
                match self.seal(inner).await {
                    // Rotation is optional: keep appending to the current segment.
                    Err(GroupError::Abort(e)) => warn!(error = %e, "rotation failed; appending to the current segment"),
                    other => other?,
                }
            }
        }
        if let Some(a) = &self.active {
            // After recovery the durable tail may end mid-sector: never write
            // into that sector again; start a new segment instead. If the
            // seal visibly failed, fail the group (nothing written, the WAL
            // goes on; the next group tries the seal again): a write after
            // the tail rewrites the atomic unit that holds durable records,
            // and a power loss that tears it loses them (simulation seed
            // 7001352: rename EIO, the group written after the tail, a torn
            // 512-byte unit took a record recovery had made durable).
            let align = inner.opts.durable_alignment_bytes;
            let durable_tail = inner.state().frontier.durable() == group[0].first_index;
            if a.records > 0 && self.end_of(a) % align != 0 && durable_tail {
                if let Err(e) = self.seal(inner).await {
                    if let GroupError::Abort(e) = &e {
                        warn!(error = %e, "rotation of an unaligned durable tail failed; the group fails");
                    }
                    return Err(e);
                }
            }
        }
        if self.active.is_none() {
            self.create_active(inner, group[0].first_index).await?;
        }
        Ok(())
    }

    /// Encodes the group's frames for `offset`, all with the same
    /// `durable_next`: with the write buffer after the pending ones (which
    /// start at `offset`), without it into the cleared encode buffer.
    /// Returns their sparse-index entries. Needs the active segment.
    fn encode_group(&mut self, group: &[Request], offset: u64, durable_next: u64, buffered: bool) -> Vec<(u64, u64)> {
        let mut sparse = Vec::new();
        let Some(active) = self.active.as_ref() else {
            return sparse;
        };
        let buf = if buffered {
            &mut self.pending
        } else {
            self.buf.clear();
            &mut self.buf
        };
        for r in group {
            active.encode_records(
                buf,
                offset,
                &mut sparse,
                r.first_index,
                &r.records,
                r.batch,
                durable_next,
            );
        }
        sparse
    }

    /// Publishes a group whose frames went into the write buffer: readable
    /// now, written by the next `flush`.
    fn publish_buffered(&mut self, inner: &Inner<F>, group: &[Request], size: GroupSize, sparse: Vec<(u64, u64)>) {
        let next = group_end(group);
        if let Some(active) = self.active.as_mut() {
            active.records += size.records;
        }
        self.pending_sparse.extend(sparse);
        self.pending_next = next;
        let mut st = inner.state();
        st.frontier.publish(group[0].first_index, next, true);
        st.stats.appends += group.len() as u64;
        st.stats.records += size.records;
        st.stats.payload_bytes += size.payload_bytes;
        debug!(first = group[0].first_index, next, "group buffered");
    }

    /// Writes the encoded group (padded to the alignment when the policy
    /// syncs) at `offset`, zero-fills ahead, and fsyncs when `synced`.
    /// Returns the bytes written. A failed write is cut back durably
    /// (`Abort`); a failed cut or fsync stops the WAL.
    async fn write_encoded(
        &mut self,
        inner: &Inner<F>,
        group: &[Request],
        offset: u64,
        durable_next: u64,
        synced: bool,
    ) -> Result<u64, GroupError> {
        let Some(active) = self.active.as_mut() else {
            return Err(GroupError::Stop(Error::Internal(
                "no active segment to write the group to".into(),
            )));
        };
        let buf = &mut self.buf;
        if synced {
            let pad = padding_len(offset + buf.len() as u64, inner.opts.durable_alignment_bytes);
            if pad > 0 {
                encode_padding(buf, active.seg.seed, group_end(group), durable_next, pad);
            }
        }
        let path = active.seg.path();
        self.inflight_write = Some(offset);
        let wrote = active.file.write_all_at(buf, offset).await;
        self.inflight_write = None;
        if let Err(e) = wrote {
            let cause = Error::io("write", &path, offset, e);
            // Cut the partial write back durably, so its frames can never
            // reappear after the indices are reused.
            let cut = active.file.set_len(offset).await;
            let synced = match cut {
                Ok(()) => active.file.sync_data().await,
                Err(e) => Err(e),
            };
            active.zeroed_until = offset;
            return match synced {
                Ok(()) => Err(GroupError::Abort(cause)),
                Err(e) => Err(GroupError::Stop(Error::io("cut back partial write", &path, offset, e))),
            };
        }
        let end = offset + buf.len() as u64;
        zero_fill_ahead(active, &mut self.zeros, end, &inner.opts).await;
        if synced {
            active
                .file
                .sync_data()
                .await
                .map_err(|e| GroupError::Stop(Error::io("sync_data", &path, 0, e)))?;
        }
        Ok(buf.len() as u64)
    }

    /// Publishes a written group: the segment's end, last index and sparse
    /// entries, then (one state-lock section) readable and, when synced,
    /// durable, and the counters.
    fn publish_written(
        &mut self,
        inner: &Inner<F>,
        group: &[Request],
        size: GroupSize,
        sparse: Vec<(u64, u64)>,
        written: u64,
        synced: bool,
    ) {
        let next = group_end(group);
        if let Some(active) = self.active.as_mut() {
            active.write_offset += written;
            active.records += size.records;
            let mut m = active.seg.meta();
            m.last_index = Some(next - 1);
            m.end_offset = active.write_offset;
            m.sparse.extend(sparse);
        }
        let mut st = inner.state();
        st.frontier.publish(group[0].first_index, next, false);
        if synced {
            st.frontier.made_durable(next);
            st.stats.fsyncs += 1;
        }
        st.stats.appends += group.len() as u64;
        st.stats.records += size.records;
        st.stats.payload_bytes += size.payload_bytes;
        st.stats.bytes_written += written;
        st.stats.writes += 1;
        debug!(
            first = group[0].first_index,
            next,
            bytes = written,
            synced,
            "group committed"
        );
    }

    /// Makes everything written durable (see [`crate::Wal::sync`]).
    pub(crate) async fn sync(&mut self, inner: &Inner<F>) -> Result<()> {
        inner.state().check_usable()?;
        // Buffered records first: afterwards everything readable is written
        // (publication needs the writer mutex, which we hold).
        self.flush(inner).await?;
        let (readable, durable) = {
            let st = inner.state();
            (st.frontier.readable(), st.frontier.durable())
        };
        if durable >= readable {
            return Ok(());
        }
        let Some(active) = self.active.as_mut() else {
            return Ok(());
        };
        let path = active.seg.path();
        // Pad to the alignment so the next write never touches a sector that
        // will hold acknowledged data.
        let pad = padding_len(active.write_offset, inner.opts.durable_alignment_bytes);
        if pad > 0 {
            self.buf.clear();
            encode_padding(&mut self.buf, active.seg.seed, readable, durable, pad);
            let offset = active.write_offset;
            if let Err(e) = active.file.write_all_at(&self.buf, offset).await {
                // The padding is optional: cut it back and sync without it.
                if let Err(e) = active.file.set_len(offset).await {
                    return Err(inner.stop(Error::io("cut back padding", &path, offset, e)));
                }
                warn!(error = %e, "padding write failed; syncing an unaligned tail");
            } else {
                active.write_offset += pad as u64;
                active.seg.meta().end_offset = active.write_offset;
                inner.state().stats.bytes_written += pad as u64;
            }
        }
        if let Err(e) = active.file.sync_data().await {
            return Err(inner.stop(Error::io("sync_data", &path, 0, e)));
        }
        let mut st = inner.state();
        st.frontier.made_durable(readable);
        st.stats.fsyncs += 1;
        Ok(())
    }

    /// Cuts the zero-filled tail of the active segment and makes the cut
    /// durable (before sealing or closing), so files end at their last frame.
    ///
    /// The cut goes to the next multiple of `align_bytes` at or above the
    /// last frame's end, never inside it: a `set_len` inside an atomic unit
    /// rewrites that unit (the filesystem zeroes the rest of it), and if the
    /// unit holds durable records (an unaligned durable tail, after a failed
    /// padding write) a power loss could tear them. The few zero bytes left
    /// after the last frame are the clean end of the log. The clean-close
    /// marker records the last frame's end, and a clean reopen accepts a
    /// file that ends at this cut above it (`recovery::fast_open`).
    pub(crate) async fn trim_tail(&mut self, align_bytes: u64) -> Result<()> {
        let Some(active) = self.active.as_mut() else {
            return Ok(());
        };
        let cut = active.write_offset.next_multiple_of(align_bytes.max(1));
        if active.zeroed_until <= cut {
            return Ok(());
        }
        let path = active.seg.path();
        active
            .file
            .set_len(cut)
            .await
            .map_err(|e| Error::io("set_len", &path, cut, e))?;
        active
            .file
            .sync_data()
            .await
            .map_err(|e| Error::io("sync_data", &path, 0, e))?;
        active.zeroed_until = cut;
        Ok(())
    }

    /// Where the active segment ends, for the clean-shutdown marker.
    pub(crate) fn active_end(&self) -> Option<(u64, u64)> {
        debug_assert!(self.pending.is_empty(), "close writes the buffer before the marker");
        self.active.as_ref().map(|a| (a.seg.id, a.write_offset))
    }

    /// Forgets the active segment (its file was removed by a full prune).
    pub(crate) fn reset_active(&mut self) {
        debug_assert!(self.pending.is_empty(), "a full prune writes the buffer first");
        self.active = None;
    }

    /// Installs the segment that holds the last record after a truncation
    /// (or none: the next append creates one).
    pub(crate) fn after_truncate(&mut self, holder: Option<ActiveTail<F>>) {
        debug_assert!(self.pending.is_empty(), "a truncation writes the buffer first");
        self.active = holder.map(|(seg, file, end)| {
            let records = seg.meta().last_index.map_or(0, |l| l - seg.first_index + 1);
            Active {
                seeded: seg.seed.hasher(),
                seg,
                file,
                write_offset: end,
                records,
                zeroed_until: end,
            }
        });
    }

    /// After a truncation: the next append would have to create a segment
    /// (the cut sealed the holder by name), or seal an unaligned durable
    /// tail and then create one (a cut inside a batch; `write_group` never
    /// writes into a sector that holds durable data). Do it now, while
    /// appends are paused for the truncation anyway, so appenders wait once
    /// per truncation instead of twice.
    /// Best effort, like rotation: a failure that leaves the WAL consistent
    /// is left for the next group; one that does not stops the WAL.
    pub(crate) async fn settle_after_truncate(&mut self, inner: &Inner<F>) -> Result<()> {
        let (next, durable_tail) = {
            let st = inner.state();
            (st.frontier.readable(), st.frontier.durable() == st.frontier.readable())
        };
        let step = match &self.active {
            // The cut sealed the holder by name (or removed every segment):
            // create the segment the next append needs.
            None => self.create_active(inner, next).await,
            // An unaligned durable tail (a cut inside a batch rewrote the
            // holder up to its new last frame): seal it and start anew. A
            // tail that is not durable may be written into.
            Some(a) if a.records > 0 && durable_tail && a.write_offset % inner.opts.durable_alignment_bytes != 0 => {
                match self.seal(inner).await {
                    Ok(()) => self.create_active(inner, next).await,
                    other => other,
                }
            }
            Some(_) => return Ok(()),
        };
        match step {
            Ok(()) => Ok(()),
            Err(GroupError::Abort(e)) => {
                // A step that stopped the WAL on its way (a best-effort meta
                // write whose outcome is unknown) leaves nothing to retry:
                // report the stop, as every call after it does (seed 500072:
                // truncate_from returned Ok on a stopped WAL). The cut
                // itself is durable.
                inner.state().check_usable()?;
                warn!(error = %e, "rotation after a truncation failed; the next append retries");
                Ok(())
            }
            Err(GroupError::Stop(e)) => Err(inner.stop(e)),
        }
    }

    /// Seals the active segment if it holds records (rotation on request).
    pub(crate) async fn rotate(&mut self, inner: &Inner<F>) -> Result<()> {
        inner.state().check_usable()?;
        inner.ensure_dirty().await?;
        if self.active.as_ref().is_some_and(|a| a.records > 0) {
            match self.seal(inner).await {
                Ok(()) => {}
                Err(GroupError::Abort(e)) => return Err(e),
                Err(GroupError::Stop(e)) => return Err(inner.stop(e)),
            }
        }
        Ok(())
    }

    /// Seals the active segment: data durable, then the name (rename +
    /// directory fsync), and only then the in-memory state.
    async fn seal(&mut self, inner: &Inner<F>) -> Result<(), GroupError> {
        // The buffered records belong to this segment: write them first (a
        // failure has stopped the WAL).
        self.flush(inner).await.map_err(GroupError::Stop)?;
        // A failed cut or fsync leaves the WAL not knowing what is durable.
        self.trim_tail(inner.opts.durable_alignment_bytes)
            .await
            .map_err(GroupError::Stop)?;
        let Some(active) = &self.active else { return Ok(()) };
        let seg = active.seg.clone();
        let Some(last) = seg.meta().last_index else {
            return Ok(());
        };
        let from = seg.path();
        let to = inner.dir.join(
            SegmentName::Sealed {
                first: seg.first_index,
                last,
                id: seg.id,
            }
            .file_name(),
        );
        let (readable, durable) = {
            let st = inner.state();
            (st.frontier.readable(), st.frontier.durable())
        };
        if durable < readable {
            active
                .file
                .sync_data()
                .await
                .map_err(|e| GroupError::Stop(Error::io("sync_data", &from, 0, e)))?;
            let mut st = inner.state();
            st.frontier.made_durable(readable);
            st.stats.fsyncs += 1;
        }
        if let Err(e) = inner.fs.rename(&from, &to).await {
            // Rotation is optional: if the rename visibly did not happen, keep
            // appending to the current segment; otherwise stop.
            let cause = Error::io("rename", &from, 0, e);
            let unchanged = matches!(
                (inner.fs.exists(&from).await, inner.fs.exists(&to).await),
                (Ok(true), Ok(false))
            );
            if unchanged {
                return Err(GroupError::Abort(cause));
            }
            return Err(GroupError::Stop(cause));
        }
        inner
            .fs
            .sync_dir(&inner.dir)
            .await
            .map_err(|e| GroupError::Stop(Error::io("sync_dir", &inner.dir, 0, e)))?;
        {
            let mut m = seg.meta();
            m.path = to.clone();
            m.sealed = true;
            // Keep the sparse index of a sealed segment small: O(segments).
            thin_sparse(&mut m.sparse, SPARSE_ENTRIES_MAX);
        }
        self.active = None;
        inner.state().stats.rotations += 1;
        info!(segment = %to.display(), first = seg.first_index, last, "sealed segment");
        #[cfg(feature = "planted-bugs")]
        let last = last + u64::from(crate::testing::planted(crate::testing::Planted::SealOneTooFar));
        inner.seals.publish(SealEvent {
            segment_id: seg.id,
            first_index: seg.first_index,
            last_index: last,
            cause: SealCause::Rotation,
        });
        Ok(())
    }

    /// Creates a new active segment starting at `first`: create, header,
    /// fsync the file, fsync the directory, then publish it.
    async fn create_active(&mut self, inner: &Inner<F>, first: u64) -> Result<(), GroupError> {
        debug_assert!(
            self.pending.is_empty(),
            "buffered frames belong to the old active segment"
        );
        let id = inner.next_segment_id().map_err(GroupError::Abort)?;
        // The first segment of an emptied log reseated above its low-water
        // mark (a snapshot install): the mark moves there first, durably, so
        // the next open does not read a segment starting above the mark as
        // a lost prefix (evidence::chain_promises).
        if inner.state().segments.is_empty() && inner.meta.get().await.low_water < first {
            match inner.update_meta(|m| m.low_water = first).await {
                Ok(()) => {}
                Err(Error::Stopped { cause }) => return Err(GroupError::Stop(*cause)),
                Err(e) => return Err(GroupError::Abort(e)),
            }
        }
        let path = inner.dir.join(SegmentName::Active { first, id }.file_name());
        let (file, data_start) = match self.create_file(inner, &path, id, first).await {
            Ok(f) => f,
            Err(CreateError::Write(cause)) => {
                // Its id must not come back after a restart (best effort: the
                // disk may be full; a reused id of a removed file is harmless).
                let _ = inner.update_meta(|_| {}).await;
                // Remove the half-made file durably, or stop: a leftover would
                // be a second active segment after a crash.
                let removed = match inner.fs.remove_file(&path).await {
                    Ok(()) => Ok(()),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                    Err(e) => Err(e),
                };
                let synced = match removed {
                    Ok(()) => inner.fs.sync_dir(&inner.dir).await,
                    Err(e) => Err(e),
                };
                return match synced {
                    Ok(()) => Err(GroupError::Abort(cause)),
                    Err(e) => Err(GroupError::Stop(Error::io("remove failed segment", &path, 0, e))),
                };
            }
            Err(CreateError::Sync(cause)) => return Err(GroupError::Stop(cause)),
        };
        let file = Arc::new(file);
        let seg = Arc::new(Segment::new(
            id,
            first,
            SegMeta {
                path: path.clone(),
                last_index: None,
                sealed: false,
                end_offset: data_start,
                sparse: Vec::new(),
                sparse_complete: true,
                damage: None,
            },
            Some(file.clone()),
        ));
        inner.state().segments.push(seg.clone());
        self.active = Some(Active {
            seeded: seg.seed.hasher(),
            seg,
            file,
            write_offset: data_start,
            records: 0,
            zeroed_until: data_start,
        });
        info!(segment = %path.display(), first, id, "created segment");
        Ok(())
    }

    /// Creates the file with its header (and padding up to the alignment),
    /// durable with its directory entry. Returns the file and where the first
    /// frame goes.
    async fn create_file(
        &self,
        inner: &Inner<F>,
        path: &PathBuf,
        id: u64,
        first: u64,
    ) -> Result<(F::File, u64), CreateError> {
        let opts = OpenOptions::new().read(true).write(true).create_new(true);
        let file = inner.fs.open(path, opts).await.map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                // Our view of the directory is wrong: never touch that file.
                CreateError::Sync(Error::io("create", path, 0, e))
            } else {
                CreateError::Write(Error::io("create", path, 0, e))
            }
        })?;
        let header = header_for(inner.log_id, id, first);
        let mut bytes = header.encode().to_vec();
        let pad = padding_len(bytes.len() as u64, inner.opts.durable_alignment_bytes);
        if pad > 0 {
            encode_padding(&mut bytes, header.frame_seed(), first, 0, pad);
        }
        file.write_all_at(&bytes, 0)
            .await
            .map_err(|e| CreateError::Write(Error::io("write", path, 0, e)))?;
        file.sync_data()
            .await
            .map_err(|e| CreateError::Sync(Error::io("sync_data", path, 0, e)))?;
        inner
            .fs
            .sync_dir(&inner.dir)
            .await
            .map_err(|e| CreateError::Sync(Error::io("sync_dir", &inner.dir, 0, e)))?;
        Ok((file, bytes.len() as u64))
    }
}

/// Takes the next group from the front of the queue (at least one request,
/// then while the payload stays within `max_write_bytes`), with the durable
/// index its frames carry. `None` while an interrupted operation waits for
/// `resume` (the caller resumes: it needs the lifecycle mutex) or when the
/// WAL stopped (the queue is failed with the cause).
fn take_group<F: Fs>(inner: &Inner<F>) -> Option<(Vec<Request>, u64)> {
    let mut st = inner.state();
    if st.interrupted.is_some() {
        return None;
    }
    if st.check_usable().is_err() {
        drop(st);
        if let Some(cause) = inner.stopped_cause() {
            inner.stop(cause);
        }
        return None;
    }
    let mut group = Vec::new();
    let mut bytes = 0usize;
    while let Some(r) = st.queue.front() {
        if !group.is_empty() && bytes + r.bytes > inner.opts.max_write_bytes {
            break;
        }
        bytes += r.bytes;
        st.queued_bytes -= r.bytes;
        if let Some(r) = st.queue.pop_front() {
            group.push(r);
        }
    }
    Some((group, st.frontier.durable()))
}

/// Answers the group's appenders with the outcome of its write. A failed
/// group that left the WAL consistent (`Abort`) also fails everything
/// queued after it (their indices depend on its) and hands its indices out
/// again; otherwise the WAL stops.
fn finish_group<F: Fs>(inner: &Inner<F>, group: Vec<Request>, first: u64, outcome: Result<(), GroupError>) {
    match outcome {
        Ok(()) => complete(group, |r| Ok(r.first_index)),
        // An abort whose cleanup stopped the WAL is a stop.
        Err(GroupError::Abort(cause)) if inner.state().stopped.is_some() => {
            let stopped = inner.stop(cause);
            complete(group, |_| Err(stopped.clone()));
        }
        Err(GroupError::Abort(cause)) => {
            // Nothing of the group is in the log; later admitted appends
            // depend on its indices, so they fail too.
            let cause = Error::AppendFailed { cause: Box::new(cause) };
            let queued = {
                let mut st = inner.state();
                st.frontier.unadmit(first);
                st.queued_bytes = 0;
                st.queue.drain(..).collect::<Vec<_>>()
            };
            warn!(first, error = %cause, "group commit failed; the WAL goes on");
            complete(group, |_| Err(cause.clone()));
            complete(queued, |_| Err(cause.clone()));
        }
        Err(GroupError::Stop(cause)) => {
            let stopped = inner.stop(cause);
            complete(group, |_| Err(stopped.clone()));
        }
    }
}

/// The size of a group: records, their frames' bytes, their payload bytes.
#[derive(Clone, Copy)]
struct GroupSize {
    records: u64,
    frame_bytes: u64,
    payload_bytes: u64,
}

impl GroupSize {
    fn of(group: &[Request]) -> GroupSize {
        GroupSize {
            records: group.iter().map(|r| r.records.len() as u64).sum(),
            frame_bytes: group
                .iter()
                .flat_map(|r| r.records.iter())
                .map(|p| frame_len(p.len()) as u64)
                .sum(),
            payload_bytes: group.iter().map(|r| r.bytes as u64).sum(),
        }
    }
}

/// One past the group's last index (groups are never empty).
fn group_end(group: &[Request]) -> u64 {
    group
        .last()
        .map_or(0, |last| last.first_index + last.records.len() as u64)
}

/// Zero-fills the active segment ahead of `end`, up to the next multiple of
/// `preallocate_bytes` (within the segment size), so the next groups
/// overwrite allocated space and their fdatasyncs commit no size change.
/// Best effort: a failure is logged and ignored.
async fn zero_fill_ahead<F: Fs>(active: &mut Active<F>, zeros: &mut Vec<u8>, end: u64, opts: &crate::options::Options) {
    if end <= active.zeroed_until {
        return;
    }
    let target = end
        .div_ceil(opts.preallocate_bytes.max(1))
        .saturating_mul(opts.preallocate_bytes)
        .min(opts.segment_size_bytes);
    if target <= end {
        active.zeroed_until = end;
        return;
    }
    zeros.resize((target - end) as usize, 0);
    if let Err(e) = active.file.write_all_at(zeros, end).await {
        // Part of the zeros may be there: remember the most, so that seal
        // and close cut the tail back.
        debug!(error = %e, "zero-fill ahead failed; going on without it");
    }
    active.zeroed_until = target;
}

/// How a group failed.
pub(crate) enum GroupError {
    /// Nothing of the group reached the log and the WAL is consistent: fail
    /// the group and go on.
    Abort(Error),
    /// The WAL cannot know what is durable: stop.
    Stop(Error),
}

enum CreateError {
    /// The file may exist half-made: remove it and fail the group.
    Write(Error),
    /// Stop the WAL: durability of the directory is unknown.
    Sync(Error),
}

/// A group being committed. If the leader's future is dropped before the
/// group is taken back, its requests return to the front of the queue, in
/// order, still admitted at their indices: the engine, not the leader, owns
/// them (see `Writer::resume`).
struct Requeue<'a, F: Fs> {
    inner: &'a Inner<F>,
    group: Vec<Request>,
}

impl<F: Fs> Drop for Requeue<'_, F> {
    fn drop(&mut self) {
        if self.group.is_empty() {
            return;
        }
        let mut st = self.inner.state();
        for r in self.group.drain(..).rev() {
            st.queued_bytes += r.bytes;
            st.queue.push_front(r);
        }
    }
}

impl<F: Fs> Inner<F> {
    /// `Error::ReadOnly` for a call that would change the log of a
    /// read-only open.
    pub(crate) fn check_writable(&self, what: &str) -> Result<()> {
        if !self.opts.read_only {
            return Ok(());
        }
        Err(Error::ReadOnly {
            path: self.dir.clone(),
            reason: format!("{what} would change the log"),
        })
    }

    pub(crate) fn stopped_cause(&self) -> Option<Error> {
        self.state().stopped.clone()
    }
}

/// Ready once `max_records` requests are queued or every live appender has
/// one in the queue (nobody else is coming: waiting longer only adds
/// latency), else waits for the next request or the next appender to go.
/// Dropping it leaves a stale waker behind, which is harmless.
fn wait_for_group<F: Fs>(inner: &Inner<F>, max_records: usize) -> impl std::future::Future<Output = ()> + Unpin + '_ {
    futures::future::poll_fn(move |cx| {
        let mut st = inner.state();
        let queued = st.queue.len();
        // Nothing queued (another leader took it): nothing to wait for.
        if queued == 0 || queued >= max_records || queued >= st.live_appenders {
            return std::task::Poll::Ready(());
        }
        st.leader_waker = Some(cx.waker().clone());
        std::task::Poll::Pending
    })
}
