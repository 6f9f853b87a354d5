//! A verbs work-completion record (`struct ibv_wc`, laid out as the kernel's
//! `struct ib_uverbs_wc`, [`UverbsWc`]) as a [`Completion`]: the one place that decides what
//! numbers outside libibverbs' enums become, for every backend that reads such records (the
//! rxe ring's, and rdma-core's `ibv_poll_cq` output).
//!
//! # Numbers outside libibverbs' enums
//!
//! [`WcStatus`] and [`WcOpcode`] hold only the numbers libibverbs defines, so:
//!
//! - an unknown status makes the record a fault item ([`FaultKind::BadField`], the value
//!   being the status): nothing about such a record can be trusted;
//! - an unknown opcode on a successful record makes it a fault item
//!   ([`FaultKind::BadOpcode`], the value being the opcode): its fields cannot be read
//!   without knowing what it completes;
//! - an unknown opcode on an error record keeps the completion, with `opcode`
//!   [`WcOpcode::Send`]: verbs leave the opcode of an error completion undefined, and the
//!   record's `wr_id`, status and `vendor_err` are what the application needs to recover
//!   the work request (rdma_rxe's `wr_to_wc_opcode` answers 0xff for a work-request opcode
//!   it does not know, so this can come from the kernel itself).
//!
//! `wc_flags` keeps every bit the record holds, known or not, as rdma-core's `memcpy` does.

use crate::completion::{Completion, WcFlags, WcOpcode, WcStatus};
use crate::fault::{CqeFault, FaultKind};
pub use dvcq_uapi::rxe::wc::UverbsWc;

impl Completion {
    /// The completion for record `wc` found at `position` (the backend's running count,
    /// named by a fault item). Fields a verbs record has no source for (`wqe_index`, the raw
    /// Ethernet extras, the timestamp) are zero.
    // Not API: the conversion of the rxe backend (dvcq-rxe-dv `record.rs`) and of the generic
    // backend's `ibv_poll_cq` output (dvcq `src/sys/cq.rs`); public only because they are
    // other crates.
    #[doc(hidden)]
    #[inline(always)]
    pub fn from_uverbs_wc(wc: &UverbsWc, position: u32) -> Completion {
        let (status, opcode) = match (WcStatus::from_u32(wc.status), WcOpcode::from_u32(wc.opcode)) {
            (Some(s), Some(op)) => (s, op),
            (Some(s), None) if s != WcStatus::Success => (s, WcOpcode::Send),
            (Some(_), None) => return wc_fault(FaultKind::BadOpcode, position, wc.opcode),
            (None, _) => return wc_fault(FaultKind::BadField, position, wc.status),
        };
        Completion {
            wr_id: wc.wr_id,
            byte_len: wc.byte_len,
            imm_data: wc.ex,
            qp_num: wc.qp_num,
            wc_flags: WcFlags::from_bits_retain(wc.wc_flags),
            status,
            opcode,
            fault_kind: FaultKind::None,
            sl: wc.sl,
            wqe_index: 0,
            pkey_index: wc.pkey_index,
            src_qp: wc.src_qp,
            vendor_err: wc.vendor_err,
            slid: wc.slid,
            dlid_path_bits: wc.dlid_path_bits,
            ..Completion::default()
        }
    }
}

#[cold]
fn wc_fault(kind: FaultKind, position: u32, value: u32) -> Completion {
    Completion::from_fault(CqeFault { kind, position, value })
}
