//! Time series of a job: one process's series becomes a job part on the
//! absolute time grid of its bin width; two parts merge on a common grid
//! (the wider width, the earlier origin, at most `bins` bins), storing min /
//! sum / max across ranks per bin and the full series of a bounded set of
//! ranks (those with the highest peaks and an even stride of the rest), so
//! the result stays bounded at any rank count.
//!
//! Grids are aligned to multiples of their width since the Unix epoch and
//! widths are `BASE_BIN_NS · 2^k`, so parts' grids refine each other and
//! moving a part to a wider grid is exact for maxima and sums. Only a rank's
//! first move, from its own start-relative bins to the absolute grid, can
//! spread one of its bins over two (the maximum goes into both, the counts
//! into the first).

use wmhcct_format::{
    BinStats, JobSeries, RankSeries, Sample, DEFAULT_BINS, DEFAULT_EVENT_SAMPLES,
    DEFAULT_RANK_SERIES, NO_CONTEXT,
};

use crate::rebin::{rebin, Axis, Mode};
use crate::series::Bins;

/// A job's samples are at most this many times one rank's reservoir.
pub const JOB_SAMPLE_FACTOR: usize = 16;

/// Bounds applied when parts merge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bins on the time axis.
    pub bins: usize,
    /// Ranks whose full series is kept.
    pub rank_series: usize,
    /// Samples kept in all (shared by the kept ranks).
    pub samples: usize,
    /// Ranks in the whole job, when known (for the even stride).
    pub nranks: Option<u32>,
}

impl Limits {
    /// From a profile's configuration (0 meaning the default).
    pub fn from_config(c: &wmhcct_format::Config, nranks: Option<u32>) -> Limits {
        let or = |v: u32, d: u32| if v == 0 { d } else { v } as usize;
        Limits {
            bins: or(c.bins, DEFAULT_BINS).max(2),
            rank_series: or(c.rank_series, DEFAULT_RANK_SERIES),
            samples: or(c.event_samples, DEFAULT_EVENT_SAMPLES).saturating_mul(JOB_SAMPLE_FACTOR),
            nranks,
        }
    }
}

fn single(v: &[u64]) -> BinStats {
    BinStats {
        min: v.to_vec(),
        max: v.to_vec(),
        sum: v.to_vec(),
    }
}

/// The series of one process, on its own axis (origin: its start).
pub fn process_series(
    bins: &Bins,
    start_unix_ns: u64,
    peak_bytes: u64,
    samples: Vec<Sample>,
    sampled_from: u64,
) -> JobSeries {
    let rank = RankSeries {
        rank: 0,
        peak_bytes,
        live_max: bins.live_max().to_vec(),
        alloc_events: bins.alloc_events().to_vec(),
        alloc_bytes: bins.alloc_bytes().to_vec(),
        mpi_events: bins.mpi_events().to_vec(),
        samples,
        sampled_from,
    };
    from_rank(rank, start_unix_ns, bins.width_ns())
}

fn from_rank(rank: RankSeries, start_unix_ns: u64, bin_ns: u64) -> JobSeries {
    JobSeries {
        start_unix_ns,
        bin_ns,
        nranks: 1,
        ranks: vec![1; rank.live_max.len()],
        live: single(&rank.live_max),
        alloc_events: single(&rank.alloc_events),
        alloc_bytes: single(&rank.alloc_bytes),
        mpi_events: single(&rank.mpi_events),
        approximate: false,
        per_rank: vec![rank],
    }
}

fn axis(s: &JobSeries) -> Axis {
    Axis {
        origin: s.start_unix_ns,
        width: s.bin_ns.max(1),
    }
}

fn end_of(s: &JobSeries) -> u64 {
    s.start_unix_ns
        .saturating_add((s.len() as u64).saturating_mul(s.bin_ns))
}

/// The grid of width ≥ `width` (doubled as needed), aligned, from `start`
/// to `end` in at most `max_bins` bins.
fn grid(start: u64, end: u64, width: u64, max_bins: usize) -> (Axis, usize) {
    let mut a = Axis::aligned(start, width);
    loop {
        let n = a.bins_to(end).max(1);
        if n <= max_bins || a.width > u64::MAX / 4 {
            return (a, n.min(max_bins));
        }
        a = Axis::aligned(start, a.width * 2);
    }
}

