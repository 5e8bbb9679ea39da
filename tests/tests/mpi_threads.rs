//! MPI_Init_thread(MPI_THREAD_MULTIPLE) with 3 threads per rank calling
//! MPI_Sendrecv and malloc concurrently (tests/programs/mpi_threads.c):
//! exact totals, no deadlock (a time limit), and the job's stdout and stderr
//! unchanged by the tracer apart from rank 0's single closing line.

mod mpi_common;

use mpi_common::*;
use wmhcct_e2e::*;

const P: u64 = 4;
const THREADS: u64 = 3;
const ITERS: u64 = 200;
const K: u64 = 20;

#[test]
fn thread_multiple_exact_totals_and_unchanged_output() {
    thread_multiple("mpi-threads", &[]);
}

/// The same with each rank's events handed to a collector thread: MPI calls
/// are recorded directly, after every allocation handed over before them.
#[test]
fn thread_multiple_with_collector_thread() {
    thread_multiple("mpi-threads-collector", &[("WMHCCT_COLLECTOR", "thread")]);
}

fn thread_multiple(name: &str, env: &[(&str, &str)]) {
    let dir = WorkDir::new(name);
    let exe = mpi_compile("mpicc", "mpi_threads.c", &dir.path, &["-pthread"]);
    let iters = ITERS.to_string();
    let report = dir.join("threads.h5");
    let plain = untraced_then_traced(
        Launcher::OpenMpi,
        P as u32,
        &exe,
        &[&iters],
        &dir.path,
        &report,
        env,
    );
    assert!(
        plain
            .stdout
            .contains(&format!("{P} ranks x {THREADS} threads x {ITERS} rounds")),
        "{}",
        plain.describe()
    );

    let r = report_json(&report);
    assert_eq!(r["ranks"], P);
    let calls = P * THREADS * ITERS;
    assert_eq!(total_count(&r, "MPI_Sendrecv"), calls);
    assert_eq!(total_bytes(&r, "MPI_Sendrecv"), calls * 100 * 4);
    // No other point-to-point traffic: the tracer's own is not counted.
    for k in ["MPI_Send", "MPI_Recv", "MPI_Bcast", "MPI_Barrier"] {
        assert_eq!(total_count(&r, k), 0, "{k}");
    }
    let sr = context_with(&r, "MPI_Sendrecv", "thr_exchange");
    assert_eq!(sr["count"], calls, "{sr}");
    assert_eq!(sr["per_rank_count"]["min"], THREADS * ITERS, "{sr}");
    assert_eq!(sr["per_rank_count"]["max"], THREADS * ITERS, "{sr}");
    let a = context_with(&r, "malloc", "thr_alloc");
    assert_eq!(a["count"], calls * K, "{a}");
    assert_eq!(a["count_err"], 0, "{a}");
    assert_eq!(a["bytes"], calls * K * 48, "{a}");
    assert_eq!(a["leaked_bytes"], 0, "{a}");
    for d in r["ranks_detail"].as_array().unwrap() {
        assert!(u64_of(&d["threads"]) > THREADS, "{d}");
        assert_eq!(d["totals"]["MPI_Sendrecv"]["count"], THREADS * ITERS);
    }
}
