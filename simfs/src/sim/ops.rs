//! The semantics of every [`crate::Fs`] and [`crate::File`] operation on
//! [`State`], with fault injection. Each runs under the state lock, after the
//! operation's simulated latency, inside [`State::run`], which checks the
//! process generation, gives background writeback its chance and records the
//! trace event.

use std::io;

use super::config::FaultKind;
use super::errors;
use super::state::{Change, Components, DirNode, FileNode, HandleState, Inode, State, View, MAX_FILE_SIZE};
use super::trace::TraceEvent;
use crate::fs::{DirEntry, Metadata, OpenOptions};

/// What one operation records in the trace.
#[derive(Debug, Default)]
pub(crate) struct Ctx {
    pub(crate) op: &'static str,
    pub(crate) ino: Option<u64>,
    pub(crate) path: Option<String>,
    /// The destination of a rename.
    pub(crate) to_path: Option<String>,
    pub(crate) offset: u64,
    pub(crate) len: u64,
    pub(crate) fault: Option<FaultKind>,
}

impl Ctx {
    pub(crate) fn new(op: &'static str) -> Ctx {
        Ctx { op, ..Ctx::default() }
    }
    pub(crate) fn ino(mut self, ino: u64) -> Ctx {
        self.ino = Some(ino);
        self
    }
    pub(crate) fn at(mut self, offset: u64, len: u64) -> Ctx {
        self.offset = offset;
        self.len = len;
        self
    }
}

/// How a successful result is written in the trace.
pub(crate) trait Outcome {
    fn describe(&self) -> String;
}
impl Outcome for () {
    fn describe(&self) -> String {
        "ok".into()
    }
}
impl Outcome for usize {
    fn describe(&self) -> String {
        format!("ok:{self}")
    }
}
impl Outcome for u64 {
    fn describe(&self) -> String {
        format!("ok:{self}")
    }
}
impl Outcome for Metadata {
    fn describe(&self) -> String {
        format!("ok:{}:{}", if self.is_dir { "dir" } else { "file" }, self.len)
    }
}
impl Outcome for Vec<DirEntry> {
    fn describe(&self) -> String {
        format!("ok:{}", self.len())
    }
}
/// A handle or lock just created: its id and inode.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Opened {
    pub(crate) id: u64,
    pub(crate) ino: u64,
}
impl Outcome for Opened {
    fn describe(&self) -> String {
        format!("ok:ino={}", self.ino)
    }
}

impl State {
    /// Runs one operation of process generation `generation`: stale if a crash
    /// happened since, otherwise background writeback gets its chance, then
    /// `f`; the outcome is traced.
    pub(crate) fn run<T: Outcome>(
        &mut self,
        generation: u64,
        mut ctx: Ctx,
        f: impl FnOnce(&mut State, &mut Ctx) -> io::Result<T>,
    ) -> io::Result<T> {
        let r = if generation != self.generation {
            Err(errors::stale())
        } else {
            self.writeback_tick();
            f(self, &mut ctx)
        };
        let result = match &r {
            Ok(v) => v.describe(),
            Err(e) => format!("{:?}", e.kind()),
        };
        let fire = self.trigger_matches(generation, &ctx, r.is_ok());
        let now = self.clock.now_ns();
        let event = TraceEvent {
            seq: self.trace.next_seq(),
            time_ns: now,
            op: ctx.op,
            ino: ctx.ino,
            path: ctx.path.take(),
            to_path: ctx.to_path.take(),
            offset: ctx.offset,
            len: ctx.len,
            result,
            fault: ctx.fault,
        };
        if fire {
            self.fire_trigger(event.clone());
        }
        self.trace.push(event);
        r
    }

    /// Counts an injected fault and tags the operation with it.
    pub(crate) fn inject(&mut self, ctx: &mut Ctx, kind: FaultKind) {
        self.counters.bump(kind);
        if ctx.fault.is_none() {
            ctx.fault = Some(kind);
        }
    }

    fn handle(&self, id: u64) -> io::Result<HandleState> {
        self.handles.get(&id).copied().ok_or_else(errors::stale)
    }

    // ----- Fs -----

