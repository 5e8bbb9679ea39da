//! Every `extern "C"` symbol libwmhcct.so exports. Each is a few lines: call
//! the next allocator (`next_alloc`), then hand the event to the core API in
//! `tracer`, keeping errno as the allocator left it.

use std::ffi::{c_int, c_void};

use wmhcct_format::AllocKind;
use wmhcct_unwinder::Regs;

use crate::deferred::{self, Op};
use crate::guard::{self, Guard};
use crate::{errno, mpi, next_alloc, tracer};

/// Exports `$name` as a trampoline of four instructions: it passes the
/// caller's registers as they were at its call (the return address as pc,
/// the stack pointer after the return, and rbp) in the three argument
/// registers after the C arguments, and jumps to `$imp`, which returns to
/// the program directly. Unwinding then starts at the program's frame
/// instead of stepping through the export's own (in the stress benchmark,
/// random order: 209 → 191 ns per event). The asm is x86-64 System V: the
/// registers follow the arity; `.cfi_*` gives the trampoline the
/// entry-state unwind rule.
macro_rules! from_caller {
    ($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty => $imp:ident; $pc:literal, $sp:literal, $bp:literal) => {
        /// # Safety
        /// As for the C function of this name.
        #[unsafe(naked)]
        #[cfg_attr(not(test), unsafe(no_mangle))]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            std::arch::naked_asm!(
                ".cfi_startproc",
                concat!("mov ", $pc, ", [rsp]"),
                concat!("lea ", $sp, ", [rsp + 8]"),
                concat!("mov ", $bp, ", rbp"),
                "jmp {imp}",
                ".cfi_endproc",
                imp = sym $imp,
            )
        }
    };
    ($name:ident($a:ident: $ta:ty) -> $ret:ty => $imp:ident) => {
        from_caller!($name($a: $ta) -> $ret => $imp; "rsi", "rdx", "rcx");
    };
    ($name:ident($a:ident: $ta:ty, $b:ident: $tb:ty) -> $ret:ty => $imp:ident) => {
        from_caller!($name($a: $ta, $b: $tb) -> $ret => $imp; "rdx", "rcx", "r8");
    };
    ($name:ident($a:ident: $ta:ty, $b:ident: $tb:ty, $c:ident: $tc:ty) -> $ret:ty => $imp:ident) => {
        from_caller!($name($a: $ta, $b: $tb, $c: $tc) -> $ret => $imp; "rcx", "r8", "r9");
    };
}

/// The registers a [`from_caller`] trampoline passed: `pc` is the return
/// address of the program's call.
#[inline(always)]
fn caller(pc: u64, sp: u64, bp: u64) -> Regs {
    Regs {
        pc,
        sp,
        bp,
        pc_is_return: true,
    }
}

#[inline(always)]
fn record(at: Regs, kind: AllocKind, p: *mut c_void, size: usize) {
    match Guard::acquire_event() {
        Some(g) => {
            let e = errno::get();
            tracer::on_alloc(&g, at, kind, p, size);
            drop(g);
            errno::set(e);
        }
        None => deferred::interrupted(Op::Alloc {
            kind: kind as u16,
            ptr: p as u64,
            size: size as u64,
        }),
    }
}

/// A realloc-type call made while the thread is inside the tracer.
fn realloc_inside(kind: AllocKind, old: *mut c_void, size: usize, new: *mut c_void) -> *mut c_void {
    deferred::interrupted(Op::Realloc {
        kind: kind as u16,
        old: old as u64,
        new: new as u64,
        size: size as u64,
    });
    new
}

/// `sigaction`: the tracer's own handlers are invisible to the program
/// (`signals::program_sigaction`).
///
/// # Safety
/// As for C `sigaction`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    // SAFETY: the caller's contract is sigaction's.
    unsafe { crate::signals::program_sigaction(sig, act, old) }
}

/// `signal`: as `sigaction`.
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    crate::signals::program_signal(crate::signals::Installer::Bsd, sig, handler)
}

