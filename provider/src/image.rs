//! Ring images (the format is docs/ring-image.md): the vendor-neutral text container — the
//! `ring` line, `qp` lines and one hex line per slot — and the canonical completion lines a
//! decode prints. Vendor crates interpret the words and the slot bytes.

use crate::completion::Completion;
use crate::fault::FaultKind;
use std::fmt::Write as _;

/// Which hardware family an image holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageVendor {
    /// ConnectX (`cqe_size` 64 or 128).
    Mlx5,
    /// E810/X722 (`cqe_size` 32 or 64).
    Irdma,
}

/// A parse error with the 1-based line it was found on (0 when not tied to a line, and then
/// shown without one).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}{msg}", line_prefix(.line))]
pub struct ImageError {
    /// 1-based line number.
    pub line: usize,
    /// What was wrong.
    pub msg: String,
}

/// `line N: `, or nothing for line 0.
fn line_prefix(line: &usize) -> String {
    if *line == 0 {
        String::new()
    } else {
        format!("line {line}: ")
    }
}

impl ImageError {
    /// An error at `line`.
    pub fn new(line: usize, msg: impl Into<String>) -> Self {
        Self { line, msg: msg.into() }
    }
}

/// One `qp` line: its line number and words (`key=value`, or a bare flag like `ud`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QpWords {
    /// 1-based line number.
    pub line: usize,
    /// Words in order.
    pub words: Vec<(String, Option<String>)>,
}

impl QpWords {
    /// The words as borrowed pairs.
    pub fn pairs(&self) -> Vec<(&str, Option<&str>)> {
        self.words.iter().map(|(k, v)| (k.as_str(), v.as_deref())).collect()
    }
}

/// A parsed image container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawImage {
    /// Line of the `ring` line.
    pub ring_line: usize,
    /// The `ring` line's `key=value` words (unknown keys kept, for vendor parsers).
    pub ring_words: Vec<(String, String)>,
    /// Bytes per slot.
    pub cqe_size: u32,
    /// Slots.
    pub entries: u32,
    /// The running consumer counter.
    pub ci: u32,
    /// Which family (from `vendor=` or the slot size).
    pub vendor: ImageVendor,
    /// The `qp` lines, in order.
    pub qps: Vec<QpWords>,
    /// Lines of other kinds between the `ring` line and the first slot line (a word, then
    /// `key=value` words or flags): a vendor's extensions, which its parser reads and
    /// refuses when it does not know the kind, as a reader that predates them does.
    pub lines: Vec<ExtLine>,
    /// `entries * cqe_size` bytes, slot 0 first, in memory order.
    pub slots: Vec<u8>,
}

/// A line of another kind than `ring`, `qp` or a slot: its kind (the first word), line
/// number and words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtLine {
    /// The first word.
    pub kind: String,
    /// The line's number and words.
    pub words: QpWords,
}

impl RawImage {
    /// The value of a `ring` line word.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.ring_words.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// The `ring` line's words as borrowed pairs.
    pub fn ring_pairs(&self) -> Vec<(&str, &str)> {
        self.ring_words.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
    }
}

/// A decimal (`hex = false`) or hexadecimal (`0x` optional) number: digits only (Rust's own
/// integer parsing also takes a leading `+`, which the format does not have).
pub fn parse_num(v: &str, hex: bool) -> Option<u32> {
    parse_num_checked(v, hex).ok()
}

/// Why a word's value is not a number of its field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumError {
    /// Not digits (of the radix).
    NotANumber,
    /// Digits, but more than the field's 32 bits hold.
    OutOfRange,
}

