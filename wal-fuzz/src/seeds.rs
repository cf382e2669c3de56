//! The committed seed corpus (`fuzz/corpus/<target>/`), generated from
//! values so that it stays meaningful: valid segments, a torn tail, a
//! corrupted mid-log frame, crash and fault scenarios.

use std::path::Path;

use wal::codec::{encode_frame, FrameKind};

use crate::enc::Enc;
use crate::gen::{header_for, SegmentBuilder};
use crate::ops::{Align, Config, Faults, Op, OpsInput, Payload};
use crate::recover::{Blob, Chunk, DurableSpec, FileSpec, IndexSpec, KindSpec, Mode, NameSpec, RecoverInput};

/// One seed: target, file name, bytes.
pub type Seed = (&'static str, &'static str, Vec<u8>);

/// Every seed of every target.
pub fn seeds() -> Vec<Seed> {
    let mut out = record_decode_seeds();
    out.extend(
        recover_inputs()
            .into_iter()
            .map(|(name, v)| ("recover", name, Enc::to_bytes(&v))),
    );
    out.extend(
        ops_inputs()
            .into_iter()
            .map(|(name, v)| ("ops", name, Enc::to_bytes(&v))),
    );
    out
}

/// Writes the seeds into `root/<target>/<name>` (for `fuzz/corpus`).
pub fn write_corpus(root: &Path) -> std::io::Result<()> {
    for (target, name, bytes) in seeds() {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(name), bytes)?;
    }
    Ok(())
}

/// The worked example of docs/FORMAT.md §10.4: a sealed segment with id 1
/// holding records 0..=3.
fn format_example() -> SegmentBuilder {
    SegmentBuilder::new(1, 0)
        .record(b"hello")
        .batch(&[b"a", b"bc"])
        .record(b"")
}

fn record_decode_seeds() -> Vec<Seed> {
    let fixed = header_for(1, 0).frame_seed();
    let mut frames_only = Vec::new();
    encode_frame(&mut frames_only, fixed, FrameKind::Record, 0, 0, b"hello");
    encode_frame(&mut frames_only, fixed, FrameKind::BatchMember, 1, 1, b"a");
    encode_frame(&mut frames_only, fixed, FrameKind::BatchEnd, 2, 1, b"bc");
    encode_frame(&mut frames_only, fixed, FrameKind::Padding, 3, 3, &[0; 16]);
    // A frame seeded by the input's own first 12 bytes (salt, id).
    let seed = header_for(7, 100).frame_seed();
    let mut seeded = Vec::new();
    seeded.extend_from_slice(&seed.salt.to_le_bytes());
    seeded.extend_from_slice(&seed.segment_id.to_le_bytes());
    encode_frame(&mut seeded, seed, FrameKind::Record, 100, 99, b"seeded by the input");
    vec![
        (
            "record_decode",
            "sealed_segment_format_example",
            format_example().build(),
        ),
        (
            "record_decode",
            "active_segment_padded",
            SegmentBuilder::new(2, 4).record(b"x").pad_to(256).build(),
        ),
        ("record_decode", "frames_fixed_seed", frames_only),
        ("record_decode", "frame_input_seed", seeded),
        ("record_decode", "torn_tail", format_example().cut(5).build()),
        (
            "record_decode",
            "flipped_payload",
            format_example().flip(64 + 33).build(),
        ),
        ("record_decode", "zero_header", vec![0; 96]),
    ]
}

fn file(name: NameSpec, content: Vec<Chunk>) -> FileSpec {
    FileSpec {
        name,
        is_dir: false,
        content,
    }
}

fn records(count: u8, len: u8) -> Chunk {
    Chunk::Frames {
        count: count - 1,
        batch: false,
        len,
    }
}

