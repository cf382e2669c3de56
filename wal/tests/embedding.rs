//! The embedding API: records that know their index (`append_with`,
//! `append_batch_with`), bounded range reads, truncation past the end,
//! durability waits and seal events.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use futures::executor::block_on;
use simfs::{CrashKind, SimFs};
use wal::{Error, Options, SealNotice, SyncPolicy, Wal};

async fn fill(wal: &Wal<SimFs>, n: u64, len: usize) {
    for _ in 0..n {
        let i = wal.next_index();
        wal.append(payload(i, len)).await.unwrap();
    }
}

#[test]
fn append_with_gives_each_of_many_concurrent_appenders_its_own_index() {
    block_on(async {
        let fs = SimFs::new(11);
        let wal = open(&fs, Options::default().segment_max_records(7)).await.unwrap();
        // 32 appenders at once, half of them batches: every record embeds
        // the index it was given, and must be read back at that index.
        let calls = (0..32u64).map(|c| {
            let wal = &wal;
            async move {
                if c % 2 == 0 {
                    let i = wal.append_with(|index| index.to_le_bytes().to_vec()).await.unwrap();
                    vec![i]
                } else {
                    let first = wal
                        .append_batch_with(|first| (first..first + 3).map(|i| i.to_le_bytes().to_vec()).collect())
                        .await
                        .unwrap();
                    (first..first + 3).collect()
                }
            }
        });
        let mut got: Vec<u64> = futures::future::join_all(calls).await.concat();
        got.sort_unstable();
        assert_eq!(got, (0..16 + 16 * 3).collect::<Vec<_>>());
        drop(wal);
        fs.crash(CrashKind::PowerLoss);
        let wal = open(&fs, Options::default().segment_max_records(7)).await.unwrap();
        for (i, rec) in collect(&wal).await.unwrap() {
            assert_eq!(rec, i.to_le_bytes().to_vec(), "index {i}");
        }
        assert_eq!(wal.next_index(), 64);
    });
}

#[test]
fn append_with_refuses_a_bad_record_after_making_it_and_admits_nothing() {
    block_on(async {
        let fs = SimFs::new(12);
        let wal = open(&fs, Options::default().max_record_bytes(8)).await.unwrap();
        wal.append(b"a".to_vec()).await.unwrap();
        let r = wal.append_with(|_| vec![0; 9]).await;
        assert!(matches!(r, Err(Error::RecordTooLarge { .. })), "{r:?}");
        assert!(matches!(
            wal.append_batch_with(|_| Vec::new()).await,
            Err(Error::EmptyBatch)
        ));
        // The index was not used up.
        assert_eq!(wal.append_with(|i| vec![i as u8]).await.unwrap(), 1);
        assert!(wal.stopped().is_none());
    });
}

#[test]
fn a_panicking_append_with_admits_nothing_and_leaves_the_log_running() {
    block_on(async {
        let fs = SimFs::new(13);
        let wal = open(&fs, Options::default()).await.unwrap();
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            block_on(wal.append_with(|_| panic!("the caller's bug")))
        }));
        assert!(panicked.is_err());
        // A call back into the log from the function panics instead of
        // deadlocking, and also leaves the log running.
        let reentrant = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            block_on(wal.append_with(|_| wal.next_index().to_le_bytes().to_vec()))
        }));
        assert!(reentrant.is_err());
        assert!(wal.stopped().is_none());
        assert_eq!(wal.append(b"x".to_vec()).await.unwrap(), 0);
    });
}

#[test]
fn read_range_is_clamped_bounded_and_contiguous() {
    block_on(async {
        let fs = SimFs::new(14);
        let wal = open(&fs, Options::default().segment_max_records(4)).await.unwrap();
        fill(&wal, 20, 10).await;
        wal.prune_through(3).await.unwrap();
        assert_eq!(wal.first_index(), 4);
        let all = wal.read_range(.., usize::MAX).await.unwrap();
        assert_eq!(all.first().map(|r| r.0), Some(4));
        assert_eq!(all.len(), 16);
        assert_eq!(all, collect(&wal).await.unwrap());
        // Bounded by bytes: 35 bytes hold three records of 10.
        let page = wal.read_range(6..18, 35).await.unwrap();
        assert_eq!(page.iter().map(|r| r.0).collect::<Vec<_>>(), vec![6, 7, 8]);
        // Inclusive end, across segments.
        let page = wal.read_range(7..=9, usize::MAX).await.unwrap();
        assert_eq!(page.iter().map(|r| r.0).collect::<Vec<_>>(), vec![7, 8, 9]);
        // One record always comes back, whatever the limit.
        assert_eq!(wal.read_range(19.., 0).await.unwrap().len(), 1);
        // Clamped: below the first index, past the end, empty ranges.
        assert_eq!(wal.read_range(0..6, usize::MAX).await.unwrap().len(), 2);
        assert!(wal.read_range(20..30, usize::MAX).await.unwrap().is_empty());
        assert!(wal.read_range(9..9, usize::MAX).await.unwrap().is_empty());
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = wal.read_range(12..9, usize::MAX).await.unwrap();
        assert!(reversed.is_empty());
    });
}

