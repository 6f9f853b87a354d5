//! The irdma CQ poller, after rdma-core's `providers/irdma/uk.c` (`irdma_uk_cq_init`,
//! `irdma_uk_cq_poll_cmpl`) and `providers/irdma/uverbs.c` (`__irdma_upoll_cq`): polarity
//! tracking, ring head, extended CQEs, the shadow-area head, batch poll, peek, and zero-copy
//! views.

use crate::arm::{ArmBook, ArmDoorbell, Decision};
use crate::cqe::{Kind, Queue, Step, F_CLEAR_FIRST_SQ_WQ, F_KEEP_LAP, F_PUSH_DROPPED, F_SET_BYTES, F_ZERO_BYTES};
use crate::fast::{FastTables, Stop, SLOW};
use crate::registry::QpRegistry;
use crate::ring::{valid_at, Pos, SlotRing, SlotSource, SlotView, SlotWords};
use crate::status::{classify_error, flush_code_status, CompStatus, Compat};
use dvcq_provider::{
    Completion, CqDriver, CqInfo, DoorbellQword, DoorbellWord, RingView, SlotRef, StatusCounts, StrideCursor, WcStatus,
};
use dvcq_uapi::irdma::cqe::{ext, off, q0, q2, q3};
use dvcq_uapi::irdma::HwRev;
use dvcq_uapi::Le64;
use std::sync::atomic::Ordering;

/// Poll state shared by the live poller and the image decoder: the consumer position, the
/// QP registry, and rdma-core's per-CQ scratch that leaks between CQEs.
#[derive(Clone, Debug)]
pub(crate) struct Engine {
    /// Where the consumer is: head and polarity.
    pub ci: Pos,
    /// Slots in the ring.
    pub entries: u32,
    pub hw_rev: HwRev,
    pub gen3: bool,
    pub compat: Compat,
    /// The fast path's tables for `compat`.
    pub fast: &'static FastTables,
    pub qps: QpRegistry,
    /// `cur_cqe.bytes_xfered` as the last CQE left it (stale byte_len quirk:
    /// rdma-core reuses `irdma_ucq.cur_cqe` across `__irdma_upoll_cq` calls).
    pub last_bytes: u32,
    /// The CQE at `ci` already produced flushed completions (the parked flush CQE
    /// of `irdma_uk_cq_poll_cmpl`; see [`crate::flush`]).
    pub parked: bool,
    /// One-entry lookup cache: last completion context and its QP index (ctx 0 = none; also
    /// 0 while a flush CQE is parked, which keeps the fast path off it).
    pub last_ctx: u64,
    pub last_qp: u32,
    /// Failed completions and fault items returned (see [`PollStats`]).
    pub stats: PollStats,
}

/// What an [`IrdmaCq`] counted on its general path, where every failed completion and
/// fault item is made (the fast path takes successes only), so successful completions pay
/// nothing for it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PollStats {
    /// Completions returned with a status other than success, by status, fault items
    /// included (as `IBV_WC_GENERAL_ERR`).
    pub errors: StatusCounts,
    /// Fault items returned.
    pub faults: u64,
}

impl Engine {
    pub(crate) fn new(entries: u32, hw_rev: HwRev, compat: Compat, qps: QpRegistry) -> Self {
        Self {
            ci: Pos::START,
            entries,
            hw_rev,
            gen3: hw_rev == HwRev::Gen3,
            compat,
            fast: FastTables::of(compat),
            qps,
            last_bytes: 0,
            parked: false,
            last_ctx: 0,
            last_qp: 0,
            stats: PollStats::default(),
        }
    }

    #[inline(always)]
    fn apply(&mut self, s: &Step) {
        self.ci = if s.flags & F_KEEP_LAP != 0 {
            self.ci.step_keeping_lap(s.slots, self.entries)
        } else {
            self.ci.step(s.slots, self.entries)
        };
        self.parked = s.slots == 0;
        if s.flags & F_SET_BYTES != 0 {
            self.last_bytes = s.wc.byte_len;
        }
        if s.flags & F_ZERO_BYTES != 0 {
            self.last_bytes = 0;
        }
        // A step names a queue only with the index of the QP it translated against, so the
        // lookup finds it; `if let` keeps the path free of a panic all the same.
        let qp = match s.queue {
            Queue::None => None,
            Queue::Sq | Queue::Rq => self.qps.get_mut(s.qp),
        };
        if let Some(qp) = qp {
            if s.queue == Queue::Sq {
                qp.sq.tail = s.tail;
            } else {
                qp.rq.tail = s.tail;
            }
            self.last_qp = s.qp;
            self.last_ctx = qp.ctx();
        }
        if self.parked {
            // Keep a parked flush CQE off the fast path.
            self.last_ctx = 0;
        }
        if s.flags & (F_CLEAR_FIRST_SQ_WQ | F_PUSH_DROPPED) != 0 {
            self.flag_effects(s);
        }
    }

