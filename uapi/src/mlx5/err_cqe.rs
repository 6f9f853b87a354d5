//! `struct mlx5_err_cqe` (rdma-core `providers/mlx5/mlx5dv.h`) and the signature-error CQE
//! (`struct mlx5_sigerr_cqe`, `providers/mlx5/cq.c`, parsed in `mlx5_parse_cqe`).
//!
//! rdma-core declares the error CQE's fields as plain `uint32_t`/`uint16_t`, but they are
//! big-endian in memory like every other CQE field: the same bytes are `struct mlx5_cqe64`'s
//! `__be32 srqn_uidx`, `__be32 sop_drop_qpn` and `__be16 wqe_counter`, and
//! `providers/mlx5/cq.c` `mlx5_parse_cqe` reads `srqn_uidx` of an error CQE with `be32toh`;
//! the types here say so.

use crate::endian::{Be16, Be32, Be64};
use crate::mlx5::cqe::{op_own, Cqe64, QPN_MASK};
use bytemuck::{Pod, Zeroable};
use core::mem::{offset_of, size_of};
use static_assertions::const_assert_eq;

/// The error CQE (opcodes `REQ_ERR` 13 and `RESP_ERR` 14).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct ErrCqe {
    /// Bytes 0-31: reserved (zero in real dumps).
    pub rsvd0: [u8; 32],
    /// Bytes 32-35: bits 23:0 SRQ number or user index, as `srqn_uidx`.
    pub srqn: Be32,
    /// Bytes 36-51: reserved.
    pub rsvd1: [u8; 16],
    /// Byte 52: hardware error syndrome (vendor-internal).
    pub hw_err_synd: u8,
    /// Byte 53: hardware syndrome type (vendor-internal).
    pub hw_synd_type: u8,
    /// Byte 54: vendor error syndrome, reported as `ibv_wc.vendor_err`.
    pub vendor_err_synd: u8,
    /// Byte 55: `MLX5_CQE_SYNDROME_*`.
    pub syndrome: u8,
    /// Bytes 56-59: bits 31:24 WQE opcode (requester), 23:0 QPN.
    pub s_wqe_opcode_qpn: Be32,
    /// Bytes 60-61: index of the failed (or flushed) WQE.
    pub wqe_counter: Be16,
    /// Byte 62: signature.
    pub signature: u8,
    /// Byte 63: opcode, format, SE, owner.
    pub op_own: u8,
}

const_assert_eq!(size_of::<ErrCqe>(), 64);
const_assert_eq!(offset_of!(ErrCqe, srqn), 32);
const_assert_eq!(offset_of!(ErrCqe, hw_err_synd), 52);
const_assert_eq!(offset_of!(ErrCqe, hw_synd_type), 53);
const_assert_eq!(offset_of!(ErrCqe, vendor_err_synd), 54);
const_assert_eq!(offset_of!(ErrCqe, syndrome), 55);
const_assert_eq!(offset_of!(ErrCqe, s_wqe_opcode_qpn), 56);
const_assert_eq!(offset_of!(ErrCqe, wqe_counter), 60);
const_assert_eq!(offset_of!(ErrCqe, signature), 62);
const_assert_eq!(offset_of!(ErrCqe, op_own), 63);
// The fields an error CQE shares with the cqe64 sit at the same offsets.
const_assert_eq!(offset_of!(ErrCqe, srqn), offset_of!(Cqe64, srqn_uidx));
const_assert_eq!(offset_of!(ErrCqe, s_wqe_opcode_qpn), offset_of!(Cqe64, sop_drop_qpn));
const_assert_eq!(offset_of!(ErrCqe, wqe_counter), offset_of!(Cqe64, wqe_counter));

