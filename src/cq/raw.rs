//! The rdma-core CQ behind a [`Cq`], for programs that mix dvcq with their own verbs calls
//! (see `Context::as_raw`: the same rules hold).

use super::{Cq, Poller};
use core::ffi::c_void;
use core::ptr::NonNull;

impl Cq {
    /// The `struct ibv_cq` behind a CQ dvcq made (`Context::create_cq`), whichever backend
    /// polls it; `None` on a model, and for a CQ attached with `Cq::attach` on a direct
    /// backend (the program made that one and has its pointer).
    pub fn as_raw(&self) -> Option<NonNull<c_void>> {
        match &self.poller {
            Poller::Model(_) => None,
            Poller::Generic(g) => NonNull::new(g.verbs_cq().as_ptr().cast()),
            Poller::Rxe(r) => NonNull::new(r.verbs_cq().as_ptr().cast()),
            Poller::Mlx5(m) => m.verbs_cq().and_then(|v| NonNull::new(v.as_ptr().cast())),
            Poller::Irdma(m) => m.verbs_cq().and_then(|v| NonNull::new(v.as_ptr().cast())),
        }
    }
}
