//! The kept bindings (`src/sys/bindings.rs`) are what bindgen makes of the installed
//! rdma-core headers. Where libclang or the headers are missing the check cannot run: it
//! skips with one line, and fails in CI, which installs both.

#[path = "../../tests/support/skip.rs"]
mod skip;

use std::path::Path;

#[test]
fn kept_bindings_match_the_installed_headers() {
    let kept_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(dvcq_sysgen::BINDINGS);
    let kept = std::fs::read_to_string(&kept_path).expect("the kept bindings are readable");
    let fresh = match dvcq_sysgen::generate() {
        Ok(text) => text,
        Err(why) => {
            skip::skip_check(&format!(
                "cannot regenerate the rdma-core bindings ({why}); install libibverbs-dev and libclang-dev"
            ));
            return;
        }
    };
    if fresh != kept {
        let line = fresh.lines().zip(kept.lines()).position(|(a, b)| a != b).map_or_else(
            || format!("the files differ in length ({} and {} lines)", fresh.lines().count(), kept.lines().count()),
            |i| {
                format!(
                    "first difference at line {}:\n  kept:  {}\n  fresh: {}",
                    i + 1,
                    kept.lines().nth(i).unwrap_or(""),
                    fresh.lines().nth(i).unwrap_or("")
                )
            },
        );
        panic!(
            "{} is not what bindgen makes of the installed headers ({line}); run `cargo run --manifest-path sysgen/Cargo.toml` and commit the result",
            dvcq_sysgen::BINDINGS
        );
    }
}
