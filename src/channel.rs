//! The completion channel: where the events of the CQs made on it arrive, as a
//! non-blocking fd, and how they reach the CQ each belongs to.
//!
//! # Routing
//!
//! Several CQs, each waited on by its own thread or task, may share one channel. The first
//! thread ([`crate::Cq::wait`]) that finds nobody reading the fd becomes the reader: it
//! sleeps on the fd, reads every event queued, files each under its CQ, and wakes the other
//! waiters, who find their events filed. An async waiter (`AsyncCq`) never blocks:
//! it takes its CQ's filed events, and reads the fd (without sleeping, under the router's
//! lock) only while no thread is the reader; it files what it reads for the others and
//! wakes them. A thread's reading turn ends by waking every async waiter, which may then read
//! in its place. So no event is read by a waiter that then drops it, and no waiter sleeps on
//! an fd another has just drained.
//!
//! Layer: below `cq` (a CQ holds its [`Binding`] to a channel) and above `model_device`,
//! `sys`, `error` and `id`, which it may import; it names no CQ, context or QP. The public
//! types are re-exported by [`crate::event`], the module a program reads.

use crate::error::Error;
use crate::id::CqId;
use crate::model_device::{ChannelEventKind, ModelChannel};
use crate::sys;
use dvcq_provider::eventfd::{wait_any_readable, wait_readable};
use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::Waker;
use std::time::{Duration, Instant};

/// What an event says about its CQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CqEventKind {
    /// The armed CQ has a completion (or, armed solicited-only, a solicited or error one).
    Completion,
    /// The CQ overran and is in error (`IBV_EVENT_CQ_ERR`). On rdma-core devices it is an
    /// asynchronous event of the context, which dvcq reads (on contexts it opened) and
    /// reports here for a CQ made on the channel.
    CqError,
}

/// One event read from a channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CqEvent {
    /// The CQ it belongs to ([`crate::Cq::id`]).
    pub cq: CqId,
    /// What happened.
    pub kind: CqEventKind,
}

#[derive(Debug)]
pub(crate) enum Source {
    Model(ModelChannel),
    Verbs(Arc<sys::cq::CompChannel>),
}

/// Events read and not yet taken by their CQ's waiter.
#[derive(Debug, Default)]
struct Filed {
    completions: u32,
    errors: u32,
    /// The task of an async waiter of the CQ: woken when an event is filed for it and when
    /// a thread's reading turn ends.
    waker: Option<Waker>,
}

impl Filed {
    /// The oldest kind filed, errors first.
    fn take(&mut self) -> Option<CqEventKind> {
        if self.errors > 0 {
            self.errors -= 1;
            return Some(CqEventKind::CqError);
        }
        if self.completions > 0 {
            self.completions -= 1;
            return Some(CqEventKind::Completion);
        }
        None
    }
}

#[derive(Debug, Default)]
struct Router {
    /// Per CQ bound to the channel (and only those: an event of a CQ that is gone, or of
    /// one dvcq did not make, is dropped when read).
    filed: HashMap<CqId, Filed>,
    /// A thread is sleeping on the fd (and will wake the others).
    reading: bool,
}

impl Router {
    /// Files `e` under its CQ and wakes that CQ's async waiter; false for a CQ not bound.
    fn file(&mut self, e: CqEvent) -> bool {
        let Some(f) = self.filed.get_mut(&e.cq) else { return false };
        match e.kind {
            CqEventKind::Completion => f.completions = f.completions.saturating_add(1),
            CqEventKind::CqError => f.errors = f.errors.saturating_add(1),
        }
        if let Some(w) = f.waker.take() {
            w.wake();
        }
        true
    }

    /// Wakes every async waiter (a reading turn ended: one of them may read now).
    fn wake_async_waiters(&mut self) {
        for f in self.filed.values_mut() {
            if let Some(w) = f.waker.take() {
                w.wake();
            }
        }
    }
}

