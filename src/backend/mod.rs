//! The pollers behind [`crate::Cq`] on real devices, and the rule that picks one: the
//! direct backend for the CQ's provider when one exists and its self-checks pass, else
//! rdma-core's own poll (the generic backend), with the reason either way.

pub(crate) mod generic;
pub(crate) mod irdma;
pub(crate) mod maps;
pub(crate) mod mlx5;
pub(crate) mod rxe;

use crate::context::backend;
use crate::cq::{Backend, BackendChoice, BackendKind, Poller};
use crate::sys::release::{ChosenRelease, Release};
use crate::error::Error;
use crate::sys::cq::VerbsCq;
use crate::sys::device::Context;
use generic::GenericCq;
use std::sync::Arc;

/// The provider's short name (`rxe`, `mlx5`, ...) from the library its poll function lives
/// in.
pub(crate) fn provider_of(ctx: &Context) -> Option<String> {
    ctx.provider()
}

/// The rdma-core release whose private layouts a direct backend reads, and the file it
/// was read from: the provider library's own release, which must be libibverbs'
/// ([`ChosenRelease::pick`]).
pub(crate) fn chosen_release(ctx: &Context) -> Result<ChosenRelease, String> {
    let verbs_file = crate::sys::device::libibverbs_file();
    let verbs = verbs_file.as_deref().and_then(|f| Release::from_libibverbs_file(f).map(|r| (r, f)));
    ChosenRelease::pick(verbs, ctx.provider_library().as_deref())
}

/// Who made a CQ and will make the QPs on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// `Context::create_cq`: QPs come from dvcq's own `Pd::create_qp`, adopted on the mlx5
    /// and irdma direct backends. On mlx5, `created` is how `mlx5dv_create_cq` made it
    /// (`None` elsewhere).
    Dvcq { created: Option<mlx5::Created> },
    /// `Cq::attach`: the application's CQ, its QPs named with `Cq::attach_qp`.
    Application,
}

/// A direct attach of `cq`, or why there is none.
fn direct(device: &str, ctx: &Context, cq: &Arc<VerbsCq>, origin: Origin) -> Result<(Poller, Backend), Error> {
    let refuse = |backend: &'static str, reason: String| Error::Attach { device: device.to_string(), backend, reason };
    match provider_of(ctx).as_deref() {
        Some("rxe") => rxe::attach(device, "rxe", cq).map(|(p, why)| (Poller::Rxe(p), backend(BackendKind::Rxe, why))),
        Some("mlx5") => {
            let attached = match origin {
                Origin::Dvcq { created: Some(created), .. } => mlx5::attach_created(device, ctx, cq, created),
                Origin::Dvcq { created: None, .. } => {
                    Err(refuse("mlx5", "the CQ was not made by mlx5dv_create_cq, so its format is not known".into()))
                }
                Origin::Application => mlx5::attach(device, ctx, cq),
            };
            attached.map(|(p, why)| (Poller::Mlx5(Box::new(p)), backend(BackendKind::Mlx5, why)))
        }
        Some("irdma") => match origin {
            Origin::Dvcq { .. } => irdma::attach_created(device, ctx, cq),
            Origin::Application => irdma::attach(device, ctx, cq),
        }
        .map(|(p, why)| (Poller::Irdma(Box::new(p)), backend(BackendKind::Irdma, why))),
        Some(p) => Err(refuse("direct", format!("dvcq has no direct backend for the {p} provider"))),
        None => Err(refuse("direct", "the provider library serving this device could not be identified".into())),
    }
}

/// Picks the poller for a CQ rdma-core made, for QPs made by `origin`.
pub(crate) fn choose_for(
    device: &str,
    ctx: &Context,
    cq: Arc<VerbsCq>,
    choice: BackendChoice,
    origin: Origin,
) -> Result<(Poller, Backend), Error> {
    if choice == BackendChoice::Generic {
        let why = "rdma-core's ibv_poll_cq, as asked";
        return Ok((Poller::Generic(GenericCq::new(cq)), backend(BackendKind::Generic, why)));
    }
    // rdma-core's poll cannot read a compressed CQ: such a CQ is polled directly or not at all.
    let compressed = matches!(origin, Origin::Dvcq { created: Some(c), .. } if c.compression.is_some());
    match direct(device, ctx, &cq, origin) {
        Ok((Poller::Mlx5(mut m), b)) => {
            m.allow_fallback(choice == BackendChoice::Auto && origin == Origin::Application);
            Ok((Poller::Mlx5(m), b))
        }
        Ok((Poller::Irdma(mut m), b)) => {
            m.allow_fallback(choice == BackendChoice::Auto && origin == Origin::Application);
            Ok((Poller::Irdma(m), b))
        }
        Ok(chosen) => Ok(chosen),
        Err(e) if choice == BackendChoice::Direct || compressed => Err(e),
        Err(e) => {
            let why = match &e {
                Error::Attach { backend, reason, .. } if *backend == "direct" => {
                    format!("rdma-core's ibv_poll_cq: {reason}")
                }
                Error::Attach { backend, reason, .. } => {
                    format!("rdma-core's ibv_poll_cq: direct {backend} attach refused: {reason}")
                }
                other => format!("rdma-core's ibv_poll_cq: {other}"),
            };
            Ok((Poller::Generic(GenericCq::new(cq)), backend(BackendKind::Generic, why)))
        }
    }
}

