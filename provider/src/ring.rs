//! The ring-memory primitive: a CQ ring that a device (or a device model) writes and one
//! consumer reads.
//!
//! # The ownership rule
//!
//! A device writes a CQE's body first and its ownership byte (mlx5 `op_own`, irdma's valid
//! bit in qword 3) last. The consumer must therefore:
//!
//! 1. load the ownership byte (an atomic load; the device may be writing it right now),
//! 2. decide whether the entry is software-owned,
//! 3. only then issue an **acquire fence** and read the body.
//!
//! Fencing before the decision is also correct, as long as nothing of the body is read until
//! the decision is made: a poll loop that tests two ownership marks in one branch (mlx5's
//! enhanced layout: byte 62, then `op_own`) fences after the first load.
//!
//! Reading the body before the fence could observe bytes of the previous lap (rdma-core
//! `providers/mlx5/cq.c` `mlx5_get_next_cqe`: the ownership test, then
//! `udma_from_device_barrier`; `providers/irdma/uk.c` `irdma_uk_cq_poll_cmpl` does the same
//! after its valid-bit test). The producer side mirrors it: body with relaxed stores, then
//! the ownership byte with a **release** store. [`CqRing::owned`] is the one place in dvcq
//! that implements the consumer half, and [`CqRing::publish_u8`]/[`CqRing::publish_u64`] the
//! producer half.
//!
//! No reference into ring memory is ever created: entries are copied out as values
//! ([`CqRing::read`]) or read field by field, and every access is an aligned 8-byte atomic
//! one (see `granule.rs`), so a caller that breaks the ownership rule (all accessors are
//! safe) reads wrong values but never causes a data race.
//!
//! The slot stride is a const generic, so slot addressing is a shift and every fixed-offset
//! field access is bounds-checked at compile time.
//!
//! # Ring sizes
//!
//! Every accessor takes a slot index and uses it modulo the ring's slot count, so no index
//! leaves the ring. mlx5 rings are a power of two and the reduction is a mask (`POW2`, the
//! default). irdma rings are not (rdma-core sizes an irdma CQ `cqe + 1`, doubled, rounded to
//! even: `providers/irdma/uverbs.c` `get_cq_size`); `POW2 = false` rings accept any slot
//! count: an index below the count costs one compare, a larger one a division out of line.

use crate::error::Error;
use crate::granule::{self, GRANULE};
use bytemuck::Pod;
use core::marker::PhantomData;
use core::mem::{align_of, size_of};
use core::num::NonZeroU32;
use core::ptr::NonNull;
use core::sync::atomic::{fence, Ordering};
use std::sync::Arc;

/// Something that owns ring or doorbell memory and must outlive every handle on it.
pub type KeepAlive = Arc<dyn core::any::Any + Send + Sync>;

/// Largest ring the primitive accepts (2^24 entries, the mlx5 limit; irdma's is smaller).
pub const MAX_ENTRIES: u32 = 1 << 24;

/// A ring of `entries` slots of `STRIDE` bytes in memory shared with a producer; a
/// power-of-two slot count unless `POW2` is false (see the module docs on ring sizes).
///
/// `Send` (the memory is not tied to a thread) but not `Sync` (its raw pointer sees to that):
/// each side of a ring owns its own `CqRing` value. All accessors reduce the index modulo the
/// slot count, so every access stays inside the ring.
#[derive(Debug)]
pub struct CqRing<const STRIDE: usize, const POW2: bool = true> {
    base: NonNull<u8>,
    entries: NonZeroU32,
    /// `entries - 1`, the reduction of a `POW2` ring, kept so that it costs no instruction.
    mask: u32,
    _keep: Option<KeepAlive>,
}

// SAFETY: the ring is memory reached through a raw pointer that nothing binds to the creating thread; the caller of `new` promised it outlives this value and its aliases, and every access to it (from any thread, through any alias) is an aligned 8-byte atomic one (`granule.rs`), so moving a handle to another thread cannot make a data race.
unsafe impl<const STRIDE: usize, const POW2: bool> Send for CqRing<STRIDE, POW2> {}

/// Slot index `idx` of a ring of `entries` slots (`mask` = `entries - 1`), modulo
/// `entries`: a mask for power-of-two rings; otherwise one compare, and a division only for
/// an index past the ring (callers that step a slot index never divide).
#[inline(always)]
fn slot_index<const POW2: bool>(idx: u32, entries: NonZeroU32, mask: u32) -> u32 {
    if POW2 {
        idx & mask
    } else if idx < entries.get() {
        idx
    } else {
        idx % entries
    }
}

impl<const STRIDE: usize, const POW2: bool> CqRing<STRIDE, POW2> {
    const STRIDE_OK: () = assert!(STRIDE.is_power_of_two() && STRIDE >= 8);

    /// Wraps `entries * STRIDE` bytes at `base`.
    ///
    /// # Safety
    ///
    /// `base` must point to at least `entries * STRIDE` bytes that stay mapped and writable
    /// for the life of the returned value (and of every copy made with [`CqRing::alias`]),
    /// and that nothing in this process accesses except through `CqRing`, [`crate::DmaBuffer`]
    /// and [`crate::DoorbellWord`] accessors, with naturally aligned 8-byte atomic operations
    /// of its own, or in accesses ordered before or after every access through these handles
    /// (rdma-core calls on the polling thread, say). A device's DMA is outside the process
    /// and not restricted.
    ///
    /// # Errors
    ///
    /// [`Error::Null`], [`Error::BadEntries`] (zero, above 2^24, or not a power of two
    /// where `POW2`), and
    /// [`Error::Misaligned`] (base not aligned to the stride, capped at 64 bytes).
    pub unsafe fn new(base: *mut u8, entries: u32) -> Result<Self, Error> {
        // SAFETY: forwarded contract.
        unsafe { Self::with_keepalive(base, entries, None) }
    }

    /// [`CqRing::new`], holding `keep` (the owner of the memory) alive for as long as this
    /// handle and its aliases exist.
    ///
    /// # Safety
    ///
    /// As for [`CqRing::new`]; if `keep` owns the memory, "stays mapped" is guaranteed by it.
    ///
    /// # Errors
    ///
    /// As for [`CqRing::new`].
    pub unsafe fn with_keepalive(base: *mut u8, entries: u32, keep: Option<KeepAlive>) -> Result<Self, Error> {
        #[allow(clippy::let_unit_value)]
        let () = Self::STRIDE_OK;
        let base = NonNull::new(base).ok_or(Error::Null { what: "cq ring" })?;
        let bad = Error::BadEntries { entries: entries as u64, min: 1, max: MAX_ENTRIES };
        let count = NonZeroU32::new(entries).ok_or(bad)?;
        if (POW2 && !entries.is_power_of_two()) || entries > MAX_ENTRIES {
            return Err(bad);
        }
        let align = STRIDE.min(64);
        if base.as_ptr() as usize % align != 0 {
            return Err(Error::Misaligned { what: "cq ring", addr: base.as_ptr() as usize, align });
        }
        Ok(Self { base, entries: count, mask: entries - 1, _keep: keep })
    }

    /// A second handle on the same memory, for the other side of the ring (a model's
    /// producer thread) or a decoder. Sound because the contract of [`CqRing::new`] covers
    /// every alias.
    pub fn alias(&self) -> Self {
        Self { base: self.base, entries: self.entries, mask: self.mask, _keep: self._keep.clone() }
    }

    /// Number of slots.
    #[inline(always)]
    pub fn entries(&self) -> u32 {
        self.entries.get()
    }

