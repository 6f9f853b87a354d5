//! Translating one mlx5 CQE into a [`Completion`], exactly as rdma-core's `mlx5_parse_cqe`
//! would fill `struct ibv_wc` (`providers/mlx5/cq.c`: `handle_good_req`, `handle_responder`,
//! `mlx5_handle_error_cqe`), quirks included.
//!
//! The parser is generic over `Resources`, so the same code consumes (advancing the
//! wr_id tables, like a poll) or peeks (leaving them untouched).

use crate::fast;
use crate::fields::CqeFields;
use crate::registry::{InlineDest, Registry, Srq};
use crate::sig::SigError;
use crate::status::syndrome_status;
use dvcq_provider::{Completion, CqeFault, FaultKind, WcFlags, WcOpcode, WcStatus};
use dvcq_uapi::mlx5::cqe::{hds_ip_ext, l3_hdr_type, Cqe64, QPN_MASK};
use dvcq_uapi::mlx5::err_cqe::{ErrCqe, SigErrCqe};
use dvcq_uapi::mlx5::opcode::{cqe_format, cqe_opcode, syndrome, wqe_opcode};

/// How CQEs name their resource (`mctx->cqe_version`: rdma-core `cq.c` looks up the QP by
/// QPN in version 0, by user index in version 1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CqeVersion {
    /// Version 0: QP by `sop_drop_qpn`, SRQ by `srqn_uidx`.
    #[default]
    V0,
    /// Version 1: QP (or XRC SRQ) by the user index in `srqn_uidx`.
    V1,
}

/// What parsing one CQE produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Parsed {
    /// A completion (or fault item) was written.
    Wc,
    /// The CQE is consumed without a completion (a SIG_ERR of a registered mkey), as
    /// rdma-core does.
    Swallowed,
    /// A RESIZE CQE: the device moved to a new ring.
    Resize,
}

/// Access to the wr_id tables: consuming (poll) or read-only (peek).
pub(crate) trait Resources {
    /// QP slot for a QPN (version 0) or user index (version 1).
    fn qp(&mut self, key: u32, v1: bool) -> Option<u32>;
    /// SRQ slot for an SRQ number.
    fn srq(&mut self, srqn: u32) -> Option<u32>;
    /// The SRQ number of an SRQ slot.
    fn srqn_of(&self, slot: u32) -> u32;
    /// The SRQ slot a QP receives from, and whether it has the RX checksum capability.
    fn qp_attrs(&self, slot: u32) -> (Option<u32>, bool);
    /// Whether the entry in `slot` has a send queue: a QP, not an XRC SRQ or a receive WQ.
    fn has_sq(&self, slot: u32) -> bool;
    /// The slot of the QP a requester CQE names by `key`: `None` for a key nobody
    /// registered, and for the user index of an XRC SRQ or receive WQ, which has no send
    /// queue (see [`crate::ResourceKind`]).
    #[inline(always)]
    fn sq_qp(&mut self, key: u32, v1: bool) -> Option<u32> {
        self.qp(key, v1).filter(|&s| self.has_sq(s))
    }
    /// Requester: (masked index, wr_id, wr_data) and retire up to the WQE.
    fn sq_complete(&mut self, slot: u32, wqe_counter: u16) -> (u32, u64, u8);
    /// Non-SRQ receive: (masked index, wr_id) of the RQ WQE at `wqe_counter`.
    fn rq_complete(&mut self, slot: u32, wqe_counter: u16) -> (u32, u64);
    /// A receive on QP `slot` in one registry access: `Ok((index, wr_id, rx_csum))` from
    /// the RQ at `wqe_counter`, or `Err(srq_slot)` when the QP receives from an SRQ.
    #[inline(always)]
    fn recv_on_qp(&mut self, slot: u32, wqe_counter: u16) -> Result<(u32, u64, bool), u32> {
        match self.qp_attrs(slot) {
            (Some(srq), _) => Err(srq),
            (None, csum) => {
                let (i, w) = self.rq_complete(slot, wqe_counter);
                Ok((i, w, csum))
            }
        }
    }
    /// SRQ receive: wr_id at the unmasked index, `None` if beyond the SRQ.
    fn srq_complete(&mut self, slot: u32, wqe_counter: u16) -> Option<u64>;
    /// The SRQ in `slot` got WQE `wqe_counter` back without a completion (an ODP page
    /// fault); only consuming resources note it.
    fn srq_returned(&mut self, _slot: u32, _wqe_counter: u16) {}
    /// Copies a receive's inline data into receive WQE `idx` of the QP in `slot` (its RQ)
    /// or, with `srq`, of the SRQ in `slot` (a peek only finds out what the copy gives):
    /// `Ok(false)` without registered WQEs, `Err(status)` when rdma-core's copy fails.
    fn scatter_recv(&mut self, slot: u32, srq: bool, idx: u32, data: &[u8]) -> Result<bool, WcStatus>;
    /// Copies a READ or atomic response into the send WQE at `wqe_counter` of the QP in
    /// `slot`, as [`Resources::scatter_recv`].
    fn scatter_send(&mut self, slot: u32, wqe_counter: u16, data: &[u8]) -> Result<bool, WcStatus>;
    /// Whether the work queue `dest` holds a work request posted and not yet completed: a
    /// receive outstanding on the RQ or SRQ, or the send WQE at `wqe_counter`. Asked before
    /// translating a CQE with inline data, whose copy writes only into posted WQEs' buffers.
    fn wqe_posted(&self, dest: InlineDest, wqe_counter: u16) -> bool;
    /// A signature error: recorded on its mkey when that is registered (consuming view
    /// only), true then; false for an mkey nobody registered.
    fn sig_err(&mut self, e: &SigError) -> bool;
    /// Counts a fault item (consuming view only).
    fn note_fault(&mut self) {}
    /// Counts a completion whose inline data stays in the CQE (consuming view only).
    fn note_not_copied(&mut self) {}
}

