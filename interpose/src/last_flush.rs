//! The report at exit, after every object's destructors.
//!
//! `exit()` runs the atexit handlers, then the destructors of the loaded
//! objects (`_dl_fini`), then flushes stdio (`_IO_cleanup`), then ends the
//! process. The tracer's destructor runs among the objects' destructors,
//! and glibc runs a preloaded library's before those of the libraries the
//! program links: a report written there missed every call the later
//! destructors made (libgfortran frees its units there, so every gfortran
//! program's report showed ~29 blocks "live at end" that were freed).
//!
//! Nothing a library can register runs after `_dl_fini` except what stdio
//! does at its clean-up: it flushes every stream with pending output. So
//! the tracer's destructor opens a stream of its own (`fopencookie`), puts
//! one byte in it and returns; stdio's clean-up flushes it after every
//! destructor, and its write function writes the report. Should the
//! stream be flushed earlier (a later destructor calls `fflush(NULL)` or
//! `fcloseall`), the report is written then, still after the tracer's
//! destructor; should the process end before (a later destructor calls
//! `_exit`), `_exit`'s hook writes it ([`take`]).
//!
//! The tracer's stream, the newest, heads glibc's list: the flush reaches
//! it before the program's streams, stdout's included. With glibc, its
//! write function first flushes the streams glibc would flush after it
//! (`stdio_streams.rs`), so the closing line follows the program's last
//! buffered output, as in `./app > log 2>&1`. Not from `_exit`'s hook:
//! after `_exit` the program's streams are never flushed.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

/// A report waits for the stream's flush.
static PENDING: AtomicBool = AtomicBool::new(false);

/// The tracer's stream, once made.
static STREAM: AtomicPtr<libc::FILE> = AtomicPtr::new(std::ptr::null_mut());

#[repr(C)]
struct CookieIoFunctions {
    read: Option<unsafe extern "C" fn(*mut c_void, *mut c_char, usize) -> isize>,
    write: Option<unsafe extern "C" fn(*mut c_void, *const c_char, usize) -> isize>,
    seek: Option<unsafe extern "C" fn(*mut c_void, *mut i64, c_int) -> c_int>,
    close: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
}

extern "C" {
    fn fopencookie(
        cookie: *mut c_void,
        mode: *const c_char,
        funcs: CookieIoFunctions,
    ) -> *mut libc::FILE;
}

/// Leave the exit's report to stdio's clean-up. Returns false (nothing
/// armed) where the stream cannot be made: the caller writes the report
/// at once, as before.
pub fn defer() -> bool {
    let funcs = CookieIoFunctions {
        read: None,
        write: Some(flushed),
        seek: None,
        close: Some(closed),
    };
    PENDING.store(true, Ordering::Release);
    // SAFETY: fopencookie with valid functions and a NUL-terminated mode;
    // fputc on the stream it returned. The stream and its buffer are the
    // tracer's (the caller holds the guard, so their allocations pass
    // through untraced) and are never closed by the tracer.
    let armed = unsafe {
        let f = fopencookie(std::ptr::null_mut(), c"w".as_ptr(), funcs);
        STREAM.store(f, Ordering::Release);
        !f.is_null() && libc::fputc(c_int::from(b'.'), f) != libc::EOF
    };
    if !armed {
        PENDING.store(false, Ordering::Release);
    }
    armed
}

/// Take the pending report: true once, if one is pending (writing it is
/// then the caller's to do).
pub fn take() -> bool {
    PENDING.swap(false, Ordering::AcqRel)
}

fn write_pending() {
    if take() {
        crate::lifecycle::write_exit_report();
    }
}

/// The program's streams that glibc's flush pass reaches after ours, with
/// their output, flushed first: the report follows them. Returns the
/// signal one of those writes raised that ends the process (SIGPIPE,
/// SIGXFSZ), held back until the report is written.
#[cfg(target_env = "gnu")]
fn flush_program_streams() -> Option<c_int> {
    let ours = STREAM.load(Ordering::Acquire);
    if ours.is_null() || !PENDING.load(Ordering::Acquire) {
        return None;
    }
    // SAFETY: `ours` is the tracer's stream, never closed by the tracer,
    // and this is its write function ([`flushed`]), which glibc calls from
    // its flush pass.
    unsafe { crate::stdio_streams::flush_after(ours) }
}

/// Elsewhere the report is written where the flush reaches our stream.
#[cfg(not(target_env = "gnu"))]
fn flush_program_streams() -> Option<c_int> {
    None
}

unsafe extern "C" fn flushed(_: *mut c_void, _: *const c_char, size: usize) -> isize {
    // (Before taking the report: should a program's stream's write
    // function end the process with `_exit`, its hook writes the exit's.)
    let ended_by = flush_program_streams();
    write_pending();
    if let Some(sig) = ended_by {
        // The process ends as it would have without the tracer, by the
        // signal its write raised, now that the report is written.
        // SAFETY: raise on this thread, where the signal is not blocked
        // and has its default action.
        unsafe { libc::raise(sig) };
    }
    size as isize
}

/// Called by an `fclose` of our stream only (glibc closes no stream at
/// exit; `fcloseall` flushes them, through [`flushed`]): its flush came
/// first, through [`flushed`], and the stream has left the list, so
/// there is nothing to walk here.
unsafe extern "C" fn closed(_: *mut c_void) -> c_int {
    write_pending();
    0
}
