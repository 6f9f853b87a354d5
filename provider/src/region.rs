//! Memory regions: the application memory a poller may write into, each range as it was
//! registered with the device (`ibv_reg_mr`: address, length, lkey). mlx5's inline scatter
//! copies data a CQE carries into the buffers a completed WQE's data segments name; those
//! segments are untrusted bytes (any WQE, any CQE, garbage included), so the copy checks
//! every segment against the regions here, as the device checks an lkey and its range, and
//! writes nothing outside them.
//!
//! # The one promise
//!
//! [`MemoryRegion::new`] is the only `unsafe` step of inline scatter, and its `# Safety`
//! section is the whole of what the caller promises. Nothing that happens later (which
//! WQEs are posted, what their segments or a CQE say, which CQ polls) can break it,
//! because no write leaves a region. A region carved from a [`crate::DmaBuffer`]
//! ([`crate::DmaBuffer::memory_region`]) needs no promise at all.

use crate::error::Error;
use crate::granule::{self, GRANULE};
use crate::ring::KeepAlive;
use core::fmt;
use core::ptr::NonNull;
use core::sync::atomic::Ordering;

/// One registered range of memory a poller may write, under its memory key.
#[derive(Clone)]
pub struct MemoryRegion {
    /// The first byte's address as data segments name it.
    addr: u64,
    len: usize,
    lkey: u32,
    /// Where the region's bytes are reached from: the region's first byte for plain memory,
    /// the buffer's (8-aligned) first byte for a [`crate::DmaBuffer`] region.
    origin: NonNull<u8>,
    /// The region's first byte, counted from `origin` (0 for plain memory).
    start: usize,
    /// Written by the granule rule (a `DmaBuffer`), or byte by byte (plain memory).
    granular: bool,
    _keep: Option<KeepAlive>,
}

impl fmt::Debug for MemoryRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryRegion")
            .field("addr", &format_args!("{:#x}", self.addr))
            .field("len", &self.len)
            .field("lkey", &format_args!("{:#x}", self.lkey))
            .field("granular", &self.granular)
            .finish()
    }
}

// SAFETY: the region is memory reached through a raw pointer that nothing ties to the creating thread; `new`'s contract (or the `DmaBuffer`, whose bytes every thread accesses by the granule rule) makes a write to it sound from whichever thread runs the poll, and a region is only written through `&self` by the poll of the registry holding it.
unsafe impl Send for MemoryRegion {}

impl MemoryRegion {
    /// The `len` bytes at `addr`, registered under `lkey` (what `ibv_reg_mr` returned for
    /// them: `mr->addr`, `mr->length`, `mr->lkey`).
    ///
    /// # Safety
    ///
    /// This is everything a caller of inline scatter promises. For as long as this value
    /// or a clone of it exists (held by a registry, or by any clone of that registry):
    ///
    /// - the `len` bytes at `addr` stay allocated and valid for writes; and
    /// - while a poll of a CQ whose registry holds the region runs, nothing in this process
    ///   reads or writes those bytes except that poll: the application reads a buffer after
    ///   the poll that returned its completion and writes it between polls, on the polling
    ///   thread or ordered with the poll (a lock, a channel). The device's own DMA into
    ///   the region is outside the process and not restricted.
    ///
    /// Nothing else: which WQEs name the memory, what their data segments and the CQEs say,
    /// does not matter, because every write is checked to lie inside a region first.
    ///
    /// # Errors
    ///
    /// [`Error::Null`] for a null `addr`, [`Error::OutOfBounds`] for a range that passes the
    /// end of the address space.
    pub unsafe fn new(addr: *mut u8, len: usize, lkey: u32) -> Result<Self, Error> {
        // SAFETY: forwarded contract.
        unsafe { Self::with_keepalive(addr, len, lkey, None) }
    }

