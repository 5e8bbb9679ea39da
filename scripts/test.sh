#!/usr/bin/env bash
# The project's test command (README; CI runs it through .ci/run):
# set-up, formatting, lints, release build, then every test of the
# workspace in release mode (the end-to-end tests in tests/ run the built
# target/release/libwmhcct.so and target/release/wmhcct).
# Exits non-zero on the first failing step.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
# The tests choose the library themselves; nothing inherited may redirect them.
unset LD_PRELOAD WMHCCT_LIB WMHCCT_BIN WMHCCT_OUT || true

step() { echo; echo "==> $*"; }

step "setup"
bash scripts/setup.sh

step "cargo fmt --all -- --check"
cargo fmt --all -- --check

step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "build (scripts/build.sh: cargo build --release, and the MPI side for MPICH)"
bash scripts/build.sh

step "slurm: bash -n on the batch script of every launcher (wmhcct slurm)"
for launcher in mpirun srun mpiexec; do
    target/release/wmhcct slurm --ntasks 2 --launcher "$launcher" -- ./app "an arg" | bash -n
done

step "cargo test --workspace --release"
cargo test --workspace --release

echo
echo "==> all steps passed"
