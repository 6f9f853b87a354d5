//! XRC on the models: domains, XRC SRQs, target and initiator QPs, and the refusals.

use dvcq::verbs::{Access, QpCaps, QpType, RecvWr, SendOp, SendWr};
use dvcq::{Completion, Context, Cq, CqOptions, Error, Qp, QpInit, WcFlags, WcOpcode, WcStatus};

fn poll(cq: &mut Cq, n: usize) -> Vec<Completion> {
    let mut out = Vec::new();
    let mut wcs = [Completion::default(); 16];
    for _ in 0..1000 {
        let k = cq.poll_count(&mut wcs);
        out.extend_from_slice(&wcs[..k]);
        if out.len() >= n {
            break;
        }
    }
    out
}

const CAPS: QpCaps = QpCaps { max_send_wr: 16, max_recv_wr: 0, max_send_sge: 1, max_recv_sge: 0, max_inline_data: 0 };

/// An initiator on `cq` connected to a target on `xrcd`.
fn pair(pd: &dvcq::Pd, xrcd: &dvcq::Xrcd, cq: &Cq) -> (Qp, Qp) {
    let init = QpInit { caps: CAPS, ..QpInit::new(QpType::XrcSend, cq) };
    let mut ini = pd.create_qp(&init).unwrap();
    let mut tgt = xrcd.create_target_qp().unwrap();
    assert_eq!((ini.qp_type(), tgt.qp_type()), (QpType::XrcSend, QpType::XrcRecv));
    ini.connect(&tgt.endpoint().unwrap()).unwrap();
    tgt.connect(&ini.endpoint().unwrap()).unwrap();
    (ini, tgt)
}

