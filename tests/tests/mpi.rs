//! MPI end-to-end tests: real OpenMPI runs with 4 ranks (oversubscribed) of
//! the pattern programs in tests/programs/, under libwmhcct.so, with
//! assertions on the job's single report.
//!
//! Pattern (K = 100): rank r allocates (r+1)·K blocks in context A (`ctx_a`)
//! and K blocks in context B (`ctx_b`); then one ring MPI_Sendrecv of 1000
//! doubles, an MPI_Bcast of 100 ints, an MPI_Allreduce of 1 double and an
//! MPI_Barrier per rank.

mod mpi_common;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use mpi_common::*;
use wmhcct_e2e::*;

const RANKS: u64 = PATTERN_RANKS;
const K: u64 = PATTERN_K;

/// A scratch directory, removed when the test passes (kept when it fails).
fn workdir(name: &str) -> WorkDir {
    WorkDir::new(&format!("mpi-{name}"))
}

/// A traced 4-rank run of `exe args` in `dir`, writing `report`.
fn traced(exe: &Path, args: &[&str], dir: &Path, report: &Path, env: &[(&str, &str)]) -> Output {
    launch(
        Launcher::OpenMpi,
        RANKS as u32,
        exe,
        args,
        dir,
        Some(report),
        env,
    )
}

/// `src` built with `compiler` and run traced on 4 ranks in a work
/// directory named `name`: its output has `"<said> on 4 ranks"`, and the job
/// is clean (exit 0, one closing line, rank 0's, naming the report, no spill
/// files). Returns the directory (removed when dropped after a pass) and the
/// report.
fn clean_job(name: &str, compiler: &str, src: &str, said: &str) -> (WorkDir, PathBuf) {
    let work = workdir(name);
    let dir = work.path.clone();
    let exe = mpi_compile(compiler, src, &dir, &[]);
    let h5 = dir.join("job.h5");
    let run = traced(&exe, &[], &dir, &h5, &[]);
    assert!(
        run.stdout.contains(&format!("{said} on {RANKS} ranks")),
        "{}",
        run.describe()
    );
    assert_clean_job(&run, &h5);
    (work, h5)
}

/// The pattern program's job, checked; `init`: how the MPI library's own
/// memory names the routine that allocated most of it, `MPI_Init` from C
/// and C++, `MPI_INIT` from Fortran (as the standard writes its bindings,
/// whichever of the library's many names for the routine the symbol table
/// gave its frame: until 2026-11-27 `mpi_init` here, `mpi_comm_split__`
/// or `MPI_Cart_sub_f08` in Quantum ESPRESSO's and CP2K's jobs).
fn run_pattern(compiler: &str, src: &str, init: &str) {
    let (_work, h5) = clean_job(src, compiler, src, "done");
    let r = report_json(&h5);
    check_pattern(&r, "malloc", 64, 256);
    let routines = r["mpi_own"]["live_bytes_by_routine"].as_object().unwrap();
    let inits: Vec<&String> = routines
        .keys()
        .filter(|k| k.eq_ignore_ascii_case("mpi_init"))
        .collect();
    assert_eq!(inits, [init], "{}", r["mpi_own"]);
}

#[test]
fn c_program_four_ranks() {
    run_pattern("mpicc", "mpi_pattern.c", "MPI_Init");
}

#[test]
fn cxx_program_four_ranks() {
    run_pattern("mpicxx", "mpi_pattern.cpp", "MPI_Init");
}

#[test]
fn fortran_mpif_h_four_ranks() {
    run_pattern("mpif90", "mpi_pattern_f77.f90", "MPI_INIT");
}

#[test]
fn fortran_mpi_f08_four_ranks() {
    run_pattern("mpif90", "mpi_pattern_f08.f90", "MPI_INIT");
}

/// One rank calls MPI_Abort: spill files exist and `wmhcct merge` turns them
/// into a report with those ranks' data.
#[test]
fn abort_leaves_mergeable_spill_files() {
    let work = workdir("abort");
    let dir = work.path.clone();
    let exe = mpi_compile("mpicc", "mpi_pattern.c", &dir, &[]);
    let h5 = dir.join("job.h5");
    let run = traced(&exe, &["100", "abort"], &dir, &h5, &[]);
    assert_ne!(run.code, 0);
    let spill = dir.join("job.h5.spill");
    let files: Vec<_> = std::fs::read_dir(&spill)
        .map(|d| d.flatten().collect())
        .unwrap_or_default();
    assert!(
        !files.is_empty(),
        "no spill files in {}: {}",
        spill.display(),
        run.stderr
    );
    let merged = dir.join("merged.h5");
    merge(&spill, &merged, &dir);
    let r = report_json(&merged);
    assert!(r["ranks"].as_u64().unwrap() >= 1);
    let a = context(&r, "ctx_a", "malloc").expect("context A survives in the spill");
    assert!(a["count"].as_u64().unwrap() >= K);
    // The text names the abort however many of the other ranks spilled in
    // time: `(ended by abort)`, `(ended by abort; rank 2: sigterm)`,
    // `(ended by sigterm; rank 1: abort)`.
    let text = cli_out(&dir, &["report", merged.to_str().unwrap(), "--top", "1"]);
    let duration = text.lines().find(|l| l.starts_with("duration:")).unwrap();
    assert!(duration.contains("abort"), "{text}");
}

