//! Completion queues of a model device: the vendor model's ring with the vendor's real
//! poller over it.

use super::clock::DeviceClock;
use super::event::{ArmRequest, ArmState, CqEvents};
use super::{DeviceError, Shared};
use dvcq_e810_dv::model::{IrdmaModel, ModelConfig as IrdmaConfig, ModelCqe};
use dvcq_e810_dv::ring::{ring_slots, Rounding};
use dvcq_e810_dv::{Compat, IrdmaCq, QpRegistry};
use dvcq_mlx5_dv::clock::TimestampFormat;
use dvcq_mlx5_dv::model::build::Entry;
use dvcq_mlx5_dv::model::Mlx5Model;
use dvcq_mlx5_dv::{CqStats, Mlx5Cq128, Mlx5Cq64, Registry};
use dvcq_provider::{Completion, CqErrorCell, CqErrorReason, CqRing, StatusCounts};
use std::collections::VecDeque;
use std::sync::Arc;

/// An mlx5 CQ's attributes beyond its depth (`struct mlx5dv_cq_init_attr`, what
/// `mlx5dv_create_cq` takes): the CQE size, CQE compression and padding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mlx5CqAttrs {
    /// `cqe_size`: 64 or 128 bytes (`MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE`).
    pub cqe_size: u32,
    /// `cqe_comp_res_format`: the `MLX5DV_CQE_RES_FORMAT_*` bit of the responder mini-CQE
    /// format (HASH 1, CSUM 2, CSUM_STRIDX 4); 0 for a CQ without CQE compression.
    pub comp_res_format: u8,
    /// `MLX5DV_CQ_INIT_ATTR_FLAGS_CQE_PAD`: 128-byte CQEs padded to the cache line.
    pub pad: bool,
}

impl Default for Mlx5CqAttrs {
    /// What `ibv_create_cq` makes: 64-byte CQEs, no compression, no padding.
    fn default() -> Self {
        Mlx5CqAttrs { cqe_size: 64, comp_res_format: 0, pad: false }
    }
}

/// The mlx5 poller of a model CQ, by CQE size.
#[derive(Debug)]
pub(crate) enum Mlx5Poller {
    C64(Box<Mlx5Cq64>),
    C128(Box<Mlx5Cq128>),
}

impl Mlx5Poller {
    pub(crate) fn registry_mut(&mut self) -> &mut Registry {
        match self {
            Mlx5Poller::C64(p) => p.registry_mut(),
            Mlx5Poller::C128(p) => p.registry_mut(),
        }
    }

    fn poll(&mut self, out: &mut [Completion]) -> usize {
        match self {
            Mlx5Poller::C64(p) => p.poll(out),
            Mlx5Poller::C128(p) => p.poll(out),
        }
    }

    fn arm(&mut self, solicited: bool) -> Result<dvcq_mlx5_dv::ArmRing, dvcq_mlx5_dv::Mlx5Error> {
        match self {
            Mlx5Poller::C64(p) => p.arm(solicited),
            Mlx5Poller::C128(p) => p.arm(solicited),
        }
    }

    fn event_received(&mut self) {
        match self {
            Mlx5Poller::C64(p) => p.event_received(),
            Mlx5Poller::C128(p) => p.event_received(),
        }
    }

    /// Whether the poller consumed a RESIZE CQE and waits for the next ring.
    fn resize_pending(&self) -> bool {
        match self {
            Mlx5Poller::C64(p) => p.resize_pending(),
            Mlx5Poller::C128(p) => p.resize_pending(),
        }
    }

    /// Continues on the next ring of a resize, once the poller consumed the RESIZE CQE:
    /// true when it did (a ring of the other stride is never made for it).
    fn switch_ring(&mut self, ring: Mlx5Ring) -> bool {
        match (self, ring) {
            (Mlx5Poller::C64(p), Mlx5Ring::C64(r)) => p.switch_ring(r).is_ok(),
            (Mlx5Poller::C128(p), Mlx5Ring::C128(r)) => p.switch_ring(r).is_ok(),
            _ => false,
        }
    }

