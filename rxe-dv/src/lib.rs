//! dvcq's rxe (soft-RoCE) backend: a poller that reads the CQ queue buffer the `rdma_rxe`
//! kernel driver maps to userspace (rdma-core `providers/rxe/rxe.c` `rxe_create_cq` maps it at
//! `resp.mi`; the kernel lays it out in `drivers/infiniband/sw/rxe/rxe_queue.c`
//! `rxe_queue_init`), and a model of the kernel producer.
//!
//! FFI-free: the root crate's glue finds the queue through rdma-core's private
//! `struct rxe_cq` ([`dvcq_uapi::rxe::RxeCqLayout`], read with [`RxeCqFields::read`]) and
//! hands [`RxeCq::attach`] a [`QueueDesc`]; every self-check failure is an
//! [`AttachError`] naming what it saw, on which the caller falls back to the generic
//! backend. The same poller runs on the queue buffer of the kernel model (module `model`,
//! feature `model`).
//!
//! Raw memory is touched only in `queue.rs`, through dvcq-provider's ring primitives.
//!
//! # Examples
//!
//! The model plays the kernel: it posts a record as `rxe_cq_post` does, and the poller
//! returns it.
//!
//! ```
//! use dvcq_provider::{Completion, CqDriver};
//! use dvcq_rxe_dv::model::{record, ModelConfig, RxeModel};
//!
//! let mut kernel = RxeModel::new(ModelConfig::new(16))?;
//! let mut cq = kernel.poller()?;
//! kernel.push(&record(&Completion { wr_id: 7, byte_len: 64, ..Completion::default() }))?;
//! let mut out = [Completion::default(); 4];
//! assert_eq!(cq.poll(&mut out), 1);
//! assert_eq!((out[0].wr_id, out[0].byte_len), (7, 64));
//! assert_eq!(kernel.consumer_index(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

pub mod cq;
mod error;
pub mod locate;
#[cfg(any(test, feature = "model"))]
pub mod model;
pub mod queue;
mod record;
pub mod view;

pub use cq::RxeCq;
pub use error::AttachError;
pub use locate::RxeCqFields;
pub use queue::{Geometry, QueueDesc};
pub use record::Failures;
pub use view::{RecordView, Views};
