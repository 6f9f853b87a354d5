//! The irdma direct backend on a CQ rdma-core created (Intel E810 / X722 / GEN3): dvcq's
//! irdma poller on the ring rdma-core's irdma provider allocated, found through the
//! provider's private `struct irdma_ucq` (irdma has no direct-verbs API), and the QPs the
//! application names adopted with their rdma-core posting: the application keeps posting
//! with `ibv_post_send` / `ibv_post_recv`, and the poller mirrors rdma-core's private
//! `sq_wrtrk_array` / `rq_wrid_array` (`dvcq_e810_dv::ForeignQp`, read through
//! `sys::irdma::RdmaCoreQp`).
//!
//! Which layout: the rdma-core release of the libibverbs this process loaded, from the
//! library's real file name ([`crate::device::ChosenRelease`]). The irdma provider
//! (`libirdma-rdmav*.so`, whose name carries no release) is built from the same rdma-core
//! source package and installed with it, so that release is the provider's too (a
//! provider file that does carry a release must carry libibverbs'). A release outside the
//! table is refused. The backend's reason (`dvcq devices`) names the row, the release and
//! the file it was read from.
//!
//! Per poll call, never per CQE: if the CQE at the head is valid, copy the posts made since
//! the last call, poll, then store the QPs' tails (and a dropped push WQE) back where
//! rdma-core's post path reads them, and the CQ's head, tail and polarity where its
//! `ibv_poll_cq` and `ibv_destroy_qp`'s CQ clean-up read them.
//!
//! On a CQ dvcq made (`Context::create_cq`) the same attach runs, and the QPs dvcq makes
//! on it (`Pd::create_qp`) are adopted as an application's are ([`own`]).
//!
//! Known limits: QPs on SRQs are not adopted yet (GEN3); a CQE of a QP not adopted comes
//! back as an `UnknownQp` fault item; a flush CQE the poll is synthesising from when the
//! `Cq` is dropped is read again from the start by rdma-core's poll (dvcq does not rewrite
//! the CQE in place as rdma-core does; the tails it handed back are right, only the first
//! completion's specific status repeats). Arming goes through dvcq ([`crate::Cq::arm`] calls
//! `ibv_req_notify_cq` for an attached irdma CQ, whose arm carries no consumer index), and
//! a directly polled irdma CQ is never resized: [`crate::Cq::resize`] refuses it, and
//! `ibv_resize_cq` would move the ring under the poller.

use crate::error::Error;
use crate::sys::cq::VerbsCq;
use crate::sys::device::Context;
use crate::sys::irdma::{PrivateCq, PrivateQp, RdmaCoreCqState, RdmaCoreQp};
use crate::sys::release::Release;
use dvcq_e810_dv::{Compat, IrdmaCq, QpId, RegistryError};
use dvcq_provider::{Completion, KeepAlive};
use dvcq_uapi::irdma::rdma_core::{IrdmaLayout, IRDMA_LAYOUTS};
use own::OwnQps;
use std::sync::Arc;

pub(crate) mod own;

/// One adopted QP: its registry id, number, completion context and rdma-core's state.
#[derive(Debug)]
struct Adopted {
    id: QpId,
    qpn: u32,
    handle: u64,
    qp: RdmaCoreQp,
}

/// The irdma poller on an rdma-core CQ, with the QPs adopted so far. The poller is declared
/// first, so it is dropped before the CQ handle that keeps the ring alive.
#[derive(Debug)]
pub(crate) struct IrdmaBackend {
    poller: IrdmaCq,
    adopted: Vec<Adopted>,
    /// What the CQ's private structs said (what a QP is checked against).
    cq: PrivateCq,
    layout: &'static IrdmaLayout,
    /// rdma-core's copy of the consumer state, and what was last stored there.
    state: RdmaCoreCqState,
    stored: (u32, bool),
    /// The consumer counter at attach, and whether a refused QP may hand the CQ to the
    /// generic backend while none was consumed (`BackendChoice::Auto`).
    start_ci: u32,
    fallback: bool,
    verbs_cq: Option<Arc<VerbsCq>>,
    /// A CQ dvcq made: what the QPs dvcq makes on it share with it ([`own`]).
    own: Option<Arc<OwnQps>>,
    /// The first queued adoption that failed since [`IrdmaBackend::take_error`].
    own_error: Option<String>,
}

/// Every release range the private-layout table covers, as `(from, to)`: `v44.0`, `v47.9`.
pub(crate) fn layout_ranges() -> Vec<(String, String)> {
    IRDMA_LAYOUTS
        .iter()
        .map(|l| (format!("v{}.{}", l.first.0, l.first.1), format!("v{}.{}", l.last.0, l.last.1)))
        .collect()
}

