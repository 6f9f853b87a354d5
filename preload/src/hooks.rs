//! The functions the preload exports in place of libibverbs' and libmlx5's, and the
//! replacements of the `verbs_context` create functions that verbs.h's inline verbs call.
//! Each calls rdma-core's own function and then tells dvcq about what was made (or, before
//! a destroy or resize, lets dvcq go of it).

use crate::cq::{self, CqEntry, Polled};
use crate::layout::{IbvContext, IbvCq, IbvQp, IbvWq};
use crate::real::{self, call_real};
use crate::{ctx, lock, mode, Inside, Mode};
use core::ffi::{c_int, c_void};
use core::ptr::NonNull;
use dvcq::{BackendChoice, BackendKind};

/// Records a CQ dvcq does not poll, with the reason (printed once per reason).
fn decline(serial: u64, how: &str, why: &str) {
    crate::log::once(format!("{how}: the provider polls it: {why}"));
    lock(&cq::REPORT).push(format!("cq {serial} backend provider mode {} declined: {why}", mode().name()));
}

/// dvcq's attach of the application's CQ `raw`, with the backend it may use in `mode`.
///
/// # Safety
///
/// `raw` is a live CQ of `dctx`'s context.
unsafe fn attach(dctx: &dvcq::Context, raw: *mut IbvCq, mode: Mode) -> Result<dvcq::Cq, String> {
    let _in = Inside::enter();
    // SAFETY: the caller's live CQ; the preload lets dvcq's Cq go before the CQ's destroy or resize, and routes every poll and arm of it through dvcq meanwhile (own mode).
    let c = unsafe { dvcq::Cq::attach(dctx, NonNull::new_unchecked(raw.cast::<c_void>()), BackendChoice::Auto) }
        .map_err(|e| e.to_string())?;
    let b = c.backend();
    if b.kind == BackendKind::Generic {
        return Err(format!("no direct backend ({})", b.reason));
    }
    if mode == Mode::Verify && b.kind == BackendKind::Irdma {
        return Err(
            "verify mode reads the ring after the provider, which irdma's shadow-area write-back does not allow".into(),
        );
    }
    Ok(c)
}

/// Takes a CQ the application just created, in `own` or `verify` mode; an extended one
/// (`ext`) gets the preload's `start_poll` ... `read_*` (`crate::ext`), or is declined when
/// dvcq cannot answer what it was made with.
///
/// # Safety
///
/// `raw` is a live CQ that rdma-core just created (by `create_cq_ex` or
/// `mlx5dv_create_cq` when `ext`), not yet returned to the application.
unsafe fn adopt_cq(raw: *mut IbvCq, how: &str, ext: bool) {
    let mode = mode();
    if mode == Mode::Off {
        return;
    }
    let serial = cq::next_serial();
    // SAFETY: the live CQ's context.
    let Some(s) = (unsafe { ctx::state((*raw).context) }) else {
        return decline(serial, how, "its context is not known");
    };
    let dctx = match &s.dvcq {
        Ok(c) => c,
        Err(e) => return decline(serial, how, e),
    };
    // SAFETY: the caller's live CQ, of that context.
    match unsafe { attach(dctx, raw, mode) } {
        Ok(c) => {
            // SAFETY: the caller's CQ, extended when `ext`.
            let saved = ext.then(|| unsafe { crate::ext::saved(raw) });
            if let Some(why) = saved.and_then(|s| crate::ext::unsupported(&s, c.backend().kind, mode)) {
                let _in = Inside::enter();
                c.give_back();
                return decline(serial, how, &why);
            }
            match cq::register(raw, mode, c, serial, saved) {
                // SAFETY: the caller's extended CQ, registered, not yet returned to the application.
                Ok(()) => saved.iter().for_each(|s| unsafe { crate::ext::install(raw, mode, s) }),
                Err(why) => decline(serial, how, &why),
            }
        }
        Err(why) => decline(serial, how, &why),
    }
}

