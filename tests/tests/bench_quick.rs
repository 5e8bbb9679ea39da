//! `benches/run.py --quick` keeps working: it builds the stress program and
//! the collector benchmarks, runs every mode once on tiny inputs and prints
//! its tables. No performance assertion.

use std::time::Duration;

use wmhcct_e2e::*;

#[test]
fn quick_benchmark_harness_runs_and_prints_its_tables() {
    let dir = WorkDir::new("bench-quick");
    // The collector benchmarks build into their own target directory.
    let target = root().join("target/benches");
    let out = run_quick_bench(
        "run.py",
        &dir.path,
        &[("CARGO_TARGET_DIR", target.as_os_str())],
        Duration::from_secs(900),
    );
    assert_stdout_has(
        &out,
        &[
            "| mode | wall ratio to native |",
            "| second |",
            "| second+inline |",
            "| second+thread |",
            "Default collector placement here:",
            "| full |",
            "### Deep-stack program",
            "### Tracer memory",
            "## HCCT update cost",
            "## HCCT study",
            "## Collector placement",
            "### Targets",
        ],
    );
}