    /// The ring's base address (for diagnostics and descriptors).
    pub fn base_addr(&self) -> usize {
        self.base.as_ptr() as usize
    }

    /// Loads the byte at `OFF` of slot `idx` with relaxed ordering (no fence). Use
    /// [`CqRing::owned`] to decide ownership; this is for peeking at bytes that carry no
    /// ordering duty.
    #[inline(always)]
    pub fn load_u8<const OFF: usize>(&self, idx: u32) -> u8 {
        const { assert!(OFF < STRIDE) };
        self.view().load_u8_at(idx, OFF).unwrap_or(0)
    }

    /// The consumer half of the ownership rule: loads the ownership byte at `OFF` of slot
    /// `idx`; if `is_sw_owned(byte)` holds, issues the acquire fence that orders every later
    /// body read after it, and returns the byte. Returns `None` (and no fence) otherwise.
    #[inline(always)]
    pub fn owned<const OFF: usize>(&self, idx: u32, is_sw_owned: impl FnOnce(u8) -> bool) -> Option<u8> {
        const { assert!(OFF < STRIDE) };
        self.view().owned_at(idx, OFF, is_sw_owned)
    }

    /// Same as [`CqRing::owned`] for an ownership bit inside a little-endian 64-bit word at
    /// `OFF` (irdma's qword 3): loads the whole word atomically.
    #[inline(always)]
    pub fn owned_u64<const OFF: usize>(&self, idx: u32, is_sw_owned: impl FnOnce(u64) -> bool) -> Option<u64> {
        const { assert!(OFF + 8 <= STRIDE && OFF % 8 == 0) };
        self.view().owned_u64_at(idx, OFF, is_sw_owned)
    }

    /// Copies a `T` out of slot `idx` at offset `OFF`. Call only after
    /// [`CqRing::owned`] said the slot is software-owned (the fence orders this read).
    #[inline(always)]
    pub fn read<T: Pod, const OFF: usize>(&self, idx: u32) -> T {
        const { assert!(OFF + size_of::<T>() <= STRIDE && OFF % align_of::<T>() == 0 && align_of::<T>() <= 8) };
        // SAFETY: in bounds and aligned (checked at compile time above).
        unsafe { self.view().slot_ref::<STRIDE>(idx).copy_out(OFF) }
    }

    /// A copyable view of the ring for hot loops (base and size live in registers).
    #[inline(always)]
    pub fn view(&self) -> RingView<'_, STRIDE, POW2> {
        RingView { base: self.base, entries: self.entries, mask: self.mask, _ring: PhantomData }
    }

    /// See [`RingView::owned_at`].
    #[inline(always)]
    pub fn owned_at(&self, idx: u32, off: usize, is_sw_owned: impl FnOnce(u8) -> bool) -> Option<u8> {
        self.view().owned_at(idx, off, is_sw_owned)
    }

    /// See [`RingView::read_at`].
    #[inline(always)]
    pub fn read_at<T: Pod>(&self, idx: u32, off: usize) -> Option<T> {
        self.view().read_at(idx, off)
    }

    /// See [`RingView::read_bytes`].
    pub fn read_bytes(&self, idx: u32, off: usize, out: &mut [u8]) -> Result<(), Error> {
        self.view().read_bytes(idx, off, out)
    }

    /// See [`RingView::write_bytes`].
    pub fn write_bytes(&self, idx: u32, off: usize, bytes: &[u8]) -> Result<(), Error> {
        self.view().write_bytes(idx, off, bytes)
    }

    /// See [`RingView::publish_u8`].
    pub fn publish_u8(&self, idx: u32, off: usize, v: u8) -> Result<(), Error> {
        self.view().publish_u8(idx, off, v)
    }

    /// See [`RingView::store_u8`].
    pub fn store_u8(&self, idx: u32, off: usize, v: u8) -> Result<(), Error> {
        self.view().store_u8(idx, off, v)
    }

    /// See [`RingView::publish_u64`].
    pub fn publish_u64(&self, idx: u32, off: usize, v_le: u64) -> Result<(), Error> {
        self.view().publish_u64(idx, off, v_le)
    }
}

/// A borrowed, copyable view of a [`CqRing`]: the ring's base and size by value, so a poll
/// loop keeps them in registers. Same accessors and rules as the ring.
#[derive(Debug, Clone, Copy)]
pub struct RingView<'a, const STRIDE: usize, const POW2: bool = true> {
    base: NonNull<u8>,
    entries: NonZeroU32,
    mask: u32,
    _ring: PhantomData<&'a CqRing<STRIDE, POW2>>,
}

impl<'a, const STRIDE: usize, const POW2: bool> RingView<'a, STRIDE, POW2> {
    /// Number of slots.
    #[inline(always)]
    pub fn entries(&self) -> u32 {
        self.entries.get()
    }

    #[inline(always)]
    fn slot(&self, idx: u32) -> *mut u8 {
        let off = slot_index::<POW2>(idx, self.entries, self.mask) as usize * STRIDE;
        // SAFETY: `slot_index` is below `entries` (a mask of `entries - 1` where `with_keepalive` checked that a POW2 ring's size is a power of two, or a value reduced modulo the count), so `off + STRIDE <= entries * STRIDE`, which the ring's creator guaranteed is inside one mapping (the view borrows the ring).
        unsafe { self.base.as_ptr().add(off) }
    }

    /// Copies `out.len()` bytes from slot `idx` starting at `off` (cold paths: inline data,
    /// dumps). Same ordering duty as [`RingView::read_at`].
    ///
    /// # Errors
    ///
    /// [`Error::OutOfBounds`] if the range leaves the slot.
    pub fn read_bytes(&self, idx: u32, off: usize, out: &mut [u8]) -> Result<(), Error> {
        check_range(off, out.len(), STRIDE)?;
        // SAFETY: the slot is 8-aligned (ring base aligned to min(STRIDE, 64) >= 8, STRIDE a multiple of 8) and the range lies inside it (checked), so every granule it touches is one of the slot's, which the ring's creator guaranteed are live and accessed only by the granule rule.
        unsafe { granule::read(self.slot(idx), off, out) };
        Ok(())
    }

    /// Producer side: writes `bytes` into slot `idx` at `off` with relaxed stores. Never
    /// include the ownership byte/word: publish it afterwards with [`CqRing::publish_u8`] or
    /// [`CqRing::publish_u64`].
    ///
    /// # Errors
    ///
    /// [`Error::OutOfBounds`] if the range leaves the slot.
    pub fn write_bytes(&self, idx: u32, off: usize, bytes: &[u8]) -> Result<(), Error> {
        check_range(off, bytes.len(), STRIDE)?;
        // SAFETY: as in `read_bytes`.
        unsafe { granule::write(self.slot(idx), off, bytes) };
        Ok(())
    }

    /// Producer side of the ownership rule: stores the ownership byte at `off` of slot `idx`
    /// with release ordering, after the body. (The byte's granule is read and stored whole:
    /// the slot is the producer's until this store.)
    ///
    /// # Errors
    ///
    /// [`Error::OutOfBounds`] if `off` is outside the slot.
    pub fn publish_u8(&self, idx: u32, off: usize, v: u8) -> Result<(), Error> {
        check_range(off, 1, STRIDE)?;
        self.slot_ref::<STRIDE>(idx).store_u8_ordered(off, v, Ordering::Release);
        Ok(())
    }

