//! A faithful software model of a ConnectX CQ. The device side is not public: the model does
//! what rdma-core's consumer requires (`providers/mlx5/cq.c`) and the verbs man pages promise
//! (`ibv_create_cq_ex(3)`, `ibv_req_notify_cq(3)`). It owns the ring,
//! doorbell record and UAR page in page-aligned memory, initialises them as rdma-core does,
//! and writes real CQEs in hardware order (body, then `op_own` with release ordering),
//! flipping the owner bit every lap. It reads the consumer index from the doorbell record to
//! know its free space; on overrun it records a CQ error and refuses, unless the CQ was
//! created with overrun-ignore, in which case it overwrites.
//!
//! The model runs inline ([`Mlx5Model::push`]) or on its own thread
//! ([`Mlx5Model::spawn_producer`]), so producer/consumer races are real.

mod arm;
pub mod build;
pub mod clock;
pub mod compress;
pub mod wqe;

pub use arm::{ArmFault, UarArm};

use crate::cq::{CqConfig, Mlx5Cq, Mlx5Error};
use crate::doorbell::ArmDoorbell;
use crate::mini::CompLayout;
use crate::registry::Registry;
use build::Entry;
use compress::{Compression, Compressor};
use dvcq_provider::backoff::Backoff;
use dvcq_provider::{CqRing, DmaBuffer, DoorbellWord, Error as ProviderError};
use dvcq_uapi::mlx5::cq_size;
use dvcq_uapi::mlx5::cqe::{op_own, Cqe64};
use dvcq_uapi::mlx5::doorbell::{ARM_DB, CI_MASK, SET_CI, UAR_CQ_DOORBELL};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How software initialised the ring before the device wrote it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RingInit {
    /// rdma-core (`providers/mlx5/cq.c` `mlx5_alloc_cq_buf`): zeroes, `op_own = 0xF0` (INVALID,
    /// owner 0).
    #[default]
    RdmaCore,
    /// UCX/DPDK (`src/uct/ib/mlx5/ib_mlx5.c`; `drivers/common/mlx5/mlx5_common_devx.c`):
    /// `op_own = 0xF1`, signature 0xFF (wrong parity in lap 0).
    Ucx,
}

/// Model set-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelConfig {
    /// Ring entries (power of two, 2 to 2^22).
    pub entries: u32,
    /// CQE size: 64 or 128.
    pub cqe_size: u32,
    /// The CQ number the model reports.
    pub cqn: u32,
    /// CQ context `oi`: overwrite on overrun instead of raising a CQ error.
    pub overrun_ignore: bool,
    /// Initial ring contents.
    pub init: RingInit,
    /// CQE compression ([`crate::mini`]): the CQ's creation attributes and the back-pressure
    /// policy; `None` for a CQ created without it.
    pub compression: Option<Compression>,
}

impl ModelConfig {
    /// A 64-byte-CQE model with `entries` slots.
    pub fn new(entries: u32) -> Self {
        Self { entries, cqe_size: 64, cqn: 0x406, overrun_ignore: false, init: RingInit::RdmaCore, compression: None }
    }
}

/// Something the device reported asynchronously.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelEvent {
    /// `MLX5_EVENT_TYPE_CQ_ERROR` (→ `IBV_EVENT_CQ_ERR`): the CQ overran (syndrome 1).
    CqError {
        /// CQ number.
        cqn: u32,
        /// PRM syndrome: 1 = overrun.
        syndrome: u8,
    },
}

