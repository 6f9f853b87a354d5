//! Enough of the verbs layer to make traffic on a model (or a device) from C: a protection
//! domain, memory regions dvcq allocates, RC QPs on dvcq CQs connected in this process,
//! and RDMA writes, sends and receives between regions named by handle and offset.

use crate::context::dvcq_context;
use crate::cq::dvcq_cq;
use crate::error::{guard, Fail};
use crate::handle::{self, Handle};
use core::ffi::{c_int, c_void};
use dvcq::verbs::{Access, QpType, RecvWr, SendOp, SendWr};
use dvcq::{Mr, QpInit};
use std::sync::Mutex;

/// A protection domain.
pub struct dvcq_pd {
    tag: u64,
    pd: Mutex<dvcq::Pd>,
}

/// A memory region dvcq allocated and registered (zeroed, page-aligned); data goes in with
/// `dvcq_mr_write` and out with `dvcq_mr_read`, as the device may write it at any time.
pub struct dvcq_mr {
    tag: u64,
    mr: Mutex<dvcq::Mr>,
}

/// A queue pair. Used by one thread at a time (`-EBUSY` otherwise).
pub struct dvcq_qp {
    tag: u64,
    qp: Mutex<dvcq::Qp>,
}

// Any handle may be used from any thread (a QP one at a time, which its lock checks).
static_assertions::assert_impl_all!(dvcq_pd: Send, Sync);
static_assertions::assert_impl_all!(dvcq_mr: Send, Sync);
static_assertions::assert_impl_all!(dvcq_qp: Send, Sync);

impl Handle for dvcq_pd {
    const TAG: u64 = 0x6476_6371_5f70_645f; // "dvcq_pd_"
    const NAME: &'static str = "struct dvcq_pd";
    fn tag(&self) -> u64 {
        self.tag
    }
    fn tag_mut(&mut self) -> &mut u64 {
        &mut self.tag
    }
}

impl Handle for dvcq_mr {
    const TAG: u64 = 0x6476_6371_5f6d_725f; // "dvcq_mr_"
    const NAME: &'static str = "struct dvcq_mr";
    fn tag(&self) -> u64 {
        self.tag
    }
    fn tag_mut(&mut self) -> &mut u64 {
        &mut self.tag
    }
}

impl Handle for dvcq_qp {
    const TAG: u64 = 0x6476_6371_5f71_705f; // "dvcq_qp_"
    const NAME: &'static str = "struct dvcq_qp";
    fn tag(&self) -> u64 {
        self.tag
    }
    fn tag_mut(&mut self) -> &mut u64 {
        &mut self.tag
    }
}

/// Allocates a protection domain on `ctx`.
///
/// # Safety
///
/// `ctx` is a live context; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn dvcq_pd_alloc(ctx: *const dvcq_context, out: *mut *mut dvcq_pd) -> c_int {
    const CALL: &str = "dvcq_pd_alloc";
    guard(CALL, || {
        // SAFETY: the caller's promise about `out`.
        unsafe { handle::clear(out) };
        // SAFETY: the caller's promise about `ctx`.
        let h = unsafe { handle::get(CALL, ctx) }?;
        let pd = handle::lock(CALL, "context", &h.ctx)?.alloc_pd().map_err(|e| Fail::of(CALL, &e))?;
        // SAFETY: the caller's promise about `out`.
        unsafe { handle::give(CALL, out, dvcq_pd { tag: dvcq_pd::TAG, pd: Mutex::new(pd) }) }
    })
}

/// Frees a protection domain handle (what was made on it keeps it until it goes).
///
/// # Safety
///
/// `pd` is a live PD that no other thread is using.
#[no_mangle]
pub unsafe extern "C" fn dvcq_pd_free(pd: *mut dvcq_pd) -> c_int {
    const CALL: &str = "dvcq_pd_free";
    // SAFETY: the caller's promise.
    guard(CALL, || unsafe { handle::take(CALL, pd) }.map(|_| 0))
}

