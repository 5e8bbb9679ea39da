//! MPICH end-to-end tests: the pattern programs built with MPICH's
//! compiler wrappers and run by its launcher (`mpiexec.mpich`, 4 ranks),
//! under libwmhcct.so. The tracer must pick the MPI-side library built for
//! the job's MPI family (`libwmhcct_mpi_mpich.so` here, from
//! scripts/build.sh) and never load one of the other family: Open MPI's
//! handles passed to MPICH abort the job.

mod mpi_common;

use std::path::{Path, PathBuf};

use mpi_common::*;
use wmhcct_e2e::*;

const RANKS: u32 = PATTERN_RANKS as u32;

fn workdir(name: &str) -> WorkDir {
    WorkDir::new(&format!("mpich-{name}"))
}

/// A side library built by scripts/build.sh next to libwmhcct.so.
fn side_library(name: &str) -> PathBuf {
    let p = lib().with_file_name(name);
    assert!(
        p.is_file(),
        "{} is missing: run scripts/build.sh (with MPICH installed by scripts/setup.sh)",
        p.display()
    );
    p
}

/// The same job without and with the tracer: same exit code, output and
/// stderr (apart from rank 0's closing line), and one exact job report.
fn same_job_one_report(compiler: &str, src: &str) {
    let work = workdir(src);
    let dir = work.path.clone();
    let exe = mpi_compile(compiler, src, &dir, &[]);
    let h5 = dir.join("job.h5");
    let plain = untraced_then_traced(Launcher::Mpich, RANKS, &exe, &[], &dir, &h5, &[]);
    assert!(
        plain.stdout.contains("done on 4 ranks"),
        "{}",
        plain.describe()
    );
    check_pattern(&report_json(&h5), "malloc", 64, 256);
}

#[test]
fn c_program_four_ranks() {
    same_job_one_report("mpicc.mpich", "mpi_pattern.c");
}

/// MPICH's Fortran bindings are a layer over its C functions: each call
/// passes through the tracer's Fortran wrapper and then its C wrapper, and
/// must count once.
#[test]
fn fortran_mpif_h_four_ranks() {
    same_job_one_report("mpif90.mpich", "mpi_pattern_f77.f90");
}

#[test]
fn fortran_mpi_f08_four_ranks() {
    same_job_one_report("mpif90.mpich", "mpi_pattern_f08.f90");
}

/// Each family's side library says which it is, in its file.
#[test]
fn side_libraries_name_their_family() {
    use wmhcct_format::mpi_abi::{read_library, MpiAbi};
    assert_eq!(
        read_library(&side_library("libwmhcct_mpi_mpich.so")),
        Some(MpiAbi::Mpich)
    );
    // The workspace's own build links the first mpicc's MPI: Open MPI here.
    assert_eq!(
        read_library(&side_library("libwmhcct_mpi.so")),
        Some(MpiAbi::OpenMpi)
    );
    assert_eq!(
        read_library(&lib()),
        None,
        "libwmhcct.so is no side library"
    );
}

/// A side library of the wrong family, forced with WMHCCT_MPI_LIB: the job
/// runs as without the tracer, rank 0 says why there is no job report (in
/// one line: every rank finds the same), and each rank's profile is left
/// for `wmhcct merge`, which gives the exact report.
fn wrong_family(
    run: impl Fn(&Path, &Path, Option<&Path>, &[(&str, &str)]) -> Output,
    compiler: &str,
    wrong: &str,
    built_for: &str,
    job_runs: &str,
) {
    let work = workdir(&format!("wrong-{compiler}"));
    let dir = work.path.clone();
    let exe = mpi_compile(compiler, "mpi_pattern.c", &dir, &[]);
    let plain = run(&exe, &dir, None, &[]);
    assert_eq!(plain.code, 0, "{}", plain.describe());
    let h5 = dir.join("job.h5");
    let forced = side_library(wrong);
    let forced = forced.to_str().unwrap();
    let traced = run(&exe, &dir, Some(&h5), &[("WMHCCT_MPI_LIB", forced)]);
    assert_eq!(traced.code, 0, "{}", traced.describe());
    assert_eq!(traced.stdout, plain.stdout, "stdout changed by the tracer");
    let lines = tracer_lines(&traced.stderr);
    let why: Vec<&&str> = lines
        .iter()
        .filter(|l| {
            l.contains(&format!(
                "WMHCCT_MPI_LIB={forced} was built for {built_for}"
            )) && l.contains(&format!("but this job runs {job_runs}"))
        })
        .collect();
    assert_eq!(why.len(), 1, "one line, from rank 0: {}", traced.describe());
    assert!(!h5.exists(), "no job report without the MPI side");
    let spill = dir.join("job.h5.spill");
    let profiles = std::fs::read_dir(&spill)
        .map(|d| d.flatten().count())
        .unwrap_or(0);
    assert_eq!(profiles, RANKS as usize, "{}", traced.describe());
    let merged = dir.join("merged.h5");
    merge(&spill, &merged, &dir);
    check_pattern(&report_json(&merged), "malloc", 64, 256);
}

