//! Doorbell words: host-memory words the consumer writes and the device reads (mlx5 dbrec
//! `set_ci`/`arm`, irdma's shadow area).

use crate::error::Error;
use crate::granule::{self, GRANULE};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, Ordering};

/// One 32- or 64-bit word of device-visible host memory.
///
/// Stores that publish a consumer index use `Release`: every read of CQEs the consumer made
/// happens before the device may reuse their slots (io-uring's head store, virtio's used
/// index). The device (or model) reads with `Acquire`.
///
/// Like ring memory, the word is accessed only as part of its naturally aligned 8-byte
/// granule, by 8-byte atomic operations (`granule.rs`): a 32-bit word in half of a granule
/// is loaded by loading the granule, and stored by storing the granule whole with the other
/// half as just read. So two handles on the two halves of one granule (mlx5's `set_ci` and
/// `arm` words) must be written by one thread at a time, as the verbs API has it (one
/// consumer owns a CQ); writers on two threads can lose each other's stores, though never
/// race.
#[derive(Debug)]
pub struct DoorbellWord {
    /// The 8-aligned granule that holds the word.
    granule: NonNull<u8>,
    /// The word's byte offset in its granule: 0 or 4.
    k: usize,
    /// How far a 32-bit value shifts left to sit in the word's place in the granule value.
    shift: u32,
    /// The granule value's bits outside the word.
    others: u64,
    _keep: Option<crate::ring::KeepAlive>,
}

// SAFETY: a pointer to device-shared memory; nothing is tied to the creating thread, the caller of `new` promised the memory outlives the value and its aliases, and every access to it is an aligned 8-byte atomic operation, sound from any thread.
unsafe impl Send for DoorbellWord {}

impl DoorbellWord {
    /// Wraps the word at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must lie in an 8-byte granule (`ptr` rounded down to a multiple of 8, 8 bytes
    /// long) that stays mapped and writable for the life of the value and of its aliases,
    /// and that nothing else in this process accesses except with naturally aligned 8-byte
    /// atomic operations, or in accesses ordered before or after every access through these
    /// handles (rdma-core's `ibv_req_notify_cq` on the thread that polls, say). A device's
    /// DMA is outside the process and not restricted.
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
        let null = Error::Null { what: "doorbell word" };
        let addr = NonNull::new(ptr).ok_or(null)?.as_ptr() as usize;
        if addr % 4 != 0 {
            return Err(Error::Misaligned { what: "doorbell word", addr, align: 4 });
        }
        let k = addr % GRANULE;
        let granule = NonNull::new(ptr.wrapping_sub(k)).ok_or(null)?;
        let shift = granule::shift(k, 4);
        Ok(Self { granule, k, shift, others: !(u64::from(u32::MAX) << shift), _keep: keep })
    }

    /// A second handle on the same word (for the device model); sound because the contract
    /// of [`DoorbellWord::new`] covers every alias.
    pub fn alias(&self) -> Self {
        Self { granule: self.granule, k: self.k, shift: self.shift, others: self.others, _keep: self._keep.clone() }
    }

    #[inline(always)]
    fn word64(&self) -> &AtomicU64 {
        // SAFETY: `granule` is 8-aligned (an address rounded down to a multiple of 8) and non-null, and `new`'s caller guaranteed that its 8 bytes live as long as `self` and are accessed only by aligned 8-byte atomic operations.
        unsafe { granule::at(self.granule.as_ptr()) }
    }

    /// Stores `v` in big-endian byte order (mlx5 dbrec words) with `order`.
    #[inline(always)]
    pub fn store_be32(&self, v: u32, order: Ordering) {
        let g = self.word64();
        g.store((g.load(Ordering::Relaxed) & self.others) | (u64::from(v.to_be()) << self.shift), order)
    }

    /// Loads a big-endian 32-bit word with `order`.
    #[inline(always)]
    pub fn load_be32(&self, order: Ordering) -> u32 {
        u32::from_be((self.word64().load(order) >> self.shift) as u32)
    }

    /// Stores `v` in little-endian byte order (irdma's 32-bit doorbell words) with `order`.
    #[inline(always)]
    pub fn store_le32(&self, v: u32, order: Ordering) {
        let g = self.word64();
        g.store((g.load(Ordering::Relaxed) & self.others) | (u64::from(v.to_le()) << self.shift), order)
    }

    /// Loads a little-endian 32-bit word with `order`.
    #[inline(always)]
    pub fn load_le32(&self, order: Ordering) -> u32 {
        u32::from_le((self.word64().load(order) >> self.shift) as u32)
    }

    /// Stores `v` as a little-endian 64-bit word (irdma shadow area) with `order`.
    ///
    /// # Errors
    ///
    /// [`Error::Misaligned`] if the word is not 8-byte aligned.
    #[inline]
    pub fn store_le64(&self, v: u64, order: Ordering) -> Result<(), Error> {
        self.whole()?.store(v.to_le(), order);
        Ok(())
    }

    /// Loads a little-endian 64-bit word with `order`.
    ///
    /// # Errors
    ///
    /// [`Error::Misaligned`] if the word is not 8-byte aligned.
    #[inline]
    pub fn load_le64(&self, order: Ordering) -> Result<u64, Error> {
        Ok(u64::from_le(self.whole()?.load(order)))
    }

    /// The granule, if the word is all of it (8-aligned).
    fn whole(&self) -> Result<&AtomicU64, Error> {
        if self.k != 0 {
            let addr = self.granule.as_ptr() as usize + self.k;
            return Err(Error::Misaligned { what: "doorbell qword", addr, align: 8 });
        }
        Ok(self.word64())
    }
}

