//! The mlx5 direct backend on a CQ rdma-core created: dvcq's mlx5 poller on the ring
//! `mlx5dv_init_obj` reports (`struct mlx5dv_cq`, rdma-core `providers/mlx5/mlx5.c`
//! `mlx5dv_get_cq`), and the QPs the application names adopted with their rdma-core posting
//! (`struct mlx5dv_qp` from `mlx5dv_get_qp` lacks the private `wrid`, `wqe_head` and
//! `wr_data` of `providers/mlx5/mlx5.h` `struct mlx5_wq`): the application keeps posting with
//! `ibv_post_send` / `ibv_post_recv` / `ibv_wr_*`, and the poller mirrors rdma-core's
//! private wr_id tables (`dvcq_mlx5_dv::registry` adopt mode, read through
//! `sys::mlx5::RdmaCoreWq`).
//!
//! Per poll call, never per CQE: count the CQEs that are ready (owner check, acquire), copy
//! the table entries posted since the last call, poll at most that many completions (so
//! none comes from a CQE whose post was not yet visible), then store the tails back where
//! rdma-core's post path reads them.
//!
//! Inline scatter (on by default for rdma-core's RC QPs): the QPs' WQE buffers are
//! registered from `mlx5dv_qp`, and data lands in the application's memory regions it
//! names with `Cq::attach_mr` (a receive into memory not named completes with
//! `IBV_WC_LOC_PROT_ERR`, as the registry never writes outside a region).
//!
//! Receive WQs (`Cq::attach_wq`: `ibv_create_wq`, the queues an RSS QP spreads its receives
//! over) are adopted as a QP's receive queue is: rdma-core's `struct mlx5_rwq` holds a
//! `struct mlx5_wq` like a QP's (`sys::mlx5::read_rwq`), and CQEs name the WQ by its user
//! index (CQE version 1), which the registry finds it under (`Registry::add_rwq`).
//!
//! SRQs (`Cq::attach_srq`, or a QP's own SRQ through `Cq::attach_qp`) are adopted the same
//! way: their wr_id table is mirrored along the free list's links each poll call, and the
//! WQEs completed are given back to rdma-core's free list after the poll as the release's
//! `mlx5_free_srq_wqe` does (`sys::mlx5::RdmaCoreSrq`). Their receives take the poller's
//! slow path, which notes each WQE completed.
//!
//! Known limits: CQs rdma-core created are taken to be uncompressed and without
//! overrun-ignore (it polls neither compressed CQs nor records the flag publicly; a
//! compressed CQE comes back as a `BadFormat` fault item); tag-matching SRQs, XRC SRQs on
//! CQE-version-0 contexts and the WQE signature option are not adopted; a CQE of a
//! QP not adopted comes back as an `UnknownQp` fault item; a CQE rdma-core swallows
//! (SIG_ERR) inside a batch lets the poll read one CQE past those counted ready, whose
//! post the mirror may not have seen yet.
//!
//! # Arming, events and resizing
//!
//! [`Mlx5Backend::arm`] rings dvcq's own arm doorbell ([`dvcq_mlx5_dv::Mlx5Cq::arm`]): the
//! record's arm word with dvcq's consumer counter, then the UAR page `mlx5dv_init_obj`
//! reports, mapped as the MMIO register it is. rdma-core's `ibv_req_notify_cq` must not be
//! called on an attached CQ: its `mlx5_arm_cq` sends rdma-core's `cons_index`, which dvcq's
//! poll never advances (`providers/mlx5/cq.c` `mlx5_arm_cq` reads `cq->cons_index`), and the
//! device would fire at once for CQEs consumed long ago (an inference: the arm word carries
//! that index, and the device compares it with its own producer index). The sequence number
//! comes from rdma-core's own `arm_sn` (`crate::sys::mlx5::RdmaCoreCq` says why): events are
//! read with `ibv_get_cq_event` (dvcq's [`crate::CompletionChannel`] adopted with
//! `CompletionChannel::from_raw` and [`crate::Cq::bind_channel`], or the application's own
//! loop), which advances it.
//!
//! [`crate::Cq::resize`] refuses a directly polled mlx5 CQ, and rdma-core's `ibv_resize_cq`
//! must not be called on one either: `mlx5_resize_cq` copies the CQEs from rdma-core's stale `cons_index` on (so it
//! copies consumed ones and may refuse with slots it thinks the device owns), and the ring
//! dvcq polls (`mlx5dv_cq.buf`, `cqe_cnt`) is freed and replaced under it. A CQ that must
//! grow is made anew, or handed back first with [`crate::Cq::hand_over`] (rdma-core's
//! `cons_index` set to dvcq's counter), resized by rdma-core and attached again: the attach
//! publishes the RESIZE CQE rdma-core consumed (`RdmaCoreCq::publish_resize`).

