//! `say!`: one line to standard error that cannot stop the command.
//!
//! `eprintln!` panics when standard error cannot be written (closed, or
//! `2>/dev/full`), which would turn a finished merge or a `--max` verdict
//! into an abort. A message that cannot be shown is lost instead; the exit
//! status still tells.

/// `eprintln!` that ignores a standard error that cannot be written.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
