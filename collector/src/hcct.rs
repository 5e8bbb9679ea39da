//! The hot calling context tree: an MCCT whose items (full contexts) are
//! counted by a weighted Space-Saving over two weights at once (events and
//! bytes), pruned on line by Algorithm 1, plus per-context live bytes.
//!
//! Space-Saving details (per weight, capacity ⌈1/ε⌉):
//! - a monitored item's counter grows by the weight;
//! - an unmonitored item enters a free slot if any (exact counter), else it
//!   replaces the minimum victim of that weight's lazy queue with
//!   `est = min + w` (standard Space-Saving, so the minimum never decreases
//!   and every unmonitored item's true value stays below it). The error is
//!   `min` for a fresh item; an item still in the tree because it is
//!   monitored in the other weight (or pinned) and evicted from this weight
//!   earlier keeps its lower bound `old_est - old_err`, so `err = min - that`
//!   (tighter, still valid: its true value did not change while unmonitored);
//! - an unmonitored item that stays in the tree reports its frozen counter,
//!   an upper bound (true value unchanged since its eviction);
//! - weight-0 updates of unmonitored items are skipped (no-op for the truth);
//! - an item monitored in neither weight, that is a leaf and not pinned by a
//!   cursor, is pruned together with its unmonitored leaf ancestors.
//!
//! Exact mode keeps every item with exact counters (an exact CCT).

use std::sync::atomic::{AtomicU64, Ordering};

use wmhcct_format::{FrameKey, Node as OutNode, Tree, MONITORED_BYTES, MONITORED_COUNT, NO_PARENT};

use crate::child_index::{path_hash, ROOT_HASH};
use crate::cursor::Cursor;
use crate::heap::LiveCell;
use crate::items::F_SEEN;
use crate::mcct::{Mcct, EXACT_SLOT, NONE, ROOT};
use crate::space_saving::LazyQueue;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Largest Space-Saving capacity accepted (per weight); the settings'
/// smallest ε (`wmhcct_format::settings::MIN_EPSILON`) stays within it.
pub const MAX_CAPACITY: usize = 1 << 24;

/// Space-Saving capacity for `epsilon`: ⌈1/ε⌉, or `None` (exact) for a
/// non-positive or non-finite ε.
pub fn capacity_for(epsilon: f64) -> Option<usize> {
    if epsilon.is_nan() || epsilon <= 0.0 || !epsilon.is_finite() {
        return None;
    }
    let c = (1.0 / epsilon).ceil();
    Some(if c >= MAX_CAPACITY as f64 {
        MAX_CAPACITY
    } else {
        (c as usize).max(1)
    })
}

const _: () = assert!(
    1.0 / wmhcct_format::settings::MIN_EPSILON <= MAX_CAPACITY as f64
        && wmhcct_format::settings::MIN_PHI / 5.0 >= wmhcct_format::settings::MIN_EPSILON
);

#[derive(Debug)]
pub struct Hcct {
    id: u64,
    tree: Mcct,
    /// `None`: exact mode.
    queues: Option<[LazyQueue; 2]>,
    /// Live bytes of pruned contexts.
    evicted: LiveCell,
    /// Stream lengths per weight.
    stream: [u64; 2],
    /// Start descents below the cursor's unchanged prefix (off: from the root).
    reuse_prefix: bool,
}

impl Hcct {
    /// `capacity`: monitored items per weight; `None` for an exact CCT.
    pub fn new(capacity: Option<usize>) -> Hcct {
        Hcct {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            tree: Mcct::new(),
            queues: capacity.map(|c| [LazyQueue::new(c), LazyQueue::new(c)]),
            evicted: LiveCell::default(),
            stream: [0; 2],
            reuse_prefix: true,
        }
    }

    /// Turns prefix-aware descent off (every descent starts at the root)
    /// or on (the default). Results are identical; only the cost differs.
    pub fn set_prefix_reuse(&mut self, on: bool) {
        self.reuse_prefix = on;
    }

    pub fn capacity(&self) -> Option<usize> {
        self.queues.as_ref().map(|q| q[0].capacity())
    }

    /// Nodes in the MCCT, root included.
    pub fn node_count(&self) -> usize {
        self.tree.len()
    }

