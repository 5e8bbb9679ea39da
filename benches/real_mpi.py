#!/usr/bin/python3
"""Real MPI applications from Debian's packages under `mpirun -np 2`:
LAMMPS (C++, the default) or CP2K (Fortran, `--app cp2k`).

    /usr/bin/python3 benches/real_mpi.py              # LAMMPS, 3 rounds, with heaptrack (~1 minute)
    /usr/bin/python3 benches/real_mpi.py --quick      # LAMMPS, a tiny run, no heaptrack (seconds; CI)
    /usr/bin/python3 benches/real_mpi.py --app cp2k   # CP2K, 3 rounds, with heaptrack (~2 minutes)

Needs `bash scripts/build.sh` first, OpenMPI and Debian's `lammps` (`lmp`;
scripts/setup.sh installs it) or `cp2k` (`cp2k.popt`, with its data files
from `cp2k-data`); heaptrack when installed.

LAMMPS runs the Lennard-Jones melt of its examples (32 000 atoms, 250 steps
by default); CP2K computes the energy and forces of one water molecule
(Quickstep, PBE, DZVP-MOLOPT-SR-GTH basis, GTH pseudopotentials, cutoff 300
Ry; OMP_NUM_THREADS=1 in every mode). Each on 2 ranks:
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
output (CP2K's total energy and atomic forces) exactly as the native run does.

For CP2K the script also measures the end of the run: from the arrival of
CP2K's last line of output (`PROGRAM STOPPED IN`, read from mpirun's pipe
line by line as it comes) to the exit of `mpirun`. That is what the tracer
adds after the program's own work: taking the profile at MPI_Finalize, the
reduction, the conversion on rank 0 (heaptrack: waiting for its interpreter,
which reads the recording while the program runs).
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
import threading
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

# One water molecule, energy and forces (Quickstep, PBE). The basis and
# potential files come from Debian's cp2k-data (/usr/share/cp2k, CP2K's
# compiled-in data directory). No restart file: the run writes nothing but
# its output, so that "output per job" is the tracer's alone.
H2O = """&GLOBAL
  PROJECT h2o
  RUN_TYPE ENERGY_FORCE
  PRINT_LEVEL MEDIUM
&END GLOBAL
&FORCE_EVAL
  METHOD Quickstep
  &DFT
    BASIS_SET_FILE_NAME BASIS_MOLOPT
    POTENTIAL_FILE_NAME GTH_POTENTIALS
    &MGRID
      CUTOFF 300
      REL_CUTOFF 40
    &END MGRID
    &QS
      EPS_DEFAULT 1.0E-10
    &END QS
    &SCF
      EPS_SCF 1.0E-6
      MAX_SCF 30
      SCF_GUESS ATOMIC
      &PRINT
        &RESTART OFF
        &END RESTART
      &END PRINT
    &END SCF
    &XC
      &XC_FUNCTIONAL PBE
      &END XC_FUNCTIONAL
    &END XC
  &END DFT
  &SUBSYS
    &CELL
      ABC 8.0 8.0 8.0
    &END CELL
    &COORD
      O   0.000000    0.000000   -0.065587
      H   0.000000   -0.757136    0.520545
      H   0.000000    0.757136    0.520545
    &END COORD
    &KIND H
      BASIS_SET DZVP-MOLOPT-SR-GTH
      POTENTIAL GTH-PBE-q1
    &END KIND
    &KIND O
      BASIS_SET DZVP-MOLOPT-SR-GTH
      POTENTIAL GTH-PBE-q6
    &END KIND
  &END SUBSYS
  &PRINT
    &FORCES ON
    &END FORCES
  &END PRINT
