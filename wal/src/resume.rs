//! Resuming after a cancelled operation: when the future of a section that
//! changes files is dropped mid-way (`wal::Critical`), memory may no longer
//! match the files. Instead of stopping the WAL, the next caller that needs
//! the writer rebuilds memory from the files with the same recovery an open
//! runs (in-process, on the page cache, so nothing that was written is
//! lost), then answers the appends the interrupted group had taken.
//!
//! Why recovery and not an undo log per operation: every file-changing step
//! of the engine is already crash-safe (each is crashed at in simulation and
//! in `wal/tests/crash_steps.rs`), and recovery is the one piece of code that
//! turns any of those intermediate states into a consistent log. A cancelled
//! operation is a crash that loses nothing: the page cache holds every write
//! that returned, and the only write that may be partial (a group's frames)
//! is written again in full first (`Writer::finish_interrupted_writes`).

use futures::lock::MutexGuard;
use simfs::Fs;
use tracing::info;

use crate::error::{Error, Result};
use crate::inner::{meta_of, Critical, Inner};
use crate::options::RecoveryMode;
use crate::recovery::{recover, Recovered};
use crate::sync::Ordering;
use crate::writer::{complete, Request, Writer};

/// What the files hold of the appends that were queued when the operation
/// was interrupted.
struct Reconciled {
    /// Appends found in the files: acknowledged now (after a sync under a
    /// policy that syncs every write).
    present: Vec<Request>,
    /// Appends whose indices the files no longer continue at (the files
    /// end elsewhere): they fail with `AppendFailed`, nothing of them is in
    /// the log.
    failed: Vec<Request>,
}

impl<F: Fs> Writer<F> {
    /// Rebuilds memory from the files after an interrupted operation (see
    /// the module docs) and clears `State::interrupted`. A no-op when nothing
    /// is interrupted. The caller holds the lifecycle mutex (`_lifecycle`)
    /// and, as the `&mut self` receiver, the writer mutex: no other
    /// operation can change files meanwhile.
    ///
    /// Cancel-safe: dropped mid-way, the WAL stays interrupted and the next
    /// caller resumes from the start (recovery is idempotent). A failure
    /// stops the WAL with `Error::Interrupted` naming the operation.
    pub(crate) async fn resume(&mut self, inner: &Inner<F>, _lifecycle: &MutexGuard<'_, ()>) -> Result<()> {
        let operation = {
            let st = inner.state();
            st.check_usable()?;
            match st.interrupted {
                Some(op) => op,
                None => return Ok(()),
            }
        };
        let critical = Critical::enter(inner, operation);
        let result = self.rebuild(inner, operation).await;
        critical.finish();
        let reconciled = match result {
            Ok(r) => r,
            Err(cause) => {
                let cause = Error::Interrupted {
                    operation,
                    cause: Box::new(cause),
                };
                return Err(inner.stop(cause));
            }
        };
        let synced = if inner.syncs_every_write() {
            // Found records were written but maybe not fsynced: the policy
            // acknowledges only durable ones.
            self.sync(inner).await
        } else {
            Ok(())
        };
        let next = {
            let mut st = inner.state();
            if synced.is_ok() {
                st.interrupted = None;
                st.stats.resumes += 1;
            }
            st.frontier.readable()
        };
        inner.invalidate_readers();
        info!(dir = %inner.dir.display(), operation, next, "resumed after an interrupted operation");
        let failed = Error::AppendFailed {
            cause: Box::new(Error::InvalidArgument(format!(
                "the {operation} that was interrupted left the log ending at {next}"
            ))),
        };
        complete(reconciled.failed, |_| Err(failed.clone()));
        match synced {
            Ok(()) => {
                complete(reconciled.present, |r| Ok(r.first_index));
                Ok(())
            }
            Err(e) => {
                complete(reconciled.present, |_| Err(e.clone()));
                Err(e)
            }
        }
    }

