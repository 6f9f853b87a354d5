//! A direct CQ dvcq made, as the QPs and SRQs dvcq makes on it see it (`sys::mlx5::own`,
//! `sys::irdma::own`): what they are read and checked against, and the lock that orders
//! their posts with its polls.

use std::sync::Arc;

/// A direct CQ dvcq made, as the QPs dvcq makes on it see it: what they are read and
/// checked against, and the lock that orders their posts with its polls.
#[derive(Clone, Debug)]
pub(crate) enum OwnCq {
    Mlx5(Arc<super::mlx5::own::OwnQps>),
    Irdma(Arc<super::irdma::own::OwnQps>),
}

/// A held [`OwnCq::lock`]: no poll call of that CQ runs while it lives. It holds the
/// changes the CQ's next poll call applies first.
#[derive(Debug)]
pub(crate) enum PollsWait<'a> {
    Mlx5(std::sync::MutexGuard<'a, Vec<super::mlx5::own::Change>>),
    Irdma(std::sync::MutexGuard<'a, Vec<super::irdma::own::Change>>),
}

impl PollsWait<'_> {
    /// Queues the removal of QP `qpn`, about to be destroyed.
    pub(crate) fn forget_qp(&mut self, qpn: u32) {
        match self {
            PollsWait::Mlx5(c) => c.push(super::mlx5::own::Change::RemoveQp(qpn)),
            PollsWait::Irdma(c) => c.push(super::irdma::own::Change::RemoveQp(qpn)),
        }
    }
}

impl OwnCq {
    /// The backend's name, for errors.
    pub(crate) fn backend(&self) -> &'static str {
        match self {
            OwnCq::Mlx5(_) => "mlx5",
            OwnCq::Irdma(_) => "irdma",
        }
    }

    /// Whether both name the same CQ.
    pub(crate) fn same(&self, other: &OwnCq) -> bool {
        match (self, other) {
            (OwnCq::Mlx5(a), OwnCq::Mlx5(b)) => Arc::ptr_eq(a, b),
            (OwnCq::Irdma(a), OwnCq::Irdma(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// The CQ's poll lock (see [`PollsWait`]).
    pub(crate) fn lock(&self) -> PollsWait<'_> {
        match self {
            OwnCq::Mlx5(o) => PollsWait::Mlx5(o.lock()),
            OwnCq::Irdma(o) => PollsWait::Irdma(o.lock()),
        }
    }

    /// An address that orders the CQs, so that locks on two are always taken in one order.
    fn order(&self) -> usize {
        match self {
            OwnCq::Mlx5(o) => Arc::as_ptr(o) as usize,
            OwnCq::Irdma(o) => Arc::as_ptr(o) as usize,
        }
    }

    /// The distinct direct CQs among a QP's send and receive CQs, in lock order.
    pub(crate) fn distinct(send: &Option<OwnCq>, recv: &Option<OwnCq>) -> Vec<OwnCq> {
        let mut v: Vec<OwnCq> = send.iter().cloned().collect();
        if let Some(r) = recv {
            if !v.iter().any(|s| s.same(r)) {
                v.push(r.clone());
            }
        }
        v.sort_by_key(OwnCq::order);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::{irdma, mlx5};
    use dvcq_uapi::irdma::rdma_core::IRDMA_LAYOUTS;
    use dvcq_uapi::mlx5::rdma_core::MLX5_LAYOUTS;

    fn mlx5() -> OwnCq {
        OwnCq::Mlx5(mlx5::own::OwnQps::new(0x10, 0x20, &MLX5_LAYOUTS[0], false))
    }

    fn irdma() -> OwnCq {
        let cq = crate::sys::irdma::PrivateCq {
            ctx: 0x10,
            cq: 0x20,
            ring: 0x1000,
            entries: 42,
            cqe_size: 32,
            shadow: 0x2000,
            cq_id: 1,
            head: 0,
            polarity: true,
            hw_rev: dvcq_uapi::irdma::HwRev::Gen2,
            features: 0,
            uk_attrs: 0x18,
            db: 0x3000,
            arm_db: 0x3040,
        };
        OwnCq::Irdma(irdma::own::OwnQps::new(cq, &IRDMA_LAYOUTS[0]))
    }

    #[test]
    fn a_qp_s_two_direct_cqs_are_counted_once_when_they_are_one_and_locked_in_one_order() {
        for make in [mlx5 as fn() -> OwnCq, irdma] {
            let (a, b) = (make(), make());
            assert_eq!(OwnCq::distinct(&Some(a.clone()), &Some(a.clone())).len(), 1);
            assert!(!a.same(&b) && !a.same(&irdma()) && !a.same(&mlx5()));
            let ab = OwnCq::distinct(&Some(a.clone()), &Some(b.clone()));
            let ba = OwnCq::distinct(&Some(b.clone()), &Some(a.clone()));
            assert_eq!(ab.len(), 2);
            assert!(ab[0].same(&ba[0]) && ab[1].same(&ba[1]), "send/recv or recv/send: the same lock order");
            assert_eq!(OwnCq::distinct(&None, &Some(a)).len(), 1);
            assert!(OwnCq::distinct(&None, &None).is_empty());
        }
    }

    #[test]
    fn a_drop_queues_the_qp_s_removal_on_the_cq_it_holds_the_lock_of() {
        let own = irdma();
        let OwnCq::Irdma(inner) = &own else { unreachable!() };
        own.lock().forget_qp(0x2b);
        assert!(matches!(inner.lock().as_slice(), [irdma::own::Change::RemoveQp(0x2b)]));
        assert_eq!(own.backend(), "irdma");
        assert_eq!(mlx5().backend(), "mlx5");
    }
}
