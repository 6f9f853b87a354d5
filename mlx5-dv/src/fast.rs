//! The poll fast path: runs of successful requester and responder CQEs of one QP, the
//! steady state of a busy CQ.
//!
//! What makes it cheap, per CQE:
//! - **One table load tests ownership and dispatches.** The class table is indexed by
//!   `op_own ^ expected_owner`: entries whose owner bit mismatches or whose opcode is
//!   INVALID read [`STOP`], so the rdma-core ownership rule and the opcode/format switch
//!   are the same load.
//! - **The QP is looked up when it changes, not per CQE.** The run holds the current QP; a
//!   CQE only compares its QPN (or user index) with that QP's key, in wire byte order. A
//!   CQE of another QP with the same receive path (a CQ shared by many QPs) moves the run
//!   to that QP in place, as rdma-core moves `cur_rsc`: one load from the registry's
//!   table of low key bits, a check of the QP found there, and a pointer change. Each QP
//!   keeps its own queue positions, so nothing is written back. Any other QP (or one whose
//!   low bits another key took) ends the run ([`Stop::Miss`]) and the poller starts a new
//!   run for it.
//! - **The completion head is one store.** `wc_flags` through `sl` come from per-opcode
//!   tables as a [`WcHeadWord`]; the responder table has the GRH bit and `sl` folded in.
//! - **Queue positions move with each CQE, in the QP and SRQ themselves,** as rdma-core's
//!   do: the SQ retires through the WQE a requester CQE names, the RQ tail and the SRQ's
//!   completion count go up by one (memory increments, which keep registers free in the
//!   loop). A run keeps nothing to write back, so a change of QP costs no more than the
//!   lookup.
//! - **A one-at-a-time poll is a run over a one-element slice**, where the loop folds away;
//!   the commonest one (a QP on its own RQ or an SRQ) has a lean copy that calls nothing.
//! - **Every CQE field is read from ring memory once** (atomic loads are never merged).
//!
//! Receives complete from the QP's RQ (with the raw Ethernet extras for QPs with the RX
//! checksum capability) or from the SRQ it is attached to. Anything else (errors, raw
//! Ethernet QPs on an SRQ, inline data, RESIZE, garbage) stops the run at that CQE,
//! unconsumed. A receive on a QP's RQ whose data came inside the CQE (inline scatter,
//! formats 1 and 2) then goes on in an *inline run* ([`Mlx5Cq::fast_run_inline`]), which
//! copies the data in the run into the buffers its WQE names when the QP's WQEs are
//! registered and the copy goes the common way; everything else goes to the slow path in
//! `cq.rs`. The inline run is a loop of its own, so that the copy's call costs the plain
//! run's loop no register.

use crate::cq::{expected_owner, per_lap_parity, Mlx5Cq};
use crate::cqe::{eth_extras, format_fits, req_opcode_from_wr_data, ReqLen, RespImm, REQ_MAP, RESP_MAP};
use crate::fields::RingCqe;
use crate::registry::{Qp, RecvKind, Registry, Srq, NO_SQ_PATH, PLAIN_RQ_PATH};
use core::mem::offset_of;
use dvcq_provider::{Completion, SlotRef, WcFlags, WcHead, WcHeadWord, WcOpcode};
use dvcq_uapi::mlx5::cqe::{flags_rqpn, op_own, Cqe64, QPN_MASK};
use dvcq_uapi::mlx5::opcode::{cqe_format, cqe_opcode};
use dvcq_uapi::Be32;

/// Not a fast-path CQE: the ring is empty here (owner mismatch, INVALID opcode) or the
/// CQE needs the slow path; the poller tells the two apart after the run.
const STOP: u8 = 0;
/// A successful requester CQE.
const REQ: u8 = 1;
/// A successful responder CQE (opcodes 1-4).
const RESP: u8 = 2;
/// A successful responder CQE (opcodes 1-4) with its data inside (inline scatter, format 1,
/// or 2 in a 128-byte CQE): [`RESP`] plus the copy, in an inline run only.
const RESP_INLINE: u8 = 3;

/// Why a fast run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// `out` is full.
    Full,
    /// The CQE at the poller's counter is not a fast-path CQE, or the ring is empty there.
    Other,
    /// The CQE at the poller's counter names another QP: this key (QPN or user index).
    Miss(u32),
    /// The run reached the ring's end (a run stays in one lap, whose owner parity or lap
    /// count is fixed): a new run goes on.
    Lap,
}

/// The class of an `op_own` byte already XORed with the expected owner bit. With
/// `inline` (an inline run's table), a responder CQE with inline data that a CQE of
/// `cqe_size` bytes can carry is [`RESP_INLINE`]; any other CQE with inline data (a
/// requester's READ or atomic response, a receive on an SRQ, any in a plain run) stops the
/// run.
const fn owned_class(b: u8, resp: bool, inline: bool, cqe_size: usize) -> u8 {
    // The owner bit now reads 0 when it matches the lap parity (rdma-core `get_sw_cqe`).
    if b & 1 != 0 || op_own::opcode(b) == cqe_opcode::INVALID {
        return STOP;
    }
    let format = op_own::format(b);
    let plain = format == cqe_format::NO_INLINE;
    match op_own::opcode(b) {
        cqe_opcode::REQ if plain => REQ,
        cqe_opcode::RESP_WR_IMM..=cqe_opcode::RESP_SEND_INV if resp && plain => RESP,
        cqe_opcode::RESP_WR_IMM..=cqe_opcode::RESP_SEND_INV if inline && format_fits(format, cqe_size) => RESP_INLINE,
        _ => STOP,
    }
}

