//! Merging profiles of the ranks of a job (or of any set of processes).
//!
//! The tree merge is the mergeable-summaries rule for Space-Saving, kept
//! rigorous: for each context and weight, every summary gives an interval
//! `[count - count_err, count]` holding the true value; a summary that does
//! not hold the context bounds it by its *floor* (its smallest monitored
//! counter when full, else 0). The merged interval is the sum of the
//! intervals, so the true value always lies within `[count - count_err,
//! count]` of the merged tree, and the estimate never undercounts. When more
//! contexts than the capacity remain, the ones with the largest estimates in
//! either weight are kept and the largest dropped estimate raises the merged
//! floor. Contexts are matched by their path of (module, offset) keys, so
//! ranks with different load addresses merge correctly.

use std::collections::HashMap;

use crate::job_series::{self, Limits};
use crate::merge::{merge_inputs, Input};

use wmhcct_format::{
    FrameKey, HeapStats, JobSeries, KindTotal, Module, Node, NodeSpread, Profile, Spread, Tree,
    UnwindStats, NO_CONTEXT,
};

/// Turn one process's profile into a job part: its per-rank summary. Its
/// trees' per-rank spreads are left implicit (each context's spread is
/// its own value on this one rank: [`single_spread`]); the merge reads
/// them so, and [`finish`] writes them out for a job of one part, so that a
/// rank's part does not carry a spread for each of its nodes (64 bytes a
/// node, most of them frames without one) into the reduction.
pub fn as_job_part(mut p: Profile, rank: u32) -> Profile {
    if !p.ranks.is_empty() {
        return p;
    }
    p.ranks = vec![p.rank_summary(rank)];
    p.meta.rank = Some(rank);
    let limits = Limits::from_config(&p.config, p.meta.nranks);
    p.series = p
        .series
        .take()
        .map(|s| job_series::as_job_part(s, rank, limits.bins));
    p
}

/// The spread of node `n` of rank `rank`'s own tree: its value on that rank
/// for a context, none for a frame.
pub fn single_spread(n: &Node, rank: u32) -> NodeSpread {
    if is_context(n) {
        NodeSpread {
            count: Spread::single(n.count, rank),
            bytes: Spread::single(n.bytes, rank),
        }
    } else {
        NodeSpread::default()
    }
}

/// Write out the spreads `t` leaves implicit for `rank`.
fn write_spreads(t: &mut Tree, rank: u32) {
    t.spread = t.nodes.iter().map(|n| single_spread(n, rank)).collect();
}

/// Set the job-level fields once every rank is merged in.
pub fn finish(p: &mut Profile, nranks: u32) {
    if let [r] = p.ranks.as_slice() {
        let rank = r.rank;
        for t in p.trees.iter_mut().filter(|t| t.spread.is_empty()) {
            write_spreads(t, rank);
        }
    }
    p.meta.nranks = Some(nranks);
    p.meta.rank = None;
    p.ranks.sort_by_key(|r| r.rank);
}

/// The merge capacity for profiles taken with `config`: 0 (keep every
/// context) in exact mode, else the Space-Saving capacity for ε.
pub fn capacity(config: &wmhcct_format::Config) -> usize {
    if config.exact {
        0
    } else {
        crate::hcct::capacity_for(config.epsilon).unwrap_or(0)
    }
}

/// Merge job parts in the binomial-tree order the MPI reduction uses
/// (round k merges part i + 2^k into part i), so an offline merge of spill
/// files, a simulated job and a real job follow the same code path and
/// depth ⌈log2 P⌉. Returns the merged part and the number of rounds.
pub fn merge_all(parts: Vec<Profile>, capacity: usize) -> Option<(Profile, u32)> {
    let mut slots: Vec<Option<Profile>> = parts.into_iter().map(Some).collect();
    let n = slots.len();
    if n == 0 {
        return None;
    }
    let mut step = 1usize;
    let mut rounds = 0u32;
    while step < n {
        let mut i = 0;
        while i + step < n {
            if let (Some(a), Some(b)) = (slots[i].take(), slots[i + step].take()) {
                slots[i] = Some(merge(a, b, capacity));
            }
            i += 2 * step;
        }
        step *= 2;
        rounds += 1;
    }
    slots[0].take().map(|p| (p, rounds))
}

