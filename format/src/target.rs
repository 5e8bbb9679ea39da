//! What a report path names (`WMHCCT_OUT`, `wmhcct convert -o`), decided
//! before anything is written there, for the tracer and the commands that
//! write reports.
//!
//! A report is written under a temporary name beside its path and renamed
//! into place, so that no reader ever sees half a report. That is right
//! for a regular file and wrong for anything else: a rename over
//! `/dev/null` (as root) replaces the device with a regular file, one over
//! a FIFO or `/dev/stdout` replaces the FIFO or the link. So the path is
//! resolved first:
//! - symbolic links are followed, so a link to a report stays a link and
//!   its target gets the report;
//! - a character device (`/dev/null`, a terminal), a FIFO, or a process's
//!   file descriptor (`/dev/stdout`, `/dev/fd/3`, `/proc/self/fd/1`,
//!   resolved to `/proc/<pid>/fd/<n>` so that another process opens the
//!   same file) is a stream: the report is written into it;
//! - a directory is returned as such (the tracer puts its reports in it,
//!   the commands refuse it);
//! - a block device or a socket is refused: a report is never written over
//!   a disk.

use std::path::{Component, Path, PathBuf};

/// What a report path names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A regular file, or nothing yet (symbolic links followed): written
    /// under a temporary name beside it and renamed into place.
    File(PathBuf),
    /// An existing directory.
    Directory(PathBuf),
    /// A character device, a FIFO or a process's file descriptor: the
    /// report is written into it, as `cat >` would.
    Stream(PathBuf),
}

/// A path no report may be written to.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("is a block device: a report is never written over a disk")]
    BlockDevice,
    #[error("is a socket")]
    Socket,
    #[error("has too many levels of symbolic links")]
    LinkLoop,
}

impl Target {
    /// The path to write to (symbolic links resolved).
    pub fn path(&self) -> &Path {
        match self {
            Target::File(p) | Target::Directory(p) | Target::Stream(p) => p,
        }
    }
}

/// Resolve `path` (absolute, or relative to the working directory) into
/// what a report written there would go to. A path that cannot be looked
/// at (no permission, a missing directory) is a `File`: writing it gives
/// the error then, with the file's name.
pub fn resolve(path: &Path) -> Result<Target, TargetError> {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        if let Some(fd) = process_fd(&p) {
            return Ok(Target::Stream(fd));
        }
        let meta = match std::fs::symlink_metadata(&p) {
            Ok(m) => m,
            Err(_) => return Ok(Target::File(p)),
        };
        let kind = meta.file_type();
        if kind.is_symlink() {
            let Ok(to) = std::fs::read_link(&p) else {
                return Ok(Target::File(p));
            };
            p = match p.parent() {
                Some(dir) if to.is_relative() => dir.join(to),
                _ => to,
            };
            continue;
        }
        return classify(p, kind);
    }
    Err(TargetError::LinkLoop)
}

#[cfg(unix)]
fn classify(p: PathBuf, kind: std::fs::FileType) -> Result<Target, TargetError> {
    use std::os::unix::fs::FileTypeExt as _;
    if kind.is_dir() {
        Ok(Target::Directory(p))
    } else if kind.is_char_device() || kind.is_fifo() {
        Ok(Target::Stream(p))
    } else if kind.is_block_device() {
        Err(TargetError::BlockDevice)
    } else if kind.is_socket() {
        Err(TargetError::Socket)
    } else {
        Ok(Target::File(p))
    }
}

#[cfg(not(unix))]
fn classify(p: PathBuf, kind: std::fs::FileType) -> Result<Target, TargetError> {
    Ok(if kind.is_dir() {
        Target::Directory(p)
    } else {
        Target::File(p)
    })
}

/// `p` as `/proc/<pid>/fd/<n>` if it names a file descriptor of a process
/// (its directory, links resolved, is `/proc/<pid>/fd` or
/// `/proc/<pid>/task/<tid>/fd`): the descriptor's link names no path
/// another process could open (`pipe:[…]`), and `self` would be that other
/// process.
fn process_fd(p: &Path) -> Option<PathBuf> {
    let name = p.file_name()?;
    // Before anything else: resolving the directory allocates (realpath's
    // result), which in the tracer lands in the program's allocator.
    if !name.to_str()?.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let fd = std::fs::canonicalize(dir).ok()?.join(name);
    process_descriptor(&fd).map(|_| fd)
}

