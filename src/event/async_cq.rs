//! Waiting for completions in async code (feature `tokio`): an [`AsyncCq`] sleeps on its
//! completion channel's fd, and on the context's async fd where a CQ error (overrun) is
//! reported, through tokio's reactor ([`tokio::io::unix::AsyncFd`]) instead of blocking a
//! thread, with the same race-free order as [`Cq::wait`]: poll, arm, poll again, sleep
//! until this CQ's event, poll.
//!
//! # Sharing a channel
//!
//! The channel may serve other CQs, made on it before or after the `AsyncCq`, waited on by
//! other `AsyncCq`s or by [`Cq::wait`] on threads: the channel files each event it reads
//! under its CQ, whoever reads it, and wakes that CQ's waiter (see the channel's routing).
//! Each `AsyncCq` registers duplicates of the fds of its own with the reactor. Only an
//! application that reads the channel itself ([`super::CompletionChannel::try_next_event`])
//! takes events from under the waiters: use one or the other per channel.
//!
//! # Cancellation
//!
//! [`AsyncCq::wait`] and [`AsyncCq::next`] are cancel-safe: completions leave the CQ only
//! in the same step that returns them, so dropping the future (a `select!` branch that lost,
//! a timeout) loses none. An arm left behind fires a stale event that the next wait takes
//! and polls past.

use super::{ArmMode, CompletionChannel, CqEventKind};
use crate::cq::Cq;
use crate::error::Error;
use dvcq_provider::Completion;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::task::Poll;
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// A [`Cq`] made on a completion channel, waited on from async code.
///
/// # Examples
///
/// A runnable program: `cargo run --features tokio --example async_wait`.
#[derive(Debug)]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub struct AsyncCq {
    cq: Cq,
    channel: CompletionChannel,
    /// A duplicate of the channel's fd, registered for this CQ.
    events_fd: AsyncFd<OwnedFd>,
    /// A duplicate of the context's async fd, where the device reports a CQ error, when
    /// dvcq reads it.
    errors_fd: Option<AsyncFd<OwnedFd>>,
    arm: ArmMode,
}

/// Registers a duplicate of `fd` with the current runtime's reactor, for reading (a
/// duplicate: an epoll set takes one fd once, and other waiters may have registered it).
#[allow(unsafe_code)] // tokio's registration is `unsafe` only for the promise below.
fn register(fd: BorrowedFd<'_>) -> io::Result<AsyncFd<OwnedFd>> {
    let dup = fd.try_clone_to_owned()?;
    // SAFETY: `register_with_interest` asks that the fd stay open, and refer to the same file, for as long as the AsyncFd lives, and that `as_raw_fd` always return it. The AsyncFd owns the `OwnedFd`, a duplicate made for it alone and closed only when the AsyncFd drops, and `OwnedFd::as_raw_fd` returns that one fd. A runtime is current (checked by the caller), so it does not panic.
    unsafe { AsyncFd::register_with_interest(dup, Interest::READABLE) }.map_err(io::Error::from)
}

