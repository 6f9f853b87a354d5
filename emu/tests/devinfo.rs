//! rdma-core's own `ibv_devinfo -v` (ibverbs-utils), unmodified, under the preload: it
//! discovers `mlx5_0` through the emulated sysfs tree, opens it through libmlx5 (GET_CONTEXT,
//! the UAR mmaps), and prints what QUERY_DEVICE and QUERY_PORT answered and the GIDs sysfs
//! lists.

#[path = "support/preload.rs"]
mod preload;
#[path = "../../tests/support/skip.rs"]
mod skip;

use preload::{emulated, field, preload};
use std::process::Command;

/// Whether a program is on PATH; a skip (a failure in CI) when not.
fn have(program: &str, package: &str) -> bool {
    let found =
        Command::new("sh").args(["-c", &format!("command -v {program}")]).output().is_ok_and(|o| o.status.success());
    if !found {
        skip::skip_check(&format!("{program} is not installed (Debian package {package})"));
    }
    found
}

#[test]
fn ibv_devinfo_lists_the_emulated_connectx6_dx() {
    if !have("ibv_devinfo", "ibverbs-utils") {
        return;
    }
    let out = emulated("ibv_devinfo", &preload()).arg("-v").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "ibv_devinfo failed: {}\n{text}", String::from_utf8_lossy(&out.stderr));
    let f = |k| field(&text, k).unwrap_or_else(|| panic!("no {k} in:\n{text}"));
    assert_eq!(f("hca_id"), "mlx5_0");
    assert_eq!(f("fw_ver"), "22.36.1010");
    assert_eq!(f("node_guid"), "0c42:a103:0065:7e0a");
    assert_eq!(f("vendor_id"), "0x02c9");
    assert_eq!(f("vendor_part_id"), "4125");
    assert_eq!(f("board_id"), "MT_0000000531");
    assert_eq!(f("max_qp"), "131072");
    assert_eq!(f("max_qp_wr"), "32768");
    assert_eq!(f("max_sge"), "30");
    assert_eq!(f("max_cqe"), "4194303");
    assert_eq!(f("max_srq_wr"), "32767");
    assert_eq!(f("atomic_cap"), "ATOMIC_HCA (1)");
    assert_eq!(f("hca_core_clock"), "1000000kHZ");
    assert_eq!(f("num_comp_vectors"), "8");
    assert_eq!(f("state"), "PORT_ACTIVE (4)");
    assert_eq!(f("active_mtu"), "4096 (5)");
    assert_eq!(f("link_layer"), "Ethernet");
    assert_eq!(f("gid_tbl_len"), "2");
    assert_eq!(f("GID[  0]"), "fe80:0000:0000:0000:0e42:a1ff:fe65:7e0a, RoCE v1");
    assert_eq!(f("GID[  1]"), "fe80::e42:a1ff:fe65:7e0a, RoCE v2");
}

#[test]
fn without_the_preload_there_is_no_mlx5_0() {
    if !have("ibv_devices", "ibverbs-utils") {
        return;
    }
    // This host has no RDMA device: what the test above found is the emulator's.
    let out = Command::new("ibv_devices").output().unwrap();
    assert!(!String::from_utf8_lossy(&out.stdout).contains("mlx5_0"));
}

#[test]
fn every_process_finds_the_same_sysfs_tree_under_sysfs_path() {
    // The preload points SYSFS_PATH at its tree before main (overriding what was set); two
    // processes share one tree, which stays for the next.
    let lib = preload();
    let run = || {
        let out = emulated("sh", &lib)
            .args(["-c", "test -f \"$SYSFS_PATH/class/infiniband_verbs/uverbs0/ibdev\" && echo \"$SYSFS_PATH\""])
            .env("SYSFS_PATH", "/nonexistent")
            .output()
            .unwrap();
        assert!(out.status.success(), "no tree under SYSFS_PATH in the emulated process");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let (a, b) = (run(), run());
    assert_eq!(a, b);
    assert!(a.contains("dvcq-emu-") && a.contains("/sysfs-"), "{a}");
    assert!(std::path::Path::new(&a).is_dir());
}

#[test]
fn ibv_devinfo_lists_the_emulated_e810_beside_it() {
    if !have("ibv_devinfo", "ibverbs-utils") {
        return;
    }
    // libirdma opens it: GET_CONTEXT, the doorbell page's mmap and its own ALLOC_PD; the
    // firmware version is printed by libirdma's query (major.minor).
    let out = emulated("ibv_devinfo", &preload()).args(["-v", "-d", "irdma0"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "ibv_devinfo failed: {}\n{text}", String::from_utf8_lossy(&out.stderr));
    let f = |k| field(&text, k).unwrap_or_else(|| panic!("no {k} in:\n{text}"));
    assert_eq!(f("hca_id"), "irdma0");
    assert_eq!(f("fw_ver"), "1.3");
    assert_eq!(f("node_guid"), "b696:91ff:fea5:3c10");
    assert_eq!(f("vendor_id"), "0x8086");
    assert_eq!(f("vendor_part_id"), "5522");
    assert_eq!(f("hw_ver"), "0x2");
    assert_eq!(f("max_qp_wr"), "4063");
    assert_eq!(f("max_sge"), "13");
    assert_eq!(f("max_cqe"), "1048574");
    assert_eq!(f("max_srq"), "0");
    assert_eq!(f("atomic_cap"), "ATOMIC_NONE (0)");
    assert_eq!(f("state"), "PORT_ACTIVE (4)");
    assert_eq!(f("link_layer"), "Ethernet");
    assert_eq!(f("gid_tbl_len"), "1");
    assert_eq!(f("GID[  0]"), "fe80::b696:91ff:fea5:3c10, RoCE v2");
    // Both devices are listed.
    let out = emulated("ibv_devices", &preload()).output().unwrap();
    let list = String::from_utf8_lossy(&out.stdout);
    assert!(list.contains("mlx5_0") && list.contains("irdma0"), "{list}");
}
