//! The per-process collector: an HCCT of allocation contexts, the exact heap
//! accounting and per-kind totals. Used under an external lock; the hot-path
//! methods (`on_alloc`, `on_free`, …) do no I/O, never panic and allocate
//! only through amortised growth of their tables.

use wmhcct_format::{
    FrameKey, HeapStats, JobSeries, Sample, Tree, DEFAULT_BINS, DEFAULT_EVENT_SAMPLES, NO_CONTEXT,
    UNTRACED_KIND,
};

use crate::cursor::Cursor;
use crate::hcct::{capacity_for, Hcct};
use crate::heap::Heap;
use crate::mcct::NONE;
use crate::ptr_table::{Block, NoRoom, PtrTable};
use crate::reservoir::Reservoir;
use crate::series::{Bins, BASE_BIN_NS};

/// An event [`Collector::on_repeats`] can repeat: its kind, bytes and the
/// item of its context in one tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repeatable {
    /// The tree's identity ([`Hcct::id`]).
    tree: u64,
    /// The item's handle in that tree (its record and generation).
    leaf: (u32, u32),
    pub kind: u16,
    pub bytes: u64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CollectorConfig {
    /// Hotness threshold (used by queries; kept for reference).
    pub phi: f64,
    /// Space-Saving error: ⌈1/ε⌉ monitored contexts per weight. A
    /// non-positive or non-finite ε means exact mode.
    pub epsilon: f64,
    /// Exact CCT: nothing is ever evicted.
    pub exact: bool,
    /// Number of entry-point kinds (length of `totals()`).
    pub n_kinds: usize,
}

/// Time series settings, apart from [`CollectorConfig`] so that existing
/// struct literals of it stay valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeriesConfig {
    /// Time series bins (`WMHCCT_BINS`); 0: no time series.
    pub bins: usize,
    /// Allocation events sampled (`WMHCCT_EVENT_SAMPLES`); 0: none.
    pub event_samples: usize,
}

impl Default for SeriesConfig {
    fn default() -> SeriesConfig {
        SeriesConfig {
            bins: DEFAULT_BINS as usize,
            event_samples: DEFAULT_EVENT_SAMPLES as usize,
        }
    }
}

/// A sampled allocation before its context has a row in a snapshot.
#[derive(Clone, Copy, Debug)]
struct RawSample {
    t_ns: u64,
    size: u64,
    /// The context's item handle (`Hcct::record`).
    node: u32,
    gen: u32,
}

#[derive(Debug)]
pub struct Collector {
    cfg: CollectorConfig,
    hcct: Hcct,
    heap: Heap,
    ptrs: PtrTable,
    totals: Vec<(u64, u64)>,
    untraced: u64,
    /// Allocations not in the pointer table (it could not grow: memory exhausted).
    untracked: u64,
    /// Time series; `None` when `bins == 0`.
    series: Option<Bins>,
    samples: Reservoir<RawSample>,
}

impl Collector {
    /// A collector with the default time series settings.
    pub fn new(cfg: CollectorConfig) -> Collector {
        Collector::with_series(cfg, SeriesConfig::default())
    }

    pub fn with_series(cfg: CollectorConfig, series: SeriesConfig) -> Collector {
        let capacity = if cfg.exact {
            None
        } else {
            capacity_for(cfg.epsilon)
        };
        Collector {
            cfg,
            hcct: Hcct::new(capacity),
            heap: Heap::default(),
            ptrs: PtrTable::new(),
            totals: vec![(0, 0); cfg.n_kinds],
            untraced: 0,
            untracked: 0,
            series: (series.bins > 0).then(|| Bins::new(series.bins, BASE_BIN_NS)),
            samples: Reservoir::new(series.event_samples),
        }
    }

    pub fn config(&self) -> &CollectorConfig {
        &self.cfg
    }

    pub fn hcct(&self) -> &Hcct {
        &self.hcct
    }

    /// See [`Hcct::set_prefix_reuse`].
    pub fn set_prefix_reuse(&mut self, on: bool) {
        self.hcct.set_prefix_reuse(on);
    }

