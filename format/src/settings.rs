//! The tracer's settings from `WMHCCT_*` environment variables. Every
//! value is validated: a bad one yields a [`Rejected`] naming the variable
//! and the accepted values, and the default is used. Here, not in the
//! tracer, so that `wmhcct run` checks the settings its options give with
//! the same rules before it starts the command.

use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnwindMode {
    /// Count-only interposition, no stacks (benchmark floor).
    None,
    /// DWARF CFI unwinding of every frame.
    Full,
    /// Frame-pointer walking.
    Fp,
    /// Heuristic: stop at the first frame matching the previous stack.
    First,
    /// Heuristic: stop after two consecutive matching frames.
    Second,
}

impl UnwindMode {
    pub const ACCEPTED: &'static str = "none, full, fp, first, second";

    pub fn parse(s: &str) -> Option<UnwindMode> {
        Some(match s {
            "none" => UnwindMode::None,
            "full" => UnwindMode::Full,
            "fp" => UnwindMode::Fp,
            "first" => UnwindMode::First,
            "second" => UnwindMode::Second,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            UnwindMode::None => "none",
            UnwindMode::Full => "full",
            UnwindMode::Fp => "fp",
            UnwindMode::First => "first",
            UnwindMode::Second => "second",
        }
    }
}

/// Where events are recorded into the collector (`WMHCCT_COLLECTOR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CollectorPlacement {
    /// A collector thread where the process has a spare CPU, else inline
    /// (`placement.rs`); resolved once at tracer start.
    Auto,
    /// By the thread that made the event, under the core lock.
    Inline,
    /// By a collector thread, from records the event's thread hands it
    /// (`packets.rs`): faster where the process has a spare core.
    Thread,
}

impl CollectorPlacement {
    pub const ACCEPTED: &'static str = "auto, inline or thread (default auto)";

    pub fn parse(s: &str) -> Option<CollectorPlacement> {
        match s {
            "auto" => Some(CollectorPlacement::Auto),
            "inline" => Some(CollectorPlacement::Inline),
            "thread" => Some(CollectorPlacement::Thread),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Report path as given in WMHCCT_OUT (None: the default name).
    pub out: Option<PathBuf>,
    pub phi: f64,
    pub epsilon: f64,
    pub unwind: UnwindMode,
    pub max_depth: usize,
    pub exact: bool,
    /// Heuristic modes: check reused frames' return addresses on the stack
    /// (`WMHCCT_CHECK_REUSED`); off: the published heuristic.
    pub check_reused: bool,
    /// Full unwind every this many events per thread (0: never).
    pub reseed_every: u64,
    /// Full unwind when the thread was idle longer than this (0: never).
    pub reseed_gap_ns: u64,
    /// Fraction of heuristic stacks checked against a full unwind.
    pub validate: f64,
    /// The `wmhcct` binary used to convert the profile at exit.
    pub bin: Option<PathBuf>,
    /// Seconds the conversion may take before it is stopped and the
    /// profile kept (`WMHCCT_CONVERT_TIMEOUT`; None: no limit).
    pub convert_timeout_s: Option<u64>,
    /// Where MPI ranks that do not reach MPI_Finalize leave their profiles.
    pub spill_dir: Option<PathBuf>,
    /// Time-series bins per rank (0: no series).
    pub bins: u32,
    /// Ranks whose full series the job report keeps.
    pub rank_series: u32,
    /// Allocation events sampled per rank (reservoir).
    pub event_samples: u32,
    /// Who records events into the collector.
    pub collector: CollectorPlacement,
    /// Live heap at which the first snapshot is taken (`WMHCCT_SNAPSHOT`;
    /// `u64::MAX`: never).
    pub snapshot_from: u64,
}

pub const DEFAULT_PHI: f64 = 1e-4;
/// Smallest ε accepted: its ⌈1/ε⌉ counters per weight stay within the
/// Space-Saving summary's largest capacity, 2^24
/// (`wmhcct_collector::hcct::MAX_CAPACITY`), so the bound the report states
/// is the one the summary keeps.
pub const MIN_EPSILON: f64 = 6e-8;
/// Smallest φ accepted: its default ε, φ/5, is [`MIN_EPSILON`] or more.
pub const MIN_PHI: f64 = 3e-7;
pub const DEFAULT_MAX_DEPTH: usize = 128;
pub const DEFAULT_RESEED: u64 = 1000;
pub const DEFAULT_RESEED_GAP_US: u64 = 10_000;
pub const DEFAULT_VALIDATE: f64 = 0.001;
pub const DEFAULT_UNWIND: UnwindMode = UnwindMode::Second;
pub const DEFAULT_BINS: u32 = 1024;
pub const DEFAULT_RANK_SERIES: u32 = 1024;
pub const DEFAULT_EVENT_SAMPLES: u32 = 10_000;
pub const DEFAULT_SNAPSHOT_FROM: u64 = 1 << 30;
/// The conversion at exit: ample for any report seen (LAMMPS's 1.5 MiB
/// report converts in 0.2 s), and still an end for a job whose converter
/// hangs.
pub const DEFAULT_CONVERT_TIMEOUT_S: u64 = 300;

impl Default for Config {
    fn default() -> Self {
        Config {
            out: None,
            phi: DEFAULT_PHI,
            epsilon: DEFAULT_PHI / 5.0,
            unwind: DEFAULT_UNWIND,
            max_depth: DEFAULT_MAX_DEPTH,
            exact: false,
            check_reused: true,
            reseed_every: DEFAULT_RESEED,
            reseed_gap_ns: DEFAULT_RESEED_GAP_US * 1000,
            validate: DEFAULT_VALIDATE,
            bin: None,
            convert_timeout_s: Some(DEFAULT_CONVERT_TIMEOUT_S),
            spill_dir: None,
            bins: DEFAULT_BINS,
            rank_series: DEFAULT_RANK_SERIES,
            event_samples: DEFAULT_EVENT_SAMPLES,
            collector: CollectorPlacement::Auto,
            snapshot_from: DEFAULT_SNAPSHOT_FROM,
        }
    }
}

/// A setting refused: the variable, its value and what it accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejected {
    pub var: &'static str,
    pub value: String,
    pub accepted: &'static str,
}

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}={:?} is not valid: expected {}; using the default",
            self.var, self.value, self.accepted
        )
    }
}

