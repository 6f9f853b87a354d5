//! Finding CQE dumps in arbitrary text.
//!
//! Formats recognised: the table of printers and eras in the module docs of
//! [`crate::decode`]. In short:
//! * rdma-core libmlx5: `mlx5: <host>: got completion with error:` (or the debug build's
//!   `dump cqe for cqn 0x..:`, or the old kernel's `dump error cqe`) and four lines of four
//!   `%08x` words; DPDK's `Error cqe:` and four or eight lines of `%08X` words in host order;
//! * Linux `print_hex_dump(..., DUMP_PREFIX_OFFSET, 16, 1, ...)`: `%.8x: ` and sixteen `%02x`
//!   bytes a line, optionally after `cqe_dump: ` and a kernel log stamp;
//! * DPDK `rte_hexdump`: a `<title> at [<ptr>], len=<n>` line, then `%08X:` and sixteen
//!   ` %02X` bytes, ` | ` and an ASCII column; a title naming a CQ is a ring, one naming a CQE
//!   a single CQE;
//! * a bare 64-byte hex string on one line;
//! * irdma (with [`Vendor::Irdma`]): four or eight 64-bit qwords, `0x` optional; four or
//!   eight on a line may be printed without zero padding.
//!
//! The scanner works on bytes and only slices at ASCII positions, so no input can make it
//! panic.

use super::irdma::decode_irdma;
use super::lines::Lines;
use super::mlx5::{decode_mlx5, Mlx5Options};
use super::{Decoded, DumpFormat, Finding, Found, Problem, Report, ScanSummary, Vendor};
use std::io::{self, BufRead};
use std::ops::ControlFlow;

fn is_blank(s: &str) -> bool {
    s.trim().is_empty()
}

fn hexv(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|v| v as u8)
}

fn hex8(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at + 8)?;
    let mut v = 0u32;
    for &c in s {
        v = (v << 4) | hexv(c)? as u32;
    }
    Some(v)
}

fn word_boundary_before(b: &[u8], at: usize) -> bool {
    at == 0 || !(b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_')
}

/// Shortens a line for an error message.
fn excerpt(s: &str) -> String {
    let t: String = s.trim().chars().take(48).collect();
    if s.trim().chars().count() > 48 {
        format!("{t}...")
    } else {
        t
    }
}

/// Runs of `%08x` words separated by whitespace; the last word of a run may have text glued
/// to it.
fn word_runs(b: &[u8]) -> Vec<Vec<u32>> {
    let mut runs = Vec::new();
    let mut i = 0;
    while i + 8 <= b.len() {
        let first = match hex8(b, i) {
            Some(v) if word_boundary_before(b, i) => v,
            _ => {
                i += 1;
                continue;
            }
        };
        // The first word must stand alone (followed by whitespace or the end), else it is
        // part of a longer number or an offset such as `00000010:`.
        if i + 8 < b.len() && !b[i + 8].is_ascii_whitespace() {
            i += 8;
            continue;
        }
        let mut run = vec![first];
        let mut j = i + 8;
        loop {
            let mut k = j;
            while k < b.len() && b[k].is_ascii_whitespace() {
                k += 1;
            }
            if k == j {
                break;
            }
            // Glued text (or a longer number) after a word ends the run: the next turn
            // finds no whitespace there.
            match hex8(b, k) {
                Some(v) => {
                    run.push(v);
                    j = k + 8;
                }
                None => break,
            }
        }
        runs.push(run);
        i = j;
    }
    runs
}

/// A line of rdma-core words: four `%08x` words, anything before (log prefixes) and glued
/// text after. `strict` (no header seen) wants exactly four words on the line.
fn parse_words(s: &str, strict: bool) -> Option<[u32; 4]> {
    let runs = word_runs(s.as_bytes());
    let run = runs.iter().rev().find(|r| r.len() >= 4)?;
    if strict && (run.len() != 4 || runs.iter().filter(|r| r.len() >= 2).count() != 1) {
        return None;
    }
    let n = run.len();
    Some([run[n - 4], run[n - 3], run[n - 2], run[n - 1]])
}

/// Why a line expected to hold four words does not.
fn diagnose_words(s: &str) -> String {
    let b = s.as_bytes();
    for tok in s.split_ascii_whitespace() {
        let t = tok.as_bytes();
        let hexes = t.iter().filter(|c| c.is_ascii_hexdigit()).count();
        if t.len() == 8 && (5..8).contains(&hexes) {
            let off = tok.as_ptr() as usize - s.as_ptr() as usize;
            let (pos, &c) = t.iter().enumerate().find(|(_, c)| !c.is_ascii_hexdigit()).unwrap_or((0, &b'?'));
            let ch = if c.is_ascii_graphic() { (c as char).to_string() } else { format!("\\x{c:02x}") };
            return format!(
                "non-hex character '{ch}' at column {} in word '{}'",
                off + pos + 1,
                String::from_utf8_lossy(t)
            );
        }
    }
    let best = word_runs(b).iter().map(|r| r.len()).max().unwrap_or(0);
    if best > 0 {
        format!("found {best} hex word(s), expected 4 (\"{}\")", excerpt(s))
    } else {
        format!("expected 4 hex words, found \"{}\"", excerpt(s))
    }
}

/// A `print_hex_dump` or `rte_hexdump` line.
#[derive(Clone, Debug)]
struct OffLine {
    offset: u32,
    bytes: Vec<u8>,
    /// Has DPDK's ` | ` ASCII column.
    bar: bool,
    /// Upper-case hex letters seen.
    upper: bool,
    /// Lower-case hex letters seen.
    lower: bool,
    /// Why the line is malformed.
    bad: Option<String>,
}

/// Byte ranges of the whitespace-separated tokens of `b`.
fn token_spans(b: &[u8]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && !b[i].is_ascii_whitespace() {
            i += 1;
        }
        spans.push((start, i));
    }
    spans
}

/// The tokens after an offset, up to DPDK's ` | ` ASCII column: how many, how many are two
/// characters long, and whether the column follows.
#[derive(Clone, Copy, Default)]
struct Tail {
    tokens: usize,
    two: usize,
    bar: bool,
}

impl Tail {
    /// Whether bytes after an offset look like a hexdump line: mostly two-character tokens,
    /// and at least four of them unless DPDK's column follows.
    fn looks_like_bytes(self) -> bool {
        self.tokens > 0 && self.two * 2 >= self.tokens && (self.bar || self.two >= 4)
    }
}