/// Errors of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// Memory set-up failed.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// Bad model configuration.
    #[error("model: {0}")]
    Config(&'static str),
    /// The CQ is full and was not created with overrun-ignore: the CQE was not written and
    /// the CQ is now in error (as hardware raises CQ_ERR).
    #[error("cq {cqn:#x} overrun at producer index {pi}: the write takes {need} slot(s), consumer index {ci} leaves {free} free")]
    Overrun {
        /// CQ number.
        cqn: u32,
        /// Producer counter.
        pi: u32,
        /// Consumer index read from the doorbell record (24 bits).
        ci: u32,
        /// Slots the write takes (a whole compressed session at once).
        need: u32,
        /// Slots free.
        free: u32,
    },
    /// The CQ is in the error state after an overrun; it accepts no more CQEs.
    #[error("cq {cqn:#x} is in error after an overrun")]
    CqInError {
        /// CQ number.
        cqn: u32,
    },
    /// A threaded producer waited too long for the consumer to free a slot.
    #[error("producer stalled: no free slot for {ms} ms at producer index {pi}")]
    Stalled {
        /// Producer counter.
        pi: u32,
        /// How long it waited.
        ms: u64,
    },
}

/// Dispatch over the two CQE strides for the producer's writes.
#[derive(Debug)]
enum AnyRing {
    R64(CqRing<64>),
    R128(CqRing<128>),
}

impl AnyRing {
    fn write(&self, idx: u32, off: usize, bytes: &[u8]) -> Result<(), ProviderError> {
        match self {
            AnyRing::R64(r) => r.write_bytes(idx, off, bytes),
            AnyRing::R128(r) => r.write_bytes(idx, off, bytes),
        }
    }
    fn publish(&self, idx: u32, off: usize, v: u8) -> Result<(), ProviderError> {
        match self {
            AnyRing::R64(r) => r.publish_u8(idx, off, v),
            AnyRing::R128(r) => r.publish_u8(idx, off, v),
        }
    }
}

/// The mlx5 CQ model.
#[derive(Debug)]
pub struct Mlx5Model {
    cfg: ModelConfig,
    ring_mem: Arc<DmaBuffer>,
    ring: AnyRing,
    /// The page holding the doorbell record (set_ci at +0, arm at +4).
    dbrec_mem: Arc<DmaBuffer>,
    set_ci: DoorbellWord,
    /// The UAR page; the CQ doorbell is at +0x20.
    uar_mem: Arc<DmaBuffer>,
    pi: u32,
    start: u32,
    in_error: bool,
    events: Vec<ModelEvent>,
    /// Session forming, for a CQ created with compression.
    comp: Option<Compressor>,
    /// What each completion written so far polls to ([`Mlx5Model::record_kept`]).
    kept: Option<Vec<Entry>>,
}

impl Mlx5Model {
    /// Allocates and initialises a CQ.
    ///
    /// # Errors
    ///
    /// [`ModelError::Config`] for a bad size, [`ModelError::Provider`] if memory fails.
    pub fn new(cfg: ModelConfig) -> Result<Self, ModelError> {
        if !cq_size::is_ring_size(cfg.entries) {
            return Err(ModelError::Config("entries must be a power of two from 2 to 2^22"));
        }
        if cfg.cqe_size != 64 && cfg.cqe_size != 128 {
            return Err(ModelError::Config("cqe_size must be 64 or 128"));
        }
        let (ring_mem, ring) = Self::alloc_ring(&cfg, cfg.entries)?;
        let dbrec_mem = Arc::new(DmaBuffer::new(4096)?);
        let set_ci = dbrec_mem.doorbell(SET_CI * 4)?;
        let uar_mem = Arc::new(DmaBuffer::new(4096)?);
        let comp = cfg.compression.map(Compressor::new);
        Ok(Self {
            cfg,
            ring_mem,
            ring,
            dbrec_mem,
            set_ci,
            uar_mem,
            pi: 0,
            start: 0,
            in_error: false,
            events: Vec::new(),
            comp,
            kept: None,
        })
    }

    /// From now on, logs each CQE the model writes as the poll will see it, in ring order:
    /// a regular CQE as it is, a compressed completion as what the device keeps of it
    /// ([`compress::kept`]: the fields its mini-CQE does not carry are the title's). Polling
    /// the log written uncompressed gives what polling this CQ gives.
    pub fn record_kept(&mut self) {
        self.kept.get_or_insert_with(Vec::new);
    }

    /// The log [`Mlx5Model::record_kept`] started, emptied.
    pub fn take_kept(&mut self) -> Vec<Entry> {
        self.kept.as_mut().map(core::mem::take).unwrap_or_default()
    }

