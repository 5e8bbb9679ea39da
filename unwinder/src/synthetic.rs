//! Test-only synthetic stacks: frame-pointer chains and hand-assembled DWARF CFI.

use std::collections::HashMap;
use std::ops::Range;

use crate::frame::{Frame, Regs};
use crate::modules::{ModuleData, Modules};

/// Highest address of every synthetic stack, so that consecutive stacks share a root.
pub(crate) const TOP: u64 = 0x7ffd_0000_0000;
/// Code range of the "tracer" (frames to skip).
pub(crate) const TRACER: Range<u64> = 0x1000..0x1100;
/// Program counter of the capture point, inside the tracer.
pub(crate) const PC: u64 = 0x1008;

fn reader(mem: &HashMap<u64, u64>) -> impl FnMut(u64) -> Result<u64, ()> + '_ {
    |a| mem.get(&a).copied().ok_or(())
}

/// One module covering all synthetic frame-pointer code (0x1000..0x10000), no unwind tables.
pub(crate) fn fp_modules() -> Modules {
    let mut m = Modules::new();
    m.add(ModuleData {
        name: "app".into(),
        base_avma: 0,
        text: 0x1000..0x10000,
        ..Default::default()
    });
    m
}

/// A frame-pointer stack.
pub(crate) struct FpStack {
    pub(crate) mem: HashMap<u64, u64>,
    pub(crate) regs: Regs,
    /// Expected frames, leaf first, including the capture-point frame.
    frames: Vec<Frame>,
}

impl FpStack {
    /// `chain` lists, root first, each call's return address and the number of bytes the
    /// callee allocates below its frame record (a multiple of 8).
    pub(crate) fn build(chain: &[(u64, u64)]) -> Self {
        Self::build_at(chain, PC)
    }

    pub(crate) fn build_at(chain: &[(u64, u64)], pc: u64) -> Self {
        let mut mem = HashMap::new();
        // Root sentinel record: caller bp 0, return address 0.
        mem.insert(TOP - 16, 0);
        mem.insert(TOP - 8, 0);
        let mut bp = TOP - 16;
        let mut sp = TOP - 16 - 32; // the root's own locals
        let mut frames = Vec::new();
        for &(ra, size) in chain {
            assert_eq!(size % 8, 0);
            mem.insert(sp - 8, ra);
            mem.insert(sp - 16, bp);
            frames.push(Frame { ra, sp });
            bp = sp - 16;
            sp = bp - size;
        }
        frames.push(Frame { ra: pc, sp });
        frames.reverse();
        FpStack {
            mem,
            regs: Regs {
                pc,
                sp,
                bp,
                pc_is_return: false,
            },
            frames,
        }
    }

    pub(crate) fn expected(&self) -> Vec<Frame> {
        self.frames.clone()
    }

    pub(crate) fn read(&self, a: u64) -> Result<u64, ()> {
        self.mem.get(&a).copied().ok_or(())
    }

    pub(crate) fn reader(&self) -> impl FnMut(u64) -> Result<u64, ()> + '_ {
        reader(&self.mem)
    }
}

/// A module with hand-assembled `.eh_frame` (and optionally `.eh_frame_hdr`) describing
/// five functions, each with a constant CFA offset from rsp, loaded at a non-zero bias.
pub(crate) struct CfiModule {
    with_hdr: bool,
}

pub(crate) const CFI_BASE: u64 = 0x7f00_0000_0000;
/// (svma start, cfa offset) of each function; every function is 0x100 bytes long.
pub(crate) const CFI_FUNCS: [(u64, u64); 5] = [
    (0x1000, 24),
    (0x1100, 40),
    (0x1200, 8),
    (0x1300, 56),
    (0x1400, 16),
];
const EH_FRAME_SVMA: u64 = 0x3000;
const EH_FRAME_HDR_SVMA: u64 = 0x4000;

