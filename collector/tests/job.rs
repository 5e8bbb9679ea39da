//! Job-level merging (what the MPI reduction and `wmhcct merge` run):
//! per-rank spreads, exact totals, binomial depth, and the hot contexts of
//! bounded per-rank summaries surviving the merge.

mod common;

use std::collections::HashMap;

use common::*;
use proptest::prelude::*;
use wmhcct_collector::job;
use wmhcct_collector::query::hcct_mask;
use wmhcct_collector::{Collector, Cursor};
use wmhcct_format::{Config, FrameKey, KindTotal, Meta, Profile, Resident, Tree};

type Truth = HashMap<Vec<FrameKey>, u64>;

/// One rank's profile as the tracer would build it.
fn rank_profile(c: &Collector, rank: u32, nranks: u32, epsilon: f64, exact: bool) -> Profile {
    Profile {
        meta: Meta {
            pid: 1000 + rank,
            rank: Some(rank),
            nranks: Some(nranks),
            threads: 1,
            reason: "finalize".into(),
            ..Meta::default()
        },
        config: Config {
            phi: 5.0 * epsilon,
            epsilon,
            exact,
            ..Config::default()
        },
        totals: c
            .totals()
            .into_iter()
            .enumerate()
            .map(|(k, (count, bytes))| KindTotal {
                kind: format!("kind{k}"),
                count,
                bytes,
            })
            .collect(),
        heap: c.heap_stats(),
        resident: Resident {
            peak_bytes: (10 + u64::from(rank)) << 20,
            end_bytes: 8 << 20,
            tracer_peak_bytes: 1 << 20,
        },
        trees: vec![snapshot(c)],
        ..Profile::default()
    }
}

fn feed(c: &mut Collector, stack: &[u64], n: u64, size: u64, truth: &mut Truth) {
    let mut cur = Cursor::new();
    for e in 0..n {
        c.on_alloc(&mut cur, 0, stack, 0, 0x1000 + 16 * e, size, e);
        c.release(0x1000 + 16 * e, e);
    }
    *truth.entry(context(stack, 0)).or_default() += n;
}

fn node_of<'a>(t: &'a Tree, path: &[FrameKey]) -> Option<(usize, &'a wmhcct_format::Node)> {
    let mut cur = 0u32;
    for k in path {
        let (i, _) = t
            .nodes
            .iter()
            .enumerate()
            .skip(1)
            .find(|(_, n)| n.parent == cur && n.key == *k)?;
        cur = i as u32;
    }
    Some((cur as usize, &t.nodes[cur as usize]))
}

