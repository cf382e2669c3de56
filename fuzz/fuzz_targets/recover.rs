#![no_main]

mod alloc_guard;

libfuzzer_sys::fuzz_target!(|data: &[u8]| wal_fuzz::recover(data));
