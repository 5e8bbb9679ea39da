//! `wmhcct plot`, `export` and `diff` end to end on reports built from real
//! Collector streams (single process, 4-rank and 200-rank jobs, and a
//! report without time series), and their bad-input handling.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use wmhcct_collector::job::{as_job_part, finish, merge};
use wmhcct_collector::{Collector, CollectorConfig, Cursor, SeriesConfig};
use wmhcct_format::{FrameKey, KindTotal, Profile, ALLOC_KINDS, MPI_KINDS};

const MIB: u64 = 1 << 20;
const START: u64 = 1_714_000_000_000_000_000;

fn wmhcct() -> Command {
    Command::new(env!("CARGO_BIN_EXE_wmhcct"))
}

fn run(args: &[&std::ffi::OsStr]) -> Output {
    wmhcct().args(args).output().expect("spawn wmhcct")
}

fn os<S: AsRef<std::ffi::OsStr> + ?Sized>(s: &S) -> &std::ffi::OsStr {
    s.as_ref()
}

/// One rank's process: five contexts, (rank+1) MiB held from 0.3 s to 0.6 s.
fn rank_profile(rank: u32, nranks: u32, scale: u64) -> Profile {
    let mut c = Collector::with_series(
        CollectorConfig {
            phi: 0.01,
            epsilon: 0.0,
            exact: true,
            n_kinds: ALLOC_KINDS.len(),
        },
        SeriesConfig {
            bins: 256,
            event_samples: 500,
        },
    );
    let mut cur = Cursor::new();
    let mut ptr = 0x10_0000u64;
    for ms in 0..1000u64 {
        let t = ms * 1_000_000;
        for k in 0..5u64 {
            ptr += 64;
            let size = (k + 1) * 16 * scale;
            c.on_alloc(
                &mut cur,
                k as u16 % 2,
                &[0x400 + k, 0x300, 0x200],
                0,
                ptr,
                size,
                t + k,
            );
            c.on_free(3, ptr, t + 100 + k, false);
        }
        if ms == 300 {
            c.on_alloc(
                &mut cur,
                0,
                &[0x500, 0x200],
                0,
                0xbeef_0000,
                (rank as u64 + 1) * MIB,
                t + 1,
            );
        }
        if ms == 600 {
            c.on_free(3, 0xbeef_0000, t + 1, false);
        }
        if ms % 10 == 0 {
            c.record_mpi_event(t + 50);
        }
    }
    let mut resolve = FrameKey::Unknown;
    let mut p = Profile::default();
    p.meta.program = "/home/user/bin/solver".into();
    p.meta.start_unix_ns = START + rank as u64 * 1_000_000;
    p.meta.end_unix_ns = p.meta.start_unix_ns + 1_000_000_000;
    p.meta.hostname = "node1".into();
    p.meta.reason = "exit".into();
    if nranks > 1 {
        p.meta.nranks = Some(nranks);
        p.meta.rank = Some(rank);
    }
    p.config.phi = 0.01;
    p.config.exact = true;
    p.config.bins = 256;
    p.config.rank_series = 64;
    p.config.event_samples = 500;
    p.totals = c
        .totals()
        .into_iter()
        .zip(ALLOC_KINDS)
        .map(|((count, bytes), kind)| KindTotal {
            kind: kind.into(),
            count,
            bytes,
        })
        .collect();
    p.heap = c.heap_stats();
    p.resident = wmhcct_format::Resident {
        peak_bytes: (40 + rank as u64) * MIB,
        end_bytes: 30 * MIB,
        tracer_peak_bytes: 5 * MIB,
    };
    p.trees = vec![c.snapshot_tree("alloc", &mut resolve)];
    p.series = c.series_snapshot(1_000_000_000, p.meta.start_unix_ns);
    let _ = MPI_KINDS;
    p
}

fn job(n: u32) -> Profile {
    let mut acc: Option<Profile> = None;
    for r in 0..n {
        let part = as_job_part(rank_profile(r, n, 1), r);
        acc = Some(match acc {
            None => part,
            Some(a) => merge(a, part, 0),
        });
    }
    let mut p = acc.unwrap();
    finish(&mut p, n);
    p.meta.reason = "merge".into();
    p
}

