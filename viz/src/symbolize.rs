//! Return addresses to `function (file:line)`, once per distinct address.
//!
//! Each `FrameKey::Addr { module, offset }` is looked up at `offset - 1` (the
//! offset is a return address relative to the module's load bias, so `- 1`
//! lands inside the call instruction) in the module's DWARF via `addr2line`,
//! falling back to the ELF symbol table (`.symtab`, else `.dynsym`) when the
//! module has no line information, e.g. a stripped glibc: the function whose
//! symbol's extent holds the address (`elf_symbols.rs`), else `??`.
//!
//! Inlined calls: the frame entry names the *outermost* function at the
//! address (the real function that owns the return address), with the source
//! line inside that function where the inlined chain starts. Inlined callees
//! are not expanded into extra frames, so a stack has exactly one frame per
//! return address, as the tree does.
//!
//! A module file that cannot be opened or parsed is not an error: its frames
//! stay `??` and still carry the module path.
//!
//! A return address without a name whose code is x86_64 Linux's
//! `rt_sigreturn` call is the C library's signal trampoline (glibc's
//! `__restore_rt`, a local symbol that Debian's stripped glibc lacks): the
//! frame under a signal handler, named [`SIGNAL_FRAME`] as debuggers do.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use addr2line::Loader;
use wmhcct_format::{FrameKey, Module, Profile};

use crate::debug_file::DebugSections;
use crate::demangle::demangle;
use crate::elf_symbols::ElfSymbols;

/// The name of a signal trampoline's frame.
pub const SIGNAL_FRAME: &str = "<signal handler called>";

/// `mov $15, %rax; syscall`: `rt_sigreturn`, a signal trampoline's whole code.
const RT_SIGRETURN: [u8; 9] = [0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05];

/// What an address resolved to. Unknown parts: function `??`, file empty, line 0.
#[derive(Clone, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Frame {
    pub function: String,
    pub file: String,
    pub line: u32,
}

impl Frame {
    pub fn unknown() -> Frame {
        Frame {
            function: "??".into(),
            file: String::new(),
            line: 0,
        }
    }
}

/// Symbolised `(module index, offset)` pairs of one profile.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Symbols {
    map: HashMap<(u32, u64), Frame>,
}

impl Symbols {
    pub fn insert(&mut self, module: u32, offset: u64, frame: Frame) {
        self.map.insert((module, offset), frame);
    }

    /// The frame of an address key (`??` when it was never resolved).
    pub fn get(&self, module: u32, offset: u64) -> Frame {
        self.map
            .get(&(module, offset))
            .cloned()
            .unwrap_or_else(Frame::unknown)
    }

    /// The frame entry of any tree key; `kinds` names `Kind` keys.
    pub fn frame_of(&self, key: &FrameKey, kinds: &[&str]) -> Frame {
        match *key {
            FrameKey::Root => Frame {
                function: "<root>".into(),
                ..Frame::default()
            },
            FrameKey::Kind(k) => Frame {
                function: kind_name(k, kinds),
                ..Frame::default()
            },
            FrameKey::Addr { module, offset } => self.get(module, offset),
            FrameKey::Unknown(_) => Frame::unknown(),
        }
    }
}

/// Name of a kind key: `kinds[k]`, or for untraced pseudo-contexts
/// (`k >= UNTRACED_KIND`) the name of kind `k - UNTRACED_KIND`.
pub fn kind_name(k: u16, kinds: &[&str]) -> String {
    let base = if k >= wmhcct_format::UNTRACED_KIND {
        k - wmhcct_format::UNTRACED_KIND
    } else {
        k
    };
    kinds
        .get(base as usize)
        .map(|s| s.to_string())
        .unwrap_or_else(|| format!("kind#{base}"))
}

/// Most modules symbolised at once: each holds its whole debug information
/// in memory while it is resolved (glibc's debug file: ~10 MiB decompressed).
const MAX_WORKERS: usize = 4;

