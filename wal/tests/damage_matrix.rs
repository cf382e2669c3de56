//! The damage matrix (issue 12 item 8): every kind of damage a log directory
//! can suffer outside the writer's control, opened in each recovery mode, on
//! a real disk (`OsFs`).
//!
//! Fixtures: a log of 2000 records (`rec-{i}`), 150 records per segment
//! (13 sealed segments and an active one), closed cleanly (`clean`), and the
//! same records written by a process that closed once at 1000 records, went
//! on and was dropped without `close` (`crashed`: a meta file without the
//! clean-shutdown marker, preallocated zeros after the active segment's last
//! frame). Durable alignment 8 (no padding frames): each record is a
//! 40-byte frame, so reading every record of every cell stays quick in a
//! debug build (with 512, point reads alone took 1.3 s a cell).
//!
//! For every damage x fixture x mode the directory is snapshotted (every
//! name and byte) after the damage, opened, and judged:
//!
//! - `Err(e)`: the directory is byte for byte unchanged, `e` is a typed error
//!   (`Corruption`, `ForeignLog`, `MissingRecords`, `Io`, `Locked`) and its
//!   path names the damaged file (or, where the damage removed a file, the
//!   hole: a neighbour or the directory).
//! - `Ok(wal)`: every record the damage did not destroy reads back exactly
//!   (point reads and iteration); a destroyed record reads back exactly or
//!   fails with a typed error; every acknowledged record outside
//!   `first_index..next_index` is in `RecoveryReport::lost`, or is one the
//!   damage destroyed in a way no reader can tell from a torn write (then a
//!   reported cut is enough); no file is removed without being reported,
//!   none but the meta file and the active segment changes, and
//!   `AbsoluteConsistency` removes or cuts nothing it cannot prove was never
//!   acknowledged (only `*.wal.tmp` files and preallocated zeros).
//! - Some damages must fail the open in every mode: a second opener
//!   (`Locked`), a segment renamed to cover older ones, a meta file or a
//!   segment of another log.
//!
//! Cells the current engine fails are listed in `KNOWN_GAPS` with a reason:
//! the test passes but prints them. A listed cell that starts passing fails
//! the test, so the list stays true.
#![allow(clippy::unwrap_used)]

mod read_only_disk;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Instant;

use futures::executor::block_on;
use read_only_disk::ReadOnlyDisk;
use simfs::OsFs;
use wal::{Error, Options, RecoveryMode, RecoveryReport, SyncPolicy, Wal};

/// Records in each fixture.
const RECORDS: u64 = 2000;
/// Records per segment (rotation by count).
const PER_SEGMENT: u64 = 150;
const SEGMENT_HEADER_BYTES: usize = 64;
const FRAME_HEADER_BYTES: usize = 32;
const PADDING_KIND: u8 = 4;
const MODES: [RecoveryMode; 3] = [
    RecoveryMode::TolerateTornTail,
    RecoveryMode::PointInTime,
    RecoveryMode::AbsoluteConsistency,
];

/// Cells the current engine fails: (fixture, damage, mode; `None` = every
/// fixture or mode), and why.
const KNOWN_GAPS: &[(Option<Fixture>, &str, Option<RecoveryMode>, &str)] = &[
    (
        None,
        "sealed: byte flipped (middle)",
        None,
        "a sealed segment's verdict stops at its first damage (FORMAT.md §9): the records before \
         the bad frame read, the intact ones after it in the same segment are refused too",
    ),
    (
        Some(Fixture::Clean),
        "active: byte flipped (middle)",
        None,
        "the clean-shutdown marker skips the scan, so every mode opens Ok (AbsoluteConsistency too); \
         then the intact records after the bad frame are refused with it",
    ),
    (
        Some(Fixture::Crashed),
        "deleted: active segment",
        None,
        "after an unclean shutdown nothing durable promises the active segment's records (no clean \
         marker): deleting it loses them silently in every mode, AbsoluteConsistency included",
    ),
];

fn opts(mode: RecoveryMode) -> Options {
    Options::default()
        .segment_max_records(PER_SEGMENT)
        .durable_alignment_bytes(8)
        .preallocate_bytes(8192)
        .recovery_mode(mode)
}

fn payload(i: u64) -> Vec<u8> {
    format!("rec-{i}").into_bytes()
}

fn mode_name(m: RecoveryMode) -> &'static str {
    match m {
        RecoveryMode::TolerateTornTail => "TolerateTornTail",
        RecoveryMode::PointInTime => "PointInTime",
        RecoveryMode::AbsoluteConsistency => "AbsoluteConsistency",
        _ => "a mode this matrix does not know",
    }
}

// ---------------------------------------------------------------------------
// Snapshots

/// Every entry under a directory: relative path -> contents (`None` for a
/// directory).
type Snapshot = BTreeMap<PathBuf, Option<Vec<u8>>>;