    #[cold]
    fn flag_effects(&mut self, s: &Step) {
        let Some(qp) = self.qps.get_mut(s.qp) else {
            return;
        };
        if s.flags & F_CLEAR_FIRST_SQ_WQ != 0 {
            qp.first_sq_wq = false;
        }
        if s.flags & F_PUSH_DROPPED != 0 {
            qp.push_dropped = true;
        }
    }

    /// Fills `out` from `ring`, like `__irdma_upoll_cq` (rdma-core
    /// `providers/irdma/uverbs.c`): runs of common-case CQEs
    /// inline ([`Engine::fast_run`]), everything else out of line, one CQE at a time.
    #[inline(always)]
    pub(crate) fn poll<R: SlotSource>(&mut self, ring: &R, out: &mut [Completion]) -> usize {
        let mut n = 0;
        // CQEs consumed without a completion in this call. A ring holds at most `entries`
        // CQEs not yet polled, so a call that has skipped that many has gone round it: only
        // rdma-core's connection-WQE bug, copied on request, can bring the head back to CQEs
        // it consumed (it keeps the lap when it wraps), where rdma-core recurses until its
        // stack overflows. The call returns there; the next one goes on.
        let mut skipped = 0u32;
        loop {
            let (k, stop) = self.fast_run(ring, out.get_mut(n..).unwrap_or_default());
            n += k;
            match stop {
                Stop::Full => return n,
                Stop::Lap | Stop::Switched => continue,
                Stop::Other => {}
            }
            let Some(slot) = out.get_mut(n) else {
                return n;
            };
            let ci = self.ci;
            let Some(w3) = ring.slot(ci.slot()).valid_q3(ci.flip()) else {
                return n;
            };
            match self.slow(ring, ci, w3, slot) {
                Some(Kind::Wc) => n += 1,
                Some(Kind::Skip) => {
                    skipped += 1;
                    if skipped >= self.entries {
                        return n;
                    }
                }
                None => {}
                Some(Kind::Stop) => return n,
            }
        }
    }

    /// Makes the QP that the valid CQE at the counter (qword3 `w3`) names the cached one;
    /// false for a CQE the fast path does not take (`SLOW` flags), context 0, an unknown
    /// context, or the QP already cached. Only the lookup cache changes; the fast run that
    /// follows tests the CQE in full.
    #[inline(always)]
    fn switch_qp<R: SlotSource>(&mut self, ring: &R, w3: u64) -> bool {
        let ctx = ring.slot(self.ci.slot()).qword(off::QWORD1);
        if w3 & SLOW != 0 || ctx == 0 || ctx == self.last_ctx {
            return false;
        }
        let Some(qp) = self.qps.find(ctx) else {
            return false;
        };
        (self.last_ctx, self.last_qp) = (ctx, qp);
        true
    }

    /// Forgets the cached QP (registry indexes may change, or views consumed CQEs behind
    /// the cache's back).
    pub(crate) fn drop_qp_cache(&mut self) {
        self.last_ctx = 0;
    }

    /// The general path for one CQE: translate, apply, and write the completion if any;
    /// `None` when the CQE is another QP's fast-path CQE and the cache switched to it.
    /// `Kind::Stop` also stands for "extension not valid yet" (nothing consumed).
    #[cold]
    #[inline(never)]
    fn slow<R: SlotSource>(&mut self, ring: &R, pos: Pos, w3: u64, wc: &mut Completion) -> Option<Kind> {
        // A CQE the fast path takes, but of another QP than the cached one: switch the
        // cache (`None`), and the fast path goes on there.
        if self.switch_qp(ring, w3) {
            return None;
        }
        Some(self.translate_one(ring, pos, w3, wc))
    }

    /// [`Engine::slow`] past the switch: the general translation, out of line so that a
    /// switch does not pay for its set-up.
    #[cold]
    #[inline(never)]
    fn translate_one<R: SlotSource>(&mut self, ring: &R, pos: Pos, w3: u64, wc: &mut Completion) -> Kind {
        let Some(step) = self.translate(ring, pos, w3, self.parked) else {
            return Kind::Stop;
        };
        self.apply(&step);
        if step.kind == Kind::Wc {
            *wc = step.wc;
            if wc.status != WcStatus::Success {
                self.stats.errors.add(wc.status);
                self.stats.faults += u64::from(wc.fault().is_some());
            }
        }
        step.kind
    }