fn move_rank(r: &RankSeries, src: Axis, dst: Axis, len: usize) -> RankSeries {
    let shift = src.origin.saturating_sub(dst.origin);
    RankSeries {
        rank: r.rank,
        peak_bytes: r.peak_bytes,
        live_max: rebin(&r.live_max, src, dst, len, Mode::Max),
        alloc_events: rebin(&r.alloc_events, src, dst, len, Mode::Sum),
        alloc_bytes: rebin(&r.alloc_bytes, src, dst, len, Mode::Sum),
        mpi_events: rebin(&r.mpi_events, src, dst, len, Mode::Sum),
        samples: r
            .samples
            .iter()
            .map(|s| Sample {
                t_ns: s.t_ns.saturating_add(shift),
                ..*s
            })
            .collect(),
        sampled_from: r.sampled_from,
    }
}

/// Min / max / sum across ranks moved to another grid: exact on a grid
/// refinement of one bin per bin; otherwise the minima and the sum of live
/// bytes become lower bounds and the maxima of counts upper bounds.
fn move_stats(s: &BinStats, live: bool, src: Axis, dst: Axis, len: usize) -> BinStats {
    let (lo, hi, sum) = if live {
        (Mode::Max, Mode::Max, Mode::Max)
    } else {
        (Mode::Sum, Mode::Sum, Mode::Sum)
    };
    BinStats {
        min: rebin(&s.min, src, dst, len, lo),
        max: rebin(&s.max, src, dst, len, hi),
        sum: rebin(&s.sum, src, dst, len, sum),
    }
}

/// `s` moved to the grid `dst` of `len` bins.
fn move_series(s: &JobSeries, dst: Axis, len: usize) -> JobSeries {
    let src = axis(s);
    if src == dst && s.len() == len {
        return s.clone();
    }
    // One rank: recompute the statistics from its series (exact).
    if s.nranks == 1 && s.per_rank.len() == 1 {
        let r = move_rank(&s.per_rank[0], src, dst, len);
        let mut out = from_rank(r, dst.origin, dst.width);
        let covered: Vec<u64> = s.ranks.iter().map(|&x| x as u64).collect();
        out.ranks = rebin(&covered, src, dst, len, Mode::Max)
            .into_iter()
            .map(|x| x.min(1) as u32)
            .collect();
        out.approximate = s.approximate;
        return out;
    }
    let coarser = !dst.same_grid(&src);
    let ranks: Vec<u64> = s.ranks.iter().map(|&r| r as u64).collect();
    JobSeries {
        start_unix_ns: dst.origin,
        bin_ns: dst.width,
        nranks: s.nranks,
        ranks: rebin(&ranks, src, dst, len, Mode::Max)
            .into_iter()
            .map(|x| x.min(u32::MAX as u64) as u32)
            .collect(),
        live: move_stats(&s.live, true, src, dst, len),
        alloc_events: move_stats(&s.alloc_events, false, src, dst, len),
        alloc_bytes: move_stats(&s.alloc_bytes, false, src, dst, len),
        mpi_events: move_stats(&s.mpi_events, false, src, dst, len),
        approximate: s.approximate || (coarser && s.nranks > 1),
        per_rank: s
            .per_rank
            .iter()
            .map(|r| move_rank(r, src, dst, len))
            .collect(),
    }
}

/// One process's series as the part of rank `rank`: on the absolute grid
/// of its width (doubled if needed to stay within `max_bins`).
pub fn as_job_part(mut s: JobSeries, rank: u32, max_bins: usize) -> JobSeries {
    for r in &mut s.per_rank {
        r.rank = rank;
    }
    let (dst, len) = grid(s.start_unix_ns, end_of(&s), s.bin_ns, max_bins);
    move_series(&s, dst, len)
}

fn combine_stats(a: &mut BinStats, b: &BinStats, ra: &[u32], rb: &[u32]) {
    for j in 0..a.len() {
        let (na, nb) = (
            ra.get(j).copied().unwrap_or(0),
            rb.get(j).copied().unwrap_or(0),
        );
        let bmin = b.min.get(j).copied().unwrap_or(0);
        a.min[j] = match (na, nb) {
            (0, _) => bmin,
            (_, 0) => a.min[j],
            _ => a.min[j].min(bmin),
        };
        a.max[j] = a.max[j].max(b.max.get(j).copied().unwrap_or(0));
        a.sum[j] = a.sum[j].saturating_add(b.sum.get(j).copied().unwrap_or(0));
    }
}