    pub fn tree(&self) -> &Mcct {
        &self.tree
    }

    pub fn evicted(&self) -> &LiveCell {
        &self.evicted
    }

    /// Stream lengths (events, bytes).
    pub fn stream(&self) -> (u64, u64) {
        (self.stream[0], self.stream[1])
    }

    pub fn memory_bytes(&self) -> u64 {
        self.tree.memory_bytes()
            + self
                .queues
                .as_ref()
                .map_or(0, |q| q[0].memory_bytes() + q[1].memory_bytes())
    }

    /// Is the cursor's path a valid, pinned path of this tree?
    fn cursor_valid(&self, cur: &Cursor) -> bool {
        if cur.owner != self.id
            || !cur.set
            || cur.keys.len() < cur.levels
            || cur.hashes.len() < cur.levels
            || cur.path.len() <= cur.levels
        {
            return false;
        }
        match cur.leaf() {
            Some((r, g)) => self.tree.item(r).is_some_and(|x| {
                x.gen == g && x.pins > 0 && cur.path.get(cur.levels) == Some(&x.node)
            }),
            None => false,
        }
    }

    /// Records one event of context `frames` (leaf first) + `item_key`,
    /// with weights (1, `bytes`). Returns the item's handle: its record
    /// ([`Mcct::item`]) and that record's generation.
    ///
    /// The descent starts below the deepest node of the cursor's previous
    /// path whose frames are unchanged. `unchanged` is the caller's hint; the
    /// collector checks it against the keys the cursor kept (a contiguous
    /// compare, cheap next to the tree walk) so a wrong hint cannot corrupt
    /// the tree, and reuses the longest verified common prefix.
    pub fn record(
        &mut self,
        cur: &mut Cursor,
        frames: &[u64],
        unchanged: usize,
        item_key: u64,
        bytes: u64,
        epoch: u64,
    ) -> Option<(u32, u32)> {
        let old = if self.cursor_valid(cur) {
            cur.leaf()
        } else {
            cur.clear();
            None
        };
        let exact = cur.advance_stamp();
        let n = frames.len();
        let mut start = 0;
        if old.is_some() && self.reuse_prefix {
            let limit = n.min(cur.levels);
            let hinted = unchanged.min(limit);
            let same = |d: usize| cur.keys[d] == frames[n - 1 - d];
            // Verify the hinted prefix (unless it is exact: relative to
            // the frames this path was built from), then extend it while
            // frames agree.
            start = if exact {
                hinted
            } else {
                (0..hinted).find(|&d| !same(d)).unwrap_or(hinted)
            };
            if start == hinted {
                while start < limit && same(start) {
                    start += 1;
                }
            }
        }
        // The same context as the cursor's previous event (bursts of them
        // are common): its item node, pinned by the cursor, stays current.
        if let Some((r, g)) = old {
            if start == n && cur.levels == n && cur.item_key == item_key {
                self.update(r, 1, bytes, epoch);
                return Some((r, g));
            }
        }
        cur.levels = start;
        cur.set = false;
        let (mut node, mut hash) = match start.checked_sub(1) {
            None => (ROOT, ROOT_HASH),
            Some(d) => (cur.path[d], cur.hashes[d]),
        };
        // The levels below the prefix are written in place.
        cur.room_for(n);
        let mut failed = false;
        let below = frames.get(..n - start).unwrap_or(&[]);
        let slots = cur
            .keys
            .get_mut(start..n)
            .unwrap_or(&mut [])
            .iter_mut()
            .zip(cur.hashes.get_mut(start..n).unwrap_or(&mut []))
            .zip(cur.path.get_mut(start..n).unwrap_or(&mut []));
        for (&key, ((k, h), p)) in below.iter().rev().zip(slots) {
            // Computed from the frames alone: the next level's probe does
            // not wait for this level's node.
            hash = path_hash(hash, key, false);
            match self.tree.child_at(node, hash, key, false) {
                Some(c) => {
                    node = c;
                    *k = key;
                    *h = hash;
                    *p = c;
                }
                None => {
                    failed = true;
                    break;
                }
            }
        }
        // The item is found as its record: the node is not read.
        let leaf = if failed {
            None
        } else {
            self.tree
                .item_at(node, path_hash(hash, item_key, true), item_key)
        };
        let result = leaf.and_then(|(l, r)| {
            let slot = cur.path.get_mut(n)?;
            let x = self.tree.item_mut(r)?;
            x.pins = x.pins.saturating_add(1);
            let gen = x.gen;
            *slot = l;
            cur.levels = n;
            cur.set = true;
            cur.item = r;
            cur.leaf_gen = gen;
            cur.item_key = item_key;
            cur.owner = self.id;
            Some((r, gen))
        });
        if result.is_none() {
            cur.clear();
        }
        if let Some((r, _)) = result {
            self.update(r, 1, bytes, epoch);
        } else {
            self.count_stream(1, bytes);
        }
        if let Some((r, g)) = old {
            self.unpin(r, g, epoch);
        }
        // Nodes created for a path that failed midway are pruned here.
        if result.is_none() && node != ROOT {
            self.prune_upward(node, epoch);
        }
        result
    }

