//! Adopting what the application made with rdma-core: its context and its CQs, so an
//! existing program switches its poll loop to dvcq and changes nothing else.
//!
//! The entry points take the application's `struct ibv_*` pointers, type-erased, and are
//! `unsafe` for the promises about them; the reads through them are `dvcq::sys`'s
//! (`crate::sys::mlx5::read_qp`, ...), each called here under the caller's promise.
#![allow(unsafe_code)]

use super::{BackendChoice, BackendKind, Cq, Poller};
use crate::channel::CompletionChannel;
use crate::channel::Source;
use crate::context::{Context, Inner};
use crate::error::Error;
use crate::sys::cq::VerbsCq;
use crate::sys::ffi;
use core::ffi::c_void;
use core::ptr::NonNull;

impl Cq {
    /// The rdma-core device context this CQ was made on, which a QP, SRQ or WQ (`what`)
    /// attached to it must share; a model CQ has none.
    fn rdma_core_context(&self, what: &str) -> Result<*mut ffi::ibv_context, Error> {
        Ok(match &self.poller {
            Poller::Generic(g) => g.verbs_cq().context_ptr(),
            Poller::Rxe(r) => r.verbs_cq().context_ptr(),
            Poller::Mlx5(m) => m.expect().0 as *mut ffi::ibv_context,
            Poller::Irdma(m) => m.expect().0.ctx as *mut ffi::ibv_context,
            Poller::Model(_) => {
                let what = format!("a model CQ has no rdma-core {what} to attach");
                return Err(Error::Mismatch { device: self.device().to_string(), what });
            }
        })
    }

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
    /// [`Error::Mismatch`] for a CQ of another context or a model context, or one that a
    /// live `Cq` of this process has attached already (two pollers would each replay every
    /// completion; it can be attached again once that `Cq` and its QPs are gone);
    /// [`Error::Attach`] when `BackendChoice::Direct` was asked and no direct backend could
    /// attach.
    ///
    /// # What the attach does to the application's CQ
    ///
    /// On mlx5 the direct backend calls `mlx5dv_init_obj`, which marks the CQ as owned by
    /// direct verbs (`MLX5_CQ_FLAGS_DV_OWNED`): rdma-core then no longer removes the CQEs of a
    /// QP the application destroys (or moves to RESET) from the ring, and dvcq's poll
    /// returns any such CQE as an `UnknownQp` fault item once the QP's handle is gone. Every
    /// check that can refuse without it runs first (the layout row of the provider's release,
    /// the allocation holding it, the private struct against itself and the public
    /// `ibv_cq`); when a check after it refuses, or a refused [`Cq::attach_qp`],
    /// [`Cq::attach_srq`] or [`Cq::attach_wq`] hands the CQ to rdma-core's `ibv_poll_cq`,
    /// the flag is cleared again if the attach set it, so rdma-core polls and cleans the CQ
    /// as before. A CQ the direct backend attached stays marked for its life (the flag
    /// is also how an application's own direct-verbs code would find it). The irdma and
    /// rxe backends only read the provider's memory at attach; their polls write what
    /// rdma-core's own poll writes (consumer state, queue tails).
    ///
    /// Event mode: [`Cq::arm`] and [`Cq::wait`] work on an attached CQ. A CQ the
    /// application created on a completion channel is bound to it with
    /// [`Cq::bind_channel`] (the channel adopted with [`CompletionChannel::from_raw`]). On the
    /// mlx5 direct backend dvcq arms through its own doorbells, since rdma-core's
    /// `ibv_req_notify_cq` would arm at rdma-core's stale consumer index; events read with
    /// the application's own `ibv_get_cq_event` count too (they advance rdma-core's
    /// `arm_sn`, which dvcq's arm reads). dvcq has no resize, and `ibv_resize_cq` must not be
    /// called on an attached CQ: rdma-core's copy of the CQEs starts at its own stale
    /// consumer index and frees the ring dvcq polls.
    ///
    /// # Safety
    ///
    /// `cq` points to a live `struct ibv_cq` that the application destroys only after this
    /// `Cq` and every QP made on it through dvcq are gone, and does not poll, arm
    /// (`ibv_req_notify_cq`), resize (`ibv_resize_cq`) or destroy meanwhile except through
    /// dvcq.
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
        let claim = crate::sys::claim::Claim::take(cq.as_ptr() as usize)
            .map_err(|what| Error::Mismatch { device: ctx.name().to_string(), what })?;
        verbs.hold(claim);
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
    /// the room completions make. On mlx5 a QP that receives from an SRQ brings the SRQ
    /// along ([`Cq::attach_srq`]) when its receives complete here.
    /// On the generic and rxe backends completions already carry rdma-core's (or the
    /// kernel's) `wr_id`s, and only the QP's context is checked.
    ///
    /// # Errors
    ///
    /// [`Error::Mismatch`] for a QP of another context, or on a model CQ;
    /// [`Error::Attach`] naming the QP and the failed check (neither of its CQs is this
    /// one, a private field disagrees with `mlx5dv_qp` or with the CQ's context, attached
    /// twice, its SRQ refused as [`Cq::attach_srq`] refuses one, an irdma QP on an SRQ). On
    /// error nothing was registered and the CQ polls as before. A CQ attached
    /// with `BackendChoice::Auto` that has not consumed a completion yet does not fail:
    /// rdma-core's `ibv_poll_cq` takes it over and [`Cq::backend`] says why.
    ///
    /// # Safety
    ///
    /// `qp` points to a live `struct ibv_qp` that the application destroys only after this
    /// `Cq` is gone or after [`Cq::detach_qp`], and posts to only on the thread that polls this `Cq` or ordered with
    /// its polls (a lock, a channel): the direct poll reads the QP's WQE buffers for inline
    /// scatter, and the tables rdma-core's posts write.
    pub unsafe fn attach_qp(&mut self, qp: NonNull<c_void>) -> Result<(), Error> {
        let qp = qp.as_ptr().cast::<ffi::ibv_qp>();
        let device = self.device().to_string();
        let mismatch = |what: String| Error::Mismatch { device: device.clone(), what };
        let ctx = self.rdma_core_context("QPs")?;
        // SAFETY: the caller's live QP; a read of its public `context` field.
        let (qp_ctx, qpn) = unsafe { ((*qp).context, (*qp).qp_num) };
        if qp_ctx != ctx {
            return Err(mismatch(format!("qp {qpn:#x} belongs to another device context than the CQ")));
        }
        let (backend, adopted, fallback) = match &mut self.poller {
            Poller::Mlx5(m) => {
                let adopted = (|| {
                    // SAFETY: the caller's live QP, of this CQ's context, which the mlx5 provider serves (the backend was chosen by the context's provider library).
                    let dv = unsafe { crate::sys::mlx5::init_qp(qp) }.map_err(|e| format!("qp {qpn:#x}: {e}"))?;
                    let (ctx, cq, layout, cqe_v1) = m.expect();
                    let private = {
                        // SAFETY: as above: an mlx5 QP, so it sits in a `struct mlx5_qp`, and `layout` is the row of the release loaded (picked at the CQ's attach). The caller keeps the QP alive for the Cq's life, which bounds the pointers kept into it.
                        unsafe { crate::sys::mlx5::read_qp(qp, &dv, layout, ctx as *mut _, cq as *mut _, cqe_v1) }
                    }?;
                    if let Some(srq) = private.srq.filter(|&s| m.srq_adopted(s).is_none()) {
                        if m.has_qp(qpn) {
                            return Err(format!("qp {qpn:#x} is attached to this CQ already"));
                        }
                        // SAFETY: the QP's own SRQ (`ibv_qp.srq`), of the same mlx5 context; the caller's promise about the QP covers the SRQ it receives from.
                        unsafe { adopt_srq(m, srq as *mut ffi::ibv_srq) }.map_err(|e| format!("qp {qpn:#x}: {e}"))?;
                    }
                    m.adopt(private)
                })();
                ("mlx5", adopted, m.verbs_cq().filter(|_| m.can_fall_back()).cloned())
            }
            Poller::Irdma(m) => {
                let (cq, layout) = m.expect();
                // SAFETY: the caller's live QP, of this CQ's context, which the irdma provider serves (the backend was chosen by the context's provider library), so it sits in a `struct irdma_uqp`; `layout` is the row of the release loaded (picked at the CQ's attach). The caller keeps the QP alive for the Cq's life, which bounds the pointers kept into it.
                let adopted = unsafe { crate::sys::irdma::read_qp(qp, cq, layout) }.and_then(|p| m.adopt(p));
                ("irdma", adopted, m.verbs_cq().filter(|_| m.can_fall_back()).cloned())
            }
            _ => return Ok(()),
        };
        self.refused_or_fallback(backend, adopted, fallback)
    }

