//! Every interposed MPI call kind is counted, with its bytes, exactly:
//! tests/programs/mpi_calls.c makes each call a known number of times with
//! known sizes on 4 ranks; the job report's `totals` (keyed by C name: count
//! = calls, bytes = bytes sent, or the receive buffer for Recv/Irecv/Scatter(v)) must
//! match the table below. The tracer's own reduction traffic (a duplicated
//! communicator, sends and receives up a binomial tree, broadcasts at init)
//! must not appear. MPI_Alloc_mem/MPI_Free_mem are also allocations.

mod mpi_common;

use std::path::PathBuf;

use mpi_common::*;
use wmhcct_e2e::*;

const P: u64 = 4;

/// (C name, calls per rank, bytes per rank as a function of the rank).
type Row = (&'static str, u64, fn(u64) -> u64);

fn expected() -> Vec<Row> {
    const I: u64 = 4; // int
    const D: u64 = 8; // double
    vec![
        ("MPI_Send", 1, |_| 10 * I),
        ("MPI_Recv", 3, |_| 3 * 10 * I),
        ("MPI_Isend", 5, |_| 5 * 20 * D),
        ("MPI_Irecv", 6, |_| 6 * 20 * D),
        ("MPI_Sendrecv", 1, |_| 1000 * D),
        ("MPI_Ssend", 1, |_| 10 * I),
        ("MPI_Bsend", 1, |_| 10 * I),
        ("MPI_Rsend", 1, |_| 20 * D),
        ("MPI_Wait", 4, |_| 0),
        ("MPI_Waitall", 2, |_| 0),
        ("MPI_Waitany", 2, |_| 0),
        ("MPI_Waitsome", 1, |_| 0),
        ("MPI_Test", 3, |_| 0),
        ("MPI_Testall", 3, |_| 0),
        ("MPI_Testany", 3, |_| 0),
        ("MPI_Testsome", 3, |_| 0),
        ("MPI_Barrier", 2, |_| 0),
        ("MPI_Bcast", 1, |_| 100 * I),
        ("MPI_Reduce", 1, |_| 7 * D),
        ("MPI_Allreduce", 1, |_| 3 * I),
        ("MPI_Gather", 1, |_| 5 * I),
        ("MPI_Gatherv", 1, |r| (r + 1) * I),
        ("MPI_Scatter", 1, |_| 6 * I),
        ("MPI_Scatterv", 1, |r| (r + 1) * D),
        ("MPI_Allgather", 1, |_| 4 * D),
        ("MPI_Allgatherv", 1, |r| (r + 2) * I),
        ("MPI_Alltoall", 1, |_| 2 * I * P),
        ("MPI_Alltoallv", 1, |_| (1..=P).sum::<u64>() * I),
        ("MPI_Reduce_scatter", 1, |_| (1..=P).sum::<u64>() * I),
        ("MPI_Scan", 1, |_| 9 * D),
        ("MPI_Alloc_mem", 2, |_| 2 * 4096),
        // As a free: the bytes released (until 2026-11-27 the JSON kept
        // the MPI call's row, 0 bytes, under the same name).
        ("MPI_Free_mem", 2, |_| 2 * 4096),
    ]
}

/// tests/programs/mpi_calls.c built and run traced on `P` ranks with `env`
/// in a work directory named `name`; the job is clean. Returns the
/// directory (removed when dropped after a pass), the report and the run.
fn calls_job(name: &str, env: &[(&str, &str)]) -> (WorkDir, PathBuf, Output) {
    let dir = WorkDir::new(name);
    let exe = mpi_compile("mpicc", "mpi_calls.c", &dir.path, &[]);
    let report = dir.join("calls.h5");
    let out = launch(
        Launcher::OpenMpi,
        P as u32,
        &exe,
        &[],
        &dir.path,
        Some(&report),
        env,
    );
    assert_clean_job(&out, &report);
    (dir, report, out)
}

#[test]
fn every_mpi_call_kind_is_counted_exactly() {
    let (dir, report, out) = calls_job("mpi-calls", &[]);
    assert!(
        out.stdout.contains(&format!("mpi_calls done on {P} ranks")),
        "{}",
        out.describe()
    );
    let r = report_json(&report);
    assert_eq!(r["ranks"], P);
    let mut wrong = Vec::new();
    let table = expected();
    assert_eq!(table.len(), 32, "one row per interposed call kind");
    for (name, calls, bytes) in &table {
        let want = (calls * P, (0..P).map(bytes).sum::<u64>());
        let got = (total_count(&r, name), total_bytes(&r, name));
        if got != want {
            wrong.push(format!(
                "{name}: got {got:?}, want (count, bytes) = {want:?}"
            ));
        }
        // Per rank, too (ranks_detail keeps each rank's exact totals).
        for d in r["ranks_detail"].as_array().unwrap() {
            let rank = u64_of(&d["rank"]);
            let got = (
                u64_of(&d["totals"][name]["count"]),
                u64_of(&d["totals"][name]["bytes"]),
            );
            if got != (*calls, bytes(rank)) {
                wrong.push(format!(
                    "rank {rank} {name}: got {got:?}, want {:?}",
                    (calls, bytes(rank))
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "wrong MPI totals:\n{}", wrong.join("\n"));
    // The text's table lists each function once.
    let text = cli_out(&dir.path, &["report", report.to_str().unwrap()]);
    for name in ["MPI_Alloc_mem", "MPI_Free_mem"] {
        let rows: Vec<&str> = text.lines().filter(|l| l.starts_with(name)).collect();
        assert_eq!(rows.len(), 1, "{name}: {rows:?}");
    }

    // MPI calls have contexts in the MPI tree, named by the calling function.
    for (name, func) in [
        ("MPI_Send", "point_to_point"),
        ("MPI_Waitsome", "nonblocking"),
        ("MPI_Reduce_scatter", "collectives"),
    ] {
        let c = contexts_with(&r, name, func);
        assert!(!c.is_empty(), "no {name} context in {func}");
    }
    // MPI_Alloc_mem is an allocation: two call sites in alloc_mem_ctx, each
    // 4 blocks of 4096 bytes over the job, all freed by MPI_Free_mem. Each
    // site is a context of the allocation tree and one of the MPI tree.
    let am = contexts_with(&r, "MPI_Alloc_mem", "alloc_mem_ctx");
    assert_eq!(am.len(), 4, "MPI_Alloc_mem contexts: {}", summary(&r));
    for c in &am {
        assert_eq!(c["count"], P, "{c}");
        assert_eq!(c["bytes"], P * 4096, "{c}");
        assert_eq!(c["leaked_bytes"], 0, "freed by MPI_Free_mem: {c}");
    }
    assert!(
        am.iter().any(|c| u64_of(&c["peak_live_bytes"]) > 0),
        "the allocation-tree contexts hold live bytes: {}",
        summary(&r)
    );
    let fm = contexts_with(&r, "MPI_Free_mem", "alloc_mem_ctx");
    assert!(!fm.is_empty(), "MPI_Free_mem contexts: {}", summary(&r));
    for c in &fm {
        assert_eq!(c["count"], P, "{c}");
    }
    // The MPI library's own malloc/free of those blocks belong to the
    // MPI_Alloc_mem/MPI_Free_mem calls: no free of an unknown pointer.
    assert_eq!(r["heap"]["unknown_frees"], 0, "{}", r["heap"]);
}

/// Under `WMHCCT_UNWIND=fp` an MPI call's stack is taken from inside the
/// tracer's wrapper: the tracer's own frames, built without frame pointers,
/// are left by their CFI, and the program's frame-pointer chain goes on from
/// there (`unwinder/src/fp.rs`, `leave_skip`). Until 2026-11-28 the walk
/// followed frame pointers from the capture point: right only while
/// `.cargo/config.toml` forced frame pointers on the tracer, and the
/// profile-guided build (`scripts/pgo.sh`, whose RUSTFLAGS replaced the
/// config's flags) had none, so every MPI context in this mode was
/// `(no frames)`.
#[test]
fn mpi_calls_keep_their_callers_under_frame_pointer_unwinding() {
    let (_dir, report, _) = calls_job("mpi-calls-fp", &[("WMHCCT_UNWIND", "fp")]);
    let r = report_json(&report);
    assert_eq!(r["config"]["unwind"], "fp");
    for (name, func) in [
        ("MPI_Send", "point_to_point"),
        ("MPI_Waitsome", "nonblocking"),
        ("MPI_Reduce_scatter", "collectives"),
        ("MPI_Alloc_mem", "alloc_mem_ctx"),
    ] {
        let c = contexts_with(&r, name, func);
        assert!(
            !c.is_empty(),
            "no {name} context in {func}: {}",
            summary(&r)
        );
        for c in c {
            let names = stack_names(c);
            assert!(
                names.iter().any(|n| n == "main"),
                "{name}: a stack down to main: {names:?}"
            );
        }
    }
}
