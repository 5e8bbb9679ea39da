"""Checks a job report (`wmhcct report --json`) of tests/programs/mpi_pattern.c
run with 2 ranks and K blocks per unit: rank r allocates (r+1)*K blocks of 64
bytes in ctx_a and K blocks of 256 bytes in ctx_b, then one MPI_Sendrecv of
1000 doubles, one MPI_Bcast of 100 ints, one MPI_Allreduce of one double and
one MPI_Barrier.

Usage: check.py REPORT.json K full|spill
  full:  a clean run: both ranks, exact totals.
  spill: a report merged from the spill files of an MPI_Abort (rank 1
         aborts; rank 0 may or may not have left its profile): the ranks
         present, with exact counts for those ranks.
Prints one line per failed check and exits 1 if any failed.
"""

import json
import sys

path, k, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
r = json.load(open(path))
errors = []


def check(cond, what):
    if not cond:
        errors.append(what)


def in_function(ctx, func):
    return any(f.get("function") == func for f in ctx.get("stack", []))


def summed(func, kind="malloc"):
    """count and bytes over every context of `kind` with `func` on its stack."""
    cs = [c for c in r["contexts"] if c["kind"] == kind and in_function(c, func)]
    return len(cs), sum(c["count"] for c in cs), sum(c["bytes"] for c in cs)


ranks = sorted(d["rank"] for d in r.get("ranks_detail", []))
if mode == "full":
    check(r["ranks"] == 2, f"ranks {r['ranks']} != 2")
    check(ranks == [0, 1], f"ranks_detail ranks {ranks} != [0, 1]")
else:
    check(1 <= r["ranks"] <= 2, f"ranks {r['ranks']} not in 1..2")
    check(1 in ranks, f"the aborting rank 1 is not among {ranks}")
    check(set(ranks) <= {0, 1}, f"ranks_detail ranks {ranks}")
n = len(ranks)
blocks_a = k * sum(rank + 1 for rank in ranks)

found, count, nbytes = summed("ctx_a")
check(found > 0, "no malloc context in ctx_a")
check(count == blocks_a, f"ctx_a count {count} != {blocks_a}")
check(nbytes == blocks_a * 64, f"ctx_a bytes {nbytes} != {blocks_a * 64}")
found, count, nbytes = summed("ctx_b")
check(found > 0, "no malloc context in ctx_b")
check(count == k * n, f"ctx_b count {count} != {k * n}")
check(nbytes == k * n * 256, f"ctx_b bytes {nbytes} != {k * n * 256}")

t = r["totals"]
for name, count, nbytes in [
    ("MPI_Sendrecv", n, n * 8000),
    ("MPI_Bcast", n, n * 400),
    ("MPI_Allreduce", n, n * 8),
]:
    got = t.get(name, {})
    check(got.get("count") == count and got.get("bytes") == nbytes,
          f"{name} {got} != count {count} bytes {nbytes}")
# mpi_pattern's abort path calls MPI_Barrier again before MPI_Abort.
barriers = t.get("MPI_Barrier", {}).get("count")
check(barriers == n if mode == "full" else barriers >= n,
      f"MPI_Barrier count {barriers} (ranks {n})")
check(t.get("malloc", {}).get("count", 0) >= blocks_a + k * n,
      f"malloc total {t.get('malloc')} below the program's own blocks")

for e in errors:
    print(f"check.py {mode}: {e}")
sys.exit(1 if errors else 0)