    /// Names an SRQ the application created with rdma-core (`struct ibv_srq *`) that QPs
    /// completing on this CQ receive from, so that their receive completions carry the
    /// `wr_id`s it posts with `ibv_post_srq_recv`, which goes on working unchanged.
    /// [`Cq::attach_qp`] names a QP's SRQ itself; call this to attach the SRQ before any
    /// of its QPs.
    ///
    /// On the mlx5 direct backend the SRQ's private rdma-core struct is read with the
    /// layout of the release loaded and checked against `mlx5dv_init_obj`'s public facts
    /// first; its wr_id table is then mirrored once per poll call (following the free
    /// list's links from the head the mirror saw to rdma-core's), and every completed WQE
    /// is given back to rdma-core's free list after the poll, as rdma-core's own poll does
    /// (`mlx5_free_srq_wqe`: linked behind the tail up to v47, marked in the free bitmap
    /// from v48), so posts find it again. Receives on an attached SRQ take the poller's
    /// slow path. Nothing to do on the generic and rxe backends beyond the context check.
    ///
    /// An XRC SRQ (`ibv_create_srq_ex` with `IBV_SRQT_XRC`) is attached to the CQ it was
    /// created with (`ibv_srq_init_attr_ex.cq`), on a context with CQEs of version 1: its
    /// receives complete here by the user index rdma-core gave it, whichever XRC QP they
    /// arrived on.
    ///
    /// # Errors
    ///
    /// As [`Cq::attach_qp`], for an SRQ: another context, a tag-matching SRQ, an XRC SRQ of
    /// another CQ or on a CQE-version-0 context, WQE signatures, a private field that
    /// disagrees with `mlx5dv_srq`, attached twice.
    ///
    /// # Safety
    ///
    /// `srq` points to a live `struct ibv_srq` that the application destroys only after
    /// this `Cq` is gone or after [`Cq::detach_srq`], and posts to only on the thread that polls this `Cq` or ordered
    /// with its polls. An SRQ attached to several `Cq`s has all of them polled on one
    /// thread or under one lock: each gives completed WQEs back to the SRQ's free list.
    pub unsafe fn attach_srq(&mut self, srq: NonNull<c_void>) -> Result<(), Error> {
        let srq = srq.as_ptr().cast::<ffi::ibv_srq>();
        let device = self.device().to_string();
        let ctx = self.rdma_core_context("SRQs")?;
        // SAFETY: the caller's live SRQ; a read of its public `context` field.
        if unsafe { (*srq).context } != ctx {
            return Err(Error::Mismatch {
                device,
                what: "the SRQ belongs to another device context than the CQ".into(),
            });
        }
        let Poller::Mlx5(m) = &mut self.poller else {
            return Ok(());
        };
        // SAFETY: the caller's live SRQ of this CQ's mlx5 context, kept for the Cq's life.
        let adopted = unsafe { adopt_srq(m, srq) }.map(|_| ());
        let fallback = m.verbs_cq().filter(|_| m.can_fall_back()).cloned();
        self.refused_or_fallback("mlx5", adopted, fallback)
    }

