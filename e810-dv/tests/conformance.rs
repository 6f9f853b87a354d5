//! Conformance of the irdma poller on the irdma model: every opcode, UD, every error class,
//! flushes on GEN2 and GEN3, extended CQEs, wrap over many laps, head masking, garbage and
//! unknown handles, each checked against what rdma-core's irdma provider does
//! (`providers/irdma/uk.c` `irdma_uk_cq_poll_cmpl`, `providers/irdma/uverbs.c`
//! `irdma_process_cqe`, `__irdma_upoll_cq`).

use dvcq_e810_dv::model::{IrdmaModel, ModelConfig, ModelCqe};
use dvcq_e810_dv::{Compat, IrdmaCq, QpConfig, QpId, QpRegistry, QpType, Transport};
use dvcq_provider::{Completion, CqDriver, FaultKind, WcFlags, WcOpcode, WcStatus};
use dvcq_uapi::irdma::codes::{flush, rq_op, sq_op};
use dvcq_uapi::irdma::HwRev;

const CTX: u64 = 0x7f12_3456_7800;
const QPN: u32 = 0x11;

fn setup(gen: HwRev, entries: u32, cfg: QpConfig, compat: Compat) -> (IrdmaModel, IrdmaCq, QpId) {
    let model = IrdmaModel::new(ModelConfig::new(gen, entries)).unwrap();
    let mut qps = QpRegistry::new(gen);
    let id = qps.register(CTX, cfg).unwrap();
    let cq = model.poller(qps, compat).unwrap();
    (model, cq, id)
}

fn poll_all(cq: &mut IrdmaCq) -> Vec<Completion> {
    let mut out = vec![Completion::default(); 64];
    let mut v = Vec::new();
    loop {
        let n = cq.poll(&mut out);
        if n == 0 {
            return v;
        }
        v.extend_from_slice(&out[..n]);
    }
}

/// Every SQ opcode, as `set_ib_wc_op_sq` maps it. The atomics came with rdma-core
/// v64 (commit c2665c2e3): v44 to v63 have no case for them, so their completions are
/// `IBV_WC_GENERAL_ERR` with the opcode left untouched, like any unknown opcode's.
#[test]
fn every_sq_opcode() {
    let table = [
        (sq_op::RDMA_WRITE, Some(WcOpcode::RdmaWrite), true),
        (sq_op::RDMA_WRITE_SOL, Some(WcOpcode::RdmaWrite), true),
        (sq_op::RDMA_READ, Some(WcOpcode::RdmaRead), true),
        (sq_op::SEND, Some(WcOpcode::Send), true),
        (sq_op::SEND_INV, Some(WcOpcode::Send), true),
        (sq_op::SEND_SOL, Some(WcOpcode::Send), true),
        (sq_op::SEND_SOL_INV, Some(WcOpcode::Send), true),
        (sq_op::BIND_MW, Some(WcOpcode::BindMw), true),
        (sq_op::ATOMIC_COMPARE_AND_SWAP, Some(WcOpcode::CompSwap), false),
        (sq_op::ATOMIC_FETCH_AND_ADD, Some(WcOpcode::FetchAdd), false),
        (sq_op::INV_STAG, Some(WcOpcode::LocalInv), true),
        (sq_op::FAST_REG_NSMR, None, false),
        (sq_op::RDMA_READ_INV_STAG, None, false),
    ];
    for compat in Compat::ALL {
        let (mut m, mut cq, id) = setup(HwRev::Gen2, 64, QpConfig::rc(QPN, 64, 16), compat);
        for (i, (op, _, _)) in table.iter().enumerate() {
            let w = cq.qps_mut().post_send(id, 100 + i as u64, 10 * i as u32, 1, *op).unwrap();
            m.push(&ModelCqe::send(CTX, QPN, w, *op)).unwrap();
        }
        let got = poll_all(&mut cq);
        assert_eq!(got.len(), table.len());
        for (i, (wc, &(op, want, pre_v64))) in got.iter().zip(table.iter()).enumerate() {
            assert_eq!(wc.wr_id, 100 + i as u64);
            assert_eq!(wc.qp_num, QPN);
            assert_eq!(wc.src_qp, QPN, "RC src_qp is the local QPN (irdma_process_cqe)");
            assert_eq!(wc.byte_len, 10 * i as u32, "SQ success byte_len = wr_len");
            assert_eq!(wc.vendor_err, 0);
            assert_eq!(wc.wqe_index, i as u16);
            match want.filter(|_| pre_v64 || compat == Compat::Current) {
                Some(o) => {
                    assert_eq!(wc.status, WcStatus::Success, "op {op:#x} {compat:?}");
                    assert_eq!(wc.opcode, o);
                }
                None => {
                    assert_eq!(wc.status, WcStatus::GeneralErr, "op {op:#x} {compat:?}: unknown → GENERAL_ERR");
                    assert_eq!(wc.opcode, WcOpcode::Send, "opcode left untouched (zero)");
                    assert!(wc.fault().is_none());
                }
            }
        }
        assert_eq!(cq.qps().qp(id).unwrap().sq.tail, table.len() as u32);
        assert_eq!(cq.published_head(), Some(table.len() as u32));
        assert_eq!(m.shadow_head(), table.len() as u32);
        assert_eq!(cq.head_writes(), 1, "one store for the batch, none for the empty poll after it");
    }
}

/// Hardware reports a receive's WQE index in quanta: with `rq_shift` 2 the RQ index is
/// the CQE's index shifted right by 2, also on the fast path, whose run must not read
/// another receive's wr_id from an RQ large enough to hold the unshifted index.
#[test]
fn fast_path_receives_shift_the_wqe_index_by_rq_shift() {
    let mut cfg = QpConfig::rc(QPN, 16, 256);
    cfg.rq_shift = 2;
    let (mut m, mut cq, id) = setup(HwRev::Gen2, 64, cfg, Compat::Current);
    for i in 0..64 {
        cq.qps_mut().post_recv(id, 1000 + i).unwrap();
    }
    for i in 0..8 {
        m.push(&ModelCqe::recv(CTX, QPN, i, 2, rq_op::ROCE_SEND_ONLY, 10 + u32::from(i))).unwrap();
    }
    let got = poll_all(&mut cq);
    let seen: Vec<(u64, u16, u32)> = got.iter().map(|wc| (wc.wr_id, wc.wqe_index, wc.byte_len)).collect();
    let want: Vec<(u64, u16, u32)> = (0..8).map(|i| (1000 + u64::from(i), i, 10 + u32::from(i))).collect();
    assert_eq!(seen, want);
}

/// Receives with immediate data and invalidation. RoCE writes with immediate are
/// `IBV_WC_RECV_RDMA_WITH_IMM` since rdma-core v52 (commit 7f2d095ff); before, the uk
/// layer overwrote the opcode and they were `IBV_WC_RECV` (`set_ib_wc_op_rq`).
#[test]
fn receives_imm_inv_and_version_difference() {
    for compat in Compat::ALL {
        let mut cfg = QpConfig::rc(QPN, 16, 16);
        cfg.rq_shift = 2;
        let (mut m, mut cq, id) = setup(HwRev::Gen2, 64, cfg, compat);
        for i in 0..5 {
            cq.qps_mut().post_recv(id, 500 + i).unwrap();
        }
        m.push(&ModelCqe::recv(CTX, QPN, 0, 2, rq_op::ROCE_SEND_ONLY, 100)).unwrap();
        m.push(&ModelCqe::recv(CTX, QPN, 1, 2, rq_op::ROCE_SEND_ONLY_WITH_IMM, 101).with_imm(0x1122_3344)).unwrap();
        m.push(&ModelCqe::recv(CTX, QPN, 2, 2, rq_op::ROCE_WRITE_ONLY_WITH_IMM, 102).with_imm(7)).unwrap();
        m.push(&ModelCqe::recv(CTX, QPN, 3, 2, rq_op::ROCE_WRITE_LAST_WITH_IMM, 103).with_imm(8)).unwrap();
        m.push(&ModelCqe::recv(CTX, QPN, 4, 2, rq_op::ROCE_SEND_ONLY, 104).with_inv(0xabcd)).unwrap();
        let got = poll_all(&mut cq);
        assert_eq!(got.len(), 5);
        for (i, wc) in got.iter().enumerate() {
            assert_eq!(wc.wr_id, 500 + i as u64);
            assert_eq!(wc.byte_len, 100 + i as u32);
            assert_eq!(wc.wqe_index, i as u16, "RQ index = wqe_idx >> rq_shift");
            assert_eq!(wc.status, WcStatus::Success);
        }
        assert_eq!(got[0].opcode, WcOpcode::Recv);
        assert_eq!(got[0].wc_flags, WcFlags::empty());
        assert_eq!(got[1].opcode, WcOpcode::Recv);
        assert_eq!(got[1].wc_flags, WcFlags::WITH_IMM);
        assert_eq!(got[1].imm_data, 0x1122_3344u32.to_be(), "htonl of the numeric immediate");
        let wimm = if compat == Compat::V44 { WcOpcode::Recv } else { WcOpcode::RecvRdmaWithImm };
        assert_eq!(got[2].opcode, wimm, "{compat:?}");
        assert_eq!(got[3].opcode, wimm, "{compat:?}");
        assert_eq!(got[4].wc_flags, WcFlags::WITH_INV);
        assert_eq!(got[4].imm_data, 0xabcd);
        assert_eq!(cq.qps().qp(id).unwrap().rq.tail, 5);
    }
}

#[test]
fn iwarp_receive_opcode_follows_immediate() {
    let mut cfg = QpConfig::rc(QPN, 16, 16);
    cfg.transport = Transport::Iwarp;
    let (mut m, mut cq, _) = setup(HwRev::Gen1, 16, cfg, Compat::Current);
    m.push(&ModelCqe::recv(CTX, QPN, 0, 0, 0, 1).with_imm(5)).unwrap();
    m.push(&ModelCqe::recv(CTX, QPN, 1, 0, 0x0b, 2)).unwrap();
    let got = poll_all(&mut cq);
    assert_eq!(got[0].opcode, WcOpcode::RecvRdmaWithImm);
    assert_eq!(got[1].opcode, WcOpcode::Recv);
}

