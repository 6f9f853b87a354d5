//! The kernel-mapped rxe queue buffer (`struct rxe_queue_buf`, uapi `rdma_user_rxe.h`): the
//! self-checks it must pass, and the only place in this crate that touches its memory.
//!
//! # Who writes what
//!
//! - The kernel (`rxe_queue_init`) writes `log2_elem_size` and `index_mask` before the
//!   buffer is mapped, and never again; they are read once here, at attach.
//! - The kernel (`rxe_cq_post`) is the producer: it copies a record into the slot at its
//!   private index, then stores the next index, masked, with release ordering
//!   (`queue_advance_producer`, `smp_store_release`). It reads the consumer index with
//!   acquire ordering (`queue_get_consumer`, `smp_load_acquire`) to test for a full queue.
//! - The poller is the consumer: it loads the producer index with acquire ordering, copies
//!   records out, then stores its consumer index, masked, with release ordering (rdma-core
//!   `providers/rxe/rxe_queue.h`: `queue_empty`, `consumer_addr`, `advance_consumer`, the
//!   same in v44.0 and master).
//!
//! Both stored indexes stay in `0..=index_mask` (rxe_queue.h: "producer_index and
//! consumer_index always lie in the range [0, index_mask]"), and the ring is empty when they
//! are equal. The poller keeps a free-running counter of its own and stores it masked.
//!
//! # Access rule
//!
//! Every access goes through [`dvcq_provider`]'s ring primitives ([`DoorbellWord`] for the
//! two index words, [`CqRing`] for the elements), which use only aligned 8-byte atomic
//! operations and never make a reference into the mapping. The elements are addressed as a
//! ring of 64-byte chunks, an element being `2^(log2_elem_size - 6)` consecutive chunks, so
//! any power-of-two stride from 64 bytes up uses the same accessors.
#![allow(unsafe_code)]

use crate::error::AttachError;
use dvcq_provider::{CqRing, DmaBuffer, DoorbellWord, Error as ProviderError, MAX_ENTRIES};
use dvcq_uapi::rxe::queue::{CONSUMER_INDEX_OFFSET, DATA_OFFSET, LOG2_ELEM_SIZE_OFFSET, PRODUCER_INDEX_OFFSET};
use dvcq_uapi::rxe::wc::{UverbsWc, UVERBS_WC_SIZE};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The page size the kernel maps queue buffers in (x86_64): the buffer starts on a page,
/// and `mmap_info.size` is whole pages (`rxe_create_mmap_info`, `PAGE_ALIGN`).
pub const PAGE_SIZE: usize = 4096;
/// log2 of the chunk the elements are addressed in.
const CHUNK_LOG2: u32 = 6;
/// The least `log2_elem_size`: `sizeof(struct ib_uverbs_wc)` (48) rounded up to a power of
/// two. rdma-core's `rxe_create_cq` refuses a queue whose stride is below 48.
pub const MIN_LOG2_ELEM_SIZE: u32 = UVERBS_WC_SIZE.next_power_of_two().trailing_zeros();
/// The largest `log2_elem_size` accepted (64 KiB): far above any stride the kernel uses
/// (a cache line or `sizeof(struct rxe_cqe)`, rounded up to a power of two), and a bound on
/// the shifts below.
pub const MAX_LOG2_ELEM_SIZE: u32 = 16;

const _: () = assert!(1 << MIN_LOG2_ELEM_SIZE >= UVERBS_WC_SIZE && MIN_LOG2_ELEM_SIZE == CHUNK_LOG2);
const _: () = assert!(DATA_OFFSET % (1 << CHUNK_LOG2) == 0 && PRODUCER_INDEX_OFFSET % 8 == 0);
const _: () = assert!(CONSUMER_INDEX_OFFSET % 8 == 0 && LOG2_ELEM_SIZE_OFFSET == 0);

