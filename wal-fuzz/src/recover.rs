//! The `recover` target: arbitrary directory contents, then `Wal::open`.

use std::path::{Path, PathBuf};

use arbitrary::{Arbitrary, Unstructured};
use futures::executor::block_on;
use simfs::{File, Fs, OpenOptions, SimFs};
use wal::codec::{encode_frame, encode_padding, padding_len, FrameKind, FrameSeed};
use wal::{Error, Options, RecoveryMode, Wal};

use crate::enc::{Enc, Encode};
use crate::gen::{active_name, header_for, salt_for, sealed_name};

/// Most records read back from a recovered log.
const MAX_READ: u64 = 512;

/// Bytes: a `u16` length (capped at what is left), then that many bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Blob(pub Vec<u8>);

impl<'a> Arbitrary<'a> for Blob {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let len = usize::from(u16::arbitrary(u)?).min(u.len());
        Ok(Blob(u.bytes(len)?.to_vec()))
    }
}

impl Encode for Blob {
    fn encode(&self, e: &mut Enc) {
        (self.0.len() as u16).encode(e);
        e.out.extend_from_slice(&self.0);
    }
}

#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    TolerateTornTail,
    AbsoluteConsistency,
    PointInTime,
}

impl Encode for Mode {
    fn encode(&self, e: &mut Enc) {
        e.tag(*self as u32, 3);
    }
}

impl Mode {
    fn recovery_mode(self) -> RecoveryMode {
        match self {
            Mode::TolerateTornTail => RecoveryMode::TolerateTornTail,
            Mode::AbsoluteConsistency => RecoveryMode::AbsoluteConsistency,
            Mode::PointInTime => RecoveryMode::PointInTime,
        }
    }
}

/// A whole log directory.
#[derive(Arbitrary, Clone, Debug, PartialEq)]
pub(crate) struct RecoverInput {
    pub mode: Mode,
    /// `Options::first_index`.
    pub first_index: u8,
    pub files: Vec<FileSpec>,
}

impl Encode for RecoverInput {
    fn encode(&self, e: &mut Enc) {
        self.mode.encode(e);
        self.first_index.encode(e);
        self.files.encode(e);
    }
}

/// One directory entry.
#[derive(Arbitrary, Clone, Debug, PartialEq)]
pub(crate) struct FileSpec {
    pub name: NameSpec,
    /// A directory with that name instead of a file.
    pub is_dir: bool,
    pub content: Vec<Chunk>,
}

impl Encode for FileSpec {
    fn encode(&self, e: &mut Enc) {
        self.name.encode(e);
        self.is_dir.encode(e);
        self.content.encode(e);
    }
}

#[derive(Arbitrary, Clone, Debug, PartialEq)]
pub(crate) enum NameSpec {
    /// A sealed segment right after the previous one: `first` = the running
    /// next index, `last = first + records`.
    NextSealed {
        records: u8,
        id: u8,
    },
    /// An active segment at the running next index.
    NextActive {
        id: u8,
    },
    Sealed {
        first: u64,
        last: u64,
        id: u64,
    },
    Active {
        first: u64,
        id: u64,
    },
    /// A leftover temporary file.
    Tmp {
        id: u8,
    },
    /// Any name (sanitized: no `/`, not empty, not `.` or `..`).
    Other(Blob),
}

impl Encode for NameSpec {
    fn encode(&self, e: &mut Enc) {
        match self {
            NameSpec::NextSealed { records, id } => {
                e.tag(0, 6);
                records.encode(e);
                id.encode(e);
            }
            NameSpec::NextActive { id } => {
                e.tag(1, 6);
                id.encode(e);
            }
            NameSpec::Sealed { first, last, id } => {
                e.tag(2, 6);
                first.encode(e);
                last.encode(e);
                id.encode(e);
            }
            NameSpec::Active { first, id } => {
                e.tag(3, 6);
                first.encode(e);
                id.encode(e);
            }
            NameSpec::Tmp { id } => {
                e.tag(4, 6);
                id.encode(e);
            }
            NameSpec::Other(b) => {
                e.tag(5, 6);
                b.encode(e);
            }
        }
    }
}