#[derive(Debug)]
struct Shared {
    source: Source,
    device: String,
    router: Mutex<Router>,
    filed_cv: Condvar,
}

/// A completion channel (`ibv_create_comp_channel` on a device, an eventfd on a model).
///
/// Cloning gives another handle to the same channel. Its fd ([`AsRawFd`], [`AsFd`]) is
/// non-blocking and becomes readable when an event is queued; read events with
/// [`CompletionChannel::try_next_event`], or let [`crate::Cq::wait`] do it.
#[derive(Clone, Debug)]
pub struct CompletionChannel {
    shared: Arc<Shared>,
}

impl CompletionChannel {
    pub(crate) fn new(source: Source, device: &str) -> CompletionChannel {
        CompletionChannel {
            shared: Arc::new(Shared {
                source,
                device: device.to_string(),
                router: Mutex::new(Router::default()),
                filed_cv: Condvar::new(),
            }),
        }
    }

    pub(crate) fn source(&self) -> &Source {
        &self.shared.source
    }

    /// The device it was made on.
    pub fn device(&self) -> &str {
        &self.shared.device
    }

    /// Whether two handles are the same channel.
    pub fn same(&self, other: &CompletionChannel) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    fn router(&self) -> MutexGuard<'_, Router> {
        self.shared.router.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn error(&self, what: String) -> Error {
        Error::Event { device: self.shared.device.clone(), what }
    }

    /// Reads one event from the source, without blocking.
    fn read_one(&self) -> Result<Option<CqEvent>, Error> {
        match &self.shared.source {
            Source::Model(m) => Ok(m.try_next().map(|e| CqEvent {
                cq: CqId(e.token),
                kind: match e.kind {
                    ChannelEventKind::Completion => CqEventKind::Completion,
                    ChannelEventKind::CqError => CqEventKind::CqError,
                },
            })),
            Source::Verbs(v) => {
                // A CQ error is an async event of the context (`sys::async_event`).
                if let Some(token) = v.take_cq_error() {
                    return Ok(Some(CqEvent { cq: CqId(token), kind: CqEventKind::CqError }));
                }
                match v.try_get_event() {
                    Ok(t) => Ok(t.map(|token| CqEvent { cq: CqId(token), kind: CqEventKind::Completion })),
                    Err(e) => Err(Error::Verbs { device: self.shared.device.clone(), source: e }),
                }
            }
        }
    }

    /// The next event, without blocking (`ibv_get_cq_event` on a non-blocking channel);
    /// `None` when none is queued. For an application that sleeps on the fd itself (epoll,
    /// mio, tokio) and routes events by [`CqEvent::cq`]. Events taken here are not seen by
    /// [`crate::Cq::wait`] on the same channel: use one or the other per channel.
    ///
    /// Events are acknowledged in batches, and all of a CQ's before it is destroyed.
    ///
    /// # Errors
    ///
    /// rdma-core failed to read the channel.
    pub fn try_next_event(&self) -> Result<Option<CqEvent>, Error> {
        self.read_one()
    }