#[test]
fn ud_receives_carry_src_qp_grh_and_ipv4_is_not_invalidate() {
    let (mut m, mut cq, _) = setup(HwRev::Gen2, 16, QpConfig::ud(QPN, 16, 16), Compat::Current);
    let mac = [2, 0, 0, 0, 0, 9];
    m.push(&ModelCqe::recv(CTX, QPN, 0, 0, rq_op::ROCE_SEND_ONLY, 60).with_ud(0x77, true, mac, Some(5))).unwrap();
    m.push(&ModelCqe::send(CTX, QPN, 0, sq_op::SEND)).unwrap();
    let got = poll_all(&mut cq);
    assert_eq!(got[0].src_qp, 0x77);
    assert_eq!(got[0].wc_flags, WcFlags::GRH, "IPv4 bit is not WITH_INV on UD");
    assert_eq!(got[0].byte_len, 60);
    assert_eq!(got[1].wc_flags, WcFlags::GRH, "UD always GRH (irdma_process_cqe)");
    assert_eq!(got[1].src_qp, 0, "UD SQ src_qp = qword2 low (0 here)");
    // The UD receive was extended: it took two slots.
    assert_eq!(cq.ci(), 3);
}

#[test]
fn error_classes_and_vendor_err() {
    let (mut m, mut cq, id) = setup(HwRev::Gen2, 64, QpConfig::rc(QPN, 16, 16), Compat::Current);
    let w0 = cq.qps_mut().post_send(id, 1, 11, 1, sq_op::SEND).unwrap();
    m.push(&ModelCqe::send(CTX, QPN, w0, sq_op::SEND)).unwrap();
    // A non-flush SQ error: status GENERAL_ERR, byte_len stale (= previous 11).
    let w1 = cq.qps_mut().post_send(id, 2, 22, 1, sq_op::SEND).unwrap();
    m.push(&ModelCqe::send(CTX, QPN, w1, sq_op::SEND).with_error(0x0005, 0x0042)).unwrap();
    // RQ unknown error: uses the RQ tail, byte_len = payload.
    cq.qps_mut().post_recv(id, 9).unwrap();
    m.push(&ModelCqe::recv(CTX, QPN, 7, 0, rq_op::ROCE_SEND_ONLY, 3).with_error(0x0006, 1)).unwrap();
    let got = poll_all(&mut cq);
    assert_eq!(got[1].status, WcStatus::GeneralErr);
    assert_eq!(got[1].vendor_err, 0x0005_0042);
    assert_eq!(got[1].byte_len, 11, "stale byte_len quirk (cur_cqe reused)");
    assert_eq!(got[1].wr_id, 2);
    assert_eq!(got[2].wr_id, 9, "unknown RQ error ignores wqe_idx");
    assert_eq!(got[2].wqe_index, 0);
    assert_eq!(got[2].byte_len, 3);
    assert_eq!(got[2].vendor_err, 0x0006_0001);
    // The stale value is whatever completion set it last, on any path: here a flushed SQ
    // WR (the general path), then a non-flush error.
    // (On GEN2 a flush CQE stays parked while the SQ holds WRs, so the next WR is posted
    // after the flush drained it.)
    let summary = |got: Vec<Completion>| got.iter().map(|c| (c.status, c.wr_id, c.byte_len)).collect::<Vec<_>>();
    let w2 = cq.qps_mut().post_send(id, 3, 44, 1, sq_op::SEND).unwrap();
    m.push(&ModelCqe::flush_general(CTX, QPN, true, w2)).unwrap();
    assert_eq!(summary(poll_all(&mut cq)), [(WcStatus::WrFlushErr, 3, 44)]);
    let w3 = cq.qps_mut().post_send(id, 4, 55, 1, sq_op::SEND).unwrap();
    m.push(&ModelCqe::send(CTX, QPN, w3, sq_op::SEND).with_error(0x0005, 0x0042)).unwrap();
    assert_eq!(summary(poll_all(&mut cq)), [(WcStatus::GeneralErr, 4, 44)]);
    // A receive sets it too: alone in its poll call, and with immediate data.
    for (i, (bytes, imm)) in [(66, None), (77, Some(5))].into_iter().enumerate() {
        cq.qps_mut().post_recv(id, 20 + i as u64).unwrap();
        let mut r = ModelCqe::recv(CTX, QPN, 1 + i as u16, 0, rq_op::ROCE_SEND_ONLY, bytes);
        if let Some(imm) = imm {
            r = r.with_imm(imm);
        }
        m.push(&r).unwrap();
        assert_eq!(summary(poll_all(&mut cq)), [(WcStatus::Success, 20 + i as u64, bytes)]);
        let w = cq.qps_mut().post_send(id, 30 + i as u64, 1, 1, sq_op::SEND).unwrap();
        m.push(&ModelCqe::send(CTX, QPN, w, sq_op::SEND).with_error(0x0005, 0x0042)).unwrap();
        assert_eq!(summary(poll_all(&mut cq)), [(WcStatus::GeneralErr, 30 + i as u64, bytes)], "after receive {i}");
    }
}

/// Every flush code, as `irdma_flush_err_to_ib_wc_status` maps it: code 11 is
/// `IBV_WC_RNR_RETRY_EXC_ERR` since v64 (commit d986d0b2c), `IBV_WC_FATAL_ERR` before.
#[test]
fn every_flush_code_maps_as_rdma_core() {
    let codes: [(u16, WcStatus, WcStatus); 12] = [
        (flush::INVALID, WcStatus::FatalErr, WcStatus::FatalErr),
        (flush::GENERAL_ERR, WcStatus::WrFlushErr, WcStatus::WrFlushErr),
        (flush::PROT_ERR, WcStatus::LocProtErr, WcStatus::LocProtErr),
        (flush::REM_ACCESS_ERR, WcStatus::RemAccessErr, WcStatus::RemAccessErr),
        (flush::LOC_QP_OP_ERR, WcStatus::LocQpOpErr, WcStatus::LocQpOpErr),
        (flush::REM_OP_ERR, WcStatus::RemOpErr, WcStatus::RemOpErr),
        (flush::LOC_LEN_ERR, WcStatus::LocLenErr, WcStatus::LocLenErr),
        (flush::FATAL_ERR, WcStatus::FatalErr, WcStatus::FatalErr),
        (flush::RETRY_EXC_ERR, WcStatus::RetryExcErr, WcStatus::RetryExcErr),
        (flush::MW_BIND_ERR, WcStatus::MwBindErr, WcStatus::MwBindErr),
        (flush::REM_INV_REQ_ERR, WcStatus::RemInvReqErr, WcStatus::RemInvReqErr),
        (flush::RNR_RETRY_EXC_ERR, WcStatus::RnrRetryExcErr, WcStatus::FatalErr),
    ];
    for (code, v64, before) in codes {
        for compat in Compat::ALL {
            let want = if compat == Compat::Current { v64 } else { before };
            let (mut m, mut cq, id) = setup(HwRev::Gen2, 16, QpConfig::rc(QPN, 16, 16), compat);
            cq.qps_mut().post_recv(id, 42).unwrap();
            m.push(&ModelCqe::flush(CTX, QPN, false, 0, code)).unwrap();
            let got = poll_all(&mut cq);
            assert_eq!(got.len(), 1);
            assert_eq!(got[0].status, want, "minor {code} {compat:?}");
            assert_eq!(got[0].vendor_err, 0x0001_0000 | u32::from(code));
            assert_eq!(got[0].wr_id, 42);
        }
    }
}

/// Major 0xFFFE is a flush whose minor is an AE code since v64 (commit 32c9f6947,
/// `irdma_uk_cq_poll_cmpl`); before, it is an unknown error: `IBV_WC_GENERAL_ERR` with the
/// minor as it came.
#[test]
fn gen3_srq_flush_major_translates_ae_code() {
    let (mut m, mut cq, id) = setup(HwRev::Gen3, 16, QpConfig::rc(QPN, 16, 16), Compat::Current);
    cq.qps_mut().post_recv(id, 5).unwrap();
    m.push(&ModelCqe::recv(CTX, QPN, 0, 0, 0, 0).with_error(0xfffe, 0x0108)).unwrap();
    let got = poll_all(&mut cq);
    assert_eq!((got[0].status, got[0].wr_id), (WcStatus::LocProtErr, 5));
    assert_eq!(got[0].vendor_err, 0xfffe_0002, "minor after the translation (irdma_process_cqe)");
}

/// rdma-core's irdma provider handles GEN3 from v64 on, so a GEN3 CQ with an older
/// release's behaviour describes no real system and is refused. (Before v64, major 0xFFFE
/// was a general error: `status.rs` tests that translation.)
#[test]
fn gen3_needs_the_current_compat() {
    for old in [Compat::V52, Compat::V44] {
        let model = IrdmaModel::new(ModelConfig::new(HwRev::Gen3, 16)).unwrap();
        let err = model.poller(QpRegistry::new(HwRev::Gen3), old).unwrap_err();
        assert!(err.to_string().contains("GEN3 CQ needs Compat::Current"), "{old:?}: {err}");
    }
}

#[test]
fn gen3_srq_completion_and_timestamp() {
    let (mut m, mut cq, _) = setup(HwRev::Gen3, 16, QpConfig::rc(QPN, 16, 16), Compat::Current);
    m.push(&ModelCqe::srq_recv(CTX, QPN, 0xdead_beef, 77, 0x0d).with_tcp_seq(1234)).unwrap();
    let got = poll_all(&mut cq);
    assert_eq!(got[0].wr_id, 0xdead_beef);
    assert_eq!(got[0].byte_len, 77);
    assert_eq!(got[0].opcode, WcOpcode::RecvRdmaWithImm, "GEN3 op 0x0d");
    assert_eq!(got[0].timestamp, 1234);
    assert_eq!(cq.ci(), 1, "64-byte slot: one slot per extended CQE");
}

/// qword0 bits 63:32 are the GEN3 completion timestamp, 32 bits of device clock that
/// rdma-core hands out raw (`irdma_wc_read_completion_ts`, only with
/// `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP`, which it accepts on GEN3 alone); on GEN2 the same
/// bits are the RoCE PSN or TCP sequence and must not read as a timestamp.
#[test]
fn only_gen3_cqes_carry_a_timestamp() {
    for (gen, want) in [(HwRev::Gen2, 0), (HwRev::Gen3, 0xfedc_ba98)] {
        let (mut m, mut cq, id) = setup(gen, 16, QpConfig::rc(QPN, 16, 16), Compat::Current);
        let w = cq.qps_mut().post_send(id, 5, 8, 1, sq_op::SEND).unwrap();
        m.push(&ModelCqe::send(CTX, QPN, w, sq_op::SEND).with_tcp_seq(0xfedc_ba98)).unwrap();
        let got = poll_all(&mut cq);
        assert_eq!((got.len(), got[0].wr_id, got[0].timestamp), (1, 5, want), "{gen:?}");
    }
}

