//! The operator's tools: what a person with shell access does to a log
//! directory after the WAL reported damage that no open mode can get past.
//!
//! The simulation uses them so that a run does not end on honest damage
//! (issue 11, deliverable 2): it repairs as an operator would, then the
//! oracle checks that exactly what the damage ledger explains is gone and
//! the workload goes on. Each tool changes only what the report named:
//!
//! - [`rewrite_bad_sectors`]: the drive's bad-block list (`badblocks`, SMART)
//!   names the unreadable sectors of a file; rewriting them with zeros
//!   makes the drive remap them, so the file reads again and the WAL sees
//!   the zeros as damage it can cut at (a point-in-time open).
//! - [`move_aside`]: a file whose own header is bad (the meta file, or an
//!   active segment whose header never became durable) is renamed to
//!   `<name>.damaged`, which the WAL ignores, and kept for inspection.
//! - [`seal_by_hand`]: two active segments, where the older one's seal
//!   (a rename) was lost: its frames are read and verified one by one from
//!   its header; if they end before the newer one begins, it gets the sealed
//!   name of what it verifiably holds (a gap left then is the next repair's).
//!   Otherwise nothing changes.
//!
//! Every step goes through the faulty filesystem like any other process
//! would, so each is retried a bounded number of times.

use std::io;
use std::path::{Path, PathBuf};

use simfs::{File, Fs, OpenOptions, SimFs};

/// Attempts per filesystem step before the tool gives up.
const MAX_TRIES: u32 = 10;

/// What a segment file's name says: `{first}-{last}-{id}.wal` (sealed) or
/// `{first}-active-{id}.wal`, as an operator reads it off `ls`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegName {
    /// The first index.
    pub first: u64,
    /// The last index (`None`: active).
    pub last: Option<u64>,
    /// The segment id (hex in the name).
    pub id: u64,
}

impl SegName {
    /// Parses a segment file's name (`None` for any other name).
    pub fn parse(name: &str) -> Option<SegName> {
        let mut parts = name.strip_suffix(".wal")?.split('-');
        let (first, last, id) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let last = if last == "active" {
            None
        } else {
            Some(last.parse().ok()?)
        };
        Some(SegName {
            first: first.parse().ok()?,
            last,
            id: u64::from_str_radix(id, 16).ok()?,
        })
    }
}

/// Whether the names `segs` together hold every index of `from..to`
/// (an active segment's name holds everything from its first index on).
pub fn names_cover(segs: &[SegName], from: u64, to: u64) -> bool {
    let mut pos = from;
    while pos < to {
        let Some(end) = segs
            .iter()
            .filter(|s| s.first <= pos && s.last.is_none_or(|l| l >= pos))
            .map(|s| s.last.map_or(u64::MAX, |l| l.saturating_add(1)))
            .max()
        else {
            return false;
        };
        pos = end;
    }
    true
}

/// A break in the segment chain that a recovery reported ("... segment
/// starts at X, expected Y"): `(X, Y)`; X > Y is a gap, X < Y an overlap.
pub fn chain_break(reason: &str) -> Option<(u64, u64)> {
    let (_, rest) = reason.split_once("segment starts at ")?;
    let (at, expected) = rest.split_once(", expected ")?;
    Some((at.trim().parse().ok()?, expected.trim().parse().ok()?))
}

/// What an operator's repair did, for the event log.
#[derive(Debug)]
pub enum Repaired {
    /// Rewrote this many unreadable sectors of the file with zeros.
    Sectors(usize),
    /// Renamed the file to this path.
    MovedTo(PathBuf),
}

/// Rewrites every unreadable sector of the file at `path` with zeros and
/// fsyncs it. `Ok(Sectors(0))` if the drive lists none (nothing changed).
pub async fn rewrite_bad_sectors(fs: &SimFs, path: &Path) -> io::Result<Repaired> {
    let bad = fs.bad_sectors(path);
    if bad.is_empty() {
        return Ok(Repaired::Sectors(0));
    }
    let file = retry(|| fs.open(path, OpenOptions::new().read(true).write(true))).await?;
    for r in &bad {
        let zeros = vec![0u8; (r.end - r.start) as usize];
        retry(|| async { file.write_all_at(&zeros, r.start).await }).await?;
    }
    retry(|| file.sync_data()).await?;
    Ok(Repaired::Sectors(bad.len()))
}

/// Renames `path` to `<path>.damaged` (or `.damaged-N` if taken) and
/// fsyncs its directory.
pub async fn move_aside(fs: &SimFs, path: &Path) -> io::Result<Repaired> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let names = fs.list_dir(dir).unwrap_or_default();
    let to = (0..)
        .map(|n| {
            if n == 0 {
                format!("{name}.damaged")
            } else {
                format!("{name}.damaged-{n}")
            }
        })
        .find(|c| !names.contains(c))
        .map(|c| dir.join(c))
        .unwrap_or_else(|| dir.join(format!("{name}.damaged")));
    rename_durably(fs, path, &to).await?;
    Ok(Repaired::MovedTo(to))
}

