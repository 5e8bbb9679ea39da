//! Hash index from (parent, key, item-ness) to a child node of the MCCT.
//!
//! Finding a child by scanning its siblings costs one cache miss per sibling,
//! and a call site with many callees (a dispatch loop, a solver calling many
//! kernels) has many. The index finds any child with about one probe:
//! open addressing with linear probing, backward-shift deletion (no
//! tombstones), grown by doubling at 1/2 load.

const EMPTY: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u64,
    parent: u32,
    /// The child's node index, `EMPTY` for a free slot.
    child: u32,
    item: bool,
}

const FREE: Entry = Entry {
    key: 0,
    parent: 0,
    child: EMPTY,
    item: false,
};

#[derive(Clone, Debug, Default)]
pub struct ChildIndex {
    slots: Vec<Entry>,
    len: usize,
}

fn hash(parent: u32, key: u64, item: bool) -> u64 {
    let x = key ^ ((parent as u64) << 32 | (parent as u64)).rotate_left(17) ^ item as u64;
    // Fibonacci hashing: the slot is taken from the high bits, which every
    // bit of `x` reaches.
    x.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

impl ChildIndex {
    pub fn new() -> ChildIndex {
        ChildIndex::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn memory_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Entry>()
    }

    fn mask(&self) -> usize {
        self.slots.len().wrapping_sub(1)
    }

    fn home(&self, parent: u32, key: u64, item: bool) -> usize {
        let shift = 64 - self.slots.len().trailing_zeros();
        (hash(parent, key, item) >> shift) as usize
    }

    /// The child of `parent` with `key` and item-ness `item`.
    #[inline]
    pub fn get(&self, parent: u32, key: u64, item: bool) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.mask();
        let mut i = self.home(parent, key, item);
        loop {
            let e = &self.slots[i];
            if e.child == EMPTY {
                return None;
            }
            if e.key == key && e.parent == parent && e.item == item {
                return Some(e.child);
            }
            i = (i + 1) & mask;
        }
    }

    /// Record `child` as the child of `parent` with `key`/`item` (replacing
    /// an entry for the same triple).
    pub fn insert(&mut self, parent: u32, key: u64, item: bool, child: u32) {
        debug_assert!(child != EMPTY);
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.mask();
        let mut i = self.home(parent, key, item);
        loop {
            let e = &mut self.slots[i];
            if e.child == EMPTY {
                *e = Entry {
                    key,
                    parent,
                    child,
                    item,
                };
                self.len += 1;
                return;
            }
            if e.key == key && e.parent == parent && e.item == item {
                e.child = child;
                return;
            }
            i = (i + 1) & mask;
        }
    }

    /// Forget the child of `parent` with `key`/`item`.
    pub fn remove(&mut self, parent: u32, key: u64, item: bool) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.mask();
        let mut i = self.home(parent, key, item);
        loop {
            let e = self.slots[i];
            if e.child == EMPTY {
                return None;
            }
            if e.key == key && e.parent == parent && e.item == item {
                break;
            }
            i = (i + 1) & mask;
        }
        let removed = self.slots[i].child;
        // Backward-shift deletion: move later entries of the probe run into
        // the hole when their home slot allows it.
        let mut hole = i;
        let mut j = (i + 1) & mask;
        loop {
            let e = self.slots[j];
            if e.child == EMPTY {
                break;
            }
            let home = self.home(e.parent, e.key, e.item);
            // Can `e` move to `hole`? Only if `hole` lies cyclically in
            // [home, j).
            let dist_hole = hole.wrapping_sub(home) & mask;
            let dist_j = j.wrapping_sub(home) & mask;
            if dist_hole < dist_j {
                self.slots[hole] = e;
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.slots[hole] = FREE;
        self.len -= 1;
        Some(removed)
    }

    fn grow(&mut self) {
        let cap = (self.slots.len() * 2).max(64);
        let old = std::mem::replace(&mut self.slots, vec![FREE; cap]);
        self.len = 0;
        for e in old.into_iter().filter(|e| e.child != EMPTY) {
            self.insert(e.parent, e.key, e.item, e.child);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn insert_get_remove() {
        let mut x = ChildIndex::new();
        assert_eq!(x.get(0, 1, false), None);
        x.insert(0, 1, false, 5);
        x.insert(0, 1, true, 6);
        x.insert(3, 1, false, 7);
        assert_eq!(x.get(0, 1, false), Some(5));
        assert_eq!(x.get(0, 1, true), Some(6));
        assert_eq!(x.get(3, 1, false), Some(7));
        assert_eq!(x.len(), 3);
        assert_eq!(x.remove(0, 1, false), Some(5));
        assert_eq!(x.get(0, 1, false), None);
        assert_eq!(x.get(0, 1, true), Some(6));
        assert_eq!(x.remove(0, 1, false), None);
        assert_eq!(x.len(), 2);
    }

    #[test]
    fn agrees_with_a_hash_map_under_churn() {
        let mut x = ChildIndex::new();
        let mut m: HashMap<(u32, u64, bool), u32> = HashMap::new();
        let mut s = 0x1234_5678_9abc_def0u64;
        for step in 0..200_000u32 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            // Few distinct keys so that runs collide and deletions shift.
            let k = (s % 3000, (s >> 20) as u32 % 40, s >> 40 & 1 == 1);
            let key = (k.1, k.0 * 16, k.2);
            if s >> 50 & 3 == 0 {
                assert_eq!(x.remove(key.0, key.1, key.2), m.remove(&key));
            } else {
                x.insert(key.0, key.1, key.2, step);
                m.insert(key, step);
            }
            assert_eq!(x.len(), m.len());
        }
        for (&(p, k, i), &c) in &m {
            assert_eq!(x.get(p, k, i), Some(c));
        }
        // And nothing else is found.
        for p in 0..40 {
            for k in 0..3000u64 {
                for i in [false, true] {
                    assert_eq!(x.get(p, k * 16, i), m.get(&(p, k * 16, i)).copied());
                }
            }
        }
    }
}
