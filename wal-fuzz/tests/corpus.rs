//! Replays every file of `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/`
//! through the matching fuzz target body, so CI checks the targets without
//! cargo-fuzz.
//!
//! `WAL_FUZZ_WRITE_CORPUS=1 cargo test -p wal-fuzz --test corpus` rewrites
//! the generated seeds (`wal_fuzz::seeds`) into `fuzz/corpus/` first.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    out.sort();
    out
}

fn replay(kind: &str) -> usize {
    let mut n = 0;
    for (target, body) in wal_fuzz::TARGETS {
        for file in files(&fuzz_dir().join(kind).join(target)) {
            let data = std::fs::read(&file).unwrap();
            eprintln!("{kind}/{target}: {}", file.display());
            body(&data);
            n += 1;
        }
    }
    n
}

#[test]
fn generated_seeds_are_in_the_corpus() {
    let corpus = fuzz_dir().join("corpus");
    if std::env::var_os("WAL_FUZZ_WRITE_CORPUS").is_some() {
        wal_fuzz::seeds::write_corpus(&corpus).unwrap();
    }
    for (target, name, bytes) in wal_fuzz::seeds::seeds() {
        let path = corpus.join(target).join(name);
        let on_disk = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (regenerate with WAL_FUZZ_WRITE_CORPUS=1)", path.display()));
        assert_eq!(
            on_disk,
            bytes,
            "{} is stale (regenerate with WAL_FUZZ_WRITE_CORPUS=1)",
            path.display()
        );
    }
}

#[test]
fn corpus_replays_cleanly() {
    let n = replay("corpus");
    assert!(n >= 9, "only {n} corpus files found under {}", fuzz_dir().display());
}

#[test]
fn regressions_replay_cleanly() {
    replay("regressions");
}

#[test]
fn every_seed_runs_directly() {
    for (target, name, bytes) in wal_fuzz::seeds::seeds() {
        let (_, body) = wal_fuzz::TARGETS.iter().find(|(t, _)| *t == target).unwrap();
        eprintln!("seed {target}/{name}");
        body(&bytes);
    }
}
