//! An rdma-core receive work queue (`ibv_create_wq`, the queues an RSS QP spreads its
//! receives over) adopted by the mlx5 direct backend: `mlx5dv_init_obj(MLX5DV_OBJ_RWQ)` for
//! its public facts (`struct mlx5dv_rwq`: WQE buffer, doorbell record, `wqe_cnt`, stride),
//! and the private `struct mlx5_rwq` around the `ibv_wq` (`providers/mlx5/mlx5.h`), read at
//! the offsets of the layout row for the rdma-core release loaded and checked against
//! those facts before any of its pointers is trusted.
//!
//! Its wr_id table, `head` and `tail` are a `struct mlx5_wq` like a QP's receive queue, and
//! rdma-core's poll completes a CQE naming the WQ's user index from it as from a QP's
//! (`wrid[wqe_counter & (wqe_cnt - 1)]`, `++tail`: `providers/mlx5/cq.c`): the registry's
//! mirror reads and writes it through the same [`RdmaCoreWq`].

use super::{u32_at, u64_at, RdmaCoreWq};
use crate::sys::ffi;
use core::mem::offset_of;
use dvcq_uapi::mlx5::rdma_core::{Mlx5Layout, IBV_WQ_SIZE, MLX5_RSC_TYPE_RWQ};
use static_assertions::const_assert_eq;

// The public WQ fields the private struct's copy is read at, and the table's view of the
// struct's size, tied to the headers this build read.
pub(crate) const IBV_WQ_CONTEXT: usize = offset_of!(ffi::ibv_wq, context);
pub(crate) const IBV_WQ_CQ: usize = offset_of!(ffi::ibv_wq, cq);
pub(crate) const IBV_WQ_NUM: usize = offset_of!(ffi::ibv_wq, wq_num);
pub(crate) const IBV_WQ_TYPE: usize = offset_of!(ffi::ibv_wq, wq_type);
const_assert_eq!(IBV_WQ_CQ, 24);
const_assert_eq!(IBV_WQ_NUM, 32);
#[cfg(target_arch = "x86_64")]
const_assert_eq!(IBV_WQ_SIZE, core::mem::size_of::<ffi::ibv_wq>());

/// What `mlx5dv_init_obj(MLX5DV_OBJ_RWQ)` says about a WQ (`struct mlx5dv_rwq`, filled by
/// `mlx5dv_get_rwq` from `pbuff`, `recv_db` and `rq`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DvRwq {
    /// The receive WQEs.
    pub(crate) buf: usize,
    /// The doorbell record's receive word.
    pub(crate) dbrec: usize,
    /// Entries.
    pub(crate) wqe_cnt: u32,
    /// Bytes per WQE.
    pub(crate) stride: u32,
}

/// `mlx5dv_init_obj(&obj, MLX5DV_OBJ_RWQ)` on `wq`.
///
/// # Safety
///
/// `wq` is a live `ibv_wq` of an mlx5 context.
pub(crate) unsafe fn init_rwq(wq: *mut ffi::ibv_wq) -> Result<DvRwq, String> {
    let mut out = ffi::mlx5dv_rwq::default();
    let mut obj = ffi::mlx5dv_obj::default();
    obj.rwq.in_ = wq;
    obj.rwq.out = &mut out;
    // SAFETY: the caller's live mlx5 WQ; the output struct lives across the call.
    let rc = unsafe { ffi::mlx5dv_init_obj(&mut obj, u64::from(ffi::MLX5DV_OBJ_RWQ)) };
    if rc != 0 {
        return Err(format!(
            "mlx5dv_init_obj(MLX5DV_OBJ_RWQ) failed ({})",
            std::io::Error::from_raw_os_error(rc.abs())
        ));
    }
    Ok(DvRwq { buf: out.buf as usize, dbrec: out.dbrec as usize, wqe_cnt: out.wqe_cnt, stride: out.stride })
}

/// What an adopted WQ's private struct gave, checked against its public facts.
#[derive(Debug)]
pub(crate) struct PrivateRwq {
    /// `ibv_wq.wq_num`.
    pub(crate) wqn: u32,
    /// `rsc.rsn`: the user index its CQEs carry.
    pub(crate) uidx: u32,
    /// `rq.wqe_cnt`.
    pub(crate) wqe_cnt: u32,
    /// The queue in rdma-core's memory.
    pub(crate) rq: RdmaCoreWq,
}

