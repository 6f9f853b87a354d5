//! dvcq's own QPs and SRQs on a CQ dvcq created on an mlx5 device (`Context::create_cq`,
//! `Pd::create_qp`, `Pd::create_srq`): rdma-core QPs posted through rdma-core, so they are
//! adopted exactly as `Cq::attach_qp` adopts an application's (the private `struct
//! mlx5_qp` / `struct mlx5_srq` read with the release's layout and checked against
//! `mlx5dv_init_obj`), with what the attach's contract leaves to the application done by
//! dvcq itself:
//!
//! - **Posts are ordered with polls.** The poll reads rdma-core's tables and writes its
//!   tails; `Qp::post_send` / `post_recv` and `Srq::post_recv` take the same lock as a poll
//!   call of each direct CQ that adopted the queue ([`OwnQps::lock`]), once per call (a
//!   lock rdma-core's own post takes too), never per CQE.
//! - **A queue is forgotten before rdma-core frees it.** A new QP or SRQ is queued for
//!   adoption under the lock at creation (the CQ is borrowed then, not owned); the next
//!   poll call adopts it before reading any CQE. Dropping one queues its removal under the
//!   lock before `ibv_destroy_qp` / `ibv_destroy_srq`, and every poll call applies the
//!   queued changes first, so no poll touches a destroyed queue's memory.
//! - **An SRQ is adopted by one direct CQ**, whose poll gives its WQEs back to its free
//!   list (rdma-core does that under the SRQ's lock, which dvcq cannot take).

use super::{PrivateQp, PrivateSrq};
use crate::sys::ffi;
use dvcq_uapi::mlx5::rdma_core::Mlx5Layout;
use std::sync::{Arc, Mutex, MutexGuard};

/// A change to a direct CQ's adopted queues, applied by its next poll call.
#[derive(Debug)]
pub(crate) enum Change {
    /// A QP made on the CQ, read and checked.
    AddQp(PrivateQp),
    /// An SRQ (its `ibv_srq` address) one of them receives from.
    AddSrq(usize, PrivateSrq),
    /// A QP about to be destroyed, by number.
    RemoveQp(u32),
    /// An SRQ about to be destroyed, by `ibv_srq` address.
    RemoveSrq(usize),
}

/// What a direct CQ dvcq made shares with the QPs and SRQs made on it: what they are
/// checked against, and the lock that orders their posts with its polls.
#[derive(Debug)]
pub(crate) struct OwnQps {
    /// The `ibv_context` and `ibv_cq` (addresses), the layout row and the CQE version a
    /// QP is read and checked with (`sys::mlx5::read_qp`).
    pub(crate) ctx: usize,
    pub(crate) cq: usize,
    pub(crate) layout: &'static Mlx5Layout,
    pub(crate) cqe_v1: bool,
    changes: Mutex<Vec<Change>>,
}

impl OwnQps {
    /// For a CQ `cq` of context `ctx` (addresses) read with `layout`.
    pub(crate) fn new(ctx: usize, cq: usize, layout: &'static Mlx5Layout, cqe_v1: bool) -> Arc<OwnQps> {
        Arc::new(OwnQps { ctx, cq, layout, cqe_v1, changes: Mutex::new(Vec::new()) })
    }

    /// The lock a poll call of the CQ holds, and a post to a queue it adopted takes: the
    /// changes queued for the next poll. A holder that panicked left the list whole (only
    /// pushes and drains happen under it), so a poisoned lock is taken as it is.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Vec<Change>> {
        self.changes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues the removal of QP `qpn`, about to be destroyed (`sys::qp::Qp`'s drop queues
    /// it through [`crate::sys::own::PollsWait::forget_qp`], with the lock held across the
    /// destroy).
    #[cfg(test)]
    pub(crate) fn forget_qp(&self, qpn: u32) {
        self.lock().push(Change::RemoveQp(qpn));
    }

    /// Queues the removal of the SRQ at `srq`, about to be destroyed.
    pub(crate) fn forget_srq(&self, srq: *mut ffi::ibv_srq) {
        self.lock().push(Change::RemoveSrq(srq as usize));
    }
}

/// Who gives an SRQ dvcq made (`sys::qp::Srq`) its completed WQEs back: nobody yet,
/// rdma-core's poll (a QP on it receives on a CQ rdma-core polls), or one direct CQ. The two
/// must not mix: rdma-core frees WQEs under the SRQ's lock, which dvcq cannot take.
#[derive(Debug, Default)]
pub(crate) struct SrqOwner(Mutex<SrqUse>);

#[derive(Debug, Default)]
enum SrqUse {
    #[default]
    Unused,
    RdmaCore,
    Direct(Arc<OwnQps>),
}

/// Why a QP cannot receive from an SRQ another poller gives WQEs back to.
const SRQ_ON_RDMA_CORE: &str = "its SRQ also has QPs receiving on a CQ rdma-core polls, which frees its WQEs \
                                under a lock dvcq cannot take";
const SRQ_ON_OTHER_CQ: &str = "its SRQ completes on another direct CQ already";

impl SrqOwner {
    fn state(&self) -> MutexGuard<'_, SrqUse> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The direct CQ that adopted the SRQ, if one did.
    pub(crate) fn get(&self) -> Option<Arc<OwnQps>> {
        match &*self.state() {
            SrqUse::Direct(o) => Some(Arc::clone(o)),
            _ => None,
        }
    }

