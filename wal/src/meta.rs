//! The meta file: the log's durable facts that segment names cannot carry.
//!
//! - the low-water mark: the first index of the log, which never moves
//!   backwards (segments wholly below it are leftovers of an interrupted prune);
//! - the segment-id high-water mark, so ids are never reused after the
//!   newest segments were deleted (truncation, a full prune);
//! - the clean-shutdown marker written by `close()`: where the log ends, so
//!   the next open reads no record data.
//!
//! It is replaced atomically: write `meta.wal.tmp`, fsync it, rename it over
//! `meta`, fsync the directory. So it is never torn: a bad checksum is
//! corruption.

use std::path::Path;

use simfs::{File, Fs, OpenOptions};
use tracing::warn;

use crate::error::{Error, Result};
use crate::sync::{AtomicBool, Ordering};

/// The meta file's name in the log directory.
pub(crate) const META_NAME: &str = "meta";
/// Its temporary name while being replaced.
pub(crate) const META_TMP_NAME: &str = "meta.wal.tmp";
const META_MAGIC: [u8; 8] = *b"SIMWALMT";
/// Format 1: no log id, 64 bytes. Read, never written (a meta without an id
/// is written as format 1 only by tests of the old format).
const META_VERSION_V1: u32 = 1;
const META_BYTES_V1: usize = 64;
/// Format 2: format 1's fields, then the log id, 80 bytes.
const META_VERSION: u32 = 2;
/// Encoded size of the meta file (format 2).
pub(crate) const META_BYTES: usize = 80;
const FLAG_CLEAN: u32 = 1;

/// Where the log ended at a clean shutdown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CleanMarker {
    /// Id of the active segment, 0 if there was none.
    pub active_id: u64,
    /// Its length in bytes.
    pub active_len: u64,
    /// The next index of the log.
    pub next_index: u64,
}

/// The meta file's content.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Meta {
    /// First index of the log; never decreases.
    pub low_water: u64,
    /// Every segment id ever used is below this.
    pub next_segment_id: u64,
    /// Set by a clean close, cleared before the first change after open.
    pub clean: Option<CleanMarker>,
    /// The log's identity (also in every segment header); 0 in a format-1
    /// meta file, written before logs had one.
    pub log_id: u128,
}

impl Meta {
    /// Format 2, or format 1 for a meta without a log id (so every accepted
    /// encoding re-encodes to the same bytes).
    pub(crate) fn encode(&self) -> Vec<u8> {
        let v1 = self.log_id == 0;
        let len = if v1 { META_BYTES_V1 } else { META_BYTES };
        let mut b = vec![0u8; len];
        b[0..8].copy_from_slice(&META_MAGIC);
        let version = if v1 { META_VERSION_V1 } else { META_VERSION };
        b[8..12].copy_from_slice(&version.to_le_bytes());
        let clean = self.clean.unwrap_or(CleanMarker {
            active_id: 0,
            active_len: 0,
            next_index: 0,
        });
        let flags = if self.clean.is_some() { FLAG_CLEAN } else { 0 };
        b[12..16].copy_from_slice(&flags.to_le_bytes());
        b[16..24].copy_from_slice(&self.low_water.to_le_bytes());
        b[24..32].copy_from_slice(&self.next_segment_id.to_le_bytes());
        b[32..40].copy_from_slice(&clean.active_id.to_le_bytes());
        b[40..48].copy_from_slice(&clean.active_len.to_le_bytes());
        b[48..56].copy_from_slice(&clean.next_index.to_le_bytes());
        if !v1 {
            b[56..72].copy_from_slice(&self.log_id.to_le_bytes());
        }
        let crc = crc32fast::hash(&b[0..len - 4]);
        b[len - 4..len].copy_from_slice(&crc.to_le_bytes());
        b
    }

    pub(crate) fn decode(b: &[u8], path: &Path) -> Result<Meta> {
        let bad = |why: &str| Err(Error::corruption(path, 0, format!("meta file: {why}")));
        if b.len() != META_BYTES && b.len() != META_BYTES_V1 {
            return bad("wrong length");
        }
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(a)
        };
        if b[0..8] != META_MAGIC {
            return bad("bad magic");
        }
        let len = b.len();
        if u32_at(len - 4) != crc32fast::hash(&b[0..len - 4]) {
            return bad("bad checksum");
        }
        let version = u32_at(8);
        let expected_len = match version {
            META_VERSION_V1 => META_BYTES_V1,
            META_VERSION => META_BYTES,
            _ => return bad(&format!("unsupported version {version}")),
        };
        if len != expected_len {
            return bad(&format!("format {version} with {len} bytes"));
        }
        let log_id = if version == META_VERSION {
            let mut a = [0u8; 16];
            a.copy_from_slice(&b[56..72]);
            u128::from_le_bytes(a)
        } else {
            0
        };
        if version == META_VERSION && (log_id == 0 || b[72..76] != [0; 4]) {
            return bad("bad log id or reserved bytes");
        }
        let flags = u32_at(12);
        if flags & !FLAG_CLEAN != 0 || (version == META_VERSION_V1 && b[56..60] != [0; 4]) {
            return bad("unknown flags");
        }
        if flags & FLAG_CLEAN == 0 && b[32..56].iter().any(|&x| x != 0) {
            return bad("a clean marker without the clean flag");
        }
        let clean = (flags & FLAG_CLEAN != 0).then(|| CleanMarker {
            active_id: u64_at(32),
            active_len: u64_at(40),
            next_index: u64_at(48),
        });
        Ok(Meta {
            low_water: u64_at(16),
            next_segment_id: u64_at(24),
            clean,
            log_id,
        })
    }
}

