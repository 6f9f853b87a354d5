//! The rdma-core objects behind dvcq's handles, for programs that mix dvcq with their
//! own verbs calls (or another binding's): `as_raw` gives the `struct ibv_*` pointer,
//! type-erased so that the API is the same whatever bindings the program uses (cast it to
//! `*mut ibv_context`, `*mut ibv_pd`, ... of those).
//!
//! On a model there is no rdma-core object: `as_raw` is `None` there. The pointer stays
//! valid while the handle lives (a QP's and an SRQ's while the handle does; a region's
//! while it is registered); the caller must not destroy, deregister or modify what it
//! points to in ways dvcq does not expect (destroying it, moving a QP's state under dvcq).

use super::mr::MrInner;
use super::Mr;
use super::{Context, Inner, Pd, PdInner};
use crate::error::Error;
use core::ffi::c_void;
use core::ptr::NonNull;

impl Context {
    /// The `struct ibv_context` behind it; `None` on a model.
    pub fn as_raw(&self) -> Option<NonNull<c_void>> {
        match &self.inner {
            Inner::Model(_) => None,
            Inner::Verbs { ctx, .. } => NonNull::new(ctx.as_ptr().cast()),
        }
    }
}

impl Pd {
    /// The `struct ibv_pd` behind it; `None` on a model.
    pub fn as_raw(&self) -> Option<NonNull<c_void>> {
        match &self.inner {
            PdInner::Model(_) => None,
            PdInner::Verbs { pd, .. } => NonNull::new(pd.as_ptr().cast()),
        }
    }
}

impl Mr {
    /// The `struct ibv_mr` behind it; `None` on a model.
    pub fn as_raw(&self) -> Option<NonNull<c_void>> {
        match &self.inner {
            MrInner::Model(_) => None,
            MrInner::Verbs(mr) => NonNull::new(mr.as_ptr().cast()),
        }
    }
}

#[allow(unsafe_code)] // takes the application's `struct ibv_context *`
impl Context {
    /// Adopts an `ibv_context` the application opened (`struct ibv_context *`). dvcq never
    /// closes it.
    ///
    /// # Errors
    ///
    /// [`Error::NoRdmaCore`] where libibverbs cannot be loaded (an application that opened a
    /// context has it loaded: dvcq finds the same library; `DVCQ_NO_RDMA_CORE=1` says no).
    ///
    /// # Safety
    ///
    /// `ctx` points to a live `struct ibv_context` that stays open while this `Context` or
    /// anything made from it exists. (Where rdma-core cannot be loaded the call fails
    /// before it reads `ctx`.)
    pub unsafe fn from_raw(ctx: NonNull<c_void>) -> Result<Context, Error> {
        crate::sys::loader::verbs_loaded()
            .map_err(|e| Error::NoRdmaCore { what: "adopting an application's ibv_context".into(), why: e.why })?;
        // SAFETY: the caller's promise, passed on.
        let ctx = unsafe { crate::sys::device::Context::borrowed(ctx.as_ptr().cast()) };
        let (port, gid_index) = crate::device::default_port_and_gid(&ctx);
        let name = ctx.name().to_string();
        Ok(Context { inner: Inner::Verbs { ctx, port, gid_index }, name })
    }
}
