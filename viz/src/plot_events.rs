//! Plot 2: allocation event density (events/s, all ranks) over time, and
//! the sampled events as a time × size scatter (log size).

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::legend::{box_size, place};
use crate::plot::{font, palette, pe, upper, Data, Plot, PALETTE_LEN};
use crate::plot_title::title;

pub struct Events;

impl Plot for Events {
    fn name(&self) -> &'static str {
        "events"
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>, d: &Data) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let Some(s) = &d.profile.series else {
            return Ok(());
        };
        let w = s.bin_ns.max(1) as f64 / 1e9;
        let n = s.len();
        let xmax = upper(n as f64 * w);
        let area = root
            .titled(&title(&d.profile, "Allocation event density"), font(22))
            .map_err(pe)?;
        let (top, bottom) = area.split_vertically(area.dim_in_pixel().1 / 2);

        let rate = |v: &[u64]| -> Vec<(f64, f64)> {
            (0..n)
                .map(|i| ((i as f64 + 0.5) * w, v[i] as f64 / w))
                .collect()
        };
        let allocs = rate(&s.alloc_events.sum);
        let mpi = rate(&s.mpi_events.sum);
        let has_mpi = s.mpi_events.sum.iter().any(|&v| v > 0);
        let ymax = allocs.iter().map(|p| p.1).fold(0.0, f64::max);
        let mpi_max = mpi.iter().map(|p| p.1).fold(0.0, f64::max);
        // MPI calls on an axis of their own, at the right: on the
        // allocations' axis a job's MPI calls, thousands a second against
        // the millions of allocations of MPI_Init, drew a flat line on zero.
        let (a_top, m_top) = (upper(ymax), upper(mpi_max));
        let chart_on = |f: f64| {
            ChartBuilder::on(&top)
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(90)
                .right_y_label_area_size(if has_mpi { 90 } else { 0 })
                .build_cartesian_2d(0f64..xmax, 0f64..a_top * f)
                .map(|c| c.set_secondary_coord(0f64..xmax, 0f64..m_top * f))
        };
        let labels: Vec<String> = if has_mpi {
            vec![
                "allocations/s (left axis)".into(),
                "MPI calls/s (right axis)".into(),
            ]
        } else {
            vec!["allocations/s".into()]
        };
        // The legend where it hides neither line (`legend.rs`), both
        // scaled to their own axis.
        let plot_px = chart_on(1.0).map_err(pe)?.plotting_area().dim_in_pixel();
        let scaled: Vec<(f64, f64)> = allocs
            .iter()
            .map(|&(x, y)| (x, y / a_top))
            .chain(mpi.iter().map(|&(x, y)| (x, y / m_top)))
            .collect();
        let (corner, f) = place(&scaled, xmax, w, 1.0, plot_px, box_size(&labels, &font(13)));
        let mut chart = chart_on(f).map_err(pe)?;
        chart
            .configure_mesh()
            .x_desc("time (s)")
            .y_desc(if has_mpi {
                "allocations/s (all ranks)"
            } else {
                "events/s (all ranks)"
            })
            .y_label_formatter(&|v| crate::plot::short_number(*v))
            .label_style(font(13))
            .axis_desc_style(font(15))
            .draw()
            .map_err(pe)?;
        let blue = RGBColor(31, 119, 180);
        // One pixel wide: plotters joins a wider line's segments without a
        // miter limit, and a rate that drops to zero and back between two
        // bins drew a spike from the join far below the axis, into the
        // scatter under it.
        chart
            .draw_series(LineSeries::new(allocs, blue.stroke_width(1)))
            .map_err(pe)?
            .label(labels[0].as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], blue));
        if has_mpi {
            let c = palette(2);
            chart
                .configure_secondary_axes()
                .y_desc("MPI calls/s (all ranks)")
                .y_label_formatter(&|v| crate::plot::short_number(*v))
                .label_style(font(13))
                .axis_desc_style(font(15))
                .draw()
                .map_err(pe)?;
            chart
                .draw_secondary_series(LineSeries::new(mpi, c.stroke_width(1)))
                .map_err(pe)?
                .label(labels[1].as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
        }
        chart
            .configure_series_labels()
            .position(corner)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(font(13))
            .draw()
            .map_err(pe)?;

        let points: Vec<(f64, f64, usize)> = s
            .per_rank
            .iter()
            .enumerate()
            .flat_map(|(k, r)| {
                r.samples
                    .iter()
                    .map(move |x| (x.t_ns as f64 / 1e9, x.size.max(1) as f64, k))
            })
            .collect();
        let smax = points.iter().map(|p| p.1).fold(1.0, f64::max);
        let mut chart = ChartBuilder::on(&bottom)
            .margin(12)
            .x_label_area_size(50)
            .y_label_area_size(90)
            .build_cartesian_2d(0f64..xmax, (1f64..smax * 2.0).log_scale())
            .map_err(pe)?;
        chart
            .configure_mesh()
            .x_desc("time (s)")
            .y_desc("allocation size (bytes, log)")
            .label_style(font(13))
            .axis_desc_style(font(15))
            .y_label_formatter(&|v| crate::plot::short_number(*v))
            .draw()
            .map_err(pe)?;
        chart
            .draw_series(
                points
                    .iter()
                    .map(|&(t, size, k)| Circle::new((t, size), 2, palette(k).mix(0.5).filled())),
            )
            .map_err(pe)?;
        let sampled: usize = s.per_rank.iter().map(|r| r.samples.len()).sum();
        let from: u64 = s.per_rank.iter().map(|r| r.sampled_from).sum();
        let note = format!("{sampled} sampled of {from} allocations");
        let style = font(13);
        bottom.draw_text(&note, &style, (110, 14)).map_err(pe)?;
        // Which colour is which rank, while the colours are distinct.
        if s.per_rank.len() > 1 && s.per_rank.len() <= PALETTE_LEN {
            let (w, h) = bottom.estimate_text_size(&note, &style).map_err(pe)?;
            let mut x = 110 + w as i32 + 24;
            let y = 14 + h as i32 / 2;
            for (k, r) in s.per_rank.iter().enumerate() {
                bottom
                    .draw(&Circle::new((x, y), 4, palette(k).filled()))
                    .map_err(pe)?;
                let name = format!("rank {}", r.rank);
                bottom.draw_text(&name, &style, (x + 8, 14)).map_err(pe)?;
                x += 8 + bottom.estimate_text_size(&name, &style).map_err(pe)?.0 as i32 + 16;
            }
        }
        Ok(())
    }
}
