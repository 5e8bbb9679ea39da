//! Reading the program's stack memory during a capture.
//!
//! A capture reads return addresses and saved registers above the capture
//! point. On the thread's own stack the bounds are known (`OwnStack`): from
//! the capture point up to the top of the stack, all mapped. A thread can
//! also run on a stack of its program's making: a coroutine's or user-level
//! thread's (`makecontext`, Boost.Context, Argobots, Qthreads), or a signal
//! handler's alternate stack. Where such a stack ends is not known, and
//! above its last frame may lie a hole or another stack's guard page, where
//! a plain read would kill the program. There, `SwitchedStack` reads only
//! pages the kernel has said are readable: `process_vm_readv` on the process
//! itself, one byte per page, fails where a read would fault.
//!
//! `makecontext_root` finds the return address glibc's `makecontext` plants
//! under a coroutine's entry function, which marks that stack's bottom.

use std::sync::atomic::{AtomicU64, Ordering};

use wmhcct_unwinder::{Frame, ReadStack};

/// Pages are probed in units of the smallest x86_64 page.
const PAGE: u64 = 4096;
/// At most this many pages per probe (one `process_vm_readv`).
const PROBE_PAGES: usize = 64;
/// Pages probed ahead of the one a read needs, so that a walk up a stack
/// costs one probe in the common case.
const LOOKAHEAD_PAGES: u64 = 3;
/// A switched-to stack is read at most this far above the capture point.
const SWITCHED_LIMIT: u64 = 8 << 20;

/// The calling thread's own stack, `[lo, hi)`: every address from a stack
/// pointer in it up to `hi` is mapped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OwnStack {
    pub lo: u64,
    pub hi: u64,
}

impl OwnStack {
    /// The calling thread's stack; empty if it cannot be found (every
    /// capture then reads as on a switched-to stack).
    pub fn current() -> OwnStack {
        // SAFETY: getpid and gettid have no preconditions.
        let main = unsafe { libc::getpid() == libc::gettid() };
        if main {
            // Not pthread_getattr_np: for the main thread it reads
            // /proc/self/maps with fopen while holding the thread's lock,
            // and that fopen's malloc lands here on the thread's first
            // event: a self-deadlock. Read the maps ourselves (the tracer's
            // own allocations go straight to glibc) and take the mapping
            // labelled [stack], not the one we run on: a program's first
            // event may come from a coroutine's stack.
            let here = &main as *const bool as u64;
            let Some((below, hi)) = std::fs::read("/proc/self/maps")
                .ok()
                .and_then(|maps| stack_mapping(&maps, here))
            else {
                return OwnStack::default();
            };
            // It can grow down to the mapping below it, and no further than
            // RLIMIT_STACK allows (no mapping is made in that gap but at a
            // fixed address).
            let mut lim = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: fills a local rlimit.
            let limit = if unsafe { libc::getrlimit(libc::RLIMIT_STACK, &mut lim) } == 0 {
                lim.rlim_cur
            } else {
                libc::RLIM_INFINITY
            };
            let lo = if limit == libc::RLIM_INFINITY {
                below
            } else {
                below.max(hi.saturating_sub(limit))
            };
            return OwnStack { lo, hi };
        }
        // For a thread other than the main one pthread_getattr_np reads no
        // file, but it allocates the thread's CPU set and the attribute's
        // extension, which pthread_attr_destroy frees: a sealed call, so
        // those blocks stay out of the program's arena.
        crate::sealed::call(|| {
            // SAFETY: pthread_getattr_np fills an attr we destroy afterwards.
            unsafe {
                let mut attr: libc::pthread_attr_t = std::mem::zeroed();
                if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
                    return OwnStack::default();
                }
                let mut addr: *mut libc::c_void = std::ptr::null_mut();
                let mut size: usize = 0;
                let rc = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
                libc::pthread_attr_destroy(&mut attr);
                if rc != 0 {
                    return OwnStack::default();
                }
                OwnStack {
                    lo: addr as u64,
                    hi: addr as u64 + size as u64,
                }
            }
        })
    }

    /// Whether a stack pointer lies on this stack.
    #[inline(always)]
    pub fn holds(&self, sp: u64) -> bool {
        sp >= self.lo && sp < self.hi
    }

    /// Whether a stack pointer lies on this stack with more than `need`
    /// bytes of it left below.
    #[inline(always)]
    pub fn has_room(&self, sp: u64, need: u64) -> bool {
        self.holds(sp) && sp - self.lo > need
    }

    /// The reader of the words in `[sp, hi)`, `sp` being a stack pointer
    /// this stack holds (the capture point's).
    #[inline(always)]
    pub fn reader(&self, sp: u64) -> OwnStackReader {
        let last = self.hi.saturating_sub(8);
        OwnStackReader {
            sp,
            // `last - sp + 1` cannot wrap: `last` is at most `u64::MAX - 8`.
            starts: if last >= sp { last - sp + 1 } else { 0 },
        }
    }
}

