//! libhdf5 in a child process, for HDF5 files without a valid seal.
//!
//! Debian's libhdf5 can crash (SIGSEGV) or loop forever on a damaged file,
//! and nothing in the process can recover from that. A sealed report is
//! known intact before libhdf5 sees it (`seal`); any other HDF5 file
//! (foreign, older, edited by another tool) is read by this executable
//! started again with the hidden subcommand `__read-report`, which runs the
//! ordinary reader (`h5layout::read_here`) and writes the result to its
//! standard output (`h5reply`). The parent waits at most `limit` and turns
//! a death by signal or a timeout into an error naming the problem.
//!
//! The child also watches the parent: if `wmhcct` itself is killed, or the
//! child outlives its own limit, it aborts rather than linger.

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use wmhcct_format::Profile;

use crate::h5layout::{self, ReportError};
use crate::symbolize::Symbols;

/// Name of the hidden subcommand (see `cli::Command::ReadReport`).
pub const SUBCOMMAND: &str = "__read-report";
/// Time limit in seconds, overriding the default.
const TIMEOUT_VAR: &str = "WMHCCT_READ_TIMEOUT";
/// Default limit: a base, plus a second per 16 MiB of file.
const BASE_LIMIT_SECS: u64 = 60;
const BYTES_PER_EXTRA_SEC: u64 = 16 << 20;
const MAX_LIMIT_SECS: u64 = 86_400;

#[derive(clap::Args, Debug)]
pub struct ReadReportArgs {
    /// Abort after this many seconds (the parent's limit plus a margin).
    #[arg(long, default_value_t = BASE_LIMIT_SECS)]
    pub limit_secs: u64,
    /// The HDF5 file.
    pub file: PathBuf,
}

/// The time the child gets for `path`: `WMHCCT_READ_TIMEOUT` seconds, else
/// the default for the file's size. A bad value gives one line of warning.
fn limit(path: &Path) -> Duration {
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let default = BASE_LIMIT_SECS + size / BYTES_PER_EXTRA_SEC;
    let secs = match std::env::var(TIMEOUT_VAR) {
        Err(std::env::VarError::NotPresent) => default,
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(s) if (1..=MAX_LIMIT_SECS).contains(&s) => s,
            _ => {
                say!(
                    "wmhcct: warning: {TIMEOUT_VAR}={v:?}: expected whole seconds from 1 to {MAX_LIMIT_SECS}; using the default for this file, {default} s (60 s and 1 s per 16 MiB)"
                );
                default
            }
        },
        Err(std::env::VarError::NotUnicode(v)) => {
            say!(
                "wmhcct: warning: {TIMEOUT_VAR}={v:?}: expected whole seconds from 1 to {MAX_LIMIT_SECS}; using the default for this file, {default} s (60 s and 1 s per 16 MiB)"
            );
            default
        }
    };
    Duration::from_secs(secs)
}

fn isolation(what: impl std::fmt::Display) -> ReportError {
    ReportError::Isolation(what.to_string())
}

/// Read the HDF5 report at `path` in a child process.
pub fn read(path: &Path) -> Result<(Profile, Symbols), ReportError> {
    let limit = limit(path);
    let exe = std::env::current_exe()
        .map_err(|e| isolation(format!("cannot locate the wmhcct executable: {e}")))?;
    let mut child = Command::new(&exe)
        .arg(SUBCOMMAND)
        .arg("--limit-secs")
        .arg((limit.as_secs() + 5).to_string())
        .arg("--")
        .arg(path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        // Whatever libhdf5 or a dying child prints is not for the user.
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| isolation(format!("cannot start {}: {e}", exe.display())))?;
    let start = Instant::now();
    let mut stdout = child
        .stdout
        .take()
        .ok_or_else(|| isolation("no pipe from the child"))?;
    // The answer can be larger than a pipe: read it while waiting.
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let r = stdout.read_to_end(&mut buf).map(|_| buf);
        let _ = tx.send(r);
    });
    let timed_out = || ReportError::TimedOut {
        secs: limit.as_secs(),
    };
    let kill = |child: &mut std::process::Child| {
        let _ = child.kill();
        let _ = child.wait();
    };
    // The pipe closes when the child exits (or dies).
    let answer = match rx.recv_timeout(limit) {
        Ok(r) => r,
        Err(e) => {
            kill(&mut child);
            let _ = reader.join();
            return Err(match e {
                mpsc::RecvTimeoutError::Timeout => timed_out(),
                mpsc::RecvTimeoutError::Disconnected => isolation("the pipe reader stopped"),
            });
        }
    };
    let _ = reader.join();
    let status = match wait_until(&mut child, start + limit) {
        Some(s) => s,
        None => {
            kill(&mut child);
            return Err(timed_out());
        }
    };
    if let Some(e) = died(status) {
        return Err(e);
    }
    if !status.success() {
        return Err(isolation(format!("the child process failed ({status})")));
    }
    let answer = answer.map_err(|e| isolation(format!("reading the answer: {e}")))?;
    crate::h5reply::decode(&answer)
}

/// Wait for `child` until `deadline`: its status, or `None` if still running.
fn wait_until(child: &mut std::process::Child, deadline: Instant) -> Option<ExitStatus> {
    let mut pause = Duration::from_micros(200);
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return Some(s),
            Ok(None) => {}
            // Not expected for our own child; treat as gone.
            Err(_) => return child.wait().ok(),
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// The error for a child killed by a signal, if it was.
fn died(status: ExitStatus) -> Option<ReportError> {
    use std::os::unix::process::ExitStatusExt;
    let sig = status.signal()?;
    let name = match sig {
        libc::SIGSEGV => "segmentation fault".to_string(),
        libc::SIGBUS => "bus error".to_string(),
        libc::SIGABRT => "aborted".to_string(),
        libc::SIGFPE => "arithmetic fault".to_string(),
        libc::SIGKILL => "killed, out of memory?".to_string(),
        s => crate::signal_name::signal_name(s),
    };
    Some(ReportError::Crashed(name))
}

/// The hidden subcommand: read `args.file` here and answer on stdout.
pub fn serve(args: &ReadReportArgs) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    if stdout.is_terminal() {
        bail!(
            "{SUBCOMMAND} is internal to wmhcct (it answers in binary to the wmhcct process that starts it); use `wmhcct report {}`",
            args.file.display()
        );
    }
    watchdog(Duration::from_secs(args.limit_secs));
    let answer = crate::h5reply::encode(h5layout::read_here(&args.file));
    stdout
        .write_all(&answer)
        .and_then(|()| stdout.flush())
        .context("<stdout>")?;
    Ok(())
}

/// Abort this process once `limit` has passed or when the parent is gone.
fn watchdog(limit: Duration) {
    let parent = std::os::unix::process::parent_id();
    let start = Instant::now();
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_millis(100));
        if start.elapsed() > limit || std::os::unix::process::parent_id() != parent {
            std::process::abort();
        }
    });
}
