//! Allocations on stacks that are not the thread's own
//! (tests/programs/switched_stacks.c): makecontext coroutines, a stack
//! switch in assembly whose CFI does not describe it, and a handler on a
//! sigaltstack, each stack with a guard page right above its top. The
//! tracer used to read such stacks as if they reached up to the thread's
//! own stack and killed the program (SIGSEGV) on the guard page. Now the
//! program runs as without it, every call is counted, and each stack ends
//! at its entry function without an unwind error.

use serde_json::Value;
use wmhcct_e2e::*;

#[test]
fn allocations_on_switched_stacks_are_traced_without_harm() {
    let w = WorkDir::new("switched-stacks");
    // -O2 without frame pointers: DWARF unwinding, as for ordinary code.
    let exe = compile(
        "switched_stacks.c",
        &w.path,
        Opt::Release,
        &["-fomit-frame-pointer"],
    );
    let plain = run_plain(&exe, &[] as &[&str], &w.path);
    assert_eq!(plain.code, 0, "without the tracer: {}", plain.describe());
    let made = calls_made(&plain.stdout);
    assert_eq!(made.len(), 2, "{}", plain.stdout);

    for mode in ["second", "first", "full", "fp"] {
        let h5 = w.join(format!("{mode}.h5"));
        let traced = run_traced(
            &exe,
            &[] as &[&str],
            &w.path,
            &h5,
            &[("WMHCCT_UNWIND", mode), ("WMHCCT_VALIDATE", "0.05")],
        );
        assert_eq!(traced.code, 0, "{mode}: {}", traced.describe());
        assert_eq!(traced.stdout, plain.stdout, "{mode}");
        assert_clean_stderr(&traced, &h5);
        let r = report_json(&h5);
        for (kind, n, bytes) in &made {
            assert_eq!(
                total_count(&r, kind),
                *n,
                "{mode} {kind}: {}",
                alloc_totals(&r)
            );
            if kind == "malloc" {
                assert_eq!(total_bytes(&r, kind), *bytes, "{mode}");
            }
        }
        assert_eq!(u64_of(&r["heap"]["unknown_frees"]), 0, "{mode}");
        assert_eq!(u64_of(&r["unwind"]["errors"]), 0, "{mode}: {}", r["unwind"]);
        // Validated only where a heuristic stops early: `full` would check
        // its own walk, and `fp` one frame-pointer walk against another (it
        // read 1.0 here, with one frame per stack).
        let accuracy = r["unwind"]["accuracy"].as_f64();
        if mode == "fp" || mode == "full" {
            assert_eq!(accuracy, None, "{mode}: {}", r["unwind"]);
        } else {
            assert_eq!(accuracy, Some(1.0), "{mode}: {}", r["unwind"]);
        }
        if mode == "fp" {
            // No frame pointers: one frame per stack, but no harm either.
            continue;
        }
        check_stacks(&r, mode);
    }
}

fn check_stacks(r: &Value, mode: &str) {
    // Coroutines: the stack ends at the entry function given to
    // makecontext (glibc's trampoline under it is not a caller).
    let coro = context_with(r, "malloc", "coro_alloc");
    assert_eq!(u64_of(&coro["count"]), 2 * 40 * 100, "{mode}");
    let names = stack_names(coro);
    assert!(
        names.last().is_some_and(|f| is_fn(f, "coro_body")),
        "{mode}: {names:?}"
    );

    // The assembly switch: the entry function, then at most the switch
    // itself; nothing read beyond the stack's top.
    let raw = context_with(r, "malloc", "raw_alloc");
    assert_eq!(u64_of(&raw["count"]), 3000, "{mode}");
    let names = stack_names(raw);
    let entry = frame_index(raw, "on_raw_stack").unwrap_or_else(|| panic!("{mode}: {names:?}"));
    assert!(
        names[entry + 1..].iter().all(|f| is_fn(f, "run_on_stack")),
        "{mode}: {names:?}"
    );

    // The handler on its alternate stack.
    let handler = context_with(r, "malloc", "alt_handler");
    assert_eq!(u64_of(&handler["count"]), 200, "{mode}");

    // And the thread's own stack as ever, down to main.
    let own = contexts_with(r, "malloc", "main_alloc");
    assert_eq!(own.iter().map(|c| u64_of(&c["count"])).sum::<u64>(), 1000);
    assert!(
        own.iter().all(|c| frame_index(c, "main").is_some()),
        "{}",
        summary(r)
    );
}

