//! The monitored calling context tree: an arena of nodes with stable `u32`
//! indices, a free list, and first-child / next-sibling / prev-sibling links.
//!
//! Children are found through a hash index on (parent, key, item-ness)
//! placed by path hash (`child_index.rs`), about one probe whatever the
//! fan-out; the sibling lists serve traversals and pruning.
//! A freed slot's generation is bumped, so stale references (pointer-table
//! entries, cursors) can tell that their node is gone.

use crate::child_index::{path_hash, ChildIndex, MAX_CHILD, ROOT_HASH};
use crate::heap::LiveCell;

/// No node.
pub const NONE: u32 = u32::MAX;
/// Index of the root.
pub const ROOT: u32 = 0;
/// Slot value of a node monitored without a queue (exact mode).
pub const EXACT_SLOT: u32 = u32::MAX - 1;

/// The node is a stream item (a full context, ending in a kind key).
pub const F_ITEM: u8 = 1;
/// The node's counter for weight 0 / 1 was maintained by Space-Saving at some
/// time since the node was created, so the frozen counter is a valid bound.
pub const F_SEEN: [u8; 2] = [2, 4];
/// The slot is in use.
pub const F_ALIVE: u8 = 8;

#[derive(Clone, Debug)]
pub struct Node {
    pub parent: u32,
    pub first_child: u32,
    pub next_sibling: u32,
    pub prev_sibling: u32,
    /// Return address, or the kind (pseudo-)key of an item.
    pub key: u64,
    /// Path hash of the node ([`path_hash`] of the keys from the root).
    pub hash: u64,
    /// Space-Saving estimate and error per weight (count, bytes).
    pub est: [u64; 2],
    pub err: [u64; 2],
    /// Slot in the weight's queue, `NONE` when not monitored.
    pub slot: [u32; 2],
    pub gen: u32,
    /// Cursors whose current context this is.
    pub pins: u32,
    pub flags: u8,
    pub cell: LiveCell,
    /// Temporary allocations of this context (items only).
    pub temporary: u64,
}

impl Node {
    fn vacant(gen: u32) -> Node {
        Node {
            parent: NONE,
            first_child: NONE,
            next_sibling: NONE,
            prev_sibling: NONE,
            key: 0,
            hash: 0,
            est: [0; 2],
            err: [0; 2],
            slot: [NONE; 2],
            gen,
            pins: 0,
            flags: 0,
            cell: LiveCell::default(),
            temporary: 0,
        }
    }

    pub fn is_item(&self) -> bool {
        self.flags & F_ITEM != 0
    }

    pub fn monitored(&self, w: usize) -> bool {
        self.slot[w] != NONE
    }

    /// May be pruned: a leaf, monitored in no weight, not pinned.
    pub fn is_dead(&self) -> bool {
        self.first_child == NONE && self.slot == [NONE; 2] && self.pins == 0
    }
}

/// Slots the arena grows by when full: from [`QUARTER_FROM`] slots on, a
/// quarter of its size, not the doubling of `Vec::push` (kept below it, as
/// small trees had it). The tracer's heap moves a large block by `mremap`,
/// so a growth copies nothing whatever its size, and the slots not yet used
/// are never touched; but they counted as the tracer's allocation: a CP2K
/// rank's 298 000 nodes sat in an arena of 524 288 (60 of the 89.6 MiB its
/// report said the tracer allocated).
fn growth(len: usize) -> usize {
    if len < QUARTER_FROM {
        len.max(4)
    } else {
        len / 4
    }
}

const QUARTER_FROM: usize = 4096;

#[derive(Clone, Debug)]
pub struct Mcct {
    nodes: Vec<Node>,
    free: Vec<u32>,
    alive: usize,
    index: ChildIndex,
}

impl Default for Mcct {
    fn default() -> Self {
        Mcct::new()
    }
}

impl Mcct {
    pub fn new() -> Mcct {
        let mut root = Node::vacant(0);
        root.flags = F_ALIVE;
        root.hash = ROOT_HASH;
        Mcct {
            nodes: vec![root],
            free: Vec::new(),
            alive: 1,
            index: ChildIndex::new(),
        }
    }

    /// Number of nodes in the tree, root included.
    pub fn len(&self) -> usize {
        self.alive
    }

    pub fn is_empty(&self) -> bool {
        self.alive == 0
    }

    /// Arena slots (live or free): every node index is below this.
    pub fn memory_slots(&self) -> usize {
        self.nodes.len()
    }

    pub fn memory_bytes(&self) -> u64 {
        (self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.free.capacity() * std::mem::size_of::<u32>()
            + self.index.memory_bytes()) as u64
    }