/// Where a CQ's queue buffer is and what the verbs CQ says about it: what
/// [`crate::RxeCq::attach`] checks and maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueDesc {
    /// The mapped `struct rxe_queue_buf` (rdma-core's `rxe_cq.queue`).
    pub base: *mut u8,
    /// Bytes mapped there (`rxe_cq.mmap_info.size`).
    pub map_size: usize,
    /// The CQ depth the verbs CQ reports (`ibv_cq.cqe`).
    pub cqe: i32,
    /// rdma-core's `rxe_cq.wc_size` (`1 << log2_elem_size` at create), when the descriptor
    /// came from the private struct; checked against the queue when given.
    pub wc_size: Option<u64>,
}

/// The queue's shape as read and checked at attach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Geometry {
    /// log2 of the element stride.
    pub log2_elem_size: u32,
    /// Slots minus one.
    pub index_mask: u32,
    /// The producer index at attach.
    pub producer: u32,
    /// The consumer index at attach: where the poller starts.
    pub consumer: u32,
}

impl Geometry {
    /// Ring slots, `index_mask + 1`.
    pub fn slots(&self) -> u32 {
        self.index_mask.wrapping_add(1)
    }

    /// Element stride in bytes.
    pub fn elem_size(&self) -> u32 {
        1 << self.log2_elem_size
    }
}

/// The four header words as found in the mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Header {
    log2_elem_size: u32,
    index_mask: u32,
    producer: u32,
    consumer: u32,
}

/// The self-checks of a queue buffer's header against the mapping and the verbs CQ, in the
/// order a reader would make them; the first that fails is the error.
fn check(h: Header, map_size: usize, cqe: i32, wc_size: Option<u64>) -> Result<Geometry, AttachError> {
    if cqe < 1 {
        return Err(AttachError::BadCqe { cqe });
    }
    let slots = u64::from(h.index_mask) + 1;
    if !slots.is_power_of_two() || slots > 1 << 31 {
        return Err(AttachError::SlotsNotPowerOfTwo { index_mask: h.index_mask });
    }
    if slots < cqe as u64 + 1 {
        return Err(AttachError::RingSmallerThanCq { slots, cqe });
    }
    if !(MIN_LOG2_ELEM_SIZE..=MAX_LOG2_ELEM_SIZE).contains(&h.log2_elem_size) {
        let (min, max) = (1 << MIN_LOG2_ELEM_SIZE, 1 << MAX_LOG2_ELEM_SIZE);
        return Err(AttachError::ElemSize { log2_elem_size: h.log2_elem_size, min, max });
    }
    let elem_size = 1u64 << h.log2_elem_size;
    if let Some(wc_size) = wc_size.filter(|&w| w != elem_size) {
        return Err(AttachError::WcSizeMismatch { wc_size, elem_size });
    }
    // At most 2^31 slots of 2^16 bytes: no overflow in u64.
    let bytes = slots << h.log2_elem_size;
    let need = DATA_OFFSET as u64 + bytes;
    if need > map_size as u64 {
        return Err(AttachError::MapTooSmall { need, slots, elem_size, have: map_size as u64 });
    }
    let max = u64::from(MAX_ENTRIES) << CHUNK_LOG2;
    if bytes > max {
        return Err(AttachError::RingTooLarge { bytes, max });
    }
    for (which, index) in [("producer", h.producer), ("consumer", h.consumer)] {
        if index > h.index_mask {
            return Err(AttachError::IndexOutsideMask { which, index, index_mask: h.index_mask });
        }
    }
    Ok(Geometry {
        log2_elem_size: h.log2_elem_size,
        index_mask: h.index_mask,
        producer: h.producer,
        consumer: h.consumer,
    })
}

/// The first four bytes of an 8-byte word as `load_le64` returns it, as a host-order `u32`:
/// the index word that opens the granule (the rest is padding).
#[inline(always)]
fn low_word(w: u64) -> u32 {
    let b = w.to_le_bytes();
    u32::from_ne_bytes([b[0], b[1], b[2], b[3]])
}

/// The second four bytes of such a word, as a host-order `u32`.
#[inline(always)]
fn high_word(w: u64) -> u32 {
    let b = w.to_le_bytes();
    u32::from_ne_bytes([b[4], b[5], b[6], b[7]])
}

