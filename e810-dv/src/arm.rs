//! Arming an irdma CQ: the shadow area's arm word (byte 32), the CQ doorbell, and the
//! provider's bookkeeping of what is armed, as rdma-core's irdma provider keeps it
//! (`providers/irdma/uverbs.c` `irdma_uarm_cq`, `irdma_arm_cq`, `irdma_cq_event`; `uk.c`
//! `irdma_uk_cq_request_notification`; the same from v44 to v65).
//!
//! A request rebuilds the arm word at shadow-area byte 32 from the one there: sequence
//! number + 1 (2 bits), `SW_CQ_SELECT` kept, `ARM_NEXT_SE` always set, `ARM_NEXT` set only
//! for "any completion"; stores it (64-bit, little-endian); then, after a barrier that
//! makes the word visible first, writes the CQ id (32-bit) to the context's doorbell page
//! + 0x40. The device takes a doorbell whose sequence number changed as a new arm.
//!
//! The bookkeeping decides when a request reaches the device: a CQ not armed is armed as
//! asked; an armed CQ asked for "any completion" is armed again for it (a solicited arm is
//! upgraded to "next"); an armed CQ asked for "solicited" is left as it is (never
//! narrowed) and remembers the request, which the next event turns into an arm for "any
//! completion".

use dvcq_provider::{DoorbellRegister, DoorbellWord};
use dvcq_uapi::irdma::shadow::arm;
use std::sync::atomic::Ordering;

/// A CQ's arm doorbell: the shadow area's arm word (byte 32) and the CQ doorbell register
/// (the context's doorbell page + `IRDMA_DB_CQ_OFFSET`, 0x40).
///
/// On a CQ rdma-core created, both come from the provider's `struct irdma_cq_uk`:
/// `shadow_area` + 32 and `cqe_alloc_db` (the doorbell page `mmap`ed from the uverbs fd,
/// device memory: a [`DoorbellRegister::mmio`]), with its `cq_id`; the poller must then be
/// the only one to arm the CQ (never `ibv_req_notify_cq` beside it, whose bookkeeping would
/// not see dvcq's arms).
#[derive(Debug)]
pub struct ArmDoorbell {
    shadow_arm: DoorbellWord,
    db: DoorbellRegister,
}

impl ArmDoorbell {
    /// The arm doorbell whose arm word is `shadow_arm` (shadow area + 32) and whose CQ
    /// doorbell is `db`.
    ///
    /// # Errors
    ///
    /// [`dvcq_provider::Error::Misaligned`] unless the arm word is 8-byte aligned.
    pub fn new(shadow_arm: DoorbellWord, db: DoorbellRegister) -> Result<Self, dvcq_provider::Error> {
        shadow_arm.load_le64(Ordering::Relaxed)?;
        Ok(Self { shadow_arm, db })
    }

    /// Whether the doorbell register is device memory (false: a model's page).
    pub fn is_mmio(&self) -> bool {
        self.db.is_mmio()
    }

    /// `irdma_uk_cq_request_notification` for CQ `cq_id`: returns the arm word written.
    pub(crate) fn request(&self, cq_id: u32, any_completion: bool) -> u64 {
        // The word was checked 8-aligned in `new`: neither access can fail. Only this CQ's
        // consumer writes it; the device reads it.
        let old = self.shadow_arm.load_le64(Ordering::Relaxed).unwrap_or(0);
        let word = arm::request(old, any_completion);
        let _ = self.shadow_arm.store_le64(word, Ordering::Release);
        // `ring32_le` fences first (udma_to_device_barrier: the word before the doorbell).
        self.db.ring32_le(cq_id);
        word
    }
}

/// rdma-core's arm bookkeeping (`struct irdma_ucq`'s `is_armed` and `skip_arm`;
/// `irdma_arm_cq` sets `arm_sol` for every arm, so it never changes a decision).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ArmBook {
    pub(crate) is_armed: bool,
    pub(crate) skip_arm: bool,
}

/// What the bookkeeping makes of a request or an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Ring the doorbell, for any completion or (false) solicited only.
    Ring { any_completion: bool },
    /// Leave the device alone.
    Skip,
}

impl ArmBook {
    /// `irdma_uarm_cq(solicited)`.
    pub(crate) fn request(&mut self, solicited: bool) -> Decision {
        if self.is_armed && solicited {
            self.skip_arm = true;
            return Decision::Skip;
        }
        self.armed();
        Decision::Ring { any_completion: !solicited }
    }

    /// `irdma_cq_event`: an event was received for the CQ.
    pub(crate) fn event(&mut self) -> Decision {
        if self.skip_arm {
            self.armed();
            return Decision::Ring { any_completion: true };
        }
        self.is_armed = false;
        Decision::Skip
    }

    /// `irdma_arm_cq`'s bookkeeping.
    fn armed(&mut self) {
        self.is_armed = true;
        self.skip_arm = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dvcq_provider::DmaBuffer;
    use dvcq_uapi::irdma::shadow::{ARM_NEXT, ARM_NEXT_SE};
    use std::sync::Arc;

    #[test]
    fn the_bookkeeping_upgrades_and_never_narrows() {
        let mut b = ArmBook::default();
        assert_eq!(b.request(true), Decision::Ring { any_completion: false }, "not armed: armed as asked");
        assert_eq!(b.request(false), Decision::Ring { any_completion: true }, "solicited upgraded to next");
        assert_eq!(b.request(true), Decision::Skip, "next is never narrowed");
        assert!(b.skip_arm);
        assert_eq!(b.event(), Decision::Ring { any_completion: true }, "the skipped request re-arms for any");
        assert_eq!(b, ArmBook { is_armed: true, skip_arm: false });
        assert_eq!(b.event(), Decision::Skip);
        assert_eq!(b, ArmBook::default(), "an event disarms");
        assert_eq!(b.request(true), Decision::Ring { any_completion: false });
    }

    /// Byte for byte: the word at shadow + 32 (little-endian) and the 32-bit CQ id at the
    /// doorbell page + 0x40.
    #[test]
    fn a_request_rebuilds_the_shadow_word_then_writes_the_cq_id() {
        let shadow = Arc::new(DmaBuffer::new(64).unwrap());
        let page = Arc::new(DmaBuffer::new(4096).unwrap());
        // SW_CQ_SELECT 5 and sequence number 3 from earlier use.
        shadow.write_bytes(32, &(5u64 | 3 << 16).to_le_bytes()).unwrap();
        let d = ArmDoorbell::new(shadow.doorbell(32).unwrap(), page.doorbell_register(0x40).unwrap()).unwrap();
        let w = d.request(0x0004_0003, true);
        assert_eq!(w, 5 | ARM_NEXT | ARM_NEXT_SE, "sequence 3 + 1 wraps to 0");
        let mut got = [0u8; 8];
        shadow.read_bytes(32, &mut got).unwrap();
        assert_eq!(got, [0x05, 0xc0, 0, 0, 0, 0, 0, 0]);
        page.read_bytes(0x40, &mut got).unwrap();
        assert_eq!(got, [0x03, 0, 0x04, 0, 0, 0, 0, 0]);
        let w = d.request(0x0004_0003, false);
        assert_eq!(w, 5 | 1 << 16 | ARM_NEXT_SE);
        shadow.read_bytes(32, &mut got).unwrap();
        assert_eq!(got, [0x05, 0x80, 0x01, 0, 0, 0, 0, 0]);
        assert!(ArmDoorbell::new(shadow.doorbell(36).unwrap(), page.doorbell_register(0x40).unwrap()).is_err());
    }
}
