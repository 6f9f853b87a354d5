//! Attaching what the application made with rdma-core: its context, CQs, QPs, SRQs,
//! memory regions and completion channel, so its poll loop moves to dvcq and its posts
//! stay as they are.
//!
//! Where rdma-core cannot be loaded at run time (not installed, or `DVCQ_NO_RDMA_CORE=1`)
//! they return `-EOPNOTSUPP` and say what to install. The pointers are the application's own rdma-core objects,
//! handed to the dvcq library, which checks each against the others (same context, the
//! provider's layout) before using it.

use crate::context::dvcq_context;
use crate::cq::dvcq_cq;
use crate::error::{guard, Fail};
use crate::event::dvcq_channel;
use crate::handle;
use core::ffi::c_int;
use core::marker::{PhantomData, PhantomPinned};

// rdma-core's objects, declared for C (`struct ibv_cq;`, which verbs.h completes) and never
// defined here: dvcq's library reads them.

/// rdma-core's `struct ibv_context`.
pub struct ibv_context {
    _opaque: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}
/// rdma-core's `struct ibv_cq`.
pub struct ibv_cq {
    _opaque: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}
/// rdma-core's `struct ibv_qp`.
pub struct ibv_qp {
    _opaque: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}
/// rdma-core's `struct ibv_srq`.
pub struct ibv_srq {
    _opaque: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}
/// rdma-core's `struct ibv_wq`.
pub struct ibv_wq {
    _opaque: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}
/// rdma-core's `struct ibv_mr`.
pub struct ibv_mr {
    _opaque: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}
/// rdma-core's `struct ibv_comp_channel`.
pub struct ibv_comp_channel {
    _opaque: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// `dvcq_cq_attach` flags: a direct backend where one applies and its self-checks pass,
/// else rdma-core's `ibv_poll_cq` (the reason says why).
pub const DVCQ_ATTACH_AUTO: u32 = 0;
/// A direct backend or `-EOPNOTSUPP` (declined; the message says which check refused).
pub const DVCQ_ATTACH_DIRECT: u32 = 1;
/// rdma-core's `ibv_poll_cq`, even where a direct backend applies.
pub const DVCQ_ATTACH_GENERIC: u32 = 2;

/// A required application pointer.
fn nonnull<T>(call: &str, what: &str, p: *mut T) -> Result<core::ptr::NonNull<core::ffi::c_void>, Fail> {
    core::ptr::NonNull::new(p.cast()).ok_or_else(|| Fail::inval(call, format!("{what} is NULL")))
}

/// Adopts an `ibv_context` the application opened, for `dvcq_cq_attach`. dvcq never
/// closes it (`dvcq_context_close` gives back only the handle).
///
/// # Safety
///
/// `ibv_ctx` is a live `struct ibv_context *` that stays open while this context or
/// anything attached through it exists; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn dvcq_context_from_ibv(ibv_ctx: *mut ibv_context, out: *mut *mut dvcq_context) -> c_int {
    const CALL: &str = "dvcq_context_from_ibv";
    guard(CALL, || {
        // SAFETY: the caller's promise about `out`.
        unsafe { handle::clear(out) };
        {
            let p = nonnull(CALL, "ibv_ctx", ibv_ctx)?;
            // SAFETY: the caller's promise: a live ibv_context, open while anything made from it is.
            let ctx = unsafe { dvcq::Context::from_raw(p) }.map_err(|e| Fail::of(CALL, &e))?;
            // SAFETY: the caller's promise about `out`.
            unsafe { handle::give(CALL, out, dvcq_context::new(ctx)) }
        }
    })
}