#[test]
fn truncation_at_or_past_the_end_is_a_no_op() {
    block_on(async {
        let fs = SimFs::new(15);
        let wal = open(&fs, Options::default()).await.unwrap();
        fill(&wal, 5, 10).await;
        wal.truncate_from(5).await.unwrap();
        wal.truncate_from(500).await.unwrap();
        wal.truncate_after(u64::MAX - 1).await.unwrap();
        assert_eq!((wal.first_index(), wal.next_index()), (0, 5));
        assert_eq!(wal.stats().await.truncations, 0);
    });
}

#[test]
fn reset_to_moves_an_empty_log_durably_and_refuses_a_full_one() {
    block_on(async {
        let fs = SimFs::new(18);
        let wal = open(&fs, Options::default().segment_max_records(4)).await.unwrap();
        fill(&wal, 6, 10).await;
        assert!(matches!(wal.reset_to(100).await, Err(Error::InvalidArgument(_))));
        assert_eq!(wal.prune_through(5).await.unwrap(), 6); // empty now
        assert!(matches!(wal.reset_to(5).await, Err(Error::OutOfRange { .. })));
        assert!(matches!(wal.reset_to(u64::MAX).await, Err(Error::OutOfRange { .. })));
        wal.reset_to(6).await.unwrap(); // where it is: made durable
        wal.reset_to(1000).await.unwrap();
        assert_eq!((wal.first_index(), wal.next_index()), (1000, 1000));
        drop(wal);
        fs.crash(CrashKind::PowerLoss);
        let wal = open(&fs, Options::default().segment_max_records(4)).await.unwrap();
        assert_eq!((wal.first_index(), wal.next_index()), (1000, 1000));
        assert_eq!(wal.append(b"x".to_vec()).await.unwrap(), 1000);
        assert!(wal.stopped().is_none());
    });
}

#[test]
fn wait_durable_makes_a_prefix_durable_with_one_fsync_for_many_waiters() {
    block_on(async {
        // Every file operation yields once: the waiters queue behind the
        // first one's fsync.
        let fs = SimFs::with_config(16, yielding());
        let wal = open(&fs, Options::default().sync_policy(SyncPolicy::Manual))
            .await
            .unwrap();
        fill(&wal, 10, 10).await;
        assert_eq!(wal.durable_next(), 0);
        let before = wal.stats().await.fsyncs;
        let waits = (0..10).map(|i| wal.wait_durable(i));
        for r in futures::future::join_all(waits).await {
            r.unwrap();
        }
        assert_eq!(wal.durable_next(), 10);
        let after = wal.stats().await;
        assert_eq!(after.fsyncs - before, 1, "one fsync covered all ten waiters");
        assert_eq!(after.durable_waits_joined, 9);
        // Already durable: no fsync; never admitted: OutOfRange.
        wal.wait_durable(3).await.unwrap();
        assert!(matches!(wal.wait_durable(10).await, Err(Error::OutOfRange { .. })));
        // What wait_durable promised survives a power loss.
        drop(wal);
        fs.crash(CrashKind::PowerLoss);
        let wal = open(&fs, Options::default()).await.unwrap();
        assert_eq!(wal.next_index(), 10);
    });
}

#[test]
fn seal_events_report_each_rotation_and_truncation_in_order() {
    block_on(async {
        let fs = SimFs::new(17);
        let wal = open(&fs, Options::default().segment_max_records(3)).await.unwrap();
        let mut seals = wal.seal_events().unwrap();
        fill(&wal, 10, 10).await; // rotations after 2, 5, 8
        wal.rotate().await.unwrap(); // seals [9, 9]
        fill(&wal, 2, 10).await; // [10, 11] active
        wal.truncate_from(11).await.unwrap(); // seals [10, 10] by name
        let mut got = Vec::new();
        while let Some(n) = seals.try_next() {
            match n {
                SealNotice::Sealed(e) => got.push(format!("{}..={} {:?}", e.first_index, e.last_index, e.cause)),
                SealNotice::Truncated { from } => got.push(format!("truncated from {from}")),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(
            got,
            [
                "0..=2 Rotation",
                "3..=5 Rotation",
                "6..=8 Rotation",
                "9..=9 Rotation",
                "truncated from 11",
                "10..=10 Truncation"
            ]
        );
        wal.close().await.unwrap();
        assert_eq!(seals.next().await, None, "a closed log ends the subscription");
    });
}
