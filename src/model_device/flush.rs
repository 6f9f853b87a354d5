//! Errors and flushes: a QP moved to error, and the flush CQEs each vendor writes for the
//! work it held (mlx5: one per WQE; irdma GEN2: one per queue, completed by the poller).

use super::fabric::Fabric;
use super::irdma as ird;
use super::mlx5 as mx;
use super::qp::{QpHw, QpState, Recv, Send};
use crate::verbs::SendOp;
use dvcq_e810_dv::model::ModelCqe;
use dvcq_provider::WcStatus;

impl Fabric {
    pub(crate) fn qp_to_error(&mut self, q: usize) {
        if self.qps[q].state != QpState::Error {
            self.qp_error(q, WcStatus::WrFlushErr, WcStatus::WrFlushErr);
        }
        self.progress();
    }

    /// Moves QP `q` to error and flushes what it holds. mlx5: one flush CQE per waiting
    /// send and per posted receive, in order. irdma GEN2: one flush CQE per queue that holds
    /// work the provider has not seen completed, with the queue's flush code (`sq_code`,
    /// `rq_code`); the provider makes a completion for each WR it holds from it.
    pub(super) fn qp_error(&mut self, q: usize, sq_code: WcStatus, rq_code: WcStatus) {
        self.qps[q].state = QpState::Error;
        let sends: Vec<Send> = self.qps[q].sq.drain(..).collect();
        self.waiting -= sends.len();
        let recvs: Vec<Recv> = self.qps[q].rq.drain(..).collect();
        let (qpn, send_cq, recv_cq, hw) = {
            let qp = &self.qps[q];
            (qp.qpn, qp.send_cq, qp.recv_cq, qp.hw)
        };
        match hw {
            QpHw::Mlx5(_) => {
                for s in &sends {
                    self.cqs[send_cq].push_mlx5(&mx::req_err(qpn, s.wqe, s.op, WcStatus::WrFlushErr), None);
                }
                for r in &recvs {
                    self.cqs[recv_cq].push_mlx5(&mx::resp_err(qpn, r.wqe, WcStatus::WrFlushErr, None), None);
                }
            }
            QpHw::Irdma(l) => {
                if self.flush[q].sq_uncovered > 0 {
                    self.irdma_flush(q, &l, true, sq_code);
                }
                if self.flush[q].rq_uncovered > 0 {
                    self.irdma_flush(q, &l, false, rq_code);
                }
            }
        }
        for s in sends {
            self.recycle(s);
        }
        for r in recvs {
            self.give_sg(r.sg);
        }
    }

    /// Moves to error every QP whose CQE a CQ in error refused, as the hardware does: a QP
    /// whose completion cannot be written stops, and what it holds flushes (into the CQ in
    /// error, where nothing more lands; into its other CQ, if that one is healthy). Its
    /// later posts succeed and flush the same way, as on mlx5 and irdma, where a post only
    /// writes the WQE and rings the doorbell (inferred for both: the PRM and the E810
    /// datasheet describe the CQ error, not the QP's side of it).
    pub(super) fn settle_cq_errors(&mut self) {
        for c in 0..self.cqs.len() {
            while let Some(qpn) = self.cqs[c].stranded.pop() {
                let Some(q) = self.qps.iter().position(|p| p.qpn == qpn) else { continue };
                if self.qps[q].state != QpState::Error {
                    self.qp_error(q, WcStatus::WrFlushErr, WcStatus::WrFlushErr);
                }
            }
        }
    }

    /// Writes one irdma flush CQE for the SQ (`sq`) or RQ of QP `q`.
    pub(super) fn irdma_flush(&mut self, q: usize, l: &ird::QpLayout, sq: bool, code: WcStatus) {
        let (qpn, cq) =
            if sq { (self.qps[q].qpn, self.qps[q].send_cq) } else { (self.qps[q].qpn, self.qps[q].recv_cq) };
        let wqe_idx =
            if sq { self.irdma_registry(cq).and_then(|r| r.qp(l.send_id)).map_or(0, |x| x.sq.tail as u16) } else { 0 };
        self.cqs[cq].push_irdma(&ModelCqe::flush(l.ctx, qpn, sq, wqe_idx, ird::flush_code(code)));
        let f = &mut self.flush[q];
        if sq {
            (f.sq_uncovered, f.sq_flushed) = (0, true);
        } else {
            (f.rq_uncovered, f.rq_flushed) = (0, true);
        }
    }

    /// The SQ quanta irdma's provider holds for QP `q` (0 on mlx5).
    pub(super) fn irdma_sq_used(&mut self, q: usize) -> u32 {
        let (cq, hw) = (self.qps[q].send_cq, self.qps[q].hw);
        match hw {
            QpHw::Irdma(l) => self.irdma_registry(cq).and_then(|r| r.qp(l.send_id)).map_or(0, |x| x.sq.used()),
            QpHw::Mlx5(_) => 0,
        }
    }

    pub(super) fn irdma_rq_used(&mut self, q: usize) -> u32 {
        let (cq, hw) = (self.qps[q].recv_cq, self.qps[q].hw);
        match hw {
            QpHw::Irdma(l) => self.irdma_registry(cq).and_then(|r| r.qp(l.recv_id)).map_or(0, |x| x.rq.used()),
            QpHw::Mlx5(_) => 0,
        }
    }

    /// A send posted to a QP in error: mlx5 flushes its WQE at once; irdma's provider asks
    /// for a new flush when its queue was empty (or no flush is outstanding), else the
    /// pending flush covers it (rdma-core `irdma_upost_send`'s re-flush).
    pub(super) fn flush_posted_send(&mut self, q: usize, wqe: u16, op: SendOp, used_before: u32) {
        let (qpn, send_cq, hw) = (self.qps[q].qpn, self.qps[q].send_cq, self.qps[q].hw);
        match hw {
            QpHw::Mlx5(_) => self.cqs[send_cq].push_mlx5(&mx::req_err(qpn, wqe, op, WcStatus::WrFlushErr), None),
            QpHw::Irdma(l) => {
                if used_before == 0 || !self.flush[q].sq_flushed {
                    self.irdma_flush(q, &l, true, WcStatus::WrFlushErr);
                }
            }
        }
    }

    /// A receive posted to a QP in error, as [`Fabric::flush_posted_send`].
    pub(super) fn flush_posted_recv(&mut self, q: usize, wqe: u16, used_before: u32) {
        let (qpn, recv_cq, hw) = (self.qps[q].qpn, self.qps[q].recv_cq, self.qps[q].hw);
        match hw {
            QpHw::Mlx5(_) => {
                self.cqs[recv_cq].push_mlx5(&mx::resp_err(qpn, wqe, WcStatus::WrFlushErr, None), None);
            }
            QpHw::Irdma(l) => {
                if used_before == 0 || !self.flush[q].rq_flushed {
                    self.irdma_flush(q, &l, false, WcStatus::WrFlushErr);
                }
            }
        }
    }
}
