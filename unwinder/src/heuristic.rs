//! The walk shared by every mode, with the first/second-match shortcut of the WMTools
//! heuristic traversal (Perks et al., sections 4 and 6).
//!
//! After each unwound frame `(ra, sp)` the walk looks for a frame of the previous capture
//! with the same `sp`: the stack pointer names a height on the stack, so the two stacks are
//! aligned by their root end. If that frame also has the same `ra` it is a match. With the
//! first-match policy the walk stops there and copies the previous capture's remaining
//! root-side frames. This is wrong when the frames below differ but have the same total size
//! (the paper's Figure 3) or are the same functions in another order (Figure 4); the
//! second-match policy lowers that risk by requiring two consecutive matching frames.

use std::ops::Range;

use crate::frame::Frame;
use crate::modules::Modules;
use crate::step::{ReadStack, Step, StepError, StepUnwinder, Stop};

/// Settings of a thread's capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeuristicConfig {
    /// Heuristic modes: do a full unwind every this many events on the thread (0 = never).
    pub reseed_every: u64,
    /// Heuristic modes: do a full unwind when more than this many nanoseconds passed since
    /// the thread's previous event (0 = never).
    pub reseed_gap_ns: u64,
    /// Most frames kept per stack (at most [`HeuristicConfig::MAX_DEPTH_LIMIT`]).
    pub max_depth: usize,
    /// Heuristic modes: before reusing the previous capture's root-side frames, check that
    /// each one's return address is still in its slot on the stack (one word read per
    /// frame); a match that fails the check is ignored and unwinding goes on. Off: the
    /// paper's heuristic as published.
    pub check_reused: bool,
}

impl HeuristicConfig {
    /// `max_depth` is clamped to this.
    pub const MAX_DEPTH_LIMIT: usize = 4096;
}

impl Default for HeuristicConfig {
    /// The README defaults: reseed every 1000 events or after 10 ms idle, 128 frames.
    fn default() -> Self {
        HeuristicConfig {
            reseed_every: 1000,
            reseed_gap_ns: 10_000_000,
            max_depth: 128,
            check_reused: true,
        }
    }
}

/// When to stop unwinding and reuse the previous capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Policy {
    /// Never: unwind the whole stack.
    Never,
    /// At the first frame matching the previous capture.
    First,
    /// At the second of two consecutive matching frames.
    Second,
}

/// Leading frames inside the skip range beyond this end the walk.
pub(crate) const MAX_SKIPPED: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Walk {
    pub(crate) unwound: usize,
    /// Frames taken from the previous capture.
    pub(crate) reused: usize,
    pub(crate) stop: Stop,
    /// When the walk ends [`Stop::Reused`]: how many of its last frames
    /// are, leaf to root, the previous capture's frames just below the
    /// reused ones, all matched one after the other (at least the match
    /// that ended it). With the reused tail, the root side the two stacks
    /// share: what `common_root_len` would count, found without comparing
    /// again (`prev` and the walk both ascend strictly, so a frame equal to
    /// `prev[i]` is the one matched at `i`). 0 otherwise.
    pub(crate) matched: usize,
    /// Text range `[start, end)` of the module the last frame checked was
    /// in (a hint for the next walk over the same module table).
    pub(crate) text: (u64, u64),
}

impl Walk {
    /// The stack goes on with the last `tail()` frames of the previous
    /// capture, which are not in the output: all the reused ones when the
    /// walk ends `Reused`; none otherwise (reused frames cut by the depth
    /// limit are not the root end, and are copied into the output).
    #[inline]
    pub(crate) fn tail(&self) -> usize {
        if self.stop == Stop::Reused {
            self.reused
        } else {
            0
        }
    }

    pub(crate) fn truncated(&self) -> bool {
        self.stop == Stop::Depth
    }
}

/// Everything a walk needs besides the step source and the output.
pub(crate) struct WalkInput<'a> {
    pub(crate) modules: &'a Modules,
    /// The capture-point frame (pc, sp).
    pub(crate) first: Frame,
    pub(crate) skip: Range<u64>,
    pub(crate) max_depth: usize,
    pub(crate) policy: Policy,
    /// See [`HeuristicConfig::check_reused`].
    pub(crate) check_reused: bool,
    /// The previous capture, leaf first (strictly increasing `sp`); only used by the
    /// heuristic policies, and only if it was complete.
    pub(crate) prev: &'a [Frame],
    /// Text range `[start, end)` of a module of `modules` (empty: none), checked before
    /// the table is searched: the previous walk's last module.
    pub(crate) text: (u64, u64),
}

