//! The single writer's state (the active segment, its write offset, the
//! encode and write buffers) and the admitted appends it writes. What the
//! writer does with them is group_commit.rs (group commit, sync, rotation)
//! and resume.rs (after a cancelled operation); only the holder of the
//! `writer` mutex touches a `Writer`.

use futures::channel::oneshot;
use simfs::Fs;

use crate::codec::{encode_frame_seeded, FrameKind};
use crate::error::Result;
use crate::recovery::Recovered;
use crate::segment::{Segment, ACTIVE_SPARSE_STRIDE};
use crate::sync::Arc;

/// The segment that holds the last record after a truncation, its
/// read-write handle and where its last frame ends.
pub(crate) type ActiveTail<F> = (Arc<Segment<F>>, Arc<<F as Fs>::File>, u64);

/// One admitted append waiting to be written.
pub(crate) struct Request {
    pub first_index: u64,
    pub records: Vec<Vec<u8>>,
    pub batch: bool,
    pub bytes: usize,
    pub done: oneshot::Sender<Result<u64>>,
}

/// The active segment as the writer sees it.
pub(crate) struct Active<F: Fs> {
    pub(crate) seg: Arc<Segment<F>>,
    pub(crate) file: Arc<F::File>,
    /// Where the next frame goes: the end of the last committed frame.
    pub(crate) write_offset: u64,
    pub(crate) records: u64,
    /// The file is zero-filled up to here (`Options::preallocate_bytes`), so
    /// writes below it change no file size and an fdatasync commits no
    /// metadata. At least `write_offset`.
    pub(crate) zeroed_until: u64,
    /// `seg.seed.hasher()`, computed once: the lean append path encodes with it.
    pub(crate) seeded: crc32fast::Hasher,
}

impl<F: Fs> Active<F> {
    /// Encodes one append's records (indices from `first`) at the end of
    /// `buf`, whose first byte goes at file offset `buf_offset`: a lone
    /// record is a `Record`, a batch is `BatchMember`s closed by a
    /// `BatchEnd`. Every `ACTIVE_SPARSE_STRIDE`-th index of the segment gets
    /// an entry in `sparse`. Shared by the group path and the lean buffered
    /// path, so both write the same bytes.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn encode_records(
        &self,
        buf: &mut Vec<u8>,
        buf_offset: u64,
        sparse: &mut Vec<(u64, u64)>,
        first: u64,
        records: &[Vec<u8>],
        batch: bool,
        durable_next: u64,
    ) {
        let n = records.len();
        for (i, payload) in records.iter().enumerate() {
            let index = first + i as u64;
            let kind = match (batch, i + 1 == n) {
                (false, _) => FrameKind::Record,
                (true, false) => FrameKind::BatchMember,
                (true, true) => FrameKind::BatchEnd,
            };
            if (index - self.seg.first_index) % ACTIVE_SPARSE_STRIDE == 0 {
                sparse.push((index, buf_offset + buf.len() as u64));
            }
            encode_frame_seeded(buf, &self.seeded, kind, index, durable_next, payload);
        }
    }
}

/// The single writer's state, behind the async `writer` mutex.
pub(crate) struct Writer<F: Fs> {
    pub(crate) active: Option<Active<F>>,
    /// Reused encode buffer.
    pub(crate) buf: Vec<u8>,
    /// Zeros for preallocation (kept to avoid reallocating).
    pub(crate) zeros: Vec<u8>,
    /// The write buffer: frames of acknowledged records of the active
    /// segment, not yet written; they go at `active.write_offset`. Empty
    /// whenever the active segment changes (seal, truncation, full prune).
    pub(crate) pending: Vec<u8>,
    /// Sparse-index entries of the pending frames (published when written).
    pub(crate) pending_sparse: Vec<(u64, u64)>,
    /// One past the last pending record (meaningful while `pending` is not
    /// empty).
    pub(crate) pending_next: u64,
    /// While a group's frames (in `buf`) are being written to the active
    /// segment: the offset they go to. A group commit dropped mid-write
    /// leaves it set, and `Writer::resume` writes the same bytes there again
    /// before it reads the files, so recovery never sees that write torn.
    pub(crate) inflight_write: Option<u64>,
}

impl<F: Fs> Writer<F> {
    pub(crate) fn new(rec: &Recovered<F>, segments: &[Arc<Segment<F>>]) -> Self {
        let active = match (&rec.active_file, segments.last()) {
            (Some(file), Some(seg)) if !seg.meta().sealed => {
                let m = seg.meta();
                Some(Active {
                    seg: seg.clone(),
                    file: file.clone(),
                    write_offset: m.end_offset,
                    records: m.last_index.map_or(0, |l| l - seg.first_index + 1),
                    zeroed_until: m.end_offset,
                    seeded: seg.seed.hasher(),
                })
            }
            _ => None,
        };
        Writer {
            active,
            buf: Vec::new(),
            zeros: Vec::new(),
            pending: Vec::new(),
            pending_sparse: Vec::new(),
            pending_next: 0,
            inflight_write: None,
        }
    }

    /// Forgets everything about the files and takes recovery's view of them
    /// (`Writer::resume`), keeping the buffers' capacity. Nothing may be
    /// buffered: resume writes the buffer first.
    pub(crate) fn reset_from(&mut self, rec: &Recovered<F>) {
        debug_assert!(self.pending.is_empty(), "resume writes the buffer first");
        let buf = std::mem::take(&mut self.buf);
        let zeros = std::mem::take(&mut self.zeros);
        *self = Writer::new(rec, &rec.segments);
        self.buf = buf;
        self.zeros = zeros;
    }
}

pub(crate) fn complete(requests: Vec<Request>, result: impl Fn(&Request) -> Result<u64>) {
    for r in requests {
        let res = result(&r);
        // The appender may have gone away (its future dropped): fine.
        let _ = r.done.send(res);
    }
}
