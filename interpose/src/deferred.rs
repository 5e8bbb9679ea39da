//! Allocator calls made by a signal handler that interrupted the tracer
//! while it was recording an event on the same thread (see `guard.rs`).
//!
//! The tracer's state may be mid-update and its lock held by the
//! interrupted code, so the handler only forwards the call to glibc and
//! queues it in a per-thread ring. When the interrupted thread leaves the
//! tracer (the guard is dropped), the queue is recorded: totals and heap
//! figures exactly as for any other call, under the "stack not captured"
//! pseudo-context (the handler's stack is gone by then). Calls that do not
//! fit in the ring (more than [`SLOTS`] in one interruption) are still
//! counted in the totals, with their bytes; only their heap accounting is
//! lost.
//!
//! The ring is touched by one thread only, by its normal code and by signal
//! handlers (possibly nested) on it: a handler runs to completion before
//! the code it interrupted resumes, so atomics with compare-exchange for
//! the producer side suffice.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Calls queued per interruption before they are only counted.
pub const SLOTS: usize = 32;
/// Kind indices the overflow counters cover (all of `ALLOC_KINDS`).
const KINDS: usize = 32;

const OP_ALLOC: u64 = 1;
const OP_FREE: u64 = 2;
const OP_REALLOC: u64 = 3;

/// One queued call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// An allocation of `kind` that returned `ptr` (0: failed) for `size`.
    Alloc { kind: u16, ptr: u64, size: u64 },
    /// A release of `ptr` through `kind`.
    Free { kind: u16, ptr: u64 },
    /// A resize of `old` to `size` that returned `new` (0: failed).
    Realloc {
        kind: u16,
        old: u64,
        new: u64,
        size: u64,
    },
}

pub struct Ring {
    /// Next slot to fill (producers: signal handlers).
    head: AtomicU32,
    /// Next slot to record (consumer: the thread leaving the tracer).
    tail: AtomicU32,
    tag: [AtomicU64; SLOTS],
    a: [AtomicU64; SLOTS],
    b: [AtomicU64; SLOTS],
    size: [AtomicU64; SLOTS],
    /// Calls that found the ring full: counts and bytes per kind.
    lost: AtomicU32,
    lost_count: [AtomicU64; KINDS],
    lost_bytes: [AtomicU64; KINDS],
}

impl Ring {
    pub const fn new() -> Ring {
        Ring {
            head: AtomicU32::new(0),
            tail: AtomicU32::new(0),
            tag: [const { AtomicU64::new(0) }; SLOTS],
            a: [const { AtomicU64::new(0) }; SLOTS],
            b: [const { AtomicU64::new(0) }; SLOTS],
            size: [const { AtomicU64::new(0) }; SLOTS],
            lost: AtomicU32::new(0),
            lost_count: [const { AtomicU64::new(0) }; KINDS],
            lost_bytes: [const { AtomicU64::new(0) }; KINDS],
        }
    }

    fn push(&self, op: Op) {
        let (tag, a, b, size) = match op {
            Op::Alloc { kind, ptr, size } => (OP_ALLOC << 32 | kind as u64, ptr, 0, size),
            Op::Free { kind, ptr } => (OP_FREE << 32 | kind as u64, ptr, 0, 0),
            Op::Realloc {
                kind,
                old,
                new,
                size,
            } => (OP_REALLOC << 32 | kind as u64, old, new, size),
        };
        // Reserve a slot; a nested handler may reserve in between.
        let mut h = self.head.load(Ordering::Acquire);
        loop {
            if h.wrapping_sub(self.tail.load(Ordering::Acquire)) as usize >= SLOTS {
                self.count_lost(op);
                return;
            }
            match self.head.compare_exchange(
                h,
                h.wrapping_add(1),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => h = now,
            }
        }
        // The consumer never runs before this handler returns, so the slot
        // is complete when it is read.
        let i = h as usize % SLOTS;
        self.tag[i].store(tag, Ordering::Relaxed);
        self.a[i].store(a, Ordering::Relaxed);
        self.b[i].store(b, Ordering::Relaxed);
        self.size[i].store(size, Ordering::Release);
    }

    fn count_lost(&self, op: Op) {
        let (kind, bytes) = match op {
            Op::Alloc { kind, ptr, size } => (kind, if ptr == 0 { 0 } else { size }),
            Op::Free { kind, .. } => (kind, 0),
            Op::Realloc {
                kind, new, size, ..
            } => (kind, if new == 0 { 0 } else { size }),
        };
        let k = (kind as usize).min(KINDS - 1);
        self.lost_count[k].fetch_add(1, Ordering::Relaxed);
        self.lost_bytes[k].fetch_add(bytes, Ordering::Relaxed);
        self.lost.store(1, Ordering::Release);
    }

    fn pending(&self) -> bool {
        self.head.load(Ordering::Relaxed) != self.tail.load(Ordering::Relaxed)
            || self.lost.load(Ordering::Relaxed) != 0
    }

