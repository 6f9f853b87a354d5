//! Devices and contexts: `ibv_get_device_list`, `ibv_open_device`, the queries behind
//! `dvcq devices`, and which rdma-core release and provider library are loaded.

use super::ffi;
use super::loader::{self, NoRdmaCore};
use super::ops;
use crate::sys::error::VerbsError;
use core::ffi::{c_char, c_void, CStr};
use std::path::PathBuf;
use std::sync::Arc;

/// Why the RDMA devices could not be listed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ListError {
    #[error("{0}")]
    NoRdmaCore(NoRdmaCore),
    #[error(transparent)]
    Verbs(#[from] VerbsError),
}

/// The names of the RDMA devices rdma-core finds, in its order.
///
/// # Errors
///
/// rdma-core cannot be loaded, or `ibv_get_device_list` failed (no uverbs support in the
/// kernel gives an empty list, not an error; a missing `/sys/class/infiniband` gives
/// `ENOSYS`).
pub(crate) fn device_names() -> Result<Vec<String>, ListError> {
    loader::verbs_loaded().map_err(ListError::NoRdmaCore)?;
    let mut n = 0;
    // SAFETY: ibv_get_device_list takes an optional count pointer and returns a NULL-terminated array (or NULL with errno set).
    let list = unsafe { ffi::ibv_get_device_list(&mut n) };
    if list.is_null() {
        return Err(VerbsError::last("ibv_get_device_list").into());
    }
    let mut names = Vec::new();
    for i in 0..usize::try_from(n).unwrap_or(0) {
        // SAFETY: the array holds n device pointers, each valid until the list is freed.
        let dev = unsafe { *list.add(i) };
        if dev.is_null() {
            break;
        }
        // SAFETY: a listed device's name is a NUL-terminated string in its struct.
        names.push(unsafe { cstr_field(&(*dev).name) });
    }
    // SAFETY: the list came from ibv_get_device_list and is freed once; no device pointer from it is kept.
    unsafe { ffi::ibv_free_device_list(list) };
    Ok(names)
}

