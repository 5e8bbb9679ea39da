//! DWARF CFI steps with framehop, driven one frame at a time so that every step yields
//! both the return address and the caller's stack pointer.

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64};
use framehop::{FrameAddress, MustNotAllocateDuringUnwind, Unwinder};

use crate::frame::{Frame, Regs};
use crate::modules::{DwarfUnwinder, Modules};
use crate::rule_cache::{exec, Exec, RuleCache, StepRegs};
use crate::step::{ReadStack, Step, StepError, StepUnwinder};

/// framehop's per-thread rule cache, in its no-allocation flavour.
pub(crate) type DwarfCache = CacheX86_64<MustNotAllocateDuringUnwind>;

/// A thread's caches: ours in front of framehop's (`rule_cache.rs`).
pub(crate) struct StepCache {
    pub(crate) framehop: DwarfCache,
    pub(crate) rules: RuleCache,
}

impl StepCache {
    pub(crate) fn new() -> Self {
        StepCache {
            framehop: DwarfCache::new_in(),
            rules: RuleCache::new(),
        }
    }
}

pub(crate) struct DwarfSteps<'a> {
    modules: &'a Modules,
    cache: &'a mut StepCache,
    /// The registers as plain values: framehop's own register set is made
    /// only for a step it takes itself ([`framehop_step`]), so a walk keeps
    /// these in machine registers.
    regs: StepRegs,
    /// Address to look up for the next step; `None` once the stack has ended.
    next: Option<FrameAddress>,
}

impl<'a> DwarfSteps<'a> {
    #[inline]
    pub(crate) fn new(modules: &'a Modules, cache: &'a mut StepCache, regs: Regs) -> Self {
        // The learned rules are keyed by the module table: another empties them.
        cache.rules.use_table(modules.id());
        DwarfSteps {
            modules,
            cache,
            regs: StepRegs {
                ip: regs.pc,
                sp: regs.sp,
                bp: regs.bp,
            },
            next: if regs.pc_is_return {
                FrameAddress::from_return_address(regs.pc)
            } else {
                Some(FrameAddress::from_instruction_pointer(regs.pc))
            },
        }
    }

    /// The frame pointer register after the steps taken so far.
    pub(crate) fn bp(&self) -> u64 {
        self.regs.bp
    }
}

/// A step framehop takes itself (no learned rule, or one of the outcomes it
/// reports): out of line, on framehop's register set, so that the walk's
/// common steps keep their registers.
#[cold]
#[inline(never)]
fn framehop_step<R: ReadStack + ?Sized>(
    unwinder: &DwarfUnwinder,
    framehop: &mut DwarfCache,
    address: FrameAddress,
    regs: StepRegs,
    read: &mut R,
) -> (Result<Option<u64>, framehop::Error>, StepRegs) {
    let mut r: UnwindRegsX86_64 = regs.framehop();
    let result = unwinder.unwind_frame(address, &mut r, framehop, &mut |a| read.read_word(a));
    (result, StepRegs::from_framehop(&r))
}

impl StepUnwinder for DwarfSteps<'_> {
    /// The common step (a learned rule gives the caller's frame, its stack
    /// pointer above) inline; every other outcome out of line, so that the
    /// walk keeps its registers.
    #[inline(always)]
    fn step<R: ReadStack + ?Sized>(&mut self, read: &mut R) -> Step {
        let Some(address) = self.next else {
            return Step::End;
        };
        let old_sp = self.regs.sp;
        // framehop reads the return address at `new_sp - 8`; with a zero offset rule and a
        // tiny stack pointer that would wrap. No real stack lives there.
        if old_sp < 8 {
            return Step::Failed(StepError::Read(old_sp));
        }
        let rule = self
            .cache
            .rules
            .lookup(self.modules, &mut self.cache.framehop, address);
        let is_first = !address.is_return_address();
        match exec(rule, is_first, &mut self.regs, read) {
            Exec::Frame(ra) if self.regs.sp > old_sp => {
                self.next = FrameAddress::from_return_address(ra);
                Step::Frame(Frame {
                    ra,
                    sp: self.regs.sp,
                })
            }
            other => {
                let (step, regs, next) = other_outcome(
                    self.modules.unwinder(),
                    &mut self.cache.framehop,
                    other,
                    address,
                    self.regs,
                    old_sp,
                    read,
                );
                self.regs = regs;
                self.next = next;
                step
            }
        }
    }
}