/// Merge two job parts (disjoint sets of ranks).
pub fn merge(a: JobSeries, b: JobSeries, limits: &Limits) -> JobSeries {
    if a.nranks == 0 {
        return b;
    }
    if b.nranks == 0 {
        return a;
    }
    let start = a.start_unix_ns.min(b.start_unix_ns);
    let end = end_of(&a).max(end_of(&b));
    let (dst, len) = grid(start, end, a.bin_ns.max(b.bin_ns), limits.bins);
    let mut out = move_series(&a, dst, len);
    let b = move_series(&b, dst, len);
    combine_stats(&mut out.live, &b.live, &out.ranks, &b.ranks);
    combine_stats(&mut out.alloc_events, &b.alloc_events, &out.ranks, &b.ranks);
    combine_stats(&mut out.alloc_bytes, &b.alloc_bytes, &out.ranks, &b.ranks);
    combine_stats(&mut out.mpi_events, &b.mpi_events, &out.ranks, &b.ranks);
    for (x, y) in out.ranks.iter_mut().zip(&b.ranks) {
        *x = x.saturating_add(*y);
    }
    out.nranks = out.nranks.saturating_add(b.nranks);
    out.approximate |= b.approximate;
    out.per_rank.extend(b.per_rank);
    out.per_rank = select_ranks(std::mem::take(&mut out.per_rank), limits);
    thin_samples(&mut out.per_rank, limits.samples);
    out
}

/// Keep at most `rank_series` ranks: the `rank_series / 2` highest peaks
/// and the ranks on an even stride (`rank % stride == 0`, the stride
/// spreading the other half over the whole job). Deterministic and
/// independent of the merge order: any rank kept at the end was kept by
/// every partial merge.
pub fn select_ranks(mut ranks: Vec<RankSeries>, limits: &Limits) -> Vec<RankSeries> {
    let cap = limits.rank_series;
    if ranks.len() > cap {
        let top = cap / 2;
        let rest = cap - top;
        let n = limits
            .nranks
            .map(|n| n as usize)
            .unwrap_or(ranks.len())
            .max(ranks.len());
        let stride = if rest == 0 {
            usize::MAX
        } else {
            n.div_ceil(rest).max(1)
        };
        ranks.sort_by(|x, y| y.peak_bytes.cmp(&x.peak_bytes).then(x.rank.cmp(&y.rank)));
        let mut kept: Vec<RankSeries> = Vec::with_capacity(cap);
        let mut strided: Vec<RankSeries> = Vec::new();
        for (i, r) in ranks.into_iter().enumerate() {
            if i < top {
                kept.push(r);
            } else if stride != usize::MAX && (r.rank as usize).is_multiple_of(stride) {
                strided.push(r);
            }
        }
        strided.sort_by_key(|r| r.rank);
        strided.truncate(rest);
        kept.extend(strided);
        ranks = kept;
    }
    ranks.sort_by_key(|r| r.rank);
    ranks
}

/// Keep at most `budget` samples over all ranks, an equal share each,
/// evenly spaced in time.
pub fn thin_samples(ranks: &mut [RankSeries], budget: usize) {
    let total: usize = ranks.iter().map(|r| r.samples.len()).sum();
    if total <= budget || ranks.is_empty() {
        return;
    }
    let share = budget / ranks.len();
    for r in ranks {
        let n = r.samples.len();
        if n > share {
            let kept: Vec<Sample> = (0..share)
                .map(|k| r.samples[(k as u128 * n as u128 / share as u128) as usize])
                .collect();
            r.samples = kept;
        }
    }
}

/// Rewrite sample contexts through `map` (old tree row → new row, or
/// [`NO_CONTEXT`]).
pub fn remap_contexts(s: &mut JobSeries, map: &dyn Fn(u32) -> u32) {
    for r in &mut s.per_rank {
        for x in &mut r.samples {
            if x.context != NO_CONTEXT {
                x.context = map(x.context);
            }
        }
    }
}
