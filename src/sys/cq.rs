//! Completion queues and completion channels made by rdma-core, and `ibv_poll_cq` into
//! dvcq's [`Completion`].

use super::device::Context;
use super::ffi;
use super::ops;
use crate::sys::error::VerbsError;
use dvcq_provider::{Completion, UverbsWc};
use std::sync::Arc;

/// A completion channel (`ibv_create_comp_channel`): the fd completion events arrive on.
#[derive(Debug)]
pub(crate) struct CompChannel {
    ptr: *mut ffi::ibv_comp_channel,
    pub(super) _ctx: Arc<Context>,
    /// The CQs made on it and their unacknowledged events (`sys::event`).
    pub(super) book: std::sync::Mutex<super::event::EventBook>,
    /// Made by dvcq (destroyed on drop), or the application's (left alone).
    owned: bool,
}

// SAFETY: a channel is an fd and a context pointer; libibverbs allows its use from any thread, and dvcq reads events through it from one thread at a time (`&mut`).
unsafe impl Send for CompChannel {}
// SAFETY: shared use only reads the fd number.
unsafe impl Sync for CompChannel {}

impl CompChannel {
    /// Creates a channel on `ctx`, its fd non-blocking.
    pub(crate) fn new(ctx: &Arc<Context>) -> Result<Arc<CompChannel>, VerbsError> {
        // SAFETY: a live context.
        let ptr = unsafe { ffi::ibv_create_comp_channel(ctx.as_ptr()) };
        if ptr.is_null() {
            return Err(VerbsError::last("ibv_create_comp_channel"));
        }
        let ch = CompChannel { ptr, _ctx: Arc::clone(ctx), book: Default::default(), owned: true };
        ch.set_nonblocking()?;
        Ok(Arc::new(ch))
    }

    /// Adopts a channel the application made on `ctx` (`ibv_create_comp_channel`), its fd
    /// made non-blocking; dvcq never destroys it.
    ///
    /// # Safety
    ///
    /// `ptr` is a live `ibv_comp_channel` of `ctx` that the application destroys only after
    /// every handle on it is gone.
    pub(crate) unsafe fn borrowed(
        ctx: &Arc<Context>,
        ptr: *mut ffi::ibv_comp_channel,
    ) -> Result<Arc<CompChannel>, VerbsError> {
        let ch = CompChannel { ptr, _ctx: Arc::clone(ctx), book: Default::default(), owned: false };
        ch.set_nonblocking()?;
        Ok(Arc::new(ch))
    }

    /// The raw channel.
    pub(crate) fn as_ptr(&self) -> *mut ffi::ibv_comp_channel {
        self.ptr
    }

    /// The channel's file descriptor.
    pub(crate) fn fd(&self) -> i32 {
        // SAFETY: a live channel.
        unsafe { (*self.ptr).fd }
    }
}

impl Drop for CompChannel {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: the last handle; every CQ on it held an Arc and has been destroyed.
            unsafe { ffi::ibv_destroy_comp_channel(self.ptr) };
        }
    }
}

/// What dvcq asks `mlx5dv_create_cq` for (`struct mlx5dv_cq_init_attr` and the generic
/// creation flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Mlx5CqAttrs {
    /// 64 or 128.
    pub(crate) cqe_size: u16,
    /// `MLX5DV_CQE_RES_FORMAT_*` when compressed.
    pub(crate) comp_res_format: Option<u8>,
    /// `MLX5DV_CQ_INIT_ATTR_FLAGS_CQE_PAD`.
    pub(crate) pad: bool,
    /// `IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN`.
    pub(crate) ignore_overrun: bool,
}

// `ibv_cq_ex_to_cq` is a cast: the extended CQ's leading fields are `struct ibv_cq`'s.
static_assertions::const_assert_eq!(core::mem::offset_of!(ffi::ibv_cq_ex, context), 0);
static_assertions::const_assert_eq!(
    core::mem::offset_of!(ffi::ibv_cq_ex, cqe),
    core::mem::offset_of!(ffi::ibv_cq, cqe)
);

