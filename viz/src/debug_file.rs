//! A module's separate debug file (`/usr/lib/debug/.build-id/ab/cdef….debug`,
//! as distributions ship them), loaded for `addr2line` with less work than
//! its `Loader` does.
//!
//! The C library's debug file is on the critical path of every conversion:
//! every stack ends in it (`__libc_start_call_main`, `start_thread`), and
//! Debian's is compressed (3.7 MB of zlib streams, 10 MB of DWARF). The
//! `Loader` decompresses every DWARF section one after the other, the
//! location lists too, which no symbolisation reads (they say where a
//! variable lives). Here the location lists are left out, and the largest
//! section (`.debug_info`, two thirds of the work) is decompressed on a
//! thread of its own while this one decompresses the rest; the context is
//! made of the units the report's addresses are in
//! ([`DebugSections::load_for`]). The lookups are `addr2line`'s, on the
//! same DWARF: names and lines are the `Loader`'s.
//!
//! Of `.debug_info` only the part up to the end of the last unit the
//! addresses are in is decompressed ([`DebugSections::load_for`]), when
//! `.debug_aranges` names a unit for every address: a zlib stream is read
//! from its start, and the C library's first units hold the root of every
//! single-threaded stack (`__libc_start_call_main`'s unit ends 25 KB into
//! 5.8 MB); a thread's root (`clone3`) lies at 4.1 MB.
//!
//! A debug file has no split units (those are the `.dwo`/`.dwp` files of
//! `-gsplit-dwarf` builds, which the `Loader` still reads for module files).

use std::borrow::Cow;
use std::collections::HashSet;
use std::path::Path;

use addr2line::gimli::{self, DwarfSections, EndianSlice, RunTimeEndian, SectionId};
use object::{Object, ObjectSection};

/// The DWARF reader over sections held in memory.
pub type Reader<'a> = EndianSlice<'a, RunTimeEndian>;

/// Sections no symbolisation reads: variables' locations.
const UNREAD: [SectionId; 2] = [SectionId::DebugLoc, SectionId::DebugLocLists];

/// A debug file's DWARF sections, decompressed where they were compressed.
pub struct DebugSections {
    /// All but `.debug_info`, which is `info` (changed in place by
    /// [`DebugSections::load_for`], which may also hold only its first
    /// units).
    sections: DwarfSections<Vec<u8>>,
    info: Vec<u8>,
    endian: RunTimeEndian,
    /// The file's bytes (its symbol table, `elf_symbols.rs`, is read from
    /// them rather than from the file again).
    data: Vec<u8>,
}

impl DebugSections {
    /// The DWARF sections of the file at `path`; `threads` > 1 decompresses
    /// `.debug_info` on a second thread. `None` if the file cannot be read,
    /// is not an object file or a section cannot be decompressed.
    #[cfg(test)]
    pub fn load(path: &Path, threads: usize) -> Option<DebugSections> {
        Self::load_with(path, threads, None).map(|(s, _)| s)
    }

    /// The sections [`DebugSections::load`] gives, for lookups of `probes`
    /// only.
    ///
    /// Every compilation unit that no probe lies in, as `.debug_aranges`
    /// tells, is left out of the context: the context parses each unit's
    /// abbreviations and line-program header up front (the C library's
    /// 4 126 units: about half of the time its debug file took), where a
    /// report's frames lie in a handful. The units left out become one type
    /// unit each run of them (a header `addr2line` skips). And where
    /// `.debug_aranges` names a unit for every probe, `.debug_info` is
    /// decompressed only up to the end of the last of them.
    ///
    /// Lookups of `probes` give what the whole file gives: a unit kept
    /// refers to no other unit (none of its entries has a `DW_FORM_ref_addr`
    /// value, else nothing is left out and all of `.debug_info` is
    /// decompressed), and a unit `.debug_aranges` does not cover, or covers
    /// with an entry that cannot be read, is kept.
    pub fn load_for(path: &Path, threads: usize, probes: &[u64]) -> Option<DebugSections> {
        Self::load_with(path, threads, Some(probes)).map(|(s, _)| s)
    }