&END FORCE_EVAL
"""
CP2K_DATA = "/usr/share/cp2k"

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


def energy_forces(out):
    """CP2K's result: the `ENERGY| Total FORCE_EVAL` line and the ATOMIC
    FORCES block, to its `SUM OF ATOMIC FORCES` line (no timing in them)."""
    lines, on = [], False
    for ln in out.splitlines():
        if ln.startswith(" ENERGY| Total FORCE_EVAL"):
            lines.append(ln)
        elif ln.startswith(" ATOMIC FORCES in"):
            on = True
        if on:
            lines.append(ln)
            if ln.startswith(" SUM OF ATOMIC FORCES"):
                on = False
    ok = any(ln.startswith(" ENERGY|") for ln in lines) and \
        any(ln.startswith(" SUM OF ATOMIC FORCES") for ln in lines)
    return lines if ok else []


# What differs between the applications: the executable, how it is
# installed, its input, the part of its output that must not change under a
# tracer, and the line it prints last (for the end of the run).
APPS = {
    "lammps": dict(exe="lmp", name="LAMMPS (lmp)", install="apt-get install lammps "
                   "(scripts/setup.sh installs it)", result=thermo, env={}, last=None,
                   same="Thermodynamic output identical to the native run in every traced run.",
                   what="thermodynamic output"),
    "cp2k": dict(exe="cp2k.popt", name="CP2K (cp2k.popt)", install="apt-get install cp2k",
                 result=energy_forces, env={"OMP_NUM_THREADS": "1"}, last="PROGRAM STOPPED IN",
                 same="Total energy and atomic forces identical to the native run in every "
                      "traced run.",
                 what="energy and forces"),
}


def run_timed(cmd, cwd, timeout, last_marker):
    """Run `cmd`, reading its standard output line by line as it arrives.
    Returns (exit code, stdout, stderr, wall s, end of run s): the end of
    the run is from the arrival of the last line containing `last_marker`
    (or the last line at all) to the exit of the process."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=clean_env(), cwd=cwd, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    err = []
    reader = threading.Thread(target=lambda: err.append(p.stderr.read()))
    reader.start()
    killer = threading.Timer(timeout, p.kill)
    killer.start()
    lines, t_last = [], None
    try:
        for raw in iter(p.stdout.readline, b""):
            t = time.monotonic()
            ln = raw.decode(errors="replace")
            lines.append(ln)
            if last_marker is None or last_marker in ln:
                t_last = t
        code = p.wait()
        t_end = time.monotonic()
    finally:
        killer.cancel()
        reader.join()
    end = t_end - t_last if t_last is not None else float("nan")
    return code, "".join(lines), (err[0] if err else b"").decode(errors="replace"), t_end - t0, end


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


