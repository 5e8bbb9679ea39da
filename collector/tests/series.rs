//! Time series through the Collector API and the job merge: exact peaks and
//! counts, sample contexts naming the right tree rows (also after a merge
//! and under eviction), bounded reports at 10^4 ranks.

mod common;

use common::{context, paths, resolve, snapshot, Rng};
use wmhcct_collector::job::{as_job_part, finish, merge};
use wmhcct_collector::job_series::{self, Limits};
use wmhcct_collector::{Collector, CollectorConfig, Cursor, SeriesConfig};
use wmhcct_format::{FrameKey, JobSeries, Profile, RankSeries, NO_CONTEXT};

const MIB: u64 = 1 << 20;

fn collector(epsilon: f64, exact: bool, bins: usize, samples: usize) -> Collector {
    Collector::with_series(
        CollectorConfig {
            phi: 0.01,
            epsilon,
            exact,
            n_kinds: 12,
        },
        SeriesConfig {
            bins,
            event_samples: samples,
        },
    )
}

/// Rank `r`'s program: small allocations every ms for 1 s, (r+1) MiB held
/// from 300 ms to 600 ms, 10 MPI calls.
fn rank_program(r: u64) -> Collector {
    let mut c = collector(0.0, true, 64, 100);
    let mut cur = Cursor::new();
    let mut ptr = 0x1000u64;
    for ms in 0..1000u64 {
        let t = ms * 1_000_000;
        ptr += 64;
        c.on_alloc(&mut cur, 0, &[0x10, 0x20], 0, ptr, 100, t);
        c.on_free(3, ptr, t + 10, false);
        if ms == 300 {
            c.on_alloc(
                &mut cur,
                0,
                &[0x30, 0x20],
                0,
                0xdead_0000,
                (r + 1) * MIB,
                t + 1,
            );
        }
        if ms == 600 {
            c.on_free(3, 0xdead_0000, t + 1, false);
        }
        if ms % 100 == 0 {
            c.record_mpi_event(t + 2);
        }
    }
    c
}

fn profile_of(c: &Collector, start_unix_ns: u64, nranks: u32) -> Profile {
    let mut p = Profile::default();
    p.trees.push(snapshot(c));
    p.heap = c.heap_stats();
    p.meta.start_unix_ns = start_unix_ns;
    p.meta.nranks = Some(nranks);
    p.config.bins = 64;
    p.series = c.series_snapshot(1_000_000_000, start_unix_ns);
    p.validate().unwrap();
    p
}

#[test]
fn process_series_is_exact() {
    let c = rank_program(1);
    let s = c.series_snapshot(1_000_000_000, 5_000).unwrap();
    assert!(s.len() <= 64);
    let r = &s.per_rank[0];
    assert_eq!(r.peak_bytes, c.heap_stats().peak_bytes);
    assert_eq!(*r.live_max.iter().max().unwrap(), 2 * MIB + 100);
    assert_eq!(r.alloc_events.iter().sum::<u64>(), 1001);
    assert_eq!(r.alloc_bytes.iter().sum::<u64>(), 1000 * 100 + 2 * MIB);
    assert_eq!(r.mpi_events.iter().sum::<u64>(), 10);
    // The peak's bin covers 300 ms.
    let peak_bin = r.live_max.iter().position(|&v| v == 2 * MIB + 100).unwrap() as u64;
    assert!(peak_bin * s.bin_ns <= 300_000_001 && 300_000_001 < (peak_bin + 1) * s.bin_ns);
    // Held until 600 ms: later bins are back to small.
    let after = (700_000_000 / s.bin_ns) as usize;
    assert!(r.live_max[after] < MIB);
    // Statistics of one rank are its series.
    assert_eq!(s.live.max, r.live_max);
    assert_eq!(s.live.min, r.live_max);
    assert_eq!(s.nranks, 1);
    assert_eq!(s.start_unix_ns, 5_000);
}

