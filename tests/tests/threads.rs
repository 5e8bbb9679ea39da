//! 8 threads allocating and freeing at once, with cross-thread frees
//! (tests/programs/storm.c): no deadlock (killed after 120 s = failure),
//! the threads' context counts are exact, nothing leaks from it.

use std::time::Duration;

use wmhcct_e2e::*;

const THREADS: u64 = 8;
const N: u64 = 25_000;

#[test]
fn eight_thread_storm_exact_and_no_deadlock() {
    storm("storm", &[]);
}

/// The same with every event handed to a collector thread: one ring for 8
/// threads keeps each free after the allocation it releases.
#[test]
fn eight_thread_storm_with_collector_thread() {
    storm("storm-thread", &[("WMHCCT_COLLECTOR", "thread")]);
}

fn storm(name: &str, env: &[(&str, &str)]) {
    let w = WorkDir::new(name);
    let exe = compile("storm.c", &w.path, Opt::Debug, &["-pthread"]);
    let h5 = w.join("storm.h5");
    let n = N.to_string();
    let out = run_traced_timeout(&exe, &[&n], &w.path, &h5, env, Duration::from_secs(120));
    assert_eq!(out.code, 0, "{}", out.describe());
    assert_eq!(
        out.stdout,
        format!("storm done: {THREADS} threads x {N} mallocs\n")
    );
    assert_clean_stderr(&out, &h5);

    let r = report_json(&h5);
    let storm = contexts_with(&r, "malloc", "storm_worker");
    assert!(
        !storm.is_empty(),
        "no context through storm_worker: {}",
        summary(&r)
    );
    let count: u64 = storm.iter().map(|c| u64_of(&c["count"])).sum();
    let errs: u64 = storm.iter().map(|c| u64_of(&c["count_err"])).sum();
    assert_eq!(
        count,
        THREADS * N,
        "mallocs from storm_worker (count_err {errs}): {}",
        summary(&r)
    );
    for c in &storm {
        assert_eq!(
            frame_index(c, "storm_alloc"),
            Some(0),
            "storm_alloc calls malloc: {:?}",
            stack_names(c)
        );
        assert_eq!(
            u64_of(&c["leaked_bytes"]),
            0,
            "every storm block is freed: {c}"
        );
    }
    assert!(
        total_count(&r, "malloc") >= THREADS * N,
        "totals: {}",
        alloc_totals(&r)
    );
    assert!(
        total_count(&r, "free") >= THREADS * N,
        "every block freed once: {}",
        alloc_totals(&r)
    );
    assert_eq!(
        u64_of(&r["heap"]["unknown_frees"]),
        0,
        "cross-thread frees are of known blocks: {}",
        r["heap"]
    );
}

/// Threads whose key destructors allocate in 4 rounds, after the tracer's
/// own destructor has handed their state back: each thread counts once
/// (11 threads, the main one too), and every round's allocation is in the
/// totals. Until 2026-11-27 each round after the first counted the thread
/// again (41 threads).
#[test]
fn destructor_rounds_do_not_count_a_thread_again() {
    for placement in ["inline", "thread"] {
        let w = WorkDir::new(&format!("key-rounds-{placement}"));
        let exe = compile("key_rounds.c", &w.path, Opt::Debug, &["-pthread"]);
        let h5 = w.join("k.h5");
        let out = run_traced(
            &exe,
            &["10", "4"],
            &w.path,
            &h5,
            &[("WMHCCT_COLLECTOR", placement)],
        );
        assert_eq!(out.code, 0, "{}", out.describe());
        assert_eq!(
            out.stdout,
            "10 threads, 4 destructor rounds: 40 mallocs of 64 bytes\n"
        );
        let r = report_json(&h5);
        assert_eq!(u64_of(&r["ranks_detail"][0]["threads"]), 11, "{placement}");
        let rounds: u64 = contexts_with(&r, "malloc", "round_scratch")
            .iter()
            .map(|c| u64_of(&c["count"]))
            .sum();
        assert_eq!(rounds, 40, "{placement}");
    }
}
