//! The poll fast path (runs of one QP's CQEs, the one-at-a-time poll) against the general
//! translation: random streams over several QPs of different kinds, with errors mixed in,
//! polled in random batch sizes, give exactly what `peek` (the general path, which never
//! takes the fast path) says for each completion.

use dvcq_mlx5_dv::model::build::{self, Entry, ErrSpec, RecvAddr};
use dvcq_mlx5_dv::model::{Mlx5Model, ModelConfig};
use dvcq_mlx5_dv::{CqConfig, CqeVersion, Mlx5Cq, QpConfig, Registry};
use dvcq_provider::testing::{drain_in_batches, drain_one_by_one};
use dvcq_provider::Completion;
use dvcq_uapi::mlx5::opcode::{cqe_opcode, syndrome, wqe_opcode};
use proptest::prelude::*;

/// QPs by registration order (= user index): a plain RC QP, a second one, a QP on an SRQ,
/// a raw Ethernet QP with the RX checksum capability, two more plain RC QPs, so that runs
/// and one-CQE polls move among several QPs of one receive path, and a raw Ethernet QP on
/// the SRQ (whose receives the fast path leaves to the general one). The low 12 bits of
/// 0x1100 are those of 0x100, so its lookup takes the registry's hash map behind the table
/// of low bits (and the lean one-CQE poll leaves it to the general one).
const QPNS: [u32; 7] = [0x100, 0x2ab, 0x3cd, 0x4ef, 0x1100, 0x6b1, 0x7c3];
/// The QPs on the SRQ.
const ON_SRQ: [usize; 2] = [2, 6];
const SRQN: u32 = 0x77;

fn registry() -> Registry {
    let mut r = Registry::new();
    r.add_srq(SRQN, 1024).unwrap();
    r.add_qp(QpConfig::rc(QPNS[0], 64, 64)).unwrap();
    r.add_qp(QpConfig::rc(QPNS[1], 16, 8)).unwrap();
    r.add_qp(QpConfig { srqn: Some(SRQN), ..QpConfig::rc(QPNS[2], 32, 32) }).unwrap();
    r.add_qp(QpConfig { rx_csum: true, ..QpConfig::rc(QPNS[3], 32, 32) }).unwrap();
    r.add_qp(QpConfig::rc(QPNS[4], 32, 16)).unwrap();
    r.add_qp(QpConfig::rc(QPNS[5], 8, 32)).unwrap();
    r.add_qp(QpConfig { srqn: Some(SRQN), rx_csum: true, ..QpConfig::rc(QPNS[6], 16, 16) }).unwrap();
    r
}

/// One CQE of the stream, from proptest's choices.
#[derive(Debug, Clone)]
struct Pick {
    qp: usize,
    kind: u8,
    ctr: u16,
    word: u32,
    sl: u8,
    grh: bool,
}

fn picks() -> impl Strategy<Value = Vec<Pick>> {
    prop::collection::vec(
        (0usize..QPNS.len(), 0u8..12, any::<u16>(), any::<u32>(), 0u8..16, any::<bool>())
            .prop_map(|(qp, kind, ctr, word, sl, grh)| Pick { qp, kind, ctr, word, sl, grh }),
        1..200,
    )
}

fn entry(p: &Pick, v1: bool) -> Entry {
    let qpn = QPNS[p.qp];
    let send_ops = [wqe_opcode::SEND, wqe_opcode::RDMA_WRITE, wqe_opcode::RDMA_WRITE_IMM, wqe_opcode::RDMA_READ];
    let e = match p.kind {
        0..=3 => build::req(qpn, p.ctr, send_ops[p.kind as usize], p.word & 0xffff),
        4 => build::req(qpn, p.ctr, wqe_opcode::ATOMIC_FA, 8),
        5..=8 => {
            let op =
                [cqe_opcode::RESP_SEND, cqe_opcode::RESP_SEND_IMM, cqe_opcode::RESP_WR_IMM, cqe_opcode::RESP_SEND_INV]
                    [(p.kind - 5) as usize];
            build::resp(op, qpn, p.ctr % 1024, p.word >> 8, p.word).recv_addr(RecvAddr {
                src_qp: p.word & 0xff_ffff,
                slid: p.word as u16,
                sl: p.sl,
                path_bits: p.sl * 7,
                grh: p.grh,
            })
        }
        9 => build::err(ErrSpec {
            requester: true,
            qpn,
            wqe_counter: p.ctr,
            syndrome: syndrome::WR_FLUSH_ERR,
            vendor_err_synd: 0xf9,
            ..ErrSpec::default()
        }),
        // A QP nobody registered: a fault item between good completions.
        10 => build::req(0xdead, p.ctr, wqe_opcode::SEND, 0),
        _ => build::resp(cqe_opcode::RESP_SEND, qpn, p.ctr % 1024, 1, 0).offloads(0x06, 0x4c, p.word as u16, p.word),
    };
    // Version 0 names an SRQ in srqn_uidx; version 1 puts the user index there.
    match (v1, p.qp) {
        (true, q) => e.srqn_uidx(q as u32),
        (false, q) if ON_SRQ.contains(&q) && ((5..=8).contains(&p.kind) || p.kind == 11) => e.srqn_uidx(SRQN),
        (false, _) => e,
    }
}

