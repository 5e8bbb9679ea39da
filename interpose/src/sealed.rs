//! Sealed calls: a C library call the tracer makes on the program's thread
//! whose allocations all end before it returns (`pthread_getattr_np` with
//! its `pthread_attr_destroy`: the thread's CPU set and the attribute's
//! extension). Those allocations reach the exported functions; outside a
//! sealed call they would go to the program's allocator and leave their
//! freed blocks in the program's arena and thread cache, where the
//! program's next blocks of that size would be taken from them instead of
//! where they come from untraced. In a sealed call `malloc`, `calloc` and
//! `realloc` of the calling thread are served from a small static arena
//! instead (`next_alloc.rs` asks [`serve`] first while any thread is in
//! one), and `free`, `realloc` and `malloc_usable_size` know its blocks by
//! their address, whichever thread passes them.
//!
//! The arena (`arena.rs`) starts over when its last live block is given
//! back, so it never fills up however many threads start; a call that
//! finds it full is served by the program's allocator as before.
//!
//! A *kept* call ([`call_kept`]) is one whose blocks outlive it, for the
//! tracer's own lasting use: the start of the collector thread, whose
//! thread vector (DTV) glibc allocates with `calloc` and keeps as long as
//! the thread lives. Its blocks come from a second arena that never starts
//! over. Before, that block was the first of the program's heap, and every
//! block of the program lay 304 bytes further on than untraced.

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::arena::Arena;
use crate::next_alloc::MIN_ALIGN;

/// Bytes of the arena (`.bss`: pages cost nothing until used).
const BYTES: usize = 16 << 10;

static ARENA: Arena<BYTES> = Arena::new();

/// The kept calls' arena (a thread vector of glibc's is 16 bytes per TLS
/// module and some spare: 304 bytes with a dozen modules), as large as the
/// other so that one type serves both; `.bss` pages cost nothing unused.
static KEPT: Arena<BYTES> = Arena::new();

/// Threads inside a sealed or kept call (the exported functions' cheap test).
static SEALED: AtomicUsize = AtomicUsize::new(0);

/// What the calling thread is inside.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Inside {
    Nothing,
    Sealed,
    Kept,
}

thread_local! {
    // `const`, no destructor: usable at any time, like the guard's flag.
    static INSIDE: Cell<Inside> = const { Cell::new(Inside::Nothing) };
}

/// Run `f`, a library call whose allocations are all freed before it
/// returns, with the calling thread's `malloc`, `calloc` and `realloc`
/// served from the arena.
pub fn call<R>(f: impl FnOnce() -> R) -> R {
    enter(Inside::Sealed, f)
}

/// Run `f`, a library call that allocates blocks the tracer keeps (the
/// collector thread's start), with the calling thread's `malloc`, `calloc`
/// and `realloc` served from the kept arena.
pub fn call_kept<R>(f: impl FnOnce() -> R) -> R {
    enter(Inside::Kept, f)
}

fn enter<R>(what: Inside, f: impl FnOnce() -> R) -> R {
    let was = INSIDE.try_with(|i| i.replace(what)).ok();
    SEALED.fetch_add(1, Ordering::AcqRel);
    let r = f();
    SEALED.fetch_sub(1, Ordering::AcqRel);
    if let Some(was) = was {
        let _ = INSIDE.try_with(|i| i.set(was));
    }
    r
}

/// The arena the calling thread's call is served from, if any.
fn serving() -> Option<&'static Arena<BYTES>> {
    match INSIDE.try_with(|i| i.get()).unwrap_or(Inside::Nothing) {
        Inside::Nothing => None,
        Inside::Sealed => Some(&ARENA),
        Inside::Kept => Some(&KEPT),
    }
}

/// The arena a block of either belongs to.
fn owner(p: *mut c_void) -> &'static Arena<BYTES> {
    if ARENA.contains(p) {
        &ARENA
    } else {
        &KEPT
    }
}

/// In a forked child: only the forking thread lives on, and it was not in
/// a sealed call (none forks); another thread's call ended with it, and its
/// blocks, known to nobody in the child, are never freed. Starts over.
pub fn after_fork_child() {
    SEALED.store(0, Ordering::Release);
    ARENA.reset();
    let _ = INSIDE.try_with(|i| i.set(Inside::Nothing));
}

/// Whether some thread is inside a sealed call (one relaxed load: what
/// every `malloc` pays).
#[inline(always)]
pub fn active() -> bool {
    SEALED.load(Ordering::Relaxed) != 0
}

