//! Space-Saving over calling contexts against exact counting.

mod common;

use std::collections::HashMap;

use common::*;
use proptest::prelude::*;
use wmhcct_collector::Cursor;
use wmhcct_format::{FrameKey, MONITORED_BYTES, MONITORED_COUNT};

type Truth = HashMap<Vec<FrameKey>, (u64, u64)>;

/// Runs a Zipf stream of `events` allocations over `distinct` stacks through
/// `c` (two threads alternating), returns the exact per-context (count, bytes).
fn run_zipf(
    c: &mut wmhcct_collector::Collector,
    seed: u64,
    distinct: usize,
    events: usize,
    s: f64,
) -> Truth {
    let mut rng = Rng(seed);
    let st = stacks(&mut rng, distinct, 12);
    let z = Zipf::new(distinct, s);
    let mut truth: Truth = HashMap::new();
    let mut curs = [Cursor::new(), Cursor::new()];
    let mut prev: [Option<usize>; 2] = [None, None];
    for e in 0..events {
        let i = z.sample(&mut rng);
        let kind = (i % 3) as u16;
        // Sizes: mostly small, some contexts large; a few zero-byte calls.
        let size = if rng.below(50) == 0 {
            0
        } else {
            8 + (i as u64 % 7) * 100 + rng.below(64)
        };
        let th = e % 2;
        let unchanged = prev[th].map_or(0, |p| common_root_frames(&st[p], &st[i]));
        c.on_alloc(
            &mut curs[th],
            kind,
            &st[i],
            unchanged,
            0x1000_0000 + 16 * e as u64,
            size,
            e as u64,
        );
        prev[th] = Some(i);
        let t = truth.entry(context(&st[i], kind)).or_default();
        t.0 += 1;
        t.1 += size;
    }
    truth
}

fn check_guarantees(
    c: &wmhcct_collector::Collector,
    truth: &Truth,
    eps: f64,
    phi: f64,
) -> Result<(), TestCaseError> {
    let tree = snapshot(c);
    let m = canon(&tree);
    let n_total: u64 = truth.values().map(|t| t.0).sum();
    let b_total: u64 = truth.values().map(|t| t.1).sum();
    prop_assert_eq!(tree.total_count, n_total);
    prop_assert_eq!(tree.total_bytes, b_total);
    for (path, &(tc, tb)) in truth {
        let hot_c = tc as f64 > phi * n_total as f64;
        let hot_b = tb as f64 > phi * b_total as f64;
        match m.get(path) {
            Some(n) => {
                prop_assert!(
                    n.count >= tc && n.count - n.count_err <= tc,
                    "count {:?} vs {}",
                    n,
                    tc
                );
                prop_assert!(
                    n.bytes >= tb && n.bytes - n.bytes_err <= tb,
                    "bytes {:?} vs {}",
                    n,
                    tb
                );
                if n.flags & MONITORED_COUNT != 0 {
                    prop_assert!(
                        (n.count - tc) as f64 <= eps * n_total as f64,
                        "count err {:?} vs {}",
                        n,
                        tc
                    );
                }
                if n.flags & MONITORED_BYTES != 0 {
                    prop_assert!(
                        (n.bytes - tb) as f64 <= eps * b_total as f64,
                        "bytes err {:?} vs {}",
                        n,
                        tb
                    );
                }
                if hot_c {
                    prop_assert!(n.flags & MONITORED_COUNT != 0);
                }
                if hot_b {
                    prop_assert!(n.flags & MONITORED_BYTES != 0);
                }
            }
            None => {
                prop_assert!(!hot_c && !hot_b, "false negative {:?}: {} {}", path, tc, tb);
            }
        }
    }
    // Nothing in the tree that was never in the stream.
    for (path, n) in &m {
        if matches!(path.last(), Some(FrameKey::Kind(_))) {
            prop_assert!(
                truth.contains_key(path),
                "phantom context {:?} {:?}",
                path,
                n
            );
        }
    }
    let mask = wmhcct_collector::query::hcct_mask(&tree, phi);
    prop_assert_eq!(mask.len(), tree.nodes.len());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn zipf_streams_meet_space_saving_bounds(
        seed in any::<u64>(),
        distinct in 50usize..2000,
        s in 0.6f64..1.6,
        eps_inv in 5u32..80,
    ) {
        let eps = 1.0 / eps_inv as f64;
        let mut c = collector(eps, false);
        let truth = run_zipf(&mut c, seed, distinct, 20_000, s);
        check_guarantees(&c, &truth, eps, eps)?;
        check_guarantees(&c, &truth, eps, 2.0 * eps)?;
    }

    #[test]
    fn exact_mode_equals_hashmap_count(seed in any::<u64>(), distinct in 1usize..500) {
        let mut c = collector(0.1, true);
        let truth = run_zipf(&mut c, seed, distinct, 5_000, 1.0);
        let tree = snapshot(&c);
        prop_assert_eq!(tree.capacity, 0);
        let m = canon(&tree);
        let contexts: HashMap<_, _> = m
            .iter()
            .filter(|(p, _)| matches!(p.last(), Some(FrameKey::Kind(_))))
            .map(|(p, n)| {
                assert_eq!((n.count_err, n.bytes_err), (0, 0));
                (p.clone(), (n.count, n.bytes))
            })
            .collect();
        prop_assert_eq!(contexts, truth);
    }
}