    fn ci(&self) -> u32 {
        match self {
            Mlx5Poller::C64(p) => p.ci(),
            Mlx5Poller::C128(p) => p.ci(),
        }
    }

    fn stats(&self) -> CqStats {
        match self {
            Mlx5Poller::C64(p) => p.stats(),
            Mlx5Poller::C128(p) => p.stats(),
        }
    }

    /// The ring as a ring image whose decoding starts `back` CQEs before the consumer.
    fn image(&self, back: u32) -> String {
        match self {
            Mlx5Poller::C64(p) => p.ring_image(p.ci().wrapping_sub(back)).to_text(),
            Mlx5Poller::C128(p) => p.ring_image(p.ci().wrapping_sub(back)).to_text(),
        }
    }
}

/// The ring a resized mlx5 CQ continues on, by CQE size.
#[derive(Debug)]
pub(crate) enum Mlx5Ring {
    C64(CqRing<64>),
    C128(CqRing<128>),
}

/// The ring and the poller of one CQ, per vendor.
#[derive(Debug)]
pub(crate) enum CqHw {
    /// A ConnectX CQ (64-byte CQEs unless made with [`Mlx5CqAttrs`]).
    Mlx5 { model: Mlx5Model, poller: Mlx5Poller },
    /// An E810 CQ of 32-byte slots.
    Irdma { model: IrdmaModel, poller: Box<IrdmaCq> },
}

/// One CQ's state inside the device.
#[derive(Debug)]
pub(crate) struct CqState {
    pub(crate) hw: CqHw,
    /// `ibv_cq.cqe` as the provider reports it.
    pub(crate) cqe: u32,
    /// The overrun that put the CQ in error.
    pub(crate) overrun: Option<DeviceError>,
    /// The same, where the CQ's poller reads it without the device's lock: set as the
    /// device refuses the CQE.
    pub(crate) error: Arc<CqErrorCell>,
    /// QP numbers whose CQE the CQ refused (it is in error) and that the device has not
    /// moved to error yet ([`super::fabric::Fabric::settle_cq_errors`]).
    pub(crate) stranded: Vec<u32>,
    /// CQEs the device could not write (the overrun's and every one after it).
    pub(crate) dropped: u64,
    pub(crate) written: u64,
    /// Ring slots written (irdma's extended CQEs take two): CQE positions for the arm rules.
    slots: u64,
    /// The slot position of the last CQE that fires a solicited-only arm (SE bit or error).
    last_solicited: Option<u64>,
    pub(crate) completions: u64,
    /// Ring slots the poller has consumed (its consumer index's advance, summed).
    consumed: u64,
    /// The most ring slots written and not yet consumed that a poll call found: the
    /// device's producer count against the poller's consumer count.
    pub(crate) high_water: u64,
    /// mlx5: the SRQ receives written and not yet polled: the CQE's sequence number on
    /// this CQ, the SRQ and the WQE index, so a poll returns the WQE to the SRQ's free list
    /// as rdma-core's poll does (`mlx5_free_srq_wqe`). The model writes one completion per
    /// CQE, so after n completions the first n CQEs were consumed.
    pub(crate) srq_tags: VecDeque<(u64, usize, u16)>,
    /// Arming, moderation and the channel its events go to.
    pub(crate) events: CqEvents,
    /// mlx5: the device clock and the format its successful CQEs are stamped in.
    pub(crate) stamps: Option<(DeviceClock, TimestampFormat)>,
    /// mlx5: the rings of resizes whose RESIZE CQE the poller has not reached yet, oldest
    /// first: it switches to the next at each RESIZE CQE.
    next_rings: VecDeque<Mlx5Ring>,
    /// irdma: completions taken from the ring a resize replaced, returned before the new
    /// ring's (rdma-core's irdma provider polls its old buffers first, `__irdma_poll_cq`).
    carried: VecDeque<Completion>,
}

