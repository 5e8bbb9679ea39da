//! A thread's position in an HCCT: the node path of its previous event.

/// The MCCT node path of a thread's previous event, root side first (the
/// root itself excluded; the last node is the context's item node), and the
/// frame keys along it. The item node is pinned in its tree, so the whole
/// path stays valid until the cursor moves or is released.
///
/// The three arrays are storage, never shorter than the path (a descent
/// writes its levels in place, without growing them per level): the path is
/// their first `levels` entries, and the item node after them in `path`.
#[derive(Clone, Debug, Default)]
pub struct Cursor {
    /// Id of the tree the path belongs to (0: none).
    pub(crate) owner: u64,
    /// Frame keys, root side first (one per path node except the item).
    pub(crate) keys: Vec<u64>,
    /// Node indices: `levels` frame nodes, then the item node.
    pub(crate) path: Vec<u32>,
    /// Path hashes of the frame nodes (one per key).
    pub(crate) hashes: Vec<u64>,
    /// Frame levels of the current path.
    pub(crate) levels: usize,
    /// The path is complete: `path[levels]` is its item node.
    pub(crate) set: bool,
    /// The item's record (`Mcct::item`) and its generation: the handle the
    /// next event updates and unpins without reading the item's node.
    pub(crate) item: u32,
    pub(crate) leaf_gen: u32,
    /// The item's key (the kind of the path's last event).
    pub(crate) item_key: u64,
    /// The caller's number for the frames of the current path (0: none).
    pub(crate) stamp: u64,
    /// The number the caller gave the next event's frames (0: none).
    pub(crate) next_stamp: u64,
}

impl Cursor {
    pub fn new() -> Cursor {
        Cursor::default()
    }

    /// Depth of the current context (frames plus the item node), 0 when unset.
    pub fn depth(&self) -> usize {
        self.path().len()
    }

    /// The node path, root side first.
    pub fn path(&self) -> &[u32] {
        if self.set {
            self.path.get(..=self.levels).unwrap_or(&[])
        } else {
            &[]
        }
    }

    /// Number the frames of the next event `stamp` (non-zero, one more per
    /// capture on the caller's side), and declare that event's `unchanged`
    /// hint to count root-side frames equal to those of frames number
    /// `stamp - 1`. When those are the frames this cursor's path was built
    /// from, the hint is exact and the collector does not compare those
    /// frames again; otherwise it is verified as usual.
    pub fn stamp_next(&mut self, stamp: u64) {
        self.next_stamp = stamp;
    }

    /// The next event is being recorded: its frames become this cursor's.
    /// Returns whether its hint is exact (relative to this cursor's path).
    pub(crate) fn advance_stamp(&mut self) -> bool {
        let next = std::mem::take(&mut self.next_stamp);
        let exact = next != 0 && self.stamp != 0 && self.stamp.wrapping_add(1) == next;
        self.stamp = next;
        exact
    }

    pub(crate) fn clear(&mut self) {
        self.owner = 0;
        self.levels = 0;
        self.set = false;
        self.item = 0;
        self.leaf_gen = 0;
        self.item_key = 0;
        // The path is gone; a number already given to the next event's
        // frames stays theirs.
        self.stamp = 0;
    }

    /// The item's record and its generation.
    pub(crate) fn leaf(&self) -> Option<(u32, u32)> {
        self.set.then_some((self.item, self.leaf_gen))
    }

    /// Storage for paths of `levels` frame levels (and the item node).
    pub(crate) fn room_for(&mut self, levels: usize) {
        if self.keys.len() < levels || self.hashes.len() < levels || self.path.len() <= levels {
            self.grow(levels);
        }
    }

    #[cold]
    fn grow(&mut self, levels: usize) {
        self.keys.resize(levels.max(self.keys.len()), 0);
        self.hashes.resize(levels.max(self.hashes.len()), 0);
        self.path.resize((levels + 1).max(self.path.len()), 0);
    }
}
