//! The errors of the device API: what failed, on which device, and why.

use crate::device::Release;

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
    /// Real hardware was asked of a build without rdma-core.
    #[error("{what}: this dvcq was built without rdma-core (model-only); install libibverbs-dev, ibverbs-providers and libclang-dev, then rebuild")]
    ModelOnlyBuild {
        /// What was asked.
        what: String,
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
        reason: String,
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
}
