//! Software-generated flush completions on GEN1/GEN2, as rdma-core's
//! `providers/irdma/uk.c` `irdma_uk_cq_poll_cmpl` makes them from the flush CQE the device
//! writes once the kernel flushes the QP (`drivers/infiniband/hw/irdma/hw.c`
//! `irdma_flush_wqes`).
//!
//! Hardware writes one flush CQE per flushed queue. rdma-core then "parks" that slot: it
//! does not advance the CQ head, synthesises one `IBV_WC_WR_FLUSH_ERR` completion per
//! outstanding WQE from its own work-queue state on each poll, and rewrites the parked
//! CQE's qword3 in place (minor → `FLUSH_GENERAL_ERR`, wqe_idx → new tail) so that only the
//! first completion carries the specific flush code.
//!
//! dvcq reproduces the observable result without writing the ring: the poller keeps a
//! `parked` flag for the CQE at its head, and while it is set reads the minor as
//! `FLUSH_GENERAL_ERR` and an SQ CQE's wqe_idx as the SQ tail. Only the connection-WQE check
//! reads that wqe_idx; the flush path ignores it and walks from the ring tail. (A provider
//! that polls the same ring after dvcq would see the original qword3 again: dvcq does not
//! share a ring with rdma-core's poller, so this is deliberate.) GEN3 writes one CQE per
//! flushed WR; the same walk is used and the head always advances.

use crate::registry::{Qp, WrTrk};
use dvcq_uapi::irdma::codes::sq_op;

/// The next flushed SQ WR: walks from the SQ tail, skipping NOP pads (each advances the
/// tail by its quanta), and returns `(quanta index, tracking entry, new tail)`, or `None`
/// when only NOPs or nothing remain (rdma-core's ENOENT). Unsignaled WRs are reported too:
/// `irdma_uk_cq_poll_cmpl` takes each from `sq_wrtrk_array`, skipping `IRDMAQP_OP_NOP`.
#[inline]
pub(crate) fn next_sq(qp: &Qp) -> Option<(u32, WrTrk, u32)> {
    let mask = qp.sq.mask();
    let mut tail = qp.sq.tail;
    while tail != qp.sq.head {
        let trk = qp.sq_trk.get(tail as usize).copied().unwrap_or_default();
        // Not followed: an entry no post wrote has 0 quanta, and rdma-core's walk
        // (`IRDMA_RING_SET_TAIL(tail + quanta)`) would then stay on it, reporting the same
        // flushed WQE on every poll without end; the walk moves one quantum past it.
        let next = (tail + u32::from(trk.quanta.max(1))) & mask;
        if trk.opcode != sq_op::NOP {
            return Some((tail, trk, next));
        }
        tail = next;
    }
    None
}

/// The next flushed RQ WR: the RQ tail, or `None` when the RQ is empty (`irdma_uk_cq_poll_cmpl`
/// ignores an RQ flush CQE's wqe_idx).
#[inline]
pub(crate) fn next_rq(qp: &Qp) -> Option<u32> {
    qp.rq.more_work().then_some(qp.rq.tail)
}

/// Whether the parked flush CQE stays parked after the queue's tail moved to `new_tail`:
/// only on GEN1/GEN2, and only while the queue still has work (`IRDMA_RING_MORE_WORK`).
#[inline]
pub(crate) fn stays_parked(parks: bool, head: u32, new_tail: u32) -> bool {
    parks && head != new_tail
}
