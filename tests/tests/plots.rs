//! What `wmhcct plot` draws, read back from its SVG: every bar of the
//! hottest-contexts plot under a label of its own (a wrapper called from
//! two lines, a recursion at 45 depths), a picture tall enough for the bars
//! `--top` asks for, byte axes in a unit the data reaches, and a chart of
//! one bar drawn on its label.

use wmhcct_e2e::*;

/// `plot_labels.c` traced in exact mode: (work dir, report path).
fn labels_report(name: &str) -> (WorkDir, String) {
    let w = WorkDir::new(name);
    let exe = compile("plot_labels.c", &w.path, Opt::Debug, &[]);
    let h5 = w.join("labels.h5");
    let out = run_traced(&exe, &[] as &[&str], &w.path, &h5, &[("WMHCCT_EXACT", "1")]);
    assert_eq!(out.code, 0, "{}", out.describe());
    assert_eq!(out.stdout, "done\n");
    (w, h5.to_string_lossy().into_owned())
}

/// `wmhcct plot H5 --format svg EXTRA` into `w/<dir>`: the SVG of `plot`.
fn plot_svg(w: &WorkDir, h5: &str, dir: &str, plot: &str, extra: &[&str]) -> String {
    let out = w.join(dir);
    let out_s = out.to_string_lossy().into_owned();
    let args = [&["plot", h5, "--out-dir", &out_s, "--format", "svg"], extra].concat();
    cli_out(&w.path, &args);
    std::fs::read_to_string(out.join(format!("{plot}.svg"))).unwrap()
}

/// The texts of an SVG's `<text>` elements (plotters writes each on a line
/// of its own between the tags).
fn texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| t.split_once('>'))
        .filter_map(|(_, rest)| rest.split_once("</text>"))
        .map(|(text, _)| text.trim().replace("&lt;", "<").replace("&gt;", ">"))
        .collect()
}

/// A numeric attribute of each element of `tag` (`<rect … width="-4"`).
fn attrs(svg: &str, tag: &str, attr: &str) -> Vec<i64> {
    let key = format!(" {attr}=\"");
    svg.split(&format!("<{tag} "))
        .skip(1)
        .filter_map(|e| {
            let head = format!(" {}", e.split('>').next()?);
            let (_, v) = head.split_once(&key)?;
            v.split('"').next()?.parse().ok()
        })
        .collect()
}

#[test]
fn every_bar_has_a_label_of_its_own_and_the_picture_fits_them() {
    let (w, h5) = labels_report("plots-labels");
    let svg = plot_svg(&w, &h5, "top60", "contexts", &["--top", "60"]);
    let labels: Vec<String> = texts(&svg)
        .into_iter()
        .filter(|t| t.ends_with("(plot_labels-O0)"))
        .collect();
    // 45 depths of the recursion and two lines calling the wrapper, in the
    // chart by bytes and the one by count.
    assert!(labels.len() >= 2 * 47, "{labels:#?}");
    for l in &labels {
        let n = labels.iter().filter(|m| *m == l).count();
        assert_eq!(n, 2, "{l:?} under {n} bars: {labels:#?}");
    }
    // What tells them apart: the calling line, the recursion's depth.
    for want in [
        "site_c:11 ← main:28 (plot_labels-O0)",
        "site_c:11 ← main:29 (plot_labels-O0)",
        "rec:17 ← main (plot_labels-O0)",
        "rec:17 ×2 ← main (plot_labels-O0)",
        "rec:17 ×45 ← main (plot_labels-O0)",
    ] {
        assert!(labels.iter().any(|l| l == want), "no {want:?}: {labels:#?}");
    }
    // Tall enough for 47 rows of at least 20 pixels in each chart.
    let height = attrs(&svg, "svg", "height")[0];
    assert!(height >= 2 * 47 * 20, "height {height}");
    // No bar drawn thinner than 10 pixels.
    let bars: Vec<i64> = svg
        .split("<rect ")
        .filter(|r| r.contains("fill=\"#1F77B4\"") || r.contains("fill=\"#FF7F0E\""))
        .filter_map(|r| r.split_once(" height=\""))
        .filter_map(|(_, v)| v.split('"').next()?.parse().ok())
        .collect();
    assert!(bars.len() >= 2 * 47, "{} bars", bars.len());
    assert!(bars.iter().all(|&h| h >= 10), "{bars:?}");
}

#[test]
fn small_amounts_get_their_unit_and_a_single_bar_sits_on_its_label() {
    let (w, h5) = labels_report("plots-units");
    // Through site_c: 900 and 100 bytes, on an axis of bytes.
    let svg = plot_svg(&w, &h5, "focus", "contexts", &["--focus", "site_c"]);
    let t = texts(&svg);
    assert!(t.iter().any(|x| x == "bytes allocated (B)"), "{t:#?}");
    assert!(t.iter().any(|x| x == "800"), "no tick at 800 B: {t:#?}");
    // The peak-per-rank chart of a single process: one bar, drawn with a
    // width, its label "0" under it.
    let ranks = plot_svg(&w, &h5, "ranks", "ranks", &[]);
    let widths = attrs(&ranks, "rect", "width");
    assert!(widths.iter().all(|&x| x > 0), "{widths:?}");
    let bar = ranks
        .split("<rect ")
        .find(|r| r.contains("fill=\"#D62728\""))
        .expect("the bar");
    let x = |attr: &str| attrs(&format!("<rect {bar}"), "rect", attr)[0];
    let (left, right) = (x("x"), x("x") + x("width"));
    assert!(right - left > 50, "{bar}");
    // Its label is centred under it.
    let label = ranks
        .split("<text")
        .find(|t| {
            t.split_once('>')
                .is_some_and(|(_, r)| r.trim().starts_with("0\n"))
        })
        .expect("the rank's label");
    let lx = attrs(&format!("<text{label}"), "text", "x")[0];
    assert!(
        left < lx && lx < right,
        "label at {lx}, bar {left}..{right}"
    );
    // The heap's peak in bytes too.
    assert!(
        texts(&ranks).iter().any(|x| x == "peak heap (B)"),
        "{:#?}",
        texts(&ranks)
    );
}