/// [`parse_num`], saying why a value is not a number.
///
/// # Errors
///
/// [`NumError`].
pub fn parse_num_checked(v: &str, hex: bool) -> Result<u32, NumError> {
    let (digits, radix) =
        if hex { (v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")).unwrap_or(v), 16) } else { (v, 10) };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err(NumError::NotANumber);
    }
    u32::from_str_radix(digits, radix).map_err(|_| NumError::OutOfRange)
}

/// A `key=value` word whose value is not a number of its field: which word, and why. Its
/// message is `key=v is not a decimal number`, or `key=v is out of range: 0 to 4294967295`
/// (`0x0 to 0xffffffff` for a hex field).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{key}={value} {}", self.why())]
pub struct NumWordError {
    /// The word's key.
    pub key: String,
    /// Its value as written.
    pub value: String,
    /// Whether the field is hex.
    pub hex: bool,
    /// Why it is not a number of the field.
    pub kind: NumError,
}

impl NumWordError {
    fn why(&self) -> String {
        match (self.kind, self.hex) {
            (NumError::NotANumber, false) => "is not a decimal number".into(),
            (NumError::NotANumber, true) => "is not a hex number".into(),
            (NumError::OutOfRange, false) => format!("is out of range: 0 to {}", u32::MAX),
            (NumError::OutOfRange, true) => format!("is out of range: 0x0 to {:#x}", u32::MAX),
        }
    }
}

/// The value of word `key=v` as a number (`hex` as in [`parse_num`]).
///
/// # Errors
///
/// [`NumWordError`]: the word and why its value is not a number of the field.
pub fn num_word(key: &str, v: &str, hex: bool) -> Result<u32, NumWordError> {
    parse_num_checked(v, hex).map_err(|kind| NumWordError { key: key.into(), value: v.into(), hex, kind })
}

fn hex_nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Parses the ring line's common words and decides the vendor (docs/ring-image.md: `vendor`
/// defaults to mlx5 for 64/128-byte CQEs; 32 implies irdma).
fn ring_header(words: &[(String, String)], line: usize) -> Result<(u32, u32, u32, ImageVendor), ImageError> {
    let get = |k: &str| words.iter().find(|(kk, _)| kk == k).map(|(_, v)| v.as_str());
    let num = |k: &str| -> Result<u32, ImageError> {
        let v = get(k).ok_or_else(|| ImageError::new(line, format!("ring line lacks {k}=")))?;
        num_word(k, v, false).map_err(|e| ImageError::new(line, e.to_string()))
    };
    let cqe_size = num("cqe_size")?;
    let entries = num("entries")?;
    let ci = num("ci")?;
    let vendor = match (get("vendor"), cqe_size) {
        (Some("mlx5"), 64 | 128) | (None, 64 | 128) => ImageVendor::Mlx5,
        (Some("irdma"), 32 | 64) | (None, 32) => ImageVendor::Irdma,
        (Some(v @ ("mlx5" | "irdma")), s) => {
            return Err(ImageError::new(
                line,
                format!("cqe_size={s} is not a {v} CQE size (mlx5: 64, 128; irdma: 32, 64)"),
            ))
        }
        (Some(v), _) => return Err(ImageError::new(line, format!("vendor={v}: must be mlx5 or irdma"))),
        (None, s) => return Err(ImageError::new(line, format!("cqe_size={s}: must be 32, 64 or 128"))),
    };
    // Each vendor's smallest ring is the device's (mlx5 2, irdma 4, rdma-core's
    // IRDMA_U_MINCQ_SIZE), and the largest any takes 2^22 slots.
    use dvcq_uapi::irdma::gen::MIN_CQ_SIZE as IRDMA_MIN;
    use dvcq_uapi::mlx5::cq_size::{MAX_CQ_ENTRIES as MLX5_MAX, MIN_CQ_ENTRIES as MLX5_MIN};
    match vendor {
        ImageVendor::Mlx5 if !entries.is_power_of_two() || !(MLX5_MIN..=MLX5_MAX).contains(&entries) => {
            return Err(ImageError::new(
                line,
                format!("entries={entries}: must be a power of two from {MLX5_MIN} to {MLX5_MAX}"),
            ));
        }
        // irdma rings have the sizes rdma-core allocates (`cqe + 1`, doubled on GEN2,
        // rounded to even since v64), rarely a power of two: the vendor's parser checks the
        // size against the generation.
        ImageVendor::Irdma if !(IRDMA_MIN..=MLX5_MAX).contains(&entries) => {
            return Err(ImageError::new(
                line,
                format!("entries={entries}: an irdma ring has {IRDMA_MIN} to {MLX5_MAX} slots"),
            ));
        }
        // Checked here too, before the slot lines are read: even but on GEN1 (e810-dv's
        // `is_allocated_size`; GEN2 is the default generation).
        ImageVendor::Irdma if entries % 2 == 1 && get("hw_rev") != Some("1") => {
            let generation = get("hw_rev").unwrap_or("2");
            return Err(ImageError::new(
                line,
                format!(
                    "entries={entries}: rdma-core allocates GEN{generation} rings of an even number of slots (cqe + 1, doubled on GEN2, rounded to even since v64)"
                ),
            ));
        }
        _ => {}
    }
    Ok((cqe_size, entries, ci, vendor))
}

/// Parses an image's text: blank and `#` lines anywhere, one `ring` line, up to 64 `qp`
/// lines, then exactly `entries` slot lines of `cqe_size * 2` hex characters. Lines end in LF
/// or CRLF; a word may appear once on its line.
///
/// # Errors
///
/// [`ImageError`] naming the line of the first problem and what it is.
pub fn parse_image(text: &str) -> Result<RawImage, ImageError> {
    parse_lines(text).map_err(|mut e| {
        // A carriage return inside a line: the text was most likely written with CR-only
        // line endings, which make the whole file one line.
        let line = e.line.checked_sub(1).and_then(|i| text.lines().nth(i));
        if line.is_some_and(|l| l.contains('\r')) {
            e.msg.push_str(" (the line holds a carriage return: lines must end in LF or CRLF, not CR alone)");
        }
        e
    })
}

/// A word's `key` must not be among the `earlier` keys of its line.
fn check_unique<'a>(
    line: usize,
    what: &str,
    mut earlier: impl Iterator<Item = &'a str>,
    key: &str,
) -> Result<(), ImageError> {
    if earlier.any(|k| k == key) {
        return Err(ImageError::new(line, format!("{what} line gives {key} twice")));
    }
    Ok(())
}

