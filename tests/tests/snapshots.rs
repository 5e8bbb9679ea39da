//! Snapshots (`WMHCCT_SNAPSHOT`): a process killed without warning, by
//! SIGKILL as the kernel's OOM killer sends it, runs no handler and used to
//! leave nothing. Once its live heap reaches the threshold, and each time it
//! has grown by half since, the tracer leaves the profile as it stands in
//! the spill directory, under the name the process's own spill file would
//! have; `wmhcct report` and `wmhcct merge` read it. A normal end removes
//! it. tests/programs/grow_killed.c grows its heap in 1 MiB blocks from
//! `grow_mesh()` and is killed, or frees them and exits.

mod mpi_common;

use std::path::{Path, PathBuf};

use mpi_common::*;
use wmhcct_e2e::*;

const MIB: u64 = 1 << 20;

/// The files in `dir` (none if it does not exist), but hidden ones (a
/// rank's mark that it left the job's reduction, `.rank-<r>.left`).
fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    v.retain(|p| {
        !p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'))
    });
    v.sort();
    v
}

fn spill_of(h5: &Path) -> PathBuf {
    PathBuf::from(format!("{}.spill", h5.display()))
}

/// Live bytes of the context that allocates through `grow_mesh`.
fn grow_mesh_live(r: &Value) -> u64 {
    u64_of(&context_with(r, "malloc", "grow_mesh")["leaked_bytes"])
}

/// grow_killed.c grown to 24 MiB with snapshots from 4 MiB and killed by
/// SIGKILL (`mode`: `kill`, `kill-at-once`): its one snapshot file, which
/// holds more than two thirds of the 24 MiB. The next snapshot is due at
/// 3/2 of the live heap the last one saw, and the 24 MiB peak took none.
fn killed_at_24_mib(placement: &str, mode: &str) -> (WorkDir, PathBuf, Output, PathBuf, Value) {
    let w = WorkDir::new(&format!("snapshot-{mode}-{placement}"));
    let exe = compile("grow_killed.c", &w.path, Opt::Debug, &[]);
    let h5 = w.join("g.h5");
    let env = [("WMHCCT_SNAPSHOT", "4MiB"), ("WMHCCT_COLLECTOR", placement)];
    let out = run_traced(&exe, &["24", mode], &w.path, &h5, &env);
    assert_eq!(out.code, 128 + 9, "{}", out.describe());
    let files = files_in(&spill_of(&h5));
    assert_eq!(
        files.len(),
        1,
        "{placement}: one snapshot file, the latest: {files:?}"
    );
    let r = report_json(&files[0]);
    assert_eq!(r["reason"], "snapshot", "{placement}");
    let live = u64_of(&r["live_bytes"]);
    assert!(
        (16 * MIB + 1..=25 * MIB).contains(&live),
        "{placement}: live {live}"
    );
    let snapshot = files[0].clone();
    (w, h5, out, snapshot, r)
}

#[test]
fn a_process_killed_by_sigkill_leaves_its_last_snapshot() {
    for placement in ["inline", "thread"] {
        let (w, h5, out, snapshot, r) = killed_at_24_mib(placement, "kill");
        let files = [snapshot];
        assert_eq!(out.stdout, "grew to 24 MiB\n");
        assert!(
            tracer_lines(&out.stderr).is_empty(),
            "snapshots are silent: {}",
            out.describe()
        );
        assert!(!h5.exists());
        let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with("pid-") && name.ends_with(".wmprof"),
            "{name}"
        );
        // Inline, where each event is checked, it was taken at 20.25 MiB
        // (4, 6, 9, 13.5, 20.25); all of it from grow_mesh.
        let live = u64_of(&r["live_bytes"]);
        if placement == "inline" {
            assert!(live >= 81 * MIB / 4, "live {live}");
        }
        assert!(grow_mesh_live(&r) >= 16 * MIB, "{}", summary(&r));
        if placement == "thread" {
            // The recording threads' statistics came along.
            assert!(u64_of(&r["unwind"]["events"]) > 0, "{}", r["unwind"]);
        }
        let text = cli_out(&w.path, &["report", files[0].to_str().unwrap()]);
        assert!(
            text.contains("(a snapshot, taken when the heap reached a new high;"),
            "{text}"
        );
        // A spill directory: merged into a report like any other.
        let merged = w.join("merged.h5");
        let m = run_plain(
            bin(),
            &[
                "merge",
                spill_of(&h5).to_str().unwrap(),
                "-o",
                merged.to_str().unwrap(),
            ],
            &w.path,
        );
        assert_eq!(m.code, 0, "{}", m.describe());
        assert_eq!(grow_mesh_live(&report_json(&merged)), grow_mesh_live(&r));
    }
}

