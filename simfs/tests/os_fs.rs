//! Unit tests of `OsFs` against the real filesystem, in temporary directories.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::io::ErrorKind;

use futures::executor::block_on;
use simfs::{DirEntry, File, Fs, Metadata, OpenOptions, OsFs};

fn rw_create() -> OpenOptions {
    OpenOptions::new().read(true).write(true).create(true)
}

fn both() -> [OsFs; 2] {
    [OsFs::new(), OsFs::inline()]
}

#[test]
fn write_read_positional() {
    for fs in both() {
        block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let f = fs.open(&dir.path().join("f"), rw_create()).await.unwrap();
            assert_eq!(f.len().await.unwrap(), 0);
            assert_eq!(f.write_at(b"hello", 0).await.unwrap(), 5);
            assert_eq!(f.write_at(b"XY", 1).await.unwrap(), 2);
            // A gap reads as zeros.
            f.write_all_at(b"end", 10).await.unwrap();
            assert_eq!(f.len().await.unwrap(), 13);
            let mut buf = [7u8; 13];
            f.read_exact_at(&mut buf, 0).await.unwrap();
            assert_eq!(&buf, b"hXYlo\0\0\0\0\0end");
            // Positional: a read in the middle.
            let mut two = [0u8; 2];
            assert_eq!(f.read_at(&mut two, 3).await.unwrap(), 2);
            assert_eq!(&two, b"lo");
            // A read across EOF is short; at or past EOF it returns 0.
            let mut big = [0u8; 8];
            assert_eq!(f.read_at(&mut big, 10).await.unwrap(), 3);
            assert_eq!(f.read_at(&mut big, 13).await.unwrap(), 0);
            assert_eq!(f.read_at(&mut big, 1000).await.unwrap(), 0);
            let err = f.read_exact_at(&mut big, 10).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::UnexpectedEof);
        });
    }
}

#[test]
fn data_is_visible_through_a_second_handle_and_after_reopen() {
    block_on(async {
        let fs = OsFs::new();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let w = fs.open(&p, rw_create()).await.unwrap();
        let r = fs.open(&p, OpenOptions::new().read(true)).await.unwrap();
        w.write_all_at(b"abc", 0).await.unwrap();
        let mut buf = [0u8; 3];
        r.read_exact_at(&mut buf, 0).await.unwrap();
        assert_eq!(&buf, b"abc");
        drop(w);
        drop(r);
        let again = fs.open(&p, OpenOptions::new().read(true)).await.unwrap();
        again.read_exact_at(&mut buf, 0).await.unwrap();
        assert_eq!(&buf, b"abc");
        // Truncate on open.
        let t = fs
            .open(&p, OpenOptions::new().write(true).truncate(true))
            .await
            .unwrap();
        assert_eq!(t.len().await.unwrap(), 0);
    });
}

#[test]
fn set_len_cuts_and_zero_extends() {
    block_on(async {
        let fs = OsFs::new();
        let dir = tempfile::tempdir().unwrap();
        let f = fs.open(&dir.path().join("f"), rw_create()).await.unwrap();
        f.write_all_at(b"abcdef", 0).await.unwrap();
        f.set_len(3).await.unwrap();
        assert_eq!(f.len().await.unwrap(), 3);
        f.set_len(6).await.unwrap();
        let mut buf = [9u8; 6];
        f.read_exact_at(&mut buf, 0).await.unwrap();
        assert_eq!(&buf, b"abc\0\0\0");
    });
}

