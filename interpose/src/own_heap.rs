//! The tracer's own heap: where its Rust allocations live (`OwnHeap`, the
//! library's global allocator), on pages of its own, never among the
//! program's blocks in glibc's heap.
//!
//! glibc's heap was where they lived before, and it was no neutral place: a
//! block the tracer kept there (a per-thread table that grew while the
//! program ran) sat above the program's working blocks and changed how glibc
//! served the program from then on. In the stress benchmark the program's
//! frees began to merge with free neighbours instead of the top chunk, and
//! glibc's `_int_free` and `unlink_chunk` took 17 times their untraced share
//! of the run (1145 against 68 perf samples). Here the program's heap holds
//! only the program's blocks, as without the tracer: glibc gives the program
//! the same blocks at the same offsets, in the same order
//! (`tests/tests/own_heap.rs`).
//!
//! - Blocks of up to [`MAX_SMALL`] bytes come in power-of-two classes,
//!   carved from spans mapped for one class each and kept on that class's
//!   free list once freed (the tracer allocates when its tables grow, not per
//!   event: a few hundred blocks in a run).
//! - Larger blocks are a mapping each, moved by `mremap` as they grow.
//! - One spin lock serialises the classes; the atfork handlers take it
//!   last and release it first (`lifecycle`), so a child never inherits it
//!   held.
//! - When the system refuses a mapping, the block comes from the emergency
//!   reserve (`reserve`); while the SIGTERM or crash handler writes the
//!   profile, from the handler arena.
//!
//! It also counts the bytes the tracer's allocations hold and their peak:
//! the share of the process's resident memory that is the tracer's heap,
//! which the report states beside the process's peak.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::lock::RawSpin;

/// The smallest class.
const MIN_SHIFT: u32 = 4;
/// The largest class; larger blocks get a mapping each.
const MAX_SHIFT: u32 = 15;
const MAX_SMALL: usize = 1 << MAX_SHIFT;
const CLASSES: usize = (MAX_SHIFT - MIN_SHIFT + 1) as usize;
/// Bytes mapped at once for a class (at least four of its blocks).
const SPAN: usize = 64 << 10;
const PAGE: usize = 4096;

#[derive(Clone, Copy)]
struct Class {
    /// The first freed block (its first word links the next); 0: none.
    free: usize,
    /// The next never-used block of the class's current span, and its end.
    next: usize,
    end: usize,
}

struct Heap {
    lock: RawSpin,
    classes: UnsafeCell<[Class; CLASSES]>,
}

// SAFETY: `classes` is only touched with `lock` held.
unsafe impl Sync for Heap {}

static HEAP: Heap = Heap {
    lock: RawSpin::new(),
    classes: UnsafeCell::new(
        [Class {
            free: 0,
            next: 0,
            end: 0,
        }; CLASSES],
    ),
};

/// The class that holds `size` bytes aligned to `align`, or None for a
/// block of its own mapping.
fn class_of(size: usize, align: usize) -> Option<usize> {
    let need = size.max(align).max(1 << MIN_SHIFT);
    if need > MAX_SMALL || align > PAGE {
        return None;
    }
    Some((need.next_power_of_two().trailing_zeros() - MIN_SHIFT) as usize)
}

fn class_bytes(class: usize) -> usize {
    1 << (class as u32 + MIN_SHIFT)
}

fn pages(size: usize) -> usize {
    size.max(1).div_ceil(PAGE) * PAGE
}

/// `len` fresh bytes of anonymous memory, or None.
fn map(len: usize) -> Option<usize> {
    // SAFETY: an anonymous private mapping; no existing memory is affected.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    (p != libc::MAP_FAILED).then_some(p as usize)
}

/// Remove a mapping of ours.
fn unmap(at: usize, len: usize) {
    // SAFETY: [at, at + len) is a mapping (or the part of one) this module
    // made and nothing refers to any more.
    unsafe { libc::munmap(at as *mut libc::c_void, len) };
}