/// A job merged from its spill directory whose ranks ended differently
/// (rank 0 in MPI_Finalize, rank 1 leaving `main` without it,
/// tests/programs/mpi_leave.c) says so in the text report's duration line,
/// as `ranks_detail[].reason` does in the JSON. Until 2026-11-27 the line
/// gave rank 0's reason alone, `(ended by finalize)`.
#[test]
fn a_merged_job_says_how_its_ranks_ended() {
    let work = workdir("ended-differently");
    let dir = work.path.clone();
    let exe = mpi_compile("mpicc", "mpi_leave.c", &dir, &[]);
    let h5 = dir.join("job.h5");
    let run = launch(Launcher::OpenMpi, 2, &exe, &["1"], &dir, Some(&h5), &[]);
    let merged = dir.join("merged.h5");
    merge(&dir.join("job.h5.spill"), &merged, &dir);
    let r = report_json(&merged);
    let reasons: Vec<&str> = r["ranks_detail"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons, ["finalize", "exit"], "{}", run.describe());
    let text = cli_out(&dir, &["report", merged.to_str().unwrap(), "--top", "1"]);
    let duration = text.lines().find(|l| l.starts_with("duration:")).unwrap();
    assert!(
        duration.ends_with(" s (ended by finalize; rank 1: exit)"),
        "{text}"
    );
    assert!(text.contains("\n           live at end "), "{text}");
}

/// The same into a stream (`WMHCCT_OUT=/dev/null`): each rank spills beside
/// its own default name, and the merge command its line gives writes a
/// file there, which works. Until 2026-11-27 the lines said `-o /dev/null`,
/// or rank 0's `/proc/<pid>/fd/100`, gone once the job ended.
#[test]
fn abort_into_a_stream_gives_merge_commands_that_write_files() {
    let work = workdir("abort-stream");
    let dir = work.path.clone();
    let exe = mpi_compile("mpicc", "mpi_pattern.c", &dir, &[]);
    let run = traced(&exe, &["100", "abort"], &dir, Path::new("/dev/null"), &[]);
    assert_ne!(run.code, 0);
    let hints: Vec<&str> = run
        .stderr
        .lines()
        .filter_map(|l| l.split_once("merge with: ").map(|(_, c)| c))
        .collect();
    assert!(!hints.is_empty(), "{}", run.describe());
    for hint in hints {
        let words: Vec<&str> = hint.split_whitespace().collect();
        let [_, "merge", spill, "-o", out] = words[..] else {
            panic!("{hint}")
        };
        assert!(
            !out.starts_with("/dev/") && !out.starts_with("/proc/"),
            "{hint}"
        );
        merge(Path::new(spill), Path::new(out), &dir);
        assert!(report_json(Path::new(out))["ranks"].as_u64().unwrap() >= 1);
    }
}

/// Several launches in one Slurm job (a batch script with two `srun` or
/// `mpirun` lines), without `WMHCCT_OUT`: the first writes the job's
/// report, `wmhcct-<job>.h5`; a later one whose name an earlier launch took
/// (its report, or its spill directory) writes `wmhcct-<job>-2.h5`, `-3`…,
/// where it used to replace the first report (and to spill beside an
/// earlier launch's files). The ranks see `SLURM_JOB_ID` as under `srun`.
#[test]
fn later_launches_of_a_slurm_job_keep_the_earlier_reports() {
    let work = workdir("slurm-steps");
    let dir = work.path.clone();
    let exe = mpi_compile("mpicc", "mpi_pattern.c", &dir, &[]);
    let preload = format!("LD_PRELOAD={}", lib().display());
    let np = RANKS.to_string();
    let run = |args: &[&str]| {
        let mut c = command("mpirun", &["-np", &np, "--oversubscribe"], &dir);
        c.args(["-x", &preload, "-x", "SLURM_JOB_ID=4242"])
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .env_remove("WMHCCT_OUT")
            .arg(&exe)
            .args(args);
        run_cmd(&mut c, MPI_TIMEOUT)
    };
    let first = dir.join("wmhcct-4242.h5");
    assert_clean_job(&run(&[]), &first);
    let aborted = run(&["100", "abort"]);
    assert_ne!(aborted.code, 0);
    let second = dir.join("wmhcct-4242-2.h5");
    assert!(
        aborted
            .stderr
            .contains(&format!("{}.spill", second.display())),
        "the aborted launch spills beside its own name: {}",
        aborted.describe()
    );
    let third = dir.join("wmhcct-4242-3.h5");
    assert_clean_job(&run(&[]), &third);
    for report in [&first, &third] {
        check_pattern(&report_json(report), "malloc", 64, 256);
    }
}

