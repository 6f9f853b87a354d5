//! Model devices executing posted work: every case runs on `model-mlx5` and `model-e810`,
//! and checks the bytes that landed and the completions the vendor's poller made of the
//! CQEs the device wrote, against what libibverbs returns on that hardware.

use dvcq::model_device::{DeviceError, ModelCq, ModelDevice, ModelMr, ModelQp, ModelVendor, PostErrorKind, QpState};
use dvcq::verbs::{inc_rkey, Access, MwBind, QpCaps, QpType, RecvWr, RemoteAddr, SendOp, SendWr, UdDest};
use dvcq::{Completion, WcFlags, WcOpcode, WcStatus};
use proptest::prelude::*;
use std::collections::HashMap;

const VENDORS: [ModelVendor; 2] = [ModelVendor::Mlx5, ModelVendor::Irdma];

/// Polls `cq` until it is empty, in batches of `batch`.
fn drain_by(cq: &mut ModelCq, batch: usize) -> Vec<Completion> {
    let mut all = Vec::new();
    let mut wcs = vec![Completion::default(); batch];
    loop {
        let polled = cq.poll(&mut wcs);
        if polled.is_empty() {
            return all;
        }
        all.extend_from_slice(polled);
    }
}

fn drain(cq: &mut ModelCq) -> Vec<Completion> {
    drain_by(cq, 16)
}

/// Two RC QPs connected to each other on one device, one CQ for everything, a region each.
struct Pair {
    dev: ModelDevice,
    cq: ModelCq,
    a: ModelQp,
    b: ModelQp,
    ma: ModelMr,
    mb: ModelMr,
}

fn rc_pair_with(vendor: ModelVendor, caps: QpCaps, cqe: u32) -> Pair {
    let dev = ModelDevice::new(vendor);
    let cq = dev.create_cq(cqe).unwrap();
    let a = dev.create_qp(QpType::Rc, &cq, &cq, caps, None).unwrap();
    let b = dev.create_qp(QpType::Rc, &cq, &cq, caps, None).unwrap();
    a.connect(&b.endpoint()).unwrap();
    b.connect(&a.endpoint()).unwrap();
    let ma = dev.reg_mr(8192, Access::ALL).unwrap();
    let mb = dev.reg_mr(8192, Access::ALL).unwrap();
    Pair { dev, cq, a, b, ma, mb }
}

