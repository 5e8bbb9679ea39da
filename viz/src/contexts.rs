//! The contexts a report lists: leaf `Kind` nodes of the allocation tree that
//! belong to the (φ, ε)-HCCT (all of them in exact mode), with their stacks.

use wmhcct_collector::query::hcct_mask;
use wmhcct_format::{
    FrameKey, NodeSpread, Profile, Spread, Tree, ALLOC_KINDS, MPI_KINDS, NO_PARENT, UNTRACED_KIND,
};

pub use crate::cli::SortKey;
use crate::mpi_internal::{MpiOwn, Owners};
use crate::symbolize::{kind_name, Symbols};

/// The kind table of a tree, by the tree's name.
pub fn kinds_of(tree_name: &str) -> &'static [&'static str] {
    if tree_name == "mpi" {
        &MPI_KINDS
    } else {
        &ALLOC_KINDS
    }
}

/// One symbolised stack frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackFrame {
    pub function: String,
    pub file: String,
    pub line: u32,
    /// Module path ("" for an address outside every module).
    pub module: String,
    /// Module-relative return address (raw address for unknown modules).
    pub address: u64,
}

/// One calling context ending in an allocator call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Context {
    pub kind: String,
    pub count: u64,
    pub count_err: u64,
    pub bytes: u64,
    pub bytes_err: u64,
    pub leaked_bytes: u64,
    pub peak_live_bytes: u64,
    /// Temporary allocations (freed before their thread's next allocation or free).
    pub temporary: u64,
    /// How count and bytes spread over the job's ranks (a single process
    /// is rank 0 alone).
    pub spread: NodeSpread,
    /// Innermost first: index 0 called the allocator (or the MPI routine).
    pub stack: Vec<StackFrame>,
    /// The stack reached the frame limit: its outer callers, if any, were
    /// not recorded ([`stack_cut`]).
    pub cut: bool,
    /// The MPI routine whose call allocated it (the MPI library's own
    /// memory), or `thread of <module>` for a thread the MPI library started
    /// ([`Owners`]); `None` for the program's allocations and for the
    /// contexts of MPI calls themselves.
    pub inside_mpi: Option<String>,
    /// In the (φ, ε)-HCCT: at or above φ of the calls or of the bytes
    /// allocated (every context in exact mode). A context below both is
    /// listed only by the figure of a `--by leaked`, `peak` or `temporary`
    /// view, when it holds at least φ of the whole heap's ([`contexts`]).
    pub hot: bool,
}

/// Unit tests' frames and contexts, with only what a test sets.
#[cfg(test)]
impl StackFrame {
    /// A frame of `function` in `module`, without file, line or address.
    pub fn named(function: &str, module: &str) -> StackFrame {
        StackFrame {
            function: function.into(),
            file: String::new(),
            line: 0,
            module: module.into(),
            address: 0,
        }
    }
}

#[cfg(test)]
impl Context {
    /// One exact call of `kind` at `stack`, with no bytes.
    pub fn of_stack(kind: &str, stack: Vec<StackFrame>) -> Context {
        Context {
            kind: kind.into(),
            count: 1,
            count_err: 0,
            bytes: 0,
            bytes_err: 0,
            leaked_bytes: 0,
            peak_live_bytes: 0,
            temporary: 0,
            spread: Default::default(),
            stack,
            cut: false,
            inside_mpi: None,
            hot: true,
        }
    }
}

/// Contexts and untraced pseudo-contexts of the allocation tree, and the
/// contexts of MPI calls, each sorted by count descending, then bytes
/// descending.
pub struct ContextList {
    pub contexts: Vec<Context>,
    pub untraced: Vec<Context>,
    /// The contexts below the hotness threshold that the MPI library
    /// allocated for itself (none in exact mode), without their stacks:
    /// never listed, but their bytes are still the library's, not the
    /// program's leaks ([`ContextList::mpi_own`]).
    pub cold: Vec<Context>,
    /// MPI calls (kind = the routine's C name; bytes = bytes sent).
    pub mpi: Vec<Context>,
}

/// The allocation tree (`trees[0]`, or the tree named "alloc").
pub fn alloc_tree(p: &Profile) -> Option<&Tree> {
    p.trees
        .iter()
        .find(|t| t.name == "alloc")
        .or_else(|| p.trees.first())
}

/// The MPI tree (named "mpi"), if the profile has one.
pub fn mpi_tree(p: &Profile) -> Option<&Tree> {
    p.trees.iter().find(|t| t.name == "mpi")
}