/// Whether `dir` holds a meta file, which only an open that had already made
/// the directory's path durable can have written (`Wal::open` fsyncs the
/// ancestors before recovery, and every meta write comes after). So its
/// presence, even in the page cache after a process crash, proves the path
/// was made durable once; any doubt (an error, a directory in its place)
/// answers `false`, and the caller fsyncs the path again.
pub(crate) async fn path_made_durable<F: Fs>(fs: &F, dir: &Path) -> bool {
    matches!(fs.metadata(&dir.join(META_NAME)).await, Ok(m) if !m.is_dir)
}

/// Reads the meta file, `None` if there is none (a new log).
pub(crate) async fn read_meta<F: Fs>(fs: &F, dir: &Path) -> Result<Option<Meta>> {
    let path = dir.join(META_NAME);
    let file = match fs.open(&path, OpenOptions::new().read(true)).await {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("open", &path, 0, e)),
    };
    let len = file.len().await.map_err(|e| Error::io("len", &path, 0, e))?;
    if len != META_BYTES as u64 && len != META_BYTES_V1 as u64 {
        return Err(Error::corruption(&path, 0, format!("meta file of {len} bytes")));
    }
    let mut b = vec![0u8; len as usize];
    file.read_exact_at(&mut b, 0)
        .await
        .map_err(|e| Error::io("read", &path, 0, e))?;
    Meta::decode(&b, &path).map(Some)
}

/// Replaces the meta file durably. On [`MetaWriteError::NotWritten`] the old
/// meta file (or none) is still in place in the live view. A rename that
/// failed may still have taken effect (the new meta file is then the live
/// one, and a power loss keeps or loses it): unless the temporary file is
/// visibly still there, that is [`MetaWriteError::Unknown`], as is a failed
/// directory fsync after the rename: callers must stop then.
pub(crate) async fn write_meta<F: Fs>(fs: &F, dir: &Path, meta: &Meta) -> Result<(), MetaWriteError> {
    let tmp = dir.join(META_TMP_NAME);
    let path = dir.join(META_NAME);
    let before_rename = async {
        let file = fs
            .open(&tmp, OpenOptions::new().write(true).create(true).truncate(true))
            .await
            .map_err(|e| Error::io("create", &tmp, 0, e))?;
        file.write_all_at(&meta.encode(), 0)
            .await
            .map_err(|e| Error::io("write", &tmp, 0, e))?;
        file.sync_data().await.map_err(|e| Error::io("sync_data", &tmp, 0, e))
    };
    if let Err(e) = before_rename.await {
        // The temporary file is harmless (removed at open); the old meta stands.
        let _ = fs.remove_file(&tmp).await;
        return Err(MetaWriteError::NotWritten(e));
    }
    if let Err(e) = fs.rename(&tmp, &path).await {
        let cause = Error::io("rename", &tmp, 0, e);
        // Only the temporary file still under its name proves the rename
        // did not happen. Believing the old meta file stands when the new
        // one replaced it would let the caller go on under a low-water mark
        // it abandoned: appends below it vanish at the next open.
        if matches!(fs.exists(&tmp).await, Ok(true)) {
            let _ = fs.remove_file(&tmp).await;
            return Err(MetaWriteError::NotWritten(cause));
        }
        warn!(error = %cause, "the meta file's rename failed but took effect");
        return Err(MetaWriteError::Unknown(cause));
    }
    fs.sync_dir(dir)
        .await
        .map_err(|e| MetaWriteError::Unknown(Error::io("sync_dir", dir, 0, e)))
}

/// The meta file of an open log: its content as last written (the
/// engine's only copy) and every update of it. The async mutex serializes
/// meta writes; `marker_present` mirrors whether the content holds a
/// clean-shutdown marker, so the write path (every group commit) learns
/// that none must be cleared with one atomic load instead of the lock.
pub(crate) struct MetaFile {
    current: futures::lock::Mutex<Meta>,
    marker_present: AtomicBool,
}

impl MetaFile {
    /// The meta file as recovery found it (or as a new log would write it).
    pub(crate) fn new(meta: Meta) -> MetaFile {
        MetaFile {
            marker_present: AtomicBool::new(meta.clean.is_some()),
            current: futures::lock::Mutex::new(meta),
        }
    }

    /// Whether the content holds a clean-shutdown marker (see the type).
    pub(crate) fn marker_present(&self) -> bool {
        self.marker_present.load(Ordering::Acquire)
    }

