//! A software model of the rdma_rxe kernel side of a user CQ: the queue buffer as
//! `rxe_queue_init` allocates it, and the producer as `rxe_cq_post` runs.
//!
//! - Shape: `cqe + 1` rounded up to a power of two slots (the CQ then reports
//!   `slots - 1`), elements of `2^log2_elem_size` bytes, header then slots in one zeroed
//!   buffer of whole pages (`vmalloc_user`, `PAGE_ALIGN`). The default stride, 128, is an
//!   inference: the kernel pads `sizeof(struct rxe_cqe)` (a union with its own
//!   `struct ib_wc`, 72 bytes on x86_64 as we read it) to a power of two of at least a
//!   cache line, and 128 is what makes the 8 KiB mapping measured for a 16-entry CQ
//!   (the capture in `tests/data/rxe-linux-6.1-rdma-core-44.txt`: `mmap_size=8192`,
//!   `log2_elem_size=7`): 384 + 32 × 128 bytes, rounded up to pages.
//! - Full: `((prod + 1 - cons) & index_mask) == 0` with the consumer index loaded with
//!   acquire ordering (`queue_full`, `queue_get_consumer`): `cqe` records fit. A post to a
//!   full queue drops the record, raises `IB_EVENT_CQ_ERR` and fails (`-EBUSY`).
//! - Post: the record is copied into the slot at the producer's private index (the kernel
//!   zeroes its `rxe_cqe` first, so bytes past the 48-byte record are zero), then the next
//!   index, masked, is stored with release ordering (`queue_advance_producer`).
//!
//! The model runs inline ([`RxeModel::push`]) or on its own thread
//! ([`RxeModel::spawn_producer`]).

mod image;

pub use image::{record, rxe_cq_bytes};

use crate::cq::RxeCq;
use crate::error::AttachError;
use crate::locate::RxeCqFields;
use crate::queue::{QueueDesc, PAGE_SIZE};
use dvcq_provider::{DmaBuffer, DoorbellWord, Error as ProviderError};
use dvcq_uapi::rxe::queue::{CONSUMER_INDEX_OFFSET, DATA_OFFSET, LOG2_ELEM_SIZE_OFFSET, PRODUCER_INDEX_OFFSET};
use dvcq_uapi::rxe::wc::{UverbsWc, UVERBS_WC_SIZE};
use dvcq_uapi::rxe::{MmInfo, RxeCqLayout};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The largest CQ the model builds (rdma_rxe's default `max_cqe` is below this).
pub const MAX_MODEL_CQE: u32 = (1 << 20) - 1;
/// The `mmap` offset the model reports: the kernel hands out offsets from one page on.
pub const MODEL_MMAP_OFFSET: u64 = PAGE_SIZE as u64;

/// Model set-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelConfig {
    /// The CQ depth asked of `ibv_create_cq`, 1 to [`MAX_MODEL_CQE`].
    pub cqe: u32,
    /// log2 of the element stride, 6 to 12.
    pub log2_elem_size: u32,
}

impl ModelConfig {
    /// The stride rdma_rxe uses on x86_64 (see the module docs).
    pub const KERNEL_LOG2_ELEM_SIZE: u32 = 7;

    /// A CQ of depth `cqe` with the kernel's stride.
    pub fn new(cqe: u32) -> Self {
        Self { cqe, log2_elem_size: Self::KERNEL_LOG2_ELEM_SIZE }
    }
}

/// Something the kernel reported asynchronously.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelEvent {
    /// `IB_EVENT_CQ_ERR`: a record was dropped because the queue was full.
    CqErr,
}

/// Errors of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// Memory set-up failed.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// Bad model configuration.
    #[error("rxe model: {0}")]
    Config(&'static str),
    /// The queue was full: the record was dropped and `IB_EVENT_CQ_ERR` raised.
    #[error("rxe cq full: producer index {prod}, consumer index {cons}, {cqe} records fit")]
    Full {
        /// The producer's index.
        prod: u32,
        /// The consumer index read from the queue.
        cons: u32,
        /// Records the queue holds.
        cqe: u32,
    },
    /// A threaded producer waited too long for room.
    #[error("rxe model producer stalled for {ms} ms at producer index {prod}")]
    Stalled {
        /// The producer's index.
        prod: u32,
        /// How long it waited.
        ms: u64,
    },
}

/// The rxe kernel side of one user CQ.
#[derive(Debug)]
pub struct RxeModel {
    cfg: ModelConfig,
    mem: Arc<DmaBuffer>,
    slots: u32,
    producer_word: DoorbellWord,
    consumer_word: DoorbellWord,
    /// The kernel's private producer index (`q->index`), `0..=index_mask`.
    prod: u32,
    /// An element of zeroes to copy a record into (the kernel zeroes its `rxe_cqe`).
    elem: Vec<u8>,
    events: Vec<ModelEvent>,
}

