//! The `/series` group of the HDF5 report: time axis in seconds, min / mean
//! / max across ranks per bin, the per-rank matrices of the kept ranks and
//! the sampled events. Documented in docs/report-layout.md.

use hdf5::{Group, H5Type};
use wmhcct_format::{BinStats, JobSeries, RankSeries, Sample};

use crate::h5layout::{
    get, get_opt, get_rows, group, h5, open_group, put, put_rows, ReportError, Result,
};

#[derive(H5Type, Clone, Copy, Debug)]
#[repr(C)]
struct SampleRow {
    rank: u32,
    t_ns: u64,
    time_s: f64,
    size: u64,
    context: u32,
}

/// The four quantities, by dataset name prefix.
fn quantities(s: &JobSeries) -> [(&'static str, &BinStats); 4] {
    [
        ("live_bytes", &s.live),
        ("alloc_events", &s.alloc_events),
        ("alloc_bytes", &s.alloc_bytes),
        ("mpi_events", &s.mpi_events),
    ]
}

fn put_matrix(g: &Group, name: &str, rows: usize, cols: usize, data: &[u64]) -> Result<()> {
    let ds = g
        .new_dataset::<u64>()
        .shape((rows, cols))
        .create(name)
        .map_err(h5(format!("creating dataset {name}")))?;
    if !data.is_empty() {
        ds.write_raw(data)
            .map_err(h5(format!("writing dataset {name}")))?;
    }
    Ok(())
}

fn get_matrix(g: &Group, name: &str, rows: usize, cols: usize) -> Result<Vec<u64>> {
    let ds = g
        .dataset(name)
        .map_err(|_| ReportError::Corrupt(format!("missing dataset series/per_rank/{name}")))?;
    let shape = ds.shape();
    if shape != [rows, cols] {
        return Err(ReportError::Corrupt(format!(
            "series/per_rank/{name}: shape {shape:?}, expected [{rows}, {cols}]"
        )));
    }
    if rows == 0 || cols == 0 {
        return Ok(Vec::new());
    }
    ds.read_raw::<u64>()
        .map_err(|e| ReportError::Corrupt(format!("series/per_rank/{name}: {e}")))
}

pub fn write(g: &Group, s: &JobSeries) -> Result<()> {
    let n = s.len();
    put(g, "start_unix_ns", &s.start_unix_ns)?;
    put(g, "bin_ns", &s.bin_ns)?;
    put(g, "bin_s", &(s.bin_ns as f64 / 1e9))?;
    put(g, "nranks", &s.nranks)?;
    put(g, "bins", &(n as u32))?;
    put(g, "approximate", &(s.approximate as u8))?;
    let time: Vec<f64> = (0..n).map(|i| i as f64 * s.bin_ns as f64 / 1e9).collect();
    put_rows(g, "time_s", &time)?;
    put_rows(g, "ranks", &s.ranks)?;
    for (name, st) in quantities(s) {
        put_rows(g, &format!("{name}_min"), &st.min)?;
        put_rows(g, &format!("{name}_max"), &st.max)?;
        put_rows(g, &format!("{name}_sum"), &st.sum)?;
        let mean: Vec<f64> = st
            .sum
            .iter()
            .zip(&s.ranks)
            .map(|(&v, &r)| if r == 0 { 0.0 } else { v as f64 / r as f64 })
            .collect();
        put_rows(g, &format!("{name}_mean"), &mean)?;
    }
    let pr = group(g, "per_rank")?;
    let k = s.per_rank.len();
    let ids: Vec<u32> = s.per_rank.iter().map(|r| r.rank).collect();
    let peaks: Vec<u64> = s.per_rank.iter().map(|r| r.peak_bytes).collect();
    let from: Vec<u64> = s.per_rank.iter().map(|r| r.sampled_from).collect();
    put_rows(&pr, "rank", &ids)?;
    put_rows(&pr, "peak_bytes", &peaks)?;
    put_rows(&pr, "sampled_from", &from)?;
    type Field = fn(&RankSeries) -> &Vec<u64>;
    let fields: [(&str, Field); 4] = [
        ("live_bytes", |r| &r.live_max),
        ("alloc_events", |r| &r.alloc_events),
        ("alloc_bytes", |r| &r.alloc_bytes),
        ("mpi_events", |r| &r.mpi_events),
    ];
    for (name, f) in fields {
        let flat: Vec<u64> = s
            .per_rank
            .iter()
            .flat_map(|r| f(r).iter().copied())
            .collect();
        put_matrix(&pr, name, k, n, &flat)?;
    }
    let samples: Vec<SampleRow> = s
        .per_rank
        .iter()
        .flat_map(|r| {
            r.samples.iter().map(move |x| SampleRow {
                rank: r.rank,
                t_ns: x.t_ns,
                time_s: x.t_ns as f64 / 1e9,
                size: x.size,
                context: x.context,
            })
        })
        .collect();
    put_rows(g, "samples", &samples)
}

pub fn read(g: &Group) -> Result<JobSeries> {
    let n: u32 = get(g, "bins")?;
    let n = n as usize;
    let vec_of = |name: &str| -> Result<Vec<u64>> {
        let v = get_rows::<u64>(g, name)?;
        if v.len() != n {
            return Err(ReportError::Corrupt(format!(
                "series/{name}: {} bins, expected {n}",
                v.len()
            )));
        }
        Ok(v)
    };
    let stats = |name: &str| -> Result<BinStats> {
        Ok(BinStats {
            min: vec_of(&format!("{name}_min"))?,
            max: vec_of(&format!("{name}_max"))?,
            sum: vec_of(&format!("{name}_sum"))?,
        })
    };
    let ranks = get_rows::<u32>(g, "ranks")?;
    if ranks.len() != n {
        return Err(ReportError::Corrupt(format!(
            "series/ranks: {} bins, expected {n}",
            ranks.len()
        )));
    }
    let pr = open_group(g, "per_rank")?;
    let ids = get_rows::<u32>(&pr, "rank")?;
    let k = ids.len();
    let peaks = get_rows::<u64>(&pr, "peak_bytes")?;
    let from = get_rows::<u64>(&pr, "sampled_from")?;
    if peaks.len() != k || from.len() != k {
        return Err(ReportError::Corrupt(
            "series/per_rank: tables of different lengths".into(),
        ));
    }
    let live = get_matrix(&pr, "live_bytes", k, n)?;
    let events = get_matrix(&pr, "alloc_events", k, n)?;
    let bytes = get_matrix(&pr, "alloc_bytes", k, n)?;
    let mpi = get_matrix(&pr, "mpi_events", k, n)?;
    let row = |m: &[u64], i: usize| m.get(i * n..(i + 1) * n).unwrap_or(&[]).to_vec();
    let mut per_rank: Vec<RankSeries> = (0..k)
        .map(|i| RankSeries {
            rank: ids[i],
            peak_bytes: peaks[i],
            live_max: row(&live, i),
            alloc_events: row(&events, i),
            alloc_bytes: row(&bytes, i),
            mpi_events: row(&mpi, i),
            samples: Vec::new(),
            sampled_from: from[i],
        })
        .collect();
    let index: std::collections::HashMap<u32, usize> =
        ids.iter().enumerate().map(|(i, &r)| (r, i)).collect();
    for x in get_rows::<SampleRow>(g, "samples")? {
        let r = index
            .get(&x.rank)
            .and_then(|&i| per_rank.get_mut(i))
            .ok_or_else(|| {
                ReportError::Corrupt(format!("series/samples: rank {} has no series", x.rank))
            })?;
        r.samples.push(Sample {
            t_ns: x.t_ns,
            size: x.size,
            context: x.context,
        });
    }
    Ok(JobSeries {
        start_unix_ns: get(g, "start_unix_ns")?,
        bin_ns: get(g, "bin_ns")?,
        nranks: get(g, "nranks")?,
        ranks,
        live: stats("live_bytes")?,
        alloc_events: stats("alloc_events")?,
        alloc_bytes: stats("alloc_bytes")?,
        mpi_events: stats("mpi_events")?,
        approximate: get_opt::<u8>(g, "approximate")?.unwrap_or(0) != 0,
        per_rank,
    })
}

#[cfg(test)]
mod tests {
    use wmhcct_format::{Profile, NO_CONTEXT};

    use super::*;
    use crate::h5layout;
    use crate::symbolize::Symbols;

    pub fn series(nranks: u32, bins: usize) -> JobSeries {
        let rank = |r: u32| RankSeries {
            rank: r * 3,
            peak_bytes: 100 + r as u64,
            live_max: (0..bins as u64).map(|i| i * (r as u64 + 1)).collect(),
            alloc_events: vec![r as u64; bins],
            alloc_bytes: vec![8; bins],
            mpi_events: vec![1; bins],
            samples: vec![
                Sample {
                    t_ns: 5,
                    size: 64,
                    context: NO_CONTEXT,
                },
                Sample {
                    t_ns: 7 + r as u64,
                    size: 1 << 20,
                    context: 0,
                },
            ],
            sampled_from: 10,
        };
        let st = |v: u64| BinStats {
            min: vec![v; bins],
            max: vec![v + 2; bins],
            sum: vec![v + 1; bins],
        };
        JobSeries {
            start_unix_ns: 1_700_000_000_000_000_000,
            bin_ns: 100_000,
            nranks,
            ranks: vec![nranks; bins],
            live: st(10),
            alloc_events: st(20),
            alloc_bytes: st(30),
            mpi_events: st(0),
            approximate: true,
            per_rank: (0..nranks).map(rank).collect(),
        }
    }

    fn roundtrip(p: &Profile) -> Profile {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.h5");
        h5layout::write(&path, p, &Symbols::default()).unwrap();
        h5layout::read_here(&path).unwrap().0
    }

    #[test]
    fn series_roundtrip() {
        let mut p = Profile::default();
        p.trees.push(wmhcct_format::Tree {
            name: "alloc".into(),
            nodes: vec![wmhcct_format::Node::root()],
            ..Default::default()
        });
        p.series = Some(series(3, 5));
        assert_eq!(roundtrip(&p), p);
    }

    #[test]
    fn empty_series_roundtrip() {
        let p = Profile {
            series: Some(JobSeries::default()),
            ..Profile::default()
        };
        assert_eq!(roundtrip(&p), p);
    }
}
