//! Shared by the integration tests that run the `dvcq` binary.

use std::io::Write;
use std::process::{Command, Output, Stdio};

/// Runs `dvcq` with `args`, feeding `stdin` (or nothing) to it.
pub fn dvcq(args: &[&str], stdin: Option<&str>) -> Output {
    dvcq_with_stdout(args, stdin, Stdio::piped())
}

/// [`dvcq`] with standard output going to `stdout`.
pub fn dvcq_with_stdout(args: &[&str], stdin: Option<&str>, stdout: Stdio) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_dvcq"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn dvcq");
    if let Some(text) = stdin {
        // A dvcq that refuses its arguments exits without reading its input; writing then
        // fails with a broken pipe, and the exit status and stderr tell the test the rest.
        match child.stdin.take().unwrap().write_all(text.as_bytes()) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            r => r.expect("write dvcq's stdin"),
        }
    }
    drop(child.stdin.take());
    child.wait_with_output().unwrap()
}
