//! The verbs that `infiniband/verbs.h` defines `static inline`, written the way verbs.h
//! writes them: through the provider's function pointers in `struct ibv_context_ops`, or,
//! for the extended verbs, in `struct verbs_context` (found with verbs.h's
//! `verbs_get_ctx_op` rule). Every offset comes from the bindgen structs, none is written by
//! hand.

use super::ffi;
use core::ffi::c_int;
use core::mem::{offset_of, size_of};

/// `__VERBS_ABI_IS_EXTENDED` (verbs.h): the `abi_compat` value of a context that sits at the
/// end of a `struct verbs_context`.
const VERBS_ABI_IS_EXTENDED: usize = usize::MAX;

/// verbs.h's `verbs_get_ctx(ctx)`: the extended context around `ctx`, if it has one.
///
/// # Safety
///
/// `ctx` points to a live `ibv_context` that rdma-core opened.
unsafe fn verbs_get_ctx(ctx: *mut ffi::ibv_context) -> Option<*mut ffi::verbs_context> {
    // SAFETY: the caller gives a live context; reading its abi_compat word is what verbs.h's verbs_get_ctx does.
    let compat = unsafe { (*ctx).abi_compat } as usize;
    if compat != VERBS_ABI_IS_EXTENDED {
        return None;
    }
    // SAFETY: an extended context is the last field of the `verbs_context` rdma-core allocated (verbs.h: "Must be last field in the struct"), so stepping back by that field's offset stays inside the same allocation.
    Some(unsafe { ctx.cast::<u8>().sub(offset_of!(ffi::verbs_context, context)) }.cast())
}

/// verbs.h's `verbs_get_ctx_op(ctx, op)` test: whether the provider's `verbs_context` is
/// long enough to hold the field at `op_offset` (its `sz` counts the bytes before the
/// embedded `ibv_context`).
fn has_op(vctx: &ffi::verbs_context, op_offset: usize) -> bool {
    vctx.sz >= size_of::<ffi::verbs_context>() - op_offset
}

/// `ibv_poll_cq(cq, n, wc)`: `cq->context->ops.poll_cq`.
///
/// # Safety
///
/// `cq` is a live CQ, and `wc` points to `n` writable `ibv_wc`s.
#[inline]
pub(crate) unsafe fn poll_cq(cq: *mut ffi::ibv_cq, n: c_int, wc: *mut ffi::ibv_wc) -> c_int {
    // SAFETY: a live CQ's context is live, and its provider filled ops at open.
    let f = unsafe { (*(*cq).context).ops.poll_cq };
    match f {
        // SAFETY: the provider's poll, with the caller's CQ and buffer.
        Some(f) => unsafe { f(cq, n, wc) },
        None => -libc::EOPNOTSUPP,
    }
}

/// `ibv_req_notify_cq(cq, solicited_only)`: `cq->context->ops.req_notify_cq`.
///
/// # Safety
///
/// `cq` is a live CQ.
pub(crate) unsafe fn req_notify_cq(cq: *mut ffi::ibv_cq, solicited_only: bool) -> c_int {
    // SAFETY: as in poll_cq.
    let f = unsafe { (*(*cq).context).ops.req_notify_cq };
    match f {
        // SAFETY: the provider's arm, with the caller's CQ.
        Some(f) => unsafe { f(cq, c_int::from(solicited_only)) },
        None => libc::EOPNOTSUPP,
    }
}

/// `ibv_post_send(qp, wr, bad_wr)`: `qp->context->ops.post_send`.
///
/// # Safety
///
/// `qp` is a live QP; `wr` heads a valid list of work requests whose scatter lists point to
/// registered memory; `bad` is writable.
pub(crate) unsafe fn post_send(
    qp: *mut ffi::ibv_qp,
    wr: *mut ffi::ibv_send_wr,
    bad: *mut *mut ffi::ibv_send_wr,
) -> c_int {
    // SAFETY: a live QP's context is live and its ops filled.
    let f = unsafe { (*(*qp).context).ops.post_send };
    match f {
        // SAFETY: the provider's post, with the caller's QP and list.
        Some(f) => unsafe { f(qp, wr, bad) },
        None => libc::EOPNOTSUPP,
    }
}

/// `ibv_post_recv(qp, wr, bad_wr)`: `qp->context->ops.post_recv`.
///
/// # Safety
///
/// As [`post_send`], for receive work requests.
pub(crate) unsafe fn post_recv(
    qp: *mut ffi::ibv_qp,
    wr: *mut ffi::ibv_recv_wr,
    bad: *mut *mut ffi::ibv_recv_wr,
) -> c_int {
    // SAFETY: as in post_send.
    let f = unsafe { (*(*qp).context).ops.post_recv };
    match f {
        // SAFETY: the provider's post, with the caller's QP and list.
        Some(f) => unsafe { f(qp, wr, bad) },
        None => libc::EOPNOTSUPP,
    }
}

