//! Helpers for the end-to-end tests: find the built tracer and CLI, compile
//! the test programs of `tests/programs/`, run them with and without
//! `LD_PRELOAD=libwmhcct.so`, and read reports through `wmhcct report --json`.
//!
//! The library under test is the release build of the workspace
//! (`target/release/libwmhcct.so`, `target/release/wmhcct`), or the files
//! named by `WMHCCT_LIB` / `WMHCCT_BIN`. A missing build is a failure, never a
//! skip.

use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub use serde_json::Value;

/// The workspace root (the parent of this crate).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

fn built(var: &str, name: &str) -> PathBuf {
    let p = match std::env::var_os(var).filter(|v| !v.is_empty()) {
        Some(v) => PathBuf::from(v),
        None => root().join("target/release").join(name),
    };
    assert!(
        p.is_file(),
        "{} is missing (from {}): run scripts/build.sh first",
        p.display(),
        if std::env::var_os(var).is_some() {
            var
        } else {
            "target/release"
        }
    );
    p
}

/// `libwmhcct.so`: `WMHCCT_LIB`, else `target/release/libwmhcct.so`.
pub fn lib() -> PathBuf {
    built("WMHCCT_LIB", "libwmhcct.so")
}

/// The `wmhcct` CLI: `WMHCCT_BIN`, else `target/release/wmhcct`.
pub fn bin() -> PathBuf {
    built("WMHCCT_BIN", "wmhcct")
}

/// The Debian Python (the `python3` on PATH may be a shell shim).
pub const PYTHON: &str = "/usr/bin/python3";

/// A fresh directory for one test, removed when the test passes and kept
/// (for a look at the report) when it fails.
pub struct WorkDir {
    pub path: PathBuf,
}

impl WorkDir {
    pub fn new(name: &str) -> WorkDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "wmhcct-e2e-{name}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        WorkDir { path }
    }

    pub fn join(&self, p: impl AsRef<Path>) -> PathBuf {
        self.path.join(p)
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept {} for inspection", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Optimisation level of a compiled test program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opt {
    /// `-O0 -g -fno-omit-frame-pointer -fno-inline`: exact stacks.
    Debug,
    /// `-O2 -g -fno-omit-frame-pointer` (the programs mark their functions
    /// noinline/noclone and avoid tail calls).
    Release,
}

