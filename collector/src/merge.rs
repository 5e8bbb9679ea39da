//! Merging two HCCT summaries (two processes, or two ranks of a job).
//!
//! The rule is the mergeable-summaries merge of Agarwal et al. applied to the
//! *lower bounds* of Space-Saving, per weight (count, bytes):
//!
//! 1. Contexts are matched by their full key path root → item.
//! 2. Each input bounds every context: a held context by
//!    `[count - count_err, count]`, an absent one by `[0, floor]` where the
//!    floor is the input's `Tree::floor`, or, when unset, its smallest
//!    monitored counter if all `capacity` counters are in use (else 0).
//!    So for input `i`, `lo ≤ true ≤ lo + Δ_i` with `Δ_i` its floor.
//! 3. The merged context gets `lo = lo_a + lo_b` and `hi = hi_a + hi_b`
//!    (absent sides contribute `[0, floor]`): `true ∈ [lo, hi]` still.
//! 4. If more than `capacity` contexts remain, `k` = the (capacity+1)-th
//!    largest `lo`; a context stays monitored in that weight iff `lo > k`
//!    (Agarwal's "subtract k and drop those ≤ 0"; at most `capacity`
//!    survive). Instead of reporting the reduced counter `lo - k`, the merged
//!    node reports the un-reduced bounds: `count = hi`, `count_err = hi - lo`,
//!    so the estimate stays an overestimate and `true ∈ [count - err, count]`.
//!    The subtracted mass goes into the merged floor: `floor = Δ_a + Δ_b + k`
//!    bounds every context that is not held (a dropped one has
//!    `true ≤ lo + Δ ≤ k + Δ`). With input capacities ≥ 1/ε and
//!    `capacity ≥ 1/ε`, `Δ_a + Δ_b ≤ ε(N_a + N_b)` and `k ≤ N/(capacity+1)`,
//!    so every context above `2ε(N_a + N_b)` survives.
//! 5. A context is kept if monitored in either weight; frames are kept when
//!    they lead to a kept context; the tree is rebuilt in topological order.
//!
//! `capacity == 0` keeps everything (exact merge). Live and at-peak bytes are
//! added; those of dropped contexts are returned apart (the caller adds them
//! to `HeapStats::evicted_*`). Per-rank spreads (`Tree::spread`, parallel to
//! the nodes, possibly empty) are merged node by node: they are exact over the
//! ranks that kept a context. A rank's own tree may leave them implicit
//! ([`Input::rank`]).
//!
//! Frames carry no counters, so only contexts get an accumulator: in a
//! CP2K job's merge, three ids in four are frames, and accumulators for
//! them (128 bytes each) were the largest part of rank 0's peak in the
//! reduction.

use crate::path_index::{child_path, PathIndex, ROOT_PATH};
use wmhcct_format::{
    FrameKey, Node, NodeSpread, Tree, MONITORED_BYTES, MONITORED_COUNT, NO_CONTEXT, NO_PARENT,
};

fn is_context(n: &Node) -> bool {
    matches!(n.key, FrameKey::Kind(_))
}

/// Upper bounds (count, bytes) on the true value of a context `t` does not hold.
pub fn floors(t: &Tree) -> (u64, u64) {
    if let Some(f) = t.floor {
        return f;
    }
    if t.capacity == 0 {
        return (0, 0);
    }
    let floor = |flag: u8, value: fn(&Node) -> u64| {
        let mut n = 0usize;
        let mut min = u64::MAX;
        for x in t
            .nodes
            .iter()
            .filter(|x| is_context(x) && x.flags & flag != 0)
        {
            n += 1;
            min = min.min(value(x));
        }
        if n >= t.capacity as usize {
            min
        } else {
            0
        }
    };
    (
        floor(MONITORED_COUNT, |n| n.count),
        floor(MONITORED_BYTES, |n| n.bytes),
    )
}

/// What the merge adds up for one context.
#[derive(Clone, Copy, Default)]
struct Acc {
    lo: [u64; 2],
    hi: [u64; 2],
    live: u64,
    peak: u64,
    temporary: u64,
    flags: u8,
    seen: [bool; 2],
    spread: NodeSpread,
}

/// A frame's slot in the accumulators: none.
const FRAME: u32 = u32::MAX;

/// One input of [`merge_inputs`].
pub struct Input {
    pub tree: Tree,
    /// For a single rank's tree without spreads (`tree.spread` empty), that
    /// rank: each context's spread is then its own value on that rank alone
    /// ([`crate::job::single_spread`]), as if written out. `None`: the
    /// spreads are those `tree` holds, if any.
    pub rank: Option<u32>,
}

