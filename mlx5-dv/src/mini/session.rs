//! Compressed sessions in the poller: opening a title or block, draining its mini-CQEs
//! into completions, re-invalidating holes, and the regular-CQE loop of a compressed CQ
//! (kernel `en_rx.c` `mlx5e_decompress_cqes_start`, `mlx5e_decompress_enhanced_cqe`; DPDK
//! `mlx5_rx.c` `mlx5_rx_poll_len`; UCX `ib_mlx5.c` `uct_ib_mlx5_iface_cqe_unzip`).

use super::requester::ReqSession;
use super::*;
use crate::cq::{expected_owner, sw_owned_by_lap, CqStats, Mlx5Cq, FAST_REQ, FAST_RESP};
use crate::cqe::{self, Consume, CqeVersion, Parsed, Peek, RecvTarget, Resources};
use crate::fast::Stop;
use crate::fields::RingCqe;
use crate::registry::{InlineDest, Qp, Registry};
use core::mem::offset_of;
use dvcq_provider::{Completion, CqRing, CqeFault, FaultKind, Pow2Ref, RingView, SlotRef, WcFlags, WcStatus};
use dvcq_uapi::mlx5::cqe::{off, op_own, Cqe64};
use dvcq_uapi::mlx5::doorbell::CI_MASK;
use dvcq_uapi::mlx5::mini::{MiniCqe, MiniCqeArray, MAX_ENHANCED_MINIS, MINIS_PER_ARRAY};
use dvcq_uapi::mlx5::opcode::{cqe_format, cqe_opcode};

/// Translates one decompressed completion (requester or responder, by the title).
#[inline(always)]
#[allow(clippy::too_many_arguments)] // the parse functions' arguments plus the mini's
pub(super) fn decompress<R: Resources>(
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
/// with the wr_id and WQE index taken from the receive queue as it would (the RQ or SRQ
/// WQE of the completion's counter) and the byte count from the mini-CQE. The fields are
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
        RecvTarget::Rq(q) => res.rq_complete(q, ctr),
        RecvTarget::Srq(s) => match res.srq_complete(s, ctr) {
            // SRQ wr_ids are indexed by the unmasked counter (rdma-core `handle_responder`).
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

/// Where a drain puts each decompressed completion. The generic sink translates through
/// the registry per completion, like an uncompressed CQE's slow path; the fast sinks hold
/// the session's QP and its constant fields, resolved once per drain.
trait MiniSink {
    /// Writes the completion of mini-CQE `mini` (responder `wqe_counter` `ctr`) at ring
    /// position `pos` into `slot`.
    fn fill(&mut self, mini: MiniCqe, ctr: u16, pos: u32, slot: &mut Completion);
    /// The poller's counters.
    fn stats(&mut self) -> &mut CqStats;
}

/// Per-completion translation through the registry (any title, any QP).
struct GenericSink<'a, 't, const V1: bool, const REQ: bool> {
    res: Consume<'a>,
    title: &'t Cqe64,
    format: MiniFormat,
    template: Option<(RecvTarget, Completion)>,
}

impl<const V1: bool, const REQ: bool> MiniSink for GenericSink<'_, '_, V1, REQ> {
    #[inline(always)]
    fn fill(&mut self, mini: MiniCqe, ctr: u16, pos: u32, slot: &mut Completion) {
        let (title, format) = (self.title, self.format);
        if REQ {
            let f = MiniFields::<true> { title, mini, format, wqe_counter: mini.wqe_counter() };
            cqe::parse_req(&mut self.res, &f, V1, pos, slot);
        } else if let Some((target, tpl)) = &self.template {
            fill_resp(&mut self.res, *target, tpl, mini.byte_cnt(), ctr, pos, slot);
        } else {
            let f = MiniFields::<false> { title, mini, format, wqe_counter: ctr };
            cqe::parse_resp(&mut self.res, &f, V1, pos, slot);
        }
    }
    fn stats(&mut self) -> &mut CqStats {
        self.res.stats
    }
}

/// A responder session on a QP's own RQ: the template's constant fields are copied as
/// blocks, the wr_id comes from the RQ WQE of the completion's counter, the byte count from
/// the mini-CQE. Writes exactly what [`fill_resp`] writes.
struct RespSink<'a> {
    rq: Pow2Ref<'a, u64>,
    stats: &'a mut CqStats,
    rq_tail: u32,
    imm: Option<u32>,
    tpl: Completion,
}

/// The template bytes a responder completion takes whole: `qp_num` through `src_qp`
/// (`wqe_index` is rewritten after), `slid` and `dlid_path_bits`, and `timestamp`.
const RESP_TPL_BYTES: [core::ops::Range<usize>; 3] = [
    offset_of!(Completion, qp_num)..offset_of!(Completion, vendor_err),
    offset_of!(Completion, slid)..offset_of!(Completion, hdr_ok),
    offset_of!(Completion, timestamp)..offset_of!(Completion, flow_tag_hash),
];

/// The immediate (or invalidated rkey) a responder template carries, if its completions
/// have one.
#[inline(always)]
pub(super) fn template_imm(tpl: &Completion) -> Option<u32> {
    tpl.wc_flags.intersects(WcFlags::WITH_IMM | WcFlags::WITH_INV).then_some(tpl.imm_data)
}

/// A responder completion of a session from its template `tpl` (with `imm` from
/// [`template_imm`]): the receive's wr_id and WQE index, the mini-CQE's byte count, and
/// the template's constant fields. Writes exactly what [`fill_resp`] writes.
#[inline(always)]
pub(super) fn fill_from_template(
    tpl: &Completion,
    imm: Option<u32>,
    wr_id: u64,
    idx: u16,
    byte_cnt: u32,
    slot: &mut Completion,
) {
    if let Some(imm) = imm {
        slot.imm_data = imm;
    }
    for r in RESP_TPL_BYTES {
        slot.copy_bytes_from(tpl, r);
    }
    slot.wr_id = wr_id;
    slot.byte_len = byte_cnt;
    slot.wqe_index = idx;
}

impl<'a> RespSink<'a> {
    fn new(qp: &'a Qp, stats: &'a mut CqStats, tpl: &Completion) -> Self {
        Self { rq_tail: qp.rq.tail(), rq: qp.rq.wrids().by_value(), stats, imm: template_imm(tpl), tpl: *tpl }
    }
}

impl MiniSink for RespSink<'_> {
    #[inline(always)]
    fn fill(&mut self, mini: MiniCqe, ctr: u16, _: u32, slot: &mut Completion) {
        let idx = ctr as usize & self.rq.mask();
        let wr_id = *self.rq.at(idx);
        self.rq_tail = self.rq_tail.wrapping_add(1);
        fill_from_template(&self.tpl, self.imm, wr_id, idx as u16, mini.byte_cnt(), slot);
    }
    fn stats(&mut self) -> &mut CqStats {
        self.stats
    }
}

