//! rdma-core's extended CQ: `ibv_create_cq_ex`, and its poll through the function pointers
//! of `struct ibv_cq_ex` (`ibv_start_poll`, `ibv_next_poll`, `ibv_end_poll` and the
//! `ibv_wc_read_*` readers, every one `static inline` in verbs.h) into the same
//! `struct ibv_wc` that `ibv_poll_cq` fills, so the two ways rdma-core offers cost the same
//! work beyond the poll itself.

use super::cq::{CompChannel, VerbsCq};
use super::device::Context;
use super::ffi;
use super::ops;
use crate::sys::error::VerbsError;
use core::mem::{offset_of, size_of};
use static_assertions::{const_assert, const_assert_eq};
use std::sync::Arc;

// `ibv_cq_ex_to_cq` (verbs.h) is a cast: `struct ibv_cq_ex` starts with the fields of
// `struct ibv_cq`, at the same offsets, so the CQ it returns is the same pointer.
const_assert_eq!(offset_of!(ffi::ibv_cq_ex, context), offset_of!(ffi::ibv_cq, context));
const_assert_eq!(offset_of!(ffi::ibv_cq_ex, channel), offset_of!(ffi::ibv_cq, channel));
const_assert_eq!(offset_of!(ffi::ibv_cq_ex, cq_context), offset_of!(ffi::ibv_cq, cq_context));
const_assert_eq!(offset_of!(ffi::ibv_cq_ex, handle), offset_of!(ffi::ibv_cq, handle));
const_assert_eq!(offset_of!(ffi::ibv_cq_ex, cqe), offset_of!(ffi::ibv_cq, cqe));
const_assert_eq!(offset_of!(ffi::ibv_cq_ex, mutex), offset_of!(ffi::ibv_cq, mutex));
const_assert_eq!(offset_of!(ffi::ibv_cq_ex, cond), offset_of!(ffi::ibv_cq, cond));
const_assert_eq!(offset_of!(ffi::ibv_cq_ex, comp_events_completed), offset_of!(ffi::ibv_cq, comp_events_completed));
const_assert_eq!(offset_of!(ffi::ibv_cq_ex, async_events_completed), offset_of!(ffi::ibv_cq, async_events_completed));
const_assert!(size_of::<ffi::ibv_cq>() <= offset_of!(ffi::ibv_cq_ex, comp_mask));

/// `IBV_WC_STANDARD_FLAGS` (verbs.h): every field of `struct ibv_wc` beyond wr_id, status,
/// opcode, vendor_err and wc_flags, which an extended CQ always reports.
pub(crate) const STANDARD_FLAGS: u64 = (ffi::IBV_WC_EX_WITH_BYTE_LEN
    | ffi::IBV_WC_EX_WITH_IMM
    | ffi::IBV_WC_EX_WITH_QP_NUM
    | ffi::IBV_WC_EX_WITH_SRC_QP
    | ffi::IBV_WC_EX_WITH_SLID
    | ffi::IBV_WC_EX_WITH_SL
    | ffi::IBV_WC_EX_WITH_DLID_PATH_BITS) as u64;

/// How an extended CQ was made and must be polled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ExCq {
    /// `ibv_create_cq_ex`'s `wc_flags`.
    pub(crate) wc_flags: u64,
    /// Whether `ibv_end_poll` follows an `ibv_next_poll` that returned `ENOENT`, as
    /// verbs.h asks. rxe before rdma-core v55 already stored the consumer index and
    /// unlocked the CQ in that `ENOENT` path, so an `end_poll` after it moved the index one
    /// past the producer and the next poll read stale entries (fixed by rdma-core commit
    /// b78b414e0, "rxe: fix completion queue consumer index overrun", first in v55): on such
    /// a provider the poll skips it.
    pub(crate) end_poll_after_enoent: bool,
}

/// The flags that make an extended CQ report a completion timestamp.
pub(crate) const TIMESTAMP_FLAGS: u64 =
    (ffi::IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | ffi::IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK) as u64;

/// The outcome of one extended poll: completions written, and the error that ended the
/// poll early, if one did (the completions before it are good and were consumed).
#[derive(Debug)]
pub(crate) struct ExPoll {
    pub(crate) n: usize,
    pub(crate) error: Option<VerbsError>,
}

