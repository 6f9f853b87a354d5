//! CQs: made on a context or attached, polled with `ibv_poll_cq`'s meaning, their backend,
//! statistics and raw views.

use crate::context::dvcq_context;
use crate::error::{guard, Fail};
use crate::event::dvcq_channel;
use crate::handle::{self, Handle};
use crate::wc::dvcq_wc;
use core::ffi::{c_char, c_int};
use dvcq::{BackendKind, Completion, CqOptions};
use std::sync::Mutex;

/// Completions one poll call moves at most through its staging buffer; a larger
/// `num_entries` is served by further polls in the same call while the CQ has more.
pub(crate) const BATCH: usize = 64;

/// A CQ: made on a context (`dvcq_cq_create`) or an application's `ibv_cq` attached
/// (`dvcq_cq_attach`). Used by one thread at a time (a call while another thread is inside
/// one on the same CQ returns `-EBUSY`).
pub struct dvcq_cq {
    tag: u64,
    pub(crate) state: Mutex<CqState>,
}

/// What a CQ handle holds.
pub(crate) struct CqState {
    pub(crate) cq: dvcq::Cq,
    /// The backend's error from a poll that also returned completions: reported by the
    /// next call, so that nothing polled is lost.
    pending: Option<Fail>,
    /// Attached (given back with `dvcq_cq_detach`) rather than made.
    pub(crate) attached: bool,
    /// Where polls land before they are written out as `dvcq_wc`s (made once).
    buf: Box<[Completion; BATCH]>,
}

impl CqState {
    /// The error a previous call left for this one, if any.
    pub(crate) fn take_pending(&mut self) -> Option<Fail> {
        self.pending.take()
    }

    /// `Cq::wait_count` into the staging buffer (`n <= BATCH`).
    pub(crate) fn wait(&mut self, n: usize, t: Option<std::time::Duration>) -> Result<usize, dvcq::Error> {
        let n = n.min(BATCH);
        self.cq.wait_count(&mut self.buf[..n], t)
    }

    /// The first `got` completions staged.
    pub(crate) fn staged(&self, got: usize) -> &[Completion] {
        &self.buf[..got.min(BATCH)]
    }
}

// A handle may be used from any thread (one at a time for a CQ, which its lock checks).
static_assertions::assert_impl_all!(dvcq_cq: Send, Sync);

impl Handle for dvcq_cq {
    const TAG: u64 = 0x6476_6371_5f63_715f; // "dvcq_cq_"
    const NAME: &'static str = "struct dvcq_cq";
    fn tag(&self) -> u64 {
        self.tag
    }
    fn tag_mut(&mut self) -> &mut u64 {
        &mut self.tag
    }
}

impl dvcq_cq {
    pub(crate) fn new(cq: dvcq::Cq, attached: bool) -> dvcq_cq {
        let state = CqState { cq, pending: None, attached, buf: Box::new([Completion::default(); BATCH]) };
        dvcq_cq { tag: Self::TAG, state: Mutex::new(state) }
    }
}

/// `DVCQ_BACKEND_*`: dvcq's mlx5 poller on a ConnectX ring.
pub const DVCQ_BACKEND_MLX5: c_int = 1;
/// dvcq's irdma poller on an E810 ring.
pub const DVCQ_BACKEND_IRDMA: c_int = 2;
/// dvcq's reader of the ring rdma_rxe maps.
pub const DVCQ_BACKEND_RXE: c_int = 3;
/// rdma-core's own `ibv_poll_cq`.
pub const DVCQ_BACKEND_GENERIC: c_int = 4;
/// A built-in hardware model, polled by its vendor's dvcq poller.
pub const DVCQ_BACKEND_MODEL: c_int = 5;

fn backend_number(k: BackendKind) -> c_int {
    match k {
        BackendKind::Mlx5 => DVCQ_BACKEND_MLX5,
        BackendKind::Irdma => DVCQ_BACKEND_IRDMA,
        BackendKind::Rxe => DVCQ_BACKEND_RXE,
        BackendKind::Generic => DVCQ_BACKEND_GENERIC,
        BackendKind::Model => DVCQ_BACKEND_MODEL,
    }
}