pub(crate) mod own;

use crate::error::Error;
use crate::sys::cq::VerbsCq;
use crate::sys::device::Context;
pub(crate) use crate::sys::mlx5::ring::{Created, Ring};
use crate::sys::mlx5::{PrivateQp, PrivateRwq, PrivateSrq, RdmaCoreCq, RdmaCoreSrq, RdmaCoreWq};
use crate::sys::release::Release;
use dvcq_mlx5_dv::{Mlx5Cq, QpConfig};
use dvcq_provider::Completion;
use dvcq_uapi::mlx5::rdma_core::{Mlx5Layout, MLX5_LAYOUTS};
use own::OwnQps;
use std::sync::Arc;

/// One adopted QP: its number and rdma-core's queues that complete here.
#[derive(Debug)]
struct Adopted {
    qpn: u32,
    qp: PrivateQp,
}

/// One adopted SRQ: its `ibv_srq` (address), number, and rdma-core's struct.
#[derive(Debug)]
struct AdoptedSrq {
    ptr: usize,
    srqn: u32,
    srq: RdmaCoreSrq,
}

/// One adopted receive WQ: its `ibv_wq` (address), number, and rdma-core's queue.
#[derive(Debug)]
struct AdoptedRwq {
    ptr: usize,
    wqn: u32,
    rq: RdmaCoreWq,
}

/// The mlx5 poller on an rdma-core CQ, with the QPs adopted so far. The poller is
/// declared first, so it is dropped before the CQ handle that keeps the ring alive.
#[derive(Debug)]
pub(crate) struct Mlx5Backend {
    poller: Ring,
    adopted: Vec<Adopted>,
    srqs: Vec<AdoptedSrq>,
    rwqs: Vec<AdoptedRwq>,
    /// The `ibv_context` and `ibv_cq` a QP must belong to (addresses, for the checks).
    ctx: usize,
    cq: usize,
    layout: &'static Mlx5Layout,
    cqe_v1: bool,
    /// The consumer counter at attach, and whether a refused QP may hand the CQ to the
    /// generic backend while none was consumed (`BackendChoice::Auto`).
    start_ci: u32,
    fallback: bool,
    verbs_cq: Option<Arc<VerbsCq>>,
    /// rdma-core's `struct mlx5_cq`, whose `arm_sn` each arm reads.
    rdma_core_cq: Option<RdmaCoreCq>,
    /// A CQ dvcq made: what the QPs and SRQs dvcq makes on it share with it (`own`).
    own: Option<Arc<OwnQps>>,
    /// The first queued change that could not be applied.
    own_error: Option<String>,
}

/// Every release range the private-layout table covers, as `(from, to)`: `v44.0`, `v44.12`.
pub(crate) fn layout_ranges() -> Vec<(String, String)> {
    MLX5_LAYOUTS
        .iter()
        .map(|l| (format!("v{}.{}", l.first.0, l.first.1), format!("v{}.{}", l.last.0, l.last.1)))
        .collect()
}

/// The release ranges the layout table covers, as `v44.0-v44.12, v45.0-v63.1, ...`.
pub(crate) fn covered() -> String {
    layout_ranges().iter().map(|(a, b)| format!("{a}-{b}")).collect::<Vec<_>>().join(", ")
}

/// The layout row for the rdma-core release loaded (`None`: not found out), or why there
/// is none.
pub(crate) fn layout_for(device: &str, release: Option<Release>) -> Result<&'static Mlx5Layout, Error> {
    let Some(release) = release else {
        return Err(Error::Attach {
            device: device.to_string(),
            backend: "mlx5",
            reason: "the rdma-core release could not be read from the loaded libibverbs' file name".into(),
        });
    };
    Mlx5Layout::for_release(release.major).ok_or_else(|| Error::UnknownRelease {
        device: device.to_string(),
        backend: "mlx5",
        release,
        covered: covered(),
    })
}

