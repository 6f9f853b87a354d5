//! The cross-backend conformance suite: each case is written once against [`Backend`] and
//! stamped out for every backend (docs/testing.md). The hardware models run here; the same
//! behaviours on real devices (rxe in the VM, NICs) are checked by the `dvcq validate`
//! workloads in `cli/tests/real_devices.rs`.

mod backends;
mod cases;

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

// Keep `Backend` in scope for the macro's paths.
#[allow(dead_code)]
fn _uses<B: Backend>() {}