/// Allocates and registers `len` zeroed bytes on `pd`, with every access right (local
/// write, remote read and write).
///
/// # Safety
///
/// `pd` is a live PD; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn dvcq_mr_reg(pd: *const dvcq_pd, len: usize, out: *mut *mut dvcq_mr) -> c_int {
    const CALL: &str = "dvcq_mr_reg";
    guard(CALL, || {
        // SAFETY: the caller's promise about `out`.
        unsafe { handle::clear(out) };
        // SAFETY: the caller's promise about `pd`.
        let h = unsafe { handle::get(CALL, pd) }?;
        if len == 0 {
            return Err(Fail::inval(CALL, "len is 0"));
        }
        let mr = handle::lock(CALL, "PD", &h.pd)?.reg_mr(len, Access::ALL).map_err(|e| Fail::of(CALL, &e))?;
        // SAFETY: the caller's promise about `out`.
        unsafe { handle::give(CALL, out, dvcq_mr { tag: dvcq_mr::TAG, mr: Mutex::new(mr) }) }
    })
}

/// Deregisters a memory region and frees its memory (QPs that still name it in posted
/// work keep it alive until that work completes).
///
/// # Safety
///
/// `mr` is a live MR that no other thread is using.
#[no_mangle]
pub unsafe extern "C" fn dvcq_mr_dereg(mr: *mut dvcq_mr) -> c_int {
    const CALL: &str = "dvcq_mr_dereg";
    // SAFETY: the caller's promise.
    guard(CALL, || unsafe { handle::take(CALL, mr) }.map(|_| 0))
}

/// Copies `len` bytes from `data` into the region at `offset`. `-EINVAL` past its end.
///
/// # Safety
///
/// `mr` is a live MR; `data` points to `len` readable bytes (NULL only with `len` 0).
#[no_mangle]
pub unsafe extern "C" fn dvcq_mr_write(mr: *const dvcq_mr, offset: u64, data: *const c_void, len: usize) -> c_int {
    const CALL: &str = "dvcq_mr_write";
    guard(CALL, || {
        // SAFETY: the caller's promise.
        let h = unsafe { handle::get(CALL, mr) }?;
        if data.is_null() && len > 0 {
            return Err(Fail::inval(CALL, "data is NULL"));
        }
        let bytes = if len == 0 {
            &[][..]
        } else {
            // SAFETY: non-NULL and, by the caller's promise, `len` readable bytes, not written during the call.
            unsafe { core::slice::from_raw_parts(data.cast::<u8>(), len) }
        };
        handle::lock(CALL, "MR", &h.mr)?.write(offset, bytes).map_err(|e| Fail::of(CALL, &e))?;
        Ok(0)
    })
}

/// Copies `len` bytes of the region at `offset` into `out`. `-EINVAL` past its end.
///
/// # Safety
///
/// `mr` is a live MR; `out` points to `len` writable bytes (NULL only with `len` 0).
#[no_mangle]
pub unsafe extern "C" fn dvcq_mr_read(mr: *const dvcq_mr, offset: u64, out: *mut c_void, len: usize) -> c_int {
    const CALL: &str = "dvcq_mr_read";
    guard(CALL, || {
        // SAFETY: the caller's promise.
        let h = unsafe { handle::get(CALL, mr) }?;
        if out.is_null() && len > 0 {
            return Err(Fail::inval(CALL, "out is NULL"));
        }
        let mr = handle::lock(CALL, "MR", &h.mr)?;
        let mut tmp = vec![0u8; len];
        mr.read(offset, &mut tmp).map_err(|e| Fail::of(CALL, &e))?;
        // SAFETY: `out` has `len` writable bytes (the caller's promise); `tmp` is ours, `len` long.
        unsafe { core::ptr::copy_nonoverlapping(tmp.as_ptr(), out.cast::<u8>(), len) };
        Ok(0)
    })
}

