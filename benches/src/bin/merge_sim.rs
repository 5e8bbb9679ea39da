//! The MPI merge on simulated jobs: P per-rank summaries (10^3–10^5) merged
//! through the code path of the MPI reduction (`wmhcct_collector::job::merge`
//! in binomial order), reporting the depth (rounds), the wall time of the
//! merges and the peak memory they needed.
//!
//!     merge_sim [--quick] [--ranks 1000,10000,100000] [--contexts N]
//!               [--events N] [--pool N] [--epsilon E] [--all-up-to P]
//!               [--base rank-0.wmprof,rank-1.wmprof,…]
//!
//! Per-rank summaries are realistic: each of `--pool` distinct base ranks is
//! a real `Collector` (the tracer's settings: time series of 1024 bins,
//! 10 000 sampled events, the 12 allocator and 32 MPI totals) fed a Zipf
//! stream of `--events` allocations over `--contexts` contexts of depth 30,
//! with frees; rank r is base r mod pool, made a job part of rank r (so its
//! spreads and exact per-rank scalars are its own). `--base` takes real
//! per-rank profiles instead (the spill files of a traced job whose ranks
//! could not reduce, e.g. run with `WMHCCT_MPI_LIB=/nonexistent`).
//!
//! Two ways through the same merges:
//! - `stream`: `job::BinomialMerger`, parts generated one at a time; only
//!   the ⌊log2 P⌋ + 1 partial merges of complete blocks are alive (the
//!   memory of a rank of the MPI tree, which holds its own part and one
//!   child's at a time);
//! - `all`: `job::merge_all` over every part in memory (up to `--all-up-to`
//!   ranks), the offline `wmhcct merge` path.
//!
//! Both give the same profile. Memory is the heap in use, counted by this
//! program's global allocator: "peak" is the high-water mark during the
//! merge above what was in use before it (the base pool). "summary" is the
//! size of one per-rank part and of the merged result, split into
//! calling context trees + series (bounded by the capacity, bins and kept
//! ranks) and the exact per-rank scalars (`ranks`, one entry per rank), as
//! heap bytes of a copy.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use wmhcct_benches::stream::{Order, Shape, StackStream};
use wmhcct_collector::{job, Collector, CollectorConfig, Cursor, SeriesConfig};
use wmhcct_format::{
    decode, Config, FrameKey, KindTotal, Meta, Module, Profile, TracerStats, UnwindStats,
    ALLOC_KINDS, MPI_KINDS,
};

/// System allocator that counts the bytes in use and their high-water mark.
struct Counting;

static IN_USE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; only adds counters.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: as for System.alloc.
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = IN_USE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: as for System.dealloc.
        unsafe { System.dealloc(p, l) };
        IN_USE.fetch_sub(l.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        // SAFETY: as for System.realloc.
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            if new >= l.size() {
                let now = IN_USE.fetch_add(new - l.size(), Ordering::Relaxed) + new - l.size();
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                IN_USE.fetch_sub(l.size() - new, Ordering::Relaxed);
            }
        }
        q
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn in_use() -> usize {
    IN_USE.load(Ordering::Relaxed)
}

/// Start a new high-water mark from the current use.
fn reset_peak() -> usize {
    let now = in_use();
    PEAK.store(now, Ordering::Relaxed);
    now
}

fn peak() -> usize {
    PEAK.load(Ordering::Relaxed)
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn arg_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    arg(name).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn vm_hwm_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<f64>().ok())
        })
        .map_or(0.0, |k| k / 1024.0)
}

struct Params {
    contexts: usize,
    events: u64,
    epsilon: f64,
}