const fn owned_class_table(resp: bool, inline: bool, cqe_size: usize) -> [u8; 256] {
    let mut t = [STOP; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = owned_class(b as u8, resp, inline, cqe_size);
        b += 1;
    }
    t
}

/// A requester translation for the fast path: the completion head, and whether the
/// opcode needs more than the head (a `byte_len`, or an opcode from `wr_data`).
#[derive(Clone, Copy)]
struct ReqFast {
    head: WcHeadWord,
    special: bool,
}

/// [`REQ_MAP`] as heads, indexed by the WQE opcode.
const REQ_FAST: [ReqFast; 256] = {
    let mut t = [ReqFast { head: WcHead::success(WcOpcode::Send, WcFlags::empty(), 0).word(), special: false }; 256];
    let mut i = 0;
    while i < 256 {
        let m = REQ_MAP[i];
        let special = m.from_wr_data || !matches!(m.len, ReqLen::Unset);
        t[i] = ReqFast { head: WcHead::success(m.opcode, m.flags, 0).word(), special };
        i += 1;
    }
    t
};

/// A responder translation for the fast path: the head with the GRH flag and `sl` already
/// in it, and where `imm_data` comes from.
#[derive(Clone, Copy)]
struct RespFast {
    head: WcHeadWord,
    imm: RespImm,
}

/// Index into [`RESP_FAST`]: the low two opcode bits (opcodes 1-4 are distinct there) and
/// bits 29:24 of `flags_rqpn` (the two GRH bits and `sl`).
#[inline(always)]
fn resp_index(op_own: u8, flags_rqpn: u32) -> usize {
    ((op_own as usize & 0x30) << 2) | ((flags_rqpn >> flags_rqpn::SL_SHIFT) as usize & 0x3f)
}

/// rdma-core `handle_responder`'s opcode switch, GRH test and `sl` as one table.
const RESP_FAST: [RespFast; 256] = {
    let mut t =
        [RespFast { head: WcHead::success(WcOpcode::Recv, WcFlags::empty(), 0).word(), imm: RespImm::Unset }; 256];
    let mut op = cqe_opcode::RESP_WR_IMM;
    while op <= cqe_opcode::RESP_SEND_INV {
        let m = RESP_MAP[op as usize];
        let mut bits = 0u32;
        while bits < 64 {
            let grh = if bits >> 4 != 0 { WcFlags::GRH } else { WcFlags::empty() };
            let head = WcHead::success(m.opcode, m.flags.union(grh), (bits & 0xf) as u8).word();
            t[(((op as usize) & 3) << 6) | bits as usize] = RespFast { head, imm: m.imm };
            bits += 1;
        }
        op += 1;
    }
    t
};

/// Writes a requester completion's head for WQE opcode `wqe_opcode` (the CQE's
/// `sop_drop_qpn >> 24`); true when the head does not cover it and [`req_special`] must
/// follow.
#[inline(always)]
pub(crate) fn req_head(wc: &mut Completion, wqe_opcode: u8, wr_data: u8) -> bool {
    let m = REQ_FAST[wqe_opcode as usize];
    wc.set_head(m.head);
    m.special || wr_data == WcOpcode::Driver2 as u8
}

/// What a requester head does not cover: READ and atomic lengths, opcodes from `wr_data`
/// (UMR, SET_PSV, NOP, MMO) and rdma-core's DRIVER2 override.
#[cold]
#[inline(never)]
pub(crate) fn req_special(wc: &mut Completion, wqe_opcode: u8, wr_data: u8, byte_cnt: u32) {
    let m = REQ_MAP[wqe_opcode as usize];
    wc.opcode = req_opcode_from_wr_data(m, wr_data);
    match m.len {
        ReqLen::Unset => {}
        ReqLen::ByteCnt => wc.byte_len = byte_cnt,
        ReqLen::Eight => wc.byte_len = 8,
    }
}

/// Writes a responder completion's head (opcode; flags with GRH; `sl`, which on RoCE is
/// the packet type rdma-core reports as `sl` anyway) and its `imm_data`: immediate data in
/// network order, the invalidated rkey byte-swapped, nothing for a plain SEND
/// (rdma-core `handle_responder`).
#[inline(always)]
pub(crate) fn resp_head(wc: &mut Completion, op_own: u8, flags_rqpn: u32, imm: Be32) {
    let m = RESP_FAST[resp_index(op_own, flags_rqpn)];
    wc.set_head(m.head);
    match m.imm {
        RespImm::Unset => {}
        RespImm::Raw => wc.imm_data = imm.raw(),
        RespImm::Swapped => wc.imm_data = imm.get(),
    }
}