/// Makes an RC QP on `pd` whose sends and receives complete on `cq` (a CQ made with
/// `dvcq_cq_create` on the same device); it stays in INIT until `dvcq_qp_connect`.
///
/// # Safety
///
/// `pd` is a live PD, `cq` a live CQ, `out` writable.
#[no_mangle]
pub unsafe extern "C" fn dvcq_qp_create_rc(pd: *const dvcq_pd, cq: *const dvcq_cq, out: *mut *mut dvcq_qp) -> c_int {
    const CALL: &str = "dvcq_qp_create_rc";
    guard(CALL, || {
        // SAFETY: the caller's promise about `out`.
        unsafe { handle::clear(out) };
        // SAFETY: the caller's promise.
        let pd = unsafe { handle::get(CALL, pd) }?;
        // SAFETY: the caller's promise.
        let cq = unsafe { handle::get(CALL, cq) }?;
        let cq = handle::try_lock(CALL, "CQ", &cq.state)?;
        let qp = handle::lock(CALL, "PD", &pd.pd)?
            .create_qp(&QpInit::new(QpType::Rc, &cq.cq))
            .map_err(|e| Fail::of(CALL, &e))?;
        // SAFETY: the caller's promise about `out`.
        unsafe { handle::give(CALL, out, dvcq_qp { tag: dvcq_qp::TAG, qp: Mutex::new(qp) }) }
    })
}

/// Destroys a QP.
///
/// # Safety
///
/// `qp` is a live QP that no other thread is using.
#[no_mangle]
pub unsafe extern "C" fn dvcq_qp_destroy(qp: *mut dvcq_qp) -> c_int {
    const CALL: &str = "dvcq_qp_destroy";
    // SAFETY: the caller's promise.
    guard(CALL, || unsafe { handle::take(CALL, qp) }.map(|_| 0))
}

/// The QP's number (`qp_num` in its completions), or a negative errno.
///
/// # Safety
///
/// `qp` is a live QP.
#[no_mangle]
pub unsafe extern "C" fn dvcq_qp_num(qp: *const dvcq_qp) -> i64 {
    const CALL: &str = "dvcq_qp_num";
    let mut n = 0i64;
    let rc = guard(CALL, || {
        // SAFETY: the caller's promise.
        let h = unsafe { handle::get(CALL, qp) }?;
        n = i64::from(handle::try_lock(CALL, "QP", &h.qp)?.qpn());
        Ok(0)
    });
    if rc < 0 {
        i64::from(rc)
    } else {
        n
    }
}

/// Connects an RC QP to `peer`, a QP of this process on the same device (the QP itself
/// for a loopback), and moves it to RTS. Connect each side.
///
/// # Safety
///
/// `qp` and `peer` are live QPs (they may be the same).
#[no_mangle]
pub unsafe extern "C" fn dvcq_qp_connect(qp: *mut dvcq_qp, peer: *const dvcq_qp) -> c_int {
    const CALL: &str = "dvcq_qp_connect";
    guard(CALL, || {
        // SAFETY: the caller's promise.
        let h = unsafe { handle::get(CALL, qp) }?;
        // SAFETY: the caller's promise.
        let p = unsafe { handle::get(CALL, peer) }?;
        let ep = handle::try_lock(CALL, "QP", &p.qp)?.endpoint().map_err(|e| Fail::of(CALL, &e))?;
        handle::try_lock(CALL, "QP", &h.qp)?.connect(&ep).map_err(|e| Fail::of(CALL, &e))?;
        Ok(0)
    })
}

/// The slice `[offset, offset + len)` of a locked region, for a work request: the slice
/// borrows the region, so the lock is held until the post is done with it.
fn slice<'m>(call: &str, mr: &'m Mr, offset: u64, len: u32) -> Result<dvcq::verbs::MrSlice<'m>, Fail> {
    mr.slice(offset, len).map_err(|e| Fail::of(call, &e))
}

