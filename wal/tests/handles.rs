//! Handles: `close(&self)` on a shared log, clones, and what dropping the
//! last handle releases (issue: a live iterator kept the directory lock
//! after the `Wal` was dropped, so a reopen in the same process failed
//! `Locked`).

use std::path::Path;

use futures::executor::block_on;
use simfs::SimFs;
use wal::{Error, Options, Wal};

fn dir() -> &'static Path {
    Path::new("/log")
}

#[test]
fn dropping_the_last_handle_releases_the_lock_and_ends_iterators() {
    block_on(async {
        let fs = SimFs::new(11);
        let wal = Wal::open(fs.clone(), dir(), Options::default()).await.unwrap();
        for i in 0..3u8 {
            wal.append(vec![i]).await.unwrap();
        }
        let mut it = wal.iter_from(0).unwrap();
        assert_eq!(it.next().await.unwrap().unwrap(), (0, vec![0]));
        let clone = wal.clone();
        drop(wal);
        // A clone still holds the log: the lock stays.
        assert!(matches!(
            Wal::open(fs.clone(), dir(), Options::default()).await,
            Err(Error::Locked { .. })
        ));
        drop(clone);
        // The iterator is still alive, but the last handle went.
        let again = Wal::open(fs.clone(), dir(), Options::default()).await.unwrap();
        assert!(matches!(it.next().await, Some(Err(Error::Closed))));
        assert_eq!(again.read(2).await.unwrap(), vec![2]);
        again.close().await.unwrap();
    });
}

#[test]
fn close_through_a_shared_handle_closes_every_clone_once() {
    block_on(async {
        let fs = SimFs::new(12);
        let wal = std::sync::Arc::new(Wal::open(fs.clone(), dir(), Options::default()).await.unwrap());
        let other = (*wal).clone();
        other.append(b"a".to_vec()).await.unwrap();
        wal.close().await.unwrap();
        assert!(matches!(other.append(b"b".to_vec()).await, Err(Error::Closed)));
        assert!(matches!(other.close().await, Err(Error::Closed)));
        // Closed cleanly: the next open takes the clean-shutdown marker.
        let w = Wal::open(fs, dir(), Options::default()).await.unwrap();
        assert!(w.recovery_report().clean_reopen);
        assert_eq!(w.read(0).await.unwrap(), b"a");
        w.close().await.unwrap();
    });
}
