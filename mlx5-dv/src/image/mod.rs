//! mlx5 ring images (the `ring`/`qp`/slot format): reading the mlx5 words of an image,
//! decoding its slots with the same poller a live CQ uses, and writing images (the model
//! and a live poller's registry export their ring this way).
//!
//! Work queues get identity wr_id tables, so `wqe_idx` is the index rdma-core would use into
//! its wr_id table (masked for SQ/RQ, unmasked for SRQ). User indexes (`cqe_ver=1`) are the
//! `qp` lines' order, 0, 1, 2, ..., unless the lines give them (`uidx=<hex>`: a ring
//! captured on a device has the indexes rdma-core gave).
//!
//! Everything else a poller's registry holds that changes what a CQE polls to has words of
//! its own, beyond the format's first ones (docs/ring-image.md, "mlx5: the words and lines for a full registry", lists them):
//! readers that predate them ignore the words, and refuse the two line kinds (the `queues` module).
//!
//! - ring line: `sig_mkeys=<hex>,...`, the signature mkeys SIG_ERR CQEs are recorded on;
//!   `null_lkey=<hex>`, the null memory region's key;
//! - `qp` line: `qp_type=<word>` ([`QpType::word`]) and `rx_csum`; `kind=xrc_srq` or
//!   `kind=rwq` for the XRC SRQs and receive WQs a CQE names by user index; the registered
//!   WQE buffers and what is posted in them (`rq_stride=`, `rq_sig`, `rq_posted=`,
//!   `sq_wqes`, `sq_tail=`, `sq_posted=`, `srq_wqe_cnt=`, `srq_stride=`, `srq_posted=`);
//! - `mr` lines (memory regions inline data may be copied into) and `wqe` lines (the
//!   bytes of a posted WQE), between the `qp` lines and the slots.

mod queues;

pub use queues::{ImageMr, ImageWqe, WqeQueue};

use crate::cq::{CiUpdate, CqConfig, Mlx5Cq};
use crate::cqe::CqeVersion;
use crate::mini::{CompLayout, CompressionConfig, MiniFormat};
use crate::registry::{QpType, Registry, ResourceKind};
use dvcq_provider::image::{
    num_word, parse_image, parse_num, write_slots, DecodeItem, EndState, ImageError, ImageVendor, RawImage,
};
use dvcq_provider::{Completion, DmaBuffer};
use std::fmt::Write as _;
use std::sync::Arc;

/// SRQ table size for images: SRQ wr_ids are indexed by the unmasked 16-bit counter.
const IMAGE_SRQ_ENTRIES: u32 = 1 << 16;

