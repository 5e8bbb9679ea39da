//! The event clock: monotonic nanoseconds, cheap enough for every event.
//!
//! `clock_gettime` costs 20–50 ns in a VM, a third of the bare interposition
//! cost. Where the CPU has an invariant TSC, each thread reads the TSC and
//! extrapolates from its last `clock_gettime` anchor, re-anchoring once the
//! TSC has moved on by about a millisecond. The TSC rate is calibrated
//! against `CLOCK_MONOTONIC` over the process's lifetime (the longer the
//! baseline, the better). Per thread the clock never goes backwards. Without
//! an invariant TSC (or off x86_64) every call is a `clock_gettime`.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// TSC ticks after which a thread re-reads the system clock (~0.5–2 ms).
const REANCHOR_TICKS: u64 = 1 << 21;
/// Calibrate only from baselines of at least this many nanoseconds.
const MIN_BASELINE_NS: u64 = 2_000_000;

const TSC_UNKNOWN: u8 = 0;
const TSC_YES: u8 = 1;
const TSC_NO: u8 = 2;

static TSC: AtomicU8 = AtomicU8::new(TSC_UNKNOWN);
/// The process's first (tsc, ns) pair: the calibration baseline.
static BASE_TSC: AtomicU64 = AtomicU64::new(0);
static BASE_NS: AtomicU64 = AtomicU64::new(0);
/// Nanoseconds per tick, 32.32 fixed point; 0 until calibrated.
static MULT: AtomicU64 = AtomicU64::new(0);

/// A thread's anchor (kept in `per_thread.rs`).
#[derive(Clone, Copy)]
pub struct Anchor {
    tsc: u64,
    ns: u64,
    /// The last value returned, for monotonicity.
    last: u64,
}

impl Anchor {
    pub const ZERO: Anchor = Anchor {
        tsc: 0,
        ns: 0,
        last: 0,
    };
}

/// `CLOCK_MONOTONIC` in nanoseconds.
pub fn system_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes into a local timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(target_arch = "x86_64")]
fn invariant_tsc() -> bool {
    use std::arch::x86_64::__cpuid;
    // Leaf 0x8000_0000 reports the highest extended leaf; 0x8000_0007 EDX
    // bit 8 is "invariant TSC".
    let max_ext = __cpuid(0x8000_0000).eax;
    max_ext >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn rdtsc() -> u64 {
    // SAFETY: RDTSC has no preconditions; it only reads the time-stamp counter.
    unsafe { std::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
fn invariant_tsc() -> bool {
    false
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn rdtsc() -> u64 {
    0
}

fn tsc_usable() -> bool {
    match TSC.load(Ordering::Relaxed) {
        TSC_YES => true,
        TSC_NO => false,
        _ => {
            let ok = invariant_tsc();
            TSC.store(if ok { TSC_YES } else { TSC_NO }, Ordering::Relaxed);
            ok
        }
    }
}

/// Update the calibration with a fresh (tsc, ns) pair; returns the rate.
fn calibrate(tsc: u64, ns: u64) -> u64 {
    if BASE_NS.load(Ordering::Relaxed) == 0 {
        // First pair of the process (a race only picks one of two
        // near-identical baselines).
        BASE_TSC.store(tsc, Ordering::Relaxed);
        BASE_NS.store(ns.max(1), Ordering::Release);
        return MULT.load(Ordering::Relaxed);
    }
    let base_ns = BASE_NS.load(Ordering::Acquire);
    let base_tsc = BASE_TSC.load(Ordering::Relaxed);
    let (dns, dtsc) = (ns.saturating_sub(base_ns), tsc.wrapping_sub(base_tsc));
    if dns < MIN_BASELINE_NS || dtsc == 0 || dtsc > 1 << 62 {
        return MULT.load(Ordering::Relaxed);
    }
    let mult = (((dns as u128) << 32) / dtsc as u128).min(u64::MAX as u128) as u64;
    MULT.store(mult, Ordering::Relaxed);
    mult
}

/// Monotonic nanoseconds (an arbitrary origin, as `CLOCK_MONOTONIC`).
#[inline]
pub fn now_ns() -> u64 {
    crate::per_thread::with(|p| now_ns_at(&p.anchor)).unwrap_or_else(system_ns)
}

/// [`now_ns`] with the calling thread's anchor at hand.
#[inline]
pub fn now_ns_at(anchor: &Cell<Anchor>) -> u64 {
    if !tsc_usable() {
        return system_ns();
    }
    let tsc = rdtsc();
    let a = anchor.get();
    let dt = tsc.wrapping_sub(a.tsc);
    let mult = MULT.load(Ordering::Relaxed);
    let ns = if a.ns != 0 && mult != 0 && dt < REANCHOR_TICKS {
        a.ns + ((dt as u128 * mult as u128) >> 32) as u64
    } else {
        let sys = system_ns();
        calibrate(tsc, sys);
        anchor.set(Anchor {
            tsc,
            ns: sys,
            last: a.last,
        });
        sys
    };
    not_before(anchor, ns)
}

/// `ns`, or the thread's last returned value if that is later; becomes
/// the thread's last value (per thread the clock never goes backwards;
/// `shared_clock.rs` stamps through it too).
#[inline]
pub fn not_before(anchor: &Cell<Anchor>, ns: u64) -> u64 {
    let mut a = anchor.get();
    let out = ns.max(a.last);
    a.last = out;
    anchor.set(a);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_and_close_to_the_system_clock() {
        let mut prev = now_ns();
        let start = std::time::Instant::now();
        let mut worst = 0u64;
        while start.elapsed() < std::time::Duration::from_millis(60) {
            // Bracketed by two system-clock reads, so being descheduled
            // between the reads widens the window instead of failing.
            let before = system_ns();
            let t = now_ns();
            let after = system_ns();
            assert!(t >= prev, "went backwards: {prev} -> {t}");
            prev = t;
            let off = before.saturating_sub(t).max(t.saturating_sub(after));
            worst = worst.max(off);
        }
        // Extrapolation over at most ~2 ms with a rate calibrated over
        // milliseconds: far below 50 µs off.
        assert!(worst < 50_000, "off by {worst} ns");
    }

    #[test]
    fn measures_a_sleep() {
        let a = now_ns();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let b = now_ns();
        let d = b - a;
        assert!((19_000_000..200_000_000).contains(&d), "{d} ns");
    }
}