/// A direct CQ dvcq made, as the QPs dvcq makes on it see it: what they are read and
/// checked against, and the lock that orders their posts with its polls.
#[derive(Clone, Debug)]
pub(crate) enum OwnCq {
    Mlx5(Arc<mlx5::own::OwnQps>),
    Irdma(Arc<irdma::own::OwnQps>),
}

/// A held [`OwnCq::lock`]: no poll call of that CQ runs while it lives. It holds the
/// changes the CQ's next poll call applies first.
#[derive(Debug)]
pub(crate) enum PollsWait<'a> {
    Mlx5(std::sync::MutexGuard<'a, Vec<mlx5::own::Change>>),
    Irdma(std::sync::MutexGuard<'a, Vec<irdma::own::Change>>),
}

impl PollsWait<'_> {
    /// Queues the removal of QP `qpn`, about to be destroyed.
    pub(crate) fn forget_qp(&mut self, qpn: u32) {
        match self {
            PollsWait::Mlx5(c) => c.push(mlx5::own::Change::RemoveQp(qpn)),
            PollsWait::Irdma(c) => c.push(irdma::own::Change::RemoveQp(qpn)),
        }
    }
}

impl OwnCq {
    /// The backend's name, for errors.
    pub(crate) fn backend(&self) -> &'static str {
        match self {
            OwnCq::Mlx5(_) => "mlx5",
            OwnCq::Irdma(_) => "irdma",
        }
    }

    /// Whether both name the same CQ.
    pub(crate) fn same(&self, other: &OwnCq) -> bool {
        match (self, other) {
            (OwnCq::Mlx5(a), OwnCq::Mlx5(b)) => Arc::ptr_eq(a, b),
            (OwnCq::Irdma(a), OwnCq::Irdma(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// The CQ's poll lock (see [`PollsWait`]).
    pub(crate) fn lock(&self) -> PollsWait<'_> {
        match self {
            OwnCq::Mlx5(o) => PollsWait::Mlx5(o.lock()),
            OwnCq::Irdma(o) => PollsWait::Irdma(o.lock()),
        }
    }

    /// An address that orders the CQs, so that locks on two are always taken in one order.
    fn order(&self) -> usize {
        match self {
            OwnCq::Mlx5(o) => Arc::as_ptr(o) as usize,
            OwnCq::Irdma(o) => Arc::as_ptr(o) as usize,
        }
    }

    /// The distinct direct CQs among a QP's send and receive CQs, in lock order.
    pub(crate) fn distinct(send: &Option<OwnCq>, recv: &Option<OwnCq>) -> Vec<OwnCq> {
        let mut v: Vec<OwnCq> = send.iter().cloned().collect();
        if let Some(r) = recv {
            if !v.iter().any(|s| s.same(r)) {
                v.push(r.clone());
            }
        }
        v.sort_by_key(OwnCq::order);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dvcq_uapi::irdma::rdma_core::IRDMA_LAYOUTS;
    use dvcq_uapi::mlx5::rdma_core::MLX5_LAYOUTS;

    fn mlx5() -> OwnCq {
        OwnCq::Mlx5(mlx5::own::OwnQps::new(0x10, 0x20, &MLX5_LAYOUTS[0], false))
    }

    fn irdma() -> OwnCq {
        let cq = crate::sys::irdma::PrivateCq {
            ctx: 0x10,
            cq: 0x20,
            ring: 0x1000,
            entries: 42,
            cqe_size: 32,
            shadow: 0x2000,
            cq_id: 1,
            head: 0,
            polarity: true,
            hw_rev: dvcq_uapi::irdma::HwRev::Gen2,
            features: 0,
            uk_attrs: 0x18,
            db: 0x3000,
            arm_db: 0x3040,
        };
        OwnCq::Irdma(irdma::own::OwnQps::new(cq, &IRDMA_LAYOUTS[0]))
    }

    #[test]
    fn a_qp_s_two_direct_cqs_are_counted_once_when_they_are_one_and_locked_in_one_order() {
        for make in [mlx5 as fn() -> OwnCq, irdma] {
            let (a, b) = (make(), make());
            assert_eq!(OwnCq::distinct(&Some(a.clone()), &Some(a.clone())).len(), 1);
            assert!(!a.same(&b) && !a.same(&irdma()) && !a.same(&mlx5()));
            let ab = OwnCq::distinct(&Some(a.clone()), &Some(b.clone()));
            let ba = OwnCq::distinct(&Some(b.clone()), &Some(a.clone()));
            assert_eq!(ab.len(), 2);
            assert!(ab[0].same(&ba[0]) && ab[1].same(&ba[1]), "send/recv or recv/send: the same lock order");
            assert_eq!(OwnCq::distinct(&None, &Some(a)).len(), 1);
            assert!(OwnCq::distinct(&None, &None).is_empty());
        }
    }

    #[test]
    fn a_drop_queues_the_qp_s_removal_on_the_cq_it_holds_the_lock_of() {
        let own = irdma();
        let OwnCq::Irdma(inner) = &own else { unreachable!() };
        own.lock().forget_qp(0x2b);
        assert!(matches!(inner.lock().as_slice(), [irdma::own::Change::RemoveQp(0x2b)]));
        assert_eq!(own.backend(), "irdma");
        assert_eq!(mlx5().backend(), "mlx5");
    }
}
