//! RC atomics on the emulated ConnectX: compare-and-swap and fetch-and-add
//! (`MLX5_OPCODE_ATOMIC_CS`, `MLX5_OPCODE_ATOMIC_FA`).
//!
//! libmlx5 (`providers/mlx5/qp.c` `mlx5_post_send`) writes the control segment, the remote
//! address segment, the atomic segment (`struct mlx5_wqe_atomic_seg`: `swap_add` then
//! `compare`, both big-endian; fetch-and-add puts the addend in `swap_add`) and one data
//! segment of 8 bytes for the original value. The responder keeps the 8-byte operand
//! big-endian, as a ConnectX does, updates it atomically (against the host CPU too), and
//! the value it found lands in the requester's local entry as it was in memory
//! (big-endian). The region must allow `IBV_ACCESS_REMOTE_ATOMIC` and the address must be
//! 8-byte aligned.

use super::{find_mr, Outcome};
use crate::emulator::Emulator;
use crate::objects::Qp;
use crate::recv::RecvWqe;
use crate::wqe::{Gather, Raddr};
use dvcq_uapi::mlx5::opcode::{syndrome, wqe_opcode};
use std::sync::atomic::{AtomicU64, Ordering};

/// `IBV_ACCESS_REMOTE_ATOMIC`.
pub(crate) const ACCESS_REMOTE_ATOMIC: u32 = 8;
/// The operand's size.
pub(crate) const SIZE: u32 = 8;
/// Where the atomic segment sits in the WQE: after the control and remote address
/// segments.
pub(crate) const SEG_AT: usize = 32;
/// Where the data segment sits: after the atomic segment.
pub(crate) const DATA_AT: usize = SEG_AT + 16;

/// An atomic operation on the responder's 8 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AtomicOp {
    /// Writes `swap` when the value is `compare`.
    CompareSwap { compare: u64, swap: u64 },
    /// Adds `add`, wrapping.
    FetchAdd { add: u64 },
}

impl AtomicOp {
    /// The operation of WQE opcode `opcode` from its atomic segment `seg` (16 bytes, as
    /// libmlx5 wrote it, or as the wire carries it); `None` for another opcode.
    pub(crate) fn parse(opcode: u8, seg: &[u8]) -> Option<AtomicOp> {
        let swap_add = u64::from_be_bytes(seg.get(..8)?.try_into().ok()?);
        let compare = u64::from_be_bytes(seg.get(8..16)?.try_into().ok()?);
        match opcode {
            wqe_opcode::ATOMIC_CS => Some(AtomicOp::CompareSwap { compare, swap: swap_add }),
            wqe_opcode::ATOMIC_FA => Some(AtomicOp::FetchAdd { add: swap_add }),
            _ => None,
        }
    }

    /// The value that replaces `old`.
    pub(crate) fn apply(self, old: u64) -> u64 {
        match self {
            AtomicOp::CompareSwap { compare, swap } => {
                if old == compare {
                    swap
                } else {
                    old
                }
            }
            AtomicOp::FetchAdd { add } => old.wrapping_add(add),
        }
    }
}

/// Runs `op` on the big-endian operand at `host` and returns the 8 bytes it found there.
///
/// # Safety
///
/// `host` is 8-byte aligned, live, writable memory of a registered region.
pub(crate) unsafe fn run_at(host: u64, op: AtomicOp) -> [u8; 8] {
    // SAFETY: as the caller guarantees; the application may touch the word concurrently, so it is accessed atomically.
    let word = unsafe { AtomicU64::from_ptr(host as usize as *mut u64) };
    let mut raw = word.load(Ordering::Acquire);
    loop {
        let new = op.apply(u64::from_be(raw)).to_be();
        match word.compare_exchange_weak(raw, new, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return raw.to_ne_bytes(),
            Err(now) => raw = now,
        }
    }
}

/// The responder's side: the region of `peer` (context `pfd`) under `raddr` must allow
/// remote atomics and hold 8 aligned bytes there. The bytes found, or the requester's
/// syndrome; a refused request moves the responder's QP to the error state too, as an
/// RC responder that NAKs an access does (what the requester pipelined after it is not
/// executed).
pub(crate) fn respond(e: &mut Emulator, pfd: i32, peer: &Qp, raddr: Raddr, op: AtomicOp) -> Result<[u8; 8], u8> {
    let r = respond_at(e, pfd, peer, raddr, op);
    if r.is_err() {
        super::set_state(e, pfd, peer.qpn, crate::objects::QpState::Err);
    }
    r
}

fn respond_at(e: &Emulator, pfd: i32, peer: &Qp, raddr: Raddr, op: AtomicOp) -> Result<[u8; 8], u8> {
    let ctx = e.contexts.get(&pfd).ok_or(syndrome::REMOTE_OP_ERR)?;
    if raddr.addr % u64::from(SIZE) != 0 {
        return Err(syndrome::REMOTE_INVAL_REQ_ERR);
    }
    let regions = super::window::remote_regions(ctx, peer.qpn);
    let host = find_mr(regions.iter(), peer.pd, raddr.rkey, raddr.addr, SIZE.into(), ACCESS_REMOTE_ATOMIC, |m| m.rkey)
        .ok_or(syndrome::REMOTE_ACCESS_ERR)?;
    // SAFETY: host..host+8 lies in a registered region of the peer (directly or under a bound window) allowing remote atomics, checked above and live until DEREG_MR, which needs the lock this thread holds; iova and host address share their alignment within a page.
    Ok(unsafe { run_at(host, op) })
}

