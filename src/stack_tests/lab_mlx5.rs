//! The mlx5 direct backend on a real ConnectX (lab machines; elsewhere each case skips with
//! one line): a CQ and QPs rdma-core made, posted with rdma-core's `ibv_post_send` /
//! `ibv_post_recv`, polled through `Cq::attach` + `Cq::attach_qp` in direct mode; an
//! application's SRQ attached with its QP; and dvcq's own CQs (64- and 128-byte CQEs,
//! compressed where the device can), QPs and SRQ, polled directly; an attached CQ on the
//! application's channel, armed with dvcq's doorbell.

use super::lab::{attach_direct, drain, idle_polls_count_as_empty_polls, rc_pair, send_rounds};
use crate::cq::{BackendChoice, BackendKind, CqOptions};
use crate::verbs::{QpCaps, QpType, RecvWr, SendOp, SendWr};
use crate::Context;
use crate::QpInit;
use dvcq_provider::{Completion, WcStatus};

/// The first mlx5 device here, or `None` after printing why the case is skipped.
fn mlx5_device(case: &str) -> Option<String> {
    super::lab::device_of("mlx5", "mlx5 (ConnectX)", case)
}

#[test]
fn lab_an_rdma_core_cq_and_qps_poll_directly_and_posts_keep_finding_room() {
    let Some(name) = mlx5_device("lab_an_rdma_core_cq_and_qps_poll_directly") else {
        return;
    };
    let ctx = Context::open(&name).expect("open the device");
    // rdma-core's objects, made the way an application makes them (dvcq's own handles
    // only call ibv_create_cq / ibv_create_qp / ibv_post_*; the CQ's generic handle is
    // never polled).
    let verbs_cq = ctx.create_cq(CqOptions::new(32).backend(BackendChoice::Generic)).expect("ibv_create_cq");
    let pd = ctx.alloc_pd().expect("ibv_alloc_pd");
    let (mut a, mut b, mr) = rc_pair(&pd, &verbs_cq, None);
    // SAFETY: the CQ and QPs live until the end of the test, after `cq` is dropped (it is declared later), nothing else polls the CQ, and the test posts between polls.
    let mut cq = unsafe { attach_direct(&ctx, &verbs_cq, &[&a, &b]) };
    assert_eq!(cq.backend().kind, BackendKind::Mlx5, "{}", cq.backend().reason);
    // Five laps of the 8-deep queues.
    send_rounds(&mut cq, &mut a, &mr, 5, |wr_id, sg| {
        b.post_recv(&[RecvWr { wr_id, sg_list: sg }]).expect("ibv_post_recv")
    });
    idle_polls_count_as_empty_polls(&mut cq, &mut a, &mr);
}

#[test]
fn lab_dvcq_s_own_cq_and_qps_poll_directly() {
    let Some(name) = mlx5_device("lab_dvcq_s_own_cq_and_qps_poll_directly") else {
        return;
    };
    let ctx = Context::open(&name).expect("open the device");
    for size in [64, 128] {
        let mut cq =
            ctx.create_cq(CqOptions::new(32).cqe_size(size).backend(BackendChoice::Direct)).expect("create_cq");
        assert_eq!(cq.backend().kind, BackendKind::Mlx5, "{}", cq.backend().reason);
        let pd = ctx.alloc_pd().unwrap();
        let (mut a, mut b, mr) = rc_pair(&pd, &cq, None);
        send_rounds(&mut cq, &mut a, &mr, 5, |wr_id, sg| {
            b.post_recv(&[RecvWr { wr_id, sg_list: sg }]).expect("post_recv")
        });
        // A 16-byte receive lands in its buffer: scatter-to-CQE is off for dvcq's QPs, so
        // the data is not left inside the CQE.
        let data: Vec<u8> = (1..=16).collect();
        mr.write(8192, &data).unwrap();
        b.post_recv(&[RecvWr { wr_id: 0x77, sg_list: &[mr.slice(12288, 64).unwrap()] }]).unwrap();
        a.post_send(&[SendWr::new(0x78, SendOp::Send, &[mr.slice(8192, 16).unwrap()])]).unwrap();
        let got = drain(&mut cq, 2);
        assert!(got.iter().any(|c| (c.wr_id, c.byte_len, c.status) == (0x77, 16, WcStatus::Success)), "{got:?}");
        let mut landed = [0u8; 16];
        mr.read(12288, &mut landed).unwrap();
        assert_eq!(landed[..], data[..]);
        drop((a, b));
        assert!(cq.take_error().is_none());
    }
}

