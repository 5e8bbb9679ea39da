//! Process lifecycle: fork handlers and the report at exit.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};

use crate::guard::Guard;
use crate::tracer;

extern "C" fn before_fork() {
    if let Some(t) = tracer::running() {
        // Take every tracer lock so the child never inherits one held by a
        // thread that does not exist there. Same order as everywhere else:
        // the collector thread's front before the core, and the module
        // table is never held while waiting for the core.
        if let Some(p) = &t.packets {
            p.front.raw_lock();
        }
        t.modules.raw_lock();
        t.core.raw_lock();
    }
    // Last: whoever holds the locks above may allocate.
    crate::own_heap::lock_for_fork();
}

extern "C" fn after_fork_parent() {
    crate::own_heap::unlock_after_fork();
    if let Some(t) = tracer::running() {
        t.forked.store(true, Ordering::Release);
        t.core.raw_unlock();
        t.modules.raw_unlock();
        if let Some(p) = &t.packets {
            p.front.raw_unlock();
        }
    }
}

/// This process is a forked child that has not exec'd (a program it
/// execs starts with a fresh image, where this is false).
static FORKED_CHILD: AtomicBool = AtomicBool::new(false);

/// Whether this process is a forked child running its parent's program:
/// not the MPI rank or launch task its parent is, whose environment it
/// shares, and free to skip its parent's clean-up with `_exit`.
pub fn forked_child() -> bool {
    FORKED_CHILD.load(Ordering::Acquire)
}

extern "C" fn after_fork_child() {
    FORKED_CHILD.store(true, Ordering::Release);
    crate::own_heap::unlock_after_fork();
    crate::sealed::after_fork_child();
    OWNER.store(raw_pid(), Ordering::Release);
    if let Some(t) = tracer::running() {
        t.core.raw_unlock();
        t.modules.raw_unlock();
        if let Some(p) = &t.packets {
            p.front.raw_unlock();
            // No collector thread here: apply what the parent had handed
            // it, then record inline.
            if p.active() {
                let mut o = tracer::lock_ordered(t);
                tracer::settle(&mut o);
                p.set_active(false);
            }
        }
        // MPI calls the parent's threads folded and had not recorded yet
        // are the parent's to record.
        tracer::lock_ordered(t).repeats.forget_pending();
        // The child keeps tracing (its report starts with the parent's
        // history up to the fork) and writes under its own pid.
        t.descendant.store(true, Ordering::Release);
    }
}

/// Whether the tracer's fork handlers are registered (or being).
static FORK_HANDLERS: AtomicBool = AtomicBool::new(false);

/// glibc's `__register_atfork`, looked up once.
static REAL_REGISTER_ATFORK: AtomicUsize = AtomicUsize::new(0);

type RegisterAtfork = unsafe extern "C" fn(
    crate::exports::ForkHandler,
    crate::exports::ForkHandler,
    crate::exports::ForkHandler,
    *mut c_void,
) -> c_int;

/// Register with glibc, through the next `__register_atfork`.
///
/// # Safety
/// As for glibc's `__register_atfork`.
unsafe fn real_register_atfork(
    prepare: crate::exports::ForkHandler,
    parent: crate::exports::ForkHandler,
    child: crate::exports::ForkHandler,
    dso_handle: *mut c_void,
) -> c_int {
    let f = crate::loaded_symbol::next_symbol(&REAL_REGISTER_ATFORK, c"__register_atfork");
    if f == 0 {
        return libc::ENOMEM;
    }
    // SAFETY: `f` is glibc's __register_atfork; the caller's contract is its.
    unsafe { std::mem::transmute::<usize, RegisterAtfork>(f)(prepare, parent, child, dso_handle) }
}

/// Register the tracer's fork handlers, once: at start-up, or earlier, at
/// the first registration of anyone else's. glibc runs `prepare` handlers
/// in the reverse order of registration and the others in order, so the
/// tracer's, registered first, take its locks after every other `prepare`
/// and release them before every other `parent` or `child` handler: one
/// that allocates then finds the tracer unlocked. Registered after a
/// library's (from its constructor, before the tracer started), the
/// tracer's locks were held while that library's handler allocated, and
/// the process spun for ever in `fork`.
fn fork_handlers() {
    if FORK_HANDLERS.swap(true, Ordering::AcqRel) {
        return;
    }
    // SAFETY: plain extern "C" handlers that only touch the tracer's
    // locks; no DSO handle, as they are never to be removed.
    unsafe {
        real_register_atfork(
            Some(before_fork as unsafe extern "C" fn()),
            Some(after_fork_parent as unsafe extern "C" fn()),
            Some(after_fork_child as unsafe extern "C" fn()),
            std::ptr::null_mut(),
        );
    }
}

