//! The irdma attach's looks into rdma-core's private memory, the CQ half ([`qp`]: the
//! QPs). irdma has no direct-verbs API
//! (no `irdmadv_init_obj`), so the CQ ring, its shadow area and the QPs' wr_id tables are
//! found in the provider's private structs: `struct irdma_ucq` around an `ibv_cq`,
//! `struct irdma_uqp` around an `ibv_qp`, and `struct irdma_uvcontext` after the
//! `ibv_context` (`providers/irdma/umain.h`, `user.h`). They are read at the offsets of the
//! layout row for the rdma-core release loaded (`dvcq_uapi::irdma::rdma_core`), and checked
//! against the public facts and against each other before any pointer in them is followed.
//!
//! The CQ's consumer state (`cq_ring.head`/`tail`, `polarity`) and the adopted QPs' ring
//! tails stay in rdma-core's memory: [`RdmaCoreCqState`] and [`RdmaCoreQp`] write them
//! back once per poll call, as rdma-core's own poll does, so that `ibv_post_send` /
//! `ibv_post_recv` see the room completions made and `ibv_destroy_qp`'s CQ clean-up
//! (`irdma_uk_clean_cq`) starts at the right slot.

use super::cq::VerbsCq;
use super::device::Context;
use super::ffi;
use core::mem::{offset_of, size_of};
use core::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use dvcq_e810_dv::ring::{ring_slots, Rounding};
use dvcq_e810_dv::{Compat, CqConfig, IrdmaCq, QpRegistry, SlotRing};
use dvcq_provider::{CqRing, DoorbellWord, KeepAlive};
use dvcq_uapi::irdma::gen::{FEATURE_64_BYTE_CQE, FEATURE_CQ_RESIZE};
use dvcq_uapi::irdma::rdma_core::{
    IrdmaLayout, IBV_CONTEXT_SIZE, IBV_MR_CONTEXT, IBV_MR_PD, IBV_QP_SIZE, VERBS_CQ_SIZE, VERBS_MR_SIZE,
};
use dvcq_uapi::irdma::shadow::{CQEIDX_MASK, DB_CQ_OFFSET, SHADOW_AREA_SIZE};
use dvcq_uapi::irdma::HwRev;
use static_assertions::const_assert_eq;

pub(crate) mod own;
mod qp;

pub(crate) use qp::{read_qp, PrivateQp, RdmaCoreQp};

// The table's view of the public structs, tied to the headers this build read. The table
// is x86_64's (`IrdmaLayout::for_release` has no row elsewhere).
#[cfg(target_arch = "x86_64")]
const_assert_eq!(IBV_CONTEXT_SIZE, size_of::<ffi::ibv_context>());
#[cfg(target_arch = "x86_64")]
const_assert_eq!(VERBS_CQ_SIZE, size_of::<ffi::ibv_cq_ex>());
#[cfg(target_arch = "x86_64")]
const_assert_eq!(VERBS_MR_SIZE, size_of::<ffi::ibv_mr>() + 8);
#[cfg(target_arch = "x86_64")]
const_assert_eq!(IBV_QP_SIZE, size_of::<ffi::ibv_qp>());
const_assert_eq!(IBV_MR_CONTEXT, offset_of!(ffi::ibv_mr, context));
const_assert_eq!(IBV_MR_PD, offset_of!(ffi::ibv_mr, pd));
// The public fields read from the private structs' bytes.
pub(crate) const IBV_CQ_CONTEXT: usize = offset_of!(ffi::ibv_cq, context);
pub(crate) const IBV_CQ_CQE: usize = offset_of!(ffi::ibv_cq, cqe);
pub(crate) const IBV_QP_CONTEXT: usize = offset_of!(ffi::ibv_qp, context);
pub(crate) const IBV_QP_SEND_CQ: usize = offset_of!(ffi::ibv_qp, send_cq);
pub(crate) const IBV_QP_RECV_CQ: usize = offset_of!(ffi::ibv_qp, recv_cq);
pub(crate) const IBV_QP_SRQ: usize = offset_of!(ffi::ibv_qp, srq);
pub(crate) const IBV_QP_QP_NUM: usize = offset_of!(ffi::ibv_qp, qp_num);
pub(crate) const IBV_QP_TYPE: usize = offset_of!(ffi::ibv_qp, qp_type);
const_assert_eq!(IBV_CQ_CQE, 28);
const_assert_eq!(IBV_QP_TYPE, 60);

