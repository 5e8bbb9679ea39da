//! `wmhcct convert`: profile(s) → symbolised HDF5 report.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};

use crate::cli::ConvertArgs;
use crate::h5layout;
use crate::input::read_profile;
use crate::symbolize::symbolize;

pub fn run(args: &ConvertArgs) -> Result<()> {
    let mut inputs: Vec<&PathBuf> = Vec::new();
    for p in &args.profiles {
        if !inputs.contains(&p) {
            inputs.push(p);
        }
    }
    let first = inputs[0];
    let profile = read_profile(first).with_context(|| first.display().to_string())?;
    for other in &inputs[1..] {
        let p = read_profile(other).with_context(|| other.display().to_string())?;
        if p != profile {
            bail!(
                "{}: merging several profiles is not supported yet (convert each rank's profile on its own)",
                other.display()
            );
        }
    }
    let symbols = symbolize(&profile);
    let out = &args.output;
    let tmp = temp_path(out);
    if let Err(e) = h5layout::write(&tmp, &profile, &symbols) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| out.display().to_string());
    }
    if let Err(e) = std::fs::rename(&tmp, out) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| out.display().to_string());
    }
    if args.remove_input {
        for p in inputs {
            std::fs::remove_file(p).with_context(|| format!("{}: removing input", p.display()))?;
        }
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