    /// Names a receive work queue the application created with rdma-core (`struct ibv_wq
    /// *`, `ibv_create_wq`: the queues an RSS QP spreads its receives over) that completes
    /// on this CQ, so that its completions carry the `wr_id`s it posts with
    /// `ibv_post_wq_recv`, which goes on working unchanged. Call it before the WQ's first
    /// completion reaches this CQ.
    ///
    /// On the mlx5 direct backend the WQ's private rdma-core struct (`struct mlx5_rwq`) is
    /// read with the layout of the release loaded and checked against `mlx5dv_init_obj`'s
    /// public facts first; its wr_id table is then mirrored once per poll call and its tail
    /// written back as rdma-core's own poll does, so posts see the room completions make.
    /// CQEs name a WQ by its user index, so the context must have CQEs of version 1 (every
    /// ConnectX rdma-core drives with WQs does). Nothing to do on the other backends beyond
    /// the context check.
    ///
    /// # Errors
    ///
    /// [`Error::Mismatch`] for a WQ of another context, or on a model CQ;
    /// [`Error::Attach`] naming the WQ and the failed check (its CQ is not this one, a
    /// private field disagrees with `mlx5dv_rwq`, attached twice). On error nothing was
    /// registered; a CQ attached with `BackendChoice::Auto` that has not consumed a
    /// completion yet is taken over by rdma-core's `ibv_poll_cq` instead, as
    /// [`Cq::attach_qp`] does.
    ///
    /// # Safety
    ///
    /// `wq` points to a live `struct ibv_wq` that the application destroys only after this
    /// `Cq` is gone or after [`Cq::detach_wq`], and posts to only on the thread that polls this `Cq` or ordered with
    /// its polls.
    pub unsafe fn attach_wq(&mut self, wq: NonNull<c_void>) -> Result<(), Error> {
        let wq = wq.as_ptr().cast::<ffi::ibv_wq>();
        let device = self.device().to_string();
        let ctx = self.rdma_core_context("WQs")?;
        // SAFETY: the caller's live WQ; a read of its public `context` and `wq_num` fields.
        let (wq_ctx, wqn) = unsafe { ((*wq).context, (*wq).wq_num) };
        if wq_ctx != ctx {
            return Err(Error::Mismatch {
                device,
                what: format!("wq {wqn:#x} belongs to another device context than the CQ"),
            });
        }
        let Poller::Mlx5(m) = &mut self.poller else {
            return Ok(());
        };
        let adopted = (|| {
            // SAFETY: the caller's live WQ, of this CQ's context, which the mlx5 provider serves (the backend was chosen by the context's provider library).
            let dv = unsafe { crate::sys::mlx5::init_rwq(wq) }.map_err(|e| format!("wq {wqn:#x}: {e}"))?;
            let (ctx, cq, layout, cqe_v1) = m.expect();
            // SAFETY: as above: an mlx5 WQ, so it sits in a `struct mlx5_rwq`, and `layout` is the row of the release loaded (picked at the CQ's attach). The caller keeps the WQ alive for the Cq's life, which bounds the pointers kept into it.
            let private = unsafe { crate::sys::mlx5::read_rwq(wq, &dv, layout, ctx as *mut _, cq as *mut _, cqe_v1) }?;
            m.adopt_rwq(wq as usize, private)
        })();
        let fallback = m.verbs_cq().filter(|_| m.can_fall_back()).cloned();
        self.refused_or_fallback("mlx5", adopted, fallback)
    }

