//! glibc's allocator, reached without going through our own exports: what
//! the tracer's own Rust allocations use (`LibcAllocator`), and the last
//! resort of `next_alloc` when no next allocator can be found. The
//! program's calls go to the next allocator instead (`next_alloc`).

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

extern "C" {
    pub fn __libc_malloc(size: usize) -> *mut c_void;
    pub fn __libc_calloc(n: usize, size: usize) -> *mut c_void;
    pub fn __libc_realloc(p: *mut c_void, size: usize) -> *mut c_void;
    pub fn __libc_free(p: *mut c_void);
    pub fn __libc_memalign(align: usize, size: usize) -> *mut c_void;
    pub fn __libc_valloc(size: usize) -> *mut c_void;
    pub fn __libc_pvalloc(size: usize) -> *mut c_void;
}

/// The tracer's own Rust allocations go straight to glibc, never through the
/// exported `malloc`, so they are never traced and never re-enter the hooks.
pub struct LibcAllocator;

const MIN_ALIGN: usize = 16;

// SAFETY: forwards to glibc's allocator, which satisfies GlobalAlloc's
// contract for the alignments requested (memalign beyond 16 bytes).
unsafe impl GlobalAlloc for LibcAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if crate::reserve::handler_on() {
            return crate::reserve::handler_alloc(layout.size(), layout.align());
        }
        let p: *mut u8 = if layout.align() <= MIN_ALIGN {
            // SAFETY: plain C allocation.
            unsafe { __libc_malloc(layout.size()).cast() }
        } else {
            // SAFETY: align is a power of two (Layout invariant).
            unsafe { __libc_memalign(layout.align(), layout.size()).cast() }
        };
        if p.is_null() {
            // The program exhausted memory: do not abort it for our sake.
            return crate::reserve::emergency_alloc(layout.size(), layout.align());
        }
        crate::own_heap::grew(layout.size());
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if crate::reserve::handler_on() {
            // Arena pages are fresh and never reused: already zero.
            return crate::reserve::handler_alloc(layout.size(), layout.align());
        }
        if layout.align() <= MIN_ALIGN {
            // SAFETY: plain C allocation.
            let p: *mut u8 = unsafe { __libc_calloc(1, layout.size()).cast() };
            if p.is_null() {
                // Reserve pages are fresh and never reused: already zero.
                return crate::reserve::emergency_alloc(layout.size(), layout.align());
            }
            crate::own_heap::grew(layout.size());
            p
        } else {
            // SAFETY: as `alloc`, then zero the fresh block.
            unsafe {
                let p = self.alloc(layout);
                if !p.is_null() {
                    std::ptr::write_bytes(p, 0, layout.size());
                }
                p
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // Inside the SIGTERM handler nothing goes back to glibc (the
        // process is about to die); reserve blocks never do. Only glibc's
        // blocks are counted (`own_heap`).
        if crate::reserve::handler_on() || crate::reserve::contains(ptr as usize) {
            return;
        }
        crate::own_heap::shrank(layout.size());
        // SAFETY: `ptr` came from this allocator.
        unsafe { __libc_free(ptr.cast()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() <= MIN_ALIGN
            && !crate::reserve::handler_on()
            && !crate::reserve::contains(ptr as usize)
        {
            // SAFETY: `ptr` came from __libc_malloc/calloc/realloc.
            let p: *mut u8 = unsafe { __libc_realloc(ptr.cast(), new_size).cast() };
            if !p.is_null() || new_size == 0 {
                crate::own_heap::shrank(layout.size());
                if !p.is_null() {
                    crate::own_heap::grew(new_size);
                }
                return p;
            }
            // glibc failed (the old block is intact): take a reserve block.
            let q = crate::reserve::emergency_alloc(new_size, layout.align());
            if !q.is_null() {
                // SAFETY: both blocks hold at least min(old, new) bytes; the
                // old one came from glibc and is freed once copied.
                unsafe {
                    std::ptr::copy_nonoverlapping(ptr, q, layout.size().min(new_size));
                    __libc_free(ptr.cast());
                }
                crate::own_heap::shrank(layout.size());
            }
            q
        } else {
            // SAFETY: allocate, copy the smaller size, free the old block.
            unsafe {
                let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
                let p = self.alloc(new_layout);
                if !p.is_null() {
                    std::ptr::copy_nonoverlapping(ptr, p, layout.size().min(new_size));
                    self.dealloc(ptr, layout);
                }
                p
            }
        }
    }
}
