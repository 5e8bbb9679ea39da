//! The allocator the program would have called without us.
//!
//! Every interposed allocator entry point forwards to the *next* definition
//! of its name after libwmhcct.so in the symbol search order
//! (`dlsym(RTLD_NEXT, name)`): glibc's normally; jemalloc's (tcmalloc's,
//! mimalloc's...) when that library is preloaded after us
//! (`LD_PRELOAD="libwmhcct.so libjemalloc.so.2"`) or linked into the
//! program. Preloaded *before* us, such an allocator's own definitions win
//! and only the names it lacks reach us: they go on to glibc, as they
//! would without us.
//!
//! - **Decided once, for the whole family**, at the first call (on any
//!   thread), before a block is handed out: the table of targets is looked
//!   up with the reentrancy guard held, then published by the first thread
//!   to finish the lookup; a thread that finishes later takes that table.
//!   The fast path is one acquire load (a plain `mov` on x86-64) and an
//!   indirect call; `free`, `realloc` and `malloc_usable_size` also compare
//!   the pointer with the bootstrap arena's (link-time) bounds.
//! - **Bootstrap arena**: `dlsym` may allocate (its error path, the dlerror
//!   buffer); those calls re-enter our exports on the resolving thread and
//!   are served from a small static arena whose blocks are never passed to
//!   any allocator (`free` ignores them, `realloc` copies out of them).
//! - **Synthesis**: when the allocator that defines the next `malloc` lacks
//!   an entry point (jemalloc has no `pvalloc` nor `reallocarray`), it is
//!   built from the ones it has (`pvalloc` = page-aligned allocation of the
//!   size rounded up to pages through its `posix_memalign`/`memalign`/
//!   `aligned_alloc`; `reallocarray` = overflow check + its `realloc`...), so
//!   every block is freed and measured by the allocator that made it. If
//!   the next definitions do not form one allocator (no `realloc`, `free`
//!   or aligned allocation next to that `malloc`), each entry point simply
//!   gets the next definition of its own name.
//!
//! The tracer's own Rust allocations never come here: they go to its own
//! heap (`own_heap::OwnHeap`).

use std::cell::Cell;
use std::ffi::{c_int, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::arena::Arena;
use crate::errno;
use crate::guard::Guard;
use crate::real::{
    __libc_calloc, __libc_free, __libc_malloc, __libc_memalign, __libc_pvalloc, __libc_realloc,
    __libc_valloc,
};
use crate::sealed;

type MallocFn = unsafe extern "C" fn(usize) -> *mut c_void;
type CallocFn = unsafe extern "C" fn(usize, usize) -> *mut c_void;
type ReallocFn = unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void;
type FreeFn = unsafe extern "C" fn(*mut c_void);
/// `memalign` and `aligned_alloc`.
type AlignFn = unsafe extern "C" fn(usize, usize) -> *mut c_void;
type PosixMemalignFn = unsafe extern "C" fn(*mut *mut c_void, usize, usize) -> c_int;
type ReallocarrayFn = unsafe extern "C" fn(*mut c_void, usize, usize) -> *mut c_void;
type UsableSizeFn = unsafe extern "C" fn(*mut c_void) -> usize;

/// The forwarded entry points: indices into a [`Table`].
#[derive(Clone, Copy, Debug, PartialEq)]
enum F {
    Malloc,
    Calloc,
    Realloc,
    Free,
    Memalign,
    PosixMemalign,
    AlignedAlloc,
    Valloc,
    Pvalloc,
    Reallocarray,
    UsableSize,
}

const N: usize = 11;

/// Symbol names, in [`F`] order.
const NAMES: [&CStr; N] = [
    c"malloc",
    c"calloc",
    c"realloc",
    c"free",
    c"memalign",
    c"posix_memalign",
    c"aligned_alloc",
    c"valloc",
    c"pvalloc",
    c"reallocarray",
    c"malloc_usable_size",
];

/// One function address per entry point, in [`F`] order.
type Table = [usize; N];

/// The aligned-allocation functions of the chosen allocator (0: it has
/// none of that name); what the synthesised aligned entry points use.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Aligned {
    posix_memalign: usize,
    memalign: usize,
    aligned_alloc: usize,
}

/// The published targets (0 until decided). `Malloc` is stored last.
static SLOTS: [AtomicUsize; N] = [const { AtomicUsize::new(0) }; N];
/// [`Aligned`] of the published table, stored before any slot.
static ALIGNED: [AtomicUsize; 3] = [const { AtomicUsize::new(0) }; 3];
/// The page size, stored before any slot.
static PAGE: AtomicUsize = AtomicUsize::new(4096);
/// Some thread has started publishing its table.
static PUBLISHING: AtomicBool = AtomicBool::new(false);

thread_local! {
    // `const`, no destructor: usable at any time, like the guard's flag.
    static RESOLVING: Cell<bool> = const { Cell::new(false) };
}

// ---------------------------------------------------------------------------
// Forwarding (what exports.rs calls).

#[inline(always)]
fn slot(f: F) -> usize {
    SLOTS[f as usize].load(Ordering::Acquire)
}

