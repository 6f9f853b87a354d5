//! The one CQ handle an application polls, whatever the device: a backend chosen when the
//! CQ is made or attached, dispatched once per poll call (never per CQE).

mod stats;
pub mod views;

pub use stats::CqStats;
pub use views::{CqViews, CqeView};

use crate::error::Error;
use dvcq_provider::Completion;
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
}

/// How to make a CQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqOptions {
    /// Completions the CQ must hold at least (the device may round up).
    pub depth: u32,
    /// The completion vector its events are delivered on.
    pub comp_vector: u32,
    /// Which backends may poll it.
    pub backend: BackendChoice,
}

impl CqOptions {
    /// A CQ of `depth` on vector 0 with the automatic backend choice.
    pub const fn new(depth: u32) -> Self {
        CqOptions { depth, comp_vector: 0, backend: BackendChoice::Auto }
    }

    /// The same with another backend choice.
    pub const fn backend(mut self, choice: BackendChoice) -> Self {
        self.backend = choice;
        self
    }

    /// The same on another completion vector.
    pub const fn comp_vector(mut self, vector: u32) -> Self {
        self.comp_vector = vector;
        self
    }
}

/// The pollers behind a [`Cq`].
#[derive(Debug)]
pub(crate) enum Poller {
    #[cfg(dvcq_rdma_core)]
    Generic(crate::backend::generic::GenericCq),
    #[cfg(dvcq_rdma_core)]
    Rxe(crate::backend::rxe::RxeBackend),
    #[cfg(dvcq_rdma_core)]
    Mlx5(Box<crate::backend::mlx5::Mlx5Backend>),
    #[cfg(dvcq_rdma_core)]
    Irdma(Box<crate::backend::irdma::IrdmaBackend>),
    Model(crate::model_device::ModelCq),
}

/// A completion queue on a device or a model.
///
/// `poll` works the same on every backend and returns completions with libibverbs' meanings
/// (a CQE a direct backend cannot turn into a completion comes back as a fault item, see
/// [`Completion::fault`]). A `Cq` is `Send` but not `Sync`: one consumer.
#[derive(Debug)]
pub struct Cq {
    pub(crate) poller: Poller,
    backend: Backend,
    device: String,
    depth: u32,
    stats: CqStats,
    /// Event mode (`crate::event`): its id on a channel, the channel, events taken.
    pub(crate) id: crate::event::CqId,
    pub(crate) binding: Option<crate::event::channel::Binding>,
    pub(crate) events_taken: u64,
    /// A CQ error event (overrun) was taken: the CQ is in error and writes nothing more.
    pub(crate) in_error: bool,
}

impl Cq {
    pub(crate) fn new(poller: Poller, backend: Backend, device: String, depth: u32) -> Cq {
        let id = crate::event::CqId::next();
        Cq {
            poller,
            backend,
            device,
            depth,
            stats: CqStats::default(),
            id,
            binding: None,
            events_taken: 0,
            in_error: false,
        }
    }

    /// Moves up to `out.len()` completions out of the CQ, in order; returns how many.
    #[inline]
    pub fn poll(&mut self, out: &mut [Completion]) -> usize {
        let n = match &mut self.poller {
            #[cfg(dvcq_rdma_core)]
            Poller::Generic(g) => g.poll(out),
            #[cfg(dvcq_rdma_core)]
            Poller::Rxe(r) => r.poll(out),
            #[cfg(dvcq_rdma_core)]
            Poller::Mlx5(m) => m.poll(out),
            #[cfg(dvcq_rdma_core)]
            Poller::Irdma(m) => m.poll(out),
            Poller::Model(m) => m.poll(out),
        };
        self.stats.count(&out[..n]);
        n
    }

    /// Hands the CQ to another poller (a direct attach refused before it consumed any
    /// CQE), saying why.
    #[cfg(dvcq_rdma_core)]
    pub(crate) fn fall_back(&mut self, poller: Poller, backend: Backend) {
        self.poller = poller;
        self.backend = backend;
    }

    /// The backend polling this CQ, and why.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// The device it was made on.
    pub fn device(&self) -> &str {
        &self.device
    }

    /// The depth the device gave (at least what was asked for).
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// Counters since the CQ was made.
    pub fn stats(&self) -> CqStats {
        self.stats
    }

    /// The error of the last poll call that failed inside the backend (rdma-core's
    /// `ibv_poll_cq` returning an error), cleared by reading it. Such a call returns the
    /// completions it had; none is lost.
    pub fn take_error(&mut self) -> Option<Error> {
        match &mut self.poller {
            #[cfg(dvcq_rdma_core)]
            Poller::Generic(g) => {
                let e = g.take_error()?;
                self.stats.poll_failures += 1;
                Some(Error::Verbs { device: self.device.clone(), source: e })
            }
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }
}
