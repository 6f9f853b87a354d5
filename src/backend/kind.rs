//! Which poller runs a CQ, and which ones a CQ may be given.

use serde::Serialize;

/// Which poller runs a CQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// dvcq's mlx5 CQE parser on the device's ring.
    Mlx5,
    /// dvcq's irdma CQE parser on the device's ring.
    Irdma,
    /// dvcq's reader of the ring rdma_rxe maps to userspace.
    Rxe,
    /// rdma-core's own `ibv_poll_cq`.
    Generic,
    /// A built-in hardware model (its vendor's dvcq poller on the model's ring).
    Model,
}

impl BackendKind {
    /// The name `dvcq devices` prints.
    pub const fn name(self) -> &'static str {
        match self {
            BackendKind::Mlx5 => "mlx5",
            BackendKind::Irdma => "irdma",
            BackendKind::Rxe => "rxe",
            BackendKind::Generic => "generic",
            BackendKind::Model => "model",
        }
    }
}

/// The backend a CQ runs and why that one (for a fallback: what the direct attach refused).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Backend {
    /// The poller.
    pub kind: BackendKind,
    /// Why it was chosen.
    pub reason: String,
}

/// Which backends `Context::create_cq` may pick.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BackendChoice {
    /// The direct backend where one applies and its self-checks pass, else the generic one.
    #[default]
    Auto,
    /// rdma-core's `ibv_poll_cq`, even where a direct backend applies (the reference).
    Generic,
    /// A direct backend or an error (no silent fallback).
    Direct,
    /// rdma-core's extended CQ (`ibv_create_cq_ex` with every standard field, and the
    /// completion timestamp when [`crate::CqOptions::timestamps`] asks), polled with
    /// `ibv_start_poll` / `ibv_next_poll` / `ibv_wc_read_*`: what `dvcq validate` compares
    /// with the other pollers. Not on a model, which has no rdma-core poll.
    Extended,
}

/// The pollers behind a [`crate::Cq`].
// rxe's poller holds its failure counts by status (200 bytes) inline: a Cq is made once, and
// a box would cost every poll call a load for them.
#[allow(clippy::large_enum_variant)]
// An explicit tag: the niche-encoded one cost an empty poll's variant test eleven
// instructions.
#[repr(u8)]
#[derive(Debug)]
pub(crate) enum Poller {
    Generic(super::generic::GenericCq),
    Rxe(super::rxe::RxeBackend),
    Mlx5(Box<super::mlx5::Mlx5Backend>),
    Irdma(Box<super::irdma::IrdmaBackend>),
    Model(crate::model_device::ModelCq),
}

impl Poller {
    /// True when a direct backend's ring holds nothing to take now (one CQE or index read,
    /// no side effect); false when it may, or for a backend without such a test.
    #[inline(always)]
    pub(crate) fn nothing_ready(&self) -> bool {
        // Tests in a row rather than a `match`, whose jump table cost more than the ring read.
        if let Poller::Mlx5(m) = self {
            m.nothing_ready()
        } else if let Poller::Irdma(m) = self {
            m.nothing_ready()
        } else if let Poller::Rxe(r) = self {
            r.nothing_ready()
        } else {
            false
        }
    }
}

/// The reason text of a backend chosen without any attempt at a direct one.
pub(crate) fn backend(kind: BackendKind, reason: impl Into<String>) -> Backend {
    Backend { kind, reason: reason.into() }
}
