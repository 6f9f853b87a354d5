//! The error convention: every call returns a negative errno on failure and leaves a
//! message for the calling thread ([`dvcq_last_error`]); no panic crosses into C.

use core::ffi::{c_char, c_int};
use std::cell::RefCell;
use std::ffi::CString;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A failure on its way to C: the errno (positive) and what to say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fail {
    pub(crate) errno: c_int,
    pub(crate) msg: String,
}

impl Fail {
    pub(crate) fn new(errno: c_int, msg: impl Into<String>) -> Fail {
        Fail { errno, msg: msg.into() }
    }

    /// `EINVAL` for a bad argument of `call`.
    pub(crate) fn inval(call: &str, what: impl std::fmt::Display) -> Fail {
        Fail::new(libc::EINVAL, format!("{call}: {what}"))
    }

    /// The library's error, in the words it gives, with the errno that fits it.
    pub(crate) fn of(call: &str, e: &dvcq::Error) -> Fail {
        Fail::new(errno_of(e), format!("{call}: {e}"))
    }
}

/// The errno a library error is reported with.
pub(crate) fn errno_of(e: &dvcq::Error) -> c_int {
    use dvcq::Error as E;
    match e {
        E::UnknownDevice { .. } => libc::ENODEV,
        E::NoRdmaCore { .. } | E::Unsupported { .. } | E::UnknownRelease { .. } | E::Attach { .. } => libc::EOPNOTSUPP,
        E::Verbs { source, .. } => source.errno,
        E::CqDepth { .. } | E::CompVector { .. } | E::Mismatch { .. } | E::MwBind { .. } | E::Xrc { .. } => {
            libc::EINVAL
        }
        E::Post { .. } | E::QueueFull { .. } => libc::ENOMEM,
        E::DeviceRemoved { source, .. } => source.errno,
        E::Model { .. } | E::Event { .. } | E::DeviceReport { .. } | E::CqInError { .. } | E::WorkFailed { .. } => {
            libc::EIO
        }
        _ => libc::EIO,
    }
}

thread_local! {
    static LAST: RefCell<CString> = RefCell::new(CString::default());
}

/// Records `msg` as the calling thread's last error.
pub(crate) fn set_last_error(msg: &str) {
    // A NUL inside a message would cut it; none of dvcq's messages has one, but be total.
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST.with(|l| *l.borrow_mut() = c);
}

/// Runs `f` at the C boundary: its value, or its failure as `-errno` with the message
/// recorded; a panic becomes `-EIO` ("internal error"), never an unwind into C.
pub(crate) fn guard(call: &str, f: impl FnOnce() -> Result<c_int, Fail>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(fail)) => {
            set_last_error(&fail.msg);
            -fail.errno
        }
        Err(p) => {
            let why = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".into());
            set_last_error(&format!("{call}: internal error in libdvcq (a panic: {why}); please report it"));
            -libc::EIO
        }
    }
}

/// The message of the last call that failed on this thread (empty if none has). The
/// string stays valid until the next failing dvcq call on the same thread; copy it to keep
/// it.
#[no_mangle]
pub extern "C" fn dvcq_last_error() -> *const c_char {
    LAST.with(|l| l.borrow().as_ptr())
}

/// `strerror`-like text for a negative (or positive) errno that a dvcq call returned.
/// The string is static.
#[no_mangle]
pub extern "C" fn dvcq_strerror(err: c_int) -> *const c_char {
    let e = err.checked_abs().unwrap_or(0);
    let s: &'static core::ffi::CStr = match e {
        0 => c"success",
        libc::EINVAL => c"invalid argument",
        libc::ENODEV => c"no such device",
        libc::EOPNOTSUPP => c"operation not supported",
        libc::ENOMEM => c"out of resources",
        libc::EBUSY => c"handle in use by another thread",
        libc::EIO => c"input/output error",
        libc::EAGAIN => c"try again",
        _ => c"error (see dvcq_last_error)",
    };
    s.as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_is_a_negative_errno_and_a_message_for_this_thread() {
        let rc = guard("dvcq_x", || Err(Fail::inval("dvcq_x", "cq is NULL")));
        assert_eq!(rc, -libc::EINVAL);
        // SAFETY: dvcq_last_error returns a NUL-terminated string owned by this thread.
        let msg = unsafe { core::ffi::CStr::from_ptr(dvcq_last_error()) };
        assert_eq!(msg.to_str().unwrap(), "dvcq_x: cq is NULL");
        let other = std::thread::spawn(|| {
            // SAFETY: as above, on the other thread, which failed nothing.
            unsafe { core::ffi::CStr::from_ptr(dvcq_last_error()) }.to_bytes().len()
        });
        assert_eq!(other.join().unwrap(), 0, "the message is per thread");
    }

    #[test]
    fn a_panic_stops_at_the_boundary_as_eio() {
        let rc = guard("dvcq_y", || panic!("boom"));
        assert_eq!(rc, -libc::EIO);
        // SAFETY: as above.
        let msg = unsafe { core::ffi::CStr::from_ptr(dvcq_last_error()) }.to_str().unwrap().to_string();
        assert!(msg.contains("dvcq_y: internal error") && msg.contains("boom"), "{msg}");
    }

    #[test]
    fn library_errors_map_to_the_errno_that_fits() {
        let e = dvcq::Context::open("no-such-device").unwrap_err();
        assert_eq!(errno_of(&e), if crate::dvcq_has_rdma_core() == 1 { libc::ENODEV } else { libc::EOPNOTSUPP });
        let e = dvcq::Error::CqDepth { device: "m".into(), asked: 0, max: 4 };
        assert_eq!(Fail::of("dvcq_cq_create", &e).errno, libc::EINVAL);
    }
}
