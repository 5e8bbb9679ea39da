//! glibc's allocator extensions that another allocator may also define.
//!
//! The interposed allocation functions hand out blocks of the next
//! allocator (`next_alloc`), so `malloc_usable_size` must measure them with
//! that allocator's definition, and arena blocks with the arena: libwmhcct.so
//! exports it too. (Preloaded *before* us, another allocator's own `malloc`
//! and `malloc_usable_size` both win: consistent.)

use std::ffi::c_void;

/// # Safety
/// As for `malloc_usable_size`: `p` is NULL or a live block.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn malloc_usable_size(p: *mut c_void) -> usize {
    // SAFETY: the caller passes NULL or a live block, which came from the
    // next allocator (or the arena) through our exports.
    unsafe { crate::next_alloc::malloc_usable_size(p) }
}