/// Resolve every distinct address key of every tree of `profile`.
///
/// Modules are resolved in parallel, up to [`MAX_WORKERS`] at a time (fewer
/// on a machine with fewer CPUs, one under a memory limit:
/// `workers.rs`), the largest first: loading a module's
/// debug information (decompressing and indexing its DWARF) is most of the
/// work, and a report's addresses lie in a handful of modules of very
/// different sizes (the C library's debug file, the program's own). The
/// result does not depend on the order.
pub fn symbolize(profile: &Profile) -> Symbols {
    let mut by_module: HashMap<u32, Vec<u64>> = HashMap::new();
    for tree in &profile.trees {
        for node in &tree.nodes {
            if let FrameKey::Addr { module, offset } = node.key {
                by_module.entry(module).or_default().push(offset);
            }
        }
    }
    // (The debug file is looked for once a module: following a debug link
    // may read the whole file for its CRC.)
    let mut work: Vec<(u64, u32, Option<PathBuf>, Vec<u64>)> = by_module
        .into_iter()
        .map(|(module, mut offsets)| {
            offsets.sort_unstable();
            offsets.dedup();
            let m = profile.modules.get(module as usize);
            let debug_path =
                m.and_then(|m| crate::debug_link::find(Path::new(&m.path), &m.build_id));
            let size = m.map_or(0, |m| ModuleResolver::weight(m, debug_path.as_deref()));
            (size, module, debug_path, offsets)
        })
        .collect();
    // Largest first; ties by module index, so that the order is fixed.
    work.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let available = crate::workers::available();
    let workers = available.min(MAX_WORKERS).min(work.len());
    // A module's debug file decompresses on two threads where there are
    // more CPUs than modules being resolved at once.
    let threads = if available > workers { 2 } else { 1 };
    let resolve = |(_, module, debug_path, offsets): &(u64, u32, Option<PathBuf>, Vec<u64>)| {
        let m = profile.modules.get(*module as usize);
        let debug = m
            .zip(debug_path.as_deref())
            .and_then(|(m, path)| ModuleResolver::debug(m, path, threads, offsets));
        let resolver = m.map(|m| ModuleResolver::open(m, debug.as_ref()));
        offsets
            .iter()
            .map(|&offset| {
                let frame = resolver
                    .as_ref()
                    .map(|r| r.resolve(offset))
                    .unwrap_or_else(Frame::unknown);
                ((*module, offset), frame)
            })
            .collect::<Vec<_>>()
    };
    let mut symbols = Symbols::default();
    if workers <= 1 {
        for w in &work {
            symbols.map.extend(resolve(w));
        }
        return symbols;
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let parts: Vec<Vec<((u32, u64), Frame)>> = std::thread::scope(|s| {
        let take = || {
            let mut out = Vec::new();
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(w) = work.get(i) else { break out };
                out.extend(resolve(w));
            }
        };
        // One worker is this thread; the others as many as can be started
        // (a process limit may refuse them: the queue is then this one's).
        let handles: Vec<_> = (1..workers)
            .map_while(|_| std::thread::Builder::new().spawn_scoped(s, take).ok())
            .collect();
        let mut parts = vec![take()];
        // (`panic = "abort"`: a worker that panics ends the process.)
        parts.extend(handles.into_iter().map(|h| h.join().unwrap_or_default()));
        parts
    });
    for part in parts {
        symbols.map.extend(part);
    }
    symbols
}

/// Does the file at `path` carry the GNU build id `expected` (hex)? True when
/// nothing was recorded or the file has none; false when unreadable.
fn build_id_matches(path: &Path, expected: &str) -> bool {
    if expected.is_empty() {
        return true;
    }
    match crate::debug_link::build_id_of(path) {
        Ok(Some(hex)) => hex.eq_ignore_ascii_case(expected),
        Ok(None) => true,
        Err(_) => false,
    }
}

/// A module's separate debug file, loaded: what [`ModuleResolver::open`]
/// borrows.
pub struct Debug {
    path: PathBuf,
    sections: DebugSections,
}

/// Where a module's names come from.
enum Dwarf<'a> {
    /// Its separate debug file (`debug_file.rs`).
    Debug(addr2line::Context<crate::debug_file::Reader<'a>>),
    /// The module file itself, through `addr2line`'s loader (which also
    /// reads the `.dwo`/`.dwp` files of split-DWARF builds).
    Module(Box<Loader>),
}

/// Debug information of one module, if its file could be loaded.
pub struct ModuleResolver<'a> {
    dwarf: Option<Dwarf<'a>>,
    /// The file the DWARF was read from (the debug file, else the module).
    file: Option<PathBuf>,
    /// The debug file's bytes, when the DWARF is its.
    debug_bytes: Option<&'a [u8]>,
    /// Its symbol table, read at the first address DWARF does not name.
    symbols: std::cell::OnceCell<Option<ElfSymbols>>,
    /// The module file itself (its code, which a debug file lacks).
    module: Option<PathBuf>,
    /// Its executable sections, read at the first address no symbol names.
    code: std::cell::OnceCell<Option<Code>>,
}