    fn enhanced(&self) -> bool {
        self.cfg.compression.is_some_and(|c| c.layout == CompLayout::Enhanced)
    }

    fn alloc_ring(cfg: &ModelConfig, entries: u32) -> Result<(Arc<DmaBuffer>, AnyRing), ModelError> {
        let (cqe_size, init) = (cfg.cqe_size, cfg.init);
        let mem = Arc::new(DmaBuffer::new(entries as usize * cqe_size as usize)?);
        let ring = if cqe_size == 64 {
            AnyRing::R64(mem.cq_ring::<64>(0, entries)?)
        } else {
            AnyRing::R128(mem.cq_ring::<128>(0, entries)?)
        };
        // Software, not the device, initialises the ring: every cqe64 gets an INVALID opcode.
        let mut slot = Cqe64::invalid();
        if init == RingInit::Ucx {
            slot.op_own |= 1;
            slot.signature = 0xff;
        }
        if cfg.compression.is_some_and(|c| c.layout == CompLayout::Enhanced) {
            // Enhanced compression exists only on DevX CQs, whose creators (UCX, DPDK) set
            // the validity iteration count to 0xFF so that lap 0 never matches a slot the
            // device has not written (DPDK `MLX5_CQE_VIC_INIT`,
            // `drivers/common/mlx5/mlx5_prm.h`).
            slot.signature = 0xff;
        }
        let bytes = bytemuck::bytes_of(&slot);
        let off = cqe_size as usize - 64;
        for i in 0..entries {
            ring.write(i, off, &bytes[..62])?;
            // The bytes pollers test (iteration count, owner), atomically as always.
            ring.publish(i, off + 62, bytes[62])?;
            ring.publish(i, off + 63, bytes[63])?;
        }
        Ok((mem, ring))
    }

    /// Moves a fresh CQ's producer counter (and the doorbell record, as if a consumer had
    /// already consumed that far) to running position `pos`, to exercise counter wrap-around.
    /// Open the poller with the same start ([`Mlx5Model::poller_at`]).
    ///
    /// # Errors
    ///
    /// [`ModelError::Config`] once CQEs were written.
    pub fn start_at(&mut self, pos: u32) -> Result<(), ModelError> {
        if self.pi != 0 {
            return Err(ModelError::Config("start_at only before the first CQE"));
        }
        self.pi = pos;
        self.start = pos;
        self.set_ci.store_be32(pos & CI_MASK, Ordering::Release);
        Ok(())
    }

    /// The configuration.
    pub fn config(&self) -> ModelConfig {
        self.cfg
    }

    /// The producer counter: CQEs written so far.
    pub fn pi(&self) -> u32 {
        self.pi
    }

    /// Asynchronous events raised so far (CQ errors).
    pub fn events(&self) -> &[ModelEvent] {
        &self.events
    }

    /// True once an overrun put the CQ in error.
    pub fn in_error(&self) -> bool {
        self.in_error
    }

    /// The consumer index the device sees: `set_ci & 0xffffff` from the doorbell record.
    pub fn device_ci(&self) -> u32 {
        self.set_ci.load_be32(Ordering::Acquire) & CI_MASK
    }

    /// CQEs written and not yet released by the consumer, in 24-bit doorbell arithmetic.
    pub fn used(&self) -> u32 {
        self.pi.wrapping_sub(self.device_ci()) & CI_MASK
    }

    /// True if the next CQE fits without overrun.
    pub fn has_room(&self) -> bool {
        self.used() < self.cfg.entries
    }

    /// Slots the next [`Mlx5Model::push`] may write at most: 1, or on a compressing CQ the
    /// buffered completions plus one (the push may complete or end their session).
    pub fn next_write_slots(&self) -> u32 {
        1 + self.comp.as_ref().map_or(0, |c| c.pending())
    }

    /// True if the next [`Mlx5Model::push`] cannot overrun the CQ (room for
    /// [`Mlx5Model::next_write_slots`]).
    pub fn can_push(&self) -> bool {
        self.room_for(self.next_write_slots())
    }

