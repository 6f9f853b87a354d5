//! The mlx5 CQ poller: ownership test, consumer counter, batch poll, peek, and the
//! consumer-index doorbell (rdma-core `providers/mlx5/cq.c` `get_sw_cqe`, `mlx5_poll_one`,
//! `update_cons_index`).

use crate::cqe::{self, Consume, CqeVersion, Parsed, Peek};
use crate::doorbell::{ArmDoorbell, ArmRing, CiPublisher};
use crate::fast::Stop;
use crate::mini::{CompLayout, CompressionConfig, MiniState};
use crate::registry::Registry;
use crate::view::Views;
use dvcq_provider::{
    Completion, CqDriver, CqInfo, CqRing, DoorbellWord, Error as ProviderError, RingView, StatusCounts, WcStatus,
};
use dvcq_uapi::mlx5::cqe::{op_own, Cqe64};
use dvcq_uapi::mlx5::opcode::{cqe_format, cqe_opcode};
use std::num::NonZeroU32;

pub(crate) const FAST_REQ: u8 = 0;
pub(crate) const FAST_RESP: u8 = 1;
const SLOW: u8 = 2;

/// When the poller writes the consumer index to the doorbell record. The device only learns
/// of consumed slots from this word, so a CQ without overrun-ignore needs it written often
/// enough (rdma-core's `mlx5_poll_cq` calls `update_cons_index` once per call).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CiUpdate {
    /// After every `poll` call (or view walk) that consumed CQEs. rdma-core's
    /// `mlx5_poll_cq` also writes after an empty poll, the value the record already holds;
    /// dvcq skips that store.
    #[default]
    EveryPoll,
    /// After at least N CQEs were consumed since the last write (and on
    /// [`Mlx5Cq::update_ci`]).
    EveryN(NonZeroU32),
    /// Never (UCX release builds). Only allowed for CQs created with overrun-ignore.
    Never,
}

/// Per-CQ settings a poller is opened with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CqConfig {
    /// How CQEs name their QP.
    pub cqe_version: CqeVersion,
    /// Consumer-index doorbell cadence.
    pub ci_update: CiUpdate,
    /// The CQ was created with `IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN` (`oi = 1`).
    pub overrun_ignore: bool,
    /// CQE compression (`mlx5dv_create_cq` with `MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE`):
    /// `None` unless the CQ was created with it. On a device this comes from the CQ's
    /// creation attributes ([`CompressionConfig::from_dv_attr`] for `mlx5dv_create_cq`),
    /// never from the CQEs.
    pub compression: Option<CompressionConfig>,
}

/// Errors opening an mlx5 poller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Mlx5Error {
    /// Ring or doorbell set-up failed.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// `CiUpdate::Never` on a CQ without overrun-ignore would overrun the CQ.
    #[error("ci_update=never needs a cq created with overrun-ignore; the device would see the cq as full")]
    NeverWithoutOverrunIgnore,
    /// A resize was expected (or not expected) by the poller.
    #[error("{0}")]
    Resize(&'static str),
    /// A poller's CQE size differs from the CQ's.
    #[error("a poller for {stride}-byte CQEs cannot read a CQ of {cqe_size}-byte CQEs")]
    StrideMismatch {
        /// The poller's CQE size.
        stride: u32,
        /// The CQ's CQE size.
        cqe_size: u32,
    },
    /// An arm on a poller opened without the CQ's arm doorbell.
    #[error("cq {cqn:#x} cannot be armed: the poller was opened without its arm doorbell (dbrec arm word and UAR)")]
    NoArmDoorbell {
        /// The CQ number.
        cqn: u32,
    },
}

/// Counters of CQEs that produced no ordinary completion.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CqStats {
    /// Signature-error CQEs consumed without a completion: recorded on a registered mkey
    /// ([`crate::Registry::mkey_check`]).
    pub swallowed: u64,
    /// Fault items returned.
    pub faults: u64,
    /// RESIZE CQEs seen.
    pub resizes: u64,
    /// Compressed sessions (basic titles, enhanced blocks) opened.
    pub sessions: u64,
    /// Successful completions whose data came inside the CQE (inline scatter) for a QP or
    /// SRQ without registered WQEs ([`crate::Registry::set_recv_wqes`]), or naming a WQE
    /// with nothing outstanding: their data was not copied into the posted buffers.
    /// rdma-core creates RC and DC QPs that receive this way unless
    /// `MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE` (or `MLX5_SCATTER_TO_CQE=0`) says
    /// otherwise.
    pub inline_not_copied: u64,
    /// Consumer-index publications: stores to the doorbell record's `set_ci` word (at most
    /// one per poll call or view walk, as [`CiUpdate`] says).
    pub doorbell_writes: u64,
    /// Completions returned with a status other than success, by status, fault items
    /// included (as `IBV_WC_GENERAL_ERR`). Counted on the slow path, where every such
    /// completion is made, so successful completions pay nothing for it.
    pub errors: StatusCounts,
}

