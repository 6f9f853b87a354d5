//! Inline scatter (shared/spec/mlx5.md §4, §7, Pitfall 13): a CQE that carries its data
//! (format 1 in the cqe64, format 2 in a 128-byte CQE's first half) has it copied where
//! the completed WQE's data segments say, as rdma-core's poll copies it, with rdma-core's
//! statuses when the copy fails. The WQEs are posted into model memory; the buffers they
//! name are the test's own.

use dvcq_mlx5_dv::model::build;
use dvcq_mlx5_dv::model::wqe::{self, DataSeg};
use dvcq_mlx5_dv::model::{Mlx5Model, ModelConfig};
use dvcq_mlx5_dv::{CqConfig, Mlx5Cq, QpConfig, Registry, RegistryError};
use dvcq_provider::testing::drain;
use dvcq_provider::{Completion, DmaBuffer, FaultKind, WcFlags, WcOpcode, WcStatus, WqBuffer};
use dvcq_uapi::mlx5::opcode::{cqe_opcode, wqe_opcode};
use std::sync::Arc;

const QPN: u32 = 0x77;
const SRQN: u32 = 0x31;
const LKEY: u32 = 0x1234;

/// Buffers WQEs point at: boxed, so they stay put; read only after the poll that fills
/// them returns.
struct Dst(Vec<Box<[u8]>>);

impl Dst {
    fn new(lens: &[usize]) -> Self {
        Dst(lens.iter().map(|&n| vec![0u8; n].into_boxed_slice()).collect())
    }
    /// A data segment naming all of buffer `i`, under `lkey`.
    fn seg(&mut self, i: usize, lkey: u32) -> DataSeg {
        let b = &mut self.0[i];
        DataSeg { addr: b.as_mut_ptr() as u64, len: b.len() as u32, lkey }
    }
}

/// A work queue buffer of `len` bytes holding `wqes` (offset, bytes).
fn wq(len: usize, wqes: &[(usize, Vec<u8>)]) -> WqBuffer {
    let mem = Arc::new(DmaBuffer::new(len).unwrap());
    for (off, bytes) in wqes {
        mem.write_bytes(*off, bytes).unwrap();
    }
    mem.wq_buffer(0, len).unwrap()
}

// What every `set_*_wqes` call below relies on: the buffer comes from `wq`, written in the
// queue's layout by `model::wqe`, and every data segment in it names a `Dst` buffer that
// the test holds past its polls and reads only after them, or a null address.

fn setup<const S: usize>(reg: Registry) -> (Mlx5Model, Mlx5Cq<S>) {
    let mut mc = ModelConfig::new(16);
    mc.cqe_size = S as u32;
    let m = Mlx5Model::new(mc).unwrap();
    let cq = m.poller::<S>(reg, CqConfig::default()).unwrap();
    (m, cq)
}

fn payload(n: usize) -> Vec<u8> {
    (1..=n as u8).collect()
}

