//! Helpers shared by the reliability suite (tests/tests/reliability_*.rs):
//! figures printed in the test output, status lines of the test programs,
//! tmpfs mounts for the report-write failures, a shared library build.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use wmhcct_e2e::*;

/// Print one figure line (visible with `--nocapture`, and in the failure
/// output otherwise).
pub fn figure(test: &str, text: impl AsRef<str>) {
    eprintln!("[reliability] {test}: {}", text.as_ref());
}

/// `<key> <number>` in `text` (e.g. `VmHWM_kB 1234`): the number after the
/// first occurrence of `key`.
pub fn number_after(text: &str, key: &str) -> Option<u64> {
    let at = text.find(key)? + key.len();
    text[at..]
        .split_whitespace()
        .next()
        .and_then(|w| w.trim_end_matches(',').parse().ok())
}

/// Run `exe args` with `LD_PRELOAD=preload` (any list), `WMHCCT_OUT=report`
/// and `env`.
pub fn run_preloaded(
    exe: &Path,
    args: &[&str],
    dir: &Path,
    preload: &str,
    report: &Path,
    env: &[(&str, &str)],
    timeout: Duration,
) -> Output {
    let mut c = command(exe, args, dir);
    c.env("LD_PRELOAD", preload).env("WMHCCT_OUT", report);
    for (k, v) in env {
        c.env(k, v);
    }
    run_cmd(&mut c, timeout)
}

/// `sh -c 'ulimit -v KB; exec exe args'`, traced or not.
pub fn run_limited(
    exe: &Path,
    args: &[&str],
    dir: &Path,
    limit_kb: u64,
    traced: Option<&Path>,
) -> Output {
    run_limited_with(exe, args, dir, limit_kb, traced, &[])
}

/// [`run_limited`] with more environment variables for a traced run.
pub fn run_limited_with(
    exe: &Path,
    args: &[&str],
    dir: &Path,
    limit_kb: u64,
    traced: Option<&Path>,
    env: &[(&str, &str)],
) -> Output {
    let mut script = format!("ulimit -v {limit_kb}; exec '{}'", exe.display());
    for a in args {
        script.push_str(&format!(" '{a}'"));
    }
    let mut c = command("/bin/sh", &["-c", &script], dir);
    if let Some(report) = traced {
        c.env("LD_PRELOAD", lib()).env("WMHCCT_OUT", report);
        for (k, v) in env {
            c.env(k, v);
        }
    }
    run_cmd(&mut c, TIMEOUT)
}

/// A stand-in for `wmhcct` (for `WMHCCT_BIN`) in `dir`: a shell script that
/// only exits with `code`, writing nothing.
pub fn fake_converter(dir: &Path, code: i32) -> PathBuf {
    write_script(
        dir,
        &format!("converter-exit-{code}"),
        &format!("exit {code}\n"),
    )
}

/// A real profile: pattern.c with WMHCCT_BIN pointing at a converter that
/// fails, so the tracer keeps `<report>.wmprof` (`w/p.h5.wmprof`).
pub fn real_profile(w: &WorkDir) -> PathBuf {
    let exe = compile("pattern.c", &w.path, Opt::Debug, &[]);
    let fake = fake_converter(&w.path, 1);
    let h5 = w.join("p.h5");
    let out = run_traced(
        &exe,
        &[] as &[&str],
        &w.path,
        &h5,
        &[("WMHCCT_BIN", &fake.to_string_lossy())],
    );
    assert_eq!(out.code, 0, "{}", out.describe());
    let prof = w.join("p.h5.wmprof");
    assert!(prof.is_file(), "profile kept: {}", out.describe());
    prof
}

/// Build `tests/programs/<src>` as a shared library `lib<stem>.so` in `dir`
/// (`-O0`, frame pointers).
pub fn shared_library(src: &str, dir: &Path) -> PathBuf {
    shared_library_with(src, dir, &["-O0", "-g", "-fno-omit-frame-pointer"])
}