fn bad(var: &'static str, value: &str, accepted: &'static str) -> Rejected {
    Rejected {
        var,
        value: value.to_string(),
        accepted,
    }
}

fn parse_f64_in(
    var: &'static str,
    value: &str,
    ok: impl Fn(f64) -> bool,
    accepted: &'static str,
    warnings: &mut Vec<Rejected>,
) -> Option<f64> {
    match value.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && ok(v) => Some(v),
        _ => {
            warnings.push(bad(var, value, accepted));
            None
        }
    }
}

fn parse_u64_in(
    var: &'static str,
    value: &str,
    range: std::ops::RangeInclusive<u64>,
    accepted: &'static str,
    warnings: &mut Vec<Rejected>,
) -> Option<u64> {
    match value.trim().parse::<u64>() {
        Ok(v) if range.contains(&v) => Some(v),
        _ => {
            warnings.push(bad(var, value, accepted));
            None
        }
    }
}

/// A heap size: whole bytes, or a number with a binary unit (`512MiB`,
/// `1.5GiB`; `K`, `M`, `G`, `T` alone mean the same units).
fn parse_size(value: &str) -> Option<u64> {
    let v = value.trim();
    let split = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(v.len());
    let (number, unit) = (&v[..split], v[split..].trim());
    let shift = match unit {
        "" | "B" => 0,
        "K" | "KiB" => 10,
        "M" | "MiB" => 20,
        "G" | "GiB" => 30,
        "T" | "TiB" => 40,
        _ => return None,
    };
    if unit.is_empty() || unit == "B" {
        return number.parse::<u64>().ok();
    }
    let x = number.parse::<f64>().ok()? * (1u64 << shift) as f64;
    (x.is_finite() && x >= 0.0 && x < u64::MAX as f64).then_some(x as u64)
}

