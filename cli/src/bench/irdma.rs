//! The irdma benchmark target: the E810 (GEN2) model ring of 32-byte CQEs, half SQ and half
//! RQ completions on one QP, on two taking turns, or on 16 in a scrambled order (e810-dv's
//! `bench_ring_qps`).

use super::{BenchTarget, Mix};
use dvcq_e810_dv::model::{bench_ring_qps, BenchRing, BENCH_MANY};
use dvcq_provider::Completion;

/// irdma model + poller with one lap of CQEs precomputed.
#[derive(Debug)]
pub struct IrdmaBench {
    ring: BenchRing,
    out: Vec<Completion>,
}

impl IrdmaBench {
    /// A lap of `entries - 1` CQEs (irdma keeps one slot free) in a ring of `entries`.
    ///
    /// # Errors
    ///
    /// A message when the mix is not send/recv, two-qps or many-qps, or the model cannot be
    /// set up.
    pub fn new(entries: u32, mix: Mix) -> Result<Self, String> {
        let qps = match mix {
            Mix::SendRecv => 1,
            Mix::TwoQps => 2,
            Mix::ManyQps => BENCH_MANY,
            _ => return Err("the irdma benchmark runs the send-recv, two-qps and many-qps mixes only".into()),
        };
        let ring = bench_ring_qps(entries - 1, qps).map_err(|e| e.to_string())?;
        Ok(Self { out: vec![Completion::default(); ring.lap_len()], ring })
    }
}

impl BenchTarget for IrdmaBench {
    fn name(&self) -> String {
        "irdma model (GEN2), 32-byte CQEs".into()
    }
    fn entries(&self) -> u32 {
        self.ring.lap_len() as u32
    }
    fn prepare_lap(&mut self) {
        // The lap always fits: the previous one was drained (or discarded in the baseline).
        let _ = self.ring.refill();
    }
    fn discard_lap(&mut self) {
        self.ring.discard();
    }
    #[inline(never)]
    fn poll_full(&mut self, batch: usize) -> usize {
        self.ring.drain(&mut self.out, batch)
    }
    #[inline(never)]
    fn poll_views(&mut self) -> usize {
        let mut v = self.ring.cq.views();
        let mut n = 0;
        while let Some(x) = v.next() {
            std::hint::black_box((x.op(), x.comp_ctx(), x.wqe_idx(), x.payload_len()));
            n += 1;
        }
        n
    }
    #[inline(never)]
    fn poll_empty(&mut self, batch: usize) -> usize {
        let end = batch.max(1).min(self.out.len());
        self.ring.cq.poll(&mut self.out[..end])
    }
    #[inline(never)]
    fn noop(&mut self, batch: usize) -> usize {
        let end = batch.max(1).min(self.out.len());
        std::hint::black_box(&mut self.out[..end]).len() - end
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dvcq_provider::{WcOpcode, WcStatus};

    /// Every irdma mix polls to what it claims to time: one lap of successful completions,
    /// each QP's sends and receives taking turns, no fault items, and as many QPs as the
    /// mix names.
    #[test]
    fn every_mix_polls_to_the_completions_it_claims() {
        for (mix, qps) in [(Mix::SendRecv, 1), (Mix::TwoQps, 2), (Mix::ManyQps, BENCH_MANY as usize)] {
            let mut b = IrdmaBench::new(64, mix).unwrap();
            for lap in 0..3 {
                b.prepare_lap();
                // One batch of a whole lap: the bench's drain reuses the front of `out`.
                let lap_len = b.out.len();
                assert_eq!(b.poll_full(lap_len), lap_len, "{mix:?}, lap {lap}");
                let mut seen = std::collections::HashMap::new();
                for (i, c) in b.out.iter().enumerate() {
                    let j = seen.entry(c.qp_num).or_insert(0u32);
                    let want = if *j % 2 == 0 { WcOpcode::Send } else { WcOpcode::Recv };
                    *j += 1;
                    assert_eq!(c.fault(), None, "{mix:?}, lap {lap}, item {i}");
                    assert_eq!((c.status, c.opcode), (WcStatus::Success, want), "{mix:?}, lap {lap}, item {i}");
                }
                assert_eq!(seen.len(), qps, "{mix:?}, lap {lap}");
            }
        }
    }

    /// The view walk counts a lap; the empty poll and its baseline return nothing; the
    /// prepare-only baseline frees each lap for the next without polling it.
    #[test]
    fn views_empty_polls_and_the_baseline_do_what_they_time() {
        let mut b = IrdmaBench::new(64, Mix::SendRecv).unwrap();
        b.prepare_lap();
        assert_eq!(b.poll_views(), 63);
        for batch in [0, 1, 16, 1000] {
            assert_eq!(b.noop(batch), 0, "batch {batch}");
        }
        let mut p = IrdmaBench::new(64, Mix::SendRecv).unwrap();
        assert_eq!(p.poll_empty(16), 0);
        for _ in 0..4 {
            p.prepare_lap();
            p.discard_lap();
        }
        assert!(!p.ring.model.in_error(), "a discarded lap leaves room for the next");
    }
}
