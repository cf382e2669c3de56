//! Recovery's rewrite journal: a durable copy of the bytes recovery is about
//! to write back into the active segment (a doublewrite).
//!
//! Why: recovery rewrites the records that were not known durable (and the
//! header when no record is), byte for byte, so that pages a failed fsync
//! left clean but not on disk reach it (ARCHITECTURE.md §4 step 10b); and it
//! cuts the torn tail with a `set_len` that rewrites the atomic unit holding
//! the last frame (step 10). Both put bytes back in flight that may already
//! have been durable: the last group an fsync acknowledged before the crash
//! (nothing on disk says so), the header, the frames sharing the cut's unit.
//! A power loss while they are in flight can tear those units (gaps G16 and
//! G19 of the architecture document, closed by this module).
//!
//! So before the first in-place byte, recovery writes the range to
//! [`JOURNAL_NAME`] with a checksum and makes it durable (file and
//! directory). An open that finds a journal first checks it: a whole one is
//! written back into its segment (the same bytes the interrupted recovery
//! was writing) and made durable; a torn one was never complete, so no
//! in-place write had begun, and it is removed, as is one whose segment
//! does not exist (see [`replay`]). The journal is removed, and
//! the removal made durable, before the open returns: a stale journal
//! replayed after the log moved on would overwrite newer records.
//!
//! Layout (little-endian), FORMAT.md §8.5:
//!
//! | Bytes | Field |
//! |---|---|
//! | 0..8 | magic `WALRJNL1` |
//! | 8..16 | `offset`: where the data goes in the segment |
//! | 16..24 | `data_len` |
//! | 24..26 | `name_len` (1..=255) |
//! | 26..26+name_len | the active segment's file name (UTF-8) |
//! | then `data_len` bytes | the data |
//! | last 4 | CRC-32 (IEEE) of everything before it |

use std::path::{Path, PathBuf};

use simfs::{File, Fs, OpenOptions};
use tracing::{info, warn};

use crate::error::{Error, Result};
use crate::segment::SegmentName;

/// The journal's file name in the log directory.
pub(crate) const JOURNAL_NAME: &str = "recovery.journal";
/// A replay's fresh copy of the journal, renamed over it once durable (see
/// [`replay`]). Found by an open, it is a leftover: the journal it copies
/// is still there under [`JOURNAL_NAME`], or was replayed and removed.
pub(crate) const JOURNAL_COPY_NAME: &str = "recovery.journal.new";

const MAGIC: [u8; 8] = *b"WALRJNL1";
const FIXED_BYTES: u64 = 26;
const CRC_BYTES: u64 = 4;
const MAX_NAME_BYTES: usize = 255;
/// Data is copied in chunks of this size (bounded memory).
const CHUNK_BYTES: u64 = 1 << 20;

/// Writes the journal for `[from, end)` of the active segment `file`
/// (named `name`) and makes it durable, file and directory.
pub(crate) async fn write<F: Fs>(fs: &F, dir: &Path, name: &str, file: &F::File, from: u64, end: u64) -> Result<()> {
    debug_assert!(from < end, "an empty journal protects nothing");
    debug_assert!(
        !name.is_empty() && name.len() <= MAX_NAME_BYTES,
        "segment names are short"
    );
    let path = dir.join(JOURNAL_NAME);
    let seg_path = dir.join(name);
    let journal = fs
        .open(&path, OpenOptions::new().write(true).create(true).truncate(true))
        .await
        .map_err(|e| Error::io("create", &path, 0, e))?;
    let mut head = Vec::with_capacity(FIXED_BYTES as usize + name.len());
    head.extend_from_slice(&MAGIC);
    head.extend_from_slice(&from.to_le_bytes());
    head.extend_from_slice(&(end - from).to_le_bytes());
    head.extend_from_slice(&(name.len() as u16).to_le_bytes());
    head.extend_from_slice(name.as_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&head);
    journal
        .write_all_at(&head, 0)
        .await
        .map_err(|e| Error::io("write", &path, 0, e))?;
    let mut at = head.len() as u64;
    let mut buf = Vec::new();
    let mut pos = from;
    while pos < end {
        let n = (end - pos).min(CHUNK_BYTES);
        buf.resize(n as usize, 0);
        file.read_exact_at(&mut buf, pos)
            .await
            .map_err(|e| Error::io("read", &seg_path, pos, e))?;
        crc.update(&buf);
        journal
            .write_all_at(&buf, at)
            .await
            .map_err(|e| Error::io("write", &path, at, e))?;
        at += n;
        pos += n;
    }
    journal
        .write_all_at(&crc.finalize().to_le_bytes(), at)
        .await
        .map_err(|e| Error::io("write", &path, at, e))?;
    #[cfg(feature = "planted-bugs")]
    if crate::testing::planted(crate::testing::Planted::RecoveryJournalNotSynced) {
        return Ok(());
    }
    journal
        .sync_data()
        .await
        .map_err(|e| Error::io("sync_data", &path, 0, e))?;
    fs.sync_dir(dir).await.map_err(|e| Error::io("sync_dir", dir, 0, e))?;
    Ok(())
}