/// A CQ that rdma-core created (`ibv_create_cq`), destroyed when its last handle goes: the
/// poller and every QP that completes into it hold one, so the CQ (and any ring its provider
/// mapped) outlives them all.
#[derive(Debug)]
pub(crate) struct VerbsCq {
    ptr: *mut ffi::ibv_cq,
    ctx: Arc<Context>,
    _channel: Option<Arc<CompChannel>>,
    /// The application's channel an attached CQ was created on, once adopted
    /// ([`VerbsCq::adopt_channel`]).
    adopted_channel: std::sync::OnceLock<Arc<CompChannel>>,
    /// Made by dvcq (destroyed on drop), or the application's (left alone).
    owned: bool,
    /// How an extended CQ (`sys::cq_ex`) was made and must be polled; `None` for one made
    /// by `ibv_create_cq` or adopted.
    pub(super) ex: Option<super::cq_ex::ExCq>,
    /// An attached CQ's claim ([`super::claim`]): held while any handle on it lives.
    pub(super) claim: std::sync::OnceLock<super::claim::Claim>,
    /// Whether the CQ is in error and why, as the context's async events said
    /// (`sys::async_event`); never set on an application's CQ, whose events dvcq does not
    /// read.
    error: Arc<dvcq_provider::CqErrorCell>,
}

// SAFETY: rdma-core CQs may be used from any thread; dvcq polls one from a single `&mut` owner at a time.
unsafe impl Send for VerbsCq {}
// SAFETY: shared handles (the QPs') only pass the pointer to rdma-core's thread-safe create/destroy calls.
unsafe impl Sync for VerbsCq {}

impl VerbsCq {
    /// `ibv_create_cq(ctx, depth, NULL, channel, comp_vector)`.
    pub(crate) fn create(
        ctx: &Arc<Context>,
        depth: u32,
        comp_vector: u32,
        channel: Option<&Arc<CompChannel>>,
    ) -> Result<Arc<VerbsCq>, VerbsError> {
        let cqe = i32::try_from(depth).map_err(|_| VerbsError { call: "ibv_create_cq", errno: libc::EINVAL })?;
        let vector =
            i32::try_from(comp_vector).map_err(|_| VerbsError { call: "ibv_create_cq", errno: libc::EINVAL })?;
        let ch = channel.map_or(core::ptr::null_mut(), |c| c.ptr);
        // SAFETY: a live context; the channel, when given, belongs to it and outlives the CQ (the CQ holds its Arc).
        let ptr = unsafe { ffi::ibv_create_cq(ctx.as_ptr(), cqe, core::ptr::null_mut(), ch, vector) };
        if ptr.is_null() {
            return Err(VerbsError::last("ibv_create_cq"));
        }
        Ok(VerbsCq::owned(ctx, ptr, channel, None))
    }

    /// `mlx5dv_create_cq(ctx, {depth, channel, comp_vector, flags}, {cqe_size, compression,
    /// padding})`: an mlx5 CQ whose CQE format dvcq chose, so the direct poller is told it
    /// rather than assuming it (rdma-core keeps none of these where they can be read back).
    pub(crate) fn create_mlx5(
        ctx: &Arc<Context>,
        depth: u32,
        comp_vector: u32,
        channel: Option<&Arc<CompChannel>>,
        attrs: &Mlx5CqAttrs,
    ) -> Result<Arc<VerbsCq>, VerbsError> {
        let mut attr = ffi::ibv_cq_init_attr_ex {
            cqe: depth,
            channel: channel.map_or(core::ptr::null_mut(), |c| c.ptr),
            comp_vector,
            ..Default::default()
        };
        if attrs.ignore_overrun {
            attr.comp_mask |= ffi::IBV_CQ_INIT_ATTR_MASK_FLAGS;
            attr.flags |= ffi::IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
        }
        let mut dv = ffi::mlx5dv_cq_init_attr {
            comp_mask: u64::from(ffi::MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE),
            cqe_size: attrs.cqe_size,
            ..Default::default()
        };
        if let Some(format) = attrs.comp_res_format {
            dv.comp_mask |= u64::from(ffi::MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE);
            dv.cqe_comp_res_format = format;
        }
        if attrs.pad {
            dv.comp_mask |= u64::from(ffi::MLX5DV_CQ_INIT_ATTR_MASK_FLAGS);
            dv.flags |= ffi::MLX5DV_CQ_INIT_ATTR_FLAGS_CQE_PAD;
        }
        if super::loader::mlx5_loaded().is_err() {
            return Err(VerbsError { call: "mlx5dv_create_cq", errno: libc::ENOSYS });
        }
        // SAFETY: a live context; the attribute structs live across the call; the channel, when given, belongs to the context and outlives the CQ (the CQ holds its Arc).
        let ex = unsafe { ffi::mlx5dv_create_cq(ctx.as_ptr(), &mut attr, &mut dv) };
        if ex.is_null() {
            return Err(VerbsError::last("mlx5dv_create_cq"));
        }
        // `ibv_cq_ex_to_cq`: an extended CQ begins with the fields of `struct ibv_cq`.
        let ptr = ex.cast::<ffi::ibv_cq>();
        Ok(VerbsCq::owned(ctx, ptr, channel, None))
    }

