//! The mlx5 attach's FFI and its looks into rdma-core's private memory: `mlx5dv_init_obj`
//! (rdma-core `providers/mlx5/mlx5.c`) for the public facts of a CQ and a QP, and
//! the private `struct mlx5_qp` (`providers/mlx5/mlx5.h`) around an `ibv_qp`, read at the offsets of the layout row
//! for the rdma-core release loaded (`dvcq_uapi::mlx5::rdma_core`) and checked against
//! those public facts before any of its pointers is trusted.
//!
//! The adopted queues' wr_id tables and tails stay in rdma-core's memory:
//! [`RdmaCoreWq`] reads and writes them for the registry's mirror
//! ([`dvcq_mlx5_dv::ForeignWq`]), once per poll call.
//!
//! Arming an attached CQ goes through dvcq's own doorbells (rdma-core's `mlx5_arm_cq` would
//! send its `cq->cons_index`, which dvcq's poll never advances): the record's arm word and
//! the UAR page `mlx5dv_init_obj` reports (MMIO), with the sequence number read from the
//! private `struct mlx5_cq`'s `arm_sn` ([`RdmaCoreCq`]).

use super::allocation::allocation_holds;
use super::cq::VerbsCq;
use super::device::Context;
use super::ffi;
use core::mem::{offset_of, size_of};
use core::sync::atomic::{AtomicU32, Ordering};
use dvcq_mlx5_dv::ArmDoorbell;
use dvcq_mlx5_dv::{CompLayout, CompressionConfig, CqConfig, ForeignWq, Mlx5Cq, Registry};
use dvcq_provider::{
    CqRing, DoorbellRegister, DoorbellWord, Error as ProviderError, KeepAlive, MemoryRegion, WqBuffer,
};
use dvcq_uapi::mlx5::doorbell::{ARM_DB, CMD_REQ_NOT, CMD_REQ_NOT_SOL, UAR_CQ_DOORBELL};
use dvcq_uapi::mlx5::rdma_core::{
    Mlx5Layout, Mlx5WqLayout, IBV_CQ_CHANNEL_OFFSET, IBV_CQ_EX_SIZE, IBV_QP_QP_NUM_OFFSET, IBV_QP_SIZE, IBV_SRQ_SIZE,
    MLX5DV_QP_EX_SIZE, MLX5_CQ_FLAGS_DV_OWNED, MLX5_RSC_TYPE_QP,
};
use ring::{cq_config, Created, Ring};
use static_assertions::const_assert_eq;
use std::sync::Arc;

pub(crate) mod own;
pub(crate) mod ring;
pub(crate) mod rwq;
pub(crate) mod srq;

#[cfg(test)]
pub(crate) use rwq::DvRwq;
pub(crate) use rwq::{init_rwq, read_rwq, PrivateRwq};
#[cfg(test)]
pub(crate) use srq::DvSrq;
pub(crate) use srq::{init_srq, read_srq, PrivateSrq, RdmaCoreSrq};

// The table's view of the public structs, tied to the headers this build read. The table
// is x86_64's (`Mlx5Layout::for_release` has no row elsewhere).
#[cfg(target_arch = "x86_64")]
const_assert_eq!(IBV_QP_SIZE, size_of::<ffi::ibv_qp>());
const_assert_eq!(IBV_QP_QP_NUM_OFFSET, offset_of!(ffi::ibv_qp, qp_num));
#[cfg(target_arch = "x86_64")]
const_assert_eq!(MLX5DV_QP_EX_SIZE, size_of::<ffi::mlx5dv_qp_ex>());
#[cfg(target_arch = "x86_64")]
const_assert_eq!(IBV_SRQ_SIZE, size_of::<ffi::ibv_srq>());
#[cfg(target_arch = "x86_64")]
const_assert_eq!(IBV_CQ_EX_SIZE, size_of::<ffi::ibv_cq_ex>());
const_assert_eq!(IBV_CQ_CHANNEL_OFFSET, offset_of!(ffi::ibv_cq, channel));
// The arm doorbell dvcq rings, against mlx5dv.h: the CQ doorbell's offset in the UAR page
// and the two commands.
const_assert_eq!(UAR_CQ_DOORBELL as u64, ffi::MLX5_CQ_DOORBELL as u64);
const_assert_eq!(CMD_REQ_NOT as u64, ffi::MLX5_CQ_DB_REQ_NOT as u64);
const_assert_eq!(CMD_REQ_NOT_SOL as u64, ffi::MLX5_CQ_DB_REQ_NOT_SOL as u64);
// The public QP fields an image or the private struct's copy is read at.
pub(crate) const IBV_QP_SEND_CQ: usize = offset_of!(ffi::ibv_qp, send_cq);
pub(crate) const IBV_QP_RECV_CQ: usize = offset_of!(ffi::ibv_qp, recv_cq);
pub(crate) const IBV_QP_SRQ: usize = offset_of!(ffi::ibv_qp, srq);
#[cfg(test)]
pub(crate) const IBV_QP_CONTEXT: usize = offset_of!(ffi::ibv_qp, context);
pub(crate) const IBV_QP_TYPE: usize = offset_of!(ffi::ibv_qp, qp_type);
const_assert_eq!(IBV_QP_SEND_CQ, 24);
const_assert_eq!(IBV_QP_RECV_CQ, 32);
const_assert_eq!(IBV_QP_SRQ, 40);
const_assert_eq!(IBV_QP_TYPE, 60);

/// `MLX5DV_CONTEXT_FLAGS_CQE_V1` (`enum mlx5dv_context_flags`, mlx5dv.h): CQEs name
/// their resource by user index.
pub(crate) const MLX5DV_CONTEXT_FLAGS_CQE_V1: u64 = 1 << 0;

/// What `mlx5dv_init_obj(MLX5DV_OBJ_CQ)` says about a CQ (`struct mlx5dv_cq`, filled by
/// `mlx5dv_get_cq`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DvCq {
    /// The ring.
    pub(crate) buf: *mut u8,
    /// The doorbell record (set_ci word first).
    pub(crate) dbrec: *mut u8,
    /// Ring slots (a power of two).
    pub(crate) cqe_cnt: u32,
    /// 64 or 128.
    pub(crate) cqe_size: u32,
    /// The CQ number.
    pub(crate) cqn: u32,
    /// The UAR page the CQ's arm doorbell is in (at +0x20), for dvcq's own arming.
    pub(crate) uar: *mut u8,
}