/// Makes a CQ of at least `depth` completions on `ctx`, polled by the best backend that
/// applies (`dvcq_cq_backend` says which, and why). With a `channel` (made on the same
/// context) its events go there and `dvcq_cq_wait` works on it; NULL for none.
///
/// # Safety
///
/// `ctx` is a live context, `channel` a live channel or NULL, `out` writable.
#[no_mangle]
pub unsafe extern "C" fn dvcq_cq_create(
    ctx: *const dvcq_context,
    depth: u32,
    channel: *const dvcq_channel,
    out: *mut *mut dvcq_cq,
) -> c_int {
    const CALL: &str = "dvcq_cq_create";
    guard(CALL, || {
        // SAFETY: the caller's promise about `out`.
        unsafe { handle::clear(out) };
        // SAFETY: the caller's promise about `ctx`.
        let h = unsafe { handle::get(CALL, ctx) }?;
        let ctx = handle::lock(CALL, "context", &h.ctx)?;
        let opts = CqOptions::new(depth);
        let cq = if channel.is_null() {
            ctx.create_cq(opts)
        } else {
            // SAFETY: the caller's promise about `channel`.
            let ch = unsafe { handle::get(CALL, channel) }?;
            ctx.create_cq_on(&ch.channel, opts)
        }
        .map_err(|e| Fail::of(CALL, &e))?;
        // SAFETY: the caller's promise about `out`.
        unsafe { handle::give(CALL, out, dvcq_cq::new(cq, false)) }
    })
}

/// Destroys a CQ made with `dvcq_cq_create` (an attached one is given back with
/// `dvcq_cq_detach`). QPs made on it keep what they need until they are destroyed too.
///
/// # Safety
///
/// `cq` is a live CQ that no other thread is using.
#[no_mangle]
pub unsafe extern "C" fn dvcq_cq_destroy(cq: *mut dvcq_cq) -> c_int {
    const CALL: &str = "dvcq_cq_destroy";
    // SAFETY: the caller's promise.
    guard(CALL, || unsafe { release(CALL, cq, false) })
}

/// Takes back a CQ handle made (`attached` false) or attached (true), refusing the other.
///
/// # Safety
///
/// As [`handle::take`].
pub(crate) unsafe fn release(call: &str, cq: *mut dvcq_cq, attached: bool) -> Result<c_int, Fail> {
    {
        // SAFETY: the caller's promise.
        let h = unsafe { handle::get(call, cq) }?;
        let s = handle::try_lock(call, "CQ", &h.state)?;
        if s.attached != attached {
            let why = if attached {
                "this CQ was made with dvcq_cq_create: destroy it with dvcq_cq_destroy"
            } else {
                "this CQ was attached: give it back with dvcq_cq_detach (the application destroys its ibv_cq)"
            };
            return Err(Fail::inval(call, why));
        }
    }
    // SAFETY: the caller's promise.
    unsafe { handle::take(call, cq) }.map(|_| 0)
}

/// Polls up to `num_entries` completions into `wc`, in order, as `ibv_poll_cq` does:
/// returns how many (0 when the CQ is empty), or a negative errno.
///
/// - A CQE dvcq could not turn into a completion comes back in its place as a *fault item*:
///   status `DVCQ_WC_GENERAL_ERR`, `DVCQ_WC_FAULT` set in `wc_flags`, its `DVCQ_FAULT_*`
///   kind in `vendor_err`, the ring position in `wr_id` and the value the CQE held in
///   `qp_num`. Completions before and after it are unaffected.
/// - When the backend itself fails (rdma-core's `ibv_poll_cq` returning an error, a QP it
///   could not adopt), a call that polled nothing returns the negative errno with the
///   message in `dvcq_last_error`; a call that polled completions returns them, and the
///   next call returns the error. Nothing polled is lost.
/// - `-EBUSY`: another thread is inside a call on this CQ.
///
/// # Safety
///
/// `cq` is a live CQ; `wc` points to `num_entries` writable `struct dvcq_wc` (it may be
/// NULL when `num_entries` is 0).
#[no_mangle]
pub unsafe extern "C" fn dvcq_cq_poll(cq: *mut dvcq_cq, num_entries: c_int, wc: *mut dvcq_wc) -> c_int {
    const CALL: &str = "dvcq_cq_poll";
    guard(CALL, || {
        // SAFETY: the caller's promise about `cq`.
        let h = unsafe { handle::get(CALL, cq) }?;
        let n = check_out(CALL, num_entries, wc)?;
        let mut s = handle::try_lock(CALL, "CQ", &h.state)?;
        if let Some(f) = s.take_pending() {
            return Err(f);
        }
        let CqState { cq, buf, .. } = &mut *s;
        let mut done = 0;
        while done < n {
            let want = (n - done).min(BATCH);
            let got = cq.poll(&mut buf[..want]);
            // SAFETY: `wc` has `num_entries` (= n) writable entries and `done + got.len() <= n`.
            unsafe { write_out(wc.add(done), got) };
            done += got.len();
            if got.len() < want {
                break;
            }
        }
        finish(CALL, &mut s, done)
    })
}

/// The count a poll or wait returns, or the backend's error: at once when nothing was
/// polled, at the next call otherwise.
pub(crate) fn finish(call: &str, s: &mut CqState, done: usize) -> Result<c_int, Fail> {
    if let Some(e) = s.cq.take_error() {
        let f = Fail::of(call, &e);
        if done == 0 {
            return Err(f);
        }
        s.pending = Some(f);
    }
    Ok(c_int::try_from(done).unwrap_or(c_int::MAX))
}