impl<const STRIDE: usize> Mlx5Cq<STRIDE> {
    /// The receive path of the cached QP, which picks the fast run's specialisation; `None`
    /// until a lookup fills the cache (CQEs go through the slow path, which fills it).
    #[inline(always)]
    fn cached_recv_kind(&self) -> Option<RecvKind> {
        let qp = self.registry.qp_at_ref(self.cache.1)?;
        Some(if qp.recv_path() == PLAIN_RQ_PATH { RecvKind::Rq } else { qp.recorded_recv_kind() })
    }

    /// Polls successful CQEs of the cached QP into `out` until `out` is full or the next
    /// CQE is not one (left unconsumed at `self.ci`); returns the count and why it stopped.
    /// `ENH` picks the ownership test of the CQ's layout: the owner bit, or (enhanced CQE
    /// compression: the kernel's `mlx5_cqwq_get_cqe_enhanced_comp`, DPDK's
    /// `check_cqe_iteration`) the iteration count in byte 62. The regular CQEs of a
    /// compressed CQ take this path too; a title or block (format 3) stops the run.
    #[inline(always)]
    pub(crate) fn fast_run_as<const V1: bool, const ENH: bool>(&mut self, out: &mut [Completion]) -> (usize, Stop) {
        self.fast_run_kind::<V1, ENH, false>(out)
    }

    /// [`Mlx5Cq::fast_run_as`] for one CQE with the owner-bit test (`poll_single`): the
    /// CQE at the counter alone, with no walk to set up.
    #[inline(always)]
    pub(crate) fn fast_run_single<const V1: bool>(&mut self, wc: &mut Completion) -> (usize, Stop) {
        self.fast_run_kind::<V1, false, true>(core::slice::from_mut(wc))
    }

    /// The fast run specialised for the cached QP's receive path (`ONE`: a one-element
    /// `out`, taken without a walk).
    #[inline(always)]
    fn fast_run_kind<const V1: bool, const ENH: bool, const ONE: bool>(
        &mut self,
        out: &mut [Completion],
    ) -> (usize, Stop) {
        let Some(kind) = self.cached_recv_kind() else {
            return (0, Stop::Other);
        };
        match kind {
            RecvKind::Rq => self.fast_run_qp::<V1, ENH, RECV_RQ, ONE>(out),
            RecvKind::Srq => self.fast_run_qp::<V1, ENH, RECV_SRQ, ONE>(out),
            RecvKind::RqEth => self.fast_run_qp::<V1, ENH, RECV_RQ_ETH, ONE>(out),
            RecvKind::Slow => self.fast_run_qp::<V1, ENH, RECV_SLOW, ONE>(out),
        }
    }

    /// The one-CQE fast path for a CQE whose ownership byte `own` the caller found
    /// software-owned (the acquire fence issued): it is not loaded or tested again.
    /// Returns what a one-element [`Mlx5Cq::fast_run_as`] returns.
    #[inline(always)]
    pub(crate) fn fast_one<const V1: bool>(&mut self, own: u8, wc: &mut Completion) -> (usize, Stop) {
        let Some(kind) = self.cached_recv_kind() else {
            return (0, Stop::Other);
        };
        match kind {
            RecvKind::Rq => self.fast_one_qp::<V1, RECV_RQ>(own, wc),
            RecvKind::Srq => self.fast_one_qp::<V1, RECV_SRQ>(own, wc),
            RecvKind::RqEth => self.fast_one_qp::<V1, RECV_RQ_ETH>(own, wc),
            RecvKind::Slow => self.fast_one_qp::<V1, RECV_SLOW>(own, wc),
        }
    }

    /// [`Mlx5Cq::fast_one`] for a CQE of a QP that receives on its own RQ without extras
    /// (the commonest QP) or from an SRQ, found by the CQE's key ([`Registry::qp_for_one`]:
    /// the QP the last such poll took, or the table of low key bits), not through the
    /// poller's cache; true when it took the CQE. Any other CQE is left to the general
    /// path.
    #[inline(always)]
    pub(crate) fn fast_one_rq<const V1: bool>(&mut self, own: u8, wc: &mut Completion) -> bool {
        // Both receive paths take the same classes.
        let c = Hot::<STRIDE, V1, RECV_RQ>::CLASS_ANY_OWNER[own as usize];
        if c == STOP {
            return false;
        }
        let ci = self.ci;
        let slot = self.ring.view().slot_ref(ci);
        let cqe = RingCqe { slot, op_own: own };
        let key = cqe.be32(if V1 { offset_of!(Cqe64, srqn_uidx) } else { offset_of!(Cqe64, sop_drop_qpn) });
        let reg = &self.registry;
        let Some(qp) = reg.qp_for_one::<V1>(key.raw() & QPN_MASK.to_be()) else {
            return false;
        };
        let cache = &mut self.cache;
        let done = if qp.recv_path() == PLAIN_RQ_PATH {
            let srq = reg.no_srq();
            Hot::<STRIDE, V1, RECV_RQ> { qp, srq, reg, cache }.owned_cqe::<true>(c, own, slot, wc, key)
        } else if qp.recv_path() & NO_SQ_PATH == 0 && qp.recorded_recv_kind() == RecvKind::Srq {
            let srq = reg.srq_of(qp);
            Hot::<STRIDE, V1, RECV_SRQ> { qp, srq, reg, cache }.owned_cqe::<true>(c, own, slot, wc, key)
        } else {
            return false;
        };
        if done.is_err() {
            return false;
        }
        self.ci = ci.wrapping_add(1);
        true
    }

