//! The known allocation pattern (tests/programs/pattern.{c,cpp,f90}) under
//! the tracer: exact counts, bytes, stacks, leaks and peak.
//!
//!   main -> path_a -> leaf_a : 1000 x 32 B      (freed)
//!   main -> path_b -> leaf_b :  100 x 4096 B    (freed)
//!   main -> path_c -> leaf_c :   10 x 1 MiB     (leaked; calloc in C)
//!
//! Peak 32000 + 10 MiB = 10517760 B (a's blocks are live while c allocates),
//! leak 10 MiB. The C program does no stdio, so its totals and peak are
//! exact; C++ and Fortran runtimes allocate a little of their own, so there
//! only the contexts are exact and the peak is bounded.

use wmhcct_e2e::*;

const NA: u64 = 1000;
const NB: u64 = 100;
const NC: u64 = 10;
const SA: u64 = 32;
const SB: u64 = 4096;
const SC: u64 = 1 << 20;
const PEAK: u64 = NA * SA + NC * SC;
const LEAK: u64 = NC * SC;
const OUTPUT: &str = "pattern done: peak 10517760 leak 10485760\n";

/// Checks the stack of the context through `leaf`: the first frame of ours
/// is `leaf` (at index 0 when `leaf_first`, i.e. C), `path` right after it,
/// and `main` (or Fortran's `MAIN__`) further out.
fn check_stack(ctx: &serde_json::Value, leaf: &str, path: &str, leaf_first: bool) {
    let names = stack_names(ctx);
    let ours = [
        "leaf_a", "leaf_b", "leaf_c", "path_a", "path_b", "path_c", "main", "MAIN__",
    ];
    let first_ours = names
        .iter()
        .position(|f| ours.iter().any(|o| is_fn(f, o)))
        .unwrap_or_else(|| panic!("no frame of the program in {names:?}"));
    if leaf_first {
        assert_eq!(
            first_ours, 0,
            "stack[0] must be the caller of the allocator: {names:?}"
        );
    }
    assert!(
        is_fn(&names[first_ours], leaf),
        "innermost frame of ours is not {leaf}: {names:?}"
    );
    assert!(
        names.get(first_ours + 1).is_some_and(|f| is_fn(f, path)),
        "{path} must follow {leaf}: {names:?}"
    );
    assert!(
        names[first_ours + 2..]
            .iter()
            .any(|f| f == "main" || f == "MAIN__"),
        "main must be on the stack after {path}: {names:?}"
    );
    // Frames carry file and line for our functions (built with -g).
    let f = &ctx["stack"][first_ours];
    let file = f["file"].as_str().unwrap_or("");
    assert!(
        file.contains("pattern."),
        "{leaf} frame has no source file: {f}"
    );
    assert!(
        f["line"].as_u64().unwrap_or(0) > 0,
        "{leaf} frame has no line: {f}"
    );
}

/// Exact per-context assertions common to every language.
fn check_contexts(r: &serde_json::Value, kind_c: &str, leaf_first: bool) {
    assert_eq!(r["ranks"], 1, "ranks: {}", r["ranks"]);

    let a = context_with(r, "malloc", "leaf_a");
    assert_eq!(u64_of(&a["count"]), NA, "leaf_a count: {a}");
    assert_eq!(u64_of(&a["bytes"]), NA * SA, "leaf_a bytes: {a}");
    assert_eq!(u64_of(&a["count_err"]), 0, "few contexts: no error: {a}");
    assert_eq!(
        u64_of(&a["leaked_bytes"]),
        0,
        "leaf_a blocks are freed: {a}"
    );
    assert_eq!(
        u64_of(&a["peak_live_bytes"]),
        NA * SA,
        "leaf_a live at the peak: {a}"
    );
    check_stack(a, "leaf_a", "path_a", leaf_first);

    let b = context_with(r, "malloc", "leaf_b");
    assert_eq!(u64_of(&b["count"]), NB, "leaf_b count: {b}");
    assert_eq!(u64_of(&b["bytes"]), NB * SB, "leaf_b bytes: {b}");
    assert_eq!(
        u64_of(&b["leaked_bytes"]),
        0,
        "leaf_b blocks are freed: {b}"
    );
    assert_eq!(
        u64_of(&b["peak_live_bytes"]),
        0,
        "leaf_b blocks are freed before the peak: {b}"
    );
    check_stack(b, "leaf_b", "path_b", leaf_first);

    let c = context_with(r, kind_c, "leaf_c");
    assert_eq!(u64_of(&c["count"]), NC, "leaf_c count: {c}");
    assert_eq!(u64_of(&c["bytes"]), NC * SC, "leaf_c bytes: {c}");
    assert_eq!(
        u64_of(&c["leaked_bytes"]),
        LEAK,
        "leaf_c leaks all its blocks: {c}"
    );
    assert_eq!(
        u64_of(&c["peak_live_bytes"]),
        LEAK,
        "leaf_c live at the peak: {c}"
    );
    check_stack(c, "leaf_c", "path_c", leaf_first);

    // Sorted by count, descending.
    let counts: Vec<u64> = contexts(r).iter().map(|c| u64_of(&c["count"])).collect();
    assert!(
        counts.windows(2).all(|w| w[0] >= w[1]),
        "contexts not sorted by count: {counts:?}"
    );
    // The leak is visible in the heap summary too.
    assert!(
        u64_of(&r["live_bytes"]) >= LEAK,
        "live_bytes {} < leak {LEAK}",
        r["live_bytes"]
    );
}

