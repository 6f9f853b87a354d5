//! dvcq's mlx5 (ConnectX) backend: the CQ poller and the mlx5 hardware model.
//!
//! FFI-free: the poller takes a ring and doorbell record built by the facade from
//! rdma-core's `mlx5dv_init_obj`, or by [`model`], and parses CQEs itself as rdma-core's
//! `providers/mlx5/cq.c` does.
//!
//! - [`Mlx5Cq`]: batch [`Mlx5Cq::poll`] into [`dvcq_provider::Completion`]s, `peek`, and
//!   zero-copy [`Mlx5Cq::views`].
//! - [`ArmDoorbell`]: the CQ's arm doorbell (doorbell record arm word and UAR), rung by
//!   [`Mlx5Cq::arm`].
//! - [`Registry`]: the QPs/SRQs and wr_id tables the application fills when it posts.
//! - [`clock`]: completion timestamps in nanoseconds (`mlx5dv_ts_to_ns`, the real-time
//!   format).
//! - [`model`] (feature `model`): a faithful mlx5 CQ that writes real CQEs.
// Inline scatter writes through dvcq_provider::MemoryRegions, which checks every write.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

pub mod clock;
pub mod cq;
pub mod cqe;
mod doorbell;
pub mod dump;
mod fast;
mod fields;
pub mod image;
pub mod mini;
#[cfg(any(test, feature = "model"))]
pub mod model;
pub mod registry;
mod scatter;
pub mod sig;
pub mod status;
pub mod view;

pub use cq::{CiUpdate, CqConfig, CqStats, Mlx5Cq, Mlx5Cq128, Mlx5Cq64, Mlx5Error};
pub use cqe::CqeVersion;
pub use doorbell::{ArmDoorbell, ArmRing};
pub use mini::{CompLayout, CompressionConfig, MiniFormat};
pub use registry::{AdoptError, ForeignWq, QpConfig, QpType, Registry, RegistryError, ResourceKind};
pub use sig::{SigCheck, SigError};
pub use status::syndrome_status;
pub use view::{CqeView, Views};
