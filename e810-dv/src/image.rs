//! irdma ring images (the format is docs/ring-image.md): the plain-data description of an
//! image, its text form, and decoding it into the canonical `wc ...` / `bad slot=...` /
//! `end ...` lines with the same poll code the live poller runs.
//!
//! For an irdma image, CQE comp-ctx handle `h` (qword1) names the h-th `qp` line (1-based);
//! 0 names no QP (a destroyed QP's CQE, skipped as rdma-core does). Work queues hold the
//! identity wr_id mapping and one quantum per SQ WQE; `sq_head`/`sq_tail`/`rq_head`/
//! `rq_tail` (defaults size-1 and 0) give the ring positions flushed completions walk.
//! Two `qp` words go beyond the format's own (readers that do not know them ignore them):
//! `transport=iwarp` and `conn_wqes=<n>`, for iWARP QPs.

use crate::cq::Engine;
use crate::registry::{QpConfig, QpRegistry, QpType, Transport};
use crate::ring::{is_allocated_size, Pos, SlotBytes};
use crate::status::Compat;
pub use dvcq_provider::image::{format_decode, wc_line, DecodeItem, EndState, ImageError};
use dvcq_provider::image::{num_word, parse_image, parse_num, write_slots, RawImage};
use dvcq_provider::Completion;
use dvcq_uapi::irdma::HwRev;
use std::fmt::Write as _;

/// The `ring` line of an irdma image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageHeader {
    /// Slot size: 32 or 64.
    pub cqe_size: u32,
    /// Ring slots: 4 to 2^22, a size rdma-core allocates ([`is_allocated_size`]: even on
    /// GEN2 and GEN3).
    pub entries: u32,
    /// Running consumer counter: head = `ci mod entries`, valid bit 1 on even laps.
    pub ci: u32,
    /// Hardware generation (default GEN2).
    pub hw_rev: HwRev,
}

/// A `qp` line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImageQp {
    /// 24-bit QP number.
    pub qpn: u32,
    /// SQ size (quanta).
    pub sq_wqe_cnt: u32,
    /// RQ size (WQEs).
    pub rq_wqe_cnt: u32,
    /// The QP uses an SRQ (`srq` or `srq=<hex>`). Read and written back, but a decode does
    /// not need it: a GEN3 SRQ CQE carries its wr_id, and its QP in qword5.
    pub srq: Option<u32>,
    /// UD QP.
    pub ud: bool,
    /// log2 of the RQ WQE size in quanta.
    pub rq_shift: u8,
    /// SQ head (default size-1).
    pub sq_head: Option<u32>,
    /// SQ tail (default 0).
    pub sq_tail: Option<u32>,
    /// RQ head (default size-1).
    pub rq_head: Option<u32>,
    /// RQ tail (default 0).
    pub rq_tail: Option<u32>,
    /// An iWARP QP (`transport=iwarp`; the default is `roce`): immediate data, not the
    /// opcode, makes a receive `IBV_WC_RECV_RDMA_WITH_IMM` (rdma-core `set_ib_wc_op_rq`).
    pub iwarp: bool,
    /// Connection WQEs at the start of the SQ (`conn_wqes=<n>`, default 0; rdma-core uses 3
    /// for iWARP QPs on GEN2 and GEN3, `irdma_setup_connection_wqes`). An SQ CQE below it is
    /// consumed without a completion while the SQ is empty (`sq_head` = `sq_tail`).
    pub conn_wqes: u16,
}

/// A whole irdma ring image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IrdmaImage {
    /// The ring line.
    pub header: ImageHeader,
    /// The qp lines, in order (handle h = index + 1).
    pub qps: Vec<ImageQp>,
    /// `entries * cqe_size` bytes, slot 0 first, in memory order.
    pub slots: Vec<u8>,
}

fn err(line: usize, msg: impl Into<String>) -> ImageError {
    ImageError::new(line, msg)
}