/// A walk's output: up to its capacity frames, leaf first, in a buffer
/// allocated once. A walk writes the frames by index and sets the length
/// once at its end, so no length in memory is read and written per frame
/// (as `Vec::push` does).
#[derive(Clone, Debug)]
pub(crate) struct FrameBuf {
    buf: Box<[Frame]>,
    len: usize,
}

impl FrameBuf {
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        FrameBuf {
            buf: vec![Frame::default(); capacity].into_boxed_slice(),
            len: 0,
        }
    }

    #[inline]
    pub(crate) fn as_slice(&self) -> &[Frame] {
        &self.buf[..self.len]
    }

    pub(crate) fn capacity(&self) -> usize {
        self.buf.len()
    }
}

impl std::ops::Deref for FrameBuf {
    type Target = [Frame];
    #[inline]
    fn deref(&self) -> &[Frame] {
        self.as_slice()
    }
}

/// Walks a stack into `out` (emptied first, at most `max_depth` frames and
/// its capacity): the whole stack, or with the heuristic its leaf side, the
/// rest being the previous capture's last [`Walk::tail`] frames.
///
/// The capture-point frame comes first; every frame must have its address inside a
/// module, and the walk ends ([`Stop::OutsideModules`]) at the first that does not: a
/// capture point outside is the stack's one frame. Leading frames whose address
/// lies in `skip` are dropped.
#[inline(always)]
pub(crate) fn walk<S: StepUnwinder, R: ReadStack + ?Sized>(
    steps: &mut S,
    input: &WalkInput<'_>,
    read: &mut R,
    out: &mut FrameBuf,
) -> Walk {
    out.len = 0;
    let limit = input.max_depth.min(out.buf.len());
    let buf = &mut out.buf[..limit];
    // Frames written to `buf`: all unwound ones until the walk ends.
    let mut n = 0;
    let prev = input.prev;
    let mut skipped = 0;
    // First index of `prev` whose sp is not below the current frame's.
    let mut cursor = 0;
    // `prev` index matched by the frame just pushed (for the second-match
    // policy), or `NO_MATCH`, whose successor is no index.
    let mut pending = NO_MATCH;
    let first_policy = input.policy == Policy::First;
    // Frames matched one after the other (at consecutive `prev` indices),
    // up to the one just pushed if it matched.
    let mut matched = 0;
    let mut candidate = input.first;
    // Text range of the module the previous frame was in: most callers are in the same one.
    let mut known = input.text.0..input.text.1;
    // The capture point in code no module covers: a library whose
    // constructor allocates while `dlopen` is still running it, which the
    // caller's table does not hold yet, or JIT code. Stepping from it would
    // use the frame-pointer fallback with whatever rbp holds.
    if !known.contains(&candidate.ra) {
        match input.modules.text_of(candidate.ra) {
            Some(t) => known = t,
            None => return outside_first(input, out),
        }
    }
    // One step: the next frame becomes the candidate (in a module), or
    // `Err` with how the walk ends.
    macro_rules! step {
        ($step:expr) => {
            match $step {
                Step::Frame(f) if input.modules.is_stack_root(f.ra) => Err(Stop::Complete),
                Step::Frame(f) => {
                    candidate = f;
                    if known.contains(&f.ra) {
                        Ok(())
                    } else {
                        match input.modules.text_of(f.ra) {
                            Some(t) => {
                                known = t;
                                Ok(())
                            }
                            None => Err(Stop::OutsideModules(f.ra)),
                        }
                    }
                }
                Step::End => Err(Stop::Complete),
                Step::Failed(e) => Err(Stop::Failed(e)),
            }
        };
    }
    let stop = 'walk: {
        // The leading frames in the skip range: dropped. (The step is
        // inlined here too: out of line it would take the steps' state by
        // reference, and that state would live in memory for the main loop.)
        while input.skip.contains(&candidate.ra) {
            skipped += 1;
            if skipped > MAX_SKIPPED {
                break 'walk Stop::Failed(StepError::TooManySkipped(MAX_SKIPPED));
            }
            if let Err(stop) = step!(steps.step(read)) {
                break 'walk stop;
            }
        }
        // The others, each written, then matched against the previous capture.
        loop {
            let Some(slot) = buf.get_mut(n) else {
                break Stop::Depth;
            };
            *slot = candidate;
            n += 1;
            if input.policy != Policy::Never {
                cursor = advance(prev, cursor, candidate.sp);
                // Whether this frame matches, and what that makes of the
                // counts, without branching on it: in random order it is a
                // coin toss for the branch predictor (cachegrind: ~3.6
                // mispredicted branches per capture on that test). The one
                // branch left is on a confirmed match, which ends the walk
                // unless the reused-frame check refuses it.
                let hit = prev.get(cursor).is_some_and(|p| same_frame(p, &candidate));
                let consecutive = pending.wrapping_add(1) == cursor;
                let hit_mask = usize::from(hit).wrapping_neg();
                let run = (matched & usize::from(consecutive).wrapping_neg()) + 1;
                matched = (run & hit_mask) | (matched & !hit_mask);
                pending = (cursor & hit_mask) | (NO_MATCH & !hit_mask);
                if hit & (first_policy | consecutive) {
                    let rest = prev.get(cursor + 1..).unwrap_or(&[]);
                    let room = limit - n;
                    let take = rest.len().min(room);
                    if !input.check_reused || read.holds_frames(&rest[..take]) {
                        // The whole root side: left where it is in `prev`
                        // (`Walk::tail`). Cut by the depth limit: copied.
                        let unwound = n;
                        let stop = if take < rest.len() {
                            buf[n..n + take].copy_from_slice(&rest[..take]);
                            n += take;
                            Stop::Depth
                        } else {
                            Stop::Reused
                        };
                        out.len = n;
                        return Walk {
                            unwound,
                            reused: take,
                            stop,
                            matched,
                            text: (known.start, known.end),
                        };
                    }
                }
            }
            if let Err(stop) = step!(steps.step(read)) {
                break stop;
            }
        }
    };
    out.len = n;
    Walk {
        unwound: n,
        reused: 0,
        stop,
        matched: 0,
        text: (known.start, known.end),
    }
}

