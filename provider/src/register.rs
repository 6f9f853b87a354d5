//! Doorbell registers: the device registers a consumer writes after it updated the host
//! memory the device reads, to tell the device to look (mlx5: the UAR's CQ doorbell at UAR
//! page + 0x20, rdma-core `mlx5_arm_cq`; irdma: the CQ doorbell at the context's doorbell
//! page + 0x40, rdma-core `irdma_uk_cq_request_notification`).
//!
//! On a device the register is MMIO: a page of the NIC's BAR that rdma-core mapped
//! uncached or write-combining. It is written with one volatile store of its full width
//! through a raw pointer (never a reference: a `&` to device memory would let the
//! compiler insert reads of it, which a register may answer with side effects), never
//! read, and the store is never split: an 8-byte doorbell goes out as one 8-byte store, as rdma-core's `mmio_write64_be`
//! does on 64-bit hosts (on 32-bit ones rdma-core's `util/mmio.c` takes a lock to keep
//! the two halves of the mlx5 CQ doorbell together: the device must see them as one write).
//!
//! In a device model the register is a word of a [`crate::DmaBuffer`] page that the model
//! reads back after the ring, stored by the buffer's access rule (aligned 8-byte atomic
//! operations), so the same consumer code rings a NIC and a model.
//!
//! # Ordering
//!
//! A ring first orders every store the thread made before it (a doorbell record, an irdma
//! shadow area) ahead of the register store as the device sees them: rdma-core's
//! `mmio_wc_start` (`sfence` on x86-64, `dsb st` on AArch64) before the mlx5 doorbell, at
//! least its `udma_to_device_barrier` before the irdma one (a compiler barrier on x86-64,
//! `dmb oshst` on AArch64), the kernel's `wmb()`. Without it the
//! device could take the doorbell and read the record before the new arm word reached
//! memory, and arm with the old one. After the store the ring flushes it out of a
//! write-combining buffer (rdma-core's `mmio_flush_writes`), so the doorbell reaches the
//! device now rather than when the buffer happens to drain.

use crate::doorbell::DoorbellWord;
use crate::error::Error;
use crate::ring::KeepAlive;
use core::ptr::NonNull;
use core::sync::atomic::Ordering;

/// Where a [`DoorbellRegister`] writes.
#[derive(Debug)]
enum Target {
    /// Device memory (MMIO), 8-aligned.
    Mmio(NonNull<u8>),
    /// A word of a model's page in host memory, 8-aligned.
    Model(DoorbellWord),
}

/// A doorbell register of a device (MMIO) or of a device model (a page the model reads).
///
/// `Send` (the mapping is process-wide) but not `Sync`: one thread rings it at a time, as
/// the verbs API has one consumer per CQ.
#[derive(Debug)]
pub struct DoorbellRegister {
    target: Target,
    _keep: Option<KeepAlive>,
}

// SAFETY: a register is an address in a process-wide mapping; nothing about it is tied to the thread that made it. The MMIO target is only ever stored to (one volatile store per ring, from the one `&self` owner's thread), the model target by aligned 8-byte atomics.
unsafe impl Send for DoorbellRegister {}

impl DoorbellRegister {
    /// A register of device memory at `ptr`: an MMIO doorbell in a UAR or doorbell page.
    ///
    /// # Safety
    ///
    /// `ptr` is the address of a device register at least 8 bytes wide in a mapping of
    /// device memory (or memory standing in for it in a test) that stays mapped and
    /// writable for the life of the value and of `keep`; the register is only written,
    /// never read, through this value; and a store to it has no effect in this process
    /// other than on those 8 bytes. Other threads may store to the same register only if
    /// it is device memory, where each store is an I/O write the device takes whole (a
    /// context's CQs share the mlx5 UAR's CQ doorbell, and rdma-core rings it from any
    /// thread without a lock); memory standing in for a device in a test is rung by one
    /// thread.
    ///
    /// # Errors
    ///
    /// [`Error::Null`], or [`Error::Misaligned`] unless `ptr` is 8-byte aligned (both
    /// doorbells this crate's users ring are).
    pub unsafe fn mmio(ptr: *mut u8, keep: Option<KeepAlive>) -> Result<Self, Error> {
        let ptr = NonNull::new(ptr).ok_or(Error::Null { what: "doorbell register" })?;
        let addr = ptr.as_ptr() as usize;
        if addr % 8 != 0 {
            return Err(Error::Misaligned { what: "doorbell register", addr, align: 8 });
        }
        Ok(Self { target: Target::Mmio(ptr), _keep: keep })
    }

    /// A register that is the 8-aligned word `word` of a model's page.
    pub(crate) fn model(word: DoorbellWord) -> Result<Self, Error> {
        // A 64-bit load checks the 8-byte alignment both ring widths rely on.
        word.load_le64(Ordering::Relaxed)?;
        Ok(Self { target: Target::Model(word), _keep: None })
    }

    /// Whether the register is device memory (false: a model's page).
    pub fn is_mmio(&self) -> bool {
        matches!(self.target, Target::Mmio(_))
    }

    /// Rings the register with the 8 bytes `bytes`, `bytes[0]` at its lowest address, as
    /// one 8-byte store, after the barrier that makes earlier stores visible first, then
    /// flushes it (module docs). mlx5's CQ doorbell takes the arm word and the CQ number
    /// this way, big-endian (`dvcq_uapi::mlx5::doorbell::uar_doorbell`).
    #[inline]
    pub fn ring64(&self, bytes: [u8; 8]) {
        write_barrier();
        match &self.target {
            Target::Mmio(p) => {
                let reg = p.as_ptr().cast::<u64>();
                // SAFETY: `mmio`'s contract: an 8-aligned register of at least 8 bytes, mapped and writable while `self` lives, only ever written, and a store to it touches nothing else in this process. A raw-pointer volatile store is one 8-byte store and nothing more: no reference to device memory is made, so the compiler may not insert a read of it (which a `&` to MMIO would allow). The value's native byte order puts `bytes` in memory order.
                unsafe { reg.write_volatile(u64::from_ne_bytes(bytes)) };
            }
            Target::Model(w) => {
                // The word was checked 8-aligned when the register was made.
                let _ = w.store_le64(u64::from_le_bytes(bytes), Ordering::Release);
            }
        }
        write_barrier();
    }

