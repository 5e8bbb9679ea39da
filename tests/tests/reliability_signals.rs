//! Signals under the tracer (issue 8).
//!
//! SIGTERM: the tracer installs a handler when the program's disposition
//! is the default (`interpose/src/signals.rs`). On SIGTERM the process's
//! report is written (an MPI rank leaves `rank-<r>.wmprof` in the job's
//! spill directory), then the default action is restored and SIGTERM
//! re-sent: the process still dies "killed by SIGTERM" (exit status 143).
//! Recovered: every event up to the signal, with `reason` "sigterm". A
//! program's own SIGTERM handler (or SIG_IGN) wins and is left alone.
//! SIGINT (Ctrl-C) and SIGHUP (the terminal closing) likewise, with
//! `reason` "sigint" and "sighup" (exit status 130 and 129).
//!
//! Crashes (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT): likewise, where
//! the disposition is the default, the report is written with the signal's
//! name as `reason`, and the process dies of the signal as it would have.
//!
//! Timer signals: a SIGALRM handler runs every 200 µs while the main loop
//! allocates. Without allocation in the handler the totals are exact; with
//! malloc/free in the handler there is no deadlock and the main loop is
//! still exact (handler events that interrupt the tracer itself go to glibc
//! untraced: see the README, "Guarantees and limits").

mod rel_common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use rel_common::*;
use wmhcct_e2e::*;

/// The termination signals the tracer handles: SIGTERM (a job scheduler,
/// `mpirun`), SIGINT (Ctrl-C) and SIGHUP (the terminal closing), with the
/// name `rel_sigterm.c` takes, the signal number and the report's reason.
const TERMINATIONS: [(&str, i32, &str); 3] = [
    ("TERM", 15, "sigterm"),
    ("INT", 2, "sigint"),
    ("HUP", 1, "sighup"),
];

/// `env` arguments that run `exe args` with the three signals at their
/// default disposition, whatever the test run inherited (a background
/// job's SIGINT is ignored, and an ignored signal is left alone).
fn with_defaults(exe: &Path, args: &[&str]) -> Vec<String> {
    let mut v = vec![
        "--default-signal=TERM,INT,HUP".to_string(),
        exe.display().to_string(),
    ];
    v.extend(args.iter().map(|a| a.to_string()));
    v
}

#[test]
fn sigterm_raised_writes_the_report_and_still_dies_by_sigterm() {
    let w = WorkDir::new("rel-sigterm-raise");
    let exe = compile("rel_sigterm.c", &w.path, Opt::Debug, &["-pthread"]);
    for (name, sig, reason) in TERMINATIONS {
        let args = with_defaults(&exe, &["raise", "1000", name]);
        let native = run_plain("env", &args, &w.path);
        assert_eq!(native.code, 128 + sig, "{name}: {}", native.describe());
        let h5 = w.join(format!("term-{name}.h5"));
        let out = run_traced("env", &args, &w.path, &h5, &[]);
        assert_eq!(
            out.code,
            128 + sig,
            "killed by SIG{name}: {}",
            out.describe()
        );
        assert_eq!(out.stdout, native.stdout);
        assert_clean_stderr(&out, &h5);
        let r = report_json(&h5);
        assert_eq!(r["reason"], reason, "{}", r["reason"]);
        let c = context_with(&r, "malloc", "rel_before_term");
        assert_eq!(u64_of(&c["count"]), 1000, "{c}");
        assert_eq!(u64_of(&c["leaked_bytes"]), 100_000, "{c}");
        figure(
            "sigterm_raised",
            format!(
                "SIG{name}: exit {} (native {}); recovered {} mallocs, reason {}",
                out.code,
                native.code,
                total_count(&r, "malloc"),
                r["reason"]
            ),
        );
    }
}