/// Lets dvcq's CQ go and attaches the CQ again from the provider's state, with the QPs known
/// on it (verify mode after a resize, a QP destroyed, a lost step; own mode on rxe after a
/// resize, where the ring's consumer index is the provider's too).
pub(crate) fn reattach(e: &CqEntry, raw: *mut IbvCq, p: &mut Polled, why: &str) {
    let _in = Inside::enter();
    if let Some(c) = p.cq.take() {
        c.give_back();
    }
    // SAFETY: the live CQ's context, known since its creation.
    let Some(Ok(dctx)) = ctx::known(unsafe { (*raw).context }).map(|s| &s.dvcq) else {
        return;
    };
    // SAFETY: the application's live CQ (the caller holds its entry's lock).
    match unsafe { attach(dctx, raw, e.mode) } {
        Ok(mut c) => {
            for &qp in &p.qps {
                // SAFETY: QPs recorded at their creation and removed before their destroy.
                if let Err(err) = unsafe { attach_qp_to(&mut c, qp as *mut c_void, e.mode) } {
                    crate::log::once(format!("cq {}: after {why}: the provider polls it: {err}", e.serial));
                    return;
                }
            }
            p.cq = Some(c);
        }
        Err(err) => crate::log::once(format!("cq {}: after {why}: the provider polls it: {err}", e.serial)),
    }
}

/// `Cq::attach_qp` (or `attach_wq`), with verify mode's limit.
///
/// # Safety
///
/// `obj` is a live QP (or WQ when it is tagged so by the caller) of the CQ's context.
unsafe fn attach_qp_to(c: &mut dvcq::Cq, obj: *mut c_void, mode: Mode) -> Result<(), String> {
    let wq = is_wq(obj);
    let ptr = (obj as usize & !1) as *mut c_void;
    if !wq && mode == Mode::Verify && c.backend().kind == BackendKind::Mlx5 {
        // SAFETY: the caller's live QP.
        if !unsafe { (*ptr.cast::<IbvQp>()).srq }.is_null() {
            return Err("verify mode on mlx5 does not follow SRQs (dvcq's poll would give the provider's free SRQ entries back a second time)".into());
        }
    }
    let _in = Inside::enter();
    // SAFETY: the caller's live object; the preload detaches it before its destroy.
    let r = unsafe {
        if wq {
            c.attach_wq(NonNull::new_unchecked(ptr))
        } else {
            c.attach_qp(NonNull::new_unchecked(ptr))
        }
    };
    r.map_err(|e| e.to_string())
}

/// Whether `obj`, as the QP hooks pass it, is a WQ (its address tagged with bit 0).
fn is_wq(obj: *mut c_void) -> bool {
    obj as usize & 1 == 1
}

/// Names a new QP (or WQ, address tagged with bit 0) to the registered CQs it completes on.
///
/// # Safety
///
/// `obj` is a live QP or WQ whose CQs are `cqs`.
unsafe fn adopt_qp(obj: *mut c_void, cqs: [*mut IbvCq; 2], qpn: u32) {
    for (i, raw) in cqs.into_iter().enumerate() {
        if raw.is_null() || (i == 1 && raw == cqs[0]) {
            continue;
        }
        let Some(e) = cq::get(raw) else { continue };
        crate::ext::with_polled(e, |p| {
            if !is_wq(obj) {
                p.gone_qps.retain(|&q| q != qpn);
            }
            p.qps.push(obj as usize);
            let Some(c) = p.cq.as_mut() else { return };
            // SAFETY: the caller's live object, of the CQ's context.
            if let Err(err) = unsafe { attach_qp_to(c, obj, e.mode) } {
                if e.mode == Mode::Verify {
                    crate::log::once(format!("cq {}: the provider polls it: {err}", e.serial));
                    let _in = Inside::enter();
                    if let Some(c) = p.cq.take() {
                        c.give_back();
                    }
                } else {
                    crate::log::once(format!(
                    "cq {}: qp {qpn:#x} could not be attached after dvcq polled the CQ: its completions come back as failed ones: {err}",
                    e.serial
                ));
                }
            }
        });
    }
}

