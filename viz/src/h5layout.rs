//! The HDF5 report: one layout shared by the writer (`wmhcct convert`) and the
//! reader (`wmhcct report`). docs/report-layout.md documents it for h5py users.
//!
//! The root attribute `format_version` is written first and `node_count` last;
//! the reader insists on both, so an interrupted conversion is detected.

use std::collections::HashMap;
use std::path::Path;
use std::str::FromStr;

use hdf5::types::VarLenUnicode;
use hdf5::{File, Group, H5Type, Location};
use rustc_hash::FxBuildHasher;
use wmhcct_format::{
    Config, FrameKey, HeapStats, KindTotal, Meta, Module, Node, NodeSpread, Profile, RankSummary,
    Resident, Spread, TracerStats, Tree, UnwindStats, NO_PARENT,
};

use crate::seal::Seal;
use crate::symbolize::{Frame, Symbols};

/// Version of this HDF5 layout (root attribute `format_version`). Layout
/// 1 (before 2026-11-25) held each frame's strings in its row; layout 2
/// holds them once, in the tree's `strings`, and the rows index them.
/// Layout 3 (2026-11-26) adds the temporary allocations: the heap's
/// `temporary_count`/`temporary_bytes`, each tree's `temporary` and
/// `ranks/temporary`. All three are read; an older report has no
/// temporaries (read as 0). Layout 4 (2026-11-26) adds the resident
/// memory: the `resident` group's attributes and `ranks/resident`; older
/// reports read as not known (0).
pub const REPORT_VERSION: u32 = 4;
/// The oldest layout this build reads.
pub const OLDEST_READ_VERSION: u32 = 1;

/// `nodes.key_type` values.
pub const KEY_ROOT: u8 = 0;
pub const KEY_KIND: u8 = 1;
pub const KEY_ADDR: u8 = 2;
pub const KEY_UNKNOWN: u8 = 3;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{what}")]
    Hdf5 {
        what: String,
        #[source]
        source: hdf5::Error,
    },
    #[error("HDF5 file is not a wmhcct report (no format_version attribute)")]
    NotOurs,
    #[error(
        "report layout version {found}, this build reads versions {OLDEST_READ_VERSION} to {REPORT_VERSION}"
    )]
    Version { found: u32 },
    #[error("truncated or corrupt report: {0}")]
    Corrupt(String),
    /// The child process reading an unsealed file died by a signal.
    #[error("damaged or unreadable HDF5 file (the HDF5 library crashed reading it: {0})")]
    Crashed(String),
    /// The child process reading an unsealed file was killed after the limit.
    #[error("damaged or unreadable HDF5 file (the HDF5 library did not finish reading it in {secs} s; WMHCCT_READ_TIMEOUT sets the limit)")]
    TimedOut { secs: u64 },
    /// Any other failure reported by the child process, as it worded it.
    #[error("{0}")]
    Reader(String),
    /// The child process could not be run, or answered something unreadable.
    #[error("isolated HDF5 reader: {0}")]
    Isolation(String),
}

pub(crate) type Result<T> = std::result::Result<T, ReportError>;

pub(crate) fn h5(what: impl Into<String>) -> impl FnOnce(hdf5::Error) -> ReportError {
    let what = what.into();
    move |source| ReportError::Hdf5 {
        what,
        source: plain_hdf5_error(source),
    }
}

/// libhdf5's error without its internals: the system error where it names
/// one (`errno = 28` → "No space left on device (os error 28)"), else its
/// text up to the file-driver details (`name = '…', tent_flags = …`,
/// `time = …, filename = …, file descriptor = …, buf = 0x…`).
fn plain_hdf5_error(e: hdf5::Error) -> hdf5::Error {
    let text = e.to_string();
    if let Some(n) = text
        .split("errno = ")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|d| d.parse::<i32>().ok())
        .filter(|&n| n > 0)
    {
        return hdf5::Error::Internal(std::io::Error::from_raw_os_error(n).to_string());
    }
    match [", time = ", ": name = '", ", name = '"]
        .iter()
        .filter_map(|cut| text.find(cut))
        .min()
    {
        Some(at) => hdf5::Error::Internal(text[..at].to_string()),
        None => e,
    }
}

/// A string read from a report: its bytes as UTF-8, any invalid sequence
/// replaced by U+FFFD. (`VarLenUnicode::as_str` does not check them: a
/// damaged or foreign file's bytes became a `String` that was not UTF-8,
/// which read in this process and failed in the isolated reader's answer.)
fn text(s: &VarLenUnicode) -> String {
    String::from_utf8_lossy(s.as_bytes()).into_owned()
}

pub(crate) fn vstr(s: &str) -> VarLenUnicode {
    let clean: String = s.chars().filter(|&c| c != '\0').collect();
    VarLenUnicode::from_str(&clean).unwrap_or_default()
}

#[derive(H5Type, Clone, Debug)]
#[repr(C)]
struct TotalRow {
    kind: VarLenUnicode,
    count: u64,
    bytes: u64,
}

#[derive(H5Type, Clone, Debug)]
#[repr(C)]
struct ModuleRow {
    path: VarLenUnicode,
    build_id: VarLenUnicode,
    bias: u64,
    start: u64,
    end: u64,
}

/// Packed in memory as in the file (`put_rows`): HDF5 then writes the rows
/// as they are instead of converting each member of each row, a fifth of
/// the time the largest table took (the stress benchmark's 41 000 rows:
/// 8 ms instead of 10). A packed row's members are read by copy.
#[derive(H5Type, Clone, Copy, Debug)]
#[repr(C, packed)]
struct NodeRow {
    parent: u32,
    key_type: u8,
    module: u32,
    addr: u64,
    count: u64,
    count_err: u64,
    bytes: u64,
    bytes_err: u64,
    live_bytes: u64,
    peak_live_bytes: u64,
    flags: u8,
}

/// A frame of layout 1: its strings in the row.
#[derive(H5Type, Clone, Debug)]
#[repr(C)]
struct FrameRow {
    function: VarLenUnicode,
    file: VarLenUnicode,
    line: u32,
}

/// A frame of layout 2: rows of the tree's `strings`.
#[derive(H5Type, Clone, Copy, Debug)]
#[repr(C)]
struct FrameIndexRow {
    function: u32,
    file: u32,
    line: u32,
}

/// Each distinct string once, row 0 the empty one.
struct StringTable {
    rows: Vec<VarLenUnicode>,
    index: std::collections::HashMap<String, u32>,
}

impl StringTable {
    fn new() -> StringTable {
        StringTable {
            rows: vec![vstr("")],
            index: [(String::new(), 0)].into(),
        }
    }

    /// `s`'s row, added on its first use.
    fn of(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.rows.len() as u32;
        self.rows.push(vstr(s));
        self.index.insert(s.to_string(), i);
        i
    }
}

