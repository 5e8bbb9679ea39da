//! Functions' CFI rows, each function evaluated once, as rules for the
//! rule cache (`rule_cache.rs`) to learn from.
//!
//! On a miss the rule cache asked framehop, which evaluates the function's
//! call-frame instructions with gimli from the function's first row up to
//! the address asked for. In a large Fortran code that is most of a miss: a
//! CP2K rank learns ~23 000 addresses in ~1100 functions of up to 7447 rows,
//! the median address at row 257 (docs/performance.md), ~4 µs a miss.
//! Here a miss evaluates the address's whole function once, translates
//! every row into a rule exactly as framehop translates the row it finds
//! (`translate`, after framehop's `x86_64/dwarf.rs`), and keeps the rows of
//! the functions met since the buffer last filled; the function's other
//! addresses are then a binary search. A row framehop would not translate
//! (its uncacheable path), an address outside its function's entry, or an
//! object framehop unwinds without `.eh_frame_hdr`, gives no answer here:
//! the rule cache then learns by probing framehop, as before.
//!
//! The buffers are allocated outside a capture ([`FunctionRows::grow`],
//! asked for by a thread that has learned many rules); the evaluation
//! itself never allocates (gimli's context on fixed arrays, of framehop's
//! sizes, so that a function whose CFI overflows framehop's stack overflows
//! here too and is left to framehop).

use gimli::{
    BaseAddresses, CfaRule, EhFrame, EhFrameHdr, EndianSlice, LittleEndian, Register, RegisterRule,
    UnwindContext, UnwindContextStorage, UnwindSection, UnwindTable, UnwindTableRow, X86_64,
};

use crate::modules::Section;
use crate::rule_cache::{Bp, Rule};

/// gimli's unwind context on fixed arrays, of the sizes framehop's
/// `MustNotAllocateDuringUnwind` gives it (192 register rules, a
/// remembered-state stack of 4): a function framehop cannot evaluate, this
/// cannot either.
struct Storage;

impl<RO: gimli::ReaderOffset> UnwindContextStorage<RO> for Storage {
    type Rules = [(Register, RegisterRule<RO>); 192];
    type Stack = [UnwindTableRow<RO, Self>; 4];
}

type Reader<'a> = EndianSlice<'a, LittleEndian>;
type Context = UnwindContext<usize, Storage>;

/// A module's unwind sections as framehop was given them
/// (`Modules::add`: both sections, framehop's "eh_frame_hdr and eh_frame"
/// case), with runtime addresses.
#[derive(Clone, Debug)]
pub(crate) struct ModuleCfi {
    pub(crate) base_avma: u64,
    pub(crate) text_avma: u64,
    pub(crate) eh_frame_hdr: (u64, Section),
    pub(crate) eh_frame: (u64, Section),
}

impl ModuleCfi {
    /// framehop's base addresses for the module, in its coordinates
    /// (addresses relative to the load bias, `.got` unknown: 0).
    fn bases(&self) -> BaseAddresses {
        BaseAddresses::default()
            .set_eh_frame(self.eh_frame.0.wrapping_sub(self.base_avma))
            .set_eh_frame_hdr(self.eh_frame_hdr.0.wrapping_sub(self.base_avma))
            .set_text(self.text_avma.wrapping_sub(self.base_avma))
            .set_got(0)
    }
}

/// Rows kept at most (12 bytes each), and functions.
const MAX_ROWS: usize = 16384;
const MAX_FUNCTIONS: usize = 512;

/// Stands for "no rule from this row": never a translation's result.
const NO_RULE: Rule = Rule::Framehop;

/// One function's rows: `[start, end)` in runtime addresses, its rows at
/// `rows[first..last]`, each from its offset from `start`.
#[derive(Clone, Copy, Debug)]
struct Function {
    start: u64,
    end: u64,
    first: u32,
    last: u32,
}

/// See the module documentation.
pub(crate) struct FunctionRows {
    /// None until [`FunctionRows::grow`].
    ctx: Option<Box<Context>>,
    rows: Vec<(u32, Rule)>,
    functions: Vec<Function>,
    /// Functions evaluated (for tests and statistics).
    evaluated: u64,
}