def run(mode, app, exe, args, tmp, tag, peak=False):
    extra, prefix, report = mode_env(mode, tmp, tag)
    extra = {**APPS[app]["env"], **extra}
    rundir = os.path.join(tmp, tag)
    os.makedirs(rundir, exist_ok=True)
    cmd = ["mpirun", "-np", "2"]
    rank = prefix + [exe] + args
    if peak:
        rank = [sys.executable, os.path.join(tmp, "rank_peak.py"), os.path.join(rundir, "rss")] \
            + [f"{k}={v}" for k, v in extra.items()] + ["--"] + rank
    else:
        for k, v in extra.items():
            cmd += ["-x", f"{k}={v}"]
    code, stdout, stderr, wall, end = run_timed(cmd + rank, rundir, 1800, APPS[app]["last"])
    if code != 0:
        raise Failed(f"{mode}: exit {code}:\n{stdout[-2000:]}\n{stderr[-2000:]}")
    res = {"wall": wall, "end": end, "thermo": APPS[app]["result"](stdout), "stderr": stderr}
    if report:
        timing = report + ".timing"
        if not (os.path.exists(report) and os.path.exists(timing)):
            raise Failed(f"wmhcct: no report or no conversion timing:\n{stderr[-2000:]}")
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
    ap.add_argument("--app", choices=sorted(APPS), default="lammps",
                    help="the application: LAMMPS (default) or CP2K")
    ap.add_argument("--quick", action="store_true", help="a tiny run, one round, no heaptrack (CI)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cells", type=int, default=20, help="LAMMPS: lattice cells per side (4 atoms each)")
    ap.add_argument("--steps", type=int, default=250, help="LAMMPS: time steps")
    ap.add_argument("--no-heaptrack", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.rounds, a.no_heaptrack = 1, True
        if a.app == "lammps":
            a.cells, a.steps = 6, 50
    app = APPS[a.app]
    exe = shutil.which(app["exe"])
    if exe is None:
        sys.exit(f"real_mpi.py: {app['name']} is not installed: {app['install']}")
    if a.app == "cp2k" and not os.path.exists(os.path.join(CP2K_DATA, "BASIS_MOLOPT")):
        sys.exit(f"real_mpi.py: CP2K's data files are not in {CP2K_DATA}: apt-get install cp2k-data")
    for f in (LIB, BIN):
        if not os.path.exists(f):
            sys.exit(f"real_mpi.py: {f} is missing: run bash scripts/build.sh first")
    modes = MODES if shutil.which("heaptrack") and not a.no_heaptrack else MODES[:2]
    tmp = tempfile.mkdtemp(prefix="wmhcct-real-mpi-")
    try:
        if a.app == "lammps":
            with open(os.path.join(tmp, "in.melt"), "w") as f:
                f.write(MELT)
            args = ["-in", os.path.join(tmp, "in.melt"), "-var", "n", str(a.cells),
                    "-var", "steps", str(a.steps), "-log", "none"]
        else:
            with open(os.path.join(tmp, "h2o.inp"), "w") as f:
                f.write(H2O)
            args = ["-i", os.path.join(tmp, "h2o.inp")]
        with open(os.path.join(tmp, "rank_peak.py"), "w") as f:
            f.write(RANK_PEAK)
        wrapper = os.path.join(tmp, "convert-wrapper")
        with open(wrapper, "w") as f:
            f.write(WRAPPER.format(real=BIN))
        os.chmod(wrapper, 0o755)
        rows = {m: [] for m in modes}
        for r in range(a.rounds):
            order = modes if r % 2 == 0 else [modes[0]] + list(reversed(modes[1:]))
            for m in order:
                rows[m].append(run(m, a.app, exe, args, tmp, f"r{r}-{m.replace(' ', '')}"))
        peaks = {m: run(m, a.app, exe, args, tmp, f"peak-{m.replace(' ', '')}", peak=True)
                 for m in modes}
        native = rows["native"][0]["thermo"]
        if len(native) < 2:
            raise Failed(f"no {app['what']} in the output of {app['name']}: {native}")
        for m in modes:
            for res in rows[m] + [peaks[m]]:
                if res["thermo"] != native:
                    raise Failed(f"{m}: {app['name']} printed other {app['what']} than natively:\n"
                                 + "\n".join(res["thermo"]) + "\nnatively:\n" + "\n".join(native))
        cp2k = a.app == "cp2k"
        if cp2k:
            print(f"## Real MPI application: CP2K {exe}, H2O energy and forces (Quickstep, PBE, "
                  f"DZVP-MOLOPT-SR-GTH, cutoff 300 Ry), mpirun -np 2, OMP_NUM_THREADS=1; median of "
                  f"{a.rounds} rounds")
        else:
            print(f"## Real MPI application: LAMMPS {exe}, Lennard-Jones melt, {4 * a.cells ** 3} atoms, "
                  f"{a.steps} steps, mpirun -np 2; median of {a.rounds} rounds")
        print()
        end_cols = " end of run s | end of run added s |" if cp2k else ""
        print(f"| mode | wall s | wall ratio to native | added s |{end_cols} peak RSS per rank MiB "
              f"(rank 0 / 1) | output per job KiB |")
        print("|---|---|---|---|" + ("---|---|" if cp2k else "") + "---|---|")
        for m in modes:
            walls = [x["wall"] for x in rows[m]]
            ratios = [x["wall"] / n["wall"] for x, n in zip(rows[m], rows["native"])]
            added = [x["wall"] - n["wall"] for x, n in zip(rows[m], rows["native"])]
            pk = peaks[m]["peak_kib"]
            out = statistics.median(x["output_kib"] + x.get("report_kib", 0) for x in rows[m])
            end = ""
            if cp2k:
                ends = [x["end"] for x in rows[m]]
                end_added = [x["end"] - n["end"] for x, n in zip(rows[m], rows["native"])]
                end = f" {statistics.median(ends):.2f} | {statistics.median(end_added):.2f} |"
            print(f"| {m} | {statistics.median(walls):.2f} | {statistics.median(ratios):.2f} | "
                  f"{statistics.median(added):.2f} |{end} {pk[0] / 1024:.1f} / {pk[1] / 1024:.1f} | "
                  f"{out:.0f} |")
        w = rows["wmhcct"]
        print()
        print(f"wmhcct: {w[0]['events']} allocator calls in the job; conversion on rank 0 "
              f"{statistics.median(x['convert'] for x in w):.2f} s (median); the report is "
              f"{statistics.median(x['report_kib'] for x in w):.0f} KiB. {app['same']}")
        print(f"wmhcct {w[0]['unwind']}")
        if cp2k:
            n_end = [x["end"] for x in rows["native"]]
            w_end = [x["end"] for x in w]
            print(f"End of the run (CP2K's last line of output to mpirun's exit), every round: "
                  f"native {', '.join(f'{x:.2f}' for x in n_end)} s; wmhcct "
                  f"{', '.join(f'{x:.2f}' for x in w_end)} s (the profile taken at MPI_Finalize, "
                  f"the reduction, rank 0's conversion).")
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
