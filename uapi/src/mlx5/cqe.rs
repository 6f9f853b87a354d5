//! `struct mlx5_cqe64` (rdma-core `providers/mlx5/mlx5dv.h`; kernel
//! `include/linux/mlx5/device.h`) and the 128-byte CQE, whose second half is the cqe64
//! (rdma-core `providers/mlx5/cq.c` `get_sw_cqe`; kernel `struct mlx5_cqe128`).

use crate::endian::{Be16, Be32, Be64};
use bytemuck::{Pod, Zeroable};
use core::mem::{offset_of, size_of};
use static_assertions::const_assert_eq;

/// The 64-byte mlx5 CQE, `struct mlx5_cqe64` (rdma-core `mlx5dv.h`, kernel `device.h`).
///
/// All multi-byte fields are big-endian. Field names follow rdma-core, with the kernel's
/// names for bytes rdma-core calls reserved. In a 128-byte CQE this is the second half.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct Cqe64 {
    /// Byte 0 (Ethernet): bit 0 outer L3 tunneled, bits 4:3 TLS offload.
    pub tls_outer_l3_tunneled: u8,
    /// Byte 1: reserved.
    pub rsvd1: u8,
    /// Bytes 2-3: striding-RQ WQE index.
    pub wqe_id: Be16,
    /// Bytes 4-11: Ethernet LRO fields (reserved for IB).
    pub lro: [u8; 8],
    /// Bytes 12-15: RSS hash result.
    pub rss_hash_result: Be32,
    /// Byte 16: RSS hash type (bits 3:2 IP type, bits 7:6 L4 type).
    pub rss_hash_type: u8,
    /// Byte 17: bits 6:0 are the DLID path bits.
    pub ml_path: u8,
    /// Bytes 18-19: reserved.
    pub rsvd18: [u8; 2],
    /// Bytes 20-21: L4 checksum (Ethernet); stride index on IB striding RQs.
    pub check_sum: Be16,
    /// Bytes 22-23: source LID.
    pub slid: Be16,
    /// Bytes 24-27: bits 23:0 remote QPN, 27:24 SL (IB) or packet type (RoCE),
    /// 29:28 GRH present (in CQE / in buffer).
    pub flags_rqpn: Be32,
    /// Byte 28: bit 0 L2 OK, bit 1 L3 OK, bit 2 L4 OK.
    pub hds_ip_ext: u8,
    /// Byte 29: bit 0 VLAN, bits 3:2 L3 header type, bits 6:4 L4 header type, bit 7 fragment.
    pub l4_hdr_type_etc: u8,
    /// Bytes 30-31: VLAN TCI.
    pub vlan_info: Be16,
    /// Bytes 32-35: bits 23:0 SRQ number (CQE version 0) or user index (version 1).
    pub srqn_uidx: Be32,
    /// Bytes 36-39: immediate data, invalidated rkey, or P_Key (low 16 bits).
    pub imm_inval_pkey: Be32,
    /// Byte 40: 1 for a tag-matching CQE.
    pub app: u8,
    /// Byte 41: tag-matching sub-operation.
    pub app_op: u8,
    /// Bytes 42-43: tag index.
    pub app_info: Be16,
    /// Bytes 44-47: byte count; in a basic-layout compression title, the session length.
    pub byte_cnt: Be32,
    /// Bytes 48-55: completion timestamp.
    pub timestamp: Be64,
    /// Bytes 56-59: bits 23:0 local QPN (or flow tag), bits 31:24 the WQE opcode (requester).
    pub sop_drop_qpn: Be32,
    /// Bytes 60-61: WQE index.
    pub wqe_counter: Be16,
    /// Byte 62: signature, or the validity iteration count with enhanced compression.
    pub signature: u8,
    /// Byte 63: opcode (7:4), format (3:2), solicited event (1), owner (0).
    pub op_own: u8,
}