impl Emulator {
    /// An atomic between two QPs of this process: the local entry is checked first (it
    /// must take 8 bytes), then the peer's operand is updated and its old value lands
    /// locally.
    pub(super) fn atomic_local(
        &mut self,
        fd: i32,
        qp: &Qp,
        peer: (i32, &Qp),
        opcode: u8,
        units: &[u8],
        g: &Gather,
    ) -> Outcome {
        let Some(op) = units.get(SEG_AT..DATA_AT).and_then(|s| AtomicOp::parse(opcode, s)) else {
            return Outcome::Failed(syndrome::LOCAL_QP_OP_ERR);
        };
        let into = match local_entry(g) {
            Ok(i) => i,
            Err(s) => return Outcome::Failed(s),
        };
        // The reply's landing place is checked before the request goes: a bad lkey fails
        // the WQE and leaves the remote value alone.
        if let Some(w) = &into {
            if let Err(s) = self.scatter(fd, qp.pd, w, &[0; 8]) {
                return Outcome::Failed(s);
            }
        }
        match respond(self, peer.0, peer.1, Raddr::parse(&units[16..32]), op) {
            Ok(old) => {
                if let Some(w) = &into {
                    if let Err(s) = self.scatter(fd, qp.pd, w, &old) {
                        return Outcome::Failed(s);
                    }
                }
                Outcome::Done(SIZE)
            }
            Err(s) => Outcome::Failed(s),
        }
    }
}

/// The local entry an atomic's result lands in (none when the WR had no entry).
///
/// # Errors
///
/// `LOCAL_LENGTH_ERR` for inline data or more than one entry.
pub(crate) fn local_entry(g: &Gather) -> Result<Option<RecvWqe>, u8> {
    match g {
        Gather::Segs(s) if s.is_empty() => Ok(None),
        Gather::Segs(s) if s.len() == 1 => {
            let (addr, _, lkey) = s[0];
            Ok(Some(RecvWqe { index: 0, sges: vec![(addr, SIZE, lkey)] }))
        }
        _ => Err(syndrome::LOCAL_LENGTH_ERR),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_atomic_segment_reads_as_libmlx5_writes_it() {
        let mut seg = [0u8; 16];
        seg[..8].copy_from_slice(&0x1112_1314_1516_1718u64.to_be_bytes());
        seg[8..].copy_from_slice(&0x0102_0304_0506_0708u64.to_be_bytes());
        assert_eq!(
            AtomicOp::parse(wqe_opcode::ATOMIC_CS, &seg),
            Some(AtomicOp::CompareSwap { compare: 0x0102_0304_0506_0708, swap: 0x1112_1314_1516_1718 })
        );
        assert_eq!(
            AtomicOp::parse(wqe_opcode::ATOMIC_FA, &seg),
            Some(AtomicOp::FetchAdd { add: 0x1112_1314_1516_1718 })
        );
        assert_eq!(AtomicOp::parse(wqe_opcode::SEND, &seg), None);
        assert_eq!(AtomicOp::parse(wqe_opcode::ATOMIC_FA, &seg[..8]), None);
    }

    #[test]
    fn operands_are_big_endian_in_memory_and_the_old_value_comes_back_as_found() {
        let mut word = 0u64;
        let at = std::ptr::addr_of_mut!(word) as u64;
        // SAFETY: a live, aligned local.
        let old = unsafe { run_at(at, AtomicOp::FetchAdd { add: 0x0102 }) };
        assert_eq!(old, [0; 8]);
        assert_eq!(word.to_ne_bytes(), 0x0102u64.to_be_bytes());
        // SAFETY: as above.
        let old = unsafe { run_at(at, AtomicOp::CompareSwap { compare: 0x0102, swap: 7 }) };
        assert_eq!(old, 0x0102u64.to_be_bytes());
        // A compare that misses leaves the value.
        // SAFETY: as above.
        let old = unsafe { run_at(at, AtomicOp::CompareSwap { compare: 0x0102, swap: 9 }) };
        assert_eq!(old, 7u64.to_be_bytes());
        assert_eq!(word.to_ne_bytes(), 7u64.to_be_bytes());
        assert_eq!(AtomicOp::FetchAdd { add: 2 }.apply(u64::MAX), 1, "wraps");
    }

    #[test]
    fn an_atomic_takes_one_entry_of_eight_bytes() {
        assert_eq!(local_entry(&Gather::Segs(vec![])), Ok(None));
        assert_eq!(
            local_entry(&Gather::Segs(vec![(0x1000, 8, 5)])),
            Ok(Some(RecvWqe { index: 0, sges: vec![(0x1000, 8, 5)] }))
        );
        assert!(local_entry(&Gather::Inline(vec![0; 8])).is_err());
        assert!(local_entry(&Gather::Segs(vec![(0, 8, 5), (8, 8, 5)])).is_err());
    }
}