/// Resources whose lookups are already done: translating a title into a template
/// completion without touching the registry.
pub(super) struct Resolved(RecvTarget);

impl Resources for Resolved {
    fn qp(&mut self, _: u32, _: bool) -> Option<u32> {
        Some(0)
    }
    fn srq(&mut self, _: u32) -> Option<u32> {
        Some(0)
    }
    fn srqn_of(&self, _: u32) -> u32 {
        0
    }
    fn has_sq(&self, _: u32) -> bool {
        true
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
    fn rq_complete(&mut self, _: u32, _: u16) -> (u32, u64) {
        (0, 0)
    }
    fn srq_complete(&mut self, _: u32, _: u16) -> Option<u64> {
        Some(0)
    }
    // A title of a session never carries inline data (its format is the session's).
    fn scatter_recv(&mut self, _: u32, _: bool, _: u32, _: &[u8]) -> Result<bool, WcStatus> {
        Ok(false)
    }
    fn scatter_send(&mut self, _: u32, _: u16, _: &[u8]) -> Result<bool, WcStatus> {
        Ok(false)
    }
    fn wqe_posted(&self, _: InlineDest, _: u16) -> bool {
        false
    }
    fn sig_err(&mut self, _: &crate::sig::SigError) -> bool {
        false
    }
}

/// A drain's position in the open session ([`MiniState`]'s fields, in registers).
struct Walk<'r, const STRIDE: usize> {
    ring: RingView<'r, STRIDE>,
    shift: u32,
    start: u32,
    count: u32,
    i: u32,
    left: u32,
    ctr: u16,
}

impl<const STRIDE: usize> Walk<'_, STRIDE> {
    const OWN_OFF: usize = Mlx5Cq::<STRIDE>::OWN_OFF;
    const CQE_OFF: usize = Mlx5Cq::<STRIDE>::CQE_OFF;

    /// Fills `slot` from mini `k` of `arr` and moves to the next completion.
    #[inline(always)]
    fn take(&mut self, arr: &MiniCqeArray, k: u32, sink: &mut impl MiniSink, slot: &mut Completion) {
        sink.fill(arr[k as usize % MINIS_PER_ARRAY], self.ctr, self.start.wrapping_add(self.i), slot);
        self.ctr = self.ctr.wrapping_add(1);
        self.i += 1;
        self.left -= 1;
    }

    /// Ends the session at a hole the device wrote: one fault item in `slot`.
    #[cold]
    fn cut(&mut self, sink: &mut impl MiniSink, slot: &mut Completion) {
        *slot = truncated(sink.stats(), self.start, self.count);
        self.left = 0;
    }

    /// The basic layout's walk: the title and array 0 one at a time, then runs of holes
    /// with an array at every multiple of 8. Returns the items written.
    #[inline(always)]
    fn basic(&mut self, arr: &mut MiniCqeArray, sink: &mut impl MiniSink, out: &mut [Completion]) -> usize {
        let per = MINIS_PER_ARRAY as u32;
        let end = (self.left as usize).min(out.len());
        let mut n = 0;
        while self.i < 2 && n < end {
            if self.i == 1 {
                let _ = self.ring.store_u8(self.start.wrapping_add(1), Self::OWN_OFF, REINVALID);
            }
            let k = self.i;
            self.take(arr, k, sink, &mut out[n]);
            n += 1;
        }
        while n < end {
            let pos = self.start.wrapping_add(self.i);
            let lap = pos >> self.shift;
            let mut done = 0;
            for (s, slot) in self.ring.slots_along(pos, &mut out[n..end]) {
                let k = self.i;
                if k % per == 0 {
                    Mlx5Cq::<STRIDE>::take_array(s, arr);
                } else if !Mlx5Cq::<STRIDE>::session_hole::<false>(s, lap) {
                    self.cut(sink, slot);
                    return n + done + 1;
                }
                self.take(arr, k, sink, slot);
                done += 1;
            }
            n += done;
        }
        n
    }

    /// The enhanced layout's walk: the block's minis, with a block that continues the
    /// session opened where the last one ends. Returns the items written.
    ///
    /// Its lap loop has the same shape as [`Walk::basic`]'s on purpose: one loop taking
    /// the per-slot work as a closure measured 96 instructions per completion instead of
    /// 64 (the walk's state no longer stayed in registers).
    #[inline(always)]
    fn enhanced(
        &mut self,
        arr: &mut MiniCqeArray,
        seen: Option<u32>,
        sink: &mut impl MiniSink,
        out: &mut [Completion],
    ) -> usize {
        let entries = self.ring.entries();
        let mut n = 0;
        while n < out.len() {
            let pos = self.start.wrapping_add(self.i);
            let lap = pos >> self.shift;
            let mut done = 0;
            for (s, slot) in self.ring.slots_along(pos, &mut out[n..]) {
                if self.left == 0 {
                    let at = self.start.wrapping_add(self.i);
                    let Some(next) = next_block(s, at, lap, entries, seen) else {
                        return n + done;
                    };
                    s.read_into(Self::CQE_OFF, arr);
                    sink.stats().sessions += 1;
                    (self.start, self.count, self.i, self.left) = (at, next, 0, next);
                }
                let k = self.i;
                if k != 0 && !Mlx5Cq::<STRIDE>::session_hole::<true>(s, lap) {
                    self.cut(sink, slot);
                    return n + done + 1;
                }
                self.take(arr, k, sink, slot);
                done += 1;
            }
            n += done;
        }
        n
    }
}