/// The consuming view: the registry plus the poller's one-entry lookup cache (rdma-core's
/// `cur_rsc`), so steady traffic on one QP never reaches the hash map. A local value during
/// a poll, so the cache lives in registers; the poller stores it back afterwards.
pub(crate) struct Consume<'a> {
    pub reg: &'a mut Registry,
    pub cache_key: u32,
    pub cache_slot: u32,
    /// Touched only on cold paths.
    pub stats: &'a mut crate::cq::CqStats,
}

impl<'a> Consume<'a> {
    /// The consuming view over a poller's registry, its lookup cache and its counters.
    #[inline(always)]
    pub(crate) fn new(reg: &'a mut Registry, cache: (u32, u32), stats: &'a mut crate::cq::CqStats) -> Self {
        Self { reg, cache_key: cache.0, cache_slot: cache.1, stats }
    }

    /// The lookup cache to keep for the next poll.
    #[inline(always)]
    pub(crate) fn cache(&self) -> (u32, u32) {
        (self.cache_key, self.cache_slot)
    }
}

impl Resources for Consume<'_> {
    #[inline(always)]
    fn qp(&mut self, key: u32, v1: bool) -> Option<u32> {
        if self.cache_key == key {
            return Some(self.cache_slot);
        }
        let slot = if v1 { self.reg.slot_by_uidx(key) } else { self.reg.slot_by_qpn(key) }?;
        self.cache_key = key;
        self.cache_slot = slot;
        Some(slot)
    }
    #[inline]
    fn srq(&mut self, srqn: u32) -> Option<u32> {
        self.reg.srq_slot_by_srqn(srqn)
    }
    fn srqn_of(&self, slot: u32) -> u32 {
        self.reg.srq_at_ref(slot).map_or(0, Srq::srqn)
    }
    #[inline(always)]
    fn qp_attrs(&self, slot: u32) -> (Option<u32>, bool) {
        self.reg.qp_at_ref(slot).map_or((None, false), |q| (q.srq_slot(), q.config().rx_csum))
    }
    #[inline(always)]
    fn has_sq(&self, slot: u32) -> bool {
        self.reg.qp_at_ref(slot).is_some_and(crate::registry::Qp::has_sq)
    }
    #[inline(always)]
    fn sq_complete(&mut self, slot: u32, wqe_counter: u16) -> (u32, u64, u8) {
        match self.reg.qp_at(slot) {
            Some(q) => q.sq.complete(wqe_counter),
            None => (0, 0, 0xff),
        }
    }
    #[inline(always)]
    fn rq_complete(&mut self, slot: u32, wqe_counter: u16) -> (u32, u64) {
        match self.reg.qp_at(slot) {
            Some(q) => q.rq.complete(wqe_counter),
            None => (0, 0),
        }
    }
    #[inline(always)]
    fn recv_on_qp(&mut self, slot: u32, wqe_counter: u16) -> Result<(u32, u64, bool), u32> {
        match self.reg.qp_at(slot) {
            Some(q) => match q.srq_slot() {
                Some(srq) => Err(srq),
                None => {
                    let csum = q.config().rx_csum;
                    let (i, w) = q.rq.complete(wqe_counter);
                    Ok((i, w, csum))
                }
            },
            None => Ok((0, 0, false)),
        }
    }
    #[inline]
    fn srq_complete(&mut self, slot: u32, wqe_counter: u16) -> Option<u64> {
        self.reg.srq_at(slot)?.complete(wqe_counter)
    }
    fn srq_returned(&mut self, slot: u32, wqe_counter: u16) {
        if let Some(s) = self.reg.srq_at(slot) {
            s.note_returned(wqe_counter);
        }
    }
    fn scatter_recv(&mut self, slot: u32, srq: bool, idx: u32, data: &[u8]) -> Result<bool, WcStatus> {
        self.reg.scatter_recv(slot, srq, idx, data, true)
    }
    fn scatter_send(&mut self, slot: u32, wqe_counter: u16, data: &[u8]) -> Result<bool, WcStatus> {
        self.reg.scatter_send(slot, wqe_counter, data, true)
    }
    fn wqe_posted(&self, dest: InlineDest, wqe_counter: u16) -> bool {
        self.reg.wqe_posted(dest, wqe_counter)
    }
    fn sig_err(&mut self, e: &SigError) -> bool {
        self.reg.record_sig_err(e)
    }
    fn note_fault(&mut self) {
        self.stats.faults += 1;
    }
    fn note_not_copied(&mut self) {
        self.stats.inline_not_copied += 1;
    }
}