    /// Stores a byte with relaxed ordering: for a consumer re-invalidating slots it has
    /// consumed (mlx5 compression holes) before it publishes its consumer index.
    ///
    /// # Errors
    ///
    /// [`Error::OutOfBounds`] if `off` is outside the slot.
    pub fn store_u8(&self, idx: u32, off: usize, v: u8) -> Result<(), Error> {
        check_range(off, 1, STRIDE)?;
        self.slot_ref::<STRIDE>(idx).store_u8(off, v);
        Ok(())
    }

    /// Producer side for a 64-bit ownership word (irdma qword 3, little-endian): stores it
    /// with release ordering after the body.
    ///
    /// # Errors
    ///
    /// [`Error::OutOfBounds`] or [`Error::Misaligned`] for a bad `off`.
    pub fn publish_u64(&self, idx: u32, off: usize, v_le: u64) -> Result<(), Error> {
        check_range(off, 8, STRIDE)?;
        if off % GRANULE != 0 {
            return Err(Error::Misaligned { what: "ownership word", addr: off, align: GRANULE });
        }
        // SAFETY: the slot is 8-aligned (see `read_bytes`) and `off` is a multiple of 8 with `off + 8 <= STRIDE` (checked), so this is one of the slot's granules.
        unsafe { granule::at(self.slot(idx).add(off)) }.store(v_le.to_le(), Ordering::Release);
        Ok(())
    }

    /// The first `LEN` bytes of slot `idx`, addressed once (`LEN <= STRIDE`, checked at
    /// compile time): a reader of several fields of one slot computes its address once.
    #[inline(always)]
    pub fn slot_ref<const LEN: usize>(&self, idx: u32) -> SlotRef<'a, LEN> {
        #[allow(clippy::let_unit_value)]
        let () = LenFits::<LEN, STRIDE>::OK;
        let off = slot_index::<POW2>(idx, self.entries, self.mask) as usize * STRIDE;
        // SAFETY: as in `slot`: `off + STRIDE` stays inside the ring's mapping, so the pointer is in bounds of a live allocation and therefore not null.
        SlotRef { p: unsafe { self.base.add(off) }, _ring: PhantomData }
    }

    /// Slots from slot `idx` to the ring's end, `idx`'s own included: how far a run from
    /// `idx` stays in one lap.
    #[inline(always)]
    pub fn slots_to_end(&self, idx: u32) -> u32 {
        self.entries.get() - slot_index::<POW2>(idx, self.entries, self.mask)
    }

    /// Consecutive slots from slot `idx` on, each paired with the next element of `out`,
    /// as far as the shorter of `out` and the rest of the ring goes: a loop over them steps
    /// one pointer instead of reducing every position, tests one bound, and every slot it
    /// visits lies in the same lap.
    #[inline(always)]
    pub fn slots_along<'o, T>(&self, idx: u32, out: &'o mut [T]) -> SlotsAlong<'a, 'o, T, STRIDE> {
        let count = out.len().min(self.slots_to_end(idx) as usize);
        SlotsAlong { p: self.slot(idx), out: out[..count].iter_mut(), _ring: PhantomData }
    }

    /// A cursor on slot `idx` that steps to the following slots up to the ring's end (so
    /// through one lap): a walk that goes one slot at a time adds the stride instead of
    /// reducing every position.
    #[inline(always)]
    pub fn cursor(&self, idx: u32) -> SlotCursor<'a, STRIDE> {
        let off = slot_index::<POW2>(idx, self.entries, self.mask) as usize * STRIDE;
        // SAFETY: as in `slot`: `off + STRIDE` stays inside the ring's mapping, so the pointer is in bounds of a live allocation and therefore not null.
        let p = unsafe { self.base.add(off) };
        SlotCursor { p, left: self.slots_to_end(idx), _ring: PhantomData }
    }

    /// [`RingView::cursor`] with the stride as a value and the first `LEN` bytes of each
    /// slot: one cursor type serves rings of several strides.
    #[inline(always)]
    pub fn stride_cursor<const LEN: usize>(&self, idx: u32) -> StrideCursor<'a, LEN> {
        #[allow(clippy::let_unit_value)]
        let () = LenFits::<LEN, STRIDE>::OK;
        let SlotCursor { p, left, _ring } = self.cursor(idx);
        StrideCursor { p, left, stride: STRIDE, _ring }
    }

    /// `N` consecutive slots from slot `idx` on, if they end before the ring does (so they
    /// lie in one lap): a fixed group of slots addressed from one pointer.
    #[inline(always)]
    pub fn slot_group<const N: usize>(&self, idx: u32) -> Option<SlotGroup<'a, STRIDE, N>> {
        let first = slot_index::<POW2>(idx, self.entries, self.mask);
        if ((self.entries.get() - first) as usize) < N {
            return None;
        }
        let p = NonNull::new(self.slot(idx))?;
        Some(SlotGroup { p, _ring: PhantomData })
    }

    /// The ownership byte at `off` of slot `idx` (relaxed atomic load, no fence); `None`
    /// if `off` is outside the slot.
    #[inline(always)]
    pub fn load_u8_at(&self, idx: u32, off: usize) -> Option<u8> {
        self.slot_ref::<STRIDE>(idx).load_u8_at(off)
    }

    /// [`CqRing::owned`] with the offset as an argument: for callers whose offset is an
    /// associated constant of a generic type. With a constant `off` the bounds check folds
    /// away after inlining; an out-of-slot `off` reads as "not owned".
    #[inline(always)]
    pub fn owned_at(&self, idx: u32, off: usize, is_sw_owned: impl FnOnce(u8) -> bool) -> Option<u8> {
        self.slot_ref::<STRIDE>(idx).owned_at(off, is_sw_owned)
    }

    /// The ownership test and the dispatch in one step: loads the ownership byte at `off` of
    /// slot `idx`, maps it with `classify`, and issues the acquire fence only when the result
    /// is `Some` (the entry is the consumer's). A poll loop whose class table also encodes
    /// ownership tests and dispatches with one table load.
    #[inline(always)]
    pub fn owned_map_at<T>(&self, idx: u32, off: usize, classify: impl FnOnce(u8) -> Option<T>) -> Option<T> {
        self.slot_ref::<STRIDE>(idx).owned_map_at(off, classify)
    }

    /// [`CqRing::owned_u64`] with the offset as an argument; `None` if the word is outside
    /// the slot or misaligned.
    #[inline(always)]
    pub fn owned_u64_at(&self, idx: u32, off: usize, is_sw_owned: impl FnOnce(u64) -> bool) -> Option<u64> {
        self.slot_ref::<STRIDE>(idx).owned_u64_at(off, is_sw_owned)
    }

    /// [`CqRing::read`] with the offset as an argument; `None` if `T` at `off` would leave
    /// the slot or be misaligned (folds away for constant offsets).
    #[inline(always)]
    pub fn read_at<T: Pod>(&self, idx: u32, off: usize) -> Option<T> {
        self.slot_ref::<STRIDE>(idx).read_at(off)
    }

    /// [`RingView::read_at`] into `dst`, a word at a time, without holding the whole value
    /// in registers (mini-CQE arrays); `false` (and `dst` untouched) where `read_at` would
    /// give `None`.
    #[inline(always)]
    pub fn read_into<T: Pod>(&self, idx: u32, off: usize, dst: &mut T) -> bool {
        self.slot_ref::<STRIDE>(idx).read_into(off, dst)
    }
}

/// `LEN <= STRIDE`, as a constant a generic function can require.
struct LenFits<const LEN: usize, const STRIDE: usize>;

