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
//! ([`DebugSections::keep_units_of`]). The lookups are `addr2line`'s, on the
//! same DWARF: names and lines are the `Loader`'s.
//!
//! A debug file has no split units (those are the `.dwo`/`.dwp` files of
//! `-gsplit-dwarf` builds, which the `Loader` still reads for module files).

use std::borrow::Cow;
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
    /// [`DebugSections::keep_units_of`]).
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
    pub fn load(path: &Path, threads: usize) -> Option<DebugSections> {
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
        // `.debug_info` apart from the others (on a second thread when
        // there is one: a thread that cannot start is no error).
        let rest = |id| match id {
            SectionId::DebugInfo => Ok(Vec::new()),
            _ => load(id),
        };
        let (sections, info) = std::thread::scope(|s| {
            let info = (threads > 1)
                .then(|| {
                    std::thread::Builder::new()
                        .spawn_scoped(s, || load(SectionId::DebugInfo))
                        .ok()
                })
                .flatten();
            let sections = DwarfSections::load(rest);
            let info = match info {
                // (`panic = "abort"`: a thread that panics ends the process.)
                Some(t) => t.join().unwrap_or(Err(())),
                None => load(SectionId::DebugInfo),
            };
            (sections, info)
        });
        let (sections, info) = (sections.ok()?, info.ok()?);
        drop(object);
        Some(DebugSections {
            sections,
            info,
            endian,
            data,
        })
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
        let mut dwarf = self
            .sections
            .borrow(|section| EndianSlice::new(section, self.endian));
        dwarf.debug_info = EndianSlice::new(&self.info, self.endian).into();
        dwarf
    }

    /// Leave out of the context every compilation unit that no address of
    /// `probes` lies in, as `.debug_aranges` tells: the context parses each
    /// unit's abbreviations and line-program header up front (the C
    /// library's 4 126 units: about half of the time its debug file took),
    /// where a report's frames lie in a handful. The units left out become one
    /// type unit each run of them (a header `addr2line` skips). Lookups of
    /// `probes` give what the whole file gives: a unit kept refers to no
    /// other unit (none of its entries has a `DW_FORM_ref_addr` value, else
    /// nothing is left out), and a unit `.debug_aranges` does not cover, or
    /// covers with an entry that cannot be read, is kept. Returns how many
    /// units were left out.
    pub fn keep_units_of(&mut self, probes: &[u64]) -> usize {
        let Some(plan) = self.units_to_leave_out(probes) else {
            return 0;
        };
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

    /// The runs `(start, end, units)` of `.debug_info` to leave out for
    /// [`DebugSections::keep_units_of`]; `None` when nothing can be.
    fn units_to_leave_out(&self, probes: &[u64]) -> Option<Vec<(usize, usize, usize)>> {
        let dwarf = self.dwarf();
        // The units `.debug_aranges` covers, and those with a probe in
        // one of their ranges.
        let mut sorted = probes.to_vec();
        sorted.sort_unstable();
        let holds_probe = |b: u64, e: u64| {
            let i = sorted.partition_point(|&p| p < b);
            i < sorted.len() && sorted[i] < e
        };
        let mut covered = std::collections::HashSet::new();
        let mut needed = std::collections::HashSet::new();
        let mut headers = dwarf.debug_aranges.headers();
        while let Ok(Some(header)) = headers.next() {
            let unit = header.debug_info_offset().0;
            covered.insert(unit);
            let mut entries = header.entries();
            loop {
                match entries.next() {
                    Ok(Some(e)) => {
                        let r = e.range();
                        if holds_probe(r.begin, r.end) {
                            needed.insert(unit);
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
        let mut plan: Vec<(usize, usize, usize)> = Vec::new();
        let mut units = dwarf.units();
        // (A header that cannot be read: nothing is left out.)
        while let Some(header) = units.next().ok()? {
            let start = header.offset().as_debug_info_offset()?.0;
            let end = start + header.length_including_self();
            // A unit too short for the replacement header is kept.
            let leave_out = header.type_() == gimli::UnitType::Compilation
                && header.format() == gimli::Format::Dwarf32
                && end - start >= 24
                && covered.contains(&start)
                && !needed.contains(&start);
            if !leave_out {
                // A unit kept must not refer into another unit.
                if refers_to_other_units(&dwarf, header)? {
                    return None;
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
        (!plan.is_empty()).then_some(plan)
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
            let mut some = DebugSections::load(&path, threads).unwrap();
            let left_out = some.keep_units_of(&probes);
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
        cc(&[
            "-flto".as_ref(),
            "-O2".as_ref(),
            "-g".as_ref(),
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
        let mut some = DebugSections::load(&exe, 1).unwrap();
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
        assert_eq!(some.keep_units_of(&[work]), 0);
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
        let mut some = DebugSections::load(&so, 1).unwrap();
        assert_eq!(some.keep_units_of(&[probe]), 0);
        assert_eq!(lookup(&some.context().unwrap(), probe), want);
        // (addr2line's own loader names it too.)
        let loader = addr2line::Loader::new(&so).unwrap();
        let mut frames = loader.find_frames(probe).unwrap();
        let name = frames.next().unwrap().unwrap().function.unwrap();
        assert_eq!(name.raw_name().unwrap(), "second");
    }
}
