//! dvcq's C API: `libdvcq.so` / `libdvcq.a`, declared by `include/dvcq.h` (generated from
//! this crate by cbindgen) and found with `pkg-config dvcq`.
//!
//! Conventions (docs/c-api.md has them in full):
//!
//! - Opaque handles (`struct dvcq_context`, `struct dvcq_cq`, ...), made by a `*_open`,
//!   `*_create`, `*_alloc`, `*_reg` or `*_attach` call through an out-parameter and given
//!   back with the matching `*_close`, `*_destroy`, `*_free`, `*_dereg` or `*_detach`.
//! - Every call returns `0` (or a count) on success and a negative errno on failure, with a
//!   message for the calling thread in [`dvcq_last_error`]. A NULL or dead handle is
//!   `-EINVAL`; nothing panics or unwinds into C.
//! - `struct dvcq_wc` is `struct ibv_wc`, and [`dvcq_cq_poll`] has `ibv_poll_cq`'s
//!   meaning.
#![allow(non_camel_case_types)] // the C names of the types

mod attach;
mod context;
mod cq;
mod error;
mod event;
mod handle;
mod verbs;
mod wc;

#[cfg(test)]
mod tests;

pub use attach::*;
pub use context::*;
pub use cq::*;
pub use error::{dvcq_last_error, dvcq_strerror};
pub use event::*;
pub use verbs::*;
pub use wc::*;

/// The ABI version of this library: what `dvcq_abi_version()` returns and the SONAME's
/// number (`libdvcq.so.0`). Raised on any incompatible change; structs only grow at their
/// end.
pub const DVCQ_ABI_VERSION: u32 = 0;

/// The ABI version of the library loaded, to compare with the header's
/// `DVCQ_ABI_VERSION`.
#[no_mangle]
pub extern "C" fn dvcq_abi_version() -> u32 {
    DVCQ_ABI_VERSION
}

/// 1 when rdma-core's libibverbs can be loaded in this process (real devices, and the
/// attach calls), 0 where it cannot (not installed, or `DVCQ_NO_RDMA_CORE=1`): then the
/// models work and the attach calls return `-EOPNOTSUPP` naming what to install.
#[no_mangle]
pub extern "C" fn dvcq_has_rdma_core() -> i32 {
    i32::from(dvcq::device::rdma_core_available())
}

/// The version string of the dvcq library inside (static).
#[no_mangle]
pub extern "C" fn dvcq_version() -> *const core::ffi::c_char {
    static V: std::sync::OnceLock<std::ffi::CString> = std::sync::OnceLock::new();
    V.get_or_init(|| std::ffi::CString::new(dvcq::device::VERSION).unwrap_or_default()).as_ptr()
}

/// Copies `s` into `buf` of `len` bytes as `snprintf` does (cut to fit, always
/// NUL-terminated when `len > 0`); returns `s`'s length.
///
/// # Safety
///
/// `buf` is NULL with `len` 0, or points to `len` writable bytes.
pub(crate) unsafe fn copy_out(
    call: &str,
    s: &str,
    buf: *mut core::ffi::c_char,
    len: usize,
) -> Result<i32, error::Fail> {
    if buf.is_null() && len > 0 {
        return Err(error::Fail::inval(call, "buf is NULL but len is not 0"));
    }
    if len > 0 {
        let n = s.len().min(len - 1);
        // SAFETY: `buf` has `len` writable bytes (the caller's promise) and `n + 1 <= len`; `s` has `n` readable bytes; they cannot overlap (`s` is ours).
        unsafe {
            core::ptr::copy_nonoverlapping(s.as_ptr(), buf.cast::<u8>(), n);
            buf.add(n).write(0);
        }
    }
    Ok(i32::try_from(s.len()).unwrap_or(i32::MAX))
}