/// Removes the journal (if there is one) and makes the removal durable.
pub(crate) async fn remove<F: Fs>(fs: &F, dir: &Path) -> Result<()> {
    let path = dir.join(JOURNAL_NAME);
    match fs.remove_file(&path).await {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("remove", &path, 0, e)),
    }
    fs.sync_dir(dir).await.map_err(|e| Error::io("sync_dir", dir, 0, e))
}

/// What an open found in the journal.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Replayed {
    /// No journal.
    None,
    /// A torn journal (never complete, so no in-place write had begun):
    /// removed.
    Torn,
    /// A whole journal: this many bytes written back into its segment,
    /// made durable, and the journal removed.
    Bytes(u64),
    /// A whole journal for a segment that does not exist: removed.
    Stale,
}

/// The parsed fixed part of a journal.
struct Head {
    offset: u64,
    data_len: u64,
    name: String,
    data_at: u64,
}

/// Replays the journal, if any (see the module docs). A whole journal whose
/// name is not an active segment's is corruption: nothing is changed. One
/// whose segment does not exist is stale and removed.
///
/// `read_only`: nothing is changed. A torn or stale journal is reported as
/// it would be removed; a whole one cannot be replayed without writing, and
/// the segment it names cannot be served without it (its bytes may be the
/// only good copy of records): `Error::ReadOnly`.
pub(crate) async fn replay<F: Fs>(fs: &F, dir: &Path, read_only: bool) -> Result<Replayed> {
    let path = dir.join(JOURNAL_NAME);
    let journal = match fs.open(&path, OpenOptions::new().read(true)).await {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Replayed::None),
        Err(e) => return Err(Error::io("open", &path, 0, e)),
    };
    let len = journal.len().await.map_err(|e| Error::io("len", &path, 0, e))?;
    let Some(head) = read_head(&journal, &path, len).await? else {
        return torn(fs, dir, &path, "short or bad header", read_only).await;
    };
    if !check_crc(&journal, &path, &head, len).await? {
        return torn(fs, dir, &path, "checksum mismatch", read_only).await;
    }
    check_names_active(&path, &head)?;
    let seg_path = dir.join(&head.name);
    let Some(target) = open_target(fs, dir, &path, &seg_path, &head, read_only).await? else {
        return Ok(Replayed::Stale);
    };
    if read_only {
        drop(target);
        return Err(read_only_refusal(path, &head));
    }
    // The journal may be whole only in the page cache (the open that wrote
    // it failed before or in its fsync; a process crash kept the pages): it
    // must be durable before its bytes go back in flight, or a power loss
    // during the replay could lose both copies (soak seed 30005268). Its own
    // fsync cannot tell: after a failed one, ext4 marks the pages clean with
    // the bytes in memory only, and a later fsync finds nothing to write and
    // returns `Ok` (soak seed 92022324). Writing the bytes again in place
    // would put a journal that may be durable, and the only good copy of
    // records an earlier replay began to write back, in flight. So the
    // replay writes a fresh copy, makes it durable, and renames it over the
    // journal: the journal is only ever read, replaced whole or removed.
    let journal = copy_durably(fs, dir, &path, &journal, &head, len).await?;
    write_back(&journal, &path, &target, &seg_path, &head).await?;
    target
        .sync_data()
        .await
        .map_err(|e| Error::io("sync_data", &seg_path, 0, e))?;
    info!(segment = %seg_path.display(), offset = head.offset, bytes = head.data_len, "replayed the recovery journal");
    remove(fs, dir).await?;
    Ok(Replayed::Bytes(head.data_len))
}

