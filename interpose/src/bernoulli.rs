//! Sampling each of a thread's captures with probability `p`, independently
//! (which of them `WMHCCT_VALIDATE` also unwinds in full), drawn as the gaps
//! between the sampled ones: a capture that is not sampled costs a
//! decrement and a test, not a random draw and a floating-point compare.
//!
//! The gap to the next sampled capture is geometric, `P(gap = k) =
//! (1 - p)^(k - 1) p` for `k ≥ 1`, which makes the sampled captures the same
//! Bernoulli process as a draw per capture.

pub struct Bernoulli {
    p: f64,
    /// Captures until the next sampled one, counting it (≥ 1); `u64::MAX`
    /// when `p` is 0.
    next_in: u64,
    /// xorshift64* state, never 0.
    rng: u64,
}

impl Bernoulli {
    /// `p` outside (0, 1] samples never (≤ 0, or not a number) or always
    /// (≥ 1). `seed` picks the sequence (0 is replaced).
    pub fn new(p: f64, seed: u64) -> Bernoulli {
        let mut b = Bernoulli {
            p: if p.is_nan() { 0.0 } else { p },
            next_in: 0,
            rng: seed | 1,
        };
        b.next_in = b.gap();
        b
    }

    /// Whether this capture is sampled.
    #[inline(always)]
    pub fn take(&mut self) -> bool {
        if self.next_in > 1 {
            self.next_in -= 1;
            false
        } else {
            self.sampled()
        }
    }

    /// The count ran down: this capture is sampled, unless `p` is 0 (then
    /// it ran down over 2^64 captures, and starts again).
    #[cold]
    fn sampled(&mut self) -> bool {
        self.next_in = self.gap();
        self.p > 0.0
    }

    /// A geometric gap: `floor(ln U / ln(1 - p)) + 1` with `U` uniform in
    /// (0, 1], so `P(gap > k) = P(U ≤ (1 - p)^k) = (1 - p)^k`.
    fn gap(&mut self) -> u64 {
        if self.p <= 0.0 {
            return u64::MAX;
        }
        if self.p >= 1.0 {
            return 1;
        }
        let u = ((self.next_random() >> 11) + 1) as f64 / (1u64 << 53) as f64;
        let k = (u.ln() / (-self.p).ln_1p()).floor();
        // `as` saturates: a gap beyond 2^64 captures is never.
        (k as u64).saturating_add(1)
    }

    fn next_random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(p: f64, n: u64, seed: u64) -> u64 {
        let mut b = Bernoulli::new(p, seed);
        (0..n).filter(|_| b.take()).count() as u64
    }

    #[test]
    fn never_and_always() {
        assert_eq!(count(0.0, 100_000, 7), 0);
        assert_eq!(count(-1.0, 1000, 7), 0);
        assert_eq!(count(f64::NAN, 1000, 7), 0);
        assert_eq!(count(1.0, 1000, 7), 1000);
        assert_eq!(count(2.0, 1000, 7), 1000);
    }

    /// The sampled fraction is `p` (within five standard deviations), for
    /// the default 0.001 and for others, over several seeds.
    #[test]
    fn samples_a_fraction_p() {
        for (p, n) in [(0.001, 4_000_000u64), (0.01, 1_000_000), (0.5, 200_000)] {
            for seed in [1u64, 42, 0xdead_beef] {
                let got = count(p, n, seed) as f64;
                let mean = p * n as f64;
                let sd = (n as f64 * p * (1.0 - p)).sqrt();
                assert!(
                    (got - mean).abs() <= 5.0 * sd,
                    "p {p}, seed {seed}: {got} sampled of {n}, expected {mean} ± {sd}"
                );
            }
        }
    }

    /// Gaps are geometric: one gap in ten or more with `p = 0.1` has
    /// probability 0.9^9 ≈ 0.387, and gaps of 1 have probability 0.1.
    #[test]
    fn gaps_are_geometric() {
        let mut b = Bernoulli::new(0.1, 3);
        let (mut gaps, mut long, mut one) = (0u64, 0u64, 0u64);
        let mut since = 0u64;
        for _ in 0..2_000_000 {
            since += 1;
            if b.take() {
                gaps += 1;
                long += u64::from(since >= 10);
                one += u64::from(since == 1);
                since = 0;
            }
        }
        let long = long as f64 / gaps as f64;
        let one = one as f64 / gaps as f64;
        assert!((long - 0.9f64.powi(9)).abs() < 0.01, "P(gap ≥ 10) = {long}");
        assert!((one - 0.1).abs() < 0.01, "P(gap = 1) = {one}");
    }
}