/// `num_entries` as a count, refusing a negative one, or a NULL or misaligned array for a
/// positive one.
pub(crate) fn check_out<T>(call: &str, num_entries: c_int, out: *const T) -> Result<usize, Fail> {
    let n = usize::try_from(num_entries)
        .map_err(|_| Fail::inval(call, format!("num_entries is {num_entries}, below 0")))?;
    if n > 0 && out.is_null() {
        return Err(Fail::inval(call, format!("the array is NULL for {n} entries")));
    }
    if n > 0 && !out.is_aligned() {
        return Err(Fail::inval(call, format!("the array at {out:p} is not aligned for its type")));
    }
    Ok(n)
}

/// Writes `from` as `dvcq_wc`s at `to`.
///
/// # Safety
///
/// `to` points to `from.len()` writable `dvcq_wc`s (uninitialised is fine).
#[inline(always)]
pub(crate) unsafe fn write_out(to: *mut dvcq_wc, from: &[Completion]) {
    for (i, c) in from.iter().enumerate() {
        // SAFETY: `i < from.len()`, within the caller's array; a write, no read of its old bytes.
        unsafe { to.add(i).write(dvcq_wc::of(c)) };
    }
}

/// The backend polling the CQ (`DVCQ_BACKEND_*`), or a negative errno.
///
/// # Safety
///
/// `cq` is a live CQ.
#[no_mangle]
pub unsafe extern "C" fn dvcq_cq_backend(cq: *const dvcq_cq) -> c_int {
    const CALL: &str = "dvcq_cq_backend";
    guard(CALL, || {
        // SAFETY: the caller's promise.
        let h = unsafe { handle::get(CALL, cq) }?;
        Ok(backend_number(handle::try_lock(CALL, "CQ", &h.state)?.cq.backend().kind))
    })
}

/// Copies why this backend polls the CQ (for a fallback: what the direct attach refused)
/// into `buf` (`len` bytes, `snprintf`-style); returns the text's length or a negative
/// errno.
///
/// # Safety
///
/// `cq` is a live CQ; `buf` points to `len` writable bytes (or is NULL with `len` 0).
#[no_mangle]
pub unsafe extern "C" fn dvcq_cq_backend_reason(cq: *const dvcq_cq, buf: *mut c_char, len: usize) -> c_int {
    const CALL: &str = "dvcq_cq_backend_reason";
    guard(CALL, || {
        // SAFETY: the caller's promise.
        let h = unsafe { handle::get(CALL, cq) }?;
        let reason = handle::try_lock(CALL, "CQ", &h.state)?.cq.backend().reason.clone();
        // SAFETY: the caller's promise about `buf`.
        unsafe { crate::copy_out(CALL, &reason, buf, len) }
    })
}

/// The name of a `DVCQ_BACKEND_*` value (`"mlx5"`, `"model"`, ...; `"unknown"` for any
/// other number). The string is static.
#[no_mangle]
pub extern "C" fn dvcq_backend_name(backend: c_int) -> *const c_char {
    let s: &'static core::ffi::CStr = match backend {
        DVCQ_BACKEND_MLX5 => c"mlx5",
        DVCQ_BACKEND_IRDMA => c"irdma",
        DVCQ_BACKEND_RXE => c"rxe",
        DVCQ_BACKEND_GENERIC => c"generic",
        DVCQ_BACKEND_MODEL => c"model",
        _ => c"unknown",
    };
    s.as_ptr()
}

/// The depth the device gave the CQ (at least what was asked), or a negative errno.
///
/// # Safety
///
/// `cq` is a live CQ.
#[no_mangle]
pub unsafe extern "C" fn dvcq_cq_depth(cq: *const dvcq_cq) -> c_int {
    const CALL: &str = "dvcq_cq_depth";
    guard(CALL, || {
        // SAFETY: the caller's promise.
        let h = unsafe { handle::get(CALL, cq) }?;
        let d = handle::try_lock(CALL, "CQ", &h.state)?.cq.depth();
        Ok(c_int::try_from(d).unwrap_or(c_int::MAX))
    })
}

/// A counter the backend does not keep (`overruns`, `compression_sessions`,
/// `doorbell_writes`).
pub const DVCQ_STAT_UNKNOWN: u64 = u64::MAX;

