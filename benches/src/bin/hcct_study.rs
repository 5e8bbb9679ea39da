//! HCCT space and accuracy on a skewed synthetic stream (issue 7, item 3),
//! after the HCCT paper's figures: MCCT nodes as % of the exact CCT (Fig. 4),
//! false positives and negatives (Fig. 9/10), counter error on hot contexts
//! (Fig. 11), degree of overlap and hot-node coverage, for ε = φ/5 and φ/10.
//!
//!     hcct_study [--quick] [--contexts N] [--events N] [--zipf S]
//!
//! Truth comes from an exact CCT (`Hcct::new(None)`) fed the same stream.
//! A context is *reported hot* when its count estimate is ≥ φN and *truly hot*
//! when its exact count is ≥ φN (event counts; the byte weight is not used
//! for the classification).

use std::collections::HashMap;

use wmhcct_benches::stream::{Order, Shape, StackStream};
use wmhcct_collector::hcct::capacity_for;
use wmhcct_collector::query::hcct_mask;
use wmhcct_collector::{Cursor, Hcct};
use wmhcct_format::{FrameKey, Tree, NO_PARENT};

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// Feeds `events` events of `shape` into a tree of `capacity` (None: exact).
fn build(shape: Shape, events: usize, capacity: Option<usize>) -> (Hcct, Tree) {
    let mut s = StackStream::new(shape);
    let mut h = Hcct::new(capacity);
    let mut cur = Cursor::new();
    let mut f = Vec::new();
    for _ in 0..events {
        let e = s.next_event(&mut f);
        h.record(&mut cur, &f, e.unchanged, 1, e.size, 0);
    }
    let tree = h.snapshot("alloc", &mut FrameKey::Unknown, 0);
    (h, tree)
}

fn key_bits(k: &FrameKey) -> u64 {
    match k {
        FrameKey::Unknown(a) => *a,
        FrameKey::Kind(k) => 0xffff_0000_0000_0000 | *k as u64,
        other => {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            std::hash::Hash::hash(other, &mut h);
            std::hash::Hasher::finish(&h)
        }
    }
}

/// Per node, a hash of its path from the root (nodes are topologically
/// ordered: parent < index).
fn path_hashes(t: &Tree) -> Vec<u64> {
    let mut out = vec![0u64; t.nodes.len()];
    for (i, n) in t.nodes.iter().enumerate().skip(1) {
        let p = if n.parent == NO_PARENT {
            0
        } else {
            out[n.parent as usize]
        };
        out[i] = (p ^ key_bits(&n.key))
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(29);
    }
    out
}

fn is_item(t: &Tree, i: usize) -> bool {
    matches!(t.nodes[i].key, FrameKey::Kind(_))
}

/// Inclusive event counts (a node's items and everything below it).
fn inclusive(t: &Tree) -> Vec<u64> {
    let mut inc: Vec<u64> = t.nodes.iter().map(|n| n.count).collect();
    for i in (1..t.nodes.len()).rev() {
        let p = t.nodes[i].parent;
        if p != NO_PARENT {
            inc[p as usize] += inc[i];
        }
    }
    inc
}