/// Reads the calling thread's own stack from a capture point up to its top:
/// the words starting in `[sp, hi - 8]`. Its bounds are two values, so the
/// reused-frame check keeps them in registers ([`ReadStack::holds_frames`]).
#[derive(Clone, Copy, Debug)]
pub struct OwnStackReader {
    sp: u64,
    /// How many addresses a word may start at, from `sp` (`hi - 8 - sp + 1`;
    /// 0 when `sp` is above `hi - 8`).
    starts: u64,
}

impl OwnStackReader {
    /// Whether the word at `addr` may be read: one compare, since
    /// `addr - sp` wraps for an address below `sp`.
    #[inline(always)]
    fn readable(&self, addr: u64) -> bool {
        addr.wrapping_sub(self.sp) < self.starts
    }

    #[inline(always)]
    fn word(addr: u64) -> u64 {
        // SAFETY: only called for an address `readable` accepted: in
        // [sp, hi - 8], the live part of this thread's own stack (from the
        // capture point, a frame of this thread, up to the stack's top),
        // mapped and readable.
        unsafe { (addr as *const u64).read_unaligned() }
    }
}

impl ReadStack for OwnStackReader {
    #[inline(always)]
    fn read_word(&mut self, addr: u64) -> Result<u64, ()> {
        if self.readable(addr) {
            Ok(Self::word(addr))
        } else {
            Err(())
        }
    }

    /// The frames of one stack, leaf first, have strictly increasing `sp`
    /// (a walk rejects a step that does not move the stack pointer up, and
    /// a reused tail lies above the frame it matched), so every slot lies
    /// between the first frame's and the last one's: only those two need
    /// the bounds check, and each other frame costs one compare with the
    /// frame before it besides its word (bursts: ~6 instructions a frame
    /// instead of ~9). Frames that do not ascend are reported as not held,
    /// unread. Eight frames at a time: their order first, then their eight
    /// reads.
    #[inline]
    fn holds_frames(&mut self, frames: &[Frame]) -> bool {
        let (Some(first), Some(last)) = (frames.first(), frames.last()) else {
            return true;
        };
        // A slot is `sp - 8`; a wrapped one fails `readable`.
        if !(self.readable(first.sp.wrapping_sub(8)) && self.readable(last.sp.wrapping_sub(8))) {
            return false;
        }
        let top = last.sp;
        // Below the first frame's `sp`, which is at least 8 (its slot did
        // not wrap).
        let mut below = first.sp - 1;
        let (eights, rest) = frames.as_chunks::<8>();
        for c in eights {
            let sp = c.map(|f| f.sp);
            // Each above the one before, and the eighth not above the last
            // frame: all eight between the first frame and the last.
            let ascending = below < sp[0]
                && sp[0] < sp[1]
                && sp[1] < sp[2]
                && sp[2] < sp[3]
                && sp[3] < sp[4]
                && sp[4] < sp[5]
                && sp[5] < sp[6]
                && sp[6] < sp[7]
                && sp[7] <= top;
            if !ascending {
                return false;
            }
            let diff = sp
                .iter()
                .zip(c)
                .fold(0, |d, (&s, f)| d | (Self::slot(s) ^ f.ra));
            if diff != 0 {
                return false;
            }
            below = sp[7];
        }
        // The rest ends with the last frame: ascending, they lie below it.
        let mut at = below;
        rest.iter().all(|f| {
            let up = at < f.sp;
            at = f.sp;
            up
        }) && rest.iter().fold(0, |d, f| d | (Self::slot(f.sp) ^ f.ra)) == 0
    }
}