    /// Count a call in totals only (e.g. `free(NULL)`, a failed allocation).
    pub fn count_call(&mut self, kind: u16, bytes: u64) {
        self.add_totals(kind, 1, bytes);
    }

    fn add_totals(&mut self, kind: u16, n: u64, bytes: u64) {
        let k = kind as usize;
        if k >= self.totals.len() {
            self.totals.resize(k + 1, (0, 0));
        }
        if let Some(t) = self.totals.get_mut(k) {
            t.0 = t.0.saturating_add(n);
            t.1 = t.1.saturating_add(bytes);
        }
    }

    /// Count `n` calls moving `bytes` in all, in totals only (calls whose
    /// context and blocks are not known).
    pub fn count_calls(&mut self, kind: u16, n: u64, bytes: u64) {
        self.add_totals(kind, n, bytes);
        self.untraced = self.untraced.saturating_add(n);
    }

    /// An allocation-type event in context `frames` (return addresses, leaf
    /// first) + `kind`. `unchanged`: root-side frames identical to this
    /// cursor's previous event (a hint, verified). `ptr == 0` (failed
    /// allocation): counted in totals only.
    #[allow(clippy::too_many_arguments)]
    pub fn on_alloc(
        &mut self,
        cur: &mut Cursor,
        kind: u16,
        frames: &[u64],
        unchanged: usize,
        ptr: u64,
        size: u64,
        t_ns: u64,
    ) {
        self.count_call(kind, size);
        if ptr == 0 {
            return;
        }
        let leaf = self
            .hcct
            .record(cur, frames, unchanged, kind as u64, size, self.heap.epoch);
        self.track(ptr, size, leaf, t_ns);
    }

    /// An allocation whose stack could not be captured: its context is the
    /// pseudo-context `root → Kind(0x800 + kind)`.
    pub fn on_alloc_untraced(&mut self, kind: u16, ptr: u64, size: u64, t_ns: u64) {
        self.count_call(kind, size);
        self.untraced = self.untraced.saturating_add(1);
        if ptr == 0 {
            return;
        }
        let key = UNTRACED_KIND as u64 + kind as u64;
        let leaf = self.hcct.record_at_root(key, size, self.heap.epoch);
        self.track(ptr, size, leaf, t_ns);
    }

    /// glibc's realloc of `old` to `size` bytes returned `new`: the release
    /// of `old` (uncounted) and an allocation of `kind`, in context
    /// `stack` (cursor, frames, unchanged) or untraced when `None`.
    /// `realloc(p, 0)` returning NULL freed `p`; any other NULL result left
    /// `old` alone and only counts the call.
    #[allow(clippy::too_many_arguments)]
    pub fn on_realloc(
        &mut self,
        kind: u16,
        old: u64,
        size: u64,
        new: u64,
        stack: Option<(&mut Cursor, &[u64], usize)>,
        t_ns: u64,
    ) {
        if new == 0 {
            if size == 0 && old != 0 {
                self.release(old, t_ns);
            }
            self.count_call(kind, 0);
            return;
        }
        if old != 0 {
            self.release(old, t_ns);
        }
        match stack {
            Some((cursor, frames, unchanged)) => {
                self.on_alloc(cursor, kind, frames, unchanged, new, size, t_ns)
            }
            None => self.on_alloc_untraced(kind, new, size, t_ns),
        }
    }

    /// A non-allocation event (an MPI call moving `bytes`) in context
    /// `frames` + `kind`: totals and tree, no heap accounting.
    #[allow(clippy::too_many_arguments)]
    pub fn on_event(
        &mut self,
        cur: &mut Cursor,
        kind: u16,
        frames: &[u64],
        unchanged: usize,
        bytes: u64,
        _t_ns: u64,
    ) -> Option<Repeatable> {
        self.count_call(kind, bytes);
        let leaf = self
            .hcct
            .record(cur, frames, unchanged, kind as u64, bytes, self.heap.epoch)?;
        Some(Repeatable {
            tree: self.hcct.id(),
            leaf,
            kind,
            bytes,
        })
    }

