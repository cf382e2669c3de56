//! # simfs
//!
//! A filesystem trait for storage engines ([`Fs`], [`File`]), the real Linux
//! implementation ([`OsFs`]), and [`SimFs`]: a deterministic in-memory
//! filesystem that models the page cache and injects the faults real disks
//! and filesystems produce (ENOSPC, EIO, torn writes, failed and lying fsyncs,
//! lost directory entries, latent sector errors, bit rot, misdirected writes,
//! process crashes and power loss), all decided by one seed.
//!
//! ## The model
//!
//! [`SimFs`] tracks inodes, not paths. Every file has a **durable image** (what
//! a power loss reveals) and a **volatile image** (the page cache: what reads
//! see), with dirty tracking per page of the device's atomic write unit
//! ([`SimConfig::atomic_write_unit_bytes`], 512 or 4096). Every directory has
//! durable and volatile entries; each create, rename, remove or mkdir is a
//! *pending operation* of its parent(s) until [`Fs::sync_dir`].
//!
//! * [`File::sync_data`]/[`File::sync_all`] make a file's data and length
//!   durable, never its name. Background writeback
//!   ([`FaultConfig::writeback`]) may persist any dirty page at any time.
//! * [`CrashKind::Process`] kills handles and locks; the page cache survives.
//! * [`CrashKind::PowerLoss`] keeps the durable image plus a seeded subset of
//!   dirty pages (each kept, lost, or torn at the atomic write unit, maybe with
//!   garbage) and of pending directory operations (each kept or lost, in
//!   order). An undone unlink brings the file, and its space, back.
//!
//! A failed sync behaves per [`SyncFailureProfile`] (after Rebello et al.,
//! ATC'20): `Ext4Ordered` (default; also xfs) marks the dirty pages clean, keeps
//! the new bytes in memory only and reports the error once per open handle
//! (errseq); `Ext4DataJournal` reports it one sync late; `Btrfs` reverts the
//! page cache to the durable content. In every profile the data the failed
//! sync covered is not durable, even if a later sync returns Ok.
//!
//! Every fault ([`FaultConfig`]) has a probability; [`SimFs::counters`] counts
//! what fired ([`FaultKind`]), [`SimFs::trace`] and [`SimFs::trace_hash`] record
//! every operation so a seed can be replayed and compared byte for byte.
//! See `docs/SIMFS.md` for the fault table and the sources of each behaviour.
//!
//! ## Testing your own code on SimFs
//!
//! Write the code generically over [`Fs`], run it on [`SimFs`] with faults
//! and a power loss, over many seeds, and check its promise. Here: saving a
//! config file atomically must leave the old or the new content, never a
//! mixture, never nothing; and once the save returned Ok, the new content.
//!
//! ```
//! use simfs::{CrashKind, FaultConfig, File, Fs, OpenOptions, SimConfig, SimFs};
//! use std::path::Path;
//!
//! /// Write a temporary file, make its data durable, rename it over the
//! /// target, make the rename durable.
//! async fn save_atomically<F: Fs>(fs: &F, dir: &Path, name: &str, data: &[u8]) -> std::io::Result<()> {
//!     let tmp = dir.join(format!("{name}.tmp"));
//!     let opts = OpenOptions::new().write(true).create(true).truncate(true);
//!     let f = fs.open(&tmp, opts).await?;
//!     f.write_all_at(data, 0).await?;
//!     f.sync_data().await?; // without this, the rename can expose an empty file
//!     drop(f);
//!     fs.rename(&tmp, &dir.join(name)).await?;
//!     fs.sync_dir(dir).await // without this, the old name can come back
//! }
//!
//! futures::executor::block_on(async {
//!     let dir = Path::new("/etc");
//!     let target = Path::new("/etc/app.conf");
//!     for seed in 0..200 {
//!         let fs = SimFs::new(seed);
//!         fs.create_dir_all(dir).await?;
//!         fs.sync_dir(Path::new("/")).await?;
//!         save_atomically(&fs, dir, "app.conf", b"version one").await?;
//!
//!         // Second save under I/O errors, failing fsyncs and background writeback.
//!         fs.set_faults(FaultConfig {
//!             eio_write: 0.1,
//!             eio_rename: 0.1,
//!             sync_fail: 0.2,
//!             writeback: 0.3,
//!             ..FaultConfig::none()
//!         });
//!         let saved = save_atomically(&fs, dir, "app.conf", b"version two!").await.is_ok();
//!         fs.crash(CrashKind::PowerLoss);
//!         fs.set_faults(FaultConfig::none()); // heal phase
//!
//!         let f = fs.open(target, OpenOptions::new().read(true)).await?;
//!         let mut buf = vec![0u8; f.len().await? as usize];
//!         f.read_exact_at(&mut buf, 0).await?;
//!         assert!(buf == b"version one" || buf == b"version two!", "seed {seed}: {buf:?}");
//!         if saved {
//!             assert_eq!(buf, b"version two!", "seed {seed}");
//!         }
//!     }
//!     Ok::<_, std::io::Error>(())
//! }).unwrap();
//! ```
//!
//! With the `madsim` feature, `MadsimClock` makes each operation take
//! simulated time ([`SimConfig::latency_us`]) so that concurrent tasks
//! interleave around I/O under the madsim simulator.
#![forbid(unsafe_code)]

mod fs;
mod os;
mod sim;

pub use fs::{DirEntry, File, Fs, Metadata, OpenOptions};
pub use os::{OsDirLock, OsFile, OsFs};
pub use sim::config::{
    CrashKind, FaultConfig, FaultCounters, FaultKind, LogicalClock, SimClock, SimConfig, SyncFailureProfile,
};
#[cfg(feature = "madsim")]
pub use sim::MadsimClock;
pub use sim::{
    CrashPlan, Damage, DamageKind, MisdirectedWrite, OpMatch, SimDirLock, SimFile, SimFs, StepClock, TraceEvent,
    YieldClock, MAX_LEDGER_ENTRIES,
};
