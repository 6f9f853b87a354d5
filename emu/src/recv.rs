//! The receive side of the device: taking the next receive WQE libmlx5 posted to a QP's RQ
//! or an SRQ (`providers/mlx5/qp.c` `mlx5_post_recv`, `srq.c` `mlx5_post_srq_recv`), and
//! scattering a message into its entries.

use crate::mlx5_abi::QP_FLAG_SIGNATURE;
use crate::objects::{Qp, Srq};
use std::sync::atomic::{AtomicU32, Ordering};

/// `MLX5_INVALID_LKEY`: ends a receive WQE's list when it is shorter than the WQE.
pub const INVALID_LKEY: u32 = 0x100;

/// A receive WQE the device took: its index (the responder CQE's `wqe_counter`) and its
/// scatter entries (address, length, lkey).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecvWqe {
    pub index: u16,
    pub sges: Vec<(u64, u32, u32)>,
}

/// Loads a big-endian doorbell word with acquire ordering.
///
/// # Safety
///
/// `addr` is a live, 4-byte aligned doorbell record word.
pub unsafe fn load_be32(addr: u64) -> u32 {
    // SAFETY: the caller guarantees an aligned, live word; the provider writes it with word-sized stores.
    u32::from_be(unsafe { AtomicU32::from_ptr(addr as usize as *mut u32) }.load(Ordering::Acquire))
}

/// Copies `out.len()` bytes of the application's memory at `addr`.
///
/// # Safety
///
/// `addr..addr + out.len()` is live, readable memory.
pub unsafe fn read_mem(addr: u64, out: &mut [u8]) {
    // SAFETY: as the caller guarantees; `out` is the emulator's own buffer.
    unsafe { std::ptr::copy_nonoverlapping(addr as usize as *const u8, out.as_mut_ptr(), out.len()) };
}

/// Parses the data segments of a receive WQE (after any next or signature segment) up to
/// the terminator or the WQE's end.
pub fn parse_sges(units: &[u8]) -> Vec<(u64, u32, u32)> {
    let mut sges = Vec::new();
    for s in units.chunks_exact(16) {
        let len = u32::from_be_bytes([s[0], s[1], s[2], s[3]]);
        let lkey = u32::from_be_bytes([s[4], s[5], s[6], s[7]]);
        if lkey == INVALID_LKEY {
            break;
        }
        let addr = u64::from_be_bytes(s[8..16].try_into().unwrap_or_default());
        if len != 0 {
            sges.push((addr, len, lkey));
        }
    }
    sges
}

/// The RQ WQE at the QP's consumer index, if libmlx5 has posted one there (its doorbell
/// record counts past it).
///
/// # Safety
///
/// The QP's buffer and doorbell record are live (the QP exists under the emulator lock).
pub unsafe fn peek_rq(qp: &Qp) -> Option<RecvWqe> {
    if qp.wq.rq_wqe_count == 0 {
        return None;
    }
    // SAFETY: the caller guarantees the doorbell record; word [0] is the RQ's.
    let posted = unsafe { load_be32(qp.wq.dbrec) } & 0xffff;
    if qp.rq_ci & 0xffff == posted {
        return None;
    }
    let stride = 1usize << qp.wq.rq_wqe_shift;
    let at = qp.wq.buf + (u64::from(qp.rq_ci & (qp.wq.rq_wqe_count - 1)) << qp.wq.rq_wqe_shift);
    let mut w = vec![0u8; stride];
    // SAFETY: the WQE lies in the RQ at the start of the QP's buffer (caller: live).
    unsafe { read_mem(at, &mut w) };
    let skip = if qp.wq.flags & QP_FLAG_SIGNATURE != 0 { 16 } else { 0 };
    Some(RecvWqe { index: qp.rq_ci as u16, sges: parse_sges(&w[skip..]) })
}

/// The SRQ WQE at the device's head, if libmlx5 has posted one (its counter is past what the
/// device took), and the index of the WQE after it.
///
/// # Safety
///
/// The SRQ's buffer and doorbell record are live (the SRQ exists under the emulator lock).
pub unsafe fn peek_srq(srq: &Srq) -> Option<(RecvWqe, u32)> {
    // SAFETY: the caller guarantees the doorbell record: one be32 counter.
    let posted = unsafe { load_be32(srq.dbrec) } & 0xffff;
    if srq.consumed & 0xffff == posted {
        return None;
    }
    let stride = 1usize << srq.wqe_shift;
    let index = srq.head & (srq.wqe_cnt - 1);
    let mut w = vec![0u8; stride];
    // SAFETY: WQE `index` of the SRQ's ring (caller: live).
    unsafe { read_mem(srq.buf + (u64::from(index) << srq.wqe_shift), &mut w) };
    // struct mlx5_wqe_srq_next_seg: rsvd[2], be16 next_wqe_index, ...
    let next = u32::from(u16::from_be_bytes([w[2], w[3]]));
    Some((RecvWqe { index: index as u16, sges: parse_sges(&w[16..]) }, next))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receive_lists_end_at_the_terminator_or_the_wqe() {
        let seg = |len: u32, lkey: u32, addr: u64| {
            let mut s = len.to_be_bytes().to_vec();
            s.extend_from_slice(&lkey.to_be_bytes());
            s.extend_from_slice(&addr.to_be_bytes());
            s
        };
        let mut w = seg(64, 0x15a, 0x1000);
        w.extend(seg(0, INVALID_LKEY, 0));
        w.extend(seg(8, 0x25a, 0x2000));
        assert_eq!(parse_sges(&w), [(0x1000, 64, 0x15a)]);
        // A full WQE has no terminator: every entry counts.
        let mut full = seg(64, 0x15a, 0x1000);
        full.extend(seg(8, 0x25a, 0x2000));
        assert_eq!(parse_sges(&full).len(), 2);
    }
}
