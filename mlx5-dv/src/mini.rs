//! CQE compression: mini-CQE sessions in the poller (shared/spec/mlx5.md §9, Pitfalls 15-16).
//!
//! A ConnectX under PCIe back-pressure packs consecutive completions of the same kind into
//! 8-byte mini-CQEs. rdma-core's own poll cannot read such a CQ; dvcq decompresses in the
//! same poller, on the same ring as regular CQEs:
//!
//! - **Basic layout** (§9.3, what `mlx5dv_create_cq` gives): a *title* CQE with format 3
//!   whose `byte_cnt` is the number N of completions; the session occupies the N slots
//!   `[t, t + N)`. Mini-CQE array 0 (minis 0..7) sits in slot `t + 1`, array k ≥ 1 in slot
//!   `t + 8k`; the other slots are holes the device never writes. Only the title carries an
//!   owner bit, so after consuming a session software re-invalidates `[t + 1, t + N)`.
//! - **Enhanced layout** (§9.4, DevX CQs): every CQE's validity is the 8-bit iteration count
//!   in byte 62. A *block* is one format-3 slot whose opcode nibble is n − 1 (n ≤ 7) with n
//!   minis in bytes `0..8n`, standing for the n slots `[m, m + n)`; its title is the most
//!   recent regular CQE, which was itself an ordinary completion.
//!
//! Completion i of a session is exactly the completion an uncompressed CQE would give
//! whose content is the title's with the mini-CQE's fields put in ([`expand`]): the byte
//! count and the format's hash / checksum / flow tag / header type, the responder WQE
//! counter `title + i`, and for requester sessions the WQE counter and opcode of the mini.
//! Everything else, the timestamp included, comes from the title (Pitfall 15).
//!
//! A session can straddle poll batches and the ring end: the poller keeps the title and the
//! current mini-CQE array in its compression state and drains an open session first on the next
//! call. On a CQ created without compression, `poll` never comes here (one flag test per
//! call), and the uncompressed loop in `cq.rs` only sees a format-3 CQE in its slow path.

use crate::cq::{expected_owner, sw_owned_by_lap, Mlx5Cq, FAST_REQ, FAST_RESP};
use crate::cqe::{self, Consume, CqeVersion, Parsed, Peek, RecvTarget, Resources};
use crate::fields::{CqeFields, RingCqe};
use dvcq_provider::{Completion, CqeFault, FaultKind, RingView, WcFlags};
use dvcq_uapi::mlx5::cqe::{off, op_own, Cqe64, QPN_MASK};
use dvcq_uapi::mlx5::doorbell::CI_MASK;
use dvcq_uapi::mlx5::mini::{mini_format, MiniCqe, MiniCqeArray, MAX_ENHANCED_MINIS, MINIS_PER_ARRAY};
use dvcq_uapi::mlx5::opcode::{cqe_format, cqe_opcode};
use dvcq_uapi::{Be16, Be32};

/// Where a compressed CQ puts its mini-CQEs (CQ context `cqe_comp_layout`, spec §9.1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum CompLayout {
    /// Title CQE + 8-mini arrays + holes (§9.3): `mlx5dv_create_cq` CQs.
    #[default]
    Basic,
    /// Blocks of up to seven minis validated by the 8-bit iteration count (§9.4): DevX CQs
    /// created with `cqe_comp_layout = 1`.
    Enhanced,
}

impl CompLayout {
    /// The ring-image word (`comp=basic|enhanced`, shared/ring-image.md).
    pub const fn word(self) -> &'static str {
        match self {
            Self::Basic => "basic",
            Self::Enhanced => "enhanced",
        }
    }
    /// Parses a ring-image word.
    pub fn from_word(w: &str) -> Option<Self> {
        match w {
            "basic" => Some(Self::Basic),
            "enhanced" => Some(Self::Enhanced),
            _ => None,
        }
    }
}

/// The responder mini-CQE format a CQ was created with (spec §9.2). Requester mini-CQEs
/// have one layout whatever the CQ's format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum MiniFormat {
    /// RX hash result + byte count (`MLX5DV_CQE_RES_FORMAT_HASH`).
    #[default]
    Hash,
    /// Checksum + byte count (`MLX5DV_CQE_RES_FORMAT_CSUM`).
    Csum,
    /// Checksum + stride index + byte count (`MLX5DV_CQE_RES_FORMAT_CSUM_STRIDX`).
    CsumStridx,
    /// Flow tag + stride index + 24-bit byte count (DevX only).
    FtagStridx,
    /// L3/L4 header type + stride index + byte count (DevX only).
    L34hStridx,
}

impl MiniFormat {
    /// Every format.
    pub const ALL: [MiniFormat; 5] = [Self::Hash, Self::Csum, Self::CsumStridx, Self::FtagStridx, Self::L34hStridx];

    /// The hardware code (`mini_cqe_res_format`, with 4 standing for `_ext = 1`).
    pub const fn hw_code(self) -> u8 {
        match self {
            Self::Hash => mini_format::HASH,
            Self::Csum => mini_format::CSUM,
            Self::CsumStridx => mini_format::CSUM_STRIDX,
            Self::FtagStridx => mini_format::FTAG_STRIDX,
            Self::L34hStridx => mini_format::L34H_STRIDX,
        }
    }
    /// The format for a hardware code.
    pub const fn from_hw_code(code: u8) -> Option<Self> {
        match code {
            mini_format::HASH => Some(Self::Hash),
            mini_format::CSUM => Some(Self::Csum),
            mini_format::CSUM_STRIDX => Some(Self::CsumStridx),
            mini_format::FTAG_STRIDX => Some(Self::FtagStridx),
            mini_format::L34H_STRIDX => Some(Self::L34hStridx),
            _ => None,
        }
    }
    /// The ring-image word (`mini=hash|csum|csum_stridx|ftag_stridx|l34h_stridx`).
    pub const fn word(self) -> &'static str {
        match self {
            Self::Hash => "hash",
            Self::Csum => "csum",
            Self::CsumStridx => "csum_stridx",
            Self::FtagStridx => "ftag_stridx",
            Self::L34hStridx => "l34h_stridx",
        }
    }
    /// Parses a ring-image word.
    pub fn from_word(w: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.word() == w)
    }
    /// The format for `mlx5dv_cq_init_attr.cqe_comp_res_format` (one of
    /// `MLX5DV_CQE_RES_FORMAT_HASH (1 << 0)`, `_CSUM (1 << 1)`, `_CSUM_STRIDX (1 << 2)`,
    /// spec §9.1).
    pub const fn from_dv_res_format(bit: u8) -> Option<Self> {
        match bit {
            0x1 => Some(Self::Hash),
            0x2 => Some(Self::Csum),
            0x4 => Some(Self::CsumStridx),
            _ => None,
        }
    }
}