#[test]
fn exact_mode_by_flag_and_by_epsilon_zero() {
    for (eps, exact) in [(0.1, true), (0.0, false), (f64::NAN, false)] {
        let mut c = collector(eps, exact);
        let truth = run_zipf(&mut c, 7, 3000, 10_000, 0.8);
        let m = canon(&snapshot(&c));
        for (p, t) in &truth {
            let n = m[p];
            assert_eq!((n.count, n.bytes, n.count_err), (t.0, t.1, 0));
        }
    }
}

#[test]
fn mcct_stays_small_on_100k_distinct_contexts() {
    let eps = 0.01;
    let cap = 100usize;
    let depth = 8usize;
    let mut c = collector(eps, false);
    let mut cur = Cursor::new();
    let mut max_nodes = 0;
    for i in 0..100_000u64 {
        // 100k distinct contexts of depth 8 (shared outermost frames).
        let frames: Vec<u64> = (0..depth as u64)
            .map(|d| 0x40_0000 + d * 0x10_0000 + 16 * (i >> (2 * d)))
            .collect();
        c.on_alloc(&mut cur, 0, &frames, 0, 0x1000 + 16 * i, 32, i);
        max_nodes = max_nodes.max(c.hcct().node_count());
    }
    let bound = (2 * cap + 1) * (depth + 1) + 1;
    assert!(max_nodes <= bound, "{max_nodes} nodes > {bound}");
    // Without pruning the tree would hold > 100k nodes.
    assert!(c.hcct().node_count() < 2000);
}

