//! Completion events of a model device: the hardware's arm rules per CQ and the completion
//! channels the events are delivered on, through an eventfd. The device side of arming is
//! not public; the rules below are inferred from what software writes and expects: rdma-core
//! `providers/mlx5/cq.c` `mlx5_arm_cq`, `mlx5_cq_event`; `providers/irdma/uk.c`
//! `irdma_uk_cq_request_notification` and `providers/irdma/uverbs.c` `irdma_uarm_cq`,
//! `irdma_cq_event`; `ibv_req_notify_cq(3)`; and for moderation `ibv_modify_cq(3)` and the
//! kernel's `drivers/infiniband/hw/mlx5/cq.c` `mlx5_ib_modify_cq`.
//!
//! # How a CQ is armed
//!
//! As on the hardware, through its doorbells: [`super::ModelCq::arm`] has the vendor's
//! poller ring them as rdma-core does (mlx5: the doorbell record's arm word, then the UAR's
//! CQ doorbell; irdma: the shadow area's arm word, then the CQ doorbell), and the device
//! takes what the write left there, decoded by the vendor model
//! (`dvcq_mlx5_dv::model::UarArm`, `dvcq_e810_dv::model::ShadowArm`): the command (next or
//! solicited), the consumer index it was made at (mlx5: carried in the doorbell; irdma: the
//! head in the shadow area) and the sequence number. Reading an event from a
//! [`ModelChannel`] is `ibv_get_cq_event`: it tells the CQ's poller (mlx5: `arm_sn` + 1, as
//! `mlx5_cq_event`; irdma: `irdma_cq_event`'s bookkeeping, which may arm again).
//!
//! # The rules (both vendors)
//!
//! - A CQ is disarmed, armed for the next completion, or armed for the next solicited one.
//!   An arm is one-shot: it produces at most one event and leaves the CQ disarmed.
//! - Armed for the next completion, any CQE written fires. Armed solicited-only, a CQE fires
//!   when it carries the solicited-event bit or an error status (`ibv_req_notify_cq(3)`).
//! - Arming while a qualifying CQE past the armed consumer index is already in the ring fires
//!   at once (an inference from the consumer index the mlx5 arm carries; the irdma hardware
//!   is taken to behave alike, which its provider's re-arm rule assumes). An arm made at a
//!   stale index (rdma-core's own `cons_index`, which `mlx5_arm_cq` sends and a direct poll
//!   never advances) therefore fires at once too.
//! - mlx5: the device takes an arm only when its sequence number is the count of
//!   completion events it raised for the CQ, modulo 4; an arm with another number is stale
//!   (made before the software received the last event) and ignored. That is an inference
//!   (the PRM's rule is not public) from what the number is: rdma-core's `mlx5_cq_event`
//!   and the kernel's completion handler count events in `arm_sn`, and `mlx5_arm_cq` sends
//!   it, so the device can discard an arm made for an event already delivered. No wakeup is
//!   lost by it: an arm is stale only while an event the software has not read yet is on
//!   its way. irdma: a doorbell whose shadow-area sequence number did not change is no new
//!   arm (the provider adds one on every request).
//! - An armed CQ is never narrowed: a solicited arm of a CQ armed for the next completion
//!   leaves it armed for the next completion (irdma's provider never sends one,
//!   `irdma_uarm_cq`; on mlx5 a model choice).
//! - Moderation (`cq_count`): armed for the next completion, an event waits until `count`
//!   CQEs were written since the last event; `cq_period` (µs) fires an armed CQ holding
//!   CQEs once that long passed since the first of them, from a timer
//!   ([`ModelChannel`]'s thread). Solicited-only arms are not moderated (model choice: the
//!   mlx5 `scqe_break_moderation` behaviour).
//! - An overrun raises a CQ error event, armed or not, once. As on a device, it is an
//!   async event of the context (`IBV_EVENT_CQ_ERR`, on the context's async fd), not a
//!   channel event: a waiter that sleeps on the channel's fd alone sleeps through it. The
//!   model keeps one async fd per device ([`ModelChannel::async_fd`]); reading a channel
//!   reads the device's async events (draining that fd, as dvcq reads a context's) and
//!   reports the errors of the channel's CQs first, as dvcq does for a device's.
//!
//! Events carry the token the CQ was bound with, so one channel serves many CQs and each
//! event says whose it is.

use super::DeviceError;
use dvcq_provider::eventfd::EventFd;
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

