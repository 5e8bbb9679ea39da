//! The tracer's own stack, one per thread.
//!
//! Recording an event unwinds with framehop, whose DWARF evaluation keeps
//! its state on the stack, and the first event of a thread or process sets
//! up the tracer: together up to ~16 KiB below the program's frame. A thread
//! with a small stack (`PTHREAD_STACK_MIN`, 16 KiB, is common for helper
//! threads), one deep in recursion near its limit, or a coroutine on a
//! small stack would overflow where it never does without the tracer. So
//! that work runs on a stack of the tracer's own: [`run`] switches to it and
//! back (`tracer.rs` decides where: a capture with plenty of room left on
//! the thread's own stack stays there, which costs nothing; the first event
//! of a thread and the start-up always switch).
//!
//! Each thread's stack is mapped when first needed (`MAP_NORESERVE`, a
//! guard page below; untouched pages cost nothing) and unmapped by a
//! pthread key destructor when the thread exits. Where it cannot be mapped
//! (address space exhausted) or once the thread is exiting, the work runs on
//! the thread's own stack as before.

use std::cell::Cell;

use crate::guard::Guard;
use crate::thread_key::ThreadKey;

/// Usable size of a tracer stack.
const SIZE: usize = 512 << 10;
/// The guard page below it.
const GUARD: usize = 4096;
/// The stack starts this far below the mapping's end (16-byte aligned).
const TOP_OFFSET: u64 = 0x840;

/// `PerThread::tracer_stack`: not mapped yet.
pub const NONE: u64 = 0;
/// `PerThread::tracer_stack`: not to be used (could not be mapped, or the
/// thread is exiting): run on the thread's own stack.
const UNUSABLE: u64 = 1;

/// The per-thread cell holding the top of the thread's tracer stack, or
/// [`NONE`] / [`UNUSABLE`].
pub type Top = Cell<u64>;

/// Run `f` on this thread's tracer stack (mapping it on first use), or on
/// the current stack if there is none or the thread already runs on it.
#[inline]
pub fn run<R>(g: &Guard, f: impl FnOnce() -> R) -> R {
    let cell = &g.per_thread().tracer_stack;
    let mut top = cell.get();
    if top == NONE {
        top = map();
        cell.set(top);
    }
    if top == UNUSABLE || on(top) {
        return here(f);
    }
    switch(top, f)
}

/// `f` on the current stack, in a frame of its own: inlined into the
/// caller, its frame would be reserved on the program's stack even when `f`
/// runs on the tracer's.
#[inline(never)]
fn here<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// The current stack pointer.
#[inline(always)]
pub fn sp() -> u64 {
    let sp: u64;
    // SAFETY: reads rsp; touches no memory.
    unsafe {
        std::arch::asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack, preserves_flags))
    };
    sp
}

/// Whether the current stack pointer lies on the tracer stack ending at
/// `top`.
#[inline(always)]
fn on(top: u64) -> bool {
    let sp = sp();
    sp <= top && sp > top - SIZE as u64
}

/// The state of one switched call, on the caller's stack.
struct Call<F, R> {
    f: Option<F>,
    r: Option<R>,
}

extern "C" fn enter<F: FnOnce() -> R, R>(c: *mut Call<F, R>) {
    // SAFETY: `switch` passes its own live `Call`, which nothing else
    // touches until this returns.
    let c = unsafe { &mut *c };
    if let Some(f) = c.f.take() {
        c.r = Some(f());
    }
}

#[inline(never)]
fn switch<F: FnOnce() -> R, R>(top: u64, f: F) -> R {
    let mut c = Call {
        f: Some(f),
        r: None,
    };
    let call: *mut Call<F, R> = &mut c;
    // SAFETY: `top` is the 16-byte aligned end of a mapped, writable stack
    // that no other code uses while we are on it (one per thread, and `run`
    // does not switch when already on it). rsp is kept in r12, which the
    // callee preserves (C ABI), and restored before the block ends; `enter`
    // is an `extern "C"` function taking the pointer in rdi. The caller's
    // red zone is not touched (the call pushes on the other stack). The
    // word at [rsp], the lowest of this frame (`c` lies above it), is read
    // and written back unchanged, so the thread's stack is mapped down to
    // it before `f` runs elsewhere and writes `c.r`: under valgrind a stack
    // grows only on a fault near the stack pointer, which is then on the
    // other stack (a load alone may be dropped by its translator).
    unsafe {
        std::arch::asm!(
            "mov r12, [rsp]",
            "mov [rsp], r12",
            "mov r12, rsp",
            "mov rsp, {top}",
            "call {enter}",
            "mov rsp, r12",
            top = in(reg) top,
            enter = in(reg) enter::<F, R> as *const () as usize,
            in("rdi") call,
            out("r12") _,
            clobber_abi("C"),
        );
    }
    match c.r {
        Some(r) => r,
        // `f` ran to completion (a panic aborts the process).
        None => std::process::abort(),
    }
}

