"""Running one benchmark process and reading what it leaves behind.

Used by run.py: wall time and peak RSS of a run, the numbers alloc_stress
prints, and the unwind statistics of a wmhcct report.
"""
import json
import os
import resource
import signal
import subprocess
import tempfile
import threading
import time


class RunFailed(Exception):
    pass


def run_once(cmd, env, timeout=None, limit_as=None):
    """Run `cmd`; return dict(wall, maxrss_kib, out, err, code).

    maxrss_kib comes from wait4: the largest RSS of the process or of any
    child it waited for (e.g. wmhcct convert at exit, heaptrack's
    interpreter). `limit_as`: address-space limit in bytes for the run.
    `code` is the exit code, -N for signal N, or "timeout".
    """
    def preexec():
        if limit_as:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, env=env, stdout=fo, stderr=fe, preexec_fn=preexec)
        timed_out = []
        timer = None
        if timeout:
            def kill():
                timed_out.append(True)
                os.kill(p.pid, signal.SIGKILL)
            timer = threading.Timer(timeout, kill)
            timer.start()
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        if timer:
            timer.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        out, err = fo.read().decode(errors="replace"), fe.read().decode(errors="replace")
    code = "timeout" if timed_out else p.returncode
    return {"wall": wall, "maxrss_kib": ru.ru_maxrss, "out": out, "err": err, "code": code}


def checked(cmd, env, **kw):
    """run_once, raising RunFailed on a non-zero exit."""
    r = run_once(cmd, env, **kw)
    if r["code"] != 0:
        raise RunFailed(f"exit {r['code']}: {' '.join(cmd)}\n{r['err'][-2000:]}")
    return r


def stress_numbers(out):
    """The key=value pairs alloc_stress prints, as numbers."""
    vals = {}
    for tok in out.split():
        if "=" in tok:
            k, v = tok.split("=", 1)
            try:
                vals[k] = float(v) if "." in v else int(v)
            except ValueError:
                vals[k] = v
    return vals


def report_unwind(bin_path, report):
    """The `unwind` object of `wmhcct report --json`, or {}."""
    r = subprocess.run([bin_path, "report", report, "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        return {}
    return json.loads(r.stdout).get("unwind", {}) or {}


def files_size(paths):
    return sum(os.path.getsize(p) for p in paths if os.path.exists(p))
