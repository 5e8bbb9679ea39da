//! glibc's list of stdio streams, as its clean-up at exit walks it.
//!
//! `exit()` ends with `_IO_cleanup`, whose `_IO_flush_all_lockp` walks
//! every stream from `_IO_list_all` along `_chain` and flushes each that
//! holds output. A new stream goes to the head of the list, so the
//! tracer's own (`last_flush.rs`), made in its destructor, comes first:
//! its report was written before the program's last buffered output,
//! stdout's included (`./app > log 2>&1` showed the closing line above the
//! program's last lines). [`flush_after`] flushes, from the tracer's
//! stream's callback, the streams glibc would flush after it, in glibc's
//! order, before the report is written.
//!
//! The layout is glibc's public `struct _IO_FILE`
//! (`bits/types/struct_FILE.h`), unchanged since glibc 2.1, read up to
//! `_mode`; of `struct _IO_wide_data` (internal, `libio.h`, as unchanged)
//! only its first five pointers.

use std::ffi::{c_char, c_int, c_void};

/// The head of glibc's `struct _IO_FILE`, up to `_mode`.
#[repr(C)]
struct FileHead {
    flags: c_int,
    read_ptr: *mut c_char,
    read_end: *mut c_char,
    read_base: *mut c_char,
    write_base: *mut c_char,
    write_ptr: *mut c_char,
    write_end: *mut c_char,
    buf_base: *mut c_char,
    buf_end: *mut c_char,
    save_base: *mut c_char,
    backup_base: *mut c_char,
    save_end: *mut c_char,
    markers: *mut c_void,
    chain: *mut FileHead,
    fileno: c_int,
    flags2: c_int,
    old_offset: libc::off_t,
    cur_column: u16,
    vtable_offset: i8,
    shortbuf: [c_char; 1],
    lock: *mut c_void,
    offset: i64,
    codecvt: *mut c_void,
    wide_data: *mut WideHead,
    freeres_list: *mut c_void,
    freeres_buf: *mut c_void,
    pad5: usize,
    mode: c_int,
}

/// The head of glibc's `struct _IO_wide_data`: its get and put pointers.
#[repr(C)]
struct WideHead {
    read_ptr: *mut libc::wchar_t,
    read_end: *mut libc::wchar_t,
    read_base: *mut libc::wchar_t,
    write_base: *mut libc::wchar_t,
    write_ptr: *mut libc::wchar_t,
}

/// `_IO_LINKED` (glibc's `libio.h`): the stream is in the list.
const LINKED: c_int = 0x80;

/// More streams than any process holds: a longer chain is a cycle.
const MAX_STREAMS: usize = 1 << 20;

extern "C" {
    fn ftrylockfile(f: *mut libc::FILE) -> c_int;
    fn funlockfile(f: *mut libc::FILE);
    fn fflush_unlocked(f: *mut libc::FILE) -> c_int;
}

/// Whether `fp` holds output that `_IO_flush_all_lockp` would flush: its
/// very test (a byte stream's put area, or a wide stream's). Its
/// `_IO_vtable_offset (fp) == 0` is the constant 0 but where glibc keeps
/// the FILE of glibc 2.0 (`_IO_JUMPS_OFFSET`: i386 and a few more); the
/// field is not even set elsewhere (`_IO_old_init`), so it is not read.
///
/// # Safety
/// `fp` is a live stream, locked by the caller.
unsafe fn holds_output(fp: *const FileHead) -> bool {
    // SAFETY: the caller's live, locked stream; `_wide_data` of a wide
    // stream (`_mode > 0`, glibc's own test) is its wide area.
    unsafe {
        let f = &*fp;
        if f.mode <= 0 {
            f.write_ptr > f.write_base
        } else {
            !f.wide_data.is_null() && (*f.wide_data).write_ptr > (*f.wide_data).write_base
        }
    }
}

/// The signals a write raises in the writing thread whose default action
/// ends the process: a pipe without reader, a file past `ulimit -f`.
const WRITE_SIGNALS: [c_int; 2] = [libc::SIGPIPE, libc::SIGXFSZ];

