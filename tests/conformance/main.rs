//! The cross-backend conformance suite: each case is written once against [`Backend`] and
//! stamped out for every backend (docs/testing.md). The hardware models always run; real
//! devices (rxe in the VM, NICs) run through the hook in `real_device.rs`, and a machine
//! without any says so in one line.

mod backends;
mod cases;
mod real_device;
#[path = "../support/skip.rs"]
mod skip;

use backends::{Backend, IrdmaGen2, IrdmaGen2RdmaCoreSized, IrdmaGen3, Mlx5Model128, Mlx5Model64};

macro_rules! conformance {
    ($($case:ident),* $(,)?) => {
        mod mlx5_model_64 { $( #[test] fn $case() { crate::cases::$case::<crate::Mlx5Model64>(); } )* }
        mod mlx5_model_128 { $( #[test] fn $case() { crate::cases::$case::<crate::Mlx5Model128>(); } )* }
        mod irdma_model_gen2 { $( #[test] fn $case() { crate::cases::$case::<crate::IrdmaGen2>(); } )* }
        mod irdma_model_gen3 { $( #[test] fn $case() { crate::cases::$case::<crate::IrdmaGen3>(); } )* }
        mod irdma_model_gen2_rdma_core_sized {
            $( #[test] fn $case() { crate::cases::$case::<crate::IrdmaGen2RdmaCoreSized>(); } )*
        }
    };
}

conformance!(
    sends_complete_in_order_with_their_wr_ids,
    receives_carry_length_and_immediate,
    errors_report_a_failure_status_and_the_wr_id,
    unknown_qp_is_a_fault_item_between_good_completions,
    many_laps_lose_nothing,
    batches_split_anywhere,
    empty_ring_polls_zero_and_peek_matches_poll,
);

/// The conformance workloads on every real RDMA device of this machine
/// ([`real_device::run_cases_on_device`]): direct backend and `ibv_poll_cq`, compared.
/// Without any device, in CI too, the test skips with one line: the models above are the
/// suite's run there, and the VM test runs the same workloads on rxe.
#[test]
fn real_devices() {
    let devices = real_device::devices();
    if devices.is_empty() {
        skip::skip_here("no RDMA device (/sys/class/infiniband): the conformance cases ran on the models only");
        return;
    }
    let failed: Vec<String> = devices.iter().filter_map(|d| real_device::run_cases_on_device(d).err()).collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

// Keep `Backend` in scope for the macro's paths.
#[allow(dead_code)]
fn _uses<B: Backend>() {}
