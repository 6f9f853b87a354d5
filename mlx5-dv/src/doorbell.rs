//! The CQ's doorbells: when and what the poller writes to the doorbell record's `set_ci`
//! word (rdma-core `providers/mlx5/cq.c` `update_cons_index`; the device learns of freed
//! slots only from it, unless the CQ ignores overrun), and the arm doorbell, the record's `arm`
//! word and the UAR's CQ doorbell (rdma-core `providers/mlx5/cq.c` `mlx5_arm_cq`).

use crate::cq::CiUpdate;
use dvcq_provider::{DoorbellRegister, DoorbellWord};
use dvcq_uapi::mlx5::doorbell::{arm_word, set_ci_word, uar_doorbell};
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
    /// `set_ci` stores made (one per publication, not per CQE).
    writes: u64,
}

/// `last_set_ci` before the first write.
const NEVER: u32 = u32::MAX;

impl CiPublisher {
    pub(crate) fn new(dbrec: DoorbellWord, policy: CiUpdate) -> Self {
        Self { dbrec, policy, unpublished: 0, last_set_ci: NEVER, writes: 0 }
    }

    /// The last value written to `set_ci`, if any.
    pub(crate) fn last_set_ci(&self) -> Option<u32> {
        (self.last_set_ci != NEVER).then_some(self.last_set_ci)
    }

    /// `set_ci` stores made so far.
    pub(crate) fn writes(&self) -> u64 {
        self.writes
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
        self.writes += 1;
    }
}

/// A CQ's arm doorbell: the doorbell record's `arm` word (`MLX5_CQ_ARM_DB`, record bytes
/// 4..8) and the CQ doorbell register of the UAR page the CQ was created with (UAR +
/// `MLX5_CQ_DOORBELL`, 0x20).
///
/// [`crate::Mlx5Cq::arm`] rings it as rdma-core's `mlx5_arm_cq` (and the kernel's
/// `mlx5_cq_arm`) do: the arm word `sn << 28 | cmd | ci` into the record, big-endian; a
/// store fence; the same word and the CQ number as one 8-byte big-endian store to the UAR;
/// a flush.
#[derive(Debug)]
pub struct ArmDoorbell {
    arm_db: DoorbellWord,
    uar: DoorbellRegister,
}

impl ArmDoorbell {
    /// The arm doorbell of a CQ whose record's `arm` word is `arm_db` and whose UAR CQ
    /// doorbell is `uar`.
    pub fn new(arm_db: DoorbellWord, uar: DoorbellRegister) -> Self {
        Self { arm_db, uar }
    }

    /// Whether the UAR register is device memory (false: a model's page).
    pub fn is_mmio(&self) -> bool {
        self.uar.is_mmio()
    }

    /// Rings it for CQ `cqn` with sequence number `sn`, command next or solicited, and
    /// consumer counter `ci`; returns what was written.
    pub(crate) fn ring(&self, sn: u32, solicited: bool, ci: u32, cqn: u32) -> ArmRing {
        let word = arm_word(sn, solicited, ci);
        // The record mirrors the arm (the device may read it back); it shares its 8-byte
        // granule with set_ci, which only this CQ's consumer thread writes.
        self.arm_db.store_be32(word, Ordering::Release);
        let uar = uar_doorbell(word, cqn);
        // `ring64` fences before the store (mmio_wc_start: the record first) and after
        // (mmio_flush_writes).
        self.uar.ring64(uar);
        ArmRing { word, uar }
    }
}

/// What one arm wrote: the arm word (into the record, big-endian) and the 8 bytes stored to
/// the UAR in memory order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArmRing {
    /// `sn << 28 | cmd | (ci & 0xffffff)`.
    pub word: u32,
    /// BE32(word) then BE32(cqn).
    pub uar: [u8; 8],
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
        assert_eq!(p.writes(), 2, "each publication is one store");
    }

    /// An arm lands big-endian in the record's second word, the set_ci word beside it kept,
    /// and as BE32(word), BE32(cqn) in the UAR page at +0x20.
    #[test]
    fn an_arm_writes_the_record_then_the_uar() {
        let rec_page = Arc::new(DmaBuffer::new(64).unwrap());
        let uar_page = Arc::new(DmaBuffer::new(4096).unwrap());
        let mut p = CiPublisher::new(rec_page.doorbell(0).unwrap(), CiUpdate::EveryPoll);
        p.publish(0x0000_0203);
        let db = ArmDoorbell::new(rec_page.doorbell(4).unwrap(), uar_page.doorbell_register(0x20).unwrap());
        let r = db.ring(1, true, 0x0100_0203, 0x406);
        assert_eq!(r.word, 0x1100_0203);
        let mut rec = [0u8; 8];
        rec_page.read_bytes(0, &mut rec).unwrap();
        assert_eq!(rec, [0, 0, 2, 3, 0x11, 0, 2, 3]);
        let mut uar = [0u8; 8];
        uar_page.read_bytes(0x20, &mut uar).unwrap();
        assert_eq!(uar, [0x11, 0, 2, 3, 0, 0, 4, 6]);
        assert_eq!(uar, r.uar);
    }
}