/// Before the destroy of a QP (or WQ, tagged): dvcq stops following it.
///
/// # Safety
///
/// `obj` is a live QP or WQ whose CQs are `cqs`.
unsafe fn forget_qp(obj: *mut c_void, cqs: [*mut IbvCq; 2], qpn: u32) {
    for (i, raw) in cqs.into_iter().enumerate() {
        if raw.is_null() || (i == 1 && raw == cqs[0]) {
            continue;
        }
        let Some(e) = cq::get(raw) else { continue };
        crate::ext::with_polled(e, |p| {
            p.qps.retain(|&q| q != obj as usize);
            match e.mode {
                // The provider's state is the truth: let the CQ go so rdma-core cleans the QP's
                // CQEs as it would without dvcq, and take it again after the destroy.
                Mode::Verify => {
                    let _in = Inside::enter();
                    if let Some(c) = p.cq.take() {
                        c.give_back();
                    }
                }
                _ if is_wq(obj) => {
                    // A WQ's completions carry the number of the QP that spread the packet to
                    // it, not the WQ's (which may equal a live QP's): nothing is filtered by
                    // number. Its CQEs still in the ring become unknown-QP items, which the
                    // drain after the destroy drops.
                    if let Some(c) = p.cq.as_mut() {
                        let _in = Inside::enter();
                        // SAFETY: the caller's live WQ, untagged.
                        c.detach_wq(unsafe { NonNull::new_unchecked((obj as usize & !1) as *mut c_void) });
                    }
                }
                _ => {
                    if let Some(c) = p.cq.as_mut() {
                        let _in = Inside::enter();
                        // SAFETY: the caller's live QP.
                        unsafe { c.detach_qp(NonNull::new_unchecked(obj)) };
                    }
                    // Completions of this QP taken out of the ring at an earlier destroy go too.
                    let before = p.pending.len();
                    p.pending.retain(|(w, _)| w.qp_num != qpn);
                    e.absorbed.fetch_add((before - p.pending.len()) as u64, std::sync::atomic::Ordering::Relaxed);
                    p.gone_qps.push(qpn);
                }
            }
        });
    }
}

/// After the destroy: verify mode takes the CQs again; own mode removes the destroyed QP's
/// CQEs from the ring, as rdma-core's clean would have (rdma-core does not clean a CQ dvcq
/// polls directly on mlx5, and would start from its own consumer index anyway): every
/// entry in the ring now is taken out, those of QPs dvcq no longer knows are dropped, and
/// the others are kept, in order, for the application's next polls. The device writes no
/// more CQEs for a destroyed QP, and its user index cannot have been given to a new QP yet,
/// so none of the dropped entries is another QP's.
fn after_destroy(cqs: [*mut IbvCq; 2], what: &str) {
    for (i, raw) in cqs.into_iter().enumerate() {
        if raw.is_null() || (i == 1 && raw == cqs[0]) {
            continue;
        }
        let Some(e) = cq::get(raw) else { continue };
        crate::ext::with_polled(e, |p| match e.mode {
            Mode::Verify if p.cq.is_none() => reattach(e, raw, p, what),
            // Only mlx5 leaves the destroyed QP's CQEs in the ring for dvcq (rxe's provider
            // never cleans them and the application polls them as before; dvcq's irdma
            // backend clears them as rdma-core's destroy does).
            Mode::Own if p.cq.as_ref().is_some_and(|c| c.backend().kind == BackendKind::Mlx5) => {
                cq::drain_after_destroy(e, p)
            }
            _ => {}
        });
    }
}

// ---- contexts

