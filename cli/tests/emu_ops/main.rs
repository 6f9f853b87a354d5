//! The command's tests of single operations on the emulated devices, one binary: each test
//! runs itself again as a child process under the preload (`dvcq-emu`), where rdma-core's
//! real libibverbs and providers drive the emulated ConnectX-6 Dx or E810.

#[path = "../../../emu/tests/support/preload.rs"]
mod preload;

#[path = "../support/emu.rs"]
mod emu;
#[path = "../../../tests/support/loopback.rs"]
mod loopback;

mod atomics;
mod compression;
mod cq_resize;
mod windows;
mod wire;

use dvcq::{BackendChoice, Context};
use dvcq_cli::conformance::{run, Run, WORKLOADS};

/// Runs validate's workload `name` on `ctx`, polled by `choice`.
fn validate(ctx: &Context, name: &str, choice: BackendChoice) -> Run {
    let w = WORKLOADS.iter().find(|w| w.name == name).unwrap_or_else(|| panic!("no workload {name}"));
    run(ctx, w, choice)
}

/// Asserts that validate's workload `name` passes on `ctx` polled by `choice`: it ran (was
/// not skipped) and found no problem.
fn assert_passes(ctx: &Context, name: &str, choice: BackendChoice) {
    let r = validate(ctx, name, choice);
    assert_eq!((r.skipped.as_deref(), &r.problems), (None, &Vec::<String>::new()), "{choice:?}: {}", r.reason);
}