    /// The completion the next `poll` would return first, without changing any state.
    pub(crate) fn peek<R: SlotSource>(&self, ring: &R) -> Option<Completion> {
        let mut pos = self.ci;
        // A skipped CQE that changes state a later translation reads (a connection WQE's:
        // the first-SQ-WQE check, the last byte count) is applied to a copy of the engine,
        // made at most once, so that peek goes on as `poll` would. Others (comp ctx 0)
        // change nothing but the head. Look past a bounded number.
        let mut copy: Option<Box<Engine>> = None;
        for _ in 0..self.entries {
            let eng = copy.as_deref().unwrap_or(self);
            let w3 = ring.slot(pos.slot()).valid_q3(pos.flip())?;
            let step = eng.translate(ring, pos, w3, eng.parked && pos == eng.ci)?;
            match step.kind {
                Kind::Wc => return Some(step.wc),
                Kind::Stop => return None,
                Kind::Skip if step.flags != 0 || step.queue != Queue::None => {
                    let e = copy.get_or_insert_with(|| Box::new(self.clone()));
                    e.ci = pos;
                    e.apply(&step);
                    pos = e.ci;
                }
                Kind::Skip => pos = pos.step(step.slots.max(1), self.entries),
            }
        }
        None
    }
}

/// How to open an irdma CQ.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CqConfig {
    /// Hardware generation (decides flush parking, the GEN3 receive opcodes, SRQ).
    pub hw_rev: HwRev,
    /// rdma-core version behaviour to reproduce.
    pub compat: Compat,
    /// The CQ id (for [`CqInfo`]; 0 when unknown).
    pub cq_id: u32,
    /// The consumer counter to start from (0 for a new CQ: head 0, polarity 1): slot
    /// `ci mod entries`, valid bit 1 when `ci / entries` is even. Taken modulo twice the
    /// ring size, so a running counter of a power-of-two ring may have wrapped.
    pub ci: u32,
}

/// Errors opening a CQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CqError {
    /// The shadow-area word is not usable (misaligned).
    #[error("shadow area: {0}")]
    Shadow(dvcq_provider::Error),
    /// GEN3 with a compatibility mode for releases that had no GEN3 support.
    #[error("a GEN3 CQ needs Compat::Current: rdma-core's irdma provider supports GEN3 from v64, and {0:?} reproduces older releases")]
    Gen3BeforeV64(Compat),
    /// An arm on a poller opened without the CQ's arm doorbell.
    #[error("cq {cq_id} cannot be armed: the poller was opened without its arm doorbell (shadow-area arm word and cq doorbell)")]
    NoArmDoorbell {
        /// The CQ id.
        cq_id: u32,
    },
}

/// What the poller has written to shadow word 0: the last head and how many stores.
#[derive(Debug, Clone, Copy)]
struct HeadRecord {
    /// The head, or [`NO_HEAD`] before the first store.
    last: u32,
    writes: u64,
}

/// [`HeadRecord::last`] before the first store: no slot index.
const NO_HEAD: u32 = u32::MAX;

impl Default for HeadRecord {
    fn default() -> Self {
        Self { last: NO_HEAD, writes: 0 }
    }
}

/// One step of rdma-core's `irdma_uk_clean_cq` at `pos`: `None` if the slot holds no CQE
/// of the current pass (the walk ends), else whether its qword1 named `ctx` and was zeroed.
/// The slot is software's (its valid bit says so), so the device does not write it now.
fn clean_slot<const S: usize>(ring: &dvcq_provider::CqRing<S, false>, pos: Pos, ctx: u64) -> Option<bool> {
    let view = ring.view();
    let s = view.slot_ref::<S>(pos.slot());
    s.valid_q3(pos.flip())?;
    if s.qword(off::QWORD1) != ctx {
        return Some(false);
    }
    // A constant offset inside the slot: the write cannot fail.
    let _ = ring.write_bytes(pos.slot(), off::QWORD1, &[0; 8]);
    Some(true)
}

/// Writes `head` to shadow word 0 (release ordering). Every caller has moved the head (or
/// was asked to publish), so the store is not skipped when the value is unchanged.
#[inline]
fn publish_head(shadow: &DoorbellQword, published: &mut HeadRecord, head: u32) {
    shadow.store_le64(u64::from(head), Ordering::Release);
    published.last = head;
    published.writes += 1;
}

