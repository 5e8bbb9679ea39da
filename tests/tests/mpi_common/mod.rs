//! Shared by the MPI end-to-end tests (`mpi_*.rs`): compile with the MPI
//! compiler wrappers and run under `mpirun` (OpenMPI, oversubscribed, root
//! allowed), with or without `libwmhcct.so`, with a time limit.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
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

/// The MPI launchers the tests run.
#[derive(Clone, Copy)]
pub enum Launcher {
    /// Open MPI's `mpirun -np <np> --oversubscribe [-x K=V…]`, root allowed.
    OpenMpi,
    /// MPICH's `mpiexec.mpich -n <np> [-genv K V…]` (hydra), installed
    /// beside Open MPI by scripts/setup.sh.
    Mpich,
}

/// `exe args` on `np` ranks started by `launcher` in `dir`, with
/// `LD_PRELOAD=libwmhcct.so`, `WMHCCT_OUT=<report>` and `env` given to every
/// rank (`env` may set those two as well). `report: None` runs the program
/// without the tracer.
pub fn launch(
    launcher: Launcher,
    np: u32,
    exe: &Path,
    args: &[&str],
    dir: &Path,
    report: Option<&Path>,
    env: &[(&str, &str)],
) -> Output {
    let np = np.to_string();
    let mut c = match launcher {
        Launcher::OpenMpi => {
            let mut c = command("mpirun", &["-np", np.as_str(), "--oversubscribe"], dir);
            c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
            c
        }
        Launcher::Mpich => command("mpiexec.mpich", &["-n", np.as_str()], dir),
    };
    if let Some(r) = report {
        let lib = lib().display().to_string();
        let out = r.display().to_string();
        let tracer = [("LD_PRELOAD", lib.as_str()), ("WMHCCT_OUT", out.as_str())];
        let own = tracer
            .iter()
            .filter(|(k, _)| env.iter().all(|(e, _)| e != k));
        for (k, v) in own.chain(env) {
            match launcher {
                Launcher::OpenMpi => c.arg("-x").arg(format!("{k}={v}")),
                Launcher::Mpich => c.arg("-genv").arg(k).arg(v),
            };
        }
    }
    c.arg(exe).args(args);
    let out = run_cmd(&mut c, MPI_TIMEOUT);
    if matches!(launcher, Launcher::Mpich) && out.code == 128 + SIGPIPE {
        // MPICH's hydra (mpiexec.mpich, untraced) now and then dies of
        // SIGPIPE when processes that never call MPI_Init all end at once
        // (seen in CI on the untraced reference run of a task farm): its
        // own race, not the program's. Once more.
        eprintln!("mpiexec.mpich died of SIGPIPE; running it once more");
        return run_cmd(&mut c, MPI_TIMEOUT);
    }
    out
}

/// SIGPIPE's number on Linux.
const SIGPIPE: i32 = 13;

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

/// `exe args` on `np` ranks started by `launcher` in `dir` without the
/// tracer, which must succeed, then with it (`report`, `env`), which must
/// match it ([`assert_same_as_untraced`]). Returns the untraced run.
pub fn untraced_then_traced(
    launcher: Launcher,
    np: u32,
    exe: &Path,
    args: &[&str],
    dir: &Path,
    report: &Path,
    env: &[(&str, &str)],
) -> Output {
    let plain = launch(launcher, np, exe, args, dir, None, &[]);
    assert_eq!(plain.code, 0, "without the tracer: {}", plain.describe());
    let traced = launch(launcher, np, exe, args, dir, Some(report), env);
    assert_same_as_untraced(&plain, &traced, report);
    plain
}

/// Ranks of the pattern jobs (`tests/programs/mpi_pattern*`).
pub const PATTERN_RANKS: u64 = 4;
/// Their `K` (the programs' default).
pub const PATTERN_K: u64 = 100;

/// `wmhcct merge <spill> -o <merged>`, which must succeed.
pub fn merge(spill: &Path, merged: &Path, dir: &Path) {
    let (spill, merged) = (spill.to_str().unwrap(), merged.to_str().unwrap());
    let out = run_cmd(
        &mut command(bin(), &["merge", spill, "-o", merged], dir),
        TIMEOUT,
    );
    assert_eq!(out.code, 0, "{}", out.describe());
}

/// `wmhcct merge <spill> -o <report> [extra…]` in `dir`, which must leave
/// out the one profile `left_out` as of an earlier launch and merge
/// `merged` profiles, one per rank, saying both and nothing else.
pub fn merge_leaving_out(
    spill: &Path,
    report: &Path,
    dir: &Path,
    extra: &[&str],
    left_out: &str,
    merged: usize,
) {
    let (s, o) = (spill.to_str().unwrap(), report.to_str().unwrap());
    let mut c = command(bin(), &["merge", s, "-o", o], dir);
    let out = run_cmd(c.args(extra), TIMEOUT);
    assert_eq!(out.code, 0, "{}", out.describe());
    assert_eq!(
        out.stderr,
        format!(
            "wmhcct: warning: {s}: leaving out 1 profile(s) of an earlier launch than its newest ({left_out}); name them to merge them\n\
             wmhcct: merged {merged} profile(s) of {merged} rank(s) into {o}\n"
        )
    );
}

