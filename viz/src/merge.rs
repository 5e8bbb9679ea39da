//! `wmhcct merge`: profiles (per-rank spill files, per-process profiles,
//! partial job profiles) merged into one job report, through the same merge
//! the MPI reduction runs (`wmhcct_collector::job`).

use std::path::PathBuf;

use anyhow::{bail, Context as _, Result};
use wmhcct_collector::job;
use wmhcct_format::Profile;

use crate::cli::MergeArgs;
use crate::convert::write_report;
use crate::input::read_profile;

/// The profile files named by `inputs`: files as given, directories
/// expanded to their `*.wmprof` files (sorted by name).
pub fn expand(inputs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = Vec::new();
    for p in inputs {
        if crate::spool::is_stdin(p) {
            out.push(p.clone());
            continue;
        }
        let meta = std::fs::metadata(p).with_context(|| p.display().to_string())?;
        if meta.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| p.display().to_string())?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "wmprof") && f.is_file())
                .collect();
            if files.is_empty() {
                bail!("{}: no *.wmprof profiles in this directory", p.display());
            }
            files.sort();
            out.extend(files);
        } else {
            out.push(p.clone());
        }
    }
    out.dedup();
    Ok(out)
}

/// Merge decoded profiles into one job profile. Ranks come from the
/// profiles (`meta.rank`); a profile without one, or repeating one already
/// taken, gets the next free rank number.
pub fn merge_profiles(profiles: Vec<(PathBuf, Profile)>) -> Result<Profile> {
    refuse_one_process_twice(&profiles)?;
    let mut used = std::collections::HashSet::new();
    let mut nranks = 0u32;
    let mut capacity = Some(0usize);
    let mut parts = Vec::with_capacity(profiles.len());
    let mut pending = Vec::new();
    for (path, p) in profiles {
        // Exact mode anywhere: no bound; else the largest ε-capacity.
        capacity = match (capacity, job::capacity(&p.config)) {
            (Some(c), k) if k > 0 && !p.config.exact => Some(c.max(k)),
            _ => None,
        };
        nranks = nranks.max(p.meta.nranks.unwrap_or(0));
        if !p.ranks.is_empty() {
            for r in &p.ranks {
                if !used.insert(r.rank) {
                    bail!(
                        "{}: rank {} appears twice among the inputs",
                        path.display(),
                        r.rank
                    );
                }
            }
            parts.push(p);
        } else {
            match p.meta.rank {
                Some(r) if used.insert(r) => parts.push(job::as_job_part(p, r)),
                _ => pending.push(p),
            }
        }
    }
    let mut next = 0u32;
    for p in pending {
        while used.contains(&next) {
            next += 1;
        }
        used.insert(next);
        parts.push(job::as_job_part(p, next));
    }
    let merged_ranks = used.len() as u32;
    let Some((mut job, _rounds)) = job::merge_all(parts, capacity.unwrap_or(0)) else {
        bail!("no profiles to merge");
    };
    job::finish(&mut job, nranks.max(merged_ranks));
    Ok(job)
}

/// Refuse two inputs that are the same process's profile (the same host,
/// pid and start: a copy of a spill file, or `-` fed the file also named):
/// merged, its events would count twice, as a made-up extra rank.
fn refuse_one_process_twice(profiles: &[(PathBuf, Profile)]) -> Result<()> {
    let mut seen = std::collections::HashMap::new();
    for (path, p) in profiles.iter().filter(|(_, p)| p.ranks.is_empty()) {
        let m = &p.meta;
        let key = (m.hostname.as_str(), m.pid, m.start_unix_ns);
        if let Some(first) = seen.insert(key, path) {
            bail!(
                "{}: the same process's profile as {} (pid {} on {}{}): give it once",
                crate::spool::name(first),
                crate::spool::name(path),
                m.pid,
                m.hostname,
                m.rank.map(|r| format!(", rank {r}")).unwrap_or_default()
            );
        }
    }
    Ok(())
}

pub fn read_all(files: &[PathBuf]) -> Result<Vec<(PathBuf, Profile)>> {
    files
        .iter()
        .map(|f| {
            read_profile(f)
                .with_context(|| crate::spool::name(f))
                .map(|p| (f.clone(), p))
        })
        .collect()
}

