//! Why a command started by `wmhcct run` cannot load the tracer, found by
//! looking at its executable: the dynamic loader, which reads `LD_PRELOAD`,
//! never runs for a statically linked program, ignores it for a
//! set-user-ID or set-group-ID one, and refuses a library of another ELF
//! class or machine.

use std::ffi::OsStr;
use std::io::Read as _;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

/// Why the tracer cannot be loaded into a program (its `Display` is a
/// predicate: "<program> is statically linked, …").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Untraced {
    /// No program interpreter: the dynamic loader never runs.
    Static,
    /// 32-bit, or another machine: the 64-bit x86-64 tracer cannot be loaded.
    Foreign(String),
    /// Set-user-ID or set-group-ID to someone else: the loader runs it in
    /// secure-execution mode, which ignores `LD_PRELOAD` paths.
    SecureExec(&'static str),
}

impl std::fmt::Display for Untraced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Untraced::Static => write!(
                f,
                "is statically linked, and LD_PRELOAD reaches only dynamically linked programs"
            ),
            Untraced::Foreign(what) => write!(
                f,
                "is {what}, and libwmhcct.so is for 64-bit x86-64 programs"
            ),
            Untraced::SecureExec(which) => write!(
                f,
                "is {which} another user, and the dynamic loader ignores LD_PRELOAD for such programs"
            ),
        }
    }
}

/// What the ELF header and program headers at the start of a file say,
/// if it is an ELF executable (`None`: not ELF, e.g. a script, whose
/// interpreter is what runs).
pub fn elf_reason(head: &[u8]) -> Option<Option<Untraced>> {
    if head.len() < 20 || &head[..4] != b"\x7fELF" {
        return None;
    }
    let (class, data) = (head[4], head[5]);
    let le = match data {
        1 => true,
        2 => false,
        _ => return None,
    };
    let u16_at = |o: usize| -> Option<u16> {
        let b: [u8; 2] = head.get(o..o + 2)?.try_into().ok()?;
        Some(if le {
            u16::from_le_bytes(b)
        } else {
            u16::from_be_bytes(b)
        })
    };
    let machine = u16_at(18)?;
    const EM_X86_64: u16 = 62;
    if class != 2 || machine != EM_X86_64 {
        let bits = match class {
            1 => "a 32-bit",
            2 => "a 64-bit",
            _ => "an",
        };
        let arch = match machine {
            3 => "x86",
            EM_X86_64 => "x86-64",
            40 => "ARM",
            183 => "AArch64",
            243 => "RISC-V",
            21 => "PowerPC64",
            _ => "other-machine",
        };
        return Some(Some(Untraced::Foreign(format!("{bits} {arch} program"))));
    }
    let u32_at = |o: usize| -> Option<u32> {
        let b: [u8; 4] = head.get(o..o + 4)?.try_into().ok()?;
        Some(u32::from_le_bytes(b))
    };
    let u64_at = |o: usize| -> Option<u64> {
        let b: [u8; 8] = head.get(o..o + 8)?.try_into().ok()?;
        Some(u64::from_le_bytes(b))
    };
    // ELF64 (little-endian, x86-64 from here on).
    let phoff = usize::try_from(u64_at(32)?).ok()?;
    let phentsize = usize::from(u16_at(54)?);
    let phnum = usize::from(u16_at(56)?);
    if phentsize < 4 {
        return None;
    }
    const PT_INTERP: u32 = 3;
    let mut interp = false;
    for i in 0..phnum {
        // Headers beyond what was read: cannot tell.
        let p_type = u32_at(phoff.checked_add(i.checked_mul(phentsize)?)?)?;
        interp |= p_type == PT_INTERP;
    }
    Some((!interp).then_some(Untraced::Static))
}

/// Set-user-ID or set-group-ID to an identity other than ours, on a file
/// system that honours it.
fn secure_exec(path: &Path) -> Option<Untraced> {
    let meta = std::fs::metadata(path).ok()?;
    let mode = meta.mode();
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let (euid, egid) = (
        effective_id(&status, "Uid:")?,
        effective_id(&status, "Gid:")?,
    );
    let which = if mode & 0o4000 != 0 && meta.uid() != euid {
        "set-user-ID to"
    } else if mode & 0o2000 != 0 && meta.gid() != egid {
        "set-group-ID to a group of"
    } else {
        return None;
    };
    let canonical = std::fs::canonicalize(path).ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let nosuid = mount_options(&mounts, &canonical)?
        .split(',')
        .any(|o| o == "nosuid");
    (!nosuid).then_some(Untraced::SecureExec(which))
}

/// The effective id on the `Uid:` or `Gid:` line of `/proc/self/status`
/// (real, effective, saved, file system).
fn effective_id(status: &str, key: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The per-mount options (`rw,nosuid,…`) of the mount holding the absolute
/// path `path`, from the text of `/proc/self/mountinfo`: the last-mounted
/// of those with the longest mount point that contains it.
fn mount_options<'a>(mountinfo: &'a str, path: &Path) -> Option<&'a str> {
    let mut best: Option<(usize, &str)> = None;
    for line in mountinfo.lines() {
        let mut fields = line.split(' ');
        let (Some(point), Some(options)) = (fields.nth(4), fields.next()) else {
            continue;
        };
        // Spaces, tabs, newlines and backslashes are octal escapes there.
        let point = point
            .replace("\\040", " ")
            .replace("\\011", "\t")
            .replace("\\012", "\n")
            .replace("\\134", "\\");
        let point = Path::new(&point);
        if path.starts_with(point) {
            let depth = point.components().count();
            if best.is_none_or(|(d, _)| depth >= d) {
                best = Some((depth, options));
            }
        }
    }
    best.map(|(_, o)| o)
}

