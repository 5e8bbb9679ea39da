//! The preloaded library must not drag MPI or HDF5 into every process.

use std::process::Command;

use wmhcct_e2e::*;

#[test]
fn library_links_neither_mpi_nor_hdf5() {
    let lib = lib();
    let out = run_cmd(Command::new("ldd").arg(&lib), TIMEOUT);
    assert_eq!(out.code, 0, "ldd {}: {}", lib.display(), out.describe());
    for bad in ["libmpi", "libhdf5", "libopen-pal", "libopen-rte"] {
        assert!(
            !out.stdout.contains(bad),
            "{} depends on {bad}:\n{}",
            lib.display(),
            out.stdout
        );
    }
    assert!(
        out.stdout.contains("libc.so"),
        "ldd lists libc: {}",
        out.stdout
    );
}