impl<const LEN: usize, const STRIDE: usize> LenFits<LEN, STRIDE> {
    const OK: () = assert!(LEN <= STRIDE, "a slot reference longer than the slot");
}

/// Ring slots paired with the elements of a slice ([`RingView::slots_along`]).
#[derive(Debug)]
pub struct SlotsAlong<'a, 'o, T, const STRIDE: usize> {
    /// The next slot; at most one past the ring's end once `out` is exhausted.
    p: *mut u8,
    /// What is left of the slice, never longer than the slots left before the ring's end.
    out: core::slice::IterMut<'o, T>,
    _ring: PhantomData<&'a ()>,
}

impl<'a, 'o, T, const STRIDE: usize> Iterator for SlotsAlong<'a, 'o, T, STRIDE> {
    type Item = (SlotRef<'a, STRIDE>, &'o mut T);

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        let o = self.out.next()?;
        let p = NonNull::new(self.p)?;
        // SAFETY: `slots_along` cut `out` to the slots left before the ring's end, so while an element remains, `p` is a slot inside the ring and `p + STRIDE` is at most one past the ring's last byte.
        self.p = unsafe { self.p.add(STRIDE) };
        Some((SlotRef { p, _ring: PhantomData }, o))
    }
}

/// A position in a ring that steps slot by slot up to the ring's end
/// ([`RingView::cursor`]).
#[derive(Debug, Clone, Copy)]
pub struct SlotCursor<'a, const STRIDE: usize> {
    /// The current slot while `left > 0`; one past the ring's end once it is 0.
    p: NonNull<u8>,
    /// Slots from the current one to the ring's end.
    left: u32,
    _ring: PhantomData<&'a ()>,
}

impl<'a, const STRIDE: usize> SlotCursor<'a, STRIDE> {
    /// The current slot; `None` once the cursor has passed the ring's last slot.
    #[inline(always)]
    pub fn slot(&self) -> Option<SlotRef<'a, STRIDE>> {
        (self.left != 0).then_some(SlotRef { p: self.p, _ring: PhantomData })
    }

    /// Steps to the next slot (past the last one, [`SlotCursor::slot`] gives `None`).
    #[inline(always)]
    pub fn advance(&mut self) {
        if self.left != 0 {
            self.left -= 1;
            // SAFETY: `left` was at least 1, so `p` was a slot of the ring and `p + STRIDE` is inside the ring's mapping or one past its end, and not null.
            self.p = unsafe { self.p.add(STRIDE) };
        }
    }
}

/// [`SlotCursor`] with the stride as a value ([`RingView::stride_cursor`]), showing the
/// first `LEN` bytes of each slot.
#[derive(Debug, Clone, Copy)]
pub struct StrideCursor<'a, const LEN: usize> {
    /// The current slot while `left > 0`; one past the ring's end once it is 0.
    p: NonNull<u8>,
    /// Slots from the current one to the ring's end.
    left: u32,
    /// The ring's stride, at least `LEN`.
    stride: usize,
    _ring: PhantomData<&'a ()>,
}

impl<'a, const LEN: usize> StrideCursor<'a, LEN> {
    /// The current slot's first `LEN` bytes; `None` once the cursor has passed the ring's
    /// last slot.
    #[inline(always)]
    pub fn slot(&self) -> Option<SlotRef<'a, LEN>> {
        (self.left != 0).then_some(SlotRef { p: self.p, _ring: PhantomData })
    }

    /// Slots from the current one to the ring's end (0 once past the last).
    #[inline(always)]
    pub fn left(&self) -> u32 {
        self.left
    }

    /// Steps to the next slot (past the last one, [`StrideCursor::slot`] gives `None`).
    #[inline(always)]
    pub fn advance(&mut self) {
        if self.left != 0 {
            self.left -= 1;
            // SAFETY: `left` was at least 1, so `p` was a slot of a ring whose stride is `stride` (set from the ring's `STRIDE` in `stride_cursor`), and `p + stride` is inside the ring's mapping or one past its end, and not null.
            self.p = unsafe { self.p.add(self.stride) };
        }
    }
}

/// `N` consecutive ring slots inside one lap ([`RingView::slot_group`]).
#[derive(Debug, Clone, Copy)]
pub struct SlotGroup<'a, const STRIDE: usize, const N: usize> {
    /// The group's first slot, with `N * STRIDE` bytes of ring memory behind it.
    p: NonNull<u8>,
    _ring: PhantomData<&'a ()>,
}

impl<'a, const STRIDE: usize, const N: usize> SlotGroup<'a, STRIDE, N> {
    /// Slot `j % N` of the group.
    #[inline(always)]
    pub fn get(&self, j: usize) -> SlotRef<'a, STRIDE> {
        // SAFETY: `slot_group` built the group only where `N` slots from `p` on end before the ring does, and `j % N < N`, so the slot and its `STRIDE` bytes are inside the ring's mapping (not null).
        let p = unsafe { self.p.add((j % N) * STRIDE) };
        SlotRef { p, _ring: PhantomData }
    }
}

/// The first `LEN` bytes of one ring slot ([`RingView::slot_ref`]), with the accessors of
/// [`RingView`] at offsets inside them. Same ordering duty: read the body only after an
/// ownership accessor said the slot is the consumer's.
#[derive(Debug, Clone, Copy)]
pub struct SlotRef<'a, const LEN: usize> {
    /// The slot's first byte: aligned to min(stride, 64) >= 8, with the whole slot (`stride`
    /// bytes, a multiple of 8 no less than `LEN`) of ring memory behind it, so every granule
    /// that holds one of the first `LEN` bytes lies inside the slot.
    p: NonNull<u8>,
    _ring: PhantomData<&'a ()>,
}

