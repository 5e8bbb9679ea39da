//! `wmhcct run` passes signals sent to it on to the command, and ends as
//! the command ended: killed by the same signal. Before, a SIGTERM to
//! `wmhcct run` killed it and left the command running on its own, and a
//! command killed by a signal made it exit with a plain status 128 + N.

use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::time::Duration;

use wmhcct_e2e::*;

/// The running `wmhcct run`'s one child.
fn child_of(pid: u32) -> u32 {
    let kids = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap();
    let kids: Vec<u32> = kids
        .split_whitespace()
        .map(|k| k.parse().unwrap())
        .collect();
    assert_eq!(kids.len(), 1, "children of wmhcct run: {kids:?}");
    kids[0]
}

fn sig_lines(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("Sig") || l.starts_with("State"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn a_signal_to_wmhcct_run_goes_to_the_command() {
    let w = WorkDir::new("run-signals");
    let exe = compile("rel_sigterm.c", &w.path, Opt::Debug, &["-pthread"]);
    for (name, sig, reason) in [("TERM", 15, "sigterm"), ("INT", 2, "sigint")] {
        let h5 = w.join(format!("fwd-{name}.h5"));
        // Through `env`, which execs it with the two signals at their
        // default: one ignored where the test runs (a background job's
        // SIGINT) stays ignored in `wmhcct run`, as it should.
        let mut c = command("env", &["--default-signal=INT,TERM"], &w.path);
        c.arg(bin())
            .args(["run", "--out"])
            .arg(&h5)
            .arg("--")
            .arg(&exe)
            .args(["loop", "1"]);
        let mut run = spawn_until_line(&mut c, "looping\n");
        // Let the command allocate for a while.
        std::thread::sleep(Duration::from_millis(300));
        let program = child_of(run.id());
        let k = Command::new("kill")
            .args([&format!("-{name}"), &run.id().to_string()])
            .status()
            .expect("kill");
        assert!(k.success());
        let Some(status) = wait_within(&mut run, Duration::from_secs(60)) else {
            let _ = run.kill();
            let _ = Command::new("kill")
                .args(["-KILL", &program.to_string()])
                .status();
            panic!(
                "SIG{name}: wmhcct run still there after 60 s; {} / command: {}",
                sig_lines(run.id()),
                sig_lines(program)
            );
        };
        let mut err = String::new();
        let _ = std::io::Read::read_to_string(&mut run.stderr.take().unwrap(), &mut err);
        assert_eq!(status.signal(), Some(sig), "SIG{name}: {status:?}\n{err}");
        assert!(
            !std::path::Path::new(&format!("/proc/{program}")).exists(),
            "SIG{name}: the command ({program}) is still there"
        );
        assert_eq!(
            err,
            format!("wmhcct: report written to {}\n", h5.display()),
            "SIG{name}"
        );
        let r = report_json(&h5);
        assert_eq!(r["reason"], reason, "SIG{name}");
        assert!(total_count(&r, "malloc") > 0, "{}", alloc_totals(&r));
    }
}

#[test]
fn wmhcct_run_dies_of_the_signal_the_command_died_of() {
    let w = WorkDir::new("run-dies-of");
    let exe = compile("rel_sigterm.c", &w.path, Opt::Debug, &["-pthread"]);
    for (name, sig) in [("TERM", 15), ("INT", 2), ("HUP", 1)] {
        let h5 = w.join(format!("raise-{name}.h5"));
        // With the signals' default actions, whatever this test was started
        // with: under `nohup` SIGHUP is ignored, and so it stays for the
        // command (`ignored_signals_stay_ignored_for_the_command`).
        let mut c = command("env", &["--default-signal=TERM,INT,HUP"], &w.path);
        c.arg(bin()).args(["run", "--out"]);
        c.arg(&h5).arg("--").arg(&exe).args(["raise", "10", name]);
        let out = c.output().expect("wmhcct run");
        assert_eq!(out.status.signal(), Some(sig), "SIG{name}: {:?}", out);
        assert_eq!(String::from_utf8_lossy(&out.stdout), "allocated 10\n");
        assert!(h5.is_file(), "SIG{name}: {:?}", out);
    }
    // A core-dumping signal: wmhcct run dies of it without a core of its own.
    let out = command(bin(), &["run", "--"], &w.path)
        .args(["bash", "-c", "ulimit -c 0; kill -SEGV $$"])
        .output()
        .expect("wmhcct run");
    assert_eq!(out.status.signal(), Some(11), "{out:?}");
    assert!(!out.status.core_dumped(), "{out:?}");
}

/// A signal ignored when `wmhcct run` starts (`nohup`'s SIGHUP, a
/// background job's SIGINT and SIGQUIT) is still ignored in the command,
/// as it would be without `wmhcct run`: it is not caught to be passed on
/// (a caught signal is reset to the default when the command starts).
#[test]
fn ignored_signals_stay_ignored_for_the_command() {
    let w = WorkDir::new("run-ignored");
    let inner = "grep -E '^Sig(Ign|Cgt)' /proc/self/status";
    let outer =
        |through: &str| format!("trap '' HUP INT QUIT; exec {through} bash -c \"exec {inner}\"");
    let native = run_plain("bash", &["-c", &outer("")], &w.path);
    let run = bin().display().to_string();
    let traced = run_plain("bash", &["-c", &outer(&format!("{run} run --"))], &w.path);
    assert_eq!(native.code, 0, "{}", native.describe());
    assert_eq!(traced.code, 0, "{}", traced.describe());
    let ign = |out: &Output| {
        let line = out
            .stdout
            .lines()
            .find(|l| l.starts_with("SigIgn:"))
            .unwrap();
        u64::from_str_radix(line["SigIgn:".len()..].trim(), 16).unwrap()
    };
    let (hup, int, quit) = (1u64 << 0, 1u64 << 1, 1u64 << 2);
    assert_eq!(
        ign(&native) & (hup | int | quit),
        hup | int | quit,
        "{}",
        native.stdout
    );
    // Signals 1–31; 32 and 33 are glibc's own (thread cancellation and
    // set*id), whose handlers glibc installs in any program that starts
    // a thread, as wmhcct run and the tracer do.
    let user = (1u64 << 31) - 1;
    assert_eq!(
        ign(&traced) & user,
        ign(&native) & user,
        "native:\n{}\ntraced:\n{}",
        native.stdout,
        traced.stdout
    );
}

/// A termination signal that lands while the program is inside glibc's
/// allocator, with the arena's lock held: the handler writes the report,
/// which must not call into `malloc` (the tracer's own allocations go to
/// its handler arena, and the directory scan for the closing line reads
/// with `getdents64`, not `opendir`). It did once, and the process hung for
/// good (`dir_entries.rs`). The program's two threads do nothing but
/// malloc and free blocks past glibc's per-thread cache, and record no
/// stacks (`--unwind none`), so a signal often lands inside glibc with the
/// lock held; each of the trials must end within 20 s.
#[test]
fn a_signal_inside_glibcs_allocator_never_hangs_the_report() {
    let w = WorkDir::new("run-signal-in-glibc");
    let exe = compile("rel_sigterm.c", &w.path, Opt::Debug, &["-pthread"]);
    for trial in 0..40 {
        let h5 = w.join(format!("t{trial}.h5"));
        let mut c = command(bin(), &["run", "--out"], &w.path);
        c.arg(&h5)
            .args(["--unwind", "none", "--"])
            .arg(&exe)
            .args(["bigloop", "1"]);
        let mut run = spawn_until_line(&mut c, "looping\n");
        let program = child_of(run.id());
        std::thread::sleep(Duration::from_millis(100 + 7 * trial));
        let k = Command::new("kill")
            .args(["-INT", &run.id().to_string()])
            .status()
            .expect("kill");
        assert!(k.success());
        let Some(status) = wait_within(&mut run, Duration::from_secs(20)) else {
            let threads = sig_lines(program);
            let _ = run.kill();
            let _ = Command::new("kill")
                .args(["-KILL", &program.to_string()])
                .status();
            panic!("trial {trial}: the command hung after SIGINT: {threads}");
        };
        assert_eq!(status.signal(), Some(2), "trial {trial}: {status:?}");
        assert!(h5.is_file(), "trial {trial}: no report");
    }
}
