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