    /// The sections, and with probes ([`DebugSections::load_for`]) how many
    /// units were left out.
    fn load_with(
        path: &Path,
        threads: usize,
        probes: Option<&[u64]>,
    ) -> Option<(DebugSections, usize)> {
        let data = std::fs::read(path).ok()?;
        let object = object::File::parse(&*data).ok()?;
        let endian = if object.is_little_endian() {
            RunTimeEndian::Little
        } else {
            RunTimeEndian::Big
        };
        let load = |id: SectionId| -> Result<Vec<u8>, ()> {
            if UNREAD.contains(&id) {
                return Ok(Vec::new());
            }
            match object.section_by_name(id.name()) {
                Some(section) => section
                    .uncompressed_data()
                    .map(Cow::into_owned)
                    .map_err(|_| ()),
                None => Ok(Vec::new()),
            }
        };
        // With probes, `.debug_aranges` first: it says how much of
        // `.debug_info` they need.
        let mut aranges = match probes {
            Some(_) => Some(load(SectionId::DebugAranges).ok()?),
            None => None,
        };
        let covered = probes.zip(aranges.as_deref()).map(|(probes, aranges)| {
            Covered::of(&gimli::DebugAranges::new(aranges, endian), probes)
        });
        let last_unit = covered.as_ref().and_then(Covered::last_needed);
        let info_section = object.section_by_name(SectionId::DebugInfo.name());
        let prefix = last_unit
            .and_then(|unit| Some((unit, info_section.as_ref()?.compressed_data().ok()?)))
            .filter(|(_, c)| c.format == object::CompressionFormat::Zlib);
        let info = || -> Result<Info, ()> {
            match prefix {
                Some((unit, compressed)) => Info::through_unit(compressed, unit, endian),
                None => load(SectionId::DebugInfo).map(Info::Whole),
            }
        };
        // `.debug_info` apart from the others (on a second thread when
        // there is one: a thread that cannot start is no error).
        let rest = |id| match id {
            SectionId::DebugInfo => Ok(Vec::new()),
            SectionId::DebugAranges if aranges.is_some() => Ok(aranges.take().unwrap_or_default()),
            _ => load(id),
        };
        let (sections, info) = std::thread::scope(|s| {
            let info_thread = (threads > 1)
                .then(|| std::thread::Builder::new().spawn_scoped(s, info).ok())
                .flatten();
            let sections = DwarfSections::load(rest);
            let info = match info_thread {
                // (`panic = "abort"`: a thread that panics ends the process.)
                Some(t) => t.join().unwrap_or(Err(())),
                None => info(),
            };
            (sections, info)
        });
        let (sections, info) = (sections.ok()?, info.ok()?);
        // The units to leave out, made once: on the part, where there is
        // one (its units are the whole file's first ones).
        let mut planned = None;
        let info = match info {
            Info::Whole(all) => all,
            Info::Part(part, end) => {
                let dwarf = dwarf_of(&sections, part.done().get(..end)?, endian);
                let p = covered.as_ref().map(|c| plan(&dwarf, c));
                let keep_all = matches!(p, Some(Err(KeepAll)));
                planned = p;
                if keep_all {
                    // A unit kept refers to other units' entries: they may
                    // lie after the part, so all of it is needed (and that
                    // unit keeps every unit of the whole too).
                    part.whole().ok()?
                } else {
                    part.into_first(end)
                }
            }
        };
        drop(object);
        let mut out = DebugSections {
            sections,
            info,
            endian,
            data,
        };
        let left_out = match covered {
            Some(c) => {
                let p = planned.unwrap_or_else(|| plan(&out.dwarf(), &c));
                out.leave_out(p.unwrap_or_default())
            }
            None => 0,
        };
        Some((out, left_out))
    }

    /// Bytes of `.debug_info` held (all of it, or the part
    /// [`DebugSections::load_for`] decompressed).
    #[cfg(test)]
    pub fn info_len(&self) -> usize {
        self.info.len()
    }

    /// The file's bytes.
    pub fn file(&self) -> &[u8] {
        &self.data
    }

