//! The simulated machine's state: inodes (files and directories, each with a
//! durable and a volatile side), open handles, locks, pending directory
//! operations, the seeded RNG, counters and trace.
//!
//! Everything lives in one [`State`] behind a mutex that is never held across
//! an await. Collections are `BTreeMap`/`BTreeSet` so that iteration order,
//! and therefore every seeded decision, is the same on every run.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Component, Path};
use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::config::{FaultConfig, FaultCounters, FaultKind, SimClock, SimConfig, SyncFailureProfile};
use super::damage::Ledger;
use super::errors;
use super::image::Image;
use super::trace::{MisdirectedWrite, Trace};

/// The root directory's inode number.
pub(crate) const ROOT: u64 = 1;
/// The largest file the simulator accepts (EFBIG past it), so that a bogus
/// length can never make it allocate or materialise absurd amounts of memory.
pub(crate) const MAX_FILE_SIZE: u64 = 4 << 30;
/// The sector size for latent sector errors, bit rot and torn garbage.
pub(crate) const SECTOR: u64 = 512;
/// The smallest atomic write unit accepted (smaller values are raised to it).
pub(crate) const MIN_UNIT: u64 = 512;
/// The largest atomic write unit accepted (larger values are lowered to it).
pub(crate) const MAX_UNIT: u64 = 64 << 10;
/// The page-cache page size: a power loss decides the fate of each dirty page
/// of this size as a whole (kept, lost) or tears it at the atomic write unit.
pub(crate) const CACHE_PAGE: u64 = 4096;
/// Events [`State::gc_soon`] lets pass before a full collection, at least.
const GC_DEBT_MIN: u64 = 64;

/// Who holds a directory lock: one exclusive holder, or shared holders.
#[derive(Clone, Debug, Default)]
pub(crate) struct HeldLock {
    pub(crate) exclusive: bool,
    pub(crate) ids: std::collections::BTreeSet<u64>,
}

/// One regular file.
#[derive(Clone, Debug, Default)]
pub(crate) struct FileNode {
    /// What a power loss reveals.
    pub(crate) dur: Image,
    /// The page cache: what reads see.
    pub(crate) vol: Image,
    /// Atomic-unit pages whose volatile content may differ from the durable one
    /// and that writeback or a power loss may still persist.
    pub(crate) dirty: BTreeSet<u64>,
    /// 512-byte sectors that fail reads with EIO until rewritten.
    pub(crate) bad_sectors: BTreeSet<u64>,
    /// errseq: bumped at every failed sync of this inode.
    pub(crate) errseq: u64,
    /// `Ext4DataJournal`: a failed sync whose error the next sync reports.
    pub(crate) late_error: bool,
    /// Units a sync reported durable that had not reached the medium (a
    /// lying sync, or a late-failing one): the damage ledger records those
    /// a power loss then loses.
    pub(crate) claimed: BTreeSet<u64>,
    /// The length the last such sync reported durable (`None`: every
    /// length reported durable since was persisted).
    pub(crate) claimed_len: Option<u64>,
    /// Units a failed sync dropped from writeback without persisting them.
    pub(crate) dropped: BTreeSet<u64>,
}

impl FileNode {
    /// Sets the volatile length, tracking which pages now differ from the
    /// durable image.
    pub(crate) fn set_vol_len(&mut self, unit: u64, len: u64) {
        let old = self.vol.len;
        self.vol.set_len(unit, len);
        if len < old {
            let dur_pages = self.dur.len.div_ceil(unit);
            let first = len / unit;
            let last = old.div_ceil(unit).min(dur_pages);
            insert_range(&mut self.dirty, first..last);
            // Dirty pages wholly past both lengths no longer matter.
            let cut = len.div_ceil(unit).max(dur_pages);
            let _ = self.dirty.split_off(&cut);
            let sector_cut = len.div_ceil(SECTOR);
            let _ = self.bad_sectors.split_off(&sector_cut);
        }
    }
}

/// Inserts every unit of `units` into `set`. A long run into a set not much
/// larger is built in bulk and merged (a zero-fill ahead or a truncation
/// dirties hundreds of units at once); the set is the same either way.
pub(crate) fn insert_range(set: &mut BTreeSet<u64>, units: std::ops::Range<u64>) {
    let n = units.end.saturating_sub(units.start);
    if n <= 8 || set.len() as u64 > 4 * n {
        for u in units {
            set.insert(u);
        }
    } else {
        let mut run: BTreeSet<u64> = units.collect();
        set.append(&mut run);
    }
}

