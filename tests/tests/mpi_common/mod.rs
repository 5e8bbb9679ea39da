//! Shared by the MPI end-to-end tests (`mpi_*.rs`): compile with the MPI
//! compiler wrappers and run under `mpirun` (OpenMPI, oversubscribed, root
//! allowed), with or without `libwmhcct.so`, with a time limit.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use wmhcct_e2e::*;

/// Time limit of one `mpirun`: a hang is a failure.
pub const MPI_TIMEOUT: Duration = Duration::from_secs(90);

/// Compile `tests/programs/<src>` with `compiler` (mpicc, h5pcc, …) into
/// `dir`; `extra` goes after the source (libraries).
pub fn mpi_compile(compiler: &str, src: &str, dir: &Path, extra: &[&str]) -> PathBuf {
    let source = root().join("tests/programs").join(src);
    let exe = dir.join(Path::new(src).file_stem().unwrap());
    let mut c = command(
        compiler,
        &["-g", "-O1", "-fno-omit-frame-pointer", "-o"],
        dir,
    );
    c.arg(&exe).arg(&source).args(extra);
    let out = run_cmd(&mut c, TIMEOUT);
    assert_eq!(
        out.code,
        0,
        "{compiler} {src} (run scripts/setup.sh):\n{}",
        out.describe()
    );
    exe
}

/// `mpirun -np <np> --oversubscribe [-x LD_PRELOAD=libwmhcct.so -x
/// WMHCCT_OUT=<report> -x K=V…] exe args` in `dir`. `report: None` runs the
/// program without the tracer.
pub fn mpirun(
    np: u32,
    exe: &Path,
    args: &[&str],
    dir: &Path,
    report: Option<&Path>,
    env: &[(&str, &str)],
) -> Output {
    let np = np.to_string();
    let mut c = command("mpirun", &["-np", np.as_str(), "--oversubscribe"], dir);
    c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    if let Some(r) = report {
        c.arg("-x")
            .arg(format!("LD_PRELOAD={}", lib().display()))
            .arg("-x")
            .arg(format!("WMHCCT_OUT={}", r.display()));
        for (k, v) in env {
            c.arg("-x").arg(format!("{k}={v}"));
        }
    }
    c.arg(exe).args(args);
    run_cmd(&mut c, MPI_TIMEOUT)
}

/// A traced job that finished cleanly: exit 0, one closing `wmhcct:` line
/// (rank 0's) naming the report, no spill directory, and the report exists.
pub fn assert_clean_job(out: &Output, report: &Path) {
    assert_eq!(out.code, 0, "{}", out.describe());
    let lines = tracer_lines(&out.stderr);
    assert_eq!(
        lines.len(),
        1,
        "exactly one closing line, from rank 0: {}",
        out.describe()
    );
    assert!(
        lines[0].contains(report.to_string_lossy().as_ref()),
        "{}",
        lines[0]
    );
    let spill = PathBuf::from(format!("{}.spill", report.display()));
    assert!(!spill.exists(), "no spill files after a clean run");
    assert!(report.is_file(), "no report at {}", report.display());
}

/// A traced job that finished cleanly ([`assert_clean_job`]) with the exit
/// code, stdout and stderr of the same job without the tracer, apart from
/// rank 0's closing line.
pub fn assert_same_as_untraced(plain: &Output, traced: &Output, report: &Path) {
    assert_clean_job(traced, report);
    assert_eq!(traced.code, plain.code);
    assert_eq!(traced.stdout, plain.stdout, "stdout changed by the tracer");
    assert_eq!(
        without_closing_line(&traced.stderr, report),
        plain.stderr,
        "stderr changed by the tracer beyond the closing line"
    );
}
