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
/// The fields are read as glibc's flush pass at exit reads them, locked
/// or not (`_IO_cleanup` flushes without the streams' locks, "underneath"
/// threads that use them): each read once, volatile, a snapshot that a
/// thread holding the stream may change the next moment.
///
/// # Safety
/// `fp` is a live stream.
unsafe fn holds_output(fp: *const FileHead) -> bool {
    use std::ptr::addr_of;
    // SAFETY: the caller's live stream: its fields are in bounds and
    // aligned; `_wide_data` of a wide stream (`_mode > 0`, glibc's own
    // test), once read non-null, is its wide area, which lives as long as
    // the stream. Volatile reads of plain words: no reference is made to
    // memory another thread may be writing.
    unsafe {
        if addr_of!((*fp).mode).read_volatile() <= 0 {
            addr_of!((*fp).write_ptr).read_volatile() > addr_of!((*fp).write_base).read_volatile()
        } else {
            let wide = addr_of!((*fp).wide_data).read_volatile();
            !wide.is_null()
                && addr_of!((*wide).write_ptr).read_volatile()
                    > addr_of!((*wide).write_base).read_volatile()
        }
    }
}

/// The files of the streams the walk leaves to glibc's pass, with output
/// in them: a later stream on one of them is left too, to keep their
/// bytes in glibc's order. Held on the stack (no allocation at exit): a
/// walk that would leave more files than it holds stops instead.
struct LeftBehind {
    files: [(u64, u64); 16],
    count: usize,
}

impl LeftBehind {
    fn new() -> Self {
        LeftBehind {
            files: [(0, 0); 16],
            count: 0,
        }
    }

    /// The (device, inode) of the file open as `fd`.
    fn identity(fd: c_int) -> Option<(u64, u64)> {
        if fd < 0 {
            return None;
        }
        let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
        // SAFETY: fstat writes a `struct stat` into the buffer on success.
        let ok = unsafe { libc::fstat(fd, st.as_mut_ptr()) } == 0;
        // SAFETY: initialised (zeroed, and filled in on success).
        let st = unsafe { st.assume_init() };
        ok.then_some((st.st_dev, st.st_ino))
    }

    /// Whether a stream on `fd` may be flushed now: nothing is left
    /// behind, or its descriptor names a file none of those writes to.
    fn apart(&self, fd: c_int) -> bool {
        self.count == 0
            || Self::identity(fd).is_some_and(|id| !self.files[..self.count].contains(&id))
    }

    /// Leave a stream on `fd` to glibc's pass. False where its file cannot
    /// be told or held: the walk ends there.
    fn leave(&mut self, fd: c_int) -> bool {
        let Some(id) = Self::identity(fd) else {
            return false;
        };
        if self.files[..self.count].contains(&id) {
            return true;
        }
        if self.count == self.files.len() {
            return false;
        }
        self.files[self.count] = id;
        self.count += 1;
        true
    }
}

/// The signals a write raises in the writing thread whose default action
/// ends the process: a pipe without reader, a file past `ulimit -f`.
const WRITE_SIGNALS: [c_int; 2] = [libc::SIGPIPE, libc::SIGXFSZ];

