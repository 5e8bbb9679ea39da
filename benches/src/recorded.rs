//! A stream of captured-like stacks recorded ahead of a timed run, so that
//! the timing covers the collector alone, not the stream's generation.

use crate::stream::{Shape, StackStream};

/// `events` stacks of a [`StackStream`], with the heuristic's `unchanged`
/// hints and the sizes.
pub struct Recorded {
    frames: Vec<u64>,
    /// Frames of every stack.
    pub per_stack: usize,
    /// Root-side frames unchanged since the previous event.
    pub unchanged: Vec<usize>,
    pub sizes: Vec<u64>,
}

impl Recorded {
    pub fn new(shape: Shape, events: usize) -> Recorded {
        let mut s = StackStream::new(shape);
        let per_stack = s.frames_per_stack();
        let mut r = Recorded {
            frames: Vec::with_capacity(events * per_stack),
            per_stack,
            unchanged: Vec::with_capacity(events),
            sizes: Vec::with_capacity(events),
        };
        let mut f = Vec::new();
        for _ in 0..events {
            let e = s.next_event(&mut f);
            r.frames.extend_from_slice(&f);
            r.unchanged.push(e.unchanged);
            r.sizes.push(e.size);
        }
        r
    }

    /// Events recorded.
    pub fn len(&self) -> usize {
        self.unchanged.len()
    }

    pub fn is_empty(&self) -> bool {
        self.unchanged.is_empty()
    }

    /// The frames of event `i`, leaf first.
    pub fn stack(&self, i: usize) -> &[u64] {
        &self.frames[i * self.per_stack..(i + 1) * self.per_stack]
    }
}
