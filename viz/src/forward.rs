//! `wmhcct run` stands between the caller and the command the way `timeout`
//! does: a signal sent to it goes on to the command, and when the command
//! dies of a signal, `wmhcct run` dies of the same one (after its own
//! closing line), so that a shell or batch script sees what it would have
//! seen without it (bash aborts a script whose command died of SIGINT).
//!
//! Signals from the terminal (Ctrl-C, Ctrl-\, a hang-up) are not passed on:
//! the kernel sends them to the whole foreground process group, so the
//! command has them already. Ones sent with `kill` to `wmhcct run` are;
//! one sent to the process group reaches the command twice, as with
//! `mpirun` or `srun`.

use std::process::{Child, Command, ExitStatus};
use std::sync::{Arc, Mutex};

use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitid, Id, WaitPidFlag};
use nix::unistd::Pid;
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2};
use signal_hook::iterator::exfiltrator::WithOrigin;
use signal_hook::iterator::SignalsInfo;
use signal_hook::low_level::siginfo::Cause;

/// The signals passed on to the command.
const FORWARDED: [i32; 6] = [SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2];

/// Start `cmd` and wait for it, passing signals on meanwhile.
pub fn status(cmd: &mut Command) -> std::io::Result<ExitStatus> {
    // Caught here before the start, so none is missed; the command starts
    // with its default dispositions (exec resets caught signals). A signal
    // ignored here (`nohup`'s SIGHUP, a background job's SIGINT) is left
    // ignored, so the command inherits that as it would without us.
    let ignored = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| ignored_mask(&s))
        .unwrap_or(u64::MAX);
    let caught = FORWARDED
        .into_iter()
        .filter(|&sig| ignored & (1u64 << (sig - 1)) == 0);
    let Ok(mut signals) = SignalsInfo::<WithOrigin>::new(caught) else {
        return cmd.status();
    };
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            signals.handle().close();
            return Err(e);
        }
    };
    let pid = Pid::from_raw(child.id() as i32);
    // The command's pid is ours to signal until it is reaped: the
    // forwarder checks `alive` under the lock, and it is cleared before.
    let alive = Arc::new(Mutex::new(true));
    let handle = signals.handle();
    let forwarder = {
        let alive = Arc::clone(&alive);
        std::thread::spawn(move || {
            for origin in signals.forever() {
                if origin.cause == Cause::Kernel {
                    continue;
                }
                let Ok(sig) = Signal::try_from(origin.signal) else {
                    continue;
                };
                if *alive.lock().unwrap_or_else(|e| e.into_inner()) {
                    let _ = kill(pid, sig);
                }
            }
        })
    };
    let status = wait_forwarding(&mut child, pid, &alive);
    handle.close();
    let _ = forwarder.join();
    status
}

/// Wait for the command to end without reaping it, close the forwarder's
/// way to it, then reap it.
fn wait_forwarding(
    child: &mut Child,
    pid: Pid,
    alive: &Mutex<bool>,
) -> std::io::Result<ExitStatus> {
    loop {
        match waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT) {
            Ok(_) => break,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => break,
        }
    }
    *alive.lock().unwrap_or_else(|e| e.into_inner()) = false;
    child.wait()
}

/// The ignored signals (bit `n - 1` for signal `n`) on the `SigIgn:` line
/// of `/proc/self/status`.
fn ignored_mask(status: &str) -> Option<u64> {
    let hex = status.lines().find_map(|l| l.strip_prefix("SigIgn:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

/// End this process by `sig`, as the command ended, without a core dump of
/// its own.
pub fn die_of(sig: i32) {
    use nix::sys::resource::{setrlimit, Resource};
    let _ = setrlimit(Resource::RLIMIT_CORE, 0, 0);
    let _ = signal_hook::low_level::emulate_default_handler(sig);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ignored_signals_from_proc() {
        let status = "Name:\tsh\nSigBlk:\t0000000000000000\nSigIgn:\t0000000000000005\n";
        let m = ignored_mask(status).unwrap();
        assert_eq!(m, 5);
        assert!(m & (1 << (SIGHUP - 1)) != 0 && m & (1 << (SIGQUIT - 1)) != 0);
        assert!(m & (1 << (SIGINT - 1)) == 0);
        assert_eq!(ignored_mask("Name:\tx\n"), None);
        // This process: read as it is.
        let me = std::fs::read_to_string("/proc/self/status").unwrap();
        assert!(ignored_mask(&me).is_some());
    }
}
