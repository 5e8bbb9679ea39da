//! `wmhcct report`: a readable text summary and the top contexts.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use wmhcct_format::{Profile, RankSummary};

use crate::cli::Group;
use crate::contexts::{alloc_tree, Context, ContextList, SortKey, StackFrame};
use crate::focus::Focus;
use crate::h5layout::rank_count;
use crate::mpi_internal::MpiOwn;
use crate::repeats::runs_by;
use crate::short_name::{shortened, TEXT_NAME_MAX};
use crate::sites;
use crate::sums::ContextSums;

/// Source lines that stand for several call sites among the report's
/// contexts: the compiler made several calls of one line (a branch's
/// paths specialised, a loop peeled), so contexts that differ only there
/// would print alike. Their frames get the call site's address.
#[derive(Default)]
struct AlikeLines(HashSet<(String, String, String, u32)>);

impl AlikeLines {
    fn of<'a>(contexts: impl IntoIterator<Item = &'a Context>) -> AlikeLines {
        let mut sites: HashMap<(String, String, String, u32), u64> = HashMap::new();
        let mut alike = HashSet::new();
        for f in contexts.into_iter().flat_map(|c| &c.stack) {
            if f.file.is_empty() {
                continue; // printed by address already
            }
            let key = Self::key(f);
            match sites.get(&key) {
                Some(&a) if a != f.address => {
                    alike.insert(key);
                }
                Some(_) => {}
                None => {
                    sites.insert(key, f.address);
                }
            }
        }
        AlikeLines(alike)
    }

    fn key(f: &StackFrame) -> (String, String, String, u32) {
        (f.module.clone(), f.function.clone(), f.file.clone(), f.line)
    }

    fn contains(&self, f: &StackFrame) -> bool {
        !f.file.is_empty() && self.0.contains(&Self::key(f))
    }
}

/// `12345678` → `11.8 MiB`.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    // 1023.95 KiB would read 1024.0 KiB: it is 1.0 MiB.
    while v >= 1023.95 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// `11.8 MiB (12345678 B)`, or just `640 B`.
fn exact_bytes(b: u64) -> String {
    if b < 1024 {
        format!("{b} B")
    } else {
        format!("{} ({b} B)", human_bytes(b))
    }
}

fn ratio(n: u64, d: u64) -> String {
    if d == 0 {
        "-".into()
    } else {
        format!("{:.2}", n as f64 / d as f64)
    }
}

