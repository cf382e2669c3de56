//! What every system shares: payloads, the raw frame, the thread driver, and
//! the measurement of one run.

use std::error::Error;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

/// Errors of a run: any error, sendable across the writer threads.
pub type BoxError = Box<dyn Error + Send + Sync>;
/// Result of a run.
pub type BResult<T> = Result<T, BoxError>;

/// What one run of one system measured.
#[derive(Clone, Debug, Default)]
pub struct Run {
    /// Records made durable (or read).
    pub records: u64,
    /// Wall-clock seconds of the timed part.
    pub secs: f64,
    /// Per-commit latencies in nanoseconds (empty where not measured).
    pub lat_ns: Vec<u64>,
    /// Records per fsync, where the system reports it.
    pub records_per_fsync: Option<f64>,
    /// What the run did besides (for the table's note).
    pub note: Option<String>,
}

/// A payload of `size` pseudo-random (incompressible) bytes.
pub fn payload(size: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Bytes of the raw frame header: kind, length, index, crc, reserved. The same
/// size as the WAL's frame header, so the raw limit writes as many bytes.
pub const RAW_HEADER: usize = 32;

/// Length of a raw frame for a payload of `len` bytes (8-byte aligned).
pub fn raw_frame_len(len: usize) -> usize {
    (RAW_HEADER + len).div_ceil(8) * 8
}

fn raw_crc(index: u64, payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&index.to_le_bytes());
    h.update(&(payload.len() as u32).to_le_bytes());
    h.update(payload);
    h.finalize()
}

/// Appends a raw frame (header, payload, zero padding to 8 bytes) to `buf`.
pub fn encode_raw(buf: &mut Vec<u8>, index: u64, payload: &[u8]) {
    let start = buf.len();
    buf.extend_from_slice(&1u32.to_le_bytes());
    buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    buf.extend_from_slice(&index.to_le_bytes());
    buf.extend_from_slice(&raw_crc(index, payload).to_le_bytes());
    buf.extend_from_slice(&[0u8; 12]);
    buf.extend_from_slice(payload);
    buf.resize(start + raw_frame_len(payload.len()), 0);
}

/// Decodes a raw frame header: `(payload length, index, crc)`, or `None` for
/// the zero end of a file.
pub fn decode_raw_header(h: &[u8; RAW_HEADER]) -> Option<(usize, u64, u32)> {
    let word = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    if word(0) != 1 {
        return None;
    }
    let mut idx = [0u8; 8];
    idx.copy_from_slice(&h[8..16]);
    Some((word(4) as usize, u64::from_le_bytes(idx), word(16)))
}

/// Checks a raw frame's crc.
pub fn raw_crc_ok(index: u64, payload: &[u8], crc: u32) -> bool {
    raw_crc(index, payload) == crc
}

/// Runs `threads` writers for `dur`: each calls `op(thread, seq)` in a loop
/// (seq = 0, 1, 2, ... per thread) and records each call's latency. Returns
/// the total calls, the seconds from the common start until the last writer
/// finished, and every latency.
pub fn drive<F>(threads: usize, dur: Duration, op: F) -> BResult<(u64, f64, Vec<u64>)>
where
    F: Fn(usize, u64) -> BResult<()> + Sync,
{
    let barrier = Barrier::new(threads + 1);
    let lats = Mutex::new(Vec::new());
    let switches = AtomicU64::new(0);
    let first_error: Mutex<Option<BoxError>> = Mutex::new(None);
    let start = std::thread::scope(|s| {
        for t in 0..threads {
            let (barrier, lats, first_error, op, switches) = (&barrier, &lats, &first_error, &op, &switches);
            s.spawn(move || {
                let mut mine = Vec::with_capacity(1 << 14);
                barrier.wait();
                let switches_before = thread_switches();
                let deadline = Instant::now() + dur;
                let mut seq = 0u64;
                while Instant::now() < deadline {
                    let t0 = Instant::now();
                    if let Err(e) = op(t, seq) {
                        lock(first_error).get_or_insert(e);
                        break;
                    }
                    mine.push(t0.elapsed().as_nanos() as u64);
                    seq += 1;
                }
                let switched = thread_switches().zip(switches_before).map(|(a, b)| a.saturating_sub(b));
                switches.fetch_add(switched.unwrap_or(0), Ordering::Relaxed);
                lock(lats).extend(mine);
            });
        }
        barrier.wait();
        Instant::now()
    });
    let secs = start.elapsed().as_secs_f64();
    if let Some(e) = lock(&first_error).take() {
        return Err(e);
    }
    let lats = std::mem::take(&mut *lock(&lats));
    *lock(&LAST_DRIVE) = Some((lats.len() as u64, switches.load(Ordering::Relaxed)));
    Ok((lats.len() as u64, secs, lats))
}

/// `(calls, context switches of the writer threads)` of the last `drive`.
static LAST_DRIVE: Mutex<Option<(u64, u64)>> = Mutex::new(None);

/// Context switches per call of the writer threads in the last [`drive`],
/// if it made `calls` calls (so a stale value is never reported).
pub fn last_drive_switches_per_call(calls: u64) -> Option<f64> {
    match *lock(&LAST_DRIVE) {
        Some((n, switches)) if n == calls && n > 0 => Some(switches as f64 / n as f64),
        _ => None,
    }
}

/// This thread's context switches so far (voluntary + involuntary, from
/// `/proc/thread-self/status`); `None` where that file does not exist.
fn thread_switches() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/thread-self/status").ok()?;
    let mut total = 0;
    for line in status.lines() {
        if let Some(rest) = line
            .strip_prefix("voluntary_ctxt_switches:")
            .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
        {
            total += rest.trim().parse::<u64>().ok()?;
        }
    }
    Some(total)
}

/// Locks a mutex, ignoring poisoning (a panicked writer already failed the run).
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Tries to drop the page cache (needs root); true if it worked.
pub fn drop_caches() -> bool {
    // SAFETY-free: plain file writes. `sync` first so dirty pages can go.
    let synced = std::process::Command::new("sync")
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    synced && std::fs::write("/proc/sys/vm/drop_caches", b"3\n").is_ok()
}

/// Total size of the regular files under `dir` (one level).
pub fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}
