//! A real MPI application from Debian's packages under the tracer: LAMMPS
//! (C++, OpenMPI, FFTW, dozens of shared objects and MPI plugins loaded
//! late) on 2 ranks, through `benches/real_mpi.py --quick`. The script
//! fails unless every traced run exits 0, prints LAMMPS's thermodynamic
//! output exactly as the native run does, and leaves one job report of 2
//! ranks that `wmhcct report` reads. No performance assertion.

use std::time::Duration;

use wmhcct_e2e::*;

#[test]
fn lammps_on_two_ranks_runs_unchanged_and_gives_one_job_report() {
    let dir = WorkDir::new("real-mpi-app");
    let yes = std::ffi::OsStr::new("1");
    let out = run_quick_bench(
        "real_mpi.py",
        &dir.path,
        &[
            ("OMPI_ALLOW_RUN_AS_ROOT", yes),
            ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", yes),
        ],
        Duration::from_secs(600),
    );
    assert_stdout_has(
        &out,
        &[
            "## Real MPI application: LAMMPS",
            "| native |",
            "| wmhcct |",
            "Thermodynamic output identical to the native run in every traced run.",
        ],
    );
    // The job made allocator calls, and the report counted them.
    let calls: u64 = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("wmhcct: "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        calls > 1000,
        "allocator calls in the job: {calls}\n{}",
        out.describe()
    );
    // Every stack unwound to its end: the constructors' stacks end in the
    // dynamic loader's `_dl_start_user` (rbp = 0, no CFI), which is the
    // end of the stack, not an unwinding error.
    let unwind = out
        .stdout
        .lines()
        .find(|l| l.starts_with("wmhcct unwind:"))
        .unwrap_or_else(|| panic!("no unwind line:\n{}", out.describe()));
    assert!(unwind.contains("errors 0"), "{unwind}");
}
