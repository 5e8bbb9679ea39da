//! Taking the profile and turning it into the HDF5 report.
//!
//! The tracer never loads HDF5: it writes the compact profile
//! (`wmhcct-format`) and runs `wmhcct convert`, which symbolises and writes
//! the report. If that is impossible the profile stays, and the one command
//! that converts it is printed.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use wmhcct_collector::{job_series, same_paths, Collector, SeriesConfig};
use wmhcct_format::{
    shell_word, KindTotal, Meta, Profile, TracerStats, ALLOC_KINDS, MPI_KINDS, NO_CONTEXT,
};

use crate::guard::Guard;
use crate::output;
use crate::tracer::{self, Core, Tracer};

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::new();
    }
    let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// The program and its arguments, from the process's `/proc` entry (which
/// valgrind answers for its client), else from this thread's: once the
/// main thread has ended (`pthread_exit` while other threads go on), the
/// process's entry, which is the main thread's, has no executable or
/// command line left.
fn command_line() -> (String, Vec<String>) {
    let program = std::fs::read_link("/proc/self/exe")
        .or_else(|_| std::fs::read_link("/proc/thread-self/exe"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let args = std::fs::read("/proc/self/cmdline")
        .ok()
        .filter(|b| !b.is_empty())
        .ok_or(())
        .or_else(|()| std::fs::read("/proc/thread-self/cmdline"))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
        .unwrap_or_default();
    (program, args)
}

/// Build the profile of this process from the tracer's state.
pub fn build(t: &Tracer, core: &Core, reason: &str) -> Profile {
    // First, before building the profile (or merging ranks) takes memory.
    let resident = crate::resident::now();
    // The MPI job's, else the launcher's (a task of a launch without MPI).
    let job = tracer::job(t);
    let rank_and_size = job
        .as_ref()
        .map(|j| (j.rank, j.size))
        .or_else(|| launch_task(t));
    let (program, args) = command_line();
    let mut records = core.records.clone();
    // The series' sample contexts are rows of the allocation tree: made
    // with it, so its rows are computed once.
    let ((tree, series), mpi_tree) = {
        let mut resolver = crate::frame_keys::resolver(&records);
        let mut resolve = |a| resolver.key(a);
        let trees = (
            core.collector.snapshot_with_series(
                "alloc",
                &mut resolve,
                tracer::now_mono_ns().saturating_sub(t.start_mono_ns),
                t.start_unix_ns,
            ),
            core.mpi.snapshot_tree("mpi", &mut resolve),
        );
        if resolver.aliased() {
            // A file loaded twice: its two loads' frames are one path now.
            let ((mut tree, mut series), mut mpi_tree) = trees;
            if let Some((merged, rows)) = same_paths::merge_same_paths(&tree) {
                tree = merged;
                if let Some(s) = series.as_mut() {
                    job_series::remap_contexts(s, &|c| {
                        rows.get(c as usize).copied().unwrap_or(NO_CONTEXT)
                    });
                }
            }
            if let Some((merged, _)) = same_paths::merge_same_paths(&mpi_tree) {
                mpi_tree = merged;
            }
            ((tree, series), mpi_tree)
        } else {
            trees
        }
    };
    // Keep only modules the tree refers to? No: keep all (small), so that
    // readers can show what was loaded.
    let totals = core
        .collector
        .totals()
        .into_iter()
        .zip(ALLOC_KINDS)
        .chain(core.mpi.totals().into_iter().zip(MPI_KINDS))
        .map(|((count, bytes), kind)| KindTotal {
            kind: kind.to_string(),
            count,
            bytes,
        })
        .collect();
    let u = &core.unwind;
    Profile {
        meta: Meta {
            program,
            args,
            hostname: hostname(),
            pid: std::process::id(),
            start_unix_ns: t.start_unix_ns,
            end_unix_ns: t.start_unix_ns + (tracer::now_mono_ns() - t.start_mono_ns),
            threads: core.threads,
            rank: rank_and_size.map(|(r, _)| r),
            nranks: rank_and_size.map(|(_, n)| n),
            reason: reason.to_string(),
            tracer_version: env!("CARGO_PKG_VERSION").to_string(),
            launch: match (job, rank_and_size) {
                (Some(job), _) => job.launch,
                (None, Some(_)) => crate::launcher::task_launch_id(),
                (None, None) => String::new(),
            },
        },
        config: wmhcct_format::Config {
            phi: t.config.phi,
            epsilon: t.config.epsilon,
            unwind: t.config.unwind.name().to_string(),
            max_depth: t.config.max_depth as u32,
            exact: t.config.exact,
            bins: t.config.bins,
            rank_series: t.config.rank_series,
            event_samples: t.config.event_samples,
        },
        modules: std::mem::take(&mut records),
        totals,
        heap: core.collector.heap_stats(),
        unwind: wmhcct_format::UnwindStats {
            mode: t.config.unwind.name().to_string(),
            events: u.events,
            frames_unwound: u.frames_unwound,
            frames_reused: u.frames_reused,
            validated: u.validated,
            correct: u.correct,
            reseeds: u.reseeds,
            truncated: u.truncated,
            errors: u.errors,
        },
        tracer: TracerStats {
            collector_bytes: core.collector.memory_bytes(),
            ptr_table_peak: core.collector.ptr_table_peak(),
            untraced_events: core.collector.untraced_events() + core.mpi.untraced_events(),
        },
        resident,
        trees: vec![tree, mpi_tree],
        ranks: Vec::new(),
        series,
    }
}

/// The `wmhcct` binary next to this library, or `WMHCCT_BIN`.
fn converter(t: &Tracer) -> Option<PathBuf> {
    if let Some(b) = &t.config.bin {
        return Some(b.clone());
    }
    let bin = own_path()?.parent()?.join("wmhcct");
    bin.exists().then_some(bin)
}

/// Path of this library (for finding `wmhcct` and `libwmhcct_mpi.so`).
pub fn own_path() -> Option<PathBuf> {
    // SAFETY: dladdr fills `info` for an address inside this library.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(own_path as *const libc::c_void, &mut info) == 0 || info.dli_fname.is_null()
        {
            return None;
        }
        Some(PathBuf::from(
            std::ffi::CStr::from_ptr(info.dli_fname)
                .to_string_lossy()
                .into_owned(),
        ))
    }
}

/// The job's report path as this rank would choose it (rank 0's choice is
/// broadcast to all): `WMHCCT_OUT`, else `wmhcct-<SLURM_JOB_ID>.h5`, else
/// `wmhcct-<date>-<pid>.h5`, relative to the working directory.
pub fn job_report_path(t: &Tracer) -> PathBuf {
    job_report_path_in(t, |job| PathBuf::from(format!("wmhcct-{job}.h5")))
}

/// The report path an MPI job agrees on at `MPI_Init` (rank 0's): as
/// [`job_report_path`], but a Slurm job's default name that an earlier
/// launch of the job took (a second `srun` or `mpirun` in the batch script)
/// gives the next free one (`output::slurm_report_name`). A launch without
/// MPI (a task farm) keeps the first name: its tasks decide each for
/// itself, and `wmhcct merge` tells launches apart in the spill directory.
pub fn new_job_report_path(t: &Tracer) -> PathBuf {
    job_report_path_in(t, |job| output::slurm_report_name(&t.dest.dir, job))
}

fn job_report_path_in(t: &Tracer, slurm: impl Fn(&str) -> PathBuf) -> PathBuf {
    let name = match (&t.dest.out, std::env::var("SLURM_JOB_ID")) {
        (Some(o), _) => o.clone(),
        (None, Ok(id)) if !id.is_empty() => slurm(&id),
        _ => {
            let secs = t.start_unix_ns / 1_000_000_000;
            let pid = std::process::id();
            PathBuf::from(format!("wmhcct-{secs}-{pid}.h5"))
        }
    };
    t.dest.dir.join(name)
}

/// This rank's name for its MPI job's launch, of which rank 0's is the
/// job's: its launcher's (`launcher::task_launch_id`, as a task of the
/// launch names it before `MPI_Init`), else, where the launcher names none
/// (a rank started by a wrapper under Hydra's proxy), rank 0's host, pid
/// and start time.
pub fn mpi_launch(t: &Tracer) -> String {
    let named = crate::launcher::task_launch_id();
    if !named.is_empty() {
        return named;
    }
    format!(
        "mpi:{}:{}:{}",
        hostname(),
        std::process::id(),
        t.start_unix_ns
    )
}

/// Where ranks that do not reach MPI_Finalize leave their profiles.
pub fn spill_dir(t: &Tracer, report: &Path) -> PathBuf {
    match &t.config.spill_dir {
        Some(d) if d.is_absolute() => d.clone(),
        Some(d) => t.cwd.join(d),
        // A stream has nothing beside it: beside the default name.
        None if t.dest.stream => {
            wmhcct_format::spill_dir_beside(&t.dest.default_report(std::process::id()))
        }
        None => wmhcct_format::spill_dir_beside(report),
    }
}

/// Stop tracing and build the profile (`None` if it was already taken).
pub fn take(g: &Guard, t: &Tracer, reason: &str) -> Option<Profile> {
    tracer::flush_current_thread(g, t);
    let mut ordered = tracer::lock_ordered(t);
    // With a collector thread: everything handed to it, and the recording
    // threads' statistics, are in the core now.
    tracer::settle(&mut ordered);
    // Only here, under the core lock, does tracing finish: mark this thread
    // as the report's writer first, so a SIGTERM never sees the report
    // taken but not yet written (it waits for the writer, `signals`).
    tracer::running()?;
    crate::signals::writer_begins();
    if !tracer::finish() {
        return None;
    }
    tracer::apply_all_repeats(t, &mut ordered);
    let profile = build(t, &ordered, reason);
    let untracked = ordered.collector.untracked_blocks();
    if untracked > 0 {
        crate::diag::message(&[
            "memory was exhausted and the live-block table could not grow: ",
            &untracked.to_string(),
            " allocations are counted but left out of the heap figures \
             (live, peak, leaks); their frees count as unknown frees",
        ]);
    }
    release_tables(t, &mut ordered);
    drop(ordered);
    tracer::drop_thread_modules(g, t);
    Some(profile)
}

/// Once the profile is taken nothing more is recorded (later events pass
/// through untraced): give back the collectors' tables and the copied
/// unwind tables before the report is encoded, merged across ranks and
/// converted, so they do not add to the process's peak. An event already
/// past the tracer's state check, or a thread exiting, meets empty
/// collectors, whose new identity makes every old cursor invalid there.
fn release_tables(t: &Tracer, core: &mut Core) {
    let empty = |c: &Collector| {
        Collector::with_series(
            *c.config(),
            SeriesConfig {
                bins: 0,
                event_samples: 0,
            },
        )
    };
    core.collector = empty(&core.collector);
    core.mpi = empty(&core.mpi);
    *t.modules.lock() = std::sync::Arc::new(wmhcct_unwinder::Modules::new());
    *t.scanned.lock() = Vec::new();
    t.modules_gen.fetch_add(1, Ordering::Release);
}

/// Take the report of a process that is not (or no longer) part of an MPI
/// job: write the profile, convert it.
pub fn write(g: &Guard, t: &Tracer, reason: &str) {
    // exit() or SIGTERM may come on a thread with little stack left.
    tracer::with_stack(g, REPORT_STACK, || write_here(g, t, reason))
}

/// Stack the report's writing may need.
pub const REPORT_STACK: u64 = 1 << 20;

fn write_here(g: &Guard, t: &Tracer, reason: &str) {
    // A forked child of an MPI rank or of a launch's task shares its
    // parent's environment and job, but is neither: it writes its own
    // report under its pid, as any forked child does.
    let forked = crate::lifecycle::forked_child();
    if tracer::job(t).is_some() && !forked {
        // An MPI rank that never reached MPI_Finalize.
        spill(g, t, reason);
        return;
    }
    let task = launch_task(t).filter(|_| shared_report(t) && !forked);
    // A task that started other programs, or whose shared report another
    // process wrote while it ran, is most likely a wrapper script around
    // the real program (the MPI job that writes that report, or spills
    // `rank-<r>.wmprof`): it writes its own report under its pid, as a
    // traced program's child does. (A program started with vfork or
    // posix_spawn runs no fork handler: the report tells.)
    let wrapper = task.is_some()
        && (t.forked.load(Ordering::Acquire) || written_since_start(t, &job_report_path(t)));
    if let Some((rank, size)) = task.filter(|_| !wrapper) {
        // One of several processes of a launch that all write the same
        // report (WMHCCT_OUT, or the Slurm job's): a task farm (`srun -n 64
        // ./task`, `mpirun -np 4 ./serial`). Each leaves its profile for
        // `wmhcct merge`, which makes the launch's report; rank 0 says so.
        let Some(profile) = take(g, t, reason) else {
            return;
        };
        let bytes = match wmhcct_format::encode(&profile) {
            Ok(b) => b,
            Err(e) => {
                crate::diag::message(&["cannot encode the profile: ", &e.to_string()]);
                return;
            }
        };
        if let Some((dir, report)) = spill_as(t, &bytes, &task_file_name(rank)) {
            if rank == 0 {
                crate::diag::message(&[
                    &format!("the {size} processes of this launch did not use MPI: "),
                    "each leaves its profile in ",
                    &dir.to_string_lossy(),
                    "; merge them with: wmhcct merge ",
                    &shell_word(&dir),
                    " -o ",
                    &shell_word(&farm_merge_output(t, &report)),
                ]);
            }
        }
        return;
    }
    let Some(profile) = take(g, t, reason) else {
        return;
    };
    let pid = std::process::id();
    let path = |own: bool| output::report_path(&t.dest, pid, own);
    let descendant = t.descendant.load(Ordering::Acquire);
    let mut report = path(descendant || wrapper);
    let mut beside_the_job = wrapper;
    if written_since_start(t, &report) {
        // Another process wrote this report while this one ran: an MPI
        // job this process started (a shell script around `mpirun`, Intel
        // MPI's `mpirun` script). That report is the job's; this process's
        // goes beside it, under its pid.
        report = path(true);
        beside_the_job = true;
    }
    match wmhcct_format::encode(&profile) {
        // Only the process the user started says where its report is. A
        // program a traced process started (or a forked child) writes its
        // report silently: its stderr may be its parent's data (`cc
        // --version 2>&1`, a captured pipe); the first process's closing
        // line counts those reports. A wrapper around an MPI job is silent
        // too: the job's rank 0 has named the job's report, the one line.
        Ok(bytes) => convert(t, &bytes, &report, !descendant && !beside_the_job),
        Err(e) => crate::diag::message(&["cannot encode the profile: ", &e.to_string()]),
    }
    forget_snapshot(t);
}

/// The closing line: the report, and how many processes this process
/// started wrote their own beside it (`<stem>-<pid>.h5`, named by
/// `WMHCCT_OUT`; without it every process's report is `wmhcct-<pid>.h5`
/// and another traced program's may share the directory, so none are
/// counted).
fn announce_report(t: &Tracer, report: &Path) {
    let tracer_start = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(t.start_unix_ns);
    let since = output::Since {
        tracer: tracer_start,
        process: output::process_start().map_or(tracer_start, |p| p.min(tracer_start)),
        pid: std::process::id(),
    };
    // A stream other than a null device is the traced program's alone: the
    // processes it started write theirs under the default name
    // (`output::report_path`), in the directory it started in.
    let beside = match t.dest.out {
        Some(_) if !t.dest.stream => Some(report.to_path_buf()),
        // (Not when the report itself went there: a stream's descriptor the
        // program closed, `convert`.)
        Some(_) if !t.dest.null && t.dest.is_stream(report) => Some(t.dest.dir.join("wmhcct.h5")),
        _ => None,
    };
    let others = beside
        .as_ref()
        .map_or(0, |r| output::descendant_reports_since(r, since));
    let shown = shown_report(t, report);
    let shown = shown.to_string_lossy();
    let Some(beside) = beside.filter(|_| others > 0) else {
        crate::diag::message(&["report written to ", &shown]);
        return;
    };
    let (count, verb) = match others {
        1 => ("1 process it started".to_string(), "wrote its own"),
        n => (format!("{n} processes it started"), "wrote their own"),
    };
    let pattern = output::descendant_report_pattern(&beside);
    let (how, pattern) = if t.dest.stream {
        (
            " as ",
            beside
                .with_file_name(pattern)
                .to_string_lossy()
                .into_owned(),
        )
    } else {
        (" beside it as ", pattern)
    };
    crate::diag::message(&[
        "report written to ",
        &shown,
        "; ",
        &count,
        " ",
        verb,
        how,
        &pattern,
    ]);
}

/// The report a merge command in a hint should write: the report, or with
/// a stream as `WMHCCT_OUT` the default name that the spill directory is
/// beside (a merge into `/dev/null` keeps nothing, and another rank's
/// `/proc/<pid>/fd/<n>` is gone once the job ends).
fn merge_output(t: &Tracer, report: &Path) -> PathBuf {
    if t.dest.stream {
        t.dest.default_report(std::process::id())
    } else {
        shown_report(t, report)
    }
}

/// The report a task farm's merge hint should write: as [`merge_output`],
/// but a Slurm job's default name that an earlier launch of the job already
/// wrote (an MPI step's report before this task farm, or the report merged
/// from an earlier task farm) gives the next free one, as an MPI launch
/// takes (`output::slurm_report_name`): the task farm keeps the first
/// name's spill directory, and the hint used to have its merge overwrite
/// the earlier launch's report.
fn farm_merge_output(t: &Tracer, report: &Path) -> PathBuf {
    let job = std::env::var("SLURM_JOB_ID").unwrap_or_default();
    if t.dest.out.is_none() && !job.is_empty() && report.symlink_metadata().is_ok() {
        return t
            .dest
            .dir
            .join(output::slurm_report_name(&t.dest.dir, &job));
    }
    merge_output(t, report)
}

/// How messages name `report`: a stream by the name it was given
/// (`/dev/stdout`, not the `/proc/<pid>/fd/1` it was resolved to, which
/// ends with the process).
fn shown_report(t: &Tracer, report: &Path) -> PathBuf {
    match &t.config.out {
        Some(given) if t.dest.is_stream(report) => given.clone(),
        _ => report.to_path_buf(),
    }
}

/// Rank 0: the merged profile of the job.
pub fn write_bytes(t: &Tracer, bytes: &[u8]) {
    let report = tracer::job(t)
        .map(|j| j.report)
        .unwrap_or_else(|| job_report_path(t));
    convert(t, bytes, &report, true);
}

/// Rank 0: the merged profile of a job of `size` ranks of which only
/// `ranks` are in it (the others left without `MPI_Finalize`, their
/// profiles in the spill directory): the report, and the same profile in
/// the spill directory as rank 0's part, so that merging the directory
/// makes the whole job's report, which one line says.
pub fn write_partial_job(t: &Tracer, bytes: &[u8], ranks: u32, size: u32) {
    let spilled = spill_as(t, bytes, &spill_name(t));
    write_bytes(t, bytes);
    if let Some((dir, report)) = spilled {
        crate::diag::message(&[
            &format!("the report holds {ranks} of the job's {size} ranks (the others, or the rank they report to, left without MPI_Finalize); "),
            "the whole job's profiles are in ",
            &dir.to_string_lossy(),
            ": wmhcct merge ",
            &shell_word(&dir),
            " -o ",
            &shell_word(&merge_output(t, &report)),
        ]);
    }
}

/// Take this rank's profile and leave it in the spill directory.
pub fn spill(g: &Guard, t: &Tracer, reason: &str) {
    if let Some(p) = take(g, t, reason) {
        spill_profile(t, &p);
    }
}

/// Write `profile` into the job's spill directory as `rank-<r>.wmprof`.
pub fn spill_profile(t: &Tracer, profile: &Profile) {
    match wmhcct_format::encode(profile) {
        Ok(bytes) => spill_bytes(t, &bytes),
        Err(e) => crate::diag::message(&["cannot encode the profile: ", &e.to_string()]),
    }
}

/// This process as a task of a parallel launch (rank, processes), unless
/// a traced program started it (its parent's launch variables are not its
/// own).
fn launch_task(t: &Tracer) -> Option<(u32, u32)> {
    if t.descendant.load(Ordering::Acquire) {
        return None;
    }
    crate::launcher::task(|v| std::env::var(v).ok())
}

/// Whether `path` was written after this process started (a stream is
/// never a report another process wrote).
fn written_since_start(t: &Tracer, path: &Path) -> bool {
    if t.dest.is_stream(path) {
        return false;
    }
    let start = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(t.start_unix_ns);
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .is_ok_and(|m| m >= start)
}

/// Whether every process of a launch would write the same report: it is
/// named by `WMHCCT_OUT` or after the Slurm job.
fn shared_report(t: &Tracer) -> bool {
    // A stream (`/dev/null`) is not shared: each process writes into it.
    if t.dest.stream {
        return false;
    }
    t.dest.out.is_some() || std::env::var_os("SLURM_JOB_ID").is_some_and(|v| !v.is_empty())
}

/// Write this process's encoded profile into the job's spill directory as
/// `rank-<r>.wmprof` (an MPI job's rank), `rank-<r>.<launch>.wmprof` (the
/// launcher's rank and launch, before or without MPI), or
/// `pid-<pid>.wmprof` outside a launch.
pub fn spill_bytes(t: &Tracer, bytes: &[u8]) {
    let name = spill_name(t);
    let spilled = spill_as(t, bytes, &name);
    if let Some(job) = tracer::job(t) {
        // This rank takes no part in the job's reduction (any more): the
        // rank it reports to, or that reports to it, must not wait for it
        // ([`rank_left`]), also when its profile could not be written.
        let dir = spill_target(t).0;
        let _ = std::fs::create_dir_all(&dir);
        let _ =
            crate::own_file::write(&dir.join(left_mark(job.rank)), job.launch.as_bytes(), false);
    }
    if let Some((dir, report)) = spilled {
        crate::diag::message(&[
            "this process's profile left in ",
            &dir.join(&name).to_string_lossy(),
            "; merge with: wmhcct merge ",
            &shell_word(&dir),
            " -o ",
            &shell_word(&merge_output(t, &report)),
        ]);
    }
}

/// The mark a job's rank leaves in the spill directory beside its profile
/// when it takes no part in the reduction at `MPI_Finalize`: hidden, so
/// `wmhcct merge` does not look at it.
fn left_mark(rank: u32) -> String {
    format!(".rank-{rank}.left")
}

/// Whether `rank` of this process's job has left its mark: one that names
/// this job's launch (rank 0's at `MPI_Init`), so that a mark of another
/// job that shares the spill directory (one `WMHCCT_OUT`, an earlier run)
/// is not this job's, whatever the clocks say.
pub fn rank_left(t: &Tracer, rank: u32) -> bool {
    let Some(job) = tracer::job(t) else {
        return false;
    };
    std::fs::read(spill_target(t).0.join(left_mark(rank))).is_ok_and(|m| m == job.launch.as_bytes())
}

/// This process's file name in the spill directory.
fn spill_name(t: &Tracer) -> String {
    if let Some(job) = tracer::job(t) {
        // The MPI job's own spill directory (rank 0 chose a free report
        // name at MPI_Init).
        return format!("rank-{}.wmprof", job.rank);
    }
    match launch_task(t) {
        Some((r, _)) => task_file_name(r),
        None => format!("pid-{}.wmprof", std::process::id()),
    }
}

/// The file name of task `rank` of this process's launch in the spill
/// directory (`launcher::task_file_name`).
fn task_file_name(rank: u32) -> String {
    crate::launcher::task_file_name(rank, &crate::launcher::task_launch_id())
}

/// Write `bytes` into the job's spill directory as `name`, the process's
/// final profile there: a snapshot of it under another name is removed.
/// Returns the directory and the report a merge of it makes (`None`, said,
/// on failure).
fn spill_as(t: &Tracer, bytes: &[u8], name: &str) -> Option<(PathBuf, PathBuf)> {
    let written = write_spill(t, bytes, name)?;
    let path = written.0.join(name);
    if let Some(old) = own_snapshot(t).filter(|s| s.path != path) {
        remove_snapshot(&old);
    }
    Some(written)
}

/// The job's spill directory and the report a merge of it makes.
fn spill_target(t: &Tracer) -> (PathBuf, PathBuf) {
    let report = tracer::job(t)
        .map(|j| j.report)
        .unwrap_or_else(|| job_report_path(t));
    (spill_dir(t, &report), report)
}

/// Write `bytes` into the job's spill directory as `name`; returns the
/// directory and the report a merge of it makes (`None`, said, on failure).
fn write_spill(t: &Tracer, bytes: &[u8], name: &str) -> Option<(PathBuf, PathBuf)> {
    let (dir, report) = spill_target(t);
    let path = dir.join(name);
    // Written under a temporary name and renamed: a rank killed while
    // writing (mpirun tears the job down once one rank is gone) leaves no
    // truncated `*.wmprof` for `wmhcct merge` to trip over.
    let tmp = dir.join(format!(".{name}.tmp"));
    let attempt = || -> std::io::Result<()> {
        std::fs::create_dir_all(&dir)?;
        crate::own_file::write(&tmp, bytes, false)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .inspect_err(|_| {
                // Disk full: do not leave a partial profile behind.
                let _ = std::fs::remove_file(&tmp);
            })
    };
    // Another process that removed its last snapshot removes the default
    // directory when it is empty, possibly between its making here and the
    // write: made again, once.
    let result = attempt()
        .or_else(|e| match e.kind() {
            std::io::ErrorKind::NotFound => attempt(),
            _ => Err(e),
        })
        .map_err(|e| e.to_string());
    match result {
        Ok(()) => Some((dir, report)),
        Err(e) => {
            crate::diag::message(&["cannot write ", &path.to_string_lossy(), ": ", &e]);
            None
        }
    }
}

/// Take a snapshot when the live heap has reached `core.snapshot_at`
/// (`WMHCCT_SNAPSHOT`, then each time it has grown by half since the last
/// one): the profile as it stands, left in the spill directory under the
/// name the process's own spill file would have, where `wmhcct merge` and
/// `wmhcct report` read it. So a process killed without warning, by
/// SIGKILL or the kernel's OOM killer, leaves what made its heap that
/// large. Called with the core lock held, in normal context (an event's
/// recording, or the collector thread between batches:
/// [`snapshot_ordered`]); nothing is said unless the file cannot be
/// written, after which no more are taken. The normal end replaces or
/// removes it ([`forget_snapshot`], [`spill_as`]).
pub fn snapshot_if_due(t: &Tracer, core: &mut Core) {
    let live = core.collector.live_bytes();
    if live < core.snapshot_at || tracer::running().is_none() {
        return;
    }
    core.snapshot_at = live.saturating_add(live / 2);
    tracer::apply_all_repeats(t, core);
    let bytes = match wmhcct_format::encode(&build(t, core, "snapshot")) {
        Ok(b) => b,
        Err(e) => {
            crate::diag::message(&["cannot encode a snapshot: ", &e.to_string()]);
            core.snapshot_at = u64::MAX;
            return;
        }
    };
    let name = spill_name(t);
    // A directory the tracer made for its snapshots goes with them, and so
    // does the default one beside the report, which only tracers make: in a
    // job another rank may have made it, and whichever rank removes the
    // last snapshot in it removes it (until 2026-11-27 only the rank that
    // made it tried, and left it when the others' were still there). One
    // that `WMHCCT_SPILL_DIR` names and that was there stays.
    let target = spill_target(t).0;
    let pid = std::process::id();
    let made = !target.is_dir()
        || t.config.spill_dir.is_none()
        || t.snapshot.lock().as_ref().is_some_and(|s| {
            s.pid == pid && s.made_dir && s.path.parent() == Some(target.as_path())
        });
    let Some((dir, _)) = write_spill(t, &bytes, &name) else {
        core.snapshot_at = u64::MAX;
        return;
    };
    let latest = Snapshot {
        pid,
        path: dir.join(&name),
        made_dir: made,
    };
    let previous = t.snapshot.lock().replace(latest.clone());
    // The name changes when MPI_Init gives the rank (`pid-…` → `rank-…`).
    if let Some(old) = previous {
        if old.pid == latest.pid && old.path != latest.path {
            remove_snapshot(&old);
        }
    }
}

/// [`snapshot_if_due`] with a collector thread, from it or from a thread
/// whose allocation may have reached the threshold (`Front::allocated`):
/// with the front lock too, so that every record is applied first and the
/// recording threads' statistics are in the snapshot.
pub fn snapshot_ordered(t: &Tracer) {
    let mut ordered = tracer::lock_ordered(t);
    tracer::settle(&mut ordered);
    snapshot_if_due(t, &mut ordered);
    tracer::rearm(&mut ordered);
}

/// The latest snapshot a process left.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// The process that wrote it (a forked child inherits the record, not
    /// the file).
    pid: u32,
    path: PathBuf,
    /// Its directory goes when it is empty: the tracer made it, or it is
    /// the default one beside the report ([`snapshot_if_due`]).
    made_dir: bool,
}

