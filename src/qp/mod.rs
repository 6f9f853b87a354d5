//! Queue pairs and shared receive queues: made on a PD, completing into [`Cq`]s, posted with
//! [`crate::verbs`] work requests; XRC domains ([`Xrcd`], `xrc.rs`) and the memory windows
//! a QP binds ([`Mw`], `mw.rs`).
//!
//! Layer: above `cq` (a QP is made with the CQs it completes into) and `context` (on a
//! [`Pd`], with its regions); below `event`. It may import `context`, `cq`, `backend`,
//! `model_device`, `sys`, `error` and the vocabulary (`verbs`, `id`), nothing above.

mod mw;
mod raw;
mod xrc;

pub use mw::Mw;
pub use xrc::Xrcd;

use crate::context::mr::MrInner;
use crate::context::{model_error, Mr, Pd, PdInner};
use crate::cq::{Cq, Poller};
use crate::error::Error;
use crate::sys;
use crate::verbs::{Endpoint, MrSlice, QpAttrs, QpCaps, QpType, RecvWr, SendOp, SendWr};
use std::sync::{Arc, Mutex, PoisonError};

/// What a QP is made with.
#[derive(Clone, Copy, Debug)]
pub struct QpInit<'a> {
    /// RC or UD.
    pub qp_type: QpType,
    /// Where its send completions go.
    pub send_cq: &'a Cq,
    /// Where its receive completions go.
    pub recv_cq: &'a Cq,
    /// Receives come from this SRQ instead of the QP's own receive queue.
    pub srq: Option<&'a Srq>,
    /// Queue sizes.
    pub caps: QpCaps,
    /// Every send completes with a CQE, signaled or not (`sq_sig_all`).
    pub sq_sig_all: bool,
}

impl<'a> QpInit<'a> {
    /// A QP of `qp_type` with the default caps, completing into `cq` both ways.
    pub fn new(qp_type: QpType, cq: &'a Cq) -> Self {
        QpInit { qp_type, send_cq: cq, recv_cq: cq, srq: None, caps: QpCaps::default(), sq_sig_all: false }
    }
}

/// A queue pair.
///
/// The regions its receives and RDMA READs name stay registered and allocated until it is
/// dropped ([`RecvWr`]): the device, and on mlx5 the provider's copy of data scattered to
/// a CQE, may write into them until then.
#[derive(Debug)]
pub struct Qp {
    inner: QpInner,
    /// Dropped after the QP is destroyed.
    held: Held,
    /// The SRQ's held regions: its receives may complete through this QP until it is
    /// destroyed, even once the [`Srq`] is dropped.
    _srq_held: Option<Arc<Mutex<Held>>>,
    device: String,
    qpn: u32,
    qp_type: QpType,
}

/// The regions a queue's posted receives and READs may be written into, each held once,
/// so that they stay registered and allocated while the queue lives.
#[derive(Debug, Default)]
struct Held(Vec<MrInner>);

impl Held {
    fn keep(&mut self, mr: &Mr) {
        if !self.0.iter().any(|h| h.same(&mr.inner)) {
            self.0.push(mr.hold());
        }
    }
}

/// Holds, in `held`, each region that the lists name: where the device or the provider
/// may write (a receive list, a READ's local list). Every slice must come from a
/// [`crate::Mr`] of `device` (of the kind `verbs` says); if one does not, nothing is held
/// and the post is refused.
fn hold_written<'w, 'a: 'w>(
    held: &mut Held,
    device: &str,
    verbs: bool,
    lists: impl Iterator<Item = &'w [MrSlice<'a>]> + Clone,
) -> Result<(), Error> {
    let ours = |s: &MrSlice<'a>| s.region::<Mr>().filter(|r| r.device() == device && r.inner.is_verbs() == verbs);
    for (i, list) in lists.clone().enumerate() {
        if let Some(j) = list.iter().position(|s| ours(s).is_none()) {
            return Err(Error::Mismatch {
                device: device.to_string(),
                what: format!(
                    "request {i}, entry {j}: the device writes into it, so it must be a slice of a memory region \
                     registered on this device (Pd::reg_mr, Mr::slice)"
                ),
            });
        }
    }
    for mr in lists.flatten().filter_map(ours) {
        held.keep(mr);
    }
    Ok(())
}

