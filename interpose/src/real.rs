//! glibc's allocator, reached without going through our own exports.
//!
//! `__libc_*` entry points need no `dlsym` (which itself calls `calloc`).
//! `posix_memalign`, `aligned_alloc` and `reallocarray` have no `__libc_`
//! alias; they are looked up once in libc.so.6 (`glibc_symbol`) while the
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
    match std::ffi::CStr::from_bytes_with_nul(name) {
        Ok(n) => glibc_symbol(cache, n),
        Err(_) => 0,
    }
}

/// glibc's definition of `name`, looked up in libc.so.6 itself: not with
/// `RTLD_NEXT`, which would find another allocator preloaded after us
/// (`LD_PRELOAD="libwmhcct.so libjemalloc.so.2"`) and mix its blocks with
/// glibc's.
pub fn glibc_symbol(cache: &AtomicUsize, name: &std::ffi::CStr) -> usize {
    let f = cache.load(Ordering::Acquire);
    if f != 0 {
        return f;
    }
    // Hold the guard (if we can) so the loader's own calloc is not traced.
    let _g = crate::guard::Guard::acquire();
    // SAFETY: RTLD_NOLOAD returns the already loaded libc (or NULL); dlsym
    // on that handle (or RTLD_NEXT as a fallback) with a NUL-terminated name.
    let f = unsafe {
        let h = libc::dlopen(c"libc.so.6".as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD);
        let h = if h.is_null() { libc::RTLD_NEXT } else { h };
        libc::dlsym(h, name.as_ptr())
    } as usize;
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

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // Inside the SIGTERM handler nothing goes back to glibc (the
        // process is about to die); reserve blocks never do.
        if crate::reserve::handler_on() || crate::reserve::contains(ptr as usize) {
            return;
        }
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
