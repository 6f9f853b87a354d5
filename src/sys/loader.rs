//! rdma-core, loaded at run time: `libibverbs.so.1` and `libmlx5.so.1` are opened by
//! soname on first use, once per process, and their functions resolved into the tables of
//! `bindings.rs`. Nothing of rdma-core is linked, so one dvcq build runs on a machine with
//! any rdma-core release or none: there the models work, and whatever needs a real device
//! gets [`NoRdmaCore`] naming what to install.
//!
//! An application that links libibverbs itself (and hands dvcq its objects) shares that
//! library: the dynamic loader returns the copy already loaded for the same soname.
//!
//! Each entry into rdma-core ([`verbs_loaded`], [`mlx5_loaded`]) checks the library first;
//! the generated forwarders then read the table with [`verbs`]/[`mlx5`]. None of this is on
//! the per-completion path: the pollers read the rings directly, and the generic backend's
//! `ibv_poll_cq` goes through the context's own ops (`super::ops`).

use super::bindings::{Mlx5, Verbs};
use libloading::Library;
use std::sync::OnceLock;

/// What to install where rdma-core is missing.
pub(crate) const INSTALL: &str =
    "install rdma-core's libraries (Debian/Ubuntu: apt-get install libibverbs1 ibverbs-providers)";

/// The switch that makes the loader report rdma-core absent, for tests and CI: `1` means
/// absent.
pub(crate) const SWITCH: &str = "DVCQ_NO_RDMA_CORE";

/// rdma-core is not available at run time: the library could not be loaded, lacks a
/// function dvcq calls, or [`SWITCH`] is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NoRdmaCore {
    /// Why, one line (`libibverbs.so.1 could not be loaded (...)`).
    pub(crate) why: String,
}

impl std::fmt::Display for NoRdmaCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rdma-core is not available ({}); {INSTALL}", self.why)
    }
}

/// A loaded library and the table resolved in it (kept together: the pointers are valid
/// while the library stays loaded, which is for the rest of the process).
struct Loaded<T> {
    table: T,
    _lib: Library,
}

static VERBS: OnceLock<Result<Loaded<Verbs>, NoRdmaCore>> = OnceLock::new();
static MLX5: OnceLock<Result<Loaded<Mlx5>, NoRdmaCore>> = OnceLock::new();

/// Whether [`SWITCH`] asks for rdma-core to be reported absent.
fn switched_off() -> bool {
    std::env::var_os(SWITCH).is_some_and(|v| v == "1")
}

/// Opens `soname` and resolves its table with `load`, unless [`SWITCH`] says not to.
fn open<T>(soname: &str, load: unsafe fn(&Library) -> Result<T, libloading::Error>) -> Result<Loaded<T>, NoRdmaCore> {
    if switched_off() {
        return Err(NoRdmaCore { why: format!("{SWITCH}=1 is set") });
    }
    open_library(soname, load)
}

/// Opens `soname` and resolves its table with `load`.
fn open_library<T>(
    soname: &str,
    load: unsafe fn(&Library) -> Result<T, libloading::Error>,
) -> Result<Loaded<T>, NoRdmaCore> {
    // SAFETY: loading an rdma-core library runs its initialisers, which only set up its own state (libibverbs reads its configuration and finds its provider directory; libmlx5 registers its provider); dvcq loads each once.
    let lib = unsafe { Library::new(soname) }
        .map_err(|e| NoRdmaCore { why: format!("{soname} could not be loaded ({e})") })?;
    // SAFETY: `lib` is `soname`, whose exported functions have the signatures of the headers the bindings were generated from (rdma-core keeps them stable across releases, with symbol versions); the library is kept next to the table, for the whole process.
    let loaded = unsafe { load(&lib) };
    let table = loaded.map_err(|e| NoRdmaCore { why: format!("{soname} lacks a function dvcq calls ({e})") })?;
    Ok(Loaded { table, _lib: lib })
}

/// libibverbs, loaded on the first call: `Err` says why it is not available.
pub(crate) fn verbs_loaded() -> Result<&'static Verbs, NoRdmaCore> {
    match VERBS.get_or_init(|| open("libibverbs.so.1", Verbs::load)) {
        Ok(l) => Ok(&l.table),
        Err(e) => Err(e.clone()),
    }
}

/// libmlx5 (the mlx5 direct verbs), loaded on the first call after libibverbs: `Err` says
/// why it is not available. Without it the other devices still work.
pub(crate) fn mlx5_loaded() -> Result<&'static Mlx5, NoRdmaCore> {
    verbs_loaded()?;
    match MLX5.get_or_init(|| open("libmlx5.so.1", Mlx5::load)) {
        Ok(l) => Ok(&l.table),
        Err(e) => Err(e.clone()),
    }
}

/// The libibverbs table, for the forwarders. Every path into rdma-core starts where
/// [`verbs_loaded`] succeeded (opening or listing devices, adopting an application's
/// objects), so an rdma-core object in hand means the table is there.
///
/// # Panics
///
/// Called before [`verbs_loaded`] succeeded: a bug in dvcq, not a condition of the machine.
pub(crate) fn verbs() -> &'static Verbs {
    match VERBS.get() {
        Some(Ok(l)) => &l.table,
        _ => panic!("dvcq called into libibverbs before loading it"),
    }
}

/// The libmlx5 table, for the forwarders: as [`verbs`], after [`mlx5_loaded`].
///
/// # Panics
///
/// Called before [`mlx5_loaded`] succeeded: a bug in dvcq.
pub(crate) fn mlx5() -> &'static Mlx5 {
    match MLX5.get() {
        Some(Ok(l)) => &l.table,
        _ => panic!("dvcq called into libmlx5 before loading it"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A library that is not there: the reason names it and what the loader said.
    #[test]
    fn a_missing_library_is_named() {
        let e = open_library("libdvcq-no-such-library.so.1", Verbs::load).err().expect("no such library");
        assert!(e.why.starts_with("libdvcq-no-such-library.so.1 could not be loaded ("), "{}", e.why);
        assert!(e.to_string().contains("apt-get install libibverbs1 ibverbs-providers"), "{e}");
    }

    /// A library that loads but lacks the functions (the C library standing in for an
    /// rdma-core too old or too broken): refused, naming the missing symbol, so no table
    /// with a hole exists.
    #[test]
    fn a_library_without_the_functions_is_refused() {
        let e = open_library("libc.so.6", Mlx5::load).err().expect("libc has no mlx5dv functions");
        assert!(e.why.starts_with("libc.so.6 lacks a function dvcq calls (") && e.why.contains("mlx5dv_"), "{}", e.why);
    }
}
