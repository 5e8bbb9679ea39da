//! Process lifecycle: fork handlers and the report at exit.

use std::sync::atomic::Ordering;

use crate::guard::Guard;
use crate::tracer;

extern "C" fn before_fork() {
    if let Some(t) = tracer::running() {
        // Take every tracer lock so the child never inherits one held by a
        // thread that does not exist there. Same order as everywhere else:
        // the module table is never held while waiting for the core.
        t.modules.raw_write_lock();
        t.core.raw_lock();
    }
}

extern "C" fn after_fork_parent() {
    if let Some(t) = tracer::running() {
        t.core.raw_unlock();
        t.modules.raw_write_unlock();
    }
}

extern "C" fn after_fork_child() {
    if let Some(t) = tracer::running() {
        t.core.raw_unlock();
        t.modules.raw_write_unlock();
        // The child keeps tracing (its report starts with the parent's
        // history up to the fork) and writes under its own pid.
        t.descendant.store(true, Ordering::Release);
    }
}

/// Called once, right after the tracer is initialised.
pub fn after_init() {
    // SAFETY: registers plain extern "C" handlers that only touch our locks.
    unsafe {
        libc::pthread_atfork(
            Some(before_fork),
            Some(after_fork_parent),
            Some(after_fork_child),
        );
    }
}

extern "C" fn at_exit() {
    let Some(g) = Guard::acquire() else { return };
    if let Some(t) = tracer::running() {
        crate::report::write(&g, t, "exit");
    }
}

// Run late in exit(): after the program's atexit handlers and the
// destructors of objects loaded after us.
#[used]
#[link_section = ".fini_array"]
static FINI: extern "C" fn() = at_exit;
