//! Inline scatter (rdma-core `providers/mlx5/qp.c` `mlx5_copy_to_recv_wqe`,
//! `mlx5_copy_to_send_wqe`; on by default for RC QPs, `verbs.c` `create_qp`): a CQE that
//! carries its data (format 1 in the cqe64, format 2 in a 128-byte CQE's first half) has it
//! copied where the completed WQE's data segments say, as rdma-core's poll copies it, with
//! rdma-core's statuses when the copy fails. The WQEs are posted into model memory; the
//! buffers they name are the test's own.

use dvcq_mlx5_dv::model::build;
use dvcq_mlx5_dv::model::wqe::{self, DataSeg};
use dvcq_mlx5_dv::model::{Mlx5Model, ModelConfig};
use dvcq_mlx5_dv::{CqConfig, Mlx5Cq, QpConfig, QpType, Registry, RegistryError};
use dvcq_provider::testing::{drain, drain_in_batches, drain_one_by_one};
use dvcq_provider::{Completion, DmaBuffer, FaultKind, MemoryRegion, WcFlags, WcOpcode, WcStatus, WqBuffer};
use dvcq_uapi::mlx5::opcode::{cqe_opcode, wqe_opcode};
use proptest::prelude::*;
use std::sync::Arc;

const QPN: u32 = 0x77;
const SRQN: u32 = 0x31;
const LKEY: u32 = 0x1234;

/// Buffers WQEs point at, side by side in one model buffer that is registered as one memory
/// region under `LKEY`: the only memory the copy may write.
struct Dst {
    mem: Arc<DmaBuffer>,
    /// (offset, length) of each buffer.
    at: Vec<(usize, usize)>,
}

