//! Full verification (`Wal::verify`, `wal::verify_dir`): every segment read
//! end to end, every problem listed with its file, offset and indices, and
//! nothing changed. The damage matrix (`damage_matrix.rs`) runs `verify_dir`
//! on every damage; these tests cover the open log and several problems at
//! once.
#![allow(clippy::unwrap_used)]

mod read_only_disk;

use std::path::{Path, PathBuf};

use futures::executor::block_on;
use read_only_disk::ReadOnlyDisk;
use simfs::OsFs;
use wal::{Error, Options, ProblemKind, Wal};

const SEGMENT_HEADER_BYTES: usize = 64;
const FRAME_HEADER_BYTES: usize = 32;

fn opts() -> Options {
    Options::default()
        .segment_max_records(100)
        .durable_alignment_bytes(8)
        .preallocate_bytes(8192)
}

/// A log of 550 records (5 sealed segments of 100, an active one of 50).
fn fill(dir: &Path) -> Wal<OsFs> {
    block_on(async {
        let wal = Wal::open(OsFs::new(), dir, opts()).await.unwrap();
        for i in 0..550u64 {
            assert_eq!(wal.append(format!("record-{i}").into_bytes()).await.unwrap(), i);
        }
        wal
    })
}

/// The sealed segment holding `index`.
fn sealed_holding(wal: &Wal<OsFs>, index: u64) -> PathBuf {
    let (name, ..) = wal
        .segment_files()
        .into_iter()
        .find(|(_, first, last, sealed)| *sealed && *first <= index && last.is_some_and(|l| index <= l))
        .unwrap();
    wal.dir().join(name)
}

/// Flips a byte in the payload of the frame of `index` (every frame of
/// these logs is 32 + len("record-N") bytes, rounded up to 8).
fn rot(path: &Path, first: u64, index: u64) {
    let mut b = std::fs::read(path).unwrap();
    let mut at = SEGMENT_HEADER_BYTES;
    for i in first..index {
        at += (FRAME_HEADER_BYTES + format!("record-{i}").len()).div_ceil(8) * 8;
    }
    let i = u64::from_le_bytes(b[at + 8..at + 16].try_into().unwrap());
    assert_eq!(i, index, "frame layout");
    b[at + FRAME_HEADER_BYTES + 2] ^= 0x10;
    std::fs::write(path, b).unwrap();
}

#[test]
fn an_intact_open_log_verifies_every_record() {
    let tmp = tempfile::tempdir().unwrap();
    let wal = fill(tmp.path());
    let r = block_on(wal.verify()).unwrap();
    assert!(r.is_intact(), "{r}");
    assert_eq!((r.segments, r.records), (6, 550), "{r}");
    assert_eq!((r.first_index, r.next_index), (Some(0), Some(550)));
    block_on(wal.close()).unwrap();
    let r = block_on(wal::verify_dir(&OsFs::new(), tmp.path())).unwrap();
    assert!(r.is_intact(), "{r}");
    assert_eq!((r.segments, r.records), (6, 550), "{r}");
}

#[test]
fn bit_rot_while_open_is_reported_where_it_is_and_reads_before_it_still_work() {
    let tmp = tempfile::tempdir().unwrap();
    let wal = fill(tmp.path());
    let path = sealed_holding(&wal, 250);
    rot(&path, 200, 250);
    let r = block_on(wal.verify()).unwrap();
    assert_eq!(r.problems.len(), 1, "{r}");
    let p = &r.problems[0];
    assert_eq!(p.kind, ProblemKind::DamagedRecords, "{r}");
    assert_eq!(p.path, path);
    assert_eq!(p.indices, Some(250..300));
    assert!(p.offset > SEGMENT_HEADER_BYTES as u64, "{p}");
    assert_eq!(r.records, 500, "every record but the segment's from 250");
    // One verdict: reads agree with verify, and the records before the
    // damage in the same segment read.
    assert_eq!(block_on(wal.read(249)).unwrap(), b"record-249");
    let r250 = block_on(wal.read(250));
    assert!(matches!(r250, Err(Error::Corruption { .. })), "{r250:?}");
    assert!(matches!(block_on(wal.read(299)), Err(Error::Corruption { .. })));
    assert_eq!(block_on(wal.read(300)).unwrap(), b"record-300");
    drop(wal);
}

#[test]
fn every_problem_is_listed_not_only_the_first() {
    let tmp = tempfile::tempdir().unwrap();
    let wal = fill(tmp.path());
    let a = sealed_holding(&wal, 50);
    let b = sealed_holding(&wal, 350);
    let gone = sealed_holding(&wal, 150);
    block_on(wal.close()).unwrap();
    rot(&a, 0, 50);
    rot(&b, 300, 350);
    std::fs::remove_file(&gone).unwrap();
    std::fs::write(tmp.path().join("meta"), b"not a meta file").unwrap();
    let disk = ReadOnlyDisk::new(OsFs::new());
    let r = block_on(wal::verify_dir(&disk, tmp.path())).unwrap();
    assert!(disk.refused().is_empty(), "{:?}", disk.refused());
    let found: Vec<(ProblemKind, PathBuf, Option<std::ops::Range<u64>>)> = r
        .problems
        .iter()
        .map(|p| (p.kind, p.path.clone(), p.indices.clone()))
        .collect();
    let sealed_200 = tmp.path().join(sealed_name_of(&wal_names(tmp.path()), 200));
    assert!(
        found.contains(&(ProblemKind::DamagedRecords, a.clone(), Some(50..100))),
        "{r}"
    );
    assert!(
        found.contains(&(ProblemKind::DamagedRecords, b.clone(), Some(350..400))),
        "{r}"
    );
    assert!(found.contains(&(ProblemKind::Gap, sealed_200, Some(100..200))), "{r}");
    assert!(found.iter().any(|f| f.0 == ProblemKind::BadMeta), "{r}");
    assert_eq!(r.problems.len(), 4, "{r}");
}

fn wal_names(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

fn sealed_name_of(names: &[String], first: u64) -> String {
    let prefix = format!("{first:020}-");
    names.iter().find(|n| n.starts_with(&prefix)).unwrap().clone()
}

#[test]
fn a_read_only_open_verifies_and_a_writer_keeps_verify_dir_out() {
    let tmp = tempfile::tempdir().unwrap();
    let wal = fill(tmp.path());
    assert!(matches!(
        block_on(wal::verify_dir(&OsFs::new(), tmp.path())),
        Err(Error::Locked { .. })
    ));
    block_on(wal.close()).unwrap();
    let disk = ReadOnlyDisk::new(OsFs::new());
    let ro = opts().read_only(true);
    let wal = block_on(Wal::open(disk.clone(), tmp.path(), ro)).unwrap();
    let r = block_on(wal.verify()).unwrap();
    assert!(r.is_intact(), "{r}");
    assert_eq!(r.records, 550);
    // Readers share: a directory verify runs beside the read-only open.
    let r = block_on(wal::verify_dir(&disk, tmp.path())).unwrap();
    assert!(r.is_intact(), "{r}");
    block_on(wal.close()).unwrap();
    assert!(disk.refused().is_empty(), "{:?}", disk.refused());
}
