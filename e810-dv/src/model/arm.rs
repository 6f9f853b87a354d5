//! The device side of arming an irdma CQ: what the model takes from a write to the CQ
//! doorbell (the context's doorbell page + 0x40, rdma-core `irdma_uk_cq_request_notification`).
//!
//! The write carries only the CQ id; the device then reads the arm word at shadow-area
//! byte 32 and takes it as a new arm when its sequence number differs from the last one it
//! took (the provider adds one on every request). `ARM_NEXT` arms for any completion;
//! `ARM_NEXT_SE` alone for a solicited or error one. A doorbell of another CQ, or with the
//! sequence number already taken, is not an arm. Two points are inferred, not documented:
//! the device reads the shadow area when the doorbell arrives (the doorbell carries only the
//! CQ id, and the provider stores the arm word before it, behind a store barrier), and the
//! sequence number it starts from is 0 (rdma-core allocates the shadow area zeroed).

use super::IrdmaModel;
use dvcq_uapi::irdma::shadow::{arm, ARM_NEXT, ARM_NEXT_SE, ARM_OFFSET, DB_CQ_OFFSET};

/// An arm the model took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShadowArm {
    /// The shadow area's arm word when the doorbell arrived.
    pub word: u64,
    /// Ring slots written past the consumer head the shadow area holds: the CQEs in them
    /// fire the arm at once if they qualify.
    pub past: u32,
}

impl ShadowArm {
    /// The 2-bit sequence number.
    pub fn seq(&self) -> u8 {
        arm::seq(self.word)
    }

    /// Armed for a solicited or error completion only (`ARM_NEXT_SE` without `ARM_NEXT`).
    pub fn solicited(&self) -> bool {
        self.word & ARM_NEXT == 0
    }
}

/// A doorbell the model does not take as an arm of its CQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ArmFault {
    /// The doorbell names another CQ.
    #[error("the cq doorbell names cq {cq_id}, not this cq ({ours})")]
    OtherCq {
        /// The CQ id written.
        cq_id: u32,
        /// This CQ's.
        ours: u32,
    },
    /// The shadow area's sequence number is the one taken last: no new arm.
    #[error("the shadow area's arm sequence number {seq} was taken already")]
    SameSeq {
        /// The sequence number.
        seq: u8,
    },
    /// A new sequence number with neither arm bit.
    #[error("the shadow area's arm word {word:#x} sets neither ARM_NEXT nor ARM_NEXT_SE")]
    NoArmBits {
        /// The word.
        word: u64,
    },
}

impl IrdmaModel {
    /// Takes the write the CQ doorbell holds now, as the device takes a doorbell: the arm
    /// the shadow area's arm word asks for, and how many slots lie past the consumer head.
    ///
    /// # Errors
    ///
    /// [`ArmFault`] for a doorbell the device would not take as a new arm of this CQ.
    pub fn take_arm(&mut self) -> Result<ShadowArm, ArmFault> {
        let mut db = [0u8; 4];
        // Inside the page the model allocated.
        let _ = self.db_mem.read_bytes(DB_CQ_OFFSET, &mut db);
        let cq_id = u32::from_le_bytes(db);
        if cq_id != self.cfg.cq_id {
            return Err(ArmFault::OtherCq { cq_id, ours: self.cfg.cq_id });
        }
        let word = self.shadow_arm_word();
        let seq = arm::seq(word);
        if seq == self.arm_seq {
            return Err(ArmFault::SameSeq { seq });
        }
        self.arm_seq = seq;
        if word & (ARM_NEXT | ARM_NEXT_SE) == 0 {
            return Err(ArmFault::NoArmBits { word });
        }
        Ok(ShadowArm { word, past: self.used_slots() })
    }

    /// The shadow area's arm word (byte 32) as it is now.
    pub fn shadow_arm_word(&self) -> u64 {
        let mut w = [0u8; 8];
        // Inside the shadow area the model allocated.
        let _ = self.shadow_mem.read_bytes(self.shadow_off + ARM_OFFSET, &mut w);
        u64::from_le_bytes(w)
    }

