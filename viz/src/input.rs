//! What a file given to `wmhcct report` is: an HDF5 report or a raw profile.

use std::io::Read;
use std::path::Path;

use wmhcct_format::{looks_like_profile, Profile};

use crate::h5layout::{self, ReportError};
use crate::spool;
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
    #[error("an HDF5 file, not a wmhcct profile: this command takes the raw profiles the tracer writes (.wmprof); a report is read by `wmhcct report`, `plot`, `export` and `diff`")]
    ReportNotProfile,
    #[error(transparent)]
    Profile(#[from] wmhcct_format::FormatError),
    #[error(transparent)]
    Report(#[from] ReportError),
    #[error("standard input is a terminal: pipe a report or a profile into it (`wmhcct report - < r.h5`), or name the file")]
    StdinTerminal,
    #[error("given more than once: standard input can be only one of the inputs")]
    StdinTwice,
}

/// What the first bytes of a file make it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Profile,
    Report,
}

/// The kind of file that starts with `head` (its first 8 bytes, fewer only
/// when the file is that short).
pub fn sniff(head: &[u8]) -> Result<Kind, InputError> {
    if head.is_empty() {
        return Err(InputError::Empty);
    }
    if looks_like_profile(head) || wmhcct_format::MAGIC.starts_with(head) {
        return Ok(Kind::Profile);
    }
    if head.len() == 8 && head[..] == HDF5_MAGIC {
        return Ok(Kind::Report);
    }
    if HDF5_MAGIC.starts_with(head) {
        return Err(ReportError::Corrupt("file ends inside the HDF5 signature".into()).into());
    }
    Err(InputError::Unrecognised)
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

/// Read and decode a raw profile (`-`: from standard input).
pub fn read_profile(path: &Path) -> Result<Profile, InputError> {
    let input = spool::open(path)?;
    let bytes = std::fs::read(input.path())?;
    if bytes.is_empty() {
        return Err(InputError::Empty);
    }
    if bytes.starts_with(&HDF5_MAGIC) {
        return Err(InputError::ReportNotProfile);
    }
    Ok(wmhcct_format::decode(&bytes)?)
}

/// Open a report or a profile (symbolising the latter now); `-` reads
/// either from standard input.
pub fn load(path: &Path) -> Result<Loaded, InputError> {
    let input = spool::open(path)?;
    let path = input.path();
    let mut head = Vec::with_capacity(8);
    std::fs::File::open(path)?.take(8).read_to_end(&mut head)?;
    match sniff(&head)? {
        Kind::Profile => {
            let profile = read_profile(path)?;
            let symbols = symbolize(&profile);
            Ok(Loaded {
                profile,
                symbols,
                format_version: wmhcct_format::FORMAT_VERSION,
            })
        }
        Kind::Report => {
            let (profile, symbols) = h5layout::read(path)?;
            Ok(Loaded {
                profile,
                symbols,
                format_version: h5layout::REPORT_VERSION,
            })
        }
    }
}