#[derive(H5Type, Clone, Copy, Debug)]
#[repr(C)]
struct SpreadRow {
    count_min: u64,
    count_max: u64,
    count_sum: u64,
    count_max_rank: u32,
    count_present: u32,
    bytes_min: u64,
    bytes_max: u64,
    bytes_sum: u64,
    bytes_max_rank: u32,
    bytes_present: u32,
}

#[derive(H5Type, Clone, Debug)]
#[repr(C)]
struct RankRow {
    rank: u32,
    hostname: VarLenUnicode,
    pid: u32,
    reason: VarLenUnicode,
    threads: u32,
    peak_bytes: u64,
    live_bytes: u64,
    live_blocks: u64,
    evicted_live_bytes: u64,
    evicted_peak_bytes: u64,
    unknown_frees: u64,
    peak_time_ns: u64,
    unwind_mode: VarLenUnicode,
    unwind_events: u64,
    frames_unwound: u64,
    frames_reused: u64,
    validated: u64,
    correct: u64,
    reseeds: u64,
    truncated: u64,
    errors: u64,
    collector_bytes: u64,
    ptr_table_peak: u64,
    untraced_events: u64,
}

/// A rank's resident memory (`ranks/resident`, one row per `ranks/summary`
/// row).
#[derive(H5Type, Clone, Copy, Debug)]
#[repr(C)]
struct RankResidentRow {
    peak_bytes: u64,
    end_bytes: u64,
    tracer_peak_bytes: u64,
}

impl From<&Resident> for RankResidentRow {
    fn from(r: &Resident) -> Self {
        RankResidentRow {
            peak_bytes: r.peak_bytes,
            end_bytes: r.end_bytes,
            tracer_peak_bytes: r.tracer_peak_bytes,
        }
    }
}

impl From<RankResidentRow> for Resident {
    fn from(r: RankResidentRow) -> Self {
        Resident {
            peak_bytes: r.peak_bytes,
            end_bytes: r.end_bytes,
            tracer_peak_bytes: r.tracer_peak_bytes,
        }
    }
}

/// A rank's temporary allocations (`ranks/temporary`, one row per
/// `ranks/summary` row).
#[derive(H5Type, Clone, Copy, Debug)]
#[repr(C)]
struct RankTemporaryRow {
    count: u64,
    bytes: u64,
}

#[derive(H5Type, Clone, Debug)]
#[repr(C)]
struct RankTotalRow {
    rank_index: u32,
    kind: VarLenUnicode,
    count: u64,
    bytes: u64,
}

// ---------------------------------------------------------------- writing

pub(crate) fn put<T: H5Type>(loc: &Location, name: &str, v: &T) -> Result<()> {
    loc.new_attr::<T>()
        .shape(())
        .create(name)
        .and_then(|a| a.write_scalar(v))
        .map_err(h5(format!("writing attribute {name}")))
}

pub(crate) fn put_str(loc: &Location, name: &str, v: &str) -> Result<()> {
    put(loc, name, &vstr(v))
}

/// Size from which a dataset is stored compressed (shuffle + deflate, which
/// h5py, h5dump and every HDF5 reader undo by themselves): a report's large
/// tables (nodes, spread, samples) shrink 3–6×; small ones stay
/// contiguous.
const COMPRESS_FROM_BYTES: usize = 64 << 10;
/// Bytes per chunk of a compressed dataset.
const CHUNK_BYTES: usize = 256 << 10;

/// A table of rows `T`. In the file a row has no padding (HDF5 packs the
/// compound type and converts on writing; readers convert by member name):
/// written as laid out in memory, a row carried its padding bytes, whatever
/// the converter's heap held there, into the report (a `nodes` row 14 of
/// 80 bytes), which made reports differ from run to run and compress worse
/// (a report of the stress benchmark: 818 KB, 513 KB packed).
pub(crate) fn put_rows<T: H5Type>(g: &Group, name: &str, rows: &[T]) -> Result<()> {
    let row = std::mem::size_of::<T>().max(1);
    let mut b = g.new_dataset::<T>().packed(true);
    if rows.len() * row >= COMPRESS_FROM_BYTES {
        b = b
            .chunk((CHUNK_BYTES / row).clamp(1, rows.len()))
            .shuffle()
            .deflate(1);
    }
    let ds = b
        .shape(rows.len())
        .create(name)
        .map_err(h5(format!("creating dataset {name}")))?;
    if !rows.is_empty() {
        ds.write_raw(rows)
            .map_err(h5(format!("writing dataset {name}")))?;
    }
    Ok(())
}

pub(crate) fn group(parent: &Group, name: &str) -> Result<Group> {
    parent
        .create_group(name)
        .map_err(h5(format!("creating group {name}")))
}

/// HDF5 group name of tree `i`: its own name when that is a plain word.
fn tree_group_name(i: usize, name: &str) -> String {
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if plain {
        name.to_string()
    } else {
        format!("tree{i}")
    }
}

/// Number of rows written to the `nodes` datasets of all trees.
fn node_count(p: &Profile) -> u64 {
    p.trees.iter().map(|t| t.nodes.len() as u64).sum()
}

/// The number of ranks a profile describes (1 for a single process).
pub fn rank_count(p: &Profile) -> u32 {
    p.ranks.len().max(1) as u32
}

/// We only read finished reports and write fresh files: HDF5's file locks
/// add nothing, fail on some parallel file systems (Lustre, NFS), and, as
/// HDF5 opens files without `O_CLOEXEC`, a child process started while a
/// file is open keeps its lock and makes the next open of that file fail.
/// So every file is opened with locking off in its access property list.
/// HDF5 still lets `HDF5_USE_FILE_LOCKING` override that, so a user who
/// wants locks gets them. (Setting that variable ourselves does not work:
/// HDF5 reads it once, when its file package starts, which may be before.)
fn builder() -> hdf5::FileBuilder {
    let mut b = File::with_options();
    b.with_fapl(|p| p.file_locking(false));
    b
}

/// Create (truncating) an HDF5 file at `path`, without file locks.
pub(crate) fn create_file(path: &Path) -> hdf5::Result<File> {
    by_name(path, true, |p| builder().create(p))
}

/// Open an HDF5 file at `path` read-only, without file locks.
pub(crate) fn open_file(path: &Path) -> hdf5::Result<File> {
    by_name(path, false, |p| builder().open(p))
}

/// `f` on `path`; a path that is not UTF-8 (which libhdf5's Rust binding
/// refuses) is opened here (`create`: made or truncated) and given to `f`
/// as this process's descriptor, `/proc/self/fd/<n>`, which libhdf5 opens
/// again. Until 2026-11-27 such a report could be written but not read.
fn by_name(
    path: &Path,
    create: bool,
    f: impl FnOnce(&Path) -> hdf5::Result<File>,
) -> hdf5::Result<File> {
    if path.to_str().is_some() {
        return f(path);
    }
    use std::os::fd::AsRawFd as _;
    let opened = if create {
        std::fs::File::create(path)
    } else {
        std::fs::File::open(path)
    }
    .map_err(|e| hdf5::Error::Internal(format!("{}: {e}", path.display())))?;
    f(Path::new(&format!("/proc/self/fd/{}", opened.as_raw_fd())))
}

