//! Helpers that build valid on-disk bytes: the salt, segment names, headers
//! and frames, so fuzz inputs reach deep into recovery quickly.

use wal::codec::{
    encode_frame, encode_padding, FrameKind, FrameSeed, SegmentHeader, FRAME_ALIGN_BYTES, FRAME_HEADER_BYTES,
};

/// The per-segment salt: `crc32(b"salt" || id_le || first_index_le)`.
///
/// A copy of the private `salt_for` in `wal/src/segment.rs` (docs/FORMAT.md §5.2).
///
/// ```
/// assert_eq!(wal_fuzz::gen::salt_for(1, 0), 0x91365E6C);
/// assert_eq!(wal_fuzz::gen::salt_for(2, 4), 0x3CB4E464);
/// ```
pub fn salt_for(id: u64, first_index: u64) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(b"salt");
    h.update(&id.to_le_bytes());
    h.update(&first_index.to_le_bytes());
    h.finalize()
}

/// The log id of every segment the generators build (format 2): one log.
pub const LOG_ID: u128 = 0x5741_4c46_555a_5a00_0000_0000_0000_0001;

/// The header a segment of [`LOG_ID`] with this id and first index must have.
pub fn header_for(id: u64, first_index: u64) -> SegmentHeader {
    SegmentHeader {
        segment_id: id,
        first_index,
        salt: salt_for(id, first_index),
        log_id: LOG_ID,
    }
}

/// `{first:020}-{last:020}-{id:016x}.wal`
pub fn sealed_name(first: u64, last: u64, id: u64) -> String {
    format!("{first:020}-{last:020}-{id:016x}.wal")
}

/// `{first:020}-active-{id:016x}.wal`
pub fn active_name(first: u64, id: u64) -> String {
    format!("{first:020}-active-{id:016x}.wal")
}

/// Builds the bytes of one segment file: header, then frames at the running
/// index, the way the writer lays them out.
#[derive(Clone, Debug)]
pub struct SegmentBuilder {
    /// The bytes so far.
    pub bytes: Vec<u8>,
    /// The frame seed of the segment.
    pub seed: FrameSeed,
    /// The index the next frame gets.
    pub next: u64,
}

impl SegmentBuilder {
    /// A segment with a valid header for `id` and `first`.
    pub fn new(id: u64, first: u64) -> Self {
        let header = header_for(id, first);
        SegmentBuilder {
            bytes: header.encode().to_vec(),
            seed: header.frame_seed(),
            next: first,
        }
    }

    /// Appends one record frame (`durable_next` = its own index: everything
    /// before was durable).
    pub fn record(mut self, payload: &[u8]) -> Self {
        let i = self.next;
        encode_frame(&mut self.bytes, self.seed, FrameKind::Record, i, i, payload);
        self.next += 1;
        self
    }

    /// Appends an atomic batch (members then an end frame).
    pub fn batch(mut self, payloads: &[&[u8]]) -> Self {
        let dn = self.next;
        for (k, p) in payloads.iter().enumerate() {
            let kind = if k + 1 == payloads.len() {
                FrameKind::BatchEnd
            } else {
                FrameKind::BatchMember
            };
            encode_frame(&mut self.bytes, self.seed, kind, self.next, dn, p);
            self.next += 1;
        }
        self
    }

    /// Appends a padding frame up to the next multiple of `align`.
    pub fn pad_to(mut self, align: u64) -> Self {
        let pad = wal::codec::padding_len(self.bytes.len() as u64, align);
        if pad > 0 {
            encode_padding(&mut self.bytes, self.seed, self.next, self.next, pad);
        }
        self
    }

    /// Appends `n` zero bytes (unwritten space).
    pub fn zeros(mut self, n: usize) -> Self {
        self.bytes.resize(self.bytes.len() + n, 0);
        self
    }

    /// Cuts `n` bytes off the end (a torn tail).
    pub fn cut(mut self, n: usize) -> Self {
        let len = self.bytes.len().saturating_sub(n);
        self.bytes.truncate(len);
        self
    }

    /// Flips one bit of the byte at `offset` (ignored past the end).
    pub fn flip(mut self, offset: usize) -> Self {
        if let Some(b) = self.bytes.get_mut(offset) {
            *b ^= 0x10;
        }
        self
    }

    /// The bytes.
    pub fn build(self) -> Vec<u8> {
        self.bytes
    }
}

/// Offset of the `n`-th frame (0-based) of a segment whose frames all carry
/// payloads of `payload_len` bytes.
pub fn frame_offset(n: usize, payload_len: usize) -> usize {
    wal::codec::SEGMENT_HEADER_BYTES + n * wal::codec::frame_len(payload_len)
}

/// Frames start at multiples of this.
pub const ALIGN: usize = FRAME_ALIGN_BYTES;
/// A frame header's size.
pub const HEADER: usize = FRAME_HEADER_BYTES;
