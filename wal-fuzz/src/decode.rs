//! The `record_decode` target: arbitrary bytes into the pure codec.

use wal::codec::{
    decode_frame, decode_frame_header, encode_frame, frame_len, padding_len, FrameError, FrameSeed, HeaderError,
    SegmentHeader, FRAME_ALIGN_BYTES, FRAME_HEADER_BYTES, MAX_RECORD_BYTES, SEGMENT_HEADER_BYTES,
};

use crate::gen::header_for;

/// Most frames decoded in a row from one input.
const MAX_FRAMES: usize = 256;

/// Decodes `data` as a segment header and as frames (with a fixed seed, a
/// seed taken from the input's first 12 bytes, and the seed of a header that
/// decodes). Panics if a decoder panics, accepts something it should not, or
/// accepts bytes that do not re-encode to themselves.
pub fn record_decode(data: &[u8]) {
    let fixed = header_for(1, 0).frame_seed();
    check_frames(data, fixed);
    if let (Some(salt), Some(id)) = (data.get(0..4), data.get(4..12)) {
        let seed = FrameSeed {
            salt: u32::from_le_bytes([salt[0], salt[1], salt[2], salt[3]]),
            segment_id: u64::from_le_bytes([id[0], id[1], id[2], id[3], id[4], id[5], id[6], id[7]]),
        };
        check_frames(&data[12..], seed);
    }
    check_header(data);
    check_padding(data);
}

fn check_header(data: &[u8]) {
    match SegmentHeader::decode(data) {
        Ok(h) => {
            let b = &data[..SEGMENT_HEADER_BYTES];
            assert_eq!(&h.encode()[..], b, "an accepted header must re-encode to its bytes");
            if h.salt == crate::gen::salt_for(h.segment_id, h.first_index) {
                // The log id is the header's own data (0 for format 1).
                let expected = SegmentHeader {
                    log_id: h.log_id,
                    ..header_for(h.segment_id, h.first_index)
                };
                assert_eq!(expected, h);
            }
            check_frames(&data[SEGMENT_HEADER_BYTES..], h.frame_seed());
        }
        Err(HeaderError::Short) => assert!(data.len() < SEGMENT_HEADER_BYTES),
        Err(HeaderError::Unwritten) => assert!(data[..SEGMENT_HEADER_BYTES].iter().all(|&b| b == 0)),
        Err(HeaderError::BadMagic) => assert_ne!(&data[..8], &wal::codec::SEGMENT_MAGIC[..]),
        Err(HeaderError::UnsupportedVersion(v)) => {
            assert_ne!(v, wal::codec::FORMAT_VERSION);
            // Only an intact header may claim another version.
            assert_eq!(
                u32::from_le_bytes([data[60], data[61], data[62], data[63]]),
                crc32fast::hash(&data[..60])
            );
        }
        Err(HeaderError::BadChecksum) => {}
    }
}

/// Decodes frames back to back from the start of `bytes`.
fn check_frames(bytes: &[u8], seed: FrameSeed) {
    let mut off = 0usize;
    for _ in 0..MAX_FRAMES {
        let rest = &bytes[off..];
        let header = decode_frame_header(rest, seed);
        let full = decode_frame(rest, seed);
        match (header, full) {
            (Err(e1), Err(e2)) => {
                assert_eq!(e1, e2, "decode_frame must fail like decode_frame_header");
                match e1 {
                    FrameError::Short => assert!(rest.len() < FRAME_HEADER_BYTES),
                    FrameError::Unwritten => assert!(rest[..FRAME_HEADER_BYTES].iter().all(|&b| b == 0)),
                    FrameError::BadHeader => {}
                    FrameError::BadPayload => panic!("the header decoder never checks the payload"),
                }
                return;
            }
            (Err(e), Ok(_)) => panic!("decode_frame accepted a frame whose header fails: {e:?}"),
            (Ok(h), Err(FrameError::Short)) => {
                assert!(rest.len() < h.frame_len(), "Short but the frame fits: {h:?}");
                return;
            }
            (Ok(_), Err(FrameError::BadPayload)) => return,
            (Ok(h), Err(e)) => panic!("header {h:?} decoded but the frame failed with {e:?}"),
            (Ok(h), Ok((h2, payload))) => {
                assert_eq!(h, h2);
                assert!(h.len <= MAX_RECORD_BYTES);
                assert!(h.durable_next <= h.index);
                assert_eq!(payload.len(), h.len as usize);
                let total = frame_len(payload.len());
                assert_eq!(total, h.frame_len());
                assert_eq!(total % FRAME_ALIGN_BYTES, 0);
                assert!(total <= rest.len());
                let mut again = Vec::with_capacity(total);
                encode_frame(&mut again, seed, h.kind, h.index, h.durable_next, payload);
                assert_eq!(
                    &again[..],
                    &rest[..total],
                    "an accepted frame must re-encode to its bytes"
                );
                off += total;
            }
        }
    }
}

/// `padding_len` for offsets and alignments taken from the input.
fn check_padding(data: &[u8]) {
    for pair in data.chunks_exact(3).take(16) {
        let offset = u64::from(u16::from_le_bytes([pair[0], pair[1]])) * FRAME_ALIGN_BYTES as u64;
        let align = 8u64 << (pair[2] % 18);
        let pad = padding_len(offset, align) as u64;
        assert_eq!((offset + pad) % align, 0);
        assert!(pad == 0 || pad >= FRAME_HEADER_BYTES as u64);
        assert!(pad < align + FRAME_HEADER_BYTES as u64);
        assert_eq!(pad % FRAME_ALIGN_BYTES as u64, 0);
    }
}