/// Call `call` with the target of `f`; before the table is decided, decide
/// it first, or (on the thread deciding it) serve `boot` instead.
#[inline(always)]
fn forward<R>(f: F, call: impl FnOnce(usize) -> R, boot: impl FnOnce() -> R) -> R {
    let target = slot(f);
    if target != 0 {
        return call(target);
    }
    undecided(f, call, boot)
}

#[cold]
#[inline(never)]
fn undecided<R>(f: F, call: impl FnOnce(usize) -> R, boot: impl FnOnce() -> R) -> R {
    match resolve(f) {
        0 => boot(),
        target => call(target),
    }
}

/// Next `malloc`.
#[inline(always)]
pub fn malloc(size: usize) -> *mut c_void {
    if sealed::active() {
        if let Some(p) = sealed::serve(size) {
            return p;
        }
    }
    forward(
        F::Malloc,
        // SAFETY: the slot holds a `malloc`; it has no preconditions.
        |f| unsafe { std::mem::transmute::<usize, MallocFn>(f)(size) },
        || BOOT.alloc(size, MIN_ALIGN),
    )
}

/// Next `calloc`.
#[inline(always)]
pub fn calloc(n: usize, size: usize) -> *mut c_void {
    if sealed::active() {
        if let Some(p) = n.checked_mul(size).and_then(sealed::serve) {
            return p;
        }
    }
    forward(
        F::Calloc,
        // SAFETY: the slot holds a `calloc`; it checks the overflow itself.
        |f| unsafe { std::mem::transmute::<usize, CallocFn>(f)(n, size) },
        // Arena memory is never reused: already zero.
        || match n.checked_mul(size) {
            Some(total) => BOOT.alloc(total, MIN_ALIGN),
            None => enomem(),
        },
    )
}

/// Next `realloc`.
///
/// # Safety
/// As for C `realloc`: `p` is NULL or a live block.
#[inline(always)]
pub unsafe fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    if BOOT.contains(p) {
        // SAFETY: `p` is a live arena block.
        return unsafe { realloc_out_of_arena(p, size) };
    }
    if sealed::contains(p) {
        // SAFETY: `p` is a live block of the sealed calls' arena.
        return unsafe { sealed::realloc(p, size, malloc) };
    }
    if p.is_null() && sealed::active() {
        if let Some(q) = sealed::serve(size) {
            return q;
        }
    }
    forward(
        F::Realloc,
        // SAFETY: the slot holds a `realloc`; `p` came from its allocator
        // (every block but the arena's does).
        |f| unsafe { std::mem::transmute::<usize, ReallocFn>(f)(p, size) },
        // Still deciding: no block but the arena's exists yet.
        || {
            if p.is_null() {
                BOOT.alloc(size, MIN_ALIGN)
            } else {
                enomem()
            }
        },
    )
}

/// Next `free`.
///
/// # Safety
/// As for C `free`: `p` is NULL or a live block.
#[inline(always)]
pub unsafe fn free(p: *mut c_void) {
    if BOOT.contains(p) {
        return;
    }
    if sealed::contains(p) {
        sealed::free(p);
        return;
    }
    forward(
        F::Free,
        // SAFETY: the slot holds a `free`; `p` came from its allocator.
        |f| unsafe { std::mem::transmute::<usize, FreeFn>(f)(p) },
        || (),
    )
}

/// `memalign`/`aligned_alloc` from the bootstrap arena (before the next
/// allocator is known).
fn boot_aligned(align: usize, size: usize) -> *mut c_void {
    match memalign_alignment(align) {
        Some(a) => BOOT.alloc(size, a),
        None => fail(libc::EINVAL),
    }
}

/// Next `memalign`.
#[inline(always)]
pub fn memalign(align: usize, size: usize) -> *mut c_void {
    forward(
        F::Memalign,
        // SAFETY: the slot holds a `memalign`; it validates its arguments.
        |f| unsafe { std::mem::transmute::<usize, AlignFn>(f)(align, size) },
        || boot_aligned(align, size),
    )
}

/// Next `posix_memalign`.
///
/// # Safety
/// As for C `posix_memalign`: `out` is valid for a write.
#[inline(always)]
pub unsafe fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
    forward(
        F::PosixMemalign,
        // SAFETY: the slot holds a `posix_memalign`; the caller passes a
        // writable `out`.
        |f| unsafe { std::mem::transmute::<usize, PosixMemalignFn>(f)(out, align, size) },
        || {
            if !posix_alignment_ok(align) {
                return libc::EINVAL;
            }
            let p = BOOT.alloc(size, align);
            if p.is_null() {
                return libc::ENOMEM;
            }
            // SAFETY: the caller passes a writable `out`.
            unsafe { *out = p };
            0
        },
    )
}

/// Next `aligned_alloc`.
#[inline(always)]
pub fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    forward(
        F::AlignedAlloc,
        // SAFETY: the slot holds an `aligned_alloc`; it validates its
        // arguments.
        |f| unsafe { std::mem::transmute::<usize, AlignFn>(f)(align, size) },
        || boot_aligned(align, size),
    )
}

