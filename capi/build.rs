//! Sets the shared library's SONAME, and `cfg(dvcq_capi_rdma_core)` when the `dvcq` library
//! was built with its rdma-core glue (its build script says so through `links` metadata),
//! so that the attach functions exist exactly when `dvcq::Cq::attach` does.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(dvcq_capi_rdma_core)");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=DEP_DVCQ_RDMA_CORE");
    // The ABI version: bump with DVCQ_ABI_VERSION in src/lib.rs on any incompatible change.
    println!("cargo::rustc-cdylib-link-arg=-Wl,-soname,libdvcq.so.0");
    if std::env::var("DEP_DVCQ_RDMA_CORE").is_ok_and(|v| v == "1") {
        println!("cargo::rustc-cfg=dvcq_capi_rdma_core");
    }
}
