//! What a traced run wrote at its report path: the report, its profile
//! (`.wmprof`), the spill directory and its profiles, and the reports beside
//! it of processes the run started (`<stem>-<pid>.h5`, `<stem>-spawn-…`).
//! Every one is written under a temporary name and renamed into place, so a
//! file written during the run is new or has a new inode.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

/// Identity and state of each such file at one moment.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ReportFiles(BTreeMap<PathBuf, (u64, u64, i64, i64, u64)>);

impl ReportFiles {
    /// The files of report path `report` as they are now, with those of
    /// the spill directory `spill` (`WMHCCT_SPILL_DIR`; default beside
    /// the report).
    pub fn of(report: &Path, spill: Option<&Path>) -> ReportFiles {
        let mut seen = BTreeMap::new();
        let (Some(name), Some(stem)) = (report.file_name(), report.file_stem()) else {
            return ReportFiles(seen);
        };
        let (name, stem) = (name.to_string_lossy(), stem.to_string_lossy());
        let beside = format!("{stem}-");
        let dir = match report.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let spill = spill.map_or_else(
            || wmhcct_format::spill_dir_beside(report),
            Path::to_path_buf,
        );
        for (d, all) in [(dir, false), (spill, true)] {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries.flatten() {
                let n = e.file_name();
                let n = n.to_string_lossy();
                if all || n.starts_with(&*name) || n.starts_with(&beside) {
                    if let Ok(m) = e.metadata() {
                        let id = (m.dev(), m.ino(), m.mtime(), m.mtime_nsec(), m.size());
                        seen.insert(e.path(), id);
                    }
                }
            }
        }
        ReportFiles(seen)
    }

    /// Whether any file is new or changed since `before`.
    pub fn written_since(&self, before: &ReportFiles) -> bool {
        self.0.iter().any(|(p, id)| before.0.get(p) != Some(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_and_replaced_files_count_and_others_do_not() {
        let d = tempfile::tempdir().unwrap();
        let report = d.path().join("job.h5");
        let at = |n: &str| d.path().join(n);
        std::fs::write(at("job.h5"), b"old").unwrap();
        std::fs::write(at("other.h5"), b"x").unwrap();
        let before = ReportFiles::of(&report, None);
        assert!(!ReportFiles::of(&report, None).written_since(&before));

        // Unrelated files do not count.
        std::fs::write(at("other.h5"), b"changed").unwrap();
        std::fs::write(at("jobless.h5"), b"x").unwrap();
        assert!(!ReportFiles::of(&report, None).written_since(&before));

        // The report replaced by a rename, as the tracer writes it.
        std::fs::write(at("tmp"), b"new").unwrap();
        std::fs::rename(at("tmp"), at("job.h5")).unwrap();
        assert!(ReportFiles::of(&report, None).written_since(&before));

        for name in ["job.h5.wmprof", "job-1234.h5", "job-spawn-99.h5"] {
            let d2 = tempfile::tempdir().unwrap();
            let r2 = d2.path().join("job.h5");
            let before = ReportFiles::of(&r2, None);
            std::fs::write(d2.path().join(name), b"x").unwrap();
            assert!(ReportFiles::of(&r2, None).written_since(&before), "{name}");
        }
    }

    #[test]
    fn a_profile_in_the_spill_directory_counts() {
        let d = tempfile::tempdir().unwrap();
        let report = d.path().join("farm.h5");
        let spill = d.path().join("farm.h5.spill");
        std::fs::create_dir(&spill).unwrap();
        std::fs::write(spill.join("rank-0.wmprof"), b"a").unwrap();
        let before = ReportFiles::of(&report, None);
        std::fs::write(spill.join("tmp"), b"b").unwrap();
        std::fs::rename(spill.join("tmp"), spill.join("rank-0.wmprof")).unwrap();
        assert!(ReportFiles::of(&report, None).written_since(&before));

        // A spill directory of its own (WMHCCT_SPILL_DIR).
        let own = d.path().join("spills");
        std::fs::create_dir(&own).unwrap();
        let (before, beside) = (
            ReportFiles::of(&report, Some(&own)),
            ReportFiles::of(&report, None),
        );
        std::fs::write(own.join("rank-1.wmprof"), b"c").unwrap();
        assert!(ReportFiles::of(&report, Some(&own)).written_since(&before));
        assert!(!ReportFiles::of(&report, None).written_since(&beside));
    }

    #[test]
    fn a_relative_report_path_is_read_in_the_working_directory() {
        // Only that it lists the directory: "x.h5" has no parent part.
        let none = ReportFiles::of(Path::new("wmhcct-no-such-report-here.h5"), None);
        assert!(!none.written_since(&ReportFiles::default()));
    }
}
