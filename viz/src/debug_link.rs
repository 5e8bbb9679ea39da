//! Where a module's separate debug file is: under
//! `/usr/lib/debug/.build-id/` by the module's build id (distributions'
//! debug packages), else, for a module stripped of its DWARF, where its
//! `.gnu_debuglink` says, searched as gdb searches it (`objcopy
//! --only-keep-debug app app.debug; strip app; objcopy
//! --add-gnu-debuglink=app.debug app`, a common way to ship an HPC code
//! without its debug information and keep it at hand).

use std::io::Read;
use std::path::{Path, PathBuf};

use object::Object;

/// `/usr/lib/debug/.build-id/ab/cdef….debug` for build id `abcdef…`.
pub fn by_build_id(build_id: &str) -> Option<PathBuf> {
    let id = build_id.to_ascii_lowercase();
    (id.len() > 2 && id.bytes().all(|b| b.is_ascii_hexdigit())).then(|| {
        PathBuf::from(format!(
            "/usr/lib/debug/.build-id/{}/{}.debug",
            &id[..2],
            &id[2..]
        ))
    })
}

/// The separate debug file of the module at `module` (build id
/// `build_id`, hex, empty if none was recorded): by build id, else by its
/// debug link.
pub fn find(module: &Path, build_id: &str) -> Option<PathBuf> {
    by_build_id(build_id)
        .filter(|d| d.is_file())
        .or_else(|| linked(module, build_id))
}