/// An irdma CQ poller over a ring in device memory.
///
/// `Send` but not `Sync`: one consumer per CQ. The poll path allocates nothing, takes no
/// lock, makes no system call and cannot panic on ring contents: bad CQEs come back as fault
/// items ([`Completion::fault`]).
#[derive(Debug)]
pub struct IrdmaCq {
    ring: SlotRing,
    shadow: DoorbellQword,
    eng: Engine,
    /// The head last written to shadow word 0, and the stores made.
    published: HeadRecord,
    cq_id: u32,
    /// The arm doorbell, when handed over, and the provider's arm bookkeeping.
    arm: Option<ArmDoorbell>,
    arm_book: ArmBook,
}

impl IrdmaCq {
    /// Opens a CQ over `ring` whose consumer head goes to `shadow` (shadow-area byte 0,
    /// where `irdma_uk_cq_poll_cmpl` stores it after each CQE), with the QPs in `qps`.
    ///
    /// # Errors
    ///
    /// [`CqError::Shadow`] if the shadow word is not 8-byte aligned;
    /// [`CqError::Gen3BeforeV64`] for GEN3 with an older release's [`Compat`].
    pub fn new(ring: SlotRing, shadow: DoorbellWord, qps: QpRegistry, cfg: CqConfig) -> Result<Self, CqError> {
        let shadow = DoorbellQword::new(shadow).map_err(CqError::Shadow)?;
        if cfg.hw_rev == HwRev::Gen3 && !cfg.compat.has_gen3() {
            return Err(CqError::Gen3BeforeV64(cfg.compat));
        }
        let entries = ring.entries();
        let mut eng = Engine::new(entries, cfg.hw_rev, cfg.compat, qps);
        eng.ci = Pos::at(cfg.ci, entries);
        Ok(Self {
            ring,
            shadow,
            eng,
            published: HeadRecord::default(),
            cq_id: cfg.cq_id,
            arm: None,
            arm_book: ArmBook::default(),
        })
    }

    /// Hands the poller the CQ's arm doorbell, so [`IrdmaCq::arm`] can request events.
    pub fn set_arm_doorbell(&mut self, arm: ArmDoorbell) {
        self.arm = Some(arm);
    }

    /// The arm doorbell, if one was handed over.
    pub fn arm_doorbell(&self) -> Option<&ArmDoorbell> {
        self.arm.as_ref()
    }

    /// Requests one completion event (`ibv_req_notify_cq`), for the next completion or
    /// (`solicited`) the next solicited or error one, as rdma-core's `irdma_uarm_cq` does
    /// ([`crate::arm`]): a CQ not armed is armed as asked; an armed one is armed again for
    /// "any completion" (a solicited arm upgraded), and a solicited request on an armed CQ
    /// leaves the device alone (never narrowed) until the next event. Returns the shadow
    /// area's new arm word when the doorbell rang. Not a hot-path call: one per sleep.
    ///
    /// # Errors
    ///
    /// [`CqError::NoArmDoorbell`] when no arm doorbell was handed over.
    pub fn arm(&mut self, solicited: bool) -> Result<Option<u64>, CqError> {
        let Some(db) = &self.arm else {
            return Err(CqError::NoArmDoorbell { cq_id: self.cq_id });
        };
        Ok(match self.arm_book.request(solicited) {
            Decision::Ring { any_completion } => Some(db.request(self.cq_id, any_completion)),
            Decision::Skip => None,
        })
    }

    /// Records one completion event received for this CQ (`ibv_get_cq_event` returned it),
    /// as rdma-core's `irdma_cq_event` does: a solicited request skipped while the CQ was
    /// armed arms it now for any completion (the new arm word is returned); otherwise the
    /// CQ counts as disarmed.
    pub fn event_received(&mut self) -> Option<u64> {
        match (self.arm_book.event(), &self.arm) {
            (Decision::Ring { any_completion }, Some(db)) => Some(db.request(self.cq_id, any_completion)),
            _ => None,
        }
    }

    /// Whether the provider's bookkeeping has the CQ armed (`is_armed`).
    pub fn is_armed(&self) -> bool {
        self.arm_book.is_armed
    }

    /// The CQ id the arm doorbell writes.
    pub fn cq_id(&self) -> u32 {
        self.cq_id
    }

    /// The QP registry.
    pub fn qps(&self) -> &QpRegistry {
        &self.eng.qps
    }

    /// The QP registry, to register QPs and record posts.
    pub fn qps_mut(&mut self) -> &mut QpRegistry {
        // Registry indexes may change: drop the lookup cache.
        self.eng.drop_qp_cache();
        &mut self.eng.qps
    }