/// Merges two trees; see the module documentation for the rule.
pub fn merge_trees(a: &Tree, b: &Tree, capacity: usize) -> Tree {
    merge_trees_evicted(a, b, capacity).0
}

/// [`merge_trees_mapped`] without the row maps.
pub fn merge_trees_evicted(a: &Tree, b: &Tree, capacity: usize) -> (Tree, (u64, u64)) {
    let m = merge_trees_mapped(a, b, capacity);
    (m.tree, m.evicted)
}

/// The result of [`merge_trees_mapped`].
pub struct Merged {
    pub tree: Tree,
    /// Live bytes (now, at the peak) of the contexts the merge dropped.
    pub evicted: (u64, u64),
    /// For each input (`a`, `b`), the row in `tree` of each of its rows
    /// (the node of the same key path), or `NO_CONTEXT` where the merge
    /// dropped it: what `job::row_map` computes from the inputs, without
    /// keeping them.
    pub rows: [Vec<u32>; 2],
}

/// As [`merge_trees`], also returning the (live, at-peak) bytes of the
/// contexts dropped by the capacity limit and the row maps.
pub fn merge_trees_mapped(a: &Tree, b: &Tree, capacity: usize) -> Merged {
    merge_trees_owned(a.clone(), b.clone(), capacity)
}

/// [`merge_trees_mapped`] of trees the caller gives up: they are dropped
/// once their nodes are accumulated, before the merged tree is built, so
/// inputs and output are never in memory together (the job merge's peak).
pub fn merge_trees_owned(a: Tree, b: Tree, capacity: usize) -> Merged {
    merge_inputs(
        [
            Input {
                tree: a,
                rank: None,
            },
            Input {
                tree: b,
                rank: None,
            },
        ],
        capacity,
    )
}

