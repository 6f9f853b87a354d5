//! A software model of an irdma CQ. The device side is not public, so the model is inferred
//! from what rdma-core's consumer (`providers/irdma/uk.c` `irdma_uk_cq_poll_cmpl`) requires
//! and what the kernel asks of the device (`drivers/infiniband/hw/irdma/verbs.c`
//! `irdma_create_cq`, `hw.c` `irdma_flush_wqes`): the ring and the shadow area in
//! page-aligned memory, zeroed as rdma-core allocates them (`uverbs.c` `ucreate_cq`); CQEs
//! written body first and qword3 (with the valid bit) last with release ordering, the
//! extension before the main qword3 (the consumer tests qword3's valid bit, then reads the
//! rest behind `udma_from_device_barrier`); the producer phase starts at 1 (the polarity
//! `irdma_uk_cq_init` expects) and flips on every wrap; the consumer head is read from
//! shadow word 0, where the consumer stores it, and one slot is always kept free (inferred:
//! that head has no wrap bit, so a full ring and an empty one would look the same); an
//! overflow is recorded as a CQ error (`IRDMA_AE_CQ_OPERATION_ERROR`, which the kernel's
//! `irdma_process_aeq` reports as `IB_EVENT_CQ_ERR` on CQs created with `check_overflow`)
//! and the CQE is dropped; extended CQEs take two slots on GEN1/GEN2; flushes follow
//! GEN1/GEN2 (one CQE per queue, the provider makes the rest) or GEN3 (one per WR).
//!
//! The model runs inline ([`IrdmaModel::push`]) or on its own thread
//! ([`IrdmaModel::spawn_producer`]).

mod arm;
mod bench;
pub mod build;

pub use arm::{ArmFault, ShadowArm};
pub use bench::{bench_ring, bench_ring_qps, BenchRing, BENCH_MANY};
pub use build::{ModelCqe, ModelExt};

use crate::arm::ArmDoorbell;
use crate::cq::{CqConfig, CqError, IrdmaCq};
use crate::image::{ImageHeader, ImageQp, IrdmaImage};
use crate::registry::QpRegistry;
use crate::ring::{ring_slots, Pos, Rounding, SlotRing};
use crate::status::Compat;
use build::le_bytes;
use dvcq_provider::backoff::Backoff;
use dvcq_provider::{DmaBuffer, DoorbellWord, Error as ProviderError};
use dvcq_uapi::irdma::codes::ae;
use dvcq_uapi::irdma::cqe::off;
use dvcq_uapi::irdma::shadow::{ARM_OFFSET, DB_CQ_OFFSET, HEAD_OFFSET, SHADOW_AREA_SIZE};
use dvcq_uapi::irdma::HwRev;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

const PAGE: usize = 4096;

/// Model set-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelConfig {
    /// Ring slots, 4 to 2^20: a size rdma-core allocates ([`crate::ring::is_allocated_size`]:
    /// even on GEN2 and GEN3), rarely a power of two; [`ModelConfig::for_cqe`] sizes them
    /// as rdma-core does.
    pub entries: u32,
    /// Hardware generation.
    pub hw_rev: HwRev,
    /// Slot size, 32 or 64 (64 when the 64-byte CQE feature is on: GEN3).
    pub cqe_size: u32,
    /// The CQ id the model reports in events.
    pub cq_id: u32,
}

impl ModelConfig {
    /// A model of generation `hw_rev` with `entries` slots of that generation's size.
    pub fn new(hw_rev: HwRev, entries: u32) -> Self {
        Self { entries, hw_rev, cqe_size: hw_rev.cqe_size() as u32, cq_id: 3 }
    }

    /// The ring rdma-core's provider would allocate for `ibv_create_cq(cqe = requested)`
    /// on generation `hw_rev` ([`ring_slots`]; `rounding`: the rdma-core version), or
    /// `None` if that size overflows.
    pub fn for_cqe(hw_rev: HwRev, requested: u32, rounding: impl Into<Rounding>) -> Option<Self> {
        let cqe_size = hw_rev.cqe_size() as u32;
        Some(Self { entries: ring_slots(requested, hw_rev, cqe_size, rounding.into())?, hw_rev, cqe_size, cq_id: 3 })
    }
}

/// Something the device reported asynchronously.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelEvent {
    /// `IRDMA_AE_CQ_OPERATION_ERROR` → `IB_EVENT_CQ_ERR` (kernel `hw.c` `irdma_process_aeq`).
    CqError {
        /// CQ id.
        cq_id: u32,
        /// The AE code (0x0203).
        ae_code: u16,
    },
}

