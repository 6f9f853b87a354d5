//! One CQE → one [`Completion`]: rdma-core's `irdma_uk_cq_poll_cmpl` + `irdma_process_cqe`
//! (rdma-core `providers/irdma/uk.c`, `providers/irdma/uverbs.c`), written as a pure function
//! of the CQE words and the QP state that returns the completion and the state changes to
//! apply.

use crate::cq::Engine;
use crate::flush;
use crate::ring::{Pos, SlotSource, SlotWords};
use crate::status::{classify_error, flush_code_status, rq_opcode, sq_opcode, vendor_err, CompStatus};
use dvcq_provider::{Completion, CqeFault, FaultKind, WcFlags, WcStatus};
use dvcq_uapi::irdma::codes::flush as flush_code;
use dvcq_uapi::irdma::cqe::{q0, q2, q3, ExtCqe};
use dvcq_uapi::irdma::HwRev;

/// What a step does besides producing `wc`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A completion (or fault item) to return.
    Wc,
    /// Consumed silently, continue (comp ctx 0: rdma-core's EFAULT, left by
    /// `irdma_uk_clean_cq`; iWARP connection WQEs, skipped in `irdma_uk_cq_poll_cmpl`).
    Skip,
    /// Consumed, and the poll call ends here (a flush CQE with an empty queue: rdma-core's
    /// ENOENT from `irdma_uk_cq_poll_cmpl`, which still consumed it; `__irdma_upoll_cq` stops
    /// at ENOENT but skips EFAULT and goes on).
    Stop,
}

/// Which work queue a step retires into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Queue {
    None,
    Sq,
    Rq,
}

pub(crate) const F_SET_BYTES: u8 = 1;
pub(crate) const F_CLEAR_FIRST_SQ_WQ: u8 = 2;
pub(crate) const F_PUSH_DROPPED: u8 = 4;
pub(crate) const F_ZERO_BYTES: u8 = 8;
/// The head moves without the polarity flip, even into slot 0 (rdma-core's connection-WQE
/// skip, copied on request).
pub(crate) const F_KEEP_LAP: u8 = 16;

/// One translated CQE.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Step {
    pub wc: Completion,
    pub kind: Kind,
    /// Slots the head advances (0: the CQE stays parked, as `irdma_uk_cq_poll_cmpl`
    /// leaves a flush CQE while the queue has more WRs).
    pub slots: u32,
    pub qp: u32,
    pub queue: Queue,
    /// The queue's new tail.
    pub tail: u32,
    pub flags: u8,
}

impl Step {
    #[inline(always)]
    fn consumed(kind: Kind, slots: u32) -> Self {
        Step { wc: Completion::default(), kind, slots, qp: 0, queue: Queue::None, tail: 0, flags: 0 }
    }
    #[cold]
    fn fault(kind: FaultKind, pos: u32, value: u32, slots: u32) -> Self {
        let wc = Completion::from_fault(CqeFault { kind, position: pos, value });
        Step { wc, kind: Kind::Wc, slots, qp: 0, queue: Queue::None, tail: 0, flags: 0 }
    }
}

