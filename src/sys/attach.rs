//! Adopting what the application made with rdma-core: its context and its CQs, so an
//! existing program switches its poll loop to dvcq and changes nothing else.

use super::cq::VerbsCq;
use super::device::Context as VerbsContext;
use super::ffi;
use crate::context::{Context, Inner};
use crate::cq::{BackendChoice, BackendKind, Cq, Poller};
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
    /// the CQ. On mlx5 the direct backend polls the ring `mlx5dv_init_obj` reports; on
    /// irdma (E810, X722, GEN3) the ring, shadow area and consumer state found in the
    /// provider's private `struct irdma_ucq`, read with the layout of the rdma-core release
    /// loaded and checked first (docs/irdma-attach.md). Name the QPs that complete on it
    /// with [`Cq::attach_qp`] (and, on mlx5, their memory with [`Cq::attach_mr`]) before
    /// their first completion.
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
    /// `Cq` and every QP made on it through dvcq are gone, and does not poll, arm
    /// (`ibv_req_notify_cq`), resize or destroy meanwhile except through dvcq.
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
        let origin = crate::backend::Origin::Application;
        let (poller, backend) = crate::backend::choose_for(ctx.name(), vctx, verbs, choice, origin)?;
        Ok(Cq::new(poller, backend, ctx.name().to_string(), depth))
    }

    /// Names a QP the application created with rdma-core (`struct ibv_qp *`) whose send or
    /// receive queue (or both) completes on this CQ, so that its completions carry the
    /// `wr_id`s it posts with `ibv_post_send` / `ibv_post_recv` / `ibv_wr_*`, which go on
    /// working unchanged. Call it before the QP's first completion reaches this CQ, and
    /// on each attached CQ the QP uses.
    ///
    /// On the mlx5 direct backend the QP's private rdma-core struct is read with the
    /// layout of the release loaded and checked against `mlx5dv_init_obj`'s public facts
    /// first; on the irdma one its `struct irdma_uqp` is checked against the public
    /// `ibv_qp`, the CQ and the context. Its wr_id tables are then mirrored once per poll
    /// call and the queue tails written back as rdma-core's own poll does, so posts see
    /// the room completions make.
    /// On the generic and rxe backends completions already carry rdma-core's (or the
    /// kernel's) `wr_id`s, and only the QP's context is checked.
    ///
    /// # Errors
    ///
    /// [`Error::Mismatch`] for a QP of another context, or on a model CQ;
    /// [`Error::Attach`] naming the QP and the failed check (neither of its CQs is this
    /// one, it receives from an SRQ, a private field disagrees with `mlx5dv_qp` or with the
    /// CQ's context, attached twice). On error nothing was registered and the CQ polls as before. A CQ attached
    /// with `BackendChoice::Auto` that has not consumed a completion yet does not fail:
    /// rdma-core's `ibv_poll_cq` takes it over and [`Cq::backend`] says why.
    ///
    /// # Safety
    ///
    /// `qp` points to a live `struct ibv_qp` that the application destroys only after this
    /// `Cq` is gone, and posts to only on the thread that polls this `Cq` or ordered with
    /// its polls (a lock, a channel): the direct poll reads the QP's WQE buffers for inline
    /// scatter, and the tables rdma-core's posts write.
    pub unsafe fn attach_qp(&mut self, qp: NonNull<c_void>) -> Result<(), Error> {
        let qp = qp.as_ptr().cast::<ffi::ibv_qp>();
        let device = self.device().to_string();
        let mismatch = |what: String| Error::Mismatch { device: device.clone(), what };
        let ctx = match &self.poller {
            Poller::Generic(g) => g.verbs_cq().context_ptr(),
            Poller::Rxe(r) => r.verbs_cq().context_ptr(),
            Poller::Mlx5(m) => m.expect().0 as *mut ffi::ibv_context,
            Poller::Irdma(m) => m.expect().0.ctx as *mut ffi::ibv_context,
            Poller::Model(_) => return Err(mismatch("a model CQ has no rdma-core QPs to attach".into())),
        };
        // SAFETY: the caller's live QP; a read of its public `context` field.
        let (qp_ctx, qpn) = unsafe { ((*qp).context, (*qp).qp_num) };
        if qp_ctx != ctx {
            return Err(mismatch(format!("qp {qpn:#x} belongs to another device context than the CQ")));
        }
        let (backend, adopted, fallback) = match &mut self.poller {
            Poller::Mlx5(m) => {
                let adopted = (|| {
                    // SAFETY: the caller's live QP, of this CQ's context, which the mlx5
                    // provider serves (the backend was chosen by the context's provider
                    // library).
                    let dv = unsafe { super::mlx5::init_qp(qp) }.map_err(|e| format!("qp {qpn:#x}: {e}"))?;
                    let (ctx, cq, layout, cqe_v1) = m.expect();
                    // SAFETY: as above: an mlx5 QP, so it sits in a `struct mlx5_qp`, and
                    // `layout` is the row of the release loaded (picked at the CQ's
                    // attach). The caller keeps the QP alive for the Cq's life, which
                    // bounds the pointers kept into it.
                    let private =
                        unsafe { super::mlx5::read_qp(qp, &dv, layout, ctx as *mut _, cq as *mut _, cqe_v1) }?;
                    m.adopt(private)
                })();
                ("mlx5", adopted, m.verbs_cq().filter(|_| m.can_fall_back()).cloned())
            }
            Poller::Irdma(m) => {
                let (cq, layout) = m.expect();
                // SAFETY: the caller's live QP, of this CQ's context, which the irdma
                // provider serves (the backend was chosen by the context's provider
                // library), so it sits in a `struct irdma_uqp`; `layout` is the row of the
                // release loaded (picked at the CQ's attach). The caller keeps the QP alive
                // for the Cq's life, which bounds the pointers kept into it.
                let adopted = unsafe { super::irdma::read_qp(qp, cq, layout) }.and_then(|p| m.adopt(p));
                ("irdma", adopted, m.verbs_cq().filter(|_| m.can_fall_back()).cloned())
            }
            _ => return Ok(()),
        };
        let Err(reason) = adopted else {
            return Ok(());
        };
        // Refused: with BackendChoice::Auto and nothing consumed yet, rdma-core's own poll
        // takes the CQ over (its consumer state is still right); otherwise the error.
        match fallback {
            Some(verbs) => {
                let why = format!("rdma-core's ibv_poll_cq: direct {backend} attach refused: {reason}");
                let generic = Poller::Generic(crate::backend::generic::GenericCq::new(verbs));
                self.fall_back(generic, crate::context::backend(BackendKind::Generic, why));
                Ok(())
            }
            None => Err(Error::Attach { device, backend, reason }),
        }
    }

    /// Names a memory region the application registered (`struct ibv_mr *`) that receives
    /// and READ responses of the attached QPs land in, so that data the device delivered
    /// inside a CQE (inline scatter, on by default for rdma-core's RC QPs) is copied there,
    /// as rdma-core's own poll copies it. dvcq copies only inside regions named here; a
    /// completion whose data would go elsewhere has status `IBV_WC_LOC_PROT_ERR`. Nothing
    /// to do on the generic, rxe and irdma backends (irdma CQEs carry no data).
    ///
    /// # Errors
    ///
    /// [`Error::Attach`] for an lkey named before; [`Error::Mismatch`] on a model CQ.
    ///
    /// # Safety
    ///
    /// `mr` points to a live `struct ibv_mr` whose memory stays registered and allocated
    /// until this `Cq` is gone, and which the application reads only after the poll that
    /// returned a completion for it and writes only between polls, on the polling thread
    /// or ordered with the polls (`dvcq_provider::MemoryRegion::new`'s contract).
    pub unsafe fn attach_mr(&mut self, mr: NonNull<c_void>) -> Result<(), Error> {
        let device = self.device().to_string();
        match &mut self.poller {
            Poller::Mlx5(m) => {
                // SAFETY: the caller's promise, passed on.
                let region = unsafe { super::mlx5::region_of(mr.as_ptr().cast()) };
                region.and_then(|r| m.add_region(r)).map_err(|reason| Error::Attach { device, backend: "mlx5", reason })
            }
            Poller::Model(_) => {
                Err(Error::Mismatch { device, what: "a model CQ has no rdma-core memory regions to attach".into() })
            }
            _ => Ok(()),
        }
    }
}

