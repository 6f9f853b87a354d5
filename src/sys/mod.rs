//! The rdma-core glue: the only FFI in dvcq, built when build.rs found rdma-core
//! (`cfg(dvcq_rdma_core)`).
//!
//! - [`ffi`]: the bindgen output for verbs.h and mlx5dv.h.
//! - [`ops`]: the verbs that verbs.h defines `static inline`, through the provider's ops.
//! - [`cq_ex`]: rdma-core's extended CQ (`ibv_create_cq_ex`, `ibv_start_poll`,
//!   `ibv_wc_read_*`).
//! - [`clock`]: the mlx5 device clock (`mlx5dv_get_clock_info`, real-time support).
//! - [`device`], [`cq`], [`qp`]: RAII handles over contexts, CQs, channels, PDs, MRs, QPs,
//!   SRQs and address handles. Each handle holds an `Arc` of what it was made on, so a
//!   context outlives its CQs, a CQ its QPs, and a mapped ring is never read after destroy.
//!
//! Every `unsafe` block here has a `// SAFETY:` comment; the rest of the crate is
//! `deny(unsafe_code)`.
#![allow(unsafe_code)]

pub(crate) mod allocation;
pub(crate) mod async_event;
mod attach;
mod claim;
pub(crate) mod clock;
pub(crate) mod cq;
pub(crate) mod cq_ex;
pub(crate) mod device;
mod event;
pub(crate) mod ffi;
pub(crate) mod irdma;
#[cfg(test)]
mod lab;
pub(crate) mod mlx5;
mod ops;
pub(crate) mod qp;
pub(crate) mod rxe;