/// The words of a `qp` or extension line: `key=value` pairs and bare flags, each key once.
fn line_words<'a>(
    line: usize,
    kind: &str,
    words: impl Iterator<Item = &'a str>,
) -> Result<Vec<(String, Option<String>)>, ImageError> {
    let mut out: Vec<(String, Option<String>)> = Vec::new();
    for w in words {
        let (k, v) = match w.split_once('=') {
            Some((k, v)) => (k, Some(v.to_string())),
            None => (w, None),
        };
        check_unique(line, kind, out.iter().map(|(k, _)| k.as_str()), k)?;
        out.push((k.to_string(), v));
    }
    Ok(out)
}

fn parse_lines(text: &str) -> Result<RawImage, ImageError> {
    let mut img: Option<RawImage> = None;
    let mut nslots = 0usize;
    let mut last = 0;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        last = line;
        let l = raw.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let mut words = l.split_whitespace();
        let first = words.next().unwrap_or("");
        let Some(im) = img.as_mut() else {
            if first != "ring" {
                return Err(ImageError::new(line, format!("expected the ring line first, found {first:?}")));
            }
            let mut kv = Vec::new();
            for w in words {
                let (k, v) = w
                    .split_once('=')
                    .ok_or_else(|| ImageError::new(line, format!("ring line word {w:?} is not key=value")))?;
                check_unique(line, "ring", kv.iter().map(|(k, _): &(String, String)| k.as_str()), k)?;
                kv.push((k.to_string(), v.to_string()));
            }
            let (cqe_size, entries, ci, vendor) = ring_header(&kv, line)?;
            img = Some(RawImage {
                ring_line: line,
                ring_words: kv,
                cqe_size,
                entries,
                ci,
                vendor,
                qps: Vec::new(),
                lines: Vec::new(),
                // Grown as slot lines come: a two-line header may announce 2^22 slots of
                // 128 bytes (512 MiB) that never follow.
                slots: Vec::new(),
            });
            continue;
        };
        match first {
            "ring" => return Err(ImageError::new(line, "a second ring line")),
            "qp" => {
                if nslots > 0 {
                    return Err(ImageError::new(line, "qp line after the first slot line"));
                }
                if im.qps.len() == 64 {
                    return Err(ImageError::new(line, "more than 64 qp lines"));
                }
                im.qps.push(QpWords { line, words: line_words(line, "qp", words)? });
            }
            // A slot line is one run of hex characters: a line of several words, or with a
            // `=`, is a line of another kind.
            kind if l.contains(char::is_whitespace) || l.contains('=') => {
                if nslots > 0 {
                    return Err(ImageError::new(line, format!("{kind} line after the first slot line")));
                }
                im.lines.push(ExtLine {
                    kind: kind.to_string(),
                    words: QpWords { line, words: line_words(line, kind, words)? },
                });
            }
            _ => {
                let want = im.cqe_size as usize * 2;
                if nslots == im.entries as usize {
                    return Err(ImageError::new(line, format!("more than entries={} slot lines", im.entries)));
                }
                let b = l.as_bytes();
                if b.len() != want {
                    return Err(ImageError::new(
                        line,
                        format!(
                            "slot {nslots}: {} characters, expected {want} hex characters (cqe_size={})",
                            b.len(),
                            im.cqe_size
                        ),
                    ));
                }
                for (col, pair) in b.chunks_exact(2).enumerate() {
                    match (hex_nibble(pair[0]), hex_nibble(pair[1])) {
                        (Some(hi), Some(lo)) => im.slots.push(hi << 4 | lo),
                        _ => {
                            return Err(ImageError::new(
                                line,
                                format!("slot {nslots}: non-hex character near column {}", col * 2 + 1),
                            ))
                        }
                    }
                }
                nslots += 1;
            }
        }
    }
    let im = match img {
        Some(im) => im,
        None if text.trim().is_empty() => {
            return Err(ImageError::new(0, "the input is empty: a ring image starts with its ring line"))
        }
        None => return Err(ImageError::new(last, "no ring line: only comments and blank lines")),
    };
    if nslots != im.entries as usize {
        return Err(ImageError::new(last, format!("{nslots} slot lines, expected entries={}", im.entries)));
    }
    Ok(im)
}