    /// Owns an extended CQ `ibv_create_cq_ex` made on `ctx` (`sys::cq_ex`).
    pub(super) fn owned_ex(
        ctx: &Arc<Context>,
        ptr: *mut ffi::ibv_cq,
        channel: Option<&Arc<CompChannel>>,
        ex: super::cq_ex::ExCq,
    ) -> Arc<VerbsCq> {
        VerbsCq::owned(ctx, ptr, channel, Some(ex))
    }

    /// Owns a CQ dvcq made on `ctx`: destroyed on drop, its error events counted
    /// (`sys::async_event`) until then.
    fn owned(
        ctx: &Arc<Context>,
        ptr: *mut ffi::ibv_cq,
        channel: Option<&Arc<CompChannel>>,
        ex: Option<super::cq_ex::ExCq>,
    ) -> Arc<VerbsCq> {
        let error = Arc::default();
        ctx.book_cq(ptr, &error);
        Arc::new(VerbsCq {
            ptr,
            ctx: Arc::clone(ctx),
            _channel: channel.cloned(),
            adopted_channel: Default::default(),
            owned: true,
            ex,
            claim: Default::default(),
            error,
        })
    }

    /// The error events (`IBV_EVENT_CQ_ERR`: it overran) read for this CQ so far, after
    /// reading what is queued; `None` where dvcq does not read the context's async events
    /// (an application's context).
    pub(crate) fn overruns(&self) -> Option<u64> {
        self.ctx.cq_errors(self.ptr)
    }

    /// The cell that says whether the CQ is in error (set as the context's async events
    /// are read, by [`VerbsCq::overruns`] or any other reader).
    pub(crate) fn error_cell(&self) -> &Arc<dvcq_provider::CqErrorCell> {
        &self.error
    }

    /// Adopts a CQ the application created on `ctx`; dvcq never destroys it.
    ///
    /// # Safety
    ///
    /// `ptr` is a live `ibv_cq` of `ctx` that the application destroys only after every
    /// dvcq object using it is gone, and polls only through dvcq meanwhile.
    pub(crate) unsafe fn borrowed(ctx: &Arc<Context>, ptr: *mut ffi::ibv_cq) -> Arc<VerbsCq> {
        Arc::new(VerbsCq {
            ptr,
            ctx: Arc::clone(ctx),
            _channel: None,
            adopted_channel: Default::default(),
            owned: false,
            ex: None,
            claim: Default::default(),
            error: Arc::default(),
        })
    }

    /// Holds the attached CQ's process-wide claim for as long as this handle lives.
    pub(crate) fn hold(&self, claim: super::claim::Claim) {
        // A handle is claimed once, right after `borrowed`; a second claim (never made)
        // would be dropped here and released at once.
        let _ = self.claim.set(claim);
    }

    /// The completion channel the CQ was created on (`ibv_cq.channel`; null for none).
    pub(crate) fn channel_ptr(&self) -> *mut ffi::ibv_comp_channel {
        // SAFETY: a live CQ.
        unsafe { (*self.ptr).channel }
    }

    /// Reads the events of this CQ (one the application created on its channel `ch`)
    /// through `ch`, tagged `token`: they are booked there, and acknowledged before this
    /// handle goes. Refused for a CQ made on another channel, or already on one.
    pub(crate) fn adopt_channel(&self, ch: &Arc<CompChannel>, token: u64) -> Result<(), String> {
        if self.channel_ptr() != ch.as_ptr() {
            return Err(if self.channel_ptr().is_null() {
                "the CQ was created without a completion channel".into()
            } else {
                format!(
                    "the CQ was created on another completion channel ({:p}, not {:p})",
                    self.channel_ptr(),
                    ch.as_ptr()
                )
            });
        }
        if self._channel.is_some() || self.adopted_channel.set(Arc::clone(ch)).is_err() {
            return Err("the CQ's events are read through a channel already".into());
        }
        ch.register(self, token);
        Ok(())
    }

    /// The context pointer the CQ says it belongs to.
    pub(crate) fn context_ptr(&self) -> *mut ffi::ibv_context {
        // SAFETY: a live CQ.
        unsafe { (*self.ptr).context }
    }