/// The text report, contexts listed by `by` (the list is sorted by it);
/// the contexts allocated inside MPI calls (the MPI library's own
/// allocations, [`crate::mpi_internal`]) are summed in one line instead of
/// listed, unless `mpi_internal`. With a focus, only the contexts through
/// it are listed, and a line sums them; the rest describes the whole
/// program.
pub fn render(
    p: &Profile,
    list: &ContextList,
    top: usize,
    by: SortKey,
    group: Group,
    mpi_internal: bool,
    focus: Option<&Focus>,
) -> String {
    let mut s = String::new();
    let m = &p.meta;
    let _ = writeln!(s, "program:   {}", m.program);
    if !m.args.is_empty() {
        let _ = writeln!(s, "args:      {}", m.args.join(" "));
    }
    // `threads` counts the threads that made an event.
    let threads = match m.threads {
        0 => "no thread made an event".to_string(),
        1 => "1 thread".to_string(),
        n => format!("{n} threads"),
    };
    let _ = writeln!(s, "{}", host_line(p, &threads));
    match m.nranks {
        Some(n) if n > rank_count(p) && !p.ranks.is_empty() => {
            let _ = writeln!(
                s,
                "ranks:     {} of {n} (the other ranks' profiles are not in this report)",
                rank_count(p)
            );
        }
        _ => {
            let _ = writeln!(s, "ranks:     {}", rank_count(p));
        }
    }
    let secs = m.end_unix_ns.saturating_sub(m.start_unix_ns) as f64 / 1e9;
    let mixed = mixed_ends(p);
    if let Some(ends) = &mixed {
        let _ = writeln!(s, "duration:  {secs:.3} s (ended by {ends})");
    } else if m.reason == "snapshot" {
        let _ = writeln!(
            s,
            "duration:  {secs:.3} s (a snapshot, taken when the heap reached a new high; the \
             process ended before it wrote its report: killed by SIGKILL or the OOM killer?)"
        );
    } else {
        let _ = writeln!(s, "duration:  {secs:.3} s (ended by {})", m.reason);
    }
    if let Some(line) = snapshot_ranks_line(p) {
        let _ = writeln!(s, "           {line}");
    }
    let h = &p.heap;
    // A job's report is taken in MPI_Finalize, before the MPI library's
    // clean-up (and the program's, after it).
    // (The ranks of a job that ended differently: at each one's end.)
    let end = match m.reason.as_str() {
        _ if mixed.is_some() => "end",
        "finalize" => "MPI_Finalize",
        "snapshot" => "the snapshot",
        _ => "end",
    };
    let _ = writeln!(s, "heap:      {}", peak_line(p));
    let _ = writeln!(
        s,
        "           live at {end} {} in {} blocks, {} unknown frees",
        human_bytes(h.live_bytes),
        h.live_blocks,
        h.unknown_frees
    );
    let mpi_own = list.mpi_own();
    if mpi_own.total > 0 {
        // The contexts holding it, hot or not, whatever the view: the
        // `not listed:` line counts only those the list would show (the
        // hot ones, and in a heap view the cold ones it adds), so fewer.
        let cold = MpiOwn::of(list.contexts.iter().chain(&list.cold).filter(|c| !c.hot)).contexts;
        let _ = writeln!(
            s,
            "           of it {} in {} contexts allocated inside MPI calls{} ({}): the MPI \
             library's own",
            human_bytes(mpi_own.total),
            mpi_own.contexts,
            match cold {
                0 => String::new(),
                n => format!(", {n} of them below the hotness threshold"),
            },
            routines(&mpi_own, SortKey::Leaked)
        );
    }
    let _ = writeln!(s, "           {}", temporary_line(p));
    resident_lines(&mut s, p, end);
    let c = &p.config;
    let _ = writeln!(
        s,
        "config:    phi {} epsilon {} unwind {} max_depth {}{}",
        c.phi,
        c.epsilon,
        c.unwind,
        c.max_depth,
        if c.exact { " exact" } else { "" }
    );

    let _ = writeln!(s, "\n{:<16} {:>14} {:>16}", "function", "calls", "bytes");
    // The allocator functions' rows, then the MPI calls': `MPI_Alloc_mem`
    // and `MPI_Free_mem` are in both, as allocations first (the bytes
    // allocated and released), and are listed once.
    for (i, t) in p.totals.iter().enumerate() {
        if t.count > 0 && !p.totals[..i].iter().any(|e| e.kind == t.kind) {
            let _ = writeln!(s, "{:<16} {:>14} {:>16}", t.kind, t.count, t.bytes);
        }
    }

    crate::sizes::write_text(&mut s, h);
    crate::timeline::write_text(&mut s, p);

    let u = &p.unwind;
    let _ = writeln!(
        s,
        "\nunwind:    mode {}, {} events, frames/event unwound {} reused {}",
        u.mode,
        u.events,
        ratio(u.frames_unwound, u.events),
        ratio(u.frames_reused, u.events)
    );
    let accuracy = if u.validated == 0 {
        "-".to_string()
    } else {
        format!("{:.2}%", 100.0 * u.correct as f64 / u.validated as f64)
    };
    let _ = writeln!(
        s,
        "           validated {} correct {} (accuracy {accuracy}), reseeds {}, truncated {}, errors {}",
        u.validated, u.correct, u.reseeds, u.truncated, u.errors
    );

    let focused;
    let list = match focus {
        Some(f) => {
            focused = f.of(list);
            focus_lines(&mut s, p, &focused, f, end);
            &focused
        }
        None => list,
    };
    let through = focus.map_or(String::new(), |f| format!(" {}", f.short()));
    let all = list.contexts.len();
    // The program's contexts: the MPI library's own allocations are no
    // leak of the program's, nor what it can change.
    let skip_mpi_own = !mpi_internal;
    let listed: Vec<&Context> = list
        .contexts
        .iter()
        .filter(|c| by.value(c) > 0 || !by.lists_only_some())
        .filter(|c| !(skip_mpi_own && c.inside_mpi.is_some()))
        .collect();
    let sites = (group != Group::Context).then(|| sites::of(listed.iter().copied(), group, by));
    // Outside exact mode the list holds the hot contexts only, those above
    // the hotness threshold (the header's `config` line gives φ).
    // A view by a figure of the heap lists the cold contexts that hold at
    // least φ of it too ([`contexts`](crate::contexts::contexts)).
    let cold = match &sites {
        Some(_) => 0,
        None => listed.iter().filter(|c| !c.hot).count(),
    };
    let (what, n) = match &sites {
        Some(v) => (sites::noun(group).to_string(), v.len()),
        None if p.config.exact => ("contexts".to_string(), listed.len()),
        None if cold > 0 => (format!("contexts ({cold} cold)"), listed.len()),
        None => ("hot contexts".to_string(), listed.len()),
    };
    let shown = n.min(top);
    let of_all = match &sites {
        Some(_) => format!("{all} contexts"),
        None => all.to_string(),
    };
    let _ = match by {
        SortKey::Count => writeln!(s, "\ntop {shown} of {n} {what}{through} by count:"),
        SortKey::Bytes => writeln!(
            s,
            "\ntop {shown} of {n} {what}{through} by bytes allocated:"
        ),
        SortKey::Leaked => writeln!(
            s,
            "\ntop {shown} of {n} {what}{through} that leaked (of {of_all}), by bytes leaked:"
        ),
        SortKey::Peak => writeln!(
            s,
            "\ntop {shown} of {n} {what}{through} with bytes live at the heap's peak \
             (of {of_all}), by those bytes:"
        ),
        SortKey::Temporary => writeln!(
            s,
            "\ntop {shown} of {n} {what}{through} with temporary allocations (of {of_all}), \
             by their count:"
        ),
    };
    let nranks = rank_count(p);
    let alike = AlikeLines::of(list.contexts.iter().chain(&list.mpi));
    let mut notes = Notes::default();
    match &sites {
        Some(v) => sites::write_text(
            &mut s,
            v,
            top,
            (!p.config.exact).then_some(p.config.phi),
            heap_figure(by, end).as_deref(),
        ),
        None => {
            for (i, ctx) in listed.into_iter().take(top).enumerate() {
                notes |= context(&mut s, i + 1, ctx, nranks, &alike, false);
            }
        }
    }
    let skipped = MpiOwn::by(&list.contexts, by);
    let skipped_cold = MpiOwn::by(list.contexts.iter().filter(|c| !c.hot), by).contexts;
    if skip_mpi_own && skipped.contexts > 0 {
        let amount = match by {
            SortKey::Count => format!("{} calls", skipped.total),
            SortKey::Bytes => format!("{} allocated", human_bytes(skipped.total)),
            SortKey::Leaked => format!("{} live at {end}", human_bytes(skipped.total)),
            SortKey::Peak => format!("{} live at the heap's peak", human_bytes(skipped.total)),
            SortKey::Temporary => format!("{} temporary allocations", skipped.total),
        };
        let _ = writeln!(
            s,
            "\nnot listed: {} {} allocated inside MPI calls ({}), {amount}: \
             the MPI library's own{} (--mpi-internal lists them)",
            skipped.contexts,
            // The list's own: above the hotness threshold outside exact
            // mode, and the cold ones a view by a heap figure adds.
            match skipped_cold {
                _ if p.config.exact => "contexts".to_string(),
                0 => "hot contexts".to_string(),
                k => format!("contexts ({k} cold)"),
            },
            routines(&skipped, by),
            if by == SortKey::Leaked && end == "MPI_Finalize" {
                " memory, most of which it frees after the report is taken"
            } else {
                " allocations"
            }
        );
    }
    // Under a focus the rest of the live heap is outside it, not cold.
    if by == SortKey::Leaked && focus.is_none() {
        let listed_live: u64 = list
            .contexts
            .iter()
            .chain(&list.untraced)
            .map(|c| c.leaked_bytes)
            .sum();
        let cold = p.heap.live_bytes.saturating_sub(listed_live);
        if cold > 0 {
            let _ = writeln!(
                s,
                "\nnot listed: {} live at {end} in contexts below the hotness threshold, \
                 each holding less than phi of it or no longer in the summary \
                 (phi {}; WMHCCT_EXACT=1 keeps every context)",
                human_bytes(cold),
                p.config.phi
            );
        }
    }
    if !list.mpi.is_empty() {
        let shown = list.mpi.len().min(top);
        let _ = writeln!(
            s,
            "\ntop {shown} of {} MPI call contexts{through} by {}:",
            list.mpi.len(),
            if by == SortKey::Bytes {
                "bytes sent (received, by a receive)"
            } else {
                "count (bytes: sent, or received by a receive)"
            }
        );
        for (i, ctx) in list.mpi.iter().take(top).enumerate() {
            notes |= context(&mut s, i + 1, ctx, nranks, &alike, true);
        }
    }
    if notes.call_site {
        let _ = writeln!(
            s,
            "\n`file:line @0x…`: one of several calls on that source line (written \
             there, or made so by the compiler, e.g. one per branch); the return \
             address in the module tells them apart"
        );
    }
    if let Some(figure) = heap_figure(by, end).filter(|_| notes.cold) {
        let _ = writeln!(
            s,
            "\n`cold`: below the hotness threshold (phi {}) in calls and in bytes \
             allocated, listed for holding at least phi of the heap's {figure}; such \
             contexts are listed while the summary keeps them (WMHCCT_EXACT=1 keeps \
             every context)",
            p.config.phi
        );
    }
    if notes.shortened {
        let _ = writeln!(
            s,
            "\n`<…>`, `(…)`: template and parameter lists left out of names longer \
             than {TEXT_NAME_MAX} characters; report --json has every name whole"
        );
    }
    if p.ranks.len() > 1 {
        ranks_table(&mut s, p, top);
    }
    if !list.untraced.is_empty() {
        let _ = writeln!(s, "\nuntraced (stack not captured):");
        for ctx in list.untraced.iter().take(top) {
            let _ = writeln!(
                s,
                "  {:<14} count {} bytes {}",
                ctx.kind, ctx.count, ctx.bytes
            );
        }
    }
    s
}

