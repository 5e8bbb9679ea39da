//! A larger, cheaper rule cache in front of framehop.
//!
//! framehop caches one compact unwind rule per address in 509 direct-mapped
//! slots; with a few hundred hot call sites that thrashes, and every miss
//! re-parses CFI with gimli. It does not expose its rules, so this cache
//! learns them by probing: it asks framehop to unwind the frame twice on
//! synthetic registers whose stack reads return values that name the address
//! read, and infers from the results how the caller's stack pointer,
//! frame pointer and return address are found. A rule is kept only if it
//! is of a shape framehop itself caches (so executing it here gives exactly
//! framehop's result) and both probes agree (so no rule depends on the
//! values it read or on alignment); any other address keeps going through
//! framehop every time.
//!
//! A thread that has learned many rules first asks its functions' CFI rows
//! (`cfi_rows.rs`): each function evaluated once, its rows translated as
//! framehop translates them, so that a large function's call sites do not
//! each cost an evaluation from the function's first row; an address the
//! rows do not answer is learned by probing, as above.

use framehop::x86_64::UnwindRegsX86_64;
use framehop::{FrameAddress, Unwinder};

use crate::cfi_rows::FunctionRows;
use crate::dwarf::DwarfCache;
use crate::modules::{DwarfUnwinder, Modules};
use crate::step::ReadStack;

/// Slots of a new cache, and most slots (powers of two). A thread that
/// meets few call sites keeps a small cache: the slots are most of a
/// thread's unwinding state.
const MIN_SLOTS: usize = 256;
const MAX_SLOTS: usize = 16384;

/// How the caller's frame pointer is found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Bp {
    /// Unchanged.
    Keep,
    /// Read at `sp + 8 * off` (`sp` before the step).
    AtSp(i16),
}

/// One learned step. Its tag is a byte of its own (`repr(u8)`), so a step
/// dispatches on one byte load rather than on a tag folded into the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Rule {
    /// The stack ends here.
    End,
    /// Caller's `sp` = `bp + 16`, caller's `bp` = `[bp]` (a frame-pointer frame; with
    /// `bp == 0` framehop decides).
    FramePointer,
    /// Caller's `sp` = `sp + 8 * sp_by_8`; return address at caller's `sp - 8`.
    Sp { sp_by_8: u16, bp: Bp },
    /// Not of a cacheable shape: ask framehop every time.
    Framehop,
}

/// 16 bytes, so four share a cache line and none straddles two.
#[derive(Clone, Copy)]
struct Slot {
    /// Lookup address with bit 0 = "first frame"; 0 = empty.
    key: u64,
    rule: Rule,
}

const EMPTY: Slot = Slot {
    key: 0,
    rule: Rule::Framehop,
};

/// The three registers a learned rule reads and writes, as plain values
/// (framehop's `UnwindRegsX86_64` is an array of sixteen, which a walk
/// would keep in memory).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StepRegs {
    pub(crate) ip: u64,
    pub(crate) sp: u64,
    pub(crate) bp: u64,
}

impl StepRegs {
    #[inline(always)]
    pub(crate) fn framehop(self) -> UnwindRegsX86_64 {
        UnwindRegsX86_64::new(self.ip, self.sp, self.bp)
    }

    #[inline(always)]
    pub(crate) fn from_framehop(r: &UnwindRegsX86_64) -> Self {
        StepRegs {
            ip: r.ip(),
            sp: r.sp(),
            bp: r.bp(),
        }
    }
}

/// The outcome of executing a rule, as framehop would report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Exec {
    /// The caller's return address; registers updated.
    Frame(u64),
    /// The stack ends (no return address).
    End,
    /// The stack could not be read at this address.
    Read(u64),
    /// Use framehop (also for its errors, so they are reported as it does).
    Framehop,
}

