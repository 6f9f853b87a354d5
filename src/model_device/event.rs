//! Completion events of a model device: the hardware's arm rules per CQ and the completion
//! channels the events are delivered on, through an eventfd (shared/spec/mlx5.md §6, §11,
//! §15.6-7; shared/spec/irdma.md §3).
//!
//! # The rules (both vendors)
//!
//! - A CQ is disarmed, armed for the next completion, or armed for the next solicited one.
//!   An arm is one-shot: it produces at most one event and leaves the CQ disarmed.
//! - Armed for the next completion, any CQE written fires. Armed solicited-only, a CQE fires
//!   when it carries the solicited-event bit or an error status (`ibv_req_notify_cq(3)`).
//! - Arming while a qualifying CQE past the consumer index is already in the ring fires at
//!   once (the PRM-style inference of mlx5.md §6; the irdma hardware is taken to behave
//!   alike, which its provider's re-arm rule assumes).
//! - Moderation (`cq_count`): armed for the next completion, an event waits until `count`
//!   CQEs were written since the last event; `cq_period` (µs) fires an armed CQ holding
//!   CQEs once that long passed since the first of them, from a timer
//!   ([`ModelChannel`]'s thread). Solicited-only arms are not moderated (model choice: the
//!   mlx5 `scqe_break_moderation` behaviour).
//! - An overrun raises a CQ error event on the CQ's channel, armed or not, once.
//!
//! Events carry the token the CQ was bound with, so one channel serves many CQs and each
//! event says whose it is.

use super::cq::CqState;
use dvcq_provider::eventfd::EventFd;
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
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

#[derive(Debug)]
struct ChannelInner {
    efd: EventFd,
    queue: Mutex<VecDeque<ChannelEvent>>,
}

/// A completion channel of a model device: events queued behind a non-blocking eventfd,
/// readable exactly while an event is queued.
#[derive(Clone, Debug)]
pub struct ModelChannel {
    inner: Arc<ChannelInner>,
}

impl ModelChannel {
    /// A channel with no events.
    ///
    /// # Errors
    ///
    /// The eventfd could not be made.
    pub fn new() -> io::Result<ModelChannel> {
        Ok(ModelChannel { inner: Arc::new(ChannelInner { efd: EventFd::new()?, queue: Mutex::new(VecDeque::new()) }) })
    }

    fn queue(&self) -> MutexGuard<'_, VecDeque<ChannelEvent>> {
        self.inner.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the oldest event, if any, without blocking.
    pub fn try_next(&self) -> Option<ChannelEvent> {
        let mut q = self.queue();
        let ev = q.pop_front();
        if q.is_empty() {
            // The fd is readable exactly while events are queued: the queue lock orders
            // this read against `deliver`'s push-then-signal.
            let _ = self.inner.efd.drain();
        }
        ev
    }

    /// Events queued now.
    pub fn pending(&self) -> usize {
        self.queue().len()
    }