const_assert_eq!(size_of::<Cqe64>(), 64);
const_assert_eq!(offset_of!(Cqe64, wqe_id), 2);
const_assert_eq!(offset_of!(Cqe64, rss_hash_result), 12);
const_assert_eq!(offset_of!(Cqe64, rss_hash_type), 16);
const_assert_eq!(offset_of!(Cqe64, ml_path), 17);
const_assert_eq!(offset_of!(Cqe64, check_sum), 20);
const_assert_eq!(offset_of!(Cqe64, slid), 22);
const_assert_eq!(offset_of!(Cqe64, flags_rqpn), 24);
const_assert_eq!(offset_of!(Cqe64, hds_ip_ext), 28);
const_assert_eq!(offset_of!(Cqe64, l4_hdr_type_etc), 29);
const_assert_eq!(offset_of!(Cqe64, vlan_info), 30);
const_assert_eq!(offset_of!(Cqe64, srqn_uidx), 32);
const_assert_eq!(offset_of!(Cqe64, imm_inval_pkey), 36);
const_assert_eq!(offset_of!(Cqe64, app), 40);
const_assert_eq!(offset_of!(Cqe64, app_op), 41);
const_assert_eq!(offset_of!(Cqe64, app_info), 42);
const_assert_eq!(offset_of!(Cqe64, byte_cnt), 44);
const_assert_eq!(offset_of!(Cqe64, timestamp), 48);
const_assert_eq!(offset_of!(Cqe64, sop_drop_qpn), 56);
const_assert_eq!(offset_of!(Cqe64, wqe_counter), 60);
const_assert_eq!(offset_of!(Cqe64, signature), 62);
const_assert_eq!(offset_of!(Cqe64, op_own), 63);

/// Byte offsets inside a cqe64, for code that reads single fields straight from ring memory.
/// Each equals the `offset_of!` of the field of the same name (checked below).
pub mod off {
    /// `byte_cnt`.
    pub const BYTE_CNT: usize = 44;
    /// `sop_drop_qpn`.
    pub const SOP_DROP_QPN: usize = 56;
    /// `wqe_counter`.
    pub const WQE_COUNTER: usize = 60;
    /// `signature` / validity iteration count.
    pub const SIGNATURE: usize = 62;
    /// `op_own`.
    pub const OP_OWN: usize = 63;
}
const_assert_eq!(off::BYTE_CNT, offset_of!(Cqe64, byte_cnt));
const_assert_eq!(off::SOP_DROP_QPN, offset_of!(Cqe64, sop_drop_qpn));
const_assert_eq!(off::WQE_COUNTER, offset_of!(Cqe64, wqe_counter));
const_assert_eq!(off::SIGNATURE, offset_of!(Cqe64, signature));
const_assert_eq!(off::OP_OWN, offset_of!(Cqe64, op_own));

/// `op_own` bit fields (rdma-core `mlx5dv.h` helpers).
pub mod op_own {
    /// `MLX5_CQE_OWNER_MASK`.
    pub const OWNER_MASK: u8 = 0x01;
    /// Solicited-event bit.
    pub const SE_MASK: u8 = 0x02;
    /// Format field mask (bits 3:2).
    pub const FORMAT_MASK: u8 = 0x0c;
    /// Format field shift.
    pub const FORMAT_SHIFT: u32 = 2;
    /// Opcode shift (bits 7:4).
    pub const OPCODE_SHIFT: u32 = 4;
    /// UCX's one-compare slow-path test: `(op_own & SLOW_MASK) >= SLOW_MIN` iff the format is
    /// compressed or the opcode is 8 or more (SIG_ERR, REQ_ERR, RESP_ERR, INVALID).
    pub const SLOW_MASK: u8 = 0x8c;
    /// See [`SLOW_MASK`].
    pub const SLOW_MIN: u8 = 0x0c;

    /// The CQE opcode (bits 7:4).
    #[inline(always)]
    pub const fn opcode(op_own: u8) -> u8 {
        op_own >> OPCODE_SHIFT
    }
    /// The CQE format (bits 3:2).
    #[inline(always)]
    pub const fn format(op_own: u8) -> u8 {
        (op_own & FORMAT_MASK) >> FORMAT_SHIFT
    }
    /// The solicited-event bit.
    #[inline(always)]
    pub const fn se(op_own: u8) -> bool {
        op_own & SE_MASK != 0
    }
    /// The owner bit.
    #[inline(always)]
    pub const fn owner(op_own: u8) -> u8 {
        op_own & OWNER_MASK
    }
    /// Builds an `op_own` byte.
    #[inline(always)]
    pub const fn make(opcode: u8, format: u8, se: bool, owner: u8) -> u8 {
        (opcode << OPCODE_SHIFT) | ((format & 3) << FORMAT_SHIFT) | ((se as u8) << 1) | (owner & 1)
    }
}