    /// After a refused adoption on a direct backend: with `BackendChoice::Auto` and nothing
    /// consumed yet (`fallback` is the CQ then), rdma-core's own poll takes the CQ over (its
    /// consumer state is still right); otherwise the error.
    pub(crate) fn refused_or_fallback(
        &mut self,
        backend: &'static str,
        adopted: Result<(), String>,
        fallback: Option<std::sync::Arc<VerbsCq>>,
    ) -> Result<(), Error> {
        let Err(reason) = adopted else {
            return Ok(());
        };
        let device = self.device().to_string();
        match fallback {
            Some(verbs) => {
                // rdma-core polls the CQ again: undo what the attach's mlx5dv_init_obj did.
                if let Poller::Mlx5(m) = &mut self.poller {
                    m.give_cq_back();
                }
                let why = format!("rdma-core's ibv_poll_cq: direct {backend} attach refused: {reason}");
                let generic = Poller::Generic(crate::backend::generic::GenericCq::new(verbs));
                self.fall_back(generic, crate::backend::backend(BackendKind::Generic, why));
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
                let region = unsafe { crate::sys::mlx5::region_of(mr.as_ptr().cast()) };
                region.and_then(|r| m.add_region(r)).map_err(|reason| Error::Attach { device, backend: "mlx5", reason })
            }
            Poller::Model(_) => {
                Err(Error::Mismatch { device, what: "a model CQ has no rdma-core memory regions to attach".into() })
            }
            _ => Ok(()),
        }
    }
}