/// `IRDMA_HW_PAGE_SIZE`: the CQ buffer, the separate shadow area and the QP buffer are
/// allocated page-aligned (`irdma_alloc_hw_buf` / `irdma_calloc_hw_buf_sz`).
const HW_PAGE: u64 = 4096;
/// The largest ring `IrdmaCq` takes.
const MAX_CQ_SLOTS: u32 = 1 << 21;

fn u8_at(b: &[u8], off: usize) -> u8 {
    b[off]
}

fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_ne_bytes(b[off..off + 2].try_into().expect("2 bytes"))
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes(b[off..off + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_ne_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}

/// A byte copy of `len` bytes at `ptr`.
///
/// # Safety
///
/// `len` bytes at `ptr` are readable.
unsafe fn copy(ptr: *const u8, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    // SAFETY: the caller's promise; a plain byte copy into a fresh buffer.
    unsafe { core::ptr::copy_nonoverlapping(ptr, b.as_mut_ptr(), len) };
    b
}

/// `rdma-core vA.B-vC.D`, for the messages that say a struct is not the row's.
fn release(layout: &IrdmaLayout) -> String {
    format!("rdma-core v{}.{}-v{}.{}", layout.first.0, layout.first.1, layout.last.0, layout.last.1)
}

/// What a CQ's `struct irdma_ucq` (and its context's `irdma_uvcontext`) gave, checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PrivateCq {
    /// The `ibv_context` and `ibv_cq` (addresses).
    pub(crate) ctx: usize,
    pub(crate) cq: usize,
    /// `cq.cq_base`: ring slot 0.
    pub(crate) ring: usize,
    /// `cq.cq_size`: ring slots.
    pub(crate) entries: u32,
    /// 32, or 64 with `avoid_mem_cflct`.
    pub(crate) cqe_size: u32,
    /// `cq.shadow_area`.
    pub(crate) shadow: usize,
    /// `cq.cq_id`.
    pub(crate) cq_id: u32,
    /// `cq.cq_ring.head` and `cq.polarity`: where rdma-core's poll stopped.
    pub(crate) head: u32,
    pub(crate) polarity: bool,
    /// The context's `uk_attrs.hw_rev` and `feature_flags`.
    pub(crate) hw_rev: HwRev,
    pub(crate) features: u64,
    /// The context's `uk_attrs` (its address: every QP of the context points there) and
    /// doorbell page (`db`).
    pub(crate) uk_attrs: usize,
    pub(crate) db: usize,
    /// `cq.cqe_alloc_db`: the CQ's arm doorbell (`db + 0x40`).
    pub(crate) arm_db: usize,
}

impl PrivateCq {
    /// The consumer counter [`CqConfig::ci`] takes for rdma-core's head and polarity.
    pub(crate) fn ci(&self) -> u32 {
        if self.polarity {
            self.head
        } else {
            self.head + self.entries
        }
    }
}

/// Where rdma-core keeps a CQ's consumer state (`cq.cq_ring.head`, `.tail`, `cq.polarity`
/// in its `struct irdma_ucq`), written back after each poll that moved the head.
#[derive(Debug)]
pub(crate) struct RdmaCoreCqState {
    ucq: *mut u8,
    ring: usize,
    polarity: usize,
}

// SAFETY: the pointer is into rdma-core's CQ, which any thread may use; the state is written only by its Cq's poll (one `&mut` owner at a time).
unsafe impl Send for RdmaCoreCqState {}

impl RdmaCoreCqState {
    fn word(&self, off: usize) -> &AtomicU32 {
        // SAFETY: `ucq` is a live `struct irdma_ucq` of the row's layout (checked at attach; the CQ outlives the Cq by `Cq::attach`'s contract) and `off` one of the 4-aligned `u32`s of its `cq_ring`. Only the polling thread touches it while the CQ is attached; an atomic view of the word is how Rust writes such shared memory.
        unsafe { AtomicU32::from_ptr(self.ucq.add(off).cast::<u32>()) }
    }

    /// Stores `head` as `cq_ring.head` and `cq_ring.tail` (rdma-core moves them together)
    /// and `polarity` as the expected valid bit.
    pub(crate) fn store(&self, head: u32, polarity: bool) {
        self.word(self.ring).store(head, Ordering::Relaxed);
        self.word(self.ring + 4).store(head, Ordering::Relaxed);
        // SAFETY: as `word`, for the `u8` `polarity` byte (the bitfield byte after it is not touched).
        let pol = unsafe { AtomicU8::from_ptr(self.ucq.add(self.polarity)) };
        pol.store(u8::from(polarity), Ordering::Relaxed);
    }
}