/// The figure of the heap by which a view `by` also lists cold contexts
/// ([`contexts`](crate::contexts::contexts)), as the text names it; `end`:
/// when the profile was taken.
fn heap_figure(by: SortKey, end: &str) -> Option<String> {
    match by {
        SortKey::Count | SortKey::Bytes => None,
        SortKey::Leaked => Some(format!("bytes live at {end}")),
        SortKey::Peak => Some("bytes live at its peak".to_string()),
        SortKey::Temporary => Some("temporary allocations".to_string()),
    }
}

/// The focus and what the allocation contexts through it add up to, against
/// every allocation call and byte of the program (the allocation tree's
/// totals): sums of the report's contexts, which hold every call in exact
/// mode, and otherwise the hot ones and, in a view by a heap figure, the
/// cold ones it lists (the other contexts under the threshold are not in
/// the list).
fn focus_lines(s: &mut String, p: &Profile, list: &ContextList, f: &Focus, end: &str) {
    let sums = ContextSums::of(&list.contexts);
    let (all_count, all_bytes) = alloc_tree(p).map_or((0, 0), |t| (t.total_count, t.total_bytes));
    let share = |part: u64, all: u64| match all {
        0 => String::new(),
        _ => format!(" ({:.1}%)", 100.0 * part as f64 / all as f64),
    };
    let _ = writeln!(
        s,
        "\nfocus:     contexts {} (function, source file or module, any case)",
        f.long()
    );
    let _ = writeln!(
        s,
        "           {} contexts, {}{} of {} allocation calls{}, {}{} of {} allocated{}, \
         {} live at {end}",
        sums.contexts,
        sums.count,
        over_by(sums.count_err, sums.count_err.to_string()),
        all_count,
        share(sums.count, all_count),
        human_bytes(sums.bytes),
        over_by(sums.bytes_err, human_bytes(sums.bytes_err)),
        human_bytes(all_bytes),
        share(sums.bytes, all_bytes),
        human_bytes(sums.leaked_bytes)
    );
    if !p.config.exact {
        let _ = writeln!(
            s,
            "           sums over the contexts above the hotness threshold (phi {}): the \
             others are not in the report (WMHCCT_EXACT=1 keeps every context)",
            p.config.phi
        );
    }
}

/// The temporary allocations against every allocation call: `12 temporary
/// allocations (3.4% of 350 allocation calls), 1.2 KiB: freed before their
/// thread allocated again`.
fn temporary_line(p: &Profile) -> String {
    let h = &p.heap;
    let calls = alloc_tree(p).map_or(0, |t| t.total_count);
    let share = match calls {
        0 => String::new(),
        n => format!(
            " ({:.1}% of {n} allocation calls)",
            100.0 * h.temporary_count as f64 / n as f64
        ),
    };
    format!(
        "{} temporary allocations{share}, {}: freed before their thread allocated again",
        h.temporary_count,
        human_bytes(h.temporary_bytes)
    )
}

/// The process's resident memory, when the tracer could read it:
/// `resident:  peak 51.2 MiB (VmHWM), 40.0 MiB at end; the tracer
/// allocated up to 3.0 MiB for itself (resident where touched)`. A job's names the rank with the largest
/// peak and the sum of the ranks' peaks, and, when its ranks ran on several
/// hosts, each host's sum (what a node needs for its ranks at most).
fn resident_lines(s: &mut String, p: &Profile, end: &str) {
    let own = |tracer: u64| match tracer {
        0 => String::new(),
        b => format!(
            "; the tracer allocated up to {} for itself (resident where touched)",
            human_bytes(b)
        ),
    };
    let Some(r) = resident_rank(p) else {
        if p.ranks.len() < 2 && p.resident.known() {
            let m = &p.resident;
            let _ = writeln!(
                s,
                "resident:  peak {} (VmHWM), {} at {end}{}",
                human_bytes(m.peak_bytes),
                human_bytes(m.end_bytes),
                own(m.tracer_peak_bytes)
            );
        }
        return;
    };
    let m = &r.resident;
    let tracer = match m.tracer_peak_bytes {
        0 => String::new(),
        b => format!(
            "; rank {}'s tracer allocated up to {} for itself",
            r.rank,
            human_bytes(b)
        ),
    };
    let _ = writeln!(
        s,
        "resident:  peak {} (VmHWM) on rank {}, {} at {end}; the {} ranks' peaks sum to {}{tracer}",
        human_bytes(m.peak_bytes),
        r.rank,
        human_bytes(m.end_bytes),
        p.ranks.len(),
        human_bytes(p.ranks.iter().map(|r| r.resident.peak_bytes).sum())
    );
    let hosts = resident_by_host(p);
    if hosts.len() > 1 {
        let named = first_four(hosts.iter().map(|(h, n, b)| {
            format!(
                "{h} {} ({n} rank{})",
                human_bytes(*b),
                if *n == 1 { "" } else { "s" }
            )
        }));
        let _ = writeln!(
            s,
            "           per host, the sum of its ranks' peaks (largest first): {named}"
        );
    }
}

/// The rank of a job with the largest resident peak (the lowest such rank
/// on a tie); `None` for a single process or when no rank's is known.
pub fn resident_rank(p: &Profile) -> Option<&RankSummary> {
    top_rank(p, p.ranks.iter().filter(|r| r.resident.known()), |r| {
        r.resident.peak_bytes
    })
}

/// Each host's ranks and the sum of their resident peaks, largest sum
/// first (then by name).
fn resident_by_host(p: &Profile) -> Vec<(&str, usize, u64)> {
    let mut hosts: Vec<(&str, usize, u64)> = by_host(p.ranks.iter().filter(|r| r.resident.known()))
        .into_iter()
        .map(|(h, rs)| (h, rs.len(), rs.iter().map(|r| r.resident.peak_bytes).sum()))
        .collect();
    hosts.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(b.0)));
    hosts
}

/// Where the process ran: `host:      vm (pid 42, 3 threads)`. A job's
/// report has its ranks' hosts, with how many ranks each ran (in order of
/// first rank, the first four named), rank 0's pid, and the threads of all
/// ranks.
fn host_line(p: &Profile, threads: &str) -> String {
    let m = &p.meta;
    if p.ranks.len() < 2 {
        return format!("host:      {} (pid {}, {threads})", m.hostname, m.pid);
    }
    let mut ranks: Vec<&RankSummary> = p.ranks.iter().collect();
    ranks.sort_by_key(|r| r.rank);
    let hosts = by_host(ranks.iter().copied());
    let (label, which) = match hosts.as_slice() {
        [(h, rs)] => ("host: ", format!("{h} ({} ranks)", rs.len())),
        _ => {
            let named = first_four(hosts.iter().map(|(h, rs)| {
                let n = rs.len();
                format!("{h} {n} rank{}", if n == 1 { "" } else { "s" })
            }));
            ("hosts:", format!("{} ({named})", hosts.len()))
        }
    };
    let first = ranks[0];
    format!(
        "{label}     {which}; rank {} pid {}; {threads} over the ranks",
        first.rank, first.pid
    )
}

/// The ranks by host, hosts in the order of their first rank in `ranks`.
fn by_host<'a>(
    ranks: impl Iterator<Item = &'a RankSummary>,
) -> Vec<(&'a str, Vec<&'a RankSummary>)> {
    let mut hosts: Vec<(&str, Vec<&RankSummary>)> = Vec::new();
    for r in ranks {
        match hosts.iter_mut().find(|(h, _)| *h == r.hostname) {
            Some((_, rs)) => rs.push(r),
            None => hosts.push((&r.hostname, vec![r])),
        }
    }
    hosts
}

