//! One unwinding step (callee frame → caller frame) and why a walk stopped.

use crate::frame::Frame;

/// Why one unwinding step failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StepError {
    /// The read callback refused this address.
    #[error("could not read stack memory at {0:#x}")]
    Read(u64),
    /// The stack pointer did not move towards the root.
    #[error("stack pointer did not increase ({from:#x} -> {to:#x})")]
    NotIncreasing { from: u64, to: u64 },
    /// A frame pointer that is not 8-byte aligned.
    #[error("misaligned frame pointer {0:#x}")]
    MisalignedFp(u64),
    /// Too many leading frames inside the skip range.
    #[error("more than {0} leading frames inside the skip range")]
    TooManySkipped(usize),
    /// Any other framehop failure.
    #[error("DWARF unwinding failed: {0}")]
    Unwinder(framehop::Error),
}

/// How the last capture ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Stop {
    /// No capture yet, or [`crate::Mode::None`].
    #[default]
    NotCaptured,
    /// The unwinder reached the end of the stack (null return address or frame pointer).
    Complete,
    /// A return address outside every known module; the stack ends below it. This is how
    /// an unwind meets code that was loaded after the module list was last refreshed.
    OutsideModules(u64),
    /// The heuristic matched the previous capture and took its root-side frames.
    Reused,
    /// `max_depth` frames were captured and there were more.
    Depth,
    /// An unwinding step failed.
    Failed(StepError),
    /// On a stack the thread switched to (a coroutine or user-level thread:
    /// see [`crate::ThreadUnwinder::set_foreign_stack`]) the walk failed, or
    /// met a return address outside every module (given here), after at
    /// least one frame. Such stacks end in whatever their library put under
    /// the entry function, with no end marker the unwinder knows, so this is
    /// their expected end, not an error.
    ForeignEnd(Option<u64>),
    /// `fp` mode: the frame-pointer chain left the stack or stopped being a
    /// chain after at least one frame. This is where code built without
    /// frame pointers (Debian's glibc, most `-O2` libraries) sits, so it is
    /// the expected end of an `fp` walk, not an error.
    ChainEnd(StepError),
}

impl Stop {
    /// The stack ends at a failure (it may be missing root-side frames).
    pub fn is_error(self) -> bool {
        matches!(self, Stop::Failed(_))
    }
}

/// Result of one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// The caller's frame.
    Frame(Frame),
    /// No caller: the walk is complete.
    End,
    /// The step failed.
    Failed(StepError),
}

/// Produces the caller frames of a stack one by one, leaf to root.
///
/// Each implementation is constructed from the capture-point registers; the walk in
/// `heuristic.rs` decides after every step whether to go on.
pub(crate) trait StepUnwinder {
    fn step<R: ReadStack + ?Sized>(&mut self, read: &mut R) -> Step;
}

/// Reads stack words (bounds-checked by the implementation). Generic rather than `dyn` so
/// that the reads, a few dozen per capture, are inlined. Any `FnMut(u64) -> Result<u64, ()>`
/// is one; a reader of its own type can also give a faster [`ReadStack::holds_frames`].
pub trait ReadStack {
    /// The word at `addr`, or `Err` if it may not be read (the shape of
    /// framehop's read callback, which every `FnMut` reader also serves).
    #[allow(clippy::result_unit_err)]
    fn read_word(&mut self, addr: u64) -> Result<u64, ()>;

    /// Whether each frame's return address is still in its slot: on x86_64 the return
    /// address into a frame's function sits just below the frame's `sp` (the callee's
    /// CFA), so `[sp - 8] == ra` holds for each frame of the current stack. This is the
    /// heuristic's reused-frame check: one word read per reused frame (no unwinding)
    /// rejects the paper's false positives (Figures 3 and 4: matching frames above a
    /// different caller at the same height), which the (ra, sp) match alone cannot see. It
    /// is the whole cost of the check, which is why a reader may do it in one tight loop.
    fn holds_frames(&mut self, frames: &[Frame]) -> bool {
        frames
            .iter()
            .all(|f| f.sp >= 8 && self.read_word(f.sp - 8).is_ok_and(|ra| ra == f.ra))
    }
}

impl<F: FnMut(u64) -> Result<u64, ()> + ?Sized> ReadStack for F {
    #[inline(always)]
    fn read_word(&mut self, addr: u64) -> Result<u64, ()> {
        self(addr)
    }
}