/// `bsd_signal`: `signal` under another name.
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn bsd_signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    crate::signals::program_signal(crate::signals::Installer::Bsd, sig, handler)
}

/// `sysv_signal`: as `sigaction`.
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn sysv_signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    crate::signals::program_signal(crate::signals::Installer::Sysv, sig, handler)
}

/// `sigset`: as `sigaction`.
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn sigset(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    crate::signals::program_signal(crate::signals::Installer::Sigset, sig, handler)
}

/// The fork-handler callbacks of `pthread_atfork`.
pub type ForkHandler = Option<unsafe extern "C" fn()>;

/// `__register_atfork`, which `pthread_atfork` (a static stub linked into
/// each object) calls: the tracer's fork handlers are registered before
/// the first of anyone else's, so that its lock-taking `prepare` runs last
/// and its `parent`/`child` first, and other handlers that allocate find
/// the tracer unlocked (`lifecycle::register_atfork`).
///
/// # Safety
/// As for glibc's `__register_atfork`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn __register_atfork(
    prepare: ForkHandler,
    parent: ForkHandler,
    child: ForkHandler,
    dso_handle: *mut c_void,
) -> c_int {
    // SAFETY: the caller's contract is __register_atfork's.
    unsafe { crate::lifecycle::register_atfork(prepare, parent, child, dso_handle) }
}

/// `_exit`: the report first (exit()'s handlers, where it is written
/// otherwise, do not run).
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn _exit(status: c_int) -> ! {
    crate::lifecycle::immediate_exit(status)
}

/// `_Exit`: as `_exit`.
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn _Exit(status: c_int) -> ! {
    crate::lifecycle::immediate_exit(status)
}

/// The tracer's own heap for `libwmhcct_mpi.so`'s Rust allocations (its
/// global allocator finds these three with `dlsym`): the job's merge at
/// `MPI_Finalize` stays out of the program's heap, as the tracer's own
/// allocations do (`own_heap`). `zeroed`: non-zero for zero-filled.
///
/// # Safety
/// As for `GlobalAlloc::alloc`: `align` a power of two, `size` non-zero and
/// at most `isize::MAX` rounded up to `align`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn wmhcct_heap_alloc(size: usize, align: usize, zeroed: c_int) -> *mut u8 {
    // SAFETY: the caller's contract is GlobalAlloc's.
    unsafe { crate::own_heap::alloc_for_side(size, align, zeroed != 0) }
}

/// Give back a block of [`wmhcct_heap_alloc`].
///
/// # Safety
/// As for `GlobalAlloc::dealloc`: `ptr` from these functions with this
/// size and alignment.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn wmhcct_heap_dealloc(ptr: *mut u8, size: usize, align: usize) {
    // SAFETY: the caller's contract is GlobalAlloc's.
    unsafe { crate::own_heap::dealloc_for_side(ptr, size, align) }
}

/// Resize a block of [`wmhcct_heap_alloc`].
///
/// # Safety
/// As for `GlobalAlloc::realloc`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn wmhcct_heap_realloc(
    ptr: *mut u8,
    size: usize,
    align: usize,
    new_size: usize,
) -> *mut u8 {
    // SAFETY: the caller's contract is GlobalAlloc's.
    unsafe { crate::own_heap::realloc_for_side(ptr, size, align, new_size) }
}

from_caller!(malloc(size: usize) -> *mut c_void => malloc_at);
extern "C" fn malloc_at(size: usize, pc: u64, sp: u64, bp: u64) -> *mut c_void {
    let p = next_alloc::malloc(size);
    record(caller(pc, sp, bp), AllocKind::Malloc, p, size);
    p
}

from_caller!(calloc(n: usize, size: usize) -> *mut c_void => calloc_at);
extern "C" fn calloc_at(n: usize, size: usize, pc: u64, sp: u64, bp: u64) -> *mut c_void {
    let p = next_alloc::calloc(n, size);
    record(
        caller(pc, sp, bp),
        AllocKind::Calloc,
        p,
        n.wrapping_mul(size),
    );
    p
}

