//! The `wmhcct` command: bad input to `report` fails cleanly (one line on
//! stderr naming the file, no panic), `run` passes the exit code on, and the
//! text report (and `diff`) give a recursion once with its length.

use std::path::Path;

use wmhcct_e2e::*;

fn report_fails_cleanly(file: &Path) {
    let f = file.to_str().unwrap();
    assert_cli_fails_cleanly(&["report", f, "--json"], file);
}

/// `src` built into `w/dir` (with `extra` compiler flags) and run traced
/// in exact mode; the path of its report.
fn exact_report(w: &WorkDir, src: &str, dir: &str, extra: &[&str]) -> String {
    traced_report(w, src, dir, extra, &[("WMHCCT_EXACT", "1")])
}

/// [`exact_report`] with the tracer's settings `env` instead.
fn traced_report(
    w: &WorkDir,
    src: &str,
    dir: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> String {
    let at = w.join(dir);
    std::fs::create_dir_all(&at).unwrap();
    let exe = compile(src, &at, Opt::Debug, extra);
    let h5 = w.join(format!("{dir}.h5"));
    let out = run_traced(&exe, &[] as &[&str], &at, &h5, env);
    assert_eq!(out.code, 0, "{}", out.describe());
    h5.to_string_lossy().into_owned()
}

/// The standard output of `wmhcct ARGS`, which must succeed.
fn wmhcct_out(w: &WorkDir, args: &[&str]) -> String {
    cli_out(&w.path, args)
}

/// The JSON `wmhcct ARGS` prints.
fn wmhcct_json(w: &WorkDir, args: &[&str]) -> Value {
    serde_json::from_str(&wmhcct_out(w, args)).unwrap()
}

/// `wmhcct plot H5 --format svg EXTRA` into `w/plots`: the hottest-contexts
/// plot's SVG.
fn contexts_svg(w: &WorkDir, h5: &str, extra: &[&str]) -> String {
    let plots = w.join("plots");
    let plots_s = plots.to_string_lossy().into_owned();
    let args = [
        &["plot", h5, "--out-dir", &plots_s, "--format", "svg"],
        extra,
    ]
    .concat();
    wmhcct_out(w, &args);
    std::fs::read_to_string(plots.join("contexts.svg")).unwrap()
}

/// A real report, for the truncated-file case.
fn real_report(w: &WorkDir) -> std::path::PathBuf {
    let exe = compile("exitcode.c", &w.path, Opt::Debug, &[]);
    let h5 = w.join("real.h5");
    let out = run_traced(&exe, &["0"], &w.path, &h5, &[]);
    assert_eq!(out.code, 0, "{}", out.describe());
    assert!(h5.is_file(), "no report written: {}", out.describe());
    h5
}

#[test]
fn report_missing_file() {
    let w = WorkDir::new("cli-missing");
    report_fails_cleanly(&w.join("does-not-exist.h5"));
}

#[test]
fn report_empty_file() {
    let w = WorkDir::new("cli-empty");
    let p = w.join("empty.h5");
    std::fs::write(&p, b"").unwrap();
    report_fails_cleanly(&p);
}

#[test]
fn report_text_file() {
    let w = WorkDir::new("cli-text");
    let p = w.join("notes.h5");
    std::fs::write(&p, "this is not a report\njust text\n").unwrap();
    report_fails_cleanly(&p);
}

#[test]
fn report_random_bytes() {
    let w = WorkDir::new("cli-random");
    let p = w.join("random.h5");
    // Deterministic pseudo-random bytes (xorshift).
    let mut x: u64 = 0x9e3779b97f4a7c15;
    let bytes: Vec<u8> = (0..65536)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(&p, bytes).unwrap();
    report_fails_cleanly(&p);
}

#[test]
fn report_truncated_report() {
    let w = WorkDir::new("cli-truncated");
    let h5 = real_report(&w);
    let data = std::fs::read(&h5).unwrap();
    let p = w.join("truncated.h5");
    std::fs::write(&p, &data[..data.len() / 2]).unwrap();
    report_fails_cleanly(&p);
}

#[test]
fn report_foreign_hdf5() {
    let w = WorkDir::new("cli-foreign");
    report_fails_cleanly(&foreign_hdf5(&w, "foreign.h5"));
}

#[test]
fn run_passes_exit_code_and_writes_report() {
    let w = WorkDir::new("cli-run");
    let exe = compile("exitcode.c", &w.path, Opt::Debug, &[]);
    let h5 = w.join("run.h5");
    let mut c = command(bin(), &[] as &[&str], &w.path);
    c.arg("run").arg("--out").arg(&h5).arg("--").arg(&exe);
    let out = run_cmd(&mut c, TIMEOUT);
    assert_eq!(out.code, 7, "exit code passed on: {}", out.describe());
    assert_eq!(out.stdout, "exiting with 7\n");
    assert_clean_stderr(&out, &h5);
    let r = report_json(&h5);
    assert_eq!(total_count(&r, "calloc"), 1, "{}", alloc_totals(&r));
    let work = context_with(&r, "malloc", "work");
    assert_eq!(u64_of(&work["count"]), 1, "{work}");
    assert_eq!(u64_of(&work["leaked_bytes"]), 1000, "{work}");

    // Another code, through arguments, with a collector thread.
    let h5b = w.join("run3.h5");
    let mut c = command(bin(), &[] as &[&str], &w.path);
    c.arg("run")
        .arg("--out")
        .arg(&h5b)
        .args(["--collector", "thread"])
        .arg("--")
        .arg(&exe)
        .arg("3");
    let out = run_cmd(&mut c, TIMEOUT);
    assert_eq!(out.code, 3, "{}", out.describe());
    assert_clean_stderr(&out, &h5b);
    let r = report_json(&h5b);
    let work = context_with(&r, "malloc", "work");
    assert_eq!(u64_of(&work["count"]), 1, "{work}");

    // Without `--`, as `time` or `heaptrack` take a command: the first
    // word that is not an option of run's starts the command, and the
    // options after it are the command's.
    let h5c = w.join("run-plain.h5");
    let mut c = command(bin(), &[] as &[&str], &w.path);
    c.arg("run")
        .arg("--out")
        .arg(&h5c)
        .arg(&exe)
        .args(["5", "--out", "x"]);
    let out = run_cmd(&mut c, TIMEOUT);
    assert_eq!(out.code, 5, "{}", out.describe());
    assert_clean_stderr(&out, &h5c);
    assert_eq!(total_count(&report_json(&h5c), "calloc"), 1);
    // An option run does not know, before the command: clap's error.
    let mut c = command(bin(), &["run", "--bogus"], &w.path);
    c.arg(&exe);
    let out = run_cmd(&mut c, TIMEOUT);
    assert_eq!(out.code, 2, "{}", out.describe());
    assert!(
        out.stderr.contains("unexpected argument '--bogus'"),
        "{}",
        out.describe()
    );

    // A command that is not there, or not executable: 127 and 126, as
    // `env` and `timeout` give, with one line naming it.
    let text = w.join("notes.txt");
    std::fs::write(&text, "not a program\n").unwrap();
    for (cmd, code, why) in [
        (
            w.join("no-such-program"),
            127,
            "No such file or directory (os error 2)",
        ),
        (text, 126, "Permission denied (os error 13)"),
    ] {
        let mut c = command(bin(), &["run", "--"], &w.path);
        c.arg(&cmd);
        let out = run_cmd(&mut c, TIMEOUT);
        assert_eq!(out.code, code, "{}", out.describe());
        assert_eq!(
            out.stderr,
            format!("wmhcct: error: {}: cannot start: {why}\n", cmd.display()),
            "{}",
            out.describe()
        );
        assert!(out.stdout.is_empty(), "{}", out.describe());
    }

    // A placement that does not exist: clap's one-line error, no run.
    let mut c = command(bin(), &[] as &[&str], &w.path);
    c.args(["run", "--collector", "sideways", "--"]).arg(&exe);
    let out = run_cmd(&mut c, TIMEOUT);
    assert_eq!(out.code, 2, "{}", out.describe());
    assert!(
        out.stderr.contains("sideways") && out.stderr.contains("thread"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty(), "{}", out.describe());
}

#[test]
fn preload_passes_exit_code() {
    let w = WorkDir::new("preload-exit");
    let exe = compile("exitcode.c", &w.path, Opt::Debug, &[]);
    let h5 = w.join("exit.h5");
    let out = run_traced(&exe, &["42"], &w.path, &h5, &[]);
    assert_eq!(out.code, 42, "{}", out.describe());
    assert_clean_stderr(&out, &h5);
    assert!(h5.is_file());
}

/// The text report folds consecutive identical frames (a function calling
/// itself from one call site) into one line ending in "×N", and folds
/// nothing else: unfolded, its lines are the JSON stack of the same context
/// up to `main` (the C library's start-up frames below it are left out).
#[test]
fn report_text_folds_recursion_into_one_line() {
    let w = WorkDir::new("cli-fold");
    // 29 levels of level_0 calling itself, then three varying levels.
    let exe = compile("deep_stack.c", &w.path, Opt::Release, &[]);
    let h5 = w.join("deep.h5");
    let out = run_traced(&exe, &["5000"], &w.path, &h5, &[]);
    assert_eq!(out.code, 0, "{}", out.describe());
    let json = stack_names(&contexts(&report_json(&h5))[0]);

    let mut c = command(bin(), &["report", "--top", "1"], &w.path);
    c.arg(&h5).env_remove("LD_PRELOAD");
    let text = run_cmd(&mut c, TIMEOUT);
    assert_eq!(text.code, 0, "{}", text.describe());
    let lines: Vec<&str> = text
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("#1 "))
        .skip(1)
        .take_while(|l| l.starts_with("    "))
        .collect();
    let mut unfolded = Vec::new();
    let mut longest = 0;
    for l in &lines {
        let function = l.trim_start().split(" (").next().unwrap().to_string();
        let n = match l.rsplit_once("  ×") {
            Some((_, n)) => n.parse::<usize>().unwrap_or_else(|_| panic!("{l:?}")),
            None => 1,
        };
        longest = longest.max(n);
        unfolded.extend(std::iter::repeat_n(function, n));
    }
    let main = json.iter().rposition(|f| f == "main").expect("main");
    assert!(main + 1 < json.len(), "{json:?}");
    assert_eq!(unfolded, json[..=main], "text:\n{}", text.stdout);
    assert!(
        longest >= 20 && lines.len() + 19 < main,
        "recursion not folded:\n{}",
        text.stdout
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("level_0") && l.contains("  ×")),
        "{}",
        text.stdout
    );

    // `wmhcct diff` names a changed context by its first few functions,
    // the recursion as one of them.
    let h5b = w.join("deep-more.h5");
    let out = run_traced(&exe, &["10000"], &w.path, &h5b, &[]);
    assert_eq!(out.code, 0, "{}", out.describe());
    let mut c = command(bin(), &["diff", "--top", "1"], &w.path);
    c.arg(&h5).arg(&h5b).env_remove("LD_PRELOAD");
    let diff = run_cmd(&mut c, TIMEOUT);
    assert_eq!(diff.code, 0, "{}", diff.describe());
    assert!(
        diff.stdout.lines().any(|l| l.contains(" < level_0 ×")),
        "{}",
        diff.stdout
    );
}

