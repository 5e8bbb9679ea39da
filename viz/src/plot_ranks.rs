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

/// Cells under this many pixels high are not drawn: consecutive ranks
/// share a cell instead.
const MIN_CELL_H: i32 = 4;

/// The heat strip's grid: `cols` cells a row, `group` consecutive ranks (in
/// rank order) a cell.
#[derive(Debug, PartialEq)]
struct Grid {
    cols: usize,
    rows: usize,
    group: usize,
}

/// The grid for `n` ranks where `max_rows` rows of cells fit: one rank a
/// cell while that fits (up to 128 a row), else the fewest ranks a cell
/// that fit.
fn grid(n: usize, max_rows: usize) -> Grid {
    let cols = n.clamp(1, 128);
    let max_rows = max_rows.max(1);
    let group = n.div_ceil(cols * max_rows).max(1);
    let rows = n.div_ceil(group).div_ceil(cols).max(1);
    Grid { cols, rows, group }
}

/// Each cell's first rank and its ranks' largest peak, and whether it
/// holds `max_rank`.
fn cells(v: &[(u32, u64)], group: usize, max_rank: u32) -> Vec<(u32, u64, bool)> {
    v.chunks(group.max(1))
        .map(|c| {
            (
                c[0].0,
                c.iter().map(|r| r.1).max().unwrap_or(0),
                c.iter().any(|r| r.0 == max_rank),
            )
        })
        .collect()
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
    let min_peak = v.iter().map(|r| r.1).min().unwrap_or(0);
    let span = (max_peak - min_peak).max(1) as f64;
    let (w, h) = area.dim_in_pixel();
    // Room above the grid for the column offsets, left of it for each
    // row's first rank.
    let (left, top) = (60i32, 36i32);
    let legend_h = 60i32;
    let room = (h as i32 - top - legend_h - 20).max(MIN_CELL_H);
    // Beyond the ranks that fit at one a cell (16 000 here), consecutive
    // ranks share a cell coloured by their largest peak: one cell a rank
    // ran off the picture's foot beyond ~64 000 ranks.
    let Grid { cols, rows, group } = grid(v.len(), (room / MIN_CELL_H) as usize);
    let cw = ((w as i32 - left - 20) / cols as i32).max(1);
    let ch = (room / rows as i32).clamp(1, 80);
    let cells = cells(v, group, max_rank);
    let at = |k: usize| (left + (k % cols) as i32 * cw, top + (k / cols) as i32 * ch);
    for (k, &(_, peak, _)) in cells.iter().enumerate() {
        let (x, y) = at(k);
        let c = heat((peak - min_peak) as f64 / span);
        area.draw(&Rectangle::new([(x, y), (x + cw, y + ch)], c.filled()))
            .map_err(pe)?;
    }
    // The max rank's outline last: the cells after it covered its right
    // and lower edges.
    if let Some(k) = cells.iter().position(|c| c.2) {
        let (x, y) = at(k);
        area.draw(&Rectangle::new(
            [(x - 1, y - 1), (x + cw + 1, y + ch + 1)],
            BLACK.stroke_width(2),
        ))
        .map_err(pe)?;
    }
    // Which cell is which rank: each row's first rank at its left, the
    // column's offset from it above the grid (the strip named the max
    // rank only: a hot cell elsewhere had to be counted out).
    // Rows under a label's height are labelled every few rows.
    let small = font(12);
    let row_step = (14 + ch - 1) / ch;
    for (row, first) in cells.iter().step_by(cols).enumerate() {
        if row as i32 % row_step != 0 {
            continue;
        }
        let y = top + row as i32 * ch + ch / 2;
        area.draw(&Text::new(
            first.0.to_string(),
            (left - 6, y),
            small.pos(Pos::new(HPos::Right, VPos::Center)),
        ))
        .map_err(pe)?;
        if row_step > 1 {
            area.draw(&PathElement::new(vec![(left - 4, y), (left, y)], BLACK))
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
            format!("+{}", c * group),
            (x, top - 4),
            small.pos(Pos::new(HPos::Center, VPos::Bottom)),
        ))
        .map_err(pe)?;
        area.draw(&PathElement::new(vec![(x, top - 3), (x, top)], BLACK))
            .map_err(pe)?;
    }
    let grid_bottom = top + rows as i32 * ch;
    let layout = if group == 1 {
        format!("ranks in rows of {cols} (rank order)")
    } else {
        format!(
            "ranks in rows of {} (rank order), {group} ranks a cell coloured by their largest peak",
            cols * group
        )
    };
    area.draw_text(
        &format!(
            "{layout}: a row's first rank at its left, plus the offset above; max rank \
             {max_rank} outlined"
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_rank_a_cell_while_the_rows_fit() {
        assert_eq!(
            grid(200, 126),
            Grid {
                cols: 128,
                rows: 2,
                group: 1
            }
        );
        assert_eq!(
            grid(128 * 126, 126),
            Grid {
                cols: 128,
                rows: 126,
                group: 1
            }
        );
        // One more and two ranks share a cell.
        assert_eq!(
            grid(128 * 126 + 1, 126),
            Grid {
                cols: 128,
                rows: 64,
                group: 2
            }
        );
        // 10^6 ranks: 63 a cell, 125 rows.
        let g = grid(1_000_000, 126);
        assert_eq!((g.cols, g.group), (128, 63));
        assert!(g.rows <= 126 && g.rows * g.cols * g.group >= 1_000_000);
        assert!((g.rows - 1) * g.cols * g.group < 1_000_000);
    }

    #[test]
    fn a_cell_is_coloured_by_its_largest_peak_and_holds_the_max_rank() {
        let v: Vec<(u32, u64)> = (0..10u32).map(|r| (r * 2, (r as u64 * 7) % 10)).collect();
        // Peaks 0 7 4 1 8 5 2 9 6 3 of ranks 0, 2, …, 18; the max is rank 14.
        assert_eq!(
            cells(&v, 3, 14),
            vec![(0, 7, false), (6, 8, false), (12, 9, true), (18, 3, false)]
        );
        assert_eq!(cells(&v, 1, 14).len(), 10);
    }

    /// `(x, y, width, height)` of every `<rect` in an SVG.
    fn rects(svg: &str) -> Vec<[i64; 4]> {
        let num = |tag: &str, name: &str| -> i64 {
            let k = tag.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
            tag[k..k + tag[k..].find('"').unwrap()].parse().unwrap()
        };
        svg.split("<rect")
            .skip(1)
            .map(|t| {
                let t = &t[..t.find("/>").unwrap()];
                [num(t, "x"), num(t, "y"), num(t, "width"), num(t, "height")]
            })
            .collect()
    }

    /// 100 000 ranks: every cell inside the picture (one cell a rank ran
    /// off its foot beyond ~64 000), the max rank's cell outlined once.
    #[test]
    fn a_strip_of_many_ranks_stays_in_the_picture() {
        let (w, h) = (1200u32, 620u32);
        let n = 100_000u32;
        let v: Vec<(u32, u64)> = (0..n).map(|r| (r, 1000 + (r as u64 * 37) % 500)).collect();
        let mut v = v;
        v[77_777].1 = 5000;
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
            strip(&root, &v, 77_777, 5000).unwrap();
            root.present().unwrap();
        }
        std::fs::write("/tmp/strip.svg", &svg).unwrap();
        let r = rects(&svg);
        let g = grid(n as usize, ((620 - 36 - 60 - 20) / MIN_CELL_H) as usize);
        assert_eq!(g.group, 7);
        // The cells, one outline, the colour scale's 200 steps.
        assert_eq!(r.len(), (n as usize).div_ceil(7) + 1 + 200);
        for &[x, y, cw, ch] in &r {
            assert!(x >= 0 && y >= 0, "{x},{y}");
            assert!(
                x + cw <= w as i64 && y + ch <= h as i64,
                "{x},{y} {cw}x{ch}"
            );
        }
        // Each cell at least MIN_CELL_H high.
        assert!(r[0][3] >= MIN_CELL_H as i64, "{:?}", r[0]);
        assert!(
            svg.contains("rows of 896 (rank order), 7 ranks a cell"),
            "{svg:.0}"
        );
        assert!(svg.contains("max rank 77777 outlined"));
        assert!(svg.contains("\n+112\n"), "column offsets in ranks");
        // Rows of 4 pixels are labelled every 4th row: 0, 3584, ….
        assert!(svg.contains("\n0\n") && svg.contains("\n3584\n"));
        assert!(!svg.contains("\n896\n"));
        // The outline is the cell of ranks 77 777 / 7 · 7 = 77 777..77 783.
        // It is drawn after every cell, so none covers it.
        let cell = 77_777 / 7;
        let (first, outline) = (r[cell], r[r.len() - 201]);
        assert_eq!(outline[2], first[2] + 2);
        assert_eq!(
            (outline[0] + 1, outline[1] + 1),
            (first[0], first[1]),
            "{outline:?} {first:?}"
        );
    }
}
