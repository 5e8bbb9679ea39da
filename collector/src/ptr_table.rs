//! The live-pointer table: block address → (size, context's item handle:
//! its record and generation, see `Hcct::record`).
//!
//! 64 shards, chosen by the top bits of the address's hash, each an open
//! addressing table with Robin Hood linear probing and backward-shift
//! deletion (no tombstones), 24-byte entries, any table size (the home slot
//! is found by multiply-shift range reduction of the hash's other bits, not
//! a power-of-two mask). Each shard keeps its load between 0.4 and 0.9,
//! growing and shrinking by about 1.2×, so the table costs 27–32 bytes per
//! live block and never holds much more than the live set.
//!
//! Growing needs a shard's new table beside its old one: one shard at a
//! time, so a growth adds a 64th of the table for a moment. (One table grew
//! whole, to a load of 0.64: 64 bytes per live block while old and new
//! coexisted, and a tracer over its budget of 64 MiB + 32 bytes per live
//! block from about 3·10^6 live blocks on.) When that memory cannot be had
//! (the program exhausted its address space) the shard stays as it is and
//! fills up to a load of 31/32; beyond that [`PtrTable::insert`] refuses
//! new blocks ([`NoRoom`]) instead of aborting the process.

/// Value stored for a live block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    pub size: u64,
    pub node: u32,
    pub gen: u32,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    /// 0: empty slot (address 0 is never stored).
    key: u64,
    size: u64,
    node: u32,
    gen: u32,
}

const EMPTY: Entry = Entry {
    key: 0,
    size: 0,
    node: 0,
    gen: 0,
};

const MIN_CAP: usize = 16;

/// Shards, by the top bits of the hash.
const SHARD_BITS: u32 = 6;
const SHARDS: usize = 1 << SHARD_BITS;

