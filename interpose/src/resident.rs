//! The process's resident memory (`VmHWM`, `VmRSS` from
//! `/proc/self/status`), read once when the profile is taken. No
//! allocation: the file is read into a buffer on the stack, so this also
//! serves the SIGTERM handler's profile.

use wmhcct_format::Resident;

/// `/proc/self/status` is about 1.5 KiB.
const BUF: usize = 8192;

/// The process's resident memory now, with the tracer's own heap peak; all
/// zero where `/proc` cannot be read.
pub fn now() -> Resident {
    let mut buf = [0u8; BUF];
    let saved = crate::errno::get();
    let n = read_status(&mut buf);
    crate::errno::set(saved);
    let text = &buf[..n];
    let peak = field_kib(text, b"VmHWM:").unwrap_or(0).saturating_mul(1024);
    Resident {
        peak_bytes: peak,
        end_bytes: if peak == 0 {
            0
        } else {
            field_kib(text, b"VmRSS:").unwrap_or(0).saturating_mul(1024)
        },
        tracer_peak_bytes: if peak == 0 {
            0
        } else {
            crate::own_heap::peak()
        },
    }
}

/// Read `/proc/self/status` into `buf`, else this thread's (its memory
/// figures are the process's; the process's entry, the main thread's, has
/// none once the main thread has ended before the others); the bytes read
/// (0 on failure).
fn read_status(buf: &mut [u8]) -> usize {
    let len = read_file(c"/proc/self/status", buf);
    if buf[..len].windows(6).any(|w| w == b"VmRSS:") {
        return len;
    }
    read_file(c"/proc/thread-self/status", buf)
}

/// Read the file at `path` into `buf`; the bytes read (0 on failure).
fn read_file(path: &std::ffi::CStr, buf: &mut [u8]) -> usize {
    // SAFETY: a NUL-terminated path; the descriptor is closed below.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return 0;
    }
    let mut len = 0;
    while len < buf.len() {
        // SAFETY: reads into the unfilled tail of `buf`.
        let r = unsafe { libc::read(fd, buf[len..].as_mut_ptr().cast(), buf.len() - len) };
        if r > 0 {
            len += r as usize;
        } else if r < 0 && crate::errno::get() == libc::EINTR {
            continue;
        } else {
            break;
        }
    }
    // SAFETY: `fd` was opened above and is not used again.
    unsafe { libc::close(fd) };
    len
}

/// The number of kibibytes on the line starting `name` (`VmHWM:   1234 kB`).
fn field_kib(text: &[u8], name: &[u8]) -> Option<u64> {
    let line = text.split(|&b| b == b'\n').find(|l| l.starts_with(name))?;
    let rest = line[name.len()..].trim_ascii_start();
    let end = rest
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(rest.len());
    if end == 0 {
        return None;
    }
    rest[..end].iter().try_fold(0u64, |v, &d| {
        v.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_parsed() {
        let text = b"Name:\tx\nVmPeak:\t  9999 kB\nVmHWM:\t    1234 kB\nVmRSS:\t     567 kB\n";
        assert_eq!(field_kib(text, b"VmHWM:"), Some(1234));
        assert_eq!(field_kib(text, b"VmRSS:"), Some(567));
        assert_eq!(field_kib(text, b"VmSwap:"), None);
        assert_eq!(field_kib(b"VmHWM:\tlots kB\n", b"VmHWM:"), None);
    }

    #[test]
    fn this_process_is_resident() {
        // Touch 8 MiB so that the peak is at least that.
        let v = vec![1u8; 8 << 20];
        std::hint::black_box(&v);
        let r = now();
        assert!(r.peak_bytes >= 8 << 20, "{r:?}");
        assert!(r.end_bytes > 0 && r.end_bytes <= r.peak_bytes, "{r:?}");
        // The test binary's allocations go through the tracer's allocator.
        assert!(r.tracer_peak_bytes >= 8 << 20, "{r:?}");
    }
}