/// `ibv_open_device`: the context's ops are patched before it is returned.
///
/// # Safety
///
/// As `ibv_open_device`.
#[no_mangle]
pub unsafe extern "C" fn ibv_open_device(device: *mut c_void) -> *mut IbvContext {
    type F = unsafe extern "C" fn(*mut c_void) -> *mut IbvContext;
    let ctx = call_real!(real::OPEN_DEVICE, F, core::ptr::null_mut(), (device));
    if !ctx.is_null() && mode() != Mode::Off {
        // SAFETY: a context just opened, not yet seen by any other thread.
        unsafe { ctx::state(ctx) };
    }
    ctx
}

/// `ibv_import_device`: as `ibv_open_device`.
///
/// # Safety
///
/// As `ibv_import_device`.
#[no_mangle]
pub unsafe extern "C" fn ibv_import_device(cmd_fd: c_int) -> *mut IbvContext {
    type F = unsafe extern "C" fn(c_int) -> *mut IbvContext;
    let ctx = call_real!(real::IMPORT_DEVICE, F, core::ptr::null_mut(), (cmd_fd));
    if !ctx.is_null() && mode() != Mode::Off {
        // SAFETY: as in ibv_open_device.
        unsafe { ctx::state(ctx) };
    }
    ctx
}

/// `ibv_close_device`: dvcq's adoption of the context goes first.
///
/// # Safety
///
/// As `ibv_close_device`.
#[no_mangle]
pub unsafe extern "C" fn ibv_close_device(ctx: *mut IbvContext) -> c_int {
    type F = unsafe extern "C" fn(*mut IbvContext) -> c_int;
    {
        let _in = Inside::enter();
        ctx::forget(ctx);
    }
    call_real!(real::CLOSE_DEVICE, F, libc::EINVAL, (ctx))
}

// ---- CQs

/// `ibv_create_cq`.
///
/// # Safety
///
/// As `ibv_create_cq`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_cq(
    ctx: *mut IbvContext,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut c_void,
    comp_vector: c_int,
) -> *mut IbvCq {
    type F = unsafe extern "C" fn(*mut IbvContext, c_int, *mut c_void, *mut c_void, c_int) -> *mut IbvCq;
    if !ctx.is_null() && mode() != Mode::Off {
        // SAFETY: the caller's live context (patched before the CQ exists).
        unsafe { ctx::state(ctx) };
    }
    let cq = call_real!(real::CREATE_CQ, F, core::ptr::null_mut(), (ctx, cqe, cq_context, channel, comp_vector));
    if !cq.is_null() {
        // SAFETY: a CQ rdma-core just created.
        unsafe { adopt_cq(cq, "ibv_create_cq", false) };
    }
    cq
}

/// The context's `create_cq_ex` (`ibv_create_cq_ex`): the provider's, then the CQ is
/// adopted with its extended poll (`crate::ext`).
///
/// # Safety
///
/// As `ibv_create_cq_ex`.
pub(crate) unsafe extern "C" fn create_cq_ex(ctx: *mut IbvContext, attr: *mut c_void) -> *mut IbvCq {
    type F = unsafe extern "C" fn(*mut IbvContext, *mut c_void) -> *mut IbvCq;
    let Some(s) = ctx::known(ctx).filter(|s| s.create_cq_ex != 0) else {
        return core::ptr::null_mut();
    };
    // SAFETY: the provider's own slot value, of this signature (verbs.h).
    let f: F = unsafe { core::mem::transmute::<usize, F>(s.create_cq_ex) };
    // SAFETY: the caller's arguments.
    let cq = unsafe { f(ctx, attr) };
    if !cq.is_null() {
        // SAFETY: an extended CQ the provider just created.
        unsafe { adopt_cq(cq, "ibv_create_cq_ex", true) };
    }
    cq
}