/// A [`DoorbellWord`] checked once to be a whole 8-byte-aligned word, so that its 64-bit
/// stores and loads cannot fail (irdma's shadow-area head, stored after every poll that
/// moves it).
#[derive(Debug)]
pub struct DoorbellQword(DoorbellWord);

impl DoorbellQword {
    /// `word` as a 64-bit word.
    ///
    /// # Errors
    ///
    /// [`Error::Misaligned`] if the word is not 8-byte aligned.
    pub fn new(word: DoorbellWord) -> Result<Self, Error> {
        word.whole()?;
        Ok(Self(word))
    }

    /// Stores `v` as a little-endian 64-bit word with `order`.
    #[inline(always)]
    pub fn store_le64(&self, v: u64, order: Ordering) {
        self.0.word64().store(v.to_le(), order);
    }

    /// Loads a little-endian 64-bit word with `order`.
    #[inline(always)]
    pub fn load_le64(&self, order: Ordering) -> u64 {
        u64::from_le(self.0.word64().load(order))
    }
}

#[cfg(test)]
mod tests {
    use crate::DmaBuffer;
    use core::sync::atomic::Ordering;
    use std::sync::Arc;

    use crate::granule::RACE_ROUNDS as ROUNDS;

    /// Handles of both widths on one granule (mlx5's two 32-bit record words, and a 64-bit
    /// word over both) used from three threads, which the API allows though the protocol has
    /// one writer per record: each half only ever holds a value one of its writers stored,
    /// and (under Miri) no pair of accesses races.
    #[test]
    fn words_of_both_widths_on_one_granule_never_race() {
        let buf = Arc::new(DmaBuffer::new(64).unwrap());
        let (lo, hi, whole) = (buf.doorbell(0).unwrap(), buf.doorbell(4).unwrap(), buf.doorbell(0).unwrap());
        assert!(buf.doorbell(2).is_err(), "a doorbell word is 4-byte aligned");
        let writer = std::thread::spawn(move || {
            for r in 0..ROUNDS {
                hi.store_be32(0x1000 + r, Ordering::Release);
            }
        });
        let reader = std::thread::spawn(move || {
            for _ in 0..ROUNDS {
                let w = whole.load_le64(Ordering::Acquire).unwrap();
                let halves = w.to_le_bytes();
                let (first, second) = halves.split_at(4);
                let first = u32::from_be_bytes(first.try_into().unwrap());
                let second = u32::from_be_bytes(second.try_into().unwrap());
                assert!(first == 0 || (0x2000..0x2000 + ROUNDS).contains(&first), "{first:#x}");
                assert!(second == 0 || (0x1000..0x1000 + ROUNDS).contains(&second), "{second:#x}");
            }
        });
        for r in 0..ROUNDS {
            lo.store_be32(0x2000 + r, Ordering::Release);
            // Two writers on one granule can undo each other's stores (the other writer
            // puts back the half it read before), so this half may read as any value it
            // held before, 0 included; never as anything no one wrote.
            let v = lo.load_be32(Ordering::Acquire);
            assert!(v == 0 || (0x2000..=0x2000 + r).contains(&v), "{v:#x}");
        }
        writer.join().unwrap();
        reader.join().unwrap();
    }