    #[inline(always)]
    fn fast_one_qp<const V1: bool, const RECV: u8>(&mut self, own: u8, wc: &mut Completion) -> (usize, Stop) {
        let ci = self.ci;
        let Some(mut hot) = Hot::<STRIDE, V1, RECV>::new(&self.registry, &mut self.cache) else {
            return (0, Stop::Other);
        };
        let ring = self.ring.view();
        // The caller tested the owner bit: the class is the same whatever it is.
        let c = Hot::<STRIDE, V1, RECV>::CLASS_ANY_OWNER[own as usize];
        let done = if c == STOP {
            Err(Stop::Other)
        } else {
            hot.owned_cqe::<false>(c, own, ring.slot_ref(ci), wc, Be32::default())
        };
        match done {
            Ok(()) => {
                self.ci = ci.wrapping_add(1);
                (1, Stop::Full)
            }
            Err(s) => (0, s),
        }
    }

    /// [`Mlx5Cq::fast_run_as`] for a QP whose receives come from its RQ, from an SRQ, or
    /// take the slow path (`RECV`); the class table is then a constant.
    #[inline(always)]
    fn fast_run_qp<const V1: bool, const ENH: bool, const RECV: u8, const ONE: bool>(
        &mut self,
        out: &mut [Completion],
    ) -> (usize, Stop) {
        let ci = self.ci;
        let Some(mut hot) = Hot::<STRIDE, V1, RECV>::new(&self.registry, &mut self.cache) else {
            return (0, Stop::Other);
        };
        let ring = self.ring.view();
        let mut cur = ci;
        let mut stop = Stop::Full;
        // A run stops at the ring's end: its lap's owner parity (or, for the enhanced
        // test, its 8-bit lap count) is one value for the whole run, and the loop steps a
        // slot pointer instead of reducing every position (one CQE always fits, so a
        // one-element run skips the test).
        let lap = if ENH { (ci >> ring.entries().trailing_zeros()) as u8 } else { 0 };
        if ONE {
            // One CQE (`poll_single`): no walk to set up.
            if let Some(wc) = out.first_mut() {
                match hot.cqe_at(ring.slot_ref(ci), expected_owner(ci, ring.entries()), wc) {
                    Ok(()) => cur = cur.wrapping_add(1),
                    Err(s) => stop = s,
                }
            }
        } else if !ENH {
            // One lap at most, like the enhanced run: its slots are consecutive and share
            // one owner parity, so the loop steps a pointer and the class table of the
            // lap's parity is picked once.
            if out.len() > ring.slots_to_end(ci) as usize {
                stop = Stop::Lap;
            }
            let class = &Hot::<STRIDE, V1, RECV>::CLASS_IN_LAP[expected_owner(ci, ring.entries()) as usize];
            for (slot, wc) in ring.slots_along(ci, out) {
                if let Err(s) = hot.cqe_in_lap(slot, class, wc) {
                    stop = s;
                    break;
                }
                cur = cur.wrapping_add(1);
            }
        } else {
            if out.len() > 1 && out.len() > ring.slots_to_end(ci) as usize {
                stop = Stop::Lap;
            }
            for (slot, wc) in ring.slots_along(ci, out) {
                if let Err(s) = hot.cqe_enhanced(slot, lap, wc) {
                    stop = s;
                    break;
                }
                cur = cur.wrapping_add(1);
            }
        }
        self.ci = cur;
        if ENH && cur != ci {
            // The run's last CQE is the title of a block right after it (the kernel's
            // `mlx5e_read_enhanced_title_slot` takes the last regular CQE as title): copied
            // now, before the consumer index releases its slot, unless the run stopped
            // with `out` full before a CQE the fast path takes (that one, or a later one,
            // is then the title), checked only inside the run's lap.
            let next = ring.slot_ref::<STRIDE>(cur);
            let regular_next = matches!(stop, Stop::Full)
                && ring.slots_to_end(cur) != ring.entries()
                && next
                    .owned_word_map_at(Self::LAST_WORD, |w| {
                        let [.., vic, own] = w.to_ne_bytes();
                        (vic == lap).then_some(own)
                    })
                    .is_some_and(|own| Hot::<STRIDE, V1, RECV>::CLASS_ANY_OWNER[own as usize] != STOP);
            if regular_next {
                // A regular CQE ends a requester session all the same.
                self.end_requester_session();
            } else {
                self.take_title(cur.wrapping_sub(1));
            }
        }
        (cur.wrapping_sub(ci) as usize, stop)
    }
}

