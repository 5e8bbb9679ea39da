//! Exact heap accounting: live bytes, the heap peak, and per-context live
//! bytes *at* the heap peak, at O(1) per event.
//!
//! Every time the process's live bytes exceed the previous peak, the global
//! `epoch` is incremented. A [`LiveCell`] remembers the epoch at which it last
//! changed (`stamp`) and, in `at_peak`, its value at the latest peak it has
//! seen. Before a cell changes, it is synced: if a peak happened since its
//! last change (`stamp < epoch`), its value at that peak was its current
//! value. Reading the value at peak uses the same rule.

use wmhcct_format::{size_class, SIZE_CLASSES};

/// Live bytes of one context (or of the evicted aggregate).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LiveCell {
    pub live: u64,
    at_peak: u64,
    stamp: u64,
}

impl LiveCell {
    fn sync(&mut self, epoch: u64) {
        if self.stamp < epoch {
            self.at_peak = self.live;
            self.stamp = epoch;
        }
    }

    /// Live bytes of this cell at the heap peak of `epoch`.
    pub fn at_peak(&self, epoch: u64) -> u64 {
        if self.stamp < epoch {
            self.live
        } else {
            self.at_peak
        }
    }

    pub fn add(&mut self, bytes: u64, epoch: u64) {
        self.sync(epoch);
        self.live = self.live.saturating_add(bytes);
    }

    pub fn sub(&mut self, bytes: u64, epoch: u64) {
        self.sync(epoch);
        self.live = self.live.saturating_sub(bytes);
    }

    /// Moves all of `other` (live and at-peak) into `self`; `other` is emptied.
    pub fn absorb(&mut self, other: &mut LiveCell, epoch: u64) {
        self.sync(epoch);
        other.sync(epoch);
        self.live = self.live.saturating_add(other.live);
        self.at_peak = self.at_peak.saturating_add(other.at_peak);
        *other = LiveCell::default();
    }
}

/// Process-wide heap figures.
#[derive(Clone, Debug, Default)]
pub struct Heap {
    pub live: u64,
    pub live_blocks: u64,
    pub peak: u64,
    pub peak_time_ns: u64,
    /// Incremented whenever `live` exceeds the previous peak.
    pub epoch: u64,
    pub unknown_frees: u64,
    /// Temporary allocations freed, and their bytes.
    pub temporary_count: u64,
    pub temporary_bytes: u64,
    /// Blocks allocated, by size class.
    pub sizes: SizeClasses,
}

/// Blocks allocated per size class ([`wmhcct_format::size_class`]).
#[derive(Clone, Debug)]
pub struct SizeClasses([u64; SIZE_CLASSES]);

impl Default for SizeClasses {
    fn default() -> SizeClasses {
        SizeClasses([0; SIZE_CLASSES])
    }
}

impl SizeClasses {
    /// A block of `size` bytes was allocated.
    pub fn add(&mut self, size: u64) {
        let n = &mut self.0[size_class(size)];
        *n = n.saturating_add(1);
    }

    /// The counts up to the last class that has any.
    pub fn used(&self) -> Vec<u64> {
        let end = self.0.iter().rposition(|&n| n > 0).map_or(0, |i| i + 1);
        self.0[..end].to_vec()
    }
}

impl Heap {
    /// A block of `size` bytes became live. Call *after* charging the
    /// context's cell (the cell must be synced against the old epoch).
    pub fn grow(&mut self, size: u64, t_ns: u64) {
        self.live = self.live.saturating_add(size);
        self.live_blocks = self.live_blocks.saturating_add(1);
        if self.live > self.peak {
            self.peak = self.live;
            self.peak_time_ns = t_ns;
            self.epoch = self.epoch.saturating_add(1);
        }
    }

    /// A block of `size` bytes was released.
    pub fn shrink(&mut self, size: u64) {
        self.live = self.live.saturating_sub(size);
        self.live_blocks = self.live_blocks.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_values_follow_the_last_peak() {
        let mut h = Heap::default();
        let mut a = LiveCell::default();
        let mut b = LiveCell::default();
        // a: 10, b: 5 -> peak 15
        a.add(10, h.epoch);
        h.grow(10, 1);
        b.add(5, h.epoch);
        h.grow(5, 2);
        assert_eq!((h.peak, h.peak_time_ns), (15, 2));
        // a freed, b grows to 12: live 12 < 15, peak unchanged
        a.sub(10, h.epoch);
        h.shrink(10);
        b.add(7, h.epoch);
        h.grow(7, 3);
        assert_eq!(a.at_peak(h.epoch) + b.at_peak(h.epoch), 15);
        assert_eq!((a.at_peak(h.epoch), b.at_peak(h.epoch)), (10, 5));
        // b grows to 20: new peak 20, all of it b's
        b.add(8, h.epoch);
        h.grow(8, 4);
        assert_eq!(h.peak, 20);
        assert_eq!((a.at_peak(h.epoch), b.at_peak(h.epoch)), (0, 20));
    }

    #[test]
    fn absorb_moves_live_and_peak() {
        let mut h = Heap::default();
        let mut a = LiveCell::default();
        let mut ev = LiveCell::default();
        a.add(4, h.epoch);
        h.grow(4, 0);
        a.sub(4, h.epoch);
        h.shrink(4);
        ev.absorb(&mut a, h.epoch);
        assert_eq!((ev.live, ev.at_peak(h.epoch)), (0, 4));
        assert_eq!(a, LiveCell::default());
    }

    #[test]
    fn saturates() {
        let mut c = LiveCell::default();
        c.sub(5, 0);
        assert_eq!(c.live, 0);
        c.add(u64::MAX, 0);
        c.add(1, 0);
        assert_eq!(c.live, u64::MAX);
    }
}
