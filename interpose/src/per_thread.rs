//! The tracer's thread-local state that must be reachable at any time, from
//! a signal handler and during thread start-up and teardown too: the
//! reentrancy state (`guard.rs`), the clock anchor (`clock.rs`), the queue
//! of a signal handler's allocator calls (`deferred.rs`), the slot of the
//! thread's tracer state (`thread.rs`) and the top of its tracer stack
//! (`tracer_stack.rs`).
//!
//! One `const`-initialised block without a destructor. A shared library
//! reaches each thread-local through a `__tls_get_addr` call; an event looks
//! the block up once, when it enters the tracer, and the guard keeps it.

use std::cell::Cell;

use crate::clock::Anchor;
use crate::deferred::Ring;
use crate::thread::Slot;

pub struct PerThread {
    /// `guard.rs`: whether and how the thread is inside the tracer.
    pub inside: Cell<u8>,
    /// `clock.rs`: the thread's last (tsc, ns) anchor.
    pub anchor: Cell<Anchor>,
    /// `shared_clock.rs`: events the thread may still stamp from the
    /// collector thread's published clock.
    pub clock_trust: Cell<u32>,
    /// `deferred.rs`: allocator calls of a signal handler that interrupted
    /// the thread while it recorded an event.
    pub ring: Ring,
    /// `thread.rs`: the thread's tracer state, created on first use.
    pub slot: Slot,
    /// `tracer_stack.rs`: the top of the thread's tracer stack.
    pub tracer_stack: crate::tracer_stack::Top,
    /// `tracer.rs`: the block of the thread's latest recorded allocation,
    /// while no free has followed it (0: none). A free of it is a
    /// temporary allocation's.
    pub last_alloc: Cell<u64>,
}

thread_local! {
    static PER_THREAD: PerThread = const {
        PerThread {
            inside: Cell::new(crate::guard::OUTSIDE),
            anchor: Cell::new(Anchor::ZERO),
            clock_trust: Cell::new(0),
            ring: Ring::new(),
            slot: Slot::new(),
            tracer_stack: crate::tracer_stack::Top::new(crate::tracer_stack::NONE),
            last_alloc: Cell::new(0),
        }
    };
}

/// Run `f` with this thread's block (`None` only if the thread's TLS is
/// unusable, which a block without a destructor never is in practice).
#[inline(always)]
pub fn with<R>(f: impl FnOnce(&PerThread) -> R) -> Option<R> {
    PER_THREAD.try_with(f).ok()
}

/// This thread's block, for a guard to keep.
#[inline(always)]
pub fn current() -> Option<*const PerThread> {
    with(|p| p as *const PerThread)
}
