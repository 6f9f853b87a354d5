//! dvcq's rxe (soft-RoCE) backend: a poller that reads the CQ queue buffer the `rdma_rxe`
//! kernel driver maps to userspace, and a model of the kernel producer
//! (shared/spec/vm-rxe.md §5).
//!
//! FFI-free: the root crate's glue finds the queue through rdma-core's private
//! `struct rxe_cq` ([`dvcq_uapi::rxe::RxeCqLayout`], read with [`RxeCqFields::read`]) and
//! hands [`RxeCq::attach`] a [`QueueDesc`]; every self-check failure is an
//! [`AttachError`] naming what it saw, on which the caller falls back to the generic
//! backend. The same poller runs on a [`model`]'s queue buffer.
//!
//! Raw memory is touched only in `queue.rs`, through dvcq-provider's ring primitives.
#![deny(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

pub mod cq;
mod error;
pub mod locate;
#[cfg(any(test, feature = "model"))]
pub mod model;
pub mod queue;
mod record;

pub use cq::RxeCq;
pub use error::AttachError;
pub use locate::RxeCqFields;
pub use queue::{Geometry, QueueDesc};
