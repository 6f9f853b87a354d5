//! Event mode: completion channels, arming, the race-free wait, and reading events.
//!
//! dvcq reads and acknowledges the events of its channels itself (`ibv_ack_cq_events` in
//! batches, and every event of a CQ before the CQ is destroyed), so C code never
//! acknowledges; `dvcq_channel_unacked_events` shows what is pending.

use crate::context::dvcq_context;
use crate::cq::{check_out, dvcq_cq, finish, write_out, BATCH};
use crate::error::{guard, Fail};
use crate::handle::{self, Handle};
use crate::wc::dvcq_wc;
use core::ffi::c_int;
use dvcq::{ArmMode, CompletionChannel, CqEventKind};
use std::os::fd::AsRawFd;
use std::time::Duration;

/// A completion channel (`ibv_create_comp_channel` on a device, an eventfd on a model).
pub struct dvcq_channel {
    tag: u64,
    pub(crate) channel: CompletionChannel,
}

// Channels are shared by the threads that wait on their CQs.
static_assertions::assert_impl_all!(dvcq_channel: Send, Sync);

impl Handle for dvcq_channel {
    const TAG: u64 = 0x6476_6371_5f63_686e; // "dvcq_chn"
    const NAME: &'static str = "struct dvcq_channel";
    fn tag(&self) -> u64 {
        self.tag
    }
    fn tag_mut(&mut self) -> &mut u64 {
        &mut self.tag
    }
}

impl dvcq_channel {
    pub(crate) fn new(channel: CompletionChannel) -> dvcq_channel {
        dvcq_channel { tag: Self::TAG, channel }
    }
}

/// An event read with `dvcq_channel_get_event`: the next completion of an armed CQ.
pub const DVCQ_EVENT_COMPLETION: c_int = 1;
/// An event read with `dvcq_channel_get_event`: the CQ overran and is in error.
pub const DVCQ_EVENT_CQ_ERROR: c_int = 2;

/// Makes a completion channel on `ctx`; CQs made on it (`dvcq_cq_create`) deliver their
/// events there.
///
/// # Safety
///
/// `ctx` is a live context; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn dvcq_channel_create(ctx: *const dvcq_context, out: *mut *mut dvcq_channel) -> c_int {
    const CALL: &str = "dvcq_channel_create";
    guard(CALL, || {
        // SAFETY: the caller's promise about `out`.
        unsafe { handle::clear(out) };
        // SAFETY: the caller's promise about `ctx`.
        let h = unsafe { handle::get(CALL, ctx) }?;
        let ch = handle::lock(CALL, "context", &h.ctx)?.create_channel().map_err(|e| Fail::of(CALL, &e))?;
        // SAFETY: the caller's promise about `out`.
        unsafe { handle::give(CALL, out, dvcq_channel::new(ch)) }
    })
}

/// Destroys a channel handle; the CQs bound to it keep the channel until they go.
///
/// # Safety
///
/// `channel` is a live channel that no other thread is using.
#[no_mangle]
pub unsafe extern "C" fn dvcq_channel_destroy(channel: *mut dvcq_channel) -> c_int {
    const CALL: &str = "dvcq_channel_destroy";
    // SAFETY: the caller's promise.
    guard(CALL, || unsafe { handle::take(CALL, channel) }.map(|_| 0))
}

/// The channel's file descriptor (non-blocking; readable when an event is queued), for
/// poll/epoll; dvcq owns it. Negative errno on a bad handle.
///
/// # Safety
///
/// `channel` is a live channel.
#[no_mangle]
pub unsafe extern "C" fn dvcq_channel_fd(channel: *const dvcq_channel) -> c_int {
    const CALL: &str = "dvcq_channel_fd";
    // SAFETY: the caller's promise.
    guard(CALL, || Ok(unsafe { handle::get(CALL, channel) }?.channel.as_raw_fd()))
}

/// Events read from the device and not yet acknowledged to rdma-core (dvcq acknowledges in
/// batches, and all of a CQ's before it is destroyed; 0 on a model).
///
/// # Safety
///
/// `channel` is a live channel.
#[no_mangle]
pub unsafe extern "C" fn dvcq_channel_unacked_events(channel: *const dvcq_channel) -> i64 {
    const CALL: &str = "dvcq_channel_unacked_events";
    let mut n = 0i64;
    let rc = guard(CALL, || {
        // SAFETY: the caller's promise.
        n = i64::try_from(unsafe { handle::get(CALL, channel) }?.channel.unacked_events()).unwrap_or(i64::MAX);
        Ok(0)
    });
    if rc < 0 {
        i64::from(rc)
    } else {
        n
    }
}

