//! The lazy priority queue of Space-Saving (Algorithm 2 of D'Elia et al.,
//! "Mining hot calling contexts in small space").
//!
//! The queue is an unordered array of item ids (MCCT node indices); the
//! counters live in the items themselves and are read through a closure. The
//! queue lazily keeps `min`, a value no larger than every monitored counter,
//! and `min_idx`, such that every slot before `min_idx` holds a counter larger
//! than `min`. Because monitored counters never decrease, `find_min` only has
//! to scan forward from `min_idx`, and rescans the whole array when it runs
//! off the end: O(1) amortised per update for unit weights.

/// Which of the two Space-Saving weights a counter belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weight {
    /// Number of events (weight 1 each).
    Count = 0,
    /// Bytes (weight = event size).
    Bytes = 1,
}

impl Weight {
    pub const ALL: [Weight; 2] = [Weight::Count, Weight::Bytes];

    pub fn index(self) -> usize {
        self as usize
    }
}

/// Slots per block of the queue's lower bounds (see [`LazyQueue`]).
const BLOCK: usize = 64;

/// A Space-Saving set of at most `capacity` monitored items.
///
/// The queue keeps its own copy of every monitored counter (`vals`, in slot
/// order, updated through [`LazyQueue::add`] and [`LazyQueue::replace`]), so
/// that a search for the minimum reads one contiguous array instead of one
/// MCCT node per slot, and a lower bound of the counters of each block of
/// [`BLOCK`] slots (`lows`), so that it skips every block that cannot hold
/// the minimum. Counters only grow and a replaced slot gets at least the
/// minimum it replaces, so a bound stays valid until a scan of its block
/// tightens it. [`LazyQueue::find_min`] returns exactly what Algorithm 2
/// returns (the first slot holding the minimum counter), so the summary
/// does not depend on the bounds.
#[derive(Clone, Debug)]
pub struct LazyQueue {
    slots: Vec<u32>,
    vals: Vec<u64>,
    lows: Vec<u64>,
    capacity: usize,
    min: u64,
    min_idx: usize,
}