    /// Advances the producer counter by `n` without writing anything, as the slots of a
    /// session the device never writes (holes): for hand-built garbage sessions.
    ///
    /// # Errors
    ///
    /// [`ModelError::Config`] while completions are buffered for a session.
    pub fn skip(&mut self, n: u32) -> Result<(), ModelError> {
        if self.comp.as_ref().is_some_and(|c| c.pending() > 0) {
            return Err(ModelError::Config("skip with a session buffered; flush first"));
        }
        self.pi = self.pi.wrapping_add(n);
        Ok(())
    }

    /// Room for `n` more slots without overrun.
    fn room_for(&self, n: u32) -> bool {
        self.used().saturating_add(n) <= self.cfg.entries
    }

    /// The overrun rule for a write of `n` slots: a CQ error unless the CQ ignores overrun
    /// (`ibv_create_cq_ex(3)`; `ibv_poll_cq(3)` on `IBV_EVENT_CQ_ERR`).
    fn check_room(&mut self, n: u32) -> Result<(), ModelError> {
        if self.in_error {
            return Err(ModelError::CqInError { cqn: self.cfg.cqn });
        }
        // An overrun-ignore CQ never compares counters (nor does the device): the work of a
        // push is then the same whether the ring is full or drained.
        if !self.cfg.overrun_ignore && !self.room_for(n) {
            self.in_error = true;
            self.events.push(ModelEvent::CqError { cqn: self.cfg.cqn, syndrome: 1 });
            let free = self.cfg.entries.saturating_sub(self.used());
            return Err(ModelError::Overrun { cqn: self.cfg.cqn, pi: self.pi, ci: self.device_ci(), need: n, free });
        }
        Ok(())
    }

    /// Writes one CQE as the device would: checks free space against the doorbell record;
    /// writes the body, then `op_own` with the owner bit of this lap (release); `pi += 1`.
    /// Returns the running position written.
    ///
    /// # Errors
    ///
    /// [`ModelError::Overrun`] (and a [`ModelEvent::CqError`]) when the CQ is full without
    /// overrun-ignore; [`ModelError::CqInError`] afterwards; [`ModelError::Config`] for an
    /// entry with a first half (inline-64 data, a GRH in the CQE) on a CQ of 64-byte CQEs,
    /// which has none to hold it: a device never writes one there.
    ///
    /// On a CQ created with compression the completion may be held back to form a session
    /// ([`compress`]); it reaches the ring with its session, or at [`Mlx5Model::flush`].
    pub fn push(&mut self, e: &Entry) -> Result<u32, ModelError> {
        if self.cfg.cqe_size == 64 && e.first_half != [0; 64] {
            return Err(ModelError::Config("a 64-byte CQE has no first half for inline-64 data or a GRH"));
        }
        if self.comp.is_some() {
            return self.push_compressed(e);
        }
        self.push_regular(e)
    }

    /// Writes one regular CQE now.
    fn push_regular(&mut self, e: &Entry) -> Result<u32, ModelError> {
        self.check_room(1)?;
        let pi = self.pi;
        self.write_slot(pi, e, self.cfg.entries)?;
        self.pi = pi.wrapping_add(1);
        if let Some(log) = self.kept.as_mut() {
            log.push(*e);
        }
        Ok(pi)
    }