impl FunctionRows {
    /// Without buffers: answers nothing until [`FunctionRows::grow`].
    pub(crate) fn new() -> Self {
        FunctionRows {
            ctx: None,
            rows: Vec::new(),
            functions: Vec::new(),
            evaluated: 0,
        }
    }

    pub(crate) fn is_active(&self) -> bool {
        self.ctx.is_some()
    }

    /// Allocates the buffers (outside a capture). Without the memory it
    /// stays as it is.
    pub(crate) fn grow(&mut self) {
        if self.ctx.is_some() {
            return;
        }
        let (mut rows, mut functions) = (Vec::new(), Vec::new());
        if rows.try_reserve_exact(MAX_ROWS).is_err()
            || functions.try_reserve_exact(MAX_FUNCTIONS).is_err()
        {
            return;
        }
        self.rows = rows;
        self.functions = functions;
        self.ctx = Some(Box::new(Context::new_in()));
    }

    /// Forgets every function (another module table).
    pub(crate) fn clear(&mut self) {
        self.rows.clear();
        self.functions.clear();
    }

    /// Functions evaluated since the thread began.
    pub(crate) fn evaluated(&self) -> u64 {
        self.evaluated
    }

    /// The rule framehop would use at `lookup` (a lookup address: a return
    /// address minus one, or an instruction pointer), if the function's rows
    /// give it; evaluates the function if it is not kept. Never allocates.
    pub(crate) fn rule(&mut self, cfi: Option<&ModuleCfi>, lookup: u64) -> Option<Rule> {
        self.ctx.as_ref()?;
        let f = match self
            .functions
            .iter()
            .rev()
            .find(|f| (f.start..f.end).contains(&lookup))
        {
            Some(f) => *f,
            None => self.evaluate(cfi?, lookup)?,
        };
        // Rows may end early (an error framehop would meet there too, or a
        // full buffer): past them, no answer.
        if !(f.start..f.end).contains(&lookup) {
            return None;
        }
        let rows = self.rows.get(f.first as usize..f.last as usize)?;
        let off = u32::try_from(lookup - f.start).ok()?;
        let i = rows.partition_point(|r| r.0 <= off).checked_sub(1)?;
        let rule = rows.get(i)?.1;
        (rule != NO_RULE).then_some(rule)
    }

    /// Evaluates the function of `lookup` and keeps its rows: the function,
    /// or None when framehop would not find that function through the
    /// search table for every address of it, or the rows do not fit.
    fn evaluate(&mut self, cfi: &ModuleCfi, lookup: u64) -> Option<Function> {
        let bases = cfi.bases();
        let svma = lookup.checked_sub(cfi.base_avma)?;
        let hdr = EhFrameHdr::new(&cfi.eh_frame_hdr.1, LittleEndian)
            .parse(&bases, 8)
            .ok()?;
        let table = hdr.table()?;
        let fde_at = |a: u64| -> Option<usize> {
            let ptr = table.lookup(a, &bases).ok()?;
            Some(table.pointer_to_offset(ptr).ok()?.0)
        };
        let offset = fde_at(svma)?;
        let mut eh_frame = EhFrame::new(&cfi.eh_frame.1, LittleEndian);
        eh_frame.set_address_size(8);
        let fde = eh_frame
            .fde_from_offset(
                &bases,
                gimli::EhFrameOffset(offset),
                EhFrame::cie_from_offset,
            )
            .ok()?;
        let (start, end) = (fde.initial_address(), fde.end_address());
        // Every address of the function finds this entry in framehop's
        // search (the table is sorted: its two ends suffice), and the
        // address is inside it (else framehop's rule for uncovered code).
        if !fde.contains(svma) || fde_at(start)? != offset || fde_at(end.checked_sub(1)?)? != offset
        {
            return None;
        }
        if self.rows.len() > MAX_ROWS / 2 || self.functions.len() == MAX_FUNCTIONS {
            self.clear();
        }
        let first = self.rows.len();
        let ctx = self.ctx.as_deref_mut()?;
        let mut covered = start;
        {
            let mut rows: UnwindTable<'_, '_, Reader<'_>, Storage> =
                fde.rows(&eh_frame, &bases, ctx).ok()?;
            // Until the last row, an error (framehop would fail from there)
            // or a full buffer: the rows before it stand.
            while let Ok(Some(row)) = rows.next_row() {
                if self.rows.len() == self.rows.capacity() {
                    break;
                }
                let Ok(off) = u32::try_from(row.start_address().wrapping_sub(start)) else {
                    break;
                };
                self.rows.push((off, translate(row)));
                covered = row.end_address();
            }
        }
        self.evaluated += 1;
        if self.rows.len() == first {
            return None;
        }
        let f = Function {
            start: start.wrapping_add(cfi.base_avma),
            end: covered.min(end).wrapping_add(cfi.base_avma),
            first: first as u32,
            last: self.rows.len() as u32,
        };
        self.functions.push(f);
        Some(f)
    }
}

