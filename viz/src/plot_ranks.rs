//! Plot 4: peak heap per rank: bars for up to `MAX_BARS` ranks, a heat
//! strip (a grid of cells coloured by peak) beyond; the max rank marked.

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::plot::{font, pe, ByteUnit, Data, Plot};
use crate::plot_columns::{columns, slot, Axes};
use crate::plot_title::title;
use crate::report_text::human_bytes;

pub struct Ranks;

/// Ranks drawn as bars; more become a heat strip.
pub const MAX_BARS: usize = 64;

/// (rank, peak bytes) of every rank the report knows.
pub fn peaks(d: &Data) -> Vec<(u32, u64)> {
    let p = &d.profile;
    if !p.ranks.is_empty() {
        return p
            .ranks
            .iter()
            .map(|r| (r.rank, r.heap.peak_bytes))
            .collect();
    }
    if let Some(s) = p.series.as_ref().filter(|s| s.nranks > 1) {
        return s.per_rank.iter().map(|r| (r.rank, r.peak_bytes)).collect();
    }
    vec![(p.meta.rank.unwrap_or(0), p.heap.peak_bytes)]
}

/// The rank with the largest value (the lowest such rank on a tie).
fn largest(v: &[(u32, u64)]) -> Option<(u32, u64)> {
    v.iter()
        .copied()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
}

/// `max: rank 3, 5.7 MiB   mean 4.7 MiB   min 3.8 MiB   imbalance
/// (max/mean) 1.20` over the ranks' values; `None` without any.
fn spread_note(v: &[(u32, u64)]) -> Option<String> {
    let (rank, max) = largest(v)?;
    let min = v.iter().map(|r| r.1).min().unwrap_or(0);
    let mean = v.iter().map(|r| r.1 as f64).sum::<f64>() / v.len() as f64;
    Some(format!(
        "max: rank {rank}, {}   mean {}   min {}   imbalance (max/mean) {:.2}",
        human_bytes(max),
        human_bytes(mean.round() as u64),
        human_bytes(min),
        if mean > 0.0 { max as f64 / mean } else { 1.0 }
    ))
}

/// The ranks' resident peaks (VmHWM, heap or not) in one line under the
/// heap's, when the report has them.
fn resident_note(d: &Data) -> Option<String> {
    let p = &d.profile;
    let v: Vec<(u32, u64)> = if p.ranks.is_empty() {
        vec![(p.meta.rank.unwrap_or(0), p.resident.peak_bytes)]
    } else {
        p.ranks
            .iter()
            .map(|r| (r.rank, r.resident.peak_bytes))
            .collect()
    };
    // Ranks whose figures are not known (0) are left out.
    let v: Vec<(u32, u64)> = v.into_iter().filter(|r| r.1 > 0).collect();
    spread_note(&v).map(|n| format!("resident peak (VmHWM, all memory): {n}"))
}

/// Blue → yellow → red for t in [0, 1].
fn heat(t: f64) -> RGBColor {
    let t = t.clamp(0.0, 1.0);
    let lerp = |a: f64, b: f64, u: f64| (a + (b - a) * u).round() as u8;
    if t < 0.5 {
        let u = t * 2.0;
        RGBColor(
            lerp(49.0, 254.0, u),
            lerp(54.0, 224.0, u),
            lerp(149.0, 144.0, u),
        )
    } else {
        let u = (t - 0.5) * 2.0;
        RGBColor(
            lerp(254.0, 165.0, u),
            lerp(224.0, 0.0, u),
            lerp(144.0, 38.0, u),
        )
    }
}

impl Plot for Ranks {
    fn name(&self) -> &'static str {
        "ranks"
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>, d: &Data) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let mut v = peaks(d);
        v.sort_by_key(|r| r.0);
        let area = root
            .titled(&title(&d.profile, "Peak heap per rank"), font(22))
            .map_err(pe)?;
        let (Some((max_rank, max_peak)), Some(note)) = (largest(&v), spread_note(&v)) else {
            return Ok(());
        };
        let resident = resident_note(d);
        let (head, body) = area.split_vertically(if resident.is_some() { 52 } else { 30 });
        head.draw_text(&note, &font(15), (20, 6)).map_err(pe)?;
        if let Some(r) = resident {
            head.draw_text(&r, &font(15), (20, 28)).map_err(pe)?;
        }
        if v.len() <= MAX_BARS {
            bars(&body, &v, max_rank, max_peak)
        } else {
            strip(&body, &v, max_rank, max_peak)
        }
    }
}

