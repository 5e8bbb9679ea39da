//! Every interposed allocator entry point (tests/programs/allocators.c),
//! failure cases included: the program observes the same results (return
//! values, errno, alignment, malloc_usable_size) with and without the
//! tracer, and the report counts exactly the calls it made.

use wmhcct_e2e::*;

#[test]
fn every_entry_point_same_results_and_exact_counts() {
    entry_points("allocators", Opt::Debug, &[], &[]);
}

/// Optimised and without frame pointers: the program's frames unwind from
/// the stack pointer the exports hand over, so a wrong one cuts its stacks
/// short of `_start`.
#[test]
fn every_entry_point_without_frame_pointers() {
    entry_points(
        "allocators-nofp",
        Opt::Release,
        &["-fomit-frame-pointer"],
        &[],
    );
}

/// The same with events handed to a collector thread: realloc's release and
/// allocation, failed calls and errno go through its packets.
#[test]
fn every_entry_point_with_collector_thread() {
    entry_points(
        "allocators-thread",
        Opt::Debug,
        &[],
        &[("WMHCCT_COLLECTOR", "thread")],
    );
}

fn entry_points(name: &str, opt: Opt, cflags: &[&str], env: &[(&str, &str)]) {
    let w = WorkDir::new(name);
    let exe = compile("allocators.c", &w.path, opt, cflags);
    let plain = run_plain(&exe, &[] as &[&str], &w.path);
    assert_eq!(plain.code, 0, "without the tracer: {}", plain.describe());
    assert!(
        plain.stdout.contains("malloc(SIZE_MAX): NULL errno=ENOMEM"),
        "{}",
        plain.stdout
    );

    let h5 = w.join("allocators.h5");
    let traced = run_traced(&exe, &[] as &[&str], &w.path, &h5, env);
    assert_eq!(traced.code, 0, "with the tracer: {}", traced.describe());
    // Line by line, for a readable failure.
    for (p, t) in plain.stdout.lines().zip(traced.stdout.lines()) {
        assert_eq!(t, p, "the tracer changed what the program observes");
    }
    assert_eq!(traced.stdout, plain.stdout, "whole output");
    assert_clean_stderr(&traced, &h5);

    let r = report_json(&h5);
    let made = calls_made(&plain.stdout);
    assert_eq!(made.len(), 10, "{}", plain.stdout);
    let mut wrong = Vec::new();
    for (kind, n, bytes) in &made {
        assert!(ALLOCATORS.contains(&kind.as_str()), "{kind}");
        let (rn, rb) = (total_count(&r, kind), total_bytes(&r, kind));
        if rn != *n {
            wrong.push(format!("{kind}: {n} calls made, report counts {rn}"));
        }
        // Bytes are those of the successful allocations (free: bytes released).
        if kind != "free" && rb != *bytes {
            wrong.push(format!("{kind}: {bytes} bytes allocated, report has {rb}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "totals differ from the calls made:\n  {}\ntotals: {}",
        wrong.join("\n  "),
        alloc_totals(&r)
    );
    // Every allocating entry point's contexts start at the call in main:
    // the program's frame, at a line of allocators.c, with no tracer frame
    // (the exports hand over the caller's registers, `from_caller`), and
    // unwind from there to `_start` (its stack and frame pointers were right).
    for (kind, ..) in made.iter().filter(|(k, ..)| k != "free") {
        let found: Vec<&serde_json::Value> =
            contexts(&r).iter().filter(|c| c["kind"] == *kind).collect();
        assert!(!found.is_empty(), "no {kind} context: {}", summary(&r));
        for c in found {
            let leaf = &c["stack"][0];
            assert!(
                is_fn(leaf["function"].as_str().unwrap_or(""), "main")
                    && leaf["file"]
                        .as_str()
                        .is_some_and(|f| f.ends_with("allocators.c"))
                    && leaf["line"].as_u64().is_some_and(|l| l > 0),
                "{kind}: the innermost frame is not the call in main: {}",
                c["stack"]
            );
            let names = stack_names(c);
            assert_eq!(
                names.last().map(String::as_str),
                Some("_start"),
                "{kind}: the stack does not reach _start: {names:?}"
            );
        }
    }
    // Everything the program allocated was freed; realloc(p, 0) freed its block.
    assert_eq!(u64_of(&r["live_bytes"]), 0, "nothing leaks: {}", r["heap"]);
    // Every non-NULL free is of a block the program allocated.
    assert_eq!(
        u64_of(&r["heap"]["unknown_frees"]),
        0,
        "unknown frees: {}",
        r["heap"]
    );
}