/// `__register_atfork` for anyone else: the tracer's handlers first.
///
/// # Safety
/// As for glibc's `__register_atfork`.
pub unsafe fn register_atfork(
    prepare: crate::exports::ForkHandler,
    parent: crate::exports::ForkHandler,
    child: crate::exports::ForkHandler,
    dso_handle: *mut c_void,
) -> c_int {
    fork_handlers();
    // SAFETY: the caller's contract.
    unsafe { real_register_atfork(prepare, parent, child, dso_handle) }
}

/// The process the tracer's state belongs to: set at start-up and in a
/// forked child. A `vfork` child (or a raw `clone`) shares that state
/// without running the fork handlers: it must leave it alone.
static OWNER: AtomicI32 = AtomicI32::new(0);

fn raw_pid() -> i32 {
    // SAFETY: getpid has no preconditions; the raw system call, so that no
    // cached value can answer for a vfork child.
    unsafe { libc::syscall(libc::SYS_getpid) as i32 }
}

/// Whether this process owns the tracer's state (not a vfork child).
fn is_owner() -> bool {
    OWNER.load(Ordering::Acquire) == raw_pid()
}

/// The `_exit` that comes after ours (another preloaded tool's, or
/// glibc's), looked up at start-up: a vfork child may call it, and must
/// not run the loader there.
static NEXT_EXIT: AtomicUsize = AtomicUsize::new(0);

extern "C" {
    fn at_quick_exit(f: extern "C" fn()) -> c_int;
}

/// Called once, right after the tracer is initialised.
pub fn after_init() {
    OWNER.store(raw_pid(), Ordering::Release);
    // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name; the result
    // is only used as `_exit`'s address, whose signature is fixed by POSIX.
    let next = unsafe { libc::dlsym(libc::RTLD_NEXT, c"_exit".as_ptr()) };
    NEXT_EXIT.store(next as usize, Ordering::Release);
    // SAFETY: registers a plain extern "C" handler, run by quick_exit().
    unsafe { at_quick_exit(at_quick_exit_handler) };
    crate::biased_lock::register_membarrier();
    fork_handlers();
    crate::reserve::map_emergency();
    crate::signals::install();
    if let Some(t) = tracer::running() {
        if let Some(p) = t.packets.as_ref() {
            // Only a placement the user asked for is worth a message when
            // the thread cannot start; `auto` just stays inline.
            let asked = t.config.collector == crate::config::CollectorPlacement::Thread;
            crate::packets::start(p, asked);
        }
    }
}

/// If `malloc` in this process is not ours (the program, or a library
/// before us in LD_PRELOAD, brings its own allocator), the allocations made
/// through it were never seen: say so, once, at exit.
fn foreign_allocator_notice() {
    if malloc_is_foreign() {
        crate::diag::message(&[
            "malloc in this process is not libwmhcct.so's (the program, or a library \
             loaded before it, brings its own allocator): allocations through it are not traced",
        ]);
    }
}

/// Whether the `malloc` that calls in this process reach is defined by
/// another object than this library (the program's own allocator, or one
/// preloaded before us).
fn malloc_is_foreign() -> bool {
    // (The address of our own exported `malloc` would come from the GOT,
    // which holds the winning definition: compare the defining objects. A
    // non-PIE executable that only calls malloc makes dlsym return its PLT
    // stub: that is no definition, and dladdr names no `malloc` there.)
    fn defining_object(addr: usize, name: &std::ffi::CStr) -> usize {
        /// `RTLD_DL_SYMENT` of <dlfcn.h>: dladdr1 returns the ELF symbol.
        const RTLD_DL_SYMENT: libc::c_int = 1;
        // SAFETY: dladdr1 only reads the loader's tables; `info` and `sym`
        // are local, the symbol and strings it points to are the loader's,
        // alive while the object is loaded.
        unsafe {
            let mut info: libc::Dl_info = std::mem::zeroed();
            let mut sym: *mut libc::c_void = std::ptr::null_mut();
            if libc::dladdr1(
                addr as *const libc::c_void,
                &mut info,
                &mut sym,
                RTLD_DL_SYMENT,
            ) == 0
                || sym.is_null()
            {
                return 0;
            }
            let sym = &*(sym as *const libc::Elf64_Sym);
            let defined = sym.st_shndx != 0 // SHN_UNDEF: a PLT stub
                && !info.dli_sname.is_null()
                && info.dli_saddr as usize == addr
                && std::ffi::CStr::from_ptr(info.dli_sname) == name;
            if defined {
                info.dli_fbase as usize
            } else {
                0
            }
        }
    }
    fn object_of(addr: usize) -> usize {
        // SAFETY: as above.
        unsafe {
            let mut info: libc::Dl_info = std::mem::zeroed();
            if libc::dladdr(addr as *const libc::c_void, &mut info) == 0 {
                return 0;
            }
            info.dli_fbase as usize
        }
    }
    let found = crate::next_alloc::bound_definition(
        libc::RTLD_DEFAULT,
        c"malloc",
        crate::next_alloc::malloc_version(),
    );
    let ours = object_of(foreign_allocator_notice as fn() as usize);
    let theirs = defining_object(found, c"malloc");
    found != 0 && ours != 0 && theirs != 0 && theirs != ours
}