/// The 8-byte word whose memory bytes are `lo` then `hi` in host order, in the form
/// `store_le64` takes.
#[inline(always)]
fn word_of(lo: u32, hi: u32) -> u64 {
    let (l, h) = (lo.to_ne_bytes(), hi.to_ne_bytes());
    u64::from_le_bytes([l[0], l[1], l[2], l[3], h[0], h[1], h[2], h[3]])
}

/// A checked, mapped queue buffer: the two index words and the element ring.
#[derive(Debug)]
pub(crate) struct QueueBuf {
    producer: DoorbellWord,
    consumer: DoorbellWord,
    /// `pad_3[0]`, the other half of the consumer index's granule, as found at attach:
    /// nobody writes it, and every consumer-index store writes it back unchanged.
    consumer_pad: u32,
    /// The elements as 64-byte chunks.
    data: CqRing<64>,
    /// `log2_elem_size - 6`: chunks per element, as a shift.
    chunk_shift: u32,
    geo: Geometry,
}

impl QueueBuf {
    /// Checks and maps the queue buffer `desc` describes.
    ///
    /// # Safety
    ///
    /// `desc.base` must point to `desc.map_size` bytes that stay mapped, readable and
    /// writable for the life of the result, that the kernel (or a model) shares as an rxe
    /// queue buffer, and that nothing else in this process accesses while the result lives
    /// except through dvcq's ring primitives (rdma-core must not poll this CQ meanwhile).
    ///
    /// # Errors
    ///
    /// The failed self-check ([`AttachError`]).
    pub(crate) unsafe fn map(desc: &QueueDesc) -> Result<Self, AttachError> {
        let base = desc.base;
        check_base(base as usize)?;
        if desc.map_size < DATA_OFFSET {
            let have = desc.map_size as u64;
            return Err(AttachError::MapTooSmall { need: DATA_OFFSET as u64, slots: 0, elem_size: 0, have });
        }
        let mut word = |off: usize| {
            // SAFETY: `off` is one of the header's index offsets, all below DATA_OFFSET <= map_size and multiples of 8 on a page-aligned base, so the word's granule lies inside the mapping, which the caller guarantees is live and accessed only through dvcq's primitives.
            unsafe { DoorbellWord::new(base.add(off)) }
        };
        let ring = |chunks: u32| {
            // SAFETY: `check` proved DATA_OFFSET + chunks * 64 <= map_size, so the ring lies inside the mapping (live, shared and accessed only through dvcq's primitives per the caller), and base + DATA_OFFSET is 64-aligned.
            unsafe { CqRing::<64>::new(base.add(DATA_OFFSET), chunks) }
        };
        Self::open(desc.map_size, desc.cqe, desc.wc_size, &mut word, ring)
    }

    /// Checks and opens a queue buffer image at the start of `buf` (a model's, or one
    /// loaded for decoding), keeping the buffer alive.
    ///
    /// # Errors
    ///
    /// As [`QueueBuf::map`].
    pub(crate) fn on_dma(buf: &Arc<DmaBuffer>, cqe: i32, wc_size: Option<u64>) -> Result<Self, AttachError> {
        check_base(buf.as_ptr() as usize)?;
        let ring = |chunks: u32| buf.cq_ring::<64>(DATA_OFFSET, chunks);
        Self::open(buf.len(), cqe, wc_size, &mut |off| buf.doorbell(off), ring)
    }

    /// Reads the header through `word`, checks it, then builds the element ring.
    fn open(
        map_size: usize,
        cqe: i32,
        wc_size: Option<u64>,
        word: &mut dyn FnMut(usize) -> Result<DoorbellWord, ProviderError>,
        ring: impl FnOnce(u32) -> Result<CqRing<64>, ProviderError>,
    ) -> Result<Self, AttachError> {
        if map_size < DATA_OFFSET {
            let have = map_size as u64;
            return Err(AttachError::MapTooSmall { need: DATA_OFFSET as u64, slots: 0, elem_size: 0, have });
        }
        // The header words were written before the mapping was handed out; acquire anyway,
        // as this runs once.
        let shape = word(LOG2_ELEM_SIZE_OFFSET)?.load_le64(Ordering::Acquire)?;
        let producer = word(PRODUCER_INDEX_OFFSET)?;
        let consumer = word(CONSUMER_INDEX_OFFSET)?;
        let p = producer.load_le64(Ordering::Acquire)?;
        let c = consumer.load_le64(Ordering::Acquire)?;
        let h = Header {
            log2_elem_size: low_word(shape),
            index_mask: high_word(shape),
            producer: low_word(p),
            consumer: low_word(c),
        };
        let geo = check(h, map_size, cqe, wc_size)?;
        let chunk_shift = geo.log2_elem_size - CHUNK_LOG2;
        // `check` bounded slots << chunk_shift by MAX_ENTRIES.
        let data = ring(geo.slots() << chunk_shift)?;
        Ok(Self { producer, consumer, consumer_pad: high_word(c), data, chunk_shift, geo })
    }

