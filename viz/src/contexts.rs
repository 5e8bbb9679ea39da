//! The contexts a report lists: leaf `Kind` nodes of the allocation tree that
//! belong to the (φ, ε)-HCCT (all of them in exact mode), with their stacks.

use wmhcct_collector::query::hcct_mask;
use wmhcct_format::{FrameKey, Profile, Tree, ALLOC_KINDS, MPI_KINDS, NO_PARENT, UNTRACED_KIND};

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
    /// Innermost first: index 0 called the allocator.
    pub stack: Vec<StackFrame>,
}

/// Contexts and untraced pseudo-contexts of the allocation tree, each sorted
/// by count descending, then bytes descending.
pub struct ContextList {
    pub contexts: Vec<Context>,
    pub untraced: Vec<Context>,
}

/// The allocation tree (`trees[0]`, or the tree named "alloc").
pub fn alloc_tree(p: &Profile) -> Option<&Tree> {
    p.trees
        .iter()
        .find(|t| t.name == "alloc")
        .or_else(|| p.trees.first())
}

pub fn contexts(p: &Profile, syms: &Symbols) -> ContextList {
    let mut list = ContextList {
        contexts: Vec::new(),
        untraced: Vec::new(),
    };
    let Some(tree) = alloc_tree(p) else {
        return list;
    };
    let keep = if p.config.exact {
        vec![true; tree.nodes.len()]
    } else {
        hcct_mask(tree, p.config.phi)
    };
    let kinds = kinds_of(&tree.name);
    for (i, node) in tree.nodes.iter().enumerate() {
        let FrameKey::Kind(k) = node.key else {
            continue;
        };
        if !keep[i] {
            continue;
        }
        let ctx = Context {
            kind: kind_name(k, kinds),
            count: node.count,
            count_err: node.count_err,
            bytes: node.bytes,
            bytes_err: node.bytes_err,
            leaked_bytes: node.live_bytes,
            peak_live_bytes: node.peak_live_bytes,
            stack: stack_of(p, tree, i, syms),
        };
        if k >= UNTRACED_KIND {
            list.untraced.push(ctx);
        } else {
            list.contexts.push(ctx);
        }
    }
    for v in [&mut list.contexts, &mut list.untraced] {
        v.sort_by(|a, b| b.count.cmp(&a.count).then(b.bytes.cmp(&a.bytes)));
    }
    list
}

/// Frames from node `i`'s parent up to (excluding) the root.
pub(crate) fn stack_of(p: &Profile, tree: &Tree, i: usize, syms: &Symbols) -> Vec<StackFrame> {
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