/// Stacks deeper than `WMHCCT_MAX_DEPTH` are cut at that many frames; the
/// report says so (text: a line after the frames; JSON: `stack_cut`; folded
/// export and flame graph: under a `[cut at WMHCCT_MAX_DEPTH]` root) and says
/// nothing of the kind for whole stacks.
#[test]
fn stacks_cut_at_max_depth_are_marked() {
    let w = WorkDir::new("cli-cut");
    // Allocations 32 frames below `main`.
    let exe = compile("deep_stack.c", &w.path, Opt::Release, &[]);
    for (depth, cut) in [("8", true), ("128", false)] {
        let h5 = w.join(format!("deep-{depth}.h5"));
        let out = run_traced(
            &exe,
            &["3000"],
            &w.path,
            &h5,
            &[("WMHCCT_MAX_DEPTH", depth)],
        );
        assert_eq!(out.code, 0, "{}", out.describe());
        let r = report_json(&h5);
        let deep = contexts_with(&r, "malloc", "level_0");
        assert!(!deep.is_empty(), "{}", summary(&r));
        for c in &deep {
            let names = stack_names(c);
            assert_eq!(c["stack_cut"], cut, "max depth {depth}: {names:?}");
            if cut {
                assert_eq!(names.len(), 8, "{names:?}");
            } else {
                assert_eq!(
                    names.last().map(String::as_str),
                    Some("_start"),
                    "{names:?}"
                );
            }
        }
        let h5_s = h5.to_string_lossy().into_owned();
        let text = run_plain(bin(), &["report", &h5_s, "--top", "3"], &w.path);
        assert_eq!(text.code, 0, "{}", text.describe());
        let marks = text
            .stdout
            .lines()
            .filter(|l| {
                l == &"    … cut at 8 frames (WMHCCT_MAX_DEPTH): outer callers not recorded"
            })
            .count();
        assert_eq!(marks, if cut { 3 } else { 0 }, "{}", text.stdout);
        let folded = run_plain(bin(), &["export", &h5_s, "--format", "folded"], &w.path);
        assert_eq!(folded.code, 0, "{}", folded.describe());
        for l in folded.stdout.lines().filter(|l| l.contains(";level_0;")) {
            assert_eq!(l.starts_with("[cut at WMHCCT_MAX_DEPTH];"), cut, "{l}");
        }
    }
}