/// The non-fatal UD "CIE" send errors (major 0xEnnn) are unknown errors in every release.
/// rdma-core's uk layer turns them into successes for RoCE UD QPs since v64 (commit
/// d986d0b2c), but its userspace QPs never get that type (`irdma_uk_qp_init` defaults it to
/// IWARP and the provider does not set it), so userspace reports `IBV_WC_GENERAL_ERR` with
/// the error in `vendor_err`, and the stale byte_len (rdma-core reuses `cur_cqe`).
#[test]
fn ud_cie_send_errors_are_general_errors() {
    for compat in Compat::ALL {
        let (mut m, mut cq, id) = setup(HwRev::Gen2, 16, QpConfig::ud(QPN, 16, 16), compat);
        let w = cq.qps_mut().post_send(id, 3, 30, 1, sq_op::SEND).unwrap();
        m.push(&ModelCqe::send(CTX, QPN, w, sq_op::SEND).with_error(0xe001, 2)).unwrap();
        let got = poll_all(&mut cq);
        let c = &got[0];
        assert_eq!(
            (c.status, c.vendor_err, c.byte_len, c.wr_id),
            (WcStatus::GeneralErr, 0xe001_0002, 0, 3),
            "{compat:?}"
        );
    }
}

fn flush_many(gen: HwRev, n: u64, batch: usize) {
    let (mut m, mut cq, id) = setup(gen, 256, QpConfig::rc(QPN, 256, 128), Compat::Current);
    // SQ: n WRs of 3 quanta (NOP pads at chunk boundaries), one completed, the rest flushed.
    let mut sq_idx = Vec::new();
    for i in 0..n {
        sq_idx.push(cq.qps_mut().post_send(id, 1000 + i, i as u32, 3, sq_op::RDMA_WRITE).unwrap());
    }
    let mut rq_idx = Vec::new();
    for i in 0..n {
        rq_idx.push(cq.qps_mut().post_recv(id, 2000 + i).unwrap());
    }
    m.push(&ModelCqe::send(CTX, QPN, sq_idx[0], sq_op::RDMA_WRITE)).unwrap();
    assert_eq!(
        m.flush(CTX, QPN, true, flush::REM_ACCESS_ERR, &sq_idx[1..]).unwrap(),
        if gen == HwRev::Gen3 { n as usize - 1 } else { 1 }
    );
    m.flush(CTX, QPN, false, flush::GENERAL_ERR, &rq_idx).unwrap();
    let mut got = Vec::new();
    let mut out = vec![Completion::default(); batch];
    loop {
        let k = cq.poll(&mut out);
        if k == 0 {
            break;
        }
        got.extend_from_slice(&out[..k]);
    }
    assert_eq!(got.len() as u64, 2 * n);
    assert_eq!(got[0].status, WcStatus::Success);
    for (i, wc) in got[1..n as usize].iter().enumerate() {
        assert_eq!(wc.wr_id, 1001 + i as u64, "{gen:?} batch {batch}");
        let want = if i == 0 { WcStatus::RemAccessErr } else { WcStatus::WrFlushErr };
        assert_eq!(wc.status, want);
        assert_eq!(wc.opcode, WcOpcode::RdmaWrite, "opcode from the WQE");
        assert_eq!(wc.byte_len, i as u32 + 1, "flushed SQ byte_len = wr_len");
        assert_eq!(wc.wqe_index, sq_idx[i + 1]);
    }
    for (i, wc) in got[n as usize..].iter().enumerate() {
        assert_eq!(wc.wr_id, 2000 + i as u64);
        assert_eq!(wc.status, WcStatus::WrFlushErr);
        // GEN3 maps receive op 0x00 to RECV_RDMA_WITH_IMM, and the model's flush CQEs carry
        // op 0: rdma-core would report the same (verbs leaves it undefined for flushes).
        let op = if gen == HwRev::Gen3 { WcOpcode::RecvRdmaWithImm } else { WcOpcode::Recv };
        assert_eq!(wc.opcode, op);
        assert_eq!(wc.vendor_err, 0x0001_0001);
    }
    let qp = cq.qps().qp(id).unwrap();
    assert_eq!(qp.sq.tail, qp.sq.head);
    assert_eq!(qp.rq.tail, qp.rq.head);
    assert_eq!(m.shadow_head(), cq.head());
    assert!(cq.peek().is_none());
}

#[test]
fn flush_of_many_outstanding_wqes_gen2_and_gen3() {
    for batch in [1, 7, 64] {
        flush_many(HwRev::Gen2, 50, batch);
        flush_many(HwRev::Gen3, 50, batch);
        flush_many(HwRev::Gen1, 20, batch);
    }
}

#[test]
fn flush_with_empty_queue_consumes_and_ends_the_poll() {
    let (mut m, mut cq, _) = setup(HwRev::Gen2, 16, QpConfig::rc(QPN, 16, 16), Compat::Current);
    m.push(&ModelCqe::flush_general(CTX, QPN, false, 0)).unwrap();
    m.push(&ModelCqe::send(CTX, QPN, 0, sq_op::SEND)).unwrap();
    let mut out = [Completion::default(); 8];
    assert_eq!(cq.poll(&mut out), 0, "ENOENT ends the call (__irdma_upoll_cq)");
    assert_eq!(cq.ci(), 1, "but the flush CQE was consumed");
    assert_eq!(cq.poll(&mut out), 1);
}

#[test]
fn destroyed_qp_ctx_zero_is_skipped_and_unknown_handle_is_a_fault() {
    let (mut m, mut cq, _) = setup(HwRev::Gen2, 16, QpConfig::rc(QPN, 16, 16), Compat::Current);
    m.push(&ModelCqe::send(0, QPN, 0, sq_op::SEND)).unwrap();
    m.push(&ModelCqe::send(0x999, QPN, 0, sq_op::SEND)).unwrap();
    m.push(&ModelCqe::send(CTX, QPN, 0, sq_op::SEND)).unwrap();
    m.push(&ModelCqe::send(CTX, QPN, 0x7fff, sq_op::SEND)).unwrap();
    let got = poll_all(&mut cq);
    assert_eq!(got.len(), 3);
    let f = got[0].fault().unwrap();
    assert_eq!((f.kind, f.position, f.value), (FaultKind::UnknownQp, 1, 0x999));
    assert!(got[1].is_ok());
    assert_eq!(got[2].fault().unwrap().kind, FaultKind::BadField);
    assert_eq!(cq.ci(), 4);
}

/// A successful receive whose RQ index (after `rq_shift`) lies beyond the RQ is a fault
/// item naming the index, not the wr_id of the index masked into the RQ; the receives
/// around it complete. Alone in a call (the general path) and inside a run (the fast
/// path hands it over).
#[test]
fn receive_index_beyond_the_rq_is_a_fault() {
    let (mut m, mut cq, id) = setup(HwRev::Gen2, 16, QpConfig::rc(QPN, 16, 16), Compat::Current);
    for wr_id in [40, 41, 42] {
        cq.qps_mut().post_recv(id, wr_id).unwrap();
    }
    let recv = |idx| ModelCqe::recv(CTX, QPN, idx, 0, rq_op::ROCE_SEND_ONLY, 8);
    m.push(&recv(20)).unwrap();
    m.push(&recv(0)).unwrap();
    m.push(&recv(1)).unwrap();
    m.push(&recv(17)).unwrap();
    m.push(&recv(2)).unwrap();
    let mut one = [Completion::default()];
    assert_eq!(cq.poll(&mut one), 1);
    let f = one[0].fault().unwrap();
    assert_eq!((f.kind, f.position, f.value), (FaultKind::BadField, 0, 20));
    let got = poll_all(&mut cq);
    let f = got[2].fault().unwrap();
    assert_eq!((f.kind, f.position, f.value), (FaultKind::BadField, 3, 17));
    let ok: Vec<_> = got.iter().filter(|c| c.is_ok()).map(|c| c.wr_id).collect();
    assert_eq!((got.len(), ok), (4, vec![40, 41, 42]));
}

/// The SRQ bit is read since v64 (commit 32c9f6947): a 32-byte slot has no byte 40 for the
/// QP, so such a CQE is malformed. Before, the bit is not looked at.
#[test]
fn srq_bit_on_32_byte_ring_is_bad_format() {
    for compat in Compat::ALL {
        let (mut m, mut cq, id) = setup(HwRev::Gen2, 16, QpConfig::rc(QPN, 16, 16), compat);
        cq.qps_mut().post_recv(id, 9).unwrap();
        let mut c = ModelCqe::recv(CTX, QPN, 0, 0, 0, 4);
        c.srq = true;
        m.push(&c).unwrap();
        let got = poll_all(&mut cq);
        if compat == Compat::Current {
            assert_eq!(got[0].fault().unwrap().kind, FaultKind::BadFormat);
        } else {
            assert!(got[0].is_ok(), "{compat:?}");
            assert_eq!((got[0].wr_id, got[0].byte_len), (9, 4), "{compat:?}");
        }
    }
}

/// Only GEN3 has SRQ CQEs: the SRQ bit on a GEN2 ring is a bad format even in 64-byte
/// slots, which have a byte 40 to read a QP context from. The fault's value is the high
/// half of qword3, as for every bad format of an irdma CQE.
#[test]
fn srq_bit_before_gen3_is_bad_format_in_either_slot_size() {
    for cqe_size in [32, 64] {
        let mut cfg = ModelConfig::new(HwRev::Gen2, 16);
        cfg.cqe_size = cqe_size;
        let mut m = IrdmaModel::new(cfg).unwrap();
        let mut qps = QpRegistry::new(HwRev::Gen2);
        let id = qps.register(CTX, QpConfig::rc(QPN, 16, 16)).unwrap();
        let mut cq = m.poller(qps, Compat::Current).unwrap();
        cq.qps_mut().post_recv(id, 9).unwrap();
        // A GEN3 SRQ receive, its QP context in qword5: a poller that read it would
        // complete wr_id 0x77.
        let c = ModelCqe::srq_recv(CTX, QPN, 0x77, 4, rq_op::ROCE_SEND_ONLY);
        m.push(&c).unwrap();
        let got = poll_all(&mut cq);
        let f = got[0].fault().unwrap();
        assert_eq!(
            (f.kind, f.position, f.value),
            (FaultKind::BadFormat, 0, (c.qword3(true) >> 32) as u32),
            "{cqe_size}"
        );
        assert_eq!(got.len(), 1, "{cqe_size}");
    }
}

