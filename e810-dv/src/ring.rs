//! Where CQE slots come from: the ring in device memory (32- or 64-byte stride, through the
//! provider's [`CqRing`]) or a byte copy of one (ring images). The poll loop is generic over
//! [`SlotSource`], so the same code decodes a NIC's ring, a model's and an image's.
//!
//! Ring sizes are whatever rdma-core asked the kernel for: `cqe + 1`, doubled on GEN2+,
//! rounded to even, at least 4 (`providers/irdma/uverbs.c` `get_cq_size`; [`ring_slots`]), so
//! rarely a power of two, and a place in the ring cannot be a masked running counter. It is a
//! [`Pos`]: the slot and the lap's expected valid bit, rdma-core's head and polarity
//! (`irdma_uk_cq_init` starts them at 0 and 1, `irdma_uk_cq_poll_cmpl` advances them).
//! Written as one number ([`Pos::counter`]) it is a counter below twice the ring size: the
//! slot, plus the ring size on laps whose valid bit is 0. For a power-of-two ring that is a
//! running counter modulo twice the size, the rule docs/ring-image.md states for `ci`
//! ([`Pos::at`]).

use crate::status::Compat;
use core::num::NonZeroU32;
use dvcq_provider::{CqRing, RingView, SlotRef, StrideCursor, MAX_ENTRIES};
use dvcq_uapi::irdma::cqe::{ext, off, ExtCqe};
use dvcq_uapi::irdma::HwRev;
use dvcq_uapi::Le64;

/// How rdma-core rounds a ring size (`providers/irdma/uverbs.c` `get_cq_size`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rounding {
    /// rdma-core v64 and later: an odd size is rounded up to even on every generation.
    Even,
    /// rdma-core before v64 (v44 in Debian 12 included): no rounding.
    None,
}

impl From<Compat> for Rounding {
    /// [`Compat::Current`] rounds as v64 and later do (commit 772db3ec1); the older
    /// variants do not round.
    fn from(c: Compat) -> Self {
        match c.release() {
            crate::status::Release::Current => Rounding::Even,
            crate::status::Release::V52 | crate::status::Release::V44 => Rounding::None,
        }
    }
}

/// The ring size, in slots, that rdma-core's irdma provider allocates for `ibv_create_cq(cqe
/// = requested)` (`get_cq_size`, called from `ucreate_cq`): `requested + 1`, doubled for
/// 32-byte slots after GEN1 (room for two-slot extended CQEs), rounded as `rounding` says, at
/// least 4. `ibv_cq.cqe` reports the requested count, not this, so attaching to a real CQ
/// starts here. `None` if the size overflows.
pub fn ring_slots(requested: u32, hw_rev: HwRev, cqe_size: u32, rounding: Rounding) -> Option<u32> {
    let mut n = requested.checked_add(1)?;
    if cqe_size != 64 && hw_rev != HwRev::Gen1 {
        n = n.checked_mul(2)?;
    }
    if rounding == Rounding::Even && n % 2 == 1 {
        n = n.checked_add(1)?;
    }
    Some(n.max(4))
}

/// Whether rdma-core's irdma provider allocates rings of `entries` slots on generation
/// `hw_rev`, for some `ibv_create_cq` in some release from v44 on (`get_cq_size`,
/// [`ring_slots`]): at least 4 (`IRDMA_U_MINCQ_SIZE`), and even on GEN2 and GEN3 (GEN2
/// doubles `cqe + 1`; GEN3 came with v64, which rounds every size to even). GEN1 rings
/// were `cqe + 1` before v64, so any size from 4. (The 64-byte CQE mode is GEN3's, and a
/// GEN3 ring of 32-byte slots is doubled: even either way.)
pub const fn is_allocated_size(entries: u32, hw_rev: HwRev) -> bool {
    entries >= 4 && (entries % 2 == 0 || matches!(hw_rev, HwRev::Gen1))
}