/// [`write_then_name`] with the symbols at hand.
#[cfg(test)]
pub fn write(path: &Path, p: &Profile, syms: &Symbols) -> Result<()> {
    write_then_name(path, p, || Ok(syms))
}

/// Write `profile` with its symbols as an HDF5 report at `path`
/// (truncating), asking for the symbols only once everything that does not
/// name a frame is written: `wmhcct convert` symbolises on another thread
/// meanwhile (`convert::write_report`). The frame tables come last in each
/// tree's group; a reader finds every dataset by its name.
pub fn write_then_name<'s>(
    path: &Path,
    p: &Profile,
    syms: impl FnOnce() -> Result<&'s Symbols>,
) -> Result<()> {
    let f = create_file(path).map_err(h5("creating file"))?;
    put(&f, "format_version", &REPORT_VERSION)?;
    write_meta(&f, &p.meta)?;
    put(&f, "ranks", &rank_count(p))?;

    let g = group(&f, "config")?;
    put(&g, "phi", &p.config.phi)?;
    put(&g, "epsilon", &p.config.epsilon)?;
    put_str(&g, "unwind", &p.config.unwind)?;
    put(&g, "max_depth", &p.config.max_depth)?;
    put(&g, "exact", &(p.config.exact as u8))?;
    put(&g, "bins", &p.config.bins)?;
    put(&g, "rank_series", &p.config.rank_series)?;
    put(&g, "event_samples", &p.config.event_samples)?;

    put_rows(&f, "totals", &totals_rows(&p.totals))?;
    write_heap(&group(&f, "heap")?, &p.heap)?;
    write_unwind(&group(&f, "unwind")?, &p.unwind)?;
    write_tracer(&group(&f, "tracer")?, &p.tracer)?;
    write_resident(&group(&f, "resident")?, &p.resident)?;

    let modules: Vec<ModuleRow> = p
        .modules
        .iter()
        .map(|m| ModuleRow {
            path: vstr(&m.path),
            build_id: vstr(&m.build_id),
            bias: m.bias,
            start: m.start,
            end: m.end,
        })
        .collect();
    put_rows(&f, "modules", &modules)?;

    let trees = group(&f, "trees")?;
    let mut tree_groups = Vec::with_capacity(p.trees.len());
    for (i, t) in p.trees.iter().enumerate() {
        let g = group(&trees, &tree_group_name(i, &t.name))?;
        write_tree(&g, i, t)?;
        tree_groups.push(g);
    }
    if !p.ranks.is_empty() {
        write_ranks(&group(&f, "ranks")?, &p.ranks)?;
    }
    if let Some(s) = &p.series {
        crate::h5series::write(&group(&f, "series")?, s)?;
    }
    let syms = syms()?;
    for (t, g) in p.trees.iter().zip(&tree_groups) {
        write_frames(g, t, syms, crate::contexts::kinds_of(&t.name))?;
    }

    put(&f, "node_count", &node_count(p))?;
    // Flushed while every handle is open, so that a write that fails (a
    // full disk) is an error here: closed with a group still open, the
    // file was written when the last handle went, and an error then was
    // lost (until 2026-11-27 a report cut by a full disk was sealed and
    // announced as written).
    f.flush().map_err(h5("writing file"))?;
    drop(tree_groups);
    drop(trees);
    f.close().map_err(h5("closing file"))?;
    Ok(())
}

fn write_meta(f: &File, m: &Meta) -> Result<()> {
    put_str(f, "program", &m.program)?;
    let args: Vec<VarLenUnicode> = m.args.iter().map(|a| vstr(a)).collect();
    f.new_attr::<VarLenUnicode>()
        .shape(args.len())
        .create("args")
        .and_then(|a| a.write_raw(&args))
        .map_err(h5("writing attribute args"))?;
    put_str(f, "hostname", &m.hostname)?;
    put(f, "pid", &m.pid)?;
    put(f, "start_unix_ns", &m.start_unix_ns)?;
    put(f, "end_unix_ns", &m.end_unix_ns)?;
    put(f, "threads", &m.threads)?;
    if let Some(r) = m.rank {
        put(f, "rank", &r)?;
    }
    if let Some(n) = m.nranks {
        put(f, "nranks", &n)?;
    }
    put_str(f, "reason", &m.reason)?;
    put_str(f, "tracer_version", &m.tracer_version)
}

fn totals_rows(totals: &[KindTotal]) -> Vec<TotalRow> {
    totals
        .iter()
        .map(|t| TotalRow {
            kind: vstr(&t.kind),
            count: t.count,
            bytes: t.bytes,
        })
        .collect()
}

fn write_heap(g: &Group, h: &HeapStats) -> Result<()> {
    put(g, "peak_bytes", &h.peak_bytes)?;
    put(g, "live_bytes", &h.live_bytes)?;
    put(g, "live_blocks", &h.live_blocks)?;
    put(g, "evicted_live_bytes", &h.evicted_live_bytes)?;
    put(g, "evicted_peak_bytes", &h.evicted_peak_bytes)?;
    put(g, "unknown_frees", &h.unknown_frees)?;
    put(g, "peak_time_ns", &h.peak_time_ns)?;
    put(g, "temporary_count", &h.temporary_count)?;
    put(g, "temporary_bytes", &h.temporary_bytes)?;
    put_rows(g, "size_classes", &h.size_classes)
}

fn write_unwind(g: &Group, u: &UnwindStats) -> Result<()> {
    put_str(g, "mode", &u.mode)?;
    put(g, "events", &u.events)?;
    put(g, "frames_unwound", &u.frames_unwound)?;
    put(g, "frames_reused", &u.frames_reused)?;
    put(g, "validated", &u.validated)?;
    put(g, "correct", &u.correct)?;
    put(g, "reseeds", &u.reseeds)?;
    put(g, "truncated", &u.truncated)?;
    put(g, "errors", &u.errors)
}

fn write_tracer(g: &Group, t: &TracerStats) -> Result<()> {
    put(g, "collector_bytes", &t.collector_bytes)?;
    put(g, "ptr_table_peak", &t.ptr_table_peak)?;
    put(g, "untraced_events", &t.untraced_events)
}

fn write_resident(g: &Group, r: &Resident) -> Result<()> {
    put(g, "peak_bytes", &r.peak_bytes)?;
    put(g, "end_bytes", &r.end_bytes)?;
    put(g, "tracer_peak_bytes", &r.tracer_peak_bytes)
}

