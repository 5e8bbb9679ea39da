//! `wmhcct diff A B`: totals and peak side by side, and the contexts whose
//! bytes or count changed most. Contexts are matched by their symbolised
//! stack (function names and allocator), so two builds of the same code
//! compare. As in `report`, the contexts allocated inside MPI calls (the
//! MPI library's own allocations, [`crate::mpi_internal`]) are left out of
//! the list and summed in one line, unless `--mpi-internal`.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::rc::Rc;

use anyhow::{Context as _, Result};
use serde_json::{json, Value};
use wmhcct_format::Profile;

use crate::cli::{DiffArgs, Group};
use crate::focus::Focus;
use crate::h5layout::rank_count;
use crate::input::load;
use crate::label::short_label;
use crate::limits;
use crate::mpi_internal::Owners;
use crate::repeats::runs_by;
use crate::report_text::{
    human_bytes, largest_peak, largest_resident, peak_rank, resident_rank, up_to_main,
};
use crate::sites;
use crate::stacks::stacks;
use crate::symbolize::Symbols;

/// One matched context.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub kind: String,
    /// Its key in both reports (function names root first, then the
    /// allocator; or the site's name).
    key: Key,
    group: Group,
    pub label: String,
    pub count: (u64, u64),
    pub bytes: (u64, u64),
    /// The MPI routine whose call allocated it, or `thread of <module>`
    /// (the MPI library's own allocations, [`Owners`]); `None` for the
    /// program's.
    pub inside_mpi: Option<String>,
}

impl Change {
    /// Function names, innermost first (a site: its name).
    pub fn stack(&self) -> impl DoubleEndedIterator<Item = &Rc<str>> + Clone {
        let names = match self.group {
            Group::Context => &self.key[..self.key.len().saturating_sub(1)],
            _ => &self.key[..],
        };
        names.iter().rev()
    }

    pub fn bytes_delta(&self) -> i128 {
        self.bytes.1 as i128 - self.bytes.0 as i128
    }

    pub fn count_delta(&self) -> i128 {
        self.count.1 as i128 - self.count.0 as i128
    }
}

/// One context (or site) of one report; its stack is its key's.
struct Side {
    kind: String,
    label: String,
    count: u64,
    bytes: u64,
    /// Its stacks' owner inside MPI ([`Owners::of`]): `None` as soon as
    /// one of them is the program's.
    inside_mpi: Option<String>,
}

/// A context's function names root first, then its allocator (with
/// `group`, the site's name alone): both reports' contexts by this key,
/// each name held once for both (a report of 10^5 contexts 128 frames deep
/// has 10^7 names, mostly the same few thousand).
type Key = Vec<Rc<str>>;

/// Every name, held once.
#[derive(Default)]
struct Names(HashSet<Rc<str>>);

impl Names {
    fn get(&mut self, name: String) -> Rc<str> {
        match self.0.get(name.as_str()) {
            Some(n) => n.clone(),
            None => {
                let n: Rc<str> = name.into();
                self.0.insert(n.clone());
                n
            }
        }
    }
}

/// One report's contexts (or sites) by key: the program's, and apart,
/// unless `--mpi-internal` keeps them with the program's, those the MPI
/// library allocated for itself.
#[derive(Default)]
struct Keyed {
    program: HashMap<Key, Side>,
    mpi: HashMap<Key, Side>,
    /// Calls and bytes of the MPI library's own contexts (listed or not)
    /// by the MPI routine (or library thread) that allocated them.
    routines: HashMap<String, (u64, u64)>,
}