fn snapshot(dir: &Path) -> Snapshot {
    fn walk(root: &Path, dir: &Path, out: &mut Snapshot) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            if entry.file_type().unwrap().is_dir() {
                out.insert(rel, None);
                walk(root, &path, out);
            } else {
                out.insert(rel, Some(std::fs::read(&path).unwrap()));
            }
        }
    }
    let mut out = Snapshot::new();
    walk(dir, dir, &mut out);
    out
}

fn restore(snap: &Snapshot, dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for (rel, contents) in snap {
        match contents {
            None => std::fs::create_dir_all(dir.join(rel)).unwrap(),
            Some(bytes) => std::fs::write(dir.join(rel), bytes).unwrap(),
        }
    }
}

/// What differs between two snapshots, briefly.
fn diff(before: &Snapshot, after: &Snapshot) -> String {
    let mut out = Vec::new();
    for (k, v) in before {
        match after.get(k) {
            None => out.push(format!("removed {}", k.display())),
            Some(w) if w != v => out.push(format!("changed {}", k.display())),
            Some(_) => {}
        }
    }
    for k in after.keys().filter(|k| !before.contains_key(*k)) {
        out.push(format!("created {}", k.display()));
    }
    out.join(", ")
}

// ---------------------------------------------------------------------------
// The layout of a log directory

#[derive(Clone, Debug)]
struct Seg {
    name: String,
    first: u64,
    /// One past the last record (for the active segment: of the fixture).
    end: u64,
    id: u64,
}

fn sealed_name(first: u64, last: u64, id: u64) -> String {
    format!("{first:020}-{last:020}-{id:016x}.wal")
}

struct Layout {
    sealed: Vec<Seg>,
    active: Seg,
}

impl Layout {
    fn of(dir: &Path) -> Layout {
        let mut sealed = Vec::new();
        let mut active = None;
        for entry in std::fs::read_dir(dir).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            let Some(stem) = name.strip_suffix(".wal") else {
                continue;
            };
            let parts: Vec<&str> = stem.split('-').collect();
            let first: u64 = parts[0].parse().unwrap();
            let id = u64::from_str_radix(parts[2], 16).unwrap();
            if parts[1] == "active" {
                active = Some(Seg {
                    name: name.clone(),
                    first,
                    end: RECORDS,
                    id,
                });
            } else {
                let last: u64 = parts[1].parse().unwrap();
                sealed.push(Seg {
                    name: name.clone(),
                    first,
                    end: last + 1,
                    id,
                });
            }
        }
        sealed.sort_by_key(|s| s.first);
        Layout {
            sealed,
            active: active.unwrap(),
        }
    }

    fn mid(&self) -> usize {
        self.sealed.len() / 2
    }
}

/// Offset and length of the frame of record `index` in a segment file
/// (FORMAT.md §6: 32-byte header, `len` at 4, `index` at 8, `kind` at 24).
fn frame_of(bytes: &[u8], index: u64) -> (usize, usize) {
    let mut at = SEGMENT_HEADER_BYTES;
    while at + FRAME_HEADER_BYTES <= bytes.len() {
        let h = &bytes[at..at + FRAME_HEADER_BYTES];
        assert!(
            h.iter().any(|&b| b != 0),
            "record {index} not found before the zero tail"
        );
        let len = u32::from_le_bytes(h[4..8].try_into().unwrap()) as usize;
        let i = u64::from_le_bytes(h[8..16].try_into().unwrap());
        let frame_len = (FRAME_HEADER_BYTES + len).div_ceil(8) * 8;
        if h[24] != PADDING_KIND && i == index {
            return (at, frame_len);
        }
        at += frame_len;
    }
    panic!("record {index} not found");
}

fn flip_byte(path: &Path, offset: usize) {
    let mut b = std::fs::read(path).unwrap();
    b[offset] ^= 0x40;
    std::fs::write(path, b).unwrap();
}

// ---------------------------------------------------------------------------
// Fixtures

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fixture {
    Clean,
    Crashed,
}

struct Fixtures {
    clean: Snapshot,
    crashed: Snapshot,
    /// Another log (payloads `other-{i}`, pruned through 299, closed).
    foreign: Snapshot,
}