impl RxeModel {
    /// A zeroed queue buffer with the header `rxe_queue_init` writes.
    ///
    /// # Errors
    ///
    /// [`ModelError::Config`] for a bad size, [`ModelError::Provider`] if mapping fails.
    pub fn new(cfg: ModelConfig) -> Result<Self, ModelError> {
        if !(1..=MAX_MODEL_CQE).contains(&cfg.cqe) {
            return Err(ModelError::Config("cqe must be from 1 to 2^20 - 1"));
        }
        if !(6..=12).contains(&cfg.log2_elem_size) {
            return Err(ModelError::Config("log2_elem_size must be from 6 to 12"));
        }
        let slots = (cfg.cqe + 1).next_power_of_two();
        let elem_size = 1usize << cfg.log2_elem_size;
        let map_size = (DATA_OFFSET + slots as usize * elem_size).div_ceil(PAGE_SIZE) * PAGE_SIZE;
        let mem = Arc::new(DmaBuffer::new(map_size)?);
        let model = Self {
            cfg,
            producer_word: mem.doorbell(PRODUCER_INDEX_OFFSET)?,
            consumer_word: mem.doorbell(CONSUMER_INDEX_OFFSET)?,
            mem,
            slots,
            prod: 0,
            elem: vec![0; elem_size],
            events: Vec::new(),
        };
        model.write_header(cfg.log2_elem_size, slots - 1);
        Ok(model)
    }

    /// The configuration.
    pub fn config(&self) -> &ModelConfig {
        &self.cfg
    }
    /// The CQ depth the kernel grants and the verbs CQ reports: `slots - 1`.
    pub fn cqe(&self) -> i32 {
        (self.slots - 1) as i32
    }
    /// Ring slots.
    pub fn slots(&self) -> u32 {
        self.slots
    }
    /// Element stride in bytes.
    pub fn elem_size(&self) -> usize {
        self.elem.len()
    }
    /// Bytes mapped (whole pages).
    pub fn map_size(&self) -> usize {
        self.mem.len()
    }
    /// The queue buffer.
    pub fn mem(&self) -> &Arc<DmaBuffer> {
        &self.mem
    }
    /// Events raised so far.
    pub fn events(&self) -> &[ModelEvent] {
        &self.events
    }

    /// The descriptor the glue would build for this CQ: what [`RxeCq::attach`] takes. The
    /// pointer is valid while the model (or a poller from [`RxeModel::poller`]) lives.
    pub fn desc(&self) -> QueueDesc {
        QueueDesc {
            base: self.mem.as_ptr(),
            map_size: self.mem.len(),
            cqe: self.cqe(),
            wc_size: Some(self.elem.len() as u64),
        }
    }

    /// What rdma-core's `struct rxe_cq` holds for this CQ after `rxe_create_cq`.
    pub fn rxe_cq_fields(&self) -> RxeCqFields {
        RxeCqFields {
            cqe: self.cqe(),
            handle: 0,
            mmap_info: MmInfo { offset: MODEL_MMAP_OFFSET, size: self.mem.len() as u32, pad: 0 },
            queue: self.mem.as_ptr() as usize as u64,
            wc_size: self.elem.len() as u64,
        }
    }

    /// The bytes of rdma-core's `struct rxe_cq` for this CQ in layout `layout`
    /// ([`rxe_cq_bytes`]).
    pub fn rxe_cq_image(&self, layout: &RxeCqLayout) -> Vec<u8> {
        rxe_cq_bytes(layout, &self.rxe_cq_fields())
    }

    /// A poller on this model's queue buffer (it keeps the buffer alive).
    ///
    /// # Errors
    ///
    /// The poller's self-checks ([`AttachError`]), which a model's own header passes
    /// unless a test wrote garbage into it.
    pub fn poller(&self) -> Result<RxeCq, AttachError> {
        RxeCq::on_dma_buffer(&self.mem, self.cqe())
    }

    /// The producer's index (`q->index`, the value it last stored).
    pub fn producer_index(&self) -> u32 {
        self.prod
    }

    /// The consumer index as the kernel reads it (acquire), unmasked.
    pub fn consumer_index(&self) -> u32 {
        let w = self.consumer_word.load_le64(Ordering::Acquire).unwrap_or(0);
        first_u32(w)
    }

    /// Records waiting, as `queue_count` computes it.
    pub fn count(&self) -> u32 {
        self.prod.wrapping_sub(self.consumer_index()) & (self.slots - 1)
    }

