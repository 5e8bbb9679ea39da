//! Frame-pointer steps: `[bp]` is the caller's bp, `[bp + 8]` the return address, and the
//! caller's stack pointer after the return is `bp + 16`.

use std::ops::Range;

use crate::dwarf::DwarfSteps;
use crate::frame::{Frame, Regs};
use crate::step::{ReadStack, Step, StepError, StepUnwinder};

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

/// The `fp` mode's steps from a capture point inside the skip range (the
/// tracer's own code, e.g. an MPI wrapper's): DWARF steps out of the skipped
/// frames, whose code need not keep frame pointers, then frame-pointer steps
/// from the first frame outside, with the bp those steps restored (the
/// program's). A capture point outside the range (an allocator export's
/// caller) walks frame pointers from the start.
pub(crate) struct FpAfterSkip<'a> {
    lead_in: Option<DwarfSteps<'a>>,
    skip: Range<u64>,
    fp: FpSteps,
}

impl<'a> FpAfterSkip<'a> {
    pub(crate) fn new(dwarf: DwarfSteps<'a>, regs: Regs, skip: Range<u64>) -> Self {
        FpAfterSkip {
            lead_in: skip.contains(&regs.pc).then_some(dwarf),
            skip,
            fp: FpSteps::new(regs),
        }
    }
}

impl StepUnwinder for FpAfterSkip<'_> {
    fn step<R: ReadStack + ?Sized>(&mut self, read: &mut R) -> Step {
        let Some(dwarf) = self.lead_in.as_mut() else {
            return self.fp.step(read);
        };
        let step = dwarf.step(read);
        match step {
            Step::Frame(f) if !self.skip.contains(&f.ra) => {
                self.fp = FpSteps {
                    bp: dwarf.bp(),
                    sp: f.sp,
                };
                self.lead_in = None;
            }
            Step::Frame(_) => {}
            Step::End | Step::Failed(_) => self.lead_in = None,
        }
        step
    }
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
