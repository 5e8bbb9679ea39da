//! Test-only: this test binary's own unwind tables, read from `/proc/self/exe` with a tiny
//! ELF64 parser, described the way the interposer does it (runtime addresses, load bias).

use crate::modules::ModuleData;

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes(b[o..o + 2].try_into().unwrap())
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

struct Section {
    addr: u64,
    data: Vec<u8>,
}

fn section(elf: &[u8], want: &str) -> Option<Section> {
    let shoff = u64_at(elf, 0x28) as usize;
    let shentsize = u16_at(elf, 0x3a) as usize;
    let shnum = u16_at(elf, 0x3c) as usize;
    let shstrndx = u16_at(elf, 0x3e) as usize;
    let sh = |i: usize| shoff + i * shentsize;
    let strtab = u64_at(elf, sh(shstrndx) + 0x18) as usize;
    (0..shnum).find_map(|i| {
        let h = sh(i);
        let name_at = strtab + u32_at(elf, h) as usize;
        let name_end = name_at + elf[name_at..].iter().position(|&c| c == 0)?;
        if &elf[name_at..name_end] != want.as_bytes() {
            return None;
        }
        let addr = u64_at(elf, h + 0x10);
        let off = u64_at(elf, h + 0x18) as usize;
        let size = u64_at(elf, h + 0x20) as usize;
        Some(Section {
            addr,
            data: elf[off..off + size].to_vec(),
        })
    })
}

/// (lowest p_vaddr of a PT_LOAD, range of the executable PT_LOAD segments), file addresses.
fn segments(elf: &[u8]) -> (u64, std::ops::Range<u64>) {
    let phoff = u64_at(elf, 0x20) as usize;
    let phentsize = u16_at(elf, 0x36) as usize;
    let phnum = u16_at(elf, 0x38) as usize;
    let mut lowest = u64::MAX;
    let (mut text_start, mut text_end) = (u64::MAX, 0);
    for i in 0..phnum {
        let h = phoff + i * phentsize;
        if u32_at(elf, h) != 1 {
            continue; // not PT_LOAD
        }
        let flags = u32_at(elf, h + 4);
        let vaddr = u64_at(elf, h + 0x10);
        let memsz = u64_at(elf, h + 0x28);
        lowest = lowest.min(vaddr);
        if flags & 1 != 0 {
            text_start = text_start.min(vaddr);
            text_end = text_end.max(vaddr + memsz);
        }
    }
    (lowest, text_start..text_end)
}

/// Runtime start of the lowest mapping of this executable.
fn mapped_start() -> u64 {
    let exe = std::fs::read_link("/proc/self/exe").unwrap();
    let exe = exe.to_string_lossy();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines()
        .filter(|l| l.ends_with(exe.as_ref()))
        .filter_map(|l| u64::from_str_radix(l.split('-').next()?, 16).ok())
        .min()
        .unwrap()
}

/// This executable as the one module of a table, and its text.
pub(crate) fn this_binary() -> (std::ops::Range<u64>, crate::Modules) {
    let data = this_executable();
    let text = data.text.clone();
    let mut modules = crate::Modules::new();
    modules.add(data);
    (text, modules)
}

/// This executable as the interposer would describe it.
pub(crate) fn this_executable() -> ModuleData {
    let elf = std::fs::read("/proc/self/exe").unwrap();
    let (lowest, _) = segments(&elf);
    image(&elf, "self", mapped_start() - (lowest & !0xfff))
}

/// The ELF file at `path` as the interposer would describe it if it were
/// loaded with bias `base` (only its unwind tables are read, never its
/// code: it need not be mapped).
pub(crate) fn file_image(path: &str, base: u64) -> ModuleData {
    image(&std::fs::read(path).unwrap(), path, base)
}

fn image(elf: &[u8], name: &str, base: u64) -> ModuleData {
    assert_eq!(&elf[..4], b"\x7fELF");
    let (_, text) = segments(elf);
    let hdr = section(elf, ".eh_frame_hdr").unwrap();
    let eh = section(elf, ".eh_frame").unwrap();
    ModuleData {
        name: name.into(),
        base_avma: base,
        text: base + text.start..base + text.end,
        eh_frame_hdr: Some((base + hdr.addr, hdr.data.into())),
        eh_frame: Some((base + eh.addr, eh.data.into())),
    }
}