    /// `addr2line`'s context over these sections.
    pub fn context(&self) -> Option<addr2line::Context<Reader<'_>>> {
        let mut dwarf = self.dwarf();
        dwarf.populate_abbreviations_cache(gimli::AbbreviationsCacheStrategy::Duplicates);
        addr2line::Context::from_dwarf(dwarf).ok()
    }

    fn dwarf(&self) -> gimli::Dwarf<Reader<'_>> {
        dwarf_of(&self.sections, &self.info, self.endian)
    }

    /// Make each run `(start, end, units)` of `plan` one type unit
    /// ([`DebugSections::load_for`]). Returns how many units were left out.
    fn leave_out(&mut self, plan: Vec<(usize, usize, usize)>) -> usize {
        let info = &mut self.info;
        let mut left_out = 0;
        for (start, end, count) in plan {
            let length = (end - start - 4) as u32;
            let mut header = [0u8; 24];
            let big = self.endian == RunTimeEndian::Big;
            header[..4].copy_from_slice(&if big {
                length.to_be_bytes()
            } else {
                length.to_le_bytes()
            });
            header[4..6].copy_from_slice(&if big {
                5u16.to_be_bytes()
            } else {
                5u16.to_le_bytes()
            });
            header[6] = gimli::DW_UT_type.0;
            header[7] = 8;
            // Abbreviations at offset 0, type signature 0, type offset 0:
            // never read, a type unit's entries are of no use to names.
            info[start..start + 24].copy_from_slice(&header);
            left_out += count;
        }
        left_out
    }
}

/// The DWARF of `sections` with `info` as its `.debug_info`.
fn dwarf_of<'a>(
    sections: &'a DwarfSections<Vec<u8>>,
    info: &'a [u8],
    endian: RunTimeEndian,
) -> gimli::Dwarf<Reader<'a>> {
    let mut dwarf = sections.borrow(|section| EndianSlice::new(section, endian));
    dwarf.debug_info = EndianSlice::new(info, endian).into();
    dwarf
}

/// What `.debug_aranges` says of a set of probes.
struct Covered {
    /// The units it has ranges for.
    units: HashSet<usize>,
    /// The units with a probe in one of their ranges, and those with a
    /// range that cannot be read.
    needed: HashSet<usize>,
    /// Every probe lies in a range it gives.
    every_probe: bool,
}

impl Covered {
    fn of(aranges: &gimli::DebugAranges<Reader<'_>>, probes: &[u64]) -> Covered {
        let mut sorted = probes.to_vec();
        sorted.sort_unstable();
        let mut probe_in = vec![false; sorted.len()];
        let mut units = HashSet::new();
        let mut needed = HashSet::new();
        let mut headers = aranges.headers();
        while let Ok(Some(header)) = headers.next() {
            let unit = header.debug_info_offset().0;
            units.insert(unit);
            let mut entries = header.entries();
            loop {
                match entries.next() {
                    Ok(Some(e)) => {
                        let r = e.range();
                        let first = sorted.partition_point(|&p| p < r.begin);
                        let inside = sorted[first..].partition_point(|&p| p < r.end);
                        if inside > 0 {
                            needed.insert(unit);
                            probe_in[first..first + inside].fill(true);
                        }
                    }
                    Ok(None) => break,
                    // An entry that cannot be read (one whose end overflows
                    // the address space): `addr2line` skips it and reads on,
                    // or takes the unit's ranges from its own entry; what
                    // the rest hold is not known here, so the unit is kept.
                    Err(_) => {
                        needed.insert(unit);
                        break;
                    }
                }
            }
        }
        Covered {
            units,
            needed,
            every_probe: probe_in.iter().all(|&p| p),
        }
    }

    /// The offset of the last unit the probes need, when `.debug_aranges`
    /// names one for each: the units after it hold none of them (a unit it
    /// has no ranges for could claim a probe only from its own entries,
    /// which would leave that probe without an arange).
    fn last_needed(&self) -> Option<usize> {
        if !self.every_probe {
            return None;
        }
        self.needed.iter().copied().max()
    }
}

/// A unit kept refers to another unit's entries, or a unit header cannot
/// be read: every unit is kept.
struct KeepAll;

/// The runs `(start, end, units)` of `.debug_info` to leave out
/// ([`DebugSections::load_for`]; possibly none), the units `covered` says
/// the probes need kept.
fn plan(
    dwarf: &gimli::Dwarf<Reader<'_>>,
    covered: &Covered,
) -> Result<Vec<(usize, usize, usize)>, KeepAll> {
    let mut plan: Vec<(usize, usize, usize)> = Vec::new();
    let mut units = dwarf.units();
    while let Some(header) = units.next().map_err(|_| KeepAll)? {
        let start = header.offset().as_debug_info_offset().ok_or(KeepAll)?.0;
        let end = start + header.length_including_self();
        // A unit too short for the replacement header is kept.
        let leave_out = header.type_() == gimli::UnitType::Compilation
            && header.format() == gimli::Format::Dwarf32
            && end - start >= 24
            && covered.units.contains(&start)
            && !covered.needed.contains(&start);
        if !leave_out {
            // A unit kept must not refer into another unit.
            if refers_to_other_units(dwarf, header).ok_or(KeepAll)? {
                return Err(KeepAll);
            }
            continue;
        }
        match plan.last_mut() {
            // (A run's length must fit a 32-bit unit length.)
            Some((s, e, count)) if *e == start && end - *s - 4 < 0xffff_fff0 => {
                *e = end;
                *count += 1;
            }
            _ => plan.push((start, end, 1)),
        }
    }
    Ok(plan)
}