/// Reads the `struct irdma_ucq` at `cq` with `layout` and checks it against the public
/// `ibv_cq`, its context `ctx` (and the `irdma_uvcontext` after it) and the sizing rule
/// of the release (`compat`). Returns the ring and what the QPs will be checked against,
/// or the first check that failed.
///
/// Checks, in order: the CQ's context; the context's `hw_rev`; the CQ buffer's
/// registration (its context and PD are the context's); no `ibv_resize_cq` draining; no
/// ack doorbell; the arm doorbell in the context's doorbell page; the ring's base,
/// consumer state and size (`cq_size` is what the release allocates for `ibv_cq.cqe` on
/// this generation); the CQE size against the 64-byte-CQE feature; `buf_size` (exact without
/// CQ resize, whole pages with it); the shadow
/// area where the provider puts it (after the CQE pages, or a page of its own, registered).
/// Only byte copies of the structs are read: no pointer in them is followed here
/// ([`poller_on`] checks the head the shadow area holds).
///
/// # Safety
///
/// `cq` is a live `ibv_cq` made by rdma-core's irdma provider on `ctx` (so it starts a
/// `calloc`ed `struct irdma_ucq`, whose usable size is checked to hold the row before it
/// is read, and `ctx` at the end of a `verbs_context` in an `irdma_uvcontext`), and
/// `layout` is the row of the rdma-core release loaded, so the bytes read are inside
/// those allocations.
pub(crate) unsafe fn read_cq(
    cq: *mut ffi::ibv_cq,
    ctx: *mut ffi::ibv_context,
    layout: &'static IrdmaLayout,
    compat: Compat,
) -> Result<(PrivateCq, RdmaCoreCqState), String> {
    let l = &layout.cq;
    // SAFETY: the caller's promise: `cq` starts the `calloc`ed `struct irdma_ucq`.
    unsafe { super::allocation::allocation_holds(cq.cast(), l.size, &release(layout)) }
        .map_err(|e| format!("cq {cq:p}: {e}: not the struct irdma_ucq"))?;
    // SAFETY: the caller's promise, and the allocation holds `l.size` bytes from `cq` (checked above): its `struct irdma_ucq`.
    let b = unsafe { copy(cq.cast(), l.size) };
    // SAFETY: the caller's promise: the context's `irdma_uvcontext` goes on past `db`.
    let c = unsafe { copy(ctx.cast(), layout.ctx_span()) };
    let cq_id = u32_at(&b, l.cq_id);
    let what = |s: String| format!("cq {cq_id:#x}: {s}");
    let rel = release(layout);
    let (ctx_a, cq_a) = (ctx as u64, cq as u64);
    if u64_at(&b, IBV_CQ_CONTEXT) != ctx_a {
        return Err(what("it belongs to another device context".into()));
    }
    let attrs = layout.ctx.uk_attrs;
    let rev = u8_at(&c, attrs + layout.uk_attrs.hw_rev);
    let Some(hw_rev) = HwRev::from_u8(rev) else {
        return Err(what(format!(
            "the context's uk_attrs.hw_rev is {rev}, not 1, 2 or 3: not the struct irdma_uvcontext of {rel}"
        )));
    };
    let features = u64_at(&c, attrs + layout.uk_attrs.feature_flags);
    let (iwupd, db) = (u64_at(&c, layout.ctx.iwupd), u64_at(&c, layout.ctx.db));
    let (mr_ctx, mr_pd) = (u64_at(&b, l.vmr + IBV_MR_CONTEXT), u64_at(&b, l.vmr + IBV_MR_PD));
    if mr_ctx != ctx_a || mr_pd != iwupd || iwupd == 0 {
        return Err(what(format!(
            "the CQ buffer's registration names context {mr_ctx:#x} and pd {mr_pd:#x}, not the context ({ctx_a:#x}) \
             and its pd ({iwupd:#x}): not the struct irdma_ucq of {rel}"
        )));
    }
    let resize = u64_at(&b, l.resize_list);
    if resize != cq_a + l.resize_list as u64 {
        return Err(what(format!(
            "resize_list.next is {resize:#x}, not the list itself: an ibv_resize_cq is still draining old buffers \
             (poll them with rdma-core first), or this is not the struct irdma_ucq of {rel}"
        )));
    }
    let ack = u64_at(&b, l.cq_ack_db);
    if ack != 0 {
        return Err(what(format!(
            "cq_ack_db is {ack:#x}; rdma-core leaves it NULL: not the struct irdma_ucq of {rel}"
        )));
    }
    let arm_db = u64_at(&b, l.cqe_alloc_db);
    if db == 0 || arm_db != db.wrapping_add(DB_CQ_OFFSET as u64) {
        return Err(what(format!(
            "cqe_alloc_db {arm_db:#x} is not the context's doorbell page {db:#x} + {DB_CQ_OFFSET:#x}"
        )));
    }
    let ring = u64_at(&b, l.cq_base);
    if ring == 0 || ring % HW_PAGE != 0 {
        return Err(what(format!("cq_base {ring:#x} is not a page-aligned ring")));
    }
    let entries = u32_at(&b, l.cq_size);
    let (head, tail, ring_size) = (u32_at(&b, l.cq_ring), u32_at(&b, l.cq_ring + 4), u32_at(&b, l.cq_ring + 8));
    if ring_size != entries || head >= entries || tail != head {
        return Err(what(format!(
            "cq_ring (head {head}, tail {tail}, size {ring_size}) does not fit cq_size {entries} \
             (rdma-core keeps head = tail < size = cq_size)"
        )));
    }
    let polarity = u8_at(&b, l.polarity);
    if polarity > 1 {
        return Err(what(format!("polarity is {polarity}, not 0 or 1")));
    }
    // The 64-byte-CQE feature: only v64's provider uses it, and then for every CQ.
    let rounding = Rounding::from(compat);
    let big = u8_at(&b, l.avoid_mem_cflct) & 1 == 1;
    let want_big = rounding == Rounding::Even && features & FEATURE_64_BYTE_CQE != 0;
    if big != want_big {
        return Err(what(format!(
            "avoid_mem_cflct (64-byte CQEs) is {big}, but the context's 64-byte-CQE feature is {} and {rel} {} it",
            features & FEATURE_64_BYTE_CQE != 0,
            if rounding == Rounding::Even { "uses" } else { "predates" }
        )));
    }
    let cqe_size: u32 = if big { 64 } else { 32 };
    let requested = i32::from_ne_bytes(b[IBV_CQ_CQE..IBV_CQ_CQE + 4].try_into().expect("4 bytes"));
    let want = u32::try_from(requested).ok().filter(|&r| r > 0).and_then(|r| ring_slots(r, hw_rev, cqe_size, rounding));
    if want != Some(entries) || entries > MAX_CQ_SLOTS {
        return Err(what(format!(
            "cq_size {entries} is not the ring {rel} allocates for ibv_cq.cqe {requested} on {hw_rev:?} with \
             {cqe_size}-byte CQEs ({})",
            want.map_or("none".into(), |w| w.to_string())
        )));
    }
    let pages = (u64::from(entries) * u64::from(cqe_size)).div_ceil(HW_PAGE) * HW_PAGE;
    let inline_shadow = features & FEATURE_CQ_RESIZE == 0;
    let want_buf = pages + if inline_shadow { SHADOW_AREA_SIZE as u64 } else { 0 };
    let buf_size = u64_at(&b, l.buf_size);
    // With CQ_RESIZE, `irdma_uresize_cq` leaves `buf_size` at the first buffer's size: only
    // its page granularity is known then. Without it (X722) the CQ is never resized.
    if inline_shadow && buf_size != want_buf {
        return Err(what(format!(
            "buf_size {buf_size} is not the {want_buf} bytes the provider allocates for {entries} {cqe_size}-byte CQEs"
        )));
    }
    if !inline_shadow && (buf_size == 0 || buf_size % HW_PAGE != 0) {
        return Err(what(format!(
            "buf_size {buf_size} is not a whole number of pages, as the provider allocates CQ buffers"
        )));
    }
    let shadow = u64_at(&b, l.shadow_area);
    if inline_shadow {
        if shadow != ring + pages {
            return Err(what(format!(
                "shadow_area {shadow:#x} is not right after the CQE pages ({:#x}), where the provider puts it \
                 without IRDMA_FEATURE_CQ_RESIZE",
                ring + pages
            )));
        }
    } else {
        let reg = u64_at(&b, l.vmr_shadow_area + IBV_MR_CONTEXT);
        let inside = shadow >= ring && shadow < ring + pages;
        if shadow == 0 || shadow % HW_PAGE != 0 || inside || reg != ctx_a {
            return Err(what(format!(
                "shadow_area {shadow:#x} is not a page of its own registered on the context (registration context \
                 {reg:#x}), as the provider allocates it with IRDMA_FEATURE_CQ_RESIZE"
            )));
        }
    }
    let private = PrivateCq {
        ctx: ctx as usize,
        cq: cq as usize,
        ring: ring as usize,
        entries,
        cqe_size,
        shadow: shadow as usize,
        cq_id,
        head,
        polarity: polarity == 1,
        hw_rev,
        features,
        uk_attrs: (ctx as usize).wrapping_add(attrs),
        db: db as usize,
        arm_db: arm_db as usize,
    };
    let state = RdmaCoreCqState { ucq: cq.cast(), ring: l.cq_ring, polarity: l.polarity };
    Ok((private, state))
}

