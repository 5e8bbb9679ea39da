//! A static bump arena: blocks carved from a fixed buffer in `.bss`, for
//! the allocator calls the next allocator must not serve. Two use it: the
//! bootstrap arena (`next_alloc.rs`: calls made while the next allocator
//! is being looked up, whose blocks are never given back, so they stay zero
//! until written) and the sealed calls' arena (`sealed.rs`: blocks all
//! given back soon, after which the arena starts over).
//!
//! Each block is preceded by a word holding its size. The bump offset and
//! the number of live blocks share one atomic word: blocks are carved out
//! by a compare-and-swap of it, and the offset goes back to the start when
//! the last live block is given back. No lock: a fork or a signal at any
//! point leaves nothing held.

use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::next_alloc::MIN_ALIGN;

#[repr(C, align(4096))]
pub struct Arena<const LEN: usize> {
    bytes: UnsafeCell<[u8; LEN]>,
    /// Bump offset (low 32 bits) and live blocks (high 32 bits).
    state: AtomicU64,
}

// SAFETY: blocks are carved out by a compare-and-swap of `state`, so no two
// callers get overlapping bytes, and a block's bytes are its owner's until
// it is given back; the offset goes back to 0 only when no block is live.
unsafe impl<const LEN: usize> Sync for Arena<LEN> {}

impl<const LEN: usize> Arena<LEN> {
    /// An empty arena (`LEN` below 4 GiB: the offset takes 32 bits).
    pub const fn new() -> Self {
        assert!(LEN < 1 << 32);
        Arena {
            bytes: UnsafeCell::new([0; LEN]),
            state: AtomicU64::new(0),
        }
    }

    #[inline(always)]
    fn base(&self) -> usize {
        self.bytes.get() as usize
    }

    /// Is `p` inside the arena? (NULL is not.)
    #[inline(always)]
    pub fn contains(&self, p: *mut c_void) -> bool {
        (p as usize).wrapping_sub(self.base()) < LEN
    }

    /// `size` bytes aligned to `align` (a power of two); `None` when the
    /// arena has no room. Zero unless the arena has started over.
    pub fn try_alloc(&self, size: usize, align: usize) -> Option<*mut c_void> {
        let align = align.max(MIN_ALIGN);
        let base = self.base();
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            let (used, live) = (state as u32 as usize, state >> 32);
            // Room for the size word before the block, then align.
            let start = (base + used + std::mem::size_of::<usize>()).checked_add(align - 1)?;
            let start = start & !(align - 1);
            let end = start.checked_add(size.max(1))?;
            if end - base > LEN {
                return None;
            }
            let next = ((live + 1) << 32) | (end - base) as u64;
            match self
                .state
                .compare_exchange_weak(state, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => {
                    // SAFETY: [start - 8, end) lies in the arena and is this
                    // caller's alone (the bump offset moved past it, and goes
                    // back only when no block is live); `start` is 16-aligned,
                    // so the size word is aligned.
                    unsafe { *((start - std::mem::size_of::<usize>()) as *mut usize) = size };
                    return Some(start as *mut c_void);
                }
                Err(now) => state = now,
            }
        }
    }

    /// [`Arena::try_alloc`], or NULL with errno ENOMEM (as `malloc`).
    pub fn alloc(&self, size: usize, align: usize) -> *mut c_void {
        self.try_alloc(size, align).unwrap_or_else(|| {
            crate::errno::set(libc::ENOMEM);
            std::ptr::null_mut()
        })
    }

    /// The size a block was allocated with.
    ///
    /// # Safety
    /// `p` is a live block of this arena.
    pub unsafe fn size_of(&self, p: *mut c_void) -> usize {
        // SAFETY: `alloc` wrote the size in the word before the block.
        unsafe { *(p as *const usize).sub(1) }
    }

    /// Give a block back: with the last live one, the arena starts over.
    pub fn release(&self, _p: *mut c_void) {
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            let live = state >> 32;
            if live == 0 {
                // A double free: nothing to count.
                return;
            }
            let next = if live == 1 {
                0
            } else {
                ((live - 1) << 32) | (state & 0xffff_ffff)
            };
            match self
                .state
                .compare_exchange_weak(state, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(now) => state = now,
            }
        }
    }

    /// Start over whatever is live (a forked child, whose other threads'
    /// blocks are gone with them).
    pub fn reset(&self) {
        self.state.store(0, Ordering::Release);
    }

    /// No block is live and the arena is at its start.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.state.load(Ordering::Relaxed) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errno;

    #[test]
    fn arena_blocks_are_aligned_sized_zero_and_disjoint() {
        static A: Arena<8192> = Arena::new();
        let mut blocks = Vec::new();
        for (size, align) in [(1, 1), (100, 16), (0, 8), (300, 64), (10, 4096), (33, 32)] {
            let p = A.alloc(size, align);
            assert!(!p.is_null(), "{size} {align}");
            assert!(A.contains(p));
            assert_eq!(p as usize % align.max(MIN_ALIGN), 0, "{size} {align}");
            // SAFETY: `p` is a block of A.
            assert_eq!(unsafe { A.size_of(p) }, size);
            // SAFETY: the block holds `size` bytes.
            let bytes = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), size) };
            assert!(bytes.iter().all(|&b| b == 0));
            blocks.push((p as usize, size.max(1)));
        }
        blocks.sort();
        for w in blocks.windows(2) {
            assert!(w[0].0 + w[0].1 <= w[1].0, "{blocks:?}");
        }
        assert!(!A.contains(std::ptr::null_mut()));
        let outside = (A.base() + 8192) as *mut c_void;
        assert!(!A.contains(outside));
        assert!(!A.contains(Box::into_raw(Box::new(0u64)).cast()));
    }

    #[test]
    fn arena_exhaustion_is_null_with_enomem() {
        static A: Arena<4096> = Arena::new();
        errno::set(0);
        assert!(A.alloc(5000, 16).is_null());
        assert_eq!(errno::get(), libc::ENOMEM);
        assert!(A.alloc(usize::MAX - 8, 16).is_null());
        let mut n = 0;
        while !A.alloc(100, 16).is_null() {
            n += 1;
        }
        // 100 bytes + the size word, aligned to 16: 112 bytes a block.
        assert_eq!(n, 4096 / 112);
        assert_eq!(errno::get(), libc::ENOMEM);
    }

    #[test]
    fn arena_is_shared_safely_between_threads() {
        static A: Arena<65536> = Arena::new();
        let all: Vec<Vec<usize>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| s.spawn(|| (0..100).map(|_| A.alloc(48, 16) as usize).collect()))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut v: Vec<usize> = all.into_iter().flatten().collect();
        assert!(v.iter().all(|&p| p != 0));
        v.sort();
        v.dedup();
        assert_eq!(v.len(), 400);
        assert!(v.windows(2).all(|w| w[1] - w[0] >= 48));
    }
}
