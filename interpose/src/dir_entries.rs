//! A directory's entry names without libc's allocator.
//!
//! `opendir` (and so `std::fs::read_dir`) allocates its buffer with
//! `malloc`. The report can be written from the SIGTERM handler, which may
//! have interrupted the program inside glibc's allocator with the arena's
//! lock held: a `malloc` from there waits for that lock forever (a job
//! stopped with SIGINT once hung this way, in the closing line's count of
//! the descendants' reports). This reads the entries with `getdents64` into
//! a buffer of the tracer's own allocator (the handler's arena there).

use std::ffi::{CString, OsString};
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::path::Path;

/// Bytes of entries read per system call.
const BUF: usize = 32 << 10;
/// `struct linux_dirent64`: `d_ino` (8), `d_off` (8), `d_reclen` (2),
/// `d_type` (1), then the name, NUL-terminated.
const RECLEN_AT: usize = 16;
const NAME_AT: usize = 19;

/// The names in `dir` (without `.` and `..`); empty if it cannot be read.
pub fn names(dir: &Path) -> Vec<OsString> {
    let Ok(path) = CString::new(dir.as_os_str().as_bytes()) else {
        return Vec::new();
    };
    // SAFETY: open with a NUL-terminated path and plain flags.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut buf = vec![0u8; BUF];
    loop {
        // SAFETY: getdents64 writes at most `buf.len()` bytes into `buf`.
        let n = unsafe { libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len()) };
        if n <= 0 {
            break;
        }
        parse(&buf[..n as usize], &mut out);
    }
    // SAFETY: `fd` is ours, opened above.
    unsafe { libc::close(fd) };
    out
}

/// Append the names of the `linux_dirent64` records in `records`.
fn parse(records: &[u8], out: &mut Vec<OsString>) {
    let mut at = 0;
    while at + NAME_AT <= records.len() {
        let len = usize::from(u16::from_ne_bytes([
            records[at + RECLEN_AT],
            records[at + RECLEN_AT + 1],
        ]));
        if len < NAME_AT || at + len > records.len() {
            break;
        }
        let name = &records[at + NAME_AT..at + len];
        let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
        if name != b"." && name != b".." {
            out.push(OsString::from_vec(name.to_vec()));
        }
        at += len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_what_read_dir_lists() {
        let dir = std::env::temp_dir().join(format!("wmhcct-dir-entries-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // Enough entries, with long names, to take several system calls.
        for i in 0..2000 {
            std::fs::write(dir.join(format!("{i:04}-{}", "x".repeat(i % 200))), b"").unwrap();
        }
        std::fs::create_dir(dir.join("sub")).unwrap();
        let mut ours = names(&dir);
        ours.sort();
        let mut std_names: Vec<OsString> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        std_names.sort();
        assert_eq!(ours.len(), 2001);
        assert_eq!(ours, std_names);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(names(&dir).is_empty(), "a missing directory: nothing");
    }
}
