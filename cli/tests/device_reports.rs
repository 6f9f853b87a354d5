//! What a device reports is input too: on models that report zeros (as an emulated kernel
//! that answered `ibv_query_device` with zeros did) or absurd attributes, every validate
//! check, `dvcq stat`'s workload and the benchmarks end in a result or an error that names
//! the device, never in a panic.

use dvcq::cq::BackendChoice;
use dvcq::model_device::{DeviceAttrs, ModelDevice, ModelVendor};
use dvcq::Context;
use dvcq_cli::bench::drain::{self, DrainParams};
use dvcq_cli::bench::traffic::{self, TrafficParams, Verb};
use dvcq_cli::cli::validate::judge;
use dvcq_cli::conformance::{self, WORKLOADS};

const VENDORS: [ModelVendor; 2] = [ModelVendor::Mlx5, ModelVendor::Irdma];

/// Every attribute 0.
fn zeros() -> DeviceAttrs {
    DeviceAttrs {
        max_cqe: 0,
        max_qp_wr: 0,
        max_sge: 0,
        max_srq: 0,
        max_srq_wr: 0,
        max_srq_sge: 0,
        max_inline_data: 0,
        mtu: 0,
        max_msg_sz: 0,
    }
}

/// Every attribute as large as it goes.
fn absurd() -> DeviceAttrs {
    DeviceAttrs {
        max_cqe: u32::MAX,
        max_qp_wr: u32::MAX,
        max_sge: u32::MAX,
        max_srq: u32::MAX,
        max_srq_wr: u32::MAX,
        max_srq_sge: u32::MAX,
        max_inline_data: u32::MAX,
        mtu: u32::MAX,
        max_msg_sz: u64::MAX,
    }
}

fn open(vendor: ModelVendor, attrs: DeviceAttrs) -> Context {
    Context::from_model(ModelDevice::with_attrs(vendor, attrs))
}

#[test]
fn a_model_reports_the_attributes_it_was_given() {
    for vendor in VENDORS {
        let info = open(vendor, zeros()).info().unwrap();
        assert_eq!((info.max_cqe, info.max_qp_wr, info.max_sge, info.max_srq_wr), (0, 0, 0, 0));
        let info = open(vendor, absurd()).info().unwrap();
        assert_eq!(info.max_cqe, u32::MAX);
        let (mine, stock) = (
            open(vendor, DeviceAttrs::of(vendor)).info().unwrap(),
            Context::open(vendor.device_name()).unwrap().info().unwrap(),
        );
        assert_eq!(
            (mine.max_cqe, mine.max_qp_wr, mine.max_sge, mine.max_srq_wr),
            (stock.max_cqe, stock.max_qp_wr, stock.max_sge, stock.max_srq_wr)
        );
    }
}

/// A device that reports `max_cqe` 0 can make no CQ: no check of traffic passes on it, and the checks
/// that size CQs by `max_cqe` say that the device reported 0, naming the device.
#[test]
fn validate_on_a_device_that_reports_zeros_fails_saying_so() {
    for vendor in VENDORS {
        let name = vendor.device_name();
        for w in WORKLOADS {
            let ctx = open(vendor, zeros());
            let run = conformance::run(&ctx, w, BackendChoice::Auto);
            // Only a check of refusals can pass: its CQs are refused for their CQE size
            // before their depth is looked at.
            assert!(
                run.skipped.is_some() || !run.problems.is_empty() || w.name == "mlx5_cqe_size_bad",
                "{name} {}: passed on a device that can make no CQ",
                w.name
            );
            if ["cq_create_sizes", "cq_create_channel", "cq_create_bad", "cq_depth_max"].contains(&w.name) {
                // The row `dvcq validate` prints.
                let row = judge(w.name, &run, None);
                assert_eq!(row.result, "fail", "{name} {}: {}", w.name, row.reason);
                let want = format!("{name}: the device reports max_cqe = 0");
                assert!(row.reason.contains(&want), "{name} {}: {}", w.name, row.reason);
            }
        }
    }
}

/// Absurd attributes: each check ends in a verdict (the model refuses what it cannot make),
/// and the ones that do not size themselves by the device still pass.
#[test]
fn validate_on_a_device_that_reports_absurd_attributes_ends_in_verdicts() {
    for vendor in VENDORS {
        let name = vendor.device_name();
        for w in WORKLOADS {
            let ctx = open(vendor, absurd());
            let run = conformance::run(&ctx, w, BackendChoice::Auto);
            if ["cq_create_sizes", "cq_create_channel", "cq_depth_max"].contains(&w.name) {
                let said = run.problems.join("; ");
                assert!(said.contains(name) && said.contains(&u32::MAX.to_string()), "{name} {}: {said}", w.name);
            }
            if w.name == "cq_wrap" {
                assert!(run.problems.is_empty(), "{name} cq_wrap: {:?}", run.problems);
            }
        }
    }
}

/// The benchmarks and `dvcq stat`'s workload on a device that reports zeros: an error that
/// names the device.
#[test]
fn benches_on_a_device_that_reports_zeros_return_an_error() {
    for vendor in VENDORS {
        let name = vendor.device_name();
        let ctx = open(vendor, zeros());
        let e = drain::run(&ctx, &DrainParams { completions: 64, batch: 16, reps: 1, qps: 1 }).unwrap_err().to_string();
        assert!(e.starts_with(name) && e.contains("allows 1 to 0"), "{e}");
        let p = TrafficParams {
            verb: Verb::Write,
            size: 64,
            iters: 16,
            tx_depth: 8,
            signal_every: 1,
            sq_sig_all: false,
            events: false,
            batch: 16,
            qps: 1,
            cq_per_qp: false,
            cq_depth: None,
            moderation: None,
            reps: 1,
            only: None,
            latency: true,
        };
        let e = traffic::run(&ctx, &p).unwrap_err().to_string();
        assert!(e.starts_with(name) && e.contains("allows 1 to 0"), "{e}");
    }
}
