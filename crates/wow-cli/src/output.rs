//! Standard output for the commands: a reader that went away (`wow events … | head`) ends
//! the output quietly instead of a panic.

use std::fmt::Display;
use std::io::{ErrorKind, Write};

/// Writes `text` and a newline to standard output. A closed pipe is not an error: the reader
/// has what it wanted. Any other write failure is reported on standard error.
pub(crate) fn emit(text: impl Display) {
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Ok(()) => {}
        Err(error) if error.kind() == ErrorKind::BrokenPipe => {}
        Err(error) => {
            // Standard error may be closed too; there is nowhere else to say it.
            let _ = writeln!(std::io::stderr(), "error: cannot write the output: {error}");
        }
    }
}

/// `println!` through [`emit`]: quiet on a closed pipe.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::emit(format_args!($($arg)*))
    };
}
pub(crate) use out;
