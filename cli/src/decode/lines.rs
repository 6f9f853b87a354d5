//! The input of the dump scanner as a window of lines read on demand.
//!
//! The scanner looks ahead a few lines (the rest of a dump) and never back past the dump it
//! is in, so only the lines from the current dump's start to its lookahead are held: memory
//! stays bounded by one dump, whatever the size of the log.
//!
//! Lines are split at LF, and a CRLF's CR is dropped, as `str::split('\n')` and
//! `strip_suffix('\r')` would do on the whole text (the text after the last LF is a line
//! too, empty when the input ends in LF). Bytes that are not UTF-8 read as U+FFFD, as
//! `String::from_utf8_lossy` would read the whole input.

use std::collections::VecDeque;
use std::io::{self, BufRead};
use std::rc::Rc;

/// The longest line kept, in bytes. No dump printer writes a line near this long; the bytes
/// of a longer line past it are not read as part of it (a file of CR-only line endings is
/// one such line, and is still named as such).
pub(crate) const MAX_LINE: usize = 4 << 20;

/// One input line with its 1-based number.
#[derive(Clone, Debug)]
pub(crate) struct Line {
    pub(crate) no: usize,
    pub(crate) text: Rc<str>,
    /// The 1-based byte column of the line's first byte that is not UTF-8 (read as U+FFFD).
    pub(crate) not_utf8: Option<usize>,
}

/// Lines of `R`, read when first asked for and forgotten once the scanner is past them.
pub(crate) struct Lines<R> {
    input: R,
    /// Lines `base..base + held.len()` (0-based indices).
    held: VecDeque<Line>,
    base: usize,
    /// No line follows the ones read.
    eof: bool,
    /// The last line read ended in LF (so one more, maybe empty, follows).
    after_lf: bool,
    /// Reused for each line's bytes.
    buf: Vec<u8>,
    /// Bytes read so far.
    bytes: u64,
    /// Some line held a character that is not whitespace.
    any_text: bool,
    /// The first line holding a carriage return (other than a CRLF's).
    first_cr: Option<usize>,
    /// The first NUL byte: its line and 1-based column.
    first_nul: Option<(usize, usize)>,
    /// The first byte that is not UTF-8: its line and 1-based column.
    first_not_utf8: Option<(usize, usize)>,
    /// The read error that ended the input early.
    error: Option<io::Error>,
}

impl<R: BufRead> Lines<R> {
    pub(crate) fn new(input: R) -> Self {
        Self {
            input,
            held: VecDeque::new(),
            base: 0,
            eof: false,
            after_lf: true,
            buf: Vec::new(),
            bytes: 0,
            any_text: false,
            first_cr: None,
            first_nul: None,
            first_not_utf8: None,
            error: None,
        }
    }

    /// Line `i` (0-based), reading up to it; `None` past the end of the input.
    pub(crate) fn get(&mut self, i: usize) -> Option<Line> {
        debug_assert!(i >= self.base, "line {i} was already dropped (window starts at {})", self.base);
        while self.base + self.held.len() <= i && !self.eof {
            self.read_line();
        }
        self.held.get(i.checked_sub(self.base)?).cloned()
    }

    /// The 1-based line `no`, if it is still held.
    pub(crate) fn by_number(&self, no: usize) -> Option<&Line> {
        self.held.get(no.checked_sub(1)?.checked_sub(self.base)?)
    }

    /// Forgets the lines before index `i`.
    pub(crate) fn drop_before(&mut self, i: usize) {
        while self.base < i && self.held.pop_front().is_some() {
            self.base += 1;
        }
    }

    /// Bytes read so far.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Whether every line read was blank.
    pub(crate) fn all_blank(&self) -> bool {
        !self.any_text
    }

    /// The first line holding a carriage return that does not end a CRLF.
    pub(crate) fn first_cr(&self) -> Option<usize> {
        self.first_cr
    }

    /// Where the first NUL byte is (line, 1-based column): text has none, binary files do.
    pub(crate) fn first_nul(&self) -> Option<(usize, usize)> {
        self.first_nul
    }

    /// Where the first byte that is not UTF-8 is (line, 1-based column): text has none.
    pub(crate) fn first_not_utf8(&self) -> Option<(usize, usize)> {
        self.first_not_utf8
    }

    /// The read error that ended the input, once.
    pub(crate) fn take_error(&mut self) -> Option<io::Error> {
        self.error.take()
    }

    /// Reads one line into the window (at most [`MAX_LINE`] bytes of it), or marks the end.
    fn read_line(&mut self) {
        self.buf.clear();
        let mut ended = false;
        let mut any = false;
        loop {
            let chunk = match self.input.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.error = Some(e);
                    self.eof = true;
                    break;
                }
            };
            if chunk.is_empty() {
                self.eof = true;
                break;
            }
            any = true;
            let (take, lf) = match memchr_lf(chunk) {
                Some(p) => (p + 1, true),
                None => (chunk.len(), false),
            };
            let body = &chunk[..take - usize::from(lf)];
            let room = MAX_LINE.saturating_sub(self.buf.len());
            self.buf.extend_from_slice(&body[..body.len().min(room)]);
            self.input.consume(take);
            self.bytes += take as u64;
            if lf {
                ended = true;
                break;
            }
        }
        if !any && !self.after_lf {
            return; // the input ended right after a line without LF
        }
        self.after_lf = ended;
        if !ended {
            self.eof = true;
        }
        let no = self.base + self.held.len() + 1;
        let raw = self.buf.strip_suffix(b"\r").unwrap_or(&self.buf);
        if self.first_nul.is_none() {
            if let Some(col) = raw.iter().position(|&b| b == 0) {
                self.first_nul = Some((no, col + 1));
            }
        }
        if self.first_cr.is_none() && raw.contains(&b'\r') {
            self.first_cr = Some(no);
        }
        let (text, not_utf8): (Rc<str>, _) = match std::str::from_utf8(raw) {
            Ok(t) => (Rc::from(t), None),
            Err(e) => (Rc::from(String::from_utf8_lossy(raw).as_ref()), Some(e.valid_up_to() + 1)),
        };
        if let (None, Some(col)) = (self.first_not_utf8, not_utf8) {
            self.first_not_utf8 = Some((no, col));
        }
        self.any_text |= !text.trim().is_empty();
        self.held.push_back(Line { no, text, not_utf8 });
    }
}

/// Position of the first LF in `b`.
fn memchr_lf(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'\n')
}
