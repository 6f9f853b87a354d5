//! Skipping a check that cannot run here, visibly. Included with `#[path]` by the tests that
//! need it, so the others do not carry it.
//!
//! libtest captures what a passing test prints with `println!`/`eprintln!`, so a skip said
//! that way is never seen. These write the line to the process's standard error directly,
//! which `cargo test` shows between its `test ... ok` lines.

// Each test that includes this uses only some of it.
#![allow(dead_code)]

use std::io::Write;

/// Whether this is a CI run (`CI` set, as CI services and `.ci/run`'s caller do, to
/// anything but `false`, `0` or nothing).
pub fn in_ci() -> bool {
    ci_value(std::env::var("CI").ok().as_deref())
}

/// [`in_ci`] for a given value of `CI`.
pub fn ci_value(value: Option<&str>) -> bool {
    value.is_some_and(|v| !matches!(v.trim(), "" | "0" | "false"))
}

/// A check CI is meant to run cannot run here (`why`): on a user's machine, one line on
/// standard error (`skip: why`) and the test goes on to pass; in CI, a test failure, since
/// there a skipped check would pass having checked nothing.
pub fn skip_check(why: &str) {
    skip_check_in(in_ci(), why);
}

/// [`skip_check`], told whether this is CI.
fn skip_check_in(ci: bool, why: &str) {
    if ci {
        panic!("skip: {why}; CI is meant to run this check, so here the skip is a failure");
    }
    say(&format!("skip: {why}"));
}

/// A check that cannot run on this machine and is not expected to in CI either (real
/// hardware): one line on standard error, in CI too.
pub fn skip_here(why: &str) {
    say(&format!("skip: {why}"));
}

/// One line on the process's standard error, past libtest's capture.
fn say(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

#[cfg(test)]
mod skip_tests {
    use super::*;

    /// `CI=true` (and any other value but the three that mean no) is CI; unset is not.
    #[test]
    fn ci_is_any_value_but_no() {
        assert!(ci_value(Some("true")) && ci_value(Some("1")) && ci_value(Some("yes")));
        assert!(!ci_value(None) && !ci_value(Some("")) && !ci_value(Some("0")) && !ci_value(Some("false")));
    }

    /// In CI a skipped check fails the test, saying what was skipped.
    #[test]
    fn a_skip_fails_in_ci_only() {
        let e = std::panic::catch_unwind(|| skip_check_in(true, "valgrind is not installed")).unwrap_err();
        assert_eq!(
            e.downcast_ref::<String>().map(String::as_str),
            Some("skip: valgrind is not installed; CI is meant to run this check, so here the skip is a failure")
        );
    }
}