/// A tree's counts; its frame tables are [`write_frames`]'.
fn write_tree(g: &Group, index: usize, t: &Tree) -> Result<()> {
    put_str(g, "name", &t.name)?;
    put(g, "index", &(index as u32))?;
    put(g, "total_count", &t.total_count)?;
    put(g, "total_bytes", &t.total_bytes)?;
    put(g, "capacity", &t.capacity)?;
    if let Some((c, b)) = t.floor {
        put(g, "floor_count", &c)?;
        put(g, "floor_bytes", &b)?;
    }
    let nodes: Vec<NodeRow> = t.nodes.iter().map(node_row).collect();
    put_rows(g, "nodes", &nodes)?;
    let temporary: Vec<u64> = t.nodes.iter().map(|n| n.temporary).collect();
    put_rows(g, "temporary", &temporary)?;
    if !t.spread.is_empty() {
        let rows: Vec<SpreadRow> = t.spread.iter().map(spread_row).collect();
        put_rows(g, "spread", &rows)?;
    }
    Ok(())
}

/// A tree's frame of each node, as indices into its string table.
fn write_frames(g: &Group, t: &Tree, syms: &Symbols, kinds: &[&str]) -> Result<()> {
    let mut strings = StringTable::new();
    // A key's row once: most nodes share their return address with others
    // (a CP2K job's 230 000 nodes, ~45 000 keys), and each new look-up
    // copied its frame's names and hashed and compared them in full. The
    // strings still enter the table at their first use, in node order.
    let mut rows: HashMap<FrameKey, FrameIndexRow, FxBuildHasher> = HashMap::default();
    let frames: Vec<FrameIndexRow> = t
        .nodes
        .iter()
        .map(|n| {
            *rows.entry(n.key).or_insert_with(|| {
                let f = syms.frame_of(&n.key, kinds);
                FrameIndexRow {
                    function: strings.of(&f.function),
                    file: strings.of(&f.file),
                    line: f.line,
                }
            })
        })
        .collect();
    put_rows(g, "strings", &strings.rows)?;
    put_rows(g, "frames", &frames)
}

fn node_row(n: &Node) -> NodeRow {
    let (key_type, module, addr) = match n.key {
        FrameKey::Root => (KEY_ROOT, u32::MAX, 0),
        FrameKey::Kind(k) => (KEY_KIND, u32::MAX, k as u64),
        FrameKey::Addr { module, offset } => (KEY_ADDR, module, offset),
        FrameKey::Unknown(raw) => (KEY_UNKNOWN, u32::MAX, raw),
    };
    NodeRow {
        parent: n.parent,
        key_type,
        module,
        addr,
        count: n.count,
        count_err: n.count_err,
        bytes: n.bytes,
        bytes_err: n.bytes_err,
        live_bytes: n.live_bytes,
        peak_live_bytes: n.peak_live_bytes,
        flags: n.flags,
    }
}

fn spread_row(s: &NodeSpread) -> SpreadRow {
    SpreadRow {
        count_min: s.count.min,
        count_max: s.count.max,
        count_sum: s.count.sum,
        count_max_rank: s.count.max_rank,
        count_present: s.count.present,
        bytes_min: s.bytes.min,
        bytes_max: s.bytes.max,
        bytes_sum: s.bytes.sum,
        bytes_max_rank: s.bytes.max_rank,
        bytes_present: s.bytes.present,
    }
}

fn write_ranks(g: &Group, ranks: &[RankSummary]) -> Result<()> {
    let rows: Vec<RankRow> = ranks
        .iter()
        .map(|r| RankRow {
            rank: r.rank,
            hostname: vstr(&r.hostname),
            pid: r.pid,
            reason: vstr(&r.reason),
            threads: r.threads,
            peak_bytes: r.heap.peak_bytes,
            live_bytes: r.heap.live_bytes,
            live_blocks: r.heap.live_blocks,
            evicted_live_bytes: r.heap.evicted_live_bytes,
            evicted_peak_bytes: r.heap.evicted_peak_bytes,
            unknown_frees: r.heap.unknown_frees,
            peak_time_ns: r.heap.peak_time_ns,
            unwind_mode: vstr(&r.unwind.mode),
            unwind_events: r.unwind.events,
            frames_unwound: r.unwind.frames_unwound,
            frames_reused: r.unwind.frames_reused,
            validated: r.unwind.validated,
            correct: r.unwind.correct,
            reseeds: r.unwind.reseeds,
            truncated: r.unwind.truncated,
            errors: r.unwind.errors,
            collector_bytes: r.tracer.collector_bytes,
            ptr_table_peak: r.tracer.ptr_table_peak,
            untraced_events: r.tracer.untraced_events,
        })
        .collect();
    put_rows(g, "summary", &rows)?;
    let temporary: Vec<RankTemporaryRow> = ranks
        .iter()
        .map(|r| RankTemporaryRow {
            count: r.heap.temporary_count,
            bytes: r.heap.temporary_bytes,
        })
        .collect();
    put_rows(g, "temporary", &temporary)?;
    let resident: Vec<RankResidentRow> = ranks.iter().map(|r| (&r.resident).into()).collect();
    put_rows(g, "resident", &resident)?;
    let totals: Vec<RankTotalRow> = ranks
        .iter()
        .enumerate()
        .flat_map(|(i, r)| {
            r.totals.iter().map(move |t| RankTotalRow {
                rank_index: i as u32,
                kind: vstr(&t.kind),
                count: t.count,
                bytes: t.bytes,
            })
        })
        .collect();
    put_rows(g, "totals", &totals)
}

// ---------------------------------------------------------------- reading

pub(crate) fn get<T: H5Type>(loc: &Location, name: &str) -> Result<T> {
    let a = loc
        .attr(name)
        .map_err(|_| ReportError::Corrupt(format!("missing attribute {}{name}", prefix(loc))))?;
    a.read_scalar::<T>()
        .map_err(|e| ReportError::Corrupt(format!("attribute {}{name}: {e}", prefix(loc))))
}

pub(crate) fn get_opt<T: H5Type>(loc: &Location, name: &str) -> Result<Option<T>> {
    if loc
        .attr_names()
        .unwrap_or_default()
        .iter()
        .any(|n| n == name)
    {
        get(loc, name).map(Some)
    } else {
        Ok(None)
    }
}

pub(crate) fn get_str(loc: &Location, name: &str) -> Result<String> {
    get::<VarLenUnicode>(loc, name).map(|s| text(&s))
}

fn prefix(loc: &Location) -> String {
    let n = loc.name();
    if n == "/" || n.is_empty() {
        String::new()
    } else {
        format!("{}/", n.trim_start_matches('/'))
    }
}

pub(crate) fn open_group(parent: &Group, name: &str) -> Result<Group> {
    parent
        .group(name)
        .map_err(|_| ReportError::Corrupt(format!("missing group {name}")))
}

pub(crate) fn get_rows<T: H5Type>(g: &Group, name: &str) -> Result<Vec<T>> {
    let ds = g
        .dataset(name)
        .map_err(|_| ReportError::Corrupt(format!("missing dataset {}{name}", prefix(g))))?;
    ds.read_raw::<T>()
        .map_err(|e| ReportError::Corrupt(format!("dataset {}{name}: {e}", prefix(g))))
}