/// Attaches the application's `ibv_cq`, created on the context `ctx` adopted: dvcq polls
/// it from now on (`dvcq_cq_poll`), directly where a backend applies (`flags`:
/// `DVCQ_ATTACH_*`). Attach its QPs (`dvcq_cq_attach_qp`) before their first completion.
/// `-EOPNOTSUPP` when `DVCQ_ATTACH_DIRECT` was asked and declined; `-EINVAL` for a CQ of
/// another context (a model's among them) or one attached already.
///
/// # Safety
///
/// `ibv_cq` is a live `struct ibv_cq *` that the application destroys only after
/// `dvcq_cq_detach`, and does not poll, arm, resize or destroy meanwhile except through
/// dvcq; `ctx` is a live context; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn dvcq_cq_attach(
    ctx: *const dvcq_context,
    ibv_cq: *mut ibv_cq,
    flags: u32,
    out: *mut *mut dvcq_cq,
) -> c_int {
    const CALL: &str = "dvcq_cq_attach";
    guard(CALL, || {
        // SAFETY: the caller's promise about `out`.
        unsafe { handle::clear(out) };
        // SAFETY: the caller's promise about `ctx`.
        let h = unsafe { handle::get(CALL, ctx) }?;
        let choice = match flags {
            DVCQ_ATTACH_AUTO => dvcq::BackendChoice::Auto,
            DVCQ_ATTACH_DIRECT => dvcq::BackendChoice::Direct,
            DVCQ_ATTACH_GENERIC => dvcq::BackendChoice::Generic,
            f => return Err(Fail::inval(CALL, format!("flags {f:#x}: DVCQ_ATTACH_AUTO, _DIRECT or _GENERIC"))),
        };
        {
            let p = nonnull(CALL, "ibv_cq", ibv_cq)?;
            let ctx = handle::lock(CALL, "context", &h.ctx)?;
            // SAFETY: the caller's promise: a live CQ of this context, left to dvcq until detached.
            let cq = unsafe { dvcq::Cq::attach(&ctx, p, choice) }.map_err(|e| Fail::of(CALL, &e))?;
            // SAFETY: the caller's promise about `out`.
            unsafe { handle::give(CALL, out, dvcq_cq::new(cq, true)) }
        }
    })
}

/// Gives back an attached CQ: dvcq stops polling it; the application may destroy its
/// `ibv_cq` (and the QPs attached) once this returns.
///
/// # Safety
///
/// `cq` is a live attached CQ that no other thread is using.
#[no_mangle]
pub unsafe extern "C" fn dvcq_cq_detach(cq: *mut dvcq_cq) -> c_int {
    const CALL: &str = "dvcq_cq_detach";
    // SAFETY: the caller's promise.
    guard(CALL, || unsafe { crate::cq::release(CALL, cq, true) })
}

/// The kinds of application object an attached CQ learns about.
#[derive(Clone, Copy)]
enum Object {
    Qp,
    Srq,
    Wq,
    Mr,
}

impl Object {
    /// rdma-core's name of the object, for messages.
    fn name(self) -> &'static str {
        match self {
            Object::Qp => "ibv_qp",
            Object::Srq => "ibv_srq",
            Object::Wq => "ibv_wq",
            Object::Mr => "ibv_mr",
        }
    }
}

/// Names one of the application's objects to the attached CQ `cq`.
///
/// # Safety
///
/// `cq` is a live CQ; `p` is a live object of the kind `what` names, as the public
/// functions below require.
unsafe fn attach_object<T>(call: &str, cq: *mut dvcq_cq, p: *mut T, what: Object) -> Result<c_int, Fail> {
    // SAFETY: the caller's promise.
    let h = unsafe { handle::get(call, cq) }?;
    {
        let p = nonnull(call, what.name(), p)?;
        let mut s = handle::try_lock(call, "CQ", &h.state)?;
        if !s.attached {
            return Err(Fail::inval(
                call,
                "this CQ was made by dvcq (dvcq_cq_create), not attached: its QPs are dvcq's",
            ));
        }
        let r = match what {
            // SAFETY: the caller's promise: a live QP completing on this CQ, alive and posted to as `dvcq_cq_attach_qp` says.
            Object::Qp => unsafe { s.cq.attach_qp(p) },
            // SAFETY: the caller's promise: a live SRQ its QPs receive from, as `dvcq_cq_attach_srq` says.
            Object::Srq => unsafe { s.cq.attach_srq(p) },
            // SAFETY: the caller's promise: a live WQ completing on this CQ, as `dvcq_cq_attach_wq` says.
            Object::Wq => unsafe { s.cq.attach_wq(p) },
            // SAFETY: the caller's promise: a live MR, registered and allocated while the CQ is attached.
            Object::Mr => unsafe { s.cq.attach_mr(p) },
        };
        r.map_err(|e| Fail::of(call, &e))?;
        Ok(0)
    }
}