/// [`merge_trees_owned`] of two inputs that may leave their spreads implicit.
pub fn merge_inputs(inputs: [Input; 2], capacity: usize) -> Merged {
    let fl = [floors(&inputs[0].tree), floors(&inputs[1].tree)];
    // Sized for two disjoint inputs: no growth (each doubling copied the
    // entries so far and faulted in new pages).
    let most: usize = inputs.iter().map(|x| x.tree.nodes.len()).sum();
    let most_contexts: usize = inputs
        .iter()
        .map(|x| x.tree.nodes.iter().filter(|n| is_context(n)).count())
        .sum();
    let mut keys: Vec<(u32, FrameKey)> = Vec::with_capacity(most.max(1));
    keys.push((NO_PARENT, FrameKey::Root));
    // Per id, its slot in `acc`, or FRAME.
    let mut slot: Vec<u32> = Vec::with_capacity(most.max(1));
    slot.push(FRAME);
    let mut acc: Vec<Acc> = Vec::with_capacity(most_contexts);
    let mut lookup = PathIndex::with_capacity(most);
    // Per input, the key id of each row (u32::MAX: malformed, skipped).
    let mut maps: [Vec<u32>; 2] = [Vec::new(), Vec::new()];
    // What the output needs of the inputs.
    let with_spread = inputs
        .iter()
        .any(|x| !x.tree.spread.is_empty() || x.rank.is_some());
    let name = inputs[0].tree.name.clone();
    let totals = (
        inputs[0]
            .tree
            .total_count
            .saturating_add(inputs[1].tree.total_count),
        inputs[0]
            .tree
            .total_bytes
            .saturating_add(inputs[1].tree.total_bytes),
    );
    // Each input is let go once its nodes are accumulated: `a` before `b`'s
    // are, so the two are never in memory with the accumulators (rank 0's
    // peak in a CP2K job's reduction, ~40 MiB above the rest of its run).
    for (side, Input { tree: t, rank }) in inputs.into_iter().enumerate() {
        let map = &mut maps[side];
        *map = vec![u32::MAX; t.nodes.len()];
        let mut paths = vec![ROOT_PATH; t.nodes.len()];
        if let Some(m) = map.first_mut() {
            *m = 0;
        }
        for (i, n) in t.nodes.iter().enumerate().skip(1) {
            let Some(&parent) = map.get(n.parent as usize).filter(|&&p| p != u32::MAX) else {
                continue; // malformed: parent not before child
            };
            let path = child_path(paths[n.parent as usize], n.key);
            paths[i] = path;
            let id = lookup.id(path, parent, n.key, &mut keys);
            if slot.len() < keys.len() {
                // A new id.
                slot.push(if is_context(n) {
                    acc.push(Acc::default());
                    (acc.len() - 1) as u32
                } else {
                    FRAME
                });
            }
            map[i] = id;
            let Some(x) = acc.get_mut(slot[id as usize] as usize) else {
                continue; // a frame
            };
            let vals = [(n.count, n.count_err), (n.bytes, n.bytes_err)];
            for (w, (est, err)) in vals.into_iter().enumerate() {
                x.lo[w] = x.lo[w].saturating_add(est - err.min(est));
                x.hi[w] = x.hi[w].saturating_add(est);
            }
            x.live = x.live.saturating_add(n.live_bytes);
            x.peak = x.peak.saturating_add(n.peak_live_bytes);
            x.temporary = x.temporary.saturating_add(n.temporary);
            x.flags |= n.flags;
            x.seen[side] = true;
            let s = match rank {
                Some(r) if t.spread.is_empty() => Some(crate::job::single_spread(n, r)),
                _ => t.spread.get(i).copied(),
            };
            if let Some(s) = s {
                x.spread = NodeSpread {
                    count: x.spread.count.merge(s.count),
                    bytes: x.spread.bytes.merge(s.bytes),
                };
            }
        }
    }
    drop(lookup);
    for x in &mut acc {
        for (side, f) in fl.iter().enumerate() {
            if !x.seen[side] {
                x.hi[0] = x.hi[0].saturating_add(f.0);
                x.hi[1] = x.hi[1].saturating_add(f.1);
            }
        }
    }
    let delta = [
        fl[0].0.saturating_add(fl[1].0),
        fl[0].1.saturating_add(fl[1].1),
    ];
    // Per accumulator (context), whether it stays.
    let mut kept = vec![false; acc.len()];
    let mut floor = delta;
    if capacity == 0 || acc.len() <= capacity {
        kept.fill(true);
    } else {
        let flags = [MONITORED_COUNT, MONITORED_BYTES];
        for w in 0..2 {
            let mut lows: Vec<u64> = acc.iter().map(|x| x.lo[w]).collect();
            lows.sort_unstable_by(|x, y| y.cmp(x));
            let k = lows.get(capacity).copied().unwrap_or(0);
            floor[w] = floor[w].saturating_add(k);
            for (x, kept) in acc.iter_mut().zip(kept.iter_mut()) {
                if x.lo[w] > k {
                    x.flags |= flags[w];
                    *kept = true;
                } else {
                    x.flags &= !flags[w];
                }
            }
        }
    }
    let mut dropped = (0u64, 0u64);
    for (x, _) in acc.iter().zip(&kept).filter(|(_, k)| !**k) {
        dropped.0 = dropped.0.saturating_add(x.live);
        dropped.1 = dropped.1.saturating_add(x.peak);
    }
    // Per id: kept contexts, and the frames leading to them (ids are
    // parents-first).
    let mut keep: Vec<bool> = slot
        .iter()
        .map(|&s| kept.get(s as usize).copied().unwrap_or(false))
        .collect();
    drop(kept);
    keep[0] = true;
    for id in (1..keys.len()).rev() {
        if keep[id] {
            if let Some(p) = keep.get_mut(keys[id].0 as usize) {
                *p = true;
            }
        }
    }
    let mut new_id = vec![NO_PARENT; keys.len()];
    let mut nodes = Vec::new();
    let mut spread = Vec::new();
    for id in 0..keys.len() {
        if !keep[id] {
            continue;
        }
        let (parent, key) = keys[id];
        let mut n = Node::root();
        n.parent = new_id.get(parent as usize).copied().unwrap_or(NO_PARENT);
        n.key = key;
        let x = acc.get(slot[id] as usize);
        if let Some(x) = x {
            n.count = x.hi[0];
            n.count_err = x.hi[0] - x.lo[0].min(x.hi[0]);
            n.bytes = x.hi[1];
            n.bytes_err = x.hi[1] - x.lo[1].min(x.hi[1]);
            n.flags = x.flags & (MONITORED_COUNT | MONITORED_BYTES);
            n.live_bytes = x.live;
            n.peak_live_bytes = x.peak;
            n.temporary = x.temporary;
        }
        new_id[id] = nodes.len() as u32;
        nodes.push(n);
        if with_spread {
            spread.push(x.map_or_else(NodeSpread::default, |x| x.spread));
        }
    }
    let tree = Tree {
        name,
        total_count: totals.0,
        total_bytes: totals.1,
        capacity: u32::try_from(capacity).unwrap_or(u32::MAX),
        nodes,
        spread,
        floor: if capacity == 0 && floor == [0, 0] {
            None
        } else {
            Some((floor[0], floor[1]))
        },
    };
    let rows = maps.map(|map| {
        map.into_iter()
            .map(|id| match new_id.get(id as usize) {
                Some(&r) if r != NO_PARENT => r,
                _ => NO_CONTEXT,
            })
            .collect()
    });
    Merged {
        tree,
        evicted: dropped,
        rows,
    }
}