    /// Records one event of the context `root → item_key` (no cursor).
    pub fn record_at_root(&mut self, item_key: u64, bytes: u64, epoch: u64) -> Option<(u32, u32)> {
        self.record_at_root_n(item_key, 1, bytes, epoch)
    }

    /// Records `count` events of `bytes` bytes in all of the context
    /// `root → item_key` (no cursor).
    pub fn record_at_root_n(
        &mut self,
        item_key: u64,
        count: u64,
        bytes: u64,
        epoch: u64,
    ) -> Option<(u32, u32)> {
        let hash = path_hash(ROOT_HASH, item_key, true);
        let Some((_, r)) = self.tree.item_at(ROOT, hash, item_key) else {
            self.count_stream(count, bytes);
            return None;
        };
        let gen = self.tree.item(r)?.gen;
        self.update(r, count, bytes, epoch);
        // A positive count always leaves the item monitored for count, so
        // it survives.
        self.tree.item(r).map(|_| (r, gen))
    }

    /// Records `count` more events, of `bytes` bytes in all, of the item
    /// (`record`, `gen`) ([`Hcct::record`]'s handle) whose key is
    /// `item_key`, as [`Hcct::record`] of its context would `count` times:
    /// the repeats of one call that the tracer folds into one record. False,
    /// and nothing recorded, when that item is no longer in this tree.
    pub fn repeat(
        &mut self,
        (r, gen): (u32, u32),
        item_key: u64,
        count: u64,
        bytes: u64,
        epoch: u64,
    ) -> bool {
        let held = self
            .item_node(r, gen)
            .and_then(|n| self.tree.node(n))
            .is_some_and(|n| n.key == item_key);
        if held && count > 0 {
            self.update(r, count, bytes, epoch);
        }
        held
    }

    /// This tree's identity (a cursor's `owner`): item handles given out
    /// by one tree mean nothing in another.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Keeps the item (`record`, `gen`) in the tree until [`Hcct::let_go`],
    /// as a cursor's context is kept (a pruned item's repeats could not be
    /// counted in its context). False when it is gone.
    pub fn hold(&mut self, (r, gen): (u32, u32)) -> bool {
        match self.tree.item_gen_mut(r, gen) {
            Some(x) => {
                x.pins = x.pins.saturating_add(1);
                true
            }
            None => false,
        }
    }

    /// Ends a [`Hcct::hold`]: the item may be pruned again.
    pub fn let_go(&mut self, (r, gen): (u32, u32), epoch: u64) {
        self.unpin(r, gen, epoch);
    }

    fn count_stream(&mut self, count: u64, bytes: u64) {
        self.stream[0] = self.stream[0].saturating_add(count);
        self.stream[1] = self.stream[1].saturating_add(bytes);
    }

