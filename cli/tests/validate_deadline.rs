//! `dvcq validate`'s per-check deadline: a check that never finishes (a device that stopped
//! producing completions) fails with a line saying so, at its deadline, and the checks after
//! it still run.

use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn a_check_that_never_finishes_fails_at_its_deadline_and_the_next_ones_run() {
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_dvcq"))
        .args(["validate", "-d", "model-mlx5", "--only", "rc_send", "--check-timeout", "2"])
        .args(["--stall-check", "rc_send_imm"])
        .output()
        .unwrap();
    let took = start.elapsed();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "a failed check makes validate exit 1:\n{text}");
    let row = |name: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} row in:\n{text}"))
            .to_string()
    };
    let stalled = row("rc_send_imm");
    assert!(stalled.contains(" fail ") && stalled.contains("did not finish within 2s"), "{stalled}");
    // The checks before and after it ran and passed.
    assert!(row("rc_send").contains(" pass "), "{text}");
    assert!(row("rc_send_inv").contains(" pass ") || row("rc_send_inv").contains(" skip "), "{text}");
    assert!(took < Duration::from_secs(60), "validate took {took:?}");
}

#[test]
fn a_zero_check_timeout_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_dvcq"))
        .args(["validate", "-d", "model-mlx5", "--check-timeout", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--check-timeout"));
}
