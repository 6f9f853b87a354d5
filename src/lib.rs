//! dvcq: RDMA completion queues polled in userspace, with one `Cq` API over mlx5 (ConnectX),
//! irdma (E810, X722) and rxe (soft-RoCE) devices, rdma-core's `ibv_poll_cq` where no direct
//! path applies, and hardware models of ConnectX and E810 that run everything without a NIC.
//!
//! # Example
//!
//! Open a device (here the mlx5 model; `"rxe0"`, `"mlx5_0"`, ... for a real one), make a CQ
//! and a QP, post a write and poll its completion (the README's first program,
//! `examples/poll.rs`):
//!
//! ```
//! use dvcq::verbs::{Access, QpType, SendOp, SendWr};
//! use dvcq::{Completion, Context, CqOptions, QpInit};
//!
//! fn main() -> Result<(), dvcq::Error> {
//!     let ctx = Context::open("model-mlx5")?; // or "rxe0", "mlx5_0", ...
//!     let mut cq = ctx.create_cq(CqOptions::new(256))?;
//!     let pd = ctx.alloc_pd()?;
//!     let mr = pd.reg_mr(4096, Access::ALL)?;
//!     let mut qp = pd.create_qp(&QpInit::new(QpType::Rc, &cq))?;
//!     let me = qp.endpoint()?;
//!     qp.connect(&me)?; // RC loopback to itself
//!     qp.post_send(&[SendWr::new(7, SendOp::Write(mr.remote().at(64)), &[mr.slice(0, 8)?])])?;
//!     let mut wcs = [Completion::default(); 16];
//!     let polled = loop {
//!         match cq.poll(&mut wcs) {
//!             [] => std::hint::spin_loop(),
//!             polled => break polled, // the completions it filled in, at the front of wcs
//!         }
//!     };
//!     println!("wr_id {}, polled by {}", polled[0].wr_id, cq.backend().reason);
//!     Ok(())
//! }
//! ```
//!
//! # Where things are
//!
//! - [`Context`] opens a device or a model ([`Context::open`]); it makes CQs
//!   ([`Context::create_cq`], [`CqOptions`]), protection domains ([`Pd`]), memory regions
//!   ([`Mr`]) and QPs ([`Qp`], [`QpInit`]); [`verbs`] holds the work requests and attributes.
//! - [`Cq::poll`] fills [`Completion`]s; [`Cq::wait`], [`CompletionChannel`] and [`event`]
//!   sleep until completions arrive; [`Cq::attach`] takes over a CQ an application made
//!   with rdma-core.
//! - [`device`] lists devices and models; [`model_device`] configures the models.
//! - [`provider`], [`mlx5`], [`irdma`] and [`uapi`] are the vendor-neutral core, the vendor
//!   pollers and the hardware layouts, for code that polls a ring itself.
//! - [`image`] decodes ring images ([`Cq::ring_image`] writes them).
//!
//! The `dvcq` command (benchmarks, `validate`, dump decoding) is the `dvcq-cli` crate, built
//! on this library.
#![warn(missing_docs, missing_debug_implementations)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(unsafe_code)]

pub use dvcq_e810_dv as irdma;
pub use dvcq_mlx5_dv as mlx5;
pub use dvcq_provider as provider;
pub use dvcq_uapi as uapi;

pub use context::{Context, Mr, Pd};
pub use cq::{
    Backend, BackendChoice, BackendKind, Cq, CqClock, CqOptions, CqStats, CqViews, CqeView, DepthAdvice,
    HighWaterSource, StatusCounts, Timestamps,
};
pub use dvcq_provider::{Completion, CqDriver, CqErrorReason, CqeFault, FaultKind, WcFlags, WcOpcode, WcStatus};
pub use error::{Error, ErrorKind, PostRefusal, VerbsError};
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub use event::AsyncCq;
pub use event::{spread_comp_vectors, ArmMode, CompletionChannel, CqEvent, CqEventKind, CqId, WaitOptions};
pub use qp::{Mw, Qp, QpInit, Srq, Xrcd};

mod backend;
mod channel;
mod context;
pub mod cq;
pub mod device;
mod error;
pub mod event;
mod id;
pub mod image;
pub mod model_device;
mod qp;
#[cfg(test)]
mod stack_tests;
mod sys;
#[doc(hidden)]
pub mod tool_support;
pub mod verbs;
