//! The mlx5 benchmark target: a model ring of 64- or 128-byte CQEs on one QP.

use super::{BenchTarget, Mix};
use dvcq_mlx5_dv::model::build::{self, Entry, ErrSpec};
use dvcq_mlx5_dv::model::compress::{self, Compression, Policy};
use dvcq_mlx5_dv::model::wqe::{self, DataSeg};
use dvcq_mlx5_dv::model::{Mlx5Model, ModelConfig};
use dvcq_mlx5_dv::{CompressionConfig, CqConfig, Mlx5Cq, QpConfig, Registry};
use dvcq_provider::{Completion, DmaBuffer};
use dvcq_uapi::mlx5::opcode::{cqe_opcode, syndrome, wqe_opcode};
use std::sync::Arc;

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

/// The memory key of the `recv-inline` mix's receive buffers.
const LKEY: u32 = 0x5a5a;
/// Bytes of each receive buffer of the `recv-inline` mix: the most a CQE carries.
const RECV_BUF: usize = 64;
/// The receive WQE stride of the `recv-inline` mix: one data segment, as rdma-core sizes
/// the RQ of a QP created with one receive SGE.
const RECV_STRIDE: usize = 16;

/// The most inline data a CQE of `cqe_size` bytes carries: 32 bytes in the cqe64 itself,
/// 64 in the first half of a 128-byte CQE.
pub const fn max_inline_payload(cqe_size: u32) -> u32 {
    if cqe_size >= 128 {
        64
    } else {
        32
    }
}

/// mlx5 model + poller, with one lap of CQEs precomputed.
#[derive(Debug)]
pub struct Mlx5Bench<const S: usize> {
    model: Mlx5Model,
    cq: Mlx5Cq<S>,
    lap: Vec<Entry>,
    out: Vec<Completion>,
    /// `recv-inline`: the receive buffers the WQEs name (one of [`RECV_BUF`] bytes per
    /// WQE) and the payload each receive carries; `None` for other mixes.
    inline: Option<(Arc<DmaBuffer>, usize)>,
}