/// Appends one lowercase hex line per `cqe_size` bytes of `slots`.
pub fn write_slots(out: &mut String, slots: &[u8], cqe_size: usize) {
    for slot in slots.chunks(cqe_size.max(1)) {
        for b in slot {
            let _ = write!(out, "{b:02x}");
        }
        out.push('\n');
    }
}

/// One decoded item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeItem {
    /// A work completion.
    Wc(Completion),
    /// A CQE that could not become one: the ring slot and the reason.
    Bad {
        /// Slot index (`position mod entries`).
        slot: u32,
        /// Why.
        reason: FaultKind,
    },
}

impl DecodeItem {
    /// The item for a polled completion or fault item of a ring with `entries` slots.
    pub fn from_completion(wc: &Completion, entries: u32) -> Self {
        match wc.fault() {
            Some(f) => DecodeItem::Bad { slot: f.position.checked_rem(entries).unwrap_or(f.position), reason: f.kind },
            None => DecodeItem::Wc(*wc),
        }
    }
}

/// The state after decoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndState {
    /// Final running consumer counter.
    pub ci: u32,
    /// What was last written to the consumer-index doorbell, or `None` if nothing was.
    pub dbrec_ci: Option<u32>,
}

/// The canonical `wc` line of a completion (docs/ring-image.md).
pub fn wc_line(wc: &Completion) -> String {
    format!(
        "wc wqe_idx={} status={} opcode={} vendor_err={:#x} byte_len={} imm={:#x} qp_num={:#x} src_qp={:#x} wc_flags={:#x} pkey_index={} slid={} sl={} dlid_path_bits={}",
        wc.wqe_index,
        wc.status as u8,
        wc.opcode as u8,
        wc.vendor_err,
        wc.byte_len,
        wc.imm_data,
        wc.qp_num,
        wc.src_qp,
        wc.wc_flags.bits(),
        wc.pkey_index,
        wc.slid,
        wc.sl,
        wc.dlid_path_bits
    )
}