/// Names a QP the application created whose send or receive queue completes on the
/// attached CQ, so its completions carry the `wr_id`s it posts (`ibv_post_send` and
/// `ibv_post_recv` go on working). Call it before the QP's first completion, on each
/// attached CQ it uses. A QP's SRQ comes along. `-EOPNOTSUPP` when the direct backend
/// refuses it and the CQ cannot fall back (see `dvcq_cq_backend_reason` after a fallback).
///
/// # Safety
///
/// `cq` is a live attached CQ; `qp` a live `struct ibv_qp *` destroyed only after
/// `dvcq_cq_detach`, posted to only on the polling thread or ordered with its polls.
#[no_mangle]
pub unsafe extern "C" fn dvcq_cq_attach_qp(cq: *mut dvcq_cq, qp: *mut ibv_qp) -> c_int {
    const CALL: &str = "dvcq_cq_attach_qp";
    // SAFETY: the caller's promise.
    guard(CALL, || unsafe { attach_object(CALL, cq, qp, Object::Qp) })
}

/// Names an SRQ the application created that QPs completing on the attached CQ receive
/// from (before any of its QPs, if attached separately).
///
/// # Safety
///
/// `cq` is a live attached CQ; `srq` a live `struct ibv_srq *` destroyed only after
/// `dvcq_cq_detach`, posted to only on the polling thread or ordered with its polls.
#[no_mangle]
pub unsafe extern "C" fn dvcq_cq_attach_srq(cq: *mut dvcq_cq, srq: *mut ibv_srq) -> c_int {
    const CALL: &str = "dvcq_cq_attach_srq";
    // SAFETY: the caller's promise.
    guard(CALL, || unsafe { attach_object(CALL, cq, srq, Object::Srq) })
}

/// Names a receive WQ the application created (`ibv_create_wq`, the queues an RSS QP
/// spreads its receives over) that completes on the attached CQ, so its completions carry
/// the `wr_id`s `ibv_post_wq_recv` posts. `-EOPNOTSUPP` as for `dvcq_cq_attach_qp`.
///
/// # Safety
///
/// `cq` is a live attached CQ; `wq` a live `struct ibv_wq *` destroyed only after
/// `dvcq_cq_detach_wq` or `dvcq_cq_detach`, posted to only on the polling thread or ordered
/// with its polls.
#[no_mangle]
pub unsafe extern "C" fn dvcq_cq_attach_wq(cq: *mut dvcq_cq, wq: *mut ibv_wq) -> c_int {
    const CALL: &str = "dvcq_cq_attach_wq";
    // SAFETY: the caller's promise.
    guard(CALL, || unsafe { attach_object(CALL, cq, wq, Object::Wq) })
}

/// Lets go of one object named to the attached CQ `cq`, which stays attached.
///
/// # Safety
///
/// `cq` is a live CQ; `p` is a live object of the kind `what` names (not an MR).
unsafe fn detach_object<T>(call: &str, cq: *mut dvcq_cq, p: *mut T, what: Object) -> Result<c_int, Fail> {
    // SAFETY: the caller's promise.
    let h = unsafe { handle::get(call, cq) }?;
    let p = nonnull(call, what.name(), p)?;
    let mut s = handle::try_lock(call, "CQ", &h.state)?;
    if !s.attached {
        return Err(Fail::inval(call, "this CQ was made by dvcq (dvcq_cq_create), not attached: its QPs are dvcq's"));
    }
    match what {
        // SAFETY: the caller's promise: a live QP (its number is read).
        Object::Qp => unsafe { s.cq.detach_qp(p) },
        Object::Srq => s.cq.detach_srq(p),
        Object::Wq => s.cq.detach_wq(p),
        Object::Mr => return Err(Fail::inval(call, "a memory region is not detached alone")),
    }
    Ok(0)
}

/// Stops following a QP named with `dvcq_cq_attach_qp`, so the application may destroy it
/// (`ibv_destroy_qp`) while the CQ stays attached. Its completions still in the ring then
/// come back as fault items of kind `DVCQ_FAULT_UNKNOWN_QP` (see `dvcq_cq_poll`) on mlx5,
/// where rdma-core does not clean an attached CQ; on irdma they are cleared as rdma-core's
/// destroy clears them. A QP never attached is no error.
///
/// # Safety
///
/// `cq` is a live attached CQ not polled meanwhile; `qp` a live `struct ibv_qp *`.
#[no_mangle]
pub unsafe extern "C" fn dvcq_cq_detach_qp(cq: *mut dvcq_cq, qp: *mut ibv_qp) -> c_int {
    const CALL: &str = "dvcq_cq_detach_qp";
    // SAFETY: the caller's promise.
    guard(CALL, || unsafe { detach_object(CALL, cq, qp, Object::Qp) })
}