#[test]
fn samples_name_their_context_row() {
    let c = rank_program(0);
    let tree = snapshot(&c);
    let s = c.series_snapshot(1_000_000_000, 0).unwrap();
    let r = &s.per_rank[0];
    assert_eq!(r.samples.len(), 100);
    assert_eq!(r.sampled_from, 1001);
    let p = paths(&tree);
    let small = context(&[0x10, 0x20], 0);
    let big = context(&[0x30, 0x20], 0);
    for x in &r.samples {
        let path = &p[x.context as usize];
        if x.size == 100 {
            assert_eq!(path, &small);
        } else {
            assert_eq!(path, &big);
        }
    }
    assert!(r.samples.windows(2).all(|w| w[0].t_ns <= w[1].t_ns));
}

#[test]
fn evicted_contexts_become_no_context() {
    // Capacity 2: most of 50 distinct contexts are evicted.
    let mut c = collector(0.5, false, 16, 1000);
    let mut cur = Cursor::new();
    for i in 0..50u64 {
        c.on_alloc(&mut cur, 0, &[0x100 + i], 0, 0x1000 + i * 16, 8, i);
    }
    let tree = snapshot(&c);
    let s = c.series_snapshot(100, 0).unwrap();
    let samples = &s.per_rank[0].samples;
    assert_eq!(samples.len(), 50);
    let named = samples.iter().filter(|x| x.context != NO_CONTEXT).count();
    assert!((1..50).contains(&named), "{named}");
    let p = paths(&tree);
    for x in samples.iter().filter(|x| x.context != NO_CONTEXT) {
        let path = &p[x.context as usize];
        assert_eq!(path[0], FrameKey::Unknown(0x100 + x.t_ns));
    }
}

#[test]
fn series_off_and_tables_bounded() {
    let c = collector(0.0, true, 0, 0);
    assert!(c.series_snapshot(0, 0).is_none());
    let mut c = collector(0.01, false, 32, 10);
    let mut cur = Cursor::new();
    let before = c.memory_bytes();
    let mut rng = Rng(7);
    for i in 0..200_000u64 {
        let f = rng.below(5);
        c.on_alloc(&mut cur, 0, &[f], 0, 0x1000 + (i % 64) * 16, 1, i * 1000);
        c.release(0x1000 + (i % 64) * 16, i * 1000 + 1);
    }
    let s = c.series_snapshot(200_000_000, 0).unwrap();
    assert!(s.len() <= 32);
    assert_eq!(s.per_rank[0].samples.len(), 10);
    assert_eq!(s.per_rank[0].alloc_events.iter().sum::<u64>(), 200_000);
    // Only the reservoir's one allocation and the tree/pointer tables grew.
    assert!(
        c.memory_bytes() < before + 64 * 1024,
        "{before} → {}",
        c.memory_bytes()
    );
}

#[test]
fn job_of_four_ranks() {
    let n = 4u32;
    // Ranks start 0–3 ms apart.
    let parts: Vec<Profile> = (0..n)
        .map(|r| {
            let c = rank_program(r as u64);
            as_job_part(
                profile_of(&c, 1_000_000_000_000 + r as u64 * 1_000_000, n),
                r,
            )
        })
        .collect();
    let mut it = parts.into_iter();
    let mut job = it.next().unwrap();
    for p in it {
        job = merge(job, p, 0);
    }
    finish(&mut job, n);
    job.validate().unwrap();
    let s = job.series.as_ref().unwrap();
    assert_eq!(s.nranks, 4);
    assert_eq!(s.per_rank.len(), 4);
    assert!(s.len() <= 64);
    for (r, rs) in s.per_rank.iter().enumerate() {
        assert_eq!(rs.rank, r as u32);
        assert_eq!(
            *rs.live_max.iter().max().unwrap(),
            (r as u64 + 1) * MIB + 100
        );
        assert_eq!(rs.alloc_events.iter().sum::<u64>(), 1001);
        assert_eq!(rs.samples.len(), 100);
    }
    // Max across ranks: rank 3's 4 MiB; min: rank 0's 1 MiB, in the middle.
    assert_eq!(*s.live.max.iter().max().unwrap(), 4 * MIB + 100);
    let mid = (450_000_000 / s.bin_ns) as usize;
    assert_eq!(s.live.min[mid], MIB + 100);
    assert_eq!(s.live.sum[mid], 10 * MIB + 400);
    assert_eq!(s.ranks[mid], 4);
    assert_eq!(s.alloc_events.sum.iter().sum::<u64>(), 4 * 1001);
    assert_eq!(s.mpi_events.sum.iter().sum::<u64>(), 40);
    // Samples map to the merged tree: the big context's path.
    let p = paths(&job.trees[0]);
    for rs in &s.per_rank {
        for x in rs.samples.iter().filter(|x| x.size > 100) {
            assert_eq!(p[x.context as usize], context(&[0x30, 0x20], 0));
        }
    }
}

