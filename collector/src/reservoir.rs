//! A bounded uniform sample of events (reservoir sampling, Vitter's
//! Algorithm R) with a deterministic seeded generator: the same event stream
//! always gives the same sample. The table is allocated once, at the first
//! event, with exactly `cap` slots, and never grows.

/// SplitMix64: small, fast, deterministic.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0), by multiply-shift.
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// Seed of every reservoir (determinism across runs).
pub const SEED: u64 = 0x5745_4D48_4343_5400;

#[derive(Clone, Debug)]
pub struct Reservoir<T> {
    cap: usize,
    seen: u64,
    rng: SplitMix64,
    items: Vec<T>,
}

impl<T: Copy> Reservoir<T> {
    pub fn new(cap: usize) -> Reservoir<T> {
        Reservoir::with_seed(cap, SEED)
    }

    pub fn with_seed(cap: usize, seed: u64) -> Reservoir<T> {
        Reservoir {
            cap,
            seen: 0,
            rng: SplitMix64::new(seed),
            items: Vec::new(),
        }
    }

    /// Offer one event; each of the `seen` events so far is held with
    /// probability `cap / seen`.
    #[inline]
    pub fn offer(&mut self, item: T) {
        if self.cap == 0 {
            return;
        }
        self.seen = self.seen.saturating_add(1);
        if self.items.len() < self.cap {
            self.fill(item);
        } else {
            let j = self.rng.below(self.seen);
            if let Some(slot) = self.items.get_mut(j as usize) {
                *slot = item;
            }
        }
    }

    /// A slot of the sample is still free: `item` takes it.
    #[inline(never)]
    fn fill(&mut self, item: T) {
        if self.items.capacity() == 0 {
            self.items.reserve_exact(self.cap);
        }
        self.items.push(item);
    }

    pub fn items(&self) -> &[T] {
        &self.items
    }

    /// Events offered.
    pub fn seen(&self) -> u64 {
        self.seen
    }

    pub fn cap(&self) -> usize {
        self.cap
    }

    pub fn memory_bytes(&self) -> u64 {
        (self.items.capacity() * std::mem::size_of::<T>()) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_everything_below_the_cap() {
        let mut r = Reservoir::new(10);
        for i in 0..7u64 {
            r.offer(i);
        }
        assert_eq!(r.items(), &[0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(r.seen(), 7);
    }

    #[test]
    fn bounded_and_never_grows_after_the_cap() {
        let mut r = Reservoir::new(100);
        r.offer(0u64);
        let cap = r.items.capacity();
        assert_eq!(cap, 100);
        for i in 1..1_000_000u64 {
            r.offer(i);
        }
        assert_eq!(r.items().len(), 100);
        assert_eq!(r.items.capacity(), cap);
        assert_eq!(r.seen(), 1_000_000);
    }

    #[test]
    fn deterministic() {
        let run = || {
            let mut r = Reservoir::new(50);
            for i in 0..10_000u64 {
                r.offer(i);
            }
            r.items().to_vec()
        };
        assert_eq!(run(), run());
    }

    #[test]
    fn roughly_uniform() {
        // 20 000 runs of a reservoir of 10 over 100 items: each item is kept
        // with probability 0.1, so about 2000 times (σ ≈ 42).
        let mut hits = [0u32; 100];
        for seed in 0..20_000u64 {
            let mut r = Reservoir::with_seed(10, seed.wrapping_mul(0x9E37_79B9));
            for i in 0..100usize {
                r.offer(i);
            }
            for &i in r.items() {
                hits[i] += 1;
            }
        }
        for (i, &h) in hits.iter().enumerate() {
            assert!((1750..2250).contains(&h), "item {i} kept {h} times");
        }
    }

    #[test]
    fn zero_cap_keeps_nothing() {
        let mut r = Reservoir::new(0);
        r.offer(1u8);
        assert!(r.items().is_empty());
        assert_eq!(r.memory_bytes(), 0);
    }

    #[test]
    fn below_is_in_range() {
        let mut g = SplitMix64::new(1);
        for n in 1..1000u64 {
            assert!(g.below(n) < n);
        }
    }
}