impl<const STRIDE: usize> Mlx5Cq<STRIDE> {
    /// An inline run: [`Mlx5Cq::fast_run_as`] under the owner-bit test for a cached QP
    /// whose receives come from its RQ, where a receive with inline data
    /// ([`RESP_INLINE`]) is taken too, its data copied ([`Hot::resp_inline`]). The poll
    /// loop starts one where a plain run stopped; `(0, Stop::Other)` for another QP.
    #[inline(never)]
    pub(crate) fn fast_run_inline<const V1: bool>(&mut self, out: &mut [Completion]) -> (usize, Stop) {
        if self.cached_recv_kind() != Some(RecvKind::Rq) {
            return (0, Stop::Other);
        }
        let ci = self.ci;
        let Some(mut hot) = Hot::<STRIDE, V1, RECV_RQ>::new(&self.registry, &mut self.cache) else {
            return (0, Stop::Other);
        };
        let ring = self.ring.view();
        let mut cur = ci;
        let mut stop = Stop::Full;
        if out.len() > ring.slots_to_end(ci) as usize {
            stop = Stop::Lap;
        }
        let class = &Hot::<STRIDE, V1, RECV_RQ>::CLASS_INLINE_IN_LAP[expected_owner(ci, ring.entries()) as usize];
        for (slot, wc) in ring.slots_along(ci, out) {
            if let Err(s) = hot.cqe_inline_in_lap(slot, class, wc) {
                stop = s;
                break;
            }
            cur = cur.wrapping_add(1);
        }
        self.ci = cur;
        (cur.wrapping_sub(ci) as usize, stop)
    }
}

/// [`Hot`]'s `RECV`: receives from the QP's RQ.
const RECV_RQ: u8 = 0;
/// [`Hot`]'s `RECV`: receives from the SRQ the QP is attached to.
const RECV_SRQ: u8 = 1;
/// [`Hot`]'s `RECV`: receives from the QP's RQ, with the raw Ethernet extras.
const RECV_RQ_ETH: u8 = 2;
/// [`Hot`]'s `RECV`: receives take the slow path.
const RECV_SLOW: u8 = 3;

/// The state of a fast run: the current QP and the attached SRQ, and the registry, so that a
/// CQE of another QP with the same receive path moves the run to that QP without leaving
/// it (the poll loop hands each CQE's ring slot in). The queue positions live in the QP
/// itself and move with each CQE, so a move is a lookup and a pointer change, with nothing
/// to write back.
struct Hot<'q, const S: usize, const V1: bool, const RECV: u8> {
    /// The current QP: its key, QPN, tables and queue positions are read through it, so
    /// that a switch changes one pointer.
    qp: &'q Qp,
    /// The attached SRQ (one of no entries that no CQE names without one): its wr_id
    /// table, number and completion count are read and moved through it, which leaves
    /// registers free in the loop.
    srq: &'q Srq,
    /// Off the per-CQE path: what a switch to another QP needs.
    reg: &'q Registry,
    /// The poller's cache entry, (key, registry slot) of the current QP, updated in place
    /// by a switch.
    cache: &'q mut (u32, u32),
}

impl<'q, const S: usize, const V1: bool, const RECV: u8> Hot<'q, S, V1, RECV> {
    const CLASS: [u8; 256] = owned_class_table(RECV != RECV_SLOW, false, S);
    /// An inline run's [`Self::CLASS_IN_LAP`]: [`RESP_INLINE`] too.
    const CLASS_INLINE_IN_LAP: [[u8; 256]; 2] = per_lap_parity(&owned_class_table(RECV != RECV_SLOW, true, S));
    /// [`Self::CLASS`] for any owner bit (the enhanced layout's test is byte 62).
    const CLASS_ANY_OWNER: [u8; 256] = {
        let mut t = [STOP; 256];
        let mut b = 0;
        while b < 256 {
            t[b] = Self::CLASS[b & !1];
            b += 1;
        }
        t
    };
    /// [`Self::CLASS`] for each lap parity, indexed by the `op_own` byte itself.
    const CLASS_IN_LAP: [[u8; 256]; 2] = per_lap_parity(&Self::CLASS);
    const MASK_WIRE: u32 = QPN_MASK.to_be();

    /// A run on the QP in cache entry `cache`; `None` if that slot holds no QP.
    #[inline(always)]
    fn new(reg: &'q Registry, cache: &'q mut (u32, u32)) -> Option<Self> {
        let qp = reg.qp_at_ref(cache.1)?;
        Some(Self { qp, srq: reg.srq_of(qp), reg, cache })
    }

    /// `qp_num` as rdma-core reports it: the CQE's own QPN. In version 0 that is the key
    /// the run already matched; in version 1 the key is the user index, and a CQE whose QPN
    /// disagrees with the QP it names still reports its own.
    #[inline(always)]
    fn qp_num(&self, sop: Be32) -> u32 {
        if V1 {
            sop.get() & QPN_MASK
        } else {
            self.qp.config().qpn
        }
    }

    /// Moves the run to the QP a CQE names by `key` (QPN or user index), as rdma-core
    /// moves `cur_rsc`: a lookup in the registry's table of low key bits (then its hash
    /// map) and a pointer change (each QP keeps its own queue positions,
    /// so nothing is written back). A QP that is not registered, or whose receives take
    /// another path (or another SRQ), is [`Stop::Miss`]: the poller then ends the run and
    /// takes it from there. For a
    /// requester CQE (`REQ`), so is an XRC SRQ or receive WQ (no send queue), which the
    /// slow path makes a fault item.
    #[inline(always)]
    fn switch<const REQ: bool>(&mut self, key: u32) -> Result<(), Stop> {
        // The path of an entry without a send queue has `NO_SQ_PATH` set, which the masked
        // path never has.
        if let Some((slot, qp)) = self.reg.qp_by_low_bits::<V1>(key) {
            return self.take::<REQ>(key, slot, qp);
        }
        match self.reg.qp_by_key_hashed::<V1>(key) {
            Some((slot, qp)) => self.take::<REQ>(key, slot, qp),
            None => Err(Stop::Miss(key)),
        }
    }