/// This process's snapshot, if it left one (the record is cleared).
fn own_snapshot(t: &Tracer) -> Option<Snapshot> {
    let mut rec = t.snapshot.lock();
    match rec.take() {
        Some(s) if s.pid == std::process::id() => Some(s),
        other => {
            *rec = other;
            None
        }
    }
}

/// The process ended normally and its report is written: its snapshot
/// goes, and the spill directory too if the snapshot made it and nothing
/// else is in it now.
pub fn forget_snapshot(t: &Tracer) {
    if let Some(s) = own_snapshot(t) {
        remove_snapshot(&s);
    }
}

fn remove_snapshot(s: &Snapshot) {
    let _ = std::fs::remove_file(&s.path);
    if let Some(dir) = s.path.parent().filter(|_| s.made_dir) {
        // Fails, as it should, when other files are in it.
        let _ = std::fs::remove_dir(dir);
    }
}

/// Write the encoded profile next to `report` and run `wmhcct convert`;
/// say where the report is when `announce`, and always say what failed.
fn convert(t: &Tracer, bytes: &[u8], report: &Path, announce: bool) {
    let moved;
    let mut report = report;
    if t.dest.is_stream(report) && !t.dest.pinned_intact() {
        // `WMHCCT_OUT=/dev/stdout`, and the program closed every descriptor
        // or took the tracer's duplicate's number: the default name.
        moved = t.dest.default_report(std::process::id());
        crate::diag::message(&[
            "cannot write the report into ",
            &shown_report(t, report).to_string_lossy(),
            ": the program closed that descriptor; writing it to ",
            &moved.to_string_lossy(),
        ]);
        report = &moved;
    }
    let stream = t.dest.is_stream(report);
    let mut prof = output::profile_path(report, stream);
    if t.dest.make_dir {
        // `WMHCCT_OUT=dir/`: made now (an error shows in the write below).
        let _ = std::fs::create_dir_all(&t.dest.dir);
    } else if !stream && !t.descendant.load(Ordering::Acquire) {
        // A report path whose directory is missing gets it, as the spill
        // directory beside it does (an error shows in the write below).
        // Until 2026-11-27 a job that ended normally lost its report there,
        // while one with a rank that left wrote its spill files. Not for a
        // traced program's descendants (a relative `WMHCCT_OUT` is theirs
        // from their own working directory, where it would scatter
        // directories through a build tree), nor through `..` (a typo's
        // directory would be made, and left empty).
        let up = report
            .components()
            .any(|c| c == std::path::Component::ParentDir);
        if let Some(dir) = report.parent().filter(|d| !d.as_os_str().is_empty() && !up) {
            let _ = std::fs::create_dir_all(dir);
        }
    }
    // A profile of that name is another process's, converting into the
    // same report at the same time (two programs with one `WMHCCT_OUT`),
    // or one kept from an earlier run whose conversion failed: this one
    // takes a name of its own. Until 2026-11-27 it took the other's place:
    // one process's data was lost and the other's converter found no
    // profile.
    let written = match crate::own_file::write(&prof, bytes, !stream) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            prof = output::profile_path_of(report, std::process::id());
            crate::own_file::write(&prof, bytes, false)
        }
        other => other,
    };
    if let Err(e) = written {
        // Disk full: do not leave a truncated profile behind.
        let _ = std::fs::remove_file(&prof);
        crate::diag::message(&[
            "cannot write the profile ",
            &prof.to_string_lossy(),
            ": ",
            &e.to_string(),
        ]);
        return;
    }
    let manual = format!(
        "wmhcct convert {} -o {} --remove-input",
        shell_word(&prof),
        shell_word(&shown_report(t, report))
    );
    let Some(bin) = converter(t) else {
        crate::diag::message(&[
            "profile written to ",
            &prof.to_string_lossy(),
            " (wmhcct binary not found; set WMHCCT_BIN); convert it with: ",
            &manual,
        ]);
        return;
    };
    let args = [
        std::ffi::OsStr::new("convert"),
        prof.as_os_str(),
        std::ffi::OsStr::new("-o"),
        report.as_os_str(),
        std::ffi::OsStr::new("--remove-input"),
    ];
    let limit = t
        .config
        .convert_timeout_s
        .map(std::time::Duration::from_secs);
    let status = crate::quiet_child::run(&bin, &args, "LD_PRELOAD", limit);
    let success = |o: &crate::quiet_child::Finished| {
        libc::WIFEXITED(o.status) && libc::WEXITSTATUS(o.status) == 0
    };
    match status {
        Ok(o) if o.stopped => {
            // Its half-written report, if any (`wmhcct`'s temporary file
            // beside the report, named with its pid), goes with it.
            if !stream {
                let _ =
                    std::fs::remove_file(wmhcct_format::report_temp_beside(report, o.pid as u32));
            }
            let secs = t.config.convert_timeout_s.unwrap_or(0).to_string();
            crate::diag::message(&[
                "could not convert the profile (",
                &bin.to_string_lossy(),
                " convert did not finish within ",
                &secs,
                " s and was stopped; WMHCCT_CONVERT_TIMEOUT sets the limit); \
                 profile kept, convert it with: ",
                &manual,
            ]);
        }
        Ok(o) if success(&o) && (stream || report.is_file()) => {
            if announce {
                announce_report(t, report);
            }
        }
        Ok(o) if success(&o) => crate::diag::message(&[
            "could not convert the profile (",
            &bin.to_string_lossy(),
            " succeeded but wrote no report); profile kept, convert it with: ",
            &manual,
        ]),
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            let first = match err.lines().next().map(str::trim) {
                Some(line) if !line.is_empty() => line.to_string(),
                // It said nothing (not our converter?): how it ended.
                _ if libc::WIFEXITED(o.status) => {
                    format!(
                        "{} exited with status {} and no message",
                        bin.to_string_lossy(),
                        libc::WEXITSTATUS(o.status)
                    )
                }
                _ => format!(
                    "{} was killed by signal {}",
                    bin.to_string_lossy(),
                    libc::WTERMSIG(o.status)
                ),
            };
            crate::diag::message(&[
                "could not convert the profile (",
                &first,
                "); profile kept, convert it with: ",
                &manual,
            ]);
        }
        Err(e) => crate::diag::message(&[
            "could not run ",
            &bin.to_string_lossy(),
            " (",
            &e.to_string(),
            "); profile kept, convert it with: ",
            &manual,
        ]),
    }
}
