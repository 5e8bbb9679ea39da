//! `wmhcct plot`: the report's pictures, as PNG and/or SVG.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use wmhcct_format::Profile;

use crate::cli::{Group, PlotArgs, PlotFormat};
use crate::contexts::{contexts, ContextList, SortKey};
use crate::focus::Focus;
use crate::input::load;
use crate::mpi_internal::MpiOwn;
use crate::sites::Site;
use crate::symbolize::Symbols;

/// Size of every PNG and SVG plot, pixels.
pub const SIZE: (u32, u32) = (1200, 700);

/// What every plot draws from.
pub struct Data {
    pub profile: Profile,
    pub symbols: Symbols,
    /// The program's contexts (with `--mpi-internal`, the MPI library's
    /// too).
    pub contexts: ContextList,
    /// The contexts allocated inside MPI calls that `contexts` leaves out:
    /// their bytes and their calls.
    pub mpi_left_out: (MpiOwn, MpiOwn),
    pub top: usize,
    /// `--focus`: `contexts` holds only the contexts through it.
    pub focus: Option<Focus>,
    /// `--group`: `contexts` holds the allocating functions or lines, one
    /// frame each, for the hottest-contexts plot.
    pub group: Group,
}

/// One picture, drawable on any plotters backend.
pub trait Plot {
    /// File stem (`memory` → `memory.png`).
    fn name(&self) -> &'static str;
    /// Size in pixels.
    fn size(&self, _d: &Data) -> (u32, u32) {
        SIZE
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>, d: &Data) -> Result<()>
    where
        DB::ErrorType: 'static;
}

/// A plotters error as an anyhow error.
pub fn pe<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> anyhow::Error {
    anyhow::anyhow!("drawing: {e}")
}

/// Draw `p` into PNG and/or SVG files in `dir`, named in `out`. Each is
/// drawn in memory and written by `output::write_bytes`: under a temporary
/// name renamed into place, so a full disk leaves no cut picture, and a
/// failure names the file.
fn emit<P: Plot>(
    p: &P,
    d: &Data,
    dir: &Path,
    fmt: PlotFormat,
    out: &mut Vec<PathBuf>,
) -> Result<()> {
    let size = p.size(d);
    if matches!(fmt, PlotFormat::Png | PlotFormat::Both) {
        let path = dir.join(format!("{}.png", p.name()));
        let mut rgb = vec![0u8; size.0 as usize * size.1 as usize * 3];
        draw(p, d, BitMapBackend::with_buffer(&mut rgb, size))
            .with_context(|| path.display().to_string())?;
        let png = encode_png(&rgb, size).with_context(|| path.display().to_string())?;
        crate::output::write_bytes(&path, &png)?;
        out.push(path);
    }
    if matches!(fmt, PlotFormat::Svg | PlotFormat::Both) {
        let path = dir.join(format!("{}.svg", p.name()));
        let mut svg = String::new();
        draw(p, d, SVGBackend::with_string(&mut svg, size))
            .with_context(|| path.display().to_string())?;
        crate::output::write_bytes(&path, svg.as_bytes())?;
        out.push(path);
    }
    Ok(())
}

/// Draw `p` on a white `backend`.
fn draw<P: Plot, DB: DrawingBackend>(p: &P, d: &Data, backend: DB) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let root = backend.into_drawing_area();
    root.fill(&WHITE).map_err(pe)?;
    p.draw(&root, d)?;
    root.present().map_err(pe)
}

/// An RGB picture of `size` pixels as a PNG file's bytes.
fn encode_png(rgb: &[u8], size: (u32, u32)) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    let mut enc = png::Encoder::new(&mut bytes, size.0, size.1);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    // Filters chosen per row: plots are flat areas and thin lines, which
    // this shrinks to under half the size of the default filter's.
    enc.set_adaptive_filter(png::AdaptiveFilterType::Adaptive);
    let mut w = enc.write_header().context("encoding PNG")?;
    w.write_image_data(rgb).context("encoding PNG")?;
    w.finish().context("encoding PNG")?;
    Ok(bytes)
}

