//! Slurm: the batch scripts `wmhcct slurm` prints, and a real Slurm.
//!
//! `real_slurm_runs_the_templates` runs tests/slurm/run.sh: it installs
//! slurm-wlm and munge if missing, starts munged, slurmctld and slurmd on
//! this machine, submits scripts made by `wmhcct slurm` (mpirun, mpirun with
//! MPI_Abort, srun) running tests/programs/mpi_pattern.c with 2 ranks under
//! the tracer, and a program that does not use MPI alone and as two srun
//! tasks, checks each job's report and plots, and stops what it started. When it cannot run here (not root, or the packages cannot be
//! installed) it exits 77 and this test says SKIPPED on the terminal (Rust
//! tests have no skip state); any other outcome but success is a failure.

use std::io::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use wmhcct_e2e::*;

const LAUNCHERS: [&str; 3] = ["mpirun", "srun", "mpiexec"];

/// `@NAME@` template fields left in `s`.
fn unfilled(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in s.match_indices('@') {
        let rest = &s[i + 1..];
        let end = rest
            .find(|c: char| !(c.is_ascii_uppercase() || c == '_'))
            .unwrap_or(rest.len());
        if end > 0 && rest[end..].starts_with('@') {
            out.push(rest[..end].to_string());
        }
    }
    out
}

fn slurm_cmd(args: &[&str], dir: &Path) -> Output {
    let mut c = command(bin(), &["slurm"], dir);
    c.args(args);
    run_cmd(&mut c, TIMEOUT)
}

fn bash_n(script: &Path) -> Output {
    run_cmd(Command::new("bash").arg("-n").arg(script), TIMEOUT)
}

#[test]
fn every_launcher_script_passes_bash_n_with_fields_filled() {
    let dir = WorkDir::new("slurm-templates");
    let lib = std::fs::canonicalize(lib()).unwrap();
    for l in LAUNCHERS {
        let args = [
            "--ntasks",
            "8",
            "--nodes",
            "2",
            "--time",
            "1:00:00",
            "--partition",
            "batch",
            "--launcher",
            l,
            "--",
            "./solver",
            "--input",
            "my deck.inp",
            "it's",
        ];
        let out = slurm_cmd(&args, &dir.path);
        assert_eq!(
            out.code,
            0,
            "wmhcct slurm --launcher {l}: {}",
            out.describe()
        );
        let script = out.stdout;
        let file = dir.join(format!("{l}.sbatch"));
        std::fs::write(&file, &script).unwrap();
        let check = bash_n(&file);
        assert_eq!(
            check.code,
            0,
            "{l}: bash -n: {}\n{script}",
            check.describe()
        );
        assert!(unfilled(&script).is_empty(), "{l}: {:?}", unfilled(&script));
        for want in [
            "#SBATCH --ntasks=8\n",
            "#SBATCH --nodes=2\n",
            "#SBATCH --time=1:00:00\n",
            "#SBATCH --partition=batch\n",
            "#SBATCH --job-name=solver\n",
            "./solver --input 'my deck.inp' 'it'\\''s' || status=$?",
        ] {
            assert!(script.contains(want), "{l}: no {want:?} in\n{script}");
        }
        assert!(
            script.contains(&format!("WMHCCT_LIB={}\n", lib.display())),
            "{l}: library path resolved next to the executable:\n{script}"
        );
        // -o writes the same script.
        let written = dir.join(format!("{l}-o.sbatch"));
        let mut with_o: Vec<&str> = vec!["-o", written.to_str().unwrap()];
        with_o.extend_from_slice(&args);
        let out = slurm_cmd(&with_o, &dir.path);
        assert_eq!(out.code, 0, "{}", out.describe());
        assert!(out.stdout.is_empty(), "{}", out.describe());
        assert_eq!(std::fs::read_to_string(&written).unwrap(), script);
    }
}

#[test]
fn a_missing_library_is_a_clear_error() {
    let dir = WorkDir::new("slurm-nolib");
    let out = slurm_cmd(
        &[
            "--ntasks",
            "2",
            "--lib",
            "/nonexistent/libwmhcct.so",
            "--",
            "./a",
        ],
        &dir.path,
    );
    assert_eq!(out.code, 1, "{}", out.describe());
    assert!(out.stdout.is_empty(), "{}", out.describe());
    assert!(
        out.stderr
            .contains("/nonexistent/libwmhcct.so: tracer library not found"),
        "{}",
        out.describe()
    );
    let mut c = command(bin(), &["slurm", "--ntasks", "2", "--", "./a"], &dir.path);
    c.env("WMHCCT_LIB", "/nonexistent/lib.so");
    let out = run_cmd(&mut c, TIMEOUT);
    assert_eq!(out.code, 1, "{}", out.describe());
    assert!(out.stderr.contains("WMHCCT_LIB"), "{}", out.describe());
    let out = slurm_cmd(&["--ntasks", "0", "--", "./a"], &dir.path);
    assert_ne!(out.code, 0, "--ntasks 0 is refused: {}", out.describe());
}

