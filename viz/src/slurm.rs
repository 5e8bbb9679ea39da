//! `wmhcct slurm`: a Slurm batch script from the templates in `slurm/`
//! (compiled in), with the job's options, the tracer library and this
//! command's path, and the application's words shell-quoted.
//!
//! Lines starting with `## ` are notes on the template and are left out.
//! Template fields are `@NAME@` (upper case and `_`). A line holding a field
//! of an option that was not given (`--nodes`, `--time`, `--partition`) is
//! dropped; every other field must be known. Substitution is one pass, so an
//! application argument that looks like a field stays as it is.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};

const LIB_NAME: &str = "libwmhcct.so";
const MPI_LIB_NAME: &str = "libwmhcct_mpi.so";

/// How the batch script starts the ranks.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Launcher {
    /// OpenMPI's `mpirun -x LD_PRELOAD=…`.
    Mpirun,
    /// Slurm direct launch, `srun --export=ALL,LD_PRELOAD=…`.
    Srun,
    /// MPICH's (Hydra) `mpiexec -env LD_PRELOAD …`.
    Mpiexec,
}

impl Launcher {
    /// The template of `slurm/<launcher>.sbatch`.
    pub fn template(self) -> &'static str {
        match self {
            Launcher::Mpirun => include_str!("../../slurm/mpirun.sbatch"),
            Launcher::Srun => include_str!("../../slurm/srun.sbatch"),
            Launcher::Mpiexec => include_str!("../../slurm/mpiexec.sbatch"),
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct SlurmArgs {
    /// MPI ranks (#SBATCH --ntasks).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub ntasks: u32,
    /// Nodes (#SBATCH --nodes; default: Slurm's choice).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub nodes: Option<u32>,
    /// Time limit, in Slurm's forms: MIN, MIN:SEC, H:M:S, D-H, D-H:M, D-H:M:S
    /// (#SBATCH --time; default: the partition's).
    #[arg(long, value_parser = slurm_time)]
    pub time: Option<String>,
    /// How the ranks are started.
    #[arg(long, value_enum, default_value = "mpirun")]
    pub launcher: Launcher,
    /// Partition (#SBATCH --partition; default: the cluster's).
    #[arg(long, value_parser = slurm_name)]
    pub partition: Option<String>,
    /// Job name (default: the application's file name).
    #[arg(long)]
    pub job_name: Option<String>,
    /// Path of libwmhcct.so (default: WMHCCT_LIB, else next to this executable).
    #[arg(long)]
    pub lib: Option<PathBuf>,
    /// Write the script to this file instead of standard output.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// The application and its arguments.
    #[arg(trailing_var_arg = true, required = true, num_args = 1..)]
    pub command: Vec<String>,
}

/// Everything a template needs.
#[derive(Debug, Clone)]
pub struct Job<'a> {
    pub launcher: Launcher,
    pub ntasks: u32,
    pub nodes: Option<u32>,
    pub time: Option<&'a str>,
    pub partition: Option<&'a str>,
    pub job_name: Option<&'a str>,
    pub lib: &'a Path,
    pub bin: &'a Path,
    pub command: &'a [String],
}

/// `s` as one shell word: as is when it holds only characters no shell
/// treats specially, else in single quotes (a `'` becomes `'\''`).
pub fn shell_quote(s: &str) -> String {
    let plain = |b: u8| b.is_ascii_alphanumeric() || b"_-./:=,+%".contains(&b);
    if !s.is_empty() && s.bytes().all(plain) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// clap's parser for `--time`: a bad value is a usage error (exit 2), as
/// any other option's.
fn slurm_time(t: &str) -> Result<String, String> {
    if valid_time(t) {
        Ok(t.to_string())
    } else {
        Err(TIME_FORMS.to_string())
    }
}

/// clap's parser for `--partition`.
fn slurm_name(p: &str) -> Result<String, String> {
    if valid_name(p) {
        Ok(p.to_string())
    } else {
        Err(NAME_CHARS.to_string())
    }
}

const TIME_FORMS: &str = "not a Slurm time (MIN, MIN:SEC, H:M:S, D-H, D-H:M, D-H:M:S)";
const NAME_CHARS: &str = "use letters, digits and _ - . , +";

/// A Slurm time limit: MIN, MIN:SEC, H:M:S, D-H, D-H:M or D-H:M:S.
fn valid_time(t: &str) -> bool {
    let (days, rest) = match t.split_once('-') {
        Some((d, r)) => (Some(d), r),
        None => (None, t),
    };
    let num = |s: &str| !s.is_empty() && s.len() <= 9 && s.bytes().all(|b| b.is_ascii_digit());
    let parts: Vec<&str> = rest.split(':').collect();
    days.is_none_or(num) && parts.len() <= 3 && parts.iter().all(|p| num(p))
}

/// A name Slurm takes without quoting (partition, job name).
fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 200
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.,+".contains(&b))
}

/// The default job name: the application's file name, reduced to the
/// characters [`valid_name`] takes.
fn default_job_name(app: &str) -> String {
    let base = app.rsplit('/').next().unwrap_or(app);
    let name: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_-.+".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if name.is_empty() || name.bytes().all(|b| b == b'_' || b == b'.') {
        "wmhcct".to_string()
    } else {
        name
    }
}