pub fn run(args: &PlotArgs) -> Result<()> {
    let name = crate::spool::name(&args.file);
    let loaded = load(&args.file).with_context(|| name.clone())?;
    crate::font::register().map_err(anyhow::Error::msg)?;
    let dir = &args.out_dir;
    if dir.exists() && !dir.is_dir() {
        bail!("{}: exists and is not a directory", dir.display());
    }
    std::fs::create_dir_all(dir).with_context(|| dir.display().to_string())?;
    let mut contexts = contexts(&loaded.profile, &loaded.symbols, SortKey::Count);
    let focus = args.select.focus();
    // The page's text report, of the whole list (it applies the focus and
    // leaves out the MPI library's own contexts itself).
    let text = crate::report_text::render(
        &loaded.profile,
        &contexts,
        args.top,
        SortKey::Count,
        args.group,
        args.mpi_internal,
        focus.as_ref(),
    );
    if let Some(f) = &focus {
        contexts = f.of(&contexts);
    }
    let mut mpi_left_out = Default::default();
    if !args.mpi_internal {
        let all = &contexts.contexts;
        mpi_left_out = (
            MpiOwn::by(all, SortKey::Bytes),
            MpiOwn::by(all, SortKey::Count),
        );
        contexts.contexts.retain(|c| c.inside_mpi.is_none());
    }
    if args.group != Group::Context {
        let sites = crate::sites::of(&contexts.contexts, args.group, SortKey::Bytes);
        contexts.contexts = sites.iter().map(Site::as_context).collect();
    }
    let d = Data {
        profile: loaded.profile,
        symbols: loaded.symbols,
        contexts,
        mpi_left_out,
        top: args.top,
        focus,
        group: args.group,
    };
    let mut written = Vec::new();
    let mut skipped = Vec::new();
    // Each plot into PNG and/or SVG files, named in `written`.
    macro_rules! draw {
        ($plot:expr) => {
            emit(&$plot, &d, dir, args.format, &mut written)?
        };
    }
    if d.profile.series.as_ref().is_some_and(|s| !s.is_empty()) {
        draw!(crate::plot_memory::Memory);
        draw!(crate::plot_events::Events);
    } else {
        skipped.push("memory and events (the report has no time series)");
    }
    draw!(crate::plot_contexts::Contexts);
    draw!(crate::plot_ranks::Ranks);
    // (A report without allocations has no size classes either: only
    // one with allocations and none is of a layout older than 3.)
    let allocations = crate::contexts::alloc_tree(&d.profile).map_or(0, |t| t.total_count);
    if d.profile.heap.size_classes.iter().any(|&n| n > 0) {
        draw!(crate::plot_sizes::Sizes);
    } else if d.profile.heap.size_classes.is_empty() && allocations > 0 {
        skipped.push("sizes (the report has no size classes: its layout is older than 3)");
    } else {
        skipped.push("sizes (no allocations)");
    }
    let flame = dir.join("flame.svg");
    crate::output::write_bytes(&flame, crate::flame::svg(&d).as_bytes())?;
    written.push(flame);
    let index = dir.join(crate::plot_index::NAME);
    let title = crate::plot_title::title(&d.profile, "wmhcct report");
    let html = crate::plot_index::html(&title, &text, &written);
    crate::output::write_bytes(&index, html.as_bytes())?;
    written.push(index);
    let mut listing = String::new();
    for w in &written {
        listing += &format!("{}\n", w.display());
    }
    for s in &skipped {
        listing += &format!("skipped {s}\n");
    }
    if args.top > crate::plot_contexts::MAX_BARS {
        listing += &format!(
            "contexts plot: at most the {} hottest drawn; the page's text report lists --top {}\n",
            crate::plot_contexts::MAX_BARS,
            args.top
        );
    }
    crate::output::emit(&listing, None)
}

/// The unit of an axis of bytes whose largest value is `max` bytes: the
/// largest of B, KiB, MiB, GiB and TiB that `max` reaches, so that the
/// ticks of a small heap do not all read 0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ByteUnit {
    pub bytes: f64,
    pub name: &'static str,
}

impl ByteUnit {
    pub fn for_max(max: f64) -> ByteUnit {
        const UNITS: [(f64, &str); 5] = [
            (1.0, "B"),
            (1024.0, "KiB"),
            (1048576.0, "MiB"),
            (1073741824.0, "GiB"),
            (1099511627776.0, "TiB"),
        ];
        let (bytes, name) = UNITS
            .iter()
            .rev()
            .find(|(u, _)| max >= *u)
            .copied()
            .unwrap_or(UNITS[0]);
        ByteUnit { bytes, name }
    }

    /// `bytes` in this unit.
    pub fn of(&self, bytes: f64) -> f64 {
        bytes / self.bytes
    }
}

/// A range that plotters can draw, even for empty or flat data.
pub fn upper(max: f64) -> f64 {
    if max.is_finite() && max > 0.0 {
        max * 1.05
    } else {
        1.0
    }
}

/// Colours [`palette`] has before it repeats.
pub const PALETTE_LEN: usize = 8;

/// Distinct line colours.
pub fn palette(i: usize) -> RGBColor {
    const C: [RGBColor; PALETTE_LEN] = [
        RGBColor(214, 39, 40),
        RGBColor(44, 160, 44),
        RGBColor(255, 127, 14),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(23, 190, 207),
        RGBColor(188, 189, 34),
    ];
    C[i % C.len()]
}

/// Font of plot text at `size` px, rounded up to an even size: plotters'
/// bitmap text places each glyph at `size / 2 + top`, truncated toward
/// zero, so at odd sizes glyphs that start below mid-height ('.', ',', '_')
/// land one pixel higher than the rest.
pub fn font(size: u32) -> TextStyle<'static> {
    (crate::font::FAMILY, size + size % 2).into_font().into()
}

/// 1234567 → `1.23M`, 0.5 → `0.5`: axis labels that stay short.
pub fn short_number(v: f64) -> String {
    let a = v.abs();
    let (x, u) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let s = format!("{x:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}{u}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_axes_take_the_unit_their_largest_value_reaches() {
        assert_eq!(ByteUnit::for_max(0.0).name, "B");
        assert_eq!(ByteUnit::for_max(100.0).name, "B");
        assert_eq!(ByteUnit::for_max(1434.0).name, "KiB");
        assert_eq!(ByteUnit::for_max(40.0 * 1048576.0).name, "MiB");
        assert_eq!(ByteUnit::for_max(6.0 * 1073741824.0).name, "GiB");
        assert_eq!(ByteUnit::for_max(1434.0).of(1434.0), 1434.0 / 1024.0);
    }

    #[test]
    fn short_numbers() {
        assert_eq!(short_number(0.0), "0");
        assert_eq!(short_number(1_234_567.0), "1.23M");
        assert_eq!(short_number(20_000.0), "20k");
        assert_eq!(short_number(2.5), "2.5");
    }
}