/// The mpirun template's post-step, run by hand as Slurm would (its job id
/// and task count in the environment; no Slurm needed), on a job whose
/// rank 1 leaves without MPI_Finalize 2 s after rank 0 reached it
/// (tests/programs/mpi_leave.c). Rank 0 then writes a report of the ranks
/// that reached MPI_Finalize ("ranks: 1 of 2") and leaves its part in the
/// spill directory beside rank 1's profile: the post-step must merge them
/// into the whole job's report. Until 2026-11-27 it merged only when there
/// was no report, and the job's report held rank 0 alone.
#[test]
fn the_post_step_merges_a_rank_that_left_into_a_partial_report() {
    let work = WorkDir::new("slurm-post-step-partial");
    let dir = work.path.clone();
    let source = root().join("tests/programs/mpi_leave.c");
    let exe = dir.join("mpi_leave");
    let mut c = command("mpicc", &["-g", "-O1", "-o"], &dir);
    c.arg(&exe).arg(&source);
    let out = run_cmd(&mut c, TIMEOUT);
    assert_eq!(out.code, 0, "mpicc mpi_leave.c: {}", out.describe());
    let lib = std::fs::canonicalize(lib()).unwrap();
    let script = dir.join("leave.sbatch");
    let out = slurm_cmd(
        &[
            "--ntasks",
            "2",
            "--lib",
            lib.to_str().unwrap(),
            "-o",
            script.to_str().unwrap(),
            "--",
            exe.to_str().unwrap(),
            "1",
        ],
        &dir,
    );
    assert_eq!(out.code, 0, "{}", out.describe());
    let mut c = command("bash", &[script.as_os_str()], &dir);
    c.env("SLURM_JOB_ID", "4711")
        .env("SLURM_NTASKS", "2")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1");
    let out = run_cmd(&mut c, Duration::from_secs(120));
    let report = dir.join("wmhcct-4711.h5");
    assert!(report.is_file(), "no report: {}", out.describe());
    let r = report_json(&report);
    assert_eq!(
        u64_of(&r["ranks"]),
        2,
        "the post-step's report holds both ranks: {}",
        out.describe()
    );
    assert!(
        out.stderr.contains("merging"),
        "the post-step merged the spill directory: {}",
        out.describe()
    );
    assert!(
        out.stdout.contains("ranks:     2\n"),
        "the printed report is the merged one: {}",
        out.describe()
    );
}

/// Written straight to the terminal: the test harness captures `eprintln!`
/// of passing tests, and a skip must be visible in the CI log.
fn notice(msg: &str) {
    let _ = writeln!(std::io::stderr(), "{msg}");
}

#[test]
fn real_slurm_runs_the_templates() {
    let script = root().join("tests/slurm/run.sh");
    // coreutils timeout: TERM to the harness (it stops its daemons on TERM),
    // KILL 20 s later; run_cmd's own limit is only a backstop.
    let mut c = command("timeout", &["-k", "20", "240", "bash"], &root());
    c.arg(&script)
        .env("WMHCCT_BIN", bin())
        .env("WMHCCT_LIB", lib());
    let out = run_cmd(&mut c, Duration::from_secs(300));
    let closing = out
        .stdout
        .lines()
        .rfind(|l| l.starts_with("slurm: "))
        .unwrap_or("")
        .to_string();
    match out.code {
        0 => {
            assert!(
                closing.ends_with(" 0 failed") && !out.stdout.contains("slurm: FAIL"),
                "{}",
                out.describe()
            );
            notice(&format!(
                "real Slurm test: {} ({:.0?})",
                closing.trim_start_matches("slurm: "),
                out.elapsed
            ));
        }
        77 => notice(&format!(
            "real Slurm test SKIPPED (not run, not passed): {}",
            closing.trim_start_matches("slurm: SKIPPED: ")
        )),
        124 | 137 => panic!(
            "tests/slurm/run.sh timed out after 240 s: {}",
            out.describe()
        ),
        _ => panic!("tests/slurm/run.sh failed: {}", out.describe()),
    }
}
