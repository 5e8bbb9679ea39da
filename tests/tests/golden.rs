//! Golden files: `wmhcct`'s output on two reports kept in tests/golden/ must
//! stay byte for byte what the files there say. A change of the output
//! shows up here as a diff to review; a report of an older layout that the
//! reader no longer reads fails here too. tests/golden/README.md says how
//! the reports were made. After an intended change of the output:
//!
//!     WMHCCT_BLESS=1 cargo test --release -p wmhcct-e2e --test golden
//!
//! rewrites the expected files; review them with `git diff` before
//! committing.

use std::path::{Path, PathBuf};

use wmhcct_e2e::*;

/// (expected output file, report, wmhcct arguments before the report).
const CASES: [(&str, &str, &[&str]); 8] = [
    ("temporaries.report.txt", "temporaries.h5", &["report"]),
    (
        "temporaries.by-temporary.txt",
        "temporaries.h5",
        &["report", "--by", "temporary", "--group", "function"],
    ),
    ("temporaries.json", "temporaries.h5", &["report", "--json"]),
    (
        "temporaries.folded",
        "temporaries.h5",
        &["export", "--format", "folded", "--weight", "temporary"],
    ),
    ("mpi_pattern.report.txt", "mpi_pattern.h5", &["report"]),
    (
        "mpi_pattern.internal.txt",
        "mpi_pattern.h5",
        &["report", "--mpi-internal", "--by", "leaked", "--top", "5"],
    ),
    (
        "mpi_pattern.json",
        "mpi_pattern.h5",
        &["report", "--json", "--top", "5"],
    ),
    (
        "mpi_pattern.folded",
        "mpi_pattern.h5",
        &["export", "--format", "folded"],
    ),
];

fn golden(name: &str) -> PathBuf {
    root().join("tests/golden").join(name)
}

fn output(report: &Path, args: &[&str]) -> String {
    let report = report.to_str().unwrap();
    cli_out(&root(), &[args, &[report]].concat())
}

/// The first line where `got` and `want` differ, with its neighbours.
fn first_difference(got: &str, want: &str) -> String {
    let (g, w): (Vec<&str>, Vec<&str>) = (got.lines().collect(), want.lines().collect());
    let at = g
        .iter()
        .zip(&w)
        .position(|(a, b)| a != b)
        .unwrap_or(g.len().min(w.len()));
    let around = |v: &[&str]| v[at.saturating_sub(2)..(at + 3).min(v.len())].join("\n");
    format!(
        "line {}:\n--- expected ---\n{}\n--- got ---\n{}",
        at + 1,
        around(&w),
        around(&g)
    )
}

#[test]
fn output_on_the_golden_reports_is_unchanged() {
    let bless = std::env::var_os("WMHCCT_BLESS").is_some_and(|v| v == "1");
    let mut changed = Vec::new();
    for (expected, report, args) in CASES {
        let got = output(&golden(report), args);
        let path = golden(expected);
        if bless {
            std::fs::write(&path, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (WMHCCT_BLESS=1 writes it)", path.display()));
        if got != want {
            changed.push(format!(
                "wmhcct {} {report} differs from {expected}, {}",
                args.join(" "),
                first_difference(&got, &want)
            ));
        }
    }
    assert!(
        changed.is_empty(),
        "{}\n\nIf the change is intended: WMHCCT_BLESS=1 cargo test --release -p wmhcct-e2e \
         --test golden, then review git diff tests/golden",
        changed.join("\n\n")
    );
}
