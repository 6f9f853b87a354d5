//! The conformance cases on real RDMA devices: rxe in the VM, NICs on lab machines.
//!
//! [`run_cases_on_device`] is the hook the real-stack work fills in: open the device, make a
//! [`Backend`](crate::backends::Backend) of its CQ and QPs, and run every case of the
//! suite on it. Until it does, a machine with RDMA devices fails the `real_devices` test,
//! naming them, and a machine without any skips it with one line.

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

/// Runs every conformance case on the RDMA device `name`, or says why it could not or
/// which case failed.
///
/// The hook for the real-stack work: this build has no backend that attaches the suite to
/// a device yet, so every device is an error here.
pub fn run_cases_on_device(name: &str) -> Result<(), String> {
    Err(format!(
        "{name}: the conformance cases cannot run on a real device yet: \
         tests/conformance/real_device.rs has no backend for it (run_cases_on_device)"
    ))
}
