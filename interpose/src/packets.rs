//! The collector thread (`WMHCCT_COLLECTOR=thread`, or `auto`, the
//! default, where the process has a spare CPU: `placement.rs`): the
//! parallel-CCT paper's packets, for processes with a spare core.
//!
//! Inline, a thread records each event into the collector itself, under the
//! core lock. With a collector thread, the thread that
//! made the event captures its stack as usual, then encodes the event
//! (`wmhcct_collector::packet`) into one process-wide ring under the
//! *front* lock and returns to the program; the collector thread applies the
//! records in ring order under the core (*back*) lock.
//!
//! - **Order.** One ring, written under one lock, holds every thread's
//!   events in the order they happened: a `free` is pushed before glibc
//!   gets the block back, so a later `malloc` that returns the same address
//!   is pushed after it. Anything that touches the collector directly (MPI
//!   calls, a signal handler's calls, thread exit, the report) takes the
//!   front lock, then the core lock, and applies every record still in the
//!   ring first ([`crate::tracer::lock_ordered`]). Locks are always taken
//!   front → back.
//! - **Bounded memory, no dependence on the collector thread.** A full ring
//!   makes the pushing thread apply the pending records itself, so the ring
//!   never grows and events are recorded even if the collector thread never
//!   runs (a busy core, a stopped thread).
//! - **Sleeping.** An idle collector thread sleeps on a futex; a pushing
//!   thread looks for a sleeper every [`WAKE_EVERY`] records (one fence),
//!   and a sleeper wakes on its own after [`SLEEP_NS`].
//! - **fork.** The child has no collector thread: the atfork handler applies
//!   the ring in the child and the child records inline from then on.
//!
//! The ring is single-producer (whoever holds the front lock) and
//! single-consumer (whoever holds the core lock): `tail` is written only by
//! the producer, `head` only by the consumer.

use std::cell::UnsafeCell;
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};

use wmhcct_collector::packet::{self, Decoded, Event};
use wmhcct_unwinder::UnwindStats;

use crate::biased_lock::BiasedMutex;
use crate::shared_clock::SharedClock;
use crate::thread::CursorCell;
use crate::tracer::Core;

/// Ring capacity in words (1 MiB); a record holds at most
/// `MAX_DEPTH_LIMIT + 9` words, far less than half of it.
const RING_WORDS: usize = 1 << 17;
/// A pushing thread looks for a sleeping collector every this many records.
pub const WAKE_EVERY: u32 = 512;
/// A pushing thread publishes its records every this many: the collector
/// thread polls the published position, so that cache line and the records
/// themselves move to the other core in batches rather than per record.
const PUBLISH_EVERY: u32 = 32;
/// Records the collector thread applies per hold of the core lock.
const BATCH: usize = 4096;
/// Records the collector thread applies between two publications of its
/// clock (`shared_clock.rs`): a few microseconds' work.
const CLOCK_EVERY: usize = 128;
/// Polls of an empty ring before the collector thread sleeps (about 50 µs
/// here): while the program allocates steadily, the collector thread stays
/// awake and the program's thread makes no wake-up system calls.
const SPINS: u32 = 2048;
/// Words the collector thread lets pile up before it applies them, unless
/// it just woke up.
const MIN_WORDS: u64 = 2048;
/// Longest sleep of the collector thread.
pub const SLEEP_NS: i64 = 100_000_000;

/// What the front lock protects besides the ring's producer side: the
/// recording threads' unwind statistics, moved into the core by
/// `tracer::settle`.
#[derive(Default)]
pub struct Front {
    pub unwind: UnwindStats,
    pub threads: u32,
    pushes: u32,
    /// Words written to the ring; published to the collector thread
    /// (`Ring::tail`) every [`PUBLISH_EVERY`] records and before any drain.
    written: u64,
    /// Bytes of the allocations pushed since every record was last applied
    /// ([`Front::rearm`]): the live heap has grown by at most this much.
    alloc_since: u64,
    /// When `alloc_since` reaches this, the heap may have reached the
    /// next snapshot's threshold: the pushing thread applies the ring and
    /// takes the snapshot if due, as an inline tracer does in the
    /// allocation that crossed it. (0 until first armed.)
    check_at: u64,
}

impl Front {
    /// Count an allocation of `size` bytes pushed; whether a snapshot may
    /// now be due (`report::snapshot_ordered`).
    #[inline(always)]
    pub fn allocated(&mut self, size: u64) -> bool {
        self.alloc_since = self.alloc_since.saturating_add(size);
        self.alloc_since >= self.check_at
    }

