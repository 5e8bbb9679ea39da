//! This library's Rust allocations go to the tracer's own heap
//! (`libwmhcct.so`'s `wmhcct_heap_*`, found in the process's global scope
//! at the first allocation), apart from the program's heap, as the
//! tracer's own do. The job's merge at `MPI_Finalize` asked the program's
//! allocator for ~390 MB in a run of 2 ranks with ~50 000 contexts each,
//! where the untraced `MPI_Finalize` asks for 15 KB. Where `libwmhcct.so`
//! is not loaded (this crate's tests, a program that loads this library by
//! itself), they go to the C library's allocator. The choice is made once,
//! before the first block, so every block is given back where it came from.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ffi::{c_char, c_int, c_void};
use std::sync::OnceLock;

type AllocFn = unsafe extern "C" fn(usize, usize, c_int) -> *mut u8;
type DeallocFn = unsafe extern "C" fn(*mut u8, usize, usize);
type ReallocFn = unsafe extern "C" fn(*mut u8, usize, usize, usize) -> *mut u8;

#[derive(Clone, Copy)]
struct TracerHeap {
    alloc: AllocFn,
    dealloc: DeallocFn,
    realloc: ReallocFn,
}

extern "C" {
    fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void;
}

/// glibc's `RTLD_DEFAULT`.
const RTLD_DEFAULT: *mut c_void = std::ptr::null_mut();

static FOUND: OnceLock<Option<TracerHeap>> = OnceLock::new();

fn tracer_heap() -> Option<TracerHeap> {
    *FOUND.get_or_init(|| {
        // SAFETY: dlsym with NUL-terminated names. Its own allocations, if
        // any, go through C `malloc`, never through this allocator.
        let (a, d, r) = unsafe {
            (
                dlsym(RTLD_DEFAULT, c"wmhcct_heap_alloc".as_ptr()),
                dlsym(RTLD_DEFAULT, c"wmhcct_heap_dealloc".as_ptr()),
                dlsym(RTLD_DEFAULT, c"wmhcct_heap_realloc".as_ptr()),
            )
        };
        if a.is_null() || d.is_null() || r.is_null() {
            return None;
        }
        // SAFETY: libwmhcct.so's exports of these names have these
        // signatures (`interpose/src/exports.rs`).
        unsafe {
            Some(TracerHeap {
                alloc: std::mem::transmute::<*mut c_void, AllocFn>(a),
                dealloc: std::mem::transmute::<*mut c_void, DeallocFn>(d),
                realloc: std::mem::transmute::<*mut c_void, ReallocFn>(r),
            })
        }
    })
}

/// The global allocator of `libwmhcct_mpi.so` (not of this crate's tests).
pub struct SideHeap;

// SAFETY: every call goes to one allocator for the life of the process
// (chosen before the first block): the tracer's heap, whose functions keep
// GlobalAlloc's contract, or `System`.
unsafe impl GlobalAlloc for SideHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match tracer_heap() {
            // SAFETY: the caller's contract is GlobalAlloc's.
            Some(h) => unsafe { (h.alloc)(layout.size(), layout.align(), 0) },
            // SAFETY: as above.
            None => unsafe { System.alloc(layout) },
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match tracer_heap() {
            // SAFETY: the caller's contract is GlobalAlloc's.
            Some(h) => unsafe { (h.alloc)(layout.size(), layout.align(), 1) },
            // SAFETY: as above.
            None => unsafe { System.alloc_zeroed(layout) },
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match tracer_heap() {
            // SAFETY: `ptr` came from the same allocator with `layout`.
            Some(h) => unsafe { (h.dealloc)(ptr, layout.size(), layout.align()) },
            // SAFETY: as above.
            None => unsafe { System.dealloc(ptr, layout) },
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        match tracer_heap() {
            // SAFETY: `ptr` came from the same allocator with `layout`.
            Some(h) => unsafe { (h.realloc)(ptr, layout.size(), layout.align(), new_size) },
            // SAFETY: as above.
            None => unsafe { System.realloc(ptr, layout, new_size) },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without libwmhcct.so in the process (this test binary), every call
    /// goes to the C library's allocator, and blocks keep their bytes.
    #[test]
    fn without_the_tracer_blocks_come_from_the_c_library() {
        assert!(tracer_heap().is_none());
        let h = SideHeap;
        let l = Layout::from_size_align(100, 16).unwrap();
        // SAFETY: a non-zero size; each block is used within its size and
        // given back with its layout.
        unsafe {
            let z = h.alloc_zeroed(l);
            assert!(!z.is_null() && (0..100).all(|i| *z.add(i) == 0));
            h.dealloc(z, l);
            let p = h.alloc(l);
            assert_eq!(p as usize % 16, 0);
            p.write_bytes(7, 100);
            let q = h.realloc(p, l, 1 << 20);
            assert!((0..100).all(|i| *q.add(i) == 7));
            h.dealloc(q, Layout::from_size_align(1 << 20, 16).unwrap());
        }
    }
}