/// One base rank's profile, built as the tracer builds it at MPI_Finalize.
fn base_profile(p: &Params, seed: u64) -> Profile {
    let cfg = CollectorConfig {
        phi: 5.0 * p.epsilon,
        epsilon: p.epsilon,
        exact: false,
        n_kinds: ALLOC_KINDS.len(),
    };
    let mut c = Collector::with_series(cfg, SeriesConfig::default());
    let mut mpi = Collector::with_series(
        CollectorConfig {
            n_kinds: MPI_KINDS.len(),
            ..cfg
        },
        SeriesConfig {
            bins: 0,
            event_samples: 0,
        },
    );
    let mut s = StackStream::new(Shape {
        depth: 30,
        contexts: p.contexts,
        zipf: 1.0,
        order: Order::Bursts,
        seed,
    });
    let mut frames = Vec::new();
    let (mut cur, mut mcur) = (Cursor::new(), Cursor::new());
    const LIVE: u64 = 256;
    for e in 0..p.events {
        let ev = s.next_event(&mut frames);
        let t = e * 1000;
        c.on_alloc(
            &mut cur,
            0,
            &frames,
            ev.unchanged,
            0x1000_0000 + 64 * e,
            ev.size,
            t,
        );
        if e >= LIVE {
            c.on_free(3, 0x1000_0000 + 64 * (e - LIVE), t, false);
        }
        if e % 100 == 0 {
            // An MPI call every 100 events, from one of a few contexts.
            let k = (e / 100 % 6) as u16;
            mpi.on_event(&mut mcur, k, &frames[frames.len() - 8..], 0, 8 << k, t);
            c.record_mpi_event(t);
        }
    }
    let mut resolve = |a: u64| FrameKey::Addr {
        module: (a >> 44) as u32 & 1,
        offset: a & 0xfff_ffff_ffff,
    };
    let alloc = c.snapshot_tree("alloc", &mut resolve);
    let mpi_tree = mpi.snapshot_tree("mpi", &mut resolve);
    let totals = c
        .totals()
        .into_iter()
        .zip(ALLOC_KINDS)
        .chain(mpi.totals().into_iter().zip(MPI_KINDS))
        .map(|((count, bytes), kind)| KindTotal {
            kind: kind.to_string(),
            count,
            bytes,
        })
        .collect();
    let start = 1_800_000_000_000_000_000u64;
    let end_ns = p.events * 1000;
    Profile {
        meta: Meta {
            program: "/home/user/app/bin/solver".into(),
            args: vec!["-i".into(), "input.cfg".into()],
            hostname: "node0001".into(),
            pid: 4000 + seed as u32,
            start_unix_ns: start,
            end_unix_ns: start + end_ns,
            threads: 2,
            rank: None,
            nranks: None,
            reason: "finalize".into(),
            tracer_version: "0.1.0".into(),
            launch: String::new(),
        },
        config: Config {
            phi: cfg.phi,
            epsilon: cfg.epsilon,
            unwind: "second".into(),
            max_depth: 128,
            exact: false,
            bins: 1024,
            rank_series: 1024,
            event_samples: 10_000,
        },
        modules: vec![
            Module {
                path: "/home/user/app/bin/solver".into(),
                build_id: "0123456789abcdef0123456789abcdef01234567".into(),
                ..Module::default()
            },
            Module {
                path: "/usr/lib/x86_64-linux-gnu/libc.so.6".into(),
                build_id: "fedcba9876543210fedcba9876543210fedcba98".into(),
                ..Module::default()
            },
        ],
        totals,
        heap: c.heap_stats(),
        unwind: UnwindStats {
            mode: "second".into(),
            events: p.events,
            frames_unwound: 3 * p.events,
            frames_reused: 30 * p.events,
            ..UnwindStats::default()
        },
        tracer: TracerStats {
            collector_bytes: c.memory_bytes(),
            ptr_table_peak: c.ptr_table_peak(),
            untraced_events: 0,
        },
        resident: Default::default(),
        trees: vec![alloc, mpi_tree],
        ranks: Vec::new(),
        series: c.series_snapshot(end_ns, start),
    }
}

/// Rank r's part: base r mod pool, as the reduction sees it on rank r.
fn part(pool: &[Profile], r: u32, n: u32) -> Profile {
    let mut p = pool[r as usize % pool.len()].clone();
    p.meta.pid = 10_000 + r;
    p.meta.rank = Some(r);
    p.meta.nranks = Some(n);
    job::as_job_part(p, r)
}

struct Sizes {
    trees_series: usize,
    ranks: usize,
}

/// Heap bytes of a deep copy of `x` (clones allocate exact capacities).
fn heap_bytes<T: Clone>(x: &T) -> usize {
    let before = in_use();
    let c = x.clone();
    let bytes = in_use().saturating_sub(before);
    drop(c);
    bytes
}

/// In-memory size of a part: everything but the per-rank scalars, and those.
fn sizes(p: &Profile) -> Sizes {
    let ranks = heap_bytes(&p.ranks);
    Sizes {
        trees_series: heap_bytes(p).saturating_sub(ranks),
        ranks,
    }
}

struct Row {
    ranks: u32,
    mode: &'static str,
    rounds: u32,
    merge_s: f64,
    peak_mib: f64,
    live_parts: usize,
    result: Sizes,
    contexts: usize,
}

fn contexts_of(p: &Profile) -> usize {
    p.trees
        .iter()
        .map(|t| {
            t.nodes
                .iter()
                .filter(|n| matches!(n.key, FrameKey::Kind(_)))
                .count()
        })
        .sum()
}

fn run_stream(pool: &[Profile], n: u32, cap: usize) -> Row {
    let base = reset_peak();
    let mut m = job::BinomialMerger::new(cap);
    let mut merge_s = 0.0;
    for r in 0..n {
        let p = part(pool, r, n);
        let t = Instant::now();
        m.push(p);
        merge_s += t.elapsed().as_secs_f64();
    }
    let live_parts = m.peak_live();
    let t = Instant::now();
    let (mut p, rounds) = m.finish().expect("parts");
    job::finish(&mut p, n);
    merge_s += t.elapsed().as_secs_f64();
    let peak_mib = (peak() - base) as f64 / (1 << 20) as f64;
    Row {
        ranks: n,
        mode: "stream",
        rounds,
        merge_s,
        peak_mib,
        live_parts,
        contexts: contexts_of(&p),
        result: sizes(&p),
    }
}

