//! SIGTERM, SIGINT and SIGHUP: the profile of a process (or MPI rank) that
//! is terminated (a job scheduler, `mpirun`, Ctrl-C at the terminal, the
//! terminal closing); and the profile of a process that crashes (SIGSEGV,
//! SIGBUS, SIGFPE, SIGILL, SIGABRT: see [`install`] and `on_crash` at the
//! end).
//!
//! A process killed by a signal never runs `.fini_array`, so without this
//! the profile of a rank that the job scheduler or `mpirun` terminates with
//! SIGTERM would be lost. At tracer start-up, and only where the program's
//! disposition of the signal is still the default, a handler is installed.
//! On the signal it takes the profile with the normal report functions (an
//! MPI rank leaves `rank-<r>.wmprof` in the job's spill directory; any
//! other process writes its report), then restores the default action and
//! re-sends the signal, so the process still dies "killed by SIGTERM" (or
//! SIGINT, SIGHUP). Below, "SIGTERM" stands for any of the three.
//!
//! A program that installs its own handler later simply replaces ours: we
//! never interfere with it. A signal ignored or handled by the program when
//! the tracer starts (`nohup`'s SIGHUP, a background job's SIGINT) is left
//! alone.
//!
//! Safety of the work done in the handler:
//! - If the signal interrupted the tracer itself on this thread (the
//!   reentrancy guard is held: the collector may be mid-update, a lock may
//!   be held), nothing is done in the handler: the request is left pending
//!   and carried out by the next thread that leaves the tracer
//!   ([`after_guard`], called when a guard is dropped), in normal context,
//!   within microseconds.
//! - If the report was already taken (exit, `MPI_Finalize`, `MPI_Abort`)
//!   and another thread is still writing it, the handler waits for that
//!   writer (up to 20 s) before it terminates the process; if the writer is
//!   the interrupted thread itself, the writer terminates the process when
//!   it leaves the tracer. The report is never cut short by SIGTERM.
//! - Should writing the report hang (a converter that never returns, a
//!   lock the interrupted code holds), a timer sends the signal again
//!   after 60 s and the process ends by it, without the report ([`watch`]).
//! - Otherwise the handler writes the profile itself. The thread may have
//!   been interrupted inside glibc's allocator (the window of an interposed
//!   call before or after the tracer's part) or inside the tracer's own heap,
//!   so while the handler works the tracer's own Rust allocations come from
//!   a bump arena instead ([`arena_on`], checked by `own_heap::OwnHeap`),
//!   which takes no lock; the converter
//!   is started with `posix_spawn` (Rust's `Command`), which takes no
//!   allocator or stdio lock.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicU8, Ordering};

use crate::guard::Guard;

/// A SIGTERM is being handled (the first one wins; later ones return).
static HANDLING: AtomicBool = AtomicBool::new(false);
/// The termination signal being handled (the first one).
static TERMINATING: AtomicI32 = AtomicI32::new(libc::SIGTERM);
/// Checked at every guard release: `PENDING` and/or `WRITING`.
static FLAGS: AtomicU8 = AtomicU8::new(0);
/// A SIGTERM arrived while a thread was inside the tracer, or while the
/// report was being written: carried out at a later guard release.
const PENDING: u8 = 1;
/// A thread is writing the report (`WRITER`).
const WRITING: u8 = 2;
/// The thread (tid) writing the report, 0 if none.
static WRITER: AtomicI32 = AtomicI32::new(0);
/// How long a SIGTERM handler waits for another thread's report writing.
const WAIT_FOR_WRITER_MS: u32 = 20_000;

fn tid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

extern "C" {
    /// glibc's sigaction under its other public name: the tracer's own
    /// calls must not go through its exported `sigaction`.
    fn __sigaction(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int;
}

/// sigaction, past the tracer's export.
///
/// # Safety
/// As for sigaction.
pub unsafe fn real_sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    // SAFETY: the caller's pointers, as sigaction requires.
    unsafe { __sigaction(sig, act, old) }
}

/// The program's `sigaction`: the tracer's handlers look like the default
/// disposition they took the place of. Runtimes install their own crash
/// handler only over a default disposition (Rust's stack-overflow handler,
/// Open MPI's backtrace): they still do, and replace ours, as without the
/// tracer.
///
/// # Safety
/// As for sigaction.
pub unsafe fn program_sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    // SAFETY: the caller's pointers, as sigaction requires; `old`, when
    // not null, is the caller's writable struct.
    unsafe {
        let rc = real_sigaction(sig, act, old);
        if rc == 0 && !old.is_null() && is_ours((*old).sa_sigaction) {
            *old = std::mem::zeroed();
            (*old).sa_sigaction = libc::SIG_DFL;
        }
        rc
    }
}