fn rc_pair(vendor: ModelVendor) -> Pair {
    rc_pair_with(vendor, QpCaps { max_send_sge: 2, max_recv_sge: 2, ..QpCaps::default() }, 256)
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

fn read(mr: &ModelMr, off: u64, n: usize) -> Vec<u8> {
    let mut v = vec![0; n];
    mr.read(off, &mut v).unwrap();
    v
}

/// The completions of one QP, in order.
fn of(wcs: &[Completion], qpn: u32) -> Vec<Completion> {
    wcs.iter().filter(|w| w.qp_num == qpn).copied().collect()
}

#[test]
fn every_rc_opcode_moves_the_bytes_and_completes_as_libibverbs_reports() {
    for v in VENDORS {
        let mut p = rc_pair(v);
        let (qa, qb) = (p.a.qpn(), p.b.qpn());
        let msg = pattern(300, 7);
        p.ma.write(0, &msg).unwrap();
        // B posts receives of two entries; A sends, sends with immediate data, writes,
        // writes with immediate data, and reads B's region back into its own.
        let rsg = [[p.mb.slice(0, 100).unwrap(), p.mb.slice(1000, 400).unwrap()], [p.mb.slice(2000, 512).unwrap(); 2]];
        let recvs = [
            RecvWr { wr_id: 100, sg_list: &rsg[0] },
            RecvWr { wr_id: 101, sg_list: &rsg[1] },
            RecvWr { wr_id: 102, sg_list: &rsg[1] },
        ];
        p.b.post_recv(&recvs).unwrap();
        p.mb.write(4096, &pattern(64, 99)).unwrap();
        let sg = [p.ma.slice(0, 300).unwrap()];
        let rd = [p.ma.slice(5000, 64).unwrap()];
        let remote = p.mb.remote();
        let wrs = [
            SendWr::new(1, SendOp::Send, &sg),
            SendWr::new(2, SendOp::SendWithImm(0x1122_3344), &sg),
            SendWr::new(3, SendOp::Write(remote.at(3000)), &sg),
            SendWr::new(4, SendOp::WriteWithImm(remote.at(3500), 0xcafe_f00d), &sg),
            SendWr::new(5, SendOp::Read(remote.at(4096)), &rd),
        ];
        p.a.post_send(&wrs).unwrap();
        let wcs = drain(&mut p.cq);
        assert!(wcs.iter().all(|w| w.status == WcStatus::Success && w.fault().is_none()), "{v:?}: {wcs:#?}");
        // The data: the first send spans both entries of receive 100.
        assert_eq!(read(&p.mb, 0, 100), msg[..100], "{v:?}");
        assert_eq!(read(&p.mb, 1000, 200), msg[100..], "{v:?}");
        assert_eq!(read(&p.mb, 2000, 300), msg, "{v:?}");
        assert_eq!(read(&p.mb, 3000, 300), msg, "{v:?}");
        assert_eq!(read(&p.mb, 3500, 300), msg, "{v:?}");
        assert_eq!(read(&p.ma, 5000, 64), pattern(64, 99), "{v:?}");

        let req = of(&wcs, qa);
        let got: Vec<_> = req.iter().map(|w| (w.wr_id, w.opcode)).collect();
        use WcOpcode::*;
        assert_eq!(got, [(1, Send), (2, Send), (3, RdmaWrite), (4, RdmaWrite), (5, RdmaRead)], "{v:?}");
        // byte_len: READ reports the bytes read on both; irdma reports every SQ WR's length.
        assert_eq!(req[4].byte_len, 64, "{v:?}");
        if v == ModelVendor::Irdma {
            assert_eq!(req[..4].iter().map(|w| w.byte_len).collect::<Vec<_>>(), [300; 4]);
        }
        let resp = of(&wcs, qb);
        let got: Vec<_> = resp.iter().map(|w| (w.wr_id, w.opcode, w.byte_len)).collect();
        assert_eq!(got, [(100, Recv, 300), (101, Recv, 300), (102, RecvRdmaWithImm, 300)], "{v:?}");
        assert_eq!(resp[0].wc_flags, WcFlags::empty(), "{v:?}");
        // imm_data as ibv_wc holds it: network order read as a host integer.
        assert_eq!((resp[1].wc_flags, resp[1].imm_data), (WcFlags::WITH_IMM, 0x1122_3344u32.to_be()), "{v:?}");
        assert_eq!((resp[2].wc_flags, resp[2].imm_data), (WcFlags::WITH_IMM, 0xcafe_f00du32.to_be()), "{v:?}");
        if v == ModelVendor::Mlx5 {
            // mlx5 reports the sender; irdma reports the local QP on RC
            // (rdma-core `irdma_process_cqe`).
            assert!(resp.iter().all(|w| w.src_qp == qa));
        } else {
            assert!(resp.iter().all(|w| w.src_qp == qb));
        }
        assert!(p.cq.overrun().is_none());
    }
}

#[test]
fn an_rc_send_waits_for_a_receive_and_later_work_waits_behind_it() {
    for v in VENDORS {
        let mut p = rc_pair(v);
        p.ma.write(0, b"hello").unwrap();
        let sg = [p.ma.slice(0, 5).unwrap()];
        let wrs = [SendWr::new(1, SendOp::Send, &sg), SendWr::new(2, SendOp::Write(p.mb.remote().at(64)), &sg)];
        p.a.post_send(&wrs).unwrap();
        assert!(drain(&mut p.cq).is_empty(), "{v:?}: nothing completes before a receive is posted");
        assert_eq!(read(&p.mb, 64, 5), [0; 5], "{v:?}: the write waits behind the send");
        let rsg = [p.mb.slice(0, 64).unwrap()];
        p.b.post_recv(&[RecvWr { wr_id: 9, sg_list: &rsg }]).unwrap();
        let wcs = drain(&mut p.cq);
        let ids: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
        // The receive's CQE, then the send's (acknowledged), then the write's.
        assert_eq!(ids, [(9, WcStatus::Success), (1, WcStatus::Success), (2, WcStatus::Success)], "{v:?}");
        assert_eq!(read(&p.mb, 0, 5), b"hello");
        assert_eq!(read(&p.mb, 64, 5), b"hello");
    }
}

#[test]
fn a_qp_connected_to_itself_loops_back() {
    for v in VENDORS {
        let dev = ModelDevice::new(v);
        let mut cq = dev.create_cq(16).unwrap();
        let q = dev.create_qp(QpType::Rc, &cq, &cq, QpCaps::default(), None).unwrap();
        q.connect(&q.endpoint()).unwrap();
        let m = dev.reg_mr(256, Access::ALL).unwrap();
        m.write(0, &[5; 16]).unwrap();
        let rsg = [m.slice(128, 16).unwrap()];
        q.post_recv(&[RecvWr { wr_id: 2, sg_list: &rsg }]).unwrap();
        let sg = [m.slice(0, 16).unwrap()];
        q.post_send(&[SendWr::new(1, SendOp::Send, &sg)]).unwrap();
        let wcs = drain(&mut cq);
        // The receiver's CQE is written first: the requester's comes with the acknowledgement.
        assert_eq!(
            wcs.iter().map(|w| (w.wr_id, w.opcode)).collect::<Vec<_>>(),
            [(2, WcOpcode::Recv), (1, WcOpcode::Send)]
        );
        assert_eq!(read(&m, 128, 16), [5; 16]);
    }
}

#[test]
fn ud_receives_start_with_the_grh_and_carry_the_source() {
    for v in VENDORS {
        let dev = ModelDevice::new(v);
        let mut scq = dev.create_cq(64).unwrap();
        let mut rcq = dev.create_cq(64).unwrap();
        let caps = QpCaps::default();
        let s = dev.create_qp(QpType::Ud, &scq, &scq, caps, None).unwrap();
        let r = dev.create_qp(QpType::Ud, &rcq, &rcq, caps, None).unwrap();
        s.connect(&s.endpoint()).unwrap();
        r.connect(&r.endpoint()).unwrap();
        r.set_qkey(0x4242);
        let m = dev.reg_mr(16384, Access::ALL).unwrap();
        m.write(0, &pattern(200, 3)).unwrap();
        let rsg = [m.slice(8192, 4096 + 40).unwrap()];
        r.post_recv(&[RecvWr { wr_id: 50, sg_list: &rsg }, RecvWr { wr_id: 51, sg_list: &rsg }]).unwrap();
        let dest = |qkey| UdDest { qpn: r.qpn(), qkey, endpoint: r.endpoint() };
        let sg = [m.slice(0, 200).unwrap()];
        let big = [m.slice(0, 4097).unwrap()];
        // A wrong Q_Key is dropped without a completion at the receiver; the sender
        // completes all the same (unreliable datagram).
        s.post_send(&[SendWr::new(1, SendOp::Send, &sg).to(dest(0x1))]).unwrap();
        s.post_send(&[SendWr::new(2, SendOp::SendWithImm(77), &sg).to(dest(0x4242))]).unwrap();
        let swcs = drain(&mut scq);
        assert_eq!(
            swcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
            [(1, WcStatus::Success), (2, WcStatus::Success)],
            "{v:?}"
        );
        let rwcs = drain(&mut rcq);
        assert_eq!(rwcs.len(), 1, "{v:?}: {rwcs:#?}");
        let w = rwcs[0];
        assert_eq!((w.wr_id, w.status, w.opcode, w.byte_len), (50, WcStatus::Success, WcOpcode::Recv, 240), "{v:?}");
        assert_eq!(w.wc_flags, WcFlags::GRH | WcFlags::WITH_IMM, "{v:?}");
        assert_eq!((w.src_qp, w.imm_data), (s.qpn(), 77u32.to_be()), "{v:?}");
        assert_eq!(read(&m, 8192 + 40, 200), pattern(200, 3), "{v:?}");
        // RoCEv2 over IPv4: the IPv4 header in the second half of the GRH slot.
        let g = read(&m, 8192, 40);
        assert_eq!((g[20], &g[32..36]), (0x45, &dev.gid()[12..]), "{v:?}");
        // Beyond the MTU: a local length error, and the sender's QP is in error.
        s.post_send(&[SendWr::new(3, SendOp::Send, &big).to(dest(0x4242))]).unwrap();
        let swcs = drain(&mut scq);
        assert_eq!(swcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(), [(3, WcStatus::LocLenErr)], "{v:?}");
        assert_eq!(s.state(), QpState::Error);
        // RDMA on UD and a UD send without destination are refused at post.
        let e = s.post_send(&[SendWr::new(4, SendOp::Send, &sg)]).unwrap_err();
        assert_eq!((e.index, e.kind), (0, PostErrorKind::BadOpcode));
    }
}

#[test]
fn an_srq_feeds_two_qps_and_its_wqes_come_back_after_each_poll() {
    let dev = ModelDevice::new(ModelVendor::Mlx5);
    let mut cq = dev.create_cq(64).unwrap();
    let srq = dev.create_srq(4, 1).unwrap();
    let caps = QpCaps::default();
    let (a1, a2) = (
        dev.create_qp(QpType::Rc, &cq, &cq, caps, None).unwrap(),
        dev.create_qp(QpType::Rc, &cq, &cq, caps, None).unwrap(),
    );
    let b1 = dev.create_qp(QpType::Rc, &cq, &cq, caps, Some(&srq)).unwrap();
    let b2 = dev.create_qp(QpType::Rc, &cq, &cq, caps, Some(&srq)).unwrap();
    assert_eq!(b1.caps().max_recv_wr, 0);
    for (x, y) in [(&a1, &b1), (&a2, &b2)] {
        x.connect(&y.endpoint()).unwrap();
        y.connect(&x.endpoint()).unwrap();
    }
    let m = dev.reg_mr(4096, Access::ALL).unwrap();
    let mut next = 1000u64;
    let mut seen = HashMap::new();
    // Many laps of an SRQ of 8 WQEs (7 usable, rdma-core keeps one in its free list).
    for lap in 0..20u64 {
        let rsg: Vec<_> = (0..4).map(|i| [m.slice(2048 + i * 64, 64).unwrap()]).collect();
        let recvs: Vec<_> = rsg
            .iter()
            .map(|sg| {
                next += 1;
                RecvWr { wr_id: next, sg_list: sg }
            })
            .collect();
        srq.post_recv(&recvs).unwrap();
        m.write(0, &[lap as u8; 8]).unwrap();
        let sg = [m.slice(0, 8).unwrap()];
        a1.post_send(&[SendWr::new(lap * 10 + 1, SendOp::Send, &sg), SendWr::new(lap * 10 + 2, SendOp::Send, &sg)])
            .unwrap();
        a2.post_send(&[
            SendWr::new(lap * 10 + 3, SendOp::SendWithImm(5), &sg),
            SendWr::new(lap * 10 + 4, SendOp::Send, &sg),
        ])
        .unwrap();
        let wcs = drain_by(&mut cq, 3);
        assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "lap {lap}: {wcs:#?}");
        let on = |q: &ModelQp| wcs.iter().filter(|w| w.qp_num == q.qpn() && w.opcode.is_recv()).count();
        assert_eq!((on(&b1), on(&b2)), (2, 2), "lap {lap}");
        for w in wcs.iter().filter(|w| w.opcode.is_recv()) {
            assert!(seen.insert(w.wr_id, ()).is_none(), "lap {lap}: wr_id {} twice", w.wr_id);
            assert!(w.wr_id > next - 4 && w.wr_id <= next, "lap {lap}: wr_id {} is not this lap's", w.wr_id);
        }
    }
    // A full SRQ refuses with ENOMEM at the first request that does not fit.
    let rsg = [m.slice(0, 8).unwrap()];
    let recvs = vec![RecvWr { wr_id: 1, sg_list: &rsg }; 8];
    let e = srq.post_recv(&recvs).unwrap_err();
    assert_eq!((e.index, e.kind, e.errno), (7, PostErrorKind::QueueFull, 12));
    // GEN2 has no SRQ.
    let e810 = ModelDevice::new(ModelVendor::Irdma);
    assert!(matches!(e810.create_srq(4, 1), Err(DeviceError::Unsupported { .. })));
}

