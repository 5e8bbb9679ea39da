//! One node per key path: merging a tree's nodes whose paths from the root
//! became equal.
//!
//! The tracer's tree tells frames apart by return address. In a profile a
//! frame is (module, offset), with every load of one file named as its
//! first (`interpose/src/frame_keys.rs`): a library closed and opened again
//! at another address gives the same frames two return addresses, and two
//! nodes under one parent get one key. Those nodes are one context (or one
//! frame), so they become one node here, their counters added.
//!
//! Adding is exact for the totals a node carries (live bytes, live bytes at
//! the heap peak, temporary allocations). For the Space-Saving counters the
//! sum of two estimates bounds the sum of the true values from above, and
//! the sum of their errors bounds how far: `true ∈ [count - count_err,
//! count]` holds for the merged node as it held for each. The merged node
//! is monitored in a weight if either was.

use std::collections::HashMap;

use wmhcct_format::{FrameKey, Node, NodeSpread, Tree, NO_PARENT};

/// `t` with its nodes of equal key paths merged, and for each of `t`'s rows
/// the row of its node in the new tree; `None` when every path is already
/// one node's (the common case: nothing is copied). Parents come before
/// their children in `t` (as in every tree the collector writes); a node
/// whose parent does not is dropped, with its row mapped to `NO_PARENT`.
pub fn merge_same_paths(t: &Tree) -> Option<(Tree, Vec<u32>)> {
    let rows = rows_of_paths(t)?;
    let n = rows
        .iter()
        .filter(|&&r| r != NO_PARENT)
        .max()
        .map_or(0, |&r| r as usize + 1);
    let mut nodes: Vec<Node> = Vec::with_capacity(n);
    let mut spread: Vec<NodeSpread> = Vec::new();
    let with_spread = !t.spread.is_empty();
    for (i, old) in t.nodes.iter().enumerate() {
        let row = rows[i];
        if row == NO_PARENT {
            continue;
        }
        let parent = if i == 0 {
            NO_PARENT
        } else {
            rows[old.parent as usize]
        };
        let s = t.spread.get(i).copied().unwrap_or_default();
        if row as usize == nodes.len() {
            nodes.push(Node { parent, ..*old });
            if with_spread {
                spread.push(s);
            }
            continue;
        }
        let m = &mut nodes[row as usize];
        m.count = m.count.saturating_add(old.count);
        m.count_err = m.count_err.saturating_add(old.count_err);
        m.bytes = m.bytes.saturating_add(old.bytes);
        m.bytes_err = m.bytes_err.saturating_add(old.bytes_err);
        m.live_bytes = m.live_bytes.saturating_add(old.live_bytes);
        m.peak_live_bytes = m.peak_live_bytes.saturating_add(old.peak_live_bytes);
        m.temporary = m.temporary.saturating_add(old.temporary);
        m.flags |= old.flags;
        if with_spread {
            let x = &mut spread[row as usize];
            *x = NodeSpread {
                count: x.count.merge(s.count),
                bytes: x.bytes.merge(s.bytes),
            };
        }
    }
    let tree = Tree {
        nodes,
        spread,
        name: t.name.clone(),
        ..*t
    };
    Some((tree, rows))
}

