//! Adopting what the application made with rdma-core: its context and its CQs, so an
//! existing program switches its poll loop to dvcq and changes nothing else.

use super::cq::VerbsCq;
use super::device::Context as VerbsContext;
use super::ffi;
use crate::context::{Context, Inner};
use crate::cq::{BackendChoice, Cq};
use crate::device;
use crate::error::Error;
use core::ffi::c_void;
use core::ptr::NonNull;

impl Context {
    /// Adopts an `ibv_context` the application opened (`struct ibv_context *`). dvcq never
    /// closes it.
    ///
    /// # Safety
    ///
    /// `ctx` points to a live `struct ibv_context` that stays open while this `Context` or
    /// anything made from it exists.
    pub unsafe fn from_raw(ctx: NonNull<c_void>) -> Context {
        // SAFETY: the caller's promise, passed on.
        let ctx = unsafe { VerbsContext::borrowed(ctx.as_ptr().cast()) };
        let (port, gid_index) = device::default_port_and_gid(&ctx);
        let name = ctx.name().to_string();
        Context { inner: Inner::Verbs { ctx, port, gid_index }, name }
    }
}

impl Cq {
    /// Adopts an `ibv_cq` the application created on `ctx` (`struct ibv_cq *`), polled by
    /// the backend `choice` allows, as [`Context::create_cq`] picks it. dvcq never destroys
    /// the CQ.
    ///
    /// # Errors
    ///
    /// [`Error::Mismatch`] for a CQ of another context or a model context;
    /// [`Error::Attach`] when `BackendChoice::Direct` was asked and no direct backend could
    /// attach.
    ///
    /// # Safety
    ///
    /// `cq` points to a live `struct ibv_cq` that the application destroys only after this
    /// `Cq` and every QP made on it through dvcq are gone, and does not poll, resize or
    /// destroy meanwhile except through dvcq.
    pub unsafe fn attach(ctx: &Context, cq: NonNull<c_void>, choice: BackendChoice) -> Result<Cq, Error> {
        let Inner::Verbs { ctx: vctx, .. } = &ctx.inner else {
            return Err(Error::Mismatch {
                device: ctx.name().to_string(),
                what: "a model context has no rdma-core CQs to attach".into(),
            });
        };
        // SAFETY: the caller's promise: a live CQ; dvcq only reads it and never destroys it.
        let verbs = unsafe { VerbsCq::borrowed(vctx, cq.as_ptr().cast::<ffi::ibv_cq>()) };
        if verbs.context_ptr() != vctx.as_ptr() {
            return Err(Error::Mismatch {
                device: ctx.name().to_string(),
                what: "the CQ to attach belongs to another device context".into(),
            });
        }
        let depth = verbs.depth();
        let (poller, backend) = crate::backend::choose(ctx.name(), vctx, verbs, choice)?;
        Ok(Cq::new(poller, backend, ctx.name().to_string(), depth))
    }
}

#[cfg(feature = "rdma-sys")]
mod rdma_sys_interop {
    use super::*;
    use static_assertions::const_assert_eq;

    // rdma-sys binds the same C structs; the casts below rely on the layouts being one.
    const_assert_eq!(core::mem::size_of::<rdma_sys::ibv_cq>(), core::mem::size_of::<ffi::ibv_cq>());
    const_assert_eq!(core::mem::size_of::<rdma_sys::ibv_context>(), core::mem::size_of::<ffi::ibv_context>());

    impl Context {
        /// [`Context::from_raw`] for an application built on `rdma-sys`.
        ///
        /// # Safety
        ///
        /// As [`Context::from_raw`].
        pub unsafe fn from_rdma_sys(ctx: NonNull<rdma_sys::ibv_context>) -> Context {
            // SAFETY: the same struct; the caller's promise is passed on.
            unsafe { Context::from_raw(ctx.cast()) }
        }
    }

    impl Cq {
        /// [`Cq::attach`] for an application built on `rdma-sys`.
        ///
        /// # Errors
        ///
        /// As [`Cq::attach`].
        ///
        /// # Safety
        ///
        /// As [`Cq::attach`].
        pub unsafe fn attach_rdma_sys(
            ctx: &Context,
            cq: NonNull<rdma_sys::ibv_cq>,
            choice: BackendChoice,
        ) -> Result<Cq, Error> {
            // SAFETY: the same struct; the caller's promise is passed on.
            unsafe { Cq::attach(ctx, cq.cast(), choice) }
        }
    }
}