/// An mlx5 CQ opened for polling: `STRIDE` is the CQE size, 64 or 128.
///
/// `Send` but not `Sync`: one consumer per CQ. The running consumer counter `ci` is a plain
/// free-running `u32` (rdma-core's `cons_index`); it is masked only to address a slot.
#[derive(Debug)]
pub struct Mlx5Cq<const STRIDE: usize> {
    pub(crate) ring: CqRing<STRIDE>,
    pub(crate) ci: u32,
    pub(crate) cfg: CqConfig,
    /// rdma-core's `cur_rsc`: (key, registry slot) of the last resource looked up.
    pub(crate) cache: (u32, u32),
    pub(crate) doorbell: CiPublisher,
    resize_pending: bool,
    /// `compression.is_some() || resize_pending`: the one test `poll` makes before its
    /// fast path.
    detour: bool,
    cqn: u32,
    pub(crate) registry: Registry,
    pub(crate) stats: CqStats,
    /// Compression state (mini.rs); untouched on CQs without compression.
    pub(crate) mini: MiniState,
    /// The arm doorbell, when the CQ's record arm word and UAR were handed over.
    arm: Option<ArmDoorbell>,
    /// rdma-core's `arm_sn`: completion events received since the CQ was made.
    arm_sn: u32,
}

/// [`Mlx5Cq::cache`] holding no QP: a key no CQE carries, a slot no registry has.
pub(crate) const NO_CACHE: (u32, u32) = (u32::MAX, u32::MAX);

/// A poller for 64-byte CQEs.
pub type Mlx5Cq64 = Mlx5Cq<64>;
/// A poller for 128-byte CQEs.
pub type Mlx5Cq128 = Mlx5Cq<128>;

/// The expected owner bit at running position `ci` of a ring with `entries` slots: bit
/// log2(entries) of the unmasked counter, not of the slot index (rdma-core `cq.c`
/// `get_sw_cqe`).
#[inline(always)]
pub const fn expected_owner(ci: u32, entries: u32) -> u8 {
    ((ci & entries) != 0) as u8
}

/// A table indexed by `op_own ^ expected owner bit`, as one table per lap parity indexed
/// by the `op_own` byte itself: a loop that stays in one lap picks its table once, and
/// each CQE's test is one load.
pub(crate) const fn per_lap_parity<T: Copy>(t: &[T; 256]) -> [[T; 256]; 2] {
    let mut out = [*t; 2];
    let mut b = 0;
    while b < 256 {
        out[1][b] = t[b ^ 1];
        b += 1;
    }
    out
}

/// rdma-core's software-ownership test for an `op_own` byte at position `ci`: not INVALID
/// and the owner bit matches the lap parity.
#[inline(always)]
pub const fn is_sw_owned(op_own_byte: u8, ci: u32, entries: u32) -> bool {
    sw_owned_by_lap(op_own_byte, expected_owner(ci, entries) as u32)
}

/// The same test given the lap number `ci >> log2(entries)`: rotating `op_own ^ parity`
/// right by one puts the owner mismatch in bit 7 and the opcode in bits 6:3, so one
/// unsigned compare checks "owner matches and opcode is not INVALID (0xF)".
#[inline(always)]
pub const fn sw_owned_by_lap(op_own_byte: u8, lap: u32) -> bool {
    (op_own_byte ^ (lap & 1) as u8).rotate_right(1) < (cqe_opcode::INVALID << 3)
}

impl<const STRIDE: usize> Mlx5Cq<STRIDE> {
    const STRIDE_OK: () = assert!(STRIDE == 64 || STRIDE == 128);
    /// Offset of the cqe64 inside a slot: the second half of a 128-byte CQE (rdma-core
    /// `cq.c` `get_sw_cqe`).
    pub(crate) const CQE_OFF: usize = STRIDE - 64;
    /// Offset of `op_own` inside a slot.
    pub(crate) const OWN_OFF: usize = STRIDE - 1;
    /// Fast-path class of every `op_own` byte: successful requester and responder CQEs
    /// without inline data go inline; errors, compression, opcodes >= 5 and inline data
    /// (copied into the WQE's buffers, or refused on a CQE too small for it) go to the
    /// slow path. One load replaces a compare chain.
    pub(crate) const CLASS: [u8; 256] = {
        let mut t = [SLOW; 256];
        let mut b = 0;
        while b < 256 {
            let own = b as u8;
            let format = op_own::format(own);
            if format == cqe_format::NO_INLINE {
                match op_own::opcode(own) {
                    cqe_opcode::REQ => t[b] = FAST_REQ,
                    cqe_opcode::RESP_WR_IMM..=cqe_opcode::RESP_SEND_INV => t[b] = FAST_RESP,
                    _ => {}
                }
            }
            b += 1;
        }
        t
    };