#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
impl AsyncCq {
    /// Wraps `cq`, registering its channel's fd with the current tokio runtime (which must
    /// have IO enabled). Arms ask for the next completion ([`AsyncCq::with_arm`] changes it).
    ///
    /// # Errors
    ///
    /// [`Error::Event`] when the CQ was made without a channel, or the fds cannot be
    /// registered (no runtime, or one without IO).
    pub fn new(cq: Cq) -> Result<AsyncCq, Error> {
        let event = |what: String| Error::Event { device: cq.device().to_string(), what };
        let Some(channel) = cq.channel().cloned() else {
            return Err(event(format!("{} was made without a completion channel: make it with create_cq_on", cq.id())));
        };
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(event("the channel's fd could not join the tokio reactor: no runtime is running".into()));
        }
        let events_fd = register(channel.as_fd())
            .map_err(|e| event(format!("the channel's fd could not join the tokio reactor: {e}")))?;
        let errors_fd = channel
            .async_fd()
            .map(register)
            .transpose()
            .map_err(|e| event(format!("the context's async fd could not join the tokio reactor: {e}")))?;
        Ok(AsyncCq { cq, channel, events_fd, errors_fd, arm: ArmMode::Next })
    }

    /// What its arms wait for: the next completion, or the next solicited or error one.
    pub fn with_arm(mut self, arm: ArmMode) -> AsyncCq {
        self.arm = arm;
        self
    }

    /// The CQ, to poll it or read its counters.
    pub fn cq(&mut self) -> &mut Cq {
        &mut self.cq
    }

    /// The CQ back, its channel's fd leaving the reactor.
    pub fn into_inner(self) -> Cq {
        self.cq
    }

    /// Waits for completions, moves up to `out.len()` of them out, in order, into the front
    /// of `out`, and returns that part of it (as [`Cq::poll`] does); never an empty one
    /// (bound it with `tokio::time::timeout`, or use [`AsyncCq::wait_timeout`]).
    ///
    /// # Errors
    ///
    /// As [`Cq::wait`]: arming failed, the channel failed, or the CQ overran (its error
    /// event) with nothing left to poll.
    pub async fn wait<'a>(&mut self, out: &'a mut [Completion]) -> Result<&'a [Completion], Error> {
        let n = self.wait_count(out).await?;
        Ok(&out[..n.min(out.len())])
    }

    /// [`AsyncCq::wait`] returning how many completions it moved to the front of `out`
    /// instead of that slice; never 0.
    ///
    /// # Errors
    ///
    /// As [`AsyncCq::wait`].
    pub async fn wait_count(&mut self, out: &mut [Completion]) -> Result<usize, Error> {
        loop {
            let n = self.cq.poll_count(out);
            if n > 0 {
                return Ok(n);
            }
            if self.cq.in_error {
                return Err(self.cq.overran());
            }
            self.cq.arm(self.arm)?;
            // A completion that landed before the arm raised no event: this poll finds it.
            let n = self.cq.poll_count(out);
            if n > 0 {
                return Ok(n);
            }
            if self.event().await? == CqEventKind::CqError {
                self.cq.in_error = true;
                let n = self.cq.poll_count(out);
                if n > 0 {
                    return Ok(n);
                }
                return Err(self.cq.overran());
            }
            self.cq.events_taken += 1;
        }
    }

    /// [`AsyncCq::wait`] for at most `timeout`: an empty slice when it passes with nothing.
    ///
    /// # Errors
    ///
    /// As [`AsyncCq::wait`].
    pub async fn wait_timeout<'a>(
        &mut self,
        out: &'a mut [Completion],
        timeout: Duration,
    ) -> Result<&'a [Completion], Error> {
        let n = self.wait_timeout_count(out, timeout).await?;
        Ok(&out[..n.min(out.len())])
    }

    /// [`AsyncCq::wait_timeout`] returning how many completions it moved to the front of
    /// `out`: 0 when `timeout` passes with nothing.
    ///
    /// # Errors
    ///
    /// As [`AsyncCq::wait`].
    pub async fn wait_timeout_count(&mut self, out: &mut [Completion], timeout: Duration) -> Result<usize, Error> {
        tokio::time::timeout(timeout, self.wait_count(out)).await.unwrap_or(Ok(0))
    }

    /// The next completion.
    ///
    /// # Errors
    ///
    /// As [`AsyncCq::wait`].
    pub async fn next(&mut self) -> Result<Completion, Error> {
        let mut one = [Completion::default()];
        self.wait_count(&mut one).await?;
        Ok(one[0])
    }

    /// Sleeps until an event of this CQ has been read from the channel (by this task or
    /// another waiter on the channel); its kind, errors first.
    async fn event(&mut self) -> Result<CqEventKind, Error> {
        let id = self.cq.id();
        // The parts the future holds: shared by the waiters, so `Sync`, unlike the CQ.
        let (channel, events_fd, errors_fd) = (&self.channel, &self.events_fd, &self.errors_fd);
        let fds = || std::iter::once(events_fd).chain(errors_fd.as_ref());
        std::future::poll_fn(|cx| loop {
            if let Some(kind) = channel.poll_for(id, cx.waker())? {
                return Poll::Ready(Ok(kind));
            }
            // Nothing for this CQ: sleep until an fd turns readable (then read again) or
            // another waiter files an event for it. Readiness is cleared only before that
            // read, so an event arriving meanwhile is read by it.
            let mut ready = false;
            for fd in fds() {
                match fd.poll_read_ready(cx) {
                    Poll::Ready(Ok(mut guard)) => {
                        guard.clear_ready();
                        ready = true;
                    }
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(fd_error(channel, e))),
                    Poll::Pending => {}
                }
            }
            if !ready {
                return Poll::Pending;
            }
        })
        .await
    }
}

fn fd_error(channel: &CompletionChannel, e: io::Error) -> Error {
    Error::Event { device: channel.device().to_string(), what: format!("waiting on the channel fd: {e}") }
}
