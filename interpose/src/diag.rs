//! Messages on stderr: allocation-free, so they are safe on every path,
//! including the abort path and inside allocator hooks.
//!
//! They go to the process's stderr as it was when the tracer started, and
//! only while fd 2 is still that file: a program that closes fd 2 and
//! opens a data file (which then gets fd 2), or points fd 2 at a file of
//! its own with `dup2`/`freopen`, must not find the tracer's lines in it.
//! Such a program gets no tracer messages; its report is written as usual.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// fd 2 not looked at yet (messages go to fd 2).
const UNKNOWN: u8 = 0;
/// fd 2 was open at start-up: `DEV`/`INO` name its file.
const KNOWN: u8 = 1;
/// fd 2 was closed at start-up: no messages.
const CLOSED: u8 = 2;

static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);
static DEV: AtomicU64 = AtomicU64::new(0);
static INO: AtomicU64 = AtomicU64::new(0);

/// The (device, inode) of the file open as `fd`, if it is open.
fn identity(fd: i32) -> Option<(u64, u64)> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: fstat writes a `struct stat` into the buffer on success.
    let ok = unsafe { libc::fstat(fd, st.as_mut_ptr()) } == 0;
    // SAFETY: initialised (zeroed, and filled in on success).
    let st = unsafe { st.assume_init() };
    ok.then_some((st.st_dev, st.st_ino))
}

/// Runs when the loader initialises the library, before the program's
/// `main`: a program may swap fd 2 before its first allocation, which is
/// when the tracer itself starts.
#[used]
#[link_section = ".init_array"]
static NOTE_STDERR_AT_LOAD: extern "C" fn() = note_stderr_at_load;

extern "C" fn note_stderr_at_load() {
    note_stderr();
}

/// Remember which file stderr is: when the library is loaded, or at tracer
/// start-up if that came first (another library's constructor allocated).
pub fn note_stderr() {
    if STATE.load(Ordering::Acquire) != UNKNOWN {
        return;
    }
    match identity(2) {
        Some((dev, ino)) => {
            DEV.store(dev, Ordering::Relaxed);
            INO.store(ino, Ordering::Relaxed);
            STATE.store(KNOWN, Ordering::Release);
        }
        None => STATE.store(CLOSED, Ordering::Release),
    }
}

/// Whether fd 2 is still the stderr the process started with.
fn stderr_is_original() -> bool {
    match STATE.load(Ordering::Acquire) {
        UNKNOWN => true,
        KNOWN => identity(2) == Some((DEV.load(Ordering::Relaxed), INO.load(Ordering::Relaxed))),
        _ => false,
    }
}

/// Write `wmhcct: ` followed by the parts and a newline to stderr, in one
/// write when it fits a stack buffer.
pub fn message(parts: &[&str]) {
    if !stderr_is_original() {
        return;
    }
    let mut buf = [0u8; 1024];
    let mut n = 0;
    for part in [&"wmhcct: "].into_iter().chain(parts.iter()).chain([&"\n"]) {
        let b = part.as_bytes();
        let take = b.len().min(buf.len() - n);
        buf[n..n + take].copy_from_slice(&b[..take]);
        n += take;
    }
    if n == buf.len() {
        buf[n - 1] = b'\n';
    }
    // SAFETY: writing an initialised buffer to fd 2.
    unsafe {
        libc::write(2, buf.as_ptr().cast(), n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_tells_files_apart() {
        // SAFETY: plain descriptor calls on descriptors this test owns.
        unsafe {
            let a = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
            let mut fds = [0i32; 2];
            assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
            assert!(a >= 0);
            assert!(identity(a).is_some());
            assert_ne!(identity(a), identity(fds[1]));
            assert_eq!(identity(fds[0]), identity(fds[1]), "one pipe");
            for fd in [a, fds[0], fds[1]] {
                libc::close(fd);
            }
            assert_eq!(identity(a), None, "closed");
        }
    }
}