from_caller!(realloc(old: *mut c_void, size: usize) -> *mut c_void => realloc_at);
extern "C" fn realloc_at(old: *mut c_void, size: usize, pc: u64, sp: u64, bp: u64) -> *mut c_void {
    // SAFETY (both calls): the caller passes NULL or a live block.
    match Guard::acquire_event() {
        Some(g) => tracer::on_realloc(
            &g,
            caller(pc, sp, bp),
            AllocKind::Realloc,
            old,
            size,
            || unsafe { next_alloc::realloc(old, size) },
        ),
        None => realloc_inside(AllocKind::Realloc, old, size, unsafe {
            next_alloc::realloc(old, size)
        }),
    }
}

from_caller!(reallocarray(old: *mut c_void, n: usize, size: usize) -> *mut c_void => reallocarray_at);
extern "C" fn reallocarray_at(
    old: *mut c_void,
    n: usize,
    size: usize,
    pc: u64,
    sp: u64,
    bp: u64,
) -> *mut c_void {
    // On overflow the call fails and keeps `old`: never "size 0".
    let bytes = n.saturating_mul(size);
    // glibc's reallocarray calls realloc through the PLT, i.e. ours: hidden,
    // so the one call is recorded once.
    // SAFETY: the caller passes NULL or a live block.
    let call = || guard::hidden(|| unsafe { next_alloc::reallocarray(old, n, size) });
    match Guard::acquire_event() {
        Some(g) => tracer::on_realloc(
            &g,
            caller(pc, sp, bp),
            AllocKind::Reallocarray,
            old,
            bytes,
            call,
        ),
        None => realloc_inside(AllocKind::Reallocarray, old, bytes, call()),
    }
}

/// # Safety
/// As for C `free`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn free(p: *mut c_void) {
    match Guard::acquire_event() {
        Some(g) => {
            let e = errno::get();
            tracer::on_free(&g, p);
            drop(g);
            errno::set(e);
        }
        None => deferred::interrupted(Op::Free {
            kind: AllocKind::Free as u16,
            ptr: p as u64,
        }),
    }
    // SAFETY: the caller passes NULL or a live block.
    unsafe { next_alloc::free(p) }
}

from_caller!(posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int => posix_memalign_at);
extern "C" fn posix_memalign_at(
    out: *mut *mut c_void,
    align: usize,
    size: usize,
    pc: u64,
    sp: u64,
    bp: u64,
) -> c_int {
    // SAFETY: the caller passes a writable `out`.
    let rc = unsafe { next_alloc::posix_memalign(out, align, size) };
    // SAFETY: on success the allocator stored the block in `out`.
    let p = if rc == 0 {
        unsafe { *out }
    } else {
        std::ptr::null_mut()
    };
    record(caller(pc, sp, bp), AllocKind::PosixMemalign, p, size);
    rc
}

from_caller!(aligned_alloc(align: usize, size: usize) -> *mut c_void => aligned_alloc_at);
extern "C" fn aligned_alloc_at(
    align: usize,
    size: usize,
    pc: u64,
    sp: u64,
    bp: u64,
) -> *mut c_void {
    let p = next_alloc::aligned_alloc(align, size);
    record(caller(pc, sp, bp), AllocKind::AlignedAlloc, p, size);
    p
}

from_caller!(memalign(align: usize, size: usize) -> *mut c_void => memalign_at);
extern "C" fn memalign_at(align: usize, size: usize, pc: u64, sp: u64, bp: u64) -> *mut c_void {
    let p = next_alloc::memalign(align, size);
    record(caller(pc, sp, bp), AllocKind::Memalign, p, size);
    p
}

from_caller!(valloc(size: usize) -> *mut c_void => valloc_at);
extern "C" fn valloc_at(size: usize, pc: u64, sp: u64, bp: u64) -> *mut c_void {
    let p = next_alloc::valloc(size);
    record(caller(pc, sp, bp), AllocKind::Valloc, p, size);
    p
}

