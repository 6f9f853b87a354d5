//! The QP half of the irdma attach: an application's `ibv_qp`, read as the `struct
//! irdma_uqp` it sits in (`providers/irdma/umain.h`) and its `struct irdma_qp_uk`
//! (`user.h`), checked against the public `ibv_qp`, the attached CQ and its context; then
//! rdma-core's tables and rings as the poll thread reads and writes them ([`RdmaCoreQp`],
//! a [`ForeignQp`] for the registry's mirror).

use super::{copy, release, u16_at, u32_at, u64_at, u8_at, PrivateCq, HW_PAGE};
use super::{IBV_QP_CONTEXT, IBV_QP_QP_NUM, IBV_QP_RECV_CQ, IBV_QP_SEND_CQ, IBV_QP_SRQ, IBV_QP_TYPE};
use crate::sys::ffi;
use core::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use dvcq_e810_dv::{ForeignQp, QpConfig, QpType, Transport, WrTrk};
use dvcq_uapi::irdma::rdma_core::{
    IrdmaLayout, IrdmaQpLayout, QP_CAPS_SEND_WITH_IMM, QP_FLAG_FIRST_SQ_WQ, QP_FLAG_PUSH_DROPPED, QP_FLAG_PUSH_MODE,
    SQ_WRTRK_QUANTA, SQ_WRTRK_SIZE, SQ_WRTRK_WR_LEN,
};
use dvcq_uapi::irdma::wqe::{hdr_opcode, HDR_OFFSET, QUANTUM_SIZE};

/// The largest work queue the registry takes (a 15-bit WQE index).
const MAX_WQ: u32 = 1 << 15;

/// One adopted QP in rdma-core's memory: its `struct irdma_qp_uk` and the tables and WQE
/// buffer it points to. The poll thread reads the ring heads, the table entries and the
/// WQE headers, and writes the tails (of the queues that complete on the attached CQ) and
/// the push bits, as rdma-core's own poll does (without the QP's lock, which the post path
/// takes only against other posters; `Cq::attach_qp`'s contract orders posts with polls).
#[derive(Debug)]
pub(crate) struct RdmaCoreQp {
    qp_uk: *mut u8,
    sq_wrtrk: *const u8,
    rq_wrid: *const u64,
    sq_base: *const u8,
    sq_size: u32,
    rq_size: u32,
    layout: IrdmaQpLayout,
    /// Which queues complete on the attached CQ: only their tails are written.
    sq_here: bool,
    rq_here: bool,
}

// SAFETY: the pointers are into rdma-core's QP, which any thread may use; a QP's state is read and written only by its Cq's poll (one `&mut` owner at a time).
unsafe impl Send for RdmaCoreQp {}

impl RdmaCoreQp {
    fn word(&self, off: usize) -> &AtomicU32 {
        // SAFETY: `qp_uk` is a live `struct irdma_qp_uk` of the row's layout (checked at attach; the QP outlives the Cq by `Cq::attach_qp`'s contract) and `off` one of the 4-aligned `u32`s of its rings. A poster touches them only with plain word accesses, ordered with the polls; an atomic view is how Rust reads such memory.
        unsafe { AtomicU32::from_ptr(self.qp_uk.add(off).cast::<u32>()) }
    }

    fn flags(&self) -> &AtomicU8 {
        // SAFETY: as `word`, for the byte of bitfields after `rq_wqe_size_multiplier`.
        unsafe { AtomicU8::from_ptr(self.qp_uk.add(self.layout.flags)) }
    }
}