/// The read-only view used by peek.
pub(crate) struct Peek<'a>(pub &'a Registry);

impl Resources for Peek<'_> {
    fn qp(&mut self, key: u32, v1: bool) -> Option<u32> {
        if v1 {
            self.0.slot_by_uidx(key)
        } else {
            self.0.slot_by_qpn(key)
        }
    }
    fn srq(&mut self, srqn: u32) -> Option<u32> {
        self.0.srq_slot_by_srqn(srqn)
    }
    fn srqn_of(&self, slot: u32) -> u32 {
        self.0.srq_at_ref(slot).map_or(0, Srq::srqn)
    }
    fn qp_attrs(&self, slot: u32) -> (Option<u32>, bool) {
        self.0.qp_at_ref(slot).map_or((None, false), |q| (q.srq_slot(), q.config().rx_csum))
    }
    fn has_sq(&self, slot: u32) -> bool {
        self.0.qp_at_ref(slot).is_some_and(crate::registry::Qp::has_sq)
    }
    fn sq_complete(&mut self, slot: u32, wqe_counter: u16) -> (u32, u64, u8) {
        self.0.qp_at_ref(slot).map_or((0, 0, 0xff), |q| q.sq.peek(wqe_counter))
    }
    fn rq_complete(&mut self, slot: u32, wqe_counter: u16) -> (u32, u64) {
        self.0.qp_at_ref(slot).map_or((0, 0), |q| q.rq.peek(wqe_counter))
    }
    fn srq_complete(&mut self, slot: u32, wqe_counter: u16) -> Option<u64> {
        self.0.srq_at_ref(slot)?.peek(wqe_counter)
    }
    fn scatter_recv(&mut self, slot: u32, srq: bool, idx: u32, data: &[u8]) -> Result<bool, WcStatus> {
        self.0.scatter_recv(slot, srq, idx, data, false)
    }
    fn scatter_send(&mut self, slot: u32, wqe_counter: u16, data: &[u8]) -> Result<bool, WcStatus> {
        self.0.scatter_send(slot, wqe_counter, data, false)
    }
    fn wqe_posted(&self, dest: InlineDest, wqe_counter: u16) -> bool {
        self.0.wqe_posted(dest, wqe_counter)
    }
    fn sig_err(&mut self, e: &SigError) -> bool {
        self.0.has_sig_mkey(e.mkey_index())
    }
}