/// An offset `hhhhhhhh:` ending the token `(start, end)` and followed by a space or tab: the
/// offset's start.
fn offset_at_token_end(b: &[u8], (start, end): (usize, usize)) -> Option<usize> {
    let at = end.checked_sub(9).filter(|&at| at >= start)?;
    let followed = matches!(b.get(end), Some(b' ' | b'\t'));
    (followed && b[end - 1] == b':' && word_boundary_before(b, at) && hex8(b, at).is_some()).then_some(at)
}

/// DPDK's ` | ` column separator: a lone `|` token with a space on either side.
fn is_bar(b: &[u8], (start, end): (usize, usize)) -> bool {
    end == start + 1 && b[start] == b'|' && start > 0 && b[start - 1] == b' ' && b.get(end) == Some(&b' ')
}

/// A `print_hex_dump` or `rte_hexdump` line: the leftmost `hhhhhhhh:` offset followed by
/// what looks like bytes.
///
/// Linear in the line's length: the line is split into tokens once, one pass from the right
/// counts, for every token, the tokens after it up to the next ` | `, and only the offset
/// chosen is parsed further. (Trying each offset in turn and splitting the rest of the line
/// each time took quadratic time on a line of many offsets.)
fn parse_offset_line(s: &str) -> Option<OffLine> {
    let b = s.as_bytes();
    if !b.contains(&b':') {
        return None;
    }
    let spans = token_spans(b);
    let mut tails = vec![Tail::default(); spans.len()];
    let mut after = Tail::default();
    for (k, &span) in spans.iter().enumerate().rev() {
        tails[k] = after;
        if is_bar(b, span) {
            after = Tail { tokens: 0, two: 0, bar: true };
        } else {
            after.tokens += 1;
            after.two += usize::from(span.1 - span.0 == 2);
        }
    }
    let (k, at) = spans.iter().enumerate().find_map(|(k, &span)| {
        offset_at_token_end(b, span).filter(|_| tails[k].looks_like_bytes()).map(|at| (k, at))
    })?;
    let tail = tails[k];
    let offset = hex8(b, at)?;
    let offtxt = &b[at..at + 8];
    let mut l = OffLine {
        offset,
        bytes: Vec::with_capacity(16),
        bar: tail.bar,
        upper: offtxt.iter().any(|c| c.is_ascii_uppercase()),
        lower: offtxt.iter().any(|c| c.is_ascii_lowercase()),
        bad: None,
    };
    for &(start, end) in &spans[k + 1..k + 1 + tail.tokens] {
        let tb = &b[start..end];
        match (tb.len(), hexv(tb[0]), tb.get(1).and_then(|&c| hexv(c))) {
            (2, Some(h), Some(lo)) => {
                l.upper |= tb.iter().any(|c| c.is_ascii_uppercase());
                l.lower |= tb.iter().any(|c| c.is_ascii_lowercase());
                l.bytes.push((h << 4) | lo);
            }
            _ => {
                l.bad.get_or_insert(format!(
                    "non-hex byte '{}' at column {}",
                    String::from_utf8_lossy(&tb[..tb.len().min(8)]),
                    start + 1
                ));
            }
        }
    }
    if l.bad.is_none() && tail.tokens > 16 {
        l.bad = Some(format!("{} bytes on one line, at most 16 expected", tail.tokens));
    }
    Some(l)
}

/// A DPDK `rte_hexdump` title line: `<title> at [<ptr>], len=<n>`. The length is `Err` with
/// the text after `len=` when that is not a byte count (`len=-64`, a number beyond `usize`).
fn parse_dpdk_title(s: &str) -> Option<(String, Result<usize, String>)> {
    let at = s.find(" at [")?;
    let close = s[at..].find("], len=")? + at;
    let rest = &s[close + 7..];
    let digits = &rest[..rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len())];
    let len = digits.parse().map_err(|_| excerpt(rest.split_ascii_whitespace().next().unwrap_or("")));
    Some((s[..at].trim().to_string(), len))
}

/// Bare 64-byte hex string: the whole line is hex digits and whitespace (an optional `0x`).
enum Bare {
    Ok([u8; 64]),
    Bad(String),
}

fn parse_bare(s: &str) -> Option<Bare> {
    let t = s.trim();
    let t = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")).unwrap_or(t);
    if t.is_empty() || !t.bytes().all(|c| c.is_ascii_hexdigit() || c == b' ' || c == b'\t') {
        return None;
    }
    let digits: Vec<u8> = t.bytes().filter_map(hexv).collect();
    if digits.len() == 128 {
        let mut out = [0u8; 64];
        for (o, p) in out.iter_mut().zip(digits.chunks_exact(2)) {
            *o = (p[0] << 4) | p[1];
        }
        return Some(Bare::Ok(out));
    }
    // Long all-hex lines that are not 64 bytes: a truncated or over-long bare dump. Shorter
    // ones (a line of four words, a number) are not reported.
    let tokens = t.split_ascii_whitespace().count();
    if digits.len() >= 80 && tokens != 4 {
        return Some(Bare::Bad(format!("bare hex string has {} hex digits, expected 128 (64 bytes)", digits.len())));
    }
    None
}

fn is_rdma_core_header(s: &str) -> bool {
    match s.find("mlx5: ") {
        Some(p) => s[p..].contains(": got completion with error:"),
        None => false,
    }
}

fn is_debug_header(s: &str) -> bool {
    s.contains("dump cqe for cqn 0x")
}

fn is_kernel_words_header(s: &str) -> bool {
    s.trim_end().ends_with("dump error cqe")
}

/// DPDK's `DRV_LOG(ERR, "Error cqe:")` (`mlx5_aso_dump_err_objs`, `mlx5_compress_dump_err_objs`),
/// after the log's `mlx5_net: ` or `mlx5_compress: ` and, in debug builds, file, line and
/// function.
fn is_dpdk_words_header(s: &str) -> bool {
    s.trim_end().ends_with("Error cqe:")
}

/// A header of words that are not a CQE: rdma-core's debug `dump wqe at <ptr>` (`dump_wqe`,
/// `providers/mlx5/qp.c`) and DPDK's `Error wqe:` and `Error opaq:`, which follow its
/// `Error cqe:` words.
fn is_other_words_header(s: &str) -> bool {
    let t = s.trim_end();
    t.ends_with("Error wqe:") || t.ends_with("Error opaq:") || t.contains("dump wqe at ")
}