/// Read a report back into a profile and its symbol table.
///
/// A damaged report must never reach libhdf5 in this process (it can crash
/// or loop on one): a sealed report is checked and then read here; any
/// other HDF5 file (foreign, older, edited) is read by a child process
/// (`h5child`), which turns a crash or a hang into an error.
pub fn read(path: &Path) -> Result<(Profile, Symbols)> {
    match crate::seal::check(path)? {
        Seal::Intact => read_here(path),
        Seal::Absent => crate::h5child::read(path),
    }
}

/// Read a report with libhdf5 in this process. Only for a sealed file whose
/// seal was checked, or inside the child process of `h5child`.
pub(crate) fn read_here(path: &Path) -> Result<(Profile, Symbols)> {
    let f =
        open_file(path).map_err(|e| ReportError::Corrupt(format!("cannot open as HDF5: {e}")))?;
    if !f
        .attr_names()
        .unwrap_or_default()
        .iter()
        .any(|n| n == "format_version")
    {
        return Err(ReportError::NotOurs);
    }
    let version: u32 = get(&f, "format_version")?;
    if !(OLDEST_READ_VERSION..=REPORT_VERSION).contains(&version) {
        return Err(ReportError::Version { found: version });
    }
    let args: Vec<VarLenUnicode> = f
        .attr("args")
        .and_then(|a| a.read_raw())
        .map_err(|_| ReportError::Corrupt("missing attribute args".into()))?;
    let meta = Meta {
        program: get_str(&f, "program")?,
        args: args.iter().map(text).collect(),
        hostname: get_str(&f, "hostname")?,
        pid: get(&f, "pid")?,
        start_unix_ns: get(&f, "start_unix_ns")?,
        end_unix_ns: get(&f, "end_unix_ns")?,
        threads: get(&f, "threads")?,
        rank: get_opt(&f, "rank")?,
        nranks: get_opt(&f, "nranks")?,
        reason: get_str(&f, "reason")?,
        tracer_version: get_str(&f, "tracer_version")?,
        launch: String::new(),
    };
    let g = open_group(&f, "config")?;
    let config = Config {
        phi: get(&g, "phi")?,
        epsilon: get(&g, "epsilon")?,
        unwind: get_str(&g, "unwind")?,
        max_depth: get(&g, "max_depth")?,
        exact: get::<u8>(&g, "exact")? != 0,
        bins: get_opt(&g, "bins")?.unwrap_or(0),
        rank_series: get_opt(&g, "rank_series")?.unwrap_or(0),
        event_samples: get_opt(&g, "event_samples")?.unwrap_or(0),
    };
    let totals = get_rows::<TotalRow>(&f, "totals")?
        .into_iter()
        .map(|r| KindTotal {
            kind: text(&r.kind),
            count: r.count,
            bytes: r.bytes,
        })
        .collect();
    let heap = read_heap(&open_group(&f, "heap")?)?;
    let unwind = read_unwind(&open_group(&f, "unwind")?)?;
    let tracer = read_tracer(&open_group(&f, "tracer")?)?;
    // Absent before layout 4: not known.
    let resident = if f.link_exists("resident") {
        read_resident(&open_group(&f, "resident")?)?
    } else {
        Resident::default()
    };
    let modules = get_rows::<ModuleRow>(&f, "modules")?
        .into_iter()
        .map(|r| Module {
            path: text(&r.path),
            build_id: text(&r.build_id),
            bias: r.bias,
            start: r.start,
            end: r.end,
        })
        .collect();

    let mut symbols = Symbols::default();
    let trees_group = open_group(&f, "trees")?;
    let mut trees: Vec<(u32, Tree)> = Vec::new();
    for name in trees_group.member_names().map_err(h5("listing /trees"))? {
        let g = open_group(&trees_group, &name)?;
        trees.push((get(&g, "index")?, read_tree(&g, &mut symbols, version)?));
    }
    trees.sort_by_key(|(i, _)| *i);
    let trees: Vec<Tree> = trees.into_iter().map(|(_, t)| t).collect();

    let ranks = if f.link_exists("ranks") {
        read_ranks(&open_group(&f, "ranks")?)?
    } else {
        Vec::new()
    };

    // Absent in reports written before time series existed.
    let series = if f.link_exists("series") {
        Some(crate::h5series::read(&open_group(&f, "series")?)?)
    } else {
        None
    };

    let profile = Profile {
        meta,
        config,
        modules,
        totals,
        heap,
        unwind,
        tracer,
        resident,
        trees,
        ranks,
        series,
    };
    let expected: u64 = f
        .attr("node_count")
        .and_then(|a| a.read_scalar())
        .map_err(|_| ReportError::Corrupt("missing node_count (conversion interrupted?)".into()))?;
    let found = node_count(&profile);
    if expected != found {
        return Err(ReportError::Corrupt(format!(
            "node_count says {expected} nodes, the trees hold {found}"
        )));
    }
    profile.validate().map_err(ReportError::Corrupt)?;
    Ok((profile, symbols))
}

fn read_heap(g: &Group) -> Result<HeapStats> {
    Ok(HeapStats {
        peak_bytes: get(g, "peak_bytes")?,
        live_bytes: get(g, "live_bytes")?,
        live_blocks: get(g, "live_blocks")?,
        evicted_live_bytes: get(g, "evicted_live_bytes")?,
        evicted_peak_bytes: get(g, "evicted_peak_bytes")?,
        unknown_frees: get(g, "unknown_frees")?,
        peak_time_ns: get(g, "peak_time_ns")?,
        temporary_count: get_opt(g, "temporary_count")?.unwrap_or(0),
        temporary_bytes: get_opt(g, "temporary_bytes")?.unwrap_or(0),
        size_classes: if g.link_exists("size_classes") {
            get_rows::<u64>(g, "size_classes")?
        } else {
            Vec::new()
        },
    })
}

fn read_resident(g: &Group) -> Result<Resident> {
    Ok(Resident {
        peak_bytes: get(g, "peak_bytes")?,
        end_bytes: get(g, "end_bytes")?,
        tracer_peak_bytes: get(g, "tracer_peak_bytes")?,
    })
}

fn read_unwind(g: &Group) -> Result<UnwindStats> {
    Ok(UnwindStats {
        mode: get_str(g, "mode")?,
        events: get(g, "events")?,
        frames_unwound: get(g, "frames_unwound")?,
        frames_reused: get(g, "frames_reused")?,
        validated: get(g, "validated")?,
        correct: get(g, "correct")?,
        reseeds: get(g, "reseeds")?,
        truncated: get(g, "truncated")?,
        errors: get(g, "errors")?,
    })
}

fn read_tracer(g: &Group) -> Result<TracerStats> {
    Ok(TracerStats {
        collector_bytes: get(g, "collector_bytes")?,
        ptr_table_peak: get(g, "ptr_table_peak")?,
        untraced_events: get(g, "untraced_events")?,
    })
}

