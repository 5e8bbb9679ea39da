//! A pthread key created on first use, whose destructor runs when a thread
//! that set it exits (`thread.rs`: the thread's tracer state;
//! `tracer_stack.rs`: its tracer stack).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Once;

pub struct ThreadKey {
    key: AtomicU32,
    once: Once,
    destructor: extern "C" fn(*mut libc::c_void),
}

impl ThreadKey {
    pub const fn new(destructor: extern "C" fn(*mut libc::c_void)) -> ThreadKey {
        ThreadKey {
            key: AtomicU32::new(u32::MAX),
            once: Once::new(),
            destructor,
        }
    }

    /// The key, created on the first call (`None` if it could not be).
    /// `pthread_key_create` on an early key does not allocate.
    pub fn get(&self) -> Option<libc::pthread_key_t> {
        self.once.call_once(|| {
            let mut k: libc::pthread_key_t = 0;
            // SAFETY: writes a key into a local; the destructor has the
            // signature pthread expects.
            if unsafe { libc::pthread_key_create(&mut k, Some(self.destructor)) } == 0 {
                self.key.store(k, Ordering::Release);
            }
        });
        match self.key.load(Ordering::Acquire) {
            u32::MAX => None,
            k => Some(k),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    static RAN: AtomicUsize = AtomicUsize::new(0);
    extern "C" fn count(p: *mut libc::c_void) {
        RAN.fetch_add(p as usize, Ordering::SeqCst);
    }
    static KEY: ThreadKey = ThreadKey::new(count);

    #[test]
    fn the_destructor_runs_at_thread_exit_with_the_value() {
        let k = KEY.get().expect("a key");
        assert_eq!(KEY.get(), Some(k), "created once");
        std::thread::spawn(move || {
            // SAFETY: a valid key; the value is a plain number.
            unsafe { libc::pthread_setspecific(k, 5 as *mut libc::c_void) };
        })
        .join()
        .unwrap();
        assert_eq!(RAN.load(Ordering::SeqCst), 5);
    }
}
