//! RESIZE_CQ on the emulated ConnectX-6 Dx under rdma-core's real libmlx5: `ibv_resize_cq`
//! gives libmlx5 a new ring, the emulated device writes the RESIZE CQE into the old one
//! (libmlx5's `mlx5_cq_resize_copy_cqes` copies the CQEs waiting up to it) and goes on in
//! the new ring, so every completion comes back once and in order across grows and
//! shrinks, and a shrink below what waits is refused.

use crate::emu::in_emulated_child;
use crate::loopback;
use dvcq::verbs::{SendOp, SendWr};
use dvcq::{BackendChoice, Completion, Context, CqOptions};

#[test]
fn completions_waiting_in_a_cq_cross_its_resizes_once_and_in_order() {
    if !in_emulated_child(
        module_path!(),
        "completions_waiting_in_a_cq_cross_its_resizes_once_and_in_order",
        "emu-resize",
    ) {
        return;
    }
    let ctx = Context::open("mlx5_0").unwrap();
    // rdma-core's poll: dvcq refuses to resize a mlx5 CQ it polls directly.
    let mut cq = ctx.create_cq(CqOptions { backend: BackendChoice::Generic, ..CqOptions::new(8) }).unwrap();
    let (_pd, mr, mut qp) = loopback::rc_to_itself(&ctx, &cq);
    let sg = [mr.slice(0, 8).unwrap()];
    let mut next = 0u64;
    let mut post = |qp: &mut dvcq::Qp, n: u64| {
        for _ in 0..n {
            qp.post_send(&[SendWr::new(next, SendOp::Write(mr.remote().at(64)), &sg)]).unwrap();
            next += 1;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut got = Vec::new();
    let mut take = |cq: &mut dvcq::Cq, n: usize| {
        let want = got.len() + n;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut wcs = [Completion::default(); 1];
        while got.len() < want && std::time::Instant::now() < deadline {
            let k = cq.poll_count(&mut wcs);
            got.extend(wcs[..k].iter().map(|c| (c.wr_id, c.status)));
        }
        assert_eq!(got.len(), want, "completions within 10 s: {got:?}");
    };
    // 6 waiting in a ring of 8 (2 polled first), grown to 64.
    post(&mut qp, 8);
    take(&mut cq, 2);
    assert!(cq.resize(60).unwrap() >= 60);
    // 6 + 20 waiting, shrunk to 32; a shrink to 4 below them is refused.
    post(&mut qp, 20);
    assert!(cq.resize(30).unwrap() >= 30);
    let depth = cq.depth();
    assert!(cq.resize(4).is_err(), "a shrink below the 26 completions waiting");
    assert_eq!(cq.depth(), depth);
    take(&mut cq, 26);
    // Traffic after, wrapping the new ring.
    for _ in 0..40 {
        post(&mut qp, 1);
        take(&mut cq, 1);
    }
    let ids: Vec<u64> = got.iter().map(|g| g.0).collect();
    assert_eq!(ids, (0..next).collect::<Vec<_>>(), "once each, in order");
    assert!(got.iter().all(|g| g.1 == dvcq::WcStatus::Success), "{got:?}");
    println!("emu-resize: done");
}

#[test]
fn validate_cq_resize_passes_under_rdma_cores_poll() {
    if !in_emulated_child(module_path!(), "validate_cq_resize_passes_under_rdma_cores_poll", "emu-resize") {
        return;
    }
    let ctx = Context::open("mlx5_0").unwrap();
    crate::assert_passes(&ctx, "cq_resize", BackendChoice::Generic);
    println!("emu-resize: done");
}