#[test]
fn extended_cqe_across_the_wrap_and_many_laps() {
    for gen in [HwRev::Gen2, HwRev::Gen3] {
        let entries = 8;
        let (mut m, mut cq, id) = setup(gen, entries, QpConfig::rc(QPN, 16, 16), Compat::Current);
        let mut seq = 0u32;
        let mut out = [Completion::default(); 3];
        let (mut pol, mut wraps) = (cq.polarity(), 0);
        for _lap in 0..200 {
            // Mix of plain and extended CQEs so extensions land in slot 0 on some laps.
            for k in 0..3u32 {
                let r = cq.qps_mut().post_recv(id, u64::from(seq)).unwrap();
                let c = ModelCqe::recv(CTX, QPN, r, 0, rq_op::ROCE_WRITE_ONLY_WITH_IMM, seq);
                let c = if (seq + k) % 2 == 0 { c.with_imm(seq) } else { c };
                m.push(&c).unwrap();
                seq += 1;
            }
            let mut n = 0;
            while n < 3 {
                let got = cq.poll(&mut out);
                assert!(got > 0, "{gen:?}: stalled at seq {seq}");
                for wc in &out[..got] {
                    let s = seq - 3 + n as u32;
                    assert_eq!(wc.byte_len, s);
                    assert_eq!(wc.wr_id, u64::from(s));
                    if wc.wc_flags.contains(WcFlags::WITH_IMM) {
                        assert_eq!(wc.imm_data, s.to_be());
                    }
                    n += 1;
                }
            }
            assert_eq!(m.shadow_head(), cq.head(), "head masking: shadow holds ci mod entries");
            assert!(cq.head() < entries);
            wraps += u32::from(cq.polarity() != pol);
            pol = cq.polarity();
        }
        assert!(wraps > 4, "{gen:?}: the consumer wrapped only {wraps} times");
    }
}

/// A 32-byte CQE that claims an extension whose slot the device has not written yet (its
/// valid bit is still the previous lap's) is not consumed: `poll`, `peek` and views all
/// wait, and the head stays. Once the extension is written, the one completion comes back
/// with the extension's immediate, and the head moves past both slots.
#[test]
fn extension_not_yet_valid_is_not_consumed() {
    let (mut m, mut cq, _) = setup(HwRev::Gen2, 8, QpConfig::rc(QPN, 16, 16), Compat::Current);
    let c = ModelCqe::recv(CTX, QPN, 0, 0, 0, 1).with_imm(3);
    assert!(c.extended());
    let slot = |body: [u64; 3], last: u64| {
        let mut b = [0u8; 32];
        for (i, q) in body.iter().chain([&last]).enumerate() {
            b[i * 8..i * 8 + 8].copy_from_slice(&q.to_le_bytes());
        }
        b
    };
    // Lap 0 expects valid bit 1: the main CQE is valid, slot 1 (never written) is not.
    m.write_raw(0, &slot(c.body(), c.qword3(true))).unwrap();
    let mut out = [Completion::default(); 4];
    assert_eq!(cq.poll(&mut out), 0, "an extension not yet valid holds the CQE back");
    assert_eq!(cq.ci(), 0);
    assert!(cq.peek().is_none());
    assert!(cq.views().next().is_none());
    m.write_raw(1, &slot(c.ext_body(), c.ext_qword7(true))).unwrap();
    assert_eq!(cq.peek().map(|w| w.imm_data), Some(3u32.to_be()));
    assert_eq!(cq.poll(&mut out), 1);
    assert_eq!((out[0].wc_flags & WcFlags::WITH_IMM, out[0].imm_data), (WcFlags::WITH_IMM, 3u32.to_be()));
    assert_eq!(cq.ci(), 2, "one completion, two slots");
}

/// Two QPs taking turns on one CQ switch the poller's QP cache CQE by CQE; after the
/// registry changes (a QP removed, another registered under the same context), neither
/// cache entry may name the old QP.
#[test]
fn qp_cache_switches_between_two_qps_and_forgets_them_when_the_registry_changes() {
    const CTX_B: u64 = CTX + 0x1000;
    const QPN_B: u32 = QPN + 1;
    let (mut m, mut cq, a) = setup(HwRev::Gen2, 64, QpConfig::rc(QPN, 16, 16), Compat::Current);
    let b = cq.qps_mut().register(CTX_B, QpConfig::rc(QPN_B, 16, 16)).unwrap();
    for round in 0..4u64 {
        let wa = cq.qps_mut().post_send(a, 100 + round, 1, 1, sq_op::SEND).unwrap();
        let wb = cq.qps_mut().post_send(b, 200 + round, 1, 1, sq_op::SEND).unwrap();
        m.push(&ModelCqe::send(CTX, QPN, wa, sq_op::SEND)).unwrap();
        m.push(&ModelCqe::send(CTX_B, QPN_B, wb, sq_op::SEND)).unwrap();
    }
    let got: Vec<_> = poll_all(&mut cq).iter().map(|c| (c.qp_num, c.wr_id)).collect();
    let want: Vec<_> = (0..4u64).flat_map(|r| [(QPN, 100 + r), (QPN_B, 200 + r)]).collect();
    assert_eq!(got, want);
    // The first QP goes; a new one takes its context (and the second QP its index).
    assert!(cq.qps_mut().unregister(CTX));
    let c = cq.qps_mut().register(CTX, QpConfig::rc(QPN + 2, 16, 16)).unwrap();
    let b = QpId(cq.qps().find(CTX_B).unwrap());
    assert_eq!(b, QpId(0), "the second QP now has the first one's index");
    let wb = cq.qps_mut().post_send(b, 300, 1, 1, sq_op::SEND).unwrap();
    let wc = cq.qps_mut().post_send(c, 400, 1, 1, sq_op::SEND).unwrap();
    // The new QP's CQE first: its context is the one the cache held before the registry
    // changed.
    m.push(&ModelCqe::send(CTX, QPN + 2, wc, sq_op::SEND)).unwrap();
    m.push(&ModelCqe::send(CTX_B, QPN_B, wb, sq_op::SEND)).unwrap();
    let got: Vec<_> = poll_all(&mut cq).iter().map(|c| (c.qp_num, c.wr_id)).collect();
    assert_eq!(got, [(QPN + 2, 400), (QPN_B, 300)]);
}

#[test]
fn peek_and_views() {
    let (mut m, mut cq, id) = setup(HwRev::Gen2, 16, QpConfig::rc(QPN, 16, 16), Compat::Current);
    let w = cq.qps_mut().post_send(id, 77, 5, 1, sq_op::SEND).unwrap();
    m.push(&ModelCqe::send(0, QPN, 0, sq_op::SEND)).unwrap();
    m.push(&ModelCqe::send(CTX, QPN, w, sq_op::SEND)).unwrap();
    m.push(&ModelCqe::recv(CTX, QPN, 0, 0, 0x0b, 9).with_imm(0x55)).unwrap();
    assert_eq!(cq.peek().unwrap().wr_id, 77, "peek looks past skipped CQEs");
    assert_eq!(cq.ci(), 0);
    {
        let mut v = cq.views();
        let a = v.next().unwrap();
        assert_eq!(a.comp_ctx(), 0);
        let b = v.next().unwrap();
        assert!(b.is_sq() && b.comp_ctx() == CTX && b.qp_id() == QPN && b.op() == sq_op::SEND);
        assert_eq!(b.status(), WcStatus::Success);
        let c = v.next().unwrap();
        assert!(c.extended() && !c.is_sq());
        assert_eq!((c.imm(), c.payload_len(), c.position()), (Some(0x55), 9, 2));
        assert!(v.next().is_none());
    }
    assert_eq!(cq.ci(), 4);
    assert_eq!(m.shadow_head(), 4);
    assert_eq!(cq.info().vendor, "irdma");
}

#[test]
fn push_dropped_and_solicited_do_not_change_the_completion() {
    let (mut m, mut cq, id) = setup(HwRev::Gen2, 16, QpConfig::rc(QPN, 16, 16), Compat::Current);
    let w = cq.qps_mut().post_send(id, 1, 0, 1, sq_op::SEND).unwrap();
    m.push(&ModelCqe::send(CTX, QPN, w, sq_op::SEND).push_dropped().solicited()).unwrap();
    let got = poll_all(&mut cq);
    assert!(got[0].is_ok());
    assert!(cq.qps().qp(id).unwrap().push_dropped);
}

/// rdma-core latches `push_dropped` (bit 51) for every SQ CQE before it splits flushes from
/// the rest (`irdma_uk_cq_poll_cmpl`): a flushed CQE sets it too, also when the SQ is
/// empty (ENOENT). A skipped connection-WQE CQE returns before that and does not.
#[test]
fn push_dropped_is_latched_by_flushed_sq_cqes_too() {
    for outstanding in [1u64, 0] {
        let (mut m, mut cq, id) = setup(HwRev::Gen2, 16, QpConfig::rc(QPN, 16, 16), Compat::Current);
        for w in 0..outstanding {
            cq.qps_mut().post_send(id, w, 0, 1, sq_op::SEND).unwrap();
        }
        m.push(&ModelCqe::flush_general(CTX, QPN, true, 0).push_dropped()).unwrap();
        let got = poll_all(&mut cq);
        assert_eq!(got.len() as u64, outstanding);
        assert!(got.iter().all(|c| c.status == WcStatus::WrFlushErr));
        assert!(cq.qps().qp(id).unwrap().push_dropped, "{outstanding} outstanding");
    }
    let (mut m, mut cq, id) = setup(HwRev::Gen2, 16, iwarp(3), Compat::Current);
    m.push(&ModelCqe::send(CTX, QPN, 0, sq_op::SEND).push_dropped()).unwrap();
    assert!(poll_all(&mut cq).is_empty());
    assert!(!cq.qps().qp(id).unwrap().push_dropped, "a skipped connection WQE does not latch it");
}

/// An iWARP RC QP with `conn_wqes` connection WQEs (3 on GEN2, 1 in GEN1 legacy mode,
/// `irdma_setup_connection_wqes`).
fn iwarp(conn_wqes: u16) -> QpConfig {
    QpConfig { transport: Transport::Iwarp, conn_wqes, ..QpConfig::rc(QPN, 16, 16) }
}