#[derive(Debug)]
enum QpInner {
    Model(crate::model_device::ModelQp),
    Verbs(sys::qp::Qp),
}

/// A shared receive queue: a basic one ([`Pd::create_srq`]) that QPs receive from, or an
/// XRC SRQ ([`Pd::create_xrc_srq`]) that XRC target QPs of its domain deliver into.
///
/// The regions its receives name stay registered and allocated until it and every QP
/// receiving from it are dropped ([`RecvWr`]).
#[derive(Debug)]
pub struct Srq {
    inner: SrqInner,
    /// Shared with the QPs made on it; dropped after the SRQ is destroyed.
    held: Arc<Mutex<Held>>,
    device: String,
}

#[derive(Debug)]
enum SrqInner {
    Model(crate::model_device::ModelSrq),
    Verbs(Arc<sys::qp::Srq>),
}

fn model_cq_of<'c>(cq: &'c Cq, device: &str) -> Result<&'c crate::model_device::ModelCq, Error> {
    match &cq.poller {
        Poller::Model(m) if cq.device() == device => Ok(m),
        _ => Err(Error::Mismatch {
            device: device.to_string(),
            what: format!("CQ of device {} cannot be used here", cq.device()),
        }),
    }
}

fn model_post_error(device: &str, qpn: u32, e: crate::model_device::PostError) -> Error {
    use crate::error::PostRefusal;
    use crate::model_device::PostErrorKind as Kind;
    let reason = match e.kind {
        Kind::QueueFull => return Error::QueueFull { device: device.to_string(), qpn, index: e.index },
        Kind::TooManySge { num_sge, max } => PostRefusal::TooManySge { num_sge, max },
        Kind::InlineTooLong { len, max } => PostRefusal::InlineTooLong { len, max },
        Kind::BadState(state) => PostRefusal::BadState { state: state.name() },
        Kind::BadOpcode => PostRefusal::UnsupportedOperation,
        Kind::NoQueue => PostRefusal::NoQueue,
    };
    Error::Post { device: device.to_string(), qpn, index: e.index, reason }
}

/// The rdma-core CQ behind `cq`, and on a direct CQ dvcq made, what a QP made on it shares
/// with it to be adopted.
fn verbs_cq_of<'c>(
    cq: &'c Cq,
    device: &str,
) -> Result<(&'c Arc<sys::cq::VerbsCq>, Option<crate::backend::OwnCq>), Error> {
    use crate::backend::OwnCq;
    let mismatch = || Error::Mismatch {
        device: device.to_string(),
        what: format!("CQ of device {} cannot be used here", cq.device()),
    };
    // An application's CQ (Cq::attach) on a direct backend: its registry holds the QPs the
    // application attached; dvcq's own would complete as unknown QPs.
    let attached = || Error::Mismatch {
        device: device.to_string(),
        what: "a CQ attached with Cq::attach takes QPs the application created (Cq::attach_qp); make dvcq's own \
               QPs on a CQ made with Context::create_cq"
            .into(),
    };
    if cq.device() != device {
        return Err(mismatch());
    }
    match &cq.poller {
        Poller::Generic(g) => Ok((g.verbs_cq(), None)),
        Poller::Rxe(r) => Ok((r.verbs_cq(), None)),
        Poller::Mlx5(m) => match (m.verbs_cq(), m.own()) {
            (Some(v), Some(own)) => Ok((v, Some(OwnCq::Mlx5(Arc::clone(own))))),
            _ => Err(attached()),
        },
        Poller::Irdma(m) => match (m.verbs_cq(), m.own()) {
            (Some(v), Some(own)) => Ok((v, Some(OwnCq::Irdma(Arc::clone(own))))),
            _ => Err(attached()),
        },
        Poller::Model(_) => Err(mismatch()),
    }
}