fn synthetic_rank(rank: u32, nranks: u32, bins: usize) -> Profile {
    // Peak (rank % 997 + 1) KiB at bin rank % bins; events: rank % 5 + 1 per bin.
    let peak = (rank as u64 % 997 + 1) * 1024;
    let mut rs = RankSeries {
        rank: 0,
        peak_bytes: peak,
        live_max: vec![10; bins],
        alloc_events: vec![rank as u64 % 5 + 1; bins],
        alloc_bytes: vec![7; bins],
        mpi_events: vec![1; bins],
        samples: Vec::new(),
        sampled_from: 0,
    };
    rs.live_max[rank as usize % bins] = peak;
    rs.samples = (0..50)
        .map(|i| wmhcct_format::Sample {
            t_ns: i * 1000,
            size: 8,
            context: NO_CONTEXT,
        })
        .collect();
    let base = JobSeries {
        start_unix_ns: 0,
        bin_ns: 100_000,
        nranks: 1,
        ranks: vec![1; bins],
        per_rank: vec![rs.clone()],
        ..JobSeries::default()
    };
    let stats = |v: &Vec<u64>| wmhcct_format::BinStats {
        min: v.clone(),
        max: v.clone(),
        sum: v.clone(),
    };
    let s = JobSeries {
        live: stats(&rs.live_max),
        alloc_events: stats(&rs.alloc_events),
        alloc_bytes: stats(&rs.alloc_bytes),
        mpi_events: stats(&rs.mpi_events),
        ..base
    };
    let mut p = Profile::default();
    p.meta.nranks = Some(nranks);
    p.config.bins = bins as u32;
    p.config.rank_series = 64;
    p.config.event_samples = 50;
    p.series = Some(s);
    as_job_part(p, rank)
}

/// Binomial-tree reduction, as the MPI reduction does it.
fn reduce(mut parts: Vec<Option<Profile>>) -> Profile {
    let n = parts.len();
    let mut step = 1;
    while step < n {
        let mut r = 0;
        while r + step < n {
            let b = parts[r + step].take().unwrap();
            let a = parts[r].take().unwrap();
            parts[r] = Some(merge(a, b, 0));
            r += 2 * step;
        }
        step *= 2;
    }
    parts[0].take().unwrap()
}

#[test]
fn ten_thousand_ranks_stay_bounded() {
    let n = 10_000u32;
    let bins = 32usize;
    let parts: Vec<Option<Profile>> = (0..n).map(|r| Some(synthetic_rank(r, n, bins))).collect();
    let mut job = reduce(parts);
    finish(&mut job, n);
    job.validate().unwrap();
    let s = job.series.as_ref().unwrap();
    assert_eq!(s.nranks, n);
    assert!(s.len() <= bins + 1, "{}", s.len());
    // Bounded rank series: 32 highest peaks + a stride of the rest.
    assert!(s.per_rank.len() <= 64, "{}", s.per_rank.len());
    let mut peaks: Vec<u64> = (0..n).map(|r| (r as u64 % 997 + 1) * 1024).collect();
    peaks.sort_unstable_by(|a, b| b.cmp(a));
    let kept_peaks: Vec<u64> = s.per_rank.iter().map(|r| r.peak_bytes).collect();
    for p in &peaks[..32] {
        assert!(kept_peaks.contains(p), "peak {p} dropped");
    }
    assert!(s.per_rank.windows(2).all(|w| w[0].rank < w[1].rank));
    let strided = s.per_rank.iter().filter(|r| r.rank % 313 == 0).count();
    assert!(strided >= 30, "{strided} strided ranks");
    // Samples bounded by 16 reservoirs.
    let samples: usize = s.per_rank.iter().map(|r| r.samples.len()).sum();
    assert!(samples <= 50 * 16, "{samples}");
    // Exact sums and max over every rank.
    let events: u64 = (0..n as u64).map(|r| (r % 5 + 1) * bins as u64).sum();
    assert_eq!(s.alloc_events.sum.iter().sum::<u64>(), events);
    assert_eq!(*s.live.max.iter().max().unwrap(), 997 * 1024);
    assert_eq!(s.mpi_events.sum.iter().sum::<u64>(), n as u64 * bins as u64);
    assert_eq!(*s.ranks.iter().max().unwrap(), n);
    // The same result whatever the merge order.
    let parts: Vec<Profile> = (0..n).map(|r| synthetic_rank(r, n, bins)).collect();
    let mut seq = None;
    for p in parts.into_iter().rev() {
        seq = Some(match seq {
            None => p,
            Some(acc) => merge(p, acc, 0),
        });
    }
    let seq = seq.unwrap();
    let t = seq.series.as_ref().unwrap();
    let ranks = |s: &JobSeries| s.per_rank.iter().map(|r| r.rank).collect::<Vec<_>>();
    assert_eq!(ranks(s), ranks(t));
    assert_eq!(s.live.max, t.live.max);
    assert_eq!(s.alloc_events.sum, t.alloc_events.sum);
}

