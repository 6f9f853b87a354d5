//! The irdma fast path (runs of one QP's common-case CQEs, the one-at-a-time poll) against
//! the general translation: random streams over three RoCE RC QPs, a UD QP and an iWARP RC
//! QP with connection WQEs, on GEN2 and GEN3 (a run moves between QPs of its kind in place,
//! through a lookup; a QP of another kind starts another run), with unknown opcodes,
//! invalidations, immediates, errors and unknown contexts mixed in, polled in random batch
//! sizes, give exactly what `peek` (the general path) says, and leave the queues where it
//! does. Every SQ and RQ slot holds a wr_id of its own, so a wr_id read from the wrong slot
//! shows.

use dvcq_e810_dv::model::{IrdmaModel, ModelConfig, ModelCqe};
use dvcq_e810_dv::{Compat, IrdmaCq, QpConfig, QpId, QpRegistry, Transport};
use dvcq_provider::testing::{drain_in_batches, drain_one_by_one};
use dvcq_provider::Completion;
use dvcq_uapi::irdma::codes::sq_op;
use dvcq_uapi::irdma::HwRev;
use proptest::prelude::*;

const CTX: [u64; 5] = [0x7f00_0000_1000, 0x7f00_0000_2000, 0x7f00_0000_3000, 0x7f00_0000_4000, 0x7f00_0000_5000];
const QPN: [u32; 5] = [0x11, 0x22, 0x33, 0x44, 0x55];

#[derive(Debug, Clone)]
struct Pick {
    qp: usize,
    kind: u8,
    op: u8,
    idx: u16,
    word: u32,
}

fn picks() -> impl Strategy<Value = Vec<Pick>> {
    prop::collection::vec(
        (0usize..CTX.len(), 0u8..8, 0u8..64, 0u16..40, any::<u32>()).prop_map(|(qp, kind, op, idx, word)| Pick {
            qp,
            kind,
            op,
            idx,
            word,
        }),
        1..150,
    )
}

fn cqe(p: &Pick) -> ModelCqe {
    let (ctx, qpn) = (CTX[p.qp], QPN[p.qp]);
    match p.kind {
        0 | 1 => ModelCqe::send(ctx, qpn, p.idx, p.op),
        2 | 3 => ModelCqe::recv(ctx, qpn, p.idx, 0, p.op, p.word >> 12),
        4 => ModelCqe::recv(ctx, qpn, p.idx, 0, p.op, 9).with_inv(p.word),
        5 => ModelCqe::recv(ctx, qpn, p.idx, 0, p.op, 9).with_imm(p.word),
        6 => ModelCqe::send(ctx, qpn, p.idx, p.op).with_error(0x8029, p.word as u16),
        _ => ModelCqe::send(0xdead_0000, qpn, p.idx, p.op),
    }
}

fn setup(gen: HwRev, compat: Compat) -> (IrdmaModel, IrdmaCq) {
    let model = IrdmaModel::new(ModelConfig::new(gen, 512)).unwrap();
    let mut qps = QpRegistry::new(gen);
    qps.register(CTX[0], QpConfig::rc(QPN[0], 32, 32)).unwrap();
    qps.register(CTX[1], QpConfig::ud(QPN[1], 32, 16)).unwrap();
    qps.register(CTX[2], QpConfig::rc(QPN[2], 64, 16)).unwrap();
    qps.register(CTX[3], QpConfig::rc(QPN[3], 16, 64)).unwrap();
    // iWARP: no send-with-immediate capability (other receive opcodes), and connection WQEs
    // whose completion the general path must see first.
    let iwarp = QpConfig { transport: Transport::Iwarp, conn_wqes: 3, ..QpConfig::rc(QPN[4], 32, 32) };
    qps.register(CTX[4], iwarp).unwrap();
    for q in 0..CTX.len() {
        distinct_wr_ids(&mut qps, QpId(q as u32));
    }
    let cq = model.poller(qps, compat).unwrap();
    (model, cq)
}

