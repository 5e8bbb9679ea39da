//! The collector thread's clock, lent to the recording threads.
//!
//! Reading the event clock (`clock.rs`) costs a recording thread ~20 ns per
//! event on the machines measured: the TSC read itself and its conversion.
//! While a collector thread runs (`packets.rs`) it spends most of its time
//! polling the ring, so it reads the clock for them: it publishes its
//! reading whenever that has moved on by [`STEP_NS`], and withdraws it (0)
//! before it sleeps or takes a snapshot. A recording thread then stamps an
//! event with one load of a cache line that changes every [`STEP_NS`] at
//! most, instead of a clock read.
//!
//! **Resolution.** A stamp taken from the published clock is at most
//! [`STEP_NS`] plus one poll early, far below the time series' finest bin
//! (100 µs). Per thread, stamps never go backwards (the thread's own last
//! stamp is a lower bound, `clock::not_before`).
//!
//! **A stalled collector thread.** A collector thread that is descheduled
//! while awake stops publishing without withdrawing. So a recording thread
//! trusts the published clock for at most [`TRUSTED_EVENTS`] events after
//! one of its own clock reads found it within [`MAX_LAG_NS`]; a read that
//! finds it further behind makes every event read the clock until the
//! collector thread catches up. A stamp is therefore late by at most
//! [`MAX_LAG_NS`] plus the stall, and only for the thread's next
//! [`TRUSTED_EVENTS`] events.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::clock::Anchor;

/// The published clock moves on in steps of this many nanoseconds.
pub const STEP_NS: u64 = 10_000;
/// A published clock this far behind a thread's own reading is stale.
pub const MAX_LAG_NS: u64 = 100_000;
/// Events a thread stamps from the published clock between two of its own
/// clock reads.
pub const TRUSTED_EVENTS: u32 = 32;

/// Alone on its cache lines (two: adjacent-line prefetch), so that only a
/// publication invalidates the recording threads' copy.
#[repr(align(128))]
pub struct SharedClock {
    /// `CLOCK_MONOTONIC` nanoseconds as the collector thread last read them;
    /// 0: withdrawn.
    ns: AtomicU64,
}

impl SharedClock {
    pub const fn new() -> SharedClock {
        SharedClock {
            ns: AtomicU64::new(0),
        }
    }

    /// The collector thread's side: publish `now` if the published value is
    /// withdrawn or [`STEP_NS`] old.
    #[inline]
    pub fn publish(&self, now: u64) {
        let old = self.ns.load(Ordering::Relaxed);
        if old == 0 || now.saturating_sub(old) >= STEP_NS {
            self.ns.store(now.max(1), Ordering::Relaxed);
        }
    }

    /// The collector thread's side: stop lending the clock (it is about to
    /// sleep, take a snapshot or end).
    pub fn withdraw(&self) {
        self.ns.store(0, Ordering::Relaxed);
    }

    /// A recording thread's side: monotonic nanoseconds for its next event,
    /// from the published clock while the thread trusts it, else from
    /// `own` (a clock read with the thread's anchor). `trust`: the thread's
    /// events left before its next own read.
    #[inline]
    pub fn now(
        &self,
        anchor: &Cell<Anchor>,
        trust: &Cell<u32>,
        own: impl FnOnce(&Cell<Anchor>) -> u64,
    ) -> u64 {
        let shared = self.ns.load(Ordering::Relaxed);
        let left = trust.get();
        if shared != 0 && left != 0 {
            trust.set(left - 1);
            return crate::clock::not_before(anchor, shared);
        }
        let t = own(anchor);
        let fresh = shared != 0 && t.saturating_sub(shared) <= MAX_LAG_NS;
        trust.set(if fresh { TRUSTED_EVENTS } else { 0 });
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread's clock reads, counted, returning the given time.
    fn reader(at: u64, reads: &Cell<u32>) -> impl FnOnce(&Cell<Anchor>) -> u64 + '_ {
        move |a| {
            reads.set(reads.get() + 1);
            crate::clock::not_before(a, at)
        }
    }

    #[test]
    fn withdrawn_means_every_event_reads_its_own_clock() {
        let c = SharedClock::new();
        let (anchor, trust, reads) = (Cell::new(Anchor::ZERO), Cell::new(0), Cell::new(0));
        for i in 1..=50 {
            assert_eq!(c.now(&anchor, &trust, reader(i * 1000, &reads)), i * 1000);
        }
        assert_eq!(reads.get(), 50);
        assert_eq!(trust.get(), 0);
    }

    #[test]
    fn a_fresh_clock_stands_in_for_the_next_reads() {
        let c = SharedClock::new();
        let (anchor, trust, reads) = (Cell::new(Anchor::ZERO), Cell::new(0), Cell::new(0));
        c.publish(1_000_000);
        // The first event reads its own clock and finds the published one
        // close behind: the next TRUSTED_EVENTS come from the published one.
        assert_eq!(c.now(&anchor, &trust, reader(1_003_000, &reads)), 1_003_000);
        c.publish(1_020_000);
        for _ in 0..TRUSTED_EVENTS {
            let t = c.now(&anchor, &trust, reader(9_999_999, &reads));
            assert_eq!(t, 1_020_000);
        }
        assert_eq!(reads.get(), 1);
        // Then the thread reads its own clock again.
        assert_eq!(c.now(&anchor, &trust, reader(1_030_000, &reads)), 1_030_000);
        assert_eq!(reads.get(), 2);
    }

    #[test]
    fn stamps_never_go_back_behind_the_threads_own_reading() {
        let c = SharedClock::new();
        let (anchor, trust, reads) = (Cell::new(Anchor::ZERO), Cell::new(0), Cell::new(0));
        c.publish(5_000_000);
        assert_eq!(c.now(&anchor, &trust, reader(5_008_000, &reads)), 5_008_000);
        // The published clock is 8 µs behind what this thread saw.
        assert_eq!(c.now(&anchor, &trust, reader(0, &reads)), 5_008_000);
        c.publish(5_020_000);
        assert_eq!(c.now(&anchor, &trust, reader(0, &reads)), 5_020_000);
    }

    #[test]
    fn a_stale_clock_is_not_trusted_until_it_catches_up() {
        let c = SharedClock::new();
        let (anchor, trust, reads) = (Cell::new(Anchor::ZERO), Cell::new(0), Cell::new(0));
        c.publish(1_000_000);
        // The collector thread stalled: 5 ms behind.
        for i in 0..10 {
            let now = 6_000_000 + i * 1000;
            assert_eq!(c.now(&anchor, &trust, reader(now, &reads)), now);
        }
        assert_eq!(reads.get(), 10);
        c.publish(6_050_000);
        assert_eq!(c.now(&anchor, &trust, reader(6_060_000, &reads)), 6_060_000);
        assert_eq!(trust.get(), TRUSTED_EVENTS);
    }

    #[test]
    fn publication_moves_in_steps_and_withdrawal_is_immediate() {
        let c = SharedClock::new();
        c.publish(1_000_000);
        c.publish(1_000_000 + STEP_NS - 1);
        assert_eq!(c.ns.load(Ordering::Relaxed), 1_000_000);
        c.publish(1_000_000 + STEP_NS);
        assert_eq!(c.ns.load(Ordering::Relaxed), 1_000_000 + STEP_NS);
        c.withdraw();
        assert_eq!(c.ns.load(Ordering::Relaxed), 0);
        c.publish(3);
        assert_eq!(c.ns.load(Ordering::Relaxed), 3);
    }
}