/// Multiplicative hash of an address.
fn hash(key: u64) -> u64 {
    (key ^ (key >> 31)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// The shard of `key`: the hash's top bits.
fn shard_of(key: u64) -> usize {
    (hash(key) >> (64 - SHARD_BITS)) as usize
}

/// The home slot of `key` in a shard of `cap` slots: the hash's other
/// bits, reduced to `[0, cap)` by the high half of a 128-bit product.
fn home(key: u64, cap: usize) -> usize {
    let h = hash(key) << SHARD_BITS;
    ((h as u128 * cap as u128) >> 64) as usize
}

#[cfg(not(test))]
#[inline(always)]
fn growth_refused(_cap: usize) -> bool {
    false
}

#[cfg(test)]
thread_local! {
    /// Tests: tables of more entries than this cannot be had.
    static MAX_CAP: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
}

#[cfg(test)]
fn growth_refused(cap: usize) -> bool {
    cap > MAX_CAP.with(|m| m.get())
}

/// Tests: on this thread, shards of more than `cap` slots cannot be had
/// (`usize::MAX`: no limit), as when the address space is exhausted.
#[cfg(test)]
pub(crate) fn refuse_shards_over(cap: usize) {
    MAX_CAP.with(|m| m.set(cap));
}

/// The table could not grow and is full: the block was not stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NoRoom;

#[derive(Clone, Debug)]
pub struct PtrTable {
    shards: Vec<Shard>,
    len: usize,
    peak: usize,
}

impl Default for PtrTable {
    fn default() -> Self {
        PtrTable {
            shards: vec![Shard::default(); SHARDS],
            len: 0,
            peak: 0,
        }
    }
}

impl PtrTable {
    pub fn new() -> PtrTable {
        PtrTable::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Highest number of entries ever held.
    pub fn peak(&self) -> usize {
        self.peak
    }

    pub fn memory_bytes(&self) -> u64 {
        self.shards.iter().map(Shard::memory_bytes).sum()
    }

    /// Inserts `key`; returns the block it replaces if `key` was present.
    /// Address 0 is ignored. [`NoRoom`]: the key's shard could not grow and
    /// is full (the block is not stored; a present `key` is still replaced).
    pub fn insert(&mut self, key: u64, block: Block) -> Result<Option<Block>, NoRoom> {
        if key == 0 {
            return Ok(None);
        }
        let r = self.shards[shard_of(key)].insert(key, block);
        if let Ok(None) = r {
            self.len += 1;
            self.peak = self.peak.max(self.len);
        }
        r
    }

    pub fn get(&self, key: u64) -> Option<Block> {
        self.shards[shard_of(key)].get(key)
    }

    /// Removes `key`, returning its block.
    pub fn remove(&mut self, key: u64) -> Option<Block> {
        let b = self.shards[shard_of(key)].remove(key)?;
        self.len -= 1;
        Some(b)
    }

    /// Every entry's address and block (for tests and checks).
    pub fn blocks(&self) -> impl Iterator<Item = (u64, Block)> + '_ {
        self.shards.iter().flat_map(Shard::blocks)
    }
}

/// One shard: its keys are those whose hash has its top bits.
#[derive(Clone, Debug, Default)]
struct Shard {
    entries: Vec<Entry>,
    len: usize,
}

impl Shard {
    fn memory_bytes(&self) -> u64 {
        (self.entries.capacity() * std::mem::size_of::<Entry>()) as u64
    }

    fn dist(&self, key: u64, pos: usize) -> usize {
        let cap = self.entries.len();
        // `pos` and the home slot are below `cap`: one wrap at most (no division).
        let d = pos + cap - home(key, cap);
        if d >= cap {
            d - cap
        } else {
            d
        }
    }

    fn next(&self, pos: usize) -> usize {
        if pos + 1 == self.entries.len() {
            0
        } else {
            pos + 1
        }
    }

    /// As [`PtrTable::insert`], for a key of this shard (not 0).
    fn insert(&mut self, key: u64, block: Block) -> Result<Option<Block>, NoRoom> {
        let cap = self.entries.len();
        if (self.len + 1) * 10 > cap * 9
            && !self.resize(self.len + 1)
            && (self.len + 1) * 32 > cap * 31
        {
            return match self.find(key) {
                Some(pos) => {
                    let e = std::mem::replace(
                        &mut self.entries[pos],
                        Entry {
                            key,
                            size: block.size,
                            node: block.node,
                            gen: block.gen,
                        },
                    );
                    Ok(Some(Block {
                        size: e.size,
                        node: e.node,
                        gen: e.gen,
                    }))
                }
                None => Err(NoRoom),
            };
        }
        let cap = self.entries.len();
        let mut carry = Entry {
            key,
            size: block.size,
            node: block.node,
            gen: block.gen,
        };
        let mut pos = home(key, cap);
        let mut d = 0usize;
        let mut swapped = false;
        for _ in 0..cap {
            let e = self.entries[pos];
            if e.key == 0 {
                self.entries[pos] = carry;
                self.len += 1;
                return Ok(None);
            }
            if !swapped && e.key == key {
                self.entries[pos] = carry;
                return Ok(Some(Block {
                    size: e.size,
                    node: e.node,
                    gen: e.gen,
                }));
            }
            let ed = self.dist(e.key, pos);
            if ed < d {
                self.entries[pos] = carry;
                carry = e;
                d = ed;
                swapped = true;
            }
            pos = self.next(pos);
            d += 1;
        }
        // Unreachable while the load stays below 1.
        Err(NoRoom)
    }

    fn find(&self, key: u64) -> Option<usize> {
        let cap = self.entries.len();
        if key == 0 || cap == 0 {
            return None;
        }
        let mut pos = home(key, cap);
        for d in 0..cap {
            let e = &self.entries[pos];
            if e.key == 0 {
                return None;
            }
            if e.key == key {
                return Some(pos);
            }
            if self.dist(e.key, pos) < d {
                return None;
            }
            pos = self.next(pos);
        }
        None
    }

    fn get(&self, key: u64) -> Option<Block> {
        self.find(key).map(|p| {
            let e = self.entries[p];
            Block {
                size: e.size,
                node: e.node,
                gen: e.gen,
            }
        })
    }

    fn remove(&mut self, key: u64) -> Option<Block> {
        let mut pos = self.find(key)?;
        let e = self.entries[pos];
        let cap = self.entries.len();
        for _ in 0..cap {
            let nx = self.next(pos);
            let n = self.entries[nx];
            if n.key == 0 || self.dist(n.key, nx) == 0 {
                break;
            }
            self.entries[pos] = n;
            pos = nx;
        }
        self.entries[pos] = EMPTY;
        self.len -= 1;
        if cap > MIN_CAP && self.len * 10 < cap * 4 {
            self.resize(self.len);
        }
        Some(Block {
            size: e.size,
            node: e.node,
            gen: e.gen,
        })
    }

    /// Rebuilds the shard for `want` entries at a load of about 0.75.
    /// Returns false, leaving the shard as it was, when the memory for the
    /// new one cannot be had.
    fn resize(&mut self, want: usize) -> bool {
        let new_cap = (want.saturating_mul(4) / 3 + 1).max(MIN_CAP);
        let mut fresh = Vec::new();
        if growth_refused(new_cap) || fresh.try_reserve_exact(new_cap).is_err() {
            return false;
        }
        fresh.resize(new_cap, EMPTY);
        let old = std::mem::replace(&mut self.entries, fresh);
        self.len = 0;
        for e in old.into_iter().filter(|e| e.key != 0) {
            // Room for every old entry: the new table is larger than the
            // live set.
            let _ = self.insert(
                e.key,
                Block {
                    size: e.size,
                    node: e.node,
                    gen: e.gen,
                },
            );
        }
        true
    }

    fn blocks(&self) -> impl Iterator<Item = (u64, Block)> + '_ {
        self.entries.iter().filter(|e| e.key != 0).map(|e| {
            (
                e.key,
                Block {
                    size: e.size,
                    node: e.node,
                    gen: e.gen,
                },
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn b(size: u64) -> Block {
        Block {
            size,
            node: size as u32,
            gen: 1,
        }
    }

    #[test]
    fn insert_get_remove() {
        let mut t = PtrTable::new();
        assert_eq!(t.insert(0, b(1)), Ok(None));
        assert!(t.is_empty());
        for i in 1..1000u64 {
            assert_eq!(t.insert(i * 16, b(i)), Ok(None));
        }
        assert_eq!(t.len(), 999);
        assert_eq!(t.insert(16, b(7)), Ok(Some(b(1))));
        assert_eq!(t.get(32), Some(b(2)));
        for i in 1..1000u64 {
            assert!(t.remove(i * 16).is_some());
        }
        assert_eq!(t.remove(16), None);
        assert!(t.is_empty());
        assert_eq!(t.peak(), 999);
        assert!(
            t.memory_bytes() <= (24 * MIN_CAP * SHARDS) as u64,
            "table did not shrink"
        );
    }

    #[test]
    fn memory_per_live_block() {
        let mut t = PtrTable::new();
        for i in 1..=100_000u64 {
            t.insert(0x7f00_0000_0000 + i * 48, b(i)).unwrap();
        }
        let per = t.memory_bytes() as f64 / t.len() as f64;
        assert!(per <= 33.0, "{per} bytes per live block");
    }

    #[test]
    fn a_table_that_cannot_grow_fills_up_then_refuses() {
        // Shards of at most 100 slots.
        MAX_CAP.with(|m| m.set(100));
        let mut t = PtrTable::new();
        let mut stored = Vec::new();
        let mut refused = Vec::new();
        for i in 1..=20_000u64 {
            match t.insert(i * 16, b(i)) {
                Ok(None) => stored.push(i),
                Ok(Some(_)) => panic!("{i} was not present"),
                Err(NoRoom) => refused.push(i),
            }
        }
        // Every shard filled to 31/32 of its slots, and no further.
        for sh in &t.shards {
            let cap = sh.entries.len();
            assert!(cap <= 100, "{cap}");
            assert!(
                sh.len * 32 <= cap * 31 && sh.len * 32 > cap * 31 - 32,
                "{} of {cap}",
                sh.len
            );
        }
        assert_eq!(stored.len(), t.len());
        assert_eq!(refused.len(), 20_000 - stored.len());
        // Present keys are still replaced; every stored block is found.
        assert_eq!(t.insert(stored[0] * 16, b(7)), Ok(Some(b(stored[0]))));
        for &i in &stored[1..] {
            assert_eq!(t.get(i * 16), Some(b(i)));
        }
        assert_eq!(t.get(refused[0] * 16), None);
        // Frees make room again in their shards.
        for &i in &stored[1..1001] {
            assert!(t.remove(i * 16).is_some());
        }
        let again = refused[..2000]
            .iter()
            .filter(|&&i| t.insert(i * 16, b(i)) == Ok(None))
            .count();
        assert!(again > 0 && again <= 1000, "{again}");
        // Growth, once possible, resumes.
        MAX_CAP.with(|m| m.set(usize::MAX));
        for i in 30_000..50_000u64 {
            assert_eq!(t.insert(i * 16, b(i)), Ok(None));
        }
        for &i in &stored[1001..] {
            assert_eq!(t.get(i * 16), Some(b(i)));
        }
    }

    proptest! {
        #[test]
        fn behaves_like_a_hashmap(ops in proptest::collection::vec((any::<bool>(), 0u64..300), 0..2000)) {
            let mut t = PtrTable::new();
            let mut m = HashMap::new();
            for (ins, k) in ops {
                let key = k * 16 + 16;
                if ins {
                    prop_assert_eq!(t.insert(key, b(k)), Ok(m.insert(key, b(k))));
                } else {
                    prop_assert_eq!(t.remove(key), m.remove(&key));
                }
                prop_assert_eq!(t.len(), m.len());
            }
            for (k, v) in &m {
                prop_assert_eq!(t.get(*k), Some(*v));
            }
            prop_assert_eq!(t.blocks().count(), m.len());
        }
    }
}