/// A set of inode numbers as a bitmap: inode numbers are allocated densely
/// from [`ROOT`] on, and reachability visits the same directory many times
/// (once per pending operation on it).
struct InoBits(Vec<u64>);

impl InoBits {
    /// An empty set, sized for inode numbers below `n`.
    fn with_capacity(n: u64) -> InoBits {
        InoBits(Vec::with_capacity(n.div_ceil(64).min(1 << 16) as usize))
    }

    /// Adds `ino`; whether it was new.
    fn insert(&mut self, ino: u64) -> bool {
        let (word, bit) = ((ino / 64) as usize, 1u64 << (ino % 64));
        if word >= self.0.len() {
            self.0.resize(word + 1, 0);
        }
        let new = self.0[word] & bit == 0;
        self.0[word] |= bit;
        new
    }

    fn contains(&self, ino: u64) -> bool {
        self.0
            .get((ino / 64) as usize)
            .is_some_and(|w| w & (1u64 << (ino % 64)) != 0)
    }

    /// The members, in increasing order.
    fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.0.iter().enumerate().flat_map(|(i, &w)| {
            (0..64u64)
                .filter(move |b| w & (1u64 << b) != 0)
                .map(move |b| i as u64 * 64 + b)
        })
    }
}

/// One directory.
#[derive(Clone, Debug, Default)]
pub(crate) struct DirNode {
    /// Entries a power loss reveals.
    pub(crate) dur: BTreeMap<String, u64>,
    /// Live entries.
    pub(crate) vol: BTreeMap<String, u64>,
    /// Ids of pending operations (in [`State::ops`]) that touch this directory,
    /// oldest first.
    pub(crate) pending: Vec<u64>,
}

/// An inode.
#[derive(Clone, Debug)]
pub(crate) enum Inode {
    File(FileNode),
    Dir(DirNode),
}

impl Inode {
    pub(crate) fn is_dir(&self) -> bool {
        matches!(self, Inode::Dir(_))
    }
}

/// One change to one directory's entries.
#[derive(Clone, Debug)]
pub(crate) enum Change {
    /// `name` -> `ino`, replacing whatever was there.
    Link { name: String, ino: u64 },
    /// Remove `name` if it still names `ino`.
    Unlink { name: String, ino: u64 },
}

/// A directory operation that is live but not yet durable.
#[derive(Clone, Debug)]
pub(crate) struct PendingOp {
    /// (directory, change), applied in order.
    pub(crate) parts: Vec<(u64, Change)>,
    /// Directories whose `sync_dir` it waits for.
    pub(crate) dirs: BTreeSet<u64>,
    /// Directories already synced since the op was made.
    pub(crate) synced: BTreeSet<u64>,
}

/// An open file handle of the current process generation.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HandleState {
    pub(crate) ino: u64,
    pub(crate) read: bool,
    pub(crate) write: bool,
    /// The inode's errseq value this handle has already been told about.
    pub(crate) seen_errseq: u64,
}

/// A path split into UTF-8 components, `.`/`..` resolved lexically.
pub(crate) type Components = Vec<String>;

/// Which directory entries to resolve a path through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum View {
    Live,
    Durable,
}

/// The whole simulated machine.
pub(crate) struct State {
    pub(crate) seed: u64,
    pub(crate) rng: ChaCha8Rng,
    /// Ids handed out by `Fs::unique_id` (not drawn from `rng`, so the
    /// fault stream does not depend on them).
    pub(crate) unique_ids: u64,
    pub(crate) profile: SyncFailureProfile,
    /// Atomic write unit in bytes (also the storage page size).
    pub(crate) unit: u64,
    pub(crate) capacity: Option<u64>,
    pub(crate) faults: FaultConfig,
    pub(crate) latency_us: (u64, u64),
    pub(crate) clock: Arc<dyn SimClock>,
    pub(crate) inodes: BTreeMap<u64, Inode>,
    pub(crate) next_ino: u64,
    /// Events that may have left an inode unreachable (a close, a rename
    /// over a file, a remove, a directory sync) since the last full
    /// [`State::gc`]: see [`State::gc_soon`].
    pub(crate) gc_debt: u64,
    pub(crate) ops: BTreeMap<u64, PendingOp>,
    pub(crate) next_op: u64,
    /// Open handles of the current generation, by handle id.
    pub(crate) handles: BTreeMap<u64, HandleState>,
    pub(crate) next_handle: u64,
    /// Held directory locks: directory inode -> the ids holding it, and
    /// whether that one holder holds it exclusively (else every id holds a
    /// shared lock).
    pub(crate) locks: BTreeMap<u64, HeldLock>,
    pub(crate) next_lock: u64,
    /// Process generation: bumped by every crash.
    pub(crate) generation: u64,
    pub(crate) counters: FaultCounters,
    pub(crate) trace: Trace,
    /// Every misdirected write, unbounded (unlike the trace ring): the
    /// fault is rare, and a test must be able to tell which bytes it
    /// destroyed however long ago.
    pub(crate) misdirected: Vec<MisdirectedWrite>,
    /// Every byte range destroyed or not persisted ([`super::damage`]).
    pub(crate) ledger: Ledger,
    /// Pending directory operations a lying directory sync reported durable.
    pub(crate) lied_ops: BTreeSet<u64>,
    /// The operation counter and the crash plan (`hooks.rs`).
    pub(crate) hooks: super::hooks::Hooks,
}

