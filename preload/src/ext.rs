//! Extended CQs (`ibv_create_cq_ex`, `mlx5dv_create_cq`): `ibv_start_poll`,
//! `ibv_next_poll`, `ibv_end_poll` and the `ibv_wc_read_*` accessors are inline calls of
//! function pointers in each `struct ibv_cq_ex`, which the provider fills at creation. On a
//! CQ dvcq took, the preload replaces them there, before the CQ is returned:
//!
//! - `own` mode: `start_poll` and `next_poll` take the next completion from dvcq's poller
//!   (one CQE per call, so that nothing is taken out of the ring that the application did
//!   not get, and an arm after the poll sees everything consumed); the readers return its
//!   fields. Every reader the provider set is replaced, and only those (a NULL one stays
//!   NULL). `end_poll` writes nothing: dvcq's poll published its consumer index already.
//! - `verify` mode: the provider's own functions poll and its readers answer; after each
//!   completion the provider found, dvcq reads the same entry and the fields the CQ was
//!   made with are compared.
//!
//! The CQ's lock is held from a `start_poll` that found a completion to its `end_poll`,
//! as the provider holds its own: the guard waits in a thread-local list meanwhile, where
//! the readers find the current completion without a lock.

use crate::cq::{self, CqEntry, Polled};
use crate::layout::{ex, IbvCq, IbvCqEx, IbvWc};
use crate::{lock, Inside, Mode};
use core::ffi::{c_int, c_uint, c_void};
use dvcq::BackendKind;
use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::sync::MutexGuard;

/// The provider's pointers of one extended CQ, as addresses (0: NULL), indexed by [`ex`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Saved(pub [usize; ex::COUNT]);

impl Saved {
    /// Whether the provider set the reader at `slot` (the CQ was made with its field).
    fn has(&self, slot: usize) -> bool {
        self.0[slot] != 0
    }
}

/// The pointers of the extended CQ `raw`.
///
/// # Safety
///
/// `raw` is a live CQ made by the context's `create_cq_ex` (or `mlx5dv_create_cq`).
pub(crate) unsafe fn saved(raw: *mut IbvCq) -> Saved {
    // SAFETY: the caller's extended CQ: an `ibv_cq_ex` at the same address.
    Saved(unsafe { (*raw.cast::<IbvCqEx>()).fns })
}

/// Why dvcq cannot answer the extended CQ `s` with its `backend` in `mode`, if it cannot.
pub(crate) fn unsupported(s: &Saved, backend: BackendKind, mode: Mode) -> Option<String> {
    if !(s.has(ex::START_POLL) && s.has(ex::NEXT_POLL) && s.has(ex::END_POLL)) {
        return Some("an extended CQ without start_poll/next_poll/end_poll from its provider".into());
    }
    let why = |flag: &str, what: &str| Some(format!("an extended CQ made with {flag}: {what}"));
    if s.has(ex::READ_CVLAN) || s.has(ex::READ_FLOW_TAG) {
        return why("IBV_WC_EX_WITH_CVLAN or _FLOW_TAG", "raw Ethernet fields the preload does not return");
    }
    if s.has(ex::READ_TM_INFO) {
        return why("IBV_WC_EX_WITH_TM_INFO", "tag matching, which dvcq does not decode");
    }
    if s.has(ex::READ_COMPLETION_WALLCLOCK_NS) {
        return why(
            "IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK",
            "rdma-core converts the device clock to nanoseconds, which the preload does not",
        );
    }
    if s.has(ex::READ_COMPLETION_TS) && backend != BackendKind::Mlx5 && mode == Mode::Own {
        return why(
            "IBV_WC_EX_WITH_COMPLETION_TIMESTAMP",
            &format!("the preload returns CQE timestamps from dvcq's mlx5 backend only, not {}", backend.name()),
        );
    }
    None
}

