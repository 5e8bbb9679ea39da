//! Limits on a report's figures, to gate a regression suite on memory:
//! `report --max FIGURE=LIMIT` holds one report to a budget, `diff
//! --max-increase FIGURE=LIMIT` holds B to A plus an allowed growth (an
//! amount, or a percentage of A). The command prints its usual output and
//! a table of the limits; when one is exceeded it names them on stderr and
//! exits with [`EXCEEDED`].

use std::fmt::Write as _;

use serde_json::{json, Value};
use wmhcct_format::Profile;

use crate::contexts::{alloc_tree, contexts, ContextList};
use crate::report_text::{human_bytes, largest_peak, largest_resident};
use crate::symbolize::Symbols;

/// The exit status of `report` and `diff` when a limit is exceeded (1 is
/// an error, 2 bad arguments).
pub const EXCEEDED: u8 = 3;

/// A figure of a report that a limit can hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Figure {
    /// The heap's peak; a job's largest rank's.
    Peak,
    /// The resident peak (VmHWM); a job's largest rank's.
    Resident,
    /// Bytes live when the profile was taken (leaks, at exit).
    Live,
    /// Those less the contexts allocated inside MPI calls: the program's
    /// leaks, as `report --by leaked` lists them.
    Leaked,
    /// Allocation calls.
    Count,
    /// Bytes allocated.
    Bytes,
    /// Temporary allocations.
    Temporary,
}

const FIGURES: [(Figure, &str); 7] = [
    (Figure::Peak, "peak"),
    (Figure::Resident, "resident"),
    (Figure::Live, "live"),
    (Figure::Leaked, "leaked"),
    (Figure::Count, "count"),
    (Figure::Bytes, "bytes"),
    (Figure::Temporary, "temporary"),
];

impl Figure {
    pub fn name(self) -> &'static str {
        FIGURES
            .iter()
            .find(|(f, _)| *f == self)
            .map_or("?", |(_, n)| n)
    }

    fn is_bytes(self) -> bool {
        !matches!(self, Figure::Count | Figure::Temporary)
    }

    /// The figure in `p`, whose contexts allocated inside MPI calls hold
    /// `mpi_own` bytes at the end; `None` when the report does not have it
    /// (the resident figures of a report written before they existed).
    pub fn value(self, p: &Profile, mpi_own: u64) -> Option<u64> {
        Some(match self {
            Figure::Peak => largest_peak(p),
            Figure::Resident => largest_resident(p)?,
            Figure::Live => p.heap.live_bytes,
            Figure::Leaked => p.heap.live_bytes.saturating_sub(mpi_own),
            Figure::Count => alloc_tree(p).map_or(0, |t| t.total_count),
            Figure::Bytes => alloc_tree(p).map_or(0, |t| t.total_bytes),
            Figure::Temporary => p.heap.temporary_count,
        })
    }

    /// A value of this figure: `1.5 MiB` or `1200`.
    fn show(self, v: u64) -> String {
        if self.is_bytes() {
            human_bytes(v)
        } else {
            v.to_string()
        }
    }

    /// A value of this figure, in bytes when `exact`: `8096 B`.
    fn show_exact(self, v: u64, exact: bool) -> String {
        if exact {
            format!("{v} B")
        } else {
            self.show(v)
        }
    }

    /// Whether `v` and `limit` read alike in readable units but differ:
    /// then both are shown in bytes (`7.9 KiB` against `7.9 KiB` told
    /// nobody why the limit failed).
    fn read_alike(self, v: u64, limit: u64) -> bool {
        v != limit && self.show(v) == self.show(limit)
    }
}

/// How far a figure may go.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Allowed {
    /// Bytes, or a count.
    Amount(u64),
    /// A percentage of A (`diff` only).
    Percent(f64),
}

/// One `FIGURE=LIMIT`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limit {
    pub figure: Figure,
    pub allowed: Allowed,
}

impl Limit {
    /// The limit as given, normalised: `5%`, `1.0 MiB`, `100`; an amount
    /// in bytes when `exact`.
    fn show_exact(&self, exact: bool) -> String {
        match self.allowed {
            Allowed::Amount(v) => self.figure.show_exact(v, exact),
            Allowed::Percent(p) => format!("{p}%"),
        }
    }
}

impl Checked {
    /// Whether the text shows this check's figures in bytes: the value
    /// (or the change) and an amount limit read alike otherwise.
    fn exact(&self) -> bool {
        let Allowed::Amount(l) = self.limit.allowed else {
            return false;
        };
        let v = match self.a {
            None => self.b,
            Some(a) => self.b.saturating_sub(a),
        };
        self.limit.figure.read_alike(v, l)
    }
}