/// An empty WMHCCT_MPI_LIB is no choice of library: the default one of the
/// job's family is loaded and the job has its report (until 2026-11-27 the
/// tracer looked for a library at the path "", and every rank spilled).
#[test]
fn an_empty_mpi_lib_setting_takes_the_default() {
    let work = workdir("empty-mpi-lib");
    let dir = work.path.clone();
    let exe = mpi_compile("mpicc.mpich", "mpi_pattern.c", &dir, &[]);
    let h5 = dir.join("job.h5");
    let traced = launch(
        Launcher::Mpich,
        RANKS,
        &exe,
        &[],
        &dir,
        Some(&h5),
        &[("WMHCCT_MPI_LIB", "")],
    );
    assert_clean_job(&traced, &h5);
    check_pattern(&report_json(&h5), "malloc", 64, 256);
}

#[test]
fn open_mpi_side_library_in_an_mpich_job() {
    wrong_family(
        |exe, dir, report, env| launch(Launcher::Mpich, RANKS, exe, &[], dir, report, env),
        "mpicc.mpich",
        "libwmhcct_mpi.so",
        "Open MPI",
        "the MPICH family",
    );
}

#[test]
fn mpich_side_library_in_an_open_mpi_job() {
    wrong_family(
        |exe, dir, report, env| launch(Launcher::OpenMpi, RANKS, exe, &[], dir, report, env),
        "mpicc",
        "libwmhcct_mpi_mpich.so",
        "the MPICH family",
        "Open MPI",
    );
}

/// The usual mix-up: the library next to libwmhcct.so, under the plain
/// name, was built for the other family (here MPICH's, in an Open MPI job).
/// It is not loaded; rank 0's line names it and what it was built for.
#[test]
fn other_familys_library_next_to_the_tracer_is_not_loaded() {
    let work = workdir("beside");
    let dir = work.path.clone();
    let libs = dir.join("lib");
    std::fs::create_dir(&libs).unwrap();
    let tracer = libs.join("libwmhcct.so");
    std::fs::copy(lib(), &tracer).unwrap();
    let beside = libs.join("libwmhcct_mpi.so");
    std::fs::copy(side_library("libwmhcct_mpi_mpich.so"), &beside).unwrap();
    let exe = mpi_compile("mpicc", "mpi_pattern.c", &dir, &[]);
    let plain = launch(Launcher::OpenMpi, RANKS, &exe, &[], &dir, None, &[]);
    let h5 = dir.join("job.h5");
    let env = [("LD_PRELOAD", tracer.to_str().unwrap())];
    let traced = launch(Launcher::OpenMpi, RANKS, &exe, &[], &dir, Some(&h5), &env);
    assert_eq!(traced.code, 0, "{}", traced.describe());
    assert_eq!(traced.stdout, plain.stdout, "stdout changed by the tracer");
    let why = format!(
        "no MPI-side library for Open MPI next to libwmhcct.so; {} is built for the MPICH family;",
        beside.display()
    );
    let lines = tracer_lines(&traced.stderr);
    assert_eq!(
        lines.iter().filter(|l| l.contains(&why)).count(),
        1,
        "one line, from rank 0: {}",
        traced.describe()
    );
    let merged = dir.join("merged.h5");
    merge(&dir.join("job.h5.spill"), &merged, &dir);
    check_pattern(&report_json(&merged), "malloc", 64, 256);
}

/// MPICH's Hydra sets no variable that names the launch; its ranks name
/// it by the port `mpiexec` listens on (their proxy's `--control-port`),
/// and `wmhcct merge` tells two launches of the same size apart. Two 2-rank runs whose rank 1 is killed by SIGKILL and
/// leaves its last snapshot (rank 0 is killed by Hydra, leaving nothing);
/// the first run's snapshot is put back beside the second's as
/// `rank-9.wmprof`, as a rank of an earlier run whose file this run did not
/// overwrite would be: the merge leaves it out, in one line.
#[test]
fn same_size_launches_are_told_apart() {
    let work = workdir("launches");
    let dir = work.path.clone();
    let exe = mpi_compile("mpicc.mpich", "grow_killed.c", &dir, &["-DWITH_MPI"]);
    let h5 = dir.join("job.h5");
    let spill = dir.join("job.h5.spill");
    let snapshot = spill.join("rank-1.wmprof");
    let earlier = dir.join("earlier.wmprof");
    for run in 0..2 {
        let args = ["8", "kill"];
        let env = [("WMHCCT_SNAPSHOT", "4MiB")];
        let out = launch(Launcher::Mpich, 2, &exe, &args, &dir, Some(&h5), &env);
        assert_ne!(out.code, 0, "{}", out.describe());
        assert!(snapshot.is_file(), "run {run}: {}", out.describe());
        if run == 0 {
            std::fs::rename(&snapshot, &earlier).unwrap();
        }
    }
    std::fs::rename(&earlier, spill.join("rank-9.wmprof")).unwrap();
    merge_leaving_out(&spill, &h5, &dir, &[], "rank-9.wmprof", 1);
}