    /// Opens a poller on `ring` with the doorbell record's `set_ci` word `dbrec`, starting
    /// at running consumer counter `ci` (0 for a new CQ).
    ///
    /// # Errors
    ///
    /// [`Mlx5Error::NeverWithoutOverrunIgnore`] for an unsafe doorbell policy.
    pub fn new(
        ring: CqRing<STRIDE>,
        dbrec: DoorbellWord,
        cqn: u32,
        ci: u32,
        registry: Registry,
        cfg: CqConfig,
    ) -> Result<Self, Mlx5Error> {
        #[allow(clippy::let_unit_value)]
        let () = Self::STRIDE_OK;
        if cfg.ci_update == CiUpdate::Never && !cfg.overrun_ignore {
            return Err(Mlx5Error::NeverWithoutOverrunIgnore);
        }
        Ok(Self {
            ring,
            ci,
            cfg,
            // No QP cached yet: a key no CQE can carry; the first CQE takes the slow path.
            cache: NO_CACHE,
            doorbell: CiPublisher::new(dbrec, cfg.ci_update),
            resize_pending: false,
            detour: cfg.compression.is_some(),
            cqn,
            registry,
            stats: CqStats::default(),
            mini: MiniState::new(cfg.compression, ci),
            arm: None,
            arm_sn: 0,
        })
    }

    /// Hands the poller the CQ's arm doorbell, so [`Mlx5Cq::arm`] can request events.
    pub fn set_arm_doorbell(&mut self, arm: ArmDoorbell) {
        self.arm = Some(arm);
    }

    /// The arm doorbell, if one was handed over.
    pub fn arm_doorbell(&self) -> Option<&ArmDoorbell> {
        self.arm.as_ref()
    }

    /// Requests one completion event (`ibv_req_notify_cq`), for the next completion or
    /// (`solicited`) the next solicited or error one, as rdma-core's `mlx5_arm_cq` does
    /// (and the kernel's `mlx5_cq_arm`): the arm word `(arm_sn & 3) << 28 | cmd | (ci & 0xffffff)` with
    /// this poller's consumer counter into the doorbell record, a store fence, then the
    /// word and the CQ number to the UAR as one 8-byte big-endian store. Not a hot-path
    /// call: one per sleep.
    ///
    /// The device raises an event for the first qualifying CQE at or past `ci`, at once if
    /// one is already there, so the counter must be this poller's (rdma-core's own
    /// `cons_index`, which `mlx5_arm_cq` would use, never moves on a CQ polled here).
    ///
    /// # Errors
    ///
    /// [`Mlx5Error::NoArmDoorbell`] when no arm doorbell was handed over.
    pub fn arm(&mut self, solicited: bool) -> Result<ArmRing, Mlx5Error> {
        let Some(arm) = &self.arm else {
            return Err(Mlx5Error::NoArmDoorbell { cqn: self.cqn });
        };
        Ok(arm.ring(self.arm_sn, solicited, self.ci, self.cqn))
    }

    /// Records one completion event received for this CQ (`ibv_get_cq_event` returned it):
    /// the arm sequence number advances, as rdma-core's `mlx5_cq_event` advances `arm_sn`.
    pub fn event_received(&mut self) {
        self.arm_sn = self.arm_sn.wrapping_add(1);
    }

    /// The arm sequence number the next arm carries (its low 2 bits go on the wire).
    pub fn arm_sn(&self) -> u32 {
        self.arm_sn
    }

    /// Sets the arm sequence number: for a CQ whose events another party counts (rdma-core's
    /// `arm_sn` of a CQ it created, read before each arm).
    pub fn set_arm_sn(&mut self, sn: u32) {
        self.arm_sn = sn;
    }

    /// Removes a destroyed QP from the registry ([`Registry::remove_qp`]) and forgets the
    /// lookups cached for the next poll. False if it was not registered.
    pub fn remove_qp(&mut self, qpn: u32) -> bool {
        self.cache = NO_CACHE;
        self.registry.remove_qp(qpn)
    }