/// Exit without MPI_Finalize: every rank spills; the merge has all four.
#[test]
fn exit_without_finalize_leaves_spill_files() {
    without_finalize("noexit");
}

/// The same with `_exit` (no exit() handlers run): the tracer's `_exit`
/// spills first.
#[test]
fn underscore_exit_without_finalize_leaves_spill_files() {
    without_finalize("_exit");
}

fn without_finalize(mode: &str) {
    let work = workdir(mode);
    let dir = work.path.clone();
    let exe = mpi_compile("mpicc", "mpi_pattern.c", &dir, &[]);
    let h5 = dir.join("job.h5");
    let _ = traced(&exe, &["100", mode], &dir, &h5, &[]);
    let spill = dir.join("job.h5.spill");
    // Once the first rank is gone mpirun tears the others down; a rank
    // killed before its exit-time spill leaves nothing (and never a partial
    // file: spills are written under a temporary name and renamed).
    let all: Vec<String> = std::fs::read_dir(&spill)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    // A rank killed while writing leaves only its temporary file, which
    // `wmhcct merge` ignores; one that wrote its profile, also its hidden
    // mark that it left the reduction.
    let (names, partial): (Vec<String>, Vec<String>) = all
        .iter()
        .cloned()
        .partition(|n| n.starts_with("rank-") && n.ends_with(".wmprof"));
    assert!(
        !names.is_empty()
            && partial.iter().all(|n| {
                n.starts_with(".rank-") && (n.ends_with(".wmprof.tmp") || n.ends_with(".left"))
            }),
        "spill files in {}: {all:?}",
        spill.display()
    );
    if (names.len() as u64) < RANKS {
        eprintln!(
            "{mode}: {} of {RANKS} ranks spilled before mpirun's teardown",
            names.len()
        );
    }
    let merged = dir.join("merged.h5");
    merge(&spill, &merged, &dir);
    let r = report_json(&merged);
    assert_eq!(r["ranks"], names.len() as u64);
    // Exact for the ranks recovered: rank r allocated (r+1)·K times in A.
    let recovered: Vec<u64> = r["ranks_detail"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["rank"].as_u64().unwrap())
        .collect();
    let a = context(&r, "ctx_a", "malloc").unwrap();
    assert_eq!(
        a["count"],
        recovered.iter().map(|r| (r + 1) * K).sum::<u64>()
    );
}

/// The heuristic on a real MPI code (the bundled stencil demo, 4 ranks): every
/// stack is also unwound in full and compared. OpenMPI loads its plugins
/// during MPI_Init, after the first stacks were taken; a stack cut short at
/// such a plugin was once reused after the module table learned of it (97 %).
#[test]
fn heuristic_exact_on_the_mpi_stencil() {
    let work = workdir("stencil");
    let dir = work.path.clone();
    let exe = mpi_compile("mpicc", "mpi_stencil.c", &dir, &[]);
    let h5 = dir.join("job.h5");
    let run = traced(
        &exe,
        &["100", "128"],
        &dir,
        &h5,
        &[("WMHCCT_UNWIND", "second"), ("WMHCCT_VALIDATE", "1")],
    );
    assert_eq!(run.code, 0, "{}", run.describe());
    let r = report_json(&h5);
    let u = &r["unwind"];
    let validated = u["validated"].as_u64().unwrap();
    let correct = u["correct"].as_u64().unwrap();
    eprintln!("mpi_stencil, 4 ranks, second match: {correct} of {validated} stacks exact; {u}");
    assert!(validated > 10_000, "{u}");
    assert_eq!(correct, validated, "every validated stack exact: {u}");
    // Every stack whole: no walk failed, and each context reaches the
    // bottom of its thread's stack. (hwloc's plugin pulls libstdc++ in with
    // dlopen during MPI_Init, whose constructor allocates: that context was
    // one `??` frame and an unwind error per rank.)
    assert_eq!(u64_of(&u["errors"]), 0, "{u}");
    for c in contexts(&r) {
        let names = stack_names(c);
        let root = names.last().map(String::as_str).unwrap_or("");
        assert!(
            root == "_start" || root == "clone3",
            "a whole stack: {} {names:?}",
            c["kind"]
        );
    }
}

