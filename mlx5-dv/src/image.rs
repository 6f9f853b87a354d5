//! mlx5 ring images (shared/ring-image.md): reading the mlx5 words of an image, decoding
//! its slots with the same poller a live CQ uses, and writing images (the model exports
//! its ring this way).
//!
//! Work queues get identity wr_id tables, so `wqe_idx` is the index rdma-core would use into
//! its wr_id table (masked for SQ/RQ, unmasked for SRQ). User indexes (`cqe_ver=1`) are the
//! `qp` lines' order, 0, 1, 2, ..., unless the lines give them (`uidx=<hex>`, a word beyond
//! the format's own: a ring captured on a device has the indexes rdma-core gave). A
//! `sig_mkeys=<hex>,...` word on the ring line lists the signature mkeys a SIG_ERR CQE is
//! recorded on (readers that do not know it swallow every SIG_ERR, as before).

use crate::cq::{CiUpdate, CqConfig, Mlx5Cq};
use crate::cqe::CqeVersion;
use crate::mini::{CompLayout, CompressionConfig, MiniFormat};
use crate::registry::{QpConfig, Registry};
use dvcq_provider::image::{
    num_word, parse_image, write_slots, DecodeItem, EndState, ImageError, ImageVendor, RawImage,
};
use dvcq_provider::{Completion, DmaBuffer};
use std::fmt::Write as _;
use std::sync::Arc;

/// SRQ table size for images: SRQ wr_ids are indexed by the unmasked 16-bit counter.
const IMAGE_SRQ_ENTRIES: u32 = 1 << 16;

/// A `qp` line of an mlx5 image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageQp {
    /// 24-bit QP number.
    pub qpn: u32,
    /// Send queue entries (power of two).
    pub sq_wqe_cnt: u32,
    /// Receive queue entries (power of two).
    pub rq_wqe_cnt: u32,
    /// `srq` (`Some(None)`) or `srq=<hex srqn>` (`Some(Some(n))`).
    pub srq: Option<Option<u32>>,
    /// UD QP.
    pub ud: bool,
    /// `uidx=<hex>`: the QP's user index (CQE version 1); by default the line's order.
    pub uidx: Option<u32>,
}

/// An mlx5 ring image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mlx5Image {
    /// 64 or 128.
    pub cqe_size: u32,
    /// Slots.
    pub entries: u32,
    /// The running consumer counter.
    pub ci: u32,
    /// How CQEs name their QP.
    pub cqe_version: CqeVersion,
    /// `comp=` and `mini=`: the CQ was created with CQE compression.
    pub compression: Option<CompressionConfig>,
    /// The `qp` lines.
    pub qps: Vec<ImageQp>,
    /// `sig_mkeys=<hex>,<hex>,...` on the ring line: the signature-enabled mkeys' indexes
    /// (`mkey >> 8`) a SIG_ERR CQE is recorded on without an item
    /// ([`crate::Registry::add_sig_mkey`]); a SIG_ERR naming another is a `sig_err` item.
    pub sig_mkeys: Vec<u32>,
    /// `entries * cqe_size` bytes.
    pub slots: Vec<u8>,
    /// The file line of each `qp` line, when the image was read from text.
    qp_lines: QpLines,
}

/// The file lines of an image's `qp` lines, for messages. Where an image was read from is not
/// part of its value: any two compare equal, so an image read back from its text equals the
/// image it was written from.
#[derive(Debug, Clone, Default)]
struct QpLines(Vec<usize>);