/// Writes a fault item for the CQE at ring position `pos`.
#[cold]
#[inline(never)]
pub(crate) fn fault<R: Resources>(res: &mut R, out: &mut Completion, kind: FaultKind, pos: u32, value: u32) -> Parsed {
    res.note_fault();
    *out = Completion::from_fault(CqeFault { kind, position: pos, value });
    Parsed::Wc
}

/// The resource key of a CQE: user index (version 1) or QPN (version 0).
#[inline(always)]
fn key<C: CqeFields>(cqe: &C, v1: bool) -> u32 {
    if v1 {
        cqe.srqn_uidx()
    } else {
        cqe.qpn()
    }
}

/// How a requester completion gets its `byte_len` (rdma-core `handle_good_req`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReqLen {
    /// Left undefined (SEND, WRITE, ...).
    Unset,
    /// The CQE's byte count (RDMA READ).
    ByteCnt,
    /// 8 (atomics).
    Eight,
}

/// Requester translation of one WQE opcode.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReqMap {
    pub(crate) opcode: WcOpcode,
    pub(crate) flags: WcFlags,
    pub(crate) len: ReqLen,
    /// The opcode comes from what the poster recorded (`wr_data`): UMR, SET_PSV, NOP, MMO.
    pub(crate) from_wr_data: bool,
}

/// rdma-core `handle_good_req` as a table indexed by the WQE opcode the device echoes in
/// `sop_drop_qpn >> 24`: one load instead of a branch tree. WQE opcodes rdma-core
/// does not list leave `opcode` unset; a zeroed ibv_wc shows 0 (IBV_WC_SEND), as here.
pub(crate) const REQ_MAP: [ReqMap; 256] = {
    let unset = ReqMap { opcode: WcOpcode::Send, flags: WcFlags::empty(), len: ReqLen::Unset, from_wr_data: false };
    let mut t = [unset; 256];
    t[wqe_opcode::RDMA_WRITE_IMM as usize] = ReqMap { opcode: WcOpcode::RdmaWrite, flags: WcFlags::WITH_IMM, ..unset };
    t[wqe_opcode::RDMA_WRITE as usize] = ReqMap { opcode: WcOpcode::RdmaWrite, ..unset };
    t[wqe_opcode::SEND_IMM as usize] = ReqMap { flags: WcFlags::WITH_IMM, ..unset };
    t[wqe_opcode::RDMA_READ as usize] = ReqMap { opcode: WcOpcode::RdmaRead, len: ReqLen::ByteCnt, ..unset };
    t[wqe_opcode::ATOMIC_CS as usize] = ReqMap { opcode: WcOpcode::CompSwap, len: ReqLen::Eight, ..unset };
    t[wqe_opcode::ATOMIC_FA as usize] = ReqMap { opcode: WcOpcode::FetchAdd, len: ReqLen::Eight, ..unset };
    t[wqe_opcode::TSO as usize] = ReqMap { opcode: WcOpcode::Tso, ..unset };
    t[wqe_opcode::UMR as usize] = ReqMap { from_wr_data: true, ..unset };
    t[wqe_opcode::SET_PSV as usize] = ReqMap { from_wr_data: true, ..unset };
    t[wqe_opcode::NOP as usize] = ReqMap { from_wr_data: true, ..unset };
    t[wqe_opcode::MMO as usize] = ReqMap { from_wr_data: true, ..unset };
    t
};

/// The requester opcode for the rare cases: `wr_data` opcodes and rdma-core's DRIVER2
/// override (a raw WQE recorded as IBV_WC_DRIVER2 wins over whatever the CQE said).
#[cold]
pub(crate) fn req_opcode_from_wr_data(m: ReqMap, wr_data: u8) -> WcOpcode {
    if wr_data == WcOpcode::Driver2 as u8 {
        WcOpcode::Driver2
    } else if m.from_wr_data {
        WcOpcode::from_u32(wr_data as u32).unwrap_or_default()
    } else {
        m.opcode
    }
}

