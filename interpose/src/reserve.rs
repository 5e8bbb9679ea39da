//! Memory for the tracer's own Rust allocations when its own heap
//! (`own_heap`) cannot be used.
//!
//! Two bump regions of anonymous `MAP_NORESERVE` memory (address space;
//! pages count only once touched), never given back:
//! - the **emergency reserve**, mapped when the tracer starts: used when
//!   the system refuses the tracer's heap a mapping because the program
//!   exhausted memory
//!   (`ulimit -v`, a cgroup limit). Without it the tracer's failing
//!   allocation would abort the program, which would itself have handled
//!   ENOMEM. Its size is [`EMERGENCY_BYTES`] (less if the address space is
//!   already that tight at start-up).
//! - the **handler arena**, mapped by the SIGTERM handler (`signals`): while
//!   it writes the profile, the thread may have been interrupted inside
//!   glibc's allocator or the tracer's heap, which must not be re-entered.
//!
//! Blocks of either region are never freed (`contains` tells
//! `own_heap::OwnHeap` to skip them); both are small next to what the
//! program had.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Address space kept for the tracer when the program exhausts memory.
pub const EMERGENCY_BYTES: usize = 32 << 20;

/// One bump region: [base, end), next free address `next`.
pub struct Region {
    base: AtomicUsize,
    end: AtomicUsize,
    next: AtomicUsize,
}

impl Region {
    const fn new() -> Region {
        Region {
            base: AtomicUsize::new(0),
            end: AtomicUsize::new(0),
            next: AtomicUsize::new(0),
        }
    }

    /// Map the region with the first size in `sizes` that the address space
    /// allows. Does nothing if it is already mapped. Returns whether it is.
    fn map(&self, sizes: &[usize]) -> bool {
        if self.base.load(Ordering::Acquire) != 0 {
            return true;
        }
        for &len in sizes {
            // SAFETY: an anonymous private mapping; no existing memory is
            // affected.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                let base = p as usize;
                self.next.store(base, Ordering::Release);
                self.end.store(base + len, Ordering::Release);
                self.base.store(base, Ordering::Release);
                return true;
            }
        }
        false
    }

    #[inline(always)]
    fn contains(&self, p: usize) -> bool {
        let base = self.base.load(Ordering::Relaxed);
        base != 0 && p >= base && p < self.end.load(Ordering::Relaxed)
    }

    /// `size` bytes aligned to `align` (a power of two), zeroed (fresh
    /// pages, never reused); null when the region is exhausted or unmapped.
    fn alloc(&self, size: usize, align: usize) -> *mut u8 {
        if self.base.load(Ordering::Acquire) == 0 {
            return std::ptr::null_mut();
        }
        let end = self.end.load(Ordering::Acquire);
        let mut cur = self.next.load(Ordering::Relaxed);
        loop {
            let Some(start) = cur.checked_add(align - 1).map(|v| v & !(align - 1)) else {
                return std::ptr::null_mut();
            };
            let Some(next) = start.checked_add(size.max(1)) else {
                return std::ptr::null_mut();
            };
            if next > end {
                return std::ptr::null_mut();
            }
            match self
                .next
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return start as *mut u8,
                Err(v) => cur = v,
            }
        }
    }
}

static EMERGENCY: Region = Region::new();
static HANDLER: Region = Region::new();
/// The tracer's allocations go to the handler arena (SIGTERM handler).
static HANDLER_ON: AtomicBool = AtomicBool::new(false);
/// The one message about the emergency reserve was printed.
static WARNED: AtomicBool = AtomicBool::new(false);

/// Address space the tracer wants free when it starts: the emergency
/// reserve and 4 MiB for what it sets up inline (the collector, the
/// thread's tracer stack). An optional collector thread is not counted: it
/// does without when it cannot start. Kept close to what the tracer maps,
/// since the probe is the process's peak address space (`VmPeak`) there.
pub const START_ROOM: usize = EMERGENCY_BYTES + (4 << 20);

/// Whether [`START_ROOM`] bytes of address space are free now (a mapping of
/// that size, made and removed at once). False under an address-space
/// limit (`ulimit -v`) the program has all but used up, where starting
/// would leave the tracer to fail its first allocations.
pub fn room_to_start() -> bool {
    // SAFETY: an anonymous private mapping, removed right away; no
    // existing memory is affected.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            START_ROOM,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            return false;
        }
        libc::munmap(p, START_ROOM);
    }
    true
}

/// The soft address-space limit in KiB (`ulimit -v`), if there is one.
pub fn address_space_limit_kib() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut r) } == 0;
    (ok && r.rlim_cur != libc::RLIM_INFINITY).then_some(r.rlim_cur / 1024)
}

/// Map the emergency reserve (at tracer start-up).
pub fn map_emergency() {
    EMERGENCY.map(&[EMERGENCY_BYTES, EMERGENCY_BYTES / 4, EMERGENCY_BYTES / 16]);
}

/// Route the tracer's allocations to the handler arena (`true`) or back to
/// its heap. Returns whether the arena is in use (it may not be mappable).
pub fn handler_arena(on: bool) -> bool {
    let ok = on && HANDLER.map(&[1 << 32, 1 << 30, 1 << 28, 1 << 26, 1 << 24]);
    HANDLER_ON.store(ok, Ordering::Release);
    ok
}

/// Are the tracer's allocations routed to the handler arena?
#[inline(always)]
pub fn handler_on() -> bool {
    HANDLER_ON.load(Ordering::Relaxed)
}

/// A block from the handler arena.
pub fn handler_alloc(size: usize, align: usize) -> *mut u8 {
    HANDLER.alloc(size, align)
}

/// Is `p` a block of one of the regions (never given back)?
#[inline(always)]
pub fn contains(p: usize) -> bool {
    EMERGENCY.contains(p) || HANDLER.contains(p)
}

/// The tracer's heap got no memory from the system: a block from the emergency reserve
/// (null when it cannot hold it: the caller either copes, as the
/// live-block table does by not growing, or the allocation error aborts
/// with Rust's own line). Says once on stderr that the reserve is in use.
#[cold]
pub fn emergency_alloc(size: usize, align: usize) -> *mut u8 {
    let p = EMERGENCY.alloc(size, align);
    if !p.is_null() && !WARNED.swap(true, Ordering::Relaxed) {
        crate::diag::message(&[
            "memory is exhausted: the tracer continues from its emergency reserve \
             (the program's allocations are unaffected)",
        ]);
    }
    p
}
