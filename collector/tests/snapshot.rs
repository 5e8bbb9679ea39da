//! A snapshot's rows are the preorder of the live tree: filled in arena
//! order (`Hcct::snapshot_mapped`), the tree is the one the preorder walk
//! made, and the series made with it (`Collector::snapshot_with_series`)
//! the one made apart.

mod common;

use common::Rng;
use wmhcct_collector::mcct::ROOT;
use wmhcct_collector::{Collector, CollectorConfig, Cursor, SeriesConfig};
use wmhcct_format::{FrameKey, Node, Tree, MONITORED_BYTES, MONITORED_COUNT, NO_PARENT};

/// Evictions free slots that later contexts reuse, so arena order and
/// preorder differ.
fn churned() -> Collector {
    let mut c = Collector::with_series(
        CollectorConfig {
            phi: 0.01,
            epsilon: 0.005,
            exact: false,
            n_kinds: 12,
        },
        SeriesConfig {
            bins: 64,
            event_samples: 100,
        },
    );
    let mut rng = Rng(7);
    let stacks: Vec<Vec<u64>> = (0..3000)
        .map(|_| {
            let depth = 2 + rng.below(12) as usize;
            (0..depth).map(|_| 0x1000 + 16 * rng.below(40)).collect()
        })
        .collect();
    let mut cur = Cursor::new();
    for e in 0..60_000u64 {
        let i = (rng.below(3000) * rng.below(3000) / 3000) as usize;
        let ptr = 0x10_0000 + 16 * e;
        c.on_alloc(
            &mut cur,
            (e % 3) as u16,
            &stacks[i],
            0,
            ptr,
            1 + rng.below(500),
            e * 1000,
        );
        if e % 4 != 0 {
            c.on_free(3, ptr, e * 1000 + 10, e % 8 == 1);
        }
    }
    c
}

/// The tree as the snapshot made it before 2026-11-27: nodes pushed in the
/// preorder walk's order.
fn by_preorder(c: &Collector) -> Vec<(u32, FrameKey, [u64; 4], u8)> {
    let t = c.hcct().tree();
    let order = t.preorder();
    let mut index = vec![NO_PARENT; t.memory_slots()];
    let mut out = Vec::new();
    for &i in &order {
        let Some(n) = t.get(i) else { continue };
        if i != ROOT && index[n.parent as usize] == NO_PARENT {
            continue;
        }
        index[i as usize] = out.len() as u32;
        let key = if i == ROOT {
            FrameKey::Root
        } else if n.is_item() {
            FrameKey::Kind(n.key as u16)
        } else {
            FrameKey::Unknown(n.key)
        };
        let parent = if i == ROOT {
            NO_PARENT
        } else {
            index[n.parent as usize]
        };
        let flags = if n.is_item() {
            (if n.monitored(0) { MONITORED_COUNT } else { 0 })
                | if n.monitored(1) { MONITORED_BYTES } else { 0 }
        } else {
            0
        };
        out.push((parent, key, [n.cell.live, n.temporary, 0, 0], flags));
    }
    out
}

fn shape(t: &Tree) -> Vec<(u32, FrameKey, [u64; 4], u8)> {
    t.nodes
        .iter()
        .map(|n: &Node| (n.parent, n.key, [n.live_bytes, n.temporary, 0, 0], n.flags))
        .collect()
}

#[test]
fn rows_filled_in_arena_order_are_the_preorder() {
    let c = churned();
    let mut resolve = FrameKey::Unknown;
    let tree = c.snapshot_tree("alloc", &mut resolve);
    assert!(tree.nodes.len() > 500, "{}", tree.nodes.len());
    assert_eq!(shape(&tree), by_preorder(&c));
}

#[test]
fn the_series_made_with_the_tree_is_the_one_made_apart() {
    let c = churned();
    let mut resolve = FrameKey::Unknown;
    let (tree, series) = c.snapshot_with_series("alloc", &mut resolve, 70_000_000, 5);
    assert_eq!(tree, c.snapshot_tree("alloc", &mut resolve));
    let apart = c.series_snapshot(70_000_000, 5);
    assert!(apart.is_some());
    assert_eq!(series, apart);
}
