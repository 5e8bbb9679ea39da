//! The data model of one process's (or one merged job's) profile.

use serde::{Deserialize, Serialize};

use crate::JobSeries;

/// Allocator entry points, in the order used by `Profile::totals` and by
/// `FrameKey::Kind` for allocation trees. The names are the C function names.
pub const ALLOC_KINDS: [&str; 12] = [
    "malloc",
    "calloc",
    "realloc",
    "free",
    "posix_memalign",
    "aligned_alloc",
    "memalign",
    "valloc",
    "pvalloc",
    "reallocarray",
    "MPI_Alloc_mem",
    "MPI_Free_mem",
];

/// Interposed MPI calls, in the order of the tracer's wrapper table: the kind
/// table of the MPI tree (`trees[1]`, name "mpi").
pub const MPI_KINDS: [&str; 32] = [
    "MPI_Send",
    "MPI_Recv",
    "MPI_Isend",
    "MPI_Irecv",
    "MPI_Sendrecv",
    "MPI_Ssend",
    "MPI_Bsend",
    "MPI_Rsend",
    "MPI_Wait",
    "MPI_Waitall",
    "MPI_Waitany",
    "MPI_Waitsome",
    "MPI_Test",
    "MPI_Testall",
    "MPI_Testany",
    "MPI_Testsome",
    "MPI_Barrier",
    "MPI_Bcast",
    "MPI_Reduce",
    "MPI_Allreduce",
    "MPI_Gather",
    "MPI_Gatherv",
    "MPI_Scatter",
    "MPI_Scatterv",
    "MPI_Allgather",
    "MPI_Allgatherv",
    "MPI_Alltoall",
    "MPI_Alltoallv",
    "MPI_Reduce_scatter",
    "MPI_Scan",
    "MPI_Alloc_mem",
    "MPI_Free_mem",
];

/// Kind offset of untraced pseudo-contexts (stack not captured).
pub const UNTRACED_KIND: u16 = 0x800;

/// Index of an allocator function in [`ALLOC_KINDS`].
#[repr(u16)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AllocKind {
    Malloc = 0,
    Calloc = 1,
    Realloc = 2,
    Free = 3,
    PosixMemalign = 4,
    AlignedAlloc = 5,
    Memalign = 6,
    Valloc = 7,
    Pvalloc = 8,
    Reallocarray = 9,
    MpiAllocMem = 10,
    MpiFreeMem = 11,
}

impl AllocKind {
    pub fn name(self) -> &'static str {
        ALLOC_KINDS[self as usize]
    }
}

/// Parent index of the root node.
pub const NO_PARENT: u32 = u32::MAX;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Profile {
    pub meta: Meta,
    pub config: Config,
    /// Every module (executable, shared object) seen during the run.
    pub modules: Vec<Module>,
    /// Exact totals per entry point, keyed by C function name.
    pub totals: Vec<KindTotal>,
    pub heap: HeapStats,
    pub unwind: UnwindStats,
    pub tracer: TracerStats,
    /// The process's resident memory (a job's: sums over its ranks).
    pub resident: Resident,
    /// Calling context trees; `trees[0]` is the allocation tree (`name == "alloc"`),
    /// `trees[1]`, when present, the MPI tree (`name == "mpi"`, kinds [`MPI_KINDS`]).
    pub trees: Vec<Tree>,
    /// Exact per-rank scalars of an MPI job (empty for a single process).
    pub ranks: Vec<RankSummary>,
    /// Time series (live heap, event density, samples); `None` when not recorded.
    pub series: Option<JobSeries>,
}

/// Exact scalars of one rank.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct RankSummary {
    pub rank: u32,
    pub hostname: String,
    pub pid: u32,
    /// How this rank's profile was taken ("finalize", "abort", "exit", …).
    pub reason: String,
    pub totals: Vec<KindTotal>,
    pub heap: HeapStats,
    pub unwind: UnwindStats,
    pub tracer: TracerStats,
    pub resident: Resident,
    pub threads: u32,
}

