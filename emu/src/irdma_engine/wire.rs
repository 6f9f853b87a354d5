//! The E810's side of the wire (`crate::wire`, run by `crate::engine::remote`): an irdma
//! WQE as a wire [`Work`], and the receives and CQEs of irdma QPs when a request reaches
//! them or a reply comes back. What runs between the two (keys, ranges, gather and
//! scatter, RNR, replies, flushes of what is in flight) is the one code both devices use.
//! Work between two irdma QPs of one process runs through the same responder
//! (`Emulator::run_locally`).

use super::{advance_rq, flush_code, grh, peek_rq, set_state, PORT_MAC};
use crate::emulator::Emulator;
use crate::engine::remote::Work;
use crate::irdma_wqe::{op, SqWqe};
use crate::objects::{Qp, QpState, QpType};
use crate::recv::RecvWqe;
use crate::wire::{self, Header, Op};
use dvcq_e810_dv::model::ModelCqe;

/// IB opcodes an E810 reports for receives (GEN_2 RoCE).
mod ib_op {
    pub const SEND_ONLY: u8 = 0x04;
    pub const SEND_ONLY_WITH_IMM: u8 = 0x05;
    pub const RDMA_WRITE_ONLY_WITH_IMM: u8 = 0x0b;
    pub const SEND_ONLY_WITH_INV: u8 = 0x17;
}

/// The wire operation of an RC send WQE; `None` for one the device does not execute.
pub(super) fn op_of(w: &SqWqe) -> Option<Op> {
    Some(match (w.op, w.imm.is_some()) {
        (op::RDMA_WRITE | op::RDMA_WRITE_SOL, false) => Op::Write,
        (op::RDMA_WRITE | op::RDMA_WRITE_SOL, true) => Op::WriteImm,
        (op::RDMA_READ, _) => Op::Read,
        (op::SEND | op::SEND_SOL, false) => Op::Send,
        (op::SEND | op::SEND_SOL, true) => Op::SendImm,
        (op::SEND_INV | op::SEND_SOL_INV, _) => Op::SendInv,
        _ => return None,
    })
}

/// `w`, at SQ quantum `at`, as the wire carries it.
pub(super) fn work(w: &SqWqe, op: Op, at: u32) -> Work<'_> {
    Work {
        op: Some(op),
        solicited: matches!(w.op, op::SEND_SOL | op::SEND_SOL_INV | op::RDMA_WRITE_SOL),
        raddr: w.remote_addr,
        rkey: w.stag,
        imm: if op == Op::SendInv { w.stag } else { w.imm.unwrap_or(0) },
        gather: &w.data,
        wqe_index: at as u16,
        opcode: w.op,
        signaled: w.signaled,
        // The E810 has no atomics (IBV_ATOMIC_NONE).
        atomic: None,
    }
}

/// The receive CQE of a message of `op` that landed in RQ WQE `rq_idx` of QP `qpn`.
#[allow(clippy::too_many_arguments)]
fn recv_cqe(ctx: u64, qpn: u32, rq_idx: u32, rq_shift: u32, op: Op, imm: u32, solicited: bool, len: u32) -> ModelCqe {
    let ib = match op {
        Op::SendInv => ib_op::SEND_ONLY_WITH_INV,
        Op::WriteImm => ib_op::RDMA_WRITE_ONLY_WITH_IMM,
        Op::SendImm => ib_op::SEND_ONLY_WITH_IMM,
        _ => ib_op::SEND_ONLY,
    };
    // The receive's byte count is the message's: a WRITE with immediate's too.
    let mut c = ModelCqe::recv(ctx, qpn, rq_idx as u16, rq_shift as u8, ib, len);
    match op {
        Op::SendImm | Op::WriteImm => c = c.with_imm(imm),
        Op::SendInv => c = c.with_inv(imm),
        _ => {}
    }
    if solicited {
        c = c.solicited();
    }
    c
}

impl Emulator {
    /// The receive at the head of irdma QP `h`'s RQ, if one is posted.
    pub(crate) fn irdma_peek_recv(&self, fd: i32, h: u32) -> Option<RecvWqe> {
        let iq = self.contexts.get(&fd)?.irdma.qps.get(&h)?;
        // SAFETY: the QP exists under the lock this thread holds: its RQ is live.
        unsafe { peek_rq(iq) }
    }