/// Attaches the mlx5 poller to `cq` of `ctx`, an application's CQ. Returns the backend
/// and a line saying what was checked.
pub(crate) fn attach(device: &str, ctx: &Context, cq: &Arc<VerbsCq>) -> Result<(Mlx5Backend, String), Error> {
    attach_as(device, ctx, cq, None)
}

/// Attaches the mlx5 poller to `cq`, a CQ dvcq made as `created` says: the poller knows
/// its format, and the QPs and SRQs dvcq makes on it are adopted (`own`).
pub(crate) fn attach_created(
    device: &str,
    ctx: &Context,
    cq: &Arc<VerbsCq>,
    created: Created,
) -> Result<(Mlx5Backend, String), Error> {
    let (mut backend, why) = attach_as(device, ctx, cq, Some(created))?;
    backend.share_with_own_qps();
    let why = why.replace(
        "QPs named with Cq::attach_qp keep",
        "dvcq's own QPs and SRQs (Pd::create_qp, Pd::create_srq) are adopted with",
    );
    Ok((backend, why))
}

fn attach_as(
    device: &str,
    ctx: &Context,
    cq: &Arc<VerbsCq>,
    created: Option<Created>,
) -> Result<(Mlx5Backend, String), Error> {
    let refuse = |reason: String| Error::Attach { device: device.to_string(), backend: "mlx5", reason };
    let chosen = super::chosen_release(ctx).map_err(refuse)?;
    let layout = layout_for(device, Some(chosen.release))?;
    let cqe_v1 = crate::sys::mlx5::cqe_version_1(ctx).map_err(refuse)?;
    let opened = crate::sys::mlx5::attach_verbs_cq(cq, layout, cqe_v1, created);
    let (poller, private, dv) = opened.map_err(refuse)?;
    let why = format!(
        "dvcq parses the ring mlx5dv_init_obj reports ({} CQEs of {} bytes, cqn {:#x}, CQE version {}); QPs named with \
         Cq::attach_qp keep rdma-core's posting (layout row rdma-core v{}.{}-v{}.{} of struct mlx5_qp and mlx5_cq, for \
         rdma-core {} read from {})",
        dv.cqe_cnt,
        dv.cqe_size,
        dv.cqn,
        u8::from(cqe_v1),
        layout.first.0,
        layout.first.1,
        layout.last.0,
        layout.last.1,
        chosen.release,
        chosen.from,
    );
    let mut backend =
        Mlx5Backend::new(poller, ctx.as_ptr() as usize, cq.as_ptr() as usize, layout, cqe_v1, Some(Arc::clone(cq)));
    backend.set_rdma_core_cq(private);
    Ok((backend, why))
}

impl Mlx5Backend {
    /// The backend over `poller`, for QPs of context `ctx` completing on CQ `cq`
    /// (addresses), read with `layout`.
    pub(crate) fn new(
        poller: Ring,
        ctx: usize,
        cq: usize,
        layout: &'static Mlx5Layout,
        cqe_v1: bool,
        verbs_cq: Option<Arc<VerbsCq>>,
    ) -> Self {
        let start_ci = match &poller {
            Ring::C64(c) => c.ci(),
            Ring::C128(c) => c.ci(),
        };
        Mlx5Backend {
            poller,
            adopted: Vec::new(),
            srqs: Vec::new(),
            rwqs: Vec::new(),
            ctx,
            cq,
            layout,
            cqe_v1,
            start_ci,
            fallback: false,
            verbs_cq,
            rdma_core_cq: None,
            own: None,
            own_error: None,
        }
    }

    /// Hands over rdma-core's `struct mlx5_cq` of the CQ (read and checked), whose
    /// `arm_sn` each arm then reads.
    pub(crate) fn set_rdma_core_cq(&mut self, cq: RdmaCoreCq) {
        self.rdma_core_cq = Some(cq);
    }

    /// Before rdma-core's `ibv_poll_cq` takes the CQ over (a refused adoption with
    /// [`Mlx5Backend::can_fall_back`]): clears `MLX5_CQ_FLAGS_DV_OWNED` again if the attach
    /// set it, so rdma-core cleans the CQEs of destroyed QPs as before. Returns whether it
    /// did.
    /// Hands the CQ to rdma-core with dvcq's consumer counter as its `cons_index` (and the
    /// `MLX5_CQ_FLAGS_DV_OWNED` flag of the attach cleared): rdma-core's poll, arm and resize
    /// go on from the next entry. Returns whether rdma-core's CQ was written.
    pub(crate) fn hand_over(&mut self) -> bool {
        let ci = self.ci();
        self.rdma_core_cq.as_mut().is_some_and(|r| {
            let wrote = r.set_cons_index(ci);
            r.give_back();
            wrote
        })
    }

