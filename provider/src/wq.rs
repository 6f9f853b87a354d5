//! Work-queue buffers: the memory an application posts WQEs into. A poller reads a completed
//! WQE's data segments from it to put data the device delivered inside the CQE (mlx5's
//! inline scatter) where the WQE says, as rdma-core's poll does, inside registered memory
//! regions only (`region.rs`).

use crate::error::Error;
use crate::granule::{self, GRANULE};
use crate::ring::KeepAlive;
use core::fmt;
use core::ptr::NonNull;
use core::sync::atomic::Ordering;

/// A work queue's WQE buffer, read by the poller (`mlx5dv_qp`'s `sq.buf` or `rq.buf`,
/// `mlx5dv_srq`'s `buf`). Its bytes are untrusted: the addresses its data segments hold are
/// written only where they lie inside a registered [`crate::MemoryRegion`].
///
/// Like ring memory, the buffer is read only by naturally aligned 8-byte atomic loads
/// (`granule.rs`).
#[derive(Clone)]
pub struct WqBuffer {
    base: NonNull<u8>,
    len: usize,
    _keep: Option<KeepAlive>,
}

impl fmt::Debug for WqBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WqBuffer").field("base", &self.base).field("len", &self.len).finish()
    }
}

// SAFETY: a pointer to memory the creator vouched for (see `new`); nothing is tied to the creating thread, and every access through it is an aligned 8-byte atomic load, sound from any thread.
unsafe impl Send for WqBuffer {}

impl WqBuffer {
    /// Wraps the `len` bytes at `base`.
    ///
    /// # Safety
    ///
    /// `base`'s `len` bytes stay mapped and readable for the life of the value and of its
    /// clones, and nothing in this process writes them except with naturally aligned 8-byte
    /// atomic operations, or while no poll of a CQ whose registry holds the buffer runs
    /// (posts made on the polling thread, or ordered with its polls). A poll may read any of
    /// the buffer's WQEs, whatever it holds: its bytes are never trusted.
    ///
    /// # Errors
    ///
    /// [`Error::Null`] or [`Error::Misaligned`].
    pub unsafe fn new(base: *mut u8, len: usize) -> Result<Self, Error> {
        // SAFETY: forwarded contract.
        unsafe { Self::with_keepalive(base, len, None) }
    }

    /// [`WqBuffer::new`], holding `keep` (the owner of the memory) alive.
    ///
    /// # Safety
    ///
    /// As for [`WqBuffer::new`].
    ///
    /// # Errors
    ///
    /// As for [`WqBuffer::new`].
    pub unsafe fn with_keepalive(base: *mut u8, len: usize, keep: Option<KeepAlive>) -> Result<Self, Error> {
        let base = NonNull::new(base).ok_or(Error::Null { what: "work queue buffer" })?;
        if base.as_ptr() as usize % GRANULE != 0 {
            return Err(Error::Misaligned { what: "work queue buffer", addr: base.as_ptr() as usize, align: GRANULE });
        }
        Ok(Self { base, len, _keep: keep })
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty buffer.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The 8 bytes at `off` in memory order; `None` unless `off` is 8-aligned and the bytes
    /// lie inside the buffer.
    #[inline]
    pub fn bytes8(&self, off: usize) -> Option<[u8; 8]> {
        if off % GRANULE != 0 || off.checked_add(GRANULE).is_none_or(|end| end > self.len) {
            return None;
        }
        // SAFETY: `off` is 8-aligned, so is the base (checked at construction), and the granule lies inside the buffer (checked), which the constructor's caller keeps readable under the granule rule.
        let w = unsafe { granule::at(self.base.as_ptr().add(off)) }.load(Ordering::Relaxed);
        Some(w.to_ne_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DmaBuffer;
    use std::sync::Arc;

    #[test]
    fn reads_whole_aligned_words_inside_the_buffer() {
        let mem = Arc::new(DmaBuffer::new(64).unwrap());
        mem.write_bytes(8, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        let wq = mem.wq_buffer(0, 32).unwrap();
        assert_eq!((wq.len(), wq.is_empty()), (32, false));
        assert_eq!(wq.bytes8(8), Some([1, 2, 3, 4, 5, 6, 7, 8]));
        assert_eq!(wq.bytes8(24), Some([0; 8]));
        // Past the end, across it, or misaligned: nothing.
        for off in [32, 28, 4, usize::MAX - 3] {
            assert_eq!(wq.bytes8(off), None, "offset {off}");
        }
    }

    #[test]
    fn a_buffer_must_be_8_aligned_and_not_null() {
        let mem = Arc::new(DmaBuffer::new(64).unwrap());
        assert!(matches!(mem.wq_buffer(4, 16), Err(Error::Misaligned { align: 8, .. })));
        assert!(matches!(mem.wq_buffer(8, 64), Err(Error::OutOfBounds { .. })));
        // SAFETY: refused before use.
        assert!(matches!(unsafe { WqBuffer::new(core::ptr::null_mut(), 8) }, Err(Error::Null { .. })));
    }
}
