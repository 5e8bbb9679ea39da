//! A column chart (one bar per value, labelled under the axis), shared by
//! the peak-per-rank and the allocation-sizes plots.

use anyhow::Result;
use plotters::coord::ranged1d::SegmentedCoord;
use plotters::coord::types::{RangedCoordf64, RangedCoordusize};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::plot::{font, pe, upper};

/// The chart [`columns`] draws into: bar `k` spans segment [`slot`]`(n, k)`.
pub type ColumnChart<'a, DB> =
    ChartContext<'a, DB, Cartesian2d<SegmentedCoord<RangedCoordusize>, RangedCoordf64>>;

/// The segments of an axis for `n` bars. plotters maps every value of a
/// one-value range to half the axis' length, not into the axis (a single
/// bar was drawn with a negative width, off its label), so one bar gets an
/// empty segment each side and sits in the middle.
pub fn segments(n: usize) -> SegmentedCoord<RangedCoordusize> {
    match n {
        0 | 1 => (0..2usize).into_segmented(),
        n => (0..n - 1).into_segmented(),
    }
}

/// Labels to ask plotters for, so that every bar of `n` gets its own:
/// one per segment.
pub fn label_count(n: usize) -> usize {
    if n <= 1 {
        3
    } else {
        n
    }
}

/// The bar of `n` in segment `s` of [`segments`]`(n)`, if any: [`slot`]'s
/// inverse.
pub fn bar_at(n: usize, s: usize) -> Option<usize> {
    let k = if n <= 1 { s.checked_sub(1)? } else { s };
    (k < n).then_some(k)
}

/// The segment of bar `k` of `n` on [`segments`]`(n)`.
pub fn slot(n: usize, k: usize) -> usize {
    if n <= 1 {
        k + 1
    } else {
        k
    }
}

/// What the axes say.
pub struct Axes<'f> {
    pub x_desc: &'f str,
    pub y_desc: &'f str,
    /// Label of bar `k`.
    pub x_label: &'f dyn Fn(usize) -> String,
    /// At most this many bar labels.
    pub x_labels: usize,
    /// The y axis' labels (plotters' own when `None`).
    pub y_label: Option<&'f dyn Fn(&f64) -> String>,
}

/// Bars of `(height, colour)` on `area`, from 0 up to a little above the
/// highest; returns the chart, for the caller's annotations.
pub fn columns<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    bars: &[(f64, RGBColor)],
    axes: &Axes,
) -> Result<ColumnChart<'a, DB>>
where
    DB::ErrorType: 'static,
{
    let n = bars.len().max(1);
    let top = bars.iter().map(|b| b.0).fold(0.0, f64::max);
    let mut chart = ChartBuilder::on(area)
        .margin(16)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(segments(bars.len()), 0f64..upper(top))
        .map_err(pe)?;
    let x_label = |x: &SegmentValue<usize>| match x {
        SegmentValue::CenterOf(s) | SegmentValue::Exact(s) => {
            bar_at(bars.len(), *s).map_or(String::new(), |k| (axes.x_label)(k))
        }
        _ => String::new(),
    };
    let fits = labels_that_fit(chart.plotting_area(), bars.len(), axes);
    let mut mesh = chart.configure_mesh();
    mesh.disable_x_mesh()
        .x_labels(label_count(n).min(axes.x_labels).min(fits))
        .x_label_formatter(&x_label)
        .x_desc(axes.x_desc)
        .y_desc(axes.y_desc)
        .label_style(font(13))
        .axis_desc_style(font(15));
    if let Some(y) = axes.y_label {
        mesh.y_label_formatter(y);
    }
    mesh.draw().map_err(pe)?;
    chart
        .draw_series(bars.iter().enumerate().map(|(k, &(height, colour))| {
            let s = slot(bars.len(), k);
            let mut bar = Rectangle::new(
                [
                    (SegmentValue::Exact(s), 0.0),
                    (SegmentValue::Exact(s + 1), height),
                ],
                colour.mix(0.85).filled(),
            );
            bar.set_margin(0, 0, 2, 2);
            bar
        }))
        .map_err(pe)?;
    Ok(chart)
}

/// How many bar labels fit side by side under the plotting area, each
/// with a gap: one label per bar ran them together where the labels are
/// wider than the bars (the sizes plot of a job whose blocks run from 1 B to
/// 8 MiB: `128 KiB256 KiB512 KiB`). Fewer labels make plotters label every
/// second (fifth, …) bar.
fn labels_that_fit<DB: DrawingBackend, CT: CoordTranslate>(
    area: &DrawingArea<DB, CT>,
    n: usize,
    axes: &Axes,
) -> usize {
    let style = font(13);
    let widest = (0..n)
        .filter_map(|k| area.estimate_text_size(&(axes.x_label)(k), &style).ok())
        .map(|(w, _)| w)
        .max()
        .unwrap_or(0);
    let width = area.dim_in_pixel().0;
    (width / (widest + 12)).max(1) as usize
}

#[cfg(test)]
mod tests {
    use super::{bar_at, slot};

    #[test]
    fn a_bars_segment_and_back() {
        for n in 1..5 {
            for k in 0..n {
                assert_eq!(bar_at(n, slot(n, k)), Some(k), "{n} {k}");
            }
        }
        // One bar: empty segments each side of it.
        assert_eq!((bar_at(1, 0), bar_at(1, 2)), (None, None));
        assert_eq!(bar_at(3, 3), None);
    }
}