/// The UAR pages rdma-core maps are whole pages (`mmap` of one page of the device's BAR);
/// dvcq asks no more than this alignment of the address it is given.
pub(crate) const UAR_ALIGN: usize = 4096;

/// What `mlx5dv_init_obj(MLX5DV_OBJ_QP)` says about a QP (`struct mlx5dv_qp`, filled by
/// `mlx5dv_get_qp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DvQp {
    /// The doorbell record (receive word, then send word).
    pub(crate) dbrec: usize,
    /// Send WQEs.
    pub(crate) sq_buf: usize,
    /// Send queue entries.
    pub(crate) sq_wqe_cnt: u32,
    /// Send WQE stride.
    pub(crate) sq_stride: u32,
    /// Receive WQEs.
    pub(crate) rq_buf: usize,
    /// Receive queue entries.
    pub(crate) rq_wqe_cnt: u32,
    /// Receive WQE stride.
    pub(crate) rq_stride: u32,
}

/// `mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ)` on `cq`. rdma-core marks the CQ DV-owned
/// (`MLX5_CQ_FLAGS_DV_OWNED`), which turns off its cleaning of a destroyed QP's CQEs
/// (`__mlx5_cq_clean` returns at once): call it only through [`adopt_cq`], which checks
/// first and puts the flag back on refusal.
pub(crate) fn init_cq(cq: &VerbsCq) -> Result<DvCq, String> {
    super::loader::mlx5_loaded().map_err(|e| format!("mlx5dv_init_obj(MLX5DV_OBJ_CQ): {e}"))?;
    let mut out = ffi::mlx5dv_cq::default();
    let mut obj = ffi::mlx5dv_obj::default();
    obj.cq.in_ = cq.as_ptr();
    obj.cq.out = &mut out;
    // SAFETY: a live CQ; `obj` names it and an output struct that lives across the call.
    let rc = unsafe { ffi::mlx5dv_init_obj(&mut obj, u64::from(ffi::MLX5DV_OBJ_CQ)) };
    if rc != 0 {
        return Err(format!("mlx5dv_init_obj(MLX5DV_OBJ_CQ) failed ({})", std::io::Error::from_raw_os_error(rc.abs())));
    }
    Ok(DvCq {
        buf: out.buf.cast(),
        dbrec: out.dbrec.cast(),
        cqe_cnt: out.cqe_cnt,
        cqe_size: out.cqe_size,
        cqn: out.cqn,
        uar: out.cq_uar.cast(),
    })
}

/// `mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP)` on `qp`.
///
/// # Safety
///
/// `qp` is a live `ibv_qp` of an mlx5 context.
pub(crate) unsafe fn init_qp(qp: *mut ffi::ibv_qp) -> Result<DvQp, String> {
    super::loader::mlx5_loaded().map_err(|e| format!("mlx5dv_init_obj(MLX5DV_OBJ_QP): {e}"))?;
    let mut out = ffi::mlx5dv_qp::default();
    let mut obj = ffi::mlx5dv_obj::default();
    obj.qp.in_ = qp;
    obj.qp.out = &mut out;
    // SAFETY: the caller's live mlx5 QP; the output struct lives across the call.
    let rc = unsafe { ffi::mlx5dv_init_obj(&mut obj, u64::from(ffi::MLX5DV_OBJ_QP)) };
    if rc != 0 {
        return Err(format!("mlx5dv_init_obj(MLX5DV_OBJ_QP) failed ({})", std::io::Error::from_raw_os_error(rc.abs())));
    }
    Ok(DvQp {
        dbrec: out.dbrec as usize,
        sq_buf: out.sq.buf as usize,
        sq_wqe_cnt: out.sq.wqe_cnt,
        sq_stride: out.sq.stride,
        rq_buf: out.rq.buf as usize,
        rq_wqe_cnt: out.rq.wqe_cnt,
        rq_stride: out.rq.stride,
    })
}

/// Whether the context's CQEs are of version 1 (`mlx5dv_query_device`'s
/// `MLX5DV_CONTEXT_FLAGS_CQE_V1`).
pub(crate) fn cqe_version_1(ctx: &Context) -> Result<bool, String> {
    super::loader::mlx5_loaded().map_err(|e| format!("mlx5dv_query_device: {e}"))?;
    let mut attr = ffi::mlx5dv_context::default();
    // SAFETY: a live context and an output struct that lives across the call (`comp_mask` 0: only the basic fields are asked for).
    let rc = unsafe { ffi::mlx5dv_query_device(ctx.as_ptr(), &mut attr) };
    if rc != 0 {
        return Err(format!("mlx5dv_query_device failed ({})", std::io::Error::from_raw_os_error(rc.abs())));
    }
    Ok(attr.flags & MLX5DV_CONTEXT_FLAGS_CQE_V1 != 0)
}

/// One queue of an adopted QP in rdma-core's memory: its `struct mlx5_wq` and the tables
/// it points to. The poll thread reads `head`, `cur_post` and the table entries and writes
/// `tail`, as rdma-core's own poll does (without the CQ's lock, which nothing else takes
/// when dvcq is the CQ's one poller).
#[derive(Debug)]
pub(crate) struct RdmaCoreWq {
    wq: *mut u8,
    wrid: *const u64,
    wqe_head: *const u32,
    wr_data: *const u32,
    pub(crate) wqe_cnt: u32,
    layout: Mlx5WqLayout,
}

// SAFETY: the pointers are into rdma-core's QP, which any thread may use; a queue is read and written only by its Cq's poll (one `&mut` owner at a time).
unsafe impl Send for RdmaCoreWq {}

impl RdmaCoreWq {
    /// `idx` as a table slot, below `wqe_cnt` whatever the caller passes: `wqe_cnt` is a
    /// power of two (checked at attach), so the mask is rdma-core's own indexing and costs
    /// one `and` per table read (the reads happen once per posted work request, in the
    /// mirror's sync before a poll, not per CQE).
    #[inline(always)]
    fn slot(&self, idx: u32) -> usize {
        (idx & (self.wqe_cnt - 1)) as usize
    }

