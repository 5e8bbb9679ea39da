//! The merge's index from a context's (parent id, key) to its id, looked up
//! by the hash of its key path from the root.
//!
//! Keyed by (parent id, key), each lookup waits for the one of the parent
//! (its id is part of the key), so a merge of two trees of 300 000 nodes
//! took one cache miss after another (~350 ns a node in a CP2K job's
//! merge). A node's *path hash* (its parent's path hash with its key)
//! comes from its own tree alone, so the lookups of a tree's next nodes can
//! start while one misses. Two contexts of one path hash are told apart by
//! their (parent id, key): the first to come holds the hash, the others go
//! to an exact index (`collided`), so the ids are those of an exact index,
//! whatever the hashes.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::BuildHasher;

use rustc_hash::FxBuildHasher;
use wmhcct_format::FrameKey;

/// Path hash of the root.
pub const ROOT_PATH: u64 = 0x9E37_79B9_7F4A_7C15;

/// The path hash of the child with `key` of a node of path hash `parent`.
#[inline]
pub fn child_path(parent: u64, key: FrameKey) -> u64 {
    FxBuildHasher.hash_one((parent, key))
}

/// Ids of (parent id, key) pairs; ids are given in order of first insertion.
pub struct PathIndex {
    by_path: HashMap<u64, u32, FxBuildHasher>,
    collided: HashMap<(u32, FrameKey), u32, FxBuildHasher>,
}

impl PathIndex {
    /// Room for `n` ids without growing.
    pub fn with_capacity(n: usize) -> PathIndex {
        PathIndex {
            by_path: HashMap::with_capacity_and_hasher(n, FxBuildHasher),
            collided: HashMap::default(),
        }
    }

    /// The id of (`parent`, `key`), whose path hash is `path`: the one it
    /// has, else `keys.len()` after pushing it onto `keys` (the table of
    /// every id's pair). The same pair must always come with the same path
    /// hash.
    #[inline]
    pub fn id(
        &mut self,
        path: u64,
        parent: u32,
        key: FrameKey,
        keys: &mut Vec<(u32, FrameKey)>,
    ) -> u32 {
        let new = |keys: &mut Vec<(u32, FrameKey)>| {
            keys.push((parent, key));
            (keys.len() - 1) as u32
        };
        match self.by_path.entry(path) {
            Entry::Vacant(v) => *v.insert(new(keys)),
            Entry::Occupied(o) => {
                let id = *o.get();
                if keys.get(id as usize) == Some(&(parent, key)) {
                    id
                } else {
                    *self
                        .collided
                        .entry((parent, key))
                        .or_insert_with(|| new(keys))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(offset: u64) -> FrameKey {
        FrameKey::Addr { module: 0, offset }
    }

    /// Pairs sharing a path hash (forced here) keep distinct ids, and each
    /// is found again under its own.
    #[test]
    fn colliding_paths_get_their_own_ids() {
        let mut keys = vec![(u32::MAX, FrameKey::Root)];
        let mut ix = PathIndex::with_capacity(4);
        let a = ix.id(7, 0, addr(1), &mut keys);
        let b = ix.id(7, 0, addr(2), &mut keys);
        let c = ix.id(7, 1, addr(1), &mut keys);
        assert_eq!((a, b, c), (1, 2, 3));
        assert_eq!(ix.id(7, 0, addr(2), &mut keys), b);
        assert_eq!(ix.id(7, 1, addr(1), &mut keys), c);
        assert_eq!(ix.id(7, 0, addr(1), &mut keys), a);
        assert_eq!(ix.id(8, 0, addr(3), &mut keys), 4);
        assert_eq!(keys.len(), 5);
    }

    #[test]
    fn path_hashes_follow_the_keys() {
        let p = child_path(ROOT_PATH, addr(1));
        assert_eq!(p, child_path(ROOT_PATH, addr(1)));
        assert_ne!(p, child_path(ROOT_PATH, addr(2)));
        assert_ne!(
            child_path(p, FrameKey::Kind(0)),
            child_path(p, FrameKey::Kind(1))
        );
    }
}
