//! The benchmark ring: a GEN2 model with 32-byte CQEs, half SQ SEND and half RQ RECV
//! completions on one RC QP, no errors (the default `send-recv` mix of
//! `dvcq bench poll --vendor irdma`; docs/performance.md gives its figures and targets).

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
/// Completion context of the second QP ([`bench_ring_qps`]); the scrambled mix's later
/// QPs follow it 0x40 apart.
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

/// A GEN2 model with a ring of `n + 1` slots (at least 4, and even, as rdma-core sizes E810
/// rings; the model keeps one free, so a lap fills it) and a poller, one RC QP registered
/// (identity wr_ids), and one lap of `n` CQEs precomputed: even positions SQ SEND
/// completions, odd positions 64-byte RQ RECV completions. Call
/// [`BenchRing::refill`] to write the lap, then poll it all; repeat.
///
/// # Errors
///
/// [`ModelError`] if the model or poller cannot be set up.
pub fn bench_ring(n: u32) -> Result<BenchRing, ModelError> {
    bench_ring_qps(n, 1)
}

/// QPs of [`bench_ring_qps`]'s scrambled mix.
pub const BENCH_MANY: u32 = 16;

/// [`bench_ring`] on `qps` RC QPs sharing the CQ, each with the same send/receive
/// pattern: 1; 2, taking turns CQE by CQE (even positions the first QP's, odd ones the
/// second's); or [`BENCH_MANY`], in a fixed scrambled order
/// where a QP seldom completes twice in a row (a CQ shared by many connections).
///
/// # Errors
///
/// [`ModelError`] if the model or poller cannot be set up, or `qps` is not 1, 2 or
/// [`BENCH_MANY`].
pub fn bench_ring_qps(n: u32, qps: u32) -> Result<BenchRing, ModelError> {
    if ![1, 2, BENCH_MANY].contains(&qps) {
        return Err(ModelError::Config("bench qp count"));
    }
    let entries = n.saturating_add(1).max(4);
    let model = IrdmaModel::new(ModelConfig::new(HwRev::Gen2, entries))?;
    let mut reg = QpRegistry::new(HwRev::Gen2);
    let bad = |_| ModelError::Config("bench qp");
    let qp = |k: u32| match k {
        0 => (BENCH_CTX, BENCH_QPN),
        1 => (BENCH_CTX2, BENCH_QPN2),
        _ => (BENCH_CTX2 + u64::from(k) * 0x40, BENCH_QPN2 + k),
    };
    for k in 0..qps {
        let (ctx, qpn) = qp(k);
        let id = reg.register(ctx, QpConfig::rc(qpn, WQ, WQ)).map_err(bad)?;
        reg.preset_identity(id).map_err(bad)?;
    }
    let cq = model.poller(reg, Compat::Current)?;
    // Each QP's own count of CQEs so far: its sends and receives take turns.
    let mut seen = vec![0u32; qps as usize];
    let lap = (0..n)
        .map(|i| {
            let k = match qps {
                1 => 0,
                2 => i % 2,
                _ => dvcq_provider::scrambled_qp(i, qps),
            };
            let (ctx, qpn) = qp(k);
            let j = seen.get(k as usize).copied().unwrap_or(0);
            if let Some(c) = seen.get_mut(k as usize) {
                *c += 1;
            }
            let w = ((j / 2) % WQ) as u16;
            if j % 2 == 0 {
                ModelCqe::send(ctx, qpn, w, sq_op::SEND)
            } else {
                ModelCqe::recv(ctx, qpn, w, 0, rq_op::ROCE_SEND_ONLY, 64)
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

#[cfg(test)]
mod tests {
    use super::*;
    use dvcq_provider::{CqDriver, WcOpcode, WcStatus};

    /// Which QP position `i` of a lap belongs to, as the doc of [`bench_ring_qps`] says.
    fn qp_of(i: u32, qps: u32) -> (u64, u32) {
        let k = match qps {
            1 => 0,
            2 => i % 2,
            _ => dvcq_provider::scrambled_qp(i, qps),
        };
        match k {
            0 => (BENCH_CTX, BENCH_QPN),
            1 => (BENCH_CTX2, BENCH_QPN2),
            _ => (BENCH_CTX2 + u64::from(k) * 0x40, BENCH_QPN2 + k),
        }
    }

    #[test]
    fn a_lap_is_each_qp_s_sends_and_receives_taking_turns() {
        for qps in [1, 2, BENCH_MANY] {
            for n in [3, 7, 63, 301] {
                let mut b = bench_ring_qps(n, qps).unwrap();
                assert_eq!(b.lap_len(), n as usize);
                assert_eq!(CqDriver::info(&b.cq).entries, (n + 1).max(4), "n {n}");
                let mut out = vec![Completion::default(); n as usize + 8];
                // Two laps: the second starts where the first left the ring.
                for lap in 0..2 {
                    b.refill().unwrap();
                    let mut got = 0;
                    while let k @ 1.. = b.cq.poll(&mut out[got..]) {
                        got += k;
                    }
                    assert_eq!(got, n as usize, "qps {qps} n {n} lap {lap}");
                    let mut seen = std::collections::HashMap::<u32, u32>::new();
                    for (i, c) in out[..n as usize].iter().enumerate() {
                        let (_, qpn) = qp_of(i as u32, qps);
                        let j = seen.entry(qpn).or_default();
                        let what = format!("qps {qps} n {n} lap {lap} cqe {i}");
                        assert_eq!((c.qp_num, c.status), (qpn, WcStatus::Success), "{what}");
                        // Identity wr_ids: the QP's WQE index, one send then one receive.
                        assert_eq!(c.wr_id, u64::from(*j / 2), "{what}");
                        let want = if *j % 2 == 0 { (WcOpcode::Send, 0) } else { (WcOpcode::Recv, 64) };
                        assert_eq!((c.opcode, c.byte_len), want, "{what}");
                        *j += 1;
                    }
                    assert_eq!(seen.len(), qps.min(n) as usize, "every QP completes: qps {qps} n {n}");
                }
            }
        }
        assert!(matches!(bench_ring_qps(8, 3), Err(ModelError::Config(_))));
        assert!(matches!(bench_ring_qps(8, 0), Err(ModelError::Config(_))));
    }

    #[test]
    fn a_lap_is_polled_or_discarded_before_the_next_and_any_batch_drains_it() {
        let mut b = bench_ring(31).unwrap();
        let mut out = [Completion::default(); 16];
        // Any batch gives the whole lap: 1, larger than the buffer, and 0 (taken as 1).
        for batch in [1, 100, 0] {
            b.refill().unwrap();
            assert_eq!(b.drain(&mut out, batch), 31, "batch {batch}");
            assert_eq!(b.drain(&mut out, batch), 0);
        }
        // The prepare-only baseline: discarding frees the ring for the next lap without a
        // poll, lap after lap (the poller is then behind; that run never polls).
        let mut p = bench_ring(31).unwrap();
        for _ in 0..5 {
            p.refill().unwrap();
            p.discard();
        }
        assert!(!p.model.in_error());
        // A lap written over one not yet polled overflows the ring, which the model then
        // holds in error, as the device raises a CQ error.
        b.refill().unwrap();
        assert!(matches!(b.refill(), Err(ModelError::Overflow { .. })));
        assert!(b.model.in_error());
    }
}
