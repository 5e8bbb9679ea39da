//! The run over time in the text report, for a terminal on a login node
//! where the plots are out of reach: the report's time series (`/series`)
//! folded into at most [`COLUMNS`] columns of equal width, one row each
//! for the live heap, the allocations and the MPI calls, drawn with eight
//! block heights:
//!
//! ```text
//! over time: 0.62 s in 56 columns of 11.1 ms, each column's largest value
//!   live heap     ▁▂▃▅▇████▇▇▆▆▆▆▆▆▆▆▆▆▆▆…  up to 5.7 MiB (on one rank)
//!   allocations   █▃▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁…    up to 41368 per column
//! ```
//!
//! A column holds the largest live heap of any rank within it (a job's
//! ranks are not summed: they need not peak together) and the allocations
//! and MPI calls of all ranks in it. A blank is a column with nothing (no
//! rank running, nothing live, no call); any other value gets at least the
//! lowest block. The JSON report has the same columns as `timeline`.

use std::fmt::Write as _;

use serde_json::{json, Value};
use wmhcct_format::Profile;

use crate::report_text::human_bytes;

/// Most columns of a row.
pub const COLUMNS: usize = 60;
const BLOCKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// The series folded into columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeline {
    /// Origin of the columns, ns since the Unix epoch.
    pub start_unix_ns: u64,
    /// Width of a column, ns.
    pub column_ns: u64,
    /// Per column: the largest live heap of any rank in it.
    pub live: Vec<u64>,
    /// Per column: allocations, all ranks.
    pub allocations: Vec<u64>,
    /// Per column: MPI calls, all ranks.
    pub mpi_calls: Vec<u64>,
    /// Ranks the series covers.
    pub nranks: u32,
}

/// The timeline of `p`, if it has a series with a bin that a rank ran in.
pub fn of(p: &Profile) -> Option<Timeline> {
    let s = p.series.as_ref()?;
    let used = s.ranks.iter().rposition(|&r| r > 0)? + 1;
    let per = used.div_ceil(COLUMNS);
    let fold = |v: &[u64], f: fn(u64, u64) -> u64| -> Vec<u64> {
        v[..used.min(v.len())]
            .chunks(per)
            .map(|c| c.iter().copied().fold(0, f))
            .collect()
    };
    Some(Timeline {
        start_unix_ns: s.start_unix_ns,
        column_ns: s.bin_ns.saturating_mul(per as u64),
        live: fold(&s.live.max, u64::max),
        allocations: fold(&s.alloc_events.sum, u64::saturating_add),
        mpi_calls: fold(&s.mpi_events.sum, u64::saturating_add),
        nranks: s.nranks,
    })
}

/// One row: a block per column, its height the value's share of the row's
/// largest (rounded up, so any value shows), a blank for 0.
pub fn row(values: &[u64]) -> String {
    let most = values.iter().copied().max().unwrap_or(0);
    values
        .iter()
        .map(|&v| {
            if v == 0 {
                ' '
            } else {
                let level = (v as u128 * 8).div_ceil(most as u128).clamp(1, 8);
                BLOCKS[level as usize - 1]
            }
        })
        .collect()
}

/// A duration for the header: `850 µs`, `11.1 ms`, `2.40 s`, `3.5 min`.
fn duration(ns: u64) -> String {
    let s = ns as f64 / 1e9;
    if ns < 1_000_000 {
        format!("{:.0} µs", ns as f64 / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.1} ms", ns as f64 / 1e6)
    } else if s < 120.0 {
        format!("{s:.2} s")
    } else if s < 7200.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}

/// The text block (nothing when the report has no series).
pub fn write_text(s: &mut String, p: &Profile) {
    let Some(t) = of(p) else { return };
    let cols = t.live.len();
    let _ = writeln!(
        s,
        "\nover time: {} in {cols} column{} of {}, each column's largest value",
        duration(t.column_ns.saturating_mul(cols as u64)),
        if cols == 1 { "" } else { "s" },
        duration(t.column_ns)
    );
    let on_one = if t.nranks > 1 { " (on one rank)" } else { "" };
    let most = |v: &[u64]| v.iter().copied().max().unwrap_or(0);
    let _ = writeln!(
        s,
        "  live heap     {}  up to {}{on_one}",
        row(&t.live),
        human_bytes(most(&t.live))
    );
    let _ = writeln!(
        s,
        "  allocations   {}  up to {} per column",
        row(&t.allocations),
        most(&t.allocations)
    );
    if most(&t.mpi_calls) > 0 {
        let _ = writeln!(
            s,
            "  MPI calls     {}  up to {} per column",
            row(&t.mpi_calls),
            most(&t.mpi_calls)
        );
    }
}