/// The contexts of `p` by symbolised stack, those through `focus` only;
/// with `group`, summed by allocating function, line or module
/// ([`sites::site_name`]), whose `stack` is that name alone and whose
/// `kind` lists the allocators called there. The MPI library's own
/// contexts are told apart as `report` tells them ([`Owners`], which
/// learns every stack first) and, unless `mpi_internal`, kept apart.
fn by_stack(
    p: &Profile,
    syms: &Symbols,
    focus: Option<&Focus>,
    group: Group,
    mpi_internal: bool,
    names: &mut Names,
) -> Keyed {
    let mut owners = Owners::new(&p.meta.program);
    for s in stacks(p, syms).filter(|s| !s.untraced) {
        owners.learn(&s.innermost_first());
    }
    let mut keyed = Keyed::default();
    for s in stacks(p, syms) {
        if focus.is_some_and(|f| !f.matches(&s.frames)) {
            continue;
        }
        let innermost = s.innermost_first();
        let owner = if s.untraced {
            None
        } else {
            owners.of(&innermost)
        };
        if let Some(r) = &owner {
            let e = keyed.routines.entry(r.clone()).or_default();
            e.0 = e.0.saturating_add(s.count);
            e.1 = e.1.saturating_add(s.bytes);
        }
        let (key, label): (Key, _) = match group {
            Group::Context => {
                // Not `collect`, which would keep the names' own buffer
                // (of `String`s, half again as large, and grown by pushes).
                let own = s.names();
                let mut key = Vec::with_capacity(own.len());
                key.extend(own.into_iter().map(|n| names.get(n)));
                (key, short_label(&innermost, &s.kind, 60))
            }
            _ => {
                let (name, label) = sites::site_name(&innermost, &s.kind, group);
                (vec![names.get(name)], label)
            }
        };
        let m = match owner {
            Some(_) if !mpi_internal => &mut keyed.mpi,
            _ => &mut keyed.program,
        };
        let e = m.entry(key).or_insert_with(|| Side {
            kind: s.kind.clone(),
            label,
            count: 0,
            bytes: 0,
            inside_mpi: owner.clone(),
        });
        if !e.kind.split(',').any(|k| k == s.kind) {
            e.kind = format!("{},{}", e.kind, s.kind);
        }
        if owner.is_none() {
            e.inside_mpi = None;
        }
        e.count = e.count.saturating_add(s.count);
        e.bytes = e.bytes.saturating_add(s.bytes);
    }
    keyed
}

/// What a focus compares: the focus, and the calls and bytes of the
/// contexts through it in A and in B.
pub struct FocusPair<'a> {
    pub focus: &'a Focus,
    pub count: (u64, u64),
    pub bytes: (u64, u64),
}

/// The MPI library's own contexts (or sites) that `changes` left out of
/// its list (without `--mpi-internal`).
pub struct MpiLeftOut {
    /// How many of them changed.
    pub changed: usize,
    /// The calls and bytes of all of them (through the focus, if any), in A
    /// and in B.
    pub count: (u64, u64),
    pub bytes: (u64, u64),
    /// (routine, calls B − A, bytes B − A) of those whose calls or bytes
    /// changed, largest byte change first (then calls).
    pub routines: Vec<(String, i128, i128)>,
}

/// What `changes` found.
pub struct Changes<'f> {
    /// Every changed context (or site) listed, largest byte change first.
    pub list: Vec<Change>,
    /// How many were in both reports.
    pub matched: usize,
    pub focus: Option<FocusPair<'f>>,
    /// `None` with `--mpi-internal`, which lists them.
    pub mpi_left_out: Option<MpiLeftOut>,
}

