#!/usr/bin/python3
"""Overhead and accuracy benchmarks for wmhcct: one command, one report.

    /usr/bin/python3 benches/run.py               # everything (tens of minutes)
    /usr/bin/python3 benches/run.py --quick       # tiny sizes, a few seconds (CI)
    /usr/bin/python3 benches/run.py --rss-1e8     # also the 10^8-event RSS run

Needs `bash scripts/build.sh` first (target/release/libwmhcct.so, profile-guided, and wmhcct).

1. Builds benches/alloc_stress.c and runs each configuration natively, with
   bare interposition (WMHCCT_UNWIND=none), with each unwind mode (full, fp,
   first, second) with the default collector placement (WMHCCT_COLLECTOR
   unset: `auto`, which starts a collector thread when the process has a
   spare CPU; the header says which it is here), with `second` forced
   inline ("second+inline": the placement of a rank that has its core to
   itself) and forced onto a collector thread ("second+thread"), and under
   `heaptrack -r` when installed, and with the hand-over floors of
   benches/handover_floor.c ("floor:count", "floor:ring",
   "floor:ring+thread", "floor:ring+thread+clock",
   "floor:ring+thread+lent-clock": the cheapest interposer that counts each
   call, writes it to a ring, hands it to a consumer thread, with a clock
   read per call or with the consumer's clock lent as wmhcct's collector
   thread lends it; no stack). Each round runs
   native once and every mode once, in an order that alternates between
   rounds; ratios are taken against the native run of the same round and the
   tables show medians over rounds.
2. The deep-stack table of issue 4 (bursts configuration): per-event cost of
   each unwind mode relative to `full`, frames unwound and reused per event,
   the accuracy the tracer's own validation reports.
3. Tracer RSS after 10^6 and 10^7 (optionally 10^8) events.
4. The Rust collector benchmarks in benches/src/bin: prefix-aware HCCT
   update on/off, HCCT update with eviction (more contexts than counters),
   HCCT space/accuracy study, collector placement.
5. The targets of issues 4 and 7, met or missed, with the figures.
6. With --mpi-merge, benches/mpi_merge.py: the MPI merge's depth, time and
   root memory for real (2-64 ranks) and simulated (10^3-10^5) jobs.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import RunFailed, checked, files_size, report_unwind, run_once, stress_numbers  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIB = os.environ.get("WMHCCT_LIB", os.path.join(ROOT, "target/release/libwmhcct.so"))
BIN = os.environ.get("WMHCCT_BIN", os.path.join(ROOT, "target/release/wmhcct"))
# Cargo's plain build of the library, which scripts/pgo.sh keeps when it puts
# the profile-guided build in place: the `MODE@plain` rows.
PLAIN_LIB = os.path.join(ROOT, "target/pgo/plain/libwmhcct.so")

DEEP = ["--depth", "30", "--contexts", "10000", "--zipf", "1.0"]
CONFIGS = {
    # name: (description, alloc_stress arguments)
    "random": ("depth 30, 10 000 Zipf contexts, random order, one size per context",
               DEEP + ["--order", "random"]),
    "bursts": ("depth 30, 10 000 Zipf contexts, bursts of neighbouring contexts, jumps between bursts",
               DEEP + ["--order", "bursts"]),
    "random-sizes": ("depth 30, 10 000 Zipf contexts, random order, random size per event",
                     DEEP + ["--order", "random", "--sizes", "random"]),
}
HEAPTRACK = "heaptrack -r"
FLOORS = ["count", "ring", "ring+thread", "ring+thread+clock", "ring+thread+lent-clock"]


def median(xs):
    return statistics.median(xs) if xs else None


def fmt(x, spec, none="-"):
    return none if x is None else format(x, spec)


def clean_env():
    return {k: v for k, v in os.environ.items() if not k.startswith("WMHCCT_") and k != "LD_PRELOAD"}


def auto_placement():
    """What WMHCCT_COLLECTOR=auto chooses for one process with stacks here
    (interpose/src/placement.rs: a spare CPU beyond the program's threads)."""
    cpus = len(os.sched_getaffinity(0))
    return f"thread ({cpus} CPUs)" if cpus >= 2 else f"inline ({cpus} CPU)"


def build_stress(tmp):
    exe = os.path.join(tmp, "alloc_stress")
    # Frame pointers kept so that the `fp` mode has something to walk.
    subprocess.run(["cc", "-O2", "-g", "-fno-omit-frame-pointer", "-o", exe,
                    os.path.join(ROOT, "benches/alloc_stress.c"), "-lpthread", "-lm"], check=True)
    return exe


def build_floor(tmp):
    lib = os.path.join(tmp, "handover_floor.so")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", lib,
                    os.path.join(ROOT, "benches/handover_floor.c"), "-lpthread"], check=True)
    return lib