    /// Consumes the receive [`Self::irdma_peek_recv`] returned for a message of `op`
    /// (`landed`: its data is in place, or the scatter's syndrome) and returns its CQE: the
    /// receive's, or a flush CQE with the error's code.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn irdma_take_recv(
        &mut self,
        fd: i32,
        h: u32,
        peer: &Qp,
        op: Op,
        imm: u32,
        solicited: bool,
        len: u32,
        landed: Result<(), u8>,
    ) -> ModelCqe {
        let Some(iq) = self.irdma_qp_mut(fd, h) else {
            return ModelCqe::flush_general(0, peer.qpn, false, 0);
        };
        let (ctx, rq_idx, shift) = (iq.compl_ctx, iq.rq_head, iq.rq_shift);
        advance_rq(iq);
        match landed {
            Ok(()) => recv_cqe(ctx, peer.qpn, rq_idx, shift, op, imm, solicited, len),
            Err(s) => ModelCqe::flush(ctx, peer.qpn, false, rq_idx as u16, flush_code(s)),
        }
    }

    /// Writes responder CQE `c` of irdma QP `h` into its receive CQ `cq`; a flush CQE is
    /// the one libirdma reports the RQ's outstanding receives from.
    pub(crate) fn irdma_responder_cqe(&mut self, fd: i32, h: u32, cq: u32, c: &ModelCqe) {
        let at = self.irdma_complete(fd, cq, c);
        if c.error.is_some() {
            if let Some(q) = self.irdma_qp_mut(fd, h) {
                q.rq_flush_at = at;
            }
            set_state(self, fd, h, QpState::Err);
        }
    }

    /// The CQE of a signaled WQE of irdma QP `h` whose reply came back good.
    pub(crate) fn irdma_requester_cqe(&mut self, fd: i32, h: u32, qp: &Qp, wqe_index: u16, opcode: u8) {
        let Some(ctx) = self.irdma_qp_mut(fd, h).map(|q| q.compl_ctx) else { return };
        self.irdma_complete(fd, qp.send_cq, &ModelCqe::send(ctx, qp.qpn, wqe_index, opcode));
    }

    /// The WQE at `wqe_index` failed with syndrome `s` (translated to its flush code): one
    /// flush CQE, from which libirdma reports it and everything posted after it, unless
    /// libirdma still holds one; the QP goes to the error state.
    pub(crate) fn irdma_requester_failed(&mut self, fd: i32, h: u32, qp: &Qp, wqe_index: u16, s: u8) {
        let Some(iq) = self.irdma_qp_mut(fd, h).map(|q| *q) else { return };
        if !self.irdma_pending(fd, qp.send_cq, iq.sq_flush_at) {
            let code = flush_code(s);
            let c = ModelCqe::flush(iq.compl_ctx, qp.qpn, true, wqe_index, code);
            let at = self.irdma_complete(fd, qp.send_cq, &c);
            if let Some(q) = self.irdma_qp_mut(fd, h) {
                q.sq_flush_at = at;
                q.sq_uncovered = false;
            }
        }
        set_state(self, fd, h, QpState::Err);
    }

    /// A datagram to UD QP `h`: into its next receive after a 40-byte GRH (an IPv6 header
    /// between the port's GIDs), its CQE naming the sender's QP and the port's MAC; dropped
    /// when the QP is not ready, the Q_Key differs or no receive is posted.
    pub(crate) fn irdma_take_datagram(&mut self, fd: i32, h: u32, peer: &Qp, hdr: &Header, data: &[u8]) {
        if peer.qp_type != QpType::Ud
            || !matches!(peer.state, QpState::Rtr | QpState::Rts)
            || peer.path.qkey != hdr.qkey
        {
            return;
        }
        let Some(wqe) = self.irdma_peek_recv(fd, h) else { return };
        let mut msg = grh(data.len());
        msg.extend_from_slice(data);
        let landed = self.scatter(fd, peer.pd, &wqe, &msg);
        let op = Op::from_wire(hdr.op).unwrap_or(Op::Send);
        let solicited = hdr.flags & wire::FLAG_SOLICITED != 0;
        let mut c = self.irdma_take_recv(fd, h, peer, op, hdr.imm, solicited, msg.len() as u32, landed);
        if landed.is_ok() {
            c = c.with_ud(hdr.src_qpn, false, PORT_MAC, None);
        }
        self.irdma_responder_cqe(fd, h, peer.recv_cq, &c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wqe::Gather;

    fn wqe(op: u8, imm: Option<u32>) -> SqWqe {
        SqWqe { op, signaled: true, imm, remote_addr: 0x1000, stag: 0x77, data: Gather::Segs(Vec::new()) }
    }

    #[test]
    fn irdma_opcodes_map_to_the_wire_s_operations() {
        assert_eq!(op_of(&wqe(op::RDMA_WRITE, None)), Some(Op::Write));
        assert_eq!(op_of(&wqe(op::RDMA_WRITE_SOL, Some(5))), Some(Op::WriteImm));
        assert_eq!(op_of(&wqe(op::RDMA_READ, None)), Some(Op::Read));
        assert_eq!(op_of(&wqe(op::SEND_SOL, None)), Some(Op::Send));
        assert_eq!(op_of(&wqe(op::SEND, Some(5))), Some(Op::SendImm));
        assert_eq!(op_of(&wqe(op::SEND_SOL_INV, None)), Some(Op::SendInv));
        assert_eq!(op_of(&wqe(op::NOP, None)), None);
        // A SEND with invalidate carries the key it invalidates where the immediate goes.
        let w = wqe(op::SEND_INV, None);
        assert_eq!(work(&w, Op::SendInv, 3).imm, 0x77);
        assert!(work(&wqe(op::SEND_SOL, None), Op::Send, 0).solicited);
    }
}
