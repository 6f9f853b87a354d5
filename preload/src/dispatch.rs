//! The trampolines the preload stores in each context's `ops.poll_cq` and
//! `ops.req_notify_cq`: per call, one thread-local test and one wait-free table lookup pick
//! dvcq (a CQ it took) or the provider's own op saved for the context (every other CQ, and
//! dvcq's own calls into rdma-core).

use crate::cq::{self, CqEntry};
use crate::layout::{IbvCq, IbvWc};
use crate::{ctx, lock, Inside, Mode};
use core::ffi::c_int;
use dvcq::ArmMode;
use std::sync::atomic::Ordering;

/// The provider's `poll_cq` of `cq`'s context.
///
/// # Safety
///
/// As `ibv_poll_cq`.
#[inline]
pub(crate) unsafe fn provider_poll(cq: *mut IbvCq, n: c_int, wc: *mut IbvWc) -> c_int {
    // SAFETY: the caller's live CQ.
    let c = unsafe { (*cq).context };
    match ctx::known(c) {
        // SAFETY: the provider's op, with the caller's arguments.
        Some(s) => unsafe { (s.poll_cq)(cq, n, wc) },
        None => -1,
    }
}

/// `ops.poll_cq`.
///
/// # Safety
///
/// As `ibv_poll_cq`: `cq` is live and `wc` holds `n` records.
pub(crate) unsafe extern "C" fn poll_cq(cq: *mut IbvCq, n: c_int, wc: *mut IbvWc) -> c_int {
    if !Inside::active() {
        if let Some(e) = cq::get(cq) {
            return match e.mode {
                // SAFETY: the caller's promise, passed on.
                Mode::Own => unsafe { own_poll(e, cq, n, wc) },
                // SAFETY: as above.
                _ => unsafe { crate::verify::poll(e, cq, n, wc) },
            };
        }
    }
    // SAFETY: as above.
    unsafe { provider_poll(cq, n, wc) }
}

/// A poll dvcq answers: up to `n` completions of dvcq's poller, converted to `ibv_wc`.
///
/// # Safety
///
/// `wc` holds `n` records.
#[inline]
unsafe fn own_poll(e: &CqEntry, raw: *mut IbvCq, n: c_int, wc: *mut IbvWc) -> c_int {
    let want = usize::try_from(n).unwrap_or(0);
    let mut p = lock(&e.polled);
    let _in = Inside::enter();
    let p = &mut *p;
    let Some(dcq) = p.cq.as_mut() else {
        drop(_in);
        // SAFETY: the caller's promise, passed on.
        return unsafe { provider_poll(raw, n, wc) };
    };
    let (mut done, mut errors, mut absorbed) = (0usize, 0u64, 0u64);
    if !p.pending.is_empty() {
        while done < want {
            let Some((w, _)) = p.pending.pop_front() else { break };
            errors += u64::from(w.status != 0);
            // SAFETY: `done < want`: inside the caller's `n` records.
            unsafe { wc.add(done).write(w) };
            done += 1;
        }
    }
    while done < want {
        let chunk = (want - done).min(p.buf.len());
        let k = dcq.poll_count(&mut p.buf[..chunk]);
        for c in &p.buf[..k] {
            match cq::to_wc(c, &p.gone_qps) {
                Some(w) => {
                    errors += u64::from(w.status != 0);
                    // SAFETY: `done < want`: inside the caller's `n` records.
                    unsafe { wc.add(done).write(w) };
                    done += 1;
                }
                None => absorbed += 1,
            }
        }
        if k < chunk {
            break;
        }
    }
    if absorbed > 0 {
        e.absorbed.fetch_add(absorbed, Ordering::Relaxed);
    }
    if done == 0 {
        if let Some(err) = cq::poll_failure(dcq) {
            crate::log::once(format!("cq {}: dvcq's poll failed: {err}", e.serial));
            e.errors.fetch_add(1, Ordering::Relaxed);
            return -1;
        }
        return 0;
    }
    e.completions.fetch_add(done as u64, Ordering::Relaxed);
    if errors > 0 {
        e.errors.fetch_add(errors, Ordering::Relaxed);
    }
    done as c_int
}

/// `ops.req_notify_cq`: a CQ dvcq polls in `own` mode is armed by dvcq, at dvcq's consumer
/// index (on mlx5 rdma-core's arm would send its own, which dvcq's poll leaves behind: the
/// missed-event bug of a direct poller arming through rdma-core); the others by the provider.
///
/// # Safety
///
/// As `ibv_req_notify_cq`.
pub(crate) unsafe extern "C" fn req_notify_cq(cq: *mut IbvCq, solicited: c_int) -> c_int {
    if !Inside::active() {
        if let Some(e) = cq::get(cq).filter(|e| e.mode == Mode::Own) {
            let mut p = lock(&e.polled);
            let _in = Inside::enter();
            let mode = if solicited != 0 { ArmMode::Solicited } else { ArmMode::Next };
            if let Some(dcq) = p.cq.as_mut() {
                return match dcq.arm(mode) {
                    Ok(()) => 0,
                    Err(err) => {
                        crate::log::once(format!("cq {}: dvcq could not arm it: {err}", e.serial));
                        libc::EIO
                    }
                };
            }
        }
    }
    // SAFETY: the caller's live CQ.
    let c = unsafe { (*cq).context };
    match ctx::known(c) {
        // SAFETY: the provider's op, with the caller's arguments.
        Some(s) => unsafe { (s.req_notify_cq)(cq, solicited) },
        None => libc::EINVAL,
    }
}
