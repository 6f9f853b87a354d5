//! dvcq's C header, `capi/include/dvcq.h`: what cbindgen makes of the C API crate's sources
//! with `capi/cbindgen.toml`. The header is generated, never edited.

use std::path::{Path, PathBuf};

/// The header's path, relative to the repository root.
pub const HEADER: &str = "capi/include/dvcq.h";

/// The repository's root (this crate sits one level below it).
pub fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The header cbindgen generates from `capi/src` now.
///
/// # Errors
///
/// The configuration does not parse or cbindgen cannot read the crate; the text says which.
pub fn generate_header() -> Result<String, String> {
    let capi = repository_root().join("capi");
    let config =
        cbindgen::Config::from_file(capi.join("cbindgen.toml")).map_err(|e| format!("capi/cbindgen.toml: {e}"))?;
    let bindings = cbindgen::Builder::new()
        .with_crate(&capi)
        .with_config(config)
        .generate()
        .map_err(|e| format!("cbindgen reading capi/src: {e}"))?;
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).map_err(|_| "cbindgen wrote a header that is not UTF-8".to_string())
}
