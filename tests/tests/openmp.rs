//! OpenMP programs (C and Fortran, gcc's libgomp) allocating from every
//! thread of the team: in a `parallel for`, in explicit tasks, and through
//! gfortran's `allocate` in a `parallel do`. Output unchanged, the
//! contexts' counts exact (every context kept, `WMHCCT_EXACT=1`; the HCCT
//! lists the hot ones), each stack whole (the master thread's down to
//! `_start` through `GOMP_parallel`, the pool threads' down to `clone3`),
//! no unwind error, no unknown free; in `second` and `full`, recorded
//! inline (the default with more threads than CPUs) and by a collector
//! thread.

use std::path::Path;

use wmhcct_e2e::*;

const ITERS: u64 = 100_000;
const TASKS: u64 = 2000;
const TEAM: &str = "3";

/// Every listed `malloc` context through `function`: `function` calls
/// `malloc` itself, nothing leaks, and each stack ends at `_start` or
/// `clone3`; with `both_roots`, there is one of each (the master thread and
/// the pool's threads share the loop). Their counts add up to `calls` when
/// the report keeps every context (`exact`); the HCCT lists only the hot
/// ones (a task that a pool thread ran from a rare place is a cold context),
/// so then at most `calls`.
fn check_contexts(r: &Value, function: &str, calls: u64, both_roots: bool, what: &str) {
    let ctxs = contexts_with(r, "malloc", function);
    let count: u64 = ctxs.iter().map(|c| u64_of(&c["count"])).sum();
    if r["config"]["exact"] == true {
        assert_eq!(
            count,
            calls,
            "{what}: calls through {function}: {}",
            summary(r)
        );
    } else {
        assert!(
            count <= calls && count > 0,
            "{what}: {count} of {calls} calls through {function} in hot contexts: {}",
            summary(r)
        );
    }
    let mut roots = Vec::new();
    for c in &ctxs {
        let names = stack_names(c);
        assert_eq!(frame_index(c, function), Some(0), "{what}: {names:?}");
        assert_eq!(u64_of(&c["leaked_bytes"]), 0, "{what}: {c}");
        let root = names.last().cloned().unwrap_or_default();
        assert!(
            root == "_start" || root == "clone3",
            "{what}: the stack is whole: {names:?}"
        );
        if root == "_start" {
            assert!(
                names.iter().any(|f| f == "GOMP_parallel"),
                "{what}: the master thread's stack passes GOMP_parallel: {names:?}"
            );
        }
        roots.push(root);
    }
    if both_roots {
        for root in ["_start", "clone3"] {
            assert!(
                roots.iter().any(|r| r == root),
                "{what}: a context of {function} ends at {root}: {roots:?}"
            );
        }
    }
}

/// Native and traced runs of `exe args` with a team of three; returns the
/// reports, one per mode and placement, after checking what every program
/// shares.
fn traced_runs(w: &WorkDir, exe: &Path, args: &[&str]) -> Vec<(String, Value)> {
    let mut native = command(exe, args, &w.path);
    native.env("OMP_NUM_THREADS", TEAM);
    let native = run_cmd(&mut native, TIMEOUT);
    assert_eq!(native.code, 0, "{}", native.describe());
    let mut reports = Vec::new();
    for (mode, exact) in [("second", "0"), ("full", "0"), ("second", "1")] {
        for collector in ["auto", "thread"] {
            let what = format!("{mode}/exact={exact}/{collector}");
            let h5 = w.join(format!("{mode}-{exact}-{collector}.h5"));
            let env = [
                ("OMP_NUM_THREADS", TEAM),
                ("WMHCCT_UNWIND", mode),
                ("WMHCCT_EXACT", exact),
                ("WMHCCT_COLLECTOR", collector),
            ];
            let out = run_traced(exe, args, &w.path, &h5, &env);
            assert_eq!(out.code, 0, "{what}: {}", out.describe());
            assert_eq!(out.stdout, native.stdout, "{what}: output unchanged");
            assert_clean_stderr(&out, &h5);
            let r = report_json(&h5);
            assert_eq!(u64_of(&r["unwind"]["errors"]), 0, "{what}: {}", r["unwind"]);
            // Exact totals whatever the contexts listed.
            assert!(
                total_count(&r, "malloc") >= ITERS,
                "{what}: {}",
                alloc_totals(&r)
            );
            assert_eq!(
                u64_of(&r["heap"]["unknown_frees"]),
                0,
                "{what}: {}",
                r["heap"]
            );
            reports.push((what, r));
        }
    }
    reports
}

#[test]
fn openmp_loop_and_tasks_in_c() {
    let w = WorkDir::new("openmp-c");
    let exe = compile("omp_work.c", &w.path, Opt::Release, &["-fopenmp"]);
    let (iters, tasks) = (ITERS.to_string(), TASKS.to_string());
    for (what, r) in traced_runs(&w, &exe, &[&iters, &tasks]) {
        check_contexts(&r, "omp_loop_alloc", ITERS, true, &what);
        check_contexts(&r, "omp_task_alloc", TASKS, false, &what);
        // The master and at least one pool thread made events (the
        // collector thread makes none).
        let threads = u64_of(&r["ranks_detail"][0]["threads"]);
        assert!((2..=3).contains(&threads), "{what}: {threads} threads");
    }
}

#[test]
fn openmp_allocate_in_fortran() {
    let w = WorkDir::new("openmp-f90");
    let exe = compile("omp_work.f90", &w.path, Opt::Release, &["-fopenmp"]);
    let iters = ITERS.to_string();
    for (what, r) in traced_runs(&w, &exe, &[&iters]) {
        check_contexts(&r, "omp_fortran_work", ITERS, true, &what);
    }
}
