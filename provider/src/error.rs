//! The provider crate's error type.

/// Errors from setting up rings, doorbells and device memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A ring size that is not a power of two in the allowed range.
    #[error("ring of {entries} entries: must be a power of two from {min} to {max}")]
    BadEntries {
        /// The requested entry count.
        entries: u64,
        /// Smallest allowed.
        min: u32,
        /// Largest allowed.
        max: u32,
    },
    /// A CQE size the backend does not support.
    #[error("cqe size {size} is not supported by {vendor} (allowed: {allowed})")]
    BadCqeSize {
        /// Backend name.
        vendor: &'static str,
        /// The requested size.
        size: u32,
        /// Human list of allowed sizes.
        allowed: &'static str,
    },
    /// A null pointer where memory was required.
    #[error("{what} is a null pointer")]
    Null {
        /// Which pointer.
        what: &'static str,
    },
    /// Memory not aligned as the hardware requires.
    #[error("{what} at {addr:#x} is not aligned to {align} bytes")]
    Misaligned {
        /// Which memory.
        what: &'static str,
        /// Its address.
        addr: usize,
        /// Required alignment.
        align: usize,
    },
    /// An access outside a ring slot or buffer.
    #[error("{what}: offset {offset} + {len} bytes is outside {limit} bytes")]
    OutOfBounds {
        /// What was accessed.
        what: &'static str,
        /// Offset of the access.
        offset: usize,
        /// Length of the access.
        len: usize,
        /// Size of the region.
        limit: usize,
    },
    /// Mapping device-model memory failed.
    #[error("mapping {len} bytes of device memory failed (os error {errno})")]
    Map {
        /// Requested length.
        len: usize,
        /// The OS error number.
        errno: i32,
    },
    /// The backend does not implement this operation (yet).
    #[error("{op} is not supported by the {vendor} backend")]
    Unsupported {
        /// The operation.
        op: &'static str,
        /// The backend.
        vendor: &'static str,
    },
}