/// `.debug_info` as [`DebugSections::load_with`] decompressed it.
enum Info<'d> {
    Whole(Vec<u8>),
    /// Up to the end of one unit, at the offset given (at least that much
    /// decompressed).
    Part(Inflating<'d>, usize),
}

impl<'d> Info<'d> {
    /// The section `compressed`, decompressed up to the end of the unit at
    /// `unit` (the whole section if that unit cannot be read).
    fn through_unit(
        compressed: object::CompressedData<'d>,
        unit: usize,
        endian: RunTimeEndian,
    ) -> Result<Info<'d>, ()> {
        let mut z = Inflating::new(compressed)?;
        // The unit's length: 4 bytes, or 0xffff_ffff and 8 (64-bit DWARF).
        z.fill_to(unit.saturating_add(12))?;
        let word = |at: usize, n: usize| -> Option<u64> {
            let b = z.done().get(at..at + n)?;
            Some(match (endian, n) {
                (RunTimeEndian::Little, 4) => u64::from(u32::from_le_bytes(b.try_into().ok()?)),
                (RunTimeEndian::Big, 4) => u64::from(u32::from_be_bytes(b.try_into().ok()?)),
                (RunTimeEndian::Little, _) => u64::from_le_bytes(b.try_into().ok()?),
                (RunTimeEndian::Big, _) => u64::from_be_bytes(b.try_into().ok()?),
            })
        };
        let end = match word(unit, 4) {
            Some(0xffff_ffff) => word(unit + 4, 8).map(|n| (unit as u64 + 12).saturating_add(n)),
            Some(n) if n < 0xffff_fff0 => Some(unit as u64 + 4 + n),
            _ => None,
        };
        match end.and_then(|e| usize::try_from(e).ok()) {
            Some(end) if end <= z.len() => {
                z.fill_to(end)?;
                Ok(Info::Part(z, end))
            }
            _ => z.whole().map(Info::Whole),
        }
    }
}

/// A zlib stream decompressed as far as asked.
struct Inflating<'d> {
    input: &'d [u8],
    z: flate2::Decompress,
    /// The section's size.
    size: usize,
    /// What is decompressed so far (its capacity is what was asked: never
    /// written, no page of the rest is touched).
    out: Vec<u8>,
}

