//! Read-only open (`Options::read_only`): it changes nothing and tries to
//! change nothing (every test runs it on a disk that refuses changes), shares
//! its lock with other readers but not with a writer, serves what a writable
//! open would serve, reports what that open would do, and refuses every
//! call that would change the log with `Error::ReadOnly`.
#![allow(clippy::unwrap_used)]

mod common;
mod read_only_disk;

use common::*;
use futures::executor::block_on;
use read_only_disk::ReadOnlyDisk;
use simfs::{CrashKind, Fs, SimFs};
use wal::{CompactionOptions, Error, Options, Wal};

fn ro() -> Options {
    small().read_only(true)
}

fn small() -> Options {
    Options::default().segment_max_records(20)
}

async fn filled(fs: &SimFs, n: u64) {
    let wal = open(fs, small()).await.unwrap();
    for i in 0..n {
        wal.append(payload(i, 30)).await.unwrap();
    }
    wal.close().await.unwrap();
}

#[test]
fn readers_share_the_lock_and_writers_are_kept_out() {
    block_on(async {
        let fs = SimFs::new(1);
        filled(&fs, 50).await;
        let a = Wal::open(ReadOnlyDisk::new(fs.clone()), dir(), ro()).await.unwrap();
        let b = Wal::open(ReadOnlyDisk::new(fs.clone()), dir(), ro()).await.unwrap();
        assert!(matches!(open(&fs, small()).await, Err(Error::Locked { .. })));
        assert_eq!(collect(&a).await.unwrap(), collect(&b).await.unwrap());
        a.close().await.unwrap();
        assert!(matches!(open(&fs, small()).await, Err(Error::Locked { .. })));
        b.close().await.unwrap();
        let w = open(&fs, small()).await.unwrap();
        assert!(matches!(
            Wal::open(fs.clone(), dir(), ro()).await,
            Err(Error::Locked { .. })
        ));
        w.close().await.unwrap();
    });
}

#[test]
fn every_change_is_refused_and_reads_work() {
    block_on(async {
        let fs = SimFs::new(2);
        filled(&fs, 50).await;
        let disk = ReadOnlyDisk::new(fs.clone());
        let wal = Wal::open(disk.clone(), dir(), ro()).await.unwrap();
        assert_eq!((wal.first_index(), wal.next_index()), (0, 50));
        assert_eq!(wal.read(33).await.unwrap(), payload(33, 30));
        assert_eq!(collect(&wal).await.unwrap().len(), 50);
        let refused = |r: wal::Result<()>| assert!(matches!(r, Err(Error::ReadOnly { .. })), "{r:?}");
        refused(wal.append(b"x".to_vec()).await.map(drop));
        refused(wal.append_at(50, b"x".to_vec()).await.map(drop));
        refused(wal.append_batch(vec![b"x".to_vec()]).await.map(drop));
        refused(wal.append_batch_at(50, vec![b"x".to_vec()]).await.map(drop));
        refused(wal.sync().await);
        refused(wal.rotate().await);
        refused(wal.prune_through(10).await.map(drop));
        refused(wal.truncate_from(40).await);
        refused(wal.truncate_after(40).await);
        refused(wal.compact(CompactionOptions::default()).await.map(drop));
        assert_eq!(wal.next_index(), 50);
        wal.close().await.unwrap();
        assert!(disk.refused().is_empty(), "{:?}", disk.refused());
        // Nothing changed: a writable open finds the clean log as it was.
        let w = open(&fs, small()).await.unwrap();
        assert!(w.recovery_report().clean_reopen);
        assert_eq!(collect(&w).await.unwrap().len(), 50);
    });
}

#[test]
fn a_missing_directory_is_not_created() {
    block_on(async {
        let fs = SimFs::new(3);
        let disk = ReadOnlyDisk::new(fs.clone());
        match Wal::open(disk.clone(), dir(), ro()).await {
            Err(Error::Io { op, source, .. }) => {
                assert_eq!(op, "metadata");
                assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
            }
            other => panic!("expected NotFound, got {:?}", other.map(|_| ())),
        }
        assert!(disk.refused().is_empty());
        assert!(!fs.exists(dir()).await.unwrap());
    });
}

#[test]
fn after_a_crash_the_plan_is_what_a_writable_open_does() {
    // Crashes mid-append leave torn tails, preallocated zeros, records not
    // known durable: the read-only open must report exactly what the
    // writable open then does, and serve the same records.
    let mut cut = 0;
    for seed in 0..40u64 {
        block_on(async {
            let fs = step_fs(seed, yielding());
            let wal = open(&fs, small()).await.unwrap();
            let kind = if seed % 2 == 0 {
                CrashKind::PowerLoss
            } else {
                CrashKind::Process
            };
            fs.crash_after(20 + seed * 7, kind);
            for i in 0..100u64 {
                if wal.append(payload(i, 50 + (i as usize % 7) * 100)).await.is_err() {
                    break;
                }
            }
            drop(wal);
            // Disarmed; a crash either way (a second one finds nothing new).
            fs.crash_after(u64::MAX, kind);
            fs.crash(kind);
            let disk = ReadOnlyDisk::new(fs.clone());
            let (plan, served) = match Wal::open(disk.clone(), dir(), ro()).await {
                Ok(r) => {
                    let served = collect(&r).await.unwrap();
                    let plan = r.recovery_report().clone();
                    r.close().await.unwrap();
                    (plan, served)
                }
                Err(e) => panic!("seed {seed}: read-only open failed: {e}"),
            };
            assert!(disk.refused().is_empty(), "seed {seed}: {:?}", disk.refused());
            let w = open(&fs, small()).await.unwrap();
            let mut done = w.recovery_report().clone();
            done.read_only = true;
            assert_eq!(plan, done, "seed {seed}");
            assert_eq!(served, collect(&w).await.unwrap(), "seed {seed}");
            if plan.torn_bytes_cut + plan.zero_bytes_cut + plan.rewritten_bytes > 0 {
                cut += 1;
            }
        });
    }
    assert!(
        cut >= 10,
        "crashes left something to cut or rewrite in only {cut} of 40 seeds"
    );
}
