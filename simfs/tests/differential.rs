//! Differential test: with faults off, `SimFs` and `OsFs` (in a fresh temporary
//! directory) give the same results for random sequences of calls: the same
//! `Ok` values (bytes read, lengths, listings, metadata) and the same error
//! kinds. At the end, both trees hold the same directories and file contents.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::io;
use std::path::PathBuf;

use futures::executor::block_on;
use proptest::prelude::*;
use simfs::{CrashKind, DirEntry, File, Fs, Metadata, OpenOptions, OsFs, SimFs};

/// The paths a test case uses, relative to the root ("" is the root itself).
#[derive(Clone, Copy, Debug)]
struct Names {
    /// Paths used as directories (create_dir_all, read_dir, sync_dir, lock_dir).
    dirs: &'static [&'static str],
    /// Paths used as files (open, rename, remove_file).
    files: &'static [&'static str],
}

/// File names never equal to directory names, so that no operation hits the
/// corner cases where Linux's answer depends on the kind of the other entry.
const SEPARATE: Names = Names {
    dirs: &["", "d", "d/e"],
    files: &["a", "b", "c", "d/a", "d/b", "d/e/a"],
};

/// The same names used as files and as directories: opening a directory,
/// renaming a file over a directory, a directory under a file, removing a
/// directory with remove_file, ...
const COLLIDING: Names = Names {
    dirs: &["", "x", "y", "x/y"],
    files: &["x", "y", "x/y", "x/x", "y/x"],
};

#[derive(Clone, Debug)]
enum Op {
    Open {
        file: usize,
        opts: OpenOptions,
    },
    Write {
        h: usize,
        offset: u64,
        len: usize,
        seed: u8,
    },
    Read {
        h: usize,
        offset: u64,
        len: usize,
    },
    SetLen {
        h: usize,
        len: u64,
    },
    Allocate {
        h: usize,
        len: u64,
    },
    Len {
        h: usize,
    },
    SyncData {
        h: usize,
    },
    SyncAll {
        h: usize,
    },
    Drop {
        h: usize,
    },
    Rename {
        from: usize,
        to: usize,
    },
    Remove {
        file: usize,
    },
    CreateDirAll {
        dir: usize,
    },
    ReadDir {
        dir: usize,
    },
    SyncDir {
        dir: usize,
    },
    Metadata {
        path: usize,
    },
    Exists {
        path: usize,
    },
    LockDir {
        dir: usize,
    },
    Unlock {
        l: usize,
    },
    /// `SimFs::crash(Process)` on the simulated side; on both sides every
    /// handle and lock is dropped (a dead process's descriptors).
    ProcessCrash,
}

/// What an operation returned, comparable across the two filesystems.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Out {
    Unit,
    Count(usize),
    Len(u64),
    Bytes(Vec<u8>),
    List(Vec<DirEntry>),
    Meta(Metadata),
    Bool(bool),
    /// The handle index did not refer to an open handle (on both sides).
    NoHandle,
}

type Res = Result<Out, io::ErrorKind>;

fn offset() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..64, 4000u64..4200, 0u64..10_000]
}

