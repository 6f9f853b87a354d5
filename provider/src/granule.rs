//! The access granule of device-shared memory: every byte of a CQ ring, a doorbell word and
//! a [`crate::DmaBuffer`] is read and written only by naturally aligned 8-byte atomic
//! operations, never by plain, volatile or narrower atomic ones.
//!
//! Why one size: in Rust's memory model two unsynchronised accesses to overlapping bytes are
//! undefined behaviour unless both are reads, or both are atomic with the same address and
//! size. The ring protocol (body, then a release store of the ownership mark; an acquire
//! fence after the consumer's test) orders every body read after the write it reads, but the
//! accessors are safe, and a caller can break the protocol: read a ring while a producer
//! writes it, poll with a layout other than the one the producer writes, or publish with
//! relaxed ordering. With a single access size such a mistake reads wrong or torn values; it
//! is never a data race. On x86-64 and AArch64 a relaxed 8-byte atomic load or store is the
//! same single `mov`/`ldr`/`str` a volatile one is; a field narrower than its word costs a
//! shift.
//!
//! A store to part of a granule reads the granule and writes it back whole. That is not an
//! atomic read-modify-write: a concurrent store by another writer to the rest of the granule
//! may be lost. The ring protocol has one writer per granule at a time (the producer before
//! publishing a slot, its consumer after), so this never happens when the protocol is kept.

use core::sync::atomic::{AtomicU64, Ordering};

/// Bytes per granule (and its alignment).
pub(crate) const GRANULE: usize = 8;

/// The granule at `p`.
///
/// # Safety
///
/// `p` is 8-aligned and points to 8 bytes that stay live for `'a` and that every party
/// accesses only through this module's rule (aligned 8-byte atomic operations).
#[inline(always)]
pub(crate) unsafe fn at<'a>(p: *mut u8) -> &'a AtomicU64 {
    // SAFETY: alignment, liveness and the access rule are the caller's guarantee, which is exactly `AtomicU64::from_ptr`'s contract.
    unsafe { AtomicU64::from_ptr(p.cast()) }
}

/// How far to shift a word loaded from memory right to bring its `len` bytes starting at
/// memory byte `k` (within the word) to its low end.
#[inline(always)]
pub(crate) const fn shift(k: usize, len: usize) -> u32 {
    if cfg!(target_endian = "little") {
        (8 * k) as u32
    } else {
        (8 * (GRANULE - k - len)) as u32
    }
}

/// Byte `k` (memory order, 0 to 7) of a loaded word.
#[inline(always)]
pub(crate) const fn byte(w: u64, k: usize) -> u8 {
    (w >> shift(k, 1)) as u8
}

/// `w` with its `len` bytes at memory byte `k` replaced by the low `len` bytes of `v`
/// (`k + len <= 8`).
#[inline(always)]
pub(crate) const fn insert(w: u64, k: usize, len: usize, v: u64) -> u64 {
    let mask = if len >= GRANULE { u64::MAX } else { (1u64 << (8 * len)) - 1 };
    let s = shift(k, len);
    (w & !(mask << s)) | ((v & mask) << s)
}

/// Copies `dst.len()` bytes starting `off` bytes past `base` into `dst`, one relaxed load per
/// granule touched.
///
/// # Safety
///
/// `base` is 8-aligned, and every granule that overlaps `[base + off, base + off +
/// dst.len())` lies in memory that stays live for the call and follows this module's rule.
pub(crate) unsafe fn read(base: *mut u8, off: usize, dst: &mut [u8]) {
    let mut done = 0;
    while done < dst.len() {
        let pos = off + done;
        let k = pos % GRANULE;
        // SAFETY: `pos - k` is the 8-aligned start of a granule that overlaps the range (the caller's guarantee covers it).
        let w = unsafe { at(base.add(pos - k)) }.load(Ordering::Relaxed).to_ne_bytes();
        if let (0, Some(whole)) = (k, dst.get_mut(done..done + GRANULE)) {
            whole.copy_from_slice(&w);
            done += GRANULE;
            continue;
        }
        let n = (GRANULE - k).min(dst.len() - done);
        dst[done..done + n].copy_from_slice(&w[k..k + n]);
        done += n;
    }
}

