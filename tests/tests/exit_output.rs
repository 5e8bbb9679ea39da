//! The closing line at exit, with the program's stdout and stderr in one
//! pipe (`./app > log 2>&1`, Slurm's output file, `2>&1 | cat`): stdout is
//! then fully buffered and exit() flushes what is left of it. The
//! program's bytes are those of the untraced run, in the same order, and
//! the tracer's closing line comes after them. Until 2026-11-27 it came
//! before: the report was written from a stream of the tracer's, the first
//! that glibc flushes at exit (`interpose/src/last_flush.rs`).
//! `tests/programs/exit_output.c`.

use std::path::{Path, PathBuf};

use wmhcct_e2e::*;

/// The closing line naming `report`.
fn closing_line(report: &Path) -> String {
    format!("wmhcct: report written to {}\n", report.display())
}

/// `exit_output MODE` untraced and traced (into `MODE.h5`), both with
/// `2>&1`, which end with the same exit code: (untraced, traced, report).
fn plain_and_traced(w: &WorkDir, mode: &str, stdin_open: bool) -> (Output, Output, PathBuf) {
    let exe = compile("exit_output.c", &w.path, Opt::Release, &["-pthread"]);
    let plain = run_merged(&exe, &[mode], &w.path, None, stdin_open);
    let h5 = w.join(format!("{mode}.h5"));
    let traced = run_merged(&exe, &[mode], &w.path, Some(&h5), stdin_open);
    assert_eq!(traced.code, plain.code, "{mode}: {}", traced.describe());
    (plain, traced, h5)
}

/// [`plain_and_traced`], and the traced output is the untraced one and
/// then the closing line. Returns the untraced output.
fn same_output_then_closing_line(w: &WorkDir, mode: &str, stdin_open: bool) -> String {
    let (plain, traced, h5) = plain_and_traced(w, mode, stdin_open);
    assert_eq!(
        traced.stdout,
        format!("{}{}", plain.stdout, closing_line(&h5)),
        "{mode}: the program's output, then the closing line"
    );
    assert_eq!(report_json(&h5)["reason"], "exit");
    plain.stdout
}

#[test]
fn closing_line_follows_buffered_stdout() {
    let w = WorkDir::new("exit-output-lines");
    let plain = same_output_then_closing_line(&w, "lines", false);
    assert_eq!(
        plain, "to stderr after line 1\nline 0\nline 1\nline 2\n",
        "stdout in a pipe is flushed at exit"
    );
}

/// Streams made by the program after stdout come before it in glibc's
/// list, and exit flushes them first: that order is kept, a wide stream's
/// too; the file gets its line.
#[test]
fn program_streams_keep_their_order() {
    let w = WorkDir::new("exit-output-streams");
    let plain = same_output_then_closing_line(&w, "streams", false);
    assert_eq!(
        plain,
        "wide stream on fd 1\nsecond stream on fd 1\nstdout first\nstdout last\n"
    );
    assert_eq!(
        std::fs::read_to_string(w.join("streams.txt")).unwrap(),
        "a buffered stream to a file\n"
    );
}

/// A thread blocked in `fgets(stdin)`, on a pipe that stays open, holds
/// stdin's lock while main returns: the process ends as untraced. Where
/// that thread holds stdout's lock too, stdout is left to glibc's own
/// flush (never waited for): the program's output is unchanged, only the
/// closing line comes before stdout's last line then.
#[test]
fn thread_blocked_reading_stdin() {
    let w = WorkDir::new("exit-output-stdin");
    let plain = same_output_then_closing_line(&w, "stdin", true);
    assert_eq!(plain, "main returns\nmain before the thread\n");

    let (plain, traced, h5) = plain_and_traced(&w, "held", true);
    assert_eq!(
        plain.stdout,
        "main returns\nwritten by a thread that holds stdout\n"
    );
    assert_eq!(without_closing_line(&traced.stdout, &h5), plain.stdout);
    assert_eq!(tracer_lines(&traced.stdout), [closing_line(&h5).trim_end()]);
}

/// A thread holds one of the program's streams, with output in it, when
/// main exits: glibc's clean-up flushes it in its turn, underneath that
/// thread. The tracer, which never waits for a stream's lock, leaves it,
/// and every later stream on the same file, to glibc's pass: the
/// program's lines keep their order (until 2026-11-27 the held stream's
/// line came last, after stdout's), and the closing line comes before the
/// held stream's.
#[test]
fn held_stream_keeps_its_place() {
    let w = WorkDir::new("exit-output-order");
    let (plain, traced, h5) = plain_and_traced(&w, "order", false);
    assert_eq!(
        plain.stdout,
        "newest\nsecond newest, held by a thread\noldest of the three\nstdout\n"
    );
    assert_eq!(
        traced.stdout,
        format!(
            "newest\n{}second newest, held by a thread\noldest of the three\nstdout\n",
            closing_line(&h5)
        )
    );
    assert_eq!(report_json(&h5)["reason"], "exit");
}

