//! What a file given to `wmhcct report` is: an HDF5 report or a raw profile.

use std::io::Read;
use std::path::Path;

use wmhcct_format::{looks_like_profile, Profile};

use crate::h5layout::{self, ReportError};
use crate::symbolize::{symbolize, Symbols};

/// HDF5 file signature (at offset 0 when the file has no user block).
const HDF5_MAGIC: [u8; 8] = *b"\x89HDF\r\n\x1a\n";

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("empty file")]
    Empty,
    #[error("not a wmhcct report or profile")]
    Unrecognised,
    #[error(transparent)]
    Profile(#[from] wmhcct_format::FormatError),
    #[error(transparent)]
    Report(#[from] ReportError),
}

/// A loaded profile with its symbols, and the layout version it came in.
pub struct Loaded {
    pub profile: Profile,
    pub symbols: Symbols,
    /// `h5layout::REPORT_VERSION` for a report (the layout this build writes,
    /// which it reads older reports into), the profile format version
    /// otherwise.
    pub format_version: u32,
}

/// Read and decode a raw profile.
pub fn read_profile(path: &Path) -> Result<Profile, InputError> {
    let bytes = std::fs::read(path)?;
    if bytes.is_empty() {
        return Err(InputError::Empty);
    }
    Ok(wmhcct_format::decode(&bytes)?)
}

/// Open a report or a profile (symbolising the latter now).
pub fn load(path: &Path) -> Result<Loaded, InputError> {
    let mut head = Vec::with_capacity(8);
    std::fs::File::open(path)?.take(8).read_to_end(&mut head)?;
    if head.is_empty() {
        return Err(InputError::Empty);
    }
    if looks_like_profile(&head) || wmhcct_format::MAGIC.starts_with(&head) {
        let profile = read_profile(path)?;
        let symbols = symbolize(&profile);
        return Ok(Loaded {
            profile,
            symbols,
            format_version: wmhcct_format::FORMAT_VERSION,
        });
    }
    if head.len() == 8 && head[..] == HDF5_MAGIC {
        let (profile, symbols) = h5layout::read(path)?;
        return Ok(Loaded {
            profile,
            symbols,
            format_version: h5layout::REPORT_VERSION,
        });
    }
    if HDF5_MAGIC.starts_with(&head) {
        return Err(ReportError::Corrupt("file ends inside the HDF5 signature".into()).into());
    }
    Err(InputError::Unrecognised)
}