impl Pd {
    /// Makes a QP. An RC QP is left in INIT until [`Qp::connect`]; a UD QP is ready to send
    /// and receive at once.
    ///
    /// # Errors
    ///
    /// A CQ or SRQ of another device ([`Error::Mismatch`]), or rdma-core refused the caps.
    ///
    /// An XRC initiator ([`QpType::XrcSend`]) is made here with a send CQ only (`recv_cq`
    /// is not used) and no SRQ; an XRC target is made on its domain
    /// ([`crate::Xrcd::create_target_qp`]) and refused here ([`Error::Xrc`]).
    pub fn create_qp(&self, init: &QpInit<'_>) -> Result<Qp, Error> {
        let xrc = |why: &str| Error::Xrc { device: self.device.clone(), why: why.into() };
        match init.qp_type {
            QpType::XrcRecv => {
                return Err(xrc("an XRC target QP has no PD and no CQs: make it with Xrcd::create_target_qp"))
            }
            QpType::XrcSend if init.srq.is_some() => {
                return Err(xrc("an XRC initiator QP has no receive side: it takes no SRQ"))
            }
            _ => {}
        }
        match &self.inner {
            PdInner::Model(m) => {
                let send = model_cq_of(init.send_cq, &self.device)?;
                let recv = model_cq_of(init.recv_cq, &self.device)?;
                let srq = match init.srq.map(|s| &s.inner) {
                    None => None,
                    Some(SrqInner::Model(s)) => Some(s),
                    #[allow(unreachable_patterns)]
                    Some(_) => {
                        return Err(Error::Mismatch {
                            device: self.device.clone(),
                            what: "an SRQ of another device".into(),
                        })
                    }
                };
                let model_init = crate::model_device::ModelQpInit {
                    qp_type: init.qp_type,
                    send_cq: send,
                    recv_cq: recv,
                    caps: init.caps,
                    srq,
                    sq_sig_all: init.sq_sig_all,
                };
                let qp = m.create_qp_ex(&model_init).map_err(|e| model_error(&self.device, e))?;
                // A UD QP is ready at once, as rdma-core's is made (the model's connect is
                // its move to RTS); `Qp::connect` has nothing more to do for it.
                if init.qp_type == QpType::Ud {
                    qp.connect(&qp.endpoint()).map_err(|e| model_error(&self.device, e))?;
                }
                Ok(Qp {
                    qpn: qp.qpn(),
                    inner: QpInner::Model(qp),
                    held: Held::default(),
                    _srq_held: init.srq.map(|s| Arc::clone(&s.held)),
                    device: self.device.clone(),
                    qp_type: init.qp_type,
                })
            }
            PdInner::Verbs { pd, port, gid_index } => {
                let (send, send_own) = verbs_cq_of(init.send_cq, &self.device)?;
                // An initiator has no receive CQ: its send CQ stands in, and adopts nothing more.
                let (recv, recv_own) = if init.qp_type == QpType::XrcSend {
                    (send, None)
                } else {
                    verbs_cq_of(init.recv_cq, &self.device)?
                };
                let srq = match init.srq.map(|s| &s.inner) {
                    None => None,
                    Some(SrqInner::Verbs(s)) => Some(s),
                    Some(SrqInner::Model(_)) => {
                        return Err(Error::Mismatch {
                            device: self.device.clone(),
                            what: "an SRQ of another device".into(),
                        })
                    }
                    #[allow(unreachable_patterns)]
                    Some(_) => {
                        return Err(Error::Mismatch {
                            device: self.device.clone(),
                            what: "an SRQ of another device".into(),
                        })
                    }
                };
                // On mlx5 dvcq's direct CQs make their QPs without scatter-to-CQE.
                let on_mlx5 = |o: &Option<crate::backend::OwnCq>| matches!(o, Some(crate::backend::OwnCq::Mlx5(_)));
                let direct = on_mlx5(&send_own) || on_mlx5(&recv_own);
                let backend = send_own.as_ref().or(recv_own.as_ref()).map_or("direct", |o| o.backend());
                let mut qp = sys::qp::Qp::new(
                    pd,
                    init.qp_type,
                    send,
                    recv,
                    srq,
                    init.caps,
                    init.sq_sig_all,
                    *port,
                    *gid_index,
                    direct,
                )
                .map_err(|source| Error::Verbs { device: self.device.clone(), source })?;
                // On a direct mlx5 or irdma CQ dvcq made, the QP (and on mlx5 its SRQ) is
                // adopted as an application's is by Cq::attach_qp; refused, the QP is
                // destroyed again.
                qp.adopt_on(send_own, recv_own).map_err(|reason| Error::Attach {
                    device: self.device.clone(),
                    backend,
                    reason,
                })?;
                Ok(Qp {
                    qpn: qp.qpn(),
                    inner: QpInner::Verbs(qp),
                    held: Held::default(),
                    _srq_held: init.srq.map(|s| Arc::clone(&s.held)),
                    device: self.device.clone(),
                    qp_type: init.qp_type,
                })
            }
        }
    }