/// What an armed CQ waits for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ArmState {
    /// No event will be generated.
    #[default]
    Disarmed,
    /// An event on the next completion (mlx5 `REQ_NOT`, irdma `ARM_NEXT`).
    Next,
    /// An event on the next solicited or error completion (mlx5 `REQ_NOT_SOL`, irdma
    /// `ARM_NEXT_SE` alone).
    Solicited,
}

/// What a channel event reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChannelEventKind {
    /// A completion event of an armed CQ.
    Completion,
    /// The CQ overran and is in error (`IBV_EVENT_CQ_ERR`).
    CqError,
}

/// One event read from a [`ModelChannel`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChannelEvent {
    /// The token the CQ was bound to the channel with.
    pub token: u64,
    /// What happened.
    pub kind: ChannelEventKind,
}

/// CQ moderation: the event of an armed CQ waits for `count` CQEs or `period_us`
/// microseconds, whichever comes first (0 turns either off).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Moderation {
    /// CQEs per event (`cq_max_count`, 16 bits on mlx5).
    pub count: u16,
    /// Microseconds (`cq_period`, 12 bits on mlx5: at most 4095).
    pub period_us: u16,
}

/// The largest `cq_period` the models accept (mlx5's 12-bit `cq_period` field).
pub const MAX_MODERATION_PERIOD_US: u16 = 4095;

/// The CQ an event came from: its device and index there, so that reading the event can
/// tell the CQ's poller (`ibv_get_cq_event` calls the provider's `cq_event`).
#[derive(Clone, Debug)]
pub(crate) struct Origin {
    device: Weak<super::Shared>,
    cq: usize,
}

#[derive(Debug)]
struct Queued {
    ev: ChannelEvent,
    origin: Option<Origin>,
}

/// A model device's async events (the context's async fd): CQ errors raised, and the
/// eventfd readable from a raise until someone reads them.
#[derive(Debug)]
pub(crate) struct AsyncEvents {
    efd: EventFd,
    raised: AtomicU64,
    read: AtomicU64,
}

impl AsyncEvents {
    pub(crate) fn new() -> io::Result<Arc<AsyncEvents>> {
        Ok(Arc::new(AsyncEvents { efd: EventFd::new()?, raised: AtomicU64::new(0), read: AtomicU64::new(0) }))
    }

    fn raise(&self) {
        self.raised.fetch_add(1, Ordering::AcqRel);
        // A signal can fail only for a closed fd, which this still owns.
        let _ = self.efd.signal();
    }

    /// Reads every async event raised (`ibv_get_async_event` until none is left): the fd
    /// is not readable after, until the next raise. Costs a syscall only when one came.
    fn read_all(&self) {
        let raised = self.raised.load(Ordering::Acquire);
        if raised != self.read.load(Ordering::Acquire) {
            // A raise after the load is drained too, and read again next time (the count
            // it left differs): nothing is missed, an fd is at worst drained twice.
            let _ = self.efd.drain();
            self.read.store(raised, Ordering::Release);
        }
    }
}

#[derive(Debug)]
struct ChannelInner {
    efd: EventFd,
    queue: Mutex<VecDeque<Queued>>,
    /// The tokens of this channel's CQs that overran, not reported yet.
    errors: Mutex<VecDeque<u64>>,
    /// The device's async events, where those errors are raised.
    async_events: Arc<AsyncEvents>,
}

/// A completion channel of a model device: events queued behind a non-blocking eventfd,
/// readable exactly while an event is queued.
#[derive(Clone, Debug)]
pub struct ModelChannel {
    inner: Arc<ChannelInner>,
}

impl ModelChannel {
    /// A channel with no events, of a device of its own: its CQ errors are raised on an
    /// async fd of its own ([`super::ModelDevice::create_channel`] makes one of a device).
    ///
    /// # Errors
    ///
    /// An eventfd could not be made.
    pub fn new() -> io::Result<ModelChannel> {
        ModelChannel::with_async_events(AsyncEvents::new()?)
    }

    pub(crate) fn with_async_events(async_events: Arc<AsyncEvents>) -> io::Result<ModelChannel> {
        Ok(ModelChannel {
            inner: Arc::new(ChannelInner {
                efd: EventFd::new()?,
                queue: Mutex::new(VecDeque::new()),
                errors: Mutex::new(VecDeque::new()),
                async_events,
            }),
        })
    }