impl<const LEN: usize> SlotRef<'_, LEN> {
    /// The granule holding byte `off` (`off < LEN`) and `off`'s place in it.
    ///
    /// # Safety
    ///
    /// `off < LEN`.
    #[inline(always)]
    unsafe fn granule_of(&self, off: usize) -> (&core::sync::atomic::AtomicU64, usize) {
        let k = off % GRANULE;
        // SAFETY: `off < LEN` (the caller's guarantee), so per the field's invariant the granule that starts at `off - k` (8-aligned, as the slot is) lies inside the slot's live ring memory, which is accessed only by the granule rule.
        (unsafe { granule::at(self.p.as_ptr().add(off - k)) }, k)
    }

    /// The ownership byte at `off` (relaxed atomic load, no fence); `None` if `off` is past
    /// `LEN`.
    #[inline(always)]
    pub fn load_u8_at(&self, off: usize) -> Option<u8> {
        if off >= LEN {
            return None;
        }
        // SAFETY: `off < LEN` (checked).
        let (g, k) = unsafe { self.granule_of(off) };
        Some(granule::byte(g.load(Ordering::Relaxed), k))
    }

    /// [`RingView::owned_at`] on this slot.
    #[inline(always)]
    pub fn owned_at(&self, off: usize, is_sw_owned: impl FnOnce(u8) -> bool) -> Option<u8> {
        acquire_if(self.load_u8_at(off)?, is_sw_owned)
    }

    /// [`RingView::owned_map_at`] on this slot.
    #[inline(always)]
    pub fn owned_map_at<T>(&self, off: usize, classify: impl FnOnce(u8) -> Option<T>) -> Option<T> {
        let class = classify(self.load_u8_at(off)?)?;
        fence(Ordering::Acquire);
        Some(class)
    }

    /// [`SlotRef::owned_map_at`] for marks that share an 8-byte word: loads the word at
    /// `off` (a multiple of 8) once, maps it (as a native `u64`: `to_ne_bytes` gives the
    /// bytes in memory order) with `classify`, and fences only when the result is `Some`.
    /// mlx5's enhanced layout tests byte 62 and `op_own` together this way, as DPDK's
    /// `check_cqe_iteration` reads both before its barrier. `None` if the word is not a
    /// whole 8 bytes of the first `LEN`.
    #[inline(always)]
    pub fn owned_word_map_at<T>(&self, off: usize, classify: impl FnOnce(u64) -> Option<T>) -> Option<T> {
        let class = classify(self.load_word_at(off)?)?;
        fence(Ordering::Acquire);
        Some(class)
    }

    /// [`RingView::store_u8`] on this slot (relaxed); false, storing nothing, if `off` is
    /// past `LEN`.
    #[inline(always)]
    pub fn store_u8(&self, off: usize, v: u8) -> bool {
        self.store_u8_ordered(off, v, Ordering::Relaxed)
    }

    /// Stores byte `off` by storing its granule whole with `order` (read first: the caller
    /// is the slot's one writer, see `granule.rs`); false if `off` is past `LEN`.
    #[inline(always)]
    fn store_u8_ordered(&self, off: usize, v: u8, order: Ordering) -> bool {
        if off >= LEN {
            return false;
        }
        // SAFETY: `off < LEN` (checked).
        let (g, k) = unsafe { self.granule_of(off) };
        g.store(granule::insert(g.load(Ordering::Relaxed), k, 1, u64::from(v)), order);
        true
    }

    /// The 8 bytes at `off` (a multiple of 8) as one relaxed load, no fence, in memory
    /// order as `u64::to_ne_bytes` gives them back; `None` if they are not a whole 8 bytes
    /// of the first `LEN`. For a caller that tests and changes several bytes of one word of
    /// a slot it owns (then [`SlotRef::store_word_at`]) with one load.
    #[inline(always)]
    pub fn load_word_at(&self, off: usize) -> Option<u64> {
        if !whole_in::<LEN>(off, GRANULE, GRANULE) {
            return None;
        }
        // SAFETY: `off + 8 <= LEN`, so `off < LEN` (checked without a sum that could wrap), and `off` is a granule's start.
        let (g, _) = unsafe { self.granule_of(off) };
        Some(g.load(Ordering::Relaxed))
    }

    /// Stores the 8 bytes at `off` (a multiple of 8) whole, relaxed: the other half of
    /// [`SlotRef::load_word_at`]. False, storing nothing, where `load_word_at` gives `None`.
    #[inline(always)]
    pub fn store_word_at(&self, off: usize, w: u64) -> bool {
        if !whole_in::<LEN>(off, GRANULE, GRANULE) {
            return false;
        }
        // SAFETY: as in `load_word_at`.
        let (g, _) = unsafe { self.granule_of(off) };
        g.store(w, Ordering::Relaxed);
        true
    }

    /// [`RingView::owned_u64_at`] on this slot.
    #[inline(always)]
    pub fn owned_u64_at(&self, off: usize, is_sw_owned: impl FnOnce(u64) -> bool) -> Option<u64> {
        self.owned_word_map_at(off, |w| is_sw_owned(w).then_some(w))
    }

    /// [`RingView::read_at`] on this slot.
    #[inline(always)]
    pub fn read_at<T: Pod>(&self, off: usize) -> Option<T> {
        if !whole_in::<LEN>(off, size_of::<T>(), align_of::<T>()) {
            return None;
        }
        // SAFETY: `off + size_of::<T>() <= LEN`, checked just above without a sum that could wrap.
        Some(unsafe { self.copy_out(off) })
    }

    /// [`RingView::read_into`] on this slot.
    #[inline(always)]
    pub fn read_into<T: Pod>(&self, off: usize, dst: &mut T) -> bool {
        if !whole_in::<LEN>(off, size_of::<T>(), align_of::<T>()) {
            return false;
        }
        // SAFETY: `off + size_of::<T>() <= LEN`, checked just above without a sum that could wrap.
        unsafe { self.copy_into(off, dst) };
        true
    }

    /// Copy of the `T` at `off`: one load and a shift for a value inside one granule (every
    /// field of a CQE), a load per granule otherwise.
    ///
    /// # Safety
    ///
    /// `off + size_of::<T>() <= LEN`.
    #[inline(always)]
    unsafe fn copy_out<T: Pod>(&self, off: usize) -> T {
        let size = size_of::<T>();
        if size != 0 && off % GRANULE + size <= GRANULE {
            // SAFETY: `off < off + size <= LEN` per the caller.
            let (g, k) = unsafe { self.granule_of(off) };
            let w = g.load(Ordering::Relaxed);
            let v = w >> granule::shift(k, size);
            return match size {
                1 => bytemuck::pod_read_unaligned(&[v as u8]),
                2 => bytemuck::pod_read_unaligned(&(v as u16).to_ne_bytes()),
                4 => bytemuck::pod_read_unaligned(&(v as u32).to_ne_bytes()),
                8 => bytemuck::pod_read_unaligned(&v.to_ne_bytes()),
                _ => bytemuck::pod_read_unaligned(&w.to_ne_bytes()[k..k + size]),
            };
        }
        let mut v = T::zeroed();
        // SAFETY: the caller's guarantee, passed on.
        unsafe { self.copy_into(off, &mut v) };
        v
    }

    /// Copy of the `T` at `off` into `v`, a granule at a time.
    ///
    /// # Safety
    ///
    /// As [`SlotRef::copy_out`].
    #[inline(always)]
    unsafe fn copy_into<T: Pod>(&self, off: usize, v: &mut T) {
        let dst = bytemuck::bytes_of_mut(v);
        if off % GRANULE == 0 && dst.len() % GRANULE == 0 {
            // SAFETY: as below; the range is whole granules.
            unsafe { granule::read_whole(self.p.as_ptr(), off, dst) }
        } else {
            // SAFETY: the slot start is 8-aligned and the range ends at or before `LEN` (the caller's guarantee), so every granule it touches lies inside the slot (the field's invariant).
            unsafe { granule::read(self.p.as_ptr(), off, dst) }
        }
    }
}

/// Whether `size` bytes at `off`, aligned to `align` (at most 8), lie inside the first `LEN`
/// bytes of a slot: the one bounds test of the slot accessors. Written as `off <= LEN - size`
/// so that no sum can wrap (an `off + size` near `usize::MAX` would wrap to a small number
/// and pass); with a constant `off` it folds away.
#[inline(always)]
const fn whole_in<const LEN: usize>(off: usize, size: usize, align: usize) -> bool {
    size <= LEN && off <= LEN - size && off % align == 0 && align <= GRANULE
}

/// The decision point of the ownership rule: if the producer's ownership mark says the
/// entry is the consumer's, issue the acquire fence that orders every later body read after
/// the producer's release store of the mark (rdma-core's `udma_from_device_barrier` after the
/// ownership test in mlx5's `mlx5_get_next_cqe` and irdma's `irdma_uk_cq_poll_cmpl`).
#[inline(always)]
fn acquire_if<W: Copy>(mark: W, is_sw_owned: impl FnOnce(W) -> bool) -> Option<W> {
    if is_sw_owned(mark) {
        fence(Ordering::Acquire);
        Some(mark)
    } else {
        None
    }
}