/// What starts a new dump (used to detect a dump interrupted by another).
fn starts_dump(s: &str) -> bool {
    is_rdma_core_header(s)
        || is_debug_header(s)
        || is_kernel_words_header(s)
        || is_dpdk_words_header(s)
        || is_other_words_header(s)
        || parse_dpdk_title(s).is_some()
        || parse_offset_line(s).is_some()
}

/// What a DPDK `rte_hexdump` title names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DpdkTitle {
    /// A whole CQ ring (`MLX5 Error CQ:`, DPDK 19.08 on): its error CQEs are decoded.
    Ring,
    /// One CQE (`MLX5 Error CQE:` and `MLX5 CQE:`, debug builds of DPDK 17.11 to 19.05):
    /// 64 bytes, or a 128-byte CQE whose second half is the cqe64.
    Cqe,
    /// Anything else: send and receive queue WQEs (`MLX5 Error SQ:`, `MLX5 Error RQ:`,
    /// `MLX5 TXQ:`), or the CQ context a queue dump reads from the device (`Query CQ Dump:`).
    Other,
}

/// Classifies a title by its words (a prompt or program name before it is one more word).
fn dpdk_title_kind(title: &str) -> DpdkTitle {
    let mut words = title.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty());
    let (mut cq, mut cqe) = (false, false);
    for w in words.by_ref() {
        match w {
            "Query" => return DpdkTitle::Other,
            "CQ" => cq = true,
            "CQE" => cqe = true,
            _ => {}
        }
    }
    match (cqe, cq) {
        (true, _) => DpdkTitle::Cqe,
        (false, true) => DpdkTitle::Ring,
        (false, false) => DpdkTitle::Other,
    }
}

/// The problem to report instead of decoding a CQE of 64 zero bytes from a DPDK dump: DPDK
/// built with 128-byte cache lines (arm64's generic build) pads each CQE with 64 bytes before
/// its cqe64, and before 24.11 its single-CQE dumps took the padding for the CQE.
fn dpdk_padding_only(b: &[u8; 64]) -> Option<String> {
    b.iter().all(|&x| x == 0).then(|| {
        "the dump holds 64 zero bytes, not a CQE: DPDK built with 128-byte cache lines dumped the \
         padding before the cqe64 of a 128-byte CQE (releases before 24.11 did)"
            .to_string()
    })
}

/// The scanner over a window of lines; what it finds goes to `sink` in line order.
struct Scanner<R, F> {
    lines: Lines<R>,
    opts: ScanOptions,
    /// Found in the dump being read, not yet in line order with what follows.
    pending: Vec<Finding>,
    sink: F,
    summary: ScanSummary,
}

/// A DPDK `rte_hexdump` title before a hexdump.
#[derive(Clone, Copy, Debug)]
struct Title {
    /// Its 1-based line.
    line: usize,
    /// The length it announces, if it is readable.
    len: Option<usize>,
    /// It names one CQE, not a ring.
    single: bool,
}

/// How [`scan_with`] reads a dumped mlx5 CQ ring (a dump of more than one 64-byte CQE).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RingCqeSize {
    /// 128-byte slots when every slot's first half is zero and some second half is not, as
    /// in a ring DPDK built with 128-byte cache lines dumps; 64-byte CQEs otherwise.
    #[default]
    Auto,
    /// 64-byte CQEs.
    Bytes64,
    /// 128-byte slots, the cqe64 in each slot's second half (rdma-core `cqe + 64`).
    Bytes128,
}

/// Settings of [`scan_with`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ScanOptions {
    /// How a dumped mlx5 CQ ring is cut into CQEs. A dump of one 64-byte CQE is always that
    /// CQE: the kernel and rdma-core print the cqe64 of a 128-byte CQE alone.
    pub ring_cqe_size: RingCqeSize,
}

/// True when `bytes`, cut into 64-byte halves, looks like a ring of 128-byte CQEs: at least
/// one whole slot, every first half zero and some second half not. A 64-byte ring never
/// looks so: DPDK and rdma-core initialise every CQE's `op_own` (0xF1 or 0xF0), and a CQE
/// the device wrote names its QP.
fn zero_first_halves(bytes: &[u8]) -> bool {
    let halves: Vec<&[u8]> = bytes.chunks_exact(64).collect();
    let zero = |h: &&[u8]| h.iter().all(|&b| b == 0);
    halves.len() >= 2 && halves.iter().step_by(2).all(zero) && !halves.iter().skip(1).step_by(2).all(zero)
}

fn to64(bytes: &[u8]) -> Option<[u8; 64]> {
    bytes.try_into().ok()
}

/// The 64 bytes four rows of words print: each word a big-endian load (rdma-core's and the
/// kernel's `be32toh`/`be32_to_cpu`), or with `host_order` a plain load on a little-endian
/// host (DPDK's `Error cqe:` words print `volatile uint32_t` reads of the CQE).
fn words_to_bytes(rows: &[[u32; 4]], host_order: bool) -> [u8; 64] {
    let mut out = [0u8; 64];
    for (r, row) in rows.iter().enumerate().take(4) {
        for (w, word) in row.iter().enumerate() {
            let bytes = if host_order { word.to_le_bytes() } else { word.to_be_bytes() };
            out[r * 16 + w * 4..r * 16 + w * 4 + 4].copy_from_slice(&bytes);
        }
    }
    out
}

/// Added to a problem's reason when its line holds a carriage return.
const CR_NOTE: &str = "the line holds a carriage return: lines must end in LF or CRLF, not CR alone";

impl<R: BufRead, F: FnMut(Finding) -> ControlFlow<()>> Scanner<R, F> {
    /// The 1-based number of line index `i` (0 past the end, which callers never ask for).
    fn line_no(&mut self, i: usize) -> usize {
        self.lines.get(i).map_or(0, |l| l.no)
    }

