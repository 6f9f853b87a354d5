//! XRC on `model-mlx5`: XRC domains, XRC SRQs attached to a CQ, target QPs made on a
//! domain and initiator QPs, as rdma-core's mlx5 provider and a ConnectX make them
//! (`ibv_open_xrcd`, `ibv_create_srq_ex` with `IBV_SRQT_XRC`, `ibv_create_qp_ex` with
//! `IBV_QPT_XRC_RECV` / `IBV_QPT_XRC_SEND`).
//!
//! A send from an initiator goes to its connected target, which hands it to the XRC SRQ the
//! send names (`remote_srqn`), provided that SRQ belongs to the target's domain; the
//! receive completes on the SRQ's CQ, the send on the initiator's send CQ. `model-e810`
//! refuses every XRC object: irdma has no XRC.

use super::cq::CqHw;
use super::fabric::Fabric;
use super::mlx5 as mx;
use super::qp::{QpHw, QpState, XrcSrq};
use super::{endpoint_of, DeviceError, ModelCq, ModelDevice, ModelQp, ModelSrq, ModelVendor, Shared};
use crate::verbs::QpCaps;
use std::sync::Arc;

/// The first SRQ user index the model gives an XRC SRQ. rdma-core takes it from the
/// context's resource table (`mlx5_store_uidx`); the model's CQs have CQE version 0, whose
/// CQEs name an XRC SRQ by its number, so the index is only the registry's key. Model
/// choice: 2^23 upwards, clear of the registration-order indices QPs get.
const XRC_UIDX_BASE: u32 = 1 << 23;

/// Target QPs have no CQs: the CQ slots of their `Qp` entry hold this, which nothing reads
/// (a target has no queue to flush, never sends, and its receives complete on the SRQ's CQ).
pub(super) const NO_CQ: usize = usize::MAX;

impl Fabric {
    fn xrc_refused(&self, what: &'static str) -> Result<(), DeviceError> {
        match self.vendor {
            ModelVendor::Mlx5 => Ok(()),
            ModelVendor::Irdma => Err(DeviceError::Unsupported { what, device: self.vendor.device_name() }),
        }
    }

    /// `ibv_open_xrcd`: a new XRC domain.
    pub(crate) fn open_xrcd(&mut self) -> Result<usize, DeviceError> {
        self.xrc_refused("an XRC domain (irdma has no XRC)")?;
        self.xrcds += 1;
        Ok(self.xrcds - 1)
    }

    /// `ibv_create_srq_ex` of type XRC in domain `xrcd`, completing on CQ `cq`: sized as a
    /// basic SRQ, and known to the CQ's registry at once (`Registry::add_xrc_srq`), since its
    /// receives complete there whichever target QP takes them.
    pub(crate) fn create_xrc_srq(
        &mut self,
        xrcd: usize,
        cq: usize,
        max_wr: u32,
        max_sge: u32,
    ) -> Result<usize, DeviceError> {
        self.xrc_refused("an XRC SRQ (irdma has no XRC)")?;
        if xrcd >= self.xrcds {
            return Err(DeviceError::ForeignHandle { what: "xrc domain" });
        }
        let s = self.create_srq(max_wr, max_sge)?;
        let (srqn, entries) = (self.srqs[s].srqn, self.srqs[s].next.len() as u32);
        let uidx = XRC_UIDX_BASE + s as u32;
        let registered = match &mut self.cqs[cq].hw {
            CqHw::Mlx5 { poller, .. } => poller.registry_mut().add_xrc_srq(srqn, uidx, entries).map(|_| ()),
            CqHw::Irdma { .. } => return Err(DeviceError::ForeignHandle { what: "cq of another vendor" }),
        };
        if let Err(e) = registered {
            // Not made after all: the SRQ entry stays unreachable (model resources live
            // as long as the device).
            return Err(e.into());
        }
        let srq = &mut self.srqs[s];
        srq.cqs.push(cq);
        srq.xrc = Some(XrcSrq { xrcd, cq });
        Ok(s)
    }