impl LazyQueue {
    pub fn new(capacity: usize) -> LazyQueue {
        LazyQueue {
            slots: Vec::new(),
            vals: Vec::new(),
            lows: Vec::new(),
            capacity: capacity.max(1),
            min: 0,
            min_idx: 0,
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    pub fn is_full(&self) -> bool {
        self.slots.len() >= self.capacity
    }

    /// Item ids, in slot order.
    pub fn items(&self) -> &[u32] {
        &self.slots
    }

    /// The counter of the item in `slot` (0 for no slot).
    #[cfg(test)]
    pub fn value(&self, slot: u32) -> u64 {
        self.vals.get(slot as usize).copied().unwrap_or(0)
    }

    /// Bytes held by the slot, counter and bound arrays.
    pub fn memory_bytes(&self) -> u64 {
        (self.slots.capacity() * std::mem::size_of::<u32>()
            + (self.vals.capacity() + self.lows.capacity()) * std::mem::size_of::<u64>())
            as u64
    }

    /// Adds an item with counter `value` while the queue is not full;
    /// returns its slot, or `None` when full. When memory for another slot
    /// cannot be had (the process exhausted its address space) the queue
    /// keeps the size it has as its capacity: a coarser summary, never an
    /// aborted process.
    pub fn push(&mut self, item: u32, value: u64) -> Option<u32> {
        if self.is_full() {
            return None;
        }
        let block = self.slots.len() / BLOCK;
        // Arrays grow by doubling, but never past the capacity.
        let more = self
            .slots
            .len()
            .max(8)
            .min(self.capacity - self.slots.len());
        if (self.slots.len() == self.slots.capacity()
            && self.slots.try_reserve_exact(more).is_err())
            || (self.vals.len() == self.vals.capacity()
                && self.vals.try_reserve_exact(more).is_err())
            || (block == self.lows.len()
                && self.lows.len() == self.lows.capacity()
                && self.lows.try_reserve(1).is_err())
        {
            self.capacity = self.slots.len();
            self.min_idx = self.slots.len();
            return None;
        }
        self.slots.push(item);
        self.vals.push(value);
        if block == self.lows.len() {
            self.lows.push(value);
        } else if let Some(l) = self.lows.get_mut(block) {
            *l = (*l).min(value);
        }
        if self.is_full() {
            // Force a rescan on the first find-min.
            self.min_idx = self.slots.len();
        }
        Some((self.slots.len() - 1) as u32)
    }

    /// Adds `w` to the counter of the item in `slot`.
    #[inline]
    pub fn add(&mut self, slot: u32, w: u64) {
        if let Some(v) = self.vals.get_mut(slot as usize) {
            *v = v.saturating_add(w);
        }
    }

    /// Algorithm 2: the slot holding a minimum counter, with its value (the
    /// first such slot). `None` when empty.
    pub fn find_min(&mut self) -> Option<(u32, u64)> {
        if self.slots.is_empty() {
            return None;
        }
        if let Some(i) = self.first_equal(self.min_idx, self.min) {
            self.min_idx = i;
            return Some((i as u32, self.min));
        }
        let (i, m) = self.rescan();
        self.min_idx = i;
        self.min = m;
        Some((i as u32, m))
    }

    /// The first slot from `from` on whose counter is `min`, a value no
    /// counter is below. Tightens the bound of every block it reads whole.
    fn first_equal(&mut self, from: usize, min: u64) -> Option<usize> {
        let n = self.vals.len();
        let mut i = from;
        while i < n {
            let b = i / BLOCK;
            let end = ((b + 1) * BLOCK).min(n);
            let low = self.lows.get(b).copied().unwrap_or(0);
            if low > min {
                i = end;
                continue;
            }
            let whole = i == b * BLOCK;
            let vals = self.vals.get(i..end).unwrap_or(&[]);
            if let Some(k) = vals.iter().position(|&v| v == min) {
                return Some(i + k);
            }
            if whole {
                // No counter of the block is `min`, all are above it.
                if let (Some(l), Some(m)) = (self.lows.get_mut(b), vals.iter().min()) {
                    *l = *m;
                }
            }
            i = end;
        }
        None
    }

    /// The first slot holding the exact minimum counter, with its value
    /// (the queue is not empty). Reads only the blocks whose bound is below
    /// the best counter found before them, and makes their bounds exact.
    fn rescan(&mut self) -> (usize, u64) {
        let mut best = (0usize, u64::MAX);
        for (b, low) in self.lows.iter_mut().enumerate() {
            if *low >= best.1 {
                continue;
            }
            let start = b * BLOCK;
            let vals = self
                .vals
                .get(start..(start + BLOCK).min(self.vals.len()))
                .unwrap_or(&[]);
            let mut m = u64::MAX;
            let mut at = 0;
            for (k, &v) in vals.iter().enumerate() {
                if v < m {
                    m = v;
                    at = k;
                }
            }
            *low = m;
            if m < best.1 {
                best = (start + at, m);
            }
        }
        best
    }

    /// The exact minimum counter (for snapshots).
    pub fn scan_min(&self) -> Option<u64> {
        self.vals.iter().copied().min()
    }

    /// Puts `item` into `slot` (the victim's), whose counter is now `new_value`.
    /// A value below the current minimum becomes the new minimum (no other
    /// slot can hold it, since all are at least the old minimum).
    pub fn replace(&mut self, slot: u32, item: u32, new_value: u64) {
        let s = slot as usize;
        if s >= self.slots.len() {
            return;
        }
        self.slots[s] = item;
        if let Some(v) = self.vals.get_mut(s) {
            *v = new_value;
        }
        if let Some(l) = self.lows.get_mut(s / BLOCK) {
            *l = (*l).min(new_value);
        }
        if new_value < self.min {
            self.min = new_value;
            self.min_idx = s;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plain Space-Saving over u32 items using the lazy queue.
    fn run(stream: &[u32], cap: usize) -> Vec<(u32, u64)> {
        let mut counts = std::collections::HashMap::<u32, u64>::new();
        let mut slot_of = std::collections::HashMap::<u32, u32>::new();
        let mut q = LazyQueue::new(cap);
        for &x in stream {
            if let Some(&s) = slot_of.get(&x) {
                *counts.get_mut(&x).unwrap() += 1;
                q.add(s, 1);
                continue;
            }
            if let Some(s) = q.push(x, 1) {
                slot_of.insert(x, s);
                counts.insert(x, 1);
                continue;
            }
            let (s, m) = q.find_min().unwrap();
            let victim = q.items()[s as usize];
            assert_eq!(counts[&victim], m);
            assert_eq!(m, q.scan_min().unwrap(), "lazy min differs");
            slot_of.remove(&victim);
            counts.remove(&victim);
            counts.insert(x, m + 1);
            slot_of.insert(x, s);
            q.replace(s, x, m + 1);
        }
        let mut v: Vec<_> = counts.into_iter().collect();
        v.sort();
        v
    }

    #[test]
    fn lazy_min_is_exact_min() {
        let stream: Vec<u32> = (0..5000u32).map(|i| (i * 7919) % 37 + (i % 3)).collect();
        let out = run(&stream, 8);
        assert_eq!(out.len(), 8);
        let total: u64 = out.iter().map(|x| x.1).sum();
        assert_eq!(total, stream.len() as u64);
    }

    #[test]
    fn replace_below_min_becomes_min() {
        let vals = [5u64, 6, 7];
        let mut q = LazyQueue::new(3);
        for i in 0..3 {
            q.push(i, vals[i as usize]);
        }
        assert_eq!(q.find_min(), Some((0, 5)));
        q.replace(1, 3, 2);
        assert_eq!(q.find_min(), Some((1, 2)));
    }

    #[test]
    fn empty_and_capacity() {
        let mut q = LazyQueue::new(0);
        assert_eq!(q.capacity(), 1);
        assert!(q.find_min().is_none());
        assert_eq!(q.push(9, 0), Some(0));
        assert_eq!(q.push(10, 0), None);
        q.replace(5, 1, 0); // out of range: ignored
        assert_eq!(q.items(), &[9]);
    }

    /// Weighted Space-Saving on the queue against a shadow array searched
    /// in full: `find_min` is always the first slot of the exact minimum,
    /// as Algorithm 2 gives it, whatever the blocks' bounds.
    #[test]
    fn find_min_is_first_exact_minimum_under_weights() {
        for (cap, items, seed) in [
            (200usize, 2000u32, 1u64),
            (64, 500, 2),
            (1000, 30000, 3),
            (130, 131, 4),
        ] {
            let mut q = LazyQueue::new(cap);
            let mut shadow: Vec<u64> = Vec::new();
            let mut slot_of = std::collections::HashMap::<u32, u32>::new();
            let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            let mut next = || {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng
            };
            for _ in 0..200_000 {
                let r = next();
                // Skewed items, and weights that are 1 or a spread of sizes.
                let x = ((r % items as u64) * (r >> 40) % items as u64) as u32;
                let w = if r & 1 == 0 { 1 } else { 1 + (r >> 20) % 4096 };
                if let Some(&s) = slot_of.get(&x) {
                    q.add(s, w);
                    shadow[s as usize] += w;
                    continue;
                }
                if let Some(s) = q.push(x, w) {
                    slot_of.insert(x, s);
                    shadow.push(w);
                    continue;
                }
                let m = *shadow.iter().min().unwrap();
                let first = shadow.iter().position(|&v| v == m).unwrap();
                assert_eq!(q.find_min(), Some((first as u32, m)));
                assert_eq!(q.scan_min(), Some(m));
                let victim = q.items()[first];
                slot_of.remove(&victim);
                slot_of.insert(x, first as u32);
                q.replace(first as u32, x, m + w);
                shadow[first] = m + w;
                assert_eq!(q.value(first as u32), m + w);
            }
        }
    }
}