    /// Keeps the context of `what` in the tree (for its repeats) until
    /// [`Collector::let_go`].
    pub fn hold(&mut self, what: &Repeatable) {
        if what.tree == self.hcct.id() {
            self.hcct.hold(what.leaf);
        }
    }

    /// Ends a [`Collector::hold`] of `what`.
    pub fn let_go(&mut self, what: &Repeatable) {
        if what.tree == self.hcct.id() {
            self.hcct.let_go(what.leaf, self.heap.epoch);
        }
    }

    /// `n` more calls exactly like the event that returned `what` (same
    /// kind, bytes and context), recorded at once: the tracer folds a
    /// call repeated from one place (an `MPI_Test` polling loop) into one
    /// record. Totals count each call. Should the context have left the
    /// tree (or `what` come from another one), the calls go to the
    /// untraced context of their kind, counted all the same.
    pub fn on_repeats(&mut self, what: &Repeatable, n: u64) {
        if n == 0 {
            return;
        }
        let bytes = what.bytes.saturating_mul(n);
        self.add_totals(what.kind, n, bytes);
        let epoch = self.heap.epoch;
        let held = what.tree == self.hcct.id()
            && self
                .hcct
                .repeat(what.leaf, what.kind as u64, n, bytes, epoch);
        if !held {
            self.untraced = self.untraced.saturating_add(n);
            let key = UNTRACED_KIND as u64 + what.kind as u64;
            self.hcct.record_at_root_n(key, n, bytes, epoch);
        }
    }

    /// A non-allocation event whose stack could not be captured.
    pub fn on_event_untraced(&mut self, kind: u16, bytes: u64, _t_ns: u64) {
        self.count_call(kind, bytes);
        self.untraced = self.untraced.saturating_add(1);
        let key = UNTRACED_KIND as u64 + kind as u64;
        self.hcct.record_at_root(key, bytes, self.heap.epoch);
    }

    fn track(&mut self, ptr: u64, size: u64, leaf: Option<(u32, u32)>, t_ns: u64) {
        self.heap.sizes.add(size);
        let (node, gen) = leaf.unwrap_or((NONE, 0));
        let epoch = self.heap.epoch;
        match self.ptrs.insert(ptr, Block { size, node, gen }) {
            Ok(Some(stale)) => {
                // The address was handed out again without a free we saw.
                self.hcct
                    .discharge(stale.node, stale.gen, stale.size, epoch);
                self.heap.shrink(stale.size);
            }
            Ok(None) => {}
            Err(NoRoom) => {
                // Memory is exhausted and the table full: the block is
                // counted (totals, its context) but not live; its free
                // will be an unknown one.
                self.untracked = self.untracked.saturating_add(1);
                return;
            }
        }
        let epoch = self.heap.epoch;
        let before = self.heap.live;
        self.hcct.charge(node, gen, size, epoch);
        self.heap.grow(size, t_ns);
        if let Some(b) = &mut self.series {
            b.on_alloc(t_ns, size, before, self.heap.live);
        }
        self.samples.offer(RawSample {
            t_ns,
            size,
            node,
            gen,
        });
    }

    /// A free-type event: counted in `kind`'s totals (bytes: the block's
    /// size, when known). `temporary`: the block is the freeing thread's
    /// latest allocation, and this free the thread's first allocator call
    /// since (the caller tells); a known block is then counted in the
    /// heap's temporaries and in its context's. Returns the block's size if
    /// known.
    pub fn on_free(&mut self, kind: u16, ptr: u64, t_ns: u64, temporary: bool) -> Option<u64> {
        let block = self.release_block(ptr, t_ns);
        if let (Some(b), true) = (block, temporary) {
            self.heap.temporary_count = self.heap.temporary_count.saturating_add(1);
            self.heap.temporary_bytes = self.heap.temporary_bytes.saturating_add(b.size);
            self.hcct.note_temporary(b.node, b.gen);
        }
        let size = block.map(|b| b.size);
        self.count_call(kind, size.unwrap_or(0));
        size
    }

