#!/usr/bin/python3
"""The MPI merge: reduction time and root memory for real and simulated jobs.

    /usr/bin/python3 benches/mpi_merge.py            # 2–64 real ranks, 10^3–10^5 simulated (~5 min)
    /usr/bin/python3 benches/mpi_merge.py --quick    # 2 and 4 ranks, 10^2–10^3 simulated (seconds)

Needs `bash scripts/build.sh` first, OpenMPI (mpicc, mpirun) and cargo.

1. Real ranks: benches/mpi_merge.c under `mpirun -np P --oversubscribe` for
   each P, with and without libwmhcct.so. Rank 0 takes the wall clock just
   before and after MPI_Finalize (where the tracer's binomial reduction
   runs) and its VmHWM/VmRSS before and after. `WMHCCT_BIN` points to a
   wrapper around `wmhcct convert` that records when rank 0's tracer starts
   and ends the conversion of the merged profile, and the profile's size.
   "reduction" is MPI_Finalize's start to the conversion's start on rank 0:
   taking and encoding rank 0's own profile, then receiving and merging the
   children's parts up the tree (⌈log2 P⌉ rounds). "convert" is the HDF5
   conversion (symbolisation, writing), synchronous on rank 0. Medians over
   `--rounds` runs.
2. Simulated ranks: benches/src/bin/merge_sim.rs, P per-rank summaries
   merged through `job::merge` in binomial order (the streaming
   `job::BinomialMerger` and `job::merge_all`): synthetic summaries for
   10^3–10^5 ranks, then real ones (the 4 per-rank profiles of a traced
   mpi_merge job, left as spill files) for 10^2–10^3 ranks.
"""
import argparse
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIB = os.environ.get("WMHCCT_LIB", os.path.join(ROOT, "target/release/libwmhcct.so"))
BIN = os.environ.get("WMHCCT_BIN", os.path.join(ROOT, "target/release/wmhcct"))

WRAPPER = """#!/bin/sh
# wmhcct convert <profile> -o <report> --remove-input, timed.
s=$(date +%s%N)
sz=$(stat -c %s "$2" 2>/dev/null || echo 0)
"{real}" "$@"
rc=$?
e=$(date +%s%N)
echo "convert_start_ns=$s convert_end_ns=$e profile_bytes=$sz rc=$rc" > "$4.timing"
exit $rc
"""


class Failed(Exception):
    pass


def clean_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith("WMHCCT_") and k != "LD_PRELOAD"}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


def kv(line):
    return {k: int(v) for k, v in re.findall(r"(\w+)=(-?\d+)", line)}