    /// The device's async fd (the context's, `ibv_context.async_fd`): readable once one of
    /// its CQs overran, until a channel reads the async events. A waiter sleeps on it beside
    /// the channel's fd.
    pub fn async_fd(&self) -> BorrowedFd<'_> {
        self.inner.async_events.efd.as_fd()
    }

    /// The next CQ error of this channel's CQs, after reading the device's async events.
    fn take_error(&self) -> Option<u64> {
        self.inner.async_events.read_all();
        self.inner.errors.lock().unwrap_or_else(|e| e.into_inner()).pop_front()
    }

    fn queue(&self) -> MutexGuard<'_, VecDeque<Queued>> {
        self.inner.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the oldest event, if any, without blocking (`ibv_get_cq_event` on a
    /// non-blocking channel): a completion event is reported to its CQ's poller before it
    /// is returned, as libibverbs calls the provider's `cq_event`.
    pub fn try_next(&self) -> Option<ChannelEvent> {
        // A CQ error first (an async event of the device), as dvcq reads a device's.
        if let Some(token) = self.take_error() {
            return Some(ChannelEvent { token, kind: ChannelEventKind::CqError });
        }
        let mut q = self.queue();
        let item = q.pop_front();
        if q.is_empty() {
            // The fd is readable exactly while events are queued: the queue lock orders
            // this read against `deliver`'s push-then-signal.
            let _ = self.inner.efd.drain();
        }
        // The device lock is taken after the queue lock is let go: `deliver` runs under the
        // device lock and takes the queue lock.
        drop(q);
        let item = item?;
        if let (ChannelEventKind::Completion, Some(o)) = (item.ev.kind, &item.origin) {
            if let Some(device) = o.device.upgrade() {
                device.cq_event_received(o.cq);
            }
        }
        Some(item.ev)
    }

    /// Completion events queued now (CQ errors are async events: not counted).
    pub fn pending(&self) -> usize {
        self.queue().len()
    }

    /// Queues an event of no CQ of this device (the channel tests' foreign events); a CQ
    /// error goes to the async events, as a device's does.
    #[cfg(test)]
    pub(crate) fn deliver_foreign(&self, ev: ChannelEvent) {
        match ev.kind {
            ChannelEventKind::Completion => self.deliver(ev, None),
            ChannelEventKind::CqError => self.deliver_error(ev.token),
        }
    }

    /// A CQ of this channel overran: an async event of the device.
    fn deliver_error(&self, token: u64) {
        self.inner.errors.lock().unwrap_or_else(|e| e.into_inner()).push_back(token);
        self.inner.async_events.raise();
    }

    fn deliver(&self, ev: ChannelEvent, origin: Option<Origin>) {
        let mut q = self.queue();
        q.push_back(Queued { ev, origin });
        // A signal can fail only for a closed fd, which this channel still owns.
        let _ = self.inner.efd.signal();
    }

    /// Whether both handles are the same channel.
    pub fn same(&self, other: &ModelChannel) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl AsRawFd for ModelChannel {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.efd.as_raw_fd()
    }
}

impl AsFd for ModelChannel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.efd.as_fd()
    }
}

/// An arm the device took from a CQ's doorbells, decoded by the vendor model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ArmRequest {
    /// What it waits for (`Next` or `Solicited`).
    pub(crate) mode: ArmState,
    /// mlx5: the sequence number it carries (2 bits); irdma: `None` (the vendor model
    /// already took it as a new arm by its sequence number).
    pub(crate) sn: Option<u8>,
    /// A CQE lies at or past the armed consumer index.
    pub(crate) pending: bool,
    /// The last solicited or error CQE lies at or past it.
    pub(crate) solicited_pending: bool,
}

/// How a CQ's doorbells were used: arms the device took, stale ones it ignored, and
/// doorbell writes it could not take as arms of the CQ.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArmStats {
    /// Arms taken (each may have fired at once).
    pub taken: u64,
    /// mlx5 arms ignored for a sequence number other than the count of events raised.
    pub stale: u64,
    /// Doorbell writes that were no arm of the CQ (another CQ's number, an unknown
    /// command, no new irdma sequence number), or an mlx5 arm whose doorbell record did
    /// not hold the word the UAR got.
    pub faults: u64,
    /// Completion events raised.
    pub events: u64,
}

/// What a test asked the device to run between a poller's last poll and its next arm
/// ([`super::ModelCq::before_next_arm`]).
pub(crate) struct ArmHook(Box<dyn FnOnce() + Send>);

impl std::fmt::Debug for ArmHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ArmHook")
    }
}