/// A block of `size` bytes (zeroed) for the calling thread if it is inside
/// a sealed call and the arena has room; `None`: serve it as usual.
#[cold]
#[inline(never)]
pub fn serve(size: usize) -> Option<*mut c_void> {
    alloc(serving()?, size)
}

/// Is `p` a block of either arena? (NULL is not.)
#[inline(always)]
pub fn contains(p: *mut c_void) -> bool {
    ARENA.contains(p) || KEPT.contains(p)
}

/// A zeroed block (the arena's bytes are not zero once it has started over).
fn alloc(arena: &Arena<BYTES>, size: usize) -> Option<*mut c_void> {
    let p = arena.try_alloc(size, MIN_ALIGN)?;
    // SAFETY: a fresh block of `size` bytes.
    unsafe { std::ptr::write_bytes(p.cast::<u8>(), 0, size) };
    Some(p)
}

/// The size `p` was allocated with.
///
/// # Safety
/// `p` is a live block of either arena.
pub unsafe fn size_of(p: *mut c_void) -> usize {
    // SAFETY: the caller's contract.
    unsafe { owner(p).size_of(p) }
}

/// Give back `p`, a block of either arena.
pub fn free(p: *mut c_void) {
    owner(p).release(p);
}

/// `realloc` of `p`, a live block of either arena, to `size` bytes: in the
/// arena of the calling thread's sealed or kept call, else (and when that
/// arena is full) by `elsewhere`, the program's allocator; the content
/// moves, and `p` is given back unless the new block could not be had.
///
/// # Safety
/// `p` is a live block of either arena.
pub unsafe fn realloc(
    p: *mut c_void,
    size: usize,
    elsewhere: impl FnOnce(usize) -> *mut c_void,
) -> *mut c_void {
    let q = match serving() {
        Some(arena) => alloc(arena, size).unwrap_or_else(|| elsewhere(size)),
        None => elsewhere(size),
    };
    if !q.is_null() {
        // SAFETY: `p` holds `size_of(p)` bytes, `q` at least `size`; the
        // blocks are distinct (`p` is still live).
        unsafe {
            let n = size_of(p).min(size);
            std::ptr::copy_nonoverlapping(p.cast::<u8>(), q.cast::<u8>(), n);
        }
        free(p);
    }
    q
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The arena is shared by every test in this process: one test. (Other
    /// tests make sealed calls too, `OwnStack::current`, but outside a
    /// preloaded process their allocations do not come here.)
    #[test]
    fn blocks_are_served_inside_only_and_the_arena_starts_over() {
        assert!(serve(32).is_none(), "outside a sealed call");
        let (a, b, c) = call(|| {
            assert!(active());
            let a = serve(32).unwrap();
            let b = serve(100).unwrap();
            // SAFETY: live blocks of the arena, written within their sizes.
            unsafe {
                assert_eq!(size_of(a), 32);
                assert_eq!(size_of(b), 100);
                std::ptr::write_bytes(a.cast::<u8>(), 0xab, 32);
                std::ptr::write_bytes(b.cast::<u8>(), 0xcd, 100);
            }
            assert_eq!(a as usize % MIN_ALIGN, 0);
            assert!((b as usize) >= a as usize + 32, "disjoint");
            // Grown in the arena, the content kept.
            // SAFETY: `a` is live.
            let c = unsafe { realloc(a, 64, |_| std::ptr::null_mut()) };
            assert!(contains(c) && c != a);
            // SAFETY: `c` holds 64 bytes, the first 32 copied, the rest zero.
            let bytes = unsafe { std::slice::from_raw_parts(c.cast::<u8>(), 64) };
            assert!(bytes[..32].iter().all(|&x| x == 0xab));
            assert!(bytes[32..].iter().all(|&x| x == 0));
            (a, b, c)
        });
        assert!(contains(a) && contains(b) && !contains(std::ptr::null_mut()));
        free(b);
        free(c);
        // Every block given back: the next one is the first again, zeroed.
        let d = call(|| serve(48).unwrap());
        assert_eq!(d, a);
        // SAFETY: `d` holds 48 bytes.
        assert!(unsafe { std::slice::from_raw_parts(d.cast::<u8>(), 48) }
            .iter()
            .all(|&x| x == 0));
        // Outside a sealed call a realloc moves the block out.
        let mut out = [0u8; 64];
        // SAFETY: `d` is live; `out` has room for 64 bytes.
        let e = unsafe { realloc(d, 64, |_| out.as_mut_ptr().cast()) };
        assert_eq!(e, out.as_mut_ptr().cast());
        // A full arena: served as usual.
        let none = call(|| serve(BYTES));
        assert!(none.is_none());
        assert!(ARENA.is_empty(), "nothing live");
    }
}