from_caller!(pvalloc(size: usize) -> *mut c_void => pvalloc_at);
extern "C" fn pvalloc_at(size: usize, pc: u64, sp: u64, bp: u64) -> *mut c_void {
    let p = next_alloc::pvalloc(size);
    record(caller(pc, sp, bp), AllocKind::Pvalloc, p, size);
    p
}

type DlcloseFn = unsafe extern "C" fn(*mut c_void) -> c_int;

/// `dlclose`: after glibc unloads the object, the module table is re-read
/// so its unwind tables are never used for addresses reused by later loads.
/// (`dlopen` is not wrapped: it searches paths relative to its caller; new
/// objects are picked up when an unwind meets an unknown address.)
///
/// # Safety
/// As for C `dlclose`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn dlclose(handle: *mut c_void) -> c_int {
    static REAL: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let f = crate::loaded_symbol::next_symbol(&REAL, c"dlclose");
    if f == 0 {
        return -1;
    }
    // SAFETY: `f` is glibc's dlclose; the caller passes a handle from dlopen.
    let rc = unsafe { std::mem::transmute::<usize, DlcloseFn>(f)(handle) };
    let e = errno::get();
    if let Some(g) = Guard::acquire() {
        if let Some(t) = tracer::get(&g) {
            tracer::refresh_modules(t);
        }
    }
    errno::set(e);
    rc
}

// ---------------------------------------------------------------------------
// MPI. Every wrapper is generated from the table in `mpi_table.rs`; C and
// Fortran wrappers call the same `mpi::event`.

/// C parameter type of a table kind.
macro_rules! c_type {
    (P) => {
        usize
    };
    (I) => {
        c_int
    };
    (H) => {
        usize
    };
    (A) => {
        isize
    };
}

/// The five Fortran manglings of one routine, all calling `$imp`.
macro_rules! fortran_names {
    ($lower:literal, $upper:literal, ($($p:ident),*), $imp:path) => {
        const _: () = {
            #[cfg_attr(not(test), export_name = concat!($lower, "_"))]
            unsafe extern "C" fn f1($($p: usize,)* ierr: *mut c_int) { unsafe { $imp($($p,)* ierr) } }
            #[cfg_attr(not(test), export_name = concat!($lower, "__"))]
            unsafe extern "C" fn f2($($p: usize,)* ierr: *mut c_int) { unsafe { $imp($($p,)* ierr) } }
            #[cfg_attr(not(test), export_name = $lower)]
            unsafe extern "C" fn f3($($p: usize,)* ierr: *mut c_int) { unsafe { $imp($($p,)* ierr) } }
            #[cfg_attr(not(test), export_name = $upper)]
            unsafe extern "C" fn f4($($p: usize,)* ierr: *mut c_int) { unsafe { $imp($($p,)* ierr) } }
            #[cfg_attr(not(test), export_name = concat!($lower, "_f08_"))]
            unsafe extern "C" fn f5($($p: usize,)* ierr: *mut c_int) { unsafe { $imp($($p,)* ierr) } }
        };
    };
}

/// Which argument is the Alloc_mem/Free_mem base pointer (0 for others).
macro_rules! base_arg {
    (base, $v:expr) => {
        $v
    };
    ($other:ident, $v:expr) => {
        0usize
    };
}