/// The ring slot of counter `pos` (below twice the ring size).
#[inline(always)]
const fn slot_of(pos: u32, entries: u32) -> u32 {
    if pos < entries {
        pos
    } else {
        pos - entries
    }
}

/// Counter `pos` moved on by `slots` slots, wrapping at twice the ring size.
#[inline(always)]
const fn advance(pos: u32, slots: u32, entries: u32) -> u32 {
    let laps2 = 2 * ring_size(entries);
    // Both terms below `laps2` (at most 2^25): the sum cannot overflow.
    (pos % laps2 + slots % laps2) % laps2
}

/// The counter below twice the ring size for a running consumer counter (slot
/// `ci mod entries`, valid bit 1 when `ci / entries` is even), as ring images and
/// [`crate::CqConfig`] give it. Exact for a power-of-two ring whatever the counter; for
/// other sizes the counter must not have wrapped past `u32::MAX`.
#[inline]
const fn from_running(ci: u32, entries: u32) -> u32 {
    ci % (2 * ring_size(entries))
}

/// `entries` within the sizes a ring can have (1 to 2^24, [`MAX_ENTRIES`]), so that no
/// place arithmetic divides by zero or overflows on a size no ring has.
const fn ring_size(entries: u32) -> u32 {
    if entries == 0 {
        1
    } else if entries > MAX_ENTRIES {
        MAX_ENTRIES
    } else {
        entries
    }
}

/// Bit 63 set on the laps (of counter `pos`) whose expected valid bit is 0: what
/// [`valid_at`] XORs into qword3.
#[inline(always)]
const fn lap_flip(pos: u32, entries: u32) -> u64 {
    ((pos >= entries) as u64) << 63
}

/// The valid-bit test of qword3 `w3` as one XOR and sign test: bit 63 (valid) XOR bit 63
/// of `flip` (set on laps whose expected valid bit is 0: [`Pos::flip`]) is set exactly
/// when the valid bit is the lap's expected one.
#[inline(always)]
pub const fn valid_at(w3: u64, flip: u64) -> bool {
    ((w3 ^ flip) as i64) < 0
}

/// A consumer's place in the ring: the slot and its lap's valid-bit flip, which is
/// rdma-core's head and polarity (`irdma_uk_cq_poll_cmpl`). Poll loops step it slot by slot;
/// [`Pos::counter`] is the same place as a position counter. `entries` arguments are ring
/// sizes (1 to 2^24); another value gives some place in a ring of the nearest such size,
/// never a panic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pos {
    slot: u32,
    flip: u64,
}

impl Pos {
    /// Slot 0 of the first lap (valid bit 1): a new CQ.
    pub const START: Pos = Pos { slot: 0, flip: 0 };

    /// The place of consumer counter `ci` in a ring of `entries` slots: slot
    /// `ci mod entries`, valid bit 1 when `ci / entries` is even. Exact for a power-of-two
    /// ring whatever the counter; for other sizes the counter must not have wrapped past
    /// `u32::MAX`.
    #[inline]
    pub const fn at(ci: u32, entries: u32) -> Pos {
        let entries = ring_size(entries);
        let pos = from_running(ci, entries);
        Pos { slot: slot_of(pos, entries), flip: lap_flip(pos, entries) }
    }

    /// The slot (rdma-core's `cq_ring.head`), below the ring size.
    #[inline(always)]
    pub const fn slot(self) -> u32 {
        self.slot
    }

    /// Bit 63 set on laps whose expected valid bit is 0: what [`valid_at`] XORs into
    /// qword3.
    #[inline(always)]
    pub const fn flip(self) -> u64 {
        self.flip
    }

    /// The expected valid bit here.
    #[inline(always)]
    pub const fn polarity(self) -> bool {
        self.flip == 0
    }

