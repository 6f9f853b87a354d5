//! The 8-byte mini-CQE of CQE compression (kernel `include/linux/mlx5/device.h`
//! `struct mlx5_mini_cqe8`; DPDK `drivers/common/mlx5/mlx5_prm.h` `struct mlx5_mini_cqe8`).
//!
//! A mini-CQE's meaning depends on the CQ's mini-CQE format and on whether the session is
//! requester or responder, so the bytes are kept whole and each format has its accessors.

use bytemuck::{Pod, Zeroable};
use core::mem::size_of;
use static_assertions::const_assert_eq;

/// One mini-CQE (`struct mlx5_mini_cqe8`), all fields big-endian.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct MiniCqe {
    /// The raw bytes.
    pub bytes: [u8; 8],
}

const_assert_eq!(size_of::<MiniCqe>(), 8);

/// Eight mini-CQEs filling one 64-byte slot (basic layout array, or enhanced block).
pub type MiniCqeArray = [MiniCqe; 8];
const_assert_eq!(size_of::<MiniCqeArray>(), 64);

/// Most mini-CQEs in one enhanced-layout block: the block's opcode nibble holds the count
/// minus one (kernel `en_rx.c` `mlx5e_decompress_enhanced_cqe`), and UCX asserts at most
/// seven (`src/uct/ib/mlx5/ib_mlx5.c`).
pub const MAX_ENHANCED_MINIS: usize = 7;

/// Mini-CQEs per basic-layout array slot: 64 bytes of 8-byte mini-CQEs (kernel `en_rx.c`
/// `mlx5e_decompress_cqes_start`; DPDK `drivers/net/mlx5/mlx5_rx.c` `mlx5_rx_poll_len`).
pub const MINIS_PER_ARRAY: usize = 8;

/// Hardware mini-CQE format codes (`mini_cqe_res_format`, DPDK `mlx5_prm.h`).
pub mod mini_format {
    /// RX hash result + byte count.
    pub const HASH: u8 = 0;
    /// Checksum + byte count.
    pub const CSUM: u8 = 1;
    /// Flow tag + stride index + 24-bit byte count.
    pub const FTAG_STRIDX: u8 = 2;
    /// Checksum + stride index + byte count.
    pub const CSUM_STRIDX: u8 = 3;
    /// L3/L4 header type + stride index + byte count (`mini_cqe_res_format_ext = 1`).
    pub const L34H_STRIDX: u8 = 4;
}

impl MiniCqe {
    #[inline(always)]
    const fn be16(&self, at: usize) -> u16 {
        u16::from_be_bytes([self.bytes[at], self.bytes[at + 1]])
    }
    #[inline(always)]
    const fn be32(&self, at: usize) -> u32 {
        u32::from_be_bytes([self.bytes[at], self.bytes[at + 1], self.bytes[at + 2], self.bytes[at + 3]])
    }
    /// Bytes 4-7: byte count (all formats except FTAG_STRIDX).
    #[inline(always)]
    pub const fn byte_cnt(&self) -> u32 {
        self.be32(4)
    }
    /// Bytes 0-3: RX hash result (HASH format).
    #[inline(always)]
    pub const fn rx_hash_result(&self) -> u32 {
        self.be32(0)
    }
    /// Bytes 0-1: checksum (CSUM, CSUM_STRIDX).
    #[inline(always)]
    pub const fn checksum(&self) -> u16 {
        self.be16(0)
    }
    /// Bytes 2-3: stride index (the `_STRIDX` formats).
    #[inline(always)]
    pub const fn stride_idx(&self) -> u16 {
        self.be16(2)
    }
    /// FTAG_STRIDX: the 24-bit flow tag. Byte 4 holds bits 23:16 and bytes 0-1 bits 15:0,
    /// so that the tag reads as the same bytes a regular CQE's `sop_drop_qpn` bytes 57-59
    /// hold (DPDK `rxq_cq_to_mbuf` builds the mark from a mini-CQE that way and compares
    /// it with the regular CQE's word).
    #[inline(always)]
    pub const fn flow_tag(&self) -> u32 {
        ((self.bytes[4] as u32) << 16) | self.be16(0) as u32
    }
    /// FTAG_STRIDX: the 24-bit byte count in bytes 5-7.
    #[inline(always)]
    pub const fn byte_cnt24(&self) -> u32 {
        self.be32(4) & 0x00ff_ffff
    }
    /// L34H_STRIDX: the header type byte (same bit layout as cqe64 byte 29).
    #[inline(always)]
    pub const fn hdr_type(&self) -> u8 {
        self.bytes[0]
    }
    /// Requester mini-CQE: bytes 0-1, the WQE counter.
    #[inline(always)]
    pub const fn wqe_counter(&self) -> u16 {
        self.be16(0)
    }
    /// Requester mini-CQE: byte 2, the WQE opcode (the kernel's
    /// `struct mlx5_mini_cqe8` and UCX's `ib_mlx5.h` place it there).
    #[inline(always)]
    pub const fn s_wqe_opcode(&self) -> u8 {
        self.bytes[2]
    }