    /// The QP with id `id`, to bring its work-queue state up to date ([`crate::Qp::adopt`],
    /// [`crate::Qp::sync_posted`]). Unlike [`IrdmaCq::qps_mut`] it keeps the QP lookup
    /// cache: no QP is added or removed, so every index stays valid.
    pub fn qp_mut(&mut self, id: crate::QpId) -> Option<&mut crate::Qp> {
        self.eng.qps.qp_mut(id)
    }

    /// True when the CQE at the head is valid: a poll would consume something (a
    /// completion, a CQE it skips, or a flush CQE it synthesises from).
    #[inline(always)]
    pub fn is_ready(&self) -> bool {
        let ci = self.eng.ci;
        match &self.ring {
            SlotRing::Slots32(r) => r.view().slot(ci.slot()).valid_q3(ci.flip()).is_some(),
            SlotRing::Slots64(r) => r.view().slot(ci.slot()).valid_q3(ci.flip()).is_some(),
        }
    }

    /// Removes the QP registered under completion context `ctx` as rdma-core's
    /// `irdma_udestroy_qp` removes it from a CQ it completes on: `irdma_clean_cq`
    /// (`irdma_uk_clean_cq`) walks the ring slot by slot from the head while the valid bit
    /// says a slot holds a CQE not yet polled, and zeroes the completion context (qword1)
    /// of every one naming the QP. The poll then consumes them without a completion, as it
    /// does every CQE of context 0 (rdma-core's `EFAULT`). Call it on each CQ the QP
    /// completes on (its send and receive CQ), after the QP is destroyed.
    ///
    /// A CQE of the QP the walk does not clear stays a [`FaultKind::UnknownQp`] item,
    /// which is where rdma-core would read the freed QP: one written after the walk, or a
    /// GEN3 SRQ CQE, whose context is in qword5 (qword1 holds its wr_id, which the walk
    /// compares all the same).
    ///
    /// Returns how many CQEs the walk cleared, or `None` if no QP was registered under
    /// `ctx` (then nothing is written). [`QpRegistry::unregister`] alone removes the QP
    /// without the walk.
    ///
    /// [`FaultKind::UnknownQp`]: dvcq_provider::FaultKind::UnknownQp
    pub fn unregister(&mut self, ctx: u64) -> Option<u32> {
        self.eng.qps.find(ctx)?;
        let entries = self.ring.entries();
        let mut pos = self.eng.ci;
        let mut cleared = 0;
        for _ in 0..entries {
            let next = match &self.ring {
                SlotRing::Slots32(r) => clean_slot(r, pos, ctx),
                SlotRing::Slots64(r) => clean_slot(r, pos, ctx),
            };
            match next {
                None => break,
                Some(hit) => cleared += u32::from(hit),
            }
            pos = pos.step(1, entries);
        }
        self.eng.qps.unregister(ctx);
        self.eng.drop_qp_cache();
        Some(cleared)
    }

    /// Hardware generation.
    pub fn hw_rev(&self) -> HwRev {
        self.eng.hw_rev
    }

    /// The consumer position: the head on laps where the valid bit is 1, the head plus
    /// the ring size where it is 0 (a counter modulo twice the ring size).
    pub fn ci(&self) -> u32 {
        self.eng.ci.counter(self.eng.entries)
    }

    /// The ring head (rdma-core's `cq_ring.head`).
    pub fn head(&self) -> u32 {
        self.eng.ci.slot()
    }

    /// The expected valid bit at the head.
    pub fn polarity(&self) -> bool {
        self.eng.ci.polarity()
    }

    /// The head last written to the shadow area, if any.
    pub fn published_head(&self) -> Option<u32> {
        (self.published.last != NO_HEAD).then_some(self.published.last)
    }

    /// Failed completions and fault items returned so far.
    pub fn stats(&self) -> PollStats {
        self.eng.stats
    }

    /// Stores of the head to the shadow area so far (one per poll call or view walk that
    /// moved it, and per explicit publication): the consumer-index doorbell writes.
    pub fn head_writes(&self) -> u64 {
        self.published.writes
    }

    /// Writes the head to shadow word 0 (release: every CQE read happens before hardware may
    /// reuse the slots). rdma-core's `irdma_uk_cq_poll_cmpl` stores it after every CQE it
    /// consumes, skipped ones included; a head that never moves looks like a full CQ to the
    /// device. There is no acknowledge doorbell: `ucreate_cq` leaves `cq_ack_db` unset and no
    /// poll path uses it.
    #[inline]
    fn publish(&mut self) {
        let head = self.head();
        publish_head(&self.shadow, &mut self.published, head);
    }

