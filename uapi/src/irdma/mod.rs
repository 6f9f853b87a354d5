//! irdma (Intel E810 / X722 / GEN3) CQ layouts: the 32-byte CQE as four little-endian
//! qwords, the extension words, the shadow area, the doorbell offsets, the numeric codes and
//! the per-generation facts (rdma-core `providers/irdma/user.h`, `defs.h`, `uk.c`,
//! `uverbs.c`; the kernel's `drivers/infiniband/hw/irdma/*_hw.c`), and rdma-core's private
//! CQ and QP structs per release (`providers/irdma/umain.h`, `user.h`).

pub mod codes;
pub mod cqe;
pub mod gen;
pub mod rdma_core;
pub mod shadow;
pub mod wqe;

pub use cqe::{Cqe, CqeSlot64, ExtCqe};
pub use gen::HwRev;
pub use shadow::ShadowArea;
