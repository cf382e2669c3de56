//! Tampering between runs ([`FaultClass::Tamper`](crate::config::FaultClass)):
//! what an operator, a backup tool or a bad copy does to a log directory
//! while no process has it open. The rule under test (issue 12): recovery
//! never turns a wrong name, a stray file or a bad copy into silent
//! deletion.
//!
//! One tamper, with every SimFs fault switched off (the tamper is the only
//! change; nothing can be excused by a fault):
//!
//! 1. The directory as the crash (or close) left it is judged first: a
//!    read-only open in the run's mode and `wal::verify_dir`. Only a
//!    directory both find in order (the open succeeds, no problem, no
//!    leftover of an interrupted operation) is tampered with: otherwise a
//!    damage the run already carries could hide the tamper's effect.
//! 2. One tamper is applied ([`Kind`]), every change a rename or a new file,
//!    so that it can be undone exactly.
//! 3. In each of the three recovery modes a read-only open must leave the
//!    directory byte for byte as tampered; for a *refused* kind it must fail
//!    with a typed error naming a file the tamper touched (or its
//!    neighbour, or the directory); for a *harmless* kind it must open the
//!    same range as before the tamper. `verify_dir` must report a problem
//!    naming such a file for every refused kind, and no more problems than
//!    before for a harmless one.
//! 4. The operator restores the directory (the changes undone in reverse);
//!    it must equal the snapshot of step 1, and the run goes on with its
//!    normal reopen. Faults come back on.
//!
//! Why read-only opens: a writable open of a tampered directory that passed
//! would change the run's log under the oracle. A read-only open decides
//! exactly as a writable one (the damage matrix checks that in every cell,
//! `wal/tests/damage_matrix.rs`), so its verdict is the writable open's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rand::Rng;
use simfs::{FaultConfig, File, Fs, OpenOptions, SimFs};
use wal::{Error, Options, RecoveryMode, Wal};

use crate::coverage::Mark;
use crate::workload::Ctx;

/// What the operator appends to the name of a file a tamper moved aside:
/// it stays in the directory (a rename across directories is a change of
/// two directories) under a name every open ignores.
const ASIDE: &str = ".aside";
/// Another log on the same disk, whose meta file a bad copy brings in.
const FOREIGN: &str = "/tamper-foreign";

/// The tampers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The newest sealed segment renamed to start at the first one's index:
    /// its name covers the older segments (which used to be deleted).
    RenameCover,
    /// A sealed segment renamed to end one past its last index.
    RenameOverlap,
    /// A sealed segment renamed to end one before its last index.
    RenameGap,
    /// A sealed segment renamed to take the next segment's id.
    RenameDuplicateId,
    /// A sealed segment in the middle moved out of the directory.
    DeleteMiddle,
    /// The meta file replaced by 64 bytes of garbage.
    GarbageMeta,
    /// The meta file replaced by another log's.
    ForeignMeta,
    /// A file `foo.wal` (a name that looks like a segment's).
    StrayWal,
    /// An unrelated file `notes.txt`: harmless.
    UnrelatedFile,
    /// A stray `x.wal.tmp`: harmless (a writable open removes it).
    StrayTmp,
}

impl Kind {
    const ALL: [Kind; 10] = [
        Kind::RenameCover,
        Kind::RenameOverlap,
        Kind::RenameGap,
        Kind::RenameDuplicateId,
        Kind::DeleteMiddle,
        Kind::GarbageMeta,
        Kind::ForeignMeta,
        Kind::StrayWal,
        Kind::UnrelatedFile,
        Kind::StrayTmp,
    ];

    fn harmless(self) -> bool {
        matches!(self, Kind::UnrelatedFile | Kind::StrayTmp)
    }
}

/// A change the operator can undo.
enum Change {
    /// `from` was renamed to `to`.
    Renamed { from: PathBuf, to: PathBuf },
    /// `path` was created.
    Created { path: PathBuf },
}

