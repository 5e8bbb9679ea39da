//! `wmhcct run` says so when the command left no report, in one line after
//! the command's own output, and passes the command's output and exit code
//! on unchanged: a statically linked program (the dynamic loader, which
//! reads LD_PRELOAD, never runs), a set-user-ID program (the loader ignores
//! LD_PRELOAD for it), a command that drops LD_PRELOAD before it execs the
//! program, and one killed by SIGKILL. A traced run prints only the
//! tracer's closing line (`cli.rs`, and `launchers_untraced.rs` for an MPI
//! job under `wmhcct run`).

use std::path::Path;
use std::process::Command;

use wmhcct_e2e::*;

fn wmhcct_run(dir: &Path, out: Option<&Path>, cmd: &[&str]) -> Output {
    let mut c = command(bin(), &["run"], dir);
    if let Some(o) = out {
        c.arg("--out").arg(o);
    }
    c.arg("--").args(cmd);
    run_cmd(&mut c, TIMEOUT)
}

/// The run's stdout and exit code are the native ones, its stderr is
/// exactly `line` (nothing if it is empty), and nothing was written where the report would be.
fn assert_untraced(w: &WorkDir, cmd: &[&str], want_code: i32, out: Option<&Path>, line: &str) {
    let native = run_plain(cmd[0], &cmd[1..], &w.path);
    let run = wmhcct_run(&w.path, out, cmd);
    assert_eq!(run.code, want_code, "{}", run.describe());
    assert_eq!(run.code, native.code, "{}", run.describe());
    assert_eq!(run.stdout, native.stdout, "{}", run.describe());
    let want = if line.is_empty() {
        String::new()
    } else {
        format!("{line}\n")
    };
    assert_eq!(run.stderr, want, "{}", run.describe());
    let h5s = files_named(&w.path, "", ".h5");
    assert!(h5s.is_empty(), "no report expected: {h5s:?}");
}

#[test]
fn a_statically_linked_program() {
    let w = WorkDir::new("untraced-static");
    let exe = compile("exitcode.c", &w.path, Opt::Release, &["-static"]);
    let exe = exe.to_str().unwrap();
    let why = format!(
        "{exe} is statically linked, and LD_PRELOAD reaches only dynamically linked programs"
    );
    let h5 = w.join("s.h5");
    assert_untraced(
        &w,
        &[exe, "5"],
        5,
        Some(&h5),
        &format!("wmhcct: no report was written to {}: {why}", h5.display()),
    );
    // Without a report path: the executable alone says it.
    assert_untraced(
        &w,
        &[exe, "5"],
        5,
        None,
        &format!("wmhcct: no report: {why}"),
    );
}

#[test]
fn a_set_user_id_program() {
    let w = WorkDir::new("untraced-setuid");
    let exe = compile("exitcode.c", &w.path, Opt::Release, &[]);
    let is_root = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"));
    if !is_root {
        eprintln!("not root: a program set-user-ID to another user cannot be made here");
        return;
    }
    let suid = w.join("exitcode-suid");
    std::fs::copy(&exe, &suid).unwrap();
    let ok = Command::new("chown")
        .arg("65534")
        .arg(&suid)
        .status()
        .unwrap()
        .success()
        && Command::new("chmod")
            .arg("4755")
            .arg(&suid)
            .status()
            .unwrap()
            .success();
    assert!(ok, "chown/chmod failed");
    let suid = suid.to_str().unwrap();
    let h5 = w.join("u.h5");
    let findmnt = Command::new("findmnt")
        .args(["-n", "-o", "OPTIONS", "-T"])
        .arg(&w.path)
        .output()
        .expect("findmnt (util-linux)");
    let nosuid = String::from_utf8_lossy(&findmnt.stdout)
        .split(',')
        .any(|o| o.trim() == "nosuid");
    if nosuid {
        // The set-ID bit does nothing there: the program is traced.
        let run = wmhcct_run(&w.path, Some(&h5), &[suid, "6"]);
        assert_eq!(run.code, 6, "{}", run.describe());
        assert_clean_stderr(&run, &h5);
        assert!(h5.is_file(), "{}", run.describe());
        return;
    }
    let why = format!(
        "{suid} is set-user-ID to another user, and the dynamic loader ignores LD_PRELOAD for such programs"
    );
    assert_untraced(
        &w,
        &[suid, "6"],
        6,
        Some(&h5),
        &format!("wmhcct: no report was written to {}: {why}", h5.display()),
    );
    assert_untraced(
        &w,
        &[suid, "6"],
        6,
        None,
        &format!("wmhcct: no report: {why}"),
    );
}