    /// Writes what only memory holds, recovers the files, and installs
    /// recovery's view in the state, the writer and the meta cache.
    async fn rebuild(&mut self, inner: &Inner<F>, operation: &'static str) -> Result<Reconciled> {
        self.finish_interrupted_writes(inner).await?;
        let opts = &inner.opts;
        // No crash happened: the page cache holds every write that returned,
        // so a torn tail is the interrupted operation's own unfinished write
        // (a segment created but its header not yet written, frames never
        // written), never acknowledged. `AbsoluteConsistency` refuses torn
        // tails because after a crash they may hide lost records; here
        // `reconcile` checks that every acknowledged record is still there.
        let mode = match opts.recovery_mode {
            RecoveryMode::AbsoluteConsistency => RecoveryMode::TolerateTornTail,
            m => m,
        };
        let rec = recover(
            &*inner.fs,
            &inner.dir,
            mode,
            opts.first_index,
            opts.durable_alignment_bytes,
            false,
            Some(inner.log_id),
        )
        .await?;
        if rec.log_id != inner.log_id {
            return Err(Error::corruption(
                &inner.dir,
                0,
                format!("the files now hold log {:032x}, not {:032x}", rec.log_id, inner.log_id),
            ));
        }
        let reconciled = reconcile(inner, &rec, operation)?;
        self.reset_from(&rec);
        inner.meta.install(meta_of(&rec)).await;
        inner.next_segment_id.fetch_max(rec.next_segment_id, Ordering::AcqRel);
        // An interrupted prune may have left the iterator start limit set.
        inner.leases().set_pruning_below(0);
        Ok(reconciled)
    }
}

/// Installs the recovered range and segments in the state, and sorts the
/// queued appends into found and failed. Errors (nothing installed) when the
/// files lack an acknowledged record that `operation` had no right to remove,
/// or hold records that were never admitted.
fn reconcile<F: Fs>(inner: &Inner<F>, rec: &Recovered<F>, operation: &'static str) -> Result<Reconciled> {
    let mut st = inner.state();
    // An empty log reseated above its low-water mark (a snapshot install
    // whose first segment is not made yet, or whose write failed) is ahead
    // of the files in memory only: their empty log below it is the same
    // log, and its first segment raises the mark first (`create_active`).
    let reseated_ahead = rec.segments.is_empty()
        && rec.first_index == rec.next_index
        && st.frontier.first() == st.frontier.readable()
        && rec.next_index < st.frontier.first();
    let (rec_first, next) = if reseated_ahead {
        (st.frontier.first(), st.frontier.first())
    } else {
        (rec.first_index, rec.next_index)
    };
    // Only a truncation removes acknowledged records from the end, and only
    // a prune from the start (both were asked to).
    if next < st.frontier.readable() && operation != "truncate" {
        return Err(Error::corruption(
            &inner.dir,
            0,
            format!(
                "after the interrupted {operation} the files end at index {next}, below the acknowledged {}",
                st.frontier.readable()
            ),
        ));
    }
    // A truncation forgets its records in memory before the files do: if
    // it was dropped before the files forgot them, they come back (it was
    // never acknowledged). Anything else past what was admitted came from
    // nowhere.
    let undone_truncation = operation == "truncate" && st.queue.is_empty();
    if next > st.frontier.admitted() && !undone_truncation {
        return Err(Error::corruption(
            &inner.dir,
            0,
            format!(
                "after the interrupted {operation} the files end at index {next}, above the admitted {}",
                st.frontier.admitted()
            ),
        ));
    }
    let mut present = Vec::new();
    while let Some(r) = st.queue.front() {
        let end = r.first_index + r.records.len() as u64;
        if end > next || r.first_index < st.frontier.readable() {
            break;
        }
        st.queued_bytes -= r.bytes;
        if let Some(r) = st.queue.pop_front() {
            present.push(r);
        }
    }
    let failed: Vec<Request> = if st.queue.front().is_some_and(|r| r.first_index != next) {
        st.queued_bytes = 0;
        st.queue.drain(..).collect()
    } else {
        Vec::new()
    };
    let moved = (rec_first, next) != (st.frontier.first(), st.frontier.readable());
    if moved {
        // A prune through the end (or a truncation) took effect: only the
        // prune leaves the log free to continue at any index.
        st.reseatable = operation == "prune" && rec_first == next;
    }
    let records: u64 = present.iter().map(|r| r.records.len() as u64).sum();
    st.stats.appends += present.len() as u64;
    st.stats.records += records;
    st.stats.payload_bytes += present.iter().map(|r| r.bytes as u64).sum::<u64>();
    // What the files hold beyond the last fsync is written, not durable.
    let queue_empty = st.queue.is_empty();
    st.frontier.rebuilt(rec_first, next, queue_empty);
    st.segments = rec.segments.clone();
    st.stats.segments = st.segments.len() as u64;
    Ok(Reconciled { present, failed })
}