/// Ranks that wait in `MPI_Finalize` for a rank 3 s late wait in the
/// tracer's reduction without spinning on a core (it polls with short
/// sleeps): the job's processes use far less CPU time than the wait. Until
/// 2026-11-27 the reduction's blocking receive spun, about 1 s of CPU per
/// second waited. A mark that rank 1 left the reduction, put there by
/// another job that shares the spill directory, is not this job's: the
/// report still holds both ranks.
#[test]
fn ranks_waiting_in_finalize_do_not_spin() {
    let work = workdir("finalize-wait");
    let dir = work.path.clone();
    let exe = mpi_compile("mpicc", "mpi_leave.c", &dir, &[]);
    let h5 = dir.join("job.h5");
    let spill = dir.join("job.h5.spill");
    std::fs::create_dir_all(&spill).unwrap();
    std::fs::write(spill.join(".rank-1.left"), "pmix:another-job").unwrap();
    // bash's `times`: the user and system CPU time of its children.
    let script = format!(
        "mpirun --oversubscribe -np 2 -x LD_PRELOAD={} -x WMHCCT_OUT={} {} 1 late >/dev/null; times",
        lib().display(),
        h5.display(),
        exe.display()
    );
    let mut c = command("bash", &["-c", &script], &dir);
    c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    let out = run_cmd(&mut c, Duration::from_secs(120));
    assert_eq!(out.code, 0, "{}", out.describe());
    assert!(h5.is_file(), "{}", out.describe());
    let secs = |t: &str| -> f64 {
        let (m, s) = t.trim_end_matches('s').split_once('m').unwrap();
        m.parse::<f64>().unwrap() * 60.0 + s.parse::<f64>().unwrap()
    };
    let children = out.stdout.lines().last().unwrap();
    let cpu: f64 = children.split_whitespace().map(secs).sum();
    eprintln!("[mpi] ranks_waiting_in_finalize_do_not_spin: {cpu:.2} s of CPU for a 3 s wait ({children})");
    assert!(cpu < 2.0, "{cpu} s of CPU: {}", out.describe());
    let r = report_json(&h5);
    assert_eq!(
        u64_of(&r["ranks"]),
        2,
        "another job's mark: {}",
        out.describe()
    );
}

/// `leaked` is the program's leaks in the default mode as in exact mode: the
/// MPI library's state in contexts below the hotness threshold is the
/// library's too. Until 2026-11-27 it counted as leaked, so `--max
/// leaked=0` failed on MPI programs that free everything.
#[test]
fn leaked_leaves_out_the_mpi_state_below_the_hotness_threshold() {
    let work = workdir("leak-cold");
    let dir = work.path.clone();
    let exe = mpi_compile("mpicc", "mpi_leak.c", &dir, &[]);
    let leaked = |exact: &str| {
        let h5 = dir.join(format!("job-{exact}.h5"));
        let run = traced(&exe, &[], &dir, &h5, &[("WMHCCT_EXACT", exact)]);
        assert_clean_job(&run, &h5);
        let r = report_json(&h5);
        assert_eq!(u64_of(&r["heap"]["evicted_live_bytes"]), 0, "{}", r["heap"]);
        let h = h5.to_str().unwrap();
        let out = run_plain(bin(), &["report", h, "--json", "--max", "leaked=0"], &dir);
        assert_eq!(out.code, 3, "{}", out.describe());
        let v: Value = serde_json::from_str(&out.stdout).unwrap();
        (u64_of(&v["limits"][0]["value"]), r)
    };
    let (default, r) = leaked("0");
    let (exact, e) = leaked("1");
    // In exact mode every context is listed: the program's are the leaks.
    let program: u64 = contexts(&e)
        .iter()
        .filter(|c| c["inside_mpi"].is_null())
        .map(|c| u64_of(&c["leaked_bytes"]))
        .sum();
    assert_eq!(exact, program);
    // Rank r leaked r+1 blocks of 3000 bytes, rank 0's stdout its buffer.
    assert!((30_000..=30_000 + 65_536).contains(&exact), "{exact}");
    assert_eq!(
        default, exact,
        "mpi_own {} vs {}",
        r["mpi_own"], e["mpi_own"]
    );
}