/// Errors of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// Memory set-up failed.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// Opening the poller failed.
    #[error(transparent)]
    Cq(#[from] CqError),
    /// Bad model configuration.
    #[error("model: {0}")]
    Config(&'static str),
    /// No free slot: the CQE was dropped and the CQ is now in error (what happens to the CQE
    /// on a device is not documented; the kernel only reports the overflow).
    #[error("cq {cq_id} overflow at producer position {prod}: the cqe takes {need} slot(s), shadow head {head} leaves {free} free")]
    Overflow {
        /// CQ id.
        cq_id: u32,
        /// Producer position ([`IrdmaModel::prod`]).
        prod: u32,
        /// Head read from the shadow area.
        head: u32,
        /// Slots the CQE takes (2 for an extended CQE in 32-byte slots).
        need: u32,
        /// Slots free (the model keeps one slot free).
        free: u32,
    },
    /// The CQ is in error after an overflow and accepts no more CQEs.
    #[error("cq {cq_id} is in error after an overflow")]
    CqInError {
        /// CQ id.
        cq_id: u32,
    },
    /// A threaded producer waited too long for free space.
    #[error("producer stalled for {ms} ms at position {prod}")]
    Stalled {
        /// Producer position ([`IrdmaModel::prod`]).
        prod: u32,
        /// How long it waited.
        ms: u64,
    },
}

/// The irdma CQ model.
#[derive(Debug)]
pub struct IrdmaModel {
    cfg: ModelConfig,
    ring_mem: Arc<DmaBuffer>,
    ring: SlotRing,
    shadow_mem: Arc<DmaBuffer>,
    shadow_off: usize,
    shadow: DoorbellWord,
    /// The context's doorbell page; the CQ doorbell is at +0x40 ([`IrdmaModel::take_arm`]).
    db_mem: Arc<DmaBuffer>,
    /// The arm sequence number taken last.
    arm_seq: u8,
    /// Where the producer writes next: slot and phase (the valid bit it writes there).
    prod: Pos,
    in_error: bool,
    events: Vec<ModelEvent>,
}

impl IrdmaModel {
    /// A zeroed ring and shadow area, as rdma-core's `ucreate_cq` allocates them. GEN1 places
    /// the shadow area right after the CQE pages in the same buffer; GEN2/GEN3 allocate it
    /// separately (`ucreate_cq`, by `IRDMA_FEATURE_CQ_RESIZE`).
    ///
    /// # Errors
    ///
    /// [`ModelError::Config`] for a bad size, [`ModelError::Provider`] if mapping fails.
    pub fn new(cfg: ModelConfig) -> Result<Self, ModelError> {
        if !(4..=1 << 20).contains(&cfg.entries) {
            return Err(ModelError::Config("entries must be from 4 to 2^20"));
        }
        if !crate::ring::is_allocated_size(cfg.entries, cfg.hw_rev) {
            // rdma-core never allocates it: GEN2 doubles `cqe + 1`, GEN3 rounds to even.
            return Err(ModelError::Config(
                "entries must be even on GEN2 and GEN3: rdma-core allocates cqe + 1 slots, doubled on GEN2, rounded to even since v64",
            ));
        }
        let ring_bytes = (cfg.entries as usize * cfg.cqe_size as usize).div_ceil(PAGE) * PAGE;
        let (ring_mem, shadow_mem, shadow_off) = if cfg.hw_rev.has_cq_resize() {
            (Arc::new(DmaBuffer::new(ring_bytes)?), Arc::new(DmaBuffer::new(SHADOW_AREA_SIZE)?), 0)
        } else {
            let m = Arc::new(DmaBuffer::new(ring_bytes + SHADOW_AREA_SIZE)?);
            (m.clone(), m, ring_bytes)
        };
        let ring = match cfg.cqe_size {
            32 => SlotRing::Slots32(ring_mem.cq_ring_any_size::<32>(0, cfg.entries)?),
            64 => SlotRing::Slots64(ring_mem.cq_ring_any_size::<64>(0, cfg.entries)?),
            _ => return Err(ModelError::Config("cqe_size must be 32 or 64")),
        };
        let shadow = shadow_mem.doorbell(shadow_off + HEAD_OFFSET)?;
        Ok(Self {
            cfg,
            ring_mem,
            ring,
            shadow_mem,
            shadow_off,
            shadow,
            db_mem: Arc::new(DmaBuffer::new(PAGE)?),
            arm_seq: 0,
            prod: Pos::START,
            in_error: false,
            events: Vec::new(),
        })
    }

    /// A poller on this model's ring and shadow area, starting at head 0, polarity 1.
    ///
    /// # Errors
    ///
    /// [`ModelError::Provider`] / [`ModelError::Cq`] if the handles cannot be made.
    pub fn poller(&self, qps: QpRegistry, compat: Compat) -> Result<IrdmaCq, ModelError> {
        let ring = match &self.ring {
            SlotRing::Slots32(r) => SlotRing::Slots32(r.alias()),
            SlotRing::Slots64(r) => SlotRing::Slots64(r.alias()),
        };
        let shadow = self.shadow_mem.doorbell(self.shadow_off + HEAD_OFFSET)?;
        let cfg = CqConfig { hw_rev: self.cfg.hw_rev, compat, cq_id: self.cfg.cq_id, ci: 0 };
        let mut cq = IrdmaCq::new(ring, shadow, qps, cfg)?;
        cq.set_arm_doorbell(self.arm_doorbell()?);
        Ok(cq)
    }

    /// The CQ's arm doorbell over the model's memory: the shadow area's arm word and the
    /// doorbell page's CQ doorbell, which [`IrdmaModel::take_arm`] reads.
    ///
    /// # Errors
    ///
    /// Only if the model's own memory could not be addressed (it always can).
    pub fn arm_doorbell(&self) -> Result<ArmDoorbell, ProviderError> {
        ArmDoorbell::new(
            self.shadow_mem.doorbell(self.shadow_off + ARM_OFFSET)?,
            self.db_mem.doorbell_register(DB_CQ_OFFSET)?,
        )
    }

    /// The doorbell page (the CQ doorbell is at +0x40).
    pub fn doorbell_page(&self) -> &Arc<DmaBuffer> {
        &self.db_mem
    }

    /// The configuration.
    pub fn config(&self) -> &ModelConfig {
        &self.cfg
    }
    /// Producer position (the slot, plus the ring size on laps written with valid bit 0).
    pub fn prod(&self) -> u32 {
        self.prod.counter(self.cfg.entries)
    }
    /// Events raised so far.
    pub fn events(&self) -> &[ModelEvent] {
        &self.events
    }
    /// True after an overflow.
    pub fn in_error(&self) -> bool {
        self.in_error
    }
    /// The ring memory (for snapshots).
    pub fn ring_mem(&self) -> &Arc<DmaBuffer> {
        &self.ring_mem
    }

    /// The shadow area: its buffer and byte offset there (GEN1: the ring's buffer, after
    /// the CQE pages; GEN2/GEN3: a buffer of its own at 0). For tests that describe the
    /// model's memory the way a provider's private structs do.
    pub fn shadow_area(&self) -> (&Arc<DmaBuffer>, usize) {
        (&self.shadow_mem, self.shadow_off)
    }

    /// The consumer head from shadow word 0 (acquire: pairs with the poller's release), as
    /// the device reads it: the 20-bit CQE index field (`IRDMA_CQ_DBSA_CQEIDX`), taken as
    /// is. The provider writes a slot index, `0..entries`; anything else is the consumer's
    /// error, which [`IrdmaModel::free_slots`] turns into a full ring.
    pub fn shadow_head(&self) -> u32 {
        let h = self.shadow.load_le64(Ordering::Acquire).unwrap_or(0);
        (h & dvcq_uapi::irdma::shadow::CQEIDX_MASK) as u32
    }

    /// Plays a consumer that drained everything written so far: stores the producer
    /// position as the shadow-area head. For benchmark baselines that write laps without
    /// polling them.
    pub fn release_all(&mut self) {
        let head = u64::from(self.prod.slot());
        // The shadow word is 8-aligned by construction; a failure would only leave the
        // model full, which the caller sees as refused CQEs.
        let _ = self.shadow.store_le64(head, Ordering::Release);
    }

    /// Slots written past the shadow head (the consumer's), not yet released.
    pub fn used_slots(&self) -> u32 {
        let n = self.cfg.entries;
        (self.prod.slot() + n - self.shadow_head() % n) % n
    }

    /// Free slots: the head has no wrap bit, so one slot stays free (inferred, as above).
    pub fn free_slots(&self) -> u32 {
        let n = self.cfg.entries;
        let head = self.shadow_head();
        if head >= n {
            // Not a slot: a device would count free space wrongly; the model refuses to
            // write, so a poller publishing such a head fails its tests.
            return 0;
        }
        let used = (self.prod.slot() + n - head) % n;
        n - 1 - used
    }

    /// Ring slots `c` takes: two for an extended CQE in 32-byte slots (GEN1/GEN2), else one.
    pub fn slots_for(&self, c: &ModelCqe) -> u32 {
        if c.extended() && matches!(self.ring, SlotRing::Slots32(_)) {
            2
        } else {
            1
        }
    }

    /// Writes one CQE if there is room. On no room, records a CQ error, drops the CQE and
    /// refuses further CQEs.
    ///
    /// # Errors
    ///
    /// [`ModelError::Overflow`], [`ModelError::CqInError`].
    pub fn push(&mut self, c: &ModelCqe) -> Result<(), ModelError> {
        if self.in_error {
            return Err(ModelError::CqInError { cq_id: self.cfg.cq_id });
        }
        let (need, free) = (self.slots_for(c), self.free_slots());
        if free < need {
            self.in_error = true;
            self.events.push(ModelEvent::CqError { cq_id: self.cfg.cq_id, ae_code: ae::CQ_OPERATION_ERROR });
            let (cq_id, prod, head) = (self.cfg.cq_id, self.prod(), self.shadow_head());
            return Err(ModelError::Overflow { cq_id, prod, head, need, free });
        }
        self.write(c)
    }

    /// Writes several CQEs with [`IrdmaModel::push`]; stops at the first error.
    ///
    /// # Errors
    ///
    /// As [`IrdmaModel::push`].
    pub fn push_all<'a>(&mut self, cs: impl IntoIterator<Item = &'a ModelCqe>) -> Result<(), ModelError> {
        cs.into_iter().try_for_each(|c| self.push(c))
    }

    /// Waits until there is room, then writes. A model convenience for threaded runs: real
    /// hardware would overflow instead. The wait backs off ([`Backoff`]: spin, then park
    /// for up to a millisecond), so a consumer sharing its core gets to run; the consumer
    /// may unpark this thread when it frees slots.
    ///
    /// # Errors
    ///
    /// [`ModelError::Stalled`] after `stall` without room.
    pub fn push_wait(&mut self, c: &ModelCqe, stall: Duration) -> Result<(), ModelError> {
        let need = self.slots_for(c);
        let mut backoff = Backoff::new();
        let mut since: Option<Instant> = None;
        while self.free_slots() < need {
            let t = *since.get_or_insert_with(Instant::now);
            if t.elapsed() > stall {
                return Err(ModelError::Stalled { prod: self.prod(), ms: stall.as_millis() as u64 });
            }
            backoff.wait();
        }
        self.write(c)
    }

    /// Writes the CQE: body words, then (32-byte mode) the extension slot with its own phase,
    /// then the main qword3 with the valid bit last (`irdma_uk_cq_poll_cmpl` reads the
    /// extension only after the main qword3 is valid, and checks the extension's own valid
    /// bit).
    fn write(&mut self, c: &ModelCqe) -> Result<(), ModelError> {
        let pos = self.prod;
        let n = self.cfg.entries;
        let (slot, phase) = (pos.slot(), pos.polarity());
        match &self.ring {
            SlotRing::Slots32(r) => {
                r.write_bytes(slot, 0, &le_bytes(c.body()))?;
                if c.extended() {
                    let next = pos.step(1, n);
                    r.write_bytes(next.slot(), 0, &le_bytes(c.ext_body()))?;
                    r.publish_u64(next.slot(), off::QWORD3, c.ext_qword7(next.polarity()))?;
                }
                r.publish_u64(slot, off::QWORD3, c.qword3(phase))?;
            }
            SlotRing::Slots64(r) => {
                r.write_bytes(slot, 0, &le_bytes(c.body()))?;
                r.write_bytes(slot, off::EXT, &le_bytes(c.ext_body()))?;
                r.publish_u64(slot, off::EXT_QWORD7, c.ext_qword7(phase))?;
                r.publish_u64(slot, off::QWORD3, c.qword3(phase))?;
            }
        }
        self.prod = pos.step(self.slots_for(c), n);
        Ok(())
    }

    /// Writes raw bytes into slot `slot` (garbage, hand-made CQEs): the bytes before
    /// qword3 first, then qword3 (bytes 24..32) with release ordering, then any bytes after
    /// it. Does not move the producer position and ignores free space.
    ///
    /// # Errors
    ///
    /// [`ModelError::Config`] if `bytes` is not exactly one slot.
    pub fn write_raw(&mut self, slot: u32, bytes: &[u8]) -> Result<(), ModelError> {
        if bytes.len() != self.cfg.cqe_size as usize {
            return Err(ModelError::Config("write_raw takes exactly one slot of bytes"));
        }
        let q3 = u64::from_le_bytes(bytes[24..32].try_into().unwrap_or([0; 8]));
        match &self.ring {
            SlotRing::Slots32(r) => {
                r.write_bytes(slot, 0, &bytes[..24])?;
                r.publish_u64(slot, off::QWORD3, q3)?;
            }
            SlotRing::Slots64(r) => {
                r.write_bytes(slot, 0, &bytes[..24])?;
                r.write_bytes(slot, 32, &bytes[32..56])?;
                let q7 = u64::from_le_bytes(bytes[56..64].try_into().unwrap_or([0; 8]));
                r.publish_u64(slot, off::EXT_QWORD7, q7)?;
                r.publish_u64(slot, off::QWORD3, q3)?;
            }
        }
        Ok(())
    }

    /// Flushes one work queue of a QP that went to error (kernel `irdma_flush_wqes`):
    /// `outstanding` lists the WQE indexes (quanta) of its outstanding WRs, oldest first.
    /// GEN1/GEN2 write one flush CQE for the first (the provider synthesises the rest); GEN3
    /// writes one per WR. Returns the number of CQEs written.
    ///
    /// # Errors
    ///
    /// As [`IrdmaModel::push`].
    pub fn flush(
        &mut self,
        ctx: u64,
        qp_num: u32,
        sq: bool,
        minor: u16,
        outstanding: &[u16],
    ) -> Result<usize, ModelError> {
        let n = if self.cfg.hw_rev.parks_flush() { outstanding.len().min(1) } else { outstanding.len() };
        for (i, &w) in outstanding.iter().take(n).enumerate() {
            // GEN3: only the first carries the specific code; the rest are general flushes.
            let m = if i == 0 { minor } else { dvcq_uapi::irdma::codes::flush::GENERAL_ERR };
            self.push(&ModelCqe::flush(ctx, qp_num, sq, w, m))?;
        }
        Ok(n)
    }

    /// Moves the model to its own thread, which writes `cqes` in order, waiting for room
    /// as [`IrdmaModel::push_wait`] does (giving up with [`ModelError::Stalled`] after
    /// `stall` without progress), and returns the model when done. After each write it
    /// unparks the thread that called this (the consumer, in a test), so a consumer parked
    /// in a [`Backoff`] sees the CQE at once.
    pub fn spawn_producer<I>(mut self, cqes: I, stall: Duration) -> std::thread::JoinHandle<Result<Self, ModelError>>
    where
        I: IntoIterator<Item = ModelCqe> + Send + 'static,
    {
        let consumer = std::thread::current();
        std::thread::spawn(move || {
            for c in cqes {
                self.push_wait(&c, stall)?;
                consumer.unpark();
            }
            Ok(self)
        })
    }

    /// The ring as a ring image with consumer counter `ci` (as [`IrdmaCq::ci`] gives it) and
    /// the given qp lines: CQE handle h must be the h-th qp line for the image to decode.
    /// Images hold rings of every size the model has, the sizes rdma-core allocates.
    ///
    /// # Errors
    ///
    /// None today; the `Result` is kept for the model's other refusals.
    pub fn export_image(&self, ci: u32, qps: &[ImageQp]) -> Result<IrdmaImage, ModelError> {
        let header =
            ImageHeader { cqe_size: self.cfg.cqe_size, entries: self.cfg.entries, ci, hw_rev: self.cfg.hw_rev };
        Ok(IrdmaImage { header, qps: qps.to_vec(), slots: self.snapshot() })
    }

    /// A copy of the ring bytes (a snapshot; may be torn while a producer thread runs).
    pub fn snapshot(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.cfg.entries as usize * self.cfg.cqe_size as usize];
        // In bounds by construction; an error would only leave zeros.
        let _ = self.ring_mem.read_bytes(0, &mut v);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model has the ring sizes rdma-core allocates (`cqe + 1`, doubled on GEN2,
    /// rounded to even since v64, at least 4): no odd ring on GEN2 or GEN3, whose sizes are
    /// always even; odd ones on GEN1, whose `cqe + 1` was not rounded before v64.
    #[test]
    fn ring_sizes_are_the_ones_rdma_core_allocates() {
        for (rev, entries, ok) in [
            (HwRev::Gen2, 5, false),
            (HwRev::Gen3, 101, false),
            (HwRev::Gen2, 3, false),
            (HwRev::Gen1, 5, true),
            (HwRev::Gen2, 202, true),
            (HwRev::Gen3, 102, true),
        ] {
            let m = IrdmaModel::new(ModelConfig::new(rev, entries));
            assert_eq!(m.is_ok(), ok, "{rev:?} {entries}");
            if !ok {
                assert!(matches!(m, Err(ModelError::Config(_))), "{rev:?} {entries}");
            }
        }
        for rev in [HwRev::Gen1, HwRev::Gen2, HwRev::Gen3] {
            for requested in [1, 2, 100, 4095] {
                let cfg = ModelConfig::for_cqe(rev, requested, Compat::Current).unwrap();
                assert!(IrdmaModel::new(cfg).is_ok(), "{rev:?} cqe={requested}: {} slots", cfg.entries);
            }
        }
    }

    #[test]
    fn keeps_one_slot_free_and_raises_cq_error() {
        let mut m = IrdmaModel::new(ModelConfig::new(HwRev::Gen2, 4)).unwrap();
        let c = ModelCqe::send(1, 1, 0, 3);
        for _ in 0..3 {
            m.push(&c).unwrap();
        }
        assert_eq!(m.free_slots(), 0);
        let e = m.push(&c).unwrap_err();
        assert_eq!(e, ModelError::Overflow { cq_id: 3, prod: 3, head: 0, need: 1, free: 0 });
        assert_eq!(
            e.to_string(),
            "cq 3 overflow at producer position 3: the cqe takes 1 slot(s), shadow head 0 leaves 0 free"
        );
        assert_eq!(m.events(), &[ModelEvent::CqError { cq_id: 3, ae_code: 0x0203 }]);
        assert!(matches!(m.push(&c), Err(ModelError::CqInError { .. })));
        assert!(m.in_error());
    }

    #[test]
    fn release_all_frees_the_ring_and_push_wait_waits_for_room() {
        let mut m = IrdmaModel::new(ModelConfig::new(HwRev::Gen2, 4)).unwrap();
        let c = ModelCqe::send(1, 1, 0, 3);
        assert!(!m.in_error());
        for _ in 0..3 {
            m.push_wait(&c, Duration::from_millis(50)).unwrap();
        }
        // Full: waiting gives up after the stall time and writes nothing; no CQ error.
        let t = Instant::now();
        assert!(matches!(m.push_wait(&c, Duration::from_millis(20)), Err(ModelError::Stalled { prod: 3, ms: 20 })));
        assert!(t.elapsed() >= Duration::from_millis(20));
        assert_eq!((m.prod(), m.in_error(), m.events().len()), (3, false, 0));
        // A consumer that took everything: three slots free again, and the next lap written.
        m.release_all();
        assert_eq!((m.shadow_head(), m.free_slots()), (3, 3));
        m.push_wait(&c, Duration::from_millis(50)).unwrap();
        assert_eq!(m.prod(), 4);
    }

    #[test]
    fn first_lap_valid_one_then_zero() {
        let mut m = IrdmaModel::new(ModelConfig::new(HwRev::Gen2, 4)).unwrap();
        let c = ModelCqe::send(1, 1, 5, 3);
        m.push(&c).unwrap();
        let s = m.snapshot();
        let q3 = u64::from_le_bytes(s[24..32].try_into().unwrap());
        assert_eq!(q3, 0xC300_0005_0000_0000, "SEND, wqe_idx 5, valid 1");
        assert_eq!(u64::from_le_bytes(s[8..16].try_into().unwrap()), 1);
    }

    #[test]
    fn gen1_shadow_follows_ring_pages() {
        let m = IrdmaModel::new(ModelConfig::new(HwRev::Gen1, 4)).unwrap();
        assert!(Arc::ptr_eq(&m.ring_mem, &m.shadow_mem));
        assert_eq!(m.shadow_off, PAGE);
        assert!(IrdmaModel::new(ModelConfig::new(HwRev::Gen2, 3)).is_err());
        assert!(IrdmaModel::new(ModelConfig::new(HwRev::Gen2, (1 << 20) + 1)).is_err());
    }
}