/// The file `program` names, as `execvp` finds it: a name with a slash is
/// a path, any other is looked up in `PATH`.
pub fn resolve(program: &OsStr) -> Option<PathBuf> {
    let p = Path::new(program);
    if program.as_bytes().contains(&b'/') {
        return Some(p.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(p))
        .find(|c| std::fs::metadata(c).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0))
}

/// Why `program` cannot load the tracer, if its executable says so.
pub fn why_untraced(program: &OsStr) -> Option<Untraced> {
    let path = resolve(program)?;
    let mut head = Vec::with_capacity(4096);
    std::fs::File::open(&path)
        .ok()?
        .take(4096)
        .read_to_end(&mut head)
        .ok()?;
    elf_reason(&head)?.or_else(|| secure_exec(&path))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ELF64 header with `phdrs` program headers of the given types.
    fn elf(class: u8, machine: u16, phdrs: &[u32]) -> Vec<u8> {
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = class;
        h[5] = 1;
        h[18..20].copy_from_slice(&machine.to_le_bytes());
        h[32..40].copy_from_slice(&64u64.to_le_bytes());
        h[54..56].copy_from_slice(&56u16.to_le_bytes());
        h[56..58].copy_from_slice(&(phdrs.len() as u16).to_le_bytes());
        for &t in phdrs {
            let mut ph = vec![0u8; 56];
            ph[..4].copy_from_slice(&t.to_le_bytes());
            h.extend(ph);
        }
        h
    }

    #[test]
    fn a_program_interpreter_is_what_loads_the_tracer() {
        // PT_PHDR, PT_INTERP, PT_LOAD: dynamically linked.
        assert_eq!(elf_reason(&elf(2, 62, &[6, 3, 1])), Some(None));
        // PT_LOAD, PT_DYNAMIC, no PT_INTERP (static, static-pie): not traced.
        assert_eq!(
            elf_reason(&elf(2, 62, &[1, 2])),
            Some(Some(Untraced::Static))
        );
    }

    #[test]
    fn other_classes_and_machines_are_named() {
        let r = elf_reason(&elf(1, 3, &[3])).unwrap().unwrap();
        assert_eq!(r, Untraced::Foreign("a 32-bit x86 program".into()));
        assert!(r.to_string().contains("64-bit x86-64"), "{r}");
        let r = elf_reason(&elf(2, 183, &[3])).unwrap().unwrap();
        assert_eq!(r, Untraced::Foreign("a 64-bit AArch64 program".into()));
    }

    #[test]
    fn not_elf_or_cut_short_says_nothing() {
        assert_eq!(elf_reason(b"#!/bin/sh\necho hi\n"), None);
        assert_eq!(elf_reason(b""), None);
        // Program headers beyond the bytes read: no verdict.
        let mut h = elf(2, 62, &[1, 3]);
        h.truncate(64 + 56 + 2);
        assert_eq!(elf_reason(&h), None);
    }

    #[test]
    fn ids_and_mount_options_from_proc() {
        let status = "Name:\tx\nUid:\t0\t65534\t0\t0\nGid:\t5\t6\t5\t5\n";
        assert_eq!(effective_id(status, "Uid:"), Some(65534));
        assert_eq!(effective_id(status, "Gid:"), Some(6));
        let info = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:5 / /tmp rw,nosuid,nodev shared:2 - tmpfs tmpfs rw
31 22 0:6 / /tmp2 rw shared:3 - tmpfs tmpfs rw
32 22 0:7 / /my\\040dir rw,nosuid shared:4 - tmpfs tmpfs rw
33 30 0:8 / /tmp/inner rw shared:5 - tmpfs tmpfs rw
34 22 0:9 / /tmp2 ro,nosuid shared:6 - tmpfs tmpfs rw
";
        let of = |p: &str| mount_options(info, Path::new(p));
        assert_eq!(of("/usr/bin/x"), Some("rw,relatime"));
        assert_eq!(of("/tmp/x"), Some("rw,nosuid,nodev"));
        assert_eq!(
            of("/tmpx/y"),
            Some("rw,relatime"),
            "by components, not by prefix"
        );
        assert_eq!(of("/tmp/inner/x"), Some("rw"));
        assert_eq!(of("/tmp2/x"), Some("ro,nosuid"), "the mount on top");
        assert_eq!(of("/my dir/x"), Some("rw,nosuid"));
    }

    #[test]
    fn this_test_binary_is_dynamically_linked() {
        let me = std::env::current_exe().unwrap();
        assert_eq!(why_untraced(me.as_os_str()), None);
    }

    #[test]
    fn names_are_looked_up_in_path() {
        let sh = resolve(OsStr::new("sh")).expect("sh on PATH");
        assert!(sh.is_absolute() && sh.is_file(), "{}", sh.display());
        assert_eq!(
            resolve(OsStr::new("./x")),
            Some(PathBuf::from("./x")),
            "a name with a slash is a path"
        );
        assert_eq!(resolve(OsStr::new("no-such-program-wmhcct")), None);
    }
}
