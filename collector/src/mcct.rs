//! The monitored calling context tree: an arena of nodes with stable `u32`
//! indices, a free list, and first-child / next-sibling / prev-sibling links.
//!
//! Children are found through a hash index on (parent, key, item-ness)
//! placed by path hash (`child_index.rs`), about one probe whatever the
//! fan-out; the sibling lists serve traversals and pruning.
//! A freed slot's generation is bumped, so stale references can tell that
//! their node is gone.
//!
//! A node holds what every node needs (48 bytes). What only an item (a full
//! context) keeps is in its record in the item table (`items.rs`), whose id
//! the node holds; the index's entry of an item holds that id too, so a
//! descent reaches the record, which the per-event path updates, without
//! reading the item's node.

use std::ops::Deref;

use crate::child_index::{path_hash, ChildIndex, ROOT_HASH};
use crate::heap::LiveCell;
use crate::items::{Item, Items, MAX_ITEM};

/// No node.
pub const NONE: u32 = u32::MAX;
/// Index of the root.
pub const ROOT: u32 = 0;
/// Slot value of a node monitored without a queue (exact mode).
pub const EXACT_SLOT: u32 = u32::MAX - 1;

/// The node is a stream item (a full context, ending in a kind key).
pub const F_ITEM: u8 = 1;
/// The slot is in use.
pub const F_ALIVE: u8 = 8;

/// Node indices are below this (a parent's index shares its word of the
/// child index with a probe distance: 268 million nodes, 12.9 GB of them).
const MAX_NODE: u32 = crate::child_index::MAX_PARENT;
/// The child index holds an item's record id with this bit (frames: their
/// node index), so that the path hash of any entry can be found.
const REC: u32 = 1 << 30;
const _: () = assert!(MAX_NODE < REC && (REC | (MAX_ITEM - 1)) < crate::child_index::MAX_CHILD);

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
    pub gen: u32,
    /// The item's record ([`Mcct::item`]), `NONE` for a frame.
    pub item: u32,
    pub flags: u8,
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
            gen,
            item: NONE,
            flags: 0,
        }
    }

    pub fn is_item(&self) -> bool {
        self.flags & F_ITEM != 0
    }
}

/// A live node as [`Mcct::get`] gives it: the node's fields (through
/// `Deref`) and its item's figures (none for a frame).
#[derive(Clone, Copy, Debug)]
pub struct NodeView<'a> {
    node: &'a Node,
    item: Option<&'a Item>,
    /// Live bytes of the context (empty for a frame).
    pub cell: LiveCell,
    /// Temporary allocations of the context (0 for a frame).
    pub temporary: u64,
}

impl Deref for NodeView<'_> {
    type Target = Node;
    fn deref(&self) -> &Node {
        self.node
    }
}

impl<'a> NodeView<'a> {
    /// The item's record (`None` for a frame).
    pub fn item(&self) -> Option<&'a Item> {
        self.item
    }

    pub fn monitored(&self, w: usize) -> bool {
        self.item.is_some_and(|x| x.monitored(w))
    }
}

/// Slots the arena grows by when full: from [`QUARTER_FROM`] slots on, a
/// quarter of its size, not the doubling of `Vec::push` (kept below it, as
/// small trees had it). The tracer's heap moves a large block by `mremap`,
/// so a growth copies nothing whatever its size, and the slots not yet used
/// are never touched; but they counted as the tracer's allocation: a CP2K
/// rank's 298 000 nodes sat in an arena of 524 288 (60 of the 89.6 MiB its
/// report said the tracer allocated). The item table grows the same way.
pub(crate) fn growth(len: usize) -> usize {
    if len < QUARTER_FROM {
        len.max(4)
    } else {
        len / 4
    }
}

const QUARTER_FROM: usize = 4096;

/// The path hash of the child an index entry holds (`c`: a node index, or
/// a record id with [`REC`]).
fn entry_hash(nodes: &[Node], items: &Items, c: u32) -> u64 {
    let node = if c & REC != 0 {
        items.get(c & !REC).map_or(NONE, |x| x.node)
    } else {
        c
    };
    nodes.get(node as usize).map_or(0, |n| n.hash)
}

