//! The irdma attach on a real E810 (or X722 / GEN3; lab machines, elsewhere each case skips
//! with one line): a CQ and QPs rdma-core made, posted with rdma-core's `ibv_post_send` /
//! `ibv_post_recv`, polled through `Cq::attach` + `Cq::attach_qp` in direct mode.

use crate::context::QpInit;
use crate::cq::{BackendChoice, BackendKind, Cq, CqOptions, Poller};
use crate::sys::lab::drain;
use crate::verbs::{Access, QpCaps, QpType, RecvWr, SendOp, SendWr};
use crate::Context;
use core::ptr::NonNull;
use dvcq_provider::{WcOpcode, WcStatus};

/// The first irdma device here, or `None` after printing why the case is skipped.
fn irdma_device(case: &str) -> Option<String> {
    crate::sys::lab::device_of("irdma", "irdma (E810 / X722)", case)
}

#[test]
fn lab_an_rdma_core_irdma_cq_and_qps_poll_directly_and_posts_keep_finding_room() {
    let Some(name) = irdma_device("lab_an_rdma_core_irdma_cq_and_qps_poll_directly") else {
        return;
    };
    let ctx = Context::open(&name).expect("open the device");
    // rdma-core's objects, made the way an application makes them (dvcq's own handles
    // only call ibv_create_cq / ibv_create_qp / ibv_post_*; the CQ's generic handle is
    // never polled). A CQ of 32 is a ring of 66 slots on E810: not a power of two.
    let verbs_cq = ctx.create_cq(CqOptions::new(32).backend(BackendChoice::Generic)).expect("ibv_create_cq");
    let pd = ctx.alloc_pd().expect("ibv_alloc_pd");
    let caps = QpCaps { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let init =
        QpInit { qp_type: QpType::Rc, send_cq: &verbs_cq, recv_cq: &verbs_cq, srq: None, caps, sq_sig_all: false };
    let mut a = pd.create_qp(&init).expect("ibv_create_qp");
    let mut b = pd.create_qp(&init).expect("ibv_create_qp");
    let (ea, eb) = (a.endpoint().unwrap(), b.endpoint().unwrap());
    a.connect(&eb).unwrap();
    b.connect(&ea).unwrap();
    let mr = pd.reg_mr(1 << 16, Access::ALL).unwrap();
    let Poller::Generic(g) = &verbs_cq.poller else { panic!("asked for the generic backend") };
    let cq_ptr = NonNull::new(g.verbs_cq().as_ptr().cast()).unwrap();
    // SAFETY: the CQ and QPs live until the end of the test, after `cq` is dropped (it is
    // declared later), and nothing else polls the CQ.
    let mut cq = unsafe { Cq::attach(&ctx, cq_ptr, BackendChoice::Direct) }.expect("direct attach");
    assert_eq!(cq.backend().kind, BackendKind::Irdma, "{}", cq.backend().reason);
    eprintln!("{name}: {}", cq.backend().reason);
    for qp in [&a, &b] {
        // SAFETY: as above; the test posts on the polling thread only.
        unsafe { cq.attach_qp(qp.verbs_ptr().unwrap()) }.expect("attach_qp");
    }
    // Many laps of the queues and of the CQ ring: posts after the first lap work only if
    // the tails the direct poll wrote back freed the room rdma-core's post checks.
    for round in 0..64u64 {
        for i in 0..8u64 {
            let sg = [mr.slice(4096 + i * 256, 256).unwrap()];
            b.post_recv(&[RecvWr { wr_id: 0x2000 + round * 16 + i, sg_list: &sg }]).expect("ibv_post_recv");
        }
        for i in 0..8u64 {
            let sg = [mr.slice(i * 256, 200).unwrap()];
            a.post_send(&[SendWr::new(0x1000 + round * 16 + i, SendOp::Send, &sg)]).expect("ibv_post_send");
        }
        let got = drain(&mut cq, 16);
        assert_eq!(got.len(), 16, "round {round}: {got:?}");
        assert!(got.iter().all(|c| c.status == WcStatus::Success), "round {round}: {got:?}");
        let mut sends: Vec<u64> = got.iter().filter(|c| c.opcode == WcOpcode::Send).map(|c| c.wr_id).collect();
        let mut recvs: Vec<(u64, u32)> =
            got.iter().filter(|c| c.opcode == WcOpcode::Recv).map(|c| (c.wr_id, c.byte_len)).collect();
        sends.sort_unstable();
        recvs.sort_unstable();
        assert_eq!(sends, (0..8).map(|i| 0x1000 + round * 16 + i).collect::<Vec<_>>(), "round {round}");
        assert_eq!(recvs, (0..8).map(|i| (0x2000 + round * 16 + i, 200)).collect::<Vec<_>>(), "round {round}");
    }
}

#[test]
fn lab_an_irdma_cq_attached_with_auto_says_which_backend_and_why() {
    let Some(name) = irdma_device("lab_an_irdma_cq_attached_with_auto_says_which_backend_and_why") else {
        return;
    };
    let ctx = Context::open(&name).expect("open the device");
    let verbs_cq = ctx.create_cq(CqOptions::new(1).backend(BackendChoice::Generic)).expect("ibv_create_cq");
    let Poller::Generic(g) = &verbs_cq.poller else { panic!("asked for the generic backend") };
    let cq_ptr = NonNull::new(g.verbs_cq().as_ptr().cast()).unwrap();
    // SAFETY: the CQ outlives `cq`, and nothing else polls it.
    let cq = unsafe { Cq::attach(&ctx, cq_ptr, BackendChoice::Auto) }.expect("attach");
    // Either the direct backend, or the generic one with the check that refused it.
    match cq.backend().kind {
        BackendKind::Irdma => assert!(cq.backend().reason.contains("irdma provider allocated"), "{:?}", cq.backend()),
        BackendKind::Generic => {
            let why = &cq.backend().reason;
            assert!(why.starts_with("rdma-core's ibv_poll_cq: ") && why.contains("irdma"), "{:?}", cq.backend())
        }
        other => panic!("{other:?}: {:?}", cq.backend()),
    }
    eprintln!("{name}: {:?}: {}", cq.backend().kind, cq.backend().reason);
}

#[test]
fn lab_dvcq_devices_says_whether_an_irdma_device_attaches_directly_and_why() {
    let Some(name) = irdma_device("lab_dvcq_devices_says_whether_an_irdma_device_attaches_directly_and_why") else {
        return;
    };
    let info = crate::device::list().devices.into_iter().find(|d| d.name == name).expect("listed");
    match info.backend.as_str() {
        "irdma" => assert!(info.reason.contains("irdma provider allocated"), "{info:?}"),
        "generic" => assert!(info.reason.contains("irdma"), "the reason names what refused: {info:?}"),
        other => panic!("{name}: backend {other}: {info:?}"),
    }
    eprintln!("{name}: {} ({})", info.backend, info.reason);
}

#[test]
fn lab_dvcq_s_own_irdma_cq_and_qps_poll_directly() {
    let Some(name) = irdma_device("lab_dvcq_s_own_irdma_cq_and_qps_poll_directly") else {
        return;
    };
    let ctx = Context::open(&name).expect("open the device");
    // dvcq's own CQ and QPs: the CQ attached as an application's is, the QPs adopted as
    // they are made, posts and polls ordered by dvcq.
    let mut cq = ctx.create_cq(CqOptions::new(32).backend(BackendChoice::Direct)).expect("create_cq");
    assert_eq!(cq.backend().kind, BackendKind::Irdma, "{}", cq.backend().reason);
    eprintln!("{name}: {}", cq.backend().reason);
    let pd = ctx.alloc_pd().expect("ibv_alloc_pd");
    let caps = QpCaps { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let init = QpInit { qp_type: QpType::Rc, send_cq: &cq, recv_cq: &cq, srq: None, caps, sq_sig_all: false };
    let mut a = pd.create_qp(&init).expect("create_qp adopts the QP");
    let mut b = pd.create_qp(&init).expect("create_qp adopts the QP");
    let (ea, eb) = (a.endpoint().unwrap(), b.endpoint().unwrap());
    a.connect(&eb).unwrap();
    b.connect(&ea).unwrap();
    let mr = pd.reg_mr(1 << 16, Access::ALL).unwrap();
    for round in 0..64u64 {
        for i in 0..8u64 {
            let sg = [mr.slice(4096 + i * 256, 256).unwrap()];
            b.post_recv(&[RecvWr { wr_id: 0x2000 + round * 16 + i, sg_list: &sg }]).expect("post_recv");
        }
        for i in 0..8u64 {
            let sg = [mr.slice(i * 256, 200).unwrap()];
            a.post_send(&[SendWr::new(0x1000 + round * 16 + i, SendOp::Send, &sg)]).expect("post_send");
        }
        let got = drain(&mut cq, 16);
        assert_eq!(got.len(), 16, "round {round}: {got:?}");
        assert!(got.iter().all(|c| c.status == WcStatus::Success), "round {round}: {got:?}");
        let ids = |op: WcOpcode| {
            let mut v: Vec<u64> = got.iter().filter(|c| c.opcode == op).map(|c| c.wr_id).collect();
            v.sort_unstable();
            v
        };
        assert_eq!(ids(WcOpcode::Send), (0..8).map(|i| 0x1000 + round * 16 + i).collect::<Vec<_>>());
        assert_eq!(ids(WcOpcode::Recv), (0..8).map(|i| 0x2000 + round * 16 + i).collect::<Vec<_>>());
    }
    drop((a, b));
    assert_eq!(cq.poll(&mut [dvcq_provider::Completion::default(); 4]), 0);
    assert!(cq.take_error().is_none());
}
