//! The work queues of an mlx5 ring image: the `qp` line words for XRC SRQs, receive WQs,
//! QP types and registered WQE buffers, and the `mr` and `wqe` lines, read, written, built
//! into a registry, and exported from one (docs/ring-image.md, "mlx5: the words and lines for a full registry").
//!
//! Receive queues are replayed with identity wr_id tables, so what is posted is a count
//! (`rq_posted=`, `srq_posted=`; inline data is copied only into a queue with a receive
//! outstanding). The send queue's posts are a range of WQE basic blocks (`sq_tail=`,
//! `sq_posted=`), each replayed as a work request of one block: a CQE naming a block
//! inside it finds it posted. Memory regions are bounds: a replayed region is zeroed memory
//! registered at the address the captured one had.

use super::{ImageQp, Mlx5Image, IMAGE_SRQ_ENTRIES};
use crate::registry::{QpConfig, QpType, Registry, RegistryError, ResourceKind};
use dvcq_provider::image::{num_word, ExtLine, ImageError};
use dvcq_provider::{DmaBuffer, WqBuffer};
use std::fmt::Write as _;
use std::sync::Arc;

/// Bytes of a send WQE basic block.
const SEND_WQEBB: u32 = 64;

/// An `mr` line: a memory region inline data may be copied into (`ibv_reg_mr`'s address,
/// length and lkey).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageMr {
    /// `lkey=<hex>`.
    pub lkey: u32,
    /// `addr=<hex>`: the address data segments name its first byte by.
    pub addr: u64,
    /// `len=<n>` bytes, at least 1.
    pub len: u32,
}

/// Which queue of a `qp` line a `wqe` line's WQE is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WqeQueue {
    /// `queue=sq`: a send WQE basic block (64 bytes).
    Sq,
    /// `queue=rq`: a receive WQE of the line's `rq_stride`.
    Rq,
    /// `queue=srq`: a WQE of the SRQ the line names, of its `srq_stride`.
    Srq,
}

impl WqeQueue {
    fn word(self) -> &'static str {
        match self {
            WqeQueue::Sq => "sq",
            WqeQueue::Rq => "rq",
            WqeQueue::Srq => "srq",
        }
    }
}

/// A `wqe` line: the bytes of WQE `index` of a registered WQE buffer (zero past them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageWqe {
    /// `qpn=<hex>`: the `qp` line whose queue it is (the first with that number and that
    /// queue's buffer).
    pub qpn: u32,
    /// `queue=`.
    pub queue: WqeQueue,
    /// `index=<n>`: the WQE's index in its queue (a basic block's, in the SQ).
    pub index: u32,
    /// `bytes=<hex>`: at most a WQE's size.
    pub bytes: Vec<u8>,
}

fn err(line: usize, msg: impl Into<String>) -> ImageError {
    ImageError::new(line, msg)
}

/// A hex number up to 64 bits (`0x` optional).
fn parse_u64_hex(v: &str) -> Option<u64> {
    let d = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")).unwrap_or(v);
    (!d.is_empty() && d.chars().all(|c| c.is_ascii_hexdigit())).then(|| u64::from_str_radix(d, 16).ok()).flatten()
}

fn parse_hex_bytes(v: &str) -> Option<Vec<u8>> {
    if v.len() % 2 != 0 || !v.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..v.len()).step_by(2).map(|i| u8::from_str_radix(&v[i..i + 2], 16).ok()).collect()
}