/// `ibv_post_srq_recv(srq, wr, bad_wr)`: `srq->context->ops.post_srq_recv`.
///
/// # Safety
///
/// As [`post_recv`], for a live SRQ.
pub(crate) unsafe fn post_srq_recv(
    srq: *mut ffi::ibv_srq,
    wr: *mut ffi::ibv_recv_wr,
    bad: *mut *mut ffi::ibv_recv_wr,
) -> c_int {
    // SAFETY: a live SRQ's context is live and its ops filled.
    let f = unsafe { (*(*srq).context).ops.post_srq_recv };
    match f {
        // SAFETY: the provider's post, with the caller's SRQ and list.
        Some(f) => unsafe { f(srq, wr, bad) },
        None => libc::EOPNOTSUPP,
    }
}

/// `ibv_alloc_mw(pd, type)` (verbs.h): `pd->context->ops.alloc_mw`. Returns the window,
/// or the errno: `EOPNOTSUPP` when the provider has none (as verbs.h sets it), else the
/// provider's.
///
/// # Safety
///
/// `pd` is a live protection domain.
pub(crate) unsafe fn alloc_mw(pd: *mut ffi::ibv_pd, mw_type: ffi::ibv_mw_type) -> Result<*mut ffi::ibv_mw, c_int> {
    // SAFETY: a live PD's context is live and its provider filled ops at open.
    let Some(f) = (unsafe { (*(*pd).context).ops.alloc_mw }) else {
        return Err(libc::EOPNOTSUPP);
    };
    // SAFETY: the provider's allocation, with the caller's PD.
    let mw = unsafe { f(pd, mw_type) };
    if mw.is_null() {
        return Err(std::io::Error::last_os_error().raw_os_error().filter(|&e| e != 0).unwrap_or(libc::EIO));
    }
    Ok(mw)
}

/// `ibv_dealloc_mw(mw)` (verbs.h): `mw->context->ops.dealloc_mw`; 0 or an errno.
///
/// # Safety
///
/// `mw` is a live window [`alloc_mw`] returned, deallocated once.
pub(crate) unsafe fn dealloc_mw(mw: *mut ffi::ibv_mw) -> c_int {
    // SAFETY: a live window's context is live and its ops filled.
    match unsafe { (*(*mw).context).ops.dealloc_mw } {
        // SAFETY: the provider's deallocation of a window it allocated.
        Some(f) => unsafe { f(mw) },
        None => libc::EOPNOTSUPP,
    }
}

/// `ibv_query_port(ctx, port, attr)` as verbs.h's `___ibv_query_port` does it: the extended
/// `query_port` with the size of the caller's struct, or the compat entry point (over a
/// zeroed struct) for a provider without one.
///
/// # Safety
///
/// `ctx` is a live context.
pub(crate) unsafe fn query_port(ctx: *mut ffi::ibv_context, port: u8, attr: &mut ffi::ibv_port_attr) -> c_int {
    // SAFETY: the caller gives a live context.
    if let Some(vctx) = unsafe { verbs_get_ctx(ctx) } {
        // SAFETY: verbs_get_ctx found the provider's verbs_context, which is live as long as the context is.
        let vctx = unsafe { &*vctx };
        if has_op(vctx, offset_of!(ffi::verbs_context, query_port)) {
            if let Some(f) = vctx.query_port {
                // SAFETY: the provider's extended query with the struct's real size.
                return unsafe { f(ctx, port, attr, size_of::<ffi::ibv_port_attr>()) };
            }
        }
    }
    *attr = ffi::ibv_port_attr::default();
    // SAFETY: the exported compat query fills a prefix of `ibv_port_attr` (`_compat_ibv_port_attr` is its leading part, which is why verbs.h casts it).
    unsafe { ffi::ibv_query_port(ctx, port, (attr as *mut ffi::ibv_port_attr).cast()) }
}

/// `ibv_modify_cq(cq, attr)` (verbs.h): the extended `modify_cq`, or `EOPNOTSUPP`.
///
/// # Safety
///
/// `cq` is a live CQ.
pub(crate) unsafe fn modify_cq(cq: *mut ffi::ibv_cq, attr: &mut ffi::ibv_modify_cq_attr) -> c_int {
    // SAFETY: a live CQ's context is live.
    let Some(vctx) = (unsafe { verbs_get_ctx((*cq).context) }) else {
        return libc::EOPNOTSUPP;
    };
    // SAFETY: as in query_port.
    let vctx = unsafe { &*vctx };
    if !has_op(vctx, offset_of!(ffi::verbs_context, modify_cq)) {
        return libc::EOPNOTSUPP;
    }
    match vctx.modify_cq {
        // SAFETY: the provider's modify, with the caller's CQ.
        Some(f) => unsafe { f(cq, attr) },
        None => libc::EOPNOTSUPP,
    }
}

