//! The process's resident memory in the report (VmHWM, VmRSS, the tracer's
//! own allocations): tests/programs/resident.c maps and touches memory that
//! is not heap, so the resident peak is far above the heap's peak and the
//! resident size at the end far below the resident peak. Single process
//! and a 4-rank Open MPI job (rank r maps (r+1)·16 MiB).

mod mpi_common;

use mpi_common::*;
use wmhcct_e2e::*;

const MIB: u64 = 1 << 20;

/// `(rank, MiB mapped, VmHWM in bytes)` from the program's lines.
fn printed(stdout: &str) -> Vec<(u64, u64, u64)> {
    stdout
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                ["rank", r, "mapped", m, "MiB", "hwm_kib", k] => Some((
                    r.parse().ok()?,
                    m.parse().ok()?,
                    k.parse::<u64>().ok()? * 1024,
                )),
                _ => None,
            }
        })
        .collect()
}

/// The `resident:` line of `wmhcct report`, and the whole text.
fn resident_line(w: &WorkDir, h5: &std::path::Path) -> (String, String) {
    let text = cli_out(&w.path, &["report", h5.to_str().unwrap()]);
    let line = text
        .lines()
        .find(|l| l.starts_with("resident:"))
        .unwrap_or_else(|| panic!("no resident line:\n{text}"))
        .to_string();
    (line, text)
}

#[test]
fn a_process_resident_peak_counts_memory_that_is_not_heap() {
    let w = WorkDir::new("resident-one");
    let exe = compile("resident.c", &w.path, Opt::Release, &[]);
    let h5 = w.join("one.h5");
    let out = run_traced(&exe, &["48"], &w.path, &h5, &[]);
    assert_clean_stderr(&out, &h5);
    let lines = printed(&out.stdout);
    let [(0, 48, hwm)] = lines.as_slice() else {
        panic!("{}", out.describe());
    };
    let r = report_json(&h5);
    let res = &r["resident"];
    let peak = u64_of(&res["peak_bytes"]);
    // Read at exit: what the program saw of its own peak, and not much
    // more (the tracer reads it before building the profile). The kernel's
    // counts are approximate (per-CPU counters, synced in batches of
    // pages), so one read may be a few pages below an earlier one.
    assert!(
        (hwm - MIB..hwm + 16 * MIB).contains(&peak),
        "resident peak {peak}, the program saw {hwm}"
    );
    assert!(peak >= 48 * MIB, "{res}");
    let end = u64_of(&res["end_bytes"]);
    assert!(
        end > 0 && end + 40 * MIB < peak,
        "unmapped before exit: {res}"
    );
    let tracer = u64_of(&res["tracer_peak_bytes"]);
    assert!(tracer > 0 && tracer < end, "{res}");
    // The heap never held more than a block.
    assert!(u64_of(&r["heap"]["peak_bytes"]) < MIB, "{}", r["heap"]);

    let (line, _) = resident_line(&w, &h5);
    assert!(
        line.contains("(VmHWM)")
            && line.contains(" at end")
            && line.contains("the tracer allocated up to")
            && line.contains("for itself"),
        "{line}"
    );

    // diff: the resident peaks of both runs, and their change.
    let h5b = w.join("two.h5");
    let out = run_traced(&exe, &["96"], &w.path, &h5b, &[]);
    assert_clean_stderr(&out, &h5b);
    let d = cli_out(
        &w.path,
        &["diff", h5.to_str().unwrap(), h5b.to_str().unwrap()],
    );
    let line = d
        .lines()
        .find(|l| l.starts_with("resident:"))
        .unwrap_or_else(|| panic!("no resident line:\n{d}"));
    assert!(line.contains("(VmHWM)"), "{line}");
    let dj: Value = serde_json::from_str(&cli_out(
        &w.path,
        &[
            "diff",
            "--json",
            h5.to_str().unwrap(),
            h5b.to_str().unwrap(),
        ],
    ))
    .unwrap();
    let (a, b) = (
        u64_of(&dj["a"]["resident_peak_bytes"]),
        u64_of(&dj["b"]["resident_peak_bytes"]),
    );
    assert_eq!(a, peak);
    assert!(b >= a + 40 * MIB, "A {a}, B {b}");
}

#[test]
fn a_jobs_ranks_each_have_their_resident_peak() {
    let w = WorkDir::new("resident-mpi");
    let exe = mpi_compile("mpicc", "resident.c", &w.path, &["-DWITH_MPI"]);
    let h5 = w.join("job.h5");
    let out = launch(Launcher::OpenMpi, 4, &exe, &["16"], &w.path, Some(&h5), &[]);
    assert_clean_job(&out, &h5);
    let mut lines = printed(&out.stdout);
    lines.sort();
    assert_eq!(lines.len(), 4, "{}", out.describe());
    let r = report_json(&h5);
    let ranks = r["ranks_detail"]
        .as_array()
        .unwrap_or_else(|| panic!("no ranks_detail: {}", summary(&r)));
    assert_eq!(ranks.len(), 4);
    let mut sum = 0;
    for (rank, mapped, hwm) in &lines {
        let s = ranks
            .iter()
            .find(|s| u64_of(&s["rank"]) == *rank)
            .unwrap_or_else(|| panic!("no summary of rank {rank}"));
        let res = &s["resident"];
        let peak = u64_of(&res["peak_bytes"]);
        assert_eq!(*mapped, 16 * (rank + 1));
        assert!(
            (hwm - MIB..hwm + 16 * MIB).contains(&peak),
            "rank {rank}: resident peak {peak}, it saw {hwm}"
        );
        assert!(u64_of(&res["tracer_peak_bytes"]) > 0, "{res}");
        assert!(u64_of(&res["end_bytes"]) < peak, "{res}");
        sum += peak;
    }
    // The job's figures are the sums of its ranks'.
    assert_eq!(
        u64_of(&r["resident"]["peak_bytes"]),
        sum,
        "{}",
        r["resident"]
    );

    let (line, text) = resident_line(&w, &h5);
    // Rank 3 mapped the most.
    assert!(
        line.contains("on rank 3")
            && line.contains("at MPI_Finalize")
            && line.contains("the 4 ranks' peaks sum to"),
        "{line}"
    );
    assert!(
        text.contains("resident peak\n")
            || text
                .lines()
                .any(|l| l.trim_end().ends_with("resident peak")),
        "ranks table without the resident column:\n{text}"
    );
    let imbalance = text
        .lines()
        .find(|l| l.contains("imbalance over the 4 ranks"))
        .unwrap_or_else(|| panic!("no imbalance line:\n{text}"));
    assert!(imbalance.contains("resident peak"), "{imbalance}");
}
