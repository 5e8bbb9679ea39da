//! A module's ELF symbol table, for the addresses its DWARF does not name
//! (a stripped library without a debug file: only `.dynsym` is left).
//!
//! An address is named by the function symbol whose extent
//! `[st_value, st_value + st_size)` holds it. The nearest symbol below an
//! address is not enough: in a stripped library the static functions have no
//! symbols, so their addresses lie past the end of the exported function
//! before them, which would otherwise take their frames' name (Python's
//! `_json` module named every frame of its encoder `PyInit__json`). Such an
//! address stays `??`, with its offset and module, as a frame of a module
//! without any symbols does. A symbol without a size (hand-written assembly)
//! names the addresses after it up to the next symbol.

use std::path::Path;

/// Symbols at one address: the one kept is chosen as `object`'s symbol map
/// (and so `addr2line`) chooses, so names stay what they were wherever the
/// extent holds the address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    pub start: u64,
    /// 0: unknown.
    pub size: u64,
    pub name: String,
    /// Lower is better: 0 for a function, 1 for an untyped symbol, then
    /// twice that plus 0 (dynamic), 1 (global), 2 (local), 3 (unknown).
    pub rank: u32,
    /// The symbol's index in its table: among equals, the later one wins.
    pub index: usize,
}

/// How many symbols below an address are searched for one whose extent
/// holds it (a function symbol with local labels or parts inside it).
const LOOK_BACK: usize = 16;

/// Largest file whose symbols are read from a copy in memory (a buffer of
/// the file's length, mostly never touched, but address space all the
/// same, which the converter shares with the program's `ulimit -v`).
const IN_MEMORY_MAX: u64 = 64 << 20;

#[derive(Debug, Default, PartialEq)]
pub struct ElfSymbols {
    /// Sorted by start, one per start.
    entries: Vec<Symbol>,
}

impl ElfSymbols {
    /// The function symbols of the ELF file at `path` (`.symtab`, else
    /// `.dynsym`); `None` if it cannot be read or has none.
    ///
    /// A file of up to [`IN_MEMORY_MAX`] bytes is read from a copy in
    /// memory of its headers and symbol tables only (`symbol_sections`):
    /// read through `object`'s
    /// cache, each symbol's name took a read of its own (a C library's
    /// ~10 000 symbols: ~10 ms, a tenth of a conversion), and read whole, a
    /// large program's 50 MB went through memory for 12 KB of symbols.
    pub fn read(path: &Path) -> Option<ElfSymbols> {
        let file = std::fs::File::open(path).ok()?;
        let len = file.metadata().ok()?.len();
        // From the file opened, not its path again (which may be another
        // file by now). Files above `IN_MEMORY_MAX` through `object`'s
        // cache, as before.
        let copy = (len <= IN_MEMORY_MAX)
            .then(|| crate::symbol_sections::read(&file, len))
            .flatten();
        match copy {
            Some(data) => Self::parse(&data),
            None => {
                let cache = object::ReadCache::new(file);
                Self::of_file(&object::File::parse(&cache).ok()?)
            }
        }
    }

    /// The function symbols of an ELF file's bytes, as [`ElfSymbols::read`].
    pub fn parse(data: &[u8]) -> Option<ElfSymbols> {
        Self::of_file(&object::File::parse(data).ok()?)
    }

    fn of_file<'d, R: object::ReadRef<'d>>(obj: &object::File<'d, R>) -> Option<ElfSymbols> {
        use object::{Object, ObjectSymbol, ObjectSymbolTable, SymbolKind, SymbolScope};
        let table = obj.symbol_table().or_else(|| obj.dynamic_symbol_table())?;
        let mut all = Vec::new();
        for s in table.symbols() {
            if !s.is_definition() {
                continue;
            }
            let Ok(name) = s.name() else { continue };
            if name.is_empty() {
                continue;
            }
            let kind = match s.kind() {
                SymbolKind::Text => 0,
                SymbolKind::Unknown => 1,
                _ => continue,
            };
            let scope = match s.scope() {
                SymbolScope::Dynamic => 0,
                SymbolScope::Linkage => 1,
                SymbolScope::Compilation => 2,
                SymbolScope::Unknown => 3,
            };
            all.push(Symbol {
                start: s.address(),
                size: s.size(),
                name: name.to_string(),
                rank: kind * 2 + scope,
                index: s.index().0,
            });
        }
        let symbols = ElfSymbols::new(all);
        (!symbols.entries.is_empty()).then_some(symbols)
    }

    /// A table of the given symbols: per start, the best-ranked name, and
    /// the largest size of the symbols there (aliases share one extent).
    pub fn new(mut all: Vec<Symbol>) -> ElfSymbols {
        all.sort_unstable_by(|a, b| {
            (a.start, a.rank, std::cmp::Reverse(a.index)).cmp(&(
                b.start,
                b.rank,
                std::cmp::Reverse(b.index),
            ))
        });
        let mut entries: Vec<Symbol> = Vec::with_capacity(all.len());
        for s in all {
            match entries.last_mut() {
                Some(last) if last.start == s.start => last.size = last.size.max(s.size),
                _ => entries.push(s),
            }
        }
        ElfSymbols { entries }
    }

