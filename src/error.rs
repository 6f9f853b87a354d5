//! The errors of the device API: what failed, on which device, and why.
//!
//! Layer: just above `sys` (whose verbs errors it carries) and the vocabulary (`id`), which
//! it may import; every layer above returns it.

use crate::id::CqId;
use crate::sys::release::Release;
use dvcq_provider::{Completion, CqErrorReason, WcStatus};

pub use crate::sys::error::VerbsError;

/// Why a device or a model refused a post ([`Error::Post`]). A full queue and a gone
/// device have variants of their own ([`Error::QueueFull`], [`Error::DeviceRemoved`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PostRefusal {
    /// More scatter/gather entries than the queue was created for (`max_send_sge` /
    /// `max_recv_sge`).
    #[error("{num_sge} scatter/gather entries, more than the queue's {max}")]
    TooManySge {
        /// Entries in the request.
        num_sge: usize,
        /// The queue's limit.
        max: u32,
    },
    /// An inline send longer than the QP's `max_inline_data`.
    #[error("{len} bytes inline, more than the QP's max_inline_data of {max}")]
    InlineTooLong {
        /// Bytes in the request.
        len: u64,
        /// The QP's limit.
        max: u32,
    },
    /// The QP is not in a state that takes this work (a send before `connect`).
    #[error("the QP is in state {state}, which does not take this work")]
    BadState {
        /// The state, as libibverbs names it (`IBV_QPS_INIT`, ...).
        state: &'static str,
    },
    /// An operation the QP's transport or the device does not carry (RDMA READ on UC,
    /// atomics on UD or on the E810), a UD send without a destination, an XRC send naming
    /// no XRC SRQ.
    #[error("the operation is not supported on this QP")]
    UnsupportedOperation,
    /// The QP has no such queue (an XRC target has none; an XRC initiator has no receive
    /// queue).
    #[error("the QP has no such queue")]
    NoQueue,
    /// rdma-core's provider found an argument of the request invalid (`EINVAL`).
    #[error("the provider found the request invalid (EINVAL)")]
    BadArgument,
    /// rdma-core's provider does not support the request (`EOPNOTSUPP`).
    #[error("the provider does not support the request (EOPNOTSUPP)")]
    NotSupported,
    /// Another errno from rdma-core's provider.
    #[error("{}", std::io::Error::from_raw_os_error(*.errno))]
    Other {
        /// The errno (positive).
        errno: i32,
    },
}

impl PostRefusal {
    /// The refusal an rdma-core provider's errno stands for.
    pub(crate) fn of_errno(errno: i32) -> PostRefusal {
        match errno {
            libc::EINVAL => PostRefusal::BadArgument,
            libc::EOPNOTSUPP | libc::ENOSYS => PostRefusal::NotSupported,
            errno => PostRefusal::Other { errno },
        }
    }
}