/// Bits of `hds_ip_ext` (byte 28).
pub mod hds_ip_ext {
    /// `MLX5_CQE_L2_OK`.
    pub const L2_OK: u8 = 1 << 0;
    /// `MLX5_CQE_L3_OK`.
    pub const L3_OK: u8 = 1 << 1;
    /// `MLX5_CQE_L4_OK`.
    pub const L4_OK: u8 = 1 << 2;
}

/// Values of the L3 header type, bits 3:2 of `l4_hdr_type_etc` (byte 29).
pub mod l3_hdr_type {
    /// No L3 header.
    pub const NONE: u8 = 0;
    /// IPv6.
    pub const IPV6: u8 = 1;
    /// IPv4.
    pub const IPV4: u8 = 2;
    /// Extracts the L3 header type from `l4_hdr_type_etc`.
    #[inline(always)]
    pub const fn of(l4_hdr_type_etc: u8) -> u8 {
        (l4_hdr_type_etc >> 2) & 3
    }
}

/// Fields of `flags_rqpn` (bytes 24-27, after big-endian conversion).
pub mod flags_rqpn {
    /// Remote QPN mask (bits 23:0).
    pub const RQPN_MASK: u32 = 0x00ff_ffff;
    /// SL / packet-type shift (bits 27:24).
    pub const SL_SHIFT: u32 = 24;
    /// GRH field shift (bits 29:28).
    pub const GRH_SHIFT: u32 = 28;
    /// Bit 28: GRH / L3 header scattered into the receive buffer.
    pub const L3_IN_DATA: u32 = 1 << 28;
    /// Bit 29: GRH / L3 header in the CQE (first half of a 128-byte CQE).
    pub const L3_IN_CQE: u32 = 1 << 29;
}

/// 24-bit mask of QP numbers, SRQ numbers, user indexes and flow tags.
pub const QPN_MASK: u32 = 0x00ff_ffff;

impl Cqe64 {
    /// A slot as software initialises it before hardware writes it: zeroes with
    /// `op_own = MLX5_CQE_INVALID << 4` (rdma-core `mlx5_alloc_cq_buf`).
    pub const fn invalid() -> Self {
        let mut c: Cqe64 = Self::zeroed_const();
        c.op_own = super::opcode::cqe_opcode::INVALID << op_own::OPCODE_SHIFT;
        c
    }

    const fn zeroed_const() -> Self {
        Cqe64 {
            tls_outer_l3_tunneled: 0,
            rsvd1: 0,
            wqe_id: Be16::new(0),
            lro: [0; 8],
            rss_hash_result: Be32::new(0),
            rss_hash_type: 0,
            ml_path: 0,
            rsvd18: [0; 2],
            check_sum: Be16::new(0),
            slid: Be16::new(0),
            flags_rqpn: Be32::new(0),
            hds_ip_ext: 0,
            l4_hdr_type_etc: 0,
            vlan_info: Be16::new(0),
            srqn_uidx: Be32::new(0),
            imm_inval_pkey: Be32::new(0),
            app: 0,
            app_op: 0,
            app_info: Be16::new(0),
            byte_cnt: Be32::new(0),
            timestamp: Be64::new(0),
            sop_drop_qpn: Be32::new(0),
            wqe_counter: Be16::new(0),
            signature: 0,
            op_own: 0,
        }
    }

    /// The CQE opcode (`op_own >> 4`).
    #[inline(always)]
    pub const fn opcode(&self) -> u8 {
        op_own::opcode(self.op_own)
    }
    /// The CQE format (`(op_own >> 2) & 3`).
    #[inline(always)]
    pub const fn format(&self) -> u8 {
        op_own::format(self.op_own)
    }
    /// The owner bit.
    #[inline(always)]
    pub const fn owner(&self) -> u8 {
        op_own::owner(self.op_own)
    }
    /// The solicited-event bit.
    #[inline(always)]
    pub const fn se(&self) -> bool {
        op_own::se(self.op_own)
    }
    /// The local QPN (or flow tag), `sop_drop_qpn & 0xffffff`.
    #[inline(always)]
    pub const fn qpn(&self) -> u32 {
        self.sop_drop_qpn.get() & QPN_MASK
    }
    /// The WQE opcode a requester CQE echoes, `sop_drop_qpn >> 24`.
    #[inline(always)]
    pub const fn wqe_opcode(&self) -> u8 {
        (self.sop_drop_qpn.get() >> 24) as u8
    }
    /// The SRQ number or user index, `srqn_uidx & 0xffffff`.
    #[inline(always)]
    pub const fn srqn_uidx(&self) -> u32 {
        self.srqn_uidx.get() & QPN_MASK
    }
    /// The remote (source) QPN, `flags_rqpn & 0xffffff`.
    #[inline(always)]
    pub const fn src_qp(&self) -> u32 {
        self.flags_rqpn.get() & flags_rqpn::RQPN_MASK
    }
    /// The SL nibble, `(flags_rqpn >> 24) & 0xf` (the packet type on RoCE).
    #[inline(always)]
    pub const fn sl(&self) -> u8 {
        ((self.flags_rqpn.get() >> flags_rqpn::SL_SHIFT) & 0xf) as u8
    }
    /// The GRH field, `(flags_rqpn >> 28) & 3`; non-zero when a GRH was received.
    #[inline(always)]
    pub const fn grh(&self) -> u8 {
        ((self.flags_rqpn.get() >> flags_rqpn::GRH_SHIFT) & 3) as u8
    }
    /// The DLID path bits, `ml_path & 0x7f`.
    #[inline(always)]
    pub const fn dlid_path_bits(&self) -> u8 {
        self.ml_path & 0x7f
    }
    /// The inline-scatter-32 payload area (bytes 0..32 of this cqe64).
    pub fn inline32(&self) -> &[u8] {
        &bytemuck::bytes_of(self)[..32]
    }
}

