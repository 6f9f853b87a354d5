//! The 64-byte CQ shadow area and the doorbell-page offsets (rdma-core
//! `providers/irdma/defs.h` `IRDMA_CQ_DBSA_*`, `umain.h` `IRDMA_DB_SHADOW_AREA_SIZE` and
//! `IRDMA_DB_CQ_OFFSET`; `uk.c` `irdma_uk_cq_poll_cmpl` writes the head,
//! `irdma_uk_cq_request_notification` the arm word).

use crate::endian::Le64;
use bytemuck::{Pod, Zeroable};
use core::mem::{offset_of, size_of};
use static_assertions::const_assert_eq;

/// Bytes in the shadow area, `IRDMA_DB_SHADOW_AREA_SIZE`.
pub const SHADOW_AREA_SIZE: usize = 64;
/// Byte offset of the consumer head word (written after every consumed CQE, no phase bit).
pub const HEAD_OFFSET: usize = 0;
/// Byte offset of the arm word (`IRDMA_CQ_DBSA_*` fields).
pub const ARM_OFFSET: usize = 32;
/// `IRDMA_CQ_DBSA_CQEIDX`, bits 19:0 of the head word.
pub const CQEIDX_MASK: u64 = 0xf_ffff;
/// `IRDMA_CQ_DBSA_SW_CQ_SELECT`, bits 13:0 of the arm word (resize bookkeeping:
/// rdma-core `uk.c` `irdma_uk_cq_set_resized_cnt`).
pub const SW_CQ_SELECT_MASK: u64 = 0x3fff;
/// `IRDMA_CQ_DBSA_ARM_NEXT`, bit 14.
pub const ARM_NEXT: u64 = 1 << 14;
/// `IRDMA_CQ_DBSA_ARM_NEXT_SE`, bit 15.
pub const ARM_NEXT_SE: u64 = 1 << 15;
/// `IRDMA_CQ_DBSA_ARM_SEQ_NUM`, bits 17:16 (2-bit counter).
pub const ARM_SEQ_NUM_SHIFT: u32 = 16;
/// Width mask of the arm sequence number.
pub const ARM_SEQ_NUM_MASK: u64 = 3;

/// Byte offset of the CQ arm doorbell in the doorbell page, `IRDMA_DB_CQ_OFFSET` (the
/// provider stores `cq_id` there as a 32-bit word after rebuilding the arm word).
pub const DB_CQ_OFFSET: usize = 64;
/// Byte offset of the QP WQE-alloc doorbell in the same page.
pub const DB_WQE_ALLOC_OFFSET: usize = 0;
/// Doorbell page offset in the GEN2 PF BAR, `ICRDMA_DB_ADDR_OFFSET` (8 MiB - 64 KiB).
pub const GEN2_DB_ADDR_OFFSET: usize = (8 << 20) - (64 << 10);
/// Doorbell page offset in the GEN1 PF BAR, `I40IW_DB_ADDR_OFFSET` (4 MiB - 64 KiB).
pub const GEN1_DB_ADDR_OFFSET: usize = (4 << 20) - (64 << 10);

/// The CQ shadow area: software writes it, hardware reads it. Words other than
/// the head and the arm word are never touched by the provider.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct ShadowArea {
    /// Byte 0: the consumer head index (0..size-1, no phase bit).
    pub head: Le64,
    /// Bytes 8-31: unused.
    pub rsvd8: [Le64; 3],
    /// Byte 32: SW_CQ_SELECT, ARM_NEXT, ARM_NEXT_SE, ARM_SEQ_NUM.
    pub arm: Le64,
    /// Bytes 40-63: unused.
    pub rsvd40: [Le64; 3],
}

const_assert_eq!(size_of::<ShadowArea>(), SHADOW_AREA_SIZE);
const_assert_eq!(offset_of!(ShadowArea, head), HEAD_OFFSET);
const_assert_eq!(offset_of!(ShadowArea, arm), ARM_OFFSET);

/// Arm-word helpers.
pub mod arm {
    use super::*;

    /// The 2-bit arm sequence number.
    #[inline(always)]
    pub const fn seq(w: u64) -> u8 {
        ((w >> ARM_SEQ_NUM_SHIFT) & ARM_SEQ_NUM_MASK) as u8
    }
    /// `SW_CQ_SELECT`.
    #[inline(always)]
    pub const fn sw_cq_select(w: u64) -> u16 {
        (w & SW_CQ_SELECT_MASK) as u16
    }
    /// The word `irdma_uk_cq_request_notification` writes: sequence + 1, the old
    /// SW_CQ_SELECT kept, ARM_NEXT_SE always 1, ARM_NEXT only for "any completion".
    #[inline(always)]
    pub const fn request(old: u64, any_completion: bool) -> u64 {
        let seq = (((old >> ARM_SEQ_NUM_SHIFT) + 1) & ARM_SEQ_NUM_MASK) << ARM_SEQ_NUM_SHIFT;
        let next = if any_completion { ARM_NEXT } else { 0 };
        (old & SW_CQ_SELECT_MASK) | seq | ARM_NEXT_SE | next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arm_request_rebuilds_the_word() {
        let w = arm::request(0, true);
        assert_eq!(arm::seq(w), 1);
        assert!(w & ARM_NEXT != 0 && w & ARM_NEXT_SE != 0);
        let w2 = arm::request(w | 0x5, false);
        assert_eq!((arm::seq(w2), arm::sw_cq_select(w2)), (2, 5));
        assert!(w2 & ARM_NEXT == 0 && w2 & ARM_NEXT_SE != 0, "ARM_NEXT is not inherited");
        assert_eq!(arm::seq(arm::request(3 << ARM_SEQ_NUM_SHIFT, true)), 0);
    }
}