/// Builds the irdma header from the `ring` line's key/value words (unknown keys ignored).
///
/// # Errors
///
/// [`ImageError`] (line `line`) for missing or invalid values or a non-irdma ring.
pub fn header_from_words(words: &[(&str, &str)], line: usize) -> Result<ImageHeader, ImageError> {
    let get = |k: &str| words.iter().find(|(kk, _)| *kk == k).map(|(_, v)| *v);
    let num = |k: &str| -> Result<u32, ImageError> {
        let v = get(k).ok_or_else(|| err(line, format!("ring line lacks {k}=")))?;
        num_word(k, v, false).map_err(|e| err(line, e.to_string()))
    };
    let cqe_size = num("cqe_size")?;
    let entries = num("entries")?;
    let ci = num("ci")?;
    match (get("vendor"), cqe_size) {
        (Some("irdma"), 32 | 64) | (None, 32) => {}
        (Some("irdma"), s) => return Err(err(line, format!("cqe_size={s}: irdma slots are 32 or 64 bytes"))),
        (v, s) => {
            return Err(err(line, format!("not an irdma ring (vendor={}, cqe_size={s})", v.unwrap_or("default"))))
        }
    }
    let hw_rev = match get("hw_rev") {
        None => HwRev::Gen2,
        Some(v) => parse_num(v, false)
            .and_then(|n| u8::try_from(n).ok())
            .and_then(HwRev::from_u8)
            .ok_or_else(|| err(line, format!("hw_rev={v}: must be 1, 2 or 3")))?,
    };
    // The sizes rdma-core allocates (`cqe + 1`, doubled on GEN2, rounded to even since
    // v64), not the powers of two an mlx5 ring has.
    if !(4..=1 << 22).contains(&entries) {
        return Err(err(line, format!("entries={entries}: an irdma ring has 4 to 4194304 slots")));
    }
    if !is_allocated_size(entries, hw_rev) {
        return Err(err(
            line,
            format!(
                "entries={entries}: rdma-core allocates GEN{} rings of an even number of slots (cqe + 1, doubled on GEN2, rounded to even since v64)",
                hw_rev as u8
            ),
        ));
    }
    Ok(ImageHeader { cqe_size, entries, ci, hw_rev })
}

/// Builds a `qp` line from its words: `key=value` pairs and bare flags (`srq`, `ud`);
/// unknown words are ignored.
///
/// # Errors
///
/// [`ImageError`] (line `line`) for missing or invalid values.
pub fn qp_from_words(words: &[(&str, Option<&str>)], line: usize) -> Result<ImageQp, ImageError> {
    let mut q = ImageQp::default();
    let mut have = (false, false, false);
    for &(k, v) in words {
        let need = |hex: bool| -> Result<u32, ImageError> {
            let v = v.ok_or_else(|| err(line, format!("{k} needs a value")))?;
            num_word(k, v, hex).map_err(|e| err(line, e.to_string()))
        };
        match k {
            "qpn" => {
                q.qpn = need(true)?;
                if q.qpn > 0xff_ffff {
                    return Err(err(
                        line,
                        format!("qpn {:#x} is wider than 24 bits: out of range, 0x0 to 0xffffff", q.qpn),
                    ));
                }
                have.0 = true;
            }
            "sq_wqe_cnt" => {
                q.sq_wqe_cnt = need(false)?;
                have.1 = true;
            }
            "rq_wqe_cnt" => {
                q.rq_wqe_cnt = need(false)?;
                have.2 = true;
            }
            "srq" => q.srq = Some(if v.is_some() { need(true)? } else { 0 }),
            "ud" => q.ud = true,
            "rq_shift" => {
                let s = need(false)?;
                if s > 3 {
                    return Err(err(line, format!("rq_shift={s}: must be 0 to 3")));
                }
                q.rq_shift = s as u8;
            }
            "transport" => {
                q.iwarp = match v {
                    Some("roce") => false,
                    Some("iwarp") => true,
                    Some(t) => return Err(err(line, format!("transport={t}: must be roce or iwarp"))),
                    None => return Err(err(line, "transport needs a value: roce or iwarp")),
                }
            }
            "conn_wqes" => {
                let n = need(false)?;
                q.conn_wqes =
                    u16::try_from(n).map_err(|_| err(line, format!("conn_wqes={n}: must be below sq_wqe_cnt")))?;
            }
            "sq_head" => q.sq_head = Some(need(false)?),
            "sq_tail" => q.sq_tail = Some(need(false)?),
            "rq_head" => q.rq_head = Some(need(false)?),
            "rq_tail" => q.rq_tail = Some(need(false)?),
            _ => {}
        }
    }
    let missing: Vec<&str> = [("qpn=", have.0), ("sq_wqe_cnt=", have.1), ("rq_wqe_cnt=", have.2)]
        .into_iter()
        .filter_map(|(k, have)| (!have).then_some(k))
        .collect();
    if !missing.is_empty() {
        return Err(err(line, format!("qp line is missing {}", missing.join(" and "))));
    }
    for (key, n) in [("sq_wqe_cnt", q.sq_wqe_cnt), ("rq_wqe_cnt", q.rq_wqe_cnt)] {
        if n != 0 && (!n.is_power_of_two() || n > 1 << 15) {
            return Err(err(line, format!("{key}={n}: irdma queues are powers of two up to 32768")));
        }
    }
    if q.conn_wqes != 0 && u32::from(q.conn_wqes) >= q.sq_wqe_cnt {
        return Err(err(line, format!("conn_wqes={}: must be below sq_wqe_cnt={}", q.conn_wqes, q.sq_wqe_cnt)));
    }
    // Ring positions lie inside their queue; a queue of no entries has none but 0.
    let positions = [
        ("sq_head", q.sq_head, q.sq_wqe_cnt),
        ("sq_tail", q.sq_tail, q.sq_wqe_cnt),
        ("rq_head", q.rq_head, q.rq_wqe_cnt),
        ("rq_tail", q.rq_tail, q.rq_wqe_cnt),
    ];
    for (key, pos, size) in positions {
        if let Some(p) = pos.filter(|&p| p >= size.max(1)) {
            return Err(err(line, format!("{key}={p}: past the end of a queue of {size} entries")));
        }
    }
    Ok(q)
}