    pub(crate) fn give_cq_back(&mut self) -> bool {
        self.rdma_core_cq.as_mut().is_some_and(RdmaCoreCq::give_back)
    }

    /// Lets a refused QP hand the CQ to the generic backend ([`Mlx5Backend::can_fall_back`]).
    pub(crate) fn allow_fallback(&mut self, allow: bool) {
        self.fallback = allow;
    }

    /// Whether rdma-core's own poll can take the CQ over: fallback allowed and no CQE
    /// consumed since the attach (rdma-core's private consumer index is still right, and
    /// no tail was written back).
    pub(crate) fn can_fall_back(&self) -> bool {
        self.fallback && self.ci() == self.start_ci
    }

    /// The CQ it polls (none in image tests).
    pub(crate) fn verbs_cq(&self) -> Option<&Arc<VerbsCq>> {
        self.verbs_cq.as_ref()
    }

    /// Makes the backend take dvcq's own QPs and SRQs (a CQ dvcq made): returns what they
    /// share with it.
    pub(crate) fn share_with_own_qps(&mut self) -> Arc<OwnQps> {
        let own = OwnQps::new(self.ctx, self.cq, self.layout, self.cqe_v1);
        self.own = Some(Arc::clone(&own));
        own
    }

    /// What dvcq's own QPs and SRQs on this CQ share with it (a CQ dvcq made).
    pub(crate) fn own(&self) -> Option<&Arc<OwnQps>> {
        self.own.as_ref()
    }

    /// The first queued adoption that failed since the last call (see [`own`]).
    pub(crate) fn take_error(&mut self) -> Option<String> {
        self.own_error.take()
    }

    /// Stops mirroring QP `qpn` (about to be destroyed) and forgets it.
    pub(crate) fn forget_qp(&mut self, qpn: u32) {
        self.adopted.retain(|a| a.qpn != qpn);
        match &mut self.poller {
            Ring::C64(c) => c.remove_qp(qpn),
            Ring::C128(c) => c.remove_qp(qpn),
        };
    }

    /// Stops mirroring the receive WQ at `ptr` (an `ibv_wq` address, about to be destroyed)
    /// and forgets it: a CQE still naming it comes back as an unknown-QP fault item. A WQ
    /// this CQ never adopted is a no-op.
    pub(crate) fn forget_rwq(&mut self, ptr: usize) {
        if let Some(i) = self.rwqs.iter().position(|r| r.ptr == ptr) {
            let r = self.rwqs.remove(i);
            match &mut self.poller {
                Ring::C64(c) => c.remove_rwq(r.wqn),
                Ring::C128(c) => c.remove_rwq(r.wqn),
            };
        }
    }

    /// Stops mirroring the SRQ at `ptr` (about to be destroyed) and forgets it.
    pub(crate) fn forget_srq(&mut self, ptr: usize) {
        if let Some(i) = self.srqs.iter().position(|s| s.ptr == ptr) {
            let s = self.srqs.remove(i);
            self.registry_mut().remove_srq(s.srqn);
        }
    }

    /// What a QP must match: its context, this CQ, the layout row and the CQE version.
    pub(crate) fn expect(&self) -> (usize, usize, &'static Mlx5Layout, bool) {
        (self.ctx, self.cq, self.layout, self.cqe_v1)
    }