/// A `qp` line of an mlx5 image: a QP, or an XRC SRQ or receive WQ (`kind=`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageQp {
    /// 24-bit QP number (the SRQ number of an XRC SRQ, the WQ number of a receive WQ).
    pub qpn: u32,
    /// Send queue entries (power of two).
    pub sq_wqe_cnt: u32,
    /// Receive queue entries (power of two).
    pub rq_wqe_cnt: u32,
    /// `srq` (`Some(None)`) or `srq=<hex srqn>` (`Some(Some(n))`).
    pub srq: Option<Option<u32>>,
    /// `qp_type=<word>`, or `ud` for a UD QP; RC by default.
    pub qp_type: QpType,
    /// `rx_csum`: a raw Ethernet QP with the RX checksum capability.
    pub rx_csum: bool,
    /// `kind=xrc_srq` or `kind=rwq`; a QP by default.
    pub kind: ResourceKind,
    /// `uidx=<hex>`: the user index (CQE version 1); by default the line's order.
    pub uidx: Option<u32>,
    /// `rq_stride=<bytes>` (and `rq_sig`): the RQ's WQE buffer is registered, with WQEs of
    /// that size (starting with a signature segment).
    pub rq_stride: Option<(u32, bool)>,
    /// `rq_posted=<n>`: receives outstanding on the RQ.
    pub rq_posted: u32,
    /// `sq_wqes`: the SQ's WQE buffer is registered.
    pub sq_wqes: bool,
    /// `sq_tail=<n> sq_posted=<n>`: WQEBBs from index `sq_tail` on holding outstanding
    /// work requests.
    pub sq_posted: (u32, u32),
    /// `srq_wqe_cnt=<n>`: entries of the SRQ this line names (default 65536).
    pub srq_wqe_cnt: Option<u32>,
    /// `srq_stride=<bytes>`: the SRQ's WQE buffer is registered, with WQEs of that size.
    pub srq_stride: Option<u32>,
    /// `srq_posted=<n>`: receives outstanding on the SRQ.
    pub srq_posted: u32,
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
    /// `null_lkey=<hex>` on the ring line ([`crate::Registry::set_null_lkey`]).
    pub null_lkey: Option<u32>,
    /// The `mr` lines: memory regions inline data may be copied into.
    pub mrs: Vec<ImageMr>,
    /// The `wqe` lines: posted WQEs' bytes in registered WQE buffers.
    pub wqes: Vec<ImageWqe>,
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
    let null_lkey = match raw.get("null_lkey") {
        None => None,
        Some(v) => {
            Some(parse_num(v, true).ok_or_else(|| ImageError::new(line, format!("null_lkey={v} is not a hex lkey")))?)
        }
    };
    let (mrs, wqes) = queues::ext_lines(&raw.lines, &qps)?;
    Ok(Mlx5Image {
        cqe_size: raw.cqe_size,
        entries: raw.entries,
        ci: raw.ci,
        cqe_version,
        compression,
        qps,
        sig_mkeys,
        null_lkey,
        mrs,
        wqes,
        slots: raw.slots.clone(),
        qp_lines: QpLines(raw.qps.iter().map(|q| q.line).collect()),
    })
}