#[test]
fn allocate_extends_with_zeros_and_never_shrinks() {
    for fs in both() {
        block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let f = fs.open(&dir.path().join("f"), rw_create()).await.unwrap();
            f.write_all_at(b"head", 0).await.unwrap();
            f.allocate(1 << 20).await.unwrap();
            assert_eq!(f.len().await.unwrap(), 1 << 20);
            let mut buf = vec![1u8; 1 << 20];
            f.read_exact_at(&mut buf, 0).await.unwrap();
            assert_eq!(&buf[..4], b"head");
            assert!(buf[4..].iter().all(|&b| b == 0));
            // Smaller or equal: no change.
            f.allocate(10).await.unwrap();
            f.allocate(1 << 20).await.unwrap();
            assert_eq!(f.len().await.unwrap(), 1 << 20);
            f.allocate(0).await.unwrap();
            assert_eq!(f.len().await.unwrap(), 1 << 20);
            f.sync_data().await.unwrap();
        });
    }
}

#[test]
fn syncs_succeed() {
    for fs in both() {
        block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let sub = dir.path().join("sub");
            fs.create_dir_all(&sub).await.unwrap();
            let f = fs.open(&sub.join("f"), rw_create()).await.unwrap();
            f.write_all_at(b"x", 0).await.unwrap();
            f.sync_data().await.unwrap();
            f.sync_all().await.unwrap();
            fs.sync_dir(&sub).await.unwrap();
            fs.sync_dir(dir.path()).await.unwrap();
            // A read-only handle can be synced too (fsync works on O_RDONLY).
            let r = fs.open(&sub.join("f"), OpenOptions::new().read(true)).await.unwrap();
            r.sync_all().await.unwrap();
            let e = fs.sync_dir(&dir.path().join("missing")).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::NotFound);
            // A file is not a directory (Linux would fsync it).
            let e = fs.sync_dir(&sub.join("f")).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::NotADirectory);
        });
    }
}

#[test]
fn syncs_from_many_threads_through_one_io_thread() {
    let fs = OsFs::new();
    let dir = tempfile::tempdir().unwrap();
    std::thread::scope(|s| {
        for i in 0..8 {
            let fs = fs.clone();
            let path = dir.path().join(format!("f{i}"));
            s.spawn(move || {
                block_on(async {
                    let f = fs.open(&path, rw_create()).await.unwrap();
                    for j in 0..5u8 {
                        f.write_all_at(&[j], u64::from(j)).await.unwrap();
                        f.sync_data().await.unwrap();
                    }
                })
            });
        }
    });
    block_on(fs.sync_dir(dir.path())).unwrap();
    assert_eq!(block_on(fs.read_dir(dir.path())).unwrap().len(), 8);
}

#[test]
fn a_file_outlives_its_fs_value() {
    // The file keeps the I/O thread alive after the OsFs is dropped.
    let dir = tempfile::tempdir().unwrap();
    let f = block_on(OsFs::new().open(&dir.path().join("f"), rw_create())).unwrap();
    block_on(async {
        f.write_all_at(b"z", 0).await.unwrap();
        f.sync_data().await.unwrap();
        f.sync_all().await.unwrap();
    });
}

#[test]
fn rename_replaces_atomically() {
    block_on(async {
        let fs = OsFs::new();
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        let fa = fs.open(&a, rw_create()).await.unwrap();
        fa.write_all_at(b"new", 0).await.unwrap();
        let fb = fs.open(&b, rw_create()).await.unwrap();
        fb.write_all_at(b"old!", 0).await.unwrap();
        fs.rename(&a, &b).await.unwrap();
        assert!(!fs.exists(&a).await.unwrap());
        assert_eq!(fs.metadata(&b).await.unwrap().len, 3);
        let r = fs.open(&b, OpenOptions::new().read(true)).await.unwrap();
        let mut buf = [0u8; 3];
        r.read_exact_at(&mut buf, 0).await.unwrap();
        assert_eq!(&buf, b"new");
        // The old handle of the replaced file still works; the renamed
        // file's handle follows the inode.
        let mut old = [0u8; 4];
        fb.read_exact_at(&mut old, 0).await.unwrap();
        assert_eq!(&old, b"old!");
        fa.write_all_at(b"N", 0).await.unwrap();
        r.read_exact_at(&mut buf, 0).await.unwrap();
        assert_eq!(&buf, b"New");
        // Renaming a missing file.
        let e = fs.rename(&a, &b).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound);
        // Across directories.
        let sub = dir.path().join("sub");
        fs.create_dir_all(&sub).await.unwrap();
        fs.rename(&b, &sub.join("c")).await.unwrap();
        assert!(fs.exists(&sub.join("c")).await.unwrap());
        assert!(!fs.exists(&b).await.unwrap());
    });
}