/// Refuses a whole journal (at `path`) that does not name an active
/// segment: only an active segment is ever rewritten in place, so such a
/// journal was not written by recovery, and nothing is changed.
fn check_names_active(path: &Path, head: &Head) -> Result<()> {
    if !matches!(SegmentName::parse(&head.name), Some(SegmentName::Active { .. })) {
        return Err(Error::corruption(
            path,
            24,
            format!("journal names {:?}, which is not an active segment", head.name),
        ));
    }
    Ok(())
}

/// Opens the segment a whole journal names (`seg_path`; for writing unless
/// `read_only`). `None` if it does not exist: the journal is stale, and is
/// removed (unless `read_only`), since nothing in it can have been
/// acknowledged durable.
async fn open_target<F: Fs>(
    fs: &F,
    dir: &Path,
    path: &Path,
    seg_path: &Path,
    head: &Head,
    read_only: bool,
) -> Result<Option<F::File>> {
    match fs.open(seg_path, OpenOptions::new().read(true).write(!read_only)).await {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // The segment's name never became durable (recovery writes the
            // journal before its directory fsync; a power loss can keep the
            // journal's name and lose the segment's), or the open that
            // wrote the journal went on to seal or remove the segment and
            // the journal's removal was lost. Either way nothing in it was
            // acknowledged durable: a segment gets a durable name (file and
            // directory fsync) before any record is written to it, so a
            // record whose fsync returned `Ok` lives in a segment whose name
            // survives. The journal is stale.
            warn!(journal = %path.display(), segment = %head.name, "removing a recovery journal whose segment does not exist");
            if !read_only {
                remove(fs, dir).await?;
            }
            Ok(None)
        }
        Err(e) => Err(Error::io("open", seg_path, 0, e)),
    }
}

/// The error of a read-only open that finds a whole journal (at `path`):
/// it cannot be replayed without writing, and the segment it names cannot
/// be served without it (its bytes may be the only good copy of records).
fn read_only_refusal(path: PathBuf, head: &Head) -> Error {
    Error::ReadOnly {
        path,
        reason: format!(
            "an interrupted recovery left {} bytes of {} to write back first; open it writable once",
            head.data_len, head.name
        ),
    }
}

/// Writes the journal's data (read from `journal`, at `path`) back into
/// its segment `target` (at `seg_path`), at the offset the journal names,
/// in chunks of [`CHUNK_BYTES`] (bounded memory). The caller makes it
/// durable.
async fn write_back<Fl: File>(journal: &Fl, path: &Path, target: &Fl, seg_path: &Path, head: &Head) -> Result<()> {
    let mut buf = Vec::new();
    let mut done = 0;
    while done < head.data_len {
        let n = (head.data_len - done).min(CHUNK_BYTES);
        buf.resize(n as usize, 0);
        let at = head.data_at + done;
        journal
            .read_exact_at(&mut buf, at)
            .await
            .map_err(|e| Error::io("read", path, at, e))?;
        let to = head.offset + done;
        target
            .write_all_at(&buf, to)
            .await
            .map_err(|e| Error::io("write", seg_path, to, e))?;
        done += n;
    }
    Ok(())
}