/// Next `valloc`.
#[inline(always)]
pub fn valloc(size: usize) -> *mut c_void {
    forward(
        F::Valloc,
        // SAFETY: the slot holds a `valloc`; it has no preconditions.
        |f| unsafe { std::mem::transmute::<usize, MallocFn>(f)(size) },
        || BOOT.alloc(size, PAGE.load(Ordering::Relaxed)),
    )
}

/// Next `pvalloc`.
#[inline(always)]
pub fn pvalloc(size: usize) -> *mut c_void {
    forward(
        F::Pvalloc,
        // SAFETY: the slot holds a `pvalloc`; it has no preconditions.
        |f| unsafe { std::mem::transmute::<usize, MallocFn>(f)(size) },
        || {
            let page = PAGE.load(Ordering::Relaxed);
            match pvalloc_size(size, page) {
                Some(rounded) => BOOT.alloc(rounded, page),
                None => enomem(),
            }
        },
    )
}

/// Next `reallocarray`.
///
/// # Safety
/// As for C `reallocarray`: `p` is NULL or a live block.
#[inline(always)]
pub unsafe fn reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void {
    if sealed::contains(p) {
        return match n.checked_mul(size) {
            // SAFETY: `p` is a live block of the sealed calls' arena.
            Some(total) => unsafe { sealed::realloc(p, total, malloc) },
            None => enomem(),
        };
    }
    if BOOT.contains(p) {
        return match n.checked_mul(size) {
            // SAFETY: `p` is a live arena block.
            Some(total) => unsafe { realloc_out_of_arena(p, total) },
            None => enomem(),
        };
    }
    forward(
        F::Reallocarray,
        // SAFETY: the slot holds a `reallocarray`; `p` came from its
        // allocator.
        |f| unsafe { std::mem::transmute::<usize, ReallocarrayFn>(f)(p, n, size) },
        || match (p.is_null(), n.checked_mul(size)) {
            (true, Some(total)) => BOOT.alloc(total, MIN_ALIGN),
            _ => enomem(),
        },
    )
}

/// Next `malloc_usable_size`: blocks are measured by the allocator that
/// made them (arena blocks by the arena).
///
/// # Safety
/// As for `malloc_usable_size`: `p` is NULL or a live block.
#[inline(always)]
pub unsafe fn malloc_usable_size(p: *mut c_void) -> usize {
    if BOOT.contains(p) {
        // SAFETY: `p` is a live arena block.
        return unsafe { BOOT.size_of(p) };
    }
    if sealed::contains(p) {
        // SAFETY: `p` is a live block of the sealed calls' arena.
        return unsafe { sealed::size_of(p) };
    }
    forward(
        F::UsableSize,
        // SAFETY: the slot holds a `malloc_usable_size`; `p` came from its
        // allocator.
        |f| unsafe { std::mem::transmute::<usize, UsableSizeFn>(f)(p) },
        || 0,
    )
}

/// `realloc` of an arena block: a block from the next allocator (or the
/// arena, while still deciding) with the contents copied; the arena block
/// is never freed.
///
/// # Safety
/// `p` is a live arena block.
#[cold]
unsafe fn realloc_out_of_arena(p: *mut c_void, size: usize) -> *mut c_void {
    let q = malloc(size);
    if !q.is_null() {
        // SAFETY: `p` holds `size_of(p)` bytes, `q` at least `size`; the
        // two blocks are distinct.
        unsafe {
            let n = BOOT.size_of(p).min(size);
            std::ptr::copy_nonoverlapping(p.cast::<u8>(), q.cast::<u8>(), n);
        }
    }
    q
}

// ---------------------------------------------------------------------------
// Deciding the table.

/// Decide the table if that has not been done, and return the target of
/// `f`; 0 if this thread is deciding it right now (a re-entrant call from
/// the lookup, or a signal handler that interrupted it): use the arena.
fn resolve(f: F) -> usize {
    if slot(F::Malloc) == 0 {
        let first = RESOLVING.try_with(|r| !r.replace(true)).unwrap_or(false);
        if !first {
            return 0;
        }
        let e = errno::get();
        {
            // Allocations of the loader's code are neither traced nor
            // forwarded: they go to the arena (see above).
            let _g = Guard::acquire();
            // SAFETY: sysconf has no preconditions.
            let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
            let page = if page > 0 { page as usize } else { 4096 };
            let found = lookup();
            let (table, aligned) = decide(&found, &objects_of(&found));
            publish(&table, aligned, page);
        }
        let _ = RESOLVING.try_with(|r| r.set(false));
        errno::set(e);
    }
    slot(f)
}