#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KindSpec {
    Record,
    BatchMember,
    BatchEnd,
    Padding,
}

impl Encode for KindSpec {
    fn encode(&self, e: &mut Enc) {
        e.tag(*self as u32, 4);
    }
}

impl KindSpec {
    fn kind(self) -> FrameKind {
        match self {
            KindSpec::Record => FrameKind::Record,
            KindSpec::BatchMember => FrameKind::BatchMember,
            KindSpec::BatchEnd => FrameKind::BatchEnd,
            KindSpec::Padding => FrameKind::Padding,
        }
    }
}

#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IndexSpec {
    /// The running next index.
    Next,
    /// The running next index plus this (a gap).
    Skip(u8),
    /// The running next index minus this (a repeat).
    Back(u8),
    Abs(u64),
}

impl Encode for IndexSpec {
    fn encode(&self, e: &mut Enc) {
        match self {
            IndexSpec::Next => e.tag(0, 4),
            IndexSpec::Skip(n) => {
                e.tag(1, 4);
                n.encode(e);
            }
            IndexSpec::Back(n) => {
                e.tag(2, 4);
                n.encode(e);
            }
            IndexSpec::Abs(n) => {
                e.tag(3, 4);
                n.encode(e);
            }
        }
    }
}

#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DurableSpec {
    /// `durable_next` = the frame's index: everything before it was durable.
    Current,
    /// `durable_next` = 0.
    Zero,
    /// `durable_next` = index - n.
    Lag(u8),
}

impl Encode for DurableSpec {
    fn encode(&self, e: &mut Enc) {
        match self {
            DurableSpec::Current => e.tag(0, 3),
            DurableSpec::Zero => e.tag(1, 3),
            DurableSpec::Lag(n) => {
                e.tag(2, 3);
                n.encode(e);
            }
        }
    }
}

impl DurableSpec {
    fn value(self, index: u64) -> u64 {
        match self {
            DurableSpec::Current => index,
            DurableSpec::Zero => 0,
            DurableSpec::Lag(n) => index.saturating_sub(u64::from(n)),
        }
    }
}

/// A piece of a file's content.
#[derive(Arbitrary, Clone, Debug, PartialEq)]
pub(crate) enum Chunk {
    /// The header the name asks for.
    Header,
    /// Some other (valid) header.
    OtherHeader {
        id: u64,
        first: u64,
    },
    /// `count + 1` valid frames at the running index: records, or one batch.
    Frames {
        count: u8,
        batch: bool,
        len: u8,
    },
    /// One frame with chosen fields, with the file's seed.
    Frame {
        kind: KindSpec,
        index: IndexSpec,
        durable: DurableSpec,
        payload: Blob,
    },
    /// A padding frame up to a multiple of `8 << (align % 10)`.
    Pad {
        align: u8,
    },
    Raw(Blob),
    Zeros(u16),
    /// Flips bit `bit % 8` of the byte at `at % len`.
    Flip {
        at: u16,
        bit: u8,
    },
    /// Cuts `n % (len + 1)` bytes off the end.
    Cut {
        n: u16,
    },
}

impl Encode for Chunk {
    fn encode(&self, e: &mut Enc) {
        const N: u32 = 9;
        match self {
            Chunk::Header => e.tag(0, N),
            Chunk::OtherHeader { id, first } => {
                e.tag(1, N);
                id.encode(e);
                first.encode(e);
            }
            Chunk::Frames { count, batch, len } => {
                e.tag(2, N);
                count.encode(e);
                batch.encode(e);
                len.encode(e);
            }
            Chunk::Frame {
                kind,
                index,
                durable,
                payload,
            } => {
                e.tag(3, N);
                kind.encode(e);
                index.encode(e);
                durable.encode(e);
                payload.encode(e);
            }
            Chunk::Pad { align } => {
                e.tag(4, N);
                align.encode(e);
            }
            Chunk::Raw(b) => {
                e.tag(5, N);
                b.encode(e);
            }
            Chunk::Zeros(n) => {
                e.tag(6, N);
                n.encode(e);
            }
            Chunk::Flip { at, bit } => {
                e.tag(7, N);
                at.encode(e);
                bit.encode(e);
            }
            Chunk::Cut { n } => {
                e.tag(8, N);
                n.encode(e);
            }
        }
    }
}

