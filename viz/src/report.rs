//! `wmhcct report`: load a report or profile, select contexts, print.

use anyhow::{Context as _, Result};

use crate::cli::{Group, ReportArgs};
use crate::contexts::contexts;
use crate::input::load;
use crate::{limits, report_json, report_text};

/// Prints the report; the exit status: 0, or [`limits::EXCEEDED`].
pub fn run(args: &ReportArgs) -> Result<u8> {
    let name = crate::spool::name(&args.file);
    let loaded = load(&args.file).with_context(|| name.clone())?;
    let mut list = contexts(&loaded.profile, &loaded.symbols, args.by);
    let checked = limits::check_budget(
        &args.max,
        &limits::Report {
            profile: &loaded.profile,
            symbols: &loaded.symbols,
            contexts: Some(&list),
            name: &name,
        },
    )?;
    let focus = args.select.focus();
    list.sort(args.by);
    if args.json {
        let mut doc = report_json::render(
            &loaded.profile,
            loaded.format_version,
            &list,
            args.top,
            focus.as_ref(),
            (args.group != Group::Context).then_some(report_json::SitesOf {
                group: args.group,
                by: args.by,
                mpi_internal: args.mpi_internal,
            }),
        );
        if !checked.is_empty() {
            doc.insert("limits", limits::to_json(&checked));
        }
        crate::output::emit_with(None, |w| report_json::write(w, &doc))?;
    } else {
        let mut s = report_text::render(
            &loaded.profile,
            &list,
            args.top.unwrap_or(20),
            args.by,
            args.group,
            args.mpi_internal,
            focus.as_ref(),
        );
        if !checked.is_empty() {
            s.push_str(&limits::render(&checked));
        }
        crate::output::emit(&s, None)?;
    }
    Ok(limits::status(&checked))
}