fn op(names: Names) -> impl Strategy<Value = Op> {
    let (nf, nd) = (names.files.len(), names.dirs.len());
    let opts = (
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(read, write, create, create_new, truncate)| OpenOptions {
            read,
            write,
            create,
            create_new,
            truncate,
        });
    // Mostly valid options (read or write, create needs write), some invalid.
    let w = prop::bool::weighted;
    let good_opts = (w(0.8), w(0.9), w(0.15), w(0.15)).prop_map(|(read, create, create_new, truncate)| OpenOptions {
        read,
        write: true,
        create,
        create_new,
        truncate,
    });
    let h = 0usize..4;
    prop_oneof![
        8 => (0..nf, good_opts).prop_map(|(file, opts)| Op::Open { file, opts }),
        1 => (0..nf, opts).prop_map(|(file, opts)| Op::Open { file, opts }),
        1 => (0..nf).prop_map(|file| Op::Open {
            file,
            opts: OpenOptions::new().read(true)
        }),
        6 => (h.clone(), offset(), 0usize..5000, any::<u8>())
            .prop_map(|(h, offset, len, seed)| Op::Write { h, offset, len, seed }),
        4 => (h.clone(), offset(), 0usize..5000)
            .prop_map(|(h, offset, len)| Op::Read { h, offset, len }),
        2 => (h.clone(), offset()).prop_map(|(h, len)| Op::SetLen { h, len }),
        2 => (h.clone(), offset()).prop_map(|(h, len)| Op::Allocate { h, len }),
        1 => h.clone().prop_map(|h| Op::Len { h }),
        1 => h.clone().prop_map(|h| Op::SyncData { h }),
        1 => h.clone().prop_map(|h| Op::SyncAll { h }),
        1 => h.prop_map(|h| Op::Drop { h }),
        3 => (0..nf, 0..nf).prop_map(|(from, to)| Op::Rename { from, to }),
        2 => (0..nf).prop_map(|file| Op::Remove { file }),
        2 => (0..nd).prop_map(|dir| Op::CreateDirAll { dir }),
        1 => (0..nd).prop_map(|dir| Op::ReadDir { dir }),
        1 => (0..nd).prop_map(|dir| Op::SyncDir { dir }),
        1 => (0..nd + nf).prop_map(|path| Op::Metadata { path }),
        1 => (0..nd + nf).prop_map(|path| Op::Exists { path }),
        1 => (0..nd).prop_map(|dir| Op::LockDir { dir }),
        1 => (0usize..3).prop_map(|l| Op::Unlock { l }),
        1 => Just(Op::ProcessCrash),
    ]
}

/// One side of the comparison: a filesystem, its root, the names in use, its
/// open handles and held locks.
struct Side<F: Fs> {
    fs: F,
    root: PathBuf,
    names: Names,
    handles: Vec<F::File>,
    locks: Vec<F::DirLock>,
    /// What a process crash does besides dropping handles and locks.
    on_crash: fn(&F),
}

impl<F: Fs> Side<F> {
    fn new(fs: F, root: PathBuf, names: Names, on_crash: fn(&F)) -> Self {
        Side {
            fs,
            root,
            names,
            handles: Vec::new(),
            locks: Vec::new(),
            on_crash,
        }
    }
}

impl<F: Fs> Side<F> {
    fn path(&self, rel: &str) -> PathBuf {
        if rel.is_empty() {
            self.root.clone()
        } else {
            self.root.join(rel)
        }
    }

    fn any_path(&self, i: usize) -> PathBuf {
        let dirs = self.names.dirs;
        if i < dirs.len() {
            self.path(dirs[i])
        } else {
            self.path(self.names.files[i - dirs.len()])
        }
    }

    fn handle(&self, h: usize) -> Option<&F::File> {
        if self.handles.is_empty() {
            None
        } else {
            Some(&self.handles[h % self.handles.len()])
        }
    }