/// Renames `from` to `to` (retried; a rename can fail after taking effect,
/// so the name is looked at, not the error) and fsyncs the directory.
async fn rename_durably(fs: &SimFs, from: &Path, to: &Path) -> io::Result<()> {
    for _ in 0..MAX_TRIES {
        if fs.rename(from, to).await.is_ok() || fs.inode_of(from).is_none() {
            break;
        }
    }
    if fs.inode_of(from).is_some() {
        return Err(io::Error::other(format!("could not rename {}", from.display())));
    }
    retry(|| fs.sync_dir(from.parent().unwrap_or(Path::new("/")))).await
}

/// Seals the active segment at `path` by hand, at its last valid frame, if
/// that is below `next_first` (the newer active segment's first index):
/// renames it to `{first}-{last}-{id}.wal` and fsyncs the directory.
/// `Err` (nothing changed) if they do not; of kind `InvalidData` if its
/// header is bad (then it never held a durable record: move it aside).
pub async fn seal_by_hand(fs: &SimFs, path: &Path, next_first: u64) -> io::Result<Repaired> {
    use wal::codec::{self, FrameKind, SegmentHeader};
    let file = retry(|| fs.open(path, OpenOptions::new().read(true))).await?;
    let len = retry(|| file.len()).await?;
    let mut bytes = vec![0u8; len as usize];
    let mut last_err = None;
    for _ in 0..MAX_TRIES {
        match file.read_exact_at(&mut bytes, 0).await {
            Ok(()) => {
                last_err = None;
                break;
            }
            Err(e) => last_err = Some(e),
        }
    }
    if let Some(e) = last_err {
        return Err(e);
    }
    let bad = |why: &str| io::Error::other(format!("{}: {why}", path.display()));
    let header = bytes
        .get(..codec::SEGMENT_HEADER_BYTES)
        .and_then(|h| SegmentHeader::decode(h).ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("{}: bad header", path.display())))?;
    let seed = header.frame_seed();
    let mut off = codec::SEGMENT_HEADER_BYTES;
    let mut last = None;
    while let Some(rest) = bytes.get(off..) {
        let Ok((h, _)) = codec::decode_frame(rest, seed) else {
            break;
        };
        if matches!(h.kind, FrameKind::Record | FrameKind::BatchEnd) {
            last = Some(h.index);
        }
        off += h.frame_len();
    }
    let last = last.ok_or_else(|| bad("no valid frame"))?;
    // Frames ending before `next_first` leave a gap the next open reports
    // (and the operator's gap repair cuts, each lost record explained by
    // the ledger); frames past it would overlap the newer segment.
    if last >= next_first || header.first_index > last {
        return Err(bad(&format!(
            "frames end at index {last}, the newer active segment starts at {next_first}"
        )));
    }
    let to = path.with_file_name(format!(
        "{:020}-{:020}-{:016x}.wal",
        header.first_index, last, header.segment_id
    ));
    rename_durably(fs, path, &to).await?;
    Ok(Repaired::MovedTo(to))
}

/// Runs `op` until it succeeds, at most [`MAX_TRIES`] times.
async fn retry<T, Fut, Op>(mut op: Op) -> io::Result<T>
where
    Op: FnMut() -> Fut,
    Fut: std::future::Future<Output = io::Result<T>>,
{
    let mut last = None;
    for _ in 0..MAX_TRIES {
        match op().await {
            Ok(v) => return Ok(v),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no attempt made")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(name: &str) -> SegName {
        SegName::parse(name).expect("a segment name")
    }

    /// Seed 90004374's shape: the compaction output `0..=48` went aside;
    /// indices `0..38` are covered by it, `0..50` are not.
    #[test]
    fn names_cover_a_range_only_where_every_index_is_in_one_of_them() {
        let out = seg("00000000000000000000-00000000000000000048-0000000000000009.wal");
        assert!(names_cover(&[out], 0, 38));
        assert!(names_cover(&[out], 0, 49));
        assert!(!names_cover(&[out], 0, 50));
        assert!(!names_cover(&[], 0, 1));
        assert!(names_cover(&[], 5, 5));
        // Two contiguous names, and an active one (open-ended).
        let a = seg("00000000000000000010-00000000000000000019-0000000000000002.wal");
        let b = seg("00000000000000000020-active-0000000000000003.wal");
        assert!(names_cover(&[b, a], 10, 1000));
        assert!(!names_cover(&[a], 9, 12));
        // A hole between two names.
        let c = seg("00000000000000000021-00000000000000000030-0000000000000004.wal");
        assert!(!names_cover(&[a, c], 10, 25));
    }
}
