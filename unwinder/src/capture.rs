//! Per-thread capture state: framehop's cache, the previous stack and the counters.

use std::ops::Range;

use crate::dwarf::{DwarfSteps, StepCache};
use crate::fp::{leave_skip, FpSteps};
use crate::frame::{common_root_len, same_return_addresses, Frame, Regs};
use crate::heuristic::{no_frames, walk, FrameBuf, HeuristicConfig, Policy, Walk, WalkInput};
use crate::mode::Mode;
use crate::modules::Modules;
use crate::root_anchored::RootAnchored;
use crate::stats::{Capture, UnwindStats};
use crate::step::{ReadStack, Stop};

/// How a single frame is unwound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepKind {
    /// DWARF CFI through framehop (falls back to the frame pointer where a module has no
    /// unwind information).
    Dwarf,
    /// Frame-pointer chain only.
    Fp,
}

/// One per thread.
pub struct ThreadUnwinder {
    mode: Mode,
    policy: Policy,
    steps: StepKind,
    cfg: HeuristicConfig,
    cache: StepCache,
    /// The latest capture: the result, and the next capture's reference.
    /// Root-anchored, so a walk that reuses its root side writes only the
    /// frames it unwound.
    stack: RootAnchored<Frame>,
    /// The frames a walk unwinds.
    walked: FrameBuf,
    /// Scratch for validation.
    check: FrameBuf,
    /// `stack` is complete (not truncated, no error).
    complete: bool,
    /// Heuristic captures since the last full unwind.
    since_reseed: u64,
    last_ns: Option<u64>,
    last_stop: Stop,
    stats: UnwindStats,
    /// The module table's id and the text range the last walk ended in.
    text: (u64, (u64, u64)),
    /// The capture point (pc, sp) of the latest capture.
    last_point: (u64, u64),
    /// See [`ThreadUnwinder::set_foreign_stack`].
    foreign: bool,
}

impl ThreadUnwinder {
    /// Allocates the framehop cache and three `max_depth` frame buffers.
    /// `cfg.max_depth` is clamped to [`HeuristicConfig::MAX_DEPTH_LIMIT`].
    pub fn new(mode: Mode, cfg: HeuristicConfig) -> Self {
        let cfg = HeuristicConfig {
            max_depth: cfg.max_depth.min(HeuristicConfig::MAX_DEPTH_LIMIT),
            ..cfg
        };
        let (policy, steps) = match mode {
            Mode::None | Mode::Full => (Policy::Never, StepKind::Dwarf),
            Mode::Fp => (Policy::Never, StepKind::Fp),
            Mode::First => (Policy::First, StepKind::Dwarf),
            Mode::Second => (Policy::Second, StepKind::Dwarf),
        };
        let buf = || FrameBuf::with_capacity(cfg.max_depth);
        ThreadUnwinder {
            mode,
            policy,
            steps,
            cfg,
            cache: StepCache::new(),
            stack: RootAnchored::with_capacity(cfg.max_depth),
            walked: buf(),
            check: buf(),
            complete: false,
            since_reseed: 0,
            last_ns: None,
            last_stop: Stop::NotCaptured,
            stats: UnwindStats::default(),
            text: (0, (0, 0)),
            last_point: (0, 0),
            foreign: false,
        }
    }

