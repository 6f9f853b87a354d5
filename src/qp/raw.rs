//! The rdma-core objects behind a QP and an SRQ, for programs that mix dvcq with their own
//! verbs calls (see the context's `as_raw`: the same rules hold).

use super::{Qp, QpInner, Srq, SrqInner};
use core::ffi::c_void;
use core::ptr::NonNull;

impl Qp {
    /// The `struct ibv_qp` behind it; `None` on a model.
    pub fn as_raw(&self) -> Option<NonNull<c_void>> {
        match &self.inner {
            QpInner::Model(_) => None,
            QpInner::Verbs(qp) => NonNull::new(qp.as_ptr().cast()),
        }
    }
}

impl Srq {
    /// The `struct ibv_srq` behind it; `None` on a model.
    pub fn as_raw(&self) -> Option<NonNull<c_void>> {
        match &self.inner {
            SrqInner::Model(_) => None,
            SrqInner::Verbs(srq) => NonNull::new(srq.as_ptr().cast()),
        }
    }
}
