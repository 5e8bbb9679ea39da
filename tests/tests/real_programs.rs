//! Real, large programs under the tracer: /bin/ls and the Debian Python.
//! Output and exit code are identical with and without the tracer, and a
//! report is written.

use std::path::Path;

use wmhcct_e2e::*;

/// `ls -la /` without the lines of /tmp and /proc: the other tests create
/// directories in /tmp and start processes while this runs, which changes
/// their link counts (and /tmp's time).
fn without_tmp(ls: &str) -> String {
    ls.lines()
        .filter(|l| !l.ends_with(" tmp") && !l.ends_with(" proc"))
        .map(|l| format!("{l}\n"))
        .collect()
}

fn same_with_and_without(
    exe: &str,
    args: &[&str],
    name: &str,
    filter: fn(&str) -> String,
) -> Value {
    let w = WorkDir::new(name);
    let plain = run_plain(exe, args, &w.path);
    let h5 = w.join(format!("{name}.h5"));
    let traced = run_traced(exe, args, &w.path, &h5, &[]);
    assert_eq!(traced.code, plain.code, "exit code: {}", traced.describe());
    assert_eq!(
        filter(&traced.stdout),
        filter(&plain.stdout),
        "stdout of {exe} {args:?}"
    );
    assert_eq!(
        without_closing_line(&traced.stderr, &h5),
        plain.stderr,
        "stderr of {exe} {args:?} (less the tracer's closing line)"
    );
    let ours = tracer_lines(&traced.stderr);
    assert!(
        ours.len() <= 1 && ours.iter().all(|l| l.contains(h5.to_str().unwrap())),
        "at most one tracer line, naming the report: {ours:?}"
    );
    let r = report_json(&h5);
    assert!(
        total_count(&r, "malloc") > 0,
        "{exe} allocates: {}",
        alloc_totals(&r)
    );
    assert!(!contexts(&r).is_empty(), "{exe}: contexts");
    r
}

#[test]
fn ls_root() {
    let r = same_with_and_without("/bin/ls", &["-la", "/"], "ls", without_tmp);
    assert!(
        r["program"].as_str().unwrap_or("").ends_with("ls"),
        "{}",
        r["program"]
    );
}

#[test]
fn python_workload() {
    assert!(
        Path::new(PYTHON).is_file(),
        "{PYTHON} missing: run scripts/setup.sh"
    );
    let script = "d = {str(i): i * i for i in range(200000)}\n\
                  l = [str(i) * 3 for i in range(200000)]\n\
                  s = sorted(l, key=len)\n\
                  print(len(d), sum(d.values()) % 1000003, len(''.join(s)))\n";
    let r = same_with_and_without(PYTHON, &["-c", script], "python", |s| s.to_string());
    assert!(
        total_count(&r, "malloc") > 1000,
        "python allocates a lot: {}",
        alloc_totals(&r)
    );
}

#[test]
fn failing_ls_keeps_exit_code_and_stderr() {
    let w = WorkDir::new("ls-fail");
    let plain = run_plain("/bin/ls", &["/nonexistent"], &w.path);
    assert_eq!(plain.code, 2);
    let h5 = w.join("ls.h5");
    let traced = run_traced("/bin/ls", &["/nonexistent"], &w.path, &h5, &[]);
    assert_eq!(traced.code, 2, "{}", traced.describe());
    assert_eq!(traced.stdout, "");
    assert_eq!(
        without_closing_line(&traced.stderr, &h5),
        plain.stderr,
        "ls's own message is unchanged"
    );
    assert!(traced.stderr.contains("/nonexistent"), "{}", traced.stderr);
    let r = report_json(&h5);
    assert!(total_count(&r, "malloc") > 0);
}