#[test]
fn lab_dvcq_s_own_srq_gives_its_wqes_back() {
    let Some(name) = mlx5_device("lab_dvcq_s_own_srq_gives_its_wqes_back") else {
        return;
    };
    let ctx = Context::open(&name).expect("open the device");
    let mut cq = ctx.create_cq(CqOptions::new(32).backend(BackendChoice::Direct)).expect("create_cq");
    let pd = ctx.alloc_pd().unwrap();
    let srq = pd.create_srq(8, 1).expect("create_srq");
    let (mut a, _b, mr) = rc_pair(&pd, &cq, Some(&srq));
    send_rounds(&mut cq, &mut a, &mr, 5, |wr_id, sg| {
        srq.post_recv(&[RecvWr { wr_id, sg_list: sg }]).expect("SRQ full")
    });
    assert!(cq.take_error().is_none());
}

#[test]
fn lab_an_application_s_srq_attaches_with_its_qp() {
    let Some(name) = mlx5_device("lab_an_application_s_srq_attaches_with_its_qp") else {
        return;
    };
    let ctx = Context::open(&name).expect("open the device");
    let verbs_cq = ctx.create_cq(CqOptions::new(32).backend(BackendChoice::Generic)).expect("create_cq");
    let pd = ctx.alloc_pd().unwrap();
    let srq = pd.create_srq(8, 1).expect("create_srq");
    let (mut a, b, mr) = rc_pair(&pd, &verbs_cq, Some(&srq));
    // SAFETY: the CQ, QPs and SRQ live until the end of the test, after `cq` is dropped (declared later); nothing else polls the CQ, and posts happen between polls.
    let mut cq = unsafe { attach_direct(&ctx, &verbs_cq, &[&a, &b]) };
    // SAFETY: as above; attached once already through its QP: refused as a duplicate.
    let again = unsafe { cq.attach_srq(srq.verbs_ptr().unwrap()) };
    assert!(again.is_err(), "{again:?}");
    send_rounds(&mut cq, &mut a, &mr, 5, |wr_id, sg| {
        srq.post_recv(&[RecvWr { wr_id, sg_list: sg }]).expect("SRQ full")
    });
}

#[test]
fn lab_a_compressed_cq_is_made_and_polled_or_refused_with_the_reason() {
    let Some(name) = mlx5_device("lab_a_compressed_cq_is_made_and_polled_or_refused_with_the_reason") else {
        return;
    };
    let ctx = Context::open(&name).expect("open the device");
    let opts = CqOptions::new(64).compressed(crate::mlx5::MiniFormat::Csum).ignoring_overrun();
    let mut cq = match ctx.create_cq(opts) {
        Ok(cq) => cq,
        Err(e) => {
            eprintln!("skip lab_a_compressed_cq: this device makes no compressed CQ: {e}");
            return;
        }
    };
    assert_eq!(cq.backend().kind, BackendKind::Mlx5, "a compressed CQ is direct or not made");
    let pd = ctx.alloc_pd().unwrap();
    let (mut a, mut b, mr) = rc_pair(&pd, &cq, None);
    send_rounds(&mut cq, &mut a, &mr, 5, |wr_id, sg| b.post_recv(&[RecvWr { wr_id, sg_list: sg }]).expect("post_recv"));
}