/// Builds an image from already-split parts (for a shared text parser).
///
/// # Errors
///
/// [`ImageError`] (line 0) if `slots` is not `entries * cqe_size` bytes or there are more
/// than 64 QPs.
pub fn image_from_parts(header: ImageHeader, qps: Vec<ImageQp>, slots: Vec<u8>) -> Result<IrdmaImage, ImageError> {
    let want = header.entries as usize * header.cqe_size as usize;
    if slots.len() != want {
        return Err(err(0, format!("{} slot bytes, expected {want}", slots.len())));
    }
    if qps.len() > 64 {
        return Err(err(0, format!("{} qp lines: at most 64", qps.len())));
    }
    Ok(IrdmaImage { header, qps, slots })
}

/// Parses an irdma ring image from text.
///
/// # Errors
///
/// [`ImageError`] with the line number of the first problem.
pub fn parse_irdma_image(text: &str) -> Result<IrdmaImage, ImageError> {
    let raw = parse_image(text)?;
    from_raw(&raw)
}

/// Builds an irdma image from a parsed container (the shared text parser's output).
///
/// # Errors
///
/// [`ImageError`] for a non-irdma ring or invalid irdma words.
pub fn from_raw(raw: &RawImage) -> Result<IrdmaImage, ImageError> {
    let header = header_from_words(&raw.ring_pairs(), raw.ring_line)?;
    if let Some(l) = raw.lines.first() {
        // The line kinds beyond the format's own are mlx5's (its WQE buffers).
        return Err(err(l.words.line, format!("a {} line has no meaning in an irdma ring", l.kind)));
    }
    let qps = raw.qps.iter().map(|q| qp_from_words(&q.pairs(), q.line)).collect::<Result<Vec<_>, _>>()?;
    for (i, (q, rq)) in qps.iter().zip(&raw.qps).enumerate() {
        if let Some(first) = qps[..i].iter().zip(&raw.qps).find(|(p, _)| p.qpn == q.qpn) {
            return Err(err(rq.line, format!("qpn {:#x} is already declared on line {}", q.qpn, first.1.line)));
        }
    }
    image_from_parts(header, qps, raw.slots.clone())
}

impl IrdmaImage {
    /// The image as text (docs/ring-image.md), parseable by [`parse_irdma_image`].
    pub fn to_text(&self) -> String {
        let h = &self.header;
        let mut s = format!(
            "ring cqe_size={} entries={} ci={} vendor=irdma hw_rev={}\n",
            h.cqe_size, h.entries, h.ci, h.hw_rev as u8
        );
        for q in &self.qps {
            let _ = write!(s, "qp qpn={:x} sq_wqe_cnt={} rq_wqe_cnt={}", q.qpn, q.sq_wqe_cnt, q.rq_wqe_cnt);
            match q.srq {
                Some(0) => s.push_str(" srq"),
                Some(n) => {
                    let _ = write!(s, " srq={n:x}");
                }
                None => {}
            }
            if q.ud {
                s.push_str(" ud");
            }
            if q.rq_shift != 0 {
                let _ = write!(s, " rq_shift={}", q.rq_shift);
            }
            if q.iwarp {
                s.push_str(" transport=iwarp");
            }
            if q.conn_wqes != 0 {
                let _ = write!(s, " conn_wqes={}", q.conn_wqes);
            }
            for (k, v) in
                [("sq_head", q.sq_head), ("sq_tail", q.sq_tail), ("rq_head", q.rq_head), ("rq_tail", q.rq_tail)]
            {
                if let Some(v) = v {
                    let _ = write!(s, " {k}={v}");
                }
            }
            s.push('\n');
        }
        write_slots(&mut s, &self.slots, h.cqe_size as usize);
        s
    }

