//! Where a chart's legend goes so that it hides no data: the upper corner
//! under which the data reach least high, with the y axis raised just
//! enough for the legend box to sit above them there. (A legend in a fixed
//! corner hid the memory plot's peak whenever the peak came late.)

use plotters::element::MultiLineText;
use plotters::prelude::*;
use plotters::style::TextStyle;

/// What plotters adds around the labels' text: the room for the legend
/// marks (`legend_area_size`), the margin on each side, and the gap to the
/// plot's edge (`SeriesLabelPosition::layout_label_area`), in pixels.
const MARKS: f64 = 30.0;
const MARGIN: f64 = 10.0;
const GAP: f64 = 5.0;

/// The legend box of `labels` in `font`, in pixels, as plotters draws it,
/// with its gap to the plot's edge.
pub fn box_size(labels: &[String], font: &TextStyle) -> (f64, f64) {
    let mut text = MultiLineText::<_, &str>::new((0, 0), font);
    for l in labels {
        text.push_line(l.as_str());
    }
    let (w, h) = text.estimate_dimension().unwrap_or((0, 0));
    (
        w as f64 + MARKS + 2.0 * MARGIN + GAP,
        h as f64 + 2.0 * MARGIN + GAP,
    )
}

/// The corner for the legend and the top of the y axis (at least `y_max`)
/// for a plot area of `plot_px` pixels showing x in `[0, x_top]` and the
/// curve through `points` (x, y): the upper corner where the curve needs
/// the least headroom to pass below the box (`slack`: how far either side
/// of the box a point still counts, e.g. a bin's width, since the curve
/// joins the points). A box taller than half the plot stays upper right
/// without headroom: raising the axis that far would flatten the data.
pub fn place(
    points: &[(f64, f64)],
    x_top: f64,
    slack: f64,
    y_max: f64,
    plot_px: (u32, u32),
    box_px: (f64, f64),
) -> (SeriesLabelPosition, f64) {
    let (pw, ph) = (plot_px.0 as f64, plot_px.1 as f64);
    let below = 1.0 - box_px.1 / ph.max(1.0);
    if x_top.is_nan() || x_top <= 0.0 || below < 0.5 {
        return (SeriesLabelPosition::UpperRight, y_max);
    }
    let span = x_top * (box_px.0 / pw.max(1.0)).min(1.0);
    let headroom = |lo: f64, hi: f64| {
        let high = points
            .iter()
            .filter(|(x, _)| *x >= lo - slack && *x <= hi + slack)
            .map(|p| p.1)
            .fold(0.0, f64::max);
        high / below
    };
    let right = headroom(x_top - span, x_top);
    let left = headroom(0.0, span);
    let (corner, top) = if left < right {
        (SeriesLabelPosition::UpperLeft, left)
    } else {
        (SeriesLabelPosition::UpperRight, right)
    };
    (corner, top.max(y_max))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_left(p: &SeriesLabelPosition) -> bool {
        matches!(p, SeriesLabelPosition::UpperLeft)
    }

    /// A 1000×500 plot, a 200×100 box: the box spans a fifth of the x axis
    /// and leaves the lower 80 % of the height to the data.
    const PLOT: (u32, u32) = (1000, 500);
    const BOX: (f64, f64) = (200.0, 100.0);

    #[test]
    fn a_late_peak_puts_the_legend_left_above_the_data() {
        // Flat at 1, a peak of 10 at the end (the demo's checkpoint).
        let mut pts: Vec<(f64, f64)> = (0..100).map(|i| (i as f64, 1.0)).collect();
        pts[95].1 = 10.0;
        let (corner, top) = place(&pts, 100.0, 1.0, 10.0, PLOT, BOX);
        assert!(is_left(&corner));
        // The left fifth reaches 1: it must stay below 80 % of the axis,
        // which the peak already asks more than.
        assert_eq!(top, 10.0);
    }

    #[test]
    fn an_early_peak_keeps_it_right() {
        let mut pts: Vec<(f64, f64)> = (0..100).map(|i| (i as f64, 1.0)).collect();
        pts[3].1 = 10.0;
        let (corner, top) = place(&pts, 100.0, 1.0, 10.0, PLOT, BOX);
        assert!(!is_left(&corner));
        assert_eq!(top, 10.0);
    }

    #[test]
    fn data_high_under_both_corners_raise_the_axis() {
        // Highest at both ends: the box needs the axis at 10 / 0.8.
        let pts: Vec<(f64, f64)> = (0..100)
            .map(|i| (i as f64, if !(10..90).contains(&i) { 10.0 } else { 2.0 }))
            .collect();
        let (_, top) = place(&pts, 100.0, 1.0, 10.0, PLOT, BOX);
        assert!((top - 12.5).abs() < 1e-9, "{top}");
        // The lower corner of the two wins.
        let pts: Vec<(f64, f64)> = (0..100)
            .map(|i| {
                (
                    i as f64,
                    if i < 10 {
                        8.0
                    } else if i >= 90 {
                        10.0
                    } else {
                        0.0
                    },
                )
            })
            .collect();
        let (corner, top) = place(&pts, 100.0, 1.0, 10.0, PLOT, BOX);
        assert!(is_left(&corner));
        assert_eq!(top, 10.0);
    }

    #[test]
    fn points_just_beside_the_box_count() {
        // The peak at x = 79.5 lies outside the right fifth [80, 100], but
        // within one bin of it: the line to the next point passes under it.
        let mut pts: Vec<(f64, f64)> = (0..100).map(|i| (i as f64 + 0.5, 1.0)).collect();
        pts[79].1 = 10.0;
        pts[5].1 = 5.0;
        let (corner, _) = place(&pts, 100.0, 1.0, 10.0, PLOT, BOX);
        assert!(is_left(&corner));
    }

    #[test]
    fn a_box_taller_than_half_the_plot_or_no_data_changes_nothing() {
        let pts = [(1.0, 5.0)];
        let (corner, top) = place(&pts, 10.0, 1.0, 5.0, (1000, 150), BOX);
        assert!(!is_left(&corner));
        assert_eq!(top, 5.0);
        let (corner, top) = place(&[], 0.0, 1.0, 0.0, PLOT, BOX);
        assert!(!is_left(&corner));
        assert_eq!(top, 0.0);
    }
}
