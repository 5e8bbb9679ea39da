//! Where the report goes.

use std::path::{Path, PathBuf};

/// The report path of process `pid`.
///
/// `WMHCCT_OUT` names the report of the traced program itself. A forked
/// child, or a program started by a traced process (fork+exec, `system()`),
/// inserts its pid before the extension, so it never overwrites the parent's
/// report. Without `WMHCCT_OUT` every process writes `wmhcct-<pid>.h5`.
/// Relative paths are taken from the working directory at start.
pub fn report_path(out: Option<&Path>, cwd: &Path, pid: u32, descendant: bool) -> PathBuf {
    let p = match out {
        Some(o) if descendant => {
            let stem = o
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let name = match o.extension() {
                Some(ext) => format!("{stem}-{pid}.{}", ext.to_string_lossy()),
                None => format!("{stem}-{pid}"),
            };
            o.with_file_name(name)
        }
        Some(o) => o.to_path_buf(),
        None => PathBuf::from(format!("wmhcct-{pid}.h5")),
    };
    if p.is_absolute() {
        p
    } else {
        cwd.join(p)
    }
}

/// The profile written next to the report before conversion.
pub fn profile_path(report: &Path) -> PathBuf {
    let mut s = report.as_os_str().to_owned();
    s.push(".wmprof");
    PathBuf::from(s)
}

/// Is our parent process traced too (we were started by a traced program)?
/// An MPI launcher or daemon with the tracer loaded is not traced
/// (`launcher::is_launcher_program`): its children are the job's ranks.
pub fn parent_is_traced() -> bool {
    // SAFETY: getppid has no preconditions.
    let ppid = unsafe { libc::getppid() }.to_string();
    std::fs::read_to_string(format!("/proc/{ppid}/maps"))
        .map(|maps| maps.contains("libwmhcct"))
        .unwrap_or(false)
        && !crate::launcher::runs_a_launcher(&ppid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let cwd = Path::new("/w");
        assert_eq!(
            report_path(None, cwd, 42, false),
            PathBuf::from("/w/wmhcct-42.h5")
        );
        assert_eq!(
            report_path(None, cwd, 42, true),
            PathBuf::from("/w/wmhcct-42.h5")
        );
        let o = Path::new("out/r.h5");
        assert_eq!(
            report_path(Some(o), cwd, 42, false),
            PathBuf::from("/w/out/r.h5")
        );
        assert_eq!(
            report_path(Some(o), cwd, 42, true),
            PathBuf::from("/w/out/r-42.h5")
        );
        assert_eq!(
            report_path(Some(Path::new("/a/rep")), cwd, 7, true),
            PathBuf::from("/a/rep-7")
        );
        assert_eq!(
            profile_path(Path::new("/a/r.h5")),
            PathBuf::from("/a/r.h5.wmprof")
        );
    }
}
