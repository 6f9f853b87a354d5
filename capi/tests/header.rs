//! What C programs rely on is in the kept `include/dvcq.h`. That the header is what cbindgen
//! makes of `capi/src` is checked by `cargo test --manifest-path sysgen/Cargo.toml` (CI's lint
//! phase), which keeps cbindgen out of the tests a user runs.

use std::path::Path;

fn header() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/dvcq.h");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The header declares what C programs rely on.
#[test]
fn the_header_has_the_abi_version_the_wc_checks_and_the_calls() {
    let h = header();
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
        assert!(h.contains(needle), "the header lacks {needle:?}:\n{h}");
    }
}