#[test]
fn lab_dvcq_devices_says_what_is_direct_on_the_connectx() {
    let Some(name) = mlx5_device("lab_dvcq_devices_says_what_is_direct_on_the_connectx") else {
        return;
    };
    let list = crate::device::list();
    let d = list.devices.iter().find(|d| d.name == name).expect("listed");
    assert_eq!(d.backend, "mlx5", "{}", d.reason);
    assert!(d.reason.starts_with("attached CQs (Cq::attach): "), "{}", d.reason);
    assert!(d.reason.contains("; dvcq's own CQs (Context::create_cq): mlx5: "), "{}", d.reason);
}

#[test]
fn lab_an_attached_cq_on_the_application_s_channel_arms_with_dvcq_s_doorbell() {
    let Some(name) = mlx5_device("lab_an_attached_cq_on_the_application_s_channel_arms") else {
        return;
    };
    use crate::ArmMode;
    use std::time::Duration;
    let ctx = Context::open(&name).expect("open the device");
    // The application's channel and CQ on it (made through dvcq's handles, which only call
    // ibv_create_comp_channel / ibv_create_cq; the generic handle is never polled or armed).
    let ch = ctx.create_channel().expect("ibv_create_comp_channel");
    let verbs_cq = ctx.create_cq_on(&ch, CqOptions::new(32).backend(BackendChoice::Generic)).expect("ibv_create_cq");
    let pd = ctx.alloc_pd().expect("ibv_alloc_pd");
    let (mut a, mut b, mr) = rc_pair(&pd, &verbs_cq, None);
    // SAFETY: the CQ and QPs live until the end of the test, after `cq` is dropped (it is declared later), nothing else polls or arms the CQ, and posts happen between polls.
    let mut cq = unsafe { attach_direct(&ctx, &verbs_cq, &[&a, &b]) };
    assert_eq!(cq.backend().kind, BackendKind::Mlx5, "{}", cq.backend().reason);
    cq.bind_channel(&ch).expect("bind the attached CQ to its channel");
    // Three rounds: each arm must carry the sequence number the last event advanced
    // (rdma-core's arm_sn), or the device ignores it and no event comes.
    for round in 0..3u64 {
        let sg = [mr.slice(4096, 256).unwrap()];
        b.post_recv(&[RecvWr { wr_id: 0x20 + round, sg_list: &sg }]).expect("ibv_post_recv");
        cq.arm(ArmMode::Next).expect("dvcq's arm doorbell");
        let sg = [mr.slice(0, 64).unwrap()];
        a.post_send(&[SendWr::new(0x10 + round, SendOp::Send, &sg)]).expect("ibv_post_send");
        let ev = ch.next_event(Some(Duration::from_secs(5))).expect("the channel").expect("an event within 5 s");
        assert_eq!(ev.cq, cq.id(), "round {round}");
        assert_eq!(drain(&mut cq, 2).len(), 2, "round {round}");
    }
    // And the race-free wait on it: nothing pending, so it arms and sleeps to the timeout.
    let mut out = [Completion::default(); 4];
    assert!(cq.wait(&mut out, Some(Duration::from_millis(50))).unwrap().is_empty());
}

#[test]
fn lab_an_srq_is_not_shared_between_a_direct_cq_and_rdma_core_s_poll() {
    let Some(name) = mlx5_device("lab_an_srq_is_not_shared_between_a_direct_cq_and_rdma_core_s_poll") else {
        return;
    };
    let ctx = Context::open(&name).expect("open the device");
    let direct = ctx.create_cq(CqOptions::new(32).backend(BackendChoice::Direct)).expect("create_cq");
    let generic = ctx.create_cq(CqOptions::new(32).backend(BackendChoice::Generic)).expect("create_cq");
    let pd = ctx.alloc_pd().unwrap();
    let srq = pd.create_srq(8, 1).expect("create_srq");
    let caps = QpCaps { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let on = |cq| QpInit { qp_type: QpType::Rc, send_cq: cq, recv_cq: cq, srq: Some(&srq), caps, sq_sig_all: false };
    let _first = pd.create_qp(&on(&direct)).expect("the direct CQ adopts the SRQ");
    let e = pd.create_qp(&on(&generic)).expect_err("rdma-core's poll would free its WQEs too");
    assert!(e.to_string().contains("its SRQ is polled by a direct CQ"), "{e}");
}