def floor_run(args, lib, level):
    """One run under the hand-over floor `level` (benches/handover_floor.c)."""
    r = checked(args, dict(clean_env(), LD_PRELOAD=lib, HANDOVER_FLOOR=level))
    r["report_bytes"] = None
    r["unwind"] = {}
    return r


def traced_run(args, mode, tmp, tag, extra_env=None):
    """One run under wmhcct in `mode`; returns the measurement dict."""
    rep = os.path.join(tmp, f"{tag}-{mode}.h5")
    # "<mode>+inline" / "<mode>+thread": that unwind mode with the collector
    # placement forced; a plain mode runs with the default placement (auto).
    # "<mode>@plain": with cargo's plain build of the library instead of the
    # profile-guided one (scripts/pgo.sh).
    mode, _, build = mode.partition("@")
    unwind, _, placement = mode.partition("+")
    env = dict(clean_env(), LD_PRELOAD=PLAIN_LIB if build == "plain" else LIB, WMHCCT_UNWIND=unwind,
               WMHCCT_OUT=rep, WMHCCT_BIN=BIN)
    if placement:
        env["WMHCCT_COLLECTOR"] = placement
    env.update(extra_env or {})
    r = checked(args, env)
    leftovers = [rep, rep + ".wmprof", rep[:-3] + ".wmprof"]
    if not os.path.exists(rep):
        raise RunFailed(f"no report under {mode}: {' '.join(args)}\n{r['err'][-2000:]}")
    r["report_bytes"] = files_size(leftovers)
    r["unwind"] = report_unwind(BIN, rep)
    for f in leftovers:
        if os.path.exists(f):
            os.remove(f)
    return r


def heaptrack_run(args, tmp):
    out = os.path.join(tmp, "ht")
    r = checked(["heaptrack", "-r", "-o", out] + args, clean_env())
    files = [os.path.join(tmp, f) for f in os.listdir(tmp) if f.startswith("ht")]
    r["report_bytes"] = files_size(files)
    r["unwind"] = {}
    for f in files:
        os.remove(f)
    return r


def measure_config(exe, cname, modes, events, rounds, tmp, with_heaptrack, floors=(), floor_lib=None):
    args = [exe, "--events", str(events)] + CONFIGS[cname][1]
    names = ["native"] + modes + [f"floor:{f}" for f in floors] + ([HEAPTRACK] if with_heaptrack else [])
    rows = {m: [] for m in names}
    for r in range(rounds):
        nat = checked(args, clean_env())
        nat_vals = stress_numbers(nat["out"])
        nat.update(vals=nat_vals, ratio=1.0, added_wall=0.0, added_loop=0.0)
        rows["native"].append(nat)
        order = names[1:] if r % 2 == 0 else list(reversed(names[1:]))
        for m in order:
            if m == HEAPTRACK:
                res = heaptrack_run(args, tmp)
            elif m.startswith("floor:"):
                res = floor_run(args, floor_lib, m[len("floor:"):])
            else:
                res = traced_run(args, m, tmp, cname)
            vals = stress_numbers(res["out"])
            if vals.get("checksum") != nat_vals.get("checksum"):
                raise RunFailed(f"checksum differs under {m}: {res['out']} vs {nat['out']}")
            res.update(vals=vals, ratio=res["wall"] / nat["wall"],
                       added_wall=(res["wall"] - nat["wall"]) / events * 1e9,
                       added_loop=(vals["seconds"] - nat_vals["seconds"]) / events * 1e9)
            rows[m].append(res)
    # Per-round cost of each mode relative to full (issue 4).
    for m in names:
        for i, res in enumerate(rows[m]):
            full = rows.get("full", [None] * rounds)[i] if "full" in rows else None
            res["cost_vs_full"] = (res["added_loop"] / full["added_loop"]
                                   if full and full["added_loop"] > 0 else None)
    return rows