/// What went wrong opening a device or making, attaching or using a CQ or QP.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No device has that name.
    #[error("no RDMA device named {name:?} (devices here: {})", .available.join(", "))]
    UnknownDevice {
        /// The name asked for.
        name: String,
        /// The names that exist, models included.
        available: Vec<String>,
    },
    /// Real hardware was asked for where rdma-core cannot be loaded at run time (its
    /// libraries are not installed, or `DVCQ_NO_RDMA_CORE=1` says to act as if so). The
    /// models need no rdma-core.
    #[error("{what}: rdma-core is not available ({why}); install rdma-core's libraries (Debian/Ubuntu: apt-get install libibverbs1 ibverbs-providers)")]
    NoRdmaCore {
        /// What was asked.
        what: String,
        /// Why rdma-core is not there (`libibverbs.so.1 could not be loaded (...)`).
        why: String,
    },
    /// An rdma-core call failed.
    #[error("{device}: {source}")]
    Verbs {
        /// The device.
        device: String,
        /// The call and its errno.
        source: VerbsError,
    },
    /// A CQ depth the device cannot give.
    #[error("{device}: CQ depth {asked} is not possible: the device allows 1 to {max}")]
    CqDepth {
        /// The device.
        device: String,
        /// The depth asked for.
        asked: u32,
        /// The device's maximum (`max_cqe`).
        max: u32,
    },
    /// A completion vector the device does not have.
    #[error("{device}: completion vector {asked} does not exist: the device has {count}")]
    CompVector {
        /// The device.
        device: String,
        /// The vector asked for.
        asked: u32,
        /// How many it has.
        count: u32,
    },
    /// An object used with one it cannot be combined with (another device's CQ, ...).
    #[error("{device}: {what}")]
    Mismatch {
        /// The device.
        device: String,
        /// What does not fit.
        what: String,
    },
    /// A post the device refused: which request of the list and why.
    #[error("{device}: QP {qpn:#x}: work request {index} of the list was not posted: {reason}")]
    Post {
        /// The device.
        device: String,
        /// The QP (or SRQ) number.
        qpn: u32,
        /// Index of the first request not posted (the ones before it were).
        index: usize,
        /// Why.
        reason: PostRefusal,
    },
    /// A memory-window bind refused before it was posted (a range outside the region, a
    /// region without `Access::MW_BIND`, rights a window cannot carry, ...).
    #[error("{device}: memory window bind refused: {why}")]
    MwBind {
        /// The device.
        device: String,
        /// Why, with the values.
        why: String,
    },
    /// XRC used the wrong way before anything reached the device: a send from an XRC
    /// initiator naming no XRC SRQ, an SRQ number on a QP of another type, an XRC target
    /// asked of a PD, an XRC SRQ or target of another device or domain, XRC on a device
    /// without it.
    #[error("{device}: XRC refused: {why}")]
    Xrc {
        /// The device.
        device: String,
        /// Why, with the values.
        why: String,
    },
    /// A model device refused a request.
    #[error("{device}: {what}")]
    Model {
        /// The model's name.
        device: String,
        /// What it refused and why.
        what: String,
    },
    /// A direct attach refused a CQ; the caller may fall back to the generic backend.
    #[error("{device}: direct {backend} attach refused: {reason}")]
    Attach {
        /// The device.
        device: String,
        /// The direct backend that refused.
        backend: &'static str,
        /// Why (the failed self-check and the values seen).
        reason: String,
    },
    /// Event mode could not do what was asked (a CQ without a channel, a channel of another
    /// device, the channel's fd failing).
    #[error("{device}: event mode: {what}")]
    Event {
        /// The device.
        device: String,
        /// What failed and why.
        what: String,
    },
    /// A setting the device does not support (CQ moderation values beyond its limits, or
    /// moderation at all).
    #[error("{device}: {what} is not supported: {why}")]
    Unsupported {
        /// The device.
        device: String,
        /// The setting.
        what: &'static str,
        /// Why, with the values.
        why: String,
    },
    /// An rdma-core release outside a private-layout table.
    #[error("{device}: rdma-core {release} is not in dvcq's {backend} layout table ({covered})")]
    UnknownRelease {
        /// The device.
        device: String,
        /// The backend whose table it is.
        backend: &'static str,
        /// The release loaded.
        release: Release,
        /// The ranges the table covers.
        covered: String,
    },
    /// A value the device (or rdma-core for it) reported that cannot be used as it stands:
    /// a `max_cqe` of 0, a CQ far deeper than asked for, a clock shift of 64 bits or more.
    #[error("{device}: the device reports {what} = {value}, {why}")]
    DeviceReport {
        /// The device.
        device: String,
        /// The attribute, as rdma-core names it (`max_cqe`, `ibv_cq.cqe`, ...).
        what: &'static str,
        /// The value reported.
        value: String,
        /// Why it cannot be used, and what it was needed for.
        why: String,
    },
    /// The CQ is in error and the device writes no more completions to it: it overran, or
    /// the device failed ([`CqErrorReason`]). Completions written before the error were all
    /// returned first; see [`crate::Cq::error`].
    #[error("{device}: {cq} is in error: {reason}")]
    CqInError {
        /// The device.
        device: String,
        /// The CQ.
        cq: CqId,
        /// Why.
        reason: CqErrorReason,
    },
    /// A post refused because the work queue is full (`ENOMEM` from the provider): its room
    /// comes back as its completions are polled. The requests before `index` were posted.
    #[error("{device}: QP {qpn:#x}: work request {index} of the list was not posted: the queue is full (poll its completions to make room)")]
    QueueFull {
        /// The device.
        device: String,
        /// The QP (or SRQ) number.
        qpn: u32,
        /// Index of the first request not posted.
        index: usize,
    },
    /// A work request completed with an error status ([`Error::of_completion`]): match on
    /// `status` to tell, for example, [`WcStatus::RnrRetryExcErr`] (the receiver had no
    /// receive posted, retries ran out) from [`WcStatus::RemAccessErr`] (the remote key,
    /// range or rights refused the access).
    #[error("{device}: QP {qpn:#x}: work request {wr_id:#x} failed: {status} ({}, vendor syndrome {vendor_err:#x})", .status.name())]
    WorkFailed {
        /// The device.
        device: String,
        /// The local QP number.
        qpn: u32,
        /// The request's `wr_id`.
        wr_id: u64,
        /// Its status (never success).
        status: WcStatus,
        /// The vendor's syndrome.
        vendor_err: u32,
    },
    /// The device is gone (removed, or reset after a fatal error): rdma-core answers `EIO`
    /// or `ENODEV` to a request that reaches the kernel.
    #[error("{device}: the device was removed or failed: {source}")]
    DeviceRemoved {
        /// The device.
        device: String,
        /// The call that found it gone.
        source: VerbsError,
    },
}

