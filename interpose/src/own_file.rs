//! The tracer's own files: the profile beside the report, spill files and
//! snapshots.
//!
//! Under a file-size limit (`ulimit -f`, a batch system's `RLIMIT_FSIZE`)
//! a write past it raises SIGXFSZ in the writing thread, whose default
//! action ends the process: until 2026-11-27 a profile larger than the
//! limit killed the program at exit (status 153, its buffered output lost)
//! and left the profile cut short. The tracer's writes now hold the signal
//! back in the writing thread, so the write fails with EFBIG as any other
//! write error does, and take back the signal that write raised. The
//! program's own writes are untouched.

use std::ffi::c_int;
use std::io::Write as _;
use std::path::Path;

/// Write `bytes` as the file `path`, created or truncated; with `new`, only
/// created (an existing file is `AlreadyExists`).
pub fn write(path: &Path, bytes: &[u8], new: bool) -> std::io::Result<()> {
    let _held = XfszHeld::new();
    let mut o = std::fs::OpenOptions::new();
    o.write(true);
    if new {
        o.create_new(true);
    } else {
        o.create(true).truncate(true);
    }
    o.open(path)?.write_all(bytes)
}

/// SIGXFSZ blocked in this thread until dropped; one the thread's writes
/// raised meanwhile is then discarded.
struct XfszHeld {
    old_mask: libc::sigset_t,
    was_pending: bool,
}

impl XfszHeld {
    fn new() -> XfszHeld {
        // SAFETY: sigset operations and pthread_sigmask/sigpending on local,
        // initialised sets.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGXFSZ);
            let mut old_mask: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old_mask);
            XfszHeld {
                old_mask,
                was_pending: pending(),
            }
        }
    }
}

/// Whether SIGXFSZ is pending for this thread or the process.
fn pending() -> bool {
    // SAFETY: sigpending into a local set.
    unsafe {
        let mut p: libc::sigset_t = std::mem::zeroed();
        libc::sigpending(&mut p) == 0 && libc::sigismember(&p, libc::SIGXFSZ) == 1
    }
}

impl Drop for XfszHeld {
    fn drop(&mut self) {
        // SAFETY: as in `new`; sigtimedwait with a zero timeout only takes
        // a pending SIGXFSZ (still blocked here), never waits.
        unsafe {
            if !self.was_pending && pending() {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, libc::SIGXFSZ);
                let zero = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                let _: c_int = libc::sigtimedwait(&set, std::ptr::null_mut(), &zero);
            }
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.old_mask, std::ptr::null_mut());
        }
    }
}
