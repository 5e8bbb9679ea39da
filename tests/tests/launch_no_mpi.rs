//! A program that does not use MPI, started as several processes by an MPI
//! launcher (a task farm: `mpirun -np 3 ./task`, `srun -n 64 ./task`) with
//! one report path for all of them (`WMHCCT_OUT`, or the Slurm job's). The
//! processes used to race to write that one file (one report survived, the
//! others printed errors). Each now leaves `rank-<r>.wmprof` in the spill
//! directory, rank 0 says so in one line, and `wmhcct merge` makes the
//! launch's report, exact for every process.

mod mpi_common;

use mpi_common::*;
use wmhcct_e2e::*;

const PROCESSES: u64 = 3;

fn task_farm(launcher: Launcher, name: &str) {
    let work = WorkDir::new(&format!("farm-{name}"));
    let dir = work.path.clone();
    // tests/programs/pattern.c: malloc 1100, calloc 10, free 1100, no stdio.
    let exe = compile("pattern.c", &dir, Opt::Debug, &[]);
    let np = PROCESSES as u32;
    let plain = launch(launcher, np, &exe, &[], &dir, None, &[]);
    assert_eq!(plain.code, 0, "{}", plain.describe());
    let h5 = dir.join("farm.h5");
    let traced = launch(launcher, np, &exe, &[], &dir, Some(&h5), &[]);
    assert_eq!(traced.code, 0, "{}", traced.describe());
    assert_eq!(traced.stdout, plain.stdout, "stdout changed by the tracer");
    let lines = tracer_lines(&traced.stderr);
    assert_eq!(lines.len(), 1, "rank 0's line only: {}", traced.describe());
    assert!(
        lines[0].contains("the 3 processes of this launch did not use MPI"),
        "{}",
        lines[0]
    );
    assert!(!h5.exists(), "no process wrote the shared report");
    let spill = dir.join("farm.h5.spill");
    let names = names_in(&spill);
    // Each file carries the launch: Open MPI's PMIx namespace, Hydra's
    // control port (its proxies' `--control-port`).
    let tag = launch_tag(&names[0]);
    let expected: Vec<String> = (0..PROCESSES)
        .map(|r| format!("rank-{r}{tag}.wmprof"))
        .collect();
    assert_eq!(names, expected, "{}", traced.describe());
    let named = match launcher {
        Launcher::OpenMpi => ".pmix-",
        _ => ".hydra-",
    };
    assert!(tag.starts_with(named), "{names:?}");
    merge(&spill, &h5, &dir);
    let r = report_json(&h5);
    assert_eq!(r["ranks"], PROCESSES);
    assert_eq!(
        total_count(&r, "malloc"),
        1100 * PROCESSES,
        "{}",
        alloc_totals(&r)
    );
    assert_eq!(
        total_count(&r, "calloc"),
        10 * PROCESSES,
        "{}",
        alloc_totals(&r)
    );
    assert_eq!(
        total_count(&r, "free"),
        1100 * PROCESSES,
        "{}",
        alloc_totals(&r)
    );
}

#[test]
fn open_mpi_mpirun_of_a_serial_program() {
    task_farm(Launcher::OpenMpi, "ompi");
}

#[test]
fn mpich_hydra_of_a_serial_program() {
    task_farm(Launcher::Mpich, "hydra");
}