impl CqState {
    /// The mlx5 poller's registry (`None` on irdma).
    pub(crate) fn mlx5_registry_mut(&mut self) -> Option<&mut Registry> {
        match &mut self.hw {
            CqHw::Mlx5 { poller, .. } => Some(poller.registry_mut()),
            CqHw::Irdma { .. } => None,
        }
    }

    pub(crate) fn new(hw: CqHw, cqe: u32) -> Self {
        CqState {
            hw,
            cqe,
            overrun: None,
            error: Arc::new(CqErrorCell::new()),
            stranded: Vec::new(),
            dropped: 0,
            written: 0,
            slots: 0,
            last_solicited: None,
            completions: 0,
            consumed: 0,
            high_water: 0,
            srq_tags: VecDeque::new(),
            events: CqEvents::default(),
            stamps: None,
            next_rings: VecDeque::new(),
            carried: VecDeque::new(),
        }
    }

    /// The ring as a ring image whose decoding replays the CQEs already polled that are
    /// still in the ring, then the ones waiting; or why there is none.
    pub(crate) fn ring_image(&self) -> Result<String, String> {
        match &self.hw {
            CqHw::Mlx5 { model, poller } => {
                let waiting = self.slots.saturating_sub(self.consumed);
                let room = u64::from(model.config().entries).saturating_sub(waiting);
                Ok(poller.image(room.min(self.consumed) as u32))
            }
            CqHw::Irdma { .. } => Err("the irdma ring-image format names QPs by their line in the image, and the \
                                       model's CQEs carry QP context addresses: irdma model rings are not written yet"
                .into()),
        }
    }

    /// The ring slots.
    pub(crate) fn entries(&self) -> u32 {
        match &self.hw {
            CqHw::Mlx5 { model, .. } => model.config().entries,
            CqHw::Irdma { model, .. } => model.config().entries,
        }
    }

    /// The device could not write a CQE of QP `qpn` (`None`: a compression session): the CQ
    /// overran, or was in error already. The CQ is in error from now on, and the QP will be
    /// moved to error as the hardware moves a QP whose completion its CQ cannot take.
    fn refused(&mut self, e: DeviceError, qpn: Option<u32>) {
        self.dropped += 1;
        self.overrun.get_or_insert(e);
        self.error.set(CqErrorReason::Overrun);
        if let Some(q) = qpn.filter(|q| !self.stranded.contains(q)) {
            self.stranded.push(q);
        }
        self.events.on_overrun();
    }

    /// Writes an mlx5 CQE; an overrun puts the CQ in error, as the model does, and drops it.
    /// A success is stamped with the device clock now, in the CQ's format; an error CQE has
    /// no timestamp (its bytes 48-55 hold the syndromes).
    pub(crate) fn push_mlx5(&mut self, e: &Entry, srq_tag: Option<(usize, u16)>) {
        let CqHw::Mlx5 { model, .. } = &mut self.hw else { return };
        use dvcq_uapi::mlx5::opcode::cqe_opcode;
        let mut e = *e;
        let op = e.cqe.op_own >> dvcq_uapi::mlx5::cqe::op_own::OPCODE_SHIFT;
        if let Some((clock, format)) = self.stamps.filter(|_| op != cqe_opcode::REQ_ERR && op != cqe_opcode::RESP_ERR) {
            e.cqe.timestamp = dvcq_uapi::Be64::new(clock.stamp(format));
        }
        let e = &e;
        match model.push(e) {
            Ok(_) => {
                if let Some((srq, idx)) = srq_tag {
                    self.srq_tags.push_back((self.written, srq, idx));
                }
                // Solicited-only arms fire on the SE bit and on error CQEs (REQ_ERR, RESP_ERR).
                use dvcq_uapi::mlx5::cqe::op_own;
                use dvcq_uapi::mlx5::opcode::cqe_opcode;
                let op = e.cqe.op_own >> op_own::OPCODE_SHIFT;
                let se = e.cqe.op_own & op_own::SE_MASK != 0;
                self.written_one(1, se || op == cqe_opcode::REQ_ERR || op == cqe_opcode::RESP_ERR);
            }
            Err(err) => self.refused(err.into(), Some(e.cqe.sop_drop_qpn.get() & 0x00ff_ffff)),
        }
    }