    /// Space-Saving update of the item whose record is `item` with weights
    /// (`count`, `bytes`).
    #[inline]
    fn update(&mut self, item: u32, count: u64, bytes: u64, epoch: u64) {
        // The common case: an item monitored in both weights. Both counters
        // grow, in the record and in the queues; nothing enters or leaves.
        if let (Some(n), Some([q0, q1])) = (self.tree.item_mut(item), self.queues.as_mut()) {
            if n.slot[0] != NONE && n.slot[1] != NONE {
                n.est[0] = n.est[0].saturating_add(count);
                q0.add(n.slot[0], count);
                n.est[1] = n.est[1].saturating_add(bytes);
                q1.add(n.slot[1], bytes);
                self.count_stream(count, bytes);
                return;
            }
        }
        self.update_slow(item, count, bytes, epoch);
    }

    /// [`Hcct::update`] of an item not monitored in both weights, or in
    /// exact mode.
    #[inline(never)]
    fn update_slow(&mut self, item: u32, count: u64, bytes: u64, epoch: u64) {
        self.count_stream(count, bytes);
        let weights = [count, bytes];
        let mut victims = [NONE; 2];
        for (w, &wt) in weights.iter().enumerate() {
            let Some(node) = self.tree.item(item) else {
                return;
            };
            let slot = node.slot[w];
            let seen = node.seen & F_SEEN[w] != 0;
            let Some(queues) = self.queues.as_mut() else {
                // Exact mode: every item monitored, exact counters.
                if let Some(n) = self.tree.item_mut(item) {
                    n.est[w] = n.est[w].saturating_add(wt);
                    n.slot[w] = EXACT_SLOT;
                    n.seen |= F_SEEN[w];
                }
                continue;
            };
            let q = &mut queues[w];
            if slot != NONE {
                if let Some(n) = self.tree.item_mut(item) {
                    n.est[w] = n.est[w].saturating_add(wt);
                    q.add(slot, wt);
                }
                continue;
            }
            if wt == 0 {
                continue;
            }
            let entering = node.est[w].saturating_add(wt);
            if let Some(s) = q.push(item, entering) {
                if let Some(n) = self.tree.item_mut(item) {
                    n.est[w] = entering;
                    n.slot[w] = s;
                    n.seen |= F_SEEN[w];
                }
                continue;
            }
            let Some((s, min)) = q.find_min() else {
                continue;
            };
            let victim = q.items().get(s as usize).copied().unwrap_or(NONE);
            let Some(n) = self.tree.item_mut(item) else {
                continue;
            };
            // Standard Space-Saving estimate (keeps the minimum monotone, so
            // every unmonitored item stays below it); the error shrinks to
            // the distance to a known lower bound when the node kept one.
            let lower = if seen {
                n.est[w] - n.err[w].min(n.est[w])
            } else {
                0
            };
            let est = min.saturating_add(wt);
            let err = min - lower.min(min);
            n.est[w] = est;
            n.err[w] = err;
            n.slot[w] = s;
            n.seen |= F_SEEN[w];
            q.replace(s, item, est);
            if let Some(v) = self.tree.item_mut(victim) {
                v.slot[w] = NONE;
            }
            victims[w] = victim;
        }
        for v in victims {
            if v != NONE {
                self.prune_item(v, epoch);
            }
        }
    }

    /// Algorithm 1: remove `v` and its ancestors while they are dead leaves.
    fn prune_upward(&mut self, mut v: u32, epoch: u64) {
        while v != ROOT {
            if !self.tree.is_dead(v) {
                return;
            }
            let item = self.tree.node(v).map_or(NONE, |n| n.item);
            if let Some(x) = self.tree.item_mut(item) {
                let mut cell = x.cell;
                self.evicted.absorb(&mut cell, epoch);
            }
            match self.tree.remove_leaf(v) {
                Some(p) => v = p,
                None => return,
            }
        }
    }

    /// [`Hcct::prune_upward`] from the item whose record is `r`; its node
    /// is read only when the record says it may go.
    fn prune_item(&mut self, r: u32, epoch: u64) {
        if let Some(x) = self.tree.item(r).filter(|x| x.is_idle()) {
            let v = x.node;
            self.prune_upward(v, epoch);
        }
    }

    fn unpin(&mut self, r: u32, gen: u32, epoch: u64) {
        if let Some(x) = self.tree.item_gen_mut(r, gen) {
            x.pins = x.pins.saturating_sub(1);
            if x.pins == 0 {
                self.prune_item(r, epoch);
            }
        }
    }

