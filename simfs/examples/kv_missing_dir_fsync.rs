//! Finding a missing directory fsync in a tiny key-value store with SimFs.
//!
//! The store keeps one file per key. `put` writes `<key>.tmp`, fsyncs it and
//! renames it over `<key>`: the classic atomic replace. The buggy version
//! stops there; but a rename is only durable once its directory is fsynced,
//! so after a power loss an acknowledged put can be gone (the old value, or
//! no value, comes back). The fixed version calls `Fs::sync_dir` after the
//! rename.
//!
//! The hunt runs the workload once to count its filesystem operations
//! (`SimFs::ops_run`), then, for a handful of seeds, crashes it with a power
//! loss at every operation (`SimFs::crash_after`) and once after the end,
//! recovers on the same `SimFs` value (it is the restarted machine) and
//! checks that every acknowledged put is there.
//!
//! `cargo run -p simfs --example kv_missing_dir_fsync` prints the finding for
//! the buggy store and the clean result of the fixed one. It exits 0 when the
//! demonstration works (the bug is found, the fix passes); `simfs/tests/kv_example.rs`
//! runs the same hunt in CI.

use std::collections::BTreeMap;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};

use simfs::{CrashKind, File, Fs, OpenOptions, SimFs, TraceEvent};

/// One file per key, replaced atomically by `put`. Generic over [`Fs`]: the
/// same code runs on `OsFs`.
pub struct Store<F: Fs> {
    fs: F,
    dir: PathBuf,
    /// Whether `put` makes its rename durable (the fix).
    dir_fsync: bool,
}

impl<F: Fs> Store<F> {
    /// Opens (creating) the store in `dir`, a child of `/`.
    pub async fn open(fs: F, dir: &Path, dir_fsync: bool) -> io::Result<Store<F>> {
        fs.create_dir_all(dir).await?;
        fs.sync_dir(dir.parent().unwrap_or(Path::new("/"))).await?;
        Ok(Store {
            fs,
            dir: dir.to_path_buf(),
            dir_fsync,
        })
    }

    /// Stores `value` under `key`; once it returns Ok the value must survive
    /// any crash.
    pub async fn put(&self, key: &str, value: &[u8]) -> io::Result<()> {
        let tmp = self.dir.join(format!("{key}.tmp"));
        let opts = OpenOptions::new().write(true).create(true).truncate(true);
        let f = self.fs.open(&tmp, opts).await?;
        f.write_all_at(value, 0).await?;
        f.sync_data().await?;
        drop(f);
        self.fs.rename(&tmp, &self.dir.join(key)).await?;
        if self.dir_fsync {
            self.fs.sync_dir(&self.dir).await?; // the fix: make the rename durable
        }
        Ok(())
    }