    /// Makes an SRQ of at least `max_wr` receives of `max_sge` entries.
    ///
    /// # Errors
    ///
    /// rdma-core refused the sizes.
    pub fn create_srq(&self, max_wr: u32, max_sge: u32) -> Result<Srq, Error> {
        match &self.inner {
            PdInner::Model(m) => {
                let srq = m.create_srq(max_wr, max_sge).map_err(|e| model_error(&self.device, e))?;
                Ok(Srq { inner: SrqInner::Model(srq), held: Arc::default(), device: self.device.clone() })
            }
            PdInner::Verbs { pd, .. } => {
                let srq = sys::qp::Srq::new(pd, max_wr, max_sge)
                    .map_err(|source| Error::Verbs { device: self.device.clone(), source })?;
                Ok(Srq { inner: SrqInner::Verbs(srq), held: Arc::default(), device: self.device.clone() })
            }
        }
    }
}

fn post_error(device: &str, qpn: u32, f: sys::qp::PostFailure) -> Error {
    Error::of_post(device, qpn, f.index, "ibv_post_*", f.errno)
}

impl Qp {
    /// The QP number.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    /// The `struct ibv_qp` behind a QP on a real device, for tests that attach it as an
    /// application's own (`Cq::attach_qp`).
    #[cfg(test)]
    pub(crate) fn verbs_ptr(&self) -> Option<core::ptr::NonNull<core::ffi::c_void>> {
        match &self.inner {
            QpInner::Verbs(qp) => core::ptr::NonNull::new(qp.as_ptr().cast()),
            QpInner::Model(_) => None,
        }
    }

    /// RC or UD.
    pub fn qp_type(&self) -> QpType {
        self.qp_type
    }

    /// What a peer needs to reach this QP.
    ///
    /// # Errors
    ///
    /// rdma-core failed the port or GID query.
    pub fn endpoint(&self) -> Result<Endpoint, Error> {
        match &self.inner {
            QpInner::Model(qp) => Ok(qp.endpoint()),
            QpInner::Verbs(qp) => qp.endpoint().map_err(|source| Error::Verbs { device: self.device.clone(), source }),
        }
    }

    /// Connects an RC QP to `peer` (which may be itself) with [`QpAttrs::default`];
    /// nothing to do for UD.
    ///
    /// # Errors
    ///
    /// The device refused a state change.
    pub fn connect(&mut self, peer: &Endpoint) -> Result<(), Error> {
        self.connect_with(peer, &QpAttrs::default())
    }