/// Parses a successful requester CQE (opcode 0).
#[inline(always)]
pub(crate) fn parse_req<R: Resources, C: CqeFields>(
    res: &mut R,
    cqe: &C,
    v1: bool,
    pos: u32,
    out: &mut Completion,
) -> Parsed {
    let Some(slot) = res.sq_qp(key(cqe, v1), v1) else {
        return fault(res, out, FaultKind::UnknownQp, pos, key(cqe, v1));
    };
    let sop = cqe.sop_drop_qpn();
    let (idx, wr_id, wr_data) = res.sq_complete(slot, cqe.wqe_counter());
    // Only the fields rdma-core's `handle_good_req` defines are written (see `Completion`),
    // with the head tables the fast path uses (fast.rs).
    out.wr_id = wr_id;
    out.qp_num = sop & QPN_MASK;
    out.wqe_index = idx as u16;
    let wqe_opcode = (sop >> 24) as u8;
    if fast::req_head(out, wqe_opcode, wr_data) {
        fast::req_special(out, wqe_opcode, wr_data, cqe.byte_cnt());
    }
    out.timestamp = cqe.timestamp();
    Parsed::Wc
}

/// An SRQ receive: wr_id by the unmasked counter (rdma-core `handle_responder` indexes
/// `srq->wrid` with `wqe_counter` as it is); `Err(counter)` when the
/// counter is beyond the SRQ.
#[inline]
fn srq_recv<R: Resources>(res: &mut R, srq: u32, wqe_counter: u16) -> Result<(u32, u64, bool), u32> {
    match res.srq_complete(srq, wqe_counter) {
        Some(w) => Ok((wqe_counter as u32, w, false)),
        None => Err(wqe_counter as u32),
    }
}

/// Where a responder completion's `imm_data` comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RespImm {
    Unset,
    Raw,
    Swapped,
}

/// Responder translation of one CQE opcode.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RespMap {
    pub(crate) opcode: WcOpcode,
    pub(crate) flags: WcFlags,
    pub(crate) imm: RespImm,
}

/// rdma-core `handle_responder`'s opcode switch as a table indexed by the CQE opcode (only
/// entries 1-4 are reached).
pub(crate) const RESP_MAP: [RespMap; 16] = {
    let recv = RespMap { opcode: WcOpcode::Recv, flags: WcFlags::empty(), imm: RespImm::Unset };
    let mut t = [recv; 16];
    t[cqe_opcode::RESP_WR_IMM as usize] =
        RespMap { opcode: WcOpcode::RecvRdmaWithImm, flags: WcFlags::WITH_IMM, imm: RespImm::Raw };
    t[cqe_opcode::RESP_SEND_IMM as usize] =
        RespMap { opcode: WcOpcode::Recv, flags: WcFlags::WITH_IMM, imm: RespImm::Raw };
    t[cqe_opcode::RESP_SEND_INV as usize] =
        RespMap { opcode: WcOpcode::Recv, flags: WcFlags::WITH_INV, imm: RespImm::Swapped };
    t
};

/// Where a responder CQE's wr_id comes from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum RecvTarget {
    Rq(u32),
    Srq(u32),
}

/// Resolves a responder CQE's receive queue (rdma-core `cq.c` `get_cur_rsc`): version 0 looks
/// up the SRQ when `srqn_uidx` is non-zero, else the QP by QPN; version 1 looks up the QP by
/// user index and takes the SRQ it is attached to. Returns the target and the QP's
/// RX-checksum capability.
#[inline(always)]
pub(crate) fn recv_target<R: Resources, C: CqeFields>(
    res: &mut R,
    cqe: &C,
    v1: bool,
) -> Result<(RecvTarget, bool), (FaultKind, u32)> {
    if !v1 {
        let srqn = cqe.srqn_uidx();
        if srqn != 0 {
            return match res.srq(srqn) {
                Some(s) => Ok((RecvTarget::Srq(s), false)),
                None => Err((FaultKind::UnknownSrq, srqn)),
            };
        }
    }
    let k = key(cqe, v1);
    let slot = res.qp(k, v1).ok_or((FaultKind::UnknownQp, k))?;
    match res.qp_attrs(slot) {
        (Some(srq), _) => Ok((RecvTarget::Srq(srq), false)),
        (None, csum) => Ok((RecvTarget::Rq(slot), csum)),
    }
}