    /// Like `on_free`, but counts nothing in totals (the release half of realloc).
    pub fn release(&mut self, ptr: u64, t_ns: u64) -> Option<u64> {
        self.release_block(ptr, t_ns).map(|b| b.size)
    }

    fn release_block(&mut self, ptr: u64, t_ns: u64) -> Option<Block> {
        if ptr == 0 {
            return None;
        }
        match self.ptrs.remove(ptr) {
            Some(b) => {
                if let Some(s) = &mut self.series {
                    s.on_release(t_ns, self.heap.live);
                }
                self.hcct.discharge(b.node, b.gen, b.size, self.heap.epoch);
                self.heap.shrink(b.size);
                Some(b)
            }
            None => {
                self.heap.unknown_frees = self.heap.unknown_frees.saturating_add(1);
                None
            }
        }
    }

    /// An MPI call at `t_ns` (ns since tracer start), for the time series.
    pub fn record_mpi_event(&mut self, t_ns: u64) {
        self.record_mpi_events(t_ns, 1);
    }

    /// `n` MPI calls, all counted at `t_ns`.
    pub fn record_mpi_events(&mut self, t_ns: u64, n: u64) {
        if let Some(s) = &mut self.series {
            s.on_mpi(t_ns, self.heap.live, n);
        }
    }

    /// The time series so far, `None` when off (`bins == 0`). `now_ns`: the
    /// time of the snapshot since tracer start (the series is extended to
    /// it); `start_unix_ns`: the tracer start on the wall clock (the origin
    /// of the axis). Sample contexts are rows of the tree that
    /// [`Collector::snapshot_tree`] returns.
    pub fn series_snapshot(&self, now_ns: u64, start_unix_ns: u64) -> Option<JobSeries> {
        self.series.as_ref()?;
        self.series_of_rows(&self.hcct.snapshot_rows(), now_ns, start_unix_ns)
    }

    /// [`Collector::snapshot_tree`] and [`Collector::series_snapshot`]
    /// together, the tree's rows made once.
    pub fn snapshot_with_series(
        &self,
        name: &str,
        resolve: &mut dyn FnMut(u64) -> FrameKey,
        now_ns: u64,
        start_unix_ns: u64,
    ) -> (Tree, Option<JobSeries>) {
        let (tree, rows) = self.hcct.snapshot_mapped(name, resolve, self.heap.epoch);
        let series = self.series_of_rows(&rows, now_ns, start_unix_ns);
        (tree, series)
    }

    fn series_of_rows(&self, rows: &[u32], now_ns: u64, start_unix_ns: u64) -> Option<JobSeries> {
        let mut bins = self.series.clone()?;
        bins.advance(now_ns, self.heap.live);
        let mut samples: Vec<Sample> = self
            .samples
            .items()
            .iter()
            .map(|s| Sample {
                t_ns: s.t_ns,
                size: s.size,
                context: self.row_of(rows, s.node, s.gen),
            })
            .collect();
        samples.sort_by_key(|s| (s.t_ns, s.size, s.context));
        Some(crate::job_series::process_series(
            &bins,
            start_unix_ns,
            self.heap.peak,
            samples,
            self.samples.seen(),
        ))
    }

    /// The row of the context whose item handle is (`item`, `gen`).
    fn row_of(&self, rows: &[u32], item: u32, gen: u32) -> u32 {
        if item == NONE {
            return NO_CONTEXT;
        }
        self.hcct
            .item_node(item, gen)
            .and_then(|node| rows.get(node as usize).copied())
            .unwrap_or(NO_CONTEXT)
    }

    /// Forget the cursor of an exiting thread.
    pub fn release_cursor(&mut self, cur: &mut Cursor) {
        self.hcct.release_cursor(cur, self.heap.epoch);
    }