/// The `wc` line of a completion with libibverbs' names where the canonical line has
/// numbers: `status=IBV_WC_REM_ACCESS_ERR`, `opcode=IBV_WC_RECV`, `wc_flags=` the
/// `IBV_WC_*` flags joined by `|` (`0` for none; bits no flag names stay a hex number). The
/// other fields are as in [`wc_line`].
pub fn wc_line_named(wc: &Completion) -> String {
    let mut flags: Vec<String> = wc.wc_flags.iter_names().map(|(name, _)| format!("IBV_WC_{name}")).collect();
    let unnamed = wc.wc_flags.bits() & !crate::WcFlags::all().bits();
    if unnamed != 0 {
        flags.push(format!("{unnamed:#x}"));
    }
    let flags = if flags.is_empty() { "0".to_string() } else { flags.join("|") };
    format!(
        "wc wqe_idx={} status={} opcode={} vendor_err={:#x} byte_len={} imm={:#x} qp_num={:#x} src_qp={:#x} wc_flags={flags} pkey_index={} slid={} sl={} dlid_path_bits={}",
        wc.wqe_index,
        wc.status.name(),
        wc.opcode.name(),
        wc.vendor_err,
        wc.byte_len,
        wc.imm_data,
        wc.qp_num,
        wc.src_qp,
        wc.pkey_index,
        wc.slid,
        wc.sl,
        wc.dlid_path_bits
    )
}

/// How a decode's `wc` lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LineStyle {
    /// The canonical line, numbers only ([`wc_line`]): what images are compared by.
    #[default]
    Canonical,
    /// libibverbs' names for the status, opcode and flags ([`wc_line_named`]).
    Named,
}

/// The canonical lines of a decode: `wc ...` / `bad slot=... reason=...`, then `end ...`,
/// each ending in a newline.
pub fn format_decode(items: &[DecodeItem], end: &EndState) -> String {
    format_decode_as(items, end, LineStyle::Canonical)
}