    fn word(&self, off: usize) -> &AtomicU32 {
        // SAFETY: `wq` is a live `struct mlx5_wq` of the row's layout (checked at attach; the QP outlives the Cq by `Cq::attach_qp`'s contract), `off` one of its 4-byte, 4-aligned `unsigned` fields. Other threads (a poster) touch it only with plain word accesses; an atomic view of the word is how Rust reads such shared memory.
        unsafe { AtomicU32::from_ptr(self.wq.add(off).cast::<u32>()) }
    }
}

impl ForeignWq for RdmaCoreWq {
    fn wqe_cnt(&self) -> u32 {
        self.wqe_cnt
    }
    fn head(&self) -> u32 {
        // Acquire: the entries a post wrote before moving `head` are read after.
        self.word(self.layout.head).load(Ordering::Acquire)
    }
    fn cur_post(&self) -> u32 {
        self.word(self.layout.cur_post).load(Ordering::Acquire)
    }
    fn tail(&self) -> u32 {
        self.word(self.layout.tail).load(Ordering::Relaxed)
    }
    fn wr_id(&self, idx: u32) -> u64 {
        let idx = self.slot(idx);
        // SAFETY: `wrid` is the queue's table of `wqe_cnt` entries (non-null and aligned, checked at attach) and `slot` keeps `idx < wqe_cnt`; a poster writes an entry only for a slot that is free, which the mirror does not use until the entry's post is visible (read after `head`/`cur_post` with acquire).
        unsafe { self.wrid.add(idx).read_volatile() }
    }
    fn wqe_head(&self, idx: u32) -> u32 {
        let idx = self.slot(idx);
        if self.wqe_head.is_null() {
            // A receive queue has no such table (the registry never asks for it).
            return 0;
        }
        // SAFETY: as `wr_id`, for the send queue's `wqe_head` table of `wqe_cnt` entries.
        unsafe { self.wqe_head.add(idx).read_volatile() }
    }
    fn wr_data(&self, idx: u32) -> u32 {
        let idx = self.slot(idx);
        if self.wr_data.is_null() {
            return 0;
        }
        // SAFETY: as `wr_id`, for the send queue's `wr_data` table of `wqe_cnt` entries.
        unsafe { self.wr_data.add(idx).read_volatile() }
    }
    fn set_tail(&self, tail: u32) {
        // Release: the table entries read for the completions happen-before a post reuses
        // their slots.
        self.word(self.layout.tail).store(tail, Ordering::Release);
    }
}