macro_rules! mpi_wrappers {
    ($( ($c:ident, $pmpi:literal, $lower:literal, $upper:literal, $kind:literal,
         ($($p:ident : $t:ident),*), $bytes:ident($($b:ident),*)); )*) => {
        $(
            #[allow(non_snake_case)]
            mod $c {
                use super::*;
                use std::sync::atomic::AtomicUsize;

                static REAL_C: AtomicUsize = AtomicUsize::new(0);
                static REAL_F: AtomicUsize = AtomicUsize::new(0);

                /// # Safety
                /// As for the MPI routine.
                #[cfg_attr(not(test), export_name = stringify!($c))]
                pub unsafe extern "C" fn c_wrapper($($p: c_type!($t)),*) -> c_int {
                    let name = unsafe { std::ffi::CStr::from_bytes_with_nul_unchecked(concat!($pmpi, "\0").as_bytes()) };
                    let f = mpi::next_symbol(&REAL_C, name);
                    if f == 0 { mpi::missing(name) }
                    let base = 0usize $(+ base_arg!($p, $p as usize))*;
                    mpi::event(
                        $kind,
                        base,
                        || mpi::bytes::$bytes(mpi::Abi::C $(, $b as usize)*),
                        // SAFETY: `f` is the PMPI routine with this C signature.
                        || unsafe {
                            std::mem::transmute::<usize, unsafe extern "C" fn($(c_type!($t)),*) -> c_int>(f)($($p),*)
                        },
                    )
                }

                /// # Safety
                /// As for the Fortran MPI routine.
                #[allow(clippy::too_many_arguments)]
                pub unsafe fn fortran($($p: usize,)* ierr: *mut c_int) {
                    let name = unsafe { std::ffi::CStr::from_bytes_with_nul_unchecked(concat!("p", $lower, "_\0").as_bytes()) };
                    let f = mpi::next_symbol(&REAL_F, name);
                    if f == 0 { mpi::missing(name) }
                    let base = 0usize $(+ base_arg!($p, $p))*;
                    let mut local: c_int = 0;
                    let err = if ierr.is_null() { &mut local as *mut c_int } else { ierr };
                    mpi::event(
                        $kind,
                        base,
                        || mpi::bytes::$bytes(mpi::Abi::Fortran $(, $b)*),
                        // SAFETY: `f` is the Fortran PMPI routine: all by reference.
                        || unsafe {
                            std::mem::transmute::<usize, unsafe extern "C" fn($(mpi_f_param!($p),)* *mut c_int)>(f)($($p,)* err);
                            *err
                        },
                    );
                }

                fortran_names!($lower, $upper, ($($p),*), fortran);
            }
        )*
    };
}

macro_rules! mpi_f_param {
    ($p:ident) => {
        usize
    };
}

crate::mpi_calls!(mpi_wrappers);

// MPI life cycle: not events, but where the job's report is taken.

static PMPI_INIT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static PMPI_INIT_THREAD: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static PMPI_FINALIZE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static PMPI_ABORT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn pmpi(cache: &std::sync::atomic::AtomicUsize, name: &std::ffi::CStr) -> usize {
    match mpi::next_symbol(cache, name) {
        0 => mpi::missing(name),
        f => f,
    }
}

/// # Safety
/// As for `MPI_Init`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn MPI_Init(argc: *mut c_int, argv: *mut c_void) -> c_int {
    let f = pmpi(&PMPI_INIT, c"PMPI_Init");
    // SAFETY: PMPI_Init(int*, char***).
    let rc = unsafe {
        std::mem::transmute::<usize, unsafe extern "C" fn(*mut c_int, *mut c_void) -> c_int>(f)(
            argc, argv,
        )
    };
    if rc == 0 {
        mpi::after_init();
    }
    rc
}

/// # Safety
/// As for `MPI_Init_thread`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn MPI_Init_thread(
    argc: *mut c_int,
    argv: *mut c_void,
    required: c_int,
    provided: *mut c_int,
) -> c_int {
    let f = pmpi(&PMPI_INIT_THREAD, c"PMPI_Init_thread");
    // SAFETY: PMPI_Init_thread(int*, char***, int, int*).
    let rc = unsafe {
        std::mem::transmute::<
            usize,
            unsafe extern "C" fn(*mut c_int, *mut c_void, c_int, *mut c_int) -> c_int,
        >(f)(argc, argv, required, provided)
    };
    if rc == 0 {
        mpi::after_init();
    }
    rc
}

#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn MPI_Finalize() -> c_int {
    mpi::before_finalize();
    let f = pmpi(&PMPI_FINALIZE, c"PMPI_Finalize");
    // SAFETY: PMPI_Finalize(void).
    unsafe { std::mem::transmute::<usize, unsafe extern "C" fn() -> c_int>(f)() }
}