/// [`merge_all`] one part at a time: the same binomial order and result, but
/// only the partial merges of complete blocks (at most ⌊log2 P⌋ + 1) are
/// alive, never all P parts. Part `i` must be pushed `i`-th.
///
/// Block `[j·2^k, (j+1)·2^k)` is merged as soon as its last part arrives
/// (the carry of a binary counter: what round `k` of `merge_all` does); the
/// incomplete blocks of the tail are folded from the right by
/// [`BinomialMerger::finish`], as `merge_all`'s later rounds fold them.
pub struct BinomialMerger {
    capacity: usize,
    /// (level k: the block holds 2^k parts, partial merge), levels strictly
    /// decreasing from the bottom.
    blocks: Vec<(u32, Profile)>,
    parts: usize,
    peak_blocks: usize,
}

impl BinomialMerger {
    /// `capacity` as for [`merge`].
    pub fn new(capacity: usize) -> BinomialMerger {
        BinomialMerger {
            capacity,
            blocks: Vec::new(),
            parts: 0,
            peak_blocks: 0,
        }
    }

    /// Add the next part.
    pub fn push(&mut self, part: Profile) {
        self.parts += 1;
        let mut level = 0u32;
        let mut acc = part;
        while let Some((l, _)) = self.blocks.last() {
            if *l != level {
                break;
            }
            let (_, left) = self.blocks.pop().expect("a block");
            acc = merge(left, acc, self.capacity);
            level += 1;
        }
        self.blocks.push((level, acc));
        self.peak_blocks = self.peak_blocks.max(self.blocks.len());
    }

    /// Parts pushed so far.
    pub fn parts(&self) -> usize {
        self.parts
    }

    /// Partial merges alive now (≤ ⌊log2 parts⌋ + 1).
    pub fn live(&self) -> usize {
        self.blocks.len()
    }

    /// The most partial merges that were alive at once.
    pub fn peak_live(&self) -> usize {
        self.peak_blocks
    }

    /// The partial merges alive now.
    pub fn blocks(&self) -> impl Iterator<Item = &Profile> {
        self.blocks.iter().map(|(_, p)| p)
    }

    /// The merged part and the number of rounds (⌈log2 P⌉), as
    /// [`merge_all`] returns them; `None` when nothing was pushed.
    pub fn finish(mut self) -> Option<(Profile, u32)> {
        let rounds = match self.parts {
            0 => return None,
            n => usize::BITS - (n - 1).leading_zeros(),
        };
        let (_, mut acc) = self.blocks.pop()?;
        while let Some((_, left)) = self.blocks.pop() {
            acc = merge(left, acc, self.capacity);
        }
        Some((acc, rounds))
    }
}

/// [`merge_all`] over an iterator of parts, through a [`BinomialMerger`]:
/// same order, same result, O(log P) partial merges alive.
pub fn merge_stream(
    parts: impl IntoIterator<Item = Profile>,
    capacity: usize,
) -> Option<(Profile, u32)> {
    let mut m = BinomialMerger::new(capacity);
    for p in parts {
        m.push(p);
    }
    m.finish()
}

fn is_context(n: &Node) -> bool {
    matches!(n.key, FrameKey::Kind(_))
}