/// glibc's symbol version of each name, in [`F`] order: what a program
/// linked against glibc asks for. glibc's debugging allocator
/// (`libc_malloc_debug.so.0`, for `MALLOC_CHECK_`, `mcheck` and `mtrace`)
/// defines its functions only under these versions, not as the default
/// definition that a plain `dlsym` finds.
const VERSIONS: [&CStr; N] = [
    BASE,
    BASE,
    BASE,
    BASE,
    BASE,
    BASE,
    ALIGNED_ALLOC,
    BASE,
    BASE,
    c"GLIBC_2.26",
    BASE,
];
/// The oldest version of x86-64's glibc symbols, and `aligned_alloc`'s.
#[cfg(target_arch = "x86_64")]
const BASE: &CStr = c"GLIBC_2.2.5";
#[cfg(target_arch = "x86_64")]
const ALIGNED_ALLOC: &CStr = c"GLIBC_2.16";
/// aarch64's; on another architecture these versions name nothing, and
/// the plain lookup decides, as before.
#[cfg(not(target_arch = "x86_64"))]
const BASE: &CStr = c"GLIBC_2.17";
#[cfg(not(target_arch = "x86_64"))]
const ALIGNED_ALLOC: &CStr = BASE;

/// glibc's version of `malloc`.
pub fn malloc_version() -> &'static CStr {
    VERSIONS[F::Malloc as usize]
}

/// The definition of `name` that a program linked against glibc binds to,
/// searched from `handle` (`RTLD_NEXT`, `RTLD_DEFAULT`): the first object
/// in the search order that defines it either by default (what `dlsym`
/// finds; an unversioned definition, as jemalloc's or ours) or under
/// glibc's `version` (what `dlvsym` finds, as `libc_malloc_debug.so.0`'s).
/// Until 2026-11-27 only `dlsym` was asked, and with the debugging
/// allocator preloaded after the tracer every call went past it to glibc.
pub fn bound_definition(handle: *mut c_void, name: &CStr, version: &CStr) -> usize {
    // SAFETY: NUL-terminated names; a pseudo-handle.
    let plain = unsafe { libc::dlsym(handle, name.as_ptr()) } as usize;
    // SAFETY: as above.
    let versioned = unsafe { libc::dlvsym(handle, name.as_ptr(), version.as_ptr()) } as usize;
    match (plain, versioned) {
        (0, v) => v,
        (p, 0) => p,
        (p, v) if p == v => p,
        (p, v) => {
            let mut addrs = [0; N];
            addrs[0] = p;
            addrs[1] = v;
            let at = objects_of(&addrs);
            // The loader's list is the search order of the objects loaded
            // at start and of those opened into the global scope since.
            match (at[0], at[1]) {
                (a, b) if b != 0 && (a == 0 || b < a) => v,
                _ => p,
            }
        }
    }
}

/// The next definition of every name (0 where there is none).
fn lookup() -> Table {
    let mut found = [0; N];
    let mut failed = false;
    for ((slot, name), version) in found.iter_mut().zip(NAMES).zip(VERSIONS) {
        // RTLD_NEXT from code in this object: the first definition after
        // libwmhcct.so.
        *slot = bound_definition(libc::RTLD_NEXT, name, version);
        failed |= *slot == 0;
    }
    if failed {
        // Leave no error of ours for the program's next dlerror().
        // SAFETY: dlerror has no preconditions.
        unsafe { libc::dlerror() };
    }
    found
}

/// For each address, which loaded object's segments contain it: its
/// position in the loader's list, from 1 (0: none). One `dl_iterate_phdr`
/// pass (allocation-free, and unlike `dladdr` no symbol-table search).
fn objects_of(addrs: &Table) -> Table {
    struct Search<'a> {
        addrs: &'a Table,
        ids: Table,
        n: usize,
    }
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> c_int {
        // SAFETY: `data` is the `Search` passed below, alive for the whole
        // iteration; `info` and its program headers are the loader's.
        let (s, info) = unsafe { (&mut *data.cast::<Search>(), &*info) };
        s.n += 1;
        let phdrs = if info.dlpi_phdr.is_null() {
            &[][..]
        } else {
            // SAFETY: `dlpi_phnum` headers start at `dlpi_phdr`.
            unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) }
        };
        for ph in phdrs.iter().filter(|p| p.p_type == libc::PT_LOAD) {
            let start = (info.dlpi_addr as usize).wrapping_add(ph.p_vaddr as usize);
            let end = start.wrapping_add(ph.p_memsz as usize);
            for (id, &a) in s.ids.iter_mut().zip(s.addrs) {
                if a != 0 && *id == 0 && (start..end).contains(&a) {
                    *id = s.n;
                }
            }
        }
        0
    }
    let mut s = Search {
        addrs,
        ids: [0; N],
        n: 0,
    };
    // SAFETY: `each` has the callback's signature and only touches `s`.
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut s as *mut Search).cast()) };
    s.ids
}

