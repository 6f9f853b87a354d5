//! The mlx5 benchmark target: a model ring of 64- or 128-byte CQEs on one QP.

use super::{BenchTarget, Mix};
use dvcq_mlx5_dv::model::build::{self, Entry, ErrSpec};
use dvcq_mlx5_dv::model::compress::{self, Compression, Policy};
use dvcq_mlx5_dv::model::{Mlx5Model, ModelConfig};
use dvcq_mlx5_dv::{CompressionConfig, CqConfig, Mlx5Cq, QpConfig, Registry};
use dvcq_provider::Completion;
use dvcq_uapi::mlx5::opcode::{cqe_opcode, syndrome, wqe_opcode};

const QPN: u32 = 0x1c7;
const SRQN: u32 = 0x2d;
const QPN2: u32 = 0x2e8;

/// QPs of the many-QPs mix.
const MANY: u32 = 16;

/// The QPN of the many-QPs mix's QP `k` (QP 0 is [`QPN`]).
fn many_qpn(k: u32) -> u32 {
    if k == 0 {
        QPN
    } else {
        QPN2 + 3 * k
    }
}

/// mlx5 model + poller, with one lap of CQEs precomputed.
#[derive(Debug)]
pub struct Mlx5Bench<const S: usize> {
    model: Mlx5Model,
    cq: Mlx5Cq<S>,
    lap: Vec<Entry>,
    out: Vec<Completion>,
}

impl<const S: usize> Mlx5Bench<S> {
    /// A ring of `entries` CQEs with the given mix, on a CQ created with `compression`.
    /// With `back_pressure` every lap compresses fully (the model is under constant
    /// back-pressure); without it the compression-enabled CQ gets regular CQEs only.
    ///
    /// # Errors
    ///
    /// A message when the model or poller cannot be set up, or the mix cannot compress.
    pub fn new(
        entries: u32,
        mix: Mix,
        compression: Option<CompressionConfig>,
        back_pressure: bool,
    ) -> Result<Self, String> {
        let mut mc = ModelConfig::new(entries);
        mc.cqe_size = S as u32;
        let policy = if back_pressure { Policy::Always } else { Policy::Never };
        mc.compression = compression.map(|c| Compression { layout: c.layout, format: c.format, policy });
        // The baseline run prepares laps without polling, so the model must not stop on a
        // full ring: overrun-ignore, as UCX creates its CQs.
        mc.overrun_ignore = true;
        let model = Mlx5Model::new(mc).map_err(|e| e.to_string())?;
        let mut reg = Registry::new();
        let mut qp = QpConfig::rc(QPN, 1 << 16, 1 << 16);
        if mix == Mix::SendSrq {
            reg.add_srq(SRQN, 1 << 16).map_err(|e| e.to_string())?;
            qp.srqn = Some(SRQN);
        }
        reg.add_qp(qp).map_err(|e| e.to_string())?;
        if mix == Mix::TwoQps {
            reg.add_qp(QpConfig::rc(QPN2, 1 << 16, 1 << 16)).map_err(|e| e.to_string())?;
        }
        if mix == Mix::ManyQps {
            for k in 1..MANY {
                reg.add_qp(QpConfig::rc(many_qpn(k), 1 << 12, 1 << 12)).map_err(|e| e.to_string())?;
            }
        }
        let cq = model.poller::<S>(reg, CqConfig::default()).map_err(|e| e.to_string())?;
        // Single-kind mixes use consecutive WQE counters, so the same lap is what a
        // compressing device turns into full sessions: compressed and plain runs compare
        // like for like.
        let lap = match mix {
            Mix::Send => Some(compress::bench_lap(entries, QPN, true)),
            Mix::Recv => Some(compress::bench_lap(entries, QPN, false)),
            _ if compression.is_some() => {
                return Err("--compression needs --mix send or --mix recv (sessions hold one kind of completion)".into())
            }
            _ => None,
        };
        // Per-QP send and receive counters of the many-QPs mix.
        let mut counters = [(0u16, 0u16); MANY as usize];
        let lap = lap.unwrap_or_else(|| {
            (0..entries)
                .map(|i| {
                    if mix == Mix::ManyQps {
                        let k = dvcq_provider::scrambled_qp(i, MANY);
                        let (sends, recvs) = &mut counters[k as usize];
                        let next = |c: &mut u16| core::mem::replace(c, c.wrapping_add(1));
                        return if i % 2 == 0 {
                            build::req(many_qpn(k), next(sends), wqe_opcode::SEND, 0)
                        } else {
                            build::resp(cqe_opcode::RESP_SEND, many_qpn(k), next(recvs), 64, 0)
                        };
                    }
                    // Two QPs take turns: each sees a send then a receive.
                    let (qpn, ctr, send) = if mix == Mix::TwoQps {
                        ([QPN, QPN2][(i % 2) as usize], (i / 4) as u16, i % 4 < 2)
                    } else {
                        (QPN, (i / 2) as u16, i % 2 == 0)
                    };
                    if mix == Mix::Errors && i % 16 == 15 {
                        build::err(ErrSpec {
                            requester: true,
                            qpn: QPN,
                            wqe_counter: ctr,
                            syndrome: syndrome::WR_FLUSH_ERR,
                            vendor_err_synd: 0xf9,
                            ..ErrSpec::default()
                        })
                    } else if send {
                        build::req(qpn, ctr, wqe_opcode::SEND, 0)
                    } else if mix == Mix::SendSrq {
                        build::resp(cqe_opcode::RESP_SEND, qpn, ctr, 64, 0).srqn_uidx(SRQN)
                    } else {
                        build::resp(cqe_opcode::RESP_SEND, qpn, ctr, 64, 0)
                    }
                })
                .collect()
        });
        Ok(Self { model, cq, lap, out: vec![Completion::default(); entries as usize] })
    }
}

