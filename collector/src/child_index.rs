//! Hash index from (parent, key, item-ness) to a child node of the MCCT.
//!
//! Finding a child by scanning its siblings costs one cache miss per sibling,
//! and a call site with many callees (a dispatch loop, a solver calling many
//! kernels) has many. The index finds any child with about one probe:
//! open addressing with linear probing, backward-shift deletion (no
//! tombstones), grown by doubling at 3/4 load.
//!
//! An entry's slot comes from the child's *path hash* (see
//! [`path_hash`]), which the caller computes from the frames alone, not
//! from the parent's node index. So a descent of several levels knows every
//! level's slot before it has found any node, and the processor can load
//! them all at once instead of one cache miss after another. The hash only
//! places entries: a lookup matches the exact (parent, key, item-ness), so
//! two paths with the same hash are two entries of one probe run.
//!
//! Each entry also keeps its distance from its home slot (up to
//! [`FAR`]), which is what backward-shift deletion needs of the entries
//! after the one removed: without it every one of them asked the tree for
//! its path hash, a node read (an item's record, then its node) per entry,
//! and a CP2K rank, whose summary evicts and prunes contexts all along,
//! spent 2.5 % of its time there.

const EMPTY: u32 = u32::MAX;
/// Bit of `Entry::child` set for item nodes.
const ITEM: u32 = 1 << 31;
/// Node indices stored in the index are below this.
pub const MAX_CHILD: u32 = ITEM - 1;

/// Parent node indices stored in the index are at most this.
pub const MAX_PARENT: u32 = (1 << 28) - 1;
/// Bits of `Entry::parent` above the parent's index: the entry's distance
/// from its home slot, [`FAR`] for that distance or more.
const DIST_SHIFT: u32 = 28;
const FAR: u32 = 15;

/// 16 bytes, four to a cache line. The path hash is not stored: growth,
/// and a move of an entry [`FAR`] or more slots from its home, ask the
/// tree for it (`hash_of`), which keeps lookups, the hot path, on the
/// smallest entries.
#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u64,
    /// The parent's node index, and the distance from the home slot in
    /// the top bits.
    parent: u32,
    /// The child's node index with [`ITEM`] for an item, `EMPTY` for a
    /// free slot.
    child: u32,
}

const FREE: Entry = Entry {
    key: 0,
    parent: 0,
    child: EMPTY,
};

impl Entry {
    #[inline(always)]
    fn parent(&self) -> u32 {
        self.parent & MAX_PARENT
    }

    #[inline(always)]
    fn is(&self, parent: u32, key: u64, item: bool) -> bool {
        self.key == key && self.parent() == parent && (self.child & ITEM != 0) == item
    }

    /// The entry placed `dist` slots after its home.
    #[inline(always)]
    fn at_distance(self, dist: usize) -> Entry {
        Entry {
            parent: self.parent() | (dist.min(FAR as usize) as u32) << DIST_SHIFT,
            ..self
        }
    }
}

fn tagged(child: u32, item: bool) -> u32 {
    child | if item { ITEM } else { 0 }
}

#[derive(Clone, Debug, Default)]
pub struct ChildIndex {
    slots: Vec<Entry>,
    len: usize,
    /// `64 - log2(slots.len())` (0 while there are no slots): a hash's
    /// home slot is its top bits.
    shift: u32,
}

/// Path hash of the root.
pub const ROOT_HASH: u64 = 0x243F_6A88_85A3_08D3;

