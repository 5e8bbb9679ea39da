//! Collectives with `MPI_IN_PLACE`, whose ignored count and type arguments
//! are 0 and `MPI_DATATYPE_NULL` (the standard's own idiom), and a failing
//! `MPI_Alloc_mem`: the job's output and exit are those of the untraced
//! job, and each call counts this rank's part of the data.
//!
//! Until 2026-11-27 the tracer asked MPI the size of the ignored null type
//! to count the call's bytes, and MPI's (fatal) error handler ended every
//! such job, with Open MPI and MPICH, in C and in Fortran; a failed
//! `MPI_Alloc_mem` counted the bytes it had asked for.

mod mpi_common;

use mpi_common::*;
use wmhcct_e2e::*;

const P: u64 = 3;

/// A row of expected totals: C name, calls per rank, bytes per rank as a
/// function of the rank.
type Row = (&'static str, u64, fn(u64) -> u64);

/// The rows of tests/programs/mpi_in_place.c; `failing`: run with its
/// argument, which adds an `MPI_Alloc_mem` that fails.
fn expected(failing: bool) -> Vec<Row> {
    const I: u64 = 4;
    vec![
        ("MPI_Gather", 1, |_| 2 * I),
        ("MPI_Scatter", 1, |_| 3 * I),
        ("MPI_Gatherv", 1, |r| (r + 1) * I),
        ("MPI_Scatterv", 1, |r| (r + 1) * I),
        ("MPI_Allgather", 1, |_| 2 * I),
        ("MPI_Allgatherv", 1, |r| (r + 1) * I),
        ("MPI_Alltoall", 1, |_| 2 * P * I),
        ("MPI_Alltoallv", 1, |_| 3 * P * I),
        // A failed one is a call of 0 bytes, as a failed malloc.
        ("MPI_Alloc_mem", 1 + u64::from(failing), |_| 4096),
        // As a free: the bytes released.
        ("MPI_Free_mem", 1, |_| 4096),
    ]
}

/// Run `src` built with `compiler` under `launcher` untraced and traced;
/// the traced job must match and its totals `rows`.
fn same_job_counted(launcher: Launcher, compiler: &str, src: &str, args: &[&str], rows: &[Row]) {
    let dir = WorkDir::new(&format!("mpi-in-place-{compiler}-{src}"));
    let exe = mpi_compile(compiler, src, &dir.path, &[]);
    let plain = launch(launcher, P as u32, &exe, args, &dir.path, None, &[]);
    assert_eq!(plain.code, 0, "{}", plain.describe());
    let h5 = dir.join("job.h5");
    let traced = launch(launcher, P as u32, &exe, args, &dir.path, Some(&h5), &[]);
    assert_eq!(traced.code, 0, "{}", traced.describe());
    assert_eq!(sorted_lines(&traced.stdout), sorted_lines(&plain.stdout));
    let mut lines: Vec<&str> = traced.stdout.lines().collect();
    lines.sort();
    let want: Vec<String> = (0..P)
        .map(|r| {
            if src.ends_with(".c") {
                format!("rank {r} of {P}: ok")
            } else {
                format!("rank {r}: ok")
            }
        })
        .collect();
    assert_eq!(lines, want, "{}", traced.describe());
    assert_clean_job(&traced, &h5);
    let r = report_json(&h5);
    let mut wrong = Vec::new();
    for (name, calls, bytes) in rows {
        let want = (calls * P, (0..P).map(bytes).sum::<u64>());
        let got = (total_count(&r, name), total_bytes(&r, name));
        if got != want {
            wrong.push(format!(
                "{name}: got {got:?}, want (count, bytes) = {want:?}"
            ));
        }
    }
    assert!(wrong.is_empty(), "wrong MPI totals:\n{}", wrong.join("\n"));
}

#[test]
fn in_place_collectives_and_a_failed_alloc_mem_with_open_mpi() {
    same_job_counted(
        Launcher::OpenMpi,
        "mpicc",
        "mpi_in_place.c",
        &["fail"],
        &expected(true),
    );
    // The allocation row of MPI_Alloc_mem agrees with the MPI call's.
    let dir = WorkDir::new("mpi-in-place-rows");
    let exe = mpi_compile("mpicc", "mpi_in_place.c", &dir.path, &[]);
    let h5 = dir.join("job.h5");
    let traced = launch(
        Launcher::OpenMpi,
        P as u32,
        &exe,
        &["fail"],
        &dir.path,
        Some(&h5),
        &[],
    );
    assert_clean_job(&traced, &h5);
    let text = cli_out(&dir.path, &["report", &h5.to_string_lossy()]);
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("MPI_Alloc_mem "))
        .collect();
    assert!(!rows.is_empty(), "{text}");
    for row in &rows {
        let words: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(words, ["MPI_Alloc_mem", "6", "12288"], "{text}");
    }
}

#[test]
fn in_place_collectives_with_mpich() {
    same_job_counted(
        Launcher::Mpich,
        "mpicc.mpich",
        "mpi_in_place.c",
        &[],
        &expected(false),
    );
}

#[test]
fn in_place_collectives_through_the_fortran_2008_bindings() {
    const I: u64 = 4;
    let rows: [Row; 2] = [("MPI_Allgather", 1, |_| I), ("MPI_Gather", 1, |_| I)];
    same_job_counted(
        Launcher::OpenMpi,
        "mpif90",
        "mpi_in_place_f08.f90",
        &[],
        &rows,
    );
    same_job_counted(
        Launcher::Mpich,
        "mpif90.mpich",
        "mpi_in_place_f08.f90",
        &[],
        &rows,
    );
}