/// Per row of `t`, the row of its key path in a tree with one node per
/// path (rows in order of first appearance), or `None` if that is `t`'s own
/// numbering already.
fn rows_of_paths(t: &Tree) -> Option<Vec<u32>> {
    let mut ids: HashMap<(u32, FrameKey), u32> = HashMap::with_capacity(t.nodes.len());
    let mut rows = vec![NO_PARENT; t.nodes.len()];
    let mut next = 0u32;
    let mut same = true;
    for (i, node) in t.nodes.iter().enumerate() {
        let parent = if i == 0 {
            NO_PARENT
        } else {
            match rows.get(node.parent as usize) {
                Some(&p) if (node.parent as usize) < i && p != NO_PARENT => p,
                _ => {
                    same = false;
                    continue;
                }
            }
        };
        let row = *ids.entry((parent, node.key)).or_insert_with(|| {
            next += 1;
            next - 1
        });
        same &= row as usize == i;
        rows[i] = row;
    }
    (!same).then_some(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wmhcct_format::{Spread, MONITORED_BYTES, MONITORED_COUNT};

    fn frame(parent: u32, offset: u64) -> Node {
        Node {
            parent,
            key: FrameKey::Addr { module: 0, offset },
            ..Node::root()
        }
    }

    fn context(parent: u32, count: u64, err: u64, bytes: u64, flags: u8) -> Node {
        Node {
            parent,
            key: FrameKey::Kind(0),
            count,
            count_err: err,
            bytes,
            bytes_err: err * 10,
            live_bytes: bytes / 2,
            peak_live_bytes: bytes / 4,
            temporary: count / 3,
            flags,
        }
    }

    fn tree(nodes: Vec<Node>) -> Tree {
        Tree {
            name: "alloc".into(),
            total_count: 100,
            total_bytes: 1000,
            capacity: 8,
            nodes,
            spread: Vec::new(),
            floor: None,
        }
    }

    #[test]
    fn distinct_paths_are_left_alone() {
        let t = tree(vec![
            Node::root(),
            frame(0, 0x10),
            frame(0, 0x20),
            context(1, 5, 0, 50, MONITORED_COUNT),
            context(2, 7, 1, 70, MONITORED_BYTES),
            // The same key under another parent is another path.
            frame(1, 0x20),
        ]);
        assert!(merge_same_paths(&t).is_none());
    }

    #[test]
    fn equal_paths_become_one_node_with_their_counters_added() {
        // main (0x10) calls the library's work (0x30) loaded twice: its
        // frames and contexts have the same keys under the same parent.
        let t = tree(vec![
            Node::root(),                            // 0
            frame(0, 0x10),                          // 1
            frame(1, 0x30),                          // 2 first load
            frame(2, 0x40),                          // 3
            context(3, 90, 2, 900, MONITORED_COUNT), // 4
            frame(1, 0x30),                          // 5 second load
            frame(5, 0x40),                          // 6
            context(6, 10, 1, 100, MONITORED_BYTES), // 7
            frame(6, 0x50),                          // 8 only under the second
            context(8, 4, 0, 40, 0),                 // 9
            context(1, 3, 0, 30, MONITORED_COUNT),   // 10
        ]);
        let (m, rows) = merge_same_paths(&t).expect("merged");
        assert_eq!(rows, vec![0, 1, 2, 3, 4, 2, 3, 4, 5, 6, 7]);
        assert_eq!(m.nodes.len(), 8);
        let c = &m.nodes[4];
        assert_eq!((c.parent, c.key), (3, FrameKey::Kind(0)));
        assert_eq!(
            (c.count, c.count_err, c.bytes, c.bytes_err),
            (100, 3, 1000, 30)
        );
        assert_eq!(
            (c.live_bytes, c.peak_live_bytes, c.temporary),
            (500, 250, 33)
        );
        assert_eq!(c.flags, MONITORED_COUNT | MONITORED_BYTES);
        assert_eq!(
            m.nodes[5],
            Node {
                parent: 3,
                ..t.nodes[8]
            }
        );
        assert_eq!(
            m.nodes[6],
            Node {
                parent: 5,
                ..t.nodes[9]
            }
        );
        assert_eq!(m.nodes[7], t.nodes[10]);
        assert_eq!((m.total_count, m.total_bytes, m.capacity), (100, 1000, 8));
        // Every path is one node's now.
        assert!(merge_same_paths(&m).is_none());
        // Counts are kept in all.
        let sum = |t: &Tree| t.nodes.iter().map(|n| n.count).sum::<u64>();
        assert_eq!(sum(&m), sum(&t));
    }

    #[test]
    fn spreads_merge_with_their_nodes() {
        let mut t = tree(vec![
            Node::root(),
            frame(0, 0x10),
            context(1, 5, 0, 50, MONITORED_COUNT),
            frame(0, 0x10),
            context(3, 7, 0, 70, MONITORED_COUNT),
        ]);
        let one = |v: u64, rank: u32| NodeSpread {
            count: Spread::single(v, rank),
            bytes: Spread::single(v * 10, rank),
        };
        t.spread = vec![
            NodeSpread::default(),
            NodeSpread::default(),
            one(5, 0),
            NodeSpread::default(),
            one(7, 1),
        ];
        let (m, _) = merge_same_paths(&t).expect("merged");
        assert_eq!(m.spread.len(), m.nodes.len());
        assert_eq!(
            m.spread[2],
            NodeSpread {
                count: one(5, 0).count.merge(one(7, 1).count),
                bytes: one(5, 0).bytes.merge(one(7, 1).bytes)
            }
        );
    }

    #[test]
    fn a_node_before_its_parent_is_dropped() {
        let t = tree(vec![Node::root(), frame(2, 0x10), frame(0, 0x20)]);
        let (m, rows) = merge_same_paths(&t).expect("renumbered");
        assert_eq!(rows, vec![0, NO_PARENT, 1]);
        assert_eq!(m.nodes.len(), 2);
    }
}
