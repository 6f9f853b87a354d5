//! A device's own counters, as `dvcq stat` prints them: the kernel's for an RDMA device
//! (sysfs, what `rdma statistic show` reads), the model's for a model.
//!
//! The kernel publishes them under `/sys/class/infiniband/<dev>/`: `hw_counters/` for the
//! device (drivers with device-wide counters) and `ports/<p>/hw_counters/` and
//! `ports/<p>/counters/` per port (the driver's statistics, e.g. mlx5's `out_of_sequence`,
//! rxe's `rcvd_seq_err`, and the InfiniBand port counters where the driver has them; see the
//! kernel's `drivers/infiniband/core/sysfs.c`). Every file holds one decimal number, except
//! `hw_counters/lifespan`, the milliseconds a read value stays cached, which is a setting and
//! is left out. A file that cannot be read (some counters refuse reads on some firmware) is
//! reported with its error, and the others are still read.

use serde::Serialize;
use std::path::{Path, PathBuf};

/// Where the kernel lists RDMA devices.
pub const SYSFS_ROOT: &str = "/sys/class/infiniband";

/// Counters whose names say something about CQs and the completions that land in them:
/// overflows, error and flush completions, sequence errors and retries (the mlx5, rxe and
/// irdma drivers' names; `cq_overflow` is also the model's).
pub const CQ_RELATED: &[&str] = &[
    "cq_overflow",
    "req_cqe_error",
    "resp_cqe_error",
    "req_cqe_flush_error",
    "resp_cqe_flush_error",
    "out_of_sequence",
    "out_of_seq_request",
    "out_of_buffer",
    "packet_seq_err",
    "rcvd_seq_err",
    "implied_nak_seq_err",
    "duplicate_request",
    "local_ack_timeout_err",
    "rnr_nak_retry_err",
    "rcvd_rnr_err",
    "retry_exceeded_err",
    "retry_rnr_exceeded_err",
    "completer_retry_err",
    "cqes_dropped",
];

/// One counter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Counter {
    /// Its file name (or the model's name for it).
    pub name: String,
    /// The value, or `None` when it could not be read.
    pub value: Option<u64>,
    /// Why it could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Whether it is one of [`CQ_RELATED`].
    pub cq_related: bool,
}

impl Counter {
    fn new(name: &str, value: Result<u64, String>) -> Counter {
        let cq_related = CQ_RELATED.contains(&name);
        match value {
            Ok(v) => Counter { name: name.into(), value: Some(v), error: None, cq_related },
            Err(e) => Counter { name: name.into(), value: None, error: Some(e), cq_related },
        }
    }
}

/// The counters of one directory: `device hw_counters`, `port 1 counters`, ...
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CounterGroup {
    /// `device`, `port <n>`, or `model`.
    pub scope: String,
    /// `hw_counters`, `counters`, or `model`.
    pub kind: String,
    /// Sorted by name.
    pub counters: Vec<Counter>,
}

/// Everything a device counts, at one moment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeviceCounters {
    /// The device.
    pub device: String,
    /// Where they were read: the sysfs directory, or `model`.
    pub source: String,
    /// By directory, device first, then ports in order.
    pub groups: Vec<CounterGroup>,
}

impl DeviceCounters {
    /// The value of `name` in the group of `scope` and `kind`.
    pub fn get(&self, scope: &str, kind: &str, name: &str) -> Option<u64> {
        let g = self.groups.iter().find(|g| g.scope == scope && g.kind == kind)?;
        g.counters.iter().find(|c| c.name == name)?.value
    }
}

/// Errors reading a device's counters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CountersError {
    /// No such device under the sysfs root.
    #[error("no RDMA device {name:?} under {root} (devices there: {})", list(.present))]
    UnknownDevice {
        /// The name asked for.
        name: String,
        /// The sysfs root read.
        root: String,
        /// The devices that are there.
        present: Vec<String>,
    },
    /// The device's directory could not be listed.
    #[error("{path}: {why}")]
    Unreadable {
        /// The directory.
        path: String,
        /// The error.
        why: String,
    },
}

fn list(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// Reads `device`'s counters from the sysfs tree at `root` (normally [`SYSFS_ROOT`]; tests
/// give a fake one).
///
/// # Errors
///
/// [`CountersError::UnknownDevice`] when `root/device` does not exist;
/// [`CountersError::Unreadable`] when its port directory cannot be listed. A single counter
/// that cannot be read is not an error: it is reported in its [`Counter`].
pub fn read_sysfs(root: &Path, device: &str) -> Result<DeviceCounters, CountersError> {
    let dir = root.join(device);
    if device.is_empty() || device.contains('/') || !dir.is_dir() {
        return Err(CountersError::UnknownDevice {
            name: device.into(),
            root: root.display().to_string(),
            present: sorted_entries(root).unwrap_or_default(),
        });
    }
    let mut groups = Vec::new();
    if let Some(g) = read_group(&dir.join("hw_counters"), "device", "hw_counters") {
        groups.push(g);
    }
    let ports_dir = dir.join("ports");
    let unreadable =
        |e: std::io::Error| CountersError::Unreadable { path: ports_dir.display().to_string(), why: e.to_string() };
    let mut ports: Vec<(u32, PathBuf)> = match std::fs::read_dir(&ports_dir) {
        Ok(rd) => rd
            .filter_map(Result::ok)
            .filter_map(|e| Some((e.file_name().to_str()?.parse::<u32>().ok()?, e.path())))
            .collect(),
        // A device without ports directory has only device-wide counters.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(unreadable(e)),
    };
    ports.sort();
    for (p, path) in ports {
        for kind in ["hw_counters", "counters"] {
            if let Some(g) = read_group(&path.join(kind), &format!("port {p}"), kind) {
                groups.push(g);
            }
        }
    }
    Ok(DeviceCounters { device: device.into(), source: dir.display().to_string(), groups })
}

/// The counters of one directory, `None` if it does not exist.
fn read_group(dir: &Path, scope: &str, kind: &str) -> Option<CounterGroup> {
    let names = sorted_entries(dir).ok()?;
    let counters =
        names.iter().filter(|n| n.as_str() != "lifespan").map(|n| Counter::new(n, read_value(&dir.join(n)))).collect();
    Some(CounterGroup { scope: scope.into(), kind: kind.into(), counters })
}

/// One counter file: a decimal number and a newline.
fn read_value(path: &Path) -> Result<u64, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let t = text.trim();
    t.parse::<u64>().map_err(|_| format!("not a counter: {:?}", t.chars().take(40).collect::<String>()))
}