    async fn apply(&mut self, op: &Op) -> Res {
        let kind = |e: io::Error| e.kind();
        match *op {
            Op::Open { file, opts } => {
                let f = self
                    .fs
                    .open(&self.path(self.names.files[file]), opts)
                    .await
                    .map_err(kind)?;
                self.handles.push(f);
                Ok(Out::Unit)
            }
            Op::Write { h, offset, len, seed } => {
                let Some(f) = self.handle(h) else {
                    return Ok(Out::NoHandle);
                };
                let data: Vec<u8> = (0..len).map(|i| seed.wrapping_add(i as u8) | 1).collect();
                f.write_at(&data, offset).await.map(Out::Count).map_err(kind)
            }
            Op::Read { h, offset, len } => {
                let Some(f) = self.handle(h) else {
                    return Ok(Out::NoHandle);
                };
                let mut buf = vec![0xEEu8; len];
                let n = f.read_at(&mut buf, offset).await.map_err(kind)?;
                buf.truncate(n);
                Ok(Out::Bytes(buf))
            }
            Op::SetLen { h, len } => {
                let Some(f) = self.handle(h) else {
                    return Ok(Out::NoHandle);
                };
                f.set_len(len).await.map(|()| Out::Unit).map_err(kind)
            }
            Op::Allocate { h, len } => {
                let Some(f) = self.handle(h) else {
                    return Ok(Out::NoHandle);
                };
                f.allocate(len).await.map(|()| Out::Unit).map_err(kind)
            }
            Op::Len { h } => {
                let Some(f) = self.handle(h) else {
                    return Ok(Out::NoHandle);
                };
                f.len().await.map(Out::Len).map_err(kind)
            }
            Op::SyncData { h } => {
                let Some(f) = self.handle(h) else {
                    return Ok(Out::NoHandle);
                };
                f.sync_data().await.map(|()| Out::Unit).map_err(kind)
            }
            Op::SyncAll { h } => {
                let Some(f) = self.handle(h) else {
                    return Ok(Out::NoHandle);
                };
                f.sync_all().await.map(|()| Out::Unit).map_err(kind)
            }
            Op::Drop { h } => {
                if self.handles.is_empty() {
                    return Ok(Out::NoHandle);
                }
                let i = h % self.handles.len();
                drop(self.handles.remove(i));
                Ok(Out::Unit)
            }
            Op::Rename { from, to } => self
                .fs
                .rename(&self.path(self.names.files[from]), &self.path(self.names.files[to]))
                .await
                .map(|()| Out::Unit)
                .map_err(kind),
            Op::Remove { file } => self
                .fs
                .remove_file(&self.path(self.names.files[file]))
                .await
                .map(|()| Out::Unit)
                .map_err(kind),
            Op::CreateDirAll { dir } => self
                .fs
                .create_dir_all(&self.path(self.names.dirs[dir]))
                .await
                .map(|()| Out::Unit)
                .map_err(kind),
            Op::ReadDir { dir } => self
                .fs
                .read_dir(&self.path(self.names.dirs[dir]))
                .await
                .map(Out::List)
                .map_err(kind),
            Op::SyncDir { dir } => self
                .fs
                .sync_dir(&self.path(self.names.dirs[dir]))
                .await
                .map(|()| Out::Unit)
                .map_err(kind),
            Op::Metadata { path } => self
                .fs
                .metadata(&self.any_path(path))
                .await
                .map(Out::Meta)
                .map_err(kind),
            Op::Exists { path } => self.fs.exists(&self.any_path(path)).await.map(Out::Bool).map_err(kind),
            Op::LockDir { dir } => {
                let l = self.fs.lock_dir(&self.path(self.names.dirs[dir])).await.map_err(kind)?;
                self.locks.push(l);
                Ok(Out::Unit)
            }
            Op::Unlock { l } => {
                if self.locks.is_empty() {
                    return Ok(Out::NoHandle);
                }
                let i = l % self.locks.len();
                drop(self.locks.remove(i));
                Ok(Out::Unit)
            }
            Op::ProcessCrash => {
                (self.on_crash)(&self.fs);
                self.handles.clear();
                self.locks.clear();
                Ok(Out::Unit)
            }
        }
    }

    /// Every directory and file under the root with its content, via the trait.
    async fn snapshot(&self) -> Vec<(String, Option<Vec<u8>>)> {
        let mut out = Vec::new();
        let mut stack = vec![String::new()];
        while let Some(rel) = stack.pop() {
            let entries = self.fs.read_dir(&self.path(&rel)).await.unwrap();
            for e in entries {
                let child = if rel.is_empty() {
                    e.name.clone()
                } else {
                    format!("{rel}/{}", e.name)
                };
                if e.is_dir {
                    out.push((child.clone(), None));
                    stack.push(child);
                } else {
                    let f = self
                        .fs
                        .open(&self.path(&child), OpenOptions::new().read(true))
                        .await
                        .unwrap();
                    let mut buf = vec![0u8; usize::try_from(f.len().await.unwrap()).unwrap()];
                    f.read_exact_at(&mut buf, 0).await.unwrap();
                    out.push((child, Some(buf)));
                }
            }
        }
        out.sort();
        out
    }
}