    /// True when a post would fail (`queue_full`).
    pub fn is_full(&self) -> bool {
        self.prod.wrapping_add(1).wrapping_sub(self.consumer_index()) & (self.slots - 1) == 0
    }

    /// Posts `wc` as `rxe_cq_post` does.
    ///
    /// # Errors
    ///
    /// [`ModelError::Full`]: nothing written, [`ModelEvent::CqErr`] raised.
    pub fn push(&mut self, wc: &UverbsWc) -> Result<(), ModelError> {
        self.push_bytes(bytemuck::bytes_of(wc).try_into().unwrap_or(&[0; UVERBS_WC_SIZE]))
    }

    /// Posts a record of any 48 bytes (garbage tests), with the kernel's ordering.
    ///
    /// # Errors
    ///
    /// As [`RxeModel::push`].
    pub fn push_bytes(&mut self, rec: &[u8; UVERBS_WC_SIZE]) -> Result<(), ModelError> {
        if self.is_full() {
            self.events.push(ModelEvent::CqErr);
            return Err(ModelError::Full { prod: self.prod, cons: self.consumer_index(), cqe: self.slots - 1 });
        }
        self.write(rec)
    }

    /// Posts several records with [`RxeModel::push`]; stops at the first error.
    ///
    /// # Errors
    ///
    /// As [`RxeModel::push`].
    pub fn push_all<'a>(&mut self, wcs: impl IntoIterator<Item = &'a UverbsWc>) -> Result<(), ModelError> {
        wcs.into_iter().try_for_each(|wc| self.push(wc))
    }

    /// Waits (spinning, then sleeping) until there is room, then posts. A model convenience
    /// for threaded runs: the kernel would drop the record instead.
    ///
    /// # Errors
    ///
    /// [`ModelError::Stalled`] after `stall` without room.
    pub fn push_wait(&mut self, wc: &UverbsWc, stall: Duration) -> Result<(), ModelError> {
        let mut spins = 0u32;
        let mut since: Option<Instant> = None;
        while self.is_full() {
            spins += 1;
            if spins < 128 {
                std::hint::spin_loop();
                continue;
            }
            let t = *since.get_or_insert_with(Instant::now);
            if t.elapsed() > stall {
                return Err(ModelError::Stalled { prod: self.prod, ms: stall.as_millis() as u64 });
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        self.write(bytemuck::bytes_of(wc).try_into().unwrap_or(&[0; UVERBS_WC_SIZE]))
    }

    /// Moves the model to its own thread, which posts `wcs` in order, waiting for room
    /// (giving up with [`ModelError::Stalled`] after `stall` without room), and returns the
    /// model when done.
    pub fn spawn_producer<I>(mut self, wcs: I, stall: Duration) -> std::thread::JoinHandle<Result<Self, ModelError>>
    where
        I: IntoIterator<Item = UverbsWc> + Send + 'static,
    {
        std::thread::spawn(move || {
            for wc in wcs {
                self.push_wait(&wc, stall)?;
            }
            Ok(self)
        })
    }

    /// The record into the slot at the producer's index (the rest of the element zero),
    /// then the next index with release ordering.
    fn write(&mut self, rec: &[u8; UVERBS_WC_SIZE]) -> Result<(), ModelError> {
        let slot_off = DATA_OFFSET + self.prod as usize * self.elem.len();
        self.elem[..UVERBS_WC_SIZE].copy_from_slice(rec);
        self.mem.write_bytes(slot_off, &self.elem)?;
        self.prod = (self.prod + 1) & (self.slots - 1);
        self.store_producer(self.prod);
        Ok(())
    }

    /// Stores `index` as the producer index (release), the rest of its granule zero.
    fn store_producer(&self, index: u32) {
        // The word is 8-aligned (offset 128 of a page), so the store cannot fail.
        let _ = self.producer_word.store_le64(u64_with_first(index), Ordering::Release);
    }

    /// Writes the header's `log2_elem_size` and `index_mask` (construction, and tests that
    /// corrupt the header).
    pub fn write_header(&self, log2_elem_size: u32, index_mask: u32) {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&log2_elem_size.to_ne_bytes());
        b[4..].copy_from_slice(&index_mask.to_ne_bytes());
        // Offset 0 of a buffer of at least one page: in bounds.
        let _ = self.mem.write_bytes(LOG2_ELEM_SIZE_OFFSET, &b);
    }

    /// Stores any value as the producer index (release) without writing a record or
    /// moving the model's own index: a corrupt producer for tests.
    pub fn write_producer_raw(&self, index: u32) {
        self.store_producer(index);
    }

    /// Stores the model's own producer index again (undoing [`RxeModel::write_producer_raw`]).
    pub fn restore_producer(&self) {
        self.store_producer(self.prod);
    }

    /// Stores any value as the consumer index: a consumer that wrote garbage, or one that
    /// polled through rdma-core before the poller attached.
    pub fn write_consumer_raw(&self, index: u32) {
        let _ = self.consumer_word.store_le64(u64_with_first(index), Ordering::Release);
    }

    /// Stores `index` as both the producer's private index and the stored producer
    /// index: a queue that was already used before a test attaches.
    pub fn set_producer(&mut self, index: u32) {
        self.prod = index & (self.slots - 1);
        self.store_producer(self.prod);
    }

    /// A copy of the whole queue buffer (may be torn while a producer thread runs).
    pub fn snapshot(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.mem.len()];
        // In bounds by construction; an error would only leave zeros.
        let _ = self.mem.read_bytes(0, &mut v);
        v
    }
}

