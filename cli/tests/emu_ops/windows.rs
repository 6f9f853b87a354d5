//! Memory windows on the emulated ConnectX-6 Dx under rdma-core's real libmlx5: ALLOC_MW,
//! the UMR WQE libmlx5 posts for a type-2 bind, rkey checks through the window (its range,
//! its QP), SEND with invalidate freeing it, and a bind of a window already bound refused
//! with `IBV_WC_MW_BIND_ERR`.

use crate::emu::in_emulated_child;
use dvcq::verbs::{Access, QpType, RemoteAddr, SendOp, SendWr};
use dvcq::{BackendChoice, Completion, Context, CqOptions, QpInit, WcOpcode, WcStatus};

fn one(cq: &mut dvcq::Cq) -> Completion {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut wcs = [Completion::default(); 1];
    while std::time::Instant::now() < deadline {
        if cq.poll_count(&mut wcs) == 1 {
            return wcs[0];
        }
    }
    panic!("no completion within 10 s");
}

#[test]
fn validate_rc_send_inv_passes_through_both_pollers() {
    if !in_emulated_child(module_path!(), "validate_rc_send_inv_passes_through_both_pollers", "emu-windows") {
        return;
    }
    let ctx = Context::open("mlx5_0").unwrap();
    for choice in [BackendChoice::Generic, BackendChoice::Auto] {
        crate::assert_passes(&ctx, "rc_send_inv", choice);
    }
    println!("emu-windows: done");
}

#[test]
fn a_type2_window_reaches_its_range_from_its_qp_only_and_binds_once() {
    if !in_emulated_child(
        module_path!(),
        "a_type2_window_reaches_its_range_from_its_qp_only_and_binds_once",
        "emu-windows",
    ) {
        return;
    }
    let ctx = Context::open("mlx5_0").unwrap();
    let mut cq = ctx.create_cq(CqOptions { backend: BackendChoice::Generic, ..CqOptions::new(32) }).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let local = pd.reg_mr(4096, Access::ALL).unwrap();
    let target = pd.reg_mr(8192, Access::ALL.union(Access::MW_BIND)).unwrap();
    let mut qps: Vec<dvcq::Qp> = (0..4).map(|_| pd.create_qp(&QpInit::new(QpType::Rc, &cq)).unwrap()).collect();
    // Pairs 0 -> 1 and 2 -> 3.
    for (a, b) in [(0, 1), (2, 3)] {
        let (ea, eb) = (qps[a].endpoint().unwrap(), qps[b].endpoint().unwrap());
        qps[a].connect(&eb).unwrap();
        qps[b].connect(&ea).unwrap();
    }
    let mut mw = pd.alloc_mw().unwrap();
    const AT: u64 = 4096;
    let rkey = qps[1].bind_mw(1, &mut mw, &target, AT, 1024, Access::REMOTE_READ.union(Access::REMOTE_WRITE)).unwrap();
    let c = one(&mut cq);
    assert_eq!((c.wr_id, c.status, c.opcode), (1, WcStatus::Success, WcOpcode::BindMw));
    let win = |off: u64| RemoteAddr { addr: target.addr() + AT + off, rkey };
    local.write(0, b"through!").unwrap();
    let sg = [local.slice(0, 8).unwrap()];
    // In range, on the window's QP: lands in the region under it.
    qps[0].post_send(&[SendWr::new(2, SendOp::Write(win(1000)), &sg)]).unwrap();
    let c = one(&mut cq);
    assert_eq!((c.wr_id, c.status), (2, WcStatus::Success));
    let mut back = [0u8; 8];
    target.read(AT + 1000, &mut back).unwrap();
    assert_eq!(&back, b"through!");
    // Past its end (1020 + 8 > 1024).
    qps[0].post_send(&[SendWr::new(3, SendOp::Write(win(1020)), &sg)]).unwrap();
    let c = one(&mut cq);
    assert_eq!((c.wr_id, c.status), (3, WcStatus::RemAccessErr));
    // Through another QP than the one it is bound to.
    qps[2].post_send(&[SendWr::new(4, SendOp::Write(win(0)), &sg)]).unwrap();
    let c = one(&mut cq);
    assert_eq!((c.wr_id, c.status), (4, WcStatus::RemAccessErr));
    // A second bind of a bound type-2 window.
    let mut again = mw;
    let _ = qps[3].bind_mw(5, &mut again, &target, 0, 64, Access::REMOTE_READ).unwrap();
    let c = one(&mut cq);
    assert_eq!((c.wr_id, c.status), (5, WcStatus::MwBindErr));
    println!("emu-windows: done");
}