/// The contexts a list shows for the view `by`: the hot ones (the
/// (φ, ε)-HCCT's), and for a view by bytes leaked, bytes live at the heap's
/// peak or temporary allocations also those of the summary's other contexts
/// that hold at least φ of that figure of the whole heap. Those figures are
/// not what the summary chooses its contexts by: a leak of a few calls and
/// bytes can be most of what is live at the end, and its context is in the
/// tree, with its counters, as long as the summary has not evicted it.
pub fn contexts(p: &Profile, syms: &Symbols, by: SortKey) -> ContextList {
    let mut list = ContextList {
        contexts: Vec::new(),
        untraced: Vec::new(),
        cold: Vec::new(),
        mpi: Vec::new(),
    };
    if let Some(tree) = alloc_tree(p) {
        let hot = hot_mask(p, tree);
        let keep = view_mask(p, tree, &hot, by);
        let mut owners = Owners::new(&p.meta.program);
        for i in (0..tree.nodes.len()).filter(|&i| keep[i]) {
            if let Some((mut ctx, untraced)) = node_context(p, tree, i, syms) {
                ctx.hot = hot[i];
                if untraced {
                    list.untraced.push(ctx);
                } else {
                    owners.learn(&ctx.stack);
                    list.contexts.push(ctx);
                }
            }
        }
        // A job's contexts below the hotness threshold: the MPI library's
        // own memory among them is the library's, not the program's leak
        // (`ContextList::mpi_own`). Their stacks are built twice (learnt,
        // then classified) and not kept: a job's tree has many more of
        // them than hot ones.
        let cold: Vec<usize> = if mpi_tree(p).is_some() {
            (0..tree.nodes.len()).filter(|&i| !keep[i]).collect()
        } else {
            Vec::new()
        };
        let cold_context = |i: usize| node_context(p, tree, i, syms).filter(|(_, u)| !u);
        for &i in &cold {
            if let Some((ctx, _)) = cold_context(i) {
                owners.learn(&ctx.stack);
            }
        }
        for c in &mut list.contexts {
            c.inside_mpi = owners.of(&c.stack);
        }
        for &i in &cold {
            if let Some((mut ctx, _)) = cold_context(i) {
                ctx.hot = false;
                ctx.inside_mpi = owners.of(&ctx.stack);
                if ctx.inside_mpi.is_some() {
                    ctx.stack = Vec::new();
                    list.cold.push(ctx);
                }
            }
        }
    }
    if let Some(tree) = mpi_tree(p) {
        let keep = hot_mask(p, tree);
        list.mpi = (0..tree.nodes.len())
            .filter(|&i| keep[i])
            .filter_map(|i| node_context(p, tree, i, syms))
            .map(|(c, _)| c)
            .collect();
    }
    list.sort(SortKey::Count);
    list
}

impl ContextList {
    /// The MPI library's own memory live at the end: the contexts allocated
    /// inside MPI calls, the cold ones included, so that the program's
    /// leaks (`live` less this) do not count the library's state in
    /// contexts below the hotness threshold. Only evicted contexts' bytes
    /// are unknown (`evicted_live_bytes`).
    pub fn mpi_own(&self) -> MpiOwn {
        MpiOwn::of(self.contexts.iter().chain(&self.cold))
    }

    /// Order every list by `key` descending, then count, then bytes. MPI
    /// call contexts, which neither leak nor hold memory, go by count for
    /// `Leaked` and `Peak`.
    pub fn sort(&mut self, key: SortKey) {
        let mpi_key = match key {
            SortKey::Leaked | SortKey::Peak | SortKey::Temporary => SortKey::Count,
            k => k,
        };
        for (v, key) in [
            (&mut self.contexts, key),
            (&mut self.untraced, key),
            (&mut self.mpi, mpi_key),
        ] {
            v.sort_by(|a, b| {
                key.value(b)
                    .cmp(&key.value(a))
                    .then(b.count.cmp(&a.count))
                    .then(b.bytes.cmp(&a.bytes))
            });
        }
    }
}

impl SortKey {
    /// The value a context is listed by.
    pub fn value(self, c: &Context) -> u64 {
        match self {
            SortKey::Count => c.count,
            SortKey::Bytes => c.bytes,
            SortKey::Leaked => c.leaked_bytes,
            SortKey::Peak => c.peak_live_bytes,
            SortKey::Temporary => c.temporary,
        }
    }

    /// Whether the text lists only the contexts with some of it (a leak
    /// list lists leaks).
    pub fn lists_only_some(self) -> bool {
        matches!(self, SortKey::Leaked | SortKey::Peak | SortKey::Temporary)
    }
}

/// Which nodes of a tree belong to the (φ, ε)-HCCT (all of them in exact
/// mode).
fn hot_mask(p: &Profile, tree: &Tree) -> Vec<bool> {
    if p.config.exact {
        vec![true; tree.nodes.len()]
    } else {
        hcct_mask(tree, p.config.phi)
    }
}

