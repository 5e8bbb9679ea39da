//! Plot 2: allocation event density (events/s, all ranks) over time, and
//! the sampled events as a time × size scatter (log size).

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;
use wmhcct_format::{RankSeries, Sample};

use crate::legend::{box_size, place};
use crate::plot::{font, palette, pe, upper, Data, Plot, PALETTE_LEN};
use crate::plot_title::title;

pub struct Events;

/// Points the scatter draws at most, over all ranks. Its plot area is
/// about 1090 × 270 px, and a point (a disc of radius 2) inks some 13 px:
/// 20 000 points would cover it once over, so more only pile up where
/// points already are. All of a job's sample was drawn, up to 16 ranks'
/// reservoirs (160 000 events by default, `JOB_SAMPLE_FACTOR`): 15 MB of
/// SVG on 64 ranks. 20 000 circles are 1.9 MB.
pub const MAX_POINTS: usize = 20_000;

/// Width of the colour bar that keys ranks beyond the palette, in steps of
/// 2 px.
const KEY_STEPS: i32 = 60;

/// The indices of each rank's samples (each sorted by time) that the
/// scatter draws, at most `cap` over all ranks: all of them when they fit;
/// otherwise each rank a share in proportion to its sample (at least one
/// point: cap permitting), among them its largest allocation of each
/// power-of-two size, largest first, up to half its share (a checkpoint's
/// few large buffers do not vanish among a rank's thousands of small
/// allocations); the rest evenly spaced over its time-ordered sample.
/// Deterministic: integer arithmetic, ties to the earlier rank or sample.
pub fn shown(ranks: &[&[Sample]], cap: usize) -> Vec<Vec<usize>> {
    let sizes: Vec<usize> = ranks.iter().map(|r| r.len()).collect();
    shares(&sizes, cap)
        .into_iter()
        .zip(ranks)
        .map(|(q, r)| pick(r, q))
        .collect()
}

/// Each rank's share of `cap` points, of `sizes` samples a rank.
fn shares(sizes: &[usize], cap: usize) -> Vec<usize> {
    let total: usize = sizes.iter().sum();
    if total <= cap {
        return sizes.to_vec();
    }
    let busy: Vec<usize> = (0..sizes.len()).filter(|&k| sizes[k] > 0).collect();
    let mut q = vec![0; sizes.len()];
    if busy.len() >= cap {
        // More ranks than points: one point each of ranks evenly spaced.
        for i in 0..cap {
            q[busy[i * busy.len() / cap]] = 1;
        }
        return q;
    }
    // One point a rank, the rest in proportion to the rest of its sample,
    // by largest remainder.
    let rest = (cap - busy.len()) as u128;
    let pool = (total - busy.len()) as u128;
    let mut frac = Vec::with_capacity(busy.len());
    for &k in &busy {
        let exact = rest * (sizes[k] - 1) as u128;
        q[k] = 1 + (exact / pool) as usize;
        frac.push((exact % pool, k));
    }
    let left = cap - q.iter().sum::<usize>();
    frac.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for &(_, k) in frac.iter().take(left) {
        q[k] += 1;
    }
    q
}

/// `q` indices of `samples`, ascending: the largest allocation of each
/// power-of-two size, largest first, up to half of `q` (at least one), and
/// the rest evenly spaced over the other samples.
fn pick(samples: &[Sample], q: usize) -> Vec<usize> {
    let n = samples.len();
    if q >= n {
        return (0..n).collect();
    }
    if q == 0 {
        return Vec::new();
    }
    // The largest sample (the earliest of equals) of each class, by the
    // bits of its size.
    let mut largest: [Option<usize>; 65] = [None; 65];
    for (i, x) in samples.iter().enumerate() {
        let t = &mut largest[(u64::BITS - x.size.leading_zeros()) as usize];
        if t.is_none_or(|j| samples[j].size < x.size) {
            *t = Some(i);
        }
    }
    let top: Vec<usize> = largest.iter().rev().flatten().copied().collect();
    let mut keep = vec![false; n];
    for &i in top.iter().take(q.div_ceil(2)) {
        keep[i] = true;
    }
    let others: Vec<usize> = (0..n).filter(|&i| !keep[i]).collect();
    let m = q - top.len().min(q.div_ceil(2));
    for k in 0..m {
        keep[others[k * others.len() / m]] = true;
    }
    (0..n).filter(|&i| keep[i]).collect()
}