/// CQE compression settings of a CQ: part of its creation attributes, so the poller is
/// told, not guessing (a mini-CQE does not say which format it has).
///
/// On a real device the facade fills this from what the CQ was created with:
/// `mlx5dv_create_cq` with `MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE` in `comp_mask` gives
/// the basic layout in `cqe_comp_res_format` ([`CompressionConfig::from_dv_attr`]); a DevX
/// CQ context with `cqe_comp_en = 1` gives `cqe_comp_layout` and `mini_cqe_res_format`
/// (+ `_ext`). A CQ without compression is `CqConfig::compression = None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct CompressionConfig {
    /// Basic or enhanced layout.
    pub layout: CompLayout,
    /// The responder mini-CQE format.
    pub format: MiniFormat,
}

impl CompressionConfig {
    /// `MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE`.
    pub const DV_MASK_COMPRESSED_CQE: u64 = 1 << 0;

    /// The setting a CQ made by `mlx5dv_create_cq` has: `None` without the compressed-CQE
    /// mask bit; the basic layout otherwise, since the kernel never sets `cqe_comp_layout`
    /// (spec §9.1). `None` also for a format bit rdma-core rejects.
    pub const fn from_dv_attr(comp_mask: u64, cqe_comp_res_format: u8) -> Option<Self> {
        if comp_mask & Self::DV_MASK_COMPRESSED_CQE == 0 {
            return None;
        }
        match MiniFormat::from_dv_res_format(cqe_comp_res_format) {
            Some(format) => Some(Self { layout: CompLayout::Basic, format }),
            None => None,
        }
    }
}

/// Is `opcode` one a session can carry: a successful requester or responder completion?
const fn session_opcode(opcode: u8) -> bool {
    matches!(opcode, cqe_opcode::REQ | cqe_opcode::RESP_WR_IMM..=cqe_opcode::RESP_SEND_INV)
}

/// The uncompressed CQE that completion `i` of a session stands for: the title's content
/// (format cleared) with the mini-CQE's fields put in (spec §9.3-§9.5, kernel
/// `mlx5e_decompress_cqe`, DPDK `rxq_cq_decompress_v`, UCX `uct_ib_mlx5_iface_cqe_unzip`):
///
/// - every session: `byte_cnt` from the mini;
/// - requester title (opcode REQ): `wqe_counter` and the WQE opcode (`sop_drop_qpn` bits
///   31:24) from the mini, placed as kernel and UCX place them (bytes 0-1 and byte 2; DPDK
///   declares byte 3, spec §9.2) since UCX is the one consumer that reads requester minis;
/// - responder title: `wqe_counter = title.wqe_counter + i` (a cyclic RQ; for the enhanced
///   layout `i` counts from the title, which is completion 0), and per format the RSS hash
///   (HASH), the L4 checksum (CSUM, CSUM_STRIDX), the flow tag in `sop_drop_qpn` bits 23:0
///   with a 24-bit byte count (FTAG_STRIDX), or the header-type byte 29 (L34H_STRIDX).
///
/// Stride indexes are for striding RQs, which dvcq does not drive; a [`Completion`] has no
/// field for them, so they are not carried over.
pub fn expand(title: &Cqe64, mini: MiniCqe, format: MiniFormat, i: u32) -> Cqe64 {
    let mut c = *title;
    c.op_own = title.op_own & !op_own::FORMAT_MASK;
    c.byte_cnt = Be32::new(mini.byte_cnt());
    if title.opcode() == cqe_opcode::REQ {
        c.wqe_counter = Be16::new(mini.wqe_counter());
        c.sop_drop_qpn = Be32::new((title.sop_drop_qpn.get() & QPN_MASK) | ((mini.s_wqe_opcode() as u32) << 24));
        return c;
    }
    c.wqe_counter = Be16::new(title.wqe_counter.get().wrapping_add(i as u16));
    match format {
        MiniFormat::Hash => c.rss_hash_result = Be32::new(mini.rx_hash_result()),
        MiniFormat::Csum | MiniFormat::CsumStridx => c.check_sum = Be16::new(mini.checksum()),
        MiniFormat::FtagStridx => {
            c.byte_cnt = Be32::new(mini.byte_cnt24());
            c.sop_drop_qpn = Be32::new((title.sop_drop_qpn.get() & !QPN_MASK) | mini.flow_tag());
        }
        MiniFormat::L34hStridx => c.l4_hdr_type_etc = mini.hdr_type(),
    }
    c
}

/// One decompressed completion as [`CqeFields`], read lazily from the title copy and the
/// mini-CQE: the same translation as [`expand`] without building the CQE. `REQ` is the
/// title's kind (requester or responder), fixed for a session.
struct MiniFields<'a, const REQ: bool> {
    title: &'a Cqe64,
    mini: MiniCqe,
    format: MiniFormat,
    wqe_counter: u16,
}