/// Compile `tests/programs/<src>` into `dir` with the compiler chosen by the
/// extension (`.c`: cc, `.cpp`: c++, `.f90`: gfortran) and return the
/// executable.
pub fn compile(src: &str, dir: &Path, opt: Opt, extra: &[&str]) -> PathBuf {
    let source = root().join("tests/programs").join(src);
    assert!(source.is_file(), "{} is missing", source.display());
    let compiler = match source.extension().and_then(OsStr::to_str) {
        Some("c") => "cc",
        Some("cpp") | Some("cc") => "c++",
        Some("f90") | Some("f") => "gfortran",
        other => panic!("no compiler for {src} ({other:?})"),
    };
    let stem = Path::new(src)
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let exe = dir.join(match opt {
        Opt::Debug => format!("{stem}-O0"),
        Opt::Release => format!("{stem}-O2"),
    });
    let flags: &[&str] = match opt {
        Opt::Debug => &["-O0", "-g", "-fno-omit-frame-pointer", "-fno-inline"],
        Opt::Release => &["-O2", "-g", "-fno-omit-frame-pointer"],
    };
    let out = Command::new(compiler)
        .current_dir(dir)
        .args(flags)
        .args(extra)
        .arg("-o")
        .arg(&exe)
        .arg(&source)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {compiler} (run scripts/setup.sh): {e}"));
    assert!(
        out.status.success(),
        "{compiler} {src} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// The outcome of one command.
#[derive(Debug, Clone)]
pub struct Output {
    /// Exit code, or 128 + signal number when killed by a signal.
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Output {
    pub fn describe(&self) -> String {
        format!(
            "exit {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.code,
            truncate(&self.stdout),
            truncate(&self.stderr)
        )
    }
}

fn truncate(s: &str) -> &str {
    match s.char_indices().nth(4000) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// Default time limit of a command: a hang is a failure, not a stuck suite.
pub const TIMEOUT: Duration = Duration::from_secs(120);

/// Run `cmd` to completion, capturing stdout and stderr; kill it and panic
/// after `timeout`.
pub fn run_cmd(cmd: &mut Command, timeout: Duration) -> Output {
    run_cmd_with_stdin(cmd, false, timeout)
}

/// [`run_cmd`], with `stdin_open`: its stdin a pipe the test holds open
/// until the command has ended, never writing to it (a read from it
/// blocks for ever), instead of `/dev/null`.
pub fn run_cmd_with_stdin(cmd: &mut Command, stdin_open: bool, timeout: Duration) -> Output {
    use std::os::unix::process::ExitStatusExt;
    let start = Instant::now();
    let stdin = if stdin_open {
        Stdio::piped()
    } else {
        Stdio::null()
    };
    let mut child = spawn_piped(cmd, stdin);
    let _held_open = child.stdin.take();
    // Drain both pipes on threads so a chatty child never blocks.
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let to = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = so.read_to_end(&mut v);
        v
    });
    let te = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = se.read_to_end(&mut v);
        v
    });
    let Some(status) = wait_within(&mut child, timeout) else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("{cmd:?} did not finish within {timeout:?} (deadlock?): killed");
    };
    let elapsed = start.elapsed();
    let stdout = String::from_utf8_lossy(&to.join().unwrap()).into_owned();
    let stderr = String::from_utf8_lossy(&te.join().unwrap()).into_owned();
    let code = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    Output {
        code,
        stdout,
        stderr,
        elapsed,
    }
}

/// Start `cmd` with stdout and stderr piped and wait for its first line of
/// output, which must be `first` (the program is then under way).
pub fn spawn_until_line(cmd: &mut Command, first: &str) -> std::process::Child {
    use std::io::BufRead;
    let mut child = spawn_piped(cmd, Stdio::null());
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).expect("first line");
    assert_eq!(line, first, "{cmd:?}");
    child
}

/// Start `cmd` with this stdin and stdout and stderr piped.
fn spawn_piped(cmd: &mut Command, stdin: Stdio) -> std::process::Child {
    cmd.stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"))
}

/// Wait for `child` at most `limit`: its status, or `None` (still running).
pub fn wait_within(
    child: &mut std::process::Child,
    limit: Duration,
) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("wait") {
            return Some(s);
        }
        if start.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A command for `exe args` in `dir`, with no tracer variables inherited
/// from the environment of the test run.
pub fn command<S: AsRef<OsStr>>(exe: impl AsRef<OsStr>, args: &[S], dir: &Path) -> Command {
    let mut c = Command::new(exe);
    c.args(args).current_dir(dir).env_remove("LD_PRELOAD");
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("WMHCCT_") {
            c.env_remove(k);
        }
    }
    c
}

/// Run `exe args` without the tracer.
pub fn run_plain<S: AsRef<OsStr>>(exe: impl AsRef<OsStr>, args: &[S], dir: &Path) -> Output {
    run_cmd(&mut command(exe, args, dir), TIMEOUT)
}

/// What `wmhcct ARGS` prints, run in `dir` without the tracer; it must
/// exit 0.
pub fn cli_out(dir: &Path, args: &[&str]) -> String {
    let r = run_plain(bin(), args, dir);
    assert_eq!(r.code, 0, "wmhcct {args:?}: {}", r.describe());
    r.stdout
}

/// Run `exe args` with `LD_PRELOAD=libwmhcct.so`, `WMHCCT_OUT=report` and
/// `env`.
pub fn run_traced<S: AsRef<OsStr>>(
    exe: impl AsRef<OsStr>,
    args: &[S],
    dir: &Path,
    report: &Path,
    env: &[(&str, &str)],
) -> Output {
    run_traced_timeout(exe, args, dir, report, env, TIMEOUT)
}