/// Merge two job parts (disjoint sets of ranks). `capacity`: monitored
/// contexts kept per weight (0: keep everything, exact mode).
pub fn merge(a: Profile, b: Profile, capacity: usize) -> Profile {
    let mut out = a;
    // Modules: b's indices remapped into a's table.
    let mut index: HashMap<(String, String), u32> = out
        .modules
        .iter()
        .enumerate()
        .map(|(i, m)| ((m.path.clone(), m.build_id.clone()), i as u32))
        .collect();
    let remap: Vec<u32> = b
        .modules
        .iter()
        .map(|m: &Module| {
            *index
                .entry((m.path.clone(), m.build_id.clone()))
                .or_insert_with(|| {
                    out.modules.push(m.clone());
                    (out.modules.len() - 1) as u32
                })
        })
        .collect();
    let mut evicted = (0u64, 0u64);
    // Sample contexts are rows of trees[0]: how a's and b's rows of it map
    // to the merged tree's (identity for a while nothing merged into it;
    // none for b unless its tree of that name merged in). Taken from the
    // merge itself, so neither input tree is kept or copied.
    let first = out.trees.first().map(|t| t.name.clone());
    let mut rows_a: Option<Vec<u32>> = out
        .trees
        .first()
        .map(|t| (0..t.nodes.len() as u32).collect());
    let mut rows_b: Option<Vec<u32>> = None;
    let Profile {
        trees: b_trees,
        totals: b_totals,
        heap: b_heap,
        unwind: b_unwind,
        tracer: b_tracer,
        resident: b_resident,
        meta: b_meta,
        ranks: b_ranks,
        series: b_series,
        ..
    } = b;
    // The rank of each side whose trees leave their spreads implicit;
    // a tree of one side without a match on the other gets them written
    // out, since the merged part has more than one rank.
    let a_rank = match out.ranks.as_slice() {
        [r] => Some(r.rank),
        _ => None,
    };
    let b_rank = match b_ranks.as_slice() {
        [r] => Some(r.rank),
        _ => None,
    };
    let mut matched = vec![false; out.trees.len()];
    for mut bt in b_trees {
        remap_modules(&mut bt, &remap);
        let b_side = b_rank.filter(|_| bt.spread.is_empty());
        match out.trees.iter().position(|t| t.name == bt.name) {
            Some(i) => {
                if let Some(m) = matched.get_mut(i) {
                    *m = true;
                }
                let at = &mut out.trees[i];
                let a_side = a_rank.filter(|_| at.spread.is_empty());
                let m = merge_inputs(
                    [
                        Input {
                            tree: std::mem::take(at),
                            rank: a_side,
                        },
                        Input {
                            tree: bt,
                            rank: b_side,
                        },
                    ],
                    capacity,
                );
                *at = m.tree;
                evicted.0 += m.evicted.0;
                evicted.1 += m.evicted.1;
                if first.as_deref() == Some(at.name.as_str()) {
                    let [ra, rb] = m.rows;
                    rows_a = rows_a.map(|prev| compose(&prev, &ra));
                    rows_b = Some(rb);
                }
            }
            None => {
                if let Some(r) = b_side {
                    write_spreads(&mut bt, r);
                }
                out.trees.push(bt);
            }
        }
    }
    if let Some(r) = a_rank {
        for (t, _) in out
            .trees
            .iter_mut()
            .zip(&matched)
            .filter(|(t, m)| !**m && t.spread.is_empty())
        {
            write_spreads(t, r);
        }
    }
    out.totals = merge_totals(&out.totals, &b_totals);
    out.heap = add_heap(&out.heap, &b_heap);
    out.heap.evicted_live_bytes += evicted.0;
    out.heap.evicted_peak_bytes += evicted.1;
    out.unwind = add_unwind(&out.unwind, &b_unwind);
    out.tracer.collector_bytes += b_tracer.collector_bytes;
    out.tracer.ptr_table_peak = out.tracer.ptr_table_peak.max(b_tracer.ptr_table_peak);
    out.tracer.untraced_events += b_tracer.untraced_events;
    out.resident = out.resident + b_resident;
    out.meta.threads += b_meta.threads;
    out.meta.start_unix_ns = out.meta.start_unix_ns.min(b_meta.start_unix_ns);
    out.meta.end_unix_ns = out.meta.end_unix_ns.max(b_meta.end_unix_ns);
    out.ranks.extend(b_ranks);
    out.series = merge_series(
        out.series.take(),
        b_series,
        rows_a.as_deref(),
        rows_b.as_deref(),
        &Limits::from_config(&out.config, out.meta.nranks),
    );
    out
}

/// `first` then `then`: the row `then` gives to the row `first` gave.
fn compose(first: &[u32], then: &[u32]) -> Vec<u32> {
    first
        .iter()
        .map(|&r| then.get(r as usize).copied().unwrap_or(NO_CONTEXT))
        .collect()
}

/// Merge the parts' series, with sample contexts moved to the merged tree
/// through each part's row map (`None`: the part's samples lose theirs).
fn merge_series(
    a: Option<JobSeries>,
    b: Option<JobSeries>,
    rows_a: Option<&[u32]>,
    rows_b: Option<&[u32]>,
    limits: &Limits,
) -> Option<JobSeries> {
    let remap = |s: Option<JobSeries>, rows: Option<&[u32]>| {
        s.map(|mut s| {
            let rows = rows.unwrap_or(&[]);
            job_series::remap_contexts(&mut s, &|r| {
                rows.get(r as usize).copied().unwrap_or(NO_CONTEXT)
            });
            s
        })
    };
    match (remap(a, rows_a), remap(b, rows_b)) {
        (Some(a), Some(b)) => Some(job_series::merge(a, b, limits)),
        (a, b) => a.or(b),
    }
}