/// # Safety
/// As for `MPI_Abort`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn MPI_Abort(comm: usize, code: c_int) -> c_int {
    mpi::before_abort();
    let f = pmpi(&PMPI_ABORT, c"PMPI_Abort");
    // SAFETY: PMPI_Abort(MPI_Comm, int); the handle is passed through.
    unsafe {
        std::mem::transmute::<usize, unsafe extern "C" fn(usize, c_int) -> c_int>(f)(comm, code)
    }
}

mod fortran_lifecycle {
    use super::*;
    static F_INIT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    static F_INIT_THREAD: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    static F_FINALIZE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    static F_ABORT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    fn err_slot(ierr: *mut c_int, local: &mut c_int) -> *mut c_int {
        if ierr.is_null() {
            local
        } else {
            ierr
        }
    }

    /// # Safety
    /// As for Fortran `MPI_INIT(IERROR)`; `ierr` may be NULL.
    pub unsafe fn init(ierr: *mut c_int) {
        let f = pmpi(&F_INIT, c"pmpi_init_");
        let mut local = 0;
        let e = err_slot(ierr, &mut local);
        // SAFETY: pmpi_init_(INTEGER* ierror).
        unsafe { std::mem::transmute::<usize, unsafe extern "C" fn(*mut c_int)>(f)(e) };
        // SAFETY: `e` points at an INTEGER.
        if unsafe { *e } == 0 {
            mpi::after_init();
        }
    }

    /// # Safety
    /// As for Fortran `MPI_INIT_THREAD(REQUIRED, PROVIDED, IERROR)`.
    pub unsafe fn init_thread(required: usize, provided: usize, ierr: *mut c_int) {
        let f = pmpi(&F_INIT_THREAD, c"pmpi_init_thread_");
        let mut local = 0;
        let e = err_slot(ierr, &mut local);
        // SAFETY: pmpi_init_thread_(INTEGER*, INTEGER*, INTEGER*).
        unsafe {
            std::mem::transmute::<usize, unsafe extern "C" fn(usize, usize, *mut c_int)>(f)(
                required, provided, e,
            )
        };
        // SAFETY: `e` points at an INTEGER.
        if unsafe { *e } == 0 {
            mpi::after_init();
        }
    }

    /// # Safety
    /// As for Fortran `MPI_FINALIZE(IERROR)`.
    pub unsafe fn finalize(ierr: *mut c_int) {
        mpi::before_finalize();
        let f = pmpi(&F_FINALIZE, c"pmpi_finalize_");
        let mut local = 0;
        // SAFETY: pmpi_finalize_(INTEGER*).
        unsafe {
            std::mem::transmute::<usize, unsafe extern "C" fn(*mut c_int)>(f)(err_slot(
                ierr, &mut local,
            ))
        };
    }

    /// # Safety
    /// As for Fortran `MPI_ABORT(COMM, ERRORCODE, IERROR)`.
    pub unsafe fn abort(comm: usize, code: usize, ierr: *mut c_int) {
        mpi::before_abort();
        let f = pmpi(&F_ABORT, c"pmpi_abort_");
        let mut local = 0;
        // SAFETY: pmpi_abort_(INTEGER*, INTEGER*, INTEGER*).
        unsafe {
            std::mem::transmute::<usize, unsafe extern "C" fn(usize, usize, *mut c_int)>(f)(
                comm,
                code,
                err_slot(ierr, &mut local),
            )
        };
    }

    fortran_names!("mpi_init", "MPI_INIT", (), init);
    fortran_names!(
        "mpi_init_thread",
        "MPI_INIT_THREAD",
        (required, provided),
        init_thread
    );
    fortran_names!("mpi_finalize", "MPI_FINALIZE", (), finalize);
    fortran_names!("mpi_abort", "MPI_ABORT", (comm, code), abort);
}
