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
/// Under a memory limit (`workers.rs`) everything runs on this thread, the
/// symbols first.
pub fn write_report(profile: &Profile, out: &Path) -> Result<()> {
    if crate::workers::available() == 1 {
        let symbols = symbolize(profile);
        return crate::output::write_file(out, |tmp| {
            h5layout::write_then_name(tmp, profile, || Ok(&symbols))
                .with_context(|| crate::output::name(out))?;
            crate::seal::seal(tmp).with_context(|| crate::output::name(out))
        });
    }
    crate::output::write_file(out, |tmp| {
        std::thread::scope(|s| {
            let symbolizer = s.spawn(|| symbolize(profile));
            let mut symbols = None;
            h5layout::write_then_name(tmp, profile, || {
                // (`panic = "abort"`: a symbolizer that panics ends the process.)
                Ok(&*symbols.insert(symbolizer.join().unwrap_or_default()))
            })
            .with_context(|| crate::output::name(out))
        })?;
        crate::seal::seal(tmp).with_context(|| crate::output::name(out))
    })
}
