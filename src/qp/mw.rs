//! Type-2 memory windows: a remote key over part of a registered region, bound by a work
//! request on one RC QP, answered on that QP only, and invalidated by a peer's
//! SEND_WITH_INV (or rebound once free).

use super::{model_post_error, post_error, Qp, QpInner};
use crate::context::mr::MrInner;
use crate::context::{Mr, Pd, PdInner};
use crate::error::Error;
use crate::sys;
use crate::verbs::{inc_rkey, Access, MwBind, QpType, SendOp, SendWr};
use std::sync::Arc;

/// A type-2 memory window (`ibv_alloc_mw(pd, IBV_MW_TYPE_2)`), deallocated on drop.
///
/// It is free until [`Qp::bind_mw`] binds it over a range of a region; from the bind's
/// completion on, a peer reaches that range with [`Mw::rkey`] through the QP that bound it,
/// within the rights the bind gave. A peer's SEND_WITH_INV naming the rkey frees it again
/// (the receiver's completion says `IBV_WC_WITH_INV`); then it may be bound anew, with the
/// next rkey.
///
/// # Lifetimes
///
/// A window bound over a region keeps that region registered (and its memory mapped) until
/// the window is dropped or bound over another region: dropping the [`Mr`] first only
/// defers its deregistration, so the device never reaches freed memory through the window.
#[derive(Debug)]
pub struct Mw {
    // Dropped first: the window is deallocated before the region it held is released.
    inner: MwInner,
    bound: Option<Held>,
    rkey: u32,
    device: String,
}

#[derive(Debug)]
enum MwInner {
    // Held for its allocation: dropping it deallocates the model's window.
    Model(#[allow(dead_code)] crate::model_device::ModelMw),
    Verbs(sys::qp::Mw),
}

/// The region a window was last bound over, held registered.
#[derive(Debug)]
enum Held {
    // Held for its registration only: the model's window entry reaches the memory itself.
    Model(#[allow(dead_code)] crate::model_device::ModelMr),
    Verbs(#[allow(dead_code)] Arc<sys::qp::Mr>),
}

impl Pd {
    /// Allocates a type-2 memory window in this PD.
    ///
    /// # Errors
    ///
    /// rdma-core failed (`EOPNOTSUPP` from a provider without memory windows).
    pub fn alloc_mw(&self) -> Result<Mw, Error> {
        match &self.inner {
            PdInner::Model(m) => {
                let mw = m.alloc_mw();
                let rkey = mw.rkey();
                Ok(Mw { inner: MwInner::Model(mw), bound: None, rkey, device: self.device.clone() })
            }
            PdInner::Verbs { pd, .. } => {
                let mw = sys::qp::Mw::new(pd).map_err(|source| Error::Verbs { device: self.device.clone(), source })?;
                let rkey = mw.rkey();
                Ok(Mw { inner: MwInner::Verbs(mw), bound: None, rkey, device: self.device.clone() })
            }
        }
    }
}

impl Mw {
    /// The rkey a peer names: the one it was allocated with until a bind is posted, then
    /// the one the last bind gave it.
    pub fn rkey(&self) -> u32 {
        self.rkey
    }

    /// The device it belongs to.
    pub fn device(&self) -> &str {
        &self.device
    }
}

/// The rights a window may give (`mw_access_flags`): remote read and write.
const WINDOW_RIGHTS: Access = Access::REMOTE_READ.union(Access::REMOTE_WRITE);

impl Qp {
    /// Binds `mw` over `len` bytes at `offset` in `mr` with the remote rights `access`
    /// (`ibv_post_send` of an `IBV_WR_BIND_MW` request, always signaled: its completion,
    /// `IBV_WC_BIND_MW` with `wr_id`, says the window is usable). Returns the window's new
    /// rkey (`ibv_inc_rkey` of the old one), which [`Mw::rkey`] then gives too. Remote
    /// requests through it must arrive on this QP.
    ///
    /// # Errors
    ///
    /// [`Error::MwBind`] before anything is posted when the bind cannot be right: a UD QP,
    /// a window or region of another device, an empty range or one outside the region, a
    /// region registered without [`Access::MW_BIND`], rights beyond remote read and write,
    /// remote write over a region without [`Access::LOCAL_WRITE`]. [`Error::Post`] when the
    /// device refused the post. A window that is already bound (type-2 windows must be free)
    /// is the device's to refuse: its completion is `IBV_WC_MW_BIND_ERR`.
    pub fn bind_mw(
        &mut self,
        wr_id: u64,
        mw: &mut Mw,
        mr: &Mr,
        offset: u64,
        len: u64,
        access: Access,
    ) -> Result<u32, Error> {
        let refuse = |why: String| Error::MwBind { device: self.device.clone(), why };
        if self.qp_type != QpType::Rc {
            return Err(refuse(format!("QP {:#x} is {}: windows are bound on RC QPs", self.qpn, self.qp_type.name())));
        }
        if mw.device != self.device || mr.device() != self.device {
            return Err(refuse(format!(
                "the window ({}) and the region ({}) must be of this QP's device",
                mw.device,
                mr.device()
            )));
        }
        if len == 0 {
            return Err(refuse("a bind of 0 bytes (a type-2 window is freed by invalidation, not by binding)".into()));
        }
        mr.check(offset, len)
            .map_err(|_| refuse(format!("bytes {offset}..+{len} are outside the {}-byte memory region", mr.len())))?;
        if !mr.access().contains(Access::MW_BIND) {
            return Err(refuse(format!(
                "the region (access {:#x}) was registered without Access::MW_BIND",
                mr.access().bits()
            )));
        }
        if WINDOW_RIGHTS.union(access) != WINDOW_RIGHTS {
            return Err(refuse(format!(
                "access {:#x}: a window gives remote read and write ({:#x}) only",
                access.bits(),
                WINDOW_RIGHTS.bits()
            )));
        }
        if access.contains(Access::REMOTE_WRITE) && !mr.access().contains(Access::LOCAL_WRITE) {
            return Err(refuse("a writable window over a region without Access::LOCAL_WRITE".into()));
        }
        let new_rkey = inc_rkey(mw.rkey);
        let addr = mr.addr() + offset;
        match (&mut self.inner, &mut mw.inner, &mr.inner) {
            (QpInner::Model(qp), MwInner::Model(_), MrInner::Model(region)) => {
                let b = MwBind { mw_rkey: mw.rkey, new_rkey, mr_lkey: mr.lkey(), addr, len, access };
                qp.post_send(&[SendWr::new(wr_id, SendOp::BindMw(b), &[])])
                    .map_err(|e| model_post_error(&self.device, self.qpn, e))?;
                mw.bound = Some(Held::Model(region.clone()));
            }
            (QpInner::Verbs(qp), MwInner::Verbs(w), MrInner::Verbs(region)) => {
                if !qp.same_pd(w, region) {
                    return Err(refuse("the window, the region and the QP must be of one protection domain".into()));
                }
                let b = sys::qp::Bind { wr_id, signaled: true, new_rkey, addr, len, access };
                qp.post_bind(w, region, &b).map_err(|f| post_error(&self.device, self.qpn, f))?;
                mw.bound = Some(Held::Verbs(Arc::clone(region)));
            }
            #[allow(unreachable_patterns)]
            _ => return Err(refuse("the window, the region and the QP must be of one device".into())),
        }
        mw.rkey = new_rkey;
        Ok(new_rkey)
    }
}
