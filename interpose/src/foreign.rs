//! glibc's allocator extensions that another allocator may also define.
//!
//! The interposed allocation functions hand out glibc blocks. With another
//! allocator preloaded *after* libwmhcct.so (`LD_PRELOAD="libwmhcct.so
//! libjemalloc.so.2"`), its `malloc_usable_size` would otherwise be the one
//! the program calls, on a glibc block, and crash. So libwmhcct.so exports
//! it too, forwarding to glibc's. (Preloaded *before* us, the other
//! allocator's own `malloc` and `malloc_usable_size` both win: consistent.)

use std::ffi::c_void;
use std::sync::atomic::AtomicUsize;

type UsableSizeFn = unsafe extern "C" fn(*mut c_void) -> usize;

/// # Safety
/// As for glibc's `malloc_usable_size`: `p` is NULL or a live block.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn malloc_usable_size(p: *mut c_void) -> usize {
    static REAL: AtomicUsize = AtomicUsize::new(0);
    match crate::real::glibc_symbol(&REAL, c"malloc_usable_size") {
        0 => 0,
        // SAFETY: glibc's malloc_usable_size; the caller passes NULL or a
        // live block, which came from glibc through our exports.
        f => unsafe { std::mem::transmute::<usize, UsableSizeFn>(f)(p) },
    }
}
