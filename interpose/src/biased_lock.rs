//! The collector's lock, biased towards the thread that takes it most.
//!
//! Every traced event takes the collector lock. An uncontended
//! compare-and-swap still drains the store buffer: it measured about 15 ns
//! per event, a sixth of the bare interposition cost. Most processes of an
//! MPI job allocate from one thread, so the lock is *biased*: once one
//! thread has taken it [`BiasedMutex`]`::streak` times in a row, that
//! thread (the owner) enters with plain stores and loads only:
//!
//! ```text
//! owner:   busy = 1; compiler fence; if revoke == 0 { enter } else { busy = 0; slow path }
//! other:   spin lock; revoke = 1; membarrier(); wait until busy == 0; owner = none
//! ```
//!
//! `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` makes every running thread
//! of the process execute a full memory barrier, so either the owner's
//! `busy = 1` is visible to the revoker, or the owner sees `revoke == 1`
//! (the asymmetric Dekker of biased locks; the owner pays nothing, the
//! revoker one system call). A revocation doubles the streak a thread needs
//! for the bias again, so two threads that take turns pay the system call
//! rarely and end up on the plain spin lock.
//!
//! Without `membarrier` (old kernels, seccomp) or off x86_64 the lock is a
//! plain spin lock. Like [`crate::lock::SpinMutex`] it never allocates, uses
//! no pthread objects and may be held across `fork` (`raw_lock` in the
//! atfork prepare handler). A thread never takes it twice (the reentrancy
//! guard defers what a signal handler does while the thread holds it).

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{compiler_fence, AtomicBool, AtomicU32, AtomicU64, Ordering};

use crate::lock::{backoff, RawSpin};

/// Consecutive acquisitions by one thread before it gets the bias (doubled
/// per revocation, up to `MAX_STREAK_SHIFT` doublings).
const FIRST_STREAK: u64 = 256;
const MAX_STREAK_SHIFT: u32 = 16;

/// Whether `membarrier` works for this process (registered at start-up; a
/// forked child inherits the registration).
static MEMBARRIER: AtomicBool = AtomicBool::new(false);

const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

/// Register this process for expedited private memory barriers; biasing is
/// enabled only if that works. Call once, at start-up.
pub fn register_membarrier() {
    // SAFETY: membarrier takes integer arguments and touches no memory.
    let ok = cfg!(target_arch = "x86_64")
        && unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
                0,
                0,
            )
        } == 0;
    MEMBARRIER.store(ok, Ordering::Release);
}

/// A full memory barrier on every running thread of the process.
fn heavy_barrier() -> bool {
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0 }
}

/// A non-zero identity of the calling thread, without a TLS lookup: the
/// thread pointer (glibc keeps the TCB's own address at `fs:0`). A dead
/// thread's value may be reused by a new thread, which then simply inherits
/// the bias: the dead thread cannot be inside.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn thread_id() -> u64 {
    let tp: u64;
    // SAFETY: reads the first word of the thread control block, which the
    // x86_64 TLS ABI requires to hold the block's own address.
    unsafe {
        std::arch::asm!("mov {}, fs:0", out(reg) tp, options(nostack, readonly, preserves_flags));
    }
    tp
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn thread_id() -> u64 {
    0
}

/// Bias bookkeeping, only touched under the spin lock.
#[derive(Default)]
struct Streak {
    thread: u64,
    count: u64,
    revocations: u32,
}

/// Counters for the tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BiasStats {
    pub biased: u64,
    pub revoked: u64,
}

pub struct BiasedMutex<T> {
    /// The plain spin lock (every path but the owner's).
    lock: RawSpin,
    /// Thread identity of the owner; 0: no bias.
    owner: AtomicU64,
    /// The owner is inside (written by the owner only).
    busy: AtomicU32,
    /// A revocation is under way or done: the owner must not enter.
    revoke: AtomicU32,
    streak: UnsafeCell<Streak>,
    stats: UnsafeCell<BiasStats>,
    value: UnsafeCell<T>,
}

// SAFETY: access to `value` is serialised: by `lock`, or for the owner by
// the busy/revoke protocol described in the module comment.
unsafe impl<T: Send> Sync for BiasedMutex<T> {}
// SAFETY: moving the lock moves the value; the owner identity is only
// compared, never dereferenced.
unsafe impl<T: Send> Send for BiasedMutex<T> {}

pub struct BiasedGuard<'a, T> {
    lock: &'a BiasedMutex<T>,
    /// Entered through the owner's path.
    biased: bool,
}

impl<T> BiasedMutex<T> {
    pub const fn new(value: T) -> Self {
        BiasedMutex {
            lock: RawSpin::new(),
            owner: AtomicU64::new(0),
            busy: AtomicU32::new(0),
            revoke: AtomicU32::new(0),
            streak: UnsafeCell::new(Streak {
                thread: 0,
                count: 0,
                revocations: 0,
            }),
            stats: UnsafeCell::new(BiasStats {
                biased: 0,
                revoked: 0,
            }),
            value: UnsafeCell::new(value),
        }
    }