#[test]
fn remove_file_keeps_open_handles_working() {
    block_on(async {
        let fs = OsFs::new();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let f = fs.open(&p, rw_create()).await.unwrap();
        f.write_all_at(b"data", 0).await.unwrap();
        fs.remove_file(&p).await.unwrap();
        assert!(!fs.exists(&p).await.unwrap());
        let mut buf = [0u8; 4];
        f.read_exact_at(&mut buf, 0).await.unwrap();
        assert_eq!(&buf, b"data");
        f.sync_data().await.unwrap();
        let e = fs.remove_file(&p).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound);
    });
}

#[test]
fn read_dir_is_sorted_and_typed() {
    block_on(async {
        let fs = OsFs::new();
        let dir = tempfile::tempdir().unwrap();
        for name in ["c", "a", "b10", "b2"] {
            fs.open(&dir.path().join(name), rw_create()).await.unwrap();
        }
        fs.create_dir_all(&dir.path().join("d/e/f")).await.unwrap();
        let list = fs.read_dir(dir.path()).await.unwrap();
        let expect = |name: &str, is_dir| DirEntry {
            name: name.into(),
            is_dir,
        };
        assert_eq!(
            list,
            vec![
                expect("a", false),
                expect("b10", false),
                expect("b2", false),
                expect("c", false),
                expect("d", true),
            ]
        );
        assert_eq!(fs.read_dir(&dir.path().join("d/e/f")).await.unwrap(), vec![]);
        let e = fs.read_dir(&dir.path().join("missing")).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound);
        let e = fs.read_dir(&dir.path().join("a")).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotADirectory);
    });
}

#[test]
fn metadata_and_exists() {
    block_on(async {
        let fs = OsFs::new();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        assert!(!fs.exists(&p).await.unwrap());
        let e = fs.metadata(&p).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound);
        let f = fs.open(&p, rw_create()).await.unwrap();
        f.write_all_at(&[1; 17], 0).await.unwrap();
        assert!(fs.exists(&p).await.unwrap());
        assert_eq!(fs.metadata(&p).await.unwrap(), Metadata { len: 17, is_dir: false });
        assert_eq!(
            fs.metadata(dir.path()).await.unwrap(),
            Metadata { len: 0, is_dir: true }
        );
        // create_dir_all succeeds if the directory exists.
        fs.create_dir_all(dir.path()).await.unwrap();
        let e = fs.metadata(&dir.path().join("nodir/f")).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound);
    });
}

#[test]
fn lock_dir_excludes_in_process_and_releases_on_drop() {
    block_on(async {
        let fs = OsFs::new();
        let other = OsFs::inline();
        let dir = tempfile::tempdir().unwrap();
        let lock = fs.lock_dir(dir.path()).await.unwrap();
        for f in [&fs, &other] {
            let e = f.lock_dir(dir.path()).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::WouldBlock);
            assert!(e.to_string().contains(&dir.path().display().to_string()), "{e}");
        }
        // Another directory is independent.
        let sub = dir.path().join("sub");
        fs.create_dir_all(&sub).await.unwrap();
        let sub_lock = fs.lock_dir(&sub).await.unwrap();
        drop(lock);
        let again = other.lock_dir(dir.path()).await.unwrap();
        assert_eq!(again.path(), dir.path());
        drop(sub_lock);
        drop(again);
        // Errors: missing, or not a directory.
        let e = fs.lock_dir(&dir.path().join("missing")).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound);
        fs.open(&dir.path().join("file"), rw_create()).await.unwrap();
        let e = fs.lock_dir(&dir.path().join("file")).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotADirectory);
    });
}

