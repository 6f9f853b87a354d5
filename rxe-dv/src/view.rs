//! Zero-copy views of the records in the queue: each field read from ring memory when asked,
//! without building a [`Completion`].
//!
//! rxe keeps no work-queue state in userspace for the poll to update (the kernel retires the
//! work requests and writes whole records), so a view walk consumes records exactly as
//! [`crate::RxeCq`]'s poll does: the consumer index is published once, when the walk ends.

use crate::queue::QueueBuf;
use crate::record::completion;
use core::mem::offset_of;
use dvcq_provider::Completion;
use dvcq_uapi::rxe::wc::UverbsWc;

/// A lending iterator over the records the producer had published when the walk began.
/// Each [`Views::next`] consumes one; dropping the iterator stores the consumer index (with
/// release ordering, as a poll does) if it consumed any.
#[derive(Debug)]
pub struct Views<'a> {
    pub(crate) q: &'a QueueBuf,
    pub(crate) ci: &'a mut u32,
    pub(crate) mask: u32,
    /// The next record's running position.
    pub(crate) cur: u32,
    /// One past the last record this walk may show (the producer index when it began).
    pub(crate) end: u32,
}

impl Views<'_> {
    /// The next record, consumed; `None` when the walk has shown every record published
    /// when it began (or the producer index was corrupt, which the next poll reports).
    #[allow(clippy::should_implement_trait)] // a lending iterator: the view borrows the walk
    pub fn next(&mut self) -> Option<RecordView<'_>> {
        if self.cur == self.end {
            return None;
        }
        let pos = self.cur;
        self.cur = self.cur.wrapping_add(1);
        Some(RecordView { q: self.q, pos })
    }

    /// The next record without consuming it.
    pub fn peek(&self) -> Option<RecordView<'_>> {
        (self.cur != self.end).then_some(RecordView { q: self.q, pos: self.cur })
    }

    /// Records left in this walk.
    pub fn remaining(&self) -> u32 {
        self.end.wrapping_sub(self.cur)
    }
}

impl Drop for Views<'_> {
    fn drop(&mut self) {
        if self.cur != *self.ci {
            *self.ci = self.cur;
            self.q.publish_consumer(self.cur & self.mask);
        }
    }
}

/// One record in the queue (`struct ib_uverbs_wc`), read field by field. Numbers are raw:
/// `status` and `opcode` as the kernel wrote them, whether libibverbs defines them or not.
#[derive(Debug, Clone, Copy)]
pub struct RecordView<'a> {
    q: &'a QueueBuf,
    pos: u32,
}

impl RecordView<'_> {
    /// The `N` bytes of the record at byte `off`, read from the 8-byte word holding them.
    #[inline(always)]
    fn bytes<const N: usize>(&self, off: usize) -> [u8; N] {
        let word = self.q.record_word(self.pos, off & !7).to_ne_bytes();
        let at = off & 7;
        let mut out = [0u8; N];
        out.copy_from_slice(&word[at..at + N]);
        out
    }

    #[inline(always)]
    fn u32_at(&self, off: usize) -> u32 {
        u32::from_ne_bytes(self.bytes::<4>(off))
    }

    #[inline(always)]
    fn u16_at(&self, off: usize) -> u16 {
        u16::from_ne_bytes(self.bytes::<2>(off))
    }

    /// The record's running position (the consumer counter when it was read).
    pub fn position(&self) -> u32 {
        self.pos
    }

    /// `wr_id`.
    pub fn wr_id(&self) -> u64 {
        u64::from_ne_bytes(self.bytes::<8>(offset_of!(UverbsWc, wr_id)))
    }

    /// `status`, raw.
    pub fn status(&self) -> u32 {
        self.u32_at(offset_of!(UverbsWc, status))
    }

    /// `opcode`, raw.
    pub fn opcode(&self) -> u32 {
        self.u32_at(offset_of!(UverbsWc, opcode))
    }

    /// `vendor_err`.
    pub fn vendor_err(&self) -> u32 {
        self.u32_at(offset_of!(UverbsWc, vendor_err))
    }

    /// `byte_len`.
    pub fn byte_len(&self) -> u32 {
        self.u32_at(offset_of!(UverbsWc, byte_len))
    }

    /// `imm_data` (or the invalidated rkey), as `ibv_wc` holds it.
    pub fn imm_data(&self) -> u32 {
        self.u32_at(offset_of!(UverbsWc, ex))
    }

    /// `qp_num`.
    pub fn qp_num(&self) -> u32 {
        self.u32_at(offset_of!(UverbsWc, qp_num))
    }

    /// `src_qp`.
    pub fn src_qp(&self) -> u32 {
        self.u32_at(offset_of!(UverbsWc, src_qp))
    }

    /// `wc_flags`, raw.
    pub fn wc_flags(&self) -> u32 {
        self.u32_at(offset_of!(UverbsWc, wc_flags))
    }

    /// `pkey_index`.
    pub fn pkey_index(&self) -> u16 {
        self.u16_at(offset_of!(UverbsWc, pkey_index))
    }

    /// `slid`.
    pub fn slid(&self) -> u16 {
        self.u16_at(offset_of!(UverbsWc, slid))
    }

    /// `sl`.
    pub fn sl(&self) -> u8 {
        self.bytes::<1>(offset_of!(UverbsWc, sl))[0]
    }

    /// `dlid_path_bits`.
    pub fn dlid_path_bits(&self) -> u8 {
        self.bytes::<1>(offset_of!(UverbsWc, dlid_path_bits))[0]
    }

    /// The whole record as the [`Completion`] a poll would have returned for it.
    pub fn completion(&self) -> Completion {
        completion(&self.q.record(self.pos), self.pos)
    }

    /// The record's six 8-byte words in memory order, each read once: a copy of the
    /// kernel's 48-byte record as it lies in the ring, converted into nothing (what
    /// rdma-core's poll copies into a `struct ibv_wc`).
    #[inline(always)]
    pub fn words(&self) -> [u64; 6] {
        self.q.record_words(self.pos)
    }
}