/// The lists of a job's report are the program's: the MPI library's own
/// allocations (its state, live when the report is taken in MPI_Finalize,
/// before the library frees it) are summed in one line instead of heading
/// the lists, and `--mpi-internal` lists them, each context named by the
/// MPI call or the library thread that allocated it. Stacks hold no frame
/// of the tracer's own, and the text's end at `main`.
#[test]
fn the_lists_leave_out_the_mpi_librarys_own_allocations() {
    let (work, h5) = clean_job("leak", "mpicc", "mpi_leak.c", "leaked");
    let dir = work.path.clone();
    let r = report_json(&h5);
    // A job's limits on `peak` and `resident` hold its largest rank's
    // figure (what one rank needs), not the ranks' sum.
    let largest = |what: &str| {
        r["ranks_detail"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| u64_of(&d[what]["peak_bytes"]))
            .max()
            .unwrap()
    };
    assert!(
        largest("heap") < u64_of(&r["heap"]["peak_bytes"]),
        "{}",
        r["heap"]
    );
    let h = h5.to_str().unwrap();
    // `leaked` leaves out the MPI library's own state, live at
    // MPI_Finalize: what is left holds the program's 10 leaked blocks.
    let own = u64_of(&r["mpi_own"]["live_bytes"]);
    let leaked = u64_of(&r["heap"]["live_bytes"]) - own;
    assert!(own > 100_000 && leaked >= 10 * 3000, "{own} {leaked}");
    let out = run_plain(bin(), &["report", h, "--json", "--max", "leaked=0"], &dir);
    assert_eq!(out.code, 3, "{}", out.describe());
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(u64_of(&v["limits"][0]["value"]), leaked, "{}", v["limits"]);
    for what in ["heap", "resident"] {
        let figure = if what == "heap" { "peak" } else { what };
        let at = |bytes: u64| {
            let limit = format!("{figure}={bytes}");
            run_plain(bin(), &["report", h, "--max", &limit], &dir)
        };
        let held = at(largest(what));
        assert_eq!(held.code, 0, "{}", held.describe());
        let over = at(largest(what) - 1);
        assert_eq!(over.code, 3, "{}", over.describe());
        assert!(
            over.stderr
                .starts_with(&format!("wmhcct: 1 of 1 limits exceeded: {figure} ")),
            "{}",
            over.stderr
        );
    }
    // Rank r leaked r+1 blocks of 3000 bytes: 10 in all.
    let kept = context_with(&r, "malloc", "keep_forever");
    assert_eq!(kept["leaked_bytes"], 10 * 3000, "{kept}");
    assert!(kept["inside_mpi"].is_null(), "{kept}");
    let own = &r["mpi_own"];
    let init = u64_of(&own["live_bytes_by_routine"]["MPI_Init"]);
    assert!(
        init > 100_000,
        "MPI_Init's state is live at MPI_Finalize: {own}"
    );
    let mut inside = 0;
    for c in contexts(&r) {
        let modules: Vec<&str> = c["stack"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|f| f["module"].as_str())
            .collect();
        assert!(
            !modules.iter().any(|m| m.contains("libwmhcct")),
            "a frame of the tracer's own: {modules:?}"
        );
        let names = stack_names(c);
        let in_program = names.iter().any(|f| f == "main");
        match c["inside_mpi"].as_str() {
            Some(thread) if thread.starts_with("thread of ") => {
                inside += 1;
                assert!(!in_program, "{thread}: {names:?}");
            }
            Some(routine) => {
                inside += 1;
                let p = format!("P{routine}");
                assert!(
                    names.iter().any(|f| f == routine || *f == p),
                    "{routine}: {names:?}"
                );
            }
            // Every allocation off the program's own stacks is the library's:
            // here, its PMIx and event-loop threads.
            None if c["kind"].as_str().is_some_and(|k| !k.starts_with("MPI_")) => assert!(
                in_program,
                "a context outside the program's code not taken for the MPI library's: {names:?}"
            ),
            None => {}
        }
    }
    // `mpi_own` sums every context inside MPI, those below the hotness
    // threshold too (not listed): at least the listed ones that hold memory.
    let listed: Vec<&Value> = contexts(&r)
        .iter()
        .filter(|c| !c["inside_mpi"].is_null() && u64_of(&c["leaked_bytes"]) > 0)
        .collect();
    assert!(inside >= listed.len(), "{own}");
    assert!(u64_of(&own["contexts"]) as usize >= listed.len(), "{own}");
    let listed_bytes: u64 = listed.iter().map(|c| u64_of(&c["leaked_bytes"])).sum();
    assert!(u64_of(&own["live_bytes"]) >= listed_bytes, "{own}");

    // `wmhcct <verb> job.h5 <args…>`, which must succeed.
    let wmhcct = |verb: &str, args: &[&str]| {
        let mut all = vec![verb, h5.to_str().unwrap()];
        all.extend_from_slice(args);
        let out = run_cmd(&mut command(bin(), &all, &dir), TIMEOUT);
        assert_eq!(out.code, 0, "{}", out.describe());
        out
    };
    // `(list, the not-listed line for the MPI library's)` of a text report.
    let listed = |text: &str| -> (String, Option<String>) {
        let list = text
            .split("\ntop ")
            .nth(1)
            .and_then(|s| s.split("\nnot listed").next())
            .unwrap_or_else(|| panic!("{text}"));
        let note = text
            .lines()
            .find(|l| l.starts_with("not listed: ") && l.contains("inside MPI calls"));
        (list.to_string(), note.map(String::from))
    };
    // `report <args>` lists the program's contexts, the leak among them,
    // and sums the MPI library's in one line that says `said`; with
    // `--mpi-internal` it lists those too. Returns the text and its list.
    let lists = |args: &[&str], said: &str| -> (String, String) {
        let text = wmhcct("report", args).stdout;
        let (list, note) = listed(&text);
        assert!(list.contains("keep_forever"), "{list}");
        assert!(
            !list.contains("inside "),
            "only the program's listed: {list}"
        );
        assert!(!list.contains("PMPI_Init"), "{list}");
        let note = note.unwrap_or_else(|| panic!("no line for the MPI library's: {text}"));
        for part in ["(MPI_Init ", said, "--mpi-internal"] {
            assert!(note.contains(part), "{part}: {note}");
        }
        let all = wmhcct("report", &[args, &["--mpi-internal"]].concat()).stdout;
        let (all_list, note) = listed(&all);
        assert!(all_list.contains("  inside MPI_Init\n"), "{all}");
        assert!(all_list.contains("keep_forever"), "{all}");
        assert!(note.is_none(), "no such line with --mpi-internal: {all}");
        (text, list)
    };

    // By count (the default): the program's contexts, which end at main.
    let (by_count, list) = lists(
        &["--top", "1000"],
        " calls: the MPI library's own allocations",
    );
    assert!(list.contains("    scratch ("), "{list}");
    assert!(by_count.contains("\n    main ("), "{by_count}");
    assert!(!by_count.contains("__libc_start"), "{by_count}");
    assert!(!by_count.contains("\n    _start ("), "{by_count}");
    // An MPI call's context gives the bytes it moved, and no memory held.
    let call = by_count
        .lines()
        .find(|l| l.starts_with('#') && l.contains(" MPI_Allreduce  count 4  bytes 16 B"))
        .unwrap_or_else(|| panic!("{by_count}"));
    assert!(!call.contains("leaked"), "{call}");
    // The hottest-contexts plot leaves them out too, and says so.
    for (extra, shown) in [(None, false), (Some("--mpi-internal"), true)] {
        let out = dir.join(format!("plots-{shown}"));
        let mut args = vec!["--out-dir", out.to_str().unwrap(), "--format", "svg"];
        args.extend(extra);
        wmhcct("plot", &args);
        let svg = std::fs::read_to_string(out.join("contexts.svg")).unwrap();
        assert!(svg.contains("scratch"), "{svg}");
        assert_eq!(
            svg.contains("not shown: the MPI library"),
            !shown,
            "{extra:?}"
        );
        assert_eq!(
            svg.contains("libpmix") || svg.contains("libopen-pal"),
            shown,
            "{extra:?}"
        );
        // index.html: every picture, then the text report, with the same
        // choice of contexts.
        let page = std::fs::read_to_string(out.join("index.html")).unwrap();
        for pic in ["memory", "events", "contexts", "ranks", "sizes"] {
            assert!(
                page.contains(&format!("<img src=\"{pic}.svg\"")),
                "{pic}: {page}"
            );
        }
        assert!(page.contains("<object data=\"flame.svg\""), "{page}");
        let text = page
            .split_once("<pre>")
            .and_then(|(_, t)| t.split_once("</pre>"))
            .unwrap_or_else(|| panic!("{page}"))
            .0;
        assert!(text.starts_with("program:   "), "{text}");
        assert!(text.contains(&format!("\nranks:     {RANKS}\n")), "{text}");
        assert!(text.contains("\n    scratch ("), "{text}");
        assert_eq!(
            text.contains("the MPI library's own allocations (--mpi-internal lists them)"),
            !shown,
            "{extra:?}: {text}"
        );
    }

    // By bytes leaked: the program's leaks.
    let (plain, _) = lists(
        &["--by", "leaked", "--top", "1000"],
        "live at MPI_Finalize: the MPI library's own memory",
    );
    assert!(plain.contains("live at MPI_Finalize"), "{plain}");
    // The ranks table: one row per rank, its allocator calls those of the
    // JSON's rank, and everything live at the end (not only leaks) named so.
    let table: Vec<&str> = plain
        .split_once(&format!("ranks by heap peak (top {RANKS} of {RANKS}):\n"))
        .unwrap_or_else(|| panic!("{plain}"))
        .1
        .lines()
        .collect();
    assert!(table[0].contains("live at end"), "{}", table[0]);
    let mut seen = Vec::new();
    let n = RANKS as usize;
    for row in &table[1..=n] {
        let cells: Vec<&str> = row.split_whitespace().collect();
        let rank: u64 = cells[0].parse().unwrap_or_else(|_| panic!("{row}"));
        let detail = r["ranks_detail"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["rank"] == rank)
            .unwrap_or_else(|| panic!("rank {rank}: {}", r["ranks_detail"]));
        let calls: u64 = detail["totals"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, _)| !k.starts_with("MPI_") || *k == "MPI_Alloc_mem")
            .map(|(_, t)| u64_of(&t["count"]))
            .sum();
        assert_eq!(cells[2], calls.to_string(), "{row}");
        seen.push(rank);
    }
    seen.sort();
    assert_eq!(seen, (0..RANKS).collect::<Vec<u64>>(), "{plain}");
    // Under the table, the imbalance of the ranks' peaks: max over mean.
    let peaks: Vec<f64> = r["ranks_detail"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| u64_of(&d["peak_bytes"]) as f64)
        .collect();
    let max = peaks.iter().cloned().fold(0.0, f64::max);
    let ratio = max * peaks.len() as f64 / peaks.iter().sum::<f64>();
    let expected = format!("  imbalance over the {RANKS} ranks (max / mean): peak {ratio:.2}, ");
    assert!(
        table[n + 1].starts_with(&expected),
        "{}\n{expected}",
        table[n + 1]
    );
    // The host line is the job's: its ranks' host, rank 0's pid and the
    // threads of all ranks.
    let rank0 = r["ranks_detail"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["rank"] == 0)
        .unwrap();
    let host = format!(
        "\nhost:      {} ({RANKS} ranks); rank 0 pid {}; ",
        rank0["hostname"].as_str().unwrap(),
        rank0["pid"]
    );
    assert!(plain.contains(&host), "{host}\n{plain}");

    // The folded export of the leaks leaves the same memory out, and says so.
    let folded = |extra: &[&str]| {
        let args = [&["--format", "folded", "--weight", "leaked"], extra].concat();
        wmhcct("export", &args)
    };
    let weights = |text: &str| -> Vec<(String, u64)> {
        text.lines()
            .map(|l| {
                let (stack, w) = l.rsplit_once(' ').unwrap_or_else(|| panic!("{l}"));
                (
                    stack.to_string(),
                    w.parse().unwrap_or_else(|_| panic!("{l}")),
                )
            })
            .collect()
    };
    let program_only = folded(&[]);
    let lines = weights(&program_only.stdout);
    let kept_line = lines
        .iter()
        .find(|(s, _)| s.contains("keep_forever"))
        .unwrap_or_else(|| panic!("{}", program_only.stdout));
    assert_eq!(kept_line.1, 10 * 3000, "{kept_line:?}");
    assert!(
        !lines
            .iter()
            .any(|(s, _)| s.contains("PMPI_Init") || s.contains(";MPI_Init;")),
        "{}",
        program_only.stdout
    );
    assert!(
        program_only.stderr.contains("--mpi-internal keeps them"),
        "{}",
        program_only.describe()
    );
    let with_mpi = folded(&["--mpi-internal"]);
    assert!(with_mpi.stderr.is_empty(), "{}", with_mpi.describe());
    let all_lines = weights(&with_mpi.stdout);
    let sum = |v: &[(String, u64)]| v.iter().map(|(_, w)| w).sum::<u64>();
    assert!(
        sum(&all_lines) >= sum(&lines) + init,
        "{} vs {}",
        sum(&all_lines),
        sum(&lines)
    );
    assert!(
        all_lines.iter().any(|(s, _)| s.contains("MPI_Init")),
        "{}",
        with_mpi.stdout
    );
}

