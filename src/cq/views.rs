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

/// A walk over the entries a CQ held when it began ([`Cq::views`]). Each
/// [`CqViews::next`] consumes one; the consumer index is stored when the walk is dropped.
#[derive(Debug)]
pub struct CqViews<'a> {
    inner: dvcq_rxe_dv::Views<'a>,
}

/// One entry of a [`CqViews`] walk, read field by field from the ring.
#[derive(Debug, Clone, Copy)]
pub struct CqeView<'a> {
    inner: dvcq_rxe_dv::RecordView<'a>,
}

impl CqViews<'_> {
    /// The next entry, consumed; `None` at the end of the walk.
    #[allow(clippy::should_implement_trait)] // a lending iterator: the view borrows the walk
    pub fn next(&mut self) -> Option<CqeView<'_>> {
        self.inner.next().map(|inner| CqeView { inner })
    }

    /// Entries left in this walk.
    pub fn remaining(&self) -> u32 {
        self.inner.remaining()
    }
}

impl CqeView<'_> {
    /// `wr_id`.
    pub fn wr_id(&self) -> u64 {
        self.inner.wr_id()
    }

    /// `qp_num`.
    pub fn qp_num(&self) -> u32 {
        self.inner.qp_num()
    }

    /// `status`, as the libibverbs number the entry holds (raw: not checked).
    pub fn status(&self) -> u32 {
        self.inner.status()
    }

    /// `opcode`, as the libibverbs number the entry holds (raw: not checked).
    pub fn opcode(&self) -> u32 {
        self.inner.opcode()
    }

    /// `byte_len`.
    pub fn byte_len(&self) -> u32 {
        self.inner.byte_len()
    }

    /// The whole entry as the [`Completion`] a poll would have returned for it.
    pub fn completion(&self) -> Completion {
        self.inner.completion()
    }

    /// The vendor view underneath, for the fields only it has (rxe: every `ibv_wc` field).
    pub fn as_rxe(&self) -> Option<&dvcq_rxe_dv::RecordView<'_>> {
        Some(&self.inner)
    }
}

impl Cq {
    /// Zero-copy views of the entries the CQ holds now, where its backend has them (rxe;
    /// see [`crate::cq::views`] for why the others do not): `None` otherwise. Entries a walk
    /// shows are consumed as by [`Cq::poll`]; [`Cq::stats`] counts poll calls only.
    pub fn views(&mut self) -> Option<CqViews<'_>> {
        if let super::Poller::Rxe(r) = &mut self.poller {
            return Some(CqViews { inner: r.views() });
        }
        None
    }
}
