//! Writing a command's result: to standard output (`-`, or no `-o`; a
//! closed pipe is fine) or to the path `-o` names, whatever it is.
//!
//! The path is resolved first (`wmhcct_format::resolve`): a symbolic link
//! is written through, so it stays a link; a report goes to a regular file
//! under a temporary name beside it and is renamed into place, so no
//! reader sees half of it. `/dev/null`, a terminal, a FIFO or a process's
//! descriptor (`/dev/stdout`) is written into as `cat >` would, and never
//! replaced: a rename over `/dev/null` used to replace the device with a
//! regular file when run as root. A directory, a block device or a socket
//! is refused with one line.

use std::fs::File;
use std::io::{self, IsTerminal as _, Read as _, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};
use wmhcct_format::Target;

/// The name that stands for standard output.
pub const STDOUT: &str = "-";

/// How messages name the output `out`.
pub fn name(out: &Path) -> String {
    if out.as_os_str() == STDOUT {
        "standard output".to_string()
    } else {
        out.display().to_string()
    }
}

/// Write text to standard output (`file` `None` or `-`) or to `file`.
pub fn emit(text: &str, file: Option<&Path>) -> Result<()> {
    emit_with(file, |w| w.write_all(text.as_bytes()))
}

/// What `write` makes (a JSON document) to standard output or to `file`,
/// as [`emit`] writes a text, buffered on its way there rather than held
/// whole first.
pub fn emit_with(
    file: Option<&Path>,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<()> {
    match file {
        Some(f) if f.as_os_str() != STDOUT => write_with(f, write),
        _ => to_stdout(write),
    }
}

/// What `write` makes to standard output; a reader that went away
/// (`| head`) is fine.
fn to_stdout(write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<()> {
    match buffered(&mut std::io::stdout().lock(), write) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(e).context("<stdout>"),
    }
}

/// `write` into `to` through a buffer, flushed.
fn buffered(
    to: &mut dyn Write,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let mut w = io::BufWriter::with_capacity(1 << 16, to);
    write(&mut w)?;
    w.flush()
}

/// Write `bytes` (a text, a script) at `out`: a regular file is replaced
/// through its links, a stream written into.
/// A regular file is written under a temporary name and renamed into
/// place, so a failed write (a full disk) leaves the old file as it was.
pub fn write_bytes(out: &Path, bytes: &[u8]) -> Result<()> {
    write_with(out, |w| w.write_all(bytes))
}

/// What `write` makes at `out`, as [`write_bytes`] writes its bytes.
fn write_with(out: &Path, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<()> {
    match target(out, None)? {
        Target::File(p) => replace_file(out, &p, |tmp| {
            File::create(tmp)
                .and_then(|mut f| buffered(&mut f, write))
                .with_context(|| out.display().to_string())
        }),
        Target::Stream(p) => open_stream(&p)
            .and_then(|mut f| buffered(&mut f, write))
            .with_context(|| out.display().to_string()),
        Target::Directory(_) => unreachable!("refused by target()"),
    }
}

/// Write a binary file (an HDF5 report) at `out` with `write`, which makes
/// it at the path it is given: a temporary file renamed into place for a
/// regular file, a temporary file in `TMPDIR` copied into a stream (or to
/// standard output for `-`, which must not be a terminal).
pub fn write_file(out: &Path, write: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    if out.as_os_str() == STDOUT {
        if std::io::stdout().is_terminal() {
            bail!(
                "standard output is a terminal: a report is binary; \
                 redirect it (-o - > r.h5, | ssh …) or give a file name"
            );
        }
        return through_temp(out, write, |from| {
            let mut bytes = Vec::new();
            from.read_to_end(&mut bytes)?;
            to_stdout(|w| w.write_all(&bytes))
        });
    }
    match target(out, Some("report.h5"))? {
        Target::File(p) => replace_file(out, &p, write),
        Target::Stream(p) => through_temp(out, write, |from| {
            let mut to = open_stream(&p).with_context(|| out.display().to_string())?;
            std::io::copy(from, &mut to).with_context(|| out.display().to_string())?;
            Ok(())
        }),
        Target::Directory(_) => unreachable!("refused by target()"),
    }
}

/// Make the regular file `p` (named `out` in messages) with `write` under
/// a temporary name beside it, then rename it into place; on failure the
/// temporary file is removed and `p` left as it was.
///
/// A directory that exists but where no file can be made (read-only, or
/// `/proc`, whose `/proc/version` exists) is named as the reason: the
/// temporary file's error alone said "/proc/version: No such file or
/// directory" of a file that is there.
fn replace_file(out: &Path, p: &Path, write: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let tmp = wmhcct_format::report_temp_beside(p, std::process::id());
    let dir = tmp.parent().filter(|d| !d.as_os_str().is_empty());
    let dir = dir.unwrap_or(Path::new("."));
    if dir.is_dir() {
        if let Err(e) = File::create(&tmp) {
            bail!(
                "{}: no file can be made in {} (a file is written there under \
                 a temporary name, then renamed into place): {e}",
                out.display(),
                dir.display()
            );
        }
    }
    let result = write(&tmp)
        .and_then(|()| std::fs::rename(&tmp, p).with_context(|| out.display().to_string()));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Refuse an output that is one of the command's input files (the same
/// file, through any name or link): the report would replace the profile
/// it is made of, and `--remove-input` would then delete the report too.
pub fn refuse_input_as_output(out: &Path, inputs: &[PathBuf]) -> Result<()> {
    use std::os::unix::fs::MetadataExt as _;
    if out.as_os_str() == STDOUT {
        return Ok(());
    }
    let Ok(o) = std::fs::metadata(out) else {
        return Ok(());
    };
    if !o.is_file() {
        return Ok(());
    }
    for input in inputs {
        if std::fs::metadata(input).is_ok_and(|i| (i.dev(), i.ino()) == (o.dev(), o.ino())) {
            bail!(
                "{}: is also an input ({}): the output would replace it; give the output another name",
                out.display(),
                input.display()
            );
        }
    }
    Ok(())
}

/// `out` resolved; a directory, block device or socket refused (the
/// message's example of a file in a directory named `example`: a report's
/// `report.h5`; none for a text, whose name nothing suggests).
fn target(out: &Path, example: Option<&str>) -> Result<Target> {
    match wmhcct_format::resolve(out) {
        Ok(Target::Directory(_)) => match example {
            Some(name) => bail!(
                "{}: is a directory: give the file's name in it ({})",
                out.display(),
                out.join(name).display()
            ),
            None => bail!(
                "{}: is a directory: give a file's name in it",
                out.display()
            ),
        },
        Ok(t) => Ok(t),
        Err(e) => bail!("{}: {e}", out.display()),
    }
}

/// Open a stream for writing: appended to, as `>>` would (a descriptor
/// that is a regular file keeps what was written to it before).
fn open_stream(p: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new().append(true).open(p)
}

/// Make the file with `write` in `TMPDIR`, hand it to `deliver`, delete it.
fn through_temp(
    out: &Path,
    write: impl FnOnce(&Path) -> Result<()>,
    deliver: impl FnOnce(&mut File) -> Result<()>,
) -> Result<()> {
    let tmp = tempfile::Builder::new()
        .prefix("wmhcct-output-")
        .tempfile()
        .with_context(|| {
            format!(
                "{}: making a temporary file in {} (TMPDIR)",
                out.display(),
                std::env::temp_dir().display()
            )
        })?
        .into_temp_path();
    write(&tmp)?;
    let mut f = File::open(&tmp).with_context(|| tmp.display().to_string())?;
    deliver(&mut f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("wmhcct-output-{tag}-"))
            .tempdir()
            .unwrap()
    }

    fn made(bytes: &'static [u8]) -> impl FnOnce(&Path) -> Result<()> {
        move |p| Ok(std::fs::write(p, bytes)?)
    }

    /// A file that exists in a directory where no file can be made is not
    /// said to be missing: the directory is named as the reason.
    #[test]
    fn a_directory_where_no_file_can_be_made_is_the_reason() {
        let e = write_file(Path::new("/proc/version"), made(b"x")).unwrap_err();
        let e = format!("{e:#}");
        assert!(
            e.starts_with("/proc/version: no file can be made in /proc ("),
            "{e}"
        );
        assert!(e.ends_with("No such file or directory (os error 2)"), "{e}");
        let e = write_file(Path::new("/no/such/dir/r.h5"), made(b"x")).unwrap_err();
        assert!(!format!("{e:#}").contains("no file can be made"), "{e:#}");
    }

    #[test]
    fn a_file_is_replaced_through_its_link_and_nothing_is_left_beside() {
        let d = scratch("link");
        let real = d.path().join("real.h5");
        std::fs::write(&real, b"old").unwrap();
        let link = d.path().join("link.h5");
        std::os::unix::fs::symlink("real.h5", &link).unwrap();
        write_file(&link, made(b"new")).unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
        assert_eq!(std::fs::read(&real).unwrap(), b"new");
        write_bytes(&link, b"text").unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
        assert_eq!(std::fs::read(&real).unwrap(), b"text");
        let mut names: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["link.h5", "real.h5"]);
    }

    #[test]
    fn an_input_is_refused_as_the_output_by_any_name() {
        let d = scratch("same");
        let prof = d.path().join("p.wmprof");
        std::fs::write(&prof, b"profile").unwrap();
        std::os::unix::fs::symlink("p.wmprof", d.path().join("alias")).unwrap();
        let inputs = [d.path().join("other"), prof.clone()];
        for out in [
            prof.clone(),
            d.path().join("alias"),
            d.path().join(".").join("p.wmprof"),
        ] {
            let e = refuse_input_as_output(&out, &inputs).unwrap_err();
            assert!(format!("{e}").contains("is also an input"), "{e}");
        }
        refuse_input_as_output(&d.path().join("r.h5"), &inputs).unwrap();
        refuse_input_as_output(Path::new("-"), &inputs).unwrap();
        assert_eq!(std::fs::read(&prof).unwrap(), b"profile");
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temporary() {
        let d = scratch("fail");
        let out = d.path().join("r.h5");
        std::fs::write(&out, b"old").unwrap();
        let err = write_file(&out, |p| {
            std::fs::write(p, b"half")?;
            bail!("disk full")
        });
        assert!(err.is_err());
        assert_eq!(std::fs::read(&out).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_fifo_is_written_into_and_stays_a_fifo() {
        let d = scratch("fifo");
        let fifo = d.path().join("f");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        write_file(&fifo, made(b"report bytes")).unwrap();
        assert_eq!(reader.join().unwrap(), b"report bytes");
        use std::os::unix::fs::FileTypeExt as _;
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    }

    #[test]
    fn a_null_device_takes_the_bytes_and_stays_a_device() {
        // A device like /dev/null made here (as root), so that a regression
        // cannot replace the machine's own; else /dev/null, which a
        // non-root process cannot replace.
        let d = scratch("dev");
        let made_here = std::process::Command::new("mknod")
            .args(["-m", "666"])
            .arg(d.path().join("null"))
            .args(["c", "1", "3"])
            .status()
            .is_ok_and(|s| s.success());
        let dev = if made_here {
            d.path().join("null")
        } else {
            PathBuf::from("/dev/null")
        };
        write_file(&dev, made(b"report")).unwrap();
        write_bytes(&dev, b"text").unwrap();
        use std::os::unix::fs::FileTypeExt as _;
        let m = std::fs::metadata(&dev).unwrap();
        assert!(m.file_type().is_char_device());
        assert_eq!(
            std::fs::read_dir(d.path()).unwrap().count(),
            usize::from(made_here)
        );
    }

    #[test]
    fn a_directory_and_a_socket_are_refused_in_one_line() {
        let d = scratch("refused");
        let e = write_file(d.path(), made(b"x")).unwrap_err();
        let msg = format!("{e:#}");
        assert_eq!(
            msg,
            format!(
                "{0}: is a directory: give the file's name in it ({0}/report.h5)",
                d.path().display()
            )
        );
        // A text's name: nothing to suggest (it used to be `report.h5`).
        let msg = format!("{:#}", write_bytes(d.path(), b"x").unwrap_err());
        assert_eq!(
            msg,
            format!(
                "{}: is a directory: give a file's name in it",
                d.path().display()
            )
        );
        let sock = d.path().join("s");
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let msg = format!("{:#}", write_bytes(&sock, b"x").unwrap_err());
        assert!(msg.ends_with("is a socket"), "{msg}");
    }
}
