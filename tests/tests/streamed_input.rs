//! Reports and profiles given to `wmhcct` as streams: `-` (standard input
//! at the end of a pipeline), a pipe by name (`<(cat r.h5)`, as from `ssh
//! node cat r.h5`), `/dev/stdin`, a FIFO. Each command reads them as it
//! reads the file itself; before, a report through a pipe failed with a
//! false "checksum mismatch". A stream that is not a report, an empty one,
//! `-` given twice and `-` at a terminal get one line naming standard input
//! and the problem. No copy is left behind in `TMPDIR`.

mod rel_common;

use std::path::{Path, PathBuf};

use rel_common::*;
use wmhcct_e2e::*;

/// A report (`pattern.h5`, sealed HDF5) and a raw profile of the same
/// program (`p.h5.wmprof`: the converter failed, so the tracer kept it).
fn report_and_profile(w: &WorkDir) -> (PathBuf, PathBuf) {
    let exe = compile("pattern.c", &w.path, Opt::Debug, &[]);
    let h5 = w.join("pattern.h5");
    let out = run_traced(&exe, &[] as &[&str], &w.path, &h5, &[]);
    assert_eq!(out.code, 0, "{}", out.describe());
    (h5, real_profile(w))
}

/// `script` run by bash in `w` with `TMPDIR` set to `tmp`.
fn bash(w: &WorkDir, tmp: &Path, script: &str) -> Output {
    let mut c = command("bash", &["-c", script], &w.path);
    c.env("W", bin()).env("TMPDIR", tmp);
    run_cmd(&mut c, std::time::Duration::from_secs(120))
}

/// `script` must succeed; its standard output.
fn bash_ok(w: &WorkDir, tmp: &Path, script: &str) -> String {
    let out = bash(w, tmp, script);
    assert_eq!(out.code, 0, "{script}: {}", out.describe());
    assert!(out.stderr.is_empty(), "{script}: {}", out.describe());
    out.stdout
}

/// `script` must fail with one line on stderr naming standard input and
/// one of `problem`.
fn bash_fails(w: &WorkDir, tmp: &Path, script: &str, problem: &str) {
    let out = bash(w, tmp, script);
    let what = format!("{script}: {}", out.describe());
    assert_ne!(out.code, 0, "{what}");
    assert!(out.code < 128, "killed by a signal: {what}");
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line on stderr: {what}");
    assert!(lines[0].starts_with("wmhcct: error: "), "{what}");
    assert!(lines[0].contains("standard input"), "names stdin: {what}");
    assert!(lines[0].contains(problem), "says {problem:?}: {what}");
    assert_no_panic(&out.stderr, &what);
    assert!(out.stdout.is_empty(), "{what}");
}

fn assert_no_copies_left(tmp: &Path) {
    let left: Vec<_> = std::fs::read_dir(tmp)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(left.is_empty(), "copies left in TMPDIR: {left:?}");
}