    /// Removes a destroyed receive WQ from the registry ([`Registry::remove_rwq`]) and
    /// forgets the lookups cached for the next poll. False if it was not registered.
    pub fn remove_rwq(&mut self, wqn: u32) -> bool {
        self.cache = NO_CACHE;
        self.registry.remove_rwq(wqn)
    }

    /// The registry of QPs and SRQs, to record posts.
    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// The registry of QPs and SRQs.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The running consumer counter.
    pub fn ci(&self) -> u32 {
        self.ci
    }

    /// The last value written to the doorbell record's set_ci word, if any.
    pub fn last_set_ci(&self) -> Option<u32> {
        self.doorbell.last_set_ci()
    }

    /// Counters of swallowed CQEs, faults, resizes, sessions and doorbell writes.
    pub fn stats(&self) -> CqStats {
        // Fault items are counted where they are made (`faults`); here they join the
        // errors as the status they carry.
        let mut errors = self.stats.errors;
        errors.add_n(WcStatus::GeneralErr, self.stats.faults);
        CqStats { doorbell_writes: self.doorbell.writes(), errors, ..self.stats }
    }

    /// The settings the poller was opened with.
    pub fn config(&self) -> CqConfig {
        self.cfg
    }

    /// True after a RESIZE CQE: polling stops until [`Mlx5Cq::switch_ring`] is called.
    pub fn resize_pending(&self) -> bool {
        self.resize_pending
    }

    /// Continues on the new ring after a RESIZE CQE: the device writes the next CQE at the
    /// same running counter in the new ring (inferred from rdma-core's
    /// `mlx5_cq_resize_copy_cqes`, which copies old CQE `i` to new slot `i + 1` and steps past
    /// the RESIZE CQE; the buffer swap is the kernel's `mlx5_poll_one` in
    /// `drivers/infiniband/hw/mlx5/cq.c`).
    ///
    /// # Errors
    ///
    /// [`Mlx5Error::Resize`] when no RESIZE CQE was consumed.
    pub fn switch_ring(&mut self, ring: CqRing<STRIDE>) -> Result<(), Mlx5Error> {
        if !self.resize_pending {
            return Err(Mlx5Error::Resize("switch_ring called but no RESIZE cqe was consumed"));
        }
        self.ring = ring;
        self.resize_pending = false;
        self.detour = self.cfg.compression.is_some();
        Ok(())
    }

    /// Records a consumed RESIZE CQE: polling stops until [`Mlx5Cq::switch_ring`].
    pub(crate) fn note_resize(&mut self) {
        self.stats.resizes += 1;
        self.resize_pending = true;
        self.detour = true;
    }

    /// The parts a view iterator borrows: ring geometry, the counter, the doorbell, and
    /// the compressed-session state.
    pub(crate) fn view_parts(&mut self) -> (RingView<'_, STRIDE>, &mut u32, &mut CiPublisher, &mut MiniState) {
        (self.ring.view(), &mut self.ci, &mut self.doorbell, &mut self.mini)
    }

    /// Is the entry at running position `ci` software-owned? Issues the acquire fence if so.
    #[inline(always)]
    pub(crate) fn owned(&self, ci: u32) -> Option<u8> {
        let entries = self.ring.entries();
        self.ring.owned_at(ci, Self::OWN_OFF, |b| is_sw_owned(b, ci, entries))
    }

    /// True when a poll now would take nothing and change nothing: no compressed session
    /// or pending resize to look at, and no CQE for software in the next slot. The test
    /// [`Mlx5Cq::poll`] makes first, for callers that keep per-call work of their own
    /// (mirrors, locks) behind it.
    #[inline(always)]
    pub fn idle(&self) -> bool {
        !self.detour && self.owned(self.ci).is_none()
    }

    /// Polls up to `out.len()` completions, in order; returns how many were written.
    ///
    /// CQEs that cannot become completions are returned as fault items in their place.
    /// A SIG_ERR CQE is recorded on its mkey without a completion, as rdma-core does, when
    /// the mkey is registered ([`crate::Registry::add_sig_mkey`]), and is a
    /// [`dvcq_provider::FaultKind::SigErr`] item otherwise ([`crate::sig`]). After a RESIZE CQE
    /// the call returns early and later calls return 0 until [`Mlx5Cq::switch_ring`].
    /// The consumer index is published as [`CqConfig::ci_update`] says.
    ///
    /// The empty case is decided inline (one ownership test); the loop is out of line.
    #[inline(always)]
    pub fn poll(&mut self, out: &mut [Completion]) -> usize {
        if self.detour {
            return self.poll_detour(out);
        }
        // Every way on is a tail call that publishes the counter itself, so the caller
        // keeps nothing across a call, and an empty poll saves no registers.
        match (self.owned(self.ci), out) {
            // Nothing to consume: the doorbell record already holds this index (every
            // poll, view walk or `publish_ci` that moved it wrote it, per the policy).
            (None, _) | (_, []) => 0,
            // The one-at-a-time poll (UCX style) skips the loop's set-up.
            (Some(own), [wc]) => self.poll_one_owned(own.into(), wc),
            (Some(_), out) => self.poll_loop_published(out),
        }
    }