/// The first context of allocator `kind` whose stack goes through `func`.
pub fn context<'a>(r: &'a Value, func: &str, kind: &str) -> Option<&'a Value> {
    contexts_with(r, kind, func).into_iter().next()
}

/// The report of a [`PATTERN_RANKS`]-rank job of a pattern program (see
/// `tests/programs/mpi_pattern.c`), exact to the call and the byte.
pub fn check_pattern(r: &Value, alloc_kind: &str, size_a: u64, size_b: u64) {
    assert_eq!(r["ranks"], PATTERN_RANKS, "{}", r["ranks"]);
    let a = context(r, "ctx_a", alloc_kind).unwrap_or_else(|| {
        panic!(
            "no context A among {} contexts",
            r["contexts"].as_array().map_or(0, |a| a.len())
        )
    });
    // Σ (r+1)·K over 4 ranks = 10 K.
    assert_eq!(a["count"], PATTERN_K * (1 + 2 + 3 + 4), "A: {a}");
    assert_eq!(a["bytes"], PATTERN_K * 10 * size_a, "A: {a}");
    assert_eq!(a["per_rank_count"]["min"], PATTERN_K, "A: {a}");
    assert_eq!(a["per_rank_count"]["max"], 4 * PATTERN_K, "A: {a}");
    assert_eq!(a["per_rank_count"]["max_rank"], 3, "A: {a}");
    assert_eq!(
        a["per_rank_count"]["mean"].as_f64().unwrap(),
        2.5 * PATTERN_K as f64,
        "A: {a}"
    );
    let b = context(r, "ctx_b", alloc_kind).unwrap_or_else(|| panic!("no context B"));
    assert_eq!(b["count"], PATTERN_K * PATTERN_RANKS, "B: {b}");
    assert_eq!(b["bytes"], PATTERN_K * PATTERN_RANKS * size_b, "B: {b}");
    let t = &r["totals"];
    assert_eq!(t["MPI_Sendrecv"]["count"], PATTERN_RANKS);
    assert_eq!(t["MPI_Sendrecv"]["bytes"], PATTERN_RANKS * 1000 * 8);
    assert_eq!(t["MPI_Bcast"]["count"], PATTERN_RANKS);
    assert_eq!(t["MPI_Bcast"]["bytes"], PATTERN_RANKS * 100 * 4);
    assert_eq!(t["MPI_Allreduce"]["count"], PATTERN_RANKS);
    assert_eq!(t["MPI_Allreduce"]["bytes"], PATTERN_RANKS * 8);
    assert_eq!(t["MPI_Barrier"]["count"], PATTERN_RANKS);
    assert_eq!(
        t["MPI_Send"]["count"], 0,
        "the tracer's own traffic is not the program's"
    );
    let sr = r["contexts"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["kind"] == "MPI_Sendrecv"))
        .unwrap_or_else(|| panic!("no MPI_Sendrecv context"));
    assert_eq!(sr["count"], PATTERN_RANKS);
    // Exact per-rank scalars.
    let ranks = r["ranks_detail"].as_array().expect("ranks_detail");
    assert_eq!(ranks.len() as u64, PATTERN_RANKS);
    // Each block of A and B is freed before the next allocation: every one
    // a temporary allocation, summed over the ranks like the rest.
    assert_eq!(a["temporary"], a["count"], "A: {a}");
    assert_eq!(b["temporary"], b["count"], "B: {b}");
    let job = u64_of(&r["heap"]["temporary_count"]);
    let per_rank: u64 = ranks
        .iter()
        .map(|x| u64_of(&x["heap"]["temporary_count"]))
        .sum();
    assert_eq!(job, per_rank, "the job's temporaries are its ranks'");
    // The size classes of the whole job: A's 64-byte and B's 256-byte
    // blocks of every rank among them.
    let class = |min: u64| {
        r["size_classes"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["min"] == min))
            .map_or(0, |c| u64_of(&c["count"]))
    };
    assert!(class(64) >= PATTERN_K * 10, "{}", r["size_classes"]);
    assert!(
        class(256) >= PATTERN_K * PATTERN_RANKS,
        "{}",
        r["size_classes"]
    );
    assert!(job >= PATTERN_K * (10 + PATTERN_RANKS), "{job} temporaries");
    // Every rank read its resident memory, whichever path took its
    // profile (MPI_Finalize in C, C++ or Fortran, a launcher's task at
    // exit, a spill file merged later), and the job's is their sum.
    let mut peaks = 0;
    for x in ranks {
        let res = &x["resident"];
        let peak = u64_of(&res["peak_bytes"]);
        assert!(
            peak >= u64_of(&res["tracer_peak_bytes"]) && u64_of(&res["tracer_peak_bytes"]) > 0,
            "rank {}: {res}",
            x["rank"]
        );
        assert!(u64_of(&res["end_bytes"]) > 0, "rank {}: {res}", x["rank"]);
        peaks += peak;
    }
    assert_eq!(
        u64_of(&r["resident"]["peak_bytes"]),
        peaks,
        "{}",
        r["resident"]
    );
}
