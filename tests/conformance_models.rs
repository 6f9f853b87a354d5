//! The conformance workloads (`dvcq::conformance`) on both built-in models, through the same
//! `Context`/`Cq`/QP API the VM test drives on rxe: every workload must produce exactly the
//! completions it expects and move its data.

use dvcq::conformance::{run, WORKLOADS};
use dvcq::{BackendChoice, BackendKind, Context};

fn all_workloads_pass_on(device: &str) {
    let ctx = Context::open(device).unwrap();
    let mut failures = Vec::new();
    let mut ran = 0;
    for w in WORKLOADS {
        let r = run(&ctx, w, BackendChoice::Auto);
        if let Some(why) = &r.skipped {
            println!("{device} {}: skipped: {why}", w.name);
            continue;
        }
        ran += 1;
        assert_eq!(r.backend, BackendKind::Model, "{}: {}", w.name, r.reason);
        assert!(!r.records.is_empty(), "{}: no completion recorded", w.name);
        failures.extend(r.problems.iter().map(|p| format!("{device} {}: {p}", w.name)));
    }
    assert!(ran >= WORKLOADS.len() - 1, "{device}: only {ran} workloads ran");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_workload_passes_on_the_mlx5_model() {
    all_workloads_pass_on("model-mlx5");
}

#[test]
fn every_workload_passes_on_the_e810_model() {
    all_workloads_pass_on("model-e810");
}
