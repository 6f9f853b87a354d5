//! Finding the preload library for a test: builds `libdvcq_emu.so` with the profile and
//! target directory of the running test (a no-op when it is up to date) and returns its path.
//! Included with `#[path]` by the emulator's tests and the command's (`cli/tests/emu_devices.rs`).

// Each test that includes this uses only some of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace's root directory.
pub fn workspace_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    // The root crate's manifest dir is the workspace root; the emulator's (`emu/`) and the
    // command's (`cli/`) are directories in it.
    if here.join("emu").is_dir() {
        here.to_path_buf()
    } else {
        here.parent().expect("emu/ sits in the workspace").to_path_buf()
    }
}

/// The preload library, built now for this test's profile and target directory.
pub fn preload() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    // target/<profile>/deps/<test>-<hash>
    let profile_dir = exe.parent().and_then(Path::parent).expect("the test runs from target/<profile>/deps");
    let target_dir = profile_dir.parent().expect("target/<profile> has a parent");
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev",
        Some(other) => other,
        None => panic!("no profile directory above {}", exe.display()),
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args(["build", "--quiet", "-p", "dvcq-emu", "--profile", profile, "--manifest-path"])
        .arg(workspace_root().join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", target_dir)
        .output()
        .expect("cargo runs");
    assert!(out.status.success(), "building the preload failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let lib = profile_dir.join("libdvcq_emu.so");
    assert!(lib.is_file(), "cargo built no {}", lib.display());
    lib
}

/// A command that runs `program` under the emulator.
///
/// With `DVCQ_EMU_LOADER` set (tests/emu/run, for another rdma-core release than the
/// installed one), `program` runs through that dynamic loader, with the library path
/// `DVCQ_EMU_LIBRARY_PATH` and the preload given to the loader itself: a release built for
/// a newer glibc than the host's needs its own loader, and neither reaches the program's
/// own children.
pub fn emulated(program: impl AsRef<std::ffi::OsStr>, lib: &Path) -> Command {
    let mut c = match std::env::var_os("DVCQ_EMU_LOADER").filter(|l| !l.is_empty()) {
        Some(loader) => {
            let mut c = Command::new(loader);
            c.arg("--library-path").arg(std::env::var_os("DVCQ_EMU_LIBRARY_PATH").unwrap_or_default());
            c.arg("--preload").arg(lib).arg(program);
            c
        }
        None => {
            let mut c = Command::new(program);
            c.env("LD_PRELOAD", lib);
            c
        }
    };
    // The emulated device is rdma-core's to drive: a suite run with rdma-core switched off
    // for dvcq (`DVCQ_NO_RDMA_CORE=1`, CI's "tests without rdma-core") still runs these
    // programs with it, as they exist to test dvcq on rdma-core's real providers.
    c.env_remove("DVCQ_NO_RDMA_CORE");
    c
}

/// The value of the first line `key: value` (tabs and spaces around both trimmed) in a
/// report such as `ibv_devinfo`'s.
pub fn field<'a>(report: &'a str, key: &str) -> Option<&'a str> {
    report.lines().find_map(|l| l.trim().strip_prefix(key)?.strip_prefix(':').map(str::trim))
}

/// Whether some socket listens on TCP `port`, read from /proc so that no connection is taken
/// from a server that accepts exactly one (the pingpongs, perftest).
pub fn listening(port: u16) -> bool {
    let needle = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
        std::fs::read_to_string(f).unwrap_or_default().lines().any(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            cols.len() > 3 && cols[1].ends_with(&needle) && cols[3] == "0A"
        })
    })
}

/// What perftest says when its clock calibration (CPU cycles against wall time, no verbs
/// involved) was too disturbed by a loaded machine to give a rate; it then prints no report.
pub const PERFTEST_CLOCK: &str = "Correlation coefficient r^2";