impl OwnStackReader {
    /// The word below `sp`: a frame's return-address slot.
    #[inline(always)]
    fn slot(sp: u64) -> u64 {
        // SAFETY: only called from `holds_frames` for a frame between two
        // (inclusive) whose slots `readable` accepted, `sp` strictly
        // increasing from the first to the last (checked before the reads):
        // `sp - 8` lies in `[first.sp - 8, last.sp - 8]`, within
        // [capture point, hi - 8], this thread's own live stack, mapped and
        // readable.
        unsafe { (sp.wrapping_sub(8) as *const u64).read_unaligned() }
    }
}

/// The main thread's stack in `maps` (the text of /proc/self/maps): the
/// mapping the kernel labels `[stack]`, else the one that contains `addr`.
/// Returns the end of the highest mapping below it (0 if none) and its own
/// end.
fn stack_mapping(maps: &[u8], addr: u64) -> Option<(u64, u64)> {
    let ranges: Vec<(u64, u64, bool)> = maps
        .split(|&b| b == b'\n')
        .filter_map(|line| {
            let range = line.split(|&b| b == b' ').next()?;
            let mut ends = range.split(|&b| b == b'-');
            let hex = |s: &[u8]| u64::from_str_radix(std::str::from_utf8(s).ok()?, 16).ok();
            let (start, end) = (hex(ends.next()?)?, hex(ends.next()?)?);
            Some((start, end, line.ends_with(b"[stack]")))
        })
        .collect();
    let (start, end, _) = ranges
        .iter()
        .find(|r| r.2)
        .or_else(|| ranges.iter().find(|r| r.0 <= addr && addr < r.1))
        .copied()?;
    let below = ranges
        .iter()
        .map(|r| r.1)
        .filter(|&e| e <= start)
        .max()
        .unwrap_or(0);
    Some((below, end))
}

/// Reads for one capture on a stack that is not the thread's own.
///
/// `[sp, end of sp's page)` is readable (the capture runs there); beyond
/// it, the readable part grows by probing the next pages when a read needs
/// them, and stops for good at the first page that is not readable or at
/// [`SWITCHED_LIMIT`].
pub struct SwitchedStack {
    sp: u64,
    readable_end: u64,
    /// A probe found an unreadable page at `readable_end`.
    ended: bool,
    /// Probes made (for tests and the cost note in the README).
    pub probes: u32,
}

impl SwitchedStack {
    pub fn new(sp: u64) -> SwitchedStack {
        SwitchedStack {
            sp,
            readable_end: (sp | (PAGE - 1)).saturating_add(1),
            ended: false,
            probes: 0,
        }
    }

    /// Reads the word at `addr`, or fails if it is below the capture point,
    /// too far above it, or on a page that is not readable.
    pub fn read(&mut self, addr: u64) -> Result<u64, ()> {
        let end = addr.checked_add(8).ok_or(())?;
        if addr < self.sp || end > self.sp.saturating_add(SWITCHED_LIMIT) {
            return Err(());
        }
        while end > self.readable_end {
            if self.ended {
                return Err(());
            }
            let needed = (end - self.readable_end).div_ceil(PAGE) + LOOKAHEAD_PAGES;
            let want = needed.min(PROBE_PAGES as u64) as usize;
            let got = readable_pages(self.readable_end, want);
            self.probes += 1;
            self.readable_end += got as u64 * PAGE;
            self.ended = got < want;
        }
        // SAFETY: the word lies in [sp, readable_end): sp's own page (the
        // capture runs on it) or pages process_vm_readv just read from, so
        // mapped and readable. (Another thread unmapping them during this
        // capture would be the program freeing a stack in use.)
        Ok(unsafe { (addr as *const u64).read_unaligned() })
    }
}

/// How many consecutive pages from `start` (page-aligned) are readable, of
/// `pages` (at most [`PROBE_PAGES`]): one byte of each is read with
/// `process_vm_readv` on this process, which stops at the first page that
/// would fault. 0 where the call is not allowed (a seccomp filter): the
/// stack then ends at the capture point's page.
fn readable_pages(start: u64, pages: usize) -> usize {
    let pages = pages.min(PROBE_PAGES);
    let mut sink = [0u8; PROBE_PAGES];
    let local = libc::iovec {
        iov_base: sink.as_mut_ptr().cast(),
        iov_len: pages,
    };
    let mut remote = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 1,
    }; PROBE_PAGES];
    for (i, r) in remote.iter_mut().take(pages).enumerate() {
        r.iov_base = (start + i as u64 * PAGE) as *mut libc::c_void;
    }
    // SAFETY: the local iovec covers `sink`; the remote ones name addresses
    // in this process that the kernel reads (or refuses) on our behalf,
    // never faulting. errno is restored by the caller's guard.
    let n = unsafe {
        libc::process_vm_readv(
            libc::getpid(),
            &local,
            1,
            remote.as_ptr(),
            pages as libc::c_ulong,
            0,
        )
    };
    usize::try_from(n).unwrap_or(0).min(pages)
}

