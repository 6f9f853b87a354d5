//! A producer thread writes 10^7 CQEs (half SQ, half RQ, some extended) while the poller
//! drains them; every completion is checked against the sequence. The count can be scaled
//! with `DVCQ_IRDMA_THREADED_CQES` (default 10^7, at least [`FLOOR`]). GEN2 runs on a ring
//! size that is not a power of two, as real irdma rings are. Both sides wait with bounded
//! backoff; the consumer stops as soon as the producer fails, and after [`IDLE_LIMIT`]
//! without a completion.

use dvcq_e810_dv::model::{IrdmaModel, ModelConfig, ModelCqe, ModelError};
use dvcq_e810_dv::{Compat, QpConfig, QpRegistry};
use dvcq_provider::testing::threaded::{threaded_count, ProducerWatch};
use dvcq_provider::{Completion, WcFlags, WcOpcode};
use dvcq_uapi::irdma::codes::{rq_op, sq_op};
use dvcq_uapi::irdma::HwRev;
use std::time::{Duration, Instant};

const CTX: u64 = 0x5500;
const QPN: u32 = 0x77;
const WQ: u32 = 1024;

/// The fewest CQEs a run may be set to: the GEN3 run (a tenth of the count) still laps its
/// 256-slot ring several times, and the GEN2 one its 202 slots a hundred times.
const FLOOR: u64 = 20_000;

/// How long the producer waits for a free slot before it gives up.
const STALL: Duration = Duration::from_secs(20);

/// How long the consumer waits for a completion while the producer runs: past the
/// producer's own limit, so a stalled producer is the one that reports.
const IDLE_LIMIT: Duration = Duration::from_secs(60);

fn count() -> u64 {
    threaded_count("DVCQ_IRDMA_THREADED_CQES", 10_000_000, FLOOR)
}

fn cqe(gen: HwRev, k: u64) -> ModelCqe {
    // GEN2 RoCE reports the IB opcode, GEN3 its own op types (rdma-core `set_ib_wc_op_rq`,
    // `set_ib_wc_op_rq_gen_3`).
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
    // Every WQE counts as posted (wr_id = index): the producer writes CQEs without posts.
    let id = qps.register(CTX, QpConfig::rc(QPN, WQ, WQ)).unwrap();
    qps.preset_identity(id).unwrap();
    let mut cq = model.poller(qps, Compat::Current).unwrap();
    let producer = model.spawn_producer((0..n).map(move |k| cqe(gen, k)), STALL);
    let mut producer = ProducerWatch::new(producer, IDLE_LIMIT);
    let mut out = vec![Completion::default(); 16];
    let mut k = 0u64;
    while k < n {
        let got = cq.poll(&mut out);
        if got == 0 {
            producer.idle(k).unwrap_or_else(|e| panic!("{gen:?}: {e}"));
            continue;
        }
        producer.progress();
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
    let model = producer.finish().unwrap_or_else(|e| panic!("{gen:?}: {e}"));
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

/// A producer that gives up stops the consumer at once with the producer's error: a
/// consumer that never frees a slot (it polls into an empty buffer) leaves the producer
/// stalled on a full ring, and the consumer reports that stall soon after the producer's
/// stall time, not after its own idle limit.
#[test]
fn a_stalled_producer_stops_the_consumer() {
    let gen = HwRev::Gen3;
    let model = IrdmaModel::new(ModelConfig::new(gen, 8)).unwrap();
    let mut qps = QpRegistry::new(gen);
    // Every WQE counts as posted (wr_id = index): the producer writes CQEs without posts.
    let id = qps.register(CTX, QpConfig::rc(QPN, WQ, WQ)).unwrap();
    qps.preset_identity(id).unwrap();
    let mut cq = model.poller(qps, Compat::Current).unwrap();
    let stall = Duration::from_millis(200);
    let sends = (0..8u16).map(|i| ModelCqe::send(CTX, QPN, i, sq_op::SEND));
    let mut producer = ProducerWatch::new(model.spawn_producer(sends, stall), IDLE_LIMIT);
    let t = Instant::now();
    let e = loop {
        assert_eq!(cq.poll(&mut []), 0);
        if let Err(e) = producer.idle(0) {
            break e;
        }
    };
    // The model keeps one slot free: the eighth send finds no room at position 7.
    let stalled = ModelError::Stalled { prod: 7, ms: 200 };
    assert_eq!(e, format!("the producer failed: {stalled}"));
    assert!(t.elapsed() < stall + Duration::from_secs(10), "{:?}", t.elapsed());
    assert_eq!(cq.poll(&mut [Completion::default(); 16]), 7, "the seven CQEs it wrote are all there");
}
