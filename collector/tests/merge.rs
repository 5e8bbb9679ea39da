//! Merging summaries: exact merges equal the concatenated stream, and
//! bounded merges keep every context above 2ε(N1+N2).

mod common;

use std::collections::HashMap;

use common::*;
use proptest::prelude::*;
use wmhcct_collector::job::row_map;
use wmhcct_collector::merge::{merge_trees_evicted, merge_trees_mapped};
use wmhcct_collector::{merge_trees, Collector, Cursor};
use wmhcct_format::{FrameKey, Tree};

type Truth = HashMap<Vec<FrameKey>, (u64, u64)>;

fn feed(c: &mut Collector, st: &[Vec<u64>], picks: &[(usize, u64)], truth: &mut Truth, base: u64) {
    let mut cur = Cursor::new();
    for (e, &(i, size)) in picks.iter().enumerate() {
        let i = i % st.len();
        c.on_alloc(&mut cur, 0, &st[i], 0, base + 16 * e as u64, size, e as u64);
        if e % 3 == 0 {
            // Every third block is a temporary (node counts merge by sum).
            c.on_free(3, base + 16 * e as u64, e as u64, true);
        }
        let t = truth.entry(context(&st[i], 0)).or_default();
        t.0 += 1;
        t.1 += size;
    }
}

fn zipf_picks(rng: &mut common::Rng, n: usize, events: usize, offset: usize) -> Vec<(usize, u64)> {
    let z = Zipf::new(n, 1.1);
    (0..events)
        .map(|_| {
            let i = (z.sample(rng) + offset) % n;
            (i, 1 + (i as u64 % 13) * 17)
        })
        .collect()
}

fn contexts(t: &Tree) -> HashMap<Vec<FrameKey>, wmhcct_format::Node> {
    canon(t)
        .into_iter()
        .filter(|(p, _)| matches!(p.last(), Some(FrameKey::Kind(_))))
        .collect()
}

#[test]
fn merging_exact_trees_equals_exact_tree_of_both_streams() {
    let mut rng = common::Rng(3);
    let st = stacks(&mut rng, 300, 8);
    let p1 = zipf_picks(&mut rng, 300, 4000, 0);
    let p2 = zipf_picks(&mut rng, 300, 4000, 150);
    let (mut a, mut b, mut ab) = (
        collector(0.0, true),
        collector(0.0, true),
        collector(0.0, true),
    );
    let mut t = Truth::new();
    feed(&mut a, &st, &p1, &mut t, 0x10_0000);
    feed(&mut b, &st, &p2, &mut t, 0x80_0000);
    feed(&mut ab, &st, &p1, &mut Truth::new(), 0x10_0000);
    feed(&mut ab, &st, &p2, &mut Truth::new(), 0x80_0000);
    let m = merge_trees(&snapshot(&a), &snapshot(&b), 0);
    let whole = snapshot(&ab);
    assert_eq!(
        (m.total_count, m.total_bytes),
        (whole.total_count, whole.total_bytes)
    );
    let mut cm = canon(&m);
    let mut cw = canon(&whole);
    // Live/peak per node differ (two processes vs one); compare counters.
    for n in cm.values_mut().chain(cw.values_mut()) {
        n.live_bytes = 0;
        n.peak_live_bytes = 0;
    }
    assert!(cm.values().map(|n| n.temporary).sum::<u64>() > 1000);
    assert_eq!(cm, cw);
    assert_eq!(m.floor, None);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn bounded_merges_keep_heavy_contexts(
        seed in any::<u64>(),
        eps_inv in 3u32..40,
        n in 20usize..400,
        offset in 0usize..400,
    ) {
        let eps = 1.0 / eps_inv as f64;
        let cap = eps_inv as usize;
        let mut rng = common::Rng(seed);
        let st = stacks(&mut rng, n, 6);
        let p1 = zipf_picks(&mut rng, n, 3000, 0);
        let p2 = zipf_picks(&mut rng, n, 2000, offset);
        let (mut a, mut b) = (collector(eps, false), collector(eps, false));
        let mut truth = Truth::new();
        feed(&mut a, &st, &p1, &mut truth, 0x10_0000);
        feed(&mut b, &st, &p2, &mut truth, 0x80_0000);
        let (ta, tb) = (snapshot(&a), snapshot(&b));
        let (m, dropped) = merge_trees_evicted(&ta, &tb, cap);
        let n_total = m.total_count as f64;
        let b_total = m.total_bytes as f64;
        prop_assert_eq!(m.total_count, ta.total_count + tb.total_count);
        let floor = m.floor.unwrap();
        let got = contexts(&m);
        let monitored = |f: u8| got.values().filter(|x| x.flags & f != 0).count();
        prop_assert!(monitored(1) <= cap && monitored(2) <= cap);
        for (p, &(tc, tbytes)) in &truth {
            match got.get(p) {
                Some(x) => {
                    prop_assert!(x.count >= tc && x.count - x.count_err <= tc, "{:?} vs {}", x, tc);
                    prop_assert!(x.bytes >= tbytes && x.bytes - x.bytes_err <= tbytes, "{:?} vs {}", x, tbytes);
                }
                None => {
                    prop_assert!(tc <= floor.0 && tbytes <= floor.1, "dropped {} {} above floor {:?}", tc, tbytes, floor);
                    prop_assert!(tc as f64 <= 2.0 * eps * n_total, "lost heavy context {}", tc);
                    prop_assert!(tbytes as f64 <= 2.0 * eps * b_total, "lost heavy context {}B", tbytes);
                }
            }
        }
        // Live bytes are conserved (kept + dropped).
        let live = |t: &Tree| t.nodes.iter().map(|x| x.live_bytes).sum::<u64>();
        prop_assert_eq!(live(&m) + dropped.0, live(&ta) + live(&tb));
        // Connected and topological.
        for (i, x) in m.nodes.iter().enumerate().skip(1) {
            prop_assert!((x.parent as usize) < i);
        }
        // The row maps the merge returns are those of the key paths (what
        // the job merge uses to move series samples), evicted rows included.
        let mapped = merge_trees_mapped(&ta, &tb, cap);
        prop_assert_eq!(&mapped.tree, &m);
        prop_assert_eq!(&mapped.rows[0], &row_map(&ta, &m));
        prop_assert_eq!(&mapped.rows[1], &row_map(&tb, &m));
        prop_assert!(dropped.0 == 0 || mapped.rows.iter().flatten().any(|&r| r == u32::MAX));
    }
}

#[test]
fn malformed_input_does_not_panic() {
    let mut t = Tree {
        name: "alloc".into(),
        capacity: 2,
        ..Default::default()
    };
    t.nodes.push(wmhcct_format::Node::root());
    let mut bad = wmhcct_format::Node::root();
    bad.parent = 7;
    bad.key = FrameKey::Kind(0);
    bad.count = 3;
    bad.count_err = 9;
    t.nodes.push(bad);
    let m = merge_trees(&t, &Tree::default(), 2);
    assert_eq!(m.nodes.len(), 1);
    // The orphan maps to no row; the root to the root.
    let mapped = merge_trees_mapped(&t, &Tree::default(), 2);
    assert_eq!(mapped.rows[0], [0, u32::MAX]);
    assert!(mapped.rows[1].is_empty());
}