/// The report of a process that ends by `exit()`.
pub fn write_exit_report() {
    let Some(g) = Guard::acquire() else { return };
    if let Some(t) = tracer::running() {
        crate::report::write(&g, t, "exit");
    }
}

/// The tracer's destructor: the report, after the destructors of the
/// objects glibc runs after this one (`last_flush`), in the process the
/// tracer belongs to (a vfork child's `exit` writes it at once).
extern "C" fn at_exit() {
    foreign_allocator_notice();
    if tracer::running().is_some() && is_owner() {
        let Some(_g) = Guard::acquire() else { return };
        if crate::last_flush::defer() {
            return;
        }
    }
    write_exit_report();
}

/// `quick_exit`'s handler: no destructors, no stdio clean-up follow.
extern "C" fn at_quick_exit_handler() {
    foreign_allocator_notice();
    write_exit_report();
}

// Run in exit() after the program's atexit handlers, among the objects'
// destructors.
// (Not in the unit-test binary, which does not interpose malloc.)
#[cfg(not(test))]
#[used]
#[link_section = ".fini_array"]
static FINI: extern "C" fn() = at_exit;

/// Start the tracer when the loader initialises the library, unless an
/// allocation has started it already (other objects' constructors often
/// allocate first, which is why every hook starts it lazily too). A
/// program that never allocates, or allocates only after a long
/// computation, still gets its report, with its true duration. Not where
/// `malloc` is another object's: the tracer sees none of those calls, and
/// starting it would call that allocator (libc's own allocations during
/// start-up reach it), which the program never asked for. Nor under
/// valgrind, whose memcheck, massif, helgrind and drd replace every
/// `malloc`, ours included, at the instruction level: no hook runs there,
/// and a report of no events would be wrong; under its other tools the
/// hooks start the tracer.
extern "C" fn start_at_load() {
    if crate::valgrind::running() || malloc_is_foreign() {
        return;
    }
    if let Some(g) = Guard::acquire() {
        let _ = tracer::get(&g);
    }
}

#[cfg(not(test))]
#[used]
#[link_section = ".init_array"]
static START: extern "C" fn() = start_at_load;

/// `_exit`/`_Exit`: the process ends without exit()'s handlers, so the
/// report is taken here first, then the next `_exit` ends it. As for a
/// SIGTERM, this may run in a signal handler that interrupted the program
/// inside glibc's allocator, so the tracer's allocations come from the
/// handler arena meanwhile; if it interrupted the tracer itself (the guard
/// is held), in a vfork child or in a forked child, nothing is written.
/// While another thread writes the report, the process ends only when it
/// is written.
pub fn immediate_exit(status: c_int) -> ! {
    if is_owner() {
        if let Some(g) = Guard::acquire() {
            if forked_child() {
                // A forked child leaving with `_exit` skips its parent's
                // clean-up on purpose, and its report with it (its exit()
                // writes one). A program a traced process started (fork
                // and exec: `system()`, a shell's `_exit`) is not one: it
                // writes its report.
                drop(g);
                exit_now(status);
            }
            // A destructor after the tracer's (which left the report to
            // stdio's clean-up) ends the process: the exit's report now.
            let reason = if crate::last_flush::take() {
                "exit"
            } else {
                "_exit"
            };
            // (If another thread is writing the report, from exit() or
            // MPI_Finalize, this waits for it rather than cut it short.)
            crate::signals::report_from_anywhere(g, reason);
        }
    }
    exit_now(status)
}

/// The next `_exit`, or the system call.
fn exit_now(status: c_int) -> ! {
    let next = NEXT_EXIT.load(Ordering::Acquire);
    if next != 0 {
        // SAFETY: `next` is the address of the next `_exit` (dlsym at
        // start-up), which takes an int and does not return.
        let f: extern "C" fn(c_int) -> ! = unsafe { std::mem::transmute(next) };
        f(status);
    }
    loop {
        // SAFETY: exit_group ends the process, as glibc's _exit does; it
        // does not return (the loop only satisfies the type).
        unsafe { libc::syscall(libc::SYS_exit_group, status) };
    }
}