/// [`read_cq`] on a CQ of `ctx`, after checking that rdma-core's irdma provider serves the
/// context (so that the CQ is inside a `struct irdma_ucq`).
pub(crate) fn read_verbs_cq(
    ctx: &Context,
    cq: &VerbsCq,
    layout: &'static IrdmaLayout,
    compat: Compat,
) -> Result<(PrivateCq, RdmaCoreCqState), String> {
    let provider = ctx.provider();
    if provider.as_deref() != Some("irdma") {
        return Err(format!("the context is served by the {provider:?} provider, not irdma"));
    }
    if cq.context_ptr() != ctx.as_ptr() {
        return Err("the CQ belongs to another device context".into());
    }
    // SAFETY: a live CQ (the handle keeps it) of `ctx`, whose provider is rdma-core's irdma, so the CQ sits at the start of a `struct irdma_ucq` and the context at the end of the `verbs_context` in an `irdma_uvcontext`; `layout` is the row of the release loaded (the caller's `layout_for`), whose spans are inside those allocations.
    unsafe { read_cq(cq.as_ptr(), ctx.as_ptr(), layout, compat) }
}

/// Opens dvcq's irdma poller on the ring `p` describes (from [`read_cq`]), where rdma-core's
/// poll stopped, with an empty QP registry; `keep` holds the CQ alive. First check: the
/// head in the shadow area is rdma-core's `cq_ring.head`.
pub(crate) fn poller_on(p: &PrivateCq, keep: Option<KeepAlive>, compat: Compat) -> Result<IrdmaCq, String> {
    let ring = p.ring as *mut u8;
    let e = |what: &str, err: dvcq_provider::Error| format!("{what}: {err}");
    let shadow = {
        // SAFETY: `read_cq` checked the struct that named the ring (`cq_size` slots of `cqe_size` bytes, page aligned, of the buffer size the provider allocates) and the shadow area; rdma-core keeps both mapped for the CQ's life, which `keep` (or, in image tests, the test) extends to the poller's. The device writes the ring and reads the shadow area by DMA; in this process only dvcq's poller touches them while attached (`Cq::attach`'s contract: no rdma-core poll, arm or resize meanwhile).
        unsafe { DoorbellWord::with_keepalive(p.shadow as *mut u8, keep.clone()) }
    }
    .map_err(|x| e("shadow", x))?;
    // rdma-core writes its head to shadow word 0 after every CQE it consumes.
    let published = shadow.load_le64(Ordering::Acquire).map_err(|x| e("shadow", x))? & CQEIDX_MASK;
    if published != u64::from(p.head) {
        return Err(format!(
            "cq {:#x}: the shadow area's head {published} is not cq_ring.head {} (rdma-core writes its head there \
             after every CQE it consumes)",
            p.cq_id, p.head
        ));
    }
    let slots = match p.cqe_size {
        // SAFETY: as above, for 32-byte slots.
        32 => SlotRing::Slots32(unsafe { CqRing::with_keepalive(ring, p.entries, keep) }.map_err(|x| e("ring", x))?),
        // SAFETY: as above, for 64-byte slots.
        64 => SlotRing::Slots64(unsafe { CqRing::with_keepalive(ring, p.entries, keep) }.map_err(|x| e("ring", x))?),
        other => return Err(format!("a CQE size of {other} bytes is neither 32 nor 64")),
    };
    let cfg = CqConfig { hw_rev: p.hw_rev, compat, cq_id: p.cq_id, ci: p.ci() };
    IrdmaCq::new(slots, shadow, QpRegistry::new(p.hw_rev), cfg).map_err(|x| format!("cq {:#x}: {x}", p.cq_id))
}