/// `wmhcct report --by`: each key puts its own context first
/// (sort_keys.c has one leader per key); `leaked` and `peak` list only the
/// contexts with bytes leaked or live at the peak; the JSON's contexts come
/// in the same order. `wmhcct export --format folded --weight` weighs the
/// collapsed stacks by the same keys, leaving out stacks of weight 0.
#[test]
fn report_and_export_by_each_key() {
    let w = WorkDir::new("cli-report-by");
    let exe = compile("sort_keys.c", &w.path, Opt::Debug, &[]);
    let h5 = w.join("sk.h5");
    let out = run_traced(&exe, &[] as &[&str], &w.path, &h5, &[]);
    assert_eq!(out.code, 0, "{}", out.describe());
    assert_eq!(out.stdout, "done\n");
    let h5_s = h5.to_string_lossy().into_owned();
    // The `sk_` function of each listed context, in order, and the header.
    let listed = |by: &str| -> (String, Vec<String>) {
        let r = run_plain(
            bin(),
            &["report", &h5_s, "--by", by, "--top", "10"],
            &w.path,
        );
        assert_eq!(r.code, 0, "{by}: {}", r.describe());
        let header = r
            .stdout
            .lines()
            .find(|l| l.starts_with("top "))
            .unwrap_or_else(|| panic!("{by}: no listing header:\n{}", r.stdout))
            .to_string();
        let mut names = Vec::new();
        let mut in_context = false;
        for l in r.stdout.lines() {
            if l.starts_with('#') {
                in_context = true;
            } else if in_context && l.trim_start().starts_with("sk_") {
                names.push(l.trim_start().split(' ').next().unwrap().to_string());
                in_context = false;
            }
        }
        (header, names)
    };
    let (h, n) = listed("count");
    assert_eq!(h, "top 4 of 4 hot contexts by count:");
    assert_eq!(
        n,
        ["sk_many_small", "sk_churn", "sk_peak_holder", "sk_leaker"]
    );
    let (h, n) = listed("bytes");
    assert_eq!(h, "top 4 of 4 hot contexts by bytes allocated:");
    assert_eq!(
        n,
        ["sk_churn", "sk_peak_holder", "sk_many_small", "sk_leaker"]
    );
    let (h, n) = listed("leaked");
    assert_eq!(
        h,
        "top 1 of 1 hot contexts that leaked (of 4), by bytes leaked:"
    );
    assert_eq!(n, ["sk_leaker"]);
    let (h, n) = listed("peak");
    assert_eq!(
        h,
        "top 1 of 1 hot contexts with bytes live at the heap's peak (of 4), by those bytes:"
    );
    assert_eq!(n, ["sk_peak_holder"]);
    // JSON: every context, in the key's order.
    let j = run_plain(
        bin(),
        &["report", &h5_s, "--json", "--by", "bytes"],
        &w.path,
    );
    assert_eq!(j.code, 0, "{}", j.describe());
    let v: serde_json::Value = serde_json::from_str(&j.stdout).unwrap();
    let bytes: Vec<u64> = contexts(&v).iter().map(|c| u64_of(&c["bytes"])).collect();
    assert_eq!(
        bytes,
        [10_240_000, 4 << 20, 16_000, 3000],
        "{}",
        summary(&v)
    );
    // Folded stacks by each weight: the `sk_` function above `malloc` and
    // the weight of each line, in tree order.
    let folded = |weight: &str| -> Vec<(String, u64)> {
        let r = run_plain(
            bin(),
            &["export", &h5_s, "--format", "folded", "--weight", weight],
            &w.path,
        );
        assert_eq!(r.code, 0, "{weight}: {}", r.describe());
        r.stdout
            .lines()
            .map(|l| {
                let (stack, n) = l.rsplit_once(' ').unwrap();
                let frames: Vec<&str> = stack.split(';').collect();
                assert_eq!(frames.last(), Some(&"malloc"), "{weight}: {l}");
                let f = frames[frames.len() - 2].to_string();
                (f, n.parse().unwrap_or_else(|_| panic!("{weight}: {l}")))
            })
            .collect()
    };
    let pairs = |v: &[(&str, u64)]| -> Vec<(String, u64)> {
        v.iter().map(|(f, n)| (f.to_string(), *n)).collect()
    };
    assert_eq!(
        folded("count"),
        pairs(&[
            ("sk_many_small", 1000),
            ("sk_churn", 100),
            ("sk_peak_holder", 4),
            ("sk_leaker", 3)
        ])
    );
    assert_eq!(
        folded("bytes"),
        pairs(&[
            ("sk_many_small", 16_000),
            ("sk_churn", 10_240_000),
            ("sk_peak_holder", 4 << 20),
            ("sk_leaker", 3000)
        ])
    );
    assert_eq!(folded("leaked"), pairs(&[("sk_leaker", 3000)]));
    assert_eq!(folded("peak"), pairs(&[("sk_peak_holder", 4 << 20)]));
    // A key that is not one gets clap's error naming the accepted values.
    for args in [
        ["report", &h5_s, "--by", "size"],
        ["export", &h5_s, "--weight", "size"],
    ] {
        let bad = run_plain(bin(), &args, &w.path);
        assert_eq!(bad.code, 2, "{}", bad.describe());
        assert!(
            bad.stderr.contains("count") && bad.stderr.contains("peak"),
            "{}",
            bad.stderr
        );
    }
}