/// Every context (with `group`, every allocating function, line or module)
/// present in either report (through `focus`, if any) with a different
/// count or bytes, largest byte change first (then count change); how many
/// were matched; the focus's sums (over every context through it, the MPI
/// library's too, as `report`'s); and, unless `mpi_internal`, the MPI
/// library's own contexts apart.
pub fn changes<'f>(
    a: &Profile,
    sa: &Symbols,
    b: &Profile,
    sb: &Symbols,
    focus: Option<&'f Focus>,
    group: Group,
    mpi_internal: bool,
) -> Changes<'f> {
    let mut names = Names::default();
    let ka = by_stack(a, sa, focus, group, mpi_internal, &mut names);
    let kb = by_stack(b, sb, focus, group, mpi_internal, &mut names);
    let sum = |m: &HashMap<Key, Side>| {
        m.values().fold((0u64, 0u64), |(c, by), s| {
            (c.saturating_add(s.count), by.saturating_add(s.bytes))
        })
    };
    let both = |k: &Keyed| {
        let (x, y) = (sum(&k.program), sum(&k.mpi));
        (x.0.saturating_add(y.0), x.1.saturating_add(y.1))
    };
    let focus = focus.map(|f| {
        let (x, y) = (both(&ka), both(&kb));
        FocusPair {
            focus: f,
            count: (x.0, y.0),
            bytes: (x.1, y.1),
        }
    });
    let mpi_left_out = (!mpi_internal).then(|| {
        let (x, y) = (sum(&ka.mpi), sum(&kb.mpi));
        let mut routines: Vec<(String, i128, i128)> = ka
            .routines
            .keys()
            .chain(kb.routines.keys())
            .collect::<HashSet<_>>()
            .into_iter()
            .map(|r| {
                let (ca, ba) = ka.routines.get(r).copied().unwrap_or_default();
                let (cb, bb) = kb.routines.get(r).copied().unwrap_or_default();
                (r.clone(), cb as i128 - ca as i128, bb as i128 - ba as i128)
            })
            .filter(|(_, c, b)| *c != 0 || *b != 0)
            .collect();
        routines.sort_by(|x, y| {
            y.2.abs()
                .cmp(&x.2.abs())
                .then(y.1.abs().cmp(&x.1.abs()))
                .then_with(|| x.0.cmp(&y.0))
        });
        MpiLeftOut {
            changed: pair(ka.mpi, kb.mpi, group).0.len(),
            count: (x.0, y.0),
            bytes: (x.1, y.1),
            routines,
        }
    });
    let (list, matched) = pair(ka.program, kb.program, group);
    Changes {
        list,
        matched,
        focus,
        mpi_left_out,
    }
}

/// The contexts of A and B matched by key: those whose count or bytes
/// differ, largest byte change first (then count change), and how many
/// were in both.
fn pair(ma: HashMap<Key, Side>, mut mb: HashMap<Key, Side>, group: Group) -> (Vec<Change>, usize) {
    let mut all = Vec::new();
    let mut matched = 0;
    for (k, x) in ma {
        let y = mb.remove(&k);
        if y.is_some() {
            matched += 1;
        }
        let (cb, bb, yin) = y.map_or((0, 0, None), |y| (y.count, y.bytes, Some(y.inside_mpi)));
        all.push(Change {
            kind: x.kind,
            key: k,
            group,
            label: x.label,
            count: (x.count, cb),
            bytes: (x.bytes, bb),
            // The program's if either side's is.
            inside_mpi: match yin {
                Some(None) => None,
                _ => x.inside_mpi,
            },
        });
    }
    for (k, y) in mb {
        all.push(Change {
            kind: y.kind,
            key: k,
            group,
            label: y.label,
            count: (0, y.count),
            bytes: (0, y.bytes),
            inside_mpi: y.inside_mpi,
        });
    }
    all.retain(|c| c.count.0 != c.count.1 || c.bytes.0 != c.bytes.1);
    all.sort_by(|x, y| {
        y.bytes_delta()
            .abs()
            .cmp(&x.bytes_delta().abs())
            .then(y.count_delta().abs().cmp(&x.count_delta().abs()))
            .then_with(|| x.stack().cmp(y.stack()))
    });
    (all, matched)
}

/// (kind, (count a, count b), (bytes a, bytes b)).
type TotalPair = (String, (u64, u64), (u64, u64));

/// Totals of the kinds used by either report.
fn totals(a: &Profile, b: &Profile) -> Vec<TotalPair> {
    let mut kinds: Vec<String> = Vec::new();
    for t in a.totals.iter().chain(&b.totals) {
        if (t.count > 0 || t.bytes > 0) && !kinds.contains(&t.kind) {
            kinds.push(t.kind.clone());
        }
    }
    kinds
        .into_iter()
        .map(|k| {
            let ta = a.total(&k).map_or((0, 0), |t| (t.count, t.bytes));
            let tb = b.total(&k).map_or((0, 0), |t| (t.count, t.bytes));
            (k, (ta.0, tb.0), (ta.1, tb.1))
        })
        .collect()
}

fn signed(d: i128) -> String {
    if d > 0 {
        format!("+{d}")
    } else {
        d.to_string()
    }
}

fn signed_bytes(d: i128) -> String {
    let h = human_bytes(d.unsigned_abs().min(u64::MAX as u128) as u64);
    match d.signum() {
        1 => format!("+{h}"),
        -1 => format!("-{h}"),
        _ => "0".into(),
    }
}