/// The registered buffers and posts of a `qp` line: what each needs of the line.
pub(super) fn check_qp_queues(q: &ImageQp, line: usize) -> Result<(), ImageError> {
    if let Some((stride, _)) = q.rq_stride {
        if !stride.is_power_of_two() || stride < 16 {
            return Err(err(line, format!("rq_stride={stride}: a power of two from 16")));
        }
        if q.kind != ResourceKind::Qp || q.srq.is_some() {
            return Err(err(line, "rq_stride= on a line without a receive queue of its own QP"));
        }
    }
    if q.rq_posted > q.rq_wqe_cnt || (q.rq_posted > 0 && q.srq.is_some()) {
        return Err(err(line, format!("rq_posted={}: more than the receive queue holds", q.rq_posted)));
    }
    let (tail, n) = q.sq_posted;
    if (q.sq_wqes || n > 0) && q.kind != ResourceKind::Qp {
        return Err(err(line, "sq_wqes and sq_posted= need a QP (kind=qp)"));
    }
    if tail >= q.sq_wqe_cnt.max(1) || n > q.sq_wqe_cnt {
        return Err(err(
            line,
            format!("sq_tail={tail} sq_posted={n}: outside a send queue of {} entries", q.sq_wqe_cnt),
        ));
    }
    let srq_words = q.srq_wqe_cnt.is_some() || q.srq_stride.is_some() || q.srq_posted > 0;
    if srq_words && q.srq.is_none() {
        return Err(err(line, "srq_wqe_cnt=, srq_stride= and srq_posted= need an srq"));
    }
    let size = q.srq_wqe_cnt.unwrap_or(IMAGE_SRQ_ENTRIES);
    if !(1..=IMAGE_SRQ_ENTRIES).contains(&size) {
        return Err(err(line, format!("srq_wqe_cnt={size}: must be 1 to 65536")));
    }
    if let Some(stride) = q.srq_stride.filter(|s| !s.is_power_of_two() || *s < 32) {
        return Err(err(line, format!("srq_stride={stride}: a power of two from 32")));
    }
    if q.srq_posted > size {
        return Err(err(line, format!("srq_posted={}: more than the srq holds ({size})", q.srq_posted)));
    }
    Ok(())
}

/// The size of a queue's WQEs and how many it has, for the first `qp` line numbered `qpn`
/// that registered a buffer for `queue`; its index.
fn wqe_queue(qps: &[ImageQp], qpn: u32, queue: WqeQueue) -> Option<(usize, u32, u32)> {
    qps.iter().enumerate().find_map(|(i, q)| {
        if q.qpn != qpn {
            return None;
        }
        match queue {
            WqeQueue::Sq if q.sq_wqes => Some((i, SEND_WQEBB, q.sq_wqe_cnt)),
            WqeQueue::Rq => q.rq_stride.map(|(s, _)| (i, s, q.rq_wqe_cnt)),
            WqeQueue::Srq => {
                // The SRQ's words may be on another line naming it.
                let srqn = srqn_of(q, i)?;
                let same = |(j, p): &(usize, &ImageQp)| srqn_of(p, *j) == Some(srqn);
                let stride = qps.iter().enumerate().filter(same).find_map(|(_, p)| p.srq_stride)?;
                let size = qps.iter().enumerate().filter(same).find_map(|(_, p)| p.srq_wqe_cnt);
                Some((i, stride, size.unwrap_or(IMAGE_SRQ_ENTRIES)))
            }
            _ => None,
        }
    })
}

/// The `mr` and `wqe` lines, checked against the `qp` lines they name; any other kind of
/// line is refused, as a reader that predates them refuses these.
pub(super) fn ext_lines(lines: &[ExtLine], qps: &[ImageQp]) -> Result<(Vec<ImageMr>, Vec<ImageWqe>), ImageError> {
    let (mut mrs, mut wqes) = (Vec::new(), Vec::new());
    for l in lines {
        let line = l.words.line;
        let words = l.words.pairs();
        let get = |k: &str| -> Result<&str, ImageError> {
            words
                .iter()
                .find(|(kk, _)| *kk == k)
                .and_then(|(_, v)| *v)
                .ok_or_else(|| err(line, format!("{} line needs {k}=", l.kind)))
        };
        let num = |k: &str, hex: bool| -> Result<u32, ImageError> {
            num_word(k, get(k)?, hex).map_err(|e| err(line, e.to_string()))
        };
        match l.kind.as_str() {
            "mr" => {
                let addr = get("addr")?;
                let addr = parse_u64_hex(addr).ok_or_else(|| err(line, format!("addr={addr} is not a hex address")))?;
                let (lkey, len) = (num("lkey", true)?, num("len", false)?);
                if len == 0 || addr.checked_add(u64::from(len)).is_none() {
                    return Err(err(
                        line,
                        format!("mr of {len} bytes at {addr:#x}: at least 1 byte, inside the address space"),
                    ));
                }
                if mrs.iter().any(|m: &ImageMr| m.lkey == lkey) {
                    return Err(err(line, format!("lkey {lkey:#x} is given twice")));
                }
                mrs.push(ImageMr { lkey, addr, len });
            }
            "wqe" => {
                let qpn = num("qpn", true)?;
                let queue = match get("queue")? {
                    "sq" => WqeQueue::Sq,
                    "rq" => WqeQueue::Rq,
                    "srq" => WqeQueue::Srq,
                    w => return Err(err(line, format!("queue={w}: must be sq, rq or srq"))),
                };
                let index = num("index", false)?;
                let hex = get("bytes")?;
                let bytes = parse_hex_bytes(hex).ok_or_else(|| err(line, "bytes= is not whole bytes of hex"))?;
                let (_, stride, size) = wqe_queue(qps, qpn, queue)
                    .ok_or_else(|| err(line, format!("no qp line {qpn:x} has a registered {} buffer", queue.word())))?;
                if index >= size || bytes.len() > stride as usize {
                    return Err(err(
                        line,
                        format!("wqe {index} of {} bytes: the queue has {size} wqes of {stride} bytes", bytes.len()),
                    ));
                }
                wqes.push(ImageWqe { qpn, queue, index, bytes });
            }
            kind => return Err(err(line, format!("unknown line kind {kind:?}: mlx5 rings know qp, mr and wqe lines"))),
        }
    }
    Ok((mrs, wqes))
}

