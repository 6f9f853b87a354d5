//! The consumer-index doorbell: when and what the poller writes to the doorbell record's
//! `set_ci` word (shared/spec/mlx5.md §5, Pitfall 18).

use crate::cq::CiUpdate;
use dvcq_provider::DoorbellWord;
use dvcq_uapi::mlx5::doorbell::set_ci_word;
use std::sync::atomic::Ordering;

/// Publishes the consumer index to the device according to a [`CiUpdate`] policy.
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