struct Row {
    phi: f64,
    eps_div: u32,
    mcct_pct: f64,
    hcct_pct: f64,
    /// The exact HCCT (hot by the exact counts, and their ancestors) as % of
    /// the exact CCT: what any MCCT without false negatives must hold.
    exact_hcct_pct: f64,
    hot: usize,
    false_neg: usize,
    false_pos: usize,
    mean_err_pct: f64,
    max_err_pct: f64,
    overlap_pct: f64,
    coverage_pct: [f64; 2],
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let contexts: usize = arg("--contexts")
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 10_000 } else { 100_000 });
    let events: usize = arg("--events")
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 200_000 } else { 5_000_000 });
    let zipf: f64 = arg("--zipf").and_then(|v| v.parse().ok()).unwrap_or(1.0);
    let shape = Shape {
        depth: 30,
        contexts,
        zipf,
        order: Order::Random,
        seed: 11,
    };
    let (_, exact) = build(shape, events, None);
    let n_total = exact.total_count as f64;
    let ex_hash = path_hashes(&exact);
    let ex_inc = inclusive(&exact);
    let truth: HashMap<u64, u64> = (1..exact.nodes.len())
        .filter(|&i| is_item(&exact, i))
        .map(|i| (ex_hash[i], exact.nodes[i].count))
        .collect();
    let distinct = truth.len();
    let phis: &[f64] = if quick {
        &[1e-3, 1e-4]
    } else {
        &[1e-3, 1e-4, 1e-5]
    };
    let mut rows = Vec::new();
    let share = |mask: &[bool]| {
        mask.iter().filter(|&&m| m).count() as f64 * 100.0 / exact.nodes.len() as f64
    };
    for &phi in phis {
        let exact_hcct_pct = share(&hcct_mask(&exact, phi));
        for eps_div in [5u32, 10] {
            let (h, t) = build(shape, events, capacity_for(phi / eps_div as f64));
            let hash = path_hashes(&t);
            let mask = hcct_mask(&t, phi);
            let min = phi * n_total;
            let mut reported: HashMap<u64, u64> = HashMap::new();
            let mut est_sum = 0u64;
            for i in 1..t.nodes.len() {
                if is_item(&t, i) && mask[i] && t.nodes[i].count as f64 >= min {
                    reported.insert(hash[i], t.nodes[i].count);
                    est_sum += t.nodes[i].count;
                }
            }
            let est_of: HashMap<u64, u64> = (1..t.nodes.len())
                .filter(|&i| is_item(&t, i))
                .map(|i| (hash[i], t.nodes[i].count))
                .collect();
            let (mut hot, mut fneg, mut errs) = (0, 0, Vec::new());
            for (p, &c) in &truth {
                if c as f64 >= min {
                    hot += 1;
                    if !reported.contains_key(p) {
                        fneg += 1;
                    }
                    let e = est_of.get(p).copied().unwrap_or(0);
                    errs.push((e as f64 - c as f64).abs() / c as f64 * 100.0);
                }
            }
            let fpos = reported
                .keys()
                .filter(|p| (truth.get(p).copied().unwrap_or(0) as f64) < min)
                .count();
            let overlap: f64 = reported
                .iter()
                .map(|(p, &e)| {
                    let tv = truth.get(p).copied().unwrap_or(0) as f64 / n_total;
                    (e as f64 / est_sum.max(1) as f64).min(tv)
                })
                .sum();
            let in_hcct: std::collections::HashSet<u64> = (0..t.nodes.len())
                .filter(|&i| mask[i])
                .map(|i| hash[i])
                .collect();
            let mut coverage = [0.0; 2];
            for (k, tau) in [0.01, 0.001].iter().enumerate() {
                let hot_nodes: Vec<usize> = (1..exact.nodes.len())
                    .filter(|&i| !is_item(&exact, i) && ex_inc[i] as f64 >= tau * n_total)
                    .collect();
                let covered = hot_nodes
                    .iter()
                    .filter(|&&i| in_hcct.contains(&ex_hash[i]))
                    .count();
                coverage[k] = covered as f64 * 100.0 / hot_nodes.len().max(1) as f64;
            }
            let mean_err = errs.iter().sum::<f64>() / errs.len().max(1) as f64;
            let max_err = errs.iter().cloned().fold(0.0, f64::max);
            rows.push(Row {
                phi,
                eps_div,
                mcct_pct: h.node_count() as f64 * 100.0 / exact.nodes.len() as f64,
                hcct_pct: share(&mask),
                exact_hcct_pct,
                hot,
                false_neg: fneg,
                false_pos: fpos,
                mean_err_pct: mean_err,
                max_err_pct: max_err,
                overlap_pct: overlap * 100.0,
                coverage_pct: coverage,
            });
        }
    }
    println!("## HCCT study");
    println!();
    println!(
        "{events} events, {contexts} contexts (Zipf {zipf}, random order, depth 30; {distinct} distinct seen), exact CCT {} nodes.",
        exact.nodes.len()
    );
    println!();
    println!("| φ | ε | MCCT nodes % of CCT | (φ,ε)-HCCT nodes % of CCT | exact HCCT % of CCT | hot contexts | false negatives | false positives | mean counter error on hot % | max % | degree of overlap % | hot-node coverage τ=1% / 0.1% |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {:e} | φ/{} | {:.2} | {:.3} | {:.3} | {} | {} | {} | {:.3} | {:.2} | {:.1} | {:.0} / {:.0} |",
            r.phi,
            r.eps_div,
            r.mcct_pct,
            r.hcct_pct,
            r.exact_hcct_pct,
            r.hot,
            r.false_neg,
            r.false_pos,
            r.mean_err_pct,
            r.max_err_pct,
            r.overlap_pct,
            r.coverage_pct[0],
            r.coverage_pct[1]
        );
    }
    println!();
    println!(
        "The exact HCCT holds every context whose exact count (or bytes) is at least φ·N, and \
         their ancestors: an MCCT without false negatives contains it, whatever its counters."
    );
    if let Some(r) = rows.iter().find(|r| r.phi == 1e-4) {
        let verdict = if r.exact_hcct_pct > 1.0 {
            "so no summary without false negatives can have an MCCT ≤ 1 % of the exact CCT on this stream"
        } else {
            "so an MCCT ≤ 1 % of the exact CCT is possible on this stream"
        };
        println!(
            "At φ = 1e-4 the exact HCCT is {:.3} % of the exact CCT, {verdict}.",
            r.exact_hcct_pct
        );
    }
}
