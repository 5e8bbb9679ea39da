//! fork and fork+exec (tests/programs/forking.c).
//!
//! What the processes write: the traced parent writes WMHCCT_OUT
//! (`forking.h5`). A forked child keeps tracing, and a program a traced
//! process starts (fork+exec of /bin/echo) is traced too; each such process
//! writes its own report `<stem>-<pid>.h5` (`forking-<pid>.h5`), so it never
//! clobbers the parent's. A forked child's report starts with the parent's
//! history up to the fork. The parent's report holds only the parent's
//! events: 50 x 64 B before the fork and 25 x 256 B after, and none of the
//! child's.

use wmhcct_e2e::*;

fn check_parent(r: &Value, exe_name: &str) {
    assert!(
        r["program"].as_str().unwrap_or("").ends_with(exe_name),
        "the parent's report is the parent's: program {}",
        r["program"]
    );
    let before = context_with(r, "malloc", "parent_before");
    assert_eq!(u64_of(&before["count"]), 50, "{before}");
    assert_eq!(u64_of(&before["bytes"]), 50 * 64, "{before}");
    assert_eq!(
        frame_index(before, "parent_before"),
        Some(0),
        "{:?}",
        stack_names(before)
    );
    let after = context_with(r, "malloc", "parent_after");
    assert_eq!(u64_of(&after["count"]), 25, "{after}");
    assert_eq!(u64_of(&after["bytes"]), 25 * 256, "{after}");
    assert!(
        contexts_with(r, "malloc", "child_work").is_empty(),
        "the child's allocations are not in the parent's report: {}",
        summary(r)
    );
    assert_eq!(
        u64_of(&r["live_bytes"]),
        0,
        "the parent frees everything: {}",
        r["heap"]
    );
}

/// stderr is one line, the parent's closing line, counting the one report
/// its child wrote beside the parent's.
fn assert_only_the_parents_closing_line(out: &Output, h5: &std::path::Path) {
    assert_eq!(
        out.stderr,
        format!(
            "wmhcct: report written to {}; 1 process it started wrote its own beside it as forking-<pid>.h5\n",
            h5.display()
        ),
        "the parent's closing line only"
    );
}

#[test]
fn fork_exec_echo() {
    let w = WorkDir::new("forkexec");
    let exe = compile("forking.c", &w.path, Opt::Debug, &[]);
    let plain = run_plain(&exe, &["exec"], &w.path);
    assert_eq!(plain.code, 0, "{}", plain.describe());
    assert_eq!(plain.stdout, "hello from the child\nparent: child exit 0\n");

    let h5 = w.join("forking.h5");
    let out = run_traced(&exe, &["exec"], &w.path, &h5, &[]);
    assert_eq!(out.code, 0, "{}", out.describe());
    assert_eq!(
        out.stdout, plain.stdout,
        "echo's output and the parent's are unchanged"
    );
    // The exec'd echo writes its report silently.
    assert_only_the_parents_closing_line(&out, &h5);
    let r = report_json(&h5);
    check_parent(&r, "forking-O0");
    // The exec'd echo is traced under its own pid (it allocates in
    // setlocale) and does not overwrite the parent's report.
    let kids = child_reports(&w.path, "forking");
    assert_eq!(kids.len(), 1, "one report for the exec'd echo: {kids:?}");
    let c = report_json(&kids[0]);
    assert_ne!(c["pid"], r["pid"], "the child report is another process's");
    assert!(
        c["program"].as_str().unwrap_or("").ends_with("echo"),
        "the child report is echo's: {}",
        c["program"]
    );
}