impl Dst {
    fn new(lens: &[usize]) -> Self {
        let at: Vec<(usize, usize)> =
            lens.iter().scan(0, |off, &n| Some((std::mem::replace(off, *off + n), n))).collect();
        Dst { mem: Arc::new(DmaBuffer::new(lens.iter().sum()).unwrap()), at }
    }
    /// A data segment naming all of buffer `i`, under `lkey`.
    fn seg(&self, i: usize, lkey: u32) -> DataSeg {
        let (off, len) = self.at[i];
        DataSeg { addr: self.mem.as_ptr() as u64 + off as u64, len: len as u32, lkey }
    }
    /// Registers all the buffers as one memory region under `LKEY`.
    fn register(&self, reg: &mut Registry) {
        reg.add_memory_region(self.mem.memory_region(0, self.mem.len(), LKEY).unwrap()).unwrap();
    }
    /// What buffer `i` holds.
    fn get(&self, i: usize) -> Vec<u8> {
        let (off, len) = self.at[i];
        let mut out = vec![0; len];
        self.mem.read_bytes(off, &mut out).unwrap();
        out
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
            let dst = Dst::new(&[8, 64]);
            let segs = [dst.seg(0, LKEY), dst.seg(1, LKEY)];
            let mut reg = Registry::new();
            dst.register(&mut reg);
            reg.add_qp(QpConfig::rc(QPN, 8, 8)).unwrap();
            let qp = reg.qp_mut(QPN).unwrap();
            let posted = [qp.rq.post(0xa0), qp.rq.post(0xa1), qp.rq.post(0xa2)];
            let rq = wq(8 * 64, &[(64, wqe::recv_wqe(None, &segs, 64))]);
            reg.set_recv_wqes(QPN, rq, 64, false).unwrap();
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
            assert_eq!(&dst.get(0)[..], &data[..8], "{what}");
            assert_eq!(&dst.get(1)[..n - 8], &data[8..], "{what}");
            assert!(dst.get(1)[n - 8..].iter().all(|&b| b == 0), "{what}: past the data");
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
    let dst = Dst::new(&[4, 8]);
    let segs = [dst.seg(0, LKEY), dst.seg(1, LKEY)];
    let mut reg = Registry::new();
    dst.register(&mut reg);
    reg.add_qp(QpConfig::rc(QPN, 8, 8)).unwrap();
    let at = reg.qp_mut(QPN).unwrap().rq.post(0xb0);
    // Stride 32: two segments, no room for a terminator.
    let rq = wq(8 * 32, &[(0, wqe::recv_wqe(None, &segs, 32))]);
    reg.set_recv_wqes(QPN, rq, 32, false).unwrap();
    let (mut m, mut cq) = setup::<64>(reg);
    let data = payload(20);
    m.push(&build::resp(cqe_opcode::RESP_SEND_IMM, QPN, at, 0, 7).inline(&data)).unwrap();
    let peeked = cq.peek().unwrap();
    let got = drain(&mut cq, 4);
    assert_eq!((got[0].status, got[0].wr_id, got[0].byte_len), (WcStatus::LocLenErr, 0xb0, 20));
    assert_eq!(got[0].wc_flags, WcFlags::empty(), "no WITH_IMM: rdma-core returns before the opcode switch");
    assert_eq!(peeked.status, WcStatus::LocLenErr, "peek reports what poll returns");
    assert_eq!((&dst.get(0)[..], &dst.get(1)[..]), (&data[..4], &data[4..12]));
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

    let dst = Dst::new(&[10, 32]);
    let segs = [dst.seg(0, NULL), dst.seg(1, LKEY)];
    let mut reg = Registry::new();
    dst.register(&mut reg);
    reg.add_qp(QpConfig::rc(QPN, 4, 4)).unwrap();
    let at = reg.qp_mut(QPN).unwrap().rq.post(0xd0);
    reg.set_null_lkey(Some(NULL));
    let sig = [0xcc; 16];
    let rq = wq(4 * 64, &[(0, wqe::recv_wqe(Some(sig), &segs, 64))]);
    reg.set_recv_wqes(QPN, rq, 64, true).unwrap();
    let (mut m, mut cq) = setup::<64>(reg);
    m.push(&build::resp(cqe_opcode::RESP_SEND, QPN, at, 0, 0).inline(&data)).unwrap();
    assert_eq!(drain(&mut cq, 1)[0].status, WcStatus::Success);
    assert!(dst.get(0).iter().all(|&b| b == 0), "the null key's buffer is not written");
    assert_eq!(&dst.get(1)[..14], &data[10..]);

    let dst = Dst::new(&[32]);
    let segs = [dst.seg(0, LKEY)];
    let mut reg = Registry::new();
    dst.register(&mut reg);
    reg.add_srq(SRQN, 300).unwrap().post(260, 0x5260);
    reg.add_qp(QpConfig { srqn: Some(SRQN), ..QpConfig::rc(QPN, 4, 0) }).unwrap();
    let srq = wq(300 * 32, &[(260 * 32, wqe::recv_wqe(Some(wqe::srq_next(261)), &segs, 32))]);
    reg.set_srq_wqes(SRQN, srq, 32).unwrap();
    let (mut m, mut cq) = setup::<64>(reg);
    m.push(&build::resp(cqe_opcode::RESP_SEND, QPN, 260, 0, 0).srqn_uidx(SRQN).inline(&data)).unwrap();
    let got = drain(&mut cq, 16);
    assert_eq!((got[0].status, got[0].wr_id, got[0].wqe_index), (WcStatus::Success, 0x5260, 260));
    assert_eq!(&dst.get(0)[..24], &data[..]);
}

/// A READ's or atomic's response goes into the send WQE's scatter list, after its remote
/// address (and atomic) segment; a list that passes the SQ's end goes on at its start.
/// A WQE of another opcode is `IBV_WC_REM_INV_REQ_ERR` and a UD QP's `IBV_WC_GENERAL_ERR`,
/// as rdma-core's `mlx5_copy_to_send_wqe` has them, with the WQE's wr_id.
#[test]
fn read_and_atomic_responses_go_into_the_send_wqe() {
    // SQ of 4 basic blocks: three one-block sends retired first, then a 2-block READ at
    // block 3 that wraps to block 0, an atomic at block 1 and a SEND at block 2.
    let dst = Dst::new(&[8, 8, 16, 8]);
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
    dst.register(&mut reg);
    reg.add_qp(QpConfig::rc(QPN, 4, 4)).unwrap();
    reg.set_send_wqes(QPN, sq.clone()).unwrap();
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
    assert_eq!((&dst.get(0)[..], &dst.get(1)[..], &dst.get(2)[..14]), (&data[..8], &data[8..16], &data[16..]));
    assert_eq!(&dst.get(3)[..], &fetched[..]);
    assert_eq!(cq.stats().inline_not_copied, 0);

    // The same READ on a QP of any other type: rdma-core's `mlx5_copy_to_send_wqe` copies
    // for IBV_QPT_RC only. UC and XRC initiator QPs are not RC either.
    for qp_type in [QpType::Uc, QpType::Ud, QpType::RawPacket, QpType::XrcSend, QpType::XrcRecv, QpType::Driver] {
        let before = dst.get(0);
        let mut reg = Registry::new();
        dst.register(&mut reg);
        reg.add_qp(QpConfig { qp_type, ..QpConfig::rc(QPN, 4, 4) }).unwrap();
        reg.set_send_wqes(QPN, sq.clone()).unwrap();
        let (mut m, mut cq) = setup::<64>(reg);
        let at = early(&mut m, &mut cq);
        m.push(&build::req(QPN, at[0], wqe_opcode::RDMA_READ, 0).inline(&payload(30)[..5])).unwrap();
        let got = drain(&mut cq, 1);
        assert_eq!((got[0].status, got[0].wr_id), (WcStatus::GeneralErr, 0x3003), "{qp_type:?}: the WQE's own wr_id");
        assert_eq!(dst.get(0), before, "{qp_type:?}: nothing copied");
    }
}

/// `QpType` numbers are libibverbs' `enum ibv_qp_type`, and its image words read back.
#[test]
fn qp_types_are_libibverbs_numbers() {
    let all = [QpType::Rc, QpType::Uc, QpType::Ud, QpType::RawPacket, QpType::XrcSend, QpType::XrcRecv, QpType::Driver];
    let numbers: Vec<u32> = all.iter().map(|t| t.ibv()).collect();
    assert_eq!(numbers, [2, 3, 4, 8, 9, 10, 0xff]);
    for t in all {
        assert_eq!(QpType::from_ibv(t.ibv()), Some(t));
        assert_eq!(QpType::from_word(t.word()), Some(t));
    }
    for unknown in [0, 1, 5, 7, 11, 0xfe] {
        assert_eq!(QpType::from_ibv(unknown), None, "{unknown}");
    }
    assert_eq!(QpConfig::rc(1, 1, 1).qp_type, QpType::Rc);
}

/// A device may consume receive WQEs out of order (rdma-core v55 and later take the CQE's
/// counter): each receive's data goes into the WQE its CQE names, not the oldest one.
#[test]
fn out_of_order_receives_fill_the_wqes_their_cqes_name() {
    let dst = Dst::new(&[16, 16]);
    let segs = [[dst.seg(0, LKEY)], [dst.seg(1, LKEY)]];
    let mut reg = Registry::new();
    dst.register(&mut reg);
    reg.add_qp(QpConfig::rc(QPN, 4, 4)).unwrap();
    let q = &mut reg.qp_mut(QPN).unwrap().rq;
    let at = [q.post(0xe0), q.post(0xe1)];
    let rq = wq(4 * 32, &[(0, wqe::recv_wqe(None, &segs[0], 32)), (32, wqe::recv_wqe(None, &segs[1], 32))]);
    reg.set_recv_wqes(QPN, rq, 32, false).unwrap();
    let (mut m, mut cq) = setup::<64>(reg);
    let (first, second) = (payload(12), vec![0xee; 9]);
    m.push(&build::resp(cqe_opcode::RESP_SEND, QPN, at[1], 0, 0).inline(&first)).unwrap();
    m.push(&build::resp(cqe_opcode::RESP_SEND, QPN, at[0], 0, 0).inline(&second)).unwrap();
    let got = drain(&mut cq, 16);
    let summary: Vec<_> = got.iter().map(|c| (c.status, c.wr_id, c.byte_len)).collect();
    assert_eq!(summary, [(WcStatus::Success, 0xe1, 12), (WcStatus::Success, 0xe0, 9)]);
    assert_eq!((&dst.get(1)[..12], &dst.get(0)[..9]), (&first[..], &second[..]));
    assert_eq!(cq.stats().inline_not_copied, 0);
}

/// The copy writes only into posted WQEs' buffers. A receive CQE on a QP with nothing
/// outstanding, or a requester CQE for a send WQE that holds no posted work request, is
/// garbage: returned as the poll translates it, its data left in the CQE and counted, the
/// registered buffers untouched, even after garbage has completed more than was posted.
/// A data segment with a null address lies in no memory region and takes nothing:
/// `IBV_WC_LOC_PROT_ERR`.
#[test]
fn nothing_is_written_for_wqes_not_posted_or_null_addresses() {
    let dst = Dst::new(&[16, 16]);
    let mut reg = Registry::new();
    dst.register(&mut reg);
    reg.add_qp(QpConfig::rc(QPN, 4, 4)).unwrap();
    let rq = wq(4 * 32, &[(0, wqe::recv_wqe(None, &[dst.seg(0, LKEY)], 32))]);
    let read = wqe::send_wqe(wqe_opcode::RDMA_READ, 0, QPN, &[dst.seg(1, LKEY)]);
    let sq = wq(4 * 64, &[(0, read)]);
    reg.set_recv_wqes(QPN, rq, 32, false).unwrap();
    reg.set_send_wqes(QPN, sq).unwrap();
    let (mut m, mut cq) = setup::<64>(reg);
    for _ in 0..2 {
        m.push(&build::resp(cqe_opcode::RESP_SEND, QPN, 0, 0, 0).inline(&payload(8))).unwrap();
    }
    m.push(&build::req(QPN, 0, wqe_opcode::RDMA_READ, 0).inline(&payload(8))).unwrap();
    let got = drain(&mut cq, 16);
    assert_eq!(got.len(), 3);
    assert!(got.iter().all(|c| c.status == WcStatus::Success && c.fault().is_none()), "{got:?}");
    assert_eq!(cq.stats().inline_not_copied, 3);
    assert!((0..2).all(|i| dst.get(i).iter().all(|&x| x == 0)), "no posted WQE names these buffers");

    let mut reg = Registry::new();
    reg.add_qp(QpConfig::rc(QPN, 4, 4)).unwrap();
    let at = reg.qp_mut(QPN).unwrap().rq.post(0xf0);
    let null = DataSeg { addr: 0, len: 16, lkey: LKEY };
    let rq = wq(4 * 32, &[(0, wqe::recv_wqe(None, &[null], 32))]);
    reg.set_recv_wqes(QPN, rq, 32, false).unwrap();
    let (mut m, mut cq) = setup::<64>(reg);
    m.push(&build::resp(cqe_opcode::RESP_SEND, QPN, at, 0, 0).inline(&payload(8))).unwrap();
    assert_eq!(cq.peek().map(|c| c.status), Some(WcStatus::LocProtErr));
    let got = drain(&mut cq, 4);
    assert_eq!((got[0].status, got[0].wr_id, got[0].byte_len), (WcStatus::LocProtErr, 0xf0, 8));
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

/// Every part of the data goes only where the memory region its segment's lkey names
/// covers the whole part: a segment into memory no region covers, one that runs past its
/// region's end, one of a key no region has, or a wild address stops the copy with
/// `IBV_WC_LOC_PROT_ERR` (as the device fails a receive whose segment leaves its memory
/// region), writing nothing from that segment on; a peek reports the same. A removed
/// region takes nothing.
#[test]
fn segments_outside_their_memory_region_write_nothing() {
    let dst = Dst::new(&[16, 16]);
    let other = Arc::new(DmaBuffer::new(64).unwrap());
    let unregistered = DataSeg { addr: other.as_ptr() as u64, len: 16, lkey: LKEY };
    let region_end = dst.seg(1, LKEY).addr + 16;
    let wqes = [
        vec![unregistered],
        vec![DataSeg { addr: region_end - 8, len: 16, lkey: LKEY }],
        vec![DataSeg { lkey: LKEY + 1, ..dst.seg(0, LKEY) }],
        vec![DataSeg { addr: 0xdead_0000_0000, len: 16, lkey: LKEY }],
        vec![dst.seg(0, LKEY), unregistered],
        vec![dst.seg(1, LKEY)],
    ];
    let mut reg = Registry::new();
    dst.register(&mut reg);
    reg.add_qp(QpConfig::rc(QPN, 8, 8)).unwrap();
    let q = &mut reg.qp_mut(QPN).unwrap().rq;
    let at: Vec<u16> = (0..6).map(|i| q.post(0x10 + i)).collect();
    let posted: Vec<(usize, Vec<u8>)> =
        wqes.iter().enumerate().map(|(i, s)| (i * 64, wqe::recv_wqe(None, s, 64))).collect();
    reg.set_recv_wqes(QPN, wq(8 * 64, &posted), 64, false).unwrap();
    let (mut m, mut cq) = setup::<64>(reg);
    let data = payload(20);
    for &i in &at[..5] {
        m.push(&build::resp(cqe_opcode::RESP_SEND, QPN, i, 0, 0).inline(&data)).unwrap();
    }
    assert_eq!(cq.peek().map(|c| c.status), Some(WcStatus::LocProtErr));
    let got = drain(&mut cq, 16);
    let summary: Vec<_> = got.iter().map(|c| (c.status, c.wr_id)).collect();
    assert_eq!(summary, (0x10..0x15).map(|w| (WcStatus::LocProtErr, w)).collect::<Vec<_>>());
    let mut outside = [0xffu8; 64];
    other.read_bytes(0, &mut outside).unwrap();
    assert_eq!(outside, [0; 64], "memory no region covers");
    assert_eq!(dst.get(0), data[..16], "the segment inside its region, before the one outside");
    assert_eq!(dst.get(1), [0; 16], "nothing past the region's end either");
    // Deregistered: the same copy, which fits its region, now finds none.
    let gone = cq.registry_mut().remove_memory_region(LKEY).map(|r| (r.lkey(), r.len()));
    assert_eq!(gone, Some((LKEY, 32)));
    m.push(&build::resp(cqe_opcode::RESP_SEND, QPN, at[5], 0, 0).inline(&data[..12])).unwrap();
    assert_eq!(drain(&mut cq, 4).iter().map(|c| c.status).collect::<Vec<_>>(), [WcStatus::LocProtErr]);
    assert_eq!(dst.get(1), [0; 16]);
}

/// An SRQ copies only while it holds a posted receive, as a QP's RQ does: a CQE naming one
/// of its WQEs before anything was posted, or after every post completed, is garbage, its
/// data left in the CQE and counted.
#[test]
fn an_srq_copies_only_while_a_receive_is_posted() {
    let (first, second) = (payload(24), vec![0xee; 24]);
    let recv = |data: &[u8]| build::resp(cqe_opcode::RESP_SEND, QPN, 1, 0, 0).srqn_uidx(SRQN).inline(data);
    for post in [false, true] {
        let dst = Dst::new(&[32]);
        let mut reg = Registry::new();
        dst.register(&mut reg);
        reg.add_srq(SRQN, 4).unwrap();
        reg.add_qp(QpConfig { srqn: Some(SRQN), ..QpConfig::rc(QPN, 4, 0) }).unwrap();
        let srq = wq(4 * 32, &[(32, wqe::recv_wqe(Some(wqe::srq_next(2)), &[dst.seg(0, LKEY)], 32))]);
        reg.set_srq_wqes(SRQN, srq, 32).unwrap();
        if post {
            assert!(reg.srq_mut(SRQN).unwrap().post(1, 0x51));
            assert_eq!(reg.srq(SRQN).map(|s| s.outstanding()), Some(1));
        }
        let (mut m, mut cq) = setup::<64>(reg);
        m.push(&recv(&first)).unwrap();
        let got = drain(&mut cq, 4);
        assert_eq!((got[0].status, got[0].byte_len), (WcStatus::Success, 24));
        if !post {
            assert_eq!((cq.stats().inline_not_copied, dst.get(0)), (1, vec![0; 32]), "nothing posted");
            continue;
        }
        assert_eq!((got[0].wr_id, cq.stats().inline_not_copied, &dst.get(0)[..24]), (0x51, 0, &first[..]));
        assert_eq!(cq.registry().srq(SRQN).map(|s| s.outstanding()), Some(0));
        m.push(&recv(&second)).unwrap();
        drain(&mut cq, 4);
        assert_eq!((cq.stats().inline_not_copied, &dst.get(0)[..24]), (1, &first[..]), "its post completed");
    }
}

/// An application's own memory, registered by address and length as an integrator
/// registers an `ibv_reg_mr` region: the copy writes inside it and refuses a segment that
/// ends past it, leaving the bytes around the region as they were.
#[test]
fn memory_registered_by_address_and_length_takes_the_copy() {
    let mut mine = vec![0u8; 40];
    let base = mine.as_mut_ptr();
    let addr = base as u64;
    let mut reg = Registry::new();
    // SAFETY: `mine` is neither moved nor freed before `cq`, which holds the registry and so the region, is dropped; it is read only after the polls, on this thread.
    let region = unsafe { MemoryRegion::new(base.add(4), 32, LKEY) }.unwrap();
    reg.add_memory_region(region).unwrap();
    let dup = DmaBuffer::new(8).map(Arc::new).unwrap().memory_region(0, 8, LKEY).unwrap();
    assert_eq!(reg.add_memory_region(dup), Err(RegistryError::Duplicate { what: "lkey", value: LKEY }));
    reg.add_qp(QpConfig::rc(QPN, 4, 4)).unwrap();
    let q = &mut reg.qp_mut(QPN).unwrap().rq;
    let at = [q.post(0x70), q.post(0x71)];
    let inside = DataSeg { addr: addr + 4, len: 32, lkey: LKEY };
    let past = DataSeg { addr: addr + 8, len: 32, lkey: LKEY };
    let rq = wq(4 * 32, &[(0, wqe::recv_wqe(None, &[inside], 32)), (32, wqe::recv_wqe(None, &[past], 32))]);
    reg.set_recv_wqes(QPN, rq, 32, false).unwrap();
    let (mut m, mut cq) = setup::<64>(reg);
    let data = payload(32);
    for i in at {
        m.push(&build::resp(cqe_opcode::RESP_SEND, QPN, i, 0, 0).inline(&data)).unwrap();
    }
    let got = drain(&mut cq, 4);
    assert_eq!(
        got.iter().map(|c| (c.status, c.wr_id)).collect::<Vec<_>>(),
        [(WcStatus::Success, 0x70), (WcStatus::LocProtErr, 0x71)]
    );
    drop((cq, m));
    assert_eq!((&mine[..4], &mine[4..36], &mine[36..]), (&[0u8; 4][..], &data[..], &[0u8; 4][..]));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: if cfg!(miri) { 2 } else { 48 }, ..ProptestConfig::default() })]

    /// Whatever the WQEs' data segments say (addresses inside, across, around and far from
    /// the one registered region, any length, its key, another key, the null key), whatever
    /// the CQEs name (posted or not, any WQE, up to 32 bytes inline), the copy writes only
    /// inside the region, and each completion is a success or one of the copy's statuses.
    #[test]
    fn untrusted_segments_and_cqes_write_only_inside_the_region(
        segs in proptest::collection::vec((0u64..448, 0u32..100, 0u8..4), 16),
        cqes in proptest::collection::vec((0u16..8, 1usize..=32), 1..12),
        posts in 0u32..8,
    ) {
        const NULL: u32 = 0x99;
        let mem = Arc::new(DmaBuffer::new(256).unwrap());
        mem.write_bytes(0, &[0xc5; 256]).unwrap();
        let mut reg = Registry::new();
        reg.add_memory_region(mem.memory_region(64, 128, LKEY).unwrap()).unwrap();
        reg.set_null_lkey(Some(NULL));
        reg.add_qp(QpConfig::rc(QPN, 8, 8)).unwrap();
        for i in 0..posts {
            reg.qp_mut(QPN).unwrap().rq.post(u64::from(i));
        }
        let keys = [LKEY, LKEY + 1, NULL, LKEY];
        let segs: Vec<DataSeg> = segs
            .iter()
            .map(|&(off, len, key)| DataSeg { addr: mem.as_ptr() as u64 + off, len, lkey: keys[key as usize] })
            .collect();
        let wqes: Vec<(usize, Vec<u8>)> = segs.chunks(2).enumerate().map(|(i, s)| (i * 32, wqe::recv_wqe(None, s, 32))).collect();
        reg.set_recv_wqes(QPN, wq(8 * 32, &wqes), 32, false).unwrap();
        let (mut m, mut cq) = setup::<64>(reg);
        for (i, &(counter, n)) in cqes.iter().enumerate() {
            m.push(&build::resp(cqe_opcode::RESP_SEND, QPN, counter, 0, 0).inline(&vec![i as u8; n])).unwrap();
            for c in drain(&mut cq, 4) {
                prop_assert!(
                    matches!(c.status, WcStatus::Success | WcStatus::LocLenErr | WcStatus::LocProtErr),
                    "{c:?}"
                );
            }
        }
        let mut all = [0u8; 256];
        mem.read_bytes(0, &mut all).unwrap();
        prop_assert!(all[..64].iter().chain(&all[192..]).all(|&b| b == 0xc5), "written outside the region: {all:?}");
    }
}

