//! The report's seal: a checksum trailer after the HDF5 data.
//!
//! Debian's libhdf5 can crash or loop on a damaged file (a flipped bit in a
//! variable-length string heap), so a damaged report must be recognised
//! before HDF5 opens it. The writer appends 24 bytes after the HDF5 end of
//! file: a magic, the length of the sealed part and its hash. Seals written
//! before 2026-11-23 (magic `WMHCSEAL`) hash bytes with FNV-1a 64, about
//! 1.3 ms per MB; current ones (`WMHCSEA2`) hash 8-byte words in four
//! lanes ([`word_hash`]), about 30 times faster. Both are checked.
//! HDF5 ignores bytes past its end-of-file address, so h5dump and h5py read
//! sealed reports as before. Files without the seal (foreign HDF5, older
//! reports, reports edited by other tools) are read by libhdf5 in a child
//! process (viz/src/h5child.rs), where a crash or a hang cannot take
//! `wmhcct` down.

use std::io::Write;
use std::path::Path;

use crate::h5layout::ReportError;

/// Seal with an FNV-1a 64 hash (read only).
const MAGIC_FNV: &[u8; 8] = b"WMHCSEAL";
/// Seal with a [`word_hash`] (written).
const MAGIC: &[u8; 8] = b"WMHCSEA2";
const TRAILER: usize = 24;
const WORD_MUL: u64 = 0x9E37_79B9_7F4A_7C15;

fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// One lane step: a bijection of the lane for a fixed word and of the word
/// for a fixed lane, so any change confined to one word changes the lane,
/// and every later step keeps it changed.
#[inline(always)]
fn step(h: u64, w: u64) -> u64 {
    (h ^ w).wrapping_mul(WORD_MUL).rotate_left(29)
}

/// The seal's hash: little-endian 8-byte words (the last one zero-padded)
/// dealt round-robin to four lanes, then the lanes folded, each fold a
/// bijection of the lane folded in. A change within one word is always
/// caught; the length is checked apart.
fn word_hash(bytes: &[u8]) -> u64 {
    let mut lanes = [
        0x243F_6A88_85A3_08D3u64,
        0x1319_8A2E_0370_7344,
        0xA409_3822_299F_31D0,
        0x082E_FA98_EC4E_6C89,
    ];
    let mut chunks = bytes.chunks_exact(32);
    for c in &mut chunks {
        for (l, w) in lanes.iter_mut().zip(c.chunks_exact(8)) {
            *l = step(*l, u64::from_le_bytes(w.try_into().unwrap_or([0; 8])));
        }
    }
    for (l, w) in lanes.iter_mut().zip(chunks.remainder().chunks(8)) {
        let mut word = [0u8; 8];
        word[..w.len()].copy_from_slice(w);
        *l = step(*l, u64::from_le_bytes(word));
    }
    lanes
        .iter()
        .fold(0x452_821E_638D_0137, |acc, &l| step(acc, l))
}

/// Append the seal to the finished report at `path`.
pub fn seal(path: &Path) -> std::io::Result<()> {
    let data = std::fs::read(path)?;
    let mut trailer = Vec::with_capacity(TRAILER);
    trailer.extend_from_slice(MAGIC);
    trailer.extend_from_slice(&(data.len() as u64).to_le_bytes());
    trailer.extend_from_slice(&word_hash(&data).to_le_bytes());
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
    let hash: fn(&[u8]) -> u64 = match &trailer[..8] {
        m if m == MAGIC => word_hash,
        m if m == MAGIC_FNV => fnv1a64,
        _ => return Ok(Seal::Absent),
    };
    let word = |i: usize| u64::from_le_bytes(trailer[i..i + 8].try_into().unwrap_or([0; 8]));
    if word(8) != data.len() as u64 || word(16) != hash(data) {
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

    /// `data` followed by a seal of the given magic and hash.
    fn sealed(data: &[u8], magic: &[u8; 8], hash: fn(&[u8]) -> u64) -> Vec<u8> {
        let mut v = data.to_vec();
        v.extend_from_slice(magic);
        v.extend_from_slice(&(data.len() as u64).to_le_bytes());
        v.extend_from_slice(&hash(data).to_le_bytes());
        v
    }

    #[test]
    fn every_single_bit_flip_is_caught_across_lanes_and_the_tail() {
        // 4 full 32-byte rounds plus a 13-byte tail.
        let data: Vec<u8> = (0..141u32).map(|i| (i * 37 % 251) as u8).collect();
        for (magic, hash) in [
            (MAGIC, word_hash as fn(&[u8]) -> u64),
            (MAGIC_FNV, fnv1a64 as fn(&[u8]) -> u64),
        ] {
            let good = sealed(&data, magic, hash);
            assert_eq!(check_bytes(&good).unwrap(), Seal::Intact);
            for i in 0..good.len() - 8 {
                if (data.len()..data.len() + 8).contains(&i) {
                    continue; // the magic: a flip there makes the seal absent
                }
                for bit in 0..8 {
                    let mut bad = good.clone();
                    bad[i] ^= 1 << bit;
                    assert!(check_bytes(&bad).is_err(), "flip {i}:{bit} not caught");
                }
            }
        }
        // Swapped words and a zero tail byte added are caught too.
        let mut swapped = data.clone();
        swapped.swap(0, 8);
        assert_ne!(word_hash(&swapped), word_hash(&data));
        // A zero byte added at the end pads to the same words: the length
        // tells them apart.
        let mut grown = data.clone();
        grown.push(0);
        assert_eq!(word_hash(&grown), word_hash(&data));
        let mut v = grown;
        v.extend_from_slice(&sealed(&data, MAGIC, word_hash)[data.len()..]);
        assert!(check_bytes(&v).is_err(), "same words, other length");
    }

    #[test]
    fn reports_sealed_before_the_word_hash_still_check() {
        let data = b"\x89HDF\r\n\x1a\nan older report";
        assert_eq!(
            check_bytes(&sealed(data, MAGIC_FNV, fnv1a64)).unwrap(),
            Seal::Intact
        );
        let mut bad = sealed(data, MAGIC_FNV, fnv1a64);
        bad[3] ^= 1;
        assert!(check_bytes(&bad).is_err());
    }
}