/// The SRQ number a `qp` line names: its own, or (a bare `srq`) a number no CQE names,
/// reachable through the line's user index (cqe_ver=1).
fn srqn_of(q: &ImageQp, i: usize) -> Option<u32> {
    match q.srq {
        None => None,
        Some(Some(n)) => Some(n),
        Some(None) => Some(0xff_ffff - i as u32),
    }
}

/// Registers the entry of `qp` line `i` (at text line `line`, if read from text) and what
/// it has posted.
pub(super) fn add_line(r: &mut Registry, q: &ImageQp, i: usize, line: Option<usize>) -> Result<(), ImageError> {
    let at = |e: RegistryError| match line {
        Some(line) => ImageError::new(line, e.to_string()),
        None => ImageError::new(0, format!("qp {} of the image: {e}", i + 1)),
    };
    let srqn = srqn_of(q, i);
    let uidx = q.uidx.unwrap_or(i as u32);
    match q.kind {
        ResourceKind::XrcSrq => {
            r.add_xrc_srq(q.qpn, uidx, q.srq_wqe_cnt.unwrap_or(IMAGE_SRQ_ENTRIES)).map_err(at)?;
        }
        ResourceKind::Rwq => {
            let rq = r.add_rwq(q.qpn, uidx, q.rq_wqe_cnt).map_err(at)?;
            for k in 0..q.rq_posted {
                rq.post(u64::from(k));
            }
        }
        ResourceKind::Qp => {
            if let Some(n) = srqn {
                match r.srq(n) {
                    None => {
                        r.add_srq(n, q.srq_wqe_cnt.unwrap_or(IMAGE_SRQ_ENTRIES)).map_err(at)?;
                    }
                    Some(s) if q.srq_wqe_cnt.is_some_and(|c| c != s.wqe_cnt()) => {
                        let msg = format!("srq {n:#x} has {} entries on an earlier line", s.wqe_cnt());
                        return Err(line.map_or(ImageError::new(0, msg.clone()), |l| ImageError::new(l, msg)));
                    }
                    Some(_) => {}
                }
            }
            let cfg = QpConfig {
                qpn: q.qpn,
                sq_wqe_cnt: q.sq_wqe_cnt,
                rq_wqe_cnt: q.rq_wqe_cnt,
                srqn,
                rx_csum: q.rx_csum,
                qp_type: q.qp_type,
                uidx: q.uidx,
            };
            let qp = r.add_qp(cfg).map_err(at)?;
            for k in 0..q.rq_posted {
                qp.rq.post(u64::from(k));
            }
            let (tail, n) = q.sq_posted;
            qp.sq.set_posted(tail, n);
        }
    }
    if let Some(srq) = srqn.and_then(|n| r.srq_mut(n)) {
        for k in 0..q.srq_posted {
            srq.post(k as u16, u64::from(k));
        }
    }
    Ok(())
}

/// A zeroed buffer of `len` bytes holding `wqes` (index, bytes) of `stride` bytes each.
fn wq_buffer(len: usize, stride: u32, wqes: &[&ImageWqe]) -> Result<WqBuffer, ImageError> {
    let setup = |e: dvcq_provider::Error| ImageError::new(0, format!("setting up a wqe buffer: {e}"));
    let mem = Arc::new(DmaBuffer::new(len).map_err(setup)?);
    for w in wqes {
        mem.write_bytes(w.index as usize * stride as usize, &w.bytes).map_err(setup)?;
    }
    mem.wq_buffer(0, len).map_err(setup)
}

