//! Receive work queues on the emulated `mlx5_0` through the real libibverbs and libmlx5:
//! `tests/c/rwq_workout.c` creates WQs, checks the ring libmlx5 made through
//! `mlx5dv_init_obj`, moves them through their states, posts receives and destroys them,
//! with the kernel's refusals on the way.

#[path = "support/build_c.rs"]
mod build_c;
#[path = "support/preload.rs"]
mod preload;
#[path = "../../tests/support/skip.rs"]
mod skip;

use preload::{emulated, preload, workspace_root};
use std::path::PathBuf;

/// `emu/tests/c/<name>.c` built against the installed libibverbs ([`build_c::build_c`]).
fn build_c(name: &str) -> Option<PathBuf> {
    let dir = std::env::temp_dir().join(format!("dvcq-emu-tests-{}", std::process::id()));
    build_c::build_c(&workspace_root().join(format!("emu/tests/c/{name}.c")), &dir)
}

#[test]
fn receive_wqs_are_created_posted_to_and_destroyed_through_libmlx5() {
    let Some(exe) = build_c("rwq_workout") else { return };
    let out = emulated(&exe, &preload()).output().unwrap();
    let _ = std::fs::remove_dir_all(exe.parent().unwrap());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "rwq_workout failed:\n{stdout}{stderr}");
    let mut lines = stdout.lines();
    assert_eq!(
        lines.next(),
        Some("rwq_workout: 2 WQs, 16 entries of 16 bytes, 4 receives posted, RESET-RDY-ERR, CQ busy under a WQ"),
        "{stdout}{stderr}"
    );
    // The device's RQ numbers: two in a row, in a space of their own (not QPNs).
    let numbers = lines.next().and_then(|l| l.strip_prefix("rwq_workout: WQ numbers ")).expect("the numbers line");
    let n: Vec<u32> =
        numbers.split(' ').map(|v| u32::from_str_radix(v.trim_start_matches("0x"), 16).unwrap()).collect();
    assert_eq!(n.len(), 2);
    assert_eq!(n[1], n[0] + 1, "{numbers}");
    assert!(n[0] <= 0xff_ffff, "{numbers}");
}
