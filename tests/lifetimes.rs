//! The verbs lifetimes held by ownership on both models (`support/lifetimes.rs`); the VM
//! test runs the same on rxe (`tests/real_stack.rs`).

#[path = "support/lifetimes.rs"]
mod lifetimes;

#[test]
fn objects_dropped_in_any_order_leave_the_rest_working() {
    for device in ["model-mlx5", "model-e810"] {
        for first in ["nothing", "context", "pd", "context and pd"] {
            lifetimes::one_write(device, first);
        }
    }
}

#[test]
fn a_window_keeps_its_region_registered() {
    for device in ["model-mlx5", "model-e810"] {
        lifetimes::window_outlives_its_region(device);
    }
}

#[test]
fn binds_that_cannot_be_right_are_refused_before_posting() {
    for device in ["model-mlx5", "model-e810"] {
        lifetimes::bind_refusals(device);
    }
}

#[test]
fn a_receive_keeps_its_region_registered() {
    for device in ["model-mlx5", "model-e810"] {
        lifetimes::receive_outlives_its_region(device);
    }
}

#[test]
fn buffers_the_device_writes_must_be_regions_of_its_context() {
    for device in ["model-mlx5", "model-e810"] {
        lifetimes::foreign_buffers_are_refused_where_written(device);
    }
}
