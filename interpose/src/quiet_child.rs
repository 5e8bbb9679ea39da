//! The tracer's own child process (the report converter), out of the
//! program's sight.
//!
//! A child started the usual way (fork or posix_spawn) sends the program a
//! SIGCHLD when it ends and is reaped by any `wait(-1)`: a shell's SIGCHLD
//! handler took the converter's exit status before the tracer could (bash
//! under `time`: "could not run wmhcct (No child processes)" for a report
//! that was in fact written), and a program would meet a child it never
//! started. So the converter is the child of an intermediate process, not
//! of the program: the intermediate is created with `clone(CLONE_VM)` and
//! no exit signal (it never calls
//! execve, which would reset that to SIGCHLD), so the kernel tells the
//! program nothing when it ends and only a wait with `__WCLONE` (the
//! tracer's) sees it. The intermediate starts the converter the way
//! posix_spawn does, waits for it and leaves its status in memory shared
//! with the tracer. The converter's stderr goes to a memfd, read after.

use std::ffi::{c_int, c_void, CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// How the child ended.
pub struct Finished {
    /// The wait status (`WIFEXITED`, `WEXITSTATUS`).
    pub status: c_int,
    /// What it wrote to its standard error.
    pub stderr: Vec<u8>,
    /// Its process id.
    pub pid: libc::pid_t,
    /// It ran past the time limit and was killed (SIGKILL).
    pub stopped: bool,
}

/// What the intermediate and the converter need after the clone, prepared
/// before it (no allocation may happen in either, which share the parent's
/// memory).
struct Plan {
    path: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    devnull: c_int,
    err_fd: c_int,
    /// The parent's signal mask, restored in the converter before execve.
    mask: libc::sigset_t,
    /// The converter's stack (top, 16-byte aligned).
    stack_top: usize,
    /// errno of a failed clone or execve, 0 otherwise.
    exec_errno: c_int,
    /// The converter's wait status (written by the intermediate).
    status: c_int,
    /// How long the converter may run, in milliseconds (0: no limit).
    limit_ms: c_int,
    /// The converter's pid, and whether the intermediate killed it at the
    /// limit (written by the intermediate).
    child: libc::pid_t,
    stopped: c_int,
}

fn c_string(s: &OsStr) -> std::io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
}

