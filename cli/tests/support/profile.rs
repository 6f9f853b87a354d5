//! Which profile built the `dvcq` binary under test: the tests of the release build's machine
//! code (instruction figures, the hot path) need release's. Included with `#[path]` by them.

/// Why the `dvcq` binary under test is not the release profile's build (fat LTO, one codegen
/// unit), whose machine code the instruction figures and the hot-path check are about; `None`
/// when it is. Cargo puts a profile's binaries in `target/<profile>/`
/// (`target/<triple>/<profile>/` when cross-compiling): `release` for `--release`, `tests`
/// for the README's `--profile tests`.
pub fn not_release_profile() -> Option<String> {
    profile_of(env!("CARGO_BIN_EXE_dvcq"))
}

/// [`not_release_profile`] for the binary at `path`.
fn profile_of(path: &str) -> Option<String> {
    let dir = std::path::Path::new(path).parent().and_then(|d| d.file_name()).and_then(|n| n.to_str());
    match dir {
        Some("release") => None,
        other => Some(format!(
            "{path} is the {} profile's build, not release's (cargo test --release -p dvcq-cli --test readme_figures --test hot_path)",
            other.unwrap_or("unknown")
        )),
    }
}

#[test]
fn the_profile_is_the_binarys_directory() {
    assert_eq!(profile_of("/x/target/release/dvcq"), None);
    assert_eq!(profile_of("/x/target/x86_64-unknown-linux-gnu/release/dvcq"), None);
    assert!(profile_of("/x/target/tests/dvcq").is_some_and(|w| w.contains("the tests profile's build")));
    assert!(profile_of("/x/target/debug/dvcq").is_some());
}