fn build_fixtures() -> Fixtures {
    let tmp = tempfile::tempdir().unwrap();
    let mode = RecoveryMode::TolerateTornTail;
    block_on(async {
        let clean = tmp.path().join("clean");
        let wal = Wal::open(OsFs::new(), &clean, opts(mode)).await.unwrap();
        for i in 0..RECORDS {
            assert_eq!(wal.append(payload(i)).await.unwrap(), i);
        }
        wal.close().await.unwrap();

        let crashed = tmp.path().join("crashed");
        let wal = Wal::open(OsFs::new(), &crashed, opts(mode)).await.unwrap();
        for i in 0..RECORDS / 2 {
            assert_eq!(wal.append(payload(i)).await.unwrap(), i);
        }
        wal.close().await.unwrap();
        let wal = Wal::open(OsFs::new(), &crashed, opts(mode)).await.unwrap();
        for i in RECORDS / 2..RECORDS {
            assert_eq!(wal.append(payload(i)).await.unwrap(), i);
        }
        drop(wal);

        let foreign = tmp.path().join("foreign");
        // Its payloads do not matter, only its names and ids: no fsync per append.
        let manual = opts(mode).sync_policy(SyncPolicy::Manual);
        let wal = Wal::open(OsFs::new(), &foreign, manual).await.unwrap();
        for i in 0..RECORDS {
            wal.append(format!("other-{i}").into_bytes()).await.unwrap();
        }
        assert_eq!(wal.prune_through(299).await.unwrap(), 300);
        wal.close().await.unwrap();

        for dir in [&clean, &crashed] {
            let l = Layout::of(dir);
            assert!(l.sealed.len() >= 10, "{} sealed segments", l.sealed.len());
            assert!(l.active.first < RECORDS, "the active segment holds records");
            assert!(dir.join("meta").exists());
        }
        let f = Layout::of(&foreign);
        let c = Layout::of(&clean);
        assert_eq!(f.sealed.last().unwrap().name, c.sealed.last().unwrap().name);
        Fixtures {
            clean: snapshot(&clean),
            crashed: snapshot(&crashed),
            foreign: snapshot(&foreign),
        }
    })
}

// ---------------------------------------------------------------------------
// Damages

/// What a damage did and what it allows.
#[derive(Default)]
struct Effect {
    /// File names an error may name ("." for the log directory itself).
    blame: Vec<String>,
    /// Records the damage destroyed.
    destroyed: Vec<Range<u64>>,
    /// The destroyed records look exactly like a torn write (a crash could
    /// leave these bytes): a reported cut accounts for them.
    torn_like: bool,
    /// The open must fail, in every mode.
    must_fail: Option<MustFail>,
    /// An opener that must stay open while the cell runs.
    holder: Option<Wal<OsFs>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MustFail {
    /// Any typed error.
    Typed,
    Locked,
}

impl Effect {
    fn blame(names: &[&str]) -> Effect {
        Effect {
            blame: names.iter().map(|s| s.to_string()).collect(),
            ..Effect::default()
        }
    }

    fn destroys(mut self, r: Range<u64>) -> Effect {
        self.destroyed.push(r);
        self
    }

    fn must_fail(mut self, m: MustFail) -> Effect {
        self.must_fail = Some(m);
        self
    }

    fn is_destroyed(&self, i: u64) -> bool {
        self.destroyed.iter().any(|r| r.contains(&i))
    }
}

struct Ctx<'a> {
    dir: &'a Path,
    fixture: Fixture,
    layout: Layout,
    foreign: &'a Snapshot,
}

type DamageFn = fn(&Ctx) -> Effect;

