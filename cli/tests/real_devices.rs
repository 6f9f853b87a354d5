//! The conformance cases on real RDMA devices: rxe in the VM, NICs on lab machines.
//!
//! [`run_cases_on_device`] opens each device and runs the workloads of
//! [`dvcq::conformance`] on it (the ring-level cases above it need a model's ring, so on a
//! device the same behaviours are checked through the `Cq`/QP API); a machine without any
//! device skips with one line.

/// Where Linux lists the RDMA devices (one entry per device, named as libibverbs names it).
const SYSFS_DEVICES: &str = "/sys/class/infiniband";

/// The RDMA devices this machine has, by name, sorted.
///
/// # Panics
///
/// If the device directory exists but cannot be read.
pub fn devices() -> Vec<String> {
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
/// ([`dvcq::conformance::run_on_device`]); says which failed, or why none could run. A
/// machine without rdma-core (or `DVCQ_NO_RDMA_CORE=1`) cannot open a real device: it says
/// so in one line and passes.
pub fn run_cases_on_device(name: &str) -> Result<(), String> {
    let ctx = match dvcq::Context::open(name) {
        Ok(c) => c,
        Err(e @ dvcq::Error::NoRdmaCore { .. }) => {
            crate::skip::skip_here(&format!("{name}: {e}"));
            return Ok(());
        }
        Err(e) => return Err(format!("{name}: {e}")),
    };
    let mut failures = Vec::new();
    for r in dvcq::conformance::run_on_device(&ctx) {
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
