//! A kernel work-completion record (`struct ib_uverbs_wc`) as a [`Completion`]: what
//! rdma-core's `rxe_poll_cq` gives the application when it `memcpy`s the record into an
//! `ibv_wc`. The conversion, and what numbers outside libibverbs' enums become, is
//! [`Completion::from_uverbs_wc`], shared with the generic backend.

use dvcq_provider::{Completion, CqeFault, FaultKind};
use dvcq_uapi::rxe::wc::UverbsWc;

/// The completion for record `wc` found at ring position `position` (the running consumer
/// counter).
#[inline(always)]
pub(crate) fn completion(wc: &UverbsWc, position: u32) -> Completion {
    Completion::from_uverbs_wc(wc, position)
}

/// A fault item for the record at `position`.
#[cold]
pub(crate) fn fault(kind: FaultKind, position: u32, value: u32) -> Completion {
    Completion::from_fault(CqeFault { kind, position, value })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dvcq_provider::{WcFlags, WcOpcode, WcStatus};

    fn recv() -> UverbsWc {
        UverbsWc {
            wr_id: 0x1122_3344_5566_7788,
            status: 0,
            opcode: 129,
            vendor_err: 0,
            byte_len: 4096,
            ex: 0x0403_0201,
            qp_num: 0x11,
            src_qp: 0x12,
            wc_flags: 0x3,
            pkey_index: 7,
            slid: 0xbeef,
            sl: 5,
            dlid_path_bits: 0x7f,
            port_num: 1,
            reserved: 0xaa,
        }
    }

    /// Every `ibv_wc` field comes from its own record field, unchanged.
    #[test]
    fn every_ibv_wc_field_is_copied() {
        let c = completion(&recv(), 9);
        assert_eq!((c.wr_id, c.byte_len, c.imm_data, c.qp_num), (0x1122_3344_5566_7788, 4096, 0x0403_0201, 0x11));
        assert_eq!(
            (c.status, c.opcode, c.wc_flags),
            (WcStatus::Success, WcOpcode::RecvRdmaWithImm, WcFlags::GRH | WcFlags::WITH_IMM)
        );
        assert_eq!((c.src_qp, c.pkey_index, c.slid, c.sl, c.dlid_path_bits), (0x12, 7, 0xbeef, 5, 0x7f));
        assert_eq!((c.vendor_err, c.wqe_index, c.fault()), (0, 0, None));
    }

    #[test]
    fn unknown_numbers_follow_the_documented_choice() {
        // Unknown status: a fault naming it, whatever the opcode.
        let c = completion(&UverbsWc { status: 24, ..recv() }, 3);
        assert_eq!(c.fault(), Some(CqeFault { kind: FaultKind::BadField, position: 3, value: 24 }));
        assert_eq!((c.status, c.wr_id), (WcStatus::GeneralErr, 3));
        // Unknown opcode on success: a fault naming the opcode.
        let c = completion(&UverbsWc { opcode: 10, ..recv() }, 4);
        assert_eq!(c.fault(), Some(CqeFault { kind: FaultKind::BadOpcode, position: 4, value: 10 }));
        // Unknown opcode on an error: the completion, wr_id and vendor_err kept.
        let c = completion(&UverbsWc { status: 5, opcode: 0xff, vendor_err: 9, ..recv() }, 5);
        assert_eq!(
            (c.status, c.opcode, c.wr_id, c.vendor_err),
            (WcStatus::WrFlushErr, WcOpcode::Send, 0x1122_3344_5566_7788, 9)
        );
        assert_eq!(c.fault(), None);
        // Unknown flag bits are kept.
        let c = completion(&UverbsWc { wc_flags: 0x8000_0002, ..recv() }, 6);
        assert_eq!(c.wc_flags.bits(), 0x8000_0002);
    }
}
