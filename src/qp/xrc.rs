//! XRC (eXtended Reliable Connected transport): a domain, the XRC SRQs in it, target QPs
//! made on it, and initiator QPs that send into its SRQs by number, after rdma-core's
//! `tests/base.py` `XRCResources`.
//!
//! ```text
//! initiator (Pd::create_qp, QpType::XrcSend)  --connect-->  target (Xrcd::create_target_qp)
//!   send CQ: its send completions                             no CQs, no queues
//!   SendWr::to_srq(n) names the XRC SRQ       ---------->     XRC SRQ n of the target's domain
//!                                                               (Pd::create_xrc_srq): the
//!                                                               receive completes on its CQ
//! ```
//!
//! # Lifetimes
//!
//! An XRC SRQ holds its domain, its PD and its CQ; a target QP holds its domain; an
//! initiator holds its send CQ and PD. So a domain is closed only after every SRQ and target
//! made on it is gone, and a CQ outlives the XRC SRQs completing on it, in any drop order.

use super::{model_cq_of, verbs_cq_of, Qp, QpInner, Srq, SrqInner};
use crate::context::{model_error, Context, Inner, Pd, PdInner};
use crate::cq::Cq;
use crate::error::Error;
use crate::sys;
use crate::verbs::QpType;
use std::sync::Arc;

/// An XRC domain (`ibv_open_xrcd`): where XRC SRQs and XRC target QPs are made.
#[derive(Debug)]
pub struct Xrcd {
    inner: XrcdInner,
    device: String,
}

#[derive(Debug)]
enum XrcdInner {
    Model(crate::model_device::ModelXrcd),
    Verbs { xrcd: Arc<sys::qp::Xrcd>, port: u8, gid_index: u8 },
}

impl Context {
    /// Opens an XRC domain, private to this process (`ibv_open_xrcd` with `comp_mask`
    /// `FD | OFLAGS`, `fd` -1, `O_CREAT`).
    ///
    /// # Errors
    ///
    /// [`Error::Model`] on `model-e810` (irdma has no XRC); [`Error::Verbs`] when rdma-core
    /// refuses (`EOPNOTSUPP` from a provider without XRC, such as rxe's).
    pub fn open_xrcd(&self) -> Result<Xrcd, Error> {
        match &self.inner {
            Inner::Model(m) => {
                let x = m.open_xrcd().map_err(|e| model_error(&self.name, e))?;
                Ok(Xrcd { inner: XrcdInner::Model(x), device: self.name.clone() })
            }
            Inner::Verbs { ctx, port, gid_index } => {
                let xrcd =
                    sys::qp::Xrcd::open(ctx).map_err(|source| Error::Verbs { device: self.name.clone(), source })?;
                Ok(Xrcd {
                    inner: XrcdInner::Verbs { xrcd, port: *port, gid_index: *gid_index },
                    device: self.name.clone(),
                })
            }
        }
    }
}

impl Xrcd {
    /// The device it belongs to.
    pub fn device(&self) -> &str {
        &self.device
    }

    /// Makes an XRC target QP on the domain (`ibv_create_qp_ex` with `IBV_QPT_XRC_RECV` and
    /// `IBV_QP_INIT_ATTR_XRCD`): no PD, no CQs, no queues, left in INIT. [`Qp::connect`] to
    /// its initiator's endpoint brings it to RTR, where it takes that initiator's requests
    /// into this domain's XRC SRQs. It posts nothing itself.
    ///
    /// # Errors
    ///
    /// [`Error::Model`] on `model-e810`; [`Error::Verbs`] when rdma-core refuses.
    pub fn create_target_qp(&self) -> Result<Qp, Error> {
        let (inner, qpn) = match &self.inner {
            XrcdInner::Model(x) => {
                let qp = x.create_target_qp().map_err(|e| model_error(&self.device, e))?;
                let qpn = qp.qpn();
                (QpInner::Model(qp), qpn)
            }
            XrcdInner::Verbs { xrcd, port, gid_index } => {
                let qp = sys::qp::Qp::new_xrc_target(xrcd, *port, *gid_index)
                    .map_err(|source| Error::Verbs { device: self.device.clone(), source })?;
                let qpn = qp.qpn();
                (QpInner::Verbs(qp), qpn)
            }
        };
        Ok(Qp {
            inner,
            held: Default::default(),
            _srq_held: None,
            device: self.device.clone(),
            qpn,
            qp_type: QpType::XrcRecv,
        })
    }
}

impl Pd {
    /// Makes an XRC SRQ of at least `max_wr` receives of `max_sge` entries in `xrcd`, whose
    /// receives complete on `cq` (`ibv_create_srq_ex`: `IBV_SRQT_XRC` with the PD, the
    /// domain and the CQ). [`Srq::xrc_srqn`] gives the number initiators name
    /// ([`crate::verbs::SendWr::to_srq`]); receives are posted with [`Srq::post_recv`].
    ///
    /// On a CQ dvcq polls directly on mlx5, the CQ adopts the SRQ as `Cq::attach_srq`
    /// adopts an application's XRC SRQ: its CQEs must name it by user index (a context of
    /// CQE version 1), else it is refused ([`Error::Attach`]).
    ///
    /// # Errors
    ///
    /// [`Error::Mismatch`] for a domain or CQ of another device; [`Error::Model`] on
    /// `model-e810` or for sizes the device refuses; [`Error::Verbs`] when rdma-core
    /// refuses; [`Error::Attach`] when the direct CQ cannot adopt it (the SRQ is destroyed
    /// again).
    pub fn create_xrc_srq(&self, xrcd: &Xrcd, cq: &Cq, max_wr: u32, max_sge: u32) -> Result<Srq, Error> {
        if xrcd.device != self.device {
            return Err(Error::Mismatch {
                device: self.device.clone(),
                what: format!("an XRC domain of device {} cannot be used here", xrcd.device),
            });
        }
        match (&self.inner, &xrcd.inner) {
            (PdInner::Model(m), XrcdInner::Model(x)) => {
                let c = model_cq_of(cq, &self.device)?;
                let srq = m.create_xrc_srq(x, c, max_wr, max_sge).map_err(|e| model_error(&self.device, e))?;
                Ok(Srq { inner: SrqInner::Model(srq), held: Default::default(), device: self.device.clone() })
            }
            (PdInner::Verbs { pd, .. }, XrcdInner::Verbs { xrcd, .. }) => {
                let (vcq, own) = verbs_cq_of(cq, &self.device)?;
                let srq = sys::qp::Srq::new_xrc(pd, xrcd, vcq, max_wr, max_sge)
                    .map_err(|source| Error::Verbs { device: self.device.clone(), source })?;
                let backend = own.as_ref().map_or("direct", |o| o.backend());
                srq.adopt_xrc_on(own.as_ref()).map_err(|reason| Error::Attach {
                    device: self.device.clone(),
                    backend,
                    reason,
                })?;
                Ok(Srq { inner: SrqInner::Verbs(srq), held: Default::default(), device: self.device.clone() })
            }
            #[allow(unreachable_patterns)]
            _ => Err(Error::Mismatch { device: self.device.clone(), what: "an XRC domain of another device".into() }),
        }
    }
}
