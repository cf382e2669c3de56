//! Seal events: subscribers learn, in order, each segment this log seals
//! (seed 003: a database flushes its memtable when its WAL rotates).
//!
//! One owner: `SealHub` (in `Inner`) holds the subscribers' queues; the
//! writer publishes into it under the writer mutex, so events are in seal
//! order. Each queue is bounded: a subscriber that falls behind loses the
//! oldest events and is told how many (`SealNotice::Missed`), so a forgotten
//! subscriber costs bounded memory and never slows the writer.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Poll, Waker};

/// Notices a subscriber keeps before it starts losing the oldest.
pub const SEAL_EVENTS_QUEUED_MAX: usize = 1024;
/// Live subscribers at once (`Wal::seal_events` refuses more).
pub const SEAL_SUBSCRIBERS_MAX: usize = 64;

/// Why a segment was sealed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SealCause {
    /// Rotation: `segment_max_bytes`, `segment_max_records`, or `Wal::rotate`.
    Rotation,
    /// A truncation cut the active segment and sealed what it kept.
    Truncation,
}

/// One sealed segment: its records `first_index..=last_index` will never
/// change again (until a prune, truncation or compaction removes them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SealEvent {
    /// The segment's id (in its file name).
    pub segment_id: u64,
    /// Its first index.
    pub first_index: u64,
    /// Its last index.
    pub last_index: u64,
    /// Why it was sealed.
    pub cause: SealCause,
}

/// What a subscriber receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SealNotice {
    /// A segment was sealed.
    Sealed(SealEvent),
    /// A truncation removes every record at or above `from` (if the WAL
    /// stops during it, some of them may still be there until reopen). It
    /// comes before the seal event of the segment the truncation cut
    /// ([`SealCause::Truncation`]); later segments start at `from` again.
    Truncated {
        /// The first index removed.
        from: u64,
    },
    /// The subscriber fell more than [`SEAL_EVENTS_QUEUED_MAX`] events
    /// behind: this many of the oldest were dropped, before the events that
    /// follow.
    Missed {
        /// Events dropped.
        events: u64,
    },
}

#[derive(Default)]
struct Queue {
    events: VecDeque<SealNotice>,
    missed: u64,
    waker: Option<Waker>,
    closed: bool,
}

fn lock(q: &Mutex<Queue>) -> MutexGuard<'_, Queue> {
    // A queue is plain data, consistent after every statement: a panic
    // elsewhere cannot leave it half-changed.
    q.lock().unwrap_or_else(|e| e.into_inner())
}

/// The subscribers of one open log.
#[derive(Default)]
pub(crate) struct SealHub {
    subscribers: Mutex<Vec<Weak<Mutex<Queue>>>>,
}

impl SealHub {
    /// A new subscriber, or `None` at [`SEAL_SUBSCRIBERS_MAX`].
    pub(crate) fn subscribe(&self) -> Option<SealEvents> {
        let mut subs = self.subscribers.lock().unwrap_or_else(|e| e.into_inner());
        subs.retain(|w| w.strong_count() > 0);
        if subs.len() >= SEAL_SUBSCRIBERS_MAX {
            return None;
        }
        let queue = Arc::new(Mutex::new(Queue::default()));
        subs.push(Arc::downgrade(&queue));
        Some(SealEvents { queue })
    }

    /// Tells every subscriber (the caller holds the writer mutex: events are
    /// published in seal order).
    pub(crate) fn publish(&self, event: SealEvent) {
        debug_assert!(event.first_index <= event.last_index);
        self.notify(SealNotice::Sealed(event));
    }

    /// Tells every subscriber that a truncation removes `from` on (the
    /// caller holds the writer mutex).
    pub(crate) fn truncated(&self, from: u64) {
        self.notify(SealNotice::Truncated { from });
    }