/// Its destructor unmaps a thread's tracer stack.
static KEY: ThreadKey = ThreadKey::new(release);

/// Map a tracer stack for this thread and register its release; its top,
/// or [`UNUSABLE`].
fn map() -> u64 {
    // Without the key the stack would outlive the thread: do without.
    let Some(k) = crate::guard::hidden(|| KEY.get()) else {
        return UNUSABLE;
    };
    let len = SIZE + GUARD;
    // SAFETY: a fresh private anonymous mapping; nothing else refers to it.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return UNUSABLE;
    }
    // SAFETY: the first page of our own mapping. A failed guard page leaves
    // an ordinary stack.
    unsafe { libc::mprotect(base, GUARD, libc::PROT_NONE) };
    // pthread_setspecific may allocate (keys past the first 32): hidden.
    // SAFETY: a valid key; the value is our own mapping.
    if crate::guard::hidden(|| unsafe { libc::pthread_setspecific(k, base) }) != 0 {
        // SAFETY: unmaps the mapping made above, never used.
        unsafe { libc::munmap(base, len) };
        return UNUSABLE;
    }
    base as u64 + len as u64 - TOP_OFFSET
}

/// Key destructor: the thread is exiting. Later events of this thread (other
/// destructors that allocate) run on its own stack.
extern "C" fn release(base: *mut libc::c_void) {
    let _ = crate::per_thread::with(|p| p.tracer_stack.set(UNUSABLE));
    if !base.is_null() {
        // SAFETY: `base` is the mapping `map` made for this thread, which
        // no code runs on now (we are on the thread's own stack).
        unsafe { libc::munmap(base, SIZE + GUARD) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_on_its_own_stack_and_comes_back() {
        std::thread::spawn(|| {
            let outside = sp();
            let g = Guard::acquire().unwrap();
            let (inside, nested, v) = run(&g, || {
                let inside = sp();
                // Already on it: no second switch.
                let nested = run(&g, sp);
                (inside, nested, vec![1u8; 100].len())
            });
            assert_eq!(v, 100);
            let top = g.per_thread().tracer_stack.get();
            assert!(top > 1);
            assert!(
                inside < top && inside > top - SIZE as u64,
                "{inside:#x} {top:#x}"
            );
            assert!(nested < top && nested > top - SIZE as u64);
            assert!(outside.abs_diff(inside) > 4096);
            // Deep work fits: 200 KiB of frames.
            fn deep(n: u32) -> u64 {
                let buf = std::hint::black_box([n as u8; 1024]);
                if n == 0 {
                    buf[0] as u64
                } else {
                    deep(n - 1) + buf[1] as u64
                }
            }
            assert_eq!(run(&g, || deep(200)), (0..=200u64).sum::<u64>());
            assert!(sp().abs_diff(outside) < 4096);
        })
        .join()
        .unwrap();
    }

    /// A 64 KiB thread with 16 KiB of its stack in use runs 128 KiB of
    /// tracer work.
    #[test]
    fn a_small_thread_stack_is_not_used() {
        let t = std::thread::Builder::new()
            .stack_size(64 << 10)
            .spawn(|| {
                let g = Guard::acquire().unwrap();
                let used = std::hint::black_box([7u8; 16 << 10]);
                run(&g, || {
                    let big = std::hint::black_box([used[0]; 128 << 10]);
                    big.iter().map(|&b| b as u64).sum::<u64>()
                })
            })
            .unwrap();
        assert_eq!(t.join().unwrap(), 7 * (128 << 10));
    }
}
