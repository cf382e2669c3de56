//! The on-disk format as a pure codec: segment headers and record frames. No I/O.
//!
//! `docs/FORMAT.md` specifies every byte; this module is the reference
//! implementation and the fuzz targets call it directly. Every decoder checks
//! a length against [`MAX_RECORD_BYTES`] before it allocates, and accepts only
//! bytes the encoder could have written (reserved fields and padding zero), so
//! anything accepted re-encodes to the same bytes.

use crc32fast::Hasher;

/// Magic bytes at the start of every segment file.
pub const SEGMENT_MAGIC: [u8; 8] = *b"SIMWAL\x00\x01";
/// The format version this code writes: 2, whose segment header carries the
/// log id. Version 1 (no log id) is still read: see [`SegmentHeader::log_id`].
pub const FORMAT_VERSION: u32 = 2;
/// The first format version, read but never written by this code.
pub const FORMAT_VERSION_V1: u32 = 1;
/// Size of the segment header in bytes; the first frame starts here.
pub const SEGMENT_HEADER_BYTES: usize = 64;
/// Size of a frame header in bytes.
pub const FRAME_HEADER_BYTES: usize = 32;
/// Frames start at multiples of this many bytes (relative to the file start).
pub const FRAME_ALIGN_BYTES: usize = 8;
/// The largest payload a record may have: 64 MiB. Checked before any allocation.
pub const MAX_RECORD_BYTES: u32 = 64 << 20;

/// What a frame is. `0` is reserved for unwritten (zeroed) space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrameKind {
    /// A single record that commits itself.
    Record = 1,
    /// A member of an atomic batch; not committed until the batch's `BatchEnd`.
    BatchMember = 2,
    /// The last member of an atomic batch: it commits the whole batch.
    BatchEnd = 3,
    /// Zero payload that fills space up to an alignment boundary; holds no
    /// record. Its `index` is the index of the next record.
    Padding = 4,
}

impl FrameKind {
    fn from_u8(b: u8) -> Option<FrameKind> {
        match b {
            1 => Some(FrameKind::Record),
            2 => Some(FrameKind::BatchMember),
            3 => Some(FrameKind::BatchEnd),
            4 => Some(FrameKind::Padding),
            _ => None,
        }
    }

    /// Whether a frame of this kind ends a commit unit (a single record or a batch).
    pub fn commits(self) -> bool {
        matches!(self, FrameKind::Record | FrameKind::BatchEnd)
    }
}

/// The decoded header of a segment file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SegmentHeader {
    /// Never reused within a log directory.
    pub segment_id: u64,
    /// Index of the first record this segment holds (or will hold).
    pub first_index: u64,
    /// Per-segment salt mixed into every frame checksum.
    pub salt: u32,
    /// The id of the log this segment belongs to, chosen at random when the
    /// log was created; recovery refuses a segment of another log. `0` only
    /// in a format-1 header, written before logs had an identity: `encode`
    /// writes format 1 for it, format 2 otherwise.
    pub log_id: u128,
}

/// Why bytes did not decode as a segment header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderError {
    /// Fewer than [`SEGMENT_HEADER_BYTES`] bytes.
    Short,
    /// All zero: a segment whose header was never written.
    Unwritten,
    /// Wrong magic bytes.
    BadMagic,
    /// An intact header (checksum valid) of a format version this code
    /// does not read.
    UnsupportedVersion(u32),
    /// The checksum does not match, or a v1 reserved field is not zero.
    BadChecksum,
}

impl std::fmt::Display for HeaderError {
    /// A phrase for error messages, e.g. "bad segment header: {e}".
    ///
    /// ```
    /// assert_eq!(wal::codec::HeaderError::BadChecksum.to_string(), "its checksum does not match");
    /// ```
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeaderError::Short => write!(f, "shorter than the {SEGMENT_HEADER_BYTES}-byte header"),
            HeaderError::Unwritten => write!(f, "all zero (never written)"),
            HeaderError::BadMagic => write!(f, "not a segment header (wrong magic bytes)"),
            HeaderError::UnsupportedVersion(v) => write!(f, "format version {v}, which this version does not read"),
            HeaderError::BadChecksum => write!(f, "its checksum does not match"),
        }
    }
}