/// Flush, in list order, every stream after `ours` that holds output and
/// that no other thread holds (`ftrylockfile`: a stream another thread
/// holds, in a `printf` or an `fgets(stdin)`, is never waited for; glibc's
/// pass flushes it after ours, as before). Streams without output are
/// left alone (`fflush` on an input stream would move its descriptor's
/// offset back). errno is kept. Does nothing if `ours` is out of the list.
///
/// A flush that raises SIGPIPE or SIGXFSZ (`./app | head -1`) with its
/// default action would end the process there, before the report: the
/// signal is held back, the walk stops where glibc's would have ended the
/// process, and the signal is returned, for the caller to raise once the
/// report is written. Ignored or handled, it is let through at once.
///
/// # Safety
/// `ours` is the tracer's stream, and the caller is its write function,
/// called by glibc's `_IO_flush_all_lockp` (exit's clean-up, `fflush(NULL)`
/// or `fcloseall`), which holds the lock of the list of streams for the
/// whole walk.
pub unsafe fn flush_after(ours: *mut libc::FILE) -> Option<c_int> {
    let ours = ours.cast::<FileHead>();
    let saved = crate::errno::get();
    let mut ended_by = None;
    // SAFETY: glibc is flushing `ours`, so it is live. While it is linked,
    // the only caller of its write function is a walk of the list under
    // the list's lock (the flush pass, or `_IO_unbuffer_all`), which this
    // thread holds: `fopen` and `fclose` (`_IO_link_in`, `_IO_un_link`)
    // need it, so no stream joins or leaves the list, and none is freed,
    // while we walk. Unlinked (an `fclose` of it, which only a program
    // walking glibc's list could make) its `_chain` is stale and the
    // list's lock not held: no walk then. Of a stream not yet locked only
    // `_chain` (which changes under the list's lock alone) and `_lock`
    // (set when it is made) are read; its buffer, once it is locked: the
    // lock is recursive and taken by `ftrylockfile`, which never waits,
    // so no other thread is in it (one that holds it, or waits for the
    // list's lock while holding it, is skipped: no deadlock). The walk
    // stops at the end of the list, at `ours` met again, or after
    // MAX_STREAMS: a cycle cannot hold it. A program's own stream whose
    // write function (`fopencookie`) opened or closed streams would change
    // the list under glibc's own walk as much as under this. The signal
    // calls work on local, initialised sets.
    unsafe {
        if (*ours).flags & LINKED != 0 {
            let mut held: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut held);
            for sig in WRITE_SIGNALS {
                libc::sigaddset(&mut held, sig);
            }
            let mut old_mask: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, &held, &mut old_mask);
            let mut fp = (*ours).chain;
            let mut seen = 0;
            while !fp.is_null() && fp != ours && seen < MAX_STREAMS {
                let file = fp.cast::<libc::FILE>();
                if !(*fp).lock.is_null() && ftrylockfile(file) == 0 {
                    if holds_output(fp) {
                        fflush_unlocked(file);
                    }
                    funlockfile(file);
                }
                ended_by = raised_fatal(&old_mask);
                if ended_by.is_some() {
                    break;
                }
                fp = (*fp).chain;
                seen += 1;
            }
            libc::pthread_sigmask(libc::SIG_SETMASK, &old_mask, std::ptr::null_mut());
        }
    }
    crate::errno::set(saved);
    ended_by
}