fn path_word(p: &Path, what: &str) -> Result<String> {
    let s = p
        .to_str()
        .with_context(|| format!("{}: the {what} path is not UTF-8", p.display()))?;
    Ok(shell_quote(s))
}

/// The filled batch script.
pub fn render(job: &Job) -> Result<String> {
    if let Some(t) = job.time {
        if !valid_time(t) {
            bail!("--time {t:?}: {TIME_FORMS}");
        }
    }
    if let Some(p) = job.partition {
        if !valid_name(p) {
            bail!("--partition {p:?}: {NAME_CHARS}");
        }
    }
    let Some(app0) = job.command.first() else {
        bail!("no application given after --");
    };
    let name = match job.job_name {
        Some(n) if valid_name(n) => n.to_string(),
        Some(n) => bail!("--job-name {n:?}: use letters, digits and _ - . , +"),
        None => default_job_name(app0),
    };
    let app = job
        .command
        .iter()
        .map(|w| shell_quote(w))
        .collect::<Vec<_>>()
        .join(" ");
    let fields: HashMap<&str, Option<String>> = HashMap::from([
        ("JOB_NAME", Some(name)),
        ("NTASKS", Some(job.ntasks.to_string())),
        ("NODES", job.nodes.map(|n| n.to_string())),
        ("TIME", job.time.map(str::to_string)),
        ("PARTITION", job.partition.map(str::to_string)),
        ("LIB", Some(path_word(job.lib, "library")?)),
        ("BIN", Some(path_word(job.bin, "wmhcct")?)),
        ("APP", Some(app)),
    ]);
    fill(job.launcher.template(), &fields)
}

/// `@NAME@` at the start of `s`: (NAME, length of the field).
fn field_at(s: &str) -> Option<(&str, usize)> {
    let rest = s.strip_prefix('@')?;
    let end = rest.find(|c: char| !(c.is_ascii_uppercase() || c == '_'))?;
    (end > 0 && rest[end..].starts_with('@')).then(|| (&rest[..end], end + 2))
}

/// Substitute the fields of `template` in one pass; drop the lines holding
/// a field whose value is `None`.
fn fill(template: &str, fields: &HashMap<&str, Option<String>>) -> Result<String> {
    let mut out = String::with_capacity(template.len() + 256);
    'lines: for line in template.split_inclusive('\n') {
        if line.starts_with("## ") {
            continue; // a note on the template itself
        }
        let mut filled = String::with_capacity(line.len());
        let mut i = 0;
        while let Some(off) = line[i..].find('@') {
            filled.push_str(&line[i..i + off]);
            i += off;
            match field_at(&line[i..]) {
                Some((name, len)) => {
                    match fields.get(name) {
                        Some(Some(v)) => filled.push_str(v),
                        Some(None) => continue 'lines,
                        None => bail!("template field @{name}@ is unknown"),
                    }
                    i += len;
                }
                None => {
                    filled.push('@');
                    i += 1;
                }
            }
        }
        filled.push_str(&line[i..]);
        out.push_str(&filled);
    }
    Ok(out)
}