    /// `ibv_create_qp_ex` of `IBV_QPT_XRC_RECV` on domain `xrcd`: a QP with no queues and no
    /// CQs, in INIT.
    pub(crate) fn create_xrc_target(&mut self, xrcd: usize) -> Result<usize, DeviceError> {
        self.xrc_refused("an XRC target QP (irdma has no XRC)")?;
        if xrcd >= self.xrcds {
            return Err(DeviceError::ForeignHandle { what: "xrc domain" });
        }
        let qpn = super::fabric::MLX5_FIRST_QPN + self.qps.len() as u32;
        let none = QpCaps { max_send_wr: 0, max_recv_wr: 0, max_send_sge: 0, max_recv_sge: 0, max_inline_data: 0 };
        let (l, _) = mx::layout(crate::verbs::QpType::XrcRecv, &none, false)?;
        self.qps.push(super::qp::Qp {
            qpn,
            qp_type: crate::verbs::QpType::XrcRecv,
            state: QpState::Init,
            send_cq: NO_CQ,
            recv_cq: NO_CQ,
            srq: None,
            caps: none,
            qkey: super::DEFAULT_QKEY,
            peer: None,
            attrs: crate::verbs::QpAttrs::default(),
            endpoint: endpoint_of(qpn, self.gid),
            hw: QpHw::Mlx5(l),
            xrcd: Some(xrcd),
            sig_all: false,
            req_scatter: None,
            rq: Default::default(),
            sq: Default::default(),
        });
        self.flush.push(Default::default());
        Ok(self.qps.len() - 1)
    }

    /// The XRC SRQ numbered `srqn` in the domain of target QP `p`, if there is one.
    pub(super) fn xrc_srq_of(&self, p: usize, srqn: Option<u32>) -> Option<usize> {
        let (xrcd, srqn) = (self.qps[p].xrcd?, srqn?);
        self.srqs.iter().position(|s| s.srqn == srqn && s.xrc.is_some_and(|x| x.xrcd == xrcd))
    }
}

/// An XRC domain of a model device (`struct ibv_xrcd`).
#[derive(Debug)]
pub struct ModelXrcd {
    shared: Arc<Shared>,
    id: usize,
}

impl ModelXrcd {
    /// Makes an XRC target QP on the domain (`ibv_create_qp_ex` with `IBV_QPT_XRC_RECV` and
    /// `IBV_QP_INIT_ATTR_XRCD`): no queues, no CQs. Connected ([`ModelQp::connect`]) to an
    /// initiator it goes to RTR and takes that initiator's sends into this domain's SRQs.
    ///
    /// # Errors
    ///
    /// [`DeviceError::Unsupported`] on `model-e810`.
    pub fn create_target_qp(&self) -> Result<ModelQp, DeviceError> {
        let id = self.shared.lock().create_xrc_target(self.id)?;
        Ok(ModelQp::new(self.shared.clone(), id))
    }
}

impl ModelDevice {
    /// Opens an XRC domain (`ibv_open_xrcd`).
    ///
    /// # Errors
    ///
    /// [`DeviceError::Unsupported`] on `model-e810` (irdma has no XRC).
    pub fn open_xrcd(&self) -> Result<ModelXrcd, DeviceError> {
        let id = self.shared.lock().open_xrcd()?;
        Ok(ModelXrcd { shared: self.shared.clone(), id })
    }

    /// Creates an XRC SRQ of at least `max_wr` receives of `max_sge` entries in `xrcd`,
    /// completing on `cq` (`ibv_create_srq_ex` with `IBV_SRQT_XRC`); its number
    /// ([`ModelSrq::srqn`]) is what an initiator's send names.
    ///
    /// # Errors
    ///
    /// As [`ModelDevice::create_srq`]; [`DeviceError::ForeignHandle`] for a domain or CQ of
    /// another device; [`DeviceError::Unsupported`] on `model-e810`.
    pub fn create_xrc_srq(
        &self,
        xrcd: &ModelXrcd,
        cq: &ModelCq,
        max_wr: u32,
        max_sge: u32,
    ) -> Result<ModelSrq, DeviceError> {
        if !Arc::ptr_eq(&self.shared, &xrcd.shared) {
            return Err(DeviceError::ForeignHandle { what: "xrc domain" });
        }
        if !Arc::ptr_eq(&self.shared, cq.shared()) {
            return Err(DeviceError::ForeignHandle { what: "cq" });
        }
        let id = self.shared.lock().create_xrc_srq(xrcd.id, cq.id(), max_wr, max_sge)?;
        Ok(ModelSrq::new(self.shared.clone(), id))
    }
}