impl State {
    pub(crate) fn new(seed: u64, config: SimConfig) -> State {
        // 0 means the default; anything else is clamped to a sane range so a
        // bogus value can neither make pages huge nor byte-sized.
        let unit = match config.atomic_write_unit_bytes {
            0 => CACHE_PAGE,
            u => u64::from(u).clamp(MIN_UNIT, MAX_UNIT),
        };
        let mut inodes = BTreeMap::new();
        inodes.insert(ROOT, Inode::Dir(DirNode::default()));
        State {
            seed,
            rng: ChaCha8Rng::seed_from_u64(seed),
            unique_ids: 0,
            profile: config.profile,
            unit,
            capacity: config.capacity_bytes,
            faults: config.faults,
            latency_us: config.latency_us,
            clock: config.clock,
            inodes,
            next_ino: ROOT + 1,
            gc_debt: 0,
            ops: BTreeMap::new(),
            next_op: 0,
            handles: BTreeMap::new(),
            next_handle: 0,
            locks: BTreeMap::new(),
            next_lock: 0,
            generation: 0,
            counters: FaultCounters::default(),
            trace: Trace::new(config.trace_capacity),
            misdirected: Vec::new(),
            ledger: Ledger::default(),
            lied_ops: BTreeSet::new(),
            hooks: Default::default(),
        }
    }

    // ----- randomness -----

    /// Whether a fault of probability `p` fires. Draws nothing when `p` is 0
    /// (or NaN) or at least 1, so a heal phase does not consume randomness.
    pub(crate) fn roll(&mut self, p: f64) -> bool {
        if p.is_nan() || p <= 0.0 {
            false
        } else if p >= 1.0 {
            true
        } else {
            self.rng.random::<f64>() < p
        }
    }

    /// A fair coin.
    pub(crate) fn coin(&mut self) -> bool {
        self.rng.random::<bool>()
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        if n <= 1 {
            0
        } else {
            self.rng.random_range(0..n)
        }
    }

    /// The latency of the next operation, if any.
    pub(crate) fn draw_latency(&mut self) -> Option<Duration> {
        let (a, b) = self.latency_us;
        if a == 0 && b == 0 {
            return None;
        }
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let us = self.rng.random_range(lo..=hi);
        Some(Duration::from_micros(us))
    }

    // ----- trace and counters -----

    /// Counts a fault and records it as its own trace event.
    pub(crate) fn fault_event(&mut self, kind: FaultKind, op: &'static str, ino: Option<u64>, offset: u64, len: u64) {
        self.counters.bump(kind);
        let now = self.clock.now_ns();
        self.trace
            .record(now, op, ino, None, offset, len, "fault".to_string(), Some(kind));
    }

    // ----- inodes -----

    pub(crate) fn file(&self, ino: u64) -> Option<&FileNode> {
        match self.inodes.get(&ino) {
            Some(Inode::File(f)) => Some(f),
            _ => None,
        }
    }

    pub(crate) fn file_mut(&mut self, ino: u64) -> Option<&mut FileNode> {
        match self.inodes.get_mut(&ino) {
            Some(Inode::File(f)) => Some(f),
            _ => None,
        }
    }

    pub(crate) fn dir(&self, ino: u64) -> Option<&DirNode> {
        match self.inodes.get(&ino) {
            Some(Inode::Dir(d)) => Some(d),
            _ => None,
        }
    }