    /// A live node.
    pub fn get(&self, i: u32) -> Option<&Node> {
        self.nodes
            .get(i as usize)
            .filter(|n| n.flags & F_ALIVE != 0)
    }

    pub fn get_mut(&mut self, i: u32) -> Option<&mut Node> {
        self.nodes
            .get_mut(i as usize)
            .filter(|n| n.flags & F_ALIVE != 0)
    }

    /// A live node with generation `gen`.
    pub fn get_gen_mut(&mut self, i: u32, gen: u32) -> Option<&mut Node> {
        self.get_mut(i).filter(|n| n.gen == gen)
    }

    /// The counter of weight `w` of node `i` (0 when absent), for the queues.
    pub fn est(&self, i: u32, w: usize) -> u64 {
        self.nodes.get(i as usize).map_or(0, |n| n.est[w & 1])
    }

    /// Child of `parent` with `key` (and item-ness), created when missing.
    /// `None` if `parent` is not a live node or the arena is exhausted.
    pub fn child(&mut self, parent: u32, key: u64, item: bool) -> Option<u32> {
        let h = path_hash(self.get(parent)?.hash, key, item);
        self.child_at(parent, h, key, item)
    }

    /// [`Mcct::child`] for a caller that knows the child's path hash `hash`
    /// (`path_hash` of `parent`'s hash, `key` and `item`). A descent computes
    /// each level's hash from its frames, so every level's index probe can
    /// start before the level above it is found.
    #[inline]
    pub fn child_at(&mut self, parent: u32, hash: u64, key: u64, item: bool) -> Option<u32> {
        if let Some(c) = self.index.get(hash, parent, key, item) {
            return Some(c);
        }
        self.add_child(parent, hash, key, item)
    }

    #[cold]
    fn add_child(&mut self, parent: u32, hash: u64, key: u64, item: bool) -> Option<u32> {
        debug_assert_eq!(
            self.get(parent).map(|p| path_hash(p.hash, key, item)),
            Some(hash)
        );
        self.get(parent)?;
        // Room first (the arena and the index), so that memory the process
        // no longer has ends here, with nothing to undo: the event then
        // counts in the stream only (`Hcct::record`).
        if self.free.is_empty()
            && self.nodes.len() == self.nodes.capacity()
            && self
                .nodes
                .try_reserve_exact(growth(self.nodes.len()))
                .is_err()
        {
            return None;
        }
        let nodes = &self.nodes;
        let hash_of = |c: u32| nodes.get(c as usize).map_or(0, |n| n.hash);
        if !self.index.reserve_one(&hash_of) {
            return None;
        }
        let i = self.alloc(key, hash, item)?;
        self.link_front(parent, i);
        let nodes = &self.nodes;
        let hash_of = |c: u32| nodes.get(c as usize).map_or(0, |n| n.hash);
        let placed = self.index.insert(hash, parent, key, item, i, &hash_of);
        debug_assert!(placed, "room was reserved");
        Some(i)
    }