    fn notify(&self, notice: SealNotice) {
        let mut subs = self.subscribers.lock().unwrap_or_else(|e| e.into_inner());
        subs.retain(|w| w.strong_count() > 0);
        for sub in subs.iter().filter_map(Weak::upgrade) {
            let waker = {
                let mut q = lock(&sub);
                if q.events.len() >= SEAL_EVENTS_QUEUED_MAX {
                    q.events.pop_front();
                    q.missed += 1;
                }
                q.events.push_back(notice);
                q.waker.take()
            };
            if let Some(w) = waker {
                w.wake();
            }
        }
    }
}

impl SealHub {
    /// The log is closed: every subscriber's `next` returns `None` once its
    /// queue is empty. Later events (none should come) still queue.
    pub(crate) fn close(&self) {
        let subs = self.subscribers.lock().unwrap_or_else(|e| e.into_inner());
        for sub in subs.iter().filter_map(Weak::upgrade) {
            let waker = {
                let mut q = lock(&sub);
                q.closed = true;
                q.waker.take()
            };
            if let Some(w) = waker {
                w.wake();
            }
        }
    }
}

impl Drop for SealHub {
    fn drop(&mut self) {
        self.close();
    }
}

/// A subscription to seal events, from [`crate::Wal::seal_events`].
///
/// ```
/// use std::path::Path;
/// futures::executor::block_on(async {
///     let wal = wal::Wal::open(simfs::SimFs::new(6), Path::new("/log"), wal::Options::default()).await?;
///     let mut seals = wal.seal_events()?;
///     wal.append(b"a".to_vec()).await?;
///     wal.append(b"b".to_vec()).await?;
///     wal.rotate().await?;
///     match seals.try_next() {
///         Some(wal::SealNotice::Sealed(e)) => assert_eq!((e.first_index, e.last_index), (0, 1)),
///         other => panic!("{other:?}"),
///     }
///     wal.close().await
/// })
/// .unwrap();
/// ```
pub struct SealEvents {
    queue: Arc<Mutex<Queue>>,
}

impl SealEvents {
    /// The next notice, waiting for one; `None` once the log is closed or
    /// dropped and every queued notice was taken.
    ///
    /// Cancelling is harmless: a notice is taken only when this returns it.
    pub async fn next(&mut self) -> Option<SealNotice> {
        std::future::poll_fn(|cx| {
            let mut q = lock(&self.queue);
            if let Some(n) = take(&mut q) {
                return Poll::Ready(Some(n));
            }
            if q.closed {
                return Poll::Ready(None);
            }
            q.waker = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    /// The next notice if one is queued, without waiting.
    pub fn try_next(&mut self) -> Option<SealNotice> {
        take(&mut lock(&self.queue))
    }
}

fn take(q: &mut Queue) -> Option<SealNotice> {
    if q.missed > 0 {
        let events = std::mem::take(&mut q.missed);
        return Some(SealNotice::Missed { events });
    }
    q.events.pop_front()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(first: u64) -> SealEvent {
        SealEvent {
            segment_id: first,
            first_index: first,
            last_index: first,
            cause: SealCause::Rotation,
        }
    }

    #[test]
    fn a_lagging_subscriber_loses_the_oldest_and_is_told() {
        let hub = SealHub::default();
        let mut s = hub.subscribe().expect("room");
        for i in 0..(SEAL_EVENTS_QUEUED_MAX as u64 + 3) {
            hub.publish(ev(i));
        }
        assert_eq!(s.try_next(), Some(SealNotice::Missed { events: 3 }));
        assert_eq!(s.try_next(), Some(SealNotice::Sealed(ev(3))));
        drop(hub);
        let rest = futures::executor::block_on(async {
            let mut n = 0;
            while s.next().await.is_some() {
                n += 1;
            }
            n
        });
        assert_eq!(rest, SEAL_EVENTS_QUEUED_MAX - 1);
    }

    #[test]
    fn subscribers_are_bounded_and_dropped_ones_free_their_place() {
        let hub = SealHub::default();
        let subs: Vec<_> = (0..SEAL_SUBSCRIBERS_MAX)
            .map(|_| hub.subscribe().expect("room"))
            .collect();
        assert!(hub.subscribe().is_none());
        drop(subs);
        assert!(hub.subscribe().is_some());
    }
}