/// The nodes a view lists: the hot ones (`hot`), and for a view by a
/// figure of the heap, the contexts that hold at least φ of the heap's
/// (and some of it): bytes live at the end, at the heap's peak, or
/// temporary allocations.
fn view_mask(p: &Profile, tree: &Tree, hot: &[bool], by: SortKey) -> Vec<bool> {
    let h = &p.heap;
    let (of_node, of_heap): (fn(&wmhcct_format::Node) -> u64, u64) = match by {
        SortKey::Count | SortKey::Bytes => return hot.to_vec(),
        SortKey::Leaked => (|n| n.live_bytes, h.live_bytes),
        SortKey::Peak => (|n| n.peak_live_bytes, h.peak_bytes),
        SortKey::Temporary => (|n| n.temporary, h.temporary_count),
    };
    let least = p.config.phi * of_heap as f64;
    tree.nodes
        .iter()
        .zip(hot)
        .map(|(n, &hot)| {
            hot || (matches!(n.key, FrameKey::Kind(_))
                && of_node(n) > 0
                && of_node(n) as f64 >= least)
        })
        .collect()
}

/// Node `i` as a context, with whether it is an untraced pseudo-context;
/// `None` when it is a frame, not a context's leaf.
fn node_context(p: &Profile, tree: &Tree, i: usize, syms: &Symbols) -> Option<(Context, bool)> {
    let node = &tree.nodes[i];
    let FrameKey::Kind(k) = node.key else {
        return None;
    };
    let spread = match tree.spread.get(i) {
        Some(s) if s.count.present > 0 => *s,
        // A single process: the whole count is rank 0's.
        _ => NodeSpread {
            count: Spread::single(node.count, p.meta.rank.unwrap_or(0)),
            bytes: Spread::single(node.bytes, p.meta.rank.unwrap_or(0)),
        },
    };
    let (stack, cut) = program_stack(p, tree, i, syms);
    let ctx = Context {
        kind: kind_name(k, kinds_of(&tree.name)),
        count: node.count,
        count_err: node.count_err,
        bytes: node.bytes,
        bytes_err: node.bytes_err,
        leaked_bytes: node.live_bytes,
        peak_live_bytes: node.peak_live_bytes,
        temporary: node.temporary,
        spread,
        cut,
        stack,
        inside_mpi: None,
        hot: true,
    };
    Some((ctx, k >= UNTRACED_KIND))
}

/// Whether a stack (innermost first) was cut at the frame limit
/// (`WMHCCT_MAX_DEPTH`): the walk stops there, so a stack of that many frames
/// may have had outer callers. Not when its outermost frame is where every
/// stack of a thread begins (`_start`, `clone3`, `clone`): nothing calls it.
pub fn stack_cut(stack: &[StackFrame], max_depth: u32) -> bool {
    const BOTTOMS: [&str; 3] = ["_start", "clone3", "clone"];
    max_depth > 0
        && stack.len() >= max_depth as usize
        && !stack
            .last()
            .is_some_and(|f| BOTTOMS.contains(&f.function.as_str()))
}

/// Node `i`'s stack as the reader shows it, innermost first, and whether it
/// was cut at the frame limit ([`stack_cut`], judged on every recorded
/// frame): without the tracer's own frames ([`is_tracer_module`]).
pub(crate) fn program_stack(
    p: &Profile,
    tree: &Tree,
    i: usize,
    syms: &Symbols,
) -> (Vec<StackFrame>, bool) {
    let mut stack = stack_of(p, tree, i, syms);
    let cut = stack_cut(&stack, p.config.max_depth);
    stack.retain(|f| !is_tracer_module(&f.module));
    (stack, cut)
}

/// Whether `module` (a path) is one of wmhcct's own libraries
/// (`libwmhcct.so`, the MPI side `libwmhcct_mpi_openmpi.so`, …). Their
/// frames in a stack are the tracer's MPI wrappers, between the program's
/// call (`MPI_Init` in `main`) and the MPI library's (`PMPI_Init`): none of
/// the program's code, and the same in every context they are in.
pub fn is_tracer_module(module: &str) -> bool {
    let name = module.rsplit('/').next().unwrap_or(module);
    name.starts_with("libwmhcct") && name.contains(".so")
}

