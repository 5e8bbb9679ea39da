//! Plot 1: live heap over time, the min–mean–max band across ranks and the
//! ranks with the highest peaks as lines.

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::plot::{font, mib, palette, pe, upper, Data, Plot};
use crate::plot_title::title;

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
        // Each bin drawn at its centre.
        let x = |i: usize| (i as f64 + 0.5) * w;
        let mean = |i: usize| {
            let r = s.ranks.get(i).copied().unwrap_or(0);
            if r == 0 {
                0.0
            } else {
                s.live.sum[i] as f64 / r as f64
            }
        };
        let ymax = s.live.max.iter().copied().max().unwrap_or(0) as f64;
        let area = root
            .titled(&title(&d.profile, "Live heap over time"), font(22))
            .map_err(pe)?;
        let mut chart = ChartBuilder::on(&area)
            .margin(16)
            .x_label_area_size(50)
            .y_label_area_size(80)
            .build_cartesian_2d(0f64..upper(n as f64 * w), 0f64..upper(mib(ymax)))
            .map_err(pe)?;
        chart
            .configure_mesh()
            .x_desc("time (s)")
            .y_desc("live heap (MiB)")
            .label_style(font(14))
            .axis_desc_style(font(16))
            .draw()
            .map_err(pe)?;
        let covered: Vec<usize> = (0..n).filter(|&i| s.ranks[i] > 0).collect();
        let band_color = RGBColor(31, 119, 180);
        if s.nranks > 1 {
            let mut band: Vec<(f64, f64)> = covered
                .iter()
                .map(|&i| (x(i), mib(s.live.max[i] as f64)))
                .collect();
            band.extend(
                covered
                    .iter()
                    .rev()
                    .map(|&i| (x(i), mib(s.live.min[i] as f64))),
            );
            chart
                .draw_series(std::iter::once(Polygon::new(band, band_color.mix(0.25))))
                .map_err(pe)?
                .label(if s.approximate {
                    "min–max across ranks (min approximate)"
                } else {
                    "min–max across ranks"
                })
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 20, y + 5)], band_color.mix(0.25).filled())
                });
        }
        chart
            .draw_series(LineSeries::new(
                covered.iter().map(|&i| (x(i), mib(mean(i)))),
                band_color.stroke_width(2),
            ))
            .map_err(pe)?
            .label(if s.nranks > 1 {
                "mean across ranks"
            } else {
                "live heap (max per bin)"
            })
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], band_color));
        if s.nranks > 1 {
            let mut top: Vec<_> = s.per_rank.iter().collect();
            top.sort_by(|a, b| b.peak_bytes.cmp(&a.peak_bytes).then(a.rank.cmp(&b.rank)));
            for (k, r) in top.into_iter().take(TOP_RANKS).enumerate() {
                let c = palette(k);
                chart
                    .draw_series(LineSeries::new(
                        covered.iter().map(|&i| (x(i), mib(r.live_max[i] as f64))),
                        c.stroke_width(1),
                    ))
                    .map_err(pe)?
                    .label(format!(
                        "rank {} (peak {:.1} MiB)",
                        r.rank,
                        mib(r.peak_bytes as f64)
                    ))
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(font(14))
            .draw()
            .map_err(pe)?;
        Ok(())
    }
}
