//! `wmhcct run`: start a command with the tracer preloaded.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context as _, Result};

use crate::cli::RunArgs;
use crate::report_files::ReportFiles;
use crate::untraced::why_untraced;

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

/// The path `LD_PRELOAD` gets for the library found at `lib`: its
/// canonical path, or where that holds a space or a colon (which the
/// dynamic loader takes for separators, so that nothing would be traced)
/// the path as given, made absolute, if that has none; else an error.
pub(crate) fn preload_path(lib: &Path) -> Result<PathBuf> {
    let plain = |p: &Path| {
        !p.as_os_str()
            .as_bytes()
            .iter()
            .any(|b| matches!(b, b' ' | b':'))
    };
    let canonical = std::fs::canonicalize(lib).unwrap_or_else(|_| lib.to_path_buf());
    if plain(&canonical) {
        return Ok(canonical);
    }
    if let Ok(given) = std::path::absolute(lib) {
        if plain(&given) {
            return Ok(given);
        }
    }
    bail!(
        "{}: LD_PRELOAD cannot name a path with a space or a colon (the dynamic loader splits its list there); \
         install wmhcct in a directory without them, or link one to its directory \
         (ln -s {} /opt/wmhcct) and pass --lib /opt/wmhcct/{LIB_NAME}",
        lib.display(),
        wmhcct_format::shell_word(canonical.parent().unwrap_or(Path::new(".")))
    )
}

/// Set up `cmd` to run under the tracer: `LD_PRELOAD` and the settings
/// given as options.
fn trace(cmd: &mut Command, args: &RunArgs, preload: OsString) {
    cmd.env("LD_PRELOAD", preload);
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
}

/// The settings `args` gives the tracer (option, variable, value).
fn option_settings(args: &RunArgs) -> Vec<(&'static str, &'static str, String)> {
    [
        ("--phi", "WMHCCT_PHI", args.phi.map(|v| v.to_string())),
        (
            "--epsilon",
            "WMHCCT_EPSILON",
            args.epsilon.map(|v| v.to_string()),
        ),
        ("--unwind", "WMHCCT_UNWIND", args.unwind.clone()),
    ]
    .into_iter()
    .filter_map(|(opt, var, v)| v.map(|v| (opt, var, v)))
    .collect()
}

/// The first option whose setting the tracer would refuse (it would warn
/// and go on with the default, not what was asked for), by the tracer's
/// own rules, with the rest of the settings from the environment (ε is
/// checked against the φ in force): the option, its value and what it
/// accepts.
fn refused_option(args: &RunArgs) -> Option<(&'static str, String, &'static str)> {
    let given = option_settings(args);
    let lookup = |k: &str| {
        given
            .iter()
            .find(|g| g.1 == k)
            .map(|g| g.2.clone())
            .or_else(|| std::env::var(k).ok())
    };
    let (_, rejected) = wmhcct_format::settings::Config::from_lookup(lookup);
    rejected.iter().find_map(|r| {
        let (opt, _, value) = given.iter().find(|g| g.1 == r.var)?;
        Some((*opt, value.clone(), r.accepted))
    })
}

/// Run the command; returns the exit code to pass on (128 + signal when
/// killed; 127 when it is not found, 126 when it cannot be executed).
pub fn run(args: &RunArgs) -> Result<i32> {
    if let Some((opt, value, accepted)) = refused_option(args) {
        use clap::CommandFactory as _;
        // As clap's own errors on `run`'s options: with `run`'s usage line.
        let mut cli = crate::cli::Cli::command();
        cli.build();
        let mut cmd = cli.find_subcommand("run").cloned().unwrap_or(cli);
        cmd.error(
            clap::error::ErrorKind::InvalidValue,
            format!("invalid value '{value}' for '{opt}': expected {accepted}"),
        )
        .exit();
    }
    let lib = preload_path(&find_lib(args.lib.as_ref())?)?;
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
    cmd.args(rest);
    // A program built with a sanitizer that owns malloc stops at start with
    // the tracer in front of its run-time: run it as it is.
    let sanitized = crate::sanitizer::in_command(&args.command);
    if sanitized.is_none() {
        trace(&mut cmd, args, preload);
    }
    // A report path is watched only where it is a regular file: a
    // directory takes reports under default names, a stream (`/dev/null`)
    // shows nothing. A path no report may go to is refused before the run
    // when `--out` gave it (the tracer says so for `WMHCCT_OUT`).
    let given = args.out.clone().or_else(|| {
        std::env::var_os("WMHCCT_OUT")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    let report = match given.as_deref().map(wmhcct_format::resolve) {
        Some(Ok(wmhcct_format::Target::File(p))) => Some(p),
        Some(Err(e)) if args.out.is_some() => {
            bail!("--out {}: {e}", given.unwrap_or_default().display())
        }
        _ => None,
    };
    let spill = std::env::var_os("WMHCCT_SPILL_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let files = |r: &std::path::Path| ReportFiles::of(r, spill.as_deref());
    let before = report.as_deref().map(files);
    let status = match crate::forward::status(&mut cmd) {
        Ok(s) => s,
        // As `env`, `nice` and `timeout` do: 127 for a command not found,
        // 126 for one found but not executable.
        Err(e) => {
            let name = PathBuf::from(program).display().to_string();
            say!("wmhcct: error: {name}: cannot start: {e}");
            return Ok(if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            });
        }
    };
    let outcome = report
        .as_deref()
        .zip(before.as_ref())
        .map(|(r, b)| (r, files(r).written_since(b)));
    let line = match sanitized {
        Some((exe, which)) => Some(format!(
            "wmhcct: no report: {} is built with {which}, whose run-time library must be loaded first and replaces malloc itself, so it ran without the tracer",
            exe.display()
        )),
        None => no_report_line(program, outcome, status.signal()),
    };
    if let Some(line) = line {
        say!("{line}");
    }
    if let Some(sig) = status.signal() {
        crate::forward::die_of(sig);
    }
    Ok(match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(sig)) => 128 + sig,
        (None, None) => 1,
    })
}

/// The line `run` adds when the command left no report, after the command's
/// own output: with a report path (`--out`, `WMHCCT_OUT`), whenever nothing
/// was written there, with the reason where one is known; without one (the
/// report would be `wmhcct-<pid>.h5` of whichever process was traced), only
/// when the executable itself cannot load the tracer.
/// `outcome`: the report path and whether anything was written there.
fn no_report_line(
    program: &std::ffi::OsStr,
    outcome: Option<(&std::path::Path, bool)>,
    signal: Option<i32>,
) -> Option<String> {
    let name = PathBuf::from(program).display().to_string();
    let why = || why_untraced(program).map(|w| format!("{name} {w}"));
    match outcome {
        Some((_, true)) => None,
        Some((r, false)) => {
            let why = why().or_else(|| match signal {
                Some(libc::SIGKILL) => Some(format!(
                    "{name} was killed by SIGKILL, which leaves a process no time to write one"
                )),
                Some(sig) => Some(format!(
                    "{name} was killed by {}",
                    crate::signal_name::signal_name(sig)
                )),
                None => None,
            });
            Some(match why {
                Some(w) => format!("wmhcct: no report was written to {}: {w}", r.display()),
                None => format!("wmhcct: no report was written to {}", r.display()),
            })
        }
        None => why().map(|w| format!("wmhcct: no report: {w}")),
    }
}