    /// Connects a connected QP to `peer` with `attrs` (timeouts, retries, path MTU,
    /// READs and atomics in flight: `ibv_modify_qp` to RTR then RTS); nothing to do for
    /// UD. [`QpAttrs`] says what the models do with each.
    ///
    /// # Errors
    ///
    /// [`Error::Unsupported`] naming an attribute out of its range, before anything
    /// reaches the device; the device refused a state change (a path MTU above the
    /// port's, for one).
    pub fn connect_with(&mut self, peer: &Endpoint, attrs: &QpAttrs) -> Result<(), Error> {
        if let Some((attr, value)) = attrs.out_of_range() {
            return Err(Error::Unsupported {
                device: self.device.clone(),
                what: "QP attribute value",
                why: format!("{attr} = {value} is out of its range (QpAttrs::out_of_range)"),
            });
        }
        if self.qp_type == QpType::Ud {
            return Ok(());
        }
        match &mut self.inner {
            QpInner::Model(qp) => qp.connect_with(peer, attrs).map_err(|e| model_error(&self.device, e)),
            QpInner::Verbs(qp) => {
                qp.connect(peer, attrs).map_err(|source| Error::Verbs { device: self.device.clone(), source })
            }
        }
    }

    /// Posts send work requests, in order.
    ///
    /// # Errors
    ///
    /// [`Error::Post`] names the first request not posted (those before it were);
    /// [`Error::QueueFull`] when that was for want of room, [`Error::DeviceRemoved`] when
    /// the device is gone. A QP whose CQ is in error (see [`Cq::error`]) still takes posts,
    /// as the hardware does: they flush and nothing completes.
    /// [`Error::MwBind`], with nothing posted, for a list holding a
    /// [`SendOp::BindMw`](crate::verbs::SendOp::BindMw): windows are bound with
    /// [`Qp::bind_mw`], which holds the window and region it names.
    ///
    /// [`Error::Xrc`], with nothing posted: a request of an XRC initiator naming no XRC SRQ
    /// ([`SendWr::to_srq`]), one of another QP type naming one, any send on an XRC target
    /// (it has no send queue).
    ///
    /// [`Error::Mismatch`], with nothing posted: a READ or an atomic whose local list names memory of
    /// no [`crate::Mr`] of this device (the response is written there; the QP holds the
    /// regions it names until it is dropped).
    pub fn post_send(&mut self, wrs: &[SendWr<'_>]) -> Result<(), Error> {
        self.check_xrc_sends(wrs)?;
        if wrs.iter().any(|w| matches!(w.op, SendOp::BindMw(_))) {
            return Err(Error::MwBind {
                device: self.device.clone(),
                why: "post binds with Qp::bind_mw, which names the window and the region themselves".into(),
            });
        }
        let reads = wrs.iter().map(|w| if w.op.writes_local() { w.sg_list } else { &[] });
        let verbs = self.is_verbs();
        hold_written(&mut self.held, &self.device, verbs, reads)?;
        match &mut self.inner {
            QpInner::Model(qp) => qp.post_send(wrs).map_err(|e| model_post_error(&self.device, self.qpn, e)),
            QpInner::Verbs(qp) => qp.post_send(wrs).map_err(|f| post_error(&self.device, self.qpn, f)),
        }
    }

    /// Posts receive work requests to the QP's own receive queue.
    ///
    /// # Errors
    ///
    /// As [`Qp::post_send`].
    ///
    /// [`Error::Xrc`] on either XRC type: neither has a receive queue (receives go to the
    /// XRC SRQs).
    ///
    /// [`Error::Mismatch`], with nothing posted: a list naming memory of no [`crate::Mr`]
    /// of this device. The QP holds the regions named until it is dropped ([`RecvWr`]).
    pub fn post_recv(&mut self, wrs: &[RecvWr<'_>]) -> Result<(), Error> {
        if self.qp_type.is_xrc() {
            return Err(Error::Xrc {
                device: self.device.clone(),
                why: format!(
                    "QP {:#x} is {}: it has no receive queue; post receives to an XRC SRQ",
                    self.qpn,
                    self.qp_type.name()
                ),
            });
        }
        let verbs = self.is_verbs();
        hold_written(&mut self.held, &self.device, verbs, wrs.iter().map(|w| w.sg_list))?;
        match &mut self.inner {
            QpInner::Model(qp) => qp.post_recv(wrs).map_err(|e| model_post_error(&self.device, self.qpn, e)),
            QpInner::Verbs(qp) => qp.post_recv(wrs).map_err(|f| post_error(&self.device, self.qpn, f)),
        }
    }

    /// Moves the QP to the error state: its outstanding work completes with
    /// `WR_FLUSH_ERR`.
    ///
    /// # Errors
    ///
    /// The device refused the state change.
    pub fn enter_error_state(&mut self) -> Result<(), Error> {
        match &mut self.inner {
            QpInner::Model(qp) => {
                qp.to_error();
                Ok(())
            }
            QpInner::Verbs(qp) => {
                qp.enter_error_state().map_err(|source| Error::Verbs { device: self.device.clone(), source })
            }
        }
    }
}

impl Qp {
    fn is_verbs(&self) -> bool {
        !matches!(self.inner, QpInner::Model(_))
    }

    /// The XRC checks of [`Qp::post_send`], before anything is posted.
    fn check_xrc_sends(&self, wrs: &[SendWr<'_>]) -> Result<(), Error> {
        let refuse = |why: String| Err(Error::Xrc { device: self.device.clone(), why });
        let (qpn, ty) = (self.qpn, self.qp_type.name());
        if self.qp_type == QpType::XrcRecv {
            return refuse(format!("QP {qpn:#x} is an XRC target: it has no send queue"));
        }
        for (i, w) in wrs.iter().enumerate() {
            match (self.qp_type, w.xrc_srqn) {
                (QpType::XrcSend, None) => {
                    return refuse(format!(
                        "request {i} on XRC initiator {qpn:#x} names no XRC SRQ (SendWr::to_srq): the target would \
                         have nowhere to deliver it"
                    ))
                }
                (QpType::XrcSend, Some(_)) | (_, None) => {}
                (_, Some(srqn)) => {
                    return refuse(format!(
                        "request {i} names XRC SRQ {srqn:#x}, but QP {qpn:#x} is {ty}, not an XRC initiator"
                    ))
                }
            }
        }
        Ok(())
    }
}

impl Srq {
    /// The number an XRC initiator's send names to land in this XRC SRQ
    /// (`ibv_get_srq_num`); `None` for a basic SRQ.
    pub fn xrc_srqn(&self) -> Option<u32> {
        match &self.inner {
            SrqInner::Model(srq) => srq.is_xrc().then(|| srq.srqn()),
            SrqInner::Verbs(srq) => srq.xrc_srqn(),
        }
    }

    /// The `struct ibv_srq` behind an SRQ on a real device, for tests that attach it as an
    /// application's own (`Cq::attach_srq`).
    #[cfg(test)]
    pub(crate) fn verbs_ptr(&self) -> Option<core::ptr::NonNull<core::ffi::c_void>> {
        match &self.inner {
            SrqInner::Verbs(srq) => core::ptr::NonNull::new(srq.as_ptr().cast()),
            SrqInner::Model(_) => None,
        }
    }

    /// Posts receives to the SRQ.
    ///
    /// # Errors
    ///
    /// As [`Qp::post_recv`] (the number named is 0: SRQs have none here).
    pub fn post_recv(&self, wrs: &[RecvWr<'_>]) -> Result<(), Error> {
        let verbs = !matches!(self.inner, SrqInner::Model(_));
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        hold_written(&mut held, &self.device, verbs, wrs.iter().map(|w| w.sg_list))?;
        drop(held);
        match &self.inner {
            SrqInner::Model(srq) => srq.post_recv(wrs).map_err(|e| model_post_error(&self.device, srq.srqn(), e)),
            SrqInner::Verbs(srq) => srq.post_recv(wrs).map_err(|f| post_error(&self.device, 0, f)),
        }
    }
}