pub fn run_traced_timeout<S: AsRef<OsStr>>(
    exe: impl AsRef<OsStr>,
    args: &[S],
    dir: &Path,
    report: &Path,
    env: &[(&str, &str)],
    timeout: Duration,
) -> Output {
    let mut c = command(exe, args, dir);
    c.env("LD_PRELOAD", lib()).env("WMHCCT_OUT", report);
    for (k, v) in env {
        c.env(k, v);
    }
    run_cmd(&mut c, timeout)
}

/// Run `exe args` in `dir` as `exe args 2>&1` does: its stderr the same
/// pipe as its stdout, both in [`Output::stdout`] in the order written.
/// Traced (`LD_PRELOAD=libwmhcct.so`, `WMHCCT_OUT=report`) when `report`
/// is given; see [`run_cmd_with_stdin`] for `stdin_open`.
pub fn run_merged<S: AsRef<OsStr>>(
    exe: impl AsRef<OsStr>,
    args: &[S],
    dir: &Path,
    report: Option<&Path>,
    stdin_open: bool,
) -> Output {
    // The shell merges the streams and is not traced itself: it sets the
    // preload for the program it becomes.
    let script = "if [ -n \"$E2E_PRELOAD\" ]; then export LD_PRELOAD=\"$E2E_PRELOAD\"; fi; \
                  unset E2E_PRELOAD; exec \"$0\" \"$@\" 2>&1";
    let mut c = command("/bin/sh", &[OsStr::new("-c"), OsStr::new(script)], dir);
    c.arg(exe).args(args);
    if let Some(report) = report {
        c.env("E2E_PRELOAD", lib()).env("WMHCCT_OUT", report);
    }
    let out = run_cmd_with_stdin(&mut c, stdin_open, TIMEOUT);
    assert!(out.stderr.is_empty(), "2>&1: {}", out.describe());
    out
}

/// The tracer's own lines on stderr (they start with `wmhcct:`).
pub fn tracer_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.starts_with("wmhcct")).collect()
}

/// stderr without the tracer's closing line naming `report`.
pub fn without_closing_line(stderr: &str, report: &Path) -> String {
    let name = report.to_string_lossy();
    stderr
        .lines()
        .filter(|l| !(l.starts_with("wmhcct") && l.contains(name.as_ref())))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// A clean run's stderr is empty, or exactly one line that names the report.
pub fn assert_clean_stderr(out: &Output, report: &Path) {
    let lines: Vec<&str> = out.stderr.lines().collect();
    let name = report.to_string_lossy();
    assert!(
        lines.is_empty() || (lines.len() == 1 && lines[0].contains(name.as_ref())),
        "a clean run prints nothing, or one closing line naming {name}; got:\n{}",
        out.stderr
    );
}

/// `wmhcct report <h5> --json`, parsed.
pub fn report_json(h5: &Path) -> Value {
    assert!(
        h5.is_file(),
        "no report at {} (directory has: {:?})",
        h5.display(),
        h5.parent()
            .and_then(|d| std::fs::read_dir(d).ok())
            .map(|r| r
                .filter_map(|e| e.ok())
                .map(|e| e.file_name())
                .collect::<Vec<_>>())
    );
    let out = run_cmd(
        Command::new(bin())
            .arg("report")
            .arg(h5)
            .arg("--json")
            .env_remove("LD_PRELOAD"),
        TIMEOUT,
    );
    assert_eq!(
        out.code,
        0,
        "wmhcct report {} --json: {}",
        h5.display(),
        out.describe()
    );
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "wmhcct report --json printed no JSON ({e}):\n{}",
            truncate(&out.stdout)
        )
    })
}