impl ErrCqe {
    /// Reinterprets a cqe64 as an error CQE.
    #[inline(always)]
    pub fn from_cqe(cqe: &Cqe64) -> &ErrCqe {
        bytemuck::cast_ref(cqe)
    }
    /// The QPN, `s_wqe_opcode_qpn & 0xffffff`.
    #[inline(always)]
    pub const fn qpn(&self) -> u32 {
        self.s_wqe_opcode_qpn.get() & QPN_MASK
    }
    /// The WQE opcode of the failed send WQE (requester errors).
    #[inline(always)]
    pub const fn wqe_opcode(&self) -> u8 {
        (self.s_wqe_opcode_qpn.get() >> 24) as u8
    }
    /// The CQE opcode (13 or 14 for error CQEs).
    #[inline(always)]
    pub const fn opcode(&self) -> u8 {
        op_own::opcode(self.op_own)
    }
}

/// The signature-error CQE (opcode `SIG_ERR` 12), rdma-core's private `struct mlx5_sigerr_cqe`.
/// rdma-core records it on the mkey and returns no work completion.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct SigErrCqe {
    /// Bytes 0-15: reserved.
    pub rsvd0: [u8; 16],
    /// Bytes 16-19: expected transport signature.
    pub expected_trans_sig: Be32,
    /// Bytes 20-23: actual transport signature.
    pub actual_trans_sig: Be32,
    /// Bytes 24-27: expected reference tag.
    pub expected_ref_tag: Be32,
    /// Bytes 28-31: actual reference tag.
    pub actual_ref_tag: Be32,
    /// Bytes 32-33: signature syndrome.
    pub syndrome: Be16,
    /// Byte 34: signature type (low 3 bits).
    pub sig_type: u8,
    /// Byte 35: domain (low 3 bits).
    pub domain: u8,
    /// Bytes 36-39: mkey (index = value >> 8).
    pub mkey: Be32,
    /// Bytes 40-47: offset of the error.
    pub sig_err_offset: Be64,
    /// Bytes 48-61: reserved.
    pub rsvd48: [u8; 14],
    /// Byte 62: signature.
    pub signature: u8,
    /// Byte 63: opcode, format, SE, owner.
    pub op_own: u8,
}

const_assert_eq!(size_of::<SigErrCqe>(), 64);
const_assert_eq!(offset_of!(SigErrCqe, expected_trans_sig), 16);
const_assert_eq!(offset_of!(SigErrCqe, actual_trans_sig), 20);
const_assert_eq!(offset_of!(SigErrCqe, expected_ref_tag), 24);
const_assert_eq!(offset_of!(SigErrCqe, actual_ref_tag), 28);
const_assert_eq!(offset_of!(SigErrCqe, syndrome), 32);
const_assert_eq!(offset_of!(SigErrCqe, sig_type), 34);
const_assert_eq!(offset_of!(SigErrCqe, domain), 35);
const_assert_eq!(offset_of!(SigErrCqe, mkey), 36);
const_assert_eq!(offset_of!(SigErrCqe, sig_err_offset), 40);
const_assert_eq!(offset_of!(SigErrCqe, op_own), 63);

impl SigErrCqe {
    /// Reinterprets a cqe64 as a signature-error CQE.
    #[inline(always)]
    pub fn from_cqe(cqe: &Cqe64) -> &SigErrCqe {
        bytemuck::cast_ref(cqe)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_fields_come_from_the_documented_bytes() {
        let mut b = [0u8; 64];
        b[52] = 0x01;
        b[53] = 0x02;
        b[54] = 0x88;
        b[55] = 0x13;
        b[56..60].copy_from_slice(&[0x0a, 0x00, 0x12, 0x34]);
        b[60..62].copy_from_slice(&[0x00, 0x2a]);
        b[63] = 0xd2;
        let cqe: Cqe64 = bytemuck::cast(b);
        let e = ErrCqe::from_cqe(&cqe);
        assert_eq!(e.hw_err_synd, 1);
        assert_eq!(e.hw_synd_type, 2);
        assert_eq!(e.vendor_err_synd, 0x88);
        assert_eq!(e.syndrome, 0x13);
        assert_eq!(e.qpn(), 0x1234);
        assert_eq!(e.wqe_opcode(), 0x0a);
        assert_eq!(e.wqe_counter.get(), 42);
        assert_eq!(e.opcode(), 13);
    }
}