    fn pop(&self) -> Option<Op> {
        let t = self.tail.load(Ordering::Relaxed);
        if t == self.head.load(Ordering::Acquire) {
            return None;
        }
        let i = t as usize % SLOTS;
        let tag = self.tag[i].load(Ordering::Relaxed);
        let (a, b) = (
            self.a[i].load(Ordering::Relaxed),
            self.b[i].load(Ordering::Relaxed),
        );
        let size = self.size[i].load(Ordering::Acquire);
        self.tail.store(t.wrapping_add(1), Ordering::Release);
        let kind = tag as u16;
        Some(match tag >> 32 {
            OP_ALLOC => Op::Alloc { kind, ptr: a, size },
            OP_FREE => Op::Free { kind, ptr: a },
            _ => Op::Realloc {
                kind,
                old: a,
                new: b,
                size,
            },
        })
    }

    fn take_lost(&self, f: &mut dyn FnMut(u16, u64, u64)) {
        if self.lost.swap(0, Ordering::AcqRel) == 0 {
            return;
        }
        for k in 0..KINDS {
            let n = self.lost_count[k].swap(0, Ordering::Relaxed);
            let bytes = self.lost_bytes[k].swap(0, Ordering::Relaxed);
            if n > 0 {
                f(k as u16, n, bytes);
            }
        }
    }
}

/// An allocator call the exported function could not record because the
/// thread is inside the tracer: queued if it interrupted event recording
/// (a signal handler's call), else ignored (the tracer's own hidden work).
#[inline]
pub fn interrupted(op: Op) {
    if crate::guard::interrupted_event() {
        // The thread's block (`per_thread.rs`): const, no destructor, usable
        // from a signal handler at any time.
        let _ = crate::per_thread::with(|p| p.ring.push(op));
    }
}

/// Called whenever a guard is dropped, with the thread's queue: record what
/// was queued meanwhile.
#[inline(always)]
pub fn after_guard(ring: &Ring) {
    if ring.pending() {
        drain();
    }
}

#[cold]
#[inline(never)]
fn drain() {
    let e = crate::errno::get();
    if let Some(g) = crate::guard::Guard::acquire_event() {
        crate::tracer::on_deferred(&g);
    }
    crate::errno::set(e);
}

/// Take the queued calls, oldest first, then the counts of those that did
/// not fit (`f(kind, count, bytes)`). A handler interrupting this adds to
/// the queue, which is emptied before returning.
pub fn take(each: &mut dyn FnMut(Op), lost: &mut dyn FnMut(u16, u64, u64)) {
    let _ = crate::per_thread::with(|p| loop {
        let r = &p.ring;
        while let Some(op) = r.pop() {
            each(op);
        }
        r.take_lost(lost);
        if !r.pending() {
            break;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_in_order_and_counts_overflow() {
        let r = Ring::new();
        assert!(!r.pending());
        let ops: Vec<Op> = (0..SLOTS as u64 + 5)
            .map(|i| match i % 3 {
                0 => Op::Alloc {
                    kind: 0,
                    ptr: 0x1000 + i,
                    size: 32,
                },
                1 => Op::Free {
                    kind: 4,
                    ptr: 0x1000 + i,
                },
                _ => Op::Realloc {
                    kind: 2,
                    old: i,
                    new: 0x2000 + i,
                    size: 64,
                },
            })
            .collect();
        for &op in &ops {
            r.push(op);
        }
        assert!(r.pending());
        let mut got = Vec::new();
        while let Some(op) = r.pop() {
            got.push(op);
        }
        assert_eq!(got, ops[..SLOTS]);
        let mut lost = Vec::new();
        r.take_lost(&mut |k, n, b| lost.push((k, n, b)));
        // ops SLOTS.. = indices 32..37: kinds by i % 3 (32 → 2, 33 → 0, ...).
        let mut want = std::collections::BTreeMap::new();
        for (i, op) in ops.iter().enumerate().skip(SLOTS) {
            let (k, b) = match *op {
                Op::Alloc { kind, size, .. } => (kind, size),
                Op::Free { kind, .. } => (kind, 0),
                Op::Realloc { kind, size, .. } => (kind, size),
            };
            let e = want.entry(k).or_insert((0u64, 0u64));
            e.0 += 1;
            e.1 += b;
            let _ = i;
        }
        let want: Vec<_> = want.into_iter().map(|(k, (n, b))| (k, n, b)).collect();
        assert_eq!(lost, want);
        assert!(!r.pending());
        // The ring wraps around.
        for round in 0..3 * SLOTS as u64 {
            let op = Op::Free {
                kind: 4,
                ptr: round,
            };
            r.push(op);
            assert_eq!(r.pop(), Some(op));
        }
        assert_eq!(r.pop(), None);
    }

    #[test]
    fn failed_calls_count_no_bytes_when_lost() {
        let r = Ring::new();
        for _ in 0..SLOTS {
            r.push(Op::Free { kind: 4, ptr: 1 });
        }
        r.push(Op::Alloc {
            kind: 0,
            ptr: 0,
            size: 1 << 40,
        });
        let mut lost = Vec::new();
        r.take_lost(&mut |k, n, b| lost.push((k, n, b)));
        assert_eq!(lost, [(0, 1, 0)]);
    }

    #[test]
    fn outside_event_recording_nothing_is_queued() {
        interrupted(Op::Free { kind: 4, ptr: 1 });
        assert!(crate::per_thread::with(|p| !p.ring.pending()).unwrap());
        let g = crate::guard::Guard::acquire().unwrap();
        interrupted(Op::Free { kind: 4, ptr: 1 });
        assert!(
            crate::per_thread::with(|p| !p.ring.pending()).unwrap(),
            "hidden work"
        );
        drop(g);
    }
}
