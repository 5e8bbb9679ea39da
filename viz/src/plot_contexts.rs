//! Plot 3: the hottest contexts by bytes and by count, as horizontal bars
//! labelled with the innermost meaningful function and its module.

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::cli::Group;
use crate::contexts::Context;
use crate::label::distinct_labels;
use crate::plot::{font, pe, short_number, upper, ByteUnit, Data, Plot, SIZE};
use crate::plot_columns::{bar_at, label_count, segments, slot};
use crate::plot_title::title;
use crate::report_text::human_bytes;

pub struct Contexts;

/// Characters of a bar label.
const LABEL_CHARS: usize = 48;

/// Pixels per bar, at least.
const ROW_PX: u32 = 22;

/// Bars at most in each chart, whatever `--top` (which the page's text
/// report follows): 100 bars make a picture 4660 pixels tall, and labels
/// made distinct among thousands cost time and say little.
pub const MAX_BARS: usize = 100;

impl Plot for Contexts {
    fn name(&self) -> &'static str {
        "contexts"
    }

    /// Taller than the others when `--top` asks for more bars than fit.
    fn size(&self, d: &Data) -> (u32, u32) {
        let rows = d.top.min(MAX_BARS).min(d.contexts.contexts.len()) as u32;
        // Each half: its bars, the axis and its margins; and the title.
        let height = 2 * (rows * ROW_PX + 110) + 40;
        (SIZE.0, SIZE.1.max(height))
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>, d: &Data) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let noun = match d.group {
            Group::Context => "allocation contexts",
            g => crate::sites::noun(g),
        };
        let what = match &d.focus {
            Some(f) => format!("Hottest {noun} {}", f.brief()),
            None => format!("Hottest {noun}"),
        };
        let area = root
            .titled(&title(&d.profile, &what), font(22))
            .map_err(pe)?;
        let (top, bottom) = area.split_vertically(area.dim_in_pixel().1 / 2);
        let mut by_bytes: Vec<&Context> = d.contexts.contexts.iter().collect();
        by_bytes.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(b.count.cmp(&a.count)));
        by_bytes.truncate(d.top.min(MAX_BARS));
        let mut by_count: Vec<&Context> = d.contexts.contexts.iter().collect();
        by_count.sort_by(|a, b| b.count.cmp(&a.count).then(b.bytes.cmp(&a.bytes)));
        by_count.truncate(d.top.min(MAX_BARS));
        let (bytes_out, calls_out) = &d.mpi_left_out;
        let left_out = |what: String| {
            format!("; not shown: the MPI library's own, {what} inside MPI calls (--mpi-internal)")
        };
        let bytes_desc = match bytes_out.total {
            0 => String::new(),
            b => left_out(human_bytes(b)),
        };
        let calls_desc = match calls_out.total {
            0 => String::new(),
            n => left_out(format!("{} calls", short_number(n as f64))),
        };
        let unit = ByteUnit::for_max(by_bytes.first().map_or(0.0, |c| c.bytes as f64));
        bars(
            &top,
            &by_bytes,
            |c| unit.of(c.bytes as f64),
            &format!("bytes allocated ({}){bytes_desc}", unit.name),
            RGBColor(31, 119, 180),
        )?;
        bars(
            &bottom,
            &by_count,
            |c| c.count as f64,
            &format!("allocations (count){calls_desc}"),
            RGBColor(255, 127, 14),
        )?;
        Ok(())
    }
}

fn bars<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    items: &[&Context],
    value: impl Fn(&Context) -> f64,
    xdesc: &str,
    color: RGBColor,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    if items.is_empty() {
        area.draw_text("no allocation contexts in this report", &font(16), (40, 40))
            .map_err(pe)?;
        return Ok(());
    }
    let n = items.len();
    let stacks: Vec<(&[_], &str)> = items
        .iter()
        .map(|c| (c.stack.as_slice(), c.kind.as_str()))
        .collect();
    let labels = distinct_labels(&stacks, LABEL_CHARS);
    let xmax = items.iter().map(|c| value(c)).fold(0.0, f64::max);
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(400)
        .build_cartesian_2d(0f64..upper(xmax), segments(n))
        .map_err(pe)?;
    // Row 0 (the hottest) at the top.
    let row = |i: usize| slot(n, n - 1 - i);
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(label_count(n))
        .y_label_formatter(&|v| match v {
            // Row `i` is bar `n - 1 - i`.
            SegmentValue::CenterOf(s) | SegmentValue::Exact(s) => {
                bar_at(n, *s).map_or(String::new(), |b| labels[n - 1 - b].clone())
            }
            _ => String::new(),
        })
        .x_label_formatter(&|v| crate::plot::short_number(*v))
        .x_desc(xdesc)
        .label_style(font(13))
        .axis_desc_style(font(15))
        .draw()
        .map_err(pe)?;
    chart
        .draw_series(items.iter().enumerate().map(|(i, c)| {
            let y = row(i);
            let mut r = Rectangle::new(
                [
                    (0.0, SegmentValue::Exact(y)),
                    (value(c), SegmentValue::Exact(y + 1)),
                ],
                color.mix(0.8).filled(),
            );
            r.set_margin(3, 3, 0, 0);
            r
        }))
        .map_err(pe)?;
    Ok(())
}