/// A fixed C string field as a `String` (bounded by the array, lossy on bad UTF-8).
fn cstr_field(field: &[c_char]) -> String {
    let bytes: Vec<u8> = field.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// An open device context (`struct ibv_context`), closed when the last handle goes.
///
/// Everything made on a context holds an `Arc` of it, so the context outlives its PDs, CQs
/// and QPs by construction.
#[derive(Debug)]
pub(crate) struct Context {
    ptr: *mut ffi::ibv_context,
    name: String,
    /// Opened by dvcq (closed on drop), or the application's (left open).
    owned: bool,
    /// The CQ error events read from its async fd (`sys::async_event`), on a context dvcq
    /// opened.
    pub(super) async_book: std::sync::Mutex<super::async_event::AsyncBook>,
}

// SAFETY: rdma-core contexts may be used from any thread (libibverbs serialises what needs it with the context's own mutex); dvcq never hands out the raw pointer mutably.
unsafe impl Send for Context {}
// SAFETY: as above: every verb dvcq calls on a shared context is thread-safe in libibverbs.
unsafe impl Sync for Context {}

/// Why a device could not be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum OpenError {
    #[error("no RDMA device named {name:?}")]
    Unknown { name: String },
    #[error("{0}")]
    NoRdmaCore(NoRdmaCore),
    #[error(transparent)]
    Verbs(#[from] VerbsError),
}

impl Context {
    /// Opens the device named `name`.
    pub(crate) fn open(name: &str) -> Result<Arc<Context>, OpenError> {
        loader::verbs_loaded().map_err(OpenError::NoRdmaCore)?;
        let mut n = 0;
        // SAFETY: as in device_names.
        let list = unsafe { ffi::ibv_get_device_list(&mut n) };
        if list.is_null() {
            return Err(VerbsError::last("ibv_get_device_list").into());
        }
        let mut found = None;
        for i in 0..usize::try_from(n).unwrap_or(0) {
            // SAFETY: as in device_names.
            let dev = unsafe { *list.add(i) };
            // SAFETY: as in device_names.
            if !dev.is_null() && unsafe { cstr_field(&(*dev).name) } == name {
                found = Some(dev);
                break;
            }
        }
        let result = match found {
            None => Err(OpenError::Unknown { name: name.to_string() }),
            Some(dev) => {
                // SAFETY: dev is a listed device and the list is still alive; the context that ibv_open_device returns does not depend on the list afterwards.
                let ptr = unsafe { ffi::ibv_open_device(dev) };
                if ptr.is_null() {
                    Err(VerbsError::last("ibv_open_device").into())
                } else {
                    let ctx = Context { ptr, name: name.to_string(), owned: true, async_book: Default::default() };
                    // Dropped on failure, which closes the device again.
                    ctx.set_async_nonblocking().map(|()| Arc::new(ctx)).map_err(OpenError::from)
                }
            }
        };
        // SAFETY: freed once, after the open; the context keeps no reference to the list.
        unsafe { ffi::ibv_free_device_list(list) };
        result
    }

    /// Adopts a context the application opened; dvcq never closes it.
    ///
    /// # Safety
    ///
    /// `ptr` is a live `ibv_context` that stays open as long as any dvcq object made from it
    /// (this handle, its CQs, PDs and QPs) exists.
    pub(crate) unsafe fn borrowed(ptr: *mut ffi::ibv_context) -> Arc<Context> {
        // SAFETY: the caller promises a live context; its device's name is a NUL-terminated string in the device struct.
        let name = unsafe { cstr_field(&(*(*ptr).device).name) };
        Arc::new(Context { ptr, name, owned: false, async_book: Default::default() })
    }

    /// Whether dvcq opened it (and closes it on drop).
    pub(crate) fn is_owned(&self) -> bool {
        self.owned
    }

    /// The raw context, for the glue's other verbs.
    pub(crate) fn as_ptr(&self) -> *mut ffi::ibv_context {
        self.ptr
    }

    /// The device name it was opened by.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// `ibv_query_device`.
    pub(crate) fn device_attr(&self) -> Result<ffi::ibv_device_attr, VerbsError> {
        let mut attr = ffi::ibv_device_attr::default();
        // SAFETY: a live context and a writable attribute struct.
        let rc = unsafe { ffi::ibv_query_device(self.ptr, &mut attr) };
        if rc != 0 {
            return Err(VerbsError::code("ibv_query_device", rc));
        }
        Ok(attr)
    }

    /// `ibv_query_port`.
    pub(crate) fn port_attr(&self, port: u8) -> Result<ffi::ibv_port_attr, VerbsError> {
        let mut attr = ffi::ibv_port_attr::default();
        // SAFETY: a live context.
        let rc = unsafe { ops::query_port(self.ptr, port, &mut attr) };
        if rc != 0 {
            return Err(VerbsError::code("ibv_query_port", rc));
        }
        Ok(attr)
    }

    /// `ibv_query_gid`: the 16 bytes of one GID table entry.
    pub(crate) fn gid(&self, port: u8, index: i32) -> Result<[u8; 16], VerbsError> {
        let mut gid = ffi::ibv_gid::default();
        // SAFETY: a live context and a writable GID.
        let rc = unsafe { ffi::ibv_query_gid(self.ptr, port, index, &mut gid) };
        if rc != 0 {
            return Err(VerbsError::code("ibv_query_gid", rc));
        }
        // SAFETY: every bit pattern of the union is a valid byte array.
        Ok(unsafe { gid.raw })
    }

    /// The node GUID in host order (`ibv_get_device_guid` returns it big-endian).
    pub(crate) fn node_guid(&self) -> u64 {
        // SAFETY: a live context's device pointer is valid while the context is open.
        u64::from_be(unsafe { ffi::ibv_get_device_guid((*self.ptr).device) })
    }

    /// `node_type` and `transport_type` of the device.
    pub(crate) fn node_and_transport(&self) -> (i32, i32) {
        // SAFETY: as in node_guid.
        let dev = unsafe { &*(*self.ptr).device };
        (dev.node_type, dev.transport_type)
    }

    /// The device's `ibdev_path` in sysfs (`/sys/class/infiniband/NAME`).
    pub(crate) fn ibdev_path(&self) -> PathBuf {
        // SAFETY: as in node_guid.
        PathBuf::from(cstr_field(unsafe { &(*(*self.ptr).device).ibdev_path }))
    }

    /// Completion vectors of the context.
    pub(crate) fn num_comp_vectors(&self) -> u32 {
        // SAFETY: a live context.
        u32::try_from(unsafe { (*self.ptr).num_comp_vectors }).unwrap_or(0)
    }

    /// The provider's short name (`rxe`, `mlx5`, ...) from the library its poll function
    /// lives in.
    pub(crate) fn provider(&self) -> Option<String> {
        self.provider_library().as_deref().and_then(super::release::provider_name)
    }

    /// The file of the provider library whose post function this context uses (for
    /// example `.../libibverbs/librxe-rdmav34.so`): the public fact that names the provider.
    /// `post_send` rather than `poll_cq`, which an interposer (dvcq's own preload) replaces.
    pub(crate) fn provider_library(&self) -> Option<PathBuf> {
        // SAFETY: a live context's ops were filled by its provider at open.
        let post = unsafe { (*self.ptr).ops.post_send }?;
        library_of(post as *const c_void)
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: the last handle: every PD, CQ and QP made on it held an Arc and is gone.
            unsafe { ffi::ibv_close_device(self.ptr) };
        }
    }
}

/// The shared object that holds `addr`, resolved to its real file (links followed).
fn library_of(addr: *const c_void) -> Option<PathBuf> {
    let mut info = libc::Dl_info {
        dli_fname: core::ptr::null(),
        dli_fbase: core::ptr::null_mut(),
        dli_sname: core::ptr::null(),
        dli_saddr: core::ptr::null_mut(),
    };
    // SAFETY: dladdr only reads the loader's tables and fills the struct.
    if unsafe { libc::dladdr(addr, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr's file name is a NUL-terminated string owned by the loader.
    let path = PathBuf::from(unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy().into_owned());
    Some(std::fs::canonicalize(&path).unwrap_or(path))
}

/// The file of the libibverbs this process loaded, links followed
/// (`libibverbs.so.1.14.44.0`).
pub(crate) fn libibverbs_file() -> Option<PathBuf> {
    library_of(loader::verbs_loaded().ok()?.ibv_get_device_list as *const c_void)
}