    /// Moves up to `out.len()` completions out of the ring and writes the new head to the
    /// shadow area once. Returns how many were written.
    #[inline(always)]
    pub fn poll(&mut self, out: &mut [Completion]) -> usize {
        // An empty CQ is the common case of a busy-poll loop: answer it inline with one
        // valid-bit check, and keep the batch loop out of line.
        let ci = self.eng.ci;
        let ready = match &self.ring {
            SlotRing::Slots32(r) => r.view().slot(ci.slot()).valid_q3(ci.flip()),
            SlotRing::Slots64(r) => r.view().slot(ci.slot()).valid_q3(ci.flip()),
        };
        match (ready, out) {
            (None, _) | (_, []) => 0,
            // The one-at-a-time poll takes the fast path without the batch loop's set-up,
            // or a second valid-bit test.
            (Some(w3), [wc]) => self.poll_single(w3, wc),
            (Some(_), out) => self.poll_batch(out),
        }
    }

    /// One completion at the CQE whose valid qword3 `poll` read as `w3`: the fast run, which
    /// moves to another registered QP by itself, or the general path.
    #[inline(never)]
    fn poll_single(&mut self, w3: u64, wc: &mut Completion) -> usize {
        let n = match &self.ring {
            SlotRing::Slots32(r) => self.eng.fast_one(&r.view(), w3, wc),
            SlotRing::Slots64(r) => self.eng.fast_one(&r.view(), w3, wc),
        };
        if n == 0 {
            return self.poll_batch(core::slice::from_mut(wc));
        }
        self.publish();
        1
    }

    #[inline(never)]
    fn poll_batch(&mut self, out: &mut [Completion]) -> usize {
        let before = self.eng.ci;
        let n = match &self.ring {
            SlotRing::Slots32(r) => self.eng.poll(&r.view(), out),
            SlotRing::Slots64(r) => self.eng.poll(&r.view(), out),
        };
        if self.eng.ci != before {
            self.publish();
        }
        n
    }

    /// Polls one completion.
    pub fn poll_one(&mut self) -> Option<Completion> {
        let mut c = [Completion::default()];
        (self.poll(&mut c) == 1).then_some(c[0])
    }

    /// The next completion without consuming it.
    pub fn peek(&self) -> Option<Completion> {
        match &self.ring {
            SlotRing::Slots32(r) => self.eng.peek(&r.view()),
            SlotRing::Slots64(r) => self.eng.peek(&r.view()),
        }
    }

    /// Zero-copy iteration over raw CQEs. Each [`CqeView`] reads its fields from the ring;
    /// the head is written to the shadow area when the iterator is dropped.
    ///
    /// Views are raw: they do not consult the QP registry, so work-queue tails do not move
    /// and flush CQEs appear once as they are (no synthesised completions). Use them when
    /// the application tracks wr_ids by WQE index itself; use [`IrdmaCq::poll`] otherwise.
    pub fn views(&mut self) -> Views<'_> {
        let IrdmaCq { ring, shadow, eng, published, .. } = self;
        let ring = ring.view();
        let ci = eng.ci;
        Views { ring, cursor: ring.cursor(ci), flip: ci.flip(), compat: eng.compat, eng, shadow, published }
    }
}

impl CqDriver for IrdmaCq {
    fn info(&self) -> CqInfo {
        CqInfo { vendor: "irdma", entries: self.ring.entries(), cqe_size: self.ring.cqe_size(), cqn: self.cq_id }
    }
    fn poll(&mut self, out: &mut [Completion]) -> usize {
        IrdmaCq::poll(self, out)
    }
    fn peek(&self) -> Option<Completion> {
        IrdmaCq::peek(self)
    }
    fn ci(&self) -> u32 {
        IrdmaCq::ci(self)
    }
    fn update_ci(&mut self) {
        self.publish();
    }
}

/// The lending iterator of [`IrdmaCq::views`]. It borrows the CQ's parts separately and
/// keeps the ring geometry and a cursor through the current lap by value.
#[derive(Debug)]
pub struct Views<'a> {
    ring: SlotView<'a>,
    /// The next slot to look at; its lap's valid-bit flip is `flip`.
    cursor: StrideCursor<'a, 32>,
    flip: u64,
    compat: Compat,
    eng: &'a mut Engine,
    shadow: &'a DoorbellQword,
    published: &'a mut HeadRecord,
}