fn check_range(off: usize, len: usize, limit: usize) -> Result<(), Error> {
    match off.checked_add(len) {
        Some(end) if end <= limit => Ok(()),
        _ => Err(Error::OutOfBounds { what: "ring slot", offset: off, len, limit }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C, align(64))]
    struct Mem([u8; 256]);

    #[test]
    fn rejects_bad_geometry() {
        let mut m = Mem([0; 256]);
        // SAFETY: `m` outlives the rings; only CqRing accessors touch it.
        unsafe {
            assert!(matches!(CqRing::<64>::new(m.0.as_mut_ptr(), 3), Err(Error::BadEntries { .. })));
            assert!(matches!(CqRing::<64>::new(core::ptr::null_mut(), 4), Err(Error::Null { .. })));
            assert!(matches!(CqRing::<64>::new(m.0.as_mut_ptr().add(8), 2), Err(Error::Misaligned { .. })));
            assert!(CqRing::<64>::new(m.0.as_mut_ptr(), 4).is_ok());
        }
    }

    #[test]
    fn rings_of_any_size_reduce_every_index_into_the_ring() {
        let mut m = Mem([0; 256]);
        // SAFETY: `m` outlives the rings; only CqRing accessors touch it.
        unsafe {
            assert!(matches!(CqRing::<32>::new(m.0.as_mut_ptr(), 6), Err(Error::BadEntries { .. })));
            assert!(matches!(CqRing::<32, false>::new(m.0.as_mut_ptr(), 0), Err(Error::BadEntries { .. })));
        }
        // SAFETY: as above; 6 slots of 32 bytes fit in `m`.
        let ring = unsafe { CqRing::<32, false>::new(m.0.as_mut_ptr(), 6) }.unwrap();
        for i in 0..6u32 {
            ring.publish_u8(i, 0, 0x40 + i as u8).unwrap();
        }
        // A slot index, a lap-parity position (below 12) and a wild index all land on
        // `idx mod 6`.
        for idx in [0u32, 5, 6, 11, 12, 17, 1000, u32::MAX] {
            assert_eq!(ring.load_u8::<0>(idx), 0x40 + (idx % 6) as u8, "index {idx}");
        }
        // Walks stop at the ring's end, which is not a power of two.
        let mut out = [0u8; 8];
        let n = ring.view().slots_along(10, &mut out).map(|(s, o)| *o = s.load_u8_at(0).unwrap()).count();
        assert_eq!(n, 2);
        assert_eq!(out[..2], [0x44, 0x45]);
        // Nothing past the ring was touched.
        assert!(m.0[6 * 32..].iter().all(|&b| b == 0));
    }

    #[test]
    fn slots_along_stop_at_the_ring_end_and_match_slot_ref() {
        let mut m = Mem([0; 256]);
        // SAFETY: `m` outlives the ring and is only accessed through it.
        let ring = unsafe { CqRing::<64>::new(m.0.as_mut_ptr(), 4) }.unwrap();
        for i in 0..4u32 {
            ring.publish_u8(i, 63, 0x10 + i as u8).unwrap();
        }
        let view = ring.view();
        // From running position 6 (slot 2) only slots 2 and 3 remain in this lap, however
        // long the slice.
        let mut out = [0u8; 5];
        let mut seen = Vec::new();
        for (k, (slot, o)) in view.slots_along(6, &mut out).enumerate() {
            let b = slot.owned_map_at(63, Some).unwrap();
            assert_eq!(Some(b), view.slot_ref::<64>(6 + k as u32).load_u8_at(63));
            *o = b;
            seen.push(b);
        }
        assert_eq!(seen, [0x12, 0x13]);
        assert_eq!(out, [0x12, 0x13, 0, 0, 0]);
        // A slice shorter than the rest of the lap bounds the walk.
        assert_eq!(view.slots_along(4, &mut [0u8; 3]).count(), 3);
        assert_eq!(view.slots_along(4, &mut [0u8; 0]).count(), 0);
        // Stores through a slot land in that slot; offsets past it store nothing.
        let slot = view.slot_ref::<64>(1);
        assert!(slot.store_u8(62, 0xab));
        assert!(!slot.store_u8(64, 0xcd));
        assert_eq!(ring.load_u8::<62>(1), 0xab);
        assert_eq!(ring.load_u8::<63>(2), 0x12);
    }

    #[test]
    fn cursors_step_slot_by_slot_to_the_ring_end_and_stop_there() {
        let mut m = Mem([0; 256]);
        // SAFETY: `m` outlives the rings and is only accessed through them.
        let ring = unsafe { CqRing::<32>::new(m.0.as_mut_ptr(), 8) }.unwrap();
        for i in 0..8u32 {
            ring.publish_u8(i, 31, 0x30 + i as u8).unwrap();
        }
        let view = ring.view();
        // From running position 13 (slot 5): slots 5, 6 and 7, then nothing, however often
        // it is advanced.
        let mut c = view.cursor(13);
        let mut seen = Vec::new();
        while let Some(s) = c.slot() {
            seen.push(s.load_u8_at(31).unwrap());
            c.advance();
        }
        assert_eq!(seen, [0x35, 0x36, 0x37]);
        c.advance();
        assert!(c.slot().is_none());
        // A ring of any size: 6 slots, a cursor from running position 10 (slot 4) sees
        // slots 4 and 5.
        // SAFETY: as above.
        let ring = unsafe { CqRing::<32, false>::new(m.0.as_mut_ptr(), 6) }.unwrap();
        let mut c = ring.view().cursor(10);
        let mut n = 0;
        while let Some(s) = c.slot() {
            assert_eq!(s.load_u8_at(31), ring.view().slot_ref::<32>(10 + n).load_u8_at(31));
            c.advance();
            n += 1;
        }
        assert_eq!(n, 2);
    }

    #[test]
    fn stride_cursors_show_each_slots_start_in_the_rings_stride() {
        let mut m = Mem([0; 256]);
        // SAFETY: `m` outlives the ring and is only accessed through it.
        let ring = unsafe { CqRing::<64, false>::new(m.0.as_mut_ptr(), 3) }.unwrap();
        for i in 0..3u32 {
            ring.publish_u8(i, 0, 0x40 + i as u8).unwrap();
            ring.publish_u8(i, 31, 0x50 + i as u8).unwrap();
        }
        // From slot 1 of a 3-slot ring of 64-byte slots: the first 32 bytes of slots 1 and
        // 2, then nothing, however often it is advanced.
        let mut c = ring.view().stride_cursor::<32>(4);
        let mut seen = Vec::new();
        while let Some(s) = c.slot() {
            assert_eq!(c.left(), 2 - seen.len() as u32);
            seen.push((s.load_u8_at(0).unwrap(), s.load_u8_at(31).unwrap(), s.load_u8_at(32)));
            c.advance();
        }
        assert_eq!(seen, [(0x41, 0x51, None), (0x42, 0x52, None)]);
        c.advance();
        assert!(c.slot().is_none());
        assert_eq!(c.left(), 0);
    }

    #[test]
    fn slot_groups_exist_only_inside_one_lap_and_address_their_slots() {
        let mut m = Mem([0; 256]);
        // SAFETY: `m` outlives the rings and is only accessed through them.
        let ring = unsafe { CqRing::<32>::new(m.0.as_mut_ptr(), 8) }.unwrap();
        for i in 0..8u32 {
            ring.publish_u8(i, 31, 0x20 + i as u8).unwrap();
        }
        let view = ring.view();
        // Four slots from running position 12 (slot 4) are slots 4-7; from slot 5 on they
        // would pass the ring's end.
        let g = view.slot_group::<4>(12).unwrap();
        for j in 0..4 {
            assert_eq!(g.get(j).load_u8_at(31), view.slot_ref::<32>(12 + j as u32).load_u8_at(31));
        }
        // An index is taken modulo the group's size.
        assert_eq!(g.get(5).load_u8_at(31), Some(0x25));
        assert!(view.slot_group::<4>(13).is_none());
        assert!(view.slot_group::<8>(16).is_some());
        assert!(view.slot_group::<9>(0).is_none());
        // A ring of any size: 6 slots, a group of 4 fits from slot 2, not from slot 3.
        // SAFETY: as above.
        let ring = unsafe { CqRing::<32, false>::new(m.0.as_mut_ptr(), 6) }.unwrap();
        let view = ring.view();
        assert!(view.slot_group::<4>(8).is_some());
        assert!(view.slot_group::<4>(9).is_none());
    }

    #[test]
    fn producer_publish_then_consumer_read() {
        let mut m = Mem([0; 256]);
        // SAFETY: `m` outlives the ring and is only accessed through it.
        let ring = unsafe { CqRing::<64>::new(m.0.as_mut_ptr(), 4) }.unwrap();
        let body: Vec<u8> = (0..63).collect();
        ring.write_bytes(5, 0, &body).unwrap(); // index 5 masks to slot 1
        assert!(ring.owned::<63>(1, |b| b == 0x21).is_none());
        ring.publish_u8(1, 63, 0x21).unwrap();
        assert_eq!(ring.owned::<63>(1, |b| b == 0x21), Some(0x21));
        let got: [u8; 64] = ring.read::<[u8; 64], 0>(1);
        assert_eq!(&got[..63], &body[..]);
        assert_eq!(got[63], 0x21);
        assert!(ring.write_bytes(0, 60, &[0; 8]).is_err());
    }

    /// A slot's word and typed accessors take exactly the whole, aligned ranges inside the
    /// slot's first `LEN` bytes: each reads and writes the bytes it names, and refuses (None
    /// or false, touching nothing) a range that ends past `LEN` or is misaligned. These
    /// checks are all that keeps their unsafe reads in bounds.
    #[test]
    fn slot_accessors_take_whole_aligned_ranges_inside_the_slot() {
        let mut m = Mem([0; 256]);
        // SAFETY: `m` outlives the ring and is only accessed through it.
        let ring = unsafe { CqRing::<64>::new(m.0.as_mut_ptr(), 4) }.unwrap();
        let body: Vec<u8> = (0..64).map(|b| b as u8 ^ 0xa5).collect();
        ring.write_bytes(1, 0, &body).unwrap();
        let view = ring.view();
        let slot = view.slot_ref::<32>(1);
        let word = |off: usize| u64::from_ne_bytes(body[off..off + 8].try_into().unwrap());
        for off in 0..40 {
            let whole = off + 8 <= 32 && off % 8 == 0;
            assert_eq!(slot.load_word_at(off), whole.then(|| word(off)), "load_word_at({off})");
            assert_eq!(slot.owned_u64_at(off, |_| true), whole.then(|| word(off)), "owned_u64_at({off})");
            assert_eq!(slot.read_at::<u64>(off), whole.then(|| word(off)), "read_at::<u64>({off})");
            let mut dst = 0u64;
            assert_eq!(slot.read_into(off, &mut dst), whole, "read_into({off})");
            assert_eq!(dst, if whole { word(off) } else { 0 }, "read_into({off})");
            let half = off + 4 <= 32 && off % 4 == 0;
            let want = half.then(|| u32::from_ne_bytes(body[off..off + 4].try_into().unwrap()));
            assert_eq!(slot.read_at::<u32>(off), want, "read_at::<u32>({off})");
        }
        // Stores: a refused one writes nothing, anywhere in the ring.
        for off in [4, 25, 32, 40] {
            assert!(!slot.store_word_at(off, u64::MAX), "store_word_at({off})");
        }
        let mut all = [0u8; 64];
        ring.read_bytes(1, 0, &mut all).unwrap();
        assert_eq!(&all[..], &body[..]);
        assert!(slot.store_word_at(24, 0x0102_0304_0506_0708));
        assert_eq!(slot.load_word_at(24), Some(0x0102_0304_0506_0708));
        ring.read_bytes(1, 0, &mut all).unwrap();
        assert_eq!((&all[..24], &all[32..]), (&body[..24], &body[32..]));
        // Neighbouring slots untouched.
        assert!(m.0[..64].iter().chain(&m.0[128..]).all(|&b| b == 0));
    }

    /// Offsets at and past every boundary of a slot, up to `usize::MAX - k`, where an
    /// unchecked `off + size` wraps to a small sum: every accessor that takes an offset
    /// refuses them all and touches nothing, in the slot or around it. Slot 1 of the ring
    /// is used, so a wrapped offset would land in slot 0 (read or overwritten here, not a
    /// crash).
    #[test]
    fn offsets_past_the_slot_end_are_refused_even_where_a_sum_would_wrap() {
        let mut m = Mem([0; 256]);
        for (i, b) in m.0.iter_mut().enumerate() {
            *b = i as u8 ^ 0x5a;
        }
        let before = m.0;
        // SAFETY: `m` outlives the ring and is only accessed through it.
        let ring = unsafe { CqRing::<64>::new(m.0.as_mut_ptr(), 4) }.unwrap();
        let view = ring.view();
        let slot = view.slot_ref::<32>(1);
        let whole = view.slot_ref::<64>(1);
        let wild = (0..=17).map(|k| usize::MAX - k);
        // Offsets from where the last whole word or field ends to past the slot.
        let edges = |len: usize, size: usize| (len - size + 1..=len + 9).chain([len * 2, 1 << 40]);
        for off in wild.clone().chain(edges(32, 8)) {
            assert_eq!(slot.load_word_at(off), None, "load_word_at({off:#x})");
            assert!(!slot.store_word_at(off, u64::MAX), "store_word_at({off:#x})");
            assert_eq!(slot.owned_u64_at(off, |_| true), None, "owned_u64_at({off:#x})");
            assert_eq!(slot.owned_word_map_at(off, Some), None, "owned_word_map_at({off:#x})");
            assert_eq!(slot.read_at::<u64>(off), None, "read_at::<u64>({off:#x})");
            let mut dst = 7u64;
            assert!(!slot.read_into(off, &mut dst), "read_into::<u64>({off:#x})");
            assert_eq!(dst, 7);
        }
        for off in wild.clone().chain(edges(32, 4)) {
            assert_eq!(slot.read_at::<u32>(off), None, "read_at::<u32>({off:#x})");
        }
        for off in wild.clone().chain(edges(32, 1)) {
            assert_eq!(slot.read_at::<u8>(off), None, "read_at::<u8>({off:#x})");
            assert_eq!(slot.load_u8_at(off), None, "load_u8_at({off:#x})");
            assert!(!slot.store_u8(off, 0xff), "store_u8({off:#x})");
        }
        for off in wild.clone().chain(edges(32, 16)) {
            assert_eq!(slot.read_at::<[u8; 16]>(off), None, "read_at::<[u8; 16]>({off:#x})");
            let mut dst = [7u8; 16];
            assert!(!slot.read_into(off, &mut dst), "read_into::<[u8; 16]>({off:#x})");
            assert_eq!(dst, [7; 16]);
        }
        // The ring-level accessors, on the whole 64-byte slot.
        for off in wild.clone().chain(edges(64, 8)) {
            assert_eq!(ring.read_at::<u64>(1, off), None, "CqRing::read_at({off:#x})");
            assert_eq!(view.read_at::<u64>(1, off), None, "RingView::read_at({off:#x})");
            assert_eq!(view.owned_u64_at(1, off, |_| true), None, "RingView::owned_u64_at({off:#x})");
            assert_eq!(whole.owned_word_map_at(off, Some), None, "owned_word_map_at({off:#x})");
            let mut dst = [7u8; 8];
            assert!(!view.read_into(1, off, &mut dst), "RingView::read_into({off:#x})");
            assert_eq!(dst, [7; 8]);
            assert!(ring.publish_u64(1, off, u64::MAX).is_err(), "publish_u64({off:#x})");
        }
        for off in wild.chain(edges(64, 1)) {
            assert_eq!(view.load_u8_at(1, off), None, "RingView::load_u8_at({off:#x})");
            assert_eq!(view.owned_at(1, off, |_| true), None, "RingView::owned_at({off:#x})");
            assert!(ring.store_u8(1, off, 0xff).is_err() && ring.publish_u8(1, off, 0xff).is_err(), "{off:#x}");
            assert!(ring.write_bytes(1, off, &[0xff; 2]).is_err(), "write_bytes({off:#x})");
            assert!(ring.read_bytes(1, off, &mut [0; 2]).is_err(), "read_bytes({off:#x})");
        }
        // The last whole field of each size is still taken.
        assert_eq!(slot.read_at::<u64>(24), Some(u64::from_ne_bytes(before[88..96].try_into().unwrap())));
        assert_eq!(slot.read_at::<[u8; 16]>(16).map(|a| a[15]), Some(before[64 + 31]));
        assert_eq!(view.read_at::<u64>(1, 56), Some(u64::from_ne_bytes(before[120..128].try_into().unwrap())));
        drop(ring);
        assert!(m.0 == before, "a refused access wrote something");
    }

    /// The ring-level accessors the vendor pollers and models use: the 64-bit ownership
    /// word (irdma's qword 3) published little-endian and tested whole, byte stores, the
    /// class-mapping ownership test, and copies into a buffer; each refuses what is outside
    /// the slot or misaligned, and touches nothing then.
    #[test]
    fn ring_accessors_name_their_bytes_and_refuse_the_rest() {
        let mut m = Mem([0; 256]);
        // SAFETY: `m` outlives the ring and is only accessed through it.
        let ring = unsafe { CqRing::<32, false>::new(m.0.as_mut_ptr(), 6) }.unwrap();
        let view = ring.view();
        assert_eq!((ring.entries(), view.entries()), (6, 6));
        assert_eq!(ring.base_addr(), m.0.as_ptr() as usize);
        // The ownership word: stored little-endian, tested and returned whole.
        ring.publish_u64(8, 24, 0x8000_0000_0000_0042).unwrap(); // index 8 is slot 2
        let mut bytes = [0u8; 8];
        ring.read_bytes(2, 24, &mut bytes).unwrap();
        assert_eq!(bytes, [0x42, 0, 0, 0, 0, 0, 0, 0x80]);
        let valid = |w: u64| w >> 63 == 1;
        assert_eq!(ring.owned_u64::<24>(2, valid), Some(0x8000_0000_0000_0042));
        assert_eq!(view.owned_u64_at(2, 24, valid), Some(0x8000_0000_0000_0042));
        assert_eq!(view.owned_u64_at(2, 24, |w| !valid(w)), None);
        assert_eq!(view.owned_u64_at(2, 20, valid), None, "misaligned");
        assert_eq!(view.owned_u64_at(2, 32, valid), None, "past the slot");
        assert!(matches!(ring.publish_u64(2, 20, 1), Err(Error::Misaligned { .. })));
        assert!(matches!(ring.publish_u64(2, 32, 1), Err(Error::OutOfBounds { .. })));
        // Byte stores: that byte of that slot only.
        ring.store_u8(1, 5, 0xab).unwrap();
        view.store_u8(3, 31, 0xcd).unwrap();
        assert!(ring.store_u8(1, 32, 0xff).is_err() && view.store_u8(1, 32, 0xff).is_err());
        let changed: Vec<(usize, u8)> = m.0[..6 * 32].iter().copied().enumerate().filter(|&(_, b)| b != 0).collect();
        assert_eq!(changed, [(32 + 5, 0xab), (2 * 32 + 24, 0x42), (2 * 32 + 31, 0x80), (3 * 32 + 31, 0xcd)]);
        // The class-mapping ownership test maps the byte, or gives nothing.
        assert_eq!(view.owned_map_at(1, 5, |b| (b == 0xab).then_some("mine")), Some("mine"));
        assert_eq!(view.owned_map_at(1, 5, |b| (b == 0).then_some("mine")), None);
        assert_eq!(view.owned_map_at(1, 32, |_| Some("mine")), None, "past the slot");
        let w = view.slot_ref::<32>(2).owned_word_map_at(24, |w| Some(w.to_ne_bytes()));
        assert_eq!(w, Some([0x42, 0, 0, 0, 0, 0, 0, 0x80]), "a word in memory order");
        // Copies into a buffer: whole and aligned, or nothing.
        let mut dst = [0u8; 8];
        assert!(view.read_into(1, 0, &mut dst));
        assert_eq!(dst, [0, 0, 0, 0, 0, 0xab, 0, 0]);
        let mut dst = [7u8; 8];
        assert!(!view.read_into(1, 28, &mut dst));
        assert_eq!(dst, [7; 8]);
    }
}

