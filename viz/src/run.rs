//! `wmhcct run`: start a command with the tracer preloaded.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context as _, Result};

use crate::cli::RunArgs;

const LIB_NAME: &str = "libwmhcct.so";

/// The tracer library: `--lib`, else `WMHCCT_LIB`, else next to this executable.
fn find_lib(explicit: Option<&PathBuf>) -> Result<PathBuf> {
    if let Some(p) = explicit {
        if !p.is_file() {
            bail!("{}: tracer library not found", p.display());
        }
        return Ok(p.clone());
    }
    if let Some(p) = std::env::var_os("WMHCCT_LIB").filter(|v| !v.is_empty()) {
        let p = PathBuf::from(p);
        if !p.is_file() {
            bail!(
                "{}: tracer library not found (from WMHCCT_LIB)",
                p.display()
            );
        }
        return Ok(p);
    }
    let exe = std::env::current_exe().context("locating the wmhcct executable")?;
    let beside = exe
        .parent()
        .map(|d| d.join(LIB_NAME))
        .unwrap_or_else(|| PathBuf::from(LIB_NAME));
    if beside.is_file() {
        return Ok(beside);
    }
    bail!(
        "{}: tracer library not found (build it with `cargo build --release`, or pass --lib or set WMHCCT_LIB)",
        beside.display()
    )
}

/// Run the command; returns the exit code to pass on (128 + signal when killed).
pub fn run(args: &RunArgs) -> Result<i32> {
    let lib = find_lib(args.lib.as_ref())?;
    let lib = std::fs::canonicalize(&lib).unwrap_or(lib);
    let mut preload = OsString::from(lib.as_os_str());
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        preload.push(":");
        preload.push(old);
    }
    let (program, rest) = args
        .command
        .split_first()
        .context("no command given after --")?;
    let mut cmd = Command::new(program);
    cmd.args(rest).env("LD_PRELOAD", preload);
    if let Some(out) = &args.out {
        cmd.env("WMHCCT_OUT", out);
    }
    if let Some(phi) = args.phi {
        cmd.env("WMHCCT_PHI", phi.to_string());
    }
    if let Some(eps) = args.epsilon {
        cmd.env("WMHCCT_EPSILON", eps.to_string());
    }
    if let Some(mode) = &args.unwind {
        cmd.env("WMHCCT_UNWIND", mode);
    }
    if args.exact {
        cmd.env("WMHCCT_EXACT", "1");
    }
    if let Some(placement) = &args.collector {
        cmd.env("WMHCCT_COLLECTOR", placement);
    }
    let status = cmd
        .status()
        .with_context(|| format!("{}: cannot start", PathBuf::from(program).display()))?;
    Ok(match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(sig)) => 128 + sig,
        (None, None) => 1,
    })
}