    /// Writes an irdma CQE, with the same overflow rule.
    pub(crate) fn push_irdma(&mut self, c: &ModelCqe) {
        let CqHw::Irdma { model, .. } = &mut self.hw else { return };
        let slots = model.slots_for(c);
        match model.push(c) {
            Ok(()) => self.written_one(slots, c.solicited || c.error.is_some()),
            Err(err) => self.refused(err.into(), Some(c.qp_num)),
        }
    }

    /// A CQE of `slots` slots reached the ring; `solicited` if it fires a solicited arm.
    fn written_one(&mut self, slots: u32, solicited: bool) {
        if solicited {
            self.last_solicited = Some(self.slots);
        }
        self.slots += u64::from(slots);
        self.written += 1;
        self.events.on_write(solicited);
    }

    /// `ibv_req_notify_cq`: the vendor's poller rings the CQ's doorbells, and the device
    /// takes the arm from them.
    pub(crate) fn arm(&mut self, solicited: bool) -> Result<(), DeviceError> {
        let rang = match &mut self.hw {
            CqHw::Mlx5 { poller, .. } => poller.arm(solicited).map(|_| true)?,
            CqHw::Irdma { poller, .. } => poller.arm(solicited).map_err(|e| DeviceError::Irdma(e.into()))?.is_some(),
        };
        if rang {
            self.doorbell_rung();
        }
        Ok(())
    }

    /// Ring slots the device has written so far.
    pub(crate) fn slots_written(&self) -> u64 {
        self.slots
    }

    /// `ibv_get_cq_event` returned an event of this CQ: the poller hears of it (`cq_event`),
    /// and an irdma poller may arm again.
    pub(crate) fn event_received(&mut self) {
        let rang = match &mut self.hw {
            CqHw::Mlx5 { poller, .. } => {
                poller.event_received();
                false
            }
            CqHw::Irdma { poller, .. } => poller.event_received().is_some(),
        };
        if rang {
            self.doorbell_rung();
        }
    }

    /// The device takes the write its CQ doorbell got: the arm the vendor model decodes
    /// from the doorbell (mlx5: UAR and record; irdma: the shadow area's arm word), with
    /// what lies past the consumer index it was made at.
    pub(crate) fn doorbell_rung(&mut self) {
        let (mode, sn, past) = match &mut self.hw {
            CqHw::Mlx5 { model, .. } => match model.take_arm() {
                Ok(a) => {
                    if !a.record_matches() {
                        self.events.doorbell_fault();
                    }
                    (if a.solicited() { ArmState::Solicited } else { ArmState::Next }, Some(a.sn()), a.past)
                }
                Err(_) => return self.events.doorbell_fault(),
            },
            CqHw::Irdma { model, .. } => match model.take_arm() {
                Ok(a) => (if a.solicited() { ArmState::Solicited } else { ArmState::Next }, None, a.past),
                Err(_) => return self.events.doorbell_fault(),
            },
        };
        // CQEs that landed before the arm reached the device, unseen by it
        // (`ModelCq::before_next_arm`).
        let past = past.saturating_sub(u32::try_from(std::mem::take(&mut self.events.unseen)).unwrap_or(u32::MAX));
        // The armed index as a slot position: `past` slots before the next one written.
        let armed_at = self.slots.saturating_sub(u64::from(past));
        self.events.arm(ArmRequest {
            mode,
            sn,
            pending: past > 0,
            solicited_pending: self.last_solicited.is_some_and(|p| p >= armed_at),
        });
    }