impl Views<'_> {
    /// The next valid CQE, consumed (one slot, or two for an extended CQE in 32-byte mode),
    /// or `None` when the ring holds no more (or the extension is not valid yet).
    ///
    /// A plain CQE inside the current lap is a pointer step and one valid-bit test; the
    /// ring's end and extended CQEs place the cursor anew, out of line (by value, so that
    /// the walk's state stays in registers).
    #[allow(clippy::should_implement_trait)]
    #[inline]
    pub fn next(&mut self) -> Option<CqeView<'_>> {
        if self.cursor.left() == 0 {
            let next = self.pos();
            (self.cursor, self.flip) = (Self::placed(self.ring, next), next.flip());
        }
        let (flip, left) = (self.flip, self.cursor.left());
        // The slot is addressed once, for the valid bit and every qword the caller reads
        // (all four lie in its first 32 bytes, whatever the stride).
        let slot = self.cursor.slot()?;
        let w3 = u64::from_le(slot.owned_u64_at(off::QWORD3, |w| valid_at(u64::from_le(w), flip))?);
        if w3 & q3::EXTCQE != 0 {
            let entries = self.ring.entries();
            let pos = Pos::of_cursor(left, flip, entries);
            let next = pos.step(Self::extension(self.ring, pos)?, entries);
            (self.cursor, self.flip) = (Self::placed(self.ring, next), next.flip());
        } else {
            self.cursor.advance();
        }
        Some(CqeView { ring: self.ring, slot, left, flip, w3, compat: self.compat })
    }

    /// Where the walk is.
    #[inline(always)]
    fn pos(&self) -> Pos {
        Pos::of_cursor(self.cursor.left(), self.flip, self.ring.entries())
    }

    /// A cursor on `pos`: where a walk goes on after the ring's end or an extended CQE.
    /// The ring's view goes to the out-of-line part in registers (a [`SlotView`] would go
    /// by reference, and the walk's state would then live in memory).
    #[inline(always)]
    fn placed<'r>(ring: SlotView<'r>, pos: Pos) -> StrideCursor<'r, 32> {
        match ring {
            SlotView::V32(r) => Self::placed_in(r, pos),
            SlotView::V64(r) => Self::placed_in(r, pos),
        }
    }

    #[cold]
    #[inline(never)]
    fn placed_in<const S: usize>(ring: RingView<'_, S, false>, pos: Pos) -> StrideCursor<'_, 32> {
        ring.stride_cursor::<32>(pos.slot())
    }

    /// The slots the extended CQE at `pos` takes, if its extension is valid yet (in 32-byte
    /// mode the next slot, maybe past the ring's end).
    #[inline(always)]
    fn extension(ring: SlotView<'_>, pos: Pos) -> Option<u32> {
        match ring {
            SlotView::V32(r) => Self::extension_in(r, pos),
            SlotView::V64(r) => Self::extension_in(r, pos),
        }
    }

    #[cold]
    #[inline(never)]
    fn extension_in<'r, const S: usize>(ring: RingView<'r, S, false>, pos: Pos) -> Option<u32>
    where
        RingView<'r, S, false>: SlotSource,
    {
        ring.ext(pos).map(|_| 1 + ring.ext_extra_slots())
    }
}

impl Drop for Views<'_> {
    #[inline]
    fn drop(&mut self) {
        let ci = self.pos();
        if self.eng.ci != ci {
            self.eng.ci = ci;
            self.eng.parked = false;
            self.eng.drop_qp_cache();
            publish_head(self.shadow, self.published, ci.slot());
        }
    }
}

/// A CQE in the ring, read field by field (the `IRDMA_CQ_*`/`IRDMACQ_*` masks of rdma-core's
/// `providers/irdma/defs.h`, extension words included).
#[derive(Debug, Clone, Copy)]
pub struct CqeView<'a> {
    ring: SlotView<'a>,
    /// The CQE's first 32 bytes (qwords 0-3).
    slot: SlotRef<'a, 32>,
    /// Its place, as the walk's cursor had it ([`Pos::of_cursor`]): slots to the ring's
    /// end and the lap's valid-bit flip.
    left: u32,
    flip: u64,
    w3: u64,
    compat: Compat,
}

macro_rules! word {
    ($self:ident, $off:expr) => {
        $self.slot.read_at::<Le64>($off).map_or(0, Le64::get)
    };
}

