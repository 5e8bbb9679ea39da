//! Exact heap accounting under eviction-heavy random streams.

mod common;

use std::collections::HashMap;

use common::*;
use proptest::prelude::*;
use wmhcct_collector::{Collector, Cursor};
use wmhcct_format::FrameKey;

/// Σ node live + evicted live == heap live, Σ node peak + evicted peak == peak.
fn check(
    c: &Collector,
    live: u64,
    peak: u64,
    ctx_live: &HashMap<Vec<FrameKey>, u64>,
) -> Result<(), TestCaseError> {
    let h = c.heap_stats();
    let t = snapshot(c);
    prop_assert_eq!(h.live_bytes, live);
    prop_assert_eq!(h.peak_bytes, peak);
    let node_live: u64 = t.nodes.iter().map(|n| n.live_bytes).sum();
    let node_peak: u64 = t.nodes.iter().map(|n| n.peak_live_bytes).sum();
    prop_assert_eq!(node_live + h.evicted_live_bytes, h.live_bytes);
    prop_assert_eq!(node_peak + h.evicted_peak_bytes, h.peak_bytes);
    for (p, n) in canon(&t) {
        let truth = ctx_live.get(&p).copied().unwrap_or(0);
        prop_assert!(
            n.live_bytes <= truth,
            "{:?}: {} > {}",
            p,
            n.live_bytes,
            truth
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn heap_invariants_hold_under_eviction(
        seed in any::<u64>(),
        eps_inv in prop_oneof![Just(0u32), 1u32..6],
        ops in proptest::collection::vec((0u8..10, 0usize..200, 0u64..5000), 1..600),
    ) {
        let mut rng = Rng(seed);
        let st = stacks(&mut rng, 200, 6);
        let exact = eps_inv == 0;
        let mut c = collector(if exact { 0.5 } else { 1.0 / eps_inv as f64 }, exact);
        let mut curs = [Cursor::new(), Cursor::new()];
        let mut blocks: Vec<(u64, u64, Vec<FrameKey>)> = Vec::new();
        let mut ctx_live: HashMap<Vec<FrameKey>, u64> = HashMap::new();
        let (mut live, mut peak) = (0u64, 0u64);
        let mut next_ptr = 0x1000u64;
        for (e, &(op, i, size)) in ops.iter().enumerate() {
            let t = e as u64;
            match op {
                0..=4 => {
                    let th = e % 2;
                    let kind = (i % 2) as u16;
                    next_ptr += 16;
                    c.on_alloc(&mut curs[th], kind, &st[i], 0, next_ptr, size, t);
                    let ctx = context(&st[i], kind);
                    *ctx_live.entry(ctx.clone()).or_default() += size;
                    blocks.push((next_ptr, size, ctx));
                    live += size;
                }
                5 | 6 if !blocks.is_empty() => {
                    let (p, s, ctx) = blocks.swap_remove(i % blocks.len());
                    prop_assert_eq!(c.on_free(3, p, t, false), Some(s));
                    *ctx_live.get_mut(&ctx).unwrap() -= s;
                    live -= s;
                }
                7 if !blocks.is_empty() => {
                    // realloc: release + alloc at a new address.
                    let (p, s, ctx) = blocks.swap_remove(i % blocks.len());
                    prop_assert_eq!(c.release(p, t), Some(s));
                    *ctx_live.get_mut(&ctx).unwrap() -= s;
                    live -= s;
                    next_ptr += 16;
                    c.on_alloc(&mut curs[0], 2, &st[i], 0, next_ptr, size, t);
                    let ctx = context(&st[i], 2);
                    *ctx_live.entry(ctx.clone()).or_default() += size;
                    blocks.push((next_ptr, size, ctx));
                    live += size;
                }
                8 => {
                    next_ptr += 16;
                    c.on_alloc_untraced(0, next_ptr, size, t);
                    let ctx = vec![FrameKey::Kind(0x800)];
                    *ctx_live.entry(ctx.clone()).or_default() += size;
                    blocks.push((next_ptr, size, ctx));
                    live += size;
                }
                _ => {
                    prop_assert_eq!(c.on_free(3, 0xdead_0000 + size * 16, t, false), None);
                    if i % 5 == 0 {
                        c.release_cursor(&mut curs[i % 2]);
                    }
                }
            }
            peak = peak.max(live);
            if e % 37 == 0 {
                check(&c, live, peak, &ctx_live)?;
            }
        }
        check(&c, live, peak, &ctx_live)?;
        prop_assert_eq!(c.heap_stats().live_blocks, blocks.len() as u64);
        prop_assert_eq!(c.live_blocks(), blocks.len());
    }
}

#[test]
fn totals_and_unknown_frees() {
    let mut c = collector(0.1, false);
    let mut cur = Cursor::new();
    c.on_alloc(&mut cur, 0, &[0x5000, 0x4000], 0, 0x100, 10, 1);
    c.on_alloc(&mut cur, 0, &[0x5000, 0x4000], 9, 0, 7, 2); // failed, hint too large
    c.on_alloc(&mut cur, 1, &[], 0, 0x200, 20, 3);
    c.count_call(3, 0); // free(NULL)
    assert_eq!(c.on_free(3, 0x100, 4, false), Some(10));
    assert_eq!(c.on_free(3, 0x999, 5, false), None);
    assert_eq!(c.on_free(3, 0, 6, false), None);
    assert_eq!(c.release(0x777, 7), None);
    c.count_call(500, 1); // out-of-table kind: counted, no panic
    let t = c.totals();
    assert_eq!(t[0], (2, 17));
    assert_eq!(t[1], (1, 20));
    assert_eq!(t[3], (4, 10));
    assert_eq!(t[500], (1, 1));
    let h = c.heap_stats();
    assert_eq!(
        (h.live_bytes, h.peak_bytes, h.live_blocks, h.unknown_frees),
        (20, 30, 1, 2)
    );
    assert_eq!(h.peak_time_ns, 3);
    assert_eq!(c.ptr_table_peak(), 2);
    assert!(c.memory_bytes() > 0);
    let tree = snapshot(&c);
    assert_eq!((tree.total_count, tree.total_bytes), (2, 30));
    assert!(canon(&tree).contains_key(&vec![FrameKey::Kind(1)]));
}

#[test]
fn duplicate_address_replaces_the_stale_block() {
    let mut c = collector(0.1, false);
    let mut cur = Cursor::new();
    c.on_alloc(&mut cur, 0, &[0x5000], 0, 0x100, 10, 1);
    c.on_alloc(&mut cur, 0, &[0x6000], 0, 0x100, 3, 2);
    let h = c.heap_stats();
    assert_eq!((h.live_bytes, h.live_blocks), (3, 1));
    assert_eq!(c.on_free(3, 0x100, 3, false), Some(3));
    assert_eq!(c.heap_stats().live_bytes, 0);
}

#[test]
fn cursor_of_another_collector_is_ignored() {
    let mut a = collector(0.1, false);
    let mut b = collector(0.1, false);
    let mut cur = Cursor::new();
    a.on_alloc(&mut cur, 0, &[0x5000, 0x4000], 0, 0x100, 10, 1);
    b.on_alloc(&mut cur, 0, &[0x5000, 0x4000], 2, 0x100, 10, 1);
    b.on_event(&mut cur, 1, &[0x7000], 5, 64, 2);
    b.on_event_untraced(1, 64, 3);
    b.release_cursor(&mut cur);
    a.release_cursor(&mut cur); // already cleared: no effect
    let t = canon(&snapshot(&b));
    assert!(t.contains_key(&context(&[0x5000, 0x4000], 0)));
    assert!(t.contains_key(&context(&[0x7000], 1)));
    assert!(t.contains_key(&vec![FrameKey::Kind(0x801)]));
    assert_eq!(b.untraced_events(), 1);
    assert_eq!(b.totals()[1], (2, 128));
}

#[test]
fn temporary_frees_are_counted_in_the_heap_and_in_their_context() {
    let mut c = collector(0.1, false);
    let mut cur = Cursor::new();
    let churn = [0x5000u64, 0x4000];
    let keep = [0x6000u64, 0x4000];
    for i in 0..5u64 {
        c.on_alloc(&mut cur, 0, &churn, 0, 0x100 + i * 0x40, 24, i);
        assert_eq!(c.on_free(3, 0x100 + i * 0x40, i, true), Some(24));
    }
    c.on_alloc(&mut cur, 0, &keep, 0, 0x900, 100, 10);
    assert_eq!(c.on_free(3, 0x900, 11, false), Some(100));
    // A temporary free of a pointer never seen: a call, no temporary.
    assert_eq!(c.on_free(3, 0x999, 12, true), None);
    assert_eq!(c.on_free(3, 0, 13, true), None);
    let h = c.heap_stats();
    assert_eq!((h.temporary_count, h.temporary_bytes), (5, 120));
    // Five blocks of 24 bytes (class 5: 16 to 31), one of 100 (class 7).
    assert_eq!(h.size_classes, [0, 0, 0, 0, 0, 5, 0, 1]);
    assert_eq!(h.unknown_frees, 1);
    assert_eq!(c.totals()[3], (8, 220));
    let t = canon(&snapshot(&c));
    assert_eq!(t[&context(&churn, 0)].temporary, 5);
    assert_eq!(t[&context(&keep, 0)].temporary, 0);
}

#[test]
fn a_temporary_free_of_an_evicted_context_counts_in_the_heap_only() {
    // ε = 1: one monitored context per weight, so the second evicts the first.
    let mut c = collector(1.0, false);
    let mut cur = Cursor::new();
    c.on_alloc(&mut cur, 0, &[0x5000], 0, 0x100, 8, 1);
    for i in 0..4u64 {
        c.on_alloc(&mut cur, 0, &[0x6000], 0, 0x200 + i * 0x40, 16, 2 + i);
    }
    assert_eq!(c.on_free(3, 0x100, 9, true), Some(8));
    let h = c.heap_stats();
    assert_eq!((h.temporary_count, h.temporary_bytes), (1, 8));
    let t = snapshot(&c);
    assert_eq!(t.nodes.iter().map(|n| n.temporary).sum::<u64>(), 0);
}
