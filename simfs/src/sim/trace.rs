//! The operation trace: a bounded ring of [`TraceEvent`]s and a stable hash
//! folded over every event ever recorded (dropped ones included), used to
//! check that a seed replays byte for byte.

use std::collections::VecDeque;

use super::config::FaultKind;

/// One recorded operation of [`crate::SimFs`], from [`crate::SimFs::trace`].
///
/// ```
/// use simfs::{Fs, SimFs};
/// futures::executor::block_on(async {
///     let fs = SimFs::new(1);
///     fs.create_dir_all(std::path::Path::new("/d")).await.unwrap();
///     let last = fs.trace().pop().unwrap();
///     assert_eq!(last.op, "create_dir_all");
///     assert_eq!(last.result, "ok");
/// });
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TraceEvent {
    /// Position of the event in the whole run (0-based, never reset).
    pub seq: u64,
    /// Simulated time from the [`super::config::SimClock`], in nanoseconds.
    pub time_ns: u64,
    /// The operation, e.g. `"write"`, `"sync_data"`, `"rename"`, `"power_loss"`.
    pub op: &'static str,
    /// The inode involved, if any.
    pub ino: Option<u64>,
    /// The path involved, if any (the source for a rename).
    pub path: Option<String>,
    /// The destination of a rename (`None` for every other operation).
    pub to_path: Option<String>,
    /// Offset for reads and writes, new length for set_len/allocate.
    pub offset: u64,
    /// Length for reads and writes.
    pub len: u64,
    /// `"ok"`, `"ok:<n>"` for a byte count, or the error's kind.
    pub result: String,
    /// The fault injected into this operation, if any.
    pub fault: Option<FaultKind>,
}

/// A page that became durable at the wrong offset
/// ([`FaultKind::MisdirectedWrite`]), from [`crate::SimFs::misdirected_writes`].
///
/// ```
/// let m = simfs::MisdirectedWrite { seq: 3, ino: 4, from: 512, to: 0, len: 512 };
/// assert!(m.to + m.len <= m.from);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MisdirectedWrite {
    /// The `seq` of its `misdirected_write` trace event.
    pub seq: u64,
    /// The file's inode.
    pub ino: u64,
    /// Byte offset of the page whose bytes went astray (its durable bytes
    /// stayed as they were).
    pub from: u64,
    /// Byte offset of the page they landed on (its durable bytes are gone).
    pub to: u64,
    /// Page size in bytes (the atomic write unit).
    pub len: u64,
}

/// 64-bit FNV-1a, written out so the hash never depends on the platform or
/// on the standard library's hasher.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fnv64(u64);

impl Fnv64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    pub(crate) fn new() -> Self {
        Fnv64(Self::OFFSET)
    }
    pub(crate) fn bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }
    /// A length-prefixed string, so that ("ab","c") and ("a","bc") differ.
    pub(crate) fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.bytes(s.as_bytes());
    }
    pub(crate) fn finish(&self) -> u64 {
        self.0
    }
}

/// The ring of recent events plus the running hash.
#[derive(Debug)]
pub(crate) struct Trace {
    events: VecDeque<TraceEvent>,
    capacity: usize,
    next_seq: u64,
    hash: Fnv64,
}

impl Trace {
    pub(crate) fn new(capacity: usize) -> Self {
        Trace {
            events: VecDeque::with_capacity(capacity.min(1 << 16)),
            capacity,
            next_seq: 0,
            hash: Fnv64::new(),
        }
    }

    /// Records an event (its `seq` is assigned here) and folds it into the hash.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn record(
        &mut self,
        time_ns: u64,
        op: &'static str,
        ino: Option<u64>,
        path: Option<String>,
        offset: u64,
        len: u64,
        result: String,
        fault: Option<FaultKind>,
    ) {
        self.push(TraceEvent {
            seq: 0,
            time_ns,
            op,
            ino,
            path,
            to_path: None,
            offset,
            len,
            result,
            fault,
        });
    }

    /// Records an event, assigning its `seq`, and folds it into the hash.
    /// `to_path` is hashed last and only when present (renames), so the hash
    /// of every other event is what it was before the field existed.
    pub(crate) fn push(&mut self, mut ev: TraceEvent) {
        ev.seq = self.next_seq;
        self.next_seq += 1;
        let h = &mut self.hash;
        h.u64(ev.seq);
        h.u64(ev.time_ns);
        h.str(ev.op);
        match ev.ino {
            Some(i) => {
                h.bytes(&[1]);
                h.u64(i);
            }
            None => h.bytes(&[0]),
        }
        match &ev.path {
            Some(p) => {
                h.bytes(&[1]);
                h.str(p);
            }
            None => h.bytes(&[0]),
        }
        h.u64(ev.offset);
        h.u64(ev.len);
        h.str(&ev.result);
        match ev.fault {
            Some(k) => h.bytes(&[1, k as u8]),
            None => h.bytes(&[0]),
        }
        if let Some(to) = &ev.to_path {
            h.bytes(&[1]);
            h.str(to);
        }
        if self.capacity == 0 {
            return;
        }
        if self.events.len() >= self.capacity {
            self.events.pop_front();
        }
        self.events.push_back(ev);
    }

    /// The `seq` the next event will get.
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The `seq` of the last event recorded (0 before any).
    pub(crate) fn last_seq(&self) -> u64 {
        self.next_seq.saturating_sub(1)
    }

    pub(crate) fn events(&self) -> Vec<TraceEvent> {
        self.events.iter().cloned().collect()
    }

    /// The events still in the ring whose `seq` is at least `seq`.
    pub(crate) fn events_since(&self, seq: u64) -> Vec<TraceEvent> {
        let from = self.events.partition_point(|e| e.seq < seq);
        self.events.range(from..).cloned().collect()
    }

    pub(crate) fn hash(&self) -> u64 {
        self.hash.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_known_vector() {
        // FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c.
        let mut h = Fnv64::new();
        h.bytes(b"a");
        assert_eq!(h.finish(), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn ring_drops_old_events_but_hashes_them() {
        let mut a = Trace::new(2);
        let mut b = Trace::new(100);
        for t in [&mut a, &mut b] {
            for i in 0..5 {
                t.record(i, "x", Some(i), None, 0, 0, "ok".into(), None);
            }
        }
        assert_eq!(a.events().len(), 2);
        assert_eq!(a.events()[0].seq, 3);
        assert_eq!(a.hash(), b.hash());
        assert_eq!(a.events_since(0), a.events());
        assert_eq!(a.events_since(4).len(), 1);
        assert!(a.events_since(5).is_empty());
        assert_eq!(b.events_since(2), b.events()[2..].to_vec());
    }
}