    pub(crate) fn op_open(&mut self, ctx: &mut Ctx, comps: &Components, o: OpenOptions) -> io::Result<Opened> {
        if !o.read && !o.write {
            return Err(errors::invalid());
        }
        if !o.write && (o.create || o.create_new || o.truncate) {
            return Err(errors::invalid());
        }
        let faults = self.faults;
        if self.roll(faults.eio_open) {
            self.inject(ctx, FaultKind::EioOpen);
            return Err(errors::eio());
        }
        if comps.is_empty() {
            return Err(if o.create_new {
                errors::exists()
            } else {
                errors::is_dir()
            });
        }
        let (dir, name) = self.resolve_parent(comps)?;
        let existing = self.dir(dir).and_then(|d| d.vol.get(&name).copied());
        let ino = match existing {
            Some(ino) => {
                if o.create_new {
                    return Err(errors::exists());
                }
                let unit = self.unit;
                match self.inodes.get_mut(&ino) {
                    Some(Inode::File(f)) => {
                        if o.truncate {
                            f.set_vol_len(unit, 0);
                        }
                    }
                    Some(Inode::Dir(_)) => return Err(errors::is_dir()),
                    None => return Err(errors::not_found()),
                }
                ino
            }
            None => {
                if !(o.create || o.create_new) {
                    return Err(errors::not_found());
                }
                if self.roll(faults.enospc_metadata) {
                    self.inject(ctx, FaultKind::EnospcMetadata);
                    return Err(errors::no_space());
                }
                let ino = self.alloc_inode(Inode::File(FileNode::default()));
                self.link_live(dir, &name, ino);
                self.push_op(vec![(dir, Change::Link { name, ino })]);
                if self.roll(faults.eio_create_after_effect) {
                    // The file exists (live, its link pending like any
                    // create's); the caller gets no handle.
                    ctx.ino = Some(ino);
                    self.inject(ctx, FaultKind::EioCreateAfterEffect);
                    return Err(errors::eio());
                }
                ino
            }
        };
        ctx.ino = Some(ino);
        let seen_errseq = self.file(ino).map_or(0, |f| f.errseq);
        let id = self.next_handle;
        self.next_handle += 1;
        self.handles.insert(
            id,
            HandleState {
                ino,
                read: o.read,
                write: o.write,
                seen_errseq,
            },
        );
        Ok(Opened { id, ino })
    }

    /// Adds a live entry (replacing any), without recording an operation.
    fn link_live(&mut self, dir: u64, name: &str, ino: u64) {
        if let Some(d) = self.dir_mut(dir) {
            d.vol.insert(name.to_string(), ino);
        }
    }

    pub(crate) fn op_create_dir_all(&mut self, ctx: &mut Ctx, comps: &Components) -> io::Result<()> {
        let mut cur = super::state::ROOT;
        for (i, name) in comps.iter().enumerate() {
            let last = i + 1 == comps.len();
            let Some(d) = self.dir(cur) else {
                return Err(errors::not_dir());
            };
            match d.vol.get(name).copied() {
                Some(ino) => {
                    if self.dir(ino).is_none() {
                        return Err(if last { errors::exists() } else { errors::not_dir() });
                    }
                    cur = ino;
                }
                None => {
                    let p = self.faults.enospc_metadata;
                    if self.roll(p) {
                        self.inject(ctx, FaultKind::EnospcMetadata);
                        return Err(errors::no_space());
                    }
                    let ino = self.alloc_inode(Inode::Dir(DirNode::default()));
                    self.link_live(cur, name, ino);
                    self.push_op(vec![(
                        cur,
                        Change::Link {
                            name: name.clone(),
                            ino,
                        },
                    )]);
                    cur = ino;
                }
            }
        }
        ctx.ino = Some(cur);
        Ok(())
    }

    pub(crate) fn op_read_dir(&mut self, ctx: &mut Ctx, comps: &Components) -> io::Result<Vec<DirEntry>> {
        let ino = self.resolve(comps, View::Live)?;
        ctx.ino = Some(ino);
        let Some(d) = self.dir(ino) else {
            return Err(errors::not_dir());
        };
        Ok(d.vol
            .iter()
            .map(|(name, child)| DirEntry {
                name: name.clone(),
                is_dir: self.dir(*child).is_some(),
            })
            .collect())
    }

    pub(crate) fn op_metadata(&mut self, ctx: &mut Ctx, comps: &Components) -> io::Result<Metadata> {
        let ino = self.resolve(comps, View::Live)?;
        ctx.ino = Some(ino);
        Ok(match self.inodes.get(&ino) {
            Some(Inode::File(f)) => Metadata {
                len: f.vol.len,
                is_dir: false,
            },
            Some(Inode::Dir(_)) => Metadata { len: 0, is_dir: true },
            None => return Err(errors::not_found()),
        })
    }