/// Spread of one counter over the ranks of a job.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Spread {
    /// Smallest value among the ranks that have the context (see `present`).
    pub min: u64,
    pub max: u64,
    pub sum: u64,
    /// The rank holding `max`.
    pub max_rank: u32,
    /// Ranks whose summary held the context; ranks without it count as 0.
    pub present: u32,
}

impl Spread {
    /// The spread of one rank's value.
    pub fn single(value: u64, rank: u32) -> Spread {
        Spread {
            min: value,
            max: value,
            sum: value,
            max_rank: rank,
            present: 1,
        }
    }

    /// Combine two disjoint sets of ranks.
    pub fn merge(self, o: Spread) -> Spread {
        if self.present == 0 {
            return o;
        }
        if o.present == 0 {
            return self;
        }
        let (max, max_rank) =
            if o.max > self.max || (o.max == self.max && o.max_rank < self.max_rank) {
                (o.max, o.max_rank)
            } else {
                (self.max, self.max_rank)
            };
        Spread {
            min: self.min.min(o.min),
            max,
            sum: self.sum + o.sum,
            max_rank,
            present: self.present + o.present,
        }
    }

    /// Minimum over `nranks` ranks: 0 when some rank lacks the context.
    pub fn min_over(&self, nranks: u32) -> u64 {
        if self.present < nranks {
            0
        } else {
            self.min
        }
    }

    pub fn mean_over(&self, nranks: u32) -> f64 {
        if nranks == 0 {
            0.0
        } else {
            self.sum as f64 / nranks as f64
        }
    }
}

