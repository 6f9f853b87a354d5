//! Opening a device or a model by name.

use crate::error::{guard, Fail};
use crate::handle::{self, Handle};
use core::ffi::{c_char, c_int, CStr};
use std::sync::Mutex;

/// An open device or model (`dvcq_context_open`), or an application's `ibv_context`
/// adopted with `dvcq_context_from_ibv`.
pub struct dvcq_context {
    tag: u64,
    pub(crate) ctx: Mutex<dvcq::Context>,
}

// A context may be shared by threads.
static_assertions::assert_impl_all!(dvcq_context: Send, Sync);

impl Handle for dvcq_context {
    const TAG: u64 = 0x6476_6371_5f63_7478; // "dvcq_ctx"
    const NAME: &'static str = "struct dvcq_context";
    fn tag(&self) -> u64 {
        self.tag
    }
    fn tag_mut(&mut self) -> &mut u64 {
        &mut self.tag
    }
}

impl dvcq_context {
    pub(crate) fn new(ctx: dvcq::Context) -> dvcq_context {
        dvcq_context { tag: Self::TAG, ctx: Mutex::new(ctx) }
    }
}

/// A NUL-terminated C string argument as UTF-8.
///
/// # Safety
///
/// `s` is NULL (refused) or a NUL-terminated string.
pub(crate) unsafe fn str_arg<'a>(call: &str, what: &str, s: *const c_char) -> Result<&'a str, Fail> {
    if s.is_null() {
        return Err(Fail::inval(call, format!("{what} is NULL")));
    }
    // SAFETY: non-NULL and, by the caller's promise, NUL-terminated.
    let c = unsafe { CStr::from_ptr(s) };
    c.to_str().map_err(|_| Fail::inval(call, format!("{what} is not UTF-8")))
}

/// Opens a device by name: `"model-mlx5"` or `"model-e810"` (the built-in hardware
/// models, which need no NIC), or an RDMA device rdma-core lists (`"mlx5_0"`, `"rxe0"`,
/// ...). On success `*out` is the new context.
///
/// Returns 0, or `-ENODEV` for a name no device has (the message lists those that exist),
/// `-EOPNOTSUPP` for a hardware name where rdma-core cannot be loaded, `-EINVAL` for a NULL argument.
///
/// # Safety
///
/// `name` is a NUL-terminated string; `out` points to writable storage for one pointer.
#[no_mangle]
pub unsafe extern "C" fn dvcq_context_open(name: *const c_char, out: *mut *mut dvcq_context) -> c_int {
    const CALL: &str = "dvcq_context_open";
    guard(CALL, || {
        // SAFETY: the caller's promise about `out`.
        unsafe { handle::clear(out) };
        // SAFETY: the caller's promise about `name`.
        let name = unsafe { str_arg(CALL, "name", name) }?;
        let ctx = dvcq::Context::open(name).map_err(|e| Fail::of(CALL, &e))?;
        // SAFETY: the caller's promise about `out`.
        unsafe { handle::give(CALL, out, dvcq_context::new(ctx)) }
    })
}

/// Closes a context. Objects made on it may outlive the handle: each keeps what it needs.
/// An adopted `ibv_context` is never closed by dvcq.
///
/// # Safety
///
/// `ctx` is a live context handle that no other thread is using.
#[no_mangle]
pub unsafe extern "C" fn dvcq_context_close(ctx: *mut dvcq_context) -> c_int {
    const CALL: &str = "dvcq_context_close";
    // SAFETY: the caller's promise.
    guard(CALL, || unsafe { handle::take(CALL, ctx) }.map(|_| 0))
}

/// Copies the device's name into `buf` (`len` bytes, `snprintf`-style); returns the name's
/// length (not counting the NUL) or a negative errno.
///
/// # Safety
///
/// `ctx` is a live context; `buf` points to `len` writable bytes (or is NULL with `len` 0).
#[no_mangle]
pub unsafe extern "C" fn dvcq_context_name(ctx: *const dvcq_context, buf: *mut c_char, len: usize) -> c_int {
    const CALL: &str = "dvcq_context_name";
    guard(CALL, || {
        // SAFETY: the caller's promise.
        let h = unsafe { handle::get(CALL, ctx) }?;
        let name = handle::lock(CALL, "context", &h.ctx)?.name().to_string();
        // SAFETY: the caller's promise about `buf`.
        unsafe { crate::copy_out(CALL, &name, buf, len) }
    })
}

/// 1 when the context is a built-in model, 0 for a device, negative errno on a bad handle.
///
/// # Safety
///
/// `ctx` is a live context.
#[no_mangle]
pub unsafe extern "C" fn dvcq_context_is_model(ctx: *const dvcq_context) -> c_int {
    const CALL: &str = "dvcq_context_is_model";
    guard(CALL, || {
        // SAFETY: the caller's promise.
        let h = unsafe { handle::get(CALL, ctx) }?;
        Ok(c_int::from(handle::lock(CALL, "context", &h.ctx)?.is_model()))
    })
}