    pub(crate) fn op_rename(&mut self, ctx: &mut Ctx, from: &Components, to: &Components) -> io::Result<()> {
        if from.is_empty() || to.is_empty() {
            return Err(errors::busy());
        }
        // Like Linux: both parents are resolved before the source is looked up.
        let (from_dir, from_name) = self.resolve_parent(from)?;
        let (to_dir, to_name) = self.resolve_parent(to)?;
        let Some(src) = self.dir(from_dir).and_then(|d| d.vol.get(&from_name).copied()) else {
            return Err(errors::not_found());
        };
        ctx.ino = Some(src);
        if from == to {
            return Ok(());
        }
        let src_is_dir = self.dir(src).is_some();
        if to.len() < from.len() && from[..to.len()] == to[..] {
            // The target is an ancestor of the source: Linux says ENOTEMPTY
            // before it looks at the kinds.
            return Err(errors::not_empty());
        }
        if src_is_dir && to.len() > from.len() && to[..from.len()] == from[..] {
            // A directory cannot move into itself.
            return Err(errors::invalid());
        }
        let dst = self.dir(to_dir).and_then(|d| d.vol.get(&to_name).copied());
        if let Some(dst) = dst {
            match (src_is_dir, self.dir(dst)) {
                (false, Some(_)) => return Err(errors::is_dir()),
                (true, None) => return Err(errors::not_dir()),
                (true, Some(d)) if !d.vol.is_empty() => return Err(errors::not_empty()),
                _ => {}
            }
        }
        let faults = self.faults;
        if self.roll(faults.eio_rename) {
            self.inject(ctx, FaultKind::EioRename);
            return Err(errors::eio());
        }
        if self.roll(faults.enospc_metadata) {
            self.inject(ctx, FaultKind::EnospcMetadata);
            return Err(errors::no_space());
        }
        if let Some(d) = self.dir_mut(from_dir) {
            d.vol.remove(&from_name);
        }
        self.link_live(to_dir, &to_name, src);
        self.push_op(vec![
            (
                from_dir,
                Change::Unlink {
                    name: from_name,
                    ino: src,
                },
            ),
            (
                to_dir,
                Change::Link {
                    name: to_name,
                    ino: src,
                },
            ),
        ]);
        self.gc_soon();
        if self.roll(faults.eio_rename_after_effect) {
            // Renamed exactly as a successful rename, then the error.
            self.inject(ctx, FaultKind::EioRenameAfterEffect);
            return Err(errors::eio());
        }
        Ok(())
    }

    pub(crate) fn op_remove_file(&mut self, ctx: &mut Ctx, comps: &Components) -> io::Result<()> {
        if comps.is_empty() {
            return Err(errors::is_dir());
        }
        let (dir, name) = self.resolve_parent(comps)?;
        let Some(ino) = self.dir(dir).and_then(|d| d.vol.get(&name).copied()) else {
            return Err(errors::not_found());
        };
        ctx.ino = Some(ino);
        if self.dir(ino).is_some() {
            return Err(errors::is_dir());
        }
        let p = self.faults.eio_remove;
        if self.roll(p) {
            self.inject(ctx, FaultKind::EioRemove);
            return Err(errors::eio());
        }
        if let Some(d) = self.dir_mut(dir) {
            d.vol.remove(&name);
        }
        self.push_op(vec![(dir, Change::Unlink { name, ino })]);
        self.gc_soon();
        let p = self.faults.eio_remove_after_effect;
        if self.roll(p) {
            // Removed exactly as a successful remove, then the error.
            self.inject(ctx, FaultKind::EioRemoveAfterEffect);
            return Err(errors::eio());
        }
        Ok(())
    }

    pub(crate) fn op_lock_dir(&mut self, ctx: &mut Ctx, comps: &Components, shared: bool) -> io::Result<Opened> {
        let ino = self.resolve(comps, View::Live)?;
        ctx.ino = Some(ino);
        if self.dir(ino).is_none() {
            return Err(errors::not_dir());
        }
        if self.locks.get(&ino).is_some_and(|held| held.exclusive || !shared) {
            return Err(errors::would_block());
        }
        let id = self.next_lock;
        self.next_lock += 1;
        let held = self.locks.entry(ino).or_default();
        held.exclusive = !shared;
        held.ids.insert(id);
        Ok(Opened { id, ino })
    }

    // ----- File -----

    pub(crate) fn op_read(&mut self, ctx: &mut Ctx, id: u64, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let h = self.handle(id)?;
        if !h.read {
            return Err(errors::bad_fd());
        }
        let len = self.file(h.ino).map_or(0, |f| f.vol.len);
        if buf.is_empty() || offset >= len {
            return Ok(0);
        }
        let mut n = (buf.len() as u64).min(len - offset);
        let faults = self.faults;
        if self.roll(faults.eio_read) {
            self.inject(ctx, FaultKind::EioRead);
            return Err(errors::eio());
        }
        let first = offset / super::state::SECTOR;
        let last = (offset + n - 1) / super::state::SECTOR;
        let bad = self
            .file(h.ino)
            .is_some_and(|f| f.bad_sectors.range(first..=last).next().is_some());
        if bad {
            self.inject(ctx, FaultKind::LatentSectorRead);
            return Err(errors::eio());
        }
        if n > 1 && self.roll(faults.short_read) {
            n = 1 + self.below(n - 1);
            self.inject(ctx, FaultKind::ShortRead);
        }
        let unit = self.unit;
        let Some(f) = self.file(h.ino) else {
            return Ok(0);
        };
        Ok(f.vol.read(unit, offset, &mut buf[..n as usize]))
    }