fn recover_inputs() -> Vec<(&'static str, RecoverInput)> {
    let input = |mode, files| RecoverInput {
        mode,
        first_index: 0,
        files,
    };
    let t = Mode::TolerateTornTail;
    vec![
        ("empty_dir", input(t, vec![])),
        (
            "sealed_and_active",
            input(
                t,
                vec![
                    file(
                        NameSpec::NextSealed { records: 3, id: 1 },
                        vec![Chunk::Header, records(4, 5)],
                    ),
                    file(
                        NameSpec::NextActive { id: 2 },
                        vec![Chunk::Header, records(2, 9), Chunk::Pad { align: 6 }, records(1, 0)],
                    ),
                ],
            ),
        ),
        (
            "torn_tail",
            input(
                t,
                vec![file(
                    NameSpec::NextActive { id: 1 },
                    vec![Chunk::Header, records(3, 12), Chunk::Cut { n: 5 }],
                )],
            ),
        ),
        (
            "mid_log_corruption",
            input(
                t,
                vec![file(
                    NameSpec::NextActive { id: 1 },
                    vec![
                        Chunk::Header,
                        records(1, 16),
                        Chunk::Flip {
                            at: 64 + 32 + 2,
                            bit: 3,
                        },
                        records(2, 16),
                    ],
                )],
            ),
        ),
        (
            "mid_log_corruption_point_in_time",
            input(
                Mode::PointInTime,
                vec![file(
                    NameSpec::NextActive { id: 1 },
                    vec![
                        Chunk::Header,
                        records(2, 16),
                        Chunk::Flip {
                            at: 64 + 48 + 40,
                            bit: 0,
                        },
                        records(2, 16),
                    ],
                )],
            ),
        ),
        (
            "unfinished_batch_absolute",
            input(
                Mode::AbsoluteConsistency,
                vec![file(
                    NameSpec::NextActive { id: 1 },
                    vec![
                        Chunk::Header,
                        records(1, 8),
                        Chunk::Frames {
                            count: 2,
                            batch: true,
                            len: 8,
                        },
                        Chunk::Cut { n: 40 },
                    ],
                )],
            ),
        ),
        (
            "torn_new_segment",
            input(
                t,
                vec![
                    file(
                        NameSpec::NextSealed { records: 1, id: 1 },
                        vec![Chunk::Header, records(2, 3)],
                    ),
                    file(NameSpec::NextActive { id: 2 }, vec![Chunk::Zeros(100)]),
                ],
            ),
        ),
        (
            "leftovers_and_gap",
            input(
                t,
                vec![
                    file(NameSpec::Tmp { id: 3 }, vec![Chunk::Raw(Blob(b"junk".to_vec()))]),
                    file(NameSpec::Other(Blob(b"notes.txt".to_vec())), vec![]),
                    file(
                        NameSpec::Sealed {
                            first: 0,
                            last: 1,
                            id: 1,
                        },
                        vec![Chunk::Header, records(2, 1)],
                    ),
                    file(
                        NameSpec::Sealed {
                            first: 5,
                            last: 6,
                            id: 2,
                        },
                        vec![Chunk::Header, records(2, 1)],
                    ),
                ],
            ),
        ),
        (
            "header_mismatch_and_odd_frames",
            input(
                t,
                vec![file(
                    NameSpec::Active { first: 0, id: 1 },
                    vec![
                        Chunk::OtherHeader { id: 2, first: 0 },
                        Chunk::Frame {
                            kind: KindSpec::Record,
                            index: IndexSpec::Skip(2),
                            durable: DurableSpec::Lag(1),
                            payload: Blob(b"gap".to_vec()),
                        },
                    ],
                )],
            ),
        ),
        (
            "damaged_sealed_segment",
            input(
                t,
                vec![
                    file(
                        NameSpec::NextSealed { records: 2, id: 1 },
                        vec![Chunk::Header, records(3, 20), Chunk::Flip { at: 150, bit: 1 }],
                    ),
                    file(
                        NameSpec::NextActive { id: 2 },
                        vec![
                            Chunk::Header,
                            Chunk::Frame {
                                kind: KindSpec::BatchEnd,
                                index: IndexSpec::Next,
                                durable: DurableSpec::Zero,
                                payload: Blob(vec![]),
                            },
                        ],
                    ),
                ],
            ),
        ),
    ]
}

fn config() -> Config {
    Config {
        seed: 1,
        manual: false,
        align: Align::A4096,
        unit_512: false,
        segment_records: 0,
        small_segments: false,
        first_index: 0,
        btrfs: false,
        yielding: false,
    }
}

fn p(len: u16) -> Payload {
    Payload { len }
}

fn faults(sync_fail: u8, eio_write: u8, enospc_write: u8, writeback: u8, torn_garbage: u8) -> Faults {
    Faults {
        sync_fail,
        eio_write,
        enospc_write,
        writeback,
        torn_garbage,
    }
}