/// A block of class `class` (uninitialised if reused), or 0.
fn small_alloc(class: usize) -> usize {
    let bytes = class_bytes(class);
    HEAP.lock.lock();
    // SAFETY: the lock is held.
    let c = unsafe { &mut (*HEAP.classes.get())[class] };
    let p = if c.free != 0 {
        let p = c.free;
        // SAFETY: a freed block of ours holds the next one's address in its
        // first word (`small_free`).
        c.free = unsafe { *(p as *const usize) };
        p
    } else {
        if c.next == c.end {
            let span = SPAN.max(4 * bytes);
            match map(span) {
                Some(at) => {
                    c.next = at;
                    c.end = at + span;
                }
                None => {
                    HEAP.lock.unlock();
                    return 0;
                }
            }
        }
        let p = c.next;
        c.next += bytes;
        p
    };
    HEAP.lock.unlock();
    p
}

fn small_free(class: usize, p: usize) {
    HEAP.lock.lock();
    // SAFETY: the lock is held; `p` is a block of `class` that its owner
    // gave back, so its first word is ours to link the list with.
    unsafe {
        let c = &mut (*HEAP.classes.get())[class];
        *(p as *mut usize) = c.free;
        c.free = p;
    }
    HEAP.lock.unlock();
}

/// A mapping of its own for `size` bytes aligned to `align`, or 0.
fn large_alloc(size: usize, align: usize) -> usize {
    let len = pages(size);
    if align <= PAGE {
        return map(len).unwrap_or(0);
    }
    // Map more and trim to the alignment.
    let Some(total) = len.checked_add(align) else {
        return 0;
    };
    let Some(at) = map(total) else { return 0 };
    let start = (at + align - 1) & !(align - 1);
    if start > at {
        unmap(at, start - at);
    }
    let tail = at + total - (start + len);
    if tail > 0 {
        unmap(start + len, tail);
    }
    start
}

/// `size` bytes aligned to `align` from the tracer's own pages: null if the
/// system has none to give. `zeroed`: filled with zeros.
fn alloc(size: usize, align: usize, zeroed: bool) -> *mut u8 {
    match class_of(size, align) {
        Some(class) => {
            let p = small_alloc(class) as *mut u8;
            if zeroed && !p.is_null() {
                // SAFETY: the block holds at least `size` bytes.
                unsafe { std::ptr::write_bytes(p, 0, size) };
            }
            p
        }
        // Fresh mappings are zero-filled.
        None => large_alloc(size, align) as *mut u8,
    }
}

fn free(p: *mut u8, size: usize, align: usize) {
    match class_of(size, align) {
        Some(class) => small_free(class, p as usize),
        None => unmap(p as usize, pages(size)),
    }
}

/// Grow or shrink in place where the block allows (same class; a mapping
/// moved by `mremap`): the new address, or null to copy instead.
fn resize(p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
    let align = layout.align();
    match (class_of(layout.size(), align), class_of(new_size, align)) {
        (Some(a), Some(b)) if a == b => p,
        (None, None) if align <= PAGE => {
            let (old, new) = (pages(layout.size()), pages(new_size));
            if old == new {
                return p;
            }
            // SAFETY: `p` is a whole mapping of ours of `old` bytes, which
            // nothing else refers to: moved, it is used at its new address
            // only; on failure it stays as it was (the caller copies).
            let q = unsafe {
                libc::mremap(
                    p.cast(),
                    old,
                    new,
                    libc::MREMAP_MAYMOVE,
                    std::ptr::null_mut::<u8>(),
                )
            };
            if q == libc::MAP_FAILED {
                std::ptr::null_mut()
            } else {
                q.cast()
            }
        }
        _ => std::ptr::null_mut(),
    }
}

/// A block for `layout`, zero-filled if `zeroed`: from the handler arena
/// while the SIGTERM or crash handler works, else from our pages, else from
/// the emergency reserve (the program exhausted memory: do not abort it for
/// our sake). Arena and reserve pages are fresh and never reused: already
/// zero.
fn give(layout: Layout, zeroed: bool) -> *mut u8 {
    if crate::reserve::handler_on() {
        return crate::reserve::handler_alloc(layout.size(), layout.align());
    }
    let p = alloc(layout.size(), layout.align(), zeroed);
    if p.is_null() {
        return crate::reserve::emergency_alloc(layout.size(), layout.align());
    }
    grew(layout.size());
    p
}

/// The global allocator of the library: the tracer's Rust allocations, which
/// never go through the exported `malloc`, so they are never traced and
/// never re-enter the hooks.
pub struct OwnHeap;