    pub(crate) fn op_write(&mut self, ctx: &mut Ctx, id: u64, buf: &[u8], offset: u64) -> io::Result<usize> {
        let h = self.handle(id)?;
        if !h.write {
            return Err(errors::bad_fd());
        }
        if buf.is_empty() {
            return Ok(0);
        }
        if offset >= MAX_FILE_SIZE {
            return Err(errors::too_large());
        }
        let mut n = (buf.len() as u64).min(MAX_FILE_SIZE - offset);
        let faults = self.faults;
        if self.roll(faults.eio_write) {
            self.inject(ctx, FaultKind::EioWrite);
            return Err(errors::eio());
        }
        if self.roll(faults.enospc_write) {
            self.inject(ctx, FaultKind::EnospcWrite);
            return Err(errors::no_space());
        }
        let cur_len = self.file(h.ino).map_or(0, |f| f.vol.len);
        if offset + n > cur_len && self.capacity.is_some() {
            let avail = self.available();
            let fit = cur_len.saturating_add(avail).saturating_sub(offset).min(n);
            if fit == 0 {
                self.inject(ctx, FaultKind::EnospcWrite);
                return Err(errors::no_space());
            }
            if fit < n {
                n = fit;
                self.inject(ctx, FaultKind::ShortWrite);
            }
        }
        // Takes effect (whole, or a seeded non-empty prefix), then EIO.
        let after_effect = self.roll(faults.eio_write_after_effect);
        if after_effect {
            n = 1 + self.below(n);
            self.inject(ctx, FaultKind::EioWriteAfterEffect);
        }
        let unit = self.unit;
        let Some(f) = self.file_mut(h.ino) else {
            return Err(errors::stale());
        };
        let data = &buf[..n as usize];
        f.vol.write(unit, offset, data);
        let end = offset + n;
        super::state::insert_range(&mut f.dirty, offset / unit..end.div_ceil(unit));
        let first = offset / super::state::SECTOR;
        let last = (end - 1) / super::state::SECTOR;
        let rewritten: Vec<u64> = f.bad_sectors.range(first..=last).copied().collect();
        for s in rewritten {
            f.bad_sectors.remove(&s);
        }
        if after_effect {
            return Err(errors::eio());
        }
        Ok(n as usize)
    }

    pub(crate) fn op_set_len(&mut self, ctx: &mut Ctx, id: u64, len: u64) -> io::Result<()> {
        let h = self.handle(id)?;
        if !h.write {
            // Linux ftruncate on a descriptor not open for writing: EINVAL.
            return Err(errors::invalid());
        }
        if len > MAX_FILE_SIZE {
            return Err(errors::too_large());
        }
        let unit = self.unit;
        if let Some(f) = self.file_mut(h.ino) {
            f.set_vol_len(unit, len);
        }
        let p = self.faults.eio_set_len_after_effect;
        if self.roll(p) {
            // The new length is in place, exactly as after a successful
            // `set_len`; then the error.
            self.inject(ctx, FaultKind::EioSetLenAfterEffect);
            return Err(errors::eio());
        }
        Ok(())
    }

    pub(crate) fn op_allocate(&mut self, ctx: &mut Ctx, id: u64, len: u64) -> io::Result<()> {
        let h = self.handle(id)?;
        if !h.write {
            return Err(errors::bad_fd());
        }
        if len > MAX_FILE_SIZE {
            return Err(errors::too_large());
        }
        let cur = self.file(h.ino).map_or(0, |f| f.vol.len);
        if len <= cur {
            return Ok(());
        }
        if len - cur > self.available() {
            self.inject(ctx, FaultKind::EnospcWrite);
            return Err(errors::no_space());
        }
        let unit = self.unit;
        if let Some(f) = self.file_mut(h.ino) {
            f.set_vol_len(unit, len);
        }
        Ok(())
    }

    pub(crate) fn op_len(&mut self, _ctx: &mut Ctx, id: u64) -> io::Result<u64> {
        let h = self.handle(id)?;
        Ok(self.file(h.ino).map_or(0, |f| f.vol.len))
    }

    pub(crate) fn op_sync(&mut self, ctx: &mut Ctx, id: u64) -> io::Result<()> {
        let h = self.handle(id)?;
        self.sync_file(ctx, id, h.ino)
    }
}
