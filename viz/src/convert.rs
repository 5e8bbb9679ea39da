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
    let mut inputs: Vec<PathBuf> = Vec::new();
    for p in &args.profiles {
        if !inputs.contains(p) {
            inputs.push(p.clone());
        }
    }
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

/// Symbolise `profile` and write it as an HDF5 report at `out`, atomically
/// (a temporary sibling renamed into place).
pub fn write_report(profile: &Profile, out: &Path) -> Result<()> {
    let symbols = symbolize(profile);
    let tmp = temp_path(out);
    if let Err(e) = h5layout::write(&tmp, profile, &symbols) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| out.display().to_string());
    }
    if let Err(e) = crate::seal::seal(&tmp) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| out.display().to_string());
    }
    if let Err(e) = std::fs::rename(&tmp, out) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| out.display().to_string());
    }
    Ok(())
}

/// A sibling of `out` to write into before the atomic rename.
fn temp_path(out: &Path) -> PathBuf {
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "report.h5".into());
    out.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}