/// [`format_decode`] with the `wc` lines in `style`.
pub fn format_decode_as(items: &[DecodeItem], end: &EndState, style: LineStyle) -> String {
    let mut s = String::new();
    for it in items {
        match it {
            DecodeItem::Wc(wc) if style == LineStyle::Named => s.push_str(&wc_line_named(wc)),
            DecodeItem::Wc(wc) => s.push_str(&wc_line(wc)),
            DecodeItem::Bad { slot, reason } => {
                let _ = write!(s, "bad slot={slot} reason={}", reason.word());
            }
        }
        s.push('\n');
    }
    let _ = match end.dbrec_ci {
        Some(d) => writeln!(s, "end ci={} dbrec_ci={d}", end.ci),
        None => writeln!(s, "end ci={} dbrec_ci=none", end.ci),
    };
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_parses_and_reports_lines() {
        let slot = "00".repeat(64);
        let text = format!("# c\nring cqe_size=64 entries=2 ci=5 cqe_ver=1\nqp qpn=1a sq_wqe_cnt=4 rq_wqe_cnt=4 ud\n{slot}\n\n{slot}\n");
        let im = parse_image(&text).unwrap();
        assert_eq!((im.vendor, im.entries, im.ci, im.get("cqe_ver")), (ImageVendor::Mlx5, 2, 5, Some("1")));
        assert_eq!(im.qps[0].pairs()[3], ("ud", None));
        assert_eq!(im.slots.len(), 128);

        let bad = format!("ring cqe_size=64 entries=2 ci=0\n{slot}\n{}zz\n", "00".repeat(63));
        assert_eq!(parse_image(&bad).unwrap_err().line, 3);
        assert_eq!(parse_image("ring cqe_size=64 entries=3 ci=0\n").unwrap_err().line, 1);
        assert_eq!(parse_image(&format!("ring cqe_size=64 entries=2 ci=0\n{slot}\n")).unwrap_err().line, 2);
        assert_eq!(parse_image("qp qpn=1\n").unwrap_err().line, 1);
        assert!(parse_image("ring cqe_size=32 entries=2 ci=0 vendor=mlx5\n").is_err());
        let irdma_slots = format!("{}\n", "00".repeat(32)).repeat(6);
        assert_eq!(
            parse_image(&format!("ring cqe_size=32 entries=6 ci=0\n{irdma_slots}")).unwrap().vendor,
            ImageVendor::Irdma
        );
        // irdma rings have the sizes rdma-core allocates, powers of two or not: from 4, even
        // unless on GEN1 (hw_rev=1), whose sizes were not rounded before v64.
        for (ring, msg) in [
            ("ring cqe_size=32 entries=2 ci=0", "line 1: entries=2: an irdma ring has 4 to 4194304 slots"),
            (
                "ring cqe_size=32 entries=5 ci=0 hw_rev=3",
                "line 1: entries=5: rdma-core allocates GEN3 rings of an even number of slots (cqe + 1, doubled on GEN2, rounded to even since v64)",
            ),
        ] {
            assert_eq!(parse_image(&format!("{ring}\n")).unwrap_err().to_string(), msg);
        }
        let gen1 = format!("ring cqe_size=32 entries=5 ci=0 hw_rev=1\n{}", format!("{}\n", "00".repeat(32)).repeat(5));
        assert_eq!(parse_image(&gen1).unwrap().entries, 5);
    }

    /// The smallest ring an image holds is the device's: two slots on mlx5 (rdma-core
    /// allocates `roundup_pow_of_two(cqe + 1)`, `cqe >= 1`), four on irdma
    /// (`IRDMA_U_MINCQ_SIZE`).
    #[test]
    fn the_smallest_ring_is_the_devices() {
        let mlx5 = format!("{}\n", "00".repeat(64)).repeat(2);
        assert_eq!(parse_image(&format!("ring cqe_size=64 entries=2 ci=0\n{mlx5}")).unwrap().entries, 2);
        let irdma = format!("{}\n", "00".repeat(32));
        let e = parse_image(&format!("ring cqe_size=32 entries=2 ci=0\n{}", irdma.repeat(2))).unwrap_err();
        assert_eq!(e.to_string(), "line 1: entries=2: an irdma ring has 4 to 4194304 slots");
        let e = parse_image(&format!("ring cqe_size=64 entries=2 ci=0 vendor=irdma\n{mlx5}")).unwrap_err();
        assert_eq!(e.to_string(), "line 1: entries=2: an irdma ring has 4 to 4194304 slots");
        let e = parse_image(&format!("ring cqe_size=64 entries=1 ci=0\n{mlx5}")).unwrap_err();
        assert_eq!(e.to_string(), "line 1: entries=1: must be a power of two from 2 to 4194304");
        assert_eq!(parse_image(&format!("ring cqe_size=32 entries=4 ci=0\n{}", irdma.repeat(4))).unwrap().entries, 4);
    }

    #[test]
    fn numbers_are_digits_only() {
        assert_eq!(
            (parse_num("16", false), parse_num("1a2", true), parse_num("0x1A2", true)),
            (Some(16), Some(0x1a2), Some(0x1a2))
        );
        for (v, hex) in
            [("+16", false), ("+1a2", true), ("0x+1a2", true), ("-1", false), ("", false), ("0x", true), (" 1", false)]
        {
            assert_eq!(parse_num(v, hex), None, "{v:?}");
        }
        let slot = "00".repeat(64);
        let e = parse_image(&format!("ring cqe_size=64 entries=+2 ci=0\n{slot}\n{slot}\n")).unwrap_err();
        assert_eq!(e.to_string(), "line 1: entries=+2 is not a decimal number");
        // A number too large for its 32 bits is out of range, and the range is given.
        let e = parse_image(&format!("ring cqe_size=64 entries=2 ci=4294967296\n{slot}\n{slot}\n")).unwrap_err();
        assert_eq!(e.to_string(), "line 1: ci=4294967296 is out of range: 0 to 4294967295");
        assert_eq!(parse_num_checked("99999999999", false), Err(NumError::OutOfRange));
        assert_eq!(parse_num_checked("1ffffffff", true), Err(NumError::OutOfRange));
        assert_eq!(parse_num_checked("1x", true), Err(NumError::NotANumber));
        let e = num_word("qpn", "0x100000000", true).unwrap_err();
        assert_eq!((e.key.as_str(), e.kind), ("qpn", NumError::OutOfRange));
        assert_eq!(e.to_string(), "qpn=0x100000000 is out of range: 0x0 to 0xffffffff");
        let e = num_word("qpn", "0xg", true).unwrap_err();
        assert_eq!(e, NumWordError { key: "qpn".into(), value: "0xg".into(), hex: true, kind: NumError::NotANumber });
        assert_eq!(e.to_string(), "qpn=0xg is not a hex number");
        assert_eq!(num_word("ci", "x", false).unwrap_err().to_string(), "ci=x is not a decimal number");
    }

    /// Slot bytes are read in either case of hex digit (the format writes lowercase); a
    /// second ring line and a qp line among the slots are named as such.
    #[test]
    fn slot_hex_in_either_case_and_lines_out_of_place() {
        let digits: String = (0..=255u8).map(|b| format!("{b:02x}")).collect();
        let [lower, upper] = [digits.clone(), digits.to_uppercase()].map(|slot| {
            let text = format!("ring cqe_size=128 entries=2 ci=0\n{}\n{}\n", &slot[..256], &slot[256..]);
            parse_image(&text).unwrap().slots
        });
        assert_eq!(lower, (0..=255u8).collect::<Vec<_>>());
        assert_eq!(upper, lower);

        let slot = "00".repeat(64);
        let ring = "ring cqe_size=64 entries=2 ci=0";
        let e = parse_image(&format!("{ring}\n{slot}\n{ring}\n{slot}\n")).unwrap_err();
        assert_eq!(e.to_string(), "line 3: a second ring line");
        let e = parse_image(&format!("{ring}\nqp qpn=1\n{slot}\nqp qpn=2\n{slot}\n")).unwrap_err();
        assert_eq!(e.to_string(), "line 4: qp line after the first slot line");
    }

    #[test]
    fn a_word_given_twice_is_an_error_on_its_line() {
        let slot = "00".repeat(64);
        let e = parse_image("# c\nring cqe_size=64 entries=2 ci=0 entries=3\n").unwrap_err();
        assert_eq!(e.to_string(), "line 2: ring line gives entries twice");
        for qp in ["qpn=1 sq_wqe_cnt=4 rq_wqe_cnt=4 qpn=2", "qpn=1 sq_wqe_cnt=4 rq_wqe_cnt=4 srq srq=5", "qpn=1 ud ud"]
        {
            let e = parse_image(&format!("ring cqe_size=64 entries=2 ci=0\nqp qpn=3\nqp {qp}\n{slot}\n{slot}\n"))
                .unwrap_err();
            assert_eq!(e.line, 3, "{qp}");
            assert!(e.msg.starts_with("qp line gives ") && e.msg.ends_with(" twice"), "{qp}: {e}");
        }
    }

    #[test]
    fn empty_input_and_cr_line_endings_are_named() {
        for text in ["", "\n\n", "  \n"] {
            let e = parse_image(text).unwrap_err();
            assert_eq!(e.to_string(), "the input is empty: a ring image starts with its ring line", "{text:?}");
        }
        let e = parse_image("# only\n# comments\n").unwrap_err();
        assert_eq!(e.to_string(), "line 2: no ring line: only comments and blank lines");
        let slot = "00".repeat(64);
        let e = parse_image(&format!("ring cqe_size=64 entries=2 ci=0\r{slot}\r{slot}\r")).unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.msg.contains("lines must end in LF or CRLF, not CR alone"), "{e}");
        // CRLF is fine.
        assert!(parse_image(&format!("ring cqe_size=64 entries=2 ci=0\r\n{slot}\r\n{slot}\r\n")).is_ok());
    }
}
