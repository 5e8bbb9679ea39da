//! MPI launchers and daemons are never traced, so that the tracer given to
//! a launcher reaches the ranks only: `wmhcct run --out job.h5 -- mpirun
//! -np 4 ./app` (mpirun's own report used to overwrite the job's), and an
//! MPI singleton (`./app` alone, which starts Open MPI's `orted`, whose
//! report used to appear beside the program's).

mod mpi_common;

use std::path::{Path, PathBuf};

use mpi_common::*;
use wmhcct_e2e::*;

/// The names of the `.h5` files in `dir`.
fn reports(dir: &Path) -> Vec<String> {
    files_named(dir, "", ".h5")
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

/// `wmhcct run --out job.h5 -- <launcher…> <exe>` in `dir`, where `exe` is
/// `mpi_pattern.c` built: one report, the job's (`dir/job.h5`, returned).
fn run_writes_the_jobs_report(dir: &Path, launcher: &[&str], exe: &Path) -> PathBuf {
    let h5 = dir.join("job.h5");
    let mut c = command(bin(), &["run", "--out"], dir);
    c.arg(&h5).arg("--").args(launcher).arg(exe);
    c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    let out = run_cmd(&mut c, MPI_TIMEOUT);
    assert_clean_job(&out, &h5);
    check_pattern(&report_json(&h5), "malloc", 64, 256);
    assert_eq!(reports(dir), ["job.h5"], "{}", out.describe());
    h5
}

/// [`run_writes_the_jobs_report`] with `mpi_pattern.c` built by `compiler`.
fn run_wraps_the_launcher(compiler: &str, launcher: &[&str], name: &str) {
    let work = WorkDir::new(&format!("run-launcher-{name}"));
    let exe = mpi_compile(compiler, "mpi_pattern.c", &work.path, &[]);
    run_writes_the_jobs_report(&work.path, launcher, &exe);
}

#[test]
fn wmhcct_run_of_mpirun_traces_the_ranks_only() {
    run_wraps_the_launcher("mpicc", &["mpirun", "--oversubscribe", "-np", "4"], "ompi");
}

#[test]
fn wmhcct_run_of_mpich_mpiexec_traces_the_ranks_only() {
    run_wraps_the_launcher("mpicc.mpich", &["mpiexec.mpich", "-n", "4"], "mpich");
}

/// An Open MPI program run alone starts `orted` for itself, which inherits
/// the tracer: only the program's report is written.
#[test]
fn open_mpi_singleton_writes_one_report() {
    let work = WorkDir::new("run-launcher-singleton");
    let dir = work.path.clone();
    let exe = mpi_compile("mpicc", "mpi_pattern.c", &dir, &[]);
    let h5 = dir.join("one.h5");
    let out = run_traced(
        &exe,
        &[] as &[&str],
        &dir,
        &h5,
        &[
            ("OMPI_ALLOW_RUN_AS_ROOT", "1"),
            ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
        ],
    );
    assert_clean_job(&out, &h5);
    let r = report_json(&h5);
    assert_eq!(r["ranks"], 1);
    let a = context(&r, "ctx_a", "malloc").expect("context A");
    assert_eq!(a["count"], PATTERN_K, "A: {a}");
    // orted outlives the program by a moment: let it finish first.
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(reports(&dir), ["one.h5"], "{}", out.describe());
}

/// A shell around the launcher (`wmhcct run -- ./job.sh`, or a launcher
/// that is itself a script, as Intel MPI's `mpirun`): the shell is traced,
/// the job writes the report first, and the shell's report goes beside it
/// under its pid instead of over it.
#[test]
fn a_shell_around_mpirun_leaves_the_job_report_alone() {
    let work = WorkDir::new("run-launcher-shell");
    let dir = work.path.clone();
    let exe = mpi_compile("mpicc", "mpi_pattern.c", &dir, &[]);
    let h5 = dir.join("job.h5");
    let script = format!(
        "mpirun --oversubscribe -np 4 '{}'; echo job done",
        exe.display()
    );
    let mut c = command(bin(), &["run", "--out"], &dir);
    c.arg(&h5).args(["--", "/bin/bash", "-c", script.as_str()]);
    c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    let out = run_cmd(&mut c, MPI_TIMEOUT);
    assert_eq!(out.code, 0, "{}", out.describe());
    // One closing line, rank 0's for the job's report: the shell writes
    // its own report silently.
    assert_eq!(
        tracer_lines(&out.stderr),
        vec![format!("wmhcct: report written to {}", h5.display())],
        "{}",
        out.describe()
    );
    check_pattern(&report_json(&h5), "malloc", 64, 256);
    let all = reports(&dir);
    assert_eq!(
        all.len(),
        2,
        "the job's and the shell's: {}",
        out.describe()
    );
    let shell = all.iter().find(|n| n.as_str() != "job.h5").unwrap();
    assert!(shell.starts_with("job-"), "{shell}");
    assert_eq!(report_json(&dir.join(shell))["ranks"], 1);
}

/// Command wrappers that run one command as their child (`timeout`,
/// `flock`) are not traced and stand for their parent: `wmhcct run --out
/// r.h5 -- timeout 60 ./app` writes the application's report at `r.h5`
/// with the closing line (it used to be `timeout`'s, the application's
/// going silently beside it as `r-<pid>.h5`, and no line at all, since
/// coreutils close stderr at exit); an application that `timeout` ends
/// by SIGTERM writes its report so; a wrapper around `mpirun` leaves the
/// job's report alone; a wrapper run by a traced shell is the shell's
/// child as before (its command's report beside the shell's, counted).
#[test]
fn command_wrappers_are_transparent() {
    let work = WorkDir::new("run-wrappers");
    let dir = work.path.clone();
    let exe = compile("exitcode.c", &dir, Opt::Debug, &[]);
    let plain = run_plain(&exe, &["3"], &dir);
    let run = |h5: &str, args: &[&str]| {
        let mut c = command(bin(), &["run", "--out", h5, "--"], &dir);
        c.args(args);
        run_cmd(&mut c, TIMEOUT)
    };
    let e = exe.to_string_lossy().into_owned();
    let lock = dir.join("lock").to_string_lossy().into_owned();
    for (h5, args) in [
        ("t.h5", vec!["timeout", "60", &e, "3"]),
        ("f.h5", vec!["flock", &lock, &e, "3"]),
        ("tt.h5", vec!["timeout", "60", "timeout", "50", &e, "3"]),
    ] {
        let out = run(h5, &args);
        let what = format!("{args:?}: {}", out.describe());
        assert_eq!((out.code, &out.stdout), (3, &plain.stdout), "{what}");
        let report = dir.join(h5);
        assert_eq!(
            tracer_lines(&out.stderr),
            [format!("wmhcct: report written to {}", report.display())],
            "{what}"
        );
        let r = report_json(&report);
        assert!(
            r["program"].as_str().unwrap().contains("exitcode"),
            "{what}"
        );
        assert_eq!(reports(&dir).len(), 1, "one report: {:?}", reports(&dir));
        std::fs::remove_file(&report).unwrap();
    }

    // timeout ends the program by SIGTERM: its report, reason sigterm.
    let rel = compile("rel_sigterm.c", &dir, Opt::Debug, &["-pthread"]);
    let out = run(
        "k.h5",
        &["timeout", "1", &rel.to_string_lossy(), "loop", "1"],
    );
    assert_eq!(out.code, 124, "{}", out.describe());
    let r = report_json(&dir.join("k.h5"));
    assert_eq!(r["reason"], "sigterm", "{}", out.describe());
    assert!(r["program"].as_str().unwrap().contains("rel_sigterm"));
    std::fs::remove_file(dir.join("k.h5")).unwrap();

    // Around mpirun: the job's report, and only it.
    let mpi = mpi_compile("mpicc", "mpi_pattern.c", &dir, &[]);
    let around = ["timeout", "80", "mpirun", "--oversubscribe", "-np", "4"];
    std::fs::remove_file(run_writes_the_jobs_report(&dir, &around, &mpi)).unwrap();

    // Inside a traced shell: the command is the shell's child.
    let script = format!("timeout 60 '{e}' 3; exit 0");
    let out = run("sh.h5", &["bash", "-c", &script]);
    assert_eq!(out.code, 0, "{}", out.describe());
    let kids = files_named(&dir, "sh-", ".h5");
    assert_eq!(kids.len(), 1, "{:?}: {}", reports(&dir), out.describe());
    assert!(report_json(&kids[0])["program"]
        .as_str()
        .unwrap()
        .contains("exitcode"));
    assert_eq!(
        tracer_lines(&out.stderr),
        [format!(
            "wmhcct: report written to {}; 1 process it started wrote its own beside it as sh-<pid>.h5",
            dir.join("sh.h5").display()
        )],
        "{}",
        out.describe()
    );
}
