//! The conformance workloads (`dvcq_cli::conformance`) on both built-in models, through the same
//! `Context`/`Cq`/QP API the VM test drives on rxe: every workload must produce exactly the
//! completions it expects and move its data.

use dvcq::{BackendChoice, BackendKind, Context};
use dvcq_cli::conformance::{run, WORKLOADS};

/// Runs every workload on a fresh `device` (as `dvcq validate` does: a model keeps every CQ
/// of a device until it is closed); each must pass, or skip for one of `skips`' reasons.
fn all_workloads_pass_on(device: &str, skips: &[&str]) {
    let mut failures = Vec::new();
    let mut skipped = Vec::new();
    for w in WORKLOADS {
        let ctx = Context::open(device).unwrap();
        let r = run(&ctx, w, BackendChoice::Auto);
        if let Some(why) = &r.skipped {
            println!("{device} {}: skipped: {why}", w.name);
            skipped.push(w.name);
            continue;
        }
        assert_eq!(r.backend, BackendKind::Model, "{}: {}", w.name, r.reason);
        // A check that only makes CQs says what it did instead of recording completions.
        assert!(!r.records.is_empty() || r.summary.is_some(), "{}: no completion recorded", w.name);
        failures.extend(r.problems.iter().map(|p| format!("{device} {}: {p}", w.name)));
    }
    assert_eq!(skipped, skips, "{device}: the checks a model cannot run");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_workload_passes_on_the_mlx5_model() {
    all_workloads_pass_on("model-mlx5", &["cq_ex_fields"]);
}

#[test]
fn every_workload_passes_on_the_e810_model() {
    let mlx5_only = ["mlx5_cqe_128", "mlx5_cqe_pad", "mlx5_cqe_size_bad", "mlx5_compression", "mlx5_read_inline_128"];
    // An E810 (irdma GEN2) stamps no completions.
    let mut skips = vec!["rc_srq"];
    skips.extend(mlx5_only);
    // Nor has it XRC or atomics.
    skips.extend(["cq_timestamps", "cq_ex_fields", "xrc_traffic", "atomic_cas_fa"]);
    all_workloads_pass_on("model-e810", &skips);
}

/// Two runs of each workload on a fresh `device` agree on every field verbs define for their
/// completions (`conformance::cross`, as the direct run and the `ibv_poll_cq` run of a device
/// are compared): QP roles, named rkeys and the fields left out make runs with other QP
/// numbers, rkeys and timestamps compare, and nothing a run may vary is compared.
fn two_runs_agree_on(device: &str) {
    let mut differences = Vec::new();
    let mut compared = 0;
    for w in WORKLOADS {
        let first = run(&Context::open(device).unwrap(), w, BackendChoice::Auto);
        if first.raw.is_empty() {
            continue;
        }
        let second = run(&Context::open(device).unwrap(), w, BackendChoice::Auto);
        assert_eq!(first.defined.len(), first.raw.len(), "{}: a defined view of each completion", w.name);
        compared += first.defined.len();
        differences.extend(dvcq_cli::conformance::cross(w.name, &first, &second));
    }
    assert!(compared > 4000, "{device}: {compared} completions compared");
    assert!(differences.is_empty(), "{device}:\n{}", differences.join("\n"));
}

#[test]
fn two_runs_agree_on_every_defined_field_on_the_mlx5_model() {
    two_runs_agree_on("model-mlx5");
}

#[test]
fn two_runs_agree_on_every_defined_field_on_the_e810_model() {
    two_runs_agree_on("model-e810");
}
