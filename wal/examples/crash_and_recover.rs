//! Append, crash, reopen, iterate: the WAL's promise in thirty lines.
//!
//! Runs on SimFs, the simulated disk, so the power loss is real and the run
//! is deterministic: `cargo run -p wal --example crash_and_recover`.

use std::path::Path;

use simfs::{CrashKind, FaultConfig, SimConfig, SimFs};
use wal::{Options, SyncPolicy, Wal};

fn main() -> Result<(), wal::Error> {
    futures::executor::block_on(async {
        // Background writeback makes some unsynced data survive, as on a real disk.
        let faults = FaultConfig {
            writeback: 0.3,
            torn_garbage: 0.5,
            ..FaultConfig::none()
        };
        let fs = SimFs::with_config(
            2026,
            SimConfig {
                faults,
                atomic_write_unit_bytes: 512,
                ..Default::default()
            },
        );
        let dir = Path::new("/db/wal");
        let opts = Options::default()
            .sync_policy(SyncPolicy::Manual)
            .segment_size_bytes(64 << 10);

        let wal = Wal::open(fs.clone(), dir, opts.clone()).await?;
        for i in 0..1000u64 {
            wal.append(format!("put key{i} value{i}").into_bytes()).await?;
        }
        wal.sync().await?; // everything so far is durable
        for i in 1000..1500u64 {
            wal.append(format!("put key{i} value{i}").into_bytes()).await?; // not synced
        }
        println!(
            "appended 1500 records, synced the first 1000; segments: {}",
            wal.segments().await.len()
        );

        drop(wal);
        fs.crash(CrashKind::PowerLoss);
        println!("power loss: {} torn/lost writes injected", fs.counters().total());

        fs.set_faults(FaultConfig::none());
        let wal = Wal::open(fs.clone(), dir, opts).await?;
        let report = wal.recovery_report().clone();
        println!(
            "recovered: cut {} torn bytes ({:?})",
            report.torn_bytes_cut, report.stop_reason
        );
        let mut it = wal.iter_from(wal.first_index())?;
        let mut count = 0u64;
        while let Some(record) = it.next().await {
            let (index, payload) = record?;
            assert_eq!(payload, format!("put key{index} value{index}").into_bytes());
            count += 1;
        }
        assert!(count >= 1000, "every synced record survived");
        println!("read back {count} records in order; the 1000 synced ones are all there");
        let next = wal.append(b"put after crash".to_vec()).await?;
        println!("appending goes on at index {next}");
        Ok(())
    })
}