fn convert(dir: &Path, name: &str, p: &Profile) -> PathBuf {
    let prof = dir.join(format!("{name}.wmprof"));
    std::fs::write(&prof, wmhcct_format::encode(p).unwrap()).unwrap();
    let out = dir.join(format!("{name}.h5"));
    let o = run(&[os("convert"), prof.as_os_str(), os("-o"), out.as_os_str()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

fn plot(file: &Path, dir: &Path, format: &str) -> Output {
    let o = run(&[
        os("plot"),
        file.as_os_str(),
        os("--out-dir"),
        dir.as_os_str(),
        os("--format"),
        os(format),
    ]);
    assert!(
        o.status.success(),
        "plot: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    // WMHCCT_KEEP_PLOTS=DIR keeps a copy of every plot for a look.
    if let Some(keep) = std::env::var_os("WMHCCT_KEEP_PLOTS") {
        let keep = Path::new(&keep).join(dir.file_name().unwrap());
        std::fs::create_dir_all(&keep).unwrap();
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            std::fs::copy(e.path(), keep.join(e.file_name())).unwrap();
        }
    }
    o
}

/// Decode a PNG: (width, height, share of non-white pixels).
fn png_info(path: &Path) -> (u32, u32, f64) {
    let dec = png::Decoder::new(std::fs::File::open(path).unwrap());
    let mut reader = dec.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    let data = &buf[..info.buffer_size()];
    let ink = data
        .chunks(px)
        .filter(|c| c.iter().take(3).any(|&v| v < 240))
        .count();
    (
        info.width,
        info.height,
        ink as f64 / (info.width * info.height) as f64,
    )
}

fn check_png(path: &Path) {
    assert!(path.is_file(), "{} missing", path.display());
    let (w, h, ink) = png_info(path);
    assert_eq!((w, h), (1200, 700), "{}", path.display());
    assert!(ink > 0.01, "{} is blank ({ink})", path.display());
}

fn check_svg(path: &Path, must: &[&str]) -> String {
    let s = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(s.contains("<svg"), "{} is not SVG", path.display());
    assert!(
        s.trim_end().ends_with("</svg>"),
        "{} unterminated",
        path.display()
    );
    assert!(s.len() > 2000, "{} too small", path.display());
    for m in must {
        assert!(s.contains(m), "{} lacks {m:?}", path.display());
    }
    s
}

const PLOTS: [&str; 5] = ["memory", "events", "contexts", "ranks", "sizes"];

#[test]
fn single_process_plots() {
    let dir = tempfile::tempdir().unwrap();
    let h5 = convert(dir.path(), "one", &rank_profile(0, 1, 1));
    let out = dir.path().join("plots");
    let o = plot(&h5, &out, "both");
    let listed = String::from_utf8_lossy(&o.stdout);
    for name in PLOTS {
        check_png(&out.join(format!("{name}.png")));
        let svg = check_svg(
            &out.join(format!("{name}.svg")),
            &["solver", "1 rank,", "2024-04-24"],
        );
        assert!(svg.contains(r#"width="1200""#) && svg.contains(r#"height="700""#));
        assert!(listed.contains(&format!("{name}.png")), "{listed}");
    }
    check_svg(&out.join("memory.svg"), &["time (s)", "live heap (MiB)"]);
    check_svg(&out.join("events.svg"), &["allocations/s"]);
    // 1000 × 5 blocks of 16, 32, 48, 64 and 80 bytes (and one of 1 MiB):
    // classes from 16 B (1000), 32 B (2000), 64 B (2000).
    check_svg(
        &out.join("sizes.svg"),
        &[
            "Allocation sizes",
            "blocks allocated; most in 32 B – 64 B (40.0%)",
            "16 B",
            "1 MiB",
            "20.0%",
        ],
    );
    check_svg(&out.join("flame.svg"), &["solver", "<rect", "malloc"]);
}

#[test]
fn job_plots_bars_and_heat_strip() {
    let dir = tempfile::tempdir().unwrap();
    let h5 = convert(dir.path(), "job4", &job(4));
    let out = dir.path().join("p4");
    plot(&h5, &out, "svg");
    let ranks = check_svg(
        &out.join("ranks.svg"),
        &[
            "4 ranks",
            "max: rank 3",
            // Ranks 0..3 held 40..43 MiB.
            "resident peak (VmHWM, all memory): max: rank 3, 43.0 MiB   mean 41.5 MiB   \
             min 40.0 MiB   imbalance (max/mean) 1.04",
        ],
    );
    assert!(ranks.contains("rank"));
    check_svg(
        &out.join("memory.svg"),
        &["rank 3 (peak", "mean across ranks"],
    );
    assert!(!out.join("memory.png").exists(), "--format svg wrote PNG");

    let h5 = convert(dir.path(), "job200", &job(200));
    let out = dir.path().join("p200");
    plot(&h5, &out, "png");
    for name in PLOTS {
        check_png(&out.join(format!("{name}.png")));
    }
    assert!(out.join("flame.svg").is_file());
}

#[test]
fn report_without_series_still_plots_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = rank_profile(0, 1, 1);
    p.series = None;
    let h5 = convert(dir.path(), "old", &p);
    let out = dir.path().join("p");
    let o = plot(&h5, &out, "png");
    assert!(String::from_utf8_lossy(&o.stdout).contains("no time series"));
    assert!(!out.join("memory.png").exists());
    check_png(&out.join("sizes.png"));

    // A report without size classes (written before layout 3): no sizes plot.
    p.heap.size_classes.clear();
    let h5 = convert(dir.path(), "older", &p);
    let out = dir.path().join("p-older");
    let o = plot(&h5, &out, "png");
    assert!(
        String::from_utf8_lossy(&o.stdout)
            .contains("skipped sizes (the report has no size classes: its layout is older than 3)"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(!out.join("sizes.png").exists());
    check_png(&out.join("contexts.png"));
    check_png(&out.join("ranks.png"));
    assert!(out.join("flame.svg").is_file());

    // A program that allocated nothing has no size classes either, in the
    // current layout: the reason given is that (it said "older than 3").
    let mut none = rank_profile(0, 1, 1);
    none.heap.size_classes.clear();
    none.series = None;
    let root = none.trees[0].nodes[0];
    none.trees[0].nodes = vec![root];
    none.trees[0].total_count = 0;
    none.trees[0].total_bytes = 0;
    let h5 = convert(dir.path(), "none", &none);
    let out = dir.path().join("p-none");
    let o = plot(&h5, &out, "png");
    let listing = String::from_utf8_lossy(&o.stdout);
    assert!(
        listing.contains("skipped sizes (no allocations)"),
        "{listing}"
    );
    assert!(!listing.contains("older than 3"), "{listing}");
}

fn folded_sum(text: &str) -> u64 {
    text.lines()
        .map(|l| {
            let (stack, w) = l.rsplit_once(' ').expect("`stack weight`");
            assert!(!stack.is_empty() && stack.contains(';'), "{l}");
            w.parse::<u64>().expect("integer weight")
        })
        .sum()
}

#[test]
fn export_folded_sums_equal_totals() {
    let dir = tempfile::tempdir().unwrap();
    let p = rank_profile(0, 1, 1);
    let h5 = convert(dir.path(), "e", &p);
    let alloc_total = |f: fn(&KindTotal) -> u64| -> u64 {
        p.totals.iter().filter(|t| t.kind != "free").map(f).sum()
    };
    for (weight, expect) in [
        ("bytes", alloc_total(|t| t.bytes)),
        ("count", alloc_total(|t| t.count)),
    ] {
        let o = run(&[
            os("export"),
            h5.as_os_str(),
            os("--format"),
            os("folded"),
            os("--weight"),
            os(weight),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let text = String::from_utf8(o.stdout).unwrap();
        assert_eq!(folded_sum(&text), expect, "{weight}:\n{text}");
        assert_eq!(
            folded_sum(&text),
            if weight == "bytes" {
                p.trees[0].total_bytes
            } else {
                p.trees[0].total_count
            }
        );
        assert!(
            text.lines()
                .all(|l| l.split(';').next_back().unwrap().starts_with("malloc")
                    || l.contains(";calloc ")),
            "{text}"
        );
    }
    // Default weight: bytes, to a file.
    let f = dir.path().join("out.folded");
    let o = run(&[
        os("export"),
        h5.as_os_str(),
        os("--format"),
        os("folded"),
        os("-o"),
        f.as_os_str(),
    ]);
    assert!(o.status.success());
    assert_eq!(
        folded_sum(&std::fs::read_to_string(&f).unwrap()),
        alloc_total(|t| t.bytes)
    );
    // JSON: the report's.
    let o = run(&[os("export"), h5.as_os_str(), os("--format"), os("json")]);
    let r = run(&[os("report"), h5.as_os_str(), os("--json")]);
    assert!(o.status.success() && r.status.success());
    assert_eq!(o.stdout, r.stdout);
}

#[test]
fn diff_against_itself_and_a_changed_run() {
    let dir = tempfile::tempdir().unwrap();
    let a = convert(dir.path(), "a", &rank_profile(0, 1, 1));
    let o = run(&[os("diff"), a.as_os_str(), a.as_os_str()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("no context changed"), "{text}");
    let o = run(&[os("diff"), a.as_os_str(), a.as_os_str(), os("--json")]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["changed_contexts"], 0);
    assert_eq!(v["peak_bytes_delta"], 0);
    assert!(v["matched_contexts"].as_u64().unwrap() >= 6);

    // B allocates twice as much in the five small contexts.
    let b = convert(dir.path(), "b", &rank_profile(0, 1, 2));
    let o = run(&[
        os("diff"),
        a.as_os_str(),
        b.as_os_str(),
        os("--json"),
        os("--top"),
        os("3"),
    ]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["changed_contexts"], 5);
    let cs = v["contexts"].as_array().unwrap();
    assert_eq!(cs.len(), 3);
    // Largest change first: the 80-byte context, 1000 calls → +80000 B.
    assert_eq!(cs[0]["bytes_delta"], 80_000);
    assert_eq!(cs[0]["count_delta"], 0);
    assert_eq!(cs[0]["bytes_a"], 80_000);
    let o = run(&[os("diff"), a.as_os_str(), b.as_os_str()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("5 contexts changed"), "{text}");
    assert!(text.contains("peak heap:"), "{text}");
}

fn assert_one_line_error(o: &Output, what: &str) {
    assert_eq!(o.status.code(), Some(1), "{what}: {o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{what}: not one line: {err:?}");
    assert!(err.starts_with("wmhcct: error: "), "{what}: {err:?}");
    assert!(!err.contains("panicked"), "{what}: {err:?}");
}

#[test]
fn bad_input_is_one_line_and_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let good = convert(d, "good", &rank_profile(0, 1, 1));
    let empty = d.join("empty.h5");
    std::fs::write(&empty, b"").unwrap();
    let text = d.join("notes.txt");
    std::fs::write(&text, "not a report\n").unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let trunc = d.join("trunc.h5");
    std::fs::write(&trunc, &bytes[..bytes.len() / 2]).unwrap();
    let prof = wmhcct_format::encode(&rank_profile(0, 1, 1)).unwrap();
    let trunc_prof = d.join("trunc.wmprof");
    std::fs::write(&trunc_prof, &prof[..prof.len() / 3]).unwrap();
    let missing = d.join("missing.h5");
    let out = d.join("plots");
    for bad in [&missing, &empty, &text, &trunc, &trunc_prof] {
        let what = bad.display().to_string();
        let o = run(&[
            os("plot"),
            bad.as_os_str(),
            os("--out-dir"),
            out.as_os_str(),
        ]);
        assert_one_line_error(&o, &format!("plot {what}"));
        let o = run(&[os("export"), bad.as_os_str(), os("--format"), os("folded")]);
        assert_one_line_error(&o, &format!("export {what}"));
        let o = run(&[os("diff"), good.as_os_str(), bad.as_os_str()]);
        assert_one_line_error(&o, &format!("diff good {what}"));
        let o = run(&[os("diff"), bad.as_os_str(), good.as_os_str()]);
        assert_one_line_error(&o, &format!("diff {what} good"));
    }
    // An output directory that is a file.
    let o = run(&[
        os("plot"),
        good.as_os_str(),
        os("--out-dir"),
        text.as_os_str(),
    ]);
    assert_one_line_error(&o, "plot into a file");
}

#[test]
fn h5py_reads_the_series() {
    let py = "/usr/bin/python3";
    let ok = Command::new(py)
        .args(["-c", "import h5py, numpy"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("h5py unavailable: skipping");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let h5 = convert(dir.path(), "j", &job(4));
    let script = r#"
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
s = f["series"]
n = int(s.attrs["bins"])
assert s["time_s"].shape == (n,)
assert s["live_bytes_max"].shape == (n,)
live = s["per_rank/live_bytes"][:]
ranks = list(s["per_rank/rank"][:])
assert live.shape == (4, n), live.shape
MIB = 1 << 20
for i, r in enumerate(ranks):
    assert live[i].max() == (r + 1) * MIB + 80, (r, live[i].max())
    peak_t = s["time_s"][int(np.argmax(live[i]))]
    assert 0.2 < peak_t < 0.4, peak_t
assert int(s["alloc_events_sum"][:].sum()) == 4 * 5001
assert abs(s["live_bytes_mean"][:].max() - 2.5 * MIB) < 0.2 * MIB
smp = s["samples"][:]
assert len(smp) == 4 * 500 and set(smp["rank"]) == {0, 1, 2, 3}
print("ok")
"#;
    let o = Command::new(py)
        .args(["-c", script])
        .arg(&h5)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn no_fontconfig_or_freetype_at_run_time() {
    let o = match Command::new("ldd")
        .arg(env!("CARGO_BIN_EXE_wmhcct"))
        .output()
    {
        Ok(o) if o.status.success() => o,
        _ => {
            eprintln!("ldd unavailable: skipping");
            return;
        }
    };
    let libs = String::from_utf8_lossy(&o.stdout);
    for bad in ["fontconfig", "freetype"] {
        assert!(!libs.contains(bad), "wmhcct links {bad}:\n{libs}");
    }
}

/// A job's heap line leads with its largest rank's peak (rank r holds
/// r+1 MiB here) and names the sum of the ranks' peaks, the job's
/// `peak_bytes`, as such; `diff` compares both.
#[test]
fn a_jobs_peak_is_its_largest_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let (four, three) = (job(4), job(3));
    let top = |p: &Profile| p.ranks.iter().map(|r| r.heap.peak_bytes).max().unwrap();
    assert!(top(&four) > 4 * MIB && top(&four) < 5 * MIB);
    let sum: u64 = four.ranks.iter().map(|r| r.heap.peak_bytes).sum();
    assert_eq!(four.heap.peak_bytes, sum);
    let a = convert(dir.path(), "three", &three);
    let b = convert(dir.path(), "four", &four);
    let o = run(&[os("report"), b.as_os_str()]);
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    let heap = text
        .lines()
        .find(|l| l.starts_with("heap:"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        heap.starts_with(&format!(
            "heap:      peak 4.0 MiB ({} B) on rank 3, ",
            top(&four)
        )),
        "{heap}"
    );
    assert!(
        heap.ends_with("; the 4 ranks' peaks sum to 10.0 MiB"),
        "{heap}"
    );

    let o = run(&[os("diff"), a.as_os_str(), b.as_os_str(), os("--json")]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["a"]["peak_rank_bytes"], top(&three));
    assert_eq!(v["b"]["peak_rank_bytes"], top(&four));
    assert_eq!(v["b"]["peak_bytes"], sum);
    let o = run(&[os("diff"), a.as_os_str(), b.as_os_str()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.lines().any(|l| l.starts_with("peak heap:")
            && l.contains("3.0 MiB")
            && l.ends_with("(the largest rank's)")),
        "{text}"
    );
    assert!(text.contains("(the ranks' peaks summed)"), "{text}");
}

/// The SVG's texts: (text, left, right, y), the width estimated at 0.6 of
/// the font size a character (DejaVu Sans' digits and lower case run
/// 0.55–0.65 em).
fn svg_texts(svg: &str) -> Vec<(String, f64, f64, f64)> {
    let attr = |tag: &str, name: &str| -> Option<String> {
        let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
        Some(tag[at..].split('"').next()?.to_string())
    };
    let mut out = Vec::new();
    for part in svg.split("<text").skip(1) {
        let Some((tag, rest)) = part.split_once('>') else {
            continue;
        };
        let text = rest
            .split("</text>")
            .next()
            .unwrap_or("")
            .trim()
            .to_string();
        let num = |n: &str| attr(tag, n).and_then(|v| v.parse::<f64>().ok());
        let (Some(x), Some(y), Some(size)) = (num("x"), num("y"), num("font-size")) else {
            continue;
        };
        let w = 0.6 * size * text.chars().count() as f64;
        let left = match attr(tag, "text-anchor").as_deref() {
            Some("middle") => x - w / 2.0,
            Some("end") => x - w,
            _ => x,
        };
        out.push((text, left, left + w, y));
    }
    out
}

/// The max rank's label stays in the picture when that rank is the last
/// bar of many (64 ranks, rank 63 the largest: `max: rank 6` was all that
/// showed, centred over a bar at the right edge).
#[test]
fn max_rank_label_of_the_last_bar_stays_in_the_picture() {
    let dir = tempfile::tempdir().unwrap();
    let h5 = convert(dir.path(), "job64", &job(64));
    let out = dir.path().join("p64");
    plot(&h5, &out, "svg");
    let svg = check_svg(&out.join("ranks.svg"), &["64 ranks"]);
    let texts = svg_texts(&svg);
    let (_, left, right, _) = texts
        .iter()
        .find(|t| t.0 == "max: rank 63")
        .unwrap_or_else(|| panic!("no max label in {texts:?}"));
    assert!(
        *left >= 0.0 && *right <= 1200.0,
        "max label spans {left}..{right} of 1200 px"
    );
}

/// The sizes plot's bar labels do not run together when the classes span
/// 1 B to 8 MiB (24 bars, `128 KiB256 KiB512 KiB` before): every other bar
/// is labelled instead.
#[test]
fn size_labels_of_many_classes_do_not_overlap() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = rank_profile(0, 1, 1);
    p.heap.size_classes = vec![0; 25];
    for k in 1..=24 {
        p.heap.size_classes[k] = 1000 + k as u64;
    }
    let h5 = convert(dir.path(), "sizes24", &p);
    let out = dir.path().join("p");
    plot(&h5, &out, "svg");
    let svg = check_svg(&out.join("sizes.svg"), &["1 B", "4 MiB"]);
    // The x axis' labels: the texts lowest in the picture but the axis
    // description.
    let texts = svg_texts(&svg);
    let axis_y = texts
        .iter()
        .filter(|t| t.0.ends_with(" B") || t.0.ends_with("iB"))
        .map(|t| t.3)
        .fold(0.0, f64::max);
    let mut labels: Vec<_> = texts.iter().filter(|t| t.3 == axis_y).collect();
    labels.sort_by(|a, b| a.1.total_cmp(&b.1));
    assert!(labels.len() >= 8, "{labels:?}");
    for w in labels.windows(2) {
        assert!(
            w[0].2 < w[1].1,
            "{:?} runs into {:?} (of {labels:?})",
            w[0].0,
            w[1].0
        );
    }
}

/// The events plot gives MPI calls an axis of their own: on the
/// allocations' axis a job's MPI calls (here 100/s a rank against 5000
/// allocations/s) drew a flat line on zero. Their line now spans most of
/// the upper chart's height.
#[test]
fn mpi_calls_have_their_own_axis() {
    let dir = tempfile::tempdir().unwrap();
    let h5 = convert(dir.path(), "job4", &job(4));
    let out = dir.path().join("p4");
    plot(&h5, &out, "svg");
    let svg = check_svg(
        &out.join("events.svg"),
        &[
            "allocations/s (all ranks)",
            "MPI calls/s (all ranks)",
            "MPI calls/s (right axis)",
        ],
    );
    // The polylines of a colour: (highest, lowest) y over their points.
    let extent = |colour: &str| {
        svg.split("<polyline")
            .skip(1)
            .filter(|p| p.contains(&format!("stroke=\"{colour}\"")))
            .filter_map(|p| p.split("points=\"").nth(1)?.split('"').next())
            .flat_map(|pts| pts.split_whitespace())
            .filter_map(|xy| xy.split(',').nth(1)?.parse::<f64>().ok())
            .fold((f64::MAX, 0.0f64), |(lo, hi), y| (lo.min(y), hi.max(y)))
    };
    let (a_top, a_base) = extent("#1F77B4");
    let (m_top, m_base) = extent("#FF7F0E");
    assert!(a_base > a_top && m_base > m_top, "no lines: {svg:.300}");
    let (a, m) = (a_base - a_top, m_base - m_top);
    assert!(m > 0.5 * a, "MPI line spans {m} px, allocations {a} px");
}

/// The heat strip of many ranks says which cell is which rank: each row's
/// first rank at its left and the column offsets above (200 ranks: rows
/// of 128, starting at ranks 0 and 128). It named the max rank only.
#[test]
fn heat_strip_labels_its_rows_and_columns() {
    let dir = tempfile::tempdir().unwrap();
    let h5 = convert(dir.path(), "job200", &job(200));
    let out = dir.path().join("p200");
    plot(&h5, &out, "svg");
    let svg = check_svg(&out.join("ranks.svg"), &["200 ranks", "rows of 128"]);
    let texts: Vec<String> = svg_texts(&svg).into_iter().map(|t| t.0).collect();
    for want in ["0", "128", "+0", "+16", "+112"] {
        assert!(texts.iter().any(|t| t == want), "no {want:?} in {texts:?}");
    }
}

/// Ranks of different bin widths combined make the minimum and the mean of
/// the live heap lower bounds (`JobSeries::approximate`); the memory plot's
/// legend said so of the minimum only.
#[test]
fn approximate_mean_is_marked_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = job(4);
    p.series.as_mut().unwrap().approximate = true;
    let h5 = convert(dir.path(), "approx", &p);
    let out = dir.path().join("p");
    plot(&h5, &out, "svg");
    check_svg(
        &out.join("memory.svg"),
        &[
            "min–max across ranks (min approximate)",
            "mean across ranks (approximate)",
        ],
    );
}

/// `job(n)` with `per_rank` sampled events a rank instead of its 500 (the
/// job's default budget, 16 reservoirs of 10 000, shared by 64 ranks is
/// 2 500 each): evenly over the second, 16 B – 8 KiB (the higher the
/// rank, the larger), and each rank's
/// (rank+1) MiB buffer at 0.3 s, its one allocation of 1 MiB or more.
fn dense_job(n: u32, per_rank: usize) -> Profile {
    let mut p = job(n);
    let s = p.series.as_mut().unwrap();
    for r in &mut s.per_rank {
        let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ r.rank as u64;
        r.samples = (0..per_rank)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let big = i == per_rank * 3 / 10;
                wmhcct_format::Sample {
                    t_ns: i as u64 * 1_000_000_000 / per_rank as u64,
                    size: if big {
                        (r.rank as u64 + 1) * MIB
                    } else {
                        (16 << (x % 9)) * (64 + r.rank as u64 % 64) / 64
                    },
                    context: wmhcct_format::NO_CONTEXT,
                }
            })
            .collect();
        r.sampled_from = per_rank as u64 * 40;
    }
    p
}

/// The attribute `name` of every `<circle` of an SVG.
fn circle_attr(svg: &str, name: &str) -> Vec<String> {
    let key = format!(" {name}=\"");
    svg.split("<circle")
        .skip(1)
        .filter_map(|c| {
            let tag = c.split('>').next()?;
            Some(tag.split_once(&key)?.1.split('"').next()?.to_string())
        })
        .collect()
}

/// A 64-rank job's 160 000 sampled events (the default budget) drew 160 000
/// circles, a 15 MB SVG, and more ranks drew more: the scatter now draws
/// at most `MAX_POINTS` (20 000), each rank's share in proportion to its
/// sample and its largest allocations among them, says so above it, and
/// gives the same bytes each time.
#[test]
fn scatter_of_many_ranks_is_capped() {
    let dir = tempfile::tempdir().unwrap();
    let h5 = convert(dir.path(), "dense64", &dense_job(64, 2500));
    let out = dir.path().join("dense64");
    plot(&h5, &out, "svg");
    let svg = check_svg(
        &out.join("events.svg"),
        &["20000 of 160000 sampled events shown (of 6400000 allocations"],
    );
    assert!(svg.len() < 2_500_000, "events.svg is {} bytes", svg.len());
    let cy: Vec<i64> = circle_attr(&svg, "cy")
        .iter()
        .map(|v| v.parse().unwrap())
        .collect();
    // The cap, filled: no key circles beyond 8 ranks.
    assert_eq!(cy.len(), 20_000);
    // Every rank's 1 MiB+ buffer is drawn: the circles above the widest
    // gap on the log size axis (8 KiB to 1 MiB), one a rank.
    let mut ys = cy.clone();
    ys.sort();
    ys.dedup();
    let gap = ys
        .windows(2)
        .max_by_key(|w| w[1] - w[0])
        .map(|w| w[0])
        .unwrap();
    assert_eq!(cy.iter().filter(|&&y| y <= gap).count(), 64);
    // Same report, same bytes.
    let again = dir.path().join("again");
    plot(&h5, &again, "svg");
    let svg2 = std::fs::read_to_string(again.join("events.svg")).unwrap();
    assert!(svg == svg2, "two plots of one report differ");
}

/// `events.svg` of a `job(ranks)` report, checked (`check_svg`, which
/// also looks for `notes`).
fn events_svg(dir: &Path, ranks: u32, notes: &[&str]) -> String {
    let h5 = convert(dir, &format!("job{ranks}"), &job(ranks));
    let out = dir.join(format!("events{ranks}"));
    plot(&h5, &out, "svg");
    check_svg(&out.join("events.svg"), notes)
}

/// Beyond the palette's 8 colours the scatter's colours repeated, with no
/// key: ranks are now coloured on a scale, one colour a rank, with a
/// colour bar from the first rank to the last.
#[test]
fn scatter_colours_ranks_beyond_the_palette_on_a_scale_with_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let svg = events_svg(dir.path(), 64, &["8000 sampled of 320064 allocations"]);
    let mut fills = circle_attr(&svg, "fill");
    assert_eq!(fills.len(), 8000);
    fills.sort();
    fills.dedup();
    assert_eq!(fills.len(), 64, "{fills:?}");
    let texts: Vec<String> = svg_texts(&svg).into_iter().map(|t| t.0).collect();
    for want in ["rank 0", "rank 63"] {
        assert!(texts.iter().any(|t| t == want), "no {want:?} in {texts:?}");
    }
}

/// Up to 8 ranks, below the cap, the scatter is as it was: every sampled
/// event drawn, a colour of the palette a rank and a key naming each.
#[test]
fn scatter_of_four_ranks_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let svg = events_svg(dir.path(), 4, &["2000 sampled of 20004 allocations"]);
    let fills = circle_attr(&svg, "fill");
    // 500 points a rank and the key's 4 circles, the palette's first 4.
    assert_eq!(fills.len(), 2004);
    for c in ["#D62728", "#2CA02C", "#FF7F0E", "#9467BD"] {
        assert_eq!(fills.iter().filter(|f| *f == c).count(), 501, "{c}");
    }
    let texts: Vec<String> = svg_texts(&svg).into_iter().map(|t| t.0).collect();
    for r in 0..4 {
        let want = format!("rank {r}");
        assert!(texts.contains(&want), "no {want:?} in {texts:?}");
    }
}
