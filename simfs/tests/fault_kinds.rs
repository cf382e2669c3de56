//! Every fault class on, a busy workload, power losses and process crashes:
//! every `FaultKind` must be injected at least once across a few seeds.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

mod common;

use std::path::Path;

use common::{pattern, read_all, rw, sim};
use futures::executor::block_on;
use simfs::{CrashKind, FaultConfig, FaultCounters, FaultKind, File, Fs, SimFs};

fn faults() -> FaultConfig {
    FaultConfig {
        enospc_write: 0.02,
        enospc_metadata: 0.03,
        eio_read: 0.03,
        eio_write: 0.03,
        eio_open: 0.03,
        eio_rename: 0.05,
        eio_remove: 0.05,
        sync_fail: 0.05,
        lying_sync: 0.05,
        latent_sector_error: 0.05,
        bit_rot: 0.05,
        misdirected_write: 0.05,
        short_read: 0.05,
        writeback: 0.2,
        torn_garbage: 0.3,
        eio_write_after_effect: 0.03,
        eio_set_len_after_effect: 0.1,
        eio_rename_after_effect: 0.05,
        eio_remove_after_effect: 0.05,
        eio_create_after_effect: 0.05,
        sync_fail_after_persist: 0.05,
    }
}

/// One round of a storage-engine-like workload: segments written, synced,
/// read back, renamed, removed; directory syncs; a disk-full episode now and
/// then. Errors are expected and ignored.
async fn round(fs: &SimFs, r: u32) {
    let dir = Path::new("/db");
    let _ = fs.create_dir_all(dir).await;
    let _ = fs.sync_dir(Path::new("/")).await;
    if r % 4 == 3 {
        // Disk-full episode: the next big write is cut short, the one after
        // fails.
        fs.set_capacity(Some(fs.used_bytes() + 3000));
    }
    for i in 0..5u32 {
        let path = format!("/db/seg{i}");
        let Ok(f) = fs.open(Path::new(&path), rw()).await else {
            continue;
        };
        let off = u64::from((r * 7 + i * 3) % 5) * 1024;
        let data = pattern((r + i) as u8, 5000 + (i as usize) * 700);
        let _ = f.write_at(&data, off).await;
        let _ = f.write_at(&data[..1500], off + 9000).await;
        if (r + i) % 3 != 0 {
            let _ = f.sync_data().await;
        }
        if i == 3 {
            let _ = f.set_len(off + 10_500).await;
        }
        if i == 4 {
            let _ = f.allocate(20_000).await;
            let _ = f.sync_all().await;
        }
        let mut buf = vec![0u8; 16_384];
        for o in [0u64, 4096, 8192] {
            let _ = f.read_at(&mut buf, o).await;
        }
    }
    fs.set_capacity(None);
    // Directory churn: new names, renames, removals, some of them synced.
    let _ = fs
        .rename(Path::new("/db/seg0"), Path::new(&format!("/db/old{r}")))
        .await;
    if r % 2 == 0 {
        let _ = fs.sync_dir(dir).await;
    }
    let _ = fs.remove_file(Path::new("/db/seg1")).await;
    let _ = fs
        .remove_file(Path::new(&format!("/db/old{}", r.wrapping_sub(1))))
        .await;
    let _ = fs.rename(Path::new("/db/seg2"), Path::new("/db/seg3")).await;
    if r % 3 == 1 {
        let _ = fs.sync_dir(dir).await;
    }
    // Read everything back (hits latent sector errors, bit rot, short reads).
    if let Ok(list) = fs.read_dir(dir).await {
        for e in list {
            let _ = read_all(fs, &dir.join(&e.name)).await;
        }
    }
    match r % 5 {
        2 | 4 => fs.crash(CrashKind::PowerLoss),
        3 => fs.crash(CrashKind::Process),
        _ => {}
    }
}

#[test]
fn every_fault_kind_is_reachable() {
    let mut total = FaultCounters::default();
    for seed in 0..6 {
        let fs = sim(seed, faults(), 512);
        block_on(async {
            for r in 0..40 {
                round(&fs, r).await;
            }
        });
        total.merge(&fs.counters());
    }
    let missing: Vec<FaultKind> = FaultKind::ALL.iter().copied().filter(|&k| total.get(k) == 0).collect();
    assert!(
        missing.is_empty(),
        "never injected: {missing:?}; counts: {:?}",
        total.iter().collect::<Vec<_>>()
    );
}

#[test]
fn no_faults_means_no_fault_counts() {
    let fs = SimFs::new(1);
    block_on(async {
        for r in 0..10 {
            round(&fs, r).await;
        }
    });
    let c = fs.counters();
    // Only the crashes the workload asks for, and what power loss does to
    // in-flight data, may be counted; no injected I/O error.
    for k in [
        FaultKind::EioRead,
        FaultKind::EioWrite,
        FaultKind::EioOpen,
        FaultKind::EioRename,
        FaultKind::EioRemove,
        FaultKind::SyncFail,
        FaultKind::LyingSync,
        FaultKind::LatentSectorError,
        FaultKind::LatentSectorRead,
        FaultKind::BitRot,
        FaultKind::MisdirectedWrite,
        FaultKind::ShortRead,
        FaultKind::Writeback,
        FaultKind::TornGarbage,
        FaultKind::EnospcMetadata,
    ] {
        assert_eq!(c.get(k), 0, "{k:?} injected with faults off");
    }
    assert!(c.get(FaultKind::PowerLoss) > 0);
    assert!(c.get(FaultKind::ProcessCrash) > 0);
}
