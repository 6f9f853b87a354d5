//! The mlx5 poller on a ring rdma-core made, and the settings it is made with.

use dvcq_mlx5_dv::{CiUpdate, CqConfig, CqeVersion, Mlx5Cq128, Mlx5Cq64};

/// The poller, by CQE size (a type-level stride), chosen once at attach.
#[repr(u8)]
#[derive(Debug)]
pub(crate) enum Ring {
    /// 64-byte CQEs.
    C64(Mlx5Cq64),
    /// 128-byte CQEs.
    C128(Mlx5Cq128),
}

/// The poller settings for a CQ rdma-core created: the context's CQE version; no
/// compression or overrun-ignore (`ibv_create_cq` enables neither: rdma-core
/// `providers/mlx5/verbs.c` `create_cq` sets them only from `mlx5dv_create_cq` attributes
/// and `ibv_create_cq_ex` flags).
pub(crate) fn cq_config(cqe_v1: bool) -> CqConfig {
    CqConfig {
        cqe_version: if cqe_v1 { CqeVersion::V1 } else { CqeVersion::V0 },
        ci_update: CiUpdate::EveryPoll,
        overrun_ignore: false,
        compression: None,
    }
}

/// How dvcq made a CQ with `mlx5dv_create_cq` ([`crate::CqOptions`]'s mlx5 attributes):
/// the format the poller is told, checked against what `mlx5dv_init_obj` reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Created {
    /// 64 or 128.
    pub(crate) cqe_size: u16,
    /// Compressed, basic layout (the only one `mlx5dv_create_cq` makes), in this format.
    pub(crate) compression: Option<dvcq_mlx5_dv::MiniFormat>,
    /// `IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN`.
    pub(crate) ignore_overrun: bool,
}