/// Enhanced layout: the count of the block in slot `s` (running position `pos`, lap
/// `lap`) if it continues the session: the device wrote it this lap, and it is a block of
/// at most seven minis that fits in the slots the device could have written.
#[inline(always)]
pub(super) fn next_block<const STRIDE: usize>(
    s: SlotRef<'_, STRIDE>,
    pos: u32,
    lap: u32,
    entries: u32,
    seen: Option<u32>,
) -> Option<u32> {
    // Byte 62 says the device wrote the slot this lap; `op_own` comes from the same load of
    // their word. An INVALID opcode (a count of 16) fails the size test below.
    let own = s.owned_word_map_at(Mlx5Cq::<STRIDE>::LAST_WORD, |w| {
        let [.., vic, own] = w.to_ne_bytes();
        (vic == lap as u8).then_some(own)
    })?;
    let next = op_own::opcode(own) as u32 + 1;
    // The ring's size bounds a block as `check_block` bounds one that opens a session
    // (overrun-ignore: the whole ring; else what the device was shown as free).
    let free = seen.map_or(entries, |seen| entries.saturating_sub(pos.wrapping_sub(seen) & CI_MASK));
    let fits = next <= free;
    (op_own::format(own) == cqe_format::COMPRESSED && next as usize <= MAX_ENHANCED_MINIS && fits).then_some(next)
}

/// The fault item for a session cut short: a hole the device wrote (the device never
/// writes holes, so this one is not a session's).
#[cold]
#[inline(never)]
pub(super) fn truncated(stats: &mut CqStats, start: u32, count: u32) -> Completion {
    stats.faults += 1;
    Completion::from_fault(CqeFault { kind: FaultKind::Truncated, position: start, value: count })
}

/// The parts of a poller a drain works on.
struct Session<'a, const STRIDE: usize> {
    ring: &'a CqRing<STRIDE>,
    st: &'a mut MiniState,
    ci: &'a mut u32,
    /// The last consumer index the device saw (`None` with overrun-ignore).
    seen: Option<u32>,
}

/// A poller split for a drain: the session and what a sink borrows.
struct DrainParts<'a, const STRIDE: usize> {
    session: Session<'a, STRIDE>,
    registry: &'a mut Registry,
    stats: &'a mut CqStats,
    cache: &'a mut (u32, u32),
}

/// What a title (basic) or block (enhanced) opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Open {
    /// A session of `count` completions.
    Session { count: u32 },
    /// Garbage: one fault item, consuming `consume` slots.
    Fault { kind: FaultKind, value: u32, consume: u32 },
}