/// Reads the next event of the channel, waiting up to `timeout_ms` milliseconds (-1: no
/// limit; 0: do not wait). Returns `DVCQ_EVENT_COMPLETION` or `DVCQ_EVENT_CQ_ERROR` with
/// the CQ's id (`dvcq_cq_id`) in `*cq_id`, 0 at the timeout, or a negative errno. For
/// programs that sleep on the fd themselves; a channel is read either this way or by
/// `dvcq_cq_wait`, not both.
///
/// # Safety
///
/// `channel` is a live channel; `cq_id` is writable.
#[no_mangle]
pub unsafe extern "C" fn dvcq_channel_get_event(
    channel: *const dvcq_channel,
    timeout_ms: c_int,
    cq_id: *mut u64,
) -> c_int {
    const CALL: &str = "dvcq_channel_get_event";
    guard(CALL, || {
        // SAFETY: the caller's promise.
        let h = unsafe { handle::get(CALL, channel) }?;
        if cq_id.is_null() || !cq_id.is_aligned() {
            return Err(Fail::inval(CALL, "cq_id is NULL or misaligned"));
        }
        let ev = match timeout(CALL, timeout_ms)? {
            Some(Duration::ZERO) => h.channel.try_next_event(),
            t => h.channel.next_event(t),
        }
        .map_err(|e| Fail::of(CALL, &e))?;
        let Some(ev) = ev else { return Ok(0) };
        // SAFETY: non-NULL and, by the caller's promise, writable.
        unsafe { cq_id.write(ev.cq.get()) };
        Ok(match ev.kind {
            CqEventKind::Completion => DVCQ_EVENT_COMPLETION,
            CqEventKind::CqError => DVCQ_EVENT_CQ_ERROR,
        })
    })
}

/// A timeout in milliseconds: -1 is none.
fn timeout(call: &str, ms: c_int) -> Result<Option<Duration>, Fail> {
    match ms {
        -1 => Ok(None),
        ms => u64::try_from(ms)
            .map(|ms| Some(Duration::from_millis(ms)))
            .map_err(|_| Fail::inval(call, format!("timeout_ms is {ms}: -1 (no limit) or 0 and above"))),
    }
}

/// The CQ's id, what its events carry (`dvcq_channel_get_event`); 0 for a bad handle.
///
/// # Safety
///
/// `cq` is a live CQ.
#[no_mangle]
pub unsafe extern "C" fn dvcq_cq_id(cq: *const dvcq_cq) -> u64 {
    const CALL: &str = "dvcq_cq_id";
    let mut id = 0;
    guard(CALL, || {
        // SAFETY: the caller's promise.
        let h = unsafe { handle::get(CALL, cq) }?;
        id = handle::try_lock(CALL, "CQ", &h.state)?.cq.id().get();
        Ok(0)
    });
    id
}

/// Requests one event for the CQ's next completion (`solicited_only`: the next solicited
/// or error one), through the backend that polls it (dvcq's own arm doorbell where dvcq
/// polls the ring: never call `ibv_req_notify_cq` on an attached CQ).
///
/// # Safety
///
/// `cq` is a live CQ.
#[no_mangle]
pub unsafe extern "C" fn dvcq_cq_arm(cq: *mut dvcq_cq, solicited_only: c_int) -> c_int {
    const CALL: &str = "dvcq_cq_arm";
    guard(CALL, || {
        // SAFETY: the caller's promise.
        let h = unsafe { handle::get(CALL, cq) }?;
        let mode = if solicited_only != 0 { ArmMode::Solicited } else { ArmMode::Next };
        handle::try_lock(CALL, "CQ", &h.state)?.cq.arm(mode).map_err(|e| Fail::of(CALL, &e))?;
        Ok(0)
    })
}

/// Waits up to `timeout_ms` (-1: no limit) for completions and polls up to
/// `num_entries` (at most 64 per call) into `wc`: poll, arm, poll again, sleep on the
/// channel, drain, so that no completion is missed between a poll and an arm. Returns the
/// count (0 at the timeout) or a negative errno (`-EIO` for a CQ without a channel or one
/// that overran). Completions are returned before any error.
///
/// # Safety
///
/// `cq` is a live CQ; `wc` points to `num_entries` writable entries.
#[no_mangle]
pub unsafe extern "C" fn dvcq_cq_wait(
    cq: *mut dvcq_cq,
    num_entries: c_int,
    wc: *mut dvcq_wc,
    timeout_ms: c_int,
) -> c_int {
    const CALL: &str = "dvcq_cq_wait";
    guard(CALL, || {
        // SAFETY: the caller's promise.
        let h = unsafe { handle::get(CALL, cq) }?;
        let n = check_out(CALL, num_entries, wc)?.min(BATCH);
        let t = timeout(CALL, timeout_ms)?;
        if n == 0 {
            return Ok(0);
        }
        let mut s = handle::try_lock(CALL, "CQ", &h.state)?;
        let st = &mut *s;
        if let Some(f) = st.take_pending() {
            return Err(f);
        }
        let got = st.wait(n, t).map_err(|e| Fail::of(CALL, &e))?;
        // SAFETY: `wc` has `num_entries >= n >= got` writable entries.
        unsafe { write_out(wc, st.staged(got)) };
        finish(CALL, st, got)
    })
}

/// Completion events this CQ's waits have taken from its channel (negative errno on a bad
/// handle).
///
/// # Safety
///
/// `cq` is a live CQ.
#[no_mangle]
pub unsafe extern "C" fn dvcq_cq_events_taken(cq: *const dvcq_cq) -> i64 {
    const CALL: &str = "dvcq_cq_events_taken";
    let mut n = 0i64;
    let rc = guard(CALL, || {
        // SAFETY: the caller's promise.
        let h = unsafe { handle::get(CALL, cq) }?;
        n = i64::try_from(handle::try_lock(CALL, "CQ", &h.state)?.cq.events_taken()).unwrap_or(i64::MAX);
        Ok(0)
    });
    if rc < 0 {
        i64::from(rc)
    } else {
        n
    }
}
