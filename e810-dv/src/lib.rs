//! dvcq's irdma (Intel E810 / X722 / GEN3) backend: the CQ poller and the irdma hardware
//! model, after rdma-core's irdma provider (`providers/irdma/uk.c` `irdma_uk_cq_poll_cmpl`,
//! `providers/irdma/uverbs.c` `__irdma_upoll_cq`, `irdma_process_cqe`).
//!
//! FFI-free: the poller takes the ring ([`SlotRing`]), the shadow-area head word and a QP
//! registry, and parses CQEs itself; given the CQ's [`ArmDoorbell`] (shadow-area arm word
//! and CQ doorbell) it also arms the CQ ([`IrdmaCq::arm`]). The same poll code decodes a NIC's ring, a
//! [`model`]'s, and a ring image's ([`image`]).
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

pub mod arm;
pub mod cq;
mod cqe;
mod fast;
mod flush;
pub mod image;
#[cfg(any(test, feature = "model"))]
pub mod model;
pub mod registry;
pub mod ring;
pub mod status;

pub use arm::ArmDoorbell;
pub use cq::{CqConfig, CqError, CqeView, IrdmaCq, PollStats, Views};
pub use registry::{
    AdoptError, ForeignQp, Qp, QpConfig, QpId, QpRegistry, QpType, RegistryError, Transport, WqRing, WrTrk, SQ_RESERVE,
};
pub use ring::{SlotBytes, SlotRing, SlotSource};
pub use status::{Compat, Release};