/// The table for what the lookup `found`, and the aligned functions the
/// synthesised entry points use. `objects` tells which object defines each
/// address found (0: unknown).
fn decide(found: &Table, objects: &Table) -> (Table, Aligned) {
    let home = objects[F::Malloc as usize];
    // The definition of entry `i` if it is in the same object as `malloc`.
    let own_at = |i: usize| match found[i] {
        a if a != 0 && home != 0 && objects[i] == home => a,
        _ => 0,
    };
    let own = |f: F| own_at(f as usize);
    let aligned = Aligned {
        posix_memalign: own(F::PosixMemalign),
        memalign: own(F::Memalign),
        aligned_alloc: own(F::AlignedAlloc),
    };
    let one_allocator = [F::Malloc, F::Realloc, F::Free]
        .into_iter()
        .all(|f| own(f) != 0)
        && aligned != Aligned::default();
    let (glibc, glibc_aligned) = glibc();
    if !one_allocator {
        // Each name gets exactly what the program would have called
        // without us (glibc's where nothing was found: cannot happen while
        // glibc is loaded).
        let table = std::array::from_fn(|i| match found[i] {
            0 => glibc[i],
            a => a,
        });
        return (table, glibc_aligned);
    }
    let synth = synthesised();
    let mut table = std::array::from_fn(|i| match own_at(i) {
        0 => synth[i],
        a => a,
    });
    // Nothing to build it from: the next definition, as without us.
    let u = F::UsableSize as usize;
    table[u] = match found[u] {
        0 => glibc[u],
        a => a,
    };
    (table, aligned)
}

/// Publish `table` unless another thread already is publishing its own:
/// then wait for that one (it is only storing words).
fn publish(table: &Table, aligned: Aligned, page: usize) {
    if PUBLISHING.swap(true, Ordering::AcqRel) {
        while slot(F::Malloc) == 0 {
            std::hint::spin_loop();
            // SAFETY: sched_yield has no preconditions.
            unsafe { libc::sched_yield() };
        }
        return;
    }
    PAGE.store(page, Ordering::Relaxed);
    let a = [
        aligned.posix_memalign,
        aligned.memalign,
        aligned.aligned_alloc,
    ];
    for (s, v) in ALIGNED.iter().zip(a) {
        s.store(v, Ordering::Relaxed);
    }
    // Malloc (index 0) last: once it is set, every slot is.
    for (s, &v) in SLOTS.iter().zip(table).rev() {
        s.store(v, Ordering::Release);
    }
}

fn published_aligned() -> Aligned {
    Aligned {
        posix_memalign: ALIGNED[0].load(Ordering::Relaxed),
        memalign: ALIGNED[1].load(Ordering::Relaxed),
        aligned_alloc: ALIGNED[2].load(Ordering::Relaxed),
    }
}

/// glibc's own entry points (those it has a `__libc_` name for; the rest
/// synthesised on `__libc_memalign`): the table when the lookup found
/// nothing at all.
fn glibc() -> (Table, Aligned) {
    let mut t = synthesised();
    t[F::Malloc as usize] = __libc_malloc as MallocFn as usize;
    t[F::Calloc as usize] = __libc_calloc as CallocFn as usize;
    t[F::Realloc as usize] = __libc_realloc as ReallocFn as usize;
    t[F::Free as usize] = __libc_free as FreeFn as usize;
    t[F::Memalign as usize] = __libc_memalign as AlignFn as usize;
    t[F::Valloc as usize] = __libc_valloc as MallocFn as usize;
    t[F::Pvalloc as usize] = __libc_pvalloc as MallocFn as usize;
    t[F::UsableSize as usize] = usable_size_unknown as UsableSizeFn as usize;
    let a = Aligned {
        memalign: __libc_memalign as AlignFn as usize,
        ..Aligned::default()
    };
    (t, a)
}

/// The synthesised entry points (0 for those never synthesised). They are
/// `#[inline(never)]`: one instance each, so one address.
fn synthesised() -> Table {
    let mut t = [0; N];
    t[F::Calloc as usize] = calloc_synth as CallocFn as usize;
    t[F::Memalign as usize] = memalign_synth as AlignFn as usize;
    t[F::PosixMemalign as usize] = posix_memalign_synth as PosixMemalignFn as usize;
    t[F::AlignedAlloc as usize] = aligned_alloc_synth as AlignFn as usize;
    t[F::Valloc as usize] = valloc_synth as MallocFn as usize;
    t[F::Pvalloc as usize] = pvalloc_synth as MallocFn as usize;
    t[F::Reallocarray as usize] = reallocarray_synth as ReallocarrayFn as usize;
    t
}

// ---------------------------------------------------------------------------
// Synthesised entry points, on the chosen allocator's own functions (its
// malloc and realloc through the slots, its aligned functions through
// `ALIGNED`). Failures return NULL (or the error code) with errno set as
// glibc would; successes leave errno alone.

pub const MIN_ALIGN: usize = 16;

fn fail(e: c_int) -> *mut c_void {
    errno::set(e);
    std::ptr::null_mut()
}

fn enomem() -> *mut c_void {
    fail(libc::ENOMEM)
}

/// `posix_memalign`'s rule: a power of two and a multiple of `sizeof(void *)`.
fn posix_alignment_ok(align: usize) -> bool {
    align.is_power_of_two() && align.is_multiple_of(std::mem::size_of::<*mut c_void>())
}

