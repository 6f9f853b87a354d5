//! The device side of arming an mlx5 CQ: what the model takes from a write to the UAR's CQ
//! doorbell (rdma-core `mlx5_arm_cq`, the kernel's `mlx5_cq_arm`), and the doorbell
//! record's arm word beside it.
//!
//! A write to the UAR is an event for the device; the model is told of it by its owner
//! (after the poller's [`crate::Mlx5Cq::arm`] rang), and reads the 8 bytes the write left
//! in its UAR page, as the device receives them: BE32 arm word, BE32 CQ number. The record's
//! arm word is read too: rdma-core writes it first, with a store fence before the UAR write,
//! so at that point it must hold the same word (the device may read it back for recovery);
//! a difference is reported, and the UAR's word is the one that counts.

use super::Mlx5Model;
use dvcq_uapi::mlx5::doorbell::{
    arm_ci, arm_cmd, arm_sn, uar_fields, ARM_DB, CI_MASK, CMD_REQ_NOT, CMD_REQ_NOT_SOL, UAR_CQ_DOORBELL,
};

/// An arm the model took from its UAR's CQ doorbell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UarArm {
    /// The arm word of the write: `sn << 28 | cmd | ci`.
    pub word: u32,
    /// The CQ number of the write.
    pub cqn: u32,
    /// The doorbell record's arm word when the write was taken.
    pub dbrec_word: u32,
    /// CQEs written at or past the armed consumer index (24-bit counter arithmetic): the
    /// ones that fire the arm at once if they qualify.
    pub past: u32,
}

impl UarArm {
    /// The sequence number, as the device compares it (2 bits).
    pub fn sn(&self) -> u8 {
        arm_sn(self.word) & 3
    }

    /// `MLX5_CQ_DB_REQ_NOT_SOL`: only a solicited or error completion fires it.
    pub fn solicited(&self) -> bool {
        arm_cmd(self.word) == CMD_REQ_NOT_SOL
    }

    /// The consumer index the arm was made at (24 bits).
    pub fn ci(&self) -> u32 {
        arm_ci(self.word)
    }

    /// Whether the doorbell record held the same arm word (rdma-core's order: record,
    /// fence, UAR).
    pub fn record_matches(&self) -> bool {
        self.dbrec_word == self.word
    }
}

/// A UAR write the model does not take as an arm of its CQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ArmFault {
    /// The write names another CQ.
    #[error("the uar cq doorbell names cq {cqn:#x}, not this cq ({ours:#x})")]
    OtherCq {
        /// The CQ number written.
        cqn: u32,
        /// This CQ's.
        ours: u32,
    },
    /// The command field is neither REQ_NOT nor REQ_NOT_SOL.
    #[error("the uar cq doorbell's command {cmd:#x} is neither request-notify nor request-notify-solicited")]
    UnknownCmd {
        /// The command field, in place (bits 27:24).
        cmd: u32,
    },
}

impl Mlx5Model {
    /// Takes the write the UAR's CQ doorbell holds now, as the device takes a doorbell:
    /// the arm of this CQ it requests, with the doorbell record's arm word and how many
    /// CQEs lie past the armed consumer index.
    ///
    /// # Errors
    ///
    /// [`ArmFault`] for a write the device would not take as an arm of this CQ.
    pub fn take_arm(&self) -> Result<UarArm, ArmFault> {
        let mut bytes = [0u8; 8];
        // Both reads are inside the pages the model allocated (4 KiB each).
        let _ = self.uar_mem.read_bytes(UAR_CQ_DOORBELL, &mut bytes);
        let (word, cqn) = uar_fields(bytes);
        if cqn != self.cfg.cqn {
            return Err(ArmFault::OtherCq { cqn, ours: self.cfg.cqn });
        }
        let cmd = arm_cmd(word);
        if cmd != CMD_REQ_NOT && cmd != CMD_REQ_NOT_SOL {
            return Err(ArmFault::UnknownCmd { cmd });
        }
        let mut rec = [0u8; 4];
        let _ = self.dbrec_mem.read_bytes(ARM_DB * 4, &mut rec);
        let past = self.pi.wrapping_sub(arm_ci(word)) & CI_MASK;
        Ok(UarArm { word, cqn, dbrec_word: u32::from_be_bytes(rec), past })
    }