/// The same with these optimisation and debug flags.
pub fn shared_library_with(src: &str, dir: &Path, flags: &[&str]) -> PathBuf {
    let stem = Path::new(src).file_stem().unwrap().to_string_lossy();
    let so = dir.join(format!("lib{stem}.so"));
    let out = Command::new("cc")
        .args(["-shared", "-fPIC"])
        .args(flags)
        .arg("-o")
        .arg(&so)
        .arg(root().join("tests/programs").join(src))
        .output()
        .expect("cc");
    assert!(
        out.status.success(),
        "cc -shared {src}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    so
}

/// `tests/programs/<main_src>` built into `dir`, linked to the shared
/// library `lib<stem>.so` built there from `tests/programs/<lib_src>`, which
/// it then loads at start-up (its constructor and destructor run as those
/// of any library the program links).
pub fn compile_linked(main_src: &str, lib_src: &str, dir: &Path) -> PathBuf {
    shared_library_with(lib_src, dir, &["-O2", "-g"]);
    let stem = Path::new(lib_src).file_stem().unwrap().to_string_lossy();
    let d = dir.to_string_lossy();
    compile(
        main_src,
        dir,
        Opt::Release,
        // (-l before the source: it counts only without --as-needed.)
        &[
            "-Wl,--no-as-needed",
            "-L",
            &d,
            &format!("-l{stem}"),
            &format!("-Wl,-rpath,{d}"),
        ],
    )
}

/// A tmpfs mounted at `dir/<name>` with `options` (unmounted on drop), or
/// `None` when this user cannot mount (not root, no CAP_SYS_ADMIN).
pub struct Tmpfs {
    pub path: PathBuf,
}

impl Tmpfs {
    pub fn mount(dir: &Path, name: &str, options: &str) -> Option<Tmpfs> {
        let path = dir.join(name);
        std::fs::create_dir_all(&path).ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(&path)
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        ok.then_some(Tmpfs { path })
    }

    /// Fill the file system, leaving about `free_kb` KiB.
    pub fn fill_leaving(&self, free_kb: u64) {
        let _ = std::fs::remove_file(self.path.join("fill"));
        let st = Command::new("df")
            .args(["-k", "--output=avail"])
            .arg(&self.path)
            .output()
            .expect("df");
        let avail: u64 = String::from_utf8_lossy(&st.stdout)
            .lines()
            .nth(1)
            .and_then(|l| l.trim().parse().ok())
            .expect("df avail");
        let size = avail.saturating_sub(free_kb) * 1024;
        std::fs::write(self.path.join("fill"), vec![0u8; size as usize]).expect("fill");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.path).output();
    }
}

/// The tracer's lines of `stderr`, for failure messages.
pub fn lines_of(stderr: &str) -> String {
    tracer_lines(stderr).join("\n")
}

/// No Rust panic or backtrace text anywhere in `s`.
pub fn assert_no_panic(s: &str, what: &str) {
    assert!(
        !s.contains("panicked") && !s.contains("RUST_BACKTRACE") && !s.contains("stack backtrace"),
        "{what}: panic text:\n{s}"
    );
}

/// Every allocation of report `r` was freed or is still live: calls to
/// malloc and calloc minus calls to free of known blocks equal the live
/// blocks (a double free is a call to free of a block no longer known).
pub fn assert_live_blocks_balance(r: &Value, what: &str) {
    let mallocs = total_count(r, "malloc") + total_count(r, "calloc");
    let live = u64_of(&r["heap"]["live_blocks"]);
    let known_frees = total_count(r, "free") - u64_of(&r["heap"]["unknown_frees"]);
    assert_eq!(mallocs - known_frees, live, "{what}: {}", alloc_totals(r));
}

/// The tracer's only line on `stderr` is the closing one naming `report`.
pub fn assert_only_closing_line(stderr: &str, report: &Path, what: &str) {
    assert_eq!(
        tracer_lines(stderr),
        [format!("wmhcct: report written to {}", report.display())],
        "{what}: {stderr}"
    );
}

/// `wmhcct ARGS` with a terminal (a pty, through Python's `pty`) for its
/// standard input and output, in `dir`, with `env` added: the exit code,
/// and what it wrote to the terminal as stdout.
pub fn wmhcct_at_terminal(dir: &Path, args: &[&str], env: &[(&str, &Path)]) -> Output {
    let py = "import json, os, pty, sys\n\
              argv = [os.environ['W']] + json.loads(os.environ['ARGS'])\n\
              pid, fd = pty.fork()\n\
              if pid == 0:\n    os.execv(argv[0], argv)\n\
              out = b''\n\
              while True:\n    try:\n        b = os.read(fd, 4096)\n    except OSError:\n        break\n    if not b:\n        break\n    out += b\n\
              _, st = os.waitpid(pid, 0)\n\
              sys.stdout.write(out.decode(errors='replace'))\n\
              sys.exit(os.waitstatus_to_exitcode(st))\n";
    let mut c = command("/usr/bin/python3", &["-c", py], dir);
    c.env("W", bin())
        .env("ARGS", serde_json::to_string(args).unwrap());
    for (k, v) in env {
        c.env(k, v);
    }
    run_cmd(&mut c, Duration::from_secs(60))
}