    pub(crate) fn dir_mut(&mut self, ino: u64) -> Option<&mut DirNode> {
        match self.inodes.get_mut(&ino) {
            Some(Inode::Dir(d)) => Some(d),
            _ => None,
        }
    }

    pub(crate) fn alloc_inode(&mut self, inode: Inode) -> u64 {
        let ino = self.next_ino;
        self.next_ino += 1;
        self.inodes.insert(ino, inode);
        ino
    }

    // ----- paths -----

    /// Splits a path into components; `.` is skipped and `..` pops (at the
    /// root it stays at the root). Relative paths are relative to `/`.
    pub(crate) fn components(path: &Path) -> io::Result<Components> {
        if path.as_os_str().is_empty() {
            return Err(errors::not_found());
        }
        let mut out: Components = Vec::new();
        for c in path.components() {
            match c {
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
                Component::ParentDir => {
                    out.pop();
                }
                Component::Normal(name) => match name.to_str() {
                    Some(s) => out.push(s.to_string()),
                    None => return Err(errors::bad_name()),
                },
            }
        }
        Ok(out)
    }

    /// Resolves components to an inode through `view`'s entries.
    /// `NotFound` if a component is missing, `NotADirectory` if a non-final
    /// component is a file.
    pub(crate) fn resolve(&self, comps: &[String], view: View) -> io::Result<u64> {
        let mut cur = ROOT;
        for name in comps {
            let dir = match self.inodes.get(&cur) {
                Some(Inode::Dir(d)) => d,
                Some(Inode::File(_)) => return Err(errors::not_dir()),
                None => return Err(errors::not_found()),
            };
            let entries = match view {
                View::Live => &dir.vol,
                View::Durable => &dir.dur,
            };
            cur = match entries.get(name) {
                Some(&ino) => ino,
                None => return Err(errors::not_found()),
            };
        }
        Ok(cur)
    }

    /// Resolves the parent of `comps` to a live directory, returning it and
    /// the final name. `comps` must not be empty.
    pub(crate) fn resolve_parent(&self, comps: &[String]) -> io::Result<(u64, String)> {
        let Some((name, parent)) = comps.split_last() else {
            return Err(errors::invalid());
        };
        let dir = self.resolve(parent, View::Live)?;
        if self.dir(dir).is_none() {
            return Err(errors::not_dir());
        }
        Ok((dir, name.clone()))
    }

    // ----- directory entries and pending operations -----

    /// Records a pending operation whose changes were already applied to the
    /// live entries.
    pub(crate) fn push_op(&mut self, parts: Vec<(u64, Change)>) {
        let id = self.next_op;
        self.next_op += 1;
        let dirs: BTreeSet<u64> = parts.iter().map(|(d, _)| *d).collect();
        for d in &dirs {
            if let Some(dir) = self.dir_mut(*d) {
                dir.pending.push(id);
            }
        }
        self.ops.insert(
            id,
            PendingOp {
                parts,
                dirs,
                synced: BTreeSet::new(),
            },
        );
    }

    /// Applies one change to a directory's durable entries.
    pub(crate) fn apply_durable(&mut self, dir: u64, change: &Change) {
        let Some(d) = self.dir_mut(dir) else { return };
        match change {
            Change::Link { name, ino } => {
                d.dur.insert(name.clone(), *ino);
            }
            Change::Unlink { name, ino } => {
                if d.dur.get(name) == Some(ino) {
                    d.dur.remove(name);
                }
            }
        }
    }

    /// Removes an operation from every directory's pending list.
    pub(crate) fn forget_op(&mut self, id: u64) {
        self.lied_ops.remove(&id);
        if let Some(op) = self.ops.remove(&id) {
            for d in &op.dirs {
                if let Some(dir) = self.dir_mut(*d) {
                    dir.pending.retain(|&x| x != id);
                }
            }
        }
    }

    // ----- reachability -----

    /// Inodes reachable from the root through live entries, plus those held
    /// open by a current handle (and what they contain).
    pub(crate) fn live_set(&self) -> BTreeSet<u64> {
        let mut roots = vec![ROOT];
        roots.extend(self.handles.values().map(|h| h.ino));
        self.reach(roots, true, false)
    }

    /// Inodes reachable from the root through durable entries.
    pub(crate) fn durable_set(&self) -> BTreeSet<u64> {
        self.reach(vec![ROOT], false, true)
    }