#[test]
fn unsignaled_sends_over_many_laps_of_a_small_send_queue() {
    for v in VENDORS {
        let caps = QpCaps { max_send_wr: 4, ..QpCaps::default() };
        let mut p = rc_pair_with(v, caps, 64);
        // rdma-core's limits: mlx5 refuses past max_post (4) WRs outstanding
        // (`mlx5_wq_overflow`); irdma reports 127 WRs but counts quanta, and keeps 257 of
        // its 512 free (`IRDMA_SQ_RING_FREE_QUANTA`): 255 one-quantum WRs fit.
        assert_eq!(p.a.caps().max_send_wr, if v == ModelVendor::Mlx5 { 4 } else { 127 }, "{v:?}");
        let depth = if v == ModelVendor::Mlx5 { 4 } else { 255 };
        let sg = [p.ma.slice(0, 8).unwrap()];
        let remote = p.mb.remote().at(0);
        let mut id = 0u64;
        for lap in 0..50 {
            // A full queue of writes, only the last signaled: it completes all of them.
            let wrs: Vec<_> = (0..depth)
                .map(|i| {
                    id += 1;
                    SendWr::new(id, SendOp::Write(remote), &sg).signaled(i + 1 == depth)
                })
                .collect();
            p.a.post_send(&wrs).unwrap_or_else(|e| panic!("{v:?} lap {lap}: {e}"));
            // Before the poll the queue is full: one more is refused.
            let e = p.a.post_send(&[SendWr::new(0, SendOp::Write(remote), &sg)]).unwrap_err();
            assert_eq!((e.index, e.kind, e.errno), (0, PostErrorKind::QueueFull, 12), "{v:?} lap {lap}");
            let wcs = drain(&mut p.cq);
            assert_eq!(
                wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
                [(id, WcStatus::Success)],
                "{v:?} lap {lap}"
            );
        }
    }
}

#[test]
fn a_bad_rkey_fails_the_request_and_flushes_the_rest() {
    for v in VENDORS {
        let mut p = rc_pair(v);
        let rsg = [p.mb.slice(0, 64).unwrap()];
        p.b.post_recv(&[RecvWr { wr_id: 70, sg_list: &rsg }, RecvWr { wr_id: 71, sg_list: &rsg }]).unwrap();
        let sg = [p.ma.slice(0, 8).unwrap()];
        let bad = RemoteAddr { addr: p.mb.addr(), rkey: p.mb.rkey() ^ 0x80 };
        let wrs = [
            SendWr::new(1, SendOp::Write(bad), &sg),
            SendWr::new(2, SendOp::Send, &sg),
            SendWr::new(3, SendOp::Send, &sg).signaled(false),
        ];
        p.a.post_send(&wrs).unwrap();
        let wcs = drain(&mut p.cq);
        let req: Vec<_> = of(&wcs, p.a.qpn()).iter().map(|w| (w.wr_id, w.status)).collect();
        assert_eq!(req, [(1, WcStatus::RemAccessErr), (2, WcStatus::WrFlushErr), (3, WcStatus::WrFlushErr)], "{v:?}");
        assert_eq!((p.a.state(), p.b.state()), (QpState::Error, QpState::Error), "{v:?}");
        // The responder detected the violation: its receives flush.
        let resp: Vec<_> = of(&wcs, p.b.qpn()).iter().map(|w| (w.wr_id, w.status)).collect();
        assert_eq!(resp, [(70, WcStatus::WrFlushErr), (71, WcStatus::WrFlushErr)], "{v:?}");
        // A read beyond the region, and a write to a region without REMOTE_WRITE, fail the
        // same way.
        let p = rc_pair(v);
        let rd = [p.ma.slice(0, 128).unwrap()];
        let ro_p = p.dev.reg_mr(64, Access::LOCAL_WRITE.union(Access::REMOTE_READ)).unwrap();
        p.a.post_send(&[SendWr::new(1, SendOp::Read(ro_p.remote().at(0)), &rd)]).unwrap();
        let q = rc_pair(v);
        let ro_q = q.dev.reg_mr(64, Access::LOCAL_WRITE.union(Access::REMOTE_READ)).unwrap();
        let sg = [q.ma.slice(0, 8).unwrap()];
        q.a.post_send(&[SendWr::new(1, SendOp::Write(ro_q.remote().at(0)), &sg)]).unwrap();
        for mut cq in [p.cq, q.cq] {
            let wcs = drain(&mut cq);
            assert_eq!(
                wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
                [(1, WcStatus::RemAccessErr)],
                "{v:?}"
            );
        }
    }
}