impl<const REQ: bool> CqeFields for MiniFields<'_, REQ> {
    #[inline(always)]
    fn op_own(&self) -> u8 {
        self.title.op_own & !op_own::FORMAT_MASK
    }
    #[inline(always)]
    fn sop_drop_qpn(&self) -> u32 {
        let t = self.title.sop_drop_qpn.get();
        if REQ {
            (t & QPN_MASK) | ((self.mini.s_wqe_opcode() as u32) << 24)
        } else if self.format == MiniFormat::FtagStridx {
            (t & !QPN_MASK) | self.mini.flow_tag()
        } else {
            t
        }
    }
    #[inline(always)]
    fn wqe_counter(&self) -> u16 {
        self.wqe_counter
    }
    #[inline(always)]
    fn byte_cnt(&self) -> u32 {
        if !REQ && self.format == MiniFormat::FtagStridx {
            self.mini.byte_cnt24()
        } else {
            self.mini.byte_cnt()
        }
    }
    #[inline(always)]
    fn timestamp(&self) -> u64 {
        self.title.timestamp.get()
    }
    #[inline(always)]
    fn srqn_uidx_word(&self) -> u32 {
        self.title.srqn_uidx.get()
    }
    #[inline(always)]
    fn imm_inval_pkey(&self) -> Be32 {
        self.title.imm_inval_pkey
    }
    #[inline(always)]
    fn flags_rqpn(&self) -> u32 {
        self.title.flags_rqpn.get()
    }
    #[inline(always)]
    fn slid(&self) -> u16 {
        self.title.slid.get()
    }
    #[inline(always)]
    fn ml_path(&self) -> u8 {
        self.title.ml_path
    }
    #[inline(always)]
    fn hds_ip_ext(&self) -> u8 {
        self.title.hds_ip_ext
    }
    #[inline(always)]
    fn l4_hdr_type_etc(&self) -> u8 {
        if !REQ && self.format == MiniFormat::L34hStridx {
            self.mini.hdr_type()
        } else {
            self.title.l4_hdr_type_etc
        }
    }
    #[inline(always)]
    fn check_sum(&self) -> u16 {
        if !REQ && matches!(self.format, MiniFormat::Csum | MiniFormat::CsumStridx) {
            self.mini.checksum()
        } else {
            self.title.check_sum.get()
        }
    }
    #[inline(always)]
    fn rss_hash_result(&self) -> u32 {
        if !REQ && self.format == MiniFormat::Hash {
            self.mini.rx_hash_result()
        } else {
            self.title.rss_hash_result.get()
        }
    }
}

/// Translates one decompressed completion (requester or responder, by the title).
#[inline(always)]
#[allow(clippy::too_many_arguments)] // the parse functions' arguments plus the mini's
fn decompress<R: Resources>(
    res: &mut R,
    title: &Cqe64,
    requester: bool,
    format: MiniFormat,
    mini: MiniCqe,
    ctr: u16,
    v1: bool,
    pos: u32,
    out: &mut Completion,
) -> Parsed {
    if requester {
        let f = MiniFields::<true> { title, mini, format, wqe_counter: mini.wqe_counter() };
        cqe::parse_req(res, &f, v1, pos, out)
    } else {
        let f = MiniFields::<false> { title, mini, format, wqe_counter: ctr };
        cqe::parse_resp(res, &f, v1, pos, out)
    }
}

/// One responder completion of a session from its template: what `cqe::parse_resp` writes,
/// with the wr_id and WQE index taken from the receive queue as it would (the RQ tail, or
/// the SRQ slot of the WQE counter) and the byte count from the mini-CQE. The fields are
/// exactly those `parse_resp` writes for a QP without Ethernet extras, so undefined fields
/// keep what the slot held, as with an uncompressed CQE (checked by the tests).
#[inline(always)]
fn fill_resp<R: Resources>(
    res: &mut R,
    target: RecvTarget,
    tpl: &Completion,
    byte_cnt: u32,
    ctr: u16,
    pos: u32,
    out: &mut Completion,
) {
    let (idx, wr_id) = match target {
        RecvTarget::Rq(q) => res.rq_complete(q),
        RecvTarget::Srq(s) => match res.srq_complete(s, ctr) {
            // SRQ wr_ids are indexed by the unmasked counter (Pitfall 9).
            Some(w) => (ctr as u32, w),
            None => {
                cqe::fault(res, out, FaultKind::BadField, pos, ctr as u32);
                return;
            }
        },
    };
    if tpl.wc_flags.intersects(WcFlags::WITH_IMM | WcFlags::WITH_INV) {
        out.imm_data = tpl.imm_data;
    }
    out.wr_id = wr_id;
    out.byte_len = byte_cnt;
    out.qp_num = tpl.qp_num;
    out.wc_flags = tpl.wc_flags;
    out.status = tpl.status;
    out.opcode = tpl.opcode;
    out.fault_kind = FaultKind::None;
    out.sl = tpl.sl;
    out.wqe_index = idx as u16;
    out.pkey_index = tpl.pkey_index;
    out.src_qp = tpl.src_qp;
    out.slid = tpl.slid;
    out.dlid_path_bits = tpl.dlid_path_bits;
    out.timestamp = tpl.timestamp;
}

/// Resources whose lookups are already done: translating a title into a template
/// completion without touching the registry.
struct Resolved(RecvTarget);

impl Resources for Resolved {
    fn qp(&mut self, _: u32, _: bool) -> Option<u32> {
        Some(0)
    }
    fn srq(&mut self, _: u32) -> Option<u32> {
        Some(0)
    }
    fn qp_attrs(&self, _: u32) -> (Option<u32>, bool) {
        match self.0 {
            RecvTarget::Rq(_) => (None, false),
            RecvTarget::Srq(s) => (Some(s), false),
        }
    }
    fn sq_complete(&mut self, _: u32, _: u16) -> (u32, u64, u8) {
        (0, 0, 0xff)
    }
    fn rq_complete(&mut self, _: u32) -> (u32, u64) {
        (0, 0)
    }
    fn srq_complete(&mut self, _: u32, _: u16) -> Option<u64> {
        Some(0)
    }
}