    /// The next event, sleeping up to `timeout` (`None`: no limit) for one.
    ///
    /// # Errors
    ///
    /// As [`CompletionChannel::try_next_event`], or the fd failing.
    pub fn next_event(&self, timeout: Option<Duration>) -> Result<Option<CqEvent>, Error> {
        let deadline = deadline_after(Instant::now(), timeout);
        loop {
            if let Some(e) = self.read_one()? {
                return Ok(Some(e));
            }
            let left = match deadline {
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(l) if !l.is_zero() => Some(l),
                    _ => return Ok(None),
                },
                None => None,
            };
            self.sleep(left)?;
        }
    }

    /// The context's async fd, where a CQ error is reported (`IBV_EVENT_CQ_ERR`), when
    /// dvcq reads it: a waiter sleeps on it beside the channel's fd. Every model has one.
    pub(crate) fn async_fd(&self) -> Option<BorrowedFd<'_>> {
        match &self.shared.source {
            Source::Model(m) => Some(m.async_fd()),
            Source::Verbs(v) => v.async_fd(),
        }
    }

    /// Sleeps until the channel's fd or the context's async fd (a CQ error event) is
    /// readable, or `left` passes.
    fn sleep(&self, left: Option<Duration>) -> Result<(), Error> {
        let woke = match self.async_fd() {
            Some(fd) => wait_any_readable([self.as_fd(), fd], left),
            None => wait_readable(self.as_fd(), left),
        };
        woke.map(drop).map_err(|e| self.error(format!("waiting on the channel fd: {e}")))
    }

    /// Sleeps until an event for `cq` has been read (by this thread or another waiter on
    /// the channel) or `deadline` passes; returns the event's kind, errors first, or `None`
    /// at the deadline.
    pub(crate) fn wait_for(&self, cq: CqId, deadline: Option<Instant>) -> Result<Option<CqEventKind>, Error> {
        let mut r = self.router();
        loop {
            if let Some(kind) = r.filed.get_mut(&cq).and_then(Filed::take) {
                return Ok(Some(kind));
            }
            let left = match deadline {
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(l) if !l.is_zero() => Some(l),
                    _ => return Ok(None),
                },
                None => None,
            };
            if r.reading {
                r = match left {
                    Some(l) => self.shared.filed_cv.wait_timeout(r, l).unwrap_or_else(|e| e.into_inner()).0,
                    None => self.shared.filed_cv.wait(r).unwrap_or_else(|e| e.into_inner()),
                };
                continue;
            }
            r.reading = true;
            drop(r);
            let read = self.read_and_file(left);
            r = self.router();
            r.reading = false;
            self.shared.filed_cv.notify_all();
            r.wake_async_waiters();
            read?;
        }
    }

    /// An async waiter's turn, which never blocks: an event filed for `cq`, errors first;
    /// else, unless a thread is the reader, reads every event queued, files the other CQs'
    /// (waking their waiters) and returns `cq`'s first. `None`: nothing for `cq` yet; its
    /// task (`waker`) is woken when an event is filed for it or a thread's reading turn
    /// ends, and sleeps meanwhile on the channel's and the async fd.
    #[cfg(feature = "tokio")]
    pub(crate) fn poll_for(&self, cq: CqId, waker: &Waker) -> Result<Option<CqEventKind>, Error> {
        let mut r = self.router();
        let not_bound = || self.error(format!("{cq} is not bound to this channel"));
        let f = r.filed.get_mut(&cq).ok_or_else(not_bound)?;
        f.waker = None;
        if let Some(kind) = f.take() {
            return Ok(Some(kind));
        }
        if !r.reading {
            // Under the router's lock no thread takes the reader's turn: nobody else reads.
            let mut others = false;
            while let Some(e) = self.read_one()? {
                let filed = r.file(e);
                others |= filed && e.cq != cq;
            }
            if others {
                self.shared.filed_cv.notify_all();
            }
        }
        let f = r.filed.get_mut(&cq).ok_or_else(not_bound)?;
        let kind = f.take();
        if kind.is_none() {
            f.waker = Some(waker.clone());
        }
        Ok(kind)
    }

    /// The reader's turn: sleep on the fd up to `left`, then file every queued event.
    fn read_and_file(&self, left: Option<Duration>) -> Result<(), Error> {
        let mut got = Vec::new();
        while let Some(e) = self.read_one()? {
            got.push(e);
        }
        if got.is_empty() {
            self.sleep(left)?;
            while let Some(e) = self.read_one()? {
                got.push(e);
            }
        }
        if got.is_empty() {
            return Ok(());
        }
        let mut r = self.router();
        for e in got {
            r.file(e);
        }
        Ok(())
    }

    /// Starts filing the events of `cq`.
    fn join(&self, cq: CqId) {
        self.router().filed.insert(cq, Filed::default());
    }

    /// Drops what was filed for a CQ that is going away, and files none of its events
    /// read later.
    fn forget(&self, cq: CqId) {
        self.router().filed.remove(&cq);
    }

    /// Events read from the device and not yet acknowledged to rdma-core (0 on a model,
    /// whose events need no acknowledgement).
    pub fn unacked_events(&self) -> u64 {
        match &self.shared.source {
            Source::Model(_) => 0,
            Source::Verbs(v) => v.unacked(),
        }
    }
}

