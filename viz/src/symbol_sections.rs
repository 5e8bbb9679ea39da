//! An ELF file's symbol tables without the rest of it: a buffer of the
//! file's length in which only the headers and the symbol and string
//! tables are read, the rest left as zeros the system never maps in.
//!
//! Reading a module whole for its symbols read CP2K's 52 MB executable and
//! its 36 MB `libint2` into the converter for their `.dynsym` (12 KB and
//! 145 KB): a fifth of the conversion's samples and most of its 150 MB
//! resident. `object` parses the copy as it parsed the whole file, and
//! what it reads of it for the symbols (the file header, the program and
//! section headers, the symbol tables, their string tables and index
//! sections, the section names) is here as in the file.

use std::fs::File;
use std::os::unix::fs::FileExt as _;

use object::read::elf::{FileHeader, SectionHeader};
use object::{elf, Endianness, FileKind, ReadCache};

/// The copy of the ELF file `file` of `len` bytes; `None` if it is not ELF
/// or its headers cannot be read.
pub fn read(file: &File, len: u64) -> Option<Vec<u8>> {
    let ranges = {
        let cache = ReadCache::new(file);
        match FileKind::parse(&cache).ok()? {
            FileKind::Elf32 => ranges::<elf::FileHeader32<Endianness>>(&cache)?,
            FileKind::Elf64 => ranges::<elf::FileHeader64<Endianness>>(&cache)?,
            _ => return None,
        }
    };
    // Zeroed by the system as it maps the pages: those never written stay
    // out of the process's memory.
    let mut data = vec![0u8; usize::try_from(len).ok()?];
    for (start, size) in ranges {
        let end = start.saturating_add(size).min(len);
        if start >= end {
            continue;
        }
        file.read_exact_at(&mut data[start as usize..end as usize], start)
            .ok()?;
    }
    Some(data)
}

/// (offset, size) of the parts of the file its symbols are read from.
fn ranges<H: FileHeader<Endian = Endianness>>(data: &ReadCache<&File>) -> Option<Vec<(u64, u64)>> {
    let header = H::parse(data).ok()?;
    let e = header.endian().ok()?;
    let mut out = vec![(0, std::mem::size_of::<H>() as u64)];
    let phnum = header.phnum(e, data).ok()? as u64;
    out.push((
        header.e_phoff(e).into(),
        phnum * u64::from(header.e_phentsize(e)),
    ));
    let sections = header.section_headers(e, data).ok()?;
    out.push((
        header.e_shoff(e).into(),
        sections.len() as u64 * u64::from(header.e_shentsize(e)),
    ));
    let mut wanted = vec![false; sections.len()];
    if let Some(w) = header
        .shstrndx(e, data)
        .ok()
        .and_then(|i| wanted.get_mut(i as usize))
    {
        *w = true;
    }
    for (i, s) in sections.iter().enumerate() {
        match s.sh_type(e) {
            elf::SHT_SYMTAB | elf::SHT_DYNSYM => {
                wanted[i] = true;
                if let Some(w) = wanted.get_mut(s.sh_link(e) as usize) {
                    *w = true;
                }
            }
            elf::SHT_SYMTAB_SHNDX | elf::SHT_STRTAB => wanted[i] = true,
            _ => {}
        }
    }
    for (s, _) in sections.iter().zip(&wanted).filter(|(_, &w)| w) {
        out.extend(s.file_range(e));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elf_symbols::ElfSymbols;
    use std::path::Path;

    /// The symbols of the copy are those of the whole file, for this test
    /// binary (`.symtab`) and the system's libraries (`.dynsym` where
    /// stripped), and the copy leaves most of a large file unread.
    #[test]
    fn the_copy_has_the_whole_file_s_symbols() {
        let exe = std::env::current_exe().unwrap();
        let mut files = vec![exe];
        for dir in [
            "/lib/x86_64-linux-gnu",
            "/usr/lib/x86_64-linux-gnu",
            "/usr/bin",
        ] {
            let Ok(rd) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut names: Vec<_> = rd.flatten().map(|e| e.path()).collect();
            names.sort();
            files.extend(
                names
                    .into_iter()
                    .filter(|p| p.is_file() && !p.is_symlink())
                    .step_by(7)
                    .take(40),
            );
        }
        let mut elves = 0;
        for path in &files {
            let whole = std::fs::read(path).unwrap_or_default();
            let Some(of_whole) = ElfSymbols::parse(&whole) else {
                continue;
            };
            let file = File::open(path).unwrap();
            let copy = read(&file, whole.len() as u64).expect("an ELF file's copy");
            assert_eq!(copy.len(), whole.len());
            let of_copy = ElfSymbols::parse(&copy).expect("symbols in the copy");
            assert_eq!(of_copy, of_whole, "{}", path.display());
            elves += 1;
        }
        assert!(elves >= 10, "only {elves} ELF files with symbols");
    }

    #[test]
    fn other_files_have_no_copy() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
        let file = File::open(&path).unwrap();
        assert!(read(&file, file.metadata().unwrap().len()).is_none());
    }
}