/// Run the C program with `env` and check everything exactly.
fn c_pattern(opt: Opt, env: &[(&str, &str)], name: &str) -> serde_json::Value {
    let w = WorkDir::new(name);
    let exe = compile("pattern.c", &w.path, opt, &[]);
    let h5 = w.join("pattern.h5");
    let out = run_traced(&exe, &[] as &[&str], &w.path, &h5, env);
    assert_eq!(out.code, 0, "{}", out.describe());
    assert_eq!(out.stdout, OUTPUT);
    assert_clean_stderr(&out, &h5);
    let r = report_json(&h5);
    // No stdio: the program's calls are all there is.
    assert_eq!(
        total_count(&r, "malloc"),
        NA + NB,
        "totals: {}",
        alloc_totals(&r)
    );
    assert_eq!(
        total_bytes(&r, "malloc"),
        NA * SA + NB * SB,
        "totals: {}",
        alloc_totals(&r)
    );
    assert_eq!(
        total_count(&r, "calloc"),
        NC,
        "totals: {}",
        alloc_totals(&r)
    );
    assert_eq!(
        total_bytes(&r, "calloc"),
        NC * SC,
        "totals: {}",
        alloc_totals(&r)
    );
    for k in [
        "realloc",
        "posix_memalign",
        "aligned_alloc",
        "memalign",
        "valloc",
        "pvalloc",
        "reallocarray",
    ] {
        assert_eq!(
            total_count(&r, k),
            0,
            "{k} never called: {}",
            alloc_totals(&r)
        );
    }
    assert_eq!(u64_of(&r["peak_bytes"]), PEAK, "peak");
    assert_eq!(u64_of(&r["live_bytes"]), LEAK, "live at exit = the leak");
    r
}

/// One stack capture per allocation the program made.
fn assert_every_allocation_captured(r: &serde_json::Value) {
    assert_eq!(
        u64_of(&r["unwind"]["events"]),
        NA + NB + NC,
        "unwind events: {}",
        r["unwind"]
    );
}

/// Checked last, after the contexts: the program calls free 1100 times and
/// nothing else does. (A free the program did not make, e.g. glibc freeing
/// at exit a block the tracer allocated for itself, must not be counted.)
fn assert_frees_exact(r: &serde_json::Value) {
    assert_eq!(
        total_count(r, "free"),
        NA + NB,
        "the program calls free {} times (unknown frees: {}); totals: {}",
        NA + NB,
        r["heap"]["unknown_frees"],
        alloc_totals(r)
    );
    assert_eq!(
        u64_of(&r["heap"]["unknown_frees"]),
        0,
        "every free is of a block the program allocated"
    );
}

#[test]
fn c_pattern_exact_default_unwind() {
    let r = c_pattern(Opt::Debug, &[], "c-default");
    check_contexts(&r, "calloc", true);
    assert_eq!(
        r["config"]["unwind"], "second",
        "default unwind mode: {}",
        r["config"]
    );
    assert_every_allocation_captured(&r);
    assert_frees_exact(&r);
}

#[test]
fn c_pattern_exact_with_collector_thread() {
    let r = c_pattern(
        Opt::Debug,
        &[("WMHCCT_COLLECTOR", "thread")],
        "c-collector-thread",
    );
    check_contexts(&r, "calloc", true);
    assert_every_allocation_captured(&r);
    assert_frees_exact(&r);
}