impl<'d> Inflating<'d> {
    fn new(compressed: object::CompressedData<'d>) -> Result<Inflating<'d>, ()> {
        Ok(Inflating {
            input: compressed.data,
            z: flate2::Decompress::new(true),
            size: usize::try_from(compressed.uncompressed_size).map_err(|_| ())?,
            out: Vec::new(),
        })
    }

    fn len(&self) -> usize {
        self.size
    }

    /// The bytes decompressed so far.
    fn done(&self) -> &[u8] {
        &self.out
    }

    /// Decompress up to `n` bytes (at most the section's size).
    fn fill_to(&mut self, n: usize) -> Result<(), ()> {
        let n = n.min(self.size);
        if n <= self.out.len() {
            return Ok(());
        }
        self.out
            .try_reserve_exact(n - self.out.len())
            .map_err(|_| ())?;
        // (`decompress_vec` fills the spare capacity: up to `n`, or beyond
        // if the capacity is more, which is as good.)
        while self.out.len() < n {
            let read = usize::try_from(self.z.total_in()).map_err(|_| ())?;
            let input = self.input.get(read..).ok_or(())?;
            let before = self.out.len();
            let status = self
                .z
                .decompress_vec(input, &mut self.out, flate2::FlushDecompress::None)
                .map_err(|_| ())?;
            if self.out.len() == before || status == flate2::Status::StreamEnd && self.out.len() < n
            {
                // No progress, or the stream ended short of its size.
                return Err(());
            }
        }
        Ok(())
    }

    /// The whole section.
    fn whole(mut self) -> Result<Vec<u8>, ()> {
        self.fill_to(self.size)?;
        Ok(self.out)
    }

    /// The first `n` bytes (decompressed), as the section.
    fn into_first(mut self, n: usize) -> Vec<u8> {
        self.out.truncate(n);
        self.out
    }
}

/// Does any entry of the unit hold a `.debug_info` reference (another
/// unit's entry)? `None` if the unit cannot be read.
fn refers_to_other_units(
    dwarf: &gimli::Dwarf<Reader<'_>>,
    header: gimli::UnitHeader<Reader<'_>>,
) -> Option<bool> {
    let abbreviations = dwarf.abbreviations(&header).ok()?;
    let mut entries = header.entries_raw(&abbreviations, None).ok()?;
    while !entries.is_empty() {
        let Some(abbrev) = entries.read_abbreviation().ok()? else {
            continue;
        };
        for spec in abbrev.attributes() {
            let attr = entries.read_attribute(*spec).ok()?;
            if matches!(
                attr.value(),
                gimli::AttributeValue::DebugInfoRef(_) | gimli::AttributeValue::DebugInfoRefSup(_)
            ) {
                return Some(true);
            }
        }
    }
    Some(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::ObjectSymbol;

    /// Every frame a lookup gives (inlined ones too) and the location.
    type Lookup = (
        Vec<(Option<String>, Option<String>, Option<u32>)>,
        Option<(String, u32)>,
    );

    fn lookup(ctx: &addr2line::Context<Reader<'_>>, probe: u64) -> Lookup {
        let mut frames = Vec::new();
        if let Ok(mut it) = ctx.find_frames(probe).skip_all_loads() {
            while let Ok(Some(f)) = it.next() {
                frames.push((
                    f.function
                        .and_then(|n| n.raw_name().ok().map(|n| n.into_owned())),
                    f.location.as_ref().and_then(|l| l.file.map(str::to_string)),
                    f.location.as_ref().and_then(|l| l.line),
                ));
            }
        }
        let location = ctx
            .find_location(probe)
            .ok()
            .flatten()
            .map(|l| (l.file.unwrap_or("").to_string(), l.line.unwrap_or(0)));
        (frames, location)
    }

    /// Addresses inside every `step`-th function of an ELF file's symbols.
    fn probes_in(path: &Path, step: usize) -> Vec<u64> {
        let data = std::fs::read(path).unwrap();
        let obj = object::File::parse(&*data).unwrap();
        let mut funcs: Vec<(u64, u64)> = obj
            .symbols()
            .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 0)
            .map(|s| (s.address(), s.size()))
            .collect();
        funcs.sort_unstable();
        funcs.dedup();
        funcs
            .iter()
            .step_by(step)
            .map(|&(a, size)| a + size / 2)
            .collect()
    }

    /// [`DebugSections::load_for`], and how many units it left out.
    fn load_for(path: &Path, threads: usize, probes: &[u64]) -> (DebugSections, usize) {
        DebugSections::load_with(path, threads, Some(probes)).unwrap()
    }

    /// An address inside the function `name` of the ELF file at `path`.
    fn inside(path: &Path, name: &str) -> u64 {
        let data = std::fs::read(path).unwrap();
        let obj = object::File::parse(&*data).unwrap();
        let f = obj
            .symbols()
            .find(|s| s.name() == Ok(name) && s.size() > 0)
            .unwrap_or_else(|| panic!("{name} in {}", path.display()));
        f.address() + f.size() / 2
    }

    /// The root of every single-threaded stack, `__libc_start_call_main`,
    /// is in one of the C library's first units: only a small part of its
    /// `.debug_info` is decompressed, and the lookup is the whole file's;
    /// with a thread's root (`clone3`, 4.1 of 5.8 MB in) the part is
    /// longer, still not all of it. An address of the last unit an arange
    /// names needs every unit up to its end.
    #[test]
    fn addresses_in_early_units_decompress_only_the_start_of_the_units() {
        let path = libc_debug_file();
        let whole = DebugSections::load(&path, 1).unwrap();
        let whole_ctx = whole.context().unwrap();
        let main = inside(&path, "__libc_start_call_main");
        let thread = inside(&path, "clone3");
        let last = {
            let dwarf = whole.dwarf();
            let mut ranges = dwarf.debug_aranges.headers();
            let mut last = (0, 0);
            while let Ok(Some(h)) = ranges.next() {
                if let Ok(Some(e)) = h.entries().next() {
                    if e.length() > 0 && h.debug_info_offset().0 > last.0 {
                        last = (h.debug_info_offset().0, e.address() + e.length() / 2);
                    }
                }
            }
            last
        };
        // The end of that unit (units no arange names may follow it).
        let last_end = {
            let dwarf = whole.dwarf();
            let mut units = dwarf.units();
            let mut end = 0;
            while let Ok(Some(u)) = units.next() {
                let start = u.offset().as_debug_info_offset().unwrap().0;
                if start == last.0 {
                    end = start + u.length_including_self();
                }
            }
            end
        };
        let last = last.1;
        for threads in [1, 2] {
            let (some, _) = load_for(&path, threads, &[main]);
            assert!(
                some.info_len() * 20 < whole.info_len(),
                "{} of {} bytes",
                some.info_len(),
                whole.info_len()
            );
            let ctx = some.context().unwrap();
            let found = lookup(&ctx, main);
            assert_eq!(found, lookup(&whole_ctx, main));
            assert!(found.0.iter().any(|f| f.0.is_some()), "{found:?}");

            let (some, _) = load_for(&path, threads, &[main, thread]);
            assert!(some.info_len() < whole.info_len());
            assert!(some.info_len() * 2 > whole.info_len());
            let ctx = some.context().unwrap();
            for p in [main, thread] {
                assert_eq!(lookup(&ctx, p), lookup(&whole_ctx, p), "{p:#x}");
            }

            let (some, _) = load_for(&path, threads, &[main, last]);
            assert_eq!(some.info_len(), last_end);
            assert_eq!(
                lookup(&some.context().unwrap(), last),
                lookup(&whole_ctx, last)
            );
        }
    }

    /// 64-bit DWARF (`-gdwarf64`: a unit's length is 0xffff_ffff and 8
    /// bytes): an address of the first unit decompresses that unit alone,
    /// one of the second all of them, and the lookups are the whole file's.
    #[test]
    fn a_64_bit_unit_is_read_to_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.c");
        let b = dir.path().join("b.c");
        std::fs::write(
            &a,
            "__attribute__((noinline)) int first_fn(int n) { return n * 3 + 1; }\n",
        )
        .unwrap();
        std::fs::write(
            &b,
            "int first_fn(int);\n\
             __attribute__((noinline)) int second_fn(int n) { return first_fn(n) * 5 - 2; }\n\
             int main(int c, char **v) { (void)v; return second_fn(c); }\n",
        )
        .unwrap();
        let exe = dir.path().join("x");
        let status = std::process::Command::new("gcc")
            .args(["-O2", "-g", "-gdwarf64", "-gz=zlib", "-o"])
            .args([exe.as_os_str(), a.as_os_str(), b.as_os_str()])
            .status()
            .unwrap();
        assert!(status.success(), "gcc");
        let whole = DebugSections::load(&exe, 1).unwrap();
        let whole_ctx = whole.context().unwrap();
        let (first, second) = (inside(&exe, "first_fn"), inside(&exe, "second_fn"));
        let (some, _) = load_for(&exe, 1, &[first]);
        assert!(
            some.info_len() < whole.info_len() / 2,
            "{} of {} bytes",
            some.info_len(),
            whole.info_len()
        );
        let found = lookup(&some.context().unwrap(), first);
        assert_eq!(found, lookup(&whole_ctx, first));
        assert_eq!(found.0[0].0.as_deref(), Some("first_fn"));
        let (some, _) = load_for(&exe, 1, &[first, second]);
        assert_eq!(some.info_len(), whole.info_len());
        let ctx = some.context().unwrap();
        for p in [first, second] {
            assert_eq!(lookup(&ctx, p), lookup(&whole_ctx, p), "{p:#x}");
        }
    }

