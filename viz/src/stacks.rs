//! Every context of the allocation tree as a symbolised stack, for the
//! folded export, the flame graph and the diff (which need all contexts, not
//! only the hot ones `contexts` selects).

use wmhcct_format::{FrameKey, Profile, UNTRACED_KIND};

use crate::contexts::{alloc_tree, kinds_of, program_stack, StackFrame};
use crate::symbolize::{kind_name, Symbols};

/// One context: its allocator, frames root first, and its counters.
#[derive(Clone, Debug)]
pub struct Stack {
    pub kind: String,
    /// Outermost first (the root side), the allocator's caller last.
    pub frames: Vec<StackFrame>,
    pub count: u64,
    pub bytes: u64,
    /// Bytes still allocated at the end.
    pub leaked_bytes: u64,
    /// Bytes live at the heap's peak.
    pub peak_live_bytes: u64,
    /// Temporary allocations.
    pub temporary: u64,
    /// No stack was captured (an untraced pseudo-context).
    pub untraced: bool,
    /// Cut at the frame limit ([`crate::contexts::stack_cut`]).
    pub cut: bool,
}

/// The root-side name of a stack cut at the frame limit.
const CUT: &str = "[cut at WMHCCT_MAX_DEPTH]";

impl Stack {
    /// The frames innermost first, as labels and the MPI library's
    /// recognition read a stack.
    pub fn innermost_first(&self) -> Vec<StackFrame> {
        self.frames.iter().rev().cloned().collect()
    }

    /// Function names root first (a cut stack under [`CUT`]), then the
    /// allocator.
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = if self.untraced {
            vec!["[untraced]".to_string()]
        } else {
            let cut = self.cut.then(|| CUT.to_string());
            cut.into_iter()
                .chain(self.frames.iter().map(frame_name))
                .collect()
        };
        v.push(self.kind.clone());
        v
    }
}

/// A frame's function, or `??@module+0xoffset`-like text when unknown.
pub fn frame_name(f: &StackFrame) -> String {
    if f.function.is_empty() || f.function == "??" {
        let module = f.module.rsplit('/').next().unwrap_or("");
        if module.is_empty() {
            format!("?? {:#x}", f.address)
        } else {
            format!("?? ({module})")
        }
    } else {
        f.function.clone()
    }
}

/// Every kind (leaf) node of the allocation tree, built one at a time as
/// the caller takes them: a report of 10^5 contexts 128 frames deep holds
/// 10^7 frames, which, built all at once with their names, took gigabytes
/// to read a report of 2 MB.
pub fn stacks<'a>(p: &'a Profile, syms: &'a Symbols) -> impl Iterator<Item = Stack> + 'a {
    let tree = alloc_tree(p);
    let kinds = tree.map_or(&[][..], |t| kinds_of(&t.name));
    tree.into_iter().flat_map(move |tree| {
        tree.nodes.iter().enumerate().filter_map(move |(i, n)| {
            let FrameKey::Kind(k) = n.key else {
                return None;
            };
            let (mut frames, cut) = program_stack(p, tree, i, syms);
            frames.reverse();
            Some(Stack {
                kind: kind_name(k, kinds),
                frames,
                count: n.count,
                bytes: n.bytes,
                leaked_bytes: n.live_bytes,
                peak_live_bytes: n.peak_live_bytes,
                temporary: n.temporary,
                untraced: k >= UNTRACED_KIND,
                cut,
            })
        })
    })
}