    fn registry(&self) -> QpRegistry {
        let mut r = QpRegistry::new(self.header.hw_rev);
        for (i, q) in self.qps.iter().enumerate() {
            let cfg = QpConfig {
                qp_num: q.qpn,
                qp_type: if q.ud { QpType::Ud } else { QpType::Rc },
                transport: if q.iwarp { Transport::Iwarp } else { Transport::Roce },
                sq_quanta: q.sq_wqe_cnt,
                rq_wqes: q.rq_wqe_cnt,
                rq_shift: q.rq_shift,
                conn_wqes: q.conn_wqes,
            };
            // Sizes were validated by the parser; a hand-built image with bad sizes simply
            // leaves that handle unregistered (its CQEs become unknown_qp items).
            if let Ok(id) = r.register(i as u64 + 1, cfg) {
                // An image records no posts: every WQE counts as posted, one quantum each.
                let _ = r.preset_identity(id);
                if let Some(qp) = r.qp_mut(id) {
                    let sq = q.sq_wqe_cnt.saturating_sub(1);
                    let rq = q.rq_wqe_cnt.saturating_sub(1);
                    qp.sq.set(q.sq_head.unwrap_or(sq), q.sq_tail.unwrap_or(0));
                    qp.rq.set(q.rq_head.unwrap_or(rq), q.rq_tail.unwrap_or(0));
                }
            }
        }
        r
    }
}