    /// Every record is applied: the live heap is `live` and the next
    /// snapshot is due at `snapshot_at` (`u64::MAX`: none). The pushing
    /// threads check again once they have allocated the headroom, but not
    /// before a 64th of the threshold or 256 KiB, so that a heap that stays
    /// just below it does not make every allocation apply the ring (a
    /// snapshot is then at most that much late).
    pub fn rearm(&mut self, live: u64, snapshot_at: u64) {
        self.alloc_since = 0;
        let step = (snapshot_at / 64).max(256 << 10);
        self.check_at = snapshot_at.saturating_sub(live).max(step);
    }
}

/// A value alone on its cache lines (two: adjacent-line prefetch), so the
/// producer's and the consumer's indices do not share one.
#[repr(align(128))]
struct Line<T>(T);

impl<T> std::ops::Deref for Line<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

struct Ring {
    buf: Box<[UnsafeCell<u64>]>,
    /// Words consumed (written by the consumer only).
    head: Line<AtomicU64>,
    /// Words written (written by the producer only).
    tail: Line<AtomicU64>,
    /// The producer's last reading of `head` (front lock): read `head`
    /// again only when this says the ring is full.
    seen_head: Line<UnsafeCell<u64>>,
}

// SAFETY: the producer (front lock) only writes words in [tail, head + cap)
// (from `tail` up: its unpublished words are above `tail` too), the
// consumer (core lock) only reads words in [head, tail); each moves its
// index with a release store after its accesses, and reads the other's with
// an acquire load before them.
unsafe impl Sync for Ring {}

impl Ring {
    fn new() -> Ring {
        Ring {
            buf: (0..RING_WORDS).map(|_| UnsafeCell::new(0)).collect(),
            head: Line(AtomicU64::new(0)),
            tail: Line(AtomicU64::new(0)),
            seen_head: Line(UnsafeCell::new(0)),
        }
    }

    /// Words written and not yet consumed.
    fn pending(&self) -> u64 {
        self.tail.load(Ordering::Acquire) - self.head.load(Ordering::Relaxed)
    }
}

pub struct Packets {
    pub front: BiasedMutex<Front>,
    ring: Ring,
    /// Events go to the ring (false without a collector thread: it could
    /// not be started, or this is a forked child).
    active: AtomicBool,
    /// The collector thread sleeps on this word (1: asleep or about to be).
    sleeping: AtomicU32,
    /// The collector thread's clock, lent to the recording threads while it
    /// is awake (`shared_clock.rs`).
    pub clock: SharedClock,
}

impl Packets {
    pub fn new() -> Packets {
        Packets {
            front: BiasedMutex::new(Front::default()),
            ring: Ring::new(),
            active: AtomicBool::new(false),
            sleeping: AtomicU32::new(0),
            clock: SharedClock::new(),
        }
    }

    /// Whether events go to the collector thread.
    #[inline]
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Start recording through the ring (the collector thread runs), or stop
    /// (a forked child, once the ring is applied: `tracer::settle`).
    pub fn set_active(&self, on: bool) {
        self.active.store(on, Ordering::Release);
    }

    /// Hand `ev` to the collector thread. `front` is the front lock's
    /// content (the caller holds it); with the ring full, the pending
    /// records are applied here, under `core`.
    #[inline(always)]
    pub fn push(&self, front: &mut Front, core: &BiasedMutex<Core>, ev: &Event) {
        let cap = RING_WORDS as u64;
        let len = ev.len() as u64;
        // SAFETY: only the producer, under the front lock, touches it.
        let seen_head = unsafe { &mut *self.ring.seen_head.get() };
        loop {
            let tail = front.written;
            let at = tail % cap;
            let to_end = cap - at;
            let need = if len <= to_end { len } else { to_end + len };
            if cap - (tail - *seen_head) < need {
                *seen_head = self.ring.head.load(Ordering::Acquire);
            }
            if cap - (tail - *seen_head) >= need {
                let (start, tail) = if len <= to_end {
                    (at, tail)
                } else {
                    // SAFETY: the word at `at` is in the producer's part
                    // ([tail, head + cap)); the front lock is held.
                    unsafe { *self.ring.buf[at as usize].get() = packet::pad() };
                    (0, tail + to_end)
                };
                // SAFETY: words [start, start + len) lie in the producer's
                // part of the ring (checked above), are contiguous cells of
                // `buf`, and no other reference to them exists: the front
                // lock is held and the consumer reads only below `tail`.
                let out = unsafe {
                    std::slice::from_raw_parts_mut(
                        self.ring.buf[start as usize].get(),
                        len as usize,
                    )
                };
                ev.encode(out);
                front.written = tail + len;
                break;
            }
            // Full: apply what is pending, here.
            self.publish(front);
            self.drain(&mut core.lock(), usize::MAX);
        }
        front.pushes = front.pushes.wrapping_add(1);
        if front.pushes.is_multiple_of(PUBLISH_EVERY) {
            self.publish(front);
        }
        if front.pushes.is_multiple_of(WAKE_EVERY) {
            // Pairs with the fence in `sleep`: either the sleeper sees this
            // record, or this sees the sleeper.
            fence(Ordering::SeqCst);
            if self.sleeping.load(Ordering::Relaxed) != 0 {
                self.sleeping.store(0, Ordering::Relaxed);
                futex_wake(&self.sleeping);
            }
        }
    }