/// Registers the image's WQE buffers with their `wqe` lines' bytes, and its memory regions.
pub(super) fn add_buffers(r: &mut Registry, img: &Mlx5Image) -> Result<(), ImageError> {
    let reg_err = |e: RegistryError| ImageError::new(0, e.to_string());
    let of = |qpn: u32, queue: WqeQueue| -> Vec<&ImageWqe> {
        img.wqes.iter().filter(|w| w.qpn == qpn && w.queue == queue).collect()
    };
    let mut srq_done = Vec::new();
    for (i, q) in img.qps.iter().enumerate() {
        if let Some((stride, sig)) = q.rq_stride {
            let buf = wq_buffer((q.rq_wqe_cnt * stride) as usize, stride, &of(q.qpn, WqeQueue::Rq))?;
            r.set_recv_wqes(q.qpn, buf, stride, sig).map_err(reg_err)?;
        }
        if q.sq_wqes {
            let buf = wq_buffer((q.sq_wqe_cnt * SEND_WQEBB) as usize, SEND_WQEBB, &of(q.qpn, WqeQueue::Sq))?;
            r.set_send_wqes(q.qpn, buf).map_err(reg_err)?;
        }
        let (Some(srqn), Some(stride)) = (srqn_of(q, i), q.srq_stride) else {
            continue;
        };
        if srq_done.contains(&srqn) {
            continue;
        }
        srq_done.push(srqn);
        let size = r.srq(srqn).map_or(0, |s| s.wqe_cnt());
        // WQEs are given by the number of any line naming the SRQ.
        let named: Vec<u32> =
            img.qps.iter().enumerate().filter(|(j, p)| srqn_of(p, *j) == Some(srqn)).map(|(_, p)| p.qpn).collect();
        let wqes: Vec<&ImageWqe> =
            img.wqes.iter().filter(|w| w.queue == WqeQueue::Srq && named.contains(&w.qpn)).collect();
        let buf = wq_buffer((size * stride) as usize, stride, &wqes)?;
        r.set_srq_wqes(srqn, buf, stride).map_err(reg_err)?;
    }
    let setup = |e: dvcq_provider::Error| ImageError::new(0, format!("setting up a memory region: {e}"));
    for m in &img.mrs {
        let mem = Arc::new(DmaBuffer::new(m.len as usize).map_err(setup)?);
        let region = mem.memory_region_at(0, m.len as usize, m.lkey, m.addr).map_err(setup)?;
        r.add_memory_region(region).map_err(reg_err)?;
    }
    Ok(())
}

/// Appends a `qp` line.
pub(super) fn write_qp(s: &mut String, q: &ImageQp) {
    let _ = write!(s, "qp qpn={:x} sq_wqe_cnt={} rq_wqe_cnt={}", q.qpn, q.sq_wqe_cnt, q.rq_wqe_cnt);
    match q.srq {
        Some(Some(n)) => {
            let _ = write!(s, " srq={n:x}");
        }
        Some(None) => s.push_str(" srq"),
        None => {}
    }
    match q.qp_type {
        QpType::Rc => {}
        // The format's own word, which every reader knows.
        QpType::Ud => s.push_str(" ud"),
        t => {
            let _ = write!(s, " qp_type={}", t.word());
        }
    }
    if q.rx_csum {
        s.push_str(" rx_csum");
    }
    if let Some(u) = q.uidx {
        let _ = write!(s, " uidx={u:x}");
    }
    match q.kind {
        ResourceKind::Qp => {}
        ResourceKind::XrcSrq => s.push_str(" kind=xrc_srq"),
        ResourceKind::Rwq => s.push_str(" kind=rwq"),
    }
    if let Some((stride, sig)) = q.rq_stride {
        let _ = write!(s, " rq_stride={stride}");
        if sig {
            s.push_str(" rq_sig");
        }
    }
    if q.rq_posted > 0 {
        let _ = write!(s, " rq_posted={}", q.rq_posted);
    }
    if q.sq_wqes {
        s.push_str(" sq_wqes");
    }
    if q.sq_posted.1 > 0 {
        let _ = write!(s, " sq_tail={} sq_posted={}", q.sq_posted.0, q.sq_posted.1);
    }
    if let Some(n) = q.srq_wqe_cnt {
        let _ = write!(s, " srq_wqe_cnt={n}");
    }
    if let Some(n) = q.srq_stride {
        let _ = write!(s, " srq_stride={n}");
    }
    if q.srq_posted > 0 {
        let _ = write!(s, " srq_posted={}", q.srq_posted);
    }
    s.push('\n');
}