/// A file to write: its name, whether it is a directory, its bytes.
struct Built {
    name: String,
    is_dir: bool,
    bytes: Vec<u8>,
}

/// Turns the structured input into names and bytes.
fn build(input: &RecoverInput) -> Vec<Built> {
    let mut running = u64::from(input.first_index);
    let mut out = Vec::new();
    for f in &input.files {
        let (name, id, first) = match &f.name {
            NameSpec::NextSealed { records, id } => {
                let first = running;
                let last = first.saturating_add(u64::from(*records));
                running = last.saturating_add(1);
                (sealed_name(first, last, u64::from(*id)), u64::from(*id), first)
            }
            NameSpec::NextActive { id } => (active_name(running, u64::from(*id)), u64::from(*id), running),
            NameSpec::Sealed { first, last, id } => (sealed_name(*first, *last, *id), *id, *first),
            NameSpec::Active { first, id } => (active_name(*first, *id), *id, *first),
            NameSpec::Tmp { id } => (
                format!("{}.tmp", active_name(running, u64::from(*id))),
                u64::from(*id),
                running,
            ),
            NameSpec::Other(b) => {
                let name: String = String::from_utf8_lossy(&b.0)
                    .chars()
                    .filter(|&c| c != '/' && c != '\0')
                    .take(100)
                    .collect();
                if name.is_empty() || name == "." || name == ".." {
                    continue;
                }
                (name, 1, 0)
            }
        };
        let header = header_for(id, first);
        let seed = header.frame_seed();
        let mut bytes = Vec::new();
        let mut next = first;
        for c in &f.content {
            apply(c, &mut bytes, seed, &mut next, id, first);
            if bytes.len() > 1 << 20 {
                break;
            }
        }
        out.push(Built {
            name,
            is_dir: f.is_dir,
            bytes,
        });
    }
    out
}

fn apply(c: &Chunk, bytes: &mut Vec<u8>, seed: FrameSeed, next: &mut u64, id: u64, first: u64) {
    match c {
        Chunk::Header => bytes.extend_from_slice(&header_for(id, first).encode()),
        Chunk::OtherHeader { id, first } => {
            let h = wal::codec::SegmentHeader {
                segment_id: *id,
                first_index: *first,
                salt: salt_for(*id, *first),
                log_id: crate::gen::LOG_ID,
            };
            bytes.extend_from_slice(&h.encode());
        }
        Chunk::Frames { count, batch, len } => {
            let dn = *next;
            let n = usize::from(*count % 32) + 1;
            for k in 0..n {
                let kind = match (*batch, k + 1 == n) {
                    (false, _) => FrameKind::Record,
                    (true, false) => FrameKind::BatchMember,
                    (true, true) => FrameKind::BatchEnd,
                };
                let payload = vec![(*next % 251) as u8; usize::from(*len)];
                encode_frame(bytes, seed, kind, *next, dn, &payload);
                *next = next.saturating_add(1);
            }
        }
        Chunk::Frame {
            kind,
            index,
            durable,
            payload,
        } => {
            let i = match index {
                IndexSpec::Next => *next,
                IndexSpec::Skip(n) => next.saturating_add(u64::from(*n)),
                IndexSpec::Back(n) => next.saturating_sub(u64::from(*n)),
                IndexSpec::Abs(n) => *n,
            };
            encode_frame(bytes, seed, kind.kind(), i, durable.value(i), &payload.0);
            if *kind != KindSpec::Padding {
                *next = i.saturating_add(1);
            }
        }
        Chunk::Pad { align } => {
            let align = 8u64 << (align % 10);
            // Padding frames are whole 8-byte units: only from an aligned end.
            if bytes.len() % wal::codec::FRAME_ALIGN_BYTES == 0 {
                let pad = padding_len(bytes.len() as u64, align);
                if pad > 0 {
                    assert!(
                        pad >= wal::codec::FRAME_HEADER_BYTES,
                        "padding_len({}, {align}) = {pad}",
                        bytes.len()
                    );
                    encode_padding(bytes, seed, *next, *next, pad);
                }
            }
        }
        Chunk::Raw(b) => bytes.extend_from_slice(&b.0),
        Chunk::Zeros(n) => bytes.resize(bytes.len() + usize::from(*n), 0),
        Chunk::Flip { at, bit } => {
            if !bytes.is_empty() {
                let i = usize::from(*at) % bytes.len();
                bytes[i] ^= 1 << (bit % 8);
            }
        }
        Chunk::Cut { n } => {
            let n = usize::from(*n) % (bytes.len() + 1);
            bytes.truncate(bytes.len() - n);
        }
    }
}

