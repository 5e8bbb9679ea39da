//! Where the tracer leaves files beside a report, for the writer and the
//! readers that look for them.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

/// The spill directory of `report` unless `WMHCCT_SPILL_DIR` names
/// another: `<report>.spill`, where ranks that do not reach `MPI_Finalize`
/// (and the processes of a task farm) leave their profiles.
pub fn spill_dir_beside(report: &Path) -> PathBuf {
    let mut s = report.as_os_str().to_owned();
    s.push(".spill");
    PathBuf::from(s)
}

/// The temporary file beside `report` that `wmhcct` process `pid` writes a
/// report into before renaming it into place: `.<name>.<pid>.tmp`. The
/// tracer removes a stopped converter's (`WMHCCT_CONVERT_TIMEOUT`).
pub fn report_temp_beside(report: &Path, pid: u32) -> PathBuf {
    let mut name = OsString::from(".");
    name.push(report.file_name().unwrap_or(OsStr::new("report.h5")));
    name.push(format!(".{pid}.tmp"));
    named_beside(report, name, format!(".wmhcct-{pid}.tmp"))
}

/// The longest file name Linux file systems take (`NAME_MAX`).
pub const NAME_MAX: usize = 255;

/// The file `name` in `report`'s directory, or `short` when `name` is too
/// long for a file name: a report named with up to 255 bytes has room for
/// its profile and temporary file beside it. Until 2026-11-27 a name of
/// 245 bytes or more could be given but not written ("File name too
/// long").
pub fn named_beside(report: &Path, name: OsString, short: String) -> PathBuf {
    if name.as_bytes().len() <= NAME_MAX {
        report.with_file_name(name)
    } else {
        report.with_file_name(short)
    }
}

/// `path` as one word of a shell command line, for the commands the tools
/// suggest (`convert it with: wmhcct convert …`): as it is when it holds
/// only characters no shell treats specially, else in single quotes (a
/// quote inside as `'\''`), so a path with spaces can be pasted.
pub fn shell_word(path: &Path) -> String {
    let s = path.to_string_lossy();
    let plain = |c: char| c.is_ascii_alphanumeric() || "_./:@%+,=-".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_survive_a_shell() {
        assert_eq!(shell_word(Path::new("/a/job.h5")), "/a/job.h5");
        assert_eq!(shell_word(Path::new("/my dir/r 1.h5")), "'/my dir/r 1.h5'");
        assert_eq!(shell_word(Path::new("")), "''");
        for name in ["/my dir/r 1.h5", "it's $HOME `x` \"q\" *.h5", "a\nb", "-"] {
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("printf %s {}", shell_word(Path::new(name))))
                .output()
                .unwrap();
            assert_eq!(String::from_utf8(out.stdout).unwrap(), name);
        }
    }

    #[test]
    fn a_reports_temporary_file_is_hidden_beside_it() {
        assert_eq!(
            report_temp_beside(Path::new("/a/job.h5"), 42),
            PathBuf::from("/a/.job.h5.42.tmp")
        );
    }

    #[test]
    fn the_spill_directory_is_the_report_path_and_spill() {
        assert_eq!(
            spill_dir_beside(Path::new("/a/job.h5")),
            PathBuf::from("/a/job.h5.spill")
        );
        assert_eq!(spill_dir_beside(Path::new("r")), PathBuf::from("r.spill"));
    }
}