#[derive(Clone, Debug)]
pub struct Mcct {
    nodes: Vec<Node>,
    free: Vec<u32>,
    alive: usize,
    items: Items,
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
            items: Items::new(),
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

    /// Number of item nodes (records in use).
    pub fn item_count(&self) -> usize {
        self.items.len()
    }

    /// Arena slots (live or free): every node index is below this.
    pub fn memory_slots(&self) -> usize {
        self.nodes.len()
    }

    /// The node arena, the item table, their free lists and the index.
    pub fn memory_bytes(&self) -> u64 {
        (self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.free.capacity() * std::mem::size_of::<u32>()
            + self.items.memory_bytes()
            + self.index.memory_bytes()) as u64
    }

    /// A live node.
    #[inline]
    pub fn node(&self, i: u32) -> Option<&Node> {
        self.nodes
            .get(i as usize)
            .filter(|n| n.flags & F_ALIVE != 0)
    }

    /// A live node with its item's figures.
    pub fn get(&self, i: u32) -> Option<NodeView<'_>> {
        let node = self.node(i)?;
        let item = self.items.get(node.item);
        Some(NodeView {
            node,
            item,
            cell: item.map(|x| x.cell).unwrap_or_default(),
            temporary: item.map_or(0, |x| x.temporary),
        })
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

    /// The record of a live item.
    #[inline]
    pub fn item(&self, r: u32) -> Option<&Item> {
        self.items.get(r)
    }

    #[inline]
    pub fn item_mut(&mut self, r: u32) -> Option<&mut Item> {
        self.items.get_mut(r)
    }

    /// The record of a live item with generation `gen` (a handle's).
    #[inline]
    pub fn item_gen_mut(&mut self, r: u32, gen: u32) -> Option<&mut Item> {
        self.items.get_gen_mut(r, gen)
    }

    /// May node `i` be pruned: a live leaf other than the root, not an
    /// item monitored in some weight or pinned?
    pub fn is_dead(&self, i: u32) -> bool {
        self.node(i).is_some_and(|n| {
            i != ROOT
                && n.first_child == NONE
                && (!n.is_item() || self.items.get(n.item).is_none_or(Item::is_idle))
        })
    }

    /// Child of `parent` with `key` (and item-ness), created when missing.
    /// `None` if `parent` is not a live node or the arena is exhausted.
    pub fn child(&mut self, parent: u32, key: u64, item: bool) -> Option<u32> {
        let h = path_hash(self.node(parent)?.hash, key, item);
        self.child_at(parent, h, key, item)
    }

    /// [`Mcct::child`] for a caller that knows the child's path hash `hash`
    /// (`path_hash` of `parent`'s hash, `key` and `item`). A descent computes
    /// each level's hash from its frames, so every level's index probe can
    /// start before the level above it is found.
    #[inline]
    pub fn child_at(&mut self, parent: u32, hash: u64, key: u64, item: bool) -> Option<u32> {
        if item {
            return self.item_at(parent, hash, key).map(|(c, _)| c);
        }
        if let Some(c) = self.index.get(hash, parent, key, false) {
            return Some(c);
        }
        self.add_child(parent, hash, key, false).map(|(c, _)| c)
    }

    /// The item child of `parent` with `key` and path hash `hash`, created
    /// when missing, as (node, record). A found item's node is not read.
    #[inline]
    pub fn item_at(&mut self, parent: u32, hash: u64, key: u64) -> Option<(u32, u32)> {
        if let Some(c) = self.index.get(hash, parent, key, true) {
            let r = c & !REC;
            return Some((self.items.get(r)?.node, r));
        }
        self.add_child(parent, hash, key, true)
    }

