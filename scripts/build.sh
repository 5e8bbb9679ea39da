#!/usr/bin/env bash
# Builds what a job needs into target/release: the workspace (libwmhcct.so,
# wmhcct, and libwmhcct_mpi.so for the MPI of the first `mpicc`: Open MPI on
# Debian), then, when MPICH's development files are installed,
# libwmhcct_mpi_mpich.so, the MPI side for jobs of the MPICH family (the
# tracer picks the one that matches the job's MPI: interpose/src/mpi_side.rs).
# libwmhcct.so is then rebuilt with profile-guided optimisation
# (scripts/pgo.sh; WMHCCT_PGO=0 skips it).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

cargo build --release
bash scripts/pgo.sh

if pkg-config --exists mpich 2>/dev/null; then
    pc="$(pkg-config --variable=pcfiledir mpich)/mpich.pc"
    # Its own target directory: rsmpi's build probes the MPI once per build.
    MPI_PKG_CONFIG="$pc" cargo build --release -p wmhcct-mpi --target-dir target/mpi-mpich
    cp -f target/mpi-mpich/release/libwmhcct_mpi.so target/release/libwmhcct_mpi_mpich.so
fi