/// clap's parser for `report --max`: an amount, no percentage.
pub fn parse_budget(s: &str) -> Result<Limit, String> {
    let l = parse_increase(s)?;
    if let Allowed::Percent(_) = l.allowed {
        return Err(format!(
            "a percentage needs a reference report (`wmhcct diff A B --max-increase`); \
             give an amount, e.g. {}",
            example(l.figure)
        ));
    }
    Ok(l)
}

fn example(f: Figure) -> String {
    if f.is_bytes() {
        format!("{}=512MiB", f.name())
    } else {
        format!("{}=1000", f.name())
    }
}

/// clap's parser for `diff --max-increase`: an amount or a percentage.
pub fn parse_increase(s: &str) -> Result<Limit, String> {
    let accepted = || {
        FIGURES
            .iter()
            .map(|(_, n)| *n)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let Some((name, value)) = s.split_once('=') else {
        return Err(format!(
            "not FIGURE=LIMIT (FIGURE: {}; e.g. peak=512MiB, count=1000, peak=5%)",
            accepted()
        ));
    };
    let name = name.trim();
    let Some(&(figure, _)) = FIGURES.iter().find(|(_, n)| n.eq_ignore_ascii_case(name)) else {
        return Err(format!(
            "unknown figure '{name}': accepted are {}",
            accepted()
        ));
    };
    let value = value.trim();
    let allowed = if let Some(p) = value.strip_suffix('%') {
        match p.trim().parse::<f64>() {
            Ok(p) if p.is_finite() && p >= 0.0 => Allowed::Percent(p),
            _ => {
                return Err(format!(
                    "'{value}' is no percentage (a number >= 0 before '%')"
                ))
            }
        }
    } else if figure.is_bytes() {
        Allowed::Amount(parse_bytes(value).ok_or_else(|| {
            format!(
                "'{value}' is no size: a number of bytes, with B, KiB, MiB, GiB or TiB \
                 (e.g. 512MiB, 1.5GiB)"
            )
        })?)
    } else {
        Allowed::Amount(
            value
                .parse::<u64>()
                .map_err(|_| format!("'{value}' is no count (a whole number >= 0)"))?,
        )
    };
    Ok(Limit { figure, allowed })
}

/// `512`, `512B`, `1.5 GiB`, `64kib`: bytes.
fn parse_bytes(s: &str) -> Option<u64> {
    const UNITS: [(&str, u64); 5] = [
        ("tib", 1 << 40),
        ("gib", 1 << 30),
        ("mib", 1 << 20),
        ("kib", 1 << 10),
        ("b", 1),
    ];
    let lower = s.to_ascii_lowercase();
    let (number, unit) = UNITS
        .iter()
        .find_map(|(u, m)| lower.strip_suffix(u).map(|n| (n.trim(), *m)))
        .unwrap_or((lower.as_str(), 1));
    if number.is_empty() || !number.bytes().all(|c| c.is_ascii_digit() || c == b'.') {
        return None;
    }
    if unit == 1 {
        return number.parse::<u64>().ok();
    }
    let v = number.parse::<f64>().ok()? * unit as f64;
    (v.is_finite() && v < u64::MAX as f64).then(|| v.round() as u64)
}

/// One limit held against a report (`a` is `None`) or against A.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    pub limit: Limit,
    pub a: Option<u64>,
    pub b: u64,
    /// The largest value that passes.
    pub bound: u64,
    pub passed: bool,
}

/// A figure a limit names that a report lacks.
fn missing(f: Figure, which: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{which} has no {} figure (a report written before wmhcct recorded resident \
         memory): the limit on it cannot be checked",
        f.name()
    )
}

/// A report as the limits read it: its profile, symbols and name, and its
/// contexts if the caller has them (for `leaked`, which leaves out the
/// contexts allocated inside MPI calls; built here when needed otherwise).
pub struct Report<'a> {
    pub profile: &'a Profile,
    pub symbols: &'a Symbols,
    pub contexts: Option<&'a ContextList>,
    pub name: &'a str,
}

