//! Fuzzing the profile reader (issue 8): `decode` — the one reader of the
//! tracer's own binary format, used for profiles, spill files and merge
//! inputs — never panics, never allocates absurdly, and rejects every
//! corruption with an error (or, when a mutation happens to keep the file
//! valid, returns a profile that passes its own validation).
//!
//! Four generators: arbitrary bytes; arbitrary bytes behind a valid header
//! (magic and version, so the length, lz4 and bincode paths are reached);
//! a valid profile with bytes overwritten, inserted or removed anywhere;
//! and a valid profile whose *uncompressed* bincode body is mutated and
//! then re-compressed and re-framed with a correct header (so the
//! structure checks behind the decompressor are reached too). Case counts
//! are modest (a few seconds in CI); set PROPTEST_CASES to run longer.

use proptest::prelude::*;
use wmhcct_format::*;

#[path = "common/sample.rs"]
mod sample;

/// The fuzzers start from the fullest valid profile.
fn sample() -> Profile {
    sample::with_series()
}

/// The reader's verdict must be an error, or a profile that is valid.
fn check(bytes: &[u8]) {
    if let Ok(p) = decode(bytes) {
        assert!(p.validate().is_ok(), "decode returned an invalid profile");
        // And what it returned can be written again.
        let again = encode(&p).expect("re-encode");
        assert_eq!(decode(&again).expect("re-decode"), p);
    }
}

fn header(body_len: u64) -> Vec<u8> {
    let mut v = MAGIC.to_vec();
    v.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    v.extend_from_slice(&body_len.to_le_bytes());
    v
}

/// Frame an uncompressed bincode body as a profile file.
fn frame(raw: &[u8], count: u64) -> Vec<u8> {
    let body = lz4_flex_compress(raw);
    let mut v = header(body.len() as u64);
    v.extend_from_slice(&body);
    v.extend_from_slice(&count.to_le_bytes());
    v
}

/// An lz4 block with the uncompressed size prepended, as `encode` writes
/// it, made of literals only (token, literal length, literals): valid lz4
/// for any input, so the decompressor hands `raw` to bincode unchanged.
fn lz4_flex_compress(raw: &[u8]) -> Vec<u8> {
    let mut out = (raw.len() as u32).to_le_bytes().to_vec();
    let n = raw.len();
    if n < 15 {
        out.push((n as u8) << 4);
    } else {
        out.push(0xF0);
        let mut rest = n - 15;
        while rest >= 255 {
            out.push(255);
            rest -= 255;
        }
        out.push(rest as u8);
    }
    out.extend_from_slice(raw);
    out
}

#[test]
fn framing_helper_matches_the_format() {
    let p = sample();
    let raw = bincode_raw(&p);
    let count: u64 = p.trees.iter().map(|t| t.nodes.len() as u64).sum();
    assert_eq!(decode(&frame(&raw, count)).expect("hand-framed profile"), p);
}

/// The uncompressed body of `p` (the bytes `encode` compresses).
fn bincode_raw(p: &Profile) -> Vec<u8> {
    let enc = encode(p).unwrap();
    let len = u64::from_le_bytes(enc[12..20].try_into().unwrap()) as usize;
    lz4_flex::block::decompress_size_prepended(&enc[20..20 + len]).unwrap()
}

#[test]
fn every_truncation_is_rejected() {
    let bytes = encode(&sample()).unwrap();
    for n in 0..bytes.len() {
        assert!(decode(&bytes[..n]).is_err(), "a {n}-byte prefix decoded");
    }
    // A spill file from another version: refused with a typed error.
    for v in [0u32, 1, FORMAT_VERSION + 1, u32::MAX] {
        let mut b = bytes.clone();
        b[8..12].copy_from_slice(&v.to_le_bytes());
        match decode(&b) {
            Err(FormatError::Version { found, expected }) => {
                assert_eq!((found, expected), (v, FORMAT_VERSION))
            }
            other => panic!("version {v}: {other:?}"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10_000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        check(&bytes);
    }

    #[test]
    fn arbitrary_body_behind_a_valid_header(
        body in proptest::collection::vec(any::<u8>(), 0..2048),
        claimed in prop_oneof![Just(None), any::<u64>().prop_map(Some)],
        trailer in any::<u64>(),
    ) {
        let mut v = header(claimed.unwrap_or(body.len() as u64));
        v.extend_from_slice(&body);
        v.extend_from_slice(&trailer.to_le_bytes());
        check(&v);
    }

    #[test]
    fn mutated_profile(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..8),
    ) {
        let mut bytes = encode(&sample()).unwrap();
        for (at, val, op) in edits {
            if bytes.is_empty() { break; }
            let i = at.index(bytes.len());
            match op {
                0 => bytes[i] = val,
                1 => bytes.insert(i, val),
                _ => { bytes.remove(i); }
            }
        }
        check(&bytes);
    }

    #[test]
    fn mutated_body_reframed(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let p = sample();
        let count: u64 = p.trees.iter().map(|t| t.nodes.len() as u64).sum();
        let mut raw = bincode_raw(&p);
        for (at, val) in edits {
            let i = at.index(raw.len());
            raw[i] = val;
        }
        if truncate {
            raw.truncate(cut.index(raw.len()));
        }
        check(&frame(&raw, count));
    }
}