fn damages() -> Vec<(&'static str, DamageFn)> {
    vec![
        ("none (baseline)", |_| Effect::default()),
        ("sealed: cut mid-frame", |c| {
            let s = &c.layout.sealed[c.layout.mid()];
            let path = c.dir.join(&s.name);
            let bytes = std::fs::read(&path).unwrap();
            let m = s.first + (s.end - s.first) / 2;
            let (at, _) = frame_of(&bytes, m);
            std::fs::write(&path, &bytes[..at + 20]).unwrap();
            Effect::blame(&[&s.name]).destroys(m..s.end)
        }),
        ("sealed: byte flipped (middle)", |c| {
            let s = &c.layout.sealed[c.layout.mid()];
            let path = c.dir.join(&s.name);
            let m = s.first + (s.end - s.first) / 2;
            let (at, _) = frame_of(&std::fs::read(&path).unwrap(), m);
            flip_byte(&path, at + FRAME_HEADER_BYTES + 1);
            Effect::blame(&[&s.name]).destroys(m..m + 1)
        }),
        ("active: byte flipped (tail)", |c| {
            let a = &c.layout.active;
            let path = c.dir.join(&a.name);
            let m = RECORDS - 1;
            let (at, _) = frame_of(&std::fs::read(&path).unwrap(), m);
            flip_byte(&path, at + FRAME_HEADER_BYTES + 1);
            let mut e = Effect::blame(&[&a.name]).destroys(m..m + 1);
            e.torn_like = c.fixture == Fixture::Crashed;
            e
        }),
        ("active: byte flipped (middle)", |c| {
            let a = &c.layout.active;
            let path = c.dir.join(&a.name);
            let m = a.first + (RECORDS - a.first) / 2;
            let (at, _) = frame_of(&std::fs::read(&path).unwrap(), m);
            flip_byte(&path, at + FRAME_HEADER_BYTES + 1);
            Effect::blame(&[&a.name]).destroys(m..m + 1)
        }),
        ("deleted: first segment", |c| {
            let s = &c.layout.sealed[0];
            std::fs::remove_file(c.dir.join(&s.name)).unwrap();
            Effect::blame(&[".", &s.name, &c.layout.sealed[1].name]).destroys(s.first..s.end)
        }),
        ("deleted: middle segment", |c| {
            let m = c.layout.mid();
            let s = &c.layout.sealed[m];
            std::fs::remove_file(c.dir.join(&s.name)).unwrap();
            let (prev, next) = (&c.layout.sealed[m - 1].name, &c.layout.sealed[m + 1].name);
            Effect::blame(&[".", &s.name, prev, next]).destroys(s.first..s.end)
        }),
        ("deleted: active segment", |c| {
            let a = &c.layout.active;
            std::fs::remove_file(c.dir.join(&a.name)).unwrap();
            let prev = &c.layout.sealed.last().unwrap().name;
            Effect::blame(&[".", &a.name, prev]).destroys(a.first..RECORDS)
        }),
        ("renamed: overlaps its neighbour", |c| {
            let m = c.layout.mid();
            let s = &c.layout.sealed[m];
            let to = sealed_name(s.first, s.end - 1 + 10, s.id);
            std::fs::rename(c.dir.join(&s.name), c.dir.join(&to)).unwrap();
            Effect::blame(&[&to, &c.layout.sealed[m + 1].name])
        }),
        ("renamed: leaves a gap", |c| {
            let m = c.layout.mid();
            let s = &c.layout.sealed[m];
            let to = sealed_name(s.first, s.end - 1 - 10, s.id);
            std::fs::rename(c.dir.join(&s.name), c.dir.join(&to)).unwrap();
            Effect::blame(&[&to, &c.layout.sealed[m + 1].name])
        }),
        ("renamed: duplicates an id", |c| {
            let m = c.layout.mid();
            let s = &c.layout.sealed[m];
            let other = &c.layout.sealed[m + 1];
            let to = sealed_name(s.first, s.end - 1, other.id);
            std::fs::rename(c.dir.join(&s.name), c.dir.join(&to)).unwrap();
            Effect::blame(&[&to, &other.name])
        }),
        ("renamed: newest sealed covers older (A-B-id -> 0-B-id)", |c| {
            let s = c.layout.sealed.last().unwrap();
            let to = sealed_name(0, s.end - 1, s.id);
            std::fs::rename(c.dir.join(&s.name), c.dir.join(&to)).unwrap();
            Effect::blame(&[&to]).must_fail(MustFail::Typed)
        }),
        ("meta: garbage", |c| {
            let bytes: Vec<u8> = (0..64u32).map(|i| (i * 37 + 11) as u8).collect();
            std::fs::write(c.dir.join("meta"), bytes).unwrap();
            Effect::blame(&["meta"])
        }),
        ("meta: short (truncated to 40 bytes)", |c| {
            let path = c.dir.join("meta");
            let bytes = std::fs::read(&path).unwrap();
            std::fs::write(&path, &bytes[..40]).unwrap();
            Effect::blame(&["meta"])
        }),
        ("meta: from another log (low-water 300)", |c| {
            let meta = c.foreign[Path::new("meta")].clone().unwrap();
            std::fs::write(c.dir.join("meta"), meta).unwrap();
            Effect::blame(&["meta"]).must_fail(MustFail::Typed)
        }),
        ("sealed: newest replaced by another log's", |c| {
            let s = c.layout.sealed.last().unwrap();
            let bytes = c.foreign[Path::new(&s.name)].clone().unwrap();
            std::fs::write(c.dir.join(&s.name), bytes).unwrap();
            Effect::blame(&[&s.name])
                .destroys(s.first..s.end)
                .must_fail(MustFail::Typed)
        }),
        ("sealed: zero length", |c| {
            let s = &c.layout.sealed[c.layout.mid()];
            std::fs::write(c.dir.join(&s.name), b"").unwrap();
            Effect::blame(&[&s.name]).destroys(s.first..s.end)
        }),
        ("active: zero length", |c| {
            let a = &c.layout.active;
            std::fs::write(c.dir.join(&a.name), b"").unwrap();
            let mut e = Effect::blame(&[&a.name]).destroys(a.first..RECORDS);
            e.torn_like = c.fixture == Fixture::Crashed;
            e
        }),
        ("unrelated: notes.txt and a subdir", |c| {
            std::fs::write(c.dir.join("notes.txt"), b"my notes\n").unwrap();
            std::fs::create_dir(c.dir.join("subdir")).unwrap();
            std::fs::write(c.dir.join("subdir").join("inner.wal"), b"not a segment").unwrap();
            Effect::blame(&["notes.txt", "subdir"])
        }),
        ("stray: foo.wal", |c| {
            std::fs::write(c.dir.join("foo.wal"), b"hello").unwrap();
            Effect::blame(&["foo.wal"])
        }),
        ("stray: x.wal.tmp", |c| {
            std::fs::write(c.dir.join("x.wal.tmp"), b"temp").unwrap();
            Effect::blame(&["x.wal.tmp"])
        }),
        ("second opener while the first is open", |c| {
            let first = block_on(Wal::open(OsFs::new(), c.dir, opts(RecoveryMode::TolerateTornTail))).unwrap();
            let mut e = Effect::blame(&["."]).must_fail(MustFail::Locked);
            e.holder = Some(first);
            e
        }),
    ]
}

