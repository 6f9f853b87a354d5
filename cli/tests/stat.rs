//! `dvcq stat`: a device's counters from a fake sysfs tree (the root is a parameter), a
//! model's counters around the workload next to the CQ's statistics, and clear errors.

mod support;

use std::path::{Path, PathBuf};
use support::dvcq;

/// A fake `/sys/class/infiniband` with `rxe0` (port 1 hw_counters, as rdma_rxe has them,
/// and `lifespan`) and `mlx5_0` (device and port counters); removed when dropped.
struct FakeSysfs(PathBuf);

impl FakeSysfs {
    fn new(tag: &str) -> FakeSysfs {
        let root = std::env::temp_dir().join(format!("dvcq-stat-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for (path, value) in [
            ("rxe0/ports/1/hw_counters/sent_pkts", "1200\n"),
            ("rxe0/ports/1/hw_counters/rcvd_seq_err", "2\n"),
            ("rxe0/ports/1/hw_counters/lifespan", "10\n"),
            ("mlx5_0/hw_counters/cq_overflow", "1\n"),
            ("mlx5_0/ports/1/hw_counters/out_of_sequence", "7\n"),
            ("mlx5_0/ports/1/counters/port_rcv_data", "123456\n"),
        ] {
            let p = root.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, value).unwrap();
        }
        FakeSysfs(root)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for FakeSysfs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn kernel_counters_come_from_the_sysfs_tree() {
    let fake = FakeSysfs::new("table");
    let root = fake.path().to_str().unwrap();
    let o = dvcq(&["stat", "-d", "mlx5_0", "-n", "0", "--sysfs", root], None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains(&format!("kernel counters: {root}/mlx5_0, now")), "{out}");
    let row =
        |name: &str| out.lines().find(|l| l.contains(name)).unwrap_or_default().split_whitespace().collect::<Vec<_>>();
    assert_eq!(row("cq_overflow"), ["device", "hw_counters", "cq_overflow*", "-", "1"], "{out}");
    assert_eq!(row("out_of_sequence"), ["port", "1", "hw_counters", "out_of_sequence*", "-", "7"], "{out}");
    assert_eq!(row("port_rcv_data"), ["port", "1", "counters", "port_rcv_data", "-", "123456"], "{out}");
    assert!(out.contains("* about CQs and their completions"), "{out}");
}

#[test]
fn json_lists_every_counter_with_its_scope() {
    let fake = FakeSysfs::new("json");
    let o = dvcq(&["stat", "-d", "rxe0", "-n", "0", "--json", "--sysfs", fake.path().to_str().unwrap()], None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["device"], "rxe0");
    let names: Vec<&str> = v["counters"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["rcvd_seq_err", "sent_pkts"], "lifespan is a setting, not a counter");
    assert_eq!(v["counters"][0]["scope"], "port 1");
    assert_eq!((v["counters"][0]["after"].as_u64(), v["counters"][0]["cq_related"].as_bool()), (Some(2), Some(true)));
    assert!(v["cq"].is_null(), "no workload with -n 0");
}

#[test]
fn unknown_devices_are_one_clear_line() {
    let fake = FakeSysfs::new("unknown");
    let o = dvcq(&["stat", "-d", "mlx5_9", "-n", "0", "--sysfs", fake.path().to_str().unwrap()], None);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with("dvcq stat: no RDMA device \"mlx5_9\" under "), "{err}");
    assert!(err.trim_end().ends_with("(devices there: mlx5_0, rxe0)"), "{err}");
    // With a workload the device must be opened: the error names the devices that exist.
    let o = dvcq(&["stat", "-d", "mlx5_9"], None);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with("dvcq stat: ") && err.contains("mlx5_9") && err.contains("model-mlx5"), "{err}");
}

/// On a model: the model's counters move by what the workload did, and the CQ's statistics
/// are printed next to them.
#[test]
fn a_models_counters_move_with_the_workload() {
    for dev in ["model-mlx5", "model-e810"] {
        let o = dvcq(&["stat", "-d", dev, "-n", "40", "--json"], None);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["source"], "model");
        let c = |name: &str| v["counters"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap().clone();
        assert_eq!((c("cqes_written")["before"].as_u64(), c("cqes_written")["delta"].as_i64()), (Some(0), Some(40)));
        assert_eq!(c("cq_overflow")["after"], 0);
        let cq = &v["cq"];
        assert_eq!((cq["writes"].as_u64(), cq["stats"]["completions"].as_u64()), (Some(40), Some(40)), "{dev}");
        assert_eq!(cq["advice"]["high_water"], 40, "{dev}");
        assert_eq!(cq["backend"]["kind"], "model", "{dev}");
    }
}