/// Reads the `struct mlx5_rwq` around `wq` with `layout` and checks it against `dv` (what
/// `mlx5dv_init_obj` reported), `ctx` and `cq` (the CQ being attached, on a context of
/// CQE version `cqe_v1`). Returns the queue, or the first check that failed.
///
/// Checks, in order: the WQ's context, CQ and type (public `ibv_wq` fields); the CQE
/// version (rdma-core finds a WQ only by the user index version-1 CQEs carry); then the
/// private struct: `rsc.type`, the user index's width, the doorbell record (`recv_db`,
/// `db`), `rq.wqe_cnt` and the stride `rq.wqe_shift` gives, the WQE buffer (`pbuff` is
/// `buf + rq.offset`), the queue's head and tail (no more outstanding than entries), and
/// the wr_id table (non-null, aligned).
///
/// # Safety
///
/// `wq` is a live `ibv_wq` made by rdma-core's mlx5 provider (so it sits inside a `struct
/// mlx5_rwq`), and `layout` is the row of the rdma-core release loaded, so the
/// `layout.rwq.size` bytes from `wq - layout.rwq.ibv_wq` are that allocation.
pub(crate) unsafe fn read_rwq(
    wq: *mut ffi::ibv_wq,
    dv: &DvRwq,
    layout: &Mlx5Layout,
    ctx: *mut ffi::ibv_context,
    cq: *mut ffi::ibv_cq,
    cqe_v1: bool,
) -> Result<PrivateRwq, String> {
    let (l, w) = (&layout.rwq, &layout.wq);
    let base = (wq as *mut u8).wrapping_sub(l.ibv_wq);
    // SAFETY: the caller's promise: `base` starts the `calloc`ed `struct mlx5_rwq` of this WQ.
    unsafe { super::super::allocation::allocation_holds(base, l.size, "struct mlx5_rwq") }
        .map_err(|e| format!("wq {wq:p}: {e}"))?;
    let mut b = vec![0u8; l.size];
    // SAFETY: the allocation holds `l.size` bytes from `base` (checked above), the live `struct mlx5_rwq` of this WQ. A plain byte copy; the fields read from it are checked before any pointer in it is used.
    unsafe { core::ptr::copy_nonoverlapping(base, b.as_mut_ptr(), l.size) };
    let pub_field = |off: usize| l.ibv_wq + off;
    let wqn = u32_at(&b, pub_field(IBV_WQ_NUM));
    let what = |s: String| format!("wq {wqn:#x}: {s}");
    let release = format!("rdma-core v{}.{}-v{}.{}", layout.first.0, layout.first.1, layout.last.0, layout.last.1);
    if u64_at(&b, pub_field(IBV_WQ_CONTEXT)) != ctx as u64 {
        return Err(what("it belongs to another device context".into()));
    }
    let wq_cq = u64_at(&b, pub_field(IBV_WQ_CQ));
    if wq_cq != cq as u64 {
        return Err(what(format!("its CQ ({wq_cq:#x}) is not the attached CQ ({:#x})", cq as u64)));
    }
    let wq_type = u32_at(&b, pub_field(IBV_WQ_TYPE));
    if wq_type != ffi::IBV_WQT_RQ {
        return Err(what(format!("its type {wq_type} is not IBV_WQT_RQ, the only WQ rdma-core's mlx5 provider makes")));
    }
    if !cqe_v1 {
        return Err(what(
            "the context's CQEs are of version 0, which name a WQ by no number rdma-core can look up (it finds WQs \
             by the user index version-1 CQEs carry)"
                .into(),
        ));
    }
    let rsc_type = u32_at(&b, l.rsc_type);
    if rsc_type != MLX5_RSC_TYPE_RWQ {
        return Err(what(format!(
            "rsc.type is {rsc_type}, not MLX5_RSC_TYPE_RWQ ({MLX5_RSC_TYPE_RWQ}): not the struct mlx5_rwq of {release}"
        )));
    }
    let uidx = u32_at(&b, l.rsn);
    if uidx > dvcq_uapi::mlx5::cqe::QPN_MASK {
        return Err(what(format!("the user index rsc.rsn {uidx:#x} is wider than 24 bits")));
    }
    let (recv_db, db) = (u64_at(&b, l.recv_db), u64_at(&b, l.db));
    if recv_db != dv.dbrec as u64 || db != recv_db {
        return Err(what(format!(
            "the private doorbell record (recv_db {recv_db:#x}, db {db:#x}) is not mlx5dv_rwq's ({:#x}): not the \
             struct mlx5_rwq of {release}",
            dv.dbrec
        )));
    }
    let cnt = u32_at(&b, l.rq + w.wqe_cnt);
    if cnt != dv.wqe_cnt {
        return Err(what(format!("the private rq.wqe_cnt {cnt} is not mlx5dv_rwq's ({})", dv.wqe_cnt)));
    }
    if !cnt.is_power_of_two() || cnt > 1 << 16 {
        return Err(what(format!("rq.wqe_cnt {cnt} is not a power of two up to 65536")));
    }
    let shift = u32_at(&b, l.rq + w.wqe_shift);
    if shift >= 32 || 1u32 << shift != dv.stride {
        return Err(what(format!("rq.wqe_shift {shift} does not give mlx5dv_rwq's stride {}", dv.stride)));
    }
    let (pbuff, buf) = (u64_at(&b, l.pbuff), u64_at(&b, l.buf));
    let expect = buf.wrapping_add(u64::from(u32_at(&b, l.rq + w.offset)));
    if pbuff != dv.buf as u64 || pbuff != expect {
        return Err(what(format!(
            "the private WQE buffer (pbuff {pbuff:#x}, buf + rq.offset {expect:#x}) is not mlx5dv_rwq's ({:#x})",
            dv.buf
        )));
    }
    let (head, tail) = (u32_at(&b, l.rq + w.head), u32_at(&b, l.rq + w.tail));
    if head.wrapping_sub(tail) > cnt {
        return Err(what(format!("rq.head {head} and rq.tail {tail} hold more than its {cnt} entries")));
    }
    let wrid = u64_at(&b, l.rq + w.wrid);
    if wrid == 0 || wrid % 8 != 0 {
        return Err(what(format!("the wr_id table pointer {wrid:#x} is null or misaligned")));
    }
    let rq = RdmaCoreWq {
        wq: base.wrapping_add(l.rq),
        wrid: wrid as usize as *const u64,
        wqe_head: core::ptr::null(),
        wr_data: core::ptr::null(),
        wqe_cnt: cnt,
        layout: *w,
    };
    Ok(PrivateRwq { wqn, uidx, wqe_cnt: cnt, rq })
}