fn bars<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    v: &[(u32, u64)],
    max_rank: u32,
    max_peak: u64,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let blue = RGBColor(31, 119, 180);
    let red = RGBColor(214, 39, 40);
    let unit = ByteUnit::for_max(max_peak as f64);
    let heights: Vec<(f64, RGBColor)> = v
        .iter()
        .map(|&(r, peak)| (unit.of(peak as f64), if r == max_rank { red } else { blue }))
        .collect();
    let y_desc = format!("peak heap ({})", unit.name);
    let mut chart = columns(
        area,
        &heights,
        &Axes {
            x_desc: "rank",
            y_desc: &y_desc,
            x_label: &|k| v[k].0.to_string(),
            x_labels: 32,
            y_label: None,
        },
    )?;
    if let Some(k) = v.iter().position(|r| r.0 == max_rank) {
        let text = format!("max: rank {max_rank}");
        let y = unit.of(max_peak as f64) * 1.01;
        let s = slot(v.len(), k);
        // Centred just above the bar (a text's anchor is its top left by
        // default, which put the label over the bar's top edge); over a bar
        // at either end of many, where half the label would pass the
        // picture's edge (`max: rank 6` of `max: rank 63`, the last of 64
        // ranks, often the one left the remainder of a decomposition), it
        // ends at the bar's right edge or starts at its left one instead.
        let half = chart
            .plotting_area()
            .estimate_text_size(&text, &font(13))
            .map_or(0, |(w, _)| w as i32 / 2);
        let xs = chart.plotting_area().get_pixel_range().0;
        let (x0, x1) = (xs.start, xs.end);
        let centre = chart.backend_coord(&(SegmentValue::CenterOf(s), y)).0;
        let (x, h) = if centre + half > x1 {
            (SegmentValue::Exact(s + 1), HPos::Right)
        } else if centre - half < x0 {
            (SegmentValue::Exact(s), HPos::Left)
        } else {
            (SegmentValue::CenterOf(s), HPos::Center)
        };
        chart
            .draw_series(std::iter::once(Text::new(
                text,
                (x, y),
                font(13).pos(Pos::new(h, VPos::Bottom)),
            )))
            .map_err(pe)?;
    }
    Ok(())
}

fn strip<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    v: &[(u32, u64)],
    max_rank: u32,
    max_peak: u64,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let n = v.len();
    let cols = n.min(128);
    let rows = n.div_ceil(cols);
    let min_peak = v.iter().map(|r| r.1).min().unwrap_or(0);
    let span = (max_peak - min_peak).max(1) as f64;
    let (w, h) = area.dim_in_pixel();
    // Room above the grid for the column offsets, left of it for each
    // row's first rank.
    let (left, top) = (60i32, 36i32);
    let legend_h = 60i32;
    let cw = ((w as i32 - left - 20) / cols as i32).max(1);
    let ch = ((h as i32 - top - legend_h - 20) / rows as i32).clamp(1, 80);
    for (k, &(r, peak)) in v.iter().enumerate() {
        let (x, y) = (left + (k % cols) as i32 * cw, top + (k / cols) as i32 * ch);
        let c = heat((peak - min_peak) as f64 / span);
        area.draw(&Rectangle::new([(x, y), (x + cw, y + ch)], c.filled()))
            .map_err(pe)?;
        if r == max_rank {
            area.draw(&Rectangle::new(
                [(x - 1, y - 1), (x + cw + 1, y + ch + 1)],
                BLACK.stroke_width(2),
            ))
            .map_err(pe)?;
        }
    }
    // Which cell is which rank: each row's first rank at its left, the
    // column's offset from it above the grid (the strip named the max
    // rank only: a hot cell elsewhere had to be counted out).
    let small = font(12);
    if ch >= 12 {
        for (row, first) in v.iter().step_by(cols).enumerate() {
            let y = top + row as i32 * ch + ch / 2;
            area.draw(&Text::new(
                first.0.to_string(),
                (left - 6, y),
                small.pos(Pos::new(HPos::Right, VPos::Center)),
            ))
            .map_err(pe)?;
        }
    }
    let step = match cols {
        64.. => 16,
        16.. => 8,
        _ => 4,
    };
    for c in (0..cols).step_by(step) {
        let x = left + c as i32 * cw + cw / 2;
        area.draw(&Text::new(
            format!("+{c}"),
            (x, top - 4),
            small.pos(Pos::new(HPos::Center, VPos::Bottom)),
        ))
        .map_err(pe)?;
        area.draw(&PathElement::new(vec![(x, top - 3), (x, top)], BLACK))
            .map_err(pe)?;
    }
    let grid_bottom = top + rows as i32 * ch;
    area.draw_text(
        &format!(
            "ranks in rows of {cols} (rank order): a row's first rank at its left, plus the \
             offset above; max rank {max_rank} outlined"
        ),
        &font(13),
        (left, grid_bottom + 8),
    )
    .map_err(pe)?;
    // Colour scale.
    let sy = grid_bottom + 28;
    for i in 0..200 {
        let x = left + i * 2;
        area.draw(&Rectangle::new(
            [(x, sy), (x + 2, sy + 12)],
            heat(i as f64 / 199.0).filled(),
        ))
        .map_err(pe)?;
    }
    area.draw_text(
        &format!(
            "{} … {} peak heap",
            human_bytes(min_peak),
            human_bytes(max_peak)
        ),
        &font(13),
        (left + 410, sy),
    )
    .map_err(pe)?;
    Ok(())
}