/// [`read`] for a range of whole granules (`off` and `dst.len()` multiples of 8), inlined:
/// a copy of constant size becomes a run of loads and stores.
///
/// # Safety
///
/// As for [`read`].
#[inline(always)]
pub(crate) unsafe fn read_whole(base: *mut u8, off: usize, dst: &mut [u8]) {
    for (i, chunk) in dst.chunks_exact_mut(GRANULE).enumerate() {
        // SAFETY: `off + 8 * i` is 8-aligned (off is) and the granule there lies in the range the caller vouched for.
        let w = unsafe { at(base.add(off + i * GRANULE)) }.load(Ordering::Relaxed);
        chunk.copy_from_slice(&w.to_ne_bytes());
    }
}

/// Writes `src` starting `off` bytes past `base`, one relaxed store per granule touched; a
/// granule `src` covers only in part is read first and written back whole (see the module
/// docs).
///
/// # Safety
///
/// As for [`read`], for the range `[base + off, base + off + src.len())`.
pub(crate) unsafe fn write(base: *mut u8, off: usize, src: &[u8]) {
    let mut done = 0;
    while done < src.len() {
        let pos = off + done;
        let k = pos % GRANULE;
        // SAFETY: as in `read`.
        let g = unsafe { at(base.add(pos - k)) };
        if let (0, Some(whole)) = (k, src.get(done..done + GRANULE)) {
            let mut bytes = [0; GRANULE];
            bytes.copy_from_slice(whole);
            g.store(u64::from_ne_bytes(bytes), Ordering::Relaxed);
            done += GRANULE;
            continue;
        }
        let n = (GRANULE - k).min(src.len() - done);
        let mut bytes = g.load(Ordering::Relaxed).to_ne_bytes();
        bytes[k..k + n].copy_from_slice(&src[done..done + n]);
        g.store(u64::from_ne_bytes(bytes), Ordering::Relaxed);
        done += n;
    }
}

/// Rounds each side of a race test runs: enough to interleave on real threads, few enough
/// for Miri.
#[cfg(test)]
pub(crate) const RACE_ROUNDS: u32 = if cfg!(miri) { 40 } else { 20_000 };

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C, align(8))]
    struct Mem([u8; 32]);

    #[test]
    fn shifts_bytes_and_inserts_follow_memory_order() {
        let w = u64::from_ne_bytes([0, 1, 2, 3, 4, 5, 6, 7]);
        for k in 0..8 {
            assert_eq!(byte(w, k), k as u8);
        }
        assert_eq!((w >> shift(4, 4)) as u32, u32::from_ne_bytes([4, 5, 6, 7]));
        assert_eq!((w >> shift(2, 2)) as u16, u16::from_ne_bytes([2, 3]));
        let v = u64::from(u16::from_ne_bytes([0xaa, 0xbb]));
        assert_eq!(insert(w, 6, 2, v).to_ne_bytes(), [0, 1, 2, 3, 4, 5, 0xaa, 0xbb]);
        assert_eq!(insert(w, 0, 1, 0x1ff).to_ne_bytes(), [0xff, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(insert(w, 0, 8, 9), 9);
    }

    #[test]
    fn copies_across_granules_keep_the_bytes_around_them() {
        let mut m = Mem([0xee; 32]);
        let base = m.0.as_mut_ptr();
        let src: Vec<u8> = (1..=19).collect();
        // SAFETY: every granule touched lies in `m`, which outlives the calls and is accessed only through this module while they run.
        unsafe { write(base, 3, &src) };
        let mut got = [0u8; 32];
        // SAFETY: as above.
        unsafe { read(base, 0, &mut got) };
        assert_eq!(&got[..3], &[0xee; 3]);
        assert_eq!(&got[3..22], &src[..]);
        assert_eq!(&got[22..], &[0xee; 10]);
        let mut mid = [0u8; 5];
        // SAFETY: as above.
        unsafe { read(base, 6, &mut mid) };
        assert_eq!(mid, [4, 5, 6, 7, 8]);
    }
}