impl ForeignQp for RdmaCoreQp {
    fn sq_size(&self) -> u32 {
        self.sq_size
    }
    fn rq_size(&self) -> u32 {
        self.rq_size
    }
    fn sq_head(&self) -> u32 {
        // Acquire: the table entries and WQE a post wrote before moving `head` are read
        // after.
        self.word(self.layout.sq_ring).load(Ordering::Acquire)
    }
    fn sq_tail(&self) -> u32 {
        self.word(self.layout.sq_ring + 4).load(Ordering::Relaxed)
    }
    fn rq_head(&self) -> u32 {
        self.word(self.layout.rq_ring).load(Ordering::Acquire)
    }
    fn rq_tail(&self) -> u32 {
        self.word(self.layout.rq_ring + 4).load(Ordering::Relaxed)
    }
    fn sq_entry(&self, idx: u32) -> WrTrk {
        // `sq_size` is a power of two (checked at attach): the mask keeps the slot in the
        // tables whatever the caller passes, for one `and` per entry read.
        let idx = idx & (self.sq_size - 1);
        let e = self.sq_wrtrk.wrapping_add(idx as usize * SQ_WRTRK_SIZE);
        // SAFETY: `sq_wrtrk` is the QP's `sq_wrtrk_array` of `sq_size` 16-byte entries (non-null, 8-aligned, checked at attach) and the mask keeps `idx < sq_size`; a poster writes an entry only for a free slot, which the mirror does not use until the post is visible (read after `head` with acquire).
        let (wr_id, wr_len, quanta) = unsafe {
            (
                e.cast::<u64>().read_volatile(),
                e.add(SQ_WRTRK_WR_LEN).cast::<u32>().read_volatile(),
                e.add(SQ_WRTRK_QUANTA).cast::<u16>().read_volatile(),
            )
        };
        // SAFETY: `sq_base` is the QP's SQ of `sq_size` 32-byte quanta (page aligned, with the RQ no nearer than that, checked at attach); the header qword of quantum `idx` is 8-aligned inside it. rdma-core writes it before moving `head`.
        let hdr = unsafe { self.sq_base.add(idx as usize * QUANTUM_SIZE + HDR_OFFSET).cast::<u64>().read_volatile() };
        WrTrk { wr_id, wr_len, quanta, opcode: hdr_opcode(u64::from_le(hdr)) }
    }
    fn rq_wr_id(&self, idx: u32) -> u64 {
        // A power of two too: as in `sq_entry`.
        let idx = idx & (self.rq_size - 1);
        // SAFETY: as `sq_entry`, for the `rq_wrid_array` of `rq_size` `u64`s.
        unsafe { self.rq_wrid.add(idx as usize).read_volatile() }
    }
    fn first_sq_wq(&self) -> bool {
        self.flags().load(Ordering::Relaxed) & QP_FLAG_FIRST_SQ_WQ != 0
    }
    fn set_sq_tail(&self, tail: u32) {
        if self.sq_here {
            // Release: the entries read for the completions happen-before a post reuses
            // their slots.
            self.word(self.layout.sq_ring + 4).store(tail, Ordering::Release);
        }
    }
    fn set_rq_tail(&self, tail: u32) {
        if self.rq_here {
            self.word(self.layout.rq_ring + 4).store(tail, Ordering::Release);
        }
    }
    fn note_push_dropped(&self) {
        if self.sq_here {
            let f = self.flags();
            f.store((f.load(Ordering::Relaxed) & !QP_FLAG_PUSH_MODE) | QP_FLAG_PUSH_DROPPED, Ordering::Relaxed);
        }
    }
}

/// What an adopted QP's private structs gave, checked against its public facts and the
/// attached CQ's.
#[derive(Debug)]
pub(crate) struct PrivateQp {
    /// `ibv_qp.qp_num`.
    pub(crate) qpn: u32,
    /// The completion context its CQEs carry: the address of its `irdma_qp_uk`.
    pub(crate) handle: u64,
    /// How to register it.
    pub(crate) config: QpConfig,
    /// rdma-core's queues.
    pub(crate) qp: RdmaCoreQp,
}