/// The fault item for a session cut short: a hole the device wrote (spec §9.3).
#[cold]
#[inline(never)]
fn truncated<R: Resources>(res: &mut R, start: u32, count: u32) -> Completion {
    res.note_fault();
    Completion::from_fault(CqeFault { kind: FaultKind::Truncated, position: start, value: count })
}

/// What a title (basic) or block (enhanced) opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    /// A session of `count` completions.
    Session { count: u32 },
    /// Garbage: one fault item, consuming `consume` slots.
    Fault { kind: FaultKind, value: u32, consume: u32 },
}

/// Checks a basic-layout title at a position with `free` slots the device could have
/// written (spec §9.3). A count the ring cannot hold, or below two (array 0 sits in the
/// session's second slot), consumes only the title; a plausible count with an opcode no
/// session carries consumes the whole session.
fn check_title(title: &Cqe64, free: u32) -> Open {
    let count = title.byte_cnt.get();
    let plausible = (2..=free).contains(&count);
    if !session_opcode(title.opcode()) {
        let consume = if plausible { count } else { 1 };
        return Open::Fault { kind: FaultKind::BadOpcode, value: title.opcode() as u32, consume };
    }
    match count {
        0 | 1 => Open::Fault { kind: FaultKind::BadField, value: count, consume: 1 },
        c if c > free => Open::Fault { kind: FaultKind::Truncated, value: c, consume: 1 },
        c => Open::Session { count: c },
    }
}

/// Checks an enhanced-layout block (`op_own` of the block) against its title (spec §9.4):
/// at most seven minis; the title must be a successful completion; no title at all (the
/// poller was opened inside a session) is a truncated session.
fn check_block(block_op_own: u8, title: Option<&Cqe64>, free: u32) -> Open {
    let count = op_own::opcode(block_op_own) as u32 + 1;
    if count > MAX_ENHANCED_MINIS as u32 {
        return Open::Fault { kind: FaultKind::BadField, value: count, consume: 1 };
    }
    if count > free {
        return Open::Fault { kind: FaultKind::Truncated, value: count, consume: 1 };
    }
    match title {
        None => Open::Fault { kind: FaultKind::Truncated, value: count, consume: count },
        Some(t) if !session_opcode(t.opcode()) => {
            Open::Fault { kind: FaultKind::BadOpcode, value: t.opcode() as u32, consume: count }
        }
        Some(_) => Open::Session { count },
    }
}

/// The poller's compression state: the open session (title copy, current mini-CQE array,
/// position) and, for the enhanced layout, the title for the next block.
#[derive(Debug, Clone)]
pub(crate) struct MiniState {
    enhanced: bool,
    format: MiniFormat,
    /// The running consumer counter when the poller was opened: what the device saw
    /// before the first doorbell write.
    open_ci: u32,
    /// Completions left in the open session (0: none open).
    left: u32,
    /// Index of the next completion in the open session or block.
    idx: u32,
    /// Running position of the title (basic) or block (enhanced).
    start: u32,
    /// Completions in the open session or block.
    count: u32,
    requester: bool,
    /// Responder `wqe_counter` of the next decompressed completion.
    next_ctr: u16,
    /// Enhanced: a title has been captured.
    have_title: bool,
    /// The responder template for the current title, once computed.
    template: Option<Option<(RecvTarget, Completion)>>,
    title: Cqe64,
    /// The mini-CQE array (basic) or block (enhanced) being decompressed, copied out of the
    /// ring so its slot can be re-invalidated and released while the session goes on.
    arr: MiniCqeArray,
}

impl MiniState {
    pub(crate) fn new(cfg: Option<CompressionConfig>, ci: u32) -> Self {
        let c = cfg.unwrap_or_default();
        Self {
            enhanced: c.layout == CompLayout::Enhanced,
            format: c.format,
            open_ci: ci,
            left: 0,
            idx: 0,
            start: 0,
            count: 0,
            requester: false,
            next_ctr: 0,
            have_title: false,
            template: None,
            title: Cqe64::default(),
            arr: [MiniCqe::default(); MINIS_PER_ARRAY],
        }
    }
}

/// `op_own` of a slot that software made hardware-owned again (DPDK writes the same,
/// `mlx5_rx.c`): opcode INVALID fails the ownership test whatever the lap.
const REINVALID: u8 = cqe_opcode::INVALID << op_own::OPCODE_SHIFT;

impl<const STRIDE: usize> Mlx5Cq<STRIDE> {
    /// Offset of the validity iteration count (byte 62 of the cqe64) in a slot.
    const VIC_OFF: usize = Self::CQE_OFF + off::SIGNATURE;

    /// The enhanced-layout ownership test at running position `pos` (spec §9.4): byte 62
    /// equals the 8-bit lap count, then (after the acquire fence that test issues) the
    /// opcode is not INVALID. Returns `op_own`.
    ///
    /// Byte 62 is the ownership byte of an enhanced CQ: the model publishes it last with
    /// release ordering, as DPDK and UCX read it first and fence after. The re-invalidation
    /// of holes keeps a stale byte 62 from matching 256 laps later.
    #[inline(always)]
    fn enh_owned(ring: RingView<'_, STRIDE>, pos: u32, shift: u32) -> Option<u8> {
        ring.owned_at(pos, Self::VIC_OFF, |vic| vic == (pos >> shift) as u8)?;
        ring.owned_at(pos, Self::OWN_OFF, |b| op_own::opcode(b) != cqe_opcode::INVALID)
    }

