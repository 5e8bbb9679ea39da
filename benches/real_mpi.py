#!/usr/bin/python3
"""A real MPI application from Debian's packages: LAMMPS under `mpirun -np 2`.

    /usr/bin/python3 benches/real_mpi.py           # 3 rounds, with heaptrack (~2 minutes)
    /usr/bin/python3 benches/real_mpi.py --quick   # a tiny run, no heaptrack (seconds; CI)

Needs `cargo build --release` first, OpenMPI and Debian's `lammps` (`lmp`;
scripts/setup.sh installs it); heaptrack when installed.

LAMMPS runs the Lennard-Jones melt of its examples (32 000 atoms, 250 steps
by default) on 2 ranks:
- natively;
- under wmhcct with its defaults (`LD_PRELOAD` through `mpirun -x`; the job's
  report merged at MPI_Finalize, converted once on rank 0);
- under `heaptrack -r` (recording only: what heaptrack costs in the program)
  and under `heaptrack` (recording and its interpreter, one per rank: what it
  costs to get a result).

The wall time of the whole `mpirun` is the median over rounds, with the modes
alternated; "added" is that minus the native run of the same round. Peak RSS
per rank comes from a separate run of each mode in which every rank is
started by a small wrapper that waits for it: the largest RSS of the rank and
of every process it waited for (wmhcct's converter on rank 0, heaptrack's
interpreter). wmhcct's conversion time comes from a `WMHCCT_BIN` wrapper
(benches/mpi_merge.py). Every traced run must print LAMMPS's thermodynamic
output exactly as the native run does.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mpi_merge import BIN, LIB, WRAPPER, clean_env, kv  # noqa: E402

MELT = """# 3d Lennard-Jones melt (LAMMPS examples/melt)
units           lj
atom_style      atomic
lattice         fcc 0.8442
region          box block 0 ${n} 0 ${n} 0 ${n}
create_box      1 box
create_atoms    1 box
mass            1 1.0
velocity        all create 3.0 87287 loop geom
pair_style      lj/cut 2.5
pair_coeff      1 1 1.0 1.0 2.5
neighbor        0.3 bin
neigh_modify    every 20 delay 0 check no
fix             1 all nve
thermo          50
run             ${steps}
"""

# Started by mpirun as each rank: runs the rank with its own environment
# additions (so mpirun and this wrapper are not traced) and records the peak
# RSS of the rank and of the processes it waited for.
RANK_PEAK = """import os, subprocess, sys
out = sys.argv[1]
i = sys.argv.index("--")
env = dict(os.environ)
env.update(a.split("=", 1) for a in sys.argv[2:i])
p = subprocess.Popen(sys.argv[i + 1:], env=env)
_, status, ru = os.wait4(p.pid, 0)
with open(f"{out}.{os.environ.get('OMPI_COMM_WORLD_RANK', '0')}", "w") as f:
    f.write(str(ru.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""

MODES = ["native", "wmhcct", "heaptrack -r", "heaptrack"]


class Failed(Exception):
    pass


def thermo(out):
    """LAMMPS's thermodynamic table: the lines from the `Step` header to
    the `Loop time` line (timings excluded)."""
    lines, on = [], False
    for ln in out.splitlines():
        if ln.split()[:1] == ["Step"]:
            on = True
        elif ln.startswith("Loop time"):
            on = False
        if on:
            lines.append(ln)
    return lines


def mode_env(mode, tmp, tag):
    """(environment additions for the ranks, command prefix, report path)."""
    if mode == "wmhcct":
        report = os.path.join(tmp, f"{tag}.h5")
        return ({"LD_PRELOAD": LIB, "WMHCCT_OUT": report,
                 "WMHCCT_BIN": os.path.join(tmp, "convert-wrapper")}, [], report)
    if mode == "heaptrack -r":
        return ({}, ["heaptrack", "-r"], None)
    if mode == "heaptrack":
        return ({}, ["heaptrack"], None)
    return ({}, [], None)


def run(mode, lmp, args, tmp, tag, peak=False):
    extra, prefix, report = mode_env(mode, tmp, tag)
    rundir = os.path.join(tmp, tag)
    os.makedirs(rundir, exist_ok=True)
    cmd = ["mpirun", "-np", "2"]
    rank = prefix + [lmp] + args
    if peak:
        rank = [sys.executable, os.path.join(tmp, "rank_peak.py"), os.path.join(rundir, "rss")] \
            + [f"{k}={v}" for k, v in extra.items()] + ["--"] + rank
    else:
        for k, v in extra.items():
            cmd += ["-x", f"{k}={v}"]
    t = time.monotonic()
    r = subprocess.run(cmd + rank, env=clean_env(), cwd=rundir, capture_output=True, text=True,
                       timeout=1800)
    wall = time.monotonic() - t
    if r.returncode != 0:
        raise Failed(f"{mode}: exit {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    res = {"wall": wall, "thermo": thermo(r.stdout), "stderr": r.stderr}
    if report:
        timing = report + ".timing"
        if not (os.path.exists(report) and os.path.exists(timing)):
            raise Failed(f"wmhcct: no report or no conversion timing:\n{r.stderr[-2000:]}")
        with open(timing) as f:
            t = kv(f.read())
        res["convert"] = (t["convert_end_ns"] - t["convert_start_ns"]) / 1e9
        res["report_kib"] = os.path.getsize(report) / 1024
        rep = subprocess.run([BIN, "report", report], capture_output=True, text=True)
        if rep.returncode != 0 or "ranks:     2" not in rep.stdout:
            raise Failed(f"wmhcct report of the job:\n{rep.stdout[-2000:]}\n{rep.stderr[-2000:]}")
        js = subprocess.run([BIN, "report", "--json", "--top", "0", report], capture_output=True,
                            text=True)
        if js.returncode != 0:
            raise Failed(f"wmhcct report --json of the job:\n{js.stderr[-2000:]}")
        res["resident"] = {d["rank"]: d["resident"] for d in json.loads(js.stdout)["ranks_detail"]}
        unwind = re.search(r"^unwind:.*\n\s+(validated.*)$", rep.stdout, re.M)
        res["unwind"] = " ".join(unwind.group(0).split()) if unwind else "no unwind line"
        res["events"] = sum(int(m) for m in re.findall(
            r"^(?:malloc|calloc|realloc|free|posix_memalign|aligned_alloc|memalign|valloc|pvalloc)"
            r"\s+(\d+)", rep.stdout, re.M))
    if peak:
        res["peak_kib"] = [int(open(os.path.join(rundir, f"rss.{i}")).read()) for i in range(2)]
    out_files = [os.path.join(rundir, f) for f in os.listdir(rundir)]
    res["output_kib"] = sum(os.path.getsize(f) for f in out_files if not f.split("/")[-1].startswith("rss."))
    res["output_kib"] /= 1024
    shutil.rmtree(rundir)
    if report:
        for f in (report, report + ".timing"):
            os.remove(f)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a tiny run, one round, no heaptrack (CI)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cells", type=int, default=20, help="lattice cells per side (4 atoms each)")
    ap.add_argument("--steps", type=int, default=250)
    ap.add_argument("--no-heaptrack", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.rounds, a.cells, a.steps, a.no_heaptrack = 1, 6, 50, True
    lmp = shutil.which("lmp")
    if lmp is None:
        sys.exit("real_mpi.py: LAMMPS (lmp) is not installed: apt-get install lammps "
                 "(scripts/setup.sh installs it)")
    for f in (LIB, BIN):
        if not os.path.exists(f):
            sys.exit(f"real_mpi.py: {f} is missing: run cargo build --release first")
    modes = MODES if shutil.which("heaptrack") and not a.no_heaptrack else MODES[:2]
    tmp = tempfile.mkdtemp(prefix="wmhcct-real-mpi-")
    try:
        with open(os.path.join(tmp, "in.melt"), "w") as f:
            f.write(MELT)
        with open(os.path.join(tmp, "rank_peak.py"), "w") as f:
            f.write(RANK_PEAK)
        wrapper = os.path.join(tmp, "convert-wrapper")
        with open(wrapper, "w") as f:
            f.write(WRAPPER.format(real=BIN))
        os.chmod(wrapper, 0o755)
        args = ["-in", os.path.join(tmp, "in.melt"), "-var", "n", str(a.cells),
                "-var", "steps", str(a.steps), "-log", "none"]
        rows = {m: [] for m in modes}
        for r in range(a.rounds):
            order = modes if r % 2 == 0 else [modes[0]] + list(reversed(modes[1:]))
            for m in order:
                rows[m].append(run(m, lmp, args, tmp, f"r{r}-{m.replace(' ', '')}"))
        peaks = {m: run(m, lmp, args, tmp, f"peak-{m.replace(' ', '')}", peak=True) for m in modes}
        native = rows["native"][0]["thermo"]
        if len(native) < 2:
            raise Failed(f"no thermodynamic output from LAMMPS: {native}")
        for m in modes:
            for res in rows[m] + [peaks[m]]:
                if res["thermo"] != native:
                    raise Failed(f"{m}: LAMMPS printed other thermodynamic output than natively:\n"
                                 + "\n".join(res["thermo"]) + "\nnatively:\n" + "\n".join(native))
        print(f"## Real MPI application: LAMMPS {lmp}, Lennard-Jones melt, {4 * a.cells ** 3} atoms, "
              f"{a.steps} steps, mpirun -np 2; median of {a.rounds} rounds")
        print()
        print("| mode | wall s | wall ratio to native | added s | peak RSS per rank MiB (rank 0 / 1) "
              "| output per job KiB |")
        print("|---|---|---|---|---|---|")
        for m in modes:
            walls = [x["wall"] for x in rows[m]]
            ratios = [x["wall"] / n["wall"] for x, n in zip(rows[m], rows["native"])]
            added = [x["wall"] - n["wall"] for x, n in zip(rows[m], rows["native"])]
            pk = peaks[m]["peak_kib"]
            out = statistics.median(x["output_kib"] + x.get("report_kib", 0) for x in rows[m])
            print(f"| {m} | {statistics.median(walls):.2f} | {statistics.median(ratios):.2f} | "
                  f"{statistics.median(added):.2f} | {pk[0] / 1024:.1f} / {pk[1] / 1024:.1f} | {out:.0f} |")
        w = rows["wmhcct"]
        print()
        print(f"wmhcct: {w[0]['events']} allocator calls in the job; conversion on rank 0 "
              f"{statistics.median(x['convert'] for x in w):.2f} s (median); the report is "
              f"{statistics.median(x['report_kib'] for x in w):.0f} KiB. Thermodynamic output identical "
              f"to the native run in every traced run.")
        print(f"wmhcct {w[0]['unwind']}")
        res0 = peaks["wmhcct"].get("resident") or w[0]["resident"]
        if all(res0.get(i) for i in range(2)):
            own = " / ".join(f"{res0[i]['peak_bytes'] / 2**20:.1f}" for i in range(2))
            tracer = " / ".join(f"{res0[i]['tracer_peak_bytes'] / 2**20:.1f}" for i in range(2))
            print(f"wmhcct's report, resident peak per rank at MPI_Finalize (VmHWM, rank 0 / 1): "
                  f"{own} MiB (the peak RSS column above, of the same run, also counts what "
                  f"follows MPI_Finalize: rank 0's merge and conversion); the tracer allocated "
                  f"up to {tracer} MiB for itself, resident where touched.")
    except Failed as e:
        sys.exit(f"real_mpi.py failed: {e}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
