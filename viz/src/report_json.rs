//! `wmhcct report --json`: the report as one JSON document with stable keys.

use std::borrow::Cow;

use serde::ser::{SerializeMap as _, Serializer};
use serde::Serialize;
use serde_json::{json, Map, Value};
use wmhcct_format::{
    size_class_range, HeapStats, KindTotal, Profile, RankSummary, Spread, UnwindStats, ALLOC_KINDS,
};

use crate::cli::{Group, SortKey};
use crate::contexts::{alloc_tree, Context, ContextList, StackFrame};
use crate::focus::Focus;
use crate::h5layout::rank_count;
use crate::mpi_internal::MpiOwn;
use crate::sums::ContextSums;

/// Counters per event of unwinding, `None` when there were no events.
fn per_event(n: u64, events: u64) -> Option<f64> {
    (events > 0).then(|| n as f64 / events as f64)
}

pub fn unwind_json(u: &UnwindStats) -> Value {
    json!({
        "mode": u.mode,
        "events": u.events,
        "frames_unwound": u.frames_unwound,
        "frames_reused": u.frames_reused,
        "validated": u.validated,
        "correct": u.correct,
        "accuracy": per_event(u.correct, u.validated),
        "frames_unwound_per_event": per_event(u.frames_unwound, u.events),
        "frames_reused_per_event": per_event(u.frames_reused, u.events),
        "reseeds": u.reseeds,
        "truncated": u.truncated,
        "errors": u.errors,
    })
}

fn heap_json(h: &HeapStats) -> Value {
    json!({
        "peak_bytes": h.peak_bytes,
        "live_bytes": h.live_bytes,
        "live_blocks": h.live_blocks,
        "evicted_live_bytes": h.evicted_live_bytes,
        "evicted_peak_bytes": h.evicted_peak_bytes,
        "unknown_frees": h.unknown_frees,
        "peak_time_ns": h.peak_time_ns,
        "temporary_count": h.temporary_count,
        "temporary_bytes": h.temporary_bytes,
    })
}

/// The size classes of the allocations (the whole job's): each class that
/// has any, with its smallest and largest size.
fn sizes_json(h: &HeapStats) -> Value {
    h.size_classes
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .map(|(k, &n)| {
            let (min, max) = size_class_range(k);
            json!({ "min": min, "max": max, "count": n })
        })
        .collect()
}

/// Totals per entry point: the ten C allocators always, other kinds (MPI
/// routines by their C name) when present.
fn totals_json(totals: &[KindTotal]) -> Value {
    let mut m = Map::new();
    for name in &ALLOC_KINDS[..10] {
        m.insert(name.to_string(), json!({"count": 0, "bytes": 0}));
    }
    for (i, t) in totals.iter().enumerate() {
        // `MPI_Alloc_mem` and `MPI_Free_mem` have a row as allocator
        // functions, then one as MPI calls (`MPI_Free_mem`'s bytes 0): the
        // allocator's, first, holds the bytes allocated and released.
        if totals[..i].iter().any(|e| e.kind == t.kind) {
            continue;
        }
        m.insert(t.kind.clone(), json!({"count": t.count, "bytes": t.bytes}));
    }
    Value::Object(m)
}

/// Fields in their keys' order, as [`FrameJson`]'s.
#[derive(Serialize)]
struct SpreadJson {
    max: u64,
    max_rank: u32,
    mean: f64,
    min: u64,
}

fn spread_json(s: &Spread, nranks: u32) -> SpreadJson {
    SpreadJson {
        min: s.min_over(nranks),
        max: s.max,
        mean: s.mean_over(nranks),
        max_rank: s.max_rank,
    }
}

/// The exact per-rank scalars; a single process is its own rank 0.
fn ranks_detail(p: &Profile) -> Value {
    let own;
    let ranks: &[RankSummary] = if p.ranks.is_empty() {
        own = [p.rank_summary(p.meta.rank.unwrap_or(0))];
        &own
    } else {
        &p.ranks
    };
    Value::Array(
        ranks
            .iter()
            .map(|r| {
                json!({
                    "rank": r.rank,
                    "hostname": r.hostname,
                    "pid": r.pid,
                    "reason": r.reason,
                    "threads": r.threads,
                    "totals": totals_json(&r.totals),
                    "peak_bytes": r.heap.peak_bytes,
                    // Everything live when the rank's profile was taken:
                    // in a job, at MPI_Finalize, the MPI library's state
                    // too, which `leaked` elsewhere leaves out (per context).
                    "live_at_end_bytes": r.heap.live_bytes,
                    "heap": heap_json(&r.heap),
                    "unwind": unwind_json(&r.unwind),
                    "tracer": tracer_json(&r.tracer),
                    "resident": resident_json(&r.resident),
                })
            })
            .collect(),
    )
}

