//! The rxe direct backend: dvcq reads the CQ ring that rdma_rxe maps to userspace, found
//! through rdma-core's private `struct rxe_cq` (layout per release in
//! `dvcq_uapi::rxe::cq_layout`) and checked against public facts first (`sys::rxe`).

use crate::device::rdma_core_release;
use crate::error::Error;
use crate::sys::cq::VerbsCq;
use dvcq_provider::{Completion, CqDriver};
use dvcq_rxe_dv::RxeCq;
use dvcq_uapi::rxe::{cq_layout::RXE_CQ_LAYOUTS, RxeCqLayout};
use std::sync::Arc;

/// The rxe poller and the CQ whose ring it reads. The poller is declared first, so it is
/// dropped before the CQ handle that keeps the ring mapped.
#[derive(Debug)]
pub(crate) struct RxeBackend {
    poller: RxeCq,
    cq: Arc<VerbsCq>,
}

impl RxeBackend {
    /// The CQ it polls.
    pub(crate) fn verbs_cq(&self) -> &Arc<VerbsCq> {
        &self.cq
    }

    /// Zero-copy views of the records published now ([`RxeCq::views`]).
    pub(crate) fn views(&mut self) -> dvcq_rxe_dv::Views<'_> {
        self.poller.views()
    }

    /// The most completions one poll call found waiting (producer minus consumer index).
    pub(crate) fn high_water(&self) -> u32 {
        self.poller.high_water()
    }

    /// Stores of the consumer index so far.
    pub(crate) fn consumer_writes(&self) -> u64 {
        self.poller.consumer_writes()
    }

    /// Up to `out.len()` completions from the ring, in order.
    #[inline]
    pub(crate) fn poll(&mut self, out: &mut [Completion]) -> usize {
        self.poller.poll(out)
    }
}

/// The release ranges the layout table covers, as `v44-v65`.
pub(crate) fn covered() -> String {
    RXE_CQ_LAYOUTS.iter().map(|l| format!("v{}-v{}", l.first_major, l.last_major)).collect::<Vec<_>>().join(", ")
}

/// Attaches the rxe poller to `cq`, served by `provider`.
pub(crate) fn attach(device: &str, provider: &str, cq: &Arc<VerbsCq>) -> Result<(RxeBackend, String), Error> {
    let refuse = |reason: String| Error::Attach { device: device.to_string(), backend: "rxe", reason };
    let Some(release) = rdma_core_release() else {
        return Err(refuse("the rdma-core release could not be read from the loaded libibverbs' file name".into()));
    };
    let Some(layout): Option<&RxeCqLayout> = RxeCqLayout::for_release(release.major) else {
        return Err(Error::UnknownRelease { device: device.to_string(), backend: "rxe", release, covered: covered() });
    };
    let (poller, why) = crate::sys::rxe::attach(cq, provider, layout).map_err(refuse)?;
    Ok((RxeBackend { poller, cq: Arc::clone(cq) }, why))
}