/// Every name in the log directory with its bytes (`None`: a directory).
type Snapshot = BTreeMap<String, Option<Vec<u8>>>;

/// A sealed segment's name.
#[derive(Clone, Copy, Debug)]
struct Sealed {
    first: u64,
    last: u64,
    id: u64,
}

fn sealed_name(s: Sealed) -> String {
    format!("{:020}-{:020}-{:016x}.wal", s.first, s.last, s.id)
}

fn parse_sealed(name: &str) -> Option<Sealed> {
    let stem = name.strip_suffix(".wal")?;
    let mut parts = stem.split('-');
    let (a, b, c) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || b == "active" {
        return None;
    }
    Some(Sealed {
        first: a.parse().ok()?,
        last: b.parse().ok()?,
        id: u64::from_str_radix(c, 16).ok()?,
    })
}

async fn snapshot(fs: &SimFs, dir: &Path) -> std::io::Result<Snapshot> {
    let mut out = Snapshot::new();
    for e in fs.read_dir(dir).await? {
        if e.is_dir {
            out.insert(e.name, None);
            continue;
        }
        let f = fs.open(&dir.join(&e.name), OpenOptions::new().read(true)).await?;
        let mut buf = vec![0u8; f.len().await? as usize];
        f.read_exact_at(&mut buf, 0).await?;
        out.insert(e.name, Some(buf));
    }
    Ok(out)
}

async fn create(fs: &SimFs, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let f = fs
        .open(path, OpenOptions::new().write(true).create(true).truncate(true))
        .await?;
    f.write_all_at(bytes, 0).await
}

/// The path a typed error names.
fn error_path(e: &Error) -> Option<&Path> {
    match e {
        Error::Io { path, .. }
        | Error::ForeignLog { path, .. }
        | Error::MissingRecords { path, .. }
        | Error::ReadOnly { path, .. } => Some(path),
        Error::Corruption { segment, .. } => Some(segment),
        _ => None,
    }
}

/// The result of a read-only open: the range it serves, or the error.
type Opened = Result<(u64, u64), Error>;

const MODES: [RecoveryMode; 3] = [
    RecoveryMode::TolerateTornTail,
    RecoveryMode::PointInTime,
    RecoveryMode::AbsoluteConsistency,
];

/// The tamper of one reopen, start to restore.
pub struct Tamperer<'a> {
    /// The run.
    pub ctx: &'a Ctx,
    /// The run's options (read-only opens take them with `read_only` set).
    pub opts: Options,
}