impl PartialEq for QpLines {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for QpLines {}

/// Parses an mlx5 ring image.
///
/// # Errors
///
/// [`ImageError`] with the line of the first problem.
pub fn parse_mlx5_image(text: &str) -> Result<Mlx5Image, ImageError> {
    from_raw(&parse_image(text)?)
}

/// The mlx5 reading of a parsed container.
///
/// # Errors
///
/// [`ImageError`] for an irdma ring or invalid mlx5 words.
pub fn from_raw(raw: &RawImage) -> Result<Mlx5Image, ImageError> {
    let line = raw.ring_line;
    if raw.vendor != ImageVendor::Mlx5 {
        return Err(ImageError::new(line, "not an mlx5 ring (vendor=irdma or cqe_size=32)"));
    }
    let cqe_version = match raw.get("cqe_ver") {
        None | Some("0") => CqeVersion::V0,
        Some("1") => CqeVersion::V1,
        Some(v) => return Err(ImageError::new(line, format!("cqe_ver={v}: must be 0 or 1"))),
    };
    let compression = match (raw.get("comp"), raw.get("mini")) {
        (None, None) => None,
        (Some(c), m) => {
            let layout = CompLayout::from_word(c)
                .ok_or_else(|| ImageError::new(line, format!("comp={c}: must be basic or enhanced")))?;
            let m = m.unwrap_or(MiniFormat::Hash.word());
            let format = MiniFormat::from_word(m).ok_or_else(|| {
                ImageError::new(line, format!("mini={m}: must be hash, csum, csum_stridx, ftag_stridx or l34h_stridx"))
            })?;
            Some(CompressionConfig { layout, format })
        }
        (None, Some(_)) => return Err(ImageError::new(line, "mini= without comp=")),
    };
    let qps = raw.qps.iter().map(|q| qp_from_words(&q.pairs(), q.line)).collect::<Result<Vec<_>, _>>()?;
    let sig_mkeys = match raw.get("sig_mkeys") {
        None => Vec::new(),
        Some(list) => list
            .split(',')
            .map(|m| match parse_num(m, true) {
                Some(i) if i <= 0xff_ffff => Ok(i),
                Some(i) => Err(ImageError::new(line, format!("sig_mkeys: mkey index {i:#x} is wider than 24 bits"))),
                None => Err(ImageError::new(line, format!("sig_mkeys: {m:?} is not a hex mkey index"))),
            })
            .collect::<Result<Vec<_>, _>>()?,
    };
    Ok(Mlx5Image {
        cqe_size: raw.cqe_size,
        entries: raw.entries,
        ci: raw.ci,
        cqe_version,
        compression,
        qps,
        sig_mkeys,
        slots: raw.slots.clone(),
        qp_lines: QpLines(raw.qps.iter().map(|q| q.line).collect()),
    })
}

fn qp_from_words(words: &[(&str, Option<&str>)], line: usize) -> Result<ImageQp, ImageError> {
    let mut q = ImageQp { qpn: 0, sq_wqe_cnt: 0, rq_wqe_cnt: 0, srq: None, ud: false, uidx: None };
    let mut have = [false; 3];
    for &(k, v) in words {
        let need = |hex: bool| -> Result<u32, ImageError> {
            let v = v.ok_or_else(|| ImageError::new(line, format!("{k} needs a value")))?;
            num_word(k, v, hex).map_err(|msg| ImageError::new(line, msg))
        };
        match k {
            "qpn" => {
                q.qpn = need(true)?;
                have[0] = true;
            }
            "sq_wqe_cnt" => {
                q.sq_wqe_cnt = need(false)?;
                have[1] = true;
            }
            "rq_wqe_cnt" => {
                q.rq_wqe_cnt = need(false)?;
                have[2] = true;
            }
            "srq" => q.srq = Some(if v.is_some() { Some(need(true)?) } else { None }),
            "ud" => q.ud = true,
            "uidx" => q.uidx = Some(need(true)?),
            _ => {}
        }
    }
    if have != [true; 3] {
        return Err(ImageError::new(line, "qp line needs qpn=, sq_wqe_cnt= and rq_wqe_cnt="));
    }
    for (what, n) in [("qpn", Some(q.qpn)), ("uidx", q.uidx)] {
        if let Some(n) = n.filter(|&n| n > 0xff_ffff) {
            return Err(ImageError::new(
                line,
                format!("{what} {n:#x} is wider than 24 bits: out of range, 0x0 to 0xffffff"),
            ));
        }
    }
    for (what, n) in [("sq_wqe_cnt", q.sq_wqe_cnt), ("rq_wqe_cnt", q.rq_wqe_cnt)] {
        // A QP on an SRQ has no RQ of its own: 0, as rdma-core creates it, is fine there.
        let no_rq = what == "rq_wqe_cnt" && n == 0 && q.srq.is_some();
        if !no_rq && (!n.is_power_of_two() || n > 1 << 16) {
            return Err(ImageError::new(line, format!("{what}={n}: mlx5 work queues are powers of two up to 65536")));
        }
    }
    Ok(q)
}

impl Mlx5Image {
    /// The registry the image's `qp` lines describe (identity wr_id tables).
    ///
    /// # Errors
    ///
    /// [`ImageError`] for duplicate QPNs, at the `qp` line's own line of the text the image
    /// was read from (an image built in code names the QP's place in [`Mlx5Image::qps`]).
    pub fn registry(&self) -> Result<Registry, ImageError> {
        let mut r = Registry::new();
        for (i, q) in self.qps.iter().enumerate() {
            let at = |e: crate::registry::RegistryError| match self.qp_lines.0.get(i) {
                Some(&line) => ImageError::new(line, e.to_string()),
                None => ImageError::new(0, format!("qp {} of the image: {e}", i + 1)),
            };
            let srqn = match q.srq {
                None => None,
                Some(Some(n)) => Some(n),
                // A bare `srq`: an SRQ of its own, with a number no CQE names (reachable
                // through the QP's user index with cqe_ver=1).
                Some(None) => Some(0xff_ffff - i as u32),
            };
            if let Some(n) = srqn {
                if r.srq_mut(n).is_none() {
                    r.add_srq(n, IMAGE_SRQ_ENTRIES).map_err(at)?;
                }
            }
            let cfg = QpConfig {
                qpn: q.qpn,
                sq_wqe_cnt: q.sq_wqe_cnt,
                rq_wqe_cnt: q.rq_wqe_cnt,
                srqn,
                rx_csum: false,
                qp_type: if q.ud { crate::registry::QpType::Ud } else { crate::registry::QpType::Rc },
                uidx: q.uidx,
            };
            r.add_qp(cfg).map_err(at)?;
        }
        for &m in &self.sig_mkeys {
            r.add_sig_mkey(m).map_err(|e| ImageError::new(0, format!("sig_mkeys: {e}")))?;
        }
        Ok(r)
    }