/// Posts one signaled RDMA WRITE of `len` bytes from `local` at `local_offset` to `remote`
/// at `remote_offset` (the peer's region; any region on the connected device). Its
/// completion carries `wr_id`. `-ENOMEM` when the device refuses the post (a full send
/// queue, ...: the message says why).
///
/// # Safety
///
/// `qp` is a live connected QP; `local` and `remote` are live MRs.
#[no_mangle]
pub unsafe extern "C" fn dvcq_qp_post_write(
    qp: *mut dvcq_qp,
    wr_id: u64,
    local: *const dvcq_mr,
    local_offset: u64,
    len: u32,
    remote: *const dvcq_mr,
    remote_offset: u64,
) -> c_int {
    const CALL: &str = "dvcq_qp_post_write";
    guard(CALL, || {
        // SAFETY: the caller's promise.
        let h = unsafe { handle::get(CALL, qp) }?;
        // SAFETY: the caller's promise.
        let local = unsafe { handle::get(CALL, local) }?;
        // SAFETY: the caller's promise.
        let remote = unsafe { handle::get(CALL, remote) }?;
        // The remote region first, its lock released: `local` may be the same region.
        let to = handle::lock(CALL, "MR", &remote.mr)?.remote().at(remote_offset);
        let local = handle::lock(CALL, "MR", &local.mr)?;
        let sg = [slice(CALL, &local, local_offset, len)?];
        let wr = SendWr::new(wr_id, SendOp::Write(to), &sg);
        handle::try_lock(CALL, "QP", &h.qp)?.post_send(&[wr]).map_err(|e| Fail::of(CALL, &e))?;
        Ok(0)
    })
}

/// Posts one signaled SEND of `len` bytes from `mr` at `offset`; it lands in the peer's
/// next posted receive. Its completion carries `wr_id`.
///
/// # Safety
///
/// `qp` is a live connected QP; `mr` a live MR.
#[no_mangle]
pub unsafe extern "C" fn dvcq_qp_post_send(
    qp: *mut dvcq_qp,
    wr_id: u64,
    mr: *const dvcq_mr,
    offset: u64,
    len: u32,
) -> c_int {
    const CALL: &str = "dvcq_qp_post_send";
    guard(CALL, || {
        // SAFETY: the caller's promise.
        let h = unsafe { handle::get(CALL, qp) }?;
        // SAFETY: the caller's promise.
        let mr = unsafe { handle::get(CALL, mr) }?;
        let mr = handle::lock(CALL, "MR", &mr.mr)?;
        let sg = [slice(CALL, &mr, offset, len)?];
        let wr = SendWr::new(wr_id, SendOp::Send, &sg);
        handle::try_lock(CALL, "QP", &h.qp)?.post_send(&[wr]).map_err(|e| Fail::of(CALL, &e))?;
        Ok(0)
    })
}

/// Posts one receive of up to `len` bytes into `mr` at `offset`. Its completion carries
/// `wr_id`.
///
/// # Safety
///
/// `qp` is a live QP; `mr` a live MR.
#[no_mangle]
pub unsafe extern "C" fn dvcq_qp_post_recv(
    qp: *mut dvcq_qp,
    wr_id: u64,
    mr: *const dvcq_mr,
    offset: u64,
    len: u32,
) -> c_int {
    const CALL: &str = "dvcq_qp_post_recv";
    guard(CALL, || {
        // SAFETY: the caller's promise.
        let h = unsafe { handle::get(CALL, qp) }?;
        // SAFETY: the caller's promise.
        let mr = unsafe { handle::get(CALL, mr) }?;
        let mr = handle::lock(CALL, "MR", &mr.mr)?;
        let sg = [slice(CALL, &mr, offset, len)?];
        let wr = RecvWr { wr_id, sg_list: &sg };
        handle::try_lock(CALL, "QP", &h.qp)?.post_recv(&[wr]).map_err(|e| Fail::of(CALL, &e))?;
        Ok(0)
    })
}
