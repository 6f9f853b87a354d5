//! dvcq: a userspace direct-verbs provider for RDMA completion queues.
//!
//! The facade re-exports the vendor-neutral core ([`provider`]), the hardware layouts
//! ([`uapi`]) and the backends, and holds the tools: ring images and the CLI.
//!
//! # Example
//!
//! Poll a completion from the mlx5 hardware model:
//!
//! ```
//! use dvcq::mlx5::model::{build, Mlx5Model, ModelConfig};
//! use dvcq::mlx5::{CqConfig, QpConfig, Registry};
//! use dvcq::uapi::mlx5::opcode::wqe_opcode;
//! use dvcq::Completion;
//!
//! let mut model = Mlx5Model::new(ModelConfig::new(256))?;
//! let mut reg = Registry::new();
//! reg.add_qp(QpConfig::rc(0x12, 64, 64))?;
//! let mut cq = model.poller::<64>(reg, CqConfig::default())?;
//!
//! let idx = cq.registry_mut().qp_mut(0x12).unwrap().sq.post(42, 1);
//! model.push(&build::req(0x12, idx, wqe_opcode::SEND, 0))?;
//!
//! let mut wcs = [Completion::default(); 16];
//! let n = cq.poll(&mut wcs);
//! assert_eq!((n, wcs[0].wr_id), (1, 42));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs, missing_debug_implementations)]
#![deny(unsafe_code)]

pub use dvcq_e810_dv as irdma;
pub use dvcq_mlx5_dv as mlx5;
pub use dvcq_provider as provider;
pub use dvcq_uapi as uapi;

pub use context::{Context, Mr, Mw, Pd, Qp, QpInit, Srq, Xrcd};
pub use cq::{
    Backend, BackendChoice, BackendKind, Cq, CqClock, CqOptions, CqStats, CqViews, CqeView, DepthAdvice,
    HighWaterSource, StatusCounts, Timestamps,
};
pub use dvcq_provider::{Completion, CqDriver, CqErrorReason, CqeFault, FaultKind, WcFlags, WcOpcode, WcStatus};
pub use error::{Error, VerbsError};
#[cfg(feature = "tokio")]
pub use event::AsyncCq;
pub use event::{spread_comp_vectors, ArmMode, CompletionChannel, CqEvent, CqEventKind, CqId, WaitOptions};

#[cfg(dvcq_rdma_core)]
mod backend;
mod context;
pub mod cq;
pub mod device;
mod error;
pub mod event;
pub mod image;
pub mod model_device;
#[cfg(dvcq_rdma_core)]
mod sys;
#[doc(hidden)]
pub mod tool_support;
pub mod verbs;
