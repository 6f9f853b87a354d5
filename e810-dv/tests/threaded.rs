//! A producer thread writes 10^7 CQEs (half SQ, half RQ, some extended) while the poller
//! drains them; every completion is checked against the sequence. The count can be scaled
//! with `DVCQ_IRDMA_THREADED_CQES` (default 10^7; about 15 s in a debug build). GEN2 runs
//! on a ring size that is not a power of two, as real irdma rings are.

use dvcq_e810_dv::model::{IrdmaModel, ModelConfig, ModelCqe};
use dvcq_e810_dv::{Compat, QpConfig, QpRegistry};
use dvcq_provider::{Completion, WcFlags, WcOpcode};
use dvcq_uapi::irdma::codes::{rq_op, sq_op};
use dvcq_uapi::irdma::HwRev;
use std::time::Duration;

const CTX: u64 = 0x5500;
const QPN: u32 = 0x77;
const WQ: u32 = 1024;

fn count() -> u64 {
    let default = 10_000_000;
    std::env::var("DVCQ_IRDMA_THREADED_CQES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn cqe(gen: HwRev, k: u64) -> ModelCqe {
    // GEN2 RoCE reports the IB opcode, GEN3 its own op types (§4.7).
    let wimm = if gen == HwRev::Gen3 { rq_op::GEN3_WRITE_IMM } else { rq_op::ROCE_WRITE_ONLY_WITH_IMM };
    let i = (k / 2) as u32;
    let idx = (i % WQ) as u16;
    if k % 2 == 0 {
        ModelCqe::send(CTX, QPN, idx, sq_op::SEND)
    } else if k % 7 == 1 {
        ModelCqe::recv(CTX, QPN, idx, 0, wimm, k as u32).with_imm(i)
    } else {
        ModelCqe::recv(CTX, QPN, idx, 0, rq_op::ROCE_SEND_ONLY, k as u32)
    }
}

fn run(cfg: ModelConfig, n: u64) {
    let gen = cfg.hw_rev;
    let model = IrdmaModel::new(cfg).unwrap();
    let mut qps = QpRegistry::new(gen);
    qps.register(CTX, QpConfig::rc(QPN, WQ, WQ)).unwrap();
    let mut cq = model.poller(qps, Compat::Current).unwrap();
    let producer = model.spawn_producer((0..n).map(move |k| cqe(gen, k)), Duration::from_secs(20));
    let mut out = vec![Completion::default(); 16];
    let mut k = 0u64;
    let mut idle = 0u64;
    while k < n {
        let got = cq.poll(&mut out);
        if got == 0 {
            idle += 1;
            assert!(idle < 2_000_000_000, "consumer starved at {k}");
            // Yield rather than spin: tests run in parallel, and on a machine with few
            // cores a spinning consumer would starve the producers.
            std::thread::yield_now();
            continue;
        }
        for wc in &out[..got] {
            let i = k / 2;
            assert!(wc.is_ok(), "at {k}: {wc:?}");
            assert_eq!(wc.wr_id, i % u64::from(WQ), "at {k}");
            if k % 2 == 0 {
                assert_eq!(wc.opcode, WcOpcode::Send, "at {k}");
            } else {
                assert_eq!(wc.byte_len, k as u32, "sequence broken at {k}");
                if k % 7 == 1 {
                    assert_eq!(wc.opcode, WcOpcode::RecvRdmaWithImm, "at {k}");
                    assert_eq!(wc.wc_flags, WcFlags::WITH_IMM);
                    assert_eq!(wc.imm_data, (i as u32).to_be());
                } else {
                    assert_eq!(wc.opcode, WcOpcode::Recv, "at {k}");
                }
            }
            k += 1;
        }
    }
    let model = producer.join().unwrap().unwrap();
    assert!(model.events().is_empty());
    assert_eq!(cq.poll(&mut out), 0);
}

/// GEN2 on the ring rdma-core allocates for `ibv_create_cq(cqe = 100)`: 202 slots, not a
/// power of two, so the head wraps where no mask would.
#[test]
fn threaded_gen2_sequence() {
    let cfg = ModelConfig::for_cqe(HwRev::Gen2, 100, Compat::Current).unwrap();
    assert_eq!(cfg.entries, 202);
    run(cfg, count());
}

#[test]
fn threaded_gen3_sequence() {
    run(ModelConfig::new(HwRev::Gen3, 256), count() / 10);
}