#[test]
fn pinned_contexts_are_never_pruned() {
    let mut c = collector(0.2, false); // capacity 5
    let parked: Vec<Vec<u64>> = (0..8u64)
        .map(|i| vec![0x9000 + 16 * i, 0x8000, 0x7000])
        .collect();
    let mut cursors: Vec<Cursor> = parked.iter().map(|_| Cursor::new()).collect();
    for (cur, f) in cursors.iter_mut().zip(&parked) {
        c.on_alloc(cur, 1, f, 0, 0, 0, 0); // failed: totals only, cursor untouched
        c.on_alloc(cur, 1, f, 0, 0x100 + f[0], 8, 0);
    }
    let mut flood = Cursor::new();
    for i in 0..20_000u64 {
        let f = [0x20_0000 + 16 * i, 0x10_0000 + 16 * (i % 97), 0x7000];
        c.on_alloc(&mut flood, 2, &f, 0, 0x100_0000 + 16 * i, 1 + i % 500, i);
    }
    let m = canon(&snapshot(&c));
    for (cur, f) in cursors.iter().zip(&parked) {
        assert!(m.contains_key(&context(f, 1)), "parked context pruned");
        assert_eq!(cur.depth(), f.len() + 1);
        for (d, &node) in cur.path().iter().enumerate() {
            let n = c.hcct().tree().get(node).expect("cursor node pruned");
            if d < f.len() {
                assert_eq!(n.key, f[f.len() - 1 - d]);
            } else {
                assert_eq!(n.key, 1);
            }
        }
    }
    // Releasing the cursors lets the flood's next victims prune them.
    for cur in &mut cursors {
        c.release_cursor(cur);
        assert_eq!(cur.depth(), 0);
    }
    for i in 0..20_000u64 {
        let f = [0x30_0000 + 16 * i, 0x7000];
        c.on_alloc(&mut flood, 2, &f, 0, 0x200_0000 + 16 * i, 1 + i % 500, i);
    }
    let m = canon(&snapshot(&c));
    assert!(parked.iter().all(|f| !m.contains_key(&context(f, 1))));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn prefix_aware_descent_equals_root_descent(
        seed in any::<u64>(),
        eps_inv in prop_oneof![Just(0u32), 2u32..12],
        ops in proptest::collection::vec((0usize..3, 0usize..40, 0u16..3, 0u64..200, 0u8..4), 1..400),
    ) {
        let mut rng = Rng(seed);
        let st = stacks(&mut rng, 40, 10);
        let exact = eps_inv == 0;
        let eps = if exact { 0.5 } else { 1.0 / eps_inv as f64 };
        let mut fast = collector(eps, exact);
        let mut slow = collector(eps, exact);
        slow.set_prefix_reuse(false);
        let mut cf = [Cursor::new(), Cursor::new(), Cursor::new()];
        let mut cs = [Cursor::new(), Cursor::new(), Cursor::new()];
        let mut prev: [Option<usize>; 3] = [None; 3];
        let mut seq = [0u64; 3];
        for (e, &(th, i, kind, size, noise)) in ops.iter().enumerate() {
            let exact_hint = prev[th].map_or(0, |p| common_root_frames(&st[p], &st[i]));
            // Correct hints, unknown (0), too large, and plain wrong.
            let hint = match noise {
                0 | 1 => exact_hint,
                2 => 0,
                _ => exact_hint + 3,
            };
            // Correct hints come numbered as exact (the next number after
            // the cursor's previous event, so they are not compared again);
            // a wrong hint skips a number (another capture in between), so
            // the collector must verify it.
            seq[th] += if noise == 3 { 2 } else { 1 };
            cf[th].stamp_next(seq[th]);
            let ptr = 0x1000 + 16 * e as u64;
            fast.on_alloc(&mut cf[th], kind, &st[i], hint, ptr, size, e as u64);
            slow.on_alloc(&mut cs[th], kind, &st[i], 0, ptr, size, e as u64);
            prev[th] = Some(i);
            if e % 7 == 3 {
                fast.on_free(3, ptr, e as u64, false);
                slow.on_free(3, ptr, e as u64, false);
            }
            if e % 97 == 50 {
                fast.release_cursor(&mut cf[th]);
                slow.release_cursor(&mut cs[th]);
                prev[th] = None;
            }
        }
        let (a, b) = (snapshot(&fast), snapshot(&slow));
        prop_assert_eq!(a.nodes.len(), b.nodes.len());
        prop_assert_eq!(canon(&a), canon(&b));
        prop_assert_eq!(fast.heap_stats(), slow.heap_stats());
    }
}

/// A hint numbered right after the cursor's previous event is exact by the
/// caller's word and not compared again; any other is verified.
#[test]
fn numbered_hints_are_trusted_and_others_verified() {
    let (root, a, b) = (0x100u64, 0x200u64, 0x300u64);
    let contexts = |stamps: [u64; 2], hint: usize| {
        let mut c = collector(0.5, true);
        let mut cur = Cursor::new();
        cur.stamp_next(stamps[0]);
        c.on_alloc(&mut cur, 0, &[a, root], 0, 0x10, 1, 0);
        cur.stamp_next(stamps[1]);
        // Claims both frames unchanged, but the leaf-side one differs.
        c.on_alloc(&mut cur, 0, &[b, root], hint, 0x20, 1, 1);
        canon(&snapshot(&c))
            .into_keys()
            .collect::<std::collections::HashSet<_>>()
    };
    let truth = contexts([0, 0], 0);
    // Not numbered, or numbered with a gap: verified, the wrong hint is harmless.
    assert_eq!(contexts([0, 0], 2), truth);
    assert_eq!(contexts([1, 3], 2), truth);
    assert_eq!(contexts([7, 7], 2), truth);
    // Numbered as exact: trusted, so the second event lands on the first
    // path and the tree has no node for `b`.
    let trusted = contexts([1, 2], 2);
    assert!(trusted.len() < truth.len() && trusted.is_subset(&truth));
}