/// A tree's frames, from either layout.
fn read_frames(g: &Group, version: u32) -> Result<Vec<Frame>> {
    if version < 2 {
        let rows = get_rows::<FrameRow>(g, "frames")?;
        return Ok(rows
            .into_iter()
            .map(|r| Frame {
                function: text(&r.function),
                file: text(&r.file),
                line: r.line,
            })
            .collect());
    }
    let strings = get_rows::<VarLenUnicode>(g, "strings")?;
    let rows = get_rows::<FrameIndexRow>(g, "frames")?;
    let text = |i: u32, row: usize| -> Result<String> {
        strings.get(i as usize).map(text).ok_or_else(|| {
            ReportError::Corrupt(format!(
                "{}: frame {row}: string {i} of {}",
                g.name(),
                strings.len()
            ))
        })
    };
    rows.iter()
        .enumerate()
        .map(|(row, r)| {
            Ok(Frame {
                function: text(r.function, row)?,
                file: text(r.file, row)?,
                line: r.line,
            })
        })
        .collect()
}

fn read_tree(g: &Group, symbols: &mut Symbols, version: u32) -> Result<Tree> {
    let rows = get_rows::<NodeRow>(g, "nodes")?;
    let frames = read_frames(g, version)?;
    if frames.len() != rows.len() {
        return Err(ReportError::Corrupt(format!(
            "{}: {} frames for {} nodes",
            g.name(),
            frames.len(),
            rows.len()
        )));
    }
    // Layout 3 on; an older report's contexts have no temporaries.
    let temporary = if g.link_exists("temporary") {
        get_rows::<u64>(g, "temporary")?
    } else {
        Vec::new()
    };
    if !temporary.is_empty() && temporary.len() != rows.len() {
        return Err(ReportError::Corrupt(format!(
            "{}: {} temporary counts for {} nodes",
            g.name(),
            temporary.len(),
            rows.len()
        )));
    }
    let mut nodes = Vec::with_capacity(rows.len());
    for (i, (r, fr)) in rows.iter().zip(frames).enumerate() {
        let key = match r.key_type {
            KEY_ROOT => FrameKey::Root,
            KEY_KIND => FrameKey::Kind(u16::try_from(r.addr).map_err(|_| {
                ReportError::Corrupt(format!("{}: node {i}: kind {} out of range", g.name(), {
                    r.addr
                }))
            })?),
            KEY_ADDR => {
                symbols.insert(r.module, r.addr, fr);
                FrameKey::Addr {
                    module: r.module,
                    offset: r.addr,
                }
            }
            KEY_UNKNOWN => FrameKey::Unknown(r.addr),
            t => {
                return Err(ReportError::Corrupt(format!(
                    "{}: node {i}: key_type {t}",
                    g.name()
                )))
            }
        };
        nodes.push(Node {
            parent: if i == 0 { NO_PARENT } else { r.parent },
            key,
            count: r.count,
            count_err: r.count_err,
            bytes: r.bytes,
            bytes_err: r.bytes_err,
            live_bytes: r.live_bytes,
            peak_live_bytes: r.peak_live_bytes,
            temporary: temporary.get(i).copied().unwrap_or(0),
            flags: r.flags,
        });
        if i == 0 && r.parent != NO_PARENT {
            return Err(ReportError::Corrupt(format!(
                "{}: node 0 has a parent",
                g.name()
            )));
        }
    }
    let spread = if g.link_exists("spread") {
        get_rows::<SpreadRow>(g, "spread")?
            .into_iter()
            .map(|s| NodeSpread {
                count: Spread {
                    min: s.count_min,
                    max: s.count_max,
                    sum: s.count_sum,
                    max_rank: s.count_max_rank,
                    present: s.count_present,
                },
                bytes: Spread {
                    min: s.bytes_min,
                    max: s.bytes_max,
                    sum: s.bytes_sum,
                    max_rank: s.bytes_max_rank,
                    present: s.bytes_present,
                },
            })
            .collect()
    } else {
        Vec::new()
    };
    let floor = match (
        get_opt::<u64>(g, "floor_count")?,
        get_opt::<u64>(g, "floor_bytes")?,
    ) {
        (Some(c), Some(b)) => Some((c, b)),
        _ => None,
    };
    Ok(Tree {
        name: get_str(g, "name")?,
        total_count: get(g, "total_count")?,
        total_bytes: get(g, "total_bytes")?,
        capacity: get(g, "capacity")?,
        nodes,
        spread,
        floor,
    })
}

/// An optional dataset of `/ranks` with one row per rank (empty when the
/// report's layout predates it); another number of rows is corrupt.
fn rank_rows<T: H5Type>(g: &Group, name: &str, nranks: usize) -> Result<Vec<T>> {
    if !g.link_exists(name) {
        return Ok(Vec::new());
    }
    let rows = get_rows::<T>(g, name)?;
    if rows.len() != nranks {
        return Err(ReportError::Corrupt(format!(
            "ranks/{name} has {} rows for {nranks} ranks",
            rows.len()
        )));
    }
    Ok(rows)
}