    /// An address `.debug_aranges` names no unit for may be in a unit it
    /// does not cover, anywhere: all of `.debug_info` is decompressed.
    #[test]
    fn an_address_without_arange_decompresses_all() {
        let path = libc_debug_file();
        let whole = DebugSections::load(&path, 1).unwrap();
        let main = inside(&path, "__libc_start_call_main");
        let (some, _) = load_for(&path, 2, &[main, 8]);
        assert_eq!(some.info_len(), whole.info_len());
        assert_eq!(
            lookup(&some.context().unwrap(), main),
            lookup(&whole.context().unwrap(), main)
        );
    }

    /// The C library's separate debug file, as Debian's libc6-dbg installs
    /// it (scripts/setup.sh).
    fn libc_debug_file() -> std::path::PathBuf {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let libc = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("/libc.so"))
            .expect("libc in /proc/self/maps");
        let hex = crate::debug_link::build_id_of(Path::new(libc))
            .unwrap()
            .expect("libc has a build id");
        let path = crate::debug_link::by_build_id(&hex).unwrap();
        assert!(
            path.is_file(),
            "{} missing: install libc6-dbg (scripts/setup.sh)",
            path.display()
        );
        path
    }

    /// The context of the C library's debug file with only the units of
    /// some addresses in it answers for those addresses exactly what the
    /// whole file's answers, inlined frames, files and lines included, on
    /// one thread and on two.
    #[test]
    fn the_units_of_some_addresses_answer_as_the_whole_file() {
        let path = libc_debug_file();
        let whole = DebugSections::load(&path, 1).unwrap();
        let whole_ctx = whole.context().unwrap();
        let all = probes_in(&path, 1);
        for (step, threads) in [(997, 1), (61, 2), (7, 1)] {
            let probes: Vec<u64> = all.iter().copied().step_by(step).collect();
            let (some, left_out) = load_for(&path, threads, &probes);
            assert!(
                left_out > 100,
                "{left_out} units left out for {} probes",
                probes.len()
            );
            let ctx = some.context().unwrap();
            let mut named = 0;
            for &p in &probes {
                let want = lookup(&whole_ctx, p);
                assert_eq!(lookup(&ctx, p), want, "{p:#x}");
                named += usize::from(want.0.iter().any(|f| f.0.is_some()));
            }
            assert!(
                named * 10 > probes.len() * 9,
                "{named} of {} named",
                probes.len()
            );
        }
        // And the whole file's context is addr2line's own loader's.
        let loader = addr2line::Loader::new(&path).unwrap();
        for &p in all.iter().step_by(101) {
            let mut frames = loader.find_frames(p).unwrap();
            let mut names = Vec::new();
            while let Ok(Some(f)) = frames.next() {
                names.push(
                    f.function
                        .and_then(|n| n.raw_name().ok().map(|n| n.into_owned())),
                );
            }
            let want: Vec<_> = lookup(&whole_ctx, p).0.into_iter().map(|f| f.0).collect();
            assert_eq!(names, want, "{p:#x}");
        }
    }

    /// A link-time-optimised program's units refer to each other's entries
    /// (`DW_FORM_ref_addr`: an inlined function's origin in another unit):
    /// then no unit is left out, not even one of its own (`c.c`, compiled
    /// without LTO, which no probe is in), and every lookup stays the whole
    /// file's.
    #[test]
    fn units_that_refer_to_other_units_are_all_kept() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.c");
        let b = dir.path().join("b.c");
        std::fs::write(
            &a,
            "static inline int helper(int x) { return x * 3 + 1; }\n\
             int work(int n);\n\
             int main(int argc, char **argv) { (void)argv; return work(argc) + helper(argc); }\n",
        )
        .unwrap();
        std::fs::write(
            &b,
            "#include <stdlib.h>\n\
             __attribute__((noinline)) int work(int n) { void *p = malloc(n); free(p); return n; }\n",
        )
        .unwrap();
        let c = dir.path().join("c.c");
        std::fs::write(&c, "int apart(int n) { return n * 7; }\n").unwrap();
        let c_o = dir.path().join("c.o");
        let exe = dir.path().join("lto");
        let cc = |args: &[&std::ffi::OsStr]| {
            let status = std::process::Command::new("gcc")
                .args(args)
                .status()
                .unwrap();
            assert!(status.success(), "gcc {args:?}");
        };
        cc(&[
            "-O2".as_ref(),
            "-g".as_ref(),
            "-c".as_ref(),
            c.as_os_str(),
            "-o".as_ref(),
            c_o.as_os_str(),
        ]);
        // (Compressed, as distributions ship debug files: the part of
        // `.debug_info` the probe needs would be decompressed alone.)
        cc(&[
            "-flto".as_ref(),
            "-O2".as_ref(),
            "-g".as_ref(),
            "-gz=zlib".as_ref(),
            "-o".as_ref(),
            exe.as_os_str(),
            a.as_os_str(),
            b.as_os_str(),
            c_o.as_os_str(),
        ]);
        let probes = probes_in(&exe, 1);
        let work = *probes
            .iter()
            .find(|&&p| {
                let w = DebugSections::load(&exe, 1).unwrap();
                let ctx = w.context().unwrap();
                lookup(&ctx, p)
                    .0
                    .iter()
                    .any(|f| f.0.as_deref() == Some("work"))
            })
            .expect("work() named");
        let whole = DebugSections::load(&exe, 1).unwrap();
        let compressed = {
            let data = std::fs::read(&exe).unwrap();
            let obj = object::File::parse(&*data).unwrap();
            let info = obj.section_by_name(".debug_info").unwrap();
            info.compressed_data().unwrap().format
        };
        assert_eq!(compressed, object::CompressionFormat::Zlib);
        let units = {
            let dwarf = whole.dwarf();
            let mut n = 0;
            let mut it = dwarf.units();
            while let Ok(Some(_)) = it.next() {
                n += 1;
            }
            n
        };
        assert!(units > 1, "{units} units");
        let (some, left_out) = load_for(&exe, 1, &[work]);
        assert_eq!(left_out, 0);
        assert_eq!(some.info_len(), whole.info_len());
        let (w, s) = (whole.context().unwrap(), some.context().unwrap());
        for &p in &probes {
            assert_eq!(lookup(&s, p), lookup(&w, p), "{p:#x}");
        }
    }

    /// A `.debug_aranges` entry that cannot be read (its end overflows the
    /// address space, as `addr2line` has seen from rustc) ends the reading
    /// of its unit's entries, and `addr2line` skips it and reads on (or
    /// takes the unit's ranges from `DW_AT_ranges`): the unit is kept, and
    /// an address of a later entry of it is named as in the whole file.
    #[test]
    fn a_unit_with_an_unreadable_arange_entry_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("f.c");
        std::fs::write(
            &src,
            "__attribute__((noinline)) int first(int n) { return n * 3 + 1; }\n\
             __attribute__((noinline)) int second(int n) { return first(n) * 5 - 2; }\n",
        )
        .unwrap();
        let so = dir.path().join("f.so");
        // (One section a function: one `.debug_aranges` entry each.)
        let status = std::process::Command::new("gcc")
            .args(["-O2", "-g", "-gz=none", "-ffunction-sections", "-fPIC"])
            .args(["-shared", "-nostdlib", "-o"])
            .args([so.as_os_str(), src.as_os_str()])
            .status()
            .unwrap();
        assert!(status.success(), "gcc");
        let mut data = std::fs::read(&so).unwrap();
        let (aranges, first, second) = {
            let obj = object::File::parse(&*data).unwrap();
            let (offset, _) = obj
                .section_by_name(".debug_aranges")
                .unwrap()
                .file_range()
                .unwrap();
            let at = |name: &str| {
                obj.symbols()
                    .find(|s| s.name() == Ok(name))
                    .unwrap()
                    .address()
            };
            (offset as usize, at("first"), at("second"))
        };
        // One header (32-bit DWARF, 8-byte addresses: 12 bytes, padded to
        // 16), then its entries: `first`'s is made one that overflows.
        let entry = aranges + 16;
        let address = |at: usize| u64::from_le_bytes(data[at..at + 8].try_into().unwrap());
        assert_eq!(address(entry), first, "first entry is first()'s");
        assert_eq!(address(entry + 16), second, "second entry is second()'s");
        data[entry..entry + 8].copy_from_slice(&(u64::MAX - 0x100).to_le_bytes());
        data[entry + 8..entry + 16].copy_from_slice(&0x1000u64.to_le_bytes());
        std::fs::write(&so, &data).unwrap();

        let probe = second + 1;
        let whole = DebugSections::load(&so, 1).unwrap();
        let want = lookup(&whole.context().unwrap(), probe);
        assert_eq!(want.0.first().and_then(|f| f.0.as_deref()), Some("second"));
        let (some, left_out) = load_for(&so, 1, &[probe]);
        assert_eq!(left_out, 0);
        assert_eq!(lookup(&some.context().unwrap(), probe), want);
        // (addr2line's own loader names it too.)
        let loader = addr2line::Loader::new(&so).unwrap();
        let mut frames = loader.find_frames(probe).unwrap();
        let name = frames.next().unwrap().unwrap().function.unwrap();
        assert_eq!(name.raw_name().unwrap(), "second");
    }
}
