//! The conformance workloads on a real RDMA device, named by `DVCQ_DEVICE` (the VM test runs
//! this on `rxe0`): each workload polled by the direct backend and by rdma-core's
//! `ibv_poll_cq`, each checked against what the workload expects and the two against each
//! other, field by field. Prints the VM test's `vm-plan` / `vm-row` lines.
//!
//! Without `DVCQ_DEVICE` it skips with one line (a host has no RDMA device; the VM test is
//! where it runs).

use dvcq::conformance::{diff, run, WORKLOADS};
use dvcq::{BackendChoice, Context};

#[test]
fn workloads_agree_on_a_real_device() {
    let Some(name) = std::env::var("DVCQ_DEVICE").ok().filter(|n| !n.is_empty()) else {
        println!("skip: DVCQ_DEVICE is not set; tests/vm/run runs this test on rxe0 in a VM");
        return;
    };
    let ctx = Context::open(&name).unwrap_or_else(|e| panic!("{e}"));
    println!("vm-plan {}", WORKLOADS.len() * 2);
    let mut failures = Vec::new();
    for w in WORKLOADS {
        let generic = run(&ctx, w, BackendChoice::Generic);
        let direct = run(&ctx, w, BackendChoice::Auto);
        let cross = diff(&format!("{} direct vs ibv_poll_cq", w.name), &generic.records, &direct.records);
        for (r, extra) in [(&direct, &cross), (&generic, &Vec::new())] {
            let bad = r.problems.len() + extra.len();
            println!("vm-row {} {} {} {} {}", w.name, r.backend.name(), r.records.len(), bad, r.reason);
            failures.extend(
                r.problems.iter().chain(extra.iter()).map(|p| format!("{} [{}]: {p}", w.name, r.backend.name())),
            );
        }
    }
    for f in &failures {
        println!("mismatch: {f}");
    }
    assert!(failures.is_empty(), "{} mismatches on {name}", failures.len());
}