/// The return address glibc's `makecontext` puts under a coroutine's entry
/// function (its `__start_context` trampoline, a local symbol), found once.
pub fn makecontext_root() -> Option<u64> {
    // 0: not looked for yet; 1: none.
    static ROOT: AtomicU64 = AtomicU64::new(0);
    match ROOT.load(Ordering::Relaxed) {
        0 => {
            let r = find_makecontext_root();
            ROOT.store(r.unwrap_or(1), Ordering::Relaxed);
            r
        }
        1 => None,
        r => Some(r),
    }
}

/// [`makecontext_root`], found by asking `makecontext` to prepare a context
/// on a scratch stack that never runs.
fn find_makecontext_root() -> Option<u64> {
    extern "C" fn never_run() {}
    let mut stack = [0u64; 64];
    // SAFETY: a zeroed ucontext is a valid argument once its stack is set;
    // makecontext only writes into the ucontext and the top of `stack`, and
    // the context is never switched to.
    let sp = unsafe {
        let mut uc: libc::ucontext_t = std::mem::zeroed();
        uc.uc_stack.ss_sp = stack.as_mut_ptr().cast();
        uc.uc_stack.ss_size = std::mem::size_of_val(&stack);
        uc.uc_link = std::ptr::null_mut();
        libc::makecontext(&mut uc, never_run, 0);
        uc.uc_mcontext.gregs[libc::REG_RSP as usize] as u64
    };
    let base = stack.as_ptr() as u64;
    let slot = sp.checked_sub(base)? / 8;
    let ra = *stack.get(usize::try_from(slot).ok()?)?;
    (ra != 0).then_some(ra)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_mapping_of_an_address_and_the_one_below() {
        let maps = b"00400000-00452000 r-xp 00000000 08:02 173521 /usr/bin/x\n\
7f0000000000-7f0000021000 rw-p 00000000 00:00 0\n\
7ffc0000a000-7ffc0002b000 rw-p 00000000 00:00 0 [stack]\n\
7ffc0004a000-7ffc0004c000 r-xp 00000000 00:00 0 [vdso]\n";
        let stack = Some((0x7f0000021000, 0x7ffc0002b000));
        assert_eq!(stack_mapping(maps, 0x7ffc_0001_0000), stack);
        // Looked for from a coroutine's stack: still the thread's own.
        assert_eq!(stack_mapping(maps, 0x7f00_0000_1000), stack);
        // Without a [stack] line, the mapping of the address.
        let plain = &maps[..maps.len() - 70];
        assert!(!plain.windows(7).any(|w| w == b"[stack]"));
        assert_eq!(stack_mapping(plain, 0x400000), Some((0, 0x452000)));
        assert_eq!(stack_mapping(plain, 0x452000), None);
        assert_eq!(stack_mapping(b"garbage\n", 1), None);
    }

    /// The main thread's stack reaches down to the mapping below it or to
    /// RLIMIT_STACK, whichever is nearer: all of it, and no other mapping.
    #[test]
    fn the_main_stack_reaches_as_far_as_it_can_grow() {
        // The test harness runs tests on other threads: look from the main
        // thread's side by reading the maps as `current` does.
        let maps = std::fs::read("/proc/self/maps").unwrap();
        let text = String::from_utf8_lossy(&maps);
        let line = text.lines().find(|l| l.ends_with("[stack]")).unwrap();
        let start = u64::from_str_radix(line.split('-').next().unwrap(), 16).unwrap();
        let (below, hi) = stack_mapping(&maps, start).unwrap();
        assert!(below < start && start < hi);
        assert!(
            hi - below >= 128 << 20,
            "the kernel keeps a gap: {below:#x} {hi:#x}"
        );
    }

    /// The check eight frames at a time gives the answer of one frame at a
    /// time (the trait's definition, through `read_word`) for every length
    /// and every place of one wrong frame: a wrong return address, a slot
    /// below the capture point, one that wraps, one past the stack's top.
    #[test]
    fn the_check_in_eights_agrees_with_one_frame_at_a_time() {
        let slots: [u64; 21] = std::array::from_fn(|i| 0x1000 + i as u64);
        let at = |i: usize| &slots[i] as *const u64 as u64 + 8;
        let s = OwnStack::current();
        // The capture point is slot 1: slot 0 lies below it.
        let mut r = s.reader(at(1) - 8);
        let good: Vec<Frame> = (1..slots.len())
            .map(|i| Frame {
                ra: slots[i],
                sp: at(i),
            })
            .collect();
        let one_at_a_time = |r: &mut OwnStackReader, frames: &[Frame]| {
            frames
                .iter()
                .all(|f| f.sp >= 8 && r.read_word(f.sp - 8) == Ok(f.ra))
        };
        // Slot 0 holds its word, but lies below the capture point.
        let below = Frame {
            ra: slots[0],
            sp: at(0),
        };
        let wrong = [
            |f: Frame, _: Frame, _: u64| Frame { ra: f.ra ^ 1, ..f },
            |_: Frame, below: Frame, _: u64| below,
            |f: Frame, _: Frame, _: u64| Frame { sp: 4, ..f },
            |f: Frame, _: Frame, top: u64| Frame { sp: top + 8, ..f },
        ];
        for len in 0..=good.len() {
            let frames = &good[..len];
            assert!(r.holds_frames(frames), "{len} good frames");
            for bad in 0..len {
                for (k, w) in wrong.iter().enumerate() {
                    let mut v = frames.to_vec();
                    v[bad] = w(v[bad], below, s.hi);
                    assert_eq!(
                        r.holds_frames(&v),
                        one_at_a_time(&mut r, &v),
                        "{len} frames, wrong kind {k} at {bad}"
                    );
                    assert!(!r.holds_frames(&v), "{len} frames, wrong kind {k} at {bad}");
                }
            }
        }
    }

    /// Frames whose slots all hold their return addresses but whose `sp`
    /// does not strictly increase (no walk makes such a stack) are not
    /// held: the check reads only between the first frame and the last.
    #[test]
    fn frames_out_of_order_are_not_held() {
        let slots: [u64; 20] = std::array::from_fn(|i| 0x1000 + i as u64);
        let at = |i: usize| &slots[i] as *const u64 as u64 + 8;
        let s = OwnStack::current();
        let mut r = s.reader(at(0) - 8);
        let good: Vec<Frame> = (0..slots.len())
            .map(|i| Frame {
                ra: slots[i],
                sp: at(i),
            })
            .collect();
        assert!(r.holds_frames(&good));
        for len in 2..=good.len() {
            for i in 0..len - 1 {
                let mut swapped = good[..len].to_vec();
                swapped.swap(i, i + 1);
                assert!(!r.holds_frames(&swapped), "{len} frames, {i} swapped");
                let mut repeated = good[..len].to_vec();
                repeated[i + 1] = repeated[i];
                assert!(!r.holds_frames(&repeated), "{len} frames, {i} repeated");
            }
        }
    }

    #[test]
    fn the_own_stack_holds_this_frame() {
        let x = 0u64;
        let here = &x as *const u64 as u64;
        let s = OwnStack::current();
        assert!(s.holds(here), "{s:x?} {here:#x}");
        let mut r = s.reader(here);
        assert_eq!(r.read_word(here), Ok(0));
        assert_eq!(r.read_word(here - 8), Err(()));
        assert_eq!(r.read_word(s.hi - 4), Err(()));
        assert_eq!(r.read_word(s.hi - 8).map(|_| ()), Ok(()));
        assert_eq!(r.read_word(u64::MAX - 3), Err(()));
        // The reused-frame check: each frame's return address just below
        // its `sp`; a frame whose slot holds another word, lies below the
        // capture point or wraps fails.
        let slots = [0x11u64, 0x22, 0x33];
        let at = |i: usize| &slots[i] as *const u64 as u64 + 8;
        let frame = |i: usize, ra: u64| Frame { ra, sp: at(i) };
        let mut r = s.reader(at(0) - 8);
        assert!(r.holds_frames(&[]));
        assert!(r.holds_frames(&[frame(0, 0x11), frame(1, 0x22), frame(2, 0x33)]));
        assert!(!r.holds_frames(&[frame(0, 0x11), frame(1, 0x99), frame(2, 0x33)]));
        assert!(!r.holds_frames(&[frame(0, 0x11), Frame { ra: 0, sp: 4 }]));
        let mut above = s.reader(at(1) - 8);
        assert!(above.holds_frames(&[frame(1, 0x22)]));
        assert!(
            !above.holds_frames(&[frame(0, 0x11)]),
            "below the capture point"
        );
        let mut none = OwnStack { lo: 0, hi: 8 }.reader(16);
        assert_eq!(none.read_word(16), Err(()));
        assert_eq!(none.read_word(0), Err(()));
        let t = std::thread::spawn(|| {
            let y = 0u64;
            let here = &y as *const u64 as u64;
            (OwnStack::current(), here)
        })
        .join()
        .unwrap();
        assert!(t.0.holds(t.1), "{t:x?}");
        assert!(!t.0.holds(here) && !s.holds(t.1));
    }

    /// Maps `n` pages, then makes page `i` unreadable as `hole[i]` says:
    /// `Some(true)` unmapped, `Some(false)` PROT_NONE (a guard page).
    fn pages(n: usize, hole: &[(usize, bool)]) -> u64 {
        // SAFETY: a fresh anonymous mapping, changed only by us.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                n * PAGE as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            for &(i, unmap) in hole {
                let q = p.cast::<u8>().add(i * PAGE as usize).cast();
                if unmap {
                    libc::munmap(q, PAGE as usize);
                } else {
                    libc::mprotect(q, PAGE as usize, libc::PROT_NONE);
                }
            }
            p as u64
        }
    }

    #[test]
    fn probes_stop_at_a_hole_and_at_a_guard_page() {
        for unmap in [true, false] {
            let base = pages(8, &[(5, unmap)]);
            assert_eq!(readable_pages(base, 8), 5, "unmap {unmap}");
            assert_eq!(readable_pages(base + 5 * PAGE, 2), 0);
            assert_eq!(readable_pages(base + 6 * PAGE, 2), 2);
        }
    }

    #[test]
    fn a_switched_stack_reads_up_to_its_end_and_not_beyond() {
        for unmap in [true, false] {
            let base = pages(8, &[(5, unmap)]);
            // SAFETY: our own mapping, pages 0..5 readable and writable.
            unsafe { ((base + 4 * PAGE + 16) as *mut u64).write(0x1234) };
            let mut s = SwitchedStack::new(base + 100);
            assert_eq!(s.read(base + 104), Ok(0));
            assert_eq!(s.probes, 0, "the capture point's page needs no probe");
            assert_eq!(s.read(base + 4 * PAGE + 16), Ok(0x1234));
            assert_eq!(s.probes, 1);
            assert_eq!(s.read(base + 5 * PAGE - 8), Ok(0));
            assert_eq!(s.read(base + 5 * PAGE - 4), Err(()), "straddles the hole");
            assert_eq!(s.read(base + 6 * PAGE), Err(()), "beyond the hole");
            assert_eq!(s.read(base + 96), Err(()), "below the capture point");
            assert!(s.probes <= 2, "{}", s.probes);
        }
    }

    #[test]
    fn a_switched_stack_is_read_at_most_so_far() {
        let s0 = 0u64;
        let here = &s0 as *const u64 as u64;
        let mut s = SwitchedStack::new(here);
        assert_eq!(s.read(here + SWITCHED_LIMIT), Err(()));
        assert_eq!(s.read(u64::MAX - 3), Err(()));
    }

    #[test]
    fn makecontext_root_is_the_trampoline_a_coroutine_returns_to() {
        let ra = makecontext_root().expect("glibc's makecontext");
        assert_eq!(makecontext_root(), Some(ra), "found once, kept");
        // SAFETY: an all-zero Dl_info is valid (pointers null); dladdr
        // fills it.
        let mut dl: libc::Dl_info = unsafe { std::mem::zeroed() };
        assert_ne!(
            unsafe { libc::dladdr(ra as *const libc::c_void, &mut dl) },
            0
        );
        // SAFETY: dli_fname names the object (a C string owned by the loader).
        let obj = unsafe { std::ffi::CStr::from_ptr(dl.dli_fname) }.to_string_lossy();
        assert!(obj.contains("libc.so"), "{obj}");
    }
}
