//! Event mode: completion channels, arming, and the race-free wait, the same on every
//! backend (rdma-core's channels for generic and rxe CQs, an eventfd for the models).
//!
//! A [`CompletionChannel`] is made on a [`crate::Context`]; CQs made on it with
//! [`crate::Context::create_cq_on`] deliver their events there, each tagged with the CQ's
//! [`CqId`]. An application either sleeps in [`crate::Cq::wait`] (poll, arm, poll again,
//! sleep, drain: written once, in [`crate::Cq::wait_with`]) or puts the channel's non-blocking fd in its own
//! epoll set and reads events with [`CompletionChannel::try_next_event`]. One channel
//! serves many CQs; events are routed to the CQ they belong to, whichever waiter read them.
//! With the `tokio` feature, an `AsyncCq` waits the same way from async code, on tokio's
//! reactor, on a channel of its own or one it shares with other waiters, sync or async.
//!
//! A CQ that overran (the device found it full) is in error and gets no more completions:
//! its [`CqEventKind::CqError`] ends [`crate::Cq::wait`] with an error rather than a sleep
//! that would never end. On a device dvcq opened, that error is an async event of the
//! context (`IBV_EVENT_CQ_ERR`), which dvcq reads from the context's async fd (the models
//! emulate it): `Cq::wait` and `AsyncCq` sleep on both fds, and [`CompletionChannel::try_next_event`] reports the error before
//! the channel's own events. An application that sleeps on the channel fd alone learns of
//! it at its next wake-up.
//!
//! dvcq owns arming for the CQs it polls: `Cq::arm` goes to the backend that polls the CQ
//! (rdma-core's own arm must not be mixed with direct polling: mlx5's `mlx5_arm_cq` sends
//! rdma-core's private `cq->cons_index`, which a direct poller never advances).
//!
//! Layer: the top of the library (with `image`): it may import every module below (`qp`,
//! `cq`, `context`, `channel`, `device`, `backend`, `model_device`, `sys`, `error`, `id`,
//! `verbs`); none of them imports it. The channel itself and a CQ's binding to it are in the
//! lower `channel` module and `cq/binding.rs`, so that a CQ can hold one; this module
//! re-exports the channel's types.

mod adopt;
#[cfg(feature = "tokio")]
mod async_cq;
mod context;
mod vectors;
pub(crate) mod wait;

pub use crate::channel::{CompletionChannel, CqEvent, CqEventKind};
pub use crate::id::CqId;
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub use async_cq::AsyncCq;
pub use vectors::spread_comp_vectors;
pub use wait::{ArmMode, WaitOptions};