fn ops_inputs() -> Vec<(&'static str, OpsInput)> {
    vec![
        (
            "embedding_calls",
            OpsInput {
                config: Config {
                    manual: true,
                    segment_records: 3,
                    ..config()
                },
                ops: vec![
                    Op::AppendWith(p(10)),
                    Op::AppendWith(p(0)),
                    Op::AppendBatch(vec![p(30), p(40), p(50)]),
                    Op::ReadRange {
                        at: 0,
                        len: 10,
                        max_bytes: 60,
                    },
                    Op::WaitDurable(2),
                    Op::AppendWith(p(70)),
                    Op::WaitDurable(9),
                    Op::PowerLoss,
                    Op::ReadRange {
                        at: 1,
                        len: 3,
                        max_bytes: 0,
                    },
                    Op::AppendBatch(vec![p(5), p(6), p(7), p(8)]),
                    Op::Sync,
                    // Through index 1 (first 0): exact, inside a segment.
                    Op::Prune(2),
                    Op::Read(0),
                    Op::DropReopen,
                    Op::Prune(40),
                    Op::AppendWith(p(9)),
                    Op::PowerLoss,
                    Op::Iterate(0),
                ],
            },
        ),
        (
            "append_read_rotate_reopen",
            OpsInput {
                config: config(),
                ops: vec![
                    Op::Append(p(10)),
                    Op::Append(p(0)),
                    Op::AppendBatch(vec![p(3), p(300)]),
                    Op::Read(2),
                    Op::Iterate(0),
                    Op::Rotate,
                    Op::AppendAt {
                        delta: 0,
                        payload: p(20),
                    },
                    Op::Reopen,
                    Op::Read(4),
                    Op::Iterate(1),
                ],
            },
        ),
        (
            "crashes",
            OpsInput {
                config: Config {
                    first_index: 5,
                    ..config()
                },
                ops: vec![
                    Op::Append(p(100)),
                    Op::AppendBatch(vec![p(1), p(2), p(3)]),
                    Op::PowerLoss,
                    Op::Append(p(50)),
                    Op::ProcessCrash,
                    Op::Append(p(7)),
                    Op::DropReopen,
                    Op::Iterate(0),
                ],
            },
        ),
        (
            "manual_sync_power_loss",
            OpsInput {
                config: Config {
                    manual: true,
                    align: Align::A512,
                    unit_512: true,
                    ..config()
                },
                ops: vec![
                    Op::Append(p(10)),
                    Op::Sync,
                    Op::Append(p(20)),
                    Op::Append(p(30)),
                    Op::PowerLoss,
                    Op::Append(p(40)),
                ],
            },
        ),
        (
            "fsync_failure_stops",
            OpsInput {
                config: config(),
                ops: vec![
                    Op::Append(p(10)),
                    Op::SetFaults(faults(3, 0, 0, 0, 0)),
                    Op::Append(p(11)),
                    Op::Read(0),
                    Op::Append(p(12)),
                    Op::Sync,
                    Op::Heal,
                    Op::Reopen,
                    Op::Append(p(13)),
                    Op::PowerLoss,
                ],
            },
        ),
        (
            "enospc_and_eio",
            OpsInput {
                config: Config {
                    btrfs: true,
                    ..config()
                },
                ops: vec![
                    Op::Append(p(100)),
                    Op::Capacity(50),
                    Op::Append(p(1000)),
                    Op::Heal,
                    Op::Append(p(1000)),
                    Op::SetFaults(faults(0, 3, 0, 0, 0)),
                    Op::AppendBatch(vec![p(5), p(6)]),
                    Op::Heal,
                    Op::Append(p(9)),
                ],
            },
        ),
        (
            "bad_arguments",
            OpsInput {
                config: config(),
                ops: vec![
                    Op::AppendAt {
                        delta: 3,
                        payload: p(1),
                    },
                    Op::AppendBatch(vec![]),
                    Op::Append(p(4150)),
                    Op::AppendBatch(vec![p(1); 9]),
                    Op::AppendBatchAt {
                        delta: -1,
                        records: vec![p(1)],
                    },
                    Op::Read(5),
                    Op::Iterate(3),
                    Op::Append(p(1)),
                ],
            },
        ),
        (
            "concurrent_group_commit",
            OpsInput {
                config: Config {
                    yielding: true,
                    ..config()
                },
                ops: vec![
                    Op::Concurrent(vec![p(10), p(20), p(30), p(40)]),
                    Op::SetFaults(faults(2, 1, 0, 2, 0)),
                    Op::Concurrent(vec![p(10), p(20), p(30)]),
                    Op::Heal,
                    Op::Reopen,
                    Op::Concurrent(vec![p(1), p(2)]),
                ],
            },
        ),
        (
            "small_segments_torn_garbage",
            OpsInput {
                config: Config {
                    segment_records: 2,
                    small_segments: true,
                    align: Align::A512,
                    unit_512: true,
                    ..config()
                },
                ops: vec![
                    Op::Append(p(1000)),
                    Op::Append(p(1000)),
                    Op::Append(p(1000)),
                    Op::AppendBatch(vec![p(900), p(900)]),
                    Op::SetFaults(faults(0, 0, 0, 2, 3)),
                    Op::Append(p(100)),
                    Op::PowerLoss,
                    Op::Read(1),
                    Op::Iterate(0),
                ],
            },
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbitrary::{Arbitrary, Unstructured};

    fn decode<'a, T: Arbitrary<'a>>(bytes: &'a [u8]) -> T {
        T::arbitrary(&mut Unstructured::new(bytes)).unwrap()
    }

    #[test]
    fn structured_seeds_decode_to_the_values_they_encode() {
        for (name, v) in recover_inputs() {
            let bytes = Enc::to_bytes(&v);
            assert_eq!(decode::<RecoverInput>(&bytes), v, "recover seed {name}");
        }
        for (name, v) in ops_inputs() {
            let bytes = Enc::to_bytes(&v);
            assert_eq!(decode::<OpsInput>(&bytes), v, "ops seed {name}");
        }
    }

    #[test]
    fn enum_tags_choose_every_variant() {
        for count in 1..20u32 {
            for index in 0..count {
                let mut e = Enc::default();
                e.tag(index, count);
                let t = u32::from_le_bytes(e.out[..4].try_into().unwrap());
                assert_eq!(((u64::from(t) * u64::from(count)) >> 32) as u32, index);
            }
        }
    }
}
