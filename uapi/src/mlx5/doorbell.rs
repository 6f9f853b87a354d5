//! The CQ doorbell record and the UAR CQ doorbell (rdma-core `providers/mlx5/cq.c`
//! `update_cons_index`, `mlx5_arm_cq`; `MLX5_CQ_SET_CI` and `MLX5_CQ_ARM_DB` in
//! `providers/mlx5/mlx5.h`, `MLX5_CQ_DOORBELL` in `mlx5dv.h`).

use crate::endian::Be32;
use bytemuck::{Pod, Zeroable};
use core::mem::{offset_of, size_of};
use static_assertions::const_assert_eq;

/// The CQ doorbell record: two big-endian words in host memory the device reads.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct DbRec {
    /// Word 0 (`MLX5_CQ_SET_CI`): `ci & 0xffffff`.
    pub set_ci: Be32,
    /// Word 1 (`MLX5_CQ_ARM_DB`): `sn << 28 | cmd | (ci & 0xffffff)`.
    pub arm_db: Be32,
}

const_assert_eq!(size_of::<DbRec>(), 8);
const_assert_eq!(offset_of!(DbRec, set_ci), SET_CI * 4);
const_assert_eq!(offset_of!(DbRec, arm_db), ARM_DB * 4);

/// Word index of the consumer-index word, `MLX5_CQ_SET_CI`.
pub const SET_CI: usize = 0;
/// Word index of the arm word, `MLX5_CQ_ARM_DB`.
pub const ARM_DB: usize = 1;
/// The consumer index on the wire is 24 bits.
pub const CI_MASK: u32 = 0x00ff_ffff;
/// Byte offset of the CQ doorbell in the UAR page, `MLX5_CQ_DOORBELL`.
pub const UAR_CQ_DOORBELL: usize = 0x20;
/// `MLX5_CQ_DB_REQ_NOT`: arm for the next completion.
pub const CMD_REQ_NOT: u32 = 0;
/// `MLX5_CQ_DB_REQ_NOT_SOL`: arm for the next solicited (or error) completion.
pub const CMD_REQ_NOT_SOL: u32 = 1 << 24;
/// Shift of the arm sequence number (bits 31:28 of the arm word; rdma-core and the kernel
/// put `arm_sn & 3` there, so only bits 29:28 are ever set).
pub const ARM_SN_SHIFT: u32 = 28;
/// The command field of the arm word, bits 27:24.
pub const CMD_MASK: u32 = 0x0f00_0000;

/// The set_ci word value for a 32-bit running consumer counter.
#[inline(always)]
pub const fn set_ci_word(ci: u32) -> u32 {
    ci & CI_MASK
}

/// The arm word: `(sn & 3) << 28 | cmd | (ci & 0xffffff)`.
#[inline(always)]
pub const fn arm_word(sn: u32, solicited: bool, ci: u32) -> u32 {
    ((sn & 3) << ARM_SN_SHIFT) | if solicited { CMD_REQ_NOT_SOL } else { CMD_REQ_NOT } | (ci & CI_MASK)
}

/// The 64-bit value stored at UAR + 0x20: in memory order BE32(arm word) then BE32(cqn).
/// rdma-core's `mlx5_arm_cq` builds `(u64)word << 32 | cqn` and stores it with
/// `mmio_write64_be(uar + MLX5_CQ_DOORBELL, htobe64(doorbell))`: the same 8 bytes.
#[inline(always)]
pub const fn uar_doorbell(arm_word: u32, cqn: u32) -> [u8; 8] {
    let w = arm_word.to_be_bytes();
    let c = cqn.to_be_bytes();
    [w[0], w[1], w[2], w[3], c[0], c[1], c[2], c[3]]
}

/// The arm word and the CQ number of a UAR CQ doorbell's 8 bytes (what the device reads).
#[inline(always)]
pub const fn uar_fields(bytes: [u8; 8]) -> (u32, u32) {
    (
        u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]),
        u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]),
    )
}

/// The sequence-number field of an arm word (4 bits; software sets only the low 2).
#[inline(always)]
pub const fn arm_sn(word: u32) -> u8 {
    (word >> ARM_SN_SHIFT) as u8
}

/// The command field of an arm word, in place ([`CMD_REQ_NOT`], [`CMD_REQ_NOT_SOL`], or a
/// value neither means).
#[inline(always)]
pub const fn arm_cmd(word: u32) -> u32 {
    word & CMD_MASK
}

/// The consumer index an arm word carries (24 bits).
#[inline(always)]
pub const fn arm_ci(word: u32) -> u32 {
    word & CI_MASK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consumer_index_is_masked_to_24_bits() {
        assert_eq!(set_ci_word(0x0123_4567), 0x0023_4567);
        assert_eq!(set_ci_word(u32::MAX), 0x00ff_ffff);
    }

    #[test]
    fn arm_word_layout() {
        assert_eq!(arm_word(1, false, 0x0100_0005), 0x1000_0005);
        assert_eq!(arm_word(7, true, 5), 0x3100_0005);
        assert_eq!(uar_doorbell(0x1000_0005, 0x406), [0x10, 0, 0, 5, 0, 0, 4, 6]);
    }

    /// What lands where, byte for byte, for one arm of each command: the dbrec arm word is
    /// big-endian at record bytes 4..8; the UAR doorbell is the same word then the CQ number,
    /// each big-endian (rdma-core `mlx5_arm_cq`: `htobe64((u64)word << 32 | cqn)`).
    #[test]
    fn dbrec_and_uar_bytes_for_given_sn_cmd_ci_and_cqn() {
        // sn 2, "next", ci 0x1234567 (bit 24 dropped), cqn 0x406.
        let w = arm_word(2, false, 0x0123_4567);
        assert_eq!(w.to_be_bytes(), [0x20, 0x23, 0x45, 0x67]);
        assert_eq!(uar_doorbell(w, 0x406), [0x20, 0x23, 0x45, 0x67, 0x00, 0x00, 0x04, 0x06]);
        // sn 5 (only 1 goes on the wire), "solicited", ci 0xffffff, a 24-bit cqn.
        let w = arm_word(5, true, u32::MAX);
        assert_eq!(w.to_be_bytes(), [0x11, 0xff, 0xff, 0xff]);
        assert_eq!(uar_doorbell(w, 0x00ab_cdef), [0x11, 0xff, 0xff, 0xff, 0x00, 0xab, 0xcd, 0xef]);
        // The same as rdma-core's 64-bit value stored big-endian.
        let doorbell = (u64::from(w) << 32) | 0x00ab_cdef;
        assert_eq!(uar_doorbell(w, 0x00ab_cdef), doorbell.to_be_bytes());
        // And the device side reads the fields back.
        assert_eq!(uar_fields(uar_doorbell(w, 0x00ab_cdef)), (w, 0x00ab_cdef));
        assert_eq!((arm_sn(w), arm_cmd(w), arm_ci(w)), (1, CMD_REQ_NOT_SOL, 0x00ff_ffff));
        let w = arm_word(3, false, 9);
        assert_eq!((arm_sn(w), arm_cmd(w), arm_ci(w)), (3, CMD_REQ_NOT, 9));
    }
}
