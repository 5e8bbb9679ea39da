//! The per-process profile written by `libwmhcct.so` and read by `wmhcct`.
//!
//! One module shared by the writer and every reader. Layout of a profile file:
//!
//! ```text
//! magic   8 bytes  b"WMHCCTP\0"
//! version u32 LE   FORMAT_VERSION
//! length  u64 LE   length of the compressed body
//! body    lz4 (size-prepended block) of the bincode encoding of `Profile`
//! count   u64 LE   number of tree nodes, checked by the reader last
//! ```
//!
//! The reader rejects a foreign magic, another version, a truncated body or a
//! count that disagrees with the decoded profile, with a typed error.

pub mod mpi_abi;
mod paths;
mod profile;
mod series;
pub mod settings;
mod target;

pub use paths::*;
pub use profile::*;
pub use series::*;
pub use target::*;

use std::io::{Read, Write};

/// File magic of a profile.
pub const MAGIC: [u8; 8] = *b"WMHCCTP\0";
/// Version of the profile layout; bumped on every incompatible change.
pub const FORMAT_VERSION: u32 = 6;
/// Upper bound on a decoded profile, against hostile or corrupt lengths.
const MAX_BODY: u64 = 1 << 34;

#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("not a wmhcct profile (bad magic)")]
    BadMagic,
    #[error("profile format version {found}, this build reads version {expected}")]
    Version { found: u32, expected: u32 },
    #[error("profile is truncated")]
    Truncated,
    #[error("profile body is corrupt: {0}")]
    Corrupt(String),
    #[error("profile node count mismatch: trailer says {trailer}, body has {body}")]
    CountMismatch { trailer: u64, body: u64 },
}

fn node_count(p: &Profile) -> u64 {
    p.trees.iter().map(|t| t.nodes.len() as u64).sum()
}

/// Serialise a profile to bytes (magic, version, body, count).
pub fn encode(p: &Profile) -> Result<Vec<u8>, FormatError> {
    let raw = bincode::serialize(p).map_err(|e| FormatError::Corrupt(e.to_string()))?;
    let body = lz4_flex::block::compress_prepend_size(&raw);
    let mut out = Vec::with_capacity(body.len() + 28);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(&body);
    out.extend_from_slice(&node_count(p).to_le_bytes());
    Ok(out)
}

/// Write a profile to `w`.
pub fn write_to<W: Write>(mut w: W, p: &Profile) -> Result<(), FormatError> {
    w.write_all(&encode(p)?)?;
    w.flush()?;
    Ok(())
}

/// Is this byte string the start of a profile (magic only)?
pub fn looks_like_profile(head: &[u8]) -> bool {
    head.len() >= MAGIC.len() && head[..MAGIC.len()] == MAGIC
}

/// Decode a profile from bytes, checking magic, version, lengths and count.
pub fn decode(bytes: &[u8]) -> Result<Profile, FormatError> {
    if bytes.len() < MAGIC.len() {
        return Err(if MAGIC.starts_with(bytes) && !bytes.is_empty() {
            FormatError::Truncated
        } else {
            FormatError::BadMagic
        });
    }
    if !looks_like_profile(bytes) {
        return Err(FormatError::BadMagic);
    }
    let rest = &bytes[MAGIC.len()..];
    let version = u32::from_le_bytes(take::<4>(rest, 0)?);
    if version != FORMAT_VERSION {
        return Err(FormatError::Version {
            found: version,
            expected: FORMAT_VERSION,
        });
    }
    let len = u64::from_le_bytes(take::<8>(rest, 4)?);
    if len > MAX_BODY {
        return Err(FormatError::Corrupt(format!("body length {len} too large")));
    }
    let start = 12usize;
    let end = start
        .checked_add(len as usize)
        .ok_or(FormatError::Truncated)?;
    if rest.len() < end + 8 {
        return Err(FormatError::Truncated);
    }
    let body = &rest[start..end];
    let trailer = u64::from_le_bytes(take::<8>(rest, end)?);
    if rest.len() != end + 8 {
        return Err(FormatError::Corrupt(
            "trailing bytes after the count".into(),
        ));
    }
    // Refuse absurd decompressed sizes before allocating.
    if body.len() < 4 {
        return Err(FormatError::Truncated);
    }
    let raw_len = u32::from_le_bytes([body[0], body[1], body[2], body[3]]) as u64;
    if raw_len > MAX_BODY || raw_len > (body.len() as u64).saturating_mul(255) + 16 {
        return Err(FormatError::Corrupt(format!(
            "decompressed length {raw_len} is implausible"
        )));
    }
    let raw = lz4_flex::block::decompress_size_prepended(body)
        .map_err(|e| FormatError::Corrupt(e.to_string()))?;
    use bincode::Options;
    let p: Profile = bincode::options()
        .with_fixint_encoding()
        .allow_trailing_bytes()
        .with_limit(raw.len() as u64 * 4 + 1024)
        .deserialize(&raw)
        .map_err(|e| FormatError::Corrupt(e.to_string()))?;
    let body_count = node_count(&p);
    if body_count != trailer {
        return Err(FormatError::CountMismatch {
            trailer,
            body: body_count,
        });
    }
    p.validate().map_err(FormatError::Corrupt)?;
    Ok(p)
}

/// Read and decode a profile from a reader.
pub fn read_from<R: Read>(mut r: R) -> Result<Profile, FormatError> {
    let mut buf = Vec::new();
    r.read_to_end(&mut buf)?;
    decode(&buf)
}

fn take<const N: usize>(b: &[u8], at: usize) -> Result<[u8; N], FormatError> {
    b.get(at..at + N)
        .and_then(|s| s.try_into().ok())
        .ok_or(FormatError::Truncated)
}

#[cfg(test)]
mod tests;
