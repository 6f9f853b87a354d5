//! The conformance workloads on a real RDMA device, named by `DVCQ_DEVICE` (the VM test runs
//! this on `rxe0`): each workload polled by the direct backend and by rdma-core's
//! `ibv_poll_cq`, each checked against what the workload expects and the two against each
//! other, field by field ([`dvcq::conformance::run_on_device`]). Prints the VM test's
//! `vm-plan` / `vm-row` lines.
//!
//! Without `DVCQ_DEVICE` it skips with one line (a host has no RDMA device; the VM test is
//! where it runs).

#[path = "support/lifetimes.rs"]
mod lifetimes;
#[path = "support/skip.rs"]
mod skip;

use dvcq::conformance::{run_on_device, WORKLOADS};
use dvcq::Context;

#[test]
fn workloads_agree_on_a_real_device() {
    let Some(name) = std::env::var("DVCQ_DEVICE").ok().filter(|n| !n.is_empty()) else {
        skip::skip_here("DVCQ_DEVICE is not set; tests/vm/run runs this test on rxe0 in a VM");
        return;
    };
    let ctx = Context::open(&name).unwrap_or_else(|e| panic!("{e}"));
    println!("vm-plan {}", WORKLOADS.len() * 2);
    let mut failures = Vec::new();
    for r in run_on_device(&ctx) {
        for (run, extra) in [(&r.direct, &r.cross), (&r.generic, &Vec::new())] {
            let bad = run.problems.len() + extra.len();
            let name = run.backend.name();
            println!("vm-row {} {name} {} {bad} {}", run.workload, run.records.len(), run.reason);
            failures.extend(run.problems.iter().chain(extra.iter()).map(|p| format!("{} [{name}]: {p}", run.workload)));
        }
    }
    for f in &failures {
        println!("mismatch: {f}");
    }
    assert!(failures.is_empty(), "{} mismatches on {name}", failures.len());
}

/// The verbs lifetimes on the real device: objects dropped in any order, the rest working.
#[test]
fn objects_dropped_in_any_order_on_a_real_device() {
    let Some(name) = std::env::var("DVCQ_DEVICE").ok().filter(|n| !n.is_empty()) else {
        skip::skip_here("DVCQ_DEVICE is not set; tests/vm/run runs this test on rxe0 in a VM");
        return;
    };
    for first in ["nothing", "context", "pd", "context and pd"] {
        lifetimes::one_write(&name, first);
    }
}

/// Zero-copy views on the real device where its backend has them (rxe): each entry a walk
/// shows is the completion a poll would have returned, and the walk consumes them.
#[test]
fn views_walk_the_real_queue() {
    use dvcq::verbs::{Access, QpType, SendOp, SendWr};
    use dvcq::{BackendKind, Completion, CqOptions, QpInit};
    let Some(name) = std::env::var("DVCQ_DEVICE").ok().filter(|n| !n.is_empty()) else {
        skip::skip_here("DVCQ_DEVICE is not set; tests/vm/run runs this test on rxe0 in a VM");
        return;
    };
    let ctx = Context::open(&name).unwrap();
    let mut cq = ctx.create_cq(CqOptions::new(16)).unwrap();
    if cq.backend().kind != BackendKind::Rxe {
        assert!(cq.views().is_none(), "{name}: only rxe has views through the Cq API");
        skip::skip_here(&format!("{name}: polled by {}, which has no views", cq.backend().kind.name()));
        return;
    }
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.reg_mr(4096, Access::ALL).unwrap();
    let mut qp = pd.create_qp(&QpInit::new(QpType::Rc, &cq)).unwrap();
    let me = qp.endpoint().unwrap();
    qp.connect(&me).unwrap();
    let sg = [mr.slice(0, 8).unwrap()];
    for i in 0..6 {
        qp.post_send(&[SendWr::new(100 + i, SendOp::Write(mr.remote().at(64)), &sg)]).unwrap();
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut seen = Vec::new();
    while seen.len() < 6 && std::time::Instant::now() < deadline {
        let mut walk = cq.views().expect("rxe has views");
        while let Some(v) = walk.next() {
            let c = v.completion();
            assert_eq!((v.wr_id(), v.qp_num(), v.status()), (c.wr_id, c.qp_num, 0), "{name}");
            assert_eq!(v.opcode(), c.opcode as u32, "{name}");
            seen.push(v.wr_id());
        }
    }
    assert_eq!(seen, (100..106).collect::<Vec<_>>(), "{name}: every completion, in order, once");
    let mut wcs = [Completion::default(); 4];
    assert_eq!(cq.poll(&mut wcs), 0, "{name}: the walks consumed what they showed");
}
