//! Shared by the command's tests on the emulated devices (`emu_ops/`, `emu_devices.rs`,
//! `emu_irdma.rs`): running a test again as a child process under the preload, two such
//! processes exchanging their endpoints through files, and polling for a count of
//! completions. Included with `#[path]`; the including crate declares `mod preload`
//! (`emu/tests/support/preload.rs`) at its root.

// Each test that includes this uses only some of it.
#![allow(dead_code)]

use crate::preload::{emulated, preload};
use dvcq::verbs::Endpoint;
use dvcq::Completion;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// Set in the child process a test runs itself in under the preload.
pub const CHILD: &str = "DVCQ_EMU_TEST_CHILD";
/// The role (`responder`, `requester`) of a process of a two-process test.
pub const ROLE: &str = "DVCQ_EMU_ROLE";
/// The directory the two processes of a two-process test exchange their files in.
pub const DIR: &str = "DVCQ_EMU_DIR";

/// The name libtest knows test `name` by, written in module `module` (`module_path!()`):
/// the module path without the crate's name, then `name`.
pub fn test_path(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_, inner)) => format!("{inner}::{name}"),
        None => name.to_string(),
    }
}

/// Runs the test `name` of `module` (`module_path!()`) again in a child process with the
/// preload loaded, unless this is that child; true in the child (the caller then runs the
/// body, and prints `{tag}: done` at its end).
pub fn in_emulated_child(module: &str, name: &str, tag: &str) -> bool {
    if std::env::var_os(CHILD).is_some() {
        return true;
    }
    let me = std::env::current_exe().unwrap();
    let out = emulated(&me, &preload())
        .args(["--exact", &test_path(module, name), "--nocapture"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the emulated run failed:\n{all}");
    assert!(all.contains(&format!("{tag}: done")), "the emulated run did not get to the end:\n{all}");
    false
}

/// In a process of a two-process test: its role and the directory of the exchange.
pub fn role() -> Option<(String, PathBuf)> {
    let role = std::env::var(ROLE).ok()?;
    Some((role, PathBuf::from(std::env::var(DIR).expect("a role comes with its directory"))))
}

/// Runs the test `name` of `module` again as a responder and a requester process under the
/// preload, with `envs` and a fresh directory `{dir}.{pid}` to exchange files in, and checks
/// that each printed `{tag}: {role} done`.
pub fn two_processes(module: &str, name: &str, tag: &str, dir: &str, envs: &[(&str, &str)]) {
    let dir = std::env::temp_dir().join(format!("{dir}.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (lib, me, test) = (preload(), std::env::current_exe().unwrap(), test_path(module, name));
    let spawn = |role: &str| -> Child {
        let mut c = emulated(&me, &lib);
        c.args(["--exact", &test, "--nocapture"]).env(ROLE, role).env(DIR, &dir);
        c.envs(envs.iter().copied()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
    };
    let children = [("responder", spawn("responder")), ("requester", spawn("requester"))];
    for (role, child) in children {
        let out = child.wait_with_output().unwrap();
        let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "the {role} failed:\n{all}");
        assert!(all.contains(&format!("{tag}: {role} done")), "the {role} did not get to the end:\n{all}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Waits for file `name` in `dir` (written whole by [`put_file`]) and returns its text.
pub fn wait_file(dir: &Path, name: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(s) = std::fs::read_to_string(dir.join(name)) {
            return s;
        }
        assert!(Instant::now() < deadline, "no {name} within 60 s");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Writes file `name` in `dir` whole, through a rename.
pub fn put_file(dir: &Path, name: &str, text: &str) {
    let tmp = dir.join(format!("{name}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(tmp, dir.join(name)).unwrap();
}

/// An endpoint as one line of text, read back by [`ep_parse`].
pub fn ep_text(e: &Endpoint) -> String {
    let gid: Vec<String> = e.gid.iter().map(|b| b.to_string()).collect();
    format!("{} {} {} {} {}", e.qpn, e.lid, e.gid_index, e.psn, gid.join(","))
}

/// The endpoint [`ep_text`] wrote.
pub fn ep_parse(s: &str) -> Endpoint {
    let w: Vec<&str> = s.split_whitespace().collect();
    let mut gid = [0u8; 16];
    for (g, v) in gid.iter_mut().zip(w[4].split(',')) {
        *g = v.parse().unwrap();
    }
    Endpoint {
        qpn: w[0].parse().unwrap(),
        lid: w[1].parse().unwrap(),
        gid_index: w[2].parse().unwrap(),
        psn: w[3].parse().unwrap(),
        gid,
    }
}

/// Polls `cq` until `n` completions came (`secs` seconds at most), in the order they came.
pub fn poll_n(cq: &mut dvcq::Cq, n: usize, secs: u64) -> Vec<Completion> {
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(secs);
    while got.len() < n && Instant::now() < deadline {
        let mut wcs = [Completion::default(); 8];
        got.extend_from_slice(cq.poll(&mut wcs));
    }
    assert_eq!(got.len(), n, "completions within {secs} s: {got:?}");
    got
}