/// Stops following an SRQ (named with `dvcq_cq_attach_srq` or through a QP), so the
/// application may destroy it once no attached QP receives from it.
///
/// # Safety
///
/// `cq` is a live attached CQ not polled meanwhile; `srq` a `struct ibv_srq *`.
#[no_mangle]
pub unsafe extern "C" fn dvcq_cq_detach_srq(cq: *mut dvcq_cq, srq: *mut ibv_srq) -> c_int {
    const CALL: &str = "dvcq_cq_detach_srq";
    // SAFETY: the caller's promise.
    guard(CALL, || unsafe { detach_object(CALL, cq, srq, Object::Srq) })
}

/// Stops following a WQ named with `dvcq_cq_attach_wq`, so the application may destroy it
/// (`ibv_destroy_wq`) while the CQ stays attached; its completions still in the ring come
/// back as `dvcq_cq_detach_qp` says.
///
/// # Safety
///
/// `cq` is a live attached CQ not polled meanwhile; `wq` a `struct ibv_wq *`.
#[no_mangle]
pub unsafe extern "C" fn dvcq_cq_detach_wq(cq: *mut dvcq_cq, wq: *mut ibv_wq) -> c_int {
    const CALL: &str = "dvcq_cq_detach_wq";
    // SAFETY: the caller's promise.
    guard(CALL, || unsafe { detach_object(CALL, cq, wq, Object::Wq) })
}

/// Names a memory region that receives and READ responses of the attached QPs land in, so
/// data the device delivered inside a CQE (mlx5 inline scatter) is copied there as
/// rdma-core's poll would.
///
/// # Safety
///
/// `cq` is a live attached CQ; `mr` a live `struct ibv_mr *` registered and allocated until
/// `dvcq_cq_detach`, read only after the poll that completed into it.
#[no_mangle]
pub unsafe extern "C" fn dvcq_cq_attach_mr(cq: *mut dvcq_cq, mr: *mut ibv_mr) -> c_int {
    const CALL: &str = "dvcq_cq_attach_mr";
    // SAFETY: the caller's promise.
    guard(CALL, || unsafe { attach_object(CALL, cq, mr, Object::Mr) })
}

/// Adopts the completion channel the application created its attached CQs on, so
/// `dvcq_cq_wait` works on them once bound (`dvcq_cq_bind_channel`). dvcq reads and
/// acknowledges its events from then on, and never destroys it.
///
/// # Safety
///
/// `ctx` is a live context adopted from the channel's `ibv_context`; `channel` a live
/// `struct ibv_comp_channel *` destroyed only after this handle and every CQ bound to it
/// are gone, from which the application reads no events meanwhile; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn dvcq_channel_from_ibv(
    ctx: *const dvcq_context,
    channel: *mut ibv_comp_channel,
    out: *mut *mut dvcq_channel,
) -> c_int {
    const CALL: &str = "dvcq_channel_from_ibv";
    guard(CALL, || {
        // SAFETY: the caller's promise about `out`.
        unsafe { handle::clear(out) };
        // SAFETY: the caller's promise about `ctx`.
        let h = unsafe { handle::get(CALL, ctx) }?;
        {
            let p = nonnull(CALL, "channel", channel)?;
            let ctx = handle::lock(CALL, "context", &h.ctx)?;
            // SAFETY: the caller's promise: a live channel of this context, as above.
            let ch = unsafe { dvcq::CompletionChannel::from_raw(&ctx, p) }.map_err(|e| Fail::of(CALL, &e))?;
            // SAFETY: the caller's promise about `out`.
            unsafe { handle::give(CALL, out, dvcq_channel::new(ch)) }
        }
    })
}

/// Binds an attached CQ to the channel the application created it on (adopted with
/// `dvcq_channel_from_ibv`): its events are read there, routed to it and acknowledged.
///
/// # Safety
///
/// `cq` is a live attached CQ; `channel` a live channel.
#[no_mangle]
pub unsafe extern "C" fn dvcq_cq_bind_channel(cq: *mut dvcq_cq, channel: *const dvcq_channel) -> c_int {
    const CALL: &str = "dvcq_cq_bind_channel";
    guard(CALL, || {
        // SAFETY: the caller's promise.
        let h = unsafe { handle::get(CALL, cq) }?;
        // SAFETY: the caller's promise.
        let ch = unsafe { handle::get(CALL, channel) }?;
        {
            let mut s = handle::try_lock(CALL, "CQ", &h.state)?;
            s.cq.bind_channel(&ch.channel).map_err(|e| Fail::of(CALL, &e))?;
            Ok(0)
        }
    })
}