    /// Inodes reachable from `ino` through live or durable entries.
    pub(crate) fn subtree(&self, ino: u64) -> BTreeSet<u64> {
        self.reach(vec![ino], true, true)
    }

    fn reach(&self, work: Vec<u64>, live: bool, durable: bool) -> BTreeSet<u64> {
        self.reach_bits(work, live, durable).iter().collect()
    }

    fn reach_bits(&self, mut work: Vec<u64>, live: bool, durable: bool) -> InoBits {
        let mut seen = InoBits::with_capacity(self.next_ino);
        while let Some(ino) = work.pop() {
            if !seen.insert(ino) {
                continue;
            }
            if let Some(d) = self.dir(ino) {
                if live {
                    work.extend(d.vol.values().copied());
                }
                if durable {
                    work.extend(d.dur.values().copied());
                }
            }
        }
        seen
    }

    /// Frees every inode that nothing can reach any more: not through live or
    /// durable entries, not through a pending operation, not through a handle.
    pub(crate) fn gc(&mut self) {
        self.gc_debt = 0;
        let mut roots = vec![ROOT];
        roots.extend(self.handles.values().map(|h| h.ino));
        for op in self.ops.values() {
            for (d, c) in &op.parts {
                roots.push(*d);
                match c {
                    Change::Link { ino, .. } | Change::Unlink { ino, .. } => roots.push(*ino),
                }
            }
        }
        let keep = self.reach_bits(roots, true, true);
        self.inodes.retain(|ino, _| keep.contains(*ino));
        self.locks.retain(|ino, _| keep.contains(*ino));
    }

    /// A [`State::gc`] once enough events may have left garbage: a full
    /// pass costs time in the number of inodes and entries, and running it
    /// on every close made a log of a thousand segments quadratic (one sim
    /// seed took 6 s, three quarters of it here). An unreachable inode is
    /// never found again (inode numbers are not reused; nothing looks one
    /// up but a handle or an entry), so freeing it later changes no result,
    /// only when its memory goes: at most about half the inodes are garbage
    /// at any time.
    pub(crate) fn gc_soon(&mut self) {
        self.gc_debt += 1;
        if self.gc_debt >= GC_DEBT_MIN + self.inodes.len() as u64 / 2 {
            self.gc();
        }
    }

    /// Bytes used: the volatile length of every live file.
    pub(crate) fn used_bytes(&self) -> u64 {
        self.live_set()
            .iter()
            .filter_map(|ino| self.file(*ino))
            .map(|f| f.vol.len)
            .sum()
    }

    /// Space still free under the capacity limit (`u64::MAX` if unlimited).
    pub(crate) fn available(&self) -> u64 {
        match self.capacity {
            None => u64::MAX,
            Some(cap) => cap.saturating_sub(self.used_bytes()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_normalise() {
        let c = State::components(Path::new("/a/./b/../c/")).unwrap();
        assert_eq!(c, vec!["a".to_string(), "c".to_string()]);
        let c = State::components(Path::new("x/y")).unwrap();
        assert_eq!(c, vec!["x".to_string(), "y".to_string()]);
        assert!(State::components(Path::new("/..")).unwrap().is_empty());
        assert!(State::components(Path::new("")).is_err());
    }

    #[test]
    fn ino_bits_is_a_set() {
        let mut b = InoBits::with_capacity(3);
        assert!(b.insert(1) && b.insert(200) && b.insert(64) && !b.insert(200));
        assert!(b.contains(64) && !b.contains(63) && !b.contains(1 << 40));
        assert_eq!(b.iter().collect::<Vec<_>>(), vec![1, 64, 200]);
    }

    #[test]
    fn insert_range_same_set_either_way() {
        for (have, run) in [
            (vec![], 0..20),
            (vec![3, 40], 0..30),
            (vec![5], 5..6),
            ((0..100).collect(), 90..120),
        ] {
            let mut a: BTreeSet<u64> = have.iter().copied().collect();
            let mut b = a.clone();
            insert_range(&mut a, run.clone());
            b.extend(run);
            assert_eq!(a, b);
        }
    }

    #[test]
    fn roll_extremes_draw_nothing() {
        let mut s = State::new(3, SimConfig::default());
        let before = s.rng.clone();
        assert!(!s.roll(0.0));
        assert!(!s.roll(f64::NAN));
        assert!(s.roll(1.0));
        assert_eq!(before, s.rng);
    }
}