impl AsRawFd for CompletionChannel {
    fn as_raw_fd(&self) -> RawFd {
        self.as_fd().as_raw_fd()
    }
}

impl AsFd for CompletionChannel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match &self.shared.source {
            Source::Model(m) => m.as_fd(),
            Source::Verbs(v) => v.as_fd(),
        }
    }
}

/// A CQ's membership of a channel: its events are filed from when it is made; what was
/// filed for it is forgotten when the CQ goes.
#[derive(Debug)]
pub(crate) struct Binding {
    pub(crate) channel: CompletionChannel,
    pub(crate) cq: CqId,
}

impl Binding {
    pub(crate) fn new(channel: &CompletionChannel, cq: CqId) -> Binding {
        channel.join(cq);
        Binding { channel: channel.clone(), cq }
    }
}

impl Drop for Binding {
    fn drop(&mut self) {
        self.channel.forget(self.cq);
    }
}

/// The instant `timeout` after `start`; `None` (no deadline) for no timeout, and for one so
/// long that the instant cannot be represented (`Duration::MAX`): it never comes.
pub(crate) fn deadline_after(start: Instant, timeout: Option<Duration>) -> Option<Instant> {
    timeout.and_then(|t| start.checked_add(t))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model_device::ChannelEvent;
    use std::thread;

    fn channel() -> (CompletionChannel, ModelChannel) {
        let m = ModelChannel::new().unwrap();
        (CompletionChannel::new(Source::Model(m.clone()), "model-test"), m)
    }

    fn deliver(m: &ModelChannel, cq: CqId, kind: ChannelEventKind) {
        m.deliver_foreign(ChannelEvent { token: cq.get(), kind });
    }

    fn soon(ms: u64) -> Option<Instant> {
        Some(Instant::now() + Duration::from_millis(ms))
    }

    impl CompletionChannel {
        /// What is filed for `cq`: (completions, errors); `None` when it is not bound.
        fn filed(&self, cq: CqId) -> Option<(u32, u32)> {
            self.router().filed.get(&cq).map(|f| (f.completions, f.errors))
        }
    }

    #[test]
    fn events_are_filed_under_their_cq_and_taken_by_its_waiter() {
        let (ch, m) = channel();
        let (a, b, c) = (CqId(1), CqId(2), CqId(3));
        let _bound = [Binding::new(&ch, a), Binding::new(&ch, b), Binding::new(&ch, c)];
        deliver(&m, b, ChannelEventKind::Completion);
        deliver(&m, a, ChannelEventKind::Completion);
        deliver(&m, c, ChannelEventKind::CqError);
        deliver(&m, b, ChannelEventKind::Completion);
        assert_eq!(ch.wait_for(a, soon(5000)).unwrap(), Some(CqEventKind::Completion));
        assert_eq!(m.pending(), 0, "the reader read every queued event");
        assert_eq!((ch.filed(b), ch.filed(c)), (Some((2, 0)), Some((0, 1))), "filed under their CQs");
        assert_eq!(ch.wait_for(b, soon(5000)).unwrap(), Some(CqEventKind::Completion));
        assert_eq!(ch.wait_for(b, soon(5000)).unwrap(), Some(CqEventKind::Completion));
        assert_eq!(ch.wait_for(c, soon(5000)).unwrap(), Some(CqEventKind::CqError));
        let t = Instant::now();
        assert_eq!(ch.wait_for(b, soon(20)).unwrap(), None, "each event is taken once");
        assert!(t.elapsed() >= Duration::from_millis(20));
        // An error is reported before completions filed with it.
        deliver(&m, a, ChannelEventKind::Completion);
        deliver(&m, a, ChannelEventKind::CqError);
        assert_eq!(ch.wait_for(a, soon(5000)).unwrap(), Some(CqEventKind::CqError));
        assert_eq!(ch.wait_for(a, soon(5000)).unwrap(), Some(CqEventKind::Completion));
    }

    /// The waiter sleeping on the fd reads another CQ's event: it files it and wakes that
    /// CQ's waiter, and sleeps on for its own.
    #[test]
    fn the_reader_wakes_the_waiter_whose_event_it_read() {
        let (ch, m) = channel();
        let (a, b) = (CqId(1), CqId(2));
        let _bound = [Binding::new(&ch, a), Binding::new(&ch, b)];
        let waiter = |cq| {
            let ch = ch.clone();
            thread::spawn(move || (ch.wait_for(cq, soon(30_000)).unwrap(), Instant::now()))
        };
        let wa = waiter(a);
        thread::sleep(Duration::from_millis(50));
        assert!(ch.router().reading, "the first waiter sleeps on the fd");
        let wb = waiter(b);
        thread::sleep(Duration::from_millis(50));
        let sent = Instant::now();
        deliver(&m, b, ChannelEventKind::Completion);
        let (got, when) = wb.join().unwrap();
        assert_eq!(got, Some(CqEventKind::Completion));
        assert!(when - sent < Duration::from_secs(5), "woken by the reader, not by its timeout");
        thread::sleep(Duration::from_millis(20));
        assert!(!wa.is_finished(), "another CQ's event does not end this wait");
        deliver(&m, a, ChannelEventKind::Completion);
        assert_eq!(wa.join().unwrap().0, Some(CqEventKind::Completion));
    }

    /// Eight waiters, one per CQ, each taking 200 events delivered in a shuffled order: each
    /// gets exactly its own, and nothing stays filed.
    #[test]
    fn many_waiters_each_get_exactly_their_own_events() {
        const CQS: u64 = 8;
        const PER: u32 = 200;
        let (ch, m) = channel();
        let ids: Vec<CqId> = (1..=CQS).map(CqId).collect();
        let _bound: Vec<Binding> = ids.iter().map(|&cq| Binding::new(&ch, cq)).collect();
        let waiters: Vec<_> = ids
            .iter()
            .map(|&cq| {
                let ch = ch.clone();
                thread::spawn(move || {
                    let mut got = 0;
                    while got < PER && ch.wait_for(cq, soon(10_000)).unwrap() == Some(CqEventKind::Completion) {
                        got += 1;
                    }
                    got
                })
            })
            .collect();
        let mut order: Vec<CqId> = ids.iter().flat_map(|&cq| std::iter::repeat_n(cq, PER as usize)).collect();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in (1..order.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            order.swap(i, (x % (i as u64 + 1)) as usize);
        }
        for (i, &cq) in order.iter().enumerate() {
            deliver(&m, cq, ChannelEventKind::Completion);
            if i % 16 == 0 {
                thread::yield_now();
            }
        }
        let got: Vec<u32> = waiters.into_iter().map(|w| w.join().unwrap()).collect();
        assert_eq!(got, vec![PER; CQS as usize]);
        assert!(ids.iter().all(|&cq| ch.filed(cq) == Some((0, 0))), "nothing left over");
    }

    /// An event that no waiter of its CQ has taken yet (an earlier arm's, whose completion
    /// a poll already returned) stays with its CQ: it wakes no other waiter, and its own
    /// CQ's next wait takes it. Events of CQs not made on the channel are dropped.
    #[test]
    fn stale_and_foreign_events_wake_no_other_waiter() {
        let (ch, m) = channel();
        let (a, b) = (CqId(1), CqId(2));
        let _bound = [Binding::new(&ch, a), Binding::new(&ch, b)];
        deliver(&m, a, ChannelEventKind::Completion);
        deliver(&m, CqId(u64::MAX), ChannelEventKind::Completion);
        assert_eq!(ch.wait_for(b, soon(20)).unwrap(), None);
        assert_eq!(m.pending(), 0);
        assert_eq!(ch.filed(a), Some((1, 0)));
        assert_eq!(ch.filed(CqId(u64::MAX)), None, "a foreign CQ's event is not filed");
        assert_eq!(ch.wait_for(a, soon(5000)).unwrap(), Some(CqEventKind::Completion));
    }

    /// An async waiter reads the channel while no thread does, filing the others' events;
    /// while a thread reads, it leaves the fd to it and is woken when its event is filed.
    #[cfg(feature = "tokio")]
    #[test]
    fn an_async_waiter_reads_only_while_no_thread_does_and_is_woken_for_its_events() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::task::Wake;
        struct Count(AtomicUsize);
        impl Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let (ch, m) = channel();
        let (a, b) = (CqId(1), CqId(2));
        let _bound = [Binding::new(&ch, a), Binding::new(&ch, b)];
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        deliver(&m, b, ChannelEventKind::Completion);
        deliver(&m, a, ChannelEventKind::Completion);
        assert_eq!(ch.poll_for(a, &waker).unwrap(), Some(CqEventKind::Completion));
        assert_eq!((ch.filed(b), m.pending()), (Some((1, 0)), 0), "b's event is filed for b's waiter");
        assert_eq!(ch.wait_for(b, soon(5000)).unwrap(), Some(CqEventKind::Completion));
        assert_eq!(ch.poll_for(a, &waker).unwrap(), None, "nothing for a: its task sleeps");
        // A thread waits for b and sleeps on the fd: a's event, read by it, wakes a's task.
        let reader = {
            let ch = ch.clone();
            thread::spawn(move || ch.wait_for(b, soon(30_000)).unwrap())
        };
        thread::sleep(Duration::from_millis(50));
        assert!(ch.router().reading);
        assert_eq!(ch.poll_for(a, &waker).unwrap(), None);
        let woken = count.0.load(Ordering::SeqCst);
        deliver(&m, a, ChannelEventKind::Completion);
        let t = Instant::now();
        while count.0.load(Ordering::SeqCst) == woken {
            assert!(t.elapsed() < Duration::from_secs(5), "the reader filed a's event and woke its task");
            thread::yield_now();
        }
        assert_eq!(ch.poll_for(a, &waker).unwrap(), Some(CqEventKind::Completion));
        deliver(&m, b, ChannelEventKind::Completion);
        assert_eq!(reader.join().unwrap(), Some(CqEventKind::Completion));
    }

    #[test]
    fn a_dropped_binding_forgets_its_cq() {
        let (ch, m) = channel();
        let (a, b) = (CqId(1), CqId(2));
        let bound_a = Binding::new(&ch, a);
        let _bound_b = Binding::new(&ch, b);
        deliver(&m, a, ChannelEventKind::Completion);
        deliver(&m, a, ChannelEventKind::CqError);
        assert_eq!(ch.wait_for(b, soon(20)).unwrap(), None);
        assert_eq!(ch.filed(a), Some((1, 1)));
        drop(bound_a);
        assert_eq!(ch.filed(a), None, "what was filed is dropped with the CQ");
        deliver(&m, a, ChannelEventKind::Completion);
        assert_eq!(ch.wait_for(b, soon(20)).unwrap(), None);
        assert_eq!((ch.filed(a), m.pending()), (None, 0), "a late event of the CQ is read and dropped");
    }

    #[test]
    fn a_deadline_beyond_what_an_instant_holds_is_none() {
        let now = Instant::now();
        assert_eq!(deadline_after(now, None), None);
        assert_eq!(deadline_after(now, Some(Duration::MAX)), None);
        assert_eq!(deadline_after(now, Some(Duration::from_secs(1))), Some(now + Duration::from_secs(1)));
    }
}