/// The path hash of the child with `key` and item-ness `item` of a node
/// whose path hash is `parent`: a function of the keys from the root down.
#[inline(always)]
pub fn path_hash(parent: u64, key: u64, item: bool) -> u64 {
    let x = parent.rotate_left(29) ^ key ^ (item as u64) << 63;
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

    #[inline(always)]
    fn home(&self, hash: u64) -> usize {
        (hash >> self.shift) as usize
    }

    /// The child of `parent` with `key` and item-ness `item`; `hash` is
    /// that child's path hash.
    #[inline]
    pub fn get(&self, hash: u64, parent: u32, key: u64, item: bool) -> Option<u32> {
        // No slots: the home is out of range and the lookup ends there.
        let mask = self.mask();
        let mut i = self.home(hash);
        loop {
            let e = self.slots.get(i)?;
            if e.child == EMPTY {
                return None;
            }
            if e.is(parent, key, item) {
                return Some(e.child & !ITEM);
            }
            i = (i + 1) & mask;
        }
    }

    /// Record `child` (below [`MAX_CHILD`]) as the child of `parent` (at
    /// most [`MAX_PARENT`]) with
    /// `key`/`item` and path hash `hash` (replacing an entry for the same
    /// triple). `hash_of` gives the path hash of any child already in the
    /// index (for growth).
    pub fn insert(
        &mut self,
        hash: u64,
        parent: u32,
        key: u64,
        item: bool,
        child: u32,
        hash_of: &dyn Fn(u32) -> u64,
    ) -> bool {
        debug_assert!(child < MAX_CHILD && parent <= MAX_PARENT);
        if !self.reserve_one(hash_of) {
            return false;
        }
        self.place(hash, parent, key, tagged(child, item));
        true
    }

    /// Make room for one more entry: grow at a load of 3/4; when the memory
    /// for that cannot be had, go on up to a load of 7/8. False: no room.
    pub fn reserve_one(&mut self, hash_of: &dyn Fn(u32) -> u64) -> bool {
        (self.len + 1) * 4 <= self.slots.len() * 3
            || self.grow(hash_of)
            || (self.len + 1) * 8 <= self.slots.len() * 7
    }

    fn place(&mut self, hash: u64, parent: u32, key: u64, child: u32) {
        let mask = self.mask();
        let home = self.home(hash);
        let mut i = home;
        loop {
            let e = &mut self.slots[i];
            if e.child == EMPTY {
                *e = Entry { key, parent, child }.at_distance(i.wrapping_sub(home) & mask);
                self.len += 1;
                return;
            }
            if e.is(parent, key, child & ITEM != 0) {
                e.child = child;
                return;
            }
            i = (i + 1) & mask;
        }
    }

    /// Forget the child of `parent` with `key`/`item` and path hash `hash`.
    /// `hash_of` gives the path hash of any child in the index (to move
    /// later entries of the probe run into the hole).
    pub fn remove(
        &mut self,
        hash: u64,
        parent: u32,
        key: u64,
        item: bool,
        hash_of: &dyn Fn(u32) -> u64,
    ) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.mask();
        let mut i = self.home(hash);
        loop {
            let e = self.slots[i];
            if e.child == EMPTY {
                return None;
            }
            if e.is(parent, key, item) {
                break;
            }
            i = (i + 1) & mask;
        }
        let removed = self.slots[i].child & !ITEM;
        // Backward-shift deletion: move later entries of the probe run into
        // the hole when their home slot allows it.
        let mut hole = i;
        let mut j = (i + 1) & mask;
        loop {
            let e = self.slots[j];
            if e.child == EMPTY {
                break;
            }
            let dist_j = match e.parent >> DIST_SHIFT {
                FAR => j.wrapping_sub(self.home(hash_of(e.child & !ITEM))) & mask,
                d => d as usize,
            };
            // Can `e` move to `hole`? Only if `hole` lies cyclically in
            // [home, j), that is if `hole` is at most `dist_j` slots back.
            let back = j.wrapping_sub(hole) & mask;
            if back <= dist_j {
                self.slots[hole] = e.at_distance(dist_j - back);
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.slots[hole] = FREE;
        self.len -= 1;
        Some(removed)
    }

    /// Doubles the table; false (unchanged) when the memory cannot be had.
    fn grow(&mut self, hash_of: &dyn Fn(u32) -> u64) -> bool {
        let cap = (self.slots.len() * 2).max(64);
        let mut fresh = Vec::new();
        if fresh.try_reserve_exact(cap).is_err() {
            return false;
        }
        fresh.resize(cap, FREE);
        let old = std::mem::replace(&mut self.slots, fresh);
        self.shift = 64 - cap.trailing_zeros();
        self.len = 0;
        for e in old.into_iter().filter(|e| e.child != EMPTY) {
            self.place(hash_of(e.child & !ITEM), e.parent(), e.key, e.child);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::HashMap;

    /// Children's path hashes, as the tree would give them.
    #[derive(Default)]
    struct Hashes(RefCell<HashMap<u32, u64>>);

    impl Hashes {
        fn of(&self) -> impl Fn(u32) -> u64 + '_ {
            |c| self.0.borrow()[&c]
        }
        fn insert(&self, x: &mut ChildIndex, t: (u32, u64, bool), child: u32) {
            let hk = h(t.0, t.1, t.2);
            self.0.borrow_mut().insert(child, hk);
            x.insert(hk, t.0, t.1, t.2, child, &self.of());
        }
        fn insert_with(&self, x: &mut ChildIndex, hk: u64, t: (u32, u64, bool), child: u32) {
            self.0.borrow_mut().insert(child, hk);
            x.insert(hk, t.0, t.1, t.2, child, &self.of());
        }
    }

    /// A triple's hash, as a tree would give it; every key divisible by 5
    /// gets one shared hash, so distinct triples collide fully.
    fn h(parent: u32, key: u64, item: bool) -> u64 {
        if key.is_multiple_of(5) {
            42 << 58
        } else {
            path_hash(parent as u64, key, item)
        }
    }

    #[test]
    fn insert_get_remove() {
        let mut x = ChildIndex::new();
        let hs = Hashes::default();
        assert_eq!(x.get(h(0, 1, false), 0, 1, false), None);
        hs.insert(&mut x, (0, 1, false), 5);
        hs.insert(&mut x, (0, 1, true), 6);
        hs.insert(&mut x, (3, 1, false), 7);
        assert_eq!(x.get(h(0, 1, false), 0, 1, false), Some(5));
        assert_eq!(x.get(h(0, 1, true), 0, 1, true), Some(6));
        assert_eq!(x.get(h(3, 1, false), 3, 1, false), Some(7));
        assert_eq!(x.len(), 3);
        assert_eq!(x.remove(h(0, 1, false), 0, 1, false, &hs.of()), Some(5));
        assert_eq!(x.get(h(0, 1, false), 0, 1, false), None);
        assert_eq!(x.get(h(0, 1, true), 0, 1, true), Some(6));
        assert_eq!(x.remove(h(0, 1, false), 0, 1, false, &hs.of()), None);
        assert_eq!(x.len(), 2);
    }

    #[test]
    fn equal_hashes_are_told_apart_by_the_triple() {
        let mut x = ChildIndex::new();
        let hs = Hashes::default();
        let triples = [
            (0, 10, false),
            (0, 10, true),
            (1, 10, false),
            (0, 11, false),
        ];
        for (i, t) in triples.into_iter().enumerate() {
            hs.insert_with(&mut x, 7, t, i as u32);
        }
        assert_eq!(x.get(7, 1, 10, false), Some(2));
        assert_eq!(x.get(7, 0, 10, true), Some(1));
        assert_eq!(x.get(7, 0, 11, false), Some(3));
        assert_eq!(x.get(7, 1, 11, false), None);
        assert_eq!(x.remove(7, 0, 10, false, &hs.of()), Some(0));
        assert_eq!(x.get(7, 0, 11, false), Some(3));
        assert_eq!(x.get(7, 0, 10, false), None);
    }

    /// A long probe run (many children of one path hash): removals shift
    /// the entries after the hole back, asking the tree for a path hash
    /// only for an entry [`FAR`] or more slots from its home, and every
    /// other entry is still found.
    #[test]
    fn removal_shifts_by_stored_distance_and_asks_only_for_far_entries() {
        let mut x = ChildIndex::new();
        let hs = Hashes::default();
        let asked = std::cell::Cell::new(0u32);
        let of = |c: u32| {
            asked.set(asked.get() + 1);
            hs.0.borrow()[&c]
        };
        let same = h(1, 1, false);
        let t = |c: u32| (1, 100 + u64::from(c), c.is_multiple_of(3));
        for c in 0..40u32 {
            hs.insert_with(&mut x, same, t(c), c);
        }
        let mut left: Vec<u32> = (0..40).collect();
        let mut far_removals = 0;
        let mut rng = 7u64;
        while let Some(n) = std::num::NonZeroUsize::new(left.len()) {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let c = left.swap_remove((rng >> 33) as usize % n.get());
            let before = asked.get();
            let (p, k, i) = t(c);
            assert_eq!(x.remove(same, p, k, i, &of), Some(c));
            if asked.get() > before {
                // Only a run of more than FAR entries has one that far.
                assert!(left.len() >= FAR as usize, "asked with {} left", left.len());
                far_removals += 1;
            }
            for &o in &left {
                let (p, k, i) = t(o);
                assert_eq!(x.get(same, p, k, i), Some(o), "after removing {c}");
            }
        }
        assert!(far_removals > 0, "the long run never asked for a hash");
        assert_eq!(x.len(), 0);
    }

    #[test]
    fn agrees_with_a_hash_map_under_churn() {
        let mut x = ChildIndex::new();
        let hs = Hashes::default();
        let mut m: HashMap<(u32, u64, bool), u32> = HashMap::new();
        let mut s = 0x1234_5678_9abc_def0u64;
        for step in 0..200_000u32 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            // Few distinct keys so that runs collide and deletions shift.
            let k = (s % 3000, (s >> 20) as u32 % 40, s >> 40 & 1 == 1);
            let key = (k.1, k.0 * 16 + 1, k.2);
            if s >> 50 & 3 == 0 {
                let hk = h(key.0, key.1, key.2);
                assert_eq!(x.remove(hk, key.0, key.1, key.2, &hs.of()), m.remove(&key));
            } else {
                hs.insert(&mut x, key, step);
                m.insert(key, step);
            }
            assert_eq!(x.len(), m.len());
        }
        for (&(p, k, i), &c) in &m {
            assert_eq!(x.get(h(p, k, i), p, k, i), Some(c));
        }
        // And nothing else is found.
        for p in 0..40 {
            for k in 0..3000u64 {
                for i in [false, true] {
                    let key = k * 16 + 1;
                    assert_eq!(x.get(h(p, key, i), p, key, i), m.get(&(p, key, i)).copied());
                }
            }
        }
    }
}
