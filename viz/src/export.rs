//! `wmhcct export`: collapsed stacks or the report JSON.

use std::collections::HashMap;

use anyhow::{Context as _, Result};

use crate::cli::{ExportArgs, ExportFormat, SortKey};
use crate::contexts::contexts;
use crate::input::load;
use crate::mpi_internal::Owners;
use crate::stacks::{stacks, Stack};

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
/// so are the stacks `skip` picks. Stacks are taken one at a time, and each
/// line's text is held once.
pub fn folded(
    stacks: impl Iterator<Item = Stack>,
    weight: SortKey,
    mut skip: impl FnMut(&Stack) -> bool,
) -> String {
    // Line → (its place in tree order, its weight).
    let mut lines: HashMap<String, (usize, u64)> = HashMap::new();
    for s in stacks {
        let w = match weight {
            SortKey::Count => s.count,
            SortKey::Bytes => s.bytes,
            SortKey::Leaked => s.leaked_bytes,
            SortKey::Peak => s.peak_live_bytes,
            SortKey::Temporary => s.temporary,
        };
        if w == 0 || skip(&s) {
            continue;
        }
        let key = s
            .names()
            .iter()
            .map(|n| clean(n))
            .collect::<Vec<_>>()
            .join(";");
        let next = lines.len();
        let e = lines.entry(key).or_insert((next, 0));
        e.1 = e.1.saturating_add(w);
    }
    let mut ordered: Vec<(String, (usize, u64))> = lines.into_iter().collect();
    ordered.sort_unstable_by_key(|(_, (place, _))| *place);
    let mut out = String::new();
    for (k, (_, w)) in ordered {
        out.push_str(&format!("{k} {w}\n"));
    }
    out
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
            let (p, syms) = (&loaded.profile, &loaded.symbols);
            // `--weight leaked` leaves out, without `--mpi-internal`, the
            // stacks allocated inside MPI calls or on the MPI library's
            // threads (`mpi_internal.rs`), which a job's report, taken in
            // MPI_Finalize, shows as live. They are recognised over every
            // stack: a first pass learns them all.
            let mut owners = (args.weight == SortKey::Leaked && !args.mpi_internal).then(|| {
                let mut o = Owners::new(&p.meta.program);
                for s in stacks(p, syms) {
                    o.learn(&s.innermost_first());
                }
                o
            });
            // The MPI library's stacks left out that hold live bytes, and
            // those bytes (the focus's leave-outs not among them).
            let (mut held, mut held_bytes) = (0usize, 0u64);
            let text = folded(stacks(p, syms), args.weight, |s| {
                if focus.as_ref().is_some_and(|f| !f.matches(&s.frames)) {
                    return true;
                }
                let mpi = !s.untraced
                    && owners
                        .as_mut()
                        .is_some_and(|o| o.of(&s.innermost_first()).is_some());
                if mpi && s.leaked_bytes > 0 {
                    held += 1;
                    held_bytes += s.leaked_bytes;
                }
                mpi
            });
            if held_bytes > 0 {
                say!(
                    "wmhcct: left out {held} stacks with {held_bytes} bytes live that the MPI \
                     library allocated for itself (--mpi-internal keeps them)"
                );
            }
            text
        }
        ExportFormat::Json => {
            let list = contexts(&loaded.profile, &loaded.symbols, SortKey::Count);
            let doc = crate::report_json::render(
                &loaded.profile,
                loaded.format_version,
                &list,
                None,
                focus.as_ref(),
                None,
            );
            return crate::output::emit_with(args.output.as_deref(), |w| {
                crate::report_json::write(w, &doc)
            });
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
