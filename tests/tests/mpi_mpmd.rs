//! MPMD launches under Open MPI (`mpirun -np 1 a : -np 3 b`): the tracer
//! may be given to some executables only, and ranks without it never join
//! a job-wide merge, so it must not start one (that job used to wait in
//! MPI_Init for ever). The traced ranks leave per-rank profiles instead,
//! which `wmhcct merge` turns into the exact report of those ranks.

mod mpi_common;

use std::path::Path;

use mpi_common::*;
use wmhcct_e2e::*;

const K: u64 = PATTERN_K;

/// `mpirun --oversubscribe -np 1 <exe> : -np 3 <exe>`, the tracer given
/// to the first executable if `first`, to the second if `second`.
fn mpmd(exe: &Path, dir: &Path, report: &Path, first: bool, second: bool) -> Output {
    let mut c = command("mpirun", &["--oversubscribe"], dir);
    c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    for (i, (np, traced)) in [("1", first), ("3", second)].into_iter().enumerate() {
        if i > 0 {
            c.arg(":");
        }
        c.args(["-np", np]);
        if traced {
            c.arg("-x").arg(format!("LD_PRELOAD={}", lib().display()));
            c.arg("-x").arg(format!("WMHCCT_OUT={}", report.display()));
        }
        c.arg(exe);
    }
    run_cmd(&mut c, MPI_TIMEOUT)
}

/// The job ends as it does untraced, with one line per traced executable
/// and a profile per traced rank; returns the merged report.
fn run(name: &str, first: bool, second: bool) -> serde_json::Value {
    let work = WorkDir::new(&format!("mpmd-{name}"));
    let dir = work.path.clone();
    let exe = mpi_compile("mpicc", "mpi_pattern.c", &dir, &[]);
    let h5 = dir.join("job.h5");
    let plain = mpmd(&exe, &dir, &h5, false, false);
    assert_eq!(plain.code, 0, "{}", plain.describe());
    let traced = mpmd(&exe, &dir, &h5, first, second);
    assert_eq!(traced.code, 0, "{}", traced.describe());
    assert_eq!(traced.stdout, plain.stdout, "stdout changed by the tracer");
    let why = "a job of several executables: its traced ranks leave per-rank profiles";
    let lines = tracer_lines(&traced.stderr);
    let executables = usize::from(first) + usize::from(second);
    assert_eq!(
        lines.iter().filter(|l| l.contains(why)).count(),
        executables,
        "one line per traced executable: {}",
        traced.describe()
    );
    let ranks = usize::from(first) + 3 * usize::from(second);
    let spill = dir.join("job.h5.spill");
    let profiles = std::fs::read_dir(&spill)
        .map(|d| d.flatten().count())
        .unwrap_or(0);
    assert_eq!(profiles, ranks, "{}", traced.describe());
    assert!(!h5.exists(), "no job report from an MPMD job");
    let merged = dir.join("merged.h5");
    merge(&spill, &merged, &dir);
    report_json(&merged)
}

#[test]
fn some_executables_traced_no_hang() {
    // Ranks 1–3 traced: rank r allocated (r+1)·K times in context A.
    let r = run("some", false, true);
    assert_eq!(r["ranks"], 3);
    let a = context(&r, "ctx_a", "malloc").expect("context A");
    assert_eq!(a["count"], K * (2 + 3 + 4), "A: {a}");
    let b = context(&r, "ctx_b", "malloc").expect("context B");
    assert_eq!(b["count"], K * 3, "B: {b}");
    assert_eq!(r["totals"]["MPI_Sendrecv"]["count"], 3);
    assert_eq!(r["totals"]["MPI_Barrier"]["count"], 3);
}

#[test]
fn every_executable_traced_merges_exactly() {
    let r = run("all", true, true);
    check_pattern(&r, "malloc", 64, 256);
}
