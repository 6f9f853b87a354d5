//! The conformance cases on real RDMA devices: rxe in the VM, NICs on lab machines.
//!
//! [`run_cases_on_device`] opens each device and runs the workloads of
//! [`dvcq_cli::conformance`] on it (the ring-level cases above it need a model's ring, so on a
//! device the same behaviours are checked through the `Cq`/QP API); a machine without any
//! device skips with one line.

#[path = "../../tests/support/skip.rs"]
mod skip;

/// Where Linux lists the RDMA devices (one entry per device, named as libibverbs names it).
const SYSFS_DEVICES: &str = "/sys/class/infiniband";

/// The RDMA devices this machine has, by name, sorted.
///
/// # Panics
///
/// If the device directory exists but cannot be read.
fn devices() -> Vec<String> {
    let entries = match std::fs::read_dir(SYSFS_DEVICES) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => panic!("{SYSFS_DEVICES}: {e}"),
    };
    let mut names: Vec<String> = entries
        .map(|e| e.unwrap_or_else(|e| panic!("{SYSFS_DEVICES}: {e}")).file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Runs every conformance workload on the RDMA device `name`, polled by its direct backend
/// and by rdma-core's `ibv_poll_cq` and compared field by field
/// ([`dvcq_cli::conformance::run_on_device`]); says which failed, or why none could run. A
/// machine without rdma-core (or `DVCQ_NO_RDMA_CORE=1`) cannot open a real device: it says
/// so in one line and passes.
fn run_cases_on_device(name: &str) -> Result<(), String> {
    let ctx = match dvcq::Context::open(name) {
        Ok(c) => c,
        Err(e @ dvcq::Error::NoRdmaCore { .. }) => {
            crate::skip::skip_here(&format!("{name}: {e}"));
            return Ok(());
        }
        Err(e) => return Err(format!("{name}: {e}")),
    };
    let mut failures = Vec::new();
    for r in dvcq_cli::conformance::run_on_device(&ctx) {
        for (run, extra) in [(&r.direct, &r.cross), (&r.generic, &Vec::new())] {
            let backend = run.backend.name();
            if let Some(why) = &run.skipped {
                crate::skip::skip_here(&format!("{name}: {} [{backend}]: {why}", run.workload));
            }
            failures.extend(
                run.problems.iter().chain(extra.iter()).map(|p| format!("{name}: {} [{backend}]: {p}", run.workload)),
            );
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

/// The conformance workloads on every real RDMA device of this machine
/// ([`run_cases_on_device`]): direct backend and `ibv_poll_cq`, compared. Without any
/// device, in CI too, the test skips with one line: the models are the suite's run there
/// (`tests/conformance/`), and the VM test runs the same workloads on rxe.
#[test]
fn real_devices() {
    let devices = devices();
    if devices.is_empty() {
        skip::skip_here("no RDMA device (/sys/class/infiniband): the conformance cases ran on the models only");
        return;
    }
    let failed: Vec<String> = devices.iter().filter_map(|d| run_cases_on_device(d).err()).collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