/// What a recovered log looks like from outside.
#[derive(Debug, PartialEq)]
struct Observed {
    first: u64,
    next: u64,
    /// The records read by iterating from `first` (at most `MAX_READ`), and
    /// the error that stopped the iteration, if any.
    records: Vec<(u64, Vec<u8>)>,
    iter_error: Option<String>,
}

fn dir() -> &'static Path {
    Path::new("/log")
}

/// Writes arbitrary directory contents onto a SimFs (no faults) and opens
/// the log twice: each open returns a typed error or a log that satisfies the
/// invariants, the second open equals the first, and an append after it works.
pub fn recover(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(input) = RecoverInput::arbitrary(&mut u) else {
        return;
    };
    let files = build(&input);
    block_on(run(&input, &files));
}

async fn run(input: &RecoverInput, files: &[Built]) {
    let fs = SimFs::new(0);
    if write_dir(&fs, files).await.is_err() {
        return;
    }
    let opts = Options::default()
        .recovery_mode(input.mode.recovery_mode())
        .first_index(u64::from(input.first_index));
    // Verification reads anything, changes nothing and never fails on the
    // files' content.
    if let Err(e) = wal::verify_dir(&fs, dir()).await {
        panic!("verify_dir failed: {e:?}");
    }
    let first = open_and_observe(&fs, &opts).await;
    let second = open_and_observe(&fs, &opts).await;
    assert_eq!(first, second, "recovery must be idempotent");
    let Ok(before) = first else { return };
    // The recovered log takes an append and keeps it across a reopen.
    let wal = match Wal::open(fs.clone(), dir(), opts.clone()).await {
        Ok(w) => w,
        Err(e) => panic!("third open failed: {e}"),
    };
    let appended = wal.append(b"after recovery".to_vec()).await;
    match appended {
        Ok(i) => {
            assert_eq!(i, before.next, "append after recovery must get the next index");
            match wal.read(i).await {
                Ok(r) => assert_eq!(r, b"after recovery"),
                Err(e) => panic!("reading the appended record failed: {e}"),
            }
        }
        Err(Error::InvalidArgument(_)) if before.next >= u64::MAX - 1 => return,
        // A log whose highest segment id is u64::MAX - 1 has no id left for
        // a new segment (the next open needs `max id + 1`).
        Err(e) if e.to_string().contains("segment ids exhausted") => return,
        Err(e) => panic!("append after recovery failed: {e}"),
    }
    if let Err(e) = wal.close().await {
        panic!("close failed: {e}");
    }
    let after = match open_and_observe(&fs, &opts).await {
        Ok(o) => o,
        Err(e) => panic!("reopen after an append failed: {e}"),
    };
    assert_eq!(after.first, before.first);
    assert_eq!(after.next, before.next + 1);
    if before.iter_error.is_none() && after.records.len() as u64 == after.next - after.first {
        assert_eq!(&after.records[..before.records.len()], &before.records[..]);
        assert_eq!(after.records.last(), Some(&(before.next, b"after recovery".to_vec())));
    }
}

async fn write_dir(fs: &SimFs, files: &[Built]) -> std::io::Result<()> {
    fs.create_dir_all(dir()).await?;
    for f in files {
        let path: PathBuf = dir().join(&f.name);
        if f.is_dir {
            let _ = fs.create_dir_all(&path).await;
            continue;
        }
        let opts = OpenOptions::new().write(true).create(true).truncate(true);
        let Ok(file) = fs.open(&path, opts).await else {
            continue;
        };
        file.write_all_at(&f.bytes, 0).await?;
    }
    Ok(())
}

