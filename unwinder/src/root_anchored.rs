//! A stack held leaf first but anchored at the root end of its buffer.
//!
//! Successive stacks of a thread share a long root-side part (the premise of
//! the heuristic). Kept at the end of a fixed buffer, that part stays where it
//! is from one stack to the next: a new stack writes only its leaf side,
//! in front of the root-side entries it keeps, and nothing is copied for the
//! rest. A `Vec` holding the stack leaf first would move or rewrite the whole
//! stack every time.

/// Up to `capacity` entries, leaf first, kept at the end of the buffer.
#[derive(Clone, Debug)]
pub struct RootAnchored<T> {
    buf: Box<[T]>,
    /// The stack is `buf[start..]`.
    start: usize,
}

impl<T: Copy + Default> RootAnchored<T> {
    /// An empty stack that can hold `capacity` entries (allocated here, once).
    pub fn with_capacity(capacity: usize) -> Self {
        RootAnchored {
            buf: vec![T::default(); capacity].into_boxed_slice(),
            start: capacity,
        }
    }

    /// The entries, leaf first.
    #[inline]
    pub fn as_slice(&self) -> &[T] {
        &self.buf[self.start..]
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.buf.len() - self.start
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.start == self.buf.len()
    }

    pub fn capacity(&self) -> usize {
        self.buf.len()
    }

    pub fn clear(&mut self) {
        self.start = self.buf.len();
    }

    /// Make the stack `leaf_len` new leaf-side entries followed by the `keep`
    /// root-side entries it has now (`keep` is clamped to the length), and
    /// return the leaf-side entries to be filled in, leaf first. The kept
    /// entries are not moved. A stack longer than the capacity loses entries
    /// at its root end (the kept ones first, then the leaf side's), as a
    /// depth limit does.
    #[inline]
    pub fn leaf_side_mut(&mut self, leaf_len: usize, keep: usize) -> &mut [T] {
        let cap = self.buf.len();
        let keep = keep.min(self.len());
        if leaf_len + keep <= cap {
            let start = cap - keep - leaf_len;
            self.start = start;
            return &mut self.buf[start..start + leaf_len];
        }
        // Too long: the leaf-most `fit` kept entries move to the end.
        let leaf_len = leaf_len.min(cap);
        let fit = cap - leaf_len;
        let from = cap - keep;
        self.buf.copy_within(from..from + fit, leaf_len);
        self.start = 0;
        &mut self.buf[..leaf_len]
    }

    /// Make the stack `leaf` followed by its `keep` root-side entries (see
    /// [`RootAnchored::leaf_side_mut`]).
    #[inline]
    pub fn replace_leaf_side(&mut self, leaf: &[T], keep: usize) {
        let n = leaf.len().min(self.capacity());
        self.leaf_side_mut(leaf.len(), keep)
            .copy_from_slice(&leaf[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(cap: usize, v: &[u32]) -> RootAnchored<u32> {
        let mut s = RootAnchored::with_capacity(cap);
        s.replace_leaf_side(v, 0);
        s
    }

    #[test]
    fn new_leaf_sides_in_front_of_kept_roots() {
        let mut s = RootAnchored::with_capacity(6);
        assert!(s.is_empty());
        assert_eq!(s.as_slice(), &[] as &[u32]);
        s.replace_leaf_side(&[3, 2, 1], 0);
        assert_eq!(s.as_slice(), [3, 2, 1]);
        // Keep the root two, a longer leaf side.
        s.replace_leaf_side(&[9, 8, 7], 2);
        assert_eq!(s.as_slice(), [9, 8, 7, 2, 1]);
        assert_eq!(s.len(), 5);
        // A shorter one.
        s.replace_leaf_side(&[4], 3);
        assert_eq!(s.as_slice(), [4, 7, 2, 1]);
        // Everything kept: unchanged.
        s.replace_leaf_side(&[], 4);
        assert_eq!(s.as_slice(), [4, 7, 2, 1]);
        // Keep more than there is: all of it.
        s.replace_leaf_side(&[5], 99);
        assert_eq!(s.as_slice(), [5, 4, 7, 2, 1]);
        // Nothing kept.
        s.replace_leaf_side(&[6, 6], 0);
        assert_eq!(s.as_slice(), [6, 6]);
        s.clear();
        assert!(s.is_empty());
        s.replace_leaf_side(&[1], 5);
        assert_eq!(s.as_slice(), [1]);
    }

    #[test]
    fn the_leaf_side_is_filled_in_place() {
        let mut s = stack(4, &[2, 1]);
        s.leaf_side_mut(2, 1).copy_from_slice(&[7, 8]);
        assert_eq!(s.as_slice(), [7, 8, 1]);
    }

    #[test]
    fn too_long_loses_the_root_end() {
        let mut s = stack(5, &[5, 4, 3, 2, 1]);
        // 3 new + 4 kept = 7 > 5: the root-most two kept ones go.
        s.replace_leaf_side(&[9, 8, 7], 4);
        assert_eq!(s.as_slice(), [9, 8, 7, 4, 3]);
        // A leaf side longer than the buffer: its leaf-most part only.
        s.replace_leaf_side(&[1, 2, 3, 4, 5, 6, 7], 2);
        assert_eq!(s.as_slice(), [1, 2, 3, 4, 5]);
        let mut z: RootAnchored<u32> = RootAnchored::with_capacity(0);
        z.replace_leaf_side(&[1, 2], 1);
        assert!(z.is_empty());
    }

    #[test]
    fn same_as_a_vec_for_every_split() {
        let old = [10, 11, 12, 13];
        for cap in 0..8 {
            for keep in 0..6 {
                for n in 0..6 {
                    let mut s = stack(cap, &old);
                    let had = s.as_slice().to_vec();
                    let leaf: Vec<u32> = (0..n as u32).collect();
                    s.replace_leaf_side(&leaf, keep);
                    let k = keep.min(had.len());
                    let mut want = leaf.clone();
                    want.extend_from_slice(&had[had.len() - k..]);
                    want.truncate(cap);
                    assert_eq!(s.as_slice(), want, "cap {cap} keep {keep} n {n}");
                }
            }
        }
    }
}
