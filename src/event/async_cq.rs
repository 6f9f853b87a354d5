//! Waiting for completions in async code (feature `tokio`): an [`AsyncCq`] sleeps on its
//! completion channel's fd through tokio's reactor ([`tokio::io::unix::AsyncFd`]) instead of
//! blocking a thread, with the same race-free order as [`Cq::wait`]: poll, arm, poll again,
//! sleep until this CQ's event, poll.
//!
//! # One channel per `AsyncCq`
//!
//! The fd is registered with the reactor once, for this CQ: make the CQ on a channel of its
//! own ([`AsyncCq::new`] refuses a channel other CQs were made on). Several CQs sharing one
//! channel are served by [`Cq::wait`] on threads, or by an application that reads
//! [`super::CompletionChannel::try_next_event`] from its own reactor and routes the events.
//!
//! # Cancellation
//!
//! [`AsyncCq::wait`] and [`AsyncCq::next`] are cancel-safe: completions leave the CQ only
//! in the same step that returns them, so dropping the future (a `select!` branch that lost,
//! a timeout) loses none. An arm left behind fires a stale event that the next wait takes
//! and polls past.

use super::{ArmMode, CompletionChannel, CqEventKind, CqId};
use crate::cq::Cq;
use crate::error::Error;
use dvcq_provider::Completion;
use std::io;
use std::time::Duration;
use tokio::io::unix::{AsyncFd, AsyncFdRegisterError};
use tokio::io::Interest;

/// A [`Cq`] made on a completion channel, waited on from async code.
///
/// # Examples
///
/// A runnable program: `cargo run --features tokio --example async_wait`.
#[derive(Debug)]
pub struct AsyncCq {
    cq: Cq,
    fd: AsyncFd<CompletionChannel>,
    arm: ArmMode,
}

/// Registers the channel's fd with the current runtime's reactor, for reading.
#[allow(unsafe_code)] // tokio's registration is `unsafe` only for the promise below.
fn register(channel: CompletionChannel) -> Result<AsyncFd<CompletionChannel>, AsyncFdRegisterError<CompletionChannel>> {
    // SAFETY: `register_with_interest` asks that the fd stay open, and refer to the same file, for as long as the AsyncFd lives, and that `as_raw_fd` always return it. The AsyncFd owns the `CompletionChannel` handle, which owns the fd (a model's eventfd, or rdma-core's channel, closed only when the last handle drops) and returns that one fd from every `as_raw_fd`. A runtime is current (checked by the caller), so it does not panic.
    unsafe { AsyncFd::register_with_interest(channel, Interest::READABLE) }
}

impl AsyncCq {
    /// Wraps `cq`, registering its channel's fd with the current tokio runtime (which must
    /// have IO enabled). Arms ask for the next completion ([`AsyncCq::with_arm`] changes it).
    ///
    /// # Errors
    ///
    /// [`Error::Event`] when the CQ was made without a channel, the channel serves other CQs
    /// too, or the fd cannot be registered (no runtime, or one without IO).
    pub fn new(cq: Cq) -> Result<AsyncCq, Error> {
        let event = |what: String| Error::Event { device: cq.device().to_string(), what };
        let Some(channel) = cq.channel().cloned() else {
            return Err(event(format!("{} was made without a completion channel: make it with create_cq_on", cq.id())));
        };
        let others = channel.bound_cqs().saturating_sub(1);
        if others > 0 {
            return Err(event(format!(
                "the channel of {} serves {others} other CQ(s); an AsyncCq needs a channel of its own",
                cq.id()
            )));
        }
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(event("the channel's fd could not join the tokio reactor: no runtime is running".into()));
        }
        let fd =
            register(channel).map_err(|e| event(format!("the channel's fd could not join the tokio reactor: {e}")))?;
        Ok(AsyncCq { cq, fd, arm: ArmMode::Next })
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

    /// Waits for completions and moves up to `out.len()` of them out, in order; never
    /// returns 0 (bound it with `tokio::time::timeout`, or use [`AsyncCq::wait_timeout`]).
    ///
    /// # Errors
    ///
    /// As [`Cq::wait`]: arming failed, the channel failed, or the CQ overran (its error
    /// event) with nothing left to poll.
    pub async fn wait(&mut self, out: &mut [Completion]) -> Result<usize, Error> {
        loop {
            let n = self.cq.poll(out);
            if n > 0 {
                return Ok(n);
            }
            if self.cq.in_error {
                return Err(self.cq.overran());
            }
            self.cq.arm(self.arm)?;
            // A completion that landed before the arm raised no event: this poll finds it.
            let n = self.cq.poll(out);
            if n > 0 {
                return Ok(n);
            }
            if self.event().await? == CqEventKind::CqError {
                self.cq.in_error = true;
                let n = self.cq.poll(out);
                if n > 0 {
                    return Ok(n);
                }
                return Err(self.cq.overran());
            }
            self.cq.events_taken += 1;
        }
    }

    /// [`AsyncCq::wait`] for at most `timeout`: 0 when it passes with nothing.
    ///
    /// # Errors
    ///
    /// As [`AsyncCq::wait`].
    pub async fn wait_timeout(&mut self, out: &mut [Completion], timeout: Duration) -> Result<usize, Error> {
        tokio::time::timeout(timeout, self.wait(out)).await.unwrap_or(Ok(0))
    }

    /// The next completion.
    ///
    /// # Errors
    ///
    /// As [`AsyncCq::wait`].
    pub async fn next(&mut self) -> Result<Completion, Error> {
        let mut one = [Completion::default()];
        self.wait(&mut one).await?;
        Ok(one[0])
    }

    /// Sleeps until an event of this CQ has been read from the channel; its kind.
    async fn event(&mut self) -> Result<CqEventKind, Error> {
        let id: CqId = self.cq.id();
        loop {
            let mut ready = self.fd.readable().await.map_err(|e| self.fd_error(e))?;
            let read = ready.try_io(|fd| match fd.get_ref().try_next_event() {
                Ok(Some(e)) => Ok(Ok(e)),
                Ok(None) => Err(io::ErrorKind::WouldBlock.into()),
                Err(e) => Ok(Err(e)),
            });
            match read {
                // Nothing queued: the readiness was stale and is cleared; sleep again.
                Err(_would_block) => continue,
                Ok(Err(e)) => return Err(self.fd_error(e)),
                Ok(Ok(Err(e))) => return Err(e),
                Ok(Ok(Ok(e))) if e.cq == id => return Ok(e.kind),
                // Not this CQ's (the channel was shared after all): dropped.
                Ok(Ok(Ok(_))) => continue,
            }
        }
    }

    fn fd_error(&self, e: io::Error) -> Error {
        Error::Event { device: self.cq.device().to_string(), what: format!("waiting on the channel fd: {e}") }
    }
}