impl Report<'_> {
    /// The bytes live at the end in the contexts allocated inside MPI calls
    /// (the MPI library's own), when one of `limits` needs them; else 0.
    fn mpi_own_live(&self, limits: &[Limit]) -> u64 {
        if !limits.iter().any(|l| l.figure == Figure::Leaked) {
            return 0;
        }
        match self.contexts {
            Some(list) => list.mpi_own().total,
            None => {
                contexts(self.profile, self.symbols, crate::cli::SortKey::Count)
                    .mpi_own()
                    .total
            }
        }
    }

    /// The value of each of `limits`' figures, in order.
    fn values(&self, limits: &[Limit]) -> anyhow::Result<Vec<u64>> {
        let own = self.mpi_own_live(limits);
        limits
            .iter()
            .map(|l| {
                l.figure
                    .value(self.profile, own)
                    .ok_or_else(|| missing(l.figure, self.name))
            })
            .collect()
    }
}

/// `report --max`: each limit against `r`.
pub fn check_budget(limits: &[Limit], r: &Report) -> anyhow::Result<Vec<Checked>> {
    let values = r.values(limits)?;
    Ok(limits
        .iter()
        .zip(values)
        .map(|(l, b)| {
            let bound = match l.allowed {
                Allowed::Amount(v) => v,
                // Refused by `parse_budget`; a percentage of nothing is 0.
                Allowed::Percent(_) => 0,
            };
            Checked {
                limit: *l,
                a: None,
                b,
                bound,
                passed: b <= bound,
            }
        })
        .collect())
}

/// `diff --max-increase`: each limit on B's growth over A.
pub fn check_increase(limits: &[Limit], a: &Report, b: &Report) -> anyhow::Result<Vec<Checked>> {
    let (xs, ys) = (a.values(limits)?, b.values(limits)?);
    Ok(limits
        .iter()
        .zip(xs.into_iter().zip(ys))
        .map(|(l, (x, y))| {
            let bound = match l.allowed {
                Allowed::Amount(v) => x.saturating_add(v),
                Allowed::Percent(p) => {
                    let extra = (x as f64 * p / 100.0).floor();
                    x.saturating_add(if extra >= u64::MAX as f64 {
                        u64::MAX
                    } else {
                        extra as u64
                    })
                }
            };
            Checked {
                limit: *l,
                a: Some(x),
                b: y,
                bound,
                passed: y <= bound,
            }
        })
        .collect())
}

fn signed_change(f: Figure, a: u64, b: u64, exact: bool) -> String {
    let d = b as i128 - a as i128;
    let amount = f.show_exact(d.unsigned_abs().min(u64::MAX as u128) as u64, exact);
    let sign = match d.signum() {
        1 => "+",
        -1 => "-",
        _ => "",
    };
    let share = if a > 0 {
        format!(
            " ({sign}{:.1}%)",
            100.0 * d.unsigned_abs() as f64 / a as f64
        )
    } else {
        String::new()
    };
    format!("{sign}{amount}{share}")
}

/// The text block: one line per limit, the exceeded ones marked.
pub fn render(checked: &[Checked]) -> String {
    let mut s = String::new();
    let exceeded = checked.iter().filter(|c| !c.passed).count();
    let _ = writeln!(
        s,
        "\nlimits: {}",
        match exceeded {
            0 => format!("all {} held", checked.len()),
            n => format!("{n} of {} exceeded", checked.len()),
        }
    );
    for c in checked {
        let f = c.limit.figure;
        let exact = c.exact();
        let (value, limit) = match c.a {
            None => (
                f.show_exact(c.b, exact),
                format!("at most {}", c.limit.show_exact(exact)),
            ),
            Some(a) => (
                format!(
                    "{} → {}  {}",
                    f.show(a),
                    f.show(c.b),
                    signed_change(f, a, c.b, exact)
                ),
                format!("at most +{}", c.limit.show_exact(exact)),
            ),
        };
        let _ = writeln!(
            s,
            "  {:<10} {value:<40} {limit:<22} {}",
            f.name(),
            if c.passed { "held" } else { "EXCEEDED" }
        );
    }
    s
}

/// The stderr line naming the exceeded limits, `None` when all held.
pub fn exceeded_line(checked: &[Checked]) -> Option<String> {
    let over: Vec<String> = checked
        .iter()
        .filter(|c| !c.passed)
        .map(|c| {
            let f = c.limit.figure;
            let exact = c.exact();
            match c.a {
                None => format!(
                    "{} {} (at most {})",
                    f.name(),
                    f.show_exact(c.b, exact),
                    c.limit.show_exact(exact)
                ),
                Some(a) => format!(
                    "{} {} (at most +{})",
                    f.name(),
                    signed_change(f, a, c.b, exact),
                    c.limit.show_exact(exact)
                ),
            }
        })
        .collect();
    (!over.is_empty()).then(|| {
        format!(
            "wmhcct: {} of {} limits exceeded: {}",
            over.len(),
            checked.len(),
            over.join(", ")
        )
    })
}

