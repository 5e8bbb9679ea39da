//! Plot 5: the blocks allocated per power-of-two size class, as bars (the
//! text report's size table, `sizes.rs`), with the largest class named.

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use wmhcct_format::size_class_range;

use crate::plot::{font, pe, short_number, Data, Plot};
use crate::plot_columns::{columns, slot, Axes};
use crate::plot_title::title;
use crate::sizes::{label, power_of_two};

pub struct Sizes;

impl Plot for Sizes {
    fn name(&self) -> &'static str {
        "sizes"
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>, d: &Data) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let classes = &d.profile.heap.size_classes;
        let area = root
            .titled(&title(&d.profile, "Allocation sizes"), font(22))
            .map_err(pe)?;
        // From the smallest to the largest class that has blocks.
        let Some(first) = classes.iter().position(|&n| n > 0) else {
            return Ok(());
        };
        let shown = &classes[first..];
        let all: u64 = shown.iter().sum();
        let (most_k, most) = shown
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0)))
            .map_or((0, 0), |(k, &n)| (first + k, n));
        let note = format!(
            "{} blocks allocated; most in {} ({:.1}%)",
            short_number(all as f64),
            label(most_k),
            100.0 * most as f64 / all.max(1) as f64
        );
        let (head, body) = area.split_vertically(30);
        head.draw_text(&note, &font(15), (20, 6)).map_err(pe)?;
        let blue = RGBColor(31, 119, 180);
        let heights: Vec<(f64, RGBColor)> = shown.iter().map(|&n| (n as f64, blue)).collect();
        let mut chart = columns(
            &body,
            &heights,
            &Axes {
                x_desc: "requested size (each bar: from its size up to twice it)",
                y_desc: "blocks allocated",
                x_label: &|k| power_of_two(size_class_range(first + k).0 as u128),
                x_labels: 40,
                y_label: Some(&|v| short_number(*v)),
            },
        )?;
        chart
            .draw_series(
                shown
                    .iter()
                    .enumerate()
                    .filter(|(_, &c)| c > 0)
                    .map(|(k, &count)| {
                        Text::new(
                            format!("{:.1}%", 100.0 * count as f64 / all as f64),
                            (SegmentValue::CenterOf(slot(shown.len(), k)), count as f64),
                            font(12).pos(Pos::new(HPos::Center, VPos::Bottom)),
                        )
                    }),
            )
            .map_err(pe)?;
        Ok(())
    }
}