    /// Make every record written so far visible to the consumer (the caller
    /// holds the front lock).
    pub fn publish(&self, front: &Front) {
        self.ring.tail.store(front.written, Ordering::Release);
    }

    /// Apply up to `limit` published records from the ring to `core` (the caller holds
    /// the core lock). Returns how many were applied.
    pub fn drain(&self, core: &mut Core, limit: usize) -> usize {
        let cap = RING_WORDS as u64;
        let tail = self.ring.tail.load(Ordering::Acquire);
        let mut head = self.ring.head.load(Ordering::Relaxed);
        let mut n = 0;
        while head != tail && n < limit {
            let at = head % cap;
            let avail = (tail - head).min(cap - at);
            // SAFETY: words [head, tail) were written by the producer before
            // its release store of `tail`, which we acquired; it does not
            // touch them until we move `head` past them. The core lock makes
            // us the only consumer.
            let words = unsafe {
                std::slice::from_raw_parts(self.ring.buf[at as usize].get(), avail as usize)
            };
            match packet::decode(words) {
                Ok(Decoded::Pad) => head += cap - at,
                Ok(Decoded::Event(ev, len)) => {
                    let Core {
                        collector, cursors, ..
                    } = core;
                    let cursor = ev
                        .cursor()
                        // SAFETY: the token came from a live `CursorCell`:
                        // a thread's state is freed only after the ring is
                        // drained (`tracer::thread_exit`), and the core lock
                        // (`cursors`) is held.
                        .map(|token| unsafe { CursorCell::from_token(token, cursors) });
                    ev.apply(collector, cursor);
                    head += len as u64;
                    n += 1;
                }
                Err(e) => {
                    // Only a tracer bug can get here: drop the rest rather
                    // than misread it.
                    crate::diag::message(&[
                        "internal error in the collector thread's ring (",
                        &e.to_string(),
                        "); events since are missing from the report",
                    ]);
                    head = tail;
                }
            }
        }
        self.ring.head.store(head, Ordering::Release);
        n
    }

    fn pending(&self) -> u64 {
        self.ring.pending()
    }

    /// Sleep until woken or [`SLEEP_NS`] passed, unless records arrived.
    fn sleep(&self) {
        self.clock.withdraw();
        self.sleeping.store(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        if self.pending() == 0 {
            futex_wait(&self.sleeping, 1, SLEEP_NS);
        }
        self.sleeping.store(0, Ordering::Relaxed);
    }
}

impl Default for Packets {
    fn default() -> Self {
        Packets::new()
    }
}

fn futex_wait(word: &AtomicU32, expected: u32, timeout_ns: i64) {
    let ts = libc::timespec {
        tv_sec: timeout_ns / 1_000_000_000,
        tv_nsec: timeout_ns % 1_000_000_000,
    };
    // SAFETY: FUTEX_WAIT on a live, aligned u32 with a local timeout; it
    // returns at once if the word no longer holds `expected`.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            &ts as *const libc::timespec,
        );
    }
}

fn futex_wake(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE on a live, aligned u32; touches no other memory.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            1,
        );
    }
}