    /// Takes the direct owner out (the SRQ is being destroyed).
    pub(crate) fn take(&self) -> Option<Arc<OwnQps>> {
        match core::mem::take(&mut *self.state()) {
            SrqUse::Direct(o) => Some(o),
            _ => None,
        }
    }

    /// Whether the direct CQ `own` may adopt the SRQ: `Ok(true)` if it must (no one has),
    /// `Ok(false)` if it did already.
    pub(crate) fn check_direct(&self, own: &Arc<OwnQps>) -> Result<bool, &'static str> {
        match &*self.state() {
            SrqUse::Unused => Ok(true),
            SrqUse::Direct(o) if Arc::ptr_eq(o, own) => Ok(false),
            SrqUse::Direct(_) => Err(SRQ_ON_OTHER_CQ),
            SrqUse::RdmaCore => Err(SRQ_ON_RDMA_CORE),
        }
    }

    /// Makes `own` the owner, unless someone else became it since [`SrqOwner::check_direct`].
    pub(crate) fn claim_direct(&self, own: &Arc<OwnQps>) -> Result<(), &'static str> {
        let mut s = self.state();
        match &*s {
            SrqUse::Unused => {
                *s = SrqUse::Direct(Arc::clone(own));
                Ok(())
            }
            SrqUse::Direct(o) if Arc::ptr_eq(o, own) => Ok(()),
            SrqUse::Direct(_) => Err(SRQ_ON_OTHER_CQ),
            SrqUse::RdmaCore => Err(SRQ_ON_RDMA_CORE),
        }
    }

    /// Notes that a QP receives from the SRQ on a CQ rdma-core polls; refused when a direct
    /// CQ gives the SRQ's WQEs back.
    pub(crate) fn claim_for_rdma_core(&self) -> Result<(), &'static str> {
        let mut s = self.state();
        match &*s {
            SrqUse::Direct(_) => Err("its SRQ is polled by a direct CQ, which frees its WQEs without rdma-core's lock"),
            _ => {
                *s = SrqUse::RdmaCore;
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dvcq_uapi::mlx5::rdma_core::MLX5_LAYOUTS;

    fn own() -> Arc<OwnQps> {
        OwnQps::new(0x10, 0x20, &MLX5_LAYOUTS[0], false)
    }

    #[test]
    fn an_srq_is_given_back_by_one_direct_cq_or_by_rdma_core_never_both() {
        let (a, b) = (own(), own());
        let s = SrqOwner::default();
        assert_eq!(s.check_direct(&a), Ok(true), "nobody yet: adopt it");
        s.claim_direct(&a).unwrap();
        assert_eq!(s.check_direct(&a), Ok(false), "adopted already by this CQ");
        assert_eq!(s.check_direct(&b), Err(SRQ_ON_OTHER_CQ));
        assert_eq!(s.claim_direct(&b), Err(SRQ_ON_OTHER_CQ));
        assert!(s.claim_for_rdma_core().is_err(), "a QP on a generic CQ would free its WQEs too");
        assert!(s.take().is_some_and(|o| Arc::ptr_eq(&o, &a)));

        let s = SrqOwner::default();
        s.claim_for_rdma_core().unwrap();
        s.claim_for_rdma_core().unwrap();
        assert_eq!(s.check_direct(&a), Err(SRQ_ON_RDMA_CORE));
        assert_eq!(s.claim_direct(&a), Err(SRQ_ON_RDMA_CORE));
        assert!(s.get().is_none() && s.take().is_none());
    }
}