/// A receive's data goes into the posted buffers in segment order, on a 64-byte CQ from
/// the cqe64 and on a 128-byte CQ from its first half, in a batch among CQEs the fast path
/// takes or one at a time; nothing is left in the CQE uncopied.
#[test]
fn receive_data_goes_where_the_wqe_says() {
    for (cqe_size, n) in [(64, 20), (128, 60)] {
        for batch in [1, 16] {
            let mut dst = Dst::new(&[8, 64]);
            let segs = [dst.seg(0, LKEY), dst.seg(1, LKEY)];
            let mut reg = Registry::new();
            reg.add_qp(QpConfig::rc(QPN, 8, 8)).unwrap();
            let qp = reg.qp_mut(QPN).unwrap();
            let posted = [qp.rq.post(0xa0), qp.rq.post(0xa1), qp.rq.post(0xa2)];
            let rq = wq(8 * 64, &[(64, wqe::recv_wqe(None, &segs, 64))]);
            // SAFETY: see above `wq`.
            unsafe { reg.set_recv_wqes(QPN, rq, 64, false) }.unwrap();
            let data = payload(n);
            let what = format!("{cqe_size}-byte CQEs, batch {batch}");
            let (got, not_copied) = if cqe_size == 64 {
                three_receives::<64>(reg, posted, &data, batch)
            } else {
                three_receives::<128>(reg, posted, &data, batch)
            };
            assert_eq!(not_copied, 0, "{what}");
            let summary: Vec<_> = got.iter().map(|c| (c.status, c.wr_id, c.byte_len, c.opcode)).collect();
            assert_eq!(
                summary,
                [
                    (WcStatus::Success, 0xa0, 4, WcOpcode::Recv),
                    (WcStatus::Success, 0xa1, n as u32, WcOpcode::Recv),
                    (WcStatus::Success, 0xa2, 4, WcOpcode::Recv),
                ],
                "{what}"
            );
            assert_eq!(got[1].wc_flags, WcFlags::WITH_IMM, "{what}");
            assert_eq!(&dst.0[0][..], &data[..8], "{what}");
            assert_eq!(&dst.0[1][..n - 8], &data[8..], "{what}");
            assert!(dst.0[1][n - 8..].iter().all(|&b| b == 0), "{what}: past the data");
        }
    }
}

/// Polls a plain receive, one carrying `data` inline with immediate data, and a plain one,
/// at the posted WQE indexes; returns the completions and the count of uncopied ones.
fn three_receives<const S: usize>(reg: Registry, at: [u16; 3], data: &[u8], batch: usize) -> (Vec<Completion>, u64) {
    let (mut m, mut cq) = setup::<S>(reg);
    m.push(&build::resp(cqe_opcode::RESP_SEND, QPN, at[0], 4, 0)).unwrap();
    m.push(&build::resp(cqe_opcode::RESP_SEND_IMM, QPN, at[1], 0, 0x5566).inline(data)).unwrap();
    m.push(&build::resp(cqe_opcode::RESP_SEND, QPN, at[2], 4, 0)).unwrap();
    let got = drain(&mut cq, batch);
    (got, cq.stats().inline_not_copied)
}

/// More data than the WQE's segments hold: rdma-core copies what fits, segment by segment,
/// and reports `IBV_WC_LOC_LEN_ERR` with the wr_id and byte count, returning before the
/// opcode's flags. The receive is consumed like any other.
#[test]
fn a_receive_larger_than_its_segments_is_a_local_length_error() {
    let mut dst = Dst::new(&[4, 8]);
    let segs = [dst.seg(0, LKEY), dst.seg(1, LKEY)];
    let mut reg = Registry::new();
    reg.add_qp(QpConfig::rc(QPN, 8, 8)).unwrap();
    let at = reg.qp_mut(QPN).unwrap().rq.post(0xb0);
    // Stride 32: two segments, no room for a terminator.
    let rq = wq(8 * 32, &[(0, wqe::recv_wqe(None, &segs, 32))]);
    // SAFETY: see above `wq`.
    unsafe { reg.set_recv_wqes(QPN, rq, 32, false) }.unwrap();
    let (mut m, mut cq) = setup::<64>(reg);
    let data = payload(20);
    m.push(&build::resp(cqe_opcode::RESP_SEND_IMM, QPN, at, 0, 7).inline(&data)).unwrap();
    let peeked = cq.peek().unwrap();
    let got = drain(&mut cq, 4);
    assert_eq!((got[0].status, got[0].wr_id, got[0].byte_len), (WcStatus::LocLenErr, 0xb0, 20));
    assert_eq!(got[0].wc_flags, WcFlags::empty(), "no WITH_IMM: rdma-core returns before the opcode switch");
    assert_eq!(peeked.status, WcStatus::LocLenErr, "peek reports what poll returns");
    assert_eq!((&dst.0[0][..], &dst.0[1][..]), (&data[..4], &data[4..12]));
    assert_eq!(cq.registry().qp(QPN).unwrap().rq.outstanding(), 0);
}