#[test]
fn c_pattern_exact_optimised() {
    let r = c_pattern(Opt::Release, &[], "c-O2");
    check_contexts(&r, "calloc", true);
    assert_frees_exact(&r);
}

#[test]
fn c_pattern_exact_unwind_full() {
    let r = c_pattern(Opt::Debug, &[("WMHCCT_UNWIND", "full")], "c-full");
    assert_eq!(r["config"]["unwind"], "full");
    check_contexts(&r, "calloc", true);
    assert_frees_exact(&r);
}

#[test]
fn c_pattern_exact_unwind_fp() {
    let r = c_pattern(Opt::Debug, &[("WMHCCT_UNWIND", "fp")], "c-fp");
    assert_eq!(r["config"]["unwind"], "fp");
    check_contexts(&r, "calloc", true);
    assert_frees_exact(&r);
}

#[test]
fn c_pattern_exact_unwind_first() {
    let r = c_pattern(Opt::Debug, &[("WMHCCT_UNWIND", "first")], "c-first");
    assert_eq!(r["config"]["unwind"], "first");
    check_contexts(&r, "calloc", true);
    assert_frees_exact(&r);
}

#[test]
fn c_pattern_exact_mode() {
    let r = c_pattern(Opt::Debug, &[("WMHCCT_EXACT", "1")], "c-exact");
    assert_eq!(r["config"]["exact"], true, "{}", r["config"]);
    check_contexts(&r, "calloc", true);
    assert_frees_exact(&r);
}

#[test]
fn c_pattern_unwind_none_keeps_exact_totals() {
    // `none`: count only. Totals, peak and leak stay exact (checked in
    // c_pattern); no context names a function of the program.
    let r = c_pattern(Opt::Debug, &[("WMHCCT_UNWIND", "none")], "c-none");
    assert_eq!(r["config"]["unwind"], "none");
    for leaf in ["leaf_a", "leaf_b", "leaf_c"] {
        assert!(
            contexts_with(&r, "malloc", leaf).is_empty()
                && contexts_with(&r, "calloc", leaf).is_empty(),
            "unwind none captures no stacks: {}",
            summary(&r)
        );
    }
    assert_frees_exact(&r);
}

/// Peak when the runtime allocates a little of its own (libstdc++'s
/// emergency exception pool, libgfortran's units): at least the program's
/// peak and not more than 128 KiB above it.
fn check_peak_bounded(r: &serde_json::Value) {
    let peak = u64_of(&r["peak_bytes"]);
    assert!(
        (PEAK..=PEAK + 128 * 1024).contains(&peak),
        "peak {peak} not within [{PEAK}, {PEAK} + 128 KiB]"
    );
}

#[test]
fn cxx_pattern() {
    for opt in [Opt::Debug, Opt::Release] {
        let w = WorkDir::new("cxx");
        let exe = compile("pattern.cpp", &w.path, opt, &[]);
        let h5 = w.join("pattern.h5");
        let out = run_traced(&exe, &[] as &[&str], &w.path, &h5, &[]);
        assert_eq!(out.code, 0, "{}", out.describe());
        assert_eq!(out.stdout, OUTPUT);
        assert_clean_stderr(&out, &h5);
        let r = report_json(&h5);
        // operator new / new[] reach malloc.
        check_contexts(&r, "malloc", false);
        assert!(
            total_count(&r, "malloc") >= NA + NB + NC,
            "totals: {}",
            alloc_totals(&r)
        );
        assert!(
            total_count(&r, "free") >= NA + NB,
            "totals: {}",
            alloc_totals(&r)
        );
        check_peak_bounded(&r);
    }
}

#[test]
fn fortran_pattern() {
    for opt in [Opt::Debug, Opt::Release] {
        let w = WorkDir::new("fortran");
        let exe = compile("pattern.f90", &w.path, opt, &[]);
        let h5 = w.join("pattern.h5");
        let out = run_traced(&exe, &[] as &[&str], &w.path, &h5, &[]);
        assert_eq!(out.code, 0, "{}", out.describe());
        assert_eq!(out.stdout.trim(), "pattern done: sink 3");
        assert_clean_stderr(&out, &h5);
        let r = report_json(&h5);
        check_contexts(&r, "malloc", false);
        assert!(
            total_count(&r, "malloc") >= NA + NB + NC,
            "totals: {}",
            alloc_totals(&r)
        );
        check_peak_bounded(&r);
    }
}
