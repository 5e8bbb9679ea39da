//! `benches/run.py --quick` keeps working: it builds the stress program and
//! the collector benchmarks, runs every mode once on tiny inputs and prints
//! its tables. No performance assertion.

use std::time::Duration;

use wmhcct_e2e::*;

#[test]
fn quick_benchmark_harness_runs_and_prints_its_tables() {
    let dir = WorkDir::new("bench-quick");
    let script = root().join("benches/run.py");
    let mut cmd = command(PYTHON, &[script.as_os_str(), "--quick".as_ref()], &dir.path);
    cmd.env("WMHCCT_LIB", lib()).env("WMHCCT_BIN", bin());
    // The collector benchmarks build into their own target directory.
    cmd.env("CARGO_TARGET_DIR", root().join("target/benches"));
    let out = run_cmd(&mut cmd, Duration::from_secs(900));
    assert_eq!(out.code, 0, "{}", out.describe());
    for needle in [
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
    ] {
        assert!(
            out.stdout.contains(needle),
            "no {needle:?} in the output:\n{}",
            out.describe()
        );
    }
}