    /// Slots the device could have filled from `pos` on: what the last consumer index it
    /// was shown leaves free (overrun-ignore: the whole ring). A session claiming more is
    /// truncated garbage (spec §5, §15.5).
    fn free_slots(&self, pos: u32) -> u32 {
        let entries = self.ring.entries();
        if self.cfg.overrun_ignore {
            return entries;
        }
        let seen = self.last_set_ci().unwrap_or(self.mini.open_ci & CI_MASK);
        entries.saturating_sub(pos.wrapping_sub(seen) & CI_MASK)
    }

    /// Completions of an open compressed session that `poll` has not returned yet (0 when
    /// none is open): a session can straddle poll batches.
    pub fn session_left(&self) -> u32 {
        self.mini.left
    }

    /// `poll` for a CQ created with compression: drains an open session, polls regular
    /// CQEs, opens the sessions it meets, and publishes the consumer index once.
    #[inline(never)]
    pub(crate) fn poll_compressed(&mut self, out: &mut [Completion]) -> usize {
        let n = if out.is_empty() || self.resize_pending() {
            0
        } else if self.cfg.cqe_version == CqeVersion::V1 {
            self.poll_compressed_v::<true>(out)
        } else {
            self.poll_compressed_v::<false>(out)
        };
        self.after_batch(n as u32);
        n
    }

    fn poll_compressed_v<const V1: bool>(&mut self, out: &mut [Completion]) -> usize {
        let mut n = 0;
        loop {
            if self.mini.left > 0 {
                n += self.drain::<V1>(&mut out[n..]);
                if self.mini.left > 0 {
                    break;
                }
            }
            if n == out.len() || self.resize_pending() {
                break;
            }
            let (m, at_session) = if self.mini.enhanced {
                self.poll_loop_regular::<V1, true>(&mut out[n..])
            } else {
                self.poll_loop_regular::<V1, false>(&mut out[n..])
            };
            n += m;
            if !at_session {
                break;
            }
            n += self.open_session(&mut out[n..]);
        }
        n
    }

    /// Opens the session whose title (basic) or block (enhanced) is at `ci`, which the
    /// loop that stopped there found software-owned. Returns 1 if it wrote a fault item
    /// instead, 0 if the session is open (the drain produces its completions).
    fn open_session(&mut self, out: &mut [Completion]) -> usize {
        let Some(slot) = out.first_mut() else {
            return 0;
        };
        let t = self.ci;
        let free = self.free_slots(t);
        let ring = self.ring.view();
        let Some(head) = ring.read_owned_at::<Cqe64>(t, Self::CQE_OFF) else {
            return 0;
        };
        let open = if self.mini.enhanced {
            check_block(head.op_own, self.mini.have_title.then_some(&self.mini.title), free)
        } else {
            check_title(&head, free)
        };
        match open {
            Open::Fault { kind, value, consume } => {
                for i in 1..consume {
                    self.reinvalidate(t.wrapping_add(i));
                }
                self.ci = t.wrapping_add(consume);
                self.stats.faults += 1;
                *slot = Completion::from_fault(CqeFault { kind, position: t, value });
                1
            }
            Open::Session { count } => {
                let st = &mut self.mini;
                st.left = count;
                st.count = count;
                st.idx = 0;
                st.start = t;
                self.stats.sessions += 1;
                if st.enhanced {
                    // The block's minis are in its own slot; the title was captured when
                    // the loop passed it.
                    st.arr = ring.read_owned_at(t, Self::CQE_OFF).unwrap_or_default();
                } else {
                    // Array 0 is the slot after the title; the device wrote every array
                    // before the title's owner byte (spec §9.3), so the title's ownership
                    // check covers it.
                    st.title = head;
                    st.template = None;
                    st.next_ctr = head.wqe_counter.get();
                    st.arr = ring.read_owned_at(t.wrapping_add(1), Self::CQE_OFF).unwrap_or_default();
                }
                st.requester = st.title.opcode() == cqe_opcode::REQ;
                0
            }
        }
    }

    /// Makes a consumed session slot hardware-owned again (basic layout, spec §9.3): the
    /// device never writes holes, and arrays have no owner byte, so without this they could
    /// pass the ownership test a lap later. Enhanced slots also get this lap's iteration
    /// count in byte 62, so a stale count cannot match for 256 laps. Relaxed stores: the
    /// consumer-index publication (release) orders them before the device reuses the slots.
    #[inline(always)]
    fn reinvalidate(&self, pos: u32) {
        // Constant offsets inside the slot: these stores cannot fail.
        let _ = self.ring.store_u8(pos, Self::OWN_OFF, REINVALID);
        if self.mini.enhanced {
            let _ = self.ring.store_u8(pos, Self::VIC_OFF, (pos >> self.ring.entries().trailing_zeros()) as u8);
        }
    }

    /// Produces the open session's next completions into `out`; stops when `out` is full
    /// or the session ends. A hole that holds a software-owned CQE means the device wrote
    /// there: the session was truncated, and one fault item ends it (the CQE there is
    /// polled normally afterwards).
    fn drain<const V1: bool>(&mut self, out: &mut [Completion]) -> usize {
        match (self.mini.enhanced, self.mini.requester) {
            (false, false) => self.drain_kind::<V1, false, false>(out),
            (false, true) => self.drain_kind::<V1, true, false>(out),
            (true, false) => self.drain_kind::<V1, false, true>(out),
            (true, true) => self.drain_kind::<V1, true, true>(out),
        }
    }