/// The file the module's `.gnu_debuglink` names, when the module has no
/// DWARF of its own (one that has is read as it is, as before): looked for
/// as gdb looks, in the module's directory, its `.debug/` subdirectory and
/// under `/usr/lib/debug` followed by the module's directory. A file is
/// taken only if it is the module's: the same build id where both have
/// one, else the CRC-32 the link records. Names from another build's
/// debug file would be wrong.
fn linked(module: &Path, build_id: &str) -> Option<PathBuf> {
    let file = std::fs::File::open(module).ok()?;
    let cache = object::ReadCache::new(file);
    let object = object::File::parse(&cache).ok()?;
    if object.section_by_name(".debug_info").is_some() {
        return None;
    }
    let (name, crc) = object.gnu_debuglink().ok()??;
    let name = Path::new(std::str::from_utf8(name).ok()?);
    // (A bare file name, as objcopy writes; anything else is not followed.)
    if name.components().count() != 1 || name.file_name().is_none() {
        return None;
    }
    // The module's directory as recorded, and the real one where the
    // recorded path is a symbolic link (`libfoo.so.1` → `libfoo.so.1.2.3`
    // elsewhere), as gdb uses.
    let real = std::fs::canonicalize(module).ok();
    let mut dirs: Vec<&Path> = module.parent().into_iter().collect();
    if let Some(d) = real.as_deref().and_then(Path::parent) {
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    let candidates = dirs.iter().flat_map(|dir| {
        [
            dir.join(name),
            dir.join(".debug").join(name),
            Path::new("/usr/lib/debug")
                .join(dir.strip_prefix("/").unwrap_or(dir))
                .join(name),
        ]
    });
    let itself = |c: &Path| c == module || Some(c) == real.as_deref();
    candidates
        .filter(|c| !itself(c) && c.is_file())
        .find(|c| is_debug_file_of(c, build_id, crc))
}

/// The GNU build id (hex) of the object file at `path`: an error if it
/// cannot be read as one, `None` if it has no build id.
pub fn build_id_of(path: &Path) -> std::io::Result<Option<String>> {
    let file = std::fs::File::open(path)?;
    let cache = object::ReadCache::new(file);
    let object = object::File::parse(&cache).map_err(std::io::Error::other)?;
    Ok(object
        .build_id()
        .ok()
        .flatten()
        .map(|id| id.iter().map(|b| format!("{b:02x}")).collect()))
}

/// Is the file at `path` the debug file of a module with build id
/// `build_id` (hex) and debug link CRC `crc`?
fn is_debug_file_of(path: &Path, build_id: &str, crc: u32) -> bool {
    match build_id_of(path).ok().flatten() {
        Some(id) if !build_id.is_empty() => id.eq_ignore_ascii_case(build_id),
        _ => crc32_of(path) == Some(crc),
    }
}

/// The CRC-32 (the one `.gnu_debuglink` records) of the file at `path`.
fn crc32_of(path: &Path) -> Option<u32> {
    let mut file = std::fs::File::open(path).ok()?;
    let mut hasher = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match file.read(&mut buf) {
            Ok(0) => return Some(hasher.finalize()),
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run `program args` in `dir` (the compilers and binutils
    /// `scripts/setup.sh` installs), which must succeed.
    fn run(dir: &Path, program: &str, args: &[&str]) {
        let status = std::process::Command::new(program)
            .args(args)
            .current_dir(dir)
            .status()
            .unwrap_or_else(|e| panic!("{program}: {e} (scripts/setup.sh installs it)"));
        assert!(status.success(), "{program} {args:?}");
    }

    /// A stripped library with a debug link finds its debug file beside it
    /// and in `.debug/`; one of another build, or a module with DWARF of
    /// its own, does not; without build ids the link's CRC decides.
    #[test]
    fn a_debug_link_is_followed_to_the_modules_own_debug_file() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("f.c"), "int f(int n) { return n * 7; }\n").unwrap();
        std::fs::write(d.join("g.c"), "int f(int n) { return n * 9; }\n").unwrap();
        for (src, so, extra) in [
            ("f.c", "libf.so", "-Wl,--build-id"),
            ("g.c", "libg.so", "-Wl,--build-id"),
            ("f.c", "libn.so", "-Wl,--build-id=none"),
        ] {
            run(
                d,
                "gcc",
                &["-O2", "-g", "-fPIC", "-shared", extra, "-o", so, src],
            );
        }
        // (libf.so kept whole: a module with DWARF is read as it is.)
        run(d, "cp", &["libf.so", "libf_whole.so"]);
        for so in ["libf.so", "libn.so"] {
            let debug = format!("{so}.debug");
            run(d, "objcopy", &["--only-keep-debug", so, &debug]);
            run(d, "strip", &["--strip-all", so]);
            run(d, "objcopy", &[&format!("--add-gnu-debuglink={debug}"), so]);
        }
        let f = d.join("libf.so");
        let id = build_id_of(&f).unwrap().unwrap();
        assert_eq!(linked(&f, &id), Some(d.join("libf.so.debug")));
        // Without a recorded build id, the debug file's own one is not
        // compared: the CRC is.
        assert_eq!(linked(&f, ""), Some(d.join("libf.so.debug")));
        // In .debug/.
        std::fs::create_dir(d.join(".debug")).unwrap();
        std::fs::rename(d.join("libf.so.debug"), d.join(".debug/libf.so.debug")).unwrap();
        assert_eq!(linked(&f, &id), Some(d.join(".debug/libf.so.debug")));
        // Another build's debug file under the link's name is not taken.
        std::fs::remove_file(d.join(".debug/libf.so.debug")).unwrap();
        run(
            d,
            "objcopy",
            &["--only-keep-debug", "libg.so", "libf.so.debug"],
        );
        assert_eq!(linked(&f, &id), None);
        // Nor one whose CRC differs, where there are no build ids: libn's
        // debug file altered by a byte.
        let n = d.join("libn.so");
        assert_eq!(linked(&n, ""), Some(d.join("libn.so.debug")));
        run(d, "cp", &["libn.so.debug", "libn.so.debug.orig"]);
        let mut bytes = std::fs::read(d.join("libn.so.debug")).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(d.join("libn.so.debug"), bytes).unwrap();
        assert_eq!(linked(&n, ""), None);
        // Through a symbolic link from another directory: the real
        // directory's `.debug/` too.
        std::fs::create_dir(d.join("links")).unwrap();
        std::os::unix::fs::symlink(&n, d.join("links/libn.so.1")).unwrap();
        run(d, "cp", &["libn.so.debug.orig", "libn.so.debug"]);
        run(d, "mkdir", &["-p", ".debug"]);
        run(d, "mv", &["libn.so.debug", ".debug/"]);
        assert_eq!(
            linked(&d.join("links/libn.so.1"), ""),
            Some(d.join(".debug/libn.so.debug"))
        );
        // A module with DWARF of its own, or without a link.
        let whole = d.join("libf_whole.so");
        assert_eq!(linked(&whole, &build_id_of(&whole).unwrap().unwrap()), None);
        assert_eq!(linked(&d.join("libg.so"), ""), None);
        assert_eq!(linked(&d.join("missing.so"), ""), None);
    }
}