impl SegmentHeader {
    /// Encodes the header into its 64 bytes.
    ///
    /// ```
    /// use wal::codec::{SegmentHeader, SEGMENT_HEADER_BYTES};
    /// let h = SegmentHeader { segment_id: 3, first_index: 100, salt: 7, log_id: 0xfeed };
    /// let bytes = h.encode();
    /// assert_eq!(bytes.len(), SEGMENT_HEADER_BYTES);
    /// assert_eq!(SegmentHeader::decode(&bytes), Ok(h));
    /// ```
    pub fn encode(&self) -> [u8; SEGMENT_HEADER_BYTES] {
        let mut b = [0u8; SEGMENT_HEADER_BYTES];
        b[0..8].copy_from_slice(&SEGMENT_MAGIC);
        let version = if self.log_id == 0 {
            FORMAT_VERSION_V1
        } else {
            FORMAT_VERSION
        };
        b[8..12].copy_from_slice(&version.to_le_bytes());
        b[12..16].copy_from_slice(&(SEGMENT_HEADER_BYTES as u32).to_le_bytes());
        b[16..24].copy_from_slice(&self.segment_id.to_le_bytes());
        b[24..32].copy_from_slice(&self.first_index.to_le_bytes());
        b[32..36].copy_from_slice(&self.salt.to_le_bytes());
        // 36..52 the log id (format 2; zero in format 1), 52..60 reserved, zero.
        b[36..52].copy_from_slice(&self.log_id.to_le_bytes());
        let crc = crc32fast::hash(&b[0..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes a header from the first [`SEGMENT_HEADER_BYTES`] of `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<SegmentHeader, HeaderError> {
        let b = bytes.get(..SEGMENT_HEADER_BYTES).ok_or(HeaderError::Short)?;
        if b.iter().all(|&x| x == 0) {
            return Err(HeaderError::Unwritten);
        }
        if b[0..8] != SEGMENT_MAGIC {
            return Err(HeaderError::BadMagic);
        }
        // The checksum first: only an intact header can claim another version
        // (torn garbage must not look like a file from the future).
        if le_u32(&b[60..64]) != crc32fast::hash(&b[0..60]) {
            return Err(HeaderError::BadChecksum);
        }
        let version = le_u32(&b[8..12]);
        if version != FORMAT_VERSION && version != FORMAT_VERSION_V1 {
            return Err(HeaderError::UnsupportedVersion(version));
        }
        let mut id = [0u8; 16];
        id.copy_from_slice(&b[36..52]);
        let log_id = u128::from_le_bytes(id);
        // Format 1 has no log id; format 2 always has one.
        let id_ok = (version == FORMAT_VERSION_V1) == (log_id == 0);
        let header_len = le_u32(&b[12..16]);
        let reserved_zero = b[52..60].iter().all(|&x| x == 0);
        if header_len != SEGMENT_HEADER_BYTES as u32 || !reserved_zero || !id_ok {
            return Err(HeaderError::BadChecksum);
        }
        Ok(SegmentHeader {
            segment_id: le_u64(&b[16..24]),
            first_index: le_u64(&b[24..32]),
            salt: le_u32(&b[32..36]),
            log_id,
        })
    }

    /// Whether `other` is the header of the same segment of the same log
    /// (`other.log_id` 0, a format-1 header, matches any log).
    pub fn same_segment(&self, other: &SegmentHeader) -> bool {
        self.segment_id == other.segment_id
            && self.first_index == other.first_index
            && self.salt == other.salt
            && (other.log_id == 0 || other.log_id == self.log_id)
    }

    /// The checksum seed that binds frames to this segment: frames copied from
    /// another segment (or a recycled file) fail their checksum here.
    pub fn frame_seed(&self) -> FrameSeed {
        FrameSeed {
            segment_id: self.segment_id,
            salt: self.salt,
        }
    }
}

/// What binds a frame's checksum to its segment: the segment id and salt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FrameSeed {
    /// The segment's id.
    pub segment_id: u64,
    /// The segment's salt.
    pub salt: u32,
}

impl FrameSeed {
    /// A checksum state with the seed already hashed (clone it per frame).
    pub(crate) fn hasher(&self) -> Hasher {
        let mut h = Hasher::new();
        h.update(&self.salt.to_le_bytes());
        h.update(&self.segment_id.to_le_bytes());
        h
    }
}

/// The decoded header of one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FrameHeader {
    /// Payload length in bytes, at most [`MAX_RECORD_BYTES`].
    pub len: u32,
    /// The record's index.
    pub index: u64,
    /// Every record with a lower index was durable when this frame was
    /// written. Recovery uses it to tell a torn tail from mid-log corruption.
    pub durable_next: u64,
    /// Record, batch member or batch end.
    pub kind: FrameKind,
}

/// Why bytes at a frame position did not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// Fewer than [`FRAME_HEADER_BYTES`] bytes, or the payload runs past the
    /// end of the bytes given.
    Short,
    /// An all-zero header: unwritten space, the clean end of the log.
    Unwritten,
    /// The header checksum does not match, or a field is out of range.
    BadHeader,
    /// The header is intact but the payload checksum does not match.
    BadPayload,
}

impl std::fmt::Display for FrameError {
    /// A phrase for error messages, e.g. "{e} at offset 64".
    ///
    /// ```
    /// assert_eq!(wal::codec::FrameError::BadPayload.to_string(), "a frame whose payload checksum does not match");
    /// ```
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Short => write!(f, "a frame cut short (it runs past the end of the file)"),
            FrameError::Unwritten => write!(f, "unwritten space (an all-zero frame header)"),
            FrameError::BadHeader => write!(f, "a damaged frame header (checksum or a field out of range)"),
            FrameError::BadPayload => write!(f, "a frame whose payload checksum does not match"),
        }
    }
}

impl FrameHeader {
    /// Total bytes the frame takes on disk: header, payload, zero padding to
    /// [`FRAME_ALIGN_BYTES`].
    ///
    /// ```
    /// assert_eq!(wal::codec::frame_len(0), 32);
    /// assert_eq!(wal::codec::frame_len(1), 40);
    /// assert_eq!(wal::codec::frame_len(8), 40);
    /// ```
    pub fn frame_len(&self) -> usize {
        frame_len(self.len as usize)
    }
}

/// Total on-disk size of a frame with a payload of `payload_len` bytes.
pub fn frame_len(payload_len: usize) -> usize {
    let raw = FRAME_HEADER_BYTES + payload_len;
    raw.div_ceil(FRAME_ALIGN_BYTES) * FRAME_ALIGN_BYTES
}

/// Bytes of padding frame needed at `offset` so that the next frame starts
/// at a multiple of `alignment` (0 if it already does). Never less than a
/// frame header: if the gap is smaller, the padding reaches one boundary
/// further. `offset` must be a multiple of [`FRAME_ALIGN_BYTES`].
///
/// ```
/// use wal::codec::padding_len;
/// assert_eq!(padding_len(4096, 4096), 0);
/// assert_eq!(padding_len(64, 4096), 4032);
/// assert_eq!(padding_len(4080, 4096), 16 + 4096);
/// assert_eq!(padding_len(72, 8), 0);
/// assert_eq!(padding_len(104, 16), 40);
/// ```
pub fn padding_len(offset: u64, alignment: u64) -> usize {
    let rem = offset % alignment;
    if rem == 0 {
        return 0;
    }
    let mut gap = alignment - rem;
    while gap < FRAME_HEADER_BYTES as u64 {
        gap += alignment;
    }
    gap as usize
}

/// Appends a padding frame of exactly `total_bytes` (a multiple of
/// [`FRAME_ALIGN_BYTES`], at least [`FRAME_HEADER_BYTES`]) to `out`.
/// `next_index` is the index of the record that will follow.
pub fn encode_padding(out: &mut Vec<u8>, seed: FrameSeed, next_index: u64, durable_next: u64, total_bytes: usize) {
    assert!(total_bytes >= FRAME_HEADER_BYTES && total_bytes % FRAME_ALIGN_BYTES == 0);
    let zeros = vec![0u8; total_bytes - FRAME_HEADER_BYTES];
    encode_frame(out, seed, FrameKind::Padding, next_index, durable_next, &zeros);
}

/// Appends the encoded frame for one record to `out`.
///
/// `payload.len()` must be at most [`MAX_RECORD_BYTES`]; callers check it
/// first and return a typed error (this function asserts it).
///
/// ```
/// use wal::codec::*;
/// let seed = SegmentHeader { segment_id: 1, first_index: 0, salt: 9, log_id: 1 }.frame_seed();
/// let mut buf = Vec::new();
/// encode_frame(&mut buf, seed, FrameKind::Record, 5, 5, b"hello");
/// let (h, payload) = decode_frame(&buf, seed).unwrap();
/// assert_eq!((h.index, payload), (5, &b"hello"[..]));
/// ```
pub fn encode_frame(
    out: &mut Vec<u8>,
    seed: FrameSeed,
    kind: FrameKind,
    index: u64,
    durable_next: u64,
    payload: &[u8],
) {
    encode_frame_seeded(out, &seed.hasher(), kind, index, durable_next, payload);
}

/// [`encode_frame`] with the seed already hashed (`FrameSeed::hasher`, kept
/// by the writer per segment): the append path hashes it once per segment,
/// not once per frame.
pub(crate) fn encode_frame_seeded(
    out: &mut Vec<u8>,
    seeded: &Hasher,
    kind: FrameKind,
    index: u64,
    durable_next: u64,
    payload: &[u8],
) {
    assert!(payload.len() <= MAX_RECORD_BYTES as usize, "record too large");
    let start = out.len();
    let mut h = [0u8; FRAME_HEADER_BYTES];
    h[4..8].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    h[8..16].copy_from_slice(&index.to_le_bytes());
    h[16..24].copy_from_slice(&durable_next.to_le_bytes());
    h[24] = kind as u8;
    // 25..28 flags and reserved: zero.
    let mut hh = seeded.clone();
    hh.update(&h[4..28]);
    let header_crc = hh.clone().finalize();
    h[28..32].copy_from_slice(&header_crc.to_le_bytes());
    hh.update(&h[28..32]);
    hh.update(payload);
    h[0..4].copy_from_slice(&hh.finalize().to_le_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(payload);
    out.resize(start + frame_len(payload.len()), 0);
}

/// Decodes only the frame header at the start of `bytes` (checking the header
/// checksum and field ranges), so a reader knows how many bytes to fetch
/// before it allocates.
pub fn decode_frame_header(bytes: &[u8], seed: FrameSeed) -> Result<FrameHeader, FrameError> {
    decode_header_hashing(bytes, &seed.hasher()).map(|(header, _)| header)
}

/// [`decode_frame_header`], also returning the frame checksum's state after
/// the header fields, so a whole-frame check does not hash them twice.
fn decode_header_hashing(bytes: &[u8], seeded: &Hasher) -> Result<(FrameHeader, Hasher), FrameError> {
    let h = bytes.get(..FRAME_HEADER_BYTES).ok_or(FrameError::Short)?;
    if h.iter().all(|&x| x == 0) {
        return Err(FrameError::Unwritten);
    }
    let mut hh = seeded.clone();
    hh.update(&h[4..28]);
    if hh.clone().finalize() != le_u32(&h[28..32]) {
        return Err(FrameError::BadHeader);
    }
    let len = le_u32(&h[4..8]);
    let kind = FrameKind::from_u8(h[24]).ok_or(FrameError::BadHeader)?;
    if len > MAX_RECORD_BYTES || h[25..28] != [0, 0, 0] {
        return Err(FrameError::BadHeader);
    }
    let index = le_u64(&h[8..16]);
    let durable_next = le_u64(&h[16..24]);
    if durable_next > index {
        return Err(FrameError::BadHeader);
    }
    let header = FrameHeader {
        len,
        index,
        durable_next,
        kind,
    };
    Ok((header, hh))
}

/// Decodes one whole frame at the start of `bytes`: header, payload checksum
/// and zero padding. Returns the header and a slice of the payload.
pub fn decode_frame(bytes: &[u8], seed: FrameSeed) -> Result<(FrameHeader, &[u8]), FrameError> {
    decode_frame_seeded(bytes, &seed.hasher())
}

/// [`decode_frame`] with the seed already hashed (`FrameSeed::hasher`), for
/// readers that decode many frames of one segment.
pub(crate) fn decode_frame_seeded<'b>(bytes: &'b [u8], seeded: &Hasher) -> Result<(FrameHeader, &'b [u8]), FrameError> {
    let (header, mut hh) = decode_header_hashing(bytes, seeded)?;
    let total = header.frame_len();
    let frame = bytes.get(..total).ok_or(FrameError::Short)?;
    let payload_end = FRAME_HEADER_BYTES + header.len as usize;
    let payload = &frame[FRAME_HEADER_BYTES..payload_end];
    // The frame checksum covers bytes 4..32 (the header fields were hashed
    // above) and the payload.
    hh.update(&frame[28..FRAME_HEADER_BYTES]);
    hh.update(payload);
    let padding_zero = frame[payload_end..].iter().all(|&x| x == 0);
    if hh.finalize() != le_u32(&frame[0..4]) || !padding_zero {
        return Err(FrameError::BadPayload);
    }
    Ok((header, payload))
}

fn le_u32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_le_bytes(a)
}

