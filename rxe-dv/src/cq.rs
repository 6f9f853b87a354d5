//! The rxe CQ poller: reads the kernel's work-completion records straight from the mapped
//! queue buffer, as rdma-core's `rxe_poll_cq` does, without its spinlock or a per-record
//! consumer store.

use crate::error::AttachError;
use crate::queue::{Geometry, QueueBuf, QueueDesc};
use crate::record::{completion, fault, fill_from_words, Failures};
use crate::view::Views;
use dvcq_provider::{Completion, CqDriver, CqInfo, DmaBuffer, FaultKind};
use std::sync::Arc;

/// A poller on one rxe CQ's queue buffer.
///
/// `Send` but not `Sync`: one consumer per CQ, like rdma-core's `cq->lock`. Each
/// [`CqDriver::poll`] loads the producer index once (acquire), copies the records up to it,
/// and stores the consumer index once (release) if it took any. `ci` is a free-running
/// counter, `ci mod slots` the next slot; it starts at the consumer index found at attach
/// and is stored masked, as rdma-core stores it.
///
/// # A corrupt producer index
///
/// The kernel never stores a producer index above `index_mask`. If one is seen, the poll
/// consumes nothing and returns one fault item ([`FaultKind::BadField`], the value being the
/// index, the position `ci`), once per bad value; polls return 0 while that value stays, and
/// resume when the index is back inside the mask.
#[derive(Debug)]
pub struct RxeCq {
    q: QueueBuf,
    /// Free-running consumer counter.
    ci: u32,
    mask: u32,
    /// The out-of-mask producer index last reported as a fault item.
    bad_producer: Option<u32>,
    /// The most records one poll call found waiting (producer minus consumer).
    high_water: u32,
    /// Stores of the consumer index.
    consumer_writes: u64,
    /// The failed completions and fault items it returned, counted where they are made.
    failures: Failures,
}

impl RxeCq {
    /// Checks the queue buffer `desc` describes and opens a poller on it.
    ///
    /// The self-checks, each naming what it saw when it fails: the base is a non-null page
    /// address; `cqe >= 1`; `index_mask + 1` is a power of two of at least `cqe + 1`; the
    /// element stride `2^log2_elem_size` holds a `struct ib_uverbs_wc` (64 bytes at least,
    /// 64 KiB at most) and equals `desc.wc_size` when given; the header and all slots fit in
    /// `map_size`; the producer and consumer indexes are inside `index_mask`.
    ///
    /// # Safety
    ///
    /// `desc.base` must point to `desc.map_size` bytes of an rxe queue buffer that stay
    /// mapped, readable and writable for the life of the poller, shared with the kernel
    /// producer (or a model of it). Nothing else in this process may access them while the
    /// poller lives except through dvcq's ring primitives: in particular rdma-core must not
    /// poll this CQ (`ibv_poll_cq`, `ibv_start_poll`) meanwhile, and the CQ must not be
    /// resized or destroyed.
    ///
    /// # Errors
    ///
    /// The first self-check that fails ([`AttachError`]).
    #[allow(unsafe_code)]
    pub unsafe fn attach(desc: QueueDesc) -> Result<Self, AttachError> {
        // SAFETY: the caller's guarantee is `QueueBuf::map`'s contract, passed on.
        let q = unsafe { QueueBuf::map(&desc) }?;
        Ok(Self::new(q))
    }

    /// Checks and opens a queue buffer image at the start of `buf` (a model's, or one
    /// loaded for decoding), of CQ depth `cqe`. Safe: the buffer owns its memory and is
    /// only accessed through dvcq's primitives.
    ///
    /// # Errors
    ///
    /// As [`RxeCq::attach`], with `wc_size` unchecked.
    pub fn on_dma_buffer(buf: &Arc<DmaBuffer>, cqe: i32) -> Result<Self, AttachError> {
        Ok(Self::new(QueueBuf::on_dma(buf, cqe, None)?))
    }

    fn new(q: QueueBuf) -> Self {
        let g = q.geometry();
        Self {
            q,
            ci: g.consumer,
            mask: g.index_mask,
            bad_producer: None,
            high_water: 0,
            consumer_writes: 0,
            failures: Failures::default(),
        }
    }

    /// The most completions one poll call found waiting: the producer index it loaded minus
    /// the consumer index. Records only accumulate between poll calls, so this is how full
    /// the queue got, up to what arrived after the last call.
    pub fn high_water(&self) -> u32 {
        self.high_water
    }