/// A leak below the hotness threshold in calls and in bytes is still listed
/// by `report --by leaked`, marked `cold`, when it holds at least φ of the
/// bytes live at the end: with φ = 0.01, sort_keys.c's 3 leaked blocks
/// (3 of ~1100 calls, 3000 of ~14 MiB) are all of its live heap. A view by
/// calls leaves it out, and the JSON says which contexts are hot.
#[test]
fn a_cold_leak_is_listed_by_its_bytes_leaked() {
    let w = WorkDir::new("cli-cold-leak");
    let h5_s = traced_report(&w, "sort_keys.c", "sk", &[], &[("WMHCCT_PHI", "0.01")]);

    let leaked = wmhcct_out(&w, &["report", &h5_s, "--by", "leaked"]);
    let heading = "\ntop 1 of 1 contexts (1 cold) that leaked (of 4), by bytes leaked:\n\n\
                   #1 malloc  count 3  bytes 2.9 KiB  leaked 2.9 KiB  at-peak 0 B  cold\n    \
                   sk_leaker (";
    assert!(leaked.contains(heading), "{leaked}");
    assert!(
        leaked.contains("\n`cold`: below the hotness threshold (phi 0.01) in calls and in bytes"),
        "{leaked}"
    );
    // Everything live is listed.
    assert!(!leaked.contains("not listed"), "{leaked}");

    let count = wmhcct_out(&w, &["report", &h5_s, "--by", "count"]);
    assert!(
        count.contains("\ntop 3 of 3 hot contexts by count:\n"),
        "{count}"
    );
    assert!(
        !count.contains("sk_leaker") && !count.contains("  cold\n") && !count.contains("`cold`"),
        "{count}"
    );

    // JSON: each context's `hot`, by leaked and by count.
    let hot = |by: &str| -> Vec<(String, bool)> {
        let v = wmhcct_json(&w, &["report", &h5_s, "--json", "--by", by]);
        contexts(&v)
            .iter()
            .map(|c| (stack_names(c)[0].clone(), c["hot"].as_bool().unwrap()))
            .collect()
    };
    let named = |v: &[(&str, bool)]| -> Vec<(String, bool)> {
        v.iter().map(|&(f, h)| (f.to_string(), h)).collect()
    };
    assert_eq!(
        hot("leaked"),
        named(&[
            ("sk_leaker", false),
            ("sk_many_small", true),
            ("sk_churn", true),
            ("sk_peak_holder", true)
        ])
    );
    assert_eq!(
        hot("count"),
        named(&[
            ("sk_many_small", true),
            ("sk_churn", true),
            ("sk_peak_holder", true)
        ])
    );
}