/// Killed right after its heap grew, with no pause for a collector thread
/// to catch up: with both placements the snapshot holds at least two
/// thirds of the 24 MiB reached. A thread whose allocations may have taken
/// the heap to the threshold applies the ring and takes the snapshot
/// itself, as inline; before 2026-11-27 the snapshot came when the
/// collector thread next applied the ring, up to 100 ms later, and a
/// process killed within that time left an older one, or none.
#[test]
fn a_process_killed_right_after_it_grew_leaves_the_snapshot() {
    for placement in ["inline", "thread"] {
        killed_at_24_mib(placement, "kill-at-once");
    }
}

#[test]
fn a_normal_end_removes_the_snapshots_and_zero_takes_none() {
    for placement in ["inline", "thread"] {
        let w = WorkDir::new(&format!("snapshot-end-{placement}"));
        let exe = compile("grow_killed.c", &w.path, Opt::Debug, &[]);
        let h5 = w.join("g.h5");
        let env = [("WMHCCT_SNAPSHOT", "4MiB"), ("WMHCCT_COLLECTOR", placement)];
        let out = run_traced(&exe, &["24", "exit"], &w.path, &h5, &env);
        assert_eq!(out.code, 0, "{}", out.describe());
        assert_clean_stderr(&out, &h5);
        assert!(h5.is_file());
        assert!(
            !spill_of(&h5).exists(),
            "{placement}: {:?}",
            files_in(&spill_of(&h5))
        );
        let r = report_json(&h5);
        assert_eq!(r["reason"], "exit");
        assert_eq!(u64_of(&r["peak_bytes"]) / MIB, 24);

        // WMHCCT_SNAPSHOT=0: none, so a killed process leaves nothing.
        let h5 = w.join("off.h5");
        let env = [("WMHCCT_SNAPSHOT", "0"), ("WMHCCT_COLLECTOR", placement)];
        let out = run_traced(&exe, &["24", "kill"], &w.path, &h5, &env);
        assert_eq!(out.code, 128 + 9, "{}", out.describe());
        assert!(!spill_of(&h5).exists() && !h5.exists());
    }
    // A spill directory that was there before stays, empty again.
    let w = WorkDir::new("snapshot-own-dir");
    let exe = compile("grow_killed.c", &w.path, Opt::Debug, &[]);
    let mine = w.join("my-spill");
    std::fs::create_dir_all(&mine).unwrap();
    let h5 = w.join("m.h5");
    let env = [
        ("WMHCCT_SNAPSHOT", "4MiB"),
        ("WMHCCT_COLLECTOR", "inline"),
        ("WMHCCT_SPILL_DIR", mine.to_str().unwrap()),
    ];
    let out = run_traced(&exe, &["24", "exit"], &w.path, &h5, &env);
    assert_eq!(out.code, 0, "{}", out.describe());
    assert!(
        mine.is_dir() && files_in(&mine).is_empty(),
        "{:?}",
        files_in(&mine)
    );
    let out = run_traced(&exe, &["24", "kill"], &w.path, &h5, &env);
    assert_eq!(out.code, 128 + 9, "{}", out.describe());
    assert_eq!(files_in(&mine).len(), 1, "the snapshot went there");
    // Below the default threshold (1 GiB) nothing is written either.
    let w = WorkDir::new("snapshot-default");
    let exe = compile("grow_killed.c", &w.path, Opt::Debug, &[]);
    let h5 = w.join("d.h5");
    let out = run_traced(&exe, &["24", "kill"], &w.path, &h5, &[]);
    assert_eq!(out.code, 128 + 9, "{}", out.describe());
    assert!(!spill_of(&h5).exists());
}