/// Appends the `mr` and `wqe` lines.
pub(super) fn write_ext(s: &mut String, img: &Mlx5Image) {
    for m in &img.mrs {
        let _ = writeln!(s, "mr lkey={:x} addr={:x} len={}", m.lkey, m.addr, m.len);
    }
    for w in &img.wqes {
        let _ = write!(s, "wqe qpn={:x} queue={} index={} bytes=", w.qpn, w.queue.word(), w.index);
        for b in &w.bytes {
            let _ = write!(s, "{b:02x}");
        }
        s.push('\n');
    }
}

/// The WQEs of `buf` of `stride` bytes that hold anything, trailing zero bytes dropped.
fn nonzero_wqes(buf: &WqBuffer, stride: u32, count: u32, qpn: u32, queue: WqeQueue, out: &mut Vec<ImageWqe>) {
    for index in 0..count {
        let base = index as usize * stride as usize;
        let mut bytes = Vec::with_capacity(stride as usize);
        for off in (0..stride as usize).step_by(8) {
            bytes.extend_from_slice(&buf.bytes8(base + off).unwrap_or_default());
        }
        while bytes.last() == Some(&0) {
            bytes.pop();
        }
        if !bytes.is_empty() {
            out.push(ImageWqe { qpn, queue, index, bytes });
        }
    }
}

/// What a registry holds, as `qp`, `mr` and `wqe` lines.
pub(super) fn export(registry: &Registry) -> (Vec<ImageQp>, Vec<ImageMr>, Vec<ImageWqe>) {
    let mut qps = Vec::new();
    let mut wqes = Vec::new();
    let mut srqs_named = Vec::new();
    for (i, q) in registry.qps().iter().enumerate() {
        let c = q.config();
        let slot = i as u32;
        let mut line = ImageQp {
            qpn: c.qpn,
            sq_wqe_cnt: c.sq_wqe_cnt,
            rq_wqe_cnt: c.rq_wqe_cnt,
            srq: c.srqn.map(Some),
            qp_type: c.qp_type,
            rx_csum: c.rx_csum,
            kind: q.kind(),
            // Written where it is not the line's order, which readers assume.
            uidx: (q.uidx() != slot).then_some(q.uidx()),
            ..ImageQp::default()
        };
        if q.kind() != ResourceKind::XrcSrq && c.srqn.is_none() {
            let n = q.rq.outstanding();
            line.rq_posted = if n <= q.rq.wqe_cnt() { n } else { 0 };
        }
        if q.kind() == ResourceKind::Qp {
            line.sq_posted = q.sq.posted_bbs();
            if let Some(w) = registry.recv_wqes_at(slot) {
                line.rq_stride = Some((w.stride(), w.signature()));
                nonzero_wqes(w.buffer(), w.stride(), c.rq_wqe_cnt, c.qpn, WqeQueue::Rq, &mut wqes);
            }
            if let Some(w) = registry.send_wqes_at(slot) {
                line.sq_wqes = true;
                nonzero_wqes(w.buffer(), SEND_WQEBB, c.sq_wqe_cnt, c.qpn, WqeQueue::Sq, &mut wqes);
            }
        }
        // The SRQ's own words go on the first line naming it.
        if let Some(srqn) = c.srqn.filter(|n| !srqs_named.contains(n)) {
            srqs_named.push(srqn);
            if let Some((s_slot, s)) =
                registry.srqs().iter().enumerate().find(|(_, s)| s.srqn() == srqn).map(|(k, s)| (k as u32, s))
            {
                line.srq_wqe_cnt = (s.wqe_cnt() != IMAGE_SRQ_ENTRIES).then_some(s.wqe_cnt());
                let n = s.outstanding();
                line.srq_posted = if n <= u64::from(s.wqe_cnt()) { n as u32 } else { 0 };
                if let Some(w) = registry.srq_wqes_at(s_slot) {
                    line.srq_stride = Some(w.stride());
                    nonzero_wqes(w.buffer(), w.stride(), s.wqe_cnt(), c.qpn, WqeQueue::Srq, &mut wqes);
                }
            }
        }
        qps.push(line);
    }
    let mrs = registry
        .memory_regions()
        .iter()
        .map(|m| ImageMr { lkey: m.lkey(), addr: m.addr(), len: m.len().min(u32::MAX as usize) as u32 })
        .collect();
    (qps, mrs, wqes)
}
