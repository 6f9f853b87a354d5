//! `struct rxe_queue_buf` (kernel uapi `rdma_user_rxe.h`): the header of every rxe queue
//! the kernel maps to userspace, followed by the ring's elements; and `struct mminfo`, the
//! offset and size the kernel returns for `mmap` on the uverbs file.
//!
//! The producer and consumer indexes sit on cache lines of their own (128-byte strides, so
//! the kernel's producer and the library's consumer never share a line). Both indexes stay
//! in `0..=index_mask`: a side masks only when it computes a new value (rdma-core
//! `providers/rxe/rxe_queue.h`, `advance_consumer`; the kernel's
//! `queue_advance_producer`).

use bytemuck::{Pod, Zeroable};
use core::mem::{align_of, offset_of, size_of};
use static_assertions::const_assert_eq;

/// Byte offset of `log2_elem_size`: log2 of the element stride.
pub const LOG2_ELEM_SIZE_OFFSET: usize = 0;
/// Byte offset of `index_mask`: slots minus one (the slot count is a power of two).
pub const INDEX_MASK_OFFSET: usize = 4;
/// Byte offset of `producer_index`, on the header's second 128-byte line.
pub const PRODUCER_INDEX_OFFSET: usize = 128;
/// Byte offset of `consumer_index`, on the header's third 128-byte line.
pub const CONSUMER_INDEX_OFFSET: usize = 256;
/// Byte offset of `data[]`, the first element: the header's size.
pub const DATA_OFFSET: usize = 384;

/// The header of `struct rxe_queue_buf`, up to its flexible `data[]` member.
///
/// The kernel (`rxe_queue_init`) writes `log2_elem_size` and `index_mask` once, before the
/// buffer is mapped; after that the producer side writes only its index and the elements,
/// the consumer side only its index. Read the indexes through atomic accessors, never
/// through this struct, once the buffer is shared.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct QueueBufHeader {
    /// log2 of the element stride in bytes.
    pub log2_elem_size: u32,
    /// Slots minus one.
    pub index_mask: u32,
    /// `pad_1[30]`: the rest of the first line.
    pub pad_1: [u32; 30],
    /// Where the producer writes next, `0..=index_mask`.
    pub producer_index: u32,
    /// `pad_2[31]`.
    pub pad_2: [u32; 31],
    /// Where the consumer reads next, `0..=index_mask`.
    pub consumer_index: u32,
    /// `pad_3[31]`.
    pub pad_3: [u32; 31],
}

const_assert_eq!(size_of::<QueueBufHeader>(), DATA_OFFSET);
const_assert_eq!(align_of::<QueueBufHeader>(), 4);
const_assert_eq!(offset_of!(QueueBufHeader, log2_elem_size), LOG2_ELEM_SIZE_OFFSET);
const_assert_eq!(offset_of!(QueueBufHeader, index_mask), INDEX_MASK_OFFSET);
const_assert_eq!(offset_of!(QueueBufHeader, pad_1), 8);
const_assert_eq!(offset_of!(QueueBufHeader, producer_index), PRODUCER_INDEX_OFFSET);
const_assert_eq!(offset_of!(QueueBufHeader, pad_2), PRODUCER_INDEX_OFFSET + 4);
const_assert_eq!(offset_of!(QueueBufHeader, consumer_index), CONSUMER_INDEX_OFFSET);
const_assert_eq!(offset_of!(QueueBufHeader, pad_3), CONSUMER_INDEX_OFFSET + 4);
// Each index opens its own 128-byte line, and the data starts on a 128-byte boundary.
const_assert_eq!(PRODUCER_INDEX_OFFSET % 128, 0);
const_assert_eq!(CONSUMER_INDEX_OFFSET % 128, 0);
const_assert_eq!(DATA_OFFSET % 128, 0);

/// `struct mminfo`: where the kernel's queue buffer is on the uverbs file (`offset`, the
/// `mmap` offset) and how many bytes to map (`size`). rdma-core's `rxe_create_cq` maps
/// exactly `size` bytes at `offset` and keeps the pair in `rxe_cq.mmap_info`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct MmInfo {
    /// The `mmap` offset on the uverbs file (`__aligned_u64`).
    pub offset: u64,
    /// Bytes to map.
    pub size: u32,
    /// Padding to the 8-byte alignment of `offset`.
    pub pad: u32,
}

const_assert_eq!(size_of::<MmInfo>(), 16);
const_assert_eq!(align_of::<MmInfo>(), 8);
const_assert_eq!(offset_of!(MmInfo, offset), 0);
const_assert_eq!(offset_of!(MmInfo, size), 8);
const_assert_eq!(offset_of!(MmInfo, pad), 12);

#[cfg(test)]
mod tests {
    use super::*;

    /// The header's bytes hold each field where the kernel puts it, in host order.
    #[test]
    fn header_fields_sit_at_the_kernel_offsets() {
        let mut h = QueueBufHeader::zeroed();
        h.log2_elem_size = 7;
        h.index_mask = 0x1f;
        h.producer_index = 0x11;
        h.consumer_index = 0x0e;
        let b = bytemuck::bytes_of(&h);
        let word = |off: usize| u32::from_ne_bytes(b[off..off + 4].try_into().unwrap());
        assert_eq!(word(LOG2_ELEM_SIZE_OFFSET), 7);
        assert_eq!(word(INDEX_MASK_OFFSET), 0x1f);
        assert_eq!(word(PRODUCER_INDEX_OFFSET), 0x11);
        assert_eq!(word(CONSUMER_INDEX_OFFSET), 0x0e);
        // Every other byte is padding, and zero here.
        let set = [LOG2_ELEM_SIZE_OFFSET, INDEX_MASK_OFFSET, PRODUCER_INDEX_OFFSET, CONSUMER_INDEX_OFFSET];
        for (i, &byte) in b.iter().enumerate() {
            if !set.iter().any(|&o| (o..o + 4).contains(&i)) {
                assert_eq!(byte, 0, "byte {i}");
            }
        }
    }
}
