//! Where CQE slots come from: the ring in device memory (32- or 64-byte stride, through the
//! provider's [`CqRing`]) or a byte copy of one (ring images). The poll loop is generic over
//! [`SlotSource`], so the same code decodes a NIC's ring, a model's and an image's.
//!
//! Positions are running counters: slot = `pos mod entries`, and the expected valid bit of
//! a position is 1 on even laps and 0 on odd ones ([`polarity`]; irdma.md §2.1, §2.3; the
//! same rule ring-image.md states for `ci`).

use dvcq_provider::{CqRing, RingView};
use dvcq_uapi::irdma::cqe::{ext, off, ExtCqe};
use dvcq_uapi::Le64;

/// The expected valid bit at running position `pos` of a ring of `1 << log2` slots:
/// polarity starts at 1 and flips on every wrap (§2.1, §2.3 step 6).
#[inline(always)]
pub const fn polarity(pos: u32, log2: u32) -> bool {
    (pos >> log2) & 1 == 0
}

/// The valid-bit test of qword3 `w3` at running position `pos` as one sign test, for a
/// loop that keeps `63 - log2` in a register: shifting the position's lap bit up to bit 63
/// and XORing it into qword3 leaves bit 63 set exactly when the valid bit (bit 63) is the
/// inverse of the lap bit, which is [`polarity`].
#[inline(always)]
pub const fn valid_at(w3: u64, pos: u32, lap_shift: u32) -> bool {
    ((w3 ^ ((pos as u64) << lap_shift)) as i64) < 0
}

/// `lap_shift` for [`valid_at`] on a ring of `1 << log2` slots.
#[inline(always)]
pub const fn lap_shift(log2: u32) -> u32 {
    63 - log2
}

/// The ring memory of an irdma CQ, in the slot size the CQ was created with.
#[derive(Debug)]
pub enum SlotRing {
    /// 32-byte slots (GEN1, GEN2): an extended CQE takes the next slot too.
    Slots32(CqRing<32>),
    /// 64-byte slots (GEN3 `IRDMA_FEATURE_64_BYTE_CQE`): the extension is in the same slot.
    Slots64(CqRing<64>),
}

impl SlotRing {
    /// Slots in the ring.
    pub fn entries(&self) -> u32 {
        match self {
            Self::Slots32(r) => r.entries(),
            Self::Slots64(r) => r.entries(),
        }
    }
    /// Bytes per slot.
    pub fn cqe_size(&self) -> u32 {
        match self {
            Self::Slots32(_) => 32,
            Self::Slots64(_) => 64,
        }
    }
}

/// Read access to CQE slots with the valid-bit rule. Sealed: implemented for the two ring
/// strides and for image bytes.
pub trait SlotSource: sealed::Sealed {
    /// Extra slots an extended CQE takes: 1 in 32-byte mode (the next slot), 0 in 64-byte
    /// mode (same slot) (§1.5).
    fn ext_extra_slots(&self) -> u32;
    /// `log2(entries)`.
    fn log2(&self) -> u32;
    /// qword3 of `pos` if its valid bit is the expected polarity there (then with the
    /// acquire fence that orders the body reads after it), else `None`. The ring size comes
    /// as [`lap_shift`], so the test is [`valid_at`]: one shift, XOR and sign test.
    fn valid_q3(&self, pos: u32, lap_shift: u32) -> Option<u64>;
    /// qword0, qword1, qword2 of `pos`, host order.
    fn body(&self, pos: u32) -> [u64; 3];
    /// The little-endian qword at byte `off` of `pos`, host order: one read, for a fast
    /// path that reads only what it uses.
    fn qword(&self, pos: u32, off: usize) -> u64;
    /// The extension of the CQE at `pos` if its valid bit equals the expected polarity of
    /// where it lives (`pos + 1` in 32-byte mode, `pos` in 64-byte mode; §2.3 step 4).
    fn ext(&self, pos: u32) -> Option<ExtCqe>;
    /// qword5 (byte 40) of a 64-byte slot: a GEN3 SRQ CQE's QP context (§4.1); `None` for
    /// 32-byte slots, which have no byte 40.
    fn srq_ctx(&self, pos: u32) -> Option<u64>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for dvcq_provider::CqRing<32> {}
    impl Sealed for dvcq_provider::CqRing<64> {}
    impl Sealed for dvcq_provider::RingView<'_, 32> {}
    impl Sealed for dvcq_provider::RingView<'_, 64> {}
    impl Sealed for super::SlotBytes {}
}