    /// The image as text, parseable by [`parse_mlx5_image`].
    pub fn to_text(&self) -> String {
        let mut s = format!("ring cqe_size={} entries={} ci={} vendor=mlx5", self.cqe_size, self.entries, self.ci);
        if self.cqe_version == CqeVersion::V1 {
            s.push_str(" cqe_ver=1");
        }
        if let Some(c) = &self.compression {
            let _ = write!(s, " comp={} mini={}", c.layout.word(), c.format.word());
        }
        if !self.sig_mkeys.is_empty() {
            let list: Vec<String> = self.sig_mkeys.iter().map(|m| format!("{m:x}")).collect();
            let _ = write!(s, " sig_mkeys={}", list.join(","));
        }
        s.push('\n');
        for q in &self.qps {
            let _ = write!(s, "qp qpn={:x} sq_wqe_cnt={} rq_wqe_cnt={}", q.qpn, q.sq_wqe_cnt, q.rq_wqe_cnt);
            match q.srq {
                Some(Some(n)) => {
                    let _ = write!(s, " srq={n:x}");
                }
                Some(None) => s.push_str(" srq"),
                None => {}
            }
            if q.ud {
                s.push_str(" ud");
            }
            if let Some(u) = q.uidx {
                let _ = write!(s, " uidx={u:x}");
            }
            s.push('\n');
        }
        write_slots(&mut s, &self.slots, self.cqe_size as usize);
        s
    }

