//! `wmhcct export`: collapsed stacks or the report JSON.

use std::collections::{HashMap, HashSet};

use anyhow::{Context as _, Result};

use crate::cli::{ExportArgs, ExportFormat, SortKey};
use crate::contexts::{contexts, StackFrame};
use crate::input::load;
use crate::mpi_internal::owners;
use crate::stacks::{all_stacks, Stack};

/// A name usable in a folded line (`;` separates frames, newlines end lines).
fn clean(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            ';' => ':',
            '\n' | '\r' | '\t' => ' ',
            c => c,
        })
        .collect()
}

/// Collapsed stacks, root first, one line per distinct symbolised stack
/// (`a;b;c;malloc 1234`), in tree order; zero weights are left out, and
/// so are the stacks in `skip`.
pub fn folded(stacks: &[Stack], weight: SortKey, skip: &LeftOut) -> String {
    let mut order: Vec<String> = Vec::new();
    let mut sums: HashMap<String, u64> = HashMap::new();
    for (i, s) in stacks.iter().enumerate() {
        let w = match weight {
            SortKey::Count => s.count,
            SortKey::Bytes => s.bytes,
            SortKey::Leaked => s.leaked_bytes,
            SortKey::Peak => s.peak_live_bytes,
            SortKey::Temporary => s.temporary,
        };
        if w == 0 || skip.mpi.contains(&i) || skip.focus.contains(&i) {
            continue;
        }
        let key = s
            .names()
            .iter()
            .map(|n| clean(n))
            .collect::<Vec<_>>()
            .join(";");
        let e = sums.entry(key.clone()).or_insert_with(|| {
            order.push(key);
            0
        });
        *e = e.saturating_add(w);
    }
    let mut out = String::new();
    for k in order {
        out.push_str(&format!("{k} {}\n", sums[&k]));
    }
    out
}

/// The stacks (indices into [`all_stacks`]) the MPI library allocated for
/// itself, which a folded export of the leaks leaves out, and their live
/// bytes; and the stacks a focus leaves out.
#[derive(Default)]
pub struct LeftOut {
    mpi: HashSet<usize>,
    mpi_live_bytes: u64,
    focus: HashSet<usize>,
}

impl LeftOut {
    /// What `--weight leaked` leaves out without `--mpi-internal`: the
    /// stacks allocated inside MPI calls or on the MPI library's threads
    /// (`mpi_internal.rs`), which a job's report, taken in MPI_Finalize,
    /// shows as live.
    pub fn of(all: &[Stack], program: &str) -> LeftOut {
        let inner: Vec<Vec<StackFrame>> = all
            .iter()
            .map(|s| s.frames.iter().rev().cloned().collect())
            .collect();
        let refs: Vec<&[StackFrame]> = inner.iter().map(Vec::as_slice).collect();
        let mut skip = LeftOut::default();
        for (i, owner) in owners(&refs, program).into_iter().enumerate() {
            if owner.is_some() && !all[i].untraced {
                skip.mpi.insert(i);
                skip.mpi_live_bytes += all[i].leaked_bytes;
            }
        }
        skip
    }

    /// Leave out the stacks `out` picks too (and no longer count them
    /// among the MPI library's).
    fn leave_out(&mut self, all: &[Stack], out: impl Fn(&Stack) -> bool) {
        for (i, s) in all.iter().enumerate() {
            if out(s) {
                self.focus.insert(i);
                if self.mpi.remove(&i) {
                    self.mpi_live_bytes -= s.leaked_bytes;
                }
            }
        }
    }
}

pub fn run(args: &ExportArgs) -> Result<()> {
    if let Some(out) = &args.output {
        crate::output::refuse_input_as_output(out, std::slice::from_ref(&args.file))?;
    }
    let name = crate::spool::name(&args.file);
    let loaded = load(&args.file).with_context(|| name.clone())?;
    let focus = args.select.focus();
    let text = match args.format {
        ExportFormat::Folded => {
            let stacks = all_stacks(&loaded.profile, &loaded.symbols);
            // The MPI library is recognised over every stack, then the
            // focus leaves out the stacks not through it.
            let mut skip = if args.weight == SortKey::Leaked && !args.mpi_internal {
                LeftOut::of(&stacks, &loaded.profile.meta.program)
            } else {
                LeftOut::default()
            };
            if let Some(f) = &focus {
                skip.leave_out(&stacks, |s| !f.matches(&s.frames));
            }
            if skip.mpi_live_bytes > 0 {
                say!(
                    "wmhcct: left out {} stacks with {} bytes live that the MPI library \
                     allocated for itself (--mpi-internal keeps them)",
                    skip.mpi.len(),
                    skip.mpi_live_bytes
                );
            }
            folded(&stacks, args.weight, &skip)
        }
        ExportFormat::Json => {
            let list = contexts(&loaded.profile, &loaded.symbols);
            let v = crate::report_json::render(
                &loaded.profile,
                loaded.format_version,
                &list,
                None,
                focus.as_ref(),
                None,
            );
            let mut s = serde_json::to_string_pretty(&v).context("encoding JSON")?;
            s.push('\n');
            s
        }
    };
    crate::output::emit(&text, args.output.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_cleaned() {
        assert_eq!(clean("a;b\nc"), "a:b c");
    }
}