#[test]
fn a_command_that_drops_the_preload() {
    let w = WorkDir::new("untraced-dropped");
    let exe = compile("exitcode.c", &w.path, Opt::Release, &[]);
    let script = format!("exec env -u LD_PRELOAD {} 9", exe.display());
    let h5 = w.join("d.h5");
    assert_untraced(
        &w,
        &["bash", "-c", &script],
        9,
        Some(&h5),
        &format!("wmhcct: no report was written to {}", h5.display()),
    );
    // Without a report path there is no telling: nothing is said.
    assert_untraced(&w, &["bash", "-c", &script], 9, None, "");
}

#[test]
fn a_command_killed_by_sigkill() {
    let w = WorkDir::new("untraced-sigkill");
    let h5 = w.join("k.h5");
    assert_untraced(
        &w,
        &["bash", "-c", "echo before; kill -9 $$"],
        137,
        Some(&h5),
        &format!(
            "wmhcct: no report was written to {}: bash was killed by SIGKILL, which leaves a process no time to write one",
            h5.display()
        ),
    );
}

/// Programs built with a sanitizer that owns malloc stop at start with the
/// tracer preloaded in front of its run-time (AddressSanitizer exits 1
/// saying its run-time "does not come first", LeakSanitizer fails a CHECK,
/// ThreadSanitizer dies of SIGSEGV): `wmhcct run` runs them as they are and
/// says why. UBSan, which leaves malloc alone, is traced.
#[test]
fn programs_built_with_a_sanitizer_that_owns_malloc() {
    for (flag, which) in [
        ("-fsanitize=address", "AddressSanitizer"),
        ("-fsanitize=thread", "ThreadSanitizer"),
        ("-fsanitize=leak", "LeakSanitizer"),
    ] {
        let w = WorkDir::new("untraced-sanitizer");
        let exe = compile("sort_keys.c", &w.path, Opt::Release, &[flag, "-DLEAKS=0"]);
        if which == "AddressSanitizer" {
            // What `run` spares the user: preloaded by hand, it stops.
            let h5 = w.join("direct.h5");
            let direct = run_traced(&exe, &[] as &[&str], &w.path, &h5, &[]);
            assert_eq!(direct.code, 1, "{}", direct.describe());
            assert!(
                direct.stderr.contains("does not come first"),
                "{}",
                direct.describe()
            );
            assert!(!h5.exists());
        }
        let exe = exe.to_str().unwrap();
        let why = format!(
            "wmhcct: no report: {exe} is built with {which}, whose run-time library must be loaded first and replaces malloc itself, so it ran without the tracer"
        );
        let h5 = w.join("s.h5");
        assert_untraced(&w, &[exe], 0, Some(&h5), &why);
        assert_untraced(&w, &[exe], 0, None, &why);
    }
    let w = WorkDir::new("traced-ubsan");
    let exe = compile(
        "sort_keys.c",
        &w.path,
        Opt::Release,
        &["-fsanitize=undefined", "-DLEAKS=0"],
    );
    let h5 = w.join("u.h5");
    let run = wmhcct_run(&w.path, Some(&h5), &[exe.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.describe());
    assert_clean_stderr(&run, &h5);
    assert!(total_count(&report_json(&h5), "malloc") > 1000);
}

/// The same through a launcher: `wmhcct run -- mpirun … ./app` finds the
/// sanitizer in the program the launcher starts, named by a path.
#[test]
fn an_mpi_job_of_a_program_built_with_addresssanitizer() {
    let w = WorkDir::new("untraced-sanitizer-mpi");
    let src = root().join("tests/programs/mpi_pattern.c");
    let exe = w.join("mpi_pattern");
    let built = run_cmd(
        command("mpicc", &["-g", "-O1", "-fsanitize=address", "-o"], &w.path)
            .arg(&exe)
            .arg(&src),
        TIMEOUT,
    );
    assert_eq!(built.code, 0, "{}", built.describe());
    let job = |traced: bool| {
        let launcher = ["mpirun", "--oversubscribe", "-np", "2"];
        let mut c = if traced {
            let mut c = command(bin(), &["run", "--"], &w.path);
            c.args(launcher);
            c
        } else {
            command(launcher[0], &launcher[1..], &w.path)
        };
        c.arg(&exe)
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            // The MPI library's own leaks are not this test's business.
            .env("ASAN_OPTIONS", "detect_leaks=0");
        run_cmd(&mut c, TIMEOUT)
    };
    let native = job(false);
    let run = job(true);
    assert_eq!(run.code, native.code, "{}", run.describe());
    assert_eq!(native.code, 0, "{}", native.describe());
    assert_eq!(
        sorted_lines(&run.stdout),
        sorted_lines(&native.stdout),
        "{}",
        run.describe()
    );
    assert_eq!(
        run.stderr.lines().last(),
        Some(format!(
            "wmhcct: no report: {} is built with AddressSanitizer, whose run-time library must be loaded first and replaces malloc itself, so it ran without the tracer",
            exe.display()
        ))
        .as_deref(),
        "{}",
        run.describe()
    );
    assert!(files_named(&w.path, "", ".h5").is_empty());
}
