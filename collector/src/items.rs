//! The item records of the MCCT: what only an item node (a full context)
//! keeps — its Space-Saving counters and queue slots, the cursors pinning
//! it, its live bytes and temporaries — in a table of their own, so that a
//! frame node (three quarters of a real program's tree) carries none of it.
//!
//! A record has a stable `u32` id while its item lives; freed ids are reused
//! through a free list, and a freed record's generation is bumped, so that a
//! stale handle (id, generation) held by the pointer table or a cursor can
//! tell that its item is gone. The per-event path reaches a record from the
//! child index or from such a handle directly, without the item's node.

use crate::heap::LiveCell;
use crate::mcct::{growth, NONE};

/// Record ids are below this (the child index tags them, `mcct.rs`).
pub const MAX_ITEM: u32 = (1 << 30) - 1;

/// Counters of weight `w` were maintained by Space-Saving at some time since
/// the item was created, so the frozen counter is a valid bound.
pub const F_SEEN: [u8; 2] = [1, 2];

#[derive(Clone, Debug)]
pub struct Item {
    /// Space-Saving estimate and error per weight (count, bytes).
    pub est: [u64; 2],
    pub err: [u64; 2],
    /// Live bytes of this context.
    pub cell: LiveCell,
    /// Temporary allocations of this context.
    pub temporary: u64,
    /// The item's node, `NONE` for a free record.
    pub node: u32,
    pub gen: u32,
    /// Slot in the weight's queue, `NONE` when not monitored.
    pub slot: [u32; 2],
    /// Cursors whose current context this is.
    pub pins: u32,
    /// [`F_SEEN`] bits.
    pub seen: u8,
}

impl Item {
    fn vacant(gen: u32) -> Item {
        Item {
            est: [0; 2],
            err: [0; 2],
            cell: LiveCell::default(),
            temporary: 0,
            node: NONE,
            gen,
            slot: [NONE; 2],
            pins: 0,
            seen: 0,
        }
    }

    pub fn monitored(&self, w: usize) -> bool {
        self.slot[w & 1] != NONE
    }

    /// Neither monitored nor pinned: its node may be pruned (once a leaf).
    pub fn is_idle(&self) -> bool {
        self.slot == [NONE; 2] && self.pins == 0
    }
}

#[derive(Clone, Debug, Default)]
pub struct Items {
    recs: Vec<Item>,
    free: Vec<u32>,
    live: usize,
}

impl Items {
    pub fn new() -> Items {
        Items::default()
    }

    /// Records in use.
    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    pub fn memory_bytes(&self) -> usize {
        self.recs.capacity() * std::mem::size_of::<Item>()
            + self.free.capacity() * std::mem::size_of::<u32>()
    }

    /// Room for one more record (grown like the node arena, `growth`).
    /// False when the memory cannot be had or the ids are exhausted.
    pub fn reserve_one(&mut self) -> bool {
        if !self.free.is_empty() {
            return true;
        }
        if self.recs.len() >= MAX_ITEM as usize {
            return false;
        }
        self.recs.len() < self.recs.capacity()
            || self.recs.try_reserve_exact(growth(self.recs.len())).is_ok()
    }

    /// A fresh record for the item node `node`; `None` without room.
    pub fn alloc(&mut self, node: u32) -> Option<u32> {
        let r = match self.free.pop() {
            Some(r) => r,
            None => {
                let r = u32::try_from(self.recs.len()).ok()?;
                if r >= MAX_ITEM || self.recs.len() == self.recs.capacity() {
                    // Room is made by `reserve_one`, never here.
                    return None;
                }
                self.recs.push(Item::vacant(0));
                r
            }
        };
        let x = self.recs.get_mut(r as usize)?;
        *x = Item::vacant(x.gen);
        x.node = node;
        self.live += 1;
        Some(r)
    }

    /// Frees record `r` (its node is being removed).
    pub fn release(&mut self, r: u32) {
        let Some(x) = self.recs.get_mut(r as usize).filter(|x| x.node != NONE) else {
            return;
        };
        *x = Item::vacant(x.gen.wrapping_add(1));
        self.live -= 1;
        // Without memory for the free list the record is not reused.
        if self.free.try_reserve(1).is_ok() {
            self.free.push(r);
        }
    }

    /// A record in use.
    #[inline]
    pub fn get(&self, r: u32) -> Option<&Item> {
        self.recs.get(r as usize).filter(|x| x.node != NONE)
    }

    #[inline]
    pub fn get_mut(&mut self, r: u32) -> Option<&mut Item> {
        self.recs.get_mut(r as usize).filter(|x| x.node != NONE)
    }

    /// A record in use with generation `gen`.
    #[inline]
    pub fn get_gen_mut(&mut self, r: u32, gen: u32) -> Option<&mut Item> {
        self.get_mut(r).filter(|x| x.gen == gen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_freed_and_reused_with_a_new_generation() {
        let mut t = Items::new();
        assert!(t.is_empty());
        let ids: Vec<u32> = (0..10)
            .map(|n| {
                assert!(t.reserve_one());
                t.alloc(100 + n).unwrap()
            })
            .collect();
        assert_eq!(ids, (0..10).collect::<Vec<_>>());
        assert_eq!(t.len(), 10);
        let x = t.get_mut(3).unwrap();
        x.est = [5, 500];
        x.pins = 2;
        x.temporary = 7;
        x.cell.add(64, 0);
        let g = x.gen;
        t.release(3);
        t.release(3); // twice: ignored
        assert_eq!(t.len(), 9);
        assert!(t.get(3).is_none());
        assert!(t.get_gen_mut(3, g).is_none());
        assert!(t.reserve_one());
        let r = t.alloc(77).unwrap();
        assert_eq!(r, 3, "the freed record is reused");
        let x = t.get(r).unwrap();
        assert_eq!((x.node, x.gen), (77, g + 1));
        assert_eq!((x.est, x.pins, x.temporary, x.cell.live), ([0; 2], 0, 0, 0));
        assert!(x.is_idle() && !x.monitored(0) && !x.monitored(1));
        assert!(t.get_gen_mut(r, g).is_none(), "a stale handle stays stale");
        assert!(t.get_gen_mut(r, g + 1).is_some());
        assert_eq!(t.len(), 10);
    }

    #[test]
    fn memory_counts_the_records_and_the_free_list() {
        let mut t = Items::new();
        assert_eq!(t.memory_bytes(), 0);
        for n in 0..100 {
            assert!(t.reserve_one());
            t.alloc(n).unwrap();
        }
        let cap = t.memory_bytes() / std::mem::size_of::<Item>();
        assert!(cap >= 100);
        for r in 0..50 {
            t.release(r);
        }
        assert!(
            t.memory_bytes() >= cap * std::mem::size_of::<Item>() + 50 * std::mem::size_of::<u32>()
        );
    }

    #[test]
    fn alloc_without_room_fails() {
        let mut t = Items::new();
        assert_eq!(t.alloc(1), None, "no room reserved");
        assert!(t.reserve_one());
        assert!(t.alloc(1).is_some());
    }
}