    #[inline]
    pub fn lock(&self) -> BiasedGuard<'_, T> {
        let me = thread_id();
        if me != 0 && self.owner.load(Ordering::Relaxed) == me {
            self.busy.store(1, Ordering::Relaxed);
            // The revoker's membarrier orders this store before our load
            // of `revoke` as seen from its side; the compiler must not
            // reorder them either.
            compiler_fence(Ordering::SeqCst);
            if self.revoke.load(Ordering::Acquire) == 0 {
                return BiasedGuard {
                    lock: self,
                    biased: true,
                };
            }
            self.busy.store(0, Ordering::Release);
        }
        self.slow_lock(me);
        BiasedGuard {
            lock: self,
            biased: false,
        }
    }

    /// Take the spin lock, revoking another thread's bias (atfork prepare
    /// uses this directly; pair with `raw_unlock`).
    pub fn raw_lock(&self) {
        self.slow_lock(thread_id());
    }

    /// Release a lock taken with `raw_lock`, or reset it in a forked child.
    pub fn raw_unlock(&self) {
        self.lock.unlock();
    }

    #[cold]
    #[inline(never)]
    fn slow_lock(&self, me: u64) {
        self.lock.lock();
        // SAFETY: `streak` and `stats` are only touched under the spin lock.
        let (streak, stats) = unsafe { (&mut *self.streak.get(), &mut *self.stats.get()) };
        let owner = self.owner.load(Ordering::Relaxed);
        if owner != 0 && owner != me {
            self.revoke.store(1, Ordering::Relaxed);
            if !heavy_barrier() {
                // Cannot happen once registered; if it does, give the
                // owner's store buffer ample time, and never bias again.
                MEMBARRIER.store(false, Ordering::Relaxed);
                for _ in 0..100_000 {
                    std::hint::spin_loop();
                }
            }
            let mut spins = 0;
            while self.busy.load(Ordering::Acquire) != 0 {
                backoff(&mut spins);
            }
            self.owner.store(0, Ordering::Relaxed);
            streak.revocations = streak.revocations.saturating_add(1);
            stats.revoked += 1;
            streak.thread = 0;
        }
        // (`owner == me` here: our own bias, entered by `raw_lock`, or a
        // revocation that was pending when we looked and is over now.)
        if streak.thread == me {
            streak.count += 1;
        } else {
            streak.thread = me;
            streak.count = 1;
        }
        let needed = FIRST_STREAK << streak.revocations.min(MAX_STREAK_SHIFT);
        if me != 0 && owner != me && streak.count >= needed && MEMBARRIER.load(Ordering::Acquire) {
            // Published by our own unlock; only this thread reads `owner ==
            // me` as permission, and others see it under the spin lock.
            self.revoke.store(0, Ordering::Relaxed);
            self.owner.store(me, Ordering::Relaxed);
            stats.biased += 1;
        }
    }

    /// The bias counters (under the lock).
    #[cfg(test)]
    pub fn bias_stats(&self) -> BiasStats {
        let _g = self.lock();
        // SAFETY: read under the lock; written only under the spin lock,
        // which the owner's path never writes through.
        unsafe { *self.stats.get() }
    }
}

impl<T> Deref for BiasedGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while the lock is held.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for BiasedGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard exists only while the lock is held, exclusively.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for BiasedGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        if self.biased {
            self.lock.busy.store(0, Ordering::Release);
        } else {
            self.lock.raw_unlock();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Plain (non-atomic) read-modify-writes under the lock: any overlap of
    /// two holders loses increments.
    fn hammer(m: &BiasedMutex<(u64, u64)>, n: u64) {
        for _ in 0..n {
            let mut g = m.lock();
            let v = g.0;
            std::hint::black_box(&v);
            g.0 = v + 1;
            g.1 = g.1.wrapping_add(v);
        }
    }

    #[test]
    fn a_lone_thread_gets_the_bias() {
        register_membarrier();
        if !MEMBARRIER.load(Ordering::Acquire) {
            eprintln!("membarrier unavailable: plain spin lock");
            return;
        }
        let m = BiasedMutex::new((0u64, 0u64));
        hammer(&m, 10_000);
        assert_eq!(m.lock().0, 10_000);
        assert_eq!(m.owner.load(Ordering::Relaxed), thread_id());
        assert_eq!(
            m.bias_stats(),
            BiasStats {
                biased: 1,
                revoked: 0
            }
        );
    }

    #[test]
    fn threads_taking_turns_stay_exclusive() {
        register_membarrier();
        let m = Arc::new(BiasedMutex::new((0u64, 0u64)));
        // Phases: one thread alone (bias), then others join (revocations,
        // re-bias, contention).
        hammer(&m, 5_000);
        let hs: Vec<_> = (0..4)
            .map(|i| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for round in 0..20 {
                        // Bursts of different lengths so that a thread
                        // sometimes earns the bias and loses it.
                        hammer(&m, 300 + 700 * ((i + round) % 3));
                        std::thread::yield_now();
                    }
                })
            })
            .collect();
        hammer(&m, 20_000);
        for h in hs {
            h.join().unwrap();
        }
        let expected = 5_000
            + 20_000
            + (0..4u64)
                .map(|i| (0..20u64).map(|r| 300 + 700 * ((i + r) % 3)).sum::<u64>())
                .sum::<u64>();
        assert_eq!(m.lock().0, expected, "increments lost: not exclusive");
        if MEMBARRIER.load(Ordering::Acquire) {
            let s = m.bias_stats();
            assert!(s.biased >= 1 && s.revoked >= 1, "{s:?}");
        }
    }

    #[test]
    fn raw_lock_revokes_and_excludes_the_owner() {
        register_membarrier();
        let m = Arc::new(BiasedMutex::new((0u64, 0u64)));
        let owner = {
            let m = m.clone();
            std::thread::spawn(move || {
                hammer(&m, 2_000);
                thread_id()
            })
            .join()
            .unwrap()
        };
        if MEMBARRIER.load(Ordering::Acquire) {
            assert_eq!(m.owner.load(Ordering::Relaxed), owner);
        }
        m.raw_lock();
        assert_eq!(m.owner.load(Ordering::Relaxed), 0, "bias revoked");
        // SAFETY (test): we hold the spin lock.
        unsafe { (*m.value.get()).0 += 1 };
        m.raw_unlock();
        assert_eq!(m.lock().0, 2_001);
    }
}
