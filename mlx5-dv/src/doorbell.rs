//! The consumer-index doorbell: when and what the poller writes to the doorbell record's
//! `set_ci` word (shared/spec/mlx5.md §5, Pitfall 18).

use crate::cq::CiUpdate;
use dvcq_provider::DoorbellWord;
use dvcq_uapi::mlx5::doorbell::set_ci_word;
use std::sync::atomic::Ordering;

/// Publishes the consumer index to the device according to a [`CiUpdate`] policy.
///
/// The doorbell record's `set_ci` and `arm` words share one 8-byte granule, and device
/// memory is written only by whole 8-byte stores (the provider's access rule), so a `set_ci`
/// store reads the record and writes it back with the `arm` word it holds at that moment:
/// an arm request made in between by anyone on the CQ's thread (rdma-core's
/// `ibv_req_notify_cq` included) is kept.
#[derive(Debug)]
pub(crate) struct CiPublisher {
    dbrec: DoorbellWord,
    policy: CiUpdate,
    unpublished: u32,
    /// The last `set_ci` word written, or [`NEVER`] (a 24-bit word can never equal it).
    last_set_ci: u32,
}

/// `last_set_ci` before the first write.
const NEVER: u32 = u32::MAX;

impl CiPublisher {
    pub(crate) fn new(dbrec: DoorbellWord, policy: CiUpdate) -> Self {
        Self { dbrec, policy, unpublished: 0, last_set_ci: NEVER }
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
        self.dbrec.store_be32(w, Ordering::Release);
        self.last_set_ci = w;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dvcq_provider::DmaBuffer;
    use std::sync::Arc;

    /// `set_ci` goes big-endian into the record's first word, 24 bits; the `arm` word beside
    /// it keeps what it holds at the time of each store, also when it was written after the
    /// poller opened (as rdma-core's `ibv_req_notify_cq` does on the same record).
    #[test]
    fn set_ci_keeps_the_arm_word_beside_it() {
        let mem = Arc::new(DmaBuffer::new(64).unwrap());
        let arm = mem.doorbell(4).unwrap();
        arm.store_be32(0x1234_5678, Ordering::Release);
        let mut p = CiPublisher::new(mem.doorbell(0).unwrap(), CiUpdate::EveryPoll);
        p.publish(0x0100_0203);
        let mut rec = [0u8; 8];
        mem.read_bytes(0, &mut rec).unwrap();
        assert_eq!(rec, [0, 0, 2, 3, 0x12, 0x34, 0x56, 0x78]);
        arm.store_be32(0x2000_0005, Ordering::Release);
        p.publish(0x0000_0204);
        mem.read_bytes(0, &mut rec).unwrap();
        assert_eq!(rec, [0, 0, 2, 4, 0x20, 0, 0, 5], "an arm made after opening is kept");
        assert_eq!(p.last_set_ci(), Some(0x0204));
    }
}