    /// The position counter of this place: the slot, plus the ring size on laps whose valid
    /// bit is 0.
    #[inline]
    pub const fn counter(self, entries: u32) -> u32 {
        if self.flip == 0 {
            self.slot
        } else {
            self.slot.wrapping_add(entries)
        }
    }

    /// This place moved on by `slots`: one compare unless the move crosses the ring's end.
    #[inline(always)]
    pub fn advance(self, slots: u32, entries: u32) -> Pos {
        let entries = ring_size(entries);
        match self.slot.checked_add(slots) {
            Some(slot) if slot < entries => Pos { slot, flip: self.flip },
            // Past the ring's end, or a count so large that the sum overflows.
            _ => self.wrap(slots, entries),
        }
    }

    /// [`Pos::advance`] by at most the ring size, as every poll loop moves (one CQE, or one
    /// lap's run): the slot plus `slots` stays below twice the largest ring (2^25), so a
    /// plain add cannot overflow. A larger `slots` still gives a place in the ring, not
    /// necessarily the right one.
    #[inline(always)]
    pub(crate) fn step(self, slots: u32, entries: u32) -> Pos {
        let slot = self.slot.wrapping_add(slots);
        if slot < entries {
            Pos { slot, flip: self.flip }
        } else {
            self.wrap(slots, entries)
        }
    }

    /// [`Pos::step`] in place: the lap's valid-bit flip is written only when the slot
    /// wraps, so a one-CQE poll stores one word.
    #[inline(always)]
    pub(crate) fn step_in_place(&mut self, slots: u32, entries: u32) {
        let slot = self.slot.wrapping_add(slots);
        if slot < entries {
            self.slot = slot;
        } else {
            *self = self.wrap(slots, entries);
        }
    }

    /// The place of a [`SlotView::cursor`] with `left` slots to the ring's end, on the lap of
    /// `flip`: slot 0 of the next lap once it has passed the last slot.
    #[inline(always)]
    pub(crate) fn of_cursor(left: u32, flip: u64, entries: u32) -> Pos {
        if left == 0 {
            Pos { slot: 0, flip: flip ^ (1 << 63) }
        } else {
            Pos { slot: entries.saturating_sub(left), flip }
        }
    }

    /// This place moved on by `slots` (at most the ring size) without the expected valid
    /// bit flipping when the slot wraps to 0: where rdma-core's connection-WQE skip leaves
    /// its head (`IRDMA_RING_MOVE_HEAD_NOCHECK` without the polarity flip), a lap behind.
    pub(crate) fn step_keeping_lap(self, slots: u32, entries: u32) -> Pos {
        let entries = ring_size(entries);
        Pos { slot: (self.slot + slots % entries) % entries, flip: self.flip }
    }

    #[cold]
    #[inline(never)]
    fn wrap(self, slots: u32, entries: u32) -> Pos {
        Pos::at(advance(self.counter(entries), slots, entries), entries)
    }
}

/// The ring memory of an irdma CQ, in the slot size the CQ was created with.
#[derive(Debug)]
pub enum SlotRing {
    /// 32-byte slots (GEN1, GEN2): an extended CQE takes the next slot too.
    Slots32(CqRing<32, false>),
    /// 64-byte slots (GEN3 `IRDMA_FEATURE_64_BYTE_CQE`): the extension is in the same slot.
    Slots64(CqRing<64, false>),
}

impl SlotRing {
    /// Slots in the ring.
    pub fn entries(&self) -> u32 {
        self.view().entries()
    }
    /// Bytes per slot.
    pub fn cqe_size(&self) -> u32 {
        match self {
            Self::Slots32(_) => 32,
            Self::Slots64(_) => 64,
        }
    }
}