/// `null` when not known (a report of layout 3 or older).
fn resident_json(r: &wmhcct_format::Resident) -> Value {
    if !r.known() {
        return Value::Null;
    }
    json!({
        "peak_bytes": r.peak_bytes,
        "end_bytes": r.end_bytes,
        "tracer_peak_bytes": r.tracer_peak_bytes,
    })
}

fn tracer_json(t: &wmhcct_format::TracerStats) -> Value {
    json!({
        "collector_bytes": t.collector_bytes,
        "ptr_table_peak": t.ptr_table_peak,
        "untraced_events": t.untraced_events,
    })
}

/// A frame. The fields of this file's structs are in their keys' order,
/// sorted as the document's other objects (a [`Map`]) are.
#[derive(Serialize)]
struct FrameJson<'a> {
    /// Module-relative return address, hexadecimal.
    address: String,
    file: &'a str,
    function: &'a str,
    line: u32,
    module: &'a str,
}

/// A context's frames, each made as it is written.
struct StackJson<'a>(&'a [StackFrame]);

impl Serialize for StackJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|f| FrameJson {
            function: &f.function,
            file: &f.file,
            line: f.line,
            module: &f.module,
            address: format!("{:#x}", f.address),
        }))
    }
}

#[derive(Serialize)]
struct ContextJson<'a> {
    bytes: u64,
    bytes_err: u64,
    count: u64,
    count_err: u64,
    /// In the (φ, ε)-HCCT (at or above φ of the calls or bytes); false
    /// for a cold context that a `--by leaked`, `peak` or `temporary`
    /// view lists for holding at least φ of the heap's figure.
    hot: bool,
    /// The MPI routine whose call allocated it (the MPI library's own
    /// memory), or null.
    inside_mpi: Option<&'a str>,
    kind: &'a str,
    leaked_bytes: u64,
    peak_live_bytes: u64,
    per_rank_bytes: SpreadJson,
    per_rank_count: SpreadJson,
    stack: StackJson<'a>,
    /// The stack reached WMHCCT_MAX_DEPTH: outer callers not recorded.
    stack_cut: bool,
    /// Temporary allocations: freed before their thread's next allocation or free.
    temporary: u64,
}

fn context_json(c: &Context, nranks: u32) -> ContextJson<'_> {
    ContextJson {
        kind: &c.kind,
        count: c.count,
        count_err: c.count_err,
        hot: c.hot,
        bytes: c.bytes,
        bytes_err: c.bytes_err,
        leaked_bytes: c.leaked_bytes,
        peak_live_bytes: c.peak_live_bytes,
        temporary: c.temporary,
        per_rank_count: spread_json(&c.spread.count, nranks),
        per_rank_bytes: spread_json(&c.spread.bytes, nranks),
        stack: StackJson(&c.stack),
        stack_cut: c.cut,
        inside_mpi: c.inside_mpi.as_deref(),
    }
}

/// A list of contexts, each made as it is written: a report's contexts
/// spelt out as JSON values took ~9 times the document's size.
struct ContextsJson<'a> {
    list: Vec<Cow<'a, Context>>,
    nranks: u32,
}

impl Serialize for ContextsJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.list.iter().map(|c| context_json(c, self.nranks)))
    }
}

/// The JSON document: its small entries as values, its context lists
/// written from the contexts themselves. Written, its keys come in the
/// order of a [`Map`] of all of them, as when the lists were values too.
pub struct Document<'a> {
    head: Map<String, Value>,
    /// Keyed `contexts` and `untraced`.
    lists: [(&'static str, ContextsJson<'a>); 2],
}

impl Document<'_> {
    /// Add (or replace) a small entry.
    pub fn insert(&mut self, key: &str, value: Value) {
        self.head.insert(key.to_string(), value);
    }
}