/// Stores the preload's functions in the CQ's pointers (after its registration).
///
/// # Safety
///
/// `raw` is the live extended CQ `s` was read from, not yet returned to the application
/// (nobody polls it meanwhile).
pub(crate) unsafe fn install(raw: *mut IbvCq, mode: Mode, s: &Saved) {
    let mut f = s.0;
    let (start, next, end): (usize, usize, usize) = match mode {
        Mode::Own => (own_start as *const () as usize, own_next as *const () as usize, own_end as *const () as usize),
        _ => (verify_start as *const () as usize, verify_next as *const () as usize, verify_end as *const () as usize),
    };
    (f[ex::START_POLL], f[ex::NEXT_POLL], f[ex::END_POLL]) = (start, next, end);
    if mode == Mode::Own {
        let readers: [(usize, usize); 11] = [
            (ex::READ_OPCODE, read_opcode as *const () as usize),
            (ex::READ_VENDOR_ERR, read_vendor_err as *const () as usize),
            (ex::READ_BYTE_LEN, read_byte_len as *const () as usize),
            (ex::READ_IMM_DATA, read_imm_data as *const () as usize),
            (ex::READ_QP_NUM, read_qp_num as *const () as usize),
            (ex::READ_SRC_QP, read_src_qp as *const () as usize),
            (ex::READ_WC_FLAGS, read_wc_flags as *const () as usize),
            (ex::READ_SLID, read_slid as *const () as usize),
            (ex::READ_SL, read_sl as *const () as usize),
            (ex::READ_DLID_PATH_BITS, read_dlid_path_bits as *const () as usize),
            (ex::READ_COMPLETION_TS, read_completion_ts as *const () as usize),
        ];
        for (slot, ours) in readers {
            if s.has(slot) {
                f[slot] = ours;
            }
        }
    }
    // SAFETY: the caller's live extended CQ, which no thread polls yet.
    unsafe { (*raw.cast::<IbvCqEx>()).fns = f };
}

/// Puts the provider's pointers back (the CQ is handed back to rdma-core).
///
/// # Safety
///
/// `raw` is the live extended CQ `s` was read from, and no poll of it is in progress.
pub(crate) unsafe fn restore(raw: *mut IbvCq, s: &Saved) {
    // SAFETY: the caller's live extended CQ.
    unsafe { (*raw.cast::<IbvCqEx>()).fns = s.0 };
}

/// The completion the readers return.
#[derive(Clone, Copy)]
struct Cur {
    wc: IbvWc,
    /// The CQE's raw timestamp.
    ts: u64,
}

/// A poll in progress on this thread: from a `start_poll` that found a completion to its
/// `end_poll`; in own mode kept after `end_poll` (without the lock) for readers called
/// after it, which the provider answers with the last completion (pyverbs' tests read the
/// opcode so) until the next `start_poll` or the CQ's destroy.
struct Held {
    cq: usize,
    entry: &'static CqEntry,
    /// The CQ's lock; `None` once the poll ended.
    guard: Option<MutexGuard<'static, Polled>>,
    /// The provider's pointers (a copy: an ended poll outlives nothing it points to).
    saved: Saved,
    /// Own mode: the current completion; `None` where the provider polls (verify mode, or a
    /// CQ dvcq let go of), whose readers then answer.
    cur: Option<Cur>,
    /// Verify mode: dvcq found fewer entries than the provider: take the CQ again from
    /// the provider's state after `end_poll`.
    resync: bool,
}