#[test]
fn a_receive_too_small_fails_both_sides() {
    for v in VENDORS {
        let mut p = rc_pair(v);
        let rsg = [p.mb.slice(0, 16).unwrap()];
        p.b.post_recv(&[RecvWr { wr_id: 80, sg_list: &rsg }, RecvWr { wr_id: 81, sg_list: &rsg }]).unwrap();
        let sg = [p.ma.slice(0, 32).unwrap()];
        p.a.post_send(&[SendWr::new(1, SendOp::Send, &sg)]).unwrap();
        let wcs = drain(&mut p.cq);
        let req: Vec<_> = of(&wcs, p.a.qpn()).iter().map(|w| (w.wr_id, w.status)).collect();
        let resp: Vec<_> = of(&wcs, p.b.qpn()).iter().map(|w| (w.wr_id, w.status)).collect();
        assert_eq!(req, [(1, WcStatus::RemInvReqErr)], "{v:?}");
        assert_eq!(resp, [(80, WcStatus::LocLenErr), (81, WcStatus::WrFlushErr)], "{v:?}");
        assert_eq!((p.a.state(), p.b.state()), (QpState::Error, QpState::Error));
    }
}

#[test]
fn to_error_flushes_every_outstanding_request_once() {
    for v in VENDORS {
        let mut p = rc_pair(v);
        let rsg = [p.ma.slice(0, 64).unwrap()];
        let recvs: Vec<_> = (0..3).map(|i| RecvWr { wr_id: 200 + i, sg_list: &rsg }).collect();
        p.a.post_recv(&recvs).unwrap();
        // B has no receive: A's sends wait (RNR), the unsignaled one among them.
        let sg = [p.ma.slice(0, 8).unwrap()];
        let wrs = [
            SendWr::new(1, SendOp::Send, &sg),
            SendWr::new(2, SendOp::Send, &sg).signaled(false),
            SendWr::new(3, SendOp::Send, &sg),
        ];
        p.a.post_send(&wrs).unwrap();
        assert!(drain(&mut p.cq).is_empty());
        p.a.to_error();
        assert_eq!(p.a.state(), QpState::Error);
        let wcs = drain(&mut p.cq);
        let mut got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
        got.sort_by_key(|x| x.0);
        let flushed = |ids: &[u64]| ids.iter().map(|&i| (i, WcStatus::WrFlushErr)).collect::<Vec<_>>();
        assert_eq!(got, flushed(&[1, 2, 3, 200, 201, 202]), "{v:?}");
        // Posting to a QP in error flushes the new work too.
        p.a.post_send(&[SendWr::new(4, SendOp::Send, &sg)]).unwrap();
        p.a.post_recv(&[RecvWr { wr_id: 203, sg_list: &rsg }]).unwrap();
        let mut got: Vec<_> = drain(&mut p.cq).iter().map(|w| (w.wr_id, w.status)).collect();
        got.sort_by_key(|x| x.0);
        assert_eq!(got, flushed(&[4, 203]), "{v:?}");
        // The peer, connected to a QP in error, gets no answer to a send.
        let sgb = [p.mb.slice(0, 8).unwrap()];
        p.b.post_send(&[SendWr::new(9, SendOp::Send, &sgb)]).unwrap();
        let got: Vec<_> = drain(&mut p.cq).iter().map(|w| (w.wr_id, w.status)).collect();
        assert_eq!(got, [(9, WcStatus::RetryExcErr)], "{v:?}");
    }
}

#[test]
fn sends_before_connect_and_oversized_lists_are_refused_at_post() {
    for v in VENDORS {
        let dev = ModelDevice::new(v);
        let cq = dev.create_cq(8).unwrap();
        let q = dev.create_qp(QpType::Rc, &cq, &cq, QpCaps { max_inline_data: 16, ..QpCaps::default() }, None).unwrap();
        let m = dev.reg_mr(256, Access::ALL).unwrap();
        let sg = [m.slice(0, 8).unwrap(); 2];
        let e = q.post_send(&[SendWr::new(1, SendOp::Send, &sg[..1])]).unwrap_err();
        assert_eq!(e.kind, PostErrorKind::BadState(QpState::Init), "{v:?}");
        q.connect(&q.endpoint()).unwrap();
        assert!(matches!(q.connect(&q.endpoint()), Err(DeviceError::BadState { .. })));
        let e = q
            .post_send(&[SendWr::new(1, SendOp::Write(m.remote().at(0)), &sg[..1]), SendWr::new(2, SendOp::Send, &sg)])
            .unwrap_err();
        assert_eq!((e.index, e.kind), (1, PostErrorKind::TooManySge { num_sge: 2, max: 1 }), "{v:?}");
        let max = q.caps().max_inline_data;
        let long = [m.slice(0, max + 1).unwrap()];
        let mut wr = SendWr::new(3, SendOp::Write(m.remote().at(128)), &long);
        wr.inline = true;
        let e = q.post_send(&[wr]).unwrap_err();
        assert_eq!(e.kind, PostErrorKind::InlineTooLong { len: u64::from(max) + 1, max }, "{v:?}");
        assert!(matches!(
            dev.create_qp(QpType::Rc, &cq, &cq, QpCaps { max_send_sge: 31, ..QpCaps::default() }, None),
            Err(DeviceError::TooLarge { .. })
        ));
        let e = dev.reg_mr(64, Access::REMOTE_WRITE).unwrap_err();
        assert!(matches!(e, DeviceError::BadAccess { bits: 2, .. }), "{v:?}: {e}");
        let other = ModelDevice::new(v).create_cq(8).unwrap();
        assert!(matches!(
            dev.create_qp(QpType::Rc, &other, &cq, QpCaps::default(), None),
            Err(DeviceError::ForeignHandle { .. })
        ));
    }
}

#[test]
fn an_inline_send_copies_its_data_at_post() {
    for v in VENDORS {
        let mut p = rc_pair_with(v, QpCaps { max_inline_data: 64, ..QpCaps::default() }, 16);
        p.ma.write(0, &[1; 32]).unwrap();
        let sg = [p.ma.slice(0, 32).unwrap()];
        let mut wr = SendWr::new(1, SendOp::Send, &sg);
        wr.inline = true;
        // No receive yet: the send waits, with the bytes it had at post.
        p.a.post_send(&[wr]).unwrap();
        p.ma.write(0, &[2; 32]).unwrap();
        let rsg = [p.mb.slice(0, 64).unwrap()];
        p.b.post_recv(&[RecvWr { wr_id: 5, sg_list: &rsg }]).unwrap();
        assert_eq!(drain(&mut p.cq).len(), 2);
        assert_eq!(read(&p.mb, 0, 32), [1; 32], "{v:?}");
    }
}

