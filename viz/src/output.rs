//! Writing a command's result to stdout (a closed pipe is fine) or a file.

use std::io::Write;
use std::path::Path;

use anyhow::{Context as _, Result};

pub fn emit(text: &str, file: Option<&Path>) -> Result<()> {
    if let Some(f) = file {
        return std::fs::write(f, text).with_context(|| f.display().to_string());
    }
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(()),
        // `wmhcct … | head` is fine.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(e).context("<stdout>"),
    }
}
