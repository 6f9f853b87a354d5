//! The rxe direct backend: dvcq reads the CQ ring that rdma_rxe maps to userspace, found
//! through rdma-core's private `struct rxe_cq` (layout per release in
//! `dvcq_uapi::rxe::cq_layout`) and checked against public facts first (`sys::rxe`).

use crate::error::Error;
use crate::sys::cq::VerbsCq;
use crate::sys::release::rdma_core_release;
use dvcq_provider::{Completion, CqDriver};
use dvcq_rxe_dv::{Failures, RxeCq};
use dvcq_uapi::rxe::{cq_layout::RXE_CQ_LAYOUTS, RxeCqLayout};
use std::sync::Arc;

/// The rxe poller and the CQ whose ring it reads. The poller is declared first, so it is
/// dropped before the CQ handle that keeps the ring mapped.
#[derive(Debug)]
pub(crate) struct RxeBackend {
    poller: RxeCq,
    cq: Arc<VerbsCq>,
    /// The high-water mark, consumer stores and failures of the pollers of queues a resize
    /// replaced (the failures boxed: 200 bytes read only by `Cq::stats`).
    before_resize: (u32, u64, Box<Failures>),
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
        self.poller.high_water().max(self.before_resize.0)
    }

    /// Stores of the consumer index so far.
    pub(crate) fn consumer_writes(&self) -> u64 {
        self.poller.consumer_writes() + self.before_resize.1
    }

    /// The failed completions and fault items returned so far, counted by the poller as it
    /// made them (the `Cq` handle does not scan this backend's batches).
    pub(crate) fn failures(&self) -> Failures {
        self.poller.failures().merged(&self.before_resize.2)
    }

    /// Up to `out.len()` completions from the ring, in order.
    #[inline]
    pub(crate) fn poll(&mut self, out: &mut [Completion]) -> usize {
        self.poller.poll(out)
    }

    /// True when a poll now would take nothing ([`dvcq_rxe_dv::RxeCq::idle`]).
    #[inline(always)]
    pub(crate) fn nothing_ready(&self) -> bool {
        self.poller.idle()
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
    Ok((RxeBackend { poller, cq: Arc::clone(cq), before_resize: (0, 0, Box::default()) }, why))
}

impl RxeBackend {
    /// `ibv_resize_cq` on an rxe CQ dvcq polls directly, and the reader moved to the new
    /// queue. Returns the call's outcome (the depth after), and the attach's: what was
    /// checked, or why the reader could not follow, in which case this backend must not
    /// poll again (the caller hands the CQ to rdma-core's poll).
    ///
    /// rdma-core's `rxe_resize_cq` (providers/rxe/rxe.c) has the kernel make a new queue
    /// (`rxe_queue_resize` in drivers/infiniband/sw/rxe/rxe_queue.c copies every record from
    /// the consumer index the queue holds up to the producer index into it, and refuses a
    /// size below that count), unmaps the old queue and maps the new one at a new address.
    /// dvcq's reader stores its consumer index after every poll that took records, so the
    /// kernel copies exactly the records not yet returned. The reader is then attached
    /// again, to the queue `struct rxe_cq` names now, whatever the call returned: a failed
    /// mapping leaves none, and the old one may be gone. The old reader is never used again
    /// (dropping it touches no queue memory).
    pub(crate) fn resize(&mut self, device: &str, depth: u32) -> (Result<u32, Error>, Result<String, String>) {
        let got = self.cq.resize(depth).map_err(|source| Error::Verbs { device: device.to_string(), source });
        let carried = (self.high_water(), self.consumer_writes(), Box::new(self.failures()));
        let after = match attach(device, "rxe", &self.cq) {
            Ok((b, why)) => {
                self.poller = b.poller;
                self.before_resize = carried;
                Ok(why)
            }
            Err(e) => Err(e.to_string()),
        };
        (got, after)
    }
}
