//! mlx5 (ConnectX) CQ layouts: CQEs, error CQEs, mini-CQEs, the doorbell record and the UAR
//! CQ doorbell (shared/spec/mlx5.md §1, §2, §5, §6, §9.2), and rdma-core's private QP and
//! SRQ structs per release (§13.2).

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