/// A 128-byte mlx5 CQE: 64 bytes of inline data or GRH, then the cqe64 (rdma-core
/// `cq.c` `get_sw_cqe`, `handle_responder`; kernel `struct mlx5_cqe128`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct Cqe128 {
    /// Bytes 0-63: inline-scatter-64 payload, or the GRH in bytes 24..64.
    pub inl_grh: [u8; 64],
    /// Bytes 64-127: the CQE proper.
    pub cqe64: Cqe64,
}

const_assert_eq!(size_of::<Cqe128>(), 128);
const_assert_eq!(offset_of!(Cqe128, inl_grh), 0);
const_assert_eq!(offset_of!(Cqe128, cqe64), 64);

/// Offset of the 40-byte GRH inside the first half of a 128-byte CQE (the 40 bytes right
/// before the cqe64).
pub const GRH_OFFSET_IN_CQE128: usize = 24;
/// Size of a GRH.
pub const GRH_SIZE: usize = 40;
const_assert_eq!(GRH_OFFSET_IN_CQE128 + GRH_SIZE, 64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_own_round_trips() {
        for opcode in 0..16u8 {
            for format in 0..4u8 {
                for se in [false, true] {
                    for owner in 0..2u8 {
                        let b = op_own::make(opcode, format, se, owner);
                        assert_eq!(op_own::opcode(b), opcode);
                        assert_eq!(op_own::format(b), format);
                        assert_eq!(op_own::se(b), se);
                        assert_eq!(op_own::owner(b), owner);
                    }
                }
            }
        }
    }

    #[test]
    fn slow_path_test_catches_errors_and_compression_only() {
        for opcode in 0..16u8 {
            for format in 0..4u8 {
                let b = op_own::make(opcode, format, true, 1);
                let slow = (b & op_own::SLOW_MASK) >= op_own::SLOW_MIN;
                assert_eq!(slow, format == 3 || opcode >= 8, "opcode {opcode} format {format}");
            }
        }
    }

    #[test]
    fn invalid_slot_is_0xf0() {
        let c = Cqe64::invalid();
        assert_eq!(bytemuck::bytes_of(&c)[63], 0xf0);
        assert!(bytemuck::bytes_of(&c)[..63].iter().all(|&b| b == 0));
    }

    #[test]
    fn field_accessors_read_big_endian_bytes() {
        let mut bytes = [0u8; 64];
        bytes[56..60].copy_from_slice(&[0x0a, 0x12, 0x34, 0x56]);
        bytes[60..62].copy_from_slice(&[0x01, 0x02]);
        bytes[24..28].copy_from_slice(&[0x35, 0xab, 0xcd, 0xef]);
        bytes[17] = 0xff;
        let c: Cqe64 = bytemuck::cast(bytes);
        assert_eq!(c.qpn(), 0x123456);
        assert_eq!(c.wqe_opcode(), 0x0a);
        assert_eq!(c.wqe_counter.get(), 0x0102);
        assert_eq!(c.src_qp(), 0xabcdef);
        assert_eq!(c.sl(), 5);
        assert_eq!(c.grh(), 3);
        assert_eq!(c.dlid_path_bits(), 0x7f);
    }
}