#[test]
fn cq_depths_round_as_the_providers_do_and_overflow_into_error() {
    for v in VENDORS {
        let dev = ModelDevice::new(v);
        let max = dev.attrs().max_cqe;
        for cqe in [1, 2, 255, max] {
            let mut cq = dev.create_cq(cqe).unwrap();
            let (want_cqe, want_entries) = match v {
                ModelVendor::Mlx5 => ((cqe + 1).next_power_of_two() - 1, (cqe + 1).next_power_of_two()),
                ModelVendor::Irdma => (cqe, (2 * (cqe + 1)).max(4)),
            };
            assert_eq!((cq.cqe(), cq.entries()), (want_cqe, want_entries), "{v:?} cqe {cqe}");
            if cqe == max {
                continue;
            }
            // As many signaled sends as asked for always fit; the ring's capacity is what
            // the hardware holds (irdma keeps one slot free); one more CQE overruns.
            let caps = QpCaps { max_send_wr: 512, ..QpCaps::default() };
            let q = dev.create_qp(QpType::Rc, &cq, &cq, caps, None).unwrap();
            q.connect(&q.endpoint()).unwrap();
            let m = dev.reg_mr(64, Access::ALL).unwrap();
            let sg = [m.slice(0, 8).unwrap()];
            let room = match v {
                ModelVendor::Mlx5 => cq.entries(),
                ModelVendor::Irdma => cq.entries() - 1,
            };
            for i in 0..room {
                q.post_send(&[SendWr::new(u64::from(i), SendOp::Write(m.remote().at(0)), &sg)]).unwrap();
            }
            assert!(cq.overrun().is_none(), "{v:?} cqe {cqe}");
            q.post_send(&[SendWr::new(9999, SendOp::Write(m.remote().at(0)), &sg)]).unwrap();
            assert!(cq.overrun().is_some(), "{v:?} cqe {cqe}: the CQ is in error");
            let wcs = drain(&mut cq);
            assert_eq!(wcs.len() as u32, room, "{v:?} cqe {cqe}: what was written before stays polled");
            assert!(wcs.iter().enumerate().all(|(i, w)| w.wr_id == i as u64));
            assert_eq!(cq.stats().cqes_dropped, 1);
        }
        assert!(matches!(dev.create_cq(max + 1), Err(DeviceError::TooLarge { .. })), "{v:?}");
        assert!(matches!(dev.create_cq(0), Err(DeviceError::TooLarge { .. })), "{v:?}");
    }
}

#[test]
fn a_cq_wraps_many_times() {
    for v in VENDORS {
        let mut p = rc_pair_with(v, QpCaps::default(), 3);
        let entries = p.cq.entries();
        let sg = [p.ma.slice(0, 4).unwrap()];
        let rsg = [p.mb.slice(0, 4).unwrap()];
        let laps = 40 * entries as u64;
        let mut wcs = [Completion::default(); 2];
        for i in 0..laps {
            p.b.post_recv(&[RecvWr { wr_id: 1_000_000 + i, sg_list: &rsg }]).unwrap();
            p.ma.write(0, &(i as u32).to_le_bytes()).unwrap();
            p.a.post_send(&[SendWr::new(i, SendOp::Send, &sg)]).unwrap();
            let mut got = Vec::new();
            while got.len() < 2 {
                let polled = p.cq.poll(&mut wcs);
                assert!(!polled.is_empty(), "{v:?} message {i}: completions missing");
                got.extend_from_slice(polled);
            }
            assert_eq!((got[0].wr_id, got[1].wr_id), (1_000_000 + i, i), "{v:?}");
            assert_eq!(read(&p.mb, 0, 4), (i as u32).to_le_bytes());
        }
        let s = p.cq.stats();
        assert_eq!((s.cqes_written, s.completions, s.cqes_dropped), (2 * laps, 2 * laps, 0), "{v:?}");
        assert_eq!(s.mlx5.is_some(), v == ModelVendor::Mlx5);
    }
}

#[test]
fn separate_send_and_receive_cqs_get_their_own_completions() {
    for v in VENDORS {
        let dev = ModelDevice::new(v);
        let (mut sa, mut ra) = (dev.create_cq(8).unwrap(), dev.create_cq(8).unwrap());
        let mut rb = dev.create_cq(8).unwrap();
        let a = dev.create_qp(QpType::Rc, &sa, &ra, QpCaps::default(), None).unwrap();
        let b = dev.create_qp(QpType::Rc, &sa, &rb, QpCaps::default(), None).unwrap();
        a.connect(&b.endpoint()).unwrap();
        b.connect(&a.endpoint()).unwrap();
        let m = dev.reg_mr(64, Access::ALL).unwrap();
        let sg = [m.slice(0, 8).unwrap()];
        b.post_recv(&[RecvWr { wr_id: 2, sg_list: &sg }]).unwrap();
        a.post_recv(&[RecvWr { wr_id: 3, sg_list: &sg }]).unwrap();
        a.post_send(&[SendWr::new(1, SendOp::Send, &sg)]).unwrap();
        assert_eq!(drain(&mut sa).iter().map(|w| w.wr_id).collect::<Vec<_>>(), [1]);
        assert_eq!(drain(&mut rb).iter().map(|w| w.wr_id).collect::<Vec<_>>(), [2]);
        assert!(drain(&mut ra).is_empty());
        a.to_error();
        assert_eq!(drain(&mut ra).iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(), [(3, WcStatus::WrFlushErr)]);
        assert!(drain(&mut sa).is_empty(), "{v:?}: nothing left on the send queue to flush");
    }
}

/// A bind of `mw` (by its current key) over `len` bytes at `off` in `mr`.
fn bind(
    dev: &ModelDevice,
    mw: &dvcq::model_device::ModelMw,
    mr: &ModelMr,
    off: u64,
    len: u64,
    access: Access,
) -> SendOp {
    let key = dev.mw_rkey(mw).unwrap();
    SendOp::BindMw(MwBind {
        mw_rkey: key,
        new_rkey: inc_rkey(key),
        mr_lkey: mr.lkey(),
        addr: mr.addr() + off,
        len,
        access,
    })
}

const RW: Access = Access::REMOTE_READ.union(Access::REMOTE_WRITE);