#[inline(always)]
fn log2_of(entries: u32) -> u32 {
    entries.trailing_zeros()
}

/// Both strides in one implementation over the ring's view (base and mask by value): `S`
/// is a constant, so the stride tests fold away.
impl<'a, const S: usize> SlotSource for RingView<'a, S>
where
    RingView<'a, S>: sealed::Sealed,
{
    #[inline(always)]
    fn ext_extra_slots(&self) -> u32 {
        u32::from(S == 32)
    }
    #[inline(always)]
    fn log2(&self) -> u32 {
        log2_of(self.entries())
    }
    #[inline(always)]
    fn valid_q3(&self, pos: u32, lap_shift: u32) -> Option<u64> {
        self.owned_u64_at(pos, off::QWORD3, |w| valid_at(u64::from_le(w), pos, lap_shift)).map(u64::from_le)
    }
    #[inline(always)]
    fn body(&self, pos: u32) -> [u64; 3] {
        [self.qword(pos, off::QWORD0), self.qword(pos, off::QWORD1), self.qword(pos, off::QWORD2)]
    }
    #[inline(always)]
    fn qword(&self, pos: u32, off: usize) -> u64 {
        self.read_at::<Le64>(pos, off).map_or(0, Le64::get)
    }
    #[inline]
    fn ext(&self, pos: u32) -> Option<ExtCqe> {
        if S == 32 {
            // The extension is the next slot, written with that slot's pass phase: the same
            // polarity rule at pos + 1 covers rdma-core's "invert when it wrapped to 0" (§2.3).
            let next = pos.wrapping_add(1);
            let expect = polarity(next, self.log2());
            self.owned_u64_at(next, off::QWORD3, |w| ext::valid(u64::from_le(w)) == expect)?;
            self.read_at::<ExtCqe>(next, 0)
        } else {
            let expect = polarity(pos, self.log2());
            self.owned_u64_at(pos, off::EXT_QWORD7, |w| ext::valid(u64::from_le(w)) == expect)?;
            self.read_at::<ExtCqe>(pos, off::EXT)
        }
    }
    #[inline]
    fn srq_ctx(&self, pos: u32) -> Option<u64> {
        // Byte 40 exists only in 64-byte slots.
        self.read_at::<Le64>(pos, off::EXT_QWORD5).map(Le64::get)
    }
}

/// A ring handle reads through its view.
impl<const S: usize> SlotSource for CqRing<S>
where
    CqRing<S>: sealed::Sealed,
    for<'a> RingView<'a, S>: SlotSource,
{
    #[inline(always)]
    fn ext_extra_slots(&self) -> u32 {
        self.view().ext_extra_slots()
    }
    #[inline(always)]
    fn log2(&self) -> u32 {
        self.view().log2()
    }
    #[inline(always)]
    fn valid_q3(&self, pos: u32, lap_shift: u32) -> Option<u64> {
        self.view().valid_q3(pos, lap_shift)
    }
    #[inline(always)]
    fn body(&self, pos: u32) -> [u64; 3] {
        self.view().body(pos)
    }
    #[inline(always)]
    fn qword(&self, pos: u32, off: usize) -> u64 {
        self.view().qword(pos, off)
    }
    #[inline]
    fn ext(&self, pos: u32) -> Option<ExtCqe> {
        self.view().ext(pos)
    }
    #[inline]
    fn srq_ctx(&self, pos: u32) -> Option<u64> {
        self.view().srq_ctx(pos)
    }
}

