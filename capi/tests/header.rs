//! `include/dvcq.h` is what cbindgen makes of this crate now: the header is generated,
//! never edited, and a stale one fails here (and so in CI).
//!
//! To refresh it after changing the API: `DVCQ_WRITE_HEADER=1 cargo test -p dvcq-capi --test header`.

use std::path::Path;

const REFRESH: &str = "DVCQ_WRITE_HEADER=1 cargo test -p dvcq-capi --test header";

fn generate() -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("capi/cbindgen.toml parses");
    let bindings =
        cbindgen::Builder::new().with_crate(dir).with_config(config).generate().expect("cbindgen reads capi/src");
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("cbindgen writes UTF-8")
}

#[test]
fn the_committed_header_is_what_cbindgen_generates() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/dvcq.h");
    let fresh = generate();
    if std::env::var_os("DVCQ_WRITE_HEADER").is_some_and(|v| v == "1") {
        std::fs::write(&path, &fresh).expect("capi/include/dvcq.h is writable");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != fresh {
        let first = committed
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| committed.lines().count().min(fresh.lines().count()));
        panic!(
            "capi/include/dvcq.h is stale: it differs from what cbindgen generates from capi/src from line {} on \
             (committed: {:?}, generated: {:?}); run `{REFRESH}` and commit the header",
            first + 1,
            committed.lines().nth(first).unwrap_or("<end>"),
            fresh.lines().nth(first).unwrap_or("<end>"),
        );
    }
}

/// The generated header declares what C programs rely on.
#[test]
fn the_header_has_the_abi_version_the_wc_checks_and_the_calls() {
    let h = generate();
    for needle in [
        "#define DVCQ_ABI_VERSION 0",
        "struct dvcq_wc {",
        "uint64_t wr_id;",
        "struct dvcq_cq;",
        "int dvcq_cq_poll(struct dvcq_cq *cq, int num_entries, struct dvcq_wc *wc);",
        "int dvcq_cq_attach(const struct dvcq_context *ctx,",
        "struct ibv_cq *ibv_cq,",
        "#if defined(INFINIBAND_VERBS_H) || defined(DVCQ_CHECK_IBV_WC)",
        "DVCQ_SAME_FIELD(dlid_path_bits);",
        "const char *dvcq_last_error(void);",
    ] {
        assert!(h.contains(needle), "the generated header lacks {needle:?}:\n{h}");
    }
}