/// The process and descriptor number of `/proc/<pid>/fd/<n>` or
/// `/proc/<pid>/task/<tid>/fd/<n>` (links already resolved: what a
/// [`Target::Stream`] of a descriptor holds).
pub fn process_descriptor(p: &Path) -> Option<(u32, i32)> {
    let parts: Vec<&str> = p
        .components()
        .map(|c| match c {
            Component::RootDir => Some("/"),
            Component::Normal(s) => s.to_str(),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let number = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let (pid, n) = match parts.as_slice() {
        ["/", "proc", pid, "fd", n] => (pid, n),
        ["/", "proc", pid, "task", tid, "fd", n] if number(tid) => (pid, n),
        _ => return None,
    };
    if !number(pid) || !number(n) {
        return None;
    }
    Some((pid.parse().ok()?, n.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_descriptors() {
        assert_eq!(
            process_descriptor(Path::new("/proc/42/fd/1")),
            Some((42, 1))
        );
        assert_eq!(
            process_descriptor(Path::new("/proc/42/task/43/fd/100")),
            Some((42, 100))
        );
        for no in [
            "/proc/self/fd/1",
            "/proc/42/fd/x",
            "/proc/42/fd/",
            "proc/42/fd/1",
            "/proc/42/task/x/fd/1",
            "/dev/stdout",
            "/proc/42/fdinfo/1",
        ] {
            assert_eq!(process_descriptor(Path::new(no)), None, "{no}");
        }
    }

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("wmhcct-target-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn files_directories_and_links() {
        let d = scratch("links");
        let file = d.join("r.h5");
        assert_eq!(resolve(&file), Ok(Target::File(file.clone())));
        std::fs::write(&file, b"x").unwrap();
        assert_eq!(resolve(&file), Ok(Target::File(file.clone())));
        assert_eq!(resolve(&d), Ok(Target::Directory(d.clone())));
        // A link (relative, through another link) resolves to its target,
        // also when the target does not exist yet.
        std::os::unix::fs::symlink("r.h5", d.join("a")).unwrap();
        std::os::unix::fs::symlink(d.join("a"), d.join("b")).unwrap();
        assert_eq!(resolve(&d.join("b")), Ok(Target::File(file.clone())));
        std::os::unix::fs::symlink("later.h5", d.join("dangling")).unwrap();
        assert_eq!(
            resolve(&d.join("dangling")),
            Ok(Target::File(d.join("later.h5")))
        );
        std::os::unix::fs::symlink("loop", d.join("loop")).unwrap();
        assert_eq!(resolve(&d.join("loop")), Err(TargetError::LinkLoop));
        // A path under a missing directory: a file, whose write will fail.
        let missing = d.join("no/such/r.h5");
        assert_eq!(resolve(&missing), Ok(Target::File(missing.clone())));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn streams_and_refused_kinds() {
        assert_eq!(
            resolve(Path::new("/dev/null")),
            Ok(Target::Stream(PathBuf::from("/dev/null")))
        );
        // /dev/stdout -> /proc/self/fd/1: this process's descriptor, by pid.
        let pid = std::process::id();
        let fd1 = PathBuf::from(format!("/proc/{pid}/fd/1"));
        assert_eq!(
            resolve(Path::new("/dev/stdout")),
            Ok(Target::Stream(fd1.clone()))
        );
        assert_eq!(
            resolve(Path::new("/proc/self/fd/1")),
            Ok(Target::Stream(fd1))
        );
        let d = scratch("fifo");
        let fifo = d.join("f");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        assert_eq!(resolve(&fifo), Ok(Target::Stream(fifo.clone())));
        let sock = d.join("s");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        assert_eq!(resolve(&sock), Err(TargetError::Socket));
        std::fs::remove_dir_all(&d).unwrap();
        if let Some(block) = ["/dev/loop0", "/dev/sda", "/dev/vda", "/dev/nvme0n1"]
            .iter()
            .map(Path::new)
            .find(|p| p.exists())
        {
            assert_eq!(resolve(block), Err(TargetError::BlockDevice));
        }
    }
}
