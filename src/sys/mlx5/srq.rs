//! An rdma-core SRQ adopted by the mlx5 direct backend: `mlx5dv_init_obj(MLX5DV_OBJ_SRQ)`
//! for its public facts (`struct mlx5dv_srq`: buffer, doorbell record, stride, free-list
//! head and tail, SRQ number), and the private `struct mlx5_srq` around the `ibv_srq`, read
//! at the offsets of the layout row for the rdma-core release loaded and checked against
//! those facts before any of its pointers is trusted.
//!
//! The wr_id table, the free list's `head` and `tail` and (from v48) `free_wqe_bitmap` stay
//! in rdma-core's memory: [`RdmaCoreSrq`] reads and writes them for the registry's mirror
//! ([`dvcq_mlx5_dv::registry::ForeignSrq`]), once per poll call, and frees each completed
//! WQE the way the release's `mlx5_free_srq_wqe` does (rdma-core `providers/mlx5/srq.c`).

use super::super::ffi;
use core::mem::offset_of;
use core::sync::atomic::{AtomicI32, AtomicU16, AtomicU64, Ordering};
use dvcq_mlx5_dv::registry::ForeignSrq;
use dvcq_provider::WqBuffer;
use dvcq_uapi::mlx5::rdma_core::MLX5_LAYOUTS;
use dvcq_uapi::mlx5::rdma_core::{
    Mlx5Layout, Mlx5SrqLayout, SrqFree, IBV_SRQ_SIZE, MLX5_RSC_TYPE_SRQ, MLX5_RSC_TYPE_XSRQ, SRQ_NEXT_WQE_INDEX_OFFSET,
};
use static_assertions::const_assert_eq;

/// The public SRQ fields the private struct's copy is read at.
pub(crate) const IBV_SRQ_CONTEXT: usize = offset_of!(ffi::ibv_srq, context);
const_assert_eq!(IBV_SRQ_CONTEXT, 0);
/// `verbs_srq.srq_type`, right after the `ibv_srq` in the private struct.
pub(crate) const VERBS_SRQ_TYPE: usize = IBV_SRQ_SIZE;
const_assert_eq!(MLX5_LAYOUTS[0].srq.srq_type, MLX5_LAYOUTS[0].srq.ibv_srq + VERBS_SRQ_TYPE);
const_assert_eq!(offset_of!(ffi::mlx5_wqe_srq_next_seg, next_wqe_index), SRQ_NEXT_WQE_INDEX_OFFSET);

/// What `mlx5dv_init_obj(MLX5DV_OBJ_SRQ)` says about an SRQ (`struct mlx5dv_srq`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DvSrq {
    /// The WQE buffer.
    pub(crate) buf: usize,
    /// The doorbell record.
    pub(crate) dbrec: usize,
    /// Bytes per WQE.
    pub(crate) stride: u32,
    /// The free list's head and tail at the call.
    pub(crate) head: u32,
    pub(crate) tail: u32,
    /// The SRQ number.
    pub(crate) srqn: u32,
}

/// `mlx5dv_init_obj(&obj, MLX5DV_OBJ_SRQ)` on `srq`, asking for its number.
///
/// # Safety
///
/// `srq` is a live `ibv_srq` of an mlx5 context.
pub(crate) unsafe fn init_srq(srq: *mut ffi::ibv_srq) -> Result<DvSrq, String> {
    let srqn_mask = u64::from(ffi::MLX5DV_SRQ_MASK_SRQN);
    let mut out = ffi::mlx5dv_srq { comp_mask: srqn_mask, ..Default::default() };
    let mut obj = ffi::mlx5dv_obj::default();
    obj.srq.in_ = srq;
    obj.srq.out = &mut out;
    // SAFETY: the caller's live mlx5 SRQ; the output struct lives across the call.
    let rc = unsafe { ffi::mlx5dv_init_obj(&mut obj, u64::from(ffi::MLX5DV_OBJ_SRQ)) };
    if rc != 0 {
        return Err(format!(
            "mlx5dv_init_obj(MLX5DV_OBJ_SRQ) failed ({})",
            std::io::Error::from_raw_os_error(rc.abs())
        ));
    }
    if out.comp_mask & srqn_mask == 0 {
        return Err("mlx5dv_init_obj(MLX5DV_OBJ_SRQ) did not report the SRQ number".into());
    }
    Ok(DvSrq {
        buf: out.buf as usize,
        dbrec: out.dbrec as usize,
        stride: out.stride,
        head: out.head,
        tail: out.tail,
        srqn: out.srqn,
    })
}

