//! Why an rxe CQ could not be attached: the self-checks a queue buffer and rdma-core's
//! `struct rxe_cq` must pass before the poller trusts them.

use dvcq_provider::Error as ProviderError;

/// A failed self-check, naming what was wrong and the values seen. Any of them means the
/// layout, the mapping or the CQ is not what the poller expects: fall back to the generic
/// backend and report this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AttachError {
    /// The queue buffer address is null.
    #[error("rxe queue buffer is a null pointer")]
    NullQueue,
    /// The queue buffer is not where `mmap` could have put it.
    #[error("rxe queue buffer at {addr:#x} is not page aligned ({page} bytes)")]
    Misaligned {
        /// The address.
        addr: usize,
        /// The page size required.
        page: usize,
    },
    /// The CQ depth the verbs CQ reports is not a positive count.
    #[error("cq depth (ibv_cq.cqe) {cqe} is not a positive count")]
    BadCqe {
        /// `ibv_cq.cqe`.
        cqe: i32,
    },
    /// `index_mask + 1` is not a power of two.
    #[error("rxe queue index_mask {index_mask:#x}: index_mask + 1 is not a power of two")]
    SlotsNotPowerOfTwo {
        /// `index_mask` as read.
        index_mask: u32,
    },
    /// The ring has fewer slots than the CQ needs (`cqe + 1`: one slot always stays free).
    #[error("rxe queue of {slots} slots cannot hold a cq of {cqe} entries (needs cqe + 1)")]
    RingSmallerThanCq {
        /// `index_mask + 1`.
        slots: u64,
        /// `ibv_cq.cqe`.
        cqe: i32,
    },
    /// The element stride cannot hold a `struct ib_uverbs_wc`, or is beyond any rxe stride.
    #[error("rxe queue log2_elem_size {log2_elem_size}: element stride must be {min} to {max} bytes")]
    ElemSize {
        /// `log2_elem_size` as read.
        log2_elem_size: u32,
        /// The least stride, `sizeof(struct ib_uverbs_wc)` rounded up to a power of two.
        min: u32,
        /// The largest stride accepted.
        max: u32,
    },
    /// rdma-core's `rxe_cq.wc_size` disagrees with the queue's element stride (rdma-core
    /// sets it to `1 << log2_elem_size` when it creates the CQ).
    #[error("rxe_cq.wc_size {wc_size} is not the queue's element stride {elem_size}")]
    WcSizeMismatch {
        /// `rxe_cq.wc_size`.
        wc_size: u64,
        /// `1 << log2_elem_size`.
        elem_size: u64,
    },
    /// The header and the elements do not fit in the mapping.
    #[error("rxe queue needs {need} bytes (header + {slots} slots of {elem_size}) but {have} are mapped")]
    MapTooSmall {
        /// Bytes the header and ring take.
        need: u64,
        /// Slots.
        slots: u64,
        /// Element stride.
        elem_size: u64,
        /// Bytes mapped.
        have: u64,
    },
    /// The ring is larger than the poller's ring primitive addresses.
    #[error("rxe queue of {bytes} bytes of elements is larger than {max} bytes")]
    RingTooLarge {
        /// Bytes of elements.
        bytes: u64,
        /// The limit.
        max: u64,
    },
    /// A producer or consumer index outside `0..=index_mask`, which neither side ever
    /// stores (`rxe_queue.h`: indexes are kept masked).
    #[error("rxe queue {which} index {index:#x} is outside index_mask {index_mask:#x}")]
    IndexOutsideMask {
        /// `"producer"` or `"consumer"`.
        which: &'static str,
        /// The index as read.
        index: u32,
        /// `index_mask`.
        index_mask: u32,
    },
    /// The bytes of `struct rxe_cq` given are fewer than the layout needs.
    #[error("struct rxe_cq: {have} bytes given, the layout has {need}")]
    ShortStruct {
        /// Bytes the layout has.
        need: usize,
        /// Bytes given.
        have: usize,
    },
    /// `rxe_cq.mmap_info` is not what the kernel hands out (`rxe_create_mmap_info`: a
    /// non-zero, page-aligned offset and a non-zero, page-aligned size).
    #[error("rxe_cq.mmap_info offset {offset:#x} size {size:#x} is not a kernel mmap range (page {page})")]
    BadMmapInfo {
        /// `mmap_info.offset`.
        offset: u64,
        /// `mmap_info.size`.
        size: u32,
        /// The page size.
        page: usize,
    },
    /// A ring-memory primitive refused the memory.
    #[error(transparent)]
    Memory(#[from] ProviderError),
}