/// `doc` as pretty JSON and a newline.
pub fn write(w: &mut dyn std::io::Write, doc: &Document) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *w, doc)?;
    w.write_all(b"\n")
}

impl Serialize for Document<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // A `Map` orders its keys (serde_json without `preserve_order`):
        // the lists go where a map holding them too would put them.
        let mut m = s.serialize_map(Some(self.head.len() + self.lists.len()))?;
        let mut lists = self.lists.iter().peekable();
        for (key, value) in &self.head {
            while let Some((k, list)) = lists.next_if(|(k, _)| *k < key.as_str()) {
                m.serialize_entry(k, list)?;
            }
            m.serialize_entry(key, value)?;
        }
        for (k, list) in lists {
            m.serialize_entry(k, list)?;
        }
        m.end()
    }
}

/// Live bytes at the end in contexts allocated inside MPI calls, by routine.
fn mpi_own_json(own: &MpiOwn) -> Value {
    let by_routine: Map<String, Value> = own
        .routines
        .iter()
        .map(|(r, b)| (r.clone(), json!(b)))
        .collect();
    json!({
        "contexts": own.contexts,
        "live_bytes": own.total,
        "live_bytes_by_routine": by_routine,
    })
}

/// `--focus` and `--ignore`: their texts and what the allocation contexts
/// through the focus add up to, with the allocation tree's totals (every allocation call and
/// its bytes) to compare with; `null` without a focus.
fn focus_json(p: &Profile, list: &ContextList, focus: Option<&Focus>) -> Value {
    let Some(f) = focus else {
        return Value::Null;
    };
    let sums = ContextSums::of(&list.contexts);
    let tree = alloc_tree(p);
    json!({
        "texts": f.texts(),
        "ignore": f.ignored(),
        "contexts": sums.contexts,
        "count": sums.count,
        "count_err": sums.count_err,
        "bytes": sums.bytes,
        "bytes_err": sums.bytes_err,
        "leaked_bytes": sums.leaked_bytes,
        "peak_live_bytes": sums.peak_live_bytes,
        "temporary": sums.temporary,
        "all_count": tree.map_or(0, |t| t.total_count),
        "all_bytes": tree.map_or(0, |t| t.total_bytes),
    })
}

/// `report --group`: the JSON's `sites` sum the program's contexts (with
/// `mpi_internal`, the MPI library's too) by `group`, ordered by `by`.
#[derive(Clone, Copy, Debug)]
pub struct SitesOf {
    pub group: Group,
    pub by: SortKey,
    pub mpi_internal: bool,
}