/// Reads the `struct irdma_uqp` around `qp` with `cq`'s layout and checks it against the
/// public `ibv_qp`, the attached CQ and its context (`cq`, from [`read_cq`]). Returns what
/// to register, or the first check that failed.
///
/// Checks, in order: the QP's context and CQs, no SRQ, an RC or UD QP (public `ibv_qp`
/// fields); then the private structs: the CQ pointers `irdma_uqp` keeps, `back_qp` and the
/// lock pointer (its own), `uk_attrs` and `wqe_alloc_db` (its context's), `qp_id`, the
/// rings (power-of-two sizes that agree with `sq_size` / `rq_size`, positions inside), the
/// RQ WQE size, the connection WQEs, the WQE buffer and the tables.
///
/// # Safety
///
/// `qp` is a live `ibv_qp` made by rdma-core's irdma provider (so it sits at the start of a
/// `struct irdma_uqp`), and `layout` is the row of the rdma-core release loaded, so the
/// `layout.uqp_span()` bytes from `qp` are that allocation.
pub(crate) unsafe fn read_qp(
    qp: *mut ffi::ibv_qp,
    cq: &PrivateCq,
    layout: &'static IrdmaLayout,
) -> Result<PrivateQp, String> {
    let (u, l) = (&layout.uqp, &layout.qp);
    // SAFETY: the caller's promise: `uqp_span()` bytes from `qp` are its `irdma_uqp`.
    let b = unsafe { copy(qp.cast(), layout.uqp_span()) };
    let qpn = u32_at(&b, IBV_QP_QP_NUM);
    let what = |s: String| format!("qp {qpn:#x}: {s}");
    let rel = release(layout);
    if u64_at(&b, IBV_QP_CONTEXT) != cq.ctx as u64 {
        return Err(what("it belongs to another device context".into()));
    }
    let (send_cq, recv_cq) = (u64_at(&b, IBV_QP_SEND_CQ), u64_at(&b, IBV_QP_RECV_CQ));
    let this = cq.cq as u64;
    if send_cq != this && recv_cq != this {
        return Err(what(format!(
            "neither its send CQ ({send_cq:#x}) nor its receive CQ ({recv_cq:#x}) is the attached CQ ({this:#x})"
        )));
    }
    if u64_at(&b, IBV_QP_SRQ) != 0 {
        return Err(what("it receives from an SRQ; adopting rdma-core's SRQs is not built yet".into()));
    }
    let qp_type = match u32_at(&b, IBV_QP_TYPE) {
        ffi::IBV_QPT_RC => QpType::Rc,
        ffi::IBV_QPT_UD => QpType::Ud,
        t => return Err(what(format!("its type {t} is neither RC nor UD, the QPs rdma-core's irdma provider makes"))),
    };
    let (p_send, p_recv) = (u64_at(&b, u.send_cq), u64_at(&b, u.recv_cq));
    if (p_send, p_recv) != (send_cq, recv_cq) {
        return Err(what(format!(
            "the private send_cq/recv_cq ({p_send:#x}, {p_recv:#x}) are not the QP's ({send_cq:#x}, {recv_cq:#x}): \
             not the struct irdma_uqp of {rel}"
        )));
    }
    let at = |off: usize| u.qp + off;
    let back = u64_at(&b, at(l.back_qp));
    if back != qp as u64 {
        return Err(what(format!(
            "back_qp is {back:#x}, not the QP ({:#x}): not the struct irdma_qp_uk of {rel}",
            qp as u64
        )));
    }
    let lock = u64_at(&b, at(l.lock));
    let own_lock = qp as u64 + u.lock as u64;
    if lock != own_lock {
        return Err(what(format!(
            "lock is {lock:#x}, not the QP's own spinlock ({own_lock:#x}): not the struct irdma_qp_uk of {rel}"
        )));
    }
    let attrs = u64_at(&b, at(l.uk_attrs));
    if attrs != cq.uk_attrs as u64 {
        return Err(what(format!("uk_attrs {attrs:#x} is not its context's ({:#x})", cq.uk_attrs)));
    }
    let db = u64_at(&b, at(l.wqe_alloc_db));
    if db != cq.db as u64 {
        return Err(what(format!("wqe_alloc_db {db:#x} is not its context's doorbell page ({:#x})", cq.db)));
    }
    let qp_id = u32_at(&b, at(l.qp_id));
    if qp_id != qpn {
        return Err(what(format!("qp_id {qp_id:#x} is not ibv_qp.qp_num")));
    }
    let ring = |off: usize| (u32_at(&b, at(off)), u32_at(&b, at(off + 4)), u32_at(&b, at(off + 8)));
    let (sq_size, rq_size) = (u32_at(&b, at(l.sq_size)), u32_at(&b, at(l.rq_size)));
    let pow2 = |n: u32| n.is_power_of_two() && (2..=MAX_WQ).contains(&n);
    let (sq_head, sq_tail, sq_ring) = ring(l.sq_ring);
    if !pow2(sq_ring) || sq_ring < sq_size || sq_size == 0 {
        return Err(what(format!(
            "sq_ring.size {sq_ring} is not a power of two from 2 to {MAX_WQ} of at least sq_size {sq_size} WQEs"
        )));
    }
    let (rq_head, rq_tail, rq_ring) = ring(l.rq_ring);
    if !pow2(rq_ring) || rq_ring != rq_size {
        return Err(what(format!(
            "rq_ring.size {rq_ring} is not rq_size {rq_size}, or not a power of two from 2 to {MAX_WQ}"
        )));
    }
    if sq_head >= sq_ring || sq_tail >= sq_ring || rq_head >= rq_ring || rq_tail >= rq_ring {
        return Err(what(format!(
            "a ring position is outside its ring (sq head {sq_head} tail {sq_tail} of {sq_ring}, rq head {rq_head} \
             tail {rq_tail} of {rq_ring})"
        )));
    }
    let (shift, mult) = (u8_at(&b, at(l.rq_wqe_size)), u8_at(&b, at(l.rq_wqe_size_multiplier)));
    if shift > 3 || u32::from(mult) != 1 << shift {
        return Err(what(format!("rq_wqe_size {shift} and rq_wqe_size_multiplier {mult} disagree")));
    }
    let conn_wqes = u16_at(&b, at(l.conn_wqes));
    if !matches!(conn_wqes, 0 | 1 | 3) {
        return Err(what(format!("conn_wqes is {conn_wqes}, not 0, 1 or 3")));
    }
    let (sq_base, rq_base) = (u64_at(&b, at(l.sq_base)), u64_at(&b, at(l.rq_base)));
    let sq_bytes = u64::from(sq_ring) * QUANTUM_SIZE as u64;
    if sq_base == 0 || sq_base % HW_PAGE != 0 || rq_base < sq_base.saturating_add(sq_bytes) || rq_base % HW_PAGE != 0 {
        return Err(what(format!(
            "sq_base {sq_base:#x} and rq_base {rq_base:#x} are not one page-aligned buffer with the SQ's {sq_ring} \
             quanta first"
        )));
    }
    let (trk, wrid) = (u64_at(&b, at(l.sq_wrtrk_array)), u64_at(&b, at(l.rq_wrid_array)));
    if trk == 0 || trk % 8 != 0 || wrid == 0 || wrid % 8 != 0 {
        return Err(what(format!(
            "its tables (sq_wrtrk_array {trk:#x}, rq_wrid_array {wrid:#x}) are null or misaligned"
        )));
    }
    let transport =
        if u32_at(&b, at(l.qp_caps)) & QP_CAPS_SEND_WITH_IMM != 0 { Transport::Roce } else { Transport::Iwarp };
    let config =
        QpConfig { qp_num: qpn, qp_type, transport, sq_quanta: sq_ring, rq_wqes: rq_ring, rq_shift: shift, conn_wqes };
    let foreign = RdmaCoreQp {
        qp_uk: (qp as *mut u8).wrapping_add(u.qp),
        sq_wrtrk: trk as usize as *const u8,
        rq_wrid: wrid as usize as *const u64,
        sq_base: sq_base as usize as *const u8,
        sq_size: sq_ring,
        rq_size: rq_ring,
        layout: *l,
        sq_here: send_cq == this,
        rq_here: recv_cq == this,
    };
    Ok(PrivateQp { qpn, handle: qp as u64 + u.qp as u64, config, qp: foreign })
}
