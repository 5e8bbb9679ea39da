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

/// A Space-Saving set of at most `capacity` monitored items.
#[derive(Clone, Debug)]
pub struct LazyQueue {
    slots: Vec<u32>,
    capacity: usize,
    min: u64,
    min_idx: usize,
}

impl LazyQueue {
    pub fn new(capacity: usize) -> LazyQueue {
        LazyQueue {
            slots: Vec::new(),
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

    /// Bytes held by the slot array.
    pub fn memory_bytes(&self) -> u64 {
        (self.slots.capacity() * std::mem::size_of::<u32>()) as u64
    }

    /// Adds an item while the queue is not full; returns its slot, or `None`
    /// when full. Items enter with whatever counter they hold. When memory
    /// for another slot cannot be had (the process exhausted its address
    /// space) the queue keeps the size it has as its capacity: a coarser
    /// summary, never an aborted process.
    pub fn push(&mut self, item: u32) -> Option<u32> {
        if self.is_full() {
            return None;
        }
        if self.slots.len() == self.slots.capacity() && self.slots.try_reserve(1).is_err() {
            self.capacity = self.slots.len();
            self.min_idx = self.slots.len();
            return None;
        }
        self.slots.push(item);
        if self.is_full() {
            // Force a rescan on the first find-min.
            self.min_idx = self.slots.len();
        }
        Some((self.slots.len() - 1) as u32)
    }

    /// Algorithm 2: the slot holding a minimum counter, with its value.
    /// `value(item)` reads an item's counter. `None` when empty.
    pub fn find_min(&mut self, value: impl Fn(u32) -> u64) -> Option<(u32, u64)> {
        if self.slots.is_empty() {
            return None;
        }
        while self.min_idx < self.slots.len() && value(self.slots[self.min_idx]) != self.min {
            self.min_idx += 1;
        }
        if self.min_idx >= self.slots.len() {
            let mut best = (0usize, u64::MAX);
            for (i, &it) in self.slots.iter().enumerate() {
                let v = value(it);
                if v < best.1 {
                    best = (i, v);
                }
            }
            self.min_idx = best.0;
            self.min = best.1;
        }
        Some((self.min_idx as u32, self.min))
    }

    /// The exact minimum counter, by a full scan (for snapshots).
    pub fn scan_min(&self, value: impl Fn(u32) -> u64) -> Option<u64> {
        self.slots.iter().map(|&it| value(it)).min()
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
            if slot_of.contains_key(&x) {
                *counts.get_mut(&x).unwrap() += 1;
                continue;
            }
            if let Some(s) = q.push(x) {
                slot_of.insert(x, s);
                counts.insert(x, 1);
                continue;
            }
            let (s, m) = q.find_min(|it| counts[&it]).unwrap();
            let victim = q.items()[s as usize];
            assert_eq!(counts[&victim], m);
            assert_eq!(m, q.scan_min(|it| counts[&it]).unwrap(), "lazy min differs");
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
            q.push(i);
        }
        assert_eq!(q.find_min(|i| vals[i as usize]), Some((0, 5)));
        let vals2 = [5u64, 6, 7, 2];
        q.replace(1, 3, 2);
        assert_eq!(q.find_min(|i| vals2[i as usize]), Some((1, 2)));
    }

    #[test]
    fn empty_and_capacity() {
        let mut q = LazyQueue::new(0);
        assert_eq!(q.capacity(), 1);
        assert!(q.find_min(|_| 0).is_none());
        assert_eq!(q.push(9), Some(0));
        assert_eq!(q.push(10), None);
        q.replace(5, 1, 0); // out of range: ignored
        assert_eq!(q.items(), &[9]);
    }
}