    /// The receive queue and the constant part of a responder session's completions, when
    /// every completion differs only in wr_id, WQE index and byte count: not for QPs with
    /// Ethernet extras (their checksum flags follow each mini-CQE), nor FTAG_STRIDX (the
    /// flow tag replaces the QPN), nor titles that give fault items. Computed once per
    /// title: the registry only grows and a registered QP's slot and settings never change,
    /// so a template stays right (a title without one takes the generic path, which looks
    /// everything up per completion). A registry that can remove or reconfigure QPs must
    /// reset `MiniState::template` when it does.
    fn resp_template<const V1: bool>(&mut self) -> Option<(RecvTarget, Completion)> {
        if let Some(t) = self.mini.template {
            return t;
        }
        let st = &self.mini;
        let t = if st.format == MiniFormat::FtagStridx {
            None
        } else {
            let f =
                MiniFields::<false> { title: &st.title, mini: MiniCqe::default(), format: st.format, wqe_counter: 0 };
            let mut res = Consume {
                reg: &mut self.registry,
                cache_key: self.cache.0,
                cache_slot: self.cache.1,
                stats: &mut self.stats,
            };
            let found = cqe::recv_target(&mut res, &f, V1);
            self.cache = (res.cache_key, res.cache_slot);
            match found {
                Ok((target, false)) => {
                    let mut tpl = Completion::default();
                    cqe::parse_resp(&mut Resolved(target), &f, V1, st.start, &mut tpl);
                    (tpl.fault_kind == FaultKind::None).then_some((target, tpl))
                }
                _ => None,
            }
        };
        self.mini.template = Some(t);
        t
    }