/// glibc's functions that install a handler and return the previous one,
/// each exported by the tracer too (`exports.rs`): the previous handler is
/// the default where it was the tracer's, as [`program_sigaction`] makes it.
#[derive(Clone, Copy)]
pub enum Installer {
    /// `signal` and its other name `bsd_signal`.
    Bsd,
    /// `sysv_signal` (the handler is reset when it runs).
    Sysv,
    /// `sigset` (System V, with `SIG_HOLD`).
    Sigset,
}

type InstallFn = unsafe extern "C" fn(c_int, libc::sighandler_t) -> libc::sighandler_t;

static NEXT_INSTALLERS: [std::sync::atomic::AtomicUsize; 3] =
    [const { std::sync::atomic::AtomicUsize::new(0) }; 3];

/// The program's `signal`, `bsd_signal`, `sysv_signal` or `sigset`: glibc's
/// (the next definition), with the previous handler the default where it
/// was the tracer's. Until 2026-11-27 only `signal` was interposed, and a
/// program that chains to the handler `sysv_signal`, `bsd_signal` or
/// `sigset` returned called the tracer's.
pub fn program_signal(
    which: Installer,
    sig: c_int,
    handler: libc::sighandler_t,
) -> libc::sighandler_t {
    let (slot, name) = match which {
        Installer::Bsd => (0, c"bsd_signal"),
        Installer::Sysv => (1, c"sysv_signal"),
        Installer::Sigset => (2, c"sigset"),
    };
    let f = crate::loaded_symbol::next_symbol(&NEXT_INSTALLERS[slot], name);
    if f == 0 {
        return libc::SIG_ERR;
    }
    // SAFETY: `f` is glibc's function of this signature; the handler value
    // is the caller's, as the function's contract requires.
    let old = unsafe { std::mem::transmute::<usize, InstallFn>(f)(sig, handler) };
    if is_ours(old) {
        libc::SIG_DFL
    } else {
        old
    }
}

fn is_ours(handler: usize) -> bool {
    handler == on_crash as extern "C" fn(c_int) as usize
        || handler == on_terminate as extern "C" fn(c_int) as usize
}

/// The signals that end a job or a terminal session: the report is
/// written, then the process dies of the signal as it would have.
const TERMINATION_SIGNALS: [c_int; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

/// The report's `reason` for a termination signal.
fn termination_name(sig: c_int) -> &'static str {
    match sig {
        libc::SIGINT => "sigint",
        libc::SIGHUP => "sighup",
        _ => "sigterm",
    }
}

/// The signals of a crash: the report is written, then the process dies
/// of the signal as it would have (core dump included).
const CRASH_SIGNALS: [c_int; 5] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGABRT,
];

/// Install the termination and crash handlers, each only where the program's
/// disposition is still the default (a program or runtime that handles the
/// signal replaces ours or keeps its own; to one that installs its handler
/// only over the default, as Open MPI does in `MPI_Init`, ours look like
/// the default: [`program_sigaction`]). Called once, right after the
/// tracer is initialised.
pub fn install() {
    for sig in TERMINATION_SIGNALS {
        set_if_default(sig, on_terminate);
    }
    for sig in CRASH_SIGNALS {
        set_if_default(sig, on_crash);
    }
}

fn set_if_default(sig: c_int, handler: extern "C" fn(c_int)) {
    // SAFETY: sigaction with a zeroed, then filled, struct; the handler is
    // an extern "C" fn(c_int) as the plain (non-SA_SIGINFO) form requires.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if real_sigaction(sig, std::ptr::null(), &mut old) != 0 {
            return;
        }
        if old.sa_sigaction != libc::SIG_DFL {
            // Ignored, or handled by the program (or an earlier tool).
            return;
        }
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        real_sigaction(sig, &sa, std::ptr::null_mut());
    }
}

/// Restore the default action of `sig`.
fn default_action(sig: c_int) {
    // SAFETY: sigaction with a local, initialised struct.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut sa.sa_mask);
        real_sigaction(sig, &sa, std::ptr::null_mut());
    }
}

