//! Gating on memory figures: `wmhcct report --max FIGURE=LIMIT` and
//! `wmhcct diff A B --max-increase FIGURE=LIMIT` on the reports of two
//! builds of sort_keys.c, B churning, holding and leaking more than A.
//! Held limits exit 0, an exceeded one exits 3 after the usual output with
//! one line on stderr naming it; bad limits are refused with the accepted
//! figures; a figure a report lacks is an error, not a pass.

use wmhcct_e2e::*;

/// sort_keys.c built with `defines` and traced in exact mode: its report.
fn report(w: &WorkDir, dir: &str, defines: &[&str]) -> String {
    let at = w.join(dir);
    std::fs::create_dir_all(&at).unwrap();
    let exe = compile("sort_keys.c", &at, Opt::Debug, defines);
    let h5 = w.join(format!("{dir}.h5"));
    let out = run_traced(&exe, &[] as &[&str], &at, &h5, &[("WMHCCT_EXACT", "1")]);
    assert_eq!(out.code, 0, "{}", out.describe());
    h5.to_string_lossy().into_owned()
}

fn wmhcct(w: &WorkDir, args: &[&str]) -> Output {
    run_plain(bin(), args, &w.path)
}

/// `wmhcct ARGS`, which must exit with `code`; its stdout.
fn expect(w: &WorkDir, args: &[&str], code: i32) -> Output {
    let r = wmhcct(w, args);
    assert_eq!(r.code, code, "wmhcct {args:?}: {}", r.describe());
    r
}

fn limits_of(out: &Output) -> Vec<Value> {
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    v["limits"].as_array().expect("a limits array").clone()
}

