//! Reading a report of many deep contexts takes memory of the order of the
//! report, not of every context's stack spelt out: `export`, `plot` and
//! `diff` of an 0.9 MB report (3·10^4 contexts 120 frames deep) run within
//! a 400 MB address space. They each took 0.8–1.0 GB of resident memory
//! when every stack was built, with its names, before any was used (and a
//! report a few times larger took 2–3.6 GB). `report --json` and `export
//! --format json` write the contexts as they go, within 200 MB: they took
//! 235 MB resident for this report's 26 MB of JSON when the document was
//! built as JSON values first (2.1 GB for a 292 MB document).

use std::time::Duration;

use wmhcct_e2e::*;

/// Address space the commands get, KiB.
const LIMIT_KIB: u64 = 400_000;
/// Address space the JSON documents are written in, KiB (the text report
/// of the same report peaks at ~50 MB resident).
const JSON_LIMIT_KIB: u64 = 200_000;

/// `wmhcct ARGS` under `ulimit -v LIMIT_KIB`.
fn limited(w: &WorkDir, args: &[&str]) -> Output {
    limited_to(w, LIMIT_KIB, args)
}

/// `wmhcct ARGS` under `ulimit -v kib`.
fn limited_to(w: &WorkDir, kib: u64, args: &[&str]) -> Output {
    let mut c = command(
        "sh",
        &["-c", &format!("ulimit -v {kib}; exec \"$0\" \"$@\"")],
        &w.path,
    );
    c.arg(bin()).args(args).env_remove("LD_PRELOAD");
    run_cmd(&mut c, Duration::from_secs(300))
}

#[test]
fn export_plot_and_diff_of_many_deep_contexts_in_bounded_memory() {
    let w = WorkDir::new("big-reports");
    let stress = compile(
        "../../benches/alloc_stress.c",
        &w.path,
        Opt::Release,
        &["-pthread", "-Wl,--no-as-needed", "-lm"],
    );
    let h5 = w.join("big.h5");
    let args = [
        "--events",
        "1000000",
        "--contexts",
        "30000",
        "--depth",
        "120",
        "--order",
        "random",
    ];
    let out = run_traced_timeout(&stress, &args, &w.path, &h5, &[], Duration::from_secs(300));
    assert_eq!(out.code, 0, "{}", out.describe());
    let h5s = h5.to_string_lossy().into_owned();

    let folded = limited(
        &w,
        &["export", &h5s, "--format", "folded", "--weight", "count"],
    );
    assert_eq!(folded.code, 0, "{}", folded.describe());
    // Every stack of the report, root first, with its calls; they add up
    // to the program's allocations.
    let lines = folded.stdout.lines().count();
    assert!(lines >= 20_000, "{lines} folded stacks");
    let calls: u64 = folded
        .stdout
        .lines()
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum();
    let r = report_json(&h5);
    assert_eq!(calls, total_count(&r, "malloc"), "folded calls");

    let plots = w.join("plots");
    let plot = limited(&w, &["plot", &h5s, "--out-dir", plots.to_str().unwrap()]);
    assert_eq!(plot.code, 0, "{}", plot.describe());
    assert!(plots.join("flame.svg").is_file() && plots.join("contexts.png").is_file());

    // The whole report as JSON, each context with its 120-frame stack, as
    // the JSON the other commands are checked against.
    let json = limited_to(&w, JSON_LIMIT_KIB, &["report", "--json", &h5s]);
    assert_eq!(json.code, 0, "{}", json.describe());
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).expect("report --json");
    assert_eq!(doc, r, "report --json within {JSON_LIMIT_KIB} KiB");
    let frames: usize = doc["contexts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["stack"].as_array().unwrap().len())
        .sum();
    assert!(frames >= 100_000, "{frames} frames in the JSON");
    let exported = w.join("all.json");
    let export = limited_to(
        &w,
        JSON_LIMIT_KIB,
        &[
            "export",
            &h5s,
            "--format",
            "json",
            "-o",
            exported.to_str().unwrap(),
        ],
    );
    assert_eq!(export.code, 0, "{}", export.describe());
    let text = std::fs::read_to_string(&exported).unwrap();
    assert_eq!(
        text, json.stdout,
        "export --format json is report --json's document"
    );

    let diff = limited(&w, &["diff", &h5s, &h5s]);
    assert_eq!(diff.code, 0, "{}", diff.describe());
    assert!(
        diff.stdout.contains("no context changed"),
        "{}",
        diff.stdout
    );
}