/// `ibv_create_cq_ex(ctx, attr)` (verbs.h): the extended `create_cq_ex` of the context.
/// Returns the CQ, or the errno: `EOPNOTSUPP` when the provider has no such op (as verbs.h
/// sets it), else the provider's.
///
/// # Safety
///
/// `ctx` is a live context, and the channel `attr` names, if any, belongs to it.
pub(crate) unsafe fn create_cq_ex(
    ctx: *mut ffi::ibv_context,
    attr: &mut ffi::ibv_cq_init_attr_ex,
) -> Result<*mut ffi::ibv_cq_ex, c_int> {
    // SAFETY: the caller gives a live context.
    let Some(vctx) = (unsafe { verbs_get_ctx(ctx) }) else {
        return Err(libc::EOPNOTSUPP);
    };
    // SAFETY: as in query_port.
    let vctx = unsafe { &*vctx };
    if !has_op(vctx, offset_of!(ffi::verbs_context, create_cq_ex)) {
        return Err(libc::EOPNOTSUPP);
    }
    let Some(f) = vctx.create_cq_ex else {
        return Err(libc::EOPNOTSUPP);
    };
    // SAFETY: the provider's create, with the caller's context and an initialised attribute struct.
    let cq = unsafe { f(ctx, attr) };
    if cq.is_null() {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO));
    }
    Ok(cq)
}

/// `ibv_start_poll(cq, attr)`: `cq->start_poll`. 0 with the first completion current,
/// `ENOENT` when the CQ is empty, another errno on failure (then `end_poll` must not be
/// called).
///
/// # Safety
///
/// `cq` is a live extended CQ that no other thread is polling.
#[inline]
pub(crate) unsafe fn start_poll(cq: *mut ffi::ibv_cq_ex) -> c_int {
    let mut attr = ffi::ibv_poll_cq_attr { comp_mask: 0 };
    // SAFETY: a live extended CQ; its provider filled the poll ops at create.
    match unsafe { (*cq).start_poll } {
        // SAFETY: the provider's start, with the caller's CQ and a zeroed attribute.
        Some(f) => unsafe { f(cq, &mut attr) },
        None => libc::EOPNOTSUPP,
    }
}

/// `ibv_next_poll(cq)`: `cq->next_poll`. 0 with the next completion current, `ENOENT` when
/// none is left, another errno on failure; `end_poll` follows in every case.
///
/// # Safety
///
/// `cq` is a live extended CQ between a successful [`start_poll`] and its [`end_poll`].
#[inline]
pub(crate) unsafe fn next_poll(cq: *mut ffi::ibv_cq_ex) -> c_int {
    // SAFETY: as in start_poll.
    match unsafe { (*cq).next_poll } {
        // SAFETY: the provider's next, inside the caller's poll.
        Some(f) => unsafe { f(cq) },
        None => libc::EOPNOTSUPP,
    }
}

/// `ibv_end_poll(cq)`: `cq->end_poll`, which ends a poll that [`start_poll`] began.
///
/// # Safety
///
/// As [`next_poll`].
#[inline]
pub(crate) unsafe fn end_poll(cq: *mut ffi::ibv_cq_ex) {
    // SAFETY: as in start_poll.
    if let Some(f) = unsafe { (*cq).end_poll } {
        // SAFETY: the provider's end, closing the caller's poll.
        unsafe { f(cq) }
    }
}

/// The provider's `verbs_context` of `ctx` if it is long enough to hold the op at
/// `op_offset` (verbs.h's `verbs_get_ctx_op`), else `None`.
///
/// # Safety
///
/// `ctx` is a live context; the reference lives no longer than it.
unsafe fn ctx_op<'a>(ctx: *mut ffi::ibv_context, op_offset: usize) -> Option<&'a ffi::verbs_context> {
    // SAFETY: the caller gives a live context.
    let vctx = unsafe { verbs_get_ctx(ctx) }?;
    // SAFETY: verbs_get_ctx found the provider's verbs_context, live as long as the context.
    let vctx = unsafe { &*vctx };
    has_op(vctx, op_offset).then_some(vctx)
}

/// The errno of a provider call that returned null (`EIO` when it set none).
fn last_errno() -> c_int {
    std::io::Error::last_os_error().raw_os_error().filter(|&e| e != 0).unwrap_or(libc::EIO)
}

