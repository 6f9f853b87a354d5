//! Standard output and standard error for the subcommands: the one way they write, so that a
//! full disk or a closed pipe never panics (`print!` does).
//!
//! A reader that goes away (`dvcq ring export | head -c1`: a broken pipe) ends the output
//! quietly: it has everything it wanted, and the command's exit status stays what its work
//! made it. Any other write error (`> /dev/full`) is an error, `cannot write output: ...`,
//! exit status 2.

use super::CliError;
use std::io::{ErrorKind, Write};

/// The command's output: standard output, or (for a benchmark) any writer.
#[derive(Debug)]
pub(crate) struct Output<W: Write = std::io::Stdout> {
    out: W,
    /// The reader went away: nothing more is written.
    closed: bool,
}

impl Output {
    /// Standard output.
    pub(crate) fn stdout() -> Self {
        Self::to(std::io::stdout())
    }
}

impl<W: Write> Output<W> {
    /// Output written to `out`.
    pub(crate) fn to(out: W) -> Self {
        Self { out, closed: false }
    }

    /// The reader went away: whatever is left to compute is wanted by nobody.
    pub(crate) fn closed(&self) -> bool {
        self.closed
    }

    /// The writer.
    pub(crate) fn get_ref(&self) -> &W {
        &self.out
    }

    /// Writes `text` as it is, and flushes it: a reader sees it at once.
    ///
    /// # Errors
    ///
    /// [`CliError`] when the output cannot be written (not for a reader that went away).
    pub(crate) fn write(&mut self, text: &str) -> Result<(), CliError> {
        if self.closed {
            return Ok(());
        }
        let done = self.out.write_all(text.as_bytes()).and_then(|()| self.out.flush());
        self.check(done)
    }

    /// Writes `line` and a newline.
    ///
    /// # Errors
    ///
    /// As [`Output::write`].
    pub(crate) fn line(&mut self, line: &str) -> Result<(), CliError> {
        let mut text = String::with_capacity(line.len() + 1);
        text.push_str(line);
        text.push('\n');
        self.write(&text)
    }

    fn check(&mut self, done: std::io::Result<()>) -> Result<(), CliError> {
        match done {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(())
            }
            Err(e) => Err(CliError(format!("cannot write output: {e}"))),
        }
    }
}

/// Writes one line to standard error. A message that cannot be written there has nowhere
/// else to go, so a failure is ignored (`eprintln!` would panic).
pub(crate) fn warn(line: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(line.as_bytes()).and_then(|()| err.write_all(b"\n"));
}