    pub(crate) fn deliver(&self, ev: ChannelEvent) {
        let mut q = self.queue();
        q.push_back(ev);
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

/// One CQ's event state inside the device.
#[derive(Debug, Default)]
pub(crate) struct CqEvents {
    channel: Option<ModelChannel>,
    token: u64,
    arm: ArmState,
    /// Position (in CQEs written) of the last CQE that qualifies a solicited-only arm.
    last_solicited: Option<u64>,
    /// CQEs the poller has consumed.
    pub(crate) consumed: u64,
    moderation: Moderation,
    /// CQEs written since the last completion event (moderation by count).
    since_event: u32,
    /// When the oldest CQE waiting for a moderated event was written (moderation by period).
    waiting_since: Option<Instant>,
    /// Events delivered.
    pub(crate) delivered: u64,
    error_reported: bool,
}

impl CqEvents {
    /// The arm state now.
    pub(crate) fn arm_state(&self) -> ArmState {
        self.arm
    }

    fn fire(&mut self, kind: ChannelEventKind) {
        if let Some(ch) = &self.channel {
            ch.deliver(ChannelEvent { token: self.token, kind });
            self.delivered += 1;
        }
        if kind == ChannelEventKind::Completion {
            self.arm = ArmState::Disarmed;
            self.since_event = 0;
            self.waiting_since = None;
        }
    }

    /// After the CQE at position `seq` (counted in CQEs written) reached the ring;
    /// `solicited` is its SE bit or error status.
    pub(crate) fn on_write(&mut self, seq: u64, solicited: bool) {
        if solicited {
            self.last_solicited = Some(seq);
        }
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

    /// An arm request with `written` CQEs in the ring so far.
    pub(crate) fn arm(&mut self, mode: ArmState, written: u64) {
        if mode == ArmState::Disarmed {
            return;
        }
        // irdma's provider upgrades a solicited arm to "any" and never the other way
        // (spec irdma §3.3); on mlx5 the last doorbell wins. Both: "any" is never narrowed.
        if !(self.arm == ArmState::Next && mode == ArmState::Solicited) {
            self.arm = mode;
        }
        let pending = written > self.consumed;
        match self.arm {
            ArmState::Next if pending => {
                // CQEs already past the consumer index: they count for moderation as if
                // just written.
                self.waiting_since.get_or_insert_with(Instant::now);
                self.since_event = self.since_event.max(1);
                self.next_armed_cqe();
            }
            ArmState::Solicited if self.last_solicited.is_some_and(|s| s >= self.consumed) => {
                self.fire(ChannelEventKind::Completion)
            }
            _ => {}
        }
    }

    /// The CQ overran: one error event on its channel.
    pub(crate) fn on_overrun(&mut self) {
        if !self.error_reported {
            self.error_reported = true;
            self.fire(ChannelEventKind::CqError);
        }
    }

    fn bind(&mut self, channel: ModelChannel, token: u64) {
        self.channel = Some(channel);
        self.token = token;
    }
}

impl super::ModelCq {
    /// Binds the CQ to `channel`: its completion and error events are delivered there,
    /// tagged with `token` (`ibv_create_cq`'s channel and `cq_context`).
    pub fn bind_channel(&self, channel: &ModelChannel, token: u64) {
        self.shared().bind_channel(self.id(), channel.clone(), token);
    }

    /// Requests an event (`ibv_req_notify_cq`): `ArmState::Next` or `ArmState::Solicited`
    /// (`Disarmed` does nothing: an arm cannot be withdrawn).
    pub fn arm(&self, mode: ArmState) {
        self.shared().arm_cq(self.id(), mode);
    }

    /// The arm state now.
    pub fn arm_state(&self) -> ArmState {
        self.shared().lock().cqs[self.id()].events.arm_state()
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

/// How often the moderation timer looks at CQs with a period (model choice: 50 µs, finer
/// than any period worth setting and coarse enough not to hold a core).
const TICK: Duration = Duration::from_micros(50);

impl super::Shared {
    /// Binds CQ `id` to `channel`: its events go there, tagged with `token`.
    pub(crate) fn bind_channel(&self, id: usize, channel: ModelChannel, token: u64) {
        self.lock().cqs[id].events.bind(channel, token);
    }

    /// An arm request on CQ `id`.
    pub(crate) fn arm_cq(&self, id: usize, mode: ArmState) {
        let mut f = self.lock();
        let c: &mut CqState = &mut f.cqs[id];
        c.events.arm(mode, c.written);
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
        e.bind(ch.clone(), 7);
        (e, ch)
    }

    fn drain(ch: &ModelChannel) -> usize {
        std::iter::from_fn(|| ch.try_next()).count()
    }

    #[test]
    fn one_event_per_arm() {
        let (mut e, ch) = bound();
        e.on_write(0, false);
        assert_eq!(ch.pending(), 0, "disarmed: no event");
        e.consumed = 1;
        e.arm(ArmState::Next, 1);
        assert_eq!(ch.pending(), 0, "nothing past the consumer index");
        e.on_write(1, false);
        e.on_write(2, false);
        assert_eq!(ch.try_next(), Some(ChannelEvent { token: 7, kind: ChannelEventKind::Completion }));
        assert_eq!(ch.try_next(), None, "one event for one arm");
        assert_eq!(e.arm_state(), ArmState::Disarmed);
    }

    #[test]
    fn arming_with_cqes_pending_fires_at_once() {
        let (mut e, ch) = bound();
        e.on_write(0, false);
        e.arm(ArmState::Next, 1);
        assert_eq!(drain(&ch), 1);
        e.arm(ArmState::Solicited, 1);
        assert_eq!(drain(&ch), 0, "the pending CQE is not solicited");
        e.on_write(1, true);
        assert_eq!(drain(&ch), 1);
        e.arm(ArmState::Solicited, 2);
        assert_eq!(drain(&ch), 1, "a solicited CQE past the consumer index fires a solicited arm");
        e.consumed = 2;
        e.arm(ArmState::Solicited, 2);
        assert_eq!(drain(&ch), 0, "consumed: nothing pending");
    }

    #[test]
    fn moderation_by_count() {
        let (mut e, ch) = bound();
        e.moderation = Moderation { count: 3, period_us: 0 };
        e.arm(ArmState::Next, 0);
        e.on_write(0, false);
        e.on_write(1, false);
        assert_eq!(drain(&ch), 0);
        e.on_write(2, false);
        assert_eq!(drain(&ch), 1);
    }

    #[test]
    fn moderation_by_period_fires_on_tick() {
        let (mut e, ch) = bound();
        e.moderation = Moderation { count: 100, period_us: 200 };
        e.arm(ArmState::Next, 0);
        e.on_write(0, false);
        e.tick(Instant::now());
        assert_eq!(drain(&ch), 0, "the period has not run out");
        e.tick(Instant::now() + Duration::from_micros(300));
        assert_eq!(drain(&ch), 1);
    }

    #[test]
    fn overrun_reports_once_even_disarmed() {
        let (mut e, ch) = bound();
        e.on_overrun();
        e.on_overrun();
        assert_eq!(ch.try_next(), Some(ChannelEvent { token: 7, kind: ChannelEventKind::CqError }));
        assert_eq!(ch.try_next(), None);
    }
}