    /// The CQ doorbell's 4 bytes as they are now.
    pub fn doorbell_bytes(&self) -> [u8; 4] {
        let mut db = [0u8; 4];
        let _ = self.db_mem.read_bytes(DB_CQ_OFFSET, &mut db);
        db
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ModelConfig, ModelCqe};
    use crate::registry::QpRegistry;
    use crate::status::Compat;
    use dvcq_uapi::irdma::HwRev;

    /// The poller's requests reach the model as the provider makes them: the word at
    /// shadow + 32 and the CQ id in the doorbell page; skipped requests never do.
    #[test]
    fn the_model_takes_each_arm_the_poller_rang_and_nothing_else() {
        let mut m = IrdmaModel::new(ModelConfig::new(HwRev::Gen2, 8)).unwrap();
        let mut cq = m.poller(QpRegistry::new(HwRev::Gen2), Compat::Current).unwrap();
        m.push(&ModelCqe::send(1, 1, 0, 3)).unwrap();
        let w = cq.arm(true).unwrap().expect("not armed: the doorbell rings");
        assert_eq!(w, 1 << 16 | ARM_NEXT_SE);
        assert_eq!(m.doorbell_bytes(), 3u32.to_le_bytes());
        let a = m.take_arm().unwrap();
        assert_eq!((a.seq(), a.solicited(), a.past), (1, true, 1));
        assert_eq!(m.take_arm(), Err(ArmFault::SameSeq { seq: 1 }), "one doorbell, one arm");
        let w = cq.arm(false).unwrap().expect("upgraded to next");
        assert_eq!(w, 2 << 16 | ARM_NEXT | ARM_NEXT_SE);
        let a = m.take_arm().unwrap();
        assert_eq!((a.seq(), a.solicited()), (2, false));
        assert_eq!(cq.arm(true).unwrap(), None, "never narrowed");
        assert_eq!(m.shadow_arm_word(), w, "the skipped request wrote nothing");
        assert_eq!(cq.event_received(), Some(3 << 16 | ARM_NEXT | ARM_NEXT_SE), "the skipped request re-arms for any");
        assert_eq!(m.take_arm().unwrap().seq(), 3);
        assert_eq!(cq.event_received(), None);
        assert!(!cq.is_armed());
    }

    #[test]
    fn a_doorbell_of_another_cq_or_without_arm_bits_is_refused() {
        let mut m = IrdmaModel::new(ModelConfig::new(HwRev::Gen2, 8)).unwrap();
        let db = m.db_mem.doorbell_register(DB_CQ_OFFSET).unwrap();
        db.ring32_le(9);
        assert_eq!(m.take_arm(), Err(ArmFault::OtherCq { cq_id: 9, ours: 3 }));
        m.shadow_mem.write_bytes(m.shadow_off + ARM_OFFSET, &(1u64 << 16).to_le_bytes()).unwrap();
        db.ring32_le(3);
        assert_eq!(m.take_arm(), Err(ArmFault::NoArmBits { word: 1 << 16 }));
    }

    #[test]
    fn a_poller_opened_without_the_doorbell_cannot_arm() {
        let m = IrdmaModel::new(ModelConfig::new(HwRev::Gen2, 8)).unwrap();
        let ring = match &m.ring {
            crate::ring::SlotRing::Slots32(r) => crate::ring::SlotRing::Slots32(r.alias()),
            crate::ring::SlotRing::Slots64(r) => crate::ring::SlotRing::Slots64(r.alias()),
        };
        let shadow = m.shadow_mem.doorbell(0).unwrap();
        let cfg = crate::cq::CqConfig { hw_rev: HwRev::Gen2, compat: Compat::Current, cq_id: 3, ci: 0 };
        let mut cq = crate::IrdmaCq::new(ring, shadow, QpRegistry::new(HwRev::Gen2), cfg).unwrap();
        let e = cq.arm(false).unwrap_err();
        assert_eq!(e, crate::CqError::NoArmDoorbell { cq_id: 3 });
        assert_eq!(cq.event_received(), None);
    }
}