/// Does the frame's function name `name`? Accepts C names, GCC clones
/// (`name.constprop.0`), C++ (`ns::name(args)`) and Fortran module
/// procedures (`mod::name`, `__mod_MOD_name`).
pub fn is_fn(function: &str, name: &str) -> bool {
    let f = function.split('(').next().unwrap_or(function);
    f == name
        || f.strip_prefix(name).is_some_and(|r| r.starts_with('.'))
        || f.ends_with(&format!("::{name}"))
        || f.ends_with(&format!("_MOD_{name}"))
}

/// The function names of a context's stack, innermost first.
pub fn stack_names(ctx: &Value) -> Vec<String> {
    ctx["stack"]
        .as_array()
        .map(|s| {
            s.iter()
                .map(|f| f["function"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// A context's stack as (module, address) pairs, innermost first: exact
/// where function names may repeat.
pub fn stack_addresses(ctx: &Value) -> Vec<String> {
    ctx["stack"]
        .as_array()
        .map(|s| {
            s.iter()
                .map(|f| format!("{}+{}", f["module"], f["address"]))
                .collect()
        })
        .unwrap_or_default()
}

/// Index of the first frame naming `name`.
pub fn frame_index(ctx: &Value, name: &str) -> Option<usize> {
    stack_names(ctx).iter().position(|f| is_fn(f, name))
}

/// The report's contexts.
pub fn contexts(r: &Value) -> &Vec<Value> {
    r["contexts"]
        .as_array()
        .unwrap_or_else(|| panic!("report has no contexts list: {r}"))
}

/// Contexts of `kind` whose stack contains `name`.
pub fn contexts_with<'a>(r: &'a Value, kind: &str, name: &str) -> Vec<&'a Value> {
    contexts(r)
        .iter()
        .filter(|c| c["kind"] == kind && frame_index(c, name).is_some())
        .collect()
}

/// The one context of `kind` whose stack contains `name`.
pub fn context_with<'a>(r: &'a Value, kind: &str, name: &str) -> &'a Value {
    let found = contexts_with(r, kind, name);
    assert_eq!(
        found.len(),
        1,
        "expected one {kind} context through {name}, found {}: {}",
        found.len(),
        summary(r)
    );
    found[0]
}

/// A short listing of the contexts for failure messages.
pub fn summary(r: &Value) -> String {
    let mut s = String::new();
    if let Some(cs) = r["contexts"].as_array() {
        for c in cs.iter().take(40) {
            s.push_str(&format!(
                "\n  {} count {} bytes {} leaked {} : {}",
                c["kind"],
                c["count"],
                c["bytes"],
                c["leaked_bytes"],
                stack_names(c).join(" < ")
            ));
        }
    }
    s
}

pub fn u64_of(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("not an unsigned integer: {v}"))
}

/// `totals.<kind>.count`.
pub fn total_count(r: &Value, kind: &str) -> u64 {
    u64_of(&r["totals"][kind]["count"])
}

/// `totals.<kind>.bytes`.
pub fn total_bytes(r: &Value, kind: &str) -> u64 {
    u64_of(&r["totals"][kind]["bytes"])
}

/// The ten interposed C allocator entry points.
pub const ALLOCATORS: [&str; 10] = [
    "malloc",
    "calloc",
    "realloc",
    "free",
    "posix_memalign",
    "aligned_alloc",
    "memalign",
    "valloc",
    "pvalloc",
    "reallocarray",
];

/// Every kind whose events make up the allocation tree: the allocators that
/// allocate (not `free`) and `MPI_Alloc_mem`.
pub const ALLOCATING: [&str; 10] = [
    "malloc",
    "calloc",
    "realloc",
    "posix_memalign",
    "aligned_alloc",
    "memalign",
    "valloc",
    "pvalloc",
    "reallocarray",
    "MPI_Alloc_mem",
];

/// The ten C allocators' totals, compactly, for failure messages.
pub fn alloc_totals(r: &Value) -> String {
    ALLOCATORS
        .iter()
        .map(|k| {
            format!(
                "{k}={}/{}B",
                r["totals"][k]["count"], r["totals"][k]["bytes"]
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `CALLS <function> <calls> <bytes>` lines of a test program's output
/// (allocators.c, rel_nextalloc.c): function, calls, bytes.
pub fn calls_made(stdout: &str) -> Vec<(String, u64, u64)> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("CALLS "))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[0].to_string(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
            )
        })
        .collect()
}