fn short(r: &Res) -> String {
    match r {
        Ok(Out::Bytes(b)) => format!("Ok(Bytes[{}])", b.len()),
        other => format!("{other:?}"),
    }
}

/// Known SimFs divergences from Linux, tolerated here so that the rest of the
/// comparison keeps running; each has a strict `#[ignore]`d test below.
///
/// * `rename(from, to)` where `to` is a directory that is an ancestor of
///   `from`: Linux checks this first and fails with ENOTEMPTY
///   (`DirectoryNotEmpty`); SimFs reports EISDIR (`IsADirectory`).
fn known_divergence(_names: Names, _op: &Op, _a: &Res, _b: &Res) -> bool {
    // None left: rename onto an ancestor (ENOTEMPTY) was the last one.
    false
}

/// Applies `ops` to both sides, comparing every result, then the final trees.
async fn compare<A: Fs, B: Fs>(mut a: Side<A>, mut b: Side<B>, ops: &[Op]) -> Result<(), TestCaseError> {
    for (i, op) in ops.iter().enumerate() {
        let ra = a.apply(op).await;
        let rb = b.apply(op).await;
        if known_divergence(a.names, op, &ra, &rb) {
            continue;
        }
        prop_assert_eq!(
            &ra,
            &rb,
            "op #{} {:?}: first gave {}, second (OsFs) gave {}",
            i,
            op,
            short(&ra),
            short(&rb)
        );
        prop_assert_eq!(a.handles.len(), b.handles.len());
        prop_assert_eq!(a.locks.len(), b.locks.len());
    }
    let (sa, sb) = (a.snapshot().await, b.snapshot().await);
    prop_assert_eq!(sa, sb, "final trees differ");
    Ok(())
}

fn os_side(fs: OsFs, dir: &tempfile::TempDir, names: Names) -> Side<OsFs> {
    // A real process crash cannot be simulated in-process; dropping every
    // handle and lock is what the kernel does, and the page cache stays.
    Side::new(fs, dir.path().to_path_buf(), names, |_| {})
}

