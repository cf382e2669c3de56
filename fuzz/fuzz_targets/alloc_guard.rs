//! A global allocator that aborts on any single allocation larger than the
//! format's maximum record size (64 MiB): decoders must check a length before
//! they allocate for it. (libFuzzer's `-malloc_limit_mb` needs a sanitizer;
//! this works with `-s none` too.)

use std::alloc::{GlobalAlloc, Layout, System};

const LIMIT: usize = 64 << 20;

pub struct Guard;

unsafe impl GlobalAlloc for Guard {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        check(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

fn check(size: usize) {
    if size > LIMIT {
        // No allocation (and no unwinding) from inside the allocator.
        std::process::abort();
    }
}

#[global_allocator]
static GUARD: Guard = Guard;