    /// The raw CQ, for the QPs and the direct attaches.
    pub(crate) fn as_ptr(&self) -> *mut ffi::ibv_cq {
        self.ptr
    }

    /// The context it was made on.
    #[allow(dead_code)] // the event mode's
    pub(crate) fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// The depth the provider gave (`cq->cqe`, at least what was asked for).
    pub(crate) fn depth(&self) -> u32 {
        // SAFETY: a live CQ.
        u32::try_from(unsafe { (*self.ptr).cqe }).unwrap_or(0)
    }

    /// `ibv_resize_cq(cq, depth)`; the depth the provider gave after (`cq->cqe`).
    ///
    /// Takes `&self` with [`VerbsCq::poll_raw`]'s promise: the caller's `&mut` poller is the
    /// one consumer, so no poll of this CQ runs meanwhile. A direct poller reading the old
    /// ring must not be used after this call, whatever it returns (rxe's provider unmaps the
    /// old queue before it maps the new one).
    pub(crate) fn resize(&self, depth: u32) -> Result<u32, VerbsError> {
        let cqe = i32::try_from(depth).map_err(|_| VerbsError { call: "ibv_resize_cq", errno: libc::EINVAL })?;
        // SAFETY: a live CQ, polled by no one during the call (see above).
        let rc = unsafe { ffi::ibv_resize_cq(self.ptr, cqe) };
        if rc != 0 {
            return Err(VerbsError::code("ibv_resize_cq", rc));
        }
        Ok(self.depth())
    }

    /// `ibv_req_notify_cq`.
    pub(crate) fn req_notify(&self, solicited_only: bool) -> Result<(), VerbsError> {
        // SAFETY: a live CQ.
        let rc = unsafe { ops::req_notify_cq(self.ptr, solicited_only) };
        if rc != 0 {
            return Err(VerbsError::code("ibv_req_notify_cq", rc));
        }
        Ok(())
    }

    /// `ibv_poll_cq` for up to `wc.len()` completions.
    ///
    /// Takes `&mut` of nothing but the buffer: the caller's `&mut` poller is the one
    /// consumer.
    #[inline]
    pub(crate) fn poll_raw(&self, wc: &mut [ffi::ibv_wc]) -> Result<usize, VerbsError> {
        let n = i32::try_from(wc.len()).unwrap_or(i32::MAX);
        // SAFETY: a live CQ and `n` writable entries.
        let rc = unsafe { ops::poll_cq(self.ptr, n, wc.as_mut_ptr()) };
        usize::try_from(rc).map_err(|_| VerbsError::code("ibv_poll_cq", rc))
    }
}

impl Drop for VerbsCq {
    fn drop(&mut self) {
        if let Some(ch) = self._channel.as_ref().or(self.adopted_channel.get()) {
            // Every event read for this CQ is acknowledged before its destroy (by dvcq, or
            // the application's after this handle is gone), which waits for that.
            ch.release(self.ptr);
        }
        if self.owned {
            // Every async event reported for it is acknowledged before the destroy.
            self.ctx.unbook_cq(self.ptr);
            // SAFETY: the last handle: the poller and every QP using this CQ are gone.
            unsafe { ffi::ibv_destroy_cq(self.ptr) };
        }
    }
}

/// One `ibv_wc` as dvcq's [`Completion`], field for field: `struct ibv_wc` is laid out as
/// the kernel's `struct ib_uverbs_wc` (rdma-core's rxe provider `memcpy`s one into the
/// other), so the conversion is the rxe backend's, [`Completion::from_uverbs_wc`].
#[inline]
pub(crate) fn completion_of(wc: &ffi::ibv_wc, position: u32) -> Completion {
    let record = UverbsWc {
        wr_id: wc.wr_id,
        status: wc.status,
        opcode: wc.opcode,
        vendor_err: wc.vendor_err,
        byte_len: wc.byte_len,
        // SAFETY: both union members are u32; either reading is valid for any bits.
        ex: unsafe { wc.__bindgen_anon_1.imm_data },
        qp_num: wc.qp_num,
        src_qp: wc.src_qp,
        wc_flags: wc.wc_flags,
        pkey_index: wc.pkey_index,
        slid: wc.slid,
        sl: wc.sl,
        dlid_path_bits: wc.dlid_path_bits,
        port_num: 0,
        reserved: 0,
    };
    Completion::from_uverbs_wc(&record, position)
}
