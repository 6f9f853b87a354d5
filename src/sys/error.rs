//! The error of a failed rdma-core call: the call and its errno.

/// An rdma-core call that failed, with the errno it left.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{call} failed: {}", std::io::Error::from_raw_os_error(*.errno))]
pub struct VerbsError {
    /// The C function, as rdma-core names it.
    pub call: &'static str,
    /// The errno (positive).
    pub errno: i32,
}

impl VerbsError {
    /// The error of `call` with the thread's current errno (0 becomes EIO: some providers
    /// return NULL without setting errno).
    pub fn last(call: &'static str) -> Self {
        let errno = std::io::Error::last_os_error().raw_os_error().filter(|&e| e != 0).unwrap_or(libc::EIO);
        VerbsError { call, errno }
    }

    /// The error of `call` from a return code that is an errno (positive or negated).
    pub fn code(call: &'static str, rc: i32) -> Self {
        VerbsError { call, errno: rc.checked_abs().unwrap_or(libc::EIO) }
    }
}
