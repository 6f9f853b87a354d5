//! The consumer-index doorbell: when and what the poller writes to the doorbell record's
//! `set_ci` word (shared/spec/mlx5.md §5, Pitfall 18).

use crate::cq::CiUpdate;
use dvcq_provider::{DoorbellWord, Error as ProviderError};
use dvcq_uapi::mlx5::doorbell::set_ci_word;
use std::sync::atomic::Ordering;

/// Publishes the consumer index to the device according to a [`CiUpdate`] policy.
///
/// The doorbell record's `set_ci` and `arm` words share one 8-byte granule, and device
/// memory is written only by whole 8-byte stores (the provider's access rule). The poller is
/// the record's one writer, so it keeps the `arm` half it last saw and writes both words in
/// one store without reading the record first. (An arm path must update `arm_half`.)
#[derive(Debug)]
pub(crate) struct CiPublisher {
    dbrec: DoorbellWord,
    /// The `arm` word's bytes, in place in the little-endian granule value.
    arm_half: u64,
    policy: CiUpdate,
    unpublished: u32,
    /// The last `set_ci` word written, or [`NEVER`] (a 24-bit word can never equal it).
    last_set_ci: u32,
}

/// `last_set_ci` before the first write.
const NEVER: u32 = u32::MAX;

impl CiPublisher {
    /// A publisher on the record whose `set_ci` word (the record's first) is `dbrec`.
    ///
    /// # Errors
    ///
    /// [`ProviderError::Misaligned`] if `dbrec` is not 8-byte aligned (rdma-core's records
    /// are cache-line aligned).
    pub(crate) fn new(dbrec: DoorbellWord, policy: CiUpdate) -> Result<Self, ProviderError> {
        let arm_half = dbrec.load_le64(Ordering::Relaxed)? & !u64::from(u32::MAX);
        Ok(Self { dbrec, arm_half, policy, unpublished: 0, last_set_ci: NEVER })
    }

    /// The last value written to `set_ci`, if any.
    pub(crate) fn last_set_ci(&self) -> Option<u32> {
        (self.last_set_ci != NEVER).then_some(self.last_set_ci)
    }

    /// After a poll call that consumed `consumed` CQEs, leaving the counter at `ci`.
    #[inline(always)]
    pub(crate) fn after_batch(&mut self, ci: u32, consumed: u32) {
        if self.policy == CiUpdate::EveryPoll {
            self.publish(ci);
            return;
        }
        self.after_batch_cadence(ci, consumed);
    }

    fn after_batch_cadence(&mut self, ci: u32, consumed: u32) {
        match self.policy {
            CiUpdate::EveryPoll => self.publish(ci),
            CiUpdate::EveryN(k) => {
                self.unpublished = self.unpublished.wrapping_add(consumed);
                if self.unpublished >= k.get() {
                    self.publish(ci);
                    self.unpublished = 0;
                }
            }
            CiUpdate::Never => {}
        }
    }

    /// An explicit publication (`update_ci`): also restarts the every-N count.
    pub(crate) fn publish_now(&mut self, ci: u32) {
        self.publish(ci);
        self.unpublished = 0;
    }

    /// Writes `ci & 0xffffff` to `set_ci` with release ordering: every CQE read before
    /// happens-before the device reusing its slot.
    #[inline(always)]
    pub(crate) fn publish(&mut self, ci: u32) {
        let w = set_ci_word(ci);
        // `set_ci` big-endian in the granule's first four bytes: as a little-endian value,
        // the byte-swapped word (on any host).
        let granule = self.arm_half | u64::from(w.swap_bytes());
        // `new` checked the alignment, the only failure.
        let _ = self.dbrec.store_le64(granule, Ordering::Release);
        self.last_set_ci = w;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dvcq_provider::DmaBuffer;
    use std::sync::Arc;

    /// `set_ci` goes big-endian into the record's first word in one 8-byte store that keeps
    /// the `arm` word as the poller found it; a record that is not 8-byte aligned is refused.
    #[test]
    fn set_ci_is_stored_beside_the_arm_word_it_found() {
        let mem = Arc::new(DmaBuffer::new(64).unwrap());
        mem.doorbell(4).unwrap().store_be32(0x1234_5678, Ordering::Release);
        let mut p = CiPublisher::new(mem.doorbell(0).unwrap(), CiUpdate::EveryPoll).unwrap();
        p.publish(0x0100_0203);
        let mut rec = [0u8; 8];
        mem.read_bytes(0, &mut rec).unwrap();
        assert_eq!(rec, [0, 0, 2, 3, 0x12, 0x34, 0x56, 0x78], "24-bit set_ci, arm word untouched");
        assert_eq!(p.last_set_ci(), Some(0x0203));
        let misaligned = CiPublisher::new(mem.doorbell(12).unwrap(), CiUpdate::EveryPoll);
        assert!(matches!(misaligned, Err(ProviderError::Misaligned { .. })));
    }
}