    /// [`Mlx5Cq::poll_loop`], then the consumer index published.
    #[inline(never)]
    fn poll_loop_published(&mut self, out: &mut [Completion]) -> usize {
        let n = self.poll_loop(out);
        self.after_batch(n as u32);
        n
    }

    /// Compressed CQs (mini.rs) and a pending resize: one flag test per poll call brings
    /// them here, none per CQE.
    #[cold]
    #[inline(never)]
    fn poll_detour(&mut self, out: &mut [Completion]) -> usize {
        // A RESIZE CQE was consumed (and published by that poll): nothing more until
        // `switch_ring`, compressed CQ or not. The device writes nothing after it in the
        // old ring, so anything there is garbage, and taking it would put the counter off
        // for the new ring.
        if self.resize_pending {
            return 0;
        }
        self.poll_compressed_entry(out)
    }

    /// One completion: a fast run over a one-element slice (the compiler drops the loop),
    /// the full loop if the CQE is not for the fast path. For the regular CQEs of a CQ
    /// with basic-layout compression; `poll` takes [`Mlx5Cq::poll_single_owned`], which
    /// skips the second ownership test (handing the byte down from the compressed CQ's
    /// routing as well measured 3 to 6 instructions worse there).
    #[inline(never)]
    pub(crate) fn poll_single(&mut self, wc: &mut Completion) -> usize {
        if self.cfg.cqe_version == CqeVersion::V1 {
            self.poll_single_v::<true>(wc)
        } else {
            self.poll_single_v::<false>(wc)
        }
    }

    /// One completion at a CQE whose ownership byte `own` `poll` already found
    /// software-owned (handed over widened, which spares extending it here), with the
    /// consumer index published after it. The commonest case (a CQE of a QP that receives
    /// on its own RQ or an SRQ, cached or found in the registry's table of low key bits)
    /// calls nothing; anything else goes on in [`Mlx5Cq::poll_single_owned_published`], a
    /// tail call.
    #[inline(never)]
    fn poll_one_owned(&mut self, own: usize, wc: &mut Completion) -> usize {
        let own = own as u8;
        let done = if self.cfg.cqe_version == CqeVersion::V1 {
            self.fast_one_rq::<true>(own, wc)
        } else {
            self.fast_one_rq::<false>(own, wc)
        };
        if !done {
            return self.poll_single_owned_published(own, wc);
        }
        self.after_batch(1);
        1
    }

    /// [`Mlx5Cq::poll_single_owned`], then the consumer index published.
    #[inline(never)]
    fn poll_single_owned_published(&mut self, own: u8, wc: &mut Completion) -> usize {
        let n = self.poll_single_owned(own, wc);
        self.after_batch(n as u32);
        n
    }

    /// One completion at a CQE whose ownership byte `own` `poll` already found
    /// software-owned (the acquire fence issued): the fast path for that one CQE, without
    /// testing ownership again; the full loop if the CQE is not for the fast path.
    #[inline(never)]
    fn poll_single_owned(&mut self, own: u8, wc: &mut Completion) -> usize {
        if self.cfg.cqe_version == CqeVersion::V1 {
            self.poll_single_owned_v::<true>(own, wc)
        } else {
            self.poll_single_owned_v::<false>(own, wc)
        }
    }

    #[inline(always)]
    fn poll_single_owned_v<const V1: bool>(&mut self, own: u8, wc: &mut Completion) -> usize {
        match self.fast_one::<V1>(own, wc) {
            (1, _) => 1,
            // Another QP's CQE: switch and try the fast path once more.
            (_, Stop::Miss(key)) if self.switch_qp::<V1>(key) && self.fast_one::<V1>(own, wc).0 == 1 => 1,
            _ => self.poll_loop(core::slice::from_mut(wc)),
        }
    }

    #[inline(always)]
    fn poll_single_v<const V1: bool>(&mut self, wc: &mut Completion) -> usize {
        match self.fast_run_single::<V1>(wc) {
            (1, _) => 1,
            // Another QP's CQE: switch and try the fast path once more.
            (_, Stop::Miss(key)) if self.switch_qp::<V1>(key) && self.fast_run_single::<V1>(wc).0 == 1 => 1,
            _ => self.poll_loop(core::slice::from_mut(wc)),
        }
    }

