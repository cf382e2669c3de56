//! CI for `examples/kv_missing_dir_fsync.rs`: the crash-at-every-step hunt
//! must keep catching the store that forgets the directory fsync, and must
//! pass the fixed store.

#[path = "../examples/kv_missing_dir_fsync.rs"]
#[allow(dead_code)]
mod kv;

#[test]
fn the_hunt_catches_the_missing_directory_fsync() {
    let h = kv::hunt(false, 0..8).unwrap();
    assert!(h.ops > 10, "{h:?}");
    assert_eq!(h.runs, 8 * (h.ops + 1));
    assert!(!h.findings.is_empty(), "no finding in {} runs", h.runs);
    for f in &h.findings {
        // Each finding is an acknowledged put whose value is not what the
        // restarted store returns, and the trace shows the lost rename.
        assert_ne!(f.got.as_deref(), f.acked.map(str::as_bytes), "{f:?}");
        assert!(f.trace.iter().any(|e| e.op == "dir_op_lost"), "{f:?}");
        assert!(f.trace.iter().any(|e| e.op == "rename" && e.to_path.is_some()), "{f:?}");
    }
}

#[test]
fn the_fixed_store_passes_the_hunt() {
    let h = kv::hunt(true, 0..8).unwrap();
    assert!(h.findings.is_empty(), "{:?}", h.findings.first());
    assert_eq!(h.runs, 8 * (h.ops + 1));
}

#[test]
fn the_hunt_is_deterministic() {
    let a = kv::hunt(false, 0..3).unwrap();
    let b = kv::hunt(false, 0..3).unwrap();
    let key = |h: &kv::Hunt| -> Vec<(u64, Option<u64>, &str)> {
        h.findings.iter().map(|f| (f.seed, f.crash_at, f.key)).collect()
    };
    assert_eq!(key(&a), key(&b));
    assert_eq!(a.op_names, b.op_names);
}