    fn write_slot(&self, pi: u32, e: &Entry, entries: u32) -> Result<(), ModelError> {
        let owner = ((pi & entries) != 0) as u8;
        let off = self.cfg.cqe_size as usize - 64;
        if self.cfg.cqe_size == 128 {
            self.ring.write(pi, 0, &e.first_half)?;
        }
        let bytes = bytemuck::bytes_of(&e.cqe);
        // Bytes 62 and 63 are what a poller tests before it reads the body: the enhanced
        // layout's iteration count, the owner bit and opcode. Both are stored atomically and
        // with release ordering in either layout, so a poller testing either one (even one
        // opened with a layout the CQ does not have) reads the body only after it was
        // written, and never races a plain write of the byte it tests.
        self.ring.write(pi, off, &bytes[..62])?;
        let op = (e.cqe.op_own & !op_own::OWNER_MASK) | owner;
        if self.enhanced() {
            // Enhanced compression: validity is the 8-bit iteration count in byte 62
            // (DPDK `check_cqe_iteration`), so that byte is published last; the owner bit still
            // follows the lap.
            let vic = (pi >> entries.trailing_zeros()) as u8;
            self.ring.publish(pi, off + 63, op)?;
            self.ring.publish(pi, off + 62, vic)?;
        } else {
            self.ring.publish(pi, off + 62, e.cqe.signature)?;
            self.ring.publish(pi, off + 63, op)?;
        }
        Ok(())
    }

    /// Resizes the CQ (inferred from rdma-core's `mlx5_cq_resize_copy_cqes`): writes a RESIZE
    /// CQE at `pi` in the old ring, then continues at `pi + 1` in a new ring of `entries`
    /// slots (initialised like the first). Returns the new ring for the poller's
    /// [`Mlx5Cq::switch_ring`].
    ///
    /// # Errors
    ///
    /// As [`Mlx5Model::push`] for the RESIZE CQE, or [`ModelError::Config`].
    pub fn resize<const STRIDE: usize>(&mut self, entries: u32) -> Result<CqRing<STRIDE>, ModelError> {
        if STRIDE as u32 != self.cfg.cqe_size {
            return Err(ModelError::Config("resize ring stride differs from the model's cqe size"));
        }
        if !cq_size::is_ring_size(entries) {
            return Err(ModelError::Config("entries must be a power of two from 2 to 2^22"));
        }
        // rdma-core (`mlx5_resize_cq`) and the kernel (`mlx5_ib_resize_cq`) return at once
        // for the size the CQ has: no command reaches the device, no RESIZE CQE is written.
        if entries == self.cfg.entries {
            return Err(ModelError::Config("resize to the size the cq has: rdma-core does nothing, no RESIZE cqe"));
        }
        self.push(&build::resize())?;
        let (mem, ring) = Self::alloc_ring(&self.cfg, entries)?;
        self.ring_mem = mem;
        self.ring = ring;
        self.cfg.entries = entries;
        Ok(self.ring_mem.cq_ring::<STRIDE>(0, entries)?)
    }

    /// Opens a poller on this CQ at the CQ's first position (`STRIDE` must equal the model's
    /// CQE size).
    ///
    /// # Errors
    ///
    /// [`ModelError::Config`] for a stride mismatch, or the poller's own errors.
    pub fn poller<const STRIDE: usize>(&self, registry: Registry, cfg: CqConfig) -> Result<Mlx5Cq<STRIDE>, Mlx5Error> {
        self.poller_at(registry, cfg, self.start)
    }

    /// [`Mlx5Model::poller`] starting at running consumer position `ci`.
    ///
    /// # Errors
    ///
    /// As [`Mlx5Model::poller`].
    pub fn poller_at<const STRIDE: usize>(
        &self,
        registry: Registry,
        cfg: CqConfig,
        ci: u32,
    ) -> Result<Mlx5Cq<STRIDE>, Mlx5Error> {
        let mut cfg = cfg;
        cfg.overrun_ignore = self.cfg.overrun_ignore;
        cfg.compression = self.cfg.compression.map(|c| c.cq_config());
        self.poller_as(registry, cfg, ci)
    }

    /// A poller opened with exactly `cfg`, not the CQ's creation attributes (overrun-ignore,
    /// compression): a poller told the wrong thing, for garbage tests.
    ///
    /// # Errors
    ///
    /// As [`Mlx5Model::poller`].
    pub fn poller_as<const STRIDE: usize>(
        &self,
        registry: Registry,
        cfg: CqConfig,
        ci: u32,
    ) -> Result<Mlx5Cq<STRIDE>, Mlx5Error> {
        if STRIDE as u32 != self.cfg.cqe_size {
            return Err(Mlx5Error::StrideMismatch { stride: STRIDE as u32, cqe_size: self.cfg.cqe_size });
        }
        let ring = self.ring_mem.cq_ring::<STRIDE>(0, self.cfg.entries)?;
        let dbrec = self.dbrec_mem.doorbell(SET_CI * 4)?;
        let mut cq = Mlx5Cq::new(ring, dbrec, self.cfg.cqn, ci, registry, cfg)?;
        cq.set_arm_doorbell(self.arm_doorbell()?);
        Ok(cq)
    }