    /// The poll loop (also for the regular CQEs of a CQ with basic-layout compression).
    #[inline(never)]
    pub(crate) fn poll_loop(&mut self, out: &mut [Completion]) -> usize {
        if self.cfg.cqe_version == CqeVersion::V1 {
            self.poll_loop_v::<true, false>(out)
        } else {
            self.poll_loop_v::<false, false>(out)
        }
    }

    /// The poll loop, specialised for the CQE version and the ownership test (`ENH`: the
    /// iteration count of enhanced CQE compression): runs of fast-path CQEs of the cached
    /// QP in [`Mlx5Cq::fast_run_as`] (fast.rs); a CQE of another QP switches the cache and
    /// starts a new run; each CQE off the fast path goes through the out-of-line
    /// [`Mlx5Cq::slow_one`], so the fast loop keeps nothing alive for it. On a compressed
    /// CQ the loop stops without consuming at a title or block.
    #[inline(always)]
    pub(crate) fn poll_loop_v<const V1: bool, const ENH: bool>(&mut self, out: &mut [Completion]) -> usize {
        let mut n = 0;
        loop {
            let (k, stop) = self.fast_run_as::<V1, ENH>(out.get_mut(n..).unwrap_or_default());
            n += k;
            match stop {
                Stop::Full => return n,
                Stop::Lap => continue,
                Stop::Miss(key) => {
                    // A key already cached missed: a requester CQE naming an XRC SRQ or
                    // receive WQ, which has no send queue.
                    if key != self.cache.0 && self.switch_qp::<V1>(key) {
                        continue;
                    }
                    // Unknown QP: the slow path turns the CQE into a fault item.
                }
                // A receive with inline data, say: an inline run takes it if it can
                // (fast.rs), and the CQEs after it while it can.
                Stop::Other if !ENH => {
                    let (k, stop) = self.fast_run_inline::<V1>(out.get_mut(n..).unwrap_or_default());
                    n += k;
                    match stop {
                        Stop::Full => return n,
                        Stop::Lap => continue,
                        _ if k > 0 => continue,
                        Stop::Miss(key) if key != self.cache.0 && self.switch_qp::<V1>(key) => continue,
                        _ => {}
                    }
                }
                Stop::Other => {}
            }
            let Some(slot) = out.get_mut(n) else {
                return n;
            };
            // Either the ring is empty here or the CQE needs the slow path.
            match self.slow_one::<V1, ENH>(slot) {
                Some(Parsed::Wc) => n += 1,
                Some(Parsed::Swallowed) => {}
                Some(Parsed::Resize) | None => return n,
            }
        }
    }

    /// Makes the QP a CQE names (QPN or user index) the cached one; false for an unknown
    /// QP.
    #[inline(always)]
    pub(crate) fn switch_qp<const V1: bool>(&mut self, key: u32) -> bool {
        match self.lookup_qp::<V1>(key) {
            Some(slot) => {
                self.cache = (key, slot);
                true
            }
            None => false,
        }
    }

    /// The registry slot of the QP a CQE names (QPN or user index), off the hot loop.
    #[inline(never)]
    fn lookup_qp<const V1: bool>(&self, key: u32) -> Option<u32> {
        if V1 {
            self.registry.slot_by_uidx(key)
        } else {
            self.registry.slot_by_qpn(key)
        }
    }

    /// The first half of the 128-byte CQE at `idx` whose `op_own` is `own`, when its format
    /// puts inline data there (format 2: rdma-core `cq.c` `handle_responder` copies from
    /// `cqe - 1`).
    #[inline]
    pub(crate) fn inline_half(ring: RingView<'_, STRIDE>, idx: u32, own: u8) -> Option<[u8; 64]> {
        if STRIDE == 128 && op_own::format(own) == cqe_format::INLINE_SCATTER_64 {
            ring.read_at::<[u8; 64]>(idx, 0)
        } else {
            None
        }
    }

