//! Self-describing record payloads: each non-empty record carries the id of
//! the writer that appended it, the writer's sequence number, its length and a
//! checksum of those, followed by bytes derived from them. The oracle can so tell
//! which append attempt a record read back came from, and regenerate the
//! exact bytes it must hold.

/// Bytes of the payload header: magic (2), writer (2), seq (8), len (4), checksum (4).
pub const HEADER: usize = 20;
const MAGIC: [u8; 2] = *b"SW";

/// Identifies one record of one append attempt: `(writer, seq)`.
pub type Key = (u16, u64);

/// What a payload read back decodes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decoded {
    /// An empty record (carries no identity).
    Empty,
    /// A well-formed record of writer `.0`, sequence `.1`.
    Record(Key),
    /// Bytes no append of this workload produces.
    Garbage,
}

fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A checksum of the header fields. The body is derived from them, so
/// [`matches`] (which regenerates it) checks the body; this only makes a
/// random header unlikely to decode.
fn checksum(writer: u16, seq: u64, len: u32) -> u32 {
    let h = mix64(mix64(u64::from(writer) << 48 ^ seq) ^ u64::from(len) ^ 0x5357_4348_4543_4b21);
    h as u32
}

/// The body word `i` of record `(writer, seq)`.
fn body_word(base: u64, i: u64) -> [u8; 8] {
    mix64(base ^ i).to_le_bytes()
}

/// The payload of record `(writer, seq)` of `len` bytes. `len` is 0 or at
/// least [`HEADER`]; a length in between is rounded up to [`HEADER`].
pub fn make(writer: u16, seq: u64, len: usize) -> Vec<u8> {
    if len == 0 {
        return Vec::new();
    }
    let len = len.max(HEADER);
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&writer.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    let len32 = u32::try_from(len).unwrap_or(u32::MAX);
    out.extend_from_slice(&len32.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    let base = mix64(u64::from(writer) << 48 ^ seq);
    let mut i = 0u64;
    while out.len() < len {
        let word = body_word(base, i);
        let take = (len - out.len()).min(8);
        out.extend_from_slice(&word[..take]);
        i += 1;
    }
    let c = checksum(writer, seq, len32);
    out[16..20].copy_from_slice(&c.to_le_bytes());
    out
}

/// Whether `p` is exactly `make(writer, seq, p.len())`, compared word by
/// word without building it (the oracle checks every record read back).
pub fn matches(writer: u16, seq: u64, p: &[u8]) -> bool {
    if p.is_empty() {
        return true;
    }
    let Ok(len32) = u32::try_from(p.len()) else {
        return false;
    };
    if p.len() < HEADER
        || p[..2] != MAGIC
        || p[2..4] != writer.to_le_bytes()
        || p[4..12] != seq.to_le_bytes()
        || p[12..16] != len32.to_le_bytes()
        || p[16..20] != checksum(writer, seq, len32).to_le_bytes()
    {
        return false;
    }
    let base = mix64(u64::from(writer) << 48 ^ seq);
    let mut words = p[HEADER..].chunks_exact(8);
    let mut i = 0u64;
    for chunk in &mut words {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        if word != body_word(base, i) {
            return false;
        }
        i += 1;
    }
    let rest = words.remainder();
    rest == &body_word(base, i)[..rest.len()]
}

/// Decodes a payload read back.
pub fn decode(p: &[u8]) -> Decoded {
    if p.is_empty() {
        return Decoded::Empty;
    }
    if p.len() < HEADER || p[..2] != MAGIC {
        return Decoded::Garbage;
    }
    let u16_at = |i: usize| u16::from_le_bytes([p[i], p[i + 1]]);
    let u32_at = |i: usize| u32::from_le_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]]);
    let writer = u16_at(2);
    let mut seq_bytes = [0u8; 8];
    seq_bytes.copy_from_slice(&p[4..12]);
    let seq = u64::from_le_bytes(seq_bytes);
    let len = u32_at(12);
    if len as usize != p.len() || u32_at(16) != checksum(writer, seq, len) {
        return Decoded::Garbage;
    }
    Decoded::Record((writer, seq))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for len in [0usize, 20, 21, 64, 1000] {
            let p = make(3, 77, len);
            assert_eq!(p.len(), len);
            let want = if len == 0 {
                Decoded::Empty
            } else {
                Decoded::Record((3, 77))
            };
            assert_eq!(decode(&p), want);
        }
        let mut p = make(1, 2, 100);
        assert!(matches(1, 2, &p));
        assert!(!matches(1, 3, &p));
        p[50] ^= 1;
        assert!(!matches(1, 2, &p), "a flipped body bit");
        p[50] ^= 1;
        p[99] ^= 1;
        assert!(!matches(1, 2, &p), "a flipped bit in the last word");
        for len in 20..=45 {
            let mut p = make(4, 9, len);
            assert!(matches(4, 9, &p), "length {len}");
            if let Some(last) = p.last_mut() {
                *last ^= 0x80;
            }
            assert!(!matches(4, 9, &p), "length {len}, last byte flipped");
        }
        p[50] ^= 1;
        p[13] ^= 1;
        assert_eq!(decode(&p), Decoded::Garbage, "a flipped header bit");
        assert_eq!(decode(&[1, 2, 3]), Decoded::Garbage);
    }
}
