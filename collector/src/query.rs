//! The (φ, ε)-HCCT query: which nodes of a monitored tree are hot.

use wmhcct_format::{Tree, NO_PARENT};

/// Marks the hot contexts of `tree` and their ancestors.
///
/// A context is hot when its Space-Saving count estimate exceeds `φ · N` or its
/// byte estimate exceeds `φ · B` (N, B the stream totals of the tree). Because
/// the estimates never undercount, no context whose true value is at least φN
/// (or φB) is missed; every context returned has a true value above (φ − ε)N.
/// Returns one flag per node: `true` for nodes of the (φ, ε)-HCCT (hot nodes
/// plus the ancestors that connect them to the root). The root is always kept.
pub fn hcct_mask(tree: &Tree, phi: f64) -> Vec<bool> {
    let n = tree.nodes.len();
    let mut keep = vec![false; n];
    if n == 0 {
        return keep;
    }
    keep[0] = true;
    let count_min = phi * tree.total_count as f64;
    let bytes_min = phi * tree.total_bytes as f64;
    for i in (1..n).rev() {
        let node = &tree.nodes[i];
        let hot = (node.count > 0 && node.count as f64 >= count_min)
            || (node.bytes > 0 && node.bytes as f64 >= bytes_min);
        if hot || keep[i] {
            keep[i] = true;
            let p = node.parent;
            if p != NO_PARENT && (p as usize) < n {
                keep[p as usize] = true;
            }
        }
    }
    keep
}

#[cfg(test)]
mod tests {
    use super::*;
    use wmhcct_format::{FrameKey, Node};

    fn node(parent: u32, key: u64, count: u64, bytes: u64) -> Node {
        let mut n = Node::root();
        n.parent = parent;
        n.key = FrameKey::Unknown(key);
        n.count = count;
        n.bytes = bytes;
        n
    }

    #[test]
    fn keeps_hot_and_ancestors_only() {
        let tree = Tree {
            name: "alloc".into(),
            total_count: 1000,
            total_bytes: 1_000_000,
            capacity: 10,
            nodes: vec![
                Node::root(),
                node(0, 1, 0, 0),
                node(1, 2, 990, 10), // hot by count
                node(0, 3, 0, 0),
                node(3, 4, 5, 999_000), // rare but huge: hot by bytes
                node(0, 5, 5, 990),     // cold
            ],
            ..Default::default()
        };
        let m = hcct_mask(&tree, 0.01);
        assert_eq!(m, vec![true, true, true, true, true, false]);
    }
}