    /// Consumes the CQE at `self.ci` through the slow path: errors, swallowed CQEs,
    /// RESIZE, garbage. `None` when the ring is empty there, or (compressed CQ) when a
    /// title or block is there: the session code opens it.
    #[cold]
    #[inline(never)]
    fn slow_one<const V1: bool, const ENH: bool>(&mut self, slot: &mut Completion) -> Option<Parsed> {
        let cur = self.ci;
        let own = if ENH { self.slot_owned_as::<true>(cur)? } else { self.owned(cur)? };
        if self.cfg.compression.is_some() && op_own::format(own) == cqe_format::COMPRESSED {
            return None;
        }
        let cqe = self.ring.read_at::<Cqe64>(cur, Self::CQE_OFF)?;
        let half = Self::inline_half(self.ring.view(), cur, own);
        self.ci = cur.wrapping_add(1);
        let mut res = Consume::new(&mut self.registry, self.cache, &mut self.stats);
        let p = cqe::parse_slow(&mut res, cqe, half, V1, STRIDE as u32, cur, slot);
        self.cache = res.cache();
        if ENH {
            // Enhanced compression: a CQE the poll passed may be the next block's title.
            self.take_title(cur);
        }
        match p {
            Parsed::Swallowed => self.stats.swallowed += 1,
            Parsed::Resize => self.note_resize(),
            // Failed completions come this way or through the enhanced-compression walk
            // (mini/session.rs), never the fast path; fault items are counted where made.
            Parsed::Wc if slot.status != WcStatus::Success && slot.fault().is_none() => {
                self.stats.errors.add(slot.status)
            }
            Parsed::Wc => {}
        }
        Some(p)
    }

    /// How many CQEs from the consumer index on are software-owned, counting at most
    /// `max` (with the acquire fence after the last owned one): a caller that mirrors
    /// another poster's wr_id tables copies them after this and before [`Mlx5Cq::poll`],
    /// so every post those CQEs complete is visible. 0 while a resize is pending.
    ///
    /// On a compressed CQ, slots count for nothing (a session's N completions sit behind
    /// one owned title, its other slots are mini arrays and holes): `max` while a session
    /// is open or a CQE is owned at the counter, 0 otherwise. Every completion a session
    /// holds was published with its title, so its posts were visible when the title was;
    /// the caller orders its posts with its polls, which leaves no post for a later CQE of
    /// the same poll to miss.
    pub fn ready(&self, max: usize) -> usize {
        if self.resize_pending {
            return 0;
        }
        if let Some(c) = self.cfg.compression {
            let owned = match c.layout {
                CompLayout::Basic => self.owned(self.ci).is_some(),
                CompLayout::Enhanced => self.slot_owned_as::<true>(self.ci).is_some(),
            };
            return if owned || self.mini.session_open() { max } else { 0 };
        }
        let mut n = 0;
        while n < max && self.owned(self.ci.wrapping_add(n as u32)).is_some() {
            n += 1;
        }
        n
    }

    /// [`Mlx5Cq::ready`] that also hands `each` the QP number of every CQE it counts,
    /// oldest first: what a poll of that many will take, so that a caller keeping
    /// per-QP state beside the poller brings up to date only the QPs that will appear.
    /// `None` (and no call) on a compressed CQ or with a resize pending, whose slots are
    /// not one CQE each: the caller then treats every QP as possibly present.
    pub fn ready_qpns(&self, max: usize, mut each: impl FnMut(u32)) -> Option<usize> {
        if self.resize_pending || self.cfg.compression.is_some() {
            return None;
        }
        let ring = self.ring.view();
        let mut n = 0;
        while n < max {
            let pos = self.ci.wrapping_add(n as u32);
            let Some(op_own) = self.owned(pos) else { break };
            let cqe = crate::fields::RingCqe { slot: ring.slot_ref::<STRIDE>(pos), op_own };
            each(cqe.be32(core::mem::offset_of!(Cqe64, sop_drop_qpn)).get() & dvcq_uapi::mlx5::cqe::QPN_MASK);
            n += 1;
        }
        Some(n)
    }

    /// Whether the device has written over a CQE this poller had not consumed: an overrun,
    /// which a CQ created with overrun-ignore (`IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN`, CQ
    /// context `oi = 1`) lets happen without telling anyone ("the CQE always will be written
    /// to the next entry", `ibv_create_cq_ex(3)`); the CQEs overwritten are lost. Returns the
    /// consumer index, where the poll stopped. Call it when a poll finds the CQ empty: it
    /// is not on the poll path. A CQ without overrun-ignore never overruns unseen (the
    /// device raises a CQ error and writes nothing more), and this never fires there.
    ///
    /// What the owner bits prove (the lap-parity test of rdma-core's `get_sw_cqe`): the slot
    /// before the consumer index holds a CQE of the lap after the one the poller consumed it
    /// in (the device came round again past it), while the slot at the index holds none of
    /// the poller's lap. The device writes in order, so it wrote the index's slot once more,
    /// over the CQE the poller was to take next. An overrun of two laps (or any even number)
    /// leaves the owner bits as they were and cannot be seen this way; one whose next lap has
    /// not yet reached the slot before the index is not seen yet. A CQ created with
    /// compression rewrites its slots itself: `None` there.
    ///
    /// The slot before the index must be one this poller consumed, or one the device wrote
    /// at the position before the index (as it is for a poller opened at a CQ's start, or
    /// where another consumer stopped).
    pub fn overrun_detected(&self) -> Option<u32> {
        if self.cfg.compression.is_some() || self.resize_pending {
            return None;
        }
        let entries = self.ring.entries();
        let prev = self.ci.wrapping_sub(1);
        // The next lap's parity at `prev`, on a CQE the device wrote (not INVALID). The
        // acquire fence of the test orders the load of the index's slot after it.
        let next_lap = u8::from(expected_owner(prev, entries) == 0);
        self.ring.owned_at(prev, Self::OWN_OFF, |b| {
            op_own::opcode(b) != cqe_opcode::INVALID && b & op_own::OWNER_MASK == next_lap
        })?;
        let own = self.ring.view().load_u8_at(self.ci, Self::OWN_OFF)?;
        (!is_sw_owned(own, self.ci, entries)).then_some(self.ci)
    }