    /// The rest of [`Hot::switch`] once the QP is found (in its registry slot `slot`):
    /// the run goes on with it if its receives take the run's path.
    #[inline(always)]
    fn take<const REQ: bool>(&mut self, key: u32, slot: u32, qp: &'q Qp) -> Result<(), Stop> {
        // The path of an entry without a send queue has `NO_SQ_PATH` set, which the masked
        // path never has. A run on a QP's own RQ (without extras) takes only such QPs,
        // which the path names as a constant: a receive WQ (its path also has
        // `NO_SQ_PATH`) ends the run, and the poller starts a new one for it.
        let want = if RECV == RECV_RQ {
            PLAIN_RQ_PATH
        } else if REQ {
            self.qp.recv_path() & !NO_SQ_PATH
        } else {
            self.qp.recv_path()
        };
        if qp.recv_path() != want {
            return Err(Stop::Miss(key));
        }
        *self.cache = (key, slot);
        self.qp = qp;
        Ok(())
    }

    /// The CQE in ring slot `slot` into `wc` under the owner-bit test, in a lap whose
    /// [`Self::CLASS_IN_LAP`] table is `class`; or why it is not for the fast path (then
    /// nothing is consumed or written back for it).
    #[inline(always)]
    fn cqe_in_lap(&mut self, slot: SlotRef<'q, S>, class: &[u8; 256], wc: &mut Completion) -> Result<(), Stop> {
        let (c, own) = slot
            .owned_map_at(S - 1, |b| {
                let c = class[b as usize];
                (c != STOP).then_some((c, b))
            })
            .ok_or(Stop::Other)?;
        self.owned_cqe::<false>(c, own, slot, wc, Be32::default())
    }

    /// [`Hot::cqe_in_lap`] for one CQE, whose lap's owner bit is `owner` (`poll_single`:
    /// indexing the lap's table there measured 1 to 3 instructions worse in the batch loop,
    /// which shares the code generation unit).
    #[inline(always)]
    fn cqe_at(&mut self, slot: SlotRef<'q, S>, owner: u8, wc: &mut Completion) -> Result<(), Stop> {
        let (c, own) = slot
            .owned_map_at(S - 1, |b| {
                let c = Self::CLASS[(b ^ owner) as usize];
                (c != STOP).then_some((c, b))
            })
            .ok_or(Stop::Other)?;
        self.owned_cqe::<false>(c, own, slot, wc, Be32::default())
    }

    /// [`Hot::cqe_in_lap`] under the enhanced layout's test: byte 62 must hold the run's
    /// 8-bit lap count `lap`.
    #[inline(always)]
    fn cqe_enhanced(&mut self, slot: SlotRef<'q, S>, lap: u8, wc: &mut Completion) -> Result<(), Stop> {
        // Byte 62 first, then the acquire fence whatever it holds (it orders the rest), so
        // that one branch takes both tests; the owner bit means nothing here.
        let this_lap = slot.owned_map_at(S - 2, |vic| Some(vic == lap)).ok_or(Stop::Other)?;
        let own = slot.load_u8_at(S - 1).ok_or(Stop::Other)?;
        let c = Self::CLASS_ANY_OWNER[own as usize];
        if !this_lap || c == STOP {
            return Err(Stop::Other);
        }
        self.owned_cqe::<false>(c, own, slot, wc, Be32::default())
    }

