//! dvcq's own QPs on a CQ dvcq created on an irdma device (`Context::create_cq`,
//! `Pd::create_qp`): rdma-core QPs posted through rdma-core, so they are adopted exactly as
//! `Cq::attach_qp` adopts an application's (the private `struct irdma_uqp` read with the
//! release's layout and checked against the public `ibv_qp`, the CQ and its context), with
//! what the attach's contract leaves to the application done by dvcq itself, as on mlx5
//! (`backend::mlx5::own`):
//!
//! - **Posts are ordered with polls.** The poll reads rdma-core's tables and writes its
//!   tails; `Qp::post_send` / `post_recv` take the same lock as a poll call of each direct
//!   CQ that adopted the queue ([`OwnQps::lock`]), once per call, never per CQE.
//! - **A QP is forgotten before rdma-core frees it.** A new QP is queued for adoption under
//!   the lock at creation; the next poll call adopts it before reading any CQE. Dropping one
//!   queues its removal and destroys it with the lock held, so no poll runs while
//!   `irdma_udestroy_qp` cleans its CQEs out of the ring, and the next poll call removes it
//!   (walking the ring once more, as `IrdmaCq::unregister` does) before reading a CQE.
//!
//! SRQs: the irdma attach adopts none (`sys::irdma::read_qp` refuses a QP on an SRQ), so a
//! QP on an SRQ cannot be made on a direct irdma CQ.

use super::{PrivateCq, PrivateQp};
use dvcq_uapi::irdma::rdma_core::IrdmaLayout;
use std::sync::{Arc, Mutex, MutexGuard};

/// A change to a direct CQ's adopted QPs, applied by its next poll call.
#[derive(Debug)]
pub(crate) enum Change {
    /// A QP made on the CQ, read and checked.
    AddQp(Box<PrivateQp>),
    /// A QP about to be destroyed, by number.
    RemoveQp(u32),
}

/// What a direct irdma CQ dvcq made shares with the QPs made on it: what they are checked
/// against, and the lock that orders their posts with its polls.
#[derive(Debug)]
pub(crate) struct OwnQps {
    /// The CQ's private structs as the attach read and checked them (`sys::irdma::read_qp`
    /// checks a QP against them).
    pub(crate) cq: PrivateCq,
    /// The layout row of the release loaded, picked at the CQ's attach.
    pub(crate) layout: &'static IrdmaLayout,
    changes: Mutex<Vec<Change>>,
}

impl OwnQps {
    /// For the CQ `cq` describes, read with `layout`.
    pub(crate) fn new(cq: PrivateCq, layout: &'static IrdmaLayout) -> Arc<OwnQps> {
        Arc::new(OwnQps { cq, layout, changes: Mutex::new(Vec::new()) })
    }

    /// The lock a poll call of the CQ holds, and a post to a queue it adopted takes: the
    /// changes queued for the next poll. A holder that panicked left the list whole (only
    /// pushes and drains happen under it), so a poisoned lock is taken as it is.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Vec<Change>> {
        self.changes.lock().unwrap_or_else(|p| p.into_inner())
    }
}
