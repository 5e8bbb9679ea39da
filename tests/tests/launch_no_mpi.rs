//! A program that does not use MPI, started as several processes by an MPI
//! launcher (a task farm: `mpirun -np 3 ./task`, `srun -n 64 ./task`) with
//! one report path for all of them (`WMHCCT_OUT`, or the Slurm job's). The
//! processes used to race to write that one file (one report survived, the
//! others printed errors). Each now leaves `rank-<r>.wmprof` in the spill
//! directory, rank 0 says so in one line, and `wmhcct merge` makes the
//! launch's report, exact for every process.

mod mpi_common;

use mpi_common::*;
use wmhcct_e2e::*;

const PROCESSES: u64 = 3;

fn task_farm(launcher: Launcher, name: &str) {
    let work = WorkDir::new(&format!("farm-{name}"));
    let dir = work.path.clone();
    // tests/programs/pattern.c: malloc 1100, calloc 10, free 1100, no stdio.
    let exe = compile("pattern.c", &dir, Opt::Debug, &[]);
    let np = PROCESSES as u32;
    let plain = launch(launcher, np, &exe, &[], &dir, None, &[]);
    assert_eq!(plain.code, 0, "{}", plain.describe());
    let h5 = dir.join("farm.h5");
    let traced = launch(launcher, np, &exe, &[], &dir, Some(&h5), &[]);
    assert_eq!(traced.code, 0, "{}", traced.describe());
    assert_eq!(traced.stdout, plain.stdout, "stdout changed by the tracer");
    let lines = tracer_lines(&traced.stderr);
    assert_eq!(lines.len(), 1, "rank 0's line only: {}", traced.describe());
    assert!(
        lines[0].contains("the 3 processes of this launch did not use MPI"),
        "{}",
        lines[0]
    );
    assert!(!h5.exists(), "no process wrote the shared report");
    let spill = dir.join("farm.h5.spill");
    let mut names: Vec<String> = std::fs::read_dir(&spill)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    assert_eq!(
        names,
        ["rank-0.wmprof", "rank-1.wmprof", "rank-2.wmprof"],
        "{}",
        traced.describe()
    );
    merge(&spill, &h5, &dir);
    let r = report_json(&h5);
    assert_eq!(r["ranks"], PROCESSES);
    assert_eq!(
        total_count(&r, "malloc"),
        1100 * PROCESSES,
        "{}",
        alloc_totals(&r)
    );
    assert_eq!(
        total_count(&r, "calloc"),
        10 * PROCESSES,
        "{}",
        alloc_totals(&r)
    );
    assert_eq!(
        total_count(&r, "free"),
        1100 * PROCESSES,
        "{}",
        alloc_totals(&r)
    );
}

#[test]
fn open_mpi_mpirun_of_a_serial_program() {
    task_farm(Launcher::OpenMpi, "ompi");
}

#[test]
fn mpich_hydra_of_a_serial_program() {
    task_farm(Launcher::Mpich, "hydra");
}