/// The first four of `items` joined, then how many more: `a, b, c, d, 2 more`.
/// A job's ranks known only by their last snapshot (`WMHCCT_SNAPSHOT`):
/// they ended without writing anything, most likely killed by SIGKILL.
fn snapshot_ranks_line(p: &Profile) -> Option<String> {
    if p.ranks.len() < 2 {
        return None;
    }
    let ranks: Vec<u32> = p
        .ranks
        .iter()
        .filter(|r| r.reason == "snapshot")
        .map(|r| r.rank)
        .collect();
    let (who, their) = match ranks.len() {
        0 => return None,
        1 => (format!("rank {}", ranks[0]), "its last snapshot"),
        n => (
            format!(
                "{n} ranks ({})",
                first_four(ranks.iter().map(|r| r.to_string()))
            ),
            "their last snapshots",
        ),
    };
    Some(format!(
        "{who} left only {their}, taken at a new heap high: killed by SIGKILL or the OOM killer?"
    ))
}

/// How the ranks of a job ended, when they did not all end alike: the most
/// common reason (on a tie, the lowest rank's; a snapshot only when every
/// reason is one), then each other reason after its ranks, as in
/// `finalize; rank 1: abort` or `abort; ranks 1-3, 7: finalize`. One short
/// line for any number of ranks: more than four runs of ranks are counted.
fn mixed_ends(p: &Profile) -> Option<String> {
    if p.ranks.len() < 2 {
        return None;
    }
    let mut ranks: Vec<(&str, u32)> = p
        .ranks
        .iter()
        .map(|r| (r.reason.as_str(), r.rank))
        .collect();
    ranks.sort_by_key(|&(_, r)| r);
    // Reasons in the order of their lowest rank, with their ranks.
    let mut by_reason: Vec<(&str, Vec<u32>)> = Vec::new();
    for (reason, rank) in ranks {
        match by_reason.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, v)) => v.push(rank),
            None => by_reason.push((reason, vec![rank])),
        }
    }
    if by_reason.len() < 2 {
        return None;
    }
    let lead = (0..by_reason.len())
        .max_by_key(|&i| {
            let (reason, v) = &by_reason[i];
            (*reason != "snapshot", v.len(), std::cmp::Reverse(i))
        })
        .unwrap_or(0);
    let mut s = by_reason[lead].0.to_string();
    for (i, (reason, v)) in by_reason.iter().enumerate() {
        if i != lead {
            let _ = write!(s, "; {}: {reason}", rank_runs(v));
        }
    }
    Some(s)
}

/// `rank 1`, `ranks 1-3, 7`, or, past four runs, `9 ranks (1, 3, 5, 7, …)`.
/// `ranks` is sorted.
fn rank_runs(ranks: &[u32]) -> String {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for &r in ranks {
        match runs.last_mut() {
            Some((_, last)) if last.checked_add(1) == Some(r) => *last = r,
            _ => runs.push((r, r)),
        }
    }
    let run = |&(a, b): &(u32, u32)| {
        if a == b {
            a.to_string()
        } else {
            format!("{a}-{b}")
        }
    };
    match (ranks.len(), runs.len()) {
        (1, _) => format!("rank {}", ranks[0]),
        (_, n) if n <= 4 => format!(
            "ranks {}",
            runs.iter().map(run).collect::<Vec<_>>().join(", ")
        ),
        (n, _) => format!(
            "{n} ranks ({}, …)",
            runs[..4].iter().map(run).collect::<Vec<_>>().join(", ")
        ),
    }
}

fn first_four(items: impl ExactSizeIterator<Item = String>) -> String {
    let more = items.len().saturating_sub(4);
    let mut named: Vec<String> = items.take(4).collect();
    if more > 0 {
        named.push(format!("{more} more"));
    }
    named.join(", ")
}

/// The rank of a job (several ranks) with the largest `value` among
/// `ranks`, the lowest such rank on a tie.
fn top_rank<'a>(
    p: &Profile,
    ranks: impl Iterator<Item = &'a RankSummary>,
    value: impl Fn(&RankSummary) -> u64,
) -> Option<&'a RankSummary> {
    if p.ranks.len() < 2 {
        return None;
    }
    ranks.max_by(|a, b| value(a).cmp(&value(b)).then(b.rank.cmp(&a.rank)))
}

/// The rank of a job (several ranks) with the highest heap peak, the
/// lowest such rank on a tie.
pub fn peak_rank(p: &Profile) -> Option<&RankSummary> {
    top_rank(p, p.ranks.iter(), |r| r.heap.peak_bytes)
}

/// A job's largest rank peak (its `/heap` peak sums them); a single
/// process's peak.
pub fn largest_peak(p: &Profile) -> u64 {
    peak_rank(p).map_or(p.heap.peak_bytes, |r| r.heap.peak_bytes)
}

/// The process's resident peak, a job's largest rank's; `None` when not
/// known.
pub fn largest_resident(p: &Profile) -> Option<u64> {
    match resident_rank(p) {
        Some(r) => Some(r.resident.peak_bytes),
        None if p.ranks.len() < 2 && p.resident.known() => Some(p.resident.peak_bytes),
        None => None,
    }
}

/// `peak 11.8 MiB (12345678 B), 2.125 s into the run`. A job's heap peak
/// is each rank's own: the largest, its rank and when, and their sum (the
/// job's `/heap` peak), which bounds what the ranks held at once from
/// above.
fn peak_line(p: &Profile) -> String {
    let at = |peak: u64, ns: u64, whose: &str| match peak {
        0 => String::new(),
        _ => format!(", {:.3} s into {whose} run", ns as f64 / 1e9),
    };
    match peak_rank(p) {
        Some(r) => format!(
            "peak {} on rank {}{}; the {} ranks' peaks sum to {}",
            exact_bytes(r.heap.peak_bytes),
            r.rank,
            at(r.heap.peak_bytes, r.heap.peak_time_ns, "its"),
            p.ranks.len(),
            human_bytes(p.heap.peak_bytes)
        ),
        None => format!(
            "peak {}{}",
            exact_bytes(p.heap.peak_bytes),
            at(p.heap.peak_bytes, p.heap.peak_time_ns, "the")
        ),
    }
}

/// `MPI_Init 11.9 MiB, MPI_Isend 2.0 KiB` (the three largest, then `…`);
/// by count, `MPI_Init 4748, …`.
fn routines(own: &MpiOwn, by: SortKey) -> String {
    let mut v: Vec<String> = own
        .routines
        .iter()
        .take(3)
        .map(|(r, b)| match by {
            SortKey::Count | SortKey::Temporary => format!("{r} {b}"),
            SortKey::Bytes | SortKey::Leaked | SortKey::Peak => format!("{r} {}", human_bytes(*b)),
        })
        .collect();
    if own.routines.len() > 3 {
        v.push("…".into());
    }
    v.join(", ")
}