    fn alloc(&mut self, key: u64, hash: u64, item: bool) -> Option<u32> {
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                let i = u32::try_from(self.nodes.len()).ok()?;
                if i >= MAX_CHILD {
                    return None;
                }
                self.nodes.push(Node::vacant(0));
                i
            }
        };
        let n = self.nodes.get_mut(i as usize)?;
        let gen = n.gen;
        *n = Node::vacant(gen);
        n.key = key;
        n.hash = hash;
        n.flags = F_ALIVE | if item { F_ITEM } else { 0 };
        self.alive += 1;
        Some(i)
    }

    fn link_front(&mut self, parent: u32, c: u32) {
        let Some(p) = self.nodes.get_mut(parent as usize) else {
            return;
        };
        let old = p.first_child;
        p.first_child = c;
        if let Some(o) = self.nodes.get_mut(old as usize) {
            o.prev_sibling = c;
        }
        if let Some(n) = self.nodes.get_mut(c as usize) {
            n.parent = parent;
            n.prev_sibling = NONE;
            n.next_sibling = old;
        }
    }

    fn unlink(&mut self, c: u32) {
        let Some(n) = self.nodes.get(c as usize) else {
            return;
        };
        let (parent, prev, next) = (n.parent, n.prev_sibling, n.next_sibling);
        if prev == NONE {
            if let Some(p) = self.nodes.get_mut(parent as usize) {
                if p.first_child == c {
                    p.first_child = next;
                }
            }
        } else if let Some(p) = self.nodes.get_mut(prev as usize) {
            p.next_sibling = next;
        }
        if let Some(nx) = self.nodes.get_mut(next as usize) {
            nx.prev_sibling = prev;
        }
    }

    /// Removes leaf `i` (never the root); returns its parent. The caller has
    /// already moved the node's live bytes elsewhere.
    pub fn remove_leaf(&mut self, i: u32) -> Option<u32> {
        if i == ROOT {
            return None;
        }
        let n = self.get(i)?;
        if n.first_child != NONE {
            return None;
        }
        let (parent, key, hash, item) = (n.parent, n.key, n.hash, n.is_item());
        let nodes = &self.nodes;
        let hash_of = |c: u32| nodes.get(c as usize).map_or(0, |n| n.hash);
        self.index.remove(hash, parent, key, item, &hash_of);
        self.unlink(i);
        let n = self.nodes.get_mut(i as usize)?;
        let gen = n.gen.wrapping_add(1);
        *n = Node::vacant(gen);
        // Without memory for the free list the slot is not reused.
        if self.free.try_reserve(1).is_ok() {
            self.free.push(i);
        }
        self.alive -= 1;
        Some(parent)
    }

    /// Live node indices in a preorder (parents before children).
    ///
    /// The links are copied first, in one pass over the arena: the walk then
    /// reads 8 bytes a node from a compact table instead of one cache line
    /// of the arena after another (a third of taking a CP2K rank's profile,
    /// 300 000 nodes, before).
    pub fn preorder(&self) -> Vec<u32> {
        let links: Vec<(u32, u32)> = self
            .nodes
            .iter()
            .map(|n| {
                let first = if n.flags & F_ALIVE != 0 {
                    n.first_child
                } else {
                    NONE
                };
                (first, n.next_sibling)
            })
            .collect();
        let mut out = Vec::with_capacity(self.alive);
        let mut stack = vec![ROOT];
        while let Some(i) = stack.pop() {
            out.push(i);
            let mut c = links.get(i as usize).map_or(NONE, |l| l.0);
            while c != NONE {
                stack.push(c);
                c = links.get(c as usize).map_or(NONE, |l| l.1);
            }
        }
        out
    }

    /// The live nodes with their indices, in arena order.
    pub fn live(&self) -> impl Iterator<Item = (u32, &Node)> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.flags & F_ALIVE != 0)
            .map(|(i, n)| (i as u32, n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The arena holds at most a quarter more slots than nodes (once past
    /// [`QUARTER_FROM`]), and every node keeps its index as it grows.
    #[test]
    fn the_arena_grows_by_a_quarter() {
        let mut t = Mcct::new();
        let mut ids = Vec::new();
        let mut parent = ROOT;
        for k in 0..20_000u64 {
            let c = t.child(parent, 0x1000 + k, false).unwrap();
            ids.push(c);
            if k % 7 == 0 {
                parent = c;
            }
            let len = t.memory_slots();
            assert!(t.nodes.capacity() <= len + len / 4 + QUARTER_FROM, "{len}");
        }
        assert_eq!(t.len(), 20_001);
        let mut parent = ROOT;
        for (k, &c) in ids.iter().enumerate() {
            assert_eq!(t.child(parent, 0x1000 + k as u64, false), Some(c));
            if k % 7 == 0 {
                parent = c;
            }
        }
    }

    #[test]
    fn children_found_created_and_removed() {
        let mut t = Mcct::new();
        let a = t.child(ROOT, 0x1000, false).unwrap();
        let b = t.child(ROOT, 0x2000, false).unwrap();
        let k = t.child(a, 3, true).unwrap();
        let f = t.child(a, 3, false).unwrap();
        assert_ne!(k, f, "item and frame keys are distinct");
        assert_eq!(t.child(ROOT, 0x1000, false), Some(a));
        assert_eq!(t.get(ROOT).unwrap().first_child, b, "newest first");
        assert_eq!(t.len(), 5);
        assert_eq!(t.remove_leaf(a), None, "not a leaf");
        let g = t.get(k).unwrap().gen;
        assert_eq!(t.remove_leaf(k), Some(a));
        assert_eq!(t.remove_leaf(f), Some(a));
        assert_eq!(t.remove_leaf(a), Some(ROOT));
        assert!(t.get(k).is_none());
        let k2 = t.child(b, 9, true).unwrap();
        assert!(k2 == k || k2 == f || k2 == a);
        assert_eq!(t.preorder().len(), 3);
        assert_eq!(t.len(), 3);
        assert!(t.get_gen_mut(k, g).is_none());
        assert_eq!(t.remove_leaf(ROOT), None);
        assert!(t.child(12345, 1, false).is_none());
    }
}