/// Prints the comparison; the exit status: 0, or [`limits::EXCEEDED`].
pub fn run(args: &DiffArgs) -> Result<u8> {
    let (name_a, name_b) = (crate::spool::name(&args.a), crate::spool::name(&args.b));
    crate::spool::all_exist(&[&args.a, &args.b]).map_err(|(n, e)| anyhow::anyhow!("{n}: {e}"))?;
    let a = load(&args.a).with_context(|| name_a.clone())?;
    let b = load(&args.b).with_context(|| name_b.clone())?;
    let (pa, pb) = (&a.profile, &b.profile);
    let checked = limits::check_increase(
        &args.max_increase,
        &limits::Report {
            profile: pa,
            symbols: &a.symbols,
            contexts: None,
            name: &name_a,
        },
        &limits::Report {
            profile: pb,
            symbols: &b.symbols,
            contexts: None,
            name: &name_b,
        },
    )?;
    let focus = args.select.focus();
    let Changes {
        list,
        matched,
        focus,
        mpi_left_out,
    } = changes(
        pa,
        &a.symbols,
        pb,
        &b.symbols,
        focus.as_ref(),
        args.group,
        args.mpi_internal,
    );
    // What the list holds, in the JSON's keys.
    let (matched_key, changed_key, list_key) = match args.group {
        Group::Context => ("matched_contexts", "changed_contexts", "contexts"),
        _ => ("matched_sites", "changed_sites", "sites"),
    };
    let tot = totals(pa, pb);
    let text = if args.json {
        let side = |path: &std::path::Path, p: &Profile| {
            json!({
                "file": path.display().to_string(),
                "program": p.meta.program,
                "ranks": rank_count(p),
                "peak_bytes": p.heap.peak_bytes,
                "peak_rank_bytes": largest_peak(p),
                "live_bytes": p.heap.live_bytes,
                "temporary_count": p.heap.temporary_count,
                "temporary_bytes": p.heap.temporary_bytes,
                "resident_peak_bytes": largest_resident(p),
                "duration_s": p.meta.end_unix_ns.saturating_sub(p.meta.start_unix_ns) as f64 / 1e9,
            })
        };
        let mut v = json!({
            "a": side(&args.a, pa),
            "b": side(&args.b, pb),
            "peak_bytes_delta": pb.heap.peak_bytes as i128 - pa.heap.peak_bytes as i128,
            "totals": tot.iter().map(|(k, c, by)| json!({
                "kind": k, "count_a": c.0, "count_b": c.1,
                "bytes_a": by.0, "bytes_b": by.1,
            })).collect::<Vec<Value>>(),
            "focus": focus.as_ref().map(|f| json!({
                "texts": f.focus.texts(),
                "ignore": f.focus.ignored(),
                "count_a": f.count.0, "count_b": f.count.1,
                "bytes_a": f.bytes.0, "bytes_b": f.bytes.1,
            })),
            "group": args.group.name(),
        });
        v[matched_key] = json!(matched);
        v[changed_key] = json!(list.len());
        v["mpi_internal"] = json!(args.mpi_internal);
        // The MPI library's own contexts left out of the list (`null` with
        // --mpi-internal, which lists them).
        v["mpi_own_left_out"] = match &mpi_left_out {
            None => Value::Null,
            Some(m) => {
                let mut o = json!({
                    "count_a": m.count.0, "count_b": m.count.1,
                    "bytes_a": m.bytes.0, "bytes_b": m.bytes.1,
                    "by_routine": m.routines.iter().map(|(r, c, b)| json!({
                        "routine": r,
                        "count_delta": *c as i64,
                        "bytes_delta": *b as i64,
                    })).collect::<Vec<Value>>(),
                });
                o[changed_key] = json!(m.changed);
                o
            }
        };
        if !checked.is_empty() {
            v["limits"] = limits::to_json(&checked);
        }
        v[list_key] = json!(list
            .iter()
            .take(args.top)
            .map(|c| json!({
                "kind": c.kind,
                "label": c.label,
                "stack": c.stack().map(|n| &**n).collect::<Vec<&str>>(),
                "count_a": c.count.0, "count_b": c.count.1,
                "count_delta": c.count_delta() as i64,
                "bytes_a": c.bytes.0, "bytes_b": c.bytes.1,
                "bytes_delta": c.bytes_delta() as i64,
                "inside_mpi": c.inside_mpi,
            }))
            .collect::<Vec<Value>>());
        let mut s = serde_json::to_string_pretty(&v).context("encoding JSON")?;
        s.push('\n');
        s
    } else {
        let mut s = render_text(
            args,
            pa,
            pb,
            &tot,
            &list,
            matched,
            focus.as_ref(),
            mpi_left_out.as_ref(),
        );
        if !checked.is_empty() {
            s.push_str(&limits::render(&checked));
        }
        s
    };
    crate::output::emit(&text, None)?;
    Ok(limits::status(&checked))
}

