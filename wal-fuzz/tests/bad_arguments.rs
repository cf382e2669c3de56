//! Every public entry point of `wal::Wal` with bad arguments or in a bad
//! state returns a typed error (never a panic, never a stop of the WAL).
#![allow(clippy::unwrap_used)]

use std::path::Path;

use futures::executor::block_on;
use simfs::{FaultConfig, Fs, OpenOptions, SimFs};
use wal::codec::MAX_RECORD_BYTES;
use wal::{Error, Options, Sleeper, SyncPolicy, Wal};

fn dir() -> &'static Path {
    Path::new("/log")
}

fn small() -> Options {
    Options::default()
        .max_record_bytes(1000)
        .max_batch_records(4)
        .max_write_bytes(2000)
}

async fn open(fs: &SimFs, opts: Options) -> wal::Result<Wal<SimFs>> {
    Wal::open(fs.clone(), dir(), opts).await
}

/// A WAL stopped by a failed fsync, with records 0 and 1 acknowledged.
async fn stopped_wal(fs: &SimFs) -> Wal<SimFs> {
    let wal = open(fs, Options::default()).await.unwrap();
    wal.append(b"a".to_vec()).await.unwrap();
    wal.append(b"b".to_vec()).await.unwrap();
    fs.set_faults(FaultConfig {
        sync_fail: 1.0,
        ..FaultConfig::none()
    });
    assert!(wal.append(b"c".to_vec()).await.unwrap_err().is_stopped());
    fs.set_faults(FaultConfig::none());
    wal
}

#[test]
fn bad_options_are_invalid_argument() {
    let batched = |max_delay_us, max_records| {
        SyncPolicy::batched(
            std::time::Duration::from_micros(max_delay_us),
            max_records,
            Sleeper::new(|_| Box::pin(async {})),
        )
    };
    let d = Options::default;
    let cases: Vec<(&str, Options)> = vec![
        ("segment_size_bytes < 4096", d().segment_size_bytes(4095)),
        ("segment_size_bytes 0", d().segment_size_bytes(0)),
        ("segment_max_records 0", d().segment_max_records(0)),
        (
            "max_record_bytes over the format limit",
            d().max_record_bytes(MAX_RECORD_BYTES as usize + 1)
                .max_write_bytes(usize::MAX)
                .max_queue_bytes(usize::MAX),
        ),
        ("max_batch_records 0", d().max_batch_records(0)),
        ("max_batch_records > 2^24", d().max_batch_records((1 << 24) + 1)),
        (
            "max_write_bytes < max_record_bytes",
            d().max_write_bytes((16 << 20) - 1),
        ),
        ("max_queue_bytes < max_write_bytes", d().max_queue_bytes(1)),
        ("max_queue_appends 0", d().max_queue_appends(0)),
        ("durable_alignment_bytes 0", d().durable_alignment_bytes(0)),
        ("durable_alignment_bytes 4", d().durable_alignment_bytes(4)),
        ("durable_alignment_bytes 3000", d().durable_alignment_bytes(3000)),
        ("durable_alignment_bytes 2 MiB", d().durable_alignment_bytes(2 << 20)),
        ("segment_size_bytes < 2 * alignment", d().segment_size_bytes(8191)),
        ("first_index u64::MAX", d().first_index(u64::MAX)),
        ("Batched delay > 1 s", d().sync_policy(batched(1_000_001, 1))),
        ("Batched max_records 0", d().sync_policy(batched(10, 0))),
    ];
    block_on(async {
        for (what, opts) in cases {
            assert!(matches!(opts.validate(), Err(Error::InvalidArgument(_))), "{what}");
            let fs = SimFs::new(1);
            let res = open(&fs, opts).await;
            assert!(matches!(res, Err(Error::InvalidArgument(_))), "{what}: {:?}", res.err());
            // Nothing was created for a rejected open.
            assert!(!fs.exists(dir()).await.unwrap(), "{what}");
        }
    });
}

#[test]
fn a_path_that_is_a_file_is_invalid_argument() {
    block_on(async {
        let fs = SimFs::new(2);
        fs.open(Path::new("/file"), OpenOptions::new().write(true).create(true))
            .await
            .unwrap();
        let res = Wal::open(fs.clone(), Path::new("/file"), Options::default()).await;
        assert!(matches!(res, Err(Error::InvalidArgument(_))), "{:?}", res.err());
        // A path under a file cannot be created.
        let res = Wal::open(fs, Path::new("/file/log"), Options::default()).await;
        assert!(matches!(res, Err(Error::Io { .. })), "{:?}", res.err());
    });
}

