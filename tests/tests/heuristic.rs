//! The heuristic unwinder on a deep-stack program (tests/programs/deep_stack.c:
//! depth 32, 1000 contexts, bursts of neighbouring contexts, phases that jump
//! across the tree). With `second` and default reseeding the tracer's own
//! validation must report accuracy ≥ 99.5%, `first` less; and those figures
//! must agree with an independent exact check: the per-context counts of a
//! `full` unwind with an exact CCT (`WMHCCT_EXACT=1`) against the heuristic
//! report's.

use std::collections::HashMap;

use wmhcct_e2e::*;

const EVENTS: u64 = 200_000;
/// Validate one stack in 20: ~10 000 validated stacks, a tight estimate.
const VALIDATE: &str = "0.05";

/// malloc counts per context, keyed by the stack's (module, address) list.
fn malloc_counts(r: &Value) -> HashMap<Vec<String>, u64> {
    let mut m = HashMap::new();
    for c in contexts(r).iter().filter(|c| c["kind"] == "malloc") {
        *m.entry(stack_addresses(c)).or_insert(0) += u64_of(&c["count"]);
    }
    m
}

/// Fraction of events attributed to another context than the exact one
/// (half the L1 distance of the count vectors: a lower bound of the wrong
/// fraction, equal to it when wrong attributions do not cancel).
fn misattributed(exact: &HashMap<Vec<String>, u64>, got: &HashMap<Vec<String>, u64>) -> f64 {
    let mut diff = 0u64;
    for (k, &e) in exact {
        diff += e.abs_diff(got.get(k).copied().unwrap_or(0));
    }
    for (k, &g) in got {
        if !exact.contains_key(k) {
            diff += g;
        }
    }
    diff as f64 / 2.0 / exact.values().sum::<u64>() as f64
}

struct Run {
    report: Value,
    accuracy: f64,
    validated: u64,
}

fn traced(dir: &WorkDir, exe: &std::path::Path, name: &str, env: &[(&str, &str)]) -> Run {
    let rep = dir.join(format!("{name}.h5"));
    let events = EVENTS.to_string();
    let out = run_traced(exe, &[events.as_str()], &dir.path, &rep, env);
    assert_eq!(out.code, 0, "{name}: {}", out.describe());
    assert!(out.stdout.contains("deep_stack done"), "{}", out.describe());
    let report = report_json(&rep);
    let u = &report["unwind"];
    Run {
        accuracy: u["accuracy"].as_f64().unwrap_or(-1.0),
        validated: u64_of(&u["validated"]),
        report,
    }
}

#[test]
fn second_match_is_accurate_and_its_reported_accuracy_matches_an_exact_check() {
    let dir = WorkDir::new("heuristic");
    let exe = compile("deep_stack.c", &dir.path, Opt::Release, &[]);
    let exact = traced(
        &dir,
        &exe,
        "exact",
        &[("WMHCCT_UNWIND", "full"), ("WMHCCT_EXACT", "1")],
    );
    let second = traced(
        &dir,
        &exe,
        "second",
        &[("WMHCCT_UNWIND", "second"), ("WMHCCT_VALIDATE", VALIDATE)],
    );
    let first = traced(
        &dir,
        &exe,
        "first",
        &[("WMHCCT_UNWIND", "first"), ("WMHCCT_VALIDATE", VALIDATE)],
    );
    assert_eq!(second.report["unwind"]["mode"], "second");
    assert_eq!(first.report["unwind"]["mode"], "first");

    let truth = malloc_counts(&exact.report);
    assert!(
        truth.len() >= 1000,
        "the program has 1000 contexts; the exact CCT has {}",
        truth.len()
    );
    assert!(
        second.validated >= 1000 && first.validated >= 1000,
        "validated stacks: second {}, first {}",
        second.validated,
        first.validated
    );

    // The tracer's own figures.
    assert!(
        second.accuracy >= 0.995,
        "second-match accuracy {} < 0.995 ({} validated)",
        second.accuracy,
        second.validated
    );
    // With the return-address check of reused frames (the default) both
    // policies reject the false matches; first match is never the better.
    assert!(
        first.accuracy <= second.accuracy,
        "first-match accuracy {} should not exceed second's {}",
        first.accuracy,
        second.accuracy
    );

    // The independent check agrees with them.
    let wrong_second = misattributed(&truth, &malloc_counts(&second.report));
    let wrong_first = misattributed(&truth, &malloc_counts(&first.report));
    assert!(
        (wrong_second - (1.0 - second.accuracy)).abs() <= 0.005,
        "second: {wrong_second:.5} of events misattributed by the exact check, \
         tracer reports accuracy {:.5}",
        second.accuracy
    );
    assert!(
        wrong_first <= (1.0 - first.accuracy) + 0.01,
        "first: {wrong_first:.5} of events misattributed by the exact check, \
         more than the tracer's accuracy {:.5} allows",
        first.accuracy
    );

    // The HCCT built with `second` has the same hot contexts as the exact
    // one, with counts within the measured inaccuracy.
    let got = malloc_counts(&second.report);
    let slack = ((1.0 - second.accuracy).max(wrong_second) * EVENTS as f64).ceil() as u64 + 1;
    let hot_min = (1e-4 * EVENTS as f64) as u64 * 2;
    for (k, &e) in truth.iter().filter(|(_, &e)| e >= hot_min) {
        let g = got.get(k).copied().unwrap_or(0);
        assert!(
            g.abs_diff(e) <= slack,
            "hot context {k:?}: exact {e}, second {g} (slack {slack})"
        );
    }
}