#[cfg(test)]
mod race_tests {
    use crate::granule::RACE_ROUNDS as ROUNDS;
    use crate::DmaBuffer;
    use std::sync::Arc;

    /// A reader that ignores the ownership rule (a snapshot, a decoder alias, a poller that
    /// tests the wrong byte) while a producer thread rewrites the same slots reads torn
    /// values, never undefined ones: every byte it sees is one some store wrote. Under Miri
    /// this also checks that no access pair is a data race or a mixed-size race.
    #[test]
    fn a_reader_that_breaks_the_ownership_rule_sees_only_written_bytes() {
        let buf = Arc::new(DmaBuffer::new(4096).unwrap());
        let ring = buf.cq_ring::<64>(0, 4).unwrap();
        let producer_ring = ring.alias();
        let producer = std::thread::spawn(move || {
            for r in 1..=ROUNDS {
                let v = (r % 200) as u8 + 1;
                for slot in 0..4 {
                    producer_ring.write_bytes(slot, 0, &[v; 63]).unwrap();
                    producer_ring.publish_u8(slot, 63, v).unwrap();
                    producer_ring.store_u8(slot, 62, v).unwrap();
                }
            }
        });
        for r in 0..ROUNDS {
            let slot = r % 4;
            let mut snap = [0u8; 64];
            buf.read_bytes(slot as usize * 64 + 3, &mut snap[..61]).unwrap();
            ring.read_bytes(slot, 0, &mut snap[61..]).unwrap();
            let field: u32 = ring.read_at(slot, 44).unwrap();
            let own = ring.owned::<63>(slot, |b| b != 0);
            let words = field.to_ne_bytes();
            for b in snap.iter().chain(&words).chain(own.iter()) {
                assert!(*b <= 200, "byte {b:#x} was never written");
            }
        }
        producer.join().unwrap();
        let mut last = [0u8; 64];
        ring.read_bytes(0, 0, &mut last).unwrap();
        let v = (ROUNDS % 200) as u8 + 1;
        assert_eq!(last, [v; 64], "the producer's last round is what the slot holds");
    }
}