/// SIGTERM from outside while 4 threads allocate as fast as they can (the
/// signal usually lands inside the tracer: the profile is then written by
/// the next thread that leaves it). Six rounds, SIGTERM, SIGINT and SIGHUP
/// twice each; each must die by its signal within 60 s with a readable
/// report.
#[test]
fn sigterm_from_outside_while_threads_allocate() {
    let t = "sigterm_from_outside_while_threads_allocate";
    let w = WorkDir::new("rel-sigterm-kill");
    let exe = compile("rel_sigterm.c", &w.path, Opt::Debug, &["-pthread"]);
    for round in 0..6u64 {
        let (name, sig, reason) = TERMINATIONS[round as usize % 3];
        let h5 = w.join(format!("kill{round}.h5"));
        let mut c = command("env", &with_defaults(&exe, &["loop", "3"]), &w.path);
        c.env("LD_PRELOAD", lib()).env("WMHCCT_OUT", &h5);
        let mut child = spawn_until_line(&mut c, "looping\n");
        std::thread::sleep(Duration::from_millis(200 + 100 * round));
        let start = Instant::now();
        let k = Command::new("kill")
            .args([&format!("-{name}"), &child.id().to_string()])
            .status()
            .expect("kill");
        assert!(k.success());
        let Some(status) = wait_within(&mut child, Duration::from_secs(60)) else {
            let _ = child.kill();
            panic!("round {round}: still alive 60 s after SIG{name} (deadlock?)");
        };
        let took = start.elapsed();
        let mut err = String::new();
        let _ = std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            status.signal(),
            Some(sig),
            "round {round}: {status:?}\n{err}"
        );
        assert_only_closing_line(&err, &h5, &format!("round {round}"));
        let r = report_json(&h5);
        assert_eq!(r["reason"], reason);
        let m = total_count(&r, "malloc");
        let f = total_count(&r, "free");
        assert!(m > 1000, "round {round}: {}", alloc_totals(&r));
        // Live blocks at the signal: the 4 rings of 32, and start-up's.
        let live = u64_of(&r["heap"]["live_blocks"]);
        assert!(live <= 4 * 32 + 16, "round {round}: {}", r["heap"]);
        figure(
            t,
            format!(
                "round {round}: died by SIG{name} {:.0} ms after the signal; recovered {m} mallocs, {f} frees, {live} live blocks",
                took.as_secs_f64() * 1e3
            ),
        );
    }
}

#[test]
fn own_sigterm_handler_wins() {
    let w = WorkDir::new("rel-sigterm-own");
    let exe = compile("rel_sigterm.c", &w.path, Opt::Debug, &["-pthread"]);
    let native = run_plain(&exe, &["own", "500"], &w.path);
    assert_eq!(native.code, 3, "{}", native.describe());
    assert_eq!(native.stdout, "own handler\n");
    let h5 = w.join("own.h5");
    let out = run_traced(&exe, &["own", "500"], &w.path, &h5, &[]);
    assert_eq!(out.code, 3, "{}", out.describe());
    assert_eq!(out.stdout, native.stdout);
    assert_clean_stderr(&out, &h5);
    let r = report_json(&h5);
    assert_eq!(r["reason"], "exit", "the program's handler exited normally");
    let c = context_with(&r, "malloc", "rel_before_term");
    assert_eq!(u64_of(&c["count"]), 500);
}

/// An ignored signal stays ignored (`nohup`'s SIGHUP, a background job's
/// SIGINT): the program goes on and exits normally.
#[test]
fn ignored_sigterm_stays_ignored() {
    let w = WorkDir::new("rel-sigterm-ignore");
    let exe = compile("rel_sigterm.c", &w.path, Opt::Debug, &["-pthread"]);
    for (name, _, _) in TERMINATIONS {
        let h5 = w.join(format!("ign-{name}.h5"));
        let out = run_traced(&exe, &["ignore", "100", name], &w.path, &h5, &[]);
        assert_eq!(out.code, 0, "{name}: {}", out.describe());
        assert_eq!(out.stdout, "still alive\n");
        assert_clean_stderr(&out, &h5);
        assert_eq!(report_json(&h5)["reason"], "exit");
    }
}