// ---------------------------------------------------------------------------
// Judging one cell

/// The path a typed error names; `None` for an untyped error.
fn error_path(e: &Error) -> Option<&Path> {
    match e {
        Error::Io { path, .. }
        | Error::Locked { path }
        | Error::ForeignLog { path, .. }
        | Error::MissingRecords { path, .. } => Some(path),
        Error::Corruption { segment, .. } => Some(segment),
        _ => None,
    }
}

/// Whether `path` is one of the blamed names in `dir`.
fn names_blamed(dir: &Path, path: &Path, blame: &[String]) -> bool {
    if path == dir {
        return blame.iter().any(|b| b == ".");
    }
    path.parent() == Some(dir)
        && path
            .file_name()
            .is_some_and(|n| blame.iter().any(|b| b.as_str() == n.to_string_lossy()))
}

fn short_error(e: &Error) -> String {
    let kind = match e {
        Error::Io { .. } => "Io",
        Error::Locked { .. } => "Locked",
        Error::Corruption { .. } => "Corruption",
        Error::ForeignLog { .. } => "ForeignLog",
        Error::MissingRecords { .. } => "MissingRecords",
        _ => "other",
    };
    let file = error_path(e)
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("Err({kind} {file})")
}

fn ranges(v: &[u64]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        let _ = write!(out, "{}{}..{}", if out.is_empty() { "" } else { "," }, v[i], v[j] + 1);
        i = j + 1;
    }
    out
}

/// A fresh copy of `fixture` in a temporary directory (dropped with it).
fn fixture_dir(fx: &Fixtures, fixture: Fixture) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    restore(
        match fixture {
            Fixture::Clean => &fx.clean,
            Fixture::Crashed => &fx.crashed,
        },
        &dir,
    );
    (tmp, dir)
}

struct Cell {
    outcome: String,
    failures: Vec<String>,
}

fn run_cell(fx: &Fixtures, fixture: Fixture, damage: DamageFn, mode: RecoveryMode) -> Cell {
    let (_tmp, dir) = fixture_dir(fx, fixture);
    let layout = Layout::of(&dir);
    let active_name = layout.active.name.clone();
    let effect = damage(&Ctx {
        dir: &dir,
        fixture,
        layout,
        foreign: &fx.foreign,
    });
    let before = snapshot(&dir);
    let mut failures = Vec::new();
    let read_only = read_only_open(&dir, mode, &before, &mut failures);
    let opened = block_on(Wal::open(OsFs::new(), &dir, opts(mode)));
    match (&read_only, &opened) {
        (Err(a), Err(b)) if std::mem::discriminant(a) != std::mem::discriminant(b) => {
            failures.push(format!("read-only open failed with {a}, the writable one with {b}"))
        }
        (Err(a), Ok(_)) => failures.push(format!("read-only open failed ({a}), the writable one did not")),
        (Ok(_), Err(b)) => failures.push(format!("read-only open succeeded, the writable one failed ({b})")),
        (Ok((plan, served)), Ok(wal)) => {
            let mut done = wal.recovery_report().clone();
            done.read_only = true;
            if *plan != done {
                failures.push(format!(
                    "read-only plan {plan:?} is not what the writable open did: {done:?}"
                ));
            }
            if *served != block_on(serve(wal)) {
                failures.push("read-only open serves other records than the writable one".to_string());
            }
        }
        _ => {}
    }
    let outcome = match opened {
        Err(e) => {
            let after = snapshot(&dir);
            if after != before {
                failures.push(format!("failed open changed the directory: {}", diff(&before, &after)));
            }
            match error_path(&e) {
                None => failures.push(format!("untyped error: {e}")),
                Some(p) if !names_blamed(&dir, p, &effect.blame) => {
                    failures.push(format!("error does not name the damaged file: {e}"))
                }
                Some(_) => {}
            }
            if effect.must_fail == Some(MustFail::Locked) && !matches!(e, Error::Locked { .. }) {
                failures.push(format!("expected Locked, got {e}"));
            }
            format!("{} {e}", short_error(&e))
        }
        Ok(wal) => {
            if let Some(m) = effect.must_fail {
                failures.push(format!("opened Ok, must fail ({m:?})"));
            }
            let r = wal.recovery_report().clone();
            block_on(judge_open(&wal, &effect, mode, &r, &dir, &mut failures));
            let after = snapshot(&dir);
            judge_files(&before, &after, &r, mode, &active_name, &mut failures);
            let lost: Vec<String> = r.lost.iter().map(|l| format!("{}..{}", l.first, l.end)).collect();
            let outcome = format!(
                "Ok {}..{} lost=[{}] torn_cut={} zero_cut={} removed={:?}{}",
                wal.first_index(),
                wal.next_index(),
                lost.join(","),
                r.torn_bytes_cut,
                r.zero_bytes_cut,
                r.removed_files,
                r.stop_reason.map(|s| format!(" stop={s:?}")).unwrap_or_default()
            );
            drop(wal);
            outcome
        }
    };
    drop(effect.holder);
    Cell { outcome, failures }
}

