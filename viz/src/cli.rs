//! Command-line interface of `wmhcct`.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::focus::Focus;

#[derive(Parser, Debug)]
#[command(
    name = "wmhcct",
    version,
    about = "Memory-allocation tracing with hot calling context trees"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a command under the tracer (LD_PRELOAD=libwmhcct.so).
    Run(RunArgs),
    /// Convert profile(s) written by the tracer into an HDF5 report.
    Convert(ConvertArgs),
    /// Merge per-rank profiles (a spill directory, or profile files) into
    /// one job report: for ranks that never reached MPI_Finalize.
    Merge(MergeArgs),
    /// Print a report (HDF5 report or raw profile) as text or JSON.
    Report(ReportArgs),
    /// Draw the report's plots (memory over time, event density, hottest
    /// contexts, peak per rank, allocation sizes, flame graph) into a
    /// directory, with an index.html showing them and the text report;
    /// --focus and --ignore narrow the hottest-contexts plot (and the
    /// page's context list) only.
    Plot(PlotArgs),
    /// Export a report as collapsed stacks (flamegraph.pl, inferno,
    /// speedscope) or as the report JSON.
    Export(ExportArgs),
    /// Compare two reports: totals, peak, and the contexts that changed most.
    Diff(DiffArgs),
    /// Print (or write with -o) a Slurm batch script that runs an MPI
    /// application under the tracer, then merges spill files and plots.
    Slurm(crate::slurm::SlurmArgs),
    /// Internal: read an HDF5 file without a seal for the wmhcct process
    /// that started this one (viz/src/h5child.rs). Not listed in --help.
    #[command(name = crate::h5child::SUBCOMMAND, hide = true)]
    ReadReport(crate::h5child::ReadReportArgs),
}

/// `--focus` and `--ignore`, for `report`, `plot`, `export` and `diff`.
#[derive(clap::Args, Debug)]
pub struct FocusArgs {
    /// Only the contexts whose stack passes through a frame naming TEXT:
    /// in its function, source file or module file name, any case
    /// (repeatable: any of them). `report` and `diff` also give their sums.
    #[arg(long, value_name = "TEXT", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub focus: Vec<String>,
    /// Leave out the contexts whose stack passes through a frame naming
    /// TEXT, as --focus names them (repeatable: any of them); with --focus,
    /// of the contexts through it.
    #[arg(long, value_name = "TEXT", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub ignore: Vec<String>,
}