/// For each row of `old`, the row of the same context (same key path from
/// the root) in `new`, or `NO_CONTEXT`.
pub fn row_map(old: &Tree, new: &Tree) -> Vec<u32> {
    let mut children: HashMap<(u32, FrameKey), u32> = HashMap::with_capacity(new.nodes.len());
    for (i, n) in new.nodes.iter().enumerate().skip(1) {
        children.insert((n.parent, n.key), i as u32);
    }
    let mut map = vec![NO_CONTEXT; old.nodes.len()];
    for (i, n) in old.nodes.iter().enumerate() {
        map[i] = if i == 0 {
            if new.nodes.is_empty() {
                NO_CONTEXT
            } else {
                0
            }
        } else {
            match map.get(n.parent as usize) {
                Some(&p) if p != NO_CONTEXT => {
                    children.get(&(p, n.key)).copied().unwrap_or(NO_CONTEXT)
                }
                _ => NO_CONTEXT,
            }
        };
    }
    map
}

/// Module indices of `t`'s frames renumbered through `remap`, in place.
fn remap_modules(t: &mut Tree, remap: &[u32]) {
    for n in &mut t.nodes {
        if let FrameKey::Addr { module, offset } = n.key {
            n.key = FrameKey::Addr {
                module: remap.get(module as usize).copied().unwrap_or(module),
                offset,
            };
        }
    }
}

/// Sum per kind. A name can occur twice (`MPI_Alloc_mem`/`MPI_Free_mem` are
/// both allocator kinds and MPI calls): the n-th occurrence in `b` adds to
/// the n-th occurrence in `a`.
fn merge_totals(a: &[KindTotal], b: &[KindTotal]) -> Vec<KindTotal> {
    let mut out = a.to_vec();
    for (i, t) in b.iter().enumerate() {
        let nth = b[..i].iter().filter(|o| o.kind == t.kind).count();
        match out.iter_mut().filter(|o| o.kind == t.kind).nth(nth) {
            Some(o) => {
                o.count += t.count;
                o.bytes += t.bytes;
            }
            None => out.push(t.clone()),
        }
    }
    out
}

/// Heap figures of a set of ranks: sums (the peak is the sum of the ranks'
/// own peaks; `RankSummary` keeps each rank's).
fn add_heap(a: &HeapStats, b: &HeapStats) -> HeapStats {
    HeapStats {
        peak_bytes: a.peak_bytes + b.peak_bytes,
        live_bytes: a.live_bytes + b.live_bytes,
        live_blocks: a.live_blocks + b.live_blocks,
        evicted_live_bytes: a.evicted_live_bytes + b.evicted_live_bytes,
        evicted_peak_bytes: a.evicted_peak_bytes + b.evicted_peak_bytes,
        unknown_frees: a.unknown_frees + b.unknown_frees,
        peak_time_ns: a.peak_time_ns.max(b.peak_time_ns),
        temporary_count: a.temporary_count + b.temporary_count,
        temporary_bytes: a.temporary_bytes + b.temporary_bytes,
        size_classes: (0..a.size_classes.len().max(b.size_classes.len()))
            .map(|k| {
                let of = |v: &[u64]| v.get(k).copied().unwrap_or(0);
                of(&a.size_classes) + of(&b.size_classes)
            })
            .collect(),
    }
}

fn add_unwind(a: &UnwindStats, b: &UnwindStats) -> UnwindStats {
    UnwindStats {
        mode: if a.mode.is_empty() {
            b.mode.clone()
        } else {
            a.mode.clone()
        },
        events: a.events + b.events,
        frames_unwound: a.frames_unwound + b.frames_unwound,
        frames_reused: a.frames_reused + b.frames_reused,
        validated: a.validated + b.validated,
        correct: a.correct + b.correct,
        reseeds: a.reseeds + b.reseeds,
        truncated: a.truncated + b.truncated,
        errors: a.errors + b.errors,
    }
}