    /// Registers a QP whose private struct was read and checked, taking over rdma-core's
    /// tables as they are. On error nothing is registered.
    pub(crate) fn adopt(&mut self, qp: PrivateQp) -> Result<(), String> {
        let (sq_cnt, rq_cnt) = qp.wqe_cnt;
        let qpn = qp.qpn;
        let qp_type = dvcq_mlx5_dv::QpType::from_ibv(qp.qp_type)
            .ok_or_else(|| format!("qp {qpn:#x}: qp_type {} is not one libibverbs defines", qp.qp_type))?;
        let srqn = match qp.srq {
            None => None,
            Some(ptr) => match self.srq_adopted(ptr) {
                Some(n) => Some(n),
                None => return Err(format!("qp {qpn:#x}: its SRQ ({ptr:#x}) is not attached to this CQ")),
            },
        };
        let cfg = QpConfig {
            // A queue rdma-core left empty still needs a one-entry table here.
            sq_wqe_cnt: sq_cnt.max(1),
            rq_wqe_cnt: rq_cnt.max(1),
            srqn,
            qp_type,
            uidx: self.cqe_v1.then_some(qp.rsn),
            ..QpConfig::rc(qp.qpn, 1, 1)
        };
        let registry = self.registry_mut();
        if registry.qp(qpn).is_some() {
            return Err(format!("qp {qpn:#x} is attached to this CQ already"));
        }
        let entry = registry.add_qp(cfg).map_err(|e| format!("qp {qpn:#x}: {e}"))?;
        // The sizes were taken from the same queues: adopting cannot be refused.
        if let Some(sq) = &qp.sq {
            entry.sq.adopt(sq).map_err(|e| format!("qp {qpn:#x}: {e}"))?;
        }
        if let Some(rq) = &qp.rq {
            entry.rq.adopt(rq).map_err(|e| format!("qp {qpn:#x}: {e}"))?;
        }
        // Inline scatter: rdma-core's RC QPs have it on (`providers/mlx5/verbs.c`
        // `create_qp`, `MLX5_QP_FLAG_SCATTER_CQE`), so register the WQEs its data segments
        // are read from. The sizes were checked against the queues: registering cannot be
        // refused either.
        if let Some((buf, stride)) = qp.rq_wqes.clone() {
            registry.set_recv_wqes(qpn, buf, stride, false).map_err(|e| format!("qp {qpn:#x}: {e}"))?;
        }
        if let Some(buf) = qp.sq_wqes.clone() {
            registry.set_send_wqes(qpn, buf).map_err(|e| format!("qp {qpn:#x}: {e}"))?;
        }
        // Kept in QPN order: a poll finds a CQE's QP by a binary search.
        let at = self.adopted.partition_point(|a| a.qpn < qpn);
        self.adopted.insert(at, Adopted { qpn, qp });
        Ok(())
    }

    /// Whether QP `qpn` is adopted here.
    pub(crate) fn has_qp(&self, qpn: u32) -> bool {
        self.adopted.binary_search_by_key(&qpn, |a| a.qpn).is_ok()
    }

    /// The number of the SRQ at `ptr` (an `ibv_srq` address) if it is adopted here.
    pub(crate) fn srq_adopted(&self, ptr: usize) -> Option<u32> {
        self.srqs.iter().find(|s| s.ptr == ptr).map(|s| s.srqn)
    }

    /// Registers an SRQ (at `ptr`) whose private struct was read and checked, taking over
    /// rdma-core's wr_id table and free-list head as they are; its completed WQEs go back
    /// to rdma-core's free list after each poll. On error nothing is registered.
    pub(crate) fn adopt_srq(&mut self, ptr: usize, srq: PrivateSrq) -> Result<u32, String> {
        let PrivateSrq { srqn, max, stride, srq, wqes, xrc_uidx } = srq;
        if self.srq_adopted(ptr).is_some() {
            return Err(format!("srq {srqn:#x} is attached to this CQ already"));
        }
        if xrc_uidx.is_some() && !self.cqe_v1 {
            return Err(format!("srq {srqn:#x}: the CQ's context has CQEs of version 0, which cannot name an XRC SRQ"));
        }
        let registry = self.registry_mut();
        // An XRC SRQ is found by the user index its CQEs carry, a basic one through its QPs.
        match xrc_uidx {
            Some(uidx) => registry.add_xrc_srq(srqn, uidx, max),
            None => registry.add_srq(srqn, max),
        }
        .map_err(|e| format!("srq {srqn:#x}: {e}"))?;
        // The size was taken from the same struct: adopting cannot be refused, nor can
        // registering the WQEs checked against it (a stride of at least 32 bytes).
        registry.adopt_srq(srqn, &srq).map_err(|e| format!("srq {srqn:#x}: {e}"))?;
        registry.set_srq_wqes(srqn, wqes, stride).map_err(|e| format!("srq {srqn:#x}: {e}"))?;
        self.srqs.push(AdoptedSrq { ptr, srqn, srq });
        Ok(srqn)
    }