/// A rank's forked child that ends with `exit()` without MPI is not the
/// rank: it writes its own report beside the job's (`job-<pid>.h5`) and
/// says nothing. Until 2026-11-27 it spilled `rank-<r>.wmprof` as if it
/// were the rank, with a line each on stderr telling to merge them, and
/// that merge made a bogus job of the children.
#[test]
fn a_ranks_forked_child_writes_its_own_report() {
    let (work, h5) = clean_job("fork", "mpicc", "mpi_fork.c", "forked");
    let r = report_json(&h5);
    assert_eq!(r["ranks"], RANKS);
    assert!(
        contexts_with(&r, "malloc", "child_allocs").is_empty(),
        "the children's allocations are not the job's: {}",
        summary(&r)
    );
    let kids = child_reports(&work.path, "job");
    assert_eq!(kids.len(), RANKS as usize, "{kids:?}");
    let mut counts: Vec<u64> = kids
        .iter()
        .map(|k| {
            let c = report_json(k);
            assert_eq!(c["reason"], "exit", "{}", summary(&c));
            u64_of(&context_with(&c, "malloc", "child_allocs")["count"])
        })
        .collect();
    counts.sort();
    assert_eq!(counts, (1..=RANKS).map(|r| 10 * r).collect::<Vec<_>>());
}