/// The published heuristic (`WMHCCT_CHECK_REUSED=0`): first match takes the
/// paper's false positives and is less accurate than second match; the
/// default check removes them.
#[test]
fn without_the_reused_frame_check_first_match_is_less_accurate() {
    let dir = WorkDir::new("heuristic-paper");
    let exe = compile("deep_stack.c", &dir.path, Opt::Release, &[]);
    let run = |name: &str, mode: &str, check: &str| {
        traced(
            &dir,
            &exe,
            name,
            &[
                ("WMHCCT_UNWIND", mode),
                ("WMHCCT_VALIDATE", VALIDATE),
                ("WMHCCT_CHECK_REUSED", check),
            ],
        )
    };
    let first = run("first-paper", "first", "0");
    let second = run("second-paper", "second", "0");
    let checked = run("first-checked", "first", "1");
    eprintln!(
        "accuracy without the check: first {:.4}, second {:.4}; first with it {:.4}",
        first.accuracy, second.accuracy, checked.accuracy
    );
    assert!(first.validated >= 1000 && second.validated >= 1000);
    assert!(
        first.accuracy < second.accuracy,
        "published heuristic: first {} should be below second {}",
        first.accuracy,
        second.accuracy
    );
    assert!(second.accuracy >= 0.99, "second {}", second.accuracy);
    assert!(
        checked.accuracy > first.accuracy,
        "the check should repair first match: {} vs {}",
        checked.accuracy,
        first.accuracy
    );
}

/// Allocations from one call site at one stack height
/// (tests/programs/one_site.c), optimised and without frame pointers: once
/// a reseed has unwound the stack, every later capture is confirmed as the
/// previous one by the reused-frame check alone, with no unwinding step. The
/// check reads the capture point's own return-address slot, just below the
/// stack pointer the malloc trampoline hands over; if that slot were out of
/// the reader's bounds every capture would unwind two frames instead.
#[test]
fn an_unchanged_stack_is_reused_without_unwinding() {
    let w = WorkDir::new("one-site");
    let exe = compile(
        "one_site.c",
        &w.path,
        Opt::Release,
        &["-fomit-frame-pointer"],
    );
    let rep = w.join("one_site.h5");
    let out = run_traced(
        &exe,
        &[] as &[&str],
        &w.path,
        &rep,
        &[("WMHCCT_UNWIND", "second")],
    );
    assert_eq!(out.code, 0, "{}", out.describe());
    assert!(
        out.stdout.contains("one_site done 20000"),
        "{}",
        out.describe()
    );
    let r = report_json(&rep);
    let u = &r["unwind"];
    assert!(u64_of(&u["events"]) >= 20_000, "{u}");
    let per_event = u["frames_unwound_per_event"].as_f64().unwrap_or(-1.0);
    // ~20 reseeds (one per 1000 events) of ~7 frames: 0.007 per event.
    assert!(
        (0.0..0.05).contains(&per_event),
        "frames unwound per event: {u}"
    );
    // And the stacks are whole: leaf, middle, outer, main, to _start.
    let c = context_with(&r, "malloc", "leaf");
    let names = stack_names(c);
    for (i, f) in ["leaf", "middle", "outer", "main"].iter().enumerate() {
        assert!(is_fn(&names[i], f), "frame {i} is not {f}: {names:?}");
    }
    assert_eq!(
        names.last().map(String::as_str),
        Some("_start"),
        "{names:?}"
    );
}
