//! The common-case CQE path: a successful, non-extended, non-SRQ CQE of the QP the previous
//! CQE named. It produces exactly what [`Engine::translate`] produces for such a CQE (the
//! conformance and image tests compare both paths), writing straight into the caller's
//! completion; anything else falls back to the general path.

use crate::cq::Engine;
use crate::status::{rq_opcode, sq_opcode};
use dvcq_provider::{Completion, FaultKind, WcFlags, WcOpcode, WcStatus};
use dvcq_uapi::irdma::cqe::{q0, q2, q3};

/// qword3 bits that send a CQE down the general path.
const SLOW: u64 = q3::ERROR | q3::EXTCQE | q3::SRQ | q3::PSHDROP;

/// [`sq_opcode`] as a table over the 6-bit opcode field.
const SQ_OPS: [Option<WcOpcode>; 64] = {
    let mut t = [None; 64];
    let mut i = 0;
    while i < 64 {
        t[i] = sq_opcode(i as u8);
        i += 1;
    }
    t
};

impl Engine {
    /// Handles the CQE with words `w0..w3` if it is a common case (the caller then advances
    /// the head by one slot); returns `false` (having changed nothing) otherwise.
    #[inline(always)]
    pub(crate) fn fast(&mut self, w0: u64, w1: u64, w2: u64, w3: u64, wc: &mut Completion) -> bool {
        // `last_ctx` is 0 while invalid or while a flush CQE is parked.
        if w3 & SLOW != 0 || w1 != self.last_ctx || w1 == 0 {
            return false;
        }
        let gen3 = self.gen3;
        let compat = self.compat;
        let Some(qp) = self.qps.get_mut(self.last_qp) else {
            return false;
        };
        let qp_num = q2::qp_id(w2);
        let idx = u32::from(q3::wqe_idx(w3));
        let mut flags = WcFlags::empty();
        let (wr_id, bytes, opcode, wqe_index) = if w3 & q3::SQ != 0 {
            if qp.first_sq_wq {
                return false;
            }
            let Some(trk) = qp.sq_trk.get(idx as usize) else {
                return false;
            };
            let Some(op) = SQ_OPS[usize::from(q3::op(w3))] else {
                return false;
            };
            qp.sq.tail = (idx + u32::from(trk.quanta)) & qp.sq.mask();
            (trk.wr_id, trk.wr_len, op, idx)
        } else {
            // Hardware reports the RQ index in quanta (§4.4).
            let ri = idx >> qp.config().rq_shift;
            let Some(&wr_id) = qp.rq_wrid.get(ri as usize) else {
                return false;
            };
            qp.rq.tail = (ri + 1) & qp.rq.mask();
            if !qp.ud && w3 & q3::STAG_IPV4 != 0 {
                wc.imm_data = q2::src_qpn_or_inv_stag(w2);
                flags = WcFlags::WITH_INV;
            }
            (wr_id, q0::payload_len(w0), rq_opcode(q3::op(w3), gen3, qp.send_with_imm, false, compat), ri)
        };
        // Only the fields rdma-core's `irdma_process_cqe` writes for a success (§4.8):
        // vendor_err, pkey_index, slid, sl and dlid_path_bits keep what the slot held, as
        // `Completion` documents.
        wc.wr_id = wr_id;
        wc.opcode = opcode;
        wc.wqe_index = wqe_index as u16;
        wc.byte_len = bytes;
        wc.qp_num = qp_num;
        wc.status = WcStatus::Success;
        wc.fault_kind = FaultKind::None;
        if qp.ud {
            wc.src_qp = q2::src_qpn_or_inv_stag(w2);
            flags |= WcFlags::GRH;
        } else {
            wc.src_qp = qp_num;
        }
        wc.wc_flags = flags;
        if gen3 {
            wc.timestamp = u64::from(q0::tcp_seq_psn_rtt_ts(w0));
        }
        self.last_bytes = bytes;
        true
    }
}
