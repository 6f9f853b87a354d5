//! The irdma attach on a real E810 (or X722 / GEN3; lab machines, elsewhere each case skips
//! with one line): a CQ and QPs rdma-core made, posted with rdma-core's `ibv_post_send` /
//! `ibv_post_recv`, polled through `Cq::attach` + `Cq::attach_qp` in direct mode.

use super::lab::{attach_direct, idle_polls_count_as_empty_polls, rc_pair, send_rounds};
use crate::cq::{BackendChoice, BackendKind, Cq, CqOptions, Poller};
use crate::verbs::RecvWr;
use crate::Context;
use core::ptr::NonNull;

/// The first irdma device here, or `None` after printing why the case is skipped.
fn irdma_device(case: &str) -> Option<String> {
    super::lab::device_of("irdma", "irdma (E810 / X722)", case)
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
    let (mut a, mut b, mr) = rc_pair(&pd, &verbs_cq, None);
    // SAFETY: the CQ and QPs live until the end of the test, after `cq` is dropped (it is declared later), nothing else polls the CQ, and the test posts between polls.
    let mut cq = unsafe { attach_direct(&ctx, &verbs_cq, &[&a, &b]) };
    assert_eq!(cq.backend().kind, BackendKind::Irdma, "{}", cq.backend().reason);
    eprintln!("{name}: {}", cq.backend().reason);
    // Many laps of the queues and of the CQ ring.
    send_rounds(&mut cq, &mut a, &mr, 64, |wr_id, sg| {
        b.post_recv(&[RecvWr { wr_id, sg_list: sg }]).expect("ibv_post_recv")
    });
    idle_polls_count_as_empty_polls(&mut cq, &mut a, &mr);
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
    let (mut a, mut b, mr) = rc_pair(&pd, &cq, None);
    send_rounds(&mut cq, &mut a, &mr, 64, |wr_id, sg| {
        b.post_recv(&[RecvWr { wr_id, sg_list: sg }]).expect("post_recv")
    });
    drop((a, b));
    assert_eq!(cq.poll_count(&mut [dvcq_provider::Completion::default(); 4]), 0);
    assert!(cq.take_error().is_none());
}