impl<const S: usize> Mlx5Bench<S> {
    /// A ring of `entries` CQEs with the given mix, on a CQ created with `compression`.
    /// With `back_pressure` every lap compresses fully (the model is under constant
    /// back-pressure); without it the compression-enabled CQ gets regular CQEs only.
    ///
    /// `payload` is the inline data of each receive of the `recv-inline` mix (1 to 32 bytes in a
    /// 64-byte CQE, 64 in a 128-byte one; ignored by other mixes).
    ///
    /// # Errors
    ///
    /// A message when the model or poller cannot be set up, the mix cannot compress, or the
    /// payload does not fit the CQE.
    pub fn new(
        entries: u32,
        mix: Mix,
        compression: Option<CompressionConfig>,
        back_pressure: bool,
        payload: u32,
    ) -> Result<Self, String> {
        let mut mc = ModelConfig::new(entries);
        mc.cqe_size = S as u32;
        let policy = if back_pressure { Policy::Always } else { Policy::Never };
        mc.compression = compression.map(|c| Compression { layout: c.layout, format: c.format, policy });
        // The baseline run prepares laps without polling, so the model must not stop on a
        // full ring: overrun-ignore, as UCX creates its CQs.
        mc.overrun_ignore = true;
        let model = Mlx5Model::new(mc).map_err(|e| e.to_string())?;
        if mix == Mix::RecvInline {
            check_inline(entries, payload, S as u32)?;
        }
        let mut reg = Registry::new();
        // recv-inline: a receive queue of one lap, whose every WQE is posted for the lap.
        let rq = if mix == Mix::RecvInline { entries } else { 1 << 16 };
        let mut qp = QpConfig::rc(QPN, 1 << 16, rq);
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
        let inline = if mix == Mix::RecvInline { Some(inline_receives(&mut reg, entries)?) } else { None };
        let cq = model.poller::<S>(reg, CqConfig::default()).map_err(|e| e.to_string())?;
        // Single-kind mixes use consecutive WQE counters, so the same lap is what a
        // compressing device turns into full sessions: compressed and plain runs compare
        // like for like.
        let lap = match mix {
            Mix::Send => Some(compress::bench_lap(entries, QPN, true)),
            Mix::Recv => Some(compress::bench_lap(entries, QPN, false)),
            // The recv mix's receives, each with its data in the CQE.
            Mix::RecvInline if compression.is_none() => {
                let data: Vec<u8> = (1..=payload as u8).collect();
                Some(compress::bench_lap(entries, QPN, false).into_iter().map(|e| e.inline(&data)).collect())
            }
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
        let inline = inline.map(|mem| (mem, payload as usize));
        Ok(Self { model, cq, lap, out: vec![Completion::default(); entries as usize], inline })
    }
}

/// Refuses a `recv-inline` mix the ring cannot carry: a payload that does not fit the CQE,
/// or a lap of more receives than a receive queue holds (its WQE counters are 16 bits).
pub fn check_inline(entries: u32, payload: u32, cqe_size: u32) -> Result<(), String> {
    let max = max_inline_payload(cqe_size);
    if !(1..=max).contains(&payload) {
        let other = if cqe_size >= 128 { String::new() } else { " (--cqe-size 128: 64)".to_owned() };
        return Err(format!(
            "--payload {payload}: a {cqe_size}-byte CQE carries 1 to {max} bytes of inline data{other}"
        ));
    }
    if entries > 1 << 16 {
        return Err(format!("--entries {entries}: --mix recv-inline posts one receive per entry, at most 65536"));
    }
    Ok(())
}

/// Sets up QP [`QPN`]'s receive queue for the `recv-inline` mix: a WQE per ring entry,
/// each with one data segment naming its own [`RECV_BUF`]-byte buffer in one memory
/// region, registered so that the poll copies each receive's inline data there. Returns
/// the buffers.
fn inline_receives(reg: &mut Registry, entries: u32) -> Result<Arc<DmaBuffer>, String> {
    let n = entries as usize;
    let mem = Arc::new(DmaBuffer::new(n * RECV_BUF).map_err(|e| e.to_string())?);
    let rq = Arc::new(DmaBuffer::new(n * RECV_STRIDE).map_err(|e| e.to_string())?);
    for i in 0..n {
        let seg = DataSeg { addr: mem.as_ptr() as u64 + (i * RECV_BUF) as u64, len: RECV_BUF as u32, lkey: LKEY };
        rq.write_bytes(i * RECV_STRIDE, &wqe::recv_wqe(None, &[seg], RECV_STRIDE)).map_err(|e| e.to_string())?;
    }
    let err = |e: dvcq_mlx5_dv::RegistryError| e.to_string();
    reg.add_memory_region(mem.memory_region(0, mem.len(), LKEY).map_err(|e| e.to_string())?).map_err(err)?;
    reg.set_recv_wqes(QPN, rq.wq_buffer(0, rq.len()).map_err(|e| e.to_string())?, RECV_STRIDE as u32, false)
        .map_err(err)?;
    Ok(mem)
}

impl<const S: usize> BenchTarget for Mlx5Bench<S> {
    fn name(&self) -> String {
        match self.model.config().compression {
            Some(c) if c.policy == Policy::Never => {
                format!("mlx5 model, {S}-byte CQEs, {} compression, idle", c.layout.word())
            }
            Some(c) => format!("mlx5 model, {S}-byte CQEs, {} compression", c.layout.word()),
            None => match self.inline {
                Some((_, payload)) => format!("mlx5 model, {S}-byte CQEs, {payload} B inline"),
                None => format!("mlx5 model, {S}-byte CQEs"),
            },
        }
    }
    fn entries(&self) -> u32 {
        self.lap.len() as u32
    }
    fn prepare_lap(&mut self) {
        if self.inline.is_some() {
            // recv-inline: a receive posted for each CQE, so that each one's data is copied
            // (the prepare-only baseline posts them too, so the figure is the poll alone).
            if let Some(qp) = self.cq.registry_mut().qp_mut(QPN) {
                for i in 0..self.lap.len() {
                    qp.rq.post(i as u64);
                }
            }
        }
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
        let uncompressed = [
            Mix::SendRecv,
            Mix::Send,
            Mix::Recv,
            Mix::RecvInline,
            Mix::Errors,
            Mix::SendSrq,
            Mix::TwoQps,
            Mix::ManyQps,
        ]
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
            let mut b = Mlx5Bench::<64>::new(entries, mix, cfg, back_pressure, 32).unwrap();
            for lap in 0..3 {
                b.prepare_lap();
                let what = format!("{mix:?}, {comp:?}, lap {lap}");
                assert_eq!(b.poll_full(16), entries as usize, "{what}");
                for (i, c) in b.out.iter().enumerate() {
                    assert_eq!(c.fault(), None, "{what}: item {i}");
                    let send = match mix {
                        Mix::Send => true,
                        Mix::Recv | Mix::RecvInline => false,
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

    /// The recv-inline mix times what it says: every receive's data, `--payload` bytes in
    /// the CQE (format 1, or format 2 past 32 bytes on a 128-byte CQE), lands in the buffer
    /// its WQE names, lap after lap, one CQE at a time or in batches; nothing is left
    /// uncopied, and the rest of each buffer stays as it was.
    #[test]
    fn the_inline_mix_copies_every_receive_into_its_buffer() {
        fn check<const S: usize>(payload: u32, batch: usize) {
            let entries = 64;
            let mut b = Mlx5Bench::<S>::new(entries, Mix::RecvInline, None, false, payload).unwrap();
            let what = format!("{S}-byte CQEs, {payload} B, batch {batch}");
            assert_eq!(b.name(), format!("mlx5 model, {S}-byte CQEs, {payload} B inline"));
            let mem = b.inline.as_ref().map(|(m, _)| m.clone()).unwrap();
            for lap in 0..3 {
                b.prepare_lap();
                assert_eq!(b.poll_full(batch), entries as usize, "{what}, lap {lap}");
                for (i, c) in b.out.iter().enumerate() {
                    let got = (c.status, c.opcode, c.wr_id, c.byte_len);
                    assert_eq!(got, (WcStatus::Success, WcOpcode::Recv, i as u64, payload), "{what}, lap {lap}, {i}");
                }
                assert_eq!(b.cq.stats().inline_not_copied, 0, "{what}, lap {lap}");
            }
            let mut got = vec![0; RECV_BUF];
            for i in 0..entries as usize {
                mem.read_bytes(i * RECV_BUF, &mut got).unwrap();
                let mut want: Vec<u8> = (1..=payload as u8).collect();
                want.resize(RECV_BUF, 0);
                assert_eq!(got, want, "{what}: buffer {i}");
            }
        }
        for batch in [1, 16] {
            for payload in [1, 7, 8, 24, 32] {
                check::<64>(payload, batch);
            }
            for payload in [1, 32, 33, 60, 64] {
                check::<128>(payload, batch);
            }
        }
    }

    /// A payload the CQE cannot carry, or a lap of more receives than a receive queue
    /// holds, is refused with what to give instead.
    #[test]
    fn inline_payloads_must_fit_the_cqe() {
        let err = |entries, payload, s| check_inline(entries, payload, s).unwrap_err();
        assert_eq!(
            err(64, 33, 64),
            "--payload 33: a 64-byte CQE carries 1 to 32 bytes of inline data (--cqe-size 128: 64)"
        );
        assert_eq!(err(64, 65, 128), "--payload 65: a 128-byte CQE carries 1 to 64 bytes of inline data");
        assert_eq!(err(64, 0, 128), "--payload 0: a 128-byte CQE carries 1 to 64 bytes of inline data");
        assert_eq!(
            err(1 << 17, 8, 64),
            "--entries 131072: --mix recv-inline posts one receive per entry, at most 65536"
        );
        assert!(check_inline(1 << 16, 64, 128).is_ok());
        assert!(Mlx5Bench::<64>::new(16, Mix::RecvInline, None, false, 40).is_err());
    }

    /// The banner names the CQE size and compression, and says when the compression CQ is
    /// idle (no back-pressure, so regular CQEs only).
    #[test]
    fn the_name_says_what_ring_is_measured() {
        let hash = |layout| Some(CompressionConfig { layout, format: MiniFormat::Hash });
        let name = |comp, bp| Mlx5Bench::<128>::new(16, Mix::Send, comp, bp, 32).unwrap().name();
        assert_eq!(name(None, false), "mlx5 model, 128-byte CQEs");
        assert_eq!(name(hash(CompLayout::Basic), true), "mlx5 model, 128-byte CQEs, basic compression");
        assert_eq!(name(hash(CompLayout::Enhanced), false), "mlx5 model, 128-byte CQEs, enhanced compression, idle");
    }

    /// The empty-poll baseline does the call and nothing else: it returns 0 like an empty
    /// poll, whatever the batch.
    #[test]
    fn the_empty_poll_and_its_baseline_return_nothing() {
        let mut b = Mlx5Bench::<64>::new(16, Mix::SendRecv, None, false, 32).unwrap();
        for batch in [0, 1, 16, 1000] {
            assert_eq!((b.poll_empty(batch), b.noop(batch)), (0, 0), "batch {batch}");
        }
    }
}
