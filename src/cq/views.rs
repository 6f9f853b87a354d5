//! Zero-copy views through the [`Cq`] API, on the backends where a walk over the ring can
//! consume entries without the poll's bookkeeping.
//!
//! Which backends have them, and why the others do not:
//!
//! - **rxe**: yes. The kernel retires the work requests and writes whole records; a walk
//!   consumes records exactly as a poll does ([`dvcq_rxe_dv::view`]).
//! - **mlx5 and irdma with rdma-core's posting** (attached CQs, model devices): no. Their
//!   polls retire work requests in the queues' wr_id tables and hand the tails back to the
//!   posting side; a raw walk would leave those queues full. Applications that post their
//!   own WQEs and keep their own wr_id tables have views on the vendor pollers
//!   (`dvcq::mlx5::Mlx5Cq::views`, `dvcq::irdma::IrdmaCq::views`).
//! - **generic**: no ring; `ibv_poll_cq` copies.
//!
//! A walk reads the ring only: a CQ in error is not an entry of it. [`Cq::error`] says
//! whether the CQ is (the poll's CQ error item, see [`Cq`], is for `Cq::poll`).

use super::Cq;
use dvcq_provider::Completion;
use std::marker::PhantomData;

/// A walk over the entries a CQ held when it began ([`Cq::views`]). Each
/// [`CqViews::next`] consumes one; the consumer index is stored when the walk is dropped.
#[derive(Debug)]
pub struct CqViews<'a> {
    inner: Inner<'a>,
}

#[derive(Debug)]
enum Inner<'a> {
    #[cfg(dvcq_rdma_core)]
    Rxe(dvcq_rxe_dv::Views<'a>),
    /// No backend of this build has views (the model-only build).
    #[allow(dead_code)]
    None(PhantomData<&'a mut ()>),
}

/// One entry of a [`CqViews`] walk, read field by field from the ring.
#[derive(Debug, Clone, Copy)]
pub struct CqeView<'a> {
    inner: ViewInner<'a>,
}

#[derive(Debug, Clone, Copy)]
enum ViewInner<'a> {
    #[cfg(dvcq_rdma_core)]
    Rxe(dvcq_rxe_dv::RecordView<'a>),
    #[allow(dead_code)]
    None(PhantomData<&'a ()>),
}

impl CqViews<'_> {
    /// The next entry, consumed; `None` at the end of the walk.
    #[allow(clippy::should_implement_trait)] // a lending iterator: the view borrows the walk
    pub fn next(&mut self) -> Option<CqeView<'_>> {
        match &mut self.inner {
            #[cfg(dvcq_rdma_core)]
            Inner::Rxe(v) => v.next().map(|r| CqeView { inner: ViewInner::Rxe(r) }),
            Inner::None(_) => None,
        }
    }

    /// Entries left in this walk.
    pub fn remaining(&self) -> u32 {
        match &self.inner {
            #[cfg(dvcq_rdma_core)]
            Inner::Rxe(v) => v.remaining(),
            Inner::None(_) => 0,
        }
    }
}

impl CqeView<'_> {
    /// `wr_id`.
    pub fn wr_id(&self) -> u64 {
        match &self.inner {
            #[cfg(dvcq_rdma_core)]
            ViewInner::Rxe(r) => r.wr_id(),
            ViewInner::None(_) => 0,
        }
    }

    /// `qp_num`.
    pub fn qp_num(&self) -> u32 {
        match &self.inner {
            #[cfg(dvcq_rdma_core)]
            ViewInner::Rxe(r) => r.qp_num(),
            ViewInner::None(_) => 0,
        }
    }

    /// `status`, as the libibverbs number the entry holds (raw: not checked).
    pub fn status(&self) -> u32 {
        match &self.inner {
            #[cfg(dvcq_rdma_core)]
            ViewInner::Rxe(r) => r.status(),
            ViewInner::None(_) => 0,
        }
    }

    /// `opcode`, as the libibverbs number the entry holds (raw: not checked).
    pub fn opcode(&self) -> u32 {
        match &self.inner {
            #[cfg(dvcq_rdma_core)]
            ViewInner::Rxe(r) => r.opcode(),
            ViewInner::None(_) => 0,
        }
    }

    /// `byte_len`.
    pub fn byte_len(&self) -> u32 {
        match &self.inner {
            #[cfg(dvcq_rdma_core)]
            ViewInner::Rxe(r) => r.byte_len(),
            ViewInner::None(_) => 0,
        }
    }

    /// The whole entry as the [`Completion`] a poll would have returned for it.
    pub fn completion(&self) -> Completion {
        match &self.inner {
            #[cfg(dvcq_rdma_core)]
            ViewInner::Rxe(r) => r.completion(),
            ViewInner::None(_) => Completion::default(),
        }
    }

    /// The vendor view underneath, for the fields only it has (rxe: every `ibv_wc` field).
    #[cfg(dvcq_rdma_core)]
    pub fn as_rxe(&self) -> Option<&dvcq_rxe_dv::RecordView<'_>> {
        match &self.inner {
            ViewInner::Rxe(r) => Some(r),
            ViewInner::None(_) => None,
        }
    }
}

impl Cq {
    /// Zero-copy views of the entries the CQ holds now, where its backend has them (rxe;
    /// see [`crate::cq::views`] for why the others do not): `None` otherwise. Entries a walk
    /// shows are consumed as by [`Cq::poll`]; [`Cq::stats`] counts poll calls only.
    pub fn views(&mut self) -> Option<CqViews<'_>> {
        #[cfg(dvcq_rdma_core)]
        if let super::Poller::Rxe(r) = &mut self.poller {
            return Some(CqViews { inner: Inner::Rxe(r.views()) });
        }
        None
    }
}
