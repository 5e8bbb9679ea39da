//! The reentrancy guard: while a thread is inside the tracer, allocator calls
//! it makes (directly or through libc) go straight to glibc, untraced.

use std::cell::Cell;

thread_local! {
    // `const` initialisation and no destructor: a plain TLS slot, usable at
    // any time, including during thread start-up and teardown.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// Proof that the current thread is inside the tracer. Dropping it leaves.
pub struct Guard {
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Guard {
    /// Enter the tracer, or `None` if this thread is already inside it.
    #[inline(always)]
    pub fn acquire() -> Option<Guard> {
        INSIDE
            .try_with(|inside| {
                if inside.get() {
                    None
                } else {
                    inside.set(true);
                    Some(Guard {
                        _not_send: std::marker::PhantomData,
                    })
                }
            })
            .ok()
            .flatten()
    }
}

impl Drop for Guard {
    #[inline(always)]
    fn drop(&mut self) {
        let _ = INSIDE.try_with(|inside| inside.set(false));
        // A SIGTERM that arrived while a thread was inside the tracer.
        crate::signals::after_guard();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_acquire_fails_until_released() {
        let g = Guard::acquire().expect("first acquire");
        assert!(Guard::acquire().is_none());
        drop(g);
        assert!(Guard::acquire().is_some());
    }
}