/// Frames from node `i`'s parent up to (excluding) the root.
fn stack_of(p: &Profile, tree: &Tree, i: usize, syms: &Symbols) -> Vec<StackFrame> {
    let mut out = Vec::new();
    let mut cur = tree.nodes[i].parent;
    // Parents always precede children (validated), so this terminates.
    while cur != NO_PARENT && (cur as usize) < tree.nodes.len() {
        let node = &tree.nodes[cur as usize];
        match node.key {
            FrameKey::Root => break,
            FrameKey::Addr { module, offset } => {
                let f = syms.get(module, offset);
                out.push(StackFrame {
                    function: f.function,
                    file: f.file,
                    line: f.line,
                    module: p
                        .modules
                        .get(module as usize)
                        .map(|m| m.path.clone())
                        .unwrap_or_default(),
                    address: offset,
                });
            }
            FrameKey::Unknown(raw) => out.push(StackFrame {
                function: "??".into(),
                file: String::new(),
                line: 0,
                module: String::new(),
                address: raw,
            }),
            FrameKey::Kind(_) => {}
        }
        cur = node.parent;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{is_tracer_module, stack_cut, view_mask, SortKey, StackFrame};
    use wmhcct_collector::query::hcct_mask;
    use wmhcct_format::{FrameKey, Node, Profile, Tree};

    /// A leaf context of `count` calls and `bytes` bytes under the root,
    /// holding `live` bytes at the end, `at_peak` at the heap's peak and
    /// `temporary` temporaries.
    fn leaf(count: u64, bytes: u64, live: u64, at_peak: u64, temporary: u64) -> Node {
        Node {
            parent: 0,
            key: FrameKey::Kind(0),
            count,
            bytes,
            live_bytes: live,
            peak_live_bytes: at_peak,
            temporary,
            ..Node::root()
        }
    }

    #[test]
    fn a_view_by_a_heap_figure_adds_the_cold_contexts_holding_phi_of_it() {
        let mut p = Profile::default();
        p.config.phi = 0.01;
        (p.heap.live_bytes, p.heap.peak_bytes, p.heap.temporary_count) = (1000, 100_000, 500);
        let tree = Tree {
            name: "alloc".into(),
            total_count: 10_000,
            total_bytes: 1_000_000,
            nodes: vec![
                Node::root(),
                // Hot by count and by bytes, holding nothing.
                leaf(9000, 990_000, 0, 0, 0),
                // Cold, leaking all of the live heap.
                leaf(5, 500, 500, 500, 0),
                // Cold, exactly φ of the live heap, the peak and the
                // temporaries.
                leaf(5, 500, 10, 1000, 5),
                // Cold, just below φ of each.
                leaf(5, 500, 9, 999, 4),
                // A frame holds no figure of its own.
                Node {
                    key: FrameKey::Unknown(7),
                    live_bytes: 500,
                    ..leaf(0, 0, 0, 0, 0)
                },
            ],
            ..Default::default()
        };
        let hot = hcct_mask(&tree, p.config.phi);
        assert_eq!(hot, [true, true, false, false, false, false]);
        let view = |by| view_mask(&p, &tree, &hot, by);
        assert_eq!(view(SortKey::Count), hot);
        assert_eq!(view(SortKey::Bytes), hot);
        assert_eq!(
            view(SortKey::Leaked),
            [true, true, true, true, false, false]
        );
        assert_eq!(view(SortKey::Peak), [true, true, false, true, false, false]);
        assert_eq!(
            view(SortKey::Temporary),
            [true, true, false, true, false, false]
        );
        // Nothing in the heap: no cold context has a share of it.
        p.heap.live_bytes = 0;
        let zero = leaf(5, 500, 0, 0, 0);
        let tree = Tree {
            nodes: vec![Node::root(), zero],
            ..tree
        };
        let hot = hcct_mask(&tree, p.config.phi);
        assert_eq!(view_mask(&p, &tree, &hot, SortKey::Leaked), [true, false]);
    }

    #[test]
    fn the_tracers_own_libraries_are_known_by_name() {
        for m in [
            "/opt/wmhcct/lib/libwmhcct.so",
            "libwmhcct.so",
            "/work/target/release/libwmhcct_mpi_openmpi.so",
            "/x/libwmhcct_mpi.so",
        ] {
            assert!(is_tracer_module(m), "{m}");
        }
        for m in [
            "/lib/x86_64-linux-gnu/libmpi.so.40",
            "/home/u/bin/libwmhcct_demo",
            "/home/u/libwmhcct/app",
            "",
        ] {
            assert!(!is_tracer_module(m), "{m}");
        }
    }

    fn stack(outermost: &str, len: usize) -> Vec<StackFrame> {
        (0..len)
            .map(|i| StackFrame {
                function: if i + 1 == len {
                    outermost.into()
                } else {
                    format!("f{i}")
                },
                file: String::new(),
                line: 0,
                module: "/bin/app".into(),
                address: i as u64,
            })
            .collect()
    }

    #[test]
    fn a_stack_is_cut_when_it_fills_the_limit_below_a_caller() {
        assert!(stack_cut(&stack("solve", 8), 8));
        assert!(!stack_cut(&stack("solve", 7), 8));
        // Nothing calls where a thread's stack begins.
        for bottom in ["_start", "clone3", "clone"] {
            assert!(!stack_cut(&stack(bottom, 8), 8), "{bottom}");
        }
        assert!(!stack_cut(&[], 0));
    }
}