    /// Registers a receive WQ (at `ptr`, an `ibv_wq` address) whose private struct was
    /// read and checked, under its number and user index, taking over rdma-core's wr_id
    /// table, head and tail as they are; its tail is written back after each poll as
    /// rdma-core's poll does. On error nothing is registered.
    pub(crate) fn adopt_rwq(&mut self, ptr: usize, rwq: PrivateRwq) -> Result<(), String> {
        let PrivateRwq { wqn, uidx, wqe_cnt, rq } = rwq;
        if self.rwqs.iter().any(|r| r.ptr == ptr || r.wqn == wqn) {
            return Err(format!("wq {wqn:#x} is attached to this CQ already"));
        }
        if !self.cqe_v1 {
            return Err(format!("wq {wqn:#x}: the CQ's context has CQEs of version 0, which cannot name a WQ"));
        }
        let entry = self.registry_mut().add_rwq(wqn, uidx, wqe_cnt).map_err(|e| format!("wq {wqn:#x}: {e}"))?;
        // The size was taken from the same queue: adopting cannot be refused.
        entry.adopt(&rq).map_err(|e| format!("wq {wqn:#x}: {e}"))?;
        self.rwqs.push(AdoptedRwq { ptr, wqn, rq });
        Ok(())
    }

    /// The receive WQs adopted, by number.
    #[allow(dead_code)] // tests and diagnostics
    pub(crate) fn wqns(&self) -> Vec<u32> {
        self.rwqs.iter().map(|r| r.wqn).collect()
    }

    /// Adds memory inline scatter may copy into (an application's `ibv_mr`).
    pub(crate) fn add_region(&mut self, region: dvcq_provider::MemoryRegion) -> Result<(), String> {
        self.registry_mut().add_memory_region(region).map_err(|e| e.to_string())
    }

    fn registry_mut(&mut self) -> &mut dvcq_mlx5_dv::Registry {
        match &mut self.poller {
            Ring::C64(c) => c.registry_mut(),
            Ring::C128(c) => c.registry_mut(),
        }
    }

    /// True when a poll now would take nothing ([`Mlx5Cq::idle`]): the mirrors, the queued
    /// adoptions and the write-backs can wait for one that will.
    #[inline(always)]
    pub(crate) fn nothing_ready(&self) -> bool {
        match &self.poller {
            Ring::C64(c) => c.idle(),
            Ring::C128(c) => c.idle(),
        }
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
        match &mut self.poller {
            Ring::C64(c) => poll_adopted(c, &self.adopted, &self.srqs, &self.rwqs, out),
            Ring::C128(c) => poll_adopted(c, &self.adopted, &self.srqs, &self.rwqs, out),
        }
    }

    /// Requests one completion event through dvcq's own arm doorbell, with rdma-core's
    /// `arm_sn` as the sequence number (module docs). Returns what was rung.
    pub(crate) fn arm(&mut self, solicited: bool) -> Result<dvcq_mlx5_dv::ArmRing, String> {
        let sn = self.rdma_core_cq.as_ref().map(RdmaCoreCq::arm_sn);
        let r = match &mut self.poller {
            Ring::C64(c) => {
                sn.into_iter().for_each(|sn| c.set_arm_sn(sn));
                c.arm(solicited)
            }
            Ring::C128(c) => {
                sn.into_iter().for_each(|sn| c.set_arm_sn(sn));
                c.arm(solicited)
            }
        };
        r.map_err(|e| e.to_string())
    }

    /// The ring as a ring image whose decoding replays the CQEs already polled that are still
    /// in the ring, then those waiting (counted by their ownership bits).
    pub(crate) fn ring_image(&self) -> String {
        fn image<const S: usize>(c: &Mlx5Cq<S>) -> String {
            let entries = dvcq_provider::CqDriver::info(c).entries;
            let waiting = c.ready(entries as usize) as u32;
            let back = (entries - waiting).min(c.ci());
            c.ring_image(c.ci().wrapping_sub(back)).to_text()
        }
        match &self.poller {
            Ring::C64(c) => image(c),
            Ring::C128(c) => image(c),
        }
    }

    /// The poller's own counters (compression sessions, doorbell writes, ...).
    pub(crate) fn poller_stats(&self) -> dvcq_mlx5_dv::CqStats {
        match &self.poller {
            Ring::C64(c) => c.stats(),
            Ring::C128(c) => c.stats(),
        }
    }

    /// The running consumer counter.
    pub(crate) fn ci(&self) -> u32 {
        match &self.poller {
            Ring::C64(c) => c.ci(),
            Ring::C128(c) => c.ci(),
        }
    }
}

