//! Inline scatter (rdma-core `providers/mlx5/qp.c` `mlx5_copy_to_recv_wqe`,
//! `mlx5_copy_to_send_wqe`, called from `cq.c`; turned on in `verbs.c` `create_qp` with
//! `MLX5_QP_FLAG_SCATTER_CQE`): data the device put in a CQE instead of the buffers the WQE
//! names (format 1: up to 32 bytes at the start of the cqe64; format 2: up to 64 in the first
//! half of a 128-byte CQE), copied where the WQE says, as rdma-core's poll does. rdma-core
//! turns it on for the responder side of RC and DC QPs by default (small receives); a
//! requester gets READ and atomic responses inline only on a QP created with `sq_sig_all` or
//! `MLX5DV_QP_CREATE_ALLOW_SCATTER_TO_CQE`.
//!
//! The copy reads the completed WQE's 16-byte data segments (`byte_count`, `lkey`, `addr`,
//! big-endian) from the work queue's buffer, which the application registers
//! ([`crate::Registry::set_recv_wqes`] and its siblings), only for a WQE the registry holds
//! as posted. The segments are untrusted bytes: each part of the data is written only if
//! its range lies inside the memory region its lkey names
//! ([`crate::Registry::add_memory_region`]); otherwise the copy stops with
//! `IBV_WC_LOC_PROT_ERR`, the status the device gives a receive whose segment leaves its
//! memory region (rdma-core's copy trusts the segments and writes through them).

use crate::registry::RegistryError;
use dvcq_provider::{MemoryRegions, WcStatus, WqBuffer};
use dvcq_uapi::mlx5::opcode::wqe_opcode;

/// Bytes of a data segment (`struct mlx5_wqe_data_seg`), and of every other WQE segment.
const SEG: usize = 16;
/// Bytes of a send WQE basic block.
const SEND_WQEBB: usize = 64;

/// The most inline data a CQE of format 1 (in the cqe64) or 2 (in a 128-byte CQE's first
/// half) carries; `None` for other formats.
pub(crate) const fn inline_capacity(format: u8) -> Option<usize> {
    match format {
        dvcq_uapi::mlx5::opcode::cqe_format::INLINE_SCATTER_32 => Some(32),
        dvcq_uapi::mlx5::opcode::cqe_format::INLINE_SCATTER_64 => Some(64),
        _ => None,
    }
}

/// A receive queue's WQEs in memory: a QP's RQ (`mlx5dv_qp`'s `rq.buf`, `rq.stride`) or an
/// SRQ (`mlx5dv_srq`'s `buf`, `stride`). A WQE is an array of data segments; an SRQ WQE's
/// first 16 bytes are its next segment, and with `signature` a QP's RQ WQE's are a
/// signature segment.
#[derive(Debug, Clone)]
pub(crate) struct RecvWqes {
    buf: WqBuffer,
    shift: u32,
    signature: bool,
}

impl RecvWqes {
    /// `stride` bytes per WQE (a power of two from 16); `signature`: the QP was created
    /// with WQE signatures (rdma-core's `wq_sig`; never for an SRQ).
    ///
    /// # Errors
    ///
    /// [`RegistryError::BadWqeStride`] for another stride.
    pub(crate) fn new(buf: WqBuffer, stride: u32, signature: bool) -> Result<Self, RegistryError> {
        if !stride.is_power_of_two() || stride < SEG as u32 {
            return Err(RegistryError::BadWqeStride { stride });
        }
        Ok(Self { buf, shift: stride.trailing_zeros(), signature })
    }

    /// The buffer.
    pub(crate) fn buffer(&self) -> &WqBuffer {
        &self.buf
    }

    /// Bytes per WQE.
    pub(crate) fn stride(&self) -> u32 {
        1 << self.shift
    }

    /// Whether each WQE starts with a signature segment (a QP's `wq_sig`).
    pub(crate) fn signature(&self) -> bool {
        self.signature
    }

    /// Copies `data` into receive WQE `idx` (rdma-core `mlx5_copy_to_recv_wqe` for a QP's RQ,
    /// `mlx5_copy_to_recv_srq` for an SRQ); with `write` false, only finds out whether it
    /// fits (a peek).
    ///
    /// rdma-core takes as many segments as fit in a WQE from where the data segments start,
    /// so with a next or signature segment the last one it may read lies in the next WQE;
    /// kept, within the buffer.
    pub(crate) fn scatter(&self, srq: bool, idx: u32, data: &[u8], to: Scatter<'_>) -> Result<(), WcStatus> {
        let skip = if srq || self.signature { SEG } else { 0 };
        let start = ((idx as usize) << self.shift) + skip;
        let max = 1usize << (self.shift - 4);
        to_segments(&self.buf, start, max, data, to).map_err(Stop::status)
    }

    /// The common case of [`RecvWqes::scatter`] for a QP's RQ, for the poll's fast path:
    /// true when WQE `idx`'s first data segment takes all of `data` (its byte count at
    /// least the data's length, a key other than the null key) and the write went inside
    /// the memory region of its key, which is exactly when `scatter` would copy the same
    /// bytes there and succeed; false, having written nothing, otherwise (a WQE with a
    /// signature segment, several segments, the null key, a range outside its region, a
    /// WQE outside the buffer), for `scatter` to decide.
    #[inline(always)]
    pub(crate) fn scatter_whole(&self, idx: u32, data: &[u8], to: Scatter<'_>) -> bool {
        let start = (idx as usize) << self.shift;
        let (Some(head), Some(addr), false) = (self.buf.bytes8(start), self.buf.bytes8(start + 8), self.signature)
        else {
            return false;
        };
        let [c0, c1, c2, c3, k0, k1, k2, k3] = head;
        let byte_count = u32::from_be_bytes([c0, c1, c2, c3]) as usize;
        let lkey = u32::from_be_bytes([k0, k1, k2, k3]);
        byte_count >= data.len()
            && to.null_lkey != Some(lkey)
            && to.write
            && to.regions.write(lkey, u64::from_be_bytes(addr), data)
    }
}