/// A copyable view of a [`SlotRing`] (geometry by value), for iterators that must not
/// reload it from the CQ on every CQE.
#[derive(Debug, Clone, Copy)]
pub enum SlotView<'a> {
    /// 32-byte slots.
    V32(RingView<'a, 32>),
    /// 64-byte slots.
    V64(RingView<'a, 64>),
}

impl SlotRing {
    /// The ring's view.
    #[inline(always)]
    pub fn view(&self) -> SlotView<'_> {
        match self {
            Self::Slots32(r) => SlotView::V32(r.view()),
            Self::Slots64(r) => SlotView::V64(r.view()),
        }
    }
}

/// A copy of a ring's bytes (ring images, offline decoding): no device writes it, so plain
/// reads are enough.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotBytes {
    bytes: Vec<u8>,
    stride: usize,
    log2: u32,
}

impl SlotBytes {
    /// Wraps `bytes` as `bytes.len() / stride` slots. Returns `None` unless the stride is 32
    /// or 64 and the slot count is a power of two (at least 1).
    pub fn new(bytes: Vec<u8>, stride: usize) -> Option<Self> {
        if stride != 32 && stride != 64 || bytes.len() % stride != 0 {
            return None;
        }
        let n = bytes.len() / stride;
        if n == 0 || !n.is_power_of_two() || n > 1 << 24 {
            return None;
        }
        Some(Self { bytes, stride, log2: n.trailing_zeros() })
    }
    /// Bytes per slot.
    pub fn stride(&self) -> usize {
        self.stride
    }
    /// Number of slots.
    pub fn entries(&self) -> u32 {
        1 << self.log2
    }
    /// The raw bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
    fn word(&self, pos: u32, off: usize) -> u64 {
        let slot = (pos & ((1 << self.log2) - 1)) as usize;
        let at = slot * self.stride + off;
        let mut w = [0u8; 8];
        if let Some(b) = self.bytes.get(at..at + 8) {
            w.copy_from_slice(b);
        }
        u64::from_le_bytes(w)
    }
    fn ext_words(&self, pos: u32, base: usize) -> ExtCqe {
        ExtCqe {
            qword4: Le64::new(self.word(pos, base)),
            qword5: Le64::new(self.word(pos, base + 8)),
            qword6: Le64::new(self.word(pos, base + 16)),
            qword7: Le64::new(self.word(pos, base + 24)),
        }
    }
}

impl SlotSource for SlotBytes {
    fn ext_extra_slots(&self) -> u32 {
        u32::from(self.stride == 32)
    }
    fn log2(&self) -> u32 {
        self.log2
    }
    fn valid_q3(&self, pos: u32, lap_shift: u32) -> Option<u64> {
        let w = self.word(pos, off::QWORD3);
        valid_at(w, pos, lap_shift).then_some(w)
    }
    fn body(&self, pos: u32) -> [u64; 3] {
        [self.word(pos, off::QWORD0), self.word(pos, off::QWORD1), self.word(pos, off::QWORD2)]
    }
    fn qword(&self, pos: u32, off: usize) -> u64 {
        self.word(pos, off)
    }
    fn ext(&self, pos: u32) -> Option<ExtCqe> {
        if self.stride == 64 {
            let e = self.ext_words(pos, off::EXT);
            (e.valid() == polarity(pos, self.log2)).then_some(e)
        } else {
            let next = pos.wrapping_add(1);
            let e = self.ext_words(next, 0);
            (e.valid() == polarity(next, self.log2)).then_some(e)
        }
    }
    fn srq_ctx(&self, pos: u32) -> Option<u64> {
        (self.stride == 64).then(|| self.word(pos, off::EXT_QWORD5))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dvcq_uapi::irdma::cqe::q3;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn valid_at_is_the_polarity_test(w3 in any::<u64>(), pos in any::<u32>(), log2 in 0u32..=31) {
            prop_assert_eq!(valid_at(w3, pos, lap_shift(log2)), q3::valid(w3) == polarity(pos, log2));
        }
    }
}
