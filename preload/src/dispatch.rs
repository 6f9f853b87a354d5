//! The trampolines the preload stores in each context's `ops.poll_cq` and
//! `ops.req_notify_cq`: per call, one wait-free table lookup and a thread-local test pick
//! dvcq (a CQ it took) or the provider's own op saved for the context (every other CQ, and
//! dvcq's own calls into rdma-core). A poll of a CQ dvcq owns whose lock is free takes it
//! and skips the thread-local test, which only dvcq's own calls, made under that lock,
//! would fail.

use crate::cq::{self, CqEntry, Polled};
use crate::layout::{IbvCq, IbvWc};
use crate::{ctx, lock, Inside, Mode};
use core::ffi::c_int;
use dvcq::{ArmMode, BackendKind};
use std::sync::atomic::Ordering;
use std::sync::MutexGuard;

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

/// `ops.poll_cq`. Kept small: the busy poll of an empty CQ dvcq owns is answered here;
/// everything else goes on in functions of its own, so that this one's frame stays light.
///
/// # Safety
///
/// As `ibv_poll_cq`: `cq` is live and `wc` holds `n` records.
pub(crate) unsafe extern "C" fn poll_cq(cq: *mut IbvCq, n: c_int, wc: *mut IbvWc) -> c_int {
    if let Some(e) = cq::get(cq) {
        if e.mode == Mode::Own {
            // Every call of dvcq's into rdma-core for this CQ holds its lock, so a lock taken
            // at once also shows that this thread is not inside dvcq: the busy-polling case
            // needs no thread-local test.
            if let Ok(mut p) = e.polled.try_lock() {
                if p.pending.is_empty() && p.cq.as_mut().is_some_and(dvcq::Cq::idle_poll) {
                    return 0;
                }
                // SAFETY: the caller's promise, passed on.
                return unsafe { own_poll(e, cq, p, n, wc) };
            }
        }
    }
    // SAFETY: as above.
    unsafe { poll_cq_contended(cq, n, wc) }
}

/// [`poll_cq`] for a CQ dvcq does not own, one whose lock another thread holds, and
/// dvcq's own calls into rdma-core.
///
/// # Safety
///
/// As [`poll_cq`].
#[inline(never)]
unsafe fn poll_cq_contended(cq: *mut IbvCq, n: c_int, wc: *mut IbvWc) -> c_int {
    if let Some(e) = cq::get(cq) {
        if !Inside::active() {
            return match e.mode {
                // Another thread polls it (or left the lock poisoned): wait for it.
                // SAFETY: the caller's promise, passed on.
                Mode::Own => unsafe { own_poll(e, cq, lock(&e.polled), n, wc) },
                // SAFETY: as above.
                _ => unsafe { crate::verify::poll(e, cq, n, wc) },
            };
        }
    }
    // SAFETY: as above.
    unsafe { provider_poll(cq, n, wc) }
}

/// A poll dvcq answers: up to `n` completions of dvcq's poller, converted to `ibv_wc`,
/// under the CQ's lock (`guard`, released at the end).
///
/// # Safety
///
/// `wc` holds `n` records.
#[inline(never)]
unsafe fn own_poll(e: &CqEntry, raw: *mut IbvCq, mut guard: MutexGuard<'_, Polled>, n: c_int, wc: *mut IbvWc) -> c_int {
    let p = &mut *guard;
    let want = usize::try_from(n).unwrap_or(0);
    let Some(dcq) = p.cq.as_mut() else {
        // SAFETY: the caller's promise, passed on.
        return unsafe { provider_poll(raw, n, wc) };
    };
    // Only rdma-core's own poll (the generic backend) calls back into libibverbs, and so
    // through this trampoline: mark the thread inside dvcq for it. dvcq's direct pollers
    // call nothing.
    let _in = (dcq.backend().kind == BackendKind::Generic).then(Inside::enter);
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