/// The file names of directory `dir`, sorted.
fn names_in(dir: &std::path::Path) -> Vec<String> {
    files_named(dir, "", "")
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

/// The launch part of a task's file name (`rank-0.pmix-1234.wmprof` →
/// `.pmix-1234`).
fn launch_tag(name: &str) -> String {
    let rest = name
        .strip_prefix("rank-0")
        .and_then(|r| r.strip_suffix(".wmprof"))
        .unwrap_or_else(|| panic!("not rank 0's file: {name}"));
    rest.to_string()
}

/// A spill directory outlives its launch: a later launch with the same
/// report path (the same batch script run again, a second `srun` task farm
/// of the job) leaves an earlier one's files in place, since each task's
/// file carries its launch's name (it used to replace them rank by rank,
/// losing the earlier launch's). Here three tasks, then two: all five
/// files stay; `wmhcct merge` of the directory is the second launch alone
/// (its two ranks, exact totals) and says in one line which files of the
/// first it left out; those, named, merge into the first launch's report,
/// exact too; `--remove-input` removes only what was merged. (Before files
/// were kept apart by launch, the merge took the first launch's rank 2
/// into the second: 3 ranks and a third more calls than the program made.)
#[test]
fn a_later_launch_leaves_an_earlier_ones_profiles_in_place() {
    later_launch(Launcher::OpenMpi, "ompi");
}

/// The same under MPICH's Hydra, whose launches are told apart by the
/// port its `mpiexec` listens on.
#[test]
fn a_later_hydra_launch_leaves_an_earlier_ones_profiles_in_place() {
    later_launch(Launcher::Mpich, "hydra");
}

fn later_launch(launcher: Launcher, name: &str) {
    let work = WorkDir::new(&format!("farm-again-{name}"));
    let dir = work.path.clone();
    // tests/programs/pattern.c: malloc 1100, calloc 10, free 1100, no stdio.
    let exe = compile("pattern.c", &dir, Opt::Debug, &[]);
    let h5 = dir.join("farm.h5");
    let spill = dir.join("farm.h5.spill");
    let mut tags = Vec::new();
    for np in [3, 2] {
        let traced = launch(launcher, np, &exe, &[], &dir, Some(&h5), &[]);
        assert_eq!(traced.code, 0, "{}", traced.describe());
        let line = tracer_lines(&traced.stderr).join("\n");
        let new: Vec<String> = names_in(&spill)
            .iter()
            .filter(|n| n.starts_with("rank-0."))
            .map(|n| launch_tag(n))
            .filter(|t| !tags.contains(t))
            .collect();
        // `launch` runs hydra once more when it died of SIGPIPE at the end
        // of a launch (its own race, mpi_common): that launch's tasks had
        // written their files too. The test's launch is the later one; the
        // lost one's files go.
        let modified = |t: &String| {
            std::fs::metadata(spill.join(format!("rank-0{t}.wmprof")))
                .and_then(|m| m.modified())
                .unwrap()
        };
        let tag = new
            .iter()
            .max_by_key(|t| modified(t))
            .unwrap_or_else(|| panic!("no new launch: {:?}", names_in(&spill)))
            .clone();
        for lost in new.iter().filter(|t| **t != tag) {
            eprintln!("files of a launch hydra lost, removed: {lost}");
            for n in names_in(&spill)
                .iter()
                .filter(|n| n.ends_with(&format!("{lost}.wmprof")))
            {
                std::fs::remove_file(spill.join(n)).unwrap();
            }
        }
        assert!(line.contains("wmhcct merge"), "{line}");
        tags.push(tag);
    }
    let (first, second) = (&tags[0], &tags[1]);
    let mut all: Vec<String> = (0..3)
        .map(|r| format!("rank-{r}{first}.wmprof"))
        .chain((0..2).map(|r| format!("rank-{r}{second}.wmprof")))
        .collect();
    all.sort();
    assert_eq!(names_in(&spill), all, "every task's file of both launches");

    let (s, o) = (spill.to_str().unwrap(), h5.to_str().unwrap());
    let out = run_cmd(
        &mut command(bin(), &["merge", s, "-o", o, "--remove-input"], &dir),
        TIMEOUT,
    );
    assert_eq!(out.code, 0, "{}", out.describe());
    let firsts = format!("rank-0{first}.wmprof, rank-1{first}.wmprof, rank-2{first}.wmprof");
    assert_eq!(
        out.stderr,
        format!(
            "wmhcct: warning: {s}: leaving out 3 profile(s) of an earlier launch than its newest ({firsts}); name them to merge them\n\
             wmhcct: merged 2 profile(s) of 2 rank(s) into {o}\n"
        )
    );
    let r = report_json(&h5);
    assert_eq!(r["ranks"], 2);
    assert_eq!(total_count(&r, "malloc"), 2 * 1100, "{}", alloc_totals(&r));
    assert_eq!(total_count(&r, "calloc"), 2 * 10, "{}", alloc_totals(&r));
    let left: Vec<String> = (0..3).map(|r| format!("rank-{r}{first}.wmprof")).collect();
    assert_eq!(names_in(&spill), left, "only what was merged is removed");

    let earlier = dir.join("earlier.h5");
    let mut c = command(bin(), &["merge", "-o", earlier.to_str().unwrap()], &dir);
    c.args(left.iter().map(|n| spill.join(n)));
    let out = run_cmd(&mut c, TIMEOUT);
    assert_eq!(out.code, 0, "{}", out.describe());
    let r = report_json(&earlier);
    assert_eq!(r["ranks"], 3);
    assert_eq!(total_count(&r, "malloc"), 3 * 1100, "{}", alloc_totals(&r));
    assert_eq!(total_count(&r, "free"), 3 * 1100, "{}", alloc_totals(&r));
}

/// A wrapper script as the launched program (`mpirun -np 4 ./wrap.sh`,
/// which runs the MPI program without `exec`): the shells are tasks of the
/// launch that never use MPI, but they start the real program, which writes
/// the job's report. Each shell writes its own report under its pid, so
/// the job's report stays the MPI job's and no spill file of the shells
/// can take an MPI rank's name.
#[test]
fn wrapper_scripts_leave_the_job_report_alone() {
    let work = WorkDir::new("farm-wrapper");
    let dir = work.path.clone();
    let exe = mpi_compile("mpicc", "mpi_pattern.c", &dir, &[]);
    let wrap = write_script(
        &dir,
        "wrap.sh",
        &format!("'{}'\necho wrapper done\n", exe.display()),
    );
    // Run by bash, which forks the program (dash starts it with vfork and
    // here made no allocation the tracer saw).
    let (bash, wrap) = (std::path::Path::new("/bin/bash"), wrap.to_str().unwrap());
    let np = PATTERN_RANKS as u32;
    let plain = launch(Launcher::OpenMpi, np, bash, &[wrap], &dir, None, &[]);
    assert_eq!(plain.code, 0, "{}", plain.describe());
    let h5 = dir.join("job.h5");
    let traced = launch(Launcher::OpenMpi, np, bash, &[wrap], &dir, Some(&h5), &[]);
    assert_eq!(traced.code, 0, "{}", traced.describe());
    assert_eq!(
        sorted_lines(&traced.stdout),
        sorted_lines(&plain.stdout),
        "stdout changed"
    );
    check_pattern(&report_json(&h5), "malloc", 64, 256);
    assert!(!dir.join("job.h5.spill").exists(), "{}", traced.describe());
    let shells = files_named(&dir, "job-", ".h5");
    assert_eq!(shells.len(), np as usize, "{}", traced.describe());
    for s in &shells {
        assert_eq!(report_json(s)["ranks"], 1, "{}", s.display());
    }
}

/// The same with a Python wrapper, which starts the program with vfork or
/// posix_spawn (no fork handler runs): the job's report, written while the
/// wrapper ran, tells it is one.
#[test]
fn python_wrappers_leave_the_job_report_alone() {
    let work = WorkDir::new("farm-pywrapper");
    let dir = work.path.clone();
    let exe = mpi_compile("mpicc", "mpi_pattern.c", &dir, &[]);
    let wrap = dir.join("wrap.py");
    std::fs::write(
        &wrap,
        format!(
            "import subprocess\nsubprocess.run(['{}'], check=True)\nprint('wrapper done')\n",
            exe.display()
        ),
    )
    .unwrap();
    let (python, wrap) = (
        std::path::Path::new("/usr/bin/python3"),
        wrap.to_str().unwrap(),
    );
    let np = PATTERN_RANKS as u32;
    let h5 = dir.join("job.h5");
    let traced = launch(Launcher::OpenMpi, np, python, &[wrap], &dir, Some(&h5), &[]);
    assert_eq!(traced.code, 0, "{}", traced.describe());
    check_pattern(&report_json(&h5), "malloc", 64, 256);
    assert!(!dir.join("job.h5.spill").exists(), "{}", traced.describe());
    let wrappers = files_named(&dir, "job-", ".h5").len();
    assert_eq!(wrappers, np as usize, "{}", traced.describe());
}

/// A task farm after an MPI launch in the same Slurm job (the ranks see
/// `SLURM_JOB_ID`, as under `srun`): the MPI launch wrote the job's report,
/// `wmhcct-<job>.h5`; the task farm keeps that name's spill directory (its
/// tasks cannot agree on another without MPI), and rank 0's line names a
/// free report for the merge, `wmhcct-<job>-2.h5`, as a later MPI launch
/// would take. It used to name `wmhcct-<job>.h5`, and the merge it gave
/// replaced the MPI launch's report.
#[test]
fn a_task_farm_after_an_mpi_launch_merges_beside_its_report() {
    let work = WorkDir::new("farm-after-mpi");
    let dir = work.path.clone();
    let mpi_exe = mpi_compile("mpicc", "mpi_pattern.c", &dir, &[]);
    let farm_exe = compile("pattern.c", &dir, Opt::Debug, &[]);
    let preload = format!("LD_PRELOAD={}", lib().display());
    let np = PROCESSES.to_string();
    let run = |exe: &std::path::Path| {
        let mut c = command("mpirun", &["-np", &np, "--oversubscribe"], &dir);
        c.args(["-x", &preload, "-x", "SLURM_JOB_ID=4343"])
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .arg(exe);
        run_cmd(&mut c, MPI_TIMEOUT)
    };
    let first = dir.join("wmhcct-4343.h5");
    let mpi = run(&mpi_exe);
    assert_eq!(mpi.code, 0, "{}", mpi.describe());
    assert!(first.is_file(), "{}", mpi.describe());
    let before = std::fs::read(&first).unwrap();
    let farm = run(&farm_exe);
    assert_eq!(farm.code, 0, "{}", farm.describe());
    let spill = dir.join("wmhcct-4343.h5.spill");
    let second = dir.join("wmhcct-4343-2.h5");
    let hint = format!("wmhcct merge {} -o {}", spill.display(), second.display());
    let lines = tracer_lines(&farm.stderr);
    assert!(
        lines.len() == 1 && lines[0].ends_with(&hint),
        "rank 0's line names {}: {}",
        second.display(),
        farm.describe()
    );
    merge(&spill, &second, &dir);
    assert_eq!(
        std::fs::read(&first).unwrap(),
        before,
        "the MPI launch's report is left as it was"
    );
    let r = report_json(&second);
    assert_eq!(r["ranks"], PROCESSES);
    assert_eq!(
        total_count(&r, "malloc"),
        1100 * PROCESSES,
        "{}",
        alloc_totals(&r)
    );
}