fn uleb(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn pad4(body: &mut Vec<u8>) {
    while body.len() & 3 != 0 {
        body.push(0); // DW_CFA_nop
    }
}

/// `.eh_frame` bytes and, per function, (svma start, offset of its FDE).
pub(crate) fn assemble_eh_frame(funcs: &[(u64, u64)]) -> (Vec<u8>, Vec<(u64, u64)>) {
    let mut out = Vec::new();
    // CIE.
    let mut cie = vec![0, 0, 0, 0, 1, b'z', b'R', 0];
    uleb(&mut cie, 1); // code alignment
    cie.push(0x78); // data alignment -8 (sleb)
    uleb(&mut cie, 16); // return address register: rip
    uleb(&mut cie, 1); // augmentation data length
    cie.push(0x03); // FDE pointers: udata4, absolute
    cie.extend_from_slice(&[0x0c, 7, 8]); // DW_CFA_def_cfa rsp+8
    cie.extend_from_slice(&[0x90, 1]); // DW_CFA_offset rip at cfa-8
    pad4(&mut cie);
    out.extend_from_slice(&(cie.len() as u32).to_le_bytes());
    out.extend_from_slice(&cie);
    let mut index = Vec::new();
    for &(start, cfa) in funcs {
        let fde_offset = out.len() as u64;
        let mut fde = Vec::new();
        fde.extend_from_slice(&((fde_offset + 4) as u32).to_le_bytes()); // back to the CIE
        fde.extend_from_slice(&(start as u32).to_le_bytes());
        fde.extend_from_slice(&0x100u32.to_le_bytes());
        uleb(&mut fde, 0); // augmentation data length
        fde.push(0x0e); // DW_CFA_def_cfa_offset
        uleb(&mut fde, cfa);
        pad4(&mut fde);
        out.extend_from_slice(&(fde.len() as u32).to_le_bytes());
        out.extend_from_slice(&fde);
        index.push((start, fde_offset));
    }
    out.extend_from_slice(&[0, 0, 0, 0]); // terminator
    (out, index)
}

/// `.eh_frame_hdr` bytes for an `.eh_frame` at `eh_frame_svma`, header at `hdr_svma`.
pub(crate) fn assemble_eh_frame_hdr(
    hdr_svma: u64,
    eh_frame_svma: u64,
    index: &[(u64, u64)],
) -> Vec<u8> {
    let mut out = vec![1, 0x1b, 0x03, 0x3b];
    let rel = |x: u64, from: u64| (x as i64 - from as i64) as i32;
    out.extend_from_slice(&rel(eh_frame_svma, hdr_svma + 4).to_le_bytes());
    out.extend_from_slice(&(index.len() as u32).to_le_bytes());
    let mut sorted = index.to_vec();
    sorted.sort();
    for (start, fde_offset) in sorted {
        out.extend_from_slice(&rel(start, hdr_svma).to_le_bytes());
        out.extend_from_slice(&rel(eh_frame_svma + fde_offset, hdr_svma).to_le_bytes());
    }
    out
}

impl CfiModule {
    pub(crate) fn new(with_hdr: bool) -> Self {
        CfiModule { with_hdr }
    }

    pub(crate) fn data(&self) -> ModuleData {
        let (eh_frame, index) = assemble_eh_frame(&CFI_FUNCS);
        let hdr = assemble_eh_frame_hdr(EH_FRAME_HDR_SVMA, EH_FRAME_SVMA, &index);
        ModuleData {
            name: "cfi".into(),
            base_avma: CFI_BASE,
            text: CFI_BASE + 0x1000..CFI_BASE + 0x2000,
            eh_frame_hdr: self
                .with_hdr
                .then_some((CFI_BASE + EH_FRAME_HDR_SVMA, hdr.into())),
            eh_frame: Some((CFI_BASE + EH_FRAME_SVMA, eh_frame.into())),
        }
    }

    pub(crate) fn modules(&self) -> Modules {
        let mut m = Modules::new();
        m.add(self.data());
        m
    }

    /// A program counter inside function `k`.
    pub(crate) fn pc_in(&self, k: usize) -> u64 {
        CFI_BASE + CFI_FUNCS[k].0 + 8
    }

    /// The return address of the call site in function `k`.
    pub(crate) fn call_site(&self, k: usize) -> u64 {
        CFI_BASE + CFI_FUNCS[k].0 + 0x20
    }
}

/// A stack of calls between the functions of a [`CfiModule`]; no frame pointers at all.
pub(crate) struct CfiStack {
    mem: HashMap<u64, u64>,
    pub(crate) regs: Regs,
    frames: Vec<Frame>,
}

impl CfiStack {
    /// `chain`: function indices, root first; the last one holds the capture point.
    pub(crate) fn build(cm: &CfiModule, chain: &[usize]) -> Self {
        let mut mem = HashMap::new();
        let mut cfa = TOP;
        mem.insert(cfa - 8, 0); // the root returns nowhere
        let mut frames = Vec::new();
        let mut sp = cfa;
        for (i, &k) in chain.iter().enumerate() {
            sp = cfa - CFI_FUNCS[k].1;
            if i + 1 < chain.len() {
                // This function calls the next one: the call pushes the return address.
                let ra = cm.call_site(k);
                mem.insert(sp - 8, ra);
                frames.push(Frame { ra, sp });
                cfa = sp;
            }
        }
        let pc = chain.last().map_or(0, |&k| cm.pc_in(k));
        frames.push(Frame { ra: pc, sp });
        frames.reverse();
        CfiStack {
            mem,
            regs: Regs {
                pc,
                sp,
                bp: 0xdead_beef, // garbage: CFI must not need it
                pc_is_return: false,
            },
            frames,
        }
    }

    pub(crate) fn expected(&self) -> Vec<Frame> {
        self.frames.clone()
    }

    pub(crate) fn read(&self, a: u64) -> Result<u64, ()> {
        self.mem.get(&a).copied().ok_or(())
    }

    pub(crate) fn reader(&self) -> impl FnMut(u64) -> Result<u64, ()> + '_ {
        reader(&self.mem)
    }
}