/// The main CQE of one slot (qwords 0-3, its first 32 bytes), addressed once: a poll loop
/// reads the valid bit and every field it needs through one handle.
pub trait SlotWords: Copy {
    /// qword3 if its valid bit is the expected polarity of the slot's lap (then with the
    /// acquire fence that orders the body reads after it), else `None`. The lap comes as
    /// [`Pos::flip`], so the test is [`valid_at`]: one XOR and sign test.
    fn valid_q3(&self, flip: u64) -> Option<u64>;
    /// The little-endian qword at byte `off` (0, 8, 16 or 24), host order: one read, for a
    /// fast path that reads only what it uses.
    fn qword(&self, off: usize) -> u64;
    /// qword0, qword1, qword2, host order.
    #[inline(always)]
    fn body(&self) -> [u64; 3] {
        [self.qword(off::QWORD0), self.qword(off::QWORD1), self.qword(off::QWORD2)]
    }
}

/// Read access to CQE slots with the valid-bit rule. Sealed: implemented for the two ring
/// strides and for image bytes.
pub trait SlotSource: sealed::Sealed {
    /// A slot's main CQE.
    type Slot<'s>: SlotWords
    where
        Self: 's;
    /// Extra slots an extended CQE takes: 1 in 32-byte mode (the next slot), 0 in 64-byte
    /// mode (same slot), as `irdma_uk_cq_poll_cmpl` finds it.
    fn ext_extra_slots(&self) -> u32;
    /// Slots in the ring.
    fn entries(&self) -> u32;
    /// Slot `slot` (below the ring size; a larger index is reduced modulo it, out of line).
    fn slot(&self, slot: u32) -> Self::Slot<'_>;
    /// The slots from `slot` on, each paired with the next element of `out`, up to the
    /// shorter of `out` and the rest of the lap: a loop over them steps through memory and
    /// tests one bound, and all its slots share one [`Pos::flip`].
    fn along<'o, T>(&self, slot: u32, out: &'o mut [T]) -> impl Iterator<Item = (Self::Slot<'_>, &'o mut T)>;
    /// The extension of the CQE at `pos` if its valid bit equals the expected polarity of
    /// where it lives (the next place in 32-byte mode, `pos` in 64-byte mode;
    /// `irdma_uk_cq_poll_cmpl`).
    fn ext(&self, pos: Pos) -> Option<ExtCqe>;
    /// qword5 (byte 40) of a 64-byte slot: a GEN3 SRQ CQE's QP context
    /// (`irdma_uk_cq_poll_cmpl`); `None` for 32-byte slots, which have no byte 40.
    fn srq_ctx(&self, slot: u32) -> Option<u64>;
}

/// Ring memory: through the slot's reference, with the ownership rule's fence (qword3
/// lies in the first 32 bytes of either stride).
impl<const LEN: usize> SlotWords for SlotRef<'_, LEN> {
    #[inline(always)]
    fn valid_q3(&self, flip: u64) -> Option<u64> {
        self.owned_u64_at(off::QWORD3, |w| valid_at(u64::from_le(w), flip)).map(u64::from_le)
    }
    #[inline(always)]
    fn qword(&self, off: usize) -> u64 {
        self.read_at::<Le64>(off).map_or(0, Le64::get)
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for dvcq_provider::RingView<'_, 32, false> {}
    impl Sealed for dvcq_provider::RingView<'_, 64, false> {}
    impl Sealed for super::SlotBytes {}
}