fn run_all(pool: &[Profile], n: u32, cap: usize) -> Row {
    let base = reset_peak();
    let parts: Vec<Profile> = (0..n).map(|r| part(pool, r, n)).collect();
    let t = Instant::now();
    let (mut p, rounds) = job::merge_all(parts, cap).expect("parts");
    job::finish(&mut p, n);
    let merge_s = t.elapsed().as_secs_f64();
    let peak_mib = (peak() - base) as f64 / (1 << 20) as f64;
    Row {
        ranks: n,
        mode: "all",
        rounds,
        merge_s,
        peak_mib,
        live_parts: n as usize,
        contexts: contexts_of(&p),
        result: sizes(&p),
    }
}

fn main() {
    let quick = wmhcct_benches::clock::quick_flag();
    let ranks: Vec<u32> = arg("--ranks")
        .unwrap_or_else(|| {
            if quick {
                "100,1000".into()
            } else {
                "1000,10000,100000".into()
            }
        })
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let params = Params {
        contexts: arg_or("--contexts", if quick { 500 } else { 2000 }),
        events: arg_or("--events", if quick { 20_000 } else { 100_000 }),
        epsilon: arg_or("--epsilon", 2e-5),
    };
    let pool_n: u64 = arg_or("--pool", if quick { 4 } else { 16 });
    let all_up_to: u32 = arg_or("--all-up-to", 1000);
    let cap = job::capacity(&Config {
        epsilon: params.epsilon,
        ..Config::default()
    });

    let t = Instant::now();
    let real: Vec<String> = arg("--base")
        .map(|s| s.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    let pool: Vec<Profile> = if real.is_empty() {
        (0..pool_n).map(|s| base_profile(&params, s + 1)).collect()
    } else {
        real.iter()
            .map(|f| {
                let bytes = std::fs::read(f).unwrap_or_else(|e| panic!("{f}: {e}"));
                let mut p = decode(&bytes).unwrap_or_else(|e| panic!("{f}: {e}"));
                assert!(p.ranks.is_empty(), "{f}: not a per-rank profile");
                p.meta.rank = None;
                p
            })
            .collect()
    };
    let cap = if real.is_empty() {
        cap
    } else {
        job::capacity(&pool[0].config)
    };
    let build_s = t.elapsed().as_secs_f64();
    let one = part(&pool, 0, 1);
    let one_sizes = sizes(&one);
    let one_contexts = contexts_of(&one);
    drop(one);

    println!(
        "### MPI merge, simulated ranks (merge_sim, {} summaries)",
        if real.is_empty() { "synthetic" } else { "real" }
    );
    println!();
    let nodes: usize = pool[0].trees.iter().map(|t| t.nodes.len()).sum();
    let source = if real.is_empty() {
        format!(
            "{} distinct synthetic base ranks (built in {:.1} s): {} contexts of depth 30 \
             (Zipf 1.0, bursts), {} allocations with frees, time series of 1024 bins and \
             10 000 samples",
            pool.len(),
            build_s,
            params.contexts,
            params.events
        )
    } else {
        format!(
            "{} real per-rank profiles (a traced MPI job's spill files)",
            pool.len()
        )
    };
    println!(
        "Per-rank summaries: {source}; rank r is base r mod {}. ε = {} (capacity {cap} per \
         weight). One summary: {one_contexts} contexts, {nodes} tree nodes, in memory {:.1} KiB \
         (trees, series, modules) + {:.2} KiB (exact per-rank scalars).",
        pool.len(),
        pool[0].config.epsilon,
        one_sizes.trees_series as f64 / 1024.0,
        one_sizes.ranks as f64 / 1024.0,
    );
    println!();
    println!(
        "| ranks | mode | rounds | merge s | µs/merge | peak heap MiB | parts alive | \
         merged contexts | merged trees + series KiB | merged per-rank scalars KiB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for &n in &ranks {
        let mut rows = vec![run_stream(&pool, n, cap)];
        if n <= all_up_to {
            rows.push(run_all(&pool, n, cap));
        }
        for r in rows {
            println!(
                "| {} | {} | {} | {:.2} | {:.0} | {:.1} | {} | {} | {:.0} | {:.0} |",
                r.ranks,
                r.mode,
                r.rounds,
                r.merge_s,
                r.merge_s * 1e6 / (r.ranks.max(2) - 1) as f64,
                r.peak_mib,
                r.live_parts,
                r.contexts,
                r.result.trees_series as f64 / 1024.0,
                r.result.ranks as f64 / 1024.0,
            );
            use std::io::Write;
            let _ = std::io::stdout().flush();
        }
    }
    println!();
    println!("process peak RSS (VmHWM): {:.0} MiB", vm_hwm_mib());
}