/// `pending` when the frame just pushed matched nothing: one more than it
/// is no index of `prev`.
const NO_MATCH: usize = usize::MAX - 1;

/// The first index at or after `from` of a frame of `prev` (sorted by `sp`)
/// whose `sp` is not below `sp`. How far that is varies from frame to frame
/// (0, 1, 2 …), so a loop over one frame at a time ended with a mispredicted
/// branch about once per unwound frame; this counts four frames at a time
/// with compares that are added, not branched on (since `prev` is sorted,
/// the count is how many of the four come first).
#[inline(always)]
fn advance(prev: &[Frame], mut from: usize, sp: u64) -> usize {
    while let Some(w) = prev.get(from..from + 4) {
        let n = usize::from(w[0].sp < sp)
            + usize::from(w[1].sp < sp)
            + usize::from(w[2].sp < sp)
            + usize::from(w[3].sp < sp);
        from += n;
        if n < 4 {
            return from;
        }
    }
    // The last three frames (the root end), one at a time.
    while prev.get(from).is_some_and(|f| f.sp < sp) {
        from += 1;
    }
    from
}

/// `a == b` as one test of both words (the derived `==` branches on `ra`
/// before it compares `sp`).
#[inline(always)]
fn same_frame(a: &Frame, b: &Frame) -> bool {
    ((a.ra ^ b.ra) | (a.sp ^ b.sp)) == 0
}

/// The walk of a capture point outside every module: that frame alone (unless
/// skipped), ended there.
#[cold]
#[inline(never)]
fn outside_first(input: &WalkInput<'_>, out: &mut FrameBuf) -> Walk {
    let f = input.first;
    let keep = !input.skip.contains(&f.ra) && input.max_depth > 0 && out.capacity() > 0;
    if keep {
        out.buf[0] = f;
        out.len = 1;
    }
    Walk {
        unwound: usize::from(keep),
        reused: 0,
        stop: Stop::OutsideModules(f.ra),
        matched: 0,
        text: (input.text.0, input.text.1),
    }
}