/// Is the module's file there and the one the run saw? A file whose build
/// id differs from the recorded one (rebuilt since the run) is not used:
/// its frames stay unknown rather than wrong.
fn usable(module: &Module) -> bool {
    !module.path.is_empty()
        && !module.path.starts_with('[')
        && build_id_matches(Path::new(&module.path), &module.build_id)
}

impl<'a> ModuleResolver<'a> {
    /// The module's separate debug file at `path` (`debug_link::find`: by
    /// build id under `/usr/lib/debug/.build-id/`, else by its debug link),
    /// loaded for the return addresses `offsets` (what [`Self::resolve`]
    /// will be asked), when the module is usable; `threads` as for
    /// [`DebugSections::load`].
    pub fn debug(module: &Module, path: &Path, threads: usize, offsets: &[u64]) -> Option<Debug> {
        if !usable(module) {
            return None;
        }
        let probes: Vec<u64> = offsets.iter().map(|o| o.saturating_sub(1)).collect();
        let sections = DebugSections::load_for(path, threads, &probes)?;
        Some(Debug {
            path: path.to_path_buf(),
            sections,
        })
    }

    /// A module's resolver: from its separate debug file when one was loaded
    /// ([`ModuleResolver::debug`]), else from the module file.
    pub fn open(module: &Module, debug: Option<&'a Debug>) -> ModuleResolver<'a> {
        // (A debug file is only loaded for a usable module.)
        let usable = debug.is_some() || usable(module);
        let from_debug =
            debug.and_then(|d| Some((Dwarf::Debug(d.sections.context()?), d.path.clone(), d)));
        let debug_bytes = from_debug.as_ref().map(|(_, _, d)| d.sections.file());
        let (dwarf, file) = match from_debug {
            Some((dwarf, path, _)) => (Some(dwarf), Some(path)),
            None if usable => match Loader::new(&module.path) {
                Ok(l) => (
                    Some(Dwarf::Module(Box::new(l))),
                    Some(PathBuf::from(&module.path)),
                ),
                Err(_) => (None, None),
            },
            None => (None, None),
        };
        ModuleResolver {
            dwarf,
            file,
            debug_bytes,
            symbols: std::cell::OnceCell::new(),
            module: usable.then(|| PathBuf::from(&module.path)),
            code: std::cell::OnceCell::new(),
        }
    }

    /// How much work the module's symbolisation is, roughly: the size of
    /// the file its debug information is read from, its separate debug
    /// file `debug` if it has one (0 if there is none).
    fn weight(module: &Module, debug: Option<&Path>) -> u64 {
        let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
        debug
            .map(size)
            .filter(|&n| n > 0)
            .unwrap_or_else(|| size(Path::new(&module.path)))
    }

    /// Resolve a return address given relative to the module's bias.
    pub fn resolve(&self, offset: u64) -> Frame {
        let Some(dwarf) = &self.dwarf else {
            return Frame::unknown();
        };
        let probe = offset.saturating_sub(1);
        let (found, raw_name) = match dwarf {
            Dwarf::Debug(ctx) => outermost(ctx.find_frames(probe).skip_all_loads().ok()),
            Dwarf::Module(loader) => outermost(loader.find_frames(probe).ok()),
        };
        let mut frame = found.unwrap_or_else(Frame::unknown);
        let symbols = || {
            self.symbols
                .get_or_init(|| match self.debug_bytes {
                    Some(bytes) => ElfSymbols::parse(bytes),
                    None => self.file.as_deref().and_then(ElfSymbols::read),
                })
                .as_ref()
        };
        if let Some(raw) = raw_name.filter(|r| !r.starts_with("_Z")) {
            // A C++ function whose debug information has no linkage name
            // (GCC's constructors, member templates) is named there
            // without its class and namespaces (`thread<…>` for
            // `std::thread::thread<…>`): its ELF symbol has them.
            if let Some(full) = symbols()
                .and_then(|t| t.name_at(probe))
                .and_then(|sym| qualified_by_symbol(&raw, sym))
            {
                frame.function = full;
            }
        }
        if frame.function == "??" {
            if let Some(name) = symbols().and_then(|t| t.name_at(probe)) {
                frame.function = demangle(name);
            } else if self
                .code
                .get_or_init(|| self.module.as_deref().and_then(Code::open))
                .as_ref()
                .and_then(|c| c.at(offset))
                == Some(RT_SIGRETURN)
            {
                frame.function = SIGNAL_FRAME.into();
            }
        }
        if frame.file.is_empty() {
            let location = match dwarf {
                Dwarf::Debug(ctx) => ctx.find_location(probe).ok(),
                Dwarf::Module(loader) => loader.find_location(probe).ok(),
            };
            if let Some(Some(loc)) = location {
                frame.file = loc.file.unwrap_or("").to_string();
                frame.line = loc.line.unwrap_or(0);
            }
        }
        frame
    }
}

/// The outermost function of a lookup's frames (innermost first: the last
/// is the real function that owns the address) with the line where its
/// inlined chain starts, and its raw name.
fn outermost<R: addr2line::gimli::Reader>(
    frames: Option<addr2line::FrameIter<'_, R>>,
) -> (Option<Frame>, Option<String>) {
    let (mut found, mut raw_name) = (None, None);
    let Some(mut frames) = frames else {
        return (found, raw_name);
    };
    while let Ok(Some(f)) = frames.next() {
        raw_name = f
            .function
            .as_ref()
            .and_then(|n| n.raw_name().ok())
            .map(|n| n.into_owned());
        let function = raw_name.as_deref().map(demangle);
        let (file, line) = f
            .location
            .as_ref()
            .map(|l| (l.file.unwrap_or("").to_string(), l.line.unwrap_or(0)))
            .unwrap_or_default();
        found = Some(Frame {
            function: function.unwrap_or_else(|| "??".into()),
            file,
            line,
        });
    }
    (found, raw_name)
}

/// The demangled ELF `symbol` of a function that debug information names
/// `dwarf` without its scope, when the symbol is that function's: a C++
/// name whose last part is `dwarf`'s (template arguments aside).
fn qualified_by_symbol(dwarf: &str, symbol: &str) -> Option<String> {
    if !symbol.starts_with("_Z") {
        return None;
    }
    let base = dwarf.split('<').next()?.trim();
    let qualified = crate::demangle::qualified_name(symbol)?;
    let last = qualified.rsplit("::").next()?.trim_end_matches("<…>");
    (!base.is_empty() && last == base && qualified.contains("::")).then(|| demangle(symbol))
}

/// A module file's executable sections, to read code from.
struct Code {
    file: std::fs::File,
    /// (address, size, file offset) of each executable section with data.
    sections: Vec<(u64, u64, u64)>,
}

impl Code {
    fn open(path: &Path) -> Option<Code> {
        use object::{Object, ObjectSection, SectionFlags};
        let file = std::fs::File::open(path).ok()?;
        let sections = {
            let cache = object::ReadCache::new(&file);
            let obj = object::File::parse(&cache).ok()?;
            obj.sections()
                .filter(|s| {
                    matches!(s.flags(), SectionFlags::Elf { sh_flags }
                        if sh_flags & u64::from(object::elf::SHF_EXECINSTR) != 0)
                })
                .filter_map(|s| {
                    let (offset, size) = s.file_range()?;
                    Some((s.address(), size, offset))
                })
                .collect()
        };
        Some(Code { file, sections })
    }