/// An adopted SRQ in rdma-core's memory: its `struct mlx5_srq`, wr_id table, WQE buffer and
/// (v48 on) free bitmap. The poll thread reads `head`, the table and the WQEs' links, and
/// frees completed WQEs, as rdma-core's own poll does (without the SRQ's lock, which its
/// posts take: `Cq::attach_srq`'s contract orders posts with polls).
#[derive(Debug)]
pub(crate) struct RdmaCoreSrq {
    srq: *mut u8,
    wrid: *const u64,
    wqes: *mut u8,
    wqe_shift: u32,
    max: u32,
    bitmap: *mut u64,
    layout: Mlx5SrqLayout,
}

// SAFETY: the pointers are into rdma-core's SRQ, which any thread may use; it is read and written only by the poll of the Cq it was adopted on (one `&mut` owner at a time).
unsafe impl Send for RdmaCoreSrq {}

impl RdmaCoreSrq {
    fn int(&self, off: usize) -> &AtomicI32 {
        // SAFETY: `srq` is a live `struct mlx5_srq` of the row's layout (checked at attach; the SRQ outlives the Cq by the attach's contract), `off` one of its 4-byte, 4-aligned `int` fields. A poster touches it with plain word accesses ordered with the polls; an atomic view is how Rust reads such shared memory.
        unsafe { AtomicI32::from_ptr(self.srq.add(off).cast::<i32>()) }
    }

    /// `idx` as a WQE index below `max` whatever the caller passes (`max` is at least 1,
    /// checked at attach; it need not be a power of two, so a clamp, one compare and
    /// conditional move per read).
    #[inline(always)]
    fn slot(&self, idx: u32) -> usize {
        idx.min(self.max - 1) as usize
    }

    fn link(&self, idx: u32) -> &AtomicU16 {
        let idx = self.slot(idx);
        // SAFETY: `wqes` is the SRQ's buffer of `max` WQEs of `1 << wqe_shift` bytes (mlx5dv_srq's buffer and stride, checked against the private struct), `slot` keeps `idx < max`, and the link is a 2-aligned big-endian u16 at byte 2 of the WQE's next segment. The device reads it; rdma-core's posts and this poll write it, ordered.
        unsafe { AtomicU16::from_ptr(self.wqes.add((idx << self.wqe_shift) + SRQ_NEXT_WQE_INDEX_OFFSET).cast()) }
    }
}

impl ForeignSrq for RdmaCoreSrq {
    fn max(&self) -> u32 {
        self.max
    }
    fn head(&self) -> u32 {
        // Acquire: the wr_ids and links a post wrote before moving `head` are read after.
        self.int(self.layout.head).load(Ordering::Acquire) as u32
    }
    fn next(&self, idx: u32) -> u32 {
        u32::from(u16::from_be(self.link(idx).load(Ordering::Relaxed)))
    }
    fn wr_id(&self, idx: u32) -> u64 {
        let idx = self.slot(idx);
        // SAFETY: `wrid` is the SRQ's table of `max` entries (non-null and aligned, checked at attach), `slot` keeps `idx < max`; a post writes an entry only for a free WQE, which no completion names until its post is visible.
        unsafe { self.wrid.add(idx).read_volatile() }
    }
    fn free(&self, idx: u32) {
        let idx = self.slot(idx) as u32;
        match self.layout.free {
            // v44-v47 `mlx5_free_srq_wqe`: link the WQE behind the tail.
            SrqFree::LinkTail => {
                let tail = self.int(self.layout.tail);
                let at = tail.load(Ordering::Relaxed) as u32;
                if at < self.max {
                    self.link(at).store((idx as u16).to_be(), Ordering::Relaxed);
                }
                // Release: the link is written before a post can follow the new tail.
                tail.store(idx as i32, Ordering::Release);
            }
            // v48 on: set the WQE's bit; the post path links it in.
            SrqFree::Bitmap { .. } => {
                // SAFETY: `bitmap` holds `max` bits in `unsigned long` words (non-null and aligned, checked at attach; `bitmap_alloc0(srq->max)`), and `slot` keeps `idx < max`.
                let word = unsafe { AtomicU64::from_ptr(self.bitmap.add(idx as usize / 64)) };
                word.fetch_or(1 << (idx % 64), Ordering::Release);
            }
        }
    }
}