    /// Stores of the consumer index so far (one per poll call that took records, and per
    /// [`CqDriver::update_ci`]).
    pub fn consumer_writes(&self) -> u64 {
        self.consumer_writes
    }

    /// The failed completions (fault items included) and the fault items its polls
    /// returned, counted as they were made: a successful completion costs the count
    /// nothing.
    pub fn failures(&self) -> Failures {
        self.failures
    }

    /// The queue's shape as checked at attach.
    pub fn geometry(&self) -> Geometry {
        self.q.geometry()
    }

    /// Completions waiting now (one acquire load); 0 while the producer index is corrupt.
    pub fn len(&self) -> u32 {
        let head = self.ci & self.mask;
        let prod = self.q.producer_acquire(head);
        if prod > self.mask {
            0
        } else {
            prod.wrapping_sub(head) & self.mask
        }
    }

    /// True when no completion is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when a poll now would return nothing and change nothing: the producer index
    /// is the consumer's, and no corrupt one was reported last (a poll that finds a sane
    /// index again forgets that report).
    #[inline(always)]
    pub fn idle(&self) -> bool {
        let head = self.ci & self.mask;
        self.bad_producer.is_none() && self.q.producer_acquire(head) == head
    }

    /// Zero-copy views of the records published now, consumed as a poll consumes them (see
    /// [`crate::view`]); the consumer index is stored when the walk is dropped. A corrupt
    /// producer index shows no record (the next poll reports it).
    pub fn views(&mut self) -> Views<'_> {
        let head = self.ci & self.mask;
        let prod = self.q.producer_acquire(head);
        let ready = if prod > self.mask { 0 } else { prod.wrapping_sub(head) & self.mask };
        let start = self.ci;
        Views { q: &self.q, ci: &mut self.ci, mask: self.mask, cur: start, end: start.wrapping_add(ready) }
    }

    /// The consumer index as stored in the queue buffer (what the kernel sees).
    pub fn stored_ci(&self) -> u32 {
        self.q.consumer_stored()
    }

    /// The poll's answer to a producer index outside the mask (see the type's docs).
    #[cold]
    fn corrupt_producer(&mut self, prod: u32, out: &mut [Completion]) -> usize {
        if self.bad_producer == Some(prod) {
            return 0;
        }
        self.bad_producer = Some(prod);
        match out.first_mut() {
            Some(o) => {
                *o = fault(FaultKind::BadField, self.ci, prod);
                self.failures.count(o);
                1
            }
            None => 0,
        }
    }
}

impl CqDriver for RxeCq {
    fn info(&self) -> CqInfo {
        let g = self.q.geometry();
        CqInfo { vendor: "rxe", entries: g.slots(), cqe_size: g.elem_size(), cqn: 0 }
    }

    #[inline]
    fn poll(&mut self, out: &mut [Completion]) -> usize {
        if out.is_empty() {
            return 0;
        }
        let head = self.ci & self.mask;
        let prod = self.q.producer_acquire(head);
        if prod > self.mask {
            return self.corrupt_producer(prod, out);
        }
        self.bad_producer = None;
        let waiting = prod.wrapping_sub(head) & self.mask;
        self.high_water = self.high_water.max(waiting);
        let ready = waiting as usize;
        let mut pos = self.ci;
        for o in out.iter_mut().take(ready) {
            fill_from_words(o, &self.q.record_words(pos), pos, &mut self.failures);
            pos = pos.wrapping_add(1);
        }
        let n = pos.wrapping_sub(self.ci);
        if n != 0 {
            self.ci = pos;
            self.q.publish_consumer(pos & self.mask);
            self.consumer_writes += 1;
        }
        n as usize
    }

    fn peek(&self) -> Option<Completion> {
        let head = self.ci & self.mask;
        let prod = self.q.producer_acquire(head);
        if prod > self.mask {
            return (self.bad_producer != Some(prod)).then(|| fault(FaultKind::BadField, self.ci, prod));
        }
        (prod != head).then(|| completion(&self.q.record(self.ci), self.ci))
    }

    fn ci(&self) -> u32 {
        self.ci
    }

    fn update_ci(&mut self) {
        self.q.publish_consumer(self.ci & self.mask);
        self.consumer_writes += 1;
    }
}
