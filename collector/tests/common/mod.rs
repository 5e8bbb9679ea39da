//! Shared helpers of the collector's property tests: synthetic stack streams
//! and a canonical (order-free) view of a tree.
#![allow(dead_code)]

use std::collections::HashMap;

use wmhcct_collector::{Collector, CollectorConfig};
use wmhcct_format::{FrameKey, Node, Tree};

/// Full key path root → node (root excluded) of every node.
pub fn paths(t: &Tree) -> Vec<Vec<FrameKey>> {
    let mut out: Vec<Vec<FrameKey>> = Vec::with_capacity(t.nodes.len());
    for (i, n) in t.nodes.iter().enumerate() {
        let mut p = if i == 0 {
            Vec::new()
        } else {
            assert!((n.parent as usize) < i, "parent after child");
            out[n.parent as usize].clone()
        };
        if i > 0 {
            p.push(n.key);
        }
        out.push(p);
    }
    out
}

/// Path → node, for comparing trees regardless of node order.
pub fn canon(t: &Tree) -> HashMap<Vec<FrameKey>, Node> {
    let mut m = HashMap::new();
    for (p, n) in paths(t).into_iter().zip(&t.nodes) {
        let mut n = *n;
        n.parent = 0;
        assert!(m.insert(p, n).is_none(), "duplicate path");
    }
    m
}

/// Context path (as the snapshot names it) of a stack (leaf first) + kind.
pub fn context(frames: &[u64], kind: u16) -> Vec<FrameKey> {
    let mut p: Vec<FrameKey> = frames.iter().rev().map(|&a| FrameKey::Unknown(a)).collect();
    p.push(FrameKey::Kind(kind));
    p
}

pub fn resolve() -> impl FnMut(u64) -> FrameKey {
    FrameKey::Unknown
}

pub fn snapshot(c: &Collector) -> Tree {
    let mut r = resolve();
    c.snapshot_tree("alloc", &mut r)
}

pub fn collector(epsilon: f64, exact: bool) -> Collector {
    Collector::new(CollectorConfig {
        phi: 0.01,
        epsilon,
        exact,
        n_kinds: 12,
    })
}

/// Tiny deterministic PRNG (splitmix64).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }

    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// `n` distinct stacks (leaf first) shaped like a program: shared outer
/// frames (`_start`, `main`, …) and varying inner ones.
pub fn stacks(rng: &mut Rng, n: usize, max_depth: usize) -> Vec<Vec<u64>> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    while out.len() < n {
        let depth = 1 + rng.below(max_depth as u64) as usize;
        // Root side first, few choices near the root, more near the leaf.
        let mut root_first: Vec<u64> = (0..depth)
            .map(|d| {
                0x40_0000 + (d as u64) * 0x1_0000 + 16 * rng.below(1 + 2 * d as u64 * d as u64)
            })
            .collect();
        root_first.push(0x50_0000 + 16 * rng.below(64));
        let leaf_first: Vec<u64> = root_first.into_iter().rev().collect();
        if seen.insert(leaf_first.clone()) {
            out.push(leaf_first);
        }
    }
    out
}

/// Zipf sampler over `n` ranks with exponent `s` (inverse CDF, binary search).
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    pub fn new(n: usize, s: f64) -> Zipf {
        let mut cdf = Vec::with_capacity(n);
        let mut acc = 0.0;
        for r in 1..=n {
            acc += 1.0 / (r as f64).powf(s);
            cdf.push(acc);
        }
        for x in &mut cdf {
            *x /= acc;
        }
        Zipf { cdf }
    }

    pub fn sample(&self, rng: &mut Rng) -> usize {
        let u = rng.unit();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}

/// Number of root-side frames shared by two leaf-first stacks.
pub fn common_root_frames(a: &[u64], b: &[u64]) -> usize {
    a.iter()
        .rev()
        .zip(b.iter().rev())
        .take_while(|(x, y)| x == y)
        .count()
}