    /// A problem at line `line`. Lines are split at LF (a CRLF's CR is dropped), so text with
    /// CR-only line endings is one long line, and a binary file's lines are not text: a
    /// reason reported on such a line says so.
    fn problem(&mut self, line: usize, format: Option<DumpFormat>, mut reason: String) {
        if let Some(l) = self.lines.by_number(line) {
            if let Some(col) = l.text.find('\0') {
                reason = format!("{reason} (the line is not text: a NUL byte at column {})", col + 1);
            } else if let Some(col) = l.not_utf8 {
                reason = format!("{reason} (the line is not text: bytes that are not UTF-8 at column {col})");
            } else if l.text.contains('\r') {
                reason = format!("{reason} ({CR_NOTE})");
            }
        }
        self.pending.push(Finding::Problem(Problem { line, format, reason }));
    }

    /// Hands the findings before line index `keep` to the sink in line order, and forgets the
    /// lines before it: nothing found later is reported before it. Stops the scan when the
    /// sink says so.
    fn commit(&mut self, keep: usize) -> ControlFlow<()> {
        let keep_no = keep + 1;
        if self.pending.iter().any(|f| f.line() < keep_no) {
            // Stable: in a line, CQEs before problems, and a ring's CQEs by slot.
            self.pending.sort_by_key(Finding::order);
            let later = self.pending.iter().position(|f| f.line() >= keep_no).unwrap_or(self.pending.len());
            let rest = self.pending.split_off(later);
            for f in std::mem::replace(&mut self.pending, rest) {
                match f {
                    Finding::Cqe(_) => self.summary.dumps += 1,
                    Finding::Problem(_) => self.summary.problems += 1,
                }
                if (self.sink)(f).is_break() {
                    self.summary.stopped = true;
                    return ControlFlow::Break(());
                }
            }
        }
        self.lines.drop_before(keep);
        ControlFlow::Continue(())
    }

    /// A decoded mlx5 CQE; `ring` is its slot and the ring's CQE size in a ring dump.
    fn found_mlx5(&mut self, line: usize, format: DumpFormat, ring: Option<(usize, u32)>, b: &[u8; 64]) {
        let opts = Mlx5Options { dpdk: format == DumpFormat::Dpdk };
        let (slot, ring_cqe_size) = ring.unzip();
        let cqe = Decoded::Mlx5(Box::new(decode_mlx5(b, opts)));
        self.pending.push(Finding::Cqe(Found { line, format, slot, ring_cqe_size, cqe }));
    }

    /// The CQE size of a dumped ring whose bytes are `bytes`: 64 for a dump of one CQE.
    fn ring_stride(&self, bytes: &[u8]) -> usize {
        match self.opts.ring_cqe_size {
            _ if bytes.len() <= 64 => 64,
            RingCqeSize::Bytes64 => 64,
            RingCqeSize::Bytes128 => 128,
            RingCqeSize::Auto if zero_first_halves(bytes) => 128,
            RingCqeSize::Auto => 64,
        }
    }

    /// Index of the next non-blank line at or after `i`.
    fn next_nonblank(&mut self, mut i: usize) -> usize {
        while self.lines.get(i).is_some_and(|l| is_blank(&l.text)) {
            i += 1;
        }
        i
    }

    /// Four lines of words after a header at index `h`. Returns the index to continue at.
    fn words_after_header(&mut self, h: usize, format: DumpFormat) -> usize {
        let hno = self.line_no(h);
        let mut rows = Vec::with_capacity(4);
        let mut i = h + 1;
        while rows.len() < 4 {
            i = self.next_nonblank(i);
            let Some(l) = self.lines.get(i) else {
                self.problem(
                    hno,
                    Some(format),
                    format!("truncated dump: {} of 4 lines of words before the end of the input", rows.len()),
                );
                return i;
            };
            if let Some(w) = parse_words(&l.text, false) {
                rows.push(w);
                i += 1;
                continue;
            }
            if starts_dump(&l.text) {
                self.problem(
                    hno,
                    Some(format),
                    format!(
                        "truncated dump: {} of 4 lines of words, then line {} starts another dump",
                        rows.len(),
                        l.no
                    ),
                );
                return i;
            }
            self.problem(
                l.no,
                Some(format),
                format!("line {} of the dump that starts at line {hno}: {}", rows.len() + 1, diagnose_words(&l.text)),
            );
            // The rest of this dump's lines belong to it, not to a new headerless dump.
            let mut left = 3 - rows.len();
            let mut j = i + 1;
            while left > 0 {
                let k = self.next_nonblank(j);
                match self.lines.get(k) {
                    Some(n) if !starts_dump(&n.text) && parse_words(&n.text, false).is_some() => {
                        j = k + 1;
                        left -= 1;
                    }
                    _ => break,
                }
            }
            return j;
        }
        let dpdk = format == DumpFormat::DpdkWords;
        if dpdk {
            // DPDK prints `sizeof` its error CQE: 128 bytes where it is built with 128-byte
            // cache lines (24.11 on), the cqe64 in the second half.
            if let Some((second, after)) = self.four_more_word_rows(i) {
                rows = second;
                i = after;
            }
        }
        let b = words_to_bytes(&rows, dpdk);
        match dpdk_padding_only(&b).filter(|_| dpdk) {
            Some(why) => self.problem(hno, Some(format), why),
            None => self.found_mlx5(hno, format, None, &b),
        }
        // A fifth line of words means the dump does not have the rdma-core shape.
        let mut j = self.next_nonblank(i);
        let mut extra = 0;
        while let Some(l) = self.lines.get(j) {
            if parse_words(&l.text, true).is_none() || starts_dump(&l.text) {
                break;
            }
            extra += 1;
            j = self.next_nonblank(j + 1);
        }
        if extra > 0 {
            let no = self.line_no(i);
            self.problem(
                no,
                Some(format),
                format!(
                    "wrong line count: {} lines of words after the header at line {hno}, expected 4 \
                     (the first 4 were decoded)",
                    4 + extra
                ),
            );
            return j;
        }
        i
    }

    /// Four more lines of words (no dump starting among them) from index `i` on, blank lines
    /// skipped, and the index after them.
    fn four_more_word_rows(&mut self, mut i: usize) -> Option<(Vec<[u32; 4]>, usize)> {
        let mut rows = Vec::with_capacity(4);
        while rows.len() < 4 {
            i = self.next_nonblank(i);
            let l = self.lines.get(i)?;
            if starts_dump(&l.text) {
                return None;
            }
            rows.push(parse_words(&l.text, false)?);
            i += 1;
        }
        Some((rows, i))
    }