/// Per-node spreads over ranks (merged job trees).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct NodeSpread {
    pub count: Spread,
    pub bytes: Spread,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Meta {
    /// Path of the traced executable.
    pub program: String,
    pub args: Vec<String>,
    pub hostname: String,
    pub pid: u32,
    /// Wall clock at tracer start and end, nanoseconds since the Unix epoch.
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    /// Number of threads that produced at least one event.
    pub threads: u32,
    /// MPI rank and size, when the process was part of an MPI job.
    pub rank: Option<u32>,
    pub nranks: Option<u32>,
    /// How the profile was produced: "exit", "_exit", "finalize", "abort",
    /// a signal's name ("sigterm", "sigsegv", …), "merge", "snapshot".
    pub reason: String,
    /// Version of the tracer that wrote the profile.
    pub tracer_version: String,
    /// The parallel launch the process was a task or rank of, as its
    /// launcher names it (`pmix:<namespace>`, `ompi:<jobid>`,
    /// `slurm:<job>.<step>`), the same in every process of that launch;
    /// empty outside a launch or where the launcher names none (MPICH's
    /// Hydra). `wmhcct merge` of a directory keeps one launch's profiles.
    pub launch: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Config {
    pub phi: f64,
    pub epsilon: f64,
    pub unwind: String,
    pub max_depth: u32,
    /// Exact CCT mode: every context kept (`WMHCCT_EXACT=1`).
    pub exact: bool,
    /// Time series bins per rank (`WMHCCT_BINS`), 0: series off.
    pub bins: u32,
    /// Ranks whose full series a job report keeps (`WMHCCT_RANK_SERIES`).
    pub rank_series: u32,
    /// Sampled allocation events per rank (`WMHCCT_EVENT_SAMPLES`).
    pub event_samples: u32,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Module {
    /// File system path as the dynamic linker reported it (the executable's resolved path).
    pub path: String,
    /// GNU build id (hex), empty when the module has none.
    pub build_id: String,
    /// Load bias: runtime address = bias + file-relative (SVMA) address.
    pub bias: u64,
    /// Runtime address range of the module's executable segments.
    pub start: u64,
    pub end: u64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct KindTotal {
    pub kind: String,
    /// Calls made by the program.
    pub count: u64,
    /// Bytes requested (for `free`: bytes released, of known pointers).
    pub bytes: u64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct HeapStats {
    /// Exact peak of live requested bytes.
    pub peak_bytes: u64,
    /// Live bytes when the profile was taken (leaks, at exit).
    pub live_bytes: u64,
    /// Live allocations when the profile was taken.
    pub live_blocks: u64,
    /// Live bytes, and live bytes at the heap peak, of contexts no longer in the tree.
    pub evicted_live_bytes: u64,
    pub evicted_peak_bytes: u64,
    /// Frees of pointers the tracer never saw allocated (allocated before tracing started).
    pub unknown_frees: u64,
    /// Time of the heap peak, nanoseconds since tracer start.
    pub peak_time_ns: u64,
    /// Temporary allocations: blocks freed by the thread that allocated
    /// them with no other allocation or free of that thread in between
    /// (heaptrack's rule, per thread; exact), and their bytes.
    pub temporary_count: u64,
    pub temporary_bytes: u64,
    /// Allocations that returned a block, by requested size class
    /// ([`size_class`]), exact; trailing empty classes left out. A job's
    /// report has the sum over its ranks (not kept per rank).
    pub size_classes: Vec<u64>,
}

/// Number of size classes: size 0, then one per bit length 1 to 64.
pub const SIZE_CLASSES: usize = 65;

/// The size class of an allocation of `size` bytes: 0 for 0 bytes, else
/// the bit length of `size`, so class `k` holds `2^(k-1) ..= 2^k - 1`.
pub fn size_class(size: u64) -> usize {
    (u64::BITS - size.leading_zeros()) as usize
}

/// The sizes of class `k` (see [`size_class`]), smallest and largest.
pub fn size_class_range(k: usize) -> (u64, u64) {
    match k {
        0 => (0, 0),
        64.. => (1 << 63, u64::MAX),
        k => (1 << (k - 1), (1 << k) - 1),
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct UnwindStats {
    pub mode: String,
    /// Events whose stack was captured.
    pub events: u64,
    /// Frames obtained by unwinding, and frames taken over from the previous stack.
    pub frames_unwound: u64,
    pub frames_reused: u64,
    /// Heuristic stacks also fully unwound for checking, and how many agreed.
    pub validated: u64,
    pub correct: u64,
    /// Full unwinds forced to reseed the heuristic.
    pub reseeds: u64,
    /// Stacks cut at `max_depth`.
    pub truncated: u64,
    /// Unwinds that stopped early on an error (missing unwind info, bad read).
    pub errors: u64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct TracerStats {
    /// Bytes held by the tracer's own data structures at the end.
    pub collector_bytes: u64,
    /// Peak number of entries in the live-pointer table.
    pub ptr_table_peak: u64,
    /// Events seen while the tracer could not record a stack (reentrancy, shutdown).
    pub untraced_events: u64,
}

/// The process's resident memory, from Linux's `/proc/self/status`, read
/// when the profile was taken (before the tracer builds it): all the
/// process held in RAM, heap or not (static arrays, stacks, the MPI
/// library's buffers and shared segments, mapped files), the tracer's own
/// memory included. 0: not known (not Linux, or a report of layout 3 or
/// older). A job's profile holds sums over its ranks; `RankSummary` keeps
/// each rank's.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Resident {
    /// Peak resident set size (`VmHWM`), bytes.
    pub peak_bytes: u64,
    /// Resident set size (`VmRSS`) when the profile was taken, bytes.
    pub end_bytes: u64,
    /// Peak of the bytes the tracer's own allocations held: the part of the
    /// peak that is at most the tracer's heap.
    pub tracer_peak_bytes: u64,
}

/// Two disjoint sets of ranks.
impl std::ops::Add for Resident {
    type Output = Resident;

    fn add(self, o: Resident) -> Resident {
        Resident {
            peak_bytes: self.peak_bytes + o.peak_bytes,
            end_bytes: self.end_bytes + o.end_bytes,
            tracer_peak_bytes: self.tracer_peak_bytes + o.tracer_peak_bytes,
        }
    }
}

impl Resident {
    /// Whether the figures were read (Linux, layout 4 or later).
    pub fn known(&self) -> bool {
        self.peak_bytes != 0
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Tree {
    /// "alloc" for the allocation tree.
    pub name: String,
    /// Stream lengths (events and bytes) that the counters refer to.
    pub total_count: u64,
    pub total_bytes: u64,
    /// Space-Saving capacity (monitored contexts per weight), 0 for exact mode.
    pub capacity: u32,
    /// Nodes in topological order: node 0 is the root, `parent < index` for the rest.
    pub nodes: Vec<Node>,
    /// Per node, the spread over ranks (a job's merged tree); empty otherwise.
    #[serde(default)]
    pub spread: Vec<NodeSpread>,
    /// Upper bounds (count, bytes) on the true value of any context the tree
    /// does not hold. `None`: as Space-Saving implies (the smallest monitored
    /// counter when all `capacity` counters are in use, else 0); set by merges.
    #[serde(default)]
    pub floor: Option<(u64, u64)>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrameKey {
    Root,
    /// Entry point that ended the context (index into the tree's kind table,
    /// [`ALLOC_KINDS`] for the allocation tree).
    Kind(u16),
    /// A return address as (module index, address relative to the module's bias).
    Addr {
        module: u32,
        offset: u64,
    },
    /// A return address outside every known module.
    Unknown(u64),
}

/// A calling-context tree node. Counters are Space-Saving estimates: the true
/// value lies in `[count - count_err, count]` (likewise for bytes).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
pub struct Node {
    pub parent: u32,
    pub key: FrameKey,
    pub count: u64,
    pub count_err: u64,
    pub bytes: u64,
    pub bytes_err: u64,
    /// Live requested bytes of this context when the profile was taken.
    pub live_bytes: u64,
    /// Live bytes of this context at the moment of the process's heap peak.
    pub peak_live_bytes: u64,
    /// Temporary allocations of this context (see
    /// [`HeapStats::temporary_count`]) while it was in the tree.
    pub temporary: u64,
    /// Bit 0: monitored for count, bit 1: monitored for bytes.
    pub flags: u8,
}

pub const MONITORED_COUNT: u8 = 1;
pub const MONITORED_BYTES: u8 = 2;

impl Node {
    pub fn root() -> Node {
        Node {
            parent: NO_PARENT,
            key: FrameKey::Root,
            count: 0,
            count_err: 0,
            bytes: 0,
            bytes_err: 0,
            live_bytes: 0,
            peak_live_bytes: 0,
            temporary: 0,
            flags: 0,
        }
    }
}

impl Profile {
    /// This process's own exact scalars as rank `rank` of a job.
    pub fn rank_summary(&self, rank: u32) -> RankSummary {
        RankSummary {
            rank,
            hostname: self.meta.hostname.clone(),
            pid: self.meta.pid,
            reason: self.meta.reason.clone(),
            totals: self.totals.clone(),
            // The size classes are kept for the whole job only.
            heap: HeapStats {
                size_classes: Vec::new(),
                ..self.heap.clone()
            },
            unwind: self.unwind.clone(),
            tracer: self.tracer.clone(),
            resident: self.resident,
            threads: self.meta.threads,
        }
    }

    /// Structural checks every reader relies on (so readers can index without panicking).
    pub fn validate(&self) -> Result<(), String> {
        for t in &self.trees {
            if !t.spread.is_empty() && t.spread.len() != t.nodes.len() {
                return Err(format!(
                    "tree {}: {} spreads for {} nodes",
                    t.name,
                    t.spread.len(),
                    t.nodes.len()
                ));
            }
            for (i, n) in t.nodes.iter().enumerate() {
                if i == 0 {
                    if n.parent != NO_PARENT || n.key != FrameKey::Root {
                        return Err(format!("tree {}: node 0 is not a root", t.name));
                    }
                } else if n.parent as usize >= i {
                    return Err(format!("tree {}: node {i} has parent {}", t.name, n.parent));
                }
                if let FrameKey::Addr { module, .. } = n.key {
                    if module as usize >= self.modules.len() {
                        return Err(format!("tree {}: node {i} names module {module}", t.name));
                    }
                }
            }
        }
        if let Some(s) = &self.series {
            let contexts = self.trees.first().map_or(0, |t| t.nodes.len());
            s.validate(contexts)?;
        }
        Ok(())
    }

    /// Exact total for an entry point, if present.
    pub fn total(&self, kind: &str) -> Option<&KindTotal> {
        self.totals.iter().find(|t| t.kind == kind)
    }
}