#[test]
fn a_locked_directory_is_locked() {
    block_on(async {
        let fs = SimFs::new(3);
        let wal = open(&fs, Options::default()).await.unwrap();
        let res = open(&fs, Options::default()).await;
        assert!(matches!(res, Err(Error::Locked { .. })), "{:?}", res.err());
        // The failed opener changed nothing: the first still works.
        assert_eq!(wal.append(b"x".to_vec()).await.unwrap(), 0);
        wal.close().await.unwrap();
        let wal = open(&fs, Options::default()).await.unwrap();
        assert_eq!(wal.read(0).await.unwrap(), b"x");
    });
}

#[test]
fn oversized_records_and_batches() {
    block_on(async {
        let wal = open(&SimFs::new(4), small()).await.unwrap();
        assert!(matches!(
            wal.append(vec![0; 1001]).await,
            Err(Error::RecordTooLarge { len: 1001, max: 1000 })
        ));
        assert!(matches!(
            wal.append_at(0, vec![0; 1001]).await,
            Err(Error::RecordTooLarge { .. })
        ));
        assert!(matches!(
            wal.append_batch(vec![vec![], vec![0; 1001]]).await,
            Err(Error::RecordTooLarge { .. })
        ));
        assert!(matches!(wal.append_batch(vec![]).await, Err(Error::EmptyBatch)));
        assert!(matches!(wal.append_batch_at(0, vec![]).await, Err(Error::EmptyBatch)));
        assert!(matches!(
            wal.append_batch(vec![vec![]; 5]).await,
            Err(Error::BatchTooLarge {
                records: 5,
                max_records: 4,
                ..
            })
        ));
        assert!(matches!(
            wal.append_batch(vec![vec![0; 1000]; 3]).await,
            Err(Error::BatchTooLarge {
                bytes: 3000,
                max_bytes: 2000,
                ..
            })
        ));
        // None of that wrote or stopped anything.
        assert_eq!(wal.next_index(), 0);
        assert!(wal.stopped().is_none());
        assert_eq!(wal.append(vec![0; 1000]).await.unwrap(), 0);
        assert_eq!(wal.append_batch(vec![vec![1; 1000]; 2]).await.unwrap(), 1);
    });
}

#[test]
fn indices_out_of_range() {
    block_on(async {
        let opts = Options::default().first_index(10);
        let wal = open(&SimFs::new(5), opts).await.unwrap();
        for i in [0, 9, 10, 11, u64::MAX] {
            assert!(
                matches!(
                    wal.read(i).await,
                    Err(Error::OutOfRange {
                        first: 10,
                        next: 10,
                        ..
                    })
                ),
                "{i}"
            );
        }
        assert!(wal.iter_from(10).is_ok(), "iterating from next_index is allowed");
        for i in [0, 9, 11, u64::MAX] {
            assert!(matches!(wal.iter_from(i), Err(Error::OutOfRange { .. })), "{i}");
        }
        for i in [0, 9, 11, u64::MAX] {
            assert!(matches!(
                wal.append_at(i, b"x".to_vec()).await,
                Err(Error::WrongIndex { expected: 10, .. })
            ));
            assert!(matches!(
                wal.append_batch_at(i, vec![b"x".to_vec()]).await,
                Err(Error::WrongIndex { expected: 10, .. })
            ));
        }
        assert_eq!(wal.append_at(10, b"x".to_vec()).await.unwrap(), 10);
        assert_eq!(
            wal.append_batch_at(11, vec![b"y".to_vec(), b"z".to_vec()])
                .await
                .unwrap(),
            11
        );
        assert!(matches!(wal.read(13).await, Err(Error::OutOfRange { next: 13, .. })));
        assert!(matches!(wal.read(9).await, Err(Error::OutOfRange { first: 10, .. })));
        assert_eq!(wal.read(12).await.unwrap(), b"z");
        assert!(wal.stopped().is_none());
    });
}

#[test]
fn the_end_of_the_index_space_is_invalid_argument() {
    block_on(async {
        let opts = Options::default().first_index(u64::MAX - 2);
        let fs = SimFs::new(6);
        let wal = open(&fs, opts.clone()).await.unwrap();
        assert_eq!(wal.append(b"last".to_vec()).await.unwrap(), u64::MAX - 2);
        // next_index may not reach u64::MAX.
        assert!(matches!(
            wal.append(b"x".to_vec()).await,
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            wal.append_batch(vec![b"x".to_vec(), b"y".to_vec()]).await,
            Err(Error::InvalidArgument(_))
        ));
        assert!(wal.stopped().is_none());
        assert_eq!(wal.read(u64::MAX - 2).await.unwrap(), b"last");
        wal.close().await.unwrap();
        let wal = open(&fs, opts).await.unwrap();
        assert_eq!(wal.next_index(), u64::MAX - 1);
    });
}