/// A walk that ended with `stop` before its first frame (`fp::leave_skip`).
pub(crate) fn no_frames(stop: Stop, out: &mut FrameBuf) -> Walk {
    out.len = 0;
    Walk {
        unwound: 0,
        reused: 0,
        stop,
        matched: 0,
        text: (0, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fp::FpSteps;
    use crate::synthetic::{fp_modules, FpStack, TRACER};

    fn run(st: &FpStack, policy: Policy, prev: &[Frame], max_depth: usize) -> (Vec<Frame>, Walk) {
        let modules = fp_modules();
        let input = WalkInput {
            modules: &modules,
            first: crate::Frame {
                ra: st.regs.pc,
                sp: st.regs.sp,
            },
            skip: TRACER,
            max_depth,
            policy,
            check_reused: false,
            prev,
            text: (0, 0),
        };
        let mut out = FrameBuf::with_capacity(max_depth);
        let cap = out.capacity();
        let w = walk(
            &mut FpSteps::new(st.regs),
            &input,
            &mut st.reader(),
            &mut out,
        );
        assert_eq!(out.capacity(), cap, "the output buffer grew");
        let mut out = out.to_vec();
        out.extend_from_slice(&prev[prev.len() - w.tail()..]);
        (out, w)
    }

    #[test]
    fn advance_finds_the_first_frame_not_below() {
        let prev: Vec<Frame> = [10u64, 20, 30, 40, 50, 60, 70, 80, 90]
            .iter()
            .map(|&sp| Frame { ra: sp + 1, sp })
            .collect();
        for from in 0..=prev.len() {
            for sp in 0..100u64 {
                let want = from + prev[from..].iter().take_while(|f| f.sp < sp).count();
                assert_eq!(advance(&prev, from, sp), want, "from {from} sp {sp}");
            }
        }
        assert_eq!(advance(&[], 0, 5), 0);
        assert!(same_frame(&prev[1], &Frame { ra: 21, sp: 20 }));
        assert!(!same_frame(&prev[1], &Frame { ra: 21, sp: 30 }));
        assert!(!same_frame(&prev[1], &Frame { ra: 22, sp: 20 }));
    }

    #[test]
    fn full_walk_skips_the_capture_point_frame() {
        let st = FpStack::build(&[(0x2010, 32), (0x3020, 0)]);
        let (out, w) = run(&st, Policy::Never, &[], 16);
        assert_eq!(out, st.expected()[1..]);
        assert_eq!(w.stop, Stop::Complete);
        assert_eq!((w.unwound, w.reused), (2, 0));
    }

    #[test]
    fn first_match_reuses_the_root_side() {
        let a = FpStack::build(&[(0x2010, 32), (0x3020, 0), (0x4030, 16), (0x5040, 8)]);
        let (prev, _) = run(&a, Policy::Never, &[], 16);
        let b = FpStack::build(&[(0x2010, 32), (0x3020, 0), (0x4030, 16), (0x6050, 24)]);
        let (out, w) = run(&b, Policy::First, &prev, 16);
        assert_eq!(out, b.expected()[1..]);
        assert_eq!(w.stop, Stop::Reused);
        assert_eq!((w.unwound, w.reused), (2, 2));
        let (out2, w2) = run(&b, Policy::Second, &prev, 16);
        assert_eq!(out2, out);
        assert_eq!((w2.unwound, w2.reused), (3, 1));
    }

    #[test]
    fn reuse_is_cut_at_max_depth() {
        let a = FpStack::build(&[(0x2010, 32), (0x3020, 0), (0x4030, 16), (0x5040, 8)]);
        let (prev, _) = run(&a, Policy::Never, &[], 16);
        let b = FpStack::build(&[(0x2010, 32), (0x3020, 0), (0x4030, 16), (0x6050, 24)]);
        let (out, w) = run(&b, Policy::First, &prev, 3);
        assert_eq!(out, b.expected()[1..4]);
        assert_eq!(w.stop, Stop::Depth);
        assert!(w.truncated());
        assert_eq!((w.unwound, w.reused), (2, 1));
    }

    #[test]
    fn endless_skip_range_is_bounded() {
        let chain: Vec<(u64, u64)> = (0..MAX_SKIPPED as u64 + 10)
            .map(|i| (0x1010 + i % 8, 0))
            .collect();
        let st = FpStack::build(&chain);
        let (out, w) = run(&st, Policy::Never, &[], 16);
        assert!(out.is_empty());
        assert_eq!(w.stop, Stop::Failed(StepError::TooManySkipped(MAX_SKIPPED)));
    }
}