    /// `ibv_resize_cq(cq, cqe)` as the vendor's provider and device do it; returns the
    /// `ibv_cq.cqe` it reports after. A size that gives the ring it has changes nothing, as
    /// in rdma-core. Nothing written before is lost: the poller returns it, in order,
    /// before what the device writes after.
    ///
    /// - mlx5 (rdma-core's `mlx5_resize_cq` in `providers/mlx5/verbs.c` and
    ///   `mlx5_cq_resize_copy_cqes` in `providers/mlx5/cq.c`; docs/mlx5.md, `RESIZE`): the
    ///   device writes a RESIZE CQE into the old ring and continues at the next position of
    ///   the new ring; the poller switches rings at that CQE (as the kernel's
    ///   `mlx5_poll_one` does). rdma-core copies the CQEs waiting into the new ring, so a
    ///   new ring too small for them is refused (where rdma-core's copy would fail).
    /// - irdma (`irdma_uresize_cq`, GEN2 and later have `IRDMA_FEATURE_CQ_RESIZE`): the
    ///   device writes into the new ring from its start; the provider polls what the old
    ///   ring still holds first. The model takes those completions out of the old ring now
    ///   and returns them first, then polls the new ring with the same QPs.
    pub(crate) fn resize(&mut self, cqe: u32) -> Result<u32, DeviceError> {
        let waiting = self.slots.saturating_sub(self.consumed);
        match &mut self.hw {
            CqHw::Mlx5 { model, poller } => {
                let entries = (cqe + 1).next_power_of_two();
                if entries == model.config().entries {
                    return Ok(self.cqe);
                }
                if u64::from(entries) <= waiting {
                    return Err(DeviceError::BadSize {
                        what: "cqe",
                        value: cqe.into(),
                        why: "the new ring cannot hold the completions waiting in the CQ (rdma-core's copy would fail)",
                    });
                }
                let ring = match poller {
                    Mlx5Poller::C64(_) => Mlx5Ring::C64(model.resize::<64>(entries)?),
                    Mlx5Poller::C128(_) => Mlx5Ring::C128(model.resize::<128>(entries)?),
                };
                self.next_rings.push_back(ring);
                // The RESIZE CQE takes a slot the poller consumes, and completes nothing.
                self.slots += 1;
                self.cqe = entries - 1;
            }
            CqHw::Irdma { model, poller } => {
                let old = *model.config();
                let entries = ring_slots(cqe, old.hw_rev, old.cqe_size, Rounding::Even)
                    .ok_or(DeviceError::BadSize { what: "cqe", value: cqe.into(), why: "the ring size overflows" })?;
                if entries != old.entries {
                    let new_model = IrdmaModel::new(IrdmaConfig { entries, ..old })?;
                    let mut scratch = [Completion::default(); 32];
                    loop {
                        let laps = 2 * old.entries;
                        let before = poller.ci();
                        let n = poller.poll(&mut scratch);
                        self.consumed += u64::from((poller.ci() + laps - before) % laps);
                        self.carried.extend(&scratch[..n]);
                        if n == 0 {
                            break;
                        }
                    }
                    let qps = std::mem::replace(poller.qps_mut(), QpRegistry::new(old.hw_rev));
                    **poller = new_model.poller(qps, Compat::Current)?;
                    *model = new_model;
                    self.cqe = cqe;
                }
            }
        }
        Ok(self.cqe)
    }