/// The collector thread: applies records while the tracer runs.
fn collect(t: &'static crate::tracer::Tracer, p: &'static Packets) {
    let mut idle = 0u32;
    // After a sleep, whatever is pending is applied; while polling, only a
    // good run of records: lines the producer is still filling are left
    // alone, so they cross between the cores once.
    let mut woke = false;
    loop {
        p.clock.publish(crate::clock::now_ns());
        let pending = p.pending();
        if pending >= MIN_WORDS || (woke && pending > 0) {
            woke = false;
            let snapshot_due = {
                let mut core = t.core.lock();
                // The report is taken under the core lock: nothing is
                // applied after it.
                if crate::tracer::running().is_none() {
                    p.clock.withdraw();
                    return;
                }
                let mut left = BATCH;
                while left > 0 {
                    let n = p.drain(&mut core, left.min(CLOCK_EVERY));
                    p.clock.publish(crate::clock::now_ns());
                    if n == 0 {
                        break;
                    }
                    left -= n;
                }
                core.collector.live_bytes() >= core.snapshot_at
            };
            if snapshot_due {
                p.clock.withdraw();
                crate::report::snapshot_ordered(t);
            }
            idle = 0;
            continue;
        }
        if crate::tracer::running().is_none() {
            p.clock.withdraw();
            return;
        }
        idle += 1;
        if idle < SPINS {
            std::hint::spin_loop();
        } else {
            if woke && p.pending() == 0 && only_thread_left() {
                // The program's threads are all gone (its main thread
                // ended with pthread_exit, the others since): as the last
                // thread, this one returns, and glibc ends the process with
                // exit(0) as it would have without the tracer (exit
                // handlers and the report run here). Staying would keep
                // the process alive forever.
                p.clock.withdraw();
                return;
            }
            p.sleep();
            woke = true;
            idle = 0;
        }
    }
}

/// Whether the collector thread is the process's last live thread: the
/// main thread has ended (its task, the process's leader, is a zombie
/// until the process ends) and the only other one counted is this one.
/// Checked once per idle sleep ([`SLEEP_NS`]), one read of
/// `/proc/self/stat`.
fn only_thread_left() -> bool {
    std::fs::read_to_string("/proc/self/stat").is_ok_and(|stat| leader_gone_alone(&stat))
}

/// [`only_thread_left`] from the text of `/proc/self/stat`: the state
/// (field 3) is the leader's, `num_threads` (field 20) counts the zombie
/// leader and every live thread.
fn leader_gone_alone(stat: &str) -> bool {
    use crate::output::stat_field;
    let threads = stat_field(stat, 20).and_then(|n| n.parse::<u64>().ok());
    matches!(stat_field(stat, 3), Some("Z" | "X")) && threads.is_some_and(|n| n <= 2)
}

extern "C" fn collector_main(_: *mut libc::c_void) -> *mut libc::c_void {
    // The thread's own work never traced: every allocator call it makes
    // (none on purpose; its tables grow through glibc directly) is hidden.
    let Some(_g) = crate::guard::Guard::acquire() else {
        return std::ptr::null_mut();
    };
    if let Some(t) = crate::tracer::running() {
        if let Some(p) = t.packets.as_ref() {
            collect(t, p);
        }
    }
    std::ptr::null_mut()
}