#[allow(clippy::too_many_arguments)]
fn render_text(
    args: &DiffArgs,
    a: &Profile,
    b: &Profile,
    tot: &[TotalPair],
    list: &[Change],
    matched: usize,
    focus: Option<&FocusPair>,
    mpi_left_out: Option<&MpiLeftOut>,
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "A: {} ({})", crate::spool::name(&args.a), a.meta.program);
    let _ = writeln!(s, "B: {} ({})", crate::spool::name(&args.b), b.meta.program);
    let _ = writeln!(s, "ranks:      {:>14} {:>14}", rank_count(a), rank_count(b));
    let pair = |s: &mut String, what: &str, x: u64, y: u64, note: &str| {
        let _ = writeln!(
            s,
            "{what:<12}{:>14} {:>14}  {}{note}",
            human_bytes(x),
            human_bytes(y),
            signed_bytes(y as i128 - x as i128)
        );
    };
    let (pa, pb) = (a.heap.peak_bytes, b.heap.peak_bytes);
    if peak_rank(a).is_some() || peak_rank(b).is_some() {
        // A job's `/heap` peak sums its ranks' own peaks; what a rank
        // needs is the largest of them.
        pair(
            &mut s,
            "peak heap:",
            largest_peak(a),
            largest_peak(b),
            "  (the largest rank's)",
        );
        pair(&mut s, "", pa, pb, "  (the ranks' peaks summed)");
    } else {
        pair(&mut s, "peak heap:", pa, pb, "");
    }
    if let (Some(ra), Some(rb)) = (largest_resident(a), largest_resident(b)) {
        let note = if resident_rank(a).is_some() || resident_rank(b).is_some() {
            "  (VmHWM, the largest rank's)"
        } else {
            "  (VmHWM)"
        };
        pair(&mut s, "resident:", ra, rb, note);
    }
    let (la, lb) = (a.heap.live_bytes, b.heap.live_bytes);
    pair(&mut s, "live at end:", la, lb, "");
    let (ta, tb) = (a.heap.temporary_count, b.heap.temporary_count);
    let _ = writeln!(
        s,
        "{:<12}{ta:>14} {tb:>14}  {}  (allocations freed before their thread allocated again)",
        "temporary:",
        signed(tb as i128 - ta as i128)
    );
    let _ = writeln!(s, "\ntotals (calls A → B, bytes A → B):");
    for (k, c, by) in tot {
        let _ = writeln!(
            s,
            "  {k:<16} {:>10} → {:<10} {:>12} → {:<12} {}",
            c.0,
            c.1,
            human_bytes(by.0),
            human_bytes(by.1),
            if c.0 == c.1 && by.0 == by.1 {
                String::new()
            } else {
                format!(
                    "({} calls, {})",
                    signed(c.1 as i128 - c.0 as i128),
                    signed_bytes(by.1 as i128 - by.0 as i128)
                )
            }
        );
    }
    let mut through = String::new();
    if let Some(f) = focus {
        through = format!(" {}", f.focus.short());
        let _ = writeln!(
            s,
            "\nfocus: the contexts {} (function, source file or module, any \
             case)\n  calls {} → {} ({}), bytes {} → {} ({})",
            f.focus.long(),
            f.count.0,
            f.count.1,
            signed(f.count.1 as i128 - f.count.0 as i128),
            human_bytes(f.bytes.0),
            human_bytes(f.bytes.1),
            signed_bytes(f.bytes.1 as i128 - f.bytes.0 as i128)
        );
    }
    let (what, by) = match args.group {
        Group::Context => ("contexts", "stack"),
        group => (sites::noun(group), "name"),
    };
    if list.is_empty() {
        let _ = writeln!(
            s,
            "\nno {}{through} changed ({matched} {what} matched by {by})",
            what.trim_end_matches('s')
        );
        mpi_note(&mut s, mpi_left_out, args.group, what);
        return s;
    }
    let shown = list.len().min(args.top);
    let _ = writeln!(
        s,
        "\n{} {what}{through} changed ({matched} matched by {by}){}",
        list.len(),
        match shown {
            // `--top 0`: the totals alone, without a heading for no list.
            0 => ".".to_string(),
            n => format!("; the {n} largest changes:"),
        }
    );
    if shown > 0 && args.group != Group::Context && !(a.config.exact && b.config.exact) {
        let _ = writeln!(
            s,
            "  (sums over every context the reports hold, also those below the hotness \
             threshold; `report --group` sums those above it)"
        );
    }
    for c in list.iter().take(args.top) {
        let _ = writeln!(
            s,
            "  {:>10} {:>8} calls  {} [{}]",
            signed_bytes(c.bytes_delta()),
            signed(c.count_delta()),
            c.label,
            c.kind
        );
        // A context's stack up to `main`, as the report's text (the JSON
        // keeps all); a site is its label.
        let stack = match args.group {
            Group::Context => format!(
                "; {}",
                folded(up_to_main(&c.stack().cloned().collect::<Vec<_>>(), |n| {
                    &**n
                }))
                .into_iter()
                .take(6)
                .collect::<Vec<_>>()
                .join(" < ")
            ),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "      bytes {} → {}, calls {} → {}{stack}",
            human_bytes(c.bytes.0),
            human_bytes(c.bytes.1),
            c.count.0,
            c.count.1,
        );
    }
    mpi_note(&mut s, mpi_left_out, args.group, what);
    s
}