    /// [`Hot::cqe_in_lap`], [`Hot::cqe_at`] and [`Hot::cqe_enhanced`] past the ownership
    /// test: the CQE of class `c` (not [`STOP`]) with ownership byte `own`, the acquire
    /// fence already issued.
    ///
    /// `LEAN` (the one-CQE poll inlined in `poll`): the caller found the run's QP by the
    /// CQE's key word `key` (`sop_drop_qpn`, or `srqn_uidx` in version 1), read from the
    /// ring once, so the QP is not compared or switched here. A requester CQE whose head
    /// needs more ([`req_special`]) is left to the general path as [`Stop::Other`], so that
    /// this code calls nothing. What it did to the CQE's send queue by then (retiring
    /// through the WQE) the general path does again, to the same effect.
    #[inline(always)]
    fn owned_cqe<const LEAN: bool>(
        &mut self,
        c: u8,
        own: u8,
        slot: SlotRef<'q, S>,
        wc: &mut Completion,
        key: Be32,
    ) -> Result<(), Stop> {
        let cqe = RingCqe { slot, op_own: own };
        let sop = if LEAN && !V1 { key } else { cqe.be32(offset_of!(Cqe64, sop_drop_qpn)) };
        if c == REQ {
            let key_word = if V1 { cqe.be32(offset_of!(Cqe64, srqn_uidx)) } else { sop };
            if !LEAN && key_word.raw() & Self::MASK_WIRE != self.qp.key_wire(V1) {
                self.switch::<true>(key_word.get() & QPN_MASK)?;
            }
            let idx = cqe.be16(offset_of!(Cqe64, wqe_counter)).get() as usize & self.qp.sq.table().mask();
            let e = self.qp.sq.table().at(idx);
            // One CQE retires every older WQE (rdma-core `mlx5_parse_cqe`).
            self.qp.sq.retire(e);
            // Only the fields rdma-core's `handle_good_req` defines (see `Completion`).
            wc.wr_id = e.wr_id;
            wc.qp_num = self.qp_num(sop);
            wc.wqe_index = idx as u16;
            let wqe_opcode = sop.raw().to_ne_bytes()[0];
            if req_head(wc, wqe_opcode, e.wr_data) {
                if LEAN {
                    return Err(Stop::Other);
                }
                req_special(wc, wqe_opcode, e.wr_data, cqe.be32(offset_of!(Cqe64, byte_cnt)).get());
            }
        } else {
            let srqn_uidx = if LEAN && V1 { key } else { cqe.be32(offset_of!(Cqe64, srqn_uidx)) };
            let (wr_id, idx, qp_num) = if RECV == RECV_SRQ {
                if V1 {
                    // Under the mask: an XRC SRQ's key has bits beyond it (`KEY_NO_SQ`).
                    if !LEAN && (srqn_uidx.raw() ^ self.qp.key_wire(V1)) & Self::MASK_WIRE != 0 {
                        self.switch::<false>(srqn_uidx.get() & QPN_MASK)?;
                    }
                } else if srqn_uidx.raw() & Self::MASK_WIRE != self.srq.srqn_wire() {
                    // Version 0 names the SRQ itself (`srqn_uidx`); any QP attached to the
                    // cached QP's SRQ is fine here, another SRQ is the slow path's.
                    return Err(Stop::Other);
                }
                // SRQ wr_ids are indexed by the unmasked counter (rdma-core
                // `handle_responder`); a counter beyond the SRQ becomes a fault item on the
                // slow path.
                let ctr = cqe.be16(offset_of!(Cqe64, wqe_counter)).get();
                let &wr_id = self.srq.wrids().get(ctr as usize).ok_or(Stop::Other)?;
                self.srq.add_completed(1);
                // The CQE's own QPN: in version 0 it may be any QP on the SRQ.
                (wr_id, ctr as usize, sop.get() & QPN_MASK)
            } else {
                if V1 {
                    // Under the mask: a receive WQ's key has bits beyond it (`KEY_NO_SQ`).
                    if !LEAN && (srqn_uidx.raw() ^ self.qp.key_wire(V1)) & Self::MASK_WIRE != 0 {
                        self.switch::<false>(srqn_uidx.get() & QPN_MASK)?;
                    }
                } else if srqn_uidx.raw() & Self::MASK_WIRE != 0 {
                    // Version 0 names an SRQ here (`srqn_uidx` non-zero): the slow path's
                    // business.
                    return Err(Stop::Other);
                } else if !LEAN && sop.raw() & Self::MASK_WIRE != self.qp.key_wire(V1) {
                    self.switch::<false>(sop.get() & QPN_MASK)?;
                }
                // The RQ WQE the CQE's counter names (rdma-core v55+, `handle_responder`);
                // the tail only counts.
                let idx = cqe.be16(offset_of!(Cqe64, wqe_counter)).get() as usize & self.qp.rq.wrids().mask();
                self.qp.rq.set_tail(self.qp.rq.tail().wrapping_add(1));
                (*self.qp.rq.wrids().at(idx), idx, self.qp_num(sop))
            };
            let imm = cqe.be32(offset_of!(Cqe64, imm_inval_pkey));
            let fr = cqe.be32(offset_of!(Cqe64, flags_rqpn)).get();
            resp_head(wc, own, fr, imm);
            wc.wr_id = wr_id;
            wc.byte_len = cqe.be32(offset_of!(Cqe64, byte_cnt)).get();
            wc.qp_num = qp_num;
            wc.wqe_index = idx as u16;
            // rdma-core fills pkey_index from the low 16 bits even when the word holds
            // immediate data or an rkey (`handle_responder`).
            wc.pkey_index = imm.get() as u16;
            wc.src_qp = fr & QPN_MASK;
            wc.slid = cqe.be16(offset_of!(Cqe64, slid)).get();
            wc.dlid_path_bits = cqe.byte(offset_of!(Cqe64, ml_path)) & 0x7f;
            if RECV == RECV_RQ_ETH {
                // IP_CSUM_OK for IPv4 with L3 and L4 OK (rdma-core `get_csum_ok`).
                let ok = eth_extras(
                    cqe.byte(offset_of!(Cqe64, hds_ip_ext)),
                    cqe.byte(offset_of!(Cqe64, l4_hdr_type_etc)),
                    cqe.be16(offset_of!(Cqe64, check_sum)).get(),
                    cqe.be32(offset_of!(Cqe64, rss_hash_result)).get(),
                    wc,
                );
                wc.wc_flags |= ok;
            }
        }
        wc.timestamp = cqe.be64(offset_of!(Cqe64, timestamp)).get();
        Ok(())
    }
}

