//! Messages on stderr: allocation-free, so they are safe on every path,
//! including the abort path and inside allocator hooks.

/// Write `wmhcct: ` followed by the parts and a newline to stderr, in one
/// write when it fits a stack buffer.
pub fn message(parts: &[&str]) {
    let mut buf = [0u8; 1024];
    let mut n = 0;
    for part in [&"wmhcct: "].into_iter().chain(parts.iter()).chain([&"\n"]) {
        let b = part.as_bytes();
        let take = b.len().min(buf.len() - n);
        buf[n..n + take].copy_from_slice(&b[..take]);
        n += take;
    }
    if n == buf.len() {
        buf[n - 1] = b'\n';
    }
    // SAFETY: writing an initialised buffer to fd 2.
    unsafe {
        libc::write(2, buf.as_ptr().cast(), n);
    }
}
