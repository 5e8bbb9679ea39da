#!/usr/bin/env bash
# Profile-guided build of libwmhcct.so (called by scripts/build.sh after
# `cargo build --release`; docs/performance.md has the measurements).
#
#   1. build the tracer instrumented (-Cprofile-generate) in target/pgo/gen;
#   2. run it under benches/alloc_stress.c in a few configurations (random
#      order and bursts, the collector thread and inline, two threads,
#      per-event sizes with a live set, the other unwind modes, more contexts
#      than the summary's counters) and under
#      benches/mpi_poll.c on 2 ranks, ten seconds or so in all;
#   3. merge the counts with the toolchain's llvm-profdata (rustup component
#      llvm-tools, which scripts/setup.sh adds);
#   4. build it again with -Cprofile-use in target/pgo/use and put it in
#      place of target/release/libwmhcct.so.
#
# Step 4 writes the library through the file cargo keeps in
# target/release/deps, which target/release/libwmhcct.so is a hard link of:
# cargo links that file again at every build that finds the tracer up to
# date, so the profile-guided library stays in place (and is what
# `cargo test --release` tests) until the tracer's sources change and cargo
# rebuilds it; scripts/build.sh then runs this again. The outcome is
# written to target/pgo/status, which tests/tests/pgo_build.rs checks.
#
# WMHCCT_PGO=0 skips it (the library stays cargo's plain build). Without
# llvm-profdata, or when a step fails, the plain build stays and one line
# says why; the build itself does not fail for it.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

case "${WMHCCT_PGO:-1}" in
    0 | 1) ;;
    *) echo "pgo.sh: WMHCCT_PGO=\"$WMHCCT_PGO\" is not valid: expected 0 (skip) or 1 (default)" >&2
       exit 2 ;;
esac

PGO=target/pgo
STATUS=$PGO/status
LIB=target/release/libwmhcct.so
mkdir -p "$PGO"
HOST=$(rustc -vV | sed -n 's/^host: //p')
BUILT=$PGO/use/$HOST/release/libwmhcct.so

# Writes the library in place of cargo's: through the hard link, both names,
# one file (see above).
install() {
    cp -f "$1" target/release/deps/libwmhcct.so
    cmp -s "$1" "$LIB" || cp -f "$1" "$LIB"
}
sum() { cksum <"$1" | cut -d' ' -f1; }

# Cargo's plain build, kept for benches/run.py's `second@plain` row; when
# the library in place is still this script's earlier output, cargo did
# not rebuild it and the copy kept then is the plain one.
if [ -f "$BUILT" ] && cmp -s "$BUILT" "$LIB"; then
    ours=1
else
    ours=0
    mkdir -p "$PGO/plain"
    cp -f "$LIB" "$PGO/plain/libwmhcct.so"
fi

plain() {
    if [ "$ours" = 1 ] && [ -f "$PGO/plain/libwmhcct.so" ]; then
        install "$PGO/plain/libwmhcct.so"
    fi
    echo "plain: $*" >"$STATUS"
    echo "pgo.sh: libwmhcct.so left without profile-guided optimisation: $*" >&2
    exit 0
}

[ "${WMHCCT_PGO:-1}" = 0 ] && plain "WMHCCT_PGO=0"

# Up to date: the library in place is this script's output for these
# sources and this script.
stamp() { echo "profile-guided: $(sum "$LIB") $(sum scripts/pgo.sh)"; }
if [ "$ours" = 1 ] && [ -f "$STATUS" ] && [ "$(cat "$STATUS")" = "$(stamp)" ]; then
    echo "pgo.sh: target/release/libwmhcct.so is up to date (profile-guided)"
    exit 0
fi

PROFDATA="$(rustc --print sysroot)/lib/rustlib/$HOST/bin/llvm-profdata"
[ -x "$PROFDATA" ] || plain "no llvm-profdata in the toolchain (rustup component add llvm-tools)"