/// A last line without its newline: the closing line follows it.
#[test]
fn partial_last_line() {
    let w = WorkDir::new("exit-output-partial");
    let plain = same_output_then_closing_line(&w, "partial", false);
    assert_eq!(plain, "a line\nno newline at the end");
}

/// stdout a pipe whose reader has gone (`./app | head -1`): the program's
/// flush at exit raises SIGPIPE, which ends it, as untraced, but only once
/// the report is written (the tracer holds the signal back while it
/// flushes the program's streams, then raises it).
#[test]
fn stdout_pipe_without_reader() {
    let w = WorkDir::new("exit-output-epipe");
    let exe = compile("exit_output.c", &w.path, Opt::Release, &["-pthread"]);
    // Python gives the program the write end of a pipe it has closed the
    // read end of, and prints its stderr and its status (-13: SIGPIPE).
    let py = "import os, subprocess, sys\n\
              r, w = os.pipe()\n\
              os.close(r)\n\
              env = dict(os.environ)\n\
              if 'E2E_PRELOAD' in env:\n    env['LD_PRELOAD'] = env.pop('E2E_PRELOAD')\n\
              p = subprocess.run(sys.argv[1:], stdout=w, stderr=subprocess.PIPE, env=env)\n\
              sys.stdout.write(p.stderr.decode() + 'status %d\\n' % p.returncode)\n";
    let run = |report: Option<&Path>| {
        let exe = exe.to_string_lossy();
        let mut c = command(PYTHON, &["-c", py, &exe, "lines"], &w.path);
        if let Some(report) = report {
            c.env("E2E_PRELOAD", lib()).env("WMHCCT_OUT", report);
        }
        let out = run_cmd(&mut c, TIMEOUT);
        assert_eq!(out.code, 0, "{}", out.describe());
        out.stdout
    };
    let plain = run(None);
    assert_eq!(plain, "to stderr after line 1\nstatus -13\n");
    let h5 = w.join("epipe.h5");
    let traced = run(Some(&h5));
    assert_eq!(
        traced,
        format!("to stderr after line 1\n{}status -13\n", closing_line(&h5))
    );
    assert_eq!(report_json(&h5)["reason"], "exit");
}

/// stdout a file under a file-size limit (`ulimit -f`, a batch system's
/// RLIMIT_FSIZE) that the program's flush at exit runs past: the write
/// raises SIGXFSZ, which ends the process, as untraced, with the same
/// bytes in the file. The tracer holds the signal back while it flushes
/// the program's streams and raises it after its report, which the same
/// limit keeps it from writing: it says so on stderr, and ends the same.
#[test]
fn stdout_file_past_its_size_limit() {
    let w = WorkDir::new("exit-output-fsize");
    let exe = compile("exit_output.c", &w.path, Opt::Release, &["-pthread"]);
    // "line 0\nline 1\nline 2\n" is 21 bytes: the limit lets 20 through.
    let py = "import os, resource, subprocess, sys\n\
              out = open(sys.argv[1], 'wb')\n\
              env = dict(os.environ)\n\
              if 'E2E_PRELOAD' in env:\n    env['LD_PRELOAD'] = env.pop('E2E_PRELOAD')\n\
              lim = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (20, 20))\n\
              p = subprocess.run(sys.argv[2:], stdout=out, stderr=subprocess.PIPE, env=env, preexec_fn=lim)\n\
              sys.stdout.write(p.stderr.decode() + 'status %d\\n' % p.returncode)\n";
    let run = |name: &str, report: Option<&Path>| {
        let (exe, file) = (exe.to_string_lossy(), w.join(name));
        let mut c = command(
            PYTHON,
            &["-c", py, &file.to_string_lossy(), &exe, "lines"],
            &w.path,
        );
        if let Some(report) = report {
            c.env("E2E_PRELOAD", lib()).env("WMHCCT_OUT", report);
        }
        let out = run_cmd(&mut c, TIMEOUT);
        assert_eq!(out.code, 0, "{}", out.describe());
        (out.stdout, std::fs::read(file).unwrap())
    };
    let (plain, plain_file) = run("plain.txt", None);
    assert_eq!(plain, "to stderr after line 1\nstatus -25\n");
    assert_eq!(plain_file, b"line 0\nline 1\nline 2"[..20]);
    let h5 = w.join("fsize.h5");
    let (traced, traced_file) = run("traced.txt", Some(&h5));
    assert_eq!(traced_file, plain_file);
    let lines: Vec<&str> = traced.lines().collect();
    assert_eq!(lines.first(), Some(&"to stderr after line 1"), "{traced}");
    assert_eq!(lines.last(), Some(&"status -25"), "{traced}");
    let tracer = tracer_lines(&traced);
    assert!(
        !tracer.is_empty() && tracer.iter().all(|l| !l.contains("report written")),
        "a failure to write the report is said, no closing line: {traced}"
    );
}
