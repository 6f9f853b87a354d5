//! Finding rdma-core for the build script: pkg-config's answer for libibverbs and libmlx5,
//! and every input that answer depends on, told to cargo so that installing or removing
//! rdma-core (or libclang) reruns the build script instead of replaying a stale answer.
//!
//! Cargo reruns a build script when a `rerun-if-changed` path is newer than its last run
//! (a directory: anything under it, the directory itself included, so a file added or
//! removed counts), and on every build when such a path does not exist. So only paths that
//! exist are named: the pkg-config search directories (where `libibverbs.pc` appears), and
//! the package manager's database, which changes whenever a package is installed or
//! removed (libclang and pkg-config themselves included).

use std::env;
use std::path::{Path, PathBuf};

/// What pkg-config found: the include directories of libibverbs and libmlx5.
pub struct Found {
    /// `-I` directories for bindgen.
    pub include_paths: Vec<PathBuf>,
}

/// The search directories pkg-config uses when it cannot be asked (it is not installed):
/// the usual defaults of Debian, Fedora and source installs.
const FALLBACK_PC_DIRS: &[&str] = &[
    "/usr/local/lib/pkgconfig",
    "/usr/local/share/pkgconfig",
    "/usr/lib/pkgconfig",
    "/usr/lib64/pkgconfig",
    "/usr/share/pkgconfig",
];

/// Package databases whose change means a package was installed or removed: dpkg's, rpm's
/// (both formats), apk's, pacman's.
const PACKAGE_DBS: &[&str] = &[
    "/var/lib/dpkg/status",
    "/var/lib/rpm/rpmdb.sqlite",
    "/var/lib/rpm/Packages",
    "/lib/apk/db/installed",
    "/var/lib/pacman/local",
];

/// Environment variables libclang is found by (clang-sys) and bindgen reads.
const CLANG_ENV: &[&str] = &["LIBCLANG_PATH", "LLVM_CONFIG_PATH", "CLANG_PATH"];

/// Looks for libibverbs (at least 1.8) and libmlx5 with pkg-config, after telling cargo
/// what the answer depends on ([`watch`]). `Err` is the reason, one line, for the model-only
/// build's warning.
pub fn find() -> Result<Found, String> {
    watch();
    let verbs = pkg_config::Config::new()
        .atleast_version("1.8")
        .probe("libibverbs")
        .map_err(|e| format!("rdma-core's libibverbs was not found by pkg-config ({})", reason(&e)))?;
    // libmlx5 ships with libibverbs-dev on every distribution that packages rdma-core; its
    // absence means mlx5dv cannot be used, not that the build must fail.
    let mlx5 = pkg_config::Config::new()
        .probe("libmlx5")
        .map_err(|e| format!("rdma-core's libmlx5 (mlx5dv) was not found by pkg-config ({})", reason(&e)))?;
    let mut include_paths = verbs.include_paths;
    include_paths.extend(mlx5.include_paths);
    Ok(Found { include_paths })
}

/// Tells cargo to rerun the build script when rdma-core or libclang may have appeared or
/// gone: the pkg-config search directories and package databases that exist, and the
/// environment variables libclang is found by (pkg-config's own variables are named by the
/// pkg-config crate).
pub fn watch() {
    for var in CLANG_ENV {
        println!("cargo::rerun-if-env-changed={var}");
    }
    let mut paths: Vec<PathBuf> = pc_dirs();
    paths.extend(PACKAGE_DBS.iter().map(PathBuf::from));
    if let Some(dir) = env::var_os("LIBCLANG_PATH") {
        paths.push(dir.into());
    }
    paths.sort();
    paths.dedup();
    for p in paths.iter().filter(|p| p.exists()) {
        println!("cargo::rerun-if-changed={}", p.display());
    }
}

/// The directories pkg-config searches, in its order: `PKG_CONFIG_PATH`, then
/// `PKG_CONFIG_LIBDIR` or else pkg-config's built-in path.
pub fn pc_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut add = |list: &std::ffi::OsStr| dirs.extend(env::split_paths(list).filter(|p| !p.as_os_str().is_empty()));
    if let Some(v) = targeted("PKG_CONFIG_PATH") {
        add(&v);
    }
    match targeted("PKG_CONFIG_LIBDIR") {
        Some(v) => add(&v),
        None => match builtin_pc_path() {
            Some(v) => add(std::ffi::OsStr::new(&v)),
            None => dirs.extend(FALLBACK_PC_DIRS.iter().map(PathBuf::from).chain(multiarch_pc_dir())),
        },
    }
    dirs
}

/// The search directories as one line for the warning.
fn searched() -> String {
    let mut dirs: Vec<String> = Vec::new();
    for d in pc_dirs() {
        let d = d.display().to_string();
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    if dirs.is_empty() {
        "no directory".into()
    } else {
        dirs.join(":")
    }
}

/// pkg-config's built-in search path (`pkg-config --variable pc_path pkg-config`), if it
/// runs.
fn builtin_pc_path() -> Option<String> {
    let exe = targeted("PKG_CONFIG").unwrap_or_else(|| "pkg-config".into());
    let out = std::process::Command::new(exe).args(["--variable", "pc_path", "pkg-config"]).output().ok()?;
    let s = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !s.trim().is_empty()).then(|| s.trim().to_string())
}

/// Debian's per-architecture directory (`/usr/lib/x86_64-linux-gnu/pkgconfig`) for the
/// target being built.
fn multiarch_pc_dir() -> Option<PathBuf> {
    let arch = env::var("CARGO_CFG_TARGET_ARCH").ok()?;
    let os = env::var("CARGO_CFG_TARGET_OS").ok()?;
    let env_ = env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    Some(Path::new("/usr/lib").join(format!("{arch}-{os}-{env_}")).join("pkgconfig"))
}

/// A pkg-config variable as the pkg-config crate reads it: per target first, then plain.
fn targeted(var: &str) -> Option<std::ffi::OsString> {
    let target = env::var("TARGET").unwrap_or_default();
    let host = env::var("HOST").unwrap_or_default();
    let kind = if host == target { "HOST" } else { "TARGET" };
    [format!("{var}_{target}"), format!("{var}_{}", target.replace('-', "_")), format!("{kind}_{var}"), var.into()]
        .iter()
        .find_map(env::var_os)
}

/// Why pkg-config did not find a library, in one line: what pkg-config itself said and
/// where it looked (the crate's own message begins with an empty line and goes on for a
/// page, so its first line is empty).
pub fn reason(e: &pkg_config::Error) -> String {
    match e {
        pkg_config::Error::ProbeFailure { output, .. } | pkg_config::Error::Failure { output, .. } => {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let lines: Vec<&str> =
                stderr.lines().map(|l| l.trim().trim_end_matches('.')).filter(|l| !l.is_empty()).collect();
            let said = match lines.first() {
                // A version below the one asked for is said on a later line.
                Some(first) => match lines.iter().skip(1).find(|l| l.contains("version")) {
                    Some(version) => format!("{first}: {version}"),
                    None => first.to_string(),
                },
                None => format!("pkg-config exited with {}", output.status),
            };
            format!("{said}; searched {}", searched())
        }
        pkg_config::Error::Command { cause, .. } if cause.kind() == std::io::ErrorKind::NotFound => {
            "pkg-config itself is not installed; Debian/Ubuntu: apt-get install pkg-config".into()
        }
        other => {
            let text = other.to_string();
            text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("no reason given").to_string()
        }
    }
}