    /// The content as last written.
    pub(crate) async fn get(&self) -> Meta {
        *self.current.lock().await
    }

    /// Memory rebuilt from the files after an interrupted operation: the
    /// content is what recovery read again (no write).
    pub(crate) async fn install(&self, meta: Meta) {
        let mut current = self.current.lock().await;
        *current = meta;
        self.marker_present.store(meta.clean.is_some(), Ordering::Release);
    }

    /// The content in memory and the file read back under the same lock
    /// (no write can come between, so the two must agree: `Wal::verify`).
    pub(crate) async fn read_back<F: Fs>(&self, fs: &F, dir: &Path) -> (Meta, Result<Option<Meta>>) {
        let current = self.current.lock().await;
        (*current, read_meta(fs, dir).await)
    }

    /// Writes the meta file with `change` applied, durably (`write_meta`),
    /// then publishes it in memory. The clean marker is cleared unless
    /// `change` sets it (any change after a clean close makes the log dirty
    /// again); the segment-id high-water mark rises to `ids_below()` (every
    /// id below it may have been used), asked under the lock, so that an id
    /// handed out while this update waited for it is covered too. A no-op
    /// when nothing changes.
    pub(crate) async fn update<F: Fs>(
        &self,
        fs: &F,
        dir: &Path,
        ids_below: impl FnOnce() -> u64,
        change: impl FnOnce(&mut Meta),
    ) -> Result<(), MetaWriteError> {
        let mut current = self.current.lock().await;
        let mut next = *current;
        next.clean = None;
        next.next_segment_id = next.next_segment_id.max(ids_below());
        change(&mut next);
        debug_assert!(
            next.low_water >= current.low_water,
            "the low-water mark never moves back"
        );
        debug_assert_eq!(next.log_id, current.log_id, "the log's identity never changes");
        if next == *current {
            return Ok(());
        }
        write_meta(fs, dir, &next).await?;
        *current = next;
        self.marker_present.store(next.clean.is_some(), Ordering::Release);
        Ok(())
    }

    /// Clears the clean-shutdown marker before the first change after an
    /// open: one atomic load when there is none (the hot path).
    pub(crate) async fn clear_marker<F: Fs>(
        &self,
        fs: &F,
        dir: &Path,
        ids_below: impl FnOnce() -> u64,
    ) -> Result<(), MetaWriteError> {
        // The flag may lag a concurrent update by a moment: the content
        // under the lock decides.
        if !self.marker_present() || self.current.lock().await.clean.is_none() {
            return Ok(());
        }
        self.update(fs, dir, ids_below, |_| {}).await
    }
}

/// How a meta write failed.
#[derive(Debug)]
pub(crate) enum MetaWriteError {
    /// The old meta file is still in place: the operation can be abandoned.
    NotWritten(Error),
    /// It is unknown which meta file survives a power loss: stop.
    Unknown(Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_round_trips_and_rejects_damage() {
        let p = Path::new("/m");
        let marked = Meta {
            low_water: 5,
            next_segment_id: 9,
            clean: Some(CleanMarker {
                active_id: 8,
                active_len: 4096,
                next_index: 77,
            }),
            log_id: 0,
        };
        for m in [
            Meta::default(),
            marked,
            Meta {
                log_id: 0x1234_5678_9abc_def0_1122_3344_5566_7788,
                ..marked
            },
        ] {
            let b = m.encode();
            assert_eq!(b.len(), if m.log_id == 0 { META_BYTES_V1 } else { META_BYTES });
            assert_eq!(Meta::decode(&b, p).unwrap(), m);
            for i in 0..b.len() {
                let mut d = b.clone();
                d[i] ^= 1;
                assert!(Meta::decode(&d, p).is_err(), "flip at {i}");
            }
        }
    }
    /// The examples of docs/FORMAT.md §3.6 (the dump, and the bytes a
    /// clean close changes), byte for byte.
    #[test]
    fn the_format_examples_are_what_encode_writes() {
        let log_id = 0x5741_4c46_555a_5a00_0000_0000_0000_0001;
        let pruned = Meta {
            low_water: 10,
            next_segment_id: 6,
            clean: None,
            log_id,
        };
        let crc = |b: &[u8]| u32::from_le_bytes([b[76], b[77], b[78], b[79]]);
        let b = pruned.encode();
        assert_eq!(&b[0..16], b"SIMWALMT\x02\0\0\0\0\0\0\0");
        assert_eq!(&b[56..72], &log_id.to_le_bytes());
        assert_eq!(crc(&b), 0x7D81_90EB);
        let closed = Meta {
            clean: Some(CleanMarker {
                active_id: 5,
                active_len: 16384,
                next_index: 23,
            }),
            ..pruned
        };
        assert_eq!(crc(&closed.encode()), 0x8BF2_517A);
        let v1 = Meta { log_id: 0, ..pruned }.encode();
        assert_eq!(u32::from_le_bytes([v1[60], v1[61], v1[62], v1[63]]), 0x804F_B6A3);
    }
}
