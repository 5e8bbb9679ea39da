//! MPI_Comm_spawn: a traced job that starts another (the children inherit
//! the tracer and `WMHCCT_OUT`). Each job writes its own report: the
//! spawning one at `WMHCCT_OUT`, the spawned one next to it as
//! `<stem>-spawn-<pid of its rank 0>.h5`. Both used to write the same file:
//! one report survived, the other job's was lost with a confusing error.

mod mpi_common;

use mpi_common::*;
use wmhcct_e2e::*;

const K: u64 = 100;

#[test]
fn a_spawned_job_writes_its_own_report() {
    let work = WorkDir::new("mpi-spawn");
    let dir = work.path.clone();
    let exe = mpi_compile("mpicc", "mpi_spawn.c", &dir, &[]);
    let plain = launch(Launcher::OpenMpi, 2, &exe, &[], &dir, None, &[]);
    assert_eq!(plain.code, 0, "{}", plain.describe());
    let h5 = dir.join("job.h5");
    let traced = launch(Launcher::OpenMpi, 2, &exe, &[], &dir, Some(&h5), &[]);
    assert_eq!(traced.code, 0, "{}", traced.describe());
    assert_eq!(sorted_lines(&traced.stdout), sorted_lines(&plain.stdout));
    let spawned = files_named(&dir, "job-spawn-", ".h5");
    assert_eq!(spawned.len(), 1, "{}", traced.describe());
    // One closing line per job (its rank 0's), and nothing else.
    let lines = tracer_lines(&traced.stderr);
    assert_eq!(lines.len(), 2, "{}", traced.describe());
    for (report, work_fn, other_fn) in [
        (&h5, "parent_work", "child_work"),
        (&spawned[0], "child_work", "parent_work"),
    ] {
        let r = report_json(report);
        assert_eq!(r["ranks"], 2, "{}", report.display());
        let c = context_with(&r, "malloc", work_fn);
        assert_eq!(c["count"], 2 * K, "{}: {c}", report.display());
        assert!(
            contexts_with(&r, "malloc", other_fn).is_empty(),
            "{}: the other job's context",
            report.display()
        );
    }
}
