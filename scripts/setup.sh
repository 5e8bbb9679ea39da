#!/usr/bin/env bash
# Installs what the build, the demo and the test suite need on Debian 12
# (run as root, e.g. in CI on a fresh clone). Idempotent and fast when
# everything is present: packages are checked with dpkg-query first, and
# apt-get update runs once, only when something is missing.
set -euo pipefail

PACKAGES=(
    build-essential g++ gfortran clang pkg-config
    libhdf5-dev hdf5-tools python3-h5py
    openmpi-bin libopenmpi-dev
    # The MPICH family's MPI side (scripts/build.sh) and tests/tests/mpich.rs;
    # Open MPI stays the default mpicc/mpirun (higher alternatives priority).
    mpich libmpich-dev
    # A Python MPI program (tests/tests/mpi4py.rs): mpi4py, Open MPI.
    python3-mpi4py
    # Parallel HDF5 for tests/tests/mpi_hdf5.rs; coexists with libhdf5-dev
    # on Debian 12 (own paths, h5pcc; hdf5.pc is pinned back below).
    libhdf5-openmpi-dev
    heaptrack
    libjemalloc2
    # A real MPI application for tests/tests/real_mpi_app.rs and
    # benches/real_mpi.py (LAMMPS, built with OpenMPI).
    lammps
    # Traced programs under valgrind (tests/tests/valgrind.rs).
    valgrind
    # The C library's debug file, which every report's root frames are
    # named from (viz/src/debug_file.rs tests it; valgrind depends on it).
    libc6-dbg
    # Everyday programs under the tracer (tests/tests/everyday_programs.rs).
    git xz-utils perl mawk
)
# Wanted when they can coexist with what is installed (checked with apt-get -s).
OPTIONAL=()

installed() {
    [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null || true)" = "installed" ]
}

SUDO=
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
        echo "setup.sh: not root and no sudo: install ${PACKAGES[*]} by hand" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
APT_OPTS=(-y -q --no-install-recommends -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)

missing=()
for p in "${PACKAGES[@]}"; do installed "$p" || missing+=("$p"); done
missing_opt=()
for p in "${OPTIONAL[@]}"; do installed "$p" || missing_opt+=("$p"); done

# libhdf5-openmpi-dev raises the hdf5.pc alternative to the MPI build; the
# tracer's CLI links the serial HDF5 (pkg-config hdf5), so pin it back.
SERIAL_PC=/usr/lib/x86_64-linux-gnu/pkgconfig/hdf5-serial.pc
pin_serial_hdf5() {
    if [ -e "$SERIAL_PC" ] && command -v update-alternatives >/dev/null 2>&1 &&
        update-alternatives --query hdf5.pc >/dev/null 2>&1 &&
        [ "$(readlink -f /usr/lib/x86_64-linux-gnu/pkgconfig/hdf5.pc)" != "$SERIAL_PC" ]; then
        $SUDO update-alternatives --set hdf5.pc "$SERIAL_PC" >/dev/null
        echo "setup.sh: pkg-config hdf5 pinned to the serial HDF5"
    fi
}

# The toolchain's llvm-profdata, for the profile-guided build of
# libwmhcct.so (scripts/pgo.sh); without it the library is built plain.
llvm_tools() {
    command -v rustup >/dev/null 2>&1 || return 0
    rustup component list --installed 2>/dev/null | grep -q '^llvm-tools' && return 0
    echo "setup.sh: adding the rustup component llvm-tools"
    rustup component add llvm-tools ||
        echo "setup.sh: rustup component llvm-tools not added; libwmhcct.so will be built without profile-guided optimisation"
}
llvm_tools

if [ ${#missing[@]} -eq 0 ] && [ ${#missing_opt[@]} -eq 0 ]; then
    pin_serial_hdf5
    echo "setup.sh: all packages present"
    exit 0
fi

updated=0
update_once() {
    if [ "$updated" -eq 0 ]; then
        $SUDO apt-get update -q
        updated=1
    fi
}

if [ ${#missing[@]} -gt 0 ]; then
    echo "setup.sh: installing ${missing[*]}"
    update_once
    $SUDO apt-get install "${APT_OPTS[@]}" "${missing[@]}"
fi

for p in "${missing_opt[@]}"; do
    update_once
    # Simulate first: skip the package if it would remove anything
    # (e.g. conflict with the serial libhdf5-dev).
    if sim=$($SUDO apt-get -s install "${APT_OPTS[@]}" "$p" 2>&1) && ! grep -q '^Remv ' <<<"$sim"; then
        echo "setup.sh: installing optional $p"
        $SUDO apt-get install "${APT_OPTS[@]}" "$p" || echo "setup.sh: optional $p not installed (skipped)"
    else
        echo "setup.sh: optional $p skipped (conflicts or unavailable)"
    fi
done

pin_serial_hdf5
for p in "${PACKAGES[@]}"; do
    installed "$p" || { echo "setup.sh: $p still missing" >&2; exit 1; }
done
echo "setup.sh: done"