/// A singleton Open MPI process (no `mpirun`): the report's call totals
/// are those of an independent count of the same program run untraced
/// (`count_calls.c`, preloaded alone, read at the entry of `MPI_Finalize`
/// where the tracer takes its profile): every call of the program, of Open
/// MPI, PMIx, hwloc and of the loader's `dlopen` of their components, none
/// lost, and none of the tracer's own (its symbol lookups, its MPI side's
/// start-up). Two things the tracer changes in the process itself are the
/// same in both runs: the program is linked with `libgcc_s.so.1`, which
/// `libwmhcct.so` needs (untraced, hwloc's `dlopen` of its XML plugin loads
/// it through libxml2 and ICU: 3 mallocs and 2 callocs of the loader that a
/// traced run never makes), and the events are recorded inline (a collector
/// thread is one more thread in hwloc's walk of the process's threads
/// during `MPI_Init`: 3 more malloc/free pairs, which the tracer counts).
/// The program's own MPI use is one barrier (`mpi_singleton.c`). Open MPI's
/// own threads (PMIx's progress thread) may make a call or two on either
/// side of the instant both runs count at, so the count differs between
/// untraced runs too: on an idle machine (malloc, realloc, free) were
/// 19274 / 4247 / 11322, in a fresh-clone suite run three untraced runs in
/// a row gave 19273 / 4248 / 11321 and the traced ones 19273 / 4247 /
/// 11321. So the traced totals must equal, call for call, the count of one
/// of up to five untraced runs, which alternate with the traced ones.
#[test]
fn a_singletons_totals_equal_an_independent_count() {
    let work = workdir("singleton-count");
    let dir = work.path.clone();
    let exe = mpi_compile(
        "mpicc",
        "mpi_singleton.c",
        &dir,
        &["-Wl,--no-as-needed", "-lgcc_s"],
    );
    let shim = mpi_compile("mpicc", "count_calls.c", &dir, &["-shared", "-fPIC"]);
    let singleton = |env: &[(&str, &OsStr)]| {
        let mut c = command(&exe, &[] as &[&str], &dir);
        c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        for (k, v) in env {
            c.env(k, v);
        }
        let out = run_cmd(&mut c, MPI_TIMEOUT);
        assert!(
            out.code == 0 && out.stdout == "mpi_singleton done\n",
            "{}",
            out.describe()
        );
        out
    };
    let h5 = dir.join("singleton.h5");
    let mut untraced: Vec<Vec<(String, u64)>> = Vec::new();
    let mut traced_totals: Vec<Vec<(String, u64)>> = Vec::new();
    for _ in 0..5 {
        let plain = singleton(&[("LD_PRELOAD", shim.as_os_str())]);
        let counted: Vec<(String, u64)> = plain
            .stderr
            .lines()
            .filter_map(|l| l.strip_prefix("count_calls "))
            .filter_map(|l| l.split_once(' '))
            .map(|(f, n)| (f.to_string(), n.parse().unwrap()))
            .collect();
        assert_eq!(counted.len(), ALLOCATORS.len(), "{}", plain.describe());
        let _ = std::fs::remove_file(&h5);
        let traced = singleton(&[
            ("LD_PRELOAD", lib().as_os_str()),
            ("WMHCCT_OUT", h5.as_os_str()),
            ("WMHCCT_COLLECTOR", OsStr::new("inline")),
        ]);
        assert_clean_stderr(&traced, &h5);
        let r = report_json(&h5);
        assert_eq!(r["reason"], "finalize", "{}", summary(&r));
        let reported: Vec<(String, u64)> = counted
            .iter()
            .map(|(f, _)| (f.clone(), total_count(&r, f)))
            .collect();
        untraced.push(counted);
        traced_totals.push(reported);
        if traced_totals.iter().any(|t| untraced.contains(t)) {
            return;
        }
    }
    let tries: Vec<String> = untraced
        .iter()
        .zip(&traced_totals)
        .map(|(c, r)| format!("counted  {c:?}\nreported {r:?}"))
        .collect();
    panic!(
        "the report's totals differ from the calls counted untraced:\n{}",
        tries.join("\n")
    );
}