/// The release ranges the layout table covers, as `v44.0-v47.9, v48.0-v63.1, ...`.
pub(crate) fn covered() -> String {
    layout_ranges().iter().map(|(a, b)| format!("{a}-{b}")).collect::<Vec<_>>().join(", ")
}

/// The layout row and poll behaviour for the rdma-core release loaded (`None`: not found
/// out), or why there is none.
pub(crate) fn layout_for(device: &str, release: Option<Release>) -> Result<(&'static IrdmaLayout, Compat), Error> {
    let Some(release) = release else {
        return Err(Error::Attach {
            device: device.to_string(),
            backend: "irdma",
            reason: "the rdma-core release could not be read from the loaded libibverbs' file name".into(),
        });
    };
    let unknown =
        || Error::UnknownRelease { device: device.to_string(), backend: "irdma", release, covered: covered() };
    let layout = IrdmaLayout::for_release(release.major).ok_or_else(unknown)?;
    // The release's poll, but not its connection-WQE skip: that bug reads an extended CQE's
    // second slot as a CQE, and a live poll keeps dvcq's whole-CQE skip (decoding an image
    // as a release reports it is what `ring decode --rdma-core` is for).
    let compat = Compat::for_release(release.major, release.minor).ok_or_else(unknown)?.without_conn_wqe_bug();
    Ok((layout, compat))
}

/// Attaches the irdma poller to `cq` of `ctx`. Returns the backend and a line saying what
/// was checked.
pub(crate) fn attach(device: &str, ctx: &Context, cq: &Arc<VerbsCq>) -> Result<(IrdmaBackend, String), Error> {
    let refuse = |reason: String| Error::Attach { device: device.to_string(), backend: "irdma", reason };
    let chosen = super::chosen_release(ctx).map_err(refuse)?;
    let (layout, compat) = layout_for(device, Some(chosen.release))?;
    let (private, state) = crate::sys::irdma::read_verbs_cq(ctx, cq, layout, compat).map_err(refuse)?;
    let keep: KeepAlive = cq.clone();
    let poller = crate::sys::irdma::poller_on(&private, Some(keep), compat).map_err(refuse)?;
    let why = format!(
        "dvcq parses the ring rdma-core's irdma provider allocated ({} CQEs of {} bytes, cq_id {:#x}, {:?}); QPs \
         named with Cq::attach_qp keep rdma-core's posting (layout row rdma-core v{}.{}-v{}.{} of struct \
         irdma_ucq/irdma_uqp, for rdma-core {} read from {})",
        private.entries,
        private.cqe_size,
        private.cq_id,
        private.hw_rev,
        layout.first.0,
        layout.first.1,
        layout.last.0,
        layout.last.1,
        chosen.release,
        chosen.from,
    );
    Ok((IrdmaBackend::new(poller, private, state, layout, Some(Arc::clone(cq))), why))
}

/// Attaches the irdma poller to `cq`, a CQ dvcq made, through the same reads and checks as
/// an application's CQ ([`attach`]); the QPs dvcq makes on it are adopted ([`own`]).
pub(crate) fn attach_created(device: &str, ctx: &Context, cq: &Arc<VerbsCq>) -> Result<(IrdmaBackend, String), Error> {
    let (mut backend, why) = attach(device, ctx, cq)?;
    backend.share_with_own_qps();
    let why = why.replace("QPs named with Cq::attach_qp keep", "dvcq's own QPs (Pd::create_qp) are adopted with");
    Ok((backend, why))
}

impl IrdmaBackend {
    /// The poller's failure counters and its shadow-area head writes.
    pub(crate) fn poller_stats(&self) -> (dvcq_e810_dv::PollStats, u64) {
        (self.poller.stats(), self.poller.head_writes())
    }

    /// The backend over `poller`, for the CQ `cq` describes, read with `layout`.
    pub(crate) fn new(
        poller: IrdmaCq,
        cq: PrivateCq,
        state: RdmaCoreCqState,
        layout: &'static IrdmaLayout,
        verbs_cq: Option<Arc<VerbsCq>>,
    ) -> Self {
        let start_ci = poller.ci();
        let stored = (poller.head(), poller.polarity());
        IrdmaBackend {
            poller,
            adopted: Vec::new(),
            cq,
            layout,
            state,
            stored,
            start_ci,
            fallback: false,
            verbs_cq,
            own: None,
            own_error: None,
        }
    }

    /// Makes the backend take dvcq's own QPs (a CQ dvcq made): returns what they share
    /// with it.
    pub(crate) fn share_with_own_qps(&mut self) -> Arc<OwnQps> {
        let own = OwnQps::new(self.cq, self.layout);
        self.own = Some(Arc::clone(&own));
        own
    }

    /// What dvcq's own QPs on this CQ share with it (a CQ dvcq made).
    pub(crate) fn own(&self) -> Option<&Arc<OwnQps>> {
        self.own.as_ref()
    }

