//! The pollers behind [`crate::Cq`] on real devices, and the rule that picks one: the
//! direct backend for the CQ's provider when one exists and its self-checks pass, else
//! rdma-core's own poll (the generic backend), with the reason either way.
//!
//! Layer: the backends, above `sys`, `model_device`, `error` and the vocabulary (`verbs`,
//! `id`), which they may import with the vendor crates; they name no API type (`Cq`,
//! `Context`, channels): those sit above and hold a backend.

pub(crate) mod generic;
pub(crate) mod irdma;
mod kind;
pub(crate) mod mlx5;
pub(crate) mod rxe;

use crate::error::Error;
use crate::sys::cq::VerbsCq;
use crate::sys::device::Context;
use crate::sys::release::{ChosenRelease, Release};
use generic::GenericCq;
pub(crate) use kind::{backend, Poller};
pub use kind::{Backend, BackendChoice, BackendKind};
use std::sync::Arc;

pub(crate) use crate::sys::own::OwnCq;

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
    ChosenRelease::pick(verbs, ctx.provider_library().as_deref()).map_err(|e| e.to_string())
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