fn read_ranks(g: &Group) -> Result<Vec<RankSummary>> {
    let mut ranks: Vec<RankSummary> = get_rows::<RankRow>(g, "summary")?
        .into_iter()
        .map(|r| RankSummary {
            rank: r.rank,
            hostname: text(&r.hostname),
            pid: r.pid,
            reason: text(&r.reason),
            totals: Vec::new(),
            heap: HeapStats {
                peak_bytes: r.peak_bytes,
                live_bytes: r.live_bytes,
                live_blocks: r.live_blocks,
                evicted_live_bytes: r.evicted_live_bytes,
                evicted_peak_bytes: r.evicted_peak_bytes,
                unknown_frees: r.unknown_frees,
                peak_time_ns: r.peak_time_ns,
                temporary_count: 0,
                temporary_bytes: 0,
                size_classes: Vec::new(),
            },
            unwind: UnwindStats {
                mode: text(&r.unwind_mode),
                events: r.unwind_events,
                frames_unwound: r.frames_unwound,
                frames_reused: r.frames_reused,
                validated: r.validated,
                correct: r.correct,
                reseeds: r.reseeds,
                truncated: r.truncated,
                errors: r.errors,
            },
            tracer: TracerStats {
                collector_bytes: r.collector_bytes,
                ptr_table_peak: r.ptr_table_peak,
                untraced_events: r.untraced_events,
            },
            resident: Resident::default(),
            threads: r.threads,
        })
        .collect();
    let nranks = ranks.len();
    for (r, t) in ranks
        .iter_mut()
        .zip(rank_rows::<RankTemporaryRow>(g, "temporary", nranks)?)
    {
        r.heap.temporary_count = t.count;
        r.heap.temporary_bytes = t.bytes;
    }
    for (r, row) in ranks
        .iter_mut()
        .zip(rank_rows::<RankResidentRow>(g, "resident", nranks)?)
    {
        r.resident = row.into();
    }
    for t in get_rows::<RankTotalRow>(g, "totals")? {
        let r = ranks.get_mut(t.rank_index as usize).ok_or_else(|| {
            ReportError::Corrupt(format!("ranks/totals names rank index {}", t.rank_index))
        })?;
        r.totals.push(KindTotal {
            kind: text(&t.kind),
            count: t.count,
            bytes: t.bytes,
        });
    }
    Ok(ranks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile() -> Profile {
        let addr = FrameKey::Addr {
            module: 0,
            offset: 0x1234,
        };
        let mut kind = Node::root();
        kind.parent = 1;
        kind.key = FrameKey::Kind(2);
        kind.count = 5;
        kind.bytes = 50;
        kind.temporary = 3;
        let mut frame = Node::root();
        frame.parent = 0;
        frame.key = addr;
        let mut unknown = Node::root();
        unknown.parent = 0;
        unknown.key = FrameKey::Unknown(u64::MAX);
        let rank = |r: u32| RankSummary {
            rank: r,
            hostname: format!("n{r}"),
            pid: 100 + r,
            reason: "finalize".into(),
            totals: vec![KindTotal {
                kind: "malloc".into(),
                count: r as u64,
                bytes: 8 * r as u64,
            }],
            heap: HeapStats {
                peak_bytes: 1000 + r as u64,
                temporary_count: 2 + r as u64,
                temporary_bytes: 20 + r as u64,
                ..HeapStats::default()
            },
            unwind: UnwindStats {
                mode: "fp".into(),
                events: 3,
                ..UnwindStats::default()
            },
            tracer: TracerStats {
                untraced_events: 1,
                ..TracerStats::default()
            },
            resident: Resident {
                peak_bytes: 4096 * (10 + r as u64),
                end_bytes: 4096 * (5 + r as u64),
                tracer_peak_bytes: 777 + r as u64,
            },
            threads: 4,
        };
        Profile {
            meta: Meta {
                program: "/bin/prog ünïcode".into(),
                args: vec![],
                reason: "merge".into(),
                rank: None,
                nranks: Some(2),
                ..Meta::default()
            },
            config: Config {
                phi: 0.5,
                epsilon: 0.25,
                unwind: "fp".into(),
                max_depth: 64,
                exact: true,
                bins: 8,
                rank_series: 4,
                event_samples: 2,
            },
            modules: vec![Module {
                path: "/lib/with\0nul".into(),
                build_id: String::new(),
                bias: 1,
                start: 2,
                end: 3,
            }],
            totals: vec![],
            heap: HeapStats {
                temporary_count: 5,
                temporary_bytes: 41,
                size_classes: vec![1, 0, 7, 3],
                ..HeapStats::default()
            },
            unwind: UnwindStats::default(),
            tracer: TracerStats::default(),
            resident: Resident {
                peak_bytes: 4096 * 21,
                end_bytes: 4096 * 11,
                tracer_peak_bytes: 1555,
            },
            trees: vec![
                Tree {
                    name: "alloc".into(),
                    total_count: 5,
                    total_bytes: 50,
                    capacity: 0,
                    nodes: vec![Node::root(), frame, kind, unknown],
                    spread: vec![
                        NodeSpread {
                            count: Spread::single(5, 1),
                            bytes: Spread::single(50, 0),
                        };
                        4
                    ],
                    floor: Some((7, 70)),
                },
                Tree {
                    name: "weird/name".into(),
                    nodes: vec![Node::root()],
                    ..Tree::default()
                },
            ],
            ranks: vec![rank(0), rank(1)],
            series: None,
        }
    }

    /// Symbols naming one frame (module 0, offset 0x1234), and the frame.
    fn symbols_of_one_frame() -> (Symbols, Frame) {
        let mut syms = Symbols::default();
        let f = Frame {
            function: "ns::f()".into(),
            file: "a.cpp".into(),
            line: 9,
        };
        syms.insert(0, 0x1234, f.clone());
        (syms, f)
    }

    #[test]
    fn write_then_read_is_identity() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.h5");
        let p = profile();
        let (syms, f) = symbols_of_one_frame();
        write(&path, &p, &syms).unwrap();
        // Sealed: read in this process (an unsealed file would go to a
        // child process running this executable, i.e. the test harness).
        crate::seal::seal(&path).unwrap();
        let (q, s) = read(&path).unwrap();
        let mut expect = p.clone();
        expect.modules[0].path = "/lib/withnul".into();
        assert_eq!(q, expect);
        assert_eq!(s.get(0, 0x1234), f);
        assert_eq!(rank_count(&q), 2);
    }

    /// `path`'s trees rewritten with `frames(group)` as their frames and
    /// without `strings`, and its layout version set to `version`.
    fn rewrite_frames<T: H5Type>(path: &Path, version: u32, frames: impl Fn(&Group) -> Vec<T>) {
        let file = builder().open_rw(path).unwrap();
        file.delete_attr("format_version").unwrap();
        put(&file, "format_version", &version).unwrap();
        for name in file.group("trees").unwrap().member_names().unwrap() {
            let g = file.group(&format!("trees/{name}")).unwrap();
            let rows = frames(&g);
            g.unlink("frames").unwrap();
            g.unlink("strings").unwrap();
            put_rows(&g, "frames", &rows).unwrap();
            if version >= 2 {
                put_rows(&g, "strings", &[vstr("")]).unwrap();
            }
        }
    }

    /// In the file a row is its members and nothing else: no padding
    /// bytes of the writer's memory (whatever its heap held) end up in a
    /// report, which is the same, byte for byte in its tables, every time.
    #[test]
    fn rows_carry_no_padding_into_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.h5");
        let p = profile();
        let (syms, _) = symbols_of_one_frame();
        write(&path, &p, &syms).unwrap();
        let file = builder().open(&path).unwrap();
        let tree = file
            .group("trees")
            .unwrap()
            .group(&tree_group_name(0, &p.trees[0].name))
            .unwrap();
        let size = |ds: hdf5::Dataset| ds.dtype().unwrap().size();
        // parent, module: 4 bytes; key_type, flags: 1; seven u64 counts
        // (packed in memory too).
        assert_eq!(std::mem::size_of::<NodeRow>(), 66);
        assert_eq!(size(tree.dataset("nodes").unwrap()), 66);
        let ranks = file.group("ranks").unwrap();
        for name in ranks.member_names().unwrap() {
            if let Ok(ds) = ranks.dataset(&name) {
                let dtype = ds.dtype().unwrap();
                if let Ok(hdf5::types::TypeDescriptor::Compound(c)) = dtype.to_descriptor() {
                    let members: usize = c.fields.iter().map(|f| f.ty.size()).sum();
                    assert_eq!(dtype.size(), members, "ranks/{name}");
                }
            }
        }
    }

    /// A report of layout 1, each frame's strings in its row, reads as the
    /// same report of layout 2 (strings once, rows indexing them); a row
    /// indexing past the strings is a corrupt report.
    #[test]
    fn both_layouts_are_read_and_a_bad_index_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v1.h5");
        let (syms, f) = symbols_of_one_frame();
        write(&path, &profile(), &syms).unwrap();
        let (want, _) = read_here(&path).unwrap();
        rewrite_frames(&path, 1, |g| {
            read_frames(g, 2)
                .unwrap()
                .into_iter()
                .map(|f| FrameRow {
                    function: vstr(&f.function),
                    file: vstr(&f.file),
                    line: f.line,
                })
                .collect()
        });
        let (got, got_syms) = read_here(&path).unwrap();
        assert_eq!(got, want);
        assert_eq!(got_syms.get(0, 0x1234), f);

        let bad = dir.path().join("bad.h5");
        write(&bad, &profile(), &syms).unwrap();
        rewrite_frames(&bad, 2, |g| {
            let n = get_rows::<NodeRow>(g, "nodes").unwrap().len();
            vec![
                FrameIndexRow {
                    function: 7,
                    file: 0,
                    line: 0
                };
                n
            ]
        });
        let e = read_here(&bad).unwrap_err();
        assert!(
            matches!(&e, ReportError::Corrupt(m) if m.contains("string 7 of 1")),
            "{e}"
        );
    }

    /// A report of layout 2 has no temporaries and no size classes: it
    /// reads with none. In
    /// layout 3, a tree's `temporary` must have a row per node.
    #[test]
    fn a_report_without_temporaries_reads_as_none_and_a_short_list_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let (syms, _) = symbols_of_one_frame();
        let path = dir.path().join("v2.h5");
        write(&path, &profile(), &syms).unwrap();
        let (mut want, _) = read_here(&path).unwrap();
        assert_eq!(want.heap.temporary_count, 5);
        assert_eq!(want.heap.size_classes, [1, 0, 7, 3]);
        assert_eq!(want.ranks[1].heap.temporary_count, 3);
        assert_eq!(want.trees[0].nodes[2].temporary, 3);
        {
            let file = builder().open_rw(&path).unwrap();
            file.delete_attr("format_version").unwrap();
            put(&file, "format_version", &2u32).unwrap();
            let heap = file.group("heap").unwrap();
            heap.delete_attr("temporary_count").unwrap();
            heap.delete_attr("temporary_bytes").unwrap();
            heap.unlink("size_classes").unwrap();
            file.group("ranks").unwrap().unlink("temporary").unwrap();
            for name in file.group("trees").unwrap().member_names().unwrap() {
                let g = file.group(&format!("trees/{name}")).unwrap();
                g.unlink("temporary").unwrap();
            }
        }
        want.heap.temporary_count = 0;
        want.heap.temporary_bytes = 0;
        want.heap.size_classes.clear();
        for r in &mut want.ranks {
            r.heap.temporary_count = 0;
            r.heap.temporary_bytes = 0;
        }
        for n in want.trees.iter_mut().flat_map(|t| &mut t.nodes) {
            n.temporary = 0;
        }
        assert_eq!(read_here(&path).unwrap().0, want);

        let short = dir.path().join("short.h5");
        write(&short, &profile(), &syms).unwrap();
        {
            let file = builder().open_rw(&short).unwrap();
            let g = file.group("trees/alloc").unwrap();
            g.unlink("temporary").unwrap();
            put_rows(&g, "temporary", &[0u64, 3]).unwrap();
        }
        let e = read_here(&short).unwrap_err();
        assert!(
            matches!(&e, ReportError::Corrupt(m) if m.contains("2 temporary counts for 4 nodes")),
            "{e}"
        );
    }

    /// A report of layout 3 has no resident memory: it reads as not known.
    /// In layout 4, `ranks/resident` must have a row per rank.
    #[test]
    fn a_report_without_resident_memory_reads_as_unknown_and_a_short_list_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let (syms, _) = symbols_of_one_frame();
        let path = dir.path().join("v3.h5");
        write(&path, &profile(), &syms).unwrap();
        let (mut want, _) = read_here(&path).unwrap();
        assert_eq!(want.resident.peak_bytes, 4096 * 21);
        assert_eq!(want.resident.tracer_peak_bytes, 1555);
        assert_eq!(want.ranks[1].resident.end_bytes, 4096 * 6);
        {
            let file = builder().open_rw(&path).unwrap();
            file.delete_attr("format_version").unwrap();
            put(&file, "format_version", &3u32).unwrap();
            file.unlink("resident").unwrap();
            file.group("ranks").unwrap().unlink("resident").unwrap();
        }
        want.resident = Resident::default();
        for r in &mut want.ranks {
            r.resident = Resident::default();
        }
        let (got, _) = read_here(&path).unwrap();
        assert!(!got.resident.known());
        assert_eq!(got, want);

        let short = dir.path().join("short.h5");
        write(&short, &profile(), &syms).unwrap();
        {
            let file = builder().open_rw(&short).unwrap();
            let g = file.group("ranks").unwrap();
            g.unlink("resident").unwrap();
            put_rows(
                &g,
                "resident",
                &[RankResidentRow::from(&Resident::default())],
            )
            .unwrap();
        }
        let e = read_here(&short).unwrap_err();
        assert!(
            matches!(&e, ReportError::Corrupt(m) if m.contains("ranks/resident has 1 rows for 2 ranks")),
            "{e}"
        );
    }

    #[test]
    fn empty_trees_and_tables_are_fine() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.h5");
        let p = Profile::default();
        write(&path, &p, &Symbols::default()).unwrap();
        let (q, _) = read_here(&path).unwrap();
        assert_eq!(q, p);
    }

    #[test]
    fn a_lock_held_elsewhere_does_not_stop_reading_or_writing() {
        use std::io::BufRead;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.h5");
        let p = Profile::default();
        write(&path, &p, &Symbols::default()).unwrap();
        // Another process holds an exclusive flock on the file, as a child
        // that inherited HDF5's descriptor would.
        let mut holder = std::process::Command::new("flock")
            .args(["--exclusive", "--nonblock"])
            .arg(&path)
            .args(["-c", "echo locked; exec sleep 60"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("flock(1) from util-linux");
        let mut line = String::new();
        std::io::BufReader::new(holder.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line, "locked\n");
        let read = read_here(&path).map(|r| r.0);
        let rewrite = write(&path, &p, &Symbols::default());
        holder.kill().unwrap();
        holder.wait().unwrap();
        assert_eq!(read.unwrap(), p);
        rewrite.unwrap();
        assert_eq!(read_here(&path).unwrap().0, p);
    }

    #[test]
    fn foreign_file_is_not_ours() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.h5");
        let f = create_file(&path).unwrap();
        put(&f, "something", &1u8).unwrap();
        drop(f);
        assert!(matches!(read_here(&path), Err(ReportError::NotOurs)));
    }

    #[test]
    fn other_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.h5");
        let f = create_file(&path).unwrap();
        put(&f, "format_version", &99u32).unwrap();
        drop(f);
        let e = read_here(&path).unwrap_err();
        assert!(matches!(e, ReportError::Version { found: 99 }), "{e}");
    }
}