/// Both strides in one implementation over the ring's view (base and size by value): `S`
/// is a constant, so the stride tests fold away.
impl<'a, const S: usize> SlotSource for RingView<'a, S, false>
where
    RingView<'a, S, false>: sealed::Sealed,
{
    type Slot<'s>
        = SlotRef<'a, S>
    where
        Self: 's;
    #[inline(always)]
    fn ext_extra_slots(&self) -> u32 {
        u32::from(S == 32)
    }
    #[inline(always)]
    fn entries(&self) -> u32 {
        RingView::entries(self)
    }
    #[inline(always)]
    fn slot(&self, slot: u32) -> SlotRef<'a, S> {
        self.slot_ref::<S>(slot)
    }
    #[inline(always)]
    fn along<'o, T>(&self, slot: u32, out: &'o mut [T]) -> impl Iterator<Item = (SlotRef<'a, S>, &'o mut T)> {
        self.slots_along(slot, out)
    }
    #[inline]
    fn ext(&self, pos: Pos) -> Option<ExtCqe> {
        if S == 32 {
            // The extension is the next slot, written with that slot's pass phase: the same
            // polarity rule one place on covers rdma-core's "invert when it wrapped to 0"
            // (`irdma_uk_cq_poll_cmpl`).
            let next = pos.step(1, RingView::entries(self));
            let expect = next.polarity();
            self.owned_u64_at(next.slot(), off::QWORD3, |w| ext::valid(u64::from_le(w)) == expect)?;
            self.read_at::<ExtCqe>(next.slot(), 0)
        } else {
            let expect = pos.polarity();
            self.owned_u64_at(pos.slot(), off::EXT_QWORD7, |w| ext::valid(u64::from_le(w)) == expect)?;
            self.read_at::<ExtCqe>(pos.slot(), off::EXT)
        }
    }
    #[inline]
    fn srq_ctx(&self, slot: u32) -> Option<u64> {
        // Byte 40 exists only in 64-byte slots.
        self.read_at::<Le64>(slot, off::EXT_QWORD5).map(Le64::get)
    }
}

/// A copyable view of a [`SlotRing`] (geometry by value), for iterators that must not
/// reload it from the CQ on every CQE.
#[derive(Debug, Clone, Copy)]
pub enum SlotView<'a> {
    /// 32-byte slots.
    V32(RingView<'a, 32, false>),
    /// 64-byte slots.
    V64(RingView<'a, 64, false>),
}

impl<'a> SlotView<'a> {
    /// Slots in the ring.
    #[inline(always)]
    pub fn entries(&self) -> u32 {
        match self {
            Self::V32(r) => r.entries(),
            Self::V64(r) => r.entries(),
        }
    }

    /// A cursor on the slot of `pos` that steps through the rest of its lap, showing each
    /// slot's main CQE (its first 32 bytes). [`Pos::of_cursor`] gives its place.
    #[inline(always)]
    pub(crate) fn cursor(&self, pos: Pos) -> StrideCursor<'a, 32> {
        match self {
            Self::V32(r) => r.stride_cursor::<32>(pos.slot()),
            Self::V64(r) => r.stride_cursor::<32>(pos.slot()),
        }
    }
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
    entries: NonZeroU32,
}