    /// Rings the register's first 4 bytes with `v`, little-endian, as one 4-byte store,
    /// after the same barrier as [`DoorbellRegister::ring64`]. irdma's CQ doorbell takes
    /// the CQ id this way (rdma-core's `db_wr32` stores it in host order on the
    /// little-endian hosts the device is built for).
    #[inline]
    pub fn ring32_le(&self, v: u32) {
        write_barrier();
        match &self.target {
            Target::Mmio(p) => {
                let reg = p.as_ptr().cast::<u32>();
                // SAFETY: as in `ring64`, one 4-byte volatile store through a raw pointer to the first 4 of the register's 8 bytes (4-aligned, since the register is 8-aligned).
                unsafe { reg.write_volatile(u32::from_ne_bytes(v.to_le_bytes())) };
            }
            Target::Model(w) => w.store_le32(v, Ordering::Release),
        }
        write_barrier();
    }
}

/// Orders every store this thread made before it ahead of every store after it as the
/// device sees them, device memory and write-combining buffers included: rdma-core's
/// `mmio_wc_start` and `mmio_flush_writes` (`util/udma_barrier.h`), `sfence` on x86-64 and
/// `dsb st` on AArch64. Rust's own fences are not these (`fence(SeqCst)` is a locked no-op
/// on x86-64; on AArch64 it orders only inner-shareable memory), so the instruction is
/// issued as rdma-core issues it; elsewhere, and under Miri (which runs no assembly), a
/// sequentially consistent fence stands in.
#[inline(always)]
fn write_barrier() {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: `sfence` waits for earlier stores to become globally visible and drains the write-combining buffers; it reads and writes no memory or register (`nostack`, `preserves_flags`), and leaving out `nomem` makes it a compiler barrier too.
    unsafe {
        core::arch::asm!("sfence", options(nostack, preserves_flags))
    };
    #[cfg(all(target_arch = "aarch64", not(miri)))]
    // SAFETY: `dsb st` waits for earlier stores to complete; as above otherwise.
    unsafe {
        core::arch::asm!("dsb st", options(nostack, preserves_flags))
    };
    #[cfg(any(miri, not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
    core::sync::atomic::fence(Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DmaBuffer;
    use std::sync::Arc;

    /// An 8-aligned stand-in for a device page, written only through the register under
    /// test and read only after it.
    #[repr(C, align(64))]
    struct Page([u8; 64]);

    /// The MMIO register stores the 8 bytes in the order given, as one store, and the
    /// 4-byte ring leaves the other half alone.
    #[test]
    fn mmio_rings_store_the_bytes_in_memory_order() {
        let mut page = Box::new(Page([0xee; 64]));
        let base = page.0.as_mut_ptr();
        // SAFETY: the box outlives the register (dropped after it, below), is 64-aligned, and is read only after the rings, on this thread.
        let reg = unsafe { DoorbellRegister::mmio(base.wrapping_add(0x20), None) }.unwrap();
        assert!(reg.is_mmio());
        reg.ring64([0x10, 0, 0, 5, 0, 0, 4, 6]);
        reg.ring32_le(0x0a0b_0c0d);
        drop(reg);
        assert_eq!(&page.0[0x20..0x28], &[0x0d, 0x0c, 0x0b, 0x0a, 0, 0, 4, 6]);
        assert_eq!(&page.0[0x18..0x20], &[0xee; 8], "nothing before the register is touched");
        assert_eq!(&page.0[0x28..0x30], &[0xee; 8], "nor after it");
    }

    #[test]
    fn an_mmio_register_must_be_8_aligned_and_not_null() {
        let mut page = Box::new(Page([0; 64]));
        let base = page.0.as_mut_ptr();
        // SAFETY: refused before anything is stored.
        let e = unsafe { DoorbellRegister::mmio(base.wrapping_add(4), None) }.unwrap_err();
        assert!(matches!(e, Error::Misaligned { align: 8, .. }), "{e}");
        // SAFETY: as above.
        let e = unsafe { DoorbellRegister::mmio(core::ptr::null_mut(), None) }.unwrap_err();
        assert!(matches!(e, Error::Null { .. }), "{e}");
    }

    /// A model's register lands in its page, where the model reads it back.
    #[test]
    fn a_model_register_is_a_word_of_the_page_the_model_reads() {
        let page = Arc::new(DmaBuffer::new(4096).unwrap());
        let reg = page.doorbell_register(0x20).unwrap();
        assert!(!reg.is_mmio());
        reg.ring64([1, 2, 3, 4, 5, 6, 7, 8]);
        let mut got = [0u8; 8];
        page.read_bytes(0x20, &mut got).unwrap();
        assert_eq!(got, [1, 2, 3, 4, 5, 6, 7, 8]);
        let reg = page.doorbell_register(0x40).unwrap();
        reg.ring32_le(3);
        page.read_bytes(0x40, &mut got).unwrap();
        assert_eq!(got, [3, 0, 0, 0, 0, 0, 0, 0]);
        assert!(page.doorbell_register(0x24).is_err(), "a register is 8-aligned");
        assert!(page.doorbell_register(4096).is_err(), "and inside the page");
    }
}
