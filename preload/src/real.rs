//! rdma-core's own functions behind the ones the preload exports. Each is resolved once
//! with `dlvsym(RTLD_NEXT, name, version)`: libibverbs exports every classic verb twice
//! (`IBVERBS_1.0`, the compat ABI, and `IBVERBS_1.1`), and a plain `dlsym` returned the
//! oldest one before glibc 2.36. libmlx5's `mlx5dv_*` are looked up in the copy of libmlx5
//! the process has loaded (libibverbs opens providers without `RTLD_GLOBAL`).

use core::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};

/// One resolved function: its address, or 0 before the first use, or 1 when missing.
pub(crate) struct Real {
    name: &'static CStr,
    version: &'static CStr,
    addr: AtomicUsize,
}

const MISSING: usize = 1;

impl Real {
    /// A function `name` of symbol version `version`.
    pub(crate) const fn new(name: &'static CStr, version: &'static CStr) -> Real {
        Real { name, version, addr: AtomicUsize::new(0) }
    }

    /// The function's address, resolved on first use; `None` where no later object defines
    /// it (rdma-core not loaded, or a provider library the process did not load).
    pub(crate) fn get(&self) -> Option<*mut c_void> {
        let mut a = self.addr.load(Ordering::Acquire);
        if a == 0 {
            a = resolve(self.name, self.version).map_or(MISSING, |p| p as usize);
            self.addr.store(a, Ordering::Release);
        }
        (a != MISSING).then_some(a as *mut c_void)
    }

    /// The function's name, for messages.
    pub(crate) fn name(&self) -> &'static str {
        self.name.to_str().unwrap_or("?")
    }
}

/// `dlvsym(RTLD_NEXT)`, then the default version, then the same in libmlx5's loaded copy.
fn resolve(name: &CStr, version: &CStr) -> Option<*mut c_void> {
    let n: *const c_char = name.as_ptr();
    // SAFETY: dlvsym with RTLD_NEXT and NUL-terminated strings only looks a symbol up.
    let p = unsafe { libc::dlvsym(libc::RTLD_NEXT, n, version.as_ptr()) };
    if !p.is_null() {
        return Some(p);
    }
    // SAFETY: as above.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, n) };
    if !p.is_null() {
        return Some(p);
    }
    // SAFETY: RTLD_NOLOAD only returns a handle to a library already loaded (the provider libibverbs opened privately); it loads nothing and runs no initialiser.
    let h = unsafe { libc::dlopen(c"libmlx5.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if h.is_null() {
        return None;
    }
    // SAFETY: a live handle and NUL-terminated strings.
    let p = unsafe { libc::dlvsym(h, n, version.as_ptr()) };
    (!p.is_null()).then_some(p)
}

macro_rules! reals {
    ($($id:ident = $name:literal @ $ver:literal;)*) => {
        $(pub(crate) static $id: Real = Real::new($name, $ver);)*
    };
}

reals! {
    OPEN_DEVICE = c"ibv_open_device" @ c"IBVERBS_1.1";
    CLOSE_DEVICE = c"ibv_close_device" @ c"IBVERBS_1.1";
    IMPORT_DEVICE = c"ibv_import_device" @ c"IBVERBS_1.10";
    CREATE_CQ = c"ibv_create_cq" @ c"IBVERBS_1.1";
    DESTROY_CQ = c"ibv_destroy_cq" @ c"IBVERBS_1.1";
    RESIZE_CQ = c"ibv_resize_cq" @ c"IBVERBS_1.1";
    CREATE_QP = c"ibv_create_qp" @ c"IBVERBS_1.1";
    DESTROY_QP = c"ibv_destroy_qp" @ c"IBVERBS_1.1";
    DESTROY_SRQ = c"ibv_destroy_srq" @ c"IBVERBS_1.1";
    MLX5DV_CREATE_CQ = c"mlx5dv_create_cq" @ c"MLX5_1.1";
    MLX5DV_CREATE_QP = c"mlx5dv_create_qp" @ c"MLX5_1.3";
    MLX5DV_INIT_OBJ = c"mlx5dv_init_obj" @ c"MLX5_1.2";
}

/// Calls the real function `$real` as `$ty` with `$args`, or returns `$missing` (and says
/// so once) where rdma-core has none.
macro_rules! call_real {
    ($real:expr, $ty:ty, $missing:expr, ($($arg:expr),*)) => {{
        match $real.get() {
            Some(p) => {
                // SAFETY: the address was resolved for this exact symbol and version, whose C signature is `$ty` (verbs.h / mlx5dv.h).
                let f: $ty = unsafe { core::mem::transmute::<*mut core::ffi::c_void, $ty>(p) };
                // SAFETY: the caller's arguments, passed through unchanged.
                unsafe { f($($arg),*) }
            }
            None => {
                $crate::log::once(format!("{} not found in the process: the call fails", $real.name()));
                $missing
            }
        }
    }};
}
pub(crate) use call_real;