/// The line that sums the MPI library's own contexts the list left out
/// (those that changed; none, no line), as `report`'s `not listed:` line.
fn mpi_note(s: &mut String, left_out: Option<&MpiLeftOut>, group: Group, what: &str) {
    let Some(m) = left_out.filter(|m| m.changed > 0) else {
        return;
    };
    let mut routines: Vec<String> = m
        .routines
        .iter()
        .take(3)
        .map(|(r, c, b)| match b {
            0 => format!("{r} {} calls", signed(*c)),
            b => format!("{r} {}", signed_bytes(*b)),
        })
        .collect();
    if m.routines.len() > 3 {
        routines.push("…".into());
    }
    let which = match group {
        Group::Context => format!("{} changed contexts allocated inside MPI calls", m.changed),
        _ => format!(
            "{} changed {what} of the contexts allocated inside MPI calls",
            m.changed
        ),
    };
    let _ = writeln!(
        s,
        "\nnot shown: {which} ({}), bytes {} → {} ({}), calls {} → {} ({}): the MPI \
         library's own allocations (--mpi-internal lists them)",
        routines.join(", "),
        human_bytes(m.bytes.0),
        human_bytes(m.bytes.1),
        signed_bytes(m.bytes.1 as i128 - m.bytes.0 as i128),
        m.count.0,
        m.count.1,
        signed(m.count.1 as i128 - m.count.0 as i128),
    );
}

/// Function names, innermost first, with each run of one name (a
/// recursion) given once as "name ×N", so the few names shown reach past
/// it.
fn folded(names: &[Rc<str>]) -> Vec<String> {
    runs_by(names, |a, b| a == b)
        .into_iter()
        .map(|(n, k)| {
            if k > 1 {
                format!("{n} ×{k}")
            } else {
                n.to_string()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::folded;

    #[test]
    fn recursion_is_one_entry() {
        let names: Vec<std::rc::Rc<str>> = ["leaf", "solve", "solve", "solve", "main", "solve"]
            .iter()
            .map(|&s| s.into())
            .collect();
        assert_eq!(folded(&names), ["leaf", "solve ×3", "main", "solve"]);
        assert!(folded(&[]).is_empty());
    }
}
