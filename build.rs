//! Sets `cfg(dvcq_rdma_core)`, which every build now has: the rdma-core glue (`src/sys/`)
//! no longer depends on the build machine, since its bindings are kept in the repository
//! (`src/sys/bindings.rs`, made by `dvcq-sysgen`) and rdma-core is loaded at run time
//! (`src/sys/loader.rs`). The cfg stays until the attributes that name it are removed.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(dvcq_rdma_core)");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rustc-cfg=dvcq_rdma_core");
}