/// `mlx5dv_create_cq`: the provider's, then adopted as an extended CQ.
///
/// # Safety
///
/// As `mlx5dv_create_cq`.
#[no_mangle]
pub unsafe extern "C" fn mlx5dv_create_cq(ctx: *mut IbvContext, attr: *mut c_void, dv_attr: *mut c_void) -> *mut IbvCq {
    type F = unsafe extern "C" fn(*mut IbvContext, *mut c_void, *mut c_void) -> *mut IbvCq;
    let cq = call_real!(real::MLX5DV_CREATE_CQ, F, core::ptr::null_mut(), (ctx, attr, dv_attr));
    if !cq.is_null() {
        // SAFETY: an extended CQ libmlx5 just created.
        unsafe { adopt_cq(cq, "mlx5dv_create_cq", true) };
    }
    cq
}

/// `ibv_destroy_cq`: dvcq hands the CQ's state back to the provider (own mode: its
/// consumer index, as before a resize), the provider destroys it (waiting, as it does, for
/// the events read to be acknowledged), and dvcq lets it go, its report line kept. The
/// kernel may refuse (`EBUSY` while a QP or WQ still uses the CQ): the CQ then lives on
/// unchanged, and dvcq takes it again.
///
/// # Safety
///
/// As `ibv_destroy_cq`.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_cq(raw: *mut IbvCq) -> c_int {
    type F = unsafe extern "C" fn(*mut IbvCq) -> c_int;
    let Some(e) = cq::get(raw) else {
        return call_real!(real::DESTROY_CQ, F, libc::EINVAL, (raw));
    };
    let backend = e.backend_name();
    let mut p = lock(&e.polled);
    if let Some(c) = p.cq.take() {
        let _in = Inside::enter();
        match e.mode {
            Mode::Own => {
                c.hand_over();
            }
            _ => c.give_back(),
        }
    }
    let rc = call_real!(real::DESTROY_CQ, F, libc::EINVAL, (raw));
    if rc != 0 {
        reattach(e, raw, &mut p, "a refused ibv_destroy_cq");
        return rc;
    }
    drop(p);
    if let Some(e) = cq::unregister(raw, backend) {
        let _in = Inside::enter();
        drop(e);
    }
    crate::ext::forget(raw);
    rc
}

/// `ibv_resize_cq`: verify mode (and own mode on rxe, whose consumer index is shared with
/// the provider) lets the CQ go, resizes it and takes it again; own mode on mlx5 hands
/// rdma-core dvcq's consumer index first ([`dvcq::Cq::hand_over`]), so that the provider's
/// copy starts at the first entry dvcq did not take. Own mode on irdma refuses with
/// `EOPNOTSUPP`: libirdma's copy would start at its own ring head, which dvcq's polls left
/// behind, and dvcq does not hand that state back.
///
/// # Safety
///
/// As `ibv_resize_cq`.
#[no_mangle]
pub unsafe extern "C" fn ibv_resize_cq(raw: *mut IbvCq, cqe: c_int) -> c_int {
    type F = unsafe extern "C" fn(*mut IbvCq, c_int) -> c_int;
    let Some(e) = cq::get(raw) else {
        return call_real!(real::RESIZE_CQ, F, libc::EINVAL, (raw, cqe));
    };
    let mut p = lock(&e.polled);
    let kind = p.cq.as_ref().map(|c| c.backend().kind);
    if e.mode == Mode::Own && kind == Some(BackendKind::Mlx5) {
        // dvcq hands rdma-core its consumer index, so the provider's resize copies exactly
        // the entries dvcq has not taken; then dvcq takes the new ring.
        {
            let _in = Inside::enter();
            if let Some(c) = p.cq.take() {
                c.hand_over();
            }
        }
        let rc = call_real!(real::RESIZE_CQ, F, libc::EINVAL, (raw, cqe));
        reattach(e, raw, &mut p, "ibv_resize_cq");
        return rc;
    }
    if e.mode == Mode::Own && kind == Some(BackendKind::Irdma) {
        crate::log::once(format!(
            "cq {}: ibv_resize_cq refused (EOPNOTSUPP): dvcq polls it directly on {}, and the provider's resize would copy from its own consumer index; run with DVCQ_PRELOAD_MODE=verify",
            e.serial,
            kind.map_or("?", |k| k.name())
        ));
        return libc::EOPNOTSUPP;
    }
    {
        let _in = Inside::enter();
        drop(p.cq.take());
    }
    let rc = call_real!(real::RESIZE_CQ, F, libc::EINVAL, (raw, cqe));
    reattach(e, raw, &mut p, "ibv_resize_cq");
    rc
}