/// What an adopted SRQ's private struct gave, checked against its public facts.
#[derive(Debug)]
pub(crate) struct PrivateSrq {
    /// The SRQ number.
    pub(crate) srqn: u32,
    /// `max`: WQEs in the buffer.
    pub(crate) max: u32,
    /// Bytes per WQE.
    pub(crate) stride: u32,
    /// The queue in rdma-core's memory.
    pub(crate) srq: RdmaCoreSrq,
    /// The WQE buffer, for inline scatter.
    pub(crate) wqes: WqBuffer,
    /// An XRC SRQ's user index (`rsc.rsn`), which its CQEs carry; `None` for a basic SRQ.
    pub(crate) xrc_uidx: Option<u32>,
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes(b[off..off + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_ne_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}

/// Reads the `struct mlx5_srq` around `srq` with `layout` and checks it against `dv` (what
/// `mlx5dv_init_obj` reported), `ctx` (the context of the CQ its QPs complete on), and for
/// an XRC SRQ `cq` (the CQ being attached) and `cqe_v1` (the context's CQE version).
///
/// Checks, in order: the SRQ's context (public `ibv_srq`), then the private struct:
/// `rsc.type` (a basic or an XRC SRQ) against `vsrq.srq_type`, a tag-matching SRQ's
/// command QP or type (refused); for a basic SRQ the SRQ number in `rsc.rsn` and `srqn`;
/// for an XRC SRQ the CQE version (1: its CQEs name it by user index), the user index in
/// `rsc.rsn` (24 bits), the SRQ number in `srqn` and `vsrq.srq_num`, and its CQ
/// (`vsrq.cq`, the attached one); then the buffer, doorbell record, stride, head and tail
/// against `dv`, `max` (1 to 2^16, the head, tail and wait queue inside it), WQE signatures
/// (refused), and the table and bitmap pointers (non-null, aligned).
///
/// # Safety
///
/// `srq` is a live `ibv_srq` made by rdma-core's mlx5 provider (so it sits inside a
/// `struct mlx5_srq`), and `layout` is the row of the rdma-core release loaded, so the
/// `layout.srq.size` bytes from `srq - layout.srq.ibv_srq` are that allocation.
pub(crate) unsafe fn read_srq(
    srq: *mut ffi::ibv_srq,
    dv: &DvSrq,
    layout: &Mlx5Layout,
    ctx: *mut ffi::ibv_context,
    cq: *mut ffi::ibv_cq,
    cqe_v1: bool,
) -> Result<PrivateSrq, String> {
    let l = &layout.srq;
    let base = (srq as *mut u8).wrapping_sub(l.ibv_srq);
    // SAFETY: the caller's live SRQ; a read of its public `context` field, before any private byte.
    if unsafe { (*srq).context } != ctx {
        return Err(format!("srq {:#x}: it belongs to another device context", dv.srqn));
    }
    // SAFETY: the caller's promise: `base` starts the `calloc`ed `struct mlx5_srq` of this SRQ.
    unsafe { super::super::allocation::allocation_holds(base, l.size, "struct mlx5_srq") }
        .map_err(|e| format!("srq {:#x}: {e}", dv.srqn))?;
    let mut b = vec![0u8; l.size];
    // SAFETY: the allocation holds `l.size` bytes from `base` (checked above), the live `struct mlx5_srq` of this SRQ. A plain byte copy; the fields read from it are checked before any pointer in it is used.
    unsafe { core::ptr::copy_nonoverlapping(base, b.as_mut_ptr(), l.size) };
    let srqn = dv.srqn;
    let what = |s: String| format!("srq {srqn:#x}: {s}");
    if u64_at(&b, l.ibv_srq + IBV_SRQ_CONTEXT) != ctx as u64 {
        return Err(what("it belongs to another device context".into()));
    }
    let release = format!("rdma-core v{}.{}-v{}.{}", layout.first.0, layout.first.1, layout.last.0, layout.last.1);
    let rsc_type = u32_at(&b, l.rsc_type);
    let xrc = match rsc_type {
        MLX5_RSC_TYPE_SRQ => false,
        MLX5_RSC_TYPE_XSRQ => true,
        _ => {
            return Err(what(format!(
                "rsc.type is {rsc_type}, not MLX5_RSC_TYPE_SRQ ({MLX5_RSC_TYPE_SRQ}) or MLX5_RSC_TYPE_XSRQ \
                 ({MLX5_RSC_TYPE_XSRQ}): not the struct mlx5_srq of {release}"
            )))
        }
    };
    let srq_type = u32_at(&b, l.srq_type);
    if u64_at(&b, l.cmd_qp) != 0 || srq_type == ffi::IBV_SRQT_TM {
        return Err(what("a tag-matching SRQ; only basic and XRC SRQs are adopted".into()));
    }
    let want_type = if xrc { ffi::IBV_SRQT_XRC } else { ffi::IBV_SRQT_BASIC };
    if srq_type != want_type {
        return Err(what(format!(
            "rsc.type {rsc_type} and verbs_srq.srq_type {srq_type} disagree: not the struct mlx5_srq of {release}"
        )));
    }
    let rsn = u32_at(&b, l.rsn);
    let xrc_uidx = if xrc {
        if !cqe_v1 {
            return Err(what(
                "an XRC SRQ on a context with CQEs of version 0, which name it only through its XRC QP; dvcq finds \
                 XRC SRQs by the user index version-1 CQEs carry"
                    .into(),
            ));
        }
        if rsn > dvcq_uapi::mlx5::cqe::QPN_MASK {
            return Err(what(format!("the user index rsc.rsn {rsn:#x} is wider than 24 bits")));
        }
        for (name, v) in [("srqn", u32_at(&b, l.srqn)), ("vsrq.srq_num", u32_at(&b, l.srq_num))] {
            if v != srqn {
                return Err(what(format!("the private {name} {v:#x} is not mlx5dv_srq's SRQ number")));
            }
        }
        let srq_cq = u64_at(&b, l.cq);
        if srq_cq != cq as u64 {
            return Err(what(format!("its CQ ({srq_cq:#x}) is not the attached CQ ({:#x})", cq as u64)));
        }
        Some(rsn)
    } else {
        for (name, v) in [("rsc.rsn", rsn), ("srqn", u32_at(&b, l.srqn))] {
            if v != srqn {
                return Err(what(format!("the private {name} {v:#x} is not mlx5dv_srq's SRQ number")));
            }
        }
        None
    };
    let buf = u64_at(&b, l.buf);
    if buf != dv.buf as u64 {
        return Err(what(format!("the private buffer {buf:#x} is not mlx5dv_srq's ({:#x})", dv.buf)));
    }
    let db = u64_at(&b, l.db);
    if db != dv.dbrec as u64 {
        return Err(what(format!("the private doorbell record {db:#x} is not mlx5dv_srq's ({:#x})", dv.dbrec)));
    }
    let shift = u32_at(&b, l.wqe_shift);
    if shift >= 16 || 1u32 << shift != dv.stride || dv.stride < 32 {
        return Err(what(format!("wqe_shift {shift} does not give mlx5dv_srq's stride {}", dv.stride)));
    }
    let (head, tail) = (u32_at(&b, l.head), u32_at(&b, l.tail));
    if (head, tail) != (dv.head, dv.tail) {
        return Err(what(format!(
            "the private free list ({head}..{tail}) is not mlx5dv_srq's ({}..{})",
            dv.head, dv.tail
        )));
    }
    let max = u32_at(&b, l.max);
    if max == 0 || max > 1 << 16 || head >= max || tail >= max {
        return Err(what(format!("max {max} is not 1 to 65536 WQEs holding the free list ({head}..{tail})")));
    }
    let (waitq_head, waitq_tail) = (u32_at(&b, l.waitq_head) as i32, u32_at(&b, l.waitq_tail) as i32);
    let inside = |i: i32| (0..max as i32).contains(&i);
    let no_waitq = waitq_head == -1 && waitq_tail == -1;
    if !(no_waitq || (inside(waitq_head) && inside(waitq_tail))) {
        return Err(what(format!("the wait queue ({waitq_head}..{waitq_tail}) is outside the {max} WQEs")));
    }
    if u32_at(&b, l.wq_sig) != 0 {
        return Err(what("WQE signatures are on (MLX5_SRQ_SIGNATURE); not adopted".into()));
    }
    let wrid = u64_at(&b, l.wrid);
    let bad = |p: u64| p == 0 || p % 8 != 0;
    if bad(wrid) {
        return Err(what(format!("the wr_id table pointer {wrid:#x} is null or misaligned")));
    }
    let bitmap = match l.free {
        SrqFree::LinkTail => 0,
        SrqFree::Bitmap { bitmap, nwqes } => {
            let p = u64_at(&b, bitmap);
            if bad(p) {
                return Err(what(format!("free_wqe_bitmap {p:#x} is null or misaligned")));
            }
            let n = u32_at(&b, nwqes);
            if n == 0 || n > max || tail >= n {
                return Err(what(format!("nwqes {n} is not 1 to max ({max}) past the tail ({tail})")));
            }
            p
        }
    };
    let len = max as usize * dv.stride as usize;
    // SAFETY: `mlx5dv_srq` reported `buf` as the SRQ's WQEs, `max` times the stride (both checked against the private struct), mapped while the SRQ lives, which the caller keeps for the poller's life. rdma-core's posts write them only ordered with the polls (`Cq::attach_srq`'s contract); the poll never trusts their bytes.
    let wqes = unsafe { WqBuffer::new(dv.buf as *mut u8, len) }.map_err(|e| what(format!("WQE buffer: {e}")))?;
    let foreign = RdmaCoreSrq {
        srq: base,
        wrid: wrid as usize as *const u64,
        wqes: dv.buf as *mut u8,
        wqe_shift: shift,
        max,
        bitmap: bitmap as usize as *mut u64,
        layout: *l,
    };
    Ok(PrivateSrq { srqn, max, stride: dv.stride, srq: foreign, wqes, xrc_uidx })
}
