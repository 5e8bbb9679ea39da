//! Locks the tracer can hold across `fork` (taken in the atfork prepare
//! handler, released in parent and child) and use inside malloc: no
//! allocation, no pthread objects, spin then yield.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU32, Ordering};

fn backoff(spins: &mut u32) {
    if *spins < 64 {
        std::hint::spin_loop();
        *spins += 1;
    } else {
        std::thread::yield_now();
    }
}

/// A mutual-exclusion lock around `T`.
pub struct SpinMutex<T> {
    state: AtomicU32,
    value: UnsafeCell<T>,
}

// SAFETY: access to `value` is serialised by `state`, as for std's Mutex.
unsafe impl<T: Send> Sync for SpinMutex<T> {}
// SAFETY: moving the lock moves the value; no thread identity is stored.
unsafe impl<T: Send> Send for SpinMutex<T> {}

impl<T> SpinMutex<T> {
    pub const fn new(value: T) -> Self {
        SpinMutex {
            state: AtomicU32::new(0),
            value: UnsafeCell::new(value),
        }
    }

    pub fn lock(&self) -> SpinGuard<'_, T> {
        self.raw_lock();
        SpinGuard { lock: self }
    }

    /// Take the lock without a guard (atfork prepare). Pair with `raw_unlock`.
    pub fn raw_lock(&self) {
        let mut spins = 0;
        while self
            .state
            .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            backoff(&mut spins);
        }
    }

    /// Release a lock taken with `raw_lock`, or reset it in a forked child.
    pub fn raw_unlock(&self) {
        self.state.store(0, Ordering::Release);
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

const WRITER: u32 = 1 << 31;

/// A readers-writer lock around `T` (the module table: read on every unwind,
/// written when libraries are loaded or unloaded).
pub struct SpinRwLock<T> {
    state: AtomicU32,
    value: UnsafeCell<T>,
}

// SAFETY: shared access only under reader counts, exclusive under WRITER.
unsafe impl<T: Send + Sync> Sync for SpinRwLock<T> {}

impl<T> SpinRwLock<T> {
    pub const fn new(value: T) -> Self {
        SpinRwLock {
            state: AtomicU32::new(0),
            value: UnsafeCell::new(value),
        }
    }

    pub fn read(&self) -> ReadGuard<'_, T> {
        let mut spins = 0;
        loop {
            let s = self.state.load(Ordering::Relaxed);
            if s & WRITER == 0
                && self
                    .state
                    .compare_exchange_weak(s, s + 1, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return ReadGuard { lock: self };
            }
            backoff(&mut spins);
        }
    }

    pub fn write(&self) -> WriteGuard<'_, T> {
        self.raw_write_lock();
        WriteGuard { lock: self }
    }

    pub fn raw_write_lock(&self) {
        let mut spins = 0;
        while self
            .state
            .compare_exchange_weak(0, WRITER, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            backoff(&mut spins);
        }
    }

    pub fn raw_write_unlock(&self) {
        self.state.store(0, Ordering::Release);
    }
}

pub struct ReadGuard<'a, T> {
    lock: &'a SpinRwLock<T>,
}

impl<T> Deref for ReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: a reader count is held, so no writer has exclusive access.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> Drop for ReadGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.state.fetch_sub(1, Ordering::Release);
    }
}

pub struct WriteGuard<'a, T> {
    lock: &'a SpinRwLock<T>,
}

impl<T> Deref for WriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: WRITER is held exclusively.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for WriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: WRITER is held exclusively.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for WriteGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.raw_write_unlock();
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

    #[test]
    fn rwlock_readers_share_writer_excludes() {
        let l = SpinRwLock::new(1u32);
        {
            let a = l.read();
            let b = l.read();
            assert_eq!(*a + *b, 2);
        }
        *l.write() = 5;
        assert_eq!(*l.read(), 5);
    }
}
