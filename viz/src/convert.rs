//! `wmhcct convert`: profile(s) → symbolised HDF5 report.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use wmhcct_format::Profile;

use crate::cli::ConvertArgs;
use crate::h5layout;
use crate::input::read_profile;
use crate::merge::{merge_profiles, read_all, remove};
use crate::symbolize::symbolize;

pub fn run(args: &ConvertArgs) -> Result<()> {
    crate::spool::stdin_once(&args.profiles).context("standard input")?;
    let mut inputs: Vec<PathBuf> = Vec::new();
    for p in &args.profiles {
        if !inputs.contains(p) {
            inputs.push(p.clone());
        }
    }
    crate::output::refuse_input_as_output(&args.output, &inputs)?;
    let profile = if inputs.len() == 1 {
        read_profile(&inputs[0]).with_context(|| crate::spool::name(&inputs[0]))?
    } else {
        // Several profiles (ranks or processes of one job): one job report.
        merge_profiles(read_all(&inputs)?)?
    };
    write_report(&profile, &args.output)?;
    if args.remove_input {
        remove(&inputs)?;
    }
    Ok(())
}

/// Symbolise `profile` and write it as an HDF5 report at `out`
/// (`output::write_file`: a regular file atomically, by a temporary
/// sibling renamed into place; a stream or standard output written into).
///
/// The symbols are made on a thread of their own while the counts are
/// written (`h5layout::write_then_name`): loading the modules' debug
/// information and compressing the trees' rows are the two larger parts of
/// a conversion, and the process that waits for it is the traced program
/// at its exit.
///
/// Under a memory limit (`workers.rs`) everything runs on this thread.
pub fn write_report(profile: &Profile, out: &Path) -> Result<()> {
    crate::output::write_file(out, |tmp| {
        std::thread::scope(|s| {
            // A thread that cannot be started (a process limit) is no error:
            // the symbols are then made here, first.
            let symbolizer = (crate::workers::available() > 1)
                .then(|| {
                    std::thread::Builder::new()
                        .name("symbols".into())
                        .spawn_scoped(s, || symbolize(profile))
                        .ok()
                })
                .flatten();
            let mut symbols = None;
            h5layout::write_then_name(tmp, profile, || {
                Ok(&*symbols.insert(match symbolizer {
                    // (`panic = "abort"`: a symbolizer that panics ends the process.)
                    Some(t) => t.join().unwrap_or_default(),
                    None => symbolize(profile),
                }))
            })
            .with_context(|| crate::output::name(out))
        })?;
        crate::seal::seal(tmp).with_context(|| crate::output::name(out))
    })
}