/// A type-2 window end to end on both models: B binds it over part of its region
/// (`IBV_WC_BIND_MW` from the poller: mlx5 from wr_data behind a UMR CQE, irdma from its
/// BIND_MW op), A writes and reads through it, A's SEND_WITH_INV frees it (B's receive:
/// `IBV_WC_RECV` with `WITH_INV` and the rkey; A's: `IBV_WC_SEND`), and a write through the
/// dead key fails as a bad rkey does.
#[test]
fn a_window_is_bound_used_invalidated_and_then_dead() {
    for v in VENDORS {
        let mut p = rc_pair(v);
        let (qa, qb) = (p.a.qpn(), p.b.qpn());
        let target = p.dev.reg_mr(8192, Access::ALL.union(Access::MW_BIND)).unwrap();
        let mw = p.dev.alloc_mw();
        let op = bind(&p.dev, &mw, &target, 4096, 512, RW);
        p.b.post_send(&[SendWr::new(10, op, &[])]).unwrap();
        let key = p.dev.mw_rkey(&mw).unwrap();
        assert_eq!(key, inc_rkey(mw.rkey()), "{v:?}: the bind gives the next key tag");
        let msg = pattern(200, 3);
        p.ma.write(0, &msg).unwrap();
        let sg = [p.ma.slice(0, 200).unwrap()];
        let at = |off| RemoteAddr { addr: target.addr() + 4096 + off, rkey: key };
        let rd = [p.ma.slice(1000, 64).unwrap()];
        let inv_sg = [p.ma.slice(0, 16).unwrap()];
        let rsg = [p.mb.slice(0, 64).unwrap()];
        p.b.post_recv(&[RecvWr { wr_id: 20, sg_list: &rsg }]).unwrap();
        p.a.post_send(&[
            SendWr::new(1, SendOp::Write(at(100)), &sg),
            SendWr::new(2, SendOp::Read(at(100)), &rd),
            SendWr::new(3, SendOp::SendWithInv(key), &inv_sg),
        ])
        .unwrap();
        let wcs = drain(&mut p.cq);
        let b: Vec<_> = of(&wcs, qb).iter().map(|w| (w.wr_id, w.status, w.opcode, w.wc_flags, w.imm_data)).collect();
        assert_eq!(
            b,
            [
                (10, WcStatus::Success, WcOpcode::BindMw, WcFlags::empty(), 0),
                (20, WcStatus::Success, WcOpcode::Recv, WcFlags::WITH_INV, key),
            ],
            "{v:?}"
        );
        let a: Vec<_> = of(&wcs, qa).iter().map(|w| (w.wr_id, w.status, w.opcode)).collect();
        assert_eq!(
            a,
            [
                (1, WcStatus::Success, WcOpcode::RdmaWrite),
                (2, WcStatus::Success, WcOpcode::RdmaRead),
                (3, WcStatus::Success, WcOpcode::Send)
            ],
            "{v:?}"
        );
        assert_eq!(read(&target, 4196, 200), msg, "{v:?}: the write landed through the window");
        assert_eq!(read(&p.ma, 1000, 64), msg[..64], "{v:?}: the read came back through it");
        assert_eq!(read(&p.mb, 0, 16), msg[..16], "{v:?}");
        // Invalidated: the rkey reaches nothing; the requester fails and flushes.
        p.a.post_send(&[SendWr::new(4, SendOp::Write(at(0)), &sg), SendWr::new(5, SendOp::Send, &sg)]).unwrap();
        let wcs = drain(&mut p.cq);
        let a: Vec<_> = of(&wcs, qa).iter().map(|w| (w.wr_id, w.status)).collect();
        assert_eq!(a, [(4, WcStatus::RemAccessErr), (5, WcStatus::WrFlushErr)], "{v:?}");
    }
}

/// What a window refuses: a range past the window's end, a request on another QP than the
/// one that bound it, rights the bind did not give.
#[test]
fn a_window_answers_within_its_range_rights_and_qp() {
    for v in VENDORS {
        let dev = ModelDevice::new(v);
        let mut cq = dev.create_cq(64).unwrap();
        let qps: Vec<_> =
            (0..4).map(|_| dev.create_qp(QpType::Rc, &cq, &cq, QpCaps::default(), None).unwrap()).collect();
        for pair in qps.chunks(2) {
            pair[0].connect(&pair[1].endpoint()).unwrap();
            pair[1].connect(&pair[0].endpoint()).unwrap();
        }
        let target = dev.reg_mr(4096, Access::ALL.union(Access::MW_BIND)).unwrap();
        let src = dev.reg_mr(4096, Access::ALL).unwrap();
        let mw = dev.alloc_mw();
        // QP 1 binds it write-only over 256 bytes.
        qps[1].post_send(&[SendWr::new(1, bind(&dev, &mw, &target, 0, 256, Access::REMOTE_WRITE), &[])]).unwrap();
        let key = dev.mw_rkey(&mw).unwrap();
        assert_eq!(drain(&mut cq).iter().map(|w| (w.wr_id, w.opcode)).collect::<Vec<_>>(), [(1, WcOpcode::BindMw)]);
        let sg = [src.slice(0, 8).unwrap()];
        let at = |off| RemoteAddr { addr: target.addr() + off, rkey: key };
        // QP 2 writes to QP 3, which did not bind it: refused.
        qps[2].post_send(&[SendWr::new(2, SendOp::Write(at(0)), &sg)]).unwrap();
        // QP 0 writes to QP 1 past the end; another QP 0 (fresh pair) reads without the right.
        qps[0].post_send(&[SendWr::new(3, SendOp::Write(at(250)), &sg)]).unwrap();
        let wcs = drain(&mut cq);
        for (qp, wr_id) in [(&qps[2], 2), (&qps[0], 3)] {
            let got: Vec<_> = of(&wcs, qp.qpn()).iter().map(|w| (w.wr_id, w.status)).collect();
            assert_eq!(got, [(wr_id, WcStatus::RemAccessErr)], "{v:?}");
        }
        let mut p = rc_pair(v);
        let target = p.dev.reg_mr(4096, Access::ALL.union(Access::MW_BIND)).unwrap();
        let mw = p.dev.alloc_mw();
        p.b.post_send(&[SendWr::new(1, bind(&p.dev, &mw, &target, 0, 256, Access::REMOTE_WRITE), &[])]).unwrap();
        let key = p.dev.mw_rkey(&mw).unwrap();
        let rd = [p.ma.slice(0, 8).unwrap()];
        p.a.post_send(&[SendWr::new(2, SendOp::Read(RemoteAddr { addr: target.addr(), rkey: key }), &rd)]).unwrap();
        let got: Vec<_> = of(&drain(&mut p.cq), p.a.qpn()).iter().map(|w| (w.wr_id, w.status)).collect();
        assert_eq!(got, [(2, WcStatus::RemAccessErr)], "{v:?}: no REMOTE_READ through it");
    }
}

/// Binds the device refuses complete with `IBV_WC_MW_BIND_ERR` (mlx5: the MW_BIND_ERR
/// syndrome; irdma: the MW_BIND_ERR flush code), and the QP goes to error: a range outside
/// the region, a region without `MW_BIND`, a window already bound (type 2 must be free).
#[test]
fn bad_binds_complete_with_mw_bind_err() {
    for v in VENDORS {
        for case in ["outside", "no MW_BIND", "bound"] {
            let mut p = rc_pair(v);
            let good = p.dev.reg_mr(4096, Access::ALL.union(Access::MW_BIND)).unwrap();
            let mw = p.dev.alloc_mw();
            let op = match case {
                "outside" => bind(&p.dev, &mw, &good, 4000, 200, RW),
                "no MW_BIND" => bind(&p.dev, &mw, &p.mb, 0, 64, RW),
                _ => {
                    p.b.post_send(&[SendWr::new(9, bind(&p.dev, &mw, &good, 0, 64, RW), &[])]).unwrap();
                    bind(&p.dev, &mw, &good, 0, 64, RW)
                }
            };
            let sg = [p.mb.slice(0, 8).unwrap()];
            p.b.post_send(&[SendWr::new(1, op, &[]), SendWr::new(2, SendOp::Send, &sg)]).unwrap();
            let got: Vec<_> =
                of(&drain(&mut p.cq), p.b.qpn()).iter().map(|w| (w.wr_id, w.status, w.vendor_err)).collect();
            let (first, flush) = match v {
                ModelVendor::Mlx5 => (0x88, 0xf9),
                ModelVendor::Irdma => (0x1_0009, 0x1_0001),
            };
            let mut want = vec![(1, WcStatus::MwBindErr, first), (2, WcStatus::WrFlushErr, flush)];
            if case == "bound" {
                want.insert(0, (9, WcStatus::Success, 0));
            }
            assert_eq!(got, want, "{v:?} {case}");
            assert_eq!(p.b.state(), QpState::Error, "{v:?} {case}");
        }
    }
}