    /// [`Mlx5Cq::drain`] for one kind of session (requester or responder) and layout: the
    /// session state lives in locals during the loop and is stored back once. In the
    /// enhanced layout a block that follows the drained one continues with the same title,
    /// so it is opened here without going back through the regular loop.
    #[inline(always)]
    fn drain_kind<const V1: bool, const REQ: bool, const ENH: bool>(&mut self, out: &mut [Completion]) -> usize {
        let fast = if REQ { None } else { self.resp_template::<V1>() };
        let entries = self.ring.entries();
        let seen = (!self.cfg.overrun_ignore).then(|| self.last_set_ci().unwrap_or(self.mini.open_ci & CI_MASK));
        let ring = self.ring.view();
        let shift = entries.trailing_zeros();
        let mut res = Consume {
            reg: &mut self.registry,
            cache_key: self.cache.0,
            cache_slot: self.cache.1,
            stats: &mut self.stats,
        };
        let cq_ring = &self.ring;
        let st = &mut self.mini;
        let format = st.format;
        let title = &st.title;
        let arr = &mut st.arr;
        let (mut start, mut count, mut i, mut left) = (st.start, st.count, st.idx, st.left);
        let mut ctr = st.next_ctr;
        let mut ci = self.ci;
        let mut n = 0;
        'blocks: loop {
            let take = (left as usize).min(out.len() - n);
            for slot in &mut out[n..n + take] {
                let pos = start.wrapping_add(i);
                if i != 0 {
                    if ENH || (i != 1 && i % MINIS_PER_ARRAY as u32 != 0) {
                        let written = if ENH {
                            Self::enh_owned(ring, pos, shift).is_some()
                        } else {
                            ring.owned_at(pos, Self::OWN_OFF, |b| sw_owned_by_lap(b, pos >> shift)).is_some()
                        };
                        if written {
                            *slot = truncated(&mut res, start, count);
                            left = 0;
                            n += 1;
                            break 'blocks;
                        }
                    } else if i != 1 {
                        *arr = ring.read_owned_at(pos, Self::CQE_OFF).unwrap_or_default();
                    }
                    let _ = cq_ring.store_u8(pos, Self::OWN_OFF, REINVALID);
                    if ENH {
                        let _ = cq_ring.store_u8(pos, Self::VIC_OFF, (pos >> shift) as u8);
                    }
                }
                // Basic: mini i % 8 of the current array; enhanced: i < 7 of the block.
                let mini = arr[i as usize % MINIS_PER_ARRAY];
                if REQ {
                    let f = MiniFields::<true> { title, mini, format, wqe_counter: mini.wqe_counter() };
                    cqe::parse_req(&mut res, &f, V1, pos, slot);
                } else if let Some((target, tpl)) = &fast {
                    fill_resp(&mut res, *target, tpl, mini.byte_cnt(), ctr, pos, slot);
                    ctr = ctr.wrapping_add(1);
                } else {
                    let f = MiniFields::<false> { title, mini, format, wqe_counter: ctr };
                    cqe::parse_resp(&mut res, &f, V1, pos, slot);
                    ctr = ctr.wrapping_add(1);
                }
                i += 1;
                ci = pos.wrapping_add(1);
                left -= 1;
                n += 1;
            }
            if !ENH || left != 0 || n == out.len() {
                break;
            }
            // The next slot: another block of the same session?
            let Some(own) = Self::enh_owned(ring, ci, shift) else {
                break;
            };
            let next = op_own::opcode(own) as u32 + 1;
            let free = seen.map_or(entries, |s| entries.saturating_sub(ci.wrapping_sub(s) & CI_MASK));
            if op_own::format(own) != cqe_format::COMPRESSED || next as usize > MAX_ENHANCED_MINIS || next > free {
                break;
            }
            *arr = ring.read_owned_at(ci, Self::CQE_OFF).unwrap_or_default();
            res.stats.sessions += 1;
            (start, count, i, left) = (ci, next, 0, next);
        }
        st.start = start;
        st.count = count;
        st.idx = i;
        st.next_ctr = ctr;
        st.left = left;
        self.ci = ci;
        self.cache = (res.cache_key, res.cache_slot);
        n
    }

    /// The regular CQEs of a compressed CQ: the uncompressed poll loop (`cq.rs`, which
    /// stays free of compression checks) with the layout's ownership test (owner bit, or
    /// the iteration count when `ENH`), stopping without consuming at a title or block.
    /// Enhanced: the last regular CQE passed becomes the title, copied before the consumer
    /// index can release its slot. Returns the items written and whether it stopped at a
    /// session.
    fn poll_loop_regular<const V1: bool, const ENH: bool>(&mut self, out: &mut [Completion]) -> (usize, bool) {
        let ring = self.ring.view();
        let shift = ring.entries().trailing_zeros();
        let mut ci = self.ci;
        let mut res = Consume {
            reg: &mut self.registry,
            cache_key: self.cache.0,
            cache_slot: self.cache.1,
            stats: &mut self.stats,
        };
        let (mut resized, mut block) = (false, false);
        let mut last_regular = None;
        let mut n = 0;
        while let Some(slot) = out.get_mut(n) {
            let cur = ci;
            let own = if ENH {
                Self::enh_owned(ring, cur, shift)
            } else {
                ring.owned_at(cur, Self::OWN_OFF, |b| sw_owned_by_lap(b, expected_owner(cur, ring.entries()) as u32))
            };
            let Some(own) = own else {
                break;
            };
            if op_own::format(own) == cqe_format::COMPRESSED {
                block = true;
                break;
            }
            ci = cur.wrapping_add(1);
            last_regular = Some(cur);
            let cqe = RingCqe { ring, idx: cur, op_own: own };
            match Self::CLASS[own as usize] {
                FAST_REQ => cqe::parse_req(&mut res, &cqe, V1, cur, slot),
                FAST_RESP => cqe::parse_resp(&mut res, &cqe, V1, cur, slot),
                _ => {
                    let Some(c) = ring.read_owned_at::<Cqe64>(cur, Self::CQE_OFF) else {
                        break;
                    };
                    match cqe::parse_slow(&mut res, c, V1, STRIDE as u32, cur, slot) {
                        Parsed::Swallowed => {
                            res.stats.swallowed += 1;
                            continue;
                        }
                        Parsed::Resize => {
                            resized = true;
                            break;
                        }
                        Parsed::Wc => Parsed::Wc,
                    }
                }
            };
            n += 1;
        }
        if let (true, Some(p)) = (ENH, last_regular) {
            let st = &mut self.mini;
            st.title = ring.read_owned_at(p, Self::CQE_OFF).unwrap_or_default();
            st.template = None;
            // The first block after a title continues at the title's counter + 1 (kernel
            // `mlx5e_read_enhanced_title_slot`, UCX).
            st.next_ctr = st.title.wqe_counter.get().wrapping_add(1);
            st.have_title = true;
        }
        self.ci = ci;
        self.cache = (res.cache_key, res.cache_slot);
        if resized {
            self.note_resize();
        }
        (n, block)
    }

    /// `peek` for a CQ created with compression: the next item `poll` would return,
    /// decompressed, with nothing consumed and no table advanced.
    pub(crate) fn peek_compressed(&self) -> Option<Completion> {
        if self.resize_pending() {
            return None;
        }
        let v1 = self.cfg.cqe_version == CqeVersion::V1;
        let ring = self.ring.view();
        let shift = ring.entries().trailing_zeros();
        let st = &self.mini;
        let mut res = Peek(self.registry());
        let mut out = Completion::default();
        if st.left > 0 {
            let i = st.idx;
            let pos = st.start.wrapping_add(i);
            let mut arr = st.arr;
            if i != 0 && !st.enhanced && i % MINIS_PER_ARRAY as u32 == 0 {
                arr = ring.read_owned_at(pos, Self::CQE_OFF).unwrap_or_default();
            } else if i != 0 && (st.enhanced || i != 1) {
                let written = if st.enhanced {
                    Self::enh_owned(ring, pos, shift).is_some()
                } else {
                    ring.owned_at(pos, Self::OWN_OFF, |b| sw_owned_by_lap(b, pos >> shift)).is_some()
                };
                if written {
                    return Some(Completion::from_fault(CqeFault {
                        kind: FaultKind::Truncated,
                        position: st.start,
                        value: st.count,
                    }));
                }
            }
            let k = if st.enhanced { i as usize } else { i as usize % MINIS_PER_ARRAY };
            let mini = arr.get(k).copied().unwrap_or_default();
            decompress(&mut res, &st.title, st.requester, st.format, mini, st.next_ctr, v1, pos, &mut out);
            return Some(out);
        }
        let mut title = st.have_title.then_some(st.title);
        let mut ci = self.ci;
        loop {
            if st.enhanced {
                Self::enh_owned(ring, ci, shift)?;
            } else {
                ring.owned_at(ci, Self::OWN_OFF, |b| sw_owned_by_lap(b, ci >> shift))?;
            }
            let cqe: Cqe64 = ring.read_at(ci, Self::CQE_OFF)?;
            if cqe.format() != cqe_format::COMPRESSED {
                match cqe::parse_slow(&mut res, cqe, v1, STRIDE as u32, ci, &mut out) {
                    Parsed::Wc => return Some(out),
                    Parsed::Resize => return None,
                    Parsed::Swallowed => {
                        title = Some(cqe);
                        ci = ci.wrapping_add(1);
                        continue;
                    }
                }
            }
            let free = self.free_slots(ci);
            let (open, title, mini, ctr) = if st.enhanced {
                let arr: MiniCqeArray = ring.read_at(ci, Self::CQE_OFF)?;
                let t = title.unwrap_or_default();
                (check_block(cqe.op_own, title.as_ref(), free), t, arr[0], t.wqe_counter.get().wrapping_add(1))
            } else {
                let arr: MiniCqeArray = ring.read_at(ci.wrapping_add(1), Self::CQE_OFF)?;
                (check_title(&cqe, free), cqe, arr[0], cqe.wqe_counter.get())
            };
            return Some(match open {
                Open::Fault { kind, value, .. } => Completion::from_fault(CqeFault { kind, position: ci, value }),
                Open::Session { .. } => {
                    let req = title.opcode() == cqe_opcode::REQ;
                    decompress(&mut res, &title, req, st.format, mini, ctr, v1, ci, &mut out);
                    out
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{QpConfig, Registry};
    use dvcq_uapi::mlx5::opcode::wqe_opcode;

    fn title(opcode: u8, ctr: u16) -> Cqe64 {
        let mut t = Cqe64 {
            sop_drop_qpn: Be32::new(0x77 << 24 | 0x42),
            wqe_counter: Be16::new(ctr),
            rss_hash_result: Be32::new(0x1111_2222),
            check_sum: Be16::new(0x3333),
            l4_hdr_type_etc: 0x08,
            timestamp: dvcq_uapi::Be64::new(0xabc),
            byte_cnt: Be32::new(9),
            ..Cqe64::default()
        };
        t.op_own = op_own::make(opcode, cqe_format::COMPRESSED, false, 1);
        t
    }

    #[test]
    fn expand_puts_each_format_field_in_place() {
        let t = title(cqe_opcode::RESP_SEND, 0xfffe);
        let e = expand(&t, MiniCqe::hash(0xfeed, 100), MiniFormat::Hash, 3);
        assert_eq!((e.rss_hash_result.get(), e.byte_cnt.get(), e.wqe_counter.get()), (0xfeed, 100, 1));
        assert_eq!((e.format(), e.opcode(), e.owner(), e.timestamp.get()), (0, cqe_opcode::RESP_SEND, 1, 0xabc));
        let e = expand(&t, MiniCqe::csum(0x5a5a, 4, 7), MiniFormat::CsumStridx, 0);
        assert_eq!((e.check_sum.get(), e.byte_cnt.get(), e.rss_hash_result.get()), (0x5a5a, 7, 0x1111_2222));
        let e = expand(&t, MiniCqe::ftag(0xabcdef, 0, 0x10_0000), MiniFormat::FtagStridx, 0);
        assert_eq!((e.sop_drop_qpn.get(), e.byte_cnt.get()), (0x77ab_cdef, 0x10_0000));
        let e = expand(&t, MiniCqe::l34h(0x26, 0, 5), MiniFormat::L34hStridx, 0);
        assert_eq!(e.l4_hdr_type_etc, 0x26);
        let r = expand(
            &title(cqe_opcode::REQ, 5),
            MiniCqe::requester(0x99, wqe_opcode::RDMA_READ, 64),
            MiniFormat::Csum,
            4,
        );
        assert_eq!(
            (r.wqe_counter.get(), r.wqe_opcode(), r.qpn(), r.byte_cnt.get()),
            (0x99, wqe_opcode::RDMA_READ, 0x42, 64)
        );
        assert_eq!(r.check_sum.get(), 0x3333);
    }

    /// The lazy field reader and [`expand`] give the same completion for every format,
    /// requester and responder, on a QP with the RX checksum capability (so the Ethernet
    /// extras are read too).
    #[test]
    fn lazy_fields_match_expand() {
        let mut reg = Registry::new();
        let mut qp = QpConfig::rc(0x42, 64, 64);
        qp.rx_csum = true;
        reg.add_qp(qp).unwrap();
        for format in MiniFormat::ALL {
            for (opcode, mini) in [
                (cqe_opcode::REQ, MiniCqe::requester(7, wqe_opcode::RDMA_READ, 4096)),
                (cqe_opcode::RESP_SEND, MiniCqe { bytes: [0x12, 0x34, 0x56, 0x78, 0x00, 0x42, 0x01, 0x00] }),
                (cqe_opcode::RESP_SEND_IMM, MiniCqe { bytes: [0xff, 0x01, 0, 3, 0x42, 0, 0, 9] }),
            ] {
                let t = title(opcode, 10);
                let req = opcode == cqe_opcode::REQ;
                let mut a = Completion::default();
                let mut b = Completion::default();
                decompress(&mut Peek(&reg), &t, req, format, mini, 12, false, 0, &mut a);
                let full = expand(&t, mini, format, 2);
                let _ = cqe::parse_slow(&mut Peek(&reg), full, false, 64, 0, &mut b);
                assert_eq!(a, b, "{format:?} opcode {opcode}");
            }
        }
    }

    #[test]
    fn config_words_and_dv_attrs() {
        for f in MiniFormat::ALL {
            assert_eq!(MiniFormat::from_word(f.word()), Some(f));
            assert_eq!(MiniFormat::from_hw_code(f.hw_code()), Some(f));
        }
        assert_eq!(CompLayout::from_word("enhanced"), Some(CompLayout::Enhanced));
        assert_eq!(CompressionConfig::from_dv_attr(0, 1), None);
        assert_eq!(
            CompressionConfig::from_dv_attr(CompressionConfig::DV_MASK_COMPRESSED_CQE, 4),
            Some(CompressionConfig { layout: CompLayout::Basic, format: MiniFormat::CsumStridx })
        );
        assert_eq!(CompressionConfig::from_dv_attr(1, 3), None);
    }

    #[test]
    fn title_and_block_checks() {
        let mut t = title(cqe_opcode::RESP_SEND, 0);
        assert_eq!(check_title(&t, 16), Open::Session { count: 9 });
        assert!(matches!(check_title(&t, 8), Open::Fault { kind: FaultKind::Truncated, consume: 1, .. }));
        t.byte_cnt = Be32::new(1);
        assert!(matches!(check_title(&t, 8), Open::Fault { kind: FaultKind::BadField, .. }));
        let e = title(cqe_opcode::REQ_ERR, 0);
        assert!(matches!(check_title(&e, 16), Open::Fault { kind: FaultKind::BadOpcode, consume: 9, .. }));
        let block = op_own::make(6, cqe_format::COMPRESSED, false, 0);
        assert_eq!(check_block(block, Some(&t), 16), Open::Session { count: 7 });
        assert!(matches!(check_block(block, None, 16), Open::Fault { kind: FaultKind::Truncated, consume: 7, .. }));
        let big = op_own::make(7, cqe_format::COMPRESSED, false, 0);
        assert!(matches!(check_block(big, Some(&t), 16), Open::Fault { kind: FaultKind::BadField, .. }));
    }
}
