#!/usr/bin/env bash
# The main job: build, trace the bundled MPI demo (tests/programs/mpi_stencil.c,
# 4 ranks) and write the report and the plots into demo-out/ (the README's
# images come from docs/, refreshed with --docs).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
bash scripts/setup.sh
bash scripts/build.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
OUT="$ROOT/demo-out"
mkdir -p "$OUT"
mpicc -O2 -g -o "$OUT/mpi_stencil" tests/programs/mpi_stencil.c
rm -f "$OUT/demo.h5"
mpirun -np 4 --oversubscribe \
    -x LD_PRELOAD="$ROOT/target/release/libwmhcct.so" -x WMHCCT_OUT="$OUT/demo.h5" \
    "$OUT/mpi_stencil" 400 256
target/release/wmhcct report "$OUT/demo.h5" --top 10
target/release/wmhcct plot "$OUT/demo.h5" --out-dir "$OUT/plots" --format both
target/release/wmhcct export "$OUT/demo.h5" --format folded > "$OUT/demo.folded"
echo "report: $OUT/demo.h5, plots: $OUT/plots/ (open $OUT/plots/index.html)"
if [ "${1:-}" = "--docs" ]; then
    mkdir -p docs
    cp "$OUT"/plots/*.png "$OUT"/plots/*.svg docs/ 2>/dev/null || true
fi