/// A SEND_WITH_INV naming a key that is no bound window (here a region's rkey, which a
/// receiver never invalidates) is IB's class J error: the receive completes with
/// `REM_INV_REQ_ERR` and the responder goes to error; the requester gets
/// `REM_INV_REQ_ERR` too (inferred from the IB spec's NAK).
#[test]
fn invalidating_a_key_that_is_no_window_fails_both_sides() {
    for v in VENDORS {
        let mut p = rc_pair(v);
        let rsg = [p.mb.slice(0, 64).unwrap()];
        p.b.post_recv(&[RecvWr { wr_id: 20, sg_list: &rsg }]).unwrap();
        let sg = [p.ma.slice(0, 8).unwrap()];
        p.a.post_send(&[SendWr::new(1, SendOp::SendWithInv(p.mb.rkey()), &sg)]).unwrap();
        let wcs = drain(&mut p.cq);
        let a: Vec<_> = of(&wcs, p.a.qpn()).iter().map(|w| (w.wr_id, w.status)).collect();
        let b: Vec<_> = of(&wcs, p.b.qpn()).iter().map(|w| (w.wr_id, w.status)).collect();
        assert_eq!(a, [(1, WcStatus::RemInvReqErr)], "{v:?}");
        assert_eq!(b, [(20, WcStatus::RemInvReqErr)], "{v:?}");
        assert_eq!((p.a.state(), p.b.state()), (QpState::Error, QpState::Error), "{v:?}");
    }
}

/// Binds and SEND_WITH_INV are RC work: a UD QP refuses them at post with EINVAL.
#[test]
fn a_ud_qp_refuses_binds_and_send_with_inv() {
    for v in VENDORS {
        let dev = ModelDevice::new(v);
        let cq = dev.create_cq(16).unwrap();
        let ud = dev.create_qp(QpType::Ud, &cq, &cq, QpCaps::default(), None).unwrap();
        ud.connect(&ud.endpoint()).unwrap();
        let mr = dev.reg_mr(64, Access::ALL.union(Access::MW_BIND)).unwrap();
        let mw = dev.alloc_mw();
        let dest = UdDest { qpn: ud.qpn(), qkey: dvcq::verbs::DEFAULT_QKEY, endpoint: ud.endpoint() };
        for op in [bind(&dev, &mw, &mr, 0, 8, RW), SendOp::SendWithInv(mw.rkey())] {
            let e = ud.post_send(&[SendWr::new(1, op, &[]).to(dest)]).unwrap_err();
            assert_eq!((e.index, e.kind, e.errno), (0, PostErrorKind::BadOpcode, 22), "{v:?} {op:?}");
        }
    }
}

#[test]
fn error_completions_carry_each_vendors_syndrome() {
    for v in VENDORS {
        let mut p = rc_pair(v);
        let sg = [p.ma.slice(0, 8).unwrap()];
        let bad = RemoteAddr { addr: p.mb.addr(), rkey: 0 };
        let wrs = [
            SendWr::new(1, SendOp::Write(bad), &sg),
            SendWr::new(2, SendOp::Send, &sg),
            SendWr::new(3, SendOp::Send, &sg),
        ];
        p.a.post_send(&wrs).unwrap();
        let got: Vec<_> = of(&drain(&mut p.cq), p.a.qpn()).iter().map(|w| (w.status, w.vendor_err)).collect();
        let want = match v {
            // mlx5: each error CQE's vendor syndrome (the model's values).
            ModelVendor::Mlx5 => {
                [(WcStatus::RemAccessErr, 0x88), (WcStatus::WrFlushErr, 0xf9), (WcStatus::WrFlushErr, 0xf9)]
            }
            // irdma: (major << 16) | minor; one flush CQE whose first completion keeps the
            // specific code, the rest read FLUSH_GENERAL_ERR (rdma-core rewrites the parked CQE).
            ModelVendor::Irdma => {
                [(WcStatus::RemAccessErr, 0x1_0003), (WcStatus::WrFlushErr, 0x1_0001), (WcStatus::WrFlushErr, 0x1_0001)]
            }
        };
        assert_eq!(got, want, "{v:?}");
        if v == ModelVendor::Irdma {
            // One flush CQE for A's whole SQ; B's RQ is empty and gets none.
            assert_eq!(p.cq.stats().cqes_written, 1);
        }
    }
}

#[test]
fn an_srq_on_qps_of_two_receive_cqs_completes_on_each() {
    let dev = ModelDevice::new(ModelVendor::Mlx5);
    let srq = dev.create_srq(16, 1).unwrap();
    let m = dev.reg_mr(4096, Access::ALL).unwrap();
    let rsg: Vec<_> = (0..6).map(|i| [m.slice(1024 + i * 64, 64).unwrap()]).collect();
    // Receives posted before any QP uses the SRQ reach every CQ that later takes them.
    let recvs: Vec<_> = rsg.iter().enumerate().map(|(i, sg)| RecvWr { wr_id: 500 + i as u64, sg_list: sg }).collect();
    srq.post_recv(&recvs[..3]).unwrap();
    let scq = dev.create_cq(16).unwrap();
    let (mut c1, mut c2) = (dev.create_cq(16).unwrap(), dev.create_cq(16).unwrap());
    let caps = QpCaps::default();
    let a = dev.create_qp(QpType::Rc, &scq, &scq, caps, None).unwrap();
    let b1 = dev.create_qp(QpType::Rc, &scq, &c1, caps, Some(&srq)).unwrap();
    let b2 = dev.create_qp(QpType::Rc, &scq, &c2, caps, Some(&srq)).unwrap();
    let a2 = dev.create_qp(QpType::Rc, &scq, &scq, caps, None).unwrap();
    for (x, y) in [(&a, &b1), (&a2, &b2)] {
        x.connect(&y.endpoint()).unwrap();
        y.connect(&x.endpoint()).unwrap();
    }
    srq.post_recv(&recvs[3..]).unwrap();
    let sg = [m.slice(0, 8).unwrap()];
    for i in 0..3 {
        a.post_send(&[SendWr::new(i, SendOp::Send, &sg)]).unwrap();
        a2.post_send(&[SendWr::new(10 + i, SendOp::Send, &sg)]).unwrap();
    }
    let ids = |cq: &mut ModelCq| drain(cq).iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>();
    let ok = |ids: &[u64]| ids.iter().map(|&i| (i, WcStatus::Success)).collect::<Vec<_>>();
    // Taken in the order posted, alternately by b1 and b2.
    assert_eq!(ids(&mut c1), ok(&[500, 502, 504]));
    assert_eq!(ids(&mut c2), ok(&[501, 503, 505]));
}

