//! mlx5 (ConnectX) CQ layouts: CQEs, error CQEs, mini-CQEs, the doorbell record and the UAR
//! CQ doorbell (rdma-core `providers/mlx5/mlx5dv.h`, `cq.c`, `mlx5.h`; the kernel's
//! `include/linux/mlx5/device.h`), and rdma-core's private QP and SRQ structs per release
//! (`providers/mlx5/mlx5.h`).

pub mod cq_size;
pub mod cqe;
pub mod doorbell;
pub mod err_cqe;
pub mod mini;
pub mod opcode;
pub mod rdma_core;

pub use cqe::{Cqe128, Cqe64};
pub use doorbell::DbRec;
pub use err_cqe::{ErrCqe, SigErrCqe};
pub use mini::{MiniCqe, MiniCqeArray};
