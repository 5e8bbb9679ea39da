//! glibc's allocator, reached without going through our own exports: the
//! last resort of `next_alloc` when no next allocator can be found. The
//! program's calls go to the next allocator instead (`next_alloc`); the
//! tracer's own allocations to its own heap (`own_heap`).

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