/// The pointers of `strings`, then a null pointer (execve's argv, envp).
fn null_terminated(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|c| c.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// Run `bin args…` with stdin and stdout on /dev/null, without the
/// environment variable `drop_var`, and wait for it, for at most `limit`
/// (then it is killed: [`Finished::stopped`]).
/// Under valgrind, which supports no `clone(CLONE_VM)` without
/// `CLONE_VFORK` and exits the whole program (status 1) on one, it is not
/// started: an error says why.
pub fn run(
    bin: &Path,
    args: &[&OsStr],
    drop_var: &str,
    limit: Option<std::time::Duration>,
) -> std::io::Result<Finished> {
    if crate::valgrind::running() {
        return Err(std::io::Error::other(
            "not started under valgrind, which cannot create the process it runs in",
        ));
    }
    // The child runs on this thread's TLS until execve: its errno is ours.
    let errno = crate::errno::get();
    let limit_ms = limit.map_or(0, |d| d.as_millis().clamp(1, c_int::MAX as u128) as c_int);
    let r = run_here(bin, args, drop_var, limit_ms);
    crate::errno::set(errno);
    r
}

fn run_here(
    bin: &Path,
    args: &[&OsStr],
    drop_var: &str,
    limit_ms: c_int,
) -> std::io::Result<Finished> {
    let path = c_string(bin.as_os_str())?;
    let mut argv_c = vec![path.clone()];
    for a in args {
        argv_c.push(c_string(a)?);
    }
    let mut envp_c = Vec::new();
    for (k, v) in std::env::vars_os() {
        if k.as_bytes() == drop_var.as_bytes() {
            continue;
        }
        let mut kv = k.as_bytes().to_vec();
        kv.push(b'=');
        kv.extend_from_slice(v.as_bytes());
        if let Ok(c) = CString::new(kv) {
            envp_c.push(c);
        }
    }
    let argv = null_terminated(&argv_c);
    let envp = null_terminated(&envp_c);
    let fds = Fds::open()?;
    let mut stacks = vec![0u8; 2 * CHILD_STACK];
    let base = stacks.as_mut_ptr() as usize;
    // SAFETY: an all-zero sigset_t is a valid (empty) set; filled below.
    let mask: libc::sigset_t = unsafe { std::mem::zeroed() };
    let mut plan = Box::new(Plan {
        path: path.as_ptr(),
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        devnull: fds.devnull,
        err_fd: fds.err,
        mask,
        stack_top: (base + 2 * CHILD_STACK) & !15,
        exec_errno: 0,
        status: 0,
        limit_ms,
        child: 0,
        stopped: 0,
    });
    // SAFETY: every signal is blocked around the clone (so that no handler
    // of the program runs in the intermediate, which shares our memory;
    // it keeps them blocked) and the mask restored right after; `plan`
    // and `stacks` outlive their use (the intermediate is reaped below
    // before either is dropped); the stack pointers are 16-byte aligned
    // tops of the two halves of `stacks`.
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut plan.mask);
        let top = (base + CHILD_STACK) & !15;
        let pid = libc::clone(
            intermediate,
            top as *mut c_void,
            libc::CLONE_VM,
            &mut *plan as *mut Plan as *mut c_void,
        );
        let err = std::io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &plan.mask, std::ptr::null_mut());
        if pid < 0 {
            return Err(err);
        }
        pid
    };
    // Wait with the thread's signals as they were: a signal the program
    // would die of still ends it meanwhile (the crash handler's watchdog).
    loop {
        let mut st: c_int = 0;
        // SAFETY: waits for our own clone child (__WCLONE: it has no exit
        // signal), writing a local.
        let r = unsafe { libc::waitpid(pid, &mut st, libc::__WCLONE) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => {}
            // Reaped by another waiter (a `waitpid(-1, __WALL)` of the
            // program's): it has ended, its work is done.
            Some(libc::ECHILD) => break,
            _ => {
                // Not known to have ended: the intermediate may still use
                // the plan and the stacks, which are then never freed.
                std::mem::forget(stacks);
                Box::leak(plan);
                return Err(e);
            }
        }
    }
    drop(stacks);
    if plan.exec_errno != 0 {
        return Err(std::io::Error::from_raw_os_error(plan.exec_errno));
    }
    Ok(Finished {
        status: plan.status,
        stderr: fds.read_stderr(),
        pid: plan.child,
        stopped: plan.stopped != 0,
    })
}

/// Each of the two stacks: the intermediate's and the converter's (until
/// its execve); they only make system calls.
const CHILD_STACK: usize = 64 << 10;

/// The descriptors: /dev/null and a memfd for the converter's stderr.
struct Fds {
    devnull: c_int,
    err: c_int,
}

impl Fds {
    fn open() -> std::io::Result<Fds> {
        // SAFETY: open and memfd_create with valid arguments; both are
        // close-on-exec (the converter dup2s them onto 0, 1 and 2).
        unsafe {
            let devnull = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
            if devnull < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let err = libc::memfd_create(c"wmhcct-converter-stderr".as_ptr(), libc::MFD_CLOEXEC);
            if err < 0 {
                let e = std::io::Error::last_os_error();
                libc::close(devnull);
                return Err(e);
            }
            Ok(Fds { devnull, err })
        }
    }

    /// What the converter wrote to its stderr (at most 64 KiB).
    fn read_stderr(&self) -> Vec<u8> {
        let mut out = vec![0u8; 64 << 10];
        // SAFETY: pread into a buffer of its length, from our memfd.
        let n = unsafe { libc::pread(self.err, out.as_mut_ptr().cast(), out.len(), 0) };
        out.truncate(n.max(0) as usize);
        out
    }
}

