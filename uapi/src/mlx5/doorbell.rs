//! The CQ doorbell record and the UAR CQ doorbell (shared/spec/mlx5.md §5, §6).

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
/// Shift of the 2-bit arm sequence number.
pub const ARM_SN_SHIFT: u32 = 28;

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
#[inline(always)]
pub const fn uar_doorbell(arm_word: u32, cqn: u32) -> [u8; 8] {
    let w = arm_word.to_be_bytes();
    let c = cqn.to_be_bytes();
    [w[0], w[1], w[2], w[3], c[0], c[1], c[2], c[3]]
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
}