impl Config {
    /// Parse the configuration from a variable lookup (the environment in the
    /// tracer, a map in tests). Returns the configuration and each rejected
    /// setting.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> (Config, Vec<Rejected>) {
        let mut c = Config::default();
        let mut w = Vec::new();
        if let Some(v) = get("WMHCCT_OUT") {
            if v.is_empty() {
                w.push(bad("WMHCCT_OUT", &v, "a file path"));
            } else {
                c.out = Some(PathBuf::from(v));
            }
        }
        if let Some(v) = get("WMHCCT_PHI") {
            if let Some(x) = parse_f64_in(
                "WMHCCT_PHI",
                &v,
                |x| (MIN_PHI..1.0).contains(&x),
                "a number with 3e-7 <= phi < 1 (default 1e-4)",
                &mut w,
            ) {
                c.phi = x;
            }
        }
        c.epsilon = c.phi / 5.0;
        if let Some(v) = get("WMHCCT_EPSILON") {
            let phi = c.phi;
            if let Some(x) = parse_f64_in(
                "WMHCCT_EPSILON",
                &v,
                |x| (MIN_EPSILON..=phi).contains(&x),
                "a number with 6e-8 <= epsilon <= phi (default phi/5)",
                &mut w,
            ) {
                c.epsilon = x;
            }
        }
        if let Some(v) = get("WMHCCT_UNWIND") {
            match UnwindMode::parse(v.trim()) {
                Some(m) => c.unwind = m,
                None => w.push(bad("WMHCCT_UNWIND", &v, UnwindMode::ACCEPTED)),
            }
        }
        if let Some(v) = get("WMHCCT_COLLECTOR") {
            match CollectorPlacement::parse(v.trim()) {
                Some(p) => c.collector = p,
                None => w.push(bad("WMHCCT_COLLECTOR", &v, CollectorPlacement::ACCEPTED)),
            }
        }
        if let Some(v) = get("WMHCCT_MAX_DEPTH") {
            if let Some(x) = parse_u64_in(
                "WMHCCT_MAX_DEPTH",
                &v,
                1..=1024,
                "an integer from 1 to 1024 (default 128)",
                &mut w,
            ) {
                c.max_depth = x as usize;
            }
        }
        for (var, range, accepted, field) in [
            (
                "WMHCCT_BINS",
                0..=1_048_576,
                "an integer from 0 (no time series) to 1048576 (default 1024)",
                &mut c.bins,
            ),
            (
                "WMHCCT_RANK_SERIES",
                0..=1_048_576,
                "an integer from 0 to 1048576 (default 1024)",
                &mut c.rank_series,
            ),
            (
                "WMHCCT_EVENT_SAMPLES",
                0..=10_000_000,
                "an integer from 0 to 10000000 (default 10000)",
                &mut c.event_samples,
            ),
        ] {
            if let Some(v) = get(var) {
                if let Some(x) = parse_u64_in(var, &v, range, accepted, &mut w) {
                    *field = x as u32;
                }
            }
        }
        if let Some(v) = get("WMHCCT_EXACT") {
            match v.trim() {
                "1" | "true" | "yes" => c.exact = true,
                "0" | "false" | "no" => c.exact = false,
                _ => w.push(bad("WMHCCT_EXACT", &v, "0 or 1 (default 0)")),
            }
        }
        if let Some(v) = get("WMHCCT_CHECK_REUSED") {
            match v.trim() {
                "1" | "true" | "yes" => c.check_reused = true,
                "0" | "false" | "no" => c.check_reused = false,
                _ => w.push(bad("WMHCCT_CHECK_REUSED", &v, "0 or 1 (default 1)")),
            }
        }
        if let Some(v) = get("WMHCCT_RESEED") {
            if let Some(x) = parse_u64_in(
                "WMHCCT_RESEED",
                &v,
                0..=u64::MAX,
                "a non-negative integer, 0 to disable (default 1000)",
                &mut w,
            ) {
                c.reseed_every = x;
            }
        }
        if let Some(v) = get("WMHCCT_RESEED_GAP_US") {
            if let Some(x) = parse_u64_in(
                "WMHCCT_RESEED_GAP_US",
                &v,
                0..=u64::MAX / 1000,
                "a non-negative integer of microseconds, 0 to disable (default 10000)",
                &mut w,
            ) {
                c.reseed_gap_ns = x * 1000;
            }
        }
        if let Some(v) = get("WMHCCT_VALIDATE") {
            if let Some(x) = parse_f64_in(
                "WMHCCT_VALIDATE",
                &v,
                |x| (0.0..=1.0).contains(&x),
                "a fraction from 0 to 1 (default 0.001)",
                &mut w,
            ) {
                c.validate = x;
            }
        }
        if let Some(v) = get("WMHCCT_BIN") {
            // Checked now: a wrong path would only show at exit, after the
            // whole run, as a failed conversion.
            if std::path::Path::new(&v).is_file() {
                c.bin = Some(PathBuf::from(v));
            } else {
                w.push(bad(
                    "WMHCCT_BIN",
                    &v,
                    "the path of an existing wmhcct binary (default: next to libwmhcct.so)",
                ));
            }
        }
        if let Some(v) = get("WMHCCT_CONVERT_TIMEOUT") {
            match v.trim() {
                "none" | "0" => c.convert_timeout_s = None,
                s => match s.parse::<u64>() {
                    Ok(x) if (1..=86_400 * 7).contains(&x) => c.convert_timeout_s = Some(x),
                    _ => w.push(bad(
                        "WMHCCT_CONVERT_TIMEOUT",
                        &v,
                        "whole seconds from 1 to 604800, or 0 (or none) for no limit (default 300)",
                    )),
                },
            }
        }
        if let Some(v) = get("WMHCCT_SNAPSHOT") {
            match (v.trim(), parse_size(&v)) {
                ("off", _) | (_, Some(0)) => c.snapshot_from = u64::MAX,
                (_, Some(x)) => c.snapshot_from = x,
                (_, None) => w.push(bad(
                    "WMHCCT_SNAPSHOT",
                    &v,
                    "the live heap of the first snapshot, as 512MiB, 1.5GiB or whole bytes, \
                     or 0 (or off) for none (default 1GiB)",
                )),
            }
        }
        if let Some(v) = get("WMHCCT_SPILL_DIR") {
            if v.is_empty() {
                w.push(bad("WMHCCT_SPILL_DIR", &v, "a directory path"));
            } else {
                c.spill_dir = Some(PathBuf::from(v));
            }
        }
        (c, w)
    }

    /// Space-Saving capacity per weight: ⌈1/ε⌉.
    pub fn capacity(&self) -> usize {
        (1.0 / self.epsilon).ceil() as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn snapshot_sizes() {
        let from = |v: &str| {
            let (c, w) = Config::from_lookup(|k| (k == "WMHCCT_SNAPSHOT").then(|| v.to_string()));
            (c.snapshot_from, w.len())
        };
        assert_eq!(Config::default().snapshot_from, 1 << 30);
        assert_eq!(from("512MiB"), (512 << 20, 0));
        assert_eq!(from("1.5GiB"), (3 << 29, 0));
        assert_eq!(from("2G"), (2 << 30, 0));
        assert_eq!(from(" 4096 "), (4096, 0));
        assert_eq!(from("64KiB"), (64 << 10, 0));
        assert_eq!(from("0"), (u64::MAX, 0));
        assert_eq!(from("off"), (u64::MAX, 0));
        for bad in [
            "lots",
            "",
            "-1",
            "5XB",
            "1.5",
            "1e3MiB",
            "99999999999999999999",
        ] {
            assert_eq!(from(bad), (1 << 30, 1), "{bad:?}");
        }
    }

    fn parse(pairs: &[(&str, &str)]) -> (Config, Vec<Rejected>) {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn defaults() {
        let (c, w) = parse(&[]);
        assert!(w.is_empty());
        assert_eq!(c.phi, 1e-4);
        assert!((c.epsilon - 2e-5).abs() < 1e-12);
        assert_eq!(c.capacity(), 50_000);
        assert_eq!(c.max_depth, 128);
        assert_eq!(c.unwind, UnwindMode::Second);
        assert_eq!(c.collector, CollectorPlacement::Auto);
    }

    #[test]
    fn good_values() {
        let (c, w) = parse(&[
            ("WMHCCT_PHI", "0.01"),
            ("WMHCCT_EPSILON", "0.001"),
            ("WMHCCT_UNWIND", "fp"),
            ("WMHCCT_MAX_DEPTH", "64"),
            ("WMHCCT_EXACT", "1"),
            ("WMHCCT_OUT", "/tmp/x.h5"),
            ("WMHCCT_BINS", "0"),
            ("WMHCCT_RANK_SERIES", "16"),
            ("WMHCCT_EVENT_SAMPLES", "500"),
            ("WMHCCT_COLLECTOR", "thread"),
            ("WMHCCT_CONVERT_TIMEOUT", "20"),
        ]);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(c.convert_timeout_s, Some(20));
        assert_eq!(parse(&[]).0.convert_timeout_s, Some(300));
        for v in ["0", "none", " none "] {
            let (c, w) = parse(&[("WMHCCT_CONVERT_TIMEOUT", v)]);
            assert!(w.is_empty(), "{w:?}");
            assert_eq!(c.convert_timeout_s, None, "{v:?}");
        }
        assert_eq!((c.bins, c.rank_series, c.event_samples), (0, 16, 500));
        assert_eq!((c.phi, c.epsilon, c.max_depth), (0.01, 0.001, 64));
        assert_eq!(c.unwind, UnwindMode::Fp);
        assert_eq!(c.collector, CollectorPlacement::Thread);
        assert!(c.exact);
        for (v, p) in [
            ("auto", CollectorPlacement::Auto),
            ("inline", CollectorPlacement::Inline),
            (" thread ", CollectorPlacement::Thread),
        ] {
            let (c, w) = parse(&[("WMHCCT_COLLECTOR", v)]);
            assert!(w.is_empty(), "{w:?}");
            assert_eq!(c.collector, p);
        }
        assert_eq!(c.out, Some(PathBuf::from("/tmp/x.h5")));
    }

    #[test]
    fn bad_values_name_the_variable_and_keep_defaults() {
        for (var, val) in [
            ("WMHCCT_PHI", "abc"),
            ("WMHCCT_PHI", "-1"),
            ("WMHCCT_PHI", "1.5"),
            ("WMHCCT_PHI", "NaN"),
            ("WMHCCT_PHI", ""),
            ("WMHCCT_EPSILON", "2"),
            // Below what the summary's 2^24 counters per weight can keep
            // (until 2026-11-27 accepted, and the report stated a bound
            // the summary did not keep).
            ("WMHCCT_PHI", "1e-9"),
            ("WMHCCT_EPSILON", "1e-8"),
            ("WMHCCT_UNWIND", "bogus"),
            ("WMHCCT_MAX_DEPTH", "-3"),
            ("WMHCCT_MAX_DEPTH", "0"),
            ("WMHCCT_MAX_DEPTH", "99999"),
            ("WMHCCT_EXACT", "maybe"),
            ("WMHCCT_RESEED", "x"),
            ("WMHCCT_RESEED_GAP_US", "-5"),
            ("WMHCCT_VALIDATE", "2"),
            ("WMHCCT_OUT", ""),
            ("WMHCCT_BINS", "-1"),
            ("WMHCCT_BINS", "lots"),
            ("WMHCCT_RANK_SERIES", "99999999"),
            ("WMHCCT_EVENT_SAMPLES", "1e4"),
            ("WMHCCT_EXACT", ""),
            ("WMHCCT_CHECK_REUSED", "2"),
            ("WMHCCT_BIN", ""),
            ("WMHCCT_BIN", "/nonexistent/wmhcct"),
            ("WMHCCT_SPILL_DIR", ""),
            ("WMHCCT_COLLECTOR", "background"),
            ("WMHCCT_CONVERT_TIMEOUT", "-1"),
            ("WMHCCT_CONVERT_TIMEOUT", "1.5"),
            ("WMHCCT_CONVERT_TIMEOUT", "forever"),
            ("WMHCCT_CONVERT_TIMEOUT", "9999999"),
        ] {
            let (c, w) = parse(&[(var, val)]);
            assert_eq!(w.len(), 1, "{var}={val}: {w:?}");
            let msg = w[0].to_string();
            assert!(
                w[0].var == var && msg.contains(var) && msg.contains("expected"),
                "{msg}"
            );
            let d = Config::default();
            assert_eq!(
                (c.phi, c.max_depth, c.unwind),
                (d.phi, d.max_depth, d.unwind)
            );
            assert_eq!(
                (c.bins, c.rank_series, c.event_samples),
                (1024, 1024, 10_000)
            );
            assert_eq!(c.convert_timeout_s, Some(300));
        }
    }

    #[test]
    fn epsilon_defaults_to_phi_over_five() {
        let (c, _) = parse(&[("WMHCCT_PHI", "0.001")]);
        assert!((c.epsilon - 0.0002).abs() < 1e-12);
    }
}