def summarise(rows, events):
    """Medians per mode."""
    out = {}
    nat_hwm = median([r["vals"].get("hwm_kib", 0) for r in rows["native"]])
    for m, runs in rows.items():
        if not runs:
            continue
        unw = [r["unwind"] for r in runs if r.get("unwind")]

        def um(key):
            xs = [u.get(key) for u in unw if u.get(key) is not None]
            return median(xs)

        hwm = median([r["vals"].get("hwm_kib", 0) for r in runs])
        out[m] = {
            "ratio": median([r["ratio"] for r in runs]),
            "added_wall_ns": median([r["added_wall"] for r in runs]),
            "added_loop_ns": median([r["added_loop"] for r in runs]),
            "cost_vs_full": median([r["cost_vs_full"] for r in runs if r.get("cost_vs_full") is not None]),
            "wall_s": median([r["wall"] for r in runs]),
            "hwm_mib": hwm / 1024,
            "added_rss_mib": (hwm - nat_hwm) / 1024,
            "report_kib": (median([r["report_bytes"] / 1024 for r in runs])
                           if runs[0].get("report_bytes") is not None else None),
            "accuracy": um("accuracy") if m.split("@")[0].split("+")[0] in ("first", "second") else None,
            "unwound": um("frames_unwound_per_event"),
            "reused": um("frames_reused_per_event"),
            "reseeds": um("reseeds"),
            "validated": um("validated"),
        }
    return out


def print_overhead_table(cname, events, rounds, summary):
    desc = CONFIGS[cname][0]
    print(f"\n### {cname}: {desc}; {events} events, median of {rounds} rounds; native "
          f"{summary['native']['wall_s']:.3f} s wall")
    print()
    print("| mode | wall ratio to native | added ns/event (wall) | added ns/event (event loop) | "
          "peak RSS MiB (added) | report KiB | accuracy |")
    print("|---|---|---|---|---|---|---|")
    for m, s in summary.items():
        print(f"| {m} | {s['ratio']:.2f} | {s['added_wall_ns']:.0f} | {s['added_loop_ns']:.0f} | "
              f"{s['hwm_mib']:.1f} ({s['added_rss_mib']:+.1f}) | {fmt(s['report_kib'], '.0f')} | "
              f"{fmt(s['accuracy'], '.4f')} |")


def print_deep_table(cname, summary):
    print(f"\n### Deep-stack program ({cname}): unwind modes against full")
    print()
    print("| mode | added ns/event (event loop) | cost / full (median of per-round ratios) | "
          "frames unwound/event | frames reused/event | accuracy (self-validation) | validated stacks |")
    print("|---|---|---|---|---|---|---|")
    for m in ("full", "fp", "first", "second"):
        s = summary.get(m)
        if not s:
            continue
        print(f"| {m} | {s['added_loop_ns']:.0f} | {fmt(s['cost_vs_full'], '.3f')} | "
              f"{fmt(s['unwound'], '.2f')} | {fmt(s['reused'], '.2f')} | {fmt(s['accuracy'], '.4f')} | "
              f"{fmt(s['validated'], '.0f')} |")


def heaptrack_interpreted(exe, cname, events, tmp, limit_gib):
    """Full heaptrack (record + interpret) once; returns a result dict."""
    args = [exe, "--events", str(events)] + CONFIGS[cname][1]
    out = os.path.join(tmp, "htfull")
    r = run_once(["heaptrack", "-o", out] + args, clean_env(), timeout=300,
                 limit_as=limit_gib << 30)
    files = [os.path.join(tmp, f) for f in os.listdir(tmp) if f.startswith("htfull")]
    size = files_size(files)
    for f in files:
        os.remove(f)
    failed = r["code"] != 0 or any(s in r["err"] + r["out"] for s in ("bad_alloc", "terminate", "Killed",
                                                                      "failed", "error"))
    tail = [ln for ln in (r["err"] + r["out"]).splitlines() if ln.strip()][-3:]
    return {"code": r["code"], "wall_s": r["wall"], "maxrss_mib": r["maxrss_kib"] / 1024,
            "output_kib": size / 1024, "failed": failed, "tail": tail, "limit_gib": limit_gib}


def rss_scaling(exe, counts, tmp, live):
    """Native and `second` peak RSS after each event count."""
    rows = []
    for n in counts:
        args = [exe, "--events", str(n)] + CONFIGS["random"][1]
        if live:
            args += ["--free", f"live:{live}"]
        nat = stress_numbers(checked(args, clean_env())["out"])
        tr = traced_run(args, "second", tmp, f"rss{n}")
        vals = stress_numbers(tr["out"])
        rows.append({"events": n, "live": live, "native_mib": nat["hwm_kib"] / 1024,
                     "traced_mib": vals["hwm_kib"] / 1024,
                     "added_mib": (vals["hwm_kib"] - nat["hwm_kib"]) / 1024,
                     "budget_mib": 64 + 32 * live / 2**20,
                     "report_kib": tr["report_bytes"] / 1024, "wall_s": tr["wall"]})
    return rows


