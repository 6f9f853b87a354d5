//! The kept `capi/include/dvcq.h` is what cbindgen makes of the C API's sources now: a stale
//! header fails here, and so in CI. `cargo run --manifest-path sysgen/Cargo.toml -- header`
//! rewrites it.

use dvcq_sysgen::header::{generate_header, repository_root, HEADER};

#[test]
fn the_kept_header_is_what_cbindgen_generates() {
    let fresh = generate_header().unwrap_or_else(|e| panic!("generating {HEADER}: {e}"));
    let kept = std::fs::read_to_string(repository_root().join(HEADER)).unwrap_or_default();
    if kept != fresh {
        let first = kept
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| kept.lines().count().min(fresh.lines().count()));
        panic!(
            "{HEADER} is stale: it differs from what cbindgen generates from capi/src from line {} on \
             (kept: {:?}, generated: {:?}); run `cargo run --manifest-path sysgen/Cargo.toml -- header` and commit it",
            first + 1,
            kept.lines().nth(first).unwrap_or("<end>"),
            fresh.lines().nth(first).unwrap_or("<end>"),
        );
    }
}