fn le_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn seed() -> FrameSeed {
        SegmentHeader {
            segment_id: 42,
            first_index: 10,
            salt: 0xdead_beef,
            log_id: 5,
        }
        .frame_seed()
    }

    #[test]
    fn zero_header_is_unwritten() {
        assert_eq!(decode_frame(&[0u8; 64], seed()), Err(FrameError::Unwritten));
        assert_eq!(SegmentHeader::decode(&[0u8; 64]), Err(HeaderError::Unwritten));
    }

    #[test]
    fn frame_from_another_segment_does_not_validate() {
        let mut buf = Vec::new();
        encode_frame(&mut buf, seed(), FrameKind::Record, 10, 10, b"abc");
        let other = FrameSeed {
            segment_id: 43,
            salt: 0xdead_beef,
        };
        assert_eq!(decode_frame(&buf, other), Err(FrameError::BadHeader));
        let other_salt = FrameSeed {
            segment_id: 42,
            salt: 1,
        };
        assert_eq!(decode_frame(&buf, other_salt), Err(FrameError::BadHeader));
    }

    #[test]
    fn oversized_length_is_rejected_before_allocation() {
        let mut buf = Vec::new();
        encode_frame(&mut buf, seed(), FrameKind::Record, 1, 0, b"");
        // Forge a header with a huge length and a valid header checksum.
        buf[4..8].copy_from_slice(&(MAX_RECORD_BYTES + 1).to_le_bytes());
        let mut hh = seed().hasher();
        hh.update(&buf[4..28]);
        let crc = hh.finalize();
        buf[28..32].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(decode_frame_header(&buf, seed()), Err(FrameError::BadHeader));
    }

    #[test]
    fn payload_flip_is_detected() {
        let mut buf = Vec::new();
        encode_frame(&mut buf, seed(), FrameKind::BatchEnd, 7, 3, b"payload");
        buf[FRAME_HEADER_BYTES + 2] ^= 1;
        assert_eq!(decode_frame(&buf, seed()), Err(FrameError::BadPayload));
    }

    #[test]
    fn truncated_frame_is_short() {
        let mut buf = Vec::new();
        encode_frame(&mut buf, seed(), FrameKind::Record, 7, 3, b"payload");
        assert_eq!(decode_frame(&buf[..buf.len() - 1], seed()), Err(FrameError::Short));
        assert_eq!(decode_frame(&buf[..5], seed()), Err(FrameError::Short));
    }

    proptest! {
        #[test]
        fn frames_round_trip(
            index in any::<u64>(),
            lag in any::<u64>(),
            kind in 1u8..=3,
            payload in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let kind = FrameKind::from_u8(kind).unwrap();
            let durable_next = index.saturating_sub(lag);
            let mut buf = Vec::new();
            encode_frame(&mut buf, seed(), kind, index, durable_next, &payload);
            prop_assert_eq!(buf.len(), frame_len(payload.len()));
            prop_assert_eq!(buf.len() % FRAME_ALIGN_BYTES, 0);
            let (h, p) = decode_frame(&buf, seed()).unwrap();
            prop_assert_eq!(h, FrameHeader { len: payload.len() as u32, index, durable_next, kind });
            prop_assert_eq!(p, &payload[..]);
        }

        #[test]
        fn any_single_bit_flip_is_rejected(
            payload in proptest::collection::vec(any::<u8>(), 0..100),
            bit in any::<usize>(),
        ) {
            let mut buf = Vec::new();
            encode_frame(&mut buf, seed(), FrameKind::Record, 99, 50, &payload);
            let bit = bit % (buf.len() * 8);
            buf[bit / 8] ^= 1 << (bit % 8);
            prop_assert!(decode_frame(&buf, seed()).is_err());
        }

        #[test]
        fn decode_never_panics_and_accepted_bytes_reencode(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok((h, p)) = decode_frame(&bytes, seed()) {
                let mut again = Vec::new();
                encode_frame(&mut again, seed(), h.kind, h.index, h.durable_next, p);
                prop_assert_eq!(&again[..], &bytes[..again.len()]);
            }
            if let Ok(h) = SegmentHeader::decode(&bytes) {
                prop_assert_eq!(&h.encode()[..], &bytes[..SEGMENT_HEADER_BYTES]);
            }
        }

        #[test]
        fn segment_headers_round_trip(segment_id in any::<u64>(), first_index in any::<u64>(), salt in any::<u32>(), log_id in any::<u128>()) {
            let h = SegmentHeader { segment_id, first_index, salt, log_id };
            prop_assert_eq!(SegmentHeader::decode(&h.encode()), Ok(h));
        }
    }
}