/// SimFs (seed `seed`, no faults) against OsFs in a fresh temporary directory.
fn run(seed: u64, names: Names, ops: &[Op]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let sim = Side::new(SimFs::new(seed), PathBuf::from("/"), names, |fs: &SimFs| {
        fs.crash(CrashKind::Process)
    });
    block_on(compare(sim, os_side(OsFs::new(), &dir, names), ops))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Files and directories with distinct names.
    #[test]
    fn simfs_matches_osfs(
        seed in any::<u64>(),
        ops in proptest::collection::vec(op(SEPARATE), 1..40),
    ) {
        run(seed, SEPARATE, &ops)?;
    }

    /// The same names used for files and directories.
    #[test]
    fn simfs_matches_osfs_colliding_names(
        seed in any::<u64>(),
        ops in proptest::collection::vec(op(COLLIDING), 1..40),
    ) {
        run(seed, COLLIDING, &ops)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// Checks the harness itself: two real filesystems in two directories
    /// (one syncing on the I/O thread, one inline) always agree.
    #[test]
    fn harness_osfs_matches_itself(ops in proptest::collection::vec(op(SEPARATE), 1..40)) {
        harness(SEPARATE, &ops)?;
    }

    /// The harness self-check with colliding names.
    #[test]
    fn harness_osfs_matches_itself_colliding(
        ops in proptest::collection::vec(op(COLLIDING), 1..40),
    ) {
        harness(COLLIDING, &ops)?;
    }
}

fn harness(names: Names, ops: &[Op]) -> Result<(), TestCaseError> {
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    block_on(compare(
        os_side(OsFs::inline(), &d1, names),
        os_side(OsFs::new(), &d2, names),
        ops,
    ))
}

/// Opens and `sync_all`s every file of the live tree, then syncs every
/// directory, deepest first.
async fn sync_everything<F: Fs>(side: &Side<F>) {
    let tree = side.snapshot().await;
    let mut dirs = vec![String::new()];
    for (rel, content) in &tree {
        if content.is_some() {
            let f = side
                .fs
                .open(&side.path(rel), OpenOptions::new().read(true))
                .await
                .unwrap();
            f.sync_all().await.unwrap();
        } else {
            dirs.push(rel.clone());
        }
    }
    dirs.sort_by_key(|d| std::cmp::Reverse(d.matches('/').count() + usize::from(!d.is_empty())));
    for d in dirs {
        side.fs.sync_dir(&side.path(&d)).await.unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Without faults, after syncing every file and every directory, a power
    /// loss changes nothing: the whole tree is durable.
    #[test]
    fn full_sync_makes_everything_durable(
        seed in any::<u64>(),
        colliding in any::<bool>(),
        ops in proptest::collection::vec(op(SEPARATE), 1..40),
    ) {
        // Both name tables have files at 0..5 and dirs at 0..3, which is all
        // `op(SEPARATE)` may index besides file 5 / path 8.
        let names = if colliding { COLLIDING } else { SEPARATE };
        let ops: Vec<Op> = ops
            .into_iter()
            .filter(|op| names.files.len() > 5 || !op_uses_last_file(op))
            .collect();
        let fs = SimFs::new(seed);
        let mut side = Side::new(fs.clone(), PathBuf::from("/"), names, |fs: &SimFs| {
            fs.crash(CrashKind::Process)
        });
        block_on(async {
            for op in &ops {
                let _ = side.apply(op).await;
            }
            sync_everything(&side).await;
            let before = side.snapshot().await;
            fs.crash(CrashKind::PowerLoss);
            side.handles.clear();
            side.locks.clear();
            let after = side.snapshot().await;
            prop_assert_eq!(before, after);
            Ok(())
        })?;
    }
}

/// Whether `op` refers to file index 5 or path index 8 (absent from
/// `COLLIDING`).
fn op_uses_last_file(op: &Op) -> bool {
    match *op {
        Op::Open { file, .. } | Op::Remove { file } => file >= 5,
        Op::Rename { from, to } => from >= 5 || to >= 5,
        Op::Metadata { path } | Op::Exists { path } => path >= 8,
        _ => false,
    }
}

/// A fixed sequence touching every operation, so a regression shows up
/// without relying on the random generator.
#[test]
fn fixed_sequence_matches() {
    let rw = OpenOptions::new().read(true).write(true).create(true);
    let ops = vec![
        Op::Open { file: 3, opts: rw },
        Op::CreateDirAll { dir: 2 },
        Op::Open { file: 3, opts: rw },
        Op::Open { file: 5, opts: rw },
        Op::Write {
            h: 0,
            offset: 4090,
            len: 20,
            seed: 1,
        },
        Op::Write {
            h: 0,
            offset: 0,
            len: 0,
            seed: 1,
        },
        Op::Write {
            h: 0,
            offset: 9000,
            len: 0,
            seed: 1,
        },
        Op::Read {
            h: 0,
            offset: 4000,
            len: 200,
        },
        Op::Read {
            h: 0,
            offset: 5000,
            len: 10,
        },
        Op::Len { h: 0 },
        Op::SetLen { h: 0, len: 4095 },
        Op::Allocate { h: 0, len: 100 },
        Op::Allocate { h: 0, len: 8192 },
        Op::SyncData { h: 0 },
        Op::SyncAll { h: 1 },
        Op::Rename { from: 3, to: 0 },
        Op::Rename { from: 0, to: 0 },
        Op::Rename { from: 3, to: 0 },
        Op::Write {
            h: 0,
            offset: 1,
            len: 3,
            seed: 9,
        },
        Op::Remove { file: 0 },
        Op::Read {
            h: 0,
            offset: 0,
            len: 10,
        },
        Op::Remove { file: 0 },
        Op::ReadDir { dir: 0 },
        Op::ReadDir { dir: 1 },
        Op::ReadDir { dir: 2 },
        Op::SyncDir { dir: 1 },
        Op::Metadata { path: 1 },
        Op::Metadata { path: 3 },
        Op::Metadata { path: 8 },
        Op::Exists { path: 8 },
        Op::Open {
            file: 1,
            opts: OpenOptions::new().read(true),
        },
        Op::Open {
            file: 5,
            opts: OpenOptions::new().write(true).create_new(true),
        },
        Op::Open {
            file: 2,
            opts: OpenOptions::new().create(true),
        },
        Op::Open {
            file: 2,
            opts: OpenOptions::new(),
        },
        Op::Drop { h: 1 },
        Op::Len { h: 1 },
        Op::LockDir { dir: 1 },
        Op::LockDir { dir: 1 },
        Op::LockDir { dir: 0 },
        Op::Unlock { l: 0 },
        Op::LockDir { dir: 1 },
        Op::ProcessCrash,
        Op::Len { h: 0 },
        Op::LockDir { dir: 1 },
        Op::LockDir { dir: 0 },
    ];
    run(7, SEPARATE, &ops).unwrap();
}

/// Fixed sequence over colliding names: every "wrong kind of entry" error.
#[test]
fn fixed_colliding_sequence_matches() {
    let rw = OpenOptions::new().read(true).write(true).create(true);
    // dirs: "", "x", "y", "x/y"; files: "x", "y", "x/y", "x/x", "y/x".
    let ops = vec![
        Op::CreateDirAll { dir: 1 },    // mkdir x
        Op::Open { file: 0, opts: rw }, // open dir x for writing
        Op::Open {
            file: 0,
            opts: OpenOptions::new().read(true),
        }, // open dir x read-only
        Op::Open { file: 1, opts: rw }, // file y
        Op::CreateDirAll { dir: 2 },    // mkdir y over file y
        Op::CreateDirAll { dir: 3 },    // x/y
        Op::Open { file: 4, opts: rw }, // y/x under file y
        Op::ReadDir { dir: 2 },         // read_dir of file y
        Op::SyncDir { dir: 2 },         // sync_dir of file y
        Op::LockDir { dir: 2 },         // lock_dir of file y
        Op::Metadata { path: 8 },       // y/x
        Op::Rename { from: 1, to: 0 },  // file y over dir x
        Op::Rename { from: 1, to: 2 },  // file y over dir x/y
        Op::Open { file: 3, opts: rw }, // file x/x
        Op::Rename { from: 3, to: 1 },  // x/x -> y (replace file)
        Op::Remove { file: 0 },         // remove_file of dir x
        Op::Remove { file: 2 },         // remove_file of dir x/y
        Op::Rename { from: 0, to: 1 },  // dir x onto file y
        Op::ReadDir { dir: 0 },
        Op::ReadDir { dir: 1 },
    ];
    run(11, COLLIDING, &ops).unwrap();
}

/// Strict version of the first known divergence: renaming a file onto the
/// directory that contains it. Linux: ENOTEMPTY.
#[test]
fn rename_onto_ancestor_matches_linux() {
    let rw = OpenOptions::new().read(true).write(true).create(true);
    let ops = vec![
        Op::CreateDirAll { dir: 1 },    // mkdir x
        Op::Open { file: 3, opts: rw }, // file x/x
        Op::Rename { from: 3, to: 0 },  // x/x -> x
    ];
    let dir = tempfile::tempdir().unwrap();
    let names = COLLIDING;
    let sim = Side::new(SimFs::new(1), PathBuf::from("/"), names, |_| {});
    let os = os_side(OsFs::new(), &dir, names);
    block_on(async {
        let (mut sim, mut os) = (sim, os);
        for op in &ops {
            assert_eq!(sim.apply(op).await, os.apply(op).await, "{op:?}");
        }
    });
}