/// Two-way set associative: an address's hash names a pair of slots in one
/// cache line; a miss puts the new rule first and moves the first to the
/// second slot, dropping the second's (the one learned longest ago; a hit
/// writes nothing). A large Fortran code such as CP2K meets ~20 000 call
/// sites per rank: with one way of at most 4096 slots, 30 000 of its 40 000
/// misses per rank were conflicts, each relearned through framehop and
/// gimli. Once it has learned a quarter of its size in rules since
/// it last grew (many call sites, or two that keep evicting each other), it
/// asks to double, up to [`MAX_SLOTS`]; [`RuleCache::grow`] does it outside
/// the capture, which never allocates. Learning asks framehop twice, so a
/// growth costs less than the learning that led to it.
pub(crate) struct RuleCache {
    slots: Vec<Slot>,
    /// `64 - log2(slots.len())`: the index is the key's hash shifted by it.
    shift: u32,
    /// The module table the rules were learned on: another empties the cache.
    table: u64,
    learned: usize,
    /// Rules learned in all, for [`RuleCache::wants_growth`] of `rows`.
    learned_total: u64,
    /// Functions' CFI rows, once the thread has learned [`ROWS_AFTER`]
    /// rules: a miss in a function met before needs no framehop.
    rows: FunctionRows,
}

/// Rules a thread learns before its misses evaluate whole functions
/// (`cfi_rows.rs`; ~230 KiB of buffers): a thread that meets few call sites
/// keeps learning them one by one from framehop.
const ROWS_AFTER: u64 = 512;

impl RuleCache {
    pub(crate) fn new() -> Self {
        RuleCache {
            slots: vec![EMPTY; MIN_SLOTS],
            shift: Self::shift_for(MIN_SLOTS),
            table: 0,
            learned: 0,
            learned_total: 0,
            rows: FunctionRows::new(),
        }
    }

    /// Slots now (a power of two).
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// See [`FunctionRows::evaluated`].
    pub(crate) fn functions_evaluated(&self) -> u64 {
        self.rows.evaluated()
    }

    #[inline]
    fn key(address: FrameAddress) -> u64 {
        (address.address_for_lookup() << 1) | u64::from(!address.is_return_address())
    }

    fn shift_for(slots: usize) -> u32 {
        64 - slots.trailing_zeros()
    }

    #[inline(always)]
    fn hash_index(key: u64, shift: u32) -> usize {
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> shift) as usize
    }

    /// The rule for `address` in module table `table`, learned on a miss.
    #[cfg(test)]
    pub(crate) fn rule(
        &mut self,
        modules: &Modules,
        framehop: &mut DwarfCache,
        address: FrameAddress,
    ) -> Rule {
        self.use_table(modules.id());
        self.lookup(modules, framehop, address)
    }

    /// Makes `table` the module table of the next lookups: another than the
    /// one the rules were learned on empties the cache. A walk calls it once,
    /// then [`RuleCache::lookup`] for each step.
    #[inline]
    pub(crate) fn use_table(&mut self, table: u64) {
        if self.table != table {
            self.slots.fill(EMPTY);
            self.table = table;
            self.learned = 0;
            self.rows.clear();
        }
    }

    /// The rule for `address` in the table of the last [`RuleCache::use_table`],
    /// learned on a miss.
    #[inline(always)]
    pub(crate) fn lookup(
        &mut self,
        modules: &Modules,
        framehop: &mut DwarfCache,
        address: FrameAddress,
    ) -> Rule {
        let key = Self::key(address);
        // Two ways: the even slot the hash names and the odd one after it
        // (one cache line holds both).
        let i = Self::hash_index(key, self.shift) & !1;
        if let Some([a, b]) = self
            .slots
            .get(i..i + 2)
            .and_then(|w| <&[Slot; 2]>::try_from(w).ok())
        {
            if a.key == key {
                return a.rule;
            }
            if b.key == key {
                return b.rule;
            }
        }
        self.miss(modules, framehop, key, i, address)
    }

    #[cold]
    #[inline(never)]
    fn miss(
        &mut self,
        modules: &Modules,
        framehop: &mut DwarfCache,
        key: u64,
        i: usize,
        address: FrameAddress,
    ) -> Rule {
        let lookup = address.address_for_lookup();
        let from_rows = if self.rows.is_active() {
            self.rows.rule(modules.cfi_for(lookup), lookup)
        } else {
            None
        };
        let rule = match from_rows {
            Some(rule) => rule,
            None => learn(modules.unwinder(), framehop, address),
        };
        self.learned += 1;
        self.learned_total += 1;
        self.put(i, Slot { key, rule });
        rule
    }

    /// Puts `slot` first in the ways at `i` (even), the way that was first
    /// second, the second's rule dropped.
    fn put(&mut self, i: usize, slot: Slot) {
        if let Some(w) = self.slots.get_mut(i..i + 2) {
            w[1] = w[0];
            w[0] = slot;
        }
    }

    /// Whether [`RuleCache::grow`] would grow it.
    #[inline]
    pub(crate) fn wants_growth(&self) -> bool {
        self.slots_want_growth() || (self.learned_total >= ROWS_AFTER && !self.rows.is_active())
    }

    /// A quarter of the slots learned since the last growth, below the bound.
    #[inline]
    fn slots_want_growth(&self) -> bool {
        self.learned > self.slots.len() / 4 && self.slots.len() < MAX_SLOTS
    }

    /// Doubles the slots, keeping the rules, and makes the functions' rows
    /// buffers after [`ROWS_AFTER`] rules, if it [`wants_growth`].
    /// Allocates: never during a capture. Without the memory, it stays as
    /// it is.
    ///
    /// [`wants_growth`]: RuleCache::wants_growth
    pub(crate) fn grow(&mut self) {
        if self.learned_total >= ROWS_AFTER {
            self.rows.grow();
        }
        if !self.slots_want_growth() {
            return;
        }
        let n = self.slots.len() * 2;
        let mut slots = Vec::new();
        if slots.try_reserve_exact(n).is_err() {
            return;
        }
        slots.resize(n, EMPTY);
        let old = std::mem::replace(&mut self.slots, slots);
        self.shift = Self::shift_for(n);
        // Second ways first, so that a set's first way stays first.
        for s in old.iter().skip(1).step_by(2).chain(old.iter().step_by(2)) {
            if s.key != 0 {
                self.put(Self::hash_index(s.key, self.shift) & !1, *s);
            }
        }
        self.learned = 0;
    }
}