/// Per-rank exact scalars, the `top` ranks with the highest heap peak.
fn ranks_table(s: &mut String, p: &Profile, top: usize) {
    let mut ranks: Vec<_> = p.ranks.iter().collect();
    ranks.sort_by(|a, b| {
        b.heap
            .peak_bytes
            .cmp(&a.heap.peak_bytes)
            .then(a.rank.cmp(&b.rank))
    });
    let shown = ranks.len().min(top);
    // The resident peak's column only where some rank's is known.
    let rss = ranks.iter().any(|r| r.resident.known());
    let rss_cell = |v: &str| {
        if rss {
            format!(" {v:>14}")
        } else {
            String::new()
        }
    };
    let _ = writeln!(
        s,
        "\nranks by heap peak (top {shown} of {}):\n{:>6} {:<20} {:>14} {:>14} {:>14} {:>9}{}",
        ranks.len(),
        "rank",
        "host",
        "alloc events",
        "peak",
        // Everything live when the rank's profile was taken (in a job, at
        // MPI_Finalize: the MPI library's state too), not only leaks.
        "live at end",
        "accuracy",
        rss_cell("resident peak")
    );
    let events = |r: &RankSummary| -> u64 {
        r.totals
            .iter()
            .filter(|t| !t.kind.starts_with("MPI_") || t.kind == "MPI_Alloc_mem")
            .map(|t| t.count)
            .sum()
    };
    let imbalance = [
        (
            "peak",
            max_over_mean(ranks.iter().map(|r| r.heap.peak_bytes)),
        ),
        (
            "alloc events",
            max_over_mean(ranks.iter().map(|r| events(r))),
        ),
        (
            "live at end",
            max_over_mean(ranks.iter().map(|r| r.heap.live_bytes)),
        ),
        (
            "resident peak",
            max_over_mean(ranks.iter().map(|r| r.resident.peak_bytes)),
        ),
    ];
    for r in ranks.into_iter().take(top) {
        let events = events(r);
        let acc = if r.unwind.validated == 0 {
            "-".to_string()
        } else {
            format!(
                "{:.2}%",
                100.0 * r.unwind.correct as f64 / r.unwind.validated as f64
            )
        };
        let resident = match r.resident.peak_bytes {
            0 => "-".to_string(),
            b => human_bytes(b),
        };
        let _ = writeln!(
            s,
            "{:>6} {:<20} {:>14} {:>14} {:>14} {:>9}{}",
            r.rank,
            r.hostname,
            events,
            human_bytes(r.heap.peak_bytes),
            human_bytes(r.heap.live_bytes),
            acc,
            rss_cell(&resident)
        );
    }
    let shown: Vec<String> = imbalance
        .iter()
        .filter_map(|(what, x)| x.map(|x| format!("{what} {x:.2}")))
        .collect();
    if !shown.is_empty() {
        let _ = writeln!(
            s,
            "  imbalance over the {} ranks (max / mean): {}",
            p.ranks.len(),
            shown.join(", ")
        );
    }
}

/// The largest value over the mean (1.00: balanced); `None` when all are 0.
fn max_over_mean(values: impl Iterator<Item = u64>) -> Option<f64> {
    let (mut max, mut sum, mut n) = (0u64, 0u128, 0u64);
    for v in values {
        max = max.max(v);
        sum += v as u128;
        n += 1;
    }
    (sum > 0).then(|| max as f64 * n as f64 / sum as f64)
}

/// ` (over by ≤shown)` for a Space-Saving error bound `e` shown as
/// `shown`; nothing when it is 0 (exact). An estimate is never below the
/// truth and at most `e` above it: `±` read as a symmetric interval.
pub fn over_by(e: u64, shown: String) -> String {
    match e {
        0 => String::new(),
        _ => format!(" (over by ≤{shown})"),
    }
}

/// `per rank: count min 1 mean 1.0 max 1 (rank 0); bytes min 1.0 MiB mean
/// 2.5 MiB max 4.0 MiB (rank 3)`: how a context's calls and bytes spread
/// over the job's ranks, each with the rank holding its maximum.
fn per_rank_line(c: &Context, nranks: u32) -> String {
    let (n, b) = (&c.spread.count, &c.spread.bytes);
    format!(
        "per rank: count min {} mean {:.1} max {} (rank {}); bytes min {} mean {} max {} (rank {})",
        n.min_over(nranks),
        n.mean_over(nranks),
        n.max,
        n.max_rank,
        human_bytes(b.min_over(nranks)),
        human_bytes(b.mean_over(nranks).round() as u64),
        human_bytes(b.max),
        b.max_rank
    )
}

/// What the lines of the contexts listed need explained below them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Notes {
    /// A frame was marked with its call site (`file:line @0x…`).
    call_site: bool,
    /// A function's name was shortened ([`shortened`]).
    shortened: bool,
    /// A cold context was listed ([`Context::hot`]).
    cold: bool,
}

impl std::ops::BitOrAssign for Notes {
    fn bitor_assign(&mut self, o: Notes) {
        self.call_site |= o.call_site;
        self.shortened |= o.shortened;
        self.cold |= o.cold;
    }
}

/// One context, and what its lines need explained.
/// Bytes in readable units (the JSON has them exact); an MPI call's
/// context (`mpi_call`) gives the bytes it moved and no memory held.
fn context(
    s: &mut String,
    rank: usize,
    c: &Context,
    nranks: u32,
    alike: &AlikeLines,
    mpi_call: bool,
) -> Notes {
    let inside = match &c.inside_mpi {
        Some(r) => format!("  inside {r}"),
        None => String::new(),
    };
    let held = if mpi_call {
        String::new()
    } else {
        let temporary = match c.temporary {
            0 => String::new(),
            n => format!("  temporary {n}"),
        };
        format!(
            "  leaked {}  at-peak {}{temporary}",
            human_bytes(c.leaked_bytes),
            human_bytes(c.peak_live_bytes)
        )
    };
    let cold = if c.hot { "" } else { "  cold" };
    let _ = writeln!(
        s,
        "\n#{rank} {}  count {}{}  bytes {}{}{held}{inside}{cold}",
        c.kind,
        c.count,
        over_by(c.count_err, c.count_err.to_string()),
        human_bytes(c.bytes),
        over_by(c.bytes_err, human_bytes(c.bytes_err)),
    );
    if nranks > 1 {
        let _ = writeln!(s, "    {}", per_rank_line(c, nranks));
    }
    if c.stack.is_empty() {
        let _ = writeln!(s, "    (no frames)");
    }
    let mut notes = Notes {
        cold: !c.hot,
        ..Notes::default()
    };
    for (f, n) in runs(above_main(&c.stack)) {
        let loc = if f.file.is_empty() {
            format!("{:#x}", f.address)
        } else if alike.contains(f) {
            notes.call_site = true;
            format!("{}:{} @{:#x}", f.file, f.line, f.address)
        } else {
            format!("{}:{}", f.file, f.line)
        };
        let module = if f.module.is_empty() { "?" } else { &f.module };
        let times = if n > 1 {
            format!("  ×{n}")
        } else {
            String::new()
        };
        let function = shortened(&f.function, TEXT_NAME_MAX);
        notes.shortened |= matches!(function, Cow::Owned(_));
        let _ = writeln!(s, "    {function} ({loc}) [{module}]{times}");
    }
    if c.cut {
        let _ = writeln!(
            s,
            "    … cut at {} frames (WMHCCT_MAX_DEPTH): outer callers not recorded",
            c.stack.len()
        );
    }
    notes
}