/// Posts work requests until every SQ and RQ slot of QP `id` holds a wr_id of its own (the
/// QP in the high half, unique in the low), then puts the queue positions back: a poller that
/// reads the wrong slot (or the wrong QP's) returns a wr_id the general path does not.
fn distinct_wr_ids(qps: &mut QpRegistry, id: QpId) {
    let mut next = (u64::from(id.0) + 1) << 32;
    let mut wr_id = || {
        next += 1;
        next
    };
    // Two rounds, the second from where the first stopped: the slot a full ring keeps free
    // in the first is written in the second.
    for _ in 0..2 {
        while qps.post_send(id, wr_id(), 1, 1, sq_op::SEND).is_ok() {}
        while qps.post_recv(id, wr_id()).is_ok() {}
        let qp = qps.qp_mut(id).unwrap();
        let (sq, rq) = (qp.sq.head, qp.rq.head);
        qp.sq.set(sq, sq);
        qp.rq.set(rq, rq);
    }
    let qp = qps.qp_mut(id).unwrap();
    qp.sq.set(0, 0);
    qp.rq.set(0, 0);
    let (sq, rq) = (qp.sq.size(), qp.rq.size());
    let mut seen: Vec<u64> = (0..sq).map(|i| qp.sq_entry(i).wr_id).chain((0..rq).map(|i| qp.rq_entry(i))).collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), (sq + rq) as usize, "QP {}: every slot has a wr_id of its own", id.0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn batches_and_single_polls_equal_the_general_path(
        stream in picks(),
        gen3 in any::<bool>(),
        compat in prop::sample::select(Compat::ALL.to_vec()),
        batches in prop::collection::vec(1usize..20, 1..40),
    ) {
        // GEN3 exists only with the current compat (rdma-core v64 and later).
        let gen = if gen3 && compat == Compat::Current { HwRev::Gen3 } else { HwRev::Gen2 };
        let (mut ma, mut a) = setup(gen, compat);
        let (mut mb, mut b) = setup(gen, compat);
        for p in &stream {
            ma.push(&cqe(p)).unwrap();
            mb.push(&cqe(p)).unwrap();
        }
        // Reference: peek (general path) before each one-at-a-time poll; under test:
        // batches (fast runs, context changes, general-path CQEs).
        let want = drain_one_by_one(&mut a).map_err(TestCaseError::fail)?;
        let got = drain_in_batches(&mut b, &batches, 2 * stream.len() + 1);
        prop_assert_eq!(got, want);
        prop_assert_eq!(a.ci(), b.ci());
        // Both pollers moved every queue the same way.
        for id in 0..CTX.len() as u32 {
            let (qa, qb) = (a.qps().qp(QpId(id)).unwrap(), b.qps().qp(QpId(id)).unwrap());
            prop_assert_eq!((qa.sq, qa.rq), (qb.sq, qb.rq), "QP {}", id);
        }
    }
}

/// A batch poll fills the whole batch when the CQEs it takes run past the ring's end: the
/// fast path goes on into the next lap within the same call (on rings of any size, and
/// with 32- and 64-byte slots).
#[test]
fn batches_fill_across_the_rings_end() {
    // Sizes rdma-core allocates: odd ones on GEN1 only.
    for (gen, sizes) in [(HwRev::Gen1, [7u32, 10, 16]), (HwRev::Gen2, [6, 10, 16]), (HwRev::Gen3, [6, 10, 16])] {
        for entries in sizes {
            let mut m = IrdmaModel::new(ModelConfig::new(gen, entries)).unwrap();
            let mut qps = QpRegistry::new(gen);
            let id = qps.register(CTX[0], QpConfig::rc(QPN[0], 64, 64)).unwrap();
            let mut cq = m.poller(qps, Compat::Current).unwrap();
            let mut out = vec![Completion::default(); entries as usize];
            let mut wr_id = 0u64;
            for round in 0..3 * entries {
                // As many sends as fit, from wherever the last round left the head.
                let ready = m.free_slots();
                for _ in 0..ready {
                    let w = cq.qps_mut().post_send(id, wr_id, 1, 1, sq_op::SEND).unwrap();
                    m.push(&ModelCqe::send(CTX[0], QPN[0], w, sq_op::SEND)).unwrap();
                    wr_id += 1;
                }
                let n = cq.poll(&mut out);
                assert_eq!(n, ready as usize, "{gen:?}, {entries} slots, round {round}: one call takes them all");
                let first = wr_id - u64::from(ready);
                assert!(out[..n].iter().zip(first..).all(|(c, w)| c.wr_id == w && c.is_ok()));
                assert_eq!(cq.ci(), m.prod());
            }
        }
    }
}

/// An iWARP QP's connection WQEs complete without a completion: a poll consumes their CQEs
/// and returns none, in a one-CQE poll as in a batch, also when nothing follows them (the
/// consumer index moves past them as rdma-core's poll moves it).
#[test]
fn trailing_connection_wqes_are_consumed_without_a_completion() {
    for compat in Compat::ALL {
        for batch in [1usize, 16] {
            let (mut m, mut cq) = setup(HwRev::Gen2, compat);
            for idx in 0..2 {
                m.push(&ModelCqe::send(CTX[4], QPN[4], idx, 0)).unwrap();
            }
            let mut out = vec![Completion::default(); batch];
            assert_eq!(cq.peek(), None, "{compat:?}: a connection WQE shows nothing");
            assert_eq!(cq.poll(&mut out), 0, "{compat:?}, batch {batch}");
            assert_eq!(cq.ci(), 2, "{compat:?}, batch {batch}: both CQEs consumed");
        }
    }
}