/// The calling thread takes the report (`report::take`, core lock held):
/// until it leaves the tracer, a SIGTERM waits for it.
pub fn writer_begins() {
    WRITER.store(tid(), Ordering::Release);
    FLAGS.fetch_or(WRITING, Ordering::AcqRel);
}

extern "C" fn on_terminate(sig: c_int) {
    let errno = crate::errno::get();
    if HANDLING.swap(true, Ordering::AcqRel) {
        // Another thread is already writing the profile, or it is pending;
        // the process ends with that one's signal. Unless that has taken
        // longer than the watchdog allows (this is its timer's signal, or
        // one sent since): the process ends now, by this signal.
        if overdue() {
            give_up(sig);
        }
        crate::errno::set(errno);
        return;
    }
    TERMINATING.store(sig, Ordering::Release);
    let Some(g) = Guard::acquire() else {
        // Interrupted inside the tracer (perhaps while writing the report):
        // finish there, at the guard's release (module documentation).
        FLAGS.fetch_or(PENDING, Ordering::AcqRel);
        crate::errno::set(errno);
        return;
    };
    // (If the report was taken, its writer is another thread, as this one
    // is not inside the tracer.)
    watch(sig);
    report_from_anywhere(g, termination_name(sig));
    terminate();
    crate::errno::set(errno);
}

/// How long a termination signal's report may take before the process
/// ends without it: as for a crash.
const TERMINATION_WATCHDOG_SECS: i64 = CRASH_WATCHDOG_SECS;
/// When the report for a termination signal began (`CLOCK_MONOTONIC`
/// nanoseconds; 0: not begun).
static WATCHED_SINCE: AtomicU64 = AtomicU64::new(0);

/// The report for termination signal `sig` begins: should it hang (a
/// converter that never returns, a lock the interrupted code holds), the
/// signal comes again after `TERMINATION_WATCHDOG_SECS` from a timer and
/// ends the process ([`overdue`]). `sig` is unblocked on this thread so
/// that it can come while this handler runs; until then a repeated signal
/// returns at once, as before, and the report is finished.
fn watch(sig: c_int) {
    WATCHED_SINCE.store(crate::clock::system_ns().max(1), Ordering::Release);
    unblock(sig);
    arm_watchdog(sig, TERMINATION_WATCHDOG_SECS);
}

/// Whether the report for a termination signal has taken as long as the
/// watchdog allows (less a margin for the timer's rounding).
fn overdue() -> bool {
    let since = WATCHED_SINCE.load(Ordering::Acquire);
    let limit = TERMINATION_WATCHDOG_SECS as u64 * 1_000_000_000 - 100_000_000;
    since != 0 && crate::clock::system_ns().saturating_sub(since) >= limit
}

/// End the process by `sig` now, its default action restored.
fn give_up(sig: c_int) {
    default_action(sig);
    unblock(sig);
    // SAFETY: raise has no preconditions; the default action is in place.
    unsafe { libc::raise(sig) };
}

/// Take the report from whatever context this thread is in (a signal
/// handler that may have interrupted glibc's allocator, `_exit`): the
/// tracer's allocations come from the handler arena meanwhile (glibc's when
/// the arena cannot be mapped). If the report was already taken, wait for
/// the thread writing it instead, so the process does not end under it.
pub fn report_from_anywhere(g: Guard, reason: &str) {
    match crate::tracer::running() {
        Some(t) => {
            crate::reserve::handler_arena(true);
            crate::report::write(&g, t, reason);
            crate::reserve::handler_arena(false);
        }
        None => {
            drop(g);
            wait_for_writer();
        }
    }
}

/// Sleep until no other thread is writing the report (bounded).
pub fn wait_for_writer() {
    let me = tid();
    for _ in 0..WAIT_FOR_WRITER_MS {
        let w = WRITER.load(Ordering::Acquire);
        if FLAGS.load(Ordering::Acquire) & WRITING == 0 || w == me || w == 0 {
            return;
        }
        let ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 1_000_000,
        };
        // SAFETY: nanosleep with a local timespec (async-signal-safe).
        unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
    }
}

/// Called whenever a thread leaves the tracer (a guard is dropped): ends
/// the report writer's turn, and carries out a SIGTERM that arrived while
/// a thread was inside or the report was being written.
#[inline(always)]
pub fn after_guard() {
    if FLAGS.load(Ordering::Relaxed) != 0 {
        flags_set();
    }
}