def mpirun(np, exe, args, tmp, traced, tag):
    cmd = ["mpirun", "-np", str(np), "--oversubscribe"]
    report = os.path.join(tmp, f"{tag}.h5")
    if traced:
        for k, v in (("LD_PRELOAD", LIB), ("WMHCCT_OUT", report),
                     ("WMHCCT_BIN", os.path.join(tmp, "convert-wrapper"))):
            cmd += ["-x", f"{k}={v}"]
    t = time.monotonic()
    r = subprocess.run(cmd + [exe] + args, env=clean_env(), cwd=tmp, capture_output=True, text=True,
                       timeout=900)
    wall = time.monotonic() - t
    if r.returncode != 0:
        raise Failed(f"mpirun -np {np} ({'traced' if traced else 'plain'}) exit {r.returncode}:\n"
                     f"{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("mpi_merge ")), None)
    if line is None:
        raise Failed(f"no figures from rank 0:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    out = kv(line)
    out["wall"] = wall
    if traced:
        timing = report + ".timing"
        if not os.path.exists(timing) or not os.path.exists(report):
            raise Failed(f"no report or no conversion timing for {np} ranks:\n{r.stderr[-2000:]}")
        with open(timing) as f:
            out.update(kv(f.read()))
        for f in (timing, report):
            os.remove(f)
    return out


def real_ranks(ranks, events, rounds, tmp):
    exe = os.path.join(tmp, "mpi_merge")
    subprocess.run(["mpicc", "-O2", "-g", "-fno-omit-frame-pointer", "-o", exe,
                    os.path.join(ROOT, "benches/mpi_merge.c")], check=True)
    with open(os.path.join(tmp, "convert-wrapper"), "w") as f:
        f.write(WRAPPER.format(real=BIN))
    os.chmod(os.path.join(tmp, "convert-wrapper"), 0o755)
    rows = []
    for p in ranks:
        plain, traced = [], []
        for i in range(rounds):
            plain.append(mpirun(p, exe, [str(events)], tmp, False, f"p{p}-{i}"))
            traced.append(mpirun(p, exe, [str(events)], tmp, True, f"t{p}-{i}"))

        def med(xs, f):
            return statistics.median(f(x) for x in xs)

        rows.append({
            "ranks": p,
            "depth": math.ceil(math.log2(p)) if p > 1 else 0,
            "reduce_s": med(traced, lambda x: (x["convert_start_ns"] - x["finalize_start_ns"]) / 1e9),
            "convert_s": med(traced, lambda x: (x["convert_end_ns"] - x["convert_start_ns"]) / 1e9),
            "finalize_s": med(traced, lambda x: (x["finalize_end_ns"] - x["finalize_start_ns"]) / 1e9),
            "plain_finalize_s": med(plain, lambda x: (x["finalize_end_ns"] - x["finalize_start_ns"]) / 1e9),
            "hwm_before_mib": med(traced, lambda x: x["hwm_before_kib"] / 1024),
            "hwm_after_mib": med(traced, lambda x: x["hwm_after_kib"] / 1024),
            "hwm_growth_mib": med(traced, lambda x: (x["hwm_after_kib"] - x["hwm_before_kib"]) / 1024),
            "plain_hwm_mib": med(plain, lambda x: x["hwm_after_kib"] / 1024),
            "profile_kib": med(traced, lambda x: x["profile_bytes"] / 1024),
            "wall_s": med(traced, lambda x: x["wall"]),
            "plain_wall_s": med(plain, lambda x: x["wall"]),
        })
        print_real_row(rows[-1], first=len(rows) == 1, events=events, rounds=rounds)
    return rows


def print_real_row(r, first, events, rounds):
    if first:
        print("### MPI merge, real ranks (mpi_merge.c, oversubscribed)")
        print()
        print(f"{events} allocations per rank over 1024 call paths (Zipf 1.0, hot spot shifted per rank), "
              f"wmhcct defaults; rank 0's figures, median of {rounds} runs; "
              f"{os.cpu_count()} CPUs for all ranks.")
        print()
        print("| ranks | rounds (⌈log2 P⌉) | reduction s | convert s | MPI_Finalize s (untraced) | "
              "root VmHWM before → after MiB (untraced) | merged profile KiB | job wall s (untraced) |")
        print("|---|---|---|---|---|---|---|---|")
    print(f"| {r['ranks']} | {r['depth']} | {r['reduce_s']:.3f} | {r['convert_s']:.2f} | "
          f"{r['finalize_s']:.2f} ({r['plain_finalize_s']:.2f}) | "
          f"{r['hwm_before_mib']:.1f} → {r['hwm_after_mib']:.1f} ({r['plain_hwm_mib']:.1f}) | "
          f"{r['profile_kib']:.0f} | {r['wall_s']:.1f} ({r['plain_wall_s']:.1f}) |")
    sys.stdout.flush()


def spill_profiles(np, events, tmp):
    """Real per-rank profiles: a traced job whose MPI side cannot load
    leaves each rank's profile in the spill directory."""
    exe = os.path.join(tmp, "mpi_merge")
    report = os.path.join(tmp, "spilled.h5")
    cmd = ["mpirun", "-np", str(np), "--oversubscribe"]
    for k, v in (("LD_PRELOAD", LIB), ("WMHCCT_OUT", report), ("WMHCCT_MPI_LIB", "/nonexistent")):
        cmd += ["-x", f"{k}={v}"]
    subprocess.run(cmd + [exe, str(events)], env=clean_env(), cwd=tmp, capture_output=True, timeout=300)
    spill = report + ".spill"
    files = sorted(os.path.join(spill, f) for f in os.listdir(spill)) if os.path.isdir(spill) else []
    if len(files) != np:
        raise Failed(f"expected {np} spill files in {spill}, found {len(files)}")
    return files


def merge_sim(args):
    env = dict(os.environ)
    env.setdefault("CARGO_TARGET_DIR", os.path.join(ROOT, "target/benches"))
    manifest = os.path.join(ROOT, "benches/Cargo.toml")
    subprocess.run(["cargo", "build", "--release", "--quiet", "--manifest-path", manifest,
                    "--bin", "merge_sim"], env=env, check=True)
    exe = os.path.join(env["CARGO_TARGET_DIR"], "release", "merge_sim")
    r = subprocess.run([exe] + args, capture_output=True, text=True)
    if r.returncode != 0:
        raise Failed(f"merge_sim failed: {r.stderr[-2000:]}")
    print()
    print(r.stdout, end="")
    sys.stdout.flush()
    return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="2 and 4 ranks, small simulated jobs")
    ap.add_argument("--ranks", default="2,4,8,16,32,64")
    ap.add_argument("--events", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sim-ranks", help="simulated rank counts (default 1000,10000,100000)")
    ap.add_argument("--no-real", action="store_true")
    ap.add_argument("--no-sim", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.ranks, a.events, a.rounds = "2,4", 5000, 1
    for f in (LIB, BIN):
        if not os.path.exists(f):
            sys.exit(f"{f} is missing: run bash scripts/build.sh first")
    tmp = tempfile.mkdtemp(prefix="wmhcct-mpi-merge-")
    try:
        if not a.no_real:
            real_ranks([int(x) for x in a.ranks.split(",") if x], a.events, a.rounds, tmp)
        if not a.no_sim:
            merge_sim((["--quick"] if a.quick else []) + (["--ranks", a.sim_ranks] if a.sim_ranks else []))
            if not a.no_real:
                # The same merges on real per-rank summaries (tracer defaults).
                files = spill_profiles(4, a.events, tmp)
                merge_sim(["--base", ",".join(files), "--ranks", "16,64" if a.quick else "100,1000",
                           "--all-up-to", "100"])
    except (Failed, subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        sys.exit(f"mpi_merge benchmark failed: {e}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