    /// The lines of words after a header at index `h` whose words are not a CQE (a WQE
    /// dump): skipped. Returns the index after them.
    fn skip_words_after(&mut self, h: usize) -> usize {
        let mut i = h + 1;
        loop {
            let j = self.next_nonblank(i);
            match self.lines.get(j) {
                Some(l) if !starts_dump(&l.text) && parse_words(&l.text, false).is_some() => i = j + 1,
                _ => return i,
            }
        }
    }

    /// Headerless lines of words starting at index `s`.
    fn bare_words(&mut self, s: usize) -> usize {
        let mut rows: Vec<([u32; 4], usize)> = Vec::new();
        let mut i = s;
        while let Some(l) = self.lines.get(i) {
            match parse_words(&l.text, true) {
                Some(w) => {
                    rows.push((w, l.no));
                    i += 1;
                }
                // Blank lines inside the run are skipped; the run goes on if words follow.
                None if is_blank(&l.text) => i = self.next_nonblank(i),
                None => break,
            }
        }
        if rows.len() % 4 == 0 {
            for chunk in rows.chunks_exact(4) {
                let r: Vec<[u32; 4]> = chunk.iter().map(|c| c.0).collect();
                let b = words_to_bytes(&r, false);
                self.found_mlx5(chunk[0].1, DumpFormat::Words, None, &b);
            }
        } else if rows.len() > 1 {
            self.problem(
                rows[0].1,
                Some(DumpFormat::Words),
                format!("wrong line count: {} lines of 4 hex words without a header, expected 4 per CQE", rows.len()),
            );
        }
        // The caller starts at a line of words, so this is past it.
        i
    }

    /// A hexdump block (kernel or DPDK) starting at index `s`; `title` is a DPDK title seen
    /// just before.
    fn hexdump(&mut self, s: usize, title: Option<Title>) -> usize {
        let mut rows: Vec<(OffLine, usize)> = Vec::new();
        let mut i = s;
        let first_no = self.line_no(s);
        let mut bad: Option<(usize, String)> = None;
        while let Some(l) = self.lines.get(i) {
            let Some(o) = parse_offset_line(&l.text) else {
                if is_blank(&l.text) {
                    let j = self.next_nonblank(i);
                    if let Some(n) = self.lines.get(j) {
                        if let Some(o) = parse_offset_line(&n.text) {
                            // The next row of this dump (rows holds line `s` at least).
                            if o.offset as usize == rows.len() * 16 {
                                i = j;
                                continue;
                            }
                        }
                    }
                }
                break;
            };
            let expect = rows.len() * 16;
            if o.offset as usize != expect {
                if o.offset == 0 && !rows.is_empty() {
                    break; // a new dump starts
                }
                bad.get_or_insert((l.no, format!("offset {:#x} where {expect:#x} was expected", o.offset)));
            }
            if let Some(r) = &o.bad {
                bad.get_or_insert((l.no, r.clone()));
            }
            if rows.last().is_some_and(|(p, _)| p.bytes.len() != 16) {
                bad.get_or_insert((l.no, "a short line is followed by more bytes".into()));
            }
            rows.push((o, l.no));
            i += 1;
        }
        let dpdk_lines = rows.iter().filter(|(o, _)| o.bar).count();
        let mixed_case = rows.iter().any(|(o, _)| o.upper) && rows.iter().any(|(o, _)| o.lower);
        let is_dpdk = title.is_some() || dpdk_lines > 0;
        let format = if is_dpdk { DumpFormat::Dpdk } else { DumpFormat::Kernel };
        let start_no = title.map_or(first_no, |t| t.line);
        if dpdk_lines > 0 && dpdk_lines < rows.len() {
            bad.get_or_insert((
                first_no,
                "overlapping formats: DPDK rte_hexdump lines mixed with kernel print_hex_dump lines".into(),
            ));
        } else if mixed_case && !is_dpdk {
            bad.get_or_insert((first_no, "overlapping formats: upper- and lower-case hex mixed".into()));
        }
        if let Some((no, why)) = bad {
            self.problem(no, Some(format), format!("dump starting at line {start_no}: {why}"));
            return i;
        }
        let bytes: Vec<u8> = rows.iter().flat_map(|(o, _)| o.bytes.iter().copied()).collect();
        let have = bytes.len();
        // The bytes that make up the dump: what its title announces, if it says. What does
        // not fit is reported, and every whole CQE of the rest is still decoded.
        let announced = title.and_then(|t| t.len);
        let usable = announced.map_or(have, |len| len.min(have));
        let single = title.is_some_and(|t| t.single);
        // 64-byte CQEs, or 128-byte ones whose second half is the cqe64; a title naming one
        // CQE announces its size.
        let stride = match announced {
            Some(128) if single => 128,
            _ if single => 64,
            _ => self.ring_stride(bytes.get(..usable).unwrap_or_default()),
        };
        let whole = if single { (usable / stride).min(1) } else { usable / stride };
        // A ring dump (DPDK dumps the whole CQ) shows its error CQEs only.
        let slots = if single { 1 } else { announced.map_or(whole, |len| len / stride).max(whole) };
        // Each whole CQE's cqe64, and whether it is an error CQE (opcode 13 or 14).
        let cqes: Vec<([u8; 64], bool)> = bytes
            .chunks_exact(stride)
            .take(whole)
            .filter_map(|c| to64(c.get(stride - 64..)?))
            .map(|b| (b, matches!(b[63] >> 4, 13 | 14)))
            .collect();
        let errors = cqes.iter().filter(|c| c.1).count();
        let mut reported = false;
        if let Some(len) = announced.filter(|&len| len != have) {
            let why = if have < len {
                format!("truncated dump: {have} of the {len} bytes its title announces")
            } else {
                format!("dump longer than announced: {have} bytes where its title announces {len}")
            };
            // Say what became of the bytes that are kept: a single CQE is decoded, a ring dump
            // is searched for its error CQEs, and "decoded" would claim output there is none of.
            let kept = match (whole, slots) {
                (0, _) => String::new(),
                (_, 1) => format!(" (the first {} decoded)", whole * stride),
                (_, _) if errors == 0 => {
                    format!(" (the first {} searched: no error CQE, opcode 13 or 14)", whole * stride)
                }
                (_, _) => {
                    let s = if errors == 1 { "" } else { "s" };
                    format!(" (the first {} searched: {errors} error CQE{s})", whole * stride)
                }
            };
            self.problem(start_no, Some(format), format!("{why}{kept}"));
            reported = true;
        }
        if whole == 0 {
            if !reported {
                self.problem(
                    start_no,
                    Some(format),
                    format!(
                        "truncated dump: {usable} bytes, less than one {stride}-byte CQE ({} lines of 16)",
                        stride / 16
                    ),
                );
            }
            return i;
        }
        if single && usable > stride && !reported {
            self.problem(
                start_no,
                Some(format),
                format!(
                    "dump longer than one {stride}-byte CQE: {usable} bytes, the last {} not decoded",
                    usable - stride
                ),
            );
            reported = true;
        } else if usable % stride != 0 && !reported {
            let cqes =
                if whole == 1 { format!("one {stride}-byte CQE") } else { format!("{whole} {stride}-byte CQEs") };
            self.problem(
                start_no,
                Some(format),
                format!("dump longer than {cqes}: {usable} bytes, the last {} not decoded", usable % stride),
            );
            reported = true;
        }
        let mut any = false;
        for (k, (b, error)) in cqes.iter().enumerate() {
            if slots == 1 || *error {
                // A ring's CQE is reported at its slot's first row.
                let no = if slots == 1 { start_no } else { rows.get(k * stride / 16).map_or(start_no, |r| r.1) };
                if let Some(why) = dpdk_padding_only(b).filter(|_| single && stride == 64) {
                    self.problem(no, Some(format), why);
                    reported = true;
                    continue;
                }
                self.found_mlx5(no, format, (slots > 1).then_some((k, stride as u32)), b);
                any = true;
            }
        }
        if !any && !reported {
            self.problem(
                start_no,
                Some(format),
                format!("ring dump of {slots} {stride}-byte CQEs holds no error CQE (opcode 13 or 14)"),
            );
        }
        i
    }