/// Checks a basic-layout title at a position with `free` slots the device could have
/// written. A count the ring cannot hold, or below two (array 0 sits in the
/// session's second slot), consumes only the title; a plausible count with an opcode no
/// session carries consumes the whole session.
pub(super) fn check_title(title: &Cqe64, free: u32) -> Open {
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

/// Checks an enhanced-layout block (`op_own` of the block) against its title:
/// at most seven minis; the title must be a successful completion; no title at all (the
/// poller was opened inside a session) is a truncated session.
pub(super) fn check_block(block_op_own: u8, title: Option<&Cqe64>, free: u32) -> Open {
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
    pub(super) enhanced: bool,
    format: MiniFormat,
    /// The running consumer counter when the poller was opened: what the device saw
    /// before the first doorbell write.
    pub(super) open_ci: u32,
    /// Completions left in the open session (0: none open).
    pub(super) left: u32,
    /// Index of the next completion in the open session or block.
    pub(super) idx: u32,
    /// Running position of the title (basic) or block (enhanced).
    pub(super) start: u32,
    /// Completions in the open session or block.
    pub(super) count: u32,
    pub(super) requester: bool,
    /// A requester session's QP, resolved when it opened; `None` for a responder session or
    /// an unregistered QP.
    pub(super) req: Option<ReqSession>,
    /// Responder `wqe_counter` of the next decompressed completion.
    pub(super) next_ctr: u16,
    /// Enhanced: a title has been captured.
    have_title: bool,
    /// The responder template for the current title, once computed.
    pub(super) template: Option<Option<(RecvTarget, Completion)>>,
    title: Cqe64,
    /// The mini-CQE array (basic) or block (enhanced) being decompressed, copied out of the
    /// ring so its slot can be re-invalidated and released while the session goes on.
    pub(super) arr: MiniCqeArray,
}

impl MiniState {
    /// Whether a session (basic) or block (enhanced) has completions left to drain.
    #[inline]
    pub(crate) fn session_open(&self) -> bool {
        self.left > 0
    }

    /// [`Mlx5Cq::take_title`] given the ring: the regular CQE at running position `pos`
    /// becomes the title of the enhanced blocks that follow it.
    #[inline(always)]
    pub(crate) fn take_title<const STRIDE: usize>(&mut self, ring: RingView<'_, STRIDE>, pos: u32) {
        // In place: a returned copy would be moved field by field.
        if !ring.read_into(pos, Mlx5Cq::<STRIDE>::CQE_OFF, &mut self.title) {
            self.title = Cqe64::default();
        }
        self.template = None;
        // A new title starts a new session: the next block resolves its QP again.
        self.req = None;
        // The first block after a title continues at the title's counter + 1 (kernel
        // `mlx5e_read_enhanced_title_slot`, UCX).
        self.next_ctr = self.title.wqe_counter.get().wrapping_add(1);
        self.have_title = true;
    }

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
            req: None,
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
pub(super) const REINVALID: u8 = cqe_opcode::INVALID << op_own::OPCODE_SHIFT;

impl<const STRIDE: usize> Mlx5Cq<STRIDE> {
    /// Offset of the validity iteration count (byte 62 of the cqe64) in a slot.
    pub(super) const VIC_OFF: usize = Self::CQE_OFF + off::SIGNATURE;

    /// The enhanced-layout ownership test at running position `pos` (DPDK
    /// `check_cqe_iteration`, kernel `mlx5_cqwq_get_cqe_enhanced_comp`): byte 62
    /// equals the 8-bit lap count, then (after the acquire fence that test issues) the
    /// opcode is not INVALID. Returns `op_own`.
    ///
    /// Byte 62 is the ownership byte of an enhanced CQ: the model publishes it last with
    /// release ordering, as DPDK and UCX read it first and fence after. Setting a consumed
    /// hole's byte 62 back to the previous lap's count keeps a stale count from matching
    /// 256 laps later.
    #[inline(always)]
    fn enh_owned(ring: RingView<'_, STRIDE>, pos: u32, shift: u32) -> Option<u8> {
        Self::enh_owned_slot(ring.slot_ref(pos), pos >> shift)
    }

    /// A basic session's mini-CQE array in slot `s`: copied out, then the slot is made
    /// hardware-owned again (the copy comes first: `op_own` is the last mini's last byte).
    #[inline(always)]
    pub(super) fn take_array(s: SlotRef<'_, STRIDE>, arr: &mut MiniCqeArray) {
        s.read_into(Self::CQE_OFF, arr);
        // `op_own` is the last byte of the copy's last word: store that word back changed.
        let mut last = [0u8; 8];
        last.copy_from_slice(&bytemuck::bytes_of(arr)[Self::LAST_WORD - Self::CQE_OFF..][..8]);
        last[Self::OWN_OFF - Self::LAST_WORD] = REINVALID;
        s.store_word_at(Self::LAST_WORD, u64::from_ne_bytes(last));
    }

    /// The slot offset of the 8 bytes that hold byte 62 (the iteration count) and `op_own`.
    pub(crate) const LAST_WORD: usize = STRIDE - 8;

    /// A session's hole in lap `lap` (enhanced layout if `ENH`): false if the device wrote
    /// a CQE there (the session was truncated), else the slot is made hardware-owned again.
    #[inline(always)]
    pub(super) fn session_hole<const ENH: bool>(s: SlotRef<'_, STRIDE>, lap: u32) -> bool {
        // One load of the word that holds both marks serves the test.
        let Some(w) = s.load_word_at(Self::LAST_WORD) else {
            return false;
        };
        let b = w.to_ne_bytes();
        let (vic, own) = (Self::VIC_OFF - Self::LAST_WORD, Self::OWN_OFF - Self::LAST_WORD);
        let maybe_written = if ENH { b[vic] == lap as u8 } else { sw_owned_by_lap(b[own], lap) };
        // A mark that says written is confirmed by the ownership accessors (with their
        // fence), as any CQE is.
        if maybe_written {
            let written = if ENH {
                Self::enh_owned_slot(s, lap).is_some()
            } else {
                s.owned_at(Self::OWN_OFF, |b| sw_owned_by_lap(b, lap)).is_some()
            };
            if written {
                return false;
            }
        }
        // The device did not write the hole this lap, so its bytes are no CQE: the word is
        // stored whole as "not written" (INVALID, and with `ENH` a stale count), without
        // keeping what it held. The hole is the consumer's until the index passes it.
        let mut clean = [0u8; 8];
        clean[own] = REINVALID;
        if ENH {
            clean[vic] = Self::stale_vic(lap);
        }
        s.store_word_at(Self::LAST_WORD, u64::from_ne_bytes(clean))
    }

    /// What a consumed enhanced hole's byte 62 is set to in lap `lap`: the previous lap's
    /// count, the value of a slot the device has not written this lap (the ring starts at
    /// 0xFF, lap 0's predecessor). The device never writes holes, so without this a hole's
    /// stale count would match again 256 laps after the device last wrote the slot; the
    /// poller passes every slot each lap, so the count is always at most one lap behind.
    /// A single store: a count that does not match needs no INVALID opcode beside it.
    #[inline(always)]
    pub(super) fn stale_vic(lap: u32) -> u8 {
        lap.wrapping_sub(1) as u8
    }

    /// [`Mlx5Cq::enh_owned`] on a slot of lap `lap`.
    #[inline(always)]
    pub(crate) fn enh_owned_slot(s: SlotRef<'_, STRIDE>, lap: u32) -> Option<u8> {
        // Both marks from one load of their word, before the fence (DPDK's
        // `check_cqe_iteration` reads both before its barrier too).
        s.owned_word_map_at(Self::LAST_WORD, |w| {
            let [.., vic, own] = w.to_ne_bytes();
            (vic == lap as u8 && op_own::opcode(own) != cqe_opcode::INVALID).then_some(own)
        })
    }

    /// `poll` on a CQ created with compression, routed before any set-up: an open session
    /// to its drain (a requester session whose QP was resolved to its own loop), an empty
    /// ring to 0 (one ownership test), a regular CQE to the uncompressed loop, a title or
    /// block to the general path.
    #[inline(always)]
    pub(crate) fn poll_compressed_entry(&mut self, out: &mut [Completion]) -> usize {
        if self.mini.left > 0 {
            return match out {
                [wc] => self.poll_session_single(wc),
                _ => self.poll_session_drain(out),
            };
        }
        if self.mini.enhanced {
            self.route_at_counter::<true>(out)
        } else {
            self.route_at_counter::<false>(out)
        }
    }

    /// `poll` while a session is open: its drain (a requester session whose QP was
    /// resolved to its own loop).
    #[inline(always)]
    pub(crate) fn poll_session_drain(&mut self, out: &mut [Completion]) -> usize {
        if self.mini.req.is_some() {
            self.poll_requester_session(out)
        } else {
            self.poll_compressed(out, self.ci, 0)
        }
    }

    /// [`Mlx5Cq::poll_compressed_entry`] with no session open, for one layout: by what the
    /// counter's slot holds. After a RESIZE the old ring's slot there stays unwritten, so
    /// a pending resize also returns 0 here.
    #[inline(always)]
    fn route_at_counter<const ENH: bool>(&mut self, out: &mut [Completion]) -> usize {
        let Some(own) = self.slot_owned_as::<ENH>(self.ci) else {
            return 0;
        };
        if op_own::format(own) != cqe_format::COMPRESSED {
            self.poll_compressed_regular::<ENH>(out)
        } else if let (true, [wc]) = (ENH, &mut *out) {
            // An enhanced block, polled one completion at a time: the next block of the
            // session where it continues one.
            self.poll_session_single(wc)
        } else if ENH && self.mini.req.is_some() {
            // The next block of an enhanced requester session.
            self.poll_requester_session(out)
        } else {
            self.open_at_counter(out)
        }
    }

    /// Opens the session whose title (basic) or first block (enhanced) is at the counter
    /// and polls it: a requester session whose QP resolved goes straight to its own loop,
    /// as later calls inside it do; anything else (a fault item, responder sessions) to the
    /// general path. Out of line, so that the routing stays small.
    #[inline(never)]
    fn open_at_counter(&mut self, out: &mut [Completion]) -> usize {
        let before = self.ci;
        if out.is_empty() {
            return 0;
        }
        // 0: the session is open (`out` is not empty), and `req` is its own QP, or `None`.
        let k = self.open_session(out);
        if k == 0 && self.mini.req.is_some() {
            return self.poll_requester_session(out);
        }
        self.poll_compressed(out.get_mut(k..).unwrap_or_default(), before, k)
    }

    /// The `op_own` byte of the slot at running position `pos` if the device wrote it in
    /// its current lap, by the layout's ownership test.
    #[inline(always)]
    fn slot_owned(&self, pos: u32) -> Option<u8> {
        if self.mini.enhanced {
            self.slot_owned_as::<true>(pos)
        } else {
            self.slot_owned_as::<false>(pos)
        }
    }

    /// [`Mlx5Cq::slot_owned`] for one layout (`ENH`: the enhanced layout's byte-62 test).
    #[inline(always)]
    pub(crate) fn slot_owned_as<const ENH: bool>(&self, pos: u32) -> Option<u8> {
        let ring = self.ring.view();
        let shift = ring.entries().trailing_zeros();
        if ENH {
            Self::enh_owned(ring, pos, shift)
        } else {
            ring.owned_at(pos, Self::OWN_OFF, |b| sw_owned_by_lap(b, pos >> shift))
        }
    }

    /// Slots the device could have filled from `pos` on: what the last consumer index it
    /// was shown leaves free (overrun-ignore: the whole ring). A session claiming more is
    /// truncated garbage: without overrun-ignore the device does not write past that index
    /// (inferred; overrun is a CQ error, `ibv_create_cq_ex(3)` on
    /// `IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN`).
    fn free_slots(&self, pos: u32) -> u32 {
        let entries = self.ring.entries();
        match self.device_seen() {
            None => entries,
            Some(seen) => entries.saturating_sub(pos.wrapping_sub(seen) & CI_MASK),
        }
    }

    /// The last consumer index the device was shown (before the first doorbell write, the
    /// counter at open); `None` with overrun-ignore, where the device may fill the ring.
    #[inline(always)]
    pub(super) fn device_seen(&self) -> Option<u32> {
        (!self.cfg.overrun_ignore).then(|| self.last_set_ci().unwrap_or(self.mini.open_ci & CI_MASK))
    }

    /// Completions of an open compressed session that `poll` has not returned yet (0 when
    /// none is open): a session can straddle poll batches.
    pub fn session_left(&self) -> u32 {
        self.mini.left
    }

    /// `poll` for a CQ created with compression: drains an open session, polls regular
    /// CQEs, opens the sessions it meets, and publishes the consumer index once. `before`
    /// is the counter when the poll call began and `done` the items it already wrote (the
    /// requester session entry comes here when its session ends with room left).
    #[inline(never)]
    pub(crate) fn poll_compressed(&mut self, out: &mut [Completion], before: u32, done: usize) -> usize {
        let n = done + self.poll_compressed_general(out);
        // As for regular CQs, a call that moved nothing writes nothing.
        if self.ci != before {
            self.after_batch(n as u32);
        }
        n
    }

    /// `poll` for a CQ created with compression when no session is open: the regular CQEs
    /// go through the uncompressed poll loop (its fast runs and slow path, with the
    /// layout's ownership test), which stops at a title or block; the general path goes
    /// on from there. So regular CQEs cost what they cost on a CQ without compression, plus
    /// the routing (enhanced: and the lap and title bookkeeping of each run).
    #[inline(never)]
    fn poll_compressed_regular<const ENH: bool>(&mut self, out: &mut [Completion]) -> usize {
        let before = self.ci;
        // Basic: the very functions of CQs without compression. Enhanced: the same loop
        // with its ownership test, inlined here (as a function of its own, or with a
        // one-CQE path beside it, it compiles worse).
        let v1 = self.cfg.cqe_version == CqeVersion::V1;
        let n = match (ENH, v1, &mut *out) {
            (false, _, [wc]) => self.poll_single(wc),
            (false, ..) => self.poll_loop(out),
            (true, true, _) => self.poll_loop_v::<true, true>(out),
            (true, false, _) => self.poll_loop_v::<false, true>(out),
        };
        if n < out.len() && !self.resize_pending() && self.slot_owned(self.ci).is_some() {
            // A title or block: open it and go on.
            return self.poll_compressed(&mut out[n..], before, n);
        }
        if self.ci != before {
            self.after_batch(n as u32);
        }
        n
    }

    /// The open requester session's resolved QP is dropped: the next block resolves its QP
    /// from its own title (a regular CQE passed since).
    #[inline(always)]
    pub(crate) fn end_requester_session(&mut self) {
        self.mini.req = None;
    }

    /// Enhanced layout: the regular CQE at running position `pos`, which a poll just
    /// passed, becomes the title of the blocks that follow it. Copied before the consumer
    /// index can release its slot.
    #[inline(always)]
    pub(crate) fn take_title(&mut self, pos: u32) {
        self.mini.take_title(self.ring.view(), pos);
    }

    /// The rest of [`Mlx5Cq::poll_compressed`]: any session, regular CQEs, session opens.
    #[inline(always)]
    fn poll_compressed_general(&mut self, out: &mut [Completion]) -> usize {
        if out.is_empty() || self.resize_pending() {
            0
        } else if self.cfg.cqe_version == CqeVersion::V1 {
            self.poll_compressed_v::<true>(out)
        } else {
            self.poll_compressed_v::<false>(out)
        }
    }

    #[inline(always)]
    fn poll_compressed_v<const V1: bool>(&mut self, out: &mut [Completion]) -> usize {
        // `n` never passes `out.len()` (each step writes into what is left); the `let-else`
        // forms say so without a panic path.
        let mut n = 0;
        loop {
            if self.mini.left > 0 {
                let Some(rest) = out.get_mut(n..) else {
                    break;
                };
                n += self.drain::<V1>(rest);
                if self.mini.left > 0 {
                    break;
                }
            }
            if n == out.len() || self.resize_pending() {
                break;
            }
            let Some(rest) = out.get_mut(n..) else {
                break;
            };
            let (m, at_session) = if self.mini.enhanced {
                self.poll_regular::<V1, true>(rest)
            } else {
                self.poll_regular::<V1, false>(rest)
            };
            n += m;
            if !at_session {
                break;
            }
            let Some(rest) = out.get_mut(n..) else {
                break;
            };
            n += self.open_session(rest);
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
        let Some(head) = ring.read_at::<Cqe64>(t, Self::CQE_OFF) else {
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
                // The fault ends a requester session as a regular CQE does: its loop would
                // otherwise go on from the session's old position and move `ci` back.
                self.end_requester_session();
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
                    st.arr = ring.read_at(t, Self::CQE_OFF).unwrap_or_default();
                } else {
                    // Array 0 is the slot after the title; the device wrote every array
                    // before the title's owner byte (inferred: DPDK's `mlx5_rx_poll_len`
                    // reads the arrays with no ownership test of their own), so the title's
                    // ownership check covers it.
                    st.title = head;
                    st.template = None;
                    st.next_ctr = head.wqe_counter.get();
                    st.arr = ring.read_at(t.wrapping_add(1), Self::CQE_OFF).unwrap_or_default();
                }
                st.requester = st.title.opcode() == cqe_opcode::REQ;
                self.mini.req = if self.mini.requester { self.resolve_requester() } else { None };
                0
            }
        }
    }

    /// The QP of the open session's requester title, looked up once for the whole session
    /// (the registry only grows, so the slot stays right while the session lasts).
    fn resolve_requester(&mut self) -> Option<ReqSession> {
        let t = &self.mini.title;
        let v1 = self.cfg.cqe_version == CqeVersion::V1;
        let key = if v1 { t.srqn_uidx() } else { t.qpn() };
        let (qpn, timestamp) = (t.qpn(), t.timestamp.get());
        let mut res = Consume::new(&mut self.registry, self.cache, &mut self.stats);
        let slot = res.sq_qp(key, v1);
        self.cache = res.cache();
        Some(ReqSession { slot: slot?, qpn, timestamp })
    }

    /// Makes a consumed session slot hardware-owned again (basic layout; the kernel's
    /// `mlx5e_cqes_update_owner` and DPDK's `mlx5_rx_poll_len` do the same): the
    /// device never writes holes, and arrays have no owner byte, so without this they could
    /// pass the ownership test a lap later. Enhanced slots instead get the previous lap's
    /// iteration count in byte 62 ([`Mlx5Cq::stale_vic`]), so a stale count cannot match
    /// 256 laps on. Relaxed stores: the consumer-index publication (release) orders them
    /// before the device reuses the slots.
    #[inline(always)]
    fn reinvalidate(&self, pos: u32) {
        // Constant offsets inside the slot: these stores cannot fail.
        let _ = if self.mini.enhanced {
            let lap = pos >> self.ring.entries().trailing_zeros();
            self.ring.store_u8(pos, Self::VIC_OFF, Self::stale_vic(lap))
        } else {
            self.ring.store_u8(pos, Self::OWN_OFF, REINVALID)
        };
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
    /// reset `MiniState::template` (and `MiniState::req`, the requester session's QP) when
    /// it does.
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
            let mut res = Consume::new(&mut self.registry, self.cache, &mut self.stats);
            let found = cqe::recv_target(&mut res, &f, V1);
            self.cache = res.cache();
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

    /// [`Mlx5Cq::drain`] for one kind of session (requester or responder) and layout, with
    /// the fastest sink that applies: the session's QP resolved once when it is registered
    /// (and, for receives, the title has a template on the QP's own RQ), the registry per
    /// completion otherwise.
    #[inline(always)]
    fn drain_kind<const V1: bool, const REQ: bool, const ENH: bool>(&mut self, out: &mut [Completion]) -> usize {
        if REQ {
            if let Some(n) = self.drain_requester(out) {
                return n;
            }
        } else if let Some((RecvTarget::Rq(slot), tpl)) = self.resp_template::<V1>() {
            let mut parts = self.drain_parts();
            if let Some(qp) = parts.registry.qp_at(slot) {
                let mut sink = RespSink::new(qp, parts.stats, &tpl);
                let n = Self::drain_into::<ENH, _>(&mut parts.session, &mut sink, out);
                // Advance the RQ tail, once per drain.
                qp.rq.set_tail(sink.rq_tail);
                return n;
            }
        }
        let template = if REQ { None } else { self.resp_template::<V1>() };
        let mut parts = self.drain_parts();
        let res = Consume::new(parts.registry, *parts.cache, parts.stats);
        let format = parts.session.st.format;
        let title = parts.session.st.title;
        let mut sink = GenericSink::<V1, REQ> { res, title: &title, format, template };
        let n = Self::drain_into::<ENH, _>(&mut parts.session, &mut sink, out);
        *parts.cache = sink.res.cache();
        n
    }

    /// The poller split for a drain: the session (ring, state, counter) apart from the
    /// registry and counters a sink borrows.
    fn drain_parts(&mut self) -> DrainParts<'_, STRIDE> {
        let seen = self.device_seen();
        DrainParts {
            session: Session { ring: &self.ring, st: &mut self.mini, ci: &mut self.ci, seen },
            registry: &mut self.registry,
            stats: &mut self.stats,
            cache: &mut self.cache,
        }
    }

    /// Produces the open session's next completions through `sink`: hole checks and
    /// re-invalidation, mini-CQE arrays, enhanced blocks that continue the session. The
    /// session state lives in locals during the walk and is stored back once.
    ///
    /// The walk goes through the slots in runs that stay inside one lap of the ring (the
    /// lap is a loop constant, the slot a stepped pointer). A slot is the session's title
    /// or block (basic 0, enhanced 0: nothing to check), array 0 (basic 1, read when the
    /// session opened), a later array (basic, a multiple of 8: read where a hole is
    /// checked), or a hole, checked for a CQE the device wrote there. Every slot but a
    /// title or block is made hardware-owned again. In the enhanced layout the slot after a
    /// block's last completion may be the next block of the same session, which the walk
    /// opens in place.
    #[inline(always)]
    fn drain_into<const ENH: bool, S: MiniSink>(
        ses: &mut Session<'_, STRIDE>,
        sink: &mut S,
        out: &mut [Completion],
    ) -> usize {
        let ring = ses.ring.view();
        let mut w = Walk {
            ring,
            shift: ring.entries().trailing_zeros(),
            start: ses.st.start,
            count: ses.st.count,
            i: ses.st.idx,
            left: ses.st.left,
            ctr: ses.st.next_ctr,
        };
        let n =
            if ENH { w.enhanced(&mut ses.st.arr, ses.seen, sink, out) } else { w.basic(&mut ses.st.arr, sink, out) };
        let st = &mut *ses.st;
        st.start = w.start;
        st.count = w.count;
        st.idx = w.i;
        st.next_ctr = w.ctr;
        st.left = w.left;
        // The next unconsumed slot: the session's start plus the completions taken (a
        // truncation's fault item consumes nothing).
        *ses.ci = w.start.wrapping_add(w.i);
        n
    }

    /// The regular CQEs of a compressed CQ, stopping without consuming at a title or block:
    /// runs of the cached QP on the uncompressed fast path with the layout's ownership test
    /// (owner bit, or the iteration count when `ENH`), and each CQE off it through
    /// [`Mlx5Cq::poll_loop_regular`]; both take the enhanced layout's titles
    /// ([`Mlx5Cq::take_title`]). Returns the items written and whether it stopped at a
    /// session.
    fn poll_regular<const V1: bool, const ENH: bool>(&mut self, out: &mut [Completion]) -> (usize, bool) {
        let mut n = 0;
        let at_session = loop {
            let (k, stop) = self.fast_run_as::<V1, ENH>(out.get_mut(n..).unwrap_or_default());
            n += k;
            match stop {
                Stop::Full => break false,
                Stop::Lap => continue,
                // A key already cached missed: a requester CQE of an entry without a send
                // queue, for the general loop.
                Stop::Miss(key) if key != self.cache.0 && self.switch_qp::<V1>(key) => continue,
                // An unknown QP (the general loop writes its fault item), a CQE off the
                // fast path, a session, or an empty ring.
                _ => {}
            }
            let before = self.ci;
            let (m, block) = self.poll_loop_regular::<V1, ENH>(out.get_mut(n..n + 1).unwrap_or_default());
            n += m;
            if block || self.ci == before || self.resize_pending() {
                break block;
            }
        };
        (n, at_session)
    }

    /// The general loop over regular CQEs of a compressed CQ (errors, swallowed CQEs,
    /// RESIZE, other QPs' CQEs), with the layout's ownership test; stops without consuming
    /// at a title or block. Enhanced: the last CQE passed becomes the title. Returns the
    /// items written and whether it stopped at a session.
    fn poll_loop_regular<const V1: bool, const ENH: bool>(&mut self, out: &mut [Completion]) -> (usize, bool) {
        let ring = self.ring.view();
        let shift = ring.entries().trailing_zeros();
        let mut ci = self.ci;
        let mut res = Consume::new(&mut self.registry, self.cache, &mut self.stats);
        let (mut resized, mut block) = (false, false);
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
            let cqe = RingCqe { slot: ring.slot_ref::<STRIDE>(cur), op_own: own };
            match Self::CLASS[own as usize] {
                FAST_REQ => cqe::parse_req(&mut res, &cqe, V1, cur, slot),
                FAST_RESP => cqe::parse_resp(&mut res, &cqe, V1, cur, slot),
                _ => {
                    let Some(c) = ring.read_at::<Cqe64>(cur, Self::CQE_OFF) else {
                        break;
                    };
                    let half = Self::inline_half(ring, cur, own);
                    match cqe::parse_slow(&mut res, c, half, V1, STRIDE as u32, cur, slot) {
                        Parsed::Swallowed => {
                            res.stats.swallowed += 1;
                            continue;
                        }
                        Parsed::Resize => {
                            resized = true;
                            break;
                        }
                        Parsed::Wc => {
                            if slot.status != WcStatus::Success && slot.fault().is_none() {
                                res.stats.errors.add(slot.status);
                            }
                            Parsed::Wc
                        }
                    }
                }
            };
            n += 1;
        }
        let passed = ci != self.ci;
        self.ci = ci;
        self.cache = res.cache();
        if ENH && passed {
            self.take_title(ci.wrapping_sub(1));
        }
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
                arr = ring.read_at(pos, Self::CQE_OFF).unwrap_or_default();
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
        // Enhanced: the responder WQE counter of the next block's first completion. A block
        // that continues a session goes on from where the last one ended; after a new title
        // it starts at the title's counter + 1.
        let mut next_ctr = st.next_ctr;
        let mut ci = self.ci;
        loop {
            if st.enhanced {
                Self::enh_owned(ring, ci, shift)?;
            } else {
                ring.owned_at(ci, Self::OWN_OFF, |b| sw_owned_by_lap(b, ci >> shift))?;
            }
            let cqe: Cqe64 = ring.read_at(ci, Self::CQE_OFF)?;
            if cqe.format() != cqe_format::COMPRESSED {
                let half = Self::inline_half(ring, ci, cqe.op_own);
                match cqe::parse_slow(&mut res, cqe, half, v1, STRIDE as u32, ci, &mut out) {
                    Parsed::Wc => return Some(out),
                    Parsed::Resize => return None,
                    Parsed::Swallowed => {
                        title = Some(cqe);
                        next_ctr = cqe.wqe_counter.get().wrapping_add(1);
                        ci = ci.wrapping_add(1);
                        continue;
                    }
                }
            }
            let free = self.free_slots(ci);
            let (open, title, mini, ctr) = if st.enhanced {
                let arr: MiniCqeArray = ring.read_at(ci, Self::CQE_OFF)?;
                let t = title.unwrap_or_default();
                (check_block(cqe.op_own, title.as_ref(), free), t, arr[0], next_ctr)
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
