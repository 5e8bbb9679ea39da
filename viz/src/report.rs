//! `wmhcct report`: load a report or profile, select contexts, print.

use std::io::Write;

use anyhow::{Context as _, Result};

use crate::cli::{Group, ReportArgs};
use crate::contexts::contexts;
use crate::input::load;
use crate::{report_json, report_text};

pub fn run(args: &ReportArgs) -> Result<()> {
    let name = args.file.display().to_string();
    let loaded = load(&args.file).with_context(|| name.clone())?;
    let mut list = contexts(&loaded.profile, &loaded.symbols);
    let focus = args.select.focus();
    list.sort(args.by);
    let out = if args.json {
        let v = report_json::render(
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
        let mut s = serde_json::to_string_pretty(&v).context("encoding JSON")?;
        s.push('\n');
        s
    } else {
        report_text::render(
            &loaded.profile,
            &list,
            args.top.unwrap_or(20),
            args.by,
            args.group,
            args.mpi_internal,
            focus.as_ref(),
        )
    };
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(()),
        // `wmhcct report … | head` is fine.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(e).context("<stdout>"),
    }
}