/// A send queue's WQEs in memory (`mlx5dv_qp`'s `sq.buf`): 64-byte basic blocks, as many as
/// the SQ's `wqe_cnt`.
#[derive(Debug, Clone)]
pub(crate) struct SendWqes {
    buf: WqBuffer,
}

impl SendWqes {
    /// The SQ's buffer.
    pub(crate) fn new(buf: WqBuffer) -> Self {
        Self { buf }
    }

    /// The buffer.
    pub(crate) fn buffer(&self) -> &WqBuffer {
        &self.buf
    }

    /// Copies `data`, a READ or atomic response, into the scatter list of the send WQE at
    /// `wqe_counter` of an SQ of `wqe_cnt` basic blocks (rdma-core `mlx5_copy_to_send_wqe`):
    /// `IBV_WC_GENERAL_ERR` on a QP that is not RC, `IBV_WC_REM_INV_REQ_ERR` for a WQE of
    /// another opcode, `IBV_WC_LOC_LEN_ERR` when the list holds less. A list that runs past
    /// the SQ's end goes on at its start. With `write` false, only finds out (a peek).
    pub(crate) fn scatter(
        &self,
        wqe_cnt: u32,
        rc: bool,
        wqe_counter: u16,
        data: &[u8],
        to: Scatter<'_>,
    ) -> Result<(), WcStatus> {
        let end = wqe_cnt as usize * SEND_WQEBB;
        let ctrl = (wqe_counter as usize & (wqe_cnt as usize).wrapping_sub(1)) * SEND_WQEBB;
        if !rc {
            return Err(WcStatus::GeneralErr);
        }
        // The control segment: `opmod_idx_opcode` (opcode in its low byte) and `qpn_ds`
        // (the WQE's size in 16-byte units in its low 6 bits).
        let Some(c) = self.buf.bytes8(ctrl) else {
            return Err(WcStatus::LocLenErr);
        };
        // After the control segment, a remote address segment, and for atomics an atomic
        // segment.
        let segs_before = match c[3] {
            wqe_opcode::RDMA_READ => 2,
            wqe_opcode::ATOMIC_CS | wqe_opcode::ATOMIC_FA => 3,
            _ => return Err(WcStatus::RemInvReqErr),
        };
        let start = ctrl + segs_before * SEG;
        let max = usize::from(c[7] & 0x3f).saturating_sub(segs_before);
        let to_end = end.saturating_sub(start) / SEG;
        let wrapped = if max > to_end {
            match to_segments(&self.buf, start, to_end, data, to) {
                Err(Stop::Short(done)) => {
                    to_segments(&self.buf, 0, max - to_end, data.get(done..).unwrap_or_default(), to)
                }
                done => done,
            }
        } else {
            to_segments(&self.buf, start, max, data, to)
        };
        wrapped.map_err(Stop::status)
    }
}

/// Where a copy may write, and whether it does: the registry's memory regions, the null
/// memory key, and `write` false for a peek (which finds out what the copy would give).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scatter<'a> {
    pub(crate) regions: &'a MemoryRegions,
    pub(crate) null_lkey: Option<u32>,
    pub(crate) write: bool,
}

/// Why a copy stopped before the data ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// The segments (or the buffer) ended after this many bytes: `IBV_WC_LOC_LEN_ERR`.
    Short(usize),
    /// A segment's range is outside the memory region of its lkey (or no region has that
    /// key, or its address is null): `IBV_WC_LOC_PROT_ERR`.
    Protection,
}

impl Stop {
    fn status(self) -> WcStatus {
        match self {
            Stop::Short(_) => WcStatus::LocLenErr,
            Stop::Protection => WcStatus::LocProtErr,
        }
    }
}

/// rdma-core `copy_to_scat`: copies `data` into the data segments from byte `start` of
/// `buf`, at most `max` of them, each taking up to its byte count; a segment of the null
/// memory key (`ibv_alloc_null_mr`, rdma-core's `dump_fill_mkey`) takes its share without a
/// copy. Every other share is written only if it lies inside the memory region of the
/// segment's lkey (checked for a peek too, so that it reports what the copy gives).
fn to_segments(buf: &WqBuffer, start: usize, max: usize, data: &[u8], to: Scatter<'_>) -> Result<(), Stop> {
    let mut done = 0;
    if data.is_empty() {
        return Ok(());
    }
    for i in 0..max {
        let off = start + i * SEG;
        let (Some(head), Some(addr)) = (buf.bytes8(off), buf.bytes8(off + 8)) else {
            return Err(Stop::Short(done));
        };
        let [c0, c1, c2, c3, k0, k1, k2, k3] = head;
        let byte_count = u32::from_be_bytes([c0, c1, c2, c3]) as usize;
        let lkey = u32::from_be_bytes([k0, k1, k2, k3]);
        let addr = u64::from_be_bytes(addr);
        let rest = data.get(done..).unwrap_or_default();
        let part = rest.get(..byte_count).unwrap_or(rest);
        if !part.is_empty() && to.null_lkey != Some(lkey) {
            let fits =
                if to.write { to.regions.write(lkey, addr, part) } else { to.regions.contains(lkey, addr, part.len()) };
            if !fits {
                return Err(Stop::Protection);
            }
        }
        done += part.len();
        if done == data.len() {
            return Ok(());
        }
    }
    Err(Stop::Short(done))
}