/// The frames a text stack shows, innermost first: up to the outermost
/// `main`, without the C library's start-up below it (`__libc_start_main`,
/// `_start`), the same under every context of the program, as Valgrind
/// shows stacks; all of them when there is no `main` (a thread's stack,
/// which ends at `clone3`). The JSON and the exports keep every frame;
/// `diff`'s text ends its stacks at `main` too.
fn above_main(stack: &[StackFrame]) -> &[StackFrame] {
    up_to_main(stack, |f| &f.function)
}

/// The C library's start-up routines that call `main` (glibc 2.34 and
/// later: `__libc_start_main_impl` calls `__libc_start_call_main`, which
/// calls `main`; before, `__libc_start_main` called it itself).
const LIBC_START: [&str; 3] = [
    "__libc_start_call_main",
    "__libc_start_main_impl",
    "__libc_start_main",
];

/// `stack` (innermost first) up to its outermost frame that `function`
/// names `main`; in a stripped executable, whose `main` has no name, up
/// to the frame the C library's start-up called (the innermost frame of
/// [`LIBC_START`] and all below it left out); all of it without either.
/// Until 2026-11-27 a stripped program's stacks (Debian's packaged
/// applications: `pw.x`, `cp2k`, `hpcc`) went on below its `main` to
/// `__libc_start_call_main`, `__libc_start_main_impl` and `_start`.
pub fn up_to_main<T>(stack: &[T], function: impl Fn(&T) -> &str) -> &[T] {
    if let Some(i) = stack.iter().rposition(|f| function(f) == "main") {
        return &stack[..=i];
    }
    match stack.iter().position(|f| LIBC_START.contains(&function(f))) {
        Some(i) if i > 0 => &stack[..i],
        _ => stack,
    }
}

/// A stack's frames with each run of identical consecutive frames (same
/// return address in the same module: a function calling itself from one
/// call site, level after level) given once with its length, so a deep
/// recursion takes one line instead of a screenful.
fn runs(stack: &[StackFrame]) -> Vec<(&StackFrame, usize)> {
    runs_by(stack, |a, b| a.address == b.address && a.module == b.module)
}

#[cfg(test)]
mod tests {
    use super::{
        above_main, context, host_line, human_bytes, max_over_mean, peak_line, per_rank_line,
        ranks_table, render, resident_lines, routines, runs, up_to_main, AlikeLines,
    };
    use crate::cli::{Group, SortKey};
    use crate::contexts::{Context, ContextList, StackFrame};
    use crate::mpi_internal::MpiOwn;
    use wmhcct_format::{HeapStats, Profile, RankSummary};

    #[test]
    fn the_mpi_librarys_routines_show_counts_as_counts() {
        let own = MpiOwn {
            contexts: 2,
            total: 2024,
            routines: vec![
                ("MPI_Init".into(), 1976),
                ("thread of libpmix.so.2".into(), 48),
            ],
        };
        for by in [SortKey::Count, SortKey::Temporary] {
            assert_eq!(
                routines(&own, by),
                "MPI_Init 1976, thread of libpmix.so.2 48"
            );
        }
        assert_eq!(
            routines(&own, SortKey::Bytes),
            "MPI_Init 1.9 KiB, thread of libpmix.so.2 48 B"
        );
    }

    #[test]
    fn the_per_rank_line_gives_calls_and_bytes_each_with_its_largest_rank() {
        use wmhcct_format::{NodeSpread, Spread};
        // Rank r of 4 allocates (r + 1) MiB in one call.
        let c = Context {
            spread: NodeSpread {
                count: Spread {
                    min: 1,
                    max: 1,
                    sum: 4,
                    max_rank: 0,
                    present: 4,
                },
                bytes: Spread {
                    min: 1 << 20,
                    max: 4 << 20,
                    sum: 10 << 20,
                    max_rank: 3,
                    present: 4,
                },
            },
            ..Context::of_stack("malloc", Vec::new())
        };
        assert_eq!(
            per_rank_line(&c, 4),
            "per rank: count min 1 mean 1.0 max 1 (rank 0); \
             bytes min 1.0 MiB mean 2.5 MiB max 4.0 MiB (rank 3)"
        );
    }

    fn frame(function: &str, line: u32, module: &str, address: u64) -> StackFrame {
        StackFrame {
            function: function.into(),
            file: "solver.c".into(),
            line,
            module: module.into(),
            address,
        }
    }

    #[test]
    fn runs_of_identical_frames_are_folded() {
        let leaf = frame("leaf", 9, "app", 0x1010);
        let rec = frame("refine", 40, "app", 0x2020);
        let other_site = frame("refine", 44, "app", 0x2030);
        let same_address_other_module = frame("refine", 40, "libx.so", 0x2020);
        let main = frame("main", 7, "app", 0x3030);
        let stack = [
            leaf.clone(),
            rec.clone(),
            rec.clone(),
            rec.clone(),
            other_site.clone(),
            rec.clone(),
            same_address_other_module.clone(),
            main.clone(),
        ];
        let got: Vec<(StackFrame, usize)> = runs(&stack)
            .into_iter()
            .map(|(f, n)| (f.clone(), n))
            .collect();
        assert_eq!(
            got,
            vec![
                (leaf, 1),
                (rec.clone(), 3),
                (other_site, 1),
                (rec, 1),
                (same_address_other_module, 1),
                (main, 1),
            ]
        );
        // Every frame is accounted for.
        assert_eq!(
            runs(&stack).iter().map(|(_, n)| n).sum::<usize>(),
            stack.len()
        );
        assert!(runs(&[]).is_empty());
    }

    /// A context's first line: bytes in readable units, errors too; an MPI
    /// call's holds no memory, so it gives none.
    #[test]
    fn a_contexts_line_reads_in_units() {
        let alloc = Context {
            count: 1600,
            count_err: 3,
            bytes: 3_276_800,
            bytes_err: 2048,
            leaked_bytes: 4096,
            ..Context::of_stack("malloc", Vec::new())
        };
        let mut s = String::new();
        context(&mut s, 1, &alloc, 1, &AlikeLines::default(), false);
        assert!(
            s.starts_with(
                "\n#1 malloc  count 1600 (over by ≤3)  bytes 3.1 MiB (over by ≤2.0 KiB)  leaked 4.0 KiB  at-peak 0 B\n"
            ),
            "{s}"
        );
        let mut s = String::new();
        context(&mut s, 2, &ctx(Vec::new()), 1, &AlikeLines::default(), true);
        assert!(
            s.starts_with("\n#2 MPI_Sendrecv  count 400  bytes 8.0 KiB\n"),
            "{s}"
        );
    }

    #[test]
    fn imbalance_is_the_largest_over_the_mean() {
        assert_eq!(max_over_mean([4u64, 4, 4].into_iter()), Some(1.0));
        assert_eq!(max_over_mean([1u64, 2, 3, 6].into_iter()), Some(2.0));
        assert_eq!(max_over_mean([0u64, 0].into_iter()), None);
        assert_eq!(max_over_mean(std::iter::empty()), None);
        let big = max_over_mean([u64::MAX, u64::MAX].into_iter()).unwrap();
        assert!((big - 1.0).abs() < 1e-12, "{big}");
    }

