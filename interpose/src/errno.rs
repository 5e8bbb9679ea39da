//! errno, saved around the tracer's work so the program sees the value its
//! allocator left.

/// Current errno.
pub fn get() -> i32 {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() }
}

/// Set errno.
pub fn set(v: i32) {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() = v }
}