/// A segment of the null memory region's key takes its share of the data without a copy
/// (rdma-core skips `dump_fill_mkey` segments); a WQE with a signature segment has its list
/// after it; an SRQ WQE has its list after its next segment, and is found by the
/// unmasked counter.
#[test]
fn null_key_segments_signature_segments_and_srq_wqes() {
    const NULL: u32 = 0x99;
    let data = payload(24);

    let mut dst = Dst::new(&[10, 32]);
    let segs = [dst.seg(0, NULL), dst.seg(1, LKEY)];
    let mut reg = Registry::new();
    reg.add_qp(QpConfig::rc(QPN, 4, 4)).unwrap();
    let at = reg.qp_mut(QPN).unwrap().rq.post(0xd0);
    reg.set_null_lkey(Some(NULL));
    let sig = [0xcc; 16];
    let rq = wq(4 * 64, &[(0, wqe::recv_wqe(Some(sig), &segs, 64))]);
    // SAFETY: see above `wq`.
    unsafe { reg.set_recv_wqes(QPN, rq, 64, true) }.unwrap();
    let (mut m, mut cq) = setup::<64>(reg);
    m.push(&build::resp(cqe_opcode::RESP_SEND, QPN, at, 0, 0).inline(&data)).unwrap();
    assert_eq!(drain(&mut cq, 1)[0].status, WcStatus::Success);
    assert!(dst.0[0].iter().all(|&b| b == 0), "the null key's buffer is not written");
    assert_eq!(&dst.0[1][..14], &data[10..]);

    let mut dst = Dst::new(&[32]);
    let segs = [dst.seg(0, LKEY)];
    let mut reg = Registry::new();
    reg.add_srq(SRQN, 300).unwrap().post(260, 0x5260);
    reg.add_qp(QpConfig { srqn: Some(SRQN), ..QpConfig::rc(QPN, 4, 0) }).unwrap();
    let srq = wq(300 * 32, &[(260 * 32, wqe::recv_wqe(Some(wqe::srq_next(261)), &segs, 32))]);
    // SAFETY: see above `wq`.
    unsafe { reg.set_srq_wqes(SRQN, srq, 32) }.unwrap();
    let (mut m, mut cq) = setup::<64>(reg);
    m.push(&build::resp(cqe_opcode::RESP_SEND, QPN, 260, 0, 0).srqn_uidx(SRQN).inline(&data)).unwrap();
    let got = drain(&mut cq, 16);
    assert_eq!((got[0].status, got[0].wr_id, got[0].wqe_index), (WcStatus::Success, 0x5260, 260));
    assert_eq!(&dst.0[0][..24], &data[..]);
}