/// Raw-packet QPs with the RX checksum capability: fills the Ethernet extras (checksum,
/// header flags and types, RSS hash) and returns `IBV_WC_IP_CSUM_OK` when L3 and L4 are OK
/// and the packet is IPv4 (rdma-core `get_csum_ok`). Transport QPs never ask.
#[inline(always)]
pub(crate) fn eth_extras(hds: u8, l4_hdr_type_etc: u8, check_sum: u16, rss_hash: u32, out: &mut Completion) -> WcFlags {
    out.hdr_ok = hds;
    out.hdr_type = l4_hdr_type_etc;
    out.checksum = check_sum;
    out.flow_tag_hash = rss_hash;
    let ok = hds_ip_ext::L3_OK | hds_ip_ext::L4_OK;
    if hds & ok == ok && l3_hdr_type::of(l4_hdr_type_etc) == l3_hdr_type::IPV4 {
        WcFlags::IP_CSUM_OK
    } else {
        WcFlags::empty()
    }
}

/// Parses a successful responder CQE (opcodes 1-4), rdma-core `handle_responder`.
#[inline(always)]
pub(crate) fn parse_resp<R: Resources, C: CqeFields>(
    res: &mut R,
    cqe: &C,
    v1: bool,
    pos: u32,
    out: &mut Completion,
) -> Parsed {
    // The receive queue: in version 0 a non-zero srqn names an SRQ; otherwise
    // the QP (by QPN or user index) tells whether it has an RQ or an SRQ.
    let srq = if !v1 && cqe.srqn_uidx() != 0 {
        let srqn = cqe.srqn_uidx();
        match res.srq(srqn) {
            Some(s) => Some(s),
            None => return fault(res, out, FaultKind::UnknownSrq, pos, srqn),
        }
    } else {
        None
    };
    let (idx, wr_id, rx_csum) = match srq {
        Some(s) => match srq_recv(res, s, cqe.wqe_counter()) {
            Ok(v) => v,
            Err(ctr) => return fault(res, out, FaultKind::BadField, pos, ctr),
        },
        None => {
            let k = key(cqe, v1);
            let Some(slot) = res.qp(k, v1) else {
                return fault(res, out, FaultKind::UnknownQp, pos, k);
            };
            match res.recv_on_qp(slot, cqe.wqe_counter()) {
                Ok(v) => v,
                Err(s) => match srq_recv(res, s, cqe.wqe_counter()) {
                    Ok(v) => v,
                    Err(ctr) => return fault(res, out, FaultKind::BadField, pos, ctr),
                },
            }
        }
    };
    let imm_word = cqe.imm_inval_pkey();
    let flags_rqpn = cqe.flags_rqpn();
    out.wr_id = wr_id;
    out.byte_len = cqe.byte_cnt();
    out.qp_num = cqe.qpn();
    // The head tables the fast path uses (fast.rs): GRH, sl, imm_data.
    fast::resp_head(out, cqe.op_own(), flags_rqpn, imm_word);
    // IP_CSUM_OK only for QPs with the RX checksum capability, and only for IPv4 with both
    // L3 and L4 OK (rdma-core `get_csum_ok`).
    if rx_csum {
        let ok = eth_extras(cqe.hds_ip_ext(), cqe.l4_hdr_type_etc(), cqe.check_sum(), cqe.rss_hash_result(), out);
        out.wc_flags |= ok;
    }
    out.wqe_index = idx as u16;
    // rdma-core fills pkey_index from the low 16 bits even when the word holds immediate
    // data or an rkey (`handle_responder`).
    out.pkey_index = imm_word.get() as u16;
    out.src_qp = flags_rqpn & QPN_MASK;
    out.slid = cqe.slid();
    out.dlid_path_bits = cqe.ml_path() & 0x7f;
    out.timestamp = cqe.timestamp();
    Parsed::Wc
}