/// Opens the log, checks the invariants, reads it, and closes it. Returns
/// the error of the open (as text) if it failed.
async fn open_and_observe(fs: &SimFs, opts: &Options) -> Result<Observed, String> {
    let wal = match Wal::open(fs.clone(), dir(), opts.clone()).await {
        Ok(w) => w,
        Err(e @ Error::Corruption { .. }) => return Err(e.to_string()),
        // A directory named `meta` cannot be read as the meta file: the open
        // fails (docs/FORMAT.md §3.2), with the filesystem's error.
        Err(Error::Io {
            op: "open",
            path,
            source,
            ..
        }) if path == dir().join("meta") && source.kind() == std::io::ErrorKind::IsADirectory => {
            return Err(format!("{} is a directory", path.display()));
        }
        Err(e) => panic!("open failed with an unexpected error kind: {e:?}"),
    };
    let first = wal.first_index();
    let next = wal.next_index();
    assert!(first <= next, "first {first} > next {next}");
    assert_eq!(wal.last_index(), (next > first).then(|| next - 1));
    assert_eq!(wal.durable_next(), next);
    assert!(wal.stopped().is_none());
    let mut records = Vec::new();
    let mut iter_error = None;
    let mut iter_stop = None;
    match wal.iter_from(first) {
        Ok(mut it) => {
            let mut expect = first;
            while expect < next && expect - first < MAX_READ {
                match it.next().await {
                    Some(Ok((i, payload))) => {
                        assert_eq!(i, expect, "iteration must be contiguous");
                        records.push((i, payload));
                        expect += 1;
                    }
                    Some(Err(e @ Error::Corruption { .. })) => {
                        iter_error = Some(e.to_string());
                        iter_stop = Some(expect);
                        break;
                    }
                    Some(Err(e)) => panic!("iteration failed with an unexpected error kind: {e:?}"),
                    None => panic!("iteration ended at {expect}, before next_index {next}"),
                }
            }
            if expect == next {
                assert!(it.next().await.is_none(), "iteration went past next_index");
            }
        }
        Err(e) => panic!("iter_from(first_index) failed: {e:?}"),
    }
    // One verdict per byte: random access agrees with iteration on every
    // record it served, and on the one it stopped at.
    for (i, payload) in &records {
        match wal.read(*i).await {
            Ok(p) => assert_eq!(&p, payload, "read({i}) differs from iteration"),
            Err(e) => panic!("read({i}) failed after iteration succeeded: {e:?}"),
        }
    }
    if let Some(stop) = iter_stop {
        match wal.read(stop).await {
            Err(Error::Corruption { .. }) => {}
            other => panic!("iteration stopped at {stop} on corruption, but read({stop}) gave {other:?}"),
        }
    }
    assert!(matches!(wal.read(next).await, Err(Error::OutOfRange { .. })));
    // And verification agrees: nothing served is damaged, and the record
    // iteration stopped at is in a reported problem's range.
    let v = match wal.verify().await {
        Ok(v) => v,
        Err(e) => panic!("verify of the open log failed: {e:?}"),
    };
    let in_problem = |i: u64, damaged_only: bool| {
        v.problems.iter().any(|p| {
            (!damaged_only || p.kind == wal::ProblemKind::DamagedRecords)
                && p.indices.as_ref().is_some_and(|r| r.contains(&i))
        })
    };
    for (i, _) in &records {
        assert!(
            !in_problem(*i, true),
            "iteration served {i}, verify says it is damaged: {v}"
        );
    }
    if let Some(stop) = iter_stop {
        assert!(
            in_problem(stop, false),
            "iteration stopped at {stop}, verify reports no problem there: {v}"
        );
    }
    for (i, payload) in &records {
        match wal.read(*i).await {
            Ok(p) => assert_eq!(&p, payload, "read({i}) differs after verify"),
            Err(e) => panic!("read({i}) failed after verify: {e:?}"),
        }
    }
    if let Err(e) = wal.close().await {
        panic!("close after recovery failed: {e}");
    }
    Ok(Observed {
        first,
        next,
        records,
        iter_error,
    })
}