#[test]
fn different_widths_merge_on_the_wider_grid() {
    let limits = Limits {
        bins: 8,
        rank_series: 8,
        samples: 100,
        nranks: Some(2),
    };
    let mk = |width: u64, vals: Vec<u64>, rank: u32| {
        let rs = RankSeries {
            rank,
            peak_bytes: *vals.iter().max().unwrap(),
            live_max: vals.clone(),
            alloc_events: vec![1; vals.len()],
            alloc_bytes: vec![1; vals.len()],
            mpi_events: vec![0; vals.len()],
            samples: Vec::new(),
            sampled_from: 0,
        };
        let st = |v: &Vec<u64>| wmhcct_format::BinStats {
            min: v.clone(),
            max: v.clone(),
            sum: v.clone(),
        };
        JobSeries {
            start_unix_ns: 0,
            bin_ns: width,
            nranks: 1,
            ranks: vec![1; vals.len()],
            live: st(&rs.live_max),
            alloc_events: st(&rs.alloc_events),
            alloc_bytes: st(&rs.alloc_bytes),
            mpi_events: st(&rs.mpi_events),
            approximate: false,
            per_rank: vec![rs],
        }
    };
    let a = job_series::as_job_part(mk(10, vec![1, 5, 2, 2, 9, 1, 1, 1], 0), 0, 8);
    let b = job_series::as_job_part(mk(20, vec![3, 3, 4, 4], 1), 1, 8);
    let m = job_series::merge(a, b, &limits);
    assert_eq!(m.bin_ns, 20);
    assert_eq!(m.live.max, vec![5, 3, 9, 4]);
    assert_eq!(m.alloc_events.sum, vec![3, 3, 3, 3]);
    assert_eq!(m.per_rank[0].live_max, vec![5, 2, 9, 1]);
    // Both single ranks were moved exactly before combining: min is exact.
    assert_eq!(m.live.min, vec![3, 2, 4, 1]);
    assert!(!m.approximate);
    // Merging a 2-rank part onto a wider grid makes min/mean bounds.
    let c = job_series::as_job_part(mk(40, vec![1, 1], 2), 2, 8);
    let m3 = job_series::merge(m, c, &limits);
    assert!(m3.approximate);
    assert_eq!(m3.live.max, vec![5, 9]);
    assert_eq!(m3.alloc_events.sum.iter().sum::<u64>(), 12 + 2);
}

#[test]
fn merge_without_series_keeps_the_other() {
    let c = rank_program(0);
    let a = as_job_part(profile_of(&c, 0, 2), 0);
    let mut b = as_job_part(profile_of(&c, 0, 2), 1);
    b.series = None;
    let m = merge(a, b, 0);
    assert_eq!(m.series.as_ref().unwrap().nranks, 1);
    let _ = resolve();
}