/// What an adopted QP's private struct gave, checked against its public facts.
#[derive(Debug)]
pub(crate) struct PrivateQp {
    /// `ibv_qp.qp_num`.
    pub(crate) qpn: u32,
    /// `rsc.rsn`: the user index on a CQE-version-1 context.
    pub(crate) rsn: u32,
    /// `ibv_qp.qp_type` (`enum ibv_qp_type`).
    pub(crate) qp_type: u32,
    /// The send queue, when it completes on the CQ being attached and has entries.
    pub(crate) sq: Option<RdmaCoreWq>,
    /// The receive queue, likewise.
    pub(crate) rq: Option<RdmaCoreWq>,
    /// `sq.wqe_cnt` and `rq.wqe_cnt` as rdma-core has them.
    pub(crate) wqe_cnt: (u32, u32),
    /// The send and receive WQE buffers (`mlx5dv_qp`), with the receive stride, for
    /// inline scatter, when their queues complete here.
    pub(crate) sq_wqes: Option<WqBuffer>,
    pub(crate) rq_wqes: Option<(WqBuffer, u32)>,
    /// The `ibv_srq` its receives come from (`ibv_qp.srq`), when they complete here.
    pub(crate) srq: Option<usize>,
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes(b[off..off + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_ne_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}

/// Reads the `struct mlx5_qp` around `qp` with `layout` and checks it against `dv` (what
/// `mlx5dv_init_obj` reported), `ctx` (the context the CQ belongs to), `cq` (the CQ being
/// attached) and `cqe_v1` (the context's CQE version). Returns the queues that complete
/// on `cq`, or the first check that failed.
///
/// Checks, in order: the QP's context and CQs (public `ibv_qp` fields), then the private
/// struct: its pointer back to the `ibv_qp`, `rsc.type`, the doorbell record and
/// each queue's `wqe_cnt`, stride and buffer address against `dv`, the user index (equal
/// to the QPN on a version-0 context), and the table pointers (non-null, aligned).
///
/// # Safety
///
/// `qp` is a live `ibv_qp` made by rdma-core's mlx5 provider (so it sits inside a
/// `struct mlx5_qp`, `calloc`ed, at `layout.qp.ibv_qp`), and `layout` is the row of the
/// rdma-core release loaded (the allocation's usable size is checked to hold the row
/// before it is read).
pub(crate) unsafe fn read_qp(
    qp: *mut ffi::ibv_qp,
    dv: &DvQp,
    layout: &Mlx5Layout,
    ctx: *mut ffi::ibv_context,
    cq: *mut ffi::ibv_cq,
    cqe_v1: bool,
) -> Result<PrivateQp, String> {
    let (l, w) = (&layout.qp, &layout.wq);
    // The public fields first, read where the application reads them, before any private
    // byte is touched.
    // SAFETY: the caller's live QP; reads of its public fields.
    let public = unsafe { ((*qp).qp_num, (*qp).context, (*qp).send_cq, (*qp).recv_cq) };
    let (qpn, qp_ctx, send_cq, recv_cq) = (public.0, public.1 as u64, public.2 as u64, public.3 as u64);
    let what = |s: String| format!("qp {qpn:#x}: {s}");
    if qp_ctx != ctx as u64 {
        return Err(what("it belongs to another device context".into()));
    }
    if send_cq != cq as u64 && recv_cq != cq as u64 {
        return Err(what(format!(
            "neither its send CQ ({send_cq:#x}) nor its receive CQ ({recv_cq:#x}) is the attached CQ ({:#x})",
            cq as u64
        )));
    }
    let release = format!("rdma-core v{}.{}-v{}.{}", layout.first.0, layout.first.1, layout.last.0, layout.last.1);
    let base = (qp as *mut u8).wrapping_sub(l.ibv_qp);
    // SAFETY: the caller's promise: `base` starts the `calloc`ed `struct mlx5_qp` of this QP.
    unsafe { allocation_holds(base, l.size, &release) }.map_err(|e| what(format!("{e}: not the struct mlx5_qp")))?;
    let mut b = vec![0u8; l.size];
    // SAFETY: the allocation holds `l.size` bytes from `base` (checked above), the live `struct mlx5_qp` of this QP. A plain byte copy; the fields read from it are checked before any pointer in it is used.
    unsafe { core::ptr::copy_nonoverlapping(base, b.as_mut_ptr(), l.size) };
    let pub_field = |off: usize| l.ibv_qp + off;
    let srq = u64_at(&b, pub_field(IBV_QP_SRQ)) as usize;
    let back = u64_at(&b, l.ibv_qp_ptr);
    if back != qp as u64 {
        return Err(what(format!(
            "the private struct's ibv_qp pointer is {back:#x}, not the QP ({:#x}): not the struct mlx5_qp of {release}",
            qp as u64
        )));
    }
    let rsc_type = u32_at(&b, l.rsc_type);
    if rsc_type != MLX5_RSC_TYPE_QP {
        return Err(what(format!("rsc.type is {rsc_type}, not MLX5_RSC_TYPE_QP ({MLX5_RSC_TYPE_QP})")));
    }
    let db = u64_at(&b, l.db);
    if db != dv.dbrec as u64 {
        return Err(what(format!("the private doorbell record {db:#x} is not mlx5dv_qp's ({:#x})", dv.dbrec)));
    }
    let rsn = u32_at(&b, l.rsn);
    if !cqe_v1 && rsn != qpn {
        return Err(what(format!("rsc.rsn {rsn:#x} is not the QPN on a CQE-version-0 context")));
    }
    if cqe_v1 && rsn > dvcq_uapi::mlx5::cqe::QPN_MASK {
        return Err(what(format!("the user index rsc.rsn {rsn:#x} is wider than 24 bits")));
    }
    let buf = u64_at(&b, l.buf);
    let sq_buf = if u32_at(&b, l.sq_buf_size) != 0 {
        u64_at(&b, l.sq_buf)
    } else {
        buf.wrapping_add(u64::from(u32_at(&b, l.sq + w.offset)))
    };
    if u64_at(&b, l.sq_start) != sq_buf {
        return Err(what(format!("sq_start {:#x} is not the send buffer {sq_buf:#x}", u64_at(&b, l.sq_start))));
    }
    let queue = |name: &str, at: usize, dv_cnt: u32, dv_stride: u32, dv_buf: usize, expect_buf: u64, send: bool| {
        let cnt = u32_at(&b, at + w.wqe_cnt);
        if cnt != dv_cnt {
            return Err(what(format!("the private {name}.wqe_cnt {cnt} is not mlx5dv_qp's ({dv_cnt})")));
        }
        if cnt == 0 {
            return Ok((0, None));
        }
        if !cnt.is_power_of_two() || cnt > 1 << 16 {
            return Err(what(format!("{name}.wqe_cnt {cnt} is not a power of two up to 65536")));
        }
        let shift = u32_at(&b, at + w.wqe_shift);
        if shift >= 32 || 1u32 << shift != dv_stride {
            return Err(what(format!("{name}.wqe_shift {shift} does not give mlx5dv_qp's stride {dv_stride}")));
        }
        if expect_buf != dv_buf as u64 {
            return Err(what(format!("the private {name} buffer {expect_buf:#x} is not mlx5dv_qp's ({dv_buf:#x})")));
        }
        let wrid = u64_at(&b, at + w.wrid);
        let wqe_head = if send { u64_at(&b, at + w.wqe_head) } else { 0 };
        let wr_data = if send { u64_at(&b, at + w.wr_data) } else { 0 };
        let bad = |p: u64, align: u64| p == 0 || p % align != 0;
        if bad(wrid, 8) || (send && (bad(wqe_head, 4) || bad(wr_data, 4))) {
            return Err(what(format!(
                "{name}'s tables (wrid {wrid:#x}, wqe_head {wqe_head:#x}, wr_data {wr_data:#x}) are null or misaligned"
            )));
        }
        let wq = RdmaCoreWq {
            wq: base.wrapping_add(at),
            wrid: wrid as usize as *const u64,
            wqe_head: if send { wqe_head as usize as *const u32 } else { core::ptr::null() },
            wr_data: if send { wr_data as usize as *const u32 } else { core::ptr::null() },
            wqe_cnt: cnt,
            layout: *w,
        };
        Ok((cnt, Some(wq)))
    };
    let (sq_cnt, sq) = queue("sq", l.sq, dv.sq_wqe_cnt, dv.sq_stride, dv.sq_buf, sq_buf, true)?;
    let rq_buf = buf.wrapping_add(u64::from(u32_at(&b, l.rq + w.offset)));
    let (rq_cnt, rq) = queue("rq", l.rq, dv.rq_wqe_cnt, dv.rq_stride, dv.rq_buf, rq_buf, false)?;
    let qp_type = u32_at(&b, pub_field(IBV_QP_TYPE));
    if srq != 0 && rq_cnt != 0 {
        return Err(what(format!("it receives from an SRQ but has a receive queue of {rq_cnt} entries")));
    }
    let srq = (srq != 0 && recv_cq == cq as u64).then_some(srq);
    let (sq, rq) = (sq.filter(|_| send_cq == cq as u64), rq.filter(|_| recv_cq == cq as u64));
    let wqes = |buf: usize, len: usize| {
        // SAFETY: `mlx5dv_qp` reported `buf` as the queue's WQEs, `len` bytes (`wqe_cnt` times the stride, both checked against the private struct), mapped while the QP lives, which the caller keeps for the poller's life. rdma-core's posts write them only on the polling thread or ordered with its polls (`Cq::attach_qp`'s contract); the poll never trusts their bytes.
        unsafe { WqBuffer::new(buf as *mut u8, len) }.map_err(|e| what(format!("WQE buffer: {e}")))
    };
    let sq_wqes = match &sq {
        Some(_) => Some(wqes(dv.sq_buf, sq_cnt as usize * dv.sq_stride as usize)?),
        None => None,
    };
    let rq_wqes = match &rq {
        Some(_) => Some((wqes(dv.rq_buf, rq_cnt as usize * dv.rq_stride as usize)?, dv.rq_stride)),
        None => None,
    };
    Ok(PrivateQp { qpn, rsn, qp_type, sq, rq, wqe_cnt: (sq_cnt, rq_cnt), sq_wqes, rq_wqes, srq })
}

/// rdma-core's `struct mlx5_cq` around an attached CQ: where its `arm_sn` and `flags` are.
///
/// # Why dvcq reads rdma-core's `arm_sn` rather than count events itself
///
/// The device takes an arm whose sequence number is the count of completion events
/// delivered so far, and the software side of that count is `arm_sn`, which rdma-core's
/// `mlx5_cq_event` advances. libibverbs calls it from `ibv_get_cq_event` (through the
/// provider's `cq_event` op) for every event read from the channel, whoever reads it:
/// dvcq's [`crate::CompletionChannel`], or the application with its own
/// `ibv_get_cq_event`. So the field is already right after every event, and dvcq never
/// writes it: writing it too would count each event twice. A counter of dvcq's own would
/// start wrong on a CQ the application armed and took events from before the attach, and
/// would miss every event the application reads itself. So each of dvcq's arms reads
/// `arm_sn` just before it (the poller's [`dvcq_mlx5_dv::Mlx5Cq::set_arm_sn`]); only the
/// consumer index comes from dvcq's poller, as rdma-core's `cons_index` is stale once dvcq
/// polls (`mlx5_arm_cq` would send it).
///
/// No public value tells `arm_sn` itself (it is any count of events), so its offset is
/// checked through its neighbour: `cqe_sz`, the `int` right after it in every release
/// read, is what `mlx5dv_init_obj` reports as `mlx5dv_cq.cqe_size` ([`read_cq`]).
///
/// # `MLX5_CQ_FLAGS_DV_OWNED`
///
/// `mlx5dv_init_obj` sets it in `flags`, and rdma-core then leaves the CQEs of a destroyed
/// QP in the ring. [`adopt_cq`] notes whether the attach set it (it was clear before and
/// the word at the row's `flags` offset gained exactly that bit across the call), and
/// [`RdmaCoreCq::give_back`] clears it again when the attach refuses or hands the CQ to
/// rdma-core's `ibv_poll_cq`.
#[derive(Debug)]
pub(crate) struct RdmaCoreCq {
    arm_sn: *mut u8,
    flags: *mut u8,
    /// `cons_index` (null where the attach refused), written only by [`RdmaCoreCq::set_cons_index`].
    cons_index: *mut u8,
    /// The attach set `MLX5_CQ_FLAGS_DV_OWNED` (and located `flags` by seeing it change).
    set_dv_owned: bool,
}

// SAFETY: pointers into rdma-core's CQ, which any thread may use; they are only read (and `flags` cleared once, when no poll runs), by the Cq's one `&mut` owner.
unsafe impl Send for RdmaCoreCq {}

impl RdmaCoreCq {
    /// `arm_sn` now.
    pub(crate) fn arm_sn(&self) -> u32 {
        // SAFETY: `arm_sn` is the 4-byte, 4-aligned `int` of a live `struct mlx5_cq` of the row's layout (checked at attach; the CQ outlives the Cq by `Cq::attach`'s contract). rdma-core writes it with a plain store in `ibv_get_cq_event`, on the thread that reads the channel, which `Cq::wait` orders before its next arm (the channel's router lock) as an application's own loop orders them; an atomic view of the word is how Rust reads such shared memory.
        unsafe { AtomicU32::from_ptr(self.arm_sn.cast::<u32>()) }.load(Ordering::Acquire)
    }

    /// Whether the attach set `MLX5_CQ_FLAGS_DV_OWNED` on the CQ (still set: not given back).
    #[cfg(test)]
    pub(crate) fn set_dv_owned(&self) -> bool {
        self.set_dv_owned
    }

    /// Sets rdma-core's `cons_index` to `ci`, dvcq's consumer counter, so that rdma-core's own
    /// poll, arm and resize go on from the entry dvcq polls next. Call it only while no poll
    /// of the CQ runs, as the CQ goes back to rdma-core. Returns whether it wrote.
    pub(crate) fn set_cons_index(&mut self, ci: u32) -> bool {
        if self.cons_index.is_null() {
            return false;
        }
        // SAFETY: `cons_index` is the 4-aligned `uint32_t` of the live `struct mlx5_cq` at the row's offset, the row checked at attach (the `cqn` before it matched `mlx5dv_init_obj`'s). rdma-core writes it only inside its poll, resize and create, none of which runs on this CQ now (the caller's condition); an atomic view of the word is how Rust writes such shared memory.
        unsafe { AtomicU32::from_ptr(self.cons_index.cast::<u32>()) }.store(ci, Ordering::Release);
        true
    }

    /// Catches the doorbell record up with rdma-core's `cons_index` when it is exactly one
    /// ahead: `ibv_resize_cq` consumes the RESIZE CQE in the old ring (libmlx5's
    /// `mlx5_cq_resize_copy_cqes` ends with `++cq->cons_index`) without writing the record,
    /// which rdma-core's next poll would do. The poller starts at the record's counter, so
    /// an attach after a resize would otherwise wait on the slot of that CQE in the new ring,
    /// which nothing writes. Any other difference is left alone (after dvcq polled, the
    /// record is ahead of a stale `cons_index`).
    pub(crate) fn publish_resize(&self, dv: &DvCq) {
        if self.cons_index.is_null() || dv.dbrec.is_null() || dv.dbrec as usize % 4 != 0 {
            return;
        }
        // SAFETY: `cons_index` is the 4-aligned `uint32_t` of the live `struct mlx5_cq` at the row's offset (checked at attach); rdma-core writes it only inside its poll, resize and create, none of which runs on this CQ during an attach (`Cq::attach`'s contract).
        let cons = unsafe { AtomicU32::from_ptr(self.cons_index.cast::<u32>()) }.load(Ordering::Acquire);
        // SAFETY: `dbrec` is the CQ's doorbell record `mlx5dv_init_obj` reported (non-null and 4-aligned, checked above), mapped by rdma-core for the CQ's life; its first word is the big-endian `set_ci`, which only the CQ's poller writes (rdma-core's, not running during the attach, or dvcq's, not yet opened).
        let set_ci = unsafe { AtomicU32::from_ptr(dv.dbrec.cast::<u32>()) };
        let rec = u32::from_be(set_ci.load(Ordering::Acquire)) & 0x00ff_ffff;
        if cons.wrapping_sub(rec) & 0x00ff_ffff == 1 {
            set_ci.store((cons & 0x00ff_ffff).to_be(), Ordering::Release);
        }
    }

    /// Clears `MLX5_CQ_FLAGS_DV_OWNED` again if the attach set it, so that rdma-core's
    /// `ibv_poll_cq`, taking the CQ over, cleans the CQEs of destroyed QPs as before the
    /// attach. Returns whether it cleared the bit. Call it only while no poll of the CQ
    /// runs (a refused attach, or the hand-over to the generic backend).
    pub(crate) fn give_back(&mut self) -> bool {
        if !std::mem::take(&mut self.set_dv_owned) {
            return false;
        }
        // SAFETY: `flags` is the 4-aligned `uint32_t` of the live `struct mlx5_cq`, located by seeing `mlx5dv_init_obj` set exactly this bit in it (`adopt_cq`). rdma-core writes the word only inside its poll, create and `mlx5dv_init_obj`, none of which runs on this CQ now (`Cq::attach`'s contract); an atomic view of the word is how Rust writes such shared memory.
        let flags = unsafe { AtomicU32::from_ptr(self.flags.cast::<u32>()) };
        flags.fetch_and(!MLX5_CQ_FLAGS_DV_OWNED, Ordering::AcqRel);
        true
    }
}

/// The CQE sizes rdma-core's mlx5 provider makes.
fn cqe_size_known(sz: u32) -> bool {
    matches!(sz, 64 | 128)
}

/// What [`check_cq_before`] saw: the `flags` word before `mlx5dv_init_obj`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CqBefore {
    /// `flags` as the application's CQ had it.
    pub(crate) flags: u32,
}

/// Reads the `struct mlx5_cq` at `cq` with `layout` before anything changes it, and checks
/// it against itself and the public `ibv_cq`: the allocation holds the row, the public
/// `cqe` gives a ring size, `active_buf` points at its own `buf_a` or `buf_b`, whose
/// address is a page-aligned ring, `cqe_sz` is 64 or 128 and the doorbell record is set.
/// Every check that can refuse without `mlx5dv_init_obj` is here, so a refusal leaves the
/// CQ untouched.
///
/// # Safety
///
/// As [`read_cq`].
pub(crate) unsafe fn check_cq_before(cq: *mut ffi::ibv_cq, layout: &Mlx5Layout) -> Result<CqBefore, String> {
    let l = &layout.cq;
    let base = cq.cast::<u8>();
    let release = format!("rdma-core v{}.{}-v{}.{}", layout.first.0, layout.first.1, layout.last.0, layout.last.1);
    let what = |s: String| format!("cq {:p}: {s}: not the struct mlx5_cq of {release}", cq);
    // SAFETY: the caller's live CQ; a read of its public `cqe` field.
    let cqe = unsafe { (*cq).cqe };
    let ring_size = u32::try_from(cqe).ok().and_then(|c| c.checked_add(1));
    if !ring_size.is_some_and(crate::uapi::mlx5::cq_size::is_ring_size) {
        return Err(format!("cq {cq:p}: ibv_cq.cqe {cqe} + 1 is not a ring size of rdma-core's mlx5 provider"));
    }
    // SAFETY: the caller's promise: `cq` starts a `struct mlx5_cq` that rdma-core's mlx5 provider `calloc`ed.
    unsafe { allocation_holds(base, l.size, &release) }.map_err(what)?;
    let mut b = vec![0u8; l.size];
    // SAFETY: the allocation holds `l.size` bytes from `base` (checked above), the live `struct mlx5_cq`. A plain byte copy; nothing in it is trusted before the checks below.
    unsafe { core::ptr::copy_nonoverlapping(base, b.as_mut_ptr(), l.size) };
    let active = u64_at(&b, l.active_buf);
    let Some(at) = [l.buf_a, l.buf_b].into_iter().find(|&off| active == base.wrapping_add(off) as u64) else {
        return Err(what(format!("active_buf {active:#x} is neither its buf_a nor its buf_b")));
    };
    let ring = u64_at(&b, at);
    if ring == 0 || ring % 4096 != 0 {
        return Err(what(format!("the active buffer's address {ring:#x} is not a page-aligned ring")));
    }
    let cqe_sz = u32_at(&b, l.cqe_sz);
    if !cqe_size_known(cqe_sz) {
        return Err(what(format!("cqe_sz (after arm_sn) is {cqe_sz}, neither 64 nor 128")));
    }
    if u64_at(&b, l.dbrec) == 0 {
        return Err(what("the doorbell record pointer is null".into()));
    }
    Ok(CqBefore { flags: u32_at(&b, l.flags) })
}

/// The attach's look into the application's mlx5 CQ, in the order that leaves it as it was
/// when a check refuses: [`check_cq_before`], then `init` (`mlx5dv_init_obj`, which sets
/// `MLX5_CQ_FLAGS_DV_OWNED`), then the word at the row's `flags` offset must have gained
/// exactly that bit (which locates it), then [`read_cq`]'s checks against what `init`
/// reported. A refusal after `init` clears the bit again if the attach set it.
///
/// # Safety
///
/// As [`read_cq`]; `init` is `mlx5dv_init_obj` on `cq` (or, in tests, its effect on an
/// image).
pub(crate) unsafe fn adopt_cq(
    cq: *mut ffi::ibv_cq,
    layout: &Mlx5Layout,
    init: impl FnOnce() -> Result<DvCq, String>,
) -> Result<(DvCq, RdmaCoreCq), String> {
    // SAFETY: the caller's promise, passed on.
    let before = unsafe { check_cq_before(cq, layout) }?;
    let dv = init()?;
    let flags_at = cq.cast::<u8>().wrapping_add(layout.cq.flags);
    // SAFETY: inside the allocation (`check_cq_before` checked it holds the row), 4-aligned; nothing writes the CQ now.
    let now = unsafe { AtomicU32::from_ptr(flags_at.cast::<u32>()) }.load(Ordering::Acquire);
    if now != before.flags | MLX5_CQ_FLAGS_DV_OWNED {
        return Err(format!(
            "cq {:#x}: the private flags word went from {:#x} to {now:#x} across mlx5dv_init_obj, not gaining \
             MLX5_CQ_FLAGS_DV_OWNED alone: not the struct mlx5_cq of rdma-core v{}.{}-v{}.{}",
            dv.cqn, before.flags, layout.first.0, layout.first.1, layout.last.0, layout.last.1
        ));
    }
    // SAFETY: the caller's promise, passed on.
    let mut private = unsafe { read_cq(cq, &dv, layout) };
    match &mut private {
        Ok(p) => p.set_dv_owned = before.flags & MLX5_CQ_FLAGS_DV_OWNED == 0,
        Err(_) => {
            let mut located = RdmaCoreCq {
                arm_sn: core::ptr::null_mut(),
                flags: flags_at,
                cons_index: core::ptr::null_mut(),
                set_dv_owned: before.flags & MLX5_CQ_FLAGS_DV_OWNED == 0,
            };
            located.give_back();
        }
    }
    private.map(|p| (dv, p))
}

/// Reads the `struct mlx5_cq` around `cq` with `layout` and checks it against `dv` (what
/// `mlx5dv_init_obj` reported): its `cqn`, its doorbell record pointer, its active
/// buffer (`active_buf` is `&buf_a` or `&buf_b`, whose address is `mlx5dv_cq.buf`) and
/// `cqe_sz` (after `arm_sn`, `mlx5dv_cq.cqe_size`). Returns where `arm_sn` and `flags`
/// are, or the first check that failed.
///
/// # Safety
///
/// `cq` is a live `ibv_cq` made by rdma-core's mlx5 provider (so it starts a `struct
/// mlx5_cq`, allocated with `calloc`), and `layout` is the row of the rdma-core release
/// loaded.
pub(crate) unsafe fn read_cq(cq: *mut ffi::ibv_cq, dv: &DvCq, layout: &Mlx5Layout) -> Result<RdmaCoreCq, String> {
    let l = &layout.cq;
    let base = cq.cast::<u8>();
    let release = format!("rdma-core v{}.{}-v{}.{}", layout.first.0, layout.first.1, layout.last.0, layout.last.1);
    let what = |s: String| format!("cq {:#x}: {s}: not the struct mlx5_cq of {release}", dv.cqn);
    // SAFETY: the caller's promise: `cq` starts a `calloc`ed `struct mlx5_cq`.
    unsafe { allocation_holds(base, l.size, &release) }.map_err(what)?;
    let mut b = vec![0u8; l.size];
    // SAFETY: the allocation holds `l.size` bytes from `base` (checked above), the live `struct mlx5_cq`. A plain byte copy; the fields read from it are checked before its pointers are kept.
    unsafe { core::ptr::copy_nonoverlapping(base, b.as_mut_ptr(), l.size) };
    let cqn = u32_at(&b, l.cqn);
    if cqn != dv.cqn {
        return Err(what(format!("the private cqn is {cqn:#x}, not mlx5dv_cq's")));
    }
    let dbrec = u64_at(&b, l.dbrec);
    if dbrec != dv.dbrec as u64 {
        return Err(what(format!("the private doorbell record {dbrec:#x} is not mlx5dv_cq's ({:p})", dv.dbrec)));
    }
    let active = u64_at(&b, l.active_buf);
    let at = [l.buf_a, l.buf_b].into_iter().find(|&off| active == base.wrapping_add(off) as u64);
    let Some(at) = at else {
        return Err(what(format!("active_buf {active:#x} is neither its buf_a nor its buf_b")));
    };
    let ring = u64_at(&b, at);
    if ring != dv.buf as u64 {
        return Err(what(format!("the active buffer's address {ring:#x} is not mlx5dv_cq.buf ({:p})", dv.buf)));
    }
    let cqe_sz = u32_at(&b, l.cqe_sz);
    if cqe_sz != dv.cqe_size {
        return Err(what(format!(
            "cqe_sz (after arm_sn) is {cqe_sz}, not mlx5dv_cq.cqe_size ({}): arm_sn is not where the row says",
            dv.cqe_size
        )));
    }
    Ok(RdmaCoreCq {
        arm_sn: base.wrapping_add(l.arm_sn),
        flags: base.wrapping_add(l.flags),
        cons_index: base.wrapping_add(l.cons_index),
        set_dv_owned: false,
    })
}

/// The CQ side of the attach, in the order that leaves the application's CQ as it was on
/// refusal: [`adopt_cq`] (every check that can refuse before `init`,
/// `mlx5dv_init_obj`, runs first), then the checks against what `init` reported and the
/// poller opened on it; a refusal after `init` clears `MLX5_CQ_FLAGS_DV_OWNED` again if
/// the attach set it. Returns the poller, rdma-core's CQ struct and `init`'s facts.
///
/// # Safety
///
/// `cq` is a live `ibv_cq` of the mlx5 provider (a `calloc`ed `struct mlx5_cq`) of depth
/// `depth`, `layout` the row of the provider's release, `init` `mlx5dv_init_obj` on it,
/// and `keep` keeps the CQ and its context alive.
pub(crate) unsafe fn attach_ring(
    cq: *mut ffi::ibv_cq,
    depth: u32,
    layout: &'static Mlx5Layout,
    cqe_v1: bool,
    created: Option<Created>,
    init: impl FnOnce() -> Result<DvCq, String>,
    keep: dvcq_provider::KeepAlive,
) -> Result<(Ring, RdmaCoreCq, DvCq), String> {
    // SAFETY: the caller's promise, passed on.
    let (dv, mut private) = unsafe { adopt_cq(cq, layout, init) }?;
    private.publish_resize(&dv);
    let opened = (|| {
        if dv.cqe_cnt != depth + 1 {
            return Err(format!("mlx5dv_cq.cqe_cnt {} is not the CQ's depth {depth} + 1", dv.cqe_cnt));
        }
        let mut cfg = cq_config(cqe_v1);
        if let Some(c) = created {
            if dv.cqe_size != u32::from(c.cqe_size) {
                return Err(format!(
                    "mlx5dv_cq.cqe_size {} is not the {} bytes mlx5dv_create_cq was asked for",
                    dv.cqe_size, c.cqe_size
                ));
            }
            cfg.compression = c.compression.map(|format| CompressionConfig { layout: CompLayout::Basic, format });
            cfg.overrun_ignore = c.ignore_overrun;
        }
        poller_on(&dv, keep, cfg)
    })();
    match opened {
        Ok(poller) => Ok((poller, private, dv)),
        Err(e) => {
            private.give_back();
            Err(e)
        }
    }
}

/// [`attach_ring`] on a CQ the mlx5 provider made: the attach's look into it and the
/// poller on its ring.
pub(crate) fn attach_verbs_cq(
    cq: &Arc<VerbsCq>,
    layout: &'static Mlx5Layout,
    cqe_v1: bool,
    created: Option<Created>,
) -> Result<(Ring, RdmaCoreCq, DvCq), String> {
    // SAFETY: a live CQ (the handle) of a context the mlx5 provider serves (the backend is chosen by the provider library), so it starts a `calloc`ed `struct mlx5_cq`; `layout` is the row of the provider's release. `init` is mlx5dv_init_obj on it. `keep` (the handle) keeps the CQ, its context and so the pointers the backend keeps into them alive.
    unsafe { attach_ring(cq.as_ptr(), cq.depth(), layout, cqe_v1, created, || init_cq(cq), Arc::clone(cq) as _) }
}

/// Opens dvcq's mlx5 poller on the ring `dv` describes (from [`init_cq`]), at the consumer
/// counter the doorbell record holds (rdma-core writes `cons_index & 0xffffff` there after
/// every poll, so a CQ it polled before is picked up where it stopped), with the CQ's arm
/// doorbell: the record's arm word and the UAR's CQ doorbell, an MMIO register. `keep`
/// owns what the pointers point into (the CQ handle, which holds its context and so the
/// UAR mapping).
pub(crate) fn poller_on(dv: &DvCq, keep: KeepAlive, cfg: CqConfig) -> Result<Ring, String> {
    if !crate::uapi::mlx5::cq_size::is_ring_size(dv.cqe_cnt) {
        return Err(format!("mlx5dv_cq.cqe_cnt {} is not a power of two from 2 to 2^22", dv.cqe_cnt));
    }
    if dv.buf.is_null() || dv.buf as usize % 4096 != 0 {
        return Err(format!("mlx5dv_cq.buf {:p} is not a page-aligned ring", dv.buf));
    }
    if dv.uar.is_null() || dv.uar as usize % UAR_ALIGN != 0 {
        return Err(format!("mlx5dv_cq.cq_uar {:p} is not a page-aligned UAR mapping", dv.uar));
    }
    let e = |what: &str, err: ProviderError| format!("{what}: {err}");
    let dbrec = {
        // SAFETY: mlx5dv_init_obj reported `buf` as the CQ's ring (`cqe_cnt` slots of `cqe_size` bytes, page aligned, checked above) and `dbrec` as its doorbell record; rdma-core maps both for the CQ's life, which `keep` (the CQ handle) extends to the poller's. The device writes the ring and reads the record by DMA; in this process only dvcq's poller touches them while it is attached (the Cq API has no path to rdma-core's poll, arm or resize of this CQ; `Cq::attach`'s contract).
        unsafe { DoorbellWord::with_keepalive(dv.dbrec, Some(Arc::clone(&keep))) }
    }
    .map_err(|x| e("dbrec", x))?;
    let ci = dbrec.load_be32(Ordering::Acquire) & 0x00ff_ffff;
    // SAFETY: as above: the record's second word (`MLX5_CQ_ARM_DB`), in the same granule as set_ci, written only by this poller's thread (rdma-core's arm is never called on the CQ).
    let arm_db = unsafe { DoorbellWord::with_keepalive(dv.dbrec.wrapping_add(ARM_DB * 4), Some(Arc::clone(&keep))) }
        .map_err(|x| e("dbrec arm word", x))?;
    // SAFETY: mlx5dv_init_obj reported `cq_uar` as the UAR page the context's CQ doorbells are rung on (rdma-core's `cq_uar_reg`: one page of the device's BAR, mmap'ed from the uverbs fd, non-null and page-aligned as checked above); MLX5_CQ_DOORBELL (0x20, asserted against mlx5dv.h) is the CQ doorbell in it, 8 bytes, 8-aligned. The page stays mapped while the context lives, which `keep` (the CQ handle, holding the context) extends to the register's life. Only dvcq stores to it for this CQ, and only from the thread that arms it; other CQs of the context ring the same register, as rdma-core's arms do: each 8-byte store reaches the device whole.
    let uar = unsafe { DoorbellRegister::mmio(dv.uar.wrapping_add(UAR_CQ_DOORBELL), Some(Arc::clone(&keep))) }
        .map_err(|x| e("uar cq doorbell", x))?;
    let arm = ArmDoorbell::new(arm_db, uar);
    let registry = Registry::new();
    let ring = match dv.cqe_size {
        64 => Ring::C64(
            Mlx5Cq::new(
                // SAFETY: as above, for a ring of 64-byte slots.
                unsafe { CqRing::with_keepalive(dv.buf, dv.cqe_cnt, Some(keep)) }.map_err(|x| e("ring", x))?,
                dbrec,
                dv.cqn,
                ci,
                registry,
                cfg,
            )
            .map_err(|x| x.to_string())?,
        ),
        128 => Ring::C128(
            Mlx5Cq::new(
                // SAFETY: as above, for a ring of 128-byte slots.
                unsafe { CqRing::with_keepalive(dv.buf, dv.cqe_cnt, Some(keep)) }.map_err(|x| e("ring", x))?,
                dbrec,
                dv.cqn,
                ci,
                registry,
                cfg,
            )
            .map_err(|x| x.to_string())?,
        ),
        other => return Err(format!("mlx5dv_cq.cqe_size {other} is neither 64 nor 128")),
    };
    let mut ring = ring;
    match &mut ring {
        Ring::C64(c) => c.set_arm_doorbell(arm),
        Ring::C128(c) => c.set_arm_doorbell(arm),
    }
    Ok(ring)
}

/// The memory region an `ibv_mr` describes (`addr`, `length`, `lkey`), for inline scatter.
///
/// # Safety
///
/// `mr` is a live `struct ibv_mr` whose memory stays registered and allocated while the
/// region is held, and which nothing in this process touches while a poll runs (the
/// contract of [`MemoryRegion::new`], which `Cq::attach_mr` passes on).
pub(crate) unsafe fn region_of(mr: *mut ffi::ibv_mr) -> Result<MemoryRegion, String> {
    // SAFETY: the caller's live MR; plain reads of its public fields.
    let (addr, len, lkey) = unsafe { ((*mr).addr, (*mr).length, (*mr).lkey) };
    // SAFETY: the caller's promise about the memory, passed on.
    unsafe { MemoryRegion::new(addr.cast(), len, lkey) }.map_err(|e| format!("mr lkey {lkey:#x}: {e}"))
}