/// A receive queue of 8 WQEs as abstract data segments: (offset into the test's buffer,
/// byte count, key: 0 and 3 the region's, 1 another, 2 the null key).
type Layout = Vec<Vec<(u64, u32, u8)>>;

/// One CQE: (opcode pick, WQE counter, bytes of data, plain receive without inline data).
type Cqes = Vec<(u8, u16, usize, bool)>;

/// Polls `cqes` (with a send between some) on a QP whose 8 receive WQEs follow `layout`
/// at `stride`, `posts` receives posted: on a plain CQ at `batch`, where each inline
/// receive takes the fast path when it can; or, with `slow`, on a CQ created with enhanced
/// compression (the model writing regular CQEs only), where every inline receive takes the
/// slow path. Returns the completions, the test buffer's bytes and the uncopied count.
fn inline_run<const S: usize>(
    slow: bool,
    batch: usize,
    layout: &Layout,
    stride: usize,
    cqes: &Cqes,
    posts: u32,
) -> (Vec<Completion>, Vec<u8>, u64) {
    const NULL: u32 = 0x99;
    let mem = Arc::new(DmaBuffer::new(512).unwrap());
    mem.write_bytes(0, &[0xc5; 512]).unwrap();
    let mut reg = Registry::new();
    reg.add_memory_region(mem.memory_region(64, 320, LKEY).unwrap()).unwrap();
    reg.set_null_lkey(Some(NULL));
    reg.add_qp(QpConfig::rc(QPN, 16, 8)).unwrap();
    for i in 0..posts {
        reg.qp_mut(QPN).unwrap().rq.post(0x700 + u64::from(i));
    }
    let keys = [LKEY, LKEY + 1, NULL, LKEY];
    let wqes: Vec<(usize, Vec<u8>)> = layout
        .iter()
        .enumerate()
        .map(|(i, segs)| {
            let segs: Vec<DataSeg> = segs
                .iter()
                .map(|&(off, len, key)| DataSeg { addr: mem.as_ptr() as u64 + off, len, lkey: keys[key as usize] })
                .collect();
            (i * stride, wqe::recv_wqe(None, &segs[..segs.len().min(stride / 16)], stride))
        })
        .collect();
    reg.set_recv_wqes(QPN, wq(8 * stride, &wqes), stride as u32, false).unwrap();
    let mut mc = ModelConfig::new(64);
    mc.cqe_size = S as u32;
    if slow {
        mc.compression = Some(dvcq_mlx5_dv::model::compress::Compression {
            layout: dvcq_mlx5_dv::CompLayout::Enhanced,
            format: dvcq_mlx5_dv::MiniFormat::Hash,
            policy: dvcq_mlx5_dv::model::compress::Policy::Never,
        });
    }
    let mut m = Mlx5Model::new(mc).unwrap();
    let mut cq = m.poller::<S>(reg, CqConfig::default()).unwrap();
    let cap = if S == 128 { 64 } else { 32 };
    let opcodes =
        [cqe_opcode::RESP_SEND, cqe_opcode::RESP_SEND_IMM, cqe_opcode::RESP_WR_IMM, cqe_opcode::RESP_SEND_INV];
    let mut sends = 0;
    for (i, &(op, counter, n, plain)) in cqes.iter().enumerate() {
        let data: Vec<u8> = (0..n.min(cap)).map(|j| (i * 64 + j) as u8 | 1).collect();
        let recv = build::resp(opcodes[op as usize % 4], QPN, counter, n as u32, 0x1234_5678);
        let mut e = if plain { recv } else { recv.inline(&data) };
        // More than the format has room for: garbage, a fault item on either path.
        e.cqe.byte_cnt = dvcq_uapi::Be32::new(n as u32);
        if op >= 4 {
            cq.registry_mut().qp_mut(QPN).unwrap().sq.post(sends, 1);
            m.push(&build::req(QPN, sends as u16, wqe_opcode::SEND, 0)).unwrap();
            sends += 1;
        }
        m.push(&e).unwrap();
    }
    // Into zeroed completions: a requester's leaves fields it does not define as they were.
    let got = match (slow, batch) {
        (false, 1) => drain_one_by_one(&mut cq).unwrap_or_else(|e| panic!("{e}")),
        (false, b) => drain_in_batches(&mut cq, &[b], 64),
        (true, _) => drain_in_batches(&mut cq, &[16], 64),
    };
    let mut bytes = vec![0; 512];
    mem.read_bytes(0, &mut bytes).unwrap();
    (got, bytes, cq.stats().inline_not_copied)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: if cfg!(miri) { 2 } else { 96 }, ..ProptestConfig::default() })]

    /// The fast path's copy of inline receives is the slow path's: for any payload size
    /// (up to past what the format holds), any data segment layout (one or several
    /// segments, lengths short of the data or past it, addresses across and outside the
    /// region, other and null keys), posted or not, in batches or one at a time, the
    /// completions, the bytes written and the count left uncopied are those of a poll
    /// where every such receive takes the slow path. One at a time, each completion is
    /// also what a peek (the slow path's translation, copy checked but not made) said.
    #[test]
    fn the_fast_paths_inline_copy_is_the_slow_paths(
        big in any::<bool>(),
        batch in proptest::sample::select(vec![1usize, 3, 16]),
        stride_log in 4u32..=6,
        layout in proptest::collection::vec(
            proptest::collection::vec((prop_oneof![4 => 64u64..320, 1 => 0u64..448], 0u32..80, prop_oneof![6 => Just(0u8), 1 => 1u8..4]), 1..4),
            8,
        ),
        cqes in proptest::collection::vec((0u8..8, 0u16..8, prop_oneof![8 => 0usize..=64, 1 => 65usize..=70], proptest::bool::weighted(0.1)), 1..14),
        posts in prop_oneof![4 => Just(8u32), 1 => 0u32..8],
    ) {
        let stride = 1usize << stride_log;
        let (fast, slow) = if big {
            (inline_run::<128>(false, batch, &layout, stride, &cqes, posts), inline_run::<128>(true, 16, &layout, stride, &cqes, posts))
        } else {
            (inline_run::<64>(false, batch, &layout, stride, &cqes, posts), inline_run::<64>(true, 16, &layout, stride, &cqes, posts))
        };
        prop_assert_eq!(fast.0.len(), slow.0.len());
        for (i, (f, s)) in fast.0.iter().zip(&slow.0).enumerate() {
            prop_assert_eq!(f, s, "completion {}", i);
        }
        prop_assert_eq!(&fast.1, &slow.1, "bytes written");
        prop_assert_eq!(fast.2, slow.2, "left uncopied");
    }
}