/// The alignment glibc's `memalign` uses for `align` (rounded up to a power
/// of two, at least `sizeof(void *)`); None where it fails with EINVAL.
fn memalign_alignment(align: usize) -> Option<usize> {
    if align > usize::MAX / 2 + 1 {
        return None;
    }
    Some(
        align
            .next_power_of_two()
            .max(std::mem::size_of::<*mut c_void>()),
    )
}

/// `size` rounded up to whole pages; None on overflow.
fn pvalloc_size(size: usize, page: usize) -> Option<usize> {
    Some(size.checked_add(page - 1)? & !(page - 1))
}

/// `size` bytes aligned to `align` (a valid `posix_memalign` alignment)
/// through whichever aligned function `a` has.
fn aligned_via(a: Aligned, align: usize, size: usize) -> *mut c_void {
    if a.posix_memalign != 0 {
        let mut p = std::ptr::null_mut();
        // SAFETY: the allocator's posix_memalign; `p` is a local slot.
        let rc = unsafe {
            std::mem::transmute::<usize, PosixMemalignFn>(a.posix_memalign)(&mut p, align, size)
        };
        return if rc == 0 { p } else { fail(rc) };
    }
    if a.memalign != 0 {
        // SAFETY: the allocator's memalign; it validates its arguments.
        return unsafe { std::mem::transmute::<usize, AlignFn>(a.memalign)(align, size) };
    }
    if a.aligned_alloc != 0 {
        // Strict C11 implementations want a multiple of the alignment.
        return match size.checked_add(align - 1) {
            // SAFETY: the allocator's aligned_alloc; valid arguments.
            Some(s) => unsafe {
                std::mem::transmute::<usize, AlignFn>(a.aligned_alloc)(align, s & !(align - 1))
            },
            None => enomem(),
        };
    }
    enomem()
}

/// Overflow check, then the allocator's `malloc`, zeroed.
#[inline(never)]
unsafe extern "C" fn calloc_synth(n: usize, size: usize) -> *mut c_void {
    let Some(total) = n.checked_mul(size) else {
        return enomem();
    };
    let p = malloc(total);
    if !p.is_null() {
        // SAFETY: `p` holds at least `total` bytes.
        unsafe { std::ptr::write_bytes(p.cast::<u8>(), 0, total) };
    }
    p
}

#[inline(never)]
unsafe extern "C" fn memalign_synth(align: usize, size: usize) -> *mut c_void {
    match memalign_alignment(align) {
        Some(a) => aligned_via(published_aligned(), a, size),
        None => fail(libc::EINVAL),
    }
}

/// glibc's `aligned_alloc` (2.36) has `memalign`'s rules.
#[inline(never)]
unsafe extern "C" fn aligned_alloc_synth(align: usize, size: usize) -> *mut c_void {
    // SAFETY: no preconditions.
    unsafe { memalign_synth(align, size) }
}

/// # Safety
/// `out` is valid for a write.
#[inline(never)]
unsafe extern "C" fn posix_memalign_synth(
    out: *mut *mut c_void,
    align: usize,
    size: usize,
) -> c_int {
    if !posix_alignment_ok(align) {
        return libc::EINVAL;
    }
    // posix_memalign reports through its result, errno stays.
    let e = errno::get();
    let p = aligned_via(published_aligned(), align, size);
    errno::set(e);
    if p.is_null() {
        return libc::ENOMEM;
    }
    // SAFETY: the caller passes a writable `out`.
    unsafe { *out = p };
    0
}

#[inline(never)]
unsafe extern "C" fn valloc_synth(size: usize) -> *mut c_void {
    aligned_via(published_aligned(), PAGE.load(Ordering::Relaxed), size)
}

#[inline(never)]
unsafe extern "C" fn pvalloc_synth(size: usize) -> *mut c_void {
    let page = PAGE.load(Ordering::Relaxed);
    match pvalloc_size(size, page) {
        Some(rounded) => aligned_via(published_aligned(), page, rounded),
        None => enomem(),
    }
}

/// # Safety
/// As for C `realloc`.
#[inline(never)]
unsafe extern "C" fn reallocarray_synth(p: *mut c_void, n: usize, size: usize) -> *mut c_void {
    match n.checked_mul(size) {
        // SAFETY: the caller passes NULL or a live block.
        Some(total) => unsafe { realloc(p, total) },
        None => enomem(),
    }
}

/// No `malloc_usable_size` anywhere (glibc not loaded): 0.
#[inline(never)]
unsafe extern "C" fn usable_size_unknown(_p: *mut c_void) -> usize {
    0
}

// ---------------------------------------------------------------------------
// Bootstrap arena.

/// Bytes of the bootstrap arena (`.bss`: pages cost nothing until used).
const BOOT_BYTES: usize = 64 << 10;

static BOOT: Arena<BOOT_BYTES> = Arena::new();
// Blocks of the bootstrap arena are never given back (`free` ignores
// them): the arena never starts over, so its blocks stay zero until
// written (what `calloc` from it relies on).

#[cfg(test)]
mod tests {
    use super::*;

    const M: usize = 0x1000; // fake addresses in one object ...
    const J: usize = 0x9000; // ... and in another

