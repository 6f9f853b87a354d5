//! Doorbell words: host-memory words the consumer writes and the device reads (mlx5 dbrec
//! `set_ci`/`arm`, irdma's shadow area).

use crate::error::Error;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// One 32- or 64-bit word of device-visible host memory, accessed only atomically.
///
/// Stores that publish a consumer index use `Release`: every read of CQEs the consumer made
/// happens before the device may reuse their slots (io-uring's head store, virtio's used
/// index). The device (or model) reads with `Acquire`.
#[derive(Debug)]
pub struct DoorbellWord {
    ptr: NonNull<u8>,
    _keep: Option<crate::ring::KeepAlive>,
}

// SAFETY: a pointer to device-shared memory; nothing is tied to the creating thread, and the caller of `new` promised the memory outlives the value.
unsafe impl Send for DoorbellWord {}

impl DoorbellWord {
    /// Wraps the word at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must point to 8 bytes that stay mapped and writable for the life of the value
    /// and of its aliases, accessed by others only atomically. (8 even for a 32-bit word:
    /// the 64-bit accessors are safe to call on any word.)
    ///
    /// # Errors
    ///
    /// [`Error::Null`] or [`Error::Misaligned`] (4-byte alignment required; the 64-bit
    /// accessors check 8 themselves).
    pub unsafe fn new(ptr: *mut u8) -> Result<Self, Error> {
        // SAFETY: forwarded contract.
        unsafe { Self::with_keepalive(ptr, None) }
    }

    /// [`DoorbellWord::new`], holding `keep` (the owner of the memory) alive.
    ///
    /// # Safety
    ///
    /// As for [`DoorbellWord::new`].
    ///
    /// # Errors
    ///
    /// As for [`DoorbellWord::new`].
    pub unsafe fn with_keepalive(ptr: *mut u8, keep: Option<crate::ring::KeepAlive>) -> Result<Self, Error> {
        let ptr = NonNull::new(ptr).ok_or(Error::Null { what: "doorbell word" })?;
        if ptr.as_ptr() as usize % 4 != 0 {
            return Err(Error::Misaligned { what: "doorbell word", addr: ptr.as_ptr() as usize, align: 4 });
        }
        Ok(Self { ptr, _keep: keep })
    }

    /// A second handle on the same word (for the device model); sound because the contract
    /// of [`DoorbellWord::new`] covers every alias.
    pub fn alias(&self) -> Self {
        Self { ptr: self.ptr, _keep: self._keep.clone() }
    }

    #[inline(always)]
    fn word32(&self) -> &AtomicU32 {
        // SAFETY: `new` checked non-null and 4-byte alignment, and its caller guaranteed the memory lives as long as `self` and is only accessed atomically.
        unsafe { AtomicU32::from_ptr(self.ptr.as_ptr().cast()) }
    }

    /// Stores `v` in big-endian byte order (mlx5 dbrec words) with `order`.
    #[inline(always)]
    pub fn store_be32(&self, v: u32, order: Ordering) {
        self.word32().store(v.to_be(), order)
    }

    /// Loads a big-endian 32-bit word with `order`.
    #[inline(always)]
    pub fn load_be32(&self, order: Ordering) -> u32 {
        u32::from_be(self.word32().load(order))
    }

    /// Stores `v` as a little-endian 64-bit word (irdma shadow area) with `order`.
    ///
    /// # Errors
    ///
    /// [`Error::Misaligned`] if the word is not 8-byte aligned.
    #[inline]
    pub fn store_le64(&self, v: u64, order: Ordering) -> Result<(), Error> {
        self.word64()?.store(v.to_le(), order);
        Ok(())
    }

    /// Loads a little-endian 64-bit word with `order`.
    ///
    /// # Errors
    ///
    /// [`Error::Misaligned`] if the word is not 8-byte aligned.
    #[inline]
    pub fn load_le64(&self, order: Ordering) -> Result<u64, Error> {
        Ok(u64::from_le(self.word64()?.load(order)))
    }

    fn word64(&self) -> Result<&AtomicU64, Error> {
        if self.ptr.as_ptr() as usize % 8 != 0 {
            return Err(Error::Misaligned { what: "doorbell qword", addr: self.ptr.as_ptr() as usize, align: 8 });
        }
        // SAFETY: 8-aligned (checked), and `new`'s caller guaranteed 8 live bytes accessed only atomically.
        Ok(unsafe { AtomicU64::from_ptr(self.ptr.as_ptr().cast()) })
    }
}
