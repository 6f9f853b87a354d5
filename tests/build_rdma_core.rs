//! The build a newcomer gets. It notices rdma-core appearing and disappearing: a scratch
//! crate whose build script is `build/rdma_core.rs`'s search (the one dvcq's `build.rs` runs
//! before bindgen) is built with pkg-config looking only in an empty directory, then again
//! after a `libibverbs.pc` and a `libmlx5.pc` appear there, then after they go. Cargo must
//! rerun the search each time the directory changed, and only then: a build with nothing
//! changed is fresh. And `dvcq --version` says which build this is, for the tools that need
//! real devices (`tests/vm/run` refuses a model-only one).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The scratch crate: its build script prints the search's verdict as a warning and sets
/// `cfg(found)`, which its program prints.
fn scratch(root: &Path) {
    let module = Path::new(env!("CARGO_MANIFEST_DIR")).join("build").join("rdma_core.rs");
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(
        root.join("Cargo.toml"),
        "[package]\nname = \"scratch\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n\
         [build-dependencies]\npkg-config = \"0.3\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(
        root.join("build.rs"),
        format!(
            "#[path = {module:?}]\n#[allow(dead_code)]\nmod rdma_core;\n\
             fn main() {{\n\
             \x20   println!(\"cargo::rustc-check-cfg=cfg(found)\");\n\
             \x20   match rdma_core::find() {{\n\
             \x20       Ok(_) => println!(\"cargo::rustc-cfg=found\"),\n\
             \x20       Err(why) => println!(\"cargo::warning=model-only: {{why}}\"),\n\
             \x20   }}\n\
             }}\n"
        ),
    )
    .unwrap();
    std::fs::write(
        root.join("src").join("main.rs"),
        "fn main() { println!(\"{}\", if cfg!(found) { \"glue\" } else { \"model-only\" }); }\n",
    )
    .unwrap();
}

/// A `.pc` file pkg-config accepts, with nothing to link or include (the scratch program
/// links nothing).
fn pc(dir: &Path, name: &str, version: &str) {
    let text = format!("Name: {name}\nDescription: a stand-in\nVersion: {version}\nLibs:\nCflags:\n");
    std::fs::write(dir.join(format!("{name}.pc")), text).unwrap();
}

/// Builds and runs the scratch crate: (what its program printed, cargo's stderr).
fn build(root: &Path, pc_dir: &Path) -> (String, String) {
    let out = Command::new(env!("CARGO"))
        .args(["run", "-v", "--offline", "--manifest-path"])
        .arg(root.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(root.join("target"))
        .env("PKG_CONFIG_PATH", pc_dir)
        // Only the scratch directory: this machine's own rdma-core must not be found.
        .env("PKG_CONFIG_LIBDIR", pc_dir)
        .env_remove("PKG_CONFIG")
        .env_remove("PKG_CONFIG_SYSROOT_DIR")
        .env_remove("RUSTFLAGS")
        .output()
        .expect("run cargo");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "cargo run of the scratch crate failed:\n{stderr}");
    (String::from_utf8_lossy(&out.stdout).trim().to_string(), stderr)
}

/// Whether cargo ran the scratch crate's build script in that build.
fn ran_build_script(stderr: &str) -> bool {
    stderr.lines().any(|l| l.contains("Running `") && l.contains("build-script-build"))
}

#[test]
fn build_script_reruns_when_rdma_core_appears_or_goes() {
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("build_rerun");
    let _ = std::fs::remove_dir_all(&root);
    let pc_dir = root.join("pkgconfig");
    std::fs::create_dir_all(&pc_dir).unwrap();
    scratch(&root);

    let (said, stderr) = build(&root, &pc_dir);
    assert_eq!(said, "model-only", "{stderr}");
    let warning = stderr.lines().find(|l| l.contains("model-only:")).expect("the model-only warning");
    assert!(!warning.contains("()"), "the warning says why: {warning}");
    assert!(warning.contains("libibverbs") && warning.contains("not found"), "{warning}");
    assert!(warning.contains(&pc_dir.display().to_string()), "the warning names where it looked: {warning}");

    // Nothing changed: the script does not run again (a rerun would recompile the crate).
    let (said, stderr) = build(&root, &pc_dir);
    assert_eq!(said, "model-only");
    assert!(!ran_build_script(&stderr), "a build with nothing changed reran the build script:\n{stderr}");

    // rdma-core installed.
    pc(&pc_dir, "libibverbs", "1.14.44.0");
    pc(&pc_dir, "libmlx5", "1.24.44.0");
    let (said, stderr) = build(&root, &pc_dir);
    assert!(ran_build_script(&stderr), "rdma-core appeared and the build script did not rerun:\n{stderr}");
    assert_eq!(said, "glue", "{stderr}");
    let (said, stderr) = build(&root, &pc_dir);
    assert_eq!(said, "glue");
    assert!(!ran_build_script(&stderr), "a build with nothing changed reran the build script:\n{stderr}");

    // Too old a libibverbs: refused, saying the version.
    pc(&pc_dir, "libibverbs", "1.1");
    let (said, stderr) = build(&root, &pc_dir);
    assert_eq!(said, "model-only", "{stderr}");
    let warning = stderr.lines().find(|l| l.contains("model-only:")).expect("the model-only warning");
    assert!(warning.contains("1.8") || warning.contains("version"), "{warning}");

    // rdma-core removed.
    std::fs::remove_file(pc_dir.join("libibverbs.pc")).unwrap();
    std::fs::remove_file(pc_dir.join("libmlx5.pc")).unwrap();
    let (said, stderr) = build(&root, &pc_dir);
    assert!(ran_build_script(&stderr), "rdma-core went and the build script did not rerun:\n{stderr}");
    assert_eq!(said, "model-only", "{stderr}");
}

/// `dvcq --version` says model-only exactly when this build cannot open a real device.
#[test]
fn version_says_whether_this_build_reaches_real_devices() {
    let out = Command::new(env!("CARGO_BIN_EXE_dvcq")).arg("--version").output().expect("run dvcq --version");
    assert!(out.status.success());
    let line = String::from_utf8(out.stdout).unwrap();
    assert_eq!(line.lines().count(), 1, "{line:?}");
    let model_only = matches!(dvcq::Context::open("mlx5_0"), Err(dvcq::Error::ModelOnlyBuild { .. }));
    if model_only {
        assert!(line.starts_with("dvcq ") && line.contains("model-only: built without rdma-core"), "{line}");
    } else {
        assert!(line.starts_with("dvcq ") && line.contains("(built with rdma-core)"), "{line}");
    }
}
