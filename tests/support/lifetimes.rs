//! The verbs lifetimes held by ownership, as one workload any device runs: a context, PD,
//! CQ and QP dropped in any order by the application, and what is still held keeps working
//! (every object holds what it depends on, so the device objects are destroyed in the order
//! verbs requires). Included with `#[path]` by the model test and the real-device test.

use dvcq::verbs::{Access, QpType, SendOp, SendWr};
use dvcq::{Completion, Context, CqOptions, QpInit};

/// One RC loopback WRITE after dropping `drop_first` (`nothing`, `context`, `pd`, or
/// `context and pd`), then the CQ before the QP that completes on it.
pub fn one_write(device: &str, drop_first: &str) {
    let ctx = Context::open(device).unwrap();
    let mut cq = ctx.create_cq(CqOptions::new(16)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.reg_mr(4096, Access::ALL).unwrap();
    let mut qp = pd.create_qp(&QpInit::new(QpType::Rc, &cq)).unwrap();
    let me = qp.endpoint().unwrap();
    qp.connect(&me).unwrap();
    match drop_first {
        "context" => drop(ctx),
        "pd" => drop(pd),
        "context and pd" => {
            drop(ctx);
            drop(pd);
        }
        _ => {}
    }
    let sg = [mr.slice(0, 8).unwrap()];
    qp.post_send(&[SendWr::new(7, SendOp::Write(mr.remote().at(64)), &sg)]).unwrap();
    let mut wcs = [Completion::default(); 4];
    // A real device completes asynchronously (rxe in an emulated VM slowly): poll for a while.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let n = std::iter::repeat_with(|| cq.poll(&mut wcs))
        .find(|&n| n > 0 || std::time::Instant::now() > deadline)
        .unwrap_or(0);
    assert_eq!((n, wcs[0].wr_id, wcs[0].is_ok()), (1, 7, true), "{device}, {drop_first} dropped first");
    // The CQ may go before the QP that completes on it: the QP keeps it alive.
    drop(cq);
    qp.post_send(&[SendWr::new(8, SendOp::Write(mr.remote().at(64)), &sg)]).unwrap();
    drop(qp);
    drop(mr);
}