    /// An image of a ring's bytes with the QPs of `registry`, at consumer position `ci`, of
    /// a CQ created with `compression` (or none).
    pub fn from_ring(
        cqe_size: u32,
        ci: u32,
        version: CqeVersion,
        compression: Option<CompressionConfig>,
        registry: &Registry,
        slots: Vec<u8>,
    ) -> Self {
        let entries = (slots.len() / cqe_size.max(1) as usize) as u32;
        // XRC SRQs and receive WQs have no `qp` line: the format has none for them.
        let qps = registry
            .qps()
            .iter()
            .filter(|q| q.kind() == crate::registry::ResourceKind::Qp)
            .enumerate()
            .map(|(i, q)| {
                let c = q.config();
                ImageQp {
                    qpn: c.qpn,
                    sq_wqe_cnt: c.sq_wqe_cnt,
                    rq_wqe_cnt: c.rq_wqe_cnt,
                    srq: c.srqn.map(Some),
                    ud: c.qp_type == crate::registry::QpType::Ud,
                    // Written where it is not the line's order, which readers assume.
                    uidx: (q.uidx() != i as u32).then_some(q.uidx()),
                }
            })
            .collect();
        Self {
            cqe_size,
            entries,
            ci,
            cqe_version: version,
            compression,
            qps,
            sig_mkeys: registry.sig_mkeys(),
            slots,
            qp_lines: QpLines::default(),
        }
    }
}

impl<const STRIDE: usize> Mlx5Cq<STRIDE> {
    /// This CQ's ring as an image (its bytes now, its settings, the QPs of its registry)
    /// whose decoding starts at running position `ci`: [`Mlx5Cq::ci`] to see what is
    /// waiting, or a position behind it to replay CQEs already polled that are still in the
    /// ring (the last lap's, up to the slots the device has written again since).
    pub fn ring_image(&self, ci: u32) -> Mlx5Image {
        let mut slots = vec![0u8; self.ring.entries() as usize * STRIDE];
        for (i, slot) in slots.chunks_exact_mut(STRIDE).enumerate() {
            // Whole slots inside the ring: the read cannot fail.
            let _ = self.ring.read_bytes(i as u32, 0, slot);
        }
        Mlx5Image::from_ring(STRIDE as u32, ci, self.cfg.cqe_version, self.cfg.compression, &self.registry, slots)
    }
}

/// Decodes an image into the canonical items, in poll order, and the end state.
///
/// # Errors
///
/// [`ImageError`] when the image cannot be set up (duplicate QPs, memory).
pub fn decode_image(img: &Mlx5Image) -> Result<(Vec<DecodeItem>, EndState), ImageError> {
    let registry = img.registry()?;
    let setup = |e: dvcq_provider::Error| ImageError::new(0, format!("setting up the ring: {e}"));
    let mem = Arc::new(DmaBuffer::new(img.slots.len()).map_err(setup)?);
    let db = Arc::new(DmaBuffer::new(64).map_err(setup)?);
    let cfg = CqConfig {
        cqe_version: img.cqe_version,
        ci_update: CiUpdate::EveryPoll,
        overrun_ignore: false,
        compression: img.compression,
    };
    match img.cqe_size {
        64 => decode_with::<64>(img, &mem, &db, registry, cfg),
        128 => decode_with::<128>(img, &mem, &db, registry, cfg),
        s => Err(ImageError::new(0, format!("cqe_size={s}: mlx5 CQEs are 64 or 128 bytes"))),
    }
}

fn decode_with<const S: usize>(
    img: &Mlx5Image,
    mem: &Arc<DmaBuffer>,
    db: &Arc<DmaBuffer>,
    registry: Registry,
    cfg: CqConfig,
) -> Result<(Vec<DecodeItem>, EndState), ImageError> {
    let setup = |e: dvcq_provider::Error| ImageError::new(0, format!("setting up the ring: {e}"));
    let ring = mem.cq_ring::<S>(0, img.entries).map_err(setup)?;
    for (i, slot) in img.slots.chunks_exact(S).enumerate() {
        ring.write_bytes(i as u32, 0, &slot[..S - 1]).map_err(setup)?;
        ring.publish_u8(i as u32, S - 1, slot[S - 1]).map_err(setup)?;
    }
    let dbrec = db.doorbell(0).map_err(setup)?;
    let mut cq =
        Mlx5Cq::<S>::new(ring, dbrec, 0, img.ci, registry, cfg).map_err(|e| ImageError::new(0, e.to_string()))?;
    let mut items = Vec::new();
    // Each slot can be consumed at most once before the lap parity turns against it.
    for _ in 0..=img.entries {
        // A fresh zeroed completion each time: fields verbs leave undefined print as 0.
        let mut wc = [Completion::default()];
        if cq.poll(&mut wc) == 0 {
            break;
        }
        items.push(DecodeItem::from_completion(&wc[0], img.entries));
    }
    let dbrec_ci = (cq.ci() != img.ci).then(|| cq.last_set_ci()).flatten();
    Ok((items, EndState { ci: cq.ci(), dbrec_ci }))
}

#[cfg(all(test, feature = "model"))]
mod tests {
    use super::*;
    use crate::model::{build, Mlx5Model, ModelConfig};
    use dvcq_uapi::mlx5::opcode::cqe_opcode;

    /// A poller's ring image decodes to what the poller returned: from behind the consumer,
    /// the CQEs already polled and then the ones waiting; at the consumer, only those.
    #[test]
    fn a_pollers_ring_image_replays_what_it_polled() {
        let mut m = Mlx5Model::new(ModelConfig::new(16)).unwrap();
        let mut reg = Registry::new();
        reg.add_qp(QpConfig::rc(0x12, 64, 64)).unwrap();
        let mut cq = m.poller::<64>(reg, CqConfig::default()).unwrap();
        // 20 completions: the ring (16) wraps once; the first 17 are polled.
        for i in 0..20u16 {
            m.push(&build::resp(cqe_opcode::RESP_SEND, 0x12, i, 8 + u32::from(i), 0)).unwrap();
            if i < 17 {
                assert_eq!(cq.poll(&mut [Completion::default()]), 1);
            }
        }
        let waiting = 3;
        let replay = cq.ring_image(cq.ci() - (16 - waiting));
        let (items, end) = decode_image(&replay).unwrap();
        assert_eq!(items.len(), 16, "the last lap still in the ring: 13 polled, 3 waiting");
        let lens: Vec<u32> = items
            .iter()
            .map(|i| match i {
                dvcq_provider::image::DecodeItem::Wc(c) => c.byte_len,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(lens, (4..20).map(|i| 8 + i).collect::<Vec<u32>>());
        assert_eq!(end.ci, 20);
        // The text round-trips, and at the consumer only the waiting CQEs decode.
        let (again, _) = decode_image(&super::parse_mlx5_image(&replay.to_text()).unwrap()).unwrap();
        assert_eq!(again, items);
        assert_eq!(decode_image(&cq.ring_image(cq.ci())).unwrap().0.len(), waiting as usize);
    }
}