    /// The CQ's arm doorbell over the model's pages: the record's arm word and the UAR's CQ
    /// doorbell, which [`Mlx5Model::take_arm`] reads.
    ///
    /// # Errors
    ///
    /// Only if the model's own pages could not be addressed (they always can).
    pub fn arm_doorbell(&self) -> Result<ArmDoorbell, ProviderError> {
        Ok(ArmDoorbell::new(self.dbrec_mem.doorbell(ARM_DB * 4)?, self.uar_mem.doorbell_register(UAR_CQ_DOORBELL)?))
    }

    /// The page holding the doorbell record (set_ci at +0, arm at +4).
    pub fn dbrec(&self) -> &Arc<DmaBuffer> {
        &self.dbrec_mem
    }

    /// The ring's memory.
    pub fn ring_mem(&self) -> &Arc<DmaBuffer> {
        &self.ring_mem
    }

    /// A copy of the ring's bytes as they are now (for ring images).
    pub fn snapshot(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.cfg.entries as usize * self.cfg.cqe_size as usize];
        // The buffer is exactly this long, so the read cannot fail.
        let _ = self.ring_mem.read_bytes(0, &mut v);
        v
    }

    /// The UAR page (the CQ doorbell lives at +0x20, [`Mlx5Model::take_arm`]).
    pub fn uar(&self) -> &Arc<DmaBuffer> {
        &self.uar_mem
    }

    /// Runs the model on its own thread, writing `entries` as fast as the consumer frees
    /// slots (a paced traffic source, like senders throttled by credits). Returns the model
    /// when done. Gives up with [`ModelError::Stalled`] after `stall` without progress.
    /// While the ring is full it backs off ([`Backoff`]: spin, then park for up to a
    /// millisecond), so a consumer sharing its core gets to run; the consumer may unpark it
    /// when it frees slots. After each write it unparks the thread that called this (the
    /// consumer, in a test), so a consumer parked in a [`Backoff`] sees the CQE at once.
    ///
    /// On a CQ created with overrun-ignore the device does not look at the consumer index
    /// ("CQE always will be written to next entry", `ibv_create_cq_ex(3)`): the producer
    /// writes every entry at once, over CQEs not yet consumed when the consumer is behind, as
    /// a device does ([`Mlx5Cq::overrun_detected`] is what a poller can see of that).
    pub fn spawn_producer<I>(mut self, entries: I, stall: Duration) -> std::thread::JoinHandle<Result<Self, ModelError>>
    where
        I: IntoIterator<Item = Entry> + Send + 'static,
        I::IntoIter: Send,
    {
        let consumer = std::thread::current();
        std::thread::spawn(move || {
            let wait_for_room = |m: &Self, n: u32| {
                let (mut since, mut backoff) = (None, Backoff::new());
                // Overrun-ignore: the device writes the next entry whatever the index says.
                while !m.cfg.overrun_ignore && !m.room_for(n) {
                    let t = *since.get_or_insert_with(Instant::now);
                    if t.elapsed() > stall {
                        return Err(ModelError::Stalled { pi: m.pi, ms: stall.as_millis() as u64 });
                    }
                    backoff.wait();
                }
                Ok(())
            };
            for e in entries {
                wait_for_room(&self, self.next_write_slots())?;
                self.push(&e)?;
                consumer.unpark();
            }
            // The stream is over: no more back-pressure holds the last session.
            wait_for_room(&self, self.next_write_slots() - 1)?;
            self.flush()?;
            consumer.unpark();
            Ok(self)
        })
    }
}