/// The JSON `limits` array.
pub fn to_json(checked: &[Checked]) -> Value {
    Value::Array(
        checked
            .iter()
            .map(|c| {
                let mut v = json!({
                    "figure": c.limit.figure.name(),
                    "limit": match c.limit.allowed {
                        Allowed::Amount(v) => json!(v),
                        Allowed::Percent(p) => json!(format!("{p}%")),
                    },
                    "value": c.b,
                    "bound": c.bound,
                    "passed": c.passed,
                });
                if let Some(a) = c.a {
                    v["value_a"] = json!(a);
                }
                v
            })
            .collect(),
    )
}

/// After the command's output: the stderr line and the exit status.
pub fn status(checked: &[Checked]) -> u8 {
    match exceeded_line(checked) {
        Some(line) => {
            say!("{line}");
            EXCEEDED
        }
        None => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_figures_amounts_and_percentages() {
        let l = parse_increase("peak=5%").unwrap();
        assert_eq!((l.figure, l.allowed), (Figure::Peak, Allowed::Percent(5.0)));
        let l = parse_budget("Resident = 1.5GiB").unwrap();
        assert_eq!(
            (l.figure, l.allowed),
            (Figure::Resident, Allowed::Amount(3 << 29))
        );
        for (s, v) in [
            ("live=0", 0),
            ("live=512", 512),
            ("live=512B", 512),
            ("live=64 kib", 64 << 10),
            ("bytes=2MiB", 2 << 20),
            ("bytes=1TiB", 1 << 40),
        ] {
            assert_eq!(parse_budget(s).unwrap().allowed, Allowed::Amount(v), "{s}");
        }
        assert_eq!(
            parse_budget("count=1000").unwrap(),
            Limit {
                figure: Figure::Count,
                allowed: Allowed::Amount(1000)
            }
        );
        assert_eq!(
            parse_increase("temporary=12.5%").unwrap().allowed,
            Allowed::Percent(12.5)
        );
    }

    #[test]
    fn bad_limits_name_what_is_accepted() {
        let e = parse_budget("heap=1MiB").unwrap_err();
        assert!(e.contains("unknown figure 'heap'"), "{e}");
        assert!(
            e.contains("peak, resident, live, leaked, count, bytes, temporary"),
            "{e}"
        );
        let e = parse_budget("peak").unwrap_err();
        assert!(e.contains("not FIGURE=LIMIT"), "{e}");
        let e = parse_budget("peak=5%").unwrap_err();
        assert!(e.contains("a percentage needs a reference report"), "{e}");
        assert!(e.contains("peak=512MiB"), "{e}");
        let e = parse_budget("peak=lots").unwrap_err();
        assert!(e.contains("is no size"), "{e}");
        let e = parse_budget("count=1MiB").unwrap_err();
        assert!(e.contains("is no count"), "{e}");
        assert!(parse_budget("count=-1").is_err());
        assert!(parse_budget("peak=1.5").is_err(), "fractional bytes");
        assert!(parse_budget("peak=MiB").is_err());
        assert!(parse_increase("peak=-5%").is_err());
        assert!(parse_increase("peak=x%").is_err());
    }

    fn report<'a>(p: &'a Profile, syms: &'a Symbols, name: &'a str) -> Report<'a> {
        Report {
            profile: p,
            symbols: syms,
            contexts: None,
            name,
        }
    }

    fn profile(peak: u64, live: u64) -> Profile {
        let mut p = Profile::default();
        p.heap.peak_bytes = peak;
        p.heap.live_bytes = live;
        p
    }

    #[test]
    fn a_budget_holds_up_to_its_amount() {
        let p = profile(1000, 10);
        let syms = Symbols::default();
        let r = report(&p, &syms, "r.h5");
        let at = |s: &str| check_budget(&[parse_budget(s).unwrap()], &r).unwrap()[0].clone();
        assert!(at("peak=1000").passed);
        assert!(!at("peak=999").passed);
        assert!(!at("live=0").passed);
        assert!(at("temporary=0").passed);
        assert_eq!(at("peak=999").bound, 999);
        // No resident figure: an error, not a pass.
        // No context inside MPI: the leaks are what is live.
        assert_eq!(at("leaked=10").b, 10);
        assert!(!at("leaked=9").passed);
        let e = check_budget(&[parse_budget("resident=1GiB").unwrap()], &r).unwrap_err();
        assert!(e.to_string().contains("r.h5 has no resident figure"), "{e}");
    }

    /// A value just over its limit in the same readable unit is shown in
    /// bytes, both of them.
    #[test]
    fn figures_that_read_alike_are_shown_in_bytes() {
        let (a, b) = (profile(1000, 0), profile(9096, 0));
        let syms = Symbols::default();
        let (ra, rb) = (report(&a, &syms, "a"), report(&b, &syms, "b"));
        let budget = check_budget(&[parse_budget("peak=9095").unwrap()], &rb).unwrap();
        assert!(render(&budget).contains("9096 B"), "{}", render(&budget));
        assert!(
            render(&budget).contains("at most 9095 B"),
            "{}",
            render(&budget)
        );
        assert_eq!(
            exceeded_line(&budget).unwrap(),
            "wmhcct: 1 of 1 limits exceeded: peak 9096 B (at most 9095 B)"
        );
        let far = check_budget(&[parse_budget("peak=4KiB").unwrap()], &rb).unwrap();
        assert_eq!(
            exceeded_line(&far).unwrap(),
            "wmhcct: 1 of 1 limits exceeded: peak 8.9 KiB (at most 4.0 KiB)"
        );
        let rise = check_increase(&[parse_increase("peak=8095").unwrap()], &ra, &rb).unwrap();
        assert_eq!(
            exceeded_line(&rise).unwrap(),
            "wmhcct: 1 of 1 limits exceeded: peak +8096 B (+809.6%) (at most +8095 B)"
        );
    }

    #[test]
    fn an_increase_holds_up_to_a_share_or_an_amount() {
        let (a, b) = (profile(1000, 0), profile(1100, 10));
        let syms = Symbols::default();
        let (ra, rb) = (report(&a, &syms, "a"), report(&b, &syms, "b"));
        let at =
            |s: &str| check_increase(&[parse_increase(s).unwrap()], &ra, &rb).unwrap()[0].clone();
        assert!(at("peak=10%").passed);
        assert!(!at("peak=9.9%").passed);
        assert!(at("peak=100").passed);
        assert!(!at("peak=99").passed);
        // From nothing, any growth exceeds any percentage.
        assert!(!at("live=1000%").passed);
        assert!(at("live=10").passed);
        // A fall always holds.
        let c = check_increase(&[parse_increase("peak=0").unwrap()], &rb, &ra).unwrap();
        assert!(c[0].passed);
        assert_eq!((c[0].a, c[0].b, c[0].bound), (Some(1100), 1000, 1100));
    }

    #[test]
    fn exceeded_limits_are_named() {
        let (a, b) = (profile(1 << 20, 0), profile(5 << 19, 1000));
        let limits = [
            parse_increase("peak=5%").unwrap(),
            parse_increase("live=0").unwrap(),
            parse_increase("count=0").unwrap(),
        ];
        let syms = Symbols::default();
        let c = check_increase(&limits, &report(&a, &syms, "a"), &report(&b, &syms, "b")).unwrap();
        assert_eq!(
            c.iter().map(|c| c.passed).collect::<Vec<_>>(),
            [false, false, true]
        );
        assert_eq!(
            exceeded_line(&c).unwrap(),
            "wmhcct: 2 of 3 limits exceeded: peak +1.5 MiB (+150.0%) (at most +5%), \
             live +1000 B (at most +0 B)"
        );
        let text = render(&c);
        assert!(text.starts_with("\nlimits: 2 of 3 exceeded\n"), "{text}");
        assert!(
            text.contains("1.0 MiB → 2.5 MiB  +1.5 MiB (+150.0%)"),
            "{text}"
        );
        assert!(text.contains("EXCEEDED") && text.contains("held"), "{text}");
        let j = to_json(&c);
        assert_eq!(j[0]["figure"], "peak");
        assert_eq!(j[0]["limit"], "5%");
        assert_eq!(j[0]["value_a"], 1 << 20);
        assert_eq!(j[0]["bound"], (1 << 20) + (1 << 20) / 20);
        assert_eq!(j[1]["limit"], 0);
        assert_eq!(j[2]["passed"], true);
        assert_eq!(exceeded_line(&c[2..]), None);
        assert!(render(&c[2..]).starts_with("\nlimits: all 1 held\n"));
    }
}