    const fn from_parts(a: [u8; 2], b: [u8; 2], c: [u8; 4]) -> Self {
        MiniCqe { bytes: [a[0], a[1], b[0], b[1], c[0], c[1], c[2], c[3]] }
    }
    /// A responder HASH mini-CQE: RX hash result in bytes 0-3, byte count in 4-7.
    pub const fn hash(rx_hash_result: u32, byte_cnt: u32) -> Self {
        let h = rx_hash_result.to_be_bytes();
        Self::from_parts([h[0], h[1]], [h[2], h[3]], byte_cnt.to_be_bytes())
    }
    /// A responder CSUM (`stride_idx` 0) or CSUM_STRIDX mini-CQE: checksum in bytes 0-1,
    /// stride index in 2-3, byte count in 4-7.
    pub const fn csum(checksum: u16, stride_idx: u16, byte_cnt: u32) -> Self {
        Self::from_parts(checksum.to_be_bytes(), stride_idx.to_be_bytes(), byte_cnt.to_be_bytes())
    }
    /// A responder FTAG_STRIDX mini-CQE: flow tag bits 15:0 in bytes 0-1, stride index in
    /// 2-3, flow tag bits 23:16 in byte 4, the 24-bit byte count in bytes 5-7.
    pub const fn ftag(flow_tag: u32, stride_idx: u16, byte_cnt24: u32) -> Self {
        let t = (flow_tag as u16).to_be_bytes();
        let c = (((flow_tag >> 16) & 0xff) << 24 | (byte_cnt24 & 0x00ff_ffff)).to_be_bytes();
        Self::from_parts(t, stride_idx.to_be_bytes(), c)
    }
    /// A responder L34H_STRIDX mini-CQE: header type in byte 0, stride index in bytes 2-3,
    /// byte count in 4-7.
    pub const fn l34h(hdr_type: u8, stride_idx: u16, byte_cnt: u32) -> Self {
        Self::from_parts([hdr_type, 0], stride_idx.to_be_bytes(), byte_cnt.to_be_bytes())
    }
    /// A requester mini-CQE: WQE counter in bytes 0-1, the WQE opcode in byte 2 (kernel and
    /// UCX placement; DPDK's `mlx5_prm.h` declares byte 3), byte count in 4-7.
    pub const fn requester(wqe_counter: u16, s_wqe_opcode: u8, byte_cnt: u32) -> Self {
        Self::from_parts(wqe_counter.to_be_bytes(), [s_wqe_opcode, 0], byte_cnt.to_be_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_round_trip_through_accessors() {
        let h = MiniCqe::hash(0xdead_beef, 1500);
        assert_eq!((h.rx_hash_result(), h.byte_cnt()), (0xdead_beef, 1500));
        let c = MiniCqe::csum(0xabcd, 7, 64);
        assert_eq!((c.checksum(), c.stride_idx(), c.byte_cnt()), (0xabcd, 7, 64));
        let f = MiniCqe::ftag(0x12_3456, 9, 0xab_cdef);
        assert_eq!((f.flow_tag(), f.stride_idx(), f.byte_cnt24()), (0x12_3456, 9, 0xab_cdef));
        let l = MiniCqe::l34h(0x29, 3, 99);
        assert_eq!((l.hdr_type(), l.stride_idx(), l.byte_cnt()), (0x29, 3, 99));
        let r = MiniCqe::requester(0x1234, 0x0a, 8);
        assert_eq!((r.wqe_counter(), r.s_wqe_opcode(), r.byte_cnt()), (0x1234, 0x0a, 8));
        assert_eq!(r.bytes, [0x12, 0x34, 0x0a, 0, 0, 0, 0, 8]);
    }

    /// The FTAG_STRIDX flow tag as DPDK reads it: on a little-endian host it builds the
    /// mark word from a mini-CQE as `(byte_cnt_flow & 0xff) << 8 | flow_tag_high << 16`
    /// (both fields read raw) and compares it with a regular CQE's raw `sop_drop_qpn`,
    /// whose bytes 1-3 in memory are the tag's bits 23:16, 15:8 and 7:0.
    #[test]
    fn flow_tag_bytes_match_dpdks_mark() {
        let m = MiniCqe { bytes: [0x34, 0x56, 0x00, 0x09, 0x12, 0x00, 0x05, 0xdc] };
        let byte_cnt_flow = u32::from_le_bytes([m.bytes[4], m.bytes[5], m.bytes[6], m.bytes[7]]);
        let flow_tag_high = u32::from(u16::from_le_bytes([m.bytes[0], m.bytes[1]]));
        let mark = ((byte_cnt_flow & 0xff) << 8) | (flow_tag_high << 16);
        let sop_drop_qpn_bytes = mark.to_le_bytes();
        let tag = u32::from_be_bytes(sop_drop_qpn_bytes) & 0x00ff_ffff;
        assert_eq!(tag, 0x12_3456);
        assert_eq!((m.flow_tag(), m.stride_idx(), m.byte_cnt24()), (0x12_3456, 9, 0x5dc));
        assert_eq!(MiniCqe::ftag(0x12_3456, 9, 0x5dc).bytes, m.bytes);
    }
}