impl Engine {
    /// Translates the CQE at `pos` whose qword3 `w3` was found valid. Returns `None` when its
    /// extension is not valid yet (try again later, nothing consumed; `irdma_uk_cq_poll_cmpl`
    /// returns ENOENT then). `parked` says whether this CQE already produced flushed
    /// completions (the in-place minor rewrite of rdma-core, see [`crate::flush`]).
    // Completion has private fields, so it cannot be built with an initializer here.
    #[allow(clippy::field_reassign_with_default)]
    #[inline]
    pub(crate) fn translate<R: SlotSource>(&self, ring: &R, pos: Pos, w3: u64, parked: bool) -> Option<Step> {
        let [w0, w1, w2] = ring.slot(pos.slot()).body();
        // Where faults say they are: the position counter.
        let at = pos.counter(self.entries);
        let mut slots = 1;
        let mut ext: Option<ExtCqe> = None;
        if w3 & q3::EXTCQE != 0 {
            ext = Some(ring.ext(pos)?);
            slots += ring.ext_extra_slots();
        }
        let srq = w3 & q3::SRQ != 0 && self.compat.srq();
        let ctx = if srq {
            // GEN3 SRQ CQE: the QP context is qword5 (byte 40), qword1 holds the wr_id
            // (`irdma_uk_cq_poll_cmpl`). Only a 64-byte slot has a byte 40.
            match ring.srq_ctx(pos.slot()) {
                Some(c) if self.hw_rev == HwRev::Gen3 => c,
                _ => return Some(Step::fault(FaultKind::BadFormat, at, (w3 >> 32) as u32, slots)),
            }
        } else {
            w1
        };
        // Comp ctx 0: a destroyed QP's CQE, consumed silently (EFAULT, as in
        // `irdma_uk_cq_poll_cmpl`; `irdma_uk_clean_cq` zeroes it).
        if ctx == 0 {
            return Some(Step::consumed(Kind::Skip, slots));
        }
        let qi = if ctx == self.last_ctx {
            self.last_qp
        } else {
            match self.qps.find(ctx) {
                Some(i) => i,
                None => return Some(Step::fault(FaultKind::UnknownQp, at, ctx as u32, slots)),
            }
        };
        // `qi` came from the lookup cache or the registry, so it is present; a miss would
        // be reported like an unknown context rather than panic.
        let Some(qp) = self.qps.get(qi) else {
            return Some(Step::fault(FaultKind::UnknownQp, at, ctx as u32, slots));
        };

        let error = w3 & q3::ERROR != 0;
        let major_err = q3::major_err(w3);
        let (mut comp, mut minor_err) =
            if error { classify_error(major_err, q3::minor_err(w3), self.compat) } else { (CompStatus::Success, 0) };
        if parked {
            if let CompStatus::Flushed(_) = comp {
                comp = CompStatus::Flushed(flush_code::GENERAL_ERR);
                minor_err = flush_code::GENERAL_ERR;
            }
        }
        let is_sq = w3 & q3::SQ != 0;
        // Not followed: the uk layer's rule that turns a RoCE UD QP's non-fatal "CIE" send
        // errors (major 0xEnnn) into successes (v64+, `irdma_uk_cq_poll_cmpl`) tests
        // `qp->qp_type == IRDMA_QP_TYPE_ROCE_UD`, and the userspace provider never sets the
        // type it initialises QPs with (`irdma_uk_qp_init` defaults it to IWARP), so in
        // userspace the rule never applies and such a CQE is an unknown error
        // (`IBV_WC_GENERAL_ERR`) in every release (`irdma_ucreate_qp` never sets `info.type`).

        let mut wc = Completion::default();
        wc.qp_num = q2::qp_id(w2);
        wc.status = match comp {
            CompStatus::Success => WcStatus::Success,
            CompStatus::Flushed(code) => flush_code_status(code, self.compat),
            CompStatus::Unknown => WcStatus::GeneralErr,
        };
        if error {
            // Not written on success (`irdma_process_cqe`): a zeroed ibv_wc keeps 0.
            wc.vendor_err = vendor_err(major_err, minor_err);
        }
        let mut flags = 0u8;
        let queue;
        let tail;
        let parks = self.hw_rev.parks_flush();
        if is_sq {
            queue = Queue::Sq;
            if qp.first_sq_wq {
                // rdma-core (`irdma_uk_cq_poll_cmpl`) checks for connection WQEs before it
                // splits flushes from the rest, and a parked flush CQE names the SQ tail by
                // then (rdma-core rewrote its wqe_idx, see `crate::flush`).
                let idx = if parked { qp.sq.tail } else { u32::from(q3::wqe_idx(w3)) };
                let conn = u32::from(qp.config().conn_wqes);
                flags |= F_CLEAR_FIRST_SQ_WQ * u8::from(idx + 1 >= conn);
                if idx < conn && qp.sq.head == qp.sq.tail {
                    return Some(conn_wqe(qi, slots, flags, self.compat.conn_wqe_bug()));
                }
            }
            // rdma-core stops push mode on any SQ CQE with a dropped push WQE, flushed or not
            // (`irdma_uk_cq_poll_cmpl`).
            if w3 & q3::PSHDROP != 0 {
                flags |= F_PUSH_DROPPED;
            }
            let op;
            if let CompStatus::Flushed(_) = comp {
                // Flushed SQ WRs come from the SQ ring state, not from the CQE
                // (`irdma_uk_cq_poll_cmpl` walks `sq_wrtrk_array` from the SQ tail).
                let Some((idx, trk, new_tail)) = flush::next_sq(qp) else {
                    // rdma-core's ENOENT: the flag changes made so far still hold.
                    let mut s = Step::consumed(Kind::Stop, slots);
                    (s.qp, s.flags) = (qi, flags);
                    return Some(s);
                };
                wc.wr_id = trk.wr_id;
                wc.byte_len = trk.wr_len;
                wc.wqe_index = idx as u16;
                flags |= F_SET_BYTES;
                op = trk.opcode;
                tail = new_tail;
                if flush::stays_parked(parks, qp.sq.head, new_tail) {
                    slots = 0;
                }
            } else {
                let idx = u32::from(q3::wqe_idx(w3));
                let Some(trk) = qp.sq_trk.get(idx as usize) else {
                    return Some(Step::fault(FaultKind::BadField, at, idx, slots));
                };
                wc.wr_id = trk.wr_id;
                if !error {
                    wc.byte_len = trk.wr_len;
                    flags |= F_SET_BYTES;
                } else {
                    // Quirk: on a non-flush SQ error rdma-core leaves bytes_xfered as the
                    // previous completion on this CQ set it (`irdma_uk_cq_poll_cmpl` writes it
                    // only on success, and `__irdma_upoll_cq` reuses `cur_cqe`).
                    wc.byte_len = self.last_bytes;
                }
                wc.wqe_index = idx as u16;
                op = q3::op(w3);
                tail = (idx + u32::from(trk.quanta)) & qp.sq.mask();
            }
            match sq_opcode(op, self.compat) {
                Some(o) => wc.opcode = o,
                // Quirk: an opcode rdma-core's `set_ib_wc_op_sq` has no case for leaves
                // the opcode untouched and turns the status into GENERAL_ERR, even on success.
                None => wc.status = WcStatus::GeneralErr,
            }
        } else {
            queue = Queue::Rq;
            let idx;
            if srq {
                // GEN3 SRQ: wr_id straight from qword1 (`irdma_uk_cq_poll_cmpl`); the SRQ
                // ring is not tracked.
                wc.wr_id = w1;
                idx = u32::from(q3::wqe_idx(w3));
                tail = qp.rq.tail;
            } else {
                if comp == CompStatus::Success {
                    // Hardware reports the RQ index in quanta (`irdma_uk_cq_poll_cmpl` divides
                    // by `rq_wqe_size_multiplier`).
                    idx = u32::from(q3::wqe_idx(w3)) >> qp.config().rq_shift;
                    if idx >= qp.rq.size() || qp.rq_wrid.is_empty() {
                        return Some(Step::fault(FaultKind::BadField, at, idx, slots));
                    }
                } else {
                    // Flushed or unknown error: the CQE's wqe_idx is ignored and the RQ ring
                    // tail used instead (`irdma_uk_cq_poll_cmpl`).
                    let Some(t) = flush::next_rq(qp) else {
                        return Some(Step::consumed(Kind::Stop, slots));
                    };
                    idx = t;
                }
                wc.wr_id = qp.rq_entry(idx);
                tail = (idx + 1) & qp.rq.mask();
                if matches!(comp, CompStatus::Flushed(_)) && flush::stays_parked(parks, qp.rq.head, tail) {
                    slots = 0;
                }
            }
            wc.wqe_index = idx as u16;
            wc.byte_len = q0::payload_len(w0);
            flags |= F_SET_BYTES;
            let imm_valid = ext.is_some_and(|e| e.imm_valid());
            wc.opcode = rq_opcode(q3::op(w3), self.hw_rev == HwRev::Gen3, qp.send_with_imm, imm_valid, self.compat);
        }
        if let Some(e) = ext {
            if e.imm_valid() {
                // The CQE holds the immediate as a number; ibv_wc gets htonl() of it
                // (`irdma_process_cqe`).
                wc.imm_data = e.imm_data().to_be();
                wc.wc_flags |= WcFlags::WITH_IMM;
            }
        }
        if queue == Queue::Rq && !qp.ud && w3 & q3::STAG_IPV4 != 0 {
            // Same union as imm_data; bit 53 means IPv4 on UD QPs (`IRDMACQ_STAG` and
            // `IRDMACQ_IPV4` are the same bit in `providers/irdma/defs.h`).
            wc.imm_data = q2::src_qpn_or_inv_stag(w2);
            wc.wc_flags |= WcFlags::WITH_INV;
        }
        if qp.ud {
            wc.src_qp = q2::src_qpn_or_inv_stag(w2);
            // Quirk (`irdma_process_cqe`): UD completions always carry IBV_WC_GRH.
            wc.wc_flags |= WcFlags::GRH;
        } else {
            // Quirk (`irdma_process_cqe`): RC/UC src_qp is the local QP number.
            wc.src_qp = wc.qp_num;
        }
        if self.hw_rev == HwRev::Gen3 {
            wc.timestamp = u64::from(q0::tcp_seq_psn_rtt_ts(w0));
        }
        Some(Step { wc, kind: Kind::Wc, slots, qp: qi, queue, tail, flags })
    }
}

/// A connection WQE's CQE (iWARP, GEN1 legacy; `irdma_setup_connection_wqes` reserves them,
/// `irdma_uk_cq_poll_cmpl` skips their CQEs): an SQ CQE below `conn_wqes` while the user SQ
/// is empty is consumed silently (with the `flags` set so far) and rdma-core zeroes its
/// scratch completion. rdma-core moves the head one slot there, without the polarity flip,
/// whatever the CQE takes (`IRDMA_RING_MOVE_HEAD_NOCHECK` alone): bugs dvcq copies only when
/// asked (`bug`, [`crate::Compat::with_conn_wqe_bug`]); otherwise the CQE's `slots` are
/// skipped by the normal rule.
#[cold]
fn conn_wqe(qi: u32, slots: u32, flags: u8, bug: bool) -> Step {
    let (slots, keep_lap) = if bug { (1, F_KEEP_LAP) } else { (slots, 0) };
    let mut s = Step::consumed(Kind::Skip, slots);
    (s.qp, s.flags) = (qi, flags | F_ZERO_BYTES | keep_lap);
    s
}