#[test]
fn shared_dir_locks_exclude_writers_not_readers() {
    block_on(async {
        let fs = OsFs::new();
        let dir = tempfile::tempdir().unwrap();
        let a = fs.lock_dir_shared(dir.path()).await.unwrap();
        let b = OsFs::inline().lock_dir_shared(dir.path()).await.unwrap();
        assert_eq!(fs.lock_dir(dir.path()).await.unwrap_err().kind(), ErrorKind::WouldBlock);
        drop(a);
        assert_eq!(fs.lock_dir(dir.path()).await.unwrap_err().kind(), ErrorKind::WouldBlock);
        drop(b);
        let w = fs.lock_dir(dir.path()).await.unwrap();
        assert_eq!(
            fs.lock_dir_shared(dir.path()).await.unwrap_err().kind(),
            ErrorKind::WouldBlock
        );
        drop(w);
        // A read-only directory can be locked shared (flock needs no write).
        drop(fs.lock_dir_shared(dir.path()).await.unwrap());
    });
}

#[test]
fn lock_dir_excludes_across_threads() {
    let fs = OsFs::new();
    let dir = tempfile::tempdir().unwrap();
    let lock = block_on(fs.lock_dir(dir.path())).unwrap();
    let path = dir.path().to_path_buf();
    let fs2 = fs.clone();
    let kind = std::thread::spawn(move || block_on(fs2.lock_dir(&path)).unwrap_err().kind())
        .join()
        .unwrap();
    assert_eq!(kind, ErrorKind::WouldBlock);
    drop(lock);
}

#[test]
fn open_errors() {
    block_on(async {
        let fs = OsFs::new();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        // Missing without create.
        let e = fs.open(&p, OpenOptions::new().read(true)).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound);
        // Missing parent.
        let e = fs.open(&dir.path().join("nodir/f"), rw_create()).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound);
        // create_new on an existing file.
        let new = OpenOptions::new().write(true).create_new(true);
        fs.open(&p, new).await.unwrap();
        let e = fs.open(&p, new).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::AlreadyExists);
        // A directory, for writing or even for reading.
        let e = fs.open(dir.path(), rw_create()).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IsADirectory);
        let e = fs.open(dir.path(), OpenOptions::new().read(true)).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IsADirectory);
        // Create without write is invalid.
        let e = fs
            .open(&p, OpenOptions::new().read(true).create(true))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
    });
}

#[test]
fn handle_mode_is_enforced() {
    block_on(async {
        let fs = OsFs::new();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let w = fs.open(&p, OpenOptions::new().write(true).create(true)).await.unwrap();
        w.write_all_at(b"abc", 0).await.unwrap();
        // As the kernel says: EBADF (uncategorized) for I/O the handle was
        // not opened for, EINVAL for ftruncate.
        let mut buf = [0u8; 3];
        let e = w.read_at(&mut buf, 0).await.unwrap_err();
        assert_eq!(e.raw_os_error(), None, "context is added: {e}");
        assert!(e.to_string().contains("os error 9"), "{e}");
        let r = fs.open(&p, OpenOptions::new().read(true)).await.unwrap();
        for e in [
            r.write_at(b"x", 0).await.unwrap_err(),
            r.allocate(100).await.unwrap_err(),
            r.allocate(1).await.unwrap_err(),
        ] {
            assert!(e.to_string().contains("os error 9"), "{e}");
            assert_eq!(e.kind(), std::io::Error::from_raw_os_error(9).kind());
        }
        let e = r.set_len(0).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        assert_eq!(r.len().await.unwrap(), 3);
    });
}

#[test]
fn fs_is_clone_debug_default_and_send_sync() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<OsFs>();
    assert_send_sync::<simfs::OsFile>();
    assert_send_sync::<simfs::OsDirLock>();
    let fs = OsFs::default();
    let _clone = fs.clone();
    assert!(format!("{fs:?}").contains("OsFs"));
    assert!(!fs.is_inline());
}