    /// Fake objects: addresses below 0x2000 in one, others in another.
    fn fake_objects(found: &Table) -> Table {
        found.map(|a| match a {
            0 => 0,
            a => 1 + a / 0x2000,
        })
    }

    #[test]
    fn whole_family_in_one_object_is_used_as_found() {
        let found: Table = std::array::from_fn(|i| M + i + 1);
        let (t, a) = decide(&found, &fake_objects(&found));
        assert_eq!(t, found);
        assert_eq!(
            a,
            Aligned {
                posix_memalign: M + F::PosixMemalign as usize + 1,
                memalign: M + F::Memalign as usize + 1,
                aligned_alloc: M + F::AlignedAlloc as usize + 1,
            }
        );
    }

    #[test]
    fn names_the_allocator_lacks_are_synthesised_on_it() {
        // jemalloc after us: no pvalloc, no reallocarray; RTLD_NEXT finds
        // glibc's (object 2) for them.
        let mut found: Table = std::array::from_fn(|i| M + i + 1);
        found[F::Pvalloc as usize] = J + 1;
        found[F::Reallocarray as usize] = J + 2;
        let (t, a) = decide(&found, &fake_objects(&found));
        let synth = synthesised();
        for i in 0..N {
            let want = match i {
                i if i == F::Pvalloc as usize || i == F::Reallocarray as usize => synth[i],
                _ => found[i],
            };
            assert_eq!(t[i], want, "entry {i}");
        }
        assert_eq!(a.posix_memalign, found[F::PosixMemalign as usize]);

        // Only memalign among the aligned ones, no calloc: all built on it.
        let mut found: Table = [0; N];
        for f in [F::Malloc, F::Realloc, F::Free, F::Memalign] {
            found[f as usize] = M + f as usize + 1;
        }
        found[F::UsableSize as usize] = J + 3;
        let (t, a) = decide(&found, &fake_objects(&found));
        assert_eq!(
            a,
            Aligned {
                memalign: M + F::Memalign as usize + 1,
                ..Aligned::default()
            }
        );
        for f in [F::Calloc, F::PosixMemalign, F::AlignedAlloc, F::Valloc] {
            assert_eq!(t[f as usize], synth[f as usize], "{f:?}");
        }
        // Nothing to build malloc_usable_size from: the next definition.
        assert_eq!(t[F::UsableSize as usize], J + 3);
    }

    #[test]
    fn not_one_allocator_gets_each_next_definition() {
        // malloc/free in object 1, realloc only in object 2: no family.
        let mut found: Table = std::array::from_fn(|i| J + i + 1);
        found[F::Malloc as usize] = M + 1;
        found[F::Free as usize] = M + 2;
        found[F::Reallocarray as usize] = 0;
        let (t, _) = decide(&found, &fake_objects(&found));
        let (g, ga) = glibc();
        for i in 0..N {
            let want = if found[i] != 0 { found[i] } else { g[i] };
            assert_eq!(t[i], want, "entry {i}");
        }
        // Nothing found at all: glibc's own.
        let (t, a) = decide(&[0; N], &[0; N]);
        assert_eq!(t, g);
        assert_eq!(a, ga);
    }

    #[test]
    fn lookup_in_this_process_finds_glibc_whole() {
        // The unit-test binary defines no malloc: next is glibc's.
        let found = lookup();
        let objects = objects_of(&found);
        let mut glibc = [0; N];
        glibc[3] = __libc_malloc as MallocFn as usize;
        let libc = objects_of(&glibc)[3];
        assert_ne!(libc, 0);
        for (i, &f) in found.iter().enumerate() {
            assert_ne!(f, 0, "{:?}", NAMES[i]);
            assert_eq!(objects[i], libc, "{:?}", NAMES[i]);
        }
        // This test binary's own code is another object; NULL is in none.
        let mut other = [0; N];
        other[0] = objects_of as fn(&Table) -> Table as usize;
        other[1] = 0;
        let o = objects_of(&other);
        assert!(o[0] != 0 && o[0] != libc, "{o:?}");
        assert_eq!(o[1], 0);
        let (t, a) = decide(&found, &objects);
        assert_eq!(t, found, "nothing synthesised");
        assert_ne!(a.posix_memalign, 0);
        // And the forwarding functions work on it.
        let p = malloc(100);
        assert!(!p.is_null() && !BOOT.contains(p));
        // SAFETY: live blocks of the published (glibc) table.
        unsafe {
            assert!(malloc_usable_size(p) >= 100);
            let p = reallocarray(p, 10, 100);
            assert!(!p.is_null());
            free(p);
        }
        let p = pvalloc(1);
        assert_eq!(p as usize % PAGE.load(Ordering::Relaxed), 0);
        // SAFETY: a live block.
        unsafe { free(p) };
    }