/// The JSON report's `timeline` (`None` without a series).
pub fn json(p: &Profile) -> Option<Value> {
    let t = of(p)?;
    Some(json!({
        "start_unix_ns": t.start_unix_ns,
        "column_ns": t.column_ns,
        "live_bytes_max": t.live,
        "alloc_events": t.allocations,
        "mpi_events": t.mpi_calls,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wmhcct_format::{BinStats, JobSeries};

    fn stats(max: Vec<u64>, sum: Vec<u64>) -> BinStats {
        BinStats {
            min: vec![0; max.len()],
            max,
            sum,
        }
    }

    /// A profile whose series has `bins` bins of 1 ms, the first `used`
    /// run by 2 ranks: live heap `i` in bin `i`, 10 allocations per bin,
    /// one MPI call in bin 0.
    fn profile(bins: usize, used: usize) -> Profile {
        let live: Vec<u64> = (0..bins as u64)
            .map(|i| if (i as usize) < used { i } else { 0 })
            .collect();
        let allocs: Vec<u64> = (0..bins).map(|i| if i < used { 10 } else { 0 }).collect();
        let mut mpi = vec![0; bins];
        mpi[0] = 1;
        Profile {
            series: Some(JobSeries {
                start_unix_ns: 5,
                bin_ns: 1_000_000,
                nranks: 2,
                ranks: (0..bins).map(|i| if i < used { 2 } else { 0 }).collect(),
                live: stats(live.clone(), live),
                alloc_events: stats(allocs.clone(), allocs),
                mpi_events: stats(mpi.clone(), mpi),
                ..JobSeries::default()
            }),
            ..Profile::default()
        }
    }

    #[test]
    fn bins_fold_into_equal_columns_up_to_the_last_bin_run() {
        // 1024 bins, 150 run: 3 bins per column, 50 columns of 3 ms.
        let t = of(&profile(1024, 150)).unwrap();
        assert_eq!(t.column_ns, 3_000_000);
        assert_eq!(t.live.len(), 50);
        assert_eq!(t.live[0], 2, "the largest of bins 0..3");
        assert_eq!(t.live[49], 149);
        assert_eq!(t.allocations, vec![30; 50], "sums");
        assert_eq!(t.mpi_calls[0], 1);
        assert_eq!(t.mpi_calls[1..].iter().sum::<u64>(), 0);
        // Fewer bins than columns: one bin each.
        let t = of(&profile(16, 7)).unwrap();
        assert_eq!((t.live.len(), t.column_ns), (7, 1_000_000));
        // No series, or nothing run: no timeline.
        assert_eq!(of(&Profile::default()), None);
        assert_eq!(of(&profile(8, 0)), None);
    }

    #[test]
    fn rows_scale_to_their_largest_value_and_keep_small_ones_visible() {
        assert_eq!(row(&[0, 1, 4, 8, 7, 1000]), " ▁▁▁▁█");
        assert_eq!(row(&[8, 7, 6, 5, 4, 3, 2, 1, 0]), "█▇▆▅▄▃▂▁ ");
        assert_eq!(row(&[0, 0]), "  ");
        assert_eq!(row(&[]), "");
        assert_eq!(row(&[u64::MAX, 1]), "█▁");
    }

    #[test]
    fn the_text_block_has_a_row_per_measure_and_json_the_same_columns() {
        let p = profile(1024, 150);
        let mut s = String::new();
        write_text(&mut s, &p);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(
            lines[1],
            "over time: 150.0 ms in 50 columns of 3.0 ms, each column's largest value"
        );
        assert!(lines[2].starts_with("  live heap     ▁"), "{s}");
        assert!(lines[2].ends_with("█  up to 149 B (on one rank)"), "{s}");
        assert!(lines[3].ends_with("  up to 30 per column"), "{s}");
        assert!(lines[4].starts_with("  MPI calls     █ "), "{s}");
        let row_of = |l: &str| l.chars().skip(16).take(50).collect::<String>();
        assert_eq!(row_of(lines[2]), row(&of(&p).unwrap().live));
        let j = json(&p).unwrap();
        assert_eq!(j["column_ns"], 3_000_000);
        assert_eq!(j["live_bytes_max"].as_array().unwrap().len(), 50);
        // Without a series: nothing.
        let mut s = String::new();
        write_text(&mut s, &Profile::default());
        assert!(s.is_empty());
        assert_eq!(json(&Profile::default()), None);
    }

    #[test]
    fn durations_read_in_their_unit() {
        assert_eq!(duration(850_000), "850 µs");
        assert_eq!(duration(11_100_000), "11.1 ms");
        assert_eq!(duration(2_400_000_000), "2.40 s");
        assert_eq!(duration(210_000_000_000), "3.5 min");
        assert_eq!(duration(9_000_000_000_000), "2.5 h");
    }
}