/// A READ's or atomic's response goes into the send WQE's scatter list, after its remote
/// address (and atomic) segment; a list that passes the SQ's end goes on at its start.
/// A WQE of another opcode is `IBV_WC_REM_INV_REQ_ERR` and a UD QP's `IBV_WC_GENERAL_ERR`,
/// as rdma-core's `mlx5_copy_to_send_wqe` has them, with the WQE's wr_id.
#[test]
fn read_and_atomic_responses_go_into_the_send_wqe() {
    // SQ of 4 basic blocks: three one-block sends retired first, then a 2-block READ at
    // block 3 that wraps to block 0, an atomic at block 1 and a SEND at block 2.
    let mut dst = Dst::new(&[8, 8, 16, 8]);
    let read_segs = [dst.seg(0, LKEY), dst.seg(1, LKEY), dst.seg(2, LKEY)];
    let read = wqe::send_wqe(wqe_opcode::RDMA_READ, 3, QPN, &read_segs);
    assert_eq!(read.len(), 128);
    let atomic = wqe::send_wqe(wqe_opcode::ATOMIC_FA, 5, QPN, &[dst.seg(3, LKEY)]);
    let send = wqe::send_wqe(wqe_opcode::SEND, 6, QPN, &[]);
    let sq = wq(4 * 64, &[(3 * 64, read[..64].to_vec()), (0, read[64..].to_vec()), (64, atomic), (128, send)]);
    // The three early sends, retired by one CQE, then the WQEs under test.
    let early = |m: &mut Mlx5Model, cq: &mut Mlx5Cq<64>| {
        let q = &mut cq.registry_mut().qp_mut(QPN).unwrap().sq;
        let at: Vec<u16> = (0..3).map(|i| q.post(0x100 + i, 1)).collect();
        assert_eq!(at, [0, 1, 2]);
        m.push(&build::req(QPN, 2, wqe_opcode::SEND, 0)).unwrap();
        assert_eq!(drain(cq, 4).iter().map(|c| c.wr_id).collect::<Vec<_>>(), [0x102]);
        let q = &mut cq.registry_mut().qp_mut(QPN).unwrap().sq;
        [q.post(0x3003, 2), q.post(0x3005, 1), q.post(0x3006, 1)]
    };
    let mut reg = Registry::new();
    reg.add_qp(QpConfig::rc(QPN, 4, 4)).unwrap();
    // SAFETY: see above `wq`.
    unsafe { reg.set_send_wqes(QPN, sq.clone()) }.unwrap();
    let (mut m, mut cq) = setup::<64>(reg);
    let at = early(&mut m, &mut cq);
    assert_eq!(at, [3, 5, 6]);
    let data = payload(30);
    let fetched = 0x0102_0304_0506_0708u64.to_be_bytes();
    m.push(&build::req(QPN, at[0], wqe_opcode::RDMA_READ, 0).inline(&data)).unwrap();
    m.push(&build::req(QPN, at[1], wqe_opcode::ATOMIC_FA, 0).inline(&fetched)).unwrap();
    m.push(&build::req(QPN, at[2], wqe_opcode::RDMA_READ, 0).inline(&data[..4])).unwrap();
    let got = drain(&mut cq, 16);
    let summary: Vec<_> = got.iter().map(|c| (c.status, c.opcode, c.byte_len, c.wr_id)).collect();
    assert_eq!(
        summary,
        [
            (WcStatus::Success, WcOpcode::RdmaRead, 30, 0x3003),
            (WcStatus::Success, WcOpcode::FetchAdd, 8, 0x3005),
            (WcStatus::RemInvReqErr, WcOpcode::RdmaRead, 4, 0x3006),
        ]
    );
    assert_eq!((&dst.0[0][..], &dst.0[1][..], &dst.0[2][..14]), (&data[..8], &data[8..16], &data[16..]));
    assert_eq!(&dst.0[3][..], &fetched[..]);
    assert_eq!(cq.stats().inline_not_copied, 0);

    // The same READ on a UD QP: not RC.
    let mut reg = Registry::new();
    reg.add_qp(QpConfig { ud: true, ..QpConfig::rc(QPN, 4, 4) }).unwrap();
    // SAFETY: see above `wq`.
    unsafe { reg.set_send_wqes(QPN, sq) }.unwrap();
    let (mut m, mut cq) = setup::<64>(reg);
    let at = early(&mut m, &mut cq);
    m.push(&build::req(QPN, at[0], wqe_opcode::RDMA_READ, 0).inline(&data)).unwrap();
    let got = drain(&mut cq, 1);
    assert_eq!((got[0].status, got[0].wr_id), (WcStatus::GeneralErr, 0x3003), "the WQE's own wr_id");
}