impl Drop for Fds {
    fn drop(&mut self) {
        // SAFETY: descriptors this struct owns.
        unsafe {
            libc::close(self.devnull);
            libc::close(self.err);
        }
    }
}

/// The intermediate, in the parent's memory (the parent only waits for it
/// meanwhile), with every signal blocked: default signal handlers,
/// start the converter, wait for it, leave its status in the plan. Only
/// system calls; it ends with the exit system call (never execve, which
/// would give it an exit signal).
extern "C" fn intermediate(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the parent's `Plan`, alive until the parent has
    // reaped this process; only async-signal-safe calls on prepared data.
    unsafe {
        let plan = &mut *(arg as *mut Plan);
        // Out of the program's process group, first: a signal sent to the
        // group (`timeout` on expiry signals its whole group right after
        // the program; a second Ctrl-C at the terminal) is the program's,
        // and used to kill the converter the program's SIGTERM report had
        // just started.
        libc::setpgid(0, 0);
        // The program's handlers must not run in here or in the
        // converter: default dispositions for every handled signal
        // (ignored ones stay ignored, as exec would keep them).
        for sig in 1..=libc::SIGRTMAX() {
            let mut old: libc::sigaction = std::mem::zeroed();
            if crate::signals::real_sigaction(sig, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction != libc::SIG_DFL
                && old.sa_sigaction != libc::SIG_IGN
            {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = libc::SIG_DFL;
                crate::signals::real_sigaction(sig, &sa, std::ptr::null_mut());
            }
        }
        // Standard streams for the converter; nothing else of the
        // program's kept open (a pipe the program's reader waits on must
        // not stay open for as long as the converter runs).
        if libc::dup2(plan.devnull, 0) < 0
            || libc::dup2(plan.devnull, 1) < 0
            || libc::dup2(plan.err_fd, 2) < 0
        {
            plan.exec_errno = *libc::__errno_location();
            libc::syscall(libc::SYS_exit, 0);
        }
        if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) != 0 {
            for fd in 3..4096 {
                libc::close(fd);
            }
        }
        let pid = libc::clone(
            converter,
            plan.stack_top as *mut c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            arg,
        );
        if pid < 0 {
            plan.exec_errno = *libc::__errno_location();
        } else {
            plan.child = pid;
            if plan.limit_ms > 0 && !ended_within(pid, plan.limit_ms) {
                libc::kill(pid, libc::SIGKILL);
                plan.stopped = 1;
            }
            let mut st: c_int = 0;
            while libc::waitpid(pid, &mut st, 0) < 0 && *libc::__errno_location() == libc::EINTR {}
            plan.status = st;
        }
        libc::syscall(libc::SYS_exit, 0);
    }
    0
}

/// Whether process `pid` (a child) ends within `limit_ms`: a pidfd polled
/// until then. True at once where pidfds are missing (Linux before 5.3),
/// which leaves the conversion without a limit. Only system calls (it runs
/// in the intermediate); its signals are blocked, so `poll` is not
/// interrupted.
fn ended_within(pid: libc::pid_t, limit_ms: c_int) -> bool {
    // SAFETY: pidfd_open of our own child, polled for at most `limit_ms`,
    // then closed; `pfd` is a local.
    unsafe {
        let fd = libc::syscall(libc::SYS_pidfd_open, pid, 0) as c_int;
        if fd < 0 {
            return true;
        }
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let r = libc::poll(&mut pfd, 1, limit_ms);
        libc::close(fd);
        r != 0
    }
}

/// The converter until its execve, in the parent's memory (its standard
/// streams set up by the intermediate).
extern "C" fn converter(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the parent's `Plan` (see `intermediate`); only
    // async-signal-safe calls on prepared data.
    unsafe {
        let plan = &mut *(arg as *mut Plan);
        libc::pthread_sigmask(libc::SIG_SETMASK, &plan.mask, std::ptr::null_mut());
        libc::execve(plan.path, plan.argv, plan.envp);
        plan.exec_errno = *libc::__errno_location();
        libc::syscall(libc::SYS_exit, 127);
    }
    127
}
