//! Posting: the checks `ibv_post_send` and `ibv_post_recv` make, recording each post in
//! the poller's registry as the provider records it, then executing it.

use super::exec::{Data, Step, Work};
use super::fabric::Fabric;
use super::irdma as ird;
use super::mlx5 as mx;
use super::qp::{Payload, PostError, PostErrorKind, QpHw, QpState, Recv, Send, EINVAL, ENOMEM};
use super::ModelVendor;
use crate::verbs::{MrSlice, QpType, RecvWr, SendOp, SendWr, Sge};
use dvcq_e810_dv::RegistryError;

fn post_err(index: usize, kind: PostErrorKind, errno: i32, what: &'static str) -> PostError {
    PostError { index, kind, errno, what }
}

impl Fabric {
    /// The raw entries of `from`, in a list from the pool.
    pub(super) fn take_sg(&mut self, from: &[MrSlice<'_>]) -> Vec<Sge> {
        let mut v = self.sg_pool.pop().unwrap_or_default();
        v.clear();
        v.extend(from.iter().map(MrSlice::sge));
        v
    }

    pub(super) fn give_sg(&mut self, v: Vec<Sge>) {
        if self.sg_pool.len() < 256 {
            self.sg_pool.push(v);
        }
    }

    /// The post-side checks of one send (`ibv_post_send`'s refusals).
    pub(super) fn check_send(&self, q: usize, wr: &SendWr<'_>) -> Result<(), PostErrorKind> {
        let qp = &self.qps[q];
        if qp.qp_type == QpType::XrcRecv {
            return Err(PostErrorKind::NoQueue);
        }
        if qp.state == QpState::Init {
            return Err(PostErrorKind::BadState(qp.state));
        }
        // rdma-core copies `remote_srqn` into the XRC segment unchecked; a request naming no
        // SRQ is refused here, before the device would NAK it.
        if qp.qp_type == QpType::XrcSend && wr.xrc_srqn.is_none() {
            return Err(PostErrorKind::BadOpcode);
        }
        if qp.qp_type == QpType::Ud && (wr.ud.is_none() || wr.op.remote().is_some()) {
            return Err(PostErrorKind::BadOpcode);
        }
        // Binds and SEND_WITH_INV are RC work (irdma: EINVAL for a bind on another QP
        // type; mlx5's UD path has no bind segment).
        if qp.qp_type == QpType::Ud && matches!(wr.op, SendOp::BindMw(_) | SendOp::SendWithInv(_)) {
            return Err(PostErrorKind::BadOpcode);
        }
        // An operation the transport does not carry (READ and atomics on UC or UD):
        // `EINVAL`, as mlx5's and rxe's posts refuse it. An E810 (irdma GEN2) has no
        // atomics: rdma-core's irdma post knows no atomic opcode before v64, whose atomics
        // are GEN3's, and refuses it with EINVAL.
        if !qp.qp_type.carries(wr.op) || (wr.op.is_atomic() && matches!(qp.hw, QpHw::Irdma(_))) {
            return Err(PostErrorKind::BadOpcode);
        }
        let (max_sge, max_inline) = match &qp.hw {
            QpHw::Mlx5(l) => (l.max_send_sge, l.max_inline),
            QpHw::Irdma(l) => (l.max_send_sge, l.max_inline),
        };
        if wr.sg_list.len() > max_sge as usize {
            return Err(PostErrorKind::TooManySge { num_sge: wr.sg_list.len(), max: max_sge });
        }
        if wr.inline && (wr.op.writes_local() || matches!(wr.op, SendOp::BindMw(_))) {
            // Inline data is what a request sends; a READ or an atomic sends none.
            return Err(PostErrorKind::BadOpcode);
        }
        if wr.inline && wr.len() > u64::from(max_inline) {
            return Err(PostErrorKind::InlineTooLong { len: wr.len(), max: max_inline });
        }
        Ok(())
    }

    pub(super) fn send_errno(&self, kind: PostErrorKind) -> i32 {
        match (self.vendor, kind) {
            // A queue of no entries is a full one to mlx5's post (`mlx5_wq_overflow`).
            (_, PostErrorKind::QueueFull | PostErrorKind::NoQueue) => ENOMEM,
            (_, PostErrorKind::BadOpcode) => EINVAL,
            // mlx5 refuses oversized lists and inline data, and sends before RTS (through
            // `qp_state_max_gs`), with ENOMEM.
            (ModelVendor::Mlx5, _) => ENOMEM,
            (ModelVendor::Irdma, _) => EINVAL,
        }
    }

    /// Records a send in the send CQ's registry as the provider does; the WQE index its CQE
    /// will name.
    pub(super) fn record_send(&mut self, q: usize, wr: &SendWr<'_>, sg: &[Sge]) -> Result<u16, PostErrorKind> {
        let (qpn, qp_type, send_cq, hw) = {
            let qp = &self.qps[q];
            (qp.qpn, qp.qp_type, qp.send_cq, qp.hw)
        };
        let inline_len = wr.inline.then(|| wr.len());
        match hw {
            QpHw::Mlx5(l) => {
                let sq =
                    &mut self.mlx5_registry(send_cq).and_then(|r| r.qp_mut(qpn)).ok_or(PostErrorKind::QueueFull)?.sq;
                if sq.outstanding() >= l.max_post_send {
                    return Err(PostErrorKind::QueueFull);
                }
                let bbs = mx::wqebbs(qp_type, wr.op, sg, inline_len);
                // A bind is a UMR WQE: rdma-core records its completion opcode in
                // `wr_data[idx]` (`IBV_WC_BIND_MW`), since the CQE only says UMR.
                let wr_data = matches!(wr.op, SendOp::BindMw(_)).then_some(dvcq_provider::WcOpcode::BindMw);
                Ok(sq.post_with_opcode(wr.wr_id, bbs, wr_data))
            }
            QpHw::Irdma(l) => {
                let quanta = ird::quanta(wr.op, wr.sg_list.len(), inline_len);
                let op = ird::sq_opcode(wr.op, wr.solicited);
                let reg = self.irdma_registry(send_cq).ok_or(PostErrorKind::QueueFull)?;
                // `irdma_qp_get_next_send_wqe` refuses a WR (and its NOP padding) that
                // would leave fewer than 257 quanta free; the QP's granted max_send_wr is
                // not checked, so small WRs may outnumber it.
                let idx = reg.post_send(l.send_id, wr.wr_id, wr.len() as u32, quanta, op).map_err(|e| match e {
                    RegistryError::Full => PostErrorKind::QueueFull,
                    _ => PostErrorKind::BadOpcode,
                })?;
                self.flush[q].sq_uncovered += 1;
                Ok(idx)
            }
        }
    }

    /// Writes send `wr` at WQE `wqe` into the SQ buffer of QP `q`, which has requester
    /// scatter-to-CQE, as rdma-core's post writes it; and makes sure the send CQ's poller
    /// holds the memory regions of the list's keys, which its copy writes into only (the
    /// model device registers them for the application, as `Cq::attach_mr` does on an
    /// attached CQ). A region dropped since is taken out, one whose key came back with new
    /// memory replaced.
    fn write_send_wqe(&mut self, q: usize, wr: &SendWr<'_>, sg: &[Sge], wqe: u16, signaled: bool) {
        let (qpn, send_cq) = (self.qps[q].qpn, self.qps[q].send_cq);
        let Some(rs) = self.qps[q].req_scatter.as_ref() else { return };
        let w = mx::SendWqe {
            qpn,
            wqe,
            op: wr.op,
            sg,
            inline_len: wr.inline.then(|| wr.len()),
            signaled,
            solicited: wr.solicited,
        };
        // The buffer is the model's own, sized for the SQ: the write cannot fail.
        let _ = w.write(&rs.wqes);
        if !wr.op.writes_local() {
            return;
        }
        let Fabric { mrs, cqs, .. } = self;
        let Some(reg) = cqs.get_mut(send_cq).and_then(|c| c.mlx5_registry_mut()) else { return };
        let stale: Vec<u32> = reg
            .memory_regions()
            .iter()
            .filter(|r| !mrs.is_live(r.lkey(), r.addr(), r.len()))
            .map(|r| r.lkey())
            .collect();
        for lkey in stale {
            reg.remove_memory_region(lkey);
        }
        for s in sg.iter().filter(|s| s.len > 0) {
            if reg.memory_regions().iter().any(|r| r.lkey() == s.lkey) {
                continue;
            }
            if let Some(region) = mrs.region(s.lkey) {
                let _ = reg.add_memory_region(region);
            }
        }
    }

    pub(crate) fn post_send(&mut self, q: usize, wrs: &[SendWr<'_>]) -> Result<(), PostError> {
        let mut result = Ok(());
        for (i, wr) in wrs.iter().enumerate() {
            if let Err(kind) = self.check_send(q, wr) {
                result = Err(post_err(i, kind, self.send_errno(kind), "send"));
                break;
            }
            let used_before = self.irdma_sq_used(q);
            let sg = self.take_sg(wr.sg_list);
            let wqe = match self.record_send(q, wr, &sg) {
                Ok(w) => w,
                Err(kind) => {
                    self.give_sg(sg);
                    result = Err(post_err(i, kind, self.send_errno(kind), "send"));
                    break;
                }
            };
            // `sq_sig_all`: rdma-core sets `MLX5_WQE_CTRL_CQ_UPDATE` in every WQE (mlx5's
            // `sq_signal_bits`), irdma's post signals every WR.
            let signaled = wr.signaled || self.qps[q].sig_all;
            self.write_send_wqe(q, wr, &sg, wqe, signaled);
            if self.qps[q].state == QpState::Error {
                self.give_sg(sg);
                self.flush_posted_send(q, wqe, wr.op, used_before);
                continue;
            }
            let mut inline = None;
            if wr.inline {
                let mut bytes = Vec::with_capacity(wr.len() as usize);
                if self.mrs.gather_by_addr(&sg, &mut bytes) {
                    inline = Some(bytes);
                }
            }
            let data = match &inline {
                Some(b) => Data::Inline(b),
                None => Data::Gather(&sg),
            };
            let work = Work {
                op: wr.op,
                data,
                signaled,
                solicited: wr.solicited,
                ud: wr.ud,
                xrc_srqn: wr.xrc_srqn,
                wqe,
                len: wr.len(),
            };
            let step = if self.qps[q].sq.is_empty() { self.execute(q, &work) } else { Step::Wait };
            match step {
                Step::Wait => {
                    let payload = match inline {
                        Some(b) => {
                            self.give_sg(sg);
                            Payload::Inline(b)
                        }
                        None => Payload::Gather(sg),
                    };
                    let s = Send {
                        op: wr.op,
                        payload,
                        signaled,
                        solicited: wr.solicited,
                        ud: wr.ud,
                        xrc_srqn: wr.xrc_srqn,
                        wqe,
                        len: wr.len(),
                    };
                    self.qps[q].sq.push_back(s);
                    self.waiting += 1;
                }
                Step::Done(n) => {
                    self.complete_send(q, &work, n);
                    self.give_sg(sg);
                }
                Step::Fail(status) => {
                    self.fail_send(q, &work, status);
                    self.give_sg(sg);
                }
            }
            self.apply_deferred();
        }
        self.progress();
        result
    }

    pub(super) fn recv_errno(&self, kind: PostErrorKind) -> i32 {
        match kind {
            PostErrorKind::QueueFull | PostErrorKind::NoQueue => ENOMEM,
            _ => EINVAL,
        }
    }

    pub(crate) fn post_recv(&mut self, q: usize, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        let mut result = Ok(());
        for (i, wr) in wrs.iter().enumerate() {
            let (qpn, recv_cq, hw, state, srq) = {
                let qp = &self.qps[q];
                (qp.qpn, qp.recv_cq, qp.hw, qp.state, qp.srq)
            };
            let fail = |kind| post_err(i, kind, self.recv_errno(kind), "recv");
            // Neither XRC type has a receive queue: receives go to the XRC SRQs.
            if self.qps[q].qp_type.is_xrc() {
                result = Err(fail(PostErrorKind::NoQueue));
                break;
            }
            if srq.is_some() {
                result = Err(fail(PostErrorKind::QueueFull));
                break;
            }
            let used_before = self.irdma_rq_used(q);
            let recorded = match hw {
                QpHw::Mlx5(l) => {
                    if wr.sg_list.len() > l.max_recv_sge as usize {
                        Err(PostErrorKind::TooManySge { num_sge: wr.sg_list.len(), max: l.max_recv_sge })
                    } else {
                        match self.mlx5_registry(recv_cq).and_then(|r| r.qp_mut(qpn)) {
                            Some(r) if r.rq.outstanding() < l.max_post_recv => Ok(r.rq.post(wr.wr_id)),
                            _ => Err(PostErrorKind::QueueFull),
                        }
                    }
                }
                QpHw::Irdma(l) => {
                    if wr.sg_list.len() > l.max_recv_sge as usize {
                        Err(PostErrorKind::TooManySge { num_sge: wr.sg_list.len(), max: l.max_recv_sge })
                    } else {
                        match self.irdma_registry(recv_cq) {
                            Some(reg) => reg.post_recv(l.recv_id, wr.wr_id).map_err(|_| PostErrorKind::QueueFull),
                            None => Err(PostErrorKind::QueueFull),
                        }
                    }
                }
            };
            let wqe = match recorded {
                Ok(w) => w,
                Err(kind) => {
                    result = Err(post_err(i, kind, self.recv_errno(kind), "recv"));
                    break;
                }
            };
            self.flush[q].rq_uncovered += 1;
            if state == QpState::Error {
                self.flush_posted_recv(q, wqe, used_before);
                continue;
            }
            let sg = self.take_sg(wr.sg_list);
            self.qps[q].rq.push_back(Recv { wr_id: wr.wr_id, sg, wqe });
        }
        self.progress();
        result
    }

    pub(crate) fn post_srq_recv(&mut self, s: usize, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        let mut result = Ok(());
        for (i, wr) in wrs.iter().enumerate() {
            let max = self.srqs[s].max_sge;
            if wr.sg_list.len() > max as usize {
                let kind = PostErrorKind::TooManySge { num_sge: wr.sg_list.len(), max };
                result = Err(post_err(i, kind, EINVAL, "srq recv"));
                break;
            }
            let Some(idx) = self.srqs[s].take() else {
                result = Err(post_err(i, PostErrorKind::QueueFull, ENOMEM, "srq recv"));
                break;
            };
            let srqn = self.srqs[s].srqn;
            for k in 0..self.srqs[s].cqs.len() {
                let cq = self.srqs[s].cqs[k];
                if let Some(r) = self.mlx5_registry(cq).and_then(|r| r.srq_mut(srqn)) {
                    r.post(idx, wr.wr_id);
                }
            }
            let sg = self.take_sg(wr.sg_list);
            self.srqs[s].posted.push_back(Recv { wr_id: wr.wr_id, sg, wqe: idx });
        }
        self.progress();
        result
    }
}