/// A device may consume receive WQEs out of order (rdma-core v55 and later take the CQE's
/// counter): each receive's data goes into the WQE its CQE names, not the oldest one.
#[test]
fn out_of_order_receives_fill_the_wqes_their_cqes_name() {
    let mut dst = Dst::new(&[16, 16]);
    let segs = [[dst.seg(0, LKEY)], [dst.seg(1, LKEY)]];
    let mut reg = Registry::new();
    reg.add_qp(QpConfig::rc(QPN, 4, 4)).unwrap();
    let q = &mut reg.qp_mut(QPN).unwrap().rq;
    let at = [q.post(0xe0), q.post(0xe1)];
    let rq = wq(4 * 32, &[(0, wqe::recv_wqe(None, &segs[0], 32)), (32, wqe::recv_wqe(None, &segs[1], 32))]);
    // SAFETY: see above `wq`.
    unsafe { reg.set_recv_wqes(QPN, rq, 32, false) }.unwrap();
    let (mut m, mut cq) = setup::<64>(reg);
    let (first, second) = (payload(12), vec![0xee; 9]);
    m.push(&build::resp(cqe_opcode::RESP_SEND, QPN, at[1], 0, 0).inline(&first)).unwrap();
    m.push(&build::resp(cqe_opcode::RESP_SEND, QPN, at[0], 0, 0).inline(&second)).unwrap();
    let got = drain(&mut cq, 16);
    let summary: Vec<_> = got.iter().map(|c| (c.status, c.wr_id, c.byte_len)).collect();
    assert_eq!(summary, [(WcStatus::Success, 0xe1, 12), (WcStatus::Success, 0xe0, 9)]);
    assert_eq!((&dst.0[1][..12], &dst.0[0][..9]), (&first[..], &second[..]));
    assert_eq!(cq.stats().inline_not_copied, 0);
}

/// The copy writes only into posted WQEs' buffers. A receive CQE on a QP with nothing
/// outstanding, or a requester CQE for a send WQE that holds no posted work request, is
/// garbage: returned as the poll translates it, its data left in the CQE and counted, the
/// registered buffers untouched, even after garbage has completed more than was posted.
/// A data segment with a null address takes nothing: `IBV_WC_LOC_LEN_ERR`.
#[test]
fn nothing_is_written_for_wqes_not_posted_or_null_addresses() {
    let mut dst = Dst::new(&[16, 16]);
    let mut reg = Registry::new();
    reg.add_qp(QpConfig::rc(QPN, 4, 4)).unwrap();
    let rq = wq(4 * 32, &[(0, wqe::recv_wqe(None, &[dst.seg(0, LKEY)], 32))]);
    let read = wqe::send_wqe(wqe_opcode::RDMA_READ, 0, QPN, &[dst.seg(1, LKEY)]);
    let sq = wq(4 * 64, &[(0, read)]);
    // SAFETY: see above `wq`.
    unsafe { reg.set_recv_wqes(QPN, rq, 32, false) }.unwrap();
    // SAFETY: see above `wq`.
    unsafe { reg.set_send_wqes(QPN, sq) }.unwrap();
    let (mut m, mut cq) = setup::<64>(reg);
    for _ in 0..2 {
        m.push(&build::resp(cqe_opcode::RESP_SEND, QPN, 0, 0, 0).inline(&payload(8))).unwrap();
    }
    m.push(&build::req(QPN, 0, wqe_opcode::RDMA_READ, 0).inline(&payload(8))).unwrap();
    let got = drain(&mut cq, 16);
    assert_eq!(got.len(), 3);
    assert!(got.iter().all(|c| c.status == WcStatus::Success && c.fault().is_none()), "{got:?}");
    assert_eq!(cq.stats().inline_not_copied, 3);
    assert!(dst.0.iter().all(|b| b.iter().all(|&x| x == 0)), "no posted WQE names these buffers");

    let mut reg = Registry::new();
    reg.add_qp(QpConfig::rc(QPN, 4, 4)).unwrap();
    let at = reg.qp_mut(QPN).unwrap().rq.post(0xf0);
    let null = DataSeg { addr: 0, len: 16, lkey: LKEY };
    let rq = wq(4 * 32, &[(0, wqe::recv_wqe(None, &[null], 32))]);
    // SAFETY: see above `wq`.
    unsafe { reg.set_recv_wqes(QPN, rq, 32, false) }.unwrap();
    let (mut m, mut cq) = setup::<64>(reg);
    m.push(&build::resp(cqe_opcode::RESP_SEND, QPN, at, 0, 0).inline(&payload(8))).unwrap();
    assert_eq!(cq.peek().map(|c| c.status), Some(WcStatus::LocLenErr));
    let got = drain(&mut cq, 4);
    assert_eq!((got[0].status, got[0].wr_id, got[0].byte_len), (WcStatus::LocLenErr, 0xf0, 8));
}

