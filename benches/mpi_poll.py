#!/usr/bin/python3
"""The cost of MPI polling under the tracer: benches/mpi_poll.c on 2 ranks.

    /usr/bin/python3 benches/mpi_poll.py           # 7 rounds (~1 minute)
    /usr/bin/python3 benches/mpi_poll.py --quick   # one small round (seconds; CI)

Needs `bash scripts/build.sh` first and OpenMPI (mpicc, mpirun).

Each rank times two loops: 10^7 calls of MPI_Test on a receive that stays
pending ("poll": a progress loop), and 10^5 rounds of MPI_Irecv and MPI_Isend
with the partner rank followed by MPI_Testall until both complete
("exchange": polling that other calls interrupt every round). The modes, run
in turn in every round (medians over the rounds): native; wmhcct with
`WMHCCT_UNWIND=none` (no stacks), `second` (the default) and `full` (every
stack unwound in full, so no call is folded into the record of the one
before it: `interpose/src/mpi_repeats.rs`). Rank 0's figures are printed; "added" is the mode's
figure minus the native one of the same round.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mpi_merge import LIB, clean_env  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = ["native", "none", "second", "full"]


def run(exe, mode, n, rounds, tmp):
    env = clean_env()
    cmd = ["mpirun", "-np", "2", "--oversubscribe"]
    if mode != "native":
        env.update(WMHCCT_UNWIND=mode, WMHCCT_OUT=os.path.join(tmp, f"{mode}.h5"))
        cmd += ["-x", f"LD_PRELOAD={LIB}", "-x", "WMHCCT_UNWIND", "-x", "WMHCCT_OUT"]
    out = subprocess.run(cmd + [exe, str(n), str(rounds)], env=env, capture_output=True,
                         text=True, timeout=600)
    m = re.search(r"poll_ns=([0-9.]+) exchange_ns=([0-9.]+) tests=(\d+)", out.stdout)
    if out.returncode != 0 or not m:
        sys.exit(f"mpi_poll: {mode} failed (exit {out.returncode}):\n{out.stdout}{out.stderr}")
    return float(m.group(1)), float(m.group(2))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one small round")
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    n, rounds, repeat = (200000, 2000, 1) if a.quick else (10000000, 100000, a.rounds)
    with tempfile.TemporaryDirectory(prefix="wmhcct-mpi-poll-") as tmp:
        exe = os.path.join(tmp, "mpi_poll")
        subprocess.run(["mpicc", "-O2", "-g", "-o", exe, os.path.join(HERE, "mpi_poll.c")], check=True)
        res = {m: [] for m in MODES}
        for r in range(repeat):
            order = MODES if r % 2 == 0 else MODES[:1] + MODES[:0:-1]
            for m in order:
                res[m].append(run(exe, m, n, rounds, tmp))
    med = {m: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for m, v in res.items()}
    added = {m: (statistics.median(x[0] - y[0] for x, y in zip(res[m], res["native"])),
                 statistics.median(x[1] - y[1] for x, y in zip(res[m], res["native"]))) for m in MODES}
    print(f"## MPI polling: mpirun -np 2, {n} MPI_Test calls and {rounds} exchange rounds per rank; "
          f"median of {repeat} rounds\n")
    print("| mode | MPI_Test ns per call | added ns | ratio to native | exchange µs per round | added µs | ratio to native |")
    print("|---|---|---|---|---|---|---|")
    for m in MODES:
        p, e = med[m]
        ap_, ae = added[m]
        print(f"| {m} | {p:.1f} | {ap_:.1f} | {p / med['native'][0]:.2f} | {e / 1000:.2f} | {ae / 1000:.2f} | "
              f"{e / med['native'][1]:.2f} |")
    print("\n`full` unwinds every stack in full and folds no call: each call is recorded.")


if __name__ == "__main__":
    main()