#[test]
fn a_cq_polled_on_another_thread_sees_every_completion() {
    for v in VENDORS {
        // A CQ larger than the send queue (irdma's holds 255 one-quantum WRs): it cannot
        // overrun however far the poller falls behind.
        let p = rc_pair_with(v, QpCaps { max_send_wr: 32, ..QpCaps::default() }, 1024);
        let Pair { dev: _dev, mut cq, a, b: _b, ma, mb } = p;
        let total = 2000u64;
        let poller = std::thread::spawn(move || {
            let mut next = 0;
            let mut wcs = [Completion::default(); 8];
            let start = std::time::Instant::now();
            while next < total && start.elapsed() < std::time::Duration::from_secs(60) {
                for w in cq.poll(&mut wcs) {
                    assert_eq!((w.wr_id, w.status), (next, WcStatus::Success));
                    next += 1;
                }
            }
            next
        });
        let sg = [ma.slice(0, 8).unwrap()];
        let mut i = 0;
        let start = std::time::Instant::now();
        while i < total && start.elapsed() < std::time::Duration::from_secs(60) {
            match a.post_send(&[SendWr::new(i, SendOp::Write(mb.remote().at(0)), &sg)]) {
                Ok(()) => i += 1,
                Err(e) => {
                    assert_eq!(e.kind, PostErrorKind::QueueFull, "{v:?}");
                    std::thread::yield_now();
                }
            }
        }
        assert_eq!(poller.join().unwrap(), total, "{v:?}");
    }
}

/// One step of a random workload on a connected pair.
#[derive(Debug, Clone)]
enum Op {
    Recv { to_b: bool },
    Send { from_a: bool, kind: u8, signaled: bool, len: u16 },
    Poll { batch: usize },
    ToError { a: bool },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => any::<bool>().prop_map(|to_b| Op::Recv { to_b }),
        5 => (any::<bool>(), 0u8..6, any::<bool>(), 0u16..96).prop_map(|(from_a, kind, signaled, len)| Op::Send { from_a, kind, signaled, len }),
        3 => (1usize..6).prop_map(|batch| Op::Poll { batch }),
        1 => any::<bool>().prop_map(|a| Op::ToError { a }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random posts, polls and errors never panic, and every wr_id comes back at most once;
    /// once both QPs are in error and the CQ is drained, every receive and every signaled
    /// send came back exactly once (an unsignaled send may come back only as a flush).
    #[test]
    fn random_work_never_loses_or_duplicates_a_wr_id(
        ops in proptest::collection::vec(op(), 1..60),
        mlx5 in any::<bool>(),
        use_srq in any::<bool>(),
    ) {
        let v = if mlx5 { ModelVendor::Mlx5 } else { ModelVendor::Irdma };
        let caps = QpCaps { max_send_wr: 6, max_recv_wr: 6, ..QpCaps::default() };
        let mut p = rc_pair_with(v, caps, 512);
        // On mlx5, B may take its receives from an SRQ of 8 WQEs instead. An SRQ's receives
        // outlive a QP in error (they stay for the SRQ's other QPs), so they need not come
        // back; any that does comes back once.
        let srq = (mlx5 && use_srq).then(|| p.dev.create_srq(7, 1).unwrap());
        if let Some(srq) = &srq {
            p.b = p.dev.create_qp(QpType::Rc, &p.cq, &p.cq, caps, Some(srq)).unwrap();
            let a = p.dev.create_qp(QpType::Rc, &p.cq, &p.cq, caps, None).unwrap();
            a.connect(&p.b.endpoint()).unwrap();
            p.b.connect(&a.endpoint()).unwrap();
            p.a = a;
        }
        let mut must: HashMap<u64, ()> = HashMap::new();
        let mut may: HashMap<u64, ()> = HashMap::new();
        let mut unsignaled: HashMap<u64, ()> = HashMap::new();
        let mut seen: HashMap<u64, WcStatus> = HashMap::new();
        let mut id = 0u64;
        let rsg_a = [p.ma.slice(4096, 64).unwrap()];
        let rsg_b = [p.mb.slice(4096, 64).unwrap()];
        let take = |wcs: &[Completion], seen: &mut HashMap<u64, WcStatus>| {
            for w in wcs {
                prop_assert!(w.fault().is_none(), "fault item {:?}", w);
                prop_assert!(seen.insert(w.wr_id, w.status).is_none(), "wr_id {} twice", w.wr_id);
            }
            Ok(())
        };
        for o in &ops {
            match *o {
                Op::Recv { to_b } => {
                    id += 1;
                    let wr = [RecvWr { wr_id: id, sg_list: if to_b { &rsg_b } else { &rsg_a } }];
                    match (&srq, to_b) {
                        (Some(srq), true) => {
                            if srq.post_recv(&wr).is_ok() {
                                may.insert(id, ());
                            }
                        }
                        _ => {
                            let q = if to_b { &p.b } else { &p.a };
                            if q.post_recv(&wr).is_ok() {
                                must.insert(id, ());
                            }
                        }
                    }
                }
                Op::Send { from_a, kind, signaled, len } => {
                    id += 1;
                    let (q, mr, peer) = if from_a { (&p.a, &p.ma, &p.mb) } else { (&p.b, &p.mb, &p.ma) };
                    let sg = [mr.slice(0, u32::from(len)).unwrap()];
                    let r = peer.remote().at(1024);
                    let op = match kind {
                        0 => SendOp::Send,
                        1 => SendOp::SendWithImm(id as u32),
                        2 => SendOp::Write(r),
                        3 => SendOp::WriteWithImm(r, 7),
                        4 => SendOp::Read(r),
                        _ => SendOp::Write(RemoteAddr { addr: r.addr, rkey: r.rkey ^ 1 }),
                    };
                    if q.post_send(&[SendWr::new(id, op, &sg).signaled(signaled)]).is_ok() {
                        if signaled {
                            must.insert(id, ());
                        } else {
                            may.insert(id, ());
                            unsignaled.insert(id, ());
                        }
                    }
                }
                Op::Poll { batch } => {
                    let wcs = drain_by(&mut p.cq, batch);
                    take(&wcs, &mut seen)?;
                }
                Op::ToError { a } => if a { p.a.to_error() } else { p.b.to_error() },
            }
        }
        p.a.to_error();
        p.b.to_error();
        let wcs = drain(&mut p.cq);
        take(&wcs, &mut seen)?;
        prop_assert!(p.cq.overrun().is_none());
        for k in must.keys() {
            prop_assert!(seen.contains_key(k), "wr_id {} never completed ({:?})", k, v);
        }
        for k in seen.keys() {
            prop_assert!(must.contains_key(k) || may.contains_key(k), "wr_id {} was never posted", k);
        }
        for k in unsignaled.keys() {
            if let Some(s) = seen.get(k) {
                prop_assert!(*s != WcStatus::Success, "unsignaled wr_id {} completed successfully", k);
            }
        }
    }
}