/// Stack reads in a probe return `TAG | address`.
const TAG: u64 = 0x5a00_0000_0000_0000;
const TAG_MASK: u64 = 0xff00_0000_0000_0000;

/// One probe: framehop's step with `sp`, `bp` and tagged memory.
fn probe(
    unwinder: &DwarfUnwinder,
    framehop: &mut DwarfCache,
    address: FrameAddress,
    sp: u64,
    bp: u64,
) -> Option<(Option<u64>, u64, u64)> {
    let mut regs = UnwindRegsX86_64::new(address.address(), sp, bp);
    let mut read = |a: u64| -> Result<u64, ()> { Ok(TAG | a) };
    let r = unwinder
        .unwind_frame(address, &mut regs, framehop, &mut read)
        .ok()?;
    Some((r, regs.sp(), regs.bp()))
}

/// The rule a probe result implies, if it is a cacheable shape.
fn infer(sp: u64, bp: u64, result: (Option<u64>, u64, u64)) -> Rule {
    let (ra, new_sp, new_bp) = result;
    let Some(ra) = ra else {
        return Rule::End;
    };
    if ra != TAG | (new_sp.wrapping_sub(8)) {
        return Rule::Framehop;
    }
    if new_sp == bp.wrapping_add(16) && new_bp == TAG | bp {
        return Rule::FramePointer;
    }
    let Some(by) = new_sp.checked_sub(sp) else {
        return Rule::Framehop;
    };
    if by % 8 != 0 || by / 8 > u64::from(u16::MAX) {
        return Rule::Framehop;
    }
    let bp_rule = if new_bp == bp {
        Bp::Keep
    } else if new_bp & TAG_MASK == TAG {
        let at = (new_bp & !TAG_MASK).wrapping_sub(sp) as i64;
        match i16::try_from(at / 8) {
            Ok(off) if at % 8 == 0 => Bp::AtSp(off),
            _ => return Rule::Framehop,
        }
    } else {
        return Rule::Framehop;
    };
    Rule::Sp {
        sp_by_8: (by / 8) as u16,
        bp: bp_rule,
    }
}

#[cold]
#[inline(never)]
pub(crate) fn learn(
    unwinder: &DwarfUnwinder,
    framehop: &mut DwarfCache,
    address: FrameAddress,
) -> Rule {
    // Two probes with different, differently aligned registers must agree.
    let (sp1, bp1) = (0x0000_1000_0000_0000u64, 0x0000_2000_0000_0000u64);
    let (sp2, bp2) = (0x0000_3000_0000_1238u64, 0x0000_4000_0000_5670u64);
    let (Some(a), Some(b)) = (
        probe(unwinder, framehop, address, sp1, bp1),
        probe(unwinder, framehop, address, sp2, bp2),
    ) else {
        return Rule::Framehop;
    };
    let r = infer(sp1, bp1, a);
    if r != infer(sp2, bp2, b) {
        return Rule::Framehop;
    }
    r
}