/// Decodes an image: every completion in poll order, then the end state
/// (docs/ring-image.md).
///
/// # Errors
///
/// [`ImageError`] (line 0: the image keeps no line numbers; it is about the `ring` line's
/// `hw_rev`) for a GEN3 image with an older release's `compat`: rdma-core handles GEN3
/// from v64 on, as [`crate::IrdmaCq::new`] says.
pub fn decode_image(img: &IrdmaImage, compat: Compat) -> Result<(Vec<DecodeItem>, EndState), ImageError> {
    let h = img.header;
    if h.hw_rev == HwRev::Gen3 && !compat.has_gen3() {
        return Err(err(
            0,
            format!("a GEN3 ring decodes only as rdma-core v64 and later poll it: {} had no GEN3", compat.releases()),
        ));
    }
    // The slots decide the geometry; a hand-built image whose header disagrees with them
    // decodes to nothing rather than with a wrong ring size.
    let ring = SlotBytes::new(img.slots.clone(), h.cqe_size as usize).filter(|r| r.entries() == h.entries);
    let Some(ring) = ring else {
        return Ok((Vec::new(), EndState { ci: h.ci, dbrec_ci: None }));
    };
    let entries = ring.entries();
    let mut eng = Engine::new(entries, h.hw_rev, compat, img.registry());
    eng.ci = Pos::at(h.ci, entries);
    // The image's counter is a running one: it moves on by the slots consumed.
    let laps2 = 2 * entries;
    let mut ci = h.ci;
    let mut items = Vec::new();
    let mut out = [Completion::default(); 32];
    // Bound the work on garbage: every slot can be consumed at most once per lap and a
    // parked flush yields at most one completion per WQE.
    let wqs: u64 = img.qps.iter().map(|q| u64::from(q.sq_wqe_cnt) + u64::from(q.rq_wqe_cnt)).sum();
    let mut budget = 4 * u64::from(entries) + wqs + 64;
    loop {
        // Fresh zeroed slots each time: fields verbs leave undefined print as 0.
        out.fill(Completion::default());
        let before = eng.ci;
        let n = eng.poll(&ring, &mut out);
        // One poll call consumes at most a lap of slots, less than `laps2`.
        ci = ci.wrapping_add((eng.ci.counter(entries) + laps2 - before.counter(entries)) % laps2);
        items.extend(out[..n].iter().map(|wc| DecodeItem::from_completion(wc, entries)));
        budget = budget.saturating_sub(n as u64 + 1);
        if (n == 0 && eng.ci == before) || budget == 0 {
            break;
        }
    }
    let dbrec_ci = (ci != h.ci).then_some(eng.ci.slot());
    Ok((items, EndState { ci, dbrec_ci }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(q: [u64; 4]) -> String {
        q.iter().flat_map(|w| w.to_le_bytes()).map(|b| format!("{b:02x}")).collect()
    }

    /// A GEN3 ring decodes only with the current compat: older releases had no GEN3.
    #[test]
    fn gen3_images_need_the_current_compat() {
        let zero: String = "00".repeat(64);
        let text = format!("ring cqe_size=64 entries=4 ci=0 vendor=irdma hw_rev=3\n{zero}\n{zero}\n{zero}\n{zero}\n");
        let img = parse_irdma_image(&text).unwrap();
        assert!(decode_image(&img, Compat::Current).is_ok());
        for old in [Compat::V52, Compat::V44] {
            let e = decode_image(&img, old).unwrap_err();
            assert!(e.to_string().contains("GEN3 ring decodes only as rdma-core v64 and later poll it: v"), "{e}");
        }
    }

    #[test]
    fn decodes_a_hand_written_image() {
        let zero = slot([0; 4]);
        let text = format!(
            "# two completions then an unknown handle\nring cqe_size=32 entries=4 ci=0 vendor=irdma hw_rev=2\nqp qpn=11 sq_wqe_cnt=8 rq_wqe_cnt=8\n{}\n{}\n{}\n{}\n",
            slot([0, 1, 0x11 << 32, 0xC300_0005_0000_0000]),
            slot([64, 1, 0x11 << 32, 0x8400_0000_0000_0000]),
            slot([0, 9, 0, 0x8300_0000_0000_0000]),
            zero
        );
        let img = parse_irdma_image(&text).unwrap();
        let (items, end) = decode_image(&img, Compat::Current).unwrap();
        let out = format_decode(&items, &end);
        assert_eq!(
            out,
            "wc wqe_idx=5 status=0 opcode=0 vendor_err=0x0 byte_len=0 imm=0x0 qp_num=0x11 src_qp=0x11 wc_flags=0x0 pkey_index=0 slid=0 sl=0 dlid_path_bits=0\n\
             wc wqe_idx=0 status=0 opcode=128 vendor_err=0x0 byte_len=64 imm=0x0 qp_num=0x11 src_qp=0x11 wc_flags=0x0 pkey_index=0 slid=0 sl=0 dlid_path_bits=0\n\
             bad slot=2 reason=unknown_qp\n\
             end ci=3 dbrec_ci=3\n"
        );
        assert_eq!(parse_irdma_image(&img.to_text()).unwrap(), img);

        // A hand-built image whose header disagrees with its slots (the fields are public)
        // decodes to nothing, whatever the header says, and does not panic.
        let first = decode_image(&img, Compat::Current).unwrap().0;
        assert!(!first.is_empty());
        for entries in [0, 2, 8, 1 << 31, u32::MAX] {
            let mut bad = img.clone();
            bad.header.entries = entries;
            let (items, end) = decode_image(&bad, Compat::Current).unwrap();
            assert!(items.is_empty(), "entries={entries}");
            assert_eq!(end, EndState { ci: 0, dbrec_ci: None });
        }
    }

    /// A run of one QP's CQEs stops at the ring's end: the slots after it belong to the next
    /// lap, where the CQEs the producer has not yet rewritten are stale.
    #[test]
    fn a_run_stops_at_the_end_of_the_lap() {
        let send = |idx: u64| slot([0, 1, 0x11 << 32, 0xC300_0000_0000_0000 | idx << 32]);
        let text = format!(
            "ring cqe_size=32 entries=4 ci=2 vendor=irdma\nqp qpn=11 sq_wqe_cnt=8 rq_wqe_cnt=8\n{}\n{}\n{}\n{}\n",
            send(0),
            send(1),
            send(2),
            send(3)
        );
        let (items, end) = decode_image(&parse_irdma_image(&text).unwrap(), Compat::Current).unwrap();
        let idx: Vec<_> = items
            .iter()
            .map(|it| match it {
                DecodeItem::Wc(wc) => wc.wqe_index,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(idx, [2, 3]);
        assert_eq!((end.ci, end.dbrec_ci), (4, Some(0)));
    }

    #[test]
    fn parse_errors_carry_line_numbers() {
        let e = parse_irdma_image("ring cqe_size=32 entries=3 ci=0\n").unwrap_err();
        assert_eq!(e.line, 1);
        let z64 = "0".repeat(128);
        let e = parse_irdma_image(&format!("\nring cqe_size=64 entries=2 ci=0\n{z64}\n{z64}\n")).unwrap_err();
        assert!(e.msg.contains("not an irdma ring"), "{e}");
        let z32 = "0".repeat(64);
        let e = parse_irdma_image(&format!(
            "ring cqe_size=32 entries=4 ci=0\nqp qpn=zz sq_wqe_cnt=1 rq_wqe_cnt=1\n{z32}\n{z32}\n{z32}\n{z32}\n"
        ))
        .unwrap_err();
        assert_eq!(e.line, 2);
        let e = parse_irdma_image("ring cqe_size=32 entries=4 ci=0\n00\n").unwrap_err();
        assert_eq!(e.line, 2);
        let z = "0".repeat(64);
        let e = parse_irdma_image(&format!("ring cqe_size=32 entries=4 ci=0\n{z}\n")).unwrap_err();
        assert!(e.msg.contains("1 slot lines"), "{e}");
        // GEN1 rings come in odd sizes too (cqe + 1 before v64).
        let ok = parse_irdma_image(&format!(
            "ring cqe_size=32 entries=5 ci=0 hw_rev=1 extra=1\n{}",
            format!("{z}\n").repeat(5)
        ))
        .unwrap();
        assert_eq!(ok.header.hw_rev, HwRev::Gen1);
        let (items, end) = decode_image(&ok, Compat::Current).unwrap();
        assert!(items.is_empty());
        assert_eq!(format_decode(&items, &end), "end ci=0 dbrec_ci=none\n");
    }

    /// A `qp` line is checked as a whole, and each error names the key at fault: a ring
    /// position outside its queue (which would make a flush walk WQEs that do not exist),
    /// a bad size, a missing key, and a QP number declared twice (on the second line).
    #[test]
    fn qp_line_errors_name_the_key_and_the_line() {
        let z = "0".repeat(64);
        let parse =
            |qps: &str| parse_irdma_image(&format!("ring cqe_size=32 entries=4 ci=0\n{qps}{z}\n{z}\n{z}\n{z}\n"));
        for (qp, want) in [
            ("qp qpn=1 sq_wqe_cnt=0 rq_wqe_cnt=0 rq_head=5", "rq_head=5: past the end of a queue of 0 entries"),
            ("qp qpn=1 sq_wqe_cnt=64 rq_wqe_cnt=8 sq_head=1000", "sq_head=1000: past the end of a queue of 64 entries"),
            ("qp qpn=1 sq_wqe_cnt=64 rq_wqe_cnt=8 rq_tail=8", "rq_tail=8: past the end of a queue of 8 entries"),
            ("qp qpn=1 sq_wqe_cnt=4 rq_wqe_cnt=8 sq_tail=4", "sq_tail=4: past the end of a queue of 4 entries"),
            ("qp qpn=1 sq_wqe_cnt=100 rq_wqe_cnt=8", "sq_wqe_cnt=100: irdma queues are powers of two"),
            ("qp qpn=1 rq_wqe_cnt=8", "qp line is missing sq_wqe_cnt="),
            ("qp sq_wqe_cnt=8", "qp line is missing qpn= and rq_wqe_cnt="),
        ] {
            let e = parse(&format!("{qp}\n")).unwrap_err();
            assert_eq!(e.line, 2, "{qp}");
            assert!(e.msg.contains(want), "{qp}: {e}");
        }
        // Positions inside the queue, and 0 in an empty one, are fine.
        parse("qp qpn=1 sq_wqe_cnt=64 rq_wqe_cnt=0 sq_head=63 sq_tail=0 rq_head=0\n").unwrap();
        let e = parse("qp qpn=1 sq_wqe_cnt=4 rq_wqe_cnt=4\n# c\nqp qpn=1 sq_wqe_cnt=8 rq_wqe_cnt=8\n").unwrap_err();
        assert_eq!(e.line, 4);
        assert!(e.msg.contains("qpn 0x1 is already declared on line 2"), "{e}");
    }
}