/// Parses an error CQE (opcodes 13, 14), rdma-core's error branch of `mlx5_parse_cqe`:
/// status from the syndrome, `vendor_err`, wr_id as for success; opcode and byte_len stay
/// unset (zero). An ODP page fault on an SRQ receive is a [`FaultKind::SrqPageFault`] item:
/// rdma-core swallows it and re-posts the WQE itself, which only the application can do
/// here.
#[cold]
#[inline(never)]
pub(crate) fn parse_err<R: Resources>(res: &mut R, cqe: &Cqe64, v1: bool, pos: u32, out: &mut Completion) -> Parsed {
    let e = ErrCqe::from_cqe(cqe);
    let wqe_counter = e.wqe_counter.get();
    let (idx, wr_id) = if cqe.opcode() == cqe_opcode::REQ_ERR {
        let k = key(cqe, v1);
        let Some(slot) = res.sq_qp(k, v1) else {
            return fault(res, out, FaultKind::UnknownQp, pos, k);
        };
        let (idx, wr_id, _) = res.sq_complete(slot, wqe_counter);
        (idx, wr_id)
    } else {
        match recv_target(res, cqe, v1) {
            Err((kind, v)) => return fault(res, out, kind, pos, v),
            Ok((RecvTarget::Srq(slot), _)) => {
                if e.syndrome == syndrome::REMOTE_ABORTED_ERR && e.vendor_err_synd == syndrome::VENDOR_ODP_PFAULT {
                    // rdma-core (`mlx5_complete_odp_fault`) posts the WQE again at the SRQ's
                    // head and returns nothing; the application posts to its SRQ here, so it
                    // learns which receive to post again.
                    let srqn = res.srqn_of(slot);
                    res.srq_returned(slot, wqe_counter);
                    let p = fault(res, out, FaultKind::SrqPageFault, pos, srqn);
                    out.wqe_index = wqe_counter;
                    return p;
                }
                match res.srq_complete(slot, wqe_counter) {
                    Some(w) => (wqe_counter as u32, w),
                    None => return fault(res, out, FaultKind::BadField, pos, wqe_counter as u32),
                }
            }
            Ok((RecvTarget::Rq(slot), _)) => res.rq_complete(slot, wqe_counter),
        }
    };
    // rdma-core's error branch: status, vendor_err, wr_id, qp_num and wc_flags = 0; opcode
    // and byte_len are left undefined.
    out.wr_id = wr_id;
    out.qp_num = e.qpn();
    out.wc_flags = WcFlags::empty();
    out.status = syndrome_status(e.syndrome);
    out.vendor_err = e.vendor_err_synd as u32;
    out.fault_kind = FaultKind::None;
    out.wqe_index = idx as u16;
    Parsed::Wc
}

/// A successful CQE whose data came inside it (format 1 or 2, inline scatter): translated
/// as any other, then the data copied where its WQE says, as rdma-core's poll copies it,
/// with the status rdma-core gives a copy that fails (`mlx5_copy_to_recv_wqe`,
/// `mlx5_copy_to_recv_srq`, `mlx5_copy_to_send_wqe`). More data than the format has room
/// for is garbage: a fault item, consuming nothing.
#[cold]
#[inline(never)]
fn parse_inline<R: Resources>(
    res: &mut R,
    cqe: &Cqe64,
    first_half: Option<[u8; 64]>,
    v1: bool,
    pos: u32,
    out: &mut Completion,
) -> Parsed {
    let format = cqe.format();
    let requester = cqe.opcode() == cqe_opcode::REQ;
    // What rdma-core copies: a receive's byte count; a READ's byte count or an atomic's 8
    // bytes (`handle_good_req`'s byte_len; other opcodes fail before copying).
    let len = if requester {
        match REQ_MAP[(cqe.sop_drop_qpn() >> 24) as usize].len {
            ReqLen::ByteCnt => cqe.byte_cnt(),
            ReqLen::Eight => 8,
            ReqLen::Unset => 0,
        }
    } else {
        cqe.byte_cnt()
    };
    let own = bytemuck::bytes_of(cqe);
    let src: &[u8] =
        if format == cqe_format::INLINE_SCATTER_32 { own } else { first_half.as_ref().map_or(&[], |h| &h[..]) };
    let cap = crate::scatter::inline_capacity(format).unwrap_or(0).min(src.len());
    let Some(data) = src.get(..len as usize).filter(|_| len as usize <= cap) else {
        return fault(res, out, FaultKind::BadField, pos, len);
    };
    // Where the data goes, found (and asked whether its WQE holds a posted work request)
    // before the translation retires the WQE. A CQE naming a WQE with nothing posted in it
    // is garbage the copy must not act on: its data stays in the CQE.
    let counter = cqe.wqe_counter();
    let dest = if requester {
        res.sq_qp(key(cqe, v1), v1).map(InlineDest::Send)
    } else {
        match recv_target(res, cqe, v1) {
            Ok((RecvTarget::Rq(slot), _)) => Some(InlineDest::Rq(slot)),
            Ok((RecvTarget::Srq(slot), _)) => Some(InlineDest::Srq(slot)),
            Err(_) => None,
        }
    }
    .filter(|&dest| res.wqe_posted(dest, counter));
    let parsed = if requester { parse_req(res, cqe, v1, pos, out) } else { parse_resp(res, cqe, v1, pos, out) };
    if out.fault().is_some() {
        return parsed;
    }
    let copied = match dest {
        Some(InlineDest::Send(slot)) => res.scatter_send(slot, counter, data),
        Some(InlineDest::Rq(slot)) => res.scatter_recv(slot, false, u32::from(out.wqe_index), data),
        Some(InlineDest::Srq(slot)) => res.scatter_recv(slot, true, u32::from(out.wqe_index), data),
        None => Ok(false),
    };
    match copied {
        Ok(true) => {}
        Ok(false) => res.note_not_copied(),
        Err(status) => {
            out.status = status;
            if !requester {
                // `handle_responder` returns before its opcode switch and the GRH test, so
                // only the checksum flag it set before the copy stays.
                out.wc_flags &= WcFlags::IP_CSUM_OK;
            }
        }
    }
    parsed
}