/// rdma-core's `irdma_setup_connection_wqes` moves the SQ head and tail past the connection
/// WQEs when it creates the QP, so the first user WR is WQE `conn_wqes`, and that is
/// the index the hardware's CQE for it carries. Its completion retires exactly it, a flush
/// reports exactly the WRs posted after it, and a flush with nothing outstanding reports
/// nothing (ENOENT).
#[test]
fn iwarp_user_sends_start_after_the_connection_wqes() {
    for (gen, conn) in [(HwRev::Gen2, 3u16), (HwRev::Gen1, 1)] {
        let (mut m, mut cq, id) = setup(gen, 16, iwarp(conn), Compat::Current);
        let w = cq.qps_mut().post_send(id, 0xaaaa, 64, 1, sq_op::SEND).unwrap();
        assert_eq!(w, conn, "{gen:?}: the first user WQE follows the connection WQEs");
        // What the hardware writes for that WR, whatever post_send said.
        m.push(&ModelCqe::send(CTX, QPN, conn, sq_op::SEND)).unwrap();
        let got = poll_all(&mut cq);
        assert_eq!(got.len(), 1, "{gen:?}");
        assert_eq!((got[0].status, got[0].wr_id, got[0].byte_len), (WcStatus::Success, 0xaaaa, 64), "{gen:?}");
        assert_eq!(got[0].wqe_index, conn);
        let qp = cq.qps().qp(id).unwrap();
        assert_eq!((qp.sq.head, qp.sq.tail), (u32::from(conn) + 1, u32::from(conn) + 1), "{gen:?}: SQ drained");
        // Ending the connection-WQE check latches nothing else (push mode stays on).
        assert!(!qp.push_dropped, "{gen:?}");

        let (w1, w2) = (conn + 1, conn + 2);
        assert_eq!(cq.qps_mut().post_send(id, 0xbbbb, 8, 1, sq_op::RDMA_WRITE), Ok(w1));
        assert_eq!(cq.qps_mut().post_send(id, 0xcccc, 9, 1, sq_op::SEND), Ok(w2));
        m.flush(CTX, QPN, true, flush::GENERAL_ERR, &[w1, w2]).unwrap();
        let got: Vec<_> = poll_all(&mut cq).iter().map(|c| (c.status, c.wr_id, c.wqe_index)).collect();
        assert_eq!(got, [(WcStatus::WrFlushErr, 0xbbbb, w1), (WcStatus::WrFlushErr, 0xcccc, w2)], "{gen:?}");

        let before = cq.ci();
        m.push(&ModelCqe::flush_general(CTX, QPN, true, w2)).unwrap();
        assert!(poll_all(&mut cq).is_empty(), "{gen:?}: a flush of an empty SQ completes nothing");
        assert_eq!(cq.ci(), before + 1, "{gen:?}: but is consumed");
    }
}

/// rdma-core skips a connection WQE's CQE (uk.c 1461-1474) before it reads the
/// push-dropped bit (1475-1479), so the bit there changes nothing: push mode stays on, the
/// first-SQ-WQE check stays on while connection WQEs remain (the next one is skipped as
/// well). And the stale byte count a non-flush SQ error reports is the last completion's:
/// the skipped CQEs of a destroyed QP (comp ctx 0) and a fault item leave it alone.
#[test]
fn connection_wqe_cqes_ignore_push_dropped_and_skips_keep_the_stale_byte_count() {
    let mut runs = Vec::new();
    for dropped in [false, true] {
        let (mut m, mut cq, id) = setup(HwRev::Gen2, 16, iwarp(3), Compat::Current);
        cq.qps_mut().post_recv(id, 9).unwrap();
        // (A skipped connection WQE zeroes the count, as rdma-core zeroes its scratch
        // completion: the receive comes after them.)
        m.push(&ModelCqe { push_dropped: dropped, ..ModelCqe::send(CTX, QPN, 0, sq_op::SEND) }).unwrap();
        m.push(&ModelCqe::send(CTX, QPN, 1, sq_op::SEND)).unwrap();
        m.push(&ModelCqe::recv(CTX, QPN, 0, 0, rq_op::ROCE_SEND_ONLY, 33)).unwrap();
        m.push(&ModelCqe::send(0, QPN, 5, sq_op::SEND)).unwrap();
        m.push(&ModelCqe::send(0x999, QPN, 5, sq_op::SEND)).unwrap();
        let mut got = poll_all(&mut cq);
        // The user SQ was empty so far; now a WR fails with a non-flush error.
        let w = cq.qps_mut().post_send(id, 10, 100, 1, sq_op::SEND).unwrap();
        m.push(&ModelCqe::send(CTX, QPN, w, sq_op::SEND).with_error(0x0005, 0x0042)).unwrap();
        got.extend(poll_all(&mut cq));
        let got: Vec<_> = got.iter().map(|c| (c.wr_id, c.status, c.byte_len, c.fault())).collect();
        assert!(!cq.qps().qp(id).unwrap().push_dropped, "bit 51 on a skipped CQE");
        runs.push(got);
    }
    assert_eq!(runs[0], runs[1]);
    let fault = runs[0][1].3.unwrap();
    assert_eq!((fault.kind, fault.position), (FaultKind::UnknownQp, 4));
    assert_eq!(runs[0][0].0, 9);
    assert_eq!(runs[0].len(), 3, "the connection WQEs' CQEs and comp ctx 0 are skipped: {:?}", runs[0]);
    assert_eq!((runs[0][2].0, runs[0][2].1, runs[0][2].2), (10, WcStatus::GeneralErr, 33), "the receive's byte count");
}

#[test]
fn iwarp_connection_wqes_are_skipped_while_the_sq_is_empty() {
    let (mut m, mut cq, id) = setup(HwRev::Gen2, 16, iwarp(3), Compat::Current);
    m.push(&ModelCqe::send(CTX, QPN, 0, sq_op::SEND)).unwrap();
    let got = poll_all(&mut cq);
    assert!(got.is_empty());
    assert_eq!(cq.ci(), 1);
    let _ = id;
    let _ = QpType::Rc;
}

/// rdma-core looks for connection WQEs (`first_sq_wq`) before it looks at the error fields
/// (`irdma_uk_cq_poll_cmpl`): an SQ CQE below `conn_wqes` while the user SQ is empty
/// is skipped even when it is a flush (consumed, and the poll call goes on), and the check
/// ends with the first SQ CQE that names the last connection WQE or a later one. A parked
/// flush CQE names the SQ tail by then (rdma-core rewrote its wqe_idx).
#[test]
fn iwarp_flushed_connection_wqes_are_skipped_and_the_poll_goes_on() {
    let mut out = [Completion::default(); 4];
    let (mut m, mut cq, id) = setup(HwRev::Gen2, 16, iwarp(3), Compat::Current);
    for (wqe_idx, wr_id) in [(0, 77), (2, 78)] {
        cq.qps_mut().post_recv(id, wr_id).unwrap();
        m.push(&ModelCqe::flush_general(CTX, QPN, true, wqe_idx)).unwrap();
        m.push(&ModelCqe::recv(CTX, QPN, (wr_id - 77) as u16, 0, rq_op::ROCE_SEND_ONLY, 5)).unwrap();
        assert_eq!(cq.poll(&mut out), 1, "connection WQE {wqe_idx}: skipped, and the call goes on");
        assert_eq!(out[0].wr_id, wr_id);
    }
    // WQE 2 ended the check: a flush of the empty SQ is now rdma-core's ENOENT, which
    // consumes the CQE and ends the call.
    cq.qps_mut().post_recv(id, 79).unwrap();
    m.push(&ModelCqe::flush_general(CTX, QPN, true, 0)).unwrap();
    m.push(&ModelCqe::recv(CTX, QPN, 2, 0, rq_op::ROCE_SEND_ONLY, 5)).unwrap();
    assert_eq!(cq.poll(&mut out), 0, "ENOENT ends the call");
    assert_eq!((cq.poll(&mut out), out[0].wr_id), (1, 79));

    // peek follows poll past a skipped connection WQE that ends the check: the flush of
    // WQE 0 behind it is then ENOENT, which ends the call with nothing, not a skip.
    // An iWARP QP with an empty SQ and one receive posted (`wr_id`): flushes of its SQ
    // naming WQE `first`, then WQE 0, then the receive's completion.
    let two_sq_flushes_then_a_receive = |first: u16, wr_id: u64| {
        let (mut m, mut cq, id) = setup(HwRev::Gen2, 16, iwarp(3), Compat::Current);
        cq.qps_mut().post_recv(id, wr_id).unwrap();
        for wqe_idx in [first, 0] {
            m.push(&ModelCqe::flush_general(CTX, QPN, true, wqe_idx)).unwrap();
        }
        m.push(&ModelCqe::recv(CTX, QPN, 0, 0, rq_op::ROCE_SEND_ONLY, 5)).unwrap();
        (m, cq)
    };
    let (_m, mut cq) = two_sq_flushes_then_a_receive(2, 90);
    assert_eq!(cq.peek(), None, "the next poll returns nothing");
    assert_eq!(cq.poll(&mut out), 0);
    assert_eq!(cq.peek().map(|c| c.wr_id), Some(90));
    assert_eq!((cq.poll(&mut out), out[0].wr_id), (1, 90));

    // A flush of the empty SQ that names a later WQE is ENOENT, and ends the check as well.
    let (_m, mut cq) = two_sq_flushes_then_a_receive(3, 81);
    assert_eq!(cq.poll(&mut out), 0, "WQE 3: ENOENT");
    assert_eq!(cq.poll(&mut out), 0, "WQE 0 after it: ENOENT too, not a skip");
    assert_eq!((cq.poll(&mut out), out[0].wr_id), (1, 81));

    // A flush naming a connection WQE while user WRs are outstanding flushes them; parked,
    // it names the SQ tail (4) on the second read, which ends the check there too.
    let (mut m, mut cq, id) = setup(HwRev::Gen2, 16, iwarp(3), Compat::Current);
    cq.qps_mut().post_send(id, 1, 0, 1, sq_op::SEND).unwrap();
    cq.qps_mut().post_send(id, 2, 0, 1, sq_op::SEND).unwrap();
    cq.qps_mut().post_recv(id, 80).unwrap();
    m.push(&ModelCqe::flush_general(CTX, QPN, true, 0)).unwrap();
    let got: Vec<_> = poll_all(&mut cq).iter().map(|c| (c.status, c.wr_id)).collect();
    assert_eq!(got, [(WcStatus::WrFlushErr, 1), (WcStatus::WrFlushErr, 2)]);
    m.push(&ModelCqe::flush_general(CTX, QPN, true, 0)).unwrap();
    m.push(&ModelCqe::recv(CTX, QPN, 0, 0, rq_op::ROCE_SEND_ONLY, 5)).unwrap();
    assert_eq!(cq.poll(&mut out), 0, "the check ended: ENOENT, not a skip");
    assert_eq!((cq.poll(&mut out), out[0].wr_id), (1, 80));
}