def print_rss(rows):
    print("\n### Tracer memory (second, random configuration)")
    print()
    print("| events | live blocks | native peak RSS MiB | traced peak RSS MiB | added MiB | "
          "budget MiB (64 + 32 B/live) | report KiB | traced wall s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['events']:.0e} | {r['live']} | {r['native_mib']:.1f} | {r['traced_mib']:.1f} | "
              f"{r['added_mib']:.1f} | {r['budget_mib']:.1f} | {r['report_kib']:.0f} | {r['wall_s']:.1f} |")


def rust_benches(quick):
    """Build and run the collector benchmarks; returns their output."""
    env = dict(os.environ)
    env.setdefault("CARGO_TARGET_DIR", os.path.join(ROOT, "target/benches"))
    manifest = os.path.join(ROOT, "benches/Cargo.toml")
    subprocess.run(["cargo", "build", "--release", "--quiet", "--manifest-path", manifest],
                   env=env, check=True)
    outs = []
    for b in ("prefix_reuse", "hcct_churn", "hcct_study", "placement"):
        exe = os.path.join(env["CARGO_TARGET_DIR"], "release", b)
        r = subprocess.run([exe] + (["--quick"] if quick else []), capture_output=True, text=True)
        if r.returncode != 0:
            raise RunFailed(f"{b} failed: {r.stderr[-2000:]}")
        outs.append(r.stdout)
        print()
        print(r.stdout, end="")
        sys.stdout.flush()
    return outs


def target(ok, text):
    mark = "n/a" if ok is None else ("met" if ok else "MISSED")
    print(f"- {mark}: {text}")
    return ok