impl CqeView<'_> {
    /// Ring position of the CQE (as [`IrdmaCq::ci`]: the slot, plus the ring size on laps
    /// whose valid bit is 0).
    pub fn position(&self) -> u32 {
        self.pos().counter(self.ring.entries())
    }

    /// The CQE's place in the ring.
    fn pos(&self) -> Pos {
        Pos::of_cursor(self.left, self.flip, self.ring.entries())
    }
    /// qword3 as loaded (host order).
    #[inline]
    pub fn qword3(&self) -> u64 {
        self.w3
    }
    /// `IRDMA_CQ_QPCTX` (qword1).
    #[inline]
    pub fn comp_ctx(&self) -> u64 {
        word!(self, off::QWORD1)
    }
    /// `IRDMACQ_PAYLDLEN`.
    #[inline]
    pub fn payload_len(&self) -> u32 {
        q0::payload_len(word!(self, off::QWORD0))
    }
    /// `IRDMACQ_TCPSQN_ROCEPSN_RTT_TS`.
    #[inline]
    pub fn tcp_seq_psn_rtt_ts(&self) -> u32 {
        q0::tcp_seq_psn_rtt_ts(word!(self, off::QWORD0))
    }
    /// `IRDMACQ_QPID`.
    #[inline]
    pub fn qp_id(&self) -> u32 {
        q2::qp_id(word!(self, off::QWORD2))
    }
    /// `IRDMACQ_UDSRCQPN` / `IRDMACQ_INVSTAG`.
    #[inline]
    pub fn src_qpn_or_inv_stag(&self) -> u32 {
        q2::src_qpn_or_inv_stag(word!(self, off::QWORD2))
    }
    /// `IRDMA_CQ_WQEIDX` (quanta).
    #[inline]
    pub fn wqe_idx(&self) -> u16 {
        q3::wqe_idx(self.w3)
    }
    /// `IRDMACQ_OP`.
    #[inline]
    pub fn op(&self) -> u8 {
        q3::op(self.w3)
    }
    /// `IRDMA_CQ_SQ`.
    #[inline]
    pub fn is_sq(&self) -> bool {
        self.w3 & q3::SQ != 0
    }
    /// `IRDMA_CQ_ERROR`.
    #[inline]
    pub fn error(&self) -> bool {
        self.w3 & q3::ERROR != 0
    }
    /// `IRDMA_CQ_MAJERR`.
    #[inline]
    pub fn major_err(&self) -> u16 {
        q3::major_err(self.w3)
    }
    /// `IRDMA_CQ_MINERR`.
    #[inline]
    pub fn minor_err(&self) -> u16 {
        q3::minor_err(self.w3)
    }
    /// `IRDMACQ_SOEVENT`.
    #[inline]
    pub fn solicited(&self) -> bool {
        self.w3 & q3::SOEVENT != 0
    }
    /// Bit 53: invalidate (RC receive) or IPv4 (UD receive).
    #[inline]
    pub fn stag_ipv4(&self) -> bool {
        self.w3 & q3::STAG_IPV4 != 0
    }
    /// `IRDMA_CQ_SRQ`.
    #[inline]
    pub fn srq(&self) -> bool {
        self.w3 & q3::SRQ != 0
    }
    /// `IRDMACQ_PSHDROP`.
    #[inline]
    pub fn push_dropped(&self) -> bool {
        self.w3 & q3::PSHDROP != 0
    }
    /// `IRDMA_CQ_EXTCQE`.
    #[inline]
    pub fn extended(&self) -> bool {
        self.w3 & q3::EXTCQE != 0
    }
    /// The status rdma-core would derive from the error fields alone (no QP context: the
    /// SQ unknown-opcode override is not applied).
    pub fn status(&self) -> WcStatus {
        if !self.error() {
            return WcStatus::Success;
        }
        match classify_error(self.major_err(), self.minor_err(), self.compat).0 {
            CompStatus::Flushed(c) => flush_code_status(c, self.compat),
            _ => WcStatus::GeneralErr,
        }
    }
    /// The extension words (qword4..7), if the CQE is extended.
    pub fn ext(&self) -> Option<dvcq_uapi::irdma::ExtCqe> {
        if !self.extended() {
            return None;
        }
        match self.ring {
            SlotView::V32(r) => r.read_at::<dvcq_uapi::irdma::ExtCqe>(self.pos().advance(1, r.entries()).slot(), 0),
            SlotView::V64(r) => r.read_at::<dvcq_uapi::irdma::ExtCqe>(self.pos().slot(), off::EXT),
        }
    }
    /// The immediate (host-order number as the CQE holds it), if IMMVALID.
    pub fn imm(&self) -> Option<u32> {
        let e = self.ext()?;
        (e.qword7.get() & ext::IMMVALID != 0).then(|| e.imm_data())
    }
}