/// Real irdma rings are `cqe + 1`, doubled on GEN2, rounded to even (before v64: not
/// rounded), so almost never a power of two (rdma-core `uverbs.c` `get_cq_size`). On every
/// size rdma-core can hand out, plain and extended CQEs (whose extension may land in slot 0
/// across the wrap) poll in order over many laps, in batches of every size, and the shadow
/// area gets the true head.
#[test]
fn rings_sized_as_rdma_core_sizes_them() {
    let sizes = [
        (HwRev::Gen1, 4, Compat::V44, 5),
        (HwRev::Gen1, 100, Compat::V52, 101),
        (HwRev::Gen1, 100, Compat::Current, 102),
        (HwRev::Gen2, 2, Compat::Current, 6),
        (HwRev::Gen2, 100, Compat::Current, 202),
        (HwRev::Gen3, 20, Compat::Current, 22),
    ];
    for (gen, requested, compat, slots) in sizes {
        let cfg = ModelConfig::for_cqe(gen, requested, compat).unwrap();
        assert_eq!(cfg.entries, slots, "{gen:?} cqe={requested}");
        let mut m = IrdmaModel::new(cfg).unwrap();
        let mut qps = QpRegistry::new(gen);
        let id = qps.register(CTX, QpConfig::rc(QPN, 16, 16)).unwrap();
        let mut cq = m.poller(qps, compat).unwrap();
        let wimm = if gen == HwRev::Gen3 { rq_op::GEN3_WRITE_IMM } else { rq_op::ROCE_WRITE_ONLY_WITH_IMM };
        let mut out = [Completion::default(); 16];
        let (mut seq, mut polled) = (0u32, 0u32);
        let (mut pol, mut wraps) = (cq.polarity(), 0);
        // Under Miri, 4 laps of each ring instead of 60.
        let laps = if cfg!(miri) { 4 } else { 60 };
        for round in 0..laps * slots {
            // One to three CQEs per round, at most four slots (one stays free): always
            // room in the 5- and 6-slot rings.
            let per_round = if slots > 6 { 2 + round % 2 } else { 1 + round % 2 };
            for k in 0..per_round {
                let c = if (seq + k) % 3 == 0 {
                    let w = cq.qps_mut().post_send(id, u64::from(seq), seq, 1, sq_op::SEND).unwrap();
                    ModelCqe::send(CTX, QPN, w, sq_op::SEND)
                } else {
                    let r = cq.qps_mut().post_recv(id, u64::from(seq)).unwrap();
                    let c = ModelCqe::recv(CTX, QPN, r, 0, wimm, seq);
                    if seq % 2 == 0 {
                        c.with_imm(seq)
                    } else {
                        c
                    }
                };
                m.push(&c).unwrap_or_else(|e| panic!("{gen:?} {slots} slots, seq {seq}: {e}"));
                seq += 1;
            }
            let batch = [1, 2, 3, 5, 16][round as usize % 5];
            while polled < seq {
                let got = cq.poll(&mut out[..batch]);
                assert!(got > 0, "{gen:?} {slots} slots: stalled at {polled} of {seq}");
                for wc in &out[..got] {
                    assert!(wc.is_ok(), "{gen:?} {slots} slots at {polled}: {wc:?}");
                    assert_eq!(wc.wr_id, u64::from(polled), "{gen:?} {slots} slots");
                    if wc.opcode != WcOpcode::Send {
                        assert_eq!(wc.byte_len, polled);
                        let imm = wc.wc_flags.contains(WcFlags::WITH_IMM);
                        assert_eq!(imm, polled % 2 == 0, "{gen:?} {slots} slots at {polled}");
                        if imm {
                            assert_eq!(wc.imm_data, polled.to_be());
                        }
                    }
                    polled += 1;
                }
            }
            assert_eq!(cq.poll(&mut out), 0);
            assert!(cq.head() < slots);
            assert_eq!(m.shadow_head(), cq.head(), "{gen:?} {slots} slots: shadow head");
            assert_eq!(cq.ci(), m.prod(), "{gen:?} {slots} slots: consumer and producer positions");
            wraps += u32::from(cq.polarity() != pol);
            pol = cq.polarity();
        }
        assert!(wraps >= laps, "{gen:?} {slots} slots: only {wraps} wraps");
    }
}

/// Views walk plain and extended CQEs in both slot sizes, over many laps of rings that are
/// not a power of two, stopping anywhere: every walk ends exactly at the producer, shows
/// each CQE once at its place, and leaves the head where the next walk goes on (an extended
/// CQE in 32-byte slots may end one slot into the next lap).
#[test]
fn views_stop_anywhere_over_many_laps_in_both_slot_sizes() {
    // Ring sizes rdma-core allocates: odd ones only on GEN1 (`cqe + 1` before v64).
    for (gen, sizes) in [(HwRev::Gen1, [5u32, 6, 7, 9]), (HwRev::Gen2, [4, 6, 8, 10]), (HwRev::Gen3, [4, 6, 8, 10])] {
        for entries in sizes {
            let (mut m, mut cq, _) = setup(gen, entries, QpConfig::rc(QPN, 64, 64), Compat::Current);
            // Slots an extended CQE takes in this slot size.
            let ext_slots = if gen == HwRev::Gen3 { 1 } else { 2 };
            let (mut seq, mut shown, mut rng) = (0u32, 0u32, 0x9e37_79b9u32);
            let mut expect = std::collections::VecDeque::new();
            for round in 0..400u32 {
                rng = rng.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                // Fill up to the free space: sends (one slot) and extended receives.
                let mut free = m.free_slots();
                for k in 0..(rng >> 28) {
                    let extended = (rng >> k) & 1 == 1;
                    let need = if extended { ext_slots } else { 1 };
                    if need > free {
                        break;
                    }
                    let place = m.prod();
                    if extended {
                        m.push(&ModelCqe::recv(CTX, QPN, 0, 0, rq_op::ROCE_WRITE_ONLY_WITH_IMM, seq).with_imm(seq))
                            .unwrap();
                    } else {
                        m.push(&ModelCqe::send(CTX, QPN, seq as u16 % 64, sq_op::SEND)).unwrap();
                    }
                    expect.push_back((seq, extended, place));
                    free -= need;
                    seq += 1;
                }
                // Take some of them, then stop.
                let take = (rng >> 8) % 5;
                let mut v = cq.views();
                for _ in 0..take {
                    let Some(c) = v.next() else {
                        assert!(expect.is_empty(), "{gen:?} {entries} slots, round {round}: a walk ended early");
                        break;
                    };
                    let (s, extended, place) = expect.pop_front().expect("a view past the producer");
                    assert_eq!(c.position(), place, "{gen:?} {entries} slots, round {round}");
                    assert_eq!(c.extended(), extended, "{gen:?} {entries} slots, round {round}");
                    if extended {
                        assert_eq!((c.imm(), c.payload_len()), (Some(s), s));
                    } else {
                        assert_eq!(c.wqe_idx(), s as u16 % 64);
                    }
                    shown += 1;
                }
                drop(v);
                let queued = expect.front().map_or(m.prod(), |e| e.2);
                assert_eq!(cq.ci(), queued, "{gen:?} {entries} slots, round {round}: the head");
                assert_eq!(m.shadow_head(), cq.head());
            }
            // The rest, in one walk that ends at the producer.
            let mut v = cq.views();
            while let Some(c) = v.next() {
                let (_, _, place) = expect.pop_front().expect("a view past the producer");
                assert_eq!(c.position(), place);
                shown += 1;
            }
            drop(v);
            assert!(expect.is_empty());
            assert_eq!(cq.ci(), m.prod());
            assert_eq!(shown, seq);
            assert!(seq > 4 * entries * 10, "{gen:?} {entries} slots: only {seq} CQEs, too few laps");
        }
    }
}

/// Views and peek walk the same positions as poll on a ring that is not a power of two.
#[test]
fn views_and_peek_on_a_ring_that_is_not_a_power_of_two() {
    let (mut m, mut cq, _) = setup(HwRev::Gen2, 6, QpConfig::rc(QPN, 16, 16), Compat::Current);
    let mut seq = 0u32;
    for lap in 0..40u32 {
        // Five slots: three plain sends and one extended receive.
        for i in 0..3 {
            m.push(&ModelCqe::send(CTX, QPN, (seq + i) as u16 % 16, sq_op::SEND)).unwrap();
        }
        m.push(&ModelCqe::recv(CTX, QPN, 0, 0, rq_op::ROCE_WRITE_ONLY_WITH_IMM, seq).with_imm(lap)).unwrap();
        // Peek does not consume: it shows the first send and leaves the position.
        let start = cq.ci();
        let p = cq.peek().unwrap();
        assert_eq!((p.opcode, p.qp_num, p.wqe_index), (WcOpcode::Send, QPN, (seq % 16) as u16));
        assert_eq!(cq.ci(), start);
        {
            let mut v = cq.views();
            for i in 0..3 {
                let s = v.next().unwrap();
                assert!(s.is_sq());
                assert_eq!(s.wqe_idx(), (seq + i) as u16 % 16);
                assert_eq!(s.position() % 6, (start + i) % 6);
            }
            let r = v.next().unwrap();
            assert_eq!((r.imm(), r.payload_len()), (Some(lap), seq), "lap {lap}");
            assert!(v.next().is_none());
        }
        assert_eq!(cq.ci(), m.prod());
        assert_eq!(m.shadow_head(), cq.head());
        seq += 3;
    }
}