#[test]
fn four_ranks_pattern_has_exact_totals_and_spreads() {
    const K: u64 = 100;
    let a = [0x400100u64, 0x400200, 0x400300];
    let b = [0x400110u64, 0x400200, 0x400300];
    let mut truth = Truth::new();
    let parts: Vec<Profile> = (0..4u32)
        .map(|r| {
            let mut c = collector(0.0, true);
            feed(&mut c, &a, (r as u64 + 1) * K, 64, &mut truth);
            feed(&mut c, &b, K, 256, &mut truth);
            job::as_job_part(rank_profile(&c, r, 4, 0.0, true), r)
        })
        .collect();
    let (mut p, rounds) = job::merge_all(parts, 0).unwrap();
    job::finish(&mut p, 4);
    assert_eq!(rounds, 2);
    assert_eq!(p.meta.nranks, Some(4));
    assert_eq!(
        p.ranks.iter().map(|r| r.rank).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
    assert_eq!(p.totals[0].count, 10 * K + 4 * K);
    assert_eq!(p.totals[0].bytes, 10 * K * 64 + 4 * K * 256);
    let t = &p.trees[0];
    let (ia, na) = node_of(t, &context(&a, 0)).expect("context A");
    assert_eq!(na.count, 10 * K);
    assert_eq!(na.bytes, 10 * K * 64);
    let s = t.spread[ia].count;
    assert_eq!(
        (s.min_over(4), s.max, s.max_rank, s.present),
        (K, 4 * K, 3, 4)
    );
    assert_eq!(s.mean_over(4), 2.5 * K as f64);
    let (ib, nb) = node_of(t, &context(&b, 0)).expect("context B");
    assert_eq!(nb.count, 4 * K);
    let sb = t.spread[ib].bytes;
    assert_eq!((sb.min_over(4), sb.max), (K * 256, K * 256));
    // The per-rank scalars stay exact.
    for r in &p.ranks {
        assert_eq!(r.totals[0].count, (r.rank as u64 + 1) * K + K);
        assert_eq!(r.resident.peak_bytes, (10 + u64::from(r.rank)) << 20);
    }
    // The job's resident figures are the sums of the ranks'.
    assert_eq!(
        (
            p.resident.peak_bytes,
            p.resident.end_bytes,
            p.resident.tracer_peak_bytes
        ),
        (46 << 20, 32 << 20, 4 << 20)
    );
}

#[test]
fn a_context_missing_on_some_ranks_has_min_zero() {
    let mut truth = Truth::new();
    let parts: Vec<Profile> = (0..3u32)
        .map(|r| {
            let mut c = collector(0.0, true);
            if r == 1 {
                feed(&mut c, &[0x10, 0x20], 7, 8, &mut truth);
            }
            feed(&mut c, &[0x11, 0x20], 1, 8, &mut truth);
            job::as_job_part(rank_profile(&c, r, 3, 0.0, true), r)
        })
        .collect();
    let (mut p, rounds) = job::merge_all(parts, 0).unwrap();
    job::finish(&mut p, 3);
    assert_eq!(rounds, 2);
    let (i, n) = node_of(&p.trees[0], &context(&[0x10, 0x20], 0)).unwrap();
    assert_eq!(n.count, 7);
    let s = p.trees[0].spread[i].count;
    assert_eq!((s.min_over(3), s.max, s.max_rank, s.present), (0, 7, 1, 1));
}

#[test]
fn merge_depth_is_logarithmic() {
    for (n, depth) in [(1usize, 0u32), (2, 1), (5, 3), (64, 6), (1000, 10)] {
        let parts: Vec<Profile> = (0..n as u32)
            .map(|r| {
                let c = collector(0.0, true);
                job::as_job_part(rank_profile(&c, r, n as u32, 0.0, true), r)
            })
            .collect();
        let (p, rounds) = job::merge_all(parts, 0).unwrap();
        assert_eq!(rounds, depth, "{n} parts");
        assert_eq!(p.ranks.len(), n);
    }
    assert!(job::merge_all(Vec::new(), 0).is_none());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Bounded per-rank summaries that must evict, merged up the tree: every
    /// context above φN of the job (φ = 5ε, the default ratio) is in the
    /// merged (φ, ε)-HCCT, with an estimate that never undercounts and errs
    /// by at most its recorded error.
    #[test]
    fn hot_contexts_survive_bounded_job_merges(
        seed in any::<u64>(),
        eps_inv in 10u32..60,
        n in 50usize..400,
        nranks in 2u32..9,
    ) {
        let eps = 1.0 / eps_inv as f64;
        let phi = 5.0 * eps;
        let cap = job::capacity(&Config { epsilon: eps, ..Config::default() });
        prop_assert!(cap >= eps_inv as usize && cap <= eps_inv as usize + 1);
        let mut rng = common::Rng(seed);
        let st = stacks(&mut rng, n, 6);
        let z = Zipf::new(n, 1.1);
        let mut truth = Truth::new();
        let mut exact_parts = Vec::new();
        let mut parts = Vec::new();
        for r in 0..nranks {
            let (mut c, mut x) = (collector(eps, false), collector(0.0, true));
            let (mut cc, mut cx) = (Cursor::new(), Cursor::new());
            for e in 0..1500u64 {
                // Each rank has its own hot spot, shifted by rank.
                let i = (z.sample(&mut rng) + r as usize * 7) % n;
                c.on_alloc(&mut cc, 0, &st[i], 0, 0x1000 + 16 * e, 8, e);
                x.on_alloc(&mut cx, 0, &st[i], 0, 0x1000 + 16 * e, 8, e);
                *truth.entry(context(&st[i], 0)).or_default() += 1;
            }
            parts.push(job::as_job_part(rank_profile(&c, r, nranks, eps, false), r));
            exact_parts.push(job::as_job_part(rank_profile(&x, r, nranks, 0.0, true), r));
        }
        let (mut p, _) = job::merge_all(parts, cap).unwrap();
        job::finish(&mut p, nranks);
        let (xp, _) = job::merge_all(exact_parts, 0).unwrap();
        let t = &p.trees[0];
        let total = t.total_count;
        prop_assert_eq!(total, 1500 * nranks as u64);
        prop_assert_eq!(xp.trees[0].total_count, total);
        prop_assert_eq!(p.totals[0].count, total);
        let keep = hcct_mask(t, phi);
        for (path, &tc) in &truth {
            match node_of(t, path) {
                Some((i, node)) => {
                    prop_assert!(node.count >= tc && node.count - node.count_err <= tc,
                        "{:?} vs true {}", node, tc);
                    if tc as f64 >= phi * total as f64 {
                        prop_assert!(keep[i], "hot context {} of {} not in the HCCT", tc, total);
                    }
                }
                None => prop_assert!((tc as f64) < phi * total as f64,
                    "lost hot context {} of {}", tc, total),
            }
            // The exact merge has every context with its true count.
            let (_, xn) = node_of(&xp.trees[0], path).unwrap();
            prop_assert_eq!(xn.count, tc);
        }
    }
}

/// Bounded per-rank parts with different hot spots (they evict).
fn evicting_parts(nranks: u32, eps: f64, seed: u64) -> Vec<Profile> {
    let mut rng = common::Rng(seed);
    let st = stacks(&mut rng, 120, 6);
    let z = Zipf::new(st.len(), 1.1);
    (0..nranks)
        .map(|r| {
            let mut c = collector(eps, false);
            let mut cur = Cursor::new();
            for e in 0..400u64 {
                let i = (z.sample(&mut rng) + r as usize * 11) % st.len();
                c.on_alloc(&mut cur, 0, &st[i], 0, 0x1000 + 16 * e, 8 + i as u64, e);
            }
            job::as_job_part(rank_profile(&c, r, nranks, eps, false), r)
        })
        .collect()
}

#[test]
fn streaming_merge_is_merge_all_with_logarithmic_live_parts() {
    let eps = 1.0 / 16.0;
    let cap = job::capacity(&Config {
        epsilon: eps,
        ..Config::default()
    });
    for n in [1u32, 2, 3, 5, 7, 8, 13, 32, 33] {
        let parts = evicting_parts(n, eps, 7 + n as u64);
        let (all, rounds_all) = job::merge_all(parts.clone(), cap).unwrap();
        let mut m = job::BinomialMerger::new(cap);
        for (i, p) in parts.into_iter().enumerate() {
            m.push(p);
            // Complete blocks only: one per set bit of the count so far.
            assert_eq!(m.live() as u32, (i as u32 + 1).count_ones(), "{n} parts");
        }
        assert_eq!(m.parts(), n as usize);
        let bound = (usize::BITS - (n as usize).leading_zeros()) as usize;
        assert!(m.peak_live() <= bound, "{} > {bound}", m.peak_live());
        let (stream, rounds) = m.finish().unwrap();
        assert_eq!(rounds, rounds_all, "{n} parts");
        // The same merges in the same order: the same profile.
        assert_eq!(stream, all, "{n} parts");
    }
    assert!(job::merge_stream(Vec::new(), 4).is_none());
    let (p, rounds) = job::merge_stream(evicting_parts(6, eps, 1), cap).unwrap();
    assert_eq!((rounds, p.ranks.len()), (3, 6));
}

/// `MPI_Alloc_mem` and `MPI_Free_mem` are both allocator kinds and MPI
/// calls: each occurrence of the name is summed with its own counterpart.
#[test]
fn totals_with_a_repeated_kind_name_merge_per_occurrence() {
    let part = |r: u32, alloc: u64, call: u64| {
        let p = Profile {
            totals: vec![
                KindTotal {
                    kind: "malloc".into(),
                    count: 1,
                    bytes: 8,
                },
                KindTotal {
                    kind: "MPI_Alloc_mem".into(),
                    count: alloc,
                    bytes: 4096 * alloc,
                },
                KindTotal {
                    kind: "MPI_Send".into(),
                    count: 1,
                    bytes: 1,
                },
                KindTotal {
                    kind: "MPI_Alloc_mem".into(),
                    count: call,
                    bytes: 4096 * call,
                },
            ],
            ..Profile::default()
        };
        job::as_job_part(p, r)
    };
    let (p, _) = job::merge_all(vec![part(0, 1, 2), part(1, 3, 4), part(2, 5, 6)], 0).unwrap();
    let got: Vec<(&str, u64, u64)> = p
        .totals
        .iter()
        .map(|t| (t.kind.as_str(), t.count, t.bytes))
        .collect();
    assert_eq!(
        got,
        [
            ("malloc", 3, 24),
            ("MPI_Alloc_mem", 9, 9 * 4096),
            ("MPI_Send", 3, 3),
            ("MPI_Alloc_mem", 12, 12 * 4096),
        ]
    );
}

/// A rank's part leaves its spreads implicit (each context's value on that
/// rank alone); the merge reads them so and `finish` writes them out. The
/// job is the same as when every part carries them written out: bounded
/// summaries that drop contexts, a tree only some ranks have, and a job of
/// one part.
#[test]
fn implicit_spreads_give_the_job_written_out_ones_give() {
    let parts = |n: u32, explicit: bool| -> Vec<Profile> {
        (0..n)
            .map(|r| {
                let mut rng = Rng(7 + u64::from(r));
                let mut c = collector(0.01, false);
                let mut truth = Truth::new();
                for _ in 0..60 {
                    let leaf = 0x500 + rng.below(40 + 10 * u64::from(r));
                    let n = 1 + rng.below(20);
                    feed(
                        &mut c,
                        &[leaf, 0x420, 0x410 + u64::from(r % 2)],
                        n,
                        8 * n,
                        &mut truth,
                    );
                }
                let mut p = rank_profile(&c, r + 3, n, 0.01, false);
                if r % 3 == 1 {
                    // A tree of the MPI side's kind, on some ranks only.
                    let mut m = snapshot(&c);
                    m.name = "mpi".into();
                    p.trees.push(m);
                }
                let mut p = job::as_job_part(p, r + 3);
                for t in &mut p.trees {
                    assert!(t.spread.is_empty(), "a rank's part holds no spreads");
                    if explicit {
                        t.spread = t
                            .nodes
                            .iter()
                            .map(|x| job::single_spread(x, r + 3))
                            .collect();
                    }
                }
                p
            })
            .collect()
    };
    for n in [1u32, 2, 3, 5] {
        let cap = 20;
        let (mut implicit, _) = job::merge_all(parts(n, false), cap).unwrap();
        let (mut explicit, _) = job::merge_all(parts(n, true), cap).unwrap();
        job::finish(&mut implicit, n);
        job::finish(&mut explicit, n);
        for t in &implicit.trees {
            assert_eq!(t.spread.len(), t.nodes.len(), "{n} ranks, tree {}", t.name);
        }
        assert!(implicit.trees.iter().any(|t| t.name == "mpi") == (n >= 2));
        assert_eq!(implicit, explicit, "{n} ranks");
        // Every context's spread counts the ranks that hold it, by rank.
        let t = &implicit.trees[0];
        for (i, x) in t.nodes.iter().enumerate() {
            let s = t.spread[i].count;
            if matches!(x.key, FrameKey::Kind(_)) {
                assert!(
                    s.present >= 1 && s.present <= n && s.sum <= x.count,
                    "{n}: {s:?} {x:?}"
                );
                assert!((3..3 + n).contains(&s.max_rank));
            } else {
                assert_eq!(s.present, 0);
            }
        }
    }
}