fn mpicc(src: &str, dir: &Path) -> std::path::PathBuf {
    let exe = dir.join(Path::new(src).file_stem().unwrap());
    let out = Command::new("mpicc")
        .args(["-g", "-O0", "-fno-omit-frame-pointer", "-o"])
        .arg(&exe)
        .arg(root().join("tests/programs").join(src))
        .output()
        .expect("mpicc (run scripts/setup.sh)");
    assert!(
        out.status.success(),
        "mpicc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

fn mpirun(exe: &Path, dir: &Path, env: &[(&str, &str)]) -> Output {
    mpirun_args(exe, &[], dir, env)
}

fn mpirun_args(exe: &Path, args: &[&str], dir: &Path, env: &[(&str, &str)]) -> Output {
    let mut c = command("mpirun", &["-np", "4", "--oversubscribe"], dir);
    c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    for (k, v) in env {
        c.arg("-x").arg(format!("{k}={v}"));
    }
    c.arg(exe).args(args);
    run_cmd(&mut c, Duration::from_secs(180))
}

/// 4 ranks; rank 1 raises SIGTERM after its allocations, mpirun then
/// terminates the others. Every rank that got SIGTERM leaves its profile in
/// the spill directory; `wmhcct merge` makes the job report.
#[test]
fn mpi_rank_killed_by_sigterm_leaves_a_readable_spill() {
    let t = "mpi_rank_killed_by_sigterm";
    let w = WorkDir::new("rel-mpi-term");
    let exe = mpicc("rel_mpi_term.c", &w.path);
    let native = mpirun(&exe, &w.path, &[]);
    let report = w.join("job.h5");
    let lib = lib().to_string_lossy().into_owned();
    let rep = report.to_string_lossy().into_owned();
    let out = mpirun(&exe, &w.path, &[("LD_PRELOAD", &lib), ("WMHCCT_OUT", &rep)]);
    assert_eq!(
        out.code,
        native.code,
        "mpirun's exit code unchanged: native {}\n{}",
        native.describe(),
        out.describe()
    );
    assert_ne!(out.code, 0);
    assert_eq!(out.stdout, native.stdout, "the job's stdout is unchanged");
    let spill = w.join("job.h5.spill");
    let mut ranks: Vec<String> = std::fs::read_dir(&spill)
        .unwrap_or_else(|e| {
            panic!(
                "no spill directory {}: {e}\n{}",
                spill.display(),
                out.describe()
            )
        })
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    ranks.sort();
    assert!(
        ranks.contains(&"rank-1.wmprof".to_string()),
        "the killed rank's profile: {ranks:?}\n{}",
        out.describe()
    );
    let merged = w.join("merged.h5");
    let m = run_cmd(
        Command::new(bin())
            .arg("merge")
            .arg(&spill)
            .arg("-o")
            .arg(&merged),
        TIMEOUT,
    );
    assert_eq!(m.code, 0, "{}", m.describe());
    let r = report_json(&merged);
    assert_eq!(r["reason"], "sigterm");
    // rank r allocated (r+1)·100 blocks in rel_rank_work.
    let present: Vec<u64> = ranks
        .iter()
        .filter_map(|n| {
            n.strip_prefix("rank-")?
                .strip_suffix(".wmprof")?
                .parse()
                .ok()
        })
        .collect();
    let want: u64 = present.iter().map(|r| (r + 1) * 100).sum();
    let got: u64 = contexts_with(&r, "malloc", "rel_rank_work")
        .iter()
        .map(|c| u64_of(&c["count"]))
        .sum();
    assert_eq!(got, want, "ranks {present:?}: {}", summary(&r));
    figure(
        t,
        format!(
            "mpirun exit {} (native {}); profiles recovered from ranks {present:?}; \
             rel_rank_work mallocs in the merged report {got}",
            out.code, native.code
        ),
    );
}

fn sigalrm(mode: &str, n: u64) {
    let t = format!("sigalrm_{mode}");
    let w = WorkDir::new(&format!("rel-sigalrm-{mode}"));
    let exe = compile("rel_sigalrm.c", &w.path, Opt::Debug, &[]);
    let n_s = n.to_string();
    let native = run_plain(&exe, &[mode, &n_s], &w.path);
    assert_eq!(native.code, 0, "{}", native.describe());
    let h0 = w.join("base.h5");
    let base = run_traced(&exe, &[mode, "0"], &w.path, &h0, &[]);
    assert_eq!(base.code, 0, "{}", base.describe());
    let r0 = report_json(&h0);
    let h5 = w.join("alarm.h5");
    // Every context kept (exact CCT): how many handler calls land outside
    // the tracer, and so get a stack of their own, varies from run to run
    // (~200 of ~1000), and their stacks continue into the code each one
    // interrupted, so each of their contexts may be too cold to be kept
    // at the default φ.
    let out = run_traced_timeout(
        &exe,
        &[mode, &n_s],
        &w.path,
        &h5,
        &[("WMHCCT_EXACT", "1")],
        Duration::from_secs(120),
    );
    assert_eq!(out.code, 0, "{}", out.describe());
    assert_eq!(out.stdout, native.stdout, "output unchanged");
    let ticks = number_after(&out.stderr, "ticks").unwrap();
    let handler = number_after(&out.stderr, "handler_allocs").unwrap();
    let r = report_json(&h5);
    // The main loop's own context: a handler that interrupted the loop's
    // code (not its malloc) has a stack through rel_main_loop too.
    let main: Vec<&Value> = contexts_with(&r, "malloc", "rel_main_loop")
        .into_iter()
        .filter(|c| frame_index(c, "rel_handler_alloc").is_none())
        .collect();
    assert_eq!(main.len(), 1, "one main-loop context: {}", summary(&r));
    let main = main[0];
    assert_eq!(u64_of(&main["count"]), n, "the main loop, exactly: {main}");
    let extra = total_count(&r, "malloc").saturating_sub(total_count(&r0, "malloc") + n);
    let deferred = u64_of(&r["tracer"]["untraced_events"]);
    figure(
        &t,
        format!(
            "{n} main-loop mallocs, {ticks} SIGALRM ticks, {handler} handler mallocs, {extra} of them counted \
             ({} made while the handler interrupted the tracer, recorded when it returned); \
             {:.2} s traced, {:.2} s native",
            deferred,
            out.elapsed.as_secs_f64(),
            native.elapsed.as_secs_f64()
        ),
    );
    assert!(ticks > 0, "the timer ran: {}", out.stderr);
    if mode == "alloc" {
        assert!(handler > 0, "the handler allocated: {}", out.stderr);
        // Handlers that land inside the tracer (most do: it is where the
        // main loop spends its time) are queued and recorded on the way out.
        assert!(deferred > 0, "no handler call interrupted the tracer");
        // Under the handler, the C library's signal trampoline, which
        // stripped glibc does not name, is named as debuggers name it.
        let in_handler = contexts_with(&r, "malloc", "rel_handler_alloc");
        assert!(!in_handler.is_empty(), "{}", summary(&r));
        for c in in_handler {
            let below = frame_index(c, "on_alarm").map(|i| i + 1);
            assert!(
                below.is_some() && below == frame_index(c, "<signal handler called>"),
                "the signal frame under on_alarm: {c}"
            );
        }
    }
    // Nothing lost: every call of main and of the handler, exactly.
    assert_eq!(
        total_count(&r, "malloc") - total_count(&r0, "malloc"),
        n + handler,
        "malloc totals exact: {}",
        alloc_totals(&r)
    );
    assert_eq!(
        total_count(&r, "free") - total_count(&r0, "free"),
        n + handler,
        "free totals exact: {}",
        alloc_totals(&r)
    );
    // The handler frees what it allocates within the same call: no block is
    // mistaken for a leak or an unknown free.
    assert_eq!(u64_of(&r["heap"]["unknown_frees"]), 0, "{}", r["heap"]);
}

#[test]
fn timer_signal_handler_without_allocation_totals_exact() {
    sigalrm("quiet", 1_000_000);
}

#[test]
fn timer_signal_handler_allocating_no_deadlock() {
    sigalrm("alloc", 1_000_000);
}

/// A crashing program (a fault, abort(), glibc's abort on a double free, a
/// crash signal sent with kill, a fault on one thread while another
/// allocates) dies of the same signal
/// as without the tracer, after the tracer wrote its report with every
/// call up to the crash. A program's own SIGSEGV handler wins, also one
/// installed only over the default disposition (as Rust's runtime and
/// Open MPI do: the tracer's handlers look like the default to them).
/// (Such a program used to leave no report.)
#[test]
fn crashing_program_writes_the_report_and_dies_of_its_signal() {
    let w = WorkDir::new("rel-crash");
    let exe = compile("rel_crash.c", &w.path, Opt::Release, &["-pthread"]);
    // No core files: `ulimit -c 0`, then the program.
    let script = format!("ulimit -c 0; exec '{}' \"$1\"", exe.display());
    for (mode, code, reason) in [
        ("segv", 128 + 11, "sigsegv"),
        ("abort", 128 + 6, "sigabrt"),
        ("double_free", 128 + 6, "sigabrt"),
        ("fpe", 128 + 8, "sigfpe"),
        ("kill", 128 + 7, "sigbus"),
        ("thread", 128 + 11, "sigsegv"),
        ("own", 0, "exit"),
        ("polite", 42, "_exit"),
        ("polite_signal", 42, "_exit"),
        // Until 2026-11-27 these three returned the tracer's handler.
        ("polite_sysv", 42, "_exit"),
        ("polite_bsd", 42, "_exit"),
        ("polite_sigset", 42, "_exit"),
    ] {
        let args = ["-c", script.as_str(), "sh", mode];
        let native = run_plain("/bin/sh", &args, &w.path);
        assert_eq!(native.code, code, "{mode}: {}", native.describe());
        let h5 = w.join(format!("{mode}.h5"));
        let out = run_traced(Path::new("/bin/sh"), &args, &w.path, &h5, &[]);
        assert_eq!(out.code, code, "{mode}: {}", out.describe());
        assert_eq!(out.stdout, native.stdout, "{mode}");
        // What the program (or glibc) says on stderr is still said.
        for line in native.stderr.lines().filter(|l| !l.contains("core dumped")) {
            assert!(
                out.stderr.contains(line),
                "{mode}: {line:?}\n{}",
                out.stderr
            );
        }
        assert_only_closing_line(&out.stderr, &h5, mode);
        let r = report_json(&h5);
        assert_eq!(r["reason"], reason, "{mode}");
        let work = context_with(&r, "malloc", "rel_crash_work");
        assert_eq!(u64_of(&work["count"]), 100, "{mode}: {work}");
        let keep = context_with(&r, "malloc", "rel_crash_keep");
        assert_eq!(u64_of(&keep["leaked_bytes"]), 5000, "{mode}: {keep}");
        assert_live_blocks_balance(&r, mode);
        let unknown = u64_of(&r["heap"]["unknown_frees"]);
        assert_eq!(unknown, u64::from(mode == "double_free"), "{mode}");
        if mode == "thread" {
            let spin = context_with(&r, "malloc", "rel_crash_spin");
            assert!(u64_of(&spin["count"]) > 0, "{spin}");
        }
    }
}

/// A rank that crashes in an Open MPI job: Open MPI's own crash handler
/// (installed in `MPI_Init` only where the disposition is the default, which
/// the tracer's handler looks like) still prints its backtrace, and mpirun's
/// exit code is unchanged.
#[test]
fn mpi_rank_crash_keeps_open_mpi_backtrace() {
    let w = WorkDir::new("rel-mpi-crash");
    let exe = mpicc("rel_mpi_term.c", &w.path);
    let native = mpirun_args(&exe, &["segv"], &w.path, &[]);
    let banner = "*** Process received signal ***";
    assert!(native.stderr.contains(banner), "{}", native.describe());
    let report = w.join("job.h5");
    let lib = lib().to_string_lossy().into_owned();
    let rep = report.to_string_lossy().into_owned();
    let out = mpirun_args(
        &exe,
        &["segv"],
        &w.path,
        &[("LD_PRELOAD", &lib), ("WMHCCT_OUT", &rep)],
    );
    assert_eq!(out.code, native.code, "{}", out.describe());
    assert_eq!(out.stdout, native.stdout);
    assert!(out.stderr.contains(banner), "{}", out.describe());
    assert!(
        out.stderr.contains("Segmentation fault"),
        "{}",
        out.describe()
    );
}

/// A crash whose report cannot be finished (here the converter never
/// returns; in life, a heap so corrupt that the tracer's tables loop): the
/// process still dies of its signal, 60 s after the crash, with the
/// profile kept for `wmhcct convert`, and its output pipes close then.
#[test]
fn crash_whose_report_hangs_still_dies_of_its_signal() {
    let w = WorkDir::new("rel-crash-hang");
    let exe = compile("rel_crash.c", &w.path, Opt::Release, &["-pthread"]);
    let stuck = write_script(&w.path, "stuck-converter", "sleep 150\n");
    let script = format!("ulimit -c 0; exec '{}' segv", exe.display());
    let h5 = w.join("segv.h5");
    let t0 = Instant::now();
    let out = run_traced_timeout(
        Path::new("/bin/sh"),
        &["-c", script.as_str()],
        &w.path,
        &h5,
        &[("WMHCCT_BIN", &stuck.to_string_lossy())],
        Duration::from_secs(150),
    );
    assert_eq!(out.code, 128 + 11, "{}", out.describe());
    assert!(
        out.elapsed >= Duration::from_secs(55) && out.elapsed < Duration::from_secs(120),
        "{:?}",
        out.elapsed
    );
    // Nothing of the tracer's (the converter, still running) holds the
    // program's output pipes open after it died.
    assert!(
        t0.elapsed() < Duration::from_secs(120),
        "{:?}",
        t0.elapsed()
    );
    assert!(w.join("segv.h5.wmprof").is_file(), "the profile is kept");
    figure(
        "crash_whose_report_hangs",
        format!("died of SIGSEGV after {:.1} s", out.elapsed.as_secs_f64()),
    );
}

/// SIGTERM to a process whose report cannot be finished (here the converter
/// never returns; in life a converter stuck on a hung file system, or a
/// lock the interrupted code holds): a timer sends the signal again 60 s
/// after it came, and the process dies of it then, with the profile kept.
/// A second SIGTERM 3 s after the first does not cut the report short.
/// Before, the handler waited for the converter as long as it ran (here
/// 150 s; forever for one that hangs), and every further SIGTERM was
/// ignored.
#[test]
fn sigterm_whose_report_hangs_still_dies_of_its_signal() {
    let w = WorkDir::new("rel-sigterm-hang");
    let exe = compile("rel_sigterm.c", &w.path, Opt::Debug, &["-pthread"]);
    let stuck = write_script(&w.path, "stuck-converter", "sleep 150\n");
    let h5 = w.join("term.h5");
    let mut c = command("env", &with_defaults(&exe, &["loop", "1"]), &w.path);
    c.env("LD_PRELOAD", lib())
        .env("WMHCCT_OUT", &h5)
        .env("WMHCCT_BIN", &stuck);
    let mut child = spawn_until_line(&mut c, "looping\n");
    let kill = |pid: u32| {
        let k = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("kill");
        assert!(k.success());
    };
    let start = Instant::now();
    kill(child.id());
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        child.try_wait().unwrap().is_none(),
        "ended before its report"
    );
    kill(child.id());
    let Some(status) = wait_within(&mut child, Duration::from_secs(140)) else {
        let _ = child.kill();
        panic!("still alive 140 s after SIGTERM");
    };
    let took = start.elapsed();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(15), "{status:?}");
    assert!(
        took >= Duration::from_secs(55) && took < Duration::from_secs(120),
        "{took:?}"
    );
    assert!(w.join("term.h5.wmprof").is_file(), "the profile is kept");
    figure(
        "sigterm_whose_report_hangs",
        format!("died of SIGTERM {:.1} s after it", took.as_secs_f64()),
    );
}