/// A program a traced process starts (fork and exec) that ends with
/// `_exit`, as dash does under `system()`, writes its report. Until
/// 2026-11-27 it inherited the forked child's leave to skip its report
/// with `_exit`, and wrote none.
#[test]
fn an_execd_program_that_ends_with_underscore_exit_writes_its_report() {
    let w = WorkDir::new("forkexec-uexit");
    let exe = compile("forking.c", &w.path, Opt::Debug, &[]);
    let plain = run_plain(&exe, &["exec_uexit"], &w.path);
    assert_eq!(
        plain.stdout,
        "parent: child exit 6\n",
        "{}",
        plain.describe()
    );
    let h5 = w.join("forking.h5");
    let out = run_traced(&exe, &["exec_uexit"], &w.path, &h5, &[]);
    assert_eq!(out.code, 0, "{}", out.describe());
    assert_eq!(out.stdout, plain.stdout);
    assert_only_the_parents_closing_line(&out, &h5);
    check_parent(&report_json(&h5), "forking-O0");
    let kids = child_reports(&w.path, "forking");
    assert_eq!(kids.len(), 1, "the exec'd program's report: {kids:?}");
    let c = report_json(&kids[0]);
    assert_eq!(c["reason"], "_exit", "{}", summary(&c));
    let work = context_with(&c, "malloc", "child_work");
    assert_eq!(u64_of(&work["count"]), 30, "{work}");
}

#[test]
fn fork_without_exec_child_allocates() {
    let w = WorkDir::new("forknoexec");
    let exe = compile("forking.c", &w.path, Opt::Debug, &[]);
    let h5 = w.join("forking.h5");
    let out = run_traced(&exe, &["noexec"], &w.path, &h5, &[]);
    assert_eq!(out.code, 0, "{}", out.describe());
    assert_eq!(out.stdout, "parent: child exit 0\n");
    // The forked child writes its report silently.
    assert_only_the_parents_closing_line(&out, &h5);
    let r = report_json(&h5);
    check_parent(&r, "forking-O0");

    // The child keeps tracing and writes forking-<childpid>.h5: the parent's
    // history up to the fork plus its own 30 x 128 B.
    let kids = child_reports(&w.path, "forking");
    assert_eq!(kids.len(), 1, "one report for the forked child: {kids:?}");
    let c = report_json(&kids[0]);
    assert_ne!(c["pid"], r["pid"]);
    assert!(
        kids[0]
            .to_string_lossy()
            .ends_with(&format!("forking-{}.h5", c["pid"])),
        "child report named after the child's pid {}: {}",
        c["pid"],
        kids[0].display()
    );
    let work = context_with(&c, "malloc", "child_work");
    assert_eq!(u64_of(&work["count"]), 30, "{work}");
    assert_eq!(u64_of(&work["bytes"]), 30 * 128, "{work}");
    let inherited = context_with(&c, "malloc", "parent_before");
    assert_eq!(
        u64_of(&inherited["count"]),
        50,
        "history up to the fork: {inherited}"
    );
    assert!(
        contexts_with(&c, "malloc", "parent_after").is_empty(),
        "the parent's later events are not the child's: {}",
        summary(&c)
    );
}

/// A shell that runs programs and then `exec`s the last: the exec'd
/// program's closing line counts the reports the programs before it wrote
/// (they ran after the process started, before its tracer did), and not a
/// report an earlier run left there in that window. The shell makes one
/// with `touch`, under a pid below its own, as a process of an earlier run
/// has.
#[test]
fn a_shell_that_execs_counts_its_programs_not_an_earlier_runs() {
    let w = WorkDir::new("forkshellexec");
    let h5 = w.join("run.h5");
    // The last program is a shell too: coreutils' echo closes its stderr
    // before it exits, and with it the tracer's closing line.
    let script = "touch run-1.h5 && /bin/true && exec /bin/sh -c 'echo done'";
    let out = run_traced("/bin/bash", &["-c", script], &w.path, &h5, &[]);
    assert_eq!(out.code, 0, "{}", out.describe());
    assert_eq!(out.stdout, "done\n");
    // touch and true wrote theirs; run-1.h5 is the earlier run's.
    let kids: Vec<_> = child_reports(&w.path, "run")
        .into_iter()
        .filter(|p| !p.ends_with("run-1.h5"))
        .collect();
    assert_eq!(kids.len(), 2, "touch's and true's reports: {kids:?}");
    for kid in &kids {
        report_json(kid);
    }
    assert_eq!(
        out.stderr,
        format!(
            "wmhcct: report written to {}; 2 processes it started wrote their own beside it as run-<pid>.h5\n",
            h5.display()
        ),
        "sh's closing line counts touch's and true's reports"
    );
    let r = report_json(&h5);
    assert!(
        r["program"].as_str().unwrap_or("").ends_with("sh"),
        "the report is the exec'd sh's: {}",
        r["program"]
    );
}