/// framehop's translation of a row into one of its cacheable rules
/// (`translate_into_unwind_rule` in framehop's `x86_64/dwarf.rs`, 0.16), as
/// our [`Rule`] (the rule cache's probes infer the same from framehop's
/// result: `rule_cache::infer`); [`NO_RULE`] where framehop takes its
/// uncacheable path.
fn translate(row: &UnwindTableRow<usize, Storage>) -> Rule {
    translate_parts(
        row.cfa(),
        row.register(X86_64::RBP),
        row.register(X86_64::RA),
    )
}

/// [`translate`] on the row's parts.
fn translate_parts(
    cfa: &CfaRule<usize>,
    bp: Option<RegisterRule<usize>>,
    ra: Option<RegisterRule<usize>>,
) -> Rule {
    match ra {
        None | Some(RegisterRule::Undefined) => return Rule::End,
        Some(RegisterRule::Offset(-8)) => {}
        Some(_) => return NO_RULE,
    }
    // framehop: the frame pointer either unchanged or stored relative to
    // the CFA.
    let bp_offset = match bp {
        None | Some(RegisterRule::Undefined) | Some(RegisterRule::SameValue) => None,
        Some(RegisterRule::Offset(o)) => Some(o),
        Some(_) => return NO_RULE,
    };
    match *cfa {
        CfaRule::RegisterAndOffset { register, offset } if register == X86_64::RSP => {
            // framehop divides first, truncating, then narrows.
            let Ok(sp_by_8) = u16::try_from(offset / 8) else {
                return NO_RULE;
            };
            let bp = match bp_offset {
                None => Bp::Keep,
                Some(o) => match i16::try_from(offset.wrapping_add(o) / 8) {
                    Ok(at) => Bp::AtSp(at),
                    Err(_) => return NO_RULE,
                },
            };
            Rule::Sp { sp_by_8, bp }
        }
        CfaRule::RegisterAndOffset { register, offset } if register == X86_64::RBP => {
            if offset == 16 && bp_offset == Some(-16) {
                Rule::FramePointer
            } else {
                NO_RULE
            }
        }
        _ => NO_RULE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dwarf::DwarfCache;
    use crate::rule_cache::learn;
    use crate::self_image::this_binary;
    use framehop::FrameAddress;

    /// Wherever a function's rows give a rule, it is the rule the rule
    /// cache learns by probing framehop at that address; the rows answer
    /// for nearly every address, each function evaluated once.
    #[test]
    fn rows_give_the_rules_probing_framehop_gives() {
        let (text, modules) = this_binary();
        let cfi = modules
            .cfi_for(text.start)
            .expect("this binary has .eh_frame_hdr");
        let mut rows = FunctionRows::new();
        assert_eq!(rows.rule(Some(cfi), text.start + 0x100), None, "inactive");
        rows.grow();
        let mut fh = DwarfCache::new_in();
        let (mut answered, mut asked, mut not_translated) = (0u32, 0u32, 0u32);
        let step = (((text.end - text.start) / 30_000) | 1).max(3);
        let mut pc = text.start;
        while pc < text.end {
            for address in [
                FrameAddress::from_instruction_pointer(pc),
                FrameAddress::from_return_address(pc + 1).unwrap(),
            ] {
                let lookup = address.address_for_lookup();
                asked += 1;
                let probed = learn(modules.unwinder(), &mut fh, address);
                match rows.rule(modules.cfi_for(lookup), lookup) {
                    Some(r) => {
                        answered += 1;
                        assert_eq!(r, probed, "{lookup:#x}");
                    }
                    None if probed == Rule::Framehop => not_translated += 1,
                    None => {}
                }
            }
            pc += step;
        }
        assert!(
            answered > asked * 9 / 10,
            "{answered} of {asked} ({not_translated} uncacheable)"
        );
        assert!(
            rows.evaluated() * 4 < u64::from(answered),
            "{} functions evaluated for {answered} answers",
            rows.evaluated()
        );
    }

    /// [`rows_give_the_rules_probing_framehop_gives`] over the text of the
    /// ELF file at `path` (~200 000 addresses): how many the rows answered,
    /// of how many.
    fn rows_match_probing_in(path: &str) -> (u64, u64) {
        let data = crate::self_image::file_image(path, 0x5555_0000_0000);
        let text = data.text.clone();
        let mut modules = crate::Modules::new();
        modules.add(data);
        let cfi = modules.cfi_for(text.start).unwrap();
        let mut rows = FunctionRows::new();
        rows.grow();
        let mut fh = DwarfCache::new_in();
        let (mut asked, mut answered) = (0u64, 0u64);
        // An odd stride, so that every offset within a function comes up.
        let step = ((text.end - text.start) / 100_000) | 1;
        for pc in text.clone().step_by(step as usize) {
            for address in [
                FrameAddress::from_instruction_pointer(pc),
                FrameAddress::from_return_address(pc + 1).unwrap(),
            ] {
                let lookup = address.address_for_lookup();
                if let Some(r) = rows.rule(Some(cfi), lookup) {
                    answered += 1;
                    let probed = learn(modules.unwinder(), &mut fh, address);
                    assert_eq!(r, probed, "{path} {lookup:#x}");
                }
                asked += 1;
            }
        }
        eprintln!(
            "{path}: {answered} of {asked} addresses answered by the rows, all as probing framehop; {} functions evaluated",
            rows.evaluated()
        );
        (answered, asked)
    }

    /// The same in the C library this test runs with and, where installed,
    /// gfortran's runtime, LAMMPS's library (C++; scripts/setup.sh installs
    /// both) and a large Fortran program whose functions have thousands of
    /// rows (Debian's CP2K, `apt-get install cp2k`, for
    /// `benches/real_mpi.py --app cp2k`).
    #[test]
    fn rows_give_the_rules_probing_framehop_gives_in_system_binaries() {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let libc = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.ends_with("/libc.so.6"))
            .expect("this test's C library");
        let (answered, asked) = rows_match_probing_in(libc);
        assert!(answered > asked / 2, "{answered} of {asked}");
        for path in [
            "/usr/lib/x86_64-linux-gnu/libgfortran.so.5",
            "/usr/lib/x86_64-linux-gnu/liblammps.so.0",
            "/usr/bin/cp2k.psmp",
        ] {
            if std::path::Path::new(path).exists() {
                let (answered, asked) = rows_match_probing_in(path);
                assert!(answered > asked / 2, "{path}: {answered} of {asked}");
            }
        }
    }

    /// The same over the binaries `WMHCCT_CFI_BINARIES` names (a list
    /// separated by `:`). Run by hand:
    /// `WMHCCT_CFI_BINARIES=… cargo test -p wmhcct-unwinder -- --ignored`.
    #[test]
    #[ignore = "reads the binaries named by WMHCCT_CFI_BINARIES"]
    fn rows_give_the_rules_probing_framehop_gives_in_other_binaries() {
        let list = std::env::var("WMHCCT_CFI_BINARIES").expect("WMHCCT_CFI_BINARIES");
        for path in list.split(':').filter(|p| !p.is_empty()) {
            let (answered, asked) = rows_match_probing_in(path);
            assert!(answered > 0, "{path}: none of {asked}");
        }
    }

    /// A function's rows span its whole entry: every address of one
    /// function is answered from one evaluation, and a second pass over
    /// the same addresses evaluates nothing more.
    #[test]
    fn a_function_is_evaluated_once() {
        let (text, modules) = this_binary();
        let mut rows = FunctionRows::new();
        rows.grow();
        let cfi = modules.cfi_for(text.start).unwrap();
        // The first function from a third into the text (between functions
        // there may be padding no entry covers).
        let f = (text.start + (text.end - text.start) / 3..text.end)
            .find_map(|a| rows.evaluate(cfi, a))
            .expect("a function in the text");
        assert_eq!(rows.evaluated(), 1);
        let mut answered = 0;
        for _pass in 0..2 {
            for a in f.start..f.end {
                answered += usize::from(rows.rule(Some(cfi), a).is_some());
            }
        }
        assert_eq!(rows.evaluated(), 1);
        assert!(answered > 0);
        // Outside every function (below the text): nothing.
        assert_eq!(
            rows.rule(Some(cfi), text.start.saturating_sub(0x10_0000)),
            None
        );
    }

    /// More rows than the buffer's half: the functions kept are dropped
    /// and the buffer starts again, without allocating.
    #[test]
    fn a_full_buffer_starts_again() {
        let (text, modules) = this_binary();
        let mut rows = FunctionRows::new();
        rows.grow();
        let capacity = (rows.rows.capacity(), rows.functions.capacity());
        let cfi = modules.cfi_for(text.start).unwrap();
        let mut pc = text.start;
        let mut restarts = 0;
        let mut before = 0;
        while pc < text.end && restarts < 3 {
            let _ = rows.rule(Some(cfi), pc);
            if rows.rows.len() < before {
                restarts += 1;
            }
            before = rows.rows.len();
            pc += 97;
        }
        assert!(restarts >= 1, "never filled: {} rows", rows.rows.len());
        assert_eq!((rows.rows.capacity(), rows.functions.capacity()), capacity);
    }

    /// framehop's translation, row shape by row shape.
    #[test]
    fn translates_as_framehop_does() {
        use gimli::CfaRule;
        let rule =
            |cfa: CfaRule<usize>,
             bp: Option<RegisterRule<usize>>,
             ra: Option<RegisterRule<usize>>| { translate_parts(&cfa, bp, ra) };
        let sp = |offset| CfaRule::RegisterAndOffset {
            register: X86_64::RSP,
            offset,
        };
        let ra8 = Some(RegisterRule::Offset(-8));
        assert_eq!(rule(sp(8), None, None), Rule::End);
        assert_eq!(rule(sp(8), None, Some(RegisterRule::Undefined)), Rule::End);
        assert_eq!(
            rule(sp(8), None, ra8.clone()),
            Rule::Sp {
                sp_by_8: 1,
                bp: Bp::Keep
            }
        );
        // Truncating division, as framehop's.
        assert_eq!(
            rule(sp(20), None, ra8.clone()),
            Rule::Sp {
                sp_by_8: 2,
                bp: Bp::Keep
            }
        );
        assert_eq!(
            rule(sp(-4), None, ra8.clone()),
            Rule::Sp {
                sp_by_8: 0,
                bp: Bp::Keep
            }
        );
        assert_eq!(rule(sp(-8), None, ra8.clone()), NO_RULE);
        assert_eq!(rule(sp(8 << 16), None, ra8.clone()), NO_RULE);
        assert_eq!(
            rule(sp(16), Some(RegisterRule::Offset(-16)), ra8.clone()),
            Rule::Sp {
                sp_by_8: 2,
                bp: Bp::AtSp(0)
            }
        );
        assert_eq!(
            rule(sp(16), Some(RegisterRule::SameValue), ra8.clone()),
            Rule::Sp {
                sp_by_8: 2,
                bp: Bp::Keep
            }
        );
        assert_eq!(
            rule(
                sp(16),
                Some(RegisterRule::Register(X86_64::RAX)),
                ra8.clone()
            ),
            NO_RULE
        );
        assert_eq!(rule(sp(8), None, Some(RegisterRule::Offset(-16))), NO_RULE);
        let bp = |offset| CfaRule::RegisterAndOffset {
            register: X86_64::RBP,
            offset,
        };
        assert_eq!(
            rule(bp(16), Some(RegisterRule::Offset(-16)), ra8.clone()),
            Rule::FramePointer
        );
        assert_eq!(
            rule(bp(32), Some(RegisterRule::Offset(-16)), ra8.clone()),
            NO_RULE
        );
        assert_eq!(rule(bp(16), None, ra8.clone()), NO_RULE);
        let other = CfaRule::RegisterAndOffset {
            register: X86_64::RAX,
            offset: 8,
        };
        assert_eq!(rule(other, None, ra8), NO_RULE);
    }
}