impl<const S: usize> BenchTarget for Mlx5Bench<S> {
    fn name(&self) -> String {
        match self.model.config().compression {
            Some(c) if c.policy == Policy::Never => {
                format!("mlx5 model, {S}-byte CQEs, {} compression, idle", c.layout.word())
            }
            Some(c) => format!("mlx5 model, {S}-byte CQEs, {} compression", c.layout.word()),
            None => format!("mlx5 model, {S}-byte CQEs"),
        }
    }
    fn entries(&self) -> u32 {
        self.lap.len() as u32
    }
    fn prepare_lap(&mut self) {
        for e in &self.lap {
            // overrun-ignore: the model never refuses.
            let _ = self.model.push(e);
        }
        // Write a session the compressor still holds back.
        let _ = self.model.flush();
    }
    #[inline(never)]
    fn poll_full(&mut self, batch: usize) -> usize {
        let mut total = 0;
        let batch = batch.max(1);
        loop {
            let end = (total + batch).min(self.out.len());
            if total == end {
                return total;
            }
            let Some(chunk) = self.out.get_mut(total..end) else {
                return total;
            };
            let n = self.cq.poll(chunk);
            if n == 0 {
                return total;
            }
            total += n;
        }
    }
    #[inline(never)]
    fn poll_views(&mut self) -> usize {
        let mut v = self.cq.views();
        let mut n = 0;
        while let Some(x) = v.next() {
            std::hint::black_box((x.opcode(), x.qpn(), x.wqe_counter(), x.byte_cnt()));
            n += 1;
        }
        n
    }
    #[inline(never)]
    fn poll_empty(&mut self, batch: usize) -> usize {
        let end = batch.max(1).min(self.out.len());
        self.cq.poll(&mut self.out[..end])
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
    use crate::mlx5::{CompLayout, MiniFormat};
    use dvcq_provider::{WcOpcode, WcStatus};

    /// Every mix polls to what it claims to time: one lap, every CQE a completion of the
    /// expected kind, no fault items (a mix that set up its QPs wrongly would quietly time
    /// the fault path), flush errors only where the `errors` mix puts them.
    #[test]
    fn every_mix_polls_to_the_completions_it_claims() {
        let entries = 64;
        let uncompressed = [Mix::SendRecv, Mix::Send, Mix::Recv, Mix::Errors, Mix::SendSrq, Mix::TwoQps, Mix::ManyQps]
            .map(|m| (m, None));
        let mut cases: Vec<(Mix, Option<(CompLayout, bool)>)> = uncompressed.to_vec();
        for layout in [CompLayout::Basic, CompLayout::Enhanced] {
            for mix in [Mix::Send, Mix::Recv] {
                for back_pressure in [true, false] {
                    cases.push((mix, Some((layout, back_pressure))));
                }
            }
        }
        for (mix, comp) in cases {
            let cfg = comp.map(|(layout, _)| CompressionConfig { layout, format: MiniFormat::Hash });
            let back_pressure = comp.is_some_and(|(_, bp)| bp);
            let mut b = Mlx5Bench::<64>::new(entries, mix, cfg, back_pressure).unwrap();
            for lap in 0..3 {
                b.prepare_lap();
                let what = format!("{mix:?}, {comp:?}, lap {lap}");
                assert_eq!(b.poll_full(16), entries as usize, "{what}");
                for (i, c) in b.out.iter().enumerate() {
                    assert_eq!(c.fault(), None, "{what}: item {i}");
                    let send = match mix {
                        Mix::Send => true,
                        Mix::Recv => false,
                        Mix::TwoQps => i % 4 < 2,
                        _ => i % 2 == 0,
                    };
                    if mix == Mix::Errors && i % 16 == 15 {
                        assert_eq!(c.status, WcStatus::WrFlushErr, "{what}: item {i}");
                        continue;
                    }
                    let want = if send { WcOpcode::Send } else { WcOpcode::Recv };
                    assert_eq!((c.status, c.opcode), (WcStatus::Success, want), "{what}: item {i}");
                }
                // The view walk sees the same lap, up to the first compressed session (only
                // a poll decompresses), and consumes what it saw.
                b.prepare_lap();
                let (seen, rest) = (b.poll_views(), b.poll_full(16));
                assert_eq!(seen + rest, entries as usize, "{what}: views");
                assert_eq!(rest == 0, !back_pressure, "{what}: views end only at a session");
                assert_eq!(b.poll_empty(16), 0, "{what}: drained");
            }
        }
    }

    /// The banner names the CQE size and compression, and says when the compression CQ is
    /// idle (no back-pressure, so regular CQEs only).
    #[test]
    fn the_name_says_what_ring_is_measured() {
        let hash = |layout| Some(CompressionConfig { layout, format: MiniFormat::Hash });
        let name = |comp, bp| Mlx5Bench::<128>::new(16, Mix::Send, comp, bp).unwrap().name();
        assert_eq!(name(None, false), "mlx5 model, 128-byte CQEs");
        assert_eq!(name(hash(CompLayout::Basic), true), "mlx5 model, 128-byte CQEs, basic compression");
        assert_eq!(name(hash(CompLayout::Enhanced), false), "mlx5 model, 128-byte CQEs, enhanced compression, idle");
    }

    /// The empty-poll baseline does the call and nothing else: it returns 0 like an empty
    /// poll, whatever the batch.
    #[test]
    fn the_empty_poll_and_its_baseline_return_nothing() {
        let mut b = Mlx5Bench::<64>::new(16, Mix::SendRecv, None, false).unwrap();
        for batch in [0, 1, 16, 1000] {
            assert_eq!((b.poll_empty(batch), b.noop(batch)), (0, 0), "batch {batch}");
        }
    }
}
