//! The report's seal: a checksum trailer after the HDF5 data.
//!
//! Debian's libhdf5 can crash or loop on a damaged file (a flipped bit in a
//! variable-length string heap), so a damaged report must be recognised
//! before HDF5 opens it. The writer appends 24 bytes after the HDF5 end of
//! file: a magic, the length of the sealed part and its FNV-1a 64 hash.
//! HDF5 ignores bytes past its end-of-file address, so h5dump and h5py read
//! sealed reports as before. Files without the seal (foreign HDF5, older
//! reports, reports edited by other tools) are read by libhdf5 in a child
//! process (viz/src/h5child.rs), where a crash or a hang cannot take
//! `wmhcct` down.

use std::io::Write;
use std::path::Path;

use crate::h5layout::ReportError;

const MAGIC: &[u8; 8] = b"WMHCSEAL";
const TRAILER: usize = 24;

fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Append the seal to the finished report at `path`.
pub fn seal(path: &Path) -> std::io::Result<()> {
    let data = std::fs::read(path)?;
    let mut trailer = Vec::with_capacity(TRAILER);
    trailer.extend_from_slice(MAGIC);
    trailer.extend_from_slice(&(data.len() as u64).to_le_bytes());
    trailer.extend_from_slice(&fnv1a64(&data).to_le_bytes());
    let mut f = std::fs::OpenOptions::new().append(true).open(path)?;
    f.write_all(&trailer)?;
    f.sync_all()
}

/// What the end of a file says about its integrity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seal {
    /// The seal is there and the checksum holds: the file is as written.
    Intact,
    /// No seal: nothing is known about the file.
    Absent,
}

/// Check the seal of `bytes` (a whole file): an error when the file has a
/// seal that does not hold.
pub fn check_bytes(bytes: &[u8]) -> Result<Seal, ReportError> {
    let Some(split) = bytes.len().checked_sub(TRAILER) else {
        return Ok(Seal::Absent);
    };
    let (data, trailer) = bytes.split_at(split);
    if &trailer[..8] != MAGIC {
        return Ok(Seal::Absent);
    }
    let word = |i: usize| u64::from_le_bytes(trailer[i..i + 8].try_into().unwrap_or([0; 8]));
    if word(8) != data.len() as u64 || word(16) != fnv1a64(data) {
        return Err(ReportError::Corrupt(
            "checksum mismatch: the file was damaged after it was written".into(),
        ));
    }
    Ok(Seal::Intact)
}

/// Check the seal of the file at `path` (see [`check_bytes`]).
pub fn check(path: &Path) -> Result<Seal, ReportError> {
    let bytes =
        std::fs::read(path).map_err(|e| ReportError::Corrupt(format!("cannot read: {e}")))?;
    check_bytes(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_files_check_and_any_flipped_bit_is_caught() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r");
        std::fs::write(&p, b"\x89HDF\r\n\x1a\nsome report bytes").unwrap();
        assert_eq!(check(&p).unwrap(), Seal::Absent, "unsealed files pass");
        seal(&p).unwrap();
        assert_eq!(check(&p).unwrap(), Seal::Intact);
        let good = std::fs::read(&p).unwrap();
        for i in 0..good.len() - TRAILER {
            let mut bad = good.clone();
            bad[i] ^= 0x10;
            assert!(check_bytes(&bad).is_err(), "flip at {i} not caught");
        }
        // Bytes appended after the seal: no seal any more, opened as is.
        let mut longer = good.clone();
        longer.push(0);
        assert_eq!(check_bytes(&longer).unwrap(), Seal::Absent);
    }
}