    /// The function whose extent holds `probe`; a symbol without a size
    /// holds the addresses up to the next symbol.
    pub fn name_at(&self, probe: u64) -> Option<&str> {
        let above = self.entries.partition_point(|e| e.start <= probe);
        let nearest = above.checked_sub(1)?;
        let e = &self.entries[nearest];
        if e.size == 0 || probe - e.start < e.size {
            return Some(&e.name);
        }
        self.entries[nearest.saturating_sub(LOOK_BACK)..nearest]
            .iter()
            .rev()
            .find(|e| e.size != 0 && probe - e.start < e.size)
            .map(|e| e.name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sym(start: u64, size: u64, name: &str, rank: u32, index: usize) -> Symbol {
        Symbol {
            start,
            size,
            name: name.into(),
            rank,
            index,
        }
    }

    /// A file read as its symbols' copy and one read through `object`'s
    /// cache (files above `IN_MEMORY_MAX`) give the same table.
    #[test]
    fn both_ways_of_reading_give_one_table() {
        let exe = std::env::current_exe().unwrap();
        let whole = ElfSymbols::read(&exe).unwrap();
        let cache = object::ReadCache::new(std::fs::File::open(&exe).unwrap());
        let cached = ElfSymbols::of_file(&object::File::parse(&cache).unwrap()).unwrap();
        assert!(whole.entries.len() > 100);
        assert_eq!(whole.entries, cached.entries);
    }

    #[test]
    fn an_address_past_a_function_s_end_has_no_name() {
        let t = ElfSymbols::new(vec![
            sym(0x1000, 0x100, "exported", 0, 1),
            sym(0x2000, 0x80, "other", 0, 2),
        ]);
        assert_eq!(t.name_at(0xfff), None);
        assert_eq!(t.name_at(0x1000), Some("exported"));
        assert_eq!(t.name_at(0x10ff), Some("exported"));
        // A static function between the two, which .dynsym does not list.
        assert_eq!(t.name_at(0x1100), None);
        assert_eq!(t.name_at(0x1fff), None);
        assert_eq!(t.name_at(0x2040), Some("other"));
        assert_eq!(t.name_at(0x2080), None);
    }

    #[test]
    fn a_symbol_without_size_holds_up_to_the_next_one() {
        let t = ElfSymbols::new(vec![
            sym(0x1000, 0, "asm_entry", 0, 1),
            sym(0x3000, 0x10, "c_function", 0, 2),
        ]);
        assert_eq!(t.name_at(0x2fff), Some("asm_entry"));
        assert_eq!(t.name_at(0x3008), Some("c_function"));
        assert_eq!(t.name_at(0x3010), None);
    }

    #[test]
    fn a_symbol_inside_a_function_does_not_hide_it() {
        // `outer` spans 0x1000..0x1400; a local label symbol at 0x1200
        // with a small size sits inside it.
        let t = ElfSymbols::new(vec![
            sym(0x1000, 0x400, "outer", 0, 1),
            sym(0x1200, 0x10, "outer.cold", 2, 2),
        ]);
        assert_eq!(t.name_at(0x1205), Some("outer.cold"));
        assert_eq!(t.name_at(0x1300), Some("outer"));
        assert_eq!(t.name_at(0x1400), None);
    }

    #[test]
    fn aliases_keep_the_best_name_and_the_largest_extent() {
        let t = ElfSymbols::new(vec![
            sym(0x1000, 0x20, "__GI_setlocale", 2, 5),
            sym(0x1000, 0x20, "setlocale", 0, 9),
            sym(0x1000, 0, "setlocale_alias", 0, 3),
        ]);
        // Same rank: the later index wins, as in object's symbol map.
        assert_eq!(t.name_at(0x1010), Some("setlocale"));
        assert_eq!(t.name_at(0x1020), None);
    }

    /// This test binary's own `.symtab`: the last byte of a function is
    /// named by it, and the padding after it, before the next symbol, is
    /// not.
    #[test]
    fn reads_this_binary() {
        let exe = std::env::current_exe().unwrap();
        let t = ElfSymbols::read(&exe).expect("symbols of the test binary");
        let gaps: Vec<&Symbol> = t
            .entries
            .windows(2)
            .filter(|w| w[0].size > 0 && w[0].start + w[0].size < w[1].start)
            .map(|w| &w[0])
            .collect();
        assert!(
            gaps.len() > 10,
            "functions followed by padding: {}",
            gaps.len()
        );
        for e in gaps {
            let end = e.start + e.size;
            assert!(t.name_at(end - 1).is_some(), "{e:?}");
            assert_eq!(t.name_at(end), None, "{e:?}");
        }
        assert!(ElfSymbols::read(Path::new("/nonexistent/lib.so")).is_none());
    }
}