/// A view reads back every field the model wrote, each bit set in one CQE and clear in
/// another, on 32-byte (GEN2) and 64-byte (GEN3) slots; `status` derives the error class
/// from the CQE alone.
#[test]
fn views_read_back_every_field() {
    for gen in [HwRev::Gen2, HwRev::Gen3] {
        let (mut m, mut cq, _) = setup(gen, 16, QpConfig::rc(QPN, 16, 16), Compat::Current);
        let send_err = ModelCqe { tcp_seq_psn_rtt_ts: 0x1234_5678, src_qpn_or_stag: 0xab_cdef, ..ModelCqe::default() }
            .solicited()
            .push_dropped()
            .with_error(0x0005, 0x0042);
        let cqes = [
            ModelCqe { ctx: CTX, qp_num: QPN, sq: true, op: sq_op::SEND, wqe_idx: 5, ..send_err },
            ModelCqe::recv(CTX, QPN, 3, 0, rq_op::ROCE_SEND_ONLY, 9).with_inv(0x1111_2222).with_imm(0x55),
            ModelCqe::flush_general(CTX, QPN, false, 4),
        ];
        // `status` derives the error class from the CQE alone.
        let statuses = [WcStatus::GeneralErr, WcStatus::Success, WcStatus::WrFlushErr, WcStatus::Success];
        let srq = (gen == HwRev::Gen3).then(|| ModelCqe::srq_recv(CTX, QPN, 0xbeef, 7, rq_op::ROCE_SEND_ONLY));
        for c in cqes.iter().chain(&srq) {
            m.push(c).unwrap();
        }
        let mut v = cq.views();
        for (i, (c, status)) in cqes.iter().chain(&srq).zip(statuses).enumerate() {
            let x = v.next().unwrap_or_else(|| panic!("{gen:?}: view {i} missing"));
            let what = format!("{gen:?}, CQE {i}");
            assert_eq!(x.qword3(), c.qword3(true), "{what}");
            assert_eq!(
                (x.comp_ctx(), x.qp_id(), x.is_sq(), x.op(), x.wqe_idx()),
                (c.ctx, c.qp_num, c.sq, c.op, c.wqe_idx)
            );
            assert_eq!((x.payload_len(), x.tcp_seq_psn_rtt_ts()), (c.payload_len, c.tcp_seq_psn_rtt_ts), "{what}");
            assert_eq!(x.src_qpn_or_inv_stag(), c.src_qpn_or_stag, "{what}");
            let (major, minor) = c.error.unwrap_or_default();
            assert_eq!((x.error(), x.major_err(), x.minor_err()), (c.error.is_some(), major, minor), "{what}");
            let bits = (x.solicited(), x.stag_ipv4(), x.srq(), x.push_dropped());
            assert_eq!(bits, (c.solicited, c.stag_ipv4, c.srq, c.push_dropped), "{what}");
            assert_eq!((x.extended(), x.imm()), (c.ext.is_some(), c.ext.and_then(|e| e.imm)), "{what}");
            assert_eq!(x.status(), status, "{what}");
        }
        assert!(v.next().is_none());
    }
}

/// The one-completion call, and the counter as the vendor-neutral driver trait reports it.
#[test]
fn poll_one_and_the_driver_counter() {
    let (mut m, mut cq, id) = setup(HwRev::Gen2, 16, QpConfig::rc(QPN, 16, 16), Compat::Current);
    assert_eq!(cq.poll_one(), None, "empty ring");
    for wr_id in [7, 8] {
        let w = cq.qps_mut().post_send(id, wr_id, 3, 1, sq_op::SEND).unwrap();
        m.push(&ModelCqe::send(CTX, QPN, w, sq_op::SEND)).unwrap();
    }
    for wr_id in [7, 8] {
        let c = cq.poll_one().unwrap();
        assert_eq!((c.wr_id, c.status, c.opcode), (wr_id, WcStatus::Success, WcOpcode::Send));
    }
    assert_eq!(cq.poll_one(), None);
    assert_eq!((CqDriver::ci(&cq), cq.ci()), (2, 2));
    assert_eq!(CqDriver::info(&cq).vendor, "irdma");
}

/// Peek shows exactly what the next `poll_one` returns, also where poll changes state on
/// the way: skipped connection-WQE CQEs (the first-SQ-WQE check, the byte count), a flush
/// CQE that stays parked while it generates one completion per outstanding WR (GEN2), and
/// a non-flush error that reports the stale byte count.
#[test]
fn peek_shows_what_the_next_poll_returns() {
    for gen in [HwRev::Gen2, HwRev::Gen3] {
        let (mut m, mut cq, id) = setup(gen, 32, iwarp(3), Compat::Current);
        // Connection WQEs 0 and 2 complete while the user SQ is empty: skipped, and peek
        // looks past them to a receive.
        cq.qps_mut().post_recv(id, 9).unwrap();
        m.push(&ModelCqe::send(CTX, QPN, 0, sq_op::SEND)).unwrap();
        m.push(&ModelCqe::send(CTX, QPN, 2, sq_op::SEND)).unwrap();
        m.push(&ModelCqe::recv(CTX, QPN, 0, 0, rq_op::ROCE_SEND_ONLY, 5)).unwrap();
        let p = cq.peek();
        assert_eq!(p.map(|c| c.wr_id), Some(9), "{gen:?}");
        assert_eq!(cq.poll_one(), p, "{gen:?}");
        let w = cq.qps_mut().post_send(id, 10, 100, 1, sq_op::SEND).unwrap();
        m.push(&ModelCqe::send(CTX, QPN, w, sq_op::SEND)).unwrap();
        let e = cq.qps_mut().post_send(id, 11, 200, 1, sq_op::SEND).unwrap();
        m.push(&ModelCqe::send(CTX, QPN, e, sq_op::SEND).with_error(0x0005, 0x0042)).unwrap();
        let outstanding: Vec<u16> = (12..15)
            .map(|wr_id| cq.qps_mut().post_send(id, wr_id, wr_id as u32, 1, sq_op::RDMA_WRITE).unwrap())
            .collect();
        m.flush(CTX, QPN, true, flush::GENERAL_ERR, &outstanding).unwrap();
        let mut seen = Vec::new();
        while let Some(p) = cq.peek() {
            assert_eq!(cq.peek(), Some(p), "{gen:?}: peek does not consume");
            let c = cq.poll_one();
            assert_eq!(c, Some(p), "{gen:?}: after {seen:?}");
            seen.push((p.wr_id, p.status, p.byte_len));
        }
        assert_eq!(cq.poll_one(), None, "{gen:?}: peek saw nothing, poll takes nothing");
        let want = [
            (10, WcStatus::Success, 100),
            (11, WcStatus::GeneralErr, 100),
            (12, WcStatus::WrFlushErr, 12),
            (13, WcStatus::WrFlushErr, 13),
            (14, WcStatus::WrFlushErr, 14),
        ];
        assert_eq!(seen, want, "{gen:?}");
    }
}

/// Every typed accessor of a view reads its own field: two CQEs whose fields all differ,
/// and each of whose flag bits is set in exactly one of them, on GEN2 (32-byte slots, the
/// extension in the next slot) and GEN3 (64-byte slots), over two laps.
#[test]
fn every_view_accessor_reads_its_own_field() {
    use dvcq_e810_dv::model::ModelExt;
    use dvcq_uapi::irdma::codes::major;
    use dvcq_uapi::irdma::cqe::ext;
    for gen in [HwRev::Gen2, HwRev::Gen3] {
        let (mut m, mut cq, _) = setup(gen, 8, QpConfig::rc(QPN, 16, 16), Compat::Current);
        let info = cq.info();
        assert_eq!((cq.hw_rev(), info.entries, info.cqe_size), (gen, 8, gen.cqe_size() as u32));
        let ext_cqe = ModelCqe {
            ctx: 0x1122_3344_5566_7788,
            qp_num: 0x00ab_cdef,
            op: 0x2a,
            wqe_idx: 0x5a5a,
            payload_len: 0xa1b2_c3d4,
            tcp_seq_psn_rtt_ts: 0x0bad_f00d,
            src_qpn_or_stag: 0x8765_4321,
            solicited: true,
            srq: gen == HwRev::Gen3,
            ext: Some(ModelExt {
                imm: Some(0xfeed_beef),
                srq_qp_ctx: 0x0f0e_0d0c_0b0a_0908,
                smac: Some([1, 2, 3, 4, 5, 6]),
                vlan: Some(0x0123),
            }),
            ..ModelCqe::default()
        };
        let err_cqe = ModelCqe {
            ctx: 0x0102_0304_0506_0708,
            qp_num: 0x12,
            sq: true,
            op: sq_op::SEND,
            wqe_idx: 7,
            payload_len: 0x10,
            tcp_seq_psn_rtt_ts: 0x20,
            src_qpn_or_stag: 0x30,
            error: Some((major::FLUSH, flush::LOC_LEN_ERR)),
            stag_ipv4: true,
            push_dropped: true,
            ..ModelCqe::default()
        };
        let slots = if gen == HwRev::Gen3 { 2 } else { 3 };
        for round in 0..6u32 {
            m.push(&ext_cqe).unwrap();
            m.push(&err_cqe).unwrap();
            let what = format!("{gen:?} round {round}");
            let mut v = cq.views();
            let a = v.next().unwrap();
            assert_eq!(a.position(), round * slots % 16, "{what}");
            assert_eq!(
                (a.comp_ctx(), a.qp_id(), a.op(), a.wqe_idx(), a.payload_len()),
                (0x1122_3344_5566_7788, 0x00ab_cdef, 0x2a, 0x5a5a, 0xa1b2_c3d4),
                "{what}"
            );
            assert_eq!((a.tcp_seq_psn_rtt_ts(), a.src_qpn_or_inv_stag()), (0x0bad_f00d, 0x8765_4321), "{what}");
            assert_eq!(
                (a.is_sq(), a.error(), a.solicited(), a.stag_ipv4(), a.srq(), a.push_dropped(), a.extended()),
                (false, false, true, false, gen == HwRev::Gen3, false, true),
                "{what}"
            );
            assert_eq!((a.major_err(), a.minor_err(), a.status()), (0, 0, WcStatus::Success), "{what}");
            let e = a.ext().unwrap();
            let body = ext_cqe.ext_body();
            assert_eq!([e.qword4.get(), e.qword5.get(), e.qword6.get()], body, "{what}");
            assert_eq!(e.qword7.get() & !ext::VALID, ext_cqe.ext_qword7(false), "{what}");
            assert_eq!(a.imm(), Some(0xfeed_beef), "{what}");
            assert_eq!(a.qword3() >> 63, u64::from(round * slots % 16 < 8), "{what}: the lap's valid bit");
            let b = v.next().unwrap();
            assert_eq!(b.position(), (round * slots + slots - 1) % 16, "{what}");
            assert_eq!(
                (b.comp_ctx(), b.qp_id(), b.op(), b.wqe_idx(), b.payload_len()),
                (0x0102_0304_0506_0708, 0x12, sq_op::SEND, 7, 0x10),
                "{what}"
            );
            assert_eq!((b.tcp_seq_psn_rtt_ts(), b.src_qpn_or_inv_stag()), (0x20, 0x30), "{what}");
            assert_eq!(
                (b.is_sq(), b.error(), b.solicited(), b.stag_ipv4(), b.srq(), b.push_dropped(), b.extended()),
                (true, true, false, true, false, true, false),
                "{what}"
            );
            assert_eq!(
                (b.major_err(), b.minor_err(), b.status()),
                (major::FLUSH, flush::LOC_LEN_ERR, WcStatus::LocLenErr),
                "{what}"
            );
            assert_eq!((b.ext(), b.imm()), (None, None), "{what}");
            assert!(v.next().is_none(), "{what}");
        }
    }
}

