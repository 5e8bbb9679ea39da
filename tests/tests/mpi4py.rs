//! mpi4py end-to-end test: a Python MPI program (Debian's python3-mpi4py,
//! Open MPI) on 4 ranks under libwmhcct.so. Python loads the MPI library
//! with mpi4py's extension module, `RTLD_LOCAL`: the extension's MPI calls
//! reach the tracer's wrappers (global), whose `RTLD_NEXT` lookup cannot
//! see the MPI library. The tracer must find it anyway
//! (`interpose/src/loaded_symbol.rs`), not abort the job.

mod mpi_common;

use mpi_common::*;
use wmhcct_e2e::*;

const RANKS: u32 = 4;
/// Per rank, as in tests/programs/mpi_pattern.py.
const BLOCK_BYTES: u64 = 4 << 20;
const BLOCKS: u64 = 10;

#[test]
fn python_program_four_ranks() {
    let work = WorkDir::new("mpi4py");
    let dir = work.path.clone();
    let script = root().join("tests/programs/mpi_pattern.py");
    let script = script.to_str().unwrap();
    // Not `python3` from PATH (a shell shim here): the tracer would trace
    // the shell.
    let python = std::path::Path::new("/usr/bin/python3");
    let plain = launch(Launcher::OpenMpi, RANKS, python, &[script], &dir, None, &[]);
    assert_eq!(
        plain.code,
        0,
        "mpi4py (scripts/setup.sh): {}",
        plain.describe()
    );
    assert!(
        plain.stdout.contains("done on 4 ranks"),
        "{}",
        plain.describe()
    );
    let h5 = dir.join("job.h5");
    let traced = launch(
        Launcher::OpenMpi,
        RANKS,
        python,
        &[script],
        &dir,
        Some(&h5),
        &[],
    );
    assert_same_as_untraced(&plain, &traced, &h5);
    let r = report_json(&h5);
    assert_eq!(r["ranks"], RANKS, "{}", summary(&r));
    let t = &r["totals"];
    assert_eq!(t["MPI_Allreduce"]["count"], RANKS as u64);
    assert_eq!(t["MPI_Allreduce"]["bytes"], RANKS as u64 * 1000 * 8);
    assert_eq!(t["MPI_Barrier"]["count"], RANKS as u64);
    // The buffers: BLOCKS blocks of BLOCK_BYTES (and a little) per rank, in
    // contexts whose blocks average that much.
    let big: u64 = contexts(&r)
        .iter()
        .filter(|c| c["kind"] != "free")
        .filter(|c| u64_of(&c["bytes"]) >= u64_of(&c["count"]) * BLOCK_BYTES)
        .map(|c| u64_of(&c["count"]))
        .sum();
    assert_eq!(
        big,
        BLOCKS * RANKS as u64,
        "{big} blocks of 4 MiB in the report: {}",
        summary(&r)
    );
}
