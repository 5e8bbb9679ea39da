//! A capture must never allocate (it runs inside malloc). Counts this thread's allocations
//! around every capture, in every mode, over frame-pointer and DWARF stacks.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use wmhcct_unwinder::{HeuristicConfig, Mode, ModuleData, Modules, Regs, StepKind, ThreadUnwinder};

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
}

fn allocs() -> u64 {
    ALLOCS.with(|c| c.get())
}

struct Counting;

// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        count();
        unsafe { System.realloc(p, l, n) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Stack memory: `words[i]` lives at `LOW + 8 * i`.
const LOW: u64 = 0x7ff0_0000_0000;
const WORDS: usize = 4096;
const TOP: u64 = LOW + 8 * WORDS as u64;

struct Mem(Vec<u64>);

impl Mem {
    fn set(&mut self, a: u64, v: u64) {
        self.0[((a - LOW) / 8) as usize] = v;
    }
    fn get(&self, a: u64) -> Result<u64, ()> {
        if a < LOW || a & 7 != 0 {
            return Err(());
        }
        self.0.get(((a - LOW) / 8) as usize).copied().ok_or(())
    }
}

/// Frame-pointer stack; `chain` = (return address, locals size) root first.
fn fp_stack(chain: &[(u64, u64)]) -> (Mem, Regs) {
    let mut m = Mem(vec![0; WORDS]);
    let mut bp = TOP - 16;
    let mut sp = TOP - 48;
    for &(ra, size) in chain {
        m.set(sp - 8, ra);
        m.set(sp - 16, bp);
        bp = sp - 16;
        sp = bp - size;
    }
    (
        m,
        Regs {
            pc: 0x1008,
            sp,
            bp,
            pc_is_return: false,
        },
    )
}

const BASE: u64 = 0x5500_0000_0000;
/// (svma start, CFA offset) of four 0x100-byte functions.
const FUNCS: [(u64, u64); 4] = [(0x1000, 24), (0x1100, 40), (0x1200, 8), (0x1300, 56)];

fn uleb(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn record(out: &mut Vec<u8>, mut body: Vec<u8>) {
    while body.len() & 3 != 0 {
        body.push(0);
    }
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
}

/// `.eh_frame` with one CIE (CFA = rsp + 8, ra at CFA - 8) and one FDE per function.
fn eh_frame() -> Vec<u8> {
    eh_frame_and_index().0
}

/// [`eh_frame`] and, per function, (svma start, offset of its FDE).
fn eh_frame_and_index() -> (Vec<u8>, Vec<(u64, u64)>) {
    let mut index = Vec::new();
    let mut out = Vec::new();
    let mut cie = vec![0, 0, 0, 0, 1, b'z', b'R', 0, 1, 0x78, 16, 1, 0x03];
    cie.extend_from_slice(&[0x0c, 7, 8, 0x90, 1]);
    record(&mut out, cie);
    for (start, cfa) in FUNCS {
        let here = out.len() as u32;
        index.push((start, u64::from(here)));
        let mut fde = Vec::new();
        fde.extend_from_slice(&(here + 4).to_le_bytes());
        fde.extend_from_slice(&(start as u32).to_le_bytes());
        fde.extend_from_slice(&0x100u32.to_le_bytes());
        fde.extend_from_slice(&[0, 0x0e]);
        uleb(&mut fde, cfa);
        record(&mut out, fde);
    }
    out.extend_from_slice(&[0; 4]);
    (out, index)
}

/// `.eh_frame_hdr` (datarel sdata4 search table) for an `.eh_frame` at
/// svma `frame`, the header at svma `hdr`.
fn eh_frame_hdr(hdr: u64, frame: u64, index: &[(u64, u64)]) -> Vec<u8> {
    let rel = |x: u64, from: u64| (x as i64 - from as i64) as i32;
    let mut out = vec![1, 0x1b, 0x03, 0x3b];
    out.extend_from_slice(&rel(frame, hdr + 4).to_le_bytes());
    out.extend_from_slice(&(index.len() as u32).to_le_bytes());
    for &(start, fde) in index {
        out.extend_from_slice(&rel(start, hdr).to_le_bytes());
        out.extend_from_slice(&rel(frame + fde, hdr).to_le_bytes());
    }
    out
}

/// DWARF-only stack: `chain` = function indices, root first.
fn cfi_stack(chain: &[usize]) -> (Mem, Regs) {
    let mut m = Mem(vec![0; WORDS]);
    let mut cfa = TOP;
    let mut sp = cfa;
    for (i, &k) in chain.iter().enumerate() {
        sp = cfa - FUNCS[k].1;
        if i + 1 < chain.len() {
            m.set(sp - 8, BASE + FUNCS[k].0 + 0x20);
            cfa = sp;
        }
    }
    let pc = BASE + FUNCS[*chain.last().unwrap()].0 + 8;
    (
        m,
        Regs {
            pc,
            sp,
            bp: 0x1234,
            pc_is_return: false,
        },
    )
}

/// The heuristic's settings of these tests: a reseed every 4 captures,
/// stacks of at most `max_depth` frames.
fn config(max_depth: usize) -> HeuristicConfig {
    HeuristicConfig {
        reseed_every: 4,
        reseed_gap_ns: 0,
        max_depth,
        check_reused: true,
    }
}

fn modules() -> Modules {
    let mut m = Modules::new();
    m.add(ModuleData {
        name: "fp".into(),
        base_avma: 0,
        text: 0x1000..0x10000,
        ..Default::default()
    });
    m.add(ModuleData {
        name: "cfi".into(),
        base_avma: BASE,
        text: BASE + 0x1000..BASE + 0x2000,
        eh_frame_hdr: None,
        eh_frame: Some((BASE + 0x3000, eh_frame().into())),
    });
    m
}

#[test]
fn captures_do_not_allocate() {
    let before = allocs();
    let v = std::hint::black_box(vec![1u8; 10]);
    assert!(allocs() > before, "the counting allocator is not active");
    drop(v);
    let modules = modules();
    let fp_stacks = [
        fp_stack(&[(0x2010, 32), (0x2110, 16), (0x2210, 8)]),
        fp_stack(&[(0x2010, 32), (0x2110, 16), (0x2310, 24), (0x2410, 0)]),
        fp_stack(&[(0x2010, 32)]),
    ];
    let cfi_stacks = [
        cfi_stack(&[0, 3, 1, 2]),
        cfi_stack(&[0, 3, 1, 1, 1, 2]),
        cfi_stack(&[0, 2]),
    ];
    let cfg = config(5);
    for mode in [Mode::None, Mode::Full, Mode::Fp, Mode::First, Mode::Second] {
        for steps in [StepKind::Dwarf, StepKind::Fp] {
            for stacks in [&fp_stacks, &cfi_stacks] {
                let mut t = ThreadUnwinder::with_steps(mode, cfg, steps);
                for round in 0..4u64 {
                    for (i, (mem, regs)) in stacks.iter().enumerate() {
                        let mut read = |a: u64| mem.get(a);
                        let before = allocs();
                        let c = t.capture(
                            &modules,
                            *regs,
                            0x1000..0x1100,
                            &mut read,
                            round * 10 + i as u64,
                            true,
                        );
                        let after = allocs();
                        assert_eq!(after, before, "{mode} {steps:?} allocated: {c:?}");
                    }
                }
                if mode != Mode::None && steps == StepKind::Dwarf {
                    assert!(t.stats().frames_unwound > 0);
                }
                if mode == Mode::Full && steps == StepKind::Dwarf {
                    // Both kinds of stack unwind completely with DWARF (or its fallback).
                    assert_eq!(t.stats().correct, t.stats().events);
                    assert!(!t.frames().is_empty(), "{:?}", t.last_stop());
                }
            }
        }
    }
}

/// A thread that meets many call sites: its captures still never allocate;
/// its rule cache asks to grow, and `grow_caches`, called after a capture,
/// does it (and allocates).
#[test]
fn the_rule_cache_grows_outside_captures() {
    let modules = modules();
    let cfg = config(8);
    let mut t = ThreadUnwinder::with_steps(Mode::Second, cfg, StepKind::Dwarf);
    let slots = t.rule_slots();
    let (mem, regs) = cfi_stack(&[0, 3, 1, 2]);
    let mut read = |a: u64| mem.get(a);
    let mut growths = 0;
    // Capture points all over the leaf function (one CFA rule, 256 addresses).
    for k in 0..0x100u64 {
        let at = Regs {
            pc: BASE + FUNCS[2].0 + k,
            ..regs
        };
        let before = allocs();
        let c = t.capture(&modules, at, 0x1000..0x1100, &mut read, k, true);
        assert_eq!(allocs(), before, "allocated: {c:?}");
        assert_eq!(c.validated, Some(true), "{c:?}");
        if t.wants_growth() {
            let before = allocs();
            t.grow_caches();
            assert!(allocs() > before);
            assert!(!t.wants_growth());
            growths += 1;
        }
    }
    assert_eq!(growths, 2);
    assert_eq!(t.rule_slots(), 4 * slots);
}

/// A thread that has learned many rules evaluates whole functions' CFI
/// rows on a miss (the module has `.eh_frame_hdr`): those captures do not
/// allocate either, their stacks are those of a full unwind, and each
/// function is evaluated once.
#[test]
fn rules_from_cfi_rows_do_not_allocate() {
    let (frame, index) = eh_frame_and_index();
    let mut modules = Modules::new();
    modules.add(ModuleData {
        name: "cfi+hdr".into(),
        base_avma: BASE,
        text: BASE + 0x1000..BASE + 0x2000,
        eh_frame_hdr: Some((BASE + 0x2800, eh_frame_hdr(0x2800, 0x3000, &index).into())),
        eh_frame: Some((BASE + 0x3000, frame.into())),
    });
    let cfg = config(8);
    let mut t = ThreadUnwinder::with_steps(Mode::Second, cfg, StepKind::Dwarf);
    let (mem, regs) = cfi_stack(&[0, 3, 1, 2]);
    let mut read = |a: u64| mem.get(a);
    let mut grown = false;
    // Capture points at every address of every function: 1024 rules.
    let mut n = 0;
    for f in [2usize, 0, 1, 3] {
        for k in 0..0x100u64 {
            let at = Regs {
                pc: BASE + FUNCS[f].0 + k,
                // The leaf's stack pointer as that function's frame leaves it.
                sp: regs.sp + FUNCS[2].1 - FUNCS[f].1,
                ..regs
            };
            let before = allocs();
            let c = t.capture(&modules, at, 0x1000..0x1100, &mut read, n, true);
            n += 1;
            assert_eq!(allocs(), before, "allocated: {c:?}");
            assert_eq!(c.validated, Some(true), "{f} {k:#x} {c:?}");
            if t.wants_growth() {
                t.grow_caches();
                grown = true;
            }
        }
    }
    assert!(grown);
    // Rows were used once the thread had learned enough, one evaluation
    // per function met after that.
    let evaluated = t.cfi_functions_evaluated();
    assert!((1..=4).contains(&evaluated), "{evaluated}");
}