impl Tamperer<'_> {
    fn dir(&self) -> &Path {
        &self.ctx.dir
    }

    async fn open_read_only(&self, mode: RecoveryMode) -> Opened {
        let o = self.opts.clone().read_only(true).recovery_mode(mode);
        let wal = Wal::open(self.ctx.fs.clone(), self.dir(), o).await?;
        let range = (wal.first_index(), wal.next_index());
        wal.close().await?;
        Ok(range)
    }

    /// Whether a `PointInTime` open that served `opened` where `was` was
    /// served before reports the front it no longer serves as lost.
    async fn lost_front(&self, was: Option<(u64, u64)>, opened: (u64, u64)) -> bool {
        let Some(was) = was else { return false };
        if opened.1 != was.1 || opened.0 <= was.0 {
            return false;
        }
        let o = self
            .opts
            .clone()
            .read_only(true)
            .recovery_mode(RecoveryMode::PointInTime);
        let Ok(wal) = Wal::open(self.ctx.fs.clone(), self.dir(), o).await else {
            return false;
        };
        let lost = wal.recovery_report().lost.clone();
        let _ = wal.close().await;
        lost.iter().any(|l| l.first <= was.0 && l.end >= opened.0)
    }

    /// Runs one tamper (see the module comment). Faults are off throughout
    /// and restored at the end.
    pub async fn run(&self, rng: &mut impl Rng) {
        let fs = &self.ctx.fs;
        let saved = fs.faults();
        fs.set_faults(FaultConfig::none());
        self.tamper(rng).await;
        fs.set_faults(saved);
    }

    async fn tamper(&self, rng: &mut impl Rng) {
        let fs = &self.ctx.fs;
        if self.open_read_only(self.opts.recovery_mode).await.is_err() {
            return;
        }
        let mut before = Vec::new();
        for mode in MODES {
            before.push((mode, self.open_read_only(mode).await.ok()));
        }
        let Ok(v0) = wal::verify_dir(fs, self.dir()).await else {
            return;
        };
        let leftovers = v0.notices.iter().any(|n| n.kind == wal::NoticeKind::Leftover);
        if !v0.is_intact() || leftovers {
            return;
        }
        let Ok(s0) = snapshot(fs, self.dir()).await else {
            return;
        };
        let kind = Kind::ALL[rng.random_range(0..Kind::ALL.len())];
        let mut changes = Vec::new();
        let blamed = match self.apply(kind, &s0, v0.first_index.is_some(), &mut changes).await {
            Ok(Some(b)) => b,
            Ok(None) => return self.restore(&s0, changes, kind, false).await,
            Err(e) => {
                self.ctx
                    .oracle()
                    .event(&format!("tamper {kind:?} could not be applied: {e}"));
                return self.restore(&s0, changes, kind, false).await;
            }
        };
        self.ctx.oracle().cov.mark(Mark::TamperApplied);
        self.ctx
            .oracle()
            .event(&format!("tamper {kind:?}: {}", blamed.join(", ")));
        self.judge(kind, &blamed, &before, v0.problems.len()).await;
        self.restore(&s0, changes, kind, true).await;
    }

    /// Applies `kind`; the names it touched (`"."` for the directory), or
    /// `None` if the directory has no place for it. `headed`: some segment's
    /// header checked (`verify_dir`).
    async fn apply(
        &self,
        kind: Kind,
        s0: &Snapshot,
        headed: bool,
        changes: &mut Vec<Change>,
    ) -> std::io::Result<Option<Vec<String>>> {
        let fs = &self.ctx.fs;
        let dir = self.dir().to_path_buf();
        let mut sealed: Vec<Sealed> = s0.keys().filter_map(|n| parse_sealed(n)).collect();
        sealed.sort_by_key(|s| s.first);
        let rename = |from: Sealed, to: Sealed| (dir.join(sealed_name(from)), dir.join(sealed_name(to)));
        // A sealed segment with a successor (and, for a gap, two records).
        let mid = sealed.len().checked_sub(2).map(|i| i / 2);
        let plan: Option<(PathBuf, PathBuf, Vec<String>)> = match kind {
            Kind::RenameCover if sealed.len() >= 2 => {
                let newest = *sealed.iter().max_by_key(|s| s.id).unwrap_or(&sealed[0]);
                if newest.first == sealed[0].first {
                    // The front segment is the newest (a compaction output):
                    // no older segment precedes it to cover.
                    return Ok(None);
                }
                let to = Sealed {
                    first: sealed[0].first,
                    ..newest
                };
                let (a, b) = rename(newest, to);
                Some((a, b, vec![sealed_name(to)]))
            }
            Kind::RenameOverlap | Kind::RenameGap | Kind::RenameDuplicateId => match mid {
                Some(i) => {
                    let (s, next) = (sealed[i], sealed[i + 1]);
                    let to = match kind {
                        Kind::RenameOverlap => Sealed { last: s.last + 1, ..s },
                        Kind::RenameGap if s.last > s.first => Sealed { last: s.last - 1, ..s },
                        Kind::RenameDuplicateId => Sealed { id: next.id, ..s },
                        _ => return Ok(None),
                    };
                    let (a, b) = rename(s, to);
                    Some((a, b, vec![sealed_name(to), sealed_name(next)]))
                }
                None => return Ok(None),
            },
            Kind::DeleteMiddle => match mid {
                Some(i) if i > 0 => {
                    let s = sealed[i];
                    let to = dir.join(format!("{}{ASIDE}", sealed_name(s)));
                    let names = vec![
                        ".".to_string(),
                        sealed_name(s),
                        sealed_name(sealed[i - 1]),
                        sealed_name(sealed[i + 1]),
                    ];
                    Some((dir.join(sealed_name(s)), to, names))
                }
                _ => return Ok(None),
            },
            _ => None,
        };
        if let Some((from, to, names)) = plan {
            fs.rename(&from, &to).await?;
            changes.push(Change::Renamed { from, to });
            return Ok(Some(names));
        }
        let (name, bytes): (&str, Vec<u8>) = match kind {
            Kind::GarbageMeta | Kind::ForeignMeta => {
                if !s0.contains_key("meta") {
                    return Ok(None);
                }
                // A log with no segment whose header checked is its meta
                // file: another log's cannot be told from its own (no
                // header carries the id).
                if kind == Kind::ForeignMeta && !headed {
                    return Ok(None);
                }
                let bytes = match kind {
                    Kind::ForeignMeta => self.foreign_meta().await?,
                    _ => (0..64u32).map(|i| (i * 37 + 11) as u8).collect(),
                };
                let (from, to) = (dir.join("meta"), dir.join(format!("meta{ASIDE}")));
                fs.rename(&from, &to).await?;
                changes.push(Change::Renamed { from, to });
                ("meta", bytes)
            }
            Kind::StrayWal => ("foo.wal", b"hello".to_vec()),
            Kind::UnrelatedFile => ("notes.txt", b"my notes\n".to_vec()),
            Kind::StrayTmp => ("x.wal.tmp", b"temp".to_vec()),
            _ => return Ok(None),
        };
        let path = dir.join(name);
        if s0.contains_key(name) && name != "meta" {
            return Ok(None);
        }
        changes.push(Change::Created { path: path.clone() });
        create(fs, &path, &bytes).await?;
        Ok(Some(vec![name.to_string()]))
    }

    /// The meta file of another log on the same disk (made once).
    async fn foreign_meta(&self) -> std::io::Result<Vec<u8>> {
        let fs = &self.ctx.fs;
        let path = Path::new(FOREIGN).join("meta");
        if fs.metadata(&path).await.is_err() {
            let made = async {
                let wal = Wal::open(fs.clone(), Path::new(FOREIGN), Options::default()).await?;
                wal.append(b"another log".to_vec()).await?;
                wal.close().await
            };
            made.await.map_err(std::io::Error::other)?;
        }
        let f = fs.open(&path, OpenOptions::new().read(true)).await?;
        let mut buf = vec![0u8; f.len().await? as usize];
        f.read_exact_at(&mut buf, 0).await?;
        Ok(buf)
    }

    /// Judges the tampered directory (step 3 of the module comment).
    /// `before`: what each mode's read-only open served before the tamper
    /// (`None`: it failed, so the tamper's refusal may have any cause).
    async fn judge(
        &self,
        kind: Kind,
        blamed: &[String],
        before: &[(RecoveryMode, Option<(u64, u64)>)],
        problems_before: usize,
    ) {
        let fs = &self.ctx.fs;
        let dir = self.dir();
        let names = |p: &Path| {
            (p == dir && blamed.iter().any(|b| b == "."))
                || (p.parent() == Some(dir)
                    && p.file_name()
                        .is_some_and(|n| blamed.iter().any(|b| b.as_str() == n.to_string_lossy())))
        };
        let Ok(tampered) = snapshot(fs, dir).await else {
            return self
                .ctx
                .oracle()
                .violation(format!("tamper {kind:?}: cannot read the directory"));
        };
        let mut refused = 0;
        for &(mode, was) in before {
            let opened = self.open_read_only(mode).await;
            if snapshot(fs, dir).await.ok().as_ref() != Some(&tampered) {
                self.ctx.oracle().violation(format!(
                    "tamper {kind:?}: a read-only open ({mode:?}) changed the directory"
                ));
            }
            match (&opened, kind.harmless()) {
                (Err(e), false) if error_path(e).is_some_and(names) => refused += 1,
                (Err(_), false) if was.is_none() => refused += 1,
                (Err(e), false) => self.ctx.oracle().violation(format!(
                    "tamper {kind:?} ({blamed:?}): the {mode:?} open's error does not name the tampered file: {e}"
                )),
                // A gap right above the first index looks like a lost
                // front: the segment before it is wholly below the
                // low-water mark now (an exact prune left the first index
                // inside it), a leftover. `PointInTime` may open the rest
                // if its report names the lost records.
                (Ok(r), false) if mode == RecoveryMode::PointInTime && self.lost_front(was, *r).await => {
                    self.ctx.oracle().cov.mark(Mark::TamperLostFrontReported);
                }
                (Ok(r), false) => self.ctx.oracle().violation(format!(
                    "tamper {kind:?} ({blamed:?}): the {mode:?} open opened {}..{} (before the tamper {was:?})",
                    r.0, r.1
                )),
                (Ok(r), true) if Some(*r) == was => {}
                (Err(_), true) if was.is_none() => {}
                (r, true) => self.ctx.oracle().violation(format!(
                    "tamper {kind:?}: the {mode:?} open of a harmless tamper gave {r:?}, before the tamper {was:?}"
                )),
            }
        }
        if refused == 3 {
            self.ctx.oracle().cov.mark(Mark::TamperRefused);
        }
        match wal::verify_dir(fs, dir).await {
            Ok(v) if kind.harmless() => {
                if v.problems.len() > problems_before {
                    self.ctx.oracle().violation(format!(
                        "tamper {kind:?}: verify_dir reports problems of a harmless tamper: {v}"
                    ));
                } else {
                    self.ctx.oracle().cov.mark(Mark::TamperHarmless);
                }
            }
            Ok(v) if v.problems.iter().any(|p| names(&p.path)) => {}
            Ok(v) => self.ctx.oracle().violation(format!(
                "tamper {kind:?} ({blamed:?}): verify_dir names no tampered file: {v}"
            )),
            Err(e) => self
                .ctx
                .oracle()
                .violation(format!("tamper {kind:?}: verify_dir failed: {e}")),
        }
        if snapshot(fs, dir).await.ok().as_ref() != Some(&tampered) {
            self.ctx
                .oracle()
                .violation(format!("tamper {kind:?}: verify_dir changed the directory"));
        }
    }

    /// The operator undoes the changes, newest first, and fsyncs the
    /// directory (so that no later power loss can make part of the tamper
    /// durable without its undo; the fsync may make the crashed process's
    /// own pending entries durable too, as any writeback may); the
    /// directory must be what it was.
    async fn restore(&self, s0: &Snapshot, changes: Vec<Change>, kind: Kind, applied: bool) {
        let fs = &self.ctx.fs;
        for c in changes.into_iter().rev() {
            let undone = match &c {
                Change::Renamed { from, to } => fs.rename(to, from).await,
                Change::Created { path } => match fs.remove_file(path).await {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                    other => other,
                },
            };
            if let Err(e) = undone {
                return self
                    .ctx
                    .oracle()
                    .violation(format!("tamper {kind:?}: the restore failed: {e}"));
            }
        }
        if let Err(e) = fs.sync_dir(self.dir()).await {
            return self
                .ctx
                .oracle()
                .violation(format!("tamper {kind:?}: the restore's directory fsync failed: {e}"));
        }
        match snapshot(fs, self.dir()).await {
            Ok(s) if s == *s0 => {
                if applied {
                    self.ctx.oracle().cov.mark(Mark::TamperRestored);
                }
            }
            _ => self
                .ctx
                .oracle()
                .violation(format!("tamper {kind:?}: the restored directory is not what it was")),
        }
    }
}