#[test]
fn an_initiator_sends_into_each_xrc_srq_of_its_targets_domain() {
    let ctx = Context::open("model-mlx5").unwrap();
    let mut send_cq = ctx.create_cq(CqOptions::new(16)).unwrap();
    let mut recv_cq = ctx.create_cq(CqOptions::new(16)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let xrcd = ctx.open_xrcd().unwrap();
    let a = pd.create_xrc_srq(&xrcd, &recv_cq, 8, 1).unwrap();
    let b = pd.create_xrc_srq(&xrcd, &recv_cq, 8, 1).unwrap();
    let (na, nb) = (a.xrc_srqn().unwrap(), b.xrc_srqn().unwrap());
    assert_ne!(na, nb);
    assert_eq!(pd.create_srq(4, 1).unwrap().xrc_srqn(), None, "a basic SRQ has no XRC number");
    let (mut ini, tgt) = pair(&pd, &xrcd, &send_cq);
    let mr = pd.reg_mr(8192, Access::ALL).unwrap();
    mr.write(0, b"to srq a").unwrap();
    mr.write(64, b"to srq b").unwrap();
    // A send before any receive waits (receiver not ready) until one is posted.
    ini.post_send(&[SendWr::new(1, SendOp::SendWithImm(0x1234), &[mr.slice(64, 8).unwrap()]).to_srq(nb)]).unwrap();
    assert!(poll(&mut send_cq, 1).is_empty());
    b.post_recv(&[RecvWr { wr_id: 20, sg_list: &[mr.slice(4096, 64).unwrap()] }]).unwrap();
    a.post_recv(&[RecvWr { wr_id: 10, sg_list: &[mr.slice(2048, 64).unwrap()] }]).unwrap();
    ini.post_send(&[SendWr::new(2, SendOp::Send, &[mr.slice(0, 8).unwrap()]).to_srq(na)]).unwrap();

    let sends = poll(&mut send_cq, 2);
    assert_eq!(
        sends.iter().map(|c| (c.wr_id, c.opcode, c.status)).collect::<Vec<_>>(),
        [(1, WcOpcode::Send, WcStatus::Success), (2, WcOpcode::Send, WcStatus::Success)]
    );
    assert!(sends.iter().all(|c| c.qp_num == ini.qpn()));
    let recvs = poll(&mut recv_cq, 2);
    assert_eq!(recvs.len(), 2, "{recvs:?}");
    // Each receive names the target QP (sop_drop_qpn) and the initiator as its source.
    for (c, (wr_id, imm)) in recvs.iter().zip([(20, Some(0x1234u32)), (10, None)]) {
        assert_eq!((c.wr_id, c.opcode, c.status, c.byte_len), (wr_id, WcOpcode::Recv, WcStatus::Success, 8));
        assert_eq!((c.qp_num, c.src_qp), (tgt.qpn(), ini.qpn()));
        assert_eq!(c.wc_flags.contains(WcFlags::WITH_IMM), imm.is_some());
        if let Some(i) = imm {
            assert_eq!(c.imm_data, i.to_be());
        }
    }
    let mut got = [0u8; 8];
    mr.read(4096, &mut got).unwrap();
    assert_eq!(&got, b"to srq b");
    mr.read(2048, &mut got).unwrap();
    assert_eq!(&got, b"to srq a");
    // The receives went back to the SRQs' free lists: each takes its depth again.
    for i in 0..8 {
        a.post_recv(&[RecvWr { wr_id: 100 + i, sg_list: &[mr.slice(0, 8).unwrap()] }]).unwrap();
    }
}

#[test]
fn an_srq_number_outside_the_targets_domain_is_an_invalid_request() {
    let ctx = Context::open("model-mlx5").unwrap();
    let mut cq = ctx.create_cq(CqOptions::new(16)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let (mine, other) = (ctx.open_xrcd().unwrap(), ctx.open_xrcd().unwrap());
    let theirs = pd.create_xrc_srq(&other, &cq, 4, 1).unwrap();
    let mr = pd.reg_mr(4096, Access::ALL).unwrap();
    theirs.post_recv(&[RecvWr { wr_id: 9, sg_list: &[mr.slice(1024, 64).unwrap()] }]).unwrap();
    let (mut ini, _tgt) = pair(&pd, &mine, &cq);
    let sg = [mr.slice(0, 8).unwrap()];
    // Another domain's SRQ, then a number no SRQ has.
    ini.post_send(&[SendWr::new(1, SendOp::Send, &sg).to_srq(theirs.xrc_srqn().unwrap())]).unwrap();
    ini.post_send(&[SendWr::new(2, SendOp::Send, &sg).to_srq(0xabcd)]).unwrap();
    let c = poll(&mut cq, 2);
    assert_eq!(
        c.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(),
        [(1, WcStatus::RemInvReqErr), (2, WcStatus::WrFlushErr)]
    );
    assert!(c.iter().all(|c| c.qp_num == ini.qpn()), "nothing completes for the target or the other SRQ");
}

#[test]
fn xrc_misuse_is_refused_with_a_reason() {
    let ctx = Context::open("model-mlx5").unwrap();
    let cq = ctx.create_cq(CqOptions::new(16)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let xrcd = ctx.open_xrcd().unwrap();
    let srq = pd.create_xrc_srq(&xrcd, &cq, 4, 1).unwrap();
    let xrc_err = |e: Error, want: &str| {
        assert!(matches!(e, Error::Xrc { .. }), "{e}");
        assert!(e.to_string().contains(want), "{e}");
    };
    xrc_err(pd.create_qp(&QpInit::new(QpType::XrcRecv, &cq)).unwrap_err(), "Xrcd::create_target_qp");
    let with_srq = QpInit { srq: Some(&srq), caps: CAPS, ..QpInit::new(QpType::XrcSend, &cq) };
    xrc_err(pd.create_qp(&with_srq).unwrap_err(), "no receive side");
    let (mut ini, mut tgt) = pair(&pd, &xrcd, &cq);
    let mr = pd.reg_mr(4096, Access::ALL).unwrap();
    let sg = [mr.slice(0, 8).unwrap()];
    xrc_err(ini.post_send(&[SendWr::new(1, SendOp::Send, &sg)]).unwrap_err(), "names no XRC SRQ");
    xrc_err(tgt.post_send(&[SendWr::new(1, SendOp::Send, &sg).to_srq(1)]).unwrap_err(), "no send queue");
    let rwr = [RecvWr { wr_id: 1, sg_list: &sg }];
    xrc_err(ini.post_recv(&rwr).unwrap_err(), "no receive queue");
    xrc_err(tgt.post_recv(&rwr).unwrap_err(), "no receive queue");
    let mut rc = pd.create_qp(&QpInit::new(QpType::Rc, &cq)).unwrap();
    let me = rc.endpoint().unwrap();
    rc.connect(&me).unwrap();
    xrc_err(rc.post_send(&[SendWr::new(1, SendOp::Send, &sg).to_srq(5)]).unwrap_err(), "not an XRC initiator");
    // An initiator pairs with a target only.
    let mut lone = pd.create_qp(&QpInit { caps: CAPS, ..QpInit::new(QpType::XrcSend, &cq) }).unwrap();
    assert!(lone.connect(&me).is_err(), "an initiator connected to an RC QP");
}

#[test]
fn the_e810_model_has_no_xrc() {
    let ctx = Context::open("model-e810").unwrap();
    let e = ctx.open_xrcd().unwrap_err();
    assert!(e.to_string().contains("irdma has no XRC"), "{e}");
    let cq = ctx.create_cq(CqOptions::new(16)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let e = pd.create_qp(&QpInit { caps: CAPS, ..QpInit::new(QpType::XrcSend, &cq) }).unwrap_err();
    assert!(e.to_string().contains("irdma has no XRC"), "{e}");
}