def print_targets(summ, ht_full, rss_rows):
    print("\n### Targets")
    print()
    b = summ.get("bursts", {})
    r = summ.get("random", {})
    if "second" in b and "full" in b:
        c = b["second"]["cost_vs_full"]
        target(c is not None and c <= 0.35, f"issue 4: second per-event cost {fmt(c, '.3f')} × full (≤ 0.35)")
    if "first" in b and "full" in b:
        c = b["first"]["cost_vs_full"]
        target(c is not None and c <= 0.30, f"issue 4: first per-event cost {fmt(c, '.3f')} × full (≤ 0.30)")
    if "second" in b:
        a = b["second"]["accuracy"]
        target(a is not None and a >= 0.995, f"issue 4: second accuracy {fmt(a, '.4f')} (≥ 0.995), "
               f"first {fmt(b.get('first', {}).get('accuracy'), '.4f')} (lower)")
    if "second" in r and HEAPTRACK in r:
        s, h = r["second"]["added_loop_ns"], r[HEAPTRACK]["added_loop_ns"]
        target(s <= h / 5, f"random: second adds {s:.0f} ns/event, heaptrack -r {h:.0f} "
               f"({s / h:.2f}×, target ≤ 0.20×)")
    if "second" in r:
        target(r["second"]["ratio"] <= 2.0, f"random: second wall {r['second']['ratio']:.2f}× native (≤ 2.0×)")
    if "second" in b:
        target(b["second"]["ratio"] <= 1.3, f"bursts: second wall {b['second']['ratio']:.2f}× native (≤ 1.3×)")
    # The same targets with `second` forced inline: what a rank that has
    # its core to itself (no spare CPU) pays.
    t = "second+inline"
    if t in r and HEAPTRACK in r:
        s, h = r[t]["added_loop_ns"], r[HEAPTRACK]["added_loop_ns"]
        target(s <= h / 5, f"random: {t} adds {s:.0f} ns/event ({s / h:.2f}× heaptrack -r, target ≤ 0.20×)")
    if t in r:
        target(r[t]["ratio"] <= 2.0, f"random: {t} wall {r[t]['ratio']:.2f}× native (≤ 2.0×)")
    if t in b:
        target(b[t]["ratio"] <= 1.3, f"bursts: {t} wall {b[t]['ratio']:.2f}× native (≤ 1.3×)")
    # What no tracer that hands each call to another thread can go below
    # here: not a target, the measure the targets are read against.
    for cname, c in (("random", r), ("bursts", b)):
        f = c.get("floor:ring+thread+lent-clock")
        if f:
            print(f"- floor ({cname}): counting each call and handing it to a thread with a time "
                  f"stamp (the consumer's lent clock), no stack, costs {f['ratio']:.2f}× native "
                  f"({f['added_loop_ns']:.0f} ns/event; with a clock read per call "
                  f"{fmt(c.get('floor:ring+thread+clock', {}).get('ratio'), '.2f')}×, "
                  f"without the clock {fmt(c.get('floor:ring+thread', {}).get('ratio'), '.2f')}×, "
                  f"counting only {fmt(c.get('floor:count', {}).get('ratio'), '.2f')}×)")
    # What the profile-guided build (scripts/pgo.sh) saves: not a target.
    for cname, c in (("random", r), ("bursts", b)):
        for m in ("second", "second+inline"):
            if m in c and f"{m}@plain" in c:
                s, p = c[m]["added_loop_ns"], c[f"{m}@plain"]["added_loop_ns"]
                print(f"- profile-guided build ({cname}): {m} adds {s:.0f} ns/event, {p:.0f} with "
                      f"cargo's plain build ({s / p:.3f}×; wall {c[m]['ratio']:.2f}× vs "
                      f"{c[m + '@plain']['ratio']:.2f}× native)")
    rs = summ.get("random-sizes", {})
    if "second" in rs:
        ht = "not run" if ht_full is None else (
            f"heaptrack (record + interpret) {'FAILED' if ht_full['failed'] else 'completed'}: exit "
            f"{ht_full['code']}, {ht_full['wall_s']:.1f} s, peak RSS {ht_full['maxrss_mib']:.0f} MiB "
            f"(address-space limit {ht_full['limit_gib']} GiB)")
        target(rs["second"]["added_rss_mib"] <= 64,
               f"random sizes: second completes, added RSS {rs['second']['added_rss_mib']:.1f} MiB; {ht}")
    if rss_rows:
        worst = max(rss_rows, key=lambda x: x["added_mib"] - x["budget_mib"])
        target(all(x["added_mib"] <= x["budget_mib"] for x in rss_rows),
               "tracer RSS within 64 MiB + 32 B/live block at every event count (worst: "
               f"{worst['added_mib']:.1f} MiB of {worst['budget_mib']:.1f} at {worst['events']:.0e} events)")
        sizes = [x["report_kib"] for x in rss_rows if x["live"] == 0]
        if len(sizes) > 1:
            target(max(sizes) <= 1.5 * min(sizes) + 64,
                   f"report size independent of event count: {', '.join(f'{s:.0f}' for s in sizes)} KiB")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny sizes, one round, no heaptrack (CI)")
    ap.add_argument("--events", type=int, default=5_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--modes", default=None,
                    help="unwind modes; MODE+inline, MODE+thread: with WMHCCT_COLLECTOR forced; "
                    "MODE@plain: with cargo's plain build of the library (target/pgo/plain, kept "
                    "by scripts/pgo.sh) instead of the profile-guided one (default: none, full, fp, "
                    "first, second, second+inline, second+thread, and second@plain and "
                    "second+inline@plain when the plain build is there)")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--floors", default=",".join(FLOORS),
                    help="hand-over floors to run (benches/handover_floor.c); empty: none")
    ap.add_argument("--no-heaptrack", action="store_true")
    ap.add_argument("--heaptrack-limit-gib", type=int, default=8,
                    help="address-space limit for the interpreted heaptrack run")
    ap.add_argument("--rss-1e8", action="store_true", help="add the 10^8-event RSS run (minutes)")
    ap.add_argument("--no-rss", action="store_true")
    ap.add_argument("--no-rust", action="store_true", help="skip the collector benchmarks")
    ap.add_argument("--json", help="also write the results as JSON here")
    ap.add_argument("--mpi-merge", action="store_true",
                    help="also run benches/mpi_merge.py (MPI merge: 2-64 real ranks, 10^3-10^5 simulated)")
    a = ap.parse_args()
    rss_counts = [10**6, 10**7] + ([10**8] if a.rss_1e8 else [])
    rss_live = 1_000_000
    if a.quick:
        a.events, a.rounds, a.no_heaptrack = 20_000, 1, True
        rss_counts, rss_live = [10**4, 10**5], 1000
    for f in (LIB, BIN):
        if not os.path.exists(f):
            sys.exit(f"{f} is missing: run bash scripts/build.sh first")
    if a.modes is None:
        a.modes = "none,full,fp,first,second,second+inline,second+thread"
        if os.path.exists(PLAIN_LIB):
            a.modes += ",second@plain,second+inline@plain"
    modes = [m for m in a.modes.split(",") if m]
    for m in modes:
        mode, _, build = m.partition("@")
        unwind, _, placement = mode.partition("+")
        if (unwind not in ("none", "full", "fp", "first", "second") or placement not in ("", "inline", "thread")
                or build not in ("", "plain")):
            ap.error(f"--modes: unknown mode {m!r}; accepted: none, full, fp, first, second, "
                     "each optionally with +inline or +thread, then optionally @plain")
        if build == "plain" and not os.path.exists(PLAIN_LIB):
            ap.error(f"--modes {m}: {PLAIN_LIB} is missing (scripts/build.sh keeps it when it "
                     "builds the profile-guided library)")
    floors = [f for f in a.floors.split(",") if f]
    for f in floors:
        if f not in FLOORS:
            ap.error(f"--floors: unknown floor {f!r}; accepted: {', '.join(FLOORS)}")
    for c in [c for c in a.configs.split(",") if c]:
        if c not in CONFIGS:
            ap.error(f"--configs: unknown configuration {c!r}; accepted: {', '.join(CONFIGS)}")
    with_ht = shutil.which("heaptrack") is not None and not a.no_heaptrack
    tmp = tempfile.mkdtemp(prefix="wmhcct-bench-")
    results = {"configs": {}, "events": a.events, "rounds": a.rounds}
    try:
        exe = build_stress(tmp)
        floor_lib = build_floor(tmp) if floors else None
        print("## wmhcct benchmarks")
        print()
        print(f"{os.uname().nodename}, {os.cpu_count()} CPUs; alloc_stress built with cc -O2 "
              "-fno-omit-frame-pointer; wmhcct defaults (φ = 1e-4, ε = φ/5, reseed every 1000 events "
              "or 10 ms idle, validate 0.001) unless stated.")
        print()
        print(f"Default collector placement here: {auto_placement()} "
              "(WMHCCT_COLLECTOR=auto, see the README's Configuration).")
        summ = {}
        for cname in [c for c in a.configs.split(",") if c]:
            rows = measure_config(exe, cname, modes, a.events, a.rounds, tmp, with_ht, floors, floor_lib)
            summ[cname] = summarise(rows, a.events)
            print_overhead_table(cname, a.events, a.rounds, summ[cname])
            if cname == "bursts":
                print_deep_table(cname, summ[cname])
            sys.stdout.flush()
        results["configs"] = summ
        ht_full = None
        if with_ht and "random-sizes" in summ:
            ht_full = heaptrack_interpreted(exe, "random-sizes", a.events, tmp, a.heaptrack_limit_gib)
            results["heaptrack_random_sizes"] = ht_full
            print(f"\nheaptrack with its interpreter on random-sizes: exit {ht_full['code']}, "
                  f"{ht_full['wall_s']:.1f} s, peak RSS {ht_full['maxrss_mib']:.0f} MiB, output "
                  f"{ht_full['output_kib']:.0f} KiB; last lines: {' / '.join(ht_full['tail'])}")
        pairs = stress_numbers(checked([exe, "--events", str(a.events), "--pairs", "1"]
                                       + CONFIGS["random-sizes"][1], clean_env())["out"]).get("pairs")
        print(f"\nrandom-sizes: {pairs} distinct (size, context) pairs in {a.events} events")
        results["random_sizes_pairs"] = pairs
        rss_rows = []
        if not a.no_rss:
            rss_rows = rss_scaling(exe, rss_counts, tmp, 0) + rss_scaling(exe, [rss_counts[-1]], tmp, rss_live)
            print_rss(rss_rows)
            results["rss"] = rss_rows
        if not a.no_rust:
            results["collector"] = rust_benches(a.quick)
        print_targets(summ, ht_full, rss_rows)
        if a.mpi_merge:
            print()
            sys.stdout.flush()
            mm = subprocess.run([sys.executable, os.path.join(ROOT, "benches/mpi_merge.py")]
                                + (["--quick"] if a.quick else []))
            if mm.returncode != 0:
                raise RunFailed("benches/mpi_merge.py failed")
    except RunFailed as e:
        sys.exit(f"benchmark run failed: {e}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1, default=str)


if __name__ == "__main__":
    main()