/// The failures a program must tell apart, whichever variant carries them
/// ([`Error::kind`]): one match instead of one per variant and status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The CQ overran: the device found it full ([`CqErrorReason::Overrun`]).
    Overrun,
    /// The work queue is full; polling its completions makes room ([`Error::QueueFull`]).
    QueueFull,
    /// A send found no receive posted until its RNR retries ran out
    /// ([`WcStatus::RnrRetryExcErr`]).
    RnrRetryExceeded,
    /// The remote key, range or rights refused an access ([`WcStatus::RemAccessErr`]).
    RemoteAccess,
    /// The device failed or is gone ([`CqErrorReason::DeviceFatal`],
    /// [`Error::DeviceRemoved`]).
    DeviceFatal,
    /// The device, provider or transport does not do what was asked
    /// ([`Error::Unsupported`], [`PostRefusal::NotSupported`],
    /// [`PostRefusal::UnsupportedOperation`], `EOPNOTSUPP`).
    NotSupported,
    /// An argument out of what the device or the queue allows (a CQ depth or completion
    /// vector it does not have, [`PostRefusal::BadArgument`] and the post limits, `EINVAL`).
    BadArgument,
    /// Anything else: the variant says what.
    Other,
}

impl Error {
    /// Which of the failures a program must tell apart this is.
    pub fn kind(&self) -> ErrorKind {
        let of_errno = |errno: i32| match errno {
            libc::EINVAL => ErrorKind::BadArgument,
            libc::EOPNOTSUPP | libc::ENOSYS => ErrorKind::NotSupported,
            _ => ErrorKind::Other,
        };
        match self {
            Error::CqInError { reason: CqErrorReason::Overrun, .. } => ErrorKind::Overrun,
            Error::CqInError { reason: CqErrorReason::DeviceFatal, .. } | Error::DeviceRemoved { .. } => {
                ErrorKind::DeviceFatal
            }
            Error::QueueFull { .. } => ErrorKind::QueueFull,
            Error::WorkFailed { status: WcStatus::RnrRetryExcErr, .. } => ErrorKind::RnrRetryExceeded,
            Error::WorkFailed { status: WcStatus::RemAccessErr, .. } => ErrorKind::RemoteAccess,
            Error::Unsupported { .. } => ErrorKind::NotSupported,
            Error::Post { reason, .. } => match reason {
                PostRefusal::NotSupported | PostRefusal::UnsupportedOperation => ErrorKind::NotSupported,
                PostRefusal::Other { errno } => of_errno(*errno),
                PostRefusal::TooManySge { .. }
                | PostRefusal::InlineTooLong { .. }
                | PostRefusal::BadState { .. }
                | PostRefusal::NoQueue
                | PostRefusal::BadArgument => ErrorKind::BadArgument,
            },
            Error::CqDepth { .. } | Error::CompVector { .. } => ErrorKind::BadArgument,
            Error::Verbs { source, .. } => of_errno(source.errno),
            _ => ErrorKind::Other,
        }
    }