#[test]
fn limits_gate_a_report_and_a_diff() {
    let w = WorkDir::new("limits");
    let a = report(&w, "a", &[]);
    let b = report(&w, "b", &["-DCHURN=150", "-DPEAK_MIB=5", "-DLEAKS=4"]);
    let heap = |h5: &str| report_json(std::path::Path::new(h5))["heap"].clone();
    let (peak_a, peak_b) = (
        u64_of(&heap(&a)["peak_bytes"]),
        u64_of(&heap(&b)["peak_bytes"]),
    );
    let (live_a, live_b) = (
        u64_of(&heap(&a)["live_bytes"]),
        u64_of(&heap(&b)["live_bytes"]),
    );
    // One more MiB held at the peak, one more 1000-byte block leaked.
    assert_eq!(peak_b - peak_a, 1 << 20, "{peak_a} {peak_b}");
    assert_eq!(live_b - live_a, 1000, "{live_a} {live_b}");

    // report --max: a budget held, to the byte.
    let held = expect(&w, &["report", &b, "--max", &format!("peak={peak_b}")], 0);
    assert!(
        held.stdout.contains("\nlimits: all 1 held\n"),
        "{}",
        held.stdout
    );
    assert_eq!(held.stderr, "", "{}", held.describe());
    let budget = format!("peak={}", peak_b - 1);
    let over = expect(
        &w,
        &[
            "report",
            &b,
            "--max",
            &budget,
            "--max",
            "live=1MiB",
            "--max",
            "temporary=0",
        ],
        3,
    );
    // The usual report, then the limits, the exceeded ones marked.
    assert!(over.stdout.starts_with("program:"), "{}", over.stdout);
    assert!(
        over.stdout.contains("\nlimits: 2 of 3 exceeded\n"),
        "{}",
        over.stdout
    );
    let lines: Vec<&str> = over
        .stdout
        .lines()
        .filter(|l| l.starts_with("  peak "))
        .collect();
    assert_eq!(lines.len(), 1, "{}", over.stdout);
    assert!(lines[0].ends_with("EXCEEDED"), "{}", lines[0]);
    assert!(over
        .stdout
        .lines()
        .any(|l| l.starts_with("  live ") && l.ends_with("held")));
    let stderr: Vec<&str> = over.stderr.lines().collect();
    assert_eq!(stderr.len(), 1, "{}", over.describe());
    assert!(
        // One byte over reads alike in MiB: both in bytes.
        stderr[0].starts_with(&format!(
            "wmhcct: 2 of 3 limits exceeded: peak {peak_b} B (at most {} B)",
            peak_b - 1
        )) && stderr[0].contains(", temporary "),
        "{}",
        stderr[0]
    );
    // JSON: each limit with its value and bound.
    let j = limits_of(&expect(&w, &["report", &b, "--json", "--max", &budget], 3));
    assert_eq!(j.len(), 1);
    assert_eq!(j[0]["figure"], "peak");
    assert_eq!(
        (u64_of(&j[0]["value"]), u64_of(&j[0]["bound"])),
        (peak_b, peak_b - 1)
    );
    assert_eq!(j[0]["passed"], false);
    assert!(j[0].get("value_a").is_none());

    // diff --max-increase: B's growth over A, as an amount or a share.
    let diff = |limits: &[&str], code: i32| {
        let mut args = vec!["diff", a.as_str(), b.as_str()];
        for l in limits {
            args.extend(["--max-increase", l]);
        }
        expect(&w, &args, code)
    };
    let share = 100.0 * (peak_b - peak_a) as f64 / peak_a as f64;
    let up = format!("peak={:.2}%", share + 0.01);
    let down = format!("peak={:.2}%", share - 0.01);
    // Without MPI, `leaked` is what is live.
    let j = limits_of(&expect(
        &w,
        &["diff", &a, &b, "--json", "--max-increase", "leaked=999"],
        3,
    ));
    assert_eq!(
        (u64_of(&j[0]["value_a"]), u64_of(&j[0]["value"])),
        (live_a, live_b)
    );
    let d = diff(&[&up, "live=1000"], 0);
    assert!(d.stdout.starts_with("A: "), "{}", d.stdout);
    assert!(d.stdout.contains("\nlimits: all 2 held\n"), "{}", d.stdout);
    assert_eq!(d.stderr, "");
    let d = diff(&[&down, "live=999", "bytes=1GiB"], 3);
    assert!(
        d.stdout.contains("\nlimits: 2 of 3 exceeded\n"),
        "{}",
        d.stdout
    );
    assert!(
        d.stdout.contains(" +1.0 MiB (+"),
        "the change and its share: {}",
        d.stdout
    );
    assert_eq!(d.stderr.lines().count(), 1, "{}", d.describe());
    assert!(
        d.stderr
            .starts_with("wmhcct: 2 of 3 limits exceeded: peak +1.0 MiB (+")
            && d.stderr.contains("), live +1000 B (+")
            && d.stderr.trim_end().ends_with("(at most +999 B)"),
        "{}",
        d.stderr
    );
    // Calls: 50 more churned, one more held at the peak, one more leaked.
    let j = limits_of(&expect(
        &w,
        &["diff", &a, &b, "--json", "--max-increase", "count=52"],
        0,
    ));
    assert_eq!(
        u64_of(&j[0]["value"]) - u64_of(&j[0]["value_a"]),
        52,
        "{j:?}"
    );
    assert_eq!(j[0]["passed"], true);
    diff(&["count=51"], 3);
    // A fall holds any limit; so does no change.
    expect(
        &w,
        &[
            "diff",
            &b,
            &a,
            "--max-increase",
            "peak=0",
            "--max-increase",
            "live=0%",
        ],
        0,
    );
    expect(&w, &["diff", &a, &a, "--max-increase", "temporary=0"], 0);

    // Bad limits: refused before anything is read, naming what is accepted.
    let bad = expect(&w, &["report", &b, "--max", "heap=1GiB"], 2);
    assert!(
        bad.stderr.contains(
            "unknown figure 'heap': accepted are peak, resident, live, leaked, count, bytes, temporary"
        ),
        "{}",
        bad.stderr
    );
    let bad = expect(&w, &["report", &b, "--max", "peak=5%"], 2);
    assert!(
        bad.stderr.contains("a percentage needs a reference report"),
        "{}",
        bad.stderr
    );
    let bad = expect(&w, &["diff", &a, &b, "--max-increase", "count=1MiB"], 2);
    assert!(bad.stderr.contains("'1MiB' is no count"), "{}", bad.stderr);
    assert_eq!(bad.stdout, "");

    // A figure the report lacks: one line, exit 1, not a pass.
    let old = root().join("tests/golden/temporaries.h5");
    let old = old.to_str().unwrap();
    let r = expect(&w, &["report", old, "--max", "resident=1TiB"], 1);
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.describe());
    assert!(r.stderr.contains("has no resident figure"), "{}", r.stderr);
    // … while the same report and the traced ones have the others.
    expect(&w, &["report", old, "--max", "peak=1TiB"], 0);
    expect(&w, &["report", &b, "--max", "resident=1TiB"], 0);
    expect(&w, &["diff", old, &b, "--max-increase", "resident=0"], 1);
}