// SAFETY: every block is a distinct, live range of our own mappings of at
// least the layout's size, aligned as asked (classes are powers of two at
// least as large as the alignment, carved from page-aligned spans; larger
// alignments get a trimmed mapping), until it is given back; reserve blocks
// (emergency, handler arena) are never reused.
unsafe impl GlobalAlloc for OwnHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        give(layout, false)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        give(layout, true)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // Inside the SIGTERM handler nothing is given back (the process is
        // about to die); reserve blocks never are.
        if crate::reserve::handler_on() || crate::reserve::contains(ptr as usize) {
            return;
        }
        shrank(layout.size());
        free(ptr, layout.size(), layout.align());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !crate::reserve::handler_on() && !crate::reserve::contains(ptr as usize) {
            let q = resize(ptr, layout, new_size);
            if !q.is_null() {
                shrank(layout.size());
                grew(new_size);
                return q;
            }
        }
        // SAFETY: allocate, copy the smaller size, free the old block (a
        // reserve block stays where it is).
        unsafe {
            let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
            let p = self.alloc(new_layout);
            if !p.is_null() {
                std::ptr::copy_nonoverlapping(ptr, p, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            p
        }
    }
}

/// The MPI side library's allocations (`exports::wmhcct_heap_alloc`).
///
/// # Safety
/// As for [`GlobalAlloc::alloc`].
pub unsafe fn alloc_for_side(size: usize, align: usize, zeroed: bool) -> *mut u8 {
    let Ok(layout) = Layout::from_size_align(size, align) else {
        return std::ptr::null_mut();
    };
    give(layout, zeroed)
}

/// # Safety
/// As for [`GlobalAlloc::dealloc`].
pub unsafe fn dealloc_for_side(ptr: *mut u8, size: usize, align: usize) {
    // SAFETY: the caller's block, of this layout (the caller's contract).
    unsafe {
        OwnHeap.dealloc(ptr, Layout::from_size_align_unchecked(size, align));
    }
}

/// # Safety
/// As for [`GlobalAlloc::realloc`].
pub unsafe fn realloc_for_side(ptr: *mut u8, size: usize, align: usize, new: usize) -> *mut u8 {
    // SAFETY: the caller's block, of this layout (the caller's contract).
    unsafe { OwnHeap.realloc(ptr, Layout::from_size_align_unchecked(size, align), new) }
}

/// Take the heap's lock before `fork` (after the tracer's other locks:
/// their holders may allocate), so the child does not inherit it held by a
/// thread it does not have.
pub fn lock_for_fork() {
    HEAP.lock.lock();
}

/// Release it in the parent and the child, before anything allocates.
pub fn unlock_after_fork() {
    HEAP.lock.unlock();
}

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// `bytes` more are held.
#[inline]
pub fn grew(bytes: usize) {
    let now = LIVE.fetch_add(bytes, Ordering::Relaxed).wrapping_add(bytes);
    if now > PEAK.load(Ordering::Relaxed) {
        PEAK.fetch_max(now, Ordering::Relaxed);
    }
}

/// `bytes` fewer are held.
#[inline]
pub fn shrank(bytes: usize) {
    LIVE.fetch_sub(bytes, Ordering::Relaxed);
}