/// The host-order `u32` in the first four memory bytes of a word as `load_le64` gives it.
fn first_u32(w: u64) -> u32 {
    let b = w.to_le_bytes();
    u32::from_ne_bytes([b[0], b[1], b[2], b[3]])
}

/// The word `store_le64` takes to put `v` (host order) in the first four memory bytes and
/// zeros in the rest.
fn u64_with_first(v: u32) -> u64 {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&v.to_ne_bytes());
    u64::from_le_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `rxe_queue_init`'s sizing: `cqe + 1` rounded up to a power of two, `slots - 1`
    /// granted, header plus slots rounded to pages.
    #[test]
    fn sizes_follow_rxe_queue_init() {
        for (asked, slots, map) in [(1, 2, 4096), (2, 4, 4096), (16, 32, 8192), (31, 32, 8192), (255, 256, 36864)] {
            let m = RxeModel::new(ModelConfig::new(asked)).unwrap();
            assert_eq!((m.slots(), m.cqe(), m.map_size()), (slots, slots as i32 - 1, map), "cqe {asked}");
            let s = m.snapshot();
            assert_eq!(u32::from_ne_bytes(s[0..4].try_into().unwrap()), 7);
            assert_eq!(u32::from_ne_bytes(s[4..8].try_into().unwrap()), slots - 1);
        }
        assert!(RxeModel::new(ModelConfig::new(0)).is_err());
        assert!(RxeModel::new(ModelConfig { cqe: 4, log2_elem_size: 5 }).is_err());
    }

    /// `cqe` records fit; the next one is dropped with `IB_EVENT_CQ_ERR`, and room made by
    /// the consumer is used again.
    #[test]
    fn a_full_queue_drops_the_record_and_raises_cq_err() {
        let mut m = RxeModel::new(ModelConfig::new(3)).unwrap();
        let wc = UverbsWc { wr_id: 1, ..UverbsWc::default() };
        for _ in 0..3 {
            m.push(&wc).unwrap();
        }
        assert!(m.is_full());
        let e = m.push(&wc).unwrap_err();
        assert_eq!(e, ModelError::Full { prod: 3, cons: 0, cqe: 3 });
        assert_eq!(e.to_string(), "rxe cq full: producer index 3, consumer index 0, 3 records fit");
        assert_eq!((m.events(), m.producer_index()), (&[ModelEvent::CqErr][..], 3));
        m.write_consumer_raw(2);
        assert_eq!(m.count(), 1);
        m.push(&wc).unwrap();
        m.push(&wc).unwrap();
        assert_eq!((m.producer_index(), m.is_full()), (1, true), "the index wraps masked");
        let t = Instant::now();
        assert!(matches!(m.push_wait(&wc, Duration::from_millis(10)), Err(ModelError::Stalled { prod: 1, ms: 10 })));
        assert!(t.elapsed() >= Duration::from_millis(10));
    }

    /// The record lands in its slot, the rest of the element is zero, and the producer
    /// index is stored after it.
    #[test]
    fn a_post_writes_the_slot_then_the_index() {
        let mut m = RxeModel::new(ModelConfig::new(3)).unwrap();
        m.push_bytes(&[0xee; UVERBS_WC_SIZE]).unwrap();
        m.push_bytes(&[0x11; UVERBS_WC_SIZE]).unwrap();
        let s = m.snapshot();
        let slot1 = DATA_OFFSET + 128;
        assert!(s[slot1..slot1 + 48].iter().all(|&b| b == 0x11));
        assert!(s[slot1 + 48..slot1 + 128].iter().all(|&b| b == 0));
        assert_eq!(u32::from_ne_bytes(s[128..132].try_into().unwrap()), 2);
        assert_eq!(u32::from_ne_bytes(s[256..260].try_into().unwrap()), 0);
    }
}
