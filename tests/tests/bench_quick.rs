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
            "## HCCT update cost with eviction",
            "| 1000000 | 0.5 |",
            "## HCCT study",
            "| exact HCCT % of CCT |",
            "At φ = 1e-4 the exact HCCT is ",
            "## Collector placement",
            "| floor:count |",
            "| floor:ring+thread+clock |",
            "| floor:ring+thread+lent-clock |",
            "### Targets",
            "- floor (bursts): counting each call and handing it to a thread",
        ],
    );
    // Cargo's plain build of the library, kept by scripts/pgo.sh: its rows
    // and what the profile-guided build saves against it.
    if root().join("target/pgo/plain/libwmhcct.so").is_file() {
        assert_stdout_has(
            &out,
            &[
                "| second@plain |",
                "| second+inline@plain |",
                "- profile-guided build (random): second adds ",
                "- profile-guided build (bursts): second+inline adds ",
            ],
        );
    }
}

/// `benches/mpi_poll.py --quick`: the MPI polling benchmark keeps working
/// (every mode's run exits 0 and prints its figures). No performance
/// assertion.
#[test]
fn quick_mpi_polling_benchmark_runs_and_prints_its_table() {
    let dir = WorkDir::new("bench-mpi-poll");
    let yes = std::ffi::OsStr::new("1");
    let out = run_quick_bench(
        "mpi_poll.py",
        &dir.path,
        &[
            ("OMPI_ALLOW_RUN_AS_ROOT", yes),
            ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", yes),
        ],
        Duration::from_secs(300),
    );
    assert_stdout_has(
        &out,
        &[
            "## MPI polling: mpirun -np 2",
            "| mode | MPI_Test ns per call |",
            "| native |",
            "| none |",
            "| second |",
            "| full |",
        ],
    );
}

#[test]
fn unknown_benchmark_names_are_refused_with_the_accepted_ones() {
    let dir = WorkDir::new("bench-args");
    let script = root().join("benches/run.py");
    for (arg, value, accepted) in [
        (
            "--configs",
            "random,nonesuch",
            "accepted: random, bursts, random-sizes",
        ),
        (
            "--modes",
            "second+elsewhere",
            "accepted: none, full, fp, first, second",
        ),
        (
            "--modes",
            "second@debug",
            "each optionally with +inline or +thread, then optionally @plain",
        ),
        (
            "--floors",
            "ring+nothing",
            "accepted: count, ring, ring+thread, ring+thread+clock, ring+thread+lent-clock",
        ),
    ] {
        let mut c = command(
            PYTHON,
            &[script.as_os_str(), arg.as_ref(), value.as_ref()],
            &dir.path,
        );
        let out = run_cmd(&mut c, Duration::from_secs(60));
        assert_eq!(out.code, 2, "{}", out.describe());
        let err = out.stderr.trim_end().lines().last().unwrap_or("");
        assert!(
            err.contains(arg) && err.contains(accepted),
            "{}",
            out.describe()
        );
        assert!(!out.stderr.contains("Traceback"), "{}", out.describe());
    }
}
