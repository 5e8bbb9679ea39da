//! Where the tracer leaves files beside a report, for the writer and the
//! readers that look for them.

use std::path::{Path, PathBuf};

/// The spill directory of `report` unless `WMHCCT_SPILL_DIR` names
/// another: `<report>.spill`, where ranks that do not reach `MPI_Finalize`
/// (and the processes of a task farm) leave their profiles.
pub fn spill_dir_beside(report: &Path) -> PathBuf {
    let mut s = report.as_os_str().to_owned();
    s.push(".spill");
    PathBuf::from(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spill_directory_is_the_report_path_and_spill() {
        assert_eq!(
            spill_dir_beside(Path::new("/a/job.h5")),
            PathBuf::from("/a/job.h5.spill")
        );
        assert_eq!(spill_dir_beside(Path::new("r")), PathBuf::from("r.spill"));
    }
}
