//! dvcq: a userspace direct-verbs provider for RDMA completion queues.
//!
//! The facade re-exports the vendor-neutral core ([`provider`]), the hardware layouts
//! ([`uapi`]) and the backends, and holds the tools: ring images and the CLI.
#![warn(missing_docs, missing_debug_implementations)]

pub use dvcq_e810_dv as irdma;
pub use dvcq_mlx5_dv as mlx5;
pub use dvcq_provider as provider;
pub use dvcq_uapi as uapi;

pub use dvcq_provider::{Completion, CqDriver, CqeFault, FaultKind, WcFlags, WcOpcode, WcStatus};

pub mod bench;
pub mod cli;
pub mod image;
pub mod scenario;
pub mod decode;
