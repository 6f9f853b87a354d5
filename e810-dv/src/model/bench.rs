//! The benchmark ring: a GEN2 model with 32-byte CQEs, half SQ SEND and half RQ RECV
//! completions on one RC QP, no errors (the irdma.md performance-target workload).

use super::{IrdmaModel, ModelConfig, ModelCqe, ModelError};
use crate::cq::IrdmaCq;
use crate::registry::{QpConfig, QpRegistry};
use crate::status::Compat;
use dvcq_provider::Completion;
use dvcq_uapi::irdma::codes::{rq_op, sq_op};
use dvcq_uapi::irdma::HwRev;

/// Completion context of the benchmark QP.
pub const BENCH_CTX: u64 = 0x7f00_dead_0040;
/// Its QP number.
pub const BENCH_QPN: u32 = 0x2a;
/// Completion context of the second QP ([`bench_ring_qps`]).
pub const BENCH_CTX2: u64 = 0x7f00_dead_0080;
/// Its QP number.
pub const BENCH_QPN2: u32 = 0x2b;
const WQ: u32 = 1 << 12;

/// A model ring and its poller; [`BenchRing::refill`] writes one lap of `n` CQEs.
#[derive(Debug)]
pub struct BenchRing {
    /// The model (producer).
    pub model: IrdmaModel,
    /// The poller (consumer).
    pub cq: IrdmaCq,
    lap: Vec<ModelCqe>,
}

/// A GEN2 model with a ring of `n + 1` slots (at least 4; the model keeps one free, so a
/// lap fills it; any size, as real irdma rings are) and a poller, one RC QP registered
/// (identity wr_ids), and one lap of `n` CQEs precomputed: even positions SQ SEND
/// completions, odd positions 64-byte RQ RECV completions. Call
/// [`BenchRing::refill`] to write the lap, then poll it all; repeat.
///
/// # Errors
///
/// [`ModelError`] if the model or poller cannot be set up.
pub fn bench_ring(n: u32) -> Result<BenchRing, ModelError> {
    bench_ring_qps(n, false)
}

/// [`bench_ring`], with a second RC QP when `two_qps`: the two take turns CQE by CQE, each
/// with the same send/receive pattern (a CQ shared by several QPs).
///
/// # Errors
///
/// [`ModelError`] if the model or poller cannot be set up.
pub fn bench_ring_qps(n: u32, two_qps: bool) -> Result<BenchRing, ModelError> {
    let entries = n.saturating_add(1).max(4);
    let model = IrdmaModel::new(ModelConfig::new(HwRev::Gen2, entries))?;
    let mut qps = QpRegistry::new(HwRev::Gen2);
    let bad = |_| ModelError::Config("bench qp");
    qps.register(BENCH_CTX, QpConfig::rc(BENCH_QPN, WQ, WQ)).map_err(bad)?;
    if two_qps {
        qps.register(BENCH_CTX2, QpConfig::rc(BENCH_QPN2, WQ, WQ)).map_err(bad)?;
    }
    let cq = model.poller(qps, Compat::Current)?;
    let lap = (0..n)
        .map(|i| {
            // With two QPs, even positions are the first QP's and odd ones the second's.
            let (ctx, qpn, j) = match (two_qps, i % 2) {
                (true, 1) => (BENCH_CTX2, BENCH_QPN2, i / 2),
                (true, _) => (BENCH_CTX, BENCH_QPN, i / 2),
                (false, _) => (BENCH_CTX, BENCH_QPN, i),
            };
            let k = ((j / 2) % WQ) as u16;
            if j % 2 == 0 {
                ModelCqe::send(ctx, qpn, k, sq_op::SEND)
            } else {
                ModelCqe::recv(ctx, qpn, k, 0, rq_op::ROCE_SEND_ONLY, 64)
            }
        })
        .collect();
    Ok(BenchRing { model, cq, lap })
}

impl BenchRing {
    /// Writes the lap (the consumer must have drained the previous one).
    ///
    /// # Errors
    ///
    /// [`ModelError::Overflow`] if the previous lap was not polled.
    pub fn refill(&mut self) -> Result<(), ModelError> {
        self.model.push_all(self.lap.iter())
    }

    /// Marks the lap consumed without polling it (the benchmark's prepare-only baseline).
    pub fn discard(&mut self) {
        self.model.release_all();
    }

    /// CQEs per lap.
    pub fn lap_len(&self) -> usize {
        self.lap.len()
    }

    /// Polls in batches of `batch` until the ring is empty; returns completions seen. Not
    /// inlined, so profilers can attribute the poll cost to it.
    #[inline(never)]
    pub fn drain(&mut self, out: &mut [Completion], batch: usize) -> usize {
        let b = batch.clamp(1, out.len().max(1)).min(out.len());
        let mut total = 0;
        loop {
            let got = self.cq.poll(&mut out[..b]);
            total += got;
            if got == 0 {
                return total;
            }
        }
    }
}