impl VerbsCq {
    /// The `wc_flags` it was made with, for an extended CQ.
    pub(crate) fn ex_flags(&self) -> Option<u64> {
        self.ex.map(|e| e.wc_flags)
    }

    /// `ibv_create_cq_ex(ctx, {cqe: depth, channel, comp_vector, ex.wc_flags})`.
    ///
    /// # Errors
    ///
    /// `EOPNOTSUPP` when the provider has no extended CQ or cannot report a field
    /// `wc_flags` asks for (rxe has no completion timestamps), or its other refusals.
    pub(crate) fn create_ex(
        ctx: &Arc<Context>,
        depth: u32,
        comp_vector: u32,
        channel: Option<&Arc<CompChannel>>,
        ex: ExCq,
    ) -> Result<Arc<VerbsCq>, VerbsError> {
        let wc_flags = ex.wc_flags;
        let mut attr = ffi::ibv_cq_init_attr_ex {
            cqe: depth,
            channel: channel.map_or(core::ptr::null_mut(), |c| c.as_ptr()),
            comp_vector,
            wc_flags,
            ..Default::default()
        };
        // SAFETY: a live context; the channel, when given, belongs to it (the caller checked) and outlives the CQ (the CQ holds its Arc).
        let cq_ex = unsafe { ops::create_cq_ex(ctx.as_ptr(), &mut attr) }
            .map_err(|errno| VerbsError { call: "ibv_create_cq_ex", errno })?;
        // verbs.h's ibv_cq_ex_to_cq: the same pointer (the asserts above).
        let cq = VerbsCq::owned_ex(ctx, cq_ex.cast(), channel, ex);
        // Every reader the poll calls must be there; a provider that did not fill one for
        // a flag it accepted is refused here rather than crashing a poll.
        // SAFETY: the CQ was just made and nothing polls it yet.
        let missing = unsafe { Readers::missing(cq.ex_ptr(), wc_flags) };
        if missing.is_some() {
            return Err(VerbsError { call: "ibv_create_cq_ex", errno: libc::EOPNOTSUPP });
        }
        Ok(cq)
    }

    /// The CQ as `struct ibv_cq_ex`.
    fn ex_ptr(&self) -> *mut ffi::ibv_cq_ex {
        self.as_ptr().cast()
    }

    /// One extended poll of up to `wc.len()` completions into `wc`, each field read the
    /// way the flags allow; with `stamps`, each completion's raw `ibv_wc_read_completion_ts`
    /// (or, made with only the wallclock flag, `ibv_wc_read_completion_wallclock_ns`) too.
    /// A CQ made by `ibv_create_cq` is refused (`EINVAL`).
    ///
    /// Takes `&self` with the same promise as [`VerbsCq::poll_raw`]: the caller's `&mut`
    /// poller is the one consumer.
    #[inline]
    pub(crate) fn poll_ex(&self, wc: &mut [ffi::ibv_wc], mut stamps: Option<&mut [u64]>) -> ExPoll {
        let Some(ExCq { wc_flags: flags, end_poll_after_enoent }) = self.ex else {
            return ExPoll { n: 0, error: Some(VerbsError { call: "ibv_start_poll", errno: libc::EINVAL }) };
        };
        if wc.is_empty() {
            return ExPoll { n: 0, error: None };
        }
        let cq = self.ex_ptr();
        // SAFETY: a live extended CQ, polled by this one consumer.
        let rc = unsafe { ops::start_poll(cq) };
        if rc == libc::ENOENT {
            return ExPoll { n: 0, error: None };
        }
        if rc != 0 {
            return ExPoll { n: 0, error: Some(VerbsError::code("ibv_start_poll", rc)) };
        }
        // SAFETY: the pointers were checked at create and do not change.
        let readers = unsafe { Readers::of(cq) };
        let mut n = 0;
        let mut error = None;
        let mut end = true;
        loop {
            // SAFETY: between start_poll and end_poll, with a current completion.
            unsafe { readers.read(cq, flags, &mut wc[n]) };
            if let Some(s) = stamps.as_deref_mut().and_then(|s| s.get_mut(n)) {
                // SAFETY: as above.
                *s = unsafe { readers.stamp(cq, flags) };
            }
            n += 1;
            if n == wc.len() {
                break;
            }
            // SAFETY: inside the poll start_poll began.
            let rc = unsafe { ops::next_poll(cq) };
            if rc == libc::ENOENT {
                end = end_poll_after_enoent;
                break;
            }
            if rc != 0 {
                error = Some(VerbsError::code("ibv_next_poll", rc));
                break;
            }
        }
        if end {
            // SAFETY: ends the poll start_poll began (after next_poll, whatever it returned, except the ENOENT of a provider that ended the poll itself).
            unsafe { ops::end_poll(cq) };
        }
        ExPoll { n, error }
    }
}