/// Execute `rule` as framehop executes the corresponding rule of its own.
#[inline]
pub(crate) fn exec<R: ReadStack + ?Sized>(
    rule: Rule,
    is_first_frame: bool,
    regs: &mut StepRegs,
    read: &mut R,
) -> Exec {
    let (sp, bp) = (regs.sp, regs.bp);
    let (new_sp, new_bp) = match rule {
        Rule::Framehop => return Exec::Framehop,
        Rule::End => return Exec::End,
        Rule::FramePointer => {
            if bp == 0 {
                // framehop ends the stack here for one of its rules of this
                // shape and fails for the other: let it say which.
                return Exec::Framehop;
            }
            let Some(new_sp) = bp.checked_add(16) else {
                return Exec::Framehop;
            };
            if new_sp <= sp {
                return Exec::Framehop;
            }
            match read.read_word(bp) {
                Ok(v) => (new_sp, v),
                Err(()) => return Exec::Read(bp),
            }
        }
        Rule::Sp { sp_by_8, bp: b } => {
            let Some(new_sp) = sp.checked_add(u64::from(sp_by_8) * 8) else {
                return Exec::Framehop;
            };
            let new_bp = match b {
                Bp::Keep => bp,
                Bp::AtSp(off) => {
                    let Some(at) = sp.checked_add_signed(i64::from(off) * 8) else {
                        return Exec::Framehop;
                    };
                    match read.read_word(at) {
                        Ok(v) => v,
                        // framehop: in the first frame, a slot below sp that
                        // cannot be read leaves bp as it is.
                        Err(()) if is_first_frame && at < sp => bp,
                        Err(()) => return Exec::Read(at),
                    }
                }
            };
            (new_sp, new_bp)
        }
    };
    let Some(ra_at) = new_sp.checked_sub(8) else {
        return Exec::Framehop;
    };
    let ra = match read.read_word(ra_at) {
        Ok(v) => v,
        Err(()) => return Exec::Read(ra_at),
    };
    if ra == 0 {
        return Exec::End;
    }
    if new_sp == sp && ra == regs.ip {
        // framehop's DidNotAdvance: let it report that.
        return Exec::Framehop;
    }
    regs.ip = ra;
    regs.sp = new_sp;
    regs.bp = new_bp;
    Exec::Frame(ra)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::self_image::this_binary;

    #[test]
    fn infers_the_shapes_framehop_caches() {
        let (sp, bp) = (0x1000u64, 0x9000u64);
        // OffsetSp: sp + 24, return address at sp + 16.
        assert_eq!(
            infer(sp, bp, (Some(TAG | (sp + 16)), sp + 24, bp)),
            Rule::Sp {
                sp_by_8: 3,
                bp: Bp::Keep
            }
        );
        // OffsetSpAndRestoreBp / pops: bp read at sp + 8.
        assert_eq!(
            infer(sp, bp, (Some(TAG | (sp + 16)), sp + 24, TAG | (sp + 8))),
            Rule::Sp {
                sp_by_8: 3,
                bp: Bp::AtSp(1)
            }
        );
        assert_eq!(
            infer(sp, bp, (Some(TAG | (bp + 8)), bp + 16, TAG | bp)),
            Rule::FramePointer
        );
        assert_eq!(infer(sp, bp, (None, sp, bp)), Rule::End);
        // A return address that is not the word below the caller's sp.
        assert_eq!(
            infer(sp, bp, (Some(TAG | (sp + 8)), sp + 24, bp)),
            Rule::Framehop
        );
        // A caller's sp taken from memory (a CFA expression `[sp + 8]`).
        assert_eq!(
            infer(sp, bp, (Some(TAG | (sp + 8 - 8)), TAG | (sp + 8), bp)),
            Rule::Framehop
        );
        // bp from a value that is no stack read.
        assert_eq!(
            infer(sp, bp, (Some(TAG | (sp + 16)), sp + 24, 42)),
            Rule::Framehop
        );
    }

    /// Every learned rule of this test binary's own `.eh_frame` (real compiler output),
    /// executed on pseudo-random stacks, gives framehop's result exactly.
    #[test]
    fn learned_rules_step_exactly_like_framehop() {
        rules_step_exactly_like_framehop(false);
    }

    /// The same with functions' CFI rows (`cfi_rows.rs`) giving the rules.
    #[test]
    fn rules_from_cfi_rows_step_exactly_like_framehop() {
        rules_step_exactly_like_framehop(true);
    }

    fn rules_step_exactly_like_framehop(from_rows: bool) {
        let (text, modules) = this_binary();
        let unwinder = modules.unwinder();
        let mut ours = RuleCache::new();
        if from_rows {
            ours.rows.grow();
            assert!(ours.rows.is_active());
        }
        let mut learning = DwarfCache::new_in();
        let mut reference = DwarfCache::new_in();
        let word = |a: u64| {
            let h = (a ^ 0x9e37_79b9).wrapping_mul(0x2545_f491_4f6c_dd1d);
            // Mostly plausible stack addresses and return addresses, some zeros.
            match h >> 61 {
                0 => 0,
                1 | 2 => text.start + (h >> 20) % (text.end - text.start),
                _ => 0x7ff0_0000_0000 + (h >> 24) % 0x10_0000 * 8,
            }
        };
        let (mut cached, mut compared) = (0u32, 0u32);
        let step = (((text.end - text.start) / 20_000) | 1).max(3);
        let mut pc = text.start;
        while pc < text.end {
            for first in [true, false] {
                let address = if first {
                    FrameAddress::from_instruction_pointer(pc)
                } else {
                    FrameAddress::from_return_address(pc + 1).unwrap()
                };
                let rule = ours.rule(&modules, &mut learning, address);
                if rule == Rule::Framehop {
                    continue;
                }
                cached += 1;
                for k in 0..4u64 {
                    let sp = 0x7ff0_0000_0000 + ((pc * 31 + k * 977) % 0x8_0000) * 8;
                    let bp = match k {
                        0 => 0,
                        1 => sp - 64,
                        _ => sp + 8 * ((pc + k) % 200),
                    };
                    let mut read = |a: u64| if a % 8 == 4 { Err(()) } else { Ok(word(a)) };
                    let mut a = StepRegs {
                        ip: address.address(),
                        sp,
                        bp,
                    };
                    let mut b = a.framehop();
                    let got = exec(rule, first, &mut a, &mut read);
                    let want = unwinder.unwind_frame(address, &mut b, &mut reference, &mut read);
                    compared += 1;
                    match (got, want) {
                        (Exec::Framehop, _) => {}
                        (Exec::Frame(x), Ok(Some(y))) => {
                            assert_eq!(x, y, "{pc:#x} {rule:?}");
                            assert_eq!((a.sp, a.bp, a.ip), (b.sp(), b.bp(), b.ip()));
                        }
                        (Exec::End, Ok(None)) => {}
                        (Exec::Read(x), Err(framehop::Error::CouldNotReadStack(y))) => {
                            assert_eq!(x, y, "{pc:#x} {rule:?}")
                        }
                        other => panic!("{pc:#x} first {first} {rule:?}: {other:?}"),
                    }
                }
            }
            pc += step;
        }
        // Nearly all addresses of ordinary code have a cacheable rule.
        assert!(cached > 10_000, "{cached} rules learned");
        assert!(compared >= 4 * cached);
    }

    /// A thread that meets few call sites keeps the smallest cache; one
    /// that meets many grows it up to the bound; the rules learned before a
    /// growth stay (no relearning: the learn count does not move).
    #[test]
    fn grows_with_the_call_sites_it_meets_up_to_a_bound() {
        let (text, modules) = this_binary();
        let mut c = RuleCache::new();
        let mut fh = DwarfCache::new_in();
        let at = |k: u64| {
            FrameAddress::from_return_address(text.start + 1 + k * 13 % (text.end - text.start - 1))
                .unwrap()
        };
        for k in 0..MIN_SLOTS as u64 / 4 {
            c.rule(&modules, &mut fh, at(k));
        }
        assert_eq!(c.len(), MIN_SLOTS);
        // One more learned rule: twice the slots.
        let before: Vec<Rule> = (0..MIN_SLOTS as u64 / 4)
            .map(|k| c.rule(&modules, &mut fh, at(k)))
            .collect();
        c.rule(&modules, &mut fh, at(MIN_SLOTS as u64));
        // Asked for, done outside the capture.
        assert_eq!(c.len(), MIN_SLOTS);
        assert!(c.wants_growth());
        c.grow();
        assert!(!c.wants_growth());
        assert_eq!(c.len(), 2 * MIN_SLOTS);
        let learned = c.learned;
        let after: Vec<Rule> = (0..MIN_SLOTS as u64 / 4)
            .map(|k| c.rule(&modules, &mut fh, at(k)))
            .collect();
        assert_eq!(before, after);
        // Collisions in the larger table may evict a few, not most.
        assert!(
            c.learned - learned < MIN_SLOTS / 16,
            "{}",
            c.learned - learned
        );
        for k in 0..4 * MAX_SLOTS as u64 {
            c.rule(&modules, &mut fh, at(k));
            c.grow();
        }
        assert_eq!(c.len(), MAX_SLOTS);
        assert!(!c.wants_growth());
    }

    /// Two addresses whose hashes name the same pair of slots both stay
    /// (a direct-mapped cache would relearn them in turn); a third drops
    /// the one learned longest ago; a growth keeps both ways.
    #[test]
    fn two_addresses_of_one_set_both_stay() {
        let (text, modules) = this_binary();
        let mut c = RuleCache::new();
        let mut fh = DwarfCache::new_in();
        let set =
            |a: FrameAddress, shift: u32| RuleCache::hash_index(RuleCache::key(a), shift) & !1;
        let shift = c.shift;
        let mut same = Vec::new();
        let mut pc = text.start + 1;
        while same.len() < 3 && pc < text.end {
            let a = FrameAddress::from_return_address(pc).unwrap();
            if same.is_empty() || set(a, shift) == set(same[0], shift) {
                same.push(a);
            }
            pc += 1;
        }
        let [a, b, third] = same[..] else {
            panic!("no three addresses of one set")
        };
        let ra = c.rule(&modules, &mut fh, a);
        let rb = c.rule(&modules, &mut fh, b);
        assert_eq!(c.learned, 2);
        for _ in 0..3 {
            assert_eq!(c.rule(&modules, &mut fh, a), ra);
            assert_eq!(c.rule(&modules, &mut fh, b), rb);
        }
        assert_eq!(c.learned, 2, "relearned a rule its set still held");
        // A third: `a`, learned first, goes; `b` stays.
        c.rule(&modules, &mut fh, third);
        assert_eq!(c.learned, 3);
        c.rule(&modules, &mut fh, b);
        assert_eq!(c.learned, 3);
        // `a` again: `b`, learned before `third`, goes (the order is that
        // of learning, not of use).
        c.rule(&modules, &mut fh, a);
        assert_eq!(c.learned, 4);
        let rt = c.rule(&modules, &mut fh, third);
        assert_eq!(c.learned, 4);
        // `a` and `third` are the set's two rules: a growth keeps both,
        // wherever the larger table puts them.
        c.learned = MIN_SLOTS;
        c.grow();
        assert_eq!(c.len(), 2 * MIN_SLOTS);
        assert_eq!(c.learned, 0);
        assert_eq!(c.rule(&modules, &mut fh, a), ra);
        assert_eq!(c.rule(&modules, &mut fh, third), rt);
        assert_eq!(c.learned, 0, "a growth lost a rule");
        assert_eq!(c.rule(&modules, &mut fh, b), rb);
        assert_eq!(c.learned, 1);
    }

    #[test]
    fn a_changed_module_table_relearns() {
        let data = crate::self_image::this_executable();
        let pc = data.text.start + (data.text.end - data.text.start) / 2;
        let mut modules = crate::Modules::new();
        modules.add(data);
        let mut ours = RuleCache::new();
        let mut fh = DwarfCache::new_in();
        let address = FrameAddress::from_return_address(pc).unwrap();
        let r1 = ours.rule(&modules, &mut fh, address);
        let empty = crate::Modules::new();
        // No module: framehop's fallback (frame pointer) under the other table.
        let r2 = ours.rule(&empty, &mut fh, address);
        assert_eq!(r2, Rule::FramePointer);
        assert_ne!(modules.id(), empty.id());
        assert_eq!(ours.rule(&modules, &mut fh, address), r1);
    }
}
