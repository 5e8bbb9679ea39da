//! The answer of the child process that reads an unsealed HDF5 file
//! (`h5child`): one encoding, shared by the child (writer) and the `wmhcct`
//! process that started it (reader).
//!
//! ```text
//! magic   8 bytes  b"WMHCRPL1"
//! body    bincode (fixint) of `Reply`; a profile inside it is in the
//!         profile format of the `wmhcct-format` crate (as `.wmprof` files)
//! ```
//!
//! The profile goes through `wmhcct_format::encode`/`decode`, so the parent
//! checks it exactly as it checks a profile file (lengths, node count,
//! `Profile::validate`).

use serde::{Deserialize, Serialize};
use wmhcct_format::Profile;

use crate::h5layout::ReportError;
use crate::symbolize::Symbols;

const MAGIC: &[u8; 8] = b"WMHCRPL1";

#[derive(Serialize, Deserialize)]
enum Reply {
    /// The report: a profile in the `wmhcct-format` encoding, its symbols.
    Read {
        profile: Vec<u8>,
        symbols: Symbols,
    },
    NotOurs,
    Version {
        found: u32,
    },
    Corrupt(String),
    /// Any other error, with its sources, as one line.
    Failed(String),
}

fn bincode_options() -> impl bincode::Options {
    use bincode::Options;
    bincode::options()
        .with_fixint_encoding()
        .reject_trailing_bytes()
}

/// The error as one line: its message and those of its sources.
fn one_line(e: &dyn std::error::Error) -> String {
    let mut msg = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    msg.replace(['\n', '\r'], " ")
}

/// Encode the outcome of reading a report (in the child).
pub fn encode(read: std::result::Result<(Profile, Symbols), ReportError>) -> Vec<u8> {
    let reply = match read {
        Ok((profile, symbols)) => match wmhcct_format::encode(&profile) {
            Ok(profile) => Reply::Read { profile, symbols },
            Err(e) => Reply::Failed(format!("encoding the profile: {}", one_line(&e))),
        },
        Err(ReportError::NotOurs) => Reply::NotOurs,
        Err(ReportError::Version { found }) => Reply::Version { found },
        Err(ReportError::Corrupt(s)) => Reply::Corrupt(s),
        Err(e) => Reply::Failed(one_line(&e)),
    };
    let mut out = MAGIC.to_vec();
    use bincode::Options;
    if let Err(e) = bincode_options().serialize_into(&mut out, &reply) {
        // Not expected (plain data into a Vec); still an answer.
        out.truncate(MAGIC.len());
        let failed = Reply::Failed(format!("encoding the reply: {e}"));
        let _ = bincode_options().serialize_into(&mut out, &failed);
    }
    out
}

/// Decode the child's answer (in the parent).
pub fn decode(bytes: &[u8]) -> std::result::Result<(Profile, Symbols), ReportError> {
    let bad = |what: String| ReportError::Isolation(format!("unreadable answer: {what}"));
    let body = bytes
        .strip_prefix(MAGIC.as_slice())
        .ok_or_else(|| bad(format!("{} bytes without the magic", bytes.len())))?;
    use bincode::Options;
    let reply: Reply = bincode_options()
        .with_limit(body.len() as u64 * 4 + 1024)
        .deserialize(body)
        .map_err(|e| bad(e.to_string()))?;
    match reply {
        Reply::Read { profile, symbols } => {
            let profile = wmhcct_format::decode(&profile).map_err(|e| bad(one_line(&e)))?;
            Ok((profile, symbols))
        }
        Reply::NotOurs => Err(ReportError::NotOurs),
        Reply::Version { found } => Err(ReportError::Version { found }),
        Reply::Corrupt(s) => Err(ReportError::Corrupt(s)),
        Reply::Failed(s) => Err(ReportError::Reader(s)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbolize::Frame;

    #[test]
    fn every_answer_round_trips() {
        let mut p = Profile::default();
        p.meta.program = "/bin/x".into();
        let mut syms = Symbols::default();
        let f = Frame {
            function: "f".into(),
            file: "a.c".into(),
            line: 3,
        };
        syms.insert(1, 0x40, f.clone());
        let (q, s) = decode(&encode(Ok((p.clone(), syms)))).unwrap();
        assert_eq!(q, p);
        assert_eq!(s.get(1, 0x40), f);

        assert!(matches!(
            decode(&encode(Err(ReportError::NotOurs))),
            Err(ReportError::NotOurs)
        ));
        assert!(matches!(
            decode(&encode(Err(ReportError::Version { found: 7 }))),
            Err(ReportError::Version { found: 7 })
        ));
        let e = decode(&encode(Err(ReportError::Corrupt("x".into())))).unwrap_err();
        assert_eq!(e.to_string(), "truncated or corrupt report: x");
        let e = decode(&encode(Err(ReportError::Reader("a\nb".into())))).unwrap_err();
        assert_eq!(e.to_string(), "a b");
    }

    #[test]
    fn damaged_answers_are_errors() {
        let good = encode(Ok((Profile::default(), Symbols::default())));
        for n in 0..good.len() {
            assert!(decode(&good[..n]).is_err(), "cut at {n}");
        }
        let mut longer = good.clone();
        longer.push(0);
        assert!(decode(&longer).is_err());
    }
}