    /// A DPDK title line at index `t`.
    fn dpdk_title(&mut self, t: usize, title: String, len: Result<usize, String>) -> usize {
        let no = self.line_no(t);
        let j = self.next_nonblank(t + 1);
        let has_rows = self.lines.get(j).is_some_and(|l| parse_offset_line(&l.text).is_some());
        // Only the CQ ring and single CQEs are CQEs; DPDK also dumps the SQ/RQ WQEs and the CQ
        // context, and those are skipped.
        let kind = dpdk_title_kind(&title);
        if kind == DpdkTitle::Other {
            let mut i = j;
            while self.lines.get(i).is_some_and(|l| parse_offset_line(&l.text).is_some()) {
                i += 1;
            }
            // Past the title: `j` is.
            return i;
        }
        let len = match len {
            Ok(len) => Some(len),
            Err(text) => {
                let then = if has_rows { "; its lines are decoded as they stand" } else { "" };
                self.problem(
                    no,
                    Some(DumpFormat::Dpdk),
                    format!("malformed title: len={text} is not a byte count{then}"),
                );
                None
            }
        };
        if !has_rows {
            if let Some(len) = len {
                self.problem(
                    no,
                    Some(DumpFormat::Dpdk),
                    format!("truncated dump: title announces {len} bytes, no hexdump lines follow"),
                );
            }
            return t + 1;
        }
        self.hexdump(j, Some(Title { line: no, len, single: kind == DpdkTitle::Cqe }))
    }

    fn run_mlx5(&mut self) {
        let mut i = 0;
        loop {
            // What the lines before `i` held is handed over before line `i` is waited for:
            // a live log's last dump is printed without waiting for the next line.
            if self.commit(i).is_break() {
                return;
            }
            let Some(l) = self.lines.get(i) else { break };
            let t = &*l.text;
            if is_blank(t) {
                i += 1;
            } else if is_rdma_core_header(t) {
                i = self.words_after_header(i, DumpFormat::RdmaCore);
            } else if is_debug_header(t) {
                i = self.words_after_header(i, DumpFormat::RdmaCoreDebug);
            } else if is_dpdk_words_header(t) {
                i = self.words_after_header(i, DumpFormat::DpdkWords);
            } else if is_other_words_header(t) {
                i = self.skip_words_after(i);
            } else if is_kernel_words_header(t) {
                let j = self.next_nonblank(i + 1);
                if self.lines.get(j).is_some_and(|n| parse_offset_line(&n.text).is_some()) {
                    i = self.hexdump(j, None);
                } else {
                    i = self.words_after_header(i, DumpFormat::KernelWords);
                }
            } else if let Some((title, len)) = parse_dpdk_title(t) {
                i = self.dpdk_title(i, title, len);
            } else if parse_offset_line(t).is_some() {
                i = self.hexdump(i, None);
            } else if let Some(bare) = parse_bare(t) {
                match bare {
                    Bare::Ok(b) => self.found_mlx5(l.no, DumpFormat::BareHex, None, &b),
                    Bare::Bad(why) => self.problem(l.no, Some(DumpFormat::BareHex), why),
                }
                i += 1;
            } else if parse_words(t, true).is_some() {
                i = self.bare_words(i);
            } else {
                i += 1;
            }
        }
    }

    /// irdma qwords: a line of 4 or 8 qwords is one CQE; consecutive lines of 1 to 3 qwords
    /// (`%016llx` one or two a line) join into one CQE of 4 or 8. Anything else is reported
    /// at its own line, and the CQEs around it still decode.
    fn run_irdma(&mut self) {
        // Lines of fewer than 4 qwords waiting to make up a CQE: their qwords, first and last line.
        let mut part: Vec<u64> = Vec::new();
        let mut part_lines = (0, 0);
        let mut i = 0;
        loop {
            // The short lines gathered are reported at their first line.
            let keep = if part.is_empty() { i } else { part_lines.0 - 1 };
            if self.commit(keep).is_break() {
                return;
            }
            let Some(l) = self.lines.get(i) else { break };
            i += 1;
            let q = match qword_line(&l.text) {
                QLine::Ok(q) => q,
                QLine::Bad(why) => {
                    self.flush_irdma_part(&mut part, part_lines);
                    self.problem(l.no, Some(DumpFormat::IrdmaQwords), why);
                    continue;
                }
                QLine::None => {
                    self.flush_irdma_part(&mut part, part_lines);
                    continue;
                }
            };
            match q.len() {
                1..=3 => {
                    if part.is_empty() {
                        part_lines.0 = l.no;
                    }
                    part_lines.1 = l.no;
                    part.extend_from_slice(&q);
                }
                4 | 8 => {
                    self.flush_irdma_part(&mut part, part_lines);
                    self.found_irdma(l.no, &q);
                }
                n => {
                    self.flush_irdma_part(&mut part, part_lines);
                    self.problem(
                        l.no,
                        Some(DumpFormat::IrdmaQwords),
                        format!("{n} qwords on one line, expected 4 or 8 per CQE"),
                    );
                }
            }
        }
        self.flush_irdma_part(&mut part, part_lines);
    }

