//! Plot 1: live heap over time, the min–mean–max band across ranks and the
//! ranks with the highest peaks as lines.

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::legend::{box_size, place};
use crate::plot::{font, palette, pe, upper, ByteUnit, Data, Plot};
use crate::plot_title::title;
use crate::report_text::human_bytes;

/// Ranks drawn as lines.
const TOP_RANKS: usize = 5;

pub struct Memory;

impl Plot for Memory {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>, d: &Data) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let Some(s) = &d.profile.series else {
            return Ok(());
        };
        let w = s.bin_ns as f64 / 1e9;
        let n = s.len();
        let mean = |i: usize| {
            let r = s.ranks.get(i).copied().unwrap_or(0);
            if r == 0 {
                0.0
            } else {
                s.live.sum[i] as f64 / r as f64
            }
        };
        let ymax = s.live.max.iter().copied().max().unwrap_or(0) as f64;
        let unit = ByteUnit::for_max(ymax);
        let y = |bytes: f64| unit.of(bytes);
        let covered: Vec<usize> = (0..n).filter(|&i| s.ranks[i] > 0).collect();
        let mut top: Vec<_> = s.per_rank.iter().collect();
        top.sort_by(|a, b| b.peak_bytes.cmp(&a.peak_bytes).then(a.rank.cmp(&b.rank)));
        top.truncate(if s.nranks > 1 { TOP_RANKS } else { 0 });
        let band_label = if s.approximate {
            "min–max across ranks (min approximate)"
        } else {
            "min–max across ranks"
        };
        // Once ranks of different bin widths were combined the mean, like
        // the minimum, is a lower bound (`JobSeries::approximate`).
        let mean_label = if s.nranks > 1 && s.approximate {
            "mean across ranks (approximate)"
        } else if s.nranks > 1 {
            "mean across ranks"
        } else {
            "live heap (max per bin)"
        };
        let rank_labels: Vec<String> = top
            .iter()
            .map(|r| format!("rank {} (peak {})", r.rank, human_bytes(r.peak_bytes)))
            .collect();
        // Every legend entry, in the order drawn.
        let labels: Vec<String> = (s.nranks > 1)
            .then_some(band_label)
            .into_iter()
            .chain([mean_label])
            .map(String::from)
            .chain(rank_labels.iter().cloned())
            .collect();
        let area = root
            .titled(&title(&d.profile, "Live heap over time"), font(22))
            .map_err(pe)?;
        let x_top = upper(n as f64 * w);
        let chart_on = |y_top: f64| {
            ChartBuilder::on(&area)
                .margin(16)
                .x_label_area_size(50)
                .y_label_area_size(80)
                .build_cartesian_2d(0f64..x_top, 0f64..y_top)
        };
        // The legend goes where it hides no data (`legend.rs`): the band's
        // top (or the one rank's line) is the highest thing drawn.
        let plot_px = chart_on(1.0).map_err(pe)?.plotting_area().dim_in_pixel();
        let highest = steps(covered.iter().map(|&i| (i, y(s.live.max[i] as f64))), w);
        let (corner, y_top) = place(
            &highest,
            x_top,
            w,
            y(ymax),
            plot_px,
            box_size(&labels, &font(14)),
        );
        let mut chart = chart_on(upper(y_top)).map_err(pe)?;
        chart
            .configure_mesh()
            .x_desc("time (s)")
            .y_desc(format!("live heap ({})", unit.name))
            .label_style(font(14))
            .axis_desc_style(font(16))
            .draw()
            .map_err(pe)?;
        let band_color = RGBColor(31, 119, 180);
        if s.nranks > 1 {
            let mut band = steps(covered.iter().map(|&i| (i, y(s.live.max[i] as f64))), w);
            let mut low = steps(covered.iter().map(|&i| (i, y(s.live.min[i] as f64))), w);
            low.reverse();
            band.extend(low);
            chart
                .draw_series(std::iter::once(Polygon::new(band, band_color.mix(0.25))))
                .map_err(pe)?
                .label(band_label)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 20, y + 5)], band_color.mix(0.25).filled())
                });
        }
        chart
            .draw_series(LineSeries::new(
                steps(covered.iter().map(|&i| (i, y(mean(i)))), w),
                band_color.stroke_width(2),
            ))
            .map_err(pe)?
            .label(mean_label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], band_color));
        for (k, (r, label)) in top.iter().zip(&rank_labels).enumerate() {
            let c = palette(k);
            chart
                .draw_series(LineSeries::new(
                    steps(
                        rank_span(&covered, &r.live_max)
                            .iter()
                            .map(|&i| (i, y(r.live_max[i] as f64))),
                        w,
                    ),
                    c.stroke_width(1),
                ))
                .map_err(pe)?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
        }
        chart
            .configure_series_labels()
            .position(corner)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(font(14))
            .draw()
            .map_err(pe)?;
        Ok(())
    }
}

/// Points of a line drawing each bin's value `(bin, value)` flat across
/// the bin (`w` seconds wide), as the value is the bin's maximum (or
/// minimum, or mean): a line from one bin's centre to the next drew a ramp
/// where the heap jumped, and values the heap never had between.
fn steps(bins: impl Iterator<Item = (usize, f64)>, w: f64) -> Vec<(f64, f64)> {
    bins.flat_map(|(i, v)| [(i as f64 * w, v), ((i + 1) as f64 * w, v)])
        .collect()
}

/// The bins of `covered` that one rank's run covers: from its first to its
/// last with live heap. The job's series keeps no extent per rank, and a
/// rank's series holds zeros before it started and after it ended, which
/// drawn as they are drop its line to 0 at the end of the job (the demo's
/// rank that finished first). Between, an MPI rank always has memory live:
/// the MPI library's state, from MPI_Init to the report in MPI_Finalize.
fn rank_span<'a>(covered: &'a [usize], live_max: &[u64]) -> &'a [usize] {
    let live = |i: &usize| live_max.get(*i).is_some_and(|&b| b > 0);
    match (
        covered.iter().position(live),
        covered.iter().rposition(live),
    ) {
        (Some(a), Some(b)) => &covered[a..=b],
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_bin_is_drawn_flat_across_its_width() {
        // 40 MiB held in bin 3 only: no ramp from bin 2 into it.
        let got = steps([(2, 0.0), (3, 40.0), (4, 0.0)].into_iter(), 0.5);
        assert_eq!(
            got,
            [
                (1.0, 0.0),
                (1.5, 0.0),
                (1.5, 40.0),
                (2.0, 40.0),
                (2.0, 0.0),
                (2.5, 0.0)
            ]
        );
    }

    #[test]
    fn a_ranks_line_spans_its_run_only() {
        let covered = [0, 1, 2, 3, 4, 5, 6];
        // Started in bin 1, a bin with nothing live inside its run, ended
        // after bin 4.
        let live = [0, 5, 7, 0, 3, 0, 0];
        assert_eq!(rank_span(&covered, &live), [1, 2, 3, 4]);
        assert!(rank_span(&covered, &[0; 7]).is_empty());
        // A series shorter than the job's (never on the job's grid, but
        // drawn safely).
        assert_eq!(rank_span(&covered, &[1, 1]), [0, 1]);
        assert_eq!(rank_span(&[2, 3], &[0, 0, 4, 4]), [2, 3]);
    }
}