    /// The UAR CQ doorbell's 8 bytes and the doorbell record's 8 bytes, as they are now.
    pub fn doorbell_bytes(&self) -> ([u8; 8], [u8; 8]) {
        let (mut uar, mut rec) = ([0u8; 8], [0u8; 8]);
        let _ = self.uar_mem.read_bytes(UAR_CQ_DOORBELL, &mut uar);
        let _ = self.dbrec_mem.read_bytes(0, &mut rec);
        (uar, rec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelConfig;
    use crate::registry::Registry;
    use crate::CqConfig;

    /// A poller of the model rings its doorbells; the model reads exactly what rdma-core's
    /// `mlx5_arm_cq` would have written for that sn, command, ci and cqn.
    #[test]
    fn the_model_takes_the_arm_a_poller_rang() {
        let mut m = Mlx5Model::new(ModelConfig::new(8)).unwrap();
        let mut cq = m.poller::<64>(Registry::new(), CqConfig::default()).unwrap();
        for _ in 0..3 {
            m.push(&crate::model::build::req(1, 0, 0x0a, 0)).unwrap();
        }
        assert_eq!(cq.poll(&mut [dvcq_provider::Completion::default(); 2]), 2);
        let r = cq.arm(false).unwrap();
        assert_eq!(r.word, 0x0000_0002);
        let (uar, rec) = m.doorbell_bytes();
        assert_eq!(uar, [0, 0, 0, 2, 0, 0, 4, 6]);
        assert_eq!(rec, [0, 0, 0, 2, 0, 0, 0, 2], "set_ci then the arm word, both big-endian");
        let a = m.take_arm().unwrap();
        assert_eq!((a.sn(), a.solicited(), a.ci(), a.cqn, a.past, a.record_matches()), (0, false, 2, 0x406, 1, true));
        // An event received: the next arm carries sn 1; solicited this time.
        cq.event_received();
        let r = cq.arm(true).unwrap();
        assert_eq!(r.uar, [0x11, 0, 0, 2, 0, 0, 4, 6]);
        let a = m.take_arm().unwrap();
        assert_eq!((a.sn(), a.solicited(), a.past), (1, true, 1));
        // Four events later the sequence number is back to 1 (two bits on the wire).
        (0..4).for_each(|_| cq.event_received());
        assert_eq!(cq.arm(false).unwrap().word >> 28, 1);
        assert_eq!(cq.arm_sn(), 5);
    }

    #[test]
    fn writes_the_device_would_not_take_as_an_arm_are_refused() {
        let m = Mlx5Model::new(ModelConfig::new(8)).unwrap();
        let reg = m.uar().doorbell_register(UAR_CQ_DOORBELL).unwrap();
        reg.ring64(dvcq_uapi::mlx5::doorbell::uar_doorbell(0, 0x407));
        assert_eq!(m.take_arm(), Err(ArmFault::OtherCq { cqn: 0x407, ours: 0x406 }));
        reg.ring64(dvcq_uapi::mlx5::doorbell::uar_doorbell(0x0200_0000, 0x406));
        assert_eq!(m.take_arm(), Err(ArmFault::UnknownCmd { cmd: 0x0200_0000 }));
        // A UAR write without the record written first: taken, the mismatch reported.
        reg.ring64(dvcq_uapi::mlx5::doorbell::uar_doorbell(0x1000_0000, 0x406));
        let a = m.take_arm().unwrap();
        assert!(!a.record_matches() && a.sn() == 1 && a.dbrec_word == 0);
    }

    #[test]
    fn a_poller_opened_without_the_doorbell_cannot_arm() {
        let m = Mlx5Model::new(ModelConfig::new(8)).unwrap();
        let ring = m.ring_mem.cq_ring::<64>(0, 8).unwrap();
        let dbrec = m.dbrec_mem.doorbell(0).unwrap();
        let mut cq = crate::Mlx5Cq::<64>::new(ring, dbrec, 0x406, 0, Registry::new(), CqConfig::default()).unwrap();
        let e = cq.arm(false).unwrap_err();
        assert_eq!(e, crate::Mlx5Error::NoArmDoorbell { cqn: 0x406 });
        assert!(e.to_string().contains("without its arm doorbell"), "{e}");
    }
}