fn qp_from_words(words: &[(&str, Option<&str>)], line: usize) -> Result<ImageQp, ImageError> {
    let mut q = ImageQp::default();
    let mut have = [false; 3];
    let mut ud = false;
    let mut qp_type = None;
    let mut sq_tail = None;
    let mut sq_posted = None;
    let mut rq_sig = false;
    for &(k, v) in words {
        let word = || v.ok_or_else(|| ImageError::new(line, format!("{k} needs a value")));
        let need = |hex: bool| -> Result<u32, ImageError> {
            let v = word()?;
            num_word(k, v, hex).map_err(|e| ImageError::new(line, e.to_string()))
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
            "ud" => ud = true,
            "qp_type" => {
                let w = word()?;
                qp_type = Some(QpType::from_word(w).ok_or_else(|| {
                    ImageError::new(
                        line,
                        format!("qp_type={w}: must be rc, uc, ud, raw_packet, xrc_send, xrc_recv or driver"),
                    )
                })?);
            }
            "rx_csum" => q.rx_csum = true,
            "uidx" => q.uidx = Some(need(true)?),
            "kind" => {
                q.kind = match word()? {
                    "qp" => ResourceKind::Qp,
                    "xrc_srq" => ResourceKind::XrcSrq,
                    "rwq" => ResourceKind::Rwq,
                    w => return Err(ImageError::new(line, format!("kind={w}: must be qp, xrc_srq or rwq"))),
                }
            }
            "rq_stride" => q.rq_stride = Some((need(false)?, false)),
            "rq_sig" => rq_sig = true,
            "rq_posted" => q.rq_posted = need(false)?,
            "sq_wqes" => q.sq_wqes = true,
            "sq_tail" => sq_tail = Some(need(false)?),
            "sq_posted" => sq_posted = Some(need(false)?),
            "srq_wqe_cnt" => q.srq_wqe_cnt = Some(need(false)?),
            "srq_stride" => q.srq_stride = Some(need(false)?),
            "srq_posted" => q.srq_posted = need(false)?,
            _ => {}
        }
    }
    if have != [true; 3] {
        return Err(ImageError::new(line, "qp line needs qpn=, sq_wqe_cnt= and rq_wqe_cnt="));
    }
    q.qp_type = match (ud, qp_type) {
        (false, t) => t.unwrap_or_default(),
        (true, None | Some(QpType::Ud)) => QpType::Ud,
        (true, Some(t)) => return Err(ImageError::new(line, format!("ud and qp_type={} disagree", t.word()))),
    };
    match q.kind {
        ResourceKind::XrcSrq if q.srq.is_some_and(|s| s != Some(q.qpn)) => {
            return Err(ImageError::new(line, "kind=xrc_srq: its srq= is its own number (qpn=)"));
        }
        // An XRC SRQ is its own SRQ.
        ResourceKind::XrcSrq => q.srq = Some(Some(q.qpn)),
        ResourceKind::Rwq if q.srq.is_some() => {
            return Err(ImageError::new(line, "kind=rwq: a receive WQ has no SRQ"));
        }
        _ => {}
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
    if rq_sig {
        match &mut q.rq_stride {
            Some((_, sig)) => *sig = true,
            None => return Err(ImageError::new(line, "rq_sig without rq_stride=")),
        }
    }
    q.sq_posted = match (sq_tail, sq_posted) {
        (None, None) => (0, 0),
        (t, Some(n)) => (t.unwrap_or(0), n),
        (Some(_), None) => return Err(ImageError::new(line, "sq_tail= without sq_posted=")),
    };
    queues::check_qp_queues(&q, line)?;
    Ok(q)
}

impl Mlx5Image {
    /// The registry the image describes: its QPs, XRC SRQs and receive WQs with identity
    /// wr_id tables and what is posted in them, their registered WQE buffers, the memory
    /// regions inline data may be copied into, and the signature mkeys.
    ///
    /// # Errors
    ///
    /// [`ImageError`] for duplicate numbers, at the `qp` line's own line of the text the
    /// image was read from (an image built in code names the QP's place in
    /// [`Mlx5Image::qps`]), or for memory that cannot be set up.
    pub fn registry(&self) -> Result<Registry, ImageError> {
        let mut r = Registry::new();
        for (i, q) in self.qps.iter().enumerate() {
            queues::add_line(&mut r, q, i, self.qp_lines.0.get(i).copied())?;
        }
        for &m in &self.sig_mkeys {
            r.add_sig_mkey(m).map_err(|e| ImageError::new(0, format!("sig_mkeys: {e}")))?;
        }
        r.set_null_lkey(self.null_lkey);
        queues::add_buffers(&mut r, self)?;
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
        if let Some(k) = self.null_lkey {
            let _ = write!(s, " null_lkey={k:x}");
        }
        s.push('\n');
        for q in &self.qps {
            queues::write_qp(&mut s, q);
        }
        queues::write_ext(&mut s, self);
        write_slots(&mut s, &self.slots, self.cqe_size as usize);
        s
    }

    /// An image of a ring's bytes with what `registry` holds (its QPs, XRC SRQs and
    /// receive WQs, what is posted, registered WQE buffers and memory regions, signature
    /// mkeys), at consumer position `ci`, of a CQ created with `compression` (or none).
    /// Memory regions are recorded by their bounds, not their bytes: replaying a copy
    /// depends only on where it may write.
    pub fn from_ring(
        cqe_size: u32,
        ci: u32,
        version: CqeVersion,
        compression: Option<CompressionConfig>,
        registry: &Registry,
        slots: Vec<u8>,
    ) -> Self {
        let entries = (slots.len() / cqe_size.max(1) as usize) as u32;
        let (qps, mrs, wqes) = queues::export(registry);
        Self {
            cqe_size,
            entries,
            ci,
            cqe_version: version,
            compression,
            qps,
            sig_mkeys: registry.sig_mkeys(),
            null_lkey: registry.null_lkey(),
            mrs,
            wqes,
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
    use crate::registry::QpConfig;
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