/// The thread's own stack is still read whole: a 160 MiB frame on the main
/// thread's stack under `ulimit -s unlimited` (Fortran codes with large
/// automatic arrays run so) leaves the stack above it, down to `main`, in
/// the context.
#[test]
fn a_huge_frame_on_the_main_stack_keeps_the_stack_above_it() {
    let w = WorkDir::new("big-frame");
    let exe = compile(
        "big_frame.c",
        &w.path,
        Opt::Release,
        &["-fomit-frame-pointer"],
    );
    let h5 = w.join("big.h5");
    let exe = exe.to_string_lossy().into_owned();
    let args = ["--stack=unlimited", exe.as_str(), "160"];
    let traced = run_traced("prlimit", &args, &w.path, &h5, &[]);
    assert_eq!(traced.code, 0, "{}", traced.describe());
    assert_eq!(traced.stdout, "ok\n");
    let r = report_json(&h5);
    let c = context_with(&r, "malloc", "alloc_below_big_frame");
    let names = stack_names(c);
    let at = |f: &str| frame_index(c, f).unwrap_or_else(|| panic!("no {f}: {names:?}"));
    assert!(at("alloc_below_big_frame") < at("big_frame") && at("big_frame") < at("main"));
    assert_eq!(u64_of(&r["unwind"]["errors"]), 0, "{}", r["unwind"]);
}

/// Threads with 16 KiB stacks (PTHREAD_STACK_MIN) that allocate with 4 KiB
/// of it in use: the tracer's work (up to ~16 KiB of frames when it
/// unwinds) runs on a stack of its own, so they run as without it. Each
/// traced event used to overflow them (SIGSEGV).
#[test]
fn threads_with_the_smallest_stacks_are_traced_without_harm() {
    let w = WorkDir::new("small-stacks");
    let exe = compile(
        "small_stacks.c",
        &w.path,
        Opt::Release,
        &["-fomit-frame-pointer", "-pthread"],
    );
    let plain = run_plain(&exe, &[] as &[&str], &w.path);
    assert_eq!(plain.code, 0, "without the tracer: {}", plain.describe());
    let made = calls_made(&plain.stdout);
    assert_eq!(made.len(), 2, "{}", plain.stdout);
    for (mode, collector) in [
        ("second", "thread"),
        ("full", "inline"),
        ("second", "inline"),
    ] {
        let h5 = w.join(format!("{mode}-{collector}.h5"));
        let env = [("WMHCCT_UNWIND", mode), ("WMHCCT_COLLECTOR", collector)];
        let traced = run_traced(&exe, &[] as &[&str], &w.path, &h5, &env);
        assert_eq!(traced.code, 0, "{mode} {collector}: {}", traced.describe());
        assert_eq!(traced.stdout, plain.stdout);
        assert_clean_stderr(&traced, &h5);
        let r = report_json(&h5);
        // glibc's own thread set-up and teardown add calloc and free calls
        // (each thread's TLS vector): malloc is the program's alone.
        for (kind, n, bytes) in &made {
            if kind == "malloc" {
                assert_eq!(total_count(&r, kind), *n, "{}", alloc_totals(&r));
                assert_eq!(total_bytes(&r, kind), *bytes);
            } else {
                assert!(total_count(&r, kind) >= *n, "{kind}: {}", alloc_totals(&r));
            }
        }
        let ctx = contexts_with(&r, "malloc", "small_thread_alloc");
        let n: u64 = ctx.iter().map(|c| u64_of(&c["count"])).sum();
        assert_eq!(n, 4 * 2000, "{}", summary(&r));
        assert!(
            ctx.iter().all(|c| frame_index(c, "use_stack").is_some()),
            "{}",
            summary(&r)
        );
        assert_eq!(u64_of(&r["unwind"]["errors"]), 0, "{}", r["unwind"]);
    }
}

/// A 16 KiB thread that ends the process with exit(3): the report is
/// written (on the tracer's stack), the exit code is the program's. It used
/// to die by SIGSEGV writing the report on that thread's stack.
#[test]
fn exit_from_a_small_thread_writes_the_report() {
    let w = WorkDir::new("small-stack-exit");
    let exe = compile("small_stacks.c", &w.path, Opt::Release, &["-pthread"]);
    let plain = run_plain(&exe, &["exit"], &w.path);
    assert_eq!(plain.code, 3, "without the tracer: {}", plain.describe());
    let h5 = w.join("exit.h5");
    let traced = run_traced(&exe, &["exit"], &w.path, &h5, &[]);
    assert_eq!(traced.code, 3, "{}", traced.describe());
    assert_eq!(traced.stdout, plain.stdout);
    assert_clean_stderr(&traced, &h5);
    let r = report_json(&h5);
    assert_eq!(total_count(&r, "malloc"), 4 * 2000, "{}", alloc_totals(&r));
    assert_eq!(r["reason"], "exit", "{}", r["reason"]);
}