// ---- QPs, SRQs, WQs

/// The CQs of a QP.
///
/// # Safety
///
/// `qp` is live.
unsafe fn qp_cqs(qp: *mut IbvQp) -> ([*mut IbvCq; 2], u32) {
    // SAFETY: the caller's live QP; public fields.
    unsafe { ([(*qp).send_cq, (*qp).recv_cq], (*qp).qp_num) }
}

/// `ibv_create_qp`.
///
/// # Safety
///
/// As `ibv_create_qp`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_qp(pd: *mut c_void, attr: *mut c_void) -> *mut IbvQp {
    type F = unsafe extern "C" fn(*mut c_void, *mut c_void) -> *mut IbvQp;
    let qp = call_real!(real::CREATE_QP, F, core::ptr::null_mut(), (pd, attr));
    if !qp.is_null() {
        // SAFETY: a QP rdma-core just created.
        unsafe {
            let (cqs, qpn) = qp_cqs(qp);
            adopt_qp(qp.cast(), cqs, qpn);
        }
    }
    qp
}

/// The context's `create_qp_ex` (`ibv_create_qp_ex`).
///
/// # Safety
///
/// As `ibv_create_qp_ex`.
pub(crate) unsafe extern "C" fn create_qp_ex(ctx: *mut IbvContext, attr: *mut c_void) -> *mut IbvQp {
    type F = unsafe extern "C" fn(*mut IbvContext, *mut c_void) -> *mut IbvQp;
    let Some(s) = ctx::known(ctx).filter(|s| s.create_qp_ex != 0) else {
        return core::ptr::null_mut();
    };
    // SAFETY: the provider's own slot value, of this signature (verbs.h).
    let f: F = unsafe { core::mem::transmute::<usize, F>(s.create_qp_ex) };
    // SAFETY: the caller's arguments.
    let qp = unsafe { f(ctx, attr) };
    if !qp.is_null() {
        // SAFETY: a QP the provider just created.
        unsafe {
            let (cqs, qpn) = qp_cqs(qp);
            adopt_qp(qp.cast(), cqs, qpn);
        }
    }
    qp
}

/// `mlx5dv_create_qp`.
///
/// # Safety
///
/// As `mlx5dv_create_qp`.
#[no_mangle]
pub unsafe extern "C" fn mlx5dv_create_qp(ctx: *mut IbvContext, attr: *mut c_void, dv_attr: *mut c_void) -> *mut IbvQp {
    type F = unsafe extern "C" fn(*mut IbvContext, *mut c_void, *mut c_void) -> *mut IbvQp;
    let qp = call_real!(real::MLX5DV_CREATE_QP, F, core::ptr::null_mut(), (ctx, attr, dv_attr));
    if !qp.is_null() {
        // SAFETY: a QP the provider just created.
        unsafe {
            let (cqs, qpn) = qp_cqs(qp);
            adopt_qp(qp.cast(), cqs, qpn);
        }
    }
    qp
}

/// `ibv_destroy_qp`: dvcq stops following the QP first.
///
/// # Safety
///
/// As `ibv_destroy_qp`.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut IbvQp) -> c_int {
    type F = unsafe extern "C" fn(*mut IbvQp) -> c_int;
    if qp.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: the caller's live QP.
    let (cqs, qpn) = unsafe { qp_cqs(qp) };
    // SAFETY: as above.
    unsafe { forget_qp(qp.cast(), cqs, qpn) };
    let rc = call_real!(real::DESTROY_QP, F, libc::EINVAL, (qp));
    after_destroy(cqs, "a QP's destroy");
    rc
}