#[test]
fn a_stopped_wal_returns_stopped_everywhere_until_reopen() {
    block_on(async {
        let fs = SimFs::new(7);
        let wal = stopped_wal(&fs).await;
        let stopped = |r: Result<(), Error>, what: &str| {
            let e = r.unwrap_err();
            assert!(e.is_stopped(), "{what}: {e:?}");
        };
        assert!(wal.stopped().is_some());
        stopped(wal.append(b"x".to_vec()).await.map(drop), "append");
        stopped(wal.append_at(2, b"x".to_vec()).await.map(drop), "append_at");
        stopped(wal.append_batch(vec![b"x".to_vec()]).await.map(drop), "append_batch");
        stopped(
            wal.append_batch_at(2, vec![b"x".to_vec()]).await.map(drop),
            "append_batch_at",
        );
        stopped(wal.read(0).await.map(drop), "read");
        stopped(wal.iter_from(0).map(drop), "iter_from");
        stopped(wal.sync().await, "sync");
        stopped(wal.rotate().await, "rotate");
        // Stopped comes before argument checks.
        stopped(wal.append_batch(vec![]).await.map(drop), "empty append_batch");
        stopped(wal.append(vec![0; (64 << 20) + 1]).await.map(drop), "oversized append");
        // Accessors keep working.
        assert_eq!(wal.first_index(), 0);
        assert_eq!(wal.next_index(), 2);
        let _ = wal.stats().await;
        stopped(wal.close().await, "close");
        // Reopen recovers.
        let wal = open(&fs, Options::default()).await.unwrap();
        assert!(wal.stopped().is_none());
        assert_eq!(wal.read(1).await.unwrap(), b"b");
    });
}

#[test]
fn iterators_of_a_stopped_wal_return_stopped() {
    block_on(async {
        let fs = SimFs::new(8);
        let wal = open(&fs, Options::default()).await.unwrap();
        wal.append(b"a".to_vec()).await.unwrap();
        let mut it = wal.iter_from(0).unwrap();
        fs.set_faults(FaultConfig {
            sync_fail: 1.0,
            ..FaultConfig::none()
        });
        assert!(wal.append(b"b".to_vec()).await.unwrap_err().is_stopped());
        assert!(it.next().await.unwrap().unwrap_err().is_stopped());
    });
}

#[test]
fn iterators_of_a_closed_wal_return_closed() {
    block_on(async {
        let fs = SimFs::new(9);
        let wal = open(&fs, Options::default()).await.unwrap();
        wal.append(b"a".to_vec()).await.unwrap();
        wal.append(b"b".to_vec()).await.unwrap();
        let mut fresh = wal.iter_from(0).unwrap();
        let mut started = wal.iter_from(0).unwrap();
        assert_eq!(started.next().await.unwrap().unwrap(), (0, b"a".to_vec()));
        let mut at_end = wal.iter_from(2).unwrap();
        wal.close().await.unwrap();
        for it in [&mut fresh, &mut started, &mut at_end] {
            assert!(matches!(it.next().await, Some(Err(Error::Closed))));
            // And again: it stays closed.
            assert!(matches!(it.next().await, Some(Err(Error::Closed))));
        }
        // The iterators do not hold the lock.
        let wal = open(&fs, Options::default()).await.unwrap();
        assert_eq!(wal.next_index(), 2);
        drop(fresh);
    });
}

#[test]
fn a_closed_wal_with_pending_iterators_is_reopenable_and_the_closed_one_stays_closed() {
    block_on(async {
        let fs = SimFs::new(10);
        let wal = open(&fs, Options::default()).await.unwrap();
        wal.append(b"a".to_vec()).await.unwrap();
        let mut old = wal.iter_from(0).unwrap();
        wal.close().await.unwrap();
        let wal = open(&fs, Options::default()).await.unwrap();
        wal.append(b"b".to_vec()).await.unwrap();
        // The old iterator belongs to the closed instance.
        assert!(matches!(old.next().await, Some(Err(Error::Closed))));
        let mut it = wal.iter_from(0).unwrap();
        assert_eq!(it.next().await.unwrap().unwrap(), (0, b"a".to_vec()));
        assert_eq!(it.next().await.unwrap().unwrap(), (1, b"b".to_vec()));
    });
}
