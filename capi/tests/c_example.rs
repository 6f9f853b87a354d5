//! examples/c/poll.c built as a user builds it: `capi/install` into a fresh prefix, then
//! `cc` with `pkg-config --cflags --libs dvcq` (and the static variant), run on both models,
//! its output checked. Also: the header's layout checks against verbs.h compile.
//!
//! The libraries installed are the ones cargo built for this test run (the test binary's
//! own directory), so no cargo runs inside the test.

#[path = "../../tests/support/skip.rs"]
mod skip;

#[path = "../../emu/tests/support/preload.rs"]
mod emu;

use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// A temporary prefix, removed when the test ends.
struct Prefix(PathBuf);

impl Prefix {
    fn new(name: &str) -> Prefix {
        let p = std::env::temp_dir().join(format!("dvcq-capi-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Prefix(p)
    }
}

impl Drop for Prefix {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether `tool` runs here; if not, the check is skipped (a failure in CI).
fn have(tool: &str) -> bool {
    let ok = Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success());
    if !ok {
        skip::skip_check(&format!("{tool} is not installed: the C example cannot be built"));
    }
    ok
}

/// Where cargo put libdvcq_capi.so and .a for this run: beside this test's binary.
fn built_dir() -> PathBuf {
    std::env::current_exe().unwrap().parent().unwrap().to_path_buf()
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{cmd:?} failed ({}):\n{text}", out.status);
    text
}

/// `capi/install --prefix P --from <this run's libraries>`.
fn install(prefix: &Path) {
    run(Command::new("bash")
        .arg(Path::new(ROOT).join("capi/install"))
        .arg("--prefix")
        .arg(prefix)
        .arg("--from")
        .arg(built_dir()));
    for f in ["lib/libdvcq.so.0", "lib/libdvcq.so", "lib/libdvcq.a", "include/dvcq.h", "lib/pkgconfig/dvcq.pc"] {
        assert!(prefix.join(f).exists(), "capi/install left no {f}");
    }
}

/// `pkg-config ARGS dvcq` against the prefix, split into words.
fn pkg_config(prefix: &Path, args: &[&str]) -> Vec<String> {
    let out =
        run(Command::new("pkg-config").env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig")).args(args).arg("dvcq"));
    out.split_whitespace().map(String::from).collect()
}

/// Runs the example on both models and checks what it printed.
fn check_runs(exe: &Path) {
    for model in ["model-mlx5", "model-e810"] {
        let out = run(Command::new(exe).arg(model).env_remove("LD_LIBRARY_PATH"));
        for want in [
            format!("device {model}: backend model ("),
            "wc wr_id=7 status=0 opcode=1 (RDMA_WRITE)".to_string(),
            "wc wr_id=8 status=0 opcode=128 (RECV) byte_len=8".to_string(),
            "wc wr_id=9 status=0 opcode=0 (SEND)".to_string(),
            "data: written \"dvcq!!!!\" received \"dvcq!!!!\"".to_string(),
            "stats: polls=".to_string(),
            "completions=3 errors=0 faults=0".to_string(),
            "views: not on this backend (-95)".to_string(),
            "errors: dvcq_cq_poll(NULL) = -22 (-EINVAL): dvcq_cq_poll: the struct dvcq_cq is NULL".to_string(),
            format!("ok: 3 completions on {model}"),
        ] {
            assert!(out.contains(&want), "{} {model}: no {want:?} in its output:\n{out}", exe.display());
        }
    }
}

#[test]
fn the_c_example_builds_through_pkg_config_and_polls_both_models() {
    if !have("cc") || !have("pkg-config") {
        return;
    }
    let prefix = Prefix::new("shared");
    install(&prefix.0);
    let exe = prefix.0.join("poll");
    let mut cc = Command::new("cc");
    cc.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&exe)
        .arg(Path::new(ROOT).join("examples/c/poll.c"))
        .args(pkg_config(&prefix.0, &["--cflags", "--libs"]))
        .arg(format!("-Wl,-rpath,{}", prefix.0.join("lib").display()));
    run(&mut cc);
    // It links the installed shared library by its SONAME.
    let needed = run(Command::new("readelf").arg("-d").arg(&exe));
    assert!(needed.contains("[libdvcq.so.0]"), "poll does not need libdvcq.so.0:\n{needed}");
    check_runs(&exe);
}

#[test]
fn the_c_example_links_statically_with_the_private_libraries_pkg_config_names() {
    if !have("cc") || !have("pkg-config") {
        return;
    }
    let prefix = Prefix::new("static");
    install(&prefix.0);
    let exe = prefix.0.join("poll-static");
    let libs: Vec<String> = pkg_config(&prefix.0, &["--static", "--libs"])
        .into_iter()
        .map(|w| if w == "-ldvcq" { "-l:libdvcq.a".to_string() } else { w })
        .collect();
    let mut cc = Command::new("cc");
    cc.args(["-std=c11", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(Path::new(ROOT).join("examples/c/poll.c"))
        .args(pkg_config(&prefix.0, &["--static", "--cflags"]))
        .args(libs);
    run(&mut cc);
    // The installed shared library is not needed, nor reachable: remove it.
    std::fs::remove_file(prefix.0.join("lib/libdvcq.so.0")).unwrap();
    check_runs(&exe);
}

/// Where verbs.h is included first, the header's static assertions compare struct dvcq_wc
/// with struct ibv_wc, field by field, and the DVCQ_WC_* numbers with IBV_WC_*.
#[test]
fn the_header_checks_its_wc_against_verbs_h_at_compile_time() {
    if !have("cc") {
        return;
    }
    let verbs = Command::new("pkg-config").args(["--exists", "libibverbs"]).status().is_ok_and(|s| s.success());
    if !verbs {
        skip::skip_check("libibverbs-dev (verbs.h) is not installed: the header's ibv_wc checks cannot compile");
        return;
    }
    let include = Path::new(ROOT).join("capi/include");
    let dir = Prefix::new("verbs");
    let compile = |src: &str| {
        let file = dir.0.join("check.c");
        std::fs::write(&file, src).unwrap();
        Command::new("cc")
            .args(["-std=c11", "-Wall", "-Werror", "-fsyntax-only", "-I"])
            .arg(&include)
            .arg(&file)
            .output()
            .unwrap()
    };
    let ok = compile("#include <infiniband/verbs.h>\n#include <dvcq.h>\nint main(void) { return 0; }\n");
    assert!(ok.status.success(), "dvcq.h after verbs.h:\n{}", String::from_utf8_lossy(&ok.stderr));
    // The checks are live: a header whose struct dvcq_wc lost a field fails them.
    let header = std::fs::read_to_string(include.join("dvcq.h")).unwrap();
    let broken = header.replacen("  uint32_t src_qp;\n", "", 1);
    assert_ne!(broken, header, "the header has no src_qp line to remove");
    std::fs::write(dir.0.join("dvcq.h"), broken).unwrap();
    let file = dir.0.join("broken.c");
    std::fs::write(&file, "#include <infiniband/verbs.h>\n#include \"dvcq.h\"\nint main(void) { return 0; }\n")
        .unwrap();
    let bad = Command::new("cc").args(["-std=c11", "-fsyntax-only"]).arg(&file).output().unwrap();
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success() && err.contains("is not where struct ibv_wc has it"), "{err}");
}

/// examples/c/attach.c, a verbs program that hands its CQ and QP to dvcq, builds against
/// the install (with libibverbs); it runs where `DVCQ_DEVICE` names an RDMA device (the VM
/// test sets it), as does poll.c, and otherwise on the emulated ConnectX-6 Dx and E810
/// under rdma-core's real providers, where dvcq's direct backends must take the CQ.
#[test]
fn the_attach_example_builds_and_runs_on_dvcq_device() {
    if !have("cc") || !have("pkg-config") {
        return;
    }
    let verbs = Command::new("pkg-config").args(["--exists", "libibverbs"]).status().is_ok_and(|s| s.success());
    if !verbs {
        skip::skip_check("libibverbs-dev is not installed: examples/c/attach.c cannot be built");
        return;
    }
    let prefix = Prefix::new("attach");
    install(&prefix.0);
    let exe = prefix.0.join("attach");
    let mut cc = Command::new("cc");
    cc.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&exe)
        .arg(Path::new(ROOT).join("examples/c/attach.c"))
        .args(pkg_config(&prefix.0, &["--cflags", "--libs"]))
        .args(run(Command::new("pkg-config").args(["--cflags", "--libs", "libibverbs"])).split_whitespace())
        .arg(format!("-Wl,-rpath,{}", prefix.0.join("lib").display()));
    run(&mut cc);
    let Some(device) = std::env::var("DVCQ_DEVICE").ok().filter(|n| !n.is_empty()) else {
        let emu_lib = emu::preload();
        for (device, backend) in [("mlx5_0", "mlx5"), ("irdma0", "irdma")] {
            let out = run(emu::emulated(&exe, &emu_lib).arg(device));
            assert!(out.contains(&format!("device {device}: backend {backend} (")), "{out}");
            assert!(out.contains("wc wr_id=7 status=success opcode=1 data=\"dvcq!!!!\""), "{out}");
        }
        return;
    };
    let out = run(Command::new(&exe).arg(&device));
    assert!(out.contains(&format!("device {device}: backend ")), "{out}");
    assert!(out.contains("wc wr_id=7 status=success opcode=1 data=\"dvcq!!!!\""), "{out}");
    let mut cc = Command::new("cc");
    let poll = prefix.0.join("poll");
    cc.args(["-std=c11", "-o"])
        .arg(&poll)
        .arg(Path::new(ROOT).join("examples/c/poll.c"))
        .args(pkg_config(&prefix.0, &["--cflags", "--libs"]))
        .arg(format!("-Wl,-rpath,{}", prefix.0.join("lib").display()));
    run(&mut cc);
    let out = run(Command::new(&poll).arg(&device));
    assert!(out.contains(&format!("ok: 3 completions on {device}")), "{out}");
}