impl Cq {
    /// Binds an attached CQ to the completion channel the application created it on
    /// (`ibv_cq.channel`, adopted with [`CompletionChannel::from_raw`]): its events are read
    /// there, routed to this `Cq` and acknowledged (all of them before this `Cq` goes), so
    /// [`Cq::wait`] works on it. A CQ made with [`Context::create_cq_on`] is bound already.
    ///
    /// # Errors
    ///
    /// [`Error::Mismatch`] when the CQ was not created on that channel (or on none), is
    /// bound already, or is a model CQ.
    pub fn bind_channel(&mut self, channel: &CompletionChannel) -> Result<(), Error> {
        let device = self.device().to_string();
        let (id, bound) = (self.id(), self.channel().is_some());
        let mismatch = |why: String| Error::Mismatch { device: device.clone(), what: format!("{id}: {why}") };
        if bound {
            return Err(mismatch("the CQ is bound to a completion channel already".into()));
        }
        let Source::Verbs(ch) = channel.source() else {
            return Err(mismatch("a model channel serves model CQs only".into()));
        };
        let vcq = match &self.poller {
            Poller::Generic(g) => g.verbs_cq(),
            Poller::Rxe(r) => r.verbs_cq(),
            Poller::Mlx5(m) => m.verbs_cq().ok_or_else(|| mismatch("this mlx5 CQ has no rdma-core CQ".into()))?,
            Poller::Irdma(m) => m.verbs_cq().ok_or_else(|| mismatch("this irdma CQ has no rdma-core CQ".into()))?,
            Poller::Model(_) => return Err(mismatch("a model CQ has no rdma-core completion channel".into())),
        };
        vcq.adopt_channel(ch, id.get()).map_err(mismatch)?;
        self.bind(channel);
        Ok(())
    }
}