    /// Polls one completion.
    pub fn poll_one(&mut self) -> Option<Completion> {
        let mut c = [Completion::default()];
        (self.poll(&mut c) == 1).then_some(c[0])
    }

    /// The next completion without consuming it (no tables advance, ci unchanged).
    /// Swallowed CQEs ahead of it are looked past.
    pub fn peek(&self) -> Option<Completion> {
        if self.cfg.compression.is_some() {
            return self.peek_compressed();
        }
        if self.resize_pending {
            return None;
        }
        let v1 = self.cfg.cqe_version == CqeVersion::V1;
        let mut ci = self.ci;
        loop {
            self.owned(ci)?;
            let cqe: Cqe64 = self.ring.read_at(ci, Self::CQE_OFF)?;
            let half = Self::inline_half(self.ring.view(), ci, cqe.op_own);
            let mut out = Completion::default();
            match cqe::parse_slow(&mut Peek(&self.registry), cqe, half, v1, STRIDE as u32, ci, &mut out) {
                Parsed::Wc => return Some(out),
                Parsed::Resize => return None,
                Parsed::Swallowed => ci = ci.wrapping_add(1),
            }
        }
    }

    /// Zero-copy iteration over raw CQE views; the consumer index is published when the
    /// returned iterator is dropped. Views do not touch the wr_id registry.
    ///
    /// On a CQ created with compression, views show the regular CQEs (by the layout's
    /// ownership test) and end at a title or block, which only [`Mlx5Cq::poll`]
    /// decompresses; while a session is open they show nothing. Views and `poll` may take
    /// turns on such a CQ.
    pub fn views(&mut self) -> Views<'_, STRIDE> {
        Views::new(self)
    }

    #[inline(always)]
    pub(crate) fn after_batch(&mut self, consumed: u32) {
        self.doorbell.after_batch(self.ci, consumed);
    }

    /// Writes `ci & 0xffffff` to the doorbell record's set_ci word with release ordering
    /// (rdma-core `update_cons_index` writes the same word): every CQE read before
    /// happens-before the device reusing its slot.
    #[inline(always)]
    pub fn publish_ci(&mut self) {
        self.doorbell.publish_now(self.ci);
    }
}

impl<const STRIDE: usize> CqDriver for Mlx5Cq<STRIDE> {
    fn info(&self) -> CqInfo {
        CqInfo { vendor: "mlx5", entries: self.ring.entries(), cqe_size: STRIDE as u32, cqn: self.cqn }
    }
    fn poll(&mut self, out: &mut [Completion]) -> usize {
        Mlx5Cq::poll(self, out)
    }
    fn peek(&self) -> Option<Completion> {
        Mlx5Cq::peek(self)
    }
    fn ci(&self) -> u32 {
        self.ci
    }
    fn update_ci(&mut self) {
        self.publish_ci()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rotate_test_equals_rdma_cores_ownership_rule() {
        for b in 0..=255u8 {
            for parity in 0..2u32 {
                let rdma_core = op_own::opcode(b) != cqe_opcode::INVALID && u32::from(b & 1) == parity;
                assert_eq!(sw_owned_by_lap(b, parity), rdma_core, "op_own {b:#x} parity {parity}");
            }
        }
    }

    proptest! {
        #[test]
        fn expected_owner_is_the_lap_parity_of_the_unmasked_counter(ci in any::<u32>(), log2 in 1u32..=22) {
            let entries = 1u32 << log2;
            prop_assert_eq!(u32::from(expected_owner(ci, entries)), (ci >> log2) & 1);
            // The parity of a position and of the same slot one lap later always differ.
            prop_assert_ne!(expected_owner(ci, entries), expected_owner(ci.wrapping_add(entries), entries));
        }
    }
}