/// A step's outcome other than a frame above the previous one: the end, a
/// failure, or a step framehop takes itself. `regs` are the registers before
/// the step unless `outcome` is a frame. Returns the step, the registers
/// after it and the next address to look up (values, not the walk's
/// `DwarfSteps`, so that the walk's state can stay in registers).
#[cold]
#[inline(never)]
fn other_outcome<R: ReadStack + ?Sized>(
    unwinder: &DwarfUnwinder,
    framehop: &mut DwarfCache,
    outcome: Exec,
    address: FrameAddress,
    mut regs: StepRegs,
    old_sp: u64,
    read: &mut R,
) -> (Step, StepRegs, Option<FrameAddress>) {
    let old_bp = regs.bp;
    let result = match outcome {
        Exec::Frame(ra) => Ok(Some(ra)),
        Exec::End => Ok(None),
        Exec::Read(a) => Err(framehop::Error::CouldNotReadStack(a)),
        Exec::Framehop => {
            let (result, after) = framehop_step(unwinder, framehop, address, regs, read);
            regs = after;
            result
        }
    };
    let step = match result {
        Ok(Some(ra)) => {
            let sp = regs.sp;
            if sp <= old_sp {
                Step::Failed(StepError::NotIncreasing {
                    from: old_sp,
                    to: sp,
                })
            } else {
                return (
                    Step::Frame(Frame { ra, sp }),
                    regs,
                    FrameAddress::from_return_address(ra),
                );
            }
        }
        Ok(None) => Step::End,
        // A zero frame pointer is how the x86_64 ABI marks the outermost
        // frame (`_start`, and the dynamic loader's `_dl_start_user`,
        // which clears rbp before running the libraries' constructors
        // and has no CFI): framehop's frame-pointer fallback reports it
        // as a step backwards. The stack is complete there, not broken.
        Err(framehop::Error::FramepointerUnwindingMovedBackwards) if old_bp == 0 => Step::End,
        Err(e) => Step::Failed(match e {
            framehop::Error::CouldNotReadStack(a) => StepError::Read(a),
            other => StepError::Unwinder(other),
        }),
    };
    (step, regs, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::{CfiModule, CfiStack};

    fn walk(
        steps: &mut DwarfSteps<'_>,
        read: &mut dyn FnMut(u64) -> Result<u64, ()>,
    ) -> (Vec<Frame>, Step) {
        let mut out = Vec::new();
        loop {
            match steps.step(read) {
                Step::Frame(f) => out.push(f),
                other => return (out, other),
            }
        }
    }

    fn check_walk(with_hdr: bool) {
        let cm = CfiModule::new(with_hdr);
        let modules = cm.modules();
        let st = CfiStack::build(&cm, &[0, 3, 1, 2, 1]);
        let mut cache = StepCache::new();
        let mut steps = DwarfSteps::new(&modules, &mut cache, st.regs);
        let (frames, end) = walk(&mut steps, &mut st.reader());
        assert_eq!(end, Step::End);
        assert_eq!(frames, st.expected()[1..]);
    }

    #[test]
    fn walks_hand_assembled_cfi_with_eh_frame_hdr() {
        check_walk(true);
    }

    #[test]
    fn walks_hand_assembled_cfi_without_eh_frame_hdr() {
        check_walk(false);
    }

    #[test]
    fn read_error_mid_walk_is_reported() {
        let cm = CfiModule::new(true);
        let modules = cm.modules();
        let st = CfiStack::build(&cm, &[0, 3, 1, 2, 1]);
        let hole = st.expected()[2].sp - 8; // where the second return address lives
        let mut read = |a: u64| if a == hole { Err(()) } else { st.read(a) };
        let mut cache = StepCache::new();
        let mut steps = DwarfSteps::new(&modules, &mut cache, st.regs);
        let (frames, end) = walk(&mut steps, &mut read);
        assert_eq!(frames.len(), 1);
        assert_eq!(end, Step::Failed(StepError::Read(hole)));
        // The walk is over once it failed.
        assert_eq!(steps.step(&mut read), Step::End);
    }

    /// A return address without an FDE in a module that has `.eh_frame`
    /// (framehop falls back to frame pointers), reached with rbp = 0, as the
    /// dynamic loader's `_dl_start_user` is under the libraries'
    /// constructors: the end of the stack, not a failure. With a non-zero
    /// rbp below the stack pointer the same step is still an error.
    #[test]
    fn zero_frame_pointer_without_an_fde_ends_the_stack() {
        let cm = CfiModule::new(true);
        let modules = cm.modules();
        let no_fde = crate::synthetic::CFI_BASE + 0x1800;
        assert!(modules.contains(no_fde));
        let sp = 0x7000_0000_1000u64;
        let mut read = |_a: u64| Ok(0x2345u64);
        for (bp, want_end) in [(0u64, true), (0x10u64, false)] {
            let mut cache = StepCache::new();
            let regs = Regs {
                pc: no_fde,
                sp,
                bp,
                pc_is_return: true,
            };
            let mut steps = DwarfSteps::new(&modules, &mut cache, regs);
            let got = steps.step(&mut read);
            if want_end {
                assert_eq!(got, Step::End);
            } else {
                assert_eq!(
                    got,
                    Step::Failed(StepError::Unwinder(
                        framehop::Error::FramepointerUnwindingMovedBackwards
                    ))
                );
            }
            assert_eq!(steps.step(&mut read), Step::End);
        }
    }

    /// A capture point at a return address (an entry trampoline's caller)
    /// is looked up as one, at `pc - 1`. Here the call is its function's
    /// last instruction, so `pc` is the next function's first: looked up
    /// as an instruction pointer, the step would take that function's frame
    /// (40 bytes instead of 24) and read the wrong slot.
    #[test]
    fn a_capture_point_at_a_return_address_is_looked_up_as_one() {
        use crate::synthetic::{CFI_BASE, CFI_FUNCS};
        let cm = CfiModule::new(true);
        let modules = cm.modules();
        let pc = CFI_BASE + CFI_FUNCS[1].0; // function 0's end
        let sp = 0x7000_0000_1000u64;
        let (size, caller) = (CFI_FUNCS[0].1, cm.call_site(3));
        let mem: std::collections::HashMap<u64, u64> = [(sp + size - 8, caller)].into();
        for (pc_is_return, want) in [
            (
                true,
                Step::Frame(Frame {
                    ra: caller,
                    sp: sp + size,
                }),
            ),
            (
                false,
                Step::Failed(StepError::Read(sp + CFI_FUNCS[1].1 - 8)),
            ),
        ] {
            let mut cache = StepCache::new();
            let regs = Regs {
                pc,
                sp,
                bp: 0,
                pc_is_return,
            };
            let mut steps = DwarfSteps::new(&modules, &mut cache, regs);
            let mut read = |a: u64| mem.get(&a).copied().ok_or(());
            assert_eq!(steps.step(&mut read), want, "pc_is_return: {pc_is_return}");
        }
    }

    #[test]
    fn tiny_stack_pointer_does_not_wrap() {
        let cm = CfiModule::new(true);
        let modules = cm.modules();
        let mut cache = StepCache::new();
        let regs = Regs {
            pc: cm.pc_in(0),
            sp: 0,
            bp: 0,
            pc_is_return: false,
        };
        let mut steps = DwarfSteps::new(&modules, &mut cache, regs);
        let mut read = |_a: u64| Ok(0x1234u64);
        assert_eq!(steps.step(&mut read), Step::Failed(StepError::Read(0)));
    }

    #[inline(never)]
    fn probe_a() -> u64 {
        std::hint::black_box(1)
    }
    #[inline(never)]
    fn probe_b() -> u64 {
        std::hint::black_box(2)
    }
    #[inline(never)]
    fn probe_c() -> u64 {
        std::hint::black_box(3)
    }

    /// Real compiler output, real load bias: at a function's first instruction every x86_64
    /// CFI says CFA = rsp + 8. A "return address" of `entry + 1` is looked up at `entry`, so
    /// a chain of such addresses on a fake stack unwinds one word per frame.
    #[test]
    fn unwinds_with_this_binarys_own_eh_frame() {
        let data = crate::self_image::this_executable();
        let mut modules = crate::Modules::new();
        modules.add(data);
        let entries = [probe_a as fn() -> u64, probe_b, probe_c].map(|f| f as usize as u64);
        assert!(entries.iter().all(|&e| modules.contains(e)));
        let sp = 0x7000_0000_0000u64;
        let mut mem = std::collections::HashMap::new();
        mem.insert(sp, entries[1] + 1);
        mem.insert(sp + 8, entries[2] + 1);
        mem.insert(sp + 16, 0);
        let mut read = |a: u64| mem.get(&a).copied().ok_or(());
        let mut cache = StepCache::new();
        let regs = Regs {
            pc: entries[0],
            sp,
            bp: 0,
            pc_is_return: false,
        };
        let mut steps = DwarfSteps::new(&modules, &mut cache, regs);
        let (frames, end) = walk(&mut steps, &mut read);
        assert_eq!(end, Step::End);
        assert_eq!(
            frames,
            [
                Frame {
                    ra: entries[1] + 1,
                    sp: sp + 8
                },
                Frame {
                    ra: entries[2] + 1,
                    sp: sp + 16
                }
            ]
        );
        assert!(std::hint::black_box(probe_a() + probe_b() + probe_c()) == 6);
    }
}