    /// Decodes the qwords gathered from short lines `first..=last`, or reports them.
    fn flush_irdma_part(&mut self, part: &mut Vec<u64>, (first, last): (usize, usize)) {
        match part.len() {
            0 => return,
            4 | 8 => self.found_irdma(first, part),
            n => {
                let lines = if first == last { String::new() } else { format!(" (lines {first} to {last})") };
                self.problem(
                    first,
                    Some(DumpFormat::IrdmaQwords),
                    format!("found {n} qwords{lines}, expected 4 or 8 per CQE"),
                );
            }
        }
        part.clear();
    }

    /// Hands over what is left, and says why nothing was found in text that holds NUL bytes
    /// (a binary file) or carriage returns that end no CRLF (CR-only line endings).
    fn finish(&mut self) {
        if self.commit(usize::MAX - 1).is_break() {
            return;
        }
        if self.summary.dumps == 0 && self.summary.problems == 0 {
            let not_text = |no: usize, what: String| {
                Some((
                    no,
                    format!("no CQE dump found: the input is not text ({what}); decode reads logs and other text"),
                ))
            };
            // A binary file: NUL bytes, or bytes that are not UTF-8 (whose CRs end no line).
            let why = match (self.lines.first_nul(), self.lines.first_not_utf8(), self.lines.first_cr()) {
                (Some((no, col)), _, _) => not_text(no, format!("a NUL byte at line {no}, column {col}")),
                (None, Some((no, col)), _) => {
                    not_text(no, format!("bytes that are not UTF-8 at line {no}, column {col}"))
                }
                (None, None, Some(no)) => Some((no, format!("no CQE dump found; {CR_NOTE}"))),
                (None, None, None) => None,
            };
            if let Some((line, reason)) = why {
                self.pending.push(Finding::Problem(Problem { line, format: None, reason }));
                let _ = self.commit(usize::MAX - 1);
            }
        }
    }

    fn found_irdma(&mut self, line: usize, q: &[u64]) {
        self.pending.push(Finding::Cqe(Found {
            line,
            format: DumpFormat::IrdmaQwords,
            slot: None,
            ring_cqe_size: None,
            cqe: Decoded::Irdma(Box::new(decode_irdma(q))),
        }));
    }
}

/// What a token of an irdma line is.
enum QToken {
    /// A qword: 16 hex digits.
    Qword(u64),
    /// A number printed without zero padding: `0x` and 1 to 15 hex digits, no leading zero
    /// (`0x%llx`), or a bare `0` (what `%#llx` prints for zero). A qword only on a line that
    /// ends in exactly 4 or 8 numbers; see [`qword_line`].
    Unpadded { value: u64, prefixed: bool },
    /// Meant as a qword but not one (`strong`: close to 16 hex digits, so wrong wherever it
    /// stands; otherwise a `0x` number, wrong on a line of qwords).
    Bad { why: String, strong: bool },
    /// Some other word.
    Other,
}

/// One token: `0x` optional, a trailing `,` or `;` ignored. `col` is its 1-based column.
fn qword_token(tok: &str, col: usize) -> QToken {
    let t = tok.trim_end_matches([',', ';']);
    if t == "0" {
        return QToken::Unpadded { value: 0, prefixed: false };
    }
    let (body, prefixed) = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(b) => (b, true),
        None => (t, false),
    };
    let digits = body.chars().filter(char::is_ascii_hexdigit).count();
    let len = body.chars().count();
    if len == 16 && digits == 16 {
        return u64::from_str_radix(body, 16).map_or(QToken::Other, QToken::Qword);
    }
    // printf prints no leading zero without padding, so `0x00ab` is a qword cut short.
    if prefixed && (1..16).contains(&len) && digits == len && (body == "0" || !body.starts_with('0')) {
        if let Ok(value) = u64::from_str_radix(body, 16) {
            return QToken::Unpadded { value, prefixed };
        }
    }
    let strong = (12..=20).contains(&len) && digits >= 12;
    if !strong && !prefixed {
        return QToken::Other;
    }
    let why = match body.chars().find(|c| !c.is_ascii_hexdigit()) {
        Some(c) => format!("non-hex character '{}'", c.escape_debug()),
        None => format!("{digits} hex digits, a qword has 16"),
    };
    QToken::Bad { why: format!("qword '{}' at column {col}: {why}", excerpt(t)), strong }
}

/// What an irdma line holds.
enum QLine {
    /// No qwords.
    None,
    /// These qwords.
    Ok(Vec<u64>),
    /// A token meant as a qword is not one.
    Bad(String),
}