    /// The shape checked at attach.
    pub(crate) fn geometry(&self) -> Geometry {
        self.geo
    }

    /// The producer index, loaded with acquire ordering: every record the producer wrote
    /// before storing it is visible to the reads that follow (`queue_empty`'s
    /// `memory_order_acquire`). `empty` is returned if the word cannot be read, which
    /// `open` ruled out (it loaded the same word).
    #[inline(always)]
    pub(crate) fn producer_acquire(&self, empty: u32) -> u32 {
        self.producer.load_le64(Ordering::Acquire).map_or(empty, low_word)
    }

    /// The consumer index as stored (relaxed: the poller is its only writer).
    pub(crate) fn consumer_stored(&self) -> u32 {
        self.consumer.load_le64(Ordering::Relaxed).map_or(self.geo.consumer, low_word)
    }

    /// Publishes consumer index `index` (already masked) with release ordering: every read
    /// of the records before it happens before the producer may reuse their slots
    /// (`advance_consumer`'s `memory_order_release`).
    #[inline(always)]
    pub(crate) fn publish_consumer(&self, index: u32) {
        // The word is 8-aligned (checked when it was loaded in `open`), so this cannot fail.
        let _ = self.consumer.store_le64(word_of(index, self.consumer_pad), Ordering::Release);
    }

    /// The 8-byte word at byte `off` (0, 8, ..., 40) of the record in slot `pos mod slots`,
    /// read alone (a view's field); 0 for an offset outside the record, which the views'
    /// accessors never pass. As [`QueueBuf::record`], only for a slot before the producer
    /// index.
    #[inline(always)]
    pub(crate) fn record_word(&self, pos: u32, off: usize) -> u64 {
        if off >= UVERBS_WC_SIZE {
            return 0;
        }
        self.data.read_at::<u64>(pos.wrapping_shl(self.chunk_shift), off).unwrap_or(0)
    }

    /// The record in slot `pos mod slots` as its six 8-byte words in memory order, each the
    /// native-endian load of those 8 bytes (`bytemuck::cast` turns them back into the
    /// record). As [`QueueBuf::record`], only for a slot before the producer index.
    #[inline(always)]
    pub(crate) fn record_words(&self, pos: u32) -> [u64; 6] {
        // The slot is addressed once; each offset is a constant inside the 48-byte record,
        // so the reads cannot miss (0 would stand for one that did).
        let slot = self.data.view().slot_ref::<UVERBS_WC_SIZE>(pos.wrapping_shl(self.chunk_shift));
        let w = |off: usize| slot.read_at::<u64>(off).unwrap_or(0);
        [w(0), w(8), w(16), w(24), w(32), w(40)]
    }

    /// A copy of the record in slot `pos mod slots` (the first 48 bytes of the element).
    /// Call only for a slot before the producer index loaded by [`QueueBuf::producer_acquire`].
    #[inline(always)]
    pub(crate) fn record(&self, pos: u32) -> UverbsWc {
        // The ring reduces the chunk index modulo its size, slots << chunk_shift, which
        // divides 2^32: the wrapped shift addresses slot `pos mod slots`.
        self.data.read::<UverbsWc, 0>(pos.wrapping_shl(self.chunk_shift))
    }
}

