//! glibc's allocator, reached without going through our own exports.
//!
//! `__libc_*` entry points need no `dlsym` (which itself calls `calloc`).
//! `posix_memalign`, `aligned_alloc` and `reallocarray` have no `__libc_`
//! alias; they are looked up once with `dlsym(RTLD_NEXT, …)` while the
//! reentrancy guard is held, so the `calloc` inside `dlsym` goes straight to
//! glibc.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

extern "C" {
    pub fn __libc_malloc(size: usize) -> *mut c_void;
    pub fn __libc_calloc(n: usize, size: usize) -> *mut c_void;
    pub fn __libc_realloc(p: *mut c_void, size: usize) -> *mut c_void;
    pub fn __libc_free(p: *mut c_void);
    pub fn __libc_memalign(align: usize, size: usize) -> *mut c_void;
    pub fn __libc_valloc(size: usize) -> *mut c_void;
    pub fn __libc_pvalloc(size: usize) -> *mut c_void;
}

type PosixMemalignFn = unsafe extern "C" fn(*mut *mut c_void, usize, usize) -> c_int;
type AlignedAllocFn = unsafe extern "C" fn(usize, usize) -> *mut c_void;
type ReallocarrayFn = unsafe extern "C" fn(*mut c_void, usize, usize) -> *mut c_void;

static POSIX_MEMALIGN: AtomicUsize = AtomicUsize::new(0);
static ALIGNED_ALLOC: AtomicUsize = AtomicUsize::new(0);
static REALLOCARRAY: AtomicUsize = AtomicUsize::new(0);

fn next_symbol(cache: &AtomicUsize, name: &'static [u8]) -> usize {
    let f = cache.load(Ordering::Acquire);
    if f != 0 {
        return f;
    }
    // Hold the guard (if we can) so dlsym's own calloc is not traced.
    let _g = crate::guard::Guard::acquire();
    // SAFETY: `name` is NUL-terminated; RTLD_NEXT finds glibc's definition
    // after ours in the lookup order.
    let f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) } as usize;
    cache.store(f, Ordering::Release);
    f
}

/// glibc's `posix_memalign`.
///
/// # Safety
/// As for `posix_memalign`: `memptr` must be valid for a write.
pub unsafe fn posix_memalign(memptr: *mut *mut c_void, align: usize, size: usize) -> c_int {
    match next_symbol(&POSIX_MEMALIGN, b"posix_memalign\0") {
        0 => libc::ENOMEM,
        // SAFETY: the symbol has this C signature; caller upholds its contract.
        f => unsafe { std::mem::transmute::<usize, PosixMemalignFn>(f)(memptr, align, size) },
    }
}

/// glibc's `aligned_alloc`.
pub fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    match next_symbol(&ALIGNED_ALLOC, b"aligned_alloc\0") {
        // SAFETY: plain C allocator call.
        0 => unsafe { __libc_memalign(align, size) },
        // SAFETY: the symbol has this C signature.
        f => unsafe { std::mem::transmute::<usize, AlignedAllocFn>(f)(align, size) },
    }
}

/// glibc's `reallocarray`.
///
/// # Safety
/// As for `realloc`: `p` is NULL or a live block from this allocator.
pub unsafe fn reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void {
    match next_symbol(&REALLOCARRAY, b"reallocarray\0") {
        0 => match n.checked_mul(size) {
            // SAFETY: caller upholds realloc's contract.
            Some(total) => unsafe { __libc_realloc(p, total) },
            None => {
                crate::errno::set(libc::ENOMEM);
                std::ptr::null_mut()
            }
        },
        // SAFETY: the symbol has this C signature; caller upholds its contract.
        f => unsafe { std::mem::transmute::<usize, ReallocarrayFn>(f)(p, n, size) },
    }
}

/// The tracer's own Rust allocations go straight to glibc, never through the
/// exported `malloc`, so they are never traced and never re-enter the hooks.
pub struct LibcAllocator;

const MIN_ALIGN: usize = 16;

// SAFETY: forwards to glibc's allocator, which satisfies GlobalAlloc's
// contract for the alignments requested (memalign beyond 16 bytes).
unsafe impl GlobalAlloc for LibcAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= MIN_ALIGN {
            // SAFETY: plain C allocation.
            unsafe { __libc_malloc(layout.size()).cast() }
        } else {
            // SAFETY: align is a power of two (Layout invariant).
            unsafe { __libc_memalign(layout.align(), layout.size()).cast() }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= MIN_ALIGN {
            // SAFETY: plain C allocation.
            unsafe { __libc_calloc(1, layout.size()).cast() }
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

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator.
        unsafe { __libc_free(ptr.cast()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() <= MIN_ALIGN {
            // SAFETY: `ptr` came from __libc_malloc/calloc/realloc.
            unsafe { __libc_realloc(ptr.cast(), new_size).cast() }
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
