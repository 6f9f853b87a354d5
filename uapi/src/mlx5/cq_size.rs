//! How many CQEs an mlx5 CQ ring holds.
//!
//! rdma-core's `create_cq` (`providers/mlx5/verbs.c`) refuses `cqe == 0` and allocates
//! `align_queue_size(cqe + 1)`, the next power of two, slots; the kernel's
//! `mlx5_ib_create_cq` (`drivers/infiniband/hw/mlx5/cq.c`) rounds `entries + 1` up the same
//! way. So the smallest ring is 2 slots and every ring is a power of two; the largest is
//! what the device's `log_max_cq_sz` allows, 2^22 on ConnectX (`max_cqe` 4194303).

/// The smallest ring: a CQ of one CQE has two slots.
pub const MIN_CQ_ENTRIES: u32 = 2;

/// The largest ring ConnectX devices make (`log_max_cq_sz` 22).
pub const MAX_CQ_ENTRIES: u32 = 1 << 22;

/// Whether an mlx5 CQ ring can have `entries` slots: a power of two from
/// [`MIN_CQ_ENTRIES`] to [`MAX_CQ_ENTRIES`].
pub const fn is_ring_size(entries: u32) -> bool {
    entries.is_power_of_two() && entries >= MIN_CQ_ENTRIES && entries <= MAX_CQ_ENTRIES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_sizes_are_the_powers_of_two_rdma_core_allocates() {
        // `align_queue_size(cqe + 1)` for the smallest and the largest `cqe`.
        assert_eq!((1u32 + 1).next_power_of_two(), MIN_CQ_ENTRIES);
        assert_eq!(((1u32 << 22) - 1 + 1).next_power_of_two(), MAX_CQ_ENTRIES);
        for ok in [2, 4, 64, 1 << 22] {
            assert!(is_ring_size(ok), "{ok}");
        }
        for bad in [0, 1, 3, 6, (1 << 22) + 2, 1 << 23] {
            assert!(!is_ring_size(bad), "{bad}");
        }
    }
}