    /// The error a completion from a CQ of `device` stands for, if it is not a success: the
    /// CQ error item ([`Completion::cq_error`]) as [`Error::CqInError`] of `cq`, anything
    /// else (fault items included) as [`Error::WorkFailed`].
    pub fn of_completion(device: &str, cq: CqId, c: &Completion) -> Option<Error> {
        if c.is_ok() {
            return None;
        }
        Some(match c.cq_error() {
            Some(reason) => Error::CqInError { device: device.into(), cq, reason },
            None => Error::WorkFailed {
                device: device.into(),
                qpn: c.qp_num,
                wr_id: c.wr_id,
                status: c.status,
                vendor_err: c.vendor_err,
            },
        })
    }

    /// The error of a post the provider refused with `errno` at request `index`: a full
    /// queue, a gone device and the rest ([`PostRefusal::of_errno`]) typed. (The models'
    /// refusals are typed by their kind instead: `context::qp`.)
    pub(crate) fn of_post(device: &str, qpn: u32, index: usize, call: &'static str, errno: i32) -> Error {
        match errno {
            libc::ENOMEM => Error::QueueFull { device: device.into(), qpn, index },
            libc::ENODEV | libc::EIO => {
                Error::DeviceRemoved { device: device.into(), source: VerbsError { call, errno } }
            }
            _ => Error::Post { device: device.into(), qpn, index, reason: PostRefusal::of_errno(errno) },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dvcq_provider::CqeFault;

    /// Each failure a program must tell apart is its own variant, with the values.
    #[test]
    fn posts_and_completions_map_to_typed_errors() {
        let full = Error::of_post("model-mlx5", 0x108, 3, "ibv_post_send", libc::ENOMEM);
        assert_eq!(full, Error::QueueFull { device: "model-mlx5".into(), qpn: 0x108, index: 3 });
        assert!(full.to_string().contains("work request 3 of the list was not posted: the queue is full"), "{full}");
        let gone = Error::of_post("rxe0", 0x11, 0, "ibv_post_send", libc::EIO);
        assert!(matches!(gone, Error::DeviceRemoved { source: VerbsError { errno: libc::EIO, .. }, .. }), "{gone}");
        let bad = Error::of_post("rxe0", 0x11, 1, "ibv_post_send", libc::EINVAL);
        assert!(matches!(bad, Error::Post { index: 1, reason: PostRefusal::BadArgument, .. }), "{bad}");
        assert_eq!(
            bad.to_string(),
            "rxe0: QP 0x11: work request 1 of the list was not posted: the provider found the request invalid (EINVAL)"
        );
        let unsupported = Error::of_post("rxe0", 0x11, 0, "ibv_post_send", libc::EOPNOTSUPP);
        assert!(matches!(unsupported, Error::Post { reason: PostRefusal::NotSupported, .. }), "{unsupported}");
        let other = Error::of_post("rxe0", 0x11, 0, "ibv_post_send", libc::EFAULT);
        assert!(matches!(other, Error::Post { reason: PostRefusal::Other { errno: libc::EFAULT }, .. }), "{other}");
        assert!(other.to_string().ends_with("not posted: Bad address (os error 14)"), "{other}");

        let cq = CqId(7);
        assert_eq!(Error::of_completion("d", cq, &Completion::default()), None);
        let rnr = Completion {
            status: WcStatus::RnrRetryExcErr,
            wr_id: 5,
            qp_num: 9,
            vendor_err: 0x81,
            ..Default::default()
        };
        let e = Error::of_completion("d", cq, &rnr).unwrap();
        assert_eq!(
            e,
            Error::WorkFailed {
                device: "d".into(),
                qpn: 9,
                wr_id: 5,
                status: WcStatus::RnrRetryExcErr,
                vendor_err: 0x81
            }
        );
        assert_eq!(
            e.to_string(),
            "d: QP 0x9: work request 0x5 failed: RNR retry counter exceeded (IBV_WC_RNR_RETRY_EXC_ERR, vendor syndrome 0x81)"
        );
        let item = Completion::from_fault(CqeFault::cq_error_item(CqErrorReason::Overrun, 16));
        let e = Error::of_completion("d", cq, &item).unwrap();
        assert_eq!(e, Error::CqInError { device: "d".into(), cq, reason: CqErrorReason::Overrun });
        assert_eq!(e.kind(), ErrorKind::Overrun);
        assert!(e.to_string().starts_with("d: cq#7 is in error: it overran"), "{e}");
    }

    /// Each kind a program tells apart comes from the variants that carry it, and nothing
    /// else falls into it.
    #[test]
    fn every_kind_a_program_tells_apart_has_its_variants() {
        let cq = CqId(1);
        let failed = |status| Error::WorkFailed { device: "d".into(), qpn: 1, wr_id: 2, status, vendor_err: 0 };
        let post = |reason| Error::Post { device: "d".into(), qpn: 1, index: 0, reason };
        let verbs = |errno| Error::Verbs { device: "d".into(), source: VerbsError { call: "ibv_x", errno } };
        let cases = [
            (Error::CqInError { device: "d".into(), cq, reason: CqErrorReason::Overrun }, ErrorKind::Overrun),
            (Error::CqInError { device: "d".into(), cq, reason: CqErrorReason::DeviceFatal }, ErrorKind::DeviceFatal),
            (Error::of_post("d", 1, 0, "ibv_post_send", libc::EIO), ErrorKind::DeviceFatal),
            (Error::of_post("d", 1, 0, "ibv_post_send", libc::ENOMEM), ErrorKind::QueueFull),
            (failed(WcStatus::RnrRetryExcErr), ErrorKind::RnrRetryExceeded),
            (failed(WcStatus::RemAccessErr), ErrorKind::RemoteAccess),
            (failed(WcStatus::LocProtErr), ErrorKind::Other),
            (Error::Unsupported { device: "d".into(), what: "x", why: "y".into() }, ErrorKind::NotSupported),
            (post(PostRefusal::UnsupportedOperation), ErrorKind::NotSupported),
            (Error::of_post("d", 1, 0, "ibv_post_send", libc::EOPNOTSUPP), ErrorKind::NotSupported),
            (Error::of_post("d", 1, 0, "ibv_post_send", libc::EINVAL), ErrorKind::BadArgument),
            (post(PostRefusal::TooManySge { num_sge: 5, max: 4 }), ErrorKind::BadArgument),
            (Error::CqDepth { device: "d".into(), asked: 0, max: 8 }, ErrorKind::BadArgument),
            (verbs(libc::EINVAL), ErrorKind::BadArgument),
            (verbs(libc::EAGAIN), ErrorKind::Other),
            (Error::Mismatch { device: "d".into(), what: "w".into() }, ErrorKind::Other),
        ];
        for (e, kind) in cases {
            assert_eq!(e.kind(), kind, "{e}");
        }
    }
}