#[cold]
#[inline(never)]
fn flags_set() {
    let f = FLAGS.load(Ordering::Acquire);
    if f & WRITING != 0 {
        if WRITER.load(Ordering::Acquire) != tid() {
            // Another thread is writing the report: it will terminate.
            return;
        }
        // The writer has left the tracer: the report is written.
        WRITER.store(0, Ordering::Release);
        FLAGS.fetch_and(!WRITING, Ordering::AcqRel);
    }
    if FLAGS.fetch_and(!PENDING, Ordering::AcqRel) & PENDING == 0 {
        return;
    }
    if let Some(g) = Guard::acquire() {
        watch(TERMINATING.load(Ordering::Acquire));
        write(&g);
    }
    terminate();
}

fn write(g: &Guard) {
    if let Some(t) = crate::tracer::running() {
        let sig = TERMINATING.load(Ordering::Acquire);
        crate::report::write(g, t, termination_name(sig));
    }
}

/// Restore the default action and re-send the termination signal to the
/// process, so it dies with the status the program would have had without
/// the tracer.
fn terminate() {
    let sig = TERMINATING.load(Ordering::Acquire);
    default_action(sig);
    // SAFETY: kill has no preconditions.
    unsafe { libc::kill(libc::getpid(), sig) };
    // Inside the handler the signal is blocked on this thread: unblock it
    // so the default action happens now (another thread may already have
    // taken it).
    unblock(sig);
}

/// A crash signal (`CRASH_SIGNALS`) on this thread: a fault (bad address,
/// division by zero, illegal instruction), `abort()`, or one sent with
/// `kill`. The default action comes back first, so that a fault in here
/// ends the process as the signal would have. Then, unless the crash is
/// the tracer's own (its guard is held on this thread: nothing of its
/// state can be trusted) or the report is already being written, the
/// report is written as for SIGTERM (an MPI rank spills its profile), with
/// the signal's name as the reason. The signal is then raised again and
/// the process dies of it at once (its default action is back and it is
/// unblocked).
extern "C" fn on_crash(sig: c_int) {
    default_action(sig);
    // The process's memory may be corrupt (a heap overrun is a common
    // cause of the crash), and the tracer's tables live in the same heap:
    // should writing the report hang, the signal comes again after
    // `CRASH_WATCHDOG_SECS` and, unblocked, ends the process as it would
    // have ended.
    unblock(sig);
    arm_watchdog(sig, CRASH_WATCHDOG_SECS);
    if !HANDLING.swap(true, Ordering::AcqRel) {
        if let Some(g) = Guard::acquire() {
            report_from_anywhere(g, crash_name(sig));
        }
    } else {
        wait_for_writer();
    }
    // SAFETY: raise has no preconditions; the default action is in place.
    unsafe { libc::raise(sig) };
}

/// How long a crash handler may take to write the report.
const CRASH_WATCHDOG_SECS: i64 = 60;

/// Unblock `sig` on this thread (blocked while its handler runs).
fn unblock(sig: c_int) {
    // SAFETY: signal-mask calls on a local, initialised set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

/// A one-shot POSIX timer that sends `sig` to the process after `secs`
/// (raw system calls: glibc's timer_create may allocate).
fn arm_watchdog(sig: c_int, secs: i64) {
    // SAFETY: timer_create and timer_settime with local, initialised
    // structs; the kernel's timer id is an int.
    unsafe {
        let mut sev: libc::sigevent = std::mem::zeroed();
        sev.sigev_notify = libc::SIGEV_SIGNAL;
        sev.sigev_signo = sig;
        let mut id: c_int = 0;
        if libc::syscall(
            libc::SYS_timer_create,
            libc::CLOCK_MONOTONIC,
            &mut sev as *mut libc::sigevent,
            &mut id as *mut c_int,
        ) != 0
        {
            return;
        }
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: secs,
                tv_nsec: 0,
            },
        };
        libc::syscall(
            libc::SYS_timer_settime,
            id as libc::c_long,
            0,
            &spec as *const libc::itimerspec,
            std::ptr::null_mut::<libc::itimerspec>(),
        );
    }
}

fn crash_name(sig: c_int) -> &'static str {
    match sig {
        libc::SIGSEGV => "sigsegv",
        libc::SIGBUS => "sigbus",
        libc::SIGFPE => "sigfpe",
        libc::SIGILL => "sigill",
        _ => "sigabrt",
    }
}