pub fn run(args: &MergeArgs) -> Result<()> {
    crate::spool::stdin_once(&args.inputs).context("standard input")?;
    let files = expand(&args.inputs)?;
    crate::output::refuse_input_as_output(&args.output, &files)?;
    // A profile found in a spill directory that cannot be read (a rank
    // killed while writing it, a foreign file) is skipped with a warning:
    // the other ranks are still worth a report. Files named explicitly must
    // all be readable.
    let mut profiles = Vec::with_capacity(files.len());
    for f in &files {
        match read_profile(f) {
            Ok(p) => profiles.push((f.clone(), p)),
            Err(e) if !args.inputs.contains(f) => {
                say!("wmhcct: warning: skipping {}: {e}", f.display());
            }
            Err(e) => return Err(e).with_context(|| crate::spool::name(f)),
        }
    }
    if profiles.is_empty() {
        bail!("no readable profiles among {} file(s)", files.len());
    }
    let (profiles, earlier) = leave_out_earlier_launches(profiles, &args.inputs);
    for (dir, names) in &earlier {
        say!(
            "wmhcct: warning: {}: leaving out {} profile(s) of an earlier launch than its newest ({}); name them to merge them",
            dir.display(),
            names.len(),
            listed(names)
        );
    }
    let profiles_read = profiles.len();
    let merged: Vec<PathBuf> = profiles.iter().map(|(f, _)| f.clone()).collect();
    let job = merge_profiles(profiles)?;
    write_report(&job, &args.output)?;
    if args.remove_input {
        // Only what was merged: an earlier launch's profiles stay.
        remove(&merged)?;
    }
    say!(
        "wmhcct: merged {} profile(s) of {} rank(s) into {}",
        profiles_read,
        job.ranks.len(),
        args.output.display()
    );
    Ok(())
}

/// The launch a profile belongs to, for telling launches apart in one
/// directory: its name (empty where the process could not learn it) and
/// the number of processes; `None` for a process outside any launch.
fn launch_key(p: &Profile) -> Option<(&str, u32)> {
    p.meta.nranks.map(|n| (p.meta.launch.as_str(), n))
}

/// Whether two profiles' launches can be the same one: the same number of
/// processes, and the same name where both have one (a rank of MPICH's
/// Hydra that spilled before `MPI_Init` has none, its job's other ranks
/// have rank 0's).
fn same_launch(a: (&str, u32), b: (&str, u32)) -> bool {
    a.1 == b.1 && (a.0.is_empty() || b.0.is_empty() || a.0 == b.0)
}

/// Profiles with the files they were read from.
type Named = Vec<(PathBuf, Profile)>;
/// Per directory, the names of the files left out.
type LeftOut = Vec<(PathBuf, Vec<String>)>;

/// Split off, per directory given, the profiles found there that are of
/// another launch than the newest one there (the launch of the profile
/// that ended last, among those that name one if any do). A spill
/// directory outlives its run: a later run with the same report path
/// overwrites only the `rank-<r>.wmprof` files it writes itself, so a run
/// with fewer ranks, or whose ranks were killed before they spilled, leaves
/// the earlier run's files beside its own. Files named in `inputs`, and
/// profiles of processes outside any launch, are always kept. Returns the
/// kept profiles and, per directory, the file names left out.
fn leave_out_earlier_launches(profiles: Named, inputs: &[PathBuf]) -> (Named, LeftOut) {
    let found_in = |f: &PathBuf| -> Option<PathBuf> {
        if inputs.contains(f) {
            return None;
        }
        f.parent().map(|d| d.to_path_buf())
    };
    // Per directory: the launch of its newest profile, one that names its
    // launch before one that does not.
    struct Newest {
        dir: PathBuf,
        /// Whether the profile names its launch, and its end.
        order: (bool, u64),
        launch: (String, u32),
    }
    let mut newest: Vec<Newest> = Vec::new();
    for (f, p) in &profiles {
        let (Some(dir), Some((launch, n))) = (found_in(f), launch_key(p)) else {
            continue;
        };
        let candidate = Newest {
            order: (!launch.is_empty(), p.meta.end_unix_ns),
            launch: (launch.to_string(), n),
            dir,
        };
        match newest.iter_mut().find(|e| e.dir == candidate.dir) {
            Some(e) if e.order >= candidate.order => {}
            Some(e) => *e = candidate,
            None => newest.push(candidate),
        }
    }
    let mut kept = Vec::with_capacity(profiles.len());
    let mut left: LeftOut = Vec::new();
    for (f, p) in profiles {
        let dir = found_in(&f);
        let wanted = dir
            .as_ref()
            .and_then(|d| newest.iter().find(|e| e.dir == *d))
            .map(|e| &e.launch);
        let earlier = match (wanted, launch_key(&p)) {
            (Some((launch, n)), Some(key)) => !same_launch((launch.as_str(), *n), key),
            _ => false,
        };
        if !earlier {
            kept.push((f, p));
            continue;
        }
        let dir = dir.unwrap_or_default();
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match left.iter_mut().find(|(d, _)| *d == dir) {
            Some((_, names)) => names.push(name),
            None => left.push((dir, vec![name])),
        }
    }
    (kept, left)
}

/// Up to four names, then how many more.
fn listed(names: &[String]) -> String {
    const SHOWN: usize = 4;
    let mut s = names
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        s.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    s
}