/// `--focus TEXT`: `report` (text and JSON) lists only the contexts whose
/// stack has a frame naming TEXT (function, source file or module name, any
/// case; several: any) and sums them against every allocation call;
/// `export --format folded` keeps only those stacks; an empty text is
/// refused by name.
#[test]
fn focus_keeps_the_contexts_through_a_frame() {
    let w = WorkDir::new("cli-focus");
    let h5_s = exact_report(&w, "sort_keys.c", "sk", &[]);
    let json = |args: &[&str]| wmhcct_json(&w, &[&["report", &h5_s, "--json"], args].concat());
    let whole = json(&[]);
    assert!(whole["focus"].is_null(), "no focus: {}", whole["focus"]);
    let all_calls: u64 = ["malloc", "calloc", "realloc", "posix_memalign"]
        .iter()
        .map(|k| total_count(&whole, k))
        .sum();

    // Two functions, one in another case.
    let two = json(&["--focus", "SK_CHURN", "--focus", "sk_leaker"]);
    let mut leaders: Vec<String> = two["contexts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| stack_names(c)[0].clone())
        .collect();
    leaders.sort();
    assert_eq!(leaders, ["sk_churn", "sk_leaker"], "{}", two["contexts"]);
    let f = &two["focus"];
    assert_eq!(f["texts"], serde_json::json!(["SK_CHURN", "sk_leaker"]));
    assert_eq!(u64_of(&f["contexts"]), 2, "{f}");
    assert_eq!(u64_of(&f["count"]), 103, "{f}");
    assert_eq!(u64_of(&f["bytes"]), 100 * (100 << 10) + 3000, "{f}");
    assert_eq!(u64_of(&f["leaked_bytes"]), 3000, "{f}");
    assert_eq!(u64_of(&f["all_count"]), all_calls, "{f}");
    // The rest of the report is the whole program's.
    assert_eq!(two["heap"], whole["heap"]);
    assert_eq!(two["totals"], whole["totals"]);

    // A source file: the program's four contexts (main is in it too, so
    // the exact tree's every context of the program), by count.
    let file = json(&["--focus", "sort_keys.c"]);
    assert_eq!(u64_of(&file["focus"]["count"]), 1000 + 100 + 4 + 3);
    // A module's file name: the same, as the program calls no library that
    // allocates; its directory is no part of the name.
    // (`compile` names it after the source.)
    assert_eq!(
        json(&["--focus", "sort_keys-O0"])["focus"]["count"],
        file["focus"]["count"]
    );
    let dir = w.join("sk").to_string_lossy().into_owned();
    assert_eq!(u64_of(&json(&["--focus", &dir])["focus"]["contexts"]), 0);

    // The text: the sums and the list's header name the focus.
    let out = wmhcct_out(
        &w,
        &["report", &h5_s, "--focus", "sk_churn", "--by", "bytes"],
    );
    let line = format!(
        "1 contexts, 100 of {all_calls} allocation calls ({:.1}%), 9.8 MiB of ",
        100.0 * 100.0 / all_calls as f64
    );
    assert!(out.contains(&line), "{line}\n{}", out);
    assert!(
        out.contains("\ntop 1 of 1 contexts through \"sk_churn\" by bytes allocated:\n"),
        "{}",
        out
    );
    assert!(!out.contains("sk_many_small"), "{}", out);

    // The folded stacks through the focus.
    let out = wmhcct_out(
        &w,
        &[
            "export", &h5_s, "--format", "folded", "--weight", "count", "--focus", "sk_peak",
        ],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1, "{}", out);
    assert!(lines[0].ends_with(";sk_peak_holder;malloc 4"), "{}", out);

    // The JSON export is the report's JSON, focus included.
    let exported = wmhcct_out(
        &w,
        &[
            "export",
            &h5_s,
            "--format",
            "json",
            "--focus",
            "SK_CHURN",
            "--focus",
            "sk_leaker",
        ],
    );
    assert_eq!(serde_json::from_str::<Value>(&exported).unwrap(), two);

    // The hottest-contexts plot through the focus.
    let svg = contexts_svg(&w, &h5_s, &["--focus", "sk_churn"]);
    assert!(
        svg.contains("Hottest allocation contexts through "),
        "{svg}"
    );
    assert!(
        svg.contains("sk_churn") && !svg.contains("sk_many_small"),
        "only sk_churn's context"
    );

    // An empty text would match every frame: refused, naming the option.
    for option in ["--focus", "--ignore"] {
        let bad = run_plain(bin(), &["report", &h5_s, option, ""], &w.path);
        assert_eq!(bad.code, 2, "{}", bad.describe());
        assert!(bad.stderr.contains(option), "{}", bad.stderr);
    }
}

/// `--ignore TEXT` on sort_keys.c's exact report: it leaves out exactly
/// what `--focus TEXT` keeps, narrows a focus, and does so in the text,
/// the folded export and the hottest-contexts plot.
#[test]
fn ignore_leaves_out_the_contexts_through_a_frame() {
    let w = WorkDir::new("cli-ignore");
    let h5_s = exact_report(&w, "sort_keys.c", "sk", &[]);
    let json = |args: &[&str]| wmhcct_json(&w, &[&["report", &h5_s, "--json"], args].concat());
    // Ignoring a text no frame names keeps every context.
    let every = json(&["--ignore", "no_frame_names_this"]);
    let whole = json(&[]);
    assert_eq!(every["contexts"], whole["contexts"]);
    let sum = |v: &Value, key: &str| u64_of(&v["focus"][key]);
    for text in ["sk_churn", "SK_MANY_SMALL", "sort_keys.c"] {
        let (kept, left) = (json(&["--focus", text]), json(&["--ignore", text]));
        assert_eq!(left["focus"]["ignore"], serde_json::json!([text]));
        assert_eq!(left["focus"]["texts"], serde_json::json!([]));
        for key in [
            "contexts",
            "count",
            "bytes",
            "leaked_bytes",
            "peak_live_bytes",
        ] {
            assert_eq!(
                sum(&kept, key) + sum(&left, key),
                sum(&every, key),
                "{text} {key}: {}\n{}",
                kept["focus"],
                left["focus"]
            );
        }
    }
    // Narrowing a focus: the program's four contexts less two.
    let both = json(&[
        "--focus",
        "sort_keys.c",
        "--ignore",
        "sk_churn",
        "--ignore",
        "SK_MANY_SMALL",
    ]);
    let f = &both["focus"];
    assert_eq!(f["texts"], serde_json::json!(["sort_keys.c"]));
    assert_eq!(
        f["ignore"],
        serde_json::json!(["sk_churn", "SK_MANY_SMALL"])
    );
    assert_eq!(
        (u64_of(&f["contexts"]), u64_of(&f["count"])),
        (2, 4 + 3),
        "{f}"
    );
    let mut leaders: Vec<String> = both["contexts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| stack_names(c)[0].clone())
        .collect();
    leaders.sort();
    assert_eq!(leaders, ["sk_leaker", "sk_peak_holder"]);

    let out = wmhcct_out(
        &w,
        &[
            "report",
            &h5_s,
            "--focus",
            "sort_keys.c",
            "--ignore",
            "sk_churn",
        ],
    );
    for line in [
        "\nfocus:     contexts through a frame naming \"sort_keys.c\" and none naming \"sk_churn\" ",
        "\ntop 3 of 3 contexts through \"sort_keys.c\", not through \"sk_churn\" by count:\n",
    ] {
        assert!(out.contains(line), "{line}\n{}", out);
    }
    assert!(!out.contains("sk_churn ("), "{}", out);

    // The folded stacks without one function's.
    let out = wmhcct_out(
        &w,
        &[
            "export",
            &h5_s,
            "--format",
            "folded",
            "--weight",
            "count",
            "--ignore",
            "sk_many_small",
        ],
    );
    assert!(!out.contains("sk_many_small"), "{}", out);
    for kept in [
        ";sk_churn;malloc 100",
        ";sk_peak_holder;malloc 4",
        ";sk_leaker;malloc 3",
    ] {
        assert!(out.contains(kept), "{kept}\n{}", out);
    }

    // The hottest-contexts plot names what it leaves out.
    let svg = contexts_svg(&w, &h5_s, &["--ignore", "sk_churn"]);
    assert!(
        svg.contains("Hottest allocation contexts not through "),
        "{svg}"
    );
    assert!(
        svg.contains("sk_many_small") && !svg.contains("sk_churn ("),
        "sk_churn's context left out"
    );
}

/// `wmhcct diff --focus TEXT`: two builds of sort_keys.c, B's sk_churn
/// allocating 50 times instead of 100, compared through one function:
/// through sk_churn the one changed context and the sums 100 → 50 calls;
/// through sk_leaker nothing changed, and its 3 calls on both sides.
#[test]
fn diff_focus_compares_the_contexts_through_a_frame() {
    let w = WorkDir::new("cli-diff-focus");
    let a = exact_report(&w, "sort_keys.c", "a", &[]);
    let b = exact_report(&w, "sort_keys.c", "b", &["-DCHURN=50"]);
    let diff = |args: &[&str]| wmhcct_json(&w, &[&["diff", &a, &b, "--json"], args].concat());
    assert!(diff(&[])["focus"].is_null());

    let churn = diff(&["--focus", "sk_churn"]);
    assert_eq!(churn["changed_contexts"], 1, "{churn}");
    assert_eq!(churn["matched_contexts"], 1, "{churn}");
    let c = &churn["contexts"][0];
    assert_eq!(c["stack"][0], "sk_churn", "{c}");
    assert_eq!((u64_of(&c["count_a"]), u64_of(&c["count_b"])), (100, 50));
    let f = &churn["focus"];
    assert_eq!(f["texts"], serde_json::json!(["sk_churn"]));
    assert_eq!((u64_of(&f["count_a"]), u64_of(&f["count_b"])), (100, 50));
    assert_eq!(
        (u64_of(&f["bytes_a"]), u64_of(&f["bytes_b"])),
        (100 * (100 << 10), 50 * (100 << 10))
    );
    // The totals stay the whole program's.
    assert_eq!(churn["totals"], diff(&[])["totals"]);

    let leaker = diff(&["--focus", "SK_LEAKER"]);
    assert_eq!(leaker["changed_contexts"], 0, "{leaker}");
    assert_eq!(
        (
            u64_of(&leaker["focus"]["count_a"]),
            u64_of(&leaker["focus"]["count_b"])
        ),
        (3, 3)
    );

    // Ignoring sk_churn leaves nothing changed, and the rest's sums.
    let rest = diff(&["--ignore", "sk_churn"]);
    assert_eq!(rest["changed_contexts"], 0, "{rest}");
    assert_eq!(rest["focus"]["ignore"], serde_json::json!(["sk_churn"]));
    assert_eq!(
        u64_of(&rest["focus"]["count_a"]) + 100,
        u64_of(&diff(&["--ignore", "no_frame_names_this"])["focus"]["count_a"])
    );

    let out = wmhcct_out(&w, &["diff", &a, &b, "--focus", "sk_churn"]);
    assert!(
        out.contains("  calls 100 → 50 (-50), bytes 9.8 MiB → 4.9 MiB (-4.9 MiB)\n"),
        "{}",
        out
    );
    assert!(
        out.contains("\n1 contexts through \"sk_churn\" changed (1 matched by stack)"),
        "{}",
        out
    );
    let out = wmhcct_out(&w, &["diff", &a, &b, "--focus", "sk_leaker"]);
    assert!(
        out.contains("\nno context through \"sk_leaker\" changed (1 contexts matched by stack)\n"),
        "{}",
        out
    );
}

/// C++ library functions the demangler cannot read in full, or that GCC's
/// debug information names without their class and namespace, are still
/// the library's: `--group function` credits the program's functions that
/// call them. Until 2026-11-27 the report showed `_ZSt11make_shared…` and
/// `thread<main()::<lambda()> >` as allocating functions.
#[test]
fn library_frames_named_without_scope_are_still_the_librarys() {
    let w = WorkDir::new("cli-cxx-library");
    let h5 = exact_report(&w, "cxx_library_sites.cpp", "cl", &["-pthread"]);
    let v = wmhcct_json(&w, &["report", &h5, "--json", "--group", "function"]);
    let list = v["sites"]["list"].as_array().unwrap();
    let names: Vec<&str> = list
        .iter()
        .map(|s| s["function"].as_str().unwrap())
        .collect();
    for n in &names {
        assert!(
            !n.starts_with("_Z") && !n.starts_with("thread<") && !n.starts_with("_M_"),
            "{names:?}"
        );
    }
    let site = |name: &str| {
        list.iter()
            .find(|s| s["function"].as_str().unwrap().starts_with(name))
            .unwrap_or_else(|| panic!("no site {name}: {names:?}"))
    };
    // Each make_shared: its control block with the vector, and the
    // vector's buffer.
    assert_eq!(u64_of(&site("share_buffer")["count"]), 20, "{names:?}");
    assert!(u64_of(&site("start_workers")["count"]) >= 2, "{names:?}");
    // The stacks name them in full, qualified.
    let r = wmhcct_json(&w, &["report", &h5, "--json"]);
    let frames: Vec<String> = contexts(&r)
        .iter()
        .flat_map(|c| c["stack"].as_array().unwrap().clone())
        .map(|f| f["function"].as_str().unwrap().to_string())
        .collect();
    assert!(
        frames.iter().any(|f| f == "std::make_shared<…>"),
        "{frames:?}"
    );
    assert!(
        frames.iter().any(|f| f.starts_with("std::thread::thread<")),
        "{frames:?}"
    );
}

/// The text report shortens C++ names of thousands of characters to their
/// scopes and functions (`std::map<…>::operator[](…)`) and says so; the
/// JSON keeps them whole. Until 2026-11-27 one frame of long_names.cpp's
/// map insertion was a line of up to 7000 characters.
#[test]
fn long_cxx_names_are_shortened_in_the_text_report_only() {
    let w = WorkDir::new("cli-long-names");
    let h5 = exact_report(&w, "long_names.cpp", "ln", &[]);
    let text = wmhcct_out(&w, &["report", &h5]);
    let widest = text.lines().map(|l| l.chars().count()).max().unwrap();
    assert!(widest <= 400, "a line of {widest} characters:\n{text}");
    assert!(text.contains("std::map<…>::operator[]("), "{text}");
    assert!(text.contains("Registry<…>::fill(int) ("), "{text}");
    assert!(
        text.contains("\n`<…>`, `(…)`: template and parameter lists left out of names longer than 120 characters; report --json has every name whole\n"),
        "{text}"
    );
    let r = wmhcct_json(&w, &["report", &h5, "--json"]);
    let longest = contexts(&r)
        .iter()
        .flat_map(|c| c["stack"].as_array().unwrap().clone())
        .map(|f| f["function"].as_str().unwrap().to_string())
        .max_by_key(|f| f.len())
        .unwrap();
    assert!(longest.len() > 1000 && !longest.contains('…'), "{longest}");
    assert!(!text.contains(&longest[..200]), "{text}");
}

/// `wmhcct report --group function|line|module` on alloc_sites.cpp's
/// exact report: contexts summed by the function, line or module that
/// allocates, past the program's `xmalloc` wrapper and the C++ library's
/// `std::vector` frames (whose demangled names start with a return type);
/// with a focus; and the hottest-contexts plot labels the vector's context
/// by the same frame.
#[test]
fn group_sums_the_contexts_by_allocating_function_or_line() {
    let w = WorkDir::new("cli-group");
    let h5_s = exact_report(&w, "alloc_sites.cpp", "as", &[]);
    let sites = |args: &[&str]| -> Vec<Value> {
        let v = wmhcct_json(&w, &[&["report", &h5_s, "--json"], args].concat());
        assert_eq!(
            u64_of(&v["sites"]["count"]) as usize,
            v["sites"]["list"].as_array().unwrap().len(),
            "no --top: all of them"
        );
        v["sites"]["list"].as_array().unwrap().clone()
    };
    let named = |list: &[Value], name: &str| -> Vec<Value> {
        list.iter()
            .filter(|s| s["function"].as_str().unwrap().starts_with(name))
            .cloned()
            .collect()
    };
    let functions = sites(&["--group", "function"]);
    for s in &functions {
        let f = s["function"].as_str().unwrap();
        assert!(
            !f.contains("xmalloc") && !f.contains("std::") && !f.contains("operator new"),
            "a wrapper is no site: {s}"
        );
    }
    let grid = &named(&functions, "build_grid")[0];
    assert_eq!(
        (
            u64_of(&grid["count"]),
            u64_of(&grid["bytes"]),
            u64_of(&grid["contexts"])
        ),
        (15, 10 * 64 + 5 * 128, 2),
        "{grid}"
    );
    assert_eq!(grid["line"], 0, "{grid}");
    let input = &named(&functions, "read_input")[0];
    assert_eq!(
        (
            u64_of(&input["count"]),
            u64_of(&input["contexts"]),
            u64_of(&input["leaked_bytes"])
        ),
        (2, 2, 2000),
        "{input}"
    );
    // libstdc++ doubles the vector's capacity from 1 to 1024.
    let vector = &named(&functions, "fill_vector")[0];
    assert_eq!(u64_of(&vector["count"]), 11, "{vector}");

    let lines = sites(&["--group", "line"]);
    let grid_lines = named(&lines, "build_grid");
    let mut counts: Vec<u64> = grid_lines.iter().map(|s| u64_of(&s["count"])).collect();
    counts.sort();
    assert_eq!(counts, [5, 10], "{grid_lines:?}");
    assert_ne!(grid_lines[0]["line"], grid_lines[1]["line"]);
    let input_lines = named(&lines, "read_input");
    assert_eq!(
        input_lines.len(),
        1,
        "one line, two callers: {input_lines:?}"
    );
    assert_eq!(u64_of(&input_lines[0]["contexts"]), 2);

    // By module: every context of the program in one entry (the C++
    // library's frames are not its own), named by its file.
    let modules = sites(&["--group", "module"]);
    let program = &named(&modules, "alloc_sites-O0")[0];
    assert_eq!(
        (u64_of(&program["count"]), u64_of(&program["contexts"])),
        (15 + 2 + 11, 2 + 2 + 1),
        "{program}"
    );

    // Through a focus: load_a's one call.
    let focused = sites(&["--group", "function", "--focus", "load_a"]);
    assert_eq!(focused.len(), 1, "{focused:?}");
    assert_eq!(u64_of(&focused[0]["count"]), 1);

    // The text.
    let text = |args: &[&str]| wmhcct_out(&w, &[&["report", &h5_s], args].concat());
    let t = text(&["--group", "function"]);
    assert!(t.contains(" allocating functions by count:\n"), "{t}");
    assert!(
        t.contains("\n#1 build_grid (")
            && t.contains(
                "\n    count 15  bytes 1.2 KiB  leaked 0 B  at-peak 0 B  temporary 15  in 2 contexts\n"
            ),
        "{t}"
    );
    let t = text(&["--group", "line", "--by", "leaked"]);
    assert!(t.contains(" allocating lines that leaked (of "), "{t}");
    assert!(
        t.contains("read_input (") && !t.contains("build_grid ("),
        "{t}"
    );

    // The plot names the vector's context by fill_vector too.
    let svg = contexts_svg(&w, &h5_s, &[]);
    assert!(
        svg.contains("fill_vector (") && !svg.contains("_M_realloc_insert"),
        "{svg}"
    );
    // Its bars by function: build_grid's two contexts one bar; by line,
    // two bars told apart by their lines.
    let svg = contexts_svg(&w, &h5_s, &["--group", "function"]);
    assert!(svg.contains("Hottest allocating functions"), "{svg}");
    assert!(
        svg.contains("build_grid (") && !svg.contains("build_grid:"),
        "{svg}"
    );
    let svg = contexts_svg(&w, &h5_s, &["--group", "line"]);
    assert!(svg.contains("Hottest allocating lines"), "{svg}");
    assert_eq!(
        svg.matches("build_grid:").count(),
        4,
        "two lines, in both charts: {svg}"
    );
}

/// `wmhcct diff --group function|line|module`: two builds of
/// alloc_sites.cpp, B's build_grid allocating 20 times instead of 10 on
/// its first line: one function changed (15 → 25 calls), one of its two
/// lines (10 → 20), and the program's module.
#[test]
fn diff_group_compares_allocating_functions_and_lines() {
    let w = WorkDir::new("cli-diff-group");
    let a = exact_report(&w, "alloc_sites.cpp", "a", &[]);
    let b = exact_report(&w, "alloc_sites.cpp", "b", &["-DGRID_SMALL=20"]);
    let diff = |args: &[&str]| wmhcct_json(&w, &[&["diff", &a, &b, "--json"], args].concat());
    let functions = diff(&["--group", "function"]);
    assert_eq!(functions["group"], "function");
    assert_eq!(functions["changed_sites"], 1, "{functions}");
    assert!(u64_of(&functions["matched_sites"]) >= 3, "{functions}");
    let f = &functions["sites"][0];
    assert_eq!(f["stack"][0], "build_grid", "{f}");
    assert_eq!((u64_of(&f["count_a"]), u64_of(&f["count_b"])), (15, 25));
    assert_eq!(
        (u64_of(&f["bytes_a"]), u64_of(&f["bytes_b"])),
        (10 * 64 + 5 * 128, 20 * 64 + 5 * 128)
    );

    let lines = diff(&["--group", "line"]);
    assert_eq!(lines["changed_sites"], 1, "{lines}");
    let l = &lines["sites"][0];
    assert!(
        l["stack"][0].as_str().unwrap().starts_with("build_grid:"),
        "{l}"
    );
    assert_eq!((u64_of(&l["count_a"]), u64_of(&l["count_b"])), (10, 20));
    // Its other line matched, unchanged.
    assert_eq!(
        u64_of(&lines["matched_sites"]),
        u64_of(&functions["matched_sites"]) + 1,
        "{lines}"
    );
    // By module: the program's one module, the same change.
    let modules = diff(&["--group", "module"]);
    assert_eq!(modules["changed_sites"], 1, "{modules}");
    let m = &modules["sites"][0];
    assert_eq!(m["stack"][0], "alloc_sites-O0", "{m}");
    assert_eq!(
        (u64_of(&m["count_a"]), u64_of(&m["count_b"])),
        (15 + 2 + 11, 25 + 2 + 11)
    );
    // Without --group, as before.
    let contexts = diff(&[]);
    assert_eq!(contexts["group"], "context");
    assert!(contexts["contexts"].is_array() && contexts["sites"].is_null());

    let out = wmhcct_out(&w, &["diff", &a, &b, "--group", "function"]);
    assert!(
        out.contains("\n1 allocating functions changed (")
            && out.contains(
                "  build_grid (alloc_sites-O0) [malloc]\n      bytes 1.2 KiB → 1.9 KiB, calls 15 → 25\n"
            ),
        "{}",
        out
    );
}

/// `wmhcct diff` leaves out the MPI library's own contexts (allocated
/// inside MPI calls, or on its threads) as `report` does, and sums them in
/// one `not shown:` line; `--mpi-internal` lists them. The golden reports
/// (tests/golden): A, a program without MPI, against B, a 4-rank job,
/// whose MPI_Init start-up (`opal_free_list_grow_st`, +6.1 MiB) headed the
/// list until 2026-11-27. The totals and the `--max-increase` figures stay
/// the whole reports'.
#[test]
fn diff_leaves_out_the_mpi_librarys_own_contexts_unless_asked() {
    let w = WorkDir::new("cli-diff-mpi-internal");
    let golden = |name: &str| {
        root()
            .join("tests/golden")
            .join(name)
            .to_string_lossy()
            .into_owned()
    };
    let (a, b) = (golden("temporaries.h5"), golden("mpi_pattern.h5"));
    let text = |args: &[&str]| wmhcct_out(&w, &[&["diff", &a, &b], args].concat());
    let program = text(&[]);
    assert!(!program.contains("opal_free_list_grow_st"), "{program}");
    assert!(
        program.contains("ctx_b (mpi_pattern) [malloc]"),
        "{program}"
    );
    assert!(
        program
            .contains("\nnot shown: 189 changed contexts allocated inside MPI calls (MPI_Init +")
            && program
                .contains(": the MPI library's own allocations (--mpi-internal lists them)\n"),
        "{program}"
    );
    let all = text(&["--mpi-internal"]);
    assert!(all.contains("opal_free_list_grow_st"), "{all}");
    assert!(!all.contains("not shown:"), "{all}");
    // By function too.
    let functions = text(&["--group", "function"]);
    assert!(
        functions
            .contains("changed allocating functions of the contexts allocated inside MPI calls"),
        "{functions}"
    );

    let limits = [
        "--max-increase",
        "leaked=1TiB",
        "--max-increase",
        "bytes=1TiB",
        "--max-increase",
        "count=1000000000",
    ];
    let json = |args: &[&str]| {
        wmhcct_json(
            &w,
            &[&["diff", &a, &b, "--json"], &limits[..], args].concat(),
        )
    };
    let (p, all) = (json(&[]), json(&["--mpi-internal"]));
    assert_eq!(p["mpi_internal"], false);
    assert_eq!(all["mpi_internal"], true);
    let contexts = |v: &Value| v["contexts"].as_array().unwrap().clone();
    assert!(
        contexts(&p).iter().all(|c| c["inside_mpi"].is_null()),
        "{p}"
    );
    assert!(
        contexts(&all).iter().any(|c| c["inside_mpi"] == "MPI_Init"),
        "{all}"
    );
    let left = &p["mpi_own_left_out"];
    assert!(all["mpi_own_left_out"].is_null(), "{all}");
    assert_eq!(
        u64_of(&p["changed_contexts"]) + u64_of(&left["changed_contexts"]),
        u64_of(&all["changed_contexts"]),
        "{left}"
    );
    assert_eq!(u64_of(&left["bytes_a"]), 0, "{left}");
    assert!(u64_of(&left["bytes_b"]) > 20 << 20, "{left}");
    assert_eq!(left["by_routine"][0]["routine"], "MPI_Init", "{left}");
    // The totals and the limits' figures are the whole reports'.
    assert_eq!(p["totals"], all["totals"]);
    assert_eq!(p["limits"], all["limits"]);
    assert_eq!(p["limits"].as_array().unwrap().len(), 3, "{p}");

    // Nothing changed: no line for the MPI library's either.
    let same = wmhcct_out(&w, &["diff", &b, &b]);
    assert!(same.contains("\nno context changed ("), "{same}");
    assert!(!same.contains("not shown:"), "{same}");
}