#[cfg(feature = "rdma-sys")]
mod rdma_sys_interop {
    use super::*;
    use static_assertions::const_assert_eq;

    // rdma-sys binds the same C structs; the casts below rely on the layouts being one.
    const_assert_eq!(core::mem::size_of::<rdma_sys::ibv_cq>(), core::mem::size_of::<ffi::ibv_cq>());
    const_assert_eq!(core::mem::size_of::<rdma_sys::ibv_context>(), core::mem::size_of::<ffi::ibv_context>());
    const_assert_eq!(core::mem::size_of::<rdma_sys::ibv_qp>(), core::mem::size_of::<ffi::ibv_qp>());
    const_assert_eq!(core::mem::size_of::<rdma_sys::ibv_mr>(), core::mem::size_of::<ffi::ibv_mr>());

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

        /// [`Cq::attach_qp`] for an application built on `rdma-sys`.
        ///
        /// # Errors
        ///
        /// As [`Cq::attach_qp`].
        ///
        /// # Safety
        ///
        /// As [`Cq::attach_qp`].
        pub unsafe fn attach_qp_rdma_sys(&mut self, qp: NonNull<rdma_sys::ibv_qp>) -> Result<(), Error> {
            // SAFETY: the same struct; the caller's promise is passed on.
            unsafe { self.attach_qp(qp.cast()) }
        }

        /// [`Cq::attach_mr`] for an application built on `rdma-sys`.
        ///
        /// # Errors
        ///
        /// As [`Cq::attach_mr`].
        ///
        /// # Safety
        ///
        /// As [`Cq::attach_mr`].
        pub unsafe fn attach_mr_rdma_sys(&mut self, mr: NonNull<rdma_sys::ibv_mr>) -> Result<(), Error> {
            // SAFETY: the same struct; the caller's promise is passed on.
            unsafe { self.attach_mr(mr.cast()) }
        }
    }
}