type Read32 = unsafe extern "C" fn(*mut ffi::ibv_cq_ex) -> u32;
type Read8 = unsafe extern "C" fn(*mut ffi::ibv_cq_ex) -> u8;
type Read64 = unsafe extern "C" fn(*mut ffi::ibv_cq_ex) -> u64;

/// The provider's readers of one extended CQ (`cq->read_*`, what `ibv_wc_read_*` call),
/// loaded once per poll call.
struct Readers {
    opcode: Option<unsafe extern "C" fn(*mut ffi::ibv_cq_ex) -> ffi::ibv_wc_opcode>,
    vendor_err: Option<Read32>,
    wc_flags: Option<unsafe extern "C" fn(*mut ffi::ibv_cq_ex) -> core::ffi::c_uint>,
    byte_len: Option<Read32>,
    imm_data: Option<Read32>,
    qp_num: Option<Read32>,
    src_qp: Option<Read32>,
    slid: Option<Read32>,
    sl: Option<Read8>,
    dlid_path_bits: Option<Read8>,
    completion_ts: Option<Read64>,
    wallclock_ns: Option<Read64>,
}

impl Readers {
    /// The readers of `cq`.
    ///
    /// # Safety
    ///
    /// `cq` is a live extended CQ.
    #[inline]
    unsafe fn of(cq: *mut ffi::ibv_cq_ex) -> Readers {
        // SAFETY: the caller's live CQ; these are plain loads of its function pointers.
        let c = unsafe { &*cq };
        Readers {
            opcode: c.read_opcode,
            vendor_err: c.read_vendor_err,
            wc_flags: c.read_wc_flags,
            byte_len: c.read_byte_len,
            imm_data: c.read_imm_data,
            qp_num: c.read_qp_num,
            src_qp: c.read_src_qp,
            slid: c.read_slid,
            sl: c.read_sl,
            dlid_path_bits: c.read_dlid_path_bits,
            completion_ts: c.read_completion_ts,
            wallclock_ns: c.read_completion_wallclock_ns,
        }
    }

