//! The rewrite journal (FORMAT.md §8.5) as an open meets it: whole ones are
//! replayed into their segment, torn and orphaned ones removed, one naming a
//! sealed segment refused with a typed error that changes nothing; garbage
//! never panics.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use futures::executor::block_on;
use simfs::{CrashKind, FaultConfig, File, Fs, OpMatch, OpenOptions, SimConfig, SimFs};
use wal::{Error, Options};

const JOURNAL: &str = "recovery.journal";

fn journal(offset: u64, name: &str, data: &[u8]) -> Vec<u8> {
    let mut b = b"WALRJNL1".to_vec();
    b.extend_from_slice(&offset.to_le_bytes());
    b.extend_from_slice(&(data.len() as u64).to_le_bytes());
    b.extend_from_slice(&(name.len() as u16).to_le_bytes());
    b.extend_from_slice(name.as_bytes());
    b.extend_from_slice(data);
    let crc = crc32fast::hash(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

async fn put(fs: &SimFs, name: &str, bytes: &[u8]) {
    let f = fs
        .open(
            &dir().join(name),
            OpenOptions::new().write(true).create(true).truncate(true),
        )
        .await
        .unwrap();
    f.write_all_at(bytes, 0).await.unwrap();
    f.sync_data().await.unwrap();
    fs.sync_dir(dir()).await.unwrap();
}

/// A log of 10 records, closed; the active segment's name and its bytes.
async fn log(fs: &SimFs) -> (String, Vec<u8>) {
    let wal = open(fs, Options::default()).await.unwrap();
    for i in 0..10u64 {
        wal.append(payload(i, 40)).await.unwrap();
    }
    let name = wal.segments().await.last().unwrap().name.clone();
    wal.close().await.unwrap();
    let bytes = fs.durable_content(&dir().join(&name)).unwrap();
    (name, bytes)
}

#[test]
fn a_whole_journal_is_replayed_into_its_segment_and_removed() {
    block_on(async {
        let fs = SimFs::new(1);
        let (name, bytes) = log(&fs).await;
        // Garble record 0's frame on disk; the journal holds its bytes.
        let good = bytes[64..200].to_vec();
        put(&fs, &name, &[&bytes[..64], &[0xAB; 136][..], &bytes[200..]].concat()).await;
        put(&fs, JOURNAL, &journal(64, &name, &good)).await;
        let wal = open(&fs, Options::default()).await.unwrap();
        assert_eq!(wal.recovery_report().journal_replayed_bytes, 136);
        assert_eq!(wal.next_index(), 10);
        for (i, p) in collect(&wal).await.unwrap() {
            assert_eq!(p, payload(i, 40));
        }
        assert!(fs.durable_content(&dir().join(JOURNAL)).is_none(), "removed");
        assert!(!wal.recovery_report().ignored_files.contains(&JOURNAL.to_string()));
    });
}

#[test]
fn a_torn_journal_is_removed_and_changes_nothing() {
    block_on(async {
        let fs = SimFs::new(2);
        let (name, bytes) = log(&fs).await;
        let whole = journal(64, &name, &[0xCD; 100]);
        let flip = |at: usize| {
            let mut t = whole.clone();
            t[at] ^= 0x40;
            t
        };
        let data_at = whole.len() - 4 - 50;
        for torn in [
            whole[..whole.len() - 1].to_vec(),
            whole[..10].to_vec(),
            Vec::new(),
            // A flipped byte in the name, in the data, in the checksum.
            flip(40),
            flip(data_at),
            flip(whole.len() - 2),
        ] {
            put(&fs, JOURNAL, &torn).await;
            let wal = open(&fs, Options::default()).await.unwrap();
            assert_eq!(wal.recovery_report().journal_replayed_bytes, 0);
            assert_eq!(wal.next_index(), 10);
            drop(wal);
            assert!(fs.durable_content(&dir().join(JOURNAL)).is_none());
            assert_eq!(
                fs.durable_content(&dir().join(&name)).unwrap(),
                bytes,
                "segment unchanged"
            );
        }
    });
}

#[test]
fn a_journal_naming_a_sealed_segment_is_corruption_and_nothing_changes() {
    block_on(async {
        let fs = SimFs::new(3);
        let (name, bytes) = log(&fs).await;
        let target = "00000000000000000000-00000000000000000009-0000000000000001.wal";
        let j = journal(64, target, &[0xEE; 32]);
        put(&fs, JOURNAL, &j).await;
        match open(&fs, Options::default()).await {
            Err(Error::Corruption { segment, .. }) => assert!(segment.ends_with(JOURNAL), "{segment:?}"),
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("opened"),
        }
        assert_eq!(fs.durable_content(&dir().join(JOURNAL)).unwrap(), j, "journal kept");
        assert_eq!(
            fs.durable_content(&dir().join(&name)).unwrap(),
            bytes,
            "segment unchanged"
        );
    });
}

/// Soak seed 30056279: a recovery wrote the journal for a new segment whose
/// name was not durable yet; a power loss kept the journal's name and lost
/// the segment's. Nothing in it was acknowledged: the journal is stale.
#[test]
fn a_journal_whose_segment_does_not_exist_is_stale_and_removed() {
    block_on(async {
        let fs = SimFs::new(4);
        let (name, bytes) = log(&fs).await;
        let target = "00000000000000000999-active-0000000000000009.wal";
        put(&fs, JOURNAL, &journal(64, target, &[0xEE; 32])).await;
        let wal = open(&fs, Options::default()).await.unwrap();
        assert!(wal.recovery_report().removed_files.contains(&JOURNAL.to_string()));
        assert_eq!(wal.next_index(), 10);
        drop(wal);
        assert!(fs.durable_content(&dir().join(JOURNAL)).is_none());
        assert_eq!(fs.durable_content(&dir().join(&name)).unwrap()[..64], bytes[..64]);
    });
}

#[test]
fn garbage_journals_never_panic() {
    block_on(async {
        for seed in 0..64u64 {
            let fs = SimFs::new(seed);
            let (name, _) = log(&fs).await;
            let mut j = journal(64 * seed, &name, &vec![seed as u8; 1 + seed as usize * 7]);
            let at = (seed as usize * 13) % j.len();
            j[at] ^= 1 << (seed % 8);
            put(&fs, JOURNAL, &j).await;
            let r = open(&fs, Options::default()).await;
            if let Ok(wal) = &r {
                assert!(wal.next_index() <= 10, "seed {seed}");
            }
            fs.crash(CrashKind::Process);
        }
    });
}

/// Soak seed 30005268: the open that wrote a journal failed before its
/// fsyncs, so the journal was whole only in the page cache; the next open
/// replayed it into the segment, and a power loss during that write lost
/// the journal (its name never durable) and tore the segment's unit, which
/// held durable records. A replay now makes the journal durable first.
#[test]
fn a_journal_is_made_durable_before_it_is_replayed() {
    for seed in 0..16u64 {
        block_on(async {
            let cfg = SimConfig {
                atomic_write_unit_bytes: 512,
                faults: FaultConfig {
                    torn_garbage: 1.0,
                    ..FaultConfig::none()
                },
                ..SimConfig::default()
            };
            let fs = SimFs::with_config(seed, cfg);
            let (name, bytes) = log(&fs).await;
            // Whole, in the page cache only (no fsync, no directory fsync).
            let f = fs
                .open(&dir().join(JOURNAL), OpenOptions::new().write(true).create(true))
                .await
                .unwrap();
            f.write_all_at(&journal(0, &name, &bytes[..1024]), 0).await.unwrap();
            drop(f);
            fs.crash_after_next(OpMatch::ops(&["write"]), CrashKind::PowerLoss);
            assert!(
                open(&fs, Options::default()).await.is_err(),
                "seed {seed}: crashed in the replay"
            );
            let wal = open(&fs, Options::default()).await.unwrap();
            assert_eq!(wal.next_index(), 10, "seed {seed}: {:?}", wal.recovery_report());
            for (i, p) in collect(&wal).await.unwrap() {
                assert_eq!(p, payload(i, 40), "seed {seed}");
            }
        });
    }
}

/// Soak seed 92022324 (ext4 profile): an open wrote the journal and its
/// fsync failed, which marks the pages clean with the bytes in memory only;
/// a process crash. The next open found the journal whole in the page
/// cache and its own fsync returned `Ok` (nothing dirty, the error already
/// reported to the old handle), so the replay wrote into the segment; a
/// power loss during that write lost the journal and tore the segment's
/// units, which held durable records. A replay now rewrites the journal's
/// bytes before its fsync, so `Ok` means they are on disk.
#[test]
fn a_journal_whose_fsync_failed_is_rewritten_before_it_is_replayed() {
    for seed in 0..16u64 {
        block_on(async {
            let cfg = SimConfig {
                atomic_write_unit_bytes: 512,
                ..SimConfig::default()
            };
            let fs = SimFs::with_config(seed, cfg);
            let (name, bytes) = log(&fs).await;
            let f = fs
                .open(&dir().join(JOURNAL), OpenOptions::new().write(true).create(true))
                .await
                .unwrap();
            fs.sync_dir(dir()).await.unwrap();
            f.write_all_at(&journal(0, &name, &bytes[..1024]), 0).await.unwrap();
            fs.set_faults(FaultConfig {
                sync_fail: 1.0,
                ..FaultConfig::none()
            });
            assert!(f.sync_data().await.is_err(), "seed {seed}: the journal's fsync fails");
            drop(f);
            fs.set_faults(FaultConfig {
                torn_garbage: 1.0,
                ..FaultConfig::none()
            });
            fs.crash_after_next(OpMatch::ops(&["write"]).path_ends_with(".wal"), CrashKind::PowerLoss);
            assert!(
                open(&fs, Options::default()).await.is_err(),
                "seed {seed}: crashed in the replay"
            );
            let wal = open(&fs, Options::default()).await.unwrap();
            assert_eq!(wal.next_index(), 10, "seed {seed}: {:?}", wal.recovery_report());
            for (i, p) in collect(&wal).await.unwrap() {
                assert_eq!(p, payload(i, 40), "seed {seed}");
            }
        });
    }
}

#[test]
fn a_read_only_open_refuses_a_whole_journal_and_leaves_a_torn_one() {
    block_on(async {
        let fs = SimFs::new(3);
        let (name, bytes) = log(&fs).await;
        let good = bytes[64..200].to_vec();
        put(&fs, &name, &[&bytes[..64], &[0xAB; 136][..], &bytes[200..]].concat()).await;
        let whole = journal(64, &name, &good);
        put(&fs, JOURNAL, &whole).await;
        let ro = Options::default().read_only(true);
        // Its bytes are the only good copy of record 0: no open may serve
        // the segment without them, and a read-only open cannot write them.
        match open(&fs, ro.clone()).await {
            Err(Error::ReadOnly { path, reason }) => {
                assert_eq!(path, dir().join(JOURNAL));
                assert!(reason.contains(&name), "{reason}");
            }
            other => panic!("expected ReadOnly, got {:?}", other.map(|_| ())),
        }
        assert_eq!(fs.durable_content(&dir().join(JOURNAL)).unwrap(), whole);
        // A torn journal is left where it is, and reported as a writable
        // open would remove it.
        put(&fs, JOURNAL, &whole[..10]).await;
        put(&fs, &name, &bytes).await;
        let wal = open(&fs, ro).await.unwrap();
        assert_eq!(wal.next_index(), 10);
        assert!(wal.recovery_report().read_only);
        wal.close().await.unwrap();
        assert_eq!(fs.durable_content(&dir().join(JOURNAL)).unwrap(), whole[..10].to_vec());
        assert_eq!(fs.durable_content(&dir().join(&name)).unwrap(), bytes);
    });
}
