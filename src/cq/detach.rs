//! Letting go of one QP, SRQ or receive WQ of an attached CQ, for an application that
//! destroys it while the CQ lives on (what a preload in front of `ibv_destroy_qp` and
//! `ibv_destroy_wq` needs). Like `attach.rs`, it reads the application's `struct ibv_qp`,
//! which only a caller can vouch for.
#![allow(unsafe_code)]

use crate::cq::{Cq, Poller};
use crate::sys::ffi;
use core::ffi::c_void;
use core::ptr::NonNull;

impl Cq {
    /// Stops following the QP `qp` that [`Cq::attach_qp`] named: the poller no longer reads
    /// its private tables, so the application may destroy it next. A CQE of that QP still
    /// in the ring then comes back as an `UnknownQp` fault item (on mlx5 rdma-core does not
    /// clean an attached CQ; on irdma the CQEs are cleared as `irdma_udestroy_qp` clears
    /// them). A QP this CQ never attached, or a backend that keeps no QP state (generic,
    /// rxe), is a no-op.
    ///
    /// # Safety
    ///
    /// `qp` points to a live `struct ibv_qp` (its number is read).
    pub unsafe fn detach_qp(&mut self, qp: NonNull<c_void>) {
        // SAFETY: the caller's live QP; a read of its public `qp_num`.
        let qpn = unsafe { (*qp.as_ptr().cast::<ffi::ibv_qp>()).qp_num };
        match &mut self.poller {
            Poller::Mlx5(m) => m.forget_qp(qpn),
            Poller::Irdma(m) => m.forget_qp(qpn),
            _ => {}
        }
    }

    /// Stops following the SRQ `srq` (attached with [`Cq::attach_srq`] or through a QP's
    /// [`Cq::attach_qp`]), so that the application may destroy it next. A no-op where the
    /// SRQ was not attached or the backend keeps no SRQ state.
    pub fn detach_srq(&mut self, srq: NonNull<c_void>) {
        if let Poller::Mlx5(m) = &mut self.poller {
            m.forget_srq(srq.as_ptr() as usize);
        }
    }
}

impl Cq {
    /// Stops following the receive WQ `wq` that [`Cq::attach_wq`] named, so that the
    /// application may destroy it next (`ibv_destroy_wq`). A CQE of that WQ still in the
    /// ring then comes back as an `UnknownQp` fault item, and a WQ made later may take its
    /// number. A no-op where the WQ was not attached or the backend keeps no WQ state.
    pub fn detach_wq(&mut self, wq: NonNull<c_void>) {
        if let Poller::Mlx5(m) = &mut self.poller {
            m.forget_rwq(wq.as_ptr() as usize);
        }
    }
}

impl Cq {
    /// Lets go of an attached CQ whose provider state is still rdma-core's truth (nothing
    /// consumed through dvcq, or only entries rdma-core's own poll consumed first, as a
    /// checker running behind it does): on the mlx5 direct backend the
    /// `MLX5_CQ_FLAGS_DV_OWNED` flag the attach set is cleared, so that rdma-core cleans the
    /// CQEs of destroyed QPs again. Elsewhere the same as dropping the `Cq`.
    pub fn give_back(mut self) {
        if let Poller::Mlx5(m) = &mut self.poller {
            m.give_cq_back();
        }
    }

    /// Lets go of an attached CQ dvcq has been polling, handing rdma-core the consumer index
    /// dvcq reached: on the mlx5 direct backend rdma-core's private `cons_index` is set to
    /// dvcq's counter (and `MLX5_CQ_FLAGS_DV_OWNED` cleared as [`Cq::give_back`] does), so
    /// that rdma-core's own `ibv_poll_cq`, `ibv_req_notify_cq` and `ibv_resize_cq` go on from
    /// the first entry dvcq did not take. The QPs' tails and SRQ lists are already
    /// rdma-core's, as every poll writes them back. Returns whether the CQ's consumer index
    /// was handed over; elsewhere (rxe, whose ring index rdma-core shares; irdma, whose
    /// ring state is not handed back) it is the same as dropping the `Cq` and returns
    /// `false`. No poll of the CQ may run meanwhile.
    pub fn hand_over(mut self) -> bool {
        match &mut self.poller {
            Poller::Mlx5(m) => m.hand_over(),
            _ => false,
        }
    }
}
