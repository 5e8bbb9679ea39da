//! Frame-pointer steps: `[bp]` is the caller's bp, `[bp + 8]` the return address, and the
//! caller's stack pointer after the return is `bp + 16`.

use std::ops::Range;

use crate::dwarf::DwarfSteps;
use crate::frame::{Frame, Regs};
use crate::heuristic::MAX_SKIPPED;
use crate::modules::Modules;
use crate::step::{ReadStack, Step, StepError, StepUnwinder, Stop};

pub(crate) struct FpSteps {
    bp: u64,
    sp: u64,
}

impl FpSteps {
    pub(crate) fn new(regs: Regs) -> Self {
        FpSteps {
            bp: regs.bp,
            sp: regs.sp,
        }
    }
}

impl StepUnwinder for FpSteps {
    fn step<R: ReadStack + ?Sized>(&mut self, read: &mut R) -> Step {
        let bp = self.bp;
        if bp == 0 {
            return Step::End;
        }
        if bp & 7 != 0 {
            return Step::Failed(StepError::MisalignedFp(bp));
        }
        let new_sp = match bp.checked_add(16) {
            Some(s) if s > self.sp => s,
            _ => {
                return Step::Failed(StepError::NotIncreasing {
                    from: self.sp,
                    to: bp.wrapping_add(16),
                })
            }
        };
        let Ok(caller_bp) = read.read_word(bp) else {
            return Step::Failed(StepError::Read(bp));
        };
        let ra_at = bp + 8; // cannot overflow: bp + 16 did not
        let Ok(ra) = read.read_word(ra_at) else {
            return Step::Failed(StepError::Read(ra_at));
        };
        if ra == 0 {
            return Step::End;
        }
        self.bp = caller_bp;
        self.sp = new_sp;
        Step::Frame(Frame { ra, sp: new_sp })
    }
}

/// The `fp` mode's start from a capture point inside the skip range (the
/// tracer's own code, e.g. an MPI wrapper's), whose code need not keep
/// frame pointers: DWARF steps out of the skipped frames give the first
/// frame outside, with the bp those steps restored (the program's), where
/// the frame-pointer walk starts. `Err`: how the stack ends before such a
/// frame, as the walk would end it (a separate lead-in rather than a
/// stepper that switches kind: the switch, tested at every step, and the
/// walk's state out of its registers cost ~1 ns per frame). Cold and out
/// of line, as `capture::fp_walk` is: the default mode never takes it.
#[cold]
#[inline(never)]
pub(crate) fn leave_skip<R: ReadStack + ?Sized>(
    mut dwarf: DwarfSteps<'_>,
    modules: &Modules,
    skip: &Range<u64>,
    read: &mut R,
) -> Result<Regs, Stop> {
    for _ in 0..MAX_SKIPPED {
        match dwarf.step(read) {
            Step::Frame(f) if modules.is_stack_root(f.ra) => return Err(Stop::Complete),
            Step::Frame(f) if skip.contains(&f.ra) => {}
            Step::Frame(f) if modules.text_of(f.ra).is_none() => {
                return Err(Stop::OutsideModules(f.ra))
            }
            Step::Frame(f) => {
                return Ok(Regs {
                    pc: f.ra,
                    sp: f.sp,
                    bp: dwarf.bp(),
                    pc_is_return: true,
                })
            }
            Step::End => return Err(Stop::Complete),
            Step::Failed(e) => return Err(Stop::Failed(e)),
        }
    }
    Err(Stop::Failed(StepError::TooManySkipped(MAX_SKIPPED)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::FpStack;

    fn walk(regs: Regs, read: &mut dyn FnMut(u64) -> Result<u64, ()>) -> (Vec<Frame>, Step) {
        let mut s = FpSteps::new(regs);
        let mut out = Vec::new();
        loop {
            match s.step(read) {
                Step::Frame(f) => out.push(f),
                other => return (out, other),
            }
        }
    }

    #[test]
    fn walks_a_frame_pointer_chain_to_the_null_return_address() {
        let st = FpStack::build(&[(0x2010, 32), (0x3020, 0), (0x4030, 64)]);
        let (frames, end) = walk(st.regs, &mut st.reader());
        assert_eq!(end, Step::End);
        let ras: Vec<u64> = frames.iter().map(|f| f.ra).collect();
        assert_eq!(ras, [0x4030, 0x3020, 0x2010]);
        assert!(frames.windows(2).all(|w| w[0].sp < w[1].sp));
        assert_eq!(frames, st.expected()[1..]);
    }

    #[test]
    fn stops_on_read_error() {
        let st = FpStack::build(&[(0x2010, 32), (0x3020, 0), (0x4030, 64)]);
        let hole = st.expected()[2].sp - 16; // the frame record of the middle frame
        let mut read = |a: u64| if a == hole { Err(()) } else { st.read(a) };
        let (frames, end) = walk(st.regs, &mut read);
        assert_eq!(frames.len(), 1);
        assert_eq!(end, Step::Failed(StepError::Read(hole)));
    }

    #[test]
    fn stops_on_misaligned_and_backwards_frame_pointers() {
        let mut read = |_a: u64| Ok(0x1234u64);
        let regs = Regs {
            pc: 1,
            sp: 0x1000,
            bp: 0x1003,
            pc_is_return: false,
        };
        assert_eq!(
            walk(regs, &mut read).1,
            Step::Failed(StepError::MisalignedFp(0x1003))
        );
        let regs = Regs {
            pc: 1,
            sp: 0x1000,
            bp: 0x800,
            pc_is_return: false,
        };
        assert!(matches!(
            walk(regs, &mut read).1,
            Step::Failed(StepError::NotIncreasing { .. })
        ));
        // A self-loop: [bp] = bp.
        let mut self_loop = |a: u64| Ok(if a == 0x2000 { 0x2000 } else { 0x5555 });
        let regs = Regs {
            pc: 1,
            sp: 0x1000,
            bp: 0x2000,
            pc_is_return: false,
        };
        let (frames, end) = walk(regs, &mut self_loop);
        assert_eq!(frames.len(), 1);
        assert!(matches!(end, Step::Failed(StepError::NotIncreasing { .. })));
        // Overflow near the top of the address space.
        let regs = Regs {
            pc: 1,
            sp: 0x1000,
            bp: u64::MAX - 7,
            pc_is_return: false,
        };
        assert!(matches!(
            walk(regs, &mut read).1,
            Step::Failed(StepError::NotIncreasing { .. })
        ));
    }
}
