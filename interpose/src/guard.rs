//! The reentrancy guard: while a thread is inside the tracer, allocator calls
//! it makes through libc go straight to the program's allocator, untraced
//! (its own Rust allocations go to its own heap: `own_heap::OwnHeap`; a
//! sealed call's to a static arena: `sealed.rs`).
//!
//! A thread is inside in one of two ways. Recording a program's event
//! ([`Guard::acquire_event`]) runs only the tracer's own code, whose
//! allocations never reach the exported functions; the few calls into
//! libraries that may allocate through them (the loader, pthread keys,
//! start-up) run [`hidden`] (one whose blocks are all freed before it
//! returns, `pthread_getattr_np`, is a sealed call too: `sealed.rs`). So an
//! allocator call that arrives
//! while a thread is recording an event comes from a signal handler that
//! interrupted it: it is the program's, and is queued (`deferred.rs`) and
//! recorded when the thread leaves. Any other tracer work
//! ([`Guard::acquire`]: MPI internals of `MPI_Alloc_mem`, the report,
//! symbol lookups) hides every allocator call made meanwhile.

use crate::per_thread::PerThread;

pub const OUTSIDE: u8 = 0;
/// Recording an event of the program.
const EVENT: u8 = 1;
/// Any other tracer work, or a library call made while recording an event.
const HIDDEN: u8 = 2;

/// Proof that the current thread is inside the tracer. Dropping it leaves.
/// Not `Send`: it keeps the thread's block (`per_thread.rs`).
pub struct Guard {
    pt: *const PerThread,
}

#[inline(always)]
fn enter(state: u8) -> Option<Guard> {
    let pt = crate::per_thread::current()?;
    // SAFETY: `current` points to this thread's block, which has no
    // destructor and lives as long as the thread.
    let inside = unsafe { &(*pt).inside };
    if inside.get() != OUTSIDE {
        return None;
    }
    inside.set(state);
    Some(Guard { pt })
}

impl Guard {
    /// Enter the tracer for its own work (allocator calls meanwhile are
    /// hidden), or `None` if this thread is already inside it.
    #[inline(always)]
    pub fn acquire() -> Option<Guard> {
        enter(HIDDEN)
    }

    /// Enter the tracer to record one of the program's events, or `None` if
    /// this thread is already inside it.
    #[inline(always)]
    pub fn acquire_event() -> Option<Guard> {
        enter(EVENT)
    }

    /// The thread's block (looked up once, on entry).
    #[inline(always)]
    pub fn per_thread(&self) -> &PerThread {
        // SAFETY: the block of the thread that created the guard, which is
        // not `Send`; the block has no destructor and outlives the guard.
        unsafe { &*self.pt }
    }
}

/// Run `f` (a call into a library that may allocate) with the thread's
/// allocator calls hidden, whatever the thread was doing.
#[inline]
pub fn hidden<R>(f: impl FnOnce() -> R) -> R {
    let before = crate::per_thread::with(|p| p.inside.replace(HIDDEN)).unwrap_or(HIDDEN);
    let r = f();
    let _ = crate::per_thread::with(|p| p.inside.set(before));
    r
}

/// Whether the thread is recording a program's event: an allocator call
/// arriving now was made by a signal handler that interrupted it.
#[inline]
pub fn interrupted_event() -> bool {
    crate::per_thread::with(|p| p.inside.get() == EVENT).unwrap_or(false)
}

impl Drop for Guard {
    #[inline(always)]
    fn drop(&mut self) {
        let pt = self.per_thread();
        pt.inside.set(OUTSIDE);
        // A SIGTERM that arrived while a thread was inside the tracer.
        crate::signals::after_guard();
        // Allocator calls of a signal handler that interrupted the tracer.
        crate::deferred::after_guard(&pt.ring);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_acquire_fails_until_released() {
        let g = Guard::acquire().expect("first acquire");
        assert!(Guard::acquire().is_none());
        assert!(Guard::acquire_event().is_none());
        drop(g);
        assert!(Guard::acquire().is_some());
    }

    #[test]
    fn only_event_recording_is_interruptible() {
        assert!(!interrupted_event());
        let g = Guard::acquire_event().expect("event");
        assert!(interrupted_event());
        let inner = hidden(interrupted_event);
        assert!(!inner, "hidden library call");
        assert!(interrupted_event(), "restored after hide");
        drop(g);
        assert!(!interrupted_event());
        let h = Guard::acquire().expect("hidden");
        assert!(!interrupted_event());
        drop(h);
    }
}