    /// The value under `key`, if any.
    pub async fn get(&self, key: &str) -> io::Result<Option<Vec<u8>>> {
        let f = match self.fs.open(&self.dir.join(key), OpenOptions::new().read(true)).await {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut buf = vec![0u8; f.len().await? as usize];
        f.read_exact_at(&mut buf, 0).await?;
        Ok(Some(buf))
    }
}

const DIR: &str = "/kv";
const KEYS: [&str; 2] = ["a", "b"];
const PUTS: [(&str, &str); 5] = [("a", "a1"), ("b", "b1"), ("a", "a2"), ("b", "b2"), ("a", "a3")];

/// An acknowledged put that a power loss lost.
#[derive(Debug)]
pub struct Finding {
    /// The seed of the run.
    pub seed: u64,
    /// The operation the power loss hit (`None`: after the workload ended).
    pub crash_at: Option<u64>,
    /// The key whose acknowledged value is gone.
    pub key: &'static str,
    /// The value its last acknowledged put stored.
    pub acked: Option<&'static str>,
    /// What the restarted store returned.
    pub got: Option<Vec<u8>>,
    /// The run's directory operations and crash, from the trace.
    pub trace: Vec<TraceEvent>,
}

/// The result of a hunt.
#[derive(Debug)]
pub struct Hunt {
    /// Operations of one crash-free run (`SimFs::ops_run`).
    pub ops: u64,
    /// What each operation was, from the dry run's trace.
    pub op_names: Vec<String>,
    /// Crash runs made.
    pub runs: u64,
    /// Every run that lost an acknowledged put.
    pub findings: Vec<Finding>,
}

/// The workload: open the store and put [`PUTS`] until the first error.
/// Returns the last acknowledged value of each key and the put in flight
/// when it stopped, if any.
async fn workload(
    fs: &SimFs,
    dir_fsync: bool,
) -> (
    BTreeMap<&'static str, &'static str>,
    Option<(&'static str, &'static str)>,
) {
    let mut acked = BTreeMap::new();
    let Ok(store) = Store::open(fs.clone(), Path::new(DIR), dir_fsync).await else {
        return (acked, None);
    };
    for (key, value) in PUTS {
        if store.put(key, value.as_bytes()).await.is_err() {
            return (acked, Some((key, value)));
        }
        acked.insert(key, value);
    }
    (acked, None)
}

/// One run: power loss at operation `crash_at` (or after the end), then
/// recovery on the same `SimFs` and the check.
async fn crash_run(seed: u64, crash_at: u64, dir_fsync: bool) -> io::Result<Option<Finding>> {
    let fs = SimFs::new(seed);
    fs.crash_after(crash_at, CrashKind::PowerLoss);
    let (acked, in_flight) = workload(&fs, dir_fsync).await;
    // Still armed: the workload ended first. Pull the plug now.
    let crashed_in_workload = fs.cancel_crash().is_none();
    if !crashed_in_workload {
        fs.crash(CrashKind::PowerLoss);
    }
    // The store of the workload and its handles belonged to the dead process
    // (they are gone with `workload`'s frame). `fs` itself is the restarted
    // machine: recovery opens the store on it again.
    let store = Store::open(fs.clone(), Path::new(DIR), dir_fsync).await?;
    for key in KEYS {
        let got = store.get(key).await?;
        let ok_acked = got.as_deref() == acked.get(key).map(|v| v.as_bytes());
        let ok_in_flight = matches!(in_flight, Some((k, v)) if k == key && got.as_deref() == Some(v.as_bytes()));
        if !ok_acked && !ok_in_flight {
            let interesting = ["rename", "sync_dir", "power_loss", "dir_op_kept", "dir_op_lost"];
            return Ok(Some(Finding {
                seed,
                crash_at: crashed_in_workload.then_some(crash_at),
                key,
                acked: acked.get(key).copied(),
                got,
                trace: fs.trace().into_iter().filter(|e| interesting.contains(&e.op)).collect(),
            }));
        }
    }
    Ok(None)
}

/// Crashes the workload with a power loss at every operation and after the
/// end, for every seed of `seeds`.
pub fn hunt(dir_fsync: bool, seeds: Range<u64>) -> io::Result<Hunt> {
    futures::executor::block_on(async {
        // Dry run: count the operations and name them (from the trace: every
        // event but the closes of dropped handles is an operation here).
        let fs = SimFs::new(0);
        let (acked, _) = workload(&fs, dir_fsync).await;
        assert_eq!(acked.len(), KEYS.len(), "the dry run completes");
        let ops = fs.ops_run();
        let op_names: Vec<String> = fs.trace().iter().filter(|e| e.op != "close").map(describe).collect();
        assert_eq!(op_names.len() as u64, ops);

        let mut hunt = Hunt {
            ops,
            op_names,
            runs: 0,
            findings: Vec::new(),
        };
        for seed in seeds {
            for crash_at in 0..=ops {
                hunt.runs += 1;
                if let Some(f) = crash_run(seed, crash_at, dir_fsync).await? {
                    hunt.findings.push(f);
                }
            }
        }
        Ok(hunt)
    })
}

/// One trace event as `op path-or-inode [-> to_path] result`.
fn describe(e: &TraceEvent) -> String {
    let mut s = e.op.to_string();
    match (&e.path, e.ino) {
        (Some(p), _) => s += &format!(" {p}"),
        (None, Some(ino)) => s += &format!(" ino={ino}"),
        (None, None) => {}
    }
    if let Some(to) = &e.to_path {
        s += &format!(" -> {to}");
    }
    s + &format!(" {}", e.result)
}

fn show(v: Option<&[u8]>) -> String {
    v.map_or("None".to_string(), |v| format!("{:?}", String::from_utf8_lossy(v)))
}

fn report(name: &str, dir_fsync: bool, seeds: Range<u64>) -> io::Result<bool> {
    let h = hunt(dir_fsync, seeds.clone())?;
    println!(
        "{name}: {} operations per run; power loss at each of them and after the last, seeds {seeds:?}: {} runs",
        h.ops, h.runs
    );
    let Some(f) = h.findings.first() else {
        println!("  no acknowledged put lost");
        return Ok(false);
    };
    println!(
        "  FOUND in {} of {} runs: an acknowledged put lost after power loss (missing directory fsync)",
        h.findings.len(),
        h.runs
    );
    let when = match f.crash_at {
        Some(n) => format!("at operation {n} ({})", h.op_names[n as usize]),
        None => "after the workload ended".to_string(),
    };
    println!(
        "  first: seed {}, power loss {when}: put({:?}, {}) had returned Ok, but after restart get({:?}) = {}",
        f.seed,
        f.key,
        show(f.acked.map(str::as_bytes)),
        f.key,
        show(f.got.as_deref())
    );
    println!("  its directory operations and the crash, from SimFs::trace:");
    for e in &f.trace {
        println!("    #{:<3} {}", e.seq, describe(e));
    }
    println!("  cause: a rename is durable only once its directory is fsynced (Fs::sync_dir)");
    Ok(true)
}

fn main() -> io::Result<()> {
    let seeds = 0..8;
    let found = report("buggy store (no sync_dir after the rename)", false, seeds.clone())?;
    println!();
    let fixed_found = report("fixed store (sync_dir after the rename)", true, seeds)?;
    if !found || fixed_found {
        eprintln!("the demonstration failed: buggy store caught = {found}, fixed store caught = {fixed_found}");
        std::process::exit(1);
    }
    println!();
    println!("demonstrated: the hunt catches the missing directory fsync and passes the fixed store");
    Ok(())
}
