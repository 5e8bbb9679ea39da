//! An MPI program that writes its own file with parallel HDF5
//! (tests/programs/mpi_hdf5.c, built against libhdf5-openmpi-dev) behaves
//! identically with and without the tracer: exit code, stdout, stderr (but
//! for the closing line) and the written file's content (`h5dump`), on 4
//! ranks; and the traced run leaves its job report.
//!
//! Parallel HDF5 is required, not optional: scripts/setup.sh installs
//! libhdf5-openmpi-dev next to the serial libhdf5-dev. Without it this test
//! fails and says so.

mod mpi_common;

use std::path::{Path, PathBuf};

use mpi_common::*;
use wmhcct_e2e::*;

const P: u32 = 4;
const OMPI_INC: &str = "/usr/include/hdf5/openmpi";
const OMPI_LIB: &str = "/usr/lib/x86_64-linux-gnu/hdf5/openmpi";

/// Build with `h5pcc -shlib` when it is the parallel (OpenMPI) HDF5's,
/// else with mpicc against Debian's OpenMPI HDF5 paths.
fn build(dir: &Path) -> PathBuf {
    let h5pcc = run_cmd(&mut command("h5pcc", &["-showconfig"], dir), TIMEOUT);
    if h5pcc.code == 0 && h5pcc.stdout.contains("Parallel HDF5: yes") {
        return mpi_compile("h5pcc", "mpi_hdf5.c", dir, &["-shlib"]);
    }
    assert!(
        Path::new(OMPI_INC).join("hdf5.h").is_file(),
        "parallel HDF5 is not installed: no parallel h5pcc and no {OMPI_INC}/hdf5.h. \
         Install libhdf5-openmpi-dev (bash scripts/setup.sh does). h5pcc: {}",
        h5pcc.describe()
    );
    let inc = format!("-I{OMPI_INC}");
    let lib = format!("-L{OMPI_LIB}");
    let rpath = format!("-Wl,-rpath,{OMPI_LIB}");
    mpi_compile("mpicc", "mpi_hdf5.c", dir, &[&inc, &lib, &rpath, "-lhdf5"])
}

fn dump(dir: &Path, file: &str) -> String {
    let out = run_cmd(&mut command("h5dump", &[file], dir), TIMEOUT);
    assert_eq!(out.code, 0, "h5dump {file}: {}", out.describe());
    out.stdout
}

#[test]
fn parallel_hdf5_program_behaves_identically_under_the_tracer() {
    let dir = WorkDir::new("mpi-hdf5");
    let exe = build(&dir.path);
    // The same relative file name in two directories: h5dump prints it.
    let plain_dir = dir.join("plain");
    let traced_dir = dir.join("traced");
    std::fs::create_dir_all(&plain_dir).unwrap();
    std::fs::create_dir_all(&traced_dir).unwrap();
    let plain = launch(
        Launcher::OpenMpi,
        P,
        &exe,
        &["field.h5"],
        &plain_dir,
        None,
        &[],
    );
    assert_eq!(plain.code, 0, "without the tracer: {}", plain.describe());
    let report = dir.join("job.h5");
    let traced = launch(
        Launcher::OpenMpi,
        P,
        &exe,
        &["field.h5"],
        &traced_dir,
        Some(&report),
        &[],
    );
    assert_same_as_untraced(&plain, &traced, &report);
    assert!(
        plain
            .stdout
            .contains(&format!("mpi_hdf5: {P} ranks wrote field.h5")),
        "{}",
        plain.describe()
    );
    let a = dump(&plain_dir, "field.h5");
    let b = dump(&traced_dir, "field.h5");
    assert!(
        a.contains("DATASET \"field\"")
            && a.contains("DATASET \"owner\"")
            && a.contains("\"ranks\""),
        "{}",
        &a[..a.len().min(2000)]
    );
    assert!(a == b, "the file written under the tracer differs (h5dump)");

    let r = report_json(&report);
    assert_eq!(r["ranks"], P);
    // HDF5's MPI-IO layer made MPI calls of its own, which were traced.
    let mpi_calls: u64 = r["totals"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| k.starts_with("MPI_") && !k.contains("_mem"))
        .map(|(_, v)| u64_of(&v["count"]))
        .sum();
    assert!(mpi_calls >= P as u64, "{}", r["totals"]);
    assert!(total_count(&r, "malloc") > 0);
}