    /// The first queued adoption that failed since the last call (see [`own`]).
    pub(crate) fn take_error(&mut self) -> Option<String> {
        self.own_error.take()
    }

    /// Stops mirroring QP `qpn` (being destroyed) and forgets it: its CQEs still in the
    /// ring are cleared as `irdma_udestroy_qp` clears them, and the other QPs' registry
    /// ids, which the removal shifts, are looked up again.
    pub(crate) fn forget_qp(&mut self, qpn: u32) {
        let Some(i) = self.adopted.iter().position(|a| a.qpn == qpn) else {
            return;
        };
        let gone = self.adopted.remove(i);
        self.poller.unregister(gone.handle);
        let qps = self.poller.qps();
        for a in &mut self.adopted {
            if let Some(id) = qps.find(a.handle) {
                a.id = QpId(id);
            }
        }
    }

    /// Lets a refused QP hand the CQ to the generic backend ([`IrdmaBackend::can_fall_back`]).
    pub(crate) fn allow_fallback(&mut self, allow: bool) {
        self.fallback = allow;
    }

    /// Whether rdma-core's own poll can take the CQ over: fallback allowed and no CQE
    /// consumed since the attach (nothing was written back).
    pub(crate) fn can_fall_back(&self) -> bool {
        self.fallback && self.poller.ci() == self.start_ci
    }

    /// The CQ it polls (none in image tests).
    pub(crate) fn verbs_cq(&self) -> Option<&Arc<VerbsCq>> {
        self.verbs_cq.as_ref()
    }

    /// What a QP must match, and the layout to read it with.
    pub(crate) fn expect(&self) -> (&PrivateCq, &'static IrdmaLayout) {
        (&self.cq, self.layout)
    }

    /// Registers a QP whose private structs were read and checked, taking over rdma-core's
    /// tables as they are. On error nothing is registered.
    pub(crate) fn adopt(&mut self, qp: PrivateQp) -> Result<(), String> {
        let qpn = qp.qpn;
        let id = self.poller.qps_mut().register(qp.handle, qp.config).map_err(|e| match e {
            RegistryError::Duplicate(_) => format!("qp {qpn:#x} is attached to this CQ already"),
            e => format!("qp {qpn:#x}: {e}"),
        })?;
        let adopted = self.poller.qp_mut(id).map(|q| q.adopt(&qp.qp));
        if let Some(Ok(())) = adopted {
            self.adopted.push(Adopted { id, qpn, handle: qp.handle, qp: qp.qp });
            return Ok(());
        }
        // The sizes were taken from the same struct, so this is not expected; undo.
        self.poller.qps_mut().unregister(qp.handle);
        Err(match adopted {
            Some(Err(e)) => format!("qp {qpn:#x}: {e}"),
            _ => format!("qp {qpn:#x}: not found in the registry just after registering it"),
        })
    }

    /// The QPs adopted, by number.
    #[allow(dead_code)] // tests and diagnostics
    pub(crate) fn qpns(&self) -> Vec<u32> {
        self.adopted.iter().map(|a| a.qpn).collect()
    }

    /// True when the CQE at the ring's head is not valid yet: a poll now would take
    /// nothing.
    #[inline(always)]
    pub(crate) fn nothing_ready(&self) -> bool {
        !self.poller.is_ready()
    }

    /// Up to `out.len()` completions, in order. On a CQ dvcq made, under the lock its QPs'
    /// posts take, after applying the adoptions and removals queued since the last call.
    #[inline]
    pub(crate) fn poll(&mut self, out: &mut [Completion]) -> usize {
        let Some(own) = self.own.take() else {
            return self.poll_adopted(out);
        };
        let mut changes = own.lock();
        if !changes.is_empty() {
            self.apply(&mut changes);
        }
        let n = self.poll_adopted(out);
        drop(changes);
        self.own = Some(own);
        n
    }

    #[inline]
    fn poll_adopted(&mut self, out: &mut [Completion]) -> usize {
        if out.is_empty() || !self.poller.is_ready() {
            return 0;
        }
        // The CQE at the head is visible (acquire), so are the posts it completes, and the
        // application posts only ordered with polls: copy everything posted so far.
        for a in &self.adopted {
            if let Some(q) = self.poller.qp_mut(a.id) {
                q.sync_posted(&a.qp);
            }
        }
        let n = self.poller.poll(out);
        for a in &self.adopted {
            if let Some(q) = self.poller.qp_mut(a.id) {
                q.hand_back(&a.qp);
            }
        }
        let now = (self.poller.head(), self.poller.polarity());
        if now != self.stored {
            self.state.store(now.0, now.1);
            self.stored = now;
        }
        n
    }
}