/// `ibv_open_xrcd(ctx, attr)` (verbs.h): the extended `open_xrcd`. Returns the domain, or
/// the errno (`EOPNOTSUPP` when the provider has no such op, as verbs.h sets it).
///
/// # Safety
///
/// `ctx` is a live context.
pub(crate) unsafe fn open_xrcd(
    ctx: *mut ffi::ibv_context,
    attr: &mut ffi::ibv_xrcd_init_attr,
) -> Result<*mut ffi::ibv_xrcd, c_int> {
    // SAFETY: the caller gives a live context.
    let f = unsafe { ctx_op(ctx, offset_of!(ffi::verbs_context, open_xrcd)) }
        .and_then(|v| v.open_xrcd)
        .ok_or(libc::EOPNOTSUPP)?;
    // SAFETY: the provider's open, with the caller's context and a filled attribute.
    let xrcd = unsafe { f(ctx, attr) };
    if xrcd.is_null() {
        return Err(last_errno());
    }
    Ok(xrcd)
}

/// `ibv_close_xrcd(xrcd)` (verbs.h): the extended `close_xrcd` of its context; 0 or an
/// errno.
///
/// # Safety
///
/// `xrcd` is a live domain [`open_xrcd`] returned, closed once, with nothing made on it
/// left.
pub(crate) unsafe fn close_xrcd(xrcd: *mut ffi::ibv_xrcd) -> c_int {
    // SAFETY: a live domain's context is live.
    let ctx = unsafe { (*xrcd).context };
    // SAFETY: as above.
    match unsafe { ctx_op(ctx, offset_of!(ffi::verbs_context, close_xrcd)) }.and_then(|v| v.close_xrcd) {
        // SAFETY: the provider's close of a domain it opened.
        Some(f) => unsafe { f(xrcd) },
        None => libc::EOPNOTSUPP,
    }
}

/// `ibv_create_srq_ex(ctx, attr)` (verbs.h) for an SRQ verbs.h does not hand to
/// `ibv_create_srq` (an XRC one): the extended `create_srq_ex`. Returns the SRQ or the
/// errno.
///
/// # Safety
///
/// `ctx` is a live context, and the PD, domain and CQ `attr` names are live objects of it.
pub(crate) unsafe fn create_srq_ex(
    ctx: *mut ffi::ibv_context,
    attr: &mut ffi::ibv_srq_init_attr_ex,
) -> Result<*mut ffi::ibv_srq, c_int> {
    // SAFETY: the caller gives a live context.
    let f = unsafe { ctx_op(ctx, offset_of!(ffi::verbs_context, create_srq_ex)) }
        .and_then(|v| v.create_srq_ex)
        .ok_or(libc::EOPNOTSUPP)?;
    // SAFETY: the provider's create, with the caller's context and filled attributes.
    let srq = unsafe { f(ctx, attr) };
    if srq.is_null() {
        return Err(last_errno());
    }
    Ok(srq)
}

/// `ibv_get_srq_num(srq, &num)` (verbs.h): the extended `get_srq_num`; the number or the
/// errno.
///
/// # Safety
///
/// `srq` is a live SRQ.
pub(crate) unsafe fn get_srq_num(srq: *mut ffi::ibv_srq) -> Result<u32, c_int> {
    // SAFETY: a live SRQ's context is live.
    let ctx = unsafe { (*srq).context };
    // SAFETY: as above.
    let f = unsafe { ctx_op(ctx, offset_of!(ffi::verbs_context, get_srq_num)) }
        .and_then(|v| v.get_srq_num)
        .ok_or(libc::EOPNOTSUPP)?;
    let mut num = 0u32;
    // SAFETY: the provider's query of a live SRQ into a local.
    match unsafe { f(srq, &mut num) } {
        0 => Ok(num),
        rc => Err(rc.abs()),
    }
}

/// `ibv_create_qp_ex(ctx, attr)` (verbs.h) for a QP verbs.h does not hand to
/// `ibv_create_qp` (any `comp_mask` but `IBV_QP_INIT_ATTR_PD` alone: an XRC target):
/// the extended `create_qp_ex`. Returns the QP or the errno.
///
/// # Safety
///
/// `ctx` is a live context, and every object `attr` names is a live object of it.
pub(crate) unsafe fn create_qp_ex(
    ctx: *mut ffi::ibv_context,
    attr: &mut ffi::ibv_qp_init_attr_ex,
) -> Result<*mut ffi::ibv_qp, c_int> {
    // SAFETY: the caller gives a live context.
    let f = unsafe { ctx_op(ctx, offset_of!(ffi::verbs_context, create_qp_ex)) }
        .and_then(|v| v.create_qp_ex)
        .ok_or(libc::EOPNOTSUPP)?;
    // SAFETY: the provider's create, with the caller's context and filled attributes.
    let qp = unsafe { f(ctx, attr) };
    if qp.is_null() {
        return Err(last_errno());
    }
    Ok(qp)
}