/// The context's `create_srq_ex` (`ibv_create_srq_ex`): the provider's (an SRQ comes to
/// dvcq with the first QP that receives from it).
///
/// # Safety
///
/// As `ibv_create_srq_ex`.
pub(crate) unsafe extern "C" fn create_srq_ex(ctx: *mut IbvContext, attr: *mut c_void) -> *mut c_void {
    type F = unsafe extern "C" fn(*mut IbvContext, *mut c_void) -> *mut c_void;
    let Some(s) = ctx::known(ctx).filter(|s| s.create_srq_ex != 0) else {
        return core::ptr::null_mut();
    };
    // SAFETY: the provider's own slot value, of this signature (verbs.h).
    let f: F = unsafe { core::mem::transmute::<usize, F>(s.create_srq_ex) };
    // SAFETY: the caller's arguments.
    unsafe { f(ctx, attr) }
}

/// `ibv_destroy_srq`: every registered CQ stops following the SRQ first.
///
/// # Safety
///
/// As `ibv_destroy_srq`.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_srq(srq: *mut c_void) -> c_int {
    type F = unsafe extern "C" fn(*mut c_void) -> c_int;
    if let Some(srq_nn) = NonNull::new(srq) {
        cq::for_each(|e| {
            let mut p = lock(&e.polled);
            if let Some(c) = p.cq.as_mut() {
                let _in = Inside::enter();
                c.detach_srq(srq_nn);
            }
        });
    }
    call_real!(real::DESTROY_SRQ, F, libc::EINVAL, (srq))
}

/// The context's `create_wq` (`ibv_create_wq`): the WQ is named to its CQ.
///
/// # Safety
///
/// As `ibv_create_wq`.
pub(crate) unsafe extern "C" fn create_wq(ctx: *mut IbvContext, attr: *mut c_void) -> *mut IbvWq {
    type F = unsafe extern "C" fn(*mut IbvContext, *mut c_void) -> *mut IbvWq;
    let Some(s) = ctx::known(ctx).filter(|s| s.create_wq != 0) else {
        return core::ptr::null_mut();
    };
    // SAFETY: the provider's own slot value, of this signature (verbs.h).
    let f: F = unsafe { core::mem::transmute::<usize, F>(s.create_wq) };
    // SAFETY: the caller's arguments.
    let wq = unsafe { f(ctx, attr) };
    if !wq.is_null() {
        // SAFETY: a WQ the provider just made; tagged with bit 0 (objects are aligned).
        unsafe { adopt_qp((wq as usize | 1) as *mut c_void, [(*wq).cq, core::ptr::null_mut()], (*wq).wq_num) };
    }
    wq
}

/// The context's `destroy_wq` (`ibv_destroy_wq`): dvcq stops following the WQ first, and
/// after the destroy its CQEs left in the ring are dropped, as `mlx5_destroy_wq`'s clean of
/// the CQ would have dropped them.
///
/// # Safety
///
/// As `ibv_destroy_wq`.
pub(crate) unsafe extern "C" fn destroy_wq(wq: *mut IbvWq) -> c_int {
    type F = unsafe extern "C" fn(*mut IbvWq) -> c_int;
    if wq.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: the caller's live WQ; public fields.
    let (ctx, cqs, wqn) = unsafe { ((*wq).context, [(*wq).cq, core::ptr::null_mut()], (*wq).wq_num) };
    let Some(s) = ctx::known(ctx).filter(|s| s.destroy_wq != 0) else {
        return libc::EOPNOTSUPP;
    };
    // SAFETY: as above; tagged with bit 0 as at its creation.
    unsafe { forget_qp((wq as usize | 1) as *mut c_void, cqs, wqn) };
    // SAFETY: the provider's own slot value, of this signature (verbs.h).
    let f: F = unsafe { core::mem::transmute::<usize, F>(s.destroy_wq) };
    // SAFETY: the caller's argument.
    let rc = unsafe { f(wq) };
    after_destroy(cqs, "a WQ's destroy");
    rc
}
