//! Inputs that are streams: `-` (standard input), a pipe (`<(ssh node cat
//! r.h5)`, `/dev/stdin` at the end of a pipeline), a FIFO.
//!
//! A report is read from its start three times (the kind is sniffed from its
//! first bytes, the seal hashes the whole file, libhdf5 seeks about in it),
//! which a stream cannot give: its first read takes the bytes for good, so
//! reading a report through a pipe used to end in a false "checksum
//! mismatch". A stream is therefore copied once, whole, into a temporary
//! regular file, which the readers use and which is deleted when the input
//! is dropped. Its first bytes are checked before the rest is copied, so a
//! stream that is neither a report nor a profile (`/dev/zero`, a terminal's
//! typing) is refused at once instead of filling the disk.
//!
//! Regular files and directories are used where they are.

use std::fs::File;
use std::io::{IsTerminal, Read, Write};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::input::{sniff, InputError};

/// The name that stands for standard input.
pub const STDIN: &str = "-";

/// Standard input was taken by an earlier input of this command.
static STDIN_TAKEN: AtomicBool = AtomicBool::new(false);

/// An input as a file that can be read from its start any number of times.
pub struct Input {
    path: PathBuf,
    /// The copy of a stream, deleted on drop.
    _copy: Option<tempfile::TempPath>,
}

impl Input {
    /// The regular file to read: the input's own path, or its copy.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// How messages name the input `path`.
pub fn name(path: &Path) -> String {
    if is_stdin(path) {
        "standard input".to_string()
    } else {
        path.display().to_string()
    }
}

/// Whether `path` names standard input.
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == STDIN
}

/// Refuse `-` named more than once among `inputs`, before any is read (a
/// command that would otherwise take the same path once).
pub fn stdin_once(inputs: &[PathBuf]) -> Result<(), InputError> {
    if inputs.iter().filter(|p| is_stdin(p)).count() > 1 {
        return Err(InputError::StdinTwice);
    }
    Ok(())
}

/// Check that every input that is not `-` exists, before any is opened:
/// opening a FIFO waits for its writer, and a later input's missing file
/// should not be found only after that wait. Returns the first missing
/// one's name with the error.
pub fn all_exist(inputs: &[&Path]) -> Result<(), (String, std::io::Error)> {
    for p in inputs.iter().filter(|p| !is_stdin(p)) {
        std::fs::metadata(p).map_err(|e| (name(p), e))?;
    }
    Ok(())
}

/// `path` as a file that can be read again: itself when it is a regular
/// file (or anything else that is not a stream), else a copy of the stream.
pub fn open(path: &Path) -> Result<Input, InputError> {
    if is_stdin(path) {
        if STDIN_TAKEN.swap(true, Ordering::Relaxed) {
            return Err(InputError::StdinTwice);
        }
        let stdin = std::io::stdin();
        if stdin.is_terminal() {
            return Err(InputError::StdinTerminal);
        }
        return copy(stdin.lock());
    }
    if streams(&std::fs::metadata(path)?) {
        return copy(File::open(path)?);
    }
    Ok(Input {
        path: path.to_path_buf(),
        _copy: None,
    })
}

/// Whether `path` names a stream (nothing to delete after a conversion).
pub fn is_stream(path: &Path) -> bool {
    is_stdin(path) || std::fs::metadata(path).is_ok_and(|m| streams(&m))
}

/// A file of this kind gives its bytes once: a FIFO or pipe, a character
/// device, a socket.
fn streams(meta: &std::fs::Metadata) -> bool {
    let t = meta.file_type();
    t.is_fifo() || t.is_char_device() || t.is_socket()
}

/// Copy a stream into a temporary file, once its first bytes show a report
/// or a profile.
fn copy(mut from: impl Read) -> Result<Input, InputError> {
    let mut head = Vec::with_capacity(8);
    (&mut from).take(8).read_to_end(&mut head)?;
    sniff(&head)?;
    let in_tmp = |e: std::io::Error| {
        let dir = std::env::temp_dir();
        InputError::Io(std::io::Error::new(
            e.kind(),
            format!("copying the stream into {} (TMPDIR): {e}", dir.display()),
        ))
    };
    let mut file = tempfile::Builder::new()
        .prefix("wmhcct-input-")
        .tempfile()
        .map_err(in_tmp)?;
    file.write_all(&head).map_err(in_tmp)?;
    // A read error is the stream's; a write error is the copy's.
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        file.write_all(&buf[..n]).map_err(in_tmp)?;
    }
    file.flush().map_err(in_tmp)?;
    Ok(Input {
        path: file.path().to_path_buf(),
        _copy: Some(file.into_temp_path()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_is_copied_whole_and_the_copy_goes_with_the_input() {
        let body: Vec<u8> = b"\x89HDF\r\n\x1a\n"
            .iter()
            .copied()
            .chain((0..100_000u32).map(|i| (i % 251) as u8))
            .collect();
        let input = copy(&body[..]).unwrap();
        let copy_path = input.path().to_path_buf();
        assert_eq!(std::fs::read(&copy_path).unwrap(), body);
        drop(input);
        assert!(!copy_path.exists(), "the copy is deleted with the input");
    }

    #[test]
    fn a_stream_of_something_else_is_refused_from_its_first_bytes() {
        // An endless stream of zeros: refused after 8 bytes, not copied.
        let zeros = std::io::repeat(0);
        assert!(matches!(copy(zeros), Err(InputError::Unrecognised)));
        assert!(matches!(copy(&b""[..]), Err(InputError::Empty)));
    }

    #[test]
    fn regular_files_are_read_where_they_are() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.h5");
        std::fs::write(&p, b"x").unwrap();
        let input = open(&p).unwrap();
        assert_eq!(input.path(), p);
        assert!(!is_stream(&p));
        assert!(is_stream(Path::new(STDIN)));
    }
}