fn setup<const S: usize>(v1: bool, entries: u32) -> (Mlx5Model, Mlx5Cq<S>) {
    let mut mc = ModelConfig::new(entries);
    mc.cqe_size = S as u32;
    let m = Mlx5Model::new(mc).unwrap();
    let cfg = CqConfig { cqe_version: if v1 { CqeVersion::V1 } else { CqeVersion::V0 }, ..CqConfig::default() };
    let cq = m.poller::<S>(registry(), cfg).unwrap();
    (m, cq)
}

/// Polls `stream` one at a time, checked against `peek`, and in `batches` on a second
/// identical CQ; both must agree completion for completion.
fn check<const S: usize>(stream: &[Pick], v1: bool, batches: &[usize]) -> Result<(), TestCaseError> {
    // Reference: peek (general path) before each one-at-a-time poll (a one-CQE fast run).
    let (mut ma, mut a) = setup::<S>(v1, 256);
    // Under test: the same stream polled in batches (fast runs, misses, slow CQEs).
    let (mut mb, mut b) = setup::<S>(v1, 256);
    for p in stream {
        ma.push(&entry(p, v1)).unwrap();
        mb.push(&entry(p, v1)).unwrap();
    }
    let want = drain_one_by_one(&mut a).map_err(TestCaseError::fail)?;
    let got = drain_in_batches(&mut b, batches, stream.len() + 1);
    prop_assert_eq!(&got, &want);
    // Both pollers moved every queue the same way.
    for q in QPNS {
        let (ra, rb) = (a.registry().qp(q).unwrap(), b.registry().qp(q).unwrap());
        prop_assert_eq!(ra.sq.outstanding(), rb.sq.outstanding());
        prop_assert_eq!(ra.rq.outstanding(), rb.rq.outstanding());
    }
    prop_assert_eq!(a.ci(), b.ci());
    // Every successful receive of the QPs on the SRQ is counted on the SRQ, by both.
    let on_srq = |c: &Completion| ON_SRQ.iter().any(|&q| c.qp_num == QPNS[q]);
    let srq_receives = want.iter().filter(|c| on_srq(c) && c.is_ok() && c.opcode.is_recv()).count() as u64;
    for cq in [&mut a, &mut b] {
        prop_assert_eq!(cq.registry_mut().srq_mut(SRQN).unwrap().completed(), srq_receives);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn batches_and_single_polls_equal_the_general_path(
        stream in picks(),
        v1 in any::<bool>(),
        big in any::<bool>(),
        batches in prop::collection::vec(1usize..20, 1..40),
    ) {
        if big {
            check::<128>(&stream, v1, &batches)?;
        } else {
            check::<64>(&stream, v1, &batches)?;
        }
    }
}

/// A one-CQE poll remembers the QP it took by registry slot. Removing a QP moves the QPs
/// registered after it down one slot, so the next one-CQE poll must find the QP its CQE
/// names again, not whatever took the remembered slot.
#[test]
fn one_cqe_polls_find_their_qp_after_a_removal() {
    for v1 in [false, true] {
        let (mut m, mut cq) = setup::<64>(v1, 256);
        let req = |qp: usize, ctr: u16| {
            let e = build::req(QPNS[qp], ctr, wqe_opcode::SEND, 0);
            if v1 {
                e.srqn_uidx(qp as u32)
            } else {
                e
            }
        };
        let mut wc = [Completion::default()];
        m.push(&req(1, 0)).unwrap();
        assert_eq!(cq.poll(&mut wc), 1);
        assert_eq!(wc[0].qp_num, QPNS[1]);
        assert!(cq.remove_qp(QPNS[0]));
        // QPNS[2] now holds the slot QPNS[1] had.
        let other = cq.registry().qp(QPNS[2]).unwrap().sq.outstanding();
        m.push(&req(1, 1)).unwrap();
        assert_eq!(cq.poll(&mut wc), 1);
        assert!(wc[0].is_ok(), "v1 {v1}: {:?}", wc[0]);
        assert_eq!((wc[0].qp_num, wc[0].wqe_index), (QPNS[1], 1), "v1 {v1}");
        assert_eq!(
            cq.registry().qp(QPNS[2]).unwrap().sq.outstanding(),
            other,
            "v1 {v1}: another QP's send queue moved"
        );
    }
}
