//! Sets the shared library's SONAME.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    // The ABI version: bump with DVCQ_ABI_VERSION in src/lib.rs on any incompatible change.
    println!("cargo::rustc-cdylib-link-arg=-Wl,-soname,libdvcq.so.0");
}