    /// A 32-bit word in either half of its granule reads and writes that half only, in
    /// big-endian order; 64-bit access needs the granule's start.
    #[test]
    fn halves_are_their_own_words() {
        let buf = Arc::new(DmaBuffer::new(64).unwrap());
        let (lo, hi) = (buf.doorbell(8).unwrap(), buf.doorbell(12).unwrap());
        lo.store_be32(0x0102_0304, Ordering::Release);
        hi.store_be32(0x0a0b_0c0d, Ordering::Release);
        let mut bytes = [0u8; 8];
        buf.read_bytes(8, &mut bytes).unwrap();
        assert_eq!(bytes, [1, 2, 3, 4, 0xa, 0xb, 0xc, 0xd]);
        assert_eq!(lo.load_be32(Ordering::Acquire), 0x0102_0304);
        assert_eq!(hi.load_be32(Ordering::Acquire), 0x0a0b_0c0d);
        assert!(hi.load_le64(Ordering::Acquire).is_err());
        assert_eq!(lo.load_le64(Ordering::Acquire).unwrap(), u64::from_le_bytes(bytes));
        // Little-endian halves: the same places, the other byte order.
        hi.store_le32(0x0a0b_0c0d, Ordering::Release);
        buf.read_bytes(8, &mut bytes).unwrap();
        assert_eq!(bytes, [1, 2, 3, 4, 0xd, 0xc, 0xb, 0xa]);
        assert_eq!((hi.load_le32(Ordering::Acquire), lo.load_le32(Ordering::Acquire)), (0x0a0b_0c0d, 0x0403_0201));
    }

    /// A 64-bit word (irdma's shadow area) is stored little-endian over its whole granule;
    /// a word that is not 8-aligned refuses the store and leaves the memory alone.
    #[test]
    fn a_qword_store_writes_its_granule_little_endian_or_nothing() {
        let buf = Arc::new(DmaBuffer::new(64).unwrap());
        let (whole, half) = (buf.doorbell(16).unwrap(), buf.doorbell(20).unwrap());
        whole.store_le64(0x0102_0304_0506_0708, Ordering::Release).unwrap();
        let mut bytes = [0u8; 8];
        buf.read_bytes(16, &mut bytes).unwrap();
        assert_eq!(bytes, [8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(whole.load_le64(Ordering::Acquire).unwrap(), 0x0102_0304_0506_0708);
        let e = half.store_le64(u64::MAX, Ordering::Release).unwrap_err();
        let at = buf.as_ptr() as usize + 20;
        assert!(matches!(e, crate::error::Error::Misaligned { addr, align: 8, .. } if addr == at), "{e}");
        buf.read_bytes(16, &mut bytes).unwrap();
        assert_eq!(bytes, [8, 7, 6, 5, 4, 3, 2, 1]);
    }

    /// A checked qword refuses a word that is not 8-aligned when it is made, and then
    /// stores and loads the whole granule as the word's own 64-bit accessors do.
    #[test]
    fn a_checked_qword_is_refused_unless_aligned_and_then_stores_its_granule() {
        let buf = Arc::new(DmaBuffer::new(64).unwrap());
        let e = super::DoorbellQword::new(buf.doorbell(36).unwrap()).unwrap_err();
        assert!(matches!(e, crate::error::Error::Misaligned { align: 8, .. }), "{e}");
        let q = super::DoorbellQword::new(buf.doorbell(32).unwrap()).unwrap();
        q.store_le64(0x1122_3344_5566_7788, Ordering::Release);
        let mut bytes = [0u8; 8];
        buf.read_bytes(32, &mut bytes).unwrap();
        assert_eq!(bytes, [0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11]);
        assert_eq!(q.load_le64(Ordering::Acquire), 0x1122_3344_5566_7788);
        assert_eq!(buf.doorbell(32).unwrap().load_le64(Ordering::Acquire).unwrap(), 0x1122_3344_5566_7788);
    }
}
