//! The 8-byte mini-CQE of CQE compression (shared/spec/mlx5.md §9.2).
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
        u32::from_be_bytes([
            self.bytes[at],
            self.bytes[at + 1],
            self.bytes[at + 2],
            self.bytes[at + 3],
        ])
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
    /// FTAG_STRIDX: the 24-bit flow tag (bytes 0-1 are bits 23:8, byte 4 bits 7:0).
    #[inline(always)]
    pub const fn flow_tag(&self) -> u32 {
        ((self.be16(0) as u32) << 8) | self.bytes[4] as u32
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
    /// Requester mini-CQE: byte 2, the WQE opcode (kernel/UCX placement, spec §9.2).
    #[inline(always)]
    pub const fn s_wqe_opcode(&self) -> u8 {
        self.bytes[2]
    }
}
