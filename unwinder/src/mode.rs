//! Which way a thread captures its stacks.

use std::fmt;
use std::str::FromStr;

/// How stacks are captured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// No stack at all (events are only counted).
    None,
    /// Full DWARF unwind at every event.
    Full,
    /// Frame-pointer walk at every event.
    Fp,
    /// Heuristic: stop at the first frame matching the previous capture.
    First,
    /// Heuristic: stop after two consecutive frames match the previous capture.
    Second,
}

impl Mode {
    /// The accepted spellings, for error messages.
    pub const NAMES: [&'static str; 5] = ["none", "full", "fp", "first", "second"];

    pub fn name(self) -> &'static str {
        match self {
            Mode::None => "none",
            Mode::Full => "full",
            Mode::Fp => "fp",
            Mode::First => "first",
            Mode::Second => "second",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A mode name that is not one of [`Mode::NAMES`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown unwind mode {0:?} (expected one of none, full, fp, first, second)")]
pub struct ParseModeError(pub String);

impl FromStr for Mode {
    type Err = ParseModeError;

    /// Parses `none`, `full`, `fp`, `first` or `second` (ASCII case and surrounding
    /// whitespace ignored).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        [Mode::None, Mode::Full, Mode::Fp, Mode::First, Mode::Second]
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(t))
            .ok_or_else(|| ParseModeError(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_name_and_round_trips() {
        for name in Mode::NAMES {
            let m: Mode = name.parse().unwrap();
            assert_eq!(m.to_string(), name);
        }
        assert_eq!(" Second ".parse::<Mode>(), Ok(Mode::Second));
        assert_eq!("FP".parse::<Mode>(), Ok(Mode::Fp));
    }

    #[test]
    fn rejects_unknown_names() {
        let e = "dwarf".parse::<Mode>().unwrap_err();
        assert_eq!(e, ParseModeError("dwarf".into()));
        assert!(e.to_string().contains("dwarf"));
        assert!("".parse::<Mode>().is_err());
    }
}
