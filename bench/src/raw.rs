//! The raw limit: plain `std::fs`, framed bytes (the WAL's frame size, with a
//! crc) and one `fdatasync` per commit, into a growing file or into a
//! pre-zeroed one. No index, no recovery, no torn-write protection: what the
//! disk allows, not a usable log.

use std::fs::{File, OpenOptions};
use std::io::{BufReader, BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::common::{decode_raw_header, drive, encode_raw, lock, raw_crc_ok, raw_frame_len, BResult, Run, RAW_HEADER};

/// The log file's name inside its directory.
pub const FILE: &str = "raw.log";

struct Tail {
    file: File,
    offset: u64,
    next: u64,
    buf: Vec<u8>,
}

fn create(dir: &Path, prezero: Option<u64>) -> BResult<File> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(FILE);
    let file = OpenOptions::new().read(true).write(true).create_new(true).open(&path)?;
    if let Some(bytes) = prezero {
        // Real zeros (not a sparse or unwritten extent): the later fdatasyncs
        // then change no metadata at all.
        let zeros = vec![0u8; 1 << 20];
        let mut off = 0;
        while off < bytes {
            let n = (bytes - off).min(zeros.len() as u64) as usize;
            file.write_all_at(&zeros[..n], off)?;
            off += n as u64;
        }
        file.sync_all()?;
    }
    File::open(dir)?.sync_all()?;
    Ok(file)
}

/// `threads` writers, each commit = lock, pwrite one frame, fdatasync, unlock
/// (the naive loop: no group commit). `prezero` = size of the pre-zeroed file
/// (writes wrap to its start when they reach its end); `None` = growing file.
pub fn durable(dir: &Path, threads: usize, size: usize, dur: Duration, prezero: Option<u64>) -> BResult<Run> {
    let file = create(dir, prezero)?;
    let tail = Mutex::new(Tail {
        file,
        offset: 0,
        next: 0,
        buf: Vec::with_capacity(raw_frame_len(size)),
    });
    let data = crate::common::payload(size, 1);
    let (records, secs, lat_ns) = drive(threads, dur, |_, _| {
        let mut t = lock(&tail);
        let t = &mut *t;
        t.buf.clear();
        encode_raw(&mut t.buf, t.next, &data);
        if let Some(cap) = prezero {
            if t.offset + t.buf.len() as u64 > cap {
                t.offset = 0;
            }
        }
        t.file.write_all_at(&t.buf, t.offset)?;
        t.file.sync_data()?;
        t.offset += t.buf.len() as u64;
        t.next += 1;
        Ok(())
    })?;
    Ok(Run {
        records,
        secs,
        lat_ns,
        records_per_fsync: Some(1.0),
        note: None,
    })
}

/// How the bulk load writes.
#[derive(Clone, Copy, Debug)]
pub enum Bulk {
    /// One `pwrite` per record into a growing file (naive).
    Grow,
    /// One `pwrite` per record into a pre-zeroed file (naive).
    Prezeroed,
    /// A 1 MiB `BufWriter` (few large writes).
    Buffered,
}

/// Writes `n` records of `size` bytes, then one fdatasync. Timed: the writes
/// and the sync (pre-zeroing is not timed).
pub fn bulk(dir: &Path, n: u64, size: usize, how: Bulk) -> BResult<Run> {
    let prezero = matches!(how, Bulk::Prezeroed).then(|| n * raw_frame_len(size) as u64);
    let file = create(dir, prezero)?;
    let data = crate::common::payload(size, 1);
    let mut buf = Vec::with_capacity(raw_frame_len(size));
    let start = Instant::now();
    match how {
        Bulk::Grow | Bulk::Prezeroed => {
            let mut off = 0u64;
            for i in 0..n {
                buf.clear();
                encode_raw(&mut buf, i, &data);
                file.write_all_at(&buf, off)?;
                off += buf.len() as u64;
            }
            file.sync_data()?;
        }
        Bulk::Buffered => {
            let mut w = BufWriter::with_capacity(1 << 20, file);
            for i in 0..n {
                buf.clear();
                encode_raw(&mut buf, i, &data);
                w.write_all(&buf)?;
            }
            let file = w.into_inner().map_err(|e| e.into_error())?;
            file.sync_data()?;
        }
    }
    Ok(Run {
        records: n,
        secs: start.elapsed().as_secs_f64(),
        lat_ns: Vec::new(),
        records_per_fsync: Some(n as f64),
        note: None,
    })
}

/// Reads every frame back in order through a 1 MiB `BufReader`, checking each
/// crc and copying each payload into its own `Vec` (as the logs return them).
pub fn read_all(dir: &Path) -> BResult<Run> {
    let start = Instant::now();
    let mut r = BufReader::with_capacity(1 << 20, File::open(dir.join(FILE))?);
    let mut header = [0u8; RAW_HEADER];
    let mut records = 0u64;
    let mut bytes = 0u64;
    loop {
        match r.read_exact(&mut header) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e.into()),
        }
        let Some((len, index, crc)) = decode_raw_header(&header) else {
            break;
        };
        let mut data = vec![0u8; raw_frame_len(len) - RAW_HEADER];
        r.read_exact(&mut data)?;
        data.truncate(len);
        if !raw_crc_ok(index, &data, crc) {
            return Err(format!("raw: bad crc at record {index}").into());
        }
        records += 1;
        bytes += data.len() as u64;
    }
    std::hint::black_box(bytes);
    Ok(Run {
        records,
        secs: start.elapsed().as_secs_f64(),
        lat_ns: Vec::new(),
        records_per_fsync: None,
        note: None,
    })
}