/// The tracer library: `--lib`, else `WMHCCT_LIB`, else next to `exe`.
fn find_lib(explicit: Option<&Path>, env: Option<OsString>, exe: Option<&Path>) -> Result<PathBuf> {
    let (p, from) = if let Some(p) = explicit {
        (p.to_path_buf(), "--lib")
    } else if let Some(v) = env.filter(|v| !v.is_empty()) {
        (PathBuf::from(v), "WMHCCT_LIB")
    } else {
        let dir = exe
            .and_then(Path::parent)
            .context("cannot locate the wmhcct executable; pass --lib or set WMHCCT_LIB")?;
        (dir.join(LIB_NAME), "next to the wmhcct executable")
    };
    if !p.is_file() {
        bail!(
            "{}: tracer library not found ({from}); build it with `cargo build --release`, or pass --lib or set WMHCCT_LIB",
            p.display()
        );
    }
    crate::run::preload_path(&p)
}

pub fn run(args: &SlurmArgs) -> Result<()> {
    let exe = std::env::current_exe().ok();
    let exe = exe.map(|e| std::fs::canonicalize(&e).unwrap_or(e));
    let lib = find_lib(
        args.lib.as_deref(),
        std::env::var_os("WMHCCT_LIB"),
        exe.as_deref(),
    )?;
    let bin = exe.context("cannot locate the wmhcct executable")?;
    let side_libs = [
        MPI_LIB_NAME,
        "libwmhcct_mpi_openmpi.so",
        "libwmhcct_mpi_mpich.so",
    ];
    if std::env::var_os("WMHCCT_MPI_LIB").is_none()
        && !side_libs.iter().any(|n| lib.with_file_name(n).is_file())
    {
        say!(
            "wmhcct: warning: {} is not next to {}: the ranks will leave spill files instead of one report",
            MPI_LIB_NAME,
            lib.display()
        );
    }
    let script = render(&Job {
        launcher: args.launcher,
        ntasks: args.ntasks,
        nodes: args.nodes,
        time: args.time.as_deref(),
        partition: args.partition.as_deref(),
        job_name: args.job_name.as_deref(),
        lib: &lib,
        bin: &bin,
        command: &args.command,
    })?;
    match &args.output {
        Some(path) => {
            crate::output::write_bytes(path, script.as_bytes())?;
            say!(
                "wmhcct: wrote {}; submit it with: sbatch {}",
                path.display(),
                wmhcct_format::shell_word(path)
            );
        }
        None => crate::output::emit(&script, None)?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;
    use std::process::{Command, Stdio};

    const ALL: [Launcher; 3] = [Launcher::Mpirun, Launcher::Srun, Launcher::Mpiexec];

    fn words(ws: &[&str]) -> Vec<String> {
        ws.iter().map(|s| s.to_string()).collect()
    }

    fn job<'a>(launcher: Launcher, cmd: &'a [String]) -> Job<'a> {
        Job {
            launcher,
            ntasks: 4,
            nodes: Some(2),
            time: Some("00:10:00"),
            partition: Some("debug"),
            job_name: None,
            lib: Path::new("/opt/wm hcct/lib/libwmhcct.so"),
            bin: Path::new("/opt/wm hcct/bin/wmhcct"),
            command: cmd,
        }
    }

    /// `bash -n` on `script`: Ok or bash's complaint.
    fn bash_n(script: &str) -> std::result::Result<(), String> {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("job.sbatch");
        std::fs::write(&f, script).unwrap();
        let out = Command::new("bash").arg("-n").arg(&f).output().unwrap();
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// What bash makes of `words` (quoted): the words it passes on.
    fn bash_words(quoted: &str) -> Vec<String> {
        let mut child = Command::new("bash")
            .arg("-s")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let script = format!("printf '%s\\0' {quoted}\n");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        let s = String::from_utf8(out.stdout).unwrap();
        s.split_terminator('\0').map(str::to_string).collect()
    }

    #[test]
    fn every_launcher_gives_a_valid_script_with_all_fields_filled() {
        let cmd = words(&["./app", "--in", "data set.nc", "it's", "$HOME", "a\"b", "*"]);
        for l in ALL {
            let s = render(&job(l, &cmd)).unwrap();
            bash_n(&s).unwrap_or_else(|e| panic!("{l:?}: bash -n: {e}\n{s}"));
            for line in s.lines() {
                assert!(
                    field_at_any(line).is_none(),
                    "{l:?}: unfilled field in {line:?}"
                );
            }
            assert!(s.starts_with("#!/bin/bash\n"));
            assert!(s.contains("#SBATCH --ntasks=4\n"), "{s}");
            assert!(s.contains("#SBATCH --nodes=2\n"));
            assert!(s.contains("#SBATCH --time=00:10:00\n"));
            assert!(s.contains("#SBATCH --partition=debug\n"));
            assert!(s.contains("#SBATCH --job-name=app\n"));
            assert!(s.contains("WMHCCT_LIB='/opt/wm hcct/lib/libwmhcct.so'\n"));
            assert!(s.contains("WMHCCT_CLI='/opt/wm hcct/bin/wmhcct'\n"));
            assert!(
                s.contains(r#"./app --in 'data set.nc' 'it'\''s' '$HOME' 'a"b' '*' || status=$?"#)
            );
            assert!(s.contains("wmhcct-$job.h5"));
            assert!(s.contains("wmhcct-$job.h5.spill"));
            assert!(s.contains(r#""$WMHCCT_CLI" merge "$WMHCCT_SPILL_DIR" -o "$WMHCCT_OUT""#));
            assert!(s.contains(r#""$WMHCCT_CLI" plot "$WMHCCT_OUT" --out-dir"#));
            assert!(s.trim_end().ends_with("exit \"$status\""));
        }
    }

    fn field_at_any(line: &str) -> Option<&str> {
        (0..line.len())
            .filter(|&i| line.is_char_boundary(i))
            .find_map(|i| field_at(&line[i..]).map(|(n, _)| n))
    }

    /// LD_PRELOAD appears in one command line only, the launch, as the
    /// launcher's option for the ranks; never exported to the script.
    #[test]
    fn the_preload_is_scoped_to_the_step() {
        let cmd = words(&["./app"]);
        for l in ALL {
            let s = render(&job(l, &cmd)).unwrap();
            let code: Vec<&str> = s
                .lines()
                .filter(|x| !x.trim_start().starts_with('#') && x.contains("LD_PRELOAD"))
                .collect();
            let launch = match l {
                Launcher::Mpirun => "-x LD_PRELOAD=\"$WMHCCT_LIB\" ",
                Launcher::Srun => "--export=ALL,LD_PRELOAD=\"$WMHCCT_LIB\",",
                Launcher::Mpiexec => "-env LD_PRELOAD \"$WMHCCT_LIB\" ",
            };
            assert_eq!(code.len(), 1, "{l:?}: {code:?}");
            assert!(
                code[0].trim_start().starts_with(launch),
                "{l:?}: {}",
                code[0]
            );
            assert!(!s.contains("export "), "{l:?}:\n{s}");
        }
    }

    #[test]
    fn options_not_given_drop_their_lines() {
        let cmd = words(&["/bin/true"]);
        let mut j = job(Launcher::Srun, &cmd);
        j.nodes = None;
        j.time = None;
        j.partition = None;
        j.job_name = Some("my-job");
        let s = render(&j).unwrap();
        assert!(!s.contains("--nodes"), "{s}");
        assert!(!s.contains("--time"));
        assert!(!s.contains("--partition"));
        assert!(s.contains("#SBATCH --job-name=my-job\n"));
        assert!(s.contains("#SBATCH --ntasks=4\n"));
        bash_n(&s).unwrap();
    }

    #[test]
    fn bad_options_are_refused() {
        let cmd = words(&["./app"]);
        for t in ["10 min", "1-2-3", "", "1:2:3:4", "x"] {
            let mut j = job(Launcher::Mpirun, &cmd);
            j.time = Some(t);
            assert!(render(&j).is_err(), "time {t:?}");
        }
        for t in ["30", "30:00", "1:00:00", "2-0", "2-12:00", "2-12:00:00"] {
            let mut j = job(Launcher::Mpirun, &cmd);
            j.time = Some(t);
            assert!(render(&j).is_ok(), "time {t:?}");
        }
        let mut j = job(Launcher::Mpirun, &cmd);
        j.partition = Some("debug\n#SBATCH --x");
        assert!(render(&j).is_err());
        let mut j = job(Launcher::Mpirun, &cmd);
        j.job_name = Some("a b");
        assert!(render(&j).is_err());
        let empty: Vec<String> = Vec::new();
        assert!(render(&job(Launcher::Mpirun, &empty)).is_err());
    }

    #[test]
    fn quoting_round_trips_through_bash() {
        let cases = words(&[
            "plain",
            "with space",
            "it's",
            "'",
            "''",
            "\"double\"",
            "$(touch /tmp/wmhcct-never)",
            "`x`",
            "back\\slash",
            "tab\there",
            "new\nline",
            "*",
            "~",
            "a;b|c&d",
            "!bang",
            "@APP@",
            "--opt=v,w:x+y%z",
            "ünï",
            "",
        ]);
        let quoted: Vec<String> = cases.iter().map(|c| shell_quote(c)).collect();
        assert_eq!(bash_words(&quoted.join(" ")), cases);
        assert_eq!(shell_quote("--opt=v"), "--opt=v");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn application_words_that_look_like_fields_stay() {
        let cmd = words(&["./app", "@LIB@", "x@NTASKS@y"]);
        let s = render(&job(Launcher::Mpirun, &cmd)).unwrap();
        assert!(s.contains("./app '@LIB@' 'x@NTASKS@y' || status=$?"), "{s}");
    }

    #[test]
    fn unknown_fields_are_errors_and_stray_ats_stay() {
        let f: HashMap<&str, Option<String>> = HashMap::from([("A", Some("1".to_string()))]);
        assert_eq!(
            fill("x@A@y @ a@b @@ @a@\n", &f).unwrap(),
            "x1y @ a@b @@ @a@\n"
        );
        assert!(fill("@B@\n", &f).is_err());
    }

    #[test]
    fn default_job_names() {
        assert_eq!(default_job_name("/usr/bin/my app"), "my_app");
        assert_eq!(default_job_name("./lulesh2.0"), "lulesh2.0");
        assert_eq!(default_job_name("/"), "wmhcct");
        assert_eq!(default_job_name("..."), "wmhcct");
    }

    #[test]
    fn library_resolution_order_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("wmhcct");
        let beside = dir.path().join(LIB_NAME);
        let other = dir.path().join("other.so");
        std::fs::write(&beside, b"").unwrap();
        std::fs::write(&other, b"").unwrap();
        let canon = |p: &Path| std::fs::canonicalize(p).unwrap();
        assert_eq!(find_lib(None, None, Some(&bin)).unwrap(), canon(&beside));
        assert_eq!(
            find_lib(None, Some(other.clone().into()), Some(&bin)).unwrap(),
            canon(&other)
        );
        assert_eq!(
            find_lib(Some(&other), Some("/nope".into()), Some(&bin)).unwrap(),
            canon(&other)
        );
        let e = find_lib(None, Some("/nope/libwmhcct.so".into()), Some(&bin)).unwrap_err();
        assert!(e.to_string().contains("WMHCCT_LIB"), "{e}");
        std::fs::remove_file(&beside).unwrap();
        let e = find_lib(None, None, Some(&bin)).unwrap_err();
        assert!(e.to_string().contains("tracer library not found"), "{e}");
        assert!(find_lib(None, None, None).is_err());
    }
}