    pub fn snapshot_tree(&self, name: &str, resolve: &mut dyn FnMut(u64) -> FrameKey) -> Tree {
        self.hcct.snapshot(name, resolve, self.heap.epoch)
    }

    /// Bytes live now (requested sizes): [`HeapStats::live_bytes`], cheaply.
    #[inline]
    pub fn live_bytes(&self) -> u64 {
        self.heap.live
    }

    pub fn heap_stats(&self) -> HeapStats {
        let ev = self.hcct.evicted();
        HeapStats {
            peak_bytes: self.heap.peak,
            live_bytes: self.heap.live,
            live_blocks: self.heap.live_blocks,
            evicted_live_bytes: ev.live,
            evicted_peak_bytes: ev.at_peak(self.heap.epoch),
            unknown_frees: self.heap.unknown_frees,
            peak_time_ns: self.heap.peak_time_ns,
            temporary_count: self.heap.temporary_count,
            temporary_bytes: self.heap.temporary_bytes,
            size_classes: self.heap.sizes.used(),
        }
    }

    /// Exact per-kind (count, bytes), in kind order (at least `n_kinds` entries).
    pub fn totals(&self) -> Vec<(u64, u64)> {
        self.totals.clone()
    }

    /// Events recorded without a stack.
    pub fn untraced_events(&self) -> u64 {
        self.untraced
    }

    /// Allocations left out of the heap figures because the pointer table
    /// could not grow (the process exhausted its memory).
    pub fn untracked_blocks(&self) -> u64 {
        self.untracked
    }

    pub fn memory_bytes(&self) -> u64 {
        self.hcct.memory_bytes()
            + self.ptrs.memory_bytes()
            + (self.totals.capacity() * std::mem::size_of::<(u64, u64)>()) as u64
            + self.series.as_ref().map_or(0, Bins::memory_bytes)
            + self.samples.memory_bytes()
            + std::mem::size_of::<Collector>() as u64
    }

    pub fn ptr_table_peak(&self) -> u64 {
        self.ptrs.peak() as u64
    }