    /// [`MemoryRegion::new`], holding `keep` (the owner of the memory) alive for as long as
    /// the region and its clones exist.
    ///
    /// # Safety
    ///
    /// As for [`MemoryRegion::new`]; if `keep` owns the memory, "stays allocated" is
    /// guaranteed by it.
    ///
    /// # Errors
    ///
    /// As for [`MemoryRegion::new`].
    pub unsafe fn with_keepalive(addr: *mut u8, len: usize, lkey: u32, keep: Option<KeepAlive>) -> Result<Self, Error> {
        let origin = NonNull::new(addr).ok_or(Error::Null { what: "memory region" })?;
        Self::checked(origin, 0, len, lkey, false, keep)
    }

    /// A region over `len` bytes at byte `start` of the buffer at `origin`, which every
    /// party accesses by the granule rule.
    pub(crate) fn in_granules(
        origin: NonNull<u8>,
        start: usize,
        len: usize,
        lkey: u32,
        keep: KeepAlive,
    ) -> Result<Self, Error> {
        Self::checked(origin, start, len, lkey, true, Some(keep))
    }

    /// [`MemoryRegion::in_granules`] for a region that data segments name at `iova`
    /// rather than at its bytes' own address (`ibv_reg_mr_iova`): what a ring image
    /// replays, its regions' addresses those of the process it was captured from.
    pub(crate) fn in_granules_at(
        origin: NonNull<u8>,
        start: usize,
        len: usize,
        lkey: u32,
        keep: KeepAlive,
        iova: u64,
    ) -> Result<Self, Error> {
        let mut r = Self::checked(origin, start, len, lkey, true, Some(keep))?;
        if iova.checked_add(len as u64).is_none() {
            return Err(Error::OutOfBounds { what: "memory region iova", offset: start, len, limit: usize::MAX });
        }
        r.addr = iova;
        Ok(r)
    }

    fn checked(
        origin: NonNull<u8>,
        start: usize,
        len: usize,
        lkey: u32,
        granular: bool,
        keep: Option<KeepAlive>,
    ) -> Result<Self, Error> {
        let addr = (origin.as_ptr() as usize).checked_add(start);
        let Some(addr) = addr.filter(|a| a.checked_add(len).is_some()) else {
            return Err(Error::OutOfBounds { what: "memory region", offset: start, len, limit: usize::MAX });
        };
        Ok(Self { addr: addr as u64, len, lkey, origin, start, granular, _keep: keep })
    }

    /// The first byte's address, as a data segment names it.
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a region of no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Its memory key.
    pub fn lkey(&self) -> u32 {
        self.lkey
    }

    /// Where `n` bytes at address `addr` start in the region, if all of them lie inside it
    /// (computed without a sum that could wrap).
    #[inline]
    fn offset_of(&self, addr: u64, n: usize) -> Option<usize> {
        let rel = usize::try_from(addr.checked_sub(self.addr)?).ok()?;
        (n <= self.len && rel <= self.len - n).then_some(rel)
    }