/// How the scatter colours ranks: the palette while it has a colour for
/// each, otherwise a scale from the first rank to the last.
#[derive(Clone, Copy, Debug, PartialEq)]
enum RankColours {
    Palette,
    Scale { first: u32, last: u32 },
}

impl RankColours {
    fn of(ranks: &[RankSeries]) -> RankColours {
        match (ranks.first(), ranks.last()) {
            (Some(f), Some(l)) if ranks.len() > PALETTE_LEN => RankColours::Scale {
                first: f.rank,
                last: l.rank,
            },
            _ => RankColours::Palette,
        }
    }

    /// The colour of `rank`, the `k`-th of the ranks (`rank` on the scale).
    fn of_rank(self, k: usize, rank: u32) -> RGBColor {
        match self {
            RankColours::Palette => palette(k),
            RankColours::Scale { first, last } => {
                let span = last.saturating_sub(first).max(1) as f64;
                scale(rank.saturating_sub(first) as f64 / span)
            }
        }
    }
}

/// A sequential scale for t in [0, 1]: viridis (plotters' stops, in its
/// `colormaps` feature) from its dark blue to its green, still dark enough
/// at half opacity on white: its last seventh, to yellow, is left out.
fn scale(t: f64) -> RGBColor {
    const STOPS: [(f64, f64, f64); 7] = [
        (68.0, 1.0, 84.0),
        (70.0, 50.0, 127.0),
        (54.0, 92.0, 141.0),
        (39.0, 127.0, 143.0),
        (31.0, 162.0, 136.0),
        (74.0, 194.0, 110.0),
        (160.0, 219.0, 57.0),
    ];
    let t = t.clamp(0.0, 1.0) * (STOPS.len() - 1) as f64;
    let i = (t.floor() as usize).min(STOPS.len() - 2);
    let u = t - i as f64;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    let lerp = |x: f64, y: f64| (x + (y - x) * u).round() as u8;
    RGBColor(lerp(a.0, b.0), lerp(a.1, b.1), lerp(a.2, b.2))
}

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

        let smax = s
            .per_rank
            .iter()
            .flat_map(|r| &r.samples)
            .map(|x| x.size.max(1) as f64)
            .fold(1.0, f64::max);
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
        let samples: Vec<&[Sample]> = s.per_rank.iter().map(|r| r.samples.as_slice()).collect();
        let kept = shown(&samples, MAX_POINTS);
        let colour = RankColours::of(&s.per_rank);
        // Rank by rank while each has a colour of its own; on the scale in
        // time order, so that where points overlap the last rank does not
        // cover all the others.
        let mut order: Vec<(usize, usize)> = kept
            .iter()
            .enumerate()
            .flat_map(|(k, ks)| ks.iter().map(move |&i| (k, i)))
            .collect();
        if matches!(colour, RankColours::Scale { .. }) {
            order.sort_by_key(|&(k, i)| (samples[k][i].t_ns, k));
        }
        chart
            .draw_series(order.iter().map(|&(k, i)| {
                let x = samples[k][i];
                let c = colour.of_rank(k, s.per_rank[k].rank).mix(0.5).filled();
                Circle::new((x.t_ns as f64 / 1e9, x.size.max(1) as f64), 2, c)
            }))
            .map_err(pe)?;
        let sampled: usize = samples.iter().map(|r| r.len()).sum();
        let drawn: usize = kept.iter().map(Vec::len).sum();
        let from: u64 = s.per_rank.iter().map(|r| r.sampled_from).sum();
        let note = if drawn < sampled {
            format!(
                "{drawn} of {sampled} sampled events shown (of {from} allocations; \
                 each rank's evenly in time, with its largest sizes)"
            )
        } else {
            format!("{sampled} sampled of {from} allocations")
        };
        let style = font(13);
        bottom.draw_text(&note, &style, (110, 14)).map_err(pe)?;
        let (w, h) = bottom.estimate_text_size(&note, &style).map_err(pe)?;
        let mut x = 110 + w as i32 + 24;
        let y = 14 + h as i32 / 2;
        match colour {
            // Which colour is which rank, while the colours are distinct.
            RankColours::Palette if s.per_rank.len() > 1 => {
                for (k, r) in s.per_rank.iter().enumerate() {
                    bottom
                        .draw(&Circle::new((x, y), 4, palette(k).filled()))
                        .map_err(pe)?;
                    let name = format!("rank {}", r.rank);
                    bottom.draw_text(&name, &style, (x + 8, 14)).map_err(pe)?;
                    x += 8 + bottom.estimate_text_size(&name, &style).map_err(pe)?.0 as i32 + 16;
                }
            }
            RankColours::Palette => {}
            // More ranks: a colour bar from the first to the last.
            RankColours::Scale { first, last } => {
                let name = format!("rank {first}");
                bottom.draw_text(&name, &style, (x, 14)).map_err(pe)?;
                x += bottom.estimate_text_size(&name, &style).map_err(pe)?.0 as i32 + 6;
                for i in 0..KEY_STEPS {
                    let c = scale(i as f64 / (KEY_STEPS - 1) as f64);
                    let x0 = x + i * 2;
                    bottom
                        .draw(&Rectangle::new([(x0, y - 5), (x0 + 2, y + 5)], c.filled()))
                        .map_err(pe)?;
                }
                x += KEY_STEPS * 2 + 6;
                bottom
                    .draw_text(&format!("rank {last}"), &style, (x, 14))
                    .map_err(pe)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t_ns: u64, size: u64) -> Sample {
        Sample {
            t_ns,
            size,
            context: 0,
        }
    }

    #[test]
    fn below_the_cap_every_sample_is_shown() {
        assert_eq!(shares(&[500, 0, 1500], 2000), vec![500, 0, 1500]);
        let r: Vec<Sample> = (0..10).map(|i| sample(i, 16)).collect();
        assert_eq!(shown(&[&r, &r], 20), vec![(0..10).collect::<Vec<_>>(); 2]);
    }

    #[test]
    fn shares_are_proportional_and_fill_the_cap() {
        // 1 each, then 398 by 999 : 2999, the remainder to the larger
        // fraction (298.55 against 99.45).
        assert_eq!(shares(&[1000, 3000], 400), vec![100, 300]);
        // An equal sample, an equal share; the cap's remainder to the
        // first ranks.
        let q = shares(&[2500; 64], 20_000);
        assert_eq!(q.iter().sum::<usize>(), 20_000);
        assert!(q.iter().all(|&x| x == 312 || x == 313), "{q:?}");
        assert!(q[..32].iter().all(|&x| x == 313), "{q:?}");
        // A rank of one sample among large ones keeps it; none over its
        // sample.
        let q = shares(&[100_000, 1, 0, 7], 100);
        assert_eq!(q, vec![98, 1, 0, 1]);
        // More ranks than points: one each of ranks evenly spaced.
        assert_eq!(shares(&[5; 10], 3), vec![1, 0, 0, 1, 0, 0, 1, 0, 0, 0]);
    }

    #[test]
    fn a_ranks_share_keeps_its_largest_sizes_and_spreads_the_rest() {
        // 1000 small allocations, a 1 MiB one at 300 and a 64 KiB one at
        // 700.
        let r: Vec<Sample> = (0..1000)
            .map(|i| match i {
                300 => sample(i, 1 << 20),
                700 => sample(i, 65_536),
                _ => sample(i, 16 + i % 16),
            })
            .collect();
        let k = pick(&r, 10);
        assert_eq!(k.len(), 10);
        assert!(k.windows(2).all(|w| w[0] < w[1]), "{k:?}");
        assert!(k.contains(&300) && k.contains(&700), "{k:?}");
        // The largest of the 16..31 B class, the first 31 B one.
        assert!(k.contains(&15), "{k:?}");
        // The other 7 every 997 / 7 of the other samples.
        assert_eq!(k, vec![0, 15, 143, 285, 300, 429, 571, 700, 715, 857]);
        // A share of one: the largest.
        assert_eq!(pick(&r, 1), vec![300]);
        // Same sample, same choice.
        assert_eq!(shown(&[&r, &r[..500]], 30), shown(&[&r, &r[..500]], 30));
    }

    #[test]
    fn the_rank_scale_runs_from_dark_blue_to_green() {
        assert_eq!(scale(0.0), RGBColor(68, 1, 84));
        assert_eq!(scale(1.0), RGBColor(160, 219, 57));
        assert_eq!(scale(0.5), RGBColor(39, 127, 143));
        // 64 ranks, 64 colours.
        let c = RankColours::Scale { first: 0, last: 63 };
        let mut all: Vec<_> = (0..64u32)
            .map(|r| {
                let RGBColor(a, b, d) = c.of_rank(r as usize, r);
                (a, b, d)
            })
            .collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 64);
    }
}