/// A CQ's counters since it was made or attached (`dvcq_cq_stats`). Only grows at its end:
/// pass `sizeof(struct dvcq_cq_stats)` as `size`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct dvcq_cq_stats {
    /// Poll calls (each `dvcq_cq_poll` makes one, or more for over 64 entries).
    pub polls: u64,
    /// Poll calls that found nothing.
    pub empty_polls: u64,
    /// Completions returned, fault items and errors included.
    pub completions: u64,
    /// Completions with an error status.
    pub errors: u64,
    /// Fault items.
    pub faults: u64,
    /// Backend poll calls that failed.
    pub poll_failures: u64,
    /// The most completions one poll returned.
    pub largest_batch: u64,
    /// The most completions seen waiting at once.
    pub high_water: u64,
    /// CQ overruns, or `DVCQ_STAT_UNKNOWN`.
    pub overruns: u64,
    /// mlx5 compressed sessions expanded, or `DVCQ_STAT_UNKNOWN`.
    pub compression_sessions: u64,
    /// Doorbell (consumer index) writes, or `DVCQ_STAT_UNKNOWN`.
    pub doorbell_writes: u64,
}

/// Copies the CQ's counters into `out`, at most `size` bytes of it (pass
/// `sizeof(struct dvcq_cq_stats)`, so that a program built against an older, shorter
/// struct gets the fields it knows). Returns 0 or a negative errno.
///
/// # Safety
///
/// `cq` is a live CQ; `out` points to `size` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn dvcq_cq_stats(cq: *const dvcq_cq, out: *mut dvcq_cq_stats, size: usize) -> c_int {
    const CALL: &str = "dvcq_cq_stats";
    guard(CALL, || {
        // SAFETY: the caller's promise.
        let h = unsafe { handle::get(CALL, cq) }?;
        if out.is_null() && size > 0 {
            return Err(Fail::inval(CALL, "out is NULL"));
        }
        let s = handle::try_lock(CALL, "CQ", &h.state)?.cq.stats();
        let known = |v: Option<u64>| v.unwrap_or(DVCQ_STAT_UNKNOWN);
        let stats = dvcq_cq_stats {
            polls: s.polls,
            empty_polls: s.empty_polls,
            completions: s.completions,
            errors: s.errors,
            faults: s.faults,
            poll_failures: s.poll_failures,
            largest_batch: s.largest_batch,
            high_water: s.high_water,
            overruns: known(s.overruns),
            compression_sessions: known(s.compression_sessions),
            doorbell_writes: known(s.doorbell_writes),
        };
        let n = size.min(core::mem::size_of::<dvcq_cq_stats>());
        // SAFETY: `out` has `size` writable bytes (the caller's promise) and `n <= size`; `stats` has `n` readable bytes; distinct objects.
        unsafe { core::ptr::copy_nonoverlapping((&stats as *const dvcq_cq_stats).cast::<u8>(), out.cast::<u8>(), n) };
        Ok(0)
    })
}

/// One CQE read from the ring field by field, the numbers as the entry holds them (not
/// checked against libibverbs' enums).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct dvcq_cqe_view {
    /// `wr_id`.
    pub wr_id: u64,
    /// `qp_num`.
    pub qp_num: u32,
    /// `status`, raw.
    pub status: u32,
    /// `opcode`, raw.
    pub opcode: u32,
    /// `byte_len`.
    pub byte_len: u32,
}

/// Consumes up to `num_entries` CQEs as raw views (no conversion, no check), where the
/// CQ's backend walks its ring without a poll's bookkeeping (rxe); returns how many.
/// `-EOPNOTSUPP` on the others (mlx5, irdma and the models retire work requests in the
/// queues' wr_id tables as they poll; the generic backend has no ring): poll those.
///
/// # Safety
///
/// `cq` is a live CQ; `out` points to `num_entries` writable views.
#[no_mangle]
pub unsafe extern "C" fn dvcq_cq_views(cq: *mut dvcq_cq, num_entries: c_int, out: *mut dvcq_cqe_view) -> c_int {
    const CALL: &str = "dvcq_cq_views";
    guard(CALL, || {
        // SAFETY: the caller's promise.
        let h = unsafe { handle::get(CALL, cq) }?;
        let n = check_out(CALL, num_entries, out)?;
        let mut s = handle::try_lock(CALL, "CQ", &h.state)?;
        let kind = s.cq.backend().kind;
        let Some(mut walk) = s.cq.views() else {
            return Err(Fail::new(
                libc::EOPNOTSUPP,
                format!(
                    "{CALL}: the {} backend has no raw views (only rxe walks its ring without a poll's bookkeeping): \
                     use dvcq_cq_poll",
                    kind.name()
                ),
            ));
        };
        let mut done = 0;
        while done < n {
            let Some(v) = walk.next() else { break };
            let view = dvcq_cqe_view {
                wr_id: v.wr_id(),
                qp_num: v.qp_num(),
                status: v.status(),
                opcode: v.opcode(),
                byte_len: v.byte_len(),
            };
            // SAFETY: `done < n`, within the caller's `num_entries` writable views.
            unsafe { out.add(done).write(view) };
            done += 1;
        }
        Ok(c_int::try_from(done).unwrap_or(c_int::MAX))
    })
}