/// The whole JSON document; `top` limits both context lists (and the
/// `sites` of `--group`). With a
/// focus, the contexts listed are those through it, and `focus` sums them
/// (the rest describes the whole program).
pub fn render<'a>(
    p: &Profile,
    format_version: u32,
    list: &'a ContextList,
    top: Option<usize>,
    focus: Option<&Focus>,
    sites: Option<SitesOf>,
) -> Document<'a> {
    let n = top.unwrap_or(usize::MAX);
    let nranks = rank_count(p);
    let mpi_own = mpi_own_json(&list.mpi_own());
    let focused = focus.map(|f| f.of(list));
    let shown = focused.as_ref().unwrap_or(list);
    // The program's contexts (through the focus), as the text groups them.
    let sites = sites.map(|o| {
        let program = shown
            .contexts
            .iter()
            .filter(|c| o.mpi_internal || c.inside_mpi.is_none());
        crate::sites::json(&crate::sites::of(program, o.group, o.by), o.group, n)
    });
    let focus_sums = focus_json(p, shown, focus);
    // Allocation contexts first, then MPI call contexts (each list limited
    // to `top`); those through a focus are the document's own.
    let (contexts, untraced): (Vec<Cow<'a, Context>>, Vec<_>) = match focused {
        Some(f) => (
            (f.contexts.into_iter().take(n))
                .chain(f.mpi.into_iter().take(n))
                .map(Cow::Owned)
                .collect(),
            f.untraced.into_iter().take(n).map(Cow::Owned).collect(),
        ),
        None => (
            (list.contexts.iter().take(n))
                .chain(list.mpi.iter().take(n))
                .map(Cow::Borrowed)
                .collect(),
            list.untraced.iter().take(n).map(Cow::Borrowed).collect(),
        ),
    };
    let v = json!({
        "format_version": format_version,
        "program": p.meta.program,
        "hostname": p.meta.hostname,
        "pid": p.meta.pid,
        "reason": p.meta.reason,
        "tracer_version": p.meta.tracer_version,
        "start_unix_ns": p.meta.start_unix_ns,
        "end_unix_ns": p.meta.end_unix_ns,
        "duration_s": p.meta.end_unix_ns.saturating_sub(p.meta.start_unix_ns) as f64 / 1e9,
        "ranks": rank_count(p),
        "totals": totals_json(&p.totals),
        "peak_bytes": p.heap.peak_bytes,
        "live_bytes": p.heap.live_bytes,
        "heap": heap_json(&p.heap),
        "size_classes": sizes_json(&p.heap),
        "mpi_own": mpi_own,
        "config": {
            "phi": p.config.phi,
            "epsilon": p.config.epsilon,
            "unwind": p.config.unwind,
            "max_depth": p.config.max_depth,
            "exact": p.config.exact,
        },
        "unwind": unwind_json(&p.unwind),
        "tracer": tracer_json(&p.tracer),
        "resident": resident_json(&p.resident),
        "ranks_detail": ranks_detail(p),
        "focus": focus_sums,
    });
    let Value::Object(head) = v else {
        unreachable!("an object literal")
    };
    let mut doc = Document {
        head,
        lists: [
            (
                "contexts",
                ContextsJson {
                    list: contexts,
                    nranks,
                },
            ),
            (
                "untraced",
                ContextsJson {
                    list: untraced,
                    nranks,
                },
            ),
        ],
    };
    if let Some(timeline) = crate::timeline::json(p) {
        doc.insert("timeline", timeline);
    }
    if let Some(sites) = sites {
        doc.insert("sites", sites);
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accuracy_null_without_validation() {
        let u = UnwindStats::default();
        assert!(unwind_json(&u)["accuracy"].is_null());
        let u = UnwindStats {
            validated: 4,
            correct: 3,
            events: 2,
            frames_unwound: 10,
            ..UnwindStats::default()
        };
        let v = unwind_json(&u);
        assert_eq!(v["accuracy"], 0.75);
        assert_eq!(v["frames_unwound_per_event"], 5.0);
    }

    /// Written as it goes, the document is what writing it as one JSON
    /// value gives (whose objects order their keys): a field added out of
    /// its key's place fails here.
    #[test]
    fn written_document_is_its_value_written() {
        let frame = StackFrame {
            address: 0x1a2b,
            ..StackFrame::named("solve", "/bin/app")
        };
        let mut hot = Context::of_stack("malloc", vec![frame.clone(), frame]);
        hot.inside_mpi = Some("MPI_Send".into());
        let list = ContextList {
            contexts: vec![hot.clone(), Context::of_stack("calloc", vec![])],
            untraced: vec![Context::of_stack("free", vec![])],
            cold: vec![],
            mpi: vec![Context::of_stack("MPI_Send", vec![])],
        };
        let p = Profile::default();
        let mut doc = render(&p, 3, &list, None, None, None);
        doc.insert("limits", json!({"b": 1, "a": [2]}));
        let mut written = Vec::new();
        write(&mut written, &doc).unwrap();
        let value = serde_json::to_value(&doc).unwrap();
        let whole = serde_json::to_string_pretty(&value).unwrap() + "\n";
        assert_eq!(String::from_utf8(written).unwrap(), whole);
        assert_eq!(value["contexts"].as_array().unwrap().len(), 3);
        assert_eq!(value["contexts"][0]["stack"][1]["address"], "0x1a2b");
        assert_eq!(value["untraced"][0]["kind"], "free");
        // `--top 1`: one of each list.
        let top = serde_json::to_value(render(&p, 3, &list, Some(1), None, None)).unwrap();
        let kinds: Vec<_> = top["contexts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["kind"].clone())
            .collect();
        assert_eq!(kinds, [json!("malloc"), json!("MPI_Send")]);
    }

    #[test]
    fn all_ten_allocators_present() {
        let v = totals_json(&Profile::default().totals);
        for k in &ALLOC_KINDS[..10] {
            assert_eq!(v[k]["count"], 0);
        }
    }
}
