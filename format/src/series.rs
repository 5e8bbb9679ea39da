//! Time series of a process or of a job: live heap, allocation and MPI event
//! density on a common time axis, per-rank series and sampled events.
//!
//! Every time in a [`JobSeries`] is in nanoseconds since its `start_unix_ns`:
//! bin `i` covers `[i * bin_ns, (i + 1) * bin_ns)`. All vectors indexed by bin
//! (the aggregates and every kept rank's series) have the same length.

use serde::{Deserialize, Serialize};

/// `Sample::context` of an event whose context is no longer in the tree.
pub const NO_CONTEXT: u32 = u32::MAX;

/// Default number of bins (`WMHCCT_BINS`).
pub const DEFAULT_BINS: u32 = 1024;
/// Default number of ranks whose full series a job report keeps (`WMHCCT_RANK_SERIES`).
pub const DEFAULT_RANK_SERIES: u32 = 1024;
/// Default reservoir size per rank (`WMHCCT_EVENT_SAMPLES`).
pub const DEFAULT_EVENT_SAMPLES: u32 = 10_000;

/// One sampled allocation event.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Sample {
    /// Time since the series' `start_unix_ns`.
    pub t_ns: u64,
    /// Bytes requested.
    pub size: u64,
    /// Row of the context's kind node in the allocation tree (`trees[0]`),
    /// [`NO_CONTEXT`] when the context was evicted or dropped by a merge.
    pub context: u32,
}

/// The full series of one rank, on its job's time axis.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct RankSeries {
    pub rank: u32,
    /// Exact heap peak of the rank (the maximum of `live_max`).
    pub peak_bytes: u64,
    /// Per bin: the largest live heap (requested bytes) within the bin.
    pub live_max: Vec<u64>,
    /// Per bin: successful allocations (every allocating entry point).
    pub alloc_events: Vec<u64>,
    /// Per bin: bytes requested by those allocations.
    pub alloc_bytes: Vec<u64>,
    /// Per bin: MPI calls.
    pub mpi_events: Vec<u64>,
    /// Uniform sample of the rank's allocations, sorted by time.
    pub samples: Vec<Sample>,
    /// Allocations the sample was drawn from.
    pub sampled_from: u64,
}

/// Minimum, maximum and sum over ranks of one quantity, per bin.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct BinStats {
    pub min: Vec<u64>,
    pub max: Vec<u64>,
    pub sum: Vec<u64>,
}

impl BinStats {
    pub fn len(&self) -> usize {
        self.max.len()
    }

    pub fn is_empty(&self) -> bool {
        self.max.is_empty()
    }

    fn consistent(&self, n: usize) -> bool {
        self.min.len() == n && self.max.len() == n && self.sum.len() == n
    }
}

/// The series of a process or of a job.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct JobSeries {
    /// Origin of the time axis, ns since the Unix epoch.
    pub start_unix_ns: u64,
    /// Bin width, ns.
    pub bin_ns: u64,
    /// Ranks aggregated.
    pub nranks: u32,
    /// Per bin: ranks whose run covers the bin (the divisor of the means).
    pub ranks: Vec<u32>,
    /// Across ranks, per bin, of the ranks' `live_max`, `alloc_events`,
    /// `alloc_bytes` and `mpi_events`.
    pub live: BinStats,
    pub alloc_events: BinStats,
    pub alloc_bytes: BinStats,
    pub mpi_events: BinStats,
    /// `true` once ranks of different bin widths were combined: the minimum
    /// and the sum (mean) of `live` are then lower bounds; the maximum of
    /// live bytes and the sums of counts stay exact, the maxima of counts
    /// become upper bounds.
    pub approximate: bool,
    /// Full series of the kept ranks, sorted by rank.
    pub per_rank: Vec<RankSeries>,
}

impl JobSeries {
    /// Bins on the time axis.
    pub fn len(&self) -> usize {
        self.ranks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ranks.is_empty()
    }

    /// Structural checks; `contexts`: rows of the allocation tree.
    pub fn validate(&self, contexts: usize) -> Result<(), String> {
        let n = self.len();
        if n > 0 && self.bin_ns == 0 {
            return Err("series: bin width 0".into());
        }
        for (name, s) in [
            ("live", &self.live),
            ("alloc_events", &self.alloc_events),
            ("alloc_bytes", &self.alloc_bytes),
            ("mpi_events", &self.mpi_events),
        ] {
            if !s.consistent(n) {
                return Err(format!("series: {name} does not have {n} bins"));
            }
        }
        for r in &self.per_rank {
            if r.live_max.len() != n
                || r.alloc_events.len() != n
                || r.alloc_bytes.len() != n
                || r.mpi_events.len() != n
            {
                return Err(format!("series: rank {} does not have {n} bins", r.rank));
            }
            if let Some(s) = r
                .samples
                .iter()
                .find(|s| s.context != NO_CONTEXT && s.context as usize >= contexts)
            {
                return Err(format!(
                    "series: rank {} samples context {} of {contexts}",
                    r.rank, s.context
                ));
            }
        }
        Ok(())
    }
}