    /// Live blocks in the pointer table.
    pub fn live_blocks(&self) -> usize {
        self.ptrs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptr_table::refuse_shards_over;

    fn bounded(epsilon: f64) -> Collector {
        Collector::new(CollectorConfig {
            phi: 5.0 * epsilon,
            epsilon,
            exact: false,
            n_kinds: 40,
        })
    }

    /// A run of one call repeated from one place, recorded as its first
    /// call and then [`Collector::on_repeats`] of the rest, gives the
    /// profile recording every call gives: same totals, same tree with the
    /// same estimates and errors, in a bounded summary that evicts.
    #[test]
    fn repeats_folded_into_one_record_give_every_call_recorded() {
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let (mut each, mut folded) = (bounded(0.02), bounded(0.02));
        let (mut c1, mut c2) = (Cursor::new(), Cursor::new());
        for _ in 0..3000 {
            let site = next(120);
            let frames = [0x7000 + site, 0x6000 + site % 7, 0x5000];
            let kind = 20 + (site % 3) as u16;
            let bytes = if kind == 20 { 0 } else { 8 * (site % 5) };
            let run = 1 + next(30);
            for _ in 0..run {
                each.on_event(&mut c1, kind, &frames, 0, bytes, 0);
            }
            let what = folded.on_event(&mut c2, kind, &frames, 0, bytes, 0);
            folded.on_repeats(&what.expect("held"), run - 1);
        }
        assert_eq!(each.totals(), folded.totals());
        let (a, b) = (snapshot(&each), snapshot(&folded));
        assert_eq!(a, b);
        assert!(each.hcct.stream().0 > 30_000);
        assert_eq!(each.hcct.stream(), folded.hcct.stream());
        assert_eq!(folded.untraced_events(), 0);
    }

    /// Repeats of an event whose context is no longer in the tree (another
    /// tree's, after the report replaced the collectors) still count, in
    /// the untraced context of their kind.
    #[test]
    fn repeats_of_a_context_gone_are_counted_untraced() {
        let mut c = bounded(0.02);
        let mut cur = Cursor::new();
        let what = c.on_event(&mut cur, 21, &[0x10, 0x20], 0, 4, 0).unwrap();
        let mut other = bounded(0.02);
        other.on_repeats(&what, 7);
        assert_eq!(other.totals()[21], (7, 28));
        assert_eq!(other.untraced_events(), 7);
        let t = snapshot(&other);
        let n = t
            .nodes
            .iter()
            .find(|n| n.key == FrameKey::Kind(UNTRACED_KIND + 21))
            .expect("the untraced context");
        assert_eq!((n.count, n.bytes, n.parent), (7, 28, 0));
        // In its own tree they go to the context.
        c.on_repeats(&what, 7);
        assert_eq!(c.totals()[21], (8, 32));
        assert_eq!(c.untraced_events(), 0);
        c.on_repeats(&what, 0);
        assert_eq!(c.totals()[21], (8, 32));
    }

    /// A held context stays in the tree, through evictions, for the
    /// repeats folded into it; let go, it is pruned like any other, and its
    /// later repeats count as untraced.
    #[test]
    fn a_held_context_keeps_its_repeats() {
        let mut c = bounded(0.02);
        let mut cur = Cursor::new();
        let what = c.on_event(&mut cur, 21, &[0x10, 0x20], 0, 0, 0).unwrap();
        c.hold(&what);
        let flood = |c: &mut Collector, cur: &mut Cursor| {
            for i in 0..2000u64 {
                for _ in 0..3 {
                    c.on_event(cur, 22, &[0x9000 + i, 0x20], 0, 0, 0);
                }
            }
        };
        flood(&mut c, &mut cur);
        c.on_repeats(&what, 5);
        assert_eq!(c.untraced_events(), 0);
        let t = snapshot(&c);
        let held = t
            .nodes
            .iter()
            .filter(|n| n.key == FrameKey::Kind(21))
            .map(|n| n.count)
            .collect::<Vec<_>>();
        assert_eq!(held.len(), 1, "{held:?}");
        assert!(held[0] >= 6, "{held:?}");
        c.let_go(&what);
        flood(&mut c, &mut cur);
        c.on_repeats(&what, 5);
        assert_eq!(c.untraced_events(), 5);
        assert_eq!(c.totals()[21], (11, 0));
    }

    fn snapshot(c: &Collector) -> wmhcct_format::Tree {
        c.snapshot_tree("t", &mut wmhcct_format::FrameKey::Unknown)
    }

    /// The live-block table cannot grow (memory exhausted) and fills up:
    /// every call still counts in the totals and its context, the blocks
    /// the table refused are counted as untracked, and their frees are
    /// unknown frees; the blocks it holds are freed as usual.
    #[test]
    fn blocks_the_table_cannot_hold_are_counted_and_untracked() {
        refuse_shards_over(32);
        let mut c = Collector::new(CollectorConfig {
            phi: 0.01,
            epsilon: 0.002,
            exact: false,
            n_kinds: 12,
        });
        let mut cur = Cursor::new();
        const N: u64 = 5000;
        for i in 1..=N {
            c.on_alloc(&mut cur, 0, &[0x5000, 0x4000], 0, i * 64, 16, i);
        }
        let held = c.live_blocks() as u64;
        let untracked = c.untracked_blocks();
        assert!(
            held > 0 && untracked > 0,
            "{held} held, {untracked} untracked"
        );
        assert_eq!(held + untracked, N);
        assert_eq!(c.totals()[0], (N, 16 * N));
        assert_eq!(c.heap_stats().live_bytes, 16 * held);
        for i in 1..=N {
            c.on_free(3, i * 64, N + i, false);
        }
        refuse_shards_over(usize::MAX);
        let h = c.heap_stats();
        assert_eq!((h.live_bytes, h.live_blocks), (0, 0));
        assert_eq!(h.unknown_frees, untracked);
        assert_eq!(c.totals()[3], (N, 16 * held));
    }
}