/// One CQ's event state inside the device.
#[derive(Debug, Default)]
pub(crate) struct CqEvents {
    channel: Option<ModelChannel>,
    token: u64,
    origin: Option<Origin>,
    arm: ArmState,
    moderation: Moderation,
    /// CQEs written since the last completion event (moderation by count).
    since_event: u32,
    /// When the oldest CQE waiting for a moderated event was written (moderation by period).
    waiting_since: Option<Instant>,
    /// Events delivered.
    pub(crate) delivered: u64,
    pub(crate) stats: ArmStats,
    error_reported: bool,
    /// Run before the device sees the next arm.
    before_arm: Option<ArmHook>,
    /// Ring slots written by that hook: they landed before the arm doorbell reached the
    /// device, and its check for CQEs past the armed index does not see them.
    pub(crate) unseen: u64,
}

impl CqEvents {
    /// The arm state now.
    pub(crate) fn arm_state(&self) -> ArmState {
        self.arm
    }

    fn fire(&mut self, kind: ChannelEventKind) {
        if let Some(ch) = &self.channel {
            match kind {
                ChannelEventKind::Completion => {
                    ch.deliver(ChannelEvent { token: self.token, kind }, self.origin.clone())
                }
                ChannelEventKind::CqError => ch.deliver_error(self.token),
            }
            self.delivered += 1;
        }
        if kind == ChannelEventKind::Completion {
            // The device raises the event whether or not a channel takes it.
            self.stats.events += 1;
            self.arm = ArmState::Disarmed;
            self.since_event = 0;
            self.waiting_since = None;
        }
    }

    /// After a CQE reached the ring; `solicited` is its SE bit or error status.
    pub(crate) fn on_write(&mut self, solicited: bool) {
        self.since_event = self.since_event.saturating_add(1);
        match self.arm {
            ArmState::Disarmed => {}
            ArmState::Solicited if solicited => self.fire(ChannelEventKind::Completion),
            ArmState::Solicited => {}
            ArmState::Next => self.next_armed_cqe(),
        }
    }

    /// An armed-for-next CQ holds a CQE: fire now, or when moderation allows.
    fn next_armed_cqe(&mut self) {
        let m = self.moderation;
        if m.count == 0 && m.period_us == 0 {
            return self.fire(ChannelEventKind::Completion);
        }
        if m.count != 0 && self.since_event >= u32::from(m.count) {
            return self.fire(ChannelEventKind::Completion);
        }
        self.waiting_since.get_or_insert_with(Instant::now);
        if m.period_us != 0 && self.period_elapsed(Instant::now()) {
            self.fire(ChannelEventKind::Completion);
        }
    }

    fn period_elapsed(&self, now: Instant) -> bool {
        let p = Duration::from_micros(u64::from(self.moderation.period_us));
        self.waiting_since.is_some_and(|t| now.duration_since(t) >= p)
    }

    /// The moderation timer's tick: fires an armed CQ whose period ran out.
    pub(crate) fn tick(&mut self, now: Instant) {
        if self.arm == ArmState::Next && self.moderation.period_us != 0 && self.period_elapsed(now) {
            self.fire(ChannelEventKind::Completion);
        }
    }

    /// An arm the device took from the CQ's doorbells.
    pub(crate) fn arm(&mut self, req: ArmRequest) {
        if req.mode == ArmState::Disarmed {
            return;
        }
        if req.sn.is_some_and(|sn| u64::from(sn & 3) != self.stats.events & 3) {
            self.stats.stale += 1;
            return;
        }
        self.stats.taken += 1;
        // "Any" is never narrowed (irdma's provider never asks: `irdma_uarm_cq`).
        if !(self.arm == ArmState::Next && req.mode == ArmState::Solicited) {
            self.arm = req.mode;
        }
        match self.arm {
            ArmState::Next if req.pending => {
                // CQEs already past the consumer index: they count for moderation as if
                // just written.
                self.waiting_since.get_or_insert_with(Instant::now);
                self.since_event = self.since_event.max(1);
                self.next_armed_cqe();
            }
            ArmState::Solicited if req.solicited_pending => self.fire(ChannelEventKind::Completion),
            _ => {}
        }
    }

    /// A doorbell write the device could not take as an arm of the CQ.
    pub(crate) fn doorbell_fault(&mut self) {
        self.stats.faults += 1;
    }