/// The most bytes held at once so far.
pub fn peak() -> u64 {
    PEAK.load(Ordering::Relaxed) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_follows_the_high_water_mark() {
        // The test binary's allocations go through the tracer's allocator
        // too, concurrently; a fake 1 TiB block stands far above them.
        const TIB: usize = 1 << 40;
        grew(TIB);
        assert!(peak() >= TIB as u64);
        shrank(TIB);
        assert!(LIVE.load(Ordering::Relaxed) < TIB);
        assert!(peak() >= TIB as u64, "a peak stays");
    }

    #[test]
    fn classes_hold_the_size_at_the_alignment() {
        assert_eq!(class_of(1, 1), Some(0));
        assert_eq!(class_of(16, 8), Some(0));
        assert_eq!(class_of(17, 8), Some(1));
        assert_eq!(class_of(8, 64), Some(2), "alignment above the size");
        assert_eq!(class_of(MAX_SMALL, 16), Some(CLASSES - 1));
        assert_eq!(class_of(MAX_SMALL + 1, 16), None);
        assert_eq!(class_of(64, 8192), None, "beyond a page: a mapping");
    }

    /// A byte pattern of block `i` at offset `j`.
    fn mark(i: usize, j: usize) -> u8 {
        (i.wrapping_mul(131) ^ j.wrapping_mul(7)) as u8
    }

    fn check(p: *const u8, size: usize, i: usize) {
        for j in (0..size).step_by(size / 16 + 1) {
            // SAFETY: `p` holds `size` bytes.
            assert_eq!(unsafe { *p.add(j) }, mark(i, j), "block {i} byte {j}");
        }
    }

    fn fill(p: *mut u8, size: usize, i: usize) {
        for j in 0..size {
            // SAFETY: `p` holds `size` bytes.
            unsafe { *p.add(j) = mark(i, j) };
        }
    }

    #[test]
    fn blocks_are_aligned_disjoint_and_keep_their_bytes() {
        let h = OwnHeap;
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut live: Vec<(*mut u8, Layout, usize)> = Vec::new();
        for i in 0..4000 {
            let r = next();
            if r % 3 == 0 && !live.is_empty() {
                let (p, l, k) = live.swap_remove((r >> 8) as usize % live.len());
                check(p, l.size(), k);
                // SAFETY: allocated by `h` with `l`.
                unsafe { h.dealloc(p, l) };
                continue;
            }
            let size = match r % 7 {
                0 => 1 + (r >> 20) as usize % 8,
                1..=4 => 1 + (r >> 20) as usize % 4096,
                5 => 1 + (r >> 20) as usize % (2 * MAX_SMALL),
                _ => MAX_SMALL + (r >> 20) as usize % (1 << 18),
            };
            let align = 1usize << ((r >> 40) % 14);
            let l = Layout::from_size_align(size, align).unwrap();
            // SAFETY: a non-zero size.
            let p = unsafe {
                if r & 1 << 50 != 0 {
                    h.alloc_zeroed(l)
                } else {
                    h.alloc(l)
                }
            };
            assert!(!p.is_null());
            assert_eq!(p as usize % align, 0, "size {size} align {align}");
            if r & 1 << 50 != 0 {
                // SAFETY: `p` holds `size` bytes.
                assert!((0..size).all(|j| unsafe { *p.add(j) } == 0));
            }
            fill(p, size, i);
            live.push((p, l, i));
        }
        // Every live block still holds its own pattern: none overlaps
        // another.
        for &(p, l, k) in &live {
            check(p, l.size(), k);
        }
        for (p, l, _) in live {
            // SAFETY: allocated by `h` with `l`.
            unsafe { h.dealloc(p, l) };
        }
    }

    #[test]
    fn realloc_keeps_the_content_across_classes_and_mappings() {
        let h = OwnHeap;
        let mut l = Layout::from_size_align(10, 8).unwrap();
        // SAFETY: a non-zero size.
        let mut p = unsafe { h.alloc(l) };
        fill(p, 10, 1);
        let mut filled = 10;
        for size in [
            12,
            100,
            5000,
            MAX_SMALL,
            MAX_SMALL + 1,
            300_000,
            5 << 20,
            70_000,
            40,
            3,
        ] {
            // SAFETY: `p` was allocated by `h` with `l`.
            p = unsafe { h.realloc(p, l, size) };
            assert!(!p.is_null());
            assert_eq!(p as usize % 8, 0);
            let kept = filled.min(size);
            check(p, kept, 1);
            fill(p, size, 1);
            filled = size;
            l = Layout::from_size_align(size, 8).unwrap();
        }
        // SAFETY: allocated by `h` with `l`.
        unsafe { h.dealloc(p, l) };
    }

    #[test]
    fn threads_allocate_at_once() {
        let hs: Vec<_> = (0..4)
            .map(|t| {
                std::thread::spawn(move || {
                    let mut v: Vec<Vec<u64>> = Vec::new();
                    for i in 0..20_000u64 {
                        v.push(vec![i ^ t; (i % 97) as usize + 1]);
                        if i % 3 == 0 {
                            v.swap_remove((i as usize * 7) % v.len());
                        }
                    }
                    v.iter().all(|b| b.iter().all(|&x| x == b[0]))
                })
            })
            .collect();
        for h in hs {
            assert!(h.join().unwrap());
        }
    }
}
