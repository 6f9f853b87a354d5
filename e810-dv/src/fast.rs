//! The common-case CQE path: a successful, non-extended, non-SRQ CQE of the QP the previous
//! CQE named. It produces exactly what [`Engine::translate`] produces for such a CQE (the
//! conformance and image tests compare both paths), writing straight into the caller's
//! completion; anything else falls back to the general path.

use crate::cq::Engine;
use crate::status::{rq_opcode, sq_opcode};
use dvcq_provider::{Completion, WcFlags, WcOpcode, WcStatus};
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
        let mut c = Completion::default();
        let bytes;
        if w3 & q3::SQ != 0 {
            if qp.first_sq_wq {
                return false;
            }
            let Some(trk) = qp.sq_trk.get(idx as usize) else {
                return false;
            };
            let Some(op) = SQ_OPS[usize::from(q3::op(w3))] else {
                return false;
            };
            c.wr_id = trk.wr_id;
            bytes = trk.wr_len;
            c.opcode = op;
            qp.sq.tail = (idx + u32::from(trk.quanta)) & qp.sq.mask();
            c.wqe_index = idx as u16;
        } else {
            // Hardware reports the RQ index in quanta (§4.4).
            let ri = idx >> qp.config().rq_shift;
            let Some(&wr_id) = qp.rq_wrid.get(ri as usize) else {
                return false;
            };
            c.wr_id = wr_id;
            bytes = q0::payload_len(w0);
            c.opcode = rq_opcode(q3::op(w3), gen3, qp.send_with_imm, false, compat);
            qp.rq.tail = (ri + 1) & qp.rq.mask();
            c.wqe_index = ri as u16;
            if !qp.ud && w3 & q3::STAG_IPV4 != 0 {
                c.imm_data = q2::src_qpn_or_inv_stag(w2);
                c.wc_flags = WcFlags::WITH_INV;
            }
        }
        c.byte_len = bytes;
        c.qp_num = qp_num;
        c.status = WcStatus::Success;
        if qp.ud {
            c.src_qp = q2::src_qpn_or_inv_stag(w2);
            c.wc_flags |= WcFlags::GRH;
        } else {
            c.src_qp = qp_num;
        }
        if gen3 {
            c.timestamp = u64::from(q0::tcp_seq_psn_rtt_ts(w0));
        }
        *wc = c;
        self.last_bytes = bytes;
        true
    }
}
