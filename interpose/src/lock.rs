//! Locks the tracer can hold across `fork` (taken in the atfork prepare
//! handler, released in parent and child) and use inside malloc: no
//! allocation, no pthread objects, spin then yield.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU32, Ordering};

/// Spin a little, then yield (while waiting for a lock or a flag).
pub(crate) fn backoff(spins: &mut u32) {
    if *spins < 64 {
        std::hint::spin_loop();
        *spins += 1;
    } else {
        std::thread::yield_now();
    }
}

/// The bare lock word both locks of the tracer are built on
/// ([`SpinMutex`], `biased_lock::BiasedMutex`).
pub(crate) struct RawSpin(AtomicU32);

impl RawSpin {
    pub(crate) const fn new() -> Self {
        RawSpin(AtomicU32::new(0))
    }

    pub(crate) fn lock(&self) {
        let mut spins = 0;
        while self
            .0
            .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            backoff(&mut spins);
        }
    }

    pub(crate) fn unlock(&self) {
        self.0.store(0, Ordering::Release);
    }
}

/// A mutual-exclusion lock around `T`.
pub struct SpinMutex<T> {
    raw: RawSpin,
    value: UnsafeCell<T>,
}

// SAFETY: access to `value` is serialised by `raw`, as for std's Mutex.
unsafe impl<T: Send> Sync for SpinMutex<T> {}
// SAFETY: moving the lock moves the value; no thread identity is stored.
unsafe impl<T: Send> Send for SpinMutex<T> {}

impl<T> SpinMutex<T> {
    pub const fn new(value: T) -> Self {
        SpinMutex {
            raw: RawSpin::new(),
            value: UnsafeCell::new(value),
        }
    }

    pub fn lock(&self) -> SpinGuard<'_, T> {
        self.raw_lock();
        SpinGuard { lock: self }
    }

    /// Take the lock without a guard (atfork prepare). Pair with `raw_unlock`.
    pub fn raw_lock(&self) {
        self.raw.lock();
    }

    /// Release a lock taken with `raw_lock`, or reset it in a forked child.
    pub fn raw_unlock(&self) {
        self.raw.unlock();
    }
}

pub struct SpinGuard<'a, T> {
    lock: &'a SpinMutex<T>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while the lock is held.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard exists only while the lock is held, exclusively.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.raw_unlock();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn mutex_serialises_threads() {
        let m = Arc::new(SpinMutex::new(0u64));
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        *m.lock() += 1;
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(*m.lock(), 40_000);
    }
}