/// Reads, checks and adopts the rdma-core SRQ at `srq` into `m`; returns its number.
///
/// # Safety
///
/// `srq` is a live `ibv_srq` of the mlx5 context `m` polls for, alive while `m` is.
unsafe fn adopt_srq(m: &mut crate::backend::mlx5::Mlx5Backend, srq: *mut ffi::ibv_srq) -> Result<u32, String> {
    // SAFETY: the caller's live mlx5 SRQ.
    let dv = unsafe { crate::sys::mlx5::init_srq(srq) }?;
    let (ctx, cq, layout, cqe_v1) = m.expect();
    // SAFETY: an mlx5 SRQ, so it sits in a `struct mlx5_srq`; `layout` is the row of the release loaded; the caller keeps it alive while `m` holds pointers into it.
    let private = unsafe { crate::sys::mlx5::read_srq(srq, &dv, layout, ctx as *mut _, cq as *mut _, cqe_v1) }?;
    m.adopt_srq(srq as usize, private)
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
    const_assert_eq!(core::mem::size_of::<rdma_sys::ibv_srq>(), core::mem::size_of::<ffi::ibv_srq>());

    impl Context {
        /// [`Context::from_raw`] for an application built on `rdma-sys`.
        ///
        /// # Safety
        ///
        /// As [`Context::from_raw`].
        ///
        /// # Errors
        ///
        /// As [`Context::from_raw`].
        #[cfg_attr(docsrs, doc(cfg(feature = "rdma-sys")))]
        pub unsafe fn from_rdma_sys(ctx: NonNull<rdma_sys::ibv_context>) -> Result<Context, Error> {
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
        #[cfg_attr(docsrs, doc(cfg(feature = "rdma-sys")))]
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
        #[cfg_attr(docsrs, doc(cfg(feature = "rdma-sys")))]
        pub unsafe fn attach_qp_rdma_sys(&mut self, qp: NonNull<rdma_sys::ibv_qp>) -> Result<(), Error> {
            // SAFETY: the same struct; the caller's promise is passed on.
            unsafe { self.attach_qp(qp.cast()) }
        }

        /// [`Cq::attach_srq`] for an application built on `rdma-sys`.
        ///
        /// # Errors
        ///
        /// As [`Cq::attach_srq`].
        ///
        /// # Safety
        ///
        /// As [`Cq::attach_srq`].
        #[cfg_attr(docsrs, doc(cfg(feature = "rdma-sys")))]
        pub unsafe fn attach_srq_rdma_sys(&mut self, srq: NonNull<rdma_sys::ibv_srq>) -> Result<(), Error> {
            // SAFETY: the same struct; the caller's promise is passed on.
            unsafe { self.attach_srq(srq.cast()) }
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
        #[cfg_attr(docsrs, doc(cfg(feature = "rdma-sys")))]
        pub unsafe fn attach_mr_rdma_sys(&mut self, mr: NonNull<rdma_sys::ibv_mr>) -> Result<(), Error> {
            // SAFETY: the same struct; the caller's promise is passed on.
            unsafe { self.attach_mr(mr.cast()) }
        }
    }
}

/// The channel glue without a device: rdma-core's public structs filled in by hand (a
/// context naming a device, a channel over an eventfd, CQs naming their channel), which
/// the glue only reads; no verb is called on them.
#[cfg(test)]
mod channel_tests {
    use super::*;
    use crate::cq::Backend;
    use crate::sys::device::Context as VerbsContext;
    use dvcq_provider::eventfd::EventFd;
    use std::os::fd::AsRawFd;

    /// The structs, boxed so their addresses stay put; dropped after every handle on them.
    struct Fakes {
        _dev: Box<ffi::ibv_device>,
        ctx: Box<ffi::ibv_context>,
        other_ctx: Box<ffi::ibv_context>,
        ch: Box<ffi::ibv_comp_channel>,
        efd: EventFd,
    }

    impl Fakes {
        fn new() -> Fakes {
            let mut dev = Box::new(ffi::ibv_device::default());
            let mut ctx = Box::new(ffi::ibv_context::default());
            ctx.device = &mut *dev;
            let mut other_ctx = Box::new(ffi::ibv_context::default());
            other_ctx.device = &mut *dev;
            let efd = EventFd::new().unwrap();
            let mut ch = Box::new(ffi::ibv_comp_channel::default());
            ch.context = &mut *ctx;
            ch.fd = efd.as_raw_fd();
            Fakes { _dev: dev, ctx, other_ctx, ch, efd }
        }

        fn context(&mut self) -> Context {
            // SAFETY: a context struct naming a device whose name is all NULs; it outlives the handle (the test drops the handles first).
            let ctx = unsafe { VerbsContext::borrowed(&mut *self.ctx) };
            Context { inner: Inner::Verbs { ctx, port: 1, gid_index: 0 }, name: "fake0".into() }
        }

        /// A generic-backend `Cq` over a CQ struct on `channel`.
        fn cq(&mut self, ctx: &Context, cq: &mut ffi::ibv_cq, channel: *mut ffi::ibv_comp_channel) -> Cq {
            cq.context = &mut *self.ctx;
            cq.channel = channel;
            let Inner::Verbs { ctx: vctx, .. } = &ctx.inner else { unreachable!() };
            // SAFETY: a CQ struct that outlives the handle; dvcq never destroys a borrowed CQ, and the test never polls it.
            let verbs = unsafe { VerbsCq::borrowed(vctx, cq) };
            let backend = Backend { kind: BackendKind::Generic, reason: "test".into() };
            Cq::new(Poller::Generic(crate::backend::generic::GenericCq::new(verbs)), backend, "fake0".into(), 1)
        }
    }

    #[test]
    fn a_cq_attached_twice_is_refused_until_the_first_cq_is_gone() {
        let mut f = Fakes::new();
        let ctx = f.context();
        let mut raw = Box::new(ffi::ibv_cq::default());
        raw.context = &mut *f.ctx;
        raw.cqe = 15;
        let ptr = NonNull::new((&mut *raw as *mut ffi::ibv_cq).cast::<c_void>()).unwrap();
        // The fake context names no provider library: rdma-core's poll, as Auto allows.
        // SAFETY: a CQ struct of `ctx` that outlives every handle (dropped last); nothing polls it.
        let first = unsafe { Cq::attach(&ctx, ptr, BackendChoice::Auto) }.unwrap();
        assert_eq!(first.backend().kind, BackendKind::Generic);
        // SAFETY: as above.
        let e = unsafe { Cq::attach(&ctx, ptr, BackendChoice::Generic) }.unwrap_err();
        assert!(matches!(e, Error::Mismatch { .. }), "{e}");
        assert!(e.to_string().contains("is attached already"), "{e}");
        drop(first);
        // SAFETY: as above.
        let again = unsafe { Cq::attach(&ctx, ptr, BackendChoice::Generic) }.expect("free once the first is gone");
        drop(again);
        drop(raw);
    }

    #[test]
    fn an_attached_cq_binds_only_to_the_channel_it_was_created_on() {
        let mut f = Fakes::new();
        let ctx = f.context();
        let chp: *mut ffi::ibv_comp_channel = &mut *f.ch;
        // SAFETY: a channel struct of `ctx` over a live eventfd, outliving the handles.
        let ch = unsafe { CompletionChannel::from_raw(&ctx, NonNull::new(chp.cast()).unwrap()) }.unwrap();
        // SAFETY: F_GETFL reads the eventfd's flags.
        let flags = unsafe { libc::fcntl(f.efd.as_raw_fd(), libc::F_GETFL) };
        assert!(flags & libc::O_NONBLOCK != 0, "the adopted channel's fd is non-blocking");
        let (mut on, mut off, mut other) = (ffi::ibv_cq::default(), ffi::ibv_cq::default(), ffi::ibv_cq::default());
        let mut cq = f.cq(&ctx, &mut on, chp);
        cq.bind_channel(&ch).unwrap();
        assert!(cq.channel().is_some_and(|c| c.same(&ch)));
        assert_eq!(ch.unacked_events(), 0);
        let e = cq.bind_channel(&ch).unwrap_err().to_string();
        assert!(e.ends_with("the CQ is bound to a completion channel already"), "{e}");
        let mut none = f.cq(&ctx, &mut off, core::ptr::null_mut());
        let e = none.bind_channel(&ch).unwrap_err().to_string();
        assert!(e.ends_with("the CQ was created without a completion channel"), "{e}");
        assert!(none.channel().is_none(), "a refused bind binds nothing");
        let mut elsewhere = f.cq(&ctx, &mut other, 0x40 as *mut _);
        let e = elsewhere.bind_channel(&ch).unwrap_err().to_string();
        assert!(e.contains("the CQ was created on another completion channel (0x40"), "{e}");
        // A model channel, or a channel of another context, is no channel for these.
        let model = Context::open("model-mlx5").unwrap().create_channel().unwrap();
        assert!(elsewhere.bind_channel(&model).unwrap_err().to_string().contains("a model channel"));
        f.ch.context = &mut *f.other_ctx;
        // SAFETY: as above.
        let e = unsafe { CompletionChannel::from_raw(&ctx, NonNull::new(chp.cast()).unwrap()) }.unwrap_err();
        assert!(e.to_string().contains("belongs to another device context"), "{e}");
        drop((cq, none, elsewhere, ch));
    }
}
