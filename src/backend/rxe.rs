//! The rxe direct backend: dvcq reads the CQ ring rdma_rxe maps to userspace.

use crate::error::Error;
use crate::sys::cq::VerbsCq;
use dvcq_provider::Completion;
use std::sync::Arc;

/// The rxe poller and the CQ whose ring it reads (kept alive while it reads).
#[derive(Debug)]
pub(crate) struct RxeBackend {
    cq: Arc<VerbsCq>,
}

impl RxeBackend {
    pub(crate) fn verbs_cq(&self) -> &Arc<VerbsCq> {
        &self.cq
    }

    #[inline]
    pub(crate) fn poll(&mut self, _out: &mut [Completion]) -> usize {
        0
    }
}

/// Attaches the rxe poller to `cq`.
pub(crate) fn attach(device: &str, _cq: &Arc<VerbsCq>) -> Result<(RxeBackend, String), Error> {
    Err(Error::Attach { device: device.to_string(), backend: "rxe", reason: "not yet".into() })
}
