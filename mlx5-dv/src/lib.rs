//! dvcq's mlx5 (ConnectX) backend: the CQ poller and the mlx5 hardware model.
//!
//! FFI-free: the poller takes a ring descriptor (buffer, entries, CQE size, doorbell record,
//! UAR, CQN) from rdma-core's `mlx5dv_init_obj` or from [`model`], and parses CQEs itself.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

pub mod status;

pub use status::syndrome_status;