    /// Same as [`ThreadUnwinder::new`] with an explicit way of unwinding one frame: e.g.
    /// `Mode::Second` with [`StepKind::Fp`] runs the heuristic over frame-pointer steps, and
    /// `Mode::Full` with [`StepKind::Fp`] is the same as `Mode::Fp`. Validation uses the
    /// same step kind.
    pub fn with_steps(mode: Mode, cfg: HeuristicConfig, steps: StepKind) -> Self {
        let mut t = Self::new(mode, cfg);
        t.steps = steps;
        t
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn step_kind(&self) -> StepKind {
        self.steps
    }

    pub fn config(&self) -> &HeuristicConfig {
        &self.cfg
    }

    /// Whether the thread's rule cache asks to grow: its captures met more
    /// call sites than it holds well. [`ThreadUnwinder::grow_caches`] does it.
    #[inline]
    pub fn wants_growth(&self) -> bool {
        self.cache.rules.wants_growth()
    }

    /// Grows the thread's rule cache if it [`wants_growth`]: a cache starts
    /// small (4 KiB, most of a thread's unwinding state) and doubles, up to
    /// 64 KiB, as the thread meets call sites. Allocates, so call it after a
    /// capture, never from one; without the memory the cache stays as it is.
    ///
    /// [`wants_growth`]: ThreadUnwinder::wants_growth
    pub fn grow_caches(&mut self) {
        self.cache.rules.grow();
    }

    /// Slots of the thread's rule cache.
    pub fn rule_slots(&self) -> usize {
        self.cache.rules.len()
    }

    /// Functions whose CFI rows the rule cache evaluated whole
    /// (`cfi_rows.rs`).
    pub fn cfi_functions_evaluated(&self) -> u64 {
        self.cache.rules.functions_evaluated()
    }

    /// Result of the latest capture, leaf first; empty before the first capture and in
    /// [`Mode::None`].
    pub fn frames(&self) -> &[Frame] {
        self.stack.as_slice()
    }

    pub fn stats(&self) -> &UnwindStats {
        &self.stats
    }

    /// How the latest capture ended; [`Stop::OutsideModules`] tells the caller which
    /// address no known module covers (so that the module list can be refreshed).
    pub fn last_stop(&self) -> Stop {
        self.last_stop
    }

    /// Whether the next captures are on a stack the thread switched to (a
    /// coroutine's or user-level thread's, a signal handler's alternate
    /// stack) rather than its own: a walk there that fails or leaves the
    /// modules after at least one frame has reached that stack's end
    /// ([`Stop::ForeignEnd`]), a complete stack and no error.
    pub fn set_foreign_stack(&mut self, foreign: bool) {
        self.foreign = foreign;
    }

    /// Forgets the previous stack, so the next heuristic capture is a full unwind (e.g.
    /// after modules changed or in a forked child).
    pub fn forget(&mut self) {
        self.stack.clear();
        self.complete = false;
        self.last_ns = None;
    }

    fn run<R: ReadStack + ?Sized>(
        &mut self,
        modules: &Modules,
        regs: Regs,
        skip: Range<u64>,
        read: &mut R,
        policy: Policy,
        into_check: bool,
    ) -> Walk {
        let input = WalkInput {
            modules,
            first: Frame {
                ra: regs.pc,
                sp: regs.sp,
            },
            skip,
            max_depth: self.cfg.max_depth,
            policy,
            check_reused: self.cfg.check_reused,
            prev: self.stack.as_slice(),
            text: if self.text.0 == modules.id() {
                self.text.1
            } else {
                (0, 0)
            },
        };
        let out = if into_check {
            &mut self.check
        } else {
            &mut self.walked
        };
        let w = match self.steps {
            StepKind::Dwarf => {
                let mut s = DwarfSteps::new(modules, &mut self.cache, regs);
                walk(&mut s, &input, read, out)
            }
            StepKind::Fp => fp_walk(modules, &mut self.cache, regs, input, read, out),
        };
        self.text = (modules.id(), w.text);
        w
    }

    /// A full unwind into `check`, compared with `cur` (counted in the stats).
    fn validate<R: ReadStack + ?Sized>(
        &mut self,
        modules: &Modules,
        regs: Regs,
        skip: Range<u64>,
        read: &mut R,
    ) -> bool {
        self.run(modules, regs, skip, read, Policy::Never, true);
        let ok = same_return_addresses(self.stack.as_slice(), &self.check);
        self.stats.validated += 1;
        self.stats.correct += u64::from(ok);
        ok
    }

    /// Captures the stack at `regs`.
    ///
    /// `skip`: leading (leaf-side) frames whose address lies in this range are dropped (the
    /// tracer's own frames; the capture-point frame `(pc, sp)` is one of them when `pc` is
    /// inside). `now_ns` drives the reseed-gap rule. `validate`: also do a full unwind and
    /// compare the return addresses (counted in the stats). The result stays available
    /// through [`ThreadUnwinder::frames`] until the next capture. Never allocates and never
    /// panics; reads that fail end the stack (`error`).
    pub fn capture<R: ReadStack + ?Sized>(
        &mut self,
        modules: &Modules,
        regs: Regs,
        skip: Range<u64>,
        read: &mut R,
        now_ns: u64,
        validate: bool,
    ) -> Capture {
        self.stats.events += 1;
        let gap = self.last_ns.map(|t| now_ns.saturating_sub(t));
        self.last_ns = Some(now_ns);
        if self.mode == Mode::None {
            self.stack.clear();
            self.complete = false;
            self.last_stop = Stop::NotCaptured;
            return Capture::default();
        }

        let prev_complete = self.complete;

        let mut policy = self.policy;
        if policy != Policy::Never {
            let cfg = &self.cfg;
            let reseed = !prev_complete
                || self.stack.is_empty()
                || (cfg.reseed_every > 0 && self.since_reseed + 1 >= cfg.reseed_every)
                || (cfg.reseed_gap_ns > 0 && gap.is_none_or(|g| g > cfg.reseed_gap_ns));
            if reseed {
                policy = Policy::Never;
                self.stats.reseeds += 1;
                self.since_reseed = 0;
            } else {
                self.since_reseed += 1;
            }
        }

        let point = (regs.pc, regs.sp);
        let last_point = std::mem::replace(&mut self.last_point, point);
        // The capture point is where the previous capture's was (same
        // instruction, same stack pointer: the same frame of the same
        // function) and each of that capture's frames still has its return
        // address in its slot: the stack is the previous one. Before any
        // unwinding step, so a burst of events from one call site costs one
        // word read per frame. Only with the reused-frame check (off, the
        // published heuristic decides as before).
        if policy != Policy::Never
            && self.cfg.check_reused
            && prev_complete
            && last_point == point
            && !self.stack.is_empty()
            && read.holds_frames(self.stack.as_slice())
        {
            self.last_stop = Stop::Reused;
            let depth = self.stack.len();
            let validated = validate.then(|| self.validate(modules, regs, skip, read));
            self.stats.frames_reused += depth as u64;
            return Capture {
                depth,
                unchanged_root: depth,
                unwound: 0,
                reused: depth,
                truncated: false,
                error: false,
                validated,
            };
        }

        let mut w = self.run(modules, regs, skip.clone(), read, policy, false);
        if self.mode == Mode::Fp && !self.walked.is_empty() {
            if let Stop::Failed(e) = w.stop {
                w.stop = Stop::ChainEnd(e);
            }
        }
        if self.foreign && !self.walked.is_empty() {
            match w.stop {
                Stop::Failed(_) | Stop::ChainEnd(_) => w.stop = Stop::ForeignEnd(None),
                Stop::OutsideModules(ra) => w.stop = Stop::ForeignEnd(Some(ra)),
                _ => {}
            }
        }
        let truncated = w.truncated();
        let error = w.stop.is_error();
        // A stack that ended at an address no module covers is no reference for the
        // heuristic: once the caller learns of the module (code loaded late, MPI's plugins),
        // reusing it would cut every later stack short there.
        let outside = matches!(w.stop, Stop::OutsideModules(_));
        let complete = !truncated && !error && !outside;
        self.complete = complete;
        self.last_stop = w.stop;

        // The new stack is `walked` then the previous one's last `tail`
        // frames, which stay where they are.
        let tail = w.tail();
        let prev = self.stack.as_slice();
        let unchanged_root = if complete && prev_complete {
            if w.stop == Stop::Reused {
                // The walk counted its matched frames below the tail.
                tail + w.matched
            } else {
                tail + common_root_len(&self.walked, &prev[..prev.len() - tail])
            }
        } else {
            0
        };
        self.stack.replace_leaf_side(&self.walked, tail);

        let validated = validate.then(|| self.validate(modules, regs, skip, read));

        self.stats.frames_unwound += w.unwound as u64;
        self.stats.frames_reused += w.reused as u64;
        self.stats.truncated += u64::from(truncated);
        self.stats.errors += u64::from(error);
        Capture {
            depth: self.stack.len(),
            unchanged_root,
            unwound: w.unwound,
            reused: w.reused,
            truncated,
            error,
            validated,
        }
    }
}

/// The `fp` mode's walk. From inside the skip range it starts at the first
/// frame outside (`fp::leave_skip`). Out of line, so that the default
/// path's walk is the only one in `ThreadUnwinder::run`.
#[inline(never)]
fn fp_walk<R: ReadStack + ?Sized>(
    modules: &Modules,
    cache: &mut StepCache,
    regs: Regs,
    input: WalkInput<'_>,
    read: &mut R,
    out: &mut FrameBuf,
) -> Walk {
    if !input.skip.contains(&regs.pc) {
        return walk(&mut FpSteps::new(regs), &input, read, out);
    }
    let dwarf = DwarfSteps::new(modules, cache, regs);
    match leave_skip(dwarf, modules, &input.skip, read) {
        Ok(regs) => {
            let input = WalkInput {
                first: Frame {
                    ra: regs.pc,
                    sp: regs.sp,
                },
                ..input
            };
            walk(&mut FpSteps::new(regs), &input, read, out)
        }
        Err(stop) => no_frames(stop, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::step::StepError;
    use crate::step::{Step, StepUnwinder};
    use crate::synthetic::{fp_modules, CfiModule, CfiStack, FpStack, CFI_FUNCS, TRACER};
    use crate::ModuleData;

    /// The paper's heuristic as published (no check of reused frames).
    fn cfg(max_depth: usize) -> HeuristicConfig {
        HeuristicConfig {
            reseed_every: 0,
            reseed_gap_ns: 0,
            max_depth,
            check_reused: false,
        }
    }

    /// `cfg` with the reused-frame check (the default).
    fn checked(max_depth: usize) -> HeuristicConfig {
        HeuristicConfig {
            check_reused: true,
            ..cfg(max_depth)
        }
    }

    /// A heuristic (or other) unwinder over frame-pointer steps.
    fn fp_unwinder(mode: Mode) -> ThreadUnwinder {
        ThreadUnwinder::with_steps(mode, cfg(64), StepKind::Fp)
    }

    fn cap(t: &mut ThreadUnwinder, st: &FpStack, now: u64, validate: bool) -> Capture {
        let cap_before = (t.stack.capacity(), t.walked.capacity(), t.check.capacity());
        let c = t.capture(
            &fp_modules(),
            st.regs,
            TRACER,
            &mut st.reader(),
            now,
            validate,
        );
        let cap_after = (t.stack.capacity(), t.walked.capacity(), t.check.capacity());
        assert_eq!(cap_before, cap_after, "a frame buffer grew");
        assert_eq!(c.depth, t.frames().len());
        assert_eq!(c.depth, c.unwound + c.reused);
        assert!(t.frames().windows(2).all(|w| w[0].sp < w[1].sp));
        c
    }

    /// The right answer for an FpStack built with a pc inside the tracer.
    fn truth(st: &FpStack) -> Vec<Frame> {
        st.expected()[1..].to_vec()
    }

    // Return addresses of synthetic app functions.
    const A: u64 = 0x2010;
    const B: u64 = 0x2110;
    const C: u64 = 0x2210;
    const D: u64 = 0x2310;
    const E: u64 = 0x2410;
    const F: u64 = 0x2610;
    const G: u64 = 0x2510;

    #[test]
    fn fp_mode_walks_the_whole_chain() {
        let st = FpStack::build(&[(A, 32), (B, 16), (C, 0)]);
        let mut t = ThreadUnwinder::new(Mode::Fp, cfg(64));
        assert_eq!(t.step_kind(), StepKind::Fp);
        let c = cap(&mut t, &st, 0, true);
        assert_eq!(t.frames(), truth(&st));
        assert_eq!(c.unwound, 3);
        assert_eq!(c.validated, Some(true));
        assert!(!c.truncated && !c.error);
        assert_eq!(t.last_stop(), Stop::Complete);
        // Same stack again: everything unchanged.
        let c = cap(&mut t, &st, 1, false);
        assert_eq!(c.unchanged_root, 3);
    }

    /// `fp` mode from a capture point in the tracer's own code, which keeps
    /// no frame pointers (here: hand-assembled CFI, bp untouched): DWARF
    /// steps leave it, then the program's frame-pointer chain goes on from
    /// the first frame outside. A frame-pointer walk from the capture point
    /// would take the program's bp for the tracer's frame and lose the
    /// program's leaf frame (the MPI wrappers' stacks until 2026-11-28).
    #[test]
    fn fp_mode_leaves_the_tracers_own_frames_by_their_cfi() {
        let cm = CfiModule::new(true);
        let mut modules = fp_modules();
        modules.add(cm.data());
        let own = cm.data().text;
        // The program: A calls B calls C; C (at pc C_PC) calls the tracer.
        const C_PC: u64 = 0x2220;
        let app = FpStack::build_at(&[(A, 32), (B, 16)], C_PC);
        let mut mem = app.mem.clone();
        // The tracer: function 1 (CFA offset 40) calls function 3 (56),
        // which holds the capture point.
        let sp1 = app.regs.sp - CFI_FUNCS[1].1;
        mem.insert(app.regs.sp - 8, C_PC);
        mem.insert(sp1 - 8, cm.call_site(1));
        let sp3 = sp1 - CFI_FUNCS[3].1;
        let regs = Regs {
            pc: cm.pc_in(3),
            sp: sp3,
            bp: app.regs.bp,
            pc_is_return: false,
        };
        let mut read = |a: u64| mem.get(&a).copied().ok_or(());
        for mode in [Mode::Fp, Mode::Second] {
            let steps = if mode == Mode::Fp {
                StepKind::Fp
            } else {
                StepKind::Dwarf
            };
            let mut t = ThreadUnwinder::with_steps(mode, checked(64), steps);
            let c = t.capture(&modules, regs, own.clone(), &mut read, 0, true);
            assert_eq!(t.frames(), app.expected(), "{mode:?}");
            assert_eq!(c.validated, Some(true), "{mode:?}");
            assert!(!c.error && !c.truncated, "{mode:?}: {:?}", t.last_stop());
        }
        // Without the lead-in (the frame-pointer chain from the capture
        // point), the program's leaf frame C would be missing.
        let mut fp = FpSteps::new(regs);
        let first = match fp.step(&mut read) {
            Step::Frame(f) => f.ra,
            other => panic!("{other:?}"),
        };
        assert_eq!(first, B);
        // The capture point outside the skip range (an export's caller):
        // frame pointers from the start, as before.
        let mut t = ThreadUnwinder::new(Mode::Fp, checked(64));
        t.capture(&modules, app.regs, own, &mut app.reader(), 1, false);
        assert_eq!(t.frames(), app.expected());
    }

    #[test]
    fn skip_drops_only_leading_tracer_frames() {
        // Root-side frame with a tracer-range address (e.g. a callback) must be kept.
        let st = FpStack::build(&[(A, 32), (0x1080, 8), (B, 16), (0x1050, 16), (0x1060, 8)]);
        let mut t = ThreadUnwinder::new(Mode::Fp, cfg(64));
        cap(&mut t, &st, 0, false);
        let ras: Vec<u64> = t.frames().iter().map(|f| f.ra).collect();
        assert_eq!(ras, [B, 0x1080, A]);
        // An empty skip range keeps the capture-point frame.
        t.capture(&fp_modules(), st.regs, 0..0, &mut st.reader(), 1, false);
        assert_eq!(t.frames(), st.expected());
    }

    #[test]
    fn figure3_first_match_is_wrong_and_validation_catches_it_second_match_is_right() {
        // D and G differ but have the same size, so E sits at the same height in both.
        let s1 = FpStack::build(&[(A, 32), (B, 16), (C, 8), (D, 24), (E, 16)]);
        let s2 = FpStack::build(&[(A, 32), (B, 16), (C, 8), (G, 24), (E, 16), (F, 8)]);

        let mut first = fp_unwinder(Mode::First);
        cap(&mut first, &s1, 0, true);
        let c = cap(&mut first, &s2, 1, true);
        assert_eq!((c.unwound, c.reused), (2, 4));
        assert_eq!(c.validated, Some(false));
        let ras: Vec<u64> = first.frames().iter().map(|f| f.ra).collect();
        assert_eq!(ras, [F, E, D, C, B, A]); // D instead of G
        assert_eq!(first.stats().validated, 2);
        assert_eq!(first.stats().correct, 1);
        assert_eq!(first.last_stop(), Stop::Reused);

        let mut second = fp_unwinder(Mode::Second);
        cap(&mut second, &s1, 0, true);
        let c = cap(&mut second, &s2, 1, true);
        assert_eq!(c.validated, Some(true));
        assert_eq!(second.frames(), truth(&s2));
        assert_eq!((c.unwound, c.reused), (5, 1));
        assert_eq!(c.unchanged_root, 3); // A, B, C
        assert_eq!(second.stats().correct, 2);
    }

    #[test]
    fn figure4_rotated_callers_fool_first_match_but_not_second() {
        const P: u64 = 0x2710;
        const Q: u64 = 0x2810;
        const M: u64 = 0x2910;
        // P and Q swap places; their sizes sum to the same, so M is at the same height.
        let s1 = FpStack::build(&[(A, 32), (P, 8), (Q, 40), (M, 16), (E, 8)]);
        let s2 = FpStack::build(&[(A, 32), (Q, 40), (P, 8), (M, 16), (F, 8)]);

        let mut first = fp_unwinder(Mode::First);
        cap(&mut first, &s1, 0, false);
        let c = cap(&mut first, &s2, 1, true);
        assert_eq!(c.validated, Some(false));
        let ras: Vec<u64> = first.frames().iter().map(|f| f.ra).collect();
        assert_eq!(ras, [F, M, Q, P, A]);

        let mut second = fp_unwinder(Mode::Second);
        cap(&mut second, &s1, 0, false);
        let c = cap(&mut second, &s2, 1, true);
        assert_eq!(c.validated, Some(true));
        assert_eq!(second.frames(), truth(&s2));
        // No two consecutive matches: the whole stack was unwound.
        assert_eq!((c.unwound, c.reused), (5, 0));
        assert_eq!(second.last_stop(), Stop::Complete);
        assert_eq!(c.unchanged_root, 1);
    }

    /// The return-address check of reused frames (the default) turns the
    /// paper's false positives into correct stacks, for first match too.
    #[test]
    fn checking_reused_frames_fixes_figures_3_and_4() {
        const P: u64 = 0x2710;
        const Q: u64 = 0x2810;
        const M: u64 = 0x2910;
        let fig3 = (
            FpStack::build(&[(A, 32), (B, 16), (C, 8), (D, 24), (E, 16)]),
            FpStack::build(&[(A, 32), (B, 16), (C, 8), (G, 24), (E, 16), (F, 8)]),
        );
        let fig4 = (
            FpStack::build(&[(A, 32), (P, 8), (Q, 40), (M, 16), (E, 8)]),
            FpStack::build(&[(A, 32), (Q, 40), (P, 8), (M, 16), (F, 8)]),
        );
        for (s1, s2) in [&fig3, &fig4] {
            for mode in [Mode::First, Mode::Second] {
                let mut t = ThreadUnwinder::with_steps(
                    mode,
                    HeuristicConfig {
                        check_reused: true,
                        ..cfg(64)
                    },
                    StepKind::Fp,
                );
                cap(&mut t, s1, 0, true);
                let c = cap(&mut t, s2, 1, true);
                assert_eq!(c.validated, Some(true), "{mode}");
                assert_eq!(t.frames(), truth(s2), "{mode}");
                // And the same stack again is still mostly reused.
                let c = cap(&mut t, s2, 2, true);
                assert_eq!(c.validated, Some(true), "{mode}");
                assert!(c.reused >= 2, "{mode}: {c:?}");
                assert_eq!(t.stats().correct, 3, "{mode}");
            }
        }
    }

    #[test]
    fn recursion_matches_by_height_not_by_address() {
        const R: u64 = 0x2a10;
        let deep = FpStack::build(&[(A, 32), (R, 16), (R, 16), (R, 16), (R, 16), (E, 8)]);
        let shallow = FpStack::build(&[(A, 32), (R, 16), (R, 16), (F, 24)]);
        let deeper =
            FpStack::build(&[(A, 32), (R, 16), (R, 16), (R, 16), (R, 16), (R, 16), (G, 8)]);
        for mode in [Mode::First, Mode::Second] {
            let mut t = fp_unwinder(mode);
            for (i, st) in [&deep, &shallow, &deeper, &shallow, &deep]
                .into_iter()
                .enumerate()
            {
                let c = cap(&mut t, st, i as u64, true);
                assert_eq!(c.validated, Some(true), "{mode} event {i}");
                assert_eq!(t.frames(), truth(st), "{mode} event {i}");
                if i > 0 {
                    assert!(c.reused > 0, "{mode} event {i}: nothing reused");
                }
            }
            assert_eq!(t.stats().correct, 5);
            assert_eq!(t.stats().reseeds, 1);
        }
    }

    #[test]
    fn stacks_that_shrink_and_grow() {
        let seq = [
            vec![(A, 32), (B, 16)],
            vec![(A, 32), (B, 16), (C, 8), (D, 24), (E, 16)],
            vec![(A, 32), (B, 16), (C, 8)],
            vec![(A, 32)],
            vec![(A, 32), (G, 48), (F, 0), (E, 8)],
            vec![(A, 32), (G, 48), (F, 0), (E, 8)],
            vec![(A, 32), (B, 16), (C, 8), (D, 24)],
        ];
        let stacks: Vec<FpStack> = seq.iter().map(|c| FpStack::build(c)).collect();
        for mode in [Mode::Fp, Mode::First, Mode::Second] {
            let mut t = fp_unwinder(mode);
            let mut before: Vec<Frame> = Vec::new();
            for (i, st) in stacks.iter().enumerate() {
                let c = cap(&mut t, st, i as u64, true);
                let want = truth(st);
                assert_eq!(t.frames(), want, "{mode} event {i}");
                assert_eq!(c.validated, Some(true));
                assert_eq!(
                    c.unchanged_root,
                    common_root_len(&want, &before),
                    "{mode} event {i}"
                );
                before = want;
            }
            let s = t.stats();
            assert_eq!(s.events, stacks.len() as u64);
            assert_eq!(s.correct, stacks.len() as u64);
            let total: u64 = stacks.iter().map(|st| truth(st).len() as u64).sum();
            assert_eq!(s.frames_unwound + s.frames_reused, total);
            if mode == Mode::Fp {
                assert_eq!(s.frames_reused, 0);
            } else {
                assert!(s.frames_reused > 0);
            }
        }
    }

    #[test]
    fn repeated_identical_stack_reuses_all_but_the_leaf() {
        let st = FpStack::build(&[(A, 32), (B, 16), (C, 8), (D, 24)]);
        let mut t = fp_unwinder(Mode::First);
        cap(&mut t, &st, 0, false);
        let c = cap(&mut t, &st, 1, false);
        assert_eq!((c.unwound, c.reused, c.unchanged_root), (1, 3, 4));
        let mut t = fp_unwinder(Mode::Second);
        cap(&mut t, &st, 0, false);
        let c = cap(&mut t, &st, 1, false);
        assert_eq!((c.unwound, c.reused, c.unchanged_root), (2, 2, 4));
    }

    #[test]
    fn reseed_every_n_events() {
        let st = FpStack::build(&[(A, 32), (B, 16), (C, 8)]);
        let mut t = ThreadUnwinder::with_steps(
            Mode::First,
            HeuristicConfig {
                reseed_every: 3,
                ..cfg(64)
            },
            StepKind::Fp,
        );
        let mut full = Vec::new();
        for i in 0..7 {
            let c = cap(&mut t, &st, i, false);
            full.push(c.reused == 0);
        }
        assert_eq!(full, [true, false, false, true, false, false, true]);
        assert_eq!(t.stats().reseeds, 3);
        assert_eq!(t.stats().events, 7);
    }

    #[test]
    fn reseed_after_an_idle_gap() {
        let st = FpStack::build(&[(A, 32), (B, 16), (C, 8)]);
        let mut t = ThreadUnwinder::with_steps(
            Mode::Second,
            HeuristicConfig {
                reseed_gap_ns: 1000,
                ..cfg(64)
            },
            StepKind::Fp,
        );
        let times = [
            0, 500, 1400, 3000, 3000, 2000, /* clock went backwards: no gap */
        ];
        let full: Vec<bool> = times
            .iter()
            .map(|&ns| cap(&mut t, &st, ns, false).reused == 0)
            .collect();
        assert_eq!(full, [true, false, false, true, false, false]);
        assert_eq!(t.stats().reseeds, 2);
    }

    #[test]
    fn forget_forces_a_reseed() {
        let st = FpStack::build(&[(A, 32), (B, 16)]);
        let mut t = fp_unwinder(Mode::First);
        cap(&mut t, &st, 0, false);
        t.forget();
        assert!(t.frames().is_empty());
        assert_eq!(cap(&mut t, &st, 1, false).reused, 0);
        assert_eq!(t.stats().reseeds, 2);
    }

    #[test]
    fn max_depth_truncates_and_the_next_heuristic_capture_reseeds() {
        let chain: Vec<(u64, u64)> = (0..10).map(|i| (0x3000 + 0x10 * i, 8)).collect();
        let st = FpStack::build(&chain);
        let mut t = ThreadUnwinder::with_steps(Mode::First, cfg(4), StepKind::Fp);
        let c = cap(&mut t, &st, 0, false);
        assert!(c.truncated);
        assert_eq!(c.depth, 4);
        assert_eq!(t.frames(), &truth(&st)[..4]);
        assert_eq!(t.last_stop(), Stop::Depth);
        let c = cap(&mut t, &st, 1, true);
        assert!(c.truncated);
        assert_eq!(c.reused, 0);
        assert_eq!(c.unchanged_root, 0);
        assert_eq!(c.validated, Some(true));
        let s = t.stats();
        assert_eq!((s.truncated, s.reseeds), (2, 2));
        // Exactly max_depth frames is not truncation.
        let st = FpStack::build(&chain[..4]);
        assert!(!cap(&mut t, &st, 2, false).truncated);
        // Depth 0 keeps nothing.
        let mut t = ThreadUnwinder::with_steps(Mode::Fp, cfg(0), StepKind::Fp);
        let c = cap(&mut t, &st, 0, false);
        assert!(c.truncated && c.depth == 0);
        // Absurd depths are clamped, not allocated.
        let t = ThreadUnwinder::new(Mode::Full, cfg(usize::MAX));
        assert_eq!(t.config().max_depth, HeuristicConfig::MAX_DEPTH_LIMIT);
    }

    /// glibc's coroutine trampoline under a `makecontext` entry function:
    /// the walk ends there, complete, without the trampoline's frame, in
    /// every mode, and the heuristic reuses such a stack.
    #[test]
    fn a_stack_root_ends_the_walk_without_its_frame() {
        const ROOT: u64 = 0x2710;
        let st = FpStack::build(&[(A, 32), (ROOT, 8), (B, 16), (C, 8)]);
        let mut modules = fp_modules();
        modules.set_stack_root(Some(ROOT));
        for mode in [Mode::Fp, Mode::Full, Mode::First, Mode::Second] {
            let mut t = ThreadUnwinder::with_steps(mode, checked(64), StepKind::Fp);
            for now in 0..3 {
                let c = t.capture(&modules, st.regs, TRACER, &mut st.reader(), now, true);
                let ras: Vec<u64> = t.frames().iter().map(|f| f.ra).collect();
                assert_eq!(ras, [C, B], "{mode}");
                assert!(!c.error && !c.truncated);
                assert_eq!(c.validated, Some(true));
                if now > 0 && matches!(mode, Mode::First | Mode::Second) {
                    assert_eq!(c.unwound, 0, "{mode}: reused whole");
                }
            }
            assert_ne!(t.last_stop(), Stop::OutsideModules(ROOT));
            assert_eq!(t.stats().errors, 0);
        }
        // Without the root the walk goes on through it.
        let mut t = ThreadUnwinder::new(Mode::Fp, cfg(64));
        cap(&mut t, &st, 0, false);
        assert_eq!(t.frames(), truth(&st));
    }

    /// On a stack the thread switched to, a walk that fails or leaves the
    /// modules after its first frame has reached that stack's end: no error,
    /// and a reference for the heuristic. On the thread's own stack the same
    /// walk is an error, and a stack that fails before any frame is one on
    /// either.
    #[test]
    fn a_switched_stack_ends_where_the_walk_fails() {
        let st = FpStack::build(&[(A, 32), (B, 16), (C, 8), (D, 24)]);
        let hole = truth(&st)[2].sp - 16; // frame record of the third frame
        let mut read = |a: u64| if a == hole { Err(()) } else { st.read(a) };
        for mode in [Mode::Full, Mode::First, Mode::Second] {
            let mut t = ThreadUnwinder::with_steps(mode, checked(64), StepKind::Fp);
            t.set_foreign_stack(true);
            for now in 0..3 {
                let c = t.capture(&fp_modules(), st.regs, TRACER, &mut read, now, true);
                assert_eq!(t.frames(), &truth(&st)[..2], "{mode}");
                assert!(!c.error, "{mode}");
                if now > 0 && mode != Mode::Full {
                    assert_eq!((c.unwound, c.reused), (0, 2), "{mode}");
                } else {
                    assert_eq!(t.last_stop(), Stop::ForeignEnd(None), "{mode}");
                }
            }
            assert_eq!(t.stats().errors, 0);
            assert_eq!(t.stats().reseeds, u64::from(mode != Mode::Full));
            // Back on its own stack the same walk is an error.
            t.set_foreign_stack(false);
            t.forget();
            let c = t.capture(&fp_modules(), st.regs, TRACER, &mut read, 5, false);
            assert!(c.error, "{mode}");
            // Nothing readable at all: an error on a switched stack too.
            t.set_foreign_stack(true);
            let mut nothing = |_a: u64| Err(());
            let c = t.capture(&fp_modules(), st.regs, TRACER, &mut nothing, 6, false);
            assert!(c.error && c.depth == 0, "{mode}");
        }
        // Leaving the modules: the address is kept (the caller may refresh
        // its module table and try again).
        let st = FpStack::build(&[(A, 32), (0x50_0000, 8), (B, 16), (C, 8)]);
        let mut t = ThreadUnwinder::new(Mode::Second, cfg(64));
        t.set_foreign_stack(true);
        let c = t.capture(&fp_modules(), st.regs, TRACER, &mut st.reader(), 0, false);
        assert!(!c.error);
        assert_eq!(t.last_stop(), Stop::ForeignEnd(Some(0x50_0000)));
    }

    #[test]
    fn read_error_mid_walk() {
        let st = FpStack::build(&[(A, 32), (B, 16), (C, 8), (D, 24)]);
        let hole = truth(&st)[2].sp - 16; // frame record of the third frame
        let mut read = |a: u64| if a == hole { Err(()) } else { st.read(a) };
        for mode in [Mode::Fp, Mode::First, Mode::Second] {
            let mut t = fp_unwinder(mode);
            let c = t.capture(&fp_modules(), st.regs, TRACER, &mut read, 0, false);
            assert_eq!(t.frames(), &truth(&st)[..2], "{mode}");
            if mode == Mode::Fp {
                // In fp mode a broken chain after some frames is its end
                // (code without frame pointers), not an error.
                assert!(!c.error, "{mode}");
                assert_eq!(t.last_stop(), Stop::ChainEnd(StepError::Read(hole)));
                let c = t.capture(&fp_modules(), st.regs, TRACER, &mut read, 1, false);
                assert!(!c.error);
                assert_eq!(t.stats().errors, 0);
                // A hole in the leaf frame record: nothing at all, an error.
                let hole2 = st.regs.bp;
                let mut read2 = |a: u64| if a == hole2 { Err(()) } else { st.read(a) };
                let c = t.capture(&fp_modules(), st.regs, TRACER, &mut read2, 3, false);
                assert!(c.error && c.depth == 0);
                assert_eq!(t.stats().errors, 1);
                continue;
            }
            assert!(c.error, "{mode}");
            assert_eq!(c.unchanged_root, 0);
            assert_eq!(t.last_stop(), Stop::Failed(StepError::Read(hole)));
            // After an error the next heuristic capture is a full unwind.
            let c = cap(&mut t, &st, 1, true);
            assert_eq!(
                (c.reused, c.validated, c.unchanged_root),
                (0, Some(true), 0)
            );
            assert_eq!(t.stats().reseeds, u64::from(mode != Mode::Fp) * 2);
            if mode != Mode::Fp {
                // The heuristic matches before reaching the hole, so it never reads there.
                let c = t.capture(&fp_modules(), st.regs, TRACER, &mut read, 2, false);
                assert!(!c.error && c.reused > 0);
                assert_eq!(t.frames(), truth(&st));
            }
            // A hole in the leaf frame record: nothing at all.
            let hole2 = st.regs.bp;
            let mut read2 = |a: u64| if a == hole2 { Err(()) } else { st.read(a) };
            let c = t.capture(&fp_modules(), st.regs, TRACER, &mut read2, 3, false);
            assert!(c.error && c.depth == 0 && c.unchanged_root == 0);
            assert_eq!(t.stats().errors, 2);
        }
    }

    #[test]
    fn frames_outside_every_module_end_the_stack() {
        // 0x50_0000 is in no module.
        let st = FpStack::build(&[(A, 32), (0x50_0000, 8), (B, 16), (C, 8)]);
        let mut t = ThreadUnwinder::new(Mode::Fp, cfg(64));
        let c = cap(&mut t, &st, 0, false);
        assert!(!c.error);
        let ras: Vec<u64> = t.frames().iter().map(|f| f.ra).collect();
        assert_eq!(ras, [C, B]);
        assert_eq!(t.last_stop(), Stop::OutsideModules(0x50_0000));
    }

    /// The frame-pointer test modules and a "plugin" at 0x50_0000..0x50_1000.
    fn fp_modules_with_plugin() -> Modules {
        let mut m = fp_modules();
        m.add(ModuleData {
            name: "plugin".into(),
            base_avma: 0x50_0000,
            text: 0x50_0000..0x50_1000,
            ..Default::default()
        });
        m
    }

    /// A capture point in code the table does not know (a library's constructor, run by
    /// `dlopen` before the caller rescans) is the stack's one frame, with the stop that
    /// makes the caller rescan, and no step from it; with the table that knows it, the
    /// whole stack.
    #[test]
    fn a_capture_point_outside_every_module_ends_the_stack_there() {
        const CTOR: u64 = 0x50_0020;
        let st = FpStack::build_at(&[(A, 32), (B, 16), (C, 8)], CTOR);
        for mode in [Mode::Full, Mode::Fp, Mode::First, Mode::Second] {
            let mut t = fp_unwinder(mode);
            let c = t.capture(&fp_modules(), st.regs, TRACER, &mut st.reader(), 0, false);
            assert_eq!(t.frames(), &st.expected()[..1], "{mode:?}");
            assert_eq!((c.depth, c.unwound, c.error), (1, 1, false), "{mode:?}");
            assert_eq!(t.last_stop(), Stop::OutsideModules(CTOR), "{mode:?}");
            let c = t.capture(
                &fp_modules_with_plugin(),
                st.regs,
                TRACER,
                &mut st.reader(),
                1,
                true,
            );
            assert_eq!(t.frames(), st.expected(), "{mode:?}");
            assert_eq!((c.error, c.validated), (false, Some(true)), "{mode:?}");
        }
    }

    /// A stack cut short by a module the table did not know yet is never reused once the
    /// table knows it (this was 3 % wrong stacks in an MPI program whose plugins load late).
    #[test]
    fn a_stack_cut_at_an_unknown_module_is_not_reused() {
        const LATE: u64 = 0x50_0010;
        let st = FpStack::build(&[(A, 32), (LATE, 8), (B, 16), (C, 8)]);
        let later = fp_modules_with_plugin();
        for mode in [Mode::First, Mode::Second] {
            let mut t = fp_unwinder(mode);
            let c = t.capture(&fp_modules(), st.regs, TRACER, &mut st.reader(), 0, false);
            assert_eq!((c.depth, c.error), (2, false));
            assert_eq!(t.last_stop(), Stop::OutsideModules(LATE));
            // The same stack again, now that the module is known: whole, and checked so.
            let c = t.capture(&later, st.regs, TRACER, &mut st.reader(), 1, true);
            assert_eq!(t.frames(), truth(&st), "{mode:?}");
            assert_eq!((c.reused, c.validated), (0, Some(true)));
            // From then on the heuristic applies again.
            let c = t.capture(&later, st.regs, TRACER, &mut st.reader(), 2, true);
            assert_eq!(t.frames(), truth(&st));
            assert!(c.reused > 0 && c.validated == Some(true));
        }
    }

    /// The text range a walk ends in is carried to the next walk only over the same module
    /// table: after an unload (a new table without the module) the stack ends there.
    #[test]
    fn an_unloaded_module_is_not_trusted_from_the_previous_walk() {
        const PLUGIN: u64 = 0x50_0010;
        const PLUGIN2: u64 = 0x50_0110;
        // Every frame in the plugin, so the walk ends in its range.
        let st = FpStack::build(&[(PLUGIN, 32), (PLUGIN2, 16)]);
        let with_plugin = fp_modules_with_plugin();
        let mut t = ThreadUnwinder::new(Mode::Fp, cfg(64));
        t.capture(&with_plugin, st.regs, TRACER, &mut st.reader(), 0, false);
        assert_eq!(t.frames(), truth(&st));
        // The walk ended in the plugin's range; so does the next walk's first frame.
        t.capture(&fp_modules(), st.regs, TRACER, &mut st.reader(), 1, false);
        assert!(t.frames().is_empty(), "{:?}", t.frames());
        assert_eq!(t.last_stop(), Stop::OutsideModules(PLUGIN2));
    }

    /// The same capture point over the same stack: taken whole from the previous capture
    /// after one word read per frame, no unwinding step.
    #[test]
    fn an_unchanged_stack_is_reused_without_unwinding() {
        let st = FpStack::build(&[(A, 32), (B, 16), (C, 8), (D, 24)]);
        for mode in [Mode::First, Mode::Second] {
            let mut t = ThreadUnwinder::with_steps(mode, checked(64), StepKind::Fp);
            cap(&mut t, &st, 0, false);
            for now in 1..4 {
                let c = cap(&mut t, &st, now, true);
                assert_eq!(t.frames(), truth(&st), "{mode}");
                assert_eq!((c.unwound, c.reused, c.unchanged_root), (0, 4, 4), "{mode}");
                assert_eq!(c.validated, Some(true));
                assert_eq!(t.last_stop(), Stop::Reused);
            }
        }
    }

    /// Same capture point (pc and sp) over a different stack: a root-side caller was
    /// replaced by one of the same frame size (the paper's Figure 3 shape), so the
    /// capture point alone would take the wrong stack; the return-address check catches
    /// it and the stack is unwound.
    #[test]
    fn the_same_capture_point_over_another_caller_is_unwound() {
        let s1 = FpStack::build(&[(A, 32), (B, 16), (D, 24), (E, 16)]);
        let s2 = FpStack::build(&[(A, 32), (B, 16), (G, 24), (E, 16)]);
        assert_eq!((s1.regs.pc, s1.regs.sp), (s2.regs.pc, s2.regs.sp));
        for mode in [Mode::First, Mode::Second] {
            let mut t = ThreadUnwinder::with_steps(mode, checked(64), StepKind::Fp);
            cap(&mut t, &s1, 0, false);
            let c = cap(&mut t, &s2, 1, true);
            assert_eq!(t.frames(), truth(&s2), "{mode}");
            assert!(c.unwound > 0, "{mode}: {c:?}");
            assert_eq!(c.validated, Some(true));
        }
    }

    /// The published heuristic (no reused-frame check) never takes a stack on the
    /// capture point alone.
    #[test]
    fn without_the_check_an_unchanged_stack_is_still_walked() {
        let st = FpStack::build(&[(A, 32), (B, 16), (C, 8), (D, 24)]);
        let mut t = fp_unwinder(Mode::Second);
        cap(&mut t, &st, 0, false);
        let c = cap(&mut t, &st, 1, false);
        assert_eq!(t.frames(), truth(&st));
        assert_eq!((c.unwound, c.reused), (2, 2));
    }

    #[test]
    fn mode_none_captures_nothing() {
        let st = FpStack::build(&[(A, 32), (B, 16)]);
        let mut t = ThreadUnwinder::new(Mode::None, cfg(64));
        let c = cap(&mut t, &st, 0, true);
        assert_eq!(c, Capture::default());
        assert!(t.frames().is_empty());
        assert_eq!(t.stats().events, 1);
        assert_eq!(t.stats().validated, 0);
    }

    fn cfi_cap(
        t: &mut ThreadUnwinder,
        m: &Modules,
        st: &CfiStack,
        skip: Range<u64>,
        now: u64,
    ) -> Capture {
        t.capture(m, st.regs, skip, &mut st.reader(), now, true)
    }

    #[test]
    fn full_mode_uses_dwarf_and_reports_unchanged_root() {
        let cm = CfiModule::new(true);
        let m = cm.modules();
        let mut t = ThreadUnwinder::new(Mode::Full, cfg(64));
        let s1 = CfiStack::build(&cm, &[0, 3, 1, 2, 1]);
        let c = cfi_cap(&mut t, &m, &s1, 0..0, 0);
        assert_eq!(t.frames(), s1.expected());
        assert_eq!(c.validated, Some(true));
        assert_eq!(c.unchanged_root, 0);
        let s2 = CfiStack::build(&cm, &[0, 3, 1, 4]);
        let c = cfi_cap(&mut t, &m, &s2, 0..0, 1);
        assert_eq!(t.frames(), s2.expected());
        // Functions 0, 3 and 1 are still on the stack at the same heights.
        assert_eq!(c.unchanged_root, 3);
        assert_eq!(c.reused, 0);
    }

    #[test]
    fn heuristic_modes_over_dwarf_steps() {
        let cm = CfiModule::new(true);
        let m = cm.modules();
        let chains: [&[usize]; 6] = [
            &[0, 3, 1, 2, 1],
            &[0, 3, 1, 4],
            &[0, 3, 1, 4, 4, 4, 2],
            &[0, 3, 1, 4, 4, 4, 2],
            &[0, 2],
            &[0, 3, 1, 2, 1],
        ];
        for mode in [Mode::First, Mode::Second] {
            let mut t = ThreadUnwinder::new(mode, cfg(64));
            assert_eq!(t.step_kind(), StepKind::Dwarf);
            for (i, chain) in chains.iter().enumerate() {
                let st = CfiStack::build(&cm, chain);
                // Skip the capture-point frame only.
                let skip = st.regs.pc..st.regs.pc + 1;
                let c = cfi_cap(&mut t, &m, &st, skip, i as u64);
                assert_eq!(t.frames(), &st.expected()[1..], "{mode} event {i}");
                assert_eq!(c.validated, Some(true));
            }
            assert!(t.stats().frames_reused > 0);
            assert_eq!(t.stats().correct, chains.len() as u64);
        }
    }

    #[test]
    fn unknown_code_falls_back_to_frame_pointers_in_dwarf_mode() {
        // A module without unwind tables: framehop uses the frame-pointer rule.
        let st = FpStack::build(&[(A, 32), (B, 16), (C, 8)]);
        let mut t = ThreadUnwinder::new(Mode::Full, cfg(64));
        let c = cap(&mut t, &st, 0, true);
        assert_eq!(t.frames(), truth(&st));
        assert_eq!(c.validated, Some(true));
    }

    #[test]
    fn shared_types_can_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        fn send<T: Send>() {}
        send_sync::<Modules>();
        send::<ThreadUnwinder>();
    }

    mod props {
        use super::*;
        use crate::modules::ModuleData;
        use proptest::collection::vec;
        use proptest::prelude::*;

        const LOW: u64 = 0x7ffd_0000_0000 - 0x400;

        fn word() -> impl Strategy<Value = u64> {
            prop_oneof![
                any::<u64>(),
                (0u64..160).prop_map(|k| LOW + 8 * k),
                0x1000u64..0x10000,
                (0u64..0x1000).prop_map(|o| crate::synthetic::CFI_BASE + 0x1000 + o),
                Just(0u64),
            ]
        }

        fn modules(garbage: Vec<u8>, hdr: Vec<u8>) -> Modules {
            let mut m = fp_modules();
            m.add(CfiModule::new(true).data());
            m.add(ModuleData {
                name: "garbage".into(),
                base_avma: 0x20_0000,
                text: 0x20_0000..0x30_0000,
                eh_frame_hdr: Some((0x31_0000, hdr.into())),
                eh_frame: Some((0x30_0000, garbage.into())),
            });
            m
        }

        const MODES: [Mode; 5] = [Mode::None, Mode::Full, Mode::Fp, Mode::First, Mode::Second];

        proptest! {
            #[test]
            fn garbage_stacks_never_panic(
                words in vec(word(), 0..160),
                regs in vec((word(), 0u64..160, word()), 1..5),
                garbage in vec(any::<u8>(), 0..64),
                hdr in vec(any::<u8>(), 0..32),
                mode in 0usize..5,
                fp in any::<bool>(),
                max_depth in 0usize..24,
                validate in any::<bool>(),
            ) {
                let m = modules(garbage, hdr);
                let steps = if fp { StepKind::Fp } else { StepKind::Dwarf };
                let mut t = ThreadUnwinder::with_steps(MODES[mode], cfg(max_depth), steps);
                let caps = (t.stack.capacity(), t.walked.capacity(), t.check.capacity());
                let mut read = |a: u64| {
                    if a < LOW || a & 7 != 0 {
                        return Err(());
                    }
                    words.get(((a - LOW) / 8) as usize).copied().ok_or(())
                };
                for (i, &(pc, sp_k, bp)) in regs.iter().enumerate() {
                    let r = Regs { pc, sp: LOW + 8 * sp_k, bp, pc_is_return: false };
                    let c = t.capture(&m, r, TRACER, &mut read, i as u64, validate);
                    prop_assert!(c.depth <= max_depth);
                    prop_assert_eq!(c.depth, t.frames().len());
                    prop_assert_eq!(c.depth, c.unwound + c.reused);
                    prop_assert!(t.frames().windows(2).all(|w| w[0].sp < w[1].sp));
                    prop_assert!(c.unchanged_root <= c.depth);
                }
                prop_assert_eq!(caps, (t.stack.capacity(), t.walked.capacity(), t.check.capacity()));
                let s = t.stats();
                prop_assert!(s.correct <= s.validated);
            }

            #[test]
            fn heuristic_results_are_consistent(
                seq in vec(vec((0usize..6, 0u64..4), 0..8), 1..12),
                second in any::<bool>(),
                reseed_every in 0u64..4,
                check_reused in any::<bool>(),
            ) {
                const RAS: [u64; 6] = [0x2010, 0x2110, 0x2210, 0x2310, 0x2410, 0x2510];
                let mode = if second { Mode::Second } else { Mode::First };
                let mut t = ThreadUnwinder::with_steps(
                    mode,
                    HeuristicConfig { reseed_every, check_reused, ..cfg(64) },
                    StepKind::Fp,
                );
                let mut before: Vec<Frame> = Vec::new();
                let mut right = 0;
                for (i, chain) in seq.iter().enumerate() {
                    let chain: Vec<(u64, u64)> =
                        chain.iter().map(|&(f, size)| (RAS[f], size * 8)).collect();
                    let st = FpStack::build(&chain);
                    let c = cap(&mut t, &st, i as u64, true);
                    let want = truth(&st);
                    let ok = t.frames() == want.as_slice();
                    prop_assert_eq!(c.validated, Some(same_return_addresses(t.frames(), &want)));
                    right += u64::from(ok);
                    prop_assert_eq!(c.unchanged_root, common_root_len(t.frames(), &before));
                    if c.reused == 0 {
                        // Nothing was guessed: the stack is exact.
                        prop_assert!(ok);
                    }
                    before = t.frames().to_vec();
                }
                // With exact frames (ra and sp) the validation agrees.
                prop_assert!(t.stats().correct >= right);
            }
        }
    }
}