/// A job whose ranks both left snapshots in the spill directory, and which
/// ends normally: the report, and no spill directory. Rank 1 made it and
/// leaves `MPI_Finalize` first, while rank 0's snapshot is still there
/// (rank 0 writes the report); until 2026-11-27 only the rank that made
/// the directory tried to remove it, and the empty directory stayed.
#[test]
fn a_job_that_ends_normally_leaves_no_spill_directory() {
    let w = WorkDir::new("snapshot-mpi-end");
    let exe = mpi_compile("mpicc", "grow_killed.c", &w.path, &["-DWITH_MPI"]);
    let h5 = w.join("job.h5");
    let out = launch(
        Launcher::OpenMpi,
        2,
        &exe,
        &["8", "both"],
        &w.path,
        Some(&h5),
        &[("WMHCCT_SNAPSHOT", "4MiB")],
    );
    assert_eq!(out.code, 0, "{}", out.describe());
    assert_eq!(
        out.stdout.matches("grew to 8 MiB").count(),
        2,
        "{}",
        out.describe()
    );
    assert!(h5.is_file(), "{}", out.describe());
    assert!(
        !spill_of(&h5).exists(),
        "{:?}\n{}",
        files_in(&spill_of(&h5)),
        out.describe()
    );
    let r = report_json(&h5);
    assert_eq!(u64_of(&r["ranks"]), 2);
    assert!(u64_of(&r["peak_bytes"]) >= 8 * MIB, "{}", summary(&r));
}

/// An MPI job where rank 1 is killed by SIGKILL: mpirun ends the others
/// with SIGTERM, which leave their profiles; rank 1's last snapshot is its
/// file in the same spill directory, and the merged job report has its
/// heap.
#[test]
fn an_mpi_rank_killed_by_sigkill_is_in_the_merged_job() {
    let w = WorkDir::new("snapshot-mpi");
    let exe = mpi_compile("mpicc", "grow_killed.c", &w.path, &["-DWITH_MPI"]);
    let h5 = w.join("job.h5");
    let out = launch(
        Launcher::OpenMpi,
        2,
        &exe,
        &["24", "kill"],
        &w.path,
        Some(&h5),
        &[("WMHCCT_SNAPSHOT", "4MiB")],
    );
    assert_ne!(out.code, 0, "{}", out.describe());
    assert!(out.stdout.contains("grew to 24 MiB"), "{}", out.describe());
    let spill = spill_of(&h5);
    let names: Vec<String> = files_in(&spill)
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        ["rank-0.wmprof", "rank-1.wmprof"],
        "{}",
        out.describe()
    );
    let rank1 = report_json(&spill.join("rank-1.wmprof"));
    assert_eq!(rank1["reason"], "snapshot");
    assert!(grow_mesh_live(&rank1) >= 16 * MIB, "{}", summary(&rank1));
    let merged = w.join("merged.h5");
    merge(&spill, &merged, &w.path);
    let job = report_json(&merged);
    assert_eq!(u64_of(&job["ranks"]), 2);
    let reasons: Vec<&str> = job["ranks_detail"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["reason"].as_str().unwrap())
        .collect();
    assert!(reasons.contains(&"snapshot"), "{reasons:?}");
    let text = cli_out(&w.path, &["report", merged.to_str().unwrap()]);
    assert!(
        text.contains("rank 1 left only its last snapshot, taken at a new heap high"),
        "{text}"
    );
    // The duration line says so too, after rank 0's reason (sigterm).
    assert!(text.contains("; rank 1: snapshot)\n"), "{text}");
    assert!(grow_mesh_live(&job) >= 16 * MIB, "{}", summary(&job));
}