/// Start the collector thread and route events to it; on failure stay
/// inline, and say so if the user asked for the thread (`tell`). Signals
/// are blocked in the new thread (it inherits the mask in force at its
/// creation), so the program's signals never land there.
pub fn start(p: &Packets, tell: bool) {
    // SAFETY: sigset and pthread calls on locals; the thread function has
    // the required signature and takes no argument.
    let ok = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let mut th: libc::pthread_t = 0;
        // Its thread vector, which glibc allocates for it, is the
        // tracer's: not the first block of the program's heap.
        let rc = crate::sealed::call_kept(|| {
            libc::pthread_create(
                &mut th,
                std::ptr::null(),
                collector_main,
                std::ptr::null_mut(),
            )
        });
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if rc == 0 {
            libc::pthread_detach(th);
        }
        rc == 0
    };
    if ok {
        p.set_active(true);
    } else if tell {
        crate::diag::message(&[
            "WMHCCT_COLLECTOR=thread: could not start the collector thread; recording inline",
        ]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thread::{CursorAccess, CursorCell};
    use wmhcct_collector::{Collector, CollectorConfig};

    fn collector() -> Collector {
        Collector::new(CollectorConfig {
            phi: 0.01,
            epsilon: 0.002,
            exact: false,
            n_kinds: 8,
        })
    }

    fn core() -> Core {
        Core {
            collector: collector(),
            mpi: collector(),
            unwind: UnwindStats::default(),
            threads: 0,
            records: Vec::new(),
            generation: (0, 0),
            cursors: CursorAccess::new(),
            repeats: Default::default(),
            snapshot_at: u64::MAX,
        }
    }

    #[test]
    fn the_last_thread_is_seen_from_proc_stat() {
        let stat = |state: &str, threads: u32| {
            format!(
                "42 (a) b) {state} 1 42 42 0 -1 4194560 10 0 0 0 1 2 0 0 20 0 {threads} 0 9 1 1"
            )
        };
        assert!(leader_gone_alone(&stat("Z", 2)));
        assert!(leader_gone_alone(&stat("Z", 1)));
        assert!(!leader_gone_alone(&stat("Z", 3)), "another thread lives");
        assert!(!leader_gone_alone(&stat("S", 2)), "the main thread lives");
        assert!(!leader_gone_alone(&stat("R", 1)));
        assert!(!leader_gone_alone("garbage"));
        // This process: its main thread runs.
        assert!(!only_thread_left());
    }

    /// Frames of event `i`: 1 to 300 of them (records of 9 to 308 words,
    /// so records end at every offset and the ring wraps with padding).
    fn frames(i: u64) -> Vec<u64> {
        let n = 1 + (i * 7919) % 300;
        (0..n).map(|d| 0x40_0000 + (d * 13 + i % 5) * 16).collect()
    }

    /// With nobody consuming, a ring several times over full: the pushing
    /// thread applies what is pending whenever it finds the ring full, and
    /// the result is the collector that direct calls give.
    #[test]
    fn a_full_ring_is_applied_by_the_pusher_and_nothing_is_lost() {
        let p = Packets::new();
        let core = BiasedMutex::new(core());
        let cell = CursorCell::new(400);
        let mut direct = collector();
        let mut direct_cursor = wmhcct_collector::Cursor::new();
        let mut words = 0u64;
        for i in 1..=6000u64 {
            let f = frames(i);
            let ptr = 0x1000 * i;
            let alloc = Event::Alloc {
                cursor: cell.token(),
                stamp: i,
                kind: 1,
                unchanged: 0,
                kept: 0,
                ptr,
                size: i % 97,
                t_ns: i,
                frames: &f,
            };
            // Every sixth free a temporary one, through the ring as well.
            let (freed, temporary) = (if i % 3 == 0 { ptr } else { 0 }, i % 6 == 0);
            let free = Event::Free {
                kind: 4,
                ptr: freed,
                t_ns: i,
                temporary,
            };
            words += (alloc.len() + free.len()) as u64;
            p.push(&mut p.front.lock(), &core, &alloc);
            p.push(&mut p.front.lock(), &core, &free);
            direct_cursor.stamp_next(i);
            direct.on_alloc(&mut direct_cursor, 1, &f, 0, ptr, i % 97, i);
            direct.on_free(4, freed, i, temporary);
        }
        assert!(words > 4 * RING_WORDS as u64, "{words} words");
        p.publish(&p.front.lock());
        assert!(p.pending() > 0, "the last records wait for a consumer");
        let mut c = core.lock();
        p.drain(&mut c, usize::MAX);
        assert_eq!(p.pending(), 0);
        assert_eq!(c.collector.totals(), direct.totals());
        assert_eq!(c.collector.heap_stats(), direct.heap_stats());
        let key = |a: u64| wmhcct_format::FrameKey::Unknown(a);
        assert_eq!(
            c.collector.snapshot_tree("alloc", &mut |a| key(a)),
            direct.snapshot_tree("alloc", &mut |a| key(a))
        );
    }

    /// Records reach the consumer when published (every `PUBLISH_EVERY`
    /// pushes, or explicitly), and a drain stops after `limit` of them.
    #[test]
    fn drain_applies_published_records_up_to_a_limit() {
        let p = Packets::new();
        let core = BiasedMutex::new(core());
        let push = |i: u64| {
            let ev = Event::Free {
                kind: 4,
                ptr: 0,
                t_ns: i,
                temporary: false,
            };
            p.push(&mut p.front.lock(), &core, &ev);
        };
        for i in 0..PUBLISH_EVERY as u64 - 1 {
            push(i);
        }
        assert_eq!(p.pending(), 0, "not published yet");
        push(99);
        assert_eq!(
            p.pending(),
            3 * PUBLISH_EVERY as u64,
            "published with the 32nd"
        );
        assert_eq!(
            p.drain(&mut core.lock(), usize::MAX),
            PUBLISH_EVERY as usize
        );
        for i in 0..10u64 {
            push(i);
        }
        assert_eq!(p.drain(&mut core.lock(), usize::MAX), 0);
        p.publish(&p.front.lock());
        let mut c = core.lock();
        assert_eq!(p.drain(&mut c, 4), 4);
        assert_eq!(c.collector.totals()[4].0, PUBLISH_EVERY as u64 + 4);
        assert_eq!(p.drain(&mut c, usize::MAX), 6);
        assert_eq!(p.drain(&mut c, usize::MAX), 0);
        assert_eq!(c.collector.totals()[4].0, PUBLISH_EVERY as u64 + 10);
    }
}
