//! `wmhcct`: run a program under the tracer, convert its profile to HDF5, report.

#[macro_use]
mod say;

mod cli;
mod contexts;
mod convert;
mod debug_file;
mod debug_link;
mod demangle;
mod diff;
mod elf_symbols;
mod export;
mod flame;
mod focus;
mod font;
mod forward;
mod h5child;
mod h5layout;
mod h5reply;
mod h5series;
mod input;
mod label;
mod legend;
mod limits;
mod markup;
mod merge;
mod mpi_internal;
mod output;
mod plot;
mod plot_columns;
mod plot_contexts;
mod plot_events;
mod plot_index;
mod plot_memory;
mod plot_ranks;
mod plot_sizes;
mod plot_title;
mod repeats;
mod report;
mod report_files;
mod report_json;
mod report_text;
mod run;
mod sanitizer;
mod seal;
mod short_name;
mod signal_name;
mod sites;
mod sizes;
mod slurm;
mod spool;
mod stacks;
mod sums;
mod symbol_sections;
mod symbolize;
mod timeline;
mod untraced;
mod workers;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let result = match &cli.command {
        cli::Command::Run(a) => run::run(a).map(|code| code.clamp(0, 255) as u8),
        cli::Command::Convert(a) => convert::run(a).map(|()| 0),
        cli::Command::Merge(a) => merge::run(a).map(|()| 0),
        cli::Command::Report(a) => report::run(a),
        cli::Command::Plot(a) => plot::run(a).map(|()| 0),
        cli::Command::Export(a) => export::run(a).map(|()| 0),
        cli::Command::Diff(a) => diff::run(a),
        cli::Command::Slurm(a) => slurm::run(a).map(|()| 0),
        cli::Command::ReadReport(a) => h5child::serve(a).map(|()| 0),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            let msg = format!("{e:#}").replace(['\n', '\r'], " ");
            say!("wmhcct: error: {msg}");
            ExitCode::from(1)
        }
    }
}
