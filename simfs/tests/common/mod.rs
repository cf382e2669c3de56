//! Helpers shared by the SimFs integration tests.
#![allow(dead_code)]

use std::io;
use std::path::Path;

use simfs::{CrashKind, FaultConfig, File, Fs, OpenOptions, SimConfig, SimFs};

/// Read, write, create.
pub fn rw() -> OpenOptions {
    OpenOptions::new().read(true).write(true).create(true)
}

/// `len` bytes derived from `seed`, never zero (so lost data, read back as
/// zeros, is told apart from written data).
pub fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seed.wrapping_mul(31).wrapping_add(i as u8 ^ (i >> 8) as u8)) | 1)
        .collect()
}

/// A SimFs with a fault configuration and an atomic write unit.
pub fn sim(seed: u64, faults: FaultConfig, unit: u32) -> SimFs {
    SimFs::with_config(
        seed,
        SimConfig {
            faults,
            atomic_write_unit_bytes: unit,
            ..SimConfig::default()
        },
    )
}

/// Faults off except background writeback.
pub fn writeback(p: f64) -> FaultConfig {
    FaultConfig {
        writeback: p,
        ..FaultConfig::none()
    }
}

/// The whole content of `path` read through a fresh handle, or `None` if the
/// file does not exist.
pub async fn read_all<F: Fs>(fs: &F, path: &Path) -> io::Result<Option<Vec<u8>>> {
    let f = match fs.open(path, OpenOptions::new().read(true)).await {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let len = usize::try_from(f.len().await?).map_err(io::Error::other)?;
    let mut buf = vec![0u8; len];
    f.read_exact_at(&mut buf, 0).await?;
    Ok(Some(buf))
}

/// Creates `path` with `data`, fully durable: file synced, then every
/// directory from the parent up to the root synced.
pub async fn create_durable<F: Fs>(fs: &F, path: &Path, data: &[u8]) -> io::Result<()> {
    if let Some(parent) = path.parent() {
        fs.create_dir_all(parent).await?;
    }
    let f = fs.open(path, rw().truncate(true)).await?;
    f.write_all_at(data, 0).await?;
    f.sync_data().await?;
    let mut dir = path.parent();
    while let Some(d) = dir {
        fs.sync_dir(d).await?;
        dir = d.parent();
    }
    Ok(())
}

/// Power loss, then the content of `path` (None if absent).
pub async fn after_power_loss(fs: &SimFs, path: &Path) -> Option<Vec<u8>> {
    fs.crash(CrashKind::PowerLoss);
    read_all(fs, path).await.expect("read after power loss")
}

/// File content compared in assertions, printed short (length, number of
/// zero bytes, first bytes) instead of every byte.
#[derive(Clone, PartialEq, Eq)]
pub struct C(pub Option<Vec<u8>>);

impl std::fmt::Debug for C {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            None => write!(f, "absent"),
            Some(v) => write!(
                f,
                "{} bytes ({} zero) {:02x?}..",
                v.len(),
                v.iter().filter(|&&b| b == 0).count(),
                &v[..v.len().min(12)]
            ),
        }
    }
}

/// `Some(v)` as a [`C`].
pub fn some(v: &[u8]) -> C {
    C(Some(v.to_vec()))
}