    /// A new child; (node, record), the record `NONE` for a frame.
    #[cold]
    fn add_child(&mut self, parent: u32, hash: u64, key: u64, item: bool) -> Option<(u32, u32)> {
        debug_assert_eq!(
            self.node(parent).map(|p| path_hash(p.hash, key, item)),
            Some(hash)
        );
        self.node(parent)?;
        // Room first (the arena, the item table and the index), so that
        // memory the process no longer has ends here, with nothing to undo:
        // the event then counts in the stream only (`Hcct::record`).
        if self.free.is_empty()
            && self.nodes.len() == self.nodes.capacity()
            && self
                .nodes
                .try_reserve_exact(growth(self.nodes.len()))
                .is_err()
        {
            return None;
        }
        if item && !self.items.reserve_one() {
            return None;
        }
        let (nodes, items) = (&self.nodes, &self.items);
        if !self.index.reserve_one(&|c| entry_hash(nodes, items, c)) {
            return None;
        }
        let i = self.alloc(key, hash, item)?;
        let r = if item {
            let r = self.items.alloc(i)?;
            if let Some(n) = self.nodes.get_mut(i as usize) {
                n.item = r;
            }
            r
        } else {
            NONE
        };
        self.link_front(parent, i);
        let entry = if item { REC | r } else { i };
        let (nodes, items) = (&self.nodes, &self.items);
        let placed = self.index.insert(hash, parent, key, item, entry, &|c| {
            entry_hash(nodes, items, c)
        });
        debug_assert!(placed, "room was reserved");
        Some((i, r))
    }