    /// Forget a cursor (its thread exits): unpin its context.
    pub fn release_cursor(&mut self, cur: &mut Cursor, epoch: u64) {
        if self.cursor_valid(cur) {
            if let Some((l, g)) = cur.leaf() {
                self.unpin(l, g, epoch);
            }
        }
        cur.clear();
    }

    /// Adds `bytes` to the live bytes of the item (`item`, `gen`) (a
    /// handle [`Hcct::record`] returned), or of the evicted aggregate when
    /// that item is gone.
    pub fn charge(&mut self, item: u32, gen: u32, bytes: u64, epoch: u64) {
        match self.tree.item_gen_mut(item, gen) {
            Some(x) => x.cell.add(bytes, epoch),
            None => self.evicted.add(bytes, epoch),
        }
    }

    /// Removes `bytes` from the live bytes of the item (`item`, `gen`) or
    /// of the evicted aggregate.
    pub fn discharge(&mut self, item: u32, gen: u32, bytes: u64, epoch: u64) {
        match self.tree.item_gen_mut(item, gen) {
            Some(x) => x.cell.sub(bytes, epoch),
            None => self.evicted.sub(bytes, epoch),
        }
    }

    /// Counts a temporary allocation of the item (`item`, `gen`), unless
    /// that item is gone (the heap's total counts it either way).
    pub fn note_temporary(&mut self, item: u32, gen: u32) {
        if let Some(x) = self.tree.item_gen_mut(item, gen) {
            x.temporary = x.temporary.saturating_add(1);
        }
    }

    /// Upper bound on the weight-`w` value of an item never maintained in
    /// `w` since it entered the tree: the exact queue minimum when full.
    fn floor(&self, w: usize) -> u64 {
        match &self.queues {
            Some(q) if q[w].is_full() => q[w].scan_min().unwrap_or(0),
            _ => 0,
        }
    }

    /// The preorder and, per arena slot, the row the node gets in
    /// [`Hcct::snapshot`] (`NO_PARENT` for no row).
    fn rows(&self) -> (Vec<u32>, Vec<u32>) {
        let order = self.tree.preorder();
        let mut index = vec![NO_PARENT; self.tree.memory_slots()];
        let mut next = 0u32;
        for &i in &order {
            let Some(n) = self.tree.node(i) else { continue };
            if i != ROOT && index.get(n.parent as usize).is_none_or(|&p| p == NO_PARENT) {
                continue;
            }
            if let Some(x) = index.get_mut(i as usize) {
                *x = next;
                next += 1;
            }
        }
        (order, index)
    }

    /// Per arena slot, the row of the node in the next [`Hcct::snapshot`]
    /// (`NO_PARENT` when it gets none).
    pub fn snapshot_rows(&self) -> Vec<u32> {
        self.rows().1
    }

    /// Is the item (`item`, `gen`) (a handle [`Hcct::record`] returned)
    /// still in the tree (not evicted since)?
    pub fn is_live(&self, item: u32, gen: u32) -> bool {
        self.item_node(item, gen).is_some()
    }

    /// The node of the item (`item`, `gen`), if it is still in the tree.
    pub fn item_node(&self, item: u32, gen: u32) -> Option<u32> {
        self.tree
            .item(item)
            .filter(|x| x.gen == gen)
            .map(|x| x.node)
    }

    /// The tree in the shared profile format. `resolve` maps return
    /// addresses; item keys `k` become `FrameKey::Kind(k)`. `epoch` is the
    /// heap's current peak epoch.
    pub fn snapshot(
        &self,
        name: &str,
        resolve: &mut dyn FnMut(u64) -> FrameKey,
        epoch: u64,
    ) -> Tree {
        self.snapshot_mapped(name, resolve, epoch).0
    }

