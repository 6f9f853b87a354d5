//! Page-aligned memory for device models: the "DMA-able" buffers a model's ring, doorbell
//! record and UAR page live in.

use crate::error::Error;
use core::ptr::NonNull;

/// An anonymous, page-aligned, zero-filled mapping (memmap2), shared by a model and the
/// pollers it hands out (wrap it in an `Arc`). It is only ever accessed through raw
/// pointers (by [`crate::CqRing`] and [`crate::DoorbellWord`]), never through references.
#[derive(Debug)]
pub struct DmaBuffer {
    _map: memmap2::MmapMut,
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is process-wide memory; the raw pointer is only dereferenced through
// the atomic/volatile accessors of CqRing and DoorbellWord, which are sound from any thread.
unsafe impl Send for DmaBuffer {}
// SAFETY: as above; sharing the buffer only shares the address, and every access to the
// bytes goes through atomic or volatile operations that follow the ring's ownership rule.
unsafe impl Sync for DmaBuffer {}

impl DmaBuffer {
    /// Maps `len` bytes (rounded up to whole pages), zero-filled.
    ///
    /// # Errors
    ///
    /// [`Error::Map`] if the kernel refuses the mapping.
    pub fn new(len: usize) -> Result<Self, Error> {
        let len = len.max(1);
        let mut map = memmap2::MmapOptions::new()
            .len(len)
            .map_anon()
            .map_err(|e| Error::Map { len, errno: e.raw_os_error().unwrap_or(0) })?;
        let ptr = NonNull::new(map.as_mut_ptr()).ok_or(Error::Null { what: "dma buffer" })?;
        Ok(Self { _map: map, ptr, len })
    }

    /// The base address (page aligned).
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length in bytes as requested.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a buffer has at least one byte.
    pub fn is_empty(&self) -> bool {
        false
    }
}