fn sorted_entries(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir)?.filter_map(Result::ok).filter_map(|e| e.file_name().into_string().ok()).collect();
    v.sort();
    Ok(v)
}

/// A model's counters as a [`DeviceCounters`] of one `model` group.
pub(crate) fn of_model(device: &str, values: &[(&str, u64)]) -> DeviceCounters {
    let mut counters: Vec<Counter> = values.iter().map(|&(n, v)| Counter::new(n, Ok(v))).collect();
    counters.sort_by(|a, b| a.name.cmp(&b.name));
    DeviceCounters {
        device: device.into(),
        source: "model".into(),
        groups: vec![CounterGroup { scope: "model".into(), kind: "model".into(), counters }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake sysfs tree: `rxe0` with port 1's hw_counters (and `lifespan`), `mlx5_0` with
    /// device counters, two ports with both kinds, and a counter that is not a number.
    fn fake() -> tempdir::Dir {
        let d = tempdir::Dir::new("counters");
        let w = |p: &str, v: &str| {
            let path = d.path().join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, v).unwrap();
        };
        w("rxe0/ports/1/hw_counters/rcvd_seq_err", "3\n");
        w("rxe0/ports/1/hw_counters/sent_pkts", "120\n");
        w("rxe0/ports/1/hw_counters/lifespan", "10\n");
        w("mlx5_0/hw_counters/cq_overflow", "0\n");
        w("mlx5_0/ports/2/counters/port_xmit_data", "77\n");
        w("mlx5_0/ports/1/hw_counters/out_of_sequence", "5\n");
        w("mlx5_0/ports/1/counters/port_rcv_packets", "N/A (no PMA)\n");
        d
    }

    #[test]
    fn a_devices_counters_are_read_by_directory_in_order() {
        let d = fake();
        let c = read_sysfs(d.path(), "mlx5_0").unwrap();
        let groups: Vec<(&str, &str)> = c.groups.iter().map(|g| (g.scope.as_str(), g.kind.as_str())).collect();
        assert_eq!(
            groups,
            [("device", "hw_counters"), ("port 1", "hw_counters"), ("port 1", "counters"), ("port 2", "counters")]
        );
        assert_eq!(c.get("device", "hw_counters", "cq_overflow"), Some(0));
        assert_eq!(c.get("port 1", "hw_counters", "out_of_sequence"), Some(5));
        assert_eq!(c.get("port 2", "counters", "port_xmit_data"), Some(77));
        let bad = &c.groups[2].counters[0];
        assert_eq!((bad.value, bad.error.as_deref()), (None, Some("not a counter: \"N/A (no PMA)\"")));
        assert!(c.groups[1].counters[0].cq_related, "out_of_sequence is about completions");
    }

    #[test]
    fn lifespan_is_a_setting_not_a_counter() {
        let d = fake();
        let c = read_sysfs(d.path(), "rxe0").unwrap();
        let names: Vec<&str> = c.groups[0].counters.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["rcvd_seq_err", "sent_pkts"]);
    }

    #[test]
    fn an_unknown_device_names_the_ones_there() {
        let d = fake();
        let e = read_sysfs(d.path(), "mlx5_9").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("no RDMA device \"mlx5_9\" under {} (devices there: mlx5_0, rxe0)", d.path().display())
        );
        assert!(matches!(read_sysfs(d.path(), "../rxe0"), Err(CountersError::UnknownDevice { .. })));
        let none = read_sysfs(&d.path().join("absent"), "rxe0").unwrap_err();
        assert!(none.to_string().ends_with("(devices there: none)"), "{none}");
    }

    /// A scratch directory removed when dropped.
    mod tempdir {
        pub(super) struct Dir(std::path::PathBuf);
        impl Dir {
            pub(super) fn new(tag: &str) -> Dir {
                use std::sync::atomic::{AtomicU32, Ordering};
                static N: AtomicU32 = AtomicU32::new(0);
                let n = N.fetch_add(1, Ordering::Relaxed);
                let p = std::env::temp_dir().join(format!("dvcq-{tag}-{}-{n}", std::process::id()));
                std::fs::create_dir_all(&p).unwrap();
                Dir(p)
            }
            pub(super) fn path(&self) -> &std::path::Path {
                &self.0
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }
}