    /// The nine bytes of code at `svma`, inside one executable section.
    fn at(&self, svma: u64) -> Option<[u8; 9]> {
        use std::os::unix::fs::FileExt;
        let &(addr, _, offset) = self
            .sections
            .iter()
            .find(|&&(a, size, _)| a <= svma && svma.saturating_add(9) <= a + size)?;
        let mut code = [0u8; 9];
        self.file
            .read_exact_at(&mut code, offset + (svma - addr))
            .ok()?;
        Some(code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_module_stays_unknown() {
        let m = Module {
            path: "/nonexistent/libnothing.so".into(),
            ..Module::default()
        };
        assert_eq!(
            ModuleResolver::open(&m, None).resolve(0x1234),
            Frame::unknown()
        );
    }

    #[test]
    fn stale_build_id_is_not_used() {
        let exe = std::env::current_exe().unwrap();
        assert!(build_id_matches(&exe, ""));
        let m = Module {
            path: exe.to_string_lossy().into_owned(),
            build_id: "00112233445566778899aabbccddeeff00112233".into(),
            ..Module::default()
        };
        assert!(ModuleResolver::open(&m, None).dwarf.is_none());
        assert_eq!(
            crate::debug_link::by_build_id("ABcdef").unwrap(),
            PathBuf::from("/usr/lib/debug/.build-id/ab/cdef.debug")
        );
        assert!(crate::debug_link::by_build_id("xyz").is_none());
    }

    /// Modules resolved on several threads give what each module's own
    /// resolver gives, for every address, whichever thread took it.
    #[test]
    fn parallel_resolution_is_each_module_s_own() {
        let exe = std::env::current_exe().unwrap();
        let (bias, _) = own_bias();
        let here = Module {
            path: exe.to_string_lossy().into_owned(),
            bias,
            ..Module::default()
        };
        let missing = Module {
            path: "/nonexistent/libnothing.so".into(),
            ..Module::default()
        };
        let modules = vec![here.clone(), missing, here.clone(), here];
        let marker = marker_function as *const () as usize as u64 - bias + 1;
        let own = symbolize as *const () as usize as u64 - bias + 1;
        let keys: Vec<(u32, u64)> = (0..4u32)
            .flat_map(|m| [(m, marker), (m, own), (m, 0x10)])
            .collect();
        let nodes = keys
            .iter()
            .map(|&(module, offset)| wmhcct_format::Node {
                key: FrameKey::Addr { module, offset },
                ..wmhcct_format::Node::root()
            })
            .collect();
        let profile = Profile {
            modules: modules.clone(),
            trees: vec![wmhcct_format::Tree {
                nodes,
                ..wmhcct_format::Tree::default()
            }],
            ..Profile::default()
        };
        let symbols = symbolize(&profile);
        assert_eq!(symbols.map.len(), keys.len());
        for (module, offset) in keys {
            let want = ModuleResolver::open(&modules[module as usize], None).resolve(offset);
            assert_eq!(
                symbols.get(module, offset),
                want,
                "module {module} {offset:#x}"
            );
        }
        assert!(symbols.get(2, marker).function.contains("marker_function"));
        assert_eq!(symbols.get(1, marker), Frame::unknown());
    }

    #[test]
    fn kind_names() {
        let k = &wmhcct_format::ALLOC_KINDS[..];
        assert_eq!(kind_name(0, k), "malloc");
        assert_eq!(kind_name(0x801, k), "calloc");
        assert_eq!(kind_name(999, k), "kind#999");
    }

    #[inline(never)]
    fn marker_function() -> usize {
        std::hint::black_box(42)
    }

    /// Resolve an address of this very test binary through its own DWARF.
    #[test]
    fn resolves_own_function() {
        let exe = std::env::current_exe().unwrap();
        let (bias, _) = own_bias();
        let addr = marker_function as *const () as usize as u64;
        let m = Module {
            path: exe.to_string_lossy().into_owned(),
            bias,
            ..Module::default()
        };
        // +1: resolve() looks up offset - 1, as for a return address.
        let f = ModuleResolver::open(&m, None).resolve(addr - bias + 1);
        assert!(f.function.contains("marker_function"), "{f:?}");
        assert!(f.file.ends_with("symbolize.rs"), "{f:?}");
        assert!(f.line > 0);
    }

    /// Load bias of the main executable from /proc/self/maps and the ELF file.
    fn own_bias() -> (u64, ()) {
        use object::{Object, ObjectSegment};
        let exe = std::env::current_exe().unwrap();
        let data = std::fs::read(&exe).unwrap();
        let obj = object::File::parse(&*data).unwrap();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let exe_s = exe.to_string_lossy();
        for line in maps.lines() {
            let cols: Vec<&str> = line.split_whitespace().collect();
            if cols.len() >= 6 && cols[5] == exe_s && cols[2] == "00000000" {
                let start = u64::from_str_radix(cols[0].split('-').next().unwrap(), 16).unwrap();
                let first_vaddr = obj
                    .segments()
                    .filter(|s| s.file_range().0 == 0)
                    .map(|s| s.address())
                    .next()
                    .unwrap_or(0);
                return (start - (first_vaddr & !0xfff), ());
            }
        }
        panic!("executable not in /proc/self/maps");
    }
}
