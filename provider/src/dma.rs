//! Page-aligned memory for device models: the "DMA-able" buffers a model's ring, doorbell
//! record and UAR page live in.

use crate::error::Error;
use crate::granule::{self, GRANULE};
use crate::ring::KeepAlive;
use crate::{CqRing, DoorbellRegister, DoorbellWord, MemoryRegion, WqBuffer};
use core::ptr::NonNull;
use std::sync::Arc;

/// An anonymous, page-aligned, zero-filled mapping (memmap2), shared by a model and the
/// pollers it hands out (wrap it in an `Arc`). It is only ever accessed through raw
/// pointers (by [`crate::CqRing`], [`crate::DoorbellWord`] and [`DmaBuffer::read_bytes`]),
/// never through references, and always by aligned 8-byte atomic operations, so rings,
/// doorbells and snapshots may overlap in any way without a data race.
///
/// The pointer comes from the raw mapping ([`memmap2::MmapRaw`]), never from a slice of it,
/// and the mapping is whole granules long, so every 8-byte access to the last bytes of a
/// buffer whose length is not a multiple of 8 stays inside the memory the pointer may
/// reach (a slice of `len` bytes would not cover the rest of its last granule).
#[derive(Debug)]
pub struct DmaBuffer {
    _map: memmap2::MmapRaw,
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is process-wide memory; the raw pointer is only dereferenced by CqRing, DoorbellWord and `read_bytes`, all of which access it by aligned 8-byte atomic operations only (`granule.rs`), which are sound from any thread.
unsafe impl Send for DmaBuffer {}
// SAFETY: as above: sharing the buffer shares the address, and every access to its bytes, from any thread, is an aligned 8-byte atomic operation, so no two of them can form a data race.
unsafe impl Sync for DmaBuffer {}

impl DmaBuffer {
    /// Maps `len` bytes (rounded up to whole pages), zero-filled.
    ///
    /// # Errors
    ///
    /// [`Error::Map`] if the kernel refuses the mapping (or `len` is within a granule of
    /// `usize::MAX`).
    pub fn new(len: usize) -> Result<Self, Error> {
        let len = len.max(1);
        let refused = |errno| Error::Map { len, errno };
        // The kernel maps whole pages; asking for whole granules says so to every model of
        // memory (Miri's included) that the granule accesses are checked against.
        let map_len = len.checked_next_multiple_of(GRANULE).ok_or(refused(0))?;
        let map =
            memmap2::MmapOptions::new().len(map_len).map_anon().map_err(|e| refused(e.raw_os_error().unwrap_or(0)))?;
        let map = memmap2::MmapRaw::from(map);
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

    /// A ring of `entries` slots of `STRIDE` bytes at byte `offset` of this buffer, keeping
    /// the buffer alive.
    ///
    /// # Errors
    ///
    /// [`Error::OutOfBounds`] if the ring does not fit, or the errors of [`CqRing::new`].
    pub fn cq_ring<const STRIDE: usize>(
        self: &Arc<Self>,
        offset: usize,
        entries: u32,
    ) -> Result<CqRing<STRIDE>, Error> {
        self.ring_at(offset, entries)
    }

    /// [`DmaBuffer::cq_ring`] for a ring whose slot count need not be a power of two
    /// (irdma).
    ///
    /// # Errors
    ///
    /// As for [`DmaBuffer::cq_ring`].
    pub fn cq_ring_any_size<const STRIDE: usize>(
        self: &Arc<Self>,
        offset: usize,
        entries: u32,
    ) -> Result<CqRing<STRIDE, false>, Error> {
        self.ring_at(offset, entries)
    }

    fn ring_at<const STRIDE: usize, const POW2: bool>(
        self: &Arc<Self>,
        offset: usize,
        entries: u32,
    ) -> Result<CqRing<STRIDE, POW2>, Error> {
        let len = (entries as usize).checked_mul(STRIDE).and_then(|l| l.checked_add(offset));
        if len.is_none_or(|end| end > self.len) {
            return Err(Error::OutOfBounds {
                what: "dma buffer ring",
                offset,
                len: entries as usize * STRIDE,
                limit: self.len,
            });
        }
        let keep: KeepAlive = self.clone();
        // SAFETY: the range [offset, offset + entries * STRIDE) lies inside this mapping (checked above); the mapping lives as long as `keep`, which the ring and its aliases hold; the buffer is only accessed through ring/doorbell accessors.
        unsafe { CqRing::with_keepalive(self.as_ptr().add(offset), entries, Some(keep)) }
    }

    /// A doorbell word at byte `offset` of this buffer, keeping the buffer alive.
    ///
    /// # Errors
    ///
    /// [`Error::OutOfBounds`] if 8 bytes at `offset` do not fit, or the errors of
    /// [`DoorbellWord::new`].
    pub fn doorbell(self: &Arc<Self>, offset: usize) -> Result<DoorbellWord, Error> {
        let granule = offset - offset % GRANULE;
        if granule.checked_add(GRANULE).is_none_or(|end| end > self.len) {
            return Err(Error::OutOfBounds { what: "dma buffer doorbell", offset, len: 4, limit: self.len });
        }
        let keep: KeepAlive = self.clone();
        // SAFETY: the 8-aligned granule holding `offset` is inside the mapping (checked; the mapping is page-aligned); the mapping lives as long as `keep`; every access to its bytes is an aligned 8-byte atomic one.
        unsafe { DoorbellWord::with_keepalive(self.as_ptr().add(offset), Some(keep)) }
    }

    /// A doorbell register at byte `offset` of this buffer (8-aligned), keeping the buffer
    /// alive: a model's UAR or doorbell page, which the model reads after a ring.
    ///
    /// # Errors
    ///
    /// As [`DmaBuffer::doorbell`], and [`Error::Misaligned`] unless `offset` is 8-aligned.
    pub fn doorbell_register(self: &Arc<Self>, offset: usize) -> Result<DoorbellRegister, Error> {
        DoorbellRegister::model(self.doorbell(offset)?)
    }

    /// A work-queue buffer over `len` bytes at `offset`, keeping this buffer alive: where
    /// a model or test posts WQEs for a poller to scatter inline data from.
    ///
    /// # Errors
    ///
    /// [`Error::OutOfBounds`] if the range leaves the buffer, or the errors of
    /// [`WqBuffer::new`].
    pub fn wq_buffer(self: &Arc<Self>, offset: usize, len: usize) -> Result<WqBuffer, Error> {
        if offset.checked_add(len).is_none_or(|end| end > self.len) {
            return Err(Error::OutOfBounds { what: "dma buffer work queue", offset, len, limit: self.len });
        }
        let keep: KeepAlive = self.clone();
        // SAFETY: the range lies inside the mapping (checked), which lives as long as `keep`, and whose bytes are only accessed by aligned 8-byte atomic operations.
        unsafe { WqBuffer::with_keepalive(self.as_ptr().add(offset), len, Some(keep)) }
    }

    /// A memory region over `len` bytes at `offset`, under `lkey`, keeping this buffer
    /// alive: where a poller may write inline CQE data (a model's or a test's receive
    /// buffers). Safe, unlike [`MemoryRegion::new`]: the buffer's bytes are written by the
    /// granule rule, as every access to them is, and the buffer owns them.
    ///
    /// # Errors
    ///
    /// [`Error::OutOfBounds`] if the range leaves the buffer.
    pub fn memory_region(self: &Arc<Self>, offset: usize, len: usize, lkey: u32) -> Result<MemoryRegion, Error> {
        if offset.checked_add(len).is_none_or(|end| end > self.len) {
            return Err(Error::OutOfBounds { what: "dma buffer memory region", offset, len, limit: self.len });
        }
        MemoryRegion::in_granules(self.ptr, offset, len, lkey, self.clone())
    }

    /// [`DmaBuffer::memory_region`] registered at I/O virtual address `iova`
    /// (`ibv_reg_mr_iova`): data segments name its bytes from `iova` on, whatever address
    /// this buffer has. A ring image replays regions this way at the addresses the process
    /// it was captured from had.
    ///
    /// # Errors
    ///
    /// [`Error::OutOfBounds`] if the range leaves the buffer, or `iova + len` overflows.
    pub fn memory_region_at(
        self: &Arc<Self>,
        offset: usize,
        len: usize,
        lkey: u32,
        iova: u64,
    ) -> Result<MemoryRegion, Error> {
        if offset.checked_add(len).is_none_or(|end| end > self.len) {
            return Err(Error::OutOfBounds { what: "dma buffer memory region", offset, len, limit: self.len });
        }
        MemoryRegion::in_granules_at(self.ptr, offset, len, lkey, self.clone(), iova)
    }

    /// Writes `src` at `offset`, one relaxed atomic store per 8-byte granule: WQEs a test
    /// posts, say. A granule covered in part is read and written back whole, so a write
    /// another thread makes to the rest of it meanwhile may be lost: write whole granules
    /// where a producer thread shares the buffer.
    ///
    /// # Errors
    ///
    /// [`Error::OutOfBounds`] if the range leaves the buffer.
    pub fn write_bytes(&self, offset: usize, src: &[u8]) -> Result<(), Error> {
        if offset.checked_add(src.len()).is_none_or(|end| end > self.len) {
            return Err(Error::OutOfBounds { what: "dma buffer", offset, len: src.len(), limit: self.len });
        }
        // SAFETY: as in `read_bytes`: page-aligned base, the range and every granule it touches inside the mapping, the granule rule kept.
        unsafe { granule::write(self.as_ptr(), offset, src) };
        Ok(())
    }

    /// Copies `out.len()` bytes from `offset`, one relaxed atomic load per 8-byte granule
    /// (snapshots, ring images). A producer writing meanwhile may leave a snapshot torn.
    ///
    /// # Errors
    ///
    /// [`Error::OutOfBounds`] if the range leaves the buffer.
    pub fn read_bytes(&self, offset: usize, out: &mut [u8]) -> Result<(), Error> {
        if offset.checked_add(out.len()).is_none_or(|end| end > self.len) {
            return Err(Error::OutOfBounds { what: "dma buffer", offset, len: out.len(), limit: self.len });
        }
        // SAFETY: the base is page-aligned and the range lies inside the mapping (checked); the mapping is whole pages, so every granule the range touches is inside it too, and every access to the buffer follows the granule rule.
        unsafe { granule::read(self.as_ptr(), offset, out) };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::DmaBuffer;
    use crate::error::Error;
    use core::sync::atomic::Ordering;
    use std::sync::Arc;

    fn out_of_bounds<T: core::fmt::Debug>(r: Result<T, Error>) -> bool {
        matches!(r, Err(Error::OutOfBounds { .. }))
    }

    #[test]
    fn a_buffer_is_page_aligned_zeroed_and_as_long_as_asked() {
        // Lengths that end inside a granule too: the last one is read and written whole,
        // which Miri checks against the memory the buffer's pointer may reach.
        for len in [1, 7, 9, 100, 4095, 4096, 4097, 3 * 4096] {
            let buf = DmaBuffer::new(len).unwrap();
            assert_eq!(buf.len(), len);
            assert_eq!(buf.as_ptr() as usize % 4096, 0);
            let mut bytes = vec![0xaa; len];
            buf.read_bytes(0, &mut bytes).unwrap();
            assert!(bytes.iter().all(|&b| b == 0), "{len}");
            buf.write_bytes(len - 1, &[0x5a]).unwrap();
            let mut last = [0u8; 1];
            buf.read_bytes(len - 1, &mut last).unwrap();
            assert_eq!(last, [0x5a], "{len}");
        }
        assert!(matches!(DmaBuffer::new(usize::MAX - 3), Err(Error::Map { .. })), "no mapping of that size");
        // Zero bytes asked: one byte given, so the buffer is never empty.
        let buf = DmaBuffer::new(0).unwrap();
        assert_eq!((buf.len(), buf.is_empty()), (1, false));
    }

    /// The bounds checks keep every ring, doorbell and snapshot inside the buffer, which is
    /// what the unsafe pointer arithmetic behind them relies on.
    #[test]
    fn rings_doorbells_and_reads_must_fit_in_the_buffer() {
        let buf = Arc::new(DmaBuffer::new(256).unwrap());
        // Rings: exactly to the end fits; a byte past it does not.
        assert_eq!(buf.cq_ring::<64>(0, 4).unwrap().entries(), 4);
        assert_eq!(buf.cq_ring::<64>(128, 2).unwrap().entries(), 2);
        assert_eq!(buf.cq_ring_any_size::<32>(64, 6).unwrap().entries(), 6);
        assert!(out_of_bounds(buf.cq_ring::<64>(0, 8)));
        assert!(out_of_bounds(buf.cq_ring::<64>(64, 4)));
        assert!(out_of_bounds(buf.cq_ring_any_size::<32>(65, 6)));
        assert!(out_of_bounds(buf.cq_ring::<128>(usize::MAX - 64, 1)), "an offset that overflows");
        assert!(out_of_bounds(buf.cq_ring::<128>(0, u32::MAX)));
        // Doorbells: the 8-byte granule holding the word must fit.
        assert!(buf.doorbell(248).is_ok());
        assert!(buf.doorbell(252).is_ok());
        assert!(out_of_bounds(buf.doorbell(256)));
        assert!(out_of_bounds(buf.doorbell(usize::MAX - 3)));
        // Reads: any range inside, none past the end.
        let mut out = [0u8; 16];
        assert!(buf.read_bytes(240, &mut out).is_ok());
        assert!(buf.read_bytes(256, &mut []).is_ok());
        assert!(out_of_bounds(buf.read_bytes(241, &mut out)));
        assert!(out_of_bounds(buf.read_bytes(usize::MAX, &mut out)));
        // The error says what, where and the limit.
        let e = buf.cq_ring::<64>(64, 4).unwrap_err().to_string();
        assert_eq!(e, "dma buffer ring: offset 64 + 256 bytes is outside 256 bytes");
    }

    /// A ring, a doorbell and a snapshot over the same bytes see each other's stores.
    #[test]
    fn every_view_of_the_buffer_sees_the_same_bytes() {
        let buf = Arc::new(DmaBuffer::new(128).unwrap());
        let ring = buf.cq_ring::<64>(0, 2).unwrap();
        ring.write_bytes(1, 8, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        let db = buf.doorbell(64 + 8).unwrap();
        assert_eq!(db.load_be32(Ordering::Acquire), 0x0102_0304);
        db.store_be32(0xa0b0_c0d0, Ordering::Release);
        let mut out = [0u8; 8];
        buf.read_bytes(72, &mut out).unwrap();
        assert_eq!(out, [0xa0, 0xb0, 0xc0, 0xd0, 5, 6, 7, 8]);
    }
}