/// After a flush with [`WRITE_SIGNALS`] blocked: the one it raised that
/// the program leaves at its default action (it would end the process),
/// taken off the pending set; one the program ignores or handles is
/// delivered now, as without the tracer. Signals the program blocks stay
/// pending for it.
///
/// # Safety
/// `old_mask` is the thread's mask before WRITE_SIGNALS were blocked.
unsafe fn raised_fatal(old_mask: &libc::sigset_t) -> Option<c_int> {
    // SAFETY: signal calls on local, initialised sets and actions;
    // sigtimedwait with a zero timeout only takes a pending signal, still
    // blocked here, and never waits.
    unsafe {
        let mut pending: libc::sigset_t = std::mem::zeroed();
        if libc::sigpending(&mut pending) != 0 {
            return None;
        }
        for sig in WRITE_SIGNALS {
            if libc::sigismember(&pending, sig) != 1 || libc::sigismember(old_mask, sig) == 1 {
                continue;
            }
            let mut action: libc::sigaction = std::mem::zeroed();
            libc::sigaction(sig, std::ptr::null(), &mut action);
            let mut one: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut one);
            libc::sigaddset(&mut one, sig);
            if action.sa_sigaction == libc::SIG_DFL {
                let zero = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                libc::sigtimedwait(&one, std::ptr::null_mut(), &zero);
                return Some(sig);
            }
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &one, std::ptr::null_mut());
            libc::pthread_sigmask(libc::SIG_BLOCK, &one, std::ptr::null_mut());
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// One test at a time: each opens streams, which the other's walk
    /// would meet.
    static STREAMS: Mutex<()> = Mutex::new(());

    extern "C" {
        fn _IO_list_lock();
        fn _IO_list_unlock();
    }

    fn head(f: *mut libc::FILE) -> &'static FileHead {
        // SAFETY: a stream the test opened and has not closed.
        unsafe { &*f.cast::<FileHead>() }
    }

    /// The declared layout reads what glibc wrote: descriptor, put area,
    /// orientation, the chain from a new stream to the older ones.
    #[test]
    fn layout_matches_glibc() {
        let _one = STREAMS.lock().unwrap();
        // SAFETY: standard stdio calls on streams opened here.
        unsafe {
            // (Under the list's lock, recursive: no other stream between.)
            _IO_list_lock();
            let a = libc::fopen(c"/dev/null".as_ptr(), c"w".as_ptr());
            let b = libc::fopen(c"/dev/null".as_ptr(), c"w".as_ptr());
            _IO_list_unlock();
            assert!(!a.is_null() && !b.is_null());
            assert_eq!(head(a).fileno, libc::fileno(a));
            assert_eq!(head(b).fileno, libc::fileno(b));
            assert!(head(a).flags & LINKED != 0);
            // The newer stream first, then the older.
            assert_eq!(head(b).chain, a.cast::<FileHead>());
            assert!(!head(a).lock.is_null());

            assert_eq!(head(a).mode, 0);
            libc::fputs(c"abc".as_ptr(), a);
            assert_eq!(head(a).mode, -1);
            assert_eq!(head(a).write_ptr.offset_from(head(a).write_base), 3);
            assert!(holds_output(head(a)));
            libc::fflush(a);
            assert!(!holds_output(head(a)));

            extern "C" {
                fn fwide(f: *mut libc::FILE, mode: c_int) -> c_int;
                fn fputwc(c: libc::wchar_t, f: *mut libc::FILE) -> u32;
            }
            assert!(fwide(b, 1) > 0);
            assert_eq!(head(b).mode, 1);
            fputwc('x' as libc::wchar_t, b);
            assert!(holds_output(head(b)));
            libc::fclose(b);
            libc::fclose(a);
        }
    }

    /// Streams after ours with output are flushed, those before it and
    /// those without output are not, and errno is kept.
    #[test]
    fn flushes_only_the_streams_after_ours() {
        let _one = STREAMS.lock().unwrap();
        // SAFETY: standard stdio calls on streams opened here, which stand
        // for glibc's list at exit (oldest last: input, older, ours,
        // newer); flush_after runs under the list's lock, as in glibc's
        // flush pass.
        unsafe {
            let input = libc::fopen(c"/proc/self/exe".as_ptr(), c"r".as_ptr());
            let older = libc::fopen(c"/dev/null".as_ptr(), c"w".as_ptr());
            let ours = libc::fopen(c"/dev/null".as_ptr(), c"w".as_ptr());
            let newer = libc::fopen(c"/dev/null".as_ptr(), c"w".as_ptr());
            assert!(libc::fgetc(input) != libc::EOF);
            let read_at = libc::lseek(libc::fileno(input), 0, libc::SEEK_CUR);
            assert!(read_at > 1, "read ahead: {read_at}");
            for f in [older, ours, newer] {
                libc::fputs(c"pending".as_ptr(), f);
            }
            crate::errno::set(libc::EINTR);
            _IO_list_lock();
            assert_eq!(flush_after(ours), None);
            _IO_list_unlock();
            assert_eq!(crate::errno::get(), libc::EINTR);
            assert!(holds_output(head(ours)), "ours is glibc's to flush");
            assert!(holds_output(head(newer)), "before ours: flushed already");
            assert!(!holds_output(head(older)));
            assert_eq!(
                libc::lseek(libc::fileno(input), 0, libc::SEEK_CUR),
                read_at,
                "an input stream is left alone"
            );
            for f in [newer, ours, older, input] {
                libc::fclose(f);
            }
        }
    }
}