/// A line holding 64-bit qwords (`%016llx`, optional `0x`, optional trailing `,`). A token
/// that is close to a qword but not one makes the line bad, as does a `0x` number that is not
/// 16 digits on a line that holds qwords.
///
/// Qwords printed without zero padding (`0x%llx`, or `%#llx`, which prints zero as `0`) are
/// read too, but only as a whole CQE: the line ends in exactly 4 or 8 numbers, at least one
/// of them written with `0x`, after any label. Short numbers are common in prose, so they are
/// not joined across lines, and `0 0 0 0` is not a CQE.
fn qword_line(s: &str) -> QLine {
    // Each token with its 1-based column and what it is.
    let mut toks: Vec<(usize, &str, QToken)> = Vec::new();
    for (start, end) in token_spans(s.as_bytes()) {
        // Token boundaries are ASCII whitespace, so the slice is on char boundaries.
        let Some(tok) = s.get(start..end) else { continue };
        toks.push((start + 1, tok, qword_token(tok, start + 1)));
    }
    let number = |t: &QToken| matches!(t, QToken::Qword(_) | QToken::Unpadded { .. });
    let run = toks.iter().rev().take_while(|t| number(&t.2)).count();
    let (label, numbers) = toks.split_at(toks.len() - run);
    let prefixed_short = |t: &QToken| matches!(t, QToken::Unpadded { prefixed: true, .. });
    let unpadded_cqe = matches!(run, 4 | 8)
        && numbers.iter().any(|t| prefixed_short(&t.2))
        && !label.iter().any(|t| prefixed_short(&t.2) || matches!(t.2, QToken::Bad { .. }));
    if unpadded_cqe {
        let value = |t: &(usize, &str, QToken)| match t.2 {
            QToken::Qword(v) | QToken::Unpadded { value: v, .. } => v,
            _ => 0,
        };
        return QLine::Ok(numbers.iter().map(value).collect());
    }
    let mut out = Vec::new();
    let mut bad: Option<String> = None;
    let mut weak: Option<String> = None;
    for (col, tok, t) in toks {
        match t {
            QToken::Qword(v) => out.push(v),
            QToken::Bad { why, strong: true } => {
                bad.get_or_insert(why);
            }
            QToken::Bad { why, strong: false } => {
                weak.get_or_insert(why);
            }
            QToken::Unpadded { prefixed: true, .. } => {
                weak.get_or_insert_with(|| {
                    let t = tok.trim_end_matches([',', ';']);
                    format!(
                        "qword '{}' at column {col}: {} hex digits, a qword has 16 (numbers without zero \
                         padding are read only as a line that ends in exactly 4 or 8 of them)",
                        excerpt(t),
                        t.len() - 2
                    )
                });
            }
            QToken::Unpadded { prefixed: false, .. } | QToken::Other => {}
        }
    }
    match (bad, weak, out.is_empty()) {
        (Some(why), _, _) | (None, Some(why), false) => QLine::Bad(why),
        (None, _, true) => QLine::None,
        (None, _, false) => QLine::Ok(out),
    }
}

/// Scans `text` for CQE dumps of `vendor`'s formats, with the default [`ScanOptions`].
pub fn scan(text: &str, vendor: Vendor) -> Report {
    scan_with(text, vendor, ScanOptions::default())
}

/// Scans `text` for CQE dumps of `vendor`'s formats.
pub fn scan_with(text: &str, vendor: Vendor, opts: ScanOptions) -> Report {
    let mut report = Report::default();
    let collect = |f: Finding| {
        match f {
            Finding::Cqe(d) => report.dumps.push(d),
            Finding::Problem(p) => report.problems.push(p),
        }
        ControlFlow::Continue(())
    };
    // Reading a byte slice cannot fail.
    let _ = scan_stream(text.as_bytes(), vendor, opts, collect);
    report
}

/// Scans `input` for CQE dumps of `vendor`'s formats as it reads it, handing each CQE and
/// each problem to `sink` as soon as the dump it is in has been read, in line order (the
/// order of [`scan_with`]'s report, CQEs before problems of the same line). Memory stays
/// bounded by one dump and one line of at most 4 MiB, whatever the input's size: a
/// longer line is read as its first 4 MiB.
///
/// `sink` returning [`ControlFlow::Break`] stops the scan (a reader that went away).
///
/// # Errors
///
/// The [`io::Error`] that ended reading the input. What was found before it has been
/// handed to `sink` already.
pub fn scan_stream<R, F>(input: R, vendor: Vendor, opts: ScanOptions, sink: F) -> io::Result<ScanSummary>
where
    R: BufRead,
    F: FnMut(Finding) -> ControlFlow<()>,
{
    let mut s = Scanner { lines: Lines::new(input), opts, pending: Vec::new(), sink, summary: ScanSummary::default() };
    match vendor {
        Vendor::Mlx5 => s.run_mlx5(),
        Vendor::Irdma => s.run_irdma(),
    }
    if !s.summary.stopped {
        s.finish();
    }
    s.summary.bytes = s.lines.bytes();
    s.summary.blank = s.lines.all_blank();
    match s.lines.take_error() {
        Some(e) => Err(e),
        None => Ok(s.summary),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_lines() {
        assert_eq!(parse_words("00000000 00008716 0a001f8e 000027d2", true), Some([0, 0x8716, 0x0a001f8e, 0x27d2]));
        assert_eq!(
            parse_words("Jan 1 host app[12]: 00000000 00008716 0a001f8e 000027d2completion", false),
            Some([0, 0x8716, 0x0a001f8e, 0x27d2])
        );
        assert_eq!(parse_words("00000010: 00 00 00 00 00 00 00 00", false), None);
        assert!(diagnose_words("0000000g 00000000 00000000 00000000").contains("non-hex character 'g'"));
    }

    #[test]
    fn offset_lines() {
        let k =
            parse_offset_line("[ 12.5] cqe_dump: 00000030: 00 00 00 00 00 00 88 13 0a 00 12 34 00 2a 00 d2").unwrap();
        assert_eq!(k.offset, 0x30);
        assert_eq!(k.bytes.len(), 16);
        assert!(!k.bar);
        let d =
            parse_offset_line("00000000: 00 00 00 00 73 65 65 6E 00 00 00 00 00 00 00 00 | ....seen........").unwrap();
        assert!(d.bar && d.upper);
        assert_eq!(d.bytes[7], 0x6e);
        // A `|` that opens the line has no space before it: no column separator (and no
        // read before the line's start).
        let b = parse_offset_line("| 00000000: 00 11 22 33 44 55 66 77 88 99 aa bb cc dd ee ff").unwrap();
        assert!(!b.bar && b.bytes.len() == 16);
        assert!(!is_bar(b"| 00", (0, 1)) && is_bar(b"0 | 0", (2, 3)));
    }

    #[test]
    fn titles() {
        assert_eq!(
            parse_dpdk_title("MLX5 Error CQ: at [0x17fe00000], len=1024"),
            Some(("MLX5 Error CQ:".into(), Ok(1024)))
        );
        let len = |s: &str| parse_dpdk_title(s).map(|t| t.1);
        assert_eq!(len("CQ: at [0x1], len=-64"), Some(Err("-64".into())));
        assert_eq!(
            len("CQ: at [0x1], len=1000000000000000000000000000000"),
            Some(Err("1000000000000000000000000000000".into()))
        );
        assert_eq!(len("CQ: at [0x1], len="), Some(Err(String::new())));
    }
}