    /// The first reader the poll needs for `flags` that the provider left empty.
    ///
    /// # Safety
    ///
    /// As [`Readers::of`].
    unsafe fn missing(cq: *mut ffi::ibv_cq_ex, flags: u64) -> Option<&'static str> {
        // SAFETY: the caller's promise.
        let r = unsafe { Readers::of(cq) };
        // SAFETY: as above; the poll ops are plain pointers too.
        let c = unsafe { &*cq };
        let has = |f: u32| flags & u64::from(f) != 0;
        let checks = [
            ("start_poll", c.start_poll.is_some()),
            ("next_poll", c.next_poll.is_some()),
            ("end_poll", c.end_poll.is_some()),
            ("read_opcode", r.opcode.is_some()),
            ("read_vendor_err", r.vendor_err.is_some()),
            ("read_wc_flags", r.wc_flags.is_some()),
            ("read_byte_len", !has(ffi::IBV_WC_EX_WITH_BYTE_LEN) || r.byte_len.is_some()),
            ("read_imm_data", !has(ffi::IBV_WC_EX_WITH_IMM) || r.imm_data.is_some()),
            ("read_qp_num", !has(ffi::IBV_WC_EX_WITH_QP_NUM) || r.qp_num.is_some()),
            ("read_src_qp", !has(ffi::IBV_WC_EX_WITH_SRC_QP) || r.src_qp.is_some()),
            ("read_slid", !has(ffi::IBV_WC_EX_WITH_SLID) || r.slid.is_some()),
            ("read_sl", !has(ffi::IBV_WC_EX_WITH_SL) || r.sl.is_some()),
            ("read_dlid_path_bits", !has(ffi::IBV_WC_EX_WITH_DLID_PATH_BITS) || r.dlid_path_bits.is_some()),
            ("read_completion_ts", !has(ffi::IBV_WC_EX_WITH_COMPLETION_TIMESTAMP) || r.completion_ts.is_some()),
            (
                "read_completion_wallclock_ns",
                !has(ffi::IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK) || r.wallclock_ns.is_some(),
            ),
        ];
        checks.iter().find(|(_, ok)| !ok).map(|(name, _)| *name)
    }

    /// The current completion into `wc`, as `ibv_poll_cq` would have written it: wr_id,
    /// status and vendor_err always, and qp_num where `flags` asked for it; the rest only for
    /// a success (`ibv_poll_cq(3)`: of an error completion only wr_id, status, qp_num and
    /// vendor_err are valid) and only where `flags` asked for them.
    ///
    /// # Safety
    ///
    /// `cq` is the live CQ these readers came from, inside a poll with a current completion.
    #[inline]
    unsafe fn read(&self, cq: *mut ffi::ibv_cq_ex, flags: u64, wc: &mut ffi::ibv_wc) {
        let has = |f: u32| flags & u64::from(f) != 0;
        // SAFETY: the caller's promise: `cq` is live with a current completion, whose wr_id and status are plain fields the provider set; every reader called (inside the closures too) is the provider's for that completion, and `missing` checked at create that each one the CQ's flags allow is there.
        unsafe {
            let c = &*cq;
            wc.wr_id = c.wr_id;
            wc.status = c.status;
            wc.vendor_err = self.vendor_err.map_or(0, |f| f(cq));
            if has(ffi::IBV_WC_EX_WITH_QP_NUM) {
                wc.qp_num = self.qp_num.map_or(0, |f| f(cq));
            }
            if wc.status != ffi::IBV_WC_SUCCESS {
                return;
            }
            wc.opcode = self.opcode.map_or(0, |f| f(cq));
            wc.wc_flags = self.wc_flags.map_or(0, |f| f(cq));
            if has(ffi::IBV_WC_EX_WITH_BYTE_LEN) {
                wc.byte_len = self.byte_len.map_or(0, |f| f(cq));
            }
            if has(ffi::IBV_WC_EX_WITH_IMM) && wc.wc_flags & (ffi::IBV_WC_WITH_IMM | ffi::IBV_WC_WITH_INV) != 0 {
                wc.__bindgen_anon_1.imm_data = self.imm_data.map_or(0, |f| f(cq));
            }
            if has(ffi::IBV_WC_EX_WITH_SRC_QP) {
                wc.src_qp = self.src_qp.map_or(0, |f| f(cq));
            }
            if has(ffi::IBV_WC_EX_WITH_SLID) {
                // `ibv_wc.slid` is 16 bits; the reader returns the LID widened.
                wc.slid = self.slid.map_or(0, |f| f(cq)) as u16;
            }
            if has(ffi::IBV_WC_EX_WITH_SL) {
                wc.sl = self.sl.map_or(0, |f| f(cq));
            }
            if has(ffi::IBV_WC_EX_WITH_DLID_PATH_BITS) {
                wc.dlid_path_bits = self.dlid_path_bits.map_or(0, |f| f(cq));
            }
        }
    }

    /// The current completion's timestamp: `ibv_wc_read_completion_ts` when the CQ was
    /// made with `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP`, else
    /// `ibv_wc_read_completion_wallclock_ns` when made with the wallclock flag, else 0.
    ///
    /// # Safety
    ///
    /// As [`Readers::read`], with the flags the CQ was made with.
    #[inline]
    unsafe fn stamp(&self, cq: *mut ffi::ibv_cq_ex, flags: u64) -> u64 {
        let reader = if flags & u64::from(ffi::IBV_WC_EX_WITH_COMPLETION_TIMESTAMP) != 0 {
            self.completion_ts
        } else if flags & u64::from(ffi::IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK) != 0 {
            self.wallclock_ns
        } else {
            None
        };
        // SAFETY: the caller's promise; `missing` checked the reader of each flag at create.
        reader.map_or(0, |f| unsafe { f(cq) })
    }
}
