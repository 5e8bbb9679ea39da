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

#[test]
fn a_signal_to_wmhcct_run_goes_to_the_command() {
    let w = WorkDir::new("run-signals");
    let exe = compile("rel_sigterm.c", &w.path, Opt::Debug, &["-pthread"]);
    for (name, sig, reason) in [("TERM", 15, "sigterm"), ("INT", 2, "sigint")] {
        let h5 = w.join(format!("fwd-{name}.h5"));
        let mut c = command(bin(), &["run", "--out"], &w.path);
        c.arg(&h5).arg("--").arg(&exe).args(["loop", "1"]);
        let mut run = spawn_until_line(&mut c, "looping\n");
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
            panic!("SIG{name}: wmhcct run still there after 60 s");
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
        assert!(total_count(&r, "malloc") > 1000, "{}", alloc_totals(&r));
    }
}

#[test]
fn wmhcct_run_dies_of_the_signal_the_command_died_of() {
    let w = WorkDir::new("run-dies-of");
    let exe = compile("rel_sigterm.c", &w.path, Opt::Debug, &["-pthread"]);
    for (name, sig) in [("TERM", 15), ("INT", 2), ("HUP", 1)] {
        let h5 = w.join(format!("raise-{name}.h5"));
        let mut c = command(bin(), &["run", "--out"], &w.path);
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
