//! Programs built with a sanitizer that replaces the allocator
//! (AddressSanitizer, ThreadSanitizer, LeakSanitizer, HWAddressSanitizer,
//! MemorySanitizer). Their run-time library must be the first one loaded
//! and owns `malloc`; with `libwmhcct.so` preloaded in front of it, such a
//! program stops at start (ASan: "runtime does not come first in initial
//! library list", exit 1; LSan: a failed CHECK, exit 23; TSan: SIGSEGV),
//! before the tracer can do anything about it. `wmhcct run` therefore runs
//! them without the tracer, and says why.
//!
//! Found from the executable: a `DT_NEEDED` entry naming the run-time
//! library (GCC links it dynamically: `libasan.so.8`, `libtsan.so.2`, …;
//! clang's `-shared-libsan`: `libclang_rt.asan-x86_64.so`), or the
//! run-time's entry point defined in the executable itself (clang's default
//! static run-time: `__asan_init`, `__tsan_init`, …).

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use object::read::elf::{Dyn as _, ElfFile64, FileHeader as _};
use object::{Object as _, ObjectSymbol as _, ReadRef};

/// (sanitizer, library name prefixes, entry point in a static run-time).
const SANITIZERS: &[(&str, &[&str], &str)] = &[
    (
        "AddressSanitizer",
        &["libasan.so", "libclang_rt.asan"],
        "__asan_init",
    ),
    (
        "ThreadSanitizer",
        &["libtsan.so", "libclang_rt.tsan"],
        "__tsan_init",
    ),
    (
        "LeakSanitizer",
        &["liblsan.so", "libclang_rt.lsan"],
        "__lsan_init",
    ),
    (
        "HWAddressSanitizer",
        &["libhwasan.so", "libclang_rt.hwasan"],
        "__hwasan_init",
    ),
    (
        "MemorySanitizer",
        &["libmsan.so", "libclang_rt.msan"],
        "__msan_init",
    ),
];

/// The sanitizer an ELF image (a 64-bit ELF file's bytes) is built with,
/// if it has one that replaces the allocator.
pub fn in_image<'data, R: ReadRef<'data>>(data: R) -> Option<&'static str> {
    let file = ElfFile64::<object::Endianness, R>::parse(data).ok()?;
    let endian = file.endian();
    let sections = file.elf_header().sections(endian, data).ok()?;
    if let Some((dynamic, link)) = sections.dynamic(endian, data).ok().flatten() {
        let strings = sections.strings(endian, data, link).ok()?;
        for d in dynamic {
            if d.tag32(endian) != Some(object::elf::DT_NEEDED) {
                continue;
            }
            let Some(name) = d.val32(endian).and_then(|at| strings.get(at).ok()) else {
                continue;
            };
            let found = SANITIZERS
                .iter()
                .find(|(_, libs, _)| libs.iter().any(|l| name.starts_with(l.as_bytes())));
            if let Some((which, _, _)) = found {
                return Some(which);
            }
        }
    }
    // One pass over the symbols: the first defined run-time entry point.
    file.symbols()
        .chain(file.dynamic_symbols())
        .filter(|s| s.is_definition())
        .find_map(|s| {
            let name = s.name().ok()?;
            SANITIZERS
                .iter()
                .find(|(_, _, entry)| *entry == name)
                .map(|(which, _, _)| *which)
        })
}

/// The sanitizer the executable at `path` is built with (see [`in_image`]).
pub fn of_file(path: &Path) -> Option<&'static str> {
    let file = std::fs::File::open(path).ok()?;
    in_image(&object::ReadCache::new(file))
}

/// The first executable of `command` built with such a sanitizer, and
/// which: the command itself (found as `execvp` finds it) or, for a
/// launcher (`mpirun -np 4 ./app`, `srun ./app`), an argument that names an
/// executable file by a path (one with a `/`).
pub fn in_command(command: &[OsString]) -> Option<(PathBuf, &'static str)> {
    let (program, rest) = command.split_first()?;
    let by_path = rest
        .iter()
        .filter(|a| a.as_bytes().contains(&b'/'))
        .filter_map(|a| {
            let p = PathBuf::from(a);
            let meta = std::fs::metadata(&p).ok()?;
            (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then_some(p)
        });
    crate::untraced::resolve(program)
        .into_iter()
        .chain(by_path)
        .find_map(|p| of_file(&p).map(|which| (p, which)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `body` compiled by cc with `flags` into `dir`: the executable's bytes.
    fn build(dir: &Path, name: &str, body: &str, flags: &[&str]) -> Option<Vec<u8>> {
        let src = dir.join(format!("{name}.c"));
        std::fs::write(&src, body).unwrap();
        let exe = dir.join(name);
        let ok = std::process::Command::new("cc")
            .args(flags)
            .arg("-o")
            .arg(&exe)
            .arg(&src)
            .status()
            .ok()?
            .success();
        ok.then(|| std::fs::read(&exe).unwrap())
    }

    const MAIN: &str = "#include <stdlib.h>\nint main(void) { free(malloc(8)); return 0; }\n";

    #[test]
    fn gcc_sanitizers_are_found_and_plain_programs_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let plain = build(dir.path(), "plain", MAIN, &["-O2"]).expect("cc builds");
        assert_eq!(in_image(&plain[..]), None);
        let ubsan = build(dir.path(), "ubsan", MAIN, &["-fsanitize=undefined"]).unwrap();
        assert_eq!(in_image(&ubsan[..]), None, "UBSan leaves malloc alone");
        for (flag, which) in [
            ("-fsanitize=address", "AddressSanitizer"),
            ("-fsanitize=thread", "ThreadSanitizer"),
            ("-fsanitize=leak", "LeakSanitizer"),
        ] {
            let exe = build(dir.path(), "san", MAIN, &[flag]).unwrap();
            assert_eq!(in_image(&exe[..]), Some(which), "{flag}");
        }
    }

    #[test]
    fn a_static_run_time_is_found_by_its_entry_point() {
        // What clang's static run-time leaves in the executable: the
        // sanitizer's init function, defined there.
        let dir = tempfile::tempdir().unwrap();
        let body = format!("void __msan_init(void) {{}}\n{MAIN}");
        let exe = build(dir.path(), "static", &body, &[]).unwrap();
        assert_eq!(in_image(&exe[..]), Some("MemorySanitizer"));
        // Only called, not defined: not a run-time.
        let body = "extern void __asan_init(void) __attribute__((weak));\n\
                    int main(void) { if (__asan_init) __asan_init(); return 0; }\n";
        let exe = build(dir.path(), "weakref", body, &[]).unwrap();
        assert_eq!(in_image(&exe[..]), None);
    }

    #[test]
    fn other_files_are_not_sanitized() {
        assert_eq!(in_image(&b"#!/bin/sh\necho hi\n"[..]), None);
        assert_eq!(in_image(&b""[..]), None);
        assert_eq!(of_file(Path::new("/nonexistent")), None);
    }
}