    /// Writes `data` at region offset `rel` (`rel + data.len() <= len`).
    ///
    /// A word at a time: one store per whole 8 bytes (a granule, for a `DmaBuffer` region),
    /// bytes only at the ends. Never through `copy_nonoverlapping`, which compiles to an
    /// indirect call of `memcpy`, which the poll path allows none of (cli/tests/hot_path.rs).
    #[inline(always)]
    fn write_at(&self, rel: usize, data: &[u8]) {
        let first = self.start + rel;
        if self.granular && first % GRANULE == 0 {
            // The common case, a buffer that starts on a granule: whole granules, then
            // the last one in part.
            let mut words = data.chunks_exact(GRANULE);
            let mut pos = first;
            for word in &mut words {
                let w = word.try_into().map_or(0, u64::from_ne_bytes);
                // SAFETY: `pos + 8 <= start + rel + data.len() <= start + len`: a whole granule inside the region, of a buffer whose granules are live while `_keep` holds it and are accessed by the granule rule.
                unsafe { granule::at(self.origin.as_ptr().add(pos)) }.store(w, Ordering::Relaxed);
                pos += GRANULE;
            }
            let rest = words.remainder();
            if !rest.is_empty() {
                // SAFETY: `pos` is a granule's start (`first` is, and it moved by whole granules) and `pos < start + rel + data.len()`: inside the region, as above; the granule's bytes past `data` are rewritten with what they held, the rule's single-writer caveat.
                let g = unsafe { granule::at(self.origin.as_ptr().add(pos)) };
                let mut w = g.load(Ordering::Relaxed);
                for (j, &b) in rest.iter().enumerate() {
                    w = granule::insert(w, j, 1, u64::from(b));
                }
                g.store(w, Ordering::Relaxed);
            }
            return;
        }
        let mut done = 0;
        while done < data.len() {
            let pos = first + done;
            if self.granular {
                let k = pos % GRANULE;
                // SAFETY: `pos` is inside the region (`rel + done < len`, the caller's guarantee), which `DmaBuffer::memory_region` cut from its buffer at `origin` (8-aligned), whose whole granules are live while `_keep` holds the buffer and are accessed by the granule rule; bytes of the granule outside `data` are rewritten with what they held, the rule's single-writer caveat.
                let g = unsafe { granule::at(self.origin.as_ptr().add(pos - k)) };
                let w = match word_at(data, done) {
                    Some(whole) if k == 0 => whole,
                    _ => {
                        let n = (GRANULE - k).min(data.len() - done);
                        let mut w = g.load(Ordering::Relaxed);
                        for (j, &b) in data.iter().skip(done).take(n).enumerate() {
                            w = granule::insert(w, k + j, 1, u64::from(b));
                        }
                        w
                    }
                };
                g.store(w, Ordering::Relaxed);
                done += GRANULE - k;
            } else if let Some(whole) = word_at(data, done) {
                // SAFETY: `pos + 8 <= start + rel + data.len() <= len` (`start` is 0 for plain memory), inside the `len` bytes `new`'s caller promised stay valid for writes with nothing else accessing them while the poll that writes here runs; `[u8; 8]` has alignment 1, so any address is aligned for it.
                unsafe { self.origin.as_ptr().add(pos).cast::<[u8; GRANULE]>().write_volatile(whole.to_ne_bytes()) };
                done += GRANULE;
            } else {
                let b = data.get(done).copied().unwrap_or_default();
                // SAFETY: `pos < start + rel + data.len() <= len`, as above.
                unsafe { self.origin.as_ptr().add(pos).write_volatile(b) };
                done += 1;
            }
        }
    }
}

/// The 8 bytes of `data` from `at` as a word in memory order, if there are 8.
#[inline(always)]
fn word_at(data: &[u8], at: usize) -> Option<u64> {
    let bytes: [u8; GRANULE] = data.get(at..at.checked_add(GRANULE)?)?.try_into().ok()?;
    Some(u64::from_ne_bytes(bytes))
}

/// The regions a poller may write into, found by lkey: an application's registered
/// memory. Every write is checked against them ([`MemoryRegions::write`]).
#[derive(Debug, Clone, Default)]
pub struct MemoryRegions {
    /// Sorted by lkey, one region per lkey.
    by_lkey: Vec<MemoryRegion>,
}

impl MemoryRegions {
    /// No regions: every write is refused.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `region`; gives it back if its lkey is taken (a device never hands out one key
    /// twice).
    ///
    /// # Errors
    ///
    /// The region itself, when another region has its lkey.
    pub fn insert(&mut self, region: MemoryRegion) -> Result<(), MemoryRegion> {
        match self.by_lkey.binary_search_by_key(&region.lkey, MemoryRegion::lkey) {
            Ok(_) => Err(region),
            Err(at) => {
                self.by_lkey.insert(at, region);
                Ok(())
            }
        }
    }

    /// Removes the region of `lkey` (`ibv_dereg_mr`): later writes naming it are refused.
    pub fn remove(&mut self, lkey: u32) -> Option<MemoryRegion> {
        let at = self.by_lkey.binary_search_by_key(&lkey, MemoryRegion::lkey).ok()?;
        Some(self.by_lkey.remove(at))
    }

    /// The regions, by lkey.
    pub fn iter(&self) -> impl Iterator<Item = &MemoryRegion> {
        self.by_lkey.iter()
    }

