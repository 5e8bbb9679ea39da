//! Temporary allocations (tests/programs/temporaries.c): a block freed by
//! the thread that allocated it before that thread allocates or frees
//! anything else. The
//! report counts them exactly, in total and per context, in both collector
//! placements; `--by temporary` and `export --weight temporary` show them;
//! and bounded memory (contexts evicted) leaves the total exact.

use serde_json::Value;
use wmhcct_e2e::*;

/// (function, kind, calls of that kind through it, temporaries among them).
const EXPECTED: [(&str, &str, u64, u64); 5] = [
    ("churn", "malloc", 3000, 3000),
    // 200 batches of 10: only each batch's last block is freed first.
    ("batch", "malloc", 2000, 200),
    // a, b allocated, b freed (temporary), then a (a free came between).
    ("interleave", "malloc", 1000, 500),
    // The realloc's new block is the latest allocation; its malloc is not.
    ("grow", "realloc", 400, 400),
    // Two threads, each freeing its own latest block while the other runs.
    ("churn_thread", "calloc", 4000, 4000),
];
/// Bytes of the temporaries above: 24, 40, 72, 4096 and 88 bytes a block.
const EXPECTED_BYTES: u64 = 3000 * 24 + 200 * 40 + 500 * 72 + 400 * 4096 + 4000 * 88;

fn heap_temporaries(r: &Value) -> (u64, u64) {
    (
        u64_of(&r["heap"]["temporary_count"]),
        u64_of(&r["heap"]["temporary_bytes"]),
    )
}

/// Sums of `key` over the contexts of `kind` through `function`.
fn through(r: &Value, kind: &str, function: &str, key: &str) -> u64 {
    contexts_with(r, kind, function)
        .iter()
        .map(|c| u64_of(&c[key]))
        .sum()
}

#[test]
fn temporary_allocations_are_counted_exactly_in_total_and_per_context() {
    let w = WorkDir::new("temporaries");
    let exe = compile("temporaries.c", &w.path, Opt::Release, &["-pthread"]);
    let plain = run_plain(&exe, &[] as &[&str], &w.path);
    assert_eq!(plain.code, 0, "{}", plain.describe());
    let mut totals = Vec::new();
    for placement in ["inline", "thread"] {
        let h5 = w.join(format!("temporaries-{placement}.h5"));
        let env = [("WMHCCT_EXACT", "1"), ("WMHCCT_COLLECTOR", placement)];
        let traced = run_traced(&exe, &[] as &[&str], &w.path, &h5, &env);
        assert_eq!(traced.code, 0, "{placement}: {}", traced.describe());
        assert_eq!(traced.stdout, plain.stdout, "{placement}");
        assert_clean_stderr(&traced, &h5);
        let r = report_json(&h5);
        for (function, kind, calls, temporary) in EXPECTED {
            assert_eq!(
                (
                    through(&r, kind, function, "count"),
                    through(&r, kind, function, "temporary")
                ),
                (calls, temporary),
                "{placement}: {kind} through {function}: (calls, temporaries){}",
                summary(&r)
            );
        }
        // The program's other allocations (stdio, thread start-up) may add
        // a few; in exact mode the contexts hold every one of them.
        let (count, bytes) = heap_temporaries(&r);
        let listed: u64 = contexts(&r).iter().map(|c| u64_of(&c["temporary"])).sum();
        assert_eq!(count, listed, "{placement}: heap total vs contexts");
        let ours: u64 = EXPECTED.iter().map(|e| e.3).sum();
        assert!(
            (ours..ours + 10).contains(&count),
            "{placement}: {count} temporaries, the program made {ours}"
        );
        assert!(bytes >= EXPECTED_BYTES, "{placement}: {bytes} bytes");
        totals.push((count, bytes));

        let text = cli_out(
            &w.path,
            &["report", "--by", "temporary", h5.to_str().unwrap()],
        );
        assert!(
            text.contains(&format!("{count} temporary allocations (")),
            "{text}"
        );
        let first = text
            .split("\n#1 ")
            .nth(1)
            .unwrap_or_else(|| panic!("no #1 in:\n{text}"));
        assert!(
            first.starts_with("calloc") && first.contains("temporary 4000"),
            "{placement}: #1 by temporaries should be churn_thread's calloc:\n{text}"
        );
        let folded = cli_out(
            &w.path,
            &[
                "export",
                "--format",
                "folded",
                "--weight",
                "temporary",
                h5.to_str().unwrap(),
            ],
        );
        for line in [
            ";churn;malloc 3000",
            ";batch;malloc 200",
            ";grow;realloc 400",
        ] {
            assert!(
                folded.lines().any(|l| l.ends_with(line)),
                "{line} in:\n{folded}"
            );
        }
        // Weight 0 stacks are left out: grow's malloc had no temporaries.
        assert!(!folded.contains(";grow;malloc "), "{folded}");
    }
    assert_eq!(totals[0], totals[1], "inline vs collector thread");

    // `diff` against a run that churns twice as much: 3000 more.
    let twice = w.join("temporaries-twice.h5");
    let traced = run_traced(&exe, &["2"], &w.path, &twice, &[]);
    assert_eq!(traced.code, 0, "{}", traced.describe());
    let once = w.join("temporaries-inline.h5");
    let (a, b) = (once.to_str().unwrap(), twice.to_str().unwrap());
    let d: Value = serde_json::from_str(&cli_out(&w.path, &["diff", "--json", a, b])).unwrap();
    assert_eq!(u64_of(&d["a"]["temporary_count"]), totals[0].0);
    assert_eq!(u64_of(&d["b"]["temporary_count"]), totals[0].0 + 3000);
    let text = cli_out(&w.path, &["diff", a, b]);
    assert!(
        text.lines()
            .any(|l| l.starts_with("temporary:") && l.contains("+3000")),
        "{text}"
    );

    // Bounded memory: two counters per weight, most contexts evicted. The
    // heap's total stays exact; a context's count is at most its true one.
    let h5 = w.join("temporaries-evicting.h5");
    let env = [("WMHCCT_PHI", "0.5"), ("WMHCCT_EPSILON", "0.5")];
    let traced = run_traced(&exe, &[] as &[&str], &w.path, &h5, &env);
    assert_eq!(traced.code, 0, "{}", traced.describe());
    let r = report_json(&h5);
    assert_eq!(heap_temporaries(&r), totals[0], "evicting run");
    for (function, kind, _, temporary) in EXPECTED {
        let got = through(&r, kind, function, "temporary");
        assert!(got <= temporary, "{kind} through {function}: {got}");
    }
}
