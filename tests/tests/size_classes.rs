//! The report's allocation sizes: every block allocated, counted exactly by
//! its power-of-two size class (tests/programs/temporaries.c, whose sizes
//! are known), in the JSON and in the text report's table.

use serde_json::Value;
use wmhcct_e2e::*;

/// (smallest size of the class, blocks of the program's own in it).
const OURS: [(u64, u64); 4] = [
    // churn 3000 × 24 B, grow's 400 × 16 B
    (16, 3400),
    // batch 2000 × 40 B, interleave's 500 × 56 B
    (32, 2500),
    // interleave's 500 × 72 B, the threads' 4000 × 88 B
    (64, 4500),
    // grow's realloc to 4096 B
    (4096, 400),
];

#[test]
fn size_classes_count_every_block_by_its_size() {
    let w = WorkDir::new("size-classes");
    let exe = compile("temporaries.c", &w.path, Opt::Release, &["-pthread"]);
    let h5 = w.join("sizes.h5");
    let traced = run_traced(&exe, &[] as &[&str], &w.path, &h5, &[]);
    assert_eq!(traced.code, 0, "{}", traced.describe());
    let r = report_json(&h5);
    let classes = r["size_classes"].as_array().expect("size_classes");
    let of = |min: u64| -> Option<&Value> { classes.iter().find(|c| u64_of(&c["min"]) == min) };
    for (min, n) in OURS {
        let c = of(min).unwrap_or_else(|| panic!("no class from {min} B: {classes:?}"));
        assert_eq!(u64_of(&c["max"]), 2 * min - 1, "{c}");
        // The C library's own blocks (stdio's buffer, thread start-up) may
        // add a few.
        let got = u64_of(&c["count"]);
        assert!(
            (n..n + 5).contains(&got),
            "class from {min} B: {got}, the program made {n}"
        );
    }
    // Every block, once: the classes add up to the successful allocations
    // (none of this program's fails).
    let blocks: u64 = classes.iter().map(|c| u64_of(&c["count"])).sum();
    let calls: u64 = [
        "malloc",
        "calloc",
        "realloc",
        "posix_memalign",
        "aligned_alloc",
    ]
    .iter()
    .map(|k| total_count(&r, k))
    .sum();
    assert_eq!(blocks, calls, "{classes:?}");

    let text = cli_out(&w.path, &["report", h5.to_str().unwrap()]);
    let table: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("sizes allocated"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    assert!(
        table
            .iter()
            .any(|l| l.starts_with("  64 B – 128 B ") && l.ends_with(&"#".repeat(30))),
        "the largest class has the longest bar:\n{}",
        text
    );
    assert!(
        table.iter().any(|l| l.starts_with("  4 KiB – 8 KiB ")),
        "{}",
        text
    );
}