    /// One poll call on the vendor's poller.
    pub(crate) fn poll(&mut self, out: &mut [Completion]) -> usize {
        // CQEs only accumulate between poll calls, so the count waiting at each call is how
        // full the ring got since the one before.
        self.high_water = self.high_water.max(self.slots.saturating_sub(self.consumed));
        // Model choice: a compression session the device holds open is written when the
        // consumer polls (back-pressure ends there), so a poll never waits on one.
        let unflushed = match &mut self.hw {
            CqHw::Mlx5 { model, .. } if model.config().compression.is_some() => model.flush().err(),
            _ => None,
        };
        if let Some(e) = unflushed {
            // No room for the session: the CQ overran.
            self.refused(e.into(), None);
        }
        // Completions a resize carried over from the replaced ring come first.
        let mut carried = 0;
        while carried < out.len() {
            let Some(c) = self.carried.pop_front() else { break };
            out[carried] = c;
            carried += 1;
        }
        let out = &mut out[carried..];
        let (n, cqes) = match &mut self.hw {
            CqHw::Mlx5 { poller, .. } => {
                let before = poller.ci();
                let mut n = poller.poll(out);
                // At a RESIZE CQE the poll stops; the next CQE is the next ring's first.
                while poller.resize_pending() {
                    let Some(ring) = self.next_rings.pop_front() else { break };
                    if !poller.switch_ring(ring) {
                        break;
                    }
                    n += poller.poll(&mut out[n..]);
                }
                (n, poller.ci().wrapping_sub(before))
            }
            CqHw::Irdma { model, poller } => {
                // irdma's counter runs over two laps of the ring (its lap parity).
                let laps = 2 * model.config().entries;
                let before = poller.ci();
                let n = poller.poll(out);
                (n, (poller.ci() + laps - before) % laps)
            }
        };
        let n = n + carried;
        self.consumed += u64::from(cqes);
        self.completions += n as u64;
        n
    }
}

/// Counters of a model CQ, with the vendor poller's own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModelCqStats {
    /// Ring slots.
    pub entries: u32,
    /// CQEs the device wrote.
    pub cqes_written: u64,
    /// CQEs the device could not write (an overrun, and everything after it).
    pub cqes_dropped: u64,
    /// Completions the poller returned.
    pub completions: u64,
    /// The most CQEs waiting in the ring (written, not yet consumed) at any poll call.
    pub high_water: u64,
    /// Consumer-index doorbell writes by the poller (mlx5 `set_ci`, irdma shadow-area head).
    pub doorbell_writes: u64,
    /// Failed completions the poller returned, by status (fault items included).
    pub errors: StatusCounts,
    /// Fault items the poller returned.
    pub faults: u64,
    /// The mlx5 poller's counters (`None` on `model-e810`, whose poller keeps none).
    pub mlx5: Option<CqStats>,
}

/// A completion queue of a model device (`struct ibv_cq`).
#[derive(Debug)]
pub struct ModelCq {
    shared: Arc<Shared>,
    id: usize,
    /// The CQ's error state, shared with the device ([`CqState::error`]).
    error: Arc<CqErrorCell>,
}