    /// The CQ overran: one error event on its channel.
    pub(crate) fn on_overrun(&mut self) {
        if !self.error_reported {
            self.error_reported = true;
            self.fire(ChannelEventKind::CqError);
        }
    }

    fn bind(&mut self, channel: ModelChannel, token: u64, origin: Option<Origin>) {
        self.channel = Some(channel);
        self.token = token;
        self.origin = origin;
    }
}

impl super::ModelCq {
    /// Binds the CQ to `channel`: its completion and error events are delivered there,
    /// tagged with `token` (`ibv_create_cq`'s channel and `cq_context`).
    pub fn bind_channel(&self, channel: &ModelChannel, token: u64) {
        self.shared().bind_channel(self.id(), channel.clone(), token);
    }

    /// Requests an event (`ibv_req_notify_cq`) for the next completion or (`solicited`)
    /// the next solicited or error one: the vendor's poller rings the CQ's doorbells as
    /// rdma-core does, and the device takes the arm from them (module docs).
    ///
    /// # Errors
    ///
    /// The poller's, if it has no arm doorbell (never the case on a model device).
    pub fn arm(&self, solicited: bool) -> Result<(), DeviceError> {
        let hook = self.shared().lock().cqs[self.id()].events.before_arm.take();
        if let Some(ArmHook(f)) = hook {
            let before = self.shared().lock().cqs[self.id()].slots_written();
            f();
            let mut dev = self.shared().lock();
            let c = &mut dev.cqs[self.id()];
            c.events.unseen = c.slots_written().saturating_sub(before);
        }
        let mut dev = self.shared().lock();
        let c = &mut dev.cqs[self.id()];
        let armed = c.arm(solicited);
        // Taken by the arm the device saw, or by none (an irdma provider already armed
        // rings nothing): no later arm skips them.
        c.events.unseen = 0;
        armed
    }

    /// Makes the race that a waiter's poll after its arm closes happen, once: when the
    /// poller next arms the CQ, `f` runs after the poller's last poll and before the device
    /// sees the arm doorbell, and the CQEs it makes (posting to a QP of this CQ, say) land in
    /// that window. They raise no event for that arm, as on a device whose arm doorbell
    /// arrives after them and that raises events only for CQEs written after an arm (the
    /// model's check for CQEs already past the armed index skips them). A waiter that sleeps
    /// after arming without polling again sleeps through them.
    ///
    /// `f` runs without the device's lock held, on the arming thread.
    pub fn before_next_arm(&self, f: impl FnOnce() + Send + 'static) {
        self.shared().lock().cqs[self.id()].events.before_arm = Some(ArmHook(Box::new(f)));
    }

    /// The arm state the device latched.
    pub fn arm_state(&self) -> ArmState {
        self.shared().lock().cqs[self.id()].events.arm_state()
    }

    /// How the CQ's doorbells were used so far.
    pub fn arm_stats(&self) -> ArmStats {
        self.shared().lock().cqs[self.id()].events.stats
    }

    /// Events delivered to its channel so far.
    pub fn events_delivered(&self) -> u64 {
        self.shared().lock().cqs[self.id()].events.delivered
    }

    /// Sets CQ moderation (`ibv_modify_cq` with `IBV_CQ_ATTR_MODERATE`).
    ///
    /// # Errors
    ///
    /// [`super::DeviceError::TooLarge`] for a period beyond [`MAX_MODERATION_PERIOD_US`].
    pub fn set_moderation(&self, m: Moderation) -> Result<(), super::DeviceError> {
        if m.period_us > MAX_MODERATION_PERIOD_US {
            return Err(super::DeviceError::TooLarge {
                what: "cq_period (us)",
                value: m.period_us.into(),
                max: MAX_MODERATION_PERIOD_US.into(),
                device: self.shared().vendor.device_name(),
            });
        }
        self.shared().moderate_cq(self.id(), m);
        Ok(())
    }
}

impl super::ModelDevice {
    /// A completion channel of this device: the CQ errors of its CQs are raised on the
    /// device's async fd, which every channel of the device shares.
    ///
    /// # Errors
    ///
    /// An eventfd could not be made.
    pub fn create_channel(&self) -> io::Result<ModelChannel> {
        let async_events = {
            let mut slot = self.shared.async_events.lock().unwrap_or_else(|e| e.into_inner());
            match &*slot {
                Some(a) => a.clone(),
                None => slot.insert(AsyncEvents::new()?).clone(),
            }
        };
        ModelChannel::with_async_events(async_events)
    }
}

