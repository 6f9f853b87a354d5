//! WQEs as an application posts them (rdma-core's `mlx5_post_recv`, `mlx5_post_srq_recv`
//! and `mlx5_post_send` layouts), for a model's work queues: where a poller copies the
//! data a CQE carries inline ([`crate::Registry::set_recv_wqes`], [`crate::Registry::set_send_wqes`]).

use dvcq_uapi::mlx5::opcode::wqe_opcode;

/// One scatter entry: `struct mlx5_wqe_data_seg`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataSeg {
    /// Where the data goes.
    pub addr: u64,
    /// How many bytes it takes.
    pub len: u32,
    /// The memory key.
    pub lkey: u32,
}

impl DataSeg {
    /// The segment's 16 bytes: byte count, lkey, address, big-endian.
    pub fn bytes(&self) -> [u8; 16] {
        let mut b = [0; 16];
        b[..4].copy_from_slice(&self.len.to_be_bytes());
        b[4..8].copy_from_slice(&self.lkey.to_be_bytes());
        b[8..].copy_from_slice(&self.addr.to_be_bytes());
        b
    }
}

/// rdma-core's lkey for "no more segments" (`MLX5_INVALID_LKEY`).
pub const INVALID_LKEY: u32 = 0x100;

/// A receive WQE of `stride` bytes: `segs`, then (where there is room) the terminator
/// rdma-core writes after a short list (byte count 0, [`INVALID_LKEY`]); `first`, if any,
/// the 16 bytes before the list (an SRQ WQE's next segment, a signature segment).
pub fn recv_wqe(first: Option<[u8; 16]>, segs: &[DataSeg], stride: usize) -> Vec<u8> {
    let mut w: Vec<u8> = first.iter().flatten().copied().collect();
    for s in segs {
        w.extend_from_slice(&s.bytes());
    }
    if w.len() + 16 <= stride {
        w.extend_from_slice(&DataSeg { addr: 0, len: 0, lkey: INVALID_LKEY }.bytes());
    }
    w.resize(stride.max(w.len()), 0);
    w
}

/// An SRQ WQE's next segment: the index of the WQE after it in the free list.
pub fn srq_next(next_wqe_index: u16) -> [u8; 16] {
    let mut b = [0; 16];
    b[2..4].copy_from_slice(&next_wqe_index.to_be_bytes());
    b
}

/// A send WQE for `opcode` (`MLX5_OPCODE_*`) at `wqe_index` of QP `qpn`: the control
/// segment (opcode and index, QPN and size in 16-byte units), a remote address segment for
/// RDMA and atomic opcodes, an atomic segment for atomics, then `segs`; padded to whole
/// 64-byte basic blocks.
pub fn send_wqe(opcode: u8, wqe_index: u16, qpn: u32, segs: &[DataSeg]) -> Vec<u8> {
    let middle: usize = match opcode {
        wqe_opcode::RDMA_READ | wqe_opcode::RDMA_WRITE | wqe_opcode::RDMA_WRITE_IMM => 1,
        wqe_opcode::ATOMIC_CS | wqe_opcode::ATOMIC_FA => 2,
        _ => 0,
    };
    let ds = (1 + middle + segs.len()) as u32;
    let mut w = Vec::with_capacity(64);
    w.extend_from_slice(&((u32::from(wqe_index) << 8) | u32::from(opcode)).to_be_bytes());
    w.extend_from_slice(&((qpn << 8) | (ds & 0x3f)).to_be_bytes());
    w.extend_from_slice(&[0; 8]);
    // The remote address (and atomic) segments: values a poller never reads.
    w.resize(16 * (1 + middle), 0xee);
    for s in segs {
        w.extend_from_slice(&s.bytes());
    }
    w.resize(w.len().div_ceil(64) * 64, 0);
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wqes_have_rdma_cores_layout() {
        let s = DataSeg { addr: 0x1122_3344_5566_7788, len: 0x40, lkey: 0xabcd };
        assert_eq!(s.bytes(), [0, 0, 0, 0x40, 0, 0, 0xab, 0xcd, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88]);
        let r = recv_wqe(None, &[s], 64);
        assert_eq!((r.len(), &r[16..20], &r[20..24]), (64, &[0u8; 4][..], &INVALID_LKEY.to_be_bytes()[..]));
        // A full list has no terminator; an SRQ WQE starts with its next segment.
        assert_eq!(recv_wqe(None, &[s, s], 32).len(), 32);
        assert_eq!(&recv_wqe(Some(srq_next(7)), &[s], 32)[..16], &srq_next(7));
        assert_eq!(srq_next(0x0102)[2..4], [1, 2]);
        let w = send_wqe(wqe_opcode::ATOMIC_FA, 0x0203, 0x12, &[s]);
        assert_eq!((w.len(), &w[..4], &w[4..8]), (64, &[0, 2, 3, 0x12][..], &[0, 0, 0x12, 4][..]));
        assert_eq!(&w[48..64], &s.bytes());
        assert_eq!(send_wqe(wqe_opcode::RDMA_READ, 0, 1, &[s; 3]).len(), 128);
    }
}