/// Tracking entries no post wrote are zero, as rdma-core's `calloc`ed `sq_wrtrk_array` and
/// `rq_wrid_array` are: a completion naming one has wr_id 0 (and, on the SQ, length 0), and
/// the SQ tail moves to its index plus its 0 quanta, i.e. onto it. A flush walking over one
/// reports it with opcode 0 (RDMA WRITE, what its zeroed WQE header reads as), and moves one
/// quantum on (rdma-core would stay on it for ever). `preset_identity` fills them as ring
/// images assume.
#[test]
fn unwritten_tracking_entries_are_zero() {
    let (mut m, mut cq, id) = setup(HwRev::Gen2, 64, QpConfig::rc(QPN, 16, 16), Compat::Current);
    m.push(&ModelCqe::send(CTX, QPN, 5, sq_op::SEND)).unwrap();
    m.push(&ModelCqe::recv(CTX, QPN, 3, 0, rq_op::ROCE_SEND_ONLY, 9)).unwrap();
    let got: Vec<_> = poll_all(&mut cq).iter().map(|c| (c.wr_id, c.wqe_index, c.byte_len, c.opcode)).collect();
    assert_eq!(got, [(0, 5, 0, WcOpcode::Send), (0, 3, 9, WcOpcode::Recv)]);
    assert_eq!(cq.qps().qp(id).unwrap().sq.tail, 5, "wqe_idx + 0 quanta");
    assert_eq!(cq.qps().qp(id).unwrap().rq.tail, 4);
    // A flush over two unwritten entries: each reported once, opcode RDMA WRITE.
    cq.qps_mut().qp_mut(id).unwrap().sq.set(7, 5);
    m.push(&ModelCqe::flush(CTX, QPN, true, 5, flush::GENERAL_ERR)).unwrap();
    let got: Vec<_> = poll_all(&mut cq).iter().map(|c| (c.wr_id, c.wqe_index, c.status, c.opcode)).collect();
    assert_eq!(
        got,
        [(0, 5, WcStatus::WrFlushErr, WcOpcode::RdmaWrite), (0, 6, WcStatus::WrFlushErr, WcOpcode::RdmaWrite)]
    );
    // Preset: every WQE posted, one quantum each, wr_id its index.
    cq.qps_mut().preset_identity(id).unwrap();
    m.push(&ModelCqe::send(CTX, QPN, 9, sq_op::SEND)).unwrap();
    assert_eq!(poll_all(&mut cq).iter().map(|c| c.wr_id).collect::<Vec<_>>(), [9]);
    assert_eq!(cq.qps().qp(id).unwrap().sq.tail, 10);
    assert_eq!(cq.qps_mut().preset_identity(QpId(9)), Err(dvcq_e810_dv::RegistryError::NoQp(9)));
}

/// `IrdmaCq::unregister` does what rdma-core's QP destroy does to a CQ (`irdma_clean_cq`):
/// the QP's CQEs not yet polled lose their completion context and are consumed without a
/// completion, an extended one's two slots included, a parked flush with them; the other
/// QP's are untouched. Where rdma-core would read the freed QP, a CQE written after the
/// clean, or a GEN3 SRQ CQE (its context is in qword5, which the clean does not look at),
/// the CQE is an `UnknownQp` item. A context nobody registered is refused.
#[test]
fn unregister_clears_the_qps_cqes_as_rdma_core_destroy_does() {
    const OTHER: u64 = CTX + 0x1000;
    for gen in [HwRev::Gen2, HwRev::Gen3] {
        let (mut m, mut cq, id) = setup(gen, 64, QpConfig::rc(QPN, 16, 16), Compat::Current);
        let b = cq.qps_mut().register(OTHER, QpConfig::rc(QPN + 1, 16, 16)).unwrap();
        let wb = cq.qps_mut().post_send(b, 0xb0, 1, 1, sq_op::SEND).unwrap();
        for i in 0..3 {
            cq.qps_mut().post_send(id, 0xa0 + i, 1, 1, sq_op::SEND).unwrap();
        }
        let wr = cq.qps_mut().post_recv(id, 0xa8).unwrap();
        // One of A's polled before the destroy: its slot is not the clean's business.
        m.push(&ModelCqe::send(CTX, QPN, 0, sq_op::SEND)).unwrap();
        assert_eq!(cq.poll_one().map(|c| c.wr_id), Some(0xa0));
        m.push(&ModelCqe::recv(CTX, QPN, wr, 0, rq_op::ROCE_SEND_ONLY_WITH_IMM, 8).with_imm(7)).unwrap();
        m.push(&ModelCqe::send(OTHER, QPN + 1, wb, sq_op::SEND)).unwrap();
        // A flush of A's SQ, parked after its first completion (GEN2).
        m.push(&ModelCqe::flush(CTX, QPN, true, 1, flush::GENERAL_ERR)).unwrap();
        let mut one = [Completion::default()];
        let first = cq.peek().unwrap();
        assert_eq!((first.wr_id, first.imm_data), (0xa8, 7u32.to_be()), "{gen:?}");
        assert_eq!(cq.unregister(0x5555), None, "{gen:?}");
        assert_eq!(cq.unregister(CTX), Some(2), "{gen:?}: the receive and the flush");
        assert!(cq.qps().find(CTX).is_none());
        let got: Vec<_> = poll_all(&mut cq).iter().map(|c| (c.wr_id, c.fault().map(|f| f.kind))).collect();
        assert_eq!(got, [(0xb0, None)], "{gen:?}");
        // After the clean: the freed QP's context in a new CQE is an item.
        m.push(&ModelCqe::send(CTX, QPN, 2, sq_op::SEND)).unwrap();
        let f = cq.poll_one().and_then(|c| c.fault()).map(|f| (f.kind, f.value));
        assert_eq!(f, Some((FaultKind::UnknownQp, CTX as u32)), "{gen:?}");
        if gen == HwRev::Gen3 {
            // A GEN3 SRQ receive of a QP destroyed meanwhile: its qword1 is a wr_id.
            cq.qps_mut().register(CTX + 0x2000, QpConfig::rc(QPN + 2, 16, 16)).unwrap();
            m.push(&ModelCqe::srq_recv(CTX + 0x2000, QPN + 2, 0x77, 4, rq_op::ROCE_SEND_ONLY)).unwrap();
            assert_eq!(cq.unregister(CTX + 0x2000), Some(0), "qword1 is the wr_id, which it does not compare");
            let f = cq.poll_one().and_then(|c| c.fault()).map(|f| f.kind);
            assert_eq!(f, Some(FaultKind::UnknownQp));
        }
        assert!(cq.poll(&mut one) == 0);
    }
}

/// rdma-core's connection-WQE skip moves the head one slot without the polarity flip
/// (`irdma_uk_cq_poll_cmpl`, every release since v37). dvcq's default skips the CQE whole
/// and wraps as always; `Compat::with_conn_wqe_bug` (and every `Compat::for_release`)
/// reproduces rdma-core: an extended connection-WQE CQE's extension slot is then read as a
/// CQE (here its qword5 is a context no QP has: an item, where rdma-core dereferences it),
/// and a skip out of the ring's last slot leaves the valid bit a lap behind, so the next
/// CQE is not seen.
#[test]
fn connection_wqe_skip_copies_rdma_cores_bug_only_when_asked() {
    let iwarp = QpConfig { transport: Transport::Iwarp, conn_wqes: 3, ..QpConfig::rc(QPN, 16, 16) };
    assert!(Compat::for_release(44, 0).unwrap().conn_wqe_bug() && Compat::for_release(65, 0).unwrap().conn_wqe_bug());
    for compat in [Compat::Current, Compat::V52.with_conn_wqe_bug(), Compat::for_release(64, 0).unwrap()] {
        let bug = compat.conn_wqe_bug();
        // An extended connection-WQE CQE (its extension's qword5 non-zero), then a user send.
        let (mut m, mut cq, id) = setup(HwRev::Gen2, 16, iwarp, compat);
        let mut conn = ModelCqe::send(CTX, QPN, 0, sq_op::SEND).with_imm(1);
        if let Some(e) = conn.ext.as_mut() {
            e.srq_qp_ctx = 0xbad0;
        }
        m.push(&conn).unwrap();
        // Polled while the user SQ is empty, as rdma-core's check needs.
        let mut got: Vec<_> = poll_all(&mut cq);
        let w = cq.qps_mut().post_send(id, 0x33, 1, 1, sq_op::SEND).unwrap();
        m.push(&ModelCqe::send(CTX, QPN, w, sq_op::SEND)).unwrap();
        got.extend(poll_all(&mut cq));
        let got: Vec<_> = got.iter().map(|c| c.fault().map(|f| (f.kind, f.value)).ok_or(c.wr_id)).collect();
        let want = if bug { vec![Ok((FaultKind::UnknownQp, 0xbad0)), Err(0x33)] } else { vec![Err(0x33)] };
        assert_eq!(got, want, "{compat:?}");
        assert_eq!(cq.ci(), 3, "{compat:?}");

        // A plain connection-WQE CQE in the last slot: rdma-core's head wraps into slot 0
        // a lap behind, and reads the lap it already polled again: the skipped context-0
        // CQEs once more (a poll call stops after a ring's worth of them), then the
        // connection WQE's CQE, which, once the SQ holds the user's send, completes as if
        // it were one (wr_id 0: its tracking entry was never written) before the send.
        let (mut m, mut cq, id) = setup(HwRev::Gen2, 8, iwarp, compat);
        for _ in 0..7 {
            m.push(&ModelCqe::send(0, 0, 0, sq_op::SEND)).unwrap();
        }
        assert!(poll_all(&mut cq).is_empty(), "context-0 CQEs are skipped");
        m.push(&ModelCqe::send(CTX, QPN, 1, sq_op::SEND)).unwrap();
        assert!(poll_all(&mut cq).is_empty());
        let w = cq.qps_mut().post_send(id, 0x44, 1, 1, sq_op::SEND).unwrap();
        m.push(&ModelCqe::send(CTX, QPN, w, sq_op::SEND)).unwrap();
        let got: Vec<u64> = poll_all(&mut cq).iter().map(|c| c.wr_id).collect();
        assert_eq!(got, if bug { vec![0, 0x44] } else { vec![0x44] }, "{compat:?}");
        assert_eq!((cq.head(), cq.polarity()), (1, false), "{compat:?}");
    }
}