/// Delete the input files (a stream, such as `-`, has nothing to delete).
pub fn remove(files: &[PathBuf]) -> Result<()> {
    for p in files.iter().filter(|p| !crate::spool::is_stream(p)) {
        std::fs::remove_file(p).with_context(|| format!("{}: removing input", p.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(launch: &str, nranks: Option<u32>, rank: u32, end: u64) -> Profile {
        let mut p = Profile::default();
        p.meta.launch = launch.into();
        p.meta.nranks = nranks;
        p.meta.rank = nranks.map(|_| rank);
        p.meta.end_unix_ns = end;
        p
    }

    fn names(kept: &[(PathBuf, Profile)]) -> Vec<String> {
        kept.iter().map(|(f, _)| f.display().to_string()).collect()
    }

    #[test]
    fn a_directory_keeps_its_newest_launch() {
        let spill = PathBuf::from("/s/job.h5.spill");
        let input = vec![spill.clone()];
        let profiles = vec![
            (
                spill.join("rank-0.wmprof"),
                profile("pmix:2", Some(2), 0, 900),
            ),
            (
                spill.join("rank-1.wmprof"),
                profile("pmix:2", Some(2), 1, 950),
            ),
            (
                spill.join("rank-2.wmprof"),
                profile("pmix:1", Some(4), 2, 100),
            ),
            (
                spill.join("rank-3.wmprof"),
                profile("pmix:1", Some(4), 3, 120),
            ),
            (spill.join("pid-9.wmprof"), profile("", None, 0, 50)),
        ];
        let (kept, left) = leave_out_earlier_launches(profiles, &input);
        assert_eq!(
            names(&kept),
            [
                "/s/job.h5.spill/rank-0.wmprof",
                "/s/job.h5.spill/rank-1.wmprof",
                "/s/job.h5.spill/pid-9.wmprof"
            ]
        );
        assert_eq!(
            left,
            [(
                spill,
                vec!["rank-2.wmprof".to_string(), "rank-3.wmprof".into()]
            )]
        );
    }

    #[test]
    fn a_launcher_that_names_no_launch_is_told_apart_by_its_size() {
        // MPICH's Hydra: no launch name; a run of 3 after a run of 2.
        let d = PathBuf::from("d");
        let profiles = vec![
            (d.join("rank-0.wmprof"), profile("", Some(3), 0, 500)),
            (d.join("rank-2.wmprof"), profile("", Some(3), 2, 510)),
            (d.join("rank-1.wmprof"), profile("", Some(2), 1, 10)),
        ];
        let (kept, left) = leave_out_earlier_launches(profiles, std::slice::from_ref(&d));
        assert_eq!(kept.len(), 2);
        assert_eq!(left, [(d, vec!["rank-1.wmprof".to_string()])]);
    }

    #[test]
    fn a_rank_that_could_not_learn_its_launch_goes_with_the_newest_of_its_size() {
        // Hydra: rank 1 spilled before MPI_Init (no name), the others after
        // (rank 0's name); rank 3 is of an earlier launch of 4.
        let d = PathBuf::from("d");
        let profiles = vec![
            (
                d.join("rank-0.wmprof"),
                profile("mpi:h:7:1", Some(3), 0, 500),
            ),
            (d.join("rank-1.wmprof"), profile("", Some(3), 1, 400)),
            (
                d.join("rank-2.wmprof"),
                profile("mpi:h:7:1", Some(3), 2, 450),
            ),
            (d.join("rank-3.wmprof"), profile("", Some(4), 3, 900)),
        ];
        let (kept, left) = leave_out_earlier_launches(profiles, std::slice::from_ref(&d));
        assert_eq!(kept.len(), 3);
        assert_eq!(left, [(d, vec!["rank-3.wmprof".to_string()])]);
        assert!(same_launch(("", 2), ("pmix:1", 2)));
        assert!(!same_launch(("pmix:2", 2), ("pmix:1", 2)));
        assert!(!same_launch(("", 2), ("", 3)));
    }

    #[test]
    fn named_files_and_separate_directories_are_all_kept() {
        let (a, b) = (PathBuf::from("a"), PathBuf::from("b"));
        let named = a.join("rank-1.wmprof");
        let profiles = vec![
            (
                a.join("rank-0.wmprof"),
                profile("slurm:7.1", Some(2), 0, 900),
            ),
            (named.clone(), profile("slurm:7.0", Some(2), 1, 100)),
            (
                b.join("rank-0.wmprof"),
                profile("slurm:7.0", Some(2), 0, 100),
            ),
        ];
        let (kept, left) = leave_out_earlier_launches(profiles, &[a, named, b]);
        assert_eq!(kept.len(), 3);
        assert!(left.is_empty());
    }

    #[test]
    fn long_lists_are_cut() {
        let n: Vec<String> = (0..6).map(|i| format!("rank-{i}.wmprof")).collect();
        assert_eq!(
            listed(&n),
            "rank-0.wmprof, rank-1.wmprof, rank-2.wmprof, rank-3.wmprof and 2 more"
        );
        assert_eq!(listed(&n[..1]), "rank-0.wmprof");
    }
}
