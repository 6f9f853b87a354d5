//! Hardware generations and their CQ-relevant differences: what each generation's kernel
//! init sets (kernel `drivers/infiniband/hw/irdma/i40iw_hw.c` `i40iw_init_hw`, `icrdma_hw.c`
//! `icrdma_init_hw`, `ig3rdma_hw.c` `ig3rdma_init_hw`) and how rdma-core sizes a CQ for it
//! (`providers/irdma/uverbs.c` `get_cq_size`, `ucreate_cq`).

/// The irdma hardware generation (`irdma_uk_attrs.hw_rev`, `IRDMA_GEN_1..3`).
#[repr(u8)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HwRev {
    /// GEN1: X722 (`i40iw`).
    Gen1 = 1,
    /// GEN2: E810 (`icrdma`).
    #[default]
    Gen2 = 2,
    /// GEN3: `ig3rdma`.
    Gen3 = 3,
}

impl HwRev {
    /// The generation for `hw_rev` 1..=3.
    pub const fn from_u8(v: u8) -> Option<HwRev> {
        match v {
            1 => Some(Self::Gen1),
            2 => Some(Self::Gen2),
            3 => Some(Self::Gen3),
            _ => None,
        }
    }

    /// True when the kernel advertises `IRDMA_FEATURE_64_BYTE_CQE` (only GEN3's
    /// `ig3rdma_init_hw` sets it; rdma-core `ucreate_cq` then uses 64-byte slots).
    pub const fn has_64byte_cqe(self) -> bool {
        matches!(self, Self::Gen3)
    }

    /// The slot size the provider uses on this generation: `struct irdma_cqe` (32 bytes) or
    /// `struct irdma_extended_cqe` (64) in rdma-core `providers/irdma/user.h`.
    pub const fn cqe_size(self) -> usize {
        if self.has_64byte_cqe() {
            super::cqe::EXTENDED_CQE_SIZE
        } else {
            super::cqe::CQE_SIZE
        }
    }

    /// True when hardware writes one flush CQE per queue and the provider synthesises the
    /// remaining flushed completions (GEN1, GEN2: kernel `hw.c` `irdma_flush_wqes`, rdma-core
    /// `uk.c` `irdma_uk_cq_poll_cmpl`'s flush path). GEN3 writes one CQE per WR.
    pub const fn parks_flush(self) -> bool {
        !matches!(self, Self::Gen3)
    }

    /// `max_hw_sq_chunk`: a WR never straddles this many SQ quanta; NOP pads fill the gap
    /// (2 on GEN1, rdma-core `umain.c` `i40iw_set_hw_attrs`; 8 on GEN2/GEN3, the kernel's
    /// `IRDMA_MAX_QUANTA_PER_WR`; the padding is `uk.c` `irdma_qp_get_next_send_wqe`).
    pub const fn sq_chunk_quanta(self) -> u32 {
        match self {
            Self::Gen1 => 2,
            _ => 8,
        }
    }

    /// True when the kernel advertises `IRDMA_FEATURE_CQ_RESIZE` (GEN2, GEN3): the shadow
    /// area is a separate allocation; GEN1 places it after the CQE pages (rdma-core
    /// `uverbs.c` `ucreate_cq`).
    pub const fn has_cq_resize(self) -> bool {
        !matches!(self, Self::Gen1)
    }

    /// True on GEN3, where SRQs and major error 0xFFFE exist (kernel `ig3rdma_init_hw` sets
    /// `IRDMA_FEATURE_SRQ`; rdma-core `uk.c` `irdma_uk_cq_poll_cmpl` decodes the major).
    pub const fn has_srq(self) -> bool {
        matches!(self, Self::Gen3)
    }

    /// Ring slots rdma-core v64+ allocates for `ibv_create_cq(cqe)` (`uverbs.c`
    /// `get_cq_size`).
    pub const fn ring_slots_for(self, cqe: u32) -> u32 {
        let mut n = cqe.saturating_add(1);
        if !self.has_64byte_cqe() && !matches!(self, Self::Gen1) {
            n = n.saturating_mul(2);
        }
        if n % 2 == 1 {
            n += 1;
        }
        if n < MIN_CQ_SIZE {
            MIN_CQ_SIZE
        } else {
            n
        }
    }
}

/// `IRDMA_U_MINCQ_SIZE`.
pub const MIN_CQ_SIZE: u32 = 4;
/// `IRDMA_MAX_CQ_SIZE` (the resize limit rdma-core's `irdma_uresize_cq` checks).
pub const MAX_CQ_SIZE: u32 = 1_048_575;
/// `IRDMA_FEATURE_RTS_AE`: bit 0 of the ucontext `feature_flags` (GEN2, GEN3; iWARP QPs
/// then reserve 3 connection WQEs, not 1).
pub const FEATURE_RTS_AE: u64 = 1 << 0;
/// `IRDMA_FEATURE_CQ_RESIZE`: bit 1 of the ucontext `feature_flags` (GEN2, GEN3): the
/// shadow area is its own allocation, not the bytes after the CQE pages (rdma-core
/// `uverbs.c` `ucreate_cq`).
pub const FEATURE_CQ_RESIZE: u64 = 1 << 1;
/// `IRDMA_FEATURE_64_BYTE_CQE`: bit 5 of the ucontext `feature_flags`.
pub const FEATURE_64_BYTE_CQE: u64 = 1 << 5;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizing_matches_get_cq_size() {
        assert_eq!(HwRev::Gen2.ring_slots_for(100), 202);
        assert_eq!(HwRev::Gen1.ring_slots_for(100), 102);
        assert_eq!(HwRev::Gen3.ring_slots_for(100), 102);
        assert_eq!(HwRev::Gen1.ring_slots_for(1), 4);
        assert_eq!(HwRev::Gen3.ring_slots_for(4), 6);
        assert_eq!(HwRev::Gen3.cqe_size(), 64);
        assert_eq!(HwRev::Gen2.cqe_size(), 32);
        assert_eq!(HwRev::from_u8(4), None);
    }
}