thread_local! {
    static HELD: RefCell<Vec<Held>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on the poll of `cq` this thread holds, if it holds one.
fn with_held<R>(cq: *mut IbvCqEx, f: impl FnOnce(&mut Held) -> R) -> Option<R> {
    HELD.with(|h| h.borrow_mut().iter_mut().find(|x| x.cq == cq as usize && x.guard.is_some()).map(f))
}

/// The current completion of `cq` on this thread (of its poll in progress, or of its last
/// one), and the provider's pointers.
fn current(cq: *mut IbvCqEx) -> Option<(Option<Cur>, Saved, bool)> {
    HELD.with(|h| h.borrow().iter().find(|x| x.cq == cq as usize).map(|x| (x.cur, x.saved, x.guard.is_some())))
}

/// Forgets this thread's ended poll of `cq` (its destroy, or a new poll).
pub(crate) fn forget(cq: *mut IbvCq) {
    // A thread-local list: nothing to forget while the thread exits.
    let _ = HELD.try_with(|h| h.borrow_mut().retain(|x| x.cq != cq as usize || x.guard.is_some()));
}

/// Runs `f` on `e`'s poll state: through this thread's held poll of it (a QP destroyed
/// between `start_poll` and `end_poll`), or under its lock.
pub(crate) fn with_polled<R>(e: &'static CqEntry, f: impl FnOnce(&mut Polled) -> R) -> R {
    let mine = |x: &Held| core::ptr::eq(x.entry, e) && x.guard.is_some();
    let held = HELD.try_with(|h| h.borrow().iter().any(mine)).unwrap_or(false);
    if !held {
        return f(&mut lock(&e.polled));
    }
    HELD.with(|h| {
        let mut h = h.borrow_mut();
        match h.iter_mut().find(|x| mine(x)).and_then(|x| x.guard.as_deref_mut()) {
            Some(p) => f(p),
            None => f(&mut lock(&e.polled)),
        }
    })
}

/// The entry of an extended CQ the preload installed its functions in, and the
/// provider's pointers.
fn entry(cq: *mut IbvCqEx) -> Option<(&'static CqEntry, Saved)> {
    cq::get(cq.cast()).and_then(|e| Some((e, e.ext?)))
}

/// Refuses a second `start_poll` without `end_poll` (the provider's lock would deadlock;
/// dvcq's too).
fn busy(cq: *mut IbvCqEx) -> bool {
    let held = HELD.with(|h| h.borrow().iter().any(|x| x.cq == cq as usize && x.guard.is_some()));
    if held {
        crate::log::once("ibv_start_poll on a CQ whose last poll was not ended (ibv_end_poll): EBUSY".into());
    }
    held
}

/// Writes the current completion's `wr_id` and `status` where the application reads them.
///
/// # Safety
///
/// `cq` is a live extended CQ.
unsafe fn set_current(cq: *mut IbvCqEx, wc: &IbvWc) {
    // SAFETY: the caller's live CQ; public fields.
    unsafe {
        (*cq).wr_id = wc.wr_id;
        (*cq).status = wc.status;
    }
}

type StartPoll = unsafe extern "C" fn(*mut IbvCqEx, *mut c_void) -> c_int;
type NextPoll = unsafe extern "C" fn(*mut IbvCqEx) -> c_int;
type EndPoll = unsafe extern "C" fn(*mut IbvCqEx);

/// The provider's function at `slot` of `s`, as `F`.
///
/// # Safety
///
/// `F` is the C signature of `ibv_cq_ex`'s pointer at `slot`, and the slot is not NULL.
unsafe fn provider_fn<F: Copy>(s: &Saved, slot: usize) -> F {
    let a = s.0[slot];
    debug_assert!(a != 0 && core::mem::size_of::<F>() == core::mem::size_of::<usize>());
    // SAFETY: the caller's promise: the provider's non-NULL pointer of this signature.
    unsafe { core::mem::transmute_copy::<usize, F>(&a) }
}

/// Own mode: the next completion of dvcq's poller (those taken out of the ring at a QP's
/// destroy first), counted in the report; `Err` with an errno when dvcq's poll failed.
fn own_take(e: &CqEntry, p: &mut Polled) -> Result<Option<Cur>, c_int> {
    let got = if let Some((wc, ts)) = p.pending.pop_front() {
        Cur { wc, ts }
    } else {
        let _in = Inside::enter();
        let Some(dcq) = p.cq.as_mut() else { return Ok(None) };
        loop {
            if dcq.poll_count(&mut p.buf[..1]) == 0 {
                if let Some(err) = cq::poll_failure(dcq) {
                    crate::log::once(format!("cq {}: dvcq's poll failed: {err}", e.serial));
                    e.errors.fetch_add(1, Ordering::Relaxed);
                    return Err(libc::EIO);
                }
                return Ok(None);
            }
            let c = &p.buf[0];
            match cq::to_wc(c, &p.gone_qps) {
                Some(wc) => break Cur { wc: as_read(wc, dcq.backend().kind), ts: c.timestamp },
                None => {
                    e.absorbed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    };
    e.completions.fetch_add(1, Ordering::Relaxed);
    if got.wc.status != 0 {
        e.errors.fetch_add(1, Ordering::Relaxed);
    }
    Ok(Some(got))
}

/// `IBV_WC_RECV`: the bit of every receive-side opcode.
const WC_RECV: u32 = 1 << 7;
/// `IBV_WC_WITH_IMM | IBV_WC_WITH_INV`.
const WITH_IMM_OR_INV: u32 = (1 << 1) | (1 << 2);

/// A completion as the provider's extended readers report it: libmlx5's `read_wc_flags`
/// sets `IBV_WC_WITH_IMM`/`_WITH_INV` from responder CQE opcodes only (its `ibv_poll_cq`
/// also flags a send with immediate), so on mlx5 a requester completion has neither.
fn as_read(mut wc: IbvWc, backend: BackendKind) -> IbvWc {
    if backend == BackendKind::Mlx5 && wc.opcode & WC_RECV == 0 {
        wc.wc_flags &= !WITH_IMM_OR_INV;
    }
    wc
}

/// `start_poll` of a CQ dvcq polls.
unsafe extern "C" fn own_start(cq: *mut IbvCqEx, attr: *mut c_void) -> c_int {
    let Some((e, saved)) = entry(cq) else { return libc::EINVAL };
    if busy(cq) {
        return libc::EBUSY;
    }
    forget(cq.cast());
    let mut guard = lock(&e.polled);
    let cur = if guard.cq.is_none() {
        // dvcq let go of it (an attach that failed after a resize): the provider polls.
        // SAFETY: the provider's start_poll, with the caller's arguments.
        let rc = unsafe { provider_fn::<StartPoll>(&saved, ex::START_POLL)(cq, attr) };
        if rc != 0 {
            return rc;
        }
        None
    } else {
        match own_take(e, &mut guard) {
            Ok(Some(c)) => {
                // SAFETY: the caller's live CQ.
                unsafe { set_current(cq, &c.wc) };
                Some(c)
            }
            Ok(None) => return libc::ENOENT,
            Err(rc) => return rc,
        }
    };
    let guard = Some(guard);
    HELD.with(|h| h.borrow_mut().push(Held { cq: cq as usize, entry: e, guard, saved, cur, resync: false }));
    0
}

/// `next_poll` of a CQ dvcq polls.
unsafe extern "C" fn own_next(cq: *mut IbvCqEx) -> c_int {
    with_held(cq, |h| {
        if h.cur.is_none() {
            // SAFETY: the provider's next_poll of the poll it started.
            return unsafe { provider_fn::<NextPoll>(&h.saved, ex::NEXT_POLL)(cq) };
        }
        let Some(g) = h.guard.as_mut() else { return libc::EINVAL };
        match own_take(h.entry, g) {
            Ok(Some(c)) => {
                // SAFETY: the caller's live CQ.
                unsafe { set_current(cq, &c.wc) };
                h.cur = Some(c);
                0
            }
            Ok(None) => libc::ENOENT,
            Err(rc) => rc,
        }
    })
    .unwrap_or(libc::EINVAL)
}

/// Takes this thread's poll of `cq` in progress out of the list.
fn release(cq: *mut IbvCqEx) -> Option<Held> {
    HELD.with(|h| {
        let mut h = h.borrow_mut();
        let i = h.iter().position(|x| x.cq == cq as usize && x.guard.is_some())?;
        Some(h.swap_remove(i))
    })
}

/// `end_poll` of a CQ dvcq polls: the consumer index is published by dvcq's poll already.
/// The lock goes; the completion stays for readers called after it.
unsafe extern "C" fn own_end(cq: *mut IbvCqEx) {
    let Some(mut h) = release(cq) else { return };
    if h.cur.is_none() {
        // SAFETY: the provider's end_poll of the poll it started.
        unsafe { provider_fn::<EndPoll>(&h.saved, ex::END_POLL)(cq) };
        return;
    }
    h.guard = None;
    HELD.with(|l| l.borrow_mut().push(h));
}

/// Defines a reader of the current completion: dvcq's (own mode), or the provider's
/// reader where the provider polls.
macro_rules! reader {
    ($name:ident, $slot:expr, $ty:ty, |$c:ident| $val:expr) => {
        unsafe extern "C" fn $name(cq: *mut IbvCqEx) -> $ty {
            match current(cq) {
                Some((Some($c), _, _)) => $val,
                // SAFETY: the provider's reader, set since the preload replaces only those it set, during the provider's poll.
                Some((None, s, true)) => unsafe {
                    provider_fn::<unsafe extern "C" fn(*mut IbvCqEx) -> $ty>(&s, $slot)(cq)
                },
                _ => Default::default(),
            }
        }
    };
}

reader!(read_opcode, ex::READ_OPCODE, u32, |c| c.wc.opcode);
reader!(read_vendor_err, ex::READ_VENDOR_ERR, u32, |c| c.wc.vendor_err);
reader!(read_byte_len, ex::READ_BYTE_LEN, u32, |c| c.wc.byte_len);
reader!(read_imm_data, ex::READ_IMM_DATA, u32, |c| c.wc.imm_data);
reader!(read_qp_num, ex::READ_QP_NUM, u32, |c| c.wc.qp_num);
reader!(read_src_qp, ex::READ_SRC_QP, u32, |c| c.wc.src_qp);
reader!(read_wc_flags, ex::READ_WC_FLAGS, c_uint, |c| c.wc.wc_flags);
reader!(read_slid, ex::READ_SLID, u32, |c| u32::from(c.wc.slid));
reader!(read_sl, ex::READ_SL, u8, |c| c.wc.sl);
reader!(read_dlid_path_bits, ex::READ_DLID_PATH_BITS, u8, |c| c.wc.dlid_path_bits);
reader!(read_completion_ts, ex::READ_COMPLETION_TS, u64, |c| c.ts);

// ---- verify mode

/// The provider's current completion, read with its readers (the fields it was not made
/// with read 0), and its timestamp.
///
/// # Safety
///
/// `cq` is a live extended CQ between a successful `start_poll`/`next_poll` and
/// `end_poll`, and `s` its provider's pointers.
unsafe fn provider_current(cq: *mut IbvCqEx, s: &Saved) -> (IbvWc, u64) {
    macro_rules! read {
        ($slot:expr, $ty:ty) => {
            if s.has($slot) {
                // SAFETY: the provider's reader (set), of this signature (verbs.h), on its current completion.
                unsafe { core::mem::transmute::<usize, unsafe extern "C" fn(*mut IbvCqEx) -> $ty>(s.0[$slot])(cq) }
            } else {
                <$ty>::default()
            }
        };
    }
    // SAFETY: the caller's live CQ; public fields.
    let (wr_id, status) = unsafe { ((*cq).wr_id, (*cq).status) };
    let wc = IbvWc {
        wr_id,
        status,
        opcode: read!(ex::READ_OPCODE, u32),
        vendor_err: read!(ex::READ_VENDOR_ERR, u32),
        byte_len: read!(ex::READ_BYTE_LEN, u32),
        imm_data: read!(ex::READ_IMM_DATA, u32),
        qp_num: read!(ex::READ_QP_NUM, u32),
        src_qp: read!(ex::READ_SRC_QP, u32),
        wc_flags: read!(ex::READ_WC_FLAGS, c_uint),
        pkey_index: 0,
        slid: read!(ex::READ_SLID, u32) as u16,
        sl: read!(ex::READ_SL, u8),
        dlid_path_bits: read!(ex::READ_DLID_PATH_BITS, u8),
    };
    let ts = if status == 0 { read!(ex::READ_COMPLETION_TS, u64) } else { 0 };
    (wc, ts)
}

/// dvcq's completion with only the fields the CQ was made with (the others 0, as
/// [`provider_current`] reads them).
fn masked(w: IbvWc, s: &Saved) -> IbvWc {
    let keep = |slot: usize| s.has(slot);
    IbvWc {
        opcode: if keep(ex::READ_OPCODE) { w.opcode } else { 0 },
        vendor_err: if keep(ex::READ_VENDOR_ERR) { w.vendor_err } else { 0 },
        byte_len: if keep(ex::READ_BYTE_LEN) { w.byte_len } else { 0 },
        imm_data: if keep(ex::READ_IMM_DATA) { w.imm_data } else { 0 },
        qp_num: if keep(ex::READ_QP_NUM) { w.qp_num } else { 0 },
        src_qp: if keep(ex::READ_SRC_QP) { w.src_qp } else { 0 },
        wc_flags: if keep(ex::READ_WC_FLAGS) { w.wc_flags } else { 0 },
        slid: if keep(ex::READ_SLID) { w.slid } else { 0 },
        sl: if keep(ex::READ_SL) { w.sl } else { 0 },
        dlid_path_bits: if keep(ex::READ_DLID_PATH_BITS) { w.dlid_path_bits } else { 0 },
        pkey_index: 0,
        ..w
    }
}

/// Verify mode, after the provider found a completion: dvcq reads its next entry and the
/// two are compared.
///
/// # Safety
///
/// As [`provider_current`], `h` being this thread's poll of `cq`.
unsafe fn check(h: &mut Held, cq: *mut IbvCqEx) {
    let (e, s) = (h.entry, h.saved);
    // SAFETY: the caller's promise.
    let (theirs, their_ts) = unsafe { provider_current(cq, &s) };
    e.completions.fetch_add(1, Ordering::Relaxed);
    if theirs.status != 0 {
        e.errors.fetch_add(1, Ordering::Relaxed);
    }
    if h.resync {
        return;
    }
    let Some(p) = h.guard.as_deref_mut() else { return };
    let Some(dcq) = p.cq.as_mut() else { return };
    let k = {
        let _in = Inside::enter();
        dcq.poll_count(&mut p.buf[..1])
    };
    let ours = (k == 1)
        .then(|| &p.buf[0])
        .and_then(|c| cq::to_wc(c, &p.gone_qps).map(|w| (masked(as_read(w, dcq.backend().kind), &s), c.timestamp)));
    let what = crate::verify::difference(&theirs, ours.as_ref().map(|o| &o.0)).or_else(|| {
        let (_, ts) = ours?;
        (theirs.status == 0 && s.has(ex::READ_COMPLETION_TS) && ts != their_ts).then_some("completion_ts")
    });
    if let Some(what) = what {
        crate::verify::report(e, what, &theirs, ours.map(|o| o.0).as_ref());
    }
    if k == 0 {
        h.resync = true;
    }
}

/// `start_poll` of a CQ in verify mode.
unsafe extern "C" fn verify_start(cq: *mut IbvCqEx, attr: *mut c_void) -> c_int {
    let Some((e, saved)) = entry(cq) else { return libc::EINVAL };
    if busy(cq) {
        return libc::EBUSY;
    }
    let guard = Some(lock(&e.polled));
    // SAFETY: the provider's start_poll, with the caller's arguments.
    let rc = unsafe { provider_fn::<StartPoll>(&saved, ex::START_POLL)(cq, attr) };
    if rc != 0 {
        return rc;
    }
    let mut h = Held { cq: cq as usize, entry: e, guard, saved, cur: None, resync: false };
    // SAFETY: the provider's poll found a completion.
    unsafe { check(&mut h, cq) };
    HELD.with(|l| l.borrow_mut().push(h));
    0
}

/// `next_poll` of a CQ in verify mode.
unsafe extern "C" fn verify_next(cq: *mut IbvCqEx) -> c_int {
    with_held(cq, |h| {
        // SAFETY: the provider's next_poll of the poll it started.
        let rc = unsafe { provider_fn::<NextPoll>(&h.saved, ex::NEXT_POLL)(cq) };
        if rc == 0 {
            // SAFETY: the provider's poll found a completion.
            unsafe { check(h, cq) };
        }
        rc
    })
    .unwrap_or(libc::EINVAL)
}

/// `end_poll` of a CQ in verify mode: the provider's, then, where dvcq's cursor fell
/// behind, dvcq takes the CQ again from the provider's state.
unsafe extern "C" fn verify_end(cq: *mut IbvCqEx) {
    let Some(mut h) = release(cq) else { return };
    // SAFETY: the provider's end_poll of the poll it started.
    unsafe { provider_fn::<EndPoll>(&h.saved, ex::END_POLL)(cq) };
    if let (true, Some(g)) = (h.resync, h.guard.as_mut()) {
        crate::hooks::reattach(h.entry, cq.cast(), g, "dvcq read fewer completions than the provider");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pointers as a provider sets them for a CQ made with the fields in `slots`.
    fn made_with(slots: &[usize]) -> Saved {
        let mut s = [0usize; ex::COUNT];
        for slot in
            [ex::START_POLL, ex::NEXT_POLL, ex::END_POLL, ex::READ_OPCODE, ex::READ_WC_FLAGS].iter().chain(slots)
        {
            s[*slot] = 0x1000 + slot;
        }
        Saved(s)
    }

    #[test]
    fn fields_dvcq_returns_are_taken_and_others_declined() {
        let std = [ex::READ_BYTE_LEN, ex::READ_IMM_DATA, ex::READ_QP_NUM, ex::READ_SRC_QP, ex::READ_SLID];
        assert_eq!(unsupported(&made_with(&std), BackendKind::Mlx5, Mode::Own), None);
        assert_eq!(unsupported(&made_with(&[ex::READ_COMPLETION_TS]), BackendKind::Mlx5, Mode::Own), None);
        let ts_rxe = unsupported(&made_with(&[ex::READ_COMPLETION_TS]), BackendKind::Rxe, Mode::Own).unwrap();
        assert!(ts_rxe.contains("IBV_WC_EX_WITH_COMPLETION_TIMESTAMP"), "{ts_rxe}");
        // verify mode reads the provider's timestamp, whatever the backend.
        assert_eq!(unsupported(&made_with(&[ex::READ_COMPLETION_TS]), BackendKind::Rxe, Mode::Verify), None);
        for (slot, flag) in [
            (ex::READ_CVLAN, "CVLAN"),
            (ex::READ_FLOW_TAG, "FLOW_TAG"),
            (ex::READ_TM_INFO, "TM_INFO"),
            (ex::READ_COMPLETION_WALLCLOCK_NS, "WALLCLOCK"),
        ] {
            let why = unsupported(&made_with(&[slot]), BackendKind::Mlx5, Mode::Own).unwrap();
            assert!(why.contains(flag), "{why}");
        }
        let mut no_poll = made_with(&[]);
        no_poll.0[ex::NEXT_POLL] = 0;
        assert!(unsupported(&no_poll, BackendKind::Mlx5, Mode::Own).unwrap().contains("without start_poll"));
    }

    #[test]
    fn verify_compares_only_the_fields_the_cq_was_made_with() {
        let w = IbvWc {
            wr_id: 1,
            opcode: 128,
            byte_len: 9,
            qp_num: 5,
            src_qp: 6,
            sl: 2,
            pkey_index: 3,
            ..IbvWc::default()
        };
        let m = masked(w, &made_with(&[ex::READ_BYTE_LEN]));
        assert_eq!((m.wr_id, m.opcode, m.byte_len), (1, 128, 9));
        assert_eq!((m.qp_num, m.src_qp, m.sl, m.pkey_index), (0, 0, 0, 0));
    }

    #[test]
    fn mlx5_reports_immediate_flags_on_responder_completions_only() {
        let send_imm = IbvWc { opcode: 0, wc_flags: 2, ..IbvWc::default() };
        assert_eq!(as_read(send_imm, BackendKind::Mlx5).wc_flags, 0);
        assert_eq!(as_read(send_imm, BackendKind::Rxe).wc_flags, 2);
        let recv_imm = IbvWc { opcode: WC_RECV, wc_flags: 2 | 1, ..IbvWc::default() };
        assert_eq!(as_read(recv_imm, BackendKind::Mlx5).wc_flags, 3);
    }
}
