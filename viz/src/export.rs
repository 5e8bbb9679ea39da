//! `wmhcct export`: collapsed stacks or the report JSON.

use std::collections::HashMap;

use anyhow::{Context as _, Result};
use wmhcct_format::Profile;

use crate::cli::{ExportArgs, ExportFormat, SortKey};
use crate::contexts::contexts;
use crate::input::load;
use crate::stacks::all_stacks;
use crate::symbolize::Symbols;

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
/// (`a;b;c;malloc 1234`), in tree order; zero weights are left out.
pub fn folded(p: &Profile, syms: &Symbols, weight: SortKey) -> String {
    let mut order: Vec<String> = Vec::new();
    let mut sums: HashMap<String, u64> = HashMap::new();
    for s in all_stacks(p, syms) {
        let w = match weight {
            SortKey::Count => s.count,
            SortKey::Bytes => s.bytes,
            SortKey::Leaked => s.leaked_bytes,
            SortKey::Peak => s.peak_live_bytes,
        };
        if w == 0 {
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

pub fn run(args: &ExportArgs) -> Result<()> {
    let name = args.file.display().to_string();
    let loaded = load(&args.file).with_context(|| name.clone())?;
    let text = match args.format {
        ExportFormat::Folded => folded(&loaded.profile, &loaded.symbols, args.weight),
        ExportFormat::Json => {
            let list = contexts(&loaded.profile, &loaded.symbols);
            let v = crate::report_json::render(&loaded.profile, loaded.format_version, &list, None);
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
