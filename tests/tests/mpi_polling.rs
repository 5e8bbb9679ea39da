//! Polling loops (tests/programs/mpi_polling.c): MPI calls repeated from
//! one place, which the tracer folds into the record of their first call
//! (`interpose/src/mpi_repeats.rs`), are all counted, each in its own
//! context: two callers of one polling function at the same stack height
//! taking turns, six call sites in turn (more than a thread keeps armed),
//! `MPI_Testany`, and a thread whose last folded calls are
//! still pending when `MPI_Finalize` takes the profile. The same with every
//! unwind mode that folds, and with `full`, which does not.

mod mpi_common;

use mpi_common::*;
use wmhcct_e2e::*;

const P: u64 = 2;
const ROUNDS: u64 = 40;
const NA: u64 = 700;
const NB: u64 = 333;
const NT: u64 = 1000;
const NH: u64 = 1000;
const NC: u64 = 600;

#[test]
fn folded_polling_calls_are_all_counted_in_their_contexts() {
    polling("mpi-polling", &[], true);
}

/// `full` unwinds every call: nothing folds, the same report.
#[test]
fn polling_with_full_unwinding_counts_the_same() {
    polling("mpi-polling-full", &[("WMHCCT_UNWIND", "full")], true);
}

/// Without stacks any repeat folds; the totals stay exact.
#[test]
fn polling_without_stacks_keeps_exact_totals() {
    polling("mpi-polling-none", &[("WMHCCT_UNWIND", "none")], false);
}

fn polling(name: &str, env: &[(&str, &str)], stacks: bool) {
    let (plain, r) = run_job(name, ("mpicc", "mpi_polling.c", &["-pthread"]), env);
    let tests = ROUNDS * (NA + NB) + NC + NH;
    assert!(
        plain.stdout.contains(&format!(
            "{P} ranks, {} tests",
            ROUNDS * (NA + NB) + NC + NT + NH
        )),
        "{}",
        plain.describe()
    );

    assert_eq!(total_count(&r, "MPI_Test"), P * tests);
    assert_eq!(total_count(&r, "MPI_Testany"), P * NT);
    assert_eq!(total_count(&r, "MPI_Send"), P * 2);
    assert_eq!(total_count(&r, "MPI_Wait"), P * 2);
    // The job's MPI calls over time add up to its calls.
    let over_time: u64 = r["timeline"]["mpi_events"]
        .as_array()
        .expect("a timeline")
        .iter()
        .map(u64_of)
        .sum();
    let calls: u64 = r["totals"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| k.starts_with("MPI_"))
        .map(|(_, v)| u64_of(&v["count"]))
        .sum();
    assert_eq!(over_time, calls, "{}", r["timeline"]);
    if !stacks {
        return;
    }
    for (caller, n) in [("from_a", P * ROUNDS * NA), ("from_b", P * ROUNDS * NB)] {
        let c = context_with(&r, "MPI_Test", caller);
        assert_eq!(c["count"], n, "{caller}: {c}");
        assert_eq!(c["count_err"], 0, "{caller}: {c}");
        assert_eq!(c["per_rank_count"]["min"], n / P, "{caller}: {c}");
        assert!(frame_index(c, "poll_n").is_some(), "{caller}: {c}");
    }
    let t = context_with(&r, "MPI_Test", "poll_thread");
    assert_eq!(t["count"], P * NH, "{t}");
    let any = context_with(&r, "MPI_Testany", "test_any");
    assert_eq!(any["count"], P * NT, "{any}");
    let cycled = contexts_with(&r, "MPI_Test", "cycle_sites");
    assert_eq!(cycled.len(), 6, "{}", summary(&r));
    for c in cycled {
        assert_eq!(c["count"], P * NC / 6, "{c}");
    }
    // No other context of these calls: each call went to its own.
    assert_eq!(
        contexts_with(&r, "MPI_Test", "main").len(),
        8,
        "{}",
        summary(&r)
    );
    assert_eq!(contexts_with(&r, "MPI_Testany", "main").len(), 1);
    // Every call's stack counts as captured, the folded ones as reused
    // (but for the thread's, whose statistics it takes with it after the
    // profile).
    let u = &r["unwind"];
    assert!(
        u64_of(&u["events"]) >= P * (ROUNDS * (NA + NB) + NC + NT),
        "{u}"
    );
}

/// Fortran's `MPI_TEST` from two subroutines in turn and `MPI_TESTANY`
/// (the Fortran wrappers, another path into the tracer): every call counted
/// in its own context.
#[test]
fn fortran_polling_calls_are_all_counted_in_their_contexts() {
    const ROUNDS: u64 = 30;
    const NA: u64 = 500;
    const NB: u64 = 250;
    const NT: u64 = 700;
    let (plain, r) = run_job("mpi-polling-f", ("mpif90", "mpi_polling.f90", &[]), &[]);
    assert!(
        plain.stdout.contains(&format!(
            "mpi_polling_f: {P} ranks, {} tests",
            ROUNDS * (NA + NB) + NT
        )),
        "{}",
        plain.describe()
    );
    assert_eq!(total_count(&r, "MPI_Test"), P * ROUNDS * (NA + NB));
    assert_eq!(total_count(&r, "MPI_Testany"), P * NT);
    for (caller, n) in [("poll_a_", P * ROUNDS * NA), ("poll_b_", P * ROUNDS * NB)] {
        let c = context_with(&r, "MPI_Test", caller);
        assert_eq!(c["count"], n, "{caller}: {c}");
        assert_eq!(c["count_err"], 0, "{caller}: {c}");
    }
    let any = context_with(&r, "MPI_Testany", "poll_any_");
    assert_eq!(any["count"], P * NT, "{any}");
    assert_eq!(
        contexts_with(&r, "MPI_Test", "mpi_polling_f").len(),
        2,
        "{}",
        summary(&r)
    );
}

/// The program (compiler, source, flags) on `P` ranks without and with the
/// tracer (`env`): the same output and exit code; the untraced run's output
/// and the report.
fn run_job(
    name: &str,
    (compiler, source, flags): (&str, &str, &[&str]),
    env: &[(&str, &str)],
) -> (Output, serde_json::Value) {
    let dir = WorkDir::new(name);
    let exe = mpi_compile(compiler, source, &dir.path, flags);
    let report = dir.join("polling.h5");
    let plain = untraced_then_traced(
        Launcher::OpenMpi,
        P as u32,
        &exe,
        &[],
        &dir.path,
        &report,
        env,
    );
    (plain, report_json(&report))
}