    /// The region of `lkey` and the offset in it of `n` bytes at `addr`, if they all lie
    /// inside it.
    #[inline]
    fn find(&self, lkey: u32, addr: u64, n: usize) -> Option<(&MemoryRegion, usize)> {
        let at = self.by_lkey.binary_search_by_key(&lkey, MemoryRegion::lkey).ok()?;
        let r = self.by_lkey.get(at)?;
        Some((r, r.offset_of(addr, n)?))
    }

    /// Whether `n` bytes at `addr` lie inside the region of `lkey`: what
    /// [`MemoryRegions::write`] would accept.
    #[inline]
    pub fn contains(&self, lkey: u32, addr: u64, n: usize) -> bool {
        self.find(lkey, addr, n).is_some()
    }

    /// Writes `data` at `addr` if it lies inside the region of `lkey`; false, writing
    /// nothing, otherwise (no region of that key, or a range that leaves it: the device's
    /// local protection error). No allocation, lock or system call.
    #[inline]
    pub fn write(&self, lkey: u32, addr: u64, data: &[u8]) -> bool {
        match self.find(lkey, addr, data.len()) {
            Some((r, rel)) => {
                r.write_at(rel, data);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DmaBuffer;
    use std::sync::Arc;

    /// Writes land inside the region their lkey names, or nowhere: a range that starts
    /// before it, ends past it (by one byte, or wrapping the address space), names another
    /// key or no key is refused whole.
    #[test]
    fn writes_go_inside_the_region_of_their_key_or_nowhere() {
        let mut mem = vec![0u8; 64];
        let base = mem.as_mut_ptr();
        let mut regions = MemoryRegions::new();
        // SAFETY: `mem` outlives `regions` and is read only after the writes, on this thread.
        let (a, b) = unsafe { (MemoryRegion::new(base.add(8), 16, 0x10), MemoryRegion::new(base.add(32), 8, 0x20)) };
        regions.insert(a.unwrap()).unwrap();
        regions.insert(b.unwrap()).unwrap();
        let at = |off: usize| base as u64 + off as u64;
        assert!(regions.write(0x10, at(8), &[1; 16]), "the whole region");
        assert!(regions.write(0x20, at(36), &[2; 4]), "its last bytes");
        assert!(regions.write(0x20, at(40), &[]), "nothing, at its end");
        let refused = [
            (0x10, at(7), 2),        // starts before
            (0x10, at(9), 16),       // ends one past
            (0x10, at(24), 1),       // at the end
            (0x20, at(8), 4),        // the other region's key
            (0x30, at(8), 4),        // no region
            (0x10, u64::MAX - 1, 4), // wraps
            (0x10, 0, 1),            // null
        ];
        for (lkey, addr, n) in refused {
            assert!(!regions.contains(lkey, addr, n), "{lkey:#x} {addr:#x} {n}");
            assert!(!regions.write(lkey, addr, &vec![0xee; n]), "{lkey:#x} {addr:#x} {n}");
        }
        // Removed: refused from then on.
        assert_eq!(regions.remove(0x20).map(|r| (r.lkey(), r.len(), r.addr())), Some((0x20, 8, at(32))));
        assert!(!regions.write(0x20, at(32), &[3]));
        assert!(regions.remove(0x20).is_none());
        drop(regions);
        let mut want = vec![0u8; 64];
        want[8..24].fill(1);
        want[36..40].fill(2);
        assert_eq!(mem, want);
    }

    proptest::proptest! {
        /// A write of any length at any offset, word by word, leaves exactly what a byte
        /// copy would: the data inside its range, every byte around it as it was, in a
        /// `DmaBuffer` region (granules) and in plain memory alike.
        #[test]
        fn word_writes_equal_a_byte_copy(start in 0usize..24, rel in 0usize..40, data in proptest::collection::vec(proptest::num::u8::ANY, 0..72)) {
            let len = 112 - start;
            proptest::prop_assume!(rel + data.len() <= len);
            let mut want = vec![0x5au8; 128];
            want[start + rel..start + rel + data.len()].copy_from_slice(&data);

            let buf = Arc::new(DmaBuffer::new(128).unwrap());
            buf.write_bytes(0, &[0x5a; 128]).unwrap();
            let mut regions = MemoryRegions::new();
            regions.insert(buf.memory_region(start, len, 1).unwrap()).unwrap();
            proptest::prop_assert!(regions.write(1, buf.as_ptr() as u64 + (start + rel) as u64, &data));
            let mut got = vec![0; 128];
            buf.read_bytes(0, &mut got).unwrap();
            proptest::prop_assert_eq!(&got, &want);

            let mut mem = vec![0x5au8; 128];
            let base = mem.as_mut_ptr();
            let mut regions = MemoryRegions::new();
            // SAFETY: `mem` outlives `regions` and is read only after the write, on this thread.
            regions.insert(unsafe { MemoryRegion::new(base.add(start), len, 2) }.unwrap()).unwrap();
            proptest::prop_assert!(regions.write(2, base as u64 + (start + rel) as u64, &data));
            drop(regions);
            proptest::prop_assert_eq!(&mem, &want);
        }
    }

    #[test]
    fn one_region_per_key_and_no_null_or_wrapping_regions() {
        let mut mem = [0u8; 16];
        let mut regions = MemoryRegions::new();
        // SAFETY: none of these regions is ever written.
        unsafe {
            regions.insert(MemoryRegion::new(mem.as_mut_ptr(), 16, 7).unwrap()).unwrap();
            let again = MemoryRegion::new(mem.as_mut_ptr(), 4, 7).unwrap();
            assert_eq!(regions.insert(again).err().map(|r| r.len()), Some(4), "given back");
            assert!(matches!(MemoryRegion::new(core::ptr::null_mut(), 4, 1), Err(Error::Null { .. })));
            let wraps = MemoryRegion::new(mem.as_mut_ptr(), usize::MAX, 1);
            assert!(matches!(wraps, Err(Error::OutOfBounds { .. })));
        }
        assert_eq!(regions.iter().count(), 1);
    }

    /// A region of a `DmaBuffer` is written by the granule rule: only its own bytes
    /// change, the rest of each granule it shares keeps its value, and the buffer's other
    /// views see the bytes.
    #[test]
    fn a_dma_buffer_region_is_written_by_granules_and_only_inside_itself() {
        let buf = Arc::new(DmaBuffer::new(64).unwrap());
        buf.write_bytes(0, &[0xaa; 64]).unwrap();
        let region = buf.memory_region(5, 10, 0x44).unwrap();
        assert_eq!(region.addr(), buf.as_ptr() as u64 + 5);
        let mut regions = MemoryRegions::new();
        regions.insert(region).unwrap();
        assert!(regions.write(0x44, buf.as_ptr() as u64 + 6, &[1, 2, 3, 4, 5, 6, 7, 8, 9]));
        assert!(!regions.write(0x44, buf.as_ptr() as u64 + 7, &[0; 9]), "one past its end");
        let mut got = [0u8; 64];
        buf.read_bytes(0, &mut got).unwrap();
        let mut want = [0xaa; 64];
        want[6..15].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8, 9]);
        assert_eq!(got, want);
        assert!(matches!(buf.memory_region(60, 8, 1), Err(Error::OutOfBounds { .. })));
        // Registered at another address: segments name it there, the bytes are the buffer's.
        let mut at_iova = MemoryRegions::new();
        at_iova.insert(buf.memory_region_at(16, 8, 0x45, 0x7f00_0000_1000).unwrap()).unwrap();
        assert!(at_iova.write(0x45, 0x7f00_0000_1002, &[7, 7]));
        assert!(!at_iova.write(0x45, buf.as_ptr() as u64 + 16, &[1]), "its own address is not the iova");
        buf.read_bytes(16, &mut got[..8]).unwrap();
        assert_eq!(&got[..8], &[0xaa, 0xaa, 7, 7, 0xaa, 0xaa, 0xaa, 0xaa]);
        assert!(matches!(buf.memory_region_at(0, 8, 1, u64::MAX - 4), Err(Error::OutOfBounds { .. })));
        assert!(matches!(buf.memory_region(usize::MAX, 2, 1), Err(Error::OutOfBounds { .. })));
    }
}