/// Adopted QPs up to this many are all brought up to date around every poll call that
/// finds CQEs; beyond it only those whose CQEs the call takes (found by a look at the
/// ready CQEs first), so that a poll's cost does not grow with the QPs sharing the CQ: 1024
/// QPs cost 2.1 us a completion the first way, on the emulated ConnectX.
const MIRROR_ALL_UP_TO: usize = 8;

/// The adopted QP `qpn` (`adopted` is in QPN order).
#[inline]
fn adopted_qp(adopted: &[Adopted], qpn: u32) -> Option<&Adopted> {
    adopted.binary_search_by_key(&qpn, |a| a.qpn).ok().map(|i| &adopted[i])
}

/// Copies what rdma-core posted on `a` since the last copy into its mirror.
#[inline]
fn sync_qp(registry: &mut dvcq_mlx5_dv::Registry, a: &Adopted) {
    if let Some(q) = registry.qp_mut(a.qpn) {
        if let Some(sq) = &a.qp.sq {
            q.sq.sync_posted(sq);
        }
        if let Some(rq) = &a.qp.rq {
            q.rq.sync_posted(rq);
        }
    }
}

/// Stores `a`'s mirrored tails back in rdma-core's queues.
#[inline]
fn hand_back_qp(registry: &dvcq_mlx5_dv::Registry, a: &Adopted) {
    if let Some(q) = registry.qp(a.qpn) {
        if let Some(sq) = &a.qp.sq {
            q.sq.hand_back_tail(sq);
        }
        if let Some(rq) = &a.qp.rq {
            q.rq.hand_back_tail(rq);
        }
    }
}

/// One poll call on `cq` with the mirrors of `adopted`, `srqs` and `rwqs` brought up to
/// date around it.
#[inline]
fn poll_adopted<const S: usize>(
    cq: &mut Mlx5Cq<S>,
    adopted: &[Adopted],
    srqs: &[AdoptedSrq],
    rwqs: &[AdoptedRwq],
    out: &mut [Completion],
) -> usize {
    // Many QPs: the QP numbers of the CQEs this call will take, kept in `out` (which the
    // poll overwrites) so that nothing is allocated.
    let peeked = if adopted.len() > MIRROR_ALL_UP_TO {
        let mut i = 0;
        let slots = &mut *out;
        cq.ready_qpns(slots.len(), |qpn| {
            slots[i].qp_num = qpn;
            i += 1;
        })
    } else {
        None
    };
    let ready = match peeked {
        Some(n) => n,
        None => cq.ready(out.len()),
    };
    if ready == 0 {
        return 0;
    }
    // The CQEs counted are visible (acquire), so are the posts they complete: copy them.
    let registry = cq.registry_mut();
    match peeked {
        Some(_) => {
            let mut last = None;
            for c in &out[..ready] {
                if last != Some(c.qp_num) {
                    last = Some(c.qp_num);
                    adopted_qp(adopted, c.qp_num).into_iter().for_each(|a| sync_qp(registry, a));
                }
            }
        }
        None => adopted.iter().for_each(|a| sync_qp(registry, a)),
    }
    for s in srqs {
        if let Some(m) = registry.srq_mut(s.srqn) {
            m.sync_posted(&s.srq);
        }
    }
    for r in rwqs {
        if let Some(q) = registry.rwq_mut(r.wqn) {
            q.sync_posted(&r.rq);
        }
    }
    let n = cq.poll(&mut out[..ready]);
    let registry = cq.registry();
    if peeked.is_some() {
        // Only the QPs of the completions taken retired work.
        let mut last = None;
        for c in &out[..n] {
            if last != Some(c.qp_num) {
                last = Some(c.qp_num);
                adopted_qp(adopted, c.qp_num).into_iter().for_each(|a| hand_back_qp(registry, a));
            }
        }
    } else {
        adopted.iter().for_each(|a| hand_back_qp(registry, a));
    }
    if !rwqs.is_empty() {
        let registry = cq.registry_mut();
        for r in rwqs {
            if let Some(q) = registry.rwq_mut(r.wqn) {
                q.hand_back_tail(&r.rq);
            }
        }
    }
    if !srqs.is_empty() {
        let registry = cq.registry_mut();
        for s in srqs {
            if let Some(m) = registry.srq_mut(s.srqn) {
                m.hand_back_freed(&s.srq);
            }
        }
    }
    n
}
