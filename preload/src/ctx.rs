//! Per-context state: the provider's own `poll_cq` / `req_notify_cq` (saved before the
//! preload's trampolines replace them in the context's public `ops`, which is what the
//! inline `ibv_poll_cq` and `ibv_req_notify_cq` of verbs.h call), the provider's extended
//! create functions (replaced in the `verbs_context` around it), and dvcq's adoption of the
//! context. Saved per context, never in one global: a process may hold contexts of
//! different providers, and mlx5 picks its poll function per context.

use crate::layout::{self, IbvContext, PollCq, ReqNotifyCq};
use crate::table::Table;
use core::ffi::c_void;
use core::ptr::NonNull;

/// What the preload keeps about one `ibv_context`.
pub(crate) struct CtxState {
    /// The provider's `ops.poll_cq`.
    pub poll_cq: PollCq,
    /// The provider's `ops.req_notify_cq`.
    pub req_notify_cq: ReqNotifyCq,
    /// The provider's `verbs_context` slots the preload replaced, as addresses (0: none).
    pub create_cq_ex: usize,
    pub create_qp_ex: usize,
    pub create_srq_ex: usize,
    pub create_wq: usize,
    pub destroy_wq: usize,
    /// dvcq's adoption of the context, or why there is none.
    pub dvcq: Result<dvcq::Context, String>,
}

// SAFETY: the raw state is function addresses; dvcq's Context is used only under the CQ entries' locks and at creation, as the application's verbs calls are.
unsafe impl Sync for CtxState {}
// SAFETY: as above.
unsafe impl Send for CtxState {}

static CONTEXTS: Table<CtxState, 256> = Table::new();

/// `__VERBS_ABI_IS_EXTENDED`.
const ABI_IS_EXTENDED: usize = usize::MAX;

/// The address of the `verbs_context` slot at `off` from `ctx`, where the context is
/// extended and its `sz` covers that slot (verbs.h's `verbs_get_ctx_op`).
///
/// # Safety
///
/// `ctx` is a live context rdma-core opened.
unsafe fn vctx_slot(ctx: *mut IbvContext, off: isize) -> Option<*mut usize> {
    let base = ctx.cast::<u8>();
    // SAFETY: `abi_compat` lies inside the live context.
    let compat = unsafe { base.add(layout::CONTEXT_ABI_COMPAT).cast::<usize>().read() };
    if compat != ABI_IS_EXTENDED {
        return None;
    }
    // SAFETY: an extended context is the last field of the verbs_context rdma-core allocated, so its `sz` word sits before it in the same allocation.
    let sz = unsafe { base.offset(layout::VCTX_SZ).cast::<usize>().read() };
    let need = layout::CONTEXT_SIZE as isize - off;
    // SAFETY: `sz` says the verbs_context reaches back at least `need` bytes before the end of the context, so the slot is inside it.
    (sz as isize >= need).then(|| unsafe { base.offset(off).cast::<usize>() })
}

/// The state of `ctx`, made (and the context's ops patched) on first sight.
///
/// # Safety
///
/// `ctx` is a live context rdma-core opened, that no thread polls through yet when it is
/// first seen here (the preload sees every context at its open, or at its first CQ).
pub(crate) unsafe fn state(ctx: *mut IbvContext) -> Option<&'static CtxState> {
    if let Some(s) = CONTEXTS.get(ctx as usize) {
        return Some(s);
    }
    // SAFETY: the caller's live context; the ops are read before they are replaced.
    let (poll, notify) = unsafe { ((*ctx).poll_cq, (*ctx).req_notify_cq) };
    let (Some(poll_cq), Some(req_notify_cq)) = (poll, notify) else {
        crate::log::once("a context without poll_cq/req_notify_cq ops: left to its provider".into());
        return None;
    };
    let dvcq = {
        let _g = crate::Inside::enter();
        // SAFETY: the caller's live context; dvcq never closes it, and the preload drops this adoption only at `ibv_close_device`, before the real close.
        unsafe { dvcq::Context::from_raw(NonNull::new_unchecked(ctx.cast::<c_void>())) }.map_err(|e| e.to_string())
    };
    let mut s = Box::new(CtxState {
        poll_cq,
        req_notify_cq,
        create_cq_ex: 0,
        create_qp_ex: 0,
        create_srq_ex: 0,
        create_wq: 0,
        destroy_wq: 0,
        dvcq,
    });
    // SAFETY: the caller's live context.
    unsafe { patch_vctx(ctx, &mut s) };
    let s = match CONTEXTS.insert(ctx as usize, s) {
        Ok(s) => s,
        Err(_) => {
            crate::log::once("more than 256 open device contexts: the others are left to their providers".into());
            return None;
        }
    };
    // SAFETY: pointer-sized stores into the live context's public ops before any thread polls through them; libibverbs itself calls the private copy of the ops.
    unsafe {
        (*ctx).poll_cq = Some(crate::dispatch::poll_cq);
        (*ctx).req_notify_cq = Some(crate::dispatch::req_notify_cq);
    }
    Some(s)
}

/// Replaces the extended create functions with the preload's, keeping the provider's.
///
/// # Safety
///
/// `ctx` is a live context rdma-core opened.
unsafe fn patch_vctx(ctx: *mut IbvContext, s: &mut CtxState) {
    let slots: [(isize, &mut usize, usize); 5] = [
        (layout::VCTX_CREATE_CQ_EX, &mut s.create_cq_ex, crate::hooks::create_cq_ex as *const () as usize),
        (layout::VCTX_CREATE_QP_EX, &mut s.create_qp_ex, crate::hooks::create_qp_ex as *const () as usize),
        (layout::VCTX_CREATE_SRQ_EX, &mut s.create_srq_ex, crate::hooks::create_srq_ex as *const () as usize),
        (layout::VCTX_CREATE_WQ, &mut s.create_wq, crate::hooks::create_wq as *const () as usize),
        (layout::VCTX_DESTROY_WQ, &mut s.destroy_wq, crate::hooks::destroy_wq as *const () as usize),
    ];
    for (off, saved, ours) in slots {
        // SAFETY: the caller's live context.
        if let Some(p) = unsafe { vctx_slot(ctx, off) } {
            // SAFETY: the slot lies inside the verbs_context (checked against its `sz`).
            let cur = unsafe { p.read() };
            if cur != 0 {
                *saved = cur;
                // SAFETY: as above; a pointer-sized store before the context escapes.
                unsafe { p.write(ours) };
            }
        }
    }
}

/// The state of a context the preload patched already (the trampolines' lookup).
#[inline]
pub(crate) fn known(ctx: *mut IbvContext) -> Option<&'static CtxState> {
    CONTEXTS.get(ctx as usize)
}

/// Forgets `ctx` at `ibv_close_device` (its CQs are gone by then).
pub(crate) fn forget(ctx: *mut IbvContext) {
    drop(CONTEXTS.remove(ctx as usize));
}
