//! The completion channel: where the events of the CQs made on it arrive, as a
//! non-blocking fd, and how they reach the CQ each belongs to.
//!
//! # Routing
//!
//! Several CQs, each waited on by its own thread, may share one channel. The first waiter
//! that finds nobody reading the fd becomes the reader: it sleeps on the fd, reads every
//! event queued, files each under its CQ, and wakes the other waiters, who find their
//! events filed. So no event is read by a thread that then drops it, and no waiter sleeps
//! on an fd another thread has just drained.

use super::CqId;
use crate::error::Error;
use crate::model_device::{ChannelEventKind, ModelChannel};
#[cfg(dvcq_rdma_core)]
use crate::sys;
use dvcq_provider::eventfd::wait_readable;
use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What an event says about its CQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CqEventKind {
    /// The armed CQ has a completion (or, armed solicited-only, a solicited or error one).
    Completion,
    /// The CQ overran and is in error (`IBV_EVENT_CQ_ERR`). Models report it here; on
    /// rdma-core devices it is an asynchronous event of the context, not of the channel.
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
    #[cfg(dvcq_rdma_core)]
    Verbs(Arc<sys::cq::CompChannel>),
}

/// Events read and not yet taken by their CQ's waiter.
#[derive(Debug, Default, Clone, Copy)]
struct Filed {
    completions: u32,
    errors: u32,
}

#[derive(Debug, Default)]
struct Router {
    filed: HashMap<CqId, Filed>,
    /// A waiter is sleeping on the fd (and will wake the others).
    reading: bool,
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
            #[cfg(dvcq_rdma_core)]
            Source::Verbs(v) => match v.try_get_event() {
                Ok(t) => Ok(t.map(|token| CqEvent { cq: CqId(token), kind: CqEventKind::Completion })),
                Err(e) => Err(Error::Verbs { device: self.shared.device.clone(), source: e }),
            },
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
        let deadline = timeout.map(|t| Instant::now() + t);
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
            wait_readable(self.as_fd(), left).map_err(|e| self.error(format!("waiting on the channel fd: {e}")))?;
        }
    }

    /// Sleeps until an event for `cq` has been read (by this thread or another waiter on
    /// the channel) or `deadline` passes; returns the event's kind, errors first, or `None`
    /// at the deadline.
    pub(crate) fn wait_for(&self, cq: CqId, deadline: Option<Instant>) -> Result<Option<CqEventKind>, Error> {
        let mut r = self.router();
        loop {
            if let Some(f) = r.filed.get_mut(&cq) {
                if f.errors > 0 {
                    f.errors -= 1;
                    return Ok(Some(CqEventKind::CqError));
                }
                if f.completions > 0 {
                    f.completions -= 1;
                    return Ok(Some(CqEventKind::Completion));
                }
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
            read?;
        }
    }

    /// The reader's turn: sleep on the fd up to `left`, then file every queued event.
    fn read_and_file(&self, left: Option<Duration>) -> Result<(), Error> {
        let mut got = Vec::new();
        while let Some(e) = self.read_one()? {
            got.push(e);
        }
        if got.is_empty() {
            wait_readable(self.as_fd(), left).map_err(|e| self.error(format!("waiting on the channel fd: {e}")))?;
            while let Some(e) = self.read_one()? {
                got.push(e);
            }
        }
        if got.is_empty() {
            return Ok(());
        }
        let mut r = self.router();
        for e in got {
            let f = r.filed.entry(e.cq).or_default();
            match e.kind {
                CqEventKind::Completion => f.completions = f.completions.saturating_add(1),
                CqEventKind::CqError => f.errors = f.errors.saturating_add(1),
            }
        }
        Ok(())
    }

    /// Drops what was filed for a CQ that is going away.
    pub(crate) fn forget(&self, cq: CqId) {
        self.router().filed.remove(&cq);
    }

    /// Events read from the device and not yet acknowledged to rdma-core (0 on a model,
    /// whose events need no acknowledgement).
    pub fn unacked_events(&self) -> u64 {
        match &self.shared.source {
            Source::Model(_) => 0,
            #[cfg(dvcq_rdma_core)]
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
            #[cfg(dvcq_rdma_core)]
            Source::Verbs(v) => v.as_fd(),
        }
    }
}

/// A CQ's membership of a channel: what was filed for it is forgotten when the CQ goes.
#[derive(Debug)]
pub(crate) struct Binding {
    pub(crate) channel: CompletionChannel,
    pub(crate) cq: CqId,
}

impl Drop for Binding {
    fn drop(&mut self) {
        self.channel.forget(self.cq);
    }
}