/// How often the moderation timer looks at CQs with a period (model choice: 50 µs, finer
/// than any period worth setting and coarse enough not to hold a core).
const TICK: Duration = Duration::from_micros(50);

impl super::Shared {
    /// Binds CQ `id` to `channel`: its events go there, tagged with `token`.
    pub(crate) fn bind_channel(self: &Arc<Self>, id: usize, channel: ModelChannel, token: u64) {
        let origin = Origin { device: Arc::downgrade(self), cq: id };
        self.lock().cqs[id].events.bind(channel, token, Some(origin));
    }

    /// A completion event of CQ `id` was read from its channel.
    pub(crate) fn cq_event_received(&self, id: usize) {
        if let Some(c) = self.lock().cqs.get_mut(id) {
            c.event_received();
        }
    }

    /// Sets CQ `id`'s moderation; starts the timer the period needs.
    pub(crate) fn moderate_cq(self: &Arc<Self>, id: usize, m: Moderation) {
        self.lock().cqs[id].events.moderation = m;
        if m.period_us != 0 {
            let mut started = self.timer.lock().unwrap_or_else(|e| e.into_inner());
            if !*started {
                *started = true;
                spawn_timer(Arc::downgrade(self));
            }
        }
    }
}

/// The device's moderation timer: a thread that fires armed CQs whose period ran out, and
/// ends with the device.
fn spawn_timer(shared: Weak<super::Shared>) {
    std::thread::Builder::new()
        .name("dvcq-model-timer".into())
        .spawn(move || loop {
            std::thread::sleep(TICK);
            let Some(s) = shared.upgrade() else { return };
            let now = Instant::now();
            for c in s.lock().cqs.iter_mut() {
                c.events.tick(now);
            }
        })
        .map(drop)
        .unwrap_or_else(|_| {
            // No thread: periods then fire only when the next CQE is written.
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound() -> (CqEvents, ModelChannel) {
        let ch = ModelChannel::new().unwrap();
        let mut e = CqEvents::default();
        e.bind(ch.clone(), 7, None);
        (e, ch)
    }

    fn drain(ch: &ModelChannel) -> usize {
        std::iter::from_fn(|| ch.try_next()).count()
    }

    /// An arm as the device decodes it: `pending`/`solicited_pending` say what lies past
    /// the armed consumer index; `sn` the mlx5 sequence number.
    fn arm(mode: ArmState, sn: Option<u8>, pending: bool, solicited_pending: bool) -> ArmRequest {
        ArmRequest { mode, sn, pending, solicited_pending }
    }

    #[test]
    fn one_event_per_arm() {
        let (mut e, ch) = bound();
        e.on_write(false);
        assert_eq!(ch.pending(), 0, "disarmed: no event");
        e.arm(arm(ArmState::Next, Some(0), false, false));
        assert_eq!(ch.pending(), 0, "nothing past the consumer index");
        e.on_write(false);
        e.on_write(false);
        assert_eq!(ch.try_next(), Some(ChannelEvent { token: 7, kind: ChannelEventKind::Completion }));
        assert_eq!(ch.try_next(), None, "one event for one arm");
        assert_eq!(e.arm_state(), ArmState::Disarmed);
    }

    #[test]
    fn arming_with_cqes_pending_fires_at_once() {
        let (mut e, ch) = bound();
        e.on_write(false);
        e.arm(arm(ArmState::Next, None, true, false));
        assert_eq!(drain(&ch), 1);
        e.arm(arm(ArmState::Solicited, None, true, false));
        assert_eq!(drain(&ch), 0, "the pending CQE is not solicited");
        e.on_write(true);
        assert_eq!(drain(&ch), 1);
        e.arm(arm(ArmState::Solicited, None, true, true));
        assert_eq!(drain(&ch), 1, "a solicited CQE past the consumer index fires a solicited arm");
        e.arm(arm(ArmState::Solicited, None, false, false));
        assert_eq!(drain(&ch), 0, "consumed: nothing pending");
    }

    /// mlx5's sequence number: an arm counts only with the number of events raised so far
    /// (mod 4); one made before the last event was received is ignored, and counted.
    #[test]
    fn an_mlx5_arm_with_a_stale_sequence_number_is_ignored() {
        let (mut e, ch) = bound();
        e.arm(arm(ArmState::Next, Some(0), true, false));
        assert_eq!((drain(&ch), e.stats.events), (1, 1));
        e.arm(arm(ArmState::Next, Some(0), true, false));
        assert_eq!(drain(&ch), 0, "sn 0 after one event: stale");
        assert_eq!((e.stats.stale, e.arm_state()), (1, ArmState::Disarmed));
        e.arm(arm(ArmState::Next, Some(1), false, false));
        assert_eq!(e.arm_state(), ArmState::Next, "sn 1 is taken");
        for i in 2..6u8 {
            e.on_write(false);
            assert_eq!(drain(&ch), 1);
            e.arm(arm(ArmState::Next, Some(i & 3), false, false));
            assert_eq!(e.arm_state(), ArmState::Next, "sn {i} & 3 after {i} events");
        }
        assert_eq!((e.stats.taken, e.stats.stale), (6, 1));
    }

    #[test]
    fn next_is_never_narrowed() {
        let (mut e, ch) = bound();
        e.arm(arm(ArmState::Next, None, false, false));
        e.arm(arm(ArmState::Solicited, None, false, false));
        assert_eq!(e.arm_state(), ArmState::Next);
        e.on_write(false);
        assert_eq!(drain(&ch), 1);
    }

    #[test]
    fn moderation_by_count() {
        let (mut e, ch) = bound();
        e.moderation = Moderation { count: 3, period_us: 0 };
        e.arm(arm(ArmState::Next, None, false, false));
        e.on_write(false);
        e.on_write(false);
        assert_eq!(drain(&ch), 0);
        e.on_write(false);
        assert_eq!(drain(&ch), 1);
    }

    #[test]
    fn moderation_by_period_fires_on_tick() {
        let (mut e, ch) = bound();
        e.moderation = Moderation { count: 100, period_us: 200 };
        e.arm(arm(ArmState::Next, None, false, false));
        e.on_write(false);
        e.tick(Instant::now());
        assert_eq!(drain(&ch), 0, "the period has not run out");
        e.tick(Instant::now() + Duration::from_micros(300));
        assert_eq!(drain(&ch), 1);
    }

    use crate::model_device::cq::CqHw;
    use crate::model_device::{ModelCq, ModelDevice, ModelVendor};
    use dvcq_uapi::mlx5::doorbell::{arm_word, uar_doorbell, ARM_DB, UAR_CQ_DOORBELL};

    fn device_cq(vendor: ModelVendor) -> (ModelDevice, ModelCq, ModelChannel) {
        let dev = ModelDevice::new(vendor);
        let cq = dev.create_cq(15).unwrap();
        let ch = ModelChannel::new().unwrap();
        cq.bind_channel(&ch, 9);
        (dev, cq, ch)
    }

    fn push_mlx5(cq: &ModelCq, n: usize) {
        for _ in 0..n {
            let e = dvcq_mlx5_dv::model::build::req(0x108, 0, 0x0a, 0);
            cq.shared().lock().cqs[cq.id()].push_mlx5(&e, None);
        }
    }

    fn uar_bytes(cq: &ModelCq) -> [u8; 8] {
        let f = cq.shared().lock();
        let CqHw::Mlx5 { model, .. } = &f.cqs[cq.id()].hw else { unreachable!() };
        model.doorbell_bytes().0
    }

    /// The mlx5 device arms from what its UAR got: sn, command and ci, with the events
    /// raised counting the sequence; reading an event from the channel advances the
    /// poller's sn (mlx5_cq_event), so the next arm is taken.
    #[test]
    fn the_mlx5_device_takes_its_arms_from_the_uar() {
        let (_dev, mut cq, ch) = device_cq(ModelVendor::Mlx5);
        push_mlx5(&cq, 2);
        cq.arm(false).unwrap();
        assert_eq!(uar_bytes(&cq), [0, 0, 0, 0, 0, 0, 4, 6], "sn 0, next, ci 0, cqn 0x406");
        assert_eq!(ch.pending(), 1, "two CQEs past ci 0: fired at once");
        cq.arm(false).unwrap();
        assert_eq!(cq.arm_stats().stale, 1, "armed again before the event was read: stale sn, ignored");
        assert_eq!(ch.pending(), 1);
        assert!(ch.try_next().is_some());
        let mut wcs = [dvcq_provider::Completion::default(); 4];
        assert_eq!(cq.poll(&mut wcs).len(), 2);
        cq.arm(true).unwrap();
        assert_eq!(uar_bytes(&cq), [0x11, 0, 0, 2, 0, 0, 4, 6], "sn 1 after one event, solicited, ci 2");
        assert_eq!((ch.pending(), cq.arm_state()), (0, ArmState::Solicited));
        cq.arm(false).unwrap();
        assert_eq!(cq.arm_state(), ArmState::Next);
        push_mlx5(&cq, 1);
        assert_eq!(ch.pending(), 1);
        let st = cq.arm_stats();
        assert_eq!((st.taken, st.stale, st.faults, st.events), (3, 1, 0, 2));
    }

    /// Arming at rdma-core's stale `cons_index` (what `mlx5_arm_cq` would send on a CQ dvcq
    /// polls): the device sees CQEs past that index and fires at once, though the poller
    /// consumed them all.
    #[test]
    fn an_mlx5_arm_at_a_stale_consumer_index_fires_at_once() {
        let (_dev, mut cq, ch) = device_cq(ModelVendor::Mlx5);
        push_mlx5(&cq, 3);
        let mut wcs = [dvcq_provider::Completion::default(); 4];
        assert_eq!(cq.poll(&mut wcs).len(), 3);
        let mut f = cq.shared().lock();
        let c = &mut f.cqs[cq.id()];
        let CqHw::Mlx5 { model, .. } = &c.hw else { unreachable!() };
        let word = arm_word(0, false, 0);
        model.dbrec().doorbell(ARM_DB * 4).unwrap().store_be32(word, std::sync::atomic::Ordering::Release);
        model.uar().doorbell_register(UAR_CQ_DOORBELL).unwrap().ring64(uar_doorbell(word, 0x406));
        c.doorbell_rung();
        drop(f);
        assert_eq!(ch.pending(), 1);
        // A UAR write for another CQ, or without the record written first, is a fault.
        let mut f = cq.shared().lock();
        let c = &mut f.cqs[cq.id()];
        let CqHw::Mlx5 { model, .. } = &c.hw else { unreachable!() };
        model.uar().doorbell_register(UAR_CQ_DOORBELL).unwrap().ring64(uar_doorbell(word, 0x407));
        c.doorbell_rung();
        assert_eq!(c.events.stats.faults, 1);
    }

    /// irdma: the poller's bookkeeping decides what reaches the device; reading the event
    /// runs `irdma_cq_event`, which arms again for a request skipped while armed.
    #[test]
    fn the_irdma_device_takes_the_arms_the_provider_bookkeeping_sends() {
        let (_dev, cq, ch) = device_cq(ModelVendor::Irdma);
        let push = |c: dvcq_e810_dv::model::ModelCqe| cq.shared().lock().cqs[cq.id()].push_irdma(&c);
        cq.arm(true).unwrap();
        push(dvcq_e810_dv::model::ModelCqe::send(1, 3, 0, 0));
        assert_eq!((ch.pending(), cq.arm_state()), (0, ArmState::Solicited), "not solicited: no event");
        cq.arm(true).unwrap();
        assert_eq!(cq.arm_stats().taken, 1, "armed: the solicited request is skipped");
        push(dvcq_e810_dv::model::ModelCqe::send(1, 3, 1, 0).solicited());
        assert_eq!(ch.pending(), 1);
        assert!(ch.try_next().is_some());
        // The skipped request became an arm for any completion, which the two CQEs in the
        // ring fire at once.
        assert_eq!(cq.arm_stats().taken, 2);
        assert_eq!(ch.pending(), 1);
        assert!(ch.try_next().is_some());
        cq.arm(false).unwrap();
        assert_eq!(cq.arm_stats(), ArmStats { taken: 3, stale: 0, faults: 0, events: 3 });
    }

    /// An overrun is an async event of the device: its async fd becomes readable, not the
    /// channel's; reading the channel reports it, once, and drains that fd.
    #[test]
    fn overrun_reports_once_even_disarmed() {
        use dvcq_provider::eventfd::wait_readable;
        let (mut e, ch) = bound();
        e.on_overrun();
        e.on_overrun();
        assert!(!wait_readable(ch.as_fd(), Some(Duration::ZERO)).unwrap(), "not on the channel's fd");
        assert!(wait_readable(ch.async_fd(), Some(Duration::ZERO)).unwrap(), "on the async fd");
        assert_eq!(ch.try_next(), Some(ChannelEvent { token: 7, kind: ChannelEventKind::CqError }));
        assert!(!wait_readable(ch.async_fd(), Some(Duration::ZERO)).unwrap(), "read: drained");
        assert_eq!(ch.try_next(), None);
        assert_eq!(e.stats.events, 0, "an error event is no completion event");
    }
}