/// Opens the damaged directory read-only through a disk that refuses
/// every change: the open must change nothing and try to change nothing.
/// Returns its report and what it serves, for the comparison with the
/// writable open that follows.
fn read_only_open(
    dir: &Path,
    mode: RecoveryMode,
    before: &Snapshot,
    failures: &mut Vec<String>,
) -> Result<(RecoveryReport, Vec<String>), Error> {
    let disk = ReadOnlyDisk::new(OsFs::new());
    let o = opts(mode).read_only(true);
    let opened = block_on(Wal::open(disk.clone(), dir, o));
    let result = match opened {
        Ok(wal) => {
            let served = block_on(serve(&wal));
            if !matches!(block_on(wal.append(b"x".to_vec())), Err(Error::ReadOnly { .. })) {
                failures.push("a read-only append did not return ReadOnly".to_string());
            }
            let r = wal.recovery_report().clone();
            block_on(wal.close()).unwrap();
            Ok((r, served))
        }
        Err(e) => Err(e),
    };
    if !disk.refused().is_empty() {
        failures.push(format!("read-only open tried to change the disk: {:?}", disk.refused()));
    }
    let after = snapshot(dir);
    if after != *before {
        failures.push(format!(
            "read-only open changed the directory: {}",
            diff(before, &after)
        ));
    }
    result
}

/// What a log serves: every record an iterator from the first index yields,
/// then where it stops.
async fn serve<F: simfs::Fs>(wal: &Wal<F>) -> Vec<String> {
    let mut out = vec![format!("{}..{}", wal.first_index(), wal.next_index())];
    let mut it = match wal.iter_from(wal.first_index()) {
        Ok(it) => it,
        Err(e) => return vec![short_error(&e)],
    };
    while let Some(r) = it.next().await {
        match r {
            Ok((i, bytes)) => out.push(format!("{i}:{}", String::from_utf8_lossy(&bytes))),
            Err(e) => {
                out.push(short_error(&e));
                break;
            }
        }
    }
    out
}

