//! irdma (Intel E810 / X722 / GEN3) CQ layouts: the 32-byte CQE as four little-endian
//! qwords, the extension words, the shadow area, the doorbell offsets, the numeric codes and
//! the per-generation facts (shared/spec/irdma.md §1, §3, §5, §9), and rdma-core's private
//! CQ and QP structs per release (§7a).

pub mod codes;
pub mod cqe;
pub mod gen;
pub mod rdma_core;
pub mod shadow;
pub mod wqe;

pub use cqe::{Cqe, CqeSlot64, ExtCqe};
pub use gen::HwRev;
pub use shadow::ShadowArea;