/// The buffer must start on a page: `mmap` returns page-aligned addresses.
fn check_base(addr: usize) -> Result<(), AttachError> {
    if addr == 0 {
        return Err(AttachError::NullQueue);
    }
    if addr % PAGE_SIZE != 0 {
        return Err(AttachError::Misaligned { addr, page: PAGE_SIZE });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(log2_elem_size: u32, index_mask: u32) -> Header {
        Header { log2_elem_size, index_mask, producer: 0, consumer: 0 }
    }

    /// The kernel's own shape passes: 32 slots of 128 bytes for a CQ of 31, in the two pages
    /// it maps (8 KiB for a 16-entry CQ in the capture
    /// `tests/data/rxe-linux-6.1-rdma-core-44.txt`).
    #[test]
    fn the_kernels_shape_passes() {
        let g = check(header(7, 31), 8192, 31, Some(128)).unwrap();
        assert_eq!((g.slots(), g.elem_size()), (32, 128));
        // A CQ smaller than the ring is fine; the exact fit of the mapping too.
        assert!(check(header(7, 31), DATA_OFFSET + 32 * 128, 1, None).is_ok());
    }

    /// Each check names its values; the order is the one documented on `check`.
    #[test]
    fn each_check_reports_what_it_saw() {
        use AttachError as E;
        let cases: [(Header, usize, i32, Option<u64>, AttachError); 9] = [
            (header(7, 31), 8192, 0, None, E::BadCqe { cqe: 0 }),
            (header(7, 30), 8192, 16, None, E::SlotsNotPowerOfTwo { index_mask: 30 }),
            (header(7, u32::MAX), 8192, 16, None, E::SlotsNotPowerOfTwo { index_mask: u32::MAX }),
            (header(7, 15), 8192, 16, None, E::RingSmallerThanCq { slots: 16, cqe: 16 }),
            (header(5, 31), 8192, 16, None, E::ElemSize { log2_elem_size: 5, min: 64, max: 65536 }),
            (header(17, 31), 8192, 16, None, E::ElemSize { log2_elem_size: 17, min: 64, max: 65536 }),
            (header(7, 31), 8192, 16, Some(64), E::WcSizeMismatch { wc_size: 64, elem_size: 128 }),
            (header(7, 31), 4096, 16, None, E::MapTooSmall { need: 384 + 4096, slots: 32, elem_size: 128, have: 4096 }),
            (
                Header { producer: 32, ..header(7, 31) },
                8192,
                16,
                None,
                E::IndexOutsideMask { which: "producer", index: 32, index_mask: 31 },
            ),
        ];
        for (h, map, cqe, wc, want) in cases {
            assert_eq!(check(h, map, cqe, wc), Err(want), "{h:?} map {map} cqe {cqe}");
        }
        let h = Header { consumer: 0x8000_0000, ..header(6, 1) };
        let e = check(h, 4096, 1, None).unwrap_err();
        assert_eq!(e.to_string(), "rxe queue consumer index 0x80000000 is outside index_mask 0x1");
        // The largest ring the primitive addresses passes; twice that does not.
        let big = (MAX_ENTRIES as usize) << CHUNK_LOG2;
        let slots = (big >> 7) as u32;
        assert!(check(header(7, slots - 1), DATA_OFFSET + big, 1, None).is_ok());
        let e = check(header(7, 2 * slots - 1), usize::MAX, 1, None).unwrap_err();
        assert_eq!(e, E::RingTooLarge { bytes: 2 * big as u64, max: big as u64 });
    }

    #[test]
    fn words_split_and_join_in_memory_order() {
        let w = word_of(0x1122_3344, 0x5566_7788);
        let mut bytes = [0u8; 8];
        bytes[..4].copy_from_slice(&0x1122_3344u32.to_ne_bytes());
        bytes[4..].copy_from_slice(&0x5566_7788u32.to_ne_bytes());
        assert_eq!(w.to_le_bytes(), bytes);
        assert_eq!((low_word(w), high_word(w)), (0x1122_3344, 0x5566_7788));
    }

    #[test]
    fn the_base_must_be_a_page() {
        assert_eq!(check_base(0), Err(AttachError::NullQueue));
        assert_eq!(check_base(4096 + 64), Err(AttachError::Misaligned { addr: 4160, page: 4096 }));
        assert_eq!(check_base(3 * 4096), Ok(()));
    }
}