    #[test]
    fn aligned_via_each_kind_of_function() {
        let pm = libc::posix_memalign as PosixMemalignFn as usize;
        let ma = __libc_memalign as AlignFn as usize;
        for a in [
            Aligned {
                posix_memalign: pm,
                ..Aligned::default()
            },
            Aligned {
                memalign: ma,
                ..Aligned::default()
            },
            Aligned {
                aligned_alloc: ma,
                ..Aligned::default()
            },
        ] {
            for (align, size) in [(8, 1), (64, 1000), (4096, 5000), (4096, 0)] {
                errno::set(libc::EEXIST);
                let p = aligned_via(a, align, size);
                assert!(!p.is_null(), "{a:?} {align} {size}");
                assert_eq!(p as usize % align, 0);
                assert_eq!(errno::get(), libc::EEXIST, "success keeps errno");
                // SAFETY: a live glibc block.
                unsafe {
                    assert!(libc::malloc_usable_size(p) >= size);
                    libc::free(p);
                }
            }
            errno::set(0);
            assert!(aligned_via(a, 64, usize::MAX - 100).is_null(), "{a:?}");
            assert_eq!(errno::get(), libc::ENOMEM, "{a:?}");
        }
        errno::set(0);
        assert!(aligned_via(Aligned::default(), 64, 1).is_null());
        assert_eq!(errno::get(), libc::ENOMEM);
    }

    #[test]
    fn synthesis_rules() {
        assert_eq!(pvalloc_size(0, 4096), Some(0));
        assert_eq!(pvalloc_size(1, 4096), Some(4096));
        assert_eq!(pvalloc_size(4096, 4096), Some(4096));
        assert_eq!(pvalloc_size(4097, 4096), Some(8192));
        assert_eq!(pvalloc_size(usize::MAX - 100, 4096), None);
        assert_eq!(memalign_alignment(1), Some(8));
        assert_eq!(memalign_alignment(48), Some(64));
        assert_eq!(memalign_alignment(4096), Some(4096));
        assert_eq!(
            memalign_alignment(usize::MAX / 2 + 1),
            Some(usize::MAX / 2 + 1)
        );
        assert_eq!(memalign_alignment(usize::MAX / 2 + 2), None);
        assert!(posix_alignment_ok(8) && posix_alignment_ok(4096));
        assert!(!posix_alignment_ok(4) && !posix_alignment_ok(24) && !posix_alignment_ok(0));

        // The synthesised functions on the published table (glibc's here).
        let _ = malloc(1);
        let mut out = 0x1234 as *mut c_void;
        // SAFETY: `out` is a local slot.
        unsafe {
            errno::set(libc::EEXIST);
            assert_eq!(posix_memalign_synth(&mut out, 24, 10), libc::EINVAL);
            assert_eq!(out as usize, 0x1234, "out unchanged");
            assert_eq!(
                posix_memalign_synth(&mut out, 64, usize::MAX - 100),
                libc::ENOMEM
            );
            assert_eq!(errno::get(), libc::EEXIST, "posix_memalign keeps errno");
            assert_eq!(posix_memalign_synth(&mut out, 64, 10), 0);
            assert_eq!(out as usize % 64, 0);
            free(out);

            let p = reallocarray_synth(std::ptr::null_mut(), 10, 8);
            assert!(!p.is_null());
            errno::set(0);
            assert!(reallocarray_synth(p, usize::MAX / 2, 4).is_null());
            assert_eq!(errno::get(), libc::ENOMEM);
            free(p);

            let page = PAGE.load(Ordering::Relaxed);
            let p = pvalloc_synth(page + 1);
            assert_eq!(p as usize % page, 0);
            assert!(malloc_usable_size(p) >= 2 * page);
            free(p);
            errno::set(0);
            assert!(pvalloc_synth(usize::MAX - 10).is_null());
            assert_eq!(errno::get(), libc::ENOMEM);

            let p = valloc_synth(10);
            assert_eq!(p as usize % page, 0);
            free(p);

            errno::set(0);
            assert!(memalign_synth(usize::MAX / 2 + 2, 16).is_null());
            assert_eq!(errno::get(), libc::EINVAL);
            let p = memalign_synth(48, 10);
            assert_eq!(p as usize % 64, 0);
            free(p);

            let p = calloc_synth(100, 10).cast::<u8>();
            assert!((0..1000).all(|i| *p.add(i) == 0));
            free(p.cast());
            errno::set(0);
            assert!(calloc_synth(usize::MAX / 2, 4).is_null());
            assert_eq!(errno::get(), libc::ENOMEM);
        }
    }

    #[test]
    fn arena_blocks_never_reach_the_allocator() {
        let p = BOOT.alloc(40, 16);
        assert!(!p.is_null());
        // SAFETY: `p` is a 40-byte arena block.
        unsafe {
            std::ptr::write_bytes(p.cast::<u8>(), 7, 40);
            assert_eq!(malloc_usable_size(p), 40);
            // glibc's free on an arena address would abort ("free():
            // invalid pointer"): these must not get there.
            free(p);
            let q = realloc(p, 100).cast::<u8>();
            assert!(!q.is_null() && !BOOT.contains(q.cast()));
            assert!((0..40).all(|i| *q.add(i) == 7));
            free(q.cast());
            let q = reallocarray(p, 2, 10).cast::<u8>();
            assert!((0..20).all(|i| *q.add(i) == 7));
            free(q.cast());
        }
    }
}
