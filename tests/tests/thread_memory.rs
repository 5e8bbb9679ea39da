//! What the tracer holds per thread: 128 threads alive at once, each
//! allocating from one loop, against one thread. A thread's unwinding
//! state starts small (the rule cache grows only with the call sites the
//! thread meets: `unwinder/src/rule_cache.rs`), so the tracer's own
//! allocations grow by well under 80 KiB per thread (they were ~137 KiB
//! with a fixed 96 KiB rule cache). From the report's own figures; the
//! counts stay exact.

use wmhcct_e2e::*;

/// The tracer's allocation peak, and the malloc calls, of a run of
/// many_threads.c with `n` threads.
fn run(w: &WorkDir, exe: &std::path::Path, n: u64) -> (u64, u64) {
    let h5 = w.join(format!("t{n}.h5"));
    let out = run_traced(exe, &[n.to_string()], &w.path, &h5, &[]);
    assert_eq!(out.code, 0, "{}", out.describe());
    assert_eq!(out.stdout, format!("{n} threads x 1000 pairs\n"));
    assert_clean_stderr(&out, &h5);
    let r = report_json(&h5);
    (
        u64_of(&r["resident"]["tracer_peak_bytes"]),
        total_count(&r, "malloc"),
    )
}

#[test]
fn a_thread_costs_the_tracer_little_memory() {
    let w = WorkDir::new("thread-memory");
    let exe = compile("many_threads.c", &w.path, Opt::Debug, &["-pthread"]);
    let (one, calls_one) = run(&w, &exe, 1);
    let (many, calls_many) = run(&w, &exe, 128);
    // Every worker's 1000 mallocs (the C library's thread start-up may add
    // a few of its own, the same per thread).
    let per_thread_calls = (calls_many - calls_one) as f64 / 127.0;
    assert!(
        (1000.0..1010.0).contains(&per_thread_calls),
        "{calls_one} {calls_many}"
    );
    let per_thread = many.saturating_sub(one) / 127;
    assert!(
        per_thread < 80 << 10,
        "the tracer holds {} KiB per thread ({one} B for 1 thread, {many} B for 128)",
        per_thread >> 10
    );
    eprintln!("tracer allocations per thread: {} KiB", per_thread >> 10);
}