#[test]
fn reports_and_profiles_read_through_streams_as_from_files() {
    let w = WorkDir::new("streamed");
    let tmp = w.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let (h5, prof) = report_and_profile(&w);
    for file in [&h5, &prof] {
        let f = file.to_string_lossy();
        for args in ["--json", "--top 3", "--by leaked --top 2"] {
            let direct = bash_ok(&w, &tmp, &format!("\"$W\" report '{f}' {args}"));
            assert!(direct.contains("malloc"), "{direct}");
            for (how, script) in [
                ("-", format!("cat '{f}' | \"$W\" report - {args}")),
                ("<()", format!("\"$W\" report <(cat '{f}') {args}")),
                ("/dev/stdin", format!("cat '{f}' | \"$W\" report /dev/stdin {args}")),
                (
                    "fifo",
                    format!("rm -f fifo; mkfifo fifo; cat '{f}' > fifo & \"$W\" report fifo {args}; wait"),
                ),
            ] {
                let streamed = bash_ok(&w, &tmp, &script);
                assert_eq!(streamed, direct, "{how} gives what the file gives: {script}");
            }
        }
        // export and plot read the same way.
        let folded = bash_ok(&w, &tmp, &format!("\"$W\" export '{f}' --format folded"));
        assert!(!folded.is_empty());
        let piped = bash_ok(
            &w,
            &tmp,
            &format!("cat '{f}' | \"$W\" export - --format folded"),
        );
        assert_eq!(piped, folded, "export -");
        let plots = w.join("plots");
        let _ = std::fs::remove_dir_all(&plots);
        bash_ok(
            &w,
            &tmp,
            &format!(
                "cat '{f}' | \"$W\" plot - --out-dir '{}' --format svg",
                plots.display()
            ),
        );
        for svg in ["memory.svg", "contexts.svg", "flame.svg", "index.html"] {
            assert!(plots.join(svg).is_file(), "plot - wrote {svg}");
        }
    }
    // diff: one side from standard input, named so.
    let f = h5.to_string_lossy();
    let direct = bash_ok(&w, &tmp, &format!("\"$W\" diff '{f}' '{f}' --json"));
    let piped = bash_ok(&w, &tmp, &format!("cat '{f}' | \"$W\" diff '{f}' - --json"));
    let (d, p): (Value, Value) = (
        serde_json::from_str(&direct).unwrap(),
        serde_json::from_str(&piped).unwrap(),
    );
    assert_eq!(d["totals"], p["totals"], "{piped}");
    assert_eq!(p["b"]["file"], "-", "{piped}");
    let text = bash_ok(&w, &tmp, &format!("cat '{f}' | \"$W\" diff - '{f}'"));
    assert!(text.starts_with("A: standard input ("), "{text}");
    // convert and merge take a profile from standard input; removing the
    // input leaves a stream alone.
    let p = prof.to_string_lossy();
    let converted = w.join("converted.h5");
    bash_ok(
        &w,
        &tmp,
        &format!(
            "cat '{p}' | \"$W\" convert - -o '{}' --remove-input",
            converted.display()
        ),
    );
    let merged = w.join("merged.h5");
    let script = format!("cat '{p}' | \"$W\" merge - -o '{}'", merged.display());
    let out = bash(&w, &tmp, &script);
    assert_eq!(out.code, 0, "{script}: {}", out.describe());
    assert!(
        out.stderr.starts_with("wmhcct: merged 1 profile(s)"),
        "{script}: {}",
        out.describe()
    );
    assert!(prof.is_file(), "the profile the stream came from stays");
    let from_file = report_json(&prof);
    for r in [&converted, &merged] {
        let streamed = report_json(r);
        assert_eq!(
            alloc_totals(&streamed),
            alloc_totals(&from_file),
            "{} from a stream",
            r.display()
        );
    }
    assert_no_copies_left(&tmp);
}

#[test]
fn bad_streams_get_one_line_naming_standard_input() {
    let w = WorkDir::new("streamed-bad");
    let tmp = w.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let (h5, _) = report_and_profile(&w);
    let f = h5.to_string_lossy();
    bash_fails(&w, &tmp, "\"$W\" report - < /dev/null", "empty");
    bash_fails(
        &w,
        &tmp,
        "printf 'just text' | \"$W\" report -",
        "not a wmhcct",
    );
    // An endless stream is refused from its first bytes, not copied.
    bash_fails(&w, &tmp, "cat /dev/zero | \"$W\" report -", "not a wmhcct");
    // A report cut short in the pipe.
    bash_fails(
        &w,
        &tmp,
        &format!("head -c 3000 '{f}' | \"$W\" report -"),
        "report",
    );
    bash_fails(
        &w,
        &tmp,
        &format!("cat '{f}' | \"$W\" diff - -"),
        "more than once",
    );
    // No room for the copy: the line says where it was to go.
    bash_fails(
        &w,
        &tmp,
        &format!("cat '{f}' | TMPDIR=/nonexistent \"$W\" report -"),
        "copying the stream into /nonexistent (TMPDIR)",
    );
    // Standard input at a terminal: refused rather than waited on.
    let out = wmhcct_at_terminal(&w.path, &["report", "-"], &[("TMPDIR", &tmp)]);
    assert_eq!(out.code, 1, "{}", out.describe());
    assert!(
        out.stdout.contains("standard input is a terminal"),
        "{}",
        out.describe()
    );
    assert_no_copies_left(&tmp);
}
