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
                eprintln!("wmhcct: warning: skipping {}: {e}", f.display());
            }
            Err(e) => return Err(e).with_context(|| crate::spool::name(f)),
        }
    }
    if profiles.is_empty() {
        bail!("no readable profiles among {} file(s)", files.len());
    }
    let profiles_read = profiles.len();
    let job = merge_profiles(profiles)?;
    write_report(&job, &args.output)?;
    if args.remove_input {
        remove(&files)?;
    }
    eprintln!(
        "wmhcct: merged {} profile(s) of {} rank(s) into {}",
        profiles_read,
        job.ranks.len(),
        args.output.display()
    );
    Ok(())
}

/// Delete the input files (a stream, such as `-`, has nothing to delete).
pub fn remove(files: &[PathBuf]) -> Result<()> {
    for p in files.iter().filter(|p| !crate::spool::is_stream(p)) {
        std::fs::remove_file(p).with_context(|| format!("{}: removing input", p.display()))?;
    }
    Ok(())
}