impl FocusArgs {
    /// `None` when neither option is given.
    pub fn focus(&self) -> Option<Focus> {
        Focus::new(&self.focus, &self.ignore)
    }
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlotFormat {
    Png,
    Svg,
    Both,
}

#[derive(clap::Args, Debug)]
pub struct PlotArgs {
    /// An HDF5 report or a raw profile; `-` reads it from standard input.
    pub file: PathBuf,
    /// Directory for the plot files (created if missing).
    #[arg(long)]
    pub out_dir: PathBuf,
    /// Image format (the flame graph is always SVG).
    #[arg(long, value_enum, default_value = "both")]
    pub format: PlotFormat,
    /// Contexts in the hottest-contexts plot (at least 1).
    #[arg(long, default_value_t = 10, value_parser = at_least_one)]
    pub top: usize,
    /// Show the contexts allocated inside MPI calls (the MPI library's own
    /// allocations) in the hottest-contexts plot too; left out by default,
    /// as in `report`, with their sum under the bars.
    #[arg(long)]
    pub mpi_internal: bool,
    /// The hottest-contexts plot shows the allocating functions, source
    /// lines or modules instead, each with the sums of its contexts (as `report
    /// --group`).
    #[arg(long, value_enum, default_value = "context")]
    pub group: Group,
    #[command(flatten)]
    pub select: FocusArgs,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    /// Collapsed stacks: `root;…;caller;malloc WEIGHT` per line.
    Folded,
    /// The report JSON (as `wmhcct report --json`).
    Json,
}

#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    /// An HDF5 report or a raw profile; `-` reads it from standard input.
    pub file: PathBuf,
    #[arg(long, value_enum)]
    pub format: ExportFormat,
    /// Weight of a folded stack (stacks of weight 0 are left out, so
    /// `leaked` and `peak` give flame graphs of the leaks and of the peak).
    #[arg(long, value_enum, default_value = "bytes")]
    pub weight: SortKey,
    /// With `--weight leaked`, keep the stacks allocated inside MPI calls
    /// (the MPI library's own memory, live when a job's report is taken in
    /// MPI_Finalize); left out by default, as in `report --by leaked`.
    #[arg(long)]
    pub mpi_internal: bool,
    #[command(flatten)]
    pub select: FocusArgs,
    /// Output file (default, or `-`: standard output).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct DiffArgs {
    /// The reference report (`-`: standard input, for one of the two).
    pub a: PathBuf,
    /// The report compared with it.
    pub b: PathBuf,
    /// Changed contexts (or, with --group, functions, lines or modules) to
    /// list.
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    /// Machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Compare each calling context (matched by its stack's function
    /// names), or the contexts summed by the function, source line or
    /// module that allocates, as `report --group` (matched by function
    /// name, and line, or by the module's file name).
    #[arg(long, value_enum, default_value = "context")]
    pub group: Group,
    /// List the contexts allocated inside MPI calls too: the MPI library's
    /// own allocations (MPI_Init's start-up, its threads'), which grow
    /// with a job's ranks. Left out of the list by default, as in
    /// `report`, and summed in one line.
    #[arg(long)]
    pub mpi_internal: bool,
    #[command(flatten)]
    pub select: FocusArgs,
    /// Exit with status 3 when B's FIGURE grew past LIMIT over A's
    /// (repeatable): FIGURE is peak (the heap's; a job's largest rank's),
    /// resident (VmHWM; a job's largest rank's), live (bytes live at the
    /// end), leaked (those less the MPI library's own, allocated inside MPI
    /// calls), count (allocation calls), bytes (allocated) or temporary;
    /// LIMIT an amount (`512KiB`, `1.5GiB`, `1000` calls) or a percentage
    /// of A (`5%`). Whole-report figures: --focus does not narrow them.
    #[arg(long = "max-increase", value_name = "FIGURE=LIMIT", value_parser = crate::limits::parse_increase)]
    pub max_increase: Vec<crate::limits::Limit>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortKey {
    /// Allocation calls.
    Count,
    /// Bytes allocated.
    Bytes,
    /// Bytes still allocated at the end (leaks).
    Leaked,
    /// Bytes live at the heap's peak (what made the peak).
    Peak,
    /// Temporary allocations: blocks freed before their thread allocated
    /// or freed anything else (allocation churn).
    Temporary,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// Each calling context.
    Context,
    /// Each allocating function, with the sums of its contexts.
    Function,
    /// Each allocating source line (call site), with the sums of its
    /// contexts.
    Line,
    /// Each module (the program, or a library) whose code allocates, with
    /// the sums of its contexts.
    Module,
}

impl Group {
    /// The value as given on the command line (and in the JSON).
    pub fn name(self) -> &'static str {
        match self {
            Group::Context => "context",
            Group::Function => "function",
            Group::Line => "line",
            Group::Module => "module",
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Output report path (WMHCCT_OUT).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Hotness threshold φ (WMHCCT_PHI).
    #[arg(long)]
    pub phi: Option<f64>,
    /// Space-Saving error ε (WMHCCT_EPSILON).
    #[arg(long)]
    pub epsilon: Option<f64>,
    /// Unwinding mode (WMHCCT_UNWIND).
    #[arg(long)]
    pub unwind: Option<String>,
    /// Keep every calling context (WMHCCT_EXACT=1).
    #[arg(long)]
    pub exact: bool,
    /// Who records events: the thread that made them, or a collector
    /// thread (WMHCCT_COLLECTOR; `thread` pays off with a spare core,
    /// `auto`, the default, starts it only where there is one).
    #[arg(long, value_parser = ["auto", "inline", "thread"])]
    pub collector: Option<String>,
    /// Path of libwmhcct.so (default: WMHCCT_LIB, else next to this executable).
    #[arg(long)]
    pub lib: Option<PathBuf>,
    /// The command to trace and its arguments.
    #[arg(trailing_var_arg = true, required = true, num_args = 1..)]
    pub command: Vec<std::ffi::OsString>,
}

#[derive(clap::Args, Debug)]
pub struct ConvertArgs {
    /// Profile file(s) written by the tracer (`-`: one from standard input).
    #[arg(required = true, num_args = 1..)]
    pub profiles: Vec<PathBuf>,
    /// Output HDF5 report (`-`: standard output; a link is written
    /// through, `/dev/null` or a FIFO written into).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Delete the input profile(s) after a successful conversion.
    #[arg(long)]
    pub remove_input: bool,
}

#[derive(clap::Args, Debug)]
pub struct MergeArgs {
    /// Spill directories (every `*.wmprof` in them) and/or profile files
    /// (`-`: one from standard input).
    #[arg(required = true, num_args = 1..)]
    pub inputs: Vec<PathBuf>,
    /// Output HDF5 report (`-`: standard output; a link is written
    /// through, `/dev/null` or a FIFO written into).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Delete the input profiles after a successful merge.
    #[arg(long)]
    pub remove_input: bool,
}

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// An HDF5 report or a raw profile; `-` reads it from standard input.
    pub file: PathBuf,
    /// Number of contexts (or, with --group, functions, lines or modules) to list
    /// (default: 20 for text, all for JSON).
    #[arg(long)]
    pub top: Option<usize>,
    /// Machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Order of the contexts (MPI call contexts: by count, or by bytes
    /// sent with `bytes`); by `leaked`, `peak` or `temporary` the text lists
    /// only the contexts that have some, and these views also list the
    /// contexts below the hotness threshold that hold at least phi of the
    /// whole heap's figure, marked `cold`.
    #[arg(long, value_enum, default_value = "count")]
    pub by: SortKey,
    /// What the list sums: each calling context, or the contexts by where
    /// they allocate, their innermost frame that is not an allocator
    /// wrapper or library internals: its function, line or module (MPI
    /// call contexts stay listed one by one).
    #[arg(long, value_enum, default_value = "context")]
    pub group: Group,
    /// List the contexts allocated inside MPI calls too: the MPI library's
    /// own allocations (MPI_Init's start-up, its threads'), which a job's
    /// report (taken in MPI_Finalize, before the library frees them) also
    /// shows as live. Left out of the list by default and summed in one
    /// line.
    #[arg(long)]
    pub mpi_internal: bool,
    #[command(flatten)]
    pub select: FocusArgs,
    /// Exit with status 3 when the report's FIGURE is above LIMIT
    /// (repeatable): FIGURE is peak (the heap's; a job's largest rank's),
    /// resident (VmHWM; a job's largest rank's), live (bytes live at the
    /// end), leaked (those less the MPI library's own, allocated inside MPI
    /// calls), count (allocation calls), bytes (allocated) or temporary;
    /// LIMIT an amount (`512MiB`, `1.5GiB`, `1000` calls). Whole-report
    /// figures: --focus does not narrow them.
    #[arg(long = "max", value_name = "FIGURE=LIMIT", value_parser = crate::limits::parse_budget)]
    pub max: Vec<crate::limits::Limit>,
}

/// clap's parser for a count of at least 1 (`plot --top 0` used to draw
/// one bar without a word).
fn at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("give at least 1".to_string()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}