impl<'q, const S: usize, const V1: bool, const RECV: u8> Hot<'q, S, V1, RECV> {
    /// [`Hot::cqe_in_lap`] in an inline run, whose lap table `class` holds
    /// [`RESP_INLINE`].
    #[inline(always)]
    fn cqe_inline_in_lap(&mut self, slot: SlotRef<'q, S>, class: &[u8; 256], wc: &mut Completion) -> Result<(), Stop> {
        let (c, own) = slot
            .owned_map_at(S - 1, |b| {
                let c = class[b as usize];
                (c != STOP).then_some((c, b))
            })
            .ok_or(Stop::Other)?;
        if c == RESP_INLINE {
            self.resp_inline(own, slot, wc)
        } else {
            self.owned_cqe::<false>(c, own, slot, wc, Be32::default())
        }
    }

    /// The [`RESP_INLINE`] class: a receive on the current QP's RQ whose data came inside
    /// the CQE. The data is copied first (while the receive is still outstanding, as the
    /// slow path asks), then the CQE is translated as a [`RESP`] one. A CQE of another QP
    /// is [`Stop::Miss`] (the poller moves to that QP and tries again); one that names an
    /// SRQ in version 0, or whose copy does not go the common way, is [`Stop::Other`]: the
    /// slow path takes it.
    #[inline(always)]
    fn resp_inline(&mut self, own: u8, slot: SlotRef<'q, S>, wc: &mut Completion) -> Result<(), Stop> {
        let cqe = RingCqe { slot, op_own: own };
        let srqn_uidx = cqe.be32(offset_of!(Cqe64, srqn_uidx));
        if !V1 && srqn_uidx.raw() & Self::MASK_WIRE != 0 {
            return Err(Stop::Other);
        }
        // The QP's key, compared as the RESP class compares it.
        let key = if V1 { srqn_uidx } else { cqe.be32(offset_of!(Cqe64, sop_drop_qpn)) };
        if (key.raw() ^ self.qp.key_wire(V1)) & Self::MASK_WIRE != 0 {
            return Err(Stop::Miss(key.get() & QPN_MASK));
        }
        let idx = cqe.be16(offset_of!(Cqe64, wqe_counter)).get() as usize & self.qp.rq.wrids().mask();
        let tail = self.qp.rq.tail();
        if !scatter_inline(self.reg, self.qp, self.cache.1, tail, cqe, idx) {
            return Err(Stop::Other);
        }
        self.owned_cqe::<false>(RESP, own, slot, wc, Be32::default())
    }
}

/// Copies the inline data of receive CQE `cqe` of QP `qp` (registry slot `slot`, its RQ's
/// tail `tail`) into RQ WQE `idx`, as the slow path's `parse_inline` does, when the copy
/// goes the common way; otherwise false, before the receive is counted, and the slow path
/// takes the CQE whole, copy included (it writes the same bytes again where this copy
/// wrote some).
///
/// The same checks as the slow path's, in its order: no more data than the format has room
/// for (else a fault item there), a receive outstanding on the RQ and registered WQEs (else
/// the data stays in the CQE, counted there), then the copy itself, which reads the WQE's
/// data segments as untrusted bytes and writes only inside registered memory regions: the
/// common case ([`crate::scatter::RecvWqes::scatter_whole`]), else the routine both paths
/// share; a copy that fails (a length or protection error) is redone there for its status.
#[inline(always)]
fn scatter_inline<const S: usize>(
    reg: &Registry,
    qp: &Qp,
    slot: u32,
    tail: u32,
    cqe: RingCqe<'_, S>,
    idx: usize,
) -> bool {
    let len = cqe.be32(offset_of!(Cqe64, byte_cnt)).get() as usize;
    // `(1..=wqe_cnt).contains(&outstanding)`, as `Registry::wqe_posted` asks.
    let posted = qp.rq.head().wrapping_sub(tail).wrapping_sub(1) < qp.rq.wqe_cnt();
    let wqes = reg.recv_wqes_at(slot);
    // Format 1: up to 32 bytes at the start of the cqe64; format 2: up to 64 in the first
    // half of a 128-byte CQE (the class table admits it only there).
    let mut data = [0u8; 64];
    let ok = if op_own::format(cqe.op_own) == cqe_format::INLINE_SCATTER_64 {
        len <= 64 && load_words::<S, 8>(&cqe, 0, &mut data)
    } else {
        len <= 32 && load_words::<S, 4>(&cqe, S - 64, &mut data)
    };
    let (Some(w), Some(data), true) = (wqes, data.get(..len), ok && posted) else {
        return false;
    };
    let to = reg.scatter_to(true);
    w.scatter_whole(idx as u32, data, to) || w.scatter(false, idx as u32, data, to).is_ok()
}

/// Copies the `N` 8-byte words from slot offset `off` of `cqe`'s slot into `out`, in
/// memory order; false if they are not in the slot.
#[inline(always)]
fn load_words<const S: usize, const N: usize>(cqe: &RingCqe<'_, S>, off: usize, out: &mut [u8; 64]) -> bool {
    let mut ok = true;
    for (i, chunk) in out.chunks_exact_mut(8).take(N).enumerate() {
        let w = cqe.slot.load_word_at(off + 8 * i);
        ok &= w.is_some();
        chunk.copy_from_slice(&w.unwrap_or(0).to_ne_bytes());
    }
    ok
}