/// A valid HDF5 file that is not a wmhcct report (one dataset, written with
/// h5py), at `w/<name>`.
pub fn foreign_hdf5(w: &WorkDir, name: &str) -> PathBuf {
    let p = w.join(name);
    let script = format!(
        "import h5py; h5py.File({:?}, 'w').create_dataset('x', data=[1, 2])",
        p.to_str().unwrap()
    );
    let out = run_plain(PYTHON, &["-c", &script], &w.path);
    assert_eq!(
        out.code,
        0,
        "h5py (run scripts/setup.sh): {}",
        out.describe()
    );
    p
}

/// `wmhcct <args…>` failed cleanly on `file`: a non-zero exit (not a
/// signal), exactly one line on stderr that names the file, no panic or
/// backtrace (with `RUST_BACKTRACE=1`), nothing on stdout. Returns the line.
pub fn assert_cli_fails_cleanly(args: &[&str], file: &Path) -> String {
    let out = run_cmd(
        Command::new(bin())
            .args(args)
            .env("RUST_BACKTRACE", "1")
            .env_remove("LD_PRELOAD"),
        TIMEOUT,
    );
    let what = format!("wmhcct {}: {}", args.join(" "), out.describe());
    assert_ne!(out.code, 0, "{what}");
    assert!(out.code < 128, "killed by a signal: {what}");
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one line on stderr: {what}");
    assert!(
        lines[0].contains(&*file.to_string_lossy()),
        "the line names the file: {what}"
    );
    let s = &out.stderr;
    assert!(
        !s.contains("panicked") && !s.contains("RUST_BACKTRACE") && !s.contains("stack backtrace"),
        "{what}: panic text"
    );
    assert!(out.stdout.is_empty(), "nothing on stdout: {what}");
    lines[0].to_string()
}

/// Reports `<stem>-<pid>.h5` that child processes wrote into `dir`, sorted.
pub fn child_reports(dir: &Path, stem: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with(&format!("{stem}-")) && n.ends_with(".h5")
        })
        .collect();
    v.sort();
    v
}

/// `benches/<script> --quick`, run in `dir` with this build's library and
/// binary and `env`, within `timeout`; it must exit 0.
pub fn run_quick_bench(
    script: &str,
    dir: &Path,
    env: &[(&str, &OsStr)],
    timeout: Duration,
) -> Output {
    let script = root().join("benches").join(script);
    let mut cmd = command(PYTHON, &[script.as_os_str(), "--quick".as_ref()], dir);
    cmd.env("WMHCCT_LIB", lib()).env("WMHCCT_BIN", bin());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = run_cmd(&mut cmd, timeout);
    assert_eq!(out.code, 0, "{}", out.describe());
    out
}

/// Every one of `needles` is in the program's standard output.
pub fn assert_stdout_has(out: &Output, needles: &[&str]) {
    for needle in needles {
        assert!(
            out.stdout.contains(needle),
            "no {needle:?} in the output:\n{}",
            out.describe()
        );
    }
}

/// Write an executable shell script `name` with `body` in `dir`.
pub fn write_script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    let _ = Command::new("chmod").arg("+x").arg(&path).status();
    path
}

/// The files in `dir` whose names start with `prefix` and end with
/// `suffix`, sorted.
pub fn files_named(dir: &Path, prefix: &str, suffix: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|p| {
        let n = p
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        n.starts_with(prefix) && n.ends_with(suffix)
    });
    files.sort();
    files
}

/// The lines of `s`, sorted: the output of several ranks, whose lines
/// interleave in any order.
pub fn sorted_lines(s: &str) -> Vec<String> {
    let mut lines: Vec<String> = s.lines().map(str::to_owned).collect();
    lines.sort();
    lines
}