/// Flush, in list order, every stream after `ours` that holds output and
/// that no other thread holds (`ftrylockfile`: a stream in another
/// thread's `printf` is never waited for). A held stream with output is
/// left to glibc's pass, which flushes it after ours, and with it every
/// later stream on the same file ([`LeftBehind`]): flushing those first
/// would put their bytes before its own (two streams on fd 1: the
/// program's lines out of order). Where a file cannot be told (a stream
/// without a descriptor, `fopencookie`'s, writes anywhere) the walk stops
/// there, and glibc's pass flushes the rest, in order. A held stream
/// without output (a thread blocked in `fgets(stdin)`) is passed over.
/// Streams without output are left alone (`fflush` on an input stream
/// would move its descriptor's offset back). errno is kept. Does nothing
/// if `ours` is out of the list.
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
    // `_chain` (which changes under the list's lock alone), `_lock` (set
    // when it is made) and, by volatile reads as glibc's own pass at exit
    // makes them, the pointers that tell whether it holds output are
    // read; it is flushed only once locked: the lock is recursive and
    // taken by `ftrylockfile`, which never waits, so no other thread is in
    // it (one that holds it, or waits for the list's lock while holding
    // it, is never waited for: no deadlock). `_fileno` is read as the
    // pointers are (`fstat` of it only names a file). The walk
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
            let mut left = LeftBehind::new();
            let mut fp = (*ours).chain;
            let mut seen = 0;
            while !fp.is_null() && fp != ours && seen < MAX_STREAMS {
                let file = fp.cast::<libc::FILE>();
                let fd = std::ptr::addr_of!((*fp).fileno).read_volatile();
                if !(*fp).lock.is_null() && ftrylockfile(file) == 0 {
                    let (mut go_on, mut wrote) = (true, false);
                    if holds_output(fp) {
                        if left.apart(fd) {
                            fflush_unlocked(file);
                            wrote = true;
                        } else {
                            go_on = left.leave(fd);
                        }
                    }
                    funlockfile(file);
                    if !go_on {
                        break;
                    }
                    // (Only a write can raise them: one `sigpending` a
                    // flush, not one a stream of the list.)
                    if wrote {
                        ended_by = raised_fatal(&old_mask);
                        if ended_by.is_some() {
                            break;
                        }
                    }
                } else if holds_output(fp) && !left.leave(fd) {
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

    /// The turn of one test (one that failed does not fail the others).
    fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
        STREAMS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    extern "C" {
        fn _IO_list_lock();
        fn _IO_list_unlock();
        fn flockfile(f: *mut libc::FILE);
    }

    fn head(f: *mut libc::FILE) -> &'static FileHead {
        // SAFETY: a stream the test opened and has not closed.
        unsafe { &*f.cast::<FileHead>() }
    }

    /// The declared layout reads what glibc wrote: descriptor, put area,
    /// orientation, the chain from a new stream to the older ones.
    #[test]
    fn layout_matches_glibc() {
        let _one = one_at_a_time();
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
        let _one = one_at_a_time();
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

    /// A stream another thread holds, with output, is left to glibc's
    /// pass, and every later stream on its file with it; one on another
    /// file is flushed. A held stream without output is passed over.
    #[test]
    fn a_held_stream_keeps_its_file_in_order() {
        let _one = one_at_a_time();
        struct Stream(*mut libc::FILE);
        // SAFETY: the stream is only used by one thread at a time: the
        // holder between its flockfile and funlockfile, which the test
        // waits for.
        unsafe impl Send for Stream {}
        for held_has_output in [true, false] {
            // SAFETY: standard stdio calls on streams opened here, as in
            // the test above; the held stream is locked by the other
            // thread until it is told to let go.
            unsafe {
                let oldest = libc::fopen(c"/dev/null".as_ptr(), c"w".as_ptr());
                let elsewhere = libc::tmpfile();
                let held = libc::fopen(c"/dev/null".as_ptr(), c"w".as_ptr());
                let newer = libc::fopen(c"/dev/null".as_ptr(), c"w".as_ptr());
                let ours = libc::fopen(c"/dev/null".as_ptr(), c"w".as_ptr());
                for f in [oldest, elsewhere, newer, ours] {
                    libc::fputs(c"pending".as_ptr(), f);
                }
                if held_has_output {
                    libc::fputs(c"pending".as_ptr(), held);
                }
                let (locked_tx, locked_rx) = std::sync::mpsc::channel();
                let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
                let stream = Stream(held);
                let holder = std::thread::spawn(move || {
                    let stream = stream;
                    flockfile(stream.0);
                    locked_tx.send(()).unwrap();
                    go_rx.recv().unwrap();
                    funlockfile(stream.0);
                });
                locked_rx.recv().unwrap();
                _IO_list_lock();
                assert_eq!(flush_after(ours), None);
                _IO_list_unlock();
                go_tx.send(()).unwrap();
                holder.join().unwrap();
                assert!(!holds_output(head(newer)), "before the held one");
                assert_eq!(holds_output(head(held)), held_has_output);
                assert!(!holds_output(head(elsewhere)), "on another file");
                assert_eq!(
                    holds_output(head(oldest)),
                    held_has_output,
                    "on the held one's file: flushed only past one without output"
                );
                for f in [ours, newer, held, elsewhere, oldest] {
                    libc::fclose(f);
                }
            }
        }
    }
}