    fn alloc(&mut self, key: u64, hash: u64, item: bool) -> Option<u32> {
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                let i = u32::try_from(self.nodes.len()).ok()?;
                if i >= MAX_NODE {
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

    /// Removes leaf `i` (never the root), and its item's record; returns
    /// its parent. The caller has already moved the item's live bytes
    /// elsewhere.
    pub fn remove_leaf(&mut self, i: u32) -> Option<u32> {
        if i == ROOT {
            return None;
        }
        let n = self.node(i)?;
        if n.first_child != NONE {
            return None;
        }
        let (parent, key, hash, item, r) = (n.parent, n.key, n.hash, n.is_item(), n.item);
        let (nodes, items) = (&self.nodes, &self.items);
        self.index
            .remove(hash, parent, key, item, &|c| entry_hash(nodes, items, c));
        if item {
            self.items.release(r);
        }
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

    /// A frame node carries no item fields: 48 bytes (120 when every node
    /// had them).
    #[test]
    fn a_node_is_48_bytes() {
        assert_eq!(std::mem::size_of::<Node>(), 48);
        assert!(std::mem::size_of::<Item>() <= 88);
    }

    /// An item gets a record, found through the index without its node;
    /// a pruned item's record is freed and the next item reuses it, with a
    /// new generation.
    #[test]
    fn a_pruned_items_record_is_reused() {
        let mut t = Mcct::new();
        let a = t.child(ROOT, 0x1000, false).unwrap();
        assert_eq!(t.node(a).unwrap().item, NONE, "a frame has no record");
        let h = path_hash(t.node(a).unwrap().hash, 1, true);
        let (k, r) = t.item_at(a, h, 1).unwrap();
        assert_eq!(t.item_count(), 1);
        assert_eq!(t.node(k).unwrap().item, r);
        assert_eq!(t.item(r).unwrap().node, k);
        assert_eq!(t.item_at(a, h, 1), Some((k, r)), "found, not created");
        assert_eq!(t.child(a, 1, true), Some(k));
        let x = t.item_mut(r).unwrap();
        x.est = [3, 300];
        x.temporary = 2;
        x.cell.add(48, 0);
        let g = x.gen;
        let v = t.get(k).unwrap();
        assert!(v.is_item());
        assert_eq!((v.cell.live, v.temporary), (48, 2));
        let v = t.get(a).unwrap();
        assert!(v.item().is_none() && !v.monitored(0));
        assert_eq!((v.cell.live, v.temporary), (0, 0));
        // Monitored or pinned: not dead.
        t.item_mut(r).unwrap().slot[1] = 0;
        assert!(!t.is_dead(k));
        t.item_mut(r).unwrap().slot[1] = NONE;
        t.item_mut(r).unwrap().pins = 1;
        assert!(!t.is_dead(k));
        t.item_mut(r).unwrap().pins = 0;
        assert!(t.is_dead(k) && !t.is_dead(a) && !t.is_dead(ROOT));
        assert_eq!(t.remove_leaf(k), Some(a));
        assert_eq!(t.item_count(), 0);
        assert!(t.item(r).is_none() && t.item_gen_mut(r, g).is_none());
        assert!(t.is_dead(a));
        // Another item, elsewhere, takes the record.
        let b = t.child(ROOT, 0x2000, false).unwrap();
        let hb = path_hash(t.node(b).unwrap().hash, 2, true);
        let (k2, r2) = t.item_at(b, hb, 2).unwrap();
        assert_eq!(r2, r);
        assert_eq!(t.item(r2).unwrap().node, k2);
        assert!(t.item_gen_mut(r, g).is_none(), "the old handle is stale");
        let x = t.item(r2).unwrap();
        assert_eq!((x.est, x.temporary, x.cell.live), ([0; 2], 0, 0));
        assert_eq!(t.get(k2).unwrap().cell.live, 0);
        assert_eq!(t.item_at(a, h, 1).map(|(_, r)| r), Some(r + 1));
    }

    /// Items and frames under churn: the index finds every item's record
    /// after entries moved (removals, growth), and records are reused.
    #[test]
    fn records_follow_their_items_under_churn() {
        let mut t = Mcct::new();
        let mut live: Vec<(u32, u64, u32, u32)> = Vec::new();
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut made = 0;
        for step in 0..30_000u64 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            if s.is_multiple_of(3) && !live.is_empty() {
                let (k, _, r, _) = live.swap_remove((s >> 8) as usize % live.len());
                assert_eq!(t.item(r).unwrap().node, k);
                let p = t.remove_leaf(k).unwrap();
                if t.is_dead(p) {
                    t.remove_leaf(p);
                }
            } else {
                let f = t.child(ROOT, 0x10 + (s >> 20) % 64, false).unwrap();
                let key = step;
                let h = path_hash(t.node(f).unwrap().hash, key, true);
                let (k, r) = t.item_at(f, h, key).unwrap();
                made += 1;
                live.push((k, key, r, f));
            }
        }
        assert!(made > 15_000);
        assert_eq!(t.item_count(), live.len());
        assert!(t.items.memory_bytes() < (live.len() + 4096) * 2 * std::mem::size_of::<Item>());
        for &(k, key, r, f) in &live {
            let h = path_hash(t.node(f).unwrap().hash, key, true);
            assert_eq!(t.item_at(f, h, key), Some((k, r)));
            assert_eq!(t.node(k).unwrap().item, r);
        }
        assert_eq!(t.item_count(), live.len(), "nothing created");
    }

    /// `memory_bytes` counts the node arena, the item table and the index.
    #[test]
    fn memory_counts_nodes_items_and_index() {
        let mut t = Mcct::new();
        let empty = t.memory_bytes();
        let mut parent = ROOT;
        for k in 0..1000u64 {
            parent = t.child(parent, 0x1000 + k, false).unwrap();
        }
        let frames = t.memory_bytes();
        let node = std::mem::size_of::<Node>() as u64;
        assert!(frames >= empty + 1000 * node);
        assert_eq!(t.items.memory_bytes(), 0, "frames have no records");
        for k in 0..1000u64 {
            t.child(parent, k, true).unwrap();
        }
        let with_items = t.memory_bytes();
        let item = std::mem::size_of::<Item>() as u64;
        assert!(with_items >= frames + 1000 * (node + item));
        assert_eq!(
            with_items,
            (t.nodes.capacity() * std::mem::size_of::<Node>()
                + t.free.capacity() * 4
                + t.items.memory_bytes()
                + t.index.memory_bytes()) as u64
        );
    }
}
