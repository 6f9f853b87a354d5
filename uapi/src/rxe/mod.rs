//! rxe (soft-RoCE) CQ layouts: the kernel's queue buffer that `rdma_rxe` maps to userspace
//! and the work-completion records in it (kernel uapi `rdma_user_rxe.h`,
//! `ib_user_verbs.h`), and rdma-core's private `struct rxe_cq` that says where the mapping
//! is, per release range (rdma-core `providers/rxe/rxe.c` `rxe_create_cq` maps `resp.mi`;
//! the buffer is `struct rxe_queue_buf`, laid out by the kernel's
//! `drivers/infiniband/sw/rxe/rxe_queue.c` `rxe_queue_init`).
//!
//! The kernel writes these words in host byte order (the uapi types are plain `__u32`), so
//! the fields are native integers, not byte-order newtypes.

pub mod cq_layout;
pub mod queue;
pub mod wc;

pub use cq_layout::RxeCqLayout;
pub use queue::{MmInfo, QueueBufHeader};
pub use wc::UverbsWc;