impl ModelCq {
    pub(crate) fn new(shared: Arc<Shared>, id: usize) -> Self {
        let error = Arc::clone(&shared.lock().cqs[id].error);
        ModelCq { shared, id, error }
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    pub(crate) fn id(&self) -> usize {
        self.id
    }

    /// Polls up to `out.len()` completions in order into the front of `out` and returns that
    /// part of it (as [`crate::Cq::poll`] does): empty when there were none. The vendor's
    /// poller parses the CQEs the device wrote, as it parses a NIC's.
    pub fn poll<'a>(&mut self, out: &'a mut [Completion]) -> &'a [Completion] {
        let n = self.poll_count(out);
        &out[..n.min(out.len())]
    }

    /// [`ModelCq::poll`] returning how many completions it moved to the front of `out`
    /// instead of that slice.
    pub fn poll_count(&mut self, out: &mut [Completion]) -> usize {
        self.shared.lock().poll_cq(self.id, out)
    }

    /// `ibv_cq.cqe`: what the provider reports (mlx5: the ring size - 1; irdma: the
    /// number asked for).
    pub fn cqe(&self) -> u32 {
        self.shared.lock().cqs[self.id].cqe
    }

    /// `ibv_resize_cq(cq, cqe)`: a ring for at least `cqe` completions, sized as at create;
    /// returns `ibv_cq.cqe` after. Completions waiting are returned before later ones, in
    /// order (see the vendor rules in the model's notes).
    ///
    /// # Errors
    ///
    /// [`DeviceError::TooLarge`] for 0 or more than [`super::DeviceAttrs::max_cqe`];
    /// [`DeviceError::BadSize`] for an mlx5 ring too small for the completions waiting;
    /// the vendor model's own errors (a full CQ with no room for the RESIZE CQE).
    pub fn resize(&mut self, cqe: u32) -> Result<u32, DeviceError> {
        self.shared.lock().resize_cq(self.id, cqe)
    }

    /// Ring slots, as the provider allocated them.
    pub fn entries(&self) -> u32 {
        self.shared.lock().cqs[self.id].entries()
    }

    /// The overrun that put the CQ in error (the device raised a CQ error event and writes
    /// no more CQEs to it), if one happened.
    pub fn overrun(&self) -> Option<DeviceError> {
        self.shared.lock().cqs[self.id].overrun
    }

    /// Why the CQ is in error, if it is: one relaxed load, without the device's lock (what
    /// a poll that found the ring empty asks).
    #[inline]
    pub fn error(&self) -> Option<CqErrorReason> {
        self.error.get()
    }

    /// The cell [`ModelCq::error`] reads.
    pub(crate) fn error_cell(&self) -> &Arc<CqErrorCell> {
        &self.error
    }

    /// The ring as a ring image (shared format with `dvcq ring decode`): decoding it replays
    /// the CQEs already polled that are still in the ring, then those waiting.
    ///
    /// # Errors
    ///
    /// [`crate::Error::Unsupported`] naming the model and why its ring cannot be written as
    /// an image (irdma model rings, for now).
    pub fn ring_image(&self) -> Result<String, crate::Error> {
        self.shared.lock().cqs[self.id].ring_image().map_err(|why| crate::Error::Unsupported {
            device: self.shared.vendor.device_name().to_string(),
            what: "a ring image",
            why,
        })
    }

    /// The CQ's counters.
    pub fn stats(&self) -> ModelCqStats {
        let f = self.shared.lock();
        let c = &f.cqs[self.id];
        let (mlx5, doorbell_writes, errors, faults) = match &c.hw {
            CqHw::Mlx5 { poller, .. } => {
                let s = poller.stats();
                (Some(s), s.doorbell_writes, s.errors, s.faults)
            }
            CqHw::Irdma { poller, .. } => {
                let s = poller.stats();
                (None, poller.head_writes(), s.errors, s.faults)
            }
        };
        ModelCqStats {
            entries: c.entries(),
            cqes_written: c.written,
            cqes_dropped: c.dropped,
            completions: c.completions,
            high_water: c.high_water,
            doorbell_writes,
            errors,
            faults,
            mlx5,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::model_device::{ModelDevice, ModelVendor};
    use crate::Error;

    /// A model ring that has no image says so with the library's typed error, naming the
    /// model and why; an mlx5 model's ring has one.
    #[test]
    fn a_model_ring_without_an_image_is_an_unsupported_error() {
        let cq = ModelDevice::new(ModelVendor::Irdma).create_cq(16).unwrap();
        match cq.ring_image() {
            Err(Error::Unsupported { device, what: "a ring image", why }) => {
                assert_eq!(device, "model-e810");
                assert!(why.contains("irdma"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        let cq = ModelDevice::new(ModelVendor::Mlx5).create_cq(16).unwrap();
        assert!(cq.ring_image().unwrap().contains("mlx5"), "an mlx5 model ring has an image");
    }
}
