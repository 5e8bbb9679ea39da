//! What one capture did, and per-thread totals.

/// Outcome of one [`crate::ThreadUnwinder::capture`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Capture {
    /// Frames in the result (`frames().len()`).
    pub depth: usize,
    /// Root-side frames identical (return address and stack pointer) to the previous
    /// capture's, computed by comparison in every mode; 0 when either stack is truncated
    /// or ended in an error (their root ends are not the real root).
    pub unchanged_root: usize,
    /// Result frames obtained by unwinding in this capture.
    pub unwound: usize,
    /// Result frames taken from the previous capture (heuristic modes).
    pub reused: usize,
    /// `max_depth` was reached with more frames left.
    pub truncated: bool,
    /// An unwinding step failed; the stack may lack root-side frames.
    pub error: bool,
    /// With `validate`: whether a full unwind gave the same return addresses.
    pub validated: Option<bool>,
}

/// Per-thread totals.
#[derive(Default, Clone, Debug)]
pub struct UnwindStats {
    /// Captures, including those in [`crate::Mode::None`].
    pub events: u64,
    pub frames_unwound: u64,
    pub frames_reused: u64,
    /// Captures checked against a full unwind.
    pub validated: u64,
    /// Checked captures that matched.
    pub correct: u64,
    /// Heuristic captures done as a full unwind (first event, every `reseed_every`, after a
    /// `reseed_gap_ns` idle gap, or after a previous capture that was not complete).
    pub reseeds: u64,
    pub truncated: u64,
    pub errors: u64,
}

impl UnwindStats {
    /// Adds another thread's totals (for folding a finished thread into its process).
    pub fn merge(&mut self, o: &UnwindStats) {
        self.events += o.events;
        self.frames_unwound += o.frames_unwound;
        self.frames_reused += o.frames_reused;
        self.validated += o.validated;
        self.correct += o.correct;
        self.reseeds += o.reseeds;
        self.truncated += o.truncated;
        self.errors += o.errors;
    }
}