/// Judges an open that returned `Ok`: records and the report.
async fn judge_open(
    wal: &Wal<OsFs>,
    effect: &Effect,
    mode: RecoveryMode,
    r: &RecoveryReport,
    dir: &Path,
    failures: &mut Vec<String>,
) {
    let (first, next) = (wal.first_index(), wal.next_index());
    if next > RECORDS {
        failures.push(format!(
            "next index {next}: records {RECORDS}..{next} were never written"
        ));
    }
    if mode != RecoveryMode::PointInTime && !r.lost.is_empty() {
        failures.push(format!("lost records reported outside PointInTime: {:?}", r.lost));
    }
    for l in &r.lost {
        if l.first < next && first < l.end {
            failures.push(format!(
                "lost {}..{} overlaps the recovered {first}..{next}",
                l.first, l.end
            ));
        }
    }
    if mode == RecoveryMode::AbsoluteConsistency && r.torn_bytes_cut > 0 {
        failures.push(format!("AbsoluteConsistency cut {} torn bytes", r.torn_bytes_cut));
    }
    // Acknowledged records outside the recovered range.
    let reported_cut = r.torn_bytes_cut > 0 || r.removed_files.iter().any(|f| f.ends_with(".wal"));
    let unaccounted: Vec<u64> = (0..RECORDS)
        .filter(|&i| i < first || i >= next)
        .filter(|&i| !r.lost.iter().any(|l| l.first <= i && i < l.end))
        .filter(|&i| !(effect.torn_like && effect.is_destroyed(i) && reported_cut))
        .collect();
    if !unaccounted.is_empty() {
        let (intact, destroyed): (Vec<u64>, Vec<u64>) = unaccounted.iter().partition(|&&i| !effect.is_destroyed(i));
        if !intact.is_empty() {
            failures.push(format!(
                "intact acknowledged records gone, not in lost: {}",
                ranges(&intact)
            ));
        }
        if !destroyed.is_empty() {
            failures.push(format!(
                "destroyed acknowledged records gone, not in lost: {}",
                ranges(&destroyed)
            ));
        }
    }
    // Point reads.
    let mut unreadable = Vec::new();
    let mut first_err = None;
    for i in first..next.min(RECORDS) {
        match wal.read(i).await {
            Ok(p) if p == payload(i) => {}
            Ok(p) => failures.push(format!("read({i}) returned {:?}", String::from_utf8_lossy(&p))),
            Err(e) if effect.is_destroyed(i) => check_read_error(dir, effect, i, &e, failures),
            Err(e) => {
                unreadable.push(i);
                first_err.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_err {
        failures.push(format!(
            "point reads of intact records fail: {} ({e})",
            ranges(&unreadable)
        ));
    }
    // Iteration: from the first index; past a destroyed record from the
    // next intact one.
    let mut unreadable = Vec::new();
    let mut first_err = None;
    let mut pos = first;
    let skip = |mut p: u64| {
        while effect.is_destroyed(p) {
            p += 1;
        }
        p
    };
    'outer: while pos < next {
        let mut it = match wal.iter_from(pos) {
            Ok(it) => it,
            Err(e) => {
                if effect.is_destroyed(pos) {
                    pos = skip(pos);
                } else {
                    unreadable.push(pos);
                    first_err.get_or_insert(e);
                    pos += 1;
                }
                continue;
            }
        };
        loop {
            match it.next().await {
                None => {
                    if it.position() != next {
                        failures.push(format!("iteration ended at {} before {next}", it.position()));
                    }
                    break 'outer;
                }
                Some(Ok((i, p))) => {
                    if i != pos {
                        failures.push(format!("iteration yielded {i} where {pos} was due"));
                        break 'outer;
                    }
                    if p != payload(i) {
                        failures.push(format!("iteration at {i} yielded {:?}", String::from_utf8_lossy(&p)));
                    }
                    pos = i + 1;
                }
                Some(Err(e)) => {
                    if effect.is_destroyed(pos) {
                        check_read_error(dir, effect, pos, &e, failures);
                        pos = skip(pos);
                    } else {
                        unreadable.push(pos);
                        first_err.get_or_insert(e);
                        pos += 1;
                    }
                    break;
                }
            }
        }
    }
    if let Some(e) = first_err {
        failures.push(format!(
            "iteration fails at intact records: {} ({e})",
            ranges(&unreadable)
        ));
    }
}

fn check_read_error(dir: &Path, effect: &Effect, i: u64, e: &Error, failures: &mut Vec<String>) {
    match error_path(e) {
        Some(p) if names_blamed(dir, p, &effect.blame) => {}
        _ => failures.push(format!(
            "read of destroyed record {i}: error not typed or not naming the file: {e}"
        )),
    }
}

/// Judges what an `Ok` open did to the files.
fn judge_files(
    before: &Snapshot,
    after: &Snapshot,
    r: &RecoveryReport,
    mode: RecoveryMode,
    active: &str,
    failures: &mut Vec<String>,
) {
    for (k, v) in before {
        let name = k.to_string_lossy();
        match after.get(k) {
            None => {
                if !r.removed_files.iter().any(|f| *f == name) {
                    failures.push(format!("removed {name} without reporting it"));
                }
                if mode == RecoveryMode::AbsoluteConsistency && !name.ends_with(".wal.tmp") {
                    failures.push(format!("AbsoluteConsistency removed {name}"));
                }
            }
            Some(w) if w != v && name != "meta" && name != active => failures.push(format!("changed {name}")),
            Some(_) => {}
        }
    }
    for k in after.keys().filter(|k| !before.contains_key(*k)) {
        if k.as_os_str() != "meta" {
            failures.push(format!("created {}", k.display()));
        }
    }
}

// ---------------------------------------------------------------------------

#[test]
fn damage_matrix() {
    let started = Instant::now();
    let fx = build_fixtures();
    let built = started.elapsed();
    let mut table = Vec::new();
    let mut unexpected = Vec::new();
    let mut gaps = 0;
    for fixture in [Fixture::Clean, Fixture::Crashed] {
        for (name, damage) in damages() {
            for mode in MODES {
                let cell = run_cell(&fx, fixture, damage, mode);
                let gap = KNOWN_GAPS
                    .iter()
                    .find(|(f, d, m, _)| f.is_none_or(|f| f == fixture) && *d == name && m.is_none_or(|m| m == mode));
                let label = format!("{fixture:?} | {name} | {}", mode_name(mode));
                let verdict = match (cell.failures.is_empty(), gap) {
                    (true, None) => "pass".to_string(),
                    (false, Some((.., reason))) => {
                        gaps += 1;
                        format!("KNOWN GAP ({reason})")
                    }
                    (false, None) => {
                        unexpected.push(format!("{label}: {}", cell.failures.join("; ")));
                        "FAIL".to_string()
                    }
                    (true, Some(_)) => {
                        unexpected.push(format!("{label}: listed as a known gap but passes"));
                        "FAIL (known gap passes)".to_string()
                    }
                };
                table.push(format!("{label} | {verdict} | {}", cell.outcome));
                for f in &cell.failures {
                    table.push(format!("        - {f}"));
                }
            }
        }
    }
    println!("damage matrix: fixture | damage | mode | verdict | outcome");
    for line in &table {
        println!("{line}");
    }
    println!(
        "{} cells, {gaps} known gaps, {} unexpected; fixtures built in {built:?}, total {:?}",
        table.iter().filter(|l| !l.starts_with(' ')).count(),
        unexpected.len(),
        started.elapsed()
    );
    assert!(unexpected.is_empty(), "unexpected cells:\n{}", unexpected.join("\n"));
}

// ---------------------------------------------------------------------------
// Full verification of every damaged directory (issue 12 item 6)

/// Damages that are not damage: `verify_dir` must find the log intact
/// (notices allowed).
const HARMLESS: &[&str] = &[
    "none (baseline)",
    "unrelated: notes.txt and a subdir",
    "stray: x.wal.tmp",
];

/// Damages no file records evidence of, so verification cannot see them
/// either (the same blind spot as the open's, `KNOWN_GAPS`).
const VERIFY_BLIND: &[(Fixture, &str)] = &[(Fixture::Crashed, "deleted: active segment")];

/// Judges `verify_dir` on one damaged directory: it changes nothing and
/// tries to change nothing; a harmless damage leaves the log intact; any
/// other is reported as a problem naming a blamed file, and each destroyed
/// range meets a reported range (a torn-like one may be a torn-tail
/// notice instead).
fn verify_cell(fx: &Fixtures, fixture: Fixture, name: &str, damage: DamageFn) -> (String, Vec<String>) {
    let (_tmp, dir) = fixture_dir(fx, fixture);
    let effect = damage(&Ctx {
        dir: &dir,
        fixture,
        layout: Layout::of(&dir),
        foreign: &fx.foreign,
    });
    let before = snapshot(&dir);
    let disk = ReadOnlyDisk::new(OsFs::new());
    let result = block_on(wal::verify_dir(&disk, &dir));
    let mut failures = Vec::new();
    if !disk.refused().is_empty() {
        failures.push(format!("verify tried to change the disk: {:?}", disk.refused()));
    }
    let after = snapshot(&dir);
    if after != before {
        failures.push(format!("verify changed the directory: {}", diff(&before, &after)));
    }
    let report = match result {
        Err(e) => {
            if effect.must_fail != Some(MustFail::Locked) || !matches!(e, Error::Locked { .. }) {
                failures.push(format!("verify failed: {e}"));
            }
            drop(effect.holder);
            return (short_error(&e), failures);
        }
        Ok(r) => r,
    };
    drop(effect.holder);
    if effect.must_fail == Some(MustFail::Locked) {
        failures.push("verify ran beside a writable open".to_string());
    }
    let blind = VERIFY_BLIND.contains(&(fixture, name));
    let torn_noticed = report
        .notices
        .iter()
        .any(|n| n.kind == wal::NoticeKind::TornTail && names_blamed(&dir, &n.path, &effect.blame));
    if HARMLESS.contains(&name) || blind {
        if !report.is_intact() {
            failures.push(format!("problems in an intact log: {report}"));
        }
    } else if report.is_intact() && !(effect.torn_like && torn_noticed) {
        failures.push(format!("no problem reported: {report}"));
    } else if !report.is_intact() {
        if !report
            .problems
            .iter()
            .any(|p| names_blamed(&dir, &p.path, &effect.blame))
        {
            failures.push(format!("no problem names the damaged file: {report}"));
        }
        for r in &effect.destroyed {
            let met = report.problems.iter().any(|p| {
                p.indices
                    .as_ref()
                    .is_some_and(|i| i.start < r.end && r.start < i.end.max(i.start + 1))
            });
            let excused = effect.torn_like && torn_noticed;
            if !met && !excused {
                failures.push(format!(
                    "destroyed {}..{} in no reported range: {report}",
                    r.start, r.end
                ));
            }
        }
    }
    if fixture == Fixture::Clean && HARMLESS.contains(&name) && report.records != RECORDS {
        failures.push(format!("{} records verified, the log holds {RECORDS}", report.records));
    }
    let kinds: Vec<String> = report.problems.iter().map(|p| format!("{:?}", p.kind)).collect();
    let notes: Vec<String> = report.notices.iter().map(|n| format!("{:?}", n.kind)).collect();
    (format!("problems={kinds:?} notices={notes:?}"), failures)
}

#[test]
fn verify_dir_reports_every_damage_and_changes_nothing() {
    let fx = build_fixtures();
    let mut unexpected = Vec::new();
    let mut cells = 0;
    for fixture in [Fixture::Clean, Fixture::Crashed] {
        for (name, damage) in damages() {
            let (outcome, failures) = verify_cell(&fx, fixture, name, damage);
            cells += 1;
            let verdict = if failures.is_empty() { "pass" } else { "FAIL" };
            println!("{fixture:?} | {name} | verify | {verdict} | {outcome}");
            for f in &failures {
                println!("        - {f}");
                unexpected.push(format!("{fixture:?} | {name}: {f}"));
            }
        }
    }
    println!("{cells} verify cells, {} unexpected", unexpected.len());
    assert!(unexpected.is_empty(), "unexpected cells:\n{}", unexpected.join("\n"));
}