impl SlotBytes {
    /// Wraps `bytes` as `bytes.len() / stride` slots. Returns `None` unless the stride is 32
    /// or 64 and the slot count is from 1 to 2^24 (any count, as real irdma rings have).
    pub fn new(bytes: Vec<u8>, stride: usize) -> Option<Self> {
        if stride != 32 && stride != 64 || bytes.len() % stride != 0 {
            return None;
        }
        let n = bytes.len() / stride;
        let entries = NonZeroU32::new(n.try_into().ok()?).filter(|e| e.get() <= 1 << 24)?;
        Some(Self { bytes, stride, entries })
    }
    /// Bytes per slot.
    pub fn stride(&self) -> usize {
        self.stride
    }
    /// Number of slots.
    pub fn entries(&self) -> u32 {
        self.entries.get()
    }
    /// The raw bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
    fn word(&self, pos: u32, off: usize) -> u64 {
        let slot = (pos % self.entries) as usize;
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

/// One slot of a [`SlotBytes`]: its four main qwords, read when addressed.
#[derive(Debug, Clone, Copy)]
pub struct ByteSlot([u64; 4]);

impl SlotWords for ByteSlot {
    fn valid_q3(&self, flip: u64) -> Option<u64> {
        valid_at(self.0[3], flip).then_some(self.0[3])
    }
    fn qword(&self, off: usize) -> u64 {
        self.0.get(off / 8).copied().unwrap_or(0)
    }
}

impl SlotSource for SlotBytes {
    type Slot<'s> = ByteSlot;
    fn ext_extra_slots(&self) -> u32 {
        u32::from(self.stride == 32)
    }
    fn entries(&self) -> u32 {
        self.entries.get()
    }
    fn slot(&self, slot: u32) -> ByteSlot {
        ByteSlot([0, 8, 16, 24].map(|off| self.word(slot, off)))
    }
    fn along<'o, T>(&self, slot: u32, out: &'o mut [T]) -> impl Iterator<Item = (ByteSlot, &'o mut T)> {
        let slot = slot % self.entries;
        let left = self.entries.get() - slot;
        out.iter_mut().take(left as usize).zip(slot..).map(|(o, s)| (self.slot(s), o))
    }
    fn ext(&self, pos: Pos) -> Option<ExtCqe> {
        if self.stride == 64 {
            let e = self.ext_words(pos.slot(), off::EXT);
            (e.valid() == pos.polarity()).then_some(e)
        } else {
            let next = pos.step(1, self.entries.get());
            let e = self.ext_words(next.slot(), 0);
            (e.valid() == next.polarity()).then_some(e)
        }
    }
    fn srq_ctx(&self, slot: u32) -> Option<u64> {
        (self.stride == 64).then(|| self.word(slot, off::EXT_QWORD5))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The expected valid bit at counter `pos`: 1 on even laps, 0 on odd ones.
    fn polarity(pos: u32, entries: u32) -> bool {
        pos < entries
    }
    use dvcq_uapi::irdma::cqe::q3;
    use proptest::prelude::*;

    #[test]
    fn ring_sizes_as_rdma_core_allocates_them() {
        // GEN2, cqe = 100: (100 + 1) * 2 = 202 slots.
        assert_eq!(ring_slots(100, HwRev::Gen2, 32, Rounding::Even), Some(202));
        // GEN1 does not double; rdma-core since v64 rounds odd sizes to even, older ones do
        // not (and the compatibility modes for them size as they do).
        assert_eq!(ring_slots(100, HwRev::Gen1, 32, Rounding::Even), Some(102));
        assert_eq!(ring_slots(102, HwRev::Gen1, 32, Rounding::Even), Some(104));
        assert_eq!(ring_slots(102, HwRev::Gen1, 32, Rounding::None), Some(103));
        // 64-byte slots hold the extension in the same slot: no doubling.
        assert_eq!(ring_slots(100, HwRev::Gen3, 64, Rounding::Even), Some(102));
        assert_eq!(ring_slots(1, HwRev::Gen1, 32, Rounding::Even), Some(4));
        assert_eq!(Rounding::from(Compat::V44), Rounding::None);
        assert_eq!(Rounding::from(Compat::V52), Rounding::None);
        assert_eq!(ring_slots(u32::MAX, HwRev::Gen1, 32, Rounding::Even), None);
        assert_eq!(ring_slots(u32::MAX - 1, HwRev::Gen1, 32, Rounding::Even), None);
        assert_eq!(ring_slots(u32::MAX - 1, HwRev::Gen3, 64, Rounding::None), Some(u32::MAX));
        assert_eq!(ring_slots(u32::MAX / 2, HwRev::Gen2, 32, Rounding::Even), None);
    }

    /// Every size `ring_slots` gives, for every request, generation and rounding, is one
    /// `is_allocated_size` takes; GEN2 and GEN3 never give an odd size, GEN1 does before
    /// v64; none is below 4.
    #[test]
    fn allocated_sizes_are_those_ring_slots_gives() {
        for rev in [HwRev::Gen1, HwRev::Gen2, HwRev::Gen3] {
            for rounding in [Rounding::Even, Rounding::None] {
                // GEN3 exists from v64 on only, which rounds.
                if rev == HwRev::Gen3 && rounding == Rounding::None {
                    continue;
                }
                for requested in 1..2000 {
                    let n = ring_slots(requested, rev, rev.cqe_size() as u32, rounding).unwrap();
                    assert!(is_allocated_size(n, rev), "{rev:?} {rounding:?} cqe={requested}: {n}");
                }
            }
        }
        for (n, rev, ok) in [
            (3, HwRev::Gen1, false),
            (5, HwRev::Gen1, true),
            (5, HwRev::Gen2, false),
            (5, HwRev::Gen3, false),
            (202, HwRev::Gen2, true),
            (2, HwRev::Gen2, false),
        ] {
            assert_eq!(is_allocated_size(n, rev), ok, "{n} {rev:?}");
        }
    }

    proptest! {
        #[test]
        fn valid_at_is_the_polarity_test(w3 in any::<u64>(), entries in 1u32..=1 << 24, p in any::<u32>()) {
            let pos = p % (2 * entries);
            prop_assert_eq!(valid_at(w3, lap_flip(pos, entries)), q3::valid(w3) == polarity(pos, entries));
        }

        /// A position is rdma-core's head and polarity: moving on slot by slot wraps the head
        /// at the ring's end and flips the polarity there, whatever the ring size.
        #[test]
        fn positions_follow_head_and_polarity(entries in 1u32..=300, p in any::<u32>(), steps in 0u32..700) {
            let mut pos = p % (2 * entries);
            let (mut head, mut pol) = (slot_of(pos, entries), polarity(pos, entries));
            for _ in 0..steps {
                pos = advance(pos, 1, entries);
                head += 1;
                if head == entries {
                    head = 0;
                    pol = !pol;
                }
                prop_assert_eq!((slot_of(pos, entries), polarity(pos, entries)), (head, pol));
            }
            let two = advance(p % (2 * entries), 2, entries);
            prop_assert_eq!(two, advance(advance(p % (2 * entries), 1, entries), 1, entries));
        }

        /// Whatever the arguments, place arithmetic does not panic (these run in debug
        /// builds, with overflow checks) and a place's slot is inside a ring of that size.
        #[test]
        fn pos_arithmetic_never_panics(entries in any::<u32>(), ci in any::<u32>(), k in any::<u32>()) {
            let size = ring_size(entries);
            let pos = Pos::at(ci, entries);
            prop_assert!(pos.slot() < size);
            let _ = pos.counter(entries);
            prop_assert!(pos.advance(k, entries).slot() < size);
            // `step` trusts `entries` (the poller's own ring size): only no panic here.
            let _ = pos.step(k, entries);
        }

        /// [`Pos`] is the same place as a position counter, before and after any move.
        #[test]
        fn pos_matches_the_counter(entries in 1u32..=300, p in any::<u32>(), k in prop_oneof![0u32..1000, any::<u32>()]) {
            let c = p % (2 * entries);
            let pos = Pos::at(c, entries);
            prop_assert_eq!(pos.counter(entries), c);
            prop_assert_eq!((pos.slot(), pos.polarity()), (slot_of(c, entries), polarity(c, entries)));
            prop_assert_eq!(pos.advance(k, entries), Pos::at(advance(c, k, entries), entries));
            let short = k % (entries + 1);
            prop_assert_eq!(pos.step(short, entries), pos.advance(short, entries));
        }

        /// For a power-of-two ring a running counter and its position agree on slot and
        /// polarity, and moving on commutes with the conversion, across `u32` wrap-around.
        #[test]
        fn running_counters_of_power_of_two_rings(log2 in 0u32..=24, ci in any::<u32>(), k in 0u32..3) {
            let entries = 1u32 << log2;
            let pos = from_running(ci, entries);
            prop_assert_eq!(slot_of(pos, entries), ci & (entries - 1));
            prop_assert_eq!(polarity(pos, entries), (ci >> log2) & 1 == 0);
            prop_assert_eq!(advance(pos, k, entries), from_running(ci.wrapping_add(k), entries));
        }
    }
}