/// Without registered WQEs a completion is returned as rdma-core's poll would return it,
/// its data left in the CQE: counted, for the application to see (a peek counts nothing).
/// More data than the format has room for is garbage: a fault item that consumes no WQE.
#[test]
fn unregistered_wqes_are_counted_and_garbage_lengths_are_faults() {
    let mut reg = Registry::new();
    reg.add_qp(QpConfig::rc(QPN, 4, 4)).unwrap();
    let at = reg.qp_mut(QPN).unwrap().rq.post(0xc0);
    let (mut m, mut cq) = setup::<64>(reg);
    m.push(&build::resp(cqe_opcode::RESP_SEND, QPN, at, 0, 0).inline(&payload(16))).unwrap();
    let mut garbage = build::resp(cqe_opcode::RESP_SEND, QPN, at, 0, 0).inline(&payload(16));
    garbage.cqe.byte_cnt = dvcq_uapi::Be32::new(33);
    m.push(&garbage).unwrap();
    assert_eq!(cq.peek().map(|c| c.status), Some(WcStatus::Success));
    assert_eq!(cq.stats().inline_not_copied, 0);
    let got = drain(&mut cq, 4);
    assert_eq!((got[0].status, got[0].wr_id, got[0].byte_len), (WcStatus::Success, 0xc0, 16));
    assert_eq!(got[1].fault().map(|f| (f.kind, f.value)), Some((FaultKind::BadField, 33)));
    assert_eq!(cq.stats().inline_not_copied, 1);
    assert_eq!(cq.registry().qp(QPN).unwrap().rq.outstanding(), 0, "the fault consumed no receive");
}

/// WQE buffers are checked against their queues when they are registered.
#[test]
fn wqe_buffers_must_fit_their_queues() {
    let mut reg = Registry::new();
    reg.add_qp(QpConfig::rc(QPN, 8, 4)).unwrap();
    reg.add_srq(SRQN, 10).unwrap();
    let small = || wq(64, &[]);
    // SAFETY: empty buffers name no memory, and nothing here polls.
    unsafe {
        assert_eq!(reg.set_recv_wqes(QPN, small(), 24, false), Err(RegistryError::BadWqeStride { stride: 24 }));
        assert_eq!(reg.set_recv_wqes(QPN, small(), 8, false), Err(RegistryError::BadWqeStride { stride: 8 }));
        let too_small = reg.set_recv_wqes(QPN, small(), 32, false).unwrap_err();
        assert_eq!(too_small.to_string(), "qp rq buffer of 0x77 has 64 bytes, its queue needs 128");
        let sq = reg.set_send_wqes(QPN, small()).unwrap_err();
        assert_eq!(sq, RegistryError::WqeBufferTooSmall { what: "qp sq", what_value: QPN, need: 512, have: 64 });
        let srq = reg.set_srq_wqes(SRQN, small(), 16).unwrap_err();
        assert_eq!(srq, RegistryError::BadWqeStride { stride: 16 }, "an SRQ WQE needs room after its next segment");
        let unknown = reg.set_recv_wqes(0x999, small(), 16, false).unwrap_err();
        assert_eq!(unknown, RegistryError::NotRegistered { what: "qpn", value: 0x999 });
        assert!(reg.set_recv_wqes(QPN, wq(128, &[]), 32, false).is_ok());
    }
}
