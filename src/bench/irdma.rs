//! The irdma benchmark target: the E810 (GEN2) model ring of 32-byte CQEs, half SQ and half
//! RQ completions on one QP, or on two taking turns (e810-dv's `bench_ring_qps`).

use super::{BenchTarget, Mix};
use dvcq_e810_dv::model::{bench_ring_qps, BenchRing};
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
    /// A message when the mix is not send/recv or two-qps, or the model cannot be set up.
    pub fn new(entries: u32, mix: Mix) -> Result<Self, String> {
        let two_qps = match mix {
            Mix::SendRecv => false,
            Mix::TwoQps => true,
            _ => return Err("the irdma benchmark runs the send-recv and two-qps mixes only".into()),
        };
        let ring = bench_ring_qps(entries - 1, two_qps).map_err(|e| e.to_string())?;
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

    /// Both irdma mixes poll to what they claim to time: one lap of successful sends and
    /// receives taking turns (per QP with two QPs), no fault items.
    #[test]
    fn both_mixes_poll_to_the_completions_they_claim() {
        for mix in [Mix::SendRecv, Mix::TwoQps] {
            let mut b = IrdmaBench::new(64, mix).unwrap();
            for lap in 0..3 {
                b.prepare_lap();
                // One batch of a whole lap: the bench's drain reuses the front of `out`.
                let lap_len = b.out.len();
                assert_eq!(b.poll_full(lap_len), lap_len, "{mix:?}, lap {lap}");
                for (i, c) in b.out.iter().enumerate() {
                    let j = if mix == Mix::TwoQps { i / 2 } else { i };
                    let want = if j % 2 == 0 { WcOpcode::Send } else { WcOpcode::Recv };
                    assert_eq!(c.fault(), None, "{mix:?}, lap {lap}, item {i}");
                    assert_eq!((c.status, c.opcode), (WcStatus::Success, want), "{mix:?}, lap {lap}, item {i}");
                }
            }
        }
    }
}