    /// [`Hcct::snapshot`] with [`Hcct::snapshot_rows`], made once.
    ///
    /// The rows are filled in arena order (each node's row is known from
    /// the preorder): one pass over the arena instead of a cache miss per
    /// node in the preorder's.
    pub fn snapshot_mapped(
        &self,
        name: &str,
        resolve: &mut dyn FnMut(u64) -> FrameKey,
        epoch: u64,
    ) -> (Tree, Vec<u32>) {
        let floors = [self.floor(0), self.floor(1)];
        let (_, index) = self.rows();
        let rows = index.iter().filter(|&&r| r != NO_PARENT).count();
        let mut nodes = vec![OutNode::root(); rows];
        for (i, n) in self.tree.live() {
            let Some(slot) = index
                .get(i as usize)
                .filter(|&&r| r != NO_PARENT)
                .and_then(|&r| nodes.get_mut(r as usize))
            else {
                continue;
            };
            let mut out = OutNode::root();
            if i != ROOT {
                out.parent = index.get(n.parent as usize).copied().unwrap_or(NO_PARENT);
                out.key = if n.is_item() {
                    FrameKey::Kind(n.key as u16)
                } else {
                    resolve(n.key)
                };
            }
            if let Some(x) = self.tree.item(n.item).filter(|_| n.is_item()) {
                let mut vals = [(0u64, 0u64); 2];
                for (w, v) in vals.iter_mut().enumerate() {
                    *v = if x.monitored(w) || x.seen & F_SEEN[w] != 0 {
                        (x.est[w], x.err[w].min(x.est[w]))
                    } else {
                        (floors[w], floors[w])
                    };
                }
                (out.count, out.count_err) = vals[0];
                (out.bytes, out.bytes_err) = vals[1];
                out.flags = if x.monitored(0) { MONITORED_COUNT } else { 0 }
                    | if x.monitored(1) { MONITORED_BYTES } else { 0 };
                out.live_bytes = x.cell.live;
                out.peak_live_bytes = x.cell.at_peak(epoch);
                out.temporary = x.temporary;
            }
            *slot = out;
        }
        let tree = Tree {
            name: name.to_string(),
            total_count: self.stream[0],
            total_bytes: self.stream[1],
            capacity: self.capacity().map_or(0, |c| c as u32),
            nodes,
            spread: Vec::new(),
            floor: None,
        };
        (tree, index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pruned item's handle goes stale: its record, reused by the next
    /// item, gets nothing of what the pointer table still charges to the
    /// old handle (that goes to the evicted aggregate).
    #[test]
    fn a_stale_handle_never_reaches_the_record_reused() {
        let mut h = Hcct::new(Some(1));
        let (mut c1, mut c2, mut c3) = (Cursor::new(), Cursor::new(), Cursor::new());
        let (ra, ga) = h.record(&mut c1, &[0x10, 0x20], 0, 1, 8, 0).unwrap();
        h.charge(ra, ga, 100, 0);
        let (rb, _) = h.record(&mut c2, &[0x30, 0x40], 0, 1, 8, 0).unwrap();
        assert_ne!(rb, ra);
        assert!(h.is_live(ra, ga), "evicted from the queues but pinned");
        let node_a = h.item_node(ra, ga).unwrap();
        assert_eq!(h.tree().get(node_a).unwrap().cell.live, 100);
        h.release_cursor(&mut c1, 0);
        assert!(!h.is_live(ra, ga) && h.item_node(ra, ga).is_none());
        assert_eq!(h.evicted().live, 100);
        assert_eq!(h.node_count(), 4, "root, b's two frames and item");
        let (rc, gc) = h.record(&mut c3, &[0x50], 0, 1, 8, 0).unwrap();
        assert_eq!(rc, ra, "the freed record is reused");
        assert_ne!(gc, ga);
        h.discharge(ra, ga, 100, 0);
        h.note_temporary(ra, ga);
        assert_eq!(h.evicted().live, 0);
        h.charge(rc, gc, 5, 0);
        h.note_temporary(rc, gc);
        let node_c = h.item_node(rc, gc).unwrap();
        let v = h.tree().get(node_c).unwrap();
        assert_eq!((v.key, v.cell.live, v.temporary), (1, 5, 1));
        let t = h.snapshot("t", &mut FrameKey::Unknown, 0);
        let live: Vec<(u64, u64)> = t
            .nodes
            .iter()
            .filter(|n| n.live_bytes > 0 || n.temporary > 0)
            .map(|n| (n.live_bytes, n.temporary))
            .collect();
        assert_eq!(live, [(5, 1)]);
    }
}