# An explicit --target keeps the flag off build scripts and proc macros.
# The flag joins the configured target.<host>.rustflags, the ones this
# repository would use (setting RUSTFLAGS would replace them, as for any
# cargo build, so that the two builds would differ from cargo's in more
# than the profile). A configured build.rustflags is the exception: cargo
# ignores it once a target's rustflags are set. A RUSTFLAGS of the
# caller's own, which replaces all of them anyway, gets the flag added.
build() { # target-dir rustflag
    local flag=(--config "target.$HOST.rustflags=[\"$2\"]")
    if [ -n "${RUSTFLAGS:-}" ]; then
        flag=()
        local RUSTFLAGS="$RUSTFLAGS $2"
        export RUSTFLAGS
    fi
    cargo build --release -q -p wmhcct-interpose "${flag[@]}" --target "$HOST" --target-dir "$PGO/$1"
}

rm -rf "$PGO/profraw" "$PGO/train"
mkdir -p "$PGO/profraw" "$PGO/train"
build gen "-Cprofile-generate=$ROOT/$PGO/profraw" || plain "the instrumented build failed"
cc -O2 -g -o "$PGO/alloc_stress" benches/alloc_stress.c -lm -lpthread ||
    plain "benches/alloc_stress.c did not compile"

# The training runs: one line each, the stress program's arguments, with
# the tracer's settings for that run (WMHCCT_COLLECTOR=auto and
# WMHCCT_UNWIND=second are the defaults). The default mode gets most of the
# events; the other modes run too, so that the compiler does not take their
# code for cold.
GEN_LIB=$ROOT/$PGO/gen/$HOST/release/libwmhcct.so
train() { # collector unwind args...
    local collector=$1 unwind=$2
    shift 2
    env -u LD_PRELOAD WMHCCT_COLLECTOR="$collector" WMHCCT_UNWIND="$unwind" \
        WMHCCT_OUT="$PGO/train/r.h5" WMHCCT_BIN="$ROOT/target/release/wmhcct" LD_PRELOAD="$GEN_LIB" \
        "$PGO/alloc_stress" --depth 30 --contexts 10000 --zipf 1.0 "$@" >/dev/null 2>"$PGO/train/stderr" ||
        plain "a training run failed: $(head -n 1 "$PGO/train/stderr")"
}
train auto second --events 1000000 --order random
train auto second --events 1000000 --order bursts
train inline second --events 500000 --order random
train inline second --events 500000 --order bursts
train auto second --events 500000 --order random --threads 2
train auto second --events 500000 --order random --sizes random --free live:1000
train auto first --events 200000 --order random
train auto full --events 100000 --order random
train auto fp --events 100000 --order random
train auto none --events 200000 --order random
# More contexts than the summary has counters: evictions, as in large codes.
train auto second --events 300000 --order random --contexts 100000 --zipf 0.5
train inline second --events 300000 --order random --contexts 100000 --zipf 0.5

# MPI calls (benches/mpi_poll.c on 2 ranks: MPI_Test in a progress loop,
# then nonblocking exchanges), where Open MPI is installed.
if command -v mpicc >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1 &&
    mpicc -O2 -g -o "$PGO/mpi_poll" benches/mpi_poll.c 2>"$PGO/train/stderr"; then
    for unwind in second full; do
        env -u LD_PRELOAD OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
            WMHCCT_UNWIND=$unwind WMHCCT_OUT="$PGO/train/mpi.h5" WMHCCT_BIN="$ROOT/target/release/wmhcct" \
            WMHCCT_MPI_LIB="$ROOT/target/release/libwmhcct_mpi.so" \
            mpirun -np 2 --oversubscribe -x LD_PRELOAD="$GEN_LIB" -x WMHCCT_UNWIND -x WMHCCT_OUT -x WMHCCT_BIN \
            -x WMHCCT_MPI_LIB "$PGO/mpi_poll" 1000000 20000 >/dev/null 2>"$PGO/train/stderr" ||
            plain "the MPI training run failed: $(head -n 1 "$PGO/train/stderr")"
    done
else
    echo "pgo.sh: no MPI training run (mpicc or mpirun missing, or mpi_poll.c did not compile)"
fi

"$PROFDATA" merge -o "$PGO/wmhcct.profdata" "$PGO"/profraw/*.profraw ||
    plain "llvm-profdata merge failed"
build use "-Cprofile-use=$ROOT/$PGO/wmhcct.profdata" || plain "the profile-guided build failed"

install "$BUILT"
stamp >"$STATUS"
echo "pgo.sh: target/release/libwmhcct.so built with profile-guided optimisation"