/// Whether a regular CQE of `cqe_size` bytes can carry format `format`: no inline data (0),
/// inline data in the cqe64 (1), or inline-64 data in the first half of a 128-byte CQE (2).
/// Format 3 is a compression title or block, never a regular CQE. The one rule the fast
/// paths' class tables and the slow path's BadFormat test share.
pub(crate) const fn format_fits(format: u8, cqe_size: usize) -> bool {
    format == cqe_format::NO_INLINE
        || format == cqe_format::INLINE_SCATTER_32
        || (format == cqe_format::INLINE_SCATTER_64 && cqe_size == 128)
}

/// Everything off the fast path: errors, swallowed CQEs, RESIZE, inline data, garbage.
/// `first_half` is a 128-byte CQE's first 64 bytes, where format 2 puts its inline data.
#[cold]
#[inline(never)]
pub(crate) fn parse_slow<R: Resources>(
    res: &mut R,
    cqe: Cqe64,
    first_half: Option<[u8; 64]>,
    v1: bool,
    cqe_size: u32,
    pos: u32,
    out: &mut Completion,
) -> Parsed {
    let format = cqe.format();
    let opcode = cqe.opcode();
    // rdma-core's `mlx5_parse_cqe` looks at the format bits only for successful requester
    // and responder CQEs (to copy inline data); an error CQE is translated whatever they
    // hold, and so it is here.
    let error = opcode == cqe_opcode::REQ_ERR || opcode == cqe_opcode::RESP_ERR;
    if !error && !format_fits(format, cqe_size as usize) {
        // Compression not enabled on this CQ, or inline-64 data that a 64-byte CQE has no
        // room for: rdma-core would read before the CQE (or, for format 3, take it for
        // inline-32 data); we refuse.
        return fault(res, out, FaultKind::BadFormat, pos, cqe.op_own as u32);
    }
    match opcode {
        cqe_opcode::REQ | cqe_opcode::RESP_WR_IMM..=cqe_opcode::RESP_SEND_INV if format != cqe_format::NO_INLINE => {
            parse_inline(res, &cqe, first_half, v1, pos, out)
        }
        cqe_opcode::REQ => parse_req(res, &cqe, v1, pos, out),
        cqe_opcode::RESP_WR_IMM..=cqe_opcode::RESP_SEND_INV => parse_resp(res, &cqe, v1, pos, out),
        cqe_opcode::REQ_ERR | cqe_opcode::RESP_ERR => parse_err(res, &cqe, v1, pos, out),
        // rdma-core records a signature error on its mkey and returns no completion; an
        // mkey it does not know fails its poll, and here it is a fault item that carries
        // the error (see `crate::sig`).
        cqe_opcode::SIG_ERR => {
            let e = SigError::from_cqe(SigErrCqe::from_cqe(&cqe));
            if res.sig_err(&e) {
                Parsed::Swallowed
            } else {
                res.note_fault();
                *out = e.to_item(pos);
                Parsed::Wc
            }
        }
        cqe_opcode::RESIZE_CQ => Parsed::Resize,
        // NO_PACKET is a tag-matching list completion; tag matching is not supported, so it
        // is reported rather than misread (rdma-core fails the poll when app != TM).
        op => fault(res, out, FaultKind::BadOpcode, pos, op as u32),
    }
}