/// Copies the verified journal (`len` bytes) to [`JOURNAL_COPY_NAME`],
/// makes the copy durable, renames it over the journal and makes the
/// rename durable. Returns the copy, now the journal. The bytes are
/// checked again as they are copied: a different read is corruption, and
/// the journal is left as it was.
async fn copy_durably<F: Fs>(
    fs: &F,
    dir: &Path,
    path: &Path,
    journal: &F::File,
    head: &Head,
    len: u64,
) -> Result<F::File> {
    let copy_path = dir.join(JOURNAL_COPY_NAME);
    let copy = fs
        .open(
            &copy_path,
            OpenOptions::new().read(true).write(true).create(true).truncate(true),
        )
        .await
        .map_err(|e| Error::io("create", &copy_path, 0, e))?;
    let body = len - CRC_BYTES;
    let mut crc = crc32fast::Hasher::new();
    let mut buf = Vec::new();
    let mut pos = 0;
    while pos < len {
        let n = (len - pos).min(CHUNK_BYTES);
        buf.resize(n as usize, 0);
        journal
            .read_exact_at(&mut buf, pos)
            .await
            .map_err(|e| Error::io("read", path, pos, e))?;
        let in_body = (body.saturating_sub(pos)).min(n) as usize;
        crc.update(&buf[..in_body]);
        copy.write_all_at(&buf, pos)
            .await
            .map_err(|e| Error::io("write", &copy_path, pos, e))?;
        pos += n;
    }
    let mut trailer = [0u8; CRC_BYTES as usize];
    copy.read_exact_at(&mut trailer, body)
        .await
        .map_err(|e| Error::io("read", &copy_path, body, e))?;
    if u32::from_le_bytes(trailer) != crc.finalize() {
        return Err(Error::corruption(
            path,
            head.data_at,
            "the journal read differently while it was copied",
        ));
    }
    copy.sync_data()
        .await
        .map_err(|e| Error::io("sync_data", &copy_path, 0, e))?;
    fs.rename(&copy_path, path)
        .await
        .map_err(|e| Error::io("rename", &copy_path, 0, e))?;
    fs.sync_dir(dir).await.map_err(|e| Error::io("sync_dir", dir, 0, e))?;
    Ok(copy)
}

async fn torn<F: Fs>(fs: &F, dir: &Path, path: &Path, why: &str, read_only: bool) -> Result<Replayed> {
    warn!(path = %path.display(), why, "removing a torn recovery journal (no in-place write had begun)");
    if !read_only {
        remove(fs, dir).await?;
    }
    Ok(Replayed::Torn)
}

/// The fixed part, or `None` if it cannot be a whole journal's.
async fn read_head<Fl: File>(journal: &Fl, path: &Path, len: u64) -> Result<Option<Head>> {
    if len < FIXED_BYTES + 1 + CRC_BYTES {
        return Ok(None);
    }
    let mut fixed = [0u8; FIXED_BYTES as usize];
    journal
        .read_exact_at(&mut fixed, 0)
        .await
        .map_err(|e| Error::io("read", path, 0, e))?;
    let u64_at = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&fixed[at..at + 8]);
        u64::from_le_bytes(b)
    };
    let name_len = u64::from(u16::from_le_bytes([fixed[24], fixed[25]]));
    let (offset, data_len) = (u64_at(8), u64_at(16));
    let whole = FIXED_BYTES
        .checked_add(name_len)
        .and_then(|n| n.checked_add(data_len))
        .and_then(|n| n.checked_add(CRC_BYTES));
    if fixed[..8] != MAGIC
        || name_len == 0
        || name_len > MAX_NAME_BYTES as u64
        || data_len == 0
        || whole != Some(len)
        || offset.checked_add(data_len).is_none()
    {
        return Ok(None);
    }
    let mut name = vec![0u8; name_len as usize];
    journal
        .read_exact_at(&mut name, FIXED_BYTES)
        .await
        .map_err(|e| Error::io("read", path, FIXED_BYTES, e))?;
    let Ok(name) = String::from_utf8(name) else {
        return Ok(None);
    };
    Ok(Some(Head {
        offset,
        data_len,
        name,
        data_at: FIXED_BYTES + name_len,
    }))
}

/// Whether the trailer matches everything before it.
async fn check_crc<Fl: File>(journal: &Fl, path: &Path, head: &Head, len: u64) -> Result<bool> {
    let body = len - CRC_BYTES;
    let mut crc = crc32fast::Hasher::new();
    let mut buf = Vec::new();
    let mut pos = 0;
    while pos < body {
        let n = (body - pos).min(CHUNK_BYTES);
        buf.resize(n as usize, 0);
        journal
            .read_exact_at(&mut buf, pos)
            .await
            .map_err(|e| Error::io("read", path, pos, e))?;
        crc.update(&buf);
        pos += n;
    }
    let mut trailer = [0u8; CRC_BYTES as usize];
    journal
        .read_exact_at(&mut trailer, body)
        .await
        .map_err(|e| Error::io("read", path, body, e))?;
    debug_assert_eq!(body, head.data_at + head.data_len, "read_head checked the length");
    Ok(u32::from_le_bytes(trailer) == crc.finalize())
}