    /// A process's peak and when; a job's is its largest rank's, with the
    /// sum of the ranks' peaks that the job's `/heap` holds named as such.
    /// `diff`'s stacks are names: they end at `main` the same way.
    #[test]
    fn a_stack_of_names_ends_at_main() {
        let names: Vec<String> = ["leaf", "main", "__libc_start_main", "_start"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(up_to_main(&names, String::as_str), &names[..2]);
        assert_eq!(up_to_main(&names[2..], String::as_str), &names[2..]);
    }

    /// A rank's summary that only says how it ended.
    fn rank(rank: u32, reason: &str) -> RankSummary {
        RankSummary {
            rank,
            reason: reason.into(),
            ..Default::default()
        }
    }

    /// A job of these ranks, and nothing else.
    fn job(ranks: Vec<RankSummary>) -> Profile {
        Profile {
            ranks,
            ..Default::default()
        }
    }

    #[test]
    fn ranks_known_by_a_snapshot_are_named() {
        let line = |p: &Profile| super::snapshot_ranks_line(p);
        assert_eq!(line(&job(vec![rank(0, "signal"), rank(1, "signal")])), None);
        assert_eq!(line(&job(vec![rank(0, "snapshot")])), None, "not a job");
        assert_eq!(
            line(&job(vec![rank(0, "signal"), rank(1, "snapshot")])).unwrap(),
            "rank 1 left only its last snapshot, taken at a new heap high: killed by SIGKILL or \
             the OOM killer?"
        );
        let many: Vec<RankSummary> = (0..8).map(|r| rank(r, "snapshot")).collect();
        assert!(line(&job(many))
            .unwrap()
            .starts_with("8 ranks (0, 1, 2, 3, 4 more) left only their last snapshots"));
    }

    /// A job whose ranks ended differently says how in its duration line;
    /// one whose ranks ended alike, or a process, says its one reason.
    #[test]
    fn ranks_that_ended_differently_are_named() {
        let ends = |p: &Profile| super::mixed_ends(p);
        assert_eq!(ends(&Profile::default()), None);
        assert_eq!(
            ends(&job(vec![rank(0, "finalize"), rank(1, "finalize")])),
            None
        );
        assert_eq!(
            ends(&job(vec![rank(1, "abort"), rank(0, "finalize")])).unwrap(),
            "finalize; rank 1: abort",
            "a tie: rank 0's reason leads"
        );
        assert_eq!(
            ends(&job(vec![
                rank(0, "finalize"),
                rank(1, "abort"),
                rank(2, "abort"),
                rank(3, "abort"),
                rank(4, "sigterm"),
            ]))
            .unwrap(),
            "abort; rank 0: finalize; rank 4: sigterm",
            "the most common reason leads"
        );
        assert_eq!(
            ends(&job(vec![rank(0, "snapshot"), rank(1, "sigterm")])).unwrap(),
            "sigterm; rank 0: snapshot",
            "a snapshot leads only when all are"
        );
        // 1000 ranks: one short line.
        let many: Vec<RankSummary> = (0..1000)
            .map(|r| {
                rank(
                    r,
                    if r % 7 == 3 || (500..600).contains(&r) {
                        "abort"
                    } else {
                        "finalize"
                    },
                )
            })
            .collect();
        let line = ends(&job(many)).unwrap();
        assert_eq!(line, "finalize; 228 ranks (3, 10, 17, 24, …): abort");
        let few: Vec<RankSummary> = (0..1000)
            .map(|r| {
                rank(
                    r,
                    if (1..4).contains(&r) || r == 999 {
                        "abort"
                    } else {
                        "finalize"
                    },
                )
            })
            .collect();
        assert_eq!(ends(&job(few)).unwrap(), "finalize; ranks 1-3, 999: abort");

        let mut p = job(vec![rank(0, "finalize"), rank(1, "abort")]);
        p.meta.reason = "finalize".into();
        let list = ContextList {
            contexts: vec![],
            untraced: vec![],
            cold: vec![],
            mpi: vec![],
        };
        let text = render(&p, &list, 20, SortKey::Count, Group::Context, false, None);
        assert!(
            text.contains("s (ended by finalize; rank 1: abort)\n"),
            "{text}"
        );
        assert!(text.contains("live at end "), "not at MPI_Finalize: {text}");
    }

    #[test]
    fn a_jobs_hosts_are_its_ranks() {
        let one = Profile::default();
        assert_eq!(host_line(&one, "1 thread"), "host:       (pid 0, 1 thread)");
        let rank = |rank: u32, host: &str| RankSummary {
            rank,
            hostname: host.into(),
            pid: 100 + rank,
            ..Default::default()
        };
        let job = |ranks: Vec<RankSummary>| Profile {
            ranks,
            ..Default::default()
        };
        assert_eq!(
            host_line(&job(vec![rank(1, "vm"), rank(0, "vm")]), "5 threads"),
            "host:      vm (2 ranks); rank 0 pid 100; 5 threads over the ranks"
        );
        let many = job(vec![
            rank(3, "n2"),
            rank(0, "n1"),
            rank(1, "n1"),
            rank(2, "n2"),
            rank(4, "n3"),
            rank(5, "n4"),
            rank(6, "n5"),
            rank(7, "n6"),
        ]);
        assert_eq!(
            host_line(&many, "8 threads"),
            "hosts:     6 (n1 2 ranks, n2 2 ranks, n3 1 rank, n4 1 rank, 2 more); \
             rank 0 pid 100; 8 threads over the ranks"
        );
    }

    /// A process's resident line; a job's names its largest rank and the
    /// sum, and each host's sum when there are several hosts; none where
    /// the figures are not known (reports of layout 3). The ranks table
    /// has a resident column only where they are.
    #[test]
    fn resident_memory_by_rank_and_host() {
        use wmhcct_format::Resident;
        let res = |peak_bytes: u64, end_bytes: u64, tracer_peak_bytes: u64| Resident {
            peak_bytes,
            end_bytes,
            tracer_peak_bytes,
        };
        let lines = |p: &Profile, end: &str| {
            let mut s = String::new();
            resident_lines(&mut s, p, end);
            s
        };
        assert_eq!(lines(&Profile::default(), "end"), "");
        let one = Profile {
            resident: res(50 << 20, 40 << 20, 3 << 20),
            ..Default::default()
        };
        assert_eq!(
            lines(&one, "end"),
            "resident:  peak 50.0 MiB (VmHWM), 40.0 MiB at end; the tracer allocated up to \
             3.0 MiB for itself (resident where touched)\n"
        );
        let rank = |rank: u32, host: &str, mib: u64| RankSummary {
            rank,
            hostname: host.into(),
            resident: res(mib << 20, (mib / 2) << 20, 1 << 20),
            ..Default::default()
        };
        let job = |ranks: Vec<RankSummary>| Profile {
            ranks,
            ..Default::default()
        };
        let same_host = job(vec![
            rank(0, "vm", 10),
            rank(1, "vm", 30),
            rank(2, "vm", 30),
        ]);
        assert_eq!(
            lines(&same_host, "MPI_Finalize"),
            "resident:  peak 30.0 MiB (VmHWM) on rank 1, 15.0 MiB at MPI_Finalize; the 3 ranks' \
             peaks sum to 70.0 MiB; rank 1's tracer allocated up to 1.0 MiB for itself\n"
        );
        let hosts = job(vec![
            rank(0, "n1", 10),
            rank(1, "n1", 10),
            rank(2, "n2", 30),
            rank(3, "n3", 5),
            rank(4, "n4", 5),
            rank(5, "n5", 1),
            rank(6, "n6", 1),
        ]);
        let text = lines(&hosts, "MPI_Finalize");
        assert_eq!(
            text.lines().nth(1),
            Some(
                "           per host, the sum of its ranks' peaks (largest first): n2 30.0 MiB \
                 (1 rank), n1 20.0 MiB (2 ranks), n3 5.0 MiB (1 rank), n4 5.0 MiB (1 rank), 2 more"
            ),
            "{text}"
        );
        let unknown = job(vec![RankSummary::default(), RankSummary::default()]);
        assert_eq!(lines(&unknown, "MPI_Finalize"), "");

        let mut table = String::new();
        ranks_table(&mut table, &same_host, 10);
        assert!(table.contains("accuracy  resident peak\n"), "{table}");
        assert!(table.contains("resident peak 1.29"), "{table}");
        let mut table = String::new();
        ranks_table(&mut table, &unknown, 10);
        assert!(!table.contains("resident"), "{table}");
    }

    #[test]
    fn the_peak_is_a_ranks_own() {
        let heap = |peak_bytes: u64, peak_time_ns: u64| HeapStats {
            peak_bytes,
            peak_time_ns,
            ..Default::default()
        };
        let one = Profile {
            heap: heap(10 << 20, 2_125_000_000),
            ..Default::default()
        };
        assert_eq!(
            peak_line(&one),
            "peak 10.0 MiB (10485760 B), 2.125 s into the run"
        );
        assert_eq!(peak_line(&Profile::default()), "peak 0 B");
        let rank = |rank: u32, peak: u64, t: u64| RankSummary {
            rank,
            heap: heap(peak, t),
            ..Default::default()
        };
        let job = Profile {
            heap: heap(9000, 3_000_000_000),
            ranks: vec![
                rank(0, 2000, 1_000_000),
                rank(1, 4000, 2_500_000_000),
                rank(2, 3000, 3_000_000_000),
            ],
            ..Default::default()
        };
        assert_eq!(
            peak_line(&job),
            "peak 3.9 KiB (4000 B) on rank 1, 2.500 s into its run; the 3 ranks' peaks sum to 8.8 KiB"
        );
        // Ties go to the lowest rank.
        let tie = Profile {
            ranks: vec![rank(5, 10, 1), rank(2, 10, 1)],
            ..job
        };
        assert!(
            peak_line(&tie).contains("on rank 2,"),
            "{}",
            peak_line(&tie)
        );
    }

    #[test]
    fn stacks_end_at_main() {
        let names = |s: &[StackFrame]| s.iter().map(|f| f.function.clone()).collect::<Vec<_>>();
        let f = |name: &str| frame(name, 1, "app", name.bytes().map(u64::from).sum());
        let stack = [
            f("leaf"),
            f("main"),
            f("__libc_start_call_main"),
            f("__libc_start_main_impl"),
            f("_start"),
        ];
        assert_eq!(names(above_main(&stack)), ["leaf", "main"]);
        // A program that calls its own main again shows it whole.
        let again = [f("leaf"), f("main"), f("restart"), f("main"), f("_start")];
        assert_eq!(
            names(above_main(&again)),
            ["leaf", "main", "restart", "main"]
        );
        // A thread's stack has no main.
        let thread = [f("work"), f("start_thread"), f("clone3")];
        assert_eq!(above_main(&thread), &thread[..]);
        // A stripped executable's main has no name: the stack ends at the
        // frame the C library's start-up called, with glibc 2.34's
        // routines and with the older one's.
        let stripped = [
            f("leaf"),
            f("??"),
            f("__libc_start_call_main"),
            f("__libc_start_main_impl"),
            f("??"),
        ];
        assert_eq!(names(above_main(&stripped)), ["leaf", "??"]);
        let older = [f("leaf"), f("??"), f("__libc_start_main"), f("??")];
        assert_eq!(names(above_main(&older)), ["leaf", "??"]);
        // And the report's text has no frame below main.
        let mut s = String::new();
        context(
            &mut s,
            1,
            &ctx(stack.to_vec()),
            1,
            &AlikeLines::default(),
            false,
        );
        assert!(s.contains("    main (solver.c:1) [app]\n"), "{s}");
        assert!(!s.contains("_start"), "{s}");
    }

    fn ctx(stack: Vec<StackFrame>) -> Context {
        Context {
            count: 400,
            bytes: 8192,
            ..Context::of_stack("MPI_Sendrecv", stack)
        }
    }

    /// Two contexts that differ only in which of a line's call sites was
    /// taken print that frame with its address; the frames they share,
    /// and lines with one call site, print as usual.
    #[test]
    fn calls_on_one_line_are_told_apart() {
        let main = frame("main", 76, "app", 0x3030);
        let a = ctx(vec![
            frame("exchange_halos", 25, "app", 0x1790),
            main.clone(),
        ]);
        let b = ctx(vec![
            frame("exchange_halos", 25, "app", 0x1902),
            main.clone(),
        ]);
        let c = ctx(vec![
            frame("exchange_halos", 30, "app", 0x18ff),
            main.clone(),
        ]);
        // The same line in another module is another function's.
        let d = ctx(vec![frame("exchange_halos", 30, "libx.so", 0x20), main]);
        let alike = AlikeLines::of([&a, &b, &c, &d]);
        let text = |x: &Context| {
            let mut s = String::new();
            let marked = context(&mut s, 1, x, 1, &alike, true).call_site;
            (s, marked)
        };
        let (sa, ma) = text(&a);
        assert!(
            ma && sa.contains("exchange_halos (solver.c:25 @0x1790) [app]"),
            "{sa}"
        );
        assert!(sa.contains("main (solver.c:76) [app]"), "{sa}");
        let (sb, _) = text(&b);
        assert!(sb.contains("(solver.c:25 @0x1902)"), "{sb}");
        for x in [&c, &d] {
            let (sx, mx) = text(x);
            assert!(!mx && !sx.contains('@'), "{sx}");
        }
        // Alone, a context has nothing to be told apart from.
        let alone = AlikeLines::of([&a]);
        let mut s = String::new();
        assert!(!context(&mut s, 1, &a, 1, &alone, true).call_site);
    }

    #[test]
    fn long_names_are_shortened_and_said_so() {
        let name = format!(
            "ns::grid<{}>::refine(int)",
            "std::vector<double>, ".repeat(10)
        );
        let mut c = Context::of_stack("malloc", vec![StackFrame::named(&name, "app")]);
        c.stack.push(StackFrame::named("main", "app"));
        let mut s = String::new();
        let notes = context(&mut s, 1, &c, 1, &AlikeLines::of([&c]), false);
        assert!(notes.shortened && !notes.call_site, "{notes:?}");
        assert!(
            s.contains("    ns::grid<…>::refine(int) (0x0) [app]"),
            "{s}"
        );
        let mut p = Profile::default();
        p.meta.program = "app".into();
        let list = ContextList {
            contexts: vec![c],
            untraced: vec![],
            cold: vec![],
            mpi: vec![],
        };
        let text = render(&p, &list, 20, SortKey::Count, Group::Context, false, None);
        assert!(
            text.contains("report --json has every name whole"),
            "{text}"
        );
    }

    #[test]
    fn bytes_are_humane() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(1_048_575), "1.0 MiB");
        assert_eq!(human_bytes(1_048_524), "1023.9 KiB");
        assert_eq!(human_bytes((1 << 30) - 1), "1.0 GiB");
        assert_eq!(human_bytes(3 << 30), "3.0 GiB");
    }
}
